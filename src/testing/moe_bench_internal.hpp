// Pieces of `moe bench`'s driver (xstage/testing/moe_bench.hpp) shared by its files: the layer and its
// routing, the reference check, the result's JSON blocks, the fused kernel's traces.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "moe_baseline.hpp"
#include "moe_fused_kernel.hpp"
#include "moe_fused_layer.hpp"
#include "xstage/model/workloads.hpp"
#include "xstage/moe/routing.hpp"
#include "xstage/testing/moe_bench.hpp"
#include "xstage/testing/moe_reference.hpp"

namespace xstage::testing::moe_bench {

using namespace xstage::moe;

std::string known_shapes();
// One routing per rank: generated (seeded per rank) or from a trace file holding either ranks·T tokens
// (rank r takes tokens [r·T, (r+1)·T)) or T tokens (every rank replays it).
std::vector<Routing> make_routing(const MoeBenchOptions& o, const MoeDims& d, std::uint64_t seed);
MoePrecision parse_precision(const std::string& p);

struct CheckResult {
  bool passed = false;
  double rel_l2 = 0;
  long long non_finite = 0;
  int tokens_checked = 0;
  int experts_fetched = 0;
  // FP8: tokens outside their rounding allowance (check_within_flips) and the worst error / allowance.
  int fp8_tokens_over = 0;
  double fp8_worst_ratio = 0;
};

// The reference rule of each layer: its precision and, for FP8, the Linear-2 input's scale group.
inline MoePrecision precision_of(const MoeFused& l) { return l.precision(); }
inline int l2_group_of(const MoeFused&) { return MoeFused::kFp8L2Group; }
inline MoePrecision precision_of(const MoeBaseline& l) { return l.precision(); }
inline int l2_group_of(const MoeBaseline&) { return kFp8GroupSize; }

// All outputs must be finite (they were poisoned with NaN); sampled tokens of every rank must match the
// CPU reference of the layer's precision. Each needed expert's weights come back from its GPU once and
// are prepared (FP8: quantized) once; `prepared`, when given, keeps them for the next layer checked with
// the same weights and precision (the layers of one bench are filled from one seed). Defined for
// MoeFused and MoeBaseline.
template <class Layer>
CheckResult check_against_reference(const Layer& layer, const std::vector<Routing>& routing, int per_rank,
                                    std::map<int, PreparedExpert>* prepared = nullptr);

// Rows each rank sends to other ranks (dispatch) = rows that come back (combine).
long long remote_rows(const std::vector<Routing>& routing, const MoeDims& d);
std::vector<long long> expert_load(const std::vector<Routing>& routing, int experts);
double dispatch_row_bytes(int hidden, MoePrecision p);
extern const char* const kNvlinkBytesFormula;
double layer_flops(const MoeDims& d);
void put_layer_json(nlohmann::json& j, const MoeBenchOptions& o, const model::MoeShape& shape, const MoeDims& d,
                    const std::vector<long long>& load);
nlohmann::json timing_json(const std::vector<double>& layer_ms, double flops, double nvlink_bytes);
nlohmann::json check_json(const CheckResult& c, std::uint64_t seed, MoePrecision p);

// The layer a bench run describes: the shape, the team's devices and the dimensions. Input errors are
// raised here, before any device is touched.
struct BenchLayer {
  const model::MoeShape* shape;
  std::vector<int> gpus;
  MoeDims d;
};
BenchLayer bench_layer(const MoeBenchOptions& o, const BenchHost& host);

// The traced tiles of every rank (MoeFusedHarness::last_trace, CTA by CTA), read once per run.
using RankTraces = std::vector<std::vector<MoeFusedTileTrace>>;
RankTraces read_traces(const MoeFused& fused, const MoeDims& d);
nlohmann::json trace_summary(const RankTraces& traces);
nlohmann::json activity_summary(const RankTraces& traces);
nlohmann::json timeline_json(const RankTraces& traces, int ctas);

MoeBenchResult run_bench_fused(const MoeBenchOptions& o, const BenchHost& host);

}  // namespace xstage::testing::moe_bench
