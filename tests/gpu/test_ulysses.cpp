// GPU tests of the Ulysses attention layer on 2 GPUs: fresh random inputs, poisoned outputs, the
// pre-attention All-to-All checked element by element, every fused output (staged, direct, TMA bulk;
// piggyback and completion-coupled) bit-identical to the serial ones (our A2A kernel and NCCL), the output against the host reference
// on sampled rows, and repeated iterations of every variant (the epoch/flag protocol).
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cstring>
#include <random>
#include <vector>

#include "attn_reference.hpp"
#include "ulysses_layer.hpp"
#include "xstage/comm/team.hpp"

namespace xstage::attn {
namespace {

bool have_two_hoppers() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n < 2) return false;
  for (int d = 0; d < 2; ++d) {
    int major = 0, minor = 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, d);
    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, d);
    if (major != 9 || minor != 0) return false;
  }
  return true;
}

uint64_t fresh_seed() {
  std::random_device rd;
  return (uint64_t(rd()) << 32) ^ rd();
}

struct Case {
  const char* name;
  int seq, text, heads;
  UlyssesStorePath path;
  bool own_rows_last;
};

class UlyssesTwoGpu : public ::testing::TestWithParam<Case> {};

TEST_P(UlyssesTwoGpu, FusedBitIdenticalToSerial) {
  if (!have_two_hoppers()) GTEST_SKIP() << "needs 2 sm_90 GPUs";
  comm::disable_multicast_env();
  const Case c = GetParam();
  auto team = comm::Team::single_process({0, 1});
  UlyssesConfig cfg;
  cfg.seq = c.seq;
  cfg.text = c.text;
  cfg.heads_per_gpu = c.heads;
  cfg.store_path = c.path;
  cfg.own_rows_last = c.own_rows_last;
  UlyssesLayer layer(team, cfg);
  const int n = layer.world(), hl = c.heads, d = 128, ht = layer.heads_total();
  const int shard = a2a_shard_len(c.seq, n);
  const uint64_t seed = fresh_seed();
  layer.fill_inputs(seed);
  layer.pre_attention_a2a();
  layer.synchronize();

  // Pre-attention All-to-All: q_full[r][g][h] == x[owner(g)][local(g)][r*hl + h] for q, k, v.
  for (int t = 0; t < 3; ++t) {
    std::vector<std::vector<uint16_t>> x(n);
    for (int p = 0; p < n; ++p) x[p] = layer.read_input(p, t);
    for (int r = 0; r < n; ++r) {
      const auto full = layer.read_qkv(r, t);
      size_t bad = 0;
      for (int i = 0; i < c.seq; ++i) {
        const int g = t == 0 ? a2a_sequence_row(i, layer.row_rotation(r), c.seq) : i;  // Q rotated
        const A2ARowOwner o = a2a_row_owner(g, shard);
        for (int h = 0; h < hl; ++h)
          bad += std::memcmp(&full[(size_t(i) * hl + h) * d], &x[o.owner][(size_t(o.local_row) * ht + r * hl + h) * d], d * 2) != 0;
      }
      EXPECT_EQ(bad, 0u) << "pre-attention A2A tensor " << t << " rank " << r;
    }
  }

  auto run = [&](UlyssesVariant v) { return layer.run_and_read_outputs(v); };
  const auto serial = run(UlyssesVariant::kSerialOurs);
  for (int r = 0; r < n; ++r) {
    size_t poisoned = 0;
    for (uint16_t b : serial[r]) poisoned += b == 0xFFFF;
    EXPECT_EQ(poisoned, 0u) << "unwritten output elements on rank " << r << " (seed " << seed << ")";
  }
  std::vector<std::vector<uint16_t>> attn_local(n);  // the local kernel's attention output (serial-ours)
  for (int r = 0; r < n; ++r) attn_local[r] = layer.read_local_attention(r);
  std::vector<UlyssesVariant> checked = {UlyssesVariant::kSerialNccl, UlyssesVariant::kSerialTma};
  for (UlyssesVariant v : fused_ulysses_variants()) checked.push_back(v);  // fused-tma, coupled-tma included
  for (UlyssesVariant v : checked) {
    const auto out = run(v);
    if (v == UlyssesVariant::kSerialTma) {
      // fa-only-tma (the fused-tma kernel storing locally) computes the local kernel's bits.
      for (int r = 0; r < n; ++r)
        EXPECT_TRUE(layer.read_local_attention(r) == attn_local[r])
            << "fa-only-tma attention output differs from fa-only on rank " << r << " (seed " << seed << ")";
    }
    for (int r = 0; r < n; ++r) {
      ASSERT_EQ(out[r].size(), serial[r].size());
      size_t diff = 0;
      for (size_t i = 0; i < out[r].size(); ++i) diff += out[r][i] != serial[r][i];
      EXPECT_EQ(diff, 0u) << to_string(v) << " differs from serial-ours on rank " << r << " in " << diff
                          << " elements (seed " << seed << ")";
    }
  }

  // The layer's output against the host reference (fp64) on sampled rows of every rank's heads.
  for (int r = 0; r < n; ++r) {
    const auto q = layer.read_qkv(r, 0), k = layer.read_qkv(r, 1), v = layer.read_qkv(r, 2);
    const AttnForwardProblem prob = make_bshd_problem(1, c.seq, c.seq, hl, d);
    const auto rows = attn_sample_rows(prob, 24, seed + r);  // kernel query rows (Q rotated)
    std::vector<float> ref, lse;
    attn_reference_rows(prob, q.data(), k.data(), v.data(), rows, AttnRefPrecision::kExact, ref, lse);
    std::vector<float> got;
    for (const AttnRow& row : rows) {
      const A2ARowOwner o = a2a_row_owner(a2a_sequence_row(row.row, layer.row_rotation(r), c.seq), shard);
      const uint16_t* src = &serial[o.owner][(size_t(o.local_row) * ht + r * hl + row.head) * d];
      for (int j = 0; j < d; ++j) got.push_back(bf16_to_float(src[j]));
    }
    const AttnErrorStats e = attn_compare(got, ref);
    EXPECT_EQ(e.non_finite, 0u);
    EXPECT_LT(e.rel_l2, 1e-2) << "rank " << r;
  }

  // Several back-to-back iterations of every variant (flags are monotonic epochs), then the check.
  for (int it = 0; it < 3; ++it)
    for (UlyssesVariant v : all_ulysses_variants()) layer.enqueue(v);
  layer.synchronize();
  for (UlyssesVariant v : {UlyssesVariant::kFused, UlyssesVariant::kFusedTma}) {
    const auto again = run(v);
    for (int r = 0; r < n; ++r)
      EXPECT_TRUE(again[r] == serial[r]) << to_string(v) << " after repeated iterations, rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, UlyssesTwoGpu,
    ::testing::Values(Case{"ragged_text_window", 3000 + 77, 77, 2, UlyssesStorePath::kNcclWindow, true},
                      Case{"ragged_text_natural_order", 3000 + 77, 77, 2, UlyssesStorePath::kNcclWindow, false},
                      Case{"aligned_window", 4096, 0, 2, UlyssesStorePath::kNcclWindow, true},
                      Case{"aligned_natural_order", 4096, 0, 2, UlyssesStorePath::kNcclWindow, false},
                      Case{"ragged_peer", 1000, 0, 3, UlyssesStorePath::kPeerPointer, true},
                      Case{"one_tile_straddles", 200, 0, 1, UlyssesStorePath::kNcclWindow, true},
                      Case{"multi_wave_ragged", 20000 + 33, 33, 3, UlyssesStorePath::kNcclWindow, true}),
    [](const ::testing::TestParamInfo<Case>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace xstage::attn
