// The bench layer MoeFused over the fused expert-parallel MoE kernel (src/moe; the product's API is
// xstage::moe::FusedMoe, include/xstage/moe/fused_moe.hpp), holding its own buffers, for the benches and
// the GPU tests. The kernel (Hopper; bf16 or FP8 e4m3 W8A8): one persistent kernel per GPU does Dispatch ->
// Linear-1 -> SwiGLU -> Linear-2 -> Combine with in-kernel communication (peer stores, release/acquire
// flags), in the tile order of the expert-wave or the interleaved scheduler (sched/moe_schedule.hpp);
// a small kernel after it waits for every rank and reduces each token's k rows. Single-process teams
// (one thread per GPU; buffers reached through CUDA peer pointers).
//
// Per run and rank: dispatch plan (launch_dispatch_plan, src/moe/moe_dispatch_plan.hpp) -> fused kernel ->
// completion kernel, all on the rank's stream (enqueue_moe_fused_run, the launch path the public FusedMoe
// shares); run() then waits for every rank. Same inputs, routing, roundings and output as MoeBaseline; FP8
// quantizes as the reference with l2_group = 128 does (weights once, when they are set).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "moe_fused_kernel.hpp"
#include "moe_fused_launch.hpp"
#include "xstage/moe/moe_dims.hpp"
#include "xstage/moe/moe_numerics.hpp"
#include "xstage/comm/team.hpp"
#include "xstage/moe/routing.hpp"

namespace xstage::testing {
class MoeFusedHarness;
}

namespace xstage::moe {

struct MoeFusedOptions {
  MoeFusedSchedule schedule = MoeFusedSchedule::kInterleaved;
  int lead_rows = 0;         // interleaved D; 0: model::moe_default_lead_rows for this grid (>= eq. 16's D_knee)
  int experts_per_wave = 0;  // wave; 0: sched::default_experts_per_wave (a quarter of the local experts)
  // Piggyback: measured equal or faster than kEpilogue on every shape tried (docs/moe_notes.md).
  MoeCombineIssue combine = MoeCombineIssue::kPiggyback;
};

class MoeFused {
 public:
  // Requires hidden and h_inter multiples of 128, at most kFusedMaxExperts experts and kFusedMaxRanks
  // ranks, a single-process team; throws xstage::InputError naming the field otherwise.
  MoeFused(comm::Team& team, const MoeDims& dims, const MoeFusedOptions& options = {},
           MoePrecision precision = MoePrecision::kBf16);
  ~MoeFused();
  MoeFused(const MoeFused&) = delete;
  MoeFused& operator=(const MoeFused&) = delete;

  const MoeDims& dims() const { return dims_; }
  MoePrecision precision() const { return precision_; }
  // FP8 activation group of the Linear-2 input (the reference's l2_group for this layer).
  static constexpr int kFp8L2Group = kFusedFp8L2Group;
  MoeFusedSchedule schedule() const { return options_.schedule; }
  int schedule_param() const;  // D or experts per wave, as launched
  void set_schedule(const MoeFusedOptions& options);
  int grid() const { return grid_; }

  void set_tokens(int rank, const std::vector<float>& x);  // [tokens][hidden]
  void set_weights(int rank, const float* w1, const float* w2);
  void set_routing(int rank, const Routing& r);
  void run(double timeout_s = 60.0);
  std::vector<double> last_ms() const;              // per team rank: plan + fused + completion kernels
  std::vector<long long> last_received_rows() const;
  std::vector<float> output(int rank) const;
  std::vector<float> tokens(int rank) const;

  void expert_weights(int global_expert, std::vector<float>& w1, std::vector<float>& w2) const;

 private:
  // Random fill, output poison, per-tile traces and GEMM-only timing are the testing library's
  // (src/testing/moe_layer_harness.hpp); they reach the state below (moe_fused_layer_state.hpp).
  friend class xstage::testing::MoeFusedHarness;
  struct RankState;
  struct Shared;
  void run_rank(int local_index, double timeout_s);
  MoeFusedArguments params_of(int local_index, double timeout_s) const;  // a normal run's parameters
  void wait_rank(int local_index, cudaEvent_t done, double timeout_s) const;  // throws on failure / timeout
  void quantize_weights(int local_index);  // FP8: the rank's e4m3 weights and block scales
  RankState& state_of_rank(int rank) const;

  comm::Team& team_;
  MoeDims dims_;
  MoeFusedOptions options_;
  MoePrecision precision_;
  MoeFusedSizes sizes_;
  long long capacity_rows_ = 0;
  int grid_ = 0;
  std::uint32_t epoch_ = 0;
  bool ran_ = false;  // run() has completed once (GEMM-only timing needs its operands)
  // Set by the harness's set_trace: the following runs record per-tile stamps into the ranks' trace
  // buffers; local_store_control_ sends the Combine stores to a local scratch buffer.
  bool trace_ = false, local_store_control_ = false;
  int trace_capacity_ = 0;
  std::unique_ptr<Shared> shared_;
  std::vector<std::unique_ptr<RankState>> ranks_;
};

}  // namespace xstage::moe
