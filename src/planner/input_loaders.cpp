#include "xstage/planner/input_loaders.hpp"

#include <sstream>

#include "xstage/model/input_file.hpp"
#include "xstage/model/kernel_description.hpp"
#include "xstage/model/platform.hpp"
#include "xstage/model/records.hpp"
#include "xstage/moe/routing.hpp"
#include "xstage/sim/burst_gap_kernel.hpp"
#include "xstage/sim/fidelity.hpp"
#include "xstage/sim/schedule_file.hpp"

namespace xstage::planner {

namespace {

void parse_platform(std::string_view text, const std::string& origin) {
  (void)model::platform_from_json(parse_json_input(text, origin), origin);
}
void parse_schedule(std::string_view text, const std::string& origin) {
  (void)sim::schedules_from_json(parse_json_input(text, origin), model::default_platform(), origin);
}
void parse_routing(std::string_view text, const std::string& origin) {
  (void)moe::routing_from_json(parse_json_input(text, origin), origin);
}
void parse_kernel(std::string_view text, const std::string& origin) {
  (void)model::moe_kernel_from_json(parse_json_input(text, origin), origin);
}
// A burst-gap description: parsed, and its work checked at the embedded platform's producer count.
void parse_burst_gap_kernel(std::string_view text, const std::string& origin) {
  const model::BurstGapKernel k = model::burst_gap_kernel_from_json(parse_json_input(text, origin), origin, sim::kMaxScheduleSteps);
  sim::check_burst_gap_work(k, k.producers > 0 ? k.producers : 132, origin);
}
void parse_records(std::string_view text, const std::string& origin) {
  std::istringstream in{std::string(text)};
  (void)model::parse_records_csv(in, origin);
}
void parse_raw(std::string_view text, const std::string& origin) { (void)model::parse_zero_gap_loops(text, origin); }
void parse_traces(std::string_view text, const std::string& origin) { (void)sim::parse_tile_stall_rows(text, origin); }
void parse_ulysses(std::string_view text, const std::string& origin) {
  (void)sim::parse_ulysses_rows(model::default_platform(), text, origin);
}

}  // namespace

const std::vector<InputLoader>& input_loaders() {
  static const std::vector<InputLoader> loaders = {
      {"platform", "xstage.platform/1 JSON", "--platform", parse_platform},
      {"schedule", "xstage.schedule/1 JSON", "simulate --schedule", parse_schedule},
      {"routing", "xstage.routing/1 JSON", "plan moe --routing", parse_routing},
      {"kernel", "xstage.kernel/1 JSON", "plan moe --kernel", parse_kernel},
      {"records", "calibration records CSV", "fit/fidelity --records", parse_records},
      {"raw", "xstage.calibration_raw/1 JSON", "fit/fidelity --raw", parse_raw},
      {"traces", "xstage.moe_bench[_set] JSON with trace entries", "fidelity --traces", parse_traces},
      {"ulysses", "xstage.ulysses_sweep/1 JSON", "fidelity --ulysses", parse_ulysses},
      {"burst_gap_kernel", "xstage.kernel/1 JSON, kind \"burst_gap\"", "simulate --kernel", parse_burst_gap_kernel},
  };
  return loaders;
}

const InputLoader* find_input_loader(std::string_view name) {
  for (const auto& l : input_loaders())
    if (l.name == name) return &l;
  return nullptr;
}

}  // namespace xstage::planner
