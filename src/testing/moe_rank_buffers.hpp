// The per-rank buffers both expert-parallel MoE bench layers hold (the separate-kernel baseline MoeBaseline
// and the fused bench layer MoeFused) and the host code around them: allocation, uploads, the seeded random
// fill, the NaN poison of the output and read-backs. One copy, so both layers size, fill and read them the
// same way (and hold the same values for the same seed).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "moe_device_alloc.hpp"
#include "xstage/moe/moe_dims.hpp"
#include "xstage/moe/routing.hpp"

namespace xstage::moe {

struct MoeRankBuffers {
  // inputs and output, bf16 bits
  std::uint16_t* x = nullptr;   // [tokens][hidden]
  std::uint16_t* w1 = nullptr;  // [E/N][2·h_inter][hidden]
  std::uint16_t* w2 = nullptr;  // [E/N][hidden][h_inter]
  std::uint16_t* y = nullptr;   // [tokens][hidden]
  // routing
  int* ids = nullptr;        // [tokens·top_k]
  float* weights = nullptr;  // [tokens·top_k]
  // dispatch plan (launch_dispatch_plan)
  int *expert_rows = nullptr, *expert_offset = nullptr;           // [experts]
  int *send_row_of_slot = nullptr, *token_of_send_row = nullptr;  // [tokens·top_k]
};

// On the current device, zero-filled (a routing never set is then a valid one).
void alloc_rank_buffers(const MoeDims& d, MoeRankBuffers& b);
// Never throws (destructors): frees on the current device, ignoring errors.
void free_rank_buffers(MoeRankBuffers& b) noexcept;

// Host values (bf16 values held as float are rounded); each returns once the copy is complete.
// `device` is the buffers' device. Sizes and shapes are checked; xstage::InputError names the field.
void upload_tokens(const MoeDims& d, int device, const MoeRankBuffers& b, const std::vector<float>& x);
void upload_weights(const MoeDims& d, int device, const MoeRankBuffers& b, const float* w1, const float* w2);
void upload_routing(const MoeDims& d, int device, int rank, const MoeRankBuffers& b, const Routing& r);
// x uniform in ±1, weights in ±weight_scale, seeded per rank (x) and per global expert (weights), so an
// expert's weights do not depend on the rank count. Synchronises `stream`.
void fill_random_inputs(const MoeDims& d, int device, int rank, const MoeRankBuffers& b, std::uint64_t seed,
                        float weight_scale, cudaStream_t stream);
// y = NaN (0xffff in every bf16), so an element a layer fails to write shows. Asynchronous on the
// current device; the caller synchronises.
void poison_output_async(const MoeDims& d, const MoeRankBuffers& b);

std::vector<float> download_output(const MoeDims& d, int device, const MoeRankBuffers& b);
std::vector<float> download_tokens(const MoeDims& d, int device, const MoeRankBuffers& b);
// Local expert l's weights: w1 [2·h_inter][hidden], w2 [hidden][h_inter].
void download_expert_weights(const MoeDims& d, int device, const MoeRankBuffers& b, int local_expert,
                             std::vector<float>& w1, std::vector<float>& w2);

}  // namespace xstage::moe
