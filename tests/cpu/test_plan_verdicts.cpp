// `xstage plan` gives a verdict a kernel engineer can act on: every attention and MoE row ends in an
// "act on" column in words (keep / reshape, with the cost per launch and the steady stall), beside the
// aligned worst case as context; one legend line per verdict column says which burst it models, and the
// README explains the columns with the same lines; the JSON says the same with stable keys, and its
// top-level and per-point verdicts never contradict; the header's R is the R the figures used.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "cli_runner.hpp"
#include "xstage/model/platform.hpp"

namespace {

using xstage::test::run_cli;

std::string paper_platform() { return std::string(XSTAGE_SOURCE_DIR) + "/platforms/paper_8gpu_148sm.json"; }

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream s(text);
  for (std::string line; std::getline(s, line);) out.push_back(line);
  return out;
}

std::string rstrip(std::string s) {
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

// One printed table: its header, its rows and the legend lines ("  column: what it models") below it.
struct PrintedTable {
  std::string header;
  std::vector<std::string> rows;
  std::vector<std::string> legend;
};

std::vector<PrintedTable> tables_of(const std::string& out) {
  const auto lines = lines_of(out);
  std::vector<PrintedTable> tables;
  for (std::size_t i = 1; i < lines.size(); ++i) {
    if (lines[i].empty() || lines[i].find_first_not_of('-') != std::string::npos) continue;
    PrintedTable t;
    t.header = lines[i - 1];
    std::size_t j = i + 1;
    for (; j < lines.size() && !lines[j].empty() && lines[j][0] != ' '; ++j) t.rows.push_back(rstrip(lines[j]));
    for (; j < lines.size() && lines[j].rfind("  ", 0) == 0; ++j) t.legend.push_back(lines[j]);
    tables.push_back(t);
    i = j;
  }
  return tables;
}

// The column a legend line defines ("  as built stall us: ..." -> "as built stall us").
std::string legend_column(const std::string& line) { return line.substr(2, line.find(": ") - 2); }

const std::regex kActOn(R"((keep: .+|reshape: .+)$)");

TEST(PlanVerdicts, EveryRowEndsInAnActOnVerdict) {
  for (const std::string platform : {std::string(), " --platform " + paper_platform()}) {
    SCOPED_TRACE(platform);
    const auto r = run_cli("plan" + platform);
    ASSERT_EQ(r.code, 0) << r.err;
    const auto tables = tables_of(r.out);
    ASSERT_EQ(tables.size(), 2u) << r.out;
    EXPECT_EQ(tables[0].rows.size(), 4u);
    EXPECT_EQ(tables[1].rows.size(), 14u);
    for (const auto& t : tables) {
      EXPECT_NE(t.header.find("act on"), std::string::npos) << t.header;
      for (const auto& row : t.rows) EXPECT_TRUE(std::regex_search(row, kActOn)) << row;
    }
  }
}

TEST(PlanVerdicts, JsonCarriesTheActOnVerdictOfEveryRow) {
  for (const std::string platform : {std::string(), " --platform " + paper_platform()}) {
    SCOPED_TRACE(platform);
    const auto r = run_cli("plan --json" + platform);
    ASSERT_EQ(r.code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    for (const char* section : {"attention", "moe"}) {
      ASSERT_FALSE(j[section].empty()) << section;
      for (const auto& row : j[section]) {
        const std::string at = std::string(section) + " " + row["name"].get<std::string>();
        const auto& a = row.at("act_on");
        const std::string verdict = a.at("verdict");
        EXPECT_TRUE(verdict == "keep" || verdict == "reshape") << at;
        EXPECT_EQ(a.at("text").get<std::string>().rfind(verdict + ": ", 0), 0u) << at << ": " << a["text"];
        EXPECT_GE(a.at("first_launch_cost_us").get<double>(), 0.0) << at;
        EXPECT_GE(a.at("steady_stall_us").get<double>(), 0.0) << at;
        EXPECT_EQ(verdict == "reshape", a["steady_stall_us"].get<double>() > 0.0) << at;
        // A stall paid once per launch is named in the text as such.
        if (a["first_launch_cost_us"].get<double>() > 0.0)
          EXPECT_NE(a["text"].get<std::string>().find("once"), std::string::npos) << at;
        // A verdict that rests on the datasheet Tensor Core rate says so (MoE mainloops only).
        const bool says_datasheet = a["text"].get<std::string>().find("(datasheet rate)") != std::string::npos;
        const bool datasheet = std::string(section) == "moe" &&
                               j["gemm_rate_per_sm"][row["precision"].get<std::string>()]["source"] == "datasheet";
        EXPECT_EQ(says_datasheet, datasheet) << at;
        EXPECT_EQ(a.at("datasheet_rate").get<bool>(), says_datasheet) << at;
      }
    }
    for (const auto& w : j["attention"]) {
      EXPECT_EQ(w["act_on"]["verdict"], w["as_built"]["action"]) << w["name"];
      EXPECT_EQ(w["act_on"]["verdict"], w["points"][0]["act_on"]["verdict"]) << w["name"];
    }
    for (const auto& m : j["moe"]) {
      const bool both_keep = m["wave_as_built"]["action"] == "keep" && m["interleaved_as_built"]["action"] == "keep";
      EXPECT_EQ(m["act_on"]["verdict"], both_keep ? "keep" : "reshape") << m["name"];
    }
  }
}

TEST(PlanVerdicts, LegendNamesTheBurstEachVerdictColumnModels) {
  const auto r = run_cli("plan");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto tables = tables_of(r.out);
  ASSERT_EQ(tables.size(), 2u);
  for (const auto& t : tables) {
    ASSERT_EQ(t.legend.size(), 3u) << t.header;
    for (const auto& l : t.legend) EXPECT_NE(t.header.find(legend_column(l)), std::string::npos) << l;
    // aligned: every producer's whole burst at once, all remote; as built: the kernel's recurring bursts.
    EXPECT_EQ(t.legend[0].rfind("  aligned", 0), 0u) << t.legend[0];
    EXPECT_NE(t.legend[0].find("at once"), std::string::npos) << t.legend[0];
    EXPECT_NE(t.legend[0].find("all remote"), std::string::npos) << t.legend[0];
    EXPECT_NE(t.legend[0].find("worst case"), std::string::npos) << t.legend[0];
    EXPECT_EQ(t.legend[1].rfind("  as built", 0), 0u) << t.legend[1];
    EXPECT_NE(t.legend[1].find("simulated"), std::string::npos) << t.legend[1];
    EXPECT_EQ(t.legend[2].rfind("  act on", 0), 0u) << t.legend[2];
  }
  // MoE as built: the remote share and the chunks over the next tile's k-steps, unlike the aligned column.
  EXPECT_NE(tables[1].legend[1].find("(N-1)/N"), std::string::npos);
  EXPECT_NE(tables[1].legend[1].find("8 chunks over the next tile's k-steps"), std::string::npos);
  EXPECT_NE(tables[1].legend[0].find("whole Linear-2 tile"), std::string::npos);
  // The JSON carries the same legend.
  const auto j = nlohmann::json::parse(run_cli("plan --json").out);
  ASSERT_EQ(j["legend"]["attention"].size(), 3u);
  ASSERT_EQ(j["legend"]["moe"].size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ("  " + j["legend"]["attention"][i]["column"].get<std::string>() + ": " +
                  j["legend"]["attention"][i]["models"].get<std::string>(),
              tables[0].legend[i]);
    EXPECT_EQ("  " + j["legend"]["moe"][i]["column"].get<std::string>() + ": " +
                  j["legend"]["moe"][i]["models"].get<std::string>(),
              tables[1].legend[i]);
  }
}

// The README explains the columns with the legend `plan` prints: its ```text block holding the
// "  act on: " lines is exactly the printed legend lines, in order, so changing one fails until the
// other follows.
TEST(PlanVerdicts, ReadmeExplainsTheColumnsAsPrinted) {
  const auto r = run_cli("plan");
  ASSERT_EQ(r.code, 0) << r.err;
  std::vector<std::string> printed;
  for (const auto& t : tables_of(r.out)) printed.insert(printed.end(), t.legend.begin(), t.legend.end());
  ASSERT_EQ(printed.size(), 6u);
  std::ifstream f(std::string(XSTAGE_SOURCE_DIR) + "/README.md");
  ASSERT_TRUE(f) << "README.md";
  std::vector<std::vector<std::string>> blocks;
  bool in_text = false;
  for (std::string line; std::getline(f, line);) {
    if (line.rfind("```", 0) == 0) {
      in_text = !in_text && line == "```text";
      if (in_text) blocks.emplace_back();
      continue;
    }
    if (in_text && !line.empty()) blocks.back().push_back(line);
  }
  const std::vector<std::string>* legend = nullptr;
  for (const auto& b : blocks)
    for (const auto& line : b)
      if (line.rfind("  act on: ", 0) == 0) legend = &b;
  ASSERT_NE(legend, nullptr) << "README.md has no ```text block with the plan legend";
  EXPECT_EQ(*legend, printed);
}

// `plan attn --json`: the top level models the aligned worst case of one burst under a key that says
// so, and its own act-on verdict is the points' verdict, never its contradiction.
void expect_levels_agree(const nlohmann::json& j, const std::string& at) {
  ASSERT_TRUE(j.contains("aligned_burst_worst_case")) << at;
  EXPECT_NE(j["burst"]["models"].get<std::string>().find("aligned"), std::string::npos) << at;
  EXPECT_EQ(j["aligned_burst_worst_case"], j["burst"]) << at;
  bool any_reshape = false, all_same = true;
  const std::string first = j["points"][0]["act_on"]["verdict"];
  for (const auto& p : j["points"]) {
    EXPECT_EQ(p["act_on"]["verdict"], p["as_built"]["action"]) << at << " M = " << p["seq_len"];
    any_reshape |= p["act_on"]["verdict"] == "reshape";
    all_same &= p["act_on"]["verdict"] == first;
  }
  EXPECT_EQ(j["act_on"]["verdict"] == "reshape", any_reshape) << at;
  if (all_same) EXPECT_EQ(j["act_on"]["verdict"], first) << at;
}

TEST(PlanVerdicts, AttnJsonTopLevelAndPointsDoNotContradict) {
  int reshapes = 0, keeps = 0;
  for (const std::string args :
       {std::string(), " --platform " + paper_platform(), std::string(" --sigma-us 0.05 --seq 1024 2048 65536"),
        " --platform " + paper_platform() + " --sigma-us 0.05 --seq 256 65536"}) {
    const auto r = run_cli("plan attn --json" + args);
    ASSERT_EQ(r.code, 0) << args << ": " << r.err;
    const auto j = nlohmann::json::parse(r.out);
    expect_levels_agree(j, args);
    for (const auto& p : j["points"]) (p["act_on"]["verdict"] == "reshape" ? reshapes : keeps)++;
  }
  EXPECT_GT(reshapes, 0);  // both verdicts are exercised
  EXPECT_GT(keeps, 0);
  const auto all = nlohmann::json::parse(run_cli("plan --json").out);
  for (const auto& w : all["attention"]) expect_levels_agree(w, w["name"]);
}

// Verdict values are "keep" or "reshape" everywhere in the plan's JSON; "piggyback" in the text only
// as "piggybacked Combine" (the fused kernel's issue mode).
void expect_verdict_words(const nlohmann::json& j, const std::string& path) {
  if (j.is_array()) {
    for (std::size_t i = 0; i < j.size(); ++i) expect_verdict_words(j[i], path + "[" + std::to_string(i) + "]");
  } else if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      const std::string& k = it.key();
      if ((k == "action" || k == "verdict" || k.size() > 7 && k.substr(k.size() - 7) == "_action") && it->is_string())
        EXPECT_TRUE(*it == "keep" || *it == "reshape") << path << "." << k << " = " << *it;
      expect_verdict_words(*it, path + "." + k);
    }
  }
}

TEST(PlanVerdicts, OneWordPerMeaning) {
  for (const std::string cmd : {std::string("plan --json"), std::string("plan attn --json"), "plan --json --platform " + paper_platform()})
    expect_verdict_words(nlohmann::json::parse(run_cli(cmd).out), cmd);
  for (const char* cmd : {"plan", "plan attn"}) {
    const std::string out = run_cli(cmd).out;
    for (std::size_t at = out.find("piggyback"); at != std::string::npos; at = out.find("piggyback", at + 1))
      EXPECT_EQ(out.compare(at, 20, "piggybacked Combine:"), 0) << cmd << ": " << out.substr(at, 40);
  }
}

// The header's R is R(K), the rate G*, q_peak0 and the simulations use (Platform::drain_rate_at).
TEST(PlanVerdicts, HeaderRateIsTheRateTheFiguresUse) {
  const xstage::model::Platform p = xstage::model::load_platform_or_default("");
  const auto r = run_cli("plan");
  ASSERT_EQ(r.code, 0) << r.err;
  std::smatch m;
  const std::string header = lines_of(r.out).front();
  ASSERT_TRUE(std::regex_search(header, m, std::regex(R"(K = (\d+), R\(K=(\d+)\) = ([0-9.]+) GB/s)"))) << header;
  const int k = std::stoi(m[1]);
  EXPECT_EQ(std::stoi(m[2]), k);
  const double used = p.drain_rate_at(k) / 1e9;
  EXPECT_NEAR(std::stod(m[3]), used, 0.05 + 1e-9) << header;
  const auto attn = nlohmann::json::parse(run_cli("plan attn --json").out);
  EXPECT_NEAR(attn["burst"]["drain_rate_gbps"].get<double>(), used, 1e-9);
  EXPECT_NEAR(attn["drain_rate_gbps"].get<double>(), used, 1e-9);
  const auto all = nlohmann::json::parse(run_cli("plan --json").out);
  EXPECT_NEAR(all["drain_rate_gbps"].get<double>(), used, 1e-9);
  EXPECT_NEAR(all["attention"][0]["burst"]["drain_rate_gbps"].get<double>(), used, 1e-9);
  // The MoE eq. 12-14 columns use the same R(K): the header names no other rate.
  for (const auto& row : all["moe"]) EXPECT_NEAR(row["drain_rate_gbps"].get<double>(), used, 1e-9) << row["name"];
  EXPECT_EQ(header.find("nominal R"), std::string::npos) << header;
  // `plan attn` prints the same R(K) in its first line.
  const std::string attn_text = run_cli("plan attn").out;
  ASSERT_TRUE(std::regex_search(attn_text, m, std::regex(R"(R\(K=\d+\) = ([0-9.]+) GB/s)"))) << attn_text;
  EXPECT_NEAR(std::stod(m[1]), used, 0.05 + 1e-9);
}

}  // namespace
