// GPU tests of the Ulysses attention layer on 2 GPUs: fresh random inputs, poisoned outputs, the
// pre-attention All-to-All checked element by element, every fused output (the TMA bulk-store epilogue,
// piggyback and completion-coupled) bit-identical to the serial ones (our A2A kernel and NCCL), the
// output against the host reference on sampled rows, and repeated iterations of every variant (the
// epoch/flag protocol). On one GPU: the fused kernels with a two-phase tile schedule (remote-first)
// against the local kernel, bit for bit;
// and one rank of a 2- or 3-rank team emulated on one GPU (every owner's buffer local): each row reaches
// its owner's buffer at its local row, ragged shards, rotated and remote-first orders.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cstring>
#include <random>
#include <vector>

#include "xstage/testing/attn_random.hpp"
#include "xstage/testing/attn_reference.hpp"
#include "ulysses_kernels.hpp"
#include "xstage/testing/ulysses_layer.hpp"
#include "xstage/comm/team.hpp"

namespace xstage::attn {
namespace {

bool is_hopper(int d) {
  int major = 0, minor = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, d);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, d);
  return major == 9 && minor == 0;
}

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
  UlyssesTileOrder order;
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
  cfg.tile_order = c.order;
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
                           UlyssesTileOrder::kRemoteFirst}),
    [](const ::testing::TestParamInfo<Case>& i) { return std::string(i.param.name); });

// Fresh N(0,1) Q, K, V [seq, heads, 128] on the current device and the local kernel's output of them (bf16
// bits, the reference of the one-GPU fused tests). The buffers are freed with the object.
struct LocalAttention {
  AttnForwardProblem prob;
  void* qkv[3] = {};
  void* o = nullptr;
  std::vector<uint16_t> out;
  ~LocalAttention() {
    for (void* t : qkv) cudaFree(t);
    cudaFree(o);
  }
};
void run_local_attention(int seq, int heads, uint64_t seed, cudaStream_t stream, LocalAttention& la) {
  la.prob = make_bshd_problem(1, seq, seq, heads, 128);
  const size_t elems = size_t(seq) * heads * 128;
  for (auto*& t : la.qkv) ASSERT_EQ(cudaMalloc(&t, elems * 2), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&la.o, elems * 2), cudaSuccess);
  for (int t = 0; t < 3; ++t) ASSERT_EQ(attn_fill_normal_bf16(la.qkv[t], elems, seed + 7 * t, 1.0f, stream), cudaSuccess);
  ASSERT_EQ(attn_forward(AttnForwardArgs{la.prob, la.qkv[0], la.qkv[1], la.qkv[2], la.o, nullptr}, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  la.out.resize(elems);
  ASSERT_EQ(cudaMemcpy(la.out.data(), la.o, elems * 2, cudaMemcpyDeviceToHost), cudaSuccess);
}

// The fused kernels (TMA bulk piggyback and coupled) on one GPU with every row stored
// locally (a one-rank parameter block, as fa-only-tma) and a two-phase tile schedule (first_m_blocks =
// F): the output equals the local kernel's bit for bit for every F (each tile computed exactly once,
// whatever the order), and every CTA publishes its flag once (one last tile per CTA: the owner's wait
// passes within its bound).
TEST(UlyssesOneGpu, TwoPhaseTileScheduleKeepsEveryBit) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1 || !is_hopper(0)) GTEST_SKIP() << "no sm_90 CUDA device";
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
  run_local_attention(seq, hl, seed, stream, la);
  if (HasFatalFailure()) return;
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
  const int m_blocks = (seq + 127) / 128, grid = attn_fused_a2a_grid(prob, 0);
  ASSERT_GT(grid, 0);
  const AttnForwardArgs args{prob, la.qkv[0], la.qkv[1], la.qkv[2], nullptr, nullptr};
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
      EXPECT_EQ(diff, 0u) << "first_m_blocks " << f << " mode " << int(mode) << " (seed " << seed << ")";
    }
  }
  ep.first_m_blocks = m_blocks + 1;
  EXPECT_NE(attn_fused_a2a_can_implement(args, ep).find("first_m_blocks"), std::string::npos);
  cudaFree(o);
  cudaFree(flags);
  cudaFree(epoch);
  cudaFree(table);
  cudaStreamDestroy(stream);
}

// Rank `rank` of a `world`-rank team on one GPU: every owner's output buffer and flag array is local,
// so the fused kernel's remote-store mapping (owners, local rows, tiles straddling two owners, the
// rotation's wrap, rows past seq, the remote-first schedule) is checked without a second GPU: each kernel row's
// output must reach dst[owner][local row][head_offset + h] bit for bit (the local kernel's output of the
// same Q row), every other element stays poisoned, and every CTA's flag reaches every owner.
TEST(UlyssesOneGpu, EmulatedRankStoresEveryRowToItsOwner) {
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1 || !is_hopper(0)) GTEST_SKIP() << "no sm_90 CUDA device";
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  const int d = 128, hl = 2;
  struct Shape {
    int seq, world, rank;
    bool own_last;
  };
  const Shape shapes[] = {{3000 + 77, 2, 0, true}, {3000 + 77, 2, 1, true}, {3000 + 77, 2, 0, false},
                          {1000, 3, 1, true},      {1000, 3, 2, true},      {20000 + 33, 3, 0, true},
                          {200, 2, 0, true},       {40, 3, 1, true}};
  const uint64_t seed = fresh_seed();
  for (const Shape& sh : shapes) {
    const int seq = sh.seq, world = sh.world, rank = sh.rank, ht = hl * world;
    const int shard = a2a_shard_len(seq, world);
    LocalAttention la;
    run_local_attention(seq, hl, seed + seq, stream, la);
    if (HasFatalFailure()) return;
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
    const int grid = attn_fused_a2a_grid(prob, 0);
    const AttnForwardArgs args{prob, la.qkv[0], la.qkv[1], la.qkv[2], nullptr, nullptr};
    for (int phased = 0; phased < 2; ++phased) {
      for (FusedEpilogue mode : {FusedEpilogue::kPiggybackTma, FusedEpilogue::kCompletionCoupledTma}) {
        ep.first_m_blocks = phased && sh.own_last ? a2a_remote_m_blocks(seq, world, rank, 128) : 0;
        for (int p = 0; p < world; ++p) {
          ASSERT_EQ(cudaMemsetAsync(table[p], 0xFF, own_elems[p] * 2, stream), cudaSuccess);
          ASSERT_EQ(cudaMemsetAsync(table[world + p], 0, sizeof(uint32_t) * kA2AMaxRanks * kA2AMaxCtas, stream), cudaSuccess);
        }
        const std::string what = "seq " + std::to_string(seq) + " world " + std::to_string(world) + " rank " +
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

}  // namespace
}  // namespace xstage::attn
