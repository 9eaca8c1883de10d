// GPU tests of the attention forward kernel against the host reference: fresh random inputs each run,
// outputs poisoned with NaN before each launch, every valid element checked as written.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <random>
#include <vector>

#include "xstage/gpu/check.hpp"
#include "xstage/sched/attn_tile_config.hpp"
#include "gpu_test_support.hpp"
#include "xstage/attn/forward.hpp"
#include "xstage/sched/attn_tile_config.hpp"
#include "xstage/sched/attn_tile_scheduler.hpp"
#include "xstage/testing/attn_random.hpp"
#include "xstage/testing/attn_reference.hpp"

namespace xstage::attn {
namespace {

using test::fresh_seed;

float test_bf16_to_float(uint16_t b) {
  const uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Elements spanned by a tensor with these strides (the largest offset + 1).
size_t span(const AttnForwardProblem& p, int seq, int64_t sb, int64_t ss, int64_t sh) {
  return size_t((p.batch - 1) * sb + int64_t(seq - 1) * ss + (p.heads - 1) * sh + p.head_dim);
}

struct DeviceRun {
  std::vector<uint16_t> q, k, v, o;
  std::vector<float> lse;
};

// Draws fresh inputs, poisons the outputs, runs the kernel, and copies everything back. kSplit: with the
// split tail's workspace, poisoned too (all-ones flags read as "partial ready": the launch must clear them).
DeviceRun run_kernel(const AttnForwardProblem& p, uint64_t seed, bool with_lse, int launches = 1,
                     AttnTail tail = AttnTail::kWhole) {
  const size_t nq = span(p, p.seq_q, p.q_stride_batch, p.q_stride_seq, p.q_stride_head);
  const size_t nk = span(p, p.seq_k, p.k_stride_batch, p.k_stride_seq, p.k_stride_head);
  const size_t nv = span(p, p.seq_k, p.v_stride_batch, p.v_stride_seq, p.v_stride_head);
  const size_t no = span(p, p.seq_q, p.o_stride_batch, p.o_stride_seq, p.o_stride_head);
  const size_t nl = size_t(p.batch) * p.heads * p.seq_q;
  void *q, *k, *v, *o;
  float* lse = nullptr;
  XSTAGE_CUDA_CHECK(cudaMalloc(&q, nq * 2));
  XSTAGE_CUDA_CHECK(cudaMalloc(&k, nk * 2));
  XSTAGE_CUDA_CHECK(cudaMalloc(&v, nv * 2));
  XSTAGE_CUDA_CHECK(cudaMalloc(&o, no * 2));
  if (with_lse) XSTAGE_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&lse), nl * 4));
  XSTAGE_CUDA_CHECK(attn_fill_normal_bf16(q, nq, seed * 3 + 1, 1.f, nullptr));
  XSTAGE_CUDA_CHECK(attn_fill_normal_bf16(k, nk, seed * 3 + 2, 1.f, nullptr));
  XSTAGE_CUDA_CHECK(attn_fill_normal_bf16(v, nv, seed * 3 + 3, 1.f, nullptr));
  AttnForwardArgs a{p, q, k, v, o, lse};
  void* ws = nullptr;
  if (tail == AttnTail::kSplit) {
    a.workspace_bytes = attn_forward_workspace_bytes(p, AttnPrecision::kBf16, AttnTail::kSplit);
    if (a.workspace_bytes > 0) XSTAGE_CUDA_CHECK(cudaMalloc(&ws, a.workspace_bytes));
    a.workspace = ws;
  }
  EXPECT_EQ(attn_forward_can_implement(a), "");
  DeviceRun r;
  for (int i = 0; i < launches; ++i) {
    if (ws) XSTAGE_CUDA_CHECK(cudaMemset(ws, 0xff, a.workspace_bytes));
    XSTAGE_CUDA_CHECK(cudaMemset(o, 0xff, no * 2));  // bf16 0xffff is NaN
    if (lse) XSTAGE_CUDA_CHECK(cudaMemset(lse, 0xff, nl * 4));
    XSTAGE_CUDA_CHECK(attn_forward(a, nullptr));
    XSTAGE_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<uint16_t> out(no);
    XSTAGE_CUDA_CHECK(cudaMemcpy(out.data(), o, no * 2, cudaMemcpyDeviceToHost));
    if (i > 0) EXPECT_EQ(out, r.o) << "launch " << i << " differs from launch 0 (race?)";
    r.o = std::move(out);
  }
  r.q.resize(nq);
  r.k.resize(nk);
  r.v.resize(nv);
  XSTAGE_CUDA_CHECK(cudaMemcpy(r.q.data(), q, nq * 2, cudaMemcpyDeviceToHost));
  XSTAGE_CUDA_CHECK(cudaMemcpy(r.k.data(), k, nk * 2, cudaMemcpyDeviceToHost));
  XSTAGE_CUDA_CHECK(cudaMemcpy(r.v.data(), v, nv * 2, cudaMemcpyDeviceToHost));
  if (lse) {
    r.lse.resize(nl);
    XSTAGE_CUDA_CHECK(cudaMemcpy(r.lse.data(), lse, nl * 4, cudaMemcpyDeviceToHost));
    XSTAGE_CUDA_CHECK(cudaFree(lse));
  }
  XSTAGE_CUDA_CHECK(cudaFree(q));
  XSTAGE_CUDA_CHECK(cudaFree(k));
  XSTAGE_CUDA_CHECK(cudaFree(v));
  XSTAGE_CUDA_CHECK(cudaFree(o));
  XSTAGE_CUDA_CHECK(cudaFree(ws));
  return r;
}

// Checks the given rows: every element written, error within 2x that of a bf16 implementation
// (and under 1e-2), LSE close to the exact one.
void check_rows(const AttnForwardProblem& p, const DeviceRun& r, const std::vector<AttnRow>& rows, uint64_t seed) {
  EXPECT_EQ(attn_count_non_finite(p, r.o.data()), 0u) << "unwritten (NaN-poisoned) or non-finite outputs";
  std::vector<float> ref, ref_lse, ref16, ref16_lse;
  attn_reference_rows(p, r.q.data(), r.k.data(), r.v.data(), rows, AttnRefPrecision::kExact, ref, ref_lse);
  attn_reference_rows(p, r.q.data(), r.k.data(), r.v.data(), rows, AttnRefPrecision::kBf16, ref16, ref16_lse);
  const AttnErrorStats ours = attn_compare(attn_gather_rows(p, r.o.data(), rows), ref);
  const AttnErrorStats bf16 = attn_compare(ref16, ref);
  std::printf("  b=%d sq=%d sk=%d h=%d seed=%llu rows=%zu: rel_l2 ours %.3e, bf16 reference %.3e, max_abs %.3e\n",
              p.batch, p.seq_q, p.seq_k, p.heads, (unsigned long long)seed, rows.size(), ours.rel_l2, bf16.rel_l2,
              ours.max_abs);
  EXPECT_EQ(ours.non_finite, 0u);
  EXPECT_LT(ours.rel_l2, 1e-2);
  EXPECT_LE(ours.rel_l2, 2.0 * bf16.rel_l2 + 1e-4);
  if (!r.lse.empty()) {
    double worst = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
      const AttnRow& row = rows[i];
      const float got = r.lse[(size_t(row.batch) * p.heads + row.head) * p.seq_q + row.row];
      worst = std::max(worst, std::isfinite(got) ? std::fabs(double(got) - ref_lse[i]) : INFINITY);
    }
    EXPECT_LT(worst, 1e-3) << "log-sum-exp";
  }
}

struct Shape {
  int batch, seq_q, seq_k, heads;
};

class AttnForwardSmall : public ::testing::TestWithParam<Shape> {};

TEST_P(AttnForwardSmall, MatchesCpuReferenceOnAllRows) {
  REQUIRE_HOPPERS(1);
  const Shape s = GetParam();
  const AttnForwardProblem p = make_bshd_problem(s.batch, s.seq_q, s.seq_k, s.heads, 128);
  const uint64_t seed = fresh_seed();
  const DeviceRun r = run_kernel(p, seed, /*with_lse=*/true, /*launches=*/2);
  check_rows(p, r, attn_all_rows(p), seed);
}

INSTANTIATE_TEST_SUITE_P(Shapes, AttnForwardSmall,
                         ::testing::Values(Shape{1, 128, 128, 1},    // one full tile
                                           Shape{1, 1, 5, 1},        // one query, five keys
                                           Shape{1, 64, 200, 2},     // partial query tile, ragged keys
                                           Shape{2, 300, 300, 3},    // ragged both, batch > 1
                                           Shape{1, 257, 129, 2},    // one row/column past a tile
                                           Shape{1, 1000, 1000, 1},  // many key blocks
                                           Shape{1, 512, 1200, 1}),   // cross-attention lengths
                         [](const ::testing::TestParamInfo<Shape>& i) {
                           const Shape& s = i.param;
                           return "b" + std::to_string(s.batch) + "_sq" + std::to_string(s.seq_q) + "_sk" +
                                  std::to_string(s.seq_k) + "_h" + std::to_string(s.heads);
                         });

TEST(AttnForward, HeadDim64RaggedShapes) {
  REQUIRE_HOPPERS(1);
  for (Shape s : {Shape{1, 300, 300, 3}, Shape{2, 1000, 777, 2}}) {
    const AttnForwardProblem p = make_bshd_problem(s.batch, s.seq_q, s.seq_k, s.heads, 64);
    const uint64_t seed = fresh_seed();
    const DeviceRun r = run_kernel(p, seed, true, 2);
    check_rows(p, r, attn_all_rows(p), seed);
  }
}

TEST(AttnForward, StridedHeadMajorLayout) {
  REQUIRE_HOPPERS(1);
  // [batch, heads, seq, dim] instead of [batch, seq, heads, dim]: only the strides change.
  AttnForwardProblem p = make_bshd_problem(2, 333, 333, 3, 128);
  for (int64_t* t : {&p.q_stride_seq, &p.k_stride_seq, &p.v_stride_seq, &p.o_stride_seq}) *t = 128;
  for (int64_t* t : {&p.q_stride_head, &p.k_stride_head, &p.v_stride_head, &p.o_stride_head}) *t = 333 * 128;
  const uint64_t seed = fresh_seed();
  const DeviceRun r = run_kernel(p, seed, false);
  check_rows(p, r, attn_all_rows(p), seed);
}

TEST(AttnForward, PersistentGridManyTilesSampled) {
  REQUIRE_HOPPERS(1);
  // 2 x 24 x ceil(2000/128) = 768 tiles: every CTA of the persistent grid runs several tiles.
  const AttnForwardProblem p = make_bshd_problem(2, 2000, 2000, 24, 128);
  const uint64_t seed = fresh_seed();
  const DeviceRun r = run_kernel(p, seed, true, 2);
  check_rows(p, r, attn_sample_rows(p, 400, seed), seed);
}

// The split tail (AttnTail::kSplit): shapes whose last round of tiles is split over the grid, ragged key
// blocks included (the partial block is then a helper's). The split run matches the reference on rows of
// the split tiles (the same bounds as every bf16 test) and is the same launch after launch (the merge
// order is fixed); against the whole-tile run on the same inputs, rows of the whole-tile rounds are
// bit-identical (their schedule is unchanged). Split rows differ from whole-tile ones at the level of P's
// bf16 rounding, which is relative to each segment's own running max, not at fp32's.
struct SplitShape {
  Shape s;
  int d;
};
class AttnForwardSplitTail : public ::testing::TestWithParam<SplitShape> {};

TEST_P(AttnForwardSplitTail, MatchesReferenceAndWholeTiles) {
  REQUIRE_HOPPERS(1);
  int sms = 0;
  XSTAGE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  {
    const Shape s = GetParam().s;
    const int d = GetParam().d;
    const AttnForwardProblem p = make_bshd_problem(s.batch, s.seq_q, s.seq_k, s.heads, d);
    const sched::AttnTileConfig cfg = sched::attn_tile_config(d);  // the kernel's tile (192 rows at d = 64)
    const sched::AttnTileScheduler whole(p.seq_q, cfg.block_m, p.heads, p.batch);
    const sched::AttnTileScheduler plan = whole.with_split_tail(
        sched::AttnTileScheduler::grid_size(whole.num_tiles(), sms), (p.seq_k + cfg.block_n - 1) / cfg.block_n,
        sched::attn_split_fixed_blocks(d), sched::attn_split_penalty_pct(d));
    ASSERT_TRUE(plan.split()) << s.seq_q << " x " << s.heads;
    ASSERT_GT(attn_forward_workspace_bytes(p, AttnPrecision::kBf16), 0u);
    EXPECT_EQ(attn_forward_workspace_bytes(p, AttnPrecision::kBf16, AttnTail::kWhole), 0u);
    const uint64_t seed = fresh_seed();
    const DeviceRun split = run_kernel(p, seed, true, 2, AttnTail::kSplit);
    std::vector<AttnRow> tail_rows;  // rows of split tiles, every tail tile's first and last and a few between
    for (AttnRow row : attn_sample_rows(p, 2000, seed)) {
      const int tile = (row.batch * p.heads + row.head) * whole.num_m_blocks + row.row / cfg.block_m;
      if (tile >= plan.tail_begin && tail_rows.size() < 300) tail_rows.push_back(row);
    }
    ASSERT_GE(tail_rows.size(), 100u);
    check_rows(p, split, tail_rows, seed);
    const DeviceRun ref = run_kernel(p, seed, true, 1, AttnTail::kWhole);
    ASSERT_EQ(split.q, ref.q);
    size_t whole_rows = 0, split_rows = 0, differing = 0;
    float worst = 0.f;
    for (int b = 0; b < p.batch; ++b) {
      for (int h = 0; h < p.heads; ++h) {
        for (int i = 0; i < p.seq_q; ++i) {
          const int tile = (b * p.heads + h) * whole.num_m_blocks + i / cfg.block_m;
          const bool in_tail = tile >= plan.tail_begin;
          (in_tail ? split_rows : whole_rows) += 1;
          for (int c = 0; c < d; ++c) {
            const size_t e = size_t(b) * p.o_stride_batch + size_t(i) * p.o_stride_seq + size_t(h) * p.o_stride_head + c;
            if (split.o[e] == ref.o[e]) continue;
            ++differing;
            ASSERT_TRUE(in_tail) << "whole-tile row " << i << " head " << h << " changed";
            worst = std::max(worst, std::fabs(test_bf16_to_float(split.o[e]) - test_bf16_to_float(ref.o[e])));
          }
        }
      }
    }
    std::printf("  split tail d=%d: %zu whole-tile rows bit-identical, %zu split rows, %zu elements differ "
                "from the whole-tile run, by at most %.3e\n", d, whole_rows, split_rows, differing, worst);
    EXPECT_GT(whole_rows, 0u);
    EXPECT_GT(split_rows, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, AttnForwardSplitTail,
                         ::testing::Values(SplitShape{{2, 4096, 3000, 3}, 128},    // batch 2, ragged keys
                                           SplitShape{{1, 8192, 8192, 3}, 128},    // tail 60 of 192 tiles
                                           SplitShape{{1, 14850, 14850, 5}, 128},  // ragged both
                                           SplitShape{{1, 8192, 8192, 5}, 64}),  // a tail at 128 and 192 rows
                         [](const ::testing::TestParamInfo<SplitShape>& i) {
                           const SplitShape& x = i.param;
                           return "b" + std::to_string(x.s.batch) + "_sq" + std::to_string(x.s.seq_q) + "_sk" +
                                  std::to_string(x.s.seq_k) + "_h" + std::to_string(x.s.heads) + "_d" +
                                  std::to_string(x.d);
                         });

TEST(AttnForward, RejectsUnsupportedProblems) {
  AttnForwardProblem p = make_bshd_problem(1, 128, 128, 1, 96);
  alignas(16) static char buf[64];
  AttnForwardArgs a{p, buf, buf, buf, buf, nullptr};
  EXPECT_NE(attn_forward_can_implement(a).find("head_dim"), std::string::npos);
  a.problem = make_bshd_problem(1, 128, 128, 1, 128);
  a.problem.q_stride_seq = 100;
  EXPECT_NE(attn_forward_can_implement(a).find("stride"), std::string::npos);
}

TEST(AttnForward, RejectsABf16WorkspaceSmallerThanItsSplitTail) {
  REQUIRE_HOPPERS(1);  // the split tail's size is the device's schedule
  alignas(256) static char buf[256];
  AttnForwardArgs a{make_bshd_problem(1, 8192, 8192, 5, 128), buf, buf, buf, buf, nullptr};
  ASSERT_GT(attn_forward_workspace_bytes(a.problem, AttnPrecision::kBf16), 0u);
  a.workspace = buf;
  a.workspace_bytes = 64;
  EXPECT_NE(attn_forward_can_implement(a).find("workspace_bytes 64"), std::string::npos);
}

}  // namespace
}  // namespace xstage::attn
