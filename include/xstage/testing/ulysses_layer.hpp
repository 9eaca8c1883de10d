// Ulysses attention layer over a team of GPUs, in the DiT layout: sequence-sharded Q, K, V
// [local_seq, heads_total, head_dim] → pre-attention All-to-All (NCCL) → attention over the full
// sequence for this rank's heads → post-attention All-to-All → sequence-sharded output
// [local_seq, heads_total, head_dim] in a symmetric buffer. Joint (text) tokens are appended to the
// sequence and sharded like the others: seq = image tokens + text tokens; the last shard may be
// shorter and a query tile may straddle two owners.
//
// Query order: rank r's Q arrives from the pre-attention All-to-All rotated so that its own rows come
// last (row_rotation); every path (local epilogue, A2A kernels, NCCL chunks) uses the same order. With
// UlyssesTileOrder::kRemoteFirst the fused kernels (and fa-only-tma, the same kernel) also schedule every
// tile holding other owners' rows before any own-row tile, across heads (first_m_blocks).
//
// Variants of the post-attention path (all on the same attention mainloop):
//   fa-only             attention, local epilogue ([seq, heads_per_gpu, d] on this rank)
//   a2a-ours / a2a-nccl the post-attention All-to-All alone: remote-store kernel + owner's wait /
//                       NCCL grouped send/recv + unpack into the DiT layout
//   serial-ours / serial-nccl  fa-only, then the matching All-to-All
//   fused-tma           remote stores from the attention epilogue as TMA bulk copies: each warp stages
//                       its 16 rows, one 256-byte cp.async.bulk per row, no named barrier per tile; one
//                       flag per CTA, owner's wait
//   coupled-tma         fused-tma with a remote-completion wait (cp.async.bulk.wait_group 0) after
//                       every tile: the completion-coupled counterfactual, like for like with fused-tma
//   fa-only-tma         the fused-tma kernel (same SASS) with a one-rank parameter block: every row
//                       bulk-stored to the local [seq, heads_per_gpu, d] buffer, as fa-only writes it
//   serial-tma          fa-only-tma, then a2a-ours: the serial baseline like for like with fused-tma
//
// Precision (UlyssesConfig::precision): every variant's attention (attn_forward and the fused kernels)
// runs at it; fp8 quantizes on a per-rank workspace in each call (the pre-pass is part of every timed
// iteration). The All-to-Alls move the bf16 output either way.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "ulysses_epilogue.hpp"
#include "xstage/attn/forward.hpp"
#include "xstage/sched/attn_tile_config.hpp"
#include "xstage/comm/team.hpp"
#include "xstage/comm/window.hpp"

namespace xstage::attn {

enum class UlyssesVariant {
  kFaOnly,
  kA2AOurs,
  kA2ANccl,
  kSerialOurs,
  kSerialNccl,
  kFusedTma,
  kCoupledTma,
  kFaOnlyTma,
  kSerialTma,
};
const char* to_string(UlyssesVariant v);
bool parse_ulysses_variant(const std::string& s, UlyssesVariant* out);
std::vector<UlyssesVariant> all_ulysses_variants();
// The variants whose attention kernel stores the output to its owners (fused-tma, coupled-tma).
std::vector<UlyssesVariant> fused_ulysses_variants();
bool ulysses_variant_is_fused(UlyssesVariant v);
// Every variant name, comma separated (for messages).
std::string ulysses_variant_names();

enum class UlyssesStorePath { kNcclWindow, kPeerPointer };

// Records a timing event on `stream`: an external record node when the stream is being captured into a
// CUDA graph (it then records at every replay), a plain record otherwise (the external flag is refused
// outside a capture).
cudaError_t record_timing_event(cudaEvent_t event, cudaStream_t stream);

struct UlyssesConfig {
  int seq = 0;            // total tokens (image + text)
  int text = 0;           // of which joint text tokens at the end (for reporting; sharded like the rest)
  int heads_per_gpu = 0;
  int head_dim = 128;
  UlyssesStorePath store_path = UlyssesStorePath::kNcclWindow;
  // X-Stage-aware query order (above).
  UlyssesTileOrder tile_order = UlyssesTileOrder::kOwnLast;
  AttnPrecision precision = AttnPrecision::kBf16;  // of every variant's attention
  uint64_t wait_timeout_ns = 10'000'000'000ull;
};

// Empty when the configuration can run on a team of `world` GPUs, else a one-line reason naming the field.
std::string ulysses_config_error(const UlyssesConfig& c, int world);

class UlyssesLayer {
 public:
  UlyssesLayer(comm::Team& team, const UlyssesConfig& cfg);
  ~UlyssesLayer();
  UlyssesLayer(const UlyssesLayer&) = delete;
  UlyssesLayer& operator=(const UlyssesLayer&) = delete;

  const UlyssesConfig& config() const { return cfg_; }
  int world() const { return world_; }
  int heads_total() const { return cfg_.heads_per_gpu * world_; }
  int local_len(int rank) const { return a2a_local_len(cfg_.seq, world_, rank); }
  // Kernel query row i of `rank` is sequence row (i + rotation) mod seq.
  int row_rotation(int rank) const {
    return cfg_.tile_order == UlyssesTileOrder::kNatural ? 0 : a2a_own_rows_last_rotation(cfg_.seq, world_, rank);
  }
  // Query rows per tile of the fused kernel at the layer's precision.
  int block_m() const { return sched::attn_block_m(cfg_.head_dim, cfg_.precision == AttnPrecision::kFp8); }
  // The fused kernels' first scheduling phase on `rank` (A2AEpilogueParams::first_m_blocks).
  int first_m_blocks(int rank) const;
  // Bytes `rank`'s fused kernel stores to other ranks in its schedule's final round
  // (a2a_final_round_remote_bytes): the burst no later Q-loop covers.
  int64_t final_round_remote_bytes(int rank) const;
  int fused_grid() const { return fused_grid_; }
  int a2a_grid() const { return a2a_grid_; }
  // Bytes of attention output this rank sends to other ranks in the post-attention All-to-All.
  int64_t remote_bytes_per_rank(int rank) const;

  // Fresh N(0,1) bf16 inputs on every rank, sequence-sharded [local_seq, heads_total, head_dim].
  void fill_inputs(uint64_t seed);
  // Pre-attention All-to-All (pack + NCCL grouped send/recv): full-sequence Q, K, V of this rank's heads.
  void pre_attention_a2a();
  // Output buffers set to NaN (bf16 0xFFFF) on every rank: unwritten elements show.
  void poison_outputs();
  // One iteration of `v` on every local rank's stream. sender_done (one event per local rank, or
  // empty): recorded where the sender's part ends (before the owner's wait).
  void enqueue(UlyssesVariant v, const std::vector<cudaEvent_t>& sender_done = {});
  void synchronize();
  // The sequence-sharded output of local rank `local_index` (bf16 bits, [local_seq, heads_total, d]).
  std::vector<uint16_t> read_output(int local_index);
  // Poisons the outputs, runs one iteration of `v` and returns every local rank's output: the
  // correctness check of the CLI and of the GPU tests.
  std::vector<std::vector<uint16_t>> run_and_read_outputs(UlyssesVariant v);
  // This rank's attention output [seq, heads_per_gpu, d] of the last fa-only/serial run (either kernel).
  std::vector<uint16_t> read_local_attention(int local_index);
  // The sequence-sharded input `which` (0 q, 1 k, 2 v) of local rank `local_index` ([local_seq, heads_total, d]).
  std::vector<uint16_t> read_input(int local_index, int which);
  // The full-sequence Q, K, V of this rank's heads after pre_attention_a2a ([seq, heads_per_gpu, d];
  // Q's rows in the rotated order of row_rotation, K and V in sequence order).
  std::vector<uint16_t> read_qkv(int local_index, int which);

 private:
  void nccl_post_a2a();
  comm::Team& team_;
  UlyssesConfig cfg_;
  int world_ = 0;
  int fused_grid_ = 0;
  int a2a_grid_ = 0;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace xstage::attn
