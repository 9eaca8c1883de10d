// The planner's typed C ABI (xstage/planner/planner_c_api.h): the JSON it returns is the CLI's --json output for
// the same arguments; a bad request is status 2 with the CLI's message, the argument named by its request key;
// null pointers and text that is not JSON are refused, never thrown.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cctype>
#include <fstream>
#include <string>
#include <tuple>

#include "cli_runner.hpp"
#include "xstage/planner/planner_c_api.h"

namespace {

struct Answer {
  int code;
  std::string response, error;
};

using PlanEntry = int (*)(const char*, char**, char**);

// One call of a planner entry point: exactly one of response and error set, both freed.
Answer call(PlanEntry entry, const std::string& request) {
  char* response = nullptr;
  char* error = nullptr;
  const int code = entry(request.c_str(), &response, &error);
  Answer a{code, response ? response : "", error ? error : ""};
  EXPECT_TRUE(code == 0 ? (response != nullptr && error == nullptr) : (response == nullptr && error != nullptr));
  xstage_planner_free(response);
  xstage_planner_free(error);
  return a;
}

Answer model(const std::string& request) { return call(xstage_planner_model, request); }

const std::string kPaper = std::string(XSTAGE_SOURCE_DIR) + "/platforms/paper_8gpu_148sm.json";

}  // namespace

TEST(PlannerCApi, ModelEqualsTheCliJson) {
  const std::pair<std::string, std::string> cases[] = {
      {R"({"producers": 148, "bytes_per_producer": 32768, "gap_us": 2})",
       "--producers 148 --bytes-per-producer 32768 --gap-us 2"},
      {R"({"producers": 132, "bytes_per_producer": 4096, "gap_us": 0.5, "platform": ")" + kPaper + "\"}",
       "--producers 132 --bytes-per-producer 4096 --gap-us 0.5 --platform " + kPaper},
      {R"({"producers": 64, "bytes_per_producer": 65536, "gap_us": 1.25, "capacity_bytes": 2097152,
           "t_iss0_us": 0.75})",
       "--producers 64 --bytes-per-producer 65536 --gap-us 1.25 --capacity-bytes 2097152 --t-iss0-us 0.75"},
  };
  for (const auto& [request, flags] : cases) {
    const Answer a = model(request);
    ASSERT_EQ(a.code, 0) << a.error;
    const xstage::test::CliRun cli = xstage::test::run_cli("model " + flags + " --json");
    ASSERT_EQ(cli.code, 0) << cli.err;
    EXPECT_EQ(nlohmann::json::parse(a.response), nlohmann::json::parse(cli.out)) << request;
  }
}

TEST(PlannerCApi, ABadRequestIsTheCliMessageWithTheArgumentNamed) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"producers": 0, "bytes_per_producer": 32768, "gap_us": 2})",
       "--producers 0 --bytes-per-producer 32768 --gap-us 2"},
      {R"({"producers": 148, "bytes_per_producer": 32768, "gap_us": -1})",
       "--producers 148 --bytes-per-producer 32768 --gap-us -1"},
      {R"({"producers": 148, "bytes_per_producer": 1e30})", "--producers 148 --bytes-per-producer 1e+30"},
      {R"({"producers": 2000000, "bytes_per_producer": 1})", "--producers 2000000 --bytes-per-producer 1"},
      {R"({"producers": 148, "bytes_per_producer": 1, "platform": "/nonexistent/p.json"})",
       "--producers 148 --bytes-per-producer 1 --platform /nonexistent/p.json"},
      {R"({"producers": 148, "bytes_per_producer": 1, "platform": "/tmp"})",
       "--producers 148 --bytes-per-producer 1 --platform /tmp"},
      {R"({"bytes_per_producer": 1})", "--bytes-per-producer 1"},
  };
  for (const auto& [request, flags] : cases) {
    const Answer a = model(request);
    EXPECT_EQ(a.code, 2) << request;
    const xstage::test::CliRun cli = xstage::test::run_cli(std::string("model ") + flags + " --json");
    ASSERT_EQ(cli.code, 2) << flags;
    std::string expected = cli.err.substr(0, cli.err.find('\n'));
    for (const char* name : {"producers", "bytes-per-producer", "gap-us", "platform"}) {
      const std::string flag = std::string("--") + name;
      std::string key = name;
      for (char& c : key) c = c == '-' ? '_' : c;
      for (std::size_t at; (at = expected.find(flag)) != std::string::npos;) expected.replace(at, flag.size(), key);
    }
    EXPECT_EQ("xstage: error: " + a.error, expected) << request;
  }
}

TEST(PlannerCApi, TypesUnknownArgumentsAndBrokenCallsAreRefused) {
  Answer a = model(R"({"producers": 148.5, "bytes_per_producer": 1})");
  EXPECT_EQ(a.code, 2);
  EXPECT_EQ(a.error, "producers: must be a decimal integer, got \"148.5\"");
  a = model(R"({"producers": 148, "bytes_per_producer": "many"})");
  EXPECT_EQ(a.code, 2);
  EXPECT_EQ(a.error, "bytes_per_producer: must be a finite number > 0, got \"many\"");
  a = model(R"({"producers": 148, "bytes_per_producer": 1, "gap_uss": 2})");
  EXPECT_EQ(a.code, 2);
  EXPECT_NE(a.error.find("gap_uss: no such argument of model"), std::string::npos) << a.error;
  a = model(R"([148])");
  EXPECT_EQ(a.code, 2);
  EXPECT_NE(a.error.find("must be a JSON object"), std::string::npos) << a.error;
  a = model(R"({"producers": )");
  EXPECT_EQ(a.code, 2);
  EXPECT_NE(a.error.find("model: request: not valid JSON"), std::string::npos) << a.error;
  // null pointers: a status and a message, or a status alone where there is nowhere to put one
  char* error = nullptr;
  char* response = nullptr;
  EXPECT_EQ(xstage_planner_model(nullptr, &response, &error), 2);
  EXPECT_EQ(response, nullptr);
  ASSERT_NE(error, nullptr);
  EXPECT_EQ(std::string(error), "model: request: a null pointer");
  xstage_planner_free(error);
  EXPECT_EQ(xstage_planner_model("{}", nullptr, nullptr), 1);
  EXPECT_EQ(xstage_planner_c_api_version(), XSTAGE_PLANNER_C_API_VERSION);
}

namespace {

Answer simulate(const std::string& request) { return call(xstage_planner_simulate, request); }

// The CLI's first error line with every "--flag" written as its request key.
std::string in_request_keys(const std::string& err) {
  std::string line = err.substr(0, err.find('\n'));
  std::string out;
  for (std::size_t i = 0; i < line.size(); ++i) {
    if (line.compare(i, 2, "--") == 0 && i + 2 < line.size() && std::islower(static_cast<unsigned char>(line[i + 2]))) {
      i += 2;
      for (; i < line.size() && (std::islower(static_cast<unsigned char>(line[i])) || std::isdigit(line[i]) ||
                                 line[i] == '-');
           ++i)
        out += line[i] == '-' ? '_' : line[i];
      --i;
      continue;
    }
    out += line[i];
  }
  return out;
}

const std::string kKernel = std::string(XSTAGE_SOURCE_DIR) + "/kernels/burst_gap/gemm-reduce-scatter.json";
const std::string kUlysses = std::string(XSTAGE_SOURCE_DIR) + "/kernels/burst_gap/ulysses-attention-a2a.json";

}  // namespace

TEST(PlannerCApi, SimulateEqualsTheCliJson) {
  const std::string schedule = ::testing::TempDir() + "/planner_c_api_schedule.json";
  std::ofstream(schedule) << R"({"schema": "xstage.schedule/1", "producers": [
      {"count": 16, "repeat": 10, "steps": [{"burst_bytes": 32768}, {"compute_us": 0.5}]},
      {"count": 4, "repeat": 5, "steps": [{"burst_bytes": 65536}, {"compute_us": 1.0}]}]})";
  const std::pair<std::string, std::string> cases[] = {
      {R"({"producers": 148, "bytes_per_producer": 32768, "gap_us": 2})",
       "--producers 148 --bytes-per-producer 32768 --gap-us 2"},
      {R"({"producers": 148, "bytes_per_producer": 32768, "gap_us": 2, "bursts": 5, "per_burst": true})",
       "--producers 148 --bytes-per-producer 32768 --gap-us 2 --bursts 5 --per-burst"},
      {R"({"producers": 132, "bytes_per_producer": 16384, "gap_us": 1, "bursts": 20, "completion_coupled": true,
           "latency_us": 0.5, "per_burst": false})",
       "--producers 132 --bytes-per-producer 16384 --gap-us 1 --bursts 20 --completion-coupled --latency-us 0.5"},
      {R"({"producers": 64, "bytes_per_producer": 65536, "gap_us": 1.25, "capacity_bytes": 2097152,
           "t_iss0_us": 0.75, "platform": ")" + kPaper + "\"}",
       "--producers 64 --bytes-per-producer 65536 --gap-us 1.25 --capacity-bytes 2097152 --t-iss0-us 0.75 "
       "--platform " + kPaper},
      {R"({"kernel": ")" + kKernel + "\"}", "--kernel " + kKernel},
      {R"({"kernel": ")" + kUlysses + R"(", "platform": ")" + kPaper + "\"}", "--kernel " + kUlysses + " --platform " + kPaper},
      {R"({"schedule": ")" + schedule + R"(", "per_burst": true, "completion_coupled": true})",
       "--schedule " + schedule + " --per-burst --completion-coupled"},
      {R"({"schedule": ")" + schedule + R"(", "capacity_bytes": 100000})",
       "--schedule " + schedule + " --capacity-bytes 100000"},
  };
  for (const auto& [request, flags] : cases) {
    const Answer a = simulate(request);
    ASSERT_EQ(a.code, 0) << a.error;
    const xstage::test::CliRun cli = xstage::test::run_cli("simulate " + flags + " --json");
    ASSERT_EQ(cli.code, 0) << cli.err;
    EXPECT_EQ(nlohmann::json::parse(a.response), nlohmann::json::parse(cli.out)) << request;
  }
}

TEST(PlannerCApi, SimulateBadRequestIsTheCliMessageWithTheArgumentsNamed) {
  const std::string moe = std::string(XSTAGE_SOURCE_DIR) + "/kernels/moe/builtin/glm-4.5.json";
  const std::pair<std::string, std::string> cases[] = {
      {R"({"kernel": ")" + kKernel + R"(", "producers": 4})", "--kernel " + kKernel + " --producers 4"},
      {R"({"kernel": ")" + kKernel + R"(", "per_burst": true})", "--kernel " + kKernel + " --per-burst"},
      {R"({"kernel": ")" + kKernel + R"(", "schedule": ")" + kKernel + "\"}",
       "--kernel " + kKernel + " --schedule " + kKernel},
      {R"({"producers": 3, "bytes_per_producer": 4, "latency_us": 1})",
       "--producers 3 --bytes-per-producer 4 --latency-us 1"},
      {R"({"producers": 3, "bytes_per_producer": 4, "latency_us": -1, "completion_coupled": true})",
       "--producers 3 --bytes-per-producer 4 --latency-us -1 --completion-coupled"},
      {R"({"producers": 0, "bytes_per_producer": 4})", "--producers 0 --bytes-per-producer 4"},
      {R"({"gap_us": 3})", "--gap-us 3"},
      {R"({"producers": 3, "bytes_per_producer": 4, "bursts": 1})", "--producers 3 --bytes-per-producer 4 --bursts 1"},
      {R"({"producers": 100000, "bytes_per_producer": 10, "bursts": 100000})",
       "--producers 100000 --bytes-per-producer 10 --bursts 100000"},
      {R"({"producers": 3, "bytes_per_producer": 4, "platform": "/nonexistent/p.json"})",
       "--producers 3 --bytes-per-producer 4 --platform /nonexistent/p.json"},
      {R"({"kernel": ")" + moe + "\"}", "--kernel " + moe},
  };
  for (const auto& [request, flags] : cases) {
    const Answer a = simulate(request);
    EXPECT_EQ(a.code, 2) << request;
    const xstage::test::CliRun cli = xstage::test::run_cli("simulate " + flags + " --json");
    ASSERT_EQ(cli.code, 2) << flags;
    EXPECT_EQ("xstage: error: " + a.error, in_request_keys(cli.err)) << request;
  }
  Answer a = simulate(R"({"producers": 3, "bytes_per_producer": 4, "per_burst": 1})");
  EXPECT_EQ(a.code, 2);
  EXPECT_EQ(a.error, "per_burst: must be true or false, got 1");
  a = simulate(R"({"producers": 3, "bytes_per_producer": 4, "trace": "/tmp/t.json"})");
  EXPECT_EQ(a.code, 2);
  EXPECT_NE(a.error.find("trace: no such argument of simulate"), std::string::npos) << a.error;
}

TEST(PlannerCApi, PlanAndPlanAttnEqualTheCliJson) {
  const std::tuple<PlanEntry, std::string, std::string> cases[] = {
      {xstage_planner_plan, "{}", "plan"},
      {xstage_planner_plan, R"({"producers": 66, "platform": ")" + kPaper + "\"}", "plan --producers 66 --platform " + kPaper},
      {xstage_planner_plan_attn, "{}", "plan attn"},
      {xstage_planner_plan_attn, R"({"seq": [8192, 75600], "heads_per_gpu": 5, "sigma_us": 0.9, "block_n": 64})",
       "plan attn --seq 8192 75600 --heads-per-gpu 5 --sigma-us 0.9 --block-n 64"},
      {xstage_planner_plan_attn,
       R"({"producers": 132, "head_dim": 64, "out_bytes": 4, "latency_us": 1.5, "cover_us": 0.2, "qk_cover_us": 0.1,
           "batch": 2, "block_m": 64, "seq": [4096], "platform": ")" + kPaper + "\"}",
       "plan attn --producers 132 --head-dim 64 --out-bytes 4 --latency-us 1.5 --cover-us 0.2 --qk-cover-us 0.1 "
       "--batch 2 --block-m 64 --seq 4096 --platform " + kPaper},
  };
  for (const auto& [entry, request, command] : cases) {
    const Answer a = call(entry, request);
    ASSERT_EQ(a.code, 0) << a.error;
    const xstage::test::CliRun cli = xstage::test::run_cli(command + " --json");
    ASSERT_EQ(cli.code, 0) << cli.err;
    EXPECT_EQ(nlohmann::json::parse(a.response), nlohmann::json::parse(cli.out)) << request;
  }
}

TEST(PlannerCApi, PlanBadRequestIsTheCliMessageWithTheArgumentsNamed) {
  const std::tuple<PlanEntry, std::string, std::string> cases[] = {
      {xstage_planner_plan, R"({"producers": 0})", "plan --producers 0"},
      {xstage_planner_plan, R"({"producers": 1000000})", "plan --producers 1000000"},
      {xstage_planner_plan, R"({"platform": "/nonexistent/p.json"})", "plan --platform /nonexistent/p.json"},
      {xstage_planner_plan_attn, R"({"block_m": 0})", "plan attn --block-m 0"},
      {xstage_planner_plan_attn, R"({"out_bytes": 9})", "plan attn --out-bytes 9"},
      {xstage_planner_plan_attn, R"({"sigma_us": 0})", "plan attn --sigma-us 0"},
      {xstage_planner_plan_attn, R"({"latency_us": 2000000})", "plan attn --latency-us 2000000"},
      {xstage_planner_plan_attn, R"({"producers": 1000000})", "plan attn --producers 1000000"},
      {xstage_planner_plan_attn, R"({"seq": [67108864], "block_m": 1, "heads_per_gpu": 65536, "batch": 2147483647})",
       "plan attn --seq 67108864 --block-m 1 --heads-per-gpu 65536 --batch 2147483647"},
      {xstage_planner_plan_attn, R"({"sigma_us": 1000000, "seq": [67108864]})",
       "plan attn --sigma-us 1000000 --seq 67108864"},
  };
  for (const auto& [entry, request, command] : cases) {
    const Answer a = call(entry, request);
    EXPECT_EQ(a.code, 2) << request;
    const xstage::test::CliRun cli = xstage::test::run_cli(command + " --json");
    ASSERT_EQ(cli.code, 2) << command;
    EXPECT_EQ("xstage: error: " + a.error, in_request_keys(cli.err)) << request;
  }
  Answer a = call(xstage_planner_plan_attn, R"({"seq": []})");
  EXPECT_EQ(a.code, 2);
  EXPECT_EQ(a.error, "seq: must be a non-empty list of integers, got []");
  a = call(xstage_planner_plan_attn, R"({"seq": [8192, 0]})");
  EXPECT_EQ(a.code, 2);
  EXPECT_NE(a.error.find("seq: "), std::string::npos) << a.error;
  a = call(xstage_planner_plan, R"({"json": true})");
  EXPECT_EQ(a.code, 2);
  EXPECT_NE(a.error.find("json: no such argument of plan"), std::string::npos) << a.error;
}

namespace {

const std::string kGlm = std::string(XSTAGE_SOURCE_DIR) + "/kernels/moe/builtin/glm-4.5.json";

// A routing file of 4 tokens over 12 experts, top-1 (xstage.routing/1), for the simulated requests.
std::string routing_file() {
  const std::string file = ::testing::TempDir() + "/planner_c_api_routing.json";
  std::ofstream(file) << R"({"schema": "xstage.routing/1", "tokens": 4, "experts": 12, "top_k": 1,
                             "expert_ids": [0, 5, 7, 11], "weights": [1, 1, 1, 1]})";
  return file;
}

}  // namespace

TEST(PlannerCApi, PlanMoeEqualsTheCliJson) {
  const std::string routing = routing_file();
  const std::pair<std::string, std::string> cases[] = {
      {R"({"shape": "deepseek-v3"})", "--shape deepseek-v3"},
      {R"({"kernel": "paper-qwen3.5", "platform": ")" + kPaper + "\"}", "--kernel paper-qwen3.5 --platform " + kPaper},
      {R"({"kernel": ")" + kGlm + R"(", "t_l1_us": 4, "t_l2_us": 3.0})", "--kernel " + kGlm + " --t-l1-us 4 --t-l2-us 3"},
      {R"({"shape": "deepseek-v3", "precision": "fp8", "producers": 66})",
       "--shape deepseek-v3 --precision fp8 --producers 66"},
      {R"({"shape": "mimo-v2-flash", "sm_tflops": 5, "block_m": 64, "out_bytes": 4, "combine": "epilogue", "ranks": 4})",
       "--shape mimo-v2-flash --sm-tflops 5 --block-m 64 --out-bytes 4 --combine epilogue --ranks 4"},
      {R"({"shape": "qwen3-235b-a22b", "simulate": true, "routing": "skewed", "zipf_s": 1.5, "tokens": 1024})",
       "--shape qwen3-235b-a22b --simulate --routing skewed --zipf-s 1.5 --tokens 1024"},
      {R"({"kernel": "dit-moe-g2-16e2a", "simulate": true, "combine": "epilogue_issuer", "cover_slots": 3,
           "staging_us": 0.5, "tokens": 1024})",
       "--kernel dit-moe-g2-16e2a --simulate --combine epilogue_issuer --cover-slots 3 --staging-us 0.5 --tokens 1024"},
      {R"({"hidden": 3000, "h_inter": 1000, "experts": 12, "top_k": 3, "simulate": true, "lead_rows": 64,
           "experts_per_wave": 2})",
       "--hidden 3000 --h-inter 1000 --experts 12 --top-k 3 --simulate --lead-rows 64 --experts-per-wave 2"},
      {R"({"hidden": 3000, "h_inter": 1000, "experts": 12, "top_k": 1, "simulate": true, "routing": ")" + routing + "\"}",
       "--hidden 3000 --h-inter 1000 --experts 12 --top-k 1 --simulate --routing " + routing},
      {R"({"tile_bytes": 32768, "t_l1_us": 2, "t_l2_us": 1.5, "n1": 16, "n2": 8, "h_inter": 2048, "ranks": 4,
           "combine": "epilogue", "simulate": false})",
       "--tile-bytes 32768 --t-l1-us 2 --t-l2-us 1.5 --n1 16 --n2 8 --h-inter 2048 --ranks 4 --combine epilogue"},
  };
  for (const auto& [request, flags] : cases) {
    const Answer a = call(xstage_planner_plan_moe, request);
    ASSERT_EQ(a.code, 0) << a.error;
    const xstage::test::CliRun cli = xstage::test::run_cli("plan moe " + flags + " --json");
    ASSERT_EQ(cli.code, 0) << cli.err;
    EXPECT_EQ(nlohmann::json::parse(a.response), nlohmann::json::parse(cli.out)) << request;
  }
}

TEST(PlannerCApi, PlanMoeBadRequestIsTheCliMessageWithTheArgumentsNamed) {
  const std::string routing = routing_file();
  const std::string tile = R"("tile_bytes": 100, "t_l1_us": 1, "t_l2_us": 1, "n1": 1, "h_inter": 64)";
  const std::string tile_flags = "--tile-bytes 100 --t-l1-us 1 --t-l2-us 1 --n1 1 --h-inter 64";
  const std::pair<std::string, std::string> cases[] = {
      // each value's rule: integer ranges in full, in_range's %g
      {R"({"hidden": 0, "h_inter": 1000, "experts": 12, "top_k": 3})", "--hidden 0 --h-inter 1000 --experts 12 --top-k 3"},
      {R"({"hidden": 2000000})", "--hidden 2000000"},
      {R"({"shape": "deepseek-v3", "top_k": 70000})", "--shape deepseek-v3 --top-k 70000"},
      {R"({"shape": "deepseek-v3", "sm_tflops": 0})", "--shape deepseek-v3 --sm-tflops 0"},
      {R"({"shape": "deepseek-v3", "simulate": true, "lead_rows": 2000000})",
       "--shape deepseek-v3 --simulate --lead-rows 2000000"},
      {R"({"shape": "deepseek-v3", "t_l1_us": 0})", "--shape deepseek-v3 --t-l1-us 0"},
      {R"({"shape": "deepseek-v3", "staging_us": -1})", "--shape deepseek-v3 --staging-us -1"},
      {"{" + tile + R"(, "n2": 0})", tile_flags + " --n2 0"},
      {R"({"tile_bytes": 0})", "--tile-bytes 0"},
      {R"({"shape": "deepseek-v3", "ranks": 2000})", "--shape deepseek-v3 --ranks 2000"},
      {R"({"shape": "deepseek-v3", "simulate": true, "tokens": 0})", "--shape deepseek-v3 --simulate --tokens 0"},
      {R"({"shape": "deepseek-v3", "producers": 0})", "--shape deepseek-v3 --producers 0"},
      {R"({"shape": "deepseek-v3", "platform": "/nonexistent/p.json"})",
       "--shape deepseek-v3 --platform /nonexistent/p.json"},
      // the choices and the combinations, in the CLI's order
      {R"({"shape": "deepseek-v3", "precision": "int8"})", "--shape deepseek-v3 --precision int8"},
      {R"({"shape": "deepseek-v3", "combine": "foo"})", "--shape deepseek-v3 --combine foo"},
      {R"({"kernel": "deepseek-v3", "shape": "deepseek-v3"})", "--kernel deepseek-v3 --shape deepseek-v3"},
      {R"({"shape": "no-such-model"})", "--shape no-such-model"},
      {R"({"kernel": "no-such-model"})", "--kernel no-such-model"},
      {R"({"shape": "deepseek-v3", "tokens": 5})", "--shape deepseek-v3 --tokens 5"},
      {R"({"hidden": 3000, "tile_bytes": 100})", "--hidden 3000 --tile-bytes 100"},
      {R"({"shape": "deepseek-v3", "n2": 3})", "--shape deepseek-v3 --n2 3"},
      {"{" + tile + R"(, "n2": 1, "precision": "fp8"})", tile_flags + " --n2 1 --precision fp8"},
      {"{" + tile + "}", tile_flags},
      {"{" + tile + R"(, "n2": 1, "simulate": true})", tile_flags + " --n2 1 --simulate"},
      {R"({"shape": "deepseek-v3", "precision": "fp8", "t_l1_us": 1, "t_l2_us": 1})",
       "--shape deepseek-v3 --precision fp8 --t-l1-us 1 --t-l2-us 1"},
      {R"({"shape": "deepseek-v3", "precision": "fp8", "sm_tflops": 3})", "--shape deepseek-v3 --precision fp8 --sm-tflops 3"},
      {R"({"hidden": 3000, "h_inter": 1000, "experts": 12, "top_k": 1, "simulate": true, "tokens": 2048, "routing": ")" +
           routing + "\"}",
       "--hidden 3000 --h-inter 1000 --experts 12 --top-k 1 --simulate --tokens 2048 --routing " + routing},
      {R"({"shape": "deepseek-v3", "simulate": true, "routing": ")" + routing + "\"}",
       "--shape deepseek-v3 --simulate --routing " + routing},
  };
  for (const auto& [request, flags] : cases) {
    const Answer a = call(xstage_planner_plan_moe, request);
    EXPECT_EQ(a.code, 2) << request;
    const xstage::test::CliRun cli = xstage::test::run_cli("plan moe " + flags + " --json");
    ASSERT_EQ(cli.code, 2) << flags;
    EXPECT_EQ("xstage: error: " + a.error, in_request_keys(cli.err)) << request;
  }
  // A description's error names its origin: the request's arguments laid over it, not the CLI's flags.
  Answer a = call(xstage_planner_plan_moe, R"({"shape": "deepseek-v3", "ranks": 5})");
  EXPECT_EQ(a.code, 2);
  EXPECT_EQ(a.error, "built-in deepseek-v3 with arguments (each sets the field of its name): ranks: 5 ranks do not divide "
                     "the 256 experts (expert parallelism places experts / ranks on each)");
  a = call(xstage_planner_plan_moe, R"({"shape": 3})");
  EXPECT_EQ(a.code, 2);
  EXPECT_EQ(a.error, "shape: must be a string, got 3");
  a = call(xstage_planner_plan_moe, R"({"shape": "deepseek-v3", "simulate": true, "tokens": 1.5})");
  EXPECT_EQ(a.code, 2);
  EXPECT_EQ(a.error, "tokens: must be a decimal integer, got \"1.5\"");
  a = call(xstage_planner_plan_moe, R"({"shape": "deepseek-v3", "simulate": true, "trace": "/tmp/t.json"})");
  EXPECT_EQ(a.code, 2);
  EXPECT_NE(a.error.find("trace: no such argument of plan moe"), std::string::npos) << a.error;
}

namespace {

const std::string kCalibration = std::string(XSTAGE_SOURCE_DIR) + "/results/h200-x2/calibration";
const std::string kRecords = kCalibration + "/records.csv";
const std::string kRaw = kCalibration + "/raw.json";
const std::string kMeasured = std::string(XSTAGE_SOURCE_DIR) + "/platforms/h200_x2_measured.json";

// The committed records at K = 16 and 33 only: a cross-validation that runs in seconds.
std::string small_records() {
  const std::string file = ::testing::TempDir() + "/planner_c_api_records_k16_k33.csv";
  std::ifstream in(kRecords);
  std::ofstream out(file);
  std::string line;
  for (int n = 0; std::getline(in, line); ++n)
    if (n == 0 || line.find(",remote,16,") != std::string::npos || line.find(",remote,33,") != std::string::npos ||
        line.find(",local,16,") != std::string::npos || line.find(",local,33,") != std::string::npos)
      out << line << "\n";
  return file;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace

// fit: the CLI's --json with "out" its file, and the file the fitted platform; the ABI's "out" is null and its
// "platform" that document.
TEST(PlannerCApi, FitEqualsTheCliJsonAndItsPlatformFile) {
  const std::string out = ::testing::TempDir() + "/planner_c_api_fit.json";
  const std::pair<std::string, std::string> cases[] = {
      {R"({"records": ")" + kRecords + "\"}", "--records " + kRecords},
      {R"({"records": ")" + kRecords + R"(", "raw": ")" + kRaw + R"(", "name": "mine"})",
       "--records " + kRecords + " --raw " + kRaw + " --name mine"},
      {R"({"records": ")" + kRecords + R"(", "raw": ")" + kRaw +
           R"(", "link_gbps": 450, "link_source": "NVLink 4: 18 x 25 GB/s", "copy_engine_gbps": 392.5, "sms": 132})",
       "--records " + kRecords + " --raw " + kRaw +
           " --link-gbps 450 --link-source 'NVLink 4: 18 x 25 GB/s' --copy-engine-gbps 392.5 --sms 132"},
  };
  for (const auto& [request, flags] : cases) {
    const Answer a = call(xstage_planner_fit, request);
    ASSERT_EQ(a.code, 0) << a.error;
    std::remove(out.c_str());
    const xstage::test::CliRun cli = xstage::test::run_cli("fit " + flags + " --out " + out + " --json");
    ASSERT_EQ(cli.code, 0) << cli.err;
    nlohmann::json expected = nlohmann::json::parse(cli.out);
    EXPECT_EQ(expected["out"], out);
    expected["out"] = nullptr;
    expected["platform"] = nlohmann::json::parse(read_text(out));
    EXPECT_EQ(nlohmann::json::parse(a.response), expected) << request;
    EXPECT_FALSE(expected["warnings"].empty());  // the CLI prints them on stderr too
    EXPECT_NE(cli.err.find("xstage: warning: fit: "), std::string::npos) << cli.err;
  }
  std::remove(out.c_str());
}

// fidelity: the CLI's --json; the ABI's provenance is the CLI's less the command line and the git revision.
TEST(PlannerCApi, FidelityEqualsTheCliJson) {
  const std::string small = small_records();
  const std::string moe = std::string(XSTAGE_SOURCE_DIR) + "/results/h200-x2/moe/moe_trace_run_dit-moe-g2-16e2a.json";
  const std::string moe2 = std::string(XSTAGE_SOURCE_DIR) + "/results/h200-x2/moe/moe_trace_run_qwen3-235b-a22b.json";
  const std::string uly = std::string(XSTAGE_SOURCE_DIR) + "/results/h200-x2/ulysses/ulysses.json";
  const std::pair<std::string, std::string> cases[] = {
      {R"({"records": ")" + kRecords + "\"}", "--records " + kRecords},
      {R"({"records": ")" + kRecords + R"(", "raw": ")" + kRaw + R"(", "platform": ")" + kPaper + "\"}",
       "--records " + kRecords + " --raw " + kRaw + " --platform " + kPaper},
      {R"({"records": ")" + kRecords + R"(", "traces": [")" + moe + R"(", ")" + moe2 + R"("], "ulysses": ")" + uly +
           R"(", "platform": ")" + kMeasured + "\"}",
       "--records " + kRecords + " --traces " + moe + " " + moe2 + " --ulysses " + uly + " --platform " + kMeasured},
      {R"({"records": ")" + small + R"(", "raw": ")" + kRaw + R"(", "cross_validate": true, "folds": 3, "platform": ")" +
           kPaper + "\"}",
       "--records " + small + " --raw " + kRaw + " --cross-validate --folds 3 --platform " + kPaper},
  };
  for (const auto& [request, flags] : cases) {
    const Answer a = call(xstage_planner_fidelity, request);
    ASSERT_EQ(a.code, 0) << a.error;
    const xstage::test::CliRun cli = xstage::test::run_cli("fidelity " + flags + " --json");
    ASSERT_EQ(cli.code, 0) << cli.err;
    nlohmann::json expected = nlohmann::json::parse(cli.out);
    nlohmann::json& provenance = expected["provenance"];
    EXPECT_EQ(provenance["command"].front(), "xstage");
    for (const char* cli_only : {"command", "git_revision", "git_describe"}) provenance.erase(cli_only);
    EXPECT_EQ(nlohmann::json::parse(a.response), expected) << request;
  }
}

TEST(PlannerCApi, FitAndFidelityBadRequestsAreTheCliMessageWithTheArgumentsNamed) {
  const std::string bad_json = ::testing::TempDir() + "/planner_c_api_bad.json";
  std::ofstream(bad_json) << R"({"x": )";
  const std::string out = ::testing::TempDir() + "/planner_c_api_fit_bad.json";
  const std::string rec = R"("records": ")" + kRecords + "\"";
  const std::string header_only = ::testing::TempDir() + "/planner_c_api_no_records.csv";
  std::ofstream(header_only) << read_text(kRecords).substr(0, read_text(kRecords).find('\n') + 1);
  // fit: each value's rule (CLI::Range's text for the rates and --sms), then the name, the bounds and the files
  const std::pair<std::string, std::string> fit_cases[] = {
      {"{}", ""},
      {R"({"records": "/nonexistent/r.csv"})", "--records /nonexistent/r.csv"},
      {R"({"records": "/tmp"})", "--records /tmp"},
      {"{" + rec + R"(, "raw": "/nonexistent/raw.json"})", "--records " + kRecords + " --raw /nonexistent/raw.json"},
      {"{" + rec + R"(, "raw": ")" + bad_json + "\"}", "--records " + kRecords + " --raw " + bad_json},
      {"{" + rec + R"(, "raw": ")" + kRecords + "\"}", "--records " + kRecords + " --raw " + kRecords},
      {"{" + rec + R"(, "link_gbps": 0, "link_source": "x"})", "--records " + kRecords + " --link-gbps 0 --link-source x"},
      {"{" + rec + R"(, "link_gbps": -5, "link_source": "x"})", "--records " + kRecords + " --link-gbps -5 --link-source x"},
      {"{" + rec + R"(, "link_gbps": "abc", "link_source": "x"})", "--records " + kRecords + " --link-gbps abc --link-source x"},
      {"{" + rec + R"(, "link_gbps": 450, "link_source": "x", "copy_engine_gbps": 0})",
       "--records " + kRecords + " --link-gbps 450 --link-source x --copy-engine-gbps 0"},
      {"{" + rec + R"(, "link_gbps": 450, "link_source": "x", "sms": 0})",
       "--records " + kRecords + " --link-gbps 450 --link-source x --sms 0"},
      {"{" + rec + R"(, "link_gbps": 450, "link_source": "x", "sms": 1.5})",
       "--records " + kRecords + " --link-gbps 450 --link-source x --sms 1.5"},
      {"{" + rec + R"(, "link_gbps": 450})", "--records " + kRecords + " --link-gbps 450"},
      {"{" + rec + R"(, "link_source": "x"})", "--records " + kRecords + " --link-source x"},
      {"{" + rec + R"(, "copy_engine_gbps": 100})", "--records " + kRecords + " --copy-engine-gbps 100"},
      {"{" + rec + R"(, "sms": 132})", "--records " + kRecords + " --sms 132"},
      {"{" + rec + R"(, "name": ""})", "--records " + kRecords + " --name ''"},
      {"{" + rec + R"(, "name": "   "})", "--records " + kRecords + " --name '   '"},
      {"{" + rec + R"(, "name": "\u001b[31mred"})", "--records " + kRecords + " --name \"$(printf '\\033[31mred')\""},
      {"{" + rec + R"(, "name": ")" + std::string(130, 'x') + "\"}", "--records " + kRecords + " --name " + std::string(130, 'x')},
      {R"({"records": ")" + kMeasured + "\"}", "--records " + kMeasured},
      {R"({"records": ")" + header_only + "\"}", "--records " + header_only},
  };
  for (const auto& [request, flags] : fit_cases) {
    const Answer a = call(xstage_planner_fit, request);
    EXPECT_EQ(a.code, 2) << request;
    std::remove(out.c_str());
    // the CLI's --out is a fresh file, so only the request's arguments can fail
    const xstage::test::CliRun cli = xstage::test::run_cli("fit " + flags + " --out " + out + " --json");
    ASSERT_EQ(cli.code, 2) << flags << ": " << cli.err;
    EXPECT_EQ("xstage: error: " + a.error, in_request_keys(cli.err)) << request;
  }
  // A fit the platform loader refuses: the CLI names its --out file, the ABI "fitted platform".
  const Answer refused = call(xstage_planner_fit, "{" + rec + R"(, "raw": ")" + kRaw + R"(", "link_gbps": 100, "link_source": "x"})");
  EXPECT_EQ(refused.code, 2);
  std::remove(out.c_str());
  const xstage::test::CliRun cli =
      xstage::test::run_cli("fit --records " + kRecords + " --raw " + kRaw + " --link-gbps 100 --link-source x --out " + out);
  ASSERT_EQ(cli.code, 2) << cli.err;
  std::string expected = cli.err.substr(0, cli.err.find('\n'));
  ASSERT_EQ(expected.find("xstage: error: " + out + ": "), 0u) << expected;
  expected.replace(0, std::string("xstage: error: ").size() + out.size(), "fitted platform");
  EXPECT_EQ(refused.error, expected);
  std::remove(out.c_str());
  // fidelity
  const std::string frec = R"("records": ")" + kRecords + "\"";
  const std::pair<std::string, std::string> fidelity_cases[] = {
      {"{}", ""},
      {R"({"records": "/nonexistent/r.csv"})", "--records /nonexistent/r.csv"},
      {"{" + frec + R"(, "platform": "/nonexistent/p.json"})", "--records " + kRecords + " --platform /nonexistent/p.json"},
      {"{" + frec + R"(, "platform": "/tmp"})", "--records " + kRecords + " --platform /tmp"},
      {"{" + frec + R"(, "platform": ")" + bad_json + "\"}", "--records " + kRecords + " --platform " + bad_json},
      {"{" + frec + R"(, "raw": "/nonexistent/raw.json"})", "--records " + kRecords + " --raw /nonexistent/raw.json"},
      {"{" + frec + R"(, "traces": ["/nonexistent/t.json"]})", "--records " + kRecords + " --traces /nonexistent/t.json"},
      {"{" + frec + R"(, "traces": [")" + kMeasured + "\"]}", "--records " + kRecords + " --traces " + kMeasured},
      {"{" + frec + R"(, "ulysses": "/nonexistent/u.json"})", "--records " + kRecords + " --ulysses /nonexistent/u.json"},
      {"{" + frec + R"(, "ulysses": ")" + kMeasured + "\"}", "--records " + kRecords + " --ulysses " + kMeasured},
      {"{" + frec + R"(, "folds": 3})", "--records " + kRecords + " --folds 3"},
      {"{" + frec + R"(, "cross_validate": true, "folds": 1})", "--records " + kRecords + " --cross-validate --folds 1"},
      {"{" + frec + R"(, "cross_validate": true, "folds": 11})", "--records " + kRecords + " --cross-validate --folds 11"},
      {"{" + frec + R"(, "cross_validate": true, "folds": 2.5})", "--records " + kRecords + " --cross-validate --folds 2.5"},
      {R"({"records": ")" + kMeasured + "\"}", "--records " + kMeasured},
  };
  for (const auto& [request, flags] : fidelity_cases) {
    const Answer a = call(xstage_planner_fidelity, request);
    EXPECT_EQ(a.code, 2) << request;
    const xstage::test::CliRun cli = xstage::test::run_cli("fidelity " + flags + " --json");
    ASSERT_EQ(cli.code, 2) << flags << ": " << cli.err;
    EXPECT_EQ("xstage: error: " + a.error, in_request_keys(cli.err)) << request;
  }
  // Types and keys of the request itself, and the CLI's output files, which no request has.
  Answer a = call(xstage_planner_fit, R"({"records": 3})");
  EXPECT_EQ(a.code, 2);
  EXPECT_EQ(a.error, "records: must be a path (a string), got 3");
  a = call(xstage_planner_fit, "{" + rec + R"(, "out": "/tmp/p.json"})");
  EXPECT_EQ(a.code, 2);
  EXPECT_NE(a.error.find("out: no such argument of fit"), std::string::npos) << a.error;
  a = call(xstage_planner_fidelity, "{" + frec + R"(, "force": true})");
  EXPECT_EQ(a.code, 2);
  EXPECT_NE(a.error.find("force: no such argument of fidelity"), std::string::npos) << a.error;
  a = call(xstage_planner_fidelity, "{" + frec + R"(, "traces": "/tmp/t.json"})");
  EXPECT_EQ(a.code, 2);
  EXPECT_EQ(a.error, "traces: must be a non-empty list of paths (strings), got /tmp/t.json");
  a = call(xstage_planner_fidelity, "{" + frec + R"(, "cross_validate": "yes"})");
  EXPECT_EQ(a.code, 2);
  EXPECT_EQ(a.error, "cross_validate: must be true or false, got yes");
  // Text that is not JSON names the argument whose value it was, the parser's message escaped.
  a = call(xstage_planner_fit, R"({"records": 1e400})");
  EXPECT_EQ(a.code, 2);
  EXPECT_EQ(a.error.rfind("fit: request: not valid JSON in the value of records (", 0), 0u) << a.error;
  EXPECT_NE(a.error.find("number overflow"), std::string::npos) << a.error;
  a = call(xstage_planner_fidelity, "{" + frec + ", \"raw\": \"\xff\xfe\"}");
  EXPECT_EQ(a.code, 2);
  EXPECT_EQ(a.error.rfind("fidelity: request: not valid JSON in the value of raw (", 0), 0u) << a.error;
  EXPECT_NE(a.error.find("\\xFF"), std::string::npos) << a.error;
  EXPECT_EQ(a.error.find('\xff'), std::string::npos) << a.error;
  a = call(xstage_planner_fit, "{" + rec + ", \"link_gbps\": NaN}");
  EXPECT_EQ(a.code, 2);
  EXPECT_EQ(a.error.rfind("fit: request: not valid JSON in the value of link_gbps (", 0), 0u) << a.error;
  a = call(xstage_planner_fit, "{\"\xff\": 1}");
  EXPECT_EQ(a.code, 2);
  EXPECT_EQ(a.error.rfind("fit: request: not valid JSON (", 0), 0u) << a.error;  // no argument read yet
}
