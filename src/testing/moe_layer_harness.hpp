// Bench and test facilities over the two expert-parallel MoE layers (the fused MoeFused and the
// separate-kernel MoeBaseline), kept out of the layers themselves: a seeded random fill (both layers get
// the same values for the same seed), the NaN poison of the output before a check, the fused kernel's
// per-tile traces and its GEMM-only timing. The kernels run exactly as in a normal run; only what the
// host prepares around them (inputs, poisoned outputs, trace buffers, launch parameters) is set here.
#pragma once

#include <cstdint>
#include <vector>

#include "moe_baseline.hpp"
#include "moe_fused_kernel.hpp"
#include "moe_fused_layer.hpp"

namespace xstage::testing {

class MoeFusedHarness {
 public:
  // x uniform in ±1, weights in ±weight_scale (seeded per rank and per global expert); FP8 weights are
  // quantized after. The same values as MoeBaselineHarness::fill_random with the same seed.
  static void fill_random(moe::MoeFused& layer, std::uint64_t seed, float weight_scale);
  // Output and combine rows set to NaN, so a slot the kernel fails to fill shows in the output.
  static void poison_output(moe::MoeFused& layer);
  // Instrumented builds (moe_fused_trace_built()): record per-tile stamps in the following runs; with
  // local_store_control the Combine stores go to a local scratch buffer instead of the token's rank (the
  // output is then wrong by design). Throws xstage::InputError in builds without instrumentation.
  static void set_trace(moe::MoeFused& layer, bool enabled, bool local_store_control);
  // Tiles of the last traced run of team rank `rank`, CTA by CTA in each CTA's order.
  static std::vector<moe::MoeFusedTileTrace> last_trace(const moe::MoeFused& layer, int rank);
  // GEMM phases alone (MoeFusedArguments::gemm_only; mode 1: Linear-1 + SwiGLU tiles, mode 2: Linear-2
  // tiles without the Combine stores) on the operands of the last run(), which must have happened: iters
  // launches back to back per rank (fused kernel + completion kernel each, no dispatch plan), CUDA events
  // around the fused kernel alone. Returns per team rank the median ms. Nothing is dispatched or
  // combined and the arrival bases stay where they were, so run() works afterwards as before.
  static std::vector<double> time_gemm_only(moe::MoeFused& layer, int mode, int iters, double timeout_s = 60.0);
};

class MoeBaselineHarness {
 public:
  static void fill_random(moe::MoeBaseline& layer, std::uint64_t seed, float weight_scale);
  static void poison_output(moe::MoeBaseline& layer);  // output set to NaN
};

inline void fill_random(moe::MoeFused& l, std::uint64_t seed, float scale) {
  MoeFusedHarness::fill_random(l, seed, scale);
}
inline void fill_random(moe::MoeBaseline& l, std::uint64_t seed, float scale) {
  MoeBaselineHarness::fill_random(l, seed, scale);
}
inline void poison_output(moe::MoeFused& l) { MoeFusedHarness::poison_output(l); }
inline void poison_output(moe::MoeBaseline& l) { MoeBaselineHarness::poison_output(l); }

}  // namespace xstage::testing
