// The public fused MoE API (include/xstage/moe/fused_moe.hpp) on caller-owned device buffers, against the
// CPU reference: fresh random inputs per call, the output poisoned (NaN) before each, several token
// counts up to max_tokens (one, odd, full), both schedules, both precisions (FP8 weights quantized on the
// device by the API's helper), repeated calls (epochs), calls alternating between two streams with no
// host wait in between, and the output bit-equal to the bench layer MoeFused's on the same inputs.
// Argument and configuration errors are reported before any launch, naming the field.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cstdio>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "gpu_test_support.hpp"
#include "moe_fused_launch.hpp"
#include "moe_fused_layer.hpp"
#include "moe_layer_harness.hpp"
#include "xstage/testing/moe_reference.hpp"
#include "moe_test_support.hpp"
#include "xstage/comm/team.hpp"
#include "xstage/gpu/check.hpp"
#include "xstage/model/error.hpp"
#include "xstage/moe/fused_moe.hpp"
#include "xstage/moe/moe_numerics.hpp"

namespace {

using namespace xstage;
using namespace xstage::moe;
using namespace xstage::moe::test;

// hidden 384: three Linear-2 N-tiles (odd); h_inter 256: four Linear-1 N-tiles; 8 experts, top-3.
constexpr int kHidden = 384, kInter = 256, kExperts = 8, kTopK = 3, kMaxTokens = 700;

struct DeviceBuffer {
  void* p = nullptr;
  explicit DeviceBuffer(size_t bytes) { XSTAGE_CUDA_CHECK(cudaMalloc(&p, bytes)); }
  ~DeviceBuffer() { cudaFree(p); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  template <class T>
  T* as() const {
    return static_cast<T*>(p);
  }
};

std::vector<std::uint16_t> bf16_bits(const std::vector<float>& v) {
  std::vector<std::uint16_t> b(v.size());
  for (size_t i = 0; i < v.size(); ++i) b[i] = float_to_bf16_bits(v[i]);
  return b;
}

// One call's caller-owned buffers: inputs uploaded, weights (FP8: quantized by the API's helper).
struct CallBuffers {
  int tokens;
  DeviceBuffer x, ids, wts, y, w1, w2, w1q, w2q, w1s, w2s;
  CallBuffers(const MoeDims& d, const MoeTestInputs& in, bool fp8, cudaStream_t st)
      : tokens(d.tokens),
        x(std::max<size_t>(16, size_t(d.tokens) * d.hidden * 2)),
        ids(std::max<size_t>(16, size_t(d.tokens) * d.top_k * 4)),
        wts(std::max<size_t>(16, size_t(d.tokens) * d.top_k * 4)),
        y(std::max<size_t>(16, size_t(d.tokens) * d.hidden * 2)),
        w1(in.w1.size() * 2),
        w2(in.w2.size() * 2),
        w1q(in.w1.size()),
        w2q(in.w2.size()),
        w1s(size_t(d.experts) * (2 * d.h_inter / 128) * (d.hidden / 128) * 4),
        w2s(size_t(d.experts) * (d.hidden / 128) * (d.h_inter / 128) * 4) {
    const auto xb = bf16_bits(in.x), w1b = bf16_bits(in.w1), w2b = bf16_bits(in.w2);
    XSTAGE_CUDA_CHECK(cudaMemcpy(x.p, xb.data(), xb.size() * 2, cudaMemcpyHostToDevice));
    XSTAGE_CUDA_CHECK(cudaMemcpy(w1.p, w1b.data(), w1b.size() * 2, cudaMemcpyHostToDevice));
    XSTAGE_CUDA_CHECK(cudaMemcpy(w2.p, w2b.data(), w2b.size() * 2, cudaMemcpyHostToDevice));
    const Routing& r = in.routing[0];
    XSTAGE_CUDA_CHECK(cudaMemcpy(ids.p, r.expert_ids.data(), r.expert_ids.size() * 4, cudaMemcpyHostToDevice));
    XSTAGE_CUDA_CHECK(cudaMemcpy(wts.p, r.weights.data(), r.weights.size() * 4, cudaMemcpyHostToDevice));
    if (fp8) {
      quantize_weight_blocks_fp8(w1.p, d.experts, 2 * d.h_inter, d.hidden, w1q.p, w1s.as<float>(), st);
      quantize_weight_blocks_fp8(w2.p, d.experts, d.hidden, d.h_inter, w2q.p, w2s.as<float>(), st);
      XSTAGE_CUDA_CHECK(cudaStreamSynchronize(st));
    }
  }
  FusedMoeArguments args(bool fp8) const {
    FusedMoeArguments a;
    a.tokens = tokens;
    a.x = x.p;
    a.topk_ids = ids.as<std::int32_t>();
    a.topk_weights = wts.as<float>();
    a.y = y.p;
    a.weights = fp8 ? FusedMoeWeights{w1q.p, w2q.p, w1s.as<float>(), w2s.as<float>()} : FusedMoeWeights{w1.p, w2.p};
    return a;
  }
  void poison(cudaStream_t st) const {
    XSTAGE_CUDA_CHECK(cudaMemsetAsync(y.p, 0xff, size_t(tokens) * kHidden * 2, st));  // bf16 NaN
  }
  std::vector<float> output() const {
    std::vector<std::uint16_t> b(size_t(tokens) * kHidden);
    XSTAGE_CUDA_CHECK(cudaMemcpy(b.data(), y.p, b.size() * 2, cudaMemcpyDeviceToHost));
    std::vector<float> f(b.size());
    for (size_t i = 0; i < b.size(); ++i) f[i] = bf16_bits_to_float(b[i]);
    return f;
  }
};

MoeDims dims_for(int tokens) { return MoeDims{1, tokens, kHidden, kInter, kExperts, kTopK}; }

FusedMoeConfig config_for(FusedMoePrecision p, FusedMoeSchedule s) {
  FusedMoeConfig c;
  c.hidden = kHidden;
  c.h_inter = kInter;
  c.experts = kExperts;
  c.top_k = kTopK;
  c.max_tokens = kMaxTokens;
  c.precision = p;
  c.schedule = s;
  return c;
}

// bf16: relative L2 error below 1e-2. FP8: the fused layer's acceptance rule (test_moe_fused.cpp):
// each token within kFp8CheckFlips e4m3 steps of its most sensitive Linear-2 inputs plus kFp8CheckRel
// of its norm, and (from kFp8CheckP75MinRows tokens on) the 75th percentile of the rows' relative
// errors below 1e-2.
void expect_reference(const std::vector<float>& got, const MoeDims& d, const MoeTestInputs& in, bool fp8,
                      const std::string& what) {
  ASSERT_EQ(count_non_finite(got), 0u) << what << ": elements not written (still NaN) or non-finite";
  if (!fp8) {
    const std::vector<float> ref = in.reference(d, MoePrecision::kBf16);
    EXPECT_LT(relative_l2_error(got.data(), ref.data(), ref.size()), 1e-2) << what;
    return;
  }
  const MoeFp8Reference ref = moe_reference_layer_fp8(d, in.x, in.routing, in.w1, in.w2, MoeFused::kFp8L2Group);
  const MoeFlipCheck c = check_within_flips(got.data(), ref, d.hidden, kFp8CheckFlips, kFp8CheckRel);
  EXPECT_EQ(c.tokens_over, 0) << what << ": worst token " << c.worst_token << " at " << c.worst_ratio
                              << "x its allowance";
  if (d.tokens >= kFp8CheckP75MinRows) EXPECT_LT(c.p75_rel_error, 1e-2) << what;
}

struct ApiCase {
  const char* name;
  FusedMoePrecision precision;
  FusedMoeSchedule schedule;
};

void PrintTo(const ApiCase& c, std::ostream* os) { *os << c.name; }

class FusedMoeApiTest : public ::testing::TestWithParam<ApiCase> {};

// Token counts in call order: full, one, odd, a whole block, full again (the epochs move on each time).
TEST_P(FusedMoeApiTest, MatchesCpuReferenceAcrossTokenCounts) {
  REQUIRE_GPUS(1);
  const ApiCase& c = GetParam();
  const bool fp8 = c.precision == FusedMoePrecision::kFp8;
  XSTAGE_CUDA_CHECK(cudaSetDevice(0));
  FusedMoe layer(config_for(c.precision, c.schedule));
  EXPECT_EQ(layer.runs(), 0u);
  cudaStream_t st;
  XSTAGE_CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  std::mt19937_64 rng(std::random_device{}());
  const float spread = fp8 ? 3.f : 0.f;  // FP8: blocks at their own magnitudes, so a misplaced scale shows
  std::uint32_t runs = 0;
  for (int tokens : {kMaxTokens, 1, 97, 128, kMaxTokens}) {
    const MoeDims d = dims_for(tokens);
    const RoutingKind kind = tokens % 2 ? RoutingKind::kSkewed : RoutingKind::kBalanced;
    const MoeTestInputs in = make_random_inputs(d, kind, rng, spread);
    CallBuffers b(d, in, fp8, st);
    b.poison(st);
    layer.run(b.args(fp8), st);
    EXPECT_EQ(layer.runs(), ++runs);
    XSTAGE_CUDA_CHECK(cudaStreamSynchronize(st));
    expect_reference(b.output(), d, in, fp8, std::string(c.name) + " T=" + std::to_string(tokens));
    // The same call again: the same bits (the run is deterministic across epochs).
    const std::vector<float> first = b.output();
    b.poison(st);
    layer.run(b.args(fp8), st);
    ++runs;
    XSTAGE_CUDA_CHECK(cudaStreamSynchronize(st));
    EXPECT_EQ(b.output(), first) << c.name << " T=" << tokens << ": a repeated run differs";
  }
  EXPECT_EQ(layer.last_failure(), "");
  std::printf("[moe api] %s: grid %d, schedule param %d, workspace %.1f MiB\n", c.name, layer.grid(),
              layer.schedule_param(), double(FusedMoe::workspace_bytes(layer.config())) / (1 << 20));
  XSTAGE_CUDA_CHECK(cudaStreamDestroy(st));
}

// Calls on two streams, enqueued back to back with no host wait: the layer orders them on the device
// (each run waits for the previous one's completion event), so both outputs are right.
TEST_P(FusedMoeApiTest, RunsOnTwoStreamsAreOrdered) {
  REQUIRE_GPUS(1);
  const ApiCase& c = GetParam();
  const bool fp8 = c.precision == FusedMoePrecision::kFp8;
  XSTAGE_CUDA_CHECK(cudaSetDevice(0));
  FusedMoe layer(config_for(c.precision, c.schedule));
  cudaStream_t s[2];
  for (auto& x : s) XSTAGE_CUDA_CHECK(cudaStreamCreateWithFlags(&x, cudaStreamNonBlocking));
  std::mt19937_64 rng(std::random_device{}());
  std::vector<MoeTestInputs> in;
  std::vector<std::unique_ptr<CallBuffers>> b;
  const int tokens[4] = {kMaxTokens, 301, kMaxTokens, 5};
  for (int i = 0; i < 4; ++i) {
    in.push_back(make_random_inputs(dims_for(tokens[i]), RoutingKind::kBalanced, rng, fp8 ? 3.f : 0.f));
    b.push_back(std::make_unique<CallBuffers>(dims_for(tokens[i]), in.back(), fp8, s[0]));
  }
  XSTAGE_CUDA_CHECK(cudaDeviceSynchronize());
  for (int i = 0; i < 4; ++i) {
    b[i]->poison(s[i % 2]);
    layer.run(b[i]->args(fp8), s[i % 2]);
  }
  for (auto& x : s) XSTAGE_CUDA_CHECK(cudaStreamSynchronize(x));
  for (int i = 0; i < 4; ++i)
    expect_reference(b[i]->output(), dims_for(tokens[i]), in[i], fp8,
                     std::string(c.name) + " call " + std::to_string(i) + " on stream " + std::to_string(i % 2));
  for (auto& x : s) XSTAGE_CUDA_CHECK(cudaStreamDestroy(x));
}

// The public API and the bench layer share one launch path: on the same inputs at T = max_tokens, the
// same bits.
TEST_P(FusedMoeApiTest, EqualsTheBenchLayer) {
  REQUIRE_GPUS(1);
  const ApiCase& c = GetParam();
  const bool fp8 = c.precision == FusedMoePrecision::kFp8;
  XSTAGE_CUDA_CHECK(cudaSetDevice(0));
  auto team = comm::Team::single_process({0});
  const MoeDims d = dims_for(kMaxTokens);
  MoeFusedOptions opt;
  opt.schedule = c.schedule == FusedMoeSchedule::kWave ? MoeFusedSchedule::kWave : MoeFusedSchedule::kInterleaved;
  MoeFused bench(team, d, opt, fp8 ? MoePrecision::kFp8 : MoePrecision::kBf16);
  std::mt19937_64 rng(std::random_device{}());
  const MoeTestInputs in = load_random_inputs_kept(bench, d, RoutingKind::kSkewed, rng, fp8 ? 3.f : 0.f);
  xstage::testing::poison_output(bench);
  bench.run(20.0);
  const std::vector<float> want = bench.output(0);

  FusedMoe layer(config_for(c.precision, c.schedule));
  EXPECT_EQ(layer.grid(), bench.grid());
  EXPECT_EQ(layer.schedule_param(), bench.schedule_param());
  cudaStream_t st;
  XSTAGE_CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  CallBuffers b(d, in, fp8, st);
  b.poison(st);
  layer.run(b.args(fp8), st);
  XSTAGE_CUDA_CHECK(cudaStreamSynchronize(st));
  ASSERT_EQ(count_non_finite(want), 0u);
  EXPECT_EQ(b.output(), want) << c.name << ": the API's output differs from MoeFused's";
  XSTAGE_CUDA_CHECK(cudaStreamDestroy(st));
}

// Expert parallelism through the public API: the layer as the one rank of a per-process team (world 1,
// built from an NCCL unique id as the Python package builds it), its peer-reachable buffers in the
// team's symmetric window, gives the bits of the one-GPU layer on the same inputs, run after run: full,
// none (a team rank with no tokens still runs, and the epochs stay in step), odd, full again.
TEST_P(FusedMoeApiTest, TeamOfOneEqualsTheOneGpuLayer) {
  REQUIRE_GPUS(1);
  const ApiCase& c = GetParam();
  const bool fp8 = c.precision == FusedMoePrecision::kFp8;
  XSTAGE_CUDA_CHECK(cudaSetDevice(0));
  auto team = comm::Team::from_unique_id(comm::Team::new_unique_id(), 0, 1, 0, 30.0);
  FusedMoeConfig tc = config_for(c.precision, c.schedule);
  tc.team = &team;
  tc.device = 1;
  EXPECT_EQ(FusedMoe::can_implement(tc), "device: 1, but the team's rank 0 runs on device 0");
  tc.device = -1;
  ASSERT_EQ(FusedMoe::can_implement(tc), "");
  FusedMoe on_team(tc);
  FusedMoe alone(config_for(c.precision, c.schedule));
  EXPECT_EQ(on_team.rank(), 0);
  EXPECT_EQ(on_team.ranks(), 1);
  EXPECT_EQ(on_team.local_experts(), kExperts);
  EXPECT_EQ(on_team.grid(), alone.grid());
  EXPECT_GE(FusedMoe::workspace_bytes(tc), FusedMoe::workspace_bytes(config_for(c.precision, c.schedule)));
  cudaStream_t st;
  XSTAGE_CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  std::mt19937_64 rng(std::random_device{}());
  std::uint32_t runs = 0;
  for (int tokens : {kMaxTokens, 0, 97, kMaxTokens}) {
    if (tokens == 0) {
      CallBuffers none(dims_for(1), make_random_inputs(dims_for(1), RoutingKind::kBalanced, rng), fp8, st);
      FusedMoeArguments a = none.args(fp8);
      a.tokens = 0;
      a.x = a.y = nullptr;
      a.topk_ids = nullptr;
      a.topk_weights = nullptr;
      on_team.run(a, st);
      alone.run(a, st);  // one GPU: nothing is launched
      EXPECT_EQ(on_team.runs(), ++runs) << "a team rank with no tokens still runs";
      XSTAGE_CUDA_CHECK(cudaStreamSynchronize(st));  // before `none`'s weights are freed
      continue;
    }
    const MoeDims d = dims_for(tokens);
    const MoeTestInputs in = make_random_inputs(d, RoutingKind::kSkewed, rng, fp8 ? 3.f : 0.f);
    CallBuffers b(d, in, fp8, st);
    b.poison(st);
    alone.run(b.args(fp8), st);
    XSTAGE_CUDA_CHECK(cudaStreamSynchronize(st));
    const std::vector<float> want = b.output();
    b.poison(st);
    on_team.run(b.args(fp8), st);
    EXPECT_EQ(on_team.runs(), ++runs);
    XSTAGE_CUDA_CHECK(cudaStreamSynchronize(st));
    expect_reference(want, d, in, fp8, std::string(c.name) + " one GPU T=" + std::to_string(tokens));
    EXPECT_EQ(b.output(), want) << c.name << " T=" << tokens << ": the team layer differs from the one-GPU layer";
  }
  EXPECT_EQ(on_team.last_failure(), "");
  XSTAGE_CUDA_CHECK(cudaStreamDestroy(st));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, FusedMoeApiTest,
    ::testing::Values(ApiCase{"bf16_interleaved", FusedMoePrecision::kBf16, FusedMoeSchedule::kInterleaved},
                      ApiCase{"bf16_wave", FusedMoePrecision::kBf16, FusedMoeSchedule::kWave},
                      ApiCase{"fp8_interleaved", FusedMoePrecision::kFp8, FusedMoeSchedule::kInterleaved},
                      ApiCase{"fp8_wave", FusedMoePrecision::kFp8, FusedMoeSchedule::kWave}),
    [](const ::testing::TestParamInfo<ApiCase>& i) { return std::string(i.param.name); });

bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }

// Configuration errors name the field; these need no GPU (the shape checks come before the device's).
TEST(FusedMoeApi, CanImplementNamesTheField) {
  FusedMoeConfig c = config_for(FusedMoePrecision::kBf16, FusedMoeSchedule::kInterleaved);
  auto why = [&](auto&& edit) {
    FusedMoeConfig x = c;
    edit(x);
    return FusedMoe::can_implement(x);
  };
  EXPECT_TRUE(starts_with(why([](FusedMoeConfig& x) { x.hidden = 100; }), "hidden:"));
  EXPECT_TRUE(starts_with(why([](FusedMoeConfig& x) { x.h_inter = 200; }), "h_inter:"));
  EXPECT_TRUE(starts_with(why([](FusedMoeConfig& x) { x.experts = 2048; }), "experts:"));
  EXPECT_TRUE(starts_with(why([](FusedMoeConfig& x) { x.top_k = 9; }), "top_k:"));
  EXPECT_TRUE(starts_with(why([](FusedMoeConfig& x) { x.top_k = 0; }), "top_k:"));
  EXPECT_TRUE(starts_with(why([](FusedMoeConfig& x) { x.max_tokens = 0; }), "max_tokens:"));
  EXPECT_TRUE(starts_with(why([](FusedMoeConfig& x) { x.max_tokens = 1 << 23; }), "max_tokens:"));
  EXPECT_TRUE(starts_with(why([](FusedMoeConfig& x) { x.timeout_s = 0; }), "timeout_s:"));
  EXPECT_TRUE(starts_with(why([](FusedMoeConfig& x) { x.lead_rows = -1; }), "lead_rows:"));
  EXPECT_TRUE(starts_with(why([](FusedMoeConfig& x) { x.device = 1 << 20; }), "device:"));
  FusedMoeConfig bad = c;
  bad.hidden = 100;
  EXPECT_THROW(FusedMoe{bad}, InputError);
  EXPECT_THROW(FusedMoe::workspace_bytes(bad), InputError);
  EXPECT_GT(FusedMoe::workspace_bytes(c), size_t(kMaxTokens) * kTopK * kHidden * 2);
}

// Argument errors name the argument and launch nothing (the layer's run count stays).
TEST(FusedMoeApi, BadArgumentsAreRefusedBeforeAnyLaunch) {
  REQUIRE_GPUS(1);
  XSTAGE_CUDA_CHECK(cudaSetDevice(0));
  for (FusedMoePrecision p : {FusedMoePrecision::kBf16, FusedMoePrecision::kFp8}) {
    const bool fp8 = p == FusedMoePrecision::kFp8;
    FusedMoe layer(config_for(p, FusedMoeSchedule::kInterleaved));
    std::mt19937_64 rng(1);
    const MoeDims d = dims_for(64);
    const MoeTestInputs in = make_random_inputs(d, RoutingKind::kBalanced, rng);
    CallBuffers b(d, in, fp8, nullptr);
    std::vector<std::uint16_t> host_x(size_t(64) * kHidden);
    auto refused = [&](const std::string& field, auto&& edit) {
      FusedMoeArguments a = b.args(fp8);
      edit(a);
      const std::string why = layer.check(a, nullptr);
      EXPECT_TRUE(starts_with(why, field + ":")) << "expected '" << field << ":', got '" << why << "'";
      EXPECT_THROW(layer.run(a, nullptr), InputError) << field;
    };
    refused("tokens", [](FusedMoeArguments& a) { a.tokens = kMaxTokens + 1; });
    refused("tokens", [](FusedMoeArguments& a) { a.tokens = -1; });
    refused("x", [](FusedMoeArguments& a) { a.x = nullptr; });
    refused("x", [&](FusedMoeArguments& a) { a.x = host_x.data(); });
    refused("x", [](FusedMoeArguments& a) { a.x = static_cast<const char*>(a.x) + 2; });
    refused("y", [](FusedMoeArguments& a) { a.y = static_cast<char*>(a.y) + 8; });
    refused("topk_ids", [](FusedMoeArguments& a) { a.topk_ids = nullptr; });
    refused("topk_weights", [](FusedMoeArguments& a) { a.topk_weights = nullptr; });
    refused("w1", [](FusedMoeArguments& a) { a.weights.w1 = nullptr; });
    if (fp8) {
      refused("w2_scale", [](FusedMoeArguments& a) { a.weights.w2_scale = nullptr; });
    } else {
      refused("w1_scale", [&](FusedMoeArguments& a) { a.weights.w1_scale = b.w1s.as<float>(); });
    }
    EXPECT_EQ(layer.runs(), 0u) << "a refused call launched";
    // T = 0 is valid and launches nothing.
    FusedMoeArguments empty{};
    EXPECT_EQ(layer.check(empty, nullptr), "");
    layer.run(empty, nullptr);
    EXPECT_EQ(layer.runs(), 0u);
  }
  EXPECT_THROW(quantize_weight_blocks_fp8(nullptr, 1, 100, 128, nullptr, nullptr, nullptr), InputError);
  EXPECT_THROW(quantize_weight_blocks_fp8(nullptr, 1, 128, 128, nullptr, nullptr, nullptr), InputError);
}

// The failure record a bounded wait leaves before its trap, as FusedMoe::last_failure and MoeFused's
// error report print it (no GPU: the formatting alone).
TEST(FusedMoeApi, FailureRecordNamesTheWait) {
  EXPECT_EQ(moe_fused_failure_text(MoeFusedWaitFailure{}), "");
  MoeFusedWaitFailure f{};
  f.code = kMoeWaitArrival;
  f.rank = 0;
  f.block = 7;
  f.thread = 128;
  f.index = 3;
  f.target = 96;
  f.seen = 64;
  const std::string text = moe_fused_failure_text(f);
  EXPECT_NE(text.find("arrival counter of a local expert"), std::string::npos) << text;
  EXPECT_NE(text.find("block 7"), std::string::npos) << text;
  EXPECT_NE(text.find("wanted 96, saw 64"), std::string::npos) << text;
}

}  // namespace
