// TMA bulk stores of finished attention output rows (sm_90 copy engine, shared::cta -> global), shared by
// the local epilogue (AttnEpilogueLocal) and the fused All-to-All epilogue (AttnEpilogueA2A, kBulk).
// In the wgmma m64 accumulator layout consumer warp w holds tile rows [16w, 16w + 16), so each warp stages
// only its own 16 rows in shared memory and lanes 0..15 each issue one bulk copy of a row: no barrier
// wider than the warp. Before a warp rewrites its staging rows it waits until its previous copies have
// read them (gpu::bulk_wait_all_read); their global writes may still be in flight.
#pragma once

#include <cstdint>

#include <cuda_bf16.h>
#include <cute/tensor.hpp>

#include "xstage/gpu/ptx_bulk.cuh"
#include "xstage/gpu/ptx_memory.cuh"

namespace xstage::attn {

// Rows of the tile per consumer warp in the wgmma m64 accumulator layout.
inline constexpr int kBulkRowsPerWarp = 16;

// Stages this warp's 16 rows of the output fragment as bf16 (adjacent fp32 columns rounded as one
// bf16x2, the rounding of the direct-store epilogues) into `stage` (kBlockM rows of kPitch elements),
// after the warp's previous copies have read it, makes them visible to the copy engine, then calls
// issue(r) on lanes 0..15 with the tile row r = 16w + lane whose copy that lane issues.
template <class TiledMmaPV, int kBlockM, int kHeadDim, int kPitch, class TensorO, class Issue>
__device__ __forceinline__ void bulk_stage_warp_rows(__nv_bfloat16* stage, TensorO const& acc_o, int mma_thread_idx,
                                                     Issue&& issue) {
  using namespace cute;
  TiledMmaPV mma_pv;
  auto thr_pv = mma_pv.get_thread_slice(mma_thread_idx);
  Tensor sO = make_tensor(make_smem_ptr(stage), make_layout(Shape<Int<kBlockM>, Int<kHeadDim>>{}, Stride<Int<kPitch>, _1>{}));
  Tensor tOsO = thr_pv.partition_C(sO);
  static_assert(decltype(size(tOsO))::value == decltype(size(acc_o))::value);
  const int lane = mma_thread_idx % 32;
  const int warp_row0 = (mma_thread_idx / 32) * kBulkRowsPerWarp;  // this warp's rows of the tile
  gpu::bulk_wait_all_read();  // a lane that issued nothing has no pending group and passes at once
  __syncwarp();
  CUTE_UNROLL
  for (int i = 0; i < size(acc_o); i += 2) {
    *reinterpret_cast<__nv_bfloat162*>(&tOsO(i)) = __floats2bfloat162_rn(acc_o(i), acc_o(i + 1));
  }
  gpu::fence_proxy_async_shared_cta();  // generic-proxy shared-memory writes -> the copy engine's reads
  __syncwarp();
  if (lane < kBulkRowsPerWarp) issue(warp_row0 + lane);
}

}  // namespace xstage::attn
