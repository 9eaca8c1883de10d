// The separate-kernel expert-parallel MoE layer a user would run today (bf16), over a team of GPUs:
//   dispatch:  plan (count tokens per expert, offsets, row positions) -> gather rows -> NCCL exchange of
//              per-expert counts -> counts to the host -> NCCL grouped send/recv of token rows
//   linear-1:  cuBLAS grouped GEMM, one group per (source rank, local expert) block of received rows
//   swiglu:    elementwise kernel
//   linear-2:  cuBLAS grouped GEMM
//   combine:   NCCL grouped send/recv back to the token's rank, then a weighted top-k reduction
//              (deterministic: k rows summed in routing order, no atomics)
// Received rows stay in arrival order ([source rank][local expert][rows]) through every stage, so no
// permutation is needed: the GEMM groups point into that layout and the results go back in it.
// Expert e lives on team rank e / (E/N), as local expert e % (E/N).
//
// FP8 (MoePrecision::kFp8, W8A8 DeepSeek style, the CPU reference's rule with l2_group 128): the
// weights are quantized once (after set_weights or the testing library's random fill) to e4m3 with one
// scale per 128×128 block; each token row is quantized per 128 channels before the dispatch, which then
// carries the e4m3 rows and their scales (about half the bytes of bf16); Linear-1 and Linear-2 are cuBLASLt FP8 GEMMs
// (VEC128_32F scales for the activations, BLK128x128_32F for the weights, FP32 accumulation, bf16
// output), one cublasLtMatmul per (source rank, local expert) group; the SwiGLU kernel also quantizes
// its output per 128 channels. Combine and reduction are the bf16 path's.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "xstage/moe/moe_dims.hpp"
#include "xstage/moe/moe_numerics.hpp"
#include "xstage/comm/team.hpp"
#include "xstage/moe/routing.hpp"

namespace xstage::testing {
class MoeBaselineHarness;
}

namespace xstage::moe {

enum class GemmPath {
  kGrouped,  // cublasGemmGroupedBatchedEx (one call per linear layer)
  kLoop,     // one cublasGemmEx per group
};
const char* to_string(GemmPath p);

// Milliseconds of each stage on one rank (CUDA events on its stream), for one run.
struct MoeStageTimes {
  double dispatch_ms = 0, linear1_ms = 0, swiglu_ms = 0, linear2_ms = 0, combine_ms = 0, total_ms = 0;
};

class MoeBaseline {
 public:
  // Allocates every buffer for the worst case of any routing (all rows of all ranks to one rank).
  // Requires hidden and h_inter multiples of 8 (16-byte rows), of 128 for kFp8; throws
  // xstage::InputError otherwise. `gemm` applies to the bf16 path (FP8 always uses cuBLASLt).
  MoeBaseline(comm::Team& team, const MoeDims& dims, GemmPath gemm = GemmPath::kGrouped,
              MoePrecision precision = MoePrecision::kBf16);
  ~MoeBaseline();
  MoeBaseline(const MoeBaseline&) = delete;
  MoeBaseline& operator=(const MoeBaseline&) = delete;

  const MoeDims& dims() const { return dims_; }
  MoePrecision precision() const { return precision_; }
  // The GEMM path in use: kGrouped falls back to kLoop when cuBLAS refuses the grouped call.
  GemmPath gemm_path() const { return gemm_.load(); }

  // Host data for team rank `rank` (bf16 values held as float; rounded on upload).
  void set_tokens(int rank, const std::vector<float>& x);  // [tokens][hidden]
  // Weights of the rank's local experts: w1 [E/N][2·h_inter][hidden], w2 [E/N][hidden][h_inter].
  void set_weights(int rank, const float* w1, const float* w2);
  void set_routing(int rank, const Routing& r);
  // One forward pass on every local rank; returns when all are done (bounded waits: throws if a rank
  // makes no progress within timeout_s).
  void run(double timeout_s = 60.0);
  // Per-rank stage times of the last run (indexed by team rank).
  std::vector<MoeStageTimes> last_stage_times() const;
  // Rows each rank received in the last run.
  std::vector<long long> last_received_rows() const;

  std::vector<float> output(int rank) const;  // [tokens][hidden]
  std::vector<float> tokens(int rank) const;
  // One local expert's weights as float: w1 [2·h_inter][hidden], w2 [hidden][h_inter].
  void expert_weights(int global_expert, std::vector<float>& w1, std::vector<float>& w2) const;

 private:
  // Random fill and output poison are the testing library's (src/testing/moe_layer_harness.hpp); they
  // reach the state below (moe_baseline_state.hpp).
  friend class xstage::testing::MoeBaselineHarness;
  struct RankState;
  void run_rank(int local_index, double timeout_s);
  RankState& state_of_rank(int rank) const;
  void quantize_weights(RankState& s);  // FP8: the bf16 weights -> e4m3 and padded block scales
  void run_rank_fp8(RankState& s, double timeout_s);
  // Both precisions: the per-expert count exchange and the row plan it gives (rows to and from each
  // rank, their offsets, the GEMM groups), then the combine and the weighted top-k reduction.
  struct RowPlan;
  RowPlan exchange_counts(RankState& s, double timeout_s);
  void combine(RankState& s, const RowPlan& plan, double timeout_s);

  comm::Team& team_;
  MoeDims dims_;
  MoePrecision precision_;
  std::atomic<GemmPath> gemm_;  // ranks' threads may switch it to kLoop
  long long capacity_rows_ = 0;
  std::vector<std::unique_ptr<RankState>> ranks_;  // one per local rank
};

}  // namespace xstage::moe
