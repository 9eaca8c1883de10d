// The fused expert-parallel MoE kernel (Hopper, bf16) and its completion/reduction kernel.
//
// Per GPU, one persistent kernel (grid = co-resident CTAs, even; CTA pair g = blockIdx / 2 is scheduler
// instance g, role r = blockIdx % 2 takes N-tiles 2j + r):
//   prologue (all threads): count exchange, receive layout, dispatch (moe_fused_dispatch.cuh);
//   producer warp: for each tile of the scheduler, wait for its inputs (Linear-1: the expert's arrival
//     counter reaches base + rows; Linear-2: all Linear-1 N-tiles of the row are done), then
//     fence.proxy.async.global and TMA loads (moe_fused_mainloop.cuh);
//   two consumer warpgroups: GMMA, then the SwiGLU or Combine epilogue (moe_fused_epilogue.cuh); after
//     each Linear-1 tile one thread adds 1 to l1_done[row] (red.release.gpu); after the last tile one
//     st.release.sys completion flag per rank.
// The completion kernel waits for every CTA of every rank (bounded) and sums each token's k rows in
// routing order (float) into y, as the baseline's combine kernel does.
// The tile order is the scheduler's (sched::ExpertWaveMoeScheduler or sched::InterleavedMoeScheduler):
// producer and consumers each run their own copy of it and see the same sequence.
#include <cstdio>
#include <mutex>

#include <cute/tensor.hpp>
#include <cutlass/arch/reg_reconfig.h>
#include <cutlass/pipeline/sm90_pipeline.hpp>

#include "moe_fused_dispatch.cuh"
#include "moe_fused_epilogue.cuh"
#include "moe_fused_kernel.hpp"
#include "moe_fused_mainloop.cuh"
#include "moe_fused_sync.cuh"
#include "xstage/moe/moe_numerics.hpp"
#include "xstage/sched/moe_schedule.hpp"

namespace xstage::moe {

bool moe_fused_trace_built() {
#if defined(XSTAGE_MOE_FUSED_TRACE)
  return true;
#else
  return false;
#endif
}

const char* to_string(MoeFusedSchedule s) { return s == MoeFusedSchedule::kWave ? "wave" : "interleaved"; }

const char* moe_fused_wait_name(std::uint32_t code) {
  switch (code) {
    case 1: return "count flag of a source rank";
    case 2: return "arrival counter of a local expert (dispatched rows)";
    case 3: return "Linear-1 completion of a row block";
    case 4: return "completion flag of a CTA";
    default: return "nothing";
  }
}

namespace {

struct MoeFusedKernelStorage {
  MoeFusedTraits::SharedStorage main;
  MoeLayoutSmem layout;
};

// Linear-2 N-tiles rounded up to even (CTA pairs); the padding tile of an odd count is skipped.
__host__ __device__ inline int l2_tiles(int hidden) { return hidden / MoeFusedTraits::kBlockN; }
__host__ __device__ inline int l2_tiles_even(int hidden) { return (l2_tiles(hidden) + 1) / 2 * 2; }
__host__ __device__ inline int l1_tiles(int h_inter) { return h_inter / (MoeFusedTraits::kBlockN / 2); }

template <class Schedule>
__global__ void __launch_bounds__(MoeFusedTraits::kNumThreads, 1)
    moe_fused_kernel(CUTE_GRID_CONSTANT MoeFusedParams const p, CUTE_GRID_CONSTANT MoeFusedTma const tma) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using namespace cute;
  using T = MoeFusedTraits;
  using Pipeline = T::Pipeline;
  extern __shared__ __align__(1024) char smem_raw[];
  auto& smem = *reinterpret_cast<MoeFusedKernelStorage*>(smem_raw);

  const int warp_idx = cutlass::canonical_warp_idx_sync();
  const bool is_producer = cutlass::canonical_warp_group_idx() == 0;
  if (warp_idx == 0 && cute::elect_one_sync()) {
    prefetch_tma_descriptor(tma.recv.get_tma_descriptor());
    prefetch_tma_descriptor(tma.w1.get_tma_descriptor());
    prefetch_tma_descriptor(tma.h.get_tma_descriptor());
    prefetch_tma_descriptor(tma.w2.get_tma_descriptor());
  }
  typename Pipeline::Params pp;
  pp.transaction_bytes = T::kStageBytes;
  pp.role = is_producer ? Pipeline::ThreadCategory::Producer : Pipeline::ThreadCategory::Consumer;
  pp.is_leader = threadIdx.x == 0;
  pp.num_consumers = T::kNumMmaThreads;
  pp.initializing_warp = 0;
  Pipeline pipe(smem.main.pipe, pp, Shape<_1, _1, _1>{});

  moe_exchange_counts(p, smem.layout);  // ends with __syncthreads (barriers initialized too)
  moe_dispatch(p, smem.layout);
  __syncthreads();

  const int el = p.experts / p.ranks;
  const int n1 = l1_tiles(p.h_inter), n2 = l2_tiles(p.hidden);
  const sched::MoeRowLayout layout{&smem.layout.offs[p.rank * (el + 1)], el, n1 / 2, l2_tiles_even(p.hidden) / 2};
  const int instance = blockIdx.x / 2, instances = gridDim.x / 2, role = blockIdx.x % 2;

  if (is_producer) {
    cutlass::arch::warpgroup_reg_dealloc<T::kProducerRegisters>();
    if (warp_idx == 0) {
      const int lane = threadIdx.x % 32;
      Schedule schedule(layout, instance, instances, role, p.schedule_param);
      auto write = cutlass::make_producer_start_state<Pipeline>();
      sched::MoeTile tile;
      while (schedule.next(tile)) {
        if (tile.stage == sched::MoeStage::kLinear2 && tile.n >= n2) continue;
        if (lane == 0) {
          if (tile.stage == sched::MoeStage::kLinear1) {
            const std::uint64_t* c = p.arrive + tile.expert;
            const std::uint64_t target = p.arrive_base[tile.expert] + std::uint64_t(smem.layout.tot[p.rank * el + tile.expert]);
            moe_wait_geq([&] { return ld_acquire_sys_u64(c); }, target, p.timeout_ns, p.failure, 2, p.rank, tile.expert);
          } else {
            const std::uint32_t* c = p.l1_done + tile.row;
            moe_wait_geq([&] { return std::uint64_t(gpu::load_counter_acquire_gpu(c)); }, std::uint64_t(n1),
                         p.timeout_ns, p.failure, 3, p.rank, tile.row);
          }
          gpu::fence_proxy_async_global();  // peer / SwiGLU generic-proxy writes before this thread's TMA reads
        }
        __syncwarp();
        moe_load_tile(tma, smem.main, pipe, write, tile, p.timeout_ns);
      }
    }
  } else {
    cutlass::arch::warpgroup_reg_alloc<T::kConsumerRegisters>();
    const int mma_thread_idx = int(threadIdx.x) - 128;
    Schedule schedule(layout, instance, instances, role, p.schedule_param);
    typename Pipeline::PipelineState read;
    typename T::TiledMma mma;
    sched::MoeTile tile{};
    // Accumulators are declared per tile kind: nothing but the schedule state lives across tiles, so
    // the register allocator never has to spill an accumulator that an in-flight GMMA still writes.
#if defined(XSTAGE_MOE_FUSED_TRACE)
    std::uint32_t traced = 0;
    MoeFusedTileTrace rec{};
    auto trace_begin = [&] {
      if (mma_thread_idx == 0) {
        rec = MoeFusedTileTrace{};
        rec.stage = std::uint32_t(tile.stage);
        rec.row = tile.row;
        rec.n = tile.n;
        rec.t_entry = gpu::globaltimer_ns();
      }
    };
    auto trace_end = [&] {
      if (mma_thread_idx == 0 && p.trace != nullptr && traced < std::uint32_t(p.trace_capacity)) {
        p.trace[std::size_t(blockIdx.x) * p.trace_capacity + traced] = rec;
        ++traced;
      }
    };
    std::uint64_t* const t_first = p.trace != nullptr ? &rec.t_first_stage : nullptr;
    std::uint64_t* const t_store = p.trace != nullptr ? &rec.t_store_begin : nullptr;
#else
    auto trace_begin = [] {};
    auto trace_end = [] {};
    std::uint64_t* const t_first = nullptr;
    std::uint64_t* const t_store = nullptr;
#endif
    while (schedule.next(tile)) {
      if (tile.stage == sched::MoeStage::kLinear1) {
        trace_begin();
        Tensor acc = partition_fragment_C(mma, Shape<Int<T::kBlockM>, Int<T::kBlockN>>{});
        moe_mma_tile(smem.main, pipe, read, acc, p.hidden / T::kBlockK, mma_thread_idx, p.timeout_ns, t_first);
        moe_store_swiglu(p, tile, acc, mma_thread_idx);
        gpu::fence_proxy_async_global();  // SwiGLU rows are read next by TMA (other CTAs' producers)
        cutlass::arch::NamedBarrier::sync(T::kNumMmaThreads, kBarConsumers);
        if (mma_thread_idx == 0) gpu::arrive_counter_release_gpu(p.l1_done + tile.row, 1);
        trace_end();
      } else {
        if (tile.n >= n2) continue;
        trace_begin();
        Tensor acc = partition_fragment_C(mma, Shape<Int<T::kBlockM>, Int<T::kBlockN>>{});
        moe_mma_tile(smem.main, pipe, read, acc, p.h_inter / T::kBlockK, mma_thread_idx, p.timeout_ns, t_first);
        const int valid = smem.layout.tot[p.rank * el + tile.expert] - tile.m * T::kBlockM;
        moe_store_combine(p, smem.main, tile, valid, acc, mma_thread_idx, t_store);
        trace_end();
      }
    }
#if defined(XSTAGE_MOE_FUSED_TRACE)
    if (mma_thread_idx == 0 && p.trace_count != nullptr) p.trace_count[blockIdx.x] = traced;
#endif
    cutlass::arch::NamedBarrier::sync(T::kNumMmaThreads, kBarConsumers);
    if (mma_thread_idx < p.ranks) {
      gpu::publish_flag_release(p.done_flag_peer[mma_thread_idx] + p.rank * kFusedMaxGrid + blockIdx.x, p.epoch);
    }
  }
#else
  __trap();  // built for another architecture: the launcher refuses devices other than sm_90a
#endif
}

__device__ __forceinline__ float bf16_lo(unsigned w) { return bf16_bits_to_float(std::uint16_t(w & 0xffffu)); }
__device__ __forceinline__ float bf16_hi(unsigned w) { return bf16_bits_to_float(std::uint16_t(w >> 16)); }

// Waits for every CTA of every rank, moves the arrival bases on, then y[t] = bf16(Σ_j w_j · comb[t·k + j])
// (j in routing order, float sums).
__global__ void moe_fused_finish_kernel(MoeFusedParams const p, int fused_grid) {
  const int flags = p.ranks * fused_grid;
  for (int i = threadIdx.x; i < flags; i += blockDim.x) {
    const std::uint32_t* f = p.done_flag + (i / fused_grid) * kFusedMaxGrid + i % fused_grid;
    moe_wait_geq([&] { return std::uint64_t(gpu::load_flag_acquire(f)); }, p.epoch, p.timeout_ns, p.failure, 4,
                 p.rank, i);
  }
  __syncthreads();
  const int el = p.experts / p.ranks;
  if (blockIdx.x == 0) {
    for (int l = threadIdx.x; l < el; l += blockDim.x) p.arrive_base[l] += std::uint64_t(p.run_totals[l]);
  }
  const int vec = p.hidden / 8, K = p.top_k;
  for (int t = blockIdx.x; t < p.tokens; t += gridDim.x) {
    for (int v = threadIdx.x; v < vec; v += blockDim.x) {
      float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      for (int j = 0; j < K; ++j) {
        const long long slot = (long long)t * K + j;
        const float w = p.weights[slot];
        const uint4 q = reinterpret_cast<const uint4*>(p.comb + slot * p.hidden)[v];
        const unsigned qw[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          acc[2 * i] += w * bf16_lo(qw[i]);
          acc[2 * i + 1] += w * bf16_hi(qw[i]);
        }
      }
      reinterpret_cast<uint4*>(p.y + (long long)t * p.hidden)[v] =
          make_uint4(pack_bf16x2(acc[0], acc[1]), pack_bf16x2(acc[2], acc[3]), pack_bf16x2(acc[4], acc[5]),
                     pack_bf16x2(acc[6], acc[7]));
    }
  }
}

template <class Schedule>
cudaError_t launch_fused(const MoeFusedParams& p, int grid, cudaStream_t stream) {
  auto kernel = moe_fused_kernel<Schedule>;
  constexpr int smem_bytes = int(sizeof(MoeFusedKernelStorage));
  int device = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e != cudaSuccess) return e;
  static std::once_flag once[64];
  static cudaError_t attr_error[64] = {};
  std::call_once(once[device % 64], [&] {
    attr_error[device % 64] = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);
  });
  if (attr_error[device % 64] != cudaSuccess) return attr_error[device % 64];
  const MoeFusedTma tma = make_moe_fused_tma(p);
  kernel<<<grid, MoeFusedTraits::kNumThreads, smem_bytes, stream>>>(p, tma);
  if ((e = cudaGetLastError()) != cudaSuccess) return e;
  const int blocks = p.tokens < 1024 ? (p.tokens > 0 ? p.tokens : 1) : 1024;
  moe_fused_finish_kernel<<<blocks, 256, 0, stream>>>(p, grid);
  return cudaGetLastError();
}

}  // namespace

int moe_fused_grid(int device) {
  int sms = 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) return 0;
  int smem_optin = 0;
  if (cudaDeviceGetAttribute(&smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) != cudaSuccess) return 0;
  if (smem_optin < int(sizeof(MoeFusedKernelStorage))) return 0;
  const int g = sms < kFusedMaxGrid ? sms : kFusedMaxGrid;
  return g / 2 * 2;  // one CTA per SM (shared memory allows no second): every CTA is resident
}

cudaError_t launch_moe_fused(const MoeFusedParams& p, MoeFusedSchedule schedule, int grid, cudaStream_t stream) {
  if (grid < 2 || grid % 2 != 0 || grid > kFusedMaxGrid) return cudaErrorInvalidConfiguration;
  return schedule == MoeFusedSchedule::kWave ? launch_fused<sched::ExpertWaveMoeScheduler>(p, grid, stream)
                                             : launch_fused<sched::InterleavedMoeScheduler>(p, grid, stream);
}

}  // namespace xstage::moe
