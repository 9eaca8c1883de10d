// GPU tests of the Ulysses attention layer on 2 GPUs: fresh random inputs, poisoned outputs, the
// pre-attention All-to-All checked element by element, every fused output (the TMA bulk-store epilogue,
// piggyback and completion-coupled) bit-identical to the serial ones (our A2A kernel and NCCL), the
// output against the host reference on sampled rows, and repeated iterations of every variant (the
// epoch/flag protocol). On one GPU: the fused kernels with a two-phase tile schedule (remote-first)
// against the local kernel, bit for bit;
// and one rank of a 2- or 3-rank team emulated on one GPU (every owner's buffer local): each row reaches
// its owner's buffer at its local row, ragged shards, rotated and remote-first orders. The same one-GPU
// tests at precision fp8 (the FP8 fused kernels against the local FP8 attention, bit for bit, with joint
// keys), and the public UlyssesAttention on a one-GPU team: its precision checks and fp8 forward.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "gpu_test_support.hpp"
#include "xstage/testing/attn_random.hpp"
#include "xstage/testing/attn_reference.hpp"
#include "ulysses_kernels.hpp"
#include "xstage/testing/ulysses_layer.hpp"
#include "xstage/comm/team.hpp"
#include "xstage/model/error.hpp"
#include "xstage/ulysses/ulysses.hpp"

namespace xstage::attn {
namespace {

using test::fresh_seed;

struct Case {
  const char* name;
  int seq, text, heads;
  UlyssesStorePath path;
  UlyssesTileOrder order;
  AttnPrecision precision = AttnPrecision::kBf16;
};

class UlyssesTwoGpu : public ::testing::TestWithParam<Case> {};

TEST_P(UlyssesTwoGpu, FusedBitIdenticalToSerial) {
  REQUIRE_HOPPERS(2);
  comm::disable_multicast_env();
  const Case c = GetParam();
  auto team = comm::Team::single_process({0, 1});
  UlyssesConfig cfg;
  cfg.seq = c.seq;
  cfg.text = c.text;
  cfg.heads_per_gpu = c.heads;
  cfg.store_path = c.path;
  cfg.tile_order = c.order;
  cfg.precision = c.precision;
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
    if (c.precision == AttnPrecision::kBf16) {
      EXPECT_LT(e.rel_l2, 1e-2) << "rank " << r;
    } else {  // the FP8 attention's correctness bounds (test_attn_fp8.cu)
      EXPECT_GE(e.cosine, 0.995) << "rank " << r;
      EXPECT_LE(e.rel_l1, 6e-2) << "rank " << r;
    }
  }

  // Several back-to-back iterations of every variant (flags are monotonic epochs), then the check.
  for (int it = 0; it < 3; ++it)
    for (UlyssesVariant v : all_ulysses_variants()) layer.enqueue(v);
  layer.synchronize();
  for (UlyssesVariant v : {UlyssesVariant::kFusedTma, UlyssesVariant::kCoupledTma}) {
    const auto again = run(v);
    for (int r = 0; r < n; ++r)
      EXPECT_TRUE(again[r] == serial[r]) << to_string(v) << " after repeated iterations, rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, UlyssesTwoGpu,
    ::testing::Values(Case{"ragged_text_window", 3000 + 77, 77, 2, UlyssesStorePath::kNcclWindow, UlyssesTileOrder::kOwnLast},
                      Case{"ragged_text_natural_order", 3000 + 77, 77, 2, UlyssesStorePath::kNcclWindow, UlyssesTileOrder::kNatural},
                      Case{"aligned_window", 4096, 0, 2, UlyssesStorePath::kNcclWindow, UlyssesTileOrder::kOwnLast},
                      Case{"aligned_natural_order", 4096, 0, 2, UlyssesStorePath::kNcclWindow, UlyssesTileOrder::kNatural},
                      Case{"ragged_peer", 1000, 0, 3, UlyssesStorePath::kPeerPointer, UlyssesTileOrder::kOwnLast},
                      Case{"one_tile_straddles", 200, 0, 1, UlyssesStorePath::kNcclWindow, UlyssesTileOrder::kOwnLast},
                      Case{"multi_wave_ragged", 20000 + 33, 33, 3, UlyssesStorePath::kNcclWindow, UlyssesTileOrder::kOwnLast},
                      Case{"ragged_text_remote_first", 3000 + 77, 77, 2, UlyssesStorePath::kNcclWindow,
                           UlyssesTileOrder::kRemoteFirst},
                      Case{"multi_wave_remote_first", 20000 + 33, 33, 3, UlyssesStorePath::kNcclWindow,
                           UlyssesTileOrder::kRemoteFirst},
                      Case{"fp8_ragged_text_window", 3000 + 77, 77, 2, UlyssesStorePath::kNcclWindow,
                           UlyssesTileOrder::kOwnLast, AttnPrecision::kFp8},
                      Case{"fp8_ragged_peer_natural", 1000, 0, 3, UlyssesStorePath::kPeerPointer,
                           UlyssesTileOrder::kNatural, AttnPrecision::kFp8},
                      Case{"fp8_multi_wave_remote_first", 20000 + 33, 33, 3, UlyssesStorePath::kNcclWindow,
                           UlyssesTileOrder::kRemoteFirst, AttnPrecision::kFp8}),
    [](const ::testing::TestParamInfo<Case>& i) { return std::string(i.param.name); });

// Fresh N(0,1) Q [seq, heads, 128] and K, V [seq + joint, heads, 128] (joint keys after the sequence's) on
// the current device and the local kernel's output of them at `precision` (bf16 bits, the reference of
// the one-GPU fused tests, every tile whole; fp8 on the object's workspace, which the fused calls reuse: args()). The
// buffers are freed with the object.
struct LocalAttention {
  AttnForwardProblem prob;
  AttnPrecision precision = AttnPrecision::kBf16;
  void* qkv[3] = {};
  void* o = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  std::vector<uint16_t> out;
  ~LocalAttention() {
    for (void* t : qkv) cudaFree(t);
    cudaFree(o);
    cudaFree(workspace);
  }
  // The attention call on these buffers at the object's precision (o: nullptr for the fused kernels).
  AttnForwardArgs args(void* out_ptr) const {
    AttnForwardArgs a{prob, qkv[0], qkv[1], qkv[2], out_ptr, nullptr};
    a.precision = precision;
    a.workspace = workspace;
    a.workspace_bytes = workspace_bytes;
    return a;
  }
};
void run_local_attention(int seq, int heads, uint64_t seed, cudaStream_t stream, LocalAttention& la,
                         AttnPrecision precision = AttnPrecision::kBf16, int joint = 0) {
  la.prob = make_bshd_problem(1, seq, seq + joint, heads, 128);
  la.precision = precision;
  const size_t elems = size_t(seq) * heads * 128, kv_elems = size_t(seq + joint) * heads * 128;
  ASSERT_EQ(cudaMalloc(&la.qkv[0], elems * 2), cudaSuccess);
  for (int t = 1; t < 3; ++t) ASSERT_EQ(cudaMalloc(&la.qkv[t], kv_elems * 2), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&la.o, elems * 2), cudaSuccess);
  // Whole tiles: the Ulysses paths equal the local attention that runs every tile on one CTA (AttnTail).
  la.workspace_bytes = attn_forward_workspace_bytes(la.prob, precision, AttnTail::kWhole);
  if (la.workspace_bytes > 0) ASSERT_EQ(cudaMalloc(&la.workspace, la.workspace_bytes), cudaSuccess);
  for (int t = 0; t < 3; ++t)
    ASSERT_EQ(attn_fill_normal_bf16(la.qkv[t], t == 0 ? elems : kv_elems, seed + 7 * t, 1.0f, stream), cudaSuccess);
  ASSERT_EQ(attn_forward_can_implement(la.args(la.o)), "");
  ASSERT_EQ(attn_forward(la.args(la.o), stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  la.out.resize(elems);
  ASSERT_EQ(cudaMemcpy(la.out.data(), la.o, elems * 2, cudaMemcpyDeviceToHost), cudaSuccess);
}

// The fused kernels (TMA bulk piggyback and coupled) on one GPU with every row stored
// locally (a one-rank parameter block, as fa-only-tma) and a two-phase tile schedule (first_m_blocks =
// F): the output equals the local kernel's bit for bit for every F (each tile computed exactly once,
// whatever the order), and every CTA publishes its flag once (one last tile per CTA: the owner's wait
// passes within its bound). At fp8 the reference is the local FP8 attention: the pre-pass is the same,
// the FP8 kernel's epilogue only changes where each normalized row goes.
void two_phase_tile_schedule_keeps_every_bit(AttnPrecision precision) {
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  const int seq = 20000 + 33, hl = 3, d = 128;  // 157 m-blocks x 3 heads: 471 tiles, 3.6 waves of 132
  const size_t elems = size_t(seq) * hl * d;
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  void *o = nullptr, **table = nullptr;
  uint32_t *flags = nullptr, *epoch = nullptr;
  ASSERT_EQ(cudaMalloc(&o, elems * 2), cudaSuccess);
  const size_t flag_bytes = sizeof(uint32_t) * kA2AMaxRanks * kA2AMaxCtas;
  ASSERT_EQ(cudaMalloc(&flags, flag_bytes), cudaSuccess);
  ASSERT_EQ(cudaMemset(flags, 0, flag_bytes), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&epoch, sizeof(uint32_t)), cudaSuccess);
  ASSERT_EQ(cudaMemset(epoch, 0, sizeof(uint32_t)), cudaSuccess);
  void* h_table[2] = {o, flags};
  ASSERT_EQ(cudaMalloc(&table, sizeof(h_table)), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(table, h_table, sizeof(h_table), cudaMemcpyHostToDevice), cudaSuccess);
  const uint64_t seed = fresh_seed();
  LocalAttention la;
  run_local_attention(seq, hl, seed, stream, la, precision);
  if (::testing::Test::HasFatalFailure()) return;
  const AttnForwardProblem& prob = la.prob;
  const std::vector<uint16_t>& ref = la.out;
  std::vector<uint16_t> got(elems);

  A2AEpilogueParams ep{};
  ep.dst = table;
  ep.flags = reinterpret_cast<uint32_t* const*>(table + 1);
  ep.epoch = epoch;
  ep.rank = 0;
  ep.world = 1;
  ep.seq = seq;
  ep.shard_len = seq;
  ep.heads_total = hl;
  ep.head_offset = 0;
  ep.row_rotation = 0;
  const int block_m = sched::attn_block_m(128, precision == AttnPrecision::kFp8);
  const int m_blocks = (seq + block_m - 1) / block_m, grid = attn_fused_a2a_grid(prob, 0, precision);
  ASSERT_GT(grid, 0);
  const AttnForwardArgs args = la.args(nullptr);
  for (int f : {1, 79, m_blocks - 1, 0}) {
    ep.first_m_blocks = f;
    ASSERT_EQ(attn_fused_a2a_can_implement(args, ep), "");
    for (FusedEpilogue mode : {FusedEpilogue::kPiggybackTma, FusedEpilogue::kCompletionCoupledTma}) {
      ASSERT_EQ(cudaMemsetAsync(o, 0xFF, elems * 2, stream), cudaSuccess);
      ASSERT_EQ(attn_forward_fused_a2a(args, ep, mode, stream), cudaSuccess);
      ASSERT_EQ(a2a_wait(flags, epoch, 1, grid, 0, 10'000'000'000ull, stream), cudaSuccess);
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess) << "first_m_blocks " << f << " mode " << int(mode);
      ASSERT_EQ(cudaMemcpy(got.data(), o, elems * 2, cudaMemcpyDeviceToHost), cudaSuccess);
      size_t diff = 0;
      for (size_t i = 0; i < elems; ++i) diff += got[i] != ref[i];
      EXPECT_EQ(diff, 0u) << attn_precision_name(precision) << " first_m_blocks " << f << " mode " << int(mode)
                          << " (seed " << seed << ")";
    }
  }
  ep.first_m_blocks = m_blocks + 1;
  EXPECT_NE(attn_fused_a2a_can_implement(args, ep).find("first_m_blocks"), std::string::npos);
  if (precision == AttnPrecision::kFp8) {
    // The fused kernels take the FP8 workspace through the same check as the local path.
    AttnForwardArgs no_ws = args;
    no_ws.workspace = nullptr;
    ep.first_m_blocks = 0;
    EXPECT_NE(attn_fused_a2a_can_implement(no_ws, ep).find("workspace"), std::string::npos);
  }
  cudaFree(o);
  cudaFree(flags);
  cudaFree(epoch);
  cudaFree(table);
  cudaStreamDestroy(stream);
}

TEST(UlyssesOneGpu, TwoPhaseTileScheduleKeepsEveryBit) {
  REQUIRE_HOPPERS(1);
  two_phase_tile_schedule_keeps_every_bit(AttnPrecision::kBf16);
}

TEST(UlyssesOneGpu, Fp8TwoPhaseTileScheduleKeepsEveryBit) {
  REQUIRE_HOPPERS(1);
  two_phase_tile_schedule_keeps_every_bit(AttnPrecision::kFp8);
}

// Rank `rank` of a `world`-rank team on one GPU: every owner's output buffer and flag array is local,
// so the fused kernel's remote-store mapping (owners, local rows, tiles straddling two owners, the
// rotation's wrap, rows past seq, the remote-first schedule) is checked without a second GPU: each kernel row's
// output must reach dst[owner][local row][head_offset + h] bit for bit (the local kernel's output of the
// same Q row), every other element stays poisoned, and every CTA's flag reaches every owner. `joint` keys
// (replicated joint tokens) follow the sequence's in K and V; at fp8 the reference is the local FP8
// attention of the same Q, K, V.
struct EmulatedShape {
  int seq, world, rank;
  bool own_last;
  int joint = 0;
};
void emulated_rank_stores_every_row_to_its_owner(AttnPrecision precision, const std::vector<EmulatedShape>& shapes) {
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  const int d = 128, hl = 2;
  const uint64_t seed = fresh_seed();
  for (const EmulatedShape& sh : shapes) {
    const int seq = sh.seq, world = sh.world, rank = sh.rank, ht = hl * world;
    const int shard = a2a_shard_len(seq, world);
    LocalAttention la;
    run_local_attention(seq, hl, seed + seq, stream, la, precision, sh.joint);
    if (::testing::Test::HasFatalFailure()) return;
    const AttnForwardProblem& prob = la.prob;
    const std::vector<uint16_t>& ref = la.out;

    std::vector<void*> table(2 * world);
    std::vector<size_t> own_elems(world);
    for (int p = 0; p < world; ++p) {
      own_elems[p] = size_t(a2a_local_len(seq, world, p)) * ht * d;
      ASSERT_EQ(cudaMalloc(&table[p], own_elems[p] * 2), cudaSuccess);
      ASSERT_EQ(cudaMalloc(&table[world + p], sizeof(uint32_t) * kA2AMaxRanks * kA2AMaxCtas), cudaSuccess);
    }
    void** d_table = nullptr;
    ASSERT_EQ(cudaMalloc(&d_table, sizeof(void*) * 2 * world), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(d_table, table.data(), sizeof(void*) * 2 * world, cudaMemcpyHostToDevice), cudaSuccess);
    uint32_t* epoch = nullptr;
    ASSERT_EQ(cudaMalloc(&epoch, sizeof(uint32_t)), cudaSuccess);
    ASSERT_EQ(cudaMemset(epoch, 0, sizeof(uint32_t)), cudaSuccess);

    A2AEpilogueParams ep{};
    ep.dst = d_table;
    ep.flags = reinterpret_cast<uint32_t* const*>(d_table + world);
    ep.epoch = epoch;
    ep.rank = rank;
    ep.world = world;
    ep.seq = seq;
    ep.shard_len = shard;
    ep.heads_total = ht;
    ep.head_offset = rank * hl;
    ep.row_rotation = sh.own_last ? a2a_own_rows_last_rotation(seq, world, rank) : 0;
    const int grid = attn_fused_a2a_grid(prob, 0, precision);
    const AttnForwardArgs args = la.args(nullptr);
    for (int phased = 0; phased < 2; ++phased) {
      for (FusedEpilogue mode : {FusedEpilogue::kPiggybackTma, FusedEpilogue::kCompletionCoupledTma}) {
        ep.first_m_blocks = phased && sh.own_last ? a2a_remote_m_blocks(seq, world, rank, 128) : 0;
        for (int p = 0; p < world; ++p) {
          ASSERT_EQ(cudaMemsetAsync(table[p], 0xFF, own_elems[p] * 2, stream), cudaSuccess);
          ASSERT_EQ(cudaMemsetAsync(table[world + p], 0, sizeof(uint32_t) * kA2AMaxRanks * kA2AMaxCtas, stream), cudaSuccess);
        }
        const std::string what = std::string(attn_precision_name(precision)) + " seq " + std::to_string(seq) +
                                 " joint " + std::to_string(sh.joint) + " world " + std::to_string(world) + " rank " +
                                 std::to_string(rank) + (sh.own_last ? " own-last" : " natural") +
                                 (phased ? " remote-first" : "") + " mode " +
                                 std::to_string(int(mode)) + " (seed " + std::to_string(seed) + ")";
        SCOPED_TRACE(what);
        ASSERT_EQ(attn_fused_a2a_can_implement(args, ep), "");
        ASSERT_EQ(attn_forward_fused_a2a(args, ep, mode, stream), cudaSuccess);
        ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
        size_t bad = 0, poisoned_ok = 0;
        for (int p = 0; p < world; ++p) {
          std::vector<uint16_t> got(own_elems[p]);
          ASSERT_EQ(cudaMemcpy(got.data(), table[p], own_elems[p] * 2, cudaMemcpyDeviceToHost), cudaSuccess);
          for (int lr = 0; lr < a2a_local_len(seq, world, p); ++lr) {
            const int g = p * shard + lr;                                   // sequence row
            const int i = (g - ep.row_rotation + seq) % seq;                // its kernel row
            for (int h = 0; h < ht; ++h) {
              const uint16_t* a = &got[(size_t(lr) * ht + h) * d];
              if (h >= ep.head_offset && h < ep.head_offset + hl) {
                bad += std::memcmp(a, &ref[(size_t(i) * hl + (h - ep.head_offset)) * d], d * 2) != 0;
              } else {
                for (int j = 0; j < d; ++j) poisoned_ok += a[j] == 0xFFFF;
              }
            }
          }
          std::vector<uint32_t> flags(size_t(kA2AMaxRanks) * kA2AMaxCtas);
          ASSERT_EQ(cudaMemcpy(flags.data(), table[world + p], flags.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
          size_t missing = 0;
          for (int c = 0; c < grid; ++c) missing += flags[size_t(rank) * kA2AMaxCtas + c] != 1u;
          EXPECT_EQ(missing, 0u) << "CTA flags missing at owner " << p << ", " << what;
        }
        EXPECT_EQ(bad, 0u) << "rows differing from the local kernel's, " << what;
        EXPECT_EQ(poisoned_ok, size_t(seq) * (ht - hl) * d) << "other ranks' heads written, " << what;
      }
    }
    for (void* t : table) cudaFree(t);
    cudaFree(d_table);
    cudaFree(epoch);
  }
  cudaStreamDestroy(stream);
}

TEST(UlyssesOneGpu, EmulatedRankStoresEveryRowToItsOwner) {
  REQUIRE_HOPPERS(1);
  emulated_rank_stores_every_row_to_its_owner(
      AttnPrecision::kBf16, {{3000 + 77, 2, 0, true}, {3000 + 77, 2, 1, true}, {3000 + 77, 2, 0, false},
                             {1000, 3, 1, true}, {1000, 3, 2, true}, {20000 + 33, 3, 0, true}, {200, 2, 0, true},
                             {40, 3, 1, true}});
}

// The FP8 fused kernels (piggyback and completion-coupled, natural and remote-first schedules) equal the
// local FP8 attention followed by the All-to-All, bit for bit: world 2 and 3, ragged shards, rotated and
// natural orders, with and without joint keys.
TEST(UlyssesOneGpu, Fp8EmulatedRankStoresEveryRowToItsOwner) {
  REQUIRE_HOPPERS(1);
  emulated_rank_stores_every_row_to_its_owner(
      AttnPrecision::kFp8, {{3000 + 77, 2, 0, true, 77}, {3000 + 77, 2, 1, true, 77}, {3000 + 77, 2, 0, false, 77},
                            {1000, 3, 1, true}, {1000, 3, 2, true, 40}, {20000 + 33, 3, 0, true, 33},
                            {200, 2, 0, true, 5}, {40, 3, 1, true}});
}

// Contiguous [batch, rows, heads, dim] view of `data`.
BshdView bshd(const void* data, int64_t batch, int64_t rows, int64_t heads, int64_t dim) {
  BshdView v;
  v.data = data;
  const int64_t size[4] = {batch, rows, heads, dim}, stride[4] = {rows * heads * dim, heads * dim, dim, 1};
  for (int i = 0; i < 4; ++i) {
    v.size[i] = size[i];
    v.stride[i] = stride[i];
  }
  return v;
}

// The limits' precision checks need no GPU (a static function).
TEST(UlyssesApi, LimitsNameThePrecision) {
  ulysses::UlyssesLimits l;
  l.max_seq_local = 1024;
  l.heads = 4;
  l.precision = AttnPrecision::kFp8;
  EXPECT_EQ(ulysses::UlyssesAttention::limits_error(l, 2), "");
  l.precision = static_cast<AttnPrecision>(7);
  const std::string bad = ulysses::UlyssesAttention::limits_error(l, 2);
  EXPECT_NE(bad.find("precision 7"), std::string::npos) << bad;
  EXPECT_NE(bad.find("bf16, fp8"), std::string::npos) << bad;
  l.precision = AttnPrecision::kFp8;
  l.head_dim = 64;
  const std::string hd = ulysses::UlyssesAttention::limits_error(l, 2);
  EXPECT_NE(hd.find("head_dim 64 with precision fp8"), std::string::npos) << hd;
}

// The public API on a one-GPU team (world 1: every store local, no rotation): an object created for bf16
// refuses an fp8 forward naming the field; reserve() with precision fp8 adds the workspace; the fp8
// forward (fused attention + joint queries' attention) equals the local FP8 attention over the sequence
// and joint keys bit for bit, and the bf16 forward on the same object still equals the local bf16 one.
TEST(UlyssesApiOneGpu, Fp8ForwardEqualsLocalFp8Attention) {
  REQUIRE_HOPPERS(1);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  comm::disable_multicast_env();
  auto team = comm::Team::single_process({0});
  cudaStream_t stream = team.local_ranks()[0].stream;
  const int seq = 3000 + 77, T = 77, H = 4, D = 128;
  const size_t row = size_t(H) * D;
  const uint64_t seed = fresh_seed();
  // q, k, v [1, seq, H, D]; joint q [1, T, H, D]; keys and values [1, seq + T, H, D] (the joint rows last).
  void *q = nullptr, *kk = nullptr, *vv = nullptr, *jq = nullptr, *out = nullptr, *jout = nullptr, *ref = nullptr,
       *jref = nullptr, *ws = nullptr;
  for (void** p : {&q, &out, &ref}) ASSERT_EQ(cudaMalloc(p, seq * row * 2), cudaSuccess);
  for (void** p : {&kk, &vv}) ASSERT_EQ(cudaMalloc(p, (seq + T) * row * 2), cudaSuccess);
  for (void** p : {&jq, &jout, &jref}) ASSERT_EQ(cudaMalloc(p, T * row * 2), cudaSuccess);
  ASSERT_EQ(attn_fill_normal_bf16(q, seq * row, seed, 1.0f, stream), cudaSuccess);
  ASSERT_EQ(attn_fill_normal_bf16(kk, (seq + T) * row, seed + 1, 1.0f, stream), cudaSuccess);
  ASSERT_EQ(attn_fill_normal_bf16(vv, (seq + T) * row, seed + 2, 1.0f, stream), cudaSuccess);
  ASSERT_EQ(attn_fill_normal_bf16(jq, T * row, seed + 3, 1.0f, stream), cudaSuccess);
  const AttnForwardProblem main_prob = make_bshd_problem(1, seq, seq + T, H, D),
                           joint_prob = make_bshd_problem(1, T, seq + T, H, D);
  const size_t ws_bytes = std::max(attn_forward_workspace_bytes(main_prob, AttnPrecision::kFp8),
                                   attn_forward_workspace_bytes(joint_prob, AttnPrecision::kFp8));
  ASSERT_EQ(cudaMalloc(&ws, ws_bytes), cudaSuccess);
  auto reference = [&](AttnPrecision p, std::vector<uint16_t>& o, std::vector<uint16_t>& jo) {
    for (auto [prob, qq, dst] : {std::tuple{main_prob, q, ref}, std::tuple{joint_prob, jq, jref}}) {
      AttnForwardArgs a{prob, qq, kk, vv, dst, nullptr};
      a.precision = p;
      a.workspace = ws;
      a.workspace_bytes = ws_bytes;
      ASSERT_EQ(attn_forward_can_implement(a), "");
      ASSERT_EQ(attn_forward(a, stream), cudaSuccess);
    }
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    o.resize(seq * row);
    jo.resize(T * row);
    ASSERT_EQ(cudaMemcpy(o.data(), ref, o.size() * 2, cudaMemcpyDeviceToHost), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(jo.data(), jref, jo.size() * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  };

  ulysses::UlyssesLimits lim;
  lim.max_seq_local = seq;
  lim.heads = H;
  lim.head_dim = D;
  lim.max_joint = T;
  ulysses::UlyssesAttention u(team, lim);
  ulysses::UlyssesForwardArgs a;
  a.seq = seq;
  a.q = bshd(q, 1, seq, H, D);
  a.k = bshd(kk, 1, seq, H, D);  // the sequence's rows; the joint rows are a view past them
  a.v = bshd(vv, 1, seq, H, D);
  a.joint_q = bshd(jq, 1, T, H, D);
  a.joint_k = bshd(static_cast<char*>(kk) + seq * row * 2, 1, T, H, D);
  a.joint_v = bshd(static_cast<char*>(vv) + seq * row * 2, 1, T, H, D);
  a.out = bshd(out, 1, seq, H, D);
  a.joint_out = bshd(jout, 1, T, H, D);
  a.precision = AttnPrecision::kFp8;
  const std::string refused = u.can_implement(a);
  EXPECT_NE(refused.find("precision fp8"), std::string::npos) << refused;
  EXPECT_NE(refused.find("bf16 only"), std::string::npos) << refused;
  EXPECT_THROW(u.forward(a, stream), InputError);
  a.precision = static_cast<AttnPrecision>(5);
  EXPECT_NE(u.can_implement(a).find("precision 5"), std::string::npos) << u.can_implement(a);

  lim.precision = AttnPrecision::kFp8;
  u.reserve(lim);
  EXPECT_EQ(u.limits().precision, AttnPrecision::kFp8);
  std::vector<uint16_t> got(seq * row), jgot(T * row), want, jwant;
  for (AttnPrecision p : {AttnPrecision::kFp8, AttnPrecision::kBf16}) {
    SCOPED_TRACE(std::string(attn_precision_name(p)) + " (seed " + std::to_string(seed) + ")");
    reference(p, want, jwant);
    if (::testing::Test::HasFatalFailure()) break;
    a.precision = p;
    ASSERT_EQ(u.can_implement(a), "");
    ASSERT_EQ(cudaMemsetAsync(out, 0xFF, seq * row * 2, stream), cudaSuccess);
    ASSERT_EQ(cudaMemsetAsync(jout, 0xFF, T * row * 2, stream), cudaSuccess);
    for (int it = 0; it < 2; ++it) u.forward(a, stream);  // twice: the epoch/flag protocol and the workspace reuse
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    EXPECT_EQ(u.last_failure(), "");  // no wait expired (the record stays empty after the reserve, too)
    ASSERT_EQ(cudaMemcpy(got.data(), out, got.size() * 2, cudaMemcpyDeviceToHost), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(jgot.data(), jout, jgot.size() * 2, cudaMemcpyDeviceToHost), cudaSuccess);
    size_t diff = 0, jdiff = 0;
    for (size_t i = 0; i < got.size(); ++i) diff += got[i] != want[i];
    for (size_t i = 0; i < jgot.size(); ++i) jdiff += jgot[i] != jwant[i];
    EXPECT_EQ(diff, 0u) << "out elements differing from the local attention";
    EXPECT_EQ(jdiff, 0u) << "joint_out elements differing from the local attention";
  }
  for (void* p : {q, kk, vv, jq, out, jout, ref, jref, ws}) cudaFree(p);
}

}  // namespace
}  // namespace xstage::attn
