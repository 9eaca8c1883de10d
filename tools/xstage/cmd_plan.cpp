// xstage plan: design audits. `plan` alone audits the built-in DiT attention and MoE workloads;
// `plan attn` and `plan moe` audit one kernel described by its tiles and timings (plan_audits.cpp).
#include <memory>
#include <string>

#include "cli_common.hpp"
#include "plan_audits.hpp"
#include "registry.hpp"
#include "xstage/model/error.hpp"

namespace xstage::cli {
namespace {

using plan::AttnOptions;
using plan::MoeOptions;
using plan::PlanCommon;
using plan::run_attn;
using plan::run_default;
using plan::run_moe;

void add_common(CLI::App* cmd, PlanCommon& c) {
  add_platform_option(cmd, c.platform);
  cmd->add_option("--producers", c.producers, "K: aligned producers (default: the platform's largest measured K)")
      ->check(kPositive);
  add_json_option(cmd, c.json);
}

void add_plan(CLI::App& root) {
  auto common = std::make_shared<PlanCommon>();
  auto attn = std::make_shared<AttnOptions>();
  auto attn_common = std::make_shared<PlanCommon>();
  auto moe = std::make_shared<MoeOptions>();
  auto moe_common = std::make_shared<PlanCommon>();

  CLI::App* plan = root.add_subcommand("plan", "Design audits: built-in DiT attention and MoE workloads, or one kernel");
  add_common(plan, *common);

  CLI::App* a = plan->add_subcommand("attn", "FlashAttention epilogue All-to-All audit (eq. 17-20)");
  add_common(a, *attn_common);
  a->add_option("--block-m", attn->block_m, "b_m: output tile rows")->check(kPositive);
  a->add_option("--head-dim", attn->head_dim, "d: head dimension")->check(kPositive);
  a->add_option("--block-n", attn->block_n, "b_n: KV tile width")->check(kPositive);
  a->add_option("--out-bytes", attn->out_bytes, "bytes per output element (2: bf16)")->check(kPositive);
  a->add_option("--sigma-us", attn->sigma_us, "sigma: measured time per KV tile (us)")->check(kPositive);
  a->add_option("--qk-cover-us", attn->qk_cover_us, "G_QK of eq. 19 (us; default sigma/2)")->check(kNonNegative);
  a->add_option("--latency-us", attn->latency_us, "T_lat of eq. 17 (us)")->check(kNonNegative);
  a->add_option("--cover-us", attn->cover_us, "T_cover of eq. 17 (us; default sigma/2)")->check(kNonNegative);
  a->add_option("--seq", attn->seq, "sequence lengths M")->check(kPositive)->capture_default_str();
  a->add_option("--heads-per-gpu", attn->heads_per_gpu, "heads per GPU (for N_t)")->check(kPositive);
  a->add_option("--batch", attn->batch, "batch (for N_t)")->check(kPositive);
  a->callback([attn, attn_common] { run_attn(*attn_common, *attn); });

  CLI::App* m = plan->add_subcommand("moe", "MoE Combine audit, expert-wave vs interleaved (eq. 12-16)");
  add_common(m, *moe_common);
  m->add_option("--shape", moe->shape, "built-in shape (mainloops estimated from the platform's GEMM rate or --sm-tflops)");
  m->add_option("--precision", moe->precision, "bf16 or fp8: which of the platform's per-SM GEMM rates (with --shape)")
      ->capture_default_str();
  m->add_option("--tile-bytes", moe->tile_bytes, "V_t: Combine bytes per Linear-2 tile per producer")->check(kPositive);
  m->add_option("--t-l1-us", moe->t_l1_us, "T_L1^mma (us)")->check(kPositive);
  m->add_option("--t-l2-us", moe->t_l2_us, "T_L2^mma (us)")->check(kPositive);
  m->add_option("--n1", moe->n1, "Linear-1 tiles per cycle")->check(kPositive);
  m->add_option("--n2", moe->n2, "Linear-2 tiles per cycle")->check(kPositive);
  m->add_option("--h-inter", moe->h_inter, "expert intermediate size")->check(kPositive);
  m->add_option("--block-m", moe->block_m, "b_m (with --shape)")->check(kPositive);
  m->add_option("--block-n", moe->block_n, "b_n: N-tile width")->check(kPositive);
  m->add_option("--out-bytes", moe->out_bytes, "bytes per Combine element (with --shape)")->check(kPositive);
  m->add_option("--sm-tflops", moe->sm_tflops,
                "per-SM TFLOP/s of the estimated mainloops (with --shape; default: the platform's rate at --precision)")
      ->check(in_range(0.01, 1000));
  m->add_option("--staging-us", moe->staging_us, "fixed staging term of T_RS (us)")->check(kNonNegative);
  m->add_flag("--simulate", moe->simulate, "simulate the expert-wave and interleaved orders for one routing (needs --shape)");
  m->add_option("--ranks", moe->ranks, "expert-parallel ranks (--simulate)")->check(kPositive);
  m->add_option("--tokens", moe->tokens_per_rank, "tokens per rank (--simulate)")->check(kPositive);
  m->add_option("--routing", moe->routing, "balanced, skewed (Zipf) or a routing file (xstage.routing/1) (--simulate)");
  add_zipf_option(m, moe->zipf_s);
  add_lead_rows_option(m, moe->lead_rows);
  add_experts_per_wave_option(m, moe->experts_per_wave);
  m->add_option("--combine", moe->combine,
                "how the simulated kernel issues a Linear-2 tile's Combine: piggyback (the fused kernel's default: "
                "one chunk per k-step of the next tiles) or epilogue (one burst after the tile) (--simulate)");
  m->callback([moe, moe_common, m] {
    if (moe->precision != "bf16" && moe->precision != "fp8")
      throw InputError("--precision: must be bf16 or fp8, got \"" + moe->precision + "\"");
    if (moe->combine != "piggyback" && moe->combine != "epilogue")
      throw InputError("--combine: must be piggyback or epilogue, got \"" + moe->combine + "\"");
    if (moe->shape.empty()) {
      for (const char* opt : {"--tile-bytes", "--t-l1-us", "--t-l2-us", "--n1", "--n2", "--h-inter"})
        if (m->count(opt) == 0) throw InputError(std::string(opt) + " is required without --shape");
    }
    run_moe(*moe_common, *moe);
  });

  plan->callback([common, plan] {
    if (plan->get_subcommands().empty()) run_default(*common);
  });
}

}  // namespace
}  // namespace xstage::cli

XSTAGE_SUBCOMMAND(cmd_plan, "plan", 30, add_plan);
