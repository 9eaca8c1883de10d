// xstage plan: design audits. `plan` alone audits the built-in DiT attention and MoE workloads;
// `plan attn` and `plan moe` audit one kernel described by its tiles and timings (plan_audits.cpp).
#include <memory>
#include <string>

#include "cli_common.hpp"
#include "plan_audits.hpp"
#include "registry.hpp"
#include "xstage/model/error.hpp"
#include "xstage/model/kernel_description.hpp"

namespace xstage::cli {
namespace {

using plan::AttnOptions;
using plan::MoeOptions;
using plan::PlanCommon;
using plan::run_attn;
using plan::run_default;
using plan::run_moe;

std::string builtin_names() {
  std::string names;
  for (const auto& n : model::builtin_kernel_names()) names += (names.empty() ? "" : ", ") + n;
  return names;
}

// Tiles of one kind per cycle of the tile-level form: at most 2^20 (a GEMM dimension's worth).
const CLI::Validator kTilesPerCycle = in_range(0, 1 << 20);

void add_common(CLI::App* cmd, PlanCommon& c) {
  add_platform_option(cmd, c.platform);
  cmd->add_option("--producers", c.producers, "K: aligned producers (default: the platform's largest measured K)")
      ->check(kProducerCount);
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
  // The ranges are the file loaders' (xstage/model/input_file.hpp): a tile edge up to 4096, a duration up to 1 s,
  // a sequence up to 2^26 tokens.
  a->add_option("--block-m", attn->block_m, "b_m: output tile rows")->check(kTileEdge);
  a->add_option("--head-dim", attn->head_dim, "d: head dimension")->check(kTileEdge);
  a->add_option("--block-n", attn->block_n, "b_n: KV tile width")->check(kTileEdge);
  a->add_option("--out-bytes", attn->out_bytes, "bytes per output element (2: bf16)")->check(kElementBytes);
  a->add_option("--sigma-us", attn->sigma_us, "sigma: measured time per KV tile (us)")->check(kPositive)->check(kDurationUs);
  a->add_option("--qk-cover-us", attn->qk_cover_us, "G_QK of eq. 19 (us; default sigma/2)")->check(kDurationUs);
  a->add_option("--latency-us", attn->latency_us, "T_lat of eq. 17 (us)")->check(kDurationUs);
  a->add_option("--cover-us", attn->cover_us, "T_cover of eq. 17 (us; default sigma/2)")->check(kDurationUs);
  a->add_option("--seq", attn->seq, "sequence lengths M")->check(kSeqLength)->capture_default_str();
  a->add_option("--heads-per-gpu", attn->heads_per_gpu, "heads per GPU (for N_t)")->check(kHeadCount);
  a->add_option("--batch", attn->batch, "batch (for N_t)")->check(kPositive);
  a->callback([attn, attn_common] { run_attn(*attn_common, *attn); });

  CLI::App* m = plan->add_subcommand(
      "moe", "MoE Combine audit, expert-wave vs interleaved (eq. 12-16), of a kernel description (--kernel; "
             "docs/kernel_description.md) or of tile-level inputs; --simulate runs both orders");
  add_common(m, *moe_common);
  m->add_option("--kernel", moe->request.kernel,
                "a kernel description: a built-in name (" + builtin_names() + ") or an xstage.kernel/1 file; the flags "
                "below override its fields (--x-y sets field x_y)");
  m->add_option("--shape", moe->request.shape, "a built-in kernel by name (the same as --kernel NAME)");
  m->add_option("--hidden", moe->request.hidden, "hidden size (Linear-1 depth)")->check(kGemmDimension);
  m->add_option("--h-inter", moe->request.h_inter, "expert intermediate size (Linear-2 depth)")->check(kGemmDimension);
  m->add_option("--experts", moe->request.experts, "routed experts")->check(kExpertCount);
  m->add_option("--top-k", moe->request.top_k, "experts per token")->check(kExpertCount);
  m->add_option("--precision", moe->request.precision,
                "bf16 or fp8: which of the platform's per-SM GEMM rates estimates a mainloop not given (default bf16)");
  m->add_option("--sm-tflops", moe->request.sm_tflops,
                "per-SM TFLOP/s of the estimated mainloops (default: the platform's rate at --precision)")
      ->check(in_range(0.01, 1000));
  m->add_option("--t-l1-us", moe->request.t_l1_us, "T_L1^mma: measured Linear-1 full-tile mainloop (us); replaces the estimate")
      ->check(kPositive)
      ->check(kDurationUs);
  m->add_option("--t-l2-us", moe->request.t_l2_us, "T_L2^mma: measured Linear-2 full-tile mainloop (us); replaces the estimate")
      ->check(kPositive)
      ->check(kDurationUs);
  m->add_option("--block-m", moe->request.block_m, "b_m: tile rows (tokens; default 128)")->check(kTileEdge);
  m->add_option("--block-n", moe->request.block_n, "b_n: N-tile width (default 128)")->check(kTileEdge);
  m->add_option("--out-bytes", moe->request.out_bytes, "bytes per Combine element (default 2: bf16)")->check(kElementBytes);
  m->add_option("--staging-us", moe->request.staging_us,
                "staging of a tile before its Combine stores (us; closed form's T_RS term and the simulation)")
      ->check(kDurationUs);
  m->add_option("--tile-bytes", moe->request.tile_bytes,
                "tile-level form (no description): V_t, Combine bytes per Linear-2 tile per producer")
      ->check(kByteCount);
  m->add_option("--n1", moe->request.n1, "tile-level form: Linear-1 tiles per cycle")->check(kPositive)->check(kTilesPerCycle);
  m->add_option("--n2", moe->request.n2, "tile-level form: Linear-2 tiles per cycle")->check(kPositive)->check(kTilesPerCycle);
  m->add_flag("--simulate", moe->request.simulate, "simulate the expert-wave and interleaved orders for one routing of rank 0");
  m->add_option("--ranks", moe->request.ranks, "expert-parallel ranks: the remote share (N-1)/N of the as-built verdict and --simulate (default 2)")->check(kRankCount);
  m->add_option("--tokens", moe->request.tokens, "tokens per rank (--simulate; default 8192)")->check(kPositive);
  m->add_option("--routing", moe->request.routing,
                "balanced, skewed (Zipf) or a routing file (xstage.routing/1) (--simulate; default balanced)");
  m->add_option("--zipf-s,--zipf", moe->request.zipf_s, "Zipf exponent of skewed routing (default 1.2; --zipf: deprecated spelling)")
      ->check(in_range(0.01, 100));
  m->add_option("--lead-rows", moe->request.lead_rows,
                "D of the interleaved order in rows (0, the default: the fused layer's, model::moe_default_lead_rows: "
                "max(eq. 16's D_knee, ceil(G / P1) + 1 + ceil(G h_inter / (P1 hidden))), G = K/2, "
                "P1 = ceil(h_inter / b_n))")
      ->check(in_range(0, 1 << 20));
  m->add_option("--experts-per-wave", moe->request.experts_per_wave,
                "experts per wave of the expert-wave order (0, the default: a quarter of the local experts)")
      ->check(in_range(0, 1 << 20));
  m->add_option("--combine", moe->request.combine,
                "how the kernel issues a Linear-2 tile's Combine (the as-built verdict and --simulate): piggyback (xstage's fused kernel, default: "
                "one chunk per k-step of the next tiles), epilogue (one burst after the tile, on the producer) or "
                "epilogue_issuer (a separate epilogue issuer with --cover-slots accumulator slots, MegaMoE's)");
  m->add_option("--cover-slots", moe->request.cover_slots,
                "with --combine epilogue_issuer: accumulator slots shared by producer and issuer (default 2: "
                "double-buffered, eq. 15)")
      ->check(in_range(1, 16));
  m->add_option("--trace", moe->trace,
                "with --simulate: write both orders' simulated timelines as a Chrome trace (Perfetto, chrome://tracing)")
      ->check(kOutputPath);
  m->add_flag("--force", moe->force, "with --trace: replace an existing file");
  m->callback([moe, moe_common] { run_moe(*moe_common, *moe); });

  plan->callback([common, plan] {
    if (plan->get_subcommands().empty()) run_default(*common);
  });
}

}  // namespace
}  // namespace xstage::cli

XSTAGE_SUBCOMMAND(cmd_plan, "plan", 30, add_plan);
