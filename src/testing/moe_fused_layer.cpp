#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "moe_fp8_kernels.hpp"
#include "moe_fused_launch.hpp"
#include "moe_fused_layer.hpp"
#include "moe_fused_layer_state.hpp"
#include "moe_rank_buffers.hpp"
#include "xstage/comm/window.hpp"
#include "xstage/gpu/check.hpp"
#include "xstage/model/burst_gap.hpp"
#include "xstage/model/error.hpp"
#include "xstage/moe/moe_fused_layout.hpp"

namespace xstage::moe {

MoeFused::MoeFused(comm::Team& team, const MoeDims& dims, const MoeFusedOptions& options, MoePrecision precision)
    : team_(team), dims_(dims), options_(options), precision_(precision) {
  if (dims_.ranks != team_.world_size()) {
    throw InputError("ranks: the layer has " + std::to_string(dims_.ranks) + " ranks, the team " +
                     std::to_string(team_.world_size()));
  }
  if (team_.mode() != comm::LaunchMode::kSingleProcess) {
    throw InputError("fused MoE: needs one process driving every GPU (peer pointers)");
  }
  sizes_ = moe_fused_sizes(dims_, precision_);  // throws InputError naming the field
  capacity_rows_ = sizes_.capacity_rows;
  const int el = dims_.experts_per_rank();
  const size_t H = size_t(dims_.hidden), HI = size_t(dims_.h_inter);
  const bool fp8 = precision_ == MoePrecision::kFp8;
  shared_ = std::make_unique<Shared>();
  Shared& sh = *shared_;
  sh.recv = std::make_unique<comm::PeerBuffers>(team_, sizes_.recv_bytes);
  if (fp8) sh.recv_scale = std::make_unique<comm::PeerBuffers>(team_, sizes_.recv_scale_bytes);
  sh.origin = std::make_unique<comm::PeerBuffers>(team_, sizes_.origin_bytes);
  sh.comb = std::make_unique<comm::PeerBuffers>(team_, sizes_.comb_bytes);
  sh.ctrl = std::make_unique<comm::PeerBuffers>(team_, sizes_.ctrl_bytes);
  sh.views.resize(dims_.ranks);
  for (int r = 0; r < dims_.ranks; ++r) {
    MoeFusedPeerView& v = sh.views[r];
    v.recv = sh.recv->ptr(r);
    if (fp8) v.recv_scale = static_cast<float*>(sh.recv_scale->ptr(r));
    v.origin = static_cast<int*>(sh.origin->ptr(r));
    v.comb = static_cast<std::uint16_t*>(sh.comb->ptr(r));
    v.ctrl = static_cast<char*>(sh.ctrl->ptr(r));
  }

  ranks_.resize(team_.local_ranks().size());
  for (size_t i = 0; i < ranks_.size(); ++i) {
    ranks_[i] = std::make_unique<RankState>();
    RankState& s = *ranks_[i];
    s.lr = &team_.local_ranks()[i];
    s.local_index = int(i);
    XSTAGE_CUDA_CHECK(cudaSetDevice(s.lr->device));
    const int r = s.lr->rank;
    XSTAGE_CUDA_CHECK(cudaMemset(sh.recv->ptr(r), 0, sh.recv->bytes()));
    if (fp8) XSTAGE_CUDA_CHECK(cudaMemset(sh.recv_scale->ptr(r), 0, sh.recv_scale->bytes()));
    XSTAGE_CUDA_CHECK(cudaMemset(sh.origin->ptr(r), 0, sh.origin->bytes()));
    XSTAGE_CUDA_CHECK(cudaMemset(sh.comb->ptr(r), 0, sh.comb->bytes()));
    XSTAGE_CUDA_CHECK(cudaMemset(sh.ctrl->ptr(r), 0, sh.ctrl->bytes()));
    alloc_rank_buffers(dims_, s);
    alloc_fused_local(dims_, sizes_, precision_, s.local);
    if (fp8) {
      s.w1q = device_alloc_zeroed<std::uint8_t>(size_t(el) * 2 * HI * H);
      s.w2q = device_alloc_zeroed<std::uint8_t>(size_t(el) * H * HI);
      s.w1s = device_alloc_zeroed<float>(size_t(el) * (2 * HI / 128) * (H / 128));
      s.w2s = device_alloc_zeroed<float>(size_t(el) * (H / 128) * (HI / 128));
    }
    for (auto& e : s.ev) XSTAGE_CUDA_CHECK(cudaEventCreate(&e));
    const int g = moe_fused_grid(s.lr->device);
    if (g < 2) throw gpu::DeviceError("fused MoE: device " + std::to_string(s.lr->device) + " cannot run the kernel");
    grid_ = grid_ == 0 ? g : std::min(grid_, g);
    XSTAGE_CUDA_CHECK(cudaDeviceSynchronize());
  }
  set_schedule(options_);
}

MoeFused::~MoeFused() {
  for (auto& p : ranks_) {
    RankState& s = *p;
    cudaSetDevice(s.lr->device);
    cudaStreamSynchronize(s.lr->stream);
    free_rank_buffers(s);
    free_fused_local(s.local);
    for (void* d : {(void*)s.w1q, (void*)s.w2q, (void*)s.w1s, (void*)s.w2s, (void*)s.trace, (void*)s.trace_count,
                    (void*)s.comb_local})
      cudaFree(d);
    for (auto& e : s.ev)
      if (e) cudaEventDestroy(e);
  }
}

void MoeFused::set_schedule(const MoeFusedOptions& o) {
  if (o.lead_rows < 0) throw InputError("lead_rows: must be >= 0 (0: the default lead), got " + std::to_string(o.lead_rows));
  if (o.experts_per_wave < 0) {
    throw InputError("experts_per_wave: must be >= 0 (0: default), got " + std::to_string(o.experts_per_wave));
  }
  options_ = o;
}

int MoeFused::schedule_param() const {
  const int requested = options_.schedule == MoeFusedSchedule::kWave ? options_.experts_per_wave : options_.lead_rows;
  return moe_fused_schedule_param(options_.schedule, requested, dims_, grid_);
}

MoeFused::RankState& MoeFused::state_of_rank(int rank) const {
  for (auto& p : ranks_)
    if (p->lr->rank == rank) return *p;
  throw InputError("rank: " + std::to_string(rank) + " is not driven by this process");
}

void MoeFused::set_tokens(int rank, const std::vector<float>& x) {
  const RankState& s = state_of_rank(rank);
  upload_tokens(dims_, s.lr->device, s, x);
}

void MoeFused::set_weights(int rank, const float* w1, const float* w2) {
  const RankState& s = state_of_rank(rank);
  upload_weights(dims_, s.lr->device, s, w1, w2);
  quantize_weights(s.local_index);
}

void MoeFused::quantize_weights(int li) {
  if (precision_ != MoePrecision::kFp8) return;
  RankState& s = *ranks_[li];
  const int el = dims_.experts_per_rank(), H = dims_.hidden, HI = dims_.h_inter;
  XSTAGE_CUDA_CHECK(cudaSetDevice(s.lr->device));
  XSTAGE_CUDA_CHECK(launch_quantize_weight_blocks_fp8(s.w1, el, 2 * HI, H, s.w1q, s.w1s, s.lr->stream));
  XSTAGE_CUDA_CHECK(launch_quantize_weight_blocks_fp8(s.w2, el, H, HI, s.w2q, s.w2s, s.lr->stream));
  XSTAGE_CUDA_CHECK(cudaStreamSynchronize(s.lr->stream));
}

void MoeFused::set_routing(int rank, const Routing& r) {
  const RankState& s = state_of_rank(rank);
  upload_routing(dims_, s.lr->device, rank, s, r);
}

void MoeFused::run(double timeout_s) {
  ++epoch_;
  team_.for_each_local_parallel([&](int li) { run_rank(li, timeout_s); });
  ran_ = true;
}

MoeFusedArguments MoeFused::params_of(int li, double timeout_s) const {
  const RankState& s = *ranks_[li];
  MoeFusedRunConfig run;
  run.tokens = dims_.tokens;
  run.epoch = epoch_;
  run.schedule_param = schedule_param();
  run.combine = options_.combine;
  run.fp8 = precision_ == MoePrecision::kFp8;
  run.timeout_s = timeout_s;
  MoeFusedOperands in;
  in.x = s.x;
  in.w1 = run.fp8 ? static_cast<const void*>(s.w1q) : s.w1;
  in.w2 = run.fp8 ? static_cast<const void*>(s.w2q) : s.w2;
  in.w1_scale = s.w1s;
  in.w2_scale = s.w2s;
  in.expert_ids = s.ids;
  in.weights = s.weights;
  in.y = s.y;
  MoeFusedArguments p = moe_fused_params(dims_, sizes_, s.lr->rank, run, in, s.local, shared_->views.data());
  if (trace_) {
    p.trace = s.trace;
    p.trace_count = s.trace_count;
    p.trace_capacity = trace_capacity_;
  }
  if (local_store_control_) p.comb_local = s.comb_local;
  return p;
}

void MoeFused::run_rank(int li, double timeout_s) {
  RankState& s = *ranks_[li];
  cudaStream_t st = s.lr->stream;
  const MoeFusedArguments p = params_of(li, timeout_s);

  XSTAGE_CUDA_CHECK(cudaEventRecord(s.ev[0], st));
  XSTAGE_CUDA_CHECK(enqueue_moe_fused_run(p, s.local, options_.schedule, grid_, st));
  XSTAGE_CUDA_CHECK(cudaEventRecord(s.ev[1], st));
  wait_rank(li, s.ev[1], timeout_s);
}

void MoeFused::wait_rank(int li, cudaEvent_t done, double timeout_s) const {
  const RankState& s = *ranks_[li];
  const int me = s.lr->rank;
  const auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    const cudaError_t e = cudaEventQuery(done);
    if (e == cudaSuccess) break;
    if (e != cudaErrorNotReady) {
      std::string why = cudaGetErrorString(e);
      const std::string wait = moe_fused_failure_text(read_fused_failure(s.local));
      if (!wait.empty()) why += "; " + wait;
      throw gpu::DeviceError("fused MoE: rank " + std::to_string(me) + " failed: " + why);
    }
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > timeout_s + 15.0) {
      throw gpu::DeviceError("fused MoE: rank " + std::to_string(me) + " did not finish within " +
                             std::to_string(timeout_s) + " s (the kernel's own bounded waits did not fire)");
    }
    std::this_thread::yield();
  }
}

std::vector<double> MoeFused::last_ms() const {
  std::vector<double> out(dims_.ranks, 0.0);
  for (auto& p : ranks_) {
    float v = 0;
    XSTAGE_CUDA_CHECK(cudaEventElapsedTime(&v, p->ev[0], p->ev[1]));
    out[p->lr->rank] = v;
  }
  return out;
}

std::vector<long long> MoeFused::last_received_rows() const {
  std::vector<long long> out(dims_.ranks, 0);
  const int el = dims_.experts_per_rank();
  for (auto& p : ranks_) {
    std::vector<int> t(el);
    XSTAGE_CUDA_CHECK(cudaSetDevice(p->lr->device));
    XSTAGE_CUDA_CHECK(cudaMemcpy(t.data(), p->local.run_totals, size_t(el) * sizeof(int), cudaMemcpyDeviceToHost));
    for (int v : t) out[p->lr->rank] += v;
  }
  return out;
}

std::vector<float> MoeFused::output(int rank) const {
  const RankState& s = state_of_rank(rank);
  return download_output(dims_, s.lr->device, s);
}

std::vector<float> MoeFused::tokens(int rank) const {
  const RankState& s = state_of_rank(rank);
  return download_tokens(dims_, s.lr->device, s);
}

void MoeFused::expert_weights(int e, std::vector<float>& w1, std::vector<float>& w2) const {
  const int el = dims_.experts_per_rank();
  if (e < 0 || e >= dims_.experts) throw InputError("expert: " + std::to_string(e) + " out of range");
  const RankState& s = state_of_rank(e / el);
  download_expert_weights(dims_, s.lr->device, s, e % el, w1, w2);
}

}  // namespace xstage::moe
