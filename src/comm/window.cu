// Symmetric windows over NCCL 2.28 and plain peer buffers (see include/xstage/comm/window.hpp).
#include <nccl.h>
#include <nccl_device.h>

#include <string>

#include "xstage/comm/window.hpp"
#include "xstage/gpu/check.hpp"
#include "xstage/gpu/flags.cuh"
#include "xstage/gpu/timer.cuh"

namespace xstage::comm {
namespace {

__global__ void resolve_lsa_pointers_kernel(ncclWindow_t win, const int* peers, const std::size_t* offsets, void** out,
                                            int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    out[i] = ncclGetLsaPointer(win, offsets[i], peers[i]);
}

// CTA 0 runs NCCL's LSA barrier (unbounded inside NCCL); CTA 1 is its watchdog: if CTA 0 has not
// finished within timeout_ns it names the barrier and the rank, then traps, so a missing peer aborts
// the kernel instead of hanging it. `done` is a device word zeroed before the launch.
__global__ void lsa_barrier_kernel(ncclDevComm dev_comm, std::uint32_t index, std::uint32_t* done,
                                   std::uint64_t timeout_ns, int rank) {
  if (blockIdx.x == 0) {
    ncclLsaBarrierSession<ncclCoopCta> bar{ncclCoopCta(), dev_comm, ncclTeamTagLsa(), index};
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
    __syncthreads();
    if (threadIdx.x == 0) gpu::publish_flag_release(done, 1);
  } else if (threadIdx.x == 0) {
    gpu::wait_flag_geq_or_trap(done, 1, timeout_ns, gpu::WaitSite{"LSA barrier (a peer rank never arrived)", rank, -1});
  }
}

}  // namespace

SymmetricWindow::SymmetricWindow(Team& team, std::size_t bytes, int lsa_barriers)
    : team_(team), bytes_(bytes), lsa_barriers_(lsa_barriers) {
  const std::size_t n = team.local_ranks().size();
  ptrs_.assign(n, nullptr);
  wins_.assign(n, nullptr);
  dev_comms_.resize(n);
  team.for_each_local_parallel([&](int i) {
    auto& lr = team.local_ranks()[i];
    XSTAGE_NCCL_CHECK(ncclMemAlloc(&ptrs_[i], bytes_));
    XSTAGE_NCCL_CHECK(ncclCommWindowRegister(lr.comm, ptrs_[i], bytes_, &wins_[i], NCCL_WIN_COLL_SYMMETRIC));
    ncclDevCommRequirements reqs{};  // value-initialised: no multicast, no GIN
    reqs.lsaBarrierCount = lsa_barriers_;
    reqs.lsaMultimem = false;
    XSTAGE_NCCL_CHECK(ncclDevCommCreate(lr.comm, &reqs, &dev_comms_[i]));
  });
}

SymmetricWindow::~SymmetricWindow() {
  try {
    team_.synchronize();
    team_.for_each_local_parallel([&](int i) {
      auto& lr = team_.local_ranks()[i];
      ncclDevCommDestroy(lr.comm, &dev_comms_[i]);
      if (wins_[i]) ncclCommWindowDeregister(lr.comm, wins_[i]);
      if (ptrs_[i]) ncclMemFree(ptrs_[i]);
    });
  } catch (...) {
    // Destructors must not throw; a failure here follows an earlier, already reported error.
  }
}

void SymmetricWindow::resolve_lsa_pointers(int local_index, const std::vector<int>& peers,
                                           const std::vector<std::size_t>& offsets, void** out_dev) {
  if (peers.size() != offsets.size()) throw gpu::DeviceError("resolve_lsa_pointers: peers and offsets differ in size");
  for (std::size_t o : offsets)
    if (o >= bytes_) throw gpu::DeviceError("resolve_lsa_pointers: offset " + std::to_string(o) + " outside the window");
  auto& lr = team_.local_ranks()[local_index];
  XSTAGE_CUDA_CHECK(cudaSetDevice(lr.device));
  const int n = static_cast<int>(peers.size());
  int* d_peers = nullptr;
  std::size_t* d_offsets = nullptr;
  XSTAGE_CUDA_CHECK(cudaMalloc(&d_peers, sizeof(int) * n));
  XSTAGE_CUDA_CHECK(cudaMalloc(&d_offsets, sizeof(std::size_t) * n));
  XSTAGE_CUDA_CHECK(cudaMemcpyAsync(d_peers, peers.data(), sizeof(int) * n, cudaMemcpyHostToDevice, lr.stream));
  XSTAGE_CUDA_CHECK(cudaMemcpyAsync(d_offsets, offsets.data(), sizeof(std::size_t) * n, cudaMemcpyHostToDevice, lr.stream));
  resolve_lsa_pointers_kernel<<<(n + 255) / 256, 256, 0, lr.stream>>>(wins_[local_index], d_peers, d_offsets, out_dev, n);
  XSTAGE_CUDA_CHECK_LAUNCH();
  XSTAGE_CUDA_CHECK(cudaStreamSynchronize(lr.stream));
  XSTAGE_CUDA_CHECK(cudaFree(d_peers));
  XSTAGE_CUDA_CHECK(cudaFree(d_offsets));
}

void SymmetricWindow::device_barrier(std::uint32_t barrier_index, std::uint64_t timeout_ns) {
  if (static_cast<int>(barrier_index) >= lsa_barriers_)
    throw gpu::DeviceError("device_barrier: index " + std::to_string(barrier_index) + " >= " +
                           std::to_string(lsa_barriers_) + " LSA barriers requested");
  std::vector<std::uint32_t*> done(team_.local_ranks().size(), nullptr);
  for (std::size_t i = 0; i < done.size(); ++i) {
    auto& lr = team_.local_ranks()[i];
    XSTAGE_CUDA_CHECK(cudaSetDevice(lr.device));
    XSTAGE_CUDA_CHECK(cudaMallocAsync(&done[i], sizeof(std::uint32_t), lr.stream));
    XSTAGE_CUDA_CHECK(cudaMemsetAsync(done[i], 0, sizeof(std::uint32_t), lr.stream));
    lsa_barrier_kernel<<<2, 128, 0, lr.stream>>>(dev_comms_[i], barrier_index, done[i], timeout_ns, lr.rank);
    XSTAGE_CUDA_CHECK_LAUNCH();
    XSTAGE_CUDA_CHECK(cudaFreeAsync(done[i], lr.stream));
  }
}

PeerBuffers::PeerBuffers(Team& team, std::size_t bytes) : team_(team), bytes_(bytes) {
  if (team.mode() != LaunchMode::kSingleProcess)
    throw gpu::DeviceError("PeerBuffers: plain peer pointers need one process driving every GPU");
  const auto& ranks = team.local_ranks();
  ptrs_.assign(ranks.size(), nullptr);
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    XSTAGE_CUDA_CHECK(cudaSetDevice(ranks[i].device));
    XSTAGE_CUDA_CHECK(cudaMalloc(&ptrs_[i], bytes));
    for (std::size_t j = 0; j < ranks.size(); ++j) {
      if (j == i) continue;
      int can = 0;
      XSTAGE_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, ranks[i].device, ranks[j].device));
      if (!can)
        throw gpu::DeviceError("GPU " + std::to_string(ranks[i].device) + " cannot access GPU " +
                               std::to_string(ranks[j].device) + " as a peer");
      const cudaError_t e = cudaDeviceEnablePeerAccess(ranks[j].device, 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled) {
        cudaGetLastError();
      } else {
        XSTAGE_CUDA_CHECK(e);
      }
    }
  }
}

PeerBuffers::~PeerBuffers() {
  const auto& ranks = team_.local_ranks();
  for (std::size_t i = 0; i < ptrs_.size(); ++i) {
    cudaSetDevice(ranks[i].device);
    cudaDeviceSynchronize();
    if (ptrs_[i]) cudaFree(ptrs_[i]);
  }
}

}  // namespace xstage::comm
