#include "moe_fused_launch.hpp"

#include <algorithm>
#include <cstring>
#include <iterator>

#include "moe_device_alloc.hpp"
#include "moe_dispatch_plan.hpp"
#include "xstage/gpu/check.hpp"
#include "xstage/model/burst_gap.hpp"
#include "xstage/model/error.hpp"
#include "xstage/moe/moe_fused_layout.hpp"
#include "xstage/sched/moe_schedule.hpp"

namespace xstage::moe {

namespace {

std::size_t align8(std::size_t n) { return (n + 7) / 8 * 8; }

}  // namespace

std::string moe_fused_check_dims(const MoeDims& d) {
  try {
    validate_dims(d);
  } catch (const InputError& e) {
    return e.what();
  }
  if (d.hidden % 128 != 0) return "hidden: the fused kernel needs a multiple of 128, got " + std::to_string(d.hidden);
  if (d.h_inter % 128 != 0) return "h_inter: the fused kernel needs a multiple of 128, got " + std::to_string(d.h_inter);
  if (d.ranks > kFusedMaxRanks) {
    return "ranks: the fused kernel supports at most " + std::to_string(kFusedMaxRanks) + ", got " +
           std::to_string(d.ranks);
  }
  if (d.experts > kFusedMaxExperts) {
    return "experts: the fused kernel supports at most " + std::to_string(kFusedMaxExperts) + ", got " +
           std::to_string(d.experts);
  }
  const long long slots = (long long)d.tokens * d.top_k;
  if (slots >= (1LL << kOriginSlotBits)) {
    return "tokens: tokens x top_k must stay below 2^" + std::to_string(kOriginSlotBits) + " for the fused kernel, got " +
           std::to_string(slots);
  }
  long long cap = recv_capacity_rows(d.ranks, d.tokens, d.top_k, d.experts_per_rank(), kFusedBlockM);
  cap = (cap + kFusedBlockM - 1) / kFusedBlockM * kFusedBlockM;
  const long long max_pairs = std::max<long long>(d.h_inter / 128, (d.hidden / 128 + 1) / 2);
  if (cap / kFusedBlockM * max_pairs >= (1LL << 31) || cap >= (1LL << 31)) {
    return "tokens: too many rows for the fused kernel's 32-bit tile cursors";
  }
  return "";
}

MoeFusedSizes moe_fused_sizes(const MoeDims& d, MoePrecision precision) {
  const std::string why = moe_fused_check_dims(d);
  if (!why.empty()) throw InputError(why);
  MoeFusedSizes z;
  const int el = d.experts_per_rank();
  z.capacity_rows = recv_capacity_rows(d.ranks, d.tokens, d.top_k, el, kFusedBlockM);
  z.capacity_rows = (z.capacity_rows + kFusedBlockM - 1) / kFusedBlockM * kFusedBlockM;
  const std::size_t H = std::size_t(d.hidden), HI = std::size_t(d.h_inter), cap = std::size_t(z.capacity_rows);
  const bool fp8 = precision == MoePrecision::kFp8;
  const std::size_t esize = fp8 ? 1 : 2;  // bytes per GEMM operand element
  z.slots = std::size_t(d.tokens) * d.top_k;
  z.recv_bytes = cap * H * esize;
  z.recv_scale_bytes = fp8 ? cap * (H / 128) * sizeof(float) : 0;
  z.origin_bytes = cap * sizeof(int);
  z.comb_bytes = std::max<std::size_t>(1, z.slots * H * 2);
  z.off_arrive = 0;
  z.off_counts = align8(z.off_arrive + std::size_t(el) * sizeof(std::uint64_t));
  z.off_count_flag = align8(z.off_counts + std::size_t(d.ranks) * d.experts * sizeof(int));
  z.off_done = align8(z.off_count_flag + std::size_t(d.ranks) * sizeof(std::uint32_t));
  z.ctrl_bytes = z.off_done + std::size_t(d.ranks) * kFusedMaxGrid * sizeof(std::uint32_t);
  z.h_bytes = cap * HI * esize;
  z.h_scale_bytes = fp8 ? cap * (HI / kFusedFp8L2Group) * sizeof(float) : 0;
  z.l1_done_count = cap / kFusedBlockM;
  return z;
}

void alloc_fused_local(const MoeDims& d, const MoeFusedSizes& z, MoePrecision precision, MoeFusedLocalBuffers& b) {
  const int el = d.experts_per_rank();
  b.h = device_alloc_zeroed<std::uint8_t>(z.h_bytes);
  if (precision == MoePrecision::kFp8) b.h_scale = device_alloc_zeroed<float>(z.h_scale_bytes / sizeof(float));
  b.l1_done = device_alloc_zeroed<std::uint32_t>(z.l1_done_count);
  b.arrive_base = device_alloc_zeroed<std::uint64_t>(el);
  b.run_totals = device_alloc_zeroed<int>(el);
  b.arrive_base_sink = device_alloc_zeroed<std::uint64_t>(el);
  b.run_totals_sink = device_alloc_zeroed<int>(el);
  b.expert_rows = device_alloc_zeroed<int>(d.experts);
  b.expert_offset = device_alloc_zeroed<int>(d.experts);
  b.send_row_of_slot = device_alloc_zeroed<int>(z.slots);
  b.token_of_send_row = device_alloc_zeroed<int>(z.slots);
  XSTAGE_CUDA_CHECK(cudaHostAlloc(&b.failure_host, sizeof(MoeFusedWaitFailure), cudaHostAllocMapped));
  std::memset(b.failure_host, 0, sizeof(MoeFusedWaitFailure));
  XSTAGE_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&b.failure_dev), b.failure_host, 0));
}

void free_fused_local(MoeFusedLocalBuffers& b) noexcept {
  for (void* p : {b.h, (void*)b.h_scale, (void*)b.l1_done, (void*)b.arrive_base, (void*)b.run_totals,
                  (void*)b.arrive_base_sink, (void*)b.run_totals_sink, (void*)b.expert_rows, (void*)b.expert_offset,
                  (void*)b.send_row_of_slot, (void*)b.token_of_send_row})
    if (p) cudaFree(p);
  if (b.failure_host) cudaFreeHost(b.failure_host);
  b = MoeFusedLocalBuffers{};
}

void alloc_fused_peer(const MoeFusedSizes& z, MoePrecision precision, MoeFusedPeerView& v) {
  v.recv = device_alloc_zeroed<std::uint8_t>(z.recv_bytes);
  if (precision == MoePrecision::kFp8) v.recv_scale = device_alloc_zeroed<float>(z.recv_scale_bytes / sizeof(float));
  v.origin = device_alloc_zeroed<int>(z.origin_bytes / sizeof(int));
  v.comb = device_alloc_zeroed<std::uint16_t>(z.comb_bytes / 2);
  v.ctrl = device_alloc_zeroed<char>(z.ctrl_bytes);
}

void free_fused_peer(MoeFusedPeerView& v) noexcept {
  for (void* p : {v.recv, (void*)v.recv_scale, (void*)v.origin, (void*)v.comb, (void*)v.ctrl})
    if (p) cudaFree(p);
  v = MoeFusedPeerView{};
}

MoeFusedArguments moe_fused_params(const MoeDims& d, const MoeFusedSizes& z, int rank, const MoeFusedRunConfig& run,
                                   const MoeFusedOperands& in, const MoeFusedLocalBuffers& local,
                                   const MoeFusedPeerView* peers) {
  const int N = d.ranks, me = rank;
  MoeFusedArguments p;
  p.rank = me;
  p.ranks = N;
  p.tokens = run.tokens;
  p.top_k = d.top_k;
  p.hidden = d.hidden;
  p.h_inter = d.h_inter;
  p.experts = d.experts;
  p.epoch = run.epoch;
  p.schedule_param = run.schedule_param;
  p.combine = run.combine;
  p.timeout_ns = std::uint64_t(std::min(run.timeout_s, 10.0) * 1e9);
  p.fp8 = run.fp8;
  p.x = in.x;
  p.w1 = in.w1;
  p.w2 = in.w2;
  p.w1_scale = in.w1_scale;
  p.w2_scale = in.w2_scale;
  p.expert_ids = in.expert_ids;
  p.weights = in.weights;
  p.expert_rows = local.expert_rows;
  p.expert_offset = local.expert_offset;
  p.token_of_send_row = local.token_of_send_row;
  const MoeFusedPeerView& mine = peers[me];
  p.recv = mine.recv;
  p.h = local.h;
  p.h_scale = local.h_scale;
  if (p.fp8) p.recv_scale = mine.recv_scale;
  p.recv_rows = z.capacity_rows;
  p.origin = mine.origin;
  p.l1_done = local.l1_done;
  p.arrive = reinterpret_cast<std::uint64_t*>(mine.ctrl + z.off_arrive);
  p.arrive_base = local.arrive_base;
  p.run_totals = local.run_totals;
  p.counts = reinterpret_cast<const int*>(mine.ctrl + z.off_counts);
  p.count_flag = reinterpret_cast<const std::uint32_t*>(mine.ctrl + z.off_count_flag);
  p.done_flag = reinterpret_cast<const std::uint32_t*>(mine.ctrl + z.off_done);
  p.comb = mine.comb;
  p.y = in.y;
  for (int r = 0; r < N; ++r) {
    const MoeFusedPeerView& v = peers[r];
    p.recv_peer[r] = v.recv;
    if (p.fp8) p.recv_scale_peer[r] = v.recv_scale;
    p.origin_peer[r] = v.origin;
    p.arrive_peer[r] = reinterpret_cast<std::uint64_t*>(v.ctrl + z.off_arrive);
    p.counts_peer[r] = reinterpret_cast<int*>(v.ctrl + z.off_counts);
    p.count_flag_peer[r] = reinterpret_cast<std::uint32_t*>(v.ctrl + z.off_count_flag);
    p.done_flag_peer[r] = reinterpret_cast<std::uint32_t*>(v.ctrl + z.off_done);
    p.comb_peer[r] = v.comb;
  }
  p.failure = local.failure_dev;
  return p;
}

std::string moe_fused_check_modes(const MoeFusedArguments& a) {
  if (a.gemm_only < 0 || a.gemm_only > 2)
    return "gemm_only: 0 (the layer), 1 (Linear-1 tiles) or 2 (Linear-2 tiles), got " + std::to_string(a.gemm_only);
  if (a.combine != MoeCombineIssue::kEpilogue && a.combine != MoeCombineIssue::kPiggyback)
    return "combine: epilogue or piggyback, got " + std::to_string(int(a.combine));
  return "";
}

MoeFusedShape to_shape_params(const MoeFusedArguments& a) {
  return MoeFusedShape{a.rank, a.ranks, a.tokens, a.top_k, a.hidden, a.h_inter, a.experts, a.epoch, a.schedule_param};
}

MoeFusedSyncParams to_sync_params(const MoeFusedArguments& a) {
  MoeFusedSyncParams s{};
  s.timeout_ns = a.timeout_ns;
  s.failure = a.failure;
  s.count_flag = a.count_flag;
  s.done_flag = a.done_flag;
  std::copy(std::begin(a.count_flag_peer), std::end(a.count_flag_peer), s.count_flag_peer);
  std::copy(std::begin(a.done_flag_peer), std::end(a.done_flag_peer), s.done_flag_peer);
  return s;
}

MoeFusedDispatchParams to_dispatch_params(const MoeFusedArguments& a) {
  MoeFusedDispatchParams d{};
  d.fp8 = a.fp8;
  d.x = a.x;
  d.expert_ids = a.expert_ids;
  d.expert_rows = a.expert_rows;
  d.expert_offset = a.expert_offset;
  d.token_of_send_row = a.token_of_send_row;
  d.counts = a.counts;
  d.run_totals = a.run_totals;
  std::copy(std::begin(a.recv_peer), std::end(a.recv_peer), d.recv_peer);
  std::copy(std::begin(a.recv_scale_peer), std::end(a.recv_scale_peer), d.recv_scale_peer);
  std::copy(std::begin(a.origin_peer), std::end(a.origin_peer), d.origin_peer);
  std::copy(std::begin(a.arrive_peer), std::end(a.arrive_peer), d.arrive_peer);
  std::copy(std::begin(a.counts_peer), std::end(a.counts_peer), d.counts_peer);
  return d;
}

MoeFusedMainloopParams to_mainloop_params(const MoeFusedArguments& a) {
  MoeFusedMainloopParams m{};
  m.gemm_only = MoeGemmOnly(a.gemm_only);
  m.w1_scale = a.w1_scale;
  m.w2_scale = a.w2_scale;
  m.recv_scale = a.recv_scale;
  m.arrive = a.arrive;
  m.arrive_base = a.arrive_base;
  m.l1_done = a.l1_done;
  return m;
}

MoeFusedEpilogueParams to_epilogue_params(const MoeFusedArguments& a) {
  MoeFusedEpilogueParams e{};
  e.combine = a.combine;
  e.h = a.h;
  e.h_scale = a.h_scale;
  e.origin = a.origin;
  std::copy(std::begin(a.comb_peer), std::end(a.comb_peer), e.comb_peer);
  e.weights = a.weights;
  e.comb = a.comb;
  e.y = a.y;
  return e;
}

MoeFusedTraceParams to_trace_params(const MoeFusedArguments& a) {
  return MoeFusedTraceParams{a.trace, a.trace_count, a.trace_capacity, a.comb_local};
}

MoeFusedKernelParams to_params(const MoeFusedArguments& a) {
  return MoeFusedKernelParams{to_shape_params(a),    to_sync_params(a),     to_dispatch_params(a),
                              to_mainloop_params(a), to_epilogue_params(a), to_trace_params(a)};
}

int moe_fused_schedule_param(MoeFusedSchedule schedule, int requested, const MoeDims& d, int grid) {
  if (requested > 0) return requested;
  if (schedule == MoeFusedSchedule::kWave) return sched::default_experts_per_wave(d.experts_per_rank());
  // The default lead (max of eq. 16's D_knee and the row-dependency floor) with b_n = 128 and one
  // producer per CTA of the grid: the D that `--schedule auto` and `plan moe --simulate` predict with.
  return int(model::moe_default_lead_rows(128, grid, d.h_inter, d.hidden));
}

cudaError_t enqueue_moe_fused_run(const MoeFusedArguments& p, const MoeFusedLocalBuffers& local,
                                  MoeFusedSchedule schedule, int grid, cudaStream_t stream) {
  const std::size_t l1_bytes = std::size_t(p.recv_rows / kFusedBlockM) * sizeof(std::uint32_t);
  cudaError_t e = cudaMemsetAsync(local.l1_done, 0, l1_bytes, stream);
  if (e != cudaSuccess) return e;
  e = launch_dispatch_plan(p.expert_ids, p.tokens, p.top_k, p.experts, local.expert_rows, local.expert_offset,
                           local.send_row_of_slot, local.token_of_send_row, stream);
  if (e != cudaSuccess) return e;
  return launch_moe_fused(p, schedule, grid, stream);
}

std::string moe_fused_failure_text(const MoeFusedWaitFailure& f) {
  if (f.code == 0) return "";
  return "rank " + std::to_string(f.rank) + " block " + std::to_string(f.block) + " thread " + std::to_string(f.thread) +
         " timed out waiting for the " + moe_fused_wait_name(f.code) + " (index " + std::to_string(f.index) +
         ": wanted " + std::to_string(f.target) + ", saw " + std::to_string(f.seen) + ")";
}

MoeFusedWaitFailure read_fused_failure(const MoeFusedLocalBuffers& local) {
  MoeFusedWaitFailure f{};
  if (local.failure_host) std::memcpy(&f, local.failure_host, sizeof(f));  // written by the device before its trap
  return f;
}

}  // namespace xstage::moe
