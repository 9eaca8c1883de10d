// `moe bench --trace`: summaries and timelines of the fused kernel's per-tile stamps.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "moe_bench_internal.hpp"
#include "moe_layer_harness.hpp"
#include "xstage/model/stats.hpp"

namespace xstage::testing::moe_bench {

// Per-tile stamps of one traced run (all ranks): Linear-2 remote-store span T_RS (issue of the Combine
// stores, eq. 15's quantity), the MMA role's wait at tile entry for its first operands (per stage), and
// the sum of those waits per CTA.
RankTraces read_traces(const MoeFused& fused, const MoeDims& d) {
  RankTraces out;
  for (int r = 0; r < d.ranks; ++r) out.push_back(MoeFusedHarness::last_trace(fused, r));
  return out;
}

nlohmann::json trace_summary(const RankTraces& traces) {
  std::vector<double> t_rs, wait1, wait2, mainloop2, per_cta_wait;
  for (const auto& tiles : traces) {
    double cta_wait = 0;
    for (size_t i = 0; i < tiles.size(); ++i) {
      const auto& t = tiles[i];
      if (i > 0 && t.cta != tiles[i - 1].cta) {  // next CTA
        per_cta_wait.push_back(cta_wait);
        cta_wait = 0;
      }
      const double w = double(t.t_first_stage - t.t_entry) * 1e-3;
      cta_wait += w;
      if (t.stage == 1) {
        wait1.push_back(w);
      } else {
        wait2.push_back(w);
        t_rs.push_back(double(t.t_store_end - t.t_store_begin) * 1e-3);
        mainloop2.push_back(double(t.t_store_begin - t.t_first_stage) * 1e-3);
      }
    }
    if (!tiles.empty()) per_cta_wait.push_back(cta_wait);
  }
  auto stats = [](const std::vector<double>& v) {
    return nlohmann::json{{"count", v.size()}, {"median_us", stats::median_or_nan(v)}, {"p90_us", stats::percentile(v, 0.9)},
                          {"max_us", stats::max(v)}};
  };
  return {{"linear2_remote_store_span", stats(t_rs)},
          {"linear2_mainloop_and_staging", stats(mainloop2)},
          {"linear1_mma_wait_at_entry", stats(wait1)},
          {"linear2_mma_wait_at_entry", stats(wait2)},
          {"mma_wait_sum_per_cta", stats(per_cta_wait)}};
}

// Per-CTA activity of one traced run, all CTAs of all ranks: the share of the CTA's span (first tile
// entry to last tile end) spent waiting for operands at tile entry, in mainloops (Tensor-Core work and
// staging) and issuing Combine stores. A tile ends where the next tile of the CTA enters.
nlohmann::json activity_summary(const RankTraces& traces) {
  std::vector<double> wait_share, work_share, store_share;
  for (const auto& tiles : traces) {
    for (size_t i = 0; i < tiles.size();) {
      size_t k = i;
      double wait = 0, store = 0;
      while (k < tiles.size() && tiles[k].cta == tiles[i].cta) {
        wait += double(tiles[k].t_first_stage - tiles[k].t_entry);
        if (tiles[k].stage == 2) store += double(tiles[k].t_store_end - tiles[k].t_store_begin);
        ++k;
      }
      const auto& last = tiles[k - 1];
      const double end = double(last.stage == 2 ? last.t_store_end : last.t_first_stage);
      const double span = end - double(tiles[i].t_entry);
      if (span > 0) {
        wait_share.push_back(wait / span);
        store_share.push_back(store / span);
        work_share.push_back(1.0 - (wait + store) / span);
      }
      i = k;
    }
  }
  auto stats = [](const std::vector<double>& v) {
    return nlohmann::json{{"median", stats::median_or_nan(v)}, {"p10", stats::percentile(v, 0.1)}, {"p90", stats::percentile(v, 0.9)}};
  };
  return {{"ctas", wait_share.size()}, {"wait_share", stats(wait_share)}, {"work_share", stats(work_share)},
          {"store_share", stats(store_share)}};
}

// The tiles of the first `ctas` CTAs of every rank, stamps in us from the rank's first tile entry.
nlohmann::json timeline_json(const RankTraces& traces, int ctas) {
  nlohmann::json ranks = nlohmann::json::array();
  for (int r = 0; r < int(traces.size()); ++r) {
    const auto& tiles = traces[r];
    std::uint64_t t0 = ~0ull;
    for (const auto& t : tiles) t0 = std::min(t0, t.t_entry);
    std::map<int, nlohmann::json> by_cta;
    auto us = [&](std::uint64_t t) { return t == 0 ? 0.0 : std::round(double(t - t0)) * 1e-3; };
    for (const auto& t : tiles) {
      if (int(t.cta) >= ctas) continue;
      by_cta[int(t.cta)].push_back({t.stage, t.row, t.n, us(t.t_entry), us(t.t_first_stage), us(t.t_store_begin),
                                    us(t.t_store_end)});
    }
    nlohmann::json c = nlohmann::json::object();
    for (auto& [cta, recs] : by_cta) c[std::to_string(cta)] = recs;
    ranks.push_back({{"rank", r}, {"ctas", c}});
  }
  return {{"ranks", ranks}};
}

}  // namespace xstage::testing::moe_bench
