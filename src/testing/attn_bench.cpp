// `xstage attn bench`'s run (xstage/testing/attn_bench.hpp).
#include "xstage/testing/attn_bench.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "attn_fp8_quant.hpp"  // the FP8 pre-pass, timed alone for the breakdown
#include "xstage/attn/forward.hpp"
#include "xstage/gpu/check.hpp"
#include "xstage/model/error.hpp"
#include "xstage/sched/attn_tile_config.hpp"
#include "xstage/testing/attn_random.hpp"
#include "xstage/testing/attn_reference.hpp"
#include "xstage/testing/bench_host.hpp"
#include "xstage/model/stats.hpp"
#include "xstage/testing/timing.hpp"
#ifdef XSTAGE_ATTN_HAVE_PROVENANCE
#include "xstage/gpu/provenance.hpp"
#endif

namespace xstage::testing {

using namespace xstage::attn;

namespace {
struct DeviceSet {
  void *q = nullptr, *k = nullptr, *v = nullptr, *o = nullptr;
  float* lse = nullptr;
};
}  // namespace

AttnBenchResult run_attn_bench(const AttnBenchOptions& opt) {
  XSTAGE_CUDA_CHECK(cudaSetDevice(opt.device));
  cudaDeviceProp prop{};
  XSTAGE_CUDA_CHECK(cudaGetDeviceProperties(&prop, opt.device));

  const int seq_kv = opt.seq_kv > 0 ? opt.seq_kv : opt.seq;
  const AttnForwardProblem p = make_bshd_problem(opt.batch, opt.seq, seq_kv, opt.heads, opt.head_dim);
  const uint64_t seed = resolve_seed(opt.seed);

  const size_t nq = size_t(p.batch) * p.seq_q * p.heads * p.head_dim;
  const size_t nkv = size_t(p.batch) * p.seq_k * p.heads * p.head_dim;
  const size_t nl = size_t(p.batch) * p.heads * p.seq_q;
  const size_t set_bytes = 2 * (2 * nq + 2 * nkv);
  // Rotate over enough input sets that one pass touches at least 3x the L2, so no launch finds its
  // inputs in cache from the previous one.
  const size_t rotate_bytes = 3 * size_t(prop.l2CacheSize);
  const int sets = int(std::min<size_t>(16, std::max<size_t>(2, (rotate_bytes + set_bytes - 1) / set_bytes)));

  cudaStream_t stream;
  XSTAGE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::vector<DeviceSet> dev(sets);
  for (int s = 0; s < sets; ++s) {
    XSTAGE_CUDA_CHECK(cudaMalloc(&dev[s].q, nq * 2));
    XSTAGE_CUDA_CHECK(cudaMalloc(&dev[s].k, nkv * 2));
    XSTAGE_CUDA_CHECK(cudaMalloc(&dev[s].v, nkv * 2));
    XSTAGE_CUDA_CHECK(cudaMalloc(&dev[s].o, nq * 2));
    if (opt.lse) XSTAGE_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&dev[s].lse), nl * 4));
    XSTAGE_CUDA_CHECK(attn_fill_normal_bf16(dev[s].q, nq, seed + 4 * s + 1, 1.f, stream));
    XSTAGE_CUDA_CHECK(attn_fill_normal_bf16(dev[s].k, nkv, seed + 4 * s + 2, 1.f, stream));
    XSTAGE_CUDA_CHECK(attn_fill_normal_bf16(dev[s].v, nkv, seed + 4 * s + 3, 1.f, stream));
  }
  // One workspace (FP8, or bf16's split tail): the launches run one after another on one stream, as a
  // model's layers do.
  const size_t ws_bytes = attn_forward_workspace_bytes(p, opt.precision, opt.tail);
  void* ws = nullptr;
  if (ws_bytes) XSTAGE_CUDA_CHECK(cudaMalloc(&ws, ws_bytes));
  auto args_for = [&](int s) {
    AttnForwardArgs a{p, dev[s].q, dev[s].k, dev[s].v, dev[s].o, dev[s].lse};
    a.precision = opt.precision;
    a.workspace = ws;
    a.workspace_bytes = ws_bytes;
    return a;
  };
  {
    const std::string why = attn_forward_can_implement(args_for(0));
    if (!why.empty()) throw xstage::InputError("problem not supported: " + why);
  }

  // --- correctness on set 0 ---
  XSTAGE_CUDA_CHECK(cudaMemsetAsync(dev[0].o, 0xff, nq * 2, stream));  // NaN poison
  if (dev[0].lse) XSTAGE_CUDA_CHECK(cudaMemsetAsync(dev[0].lse, 0xff, nl * 4, stream));
  XSTAGE_CUDA_CHECK(attn_forward(args_for(0), stream));
  XSTAGE_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<uint16_t> hq(nq), hk(nkv), hv(nkv), ho(nq);
  std::vector<float> hlse(dev[0].lse ? nl : 0);
  XSTAGE_CUDA_CHECK(cudaMemcpy(hq.data(), dev[0].q, nq * 2, cudaMemcpyDeviceToHost));
  XSTAGE_CUDA_CHECK(cudaMemcpy(hk.data(), dev[0].k, nkv * 2, cudaMemcpyDeviceToHost));
  XSTAGE_CUDA_CHECK(cudaMemcpy(hv.data(), dev[0].v, nkv * 2, cudaMemcpyDeviceToHost));
  XSTAGE_CUDA_CHECK(cudaMemcpy(ho.data(), dev[0].o, nq * 2, cudaMemcpyDeviceToHost));
  if (!hlse.empty()) XSTAGE_CUDA_CHECK(cudaMemcpy(hlse.data(), dev[0].lse, nl * 4, cudaMemcpyDeviceToHost));
  const size_t unwritten = attn_count_non_finite(p, ho.data());
  const std::vector<AttnRow> rows = attn_sample_rows(p, size_t(opt.check_rows), seed);
  std::vector<float> ref, ref_lse, ref16, ref16_lse;
  attn_reference_rows(p, hq.data(), hk.data(), hv.data(), rows, AttnRefPrecision::kExact, ref, ref_lse);
  attn_reference_rows(p, hq.data(), hk.data(), hv.data(), rows, AttnRefPrecision::kBf16, ref16, ref16_lse);
  const AttnErrorStats ours = attn_compare(attn_gather_rows(p, ho.data(), rows), ref);
  const AttnErrorStats bf16 = attn_compare(ref16, ref);
  const bool fp8 = opt.precision == AttnPrecision::kFp8;
  // The LSE's error bound: absolute for bf16; for FP8 relative to the row's LSE (it carries the scores'
  // quantization error, which grows with the scores), as in tests/gpu/test_attn_fp8.cu.
  double lse_max_abs = 0, lse_worst_over_bound = 0;
  for (size_t i = 0; i < rows.size() && !hlse.empty(); ++i) {
    const float got = hlse[(size_t(rows[i].batch) * p.heads + rows[i].head) * p.seq_q + rows[i].row];
    const double err = std::isfinite(got) ? std::fabs(double(got) - ref_lse[i]) : INFINITY;
    lse_max_abs = std::max(lse_max_abs, err);
    lse_worst_over_bound = std::max(lse_worst_over_bound, err / (fp8 ? 0.02 * std::fabs(double(ref_lse[i])) + 0.05 : 1e-3));
  }
  // bf16: within 2x of a bf16 implementation's error. FP8: the correctness bounds of the FP8 GPU tests
  // (the number formats' own error is 3.7-4.5 %: bench/attn/fp8_error_model.py); the accuracy
  // bars are reported beside them (check.bars), not folded into passed.
  const bool passed = unwritten == 0 && ours.non_finite == 0 && lse_worst_over_bound <= 1.0 &&
                      (fp8 ? ours.cosine >= 0.995 && ours.rel_l1 <= 6e-2
                           : ours.rel_l2 < 1e-2 && ours.rel_l2 <= 2.0 * bf16.rel_l2 + 1e-4);

  // --- timing ---
  const std::vector<double> samples_ms = time_launches(stream, opt.warmup, opt.iters, [&](int i) {
    XSTAGE_CUDA_CHECK(attn_forward(args_for(i % sets), stream));
  });
  // FP8: the quantization pre-pass alone (it is inside every sample above), for the cost breakdown.
  std::vector<double> prepass_ms;
  if (fp8) {
    const Fp8Workspace layout = fp8_workspace_layout(p);
    prepass_ms = time_launches(stream, opt.warmup, opt.iters, [&](int i) {
      XSTAGE_CUDA_CHECK(fp8_quantize(args_for(i % sets), layout, stream));
    });
  }
  double sm_clock_mhz = 0;
#ifdef XSTAGE_ATTN_HAVE_PROVENANCE
  sm_clock_mhz = xstage::gpu::measure_sm_clock_mhz(opt.device);
#endif
  const double med = stats::median_or_nan(samples_ms);
  const double flops = attn_forward_flops(p);
  const double tflops = flops / (med * 1e-3) / 1e12;

  nlohmann::json j;
  j["schema"] = "xstage.attn_bench";
  j["version"] = 1;
  j["kernel"] = fp8 ? "xstage_attn_fwd_fp8_sm90" : "xstage_attn_fwd_sm90";
  j["precision"] = attn_precision_name(opt.precision);
  j["tail"] = opt.tail == AttnTail::kSplit ? "split" : "whole";
  j["tail_split"] = opt.precision == AttnPrecision::kBf16 && ws_bytes > 0;  // whether this shape's schedule split
  j["shape"] = {{"batch", p.batch}, {"seq_q", p.seq_q}, {"seq_kv", p.seq_k}, {"heads", p.heads},
                {"head_dim", p.head_dim}, {"layout", "bshd"}, {"causal", false}, {"dtype", "bf16"}};
  const auto cfg = xstage::sched::attn_kernel_tile_config(p.head_dim, fp8);
  j["tile"] = {{"block_m", cfg.block_m}, {"block_n", cfg.block_n}, {"kv_stages", cfg.kv_stages},
               {"mma_warpgroups", cfg.mma_warpgroups}, {"wg_gemm_order", cfg.wg_gemm_order}};
  j["flops"] = flops;
  j["timing"] = {{"median_ms", med},
                 {"min_ms", stats::min(samples_ms)},
                 {"max_ms", stats::max(samples_ms)},
                 {"tflops", tflops},
                 {"iters", opt.iters},
                 {"warmup", opt.warmup},
                 {"input_sets", sets},
                 {"rotated_bytes", set_bytes * size_t(sets)},
                 {"sm_clock_mhz_after", sm_clock_mhz > 0 ? nlohmann::json(sm_clock_mhz) : nlohmann::json(nullptr)},
                 {"samples_ms", samples_ms}};
  if (fp8) {
    j["timing"]["prepass"] = {{"what", "the quantization pre-pass alone (part of every sample above)"},
                              {"median_ms", stats::median_or_nan(prepass_ms)},
                              {"samples_ms", prepass_ms}};
  }
  j["check"] = {{"passed", passed},
                {"seed", seed},
                {"rows_checked", rows.size()},
                {"unwritten_or_non_finite", unwritten},
                {"rel_l2", ours.rel_l2},
                {"rel_l1", ours.rel_l1},
                {"cosine", ours.cosine},
                {"max_abs", ours.max_abs},
                {"bf16_reference_rel_l2", bf16.rel_l2},
                {"bars", fp8 ? nlohmann::json{{"cosine_ge_0_999", ours.cosine >= 0.999}, {"rel_l1_le_3e-2", ours.rel_l1 <= 3e-2}}
                             : nlohmann::json(nullptr)},
                {"lse_max_abs", hlse.empty() ? nlohmann::json(nullptr) : nlohmann::json(lse_max_abs)}};
#ifdef XSTAGE_ATTN_HAVE_PROVENANCE
  {
    std::vector<std::string> args = own_command_line();
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    j["provenance"] = xstage::gpu::collect_provenance({opt.device}, int(args.size()), argv.data());
  }
#else
  j["provenance"] = {{"device", prop.name}, {"sm_count", prop.multiProcessorCount}};
#endif

  AttnBenchResult result;
  result.json = std::move(j);
  result.passed = passed;
  std::ostringstream line;
  print_to(line, "attn fwd %s b=%d s=%d skv=%d h=%d d=%d: %.3f ms median (%d runs), %.1f TFLOP/s; check %s "
           "(rel_l2 %.2e, rel_l1 %.2e, cosine %.6f, bf16 ref rel_l2 %.2e, %zu rows, %zu unwritten)\n",
           attn_precision_name(opt.precision), p.batch, p.seq_q, p.seq_k, p.heads, p.head_dim, med, opt.iters,
           tflops, passed ? "passed" : "FAILED", ours.rel_l2, ours.rel_l1, ours.cosine, bf16.rel_l2, rows.size(),
           unwritten);
  result.summary = line.str();
  if (opt.keep_inputs) {
    auto bytes = [](const std::vector<uint16_t>& v) {
      return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 2);
    };
    result.dumps = {{"q.bin", bytes(hq)}, {"k.bin", bytes(hk)}, {"v.bin", bytes(hv)}, {"o.bin", bytes(ho)}};
  }
  for (auto& s : dev) {
    XSTAGE_CUDA_CHECK(cudaFree(s.q));
    XSTAGE_CUDA_CHECK(cudaFree(s.k));
    XSTAGE_CUDA_CHECK(cudaFree(s.v));
    XSTAGE_CUDA_CHECK(cudaFree(s.o));
    if (s.lse) XSTAGE_CUDA_CHECK(cudaFree(s.lse));
  }
  if (ws) XSTAGE_CUDA_CHECK(cudaFree(ws));
  XSTAGE_CUDA_CHECK(cudaStreamDestroy(stream));
  return result;
}


}  // namespace xstage::testing
