// Built-in workloads that `xstage plan` audits when given no shape: DiT attention (Ulysses) and MoE
// layer shapes from public model configurations.
#pragma once

#include <cstdint>
#include <span>

#include "xstage/model/audit.hpp"

namespace xstage::model {

struct AttentionWorkload {
  const char* name;
  const char* source;      // where the shape comes from
  int heads;               // attention heads of the model
  int head_dim;
  int sp_degree;           // Ulysses degree: heads per GPU = heads / sp_degree
  std::int64_t seq_len;    // full sequence M (tokens) that each GPU attends over after the first A2A
};

struct MoeShape {
  const char* name;
  const char* source;
  int hidden;
  int h_inter;             // expert intermediate size
  int experts;
  int top_k;
};

std::span<const AttentionWorkload> builtin_attention_workloads();
std::span<const MoeShape> builtin_moe_shapes();
const MoeShape* find_moe_shape(std::string_view name);  // nullptr when unknown

// Default σ (time per KV tile of the Q-loop): the paper's FlashAttention-4 measurement, 0.79 µs.
inline constexpr double kPaperSigmaS = 0.79e-6;

// MoE audit input for one shape with b_m × b_n tiles: Linear-1 tiles are b_m × b_n over depth
// `hidden` (2·h_inter columns: gate and up), Linear-2 tiles b_m × b_n over depth h_inter (hidden
// columns); each Linear-2 tile's Combine burst is b_m·b_n·out_bytes per producer.
MoeInput moe_input_for_shape(const MoeShape& shape, int producers, double sm_flop_per_s, int block_m, int block_n,
                             int out_bytes);

}  // namespace xstage::model
