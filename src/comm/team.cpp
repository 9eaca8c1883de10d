// Team of GPUs over NCCL (see include/xstage/comm/team.hpp).
#include "xstage/comm/team.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <nccl_device/core.h>

#include "xstage/comm/nvlink_domain.hpp"
#include "xstage/gpu/check.hpp"
#include "xstage/model/error.hpp"

namespace xstage::comm {

namespace {

std::string nccl_code_string(int code) {
  return std::to_string(code / 10000) + "." + std::to_string((code / 100) % 100) + "." + std::to_string(code % 100);
}

int env_int(const char* name, int fallback, bool* found = nullptr) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  if (*end != '\0' || x < 0) throw InputError(std::string("environment ") + name + ": not a non-negative integer: '" + v + "'");
  if (found) *found = true;
  return static_cast<int>(x);
}

}  // namespace

void check_nccl_version() {
  int code = 0;
  XSTAGE_NCCL_CHECK(ncclGetVersion(&code));
  if (code != NCCL_VERSION_CODE) {
    throw gpu::DeviceError("NCCL library " + nccl_code_string(code) + " is loaded but xstage was compiled against " +
                           nccl_code_string(NCCL_VERSION_CODE) +
                           " headers; device-API kernels need the same version. Put the matching libnccl first on "
                           "LD_LIBRARY_PATH (torch's nvidia-nccl wheel ships one: docs/python.md)");
  }
}

void disable_multicast_env() {
  const char* names[] = {"NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS"};
  const char* values[] = {"0", "1", "1"};
  for (int i = 0; i < 3; ++i) {
    const char* cur = std::getenv(names[i]);
    if (!cur) {
      setenv(names[i], values[i], 0);
    } else if (std::strcmp(cur, values[i]) != 0) {
      throw InputError(std::string("environment ") + names[i] + "=" + cur + ": multicast must stay off (set it to " +
                       values[i] + ")");
    }
  }
}

const char* to_string(LaunchMode m) { return m == LaunchMode::kSingleProcess ? "single-process" : "per-process"; }

LauncherEnv launcher_env() {
  LauncherEnv e;
  bool found = false;
  e.rank = env_int("OMPI_COMM_WORLD_RANK", 0, &found);
  e.world_size = env_int("OMPI_COMM_WORLD_SIZE", 1);
  e.local_rank = env_int("OMPI_COMM_WORLD_LOCAL_RANK", e.rank);
  if (!found) {
    e.rank = env_int("XSTAGE_RANK", 0, &found);
    e.world_size = env_int("XSTAGE_WORLD_SIZE", 1);
    e.local_rank = env_int("XSTAGE_LOCAL_RANK", e.rank);
  }
  e.found = found;
  if (e.world_size < 1 || e.rank >= e.world_size)
    throw InputError("launcher environment: rank " + std::to_string(e.rank) + " not below world size " +
                     std::to_string(e.world_size));
  return e;
}

namespace {
// Refuses a team whose ranks are not all in one NVLink domain (nvlink_domain.hpp), from NCCL's LSA team of each
// communicator this process holds. Every rank sees the same domain sizes, so every rank refuses: none waits.
void require_one_nvlink_domain(const std::vector<LocalRank>& local, int world_size) {
  for (const LocalRank& lr : local) {
    const ncclTeam_t lsa = ncclTeamLsa(lr.comm);
    const std::string why = one_domain_refusal({world_size, lr.rank, lsa.nRanks, lsa.rank, lsa.stride});
    if (!why.empty()) throw InputError(why);
  }
}
}  // namespace

Team Team::single_process(const std::vector<int>& devices) {
  if (devices.empty()) throw InputError("--gpus: empty device list");
  disable_multicast_env();
  check_nccl_version();
  Team t;
  t.mode_ = LaunchMode::kSingleProcess;
  t.world_size_ = static_cast<int>(devices.size());
  std::vector<ncclComm_t> comms(devices.size());
  XSTAGE_NCCL_CHECK(ncclCommInitAll(comms.data(), static_cast<int>(devices.size()), devices.data()));
  for (std::size_t i = 0; i < devices.size(); ++i) {
    LocalRank lr;
    lr.rank = static_cast<int>(i);
    lr.device = devices[i];
    lr.comm = comms[i];
    XSTAGE_CUDA_CHECK(cudaSetDevice(lr.device));
    XSTAGE_CUDA_CHECK(cudaStreamCreateWithFlags(&lr.stream, cudaStreamNonBlocking));
    t.local_.push_back(lr);
  }
  require_one_nvlink_domain(t.local_, t.world_size_);
  return t;
}

Team Team::per_process(const LauncherEnv& env, int device, const std::string& rendezvous_dir) {
  namespace fs = std::filesystem;
  disable_multicast_env();
  check_nccl_version();
  if (rendezvous_dir.empty()) throw InputError("--rendezvous: a shared directory is needed in per-process mode");
  fs::create_directories(rendezvous_dir);
  const fs::path id_path = fs::path(rendezvous_dir) / "nccl_unique_id.bin";
  ncclUniqueId id{};
  if (env.rank == 0) {
    XSTAGE_NCCL_CHECK(ncclGetUniqueId(&id));
    // Written under a temporary name and renamed, so readers never see a partial id.
    const fs::path tmp = id_path.string() + ".tmp." + std::to_string(getpid());
    {
      std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
      f.write(reinterpret_cast<const char*>(&id), sizeof(id));
      if (!f) throw gpu::DeviceError("cannot write " + tmp.string());
    }
    fs::rename(tmp, id_path);
  } else {
    // Bounded wait for rank 0's id (60 s), naming what is missing when it gives up.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    for (;;) {
      std::ifstream f(id_path, std::ios::binary);
      if (f && f.read(reinterpret_cast<char*>(&id), sizeof(id))) break;
      if (std::chrono::steady_clock::now() > deadline)
        throw gpu::DeviceError("rank " + std::to_string(env.rank) + ": no NCCL unique id from rank 0 at " +
                               id_path.string() + " after 60 s");
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  Team t;
  t.mode_ = LaunchMode::kPerProcess;
  t.world_size_ = env.world_size;
  LocalRank lr;
  lr.rank = env.rank;
  lr.device = device;
  XSTAGE_CUDA_CHECK(cudaSetDevice(device));
  XSTAGE_NCCL_CHECK(ncclCommInitRank(&lr.comm, env.world_size, id, env.rank));
  XSTAGE_CUDA_CHECK(cudaStreamCreateWithFlags(&lr.stream, cudaStreamNonBlocking));
  t.local_.push_back(lr);
  // Every rank has joined: rank 0 may remove the id file (a stale id would mislead the next run).
  t.barrier();
  if (env.rank == 0) fs::remove(id_path);
  require_one_nvlink_domain(t.local_, t.world_size_);
  return t;
}

namespace {

// Polls a non-blocking communicator until its pending operation ends; throws naming the rank and the
// step when it fails or when `deadline` passes (the communicator is then aborted).
void poll_comm(ncclComm_t comm, int rank, int world, const char* step, double timeout_s,
               std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t r = ncclCommGetAsyncError(comm, &state);
    if (r != ncclSuccess) state = r;
    if (state == ncclSuccess) return;
    if (state != ncclInProgress) {
      ncclCommAbort(comm);
      throw gpu::DeviceError("rank " + std::to_string(rank) + " of " + std::to_string(world) + ": " + step +
                             " failed: " + ncclGetErrorString(state) + " (" + ncclGetLastError(comm) + ")");
    }
    if (std::chrono::steady_clock::now() > deadline) {
      ncclCommAbort(comm);
      char secs[32];
      std::snprintf(secs, sizeof(secs), "%.1f", timeout_s);
      throw TeamTimeout("rank " + std::to_string(rank) + " of " + std::to_string(world) + ": " + step +
                        " not complete after " + secs + " s: some rank of the team did not join in time");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace

ncclUniqueId Team::new_unique_id() {
  check_nccl_version();
  ncclUniqueId id{};
  XSTAGE_NCCL_CHECK(ncclGetUniqueId(&id));
  return id;
}

Team Team::from_unique_id(const ncclUniqueId& id, int rank, int world, int device, double timeout_s) {
  if (world < 1) throw InputError("world " + std::to_string(world) + " (at least 1)");
  if (rank < 0 || rank >= world)
    throw InputError("rank " + std::to_string(rank) + " (0.." + std::to_string(world - 1) + ")");
  if (!(timeout_s > 0) || timeout_s > 86400) throw InputError("timeout_s " + std::to_string(timeout_s) + " (0 < t <= 86400)");
  int ndev = 0;
  XSTAGE_CUDA_CHECK(cudaGetDeviceCount(&ndev));
  if (device < 0 || device >= ndev)
    throw InputError("device " + std::to_string(device) + " (this process sees " + std::to_string(ndev) + " GPUs)");
  disable_multicast_env();
  check_nccl_version();
  XSTAGE_CUDA_CHECK(cudaSetDevice(device));
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::microseconds(static_cast<long long>(timeout_s * 1e6));
  ncclConfig_t nb = NCCL_CONFIG_INITIALIZER;
  nb.blocking = 0;
  ncclComm_t parent = nullptr;
  const ncclResult_t r = ncclCommInitRankConfig(&parent, world, const_cast<ncclUniqueId&>(id), rank, &nb);
  if (r != ncclSuccess && r != ncclInProgress) {
    if (parent) ncclCommAbort(parent);
    throw gpu::DeviceError("rank " + std::to_string(rank) + " of " + std::to_string(world) +
                           ": communicator initialization (ncclCommInitRankConfig) failed: " + ncclGetErrorString(r));
  }
  poll_comm(parent, rank, world, "communicator initialization (ncclCommInitRankConfig)", timeout_s, deadline);
  // Every rank has joined. The team's communicator is a blocking child: the windows and the grouped
  // send/recv of the layers assume calls that return when their work is enqueued.
  ncclConfig_t blocking = NCCL_CONFIG_INITIALIZER;
  blocking.blocking = 1;
  ncclComm_t comm = nullptr;
  const ncclResult_t rs = ncclCommSplit(parent, 0, rank, &comm, &blocking);
  if (rs != ncclSuccess && rs != ncclInProgress) {
    ncclCommAbort(parent);
    throw gpu::DeviceError("rank " + std::to_string(rank) + " of " + std::to_string(world) +
                           ": communicator split (ncclCommSplit) failed: " + ncclGetErrorString(rs));
  }
  if (comm) poll_comm(comm, rank, world, "communicator split (ncclCommSplit)", timeout_s, deadline);
  poll_comm(parent, rank, world, "communicator split (ncclCommSplit, parent)", timeout_s, deadline);
  if (!comm) {
    ncclCommAbort(parent);
    throw gpu::DeviceError("rank " + std::to_string(rank) + ": ncclCommSplit returned no communicator");
  }
  // The parent is finalized (non-blocking: polled) and freed; only the child stays.
  if (ncclCommFinalize(parent) == ncclInProgress)
    poll_comm(parent, rank, world, "communicator finalize (ncclCommFinalize)", timeout_s, deadline);
  ncclCommDestroy(parent);
  Team t;
  t.mode_ = LaunchMode::kPerProcess;
  t.world_size_ = world;
  LocalRank lr;
  lr.rank = rank;
  lr.device = device;
  lr.comm = comm;
  XSTAGE_CUDA_CHECK(cudaStreamCreateWithFlags(&lr.stream, cudaStreamNonBlocking));
  t.local_.push_back(lr);
  require_one_nvlink_domain(t.local_, t.world_size_);
  return t;
}

Team::Team(Team&& o) noexcept
    : mode_(o.mode_), world_size_(o.world_size_), local_(std::move(o.local_)), scratch_host_(o.scratch_host_),
      scratch_dev_(std::move(o.scratch_dev_)) {
  o.local_.clear();
  o.scratch_host_ = nullptr;
  o.scratch_dev_.clear();
}

Team::~Team() {
  for (std::size_t i = 0; i < local_.size(); ++i) {
    cudaSetDevice(local_[i].device);
    if (i < scratch_dev_.size() && scratch_dev_[i]) cudaFree(scratch_dev_[i]);
    if (local_[i].stream) cudaStreamDestroy(local_[i].stream);
    if (local_[i].comm) ncclCommDestroy(local_[i].comm);
  }
  if (scratch_host_) cudaFreeHost(scratch_host_);
}

LocalRank* Team::local(int rank) {
  for (auto& lr : local_)
    if (lr.rank == rank) return &lr;
  return nullptr;
}

long long Team::allreduce_sum(const std::vector<long long>& per_local_rank) {
  if (per_local_rank.size() != local_.size()) throw gpu::DeviceError("allreduce_sum: one value per local rank expected");
  if (scratch_dev_.empty()) {
    scratch_dev_.resize(local_.size(), nullptr);
    for (std::size_t i = 0; i < local_.size(); ++i) {
      XSTAGE_CUDA_CHECK(cudaSetDevice(local_[i].device));
      XSTAGE_CUDA_CHECK(cudaMalloc(&scratch_dev_[i], sizeof(long long)));
    }
    XSTAGE_CUDA_CHECK(cudaMallocHost(&scratch_host_, sizeof(long long) * local_.size()));
  }
  for (std::size_t i = 0; i < local_.size(); ++i) {
    XSTAGE_CUDA_CHECK(cudaSetDevice(local_[i].device));
    XSTAGE_CUDA_CHECK(cudaMemcpyAsync(scratch_dev_[i], &per_local_rank[i], sizeof(long long), cudaMemcpyHostToDevice,
                                      local_[i].stream));
  }
  XSTAGE_NCCL_CHECK(ncclGroupStart());
  for (std::size_t i = 0; i < local_.size(); ++i)
    XSTAGE_NCCL_CHECK(ncclAllReduce(scratch_dev_[i], scratch_dev_[i], 1, ncclInt64, ncclSum, local_[i].comm,
                                    local_[i].stream));
  XSTAGE_NCCL_CHECK(ncclGroupEnd());
  for (std::size_t i = 0; i < local_.size(); ++i) {
    XSTAGE_CUDA_CHECK(cudaSetDevice(local_[i].device));
    XSTAGE_CUDA_CHECK(cudaMemcpyAsync(&scratch_host_[i], scratch_dev_[i], sizeof(long long), cudaMemcpyDeviceToHost,
                                      local_[i].stream));
  }
  synchronize();
  return scratch_host_[0];
}

void Team::for_each_local_parallel(const std::function<void(int)>& fn) {
  if (local_.size() == 1) {
    XSTAGE_CUDA_CHECK(cudaSetDevice(local_[0].device));
    fn(0);
    return;
  }
  std::vector<std::exception_ptr> errors(local_.size());
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < local_.size(); ++i) {
    threads.emplace_back([&, i] {
      try {
        XSTAGE_CUDA_CHECK(cudaSetDevice(local_[i].device));
        fn(static_cast<int>(i));
      } catch (...) {
        errors[i] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

void Team::synchronize() {
  for (auto& lr : local_) {
    XSTAGE_CUDA_CHECK(cudaSetDevice(lr.device));
    XSTAGE_CUDA_CHECK(cudaStreamSynchronize(lr.stream));
  }
}

}  // namespace xstage::comm
