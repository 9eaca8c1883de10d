// The fused MoE kernel's device parameters as to_params builds them from a launch's arguments: every
// field lands in its part, the modes become their enums, invalid modes are refused (by
// moe_fused_check_modes, and by launch_moe_fused before any CUDA call). Host code only: runs without a GPU.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "moe_fused_kernel.hpp"

namespace {

using namespace xstage::moe;

// Distinct fake addresses (never dereferenced): field k gets base + 64·k.
template <class P>
P* fake(int k) {
  return reinterpret_cast<P*>(std::uintptr_t(0x10000) + std::uintptr_t(64) * std::uintptr_t(k));
}

MoeFusedArguments sample_arguments() {
  MoeFusedArguments a;
  a.rank = 1;
  a.ranks = 4;
  a.tokens = 1000;
  a.top_k = 8;
  a.hidden = 7168;
  a.h_inter = 2048;
  a.experts = 256;
  a.epoch = 17;
  a.schedule_param = 12;
  a.timeout_ns = 123456789;
  a.fp8 = true;
  a.gemm_only = 2;
  a.combine = MoeCombineIssue::kPiggyback;
  a.x = fake<const std::uint16_t>(1);
  a.w1_scale = fake<const float>(2);
  a.w2_scale = fake<const float>(3);
  a.expert_ids = fake<const int>(4);
  a.weights = fake<const float>(5);
  a.expert_rows = fake<const int>(6);
  a.expert_offset = fake<const int>(7);
  a.token_of_send_row = fake<const int>(8);
  a.h = fake<void>(9);
  a.recv_scale = fake<float>(10);
  a.h_scale = fake<float>(11);
  a.origin = fake<const int>(12);
  a.l1_done = fake<std::uint32_t>(13);
  a.arrive = fake<std::uint64_t>(14);
  a.arrive_base = fake<std::uint64_t>(15);
  a.run_totals = fake<int>(16);
  a.counts = fake<const int>(17);
  a.count_flag = fake<const std::uint32_t>(18);
  a.done_flag = fake<const std::uint32_t>(19);
  a.comb = fake<std::uint16_t>(20);
  a.y = fake<std::uint16_t>(21);
  for (int r = 0; r < kFusedMaxRanks; ++r) {
    a.recv_peer[r] = fake<void>(100 + r);
    a.recv_scale_peer[r] = fake<float>(110 + r);
    a.origin_peer[r] = fake<int>(120 + r);
    a.arrive_peer[r] = fake<std::uint64_t>(130 + r);
    a.counts_peer[r] = fake<int>(140 + r);
    a.count_flag_peer[r] = fake<std::uint32_t>(150 + r);
    a.done_flag_peer[r] = fake<std::uint32_t>(160 + r);
    a.comb_peer[r] = fake<std::uint16_t>(170 + r);
  }
  a.failure = fake<MoeFusedWaitFailure>(22);
  a.trace = fake<MoeFusedTileTrace>(23);
  a.trace_count = fake<std::uint32_t>(24);
  a.trace_capacity = 99;
  a.comb_local = fake<std::uint16_t>(25);
  return a;
}

TEST(MoeFusedParams, EveryArgumentLandsInItsPart) {
  const MoeFusedArguments a = sample_arguments();
  const MoeFusedKernelParams p = to_params(a);
  EXPECT_EQ(p.shape.rank, 1);
  EXPECT_EQ(p.shape.ranks, 4);
  EXPECT_EQ(p.shape.tokens, 1000);
  EXPECT_EQ(p.shape.top_k, 8);
  EXPECT_EQ(p.shape.hidden, 7168);
  EXPECT_EQ(p.shape.h_inter, 2048);
  EXPECT_EQ(p.shape.experts, 256);
  EXPECT_EQ(p.shape.epoch, 17u);
  EXPECT_EQ(p.shape.schedule_param, 12);
  EXPECT_EQ(p.sync.timeout_ns, 123456789u);
  EXPECT_EQ(p.sync.failure, a.failure);
  EXPECT_EQ(p.sync.count_flag, a.count_flag);
  EXPECT_EQ(p.sync.done_flag, a.done_flag);
  EXPECT_TRUE(p.dispatch.fp8);
  EXPECT_EQ(p.dispatch.x, a.x);
  EXPECT_EQ(p.dispatch.expert_ids, a.expert_ids);
  EXPECT_EQ(p.dispatch.expert_rows, a.expert_rows);
  EXPECT_EQ(p.dispatch.expert_offset, a.expert_offset);
  EXPECT_EQ(p.dispatch.token_of_send_row, a.token_of_send_row);
  EXPECT_EQ(p.dispatch.counts, a.counts);
  EXPECT_EQ(p.dispatch.run_totals, a.run_totals);
  EXPECT_EQ(p.mainloop.gemm_only, MoeGemmOnly::kLinear2);
  EXPECT_EQ(p.mainloop.w1_scale, a.w1_scale);
  EXPECT_EQ(p.mainloop.w2_scale, a.w2_scale);
  EXPECT_EQ(p.mainloop.recv_scale, a.recv_scale);
  EXPECT_EQ(p.mainloop.arrive, a.arrive);
  EXPECT_EQ(p.mainloop.arrive_base, a.arrive_base);
  EXPECT_EQ(p.mainloop.l1_done, a.l1_done);
  EXPECT_EQ(p.epilogue.combine, MoeCombineIssue::kPiggyback);
  EXPECT_EQ(p.epilogue.h, a.h);
  EXPECT_EQ(p.epilogue.h_scale, a.h_scale);
  EXPECT_EQ(p.epilogue.origin, a.origin);
  EXPECT_EQ(p.epilogue.weights, a.weights);
  EXPECT_EQ(p.epilogue.comb, a.comb);
  EXPECT_EQ(p.epilogue.y, a.y);
  for (int r = 0; r < kFusedMaxRanks; ++r) {
    EXPECT_EQ(p.dispatch.recv_peer[r], a.recv_peer[r]) << r;
    EXPECT_EQ(p.dispatch.recv_scale_peer[r], a.recv_scale_peer[r]) << r;
    EXPECT_EQ(p.dispatch.origin_peer[r], a.origin_peer[r]) << r;
    EXPECT_EQ(p.dispatch.arrive_peer[r], a.arrive_peer[r]) << r;
    EXPECT_EQ(p.dispatch.counts_peer[r], a.counts_peer[r]) << r;
    EXPECT_EQ(p.sync.count_flag_peer[r], a.count_flag_peer[r]) << r;
    EXPECT_EQ(p.sync.done_flag_peer[r], a.done_flag_peer[r]) << r;
    EXPECT_EQ(p.epilogue.comb_peer[r], a.comb_peer[r]) << r;
  }
  EXPECT_EQ(p.trace.records, a.trace);
  EXPECT_EQ(p.trace.counts, a.trace_count);
  EXPECT_EQ(p.trace.capacity, 99);
  EXPECT_EQ(p.trace.comb_local, a.comb_local);
}

TEST(MoeFusedParams, ModesMapToTheirEnums) {
  MoeFusedArguments a = sample_arguments();
  const MoeGemmOnly want[] = {MoeGemmOnly::kOff, MoeGemmOnly::kLinear1, MoeGemmOnly::kLinear2};
  for (int g = 0; g < 3; ++g) {
    a.gemm_only = g;
    EXPECT_EQ(moe_fused_check_modes(a), "");
    EXPECT_EQ(to_mainloop_params(a).gemm_only, want[g]);
  }
  a.combine = MoeCombineIssue::kEpilogue;
  EXPECT_EQ(to_epilogue_params(a).combine, MoeCombineIssue::kEpilogue);
}

TEST(MoeFusedParams, InvalidModesAreRefusedBeforeAnyLaunch) {
  MoeFusedArguments a = sample_arguments();
  a.gemm_only = 3;
  EXPECT_EQ(moe_fused_check_modes(a), "gemm_only: 0 (the layer), 1 (Linear-1 tiles) or 2 (Linear-2 tiles), got 3");
  EXPECT_EQ(launch_moe_fused(a, MoeFusedSchedule::kInterleaved, 2, nullptr), cudaErrorInvalidValue);
  a.gemm_only = -1;
  EXPECT_NE(moe_fused_check_modes(a), "");
  a.gemm_only = 0;
  a.combine = static_cast<MoeCombineIssue>(7);
  EXPECT_EQ(moe_fused_check_modes(a), "combine: epilogue or piggyback, got 7");
  EXPECT_EQ(launch_moe_fused(a, MoeFusedSchedule::kWave, 2, nullptr), cudaErrorInvalidValue);
}

}  // namespace
