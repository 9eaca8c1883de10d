// xstage paper: the X-Stage paper as a test set (planner::paper_report, docs/paper_report.md): every table the
// model should predict, rebuilt from the paper's published inputs, with published value, prediction, error and
// verdict per row.
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cli_common.hpp"
#include "registry.hpp"
#include "xstage/model/bounded_text.hpp"
#include "xstage/model/error.hpp"
#include "xstage/planner/paper_report.hpp"

namespace xstage::cli {
namespace {

struct PaperCliOptions {
  std::string platform;
  std::vector<std::string> only;
  std::vector<long long> tokens;
  double a2a_rate_gbps = 0, a2a_fixed_us = -1, latency_us = -1;
  int heads_per_gpu = 0;
  std::string out, text_out;
  bool force = false, json = false;
  std::string own;  // --own DIR: xstage's own two-GPU results instead of the paper
  std::vector<const CLI::Option*> paper_only;  // the paper mode's options, refused with --own
};


planner::PaperOptions paper_options(const PaperCliOptions& c) {
  planner::PaperOptions o;
  if (!c.only.empty()) {
    o.knee = o.table2 = o.ecc = o.distribution = o.table3 = false;
    for (const auto& p : c.only) {
      if (p == "knee") o.knee = true;
      else if (p == "table2") o.table2 = true;
      else if (p == "ecc") o.ecc = true;
      else if (p == "moe84") o.distribution = true;
      else if (p == "table3") o.table3 = true;
      else throw InputError("--only: unknown part \"" + bounded_text(p) + "\" (knee, table2, ecc, moe84, table3)");
    }
  }
  if (!c.tokens.empty()) o.distribution_tokens = c.tokens;
  if (c.a2a_rate_gbps > 0) o.a2a_rate_gbps = c.a2a_rate_gbps;
  if (c.a2a_fixed_us >= 0) o.a2a_fixed_us = c.a2a_fixed_us;
  if (c.latency_us >= 0) o.completion_latency_us = c.latency_us;
  if (c.heads_per_gpu > 0) o.heads_per_gpu = c.heads_per_gpu;
  planner::check_paper_options(o);
  return o;
}

// Both reports: the provenance stamped, then --out (JSON), --text-out, and stdout (JSON with --json, else text).
void write_outputs(const PaperCliOptions& c, nlohmann::json& j, const std::string& text,
                   const std::vector<std::string>& inputs, const model::Platform& platform) {
  std::vector<std::string> files;
  for (const auto& f : inputs)
    if (!f.empty()) files.push_back(f);  // an empty --platform is the embedded one
  stamp_provenance(j, files);
  if (!c.out.empty()) write_file_atomically(c.out, j.dump(2) + "\n", c.force, inputs);
  if (!c.text_out.empty()) write_file_atomically(c.text_out, text, c.force, inputs, "--text-out");
  if (c.json) {
    print_json(j);
    return;
  }
  out_stream() << "platform " << platform_label(c.platform, platform) << "\n" << text;
}

// --own DIR: the MoE matrices' interleaved/wave ratios and the Ulysses sweep's hiding ratios, predicted from the
// platform file (planner::own_report).
void run_own(const PaperCliOptions& c) {
  for (const CLI::Option* opt : c.paper_only)
    if (opt->count() > 0) throw InputError(opt->get_name() + ": applies to the paper's tables, not to --own");
  const std::vector<std::string> inputs = {c.platform, c.own + "/moe/moe_matrix.json", c.own + "/moe/moe_matrix_fp8.json",
                                           c.own + "/ulysses/ulysses.json"};
  if (!c.out.empty()) check_output_path("--out", c.out, c.force, inputs);
  if (!c.text_out.empty()) check_output_path("--text-out", c.text_out, c.force, inputs);
  if (!c.out.empty() && c.out == c.text_out) throw InputError("--out and --text-out: give two different files");
  const model::Platform platform = model::load_platform_or_default(c.platform);
  const planner::OwnReport rep = planner::own_report(platform, c.own);
  nlohmann::json j = planner::to_json(rep);
  stamp_json(j, "xstage.paper_own/1", c.platform, platform);
  write_outputs(c, j, planner::to_text(rep), inputs, platform);
}

void run_paper(const PaperCliOptions& c) {
  if (!c.own.empty()) {
    run_own(c);
    return;
  }
  const std::vector<std::string> inputs = {c.platform};
  if (!c.out.empty()) check_output_path("--out", c.out, c.force, inputs);
  if (!c.text_out.empty()) check_output_path("--text-out", c.text_out, c.force, inputs);
  if (!c.out.empty() && c.out == c.text_out) throw InputError("--out and --text-out: give two different files");
  const planner::PaperOptions o = paper_options(c);
  const model::Platform platform = model::load_platform_or_default(c.platform);
  const planner::PaperReport rep = planner::paper_report(platform, o);
  nlohmann::json j = planner::to_json(rep);
  stamp_json(j, "xstage.paper/1", c.platform, platform);
  std::string text = planner::to_text(rep);
  if (platform.name != "paper-8gpu-148sm")
    text = "note: platform '" + bounded_text(platform.name) +
           "' is not the paper's (platforms/paper_8gpu_148sm.json); the published values are the paper's\n" + text;
  write_outputs(c, j, text, inputs, platform);
}

void add_paper(CLI::App& root) {
  auto o = std::make_shared<PaperCliOptions>();
  CLI::App* cmd = root.add_subcommand(
      "paper", "The X-Stage paper as a test set: its tables predicted from its published inputs (give --platform "
               "platforms/paper_8gpu_148sm.json), published vs predicted per row; with --own, xstage's own two-GPU "
               "results predicted from the platform file");
  add_platform_option(cmd, o->platform)->required();
  cmd->add_option("--own", o->own,
                  "Predict xstage's own results in this folder instead (moe/moe_matrix.json, moe/moe_matrix_fp8.json, "
                  "ulysses/ulysses.json, e.g. results/h200-x2): interleaved/wave ratios and hiding ratios, measured vs "
                  "predicted per configuration")
      ->check(CLI::ExistingDirectory);
  o->paper_only.push_back(cmd->add_option("--only", o->only,
                  "parts to build (default all): knee (§3/§4.3 audit), table2 (spans and stalls), ecc (eq. 17, §2.3), "
                  "moe84 (the 84-configuration distribution, 42 simulated layers), table3 (FA-A2A speedups)")
      ->delimiter(','));
  o->paper_only.push_back(cmd->add_option("--tokens", o->tokens, "moe84: tokens per rank of the distribution (default 1744,3488,6976)")
      ->delimiter(',')->check(in_range(1, 65536)));
  o->paper_only.push_back(cmd->add_option("--a2a-rate-gbps", o->a2a_rate_gbps,
                  "table3: serial All-to-All rate (GB/s; default 183.7, the H200 pair's NCCL line)")
      ->check(in_range(0.001, 1e5)));
  o->paper_only.push_back(cmd->add_option("--a2a-fixed-us", o->a2a_fixed_us, "table3: serial All-to-All fixed time (us; default 26.6)")
      ->check(in_range(0, 1e6)));
  o->paper_only.push_back(cmd->add_option("--latency-us", o->latency_us, "ecc: T_lat of eq. 17 (us; default 0, not published)")
      ->check(in_range(0, 1e6)));
  o->paper_only.push_back(cmd->add_option("--heads-per-gpu", o->heads_per_gpu, "ecc, table3: attention heads per GPU (default 4)")
      ->check(in_range(1, 1024)));
  add_out_option(cmd, o->out, "Also write the JSON report to this file");
  cmd->add_option("--text-out", o->text_out, "Also write the text report to this file")->check(kOutputPath);
  add_force_option(cmd, o->force, "Replace --out / --text-out if they exist");
  add_json_option(cmd, o->json);
  cmd->callback([o] { run_paper(*o); });
}

}  // namespace
}  // namespace xstage::cli

XSTAGE_SUBCOMMAND(cmd_paper, "paper", 75, add_paper);
