// The fused expert-parallel MoE kernel (Hopper; bf16, or FP8 e4m3 W8A8) and its completion/reduction kernel.
//
// Per GPU, one persistent kernel (grid = co-resident CTAs in 2-CTA clusters; CTA pair = cluster g = blockIdx / 2
// is scheduler instance g, role r = blockIdx % 2 takes N-tiles 2j + r; the pair shares its A tiles by TMA multicast):
//   prologue (all threads): count exchange, receive layout (moe_fused_dispatch.cuh);
//   producer warpgroup, warps 1-3 (moe_fused_dispatch_warps.cuh): the dispatch, concurrently with the tiles;
//     warp 3's lane 0 also publishes the Linear-1 tiles (below), between its rows and after its dispatch;
//   producer warp 0 (moe_fused_producer.cuh): for each tile of the scheduler, wait for its inputs (Linear-1:
//     the expert's arrival counter reaches base + rows; Linear-2: all Linear-1 N-tiles of the row are done),
//     then fence.proxy.async.global and TMA loads (moe_fused_mainloop.cuh);
//   two consumer warpgroups (moe_fused_consumer.cuh): GMMA, then the SwiGLU or Combine epilogue
//     (moe_fused_epilogue.cuh); after each Linear-1 tile the consumer warps hand it to the releaser
//     (MoeL1Handoff, moe_fused_handoff.cuh), which adds 1 to l1_done[row] (red.release.gpu); after the last
//     tile one st.release.sys completion flag per rank.
// The kernel's parameters are per part (MoeFusedKernelParams, moe_fused_kernel.hpp), built on the host by
// to_params from the launch's arguments.
// The completion kernel waits for every CTA of every rank (bounded) and sums each token's k rows in
// routing order (float) into y, as the baseline's combine kernel does.
// FP8: the operands are e4m3 (BK = 128), each k-step's product promoted into FP32 with its activation
// and weight-block scales (moe_mma_tile_fp8); x is quantized as it is dispatched, h in the SwiGLU epilogue.
// The tile order is the scheduler's (sched::ExpertWaveMoeScheduler or sched::InterleavedMoeScheduler):
// producer and consumers each run their own copy of it and see the same sequence.
#include <algorithm>

#include "moe_fused_impl.cuh"

namespace xstage::moe {

bool moe_fused_trace_built() {
#if defined(XSTAGE_MOE_FUSED_TRACE)
  return true;
#else
  return false;
#endif
}

const char* to_string(MoeFusedSchedule s) { return s == MoeFusedSchedule::kWave ? "wave" : "interleaved"; }
const char* to_string(MoeCombineIssue c) { return c == MoeCombineIssue::kEpilogue ? "epilogue" : "piggyback"; }

const char* moe_fused_wait_name(std::uint32_t code) {
  switch (code) {
    case kMoeWaitCountFlag: return "count flag of a source rank";
    case kMoeWaitArrival: return "arrival counter of a local expert (dispatched rows)";
    case kMoeWaitL1RowDone: return "Linear-1 completion of a row block";
    case kMoeWaitDoneFlag: return "completion flag of a CTA";
    case kMoeWaitPeerAmax: return "the partner CTA's SwiGLU row maxima (FP8 Linear-1 epilogue)";
    case kMoeWaitL1Handoff: return "consumers' hand-off of a Linear-1 tile (releaser warp)";
    case kMoeWaitL1Published: return "releaser's publication of a Linear-1 hand-off slot (consumers)";
    case kMoeWaitStageFull: return "operands of a pipeline stage (consumers; index = stage, wanted = phase, saw = count)";
    case kMoeWaitStageFree: return "a free pipeline stage (TMA producer; index = stage, wanted = phase, saw = count)";
    default: return "nothing";
  }
}

namespace {

__device__ __forceinline__ float bf16_lo(unsigned w) { return bf16_bits_to_float(std::uint16_t(w & 0xffffu)); }
__device__ __forceinline__ float bf16_hi(unsigned w) { return bf16_bits_to_float(std::uint16_t(w >> 16)); }

// Waits for every CTA of every rank, moves the arrival bases on, then y[t] = bf16(Σ_j w_j · comb[t·k + j])
// (j in routing order, float sums).
__global__ void moe_fused_finish_kernel(MoeFusedKernelParams const p, int fused_grid) {
  const int flags = p.shape.ranks * fused_grid;
  for (int i = threadIdx.x; i < flags; i += blockDim.x) {
    const std::uint32_t* f = p.sync.done_flag + (i / fused_grid) * kFusedMaxGrid + i % fused_grid;
    moe_wait_geq([&] { return std::uint64_t(gpu::load_flag_acquire(f)); }, p.shape.epoch, p.sync.timeout_ns,
                 p.sync.failure, kMoeWaitDoneFlag, p.shape.rank, i);
  }
  __syncthreads();
  const int el = p.shape.experts / p.shape.ranks;
  if (blockIdx.x == 0) {
    for (int l = threadIdx.x; l < el; l += blockDim.x)
      p.mainloop.arrive_base[l] += std::uint64_t(p.dispatch.run_totals[l]);
  }
  const int vec = p.shape.hidden / 8, K = p.shape.top_k;
  for (int t = blockIdx.x; t < p.shape.tokens; t += gridDim.x) {
    for (int v = threadIdx.x; v < vec; v += blockDim.x) {
      float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      for (int j = 0; j < K; ++j) {
        const long long slot = (long long)t * K + j;
        const float w = p.epilogue.weights[slot];
        const uint4 q = reinterpret_cast<const uint4*>(p.epilogue.comb + slot * p.shape.hidden)[v];
        const unsigned qw[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          acc[2 * i] += w * bf16_lo(qw[i]);
          acc[2 * i + 1] += w * bf16_hi(qw[i]);
        }
      }
      reinterpret_cast<uint4*>(p.epilogue.y + (long long)t * p.shape.hidden)[v] =
          make_uint4(pack_bf16x2(acc[0], acc[1]), pack_bf16x2(acc[2], acc[3]), pack_bf16x2(acc[4], acc[5]),
                     pack_bf16x2(acc[6], acc[7]));
    }
  }
}

}  // namespace

cudaError_t launch_moe_fused_finish(const MoeFusedKernelParams& p, int grid, cudaStream_t stream) {
  const int blocks = p.shape.tokens < 1024 ? (p.shape.tokens > 0 ? p.shape.tokens : 1) : 1024;
  moe_fused_finish_kernel<<<blocks, 256, 0, stream>>>(p, grid);
  return cudaGetLastError();
}

int moe_fused_grid(int device) {
  int sms = 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) return 0;
  int smem_optin = 0;
  if (cudaDeviceGetAttribute(&smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) != cudaSuccess) return 0;
  using Storage = fused_detail::MoeFusedKernelStorage<MoeFusedTraits>;
  if (smem_optin < int(sizeof(Storage))) return 0;
  // One CTA per SM (shared memory allows no second) in clusters of two: the grid is the number of CTA
  // pairs the device can hold at once (a GPC with an odd number of free SMs leaves one idle), so every
  // CTA is resident and the bounded spin waits between CTAs cannot deadlock. Both precisions' kernels
  // have the same shared memory, threads and cluster shape.
  int previous = 0;
  if (cudaGetDevice(&previous) != cudaSuccess || cudaSetDevice(device) != cudaSuccess) return 0;
  constexpr auto kernel = fused_detail::moe_fused_kernel<MoeFusedTraits, sched::ExpertWaveMoeScheduler>;
  int clusters = 0;
  cudaLaunchAttribute cluster;
  const cudaLaunchConfig_t cfg =
      gpu::cluster_launch_config(sms / 2 * 2, MoeFusedTraits::kNumThreads, int(sizeof(Storage)),
                                 MoeFusedTraits::kClusterSize, nullptr, &cluster);
  const bool ok = gpu::set_max_dynamic_shared_memory_once<kernel>(device, int(sizeof(Storage))) == cudaSuccess &&
                  cudaOccupancyMaxActiveClusters(&clusters, kernel, &cfg) == cudaSuccess;
  cudaSetDevice(previous);
  if (!ok) return 0;
  const int g = std::min({sms / 2, clusters, kFusedMaxGrid / 2}) * 2;
  return g;
}

cudaError_t launch_moe_fused(const MoeFusedArguments& a, MoeFusedSchedule schedule, int grid, cudaStream_t stream) {
  if (grid < 2 || grid % 2 != 0 || grid > kFusedMaxGrid) return cudaErrorInvalidConfiguration;
  if (!moe_fused_check_modes(a).empty()) return cudaErrorInvalidValue;
  if (a.fp8) return launch_moe_fused_fp8(a, schedule, grid, stream);
  return fused_detail::launch_fused_schedule<MoeFusedTraits>(a, schedule, grid, stream);
}

}  // namespace xstage::moe
