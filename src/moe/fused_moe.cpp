// The public fused MoE layer over caller-owned buffers (include/xstage/moe/fused_moe.hpp): one GPU or one
// rank of an expert-parallel team, the launch path of moe_fused_launch.hpp with a workspace allocated once
// for max_tokens (a team's peer-reachable part in one NCCL symmetric window per rank).
#include "xstage/moe/fused_moe.hpp"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fused_moe_testing.hpp"
#include "moe_fp8_kernels.hpp"
#include "moe_fused_launch.hpp"
#include "xstage/comm/team.hpp"
#include "xstage/comm/window.hpp"
#include "xstage/gpu/check.hpp"
#include "xstage/model/error.hpp"

namespace xstage::moe {

namespace {

int ranks_of(const FusedMoeConfig& c) { return c.team ? c.team->world_size() : 1; }
MoeDims dims_of(const FusedMoeConfig& c) {
  return MoeDims{ranks_of(c), c.max_tokens, c.hidden, c.h_inter, c.experts, c.top_k};
}
MoePrecision precision_of(const FusedMoeConfig& c) {
  return c.precision == FusedMoePrecision::kFp8 ? MoePrecision::kFp8 : MoePrecision::kBf16;
}
MoeFusedSchedule schedule_of(FusedMoeSchedule s) {
  return s == FusedMoeSchedule::kWave ? MoeFusedSchedule::kWave : MoeFusedSchedule::kInterleaved;
}

// Makes `device` current for the scope, restoring the caller's device after.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    XSTAGE_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != device) XSTAGE_CUDA_CHECK(cudaSetDevice(device));
    else previous_ = -1;
  }
  ~DeviceScope() {
    if (previous_ >= 0) cudaSetDevice(previous_);
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = -1;
};

int resolve_device(int device) {
  if (device >= 0) return device;
  int d = 0;
  XSTAGE_CUDA_CHECK(cudaGetDevice(&d));
  return d;
}

// "" when p is device memory of `device` with the given alignment, else the reason naming `name`.
std::string check_pointer(const char* name, const void* p, std::size_t align, int device) {
  if (p == nullptr) return std::string(name) + ": null pointer";
  if (reinterpret_cast<std::uintptr_t>(p) % align != 0) {
    return std::string(name) + ": must be " + std::to_string(align) + "-byte aligned, got address " +
           std::to_string(reinterpret_cast<std::uintptr_t>(p));
  }
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    cudaGetLastError();
    return std::string(name) + ": not a CUDA pointer";
  }
  if (a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged) {
    return std::string(name) + ": not device memory (host or unregistered pointer)";
  }
  if (a.device != device) {
    return std::string(name) + ": memory of device " + std::to_string(a.device) + ", the layer is on device " +
           std::to_string(device);
  }
  return "";
}

}  // namespace

const char* to_string(FusedMoePrecision p) { return p == FusedMoePrecision::kFp8 ? "fp8" : "bf16"; }
const char* to_string(FusedMoeSchedule s) { return s == FusedMoeSchedule::kWave ? "wave" : "interleaved"; }

namespace {

// Byte offsets of the peer-reachable buffers inside a team rank's symmetric window.
struct PeerOffsets {
  std::size_t recv = 0, recv_scale = 0, origin = 0, comb = 0, ctrl = 0, total = 0;
};
PeerOffsets peer_offsets(const MoeFusedSizes& z) {
  constexpr std::size_t kAlign = 256;  // TMA needs 16 bytes; whole lines keep the buffers apart
  auto next = [](std::size_t at, std::size_t bytes) { return (at + bytes + kAlign - 1) / kAlign * kAlign; };
  PeerOffsets o;
  o.recv_scale = next(o.recv, z.recv_bytes);
  o.origin = next(o.recv_scale, z.recv_scale_bytes);
  o.comb = next(o.origin, z.origin_bytes);
  o.ctrl = next(o.comb, z.comb_bytes);
  o.total = next(o.ctrl, z.ctrl_bytes);
  return o;
}

}  // namespace

struct FusedMoe::State {
  MoeDims dims;
  MoeFusedSizes sizes;
  MoeFusedLocalBuffers local;
  MoeFusedPeerView peer;  // one GPU: the only rank's own buffers
  int rank = 0;
  // A team layer: every rank's peer-reachable buffers, as this GPU reaches them (index: team rank), in
  // the ranks' symmetric windows. Without a team: `peer` alone.
  std::unique_ptr<comm::SymmetricWindow> window;
  std::vector<MoeFusedPeerView> peers;
  int grid = 0;
  std::uint32_t epoch = 0;
  cudaEvent_t done = nullptr;  // recorded after each run: the next run, on any stream, waits for it
};

std::string FusedMoe::can_implement(const FusedMoeConfig& c) {
  if (c.max_tokens <= 0) return "max_tokens: must be > 0, got " + std::to_string(c.max_tokens);
  const std::string why = moe_fused_check_dims(dims_of(c));
  if (!why.empty()) return why.rfind("tokens:", 0) == 0 ? "max_" + why : why;
  if (!(c.timeout_s > 0.0 && c.timeout_s <= 10.0)) return "timeout_s: must be in (0, 10], got " + std::to_string(c.timeout_s);
  if (c.lead_rows < 0) return "lead_rows: must be >= 0 (0: the default lead), got " + std::to_string(c.lead_rows);
  if (c.experts_per_wave < 0) return "experts_per_wave: must be >= 0 (0: default), got " + std::to_string(c.experts_per_wave);
  int device = c.device;
  if (c.team) {
    const auto& local = c.team->local_ranks();
    if (local.size() != 1) {
      return "team: this process drives " + std::to_string(local.size()) +
             " of its GPUs; a FusedMoe layer is one rank (a team with one local rank per process)";
    }
    if (device >= 0 && device != local[0].device) {
      return "device: " + std::to_string(device) + ", but the team's rank " + std::to_string(local[0].rank) +
             " runs on device " + std::to_string(local[0].device);
    }
    device = local[0].device;
  }
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return "device: no CUDA device present";
  }
  if (device < 0 && cudaGetDevice(&device) != cudaSuccess) return "device: no current CUDA device";
  if (device >= count) return "device: " + std::to_string(device) + " is not a device (found " + std::to_string(count) + ")";
  int major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
    return "device: cannot query device " + std::to_string(device);
  }
  if (major != 9 || minor != 0) {
    return "device: the fused MoE kernel is built for sm_90a (Hopper); device " + std::to_string(device) +
           " is sm_" + std::to_string(major) + std::to_string(minor);
  }
  return "";
}

std::size_t FusedMoe::workspace_bytes(const FusedMoeConfig& c) {
  const MoeDims d = dims_of(c);
  const MoeFusedSizes z = moe_fused_sizes(d, precision_of(c));
  const std::size_t el = std::size_t(d.experts_per_rank());
  const std::size_t peer = c.team ? peer_offsets(z).total
                                  : z.recv_bytes + z.recv_scale_bytes + z.origin_bytes + z.comb_bytes + z.ctrl_bytes;
  return peer + z.h_bytes +
         z.h_scale_bytes + z.l1_done_count * sizeof(std::uint32_t) +
         el * 2 * (sizeof(std::uint64_t) + sizeof(int)) + std::size_t(c.experts) * 2 * sizeof(int) +
         z.slots * 2 * sizeof(int);
}

FusedMoe::FusedMoe(const FusedMoeConfig& config) : config_(config) {
  const std::string why = can_implement(config_);
  if (!why.empty()) throw InputError(why);
  config_.device = config_.team ? config_.team->local_ranks()[0].device : resolve_device(config_.device);
  DeviceScope scope(config_.device);
  state_ = std::make_unique<State>();
  State& s = *state_;
  s.dims = dims_of(config_);
  s.sizes = moe_fused_sizes(s.dims, precision_of(config_));
  try {
    s.grid = moe_fused_grid(config_.device);
    if (s.grid < 2) throw gpu::DeviceError("fused MoE: device " + std::to_string(config_.device) + " cannot run the kernel");
    alloc_fused_local(s.dims, s.sizes, precision_of(config_), s.local);
    if (config_.team) {
      open_team_window(s);
    } else {
      alloc_fused_peer(s.sizes, precision_of(config_), s.peer);
      s.peers.assign(1, s.peer);
    }
    XSTAGE_CUDA_CHECK(cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming));
    XSTAGE_CUDA_CHECK(cudaDeviceSynchronize());  // the zero fills are complete before any stream uses them
    // Every rank's window is zeroed before any rank's first run may store into it.
    if (config_.team) config_.team->barrier();
  } catch (...) {
    s.window.reset();
    free_fused_local(s.local);
    free_fused_peer(s.peer);
    if (s.done) cudaEventDestroy(s.done);
    throw;
  }
}

FusedMoe::~FusedMoe() {
  if (!state_) return;
  State& s = *state_;
  int previous = -1;
  cudaGetDevice(&previous);
  cudaSetDevice(config_.device);
  // The caller's streams may still run this layer's kernels: their buffers are freed after them.
  if (s.done) {
    cudaEventSynchronize(s.done);
    cudaEventDestroy(s.done);
  }
  free_fused_local(s.local);
  free_fused_peer(s.peer);
  s.window.reset();
  if (previous >= 0) cudaSetDevice(previous);
}

void FusedMoe::open_team_window(State& s) {
  comm::Team& team = *config_.team;
  const int N = team.world_size();
  s.rank = team.local_ranks()[0].rank;
  const PeerOffsets o = peer_offsets(s.sizes);
  s.window = std::make_unique<comm::SymmetricWindow>(team, o.total);  // collective
  XSTAGE_CUDA_CHECK(cudaMemset(s.window->local_ptr(0), 0, o.total));
  // The LSA pointers of every rank's five buffers, as this GPU reaches them.
  const std::size_t per_rank[5] = {o.recv, o.recv_scale, o.origin, o.comb, o.ctrl};
  std::vector<int> peers;
  std::vector<std::size_t> offsets;
  for (int r = 0; r < N; ++r)
    for (std::size_t off : per_rank) {
      peers.push_back(r);
      offsets.push_back(off);
    }
  void** dev = nullptr;
  XSTAGE_CUDA_CHECK(cudaMalloc(&dev, sizeof(void*) * peers.size()));
  std::vector<void*> ptrs(peers.size(), nullptr);
  try {
    s.window->resolve_lsa_pointers(0, peers, offsets, dev);
    XSTAGE_CUDA_CHECK(cudaMemcpy(ptrs.data(), dev, sizeof(void*) * ptrs.size(), cudaMemcpyDeviceToHost));
  } catch (...) {
    cudaFree(dev);
    throw;
  }
  cudaFree(dev);
  const bool fp8 = config_.precision == FusedMoePrecision::kFp8;
  s.peers.assign(N, MoeFusedPeerView{});
  for (int r = 0; r < N; ++r) {
    void* const* p = &ptrs[std::size_t(r) * 5];
    MoeFusedPeerView& v = s.peers[r];
    v.recv = p[0];
    v.recv_scale = fp8 ? static_cast<float*>(p[1]) : nullptr;
    v.origin = static_cast<int*>(p[2]);
    v.comb = static_cast<std::uint16_t*>(p[3]);
    v.ctrl = static_cast<char*>(p[4]);
  }
}

int FusedMoe::rank() const { return state_->rank; }
int FusedMoe::ranks() const { return state_->dims.ranks; }
int FusedMoe::local_experts() const { return state_->dims.experts_per_rank(); }
int FusedMoe::grid() const { return state_->grid; }

int FusedMoe::schedule_param() const {
  const MoeFusedSchedule s = schedule_of(config_.schedule);
  const int requested = s == MoeFusedSchedule::kWave ? config_.experts_per_wave : config_.lead_rows;
  return moe_fused_schedule_param(s, requested, state_->dims, state_->grid);
}

void FusedMoe::set_schedule(FusedMoeSchedule schedule, int lead_rows, int experts_per_wave) {
  if (lead_rows < 0) throw InputError("lead_rows: must be >= 0 (0: the default lead), got " + std::to_string(lead_rows));
  if (experts_per_wave < 0) {
    throw InputError("experts_per_wave: must be >= 0 (0: default), got " + std::to_string(experts_per_wave));
  }
  config_.schedule = schedule;
  config_.lead_rows = lead_rows;
  config_.experts_per_wave = experts_per_wave;
}

std::uint32_t FusedMoe::runs() const { return state_->epoch; }

std::string FusedMoe::check(const FusedMoeArguments& a, cudaStream_t stream) const {
  if (a.tokens < 0 || a.tokens > config_.max_tokens) {
    return "tokens: " + std::to_string(a.tokens) + " is outside [0, max_tokens = " + std::to_string(config_.max_tokens) +
           "] of this layer";
  }
  const bool fp8 = config_.precision == FusedMoePrecision::kFp8;
  const int dev = config_.device;
  if (a.tokens > 0) {
    for (const std::string& why :
         {check_pointer("x", a.x, 16, dev), check_pointer("topk_ids", a.topk_ids, 4, dev),
          check_pointer("topk_weights", a.topk_weights, 4, dev), check_pointer("y", a.y, 16, dev)})
      if (!why.empty()) return why;
  }
  // A team rank with no tokens of its own still runs its experts on the other ranks' rows.
  if (a.tokens > 0 || config_.team) {
    for (const std::string& why : {check_pointer("w1", a.weights.w1, 16, dev), check_pointer("w2", a.weights.w2, 16, dev)})
      if (!why.empty()) return why;
    if (fp8) {
      for (const std::string& why : {check_pointer("w1_scale", a.weights.w1_scale, 4, dev),
                                     check_pointer("w2_scale", a.weights.w2_scale, 4, dev)})
        if (!why.empty()) return why;
    } else if (a.weights.w1_scale != nullptr || a.weights.w2_scale != nullptr) {
      return std::string(a.weights.w1_scale ? "w1_scale" : "w2_scale") + ": given for a bf16 layer (FP8 weights need "
                                                                          "a layer of precision fp8)";
    }
  }
  int stream_device = -1;
  if (cudaStreamGetDevice(stream, &stream_device) != cudaSuccess) {
    cudaGetLastError();
    return "stream: not a valid CUDA stream";
  }
  if (stream_device != config_.device) {
    return "stream: belongs to device " + std::to_string(stream_device) + ", the layer is on device " +
           std::to_string(config_.device);
  }
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &capture) != cudaSuccess) {
    cudaGetLastError();
    return "stream: cannot query its capture status";
  }
  if (capture != cudaStreamCaptureStatusNone) {
    return "stream: is capturing a CUDA graph; the fused MoE cannot be captured (each run's epoch is a launch parameter)";
  }
  return "";
}

void FusedMoe::run(const FusedMoeArguments& a, cudaStream_t stream) {
  DeviceScope scope(config_.device);
  const std::string why = check(a, stream);
  if (!why.empty()) throw InputError(why);
  if (a.tokens == 0 && !config_.team) return;  // a team rank runs: the peers wait for its counts and flags
  State& s = *state_;
  MoeFusedRunConfig run;
  run.tokens = a.tokens;
  run.epoch = s.epoch + 1;
  run.schedule_param = schedule_param();
  run.combine = MoeCombineIssue::kPiggyback;  // measured equal or faster on every shape tried (docs/moe_notes.md)
  run.fp8 = config_.precision == FusedMoePrecision::kFp8;
  run.timeout_s = config_.timeout_s;
  MoeFusedOperands in;
  in.x = static_cast<const std::uint16_t*>(a.x);
  in.w1 = a.weights.w1;
  in.w2 = a.weights.w2;
  in.w1_scale = run.fp8 ? a.weights.w1_scale : nullptr;
  in.w2_scale = run.fp8 ? a.weights.w2_scale : nullptr;
  in.expert_ids = a.topk_ids;
  in.weights = a.topk_weights;
  in.y = static_cast<std::uint16_t*>(a.y);
  const MoeFusedArguments p = moe_fused_params(s.dims, s.sizes, s.rank, run, in, s.local, s.peers.data());
  auto fail = [&](cudaError_t e, const char* what) {
    std::string msg = std::string("fused MoE: ") + what + " failed: " + cudaGetErrorName(e) + " (" +
                      cudaGetErrorString(e) + ")";
    const std::string wait = last_failure();
    if (!wait.empty()) msg += "; " + wait;
    throw gpu::DeviceError(msg);
  };
  // The previous run (on whichever stream) is complete on the device before this one touches the
  // workspace; on the same stream the wait is already satisfied by stream order.
  if (s.epoch > 0) {
    const cudaError_t e = cudaStreamWaitEvent(stream, s.done, 0);
    if (e != cudaSuccess) fail(e, "ordering after the previous run");
  }
  const cudaError_t e = enqueue_moe_fused_run(p, s.local, schedule_of(config_.schedule), s.grid, stream);
  // Epochs only need to grow: the next run takes the next one even when part of this one was enqueued.
  s.epoch = run.epoch;
  if (e != cudaSuccess) fail(e, "launch");
  const cudaError_t r = cudaEventRecord(s.done, stream);
  if (r != cudaSuccess) fail(r, "recording the run's completion event");
}

std::string FusedMoe::last_failure() const { return moe_fused_failure_text(read_fused_failure(state_->local)); }

void FusedMoeTesting::withhold_rows(FusedMoe& layer, std::uint64_t rows) {
  DeviceScope scope(layer.config_.device);
  FusedMoe::State& s = *layer.state_;
  if (s.epoch > 0) XSTAGE_CUDA_CHECK(cudaEventSynchronize(s.done));
  std::vector<std::uint64_t> base(std::size_t(s.dims.experts_per_rank()));
  XSTAGE_CUDA_CHECK(cudaMemcpy(base.data(), s.local.arrive_base, base.size() * sizeof(base[0]), cudaMemcpyDeviceToHost));
  for (std::uint64_t& b : base) b += rows;
  XSTAGE_CUDA_CHECK(cudaMemcpy(s.local.arrive_base, base.data(), base.size() * sizeof(base[0]), cudaMemcpyHostToDevice));
}

void quantize_weight_blocks_fp8(const void* w_bf16, int matrices, int rows, int cols, void* q, float* scales,
                                cudaStream_t stream) {
  if (matrices < 0) throw InputError("matrices: must be >= 0, got " + std::to_string(matrices));
  if (rows <= 0 || rows % 128 != 0) throw InputError("rows: must be a positive multiple of 128, got " + std::to_string(rows));
  if (cols <= 0 || cols % 128 != 0) throw InputError("cols: must be a positive multiple of 128, got " + std::to_string(cols));
  if ((long long)matrices * (rows / 128) * (cols / 128) > 0x7fffffffLL) {
    throw InputError("matrices: too many 128 x 128 blocks for one launch (" + std::to_string(matrices) + " x " +
                     std::to_string(rows) + " x " + std::to_string(cols) + ")");
  }
  if (matrices == 0) return;
  int device = 0;
  if (cudaStreamGetDevice(stream, &device) != cudaSuccess) {
    cudaGetLastError();
    throw InputError("stream: not a valid CUDA stream");
  }
  for (const std::string& why : {check_pointer("w", w_bf16, 16, device), check_pointer("q", q, 16, device),
                                 check_pointer("scales", scales, 4, device)})
    if (!why.empty()) throw InputError(why);
  DeviceScope scope(device);
  const cudaError_t e = launch_quantize_weight_blocks_fp8(static_cast<const std::uint16_t*>(w_bf16), matrices, rows,
                                                          cols, static_cast<std::uint8_t*>(q), scales, stream);
  if (e != cudaSuccess) {
    throw gpu::DeviceError(std::string("quantize_weight_blocks_fp8: launch failed: ") + cudaGetErrorName(e));
  }
}

}  // namespace xstage::moe
