// Public C++ API of the fused MoE layer (Hopper, sm_90a) over caller-owned device buffers on one GPU:
//   y = Σ_j topk_weights[t][j] · W2_e · (silu(W1_gate_e · x[t]) ⊙ (W1_up_e · x[t])),  e = topk_ids[t][j]
// One persistent kernel does dispatch -> Linear-1 + SwiGLU -> Linear-2 + Combine, bf16 or FP8 e4m3 W8A8
// (activations quantized per token per 128 channels in the kernel, weights given as e4m3 with one fp32
// scale per 128 x 128 block), in the expert-wave or interleaved tile order. Roundings: gate, up, each
// expert's output and the SwiGLU product to bf16; the top-k sum in fp32 in routing order, then bf16.
//
// Usage (CUTLASS-style host side):
//   FusedMoeConfig c{.hidden = 4096, .h_inter = 2048, .experts = 64, .top_k = 8, .max_tokens = 16384};
//   if (auto why = FusedMoe::can_implement(c); !why.empty()) ...;   // names the field
//   FusedMoe layer(c);                 // allocates its workspace once (FusedMoe::workspace_bytes(c))
//   layer.run(args, stream);           // asynchronous; any T <= max_tokens per call
//
// Layouts (row-major, contiguous, 16-byte aligned base pointers):
//   x, y          bf16 [T][hidden]
//   topk_ids      int32 [T][top_k], distinct experts in [0, experts) within a token
//   topk_weights  fp32 [T][top_k]
//   w1            [experts][2·h_inter][hidden]: rows 0..h_inter-1 the gate projection, then the up one
//   w2            [experts][hidden][h_inter]
//   bf16 weights: bf16 elements. FP8: e4m3 bytes, plus
//   w1_scale      fp32 [experts][2·h_inter / 128][hidden / 128]   (weight = e4m3 value · scale of its block)
//   w2_scale      fp32 [experts][hidden / 128][h_inter / 128]
// quantize_weight_blocks_fp8 makes these from bf16 weights, as the kernel's own rule does (scale =
// block amax / 448, value · (1 / scale) rounded to nearest e4m3, saturating).
//
// Routing is the caller's: ids out of range or repeated within a token are not detected on the device
// (no memory is touched out of bounds, but those slots' contributions to y are undefined).
//
// Streams: run() enqueues work and returns; it neither synchronises nor allocates. Runs of one layer are
// ordered on the device: a run on another stream than the previous run's first waits (cudaStreamWaitEvent)
// for the previous run, because the workspace (receive rows, counters, epochs) belongs to the layer. For
// independent concurrent MoE calls, use one layer per stream. run() is not thread-safe; capturing it in a
// CUDA graph is refused (each run's epoch is a launch parameter, so a replayed run would reuse one).
//
// Failures: the kernel's waits are bounded (timeout_s); one that expires records what it waited for in
// host-mapped memory and traps, which leaves the CUDA context in a sticky error. last_failure() then
// returns that record as one line (readable with no CUDA call).
//
// Expert parallelism: with FusedMoeConfig::team, the layer is one rank of a team of N GPUs, one process per
// GPU: rank r holds experts [r·E/N, (r+1)·E/N) (w1, w2 and their scales
// hold those E/N experts only) and its own T tokens, routed over all E experts. The kernel's dispatch
// stores each token row into the owner rank's receive rows and its Combine stores each expert output back
// into the token's rank; the peer-reachable parts of the workspace (receive rows, origins, combine rows,
// counters and flags) live in one NCCL symmetric window per rank, reached through its LSA pointers. The
// construction is collective over the team (window registration, then a barrier, so no peer stores into
// a rank's window before it is zeroed), and so is every run: each rank runs once per step, in the same
// order, T free per rank (0 included: its experts still serve the other ranks' tokens). A rank that does
// not arrive makes the others' bounded waits expire (the record names the rank, the wait and the peer).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace xstage::comm {
class Team;  // xstage/comm/team.hpp
}

namespace xstage::moe {

enum class FusedMoePrecision { kBf16, kFp8 };
// Tile order of the persistent kernel: interleaved (Linear-2 tiles of a row block start D row blocks
// after its Linear-1 tiles) or expert waves (all Linear-1 tiles of a wave of experts, then their Linear-2).
enum class FusedMoeSchedule { kInterleaved, kWave };

const char* to_string(FusedMoePrecision p);
const char* to_string(FusedMoeSchedule s);

struct FusedMoeConfig {
  int hidden = 0;      // a multiple of 128
  int h_inter = 0;     // per-expert intermediate size, a multiple of 128
  int experts = 0;     // at most 1024
  int top_k = 0;       // 1 .. experts
  int max_tokens = 0;  // most tokens of one run (workspace size); max_tokens · top_k < 2^24
  FusedMoePrecision precision = FusedMoePrecision::kBf16;
  FusedMoeSchedule schedule = FusedMoeSchedule::kInterleaved;
  int lead_rows = 0;         // interleaved D; 0: the default lead for this device's grid
  int experts_per_wave = 0;  // wave; 0: a quarter of the experts
  int device = -1;           // CUDA device; -1: the current device at construction
  double timeout_s = 10.0;   // bound of each in-kernel wait, (0, 10]
  // Expert parallelism (see above): the team, with exactly one of its ranks driven by this process
  // (comm::Team::from_unique_id or per_process); it must outlive the layer. device: -1 or the team
  // rank's device. experts: the team's total, divisible by its world size. nullptr: one GPU (EP = 1).
  comm::Team* team = nullptr;
};

struct FusedMoeWeights {
  const void* w1 = nullptr;         // bf16 or e4m3 (see the layouts above)
  const void* w2 = nullptr;
  const float* w1_scale = nullptr;  // FP8 only
  const float* w2_scale = nullptr;  // FP8 only
};

struct FusedMoeArguments {
  int tokens = 0;                     // T, 0 .. max_tokens (0: nothing is launched, except on a team)
  const void* x = nullptr;            // bf16 [T][hidden] (x, routing and y may be null when T = 0)
  const std::int32_t* topk_ids = nullptr;
  const float* topk_weights = nullptr;
  FusedMoeWeights weights;
  void* y = nullptr;                  // bf16 [T][hidden], written entirely
};

class FusedMoe {
 public:
  // "" when the kernel can run this configuration on its device, else the reason naming the field.
  static std::string can_implement(const FusedMoeConfig& config);
  // Device memory the layer allocates for this configuration (its workspace), in bytes; throws
  // xstage::InputError (naming the field) for a shape the kernel cannot run.
  static std::size_t workspace_bytes(const FusedMoeConfig& config);

  // Allocates and zeroes the workspace on config.device. Throws xstage::InputError (can_implement's
  // reason) or xstage::gpu::DeviceError.
  explicit FusedMoe(const FusedMoeConfig& config);
  ~FusedMoe();
  FusedMoe(const FusedMoe&) = delete;
  FusedMoe& operator=(const FusedMoe&) = delete;

  const FusedMoeConfig& config() const { return config_; }
  int device() const { return config_.device; }
  int rank() const;            // this layer's team rank (0 without a team)
  int ranks() const;           // the team's world size (1 without a team)
  int local_experts() const;   // experts held here: experts / ranks
  int grid() const;            // CTAs of the fused kernel
  int schedule_param() const;  // D or experts per wave, as launched
  // Schedule options for the following runs (a cheap host-side change).
  void set_schedule(FusedMoeSchedule schedule, int lead_rows = 0, int experts_per_wave = 0);

  // "" when run(args, stream) would launch, else the reason naming the argument (null or misaligned
  // pointer, memory not on the layer's device, T out of range, missing FP8 scales, stream of another
  // device or capturing).
  std::string check(const FusedMoeArguments& args, cudaStream_t stream) const;
  // check(), then the launches on `stream`. Throws xstage::InputError (check's reason) before any
  // launch, or xstage::gpu::DeviceError when a launch fails (with last_failure() appended when set).
  void run(const FusedMoeArguments& args, cudaStream_t stream);
  // The bounded wait that expired in an earlier run, as one line; "" when none did.
  std::string last_failure() const;
  // Runs enqueued so far (the epoch of the last one).
  std::uint32_t runs() const;

 private:
  friend struct FusedMoeTesting;  // src/moe/fused_moe_testing.hpp: fault injection for the liveness tests
  struct State;
  void open_team_window(State& s);  // the team's symmetric window and every rank's buffers in it
  FusedMoeConfig config_;
  std::unique_ptr<State> state_;
};

// bf16 weights -> e4m3 and one fp32 scale per 128 x 128 block, on `stream` (asynchronous):
// `matrices` row-major [rows][cols] matrices (rows, cols multiples of 128) -> q [matrices][rows][cols]
// e4m3 bytes, scales [matrices][rows / 128][cols / 128]. Throws xstage::InputError naming the argument.
void quantize_weight_blocks_fp8(const void* w_bf16, int matrices, int rows, int cols, void* q, float* scales,
                                cudaStream_t stream);

}  // namespace xstage::moe
