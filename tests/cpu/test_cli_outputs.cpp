// Output files and stdout of the CLI: created without replacing anything (atomically, no
// check-then-write race), --force replaces only regular files, no temporary left by SIGINT/SIGTERM,
// the umask respected, every write checked (a full device fails the command), empty paths refused.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "cli_fixtures.hpp"
#include "cli_runner.hpp"

namespace fs = std::filesystem;
using xstage::test::CliRun;
using xstage::test::run_cli;

namespace {

class CliOutputs : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(testing::TempDir()) / ("xstage_cli_outputs_" + std::to_string(::getpid()) + "_" +
                                           testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    records_ = (dir_ / "records.csv").string();
    xstage::test::write_fit_records(records_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string fit(const std::string& out, const std::string& extra = "") const {
    return "fit --records " + records_ + " --out '" + out + "'" + extra;
  }
  // Temporaries of the atomic writes (".NAME.tmp.XXXXXX") left in the folder.
  std::vector<std::string> temporaries() const {
    std::vector<std::string> t;
    for (const auto& e : fs::directory_iterator(dir_))
      if (e.path().filename().string().find(".tmp.") != std::string::npos) t.push_back(e.path().filename().string());
    return t;
  }
  static std::string slurp(const std::string& p) {
    std::ifstream f(p, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  }

  fs::path dir_;
  std::string records_;
};

void expect_refused(const CliRun& r, const std::string& fragment, const std::string& what) {
  EXPECT_EQ(r.code, 2) << what << "\nstderr: " << r.err;
  EXPECT_NE(r.err.find(fragment), std::string::npos) << what << "\nstderr: " << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << what << "\nstderr: " << r.err;
}

TEST_F(CliOutputs, ForceReplacesOnlyRegularFiles) {
  // A FIFO.
  const std::string fifo = path("out.fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  expect_refused(run_cli(fit(fifo, " --force")), "not a regular file", "--force over a FIFO");
  struct stat st {};
  ASSERT_EQ(::lstat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode)) << "the FIFO was replaced";
  // Device nodes (copies of /dev/null and /dev/full), where this user may create them.
  for (const auto& [name, minor] : {std::pair<std::string, unsigned>{"null", 3}, {"full", 7}}) {
    const std::string dev = path("dev_" + name);
    if (::mknod(dev.c_str(), S_IFCHR | 0666, makedev(1, minor)) != 0) continue;
    expect_refused(run_cli(fit(dev, " --force")), "not a regular file", "--force over a copy of /dev/" + name);
    ASSERT_EQ(::lstat(dev.c_str(), &st), 0);
    EXPECT_TRUE(S_ISCHR(st.st_mode)) << "the device node /dev/" << name << " copy was replaced";
  }
  // A symlink to a regular file: neither the link nor its target changes.
  const std::string target = path("target.json"), link = path("link.json");
  std::ofstream(target) << "keep\n";
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  expect_refused(run_cli(fit(link, " --force")), "symbolic link", "--force over a symlink");
  ASSERT_EQ(::lstat(link.c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode)) << "the symlink was replaced";
  EXPECT_EQ(slurp(target), "keep\n");
  // A regular file: replaced.
  const std::string regular = path("regular.json");
  std::ofstream(regular) << "old\n";
  const CliRun ok = run_cli(fit(regular, " --force"));
  EXPECT_EQ(ok.code, 0) << ok.err;
  EXPECT_NE(slurp(regular), "old\n");
  EXPECT_TRUE(temporaries().empty());
}

TEST_F(CliOutputs, DanglingSymlinkIsNeverReplacedOrFollowed) {
  const std::string link = path("dangling.json"), target = path("nowhere.json");
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  expect_refused(run_cli(fit(link)), "already exists", "a dangling symlink without --force");
  expect_refused(run_cli(fit(link, " --force")), "symbolic link", "a dangling symlink with --force");
  struct stat st {};
  ASSERT_EQ(::lstat(link.c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  EXPECT_FALSE(fs::exists(target)) << "the write followed the dangling link";
}

TEST_F(CliOutputs, ConcurrentWritersWithoutForceCreateOnce) {
  // Pairs of writers race for one name: exactly one of each pair may succeed (the other finds it).
  for (int pair = 0; pair < 12; ++pair) {
    const std::string out = path("race_" + std::to_string(pair) + ".json");
    CliRun a{}, b{};
    std::thread ta([&] { a = run_cli(fit(out)); });
    std::thread tb([&] { b = run_cli(fit(out)); });
    ta.join();
    tb.join();
    EXPECT_EQ((a.code == 0) + (b.code == 0), 1) << "pair " << pair << ": " << a.code << " / " << b.code << "\n"
                                               << a.err << b.err;
    EXPECT_TRUE(a.code == 0 || a.err.find("already exists") != std::string::npos) << a.err;
    EXPECT_TRUE(b.code == 0 || b.err.find("already exists") != std::string::npos) << b.err;
  }
  EXPECT_TRUE(temporaries().empty());
}

TEST_F(CliOutputs, UmaskIsRespected) {
  for (const auto& [mask, mode] : {std::pair<std::string, unsigned>{"077", 0600}, {"022", 0644}, {"002", 0664}}) {
    const std::string out = path("umask_" + mask + ".json");
    const std::string cmd = "umask " + mask + "; " + XSTAGE_CLI_PATH + " " + fit(out) + " >/dev/null 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    struct stat st {};
    ASSERT_EQ(::stat(out.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, mode) << "umask " << mask;
  }
}

TEST_F(CliOutputs, FullStdoutFailsTheCommand) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  for (const std::string& args :
       {std::string("model --producers 132 --bytes-per-producer 32768 --gap-us 13.86"),
        std::string("model --producers 132 --bytes-per-producer 32768 --gap-us 13.86 --json"),
        std::string("simulate --producers 4 --bytes-per-producer 1024 --bursts 4"), std::string("plan"),
        fit(path("full.json"))}) {
    const std::string cmd = std::string(XSTAGE_CLI_PATH) + " " + args + " >/dev/full 2>" + path("err.txt");
    const int status = std::system(cmd.c_str());
    ASSERT_TRUE(WIFEXITED(status)) << cmd;
    EXPECT_NE(WEXITSTATUS(status), 0) << "lost output reported as success: " << cmd;
    const std::string err = slurp(path("err.txt"));
    EXPECT_NE(err.find("cannot write the output to stdout"), std::string::npos) << err;
  }
  // The failed command leaves nothing behind: the file fit created is removed and named.
  EXPECT_FALSE(fs::exists(path("full.json")));
  EXPECT_NE(slurp(path("err.txt")).find("removed"), std::string::npos);
  // A file it replaced with --force cannot come back, and is left as written.
  std::ofstream(path("old.json")) << "{}\n";
  const std::string cmd = std::string(XSTAGE_CLI_PATH) + " " + fit(path("old.json"), " --force") + " >/dev/full 2>/dev/null";
  EXPECT_NE(std::system(cmd.c_str()), 0);
  EXPECT_TRUE(fs::exists(path("old.json")));
}

TEST_F(CliOutputs, EmptyOutputPathsAreRefused) {
  expect_refused(run_cli("fidelity --records " + records_ + " --out ''"), "--out", "fidelity --out ''");
  expect_refused(run_cli(fit("")), "--out", "fit --out ''");
  expect_refused(run_cli("simulate --producers 4 --bytes-per-producer 1024 --bursts 4 --trace ''"), "--trace",
                 "simulate --trace ''");
  EXPECT_TRUE(temporaries().empty());
}

TEST_F(CliOutputs, SignalsLeaveNoTemporary) {
  // A timeline of about 20 MB: the signal is sent at times spread over the last part of a run, where
  // the temporary is written; whenever it lands, no temporary may stay behind.
  const std::string out = path("timeline.json");
  const std::string args = "simulate --producers 128 --bytes-per-producer 4096 --bursts 340 --trace " + out;
  const auto start_cli = [&] {
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::execl("/bin/sh", "sh", "-c", (std::string("exec ") + XSTAGE_CLI_PATH + " " + args + " >/dev/null 2>&1").c_str(),
              static_cast<char*>(nullptr));
      ::_exit(127);
    }
    return pid;
  };
  const auto t0 = std::chrono::steady_clock::now();
  int status = 0;
  ::waitpid(start_cli(), &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  const auto full = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
  int trial = 0;
  for (int sig : {SIGTERM, SIGINT}) {
    for (int back_ms = 240; back_ms >= 30; back_ms -= 30) {
      fs::remove(out);
      const pid_t pid = start_cli();
      ASSERT_GT(pid, 0);
      std::this_thread::sleep_for(std::max(full - std::chrono::milliseconds(back_ms), std::chrono::milliseconds(10)));
      ::kill(pid, sig);
      ::waitpid(pid, &status, 0);
      ++trial;
      const auto left = temporaries();
      EXPECT_TRUE(left.empty()) << "signal " << sig << " " << back_ms << " ms before the end left " << left[0];
    }
  }
  EXPECT_EQ(trial, 16);
}

}  // namespace
