// Probe kernels and runs: data verification (the checker and the kernel), timing plumbing, the gap
// (spin and Tensor Core work), isolated mode, both store paths, and the remote patterns on 2 GPUs.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "gpu_test_support.hpp"
#include "xstage/comm/team.hpp"
#include "xstage/gpu/check.hpp"
#include "xstage/gpu/provenance.hpp"
#include "xstage/model/error.hpp"
#include "xstage/probe/burst_pattern.hpp"
#include "xstage/probe/probe.hpp"
#include "xstage/probe/verify.hpp"

namespace {

using namespace xstage;
using namespace xstage::probe;

using test::device_count;

ProbeConfig local_config(int k, std::uint64_t b) {
  ProbeConfig c;
  c.target = model::StoreTarget::kLocal;
  c.producers = k;
  c.bytes_per_producer = b;
  c.bursts = 32;
  return c;
}

TEST(Verify, CheckerCountsEveryWrongWord) {
  REQUIRE_GPUS(1);
  XSTAGE_CUDA_CHECK(cudaSetDevice(0));
  const std::uint64_t bytes = 64 * 1024;
  void* buf = nullptr;
  XSTAGE_CUDA_CHECK(cudaMalloc(&buf, bytes));
  const std::uint32_t tag = burst_tag(123, 0, 5, 9);
  std::vector<VerifyRegion> regions = {{0, tag, 5, 0, 9}};
  poison(buf, bytes, nullptr);
  auto o = verify_regions(buf, regions, bytes, nullptr);
  EXPECT_EQ(o.mismatches, bytes / 4) << "an unwritten (poisoned) region must fail everywhere";
  std::vector<std::uint32_t> h(bytes / 4);
  for (std::uint32_t w = 0; w < h.size(); ++w) h[w] = pattern_word(tag, w);
  XSTAGE_CUDA_CHECK(cudaMemcpy(buf, h.data(), bytes, cudaMemcpyHostToDevice));
  o = verify_regions(buf, regions, bytes, nullptr);
  EXPECT_EQ(o.mismatches, 0u);
  EXPECT_EQ(o.words_checked, bytes / 4);
  // A torn 16-byte store: one word of four from an older burst.
  const std::uint32_t stale = pattern_word(burst_tag(123, 0, 5, 8), 1001);
  XSTAGE_CUDA_CHECK(cudaMemcpy(static_cast<char*>(buf) + 4 * 1001, &stale, 4, cudaMemcpyHostToDevice));
  o = verify_regions(buf, regions, bytes, nullptr);
  EXPECT_EQ(o.mismatches, 1u);
  EXPECT_NE(o.first_mismatch.find("word 1001"), std::string::npos) << o.first_mismatch;
  XSTAGE_CUDA_CHECK(cudaFree(buf));
}

TEST(Provenance, NamesDeviceAndMeasuresClock) {
  REQUIRE_GPUS(1);
  const auto j = gpu::collect_provenance({0}, 0, nullptr);
  EXPECT_FALSE(j["devices"][0].contains("error"));
  EXPECT_GT(j["devices"][0]["sm_count"].get<int>(), 0);
  EXPECT_FALSE(j["git_revision"].get<std::string>().empty());
  const double mhz = gpu::measure_sm_clock_mhz(0);
  EXPECT_GT(mhz, 300.0);
  EXPECT_LT(mhz, 3500.0);
}

class LocalProbe : public ::testing::TestWithParam<StorePath> {};

TEST_P(LocalProbe, PeriodicZeroGapVerifiesForEveryStoreWidth) {
  REQUIRE_GPUS(1);
  auto team = comm::Team::single_process({0});
  ProbeRunner runner(team, 512ull << 20, GetParam());
  for (int w : {16, 8, 4}) {
    ProbeConfig c = local_config(runner.max_producers(), 32768);
    c.store_bytes = w;
    const ProbeResult r = runner.run(c);
    EXPECT_TRUE(r.verified()) << "store bytes " << w << ": " << r.first_mismatch;
    EXPECT_GT(r.words_verified, 0u);
    ASSERT_EQ(r.senders.size(), 1u);
    const auto& s = r.senders[0];
    EXPECT_EQ(s.t_iss_s.size(), 32u);
    EXPECT_GT(s.t_iss_stat_s, 0.0);
    // Zero gap: the period is the issue time plus the (near-zero) loop overhead.
    EXPECT_GE(s.t_period_stat_s, s.t_iss_stat_s);
    EXPECT_LT(s.gap_stat_s, 0.5e-6);  // the loop's own bookkeeping, no programmed gap
    // The whole-run CUDA event time bounds the measured bursts' total time from above.
    EXPECT_LE(s.t_period_stat_s * c.bursts, s.event_elapsed_s);
  }
}

TEST_P(LocalProbe, IsolatedBurstsVerify) {
  REQUIRE_GPUS(1);
  auto team = comm::Team::single_process({0});
  ProbeRunner runner(team, 512ull << 20, GetParam());
  ProbeConfig c = local_config(runner.max_producers() / 2, 65536);
  c.mode = model::BurstMode::kIsolated;
  c.bursts = 8;
  const ProbeResult r = runner.run(c);
  EXPECT_TRUE(r.verified()) << r.first_mismatch;
  EXPECT_GT(r.t_iss_s(), 0.0);
  EXPECT_TRUE(std::isnan(r.t_period_s()));
}

INSTANTIATE_TEST_SUITE_P(Paths, LocalProbe, ::testing::Values(StorePath::kNcclWindow, StorePath::kPeerPointer),
                         [](const auto& info) { return info.param == StorePath::kNcclWindow ? "NcclWindow" : "PeerPointer"; });

TEST(Gap, SpinGapIsTheRequestedTime) {
  REQUIRE_GPUS(1);
  auto team = comm::Team::single_process({0});
  ProbeRunner runner(team, 256ull << 20, StorePath::kNcclWindow);
  ProbeConfig c = local_config(runner.max_producers(), 16384);
  c.gap_s = 5e-6;
  const ProbeResult r = runner.run(c);
  ASSERT_TRUE(r.verified());
  EXPECT_NEAR(r.gap_s(), 5e-6, 0.25e-6);
  // Eq. 2 holds by construction of the loop: period = issue + gap (+ the loop's own few cycles).
  EXPECT_NEAR(r.t_period_s(), r.t_iss_s() + r.gap_s(), 0.3e-6);
  EXPECT_EQ(r.senders[0].mma_instructions, 0u);
}

TEST(Gap, MmaGapIsTensorCoreWork) {
  REQUIRE_GPUS(1);
  auto team = comm::Team::single_process({0});
  ProbeRunner runner(team, 256ull << 20, StorePath::kNcclWindow);
  ProbeConfig c = local_config(runner.max_producers(), 16384);
  c.gap_s = 5e-6;
  c.gap_kind = GapKind::kMma;
  const ProbeResult r = runner.run(c);
  ASSERT_TRUE(r.verified());
  // The MMA loop runs on SM cycles converted at the pre-run clock; under full Tensor Core load the
  // clock drops, so the gap in seconds runs longer (seen: 6.5 µs for 5 µs on an H200). The measured
  // gap, not the requested one, is what the records carry.
  EXPECT_GE(r.gap_s(), 4.9e-6);
  EXPECT_LT(r.gap_s(), 7.5e-6);
  // Every warp issues MMAs for the whole gap: at least a few hundred per warp per burst.
  const double per_warp_per_burst = static_cast<double>(r.senders[0].mma_instructions) /
                                    (c.producers * (c.threads_per_producer / 32.0) * (c.bursts + c.warmup_bursts + 1));
  EXPECT_GT(per_warp_per_burst, 100.0);
}

TEST(Probe, RejectsImpossibleConfigurations) {
  REQUIRE_GPUS(1);
  auto team = comm::Team::single_process({0});
  ProbeRunner runner(team, 64ull << 20, StorePath::kNcclWindow);
  ProbeConfig c = local_config(runner.max_producers() + 1, 4096);
  EXPECT_THROW(runner.run(c), xstage::InputError);
  c = local_config(4, 4096);
  c.target = model::StoreTarget::kRemote;
  EXPECT_THROW(runner.run(c), xstage::InputError);  // one GPU: no remote target
  c = local_config(4, (64ull << 20) / 2);
  EXPECT_THROW(runner.run(c), xstage::InputError);  // beyond the buffer
}

class RemoteProbe : public ::testing::TestWithParam<std::tuple<StorePath, Pattern>> {};

TEST_P(RemoteProbe, VerifiesAndTimes) {
  REQUIRE_GPUS(2);
  const auto [path, pattern] = GetParam();
  std::vector<int> gpus;
  for (int i = 0; i < device_count(); ++i) gpus.push_back(i);
  if (pattern != Pattern::kAllToAll) gpus.resize(2);
  auto team = comm::Team::single_process(gpus);
  ProbeRunner runner(team, 1ull << 30, path);
  ProbeConfig c;
  c.pattern = pattern;
  c.producers = runner.max_producers();
  c.bytes_per_producer = 32768;
  c.bursts = 64;
  for (auto mode : {model::BurstMode::kPeriodic, model::BurstMode::kIsolated}) {
    c.mode = mode;
    const ProbeResult r = runner.run(c);
    EXPECT_TRUE(r.verified()) << r.first_mismatch;
    EXPECT_GT(r.t_iss_s(), 0.0);
    EXPECT_EQ(r.senders.size(), pattern == Pattern::kPair ? 1u : (pattern == Pattern::kBidirectional ? 2u : gpus.size()));
  }
}

INSTANTIATE_TEST_SUITE_P(
    PathsAndPatterns, RemoteProbe,
    ::testing::Combine(::testing::Values(StorePath::kNcclWindow, StorePath::kPeerPointer),
                       ::testing::Values(Pattern::kPair, Pattern::kBidirectional, Pattern::kAllToAll)),
    [](const auto& info) {
      std::string s = std::get<0>(info.param) == StorePath::kNcclWindow ? "Nccl" : "Peer";
      const Pattern p = std::get<1>(info.param);
      return s + (p == Pattern::kPair ? "Pair" : p == Pattern::kBidirectional ? "Bidirectional" : "AllToAll");
    });

}  // namespace
