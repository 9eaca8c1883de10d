// `xstage attn bench`: correctness check and timing of the attention forward kernel on one shape.
//
// The check runs on fresh random inputs with the output poisoned (NaN) beforehand: every output element
// must be written, and sampled rows must match the host reference within what a bf16 implementation
// reaches. Timing: warm-up, then many launches each between its own pair of events, inputs rotated
// over enough sets to exceed the L2 several times, median reported with the raw samples.
#include <CLI/CLI.hpp>
#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "attn_check.hpp"
#include "attn_forward.hpp"
#include "attn_random.hpp"
#include "attn_reference.hpp"
#include "cli_common.hpp"
#include "cli_gpu.hpp"
#include "registry.hpp"
#include "xstage/model/error.hpp"
#include "xstage/model/stats.hpp"
#include "xstage/sched/attn_tile_config.hpp"
#ifdef XSTAGE_ATTN_HAVE_PROVENANCE
#include "xstage/gpu/provenance.hpp"
#endif

namespace xstage::cli {
// `attn ulysses` (tools/xstage/cmd_ulysses.cpp), present when the communication library is built.
__attribute__((weak)) void add_attn_ulysses(CLI::App* attn);
}  // namespace xstage::cli

namespace {

using xstage::cli::out_printf;
using xstage::cli::out_stream;

using namespace xstage::attn;

struct BenchOptions {
  int seq = 0;
  int seq_kv = 0;  // 0: same as seq
  int heads = 0;
  int head_dim = 128;
  int batch = 1;
  int iters = 50;
  int warmup = 10;
  int check_rows = 256;
  int device = 0;
  long long seed = -1;  // -1: fresh
  bool lse = false;
  bool json = false;
  bool force = false;
  std::string out;
  std::string dump_dir;
};

// The exact command line, for provenance: CLI11 callbacks do not see argv, /proc does.
std::vector<std::string> own_command_line() {
  std::vector<std::string> args;
  std::ifstream f("/proc/self/cmdline", std::ios::binary);
  std::string a;
  while (std::getline(f, a, '\0')) args.push_back(a);
  return args;
}

struct DeviceSet {
  void *q = nullptr, *k = nullptr, *v = nullptr, *o = nullptr;
  float* lse = nullptr;
};

void write_raw(const std::string& path, const void* data, size_t bytes, bool force) {
  xstage::cli::write_file_atomically(path, std::string(static_cast<const char*>(data), bytes), force, {}, "--dump");
}

int run_bench(const BenchOptions& opt) {
  if (!xstage::sched::attn_head_dim_supported(opt.head_dim)) {
    throw xstage::InputError(fmt::format("--head-dim: unsupported value {} (supported: 64, 128)", opt.head_dim));
  }
  const int seq_kv_checked = opt.seq_kv > 0 ? opt.seq_kv : opt.seq;
  // Element counts of the largest buffers in 64-bit integers (each tensor is b x s x h x d bf16).
  xstage::cli::checked_product({{"--batch", opt.batch}, {"--seq", std::max(opt.seq, seq_kv_checked)},
                                {"--heads", opt.heads}, {"--head-dim", opt.head_dim}},
                               std::int64_t{1} << 36);
  if (!opt.out.empty()) xstage::cli::check_output_path("--out", opt.out, opt.force);
  if (!opt.dump_dir.empty())
    for (const char* f : {"q.bin", "k.bin", "v.bin", "o.bin"})
      xstage::cli::check_output_path("--dump", opt.dump_dir + "/" + f, opt.force);
  xstage::cli::require_cuda_devices("attn bench", {opt.device});
  XSTAGE_ATTN_CUDA_CHECK(cudaSetDevice(opt.device));
  cudaDeviceProp prop{};
  XSTAGE_ATTN_CUDA_CHECK(cudaGetDeviceProperties(&prop, opt.device));

  const int seq_kv = opt.seq_kv > 0 ? opt.seq_kv : opt.seq;
  const AttnForwardProblem p = make_bshd_problem(opt.batch, opt.seq, seq_kv, opt.heads, opt.head_dim);
  const uint64_t seed = opt.seed >= 0 ? uint64_t(opt.seed) : (uint64_t(std::random_device{}()) << 32 | std::random_device{}());

  const size_t nq = size_t(p.batch) * p.seq_q * p.heads * p.head_dim;
  const size_t nkv = size_t(p.batch) * p.seq_k * p.heads * p.head_dim;
  const size_t nl = size_t(p.batch) * p.heads * p.seq_q;
  const size_t set_bytes = 2 * (2 * nq + 2 * nkv);
  // Rotate over enough input sets that one pass touches at least 3x the L2, so no launch finds its
  // inputs in cache from the previous one.
  const size_t rotate_bytes = 3 * size_t(prop.l2CacheSize);
  const int sets = int(std::min<size_t>(16, std::max<size_t>(2, (rotate_bytes + set_bytes - 1) / set_bytes)));

  cudaStream_t stream;
  XSTAGE_ATTN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::vector<DeviceSet> dev(sets);
  for (int s = 0; s < sets; ++s) {
    XSTAGE_ATTN_CUDA_CHECK(cudaMalloc(&dev[s].q, nq * 2));
    XSTAGE_ATTN_CUDA_CHECK(cudaMalloc(&dev[s].k, nkv * 2));
    XSTAGE_ATTN_CUDA_CHECK(cudaMalloc(&dev[s].v, nkv * 2));
    XSTAGE_ATTN_CUDA_CHECK(cudaMalloc(&dev[s].o, nq * 2));
    if (opt.lse) XSTAGE_ATTN_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&dev[s].lse), nl * 4));
    XSTAGE_ATTN_CUDA_CHECK(attn_fill_normal_bf16(dev[s].q, nq, seed + 4 * s + 1, 1.f, stream));
    XSTAGE_ATTN_CUDA_CHECK(attn_fill_normal_bf16(dev[s].k, nkv, seed + 4 * s + 2, 1.f, stream));
    XSTAGE_ATTN_CUDA_CHECK(attn_fill_normal_bf16(dev[s].v, nkv, seed + 4 * s + 3, 1.f, stream));
  }
  auto args_for = [&](int s) { return AttnForwardArgs{p, dev[s].q, dev[s].k, dev[s].v, dev[s].o, dev[s].lse}; };
  {
    const std::string why = attn_forward_can_implement(args_for(0));
    if (!why.empty()) throw xstage::InputError("problem not supported: " + why);
  }

  // --- correctness on set 0 ---
  XSTAGE_ATTN_CUDA_CHECK(cudaMemsetAsync(dev[0].o, 0xff, nq * 2, stream));  // NaN poison
  if (dev[0].lse) XSTAGE_ATTN_CUDA_CHECK(cudaMemsetAsync(dev[0].lse, 0xff, nl * 4, stream));
  XSTAGE_ATTN_CUDA_CHECK(attn_forward(args_for(0), stream));
  XSTAGE_ATTN_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<uint16_t> hq(nq), hk(nkv), hv(nkv), ho(nq);
  std::vector<float> hlse(dev[0].lse ? nl : 0);
  XSTAGE_ATTN_CUDA_CHECK(cudaMemcpy(hq.data(), dev[0].q, nq * 2, cudaMemcpyDeviceToHost));
  XSTAGE_ATTN_CUDA_CHECK(cudaMemcpy(hk.data(), dev[0].k, nkv * 2, cudaMemcpyDeviceToHost));
  XSTAGE_ATTN_CUDA_CHECK(cudaMemcpy(hv.data(), dev[0].v, nkv * 2, cudaMemcpyDeviceToHost));
  XSTAGE_ATTN_CUDA_CHECK(cudaMemcpy(ho.data(), dev[0].o, nq * 2, cudaMemcpyDeviceToHost));
  if (!hlse.empty()) XSTAGE_ATTN_CUDA_CHECK(cudaMemcpy(hlse.data(), dev[0].lse, nl * 4, cudaMemcpyDeviceToHost));
  const size_t unwritten = attn_count_non_finite(p, ho.data());
  const std::vector<AttnRow> rows = attn_sample_rows(p, size_t(opt.check_rows), seed);
  std::vector<float> ref, ref_lse, ref16, ref16_lse;
  attn_reference_rows(p, hq.data(), hk.data(), hv.data(), rows, AttnRefPrecision::kExact, ref, ref_lse);
  attn_reference_rows(p, hq.data(), hk.data(), hv.data(), rows, AttnRefPrecision::kBf16, ref16, ref16_lse);
  const AttnErrorStats ours = attn_compare(attn_gather_rows(p, ho.data(), rows), ref);
  const AttnErrorStats bf16 = attn_compare(ref16, ref);
  double lse_max_abs = 0;
  for (size_t i = 0; i < rows.size() && !hlse.empty(); ++i) {
    const float got = hlse[(size_t(rows[i].batch) * p.heads + rows[i].head) * p.seq_q + rows[i].row];
    lse_max_abs = std::max(lse_max_abs, std::isfinite(got) ? std::fabs(double(got) - ref_lse[i]) : INFINITY);
  }
  const bool passed = unwritten == 0 && ours.non_finite == 0 && ours.rel_l2 < 1e-2 &&
                      ours.rel_l2 <= 2.0 * bf16.rel_l2 + 1e-4 && lse_max_abs < 1e-3;

  // --- timing ---
  for (int i = 0; i < opt.warmup; ++i) XSTAGE_ATTN_CUDA_CHECK(attn_forward(args_for(i % sets), stream));
  std::vector<cudaEvent_t> ev(2 * size_t(opt.iters));
  for (auto& e : ev) XSTAGE_ATTN_CUDA_CHECK(cudaEventCreate(&e));
  for (int i = 0; i < opt.iters; ++i) {
    XSTAGE_ATTN_CUDA_CHECK(cudaEventRecord(ev[2 * i], stream));
    XSTAGE_ATTN_CUDA_CHECK(attn_forward(args_for(i % sets), stream));
    XSTAGE_ATTN_CUDA_CHECK(cudaEventRecord(ev[2 * i + 1], stream));
  }
  XSTAGE_ATTN_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<double> samples_ms(opt.iters);
  for (int i = 0; i < opt.iters; ++i) {
    float ms = 0;
    XSTAGE_ATTN_CUDA_CHECK(cudaEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]));
    samples_ms[i] = ms;
  }
  double sm_clock_mhz = 0;
#ifdef XSTAGE_ATTN_HAVE_PROVENANCE
  sm_clock_mhz = xstage::gpu::measure_sm_clock_mhz(opt.device);
#endif
  const double med = xstage::stats::median(samples_ms);
  const double flops = attn_forward_flops(p);
  const double tflops = flops / (med * 1e-3) / 1e12;

  nlohmann::json j;
  j["schema"] = "xstage.attn_bench";
  j["version"] = 1;
  j["kernel"] = "xstage_attn_fwd_sm90";
  j["shape"] = {{"batch", p.batch}, {"seq_q", p.seq_q}, {"seq_kv", p.seq_k}, {"heads", p.heads},
                {"head_dim", p.head_dim}, {"layout", "bshd"}, {"causal", false}, {"dtype", "bf16"}};
  const auto cfg = xstage::sched::attn_tile_config(p.head_dim);
  j["tile"] = {{"block_m", cfg.block_m}, {"block_n", cfg.block_n}, {"kv_stages", cfg.kv_stages},
               {"mma_warpgroups", cfg.mma_warpgroups}, {"wg_gemm_order", cfg.wg_gemm_order}};
  j["flops"] = flops;
  j["timing"] = {{"median_ms", med},
                 {"min_ms", *std::min_element(samples_ms.begin(), samples_ms.end())},
                 {"max_ms", *std::max_element(samples_ms.begin(), samples_ms.end())},
                 {"tflops", tflops},
                 {"iters", opt.iters},
                 {"warmup", opt.warmup},
                 {"input_sets", sets},
                 {"rotated_bytes", set_bytes * size_t(sets)},
                 {"sm_clock_mhz_after", sm_clock_mhz > 0 ? nlohmann::json(sm_clock_mhz) : nlohmann::json(nullptr)},
                 {"samples_ms", samples_ms}};
  j["check"] = {{"passed", passed},
                {"seed", seed},
                {"rows_checked", rows.size()},
                {"unwritten_or_non_finite", unwritten},
                {"rel_l2", ours.rel_l2},
                {"max_abs", ours.max_abs},
                {"bf16_reference_rel_l2", bf16.rel_l2},
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

  xstage::cli::stamp_json(j, "xstage.attn.bench/1");
  // The dump is written once the whole run has succeeded, beside --out, so a failure leaves neither.
  if (!opt.dump_dir.empty()) {
    write_raw(opt.dump_dir + "/q.bin", hq.data(), nq * 2, opt.force);
    write_raw(opt.dump_dir + "/k.bin", hk.data(), nkv * 2, opt.force);
    write_raw(opt.dump_dir + "/v.bin", hv.data(), nkv * 2, opt.force);
    write_raw(opt.dump_dir + "/o.bin", ho.data(), nq * 2, opt.force);
  }
  if (!opt.out.empty()) xstage::cli::write_file_atomically(opt.out, j.dump(2) + "\n", opt.force);
  if (opt.json) {
    out_printf("%s\n", j.dump(2).c_str());
  } else {
    out_printf("attn fwd b=%d s=%d skv=%d h=%d d=%d: %.3f ms median (%d runs), %.1f TFLOP/s; check %s "
                "(rel_l2 %.2e, bf16 ref %.2e, %zu rows, %zu unwritten)\n",
                p.batch, p.seq_q, p.seq_k, p.heads, p.head_dim, med, opt.iters, tflops, passed ? "passed" : "FAILED",
                ours.rel_l2, bf16.rel_l2, rows.size(), unwritten);
  }

  for (auto& e : ev) XSTAGE_ATTN_CUDA_CHECK(cudaEventDestroy(e));
  for (auto& s : dev) {
    XSTAGE_ATTN_CUDA_CHECK(cudaFree(s.q));
    XSTAGE_ATTN_CUDA_CHECK(cudaFree(s.k));
    XSTAGE_ATTN_CUDA_CHECK(cudaFree(s.v));
    XSTAGE_ATTN_CUDA_CHECK(cudaFree(s.o));
    if (s.lse) XSTAGE_ATTN_CUDA_CHECK(cudaFree(s.lse));
  }
  XSTAGE_ATTN_CUDA_CHECK(cudaStreamDestroy(stream));
  if (!passed) throw std::runtime_error("attn bench: correctness check failed");
  return 0;
}

void add_attn(CLI::App& root) {
  CLI::App* attn = root.add_subcommand("attn", "Attention forward kernel (Hopper, bf16): check and benchmark");
  attn->require_subcommand(1);
  auto opt = std::make_shared<BenchOptions>();
  CLI::App* bench = attn->add_subcommand("bench", "Check against the host reference, then time (median of many runs)");
  bench->add_option("--seq", opt->seq, "Query sequence length (tokens)")->required()->check(xstage::cli::kPositive);
  bench->add_option("--seq-kv", opt->seq_kv, "Key/value sequence length (default: --seq)")->check(xstage::cli::kPositive);
  bench->add_option("--heads", opt->heads, "Heads (per GPU)")->required()->check(xstage::cli::kPositive);
  bench->add_option("--head-dim", opt->head_dim, "Head dimension (64 or 128)")->check(xstage::cli::kPositive);
  bench->add_option("--batch", opt->batch, "Batch size")->check(xstage::cli::kPositive);
  bench->add_option("--iters", opt->iters, "Timed launches")->check(xstage::cli::kPositive);
  bench->add_option("--warmup", opt->warmup, "Untimed launches first")->check(xstage::cli::kNonNegative);
  bench->add_option("--check-rows", opt->check_rows, "Query rows checked against the host reference")
      ->check(CLI::Range(2, 1 << 20));
  bench->add_option("--device", opt->device, "CUDA device ordinal")->check(xstage::cli::kNonNegative);
  xstage::cli::add_seed_option(bench, opt->seed, "Input seed");
  bench->add_flag("--lse", opt->lse, "Also write and check the log-sum-exp output");
  xstage::cli::add_json_option(bench, opt->json, "Print the result as JSON");
  xstage::cli::add_out_option(bench, opt->out, "Also write the JSON result to this file");
  xstage::cli::add_force_option(bench, opt->force, "Replace --out and the --dump files if they exist");
  bench->add_option("--dump", opt->dump_dir, "Write q, k, v, o of the checked run (raw bf16) into this folder")
      ->check(CLI::ExistingDirectory);
  bench->callback([opt]() { run_bench(*opt); });
  if (xstage::cli::add_attn_ulysses) xstage::cli::add_attn_ulysses(attn);
}

}  // namespace

XSTAGE_SUBCOMMAND(cmd_attn, "attn", 50, add_attn);
