// Arguments and text: every option takes effect or is refused (the kOptionNeeds table), numbers within
// the caps input files apply, user data echoed bounded and escaped on one line, help before checks,
// stray tokens named, records CSV with a byte order mark or CRLF blank lines read.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "cli_fixtures.hpp"
#include "cli_runner.hpp"
#include "xstage/model/records.hpp"
#include <nlohmann/json.hpp>

namespace fs = std::filesystem;
using xstage::test::CliRun;
using xstage::test::run_cli;

namespace {

// True when `s` holds a raw C1 control (U+0080..U+009F) or a bidirectional override, isolate or mark.
bool has_terminal_active(const std::string& s) {
  for (std::size_t i = 0; i + 1 < s.size(); ++i) {
    const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
    if (b(i) == 0xC2 && b(i + 1) >= 0x80 && b(i + 1) <= 0x9F) return true;
    if (i + 2 < s.size() && b(i) == 0xE2 && b(i + 1) == 0x80 && ((b(i + 2) >= 0xAA && b(i + 2) <= 0xAE) || b(i + 2) == 0x8E || b(i + 2) == 0x8F))
      return true;
    if (i + 2 < s.size() && b(i) == 0xE2 && b(i + 1) == 0x81 && b(i + 2) >= 0xA6 && b(i + 2) <= 0xA9) return true;
    if (b(i) == 0xD8 && b(i + 1) == 0x9C) return true;
  }
  return false;
}

// Exit 2, one line under 600 bytes, no raw control byte, every fragment present.
void expect_clean_refusal(const CliRun& r, const std::string& what, const std::vector<std::string>& fragments = {}) {
  EXPECT_EQ(r.code, 2) << what << "\nstderr: " << r.err.substr(0, 600);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << what << "\nstderr: " << r.err.substr(0, 600);
  EXPECT_LT(r.err.size(), 600u) << what;
  for (char c : r.err.substr(0, r.err.size() - 1))
    EXPECT_FALSE(static_cast<unsigned char>(c) < 0x20 || c == 0x7F) << what << ": raw control byte " << int(c);
  EXPECT_EQ(r.err.find("\xE2\x80\xAE"), std::string::npos) << what << ": raw right-to-left override";
  EXPECT_FALSE(has_terminal_active(r.err)) << what << ": raw C1 control or bidirectional mark";
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

// A simulation past its simulated-time limit names the arguments that sized it.
TEST(CliText, ScheduleTimeLimitNamesTheArguments) {
  expect_clean_refusal(run_cli("plan attn --seq 67108864 --sigma-us 1000000 --block-n 1"), "a Q-loop gap of hours",
                       {"time limit", "--seq", "--sigma-us", "--block-n"});
  expect_clean_refusal(run_cli("simulate --producers 16 --bytes-per-producer 32768 --gap-us 1000000 --bursts 100000"),
                       "bursts for a day", {"time limit", "--gap-us", "--bursts"});
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

// A record is sized before it is simulated: K producers against each other over the fidelity's bursts, refused
// naming the file and the record; a record of billions of bytes per producer is simulated as long as it takes
// (the time limit follows the record's size), not refused by a fixed time limit.
TEST_F(CliTextFiles, FidelityRecordsAreSizedAndNamed) {
  const std::string records = std::string(XSTAGE_SOURCE_DIR) + "/results/h200-x2/calibration/records.csv";
  std::ifstream in(records);
  std::string header, first, rest, line;
  std::getline(in, header);
  std::getline(in, first);
  while (std::getline(in, line)) rest += line + "\n";
  auto with_first = [&](int column, const std::string& value, const std::string& name) {
    std::vector<std::string> cols;
    std::stringstream ss(first);
    for (std::string c; std::getline(ss, c, ',');) cols.push_back(c);
    cols.at(column) = value;
    std::string row;
    for (const auto& c : cols) row += (row.empty() ? "" : ",") + c;
    const fs::path f = dir_ / name;
    std::ofstream(f) << header << "\n" << row << "\n" << rest;
    return f.string();
  };
  const auto t0 = std::chrono::steady_clock::now();
  const std::string many = with_first(2, "100000", "many_producers.csv");
  expect_clean_refusal(run_cli("fidelity --records " + many), "a record of 1e5 producers",
                       {many, "record 1", "100000 producers", "647 producers"});
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 10.0);
  const CliRun big = run_cli("fidelity --json --records " + with_first(3, "4294967428", "big_bytes.csv"));
  ASSERT_EQ(big.code, 0) << big.err;
  const auto j = nlohmann::json::parse(big.out);
  ASSERT_TRUE(j.contains("points")) << big.out.substr(0, 400);
  EXPECT_EQ(j["points"][0]["bytes_per_producer"].get<double>(), 4294967428.0);
  // 16 producers x 4.3 GB at the platform's drain: about 0.16 s per burst, 40 bursts past the old 1 s limit.
  EXPECT_GT(j["points"][0]["sim_t_iss_us"].get<double>(), 1e5);
}

// fidelity --folds takes 2..10 and says so under its own name.
TEST(CliText, FidelityFoldsRange) {
  const std::string records = std::string(XSTAGE_SOURCE_DIR) + "/results/h200-x2/calibration/records.csv";
  for (const char* folds : {"1", "11", "+70"})
    expect_clean_refusal(run_cli("fidelity --cross-validate --records " + records + " --folds " + folds),
                         std::string("--folds ") + folds, {"--folds", "[2, 10]"});
}

// A fold whose fit cannot predict its held-out part (leaving out the only K with isolated records leaves no
// capacity to fit) is listed as failed with the reason; the command still reports the other folds.
TEST_F(CliTextFiles, CrossValidationListsAFoldThatCannotPredict) {
  std::ifstream in(std::string(XSTAGE_SOURCE_DIR) + "/tests/fuzz/corpus/records", std::ios::binary);
  std::string seed((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const fs::path records = dir_ / "records.csv";
  std::ofstream(records, std::ios::binary) << seed.substr(1);  // the fuzz seed without its loader selector
  const CliRun r = run_cli("fidelity --json --cross-validate --folds 10 --records " + records.string());
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  bool failed_fold = false;
  for (const auto& scheme : j.at("cross_validation").at("schemes"))
    for (const auto& f : scheme.value("failed_folds", nlohmann::json::array()))
      failed_fold |= f.dump().find("capacity") != std::string::npos;
  EXPECT_TRUE(failed_fold) << r.out.substr(0, 2000);
}

// paper on a platform where a published ratio's divisor is 0 (G* = 0 at a drain of 1e6 GB/s) prints no inf: the
// row is not predicted, and says why.
TEST_F(CliTextFiles, PaperRowWithAZeroDivisorIsNotPredicted) {
  std::ifstream in(std::string(XSTAGE_SOURCE_DIR) + "/platforms/paper_8gpu_148sm.json");
  nlohmann::json p = nlohmann::json::parse(in);
  p["drain_rate_gbps"] = 1e6;
  const fs::path file = dir_ / "fast.json";
  std::ofstream(file) << p.dump();
  const CliRun text = run_cli("paper --only knee --platform " + file.string());
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_EQ(text.out.find(" inf"), std::string::npos) << text.out;
  const CliRun js = run_cli("paper --only knee --json --platform " + file.string());
  ASSERT_EQ(js.code, 0) << js.err;
  bool found = false;
  const nlohmann::json report = nlohmann::json::parse(js.out);
  for (const auto& row : report.at("rows"))
    if (row["id"] == "s4.3.qloop_over_g_star") {
      found = true;
      EXPECT_TRUE(!row.contains("predicted") || row["predicted"].is_null()) << row.dump();
      EXPECT_NE(row.value("missing", "").find("not defined on this platform"), std::string::npos) << row.dump();
    }
  EXPECT_TRUE(found);
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

// plan moe's word options and the kernel's name echo user text escaped and bounded; --shape is named as given.
TEST_F(CliTextFiles, PlanMoeEchoesEscapedAndNamesTheOptionGiven) {
  const std::string hostile[] = {"\x1b[31mRED\x1b[0m", "a\xC2\x9B" "31mb", "a\nb", std::string(120000, 'L')};
  for (const auto& h : hostile) {
    expect_clean_refusal(run_cli("plan moe --shape deepseek-v3 --precision " + quoted(h)), "--precision", {"--precision"});
    expect_clean_refusal(run_cli("plan moe --shape deepseek-v3 --simulate --combine " + quoted(h)), "--combine", {"--combine"});
    expect_clean_refusal(run_cli("plan moe --shape deepseek-v3 --simulate --routing " + quoted(h)), "--routing", {"routing"});
    expect_clean_refusal(run_cli("plan moe --shape " + quoted(h)), "--shape", {"--shape"});
    expect_clean_refusal(run_cli("plan moe --kernel " + quoted(h)), "--kernel", {"--kernel"});
    expect_clean_refusal(run_cli(quoted(h)), "a command");
  }
  std::ifstream in(std::string(XSTAGE_SOURCE_DIR) + "/kernels/moe/builtin/deepseek-v3.json");
  nlohmann::json k = nlohmann::json::parse(in);
  for (const std::string name : {"\x1b[31mK\x1b[0m", "a\xC2\x9B" "31mb", "r\xE2\x80\xAEl", "b\x07" "el"}) {
    k["name"] = name;
    k["description"] = "d" + name;
    const fs::path file = dir_ / "kernel.json";
    std::ofstream(file, std::ios::trunc) << k.dump();
    const CliRun r = run_cli("plan moe --kernel " + file.string());
    ASSERT_EQ(r.code, 0) << r.err;
    for (char c : r.out) EXPECT_FALSE(static_cast<unsigned char>(c) < 0x20 && c != '\n') << "raw control byte " << int(c);
    EXPECT_FALSE(has_terminal_active(r.out)) << r.out;
  }
}

// A platform's name with a C1 control sequence introducer is shown escaped.
TEST_F(CliTextFiles, PlatformNameWithC1ControlsIsEscaped) {
  std::ifstream in(std::string(XSTAGE_SOURCE_DIR) + "/platforms/h200_x2_measured.json");
  nlohmann::json p = nlohmann::json::parse(in);
  p["name"] = "a\xC2\x9B" "31mb";
  const fs::path file = dir_ / "platform.json";
  std::ofstream(file) << p.dump();
  for (const std::string cmd : {"plan attn", "model --producers 132 --bytes-per-producer 32768 --gap-us 2"}) {
    const CliRun r = run_cli(cmd + " --platform " + file.string());
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_FALSE(has_terminal_active(r.out)) << cmd;
    EXPECT_NE(r.out.find("a\\u009B31mb"), std::string::npos) << r.out.substr(0, 300);
  }
}

}  // namespace
