// Random inputs for attention tests and benchmarks, generated on the device.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

namespace xstage::attn {

// Fills n bf16 values with N(0, stddev^2) draws determined by (seed, index). Asynchronous on stream.
cudaError_t attn_fill_normal_bf16(void* dst, size_t n, uint64_t seed, float stddev, cudaStream_t stream);

}  // namespace xstage::attn
