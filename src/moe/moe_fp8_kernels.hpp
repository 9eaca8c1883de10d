// FP8 (e4m3) quantization kernels of the MoE layers (rules: moe_numerics.hpp; device side: moe_fp8.cuh).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace xstage::moe {

// Activations: x [rows][cols] bf16 -> q [rows][cols] e4m3, scales [rows][scale_pitch] float with one
// scale per `group` channels (group 64 or 128; cols a multiple of group; scale_pitch >= cols / group).
cudaError_t launch_quantize_rows_fp8(const std::uint16_t* x, long long rows, int cols, int group, std::uint8_t* q,
                                     float* scales, int scale_pitch, cudaStream_t stream);

// Weights: `matrices` row-major [rows][cols] bf16 matrices (rows, cols multiples of 128) -> q e4m3 and
// one scale per 128 x 128 block, scales [matrices][rows / 128][cols / 128].
cudaError_t launch_quantize_weight_blocks_fp8(const std::uint16_t* w, int matrices, int rows, int cols,
                                              std::uint8_t* q, float* scales, cudaStream_t stream);

}  // namespace xstage::moe
