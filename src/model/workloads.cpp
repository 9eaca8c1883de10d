#include "xstage/model/workloads.hpp"

#include <array>
#include <deque>
#include <string_view>
#include <vector>

#include "xstage/model/kernel_description.hpp"

namespace xstage::model {

namespace {
// HunyuanVideo 720p, 129 frames: 118,800 video tokens (14,850 per GPU at SP = 8); 24 heads × 128.
// Wan2.1-14B 720p, 81 frames: 75,600 tokens (9,450 per GPU at SP = 8); 40 heads × 128.
// The paper's Table 3 shape: 4 heads per GPU, M = 8K … 64K.
constexpr std::array kAttention = {
    AttentionWorkload{"paper-table3-8k", "X-Stage paper Table 3 (4 heads/GPU)", 32, 128, 8, 8192},
    AttentionWorkload{"paper-table3-64k", "X-Stage paper Table 3 (4 heads/GPU)", 32, 128, 8, 65536},
    AttentionWorkload{"hunyuanvideo-720p", "HunyuanVideo config: 24 heads x 128, 720p 129 frames", 24, 128, 8, 118800},
    AttentionWorkload{"wan2.1-14b-720p", "Wan2.1-14B config: 40 heads x 128, 720p 81 frames", 40, 128, 8, 75600},
};

}  // namespace

std::span<const AttentionWorkload> builtin_attention_workloads() { return kAttention; }
// The shapes are the descriptions of kernels/moe/builtin (kernel_description.hpp), read once.
std::span<const MoeShape> builtin_moe_shapes() {
  static const std::deque<MoeKernel> kernels = [] {
    std::deque<MoeKernel> v;
    for (const auto& name : builtin_kernel_names_in("builtin"))
      v.push_back(moe_kernel_from_json(*builtin_kernel_json(name), name));
    return v;
  }();
  static const std::vector<MoeShape> shapes = [] {
    std::vector<MoeShape> v;
    for (const auto& k : kernels)
      v.push_back({k.name.c_str(), k.source.c_str(), k.hidden, k.h_inter, k.experts, k.top_k});
    return v;
  }();
  return shapes;
}

const MoeShape* find_moe_shape(std::string_view name) {
  for (const auto& s : builtin_moe_shapes())
    if (name == s.name) return &s;
  return nullptr;
}

MoeInput moe_input_for_shape(const MoeShape& shape, int producers, double sm_flop_per_s, int block_m, int block_n,
                             int out_bytes) {
  MoeInput in;
  in.tile_bytes = static_cast<double>(block_m) * block_n * out_bytes;
  in.active_producers = producers;
  in.t_l1_mma_s = 2.0 * block_m * block_n * static_cast<double>(shape.hidden) / sm_flop_per_s;
  in.t_l2_mma_s = 2.0 * block_m * block_n * static_cast<double>(shape.h_inter) / sm_flop_per_s;
  in.n1 = 2.0 * shape.h_inter / block_n;  // per row block: gate and up columns
  in.n2 = static_cast<double>(shape.hidden) / block_n;
  in.block_n = block_n;
  in.sm_count = producers;
  in.h_inter = shape.h_inter;
  return in;
}

}  // namespace xstage::model
