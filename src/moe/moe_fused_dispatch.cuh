// Dispatch side of the fused MoE kernel:
//  1. count exchange (prologue, every thread of every CTA, before the warp roles split): CTA 0 stores
//     this rank's per-expert row counts into counts[rank][*] of every rank, then publishes
//     count_flag[rank] = epoch (st.release.sys) there; every CTA waits (bounded) for the flags of all
//     sources and builds the receive layout in shared memory (moe_fused_layout.hpp);
//  2. dispatch (the producer warpgroup's three warps besides the TMA warp, while the consumers already
//     run the GEMM tiles of the experts whose rows have arrived): warps copy token rows (16-byte stores;
//     FP8: quantized on the way, with their scales) into the owners' receive buffers at their layout
//     rows, write each row's origin (source, slot) there, and after each run of rows of one expert add
//     the row count to the owner's arrival counter of that expert (__syncwarp, red.release.sys). The
//     rows go in (local expert, owner) order, the order in which both schedules start experts, so the
//     first experts' rows are complete first. Dispatch warps wait for nothing.
// Arrival counters only grow: a run's Linear-1 tiles wait for arrive_base + this run's rows, and the
// completion kernel moves the base once every rank is done. A reset would race with a fast peer's
// next-run increments; a monotonic counter cannot.
#pragma once

#include <cstdint>

#include "moe_fp8.cuh"
#include "moe_fused_kernel.hpp"
#include "moe_fused_sync.cuh"
#include "xstage/moe/moe_fused_layout.hpp"

namespace xstage::moe {

struct MoeLayoutSmem {
  int tot[kFusedMaxExperts];                    // rows per global expert, all sources
  int before[kFusedMaxExperts];                 // rows of lower sources inside each expert's block
  int dprefix[kFusedMaxExperts + 1];            // this rank's dispatch order, (l, o) blocks
  int offs[kFusedMaxExperts + kFusedMaxRanks];  // per owner o: el + 1 row-block offsets at o·(el + 1)
};

__device__ __forceinline__ void moe_exchange_counts(const MoeFusedKernelParams& p, MoeLayoutSmem& L) {
  const int N = p.shape.ranks, E = p.shape.experts, el = E / N;
  if (blockIdx.x == 0) {
    for (int e = threadIdx.x; e < E; e += blockDim.x) {
      const int v = p.dispatch.expert_rows[e];
      for (int d = 0; d < N; ++d) p.dispatch.counts_peer[d][p.shape.rank * E + e] = v;
    }
    __syncthreads();
    if (threadIdx.x < N) gpu::publish_flag_release(p.sync.count_flag_peer[threadIdx.x] + p.shape.rank, p.shape.epoch);
  }
  if (threadIdx.x < N) {
    const std::uint32_t* f = p.sync.count_flag + threadIdx.x;
    moe_wait_geq([&] { return std::uint64_t(gpu::load_flag_acquire(f)); }, p.shape.epoch, p.sync.timeout_ns,
                 p.sync.failure, kMoeWaitCountFlag, p.shape.rank, threadIdx.x);
  }
  __syncthreads();
  for (int e = threadIdx.x; e < E; e += blockDim.x) {
    int tot = 0, before = 0;
    for (int s = 0; s < N; ++s) {
      const int c = gpu::ld_relaxed_sys_s32(p.dispatch.counts + s * E + e);
      tot += c;
      if (s < p.shape.rank) before += c;
    }
    L.tot[e] = tot;
    L.before[e] = before;
  }
  __syncthreads();
  if (threadIdx.x < N) {
    owner_block_offsets(&L.tot[threadIdx.x * el], el, kFusedBlockM, &L.offs[threadIdx.x * (el + 1)]);
  } else if (threadIdx.x == 32) {
    int acc = 0;
    for (int q = 0; q < E; ++q) {
      L.dprefix[q] = acc;
      acc += p.dispatch.expert_rows[dispatch_block_expert(q, N, el)];
    }
    L.dprefix[E] = acc;
  }
  __syncthreads();
  if (blockIdx.x == 0) {
    for (int l = threadIdx.x; l < el; l += blockDim.x) p.dispatch.run_totals[l] = L.tot[p.shape.rank * el + l];
  }
}

// Warp `worker` of `workers` dispatch warps (over all CTAs of the rank) takes chunks worker, worker +
// workers, ... of kChunk rows; the whole warp calls after_row() after each row it copies.
template <class AfterRow>
__device__ __forceinline__ void moe_dispatch(const MoeFusedKernelParams& p, const MoeLayoutSmem& L, int worker,
                                             int workers, AfterRow&& after_row) {
  constexpr int kChunk = 8;  // rows per warp between arrival updates
  const int N = p.shape.ranks, E = p.shape.experts, el = E / N, K = p.shape.top_k;
  const int lane = threadIdx.x & 31;
  const int total = L.dprefix[E];
  const int vec = p.shape.hidden / 8;
  for (int c = worker; c * kChunk < total; c += workers) {
    const int i0 = c * kChunk, i1 = min(total, i0 + kChunk);
    int lo = 0, hi = E - 1;  // block q holding row i0: last q with dprefix[q] <= i0
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (L.dprefix[mid] <= i0) lo = mid;
      else hi = mid - 1;
    }
    int q = lo, pending = 0;
    auto flush = [&] {
      __syncwarp();
      if (lane == 0 && pending > 0) {
        const int e = dispatch_block_expert(q, N, el);
        gpu::red_release_sys_add_u64(p.dispatch.arrive_peer[e / el] + e % el, std::uint64_t(pending));
      }
      pending = 0;
    };
    for (int i = i0; i < i1; ++i) {
      while (L.dprefix[q + 1] <= i) {
        flush();
        ++q;
      }
      const int e = dispatch_block_expert(q, N, el), o = e / el, l = e % el;
      const int pos = i - L.dprefix[q];
      const int token = p.dispatch.token_of_send_row[p.dispatch.expert_offset[e] + pos];
      int j = 0;
      while (j < K - 1 && p.dispatch.expert_ids[token * K + j] != e) ++j;
      const long long dst = (long long)L.offs[o * (el + 1) + l] * kFusedBlockM + L.before[e] + pos;
      const uint4* src = reinterpret_cast<const uint4*>(p.dispatch.x + (long long)token * p.shape.hidden);
      if (!p.dispatch.fp8) {
        uint4* d =
            reinterpret_cast<uint4*>(static_cast<std::uint16_t*>(p.dispatch.recv_peer[o]) + dst * p.shape.hidden);
        int v = lane;
        for (; v + 96 < vec; v += 128) {
          const uint4 a = __ldg(src + v), b = __ldg(src + v + 32), cc = __ldg(src + v + 64), dd = __ldg(src + v + 96);
          d[v] = a;
          d[v + 32] = b;
          d[v + 64] = cc;
          d[v + 96] = dd;
        }
        for (; v < vec; v += 32) d[v] = __ldg(src + v);
      } else {
        // e4m3 row and its per-128 scales, quantized on the way.
        fp8_quantize_row<kFp8GroupSize>(
            lane, p.shape.hidden,
            [&](int c, uint4& lo, uint4& hi) { lo = __ldg(src + c / 8), hi = __ldg(src + c / 8 + 1); },
            static_cast<std::uint8_t*>(p.dispatch.recv_peer[o]) + dst * p.shape.hidden,
            p.dispatch.recv_scale_peer[o] + dst * (p.shape.hidden / kFp8GroupSize));
      }
      if (lane == 0) p.dispatch.origin_peer[o][dst] = moe_origin(p.shape.rank, token * K + j);
      ++pending;
      after_row();
    }
    flush();
  }
}

}  // namespace xstage::moe
