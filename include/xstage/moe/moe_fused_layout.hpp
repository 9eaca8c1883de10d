// Receive layout of the fused expert-parallel MoE: where each dispatched token row lands in its
// owner's receive buffer. Host and device: the kernel (per CTA, in shared memory) and the CPU tests run
// the same functions.
//
// counts[src][e] (row-major, `experts` columns): rows source rank `src` sends to global expert e.
// Expert e lives on owner o = e / el as local expert l = e % el (el = experts / ranks). On the owner,
// local expert l's rows are [rows of src 0][rows of src 1]..., each expert's block padded to whole
// BM-row blocks; experts follow each other in local order. So row-block p of the owner belongs to one
// expert only (sched::MoeRowLayout), and a source's row `pos` (its pos-th row for expert e, in slot
// order) lands at row  block_offset(l)·BM + Σ_{s<src} counts[s][e] + pos.
// The dispatch order of one source interleaves owners expert by expert ((l, o) blocks, l outer), so
// every owner's first experts complete first.
#pragma once

#include <cstdint>

#include "xstage/gpu/host_device.hpp"

namespace xstage::moe {

inline constexpr int kFusedBlockM = 128;
// Piggybacked Combine: each consumer thread stores its share of a staged Linear-2 tile in this many
// 16-byte chunks, one per k-step of the tiles that follow (moe_fused_epilogue.cuh); the simulator's
// model of that issue (sim::moe_producer_schedule) uses the same count.
inline constexpr int kFusedCombineChunks = 8;

XSTAGE_HOST_DEVICE inline int row_blocks(int rows, int block_m) { return (rows + block_m - 1) / block_m; }

// Rows expert e receives from every source.
XSTAGE_HOST_DEVICE inline int expert_total_rows(const int* counts, int ranks, int experts, int e) {
  int n = 0;
  for (int s = 0; s < ranks; ++s) n += counts[s * experts + e];
  return n;
}

// Rows of expert e sent by sources below `src` (where src's rows start inside the expert's block).
XSTAGE_HOST_DEVICE inline int rows_before_source(const int* counts, int experts, int src, int e) {
  int n = 0;
  for (int s = 0; s < src; ++s) n += counts[s * experts + e];
  return n;
}

// Row-block offsets of one owner's local experts from their totals (el values): offsets[l] = O_l,
// offsets[el] = P (the sched::MoeRowLayout offsets).
XSTAGE_HOST_DEVICE inline void owner_block_offsets(const int* totals, int el, int block_m, int* offsets) {
  int acc = 0;
  for (int l = 0; l < el; ++l) {
    offsets[l] = acc;
    acc += row_blocks(totals[l], block_m);
  }
  offsets[el] = acc;
}

// Row of the owner's receive buffer for source src's pos-th row to global expert e.
XSTAGE_HOST_DEVICE inline long long recv_row(const int* counts, int ranks, int experts, int block_m, int src, int e,
                                        int pos) {
  const int el = experts / ranks, o = e / el;
  long long blocks = 0;
  for (int l = 0; l < e % el; ++l) blocks += row_blocks(expert_total_rows(counts, ranks, experts, o * el + l), block_m);
  return blocks * block_m + rows_before_source(counts, experts, src, e) + pos;
}

// Receive-buffer rows an owner may need for any routing: every source sends at most min(top_k, el)
// rows per token to one owner, plus padding of each expert to whole blocks.
XSTAGE_HOST_DEVICE inline long long recv_capacity_rows(int ranks, int tokens, int top_k, int el, int block_m) {
  const int per_token = top_k < el ? top_k : el;
  return (long long)ranks * tokens * per_token + (long long)el * (block_m - 1);
}

// Dispatch order of one source: block q = l·ranks + o holds its rows for global expert o·el + l.
XSTAGE_HOST_DEVICE inline int dispatch_block_expert(int q, int ranks, int el) { return (q % ranks) * el + q / ranks; }

// Origin record of a received row: source rank and top-k slot (token·top_k + j) in one int; slots below
// 2^24 and ranks below 2^7 (checked by the layer).
inline constexpr int kOriginSlotBits = 24;
XSTAGE_HOST_DEVICE inline int moe_origin(int src, int slot) { return (src << kOriginSlotBits) | slot; }
XSTAGE_HOST_DEVICE inline int moe_origin_rank(int origin) { return origin >> kOriginSlotBits; }
XSTAGE_HOST_DEVICE inline int moe_origin_slot(int origin) { return origin & ((1 << kOriginSlotBits) - 1); }

}  // namespace xstage::moe
