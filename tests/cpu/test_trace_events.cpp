// Chrome trace-event output: the simulated timeline (sim::chrome_trace, simulate --trace) and the
// measured per-tile dump of moe bench (sim::chrome_trace_from_moe_timeline, trace convert).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include "cli_runner.hpp"
#include "xstage/model/error.hpp"
#include "xstage/model/platform.hpp"
#include "xstage/sim/moe_order_simulation.hpp"
#include "xstage/sim/simulator.hpp"
#include "xstage/sim/trace_events.hpp"

namespace {

using namespace xstage;
using nlohmann::json;
namespace fs = std::filesystem;

// Two producers into a path of R = 100 GB/s and Q = 64 KiB, each issuing 64 KiB bursts at 0.2 us
// (about 330 GB/s each): their first bursts overlap and stall; producer 1 also waits for producer 0.
sim::SimResult two_producers_with_a_stall(bool completion_coupled = false) {
  sim::SimConfig cfg;
  cfg.drain_rate_bytes_per_s = 100e9;
  cfg.capacity_bytes = 65536;
  cfg.completion_coupled = completion_coupled;
  cfg.completion_latency_s = 0.3e-6;
  cfg.time_limit_s = 1;
  cfg.record_timeline = true;
  using S = sim::Step;
  const std::vector<sim::ProducerSchedule> schedules = {
      {S::compute(0.1e-6), S::burst(65536, 0.2e-6), S::signal(0), S::compute(5e-6), S::burst(16384, 0.2e-6)},
      {S::burst(65536, 0.2e-6), S::wait(0, 1), S::compute(0.5e-6), S::burst(16384, 0.2e-6)}};
  return sim::simulate(cfg, schedules);
}

std::vector<json> slices(const json& trace, const std::string& name = "") {
  std::vector<json> out;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "X" && (name.empty() || e["name"] == name)) out.push_back(e);
  return out;
}

std::vector<json> counters(const json& trace) {
  std::vector<json> out;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "C") out.push_back(e);
  return out;
}

std::string name_of(sim::TraceSlice s, std::string_view tile_kind = "") { return sim::trace_slice_name(s, tile_kind); }
const std::string kMainloop = name_of(sim::TraceSlice::kMainloop), kStore = name_of(sim::TraceSlice::kEpilogueStore),
                  kStall = name_of(sim::TraceSlice::kStall), kOperandWait = name_of(sim::TraceSlice::kOperandWait);

std::string problems_text(const json& trace) {
  std::string s;
  for (const auto& p : sim::check_chrome_trace(trace)) s += p + "\n";
  return s;
}

TEST(TraceEvents, SimulatedTimelineMatchesTheResult) {
  const sim::SimResult r = two_producers_with_a_stall();
  ASSERT_EQ(r.bursts.size(), 4u);
  const json trace = sim::chrome_trace(r, {}, {{"what", "test"}});
  EXPECT_EQ(problems_text(trace), "");
  EXPECT_EQ(trace["displayTimeUnit"], "ns");
  EXPECT_EQ(trace["otherData"]["what"], "test");

  // Every (pid, tid) of a slice has its process and thread named; default tracks: pid 0, tid = producer.
  std::set<std::pair<int, int>> named_threads;
  std::set<int> named_processes;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] != "M") continue;
    if (e["name"] == "thread_name") {
      named_threads.insert({e["pid"].get<int>(), e["tid"].get<int>()});
      EXPECT_EQ(e["args"]["name"], "producer " + std::to_string(e["tid"].get<int>()));
    }
    if (e["name"] == "process_name") {
      named_processes.insert(e["pid"].get<int>());
      EXPECT_EQ(e["args"]["name"], "simulated");
    }
  }
  for (const auto& e : slices(trace)) {
    EXPECT_TRUE(named_threads.count({e["pid"].get<int>(), e["tid"].get<int>()})) << e.dump();
    EXPECT_TRUE(named_processes.count(e["pid"].get<int>())) << e.dump();
    EXPECT_EQ(e["pid"], 0);
    EXPECT_EQ(e["tid"], e["args"]["producer"]);
  }

  // One epilogue store per burst, in the same order (issue end), with the burst's times in µs.
  const auto issues = slices(trace, kStore);
  ASSERT_EQ(issues.size(), r.bursts.size());
  for (std::size_t i = 0; i < issues.size(); ++i) {
    const sim::BurstRecord& b = r.bursts[i];
    EXPECT_EQ(issues[i]["tid"], b.producer);
    EXPECT_NEAR(issues[i]["ts"].get<double>(), b.start_s * 1e6, 1e-9);
    EXPECT_NEAR(issues[i]["dur"].get<double>(), b.issue_time_s() * 1e6, 1e-9);
    EXPECT_NEAR(issues[i]["args"]["floor_us"].get<double>(), b.issue_floor_s * 1e6, 1e-9);
    EXPECT_NEAR(issues[i]["args"]["stall_us"].get<double>(), b.stall_s() * 1e6, 1e-9);
  }

  // Stall slices: exactly the bursts with stall > 0, from start + floor to the issue end.
  std::vector<sim::BurstRecord> stalled;
  for (const auto& b : r.bursts)
    if (b.stall_s() > 0) stalled.push_back(b);
  ASSERT_GE(stalled.size(), 1u) << "the schedule must stall";
  ASSERT_LT(stalled.size(), r.bursts.size()) << "and some bursts must not";
  const auto stalls = slices(trace, kStall);
  ASSERT_EQ(stalls.size(), stalled.size());
  for (std::size_t i = 0; i < stalls.size(); ++i) {
    EXPECT_EQ(stalls[i]["tid"], stalled[i].producer);
    EXPECT_NEAR(stalls[i]["ts"].get<double>(), (stalled[i].start_s + stalled[i].issue_floor_s) * 1e6, 1e-9);
    EXPECT_NEAR(stalls[i]["dur"].get<double>(), stalled[i].stall_s() * 1e6, 1e-9);
    EXPECT_GT(stalls[i]["dur"].get<double>(), 0);
  }

  // Compute and wait slices (unlabelled steps: mainloops and operand waits): one per span of their kind, times in µs.
  std::map<sim::TimelineSpan::Kind, std::string> names = {{sim::TimelineSpan::Kind::kCompute, kMainloop},
                                                          {sim::TimelineSpan::Kind::kWait, kOperandWait}};
  for (const auto& [kind, name] : names) {
    std::vector<sim::TimelineSpan> spans;
    for (const auto& s : r.timeline)
      if (s.kind == kind) spans.push_back(s);
    const auto es = slices(trace, name);
    ASSERT_EQ(es.size(), spans.size()) << name;
    for (std::size_t i = 0; i < es.size(); ++i) {
      EXPECT_EQ(es[i]["tid"], spans[i].producer);
      EXPECT_EQ(es[i]["args"]["step"], spans[i].step);
      EXPECT_NEAR(es[i]["ts"].get<double>(), spans[i].start_s * 1e6, 1e-9);
      EXPECT_NEAR(es[i]["dur"].get<double>(), (spans[i].end_s - spans[i].start_s) * 1e6, 1e-9);
    }
  }
  EXPECT_EQ(slices(trace, kMainloop).size(), 3u);
  ASSERT_EQ(slices(trace, kOperandWait).size(), 1u);
  EXPECT_EQ(slices(trace, kOperandWait)[0]["args"]["counter"], 0);
  EXPECT_EQ(slices(trace).size(), r.timeline.size() + stalls.size());

  // The path's outstanding bytes: one counter sample per occupancy sample, on the producers' process, from 0 at
  // t = 0, never above Q, reaching Q (the bursts stall) and back to 0 (drained) at the end.
  const auto cs = counters(trace);
  ASSERT_EQ(cs.size(), r.occupancy.size());
  ASSERT_GE(cs.size(), 3u);
  EXPECT_LE(r.occupancy.size(), r.timeline.size() * 2 + 1) << "spans plus fill and empty events";
  double last_ts = -1, peak = 0;
  for (std::size_t i = 0; i < cs.size(); ++i) {
    EXPECT_EQ(cs[i]["name"], sim::kTracePathCounter);
    EXPECT_EQ(cs[i]["pid"], 0);
    const double v = cs[i]["args"][sim::kTraceOutstandingBytes].get<double>();
    EXPECT_NEAR(cs[i]["ts"].get<double>(), r.occupancy[i].t_s * 1e6, 1e-9);
    EXPECT_DOUBLE_EQ(v, r.occupancy[i].outstanding_bytes);
    EXPECT_GT(cs[i]["ts"].get<double>(), last_ts) << "one sample per instant, in time order";
    EXPECT_GE(v, 0);
    EXPECT_LE(v, 65536 * (1 + 1e-9));
    last_ts = cs[i]["ts"].get<double>();
    peak = std::max(peak, v);
  }
  EXPECT_EQ(cs.front()["ts"], 0.0);
  EXPECT_EQ(cs.front()["args"][sim::kTraceOutstandingBytes], 0.0);
  EXPECT_NEAR(peak, r.peak_outstanding_bytes, 1e-6 * 65536) << "the peak is sampled (the path fills)";
  EXPECT_NEAR(cs.back()["args"][sim::kTraceOutstandingBytes].get<double>(), 0.0, 1e-6 * 65536) << "drained at the end";
}

// Without record_timeline nothing is recorded, occupancy included; the simulation's results do not depend on it.
TEST(TraceEvents, RecordingChangesNoResult) {
  const sim::SimResult with = two_producers_with_a_stall();
  sim::SimConfig cfg;
  cfg.drain_rate_bytes_per_s = 100e9;
  cfg.capacity_bytes = 65536;
  cfg.completion_latency_s = 0.3e-6;
  cfg.time_limit_s = 1;
  using S = sim::Step;
  const sim::SimResult without = sim::simulate(
      cfg, {{S::compute(0.1e-6), S::burst(65536, 0.2e-6), S::signal(0), S::compute(5e-6), S::burst(16384, 0.2e-6)},
            {S::burst(65536, 0.2e-6), S::wait(0, 1), S::compute(0.5e-6), S::burst(16384, 0.2e-6)}});
  EXPECT_TRUE(without.timeline.empty());
  EXPECT_TRUE(without.occupancy.empty());
  EXPECT_EQ(without.makespan_s, with.makespan_s);
  EXPECT_EQ(without.peak_outstanding_bytes, with.peak_outstanding_bytes);
  EXPECT_EQ(without.total_stall_s, with.total_stall_s);
  ASSERT_EQ(without.bursts.size(), with.bursts.size());
  for (std::size_t i = 0; i < with.bursts.size(); ++i)
    EXPECT_EQ(without.bursts[i].issue_end_s, with.bursts[i].issue_end_s);
}

TEST(TraceEvents, CompletionWaitsAndTracks) {
  const sim::SimResult r = two_producers_with_a_stall(true);
  std::size_t completions = 0;
  for (const auto& s : r.timeline) completions += s.kind == sim::TimelineSpan::Kind::kCompletion;
  ASSERT_GT(completions, 0u);
  const std::vector<sim::TraceTrack> tracks = {{3, "rank 3", 7, "CTA 7"}, {3, "rank 3", 9, "CTA 9"}};
  const json trace = sim::chrome_trace(r, tracks);
  EXPECT_EQ(problems_text(trace), "");
  EXPECT_FALSE(trace.contains("otherData"));
  EXPECT_EQ(slices(trace, name_of(sim::TraceSlice::kCompletionWait)).size(), completions);
  for (const auto& e : slices(trace)) {
    EXPECT_EQ(e["pid"], 3);
    EXPECT_EQ(e["tid"], e["args"]["producer"] == 0 ? 7 : 9);
  }
  for (const auto& e : counters(trace)) EXPECT_EQ(e["pid"], 3) << "the counter on the producers' process";
  EXPECT_THROW(sim::chrome_trace(r, {tracks[0]}), InputError);
}

TEST(TraceEvents, ValidatorNamesEachProblem) {
  const json named = json::array({
      {{"ph", "M"}, {"name", "process_name"}, {"pid", 0}, {"tid", 0}, {"args", {{"name", "p"}}}},
      {{"ph", "M"}, {"name", "thread_name"}, {"pid", 0}, {"tid", 1}, {"args", {{"name", "t"}}}}});
  const auto with = [&](const json& e) {
    json events = named;
    events.push_back(e);
    return sim::check_chrome_trace({{"traceEvents", events}});
  };
  const json good = {{"ph", "X"}, {"name", "a"}, {"pid", 0}, {"tid", 1}, {"ts", 1.0}, {"dur", 2.0}};
  EXPECT_TRUE(with(good).empty());
  const auto has = [](const std::vector<std::string>& ps, const std::string& what) {
    for (const auto& p : ps)
      if (p.find(what) != std::string::npos) return true;
    return false;
  };
  json e = good;
  e.erase("ph");
  EXPECT_TRUE(has(with(e), "no ph"));
  e = good, e["ph"] = "Q";
  EXPECT_TRUE(has(with(e), "unknown ph"));
  e = good, e.erase("ts");
  EXPECT_TRUE(has(with(e), "ts missing"));
  e = good, e.erase("dur");
  EXPECT_TRUE(has(with(e), "dur missing"));
  e = good, e["dur"] = -1.0;
  EXPECT_TRUE(has(with(e), "negative dur"));
  e = good, e.erase("name");
  EXPECT_TRUE(has(with(e), "no name"));
  e = good, e.erase("pid");
  EXPECT_TRUE(has(with(e), "pid missing"));
  e = good, e.erase("tid");
  EXPECT_TRUE(has(with(e), "tid missing"));
  e = good, e["tid"] = 2;
  EXPECT_TRUE(has(with(e), "tid 2 has no thread_name"));
  e = good, e["pid"] = 5;
  EXPECT_TRUE(has(with(e), "process pid 5 has no process_name"));
  // Counters: a name, ts, and args of finite numbers, on a named process (no thread needed).
  const json counter = {{"ph", "C"}, {"name", "c"}, {"pid", 0}, {"tid", 0}, {"ts", 1.0}, {"args", {{"bytes", 5.0}}}};
  EXPECT_TRUE(with(counter).empty());
  e = counter, e.erase("name");
  EXPECT_TRUE(has(with(e), "(C): no name"));
  e = counter, e.erase("ts");
  EXPECT_TRUE(has(with(e), "(C): ts missing"));
  e = counter, e.erase("args");
  EXPECT_TRUE(has(with(e), "(C): no args"));
  e = counter, e["args"] = json::object();
  EXPECT_TRUE(has(with(e), "(C): no args"));
  e = counter, e["args"]["bytes"] = "5";
  EXPECT_TRUE(has(with(e), "value bytes is not a finite number"));
  e = counter, e["pid"] = 6;
  EXPECT_TRUE(has(with(e), "process pid 6 has no process_name"));
  EXPECT_FALSE(sim::check_chrome_trace(json::array()).empty());
  EXPECT_FALSE(sim::check_chrome_trace({{"events", json::array()}}).empty());
}

// A MoE schedule's simulated timeline and the same timeline written as moe bench's per-tile dump and converted: both
// traces name their slices from one table, so the mainloops, operand waits and epilogue stores line up.
TEST(TraceEvents, SimulatedAndMeasuredMoeTracesShareSliceNames) {
  const model::Platform platform = model::default_platform();
  sim::MoeOrderParams p;
  p.rows_per_expert = {3, 2};
  p.n1 = 4;
  p.n2 = 2;
  p.n2_real = 2;
  p.instances = 2;
  p.lead_rows = 1;
  p.experts_per_wave = 1;
  sim::MoeTileCosts c{3e-6, 2e-6, 262144, platform.issue_floor_s(2, 262144).value};  // one burst per Linear-2 tile
  c.staging_s = 0.5e-6;
  sim::MoeOrderTimelines timelines;
  sim::predict_moe_orders(platform, p, c, &timelines);
  const sim::SimResult& r = timelines.interleaved;  // its Linear-2 tiles wait for their rows
  ASSERT_EQ(r.tile_kinds.size(), 3u);
  const json simulated = sim::chrome_trace(r);
  EXPECT_EQ(problems_text(simulated), "");

  // The dump: per producer (CTA) and tile [stage, row, n, entry, operands ready, stores begin, stores issued], the
  // stamps read off the simulated spans (entry: the operand wait's start; ready: the mainloop's; stores: the burst).
  std::map<int, std::map<int, json>> tiles;  // producer -> tile ordinal -> record
  for (const sim::TimelineSpan& s : r.timeline) {
    ASSERT_GE(s.tile, 0);
    json& rec = tiles[s.producer][s.tile];
    if (rec.is_null()) rec = json::array({s.tag, 0, s.tile, -1.0, -1.0, 0.0, 0.0});
    const double start = s.start_s * 1e6, end = s.end_s * 1e6;
    if (s.kind == sim::TimelineSpan::Kind::kWait || rec[3] < 0) rec[3] = start;
    if (s.kind == sim::TimelineSpan::Kind::kCompute && s.role != sim::StepRole::kStaging && rec[4] < 0) rec[4] = start;
    if (s.kind == sim::TimelineSpan::Kind::kIssue) rec[5] = start, rec[6] = end;
  }
  json ctas = json::object();
  for (const auto& [producer, recs] : tiles) {
    json list = json::array();
    for (const auto& [ordinal, rec] : recs) list.push_back(rec);
    ctas[std::to_string(producer)] = list;
  }
  const json dump = {{"schema", "xstage.moe_timeline"}, {"version", 1}, {"ranks", 1},
                     {"timelines", json::array({{{"schedule", "interleaved"},
                                                 {"ranks", json::array({{{"rank", 0}, {"ctas", ctas}}})}}})}};
  const json measured = sim::chrome_trace_from_moe_timeline(dump, "simulated.json");
  EXPECT_EQ(problems_text(measured), "");

  std::map<std::string, int> sim_names, measured_names;
  for (const auto& e : slices(simulated)) ++sim_names[e["name"].get<std::string>()];
  for (const auto& e : slices(measured)) ++measured_names[e["name"].get<std::string>()];
  const std::string l1 = name_of(sim::TraceSlice::kMainloop, sim::moe_stage_name(1)),
                    l2 = name_of(sim::TraceSlice::kMainloop, sim::moe_stage_name(2));
  EXPECT_EQ(l1, "mainloop L1");
  EXPECT_EQ(l2, "mainloop L2");
  for (const std::string& name : {l1, l2, kOperandWait, kStore}) {
    EXPECT_GT(measured_names[name], 0) << name;
    EXPECT_GT(sim_names[name], 0) << name;
  }
  for (const auto& [name, n] : measured_names) EXPECT_TRUE(sim_names.count(name)) << "measured only: " << name;
  for (const auto& [name, n] : sim_names)
    EXPECT_TRUE(measured_names.count(name) || name == kStall || name == name_of(sim::TraceSlice::kStaging))
        << "simulated only: " << name;
  // One per Linear-2 tile in both (a measured Linear-1 mainloop needs the next tile's entry, so it is not counted).
  for (const std::string& name : {l2, kOperandWait, kStore}) EXPECT_EQ(measured_names[name], sim_names[name]) << name;
  EXPECT_EQ(sim_names[kStore], static_cast<int>(r.bursts.size()));
  EXPECT_EQ(sim_names[name_of(sim::TraceSlice::kStaging)], static_cast<int>(r.bursts.size()));
}

// --- CLI -----------------------------------------------------------------------------------------

fs::path temp_dir(const std::string& name) {
  const fs::path d = fs::path(testing::TempDir()) / ("xstage_trace_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

json read_json(const fs::path& p) {
  std::ifstream f(p);
  return json::parse(f);
}

TEST(TraceCli, SimulateWritesATraceAndRefusesToOverwrite) {
  const fs::path dir = temp_dir("simulate");
  const std::string out = (dir / "sim.json").string();
  const std::string args = "simulate --producers 8 --bytes-per-producer 262144 --gap-us 0.5 --bursts 4 --trace " + out;
  auto r = test::run_cli(args);
  ASSERT_EQ(r.code, 0) << r.err;
  const json trace = read_json(out);
  EXPECT_EQ(problems_text(trace), "");
  EXPECT_EQ(slices(trace, kStore).size(), 8u * 4u);
  EXPECT_EQ(slices(trace, kMainloop).size(), 8u * 4u) << "a gap after every burst";
  EXPECT_GE(counters(trace).size(), 2u);
  EXPECT_EQ(trace["otherData"]["schema"], "xstage.simulate/1");
  EXPECT_EQ(trace["otherData"]["producers"], 8);

  r = test::run_cli(args);
  EXPECT_EQ(r.code, 2);
  test::expect_one_line_error(r, "--trace", out, "already exists", "--force");
  r = test::run_cli(args + " --json --force");
  EXPECT_EQ(r.code, 0) << r.err;
  json printed;
  EXPECT_NO_THROW(printed = json::parse(r.out));
  EXPECT_TRUE(printed.contains("steady_t_iss_us"));

  // A schedule file: the same writer.
  const fs::path sched = dir / "sched.json";
  std::ofstream(sched) << R"({"schema": "xstage.schedule/1", "producers": [
      {"count": 4, "repeat": 3, "steps": [{"burst_bytes": 65536}, {"compute_us": 1.0}]}]})";
  const std::string out2 = (dir / "sched_trace.json").string();
  r = test::run_cli("simulate --schedule " + sched.string() + " --trace " + out2);
  ASSERT_EQ(r.code, 0) << r.err;
  const json t2 = read_json(out2);
  EXPECT_EQ(problems_text(t2), "");
  EXPECT_EQ(slices(t2, kStore).size(), 12u);
  EXPECT_EQ(slices(t2, kMainloop).size(), 12u);

  // The trace may not replace an input, and its folder must exist.
  r = test::run_cli("simulate --schedule " + sched.string() + " --trace " + sched.string() + " --force");
  test::expect_one_line_error(r, "--trace", "is also an input");
  r = test::run_cli(args.substr(0, args.find(" --trace")) + " --trace " + (dir / "no" / "t.json").string());
  test::expect_one_line_error(r, "--trace", "does not exist");
  // The work limit of a trace, checked before simulating.
  const std::string big = (dir / "big.json").string();
  r = test::run_cli("simulate --producers 132 --bytes-per-producer 32768 --gap-us 2 --bursts 2000 --trace " + big);
  EXPECT_EQ(r.code, 2);
  test::expect_one_line_error(r, "simulate --trace", "timeline spans", "exceeds the limit");
  EXPECT_FALSE(fs::exists(big));
  fs::remove_all(dir);
}

// A dump as moe bench --trace-dump writes it: rank 0 with CTAs 0 and 1, rank 1 with CTA 0.
json synthetic_dump() {
  const json rank0 = {{"rank", 0},
                      {"ctas",
                       {{"0", json::array({json::array({1, 0, 0, 0.0, 1.5, 0, 0}), json::array({1, 1, 0, 4.0, 4.0, 0, 0}),
                                           json::array({2, 0, 0, 7.0, 7.5, 10.0, 12.25})})},
                        {"1", json::array({json::array({2, 3, 1, 0.5, 2.0, 6.0, 6.0})})}}}};
  const json rank1 = {{"rank", 1},
                      {"ctas", {{"0", json::array({json::array({1, 0, 0, 0.0, 0.0, 0, 0}),
                                                   json::array({2, 0, 0, 3.0, 3.25, 8.0, 9.0})})}}}};
  return {{"schema", "xstage.moe_timeline"},
          {"version", 1},
          {"shape", "tiny"},
          {"tokens_per_rank", 64},
          {"routing", "balanced"},
          {"ranks", 2},
          {"fused_grid", 132},
          {"record", "[stage, row, n, entry, operands ready, stores begin, stores issued]"},
          {"timelines", json::array({{{"ranks", json::array({rank0, rank1})},
                                      {"schedule", "wave"},
                                      {"combine_stores", "remote (token's rank)"}}})},
          {"provenance", {{"host", "test"}}}};
}

TEST(TraceCli, ConvertsAMoeBenchDump) {
  const json trace = sim::chrome_trace_from_moe_timeline(synthetic_dump(), "dump.json");
  EXPECT_EQ(problems_text(trace), "");
  // Rank 0 CTA 0: wait 0-1.5, L1 1.5-4, L1 4-7 (to the next entry), wait 7-7.5, L2 7.5-10, store 10-12.25.
  // Rank 0 CTA 1: wait 0.5-2, L2 2-6, no store (zero length). Rank 1 CTA 0: L1 0-3, wait, L2, store.
  EXPECT_EQ(slices(trace, kOperandWait).size(), 4u);
  EXPECT_EQ(slices(trace, "mainloop L1").size(), 3u);
  EXPECT_EQ(slices(trace, "mainloop L2").size(), 3u);
  for (const auto& e : slices(trace)) EXPECT_EQ(e["args"]["tile_kind"], e["args"]["stage"] == 1 ? "L1" : "L2");
  const auto stores = slices(trace, kStore);
  ASSERT_EQ(stores.size(), 2u);
  EXPECT_EQ(stores[0]["pid"], 0);
  EXPECT_EQ(stores[0]["tid"], 0);
  EXPECT_DOUBLE_EQ(stores[0]["ts"].get<double>(), 10.0);
  EXPECT_DOUBLE_EQ(stores[0]["dur"].get<double>(), 2.25);
  EXPECT_EQ(stores[1]["pid"], 1);
  EXPECT_DOUBLE_EQ(stores[1]["dur"].get<double>(), 1.0);
  std::map<std::pair<int, int>, std::string> threads;
  std::map<int, std::string> processes;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") threads[{e["pid"].get<int>(), e["tid"].get<int>()}] = e["args"]["name"];
    if (e["ph"] == "M" && e["name"] == "process_name") processes[e["pid"].get<int>()] = e["args"]["name"];
  }
  EXPECT_EQ(threads.size(), 3u);
  EXPECT_EQ((threads[{0, 1}]), "CTA 1");
  EXPECT_EQ(processes[1], "wave, remote (token's rank): rank 1");
  EXPECT_EQ(trace["otherData"]["shape"], "tiny");

  // The command: writes, refuses to overwrite without --force.
  const fs::path dir = temp_dir("convert");
  const std::string in = (dir / "dump.json").string(), out = (dir / "trace.json").string();
  std::ofstream(in) << synthetic_dump().dump();
  const std::string args = "trace convert --from moe-bench " + in + " --out " + out;
  auto r = test::run_cli(args);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("12 slices"), std::string::npos) << r.out;
  EXPECT_EQ(read_json(out), sim::chrome_trace_from_moe_timeline(synthetic_dump(), in))
      << "the command writes what the library returns";
  r = test::run_cli(args);
  test::expect_one_line_error(r, "--out", out, "already exists", "--force");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(test::run_cli(args + " --force").code, 0);
  r = test::run_cli("trace convert --from chrome " + in + " --out " + out + " --force");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--from"), std::string::npos) << r.err;
  fs::remove_all(dir);
}

// The run's fused grid, copied to the trace's metadata, is checked as the paper's loader checks it.
TEST(TraceCli, ConvertChecksTheFusedGrid) {
  for (const json& grid : {json(-1), json(1.5), json(-2147483649LL), json(0), json("132"), json(1 << 17)}) {
    json d = synthetic_dump();
    d["fused_grid"] = grid;
    try {
      sim::chrome_trace_from_moe_timeline(d, "dump.json");
      ADD_FAILURE() << "fused_grid " << grid.dump() << " accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("dump.json: fused_grid: "), std::string::npos) << e.what();
    }
  }
  json d = synthetic_dump();
  d.erase("fused_grid");
  EXPECT_NO_THROW(sim::chrome_trace_from_moe_timeline(d, "dump.json"));  // optional: older dumps lack it
}

TEST(TraceCli, ConvertRefusesBadInputNamingTheFileAndField) {
  const fs::path dir = temp_dir("convert_bad");
  const std::string in = (dir / "dump.json").string(), out = (dir / "trace.json").string();
  const auto convert = [&](const std::string& text) {
    std::ofstream(in, std::ios::trunc) << text;
    return test::run_cli("trace convert --from moe-bench " + in + " --out " + out);
  };
  const std::string full = synthetic_dump().dump();
  auto r = convert(full.substr(0, full.size() / 2));  // truncated
  EXPECT_EQ(r.code, 2);
  test::expect_one_line_error(r, in, "not valid JSON", "timelines");

  json d = synthetic_dump();
  d["ranks"] = "two";
  r = convert(d.dump());
  EXPECT_EQ(r.code, 2);
  test::expect_one_line_error(r, in, ": ranks: ", "\"two\"");

  d = synthetic_dump();
  d["timelines"][0]["ranks"][0]["ctas"]["0"][2][0] = "L2";
  r = convert(d.dump());
  EXPECT_EQ(r.code, 2);
  test::expect_one_line_error(r, in, "timelines[0].ranks[0].ctas.0[2][0] (stage)", "\"L2\"");

  d = synthetic_dump();
  d["timelines"][0]["ranks"][1]["ctas"]["0"][1][6] = 7.0;  // stores issued before stores begin
  r = convert(d.dump());
  EXPECT_EQ(r.code, 2);
  test::expect_one_line_error(r, in, "timelines[0].ranks[1].ctas.0[1][6] (stores issued)", "stores begin");

  d = synthetic_dump();
  d["timelines"][0]["ranks"][0]["ctas"]["0"][1] = json::array({1, 1, 0});
  r = convert(d.dump());
  test::expect_one_line_error(r, in, "timelines[0].ranks[0].ctas.0[1]", "7 numbers");

  d = synthetic_dump();
  d["schema"] = "xstage.moe_bench";
  r = convert(d.dump());
  test::expect_one_line_error(r, in, "schema", "xstage.moe_timeline");

  d = synthetic_dump();
  d["timelines"][0]["ranks"][0].erase("ctas");
  r = convert(d.dump());
  test::expect_one_line_error(r, in, "timelines[0].ranks[0].ctas", "missing");

  r = convert(std::string("\x1f\x8b\x08\x00", 4));
  test::expect_one_line_error(r, in, "gzip");
  r = test::run_cli("trace convert --from moe-bench " + (dir / "absent.json").string() + " --out " + out);
  test::expect_one_line_error(r, "absent.json", "no such file");
  EXPECT_FALSE(fs::exists(out));
  fs::remove_all(dir);
}

}  // namespace
