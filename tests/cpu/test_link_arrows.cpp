// The link-graph check of cmake/XstageLinkArrows.cmake (run at every configure) can fail: over fake graphs
// (tests/cpu/link_arrows_check.cmake), an upward arrow, direct or transitive, stops configuring and the
// message names the path; the real graph's shape passes.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <string>
#include <sys/wait.h>

namespace {

struct CaseRun {
  int status;
  std::string output;
};

CaseRun run_case(const std::string& name) {
  const std::string cmd = std::string("\"") + XSTAGE_CMAKE_COMMAND + "\" -DCASE=" + name + " -P \"" +
                          XSTAGE_SOURCE_DIR + "/tests/cpu/link_arrows_check.cmake\" 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return {-1, "popen failed"};
  std::string out;
  std::array<char, 4096> buf;
  while (std::fgets(buf.data(), int(buf.size()), p) != nullptr) out += buf.data();
  const int st = pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

}  // namespace

TEST(LinkArrows, TheRealGraphsShapePasses) {
  const CaseRun r = run_case("good");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("all point down"), std::string::npos) << r.output;
}

TEST(LinkArrows, AnUpwardArrowFailsAndIsNamed) {
  const std::pair<const char*, const char*> cases[] = {
      {"kernel_links_sim", "xstage_moe -> xstage_sim"},
      {"kernel_reaches_testing", "xstage_probe -> xstage_comm -> xstage_testing"},
      {"kernel_reaches_bench", "xstage_attn -> helper_a -> helper_b -> xstage_bench_moe"},
      {"capi_links_cli", "xstage_capi -> xstage_planner -> xstage_cli_core"},
      {"capi_reaches_testing", "xstage_capi -> xstage_moe -> xstage_bench_moe"},
  };
  for (const auto& [name, path] : cases) {
    const CaseRun r = run_case(name);
    EXPECT_NE(r.status, 0) << name << ": " << r.output;
    EXPECT_NE(r.output.find("a library arrow points up"), std::string::npos) << name << ": " << r.output;
    EXPECT_NE(r.output.find(path), std::string::npos) << name << ": expected " << path << " in\n" << r.output;
  }
}
