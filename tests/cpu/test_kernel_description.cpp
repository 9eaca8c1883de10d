// Kernel descriptions (xstage.kernel/1), the planner's MoE input from them, the epilogue-issuer roles of the
// simulator, and `plan moe` with descriptions and flags.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_runner.hpp"
#include "xstage/model/error.hpp"
#include "xstage/model/kernel_description.hpp"
#include "xstage/model/workloads.hpp"
#include "xstage/sim/moe_order_simulation.hpp"

namespace xstage {
namespace {

using nlohmann::json;
using test::CliRun;
using test::expect_one_line_error;
using test::run_cli;

std::string paper_platform() { return std::string(XSTAGE_SOURCE_DIR) + "/platforms/paper_8gpu_148sm.json"; }

json plan_json(const std::string& args) {
  const CliRun r = run_cli("plan moe " + args + " --json");
  EXPECT_EQ(r.code, 0) << args << "\n" << r.err;
  return r.code == 0 ? json::parse(r.out) : json();
}

TEST(KernelDescription, EveryBuiltInParsesAndRoundTrips) {
  ASSERT_EQ(model::builtin_kernel_names_in("builtin").size(), model::builtin_moe_shapes().size());
  ASSERT_EQ(model::builtin_kernel_names_in("paper").size(), 7u);
  for (const auto& name : model::builtin_kernel_names()) {
    const model::MoeKernel k = model::moe_kernel_from_json(*model::builtin_kernel_json(name), name);
    const model::MoeKernel back = model::moe_kernel_from_json(model::to_json(k), name);
    EXPECT_EQ(model::to_json(back), model::to_json(k)) << name;
  }
}

// Every built-in MoE shape, loaded as its description file (kernels/moe/builtin/NAME.json), gives the numbers the
// built-in shapes gave before they became files (xstage at ee4b2ad, the last revision with hard-coded shapes):
// on the paper's platform at a given 5 TFLOP/s per SM (the rate is not the description's), skewed routing, 4096
// tokens per rank: the mainloops, tile counts, tile bytes, eq. 12 gaps, and both simulated orders.
TEST(KernelDescription, BuiltInFilesGiveThePreDescriptionNumbers) {
  struct Pinned {
    const char* name;
    std::array<double, 10> v;  // T_L1, T_L2, n1, n2, V_t, G_int, G_wave, wave and interleaved makespans, speedup
    int lead_rows;
  };
  const Pinned pinned[] = {
      {"deepseek-v4-flash", {26.843545600000002, 13.421772800000001, 32.0, 32.0, 32768.0, 40.265318400000005, 13.421772800000001, 3704.789292800072, 3664.5239744000323, 1.0109878714619767}, 9},
      {"deepseek-v4-pro", {46.976204800000005, 20.1326592, 48.0, 56.0, 32768.0, 60.3979776, 20.1326592, 10858.594195200181, 10771.352672000106, 1.0080994027265358}, 7},
      {"deepseek-v3", {46.976204800000005, 13.421772800000001, 32.0, 56.0, 32768.0, 40.265318400000005, 13.421772800000001, 8160.817862400124, 8040.021907200129, 1.0150243315993728}, 8},
      {"qwen3-235b-a22b", {26.843545600000002, 10.0663296, 24.0, 32.0, 32768.0, 30.1989888, 10.0663296, 3251.804460800024, 3214.8945856000205, 1.0114808974967104}, 11},
      {"mimo-v2-flash", {26.843545600000002, 13.421772800000001, 32.0, 32.0, 32768.0, 40.265318400000005, 13.421772800000001, 4671.156934400124, 4590.626297600056, 1.0175424074144672}, 9},
      {"dit-moe-g2-16e2a", {9.2274688, 36.9098752, 88.0, 11.0, 32768.0, 110.7296256, 36.9098752, 1024.6290368000002, 978.4916927999998, 1.0471514927919074}, 10},
      {"glm-4.5", {33.554432, 10.0663296, 24.0, 40.0, 32768.0, 30.1989888, 10.0663296, 4208.105772800128, 4130.930579200059, 1.0186822780292313}, 10},
  };
  ASSERT_EQ(std::size(pinned), model::builtin_moe_shapes().size());
  for (const auto& p : pinned) {
    SCOPED_TRACE(p.name);
    const std::string file = std::string(XSTAGE_SOURCE_DIR) + "/kernels/moe/builtin/" + p.name + ".json";
    const json j = plan_json("--kernel " + file + " --platform " + paper_platform() +
                             " --sm-tflops 5 --simulate --routing skewed --tokens 4096");
    ASSERT_TRUE(j.contains("simulated"));
    const json& s = j["simulated"];
    const double got[10] = {j["input"]["t_l1_mma_us"].get<double>(), j["input"]["t_l2_mma_us"].get<double>(),
                            j["input"]["n1"].get<double>(), j["input"]["n2"].get<double>(),
                            j["input"]["tile_bytes"].get<double>(), j["interleaved_gap_us"].get<double>(),
                            j["wave_gap_us"].get<double>(), s["wave"]["makespan_us"].get<double>(),
                            s["interleaved"]["makespan_us"].get<double>(), s["predicted_speedup"].get<double>()};
    for (int i = 0; i < 10; ++i) EXPECT_NEAR(got[i], p.v[i], 1e-9 * std::max(1.0, std::abs(p.v[i]))) << "value " << i;
    EXPECT_EQ(s["lead_rows"], p.lead_rows);
  }
}

TEST(KernelDescription, BadFieldsAreNamed) {
  const json good = *model::builtin_kernel_json("glm-4.5");
  auto expect_bad = [&](const char* key, const json& value, const char* fragment) {
    json j = good;
    j[key] = value;
    try {
      model::moe_kernel_from_json(j, "k.json");
      ADD_FAILURE() << key << " accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("k.json: ") + key), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  expect_bad("hidden", 0, "must be an integer");
  expect_bad("top_k", 161, "must be an integer in 1..160");
  expect_bad("ranks", 3, "do not divide");
  expect_bad("precision", "fp4", "must be \"bf16\" or \"fp8\"");
  expect_bad("t_l1_us", -1, "must be > 0");
  expect_bad("cover_slots", 2, "applies to combine \"epilogue_issuer\" only");
  expect_bad("zipf_s", 1.1, "applies to routing \"skewed\" only");
  expect_bad("typo_field", 1, "unknown field");
  expect_bad("schema", "xstage.kernel/2", "unknown schema");
}

// Eq. 15 in the simulator: with two slots, a Linear-2 tile waits at entry for the epilogue of the tile two back,
// [T_RS − T_cover]+ with T_cover the mainloop in between.
TEST(MoeRoles, SlotWaitIsTheSpanBeyondTheCoverWindow) {
  std::vector<std::vector<sched::MoeTile>> orders(1);
  for (int i = 0; i < 4; ++i) orders[0].push_back({sched::MoeStage::kLinear2, 0, 0, i});
  sim::MoeTileCosts c{1e-6, 2e-6, 1e6, 1e-6};
  c.staging_s = 0.5e-6;
  c.cover_slots = 2;
  const sim::MoeRoleSchedules rs = sim::moe_role_schedules(orders, c, 0, 0, 0);
  ASSERT_EQ(rs.schedules.size(), 2u);
  ASSERT_EQ(rs.l2_tiles.size(), 4u);
  sim::SimConfig cfg{1e15, 1e12, false, 0.0, 1.0};  // a path that never backpressures: T_RS = staging + T_iss0
  cfg.record_timeline = true;
  const sim::SimResult r = sim::simulate(cfg, rs.schedules);
  // T_RS = 1.5 us, cover = T_L2 = 2 us: no slot wait (below). Make the issue floor 3 us: T_RS 3.5 us.
  c.issue_floor_s = 3e-6;
  const sim::MoeRoleSchedules rs2 = sim::moe_role_schedules(orders, c, 0, 0, 0);
  const sim::SimResult r2 = sim::simulate(cfg, rs2.schedules);
  double slot_wait = 0;
  for (const auto& sp : r2.timeline)
    if (sp.kind == sim::TimelineSpan::Kind::kWait && sp.producer == 0) slot_wait += sp.end_s - sp.start_s;
  // Tile 2 enters at 4 us and waits for epilogue 0 ([2, 5.5] us): 1.5 us; mainloop 2 runs [5.5, 7.5]; tile 3
  // waits for epilogue 1, queued behind epilogue 0 ([5.5, 9] us): 1.5 us. [T_RS − T_cover]+ = 3.5 − 2 each.
  EXPECT_NEAR(slot_wait, 2 * 1.5e-6, 1e-12);
  double no_roles_wait = 0;
  for (const auto& sp : r.timeline)
    if (sp.kind == sim::TimelineSpan::Kind::kWait && sp.producer == 0) no_roles_wait += sp.end_s - sp.start_s;
  EXPECT_NEAR(no_roles_wait, 0.0, 1e-12);
}

TEST(PlanMoeDescription, CustomMoeSimulatesUnderBothOrders) {
  const json j = plan_json("--hidden 3000 --h-inter 1000 --experts 12 --top-k 3 --ranks 2 --tokens 2048 --simulate");
  ASSERT_TRUE(j.contains("simulated"));
  EXPECT_GT(j["simulated"]["wave"]["makespan_us"].get<double>(), 0);
  EXPECT_GT(j["simulated"]["interleaved"]["makespan_us"].get<double>(), 0);
  EXPECT_EQ(j["kernel"]["experts"], 12);
  // auto: the order chosen from both simulations (interleaved unless predicted slower by more than the tie band),
  // for balanced and skewed routing.
  for (const std::string routing : {"", " --routing skewed"}) {
    const json a = plan_json("--hidden 3000 --h-inter 1000 --experts 12 --top-k 3 --tokens 2048 --simulate" + routing);
    const json& s = a["simulated"];
    const double speedup = s["predicted_speedup"].get<double>();
    EXPECT_NEAR(speedup, s["wave"]["makespan_us"].get<double>() / s["interleaved"]["makespan_us"].get<double>(), 1e-9);
    EXPECT_EQ(s["choice"], speedup >= 1.0 - sim::kMoeOrderTieBand ? "interleaved" : "wave") << routing;
  }
}

TEST(PlanMoeDescription, MeasuredMainloopsAreUsed) {
  const json j = plan_json("--platform " + paper_platform() + " --shape dit-moe-g2-16e2a --t-l1-us 9.77 --t-l2-us 5.30");
  EXPECT_DOUBLE_EQ(j["input"]["t_l1_mma_us"].get<double>(), 9.77);
  EXPECT_DOUBLE_EQ(j["input"]["t_l2_mma_us"].get<double>(), 5.30);
  EXPECT_EQ(j["input"]["t_l1_mma_source"], "measured");
  // One given: the other stays estimated.
  const json one = plan_json("--shape dit-moe-g2-16e2a --t-l2-us 5.30");
  EXPECT_DOUBLE_EQ(one["input"]["t_l2_mma_us"].get<double>(), 5.30);
  EXPECT_EQ(one["input"]["t_l1_mma_source"].get<std::string>().rfind("estimated", 0), 0u);
}

TEST(PlanMoeDescription, StagingReachesTheSimulation) {
  const std::string base = "--shape dit-moe-g2-16e2a --simulate --tokens 4096 --combine epilogue";
  const json a = plan_json(base), b = plan_json(base + " --staging-us 3");
  EXPECT_GT(b["simulated"]["wave"]["makespan_us"].get<double>(), a["simulated"]["wave"]["makespan_us"].get<double>());
}

TEST(PlanMoeDescription, IneffectiveFlagCombinationsNameBothFlags) {
  expect_one_line_error(run_cli("plan moe --shape glm-4.5 --tile-bytes 32768"), "--tile-bytes", "--shape");
  expect_one_line_error(run_cli("plan moe --shape glm-4.5 --tokens 4096"), "--tokens", "--simulate");
  expect_one_line_error(run_cli("plan moe --shape glm-4.5 --simulate --cover-slots 3"), "cover_slots", "combine");
  expect_one_line_error(run_cli("plan moe --shape glm-4.5 --kernel glm-4.5"), "--kernel", "--shape");
  expect_one_line_error(run_cli("plan moe --shape glm-4.5 --t-l1-us 5 --t-l2-us 5 --sm-tflops 5"), "sm_tflops",
                        "t_l1_us");
  expect_one_line_error(run_cli("plan moe --shape glm-4.5 --t-l1-us 5 --t-l2-us 5 --precision fp8"), "--precision",
                        "t_l1_us");
  expect_one_line_error(run_cli("plan moe --tile-bytes 1 --t-l1-us 1 --t-l2-us 1 --n1 2 --n2 2 --h-inter 128 --precision fp8"),
                        "--precision", "--tile-bytes");
  expect_one_line_error(run_cli("plan moe --shape glm-4.5 --simulate --trace"), "--trace");
  // --precision picks the platform's rate; --sm-tflops replaces it, so --precision would only relabel.
  expect_one_line_error(run_cli("plan moe --shape glm-4.5 --sm-tflops 3 --precision fp8"), "--precision", "--sm-tflops");
  // A routing file holds its tokens: --tokens would be reported but not simulated.
  const auto dir = std::filesystem::temp_directory_path() / ("xstage_kd_tokens_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  json routing = {{"schema", "xstage.routing/1"}, {"tokens", 4}, {"experts", 12}, {"top_k", 1},
                  {"expert_ids", {0, 5, 7, 11}}, {"weights", {1, 1, 1, 1}}};
  const std::string file = (dir / "routing.json").string();
  std::ofstream(file) << routing.dump();
  const std::string custom = "--hidden 3000 --h-inter 1000 --experts 12 --top-k 1 --simulate --routing " + file;
  expect_one_line_error(run_cli("plan moe " + custom + " --tokens 2048"), "--tokens", "--routing");
  const json j = plan_json(custom);
  EXPECT_EQ(j["simulated"]["tokens_per_rank"], 4);  // the file's, not the default 8192
  // The routing file is an input: --trace never replaces it, even with --force.
  expect_one_line_error(run_cli("plan moe " + custom + " --trace " + file + " --force"), "--trace", "is also an input");
  EXPECT_EQ(json::parse(std::ifstream(file)), routing);
  std::filesystem::remove_all(dir);
}

TEST(PlanMoeDescription, DescriptionFileAndItsErrors) {
  const auto dir = std::filesystem::temp_directory_path() / ("xstage_kd_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  json k = *model::builtin_kernel_json("qwen3-235b-a22b");
  k["name"] = "mine";
  k["experts"] = 64;
  k["tokens"] = 1024;
  std::ofstream(dir / "k.json") << k.dump(2);
  const json j = plan_json("--kernel " + (dir / "k.json").string() + " --simulate");
  EXPECT_EQ(j["kernel"]["name"], "mine");
  EXPECT_EQ(j["simulated"]["tokens_per_rank"], 1024);
  k["top_k"] = "eight";
  std::ofstream(dir / "bad.json") << k.dump(2);
  expect_one_line_error(run_cli("plan moe --kernel " + (dir / "bad.json").string()), "bad.json", "top_k");
  std::filesystem::remove_all(dir);
}

// plan moe's one row names the burst its verdict column models (the aligned one of eq. 10, as in `plan`) and says
// what its closed-form stall column is.
TEST(PlanMoeDescription, TextNamesTheAlignedBurstOfItsVerdictColumn) {
  const CliRun r = run_cli("plan moe --shape glm-4.5");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("aligned w -> i (eq. 10)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  aligned w -> i (eq. 10): the whole Linear-2 tile's Combine"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  stall w/i us: eq. 15's per-tile MMA stall"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("wave -> int"), std::string::npos) << r.out;
}

// plan moe --simulate --trace is bounded: a timeline too large for the trace document is refused after the
// simulation, before the document is built, and nothing is written.
// plan moe ends in what to act on, like each row of `plan`: the as-built checks of both orders for the kernel's
// ranks and Combine mode, the same verdict `plan` gives a built-in shape at its defaults.
TEST(PlanMoeDescription, OneKernelHasAnActOnVerdict) {
  const json one = plan_json("--shape qwen3-235b-a22b --precision fp8");
  json row;
  const CliRun all = run_cli("plan --json");
  ASSERT_EQ(all.code, 0) << all.err;
  const json plan = json::parse(all.out);
  for (const auto& m : plan.at("moe"))
    if (m["name"] == "qwen3-235b-a22b" && m["precision"] == "fp8") row = m;
  ASSERT_FALSE(row.is_null());
  EXPECT_EQ(one.at("act_on"), row.at("act_on"));
  EXPECT_EQ(one.at("wave_as_built").at("ranks"), 2);
  EXPECT_EQ(one.at("wave_as_built").at("combine"), "piggyback");
  // Eight ranks and an epilogue Combine: 7/8 of the tile in one burst per Linear-2 tile, a different check.
  const json eight = plan_json("--shape qwen3-235b-a22b --precision fp8 --ranks 8 --combine epilogue");
  EXPECT_DOUBLE_EQ(eight["wave_as_built"]["chunk_bytes"].get<double>(),
                   one["wave_as_built"]["chunk_bytes"].get<double>() * 16 * 7 / 8);  // (1/2)/8 of a tile -> 7/8
  // One rank: every Combine store is local, nothing to check.
  const json local = plan_json("--shape qwen3-235b-a22b --precision fp8 --ranks 1");
  EXPECT_EQ(local["act_on"]["verdict"], "keep");
  EXPECT_NE(local["act_on"]["text"].get<std::string>().find("local"), std::string::npos);
  const CliRun text = run_cli("plan moe --shape qwen3-235b-a22b --precision fp8");
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("act on: " + one["act_on"]["text"].get<std::string>()), std::string::npos) << text.out;
}

TEST(PlanMoeDescription, TraceOverTheSpanLimitIsRefusedAndWritesNothing) {
  const auto out = std::filesystem::temp_directory_path() / ("xstage_kd_big_" + std::to_string(::getpid()) + ".json");
  std::filesystem::remove(out);
  expect_one_line_error(run_cli("plan moe --platform " + paper_platform() +
                                " --kernel paper-qwen3.5 --simulate --tokens 16000 --trace " + out.string()),
                        "--trace", "timeline spans", "exceeds the limit of 1048576");
  EXPECT_FALSE(std::filesystem::exists(out));
}

// The paper's seven kernels with its platform and its Table 2 mainloops run through the simulator with the
// epilogue-issuer roles (the figures are predictions; the closing of the prediction work scores them).
TEST(PlanMoeDescription, PaperKernelsSimulateWithRoles) {
  for (const auto& name : model::builtin_kernel_names_in("paper")) {
    const json j = plan_json("--platform " + paper_platform() + " --kernel " + name + " --simulate");
    ASSERT_TRUE(j.contains("simulated")) << name;
    EXPECT_EQ(j["input"]["t_l1_mma_source"].get<std::string>().rfind("measured", 0), 0u) << name;
    for (const char* order : {"wave", "interleaved"}) {
      const json& o = j["simulated"][order];
      EXPECT_GT(o["l2_tiles"].get<int>(), 0) << name;
      EXPECT_GE(o["median_tile_span_us"].get<double>(), 0.76) << name;  // at least T_iss0
      EXPECT_GE(o["median_mma_stall_us"].get<double>(), 0.0) << name;
    }
  }
}

}  // namespace
}  // namespace xstage
