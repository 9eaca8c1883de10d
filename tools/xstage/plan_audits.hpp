// The audits behind `xstage plan`: the option sets of its three forms and the functions that run them
// (cmd_plan.cpp declares the options and calls these).
#pragma once

#include <string>
#include <vector>

#include "cli_common.hpp"
#include "xstage/model/units.hpp"
#include "xstage/model/workloads.hpp"

namespace xstage::cli::plan {

struct PlanCommon {
  std::string platform;
  int producers = 0;  // 0: the platform's largest measured K
  bool json = false;
};

struct AttnOptions {
  int block_m = 128, head_dim = 128, block_n = 128, out_bytes = 2, heads_per_gpu = 4, batch = 1;
  double sigma_us = units::s_to_us(model::kPaperSigmaS);
  double qk_cover_us = -1, latency_us = 0, cover_us = -1;
  std::vector<long long> seq = {8192, 16384, 32768, 49152, 65536};
};

struct MoeOptions {
  std::string shape;
  double tile_bytes = 0, t_l1_us = 0, t_l2_us = 0, n1 = 0, n2 = 0, staging_us = 0;
  int block_m = 128, block_n = 128, out_bytes = 2, h_inter = 0;
  std::string precision = "bf16";  // with --shape: which of the platform's per-SM GEMM rates estimates the mainloops
  double sm_tflops = 0;            // 0: the platform's rate at --precision (Platform::gemm_rate_at)
  // --simulate: both tile orders through the event simulator for one routing.
  bool simulate = false;
  int ranks = 2;
  int tokens_per_rank = 8192;
  std::string routing = "balanced";
  double zipf_s = kDefaultZipfS;
  int lead_rows = 0;         // 0: model::moe_default_lead_rows (eq. 16's D_knee or the row-dependency floor)
  int experts_per_wave = 0;  // 0: sim::default_experts_per_wave (a quarter of the local experts)
  std::string combine = "piggyback";  // how the simulated kernel issues its Combine: piggyback, epilogue
};

// `plan attn`: one attention kernel's epilogue All-to-All (eq. 17-20).
void run_attn(const PlanCommon& c, const AttnOptions& o);
// `plan moe`: one MoE layer's Combine (eq. 12-16), and with --simulate both tile orders.
void run_moe(const PlanCommon& c, const MoeOptions& o);
// `plan` alone: every built-in workload on the platform, aligned (eq. 10) and as built (simulated).
void run_default(const PlanCommon& c);

}  // namespace xstage::cli::plan
