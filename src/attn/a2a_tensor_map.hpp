// TMA tensor maps of the Ulysses output buffers, for the bulk-store epilogue's tiled stores: one map per
// owner over [local_rows, heads_total, head_dim] bf16 as this GPU reaches the owner's buffer (box
// head_dim x 1 head x 16 rows, no swizzle: one consumer warp's 16 staged rows, dense in shared memory).
#pragma once

#include <cuda_runtime_api.h>

namespace xstage::attn {

// Bytes of one tensor map (CUtensorMap) and its required alignment.
inline constexpr int kA2ATensorMapBytes = 128;
inline constexpr int kA2ATensorMapAlign = 128;
// Rows per tiled store: one consumer warp's accumulator rows.
inline constexpr int kA2ATensorBoxRows = 16;

// Encodes into `map` (kA2ATensorMapBytes, host memory) the map of a [rows, heads_total, head_dim] bf16
// buffer at `base` (16-byte aligned). Returns cudaErrorInvalidValue when the driver refuses.
cudaError_t a2a_encode_out_tensor_map(void* map, void* base, int rows, int heads_total, int head_dim);

}  // namespace xstage::attn
