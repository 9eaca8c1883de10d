#include "xstage/sim/moe_schedules.hpp"

#include <string>

#include "xstage/model/error.hpp"

namespace xstage::sim {

ProducerSchedule moe_producer_schedule(const std::vector<sched::MoeTile>& order, const MoeTileCosts& c) {
  ProducerSchedule s;
  s.reserve(order.size() * 2);
  for (const auto& t : order) {
    if (t.stage == sched::MoeStage::kLinear1) {
      s.push_back(Step::compute(c.t_l1_mma_s));
    } else {
      s.push_back(Step::compute(c.t_l2_mma_s));
      s.push_back(Step::burst(c.tile_bytes, c.issue_floor_s));
    }
  }
  return s;
}

std::vector<std::vector<sched::MoeTile>> moe_orders(MoeOrder order, const MoeOrderParams& p) {
  auto bad = [](const std::string& what) { throw InputError("moe schedule: " + what); };
  if (p.rows_per_expert.empty()) bad("no experts");
  if (p.n1 <= 0 || p.n1 % 2 || p.n2 <= 0 || p.n2 % 2)
    bad("n1 and n2 must be positive and even, got " + std::to_string(p.n1) + " and " + std::to_string(p.n2));
  if (p.instances <= 0) bad("instances must be > 0, got " + std::to_string(p.instances));
  if (p.lead_rows <= 0) bad("lead rows must be > 0, got " + std::to_string(p.lead_rows));
  if (p.experts_per_wave <= 0) bad("experts per wave must be > 0, got " + std::to_string(p.experts_per_wave));
  std::vector<int> offsets = {0};
  for (int r : p.rows_per_expert) {
    if (r < 0) bad("rows per expert must be >= 0, got " + std::to_string(r));
    offsets.push_back(offsets.back() + r);
  }
  const sched::MoeRowLayout layout{offsets.data(), static_cast<int>(p.rows_per_expert.size()), p.n1 / 2, p.n2 / 2};
  std::vector<std::vector<sched::MoeTile>> out;
  for (int g = 0; g < p.instances; ++g)
    for (int r = 0; r < 2; ++r) {
      std::vector<sched::MoeTile> seq;
      sched::MoeTile t;
      if (order == MoeOrder::kInterleaved) {
        sched::InterleavedMoeScheduler s(layout, g, p.instances, r, p.lead_rows);
        while (s.next(t)) seq.push_back(t);
      } else {
        sched::ExpertWaveMoeScheduler s(layout, g, p.instances, r, p.experts_per_wave);
        while (s.next(t)) seq.push_back(t);
      }
      out.push_back(std::move(seq));
    }
  return out;
}

}  // namespace xstage::sim
