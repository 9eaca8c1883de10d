// The split tail's partial results (sched::AttnTileScheduler::with_split_tail): a helper segment's rows
// leave through a workspace slot, and the tile's owner merges them into its own before the epilogue.
//
// Workspace (AttnSplit::workspace_bytes(grid), the caller's, zeroed flags at launch): flags
// [grid][consumer warps] u32, padded to 256 bytes, then one slot per CTA: the unnormalized output
// fragment of every consumer thread, then each thread's row maxima and row sums. Slot entries are
// thread-major within 16-byte groups (float4 i of thread t at (i x threads + t) x 4), so a warp's stores
// and loads are 512 contiguous bytes. Helper and owner threads of one mma_thread_idx hold the same rows
// and columns (one accumulator layout), so nothing is permuted.
//
// Ordering, per consumer warp (a warp holds 16 whole rows, so warps never read each other's data): the
// helper's lanes store their entries, fence, __syncwarp, and lane 0 publishes the warp's flag with
// st.release; the owner's lane 0 waits (bounded) for it with ld.acquire, __syncwarp, and the lanes read
// with ld.global.cg (L2: the lines were written by another SM). The launcher zeroes the flags before the
// kernel; each is written once per launch.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cute/tensor.hpp>

#include "attn_fragment.cuh"
#include "attn_wait.cuh"
#include "xstage/gpu/bounded_wait.cuh"
#include "xstage/gpu/ptx_math.cuh"
#include "xstage/gpu/ptx_memory.cuh"

namespace xstage::attn {

struct AttnSplitParams {
  uint32_t* flags = nullptr;  // null: the plan has no split tail
  float* partial = nullptr;
};

template <class Traits>
struct AttnSplit {
  static constexpr int kThreads = Traits::kNumMmaThreads;
  static constexpr int kWarps = kThreads / 32;
  static constexpr int kRows = 2;  // rows per thread in a 64-row warpgroup slice (OnlineSoftmax<2>)
  static constexpr int kOFloats = Traits::kBlockM * Traits::kHeadDim / kThreads;
  static_assert(kOFloats % 4 == 0);
  static constexpr int64_t kSlotFloats = int64_t(kThreads) * (kOFloats + 2 * kRows);
  static constexpr size_t kFlagBytesAlign = 256;

  static constexpr size_t flag_bytes(int grid) {
    return (size_t(grid) * kWarps * sizeof(uint32_t) + kFlagBytesAlign - 1) / kFlagBytesAlign * kFlagBytesAlign;
  }
  static constexpr size_t workspace_bytes(int grid) {
    return flag_bytes(grid) + size_t(grid) * size_t(kSlotFloats) * sizeof(float);
  }
  static AttnSplitParams params(void* workspace, int grid) {
    char* base = static_cast<char*>(workspace);
    return AttnSplitParams{reinterpret_cast<uint32_t*>(base), reinterpret_cast<float*>(base + flag_bytes(grid))};
  }

  // A helper: this thread's unnormalized output and softmax state into CTA `cta`'s slot, then the warp's flag.
  template <class TensorO, class Softmax>
  static CUTE_DEVICE void publish(AttnSplitParams const& p, int cta, TensorO const& acc_o, Softmax const& softmax,
                                  int mma_thread_idx) {
    static_assert(decltype(cute::size(acc_o))::value == kOFloats);
    float* slot = p.partial + int64_t(cta) * kSlotFloats;
    CUTE_UNROLL
    for (int i = 0; i < kOFloats / 4; ++i) {
      *reinterpret_cast<float4*>(slot + (int64_t(i) * kThreads + mma_thread_idx) * 4) =
          make_float4(acc_o(4 * i), acc_o(4 * i + 1), acc_o(4 * i + 2), acc_o(4 * i + 3));
    }
    float* state = slot + int64_t(kOFloats) * kThreads;
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      state[r * kThreads + mma_thread_idx] = softmax.row_max[r];
      state[(kRows + r) * kThreads + mma_thread_idx] = softmax.row_sum[r];
    }
    __threadfence();
    __syncwarp();
    if (mma_thread_idx % 32 == 0) gpu::publish_flag_release(p.flags + cta * kWarps + mma_thread_idx / 32, 1u);
  }

  // The owner: merges the partials of helper CTAs first .. last, in that order, into its own output and
  // softmax state (same rows; weights 2^(m - max) in the running max's domain).
  template <class TensorO, class Softmax>
  static CUTE_DEVICE void merge(AttnSplitParams const& p, int first, int last, TensorO& acc_o, Softmax& softmax,
                                int mma_thread_idx) {
    using namespace cute;
    const int warp = mma_thread_idx / 32;
    auto o = make_tensor(acc_o.data(), acc_rowcol_layout(acc_o.layout()));
    for (int h = first; h <= last; ++h) {
      if (mma_thread_idx % 32 == 0) {
        uint32_t const* flag = p.flags + h * kWarps + warp;
        gpu::bounded_wait<0>(
            [flag] { return gpu::load_flag_acquire(flag); }, [](uint32_t v) { return v != 0u; }, kAttnWaitLimitNs,
            [h, warp](uint32_t, uint64_t) { attn_record_wait_failure(kAttnWaitSplitPartial, uint32_t(h), uint32_t(warp)); });
      }
      __syncwarp();
      float const* slot = p.partial + int64_t(h) * kSlotFloats;
      Tensor other = make_fragment_like(acc_o);
      CUTE_UNROLL
      for (int i = 0; i < kOFloats / 4; ++i) {
        const float4 v = __ldcg(reinterpret_cast<float4 const*>(slot + (int64_t(i) * kThreads + mma_thread_idx) * 4));
        other(4 * i) = v.x;
        other(4 * i + 1) = v.y;
        other(4 * i + 2) = v.z;
        other(4 * i + 3) = v.w;
      }
      auto other_rc = make_tensor(other.data(), acc_rowcol_layout(other.layout()));
      float const* state = slot + int64_t(kOFloats) * kThreads;
      CUTE_UNROLL
      for (int r = 0; r < kRows; ++r) {
        const float m_other = __ldcg(state + r * kThreads + mma_thread_idx);
        const float l_other = __ldcg(state + (kRows + r) * kThreads + mma_thread_idx);
        const float m = fmaxf(softmax.row_max[r], m_other);
        const float w_self = softmax.merge_weight(softmax.row_max[r], m);
        const float w_other = softmax.merge_weight(m_other, m);
        CUTE_UNROLL
        for (int c = 0; c < size<1>(o); ++c) o(r, c) = __fmaf_rn(other_rc(r, c), w_other, o(r, c) * w_self);
        softmax.row_sum[r] = __fmaf_rn(l_other, w_other, softmax.row_sum[r] * w_self);
        softmax.row_max[r] = m;
      }
    }
  }
};

}  // namespace xstage::attn
