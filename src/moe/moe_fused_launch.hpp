// The one launch path of the fused MoE layer, shared by the public API over caller-owned buffers
// (xstage::moe::FusedMoe, include/xstage/moe/fused_moe.hpp) and the testing library's bench layer (MoeFused,
// src/testing/moe_fused_layer.hpp): the checks and sizes of a layer, its per-rank work buffers, the kernel
// parameters of one run and the launch sequence (l1_done reset -> dispatch plan -> fused kernel -> completion
// kernel), all asynchronous on the caller's stream. Host code; the kernels are in moe_fused*.cu and
// moe_dispatch_plan.cu.
//
// The buffers of one rank split in two: peer-reachable ones (written by other ranks: receive rows and
// scales, origins, combine rows, the control block of arrival counters, counts and flags), which an
// expert-parallel team places in memory its peers can store to, and local ones (SwiGLU output, row
// readiness, arrival bases, the dispatch plan, the host-mapped failure record).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "moe_fused_kernel.hpp"
#include "xstage/moe/moe_dims.hpp"

namespace xstage::moe {

// FP8 activation group of the Linear-2 input (the reference's l2_group of the fused layer).
inline constexpr int kFusedFp8L2Group = 128;

// Sizes of one rank's buffers for a layer of `d` (d.tokens: the most tokens one run may carry).
struct MoeFusedSizes {
  long long capacity_rows = 0;  // receive rows (recv_capacity_rows rounded up to whole blocks)
  std::size_t recv_bytes = 0, recv_scale_bytes = 0, origin_bytes = 0, comb_bytes = 0;  // peer-reachable
  std::size_t off_arrive = 0, off_counts = 0, off_count_flag = 0, off_done = 0, ctrl_bytes = 0;  // control block
  std::size_t h_bytes = 0, h_scale_bytes = 0, l1_done_count = 0;  // local
  std::size_t slots = 0;  // d.tokens · top_k (dispatch plan)
};
// Throws xstage::InputError naming the field when the fused kernel cannot run `d` (hidden, h_inter
// multiples of 128; experts, ranks within the kernel's limits; tokens·top_k below 2^24; 32-bit tile
// cursors).
MoeFusedSizes moe_fused_sizes(const MoeDims& d, MoePrecision precision);
// The same checks; "" when `d` fits, else the reason naming the field.
std::string moe_fused_check_dims(const MoeDims& d);

// Peer-reachable buffers of one rank (each rank's copy, as seen from the launching GPU).
struct MoeFusedPeerView {
  void* recv = nullptr;
  float* recv_scale = nullptr;  // FP8 only
  int* origin = nullptr;
  std::uint16_t* comb = nullptr;
  char* ctrl = nullptr;  // MoeFusedSizes::off_* inside
};

// Local buffers of one rank (alloc_fused_local: zero-filled on the current device).
struct MoeFusedLocalBuffers {
  void* h = nullptr;                             // [capacity rows][h_inter] (bf16 or e4m3)
  float* h_scale = nullptr;                      // FP8: [capacity rows][h_inter / 128]
  std::uint32_t* l1_done = nullptr;              // [capacity rows / BM]
  std::uint64_t* arrive_base = nullptr;          // [local experts]
  int* run_totals = nullptr;                     // [local experts]
  std::uint64_t* arrive_base_sink = nullptr;     // GEMM-only runs: where the base update lands
  int* run_totals_sink = nullptr;
  int *expert_rows = nullptr, *expert_offset = nullptr;           // [experts] dispatch plan
  int *send_row_of_slot = nullptr, *token_of_send_row = nullptr;  // [slots]
  MoeFusedWaitFailure* failure_host = nullptr;  // host-mapped: a bounded wait's record before its trap
  MoeFusedWaitFailure* failure_dev = nullptr;
};
void alloc_fused_local(const MoeDims& d, const MoeFusedSizes& z, MoePrecision precision, MoeFusedLocalBuffers& b);
// Never throws (destructors): frees on the current device, ignoring errors.
void free_fused_local(MoeFusedLocalBuffers& b) noexcept;
// One allocation per peer-reachable buffer on the current device, zero-filled (one-GPU layers).
void alloc_fused_peer(const MoeFusedSizes& z, MoePrecision precision, MoeFusedPeerView& v);
void free_fused_peer(MoeFusedPeerView& v) noexcept;

// The operands of one run on one rank: bf16 tokens and output, the routing, the GEMM weights (bf16, or
// e4m3 with their 128 x 128 block scales) in the kernel's layouts (MoeFusedArguments).
struct MoeFusedOperands {
  const std::uint16_t* x = nullptr;  // [tokens][hidden]
  const void* w1 = nullptr;          // [local experts][2·h_inter][hidden]: gate rows, then up rows
  const void* w2 = nullptr;          // [local experts][hidden][h_inter]
  const float* w1_scale = nullptr;   // FP8: [local experts][2·h_inter / 128][hidden / 128]
  const float* w2_scale = nullptr;   // FP8: [local experts][hidden / 128][h_inter / 128]
  const int* expert_ids = nullptr;   // [tokens][top_k]
  const float* weights = nullptr;    // [tokens][top_k]
  std::uint16_t* y = nullptr;        // [tokens][hidden]
};

// What the launch needs besides the buffers.
struct MoeFusedRunConfig {
  int tokens = 0;              // this run's tokens (<= the d.tokens the buffers were sized for)
  std::uint32_t epoch = 0;     // >= 1, one more than the layer's previous run
  int schedule_param = 1;      // interleaved: lead rows D; wave: experts per wave
  MoeCombineIssue combine = MoeCombineIssue::kPiggyback;
  bool fp8 = false;
  double timeout_s = 10.0;     // the kernel's bounded waits (capped at 10 s)
};

// Kernel parameters of a normal run of rank `rank` (d.ranks peers in `peers`, index: team rank).
MoeFusedArguments moe_fused_params(const MoeDims& d, const MoeFusedSizes& z, int rank, const MoeFusedRunConfig& run,
                                   const MoeFusedOperands& in, const MoeFusedLocalBuffers& local,
                                   const MoeFusedPeerView* peers);

// The default schedule parameter: the lead rows D of the interleaved order (model::moe_default_lead_rows
// for this grid) or a quarter of the local experts per wave; `requested` > 0 is taken as given.
int moe_fused_schedule_param(MoeFusedSchedule schedule, int requested, const MoeDims& d, int grid);

// One run on `stream`, nothing waited for on the host: l1_done reset, dispatch plan of p.tokens tokens,
// fused kernel and completion kernel.
cudaError_t enqueue_moe_fused_run(const MoeFusedArguments& p, const MoeFusedLocalBuffers& local,
                                  MoeFusedSchedule schedule, int grid, cudaStream_t stream);

// One line describing the bounded wait that expired ("" when f.code is 0).
std::string moe_fused_failure_text(const MoeFusedWaitFailure& f);
// The record in host-mapped memory, read without any CUDA call (valid after a sticky error).
MoeFusedWaitFailure read_fused_failure(const MoeFusedLocalBuffers& local);

}  // namespace xstage::moe
