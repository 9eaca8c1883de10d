// Arguments and text: every option takes effect or is refused (the kOptionNeeds table), numbers within
// the caps input files apply, user data echoed bounded and escaped on one line, help before checks,
// stray tokens named, records CSV with a byte order mark or CRLF blank lines read.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "cli_fixtures.hpp"
#include "cli_runner.hpp"
#include "xstage/model/records.hpp"
#include <nlohmann/json.hpp>

namespace fs = std::filesystem;
using xstage::test::CliRun;
using xstage::test::run_cli;

namespace {

// Exit 2, one line under 600 bytes, no raw control byte, every fragment present.
void expect_clean_refusal(const CliRun& r, const std::string& what, const std::vector<std::string>& fragments = {}) {
  EXPECT_EQ(r.code, 2) << what << "\nstderr: " << r.err.substr(0, 600);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << what << "\nstderr: " << r.err.substr(0, 600);
  EXPECT_LT(r.err.size(), 600u) << what;
  for (char c : r.err.substr(0, r.err.size() - 1))
    EXPECT_FALSE(static_cast<unsigned char>(c) < 0x20 || c == 0x7F) << what << ": raw control byte " << int(c);
  EXPECT_EQ(r.err.find("\xE2\x80\xAE"), std::string::npos) << what << ": raw right-to-left override";
  for (const auto& f : fragments) EXPECT_NE(r.err.find(f), std::string::npos) << what << ": \"" << f << "\" missing: " << r.err;
}

std::string quoted(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

TEST(CliText, OptionsThatNeedAnotherAreRefusedAlone) {
  expect_clean_refusal(run_cli("simulate --producers 4 --bytes-per-producer 1024 --bursts 4 --latency-us 3"),
                       "--latency-us without --completion-coupled", {"--latency-us", "--completion-coupled"});
  EXPECT_EQ(run_cli("simulate --producers 4 --bytes-per-producer 1024 --bursts 4 --latency-us 3 --completion-coupled").code, 0);
  expect_clean_refusal(run_cli("simulate --producers 4 --bytes-per-producer 1024 --bursts 4 --force"),
                       "--force without --trace", {"--force", "--trace"});
}

TEST(CliText, NumbersWithinTheCapsOfTheFiles) {
  const std::string m = "model --producers 4 --bytes-per-producer ";
  expect_clean_refusal(run_cli(m + "1e308"), "1e308 bytes", {"--bytes-per-producer"});
  expect_clean_refusal(run_cli(m + "4e-320"), "a subnormal", {"--bytes-per-producer"});
  expect_clean_refusal(run_cli("simulate --producers 4 --bytes-per-producer 1024 --bursts 4 --t-iss0-us 4e-320"),
                       "a subnormal duration", {"--t-iss0-us"});
  expect_clean_refusal(run_cli("model --producers 2147483647 --bytes-per-producer 1024"), "2^31-1 producers", {"--producers"});
  expect_clean_refusal(run_cli("model --producers 1000001 --bytes-per-producer 1024"), "1e6+1 producers", {"--producers"});
  EXPECT_EQ(run_cli("model --producers 1000000 --bytes-per-producer 1024").code, 0);
}

TEST(CliText, EchoedArgumentsAreBoundedAndEscaped) {
  const std::string hostile[] = {"\x1b[31mred\x1b]0;title\x07", "a\nb\rc", std::string(100000, '7') + "x",
                                 "caf\xE9", "\xE2\x80\xAE" "evil"};
  for (const auto& h : hostile) {
    expect_clean_refusal(run_cli("model --bytes-per-producer 1 --producers " + quoted(h)), "--producers value");
    expect_clean_refusal(run_cli("model --producers 4 --bytes-per-producer " + quoted(h)), "--bytes-per-producer value");
    expect_clean_refusal(run_cli(quoted(h) + " --x"), "unknown command");
    expect_clean_refusal(run_cli("model --producers 4 --bytes-per-producer 1 " + quoted(h)), "stray argument");
  }
}

TEST(CliText, StrayTokensAreNamedAndHelpWins) {
  expect_clean_refusal(run_cli("model --producers4 --bytes-per-producer 1"), "--producers4", {"--producers4"});
  const CliRun help = run_cli("model --help --producers x");
  EXPECT_EQ(help.code, 0) << help.err;
  EXPECT_NE(help.out.find("--producers"), std::string::npos) << help.out;
  EXPECT_EQ(run_cli("plan moe --routing x --help").code, 0);
}

class CliTextFiles : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(testing::TempDir()) / ("xstage_cli_text_" + std::to_string(::getpid()) + "_" +
                                           testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  fs::path dir_;
};

TEST_F(CliTextFiles, RecordsWithByteOrderMarkAndCrlfBlankLines) {
  const fs::path plain = dir_ / "plain.csv";
  xstage::test::write_fit_records(plain);
  std::ifstream in(plain);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string crlf;
  for (char c : text) crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
  const fs::path bom = dir_ / "bom.csv";
  std::ofstream(bom, std::ios::binary) << "\xEF\xBB\xBF" << crlf << "\r\n\r\n";
  const CliRun r = run_cli("fit --records " + bom.string() + " --out " + (dir_ / "out.json").string());
  EXPECT_EQ(r.code, 0) << r.err;
}

TEST_F(CliTextFiles, RecordsWithoutFloorPointsNameTheFile) {
  const fs::path rec = dir_ / "iso.csv";
  std::ofstream(rec) << "mode,target,producers,bytes_per_producer,gap_us,t_iss_us,t_period_us\n"
                        "isolated,local,64,32768,0,3.5,\n";
  expect_clean_refusal(run_cli("fit --records " + rec.string() + " --out " + (dir_ / "out.json").string()),
                       "records without floor points", {rec.string()});
  EXPECT_FALSE(fs::exists(dir_ / "out.json"));
}

TEST_F(CliTextFiles, FitNamesArePrintable) {
  const fs::path rec = dir_ / "rec.csv";
  xstage::test::write_fit_records(rec);
  for (const std::string& name : {std::string("\x1b[2J"), std::string("a\nb"), std::string("r\xE2\x80\xAEl"),
                                  std::string(200, 'n')}) {
    expect_clean_refusal(run_cli("fit --records " + rec.string() + " --out " + (dir_ / "o.json").string() + " --name " + quoted(name)),
                         "fit --name", {"--name"});
    EXPECT_FALSE(fs::exists(dir_ / "o.json"));
  }
}


// Numbers on plan's command line take the file loaders' caps: no wrapped counts, no inf in the output.
TEST(CliText, PlanNumbersWithinTheCapsOfTheFiles) {
  expect_clean_refusal(run_cli("plan attn --seq 9223372036854775807"), "--seq 2^63-1", {"--seq", "67108864"});
  expect_clean_refusal(run_cli("plan attn --seq 8192 --latency-us 1e308"), "--latency-us 1e308", {"--latency-us"});
  expect_clean_refusal(run_cli("plan attn --seq 8192 --block-m 2147483647"), "--block-m 2^31-1", {"--block-m", "4096"});
  expect_clean_refusal(run_cli("plan attn --seq 8192 --out-bytes 2147483647"), "--out-bytes 2^31-1", {"--out-bytes"});
  expect_clean_refusal(run_cli("plan attn --seq 8192 --sigma-us 2147483647"), "--sigma-us 2^31-1", {"--sigma-us"});
  expect_clean_refusal(run_cli("plan moe --t-l1-us 3 --t-l2-us 2 --n1 8 --n2 8 --h-inter 2048 --tile-bytes 1e308"),
                       "--tile-bytes 1e308", {"--tile-bytes"});
  expect_clean_refusal(run_cli("plan --producers 2147483647"), "plan --producers 2^31-1", {"--producers"});
  expect_clean_refusal(run_cli("simulate --producers 16 --bytes-per-producer 32768 --gap-us 2 --bursts 6 "
                               "--completion-coupled --latency-us 1e308"),
                       "simulate --latency-us 1e308", {"--latency-us"});
  const CliRun ok = run_cli("plan attn --seq 8192 --latency-us 3");
  EXPECT_EQ(ok.code, 0) << ok.err;
  EXPECT_EQ(ok.out.find("inf"), std::string::npos) << ok.out;
}

// The recurring-burst checks simulate every producer against every other: K is capped before anything is
// allocated, naming where K came from (--producers, or the platform's largest measured K).
TEST_F(CliTextFiles, PlanRefusesAProducerCountBeyondTheSimulationLimit) {
  const auto t0 = std::chrono::steady_clock::now();
  expect_clean_refusal(run_cli("plan --producers 100000"), "plan --producers 1e5", {"--producers", "836"});
  std::ifstream in(std::string(XSTAGE_SOURCE_DIR) + "/platforms/h200_x2_measured.json");
  nlohmann::json p = nlohmann::json::parse(in);
  p["issue_floor"][0]["producers"] = 1000000;
  const fs::path file = dir_ / "platform.json";
  std::ofstream(file) << p.dump();
  expect_clean_refusal(run_cli("plan --platform " + file.string()), "a platform K of 1e6",
                       {file.string(), "issue_floor", "producers", "--producers"});
  expect_clean_refusal(run_cli("plan attn --platform " + file.string()), "plan attn, a platform K of 1e6",
                       {file.string(), "producers"});
  EXPECT_EQ(run_cli("plan attn --seq 8192 --platform " + file.string() + " --producers 132").code, 0);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 10.0);
}

// A records file is capped at kMaxRecords rows, refused at the first row past it (fit and fidelity).
TEST_F(CliTextFiles, RecordsFileBeyondTheRowLimitIsRefused) {
  const fs::path small = dir_ / "small.csv";
  xstage::test::write_fit_records(small);
  std::ifstream in(small);
  std::string header, row;
  std::getline(in, header);
  std::getline(in, row);
  const fs::path big = dir_ / "big.csv";
  {
    std::ofstream out(big);
    out << header << "\n";
    for (std::size_t i = 0; i <= xstage::model::kMaxRecords; ++i) out << row << "\n";
  }
  const auto t0 = std::chrono::steady_clock::now();
  expect_clean_refusal(run_cli("fit --records " + big.string() + " --out " + (dir_ / "o.json").string()),
                       "fit, 10001 records", {big.string(), "10000 records"});
  expect_clean_refusal(run_cli("fidelity --records " + big.string()), "fidelity, 10001 records", {big.string(), "10000"});
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
  EXPECT_FALSE(fs::exists(dir_ / "o.json"));
}

// A subnormal value in a records file divides to inf: refused naming the line and the column.
TEST_F(CliTextFiles, SubnormalRecordValuesAreRefused) {
  const fs::path rec = dir_ / "rec.csv";
  std::ofstream(rec) << "mode,target,producers,bytes_per_producer,gap_us,t_iss_us,t_period_us\n"
                        "periodic,remote,64,32768,0,4e-320,5\n";
  expect_clean_refusal(run_cli("fidelity --records " + rec.string()), "t_iss_us 4e-320",
                       {rec.string() + ":2", "t_iss_us", "subnormal"});
}

// A Ulysses sweep point of 1e6 producers would simulate for hours: refused naming the file and the field.
TEST_F(CliTextFiles, UlyssesPointBeyondTheSimulationLimitIsRefused) {
  std::ifstream in(std::string(XSTAGE_SOURCE_DIR) + "/results/h200-x2/ulysses/ulysses.json");
  nlohmann::json u = nlohmann::json::parse(in);
  u["points"][0]["model"]["producers"] = 1000000;
  const fs::path file = dir_ / "ulysses.json", rec = dir_ / "rec.csv";
  std::ofstream(file) << u.dump();
  xstage::test::write_fit_records(rec);
  const auto t0 = std::chrono::steady_clock::now();
  expect_clean_refusal(run_cli("fidelity --records " + rec.string() + " --ulysses " + file.string()),
                       "model.producers 1e6", {file.string(), "points[0].model.producers"});
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
}

}  // namespace
