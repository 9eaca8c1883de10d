// The in-process entry point (cli_run.hpp) behaves as the xstage binary: same stdout, stderr and exit
// code, no state carried from one call to the next, safe on several threads at once.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "cli_run.hpp"
#include "cli_runner.hpp"

namespace {

struct InProcess {
  int code;
  std::string out, err;
};

InProcess run_in_process(const std::vector<std::string>& args) {
  InProcess r;
  r.code = xstage::cli::run_cli(args, r.out, r.err);
  return r;
}

TEST(CliInProcess, PlanJsonEqualsSubprocessStdout) {
  const auto sub = xstage::test::run_cli("plan --json");
  ASSERT_EQ(sub.code, 0) << sub.err;
  const InProcess in = run_in_process({"plan", "--json"});
  EXPECT_EQ(in.code, 0) << in.err;
  EXPECT_EQ(in.out, sub.out);
  EXPECT_EQ(in.err, sub.err);
}

TEST(CliInProcess, HumanOutputAndHelpEqualSubprocess) {
  for (const std::string args : {"plan", "model --producers 132 --bytes-per-producer 32768 --gap-us 2", "--help",
                                 "plan moe --help"}) {
    const auto sub = xstage::test::run_cli(args);
    std::vector<std::string> argv;
    std::size_t pos = 0;
    while (pos < args.size()) {
      const std::size_t sp = args.find(' ', pos);
      argv.push_back(args.substr(pos, sp == std::string::npos ? std::string::npos : sp - pos));
      pos = sp == std::string::npos ? args.size() : sp + 1;
    }
    const InProcess in = run_in_process(argv);
    EXPECT_EQ(in.code, sub.code) << args;
    EXPECT_EQ(in.out, sub.out) << args;
    EXPECT_EQ(in.err, sub.err) << args;
  }
}

TEST(CliInProcess, BadInputReturnsTwoWithMessageAndNoLeftoverState) {
  const InProcess bad = run_in_process({"model", "--producers", "-3", "--bytes-per-producer", "1"});
  EXPECT_EQ(bad.code, 2);
  EXPECT_TRUE(bad.out.empty());
  EXPECT_NE(bad.err.find("--producers"), std::string::npos) << bad.err;
  const InProcess unknown = run_in_process({"nonsense"});
  EXPECT_EQ(unknown.code, 2);
  EXPECT_NE(unknown.err.find("unknown command"), std::string::npos) << unknown.err;
  const InProcess none = run_in_process({});
  EXPECT_EQ(none.code, 2) << none.err;
  // Options of one call do not leak into the next: the second call sees the defaults again.
  const InProcess a = run_in_process({"plan", "--json", "--producers", "7"});
  const InProcess b = run_in_process({"plan", "--json"});
  ASSERT_EQ(a.code, 0) << a.err;
  ASSERT_EQ(b.code, 0) << b.err;
  EXPECT_NE(a.out, b.out);
  EXPECT_EQ(b.out, run_in_process({"plan", "--json"}).out);
}

TEST(CliInProcess, ConcurrentCallsKeepTheirOutputApart) {
  const std::string expect_plan = run_in_process({"plan", "--json"}).out;
  const std::string expect_model =
      run_in_process({"model", "--json", "--producers", "16", "--bytes-per-producer", "4096"}).out;
  std::vector<std::thread> threads;
  std::vector<int> ok(8, 0);
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 3; ++i) {
        const InProcess r = t % 2 ? run_in_process({"plan", "--json"})
                                  : run_in_process({"model", "--json", "--producers", "16", "--bytes-per-producer", "4096"});
        ok[t] += r.code == 0 && r.out == (t % 2 ? expect_plan : expect_model) && r.err.empty();
      }
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 8; ++t) EXPECT_EQ(ok[t], 3) << "thread " << t;
}

}  // namespace
