#include "xstage/model/workloads.hpp"

#include <array>
#include <string_view>

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

// Public model configurations (config.json of each release).
constexpr std::array kMoe = {
    MoeShape{"deepseek-v4-flash", "DeepSeek-V4-Flash: hidden 4096, moe_intermediate 2048, 256 experts, top-6", 4096, 2048, 256, 6},
    MoeShape{"deepseek-v4-pro", "DeepSeek-V4-Pro: hidden 7168, moe_intermediate 3072, 384 experts, top-6", 7168, 3072, 384, 6},
    MoeShape{"deepseek-v3", "deepseek-ai/DeepSeek-V3 config.json: hidden_size 7168, moe_intermediate_size 2048, n_routed_experts 256, num_experts_per_tok 8", 7168, 2048, 256, 8},
    MoeShape{"qwen3-235b-a22b", "Qwen/Qwen3-235B-A22B config.json: hidden_size 4096, moe_intermediate_size 1536, num_experts 128, num_experts_per_tok 8", 4096, 1536, 128, 8},
    MoeShape{"mimo-v2-flash", "XiaomiMiMo/MiMo-V2-Flash config: hidden_size 4096, moe_intermediate_size 2048, n_routed_experts 256, num_experts_per_tok 8", 4096, 2048, 256, 8},
    MoeShape{"dit-moe-g2-16e2a", "DiT-MoE (Fei et al. 2024, arXiv 2407.11633) G/2-16E2A: hidden_size 1408, expert intermediate 4 x 1408, 16 experts, top-2 (feizc/DiT-MoE models.py)", 1408, 5632, 16, 2},
    MoeShape{"glm-4.5", "zai-org/GLM-4.5 config.json: hidden_size 5120, moe_intermediate_size 1536, n_routed_experts 160, num_experts_per_tok 8", 5120, 1536, 160, 8},
};
}  // namespace

std::span<const AttentionWorkload> builtin_attention_workloads() { return kAttention; }
std::span<const MoeShape> builtin_moe_shapes() { return kMoe; }

const MoeShape* find_moe_shape(std::string_view name) {
  for (const auto& s : kMoe)
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
