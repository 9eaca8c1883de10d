// Symmetric buffers: one allocation per team rank, registered as an NCCL 2.28 window
// (ncclMemAlloc + ncclCommWindowRegister(NCCL_WIN_COLL_SYMMETRIC)) with a device communicator that
// carries LSA barriers. Kernels reach a peer's copy through ncclGetLsaPointer (device side).
//
// PeerBuffers is the cross-check of the same hardware path without NCCL: cudaMalloc on every GPU of
// a single-process team plus cudaDeviceEnablePeerAccess, pointers used directly.
#pragma once

#include <nccl.h>
#include <nccl_device.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "xstage/comm/team.hpp"

namespace xstage::comm {

class SymmetricWindow {
 public:
  // Collective over the team. lsa_barriers: how many LSA barrier indices kernels may use.
  SymmetricWindow(Team& team, std::size_t bytes, int lsa_barriers = 1);
  ~SymmetricWindow();
  SymmetricWindow(const SymmetricWindow&) = delete;
  SymmetricWindow& operator=(const SymmetricWindow&) = delete;

  std::size_t bytes() const { return bytes_; }
  // Per local rank (same order as team.local_ranks()).
  void* local_ptr(int local_index) const { return ptrs_[local_index]; }
  ncclWindow_t window(int local_index) const { return wins_[local_index]; }
  const ncclDevComm& dev_comm(int local_index) const { return dev_comms_[local_index]; }

  // Resolves, on the GPU of local rank `local_index`, the LSA pointers of (peer, offset) pairs into
  // `out_dev` (a device array of n pointers on that GPU), through ncclGetLsaPointer.
  void resolve_lsa_pointers(int local_index, const std::vector<int>& peers, const std::vector<std::size_t>& offsets,
                            void** out_dev);

  // A device-side LSA barrier (acq_rel) among all ranks: each local rank launches a one-CTA kernel on
  // its stream. Collective: every rank of the team must call it.
  void device_barrier(std::uint32_t barrier_index = 0, std::uint64_t timeout_ns = 2'000'000'000ull);

 private:
  Team& team_;
  std::size_t bytes_;
  std::vector<void*> ptrs_;
  std::vector<ncclWindow_t> wins_;
  std::vector<ncclDevComm> dev_comms_;
  int lsa_barriers_;
};

// Plain CUDA peer access (single-process teams only).
class PeerBuffers {
 public:
  PeerBuffers(Team& team, std::size_t bytes);
  ~PeerBuffers();
  PeerBuffers(const PeerBuffers&) = delete;
  PeerBuffers& operator=(const PeerBuffers&) = delete;
  std::size_t bytes() const { return bytes_; }
  void* ptr(int rank) const { return ptrs_[rank]; }  // usable from every GPU of the team

 private:
  Team& team_;
  std::size_t bytes_;
  std::vector<void*> ptrs_;
};

}  // namespace xstage::comm
