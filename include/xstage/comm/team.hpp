// A team of local GPUs joined by NCCL: the communication substrate of the probes and fused kernels.
//
// Two launch modes:
//  - single process (default): this process drives every GPU of the team, communicators from
//    ncclCommInitAll; local_ranks() holds one entry per GPU;
//  - one process per GPU (scale-out path): started by mpirun (rank and size from OMPI_COMM_WORLD_*,
//    or XSTAGE_RANK / XSTAGE_WORLD_SIZE / XSTAGE_LOCAL_RANK for other launchers); rank 0 creates the
//    NCCL unique id and shares it through a file in a rendezvous directory visible to all ranks, so no
//    MPI library is needed at build time; local_ranks() holds this process's one rank.
// Multicast/NVLS is never requested; the constructor refuses to run when NCCL_NVLS_ENABLE is not 0.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace xstage::comm {

// Throws xstage::gpu::DeviceError unless the loaded libnccl is the version these headers describe
// (device-API code compiled against one version faults against another).
void check_nccl_version();

// Sets NCCL_NVLS_ENABLE=0 (and the PyTorch/NVSHMEM equivalents) in this process's environment unless
// already set; throws if set to anything but 0.
void disable_multicast_env();

// A bounded host-side wait of the team's set-up gave up (the message names the rank and the step).
class TeamTimeout : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct LocalRank {
  int rank = 0;     // team rank
  int device = 0;   // CUDA ordinal
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
};

enum class LaunchMode { kSingleProcess, kPerProcess };
const char* to_string(LaunchMode m);

// The environment of a process started by mpirun (or another launcher); `found` false when none.
struct LauncherEnv {
  bool found = false;
  int rank = 0, world_size = 1, local_rank = 0;
};
LauncherEnv launcher_env();

class Team {
 public:
  // Single process over `devices` (team rank i drives devices[i]).
  static Team single_process(const std::vector<int>& devices);
  // This process is `env.rank` of `env.world_size`; drives `device`. rendezvous_dir: shared folder.
  static Team per_process(const LauncherEnv& env, int device, const std::string& rendezvous_dir);

  // One process per GPU from an NCCL unique id shared by the caller (e.g. broadcast over a torch
  // ProcessGroup): this process is `rank` of `world` and drives `device`. The communicator is created
  // non-blocking (ncclCommInitRankConfig) and polled for at most timeout_s; a rank that does not join
  // in time is an error naming this rank and the step (the communicator is aborted, nothing leaks).
  // The team's communicator is then split off as a blocking one, which every other part of xstage
  // (windows, grouped send/recv) expects. Collective over the `world` ranks.
  static Team from_unique_id(const ncclUniqueId& id, int rank, int world, int device, double timeout_s);
  // A fresh NCCL unique id (rank 0 of a team to be created with from_unique_id).
  static ncclUniqueId new_unique_id();

  Team(Team&&) noexcept;
  Team& operator=(Team&&) = delete;
  Team(const Team&) = delete;
  ~Team();

  LaunchMode mode() const { return mode_; }
  int world_size() const { return world_size_; }
  std::vector<LocalRank>& local_ranks() { return local_; }
  const std::vector<LocalRank>& local_ranks() const { return local_; }
  // The local entry for team rank r, or nullptr if another process drives it.
  LocalRank* local(int rank);

  // Sum of one integer per local rank over the whole team (ncclAllReduce), result on every rank. Used to
  // agree on verification results and as a host-side barrier in per-process mode.
  long long allreduce_sum(const std::vector<long long>& per_local_rank);
  void barrier() { allreduce_sum(std::vector<long long>(local_.size(), 0)); }
  void synchronize();  // every local stream

  // Runs fn(local_index) for every local rank, one host thread each when there are several, as NCCL's
  // collective set-up calls (window registration, device communicators) need when one process drives
  // several GPUs. The device is set in each thread. Rethrows the first exception.
  void for_each_local_parallel(const std::function<void(int)>& fn);

 private:
  Team() = default;
  LaunchMode mode_ = LaunchMode::kSingleProcess;
  int world_size_ = 0;
  std::vector<LocalRank> local_;
  long long* scratch_host_ = nullptr;
  std::vector<long long*> scratch_dev_;
};

}  // namespace xstage::comm
