// The generic burst-gap kernel description (kind "burst_gap"): its parser and refusals, hand-computable
// schedules through the simulator (eq. 10's steady stall, eq. 15's slot wait), the MoE schedules unchanged by the
// shared tile builder, and `xstage simulate --kernel`.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include "cli_runner.hpp"
#include "xstage/model/burst_gap.hpp"
#include "xstage/model/error.hpp"
#include "xstage/model/kernel_description.hpp"
#include "xstage/model/platform.hpp"
#include "xstage/model/units.hpp"
#include "xstage/sim/burst_gap_kernel.hpp"
#include "xstage/sim/moe_order_simulation.hpp"
#include "xstage/sim/trace_events.hpp"

namespace fs = std::filesystem;
using namespace xstage;
using nlohmann::json;
using xstage::test::run_cli;

namespace {

std::string src(const std::string& rel) { return std::string(XSTAGE_SOURCE_DIR) + "/" + rel; }

json valid() {
  return json::parse(R"({"schema": "xstage.kernel/1", "kind": "burst_gap", "name": "t", "producers": 4,
    "issue": "epilogue", "repeat": 3,
    "tiles": [{"name": "out", "mainloop_us": 2.0, "bytes": 32768, "remote_share": 1.0, "count": 2}]})");
}

// R = 100 GB/s at every K, T_iss0 = 1 us at (4, 32 KiB), Q far above any burst, no drain ramp: eq. 10 exactly.
model::Platform flat_platform(double capacity_bytes = 1e9) {
  return model::platform_from_json(
      json{{"schema", "xstage.platform/1"},
           {"name", "flat"},
           {"drain_rate_gbps", 100},
           {"issue_floor", {{{"producers", 4}, {"bytes_per_producer", 32768}, {"t_iss0_us", 1.0}}}},
           {"capacity", {{{"producers", 4}, {"bytes", capacity_bytes}}}}},
      "flat.json");
}

std::string error_of(const json& j) {
  try {
    model::burst_gap_kernel_from_json(j, "k.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(BurstGapKernel, ExamplesParseAndRoundTrip) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(src("kernels/burst_gap"))) {
    const model::KernelSource s = model::kernel_source(e.path().string());
    ASSERT_EQ(model::kernel_kind(s.json, s.origin), "burst_gap") << e.path();
    const model::BurstGapKernel k = model::burst_gap_kernel_from_json(s.json, s.origin);
    EXPECT_FALSE(k.assumptions.empty()) << e.path() << ": an example states its assumptions";
    EXPECT_EQ(model::to_json(model::burst_gap_kernel_from_json(model::to_json(k), "again")), model::to_json(k));
    ++n;
  }
  EXPECT_GE(n, 2);
}

TEST(BurstGapKernel, BadFieldsAreNamed) {
  struct Case {
    const char* pointer;
    json value;
    const char* field;
  };
  const Case cases[] = {
      {"/tiles/0/remote_share", 1.5, "tiles[0].remote_share"},
      {"/tiles/0/mainloop_us", 0, "tiles[0].mainloop_us"},
      {"/tiles/0/bytes", -1, "tiles[0].bytes"},
      {"/tiles/0/count", 0, "tiles[0].count"},
      {"/tiles/0/colour", "red", "tiles[0].colour"},
      {"/tiles/0/k_steps", 4, "tiles[0].k_steps"},  // piggyback only
      {"/tiles", json::array(), "tiles"},
      {"/producers", 0, "producers"},
      {"/issue", "later", "issue"},
      {"/chunks", 8, "chunks"},            // piggyback only
      {"/cover_slots", 2, "cover_slots"},  // epilogue_issuer only
      {"/staging_us", -1, "staging_us"},
      {"/repeat", 2'000'000, "repeat"},
      {"/schema", "xstage.kernel/2", "schema"},
      {"/hidden", 4096, "hidden"},  // a MoE field
  };
  for (const auto& c : cases) {
    json j = valid();
    j[json::json_pointer(c.pointer)] = c.value;
    const std::string e = error_of(j);
    EXPECT_NE(e.find(std::string("k.json: ") + c.field + ":"), std::string::npos) << c.pointer << ": " << e;
  }
  json no_tiles = valid();
  no_tiles.erase("tiles");
  EXPECT_NE(error_of(no_tiles).find("k.json: tiles: missing"), std::string::npos);
  json no_bytes = valid();
  no_bytes["tiles"][0].erase("bytes");
  EXPECT_NE(error_of(no_bytes).find("tiles[0].bytes: missing"), std::string::npos);
  // Size of the work before anything is built: repeat x count tiles per producer.
  json big = valid();
  big["repeat"] = 1'000'000;
  big["tiles"][0]["count"] = 1'000'000;
  EXPECT_NE(error_of(big).find("repeat: "), std::string::npos) << error_of(big);
  json many = valid();
  many["producers"] = 1'000'000;
  many["repeat"] = 100;
  const model::BurstGapKernel k = model::burst_gap_kernel_from_json(many, "k.json");
  EXPECT_THROW(sim::check_burst_gap_work(k, k.producers, "k.json"), InputError);
  // One kind per parser, each naming the other.
  json moe = valid();
  moe["kind"] = "moe";
  EXPECT_NE(error_of(moe).find("kind"), std::string::npos);
  try {
    model::moe_kernel_from_json(valid(), "k.json");
    ADD_FAILURE() << "a burst-gap description parsed as a MoE layer";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("k.json: kind: \"burst_gap\""), std::string::npos) << e.what();
  }
}

// K producers, epilogue issue, one tile kind: its gap G is the next tile's mainloop. A long gap stalls nothing;
// a short one stalls by eq. 10's steady-state excess V/R − T_iss0 − G per tile.
TEST(BurstGapKernel, EpilogueStallIsEquationTen) {
  const model::Platform p = flat_platform();
  json j = valid();
  j["repeat"] = 40;
  j["tiles"][0]["count"] = 1;
  j["tiles"][0]["mainloop_us"] = 5.0;  // V/R = 4 x 32 KiB / 100 GB/s = 1.31 us < T_iss0 + G
  const sim::BurstGapOutcome keep = sim::simulate_burst_gap_kernel(p, model::burst_gap_kernel_from_json(j, "k"), 4);
  ASSERT_EQ(keep.kinds.size(), 1u);
  EXPECT_EQ(keep.kinds[0].tiles, 160);
  EXPECT_NEAR(keep.kinds[0].t_iss0_s, 1e-6, 1e-12);
  EXPECT_NEAR(keep.kinds[0].gap_s, 5e-6, 1e-12);
  EXPECT_NEAR(keep.kinds[0].max_stall_s, 0.0, 1e-12);
  EXPECT_NEAR(keep.steady_stall_per_period_s, 0.0, 1e-12);
  EXPECT_EQ(keep.kinds[0].as_built.action, model::DesignAction::kKeep);
  EXPECT_EQ(keep.kinds[0].aligned.action, model::DesignAction::kKeep);
  EXPECT_NEAR(keep.makespan_s, keep.free_makespan_s, 1e-12);
  EXPECT_NEAR(keep.free_makespan_s, 40 * (5e-6 + 1e-6), 1e-12);  // mainloop + burst at its floor, 40 times

  // The outstanding bytes grow by V − R (T_iss0 + G) per period until they reach Q; from then on the rate binds.
  j["tiles"][0]["mainloop_us"] = 0.1;
  const model::Platform small_q = flat_platform(65536);
  const sim::BurstGapOutcome tight =
      sim::simulate_burst_gap_kernel(small_q, model::burst_gap_kernel_from_json(j, "k"), 4);
  const double t0 = 1e-6, g = 0.1e-6, v = model::burst_volume_bytes(4, 32768), r = 100e9;
  const double expected = model::period_s(t0, v, r, g) - t0 - g;  // the rate bound's excess per burst
  ASSERT_GT(expected, 0.2e-6);
  EXPECT_NEAR(tight.kinds[0].as_built.steady_stall_s, expected, 0.02 * expected);
  EXPECT_NEAR(tight.steady_stall_per_period_s, expected, 0.02 * expected);
  EXPECT_EQ(tight.kinds[0].as_built.action, model::DesignAction::kReshape);
  EXPECT_STREQ(tight.kinds[0].as_built.binding_bound, "rate");
  EXPECT_FALSE(tight.kinds[0].aligned.rate_bound_ok);
  EXPECT_GT(tight.makespan_s, tight.free_makespan_s);
}

// Piggybacked: the same bytes leave in chunks over the next tile's k-steps; the steady stall per tile is still the
// rate bound's excess (piggybacking hides the issue floor, not a drain that outlasts the tile).
TEST(BurstGapKernel, PiggybackChunksFollowTheNextTile) {
  json j = valid();
  j["issue"] = "piggyback";
  j["chunks"] = 4;
  j["repeat"] = 40;
  j["tiles"][0]["count"] = 1;
  j["tiles"][0]["mainloop_us"] = 8.0;
  j["tiles"][0]["k_steps"] = 8;
  const model::BurstGapKernel k = model::burst_gap_kernel_from_json(j, "k");
  const model::Platform p = flat_platform();
  const sim::TileSchedules s = sim::burst_gap_schedules(p, k, 4);
  ASSERT_EQ(s.schedules.size(), 4u);
  int bursts = 0;
  for (const auto& st : s.schedules[0]) bursts += st.kind == sim::Step::Kind::kBurst;
  EXPECT_EQ(bursts, 4 * 40);
  for (const auto& t : s.tiles) EXPECT_EQ(t.bursts, 4);
  const sim::BurstGapOutcome keep = sim::simulate_burst_gap_kernel(p, k, 4);
  EXPECT_EQ(keep.kinds[0].burst_bytes, 32768.0 / 4);
  EXPECT_EQ(keep.kinds[0].as_built.action, model::DesignAction::kKeep);
}

// Epilogue issuer with two slots: the producer's wait at a tile's entry is eq. 15's [T_RS − T_cover]+, T_RS the
// issuer's staging + issue and T_cover the mainloop in between.
TEST(BurstGapKernel, SlotWaitIsTheSpanBeyondTheCoverWindow) {
  json j = valid();
  j["issue"] = "epilogue_issuer";
  j["cover_slots"] = 2;
  j["staging_us"] = 3.0;
  j["repeat"] = 30;
  j["producers"] = 4;
  j["tiles"][0]["count"] = 1;
  j["tiles"][0]["mainloop_us"] = 2.0;
  const model::BurstGapKernel k = model::burst_gap_kernel_from_json(j, "k");
  const sim::BurstGapOutcome o = sim::simulate_burst_gap_kernel(flat_platform(), k, 4);
  const auto& kind = o.kinds[0];
  const double span = model::remote_store_span_s(kind.t_iss0_s, 0.0, 3e-6);
  EXPECT_NEAR(kind.median_span_s, span, 1e-9);
  const double wait = model::per_tile_stall_s(span, 2e-6);
  ASSERT_GT(wait, 1e-6);
  EXPECT_NEAR(kind.median_slot_wait_s, wait, 1e-9);
  EXPECT_NEAR(o.steady_stall_per_period_s, wait, 1e-9);
  EXPECT_EQ(kind.as_built.action, model::DesignAction::kReshape);
  // A mainloop that covers the span: no wait.
  j["tiles"][0]["mainloop_us"] = 6.0;
  const sim::BurstGapOutcome covered = sim::simulate_burst_gap_kernel(flat_platform(), model::burst_gap_kernel_from_json(j, "k"), 4);
  EXPECT_NEAR(covered.kinds[0].max_slot_wait_s, 0.0, 1e-12);
  EXPECT_EQ(covered.kinds[0].as_built.action, model::DesignAction::kKeep);
}

// The MoE schedules go through the same tile builder; these fingerprints were taken from the schedules the
// MoE functions built before the builder was shared (git 68240be): every step's kind, time, bytes, floor,
// counter and target, bit for bit, for one routing under both orders and the three issue modes.
std::uint64_t mix(std::uint64_t h, std::uint64_t x) {
  for (int i = 0; i < 8; ++i) {
    h ^= (x >> (8 * i)) & 0xff;
    h *= 1099511628211ULL;
  }
  return h;
}
std::uint64_t bits(double d) {
  std::uint64_t u;
  std::memcpy(&u, &d, 8);
  return u;
}
std::uint64_t fingerprint(const std::vector<sim::ProducerSchedule>& ss) {
  std::uint64_t h = 1469598103934665603ULL;
  for (const auto& s : ss) {
    h = mix(h, s.size());
    for (const auto& st : s) {
      h = mix(h, static_cast<std::uint64_t>(st.kind));
      h = mix(h, bits(st.duration_s));
      h = mix(h, bits(st.bytes));
      h = mix(h, bits(st.issue_floor_s));
      h = mix(h, static_cast<std::uint64_t>(st.counter));
      h = mix(h, static_cast<std::uint64_t>(st.target));
    }
  }
  return h;
}

TEST(MoeScheduleUnchanged, SchedulesBitForBitAsBeforeTheSharedBuilder) {
  sim::MoeOrderParams p;
  p.rows_per_expert = {3, 0, 5, 2};
  p.n1 = 6;
  p.n2 = 4;
  p.n2_real = 3;
  p.instances = 3;
  p.lead_rows = 2;
  p.experts_per_wave = 2;
  const std::uint64_t expected[2][4] = {
      {7769509427075430838ULL, 5253486194586209854ULL, 7035503827266462614ULL, 6892305391826683904ULL},
      {3607748449100697694ULL, 1717980822574457289ULL, 8382795712422239266ULL, 117219566848796359ULL}};
  int i = 0;
  for (auto order : {sim::MoeOrder::kExpertWave, sim::MoeOrder::kInterleaved}) {
    const auto orders = sim::moe_orders(order, p);
    sim::MoeTileCosts c{1.5e-6, 2.25e-6, 24576.0, 0.41e-6};
    c.staging_s = 0.3e-6;
    std::vector<sim::ProducerSchedule> epi, pig;
    for (const auto& o : orders) epi.push_back(sim::moe_producer_schedule(o, c, p.n1, p.n2_real));
    sim::MoeTileCosts cp = c;
    cp.combine_chunks = 8;
    cp.l1_k_steps = 5;
    cp.l2_k_steps = 11;
    cp.chunk_issue_floor_s = 0.07e-6;
    for (const auto& o : orders) pig.push_back(sim::moe_producer_schedule(o, cp, p.n1, p.n2_real));
    sim::MoeTileCosts ci = c;
    ci.cover_slots = 2;
    const auto roles = sim::moe_role_schedules(orders, ci, p.n1, p.n2_real, 10);
    std::uint64_t l2 = 1469598103934665603ULL;
    for (const auto& t : roles.l2_tiles) {
      l2 = mix(l2, static_cast<std::uint64_t>(t.producer));
      l2 = mix(l2, static_cast<std::uint64_t>(t.slot_wait_step));
      l2 = mix(l2, static_cast<std::uint64_t>(t.issuer));
      l2 = mix(l2, static_cast<std::uint64_t>(t.burst_step));
    }
    EXPECT_EQ(fingerprint(epi), expected[i][0]) << sim::to_string(order) << " epilogue";
    EXPECT_EQ(fingerprint(pig), expected[i][1]) << sim::to_string(order) << " piggyback";
    EXPECT_EQ(fingerprint(roles.schedules), expected[i][2]) << sim::to_string(order) << " epilogue issuer";
    EXPECT_EQ(l2, expected[i][3]) << sim::to_string(order) << " Linear-2 tiles of the roles";
    ++i;
  }
}

class SimulateKernelCli : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(testing::TempDir()) / ("xstage_bg_" + std::to_string(::getpid()) + "_" +
                                           testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(SimulateKernelCli, ReportsPerTileKindInThePlanWords) {
  const std::string k = src("kernels/burst_gap/gemm-reduce-scatter.json");
  const auto text = run_cli("simulate --kernel " + k);
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("reshape (rate)"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("reshape: steady stall "), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("with no backpressure"), std::string::npos) << text.out;
  const auto r = run_cli("simulate --kernel " + k + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["schema"], "xstage.simulate.kernel/1");
  for (const char* key : {"makespan_us", "no_backpressure_makespan_us", "steady_stall_per_period_us", "producers",
                          "drain_rate_gbps", "capacity_bytes", "tile_kinds", "kernel"})
    EXPECT_TRUE(j.contains(key)) << key;
  const json& kind = j["tile_kinds"][0];
  for (const char* key : {"name", "tiles", "burst_bytes", "t_iss0_us", "gap_us", "median_stall_us", "max_stall_us",
                          "aligned", "as_built", "act_on"})
    EXPECT_TRUE(kind.contains(key)) << key;
  EXPECT_EQ(kind["act_on"]["verdict"], "reshape");
  EXPECT_EQ(kind["aligned"]["action"], "reshape");
  EXPECT_GT(j["makespan_us"].get<double>(), j["no_backpressure_makespan_us"].get<double>());
  const auto keep = json::parse(run_cli("simulate --json --kernel " + src("kernels/burst_gap/ulysses-attention-a2a.json")).out);
  EXPECT_EQ(keep["tile_kinds"][0]["act_on"]["verdict"], "keep");
}

TEST_F(SimulateKernelCli, TraceHasOneThreadPerRole) {
  json j = valid();
  j["issue"] = "epilogue_issuer";
  j["staging_us"] = 0.25;
  const fs::path k = dir_ / "k.json", trace = dir_ / "t.json";
  std::ofstream(k) << j.dump();
  const auto r = run_cli("simulate --kernel " + k.string() + " --trace " + trace.string());
  ASSERT_EQ(r.code, 0) << r.err;
  std::ifstream in(trace);
  const json t = json::parse(in);
  EXPECT_TRUE(sim::check_chrome_trace(t).empty());
  int threads = 0;
  for (const auto& e : t["traceEvents"]) threads += e["ph"] == "M" && e["name"] == "thread_name";
  EXPECT_EQ(threads, 8);  // 4 producers and their 4 epilogue issuers
  // Slices named from the one table, the tile's name in the mainloop's: per tile (4 producers x 3 repeats x 2) a
  // mainloop on the producer, staging and an epilogue store on the issuer; the issuer's waits for the next tile are
  // accumulator waits, the producers' for a free slot are slot waits. The path's outstanding bytes as a counter.
  std::map<std::string, int> names;
  std::map<std::string, std::set<std::string>> threads_of;
  std::map<std::pair<int, int>, std::string> thread_names;
  int samples = 0;
  for (const auto& e : t["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") thread_names[{e["pid"], e["tid"]}] = e["args"]["name"];
    samples += e["ph"] == "C";
  }
  for (const auto& e : t["traceEvents"]) {
    if (e["ph"] != "X") continue;
    ++names[e["name"].get<std::string>()];
    const std::string& thread = thread_names[{e["pid"], e["tid"]}];
    threads_of[e["name"].get<std::string>()].insert(thread.substr(thread.rfind(' ') + 1));
    EXPECT_EQ(e["args"]["tile_kind"], "out") << e.dump();
  }
  const std::string mainloop = sim::trace_slice_name(sim::TraceSlice::kMainloop, "out");
  const std::string store = sim::trace_slice_name(sim::TraceSlice::kEpilogueStore),
                    staging = sim::trace_slice_name(sim::TraceSlice::kStaging),
                    accumulator_wait = sim::trace_slice_name(sim::TraceSlice::kAccumulatorWait);
  EXPECT_EQ(mainloop, "mainloop out");
  EXPECT_EQ(names[mainloop], 24);
  EXPECT_EQ(names[store], 24);
  EXPECT_EQ(names[staging], 24);
  EXPECT_GT(names[accumulator_wait], 0);
  EXPECT_EQ(threads_of[mainloop], std::set<std::string>{"producer"});
  for (const std::string& name : {store, staging, accumulator_wait})
    EXPECT_EQ(threads_of[name], std::set<std::string>{"issuer"}) << name;
  if (names.count(sim::trace_slice_name(sim::TraceSlice::kSlotWait)))
    EXPECT_EQ(threads_of[sim::trace_slice_name(sim::TraceSlice::kSlotWait)], std::set<std::string>{"producer"});
  for (const auto& [name, n] : names)
    EXPECT_TRUE(name == mainloop || name == store || name == staging || name == accumulator_wait ||
                name == sim::trace_slice_name(sim::TraceSlice::kSlotWait) ||
                name == sim::trace_slice_name(sim::TraceSlice::kStall))
        << name;
  EXPECT_GE(samples, 2);
}

TEST_F(SimulateKernelCli, FlagsWithoutEffectAreRefusedNamingBoth) {
  const fs::path k = dir_ / "k.json";
  std::ofstream(k) << valid().dump();
  for (const char* flag : {"--producers 4", "--bytes-per-producer 1024", "--gap-us 1", "--bursts 4", "--t-iss0-us 1",
                           "--capacity-bytes 1000", "--completion-coupled", "--per-burst", "--schedule " XSTAGE_SOURCE_DIR
                           "/tests/fuzz/corpus/kernel"}) {
    const auto r = run_cli("simulate --kernel " + k.string() + " " + flag);
    EXPECT_EQ(r.code, 2) << flag << ": " << r.err;
    const std::string name = std::string(flag).substr(0, std::string(flag).find(' '));
    EXPECT_NE(r.err.find(name), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("--kernel"), std::string::npos) << r.err;
  }
  const auto moe = run_cli("simulate --kernel " + src("kernels/moe/paper/paper-dit-moe.json"));
  EXPECT_EQ(moe.code, 2);
  EXPECT_NE(moe.err.find("plan moe --kernel"), std::string::npos) << moe.err;
  json bad = valid();
  bad["tiles"][0]["remote_share"] = 2;
  std::ofstream(k) << bad.dump();
  const auto b = run_cli("simulate --kernel " + k.string());
  EXPECT_EQ(b.code, 2);
  EXPECT_NE(b.err.find("tiles[0].remote_share"), std::string::npos) << b.err;
}

}  // namespace
