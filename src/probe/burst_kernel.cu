// The remote-store burst kernel (interface and semantics: include/xstage/probe/burst_kernel.hpp).
#include <cstdint>

#include "xstage/gpu/check.hpp"
#include "xstage/gpu/flags.cuh"
#include "xstage/gpu/mma_gap.cuh"
#include "xstage/gpu/ptx_memory.cuh"
#include "xstage/gpu/timer.cuh"
#include "xstage/probe/burst_kernel.hpp"
#include "xstage/probe/burst_pattern.hpp"

namespace xstage::probe {
namespace {

using gpu::sm_cycles;
using gpu::globaltimer_ns;

// Plain (weak) global stores of exactly 4, 8 or 16 bytes: the remote-store path under test. The
// address may be a peer mapping; the hardware routes it over NVLink.
template <int kStoreBytes>
__device__ __forceinline__ void store_words(char* p, std::uint32_t tag, std::uint32_t w) {
  if constexpr (kStoreBytes == 16) {
    gpu::st_global_v4_u32(p, pattern_word(tag, w), pattern_word(tag, w + 1), pattern_word(tag, w + 2),
                          pattern_word(tag, w + 3));
  } else if constexpr (kStoreBytes == 8) {
    gpu::st_global_v2_u32(p, pattern_word(tag, w), pattern_word(tag, w + 1));
  } else {
    static_assert(kStoreBytes == 4);
    gpu::st_global_u32(p, pattern_word(tag, w));
  }
}

template <int kStoreBytes>
__device__ __forceinline__ void issue_burst(char* base, std::uint64_t bytes, std::uint32_t tag) {
  const std::uint64_t n = bytes / kStoreBytes;
  constexpr std::uint32_t kWordsPerStore = kStoreBytes / 4;
#pragma unroll 4
  for (std::uint64_t e = threadIdx.x; e < n; e += blockDim.x) {
    store_words<kStoreBytes>(base + e * kStoreBytes, tag, static_cast<std::uint32_t>(e) * kWordsPerStore);
  }
}

template <int kStoreBytes>
__global__ void __launch_bounds__(1024, 1) burst_kernel(BurstKernelArgs a) {
  __shared__ std::uint64_t s_issue_end;
  __shared__ unsigned long long s_mma;
  const std::uint32_t p = blockIdx.x;
  const std::uint32_t k = gridDim.x;
  char* const region0 = static_cast<char*>(a.dst[p]);
  const gpu::WaitSite site{"probe: grid barrier before a burst", a.team_rank, -1};
  float sink = 0.f;
  if (threadIdx.x == 0) s_mma = 0;

  if (a.mode == KernelMode::kPeriodic) gpu::grid_barrier(a.barrier_counter, k, 0, a.wait_timeout_ns, site);

  for (std::uint32_t i = 0; i < a.bursts; ++i) {
    if (a.mode == KernelMode::kIsolated) gpu::grid_barrier(a.barrier_counter, k, i, a.wait_timeout_ns, site);
    char* const base = region0 + static_cast<std::uint64_t>(i % a.slots) * a.slot_stride_bytes;
    const std::uint32_t tag = burst_tag(a.run_seed, a.sender_rank, p, i);
    __syncthreads();
    std::uint64_t c0 = 0, t0 = 0;
    if (threadIdx.x == 0) {
      t0 = globaltimer_ns();
      c0 = sm_cycles();
    }
    issue_burst<kStoreBytes>(base, a.bytes_per_producer, tag);
    __syncthreads();  // every thread of the producer has issued: the burst's sender-visible issue ends
    if (threadIdx.x == 0) s_issue_end = sm_cycles();

    if (a.mode == KernelMode::kIsolated) {
      // Each thread waits for its own stores to be performed system-wide, then one thread lets the
      // fabric settle: the next burst starts from an empty X-Stage.
      gpu::fence_acq_rel_sys();
      __syncthreads();
      if (threadIdx.x == 0) gpu::spin_for_ns(a.recovery_ns);
    } else if (a.gap_cycles > 0) {
      if (a.gap_kind == GapKind::kMma) {
        __syncthreads();  // s_issue_end visible to all warps
        const std::uint32_t issued = gpu::mma_until(s_issue_end, a.gap_cycles, tag, sink);
        if ((threadIdx.x & 31u) == 0) atomicAdd(&s_mma, static_cast<unsigned long long>(issued));
      } else if (threadIdx.x == 0) {
        const std::uint64_t start = s_issue_end;
        while (sm_cycles() - start < a.gap_cycles) {
        }
      }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      BurstSample s;
      s.issue_start_cycles = c0;
      s.issue_end_cycles = s_issue_end;
      s.gap_end_cycles = sm_cycles();
      s.issue_start_ns = t0;
      a.samples[static_cast<std::uint64_t>(i) * k + p] = s;
    }
  }
  // Every lane's MMA result feeds the sink, so the compiler cannot drop the gap's work.
  if (a.gap_kind == GapKind::kMma) atomicAdd(&a.sink[p], sink);
  __syncthreads();
  if (threadIdx.x == 0) a.mma_issued[p] = s_mma;
}

template <int kStoreBytes>
void launch_typed(const BurstKernelArgs& args, int producers, int threads, cudaStream_t stream) {
  BurstKernelArgs copy = args;
  void* params[] = {&copy};
  XSTAGE_CUDA_CHECK(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(&burst_kernel<kStoreBytes>),
                                                dim3(producers), dim3(threads), params, 0, stream));
}

}  // namespace

void launch_burst_kernel(const BurstKernelArgs& args, int producers, int threads, cudaStream_t stream) {
  switch (args.store_bytes) {
    case 16: launch_typed<16>(args, producers, threads, stream); break;
    case 8: launch_typed<8>(args, producers, threads, stream); break;
    case 4: launch_typed<4>(args, producers, threads, stream); break;
    default: throw gpu::DeviceError("launch_burst_kernel: store_bytes must be 4, 8 or 16, got " +
                                    std::to_string(args.store_bytes));
  }
}

int max_coresident_producers(int device, int threads) {
  int prev = 0, sms = 0, per_sm = 0;
  XSTAGE_CUDA_CHECK(cudaGetDevice(&prev));
  XSTAGE_CUDA_CHECK(cudaSetDevice(device));
  XSTAGE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  XSTAGE_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, burst_kernel<16>, threads, 0));
  XSTAGE_CUDA_CHECK(cudaSetDevice(prev));
  // One producer per SM at most: producers are meant to be independent store streams, as in the paper.
  return per_sm > 0 ? sms : 0;
}

}  // namespace xstage::probe
