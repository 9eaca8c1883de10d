#include "moe_layer_harness.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <string>
#include <vector>

#include "moe_baseline_state.hpp"
#include "moe_fused_launch.hpp"
#include "moe_fused_layer_state.hpp"
#include "moe_rank_buffers.hpp"
#include "xstage/gpu/check.hpp"
#include "xstage/model/error.hpp"
#include "xstage/moe/moe_fused_layout.hpp"
#include "xstage/model/stats.hpp"
#include "xstage/testing/timing.hpp"

namespace xstage::testing {

using namespace xstage::moe;

void MoeFusedHarness::fill_random(MoeFused& l, std::uint64_t seed, float weight_scale) {
  for (auto& p : l.ranks_) {
    fill_random_inputs(l.dims_, p->lr->device, p->lr->rank, *p, seed, weight_scale, p->lr->stream);
    l.quantize_weights(p->local_index);
  }
}

void MoeFusedHarness::poison_output(MoeFused& l) {
  for (auto& p : l.ranks_) {
    XSTAGE_CUDA_CHECK(cudaSetDevice(p->lr->device));
    poison_output_async(l.dims_, *p);
    // The combine rows too: a slot the kernel fails to fill shows as NaN in y.
    XSTAGE_CUDA_CHECK(cudaMemset(l.shared_->comb->ptr(p->lr->rank), 0xff, l.shared_->comb->bytes()));
    XSTAGE_CUDA_CHECK(cudaDeviceSynchronize());
  }
}

void MoeFusedHarness::set_trace(moe::MoeFused& l, bool enabled, bool local_store_control) {
  if ((enabled || local_store_control) && !moe_fused_trace_built()) {
    throw InputError("trace: this build records no fused-kernel traces (configure with -DXSTAGE_MOE_TRACE=ON)");
  }
  l.trace_ = enabled;
  l.local_store_control_ = local_store_control;
  if (!enabled && !local_store_control) return;
  // Tiles per CTA: each CTA of a pair takes one tile of each of the row's pairs.
  const long long rows = l.capacity_rows_ / kFusedBlockM;
  const long long n1 = l.dims_.h_inter / 64, n2 = (l.dims_.hidden / 128 + 1) / 2 * 2;
  const int cap = int((rows * (n1 + n2) + l.grid_ - 1) / l.grid_ + 4);
  for (auto& p : l.ranks_) {
    moe::MoeFused::RankState& s = *p;
    XSTAGE_CUDA_CHECK(cudaSetDevice(s.lr->device));
    if (enabled && cap > l.trace_capacity_) {
      if (s.trace) XSTAGE_CUDA_CHECK(cudaFree(s.trace));
      s.trace = device_alloc_zeroed<MoeFusedTileTrace>(size_t(l.grid_) * cap);
    }
    if (enabled && !s.trace_count) s.trace_count = device_alloc_zeroed<std::uint32_t>(l.grid_);
    if (local_store_control && !s.comb_local) {
      s.comb_local = device_alloc_zeroed<std::uint16_t>(size_t(l.dims_.tokens) * l.dims_.top_k * l.dims_.hidden);
    }
  }
  if (enabled) l.trace_capacity_ = std::max(l.trace_capacity_, cap);
}

std::vector<moe::MoeFusedTileTrace> MoeFusedHarness::last_trace(const moe::MoeFused& l, int rank) {
  moe::MoeFused::RankState& s = l.state_of_rank(rank);
  std::vector<MoeFusedTileTrace> out;
  if (!s.trace) return out;
  std::vector<std::uint32_t> count(l.grid_);
  std::vector<MoeFusedTileTrace> all(size_t(l.grid_) * l.trace_capacity_);
  XSTAGE_CUDA_CHECK(cudaSetDevice(s.lr->device));
  XSTAGE_CUDA_CHECK(cudaMemcpy(count.data(), s.trace_count, count.size() * sizeof(std::uint32_t), cudaMemcpyDeviceToHost));
  XSTAGE_CUDA_CHECK(cudaMemcpy(all.data(), s.trace, all.size() * sizeof(MoeFusedTileTrace), cudaMemcpyDeviceToHost));
  for (int c = 0; c < l.grid_; ++c)
    for (std::uint32_t i = 0; i < std::min<std::uint32_t>(count[c], std::uint32_t(l.trace_capacity_)); ++i) {
      out.push_back(all[size_t(c) * l.trace_capacity_ + i]);
      out.back().cta = std::uint32_t(c);
    }
  return out;
}

std::vector<double> MoeFusedHarness::time_gemm_only(moe::MoeFused& l, int mode, int iters, double timeout_s) {
  if (mode != 1 && mode != 2) throw InputError("gemm_only: mode 1 (Linear-1) or 2 (Linear-2), got " + std::to_string(mode));
  if (iters < 1) throw InputError("iters: must be >= 1, got " + std::to_string(iters));
  if (!l.ran_) throw InputError("gemm_only: needs one run() first (its operands are the GEMMs' inputs)");
  const std::uint32_t first_epoch = l.epoch_ + 1;
  l.epoch_ += std::uint32_t(iters);
  std::vector<double> out(l.dims_.ranks, 0.0);
  l.team_.for_each_local_parallel([&](int li) {
    moe::MoeFused::RankState& s = *l.ranks_[li];
    XSTAGE_CUDA_CHECK(cudaSetDevice(s.lr->device));
    cudaStream_t st = s.lr->stream;
    MoeFusedArguments p = l.params_of(li, timeout_s);
    p.gemm_only = mode;
    // Nothing is dispatched: the arrival counters do not move, so neither may their bases. The
    // completion kernel adds this run's row totals to p.arrive_base; point it (and the totals, which
    // the kernel rewrites) at scratch copies so the real ones keep the last normal run's values.
    p.arrive_base = s.local.arrive_base_sink;
    p.run_totals = s.local.run_totals_sink;
    EventSeries ev(iters);
    // Back to back on the stream (no host round trip between launches): each rank's next launch starts
    // once its completion kernel has seen every rank's CTAs finish, so the ranks stay in step.
    for (int i = 0; i < iters; ++i) {
      p.epoch = first_epoch + std::uint32_t(i);
      p.kernel_begin = ev.at(i, 0);
      p.kernel_end = ev.at(i, 1);
      XSTAGE_CUDA_CHECK(launch_moe_fused(p, l.options_.schedule, l.grid_, st));
    }
    XSTAGE_CUDA_CHECK(cudaEventRecord(s.ev[1], st));
    l.wait_rank(li, s.ev[1], timeout_s);
    out[s.lr->rank] = stats::median_or_nan(ev.elapsed_ms());
  });
  return out;
}

void MoeBaselineHarness::fill_random(MoeBaseline& l, std::uint64_t seed, float weight_scale) {
  for (auto& p : l.ranks_) {
    fill_random_inputs(l.dims_, p->lr->device, p->lr->rank, *p, seed, weight_scale, p->lr->stream);
    if (l.precision_ == MoePrecision::kFp8) l.quantize_weights(*p);
  }
}

void MoeBaselineHarness::poison_output(MoeBaseline& l) {
  for (auto& p : l.ranks_) {
    XSTAGE_CUDA_CHECK(cudaSetDevice(p->lr->device));
    poison_output_async(l.dims_, *p);
    XSTAGE_CUDA_CHECK(cudaDeviceSynchronize());
  }
}

}  // namespace xstage::testing
