// xstage model: the Burst–Gap model (eq. 3–7) and design test (eq. 10) for K producers × B bytes, gap G.
#include <iostream>
#include <optional>

#include "cli_common.hpp"
#include "registry.hpp"
#include "xstage/model/audit.hpp"
#include "xstage/model/units.hpp"
#include "xstage/planner/requests.hpp"

namespace xstage::cli {
namespace {

// The command's arguments are the planner's model request (xstage/planner/requests.hpp): the JSON output is
// the planner's, the one the C ABI returns.
struct ModelOptions : planner::ModelRequest {
  bool json = false;
};

void run_model(const ModelOptions& o) {
  if (o.json) {
    print_json(planner::model_output(static_cast<const planner::ModelRequest&>(o)));
    return;
  }
  const model::Platform platform = model::load_platform_or_default(o.platform);
  const model::BurstGapAudit a = planner::model_audit(o, platform);
  out_stream() << "platform " << platform_label(o.platform, platform) << ": R = " << fmt_num(units::bytes_per_s_to_gbps(a.drain_rate_bytes_per_s), 1)
            << " GB/s\n";
  print_table({"quantity", "value", "note"},
              {{"V = K*B", fmt_mib(a.volume_bytes, 3) + " MiB", std::to_string(o.producers) + " producers"},
               {"T_iss0", fmt_us(a.t_iss0_s, 3) + " us", model::to_string(a.t_iss0_source)},
               {"Q", fmt_mib(a.capacity_bytes, 3) + " MiB", model::to_string(a.capacity_source)},
               {"T_iss (eq. 3)", fmt_us(a.t_iss_s, 3) + " us", "gap " + fmt_num(o.gap_us, 3) + " us"},
               {"overhead (eq. 4)", fmt_us(a.overhead_s, 3) + " us", ""},
               {"period", fmt_us(a.period_s, 3) + " us", "max(T_iss0 + G, V/R)"},
               {"completion-coupled period", fmt_us(a.completion_coupled_period_s, 3) + " us", "G + V/R"},
               {"G* (eq. 5)", fmt_us(a.recovery_gap_s, 3) + " us", "recovery gap"},
               {"q_peak0 (eq. 6)", fmt_mib(a.q_peak0_bytes, 3) + " MiB", ""},
               {"isolated T_iss (eq. 7)", fmt_us(a.isolated_t_iss_s, 3) + " us", ""},
               {"rate bound", a.verdict.rate_bound_ok ? "ok" : "violated", "V/R <= T_iss0 + G"},
               {"capacity bound", a.verdict.capacity_bound_ok ? "ok" : "violated", "q_peak0 <= Q"},
               {"action (eq. 10)", model::to_string(a.verdict.action), "an aligned burst"},
               {"action, recurring bursts", model::to_string(a.sustained_action), std::string("binds: ") + a.binding_bound}});
}

void add_model(CLI::App& root) {
  auto o = std::make_shared<ModelOptions>();
  CLI::App* cmd = root.add_subcommand("model", "Burst–Gap model for one burst shape: issue time, period, recovery gap, verdict");
  add_platform_option(cmd, o->platform);
  cmd->add_option("--producers", o->producers, "K: producers (CTAs) issuing each burst")->required()->check(kPositive)->check(kProducerCount);
  cmd->add_option("--bytes-per-producer", o->bytes_per_producer, "B: bytes per producer per burst")
      ->required()->check(kPositive)->check(kByteCount);
  cmd->add_option("--gap-us", o->gap_us, "G: producer-side gap between bursts (us)")->check(in_range(0, kMaxGapUs));
  cmd->add_option("--t-iss0-us", o->t_iss0_us, "Override T_iss0 (us) instead of the platform's")->check(kPositive)->check(kDurationUs);
  cmd->add_option("--capacity-bytes", o->capacity_bytes, "Override Q (bytes) instead of the platform's")
      ->check(kPositive)->check(kByteCount);
  add_json_option(cmd, o->json);
  cmd->callback([o] { run_model(*o); });
}

}  // namespace
}  // namespace xstage::cli

XSTAGE_SUBCOMMAND(cmd_model, "model", 10, add_model);
