// Launch interface of the fused expert-parallel MoE kernel (host-visible; no CuTe here).
//
// One persistent kernel per GPU runs: count exchange -> receive layout (smem) -> dispatch (remote
// 16-byte stores + arrival counters, by three producer warps while the tiles run) ->
// Linear-1/SwiGLU and Linear-2/Combine tiles in the order of a sched:: MoE scheduler -> completion
// flags. A second, small kernel waits for every CTA of every rank and reduces the k combined rows of
// each token (float, routing order).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

namespace xstage::moe {

enum class MoeFusedSchedule { kWave, kInterleaved };
const char* to_string(MoeFusedSchedule s);
// Where a Linear-2 tile's Combine stores are issued: all in its epilogue, or piggybacked on the next
// tile's mainloop (one 16-byte store per consumer thread per k-step).
enum class MoeCombineIssue { kEpilogue, kPiggyback };
const char* to_string(MoeCombineIssue c);

// GEMM-only measurement mode (testing::MoeFusedHarness::time_gemm_only; MoeFusedArguments::gemm_only): the layer, or
// one stage's tiles alone (see MoeFusedArguments::gemm_only for what such a launch does).
enum class MoeGemmOnly : int { kOff = 0, kLinear1 = 1, kLinear2 = 2 };

inline constexpr int kFusedMaxRanks = 8;
inline constexpr int kFusedMaxExperts = 1024;  // global experts (shared-memory layout arrays)
inline constexpr int kFusedMaxGrid = 256;      // CTAs per rank (completion flags)

// What a bounded wait that expired was waiting for; written to host-mapped memory before the trap, so
// the host can report it after the launch fails.
struct MoeFusedWaitFailure {
  std::uint32_t code;  // 0: none; else the wait's MoeWaitCode (moe_fused_wait_name)
  std::uint32_t rank, block, thread, index;
  std::uint64_t target, seen;
};
// What each bounded wait of the fused kernel waits for (MoeFusedWaitFailure::code).
enum MoeWaitCode : std::uint32_t {
  kMoeWaitCountFlag = 1,  // a source rank's count flag
  kMoeWaitArrival,        // a local expert's arrival counter (dispatched rows)
  kMoeWaitL1RowDone,      // the Linear-1 completion of a row block
  kMoeWaitDoneFlag,       // a CTA's completion flag
  kMoeWaitPeerAmax,       // the partner CTA's SwiGLU row maxima (FP8)
  kMoeWaitL1Handoff,      // the consumers' hand-off of a Linear-1 tile (releaser warp)
  kMoeWaitL1Published,    // the releaser's publication of a hand-off slot (consumers)
  kMoeWaitStageFull,      // a pipeline stage's operands (consumers; index: the stage, target: its phase,
                          // seen: the pipeline state's count)
  kMoeWaitStageFree,      // a free pipeline stage (TMA producer; as kMoeWaitStageFull)
};
const char* moe_fused_wait_name(std::uint32_t code);

// One traced tile (builds with XSTAGE_MOE_FUSED_TRACE): %globaltimer stamps taken by consumer thread 0.
struct MoeFusedTileTrace {
  std::uint32_t stage;  // 1 Linear-1, 2 Linear-2
  std::uint32_t row, n;
  std::uint32_t cta;            // written by the host (testing::MoeFusedHarness::last_trace); the kernel leaves it 0
  std::uint64_t t_entry;        // the consumers reach the tile
  std::uint64_t t_first_stage;  // its first k-step's operands are ready (MMA wait = t_first_stage - t_entry)
  std::uint64_t t_store_begin;  // Linear-2: the Combine stores start (staging done)
  std::uint64_t t_store_end;    // Linear-2: every consumer thread has issued its stores (T_RS = end - begin)
};

// The arguments of one launch, as the layer and the API build them (moe_fused_params in
// moe_fused_launch.hpp). Host-side: to_params() turns them into the kernel's per-part device parameters
// (MoeFusedKernelParams); the events, the TMA-only operands and the receive capacity stay here.
struct MoeFusedArguments {
  int rank = 0, ranks = 1;
  int tokens = 0, top_k = 0, hidden = 0, h_inter = 0, experts = 0;  // experts: global
  std::uint32_t epoch = 0;  // run number (>= 1), monotonically increasing
  int schedule_param = 1;   // interleaved: lead rows D; wave: experts per wave
  std::uint64_t timeout_ns = 4'000'000'000ull;

  // Element type of the GEMM operands (recv, h, w1, w2): bf16, or FP8 e4m3 with float scales (x is
  // quantized per 128 channels as it is dispatched, h per 128 in the SwiGLU epilogue; weights carry one
  // scale per 128 x 128 block).
  bool fp8 = false;

  // GEMM-only measurement mode (testing::MoeFusedHarness::time_gemm_only): 0 the layer; 1 Linear-1 (+SwiGLU) tiles only;
  // 2 Linear-2 tiles only. The kernel still exchanges the counts (the receive layout) and publishes its
  // completion flags, but dispatches nothing, its producer waits for no arrival counter or l1_done, and
  // its Linear-2 epilogue stages each tile in shared memory and stores no Combine row (no remote store,
  // no origin load); mode 1 runs no Linear-2 tile, mode 2 no Linear-1 tile. The operands are whatever
  // the previous run left in recv (and its scales) and h: run the layer once first. The launcher gives
  // such a run scratch arrive_base / run_totals, so the arrival bases do not move (nothing arrived).
  int gemm_only = 0;
  // Where the Combine stores of a Linear-2 tile are issued: in the tile's epilogue, all at once, or
  // piggybacked on the next tile's mainloop, one 16-byte store per consumer thread per k-step while that
  // k-step's GMMAs run.
  MoeCombineIssue combine = MoeCombineIssue::kEpilogue;
  // Host only: when non-null, recorded on the stream just before and just after the fused kernel's
  // launch (the completion kernel excluded).
  cudaEvent_t kernel_begin = nullptr, kernel_end = nullptr;

  // local inputs and plan (launch_dispatch_plan)
  const std::uint16_t* x = nullptr;   // [tokens][hidden] bf16
  const void* w1 = nullptr;           // [el][2·h_inter][hidden]
  const void* w2 = nullptr;           // [el][hidden][h_inter]
  const float* w1_scale = nullptr;    // FP8: [el][2·h_inter / 128][hidden / 128]
  const float* w2_scale = nullptr;    // FP8: [el][hidden / 128][h_inter / 128]
  const int* expert_ids = nullptr;    // [tokens·top_k]
  const float* weights = nullptr;     // [tokens·top_k]
  const int* expert_rows = nullptr;   // [experts] (plan: this rank's rows per global expert)
  const int* expert_offset = nullptr; // [experts]
  const int* token_of_send_row = nullptr;

  // local work buffers
  void* recv = nullptr;           // [recv_rows][hidden] (peers write it)
  void* h = nullptr;              // [recv_rows][h_inter] SwiGLU output
  float* recv_scale = nullptr;    // FP8: [recv_rows][hidden / 128] (peers write it)
  float* h_scale = nullptr;       // FP8: [recv_rows][h_inter / 128]
  long long recv_rows = 0;        // capacity (recv_capacity_rows)
  const int* origin = nullptr;    // [recv_rows]: src·tokens·top_k + slot (peers write it)
  std::uint32_t* l1_done = nullptr;        // [recv_rows / BM] zeroed before each run
  std::uint64_t* arrive = nullptr;         // [el] monotonic (peers add)
  std::uint64_t* arrive_base = nullptr;    // [el] value of arrive before this run (local)
  int* run_totals = nullptr;               // [el] this run's rows per local expert (for the base update)
  const int* counts = nullptr;             // [ranks][experts] (peers write)
  const std::uint32_t* count_flag = nullptr;  // [ranks]
  const std::uint32_t* done_flag = nullptr;   // [ranks][kFusedMaxGrid]
  std::uint16_t* comb = nullptr;              // [tokens·top_k][hidden] (peers write)
  std::uint16_t* y = nullptr;                 // [tokens][hidden]

  // the same buffers on every rank (index: team rank), usable from this GPU
  void* recv_peer[kFusedMaxRanks] = {};
  float* recv_scale_peer[kFusedMaxRanks] = {};
  int* origin_peer[kFusedMaxRanks] = {};
  std::uint64_t* arrive_peer[kFusedMaxRanks] = {};
  int* counts_peer[kFusedMaxRanks] = {};
  std::uint32_t* count_flag_peer[kFusedMaxRanks] = {};
  std::uint32_t* done_flag_peer[kFusedMaxRanks] = {};
  std::uint16_t* comb_peer[kFusedMaxRanks] = {};

  MoeFusedWaitFailure* failure = nullptr;  // host-mapped

  // Instrumentation (used only by builds with XSTAGE_MOE_FUSED_TRACE): per CTA trace_capacity records
  // at trace[cta·trace_capacity ..], the count in trace_count[cta]; comb_local non-null redirects every
  // Combine store to this local buffer (the local-store control: same stores, no NVLink).
  MoeFusedTileTrace* trace = nullptr;
  std::uint32_t* trace_count = nullptr;
  int trace_capacity = 0;
  std::uint16_t* comb_local = nullptr;
};

// ---- Device parameters of the fused kernel, one part per role (to_params below builds them) ----
// The kernel reads only these (one __grid_constant__ struct); host-only arguments (events, the operands
// that only the TMA descriptors see, the receive capacity) stay in MoeFusedArguments. Field order and
// alignment follow the arguments' (the code the kernel's parameter loads compile to depends on them).

// What every role reads: the layer's dimensions and this run.
struct MoeFusedShape {
  int rank, ranks;
  int tokens, top_k, hidden, h_inter, experts;  // experts: global
  std::uint32_t epoch;                          // run number (>= 1), monotonically increasing
  int schedule_param;                           // interleaved: lead rows D; wave: experts per wave
};

// Synchronisation between the ranks' CTAs and the bounds of every wait.
struct MoeFusedSyncParams {
  std::uint64_t timeout_ns;
  MoeFusedWaitFailure* failure;     // host-mapped
  const std::uint32_t* count_flag;  // [ranks] (peers write)
  const std::uint32_t* done_flag;   // [ranks][kFusedMaxGrid] (peers write)
  std::uint32_t* count_flag_peer[kFusedMaxRanks];
  std::uint32_t* done_flag_peer[kFusedMaxRanks];
};

// Count exchange and dispatch (dispatch warps).
struct MoeFusedDispatchParams {
  bool fp8;  // quantize each row to e4m3 (with its per-128 scales) as it is dispatched
  const std::uint16_t* x;
  const int* expert_ids;
  const int* expert_rows;
  const int* expert_offset;
  const int* token_of_send_row;
  const int* counts;  // [ranks][experts] (peers write)
  int* run_totals;    // [el]
  void* recv_peer[kFusedMaxRanks];
  float* recv_scale_peer[kFusedMaxRanks];
  int* origin_peer[kFusedMaxRanks];
  std::uint64_t* arrive_peer[kFusedMaxRanks];
  int* counts_peer[kFusedMaxRanks];
};

// Dependency waits (TMA producer), operand scales (consumers' FP8 mainloop), Linear-1 publication.
struct MoeFusedMainloopParams {
  MoeGemmOnly gemm_only;
  const float* w1_scale;
  const float* w2_scale;
  const float* recv_scale;
  const std::uint64_t* arrive;
  std::uint64_t* arrive_base;  // the completion kernel moves it on (MoeFusedArguments::arrive_base)
  std::uint32_t* l1_done;
};

// SwiGLU and Combine epilogues, and the completion kernel's reduction.
struct MoeFusedEpilogueParams {
  MoeCombineIssue combine;
  void* h;
  float* h_scale;
  const int* origin;
  std::uint16_t* comb_peer[kFusedMaxRanks];
  const float* weights;
  const std::uint16_t* comb;
  std::uint16_t* y;
};

// The optional part: per-tile traces and the local-store control (read only by XSTAGE_MOE_FUSED_TRACE
// builds; null otherwise).
struct MoeFusedTraceParams {
  MoeFusedTileTrace* records;
  std::uint32_t* counts;
  int capacity;
  std::uint16_t* comb_local;
};

struct MoeFusedKernelParams {
  MoeFusedShape shape;
  MoeFusedSyncParams sync;
  MoeFusedDispatchParams dispatch;
  MoeFusedMainloopParams mainloop;
  MoeFusedEpilogueParams epilogue;
  MoeFusedTraceParams trace;
};

// The kernel's parameters from a launch's arguments, one part at a time (host; no CUDA call). The mode
// fields must be valid (gemm_only 0..2, combine one of MoeCombineIssue: moe_fused_check_modes).
MoeFusedShape to_shape_params(const MoeFusedArguments& a);
MoeFusedSyncParams to_sync_params(const MoeFusedArguments& a);
MoeFusedDispatchParams to_dispatch_params(const MoeFusedArguments& a);
MoeFusedMainloopParams to_mainloop_params(const MoeFusedArguments& a);
MoeFusedEpilogueParams to_epilogue_params(const MoeFusedArguments& a);
MoeFusedTraceParams to_trace_params(const MoeFusedArguments& a);
MoeFusedKernelParams to_params(const MoeFusedArguments& a);
// "" when the mode fields are valid, else the reason naming the field.
std::string moe_fused_check_modes(const MoeFusedArguments& a);

// Whether this build records tile traces (configure with -DXSTAGE_MOE_TRACE=ON).
bool moe_fused_trace_built();

// CTAs of the fused kernel on `device` (even, at most one per SM, all co-resident); 0 on error.
int moe_fused_grid(int device);
// Launches the fused kernel (grid CTAs) and the completion/reduction kernel on `stream`.
cudaError_t launch_moe_fused(const MoeFusedArguments& p, MoeFusedSchedule schedule, int grid, cudaStream_t stream);

}  // namespace xstage::moe
