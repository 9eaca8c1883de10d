// Every file loader, driven through the CLI command that loads it, with inputs made to break it:
// deeply nested, huge, binary, overflowing, non-finite, truncated, empty, not a file. Each must give
// exit code 2 (never a signal) and exactly one bounded line on stderr naming the file and the field,
// and write nothing. Also unit tests of the bounded printer (bounded_text / bounded_json) and of the
// JSON input path (parse_json_input).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "cli_runner.hpp"
#include "xstage/model/bounded_text.hpp"
#include "xstage/model/error.hpp"
#include "xstage/model/input_file.hpp"
#include "xstage/planner/input_loaders.hpp"

namespace fs = std::filesystem;
using xstage::test::CliRun;
using xstage::test::run_cli;

namespace {

std::string nested(std::size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

// Every byte value, NUL included: not JSON, not UTF-8, not CSV.
std::string binary_junk() {
  std::string s;
  for (int i = 0; i < 256; ++i) s.push_back(static_cast<char>(i));
  return s;
}

// A file format as a template whose placeholders are named by the field they fill ("@drain_rate_gbps@"),
// with a valid default for each: one field at a time gets a bad value, the rest stay valid.
struct Template {
  std::string text;
  std::map<std::string, std::string> defaults;

  std::string with(const std::string& field, const std::string& value) const {
    std::string out = text;
    for (const auto& [name, def] : defaults) {
      const std::string key = "@" + name + "@";
      const auto at = out.find(key);
      if (at != std::string::npos) out.replace(at, key.size(), name == field ? value : def);
    }
    return out;
  }
  std::string valid() const { return with("", ""); }
  // The file cut where `field`'s value starts (what an interrupted write leaves).
  std::string cut_at(const std::string& field) const {
    const std::string marked = with(field, "\x01\x02");
    return marked.substr(0, marked.find("\x01\x02"));
  }
};

const Template kPlatform{
    R"({"schema": "xstage.platform/1", "name": "fuzz", "drain_rate_gbps": @drain_rate_gbps@,
  "issue_floor": [{"producers": @issue_floor[0].producers@, "bytes_per_producer": 32768, "t_iss0_us": @issue_floor[0].t_iss0_us@}],
  "capacity": [{"producers": 16, "bytes": @capacity[0].bytes@}]}
)",
    {{"drain_rate_gbps", "700"}, {"issue_floor[0].producers", "16"}, {"issue_floor[0].t_iss0_us", "0.8"},
     {"capacity[0].bytes", "1000000"}}};

const Template kSchedule{
    R"({"schema": @schema@, "producers": [{"count": @producers[0].count@, "repeat": @producers[0].repeat@,
  "steps": [{"burst_bytes": @producers[0].steps[0].burst_bytes@}, {"compute_us": @producers[0].steps[1].compute_us@}]}]}
)",
    {{"schema", "\"xstage.schedule/1\""}, {"producers[0].count", "4"}, {"producers[0].repeat", "2"},
     {"producers[0].steps[0].burst_bytes", "32768"}, {"producers[0].steps[1].compute_us", "1.5"}}};

// 4 tokens over the 16 experts, top-2, of the built-in shape dit-moe-g2-16e2a.
const Template kRouting{
    R"({"schema": "xstage.routing/1", "tokens": @tokens@, "experts": @experts@, "top_k": @top_k@,
  "expert_ids": [@expert_ids[0]@, 1, 2, 3, 4, 5, 6, 7], "weights": [@weights[0]@, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5]}
)",
    {{"tokens", "4"}, {"experts", "16"}, {"top_k", "2"}, {"expert_ids[0]", "0"}, {"weights[0]", "0.5"}}};

// Records of R = 600 GB/s, T_iss0 = 1 us at (64, 32 KiB); the first row is the one fuzzed.
const Template kRecords{
    "mode,target,producers,bytes_per_producer,gap_us,t_iss_us,t_period_us\n"
    "periodic,remote,@producers@,@bytes_per_producer@,@gap_us@,@t_iss_us@,@t_period_us@\n"
    "periodic,remote,64,65536,0,6.99050667,6.99050667\n"
    "periodic,remote,64,131072,0,13.9810133,13.9810133\n"
    "periodic,remote,64,32768,0,3.49525333,3.49525333\n"
    "periodic,remote,64,32768,1.74762667,1.74762667,3.49525333\n"
    "periodic,remote,64,32768,3.49525333,1,4.49525333\n"
    "periodic,remote,64,32768,5.24288,1,6.24288\n"
    "periodic,remote,64,32768,6.99050667,1,7.99050667\n",
    {{"producers", "64"}, {"bytes_per_producer", "32768"}, {"gap_us", "0"}, {"t_iss_us", "3.49525333"},
     {"t_period_us", "3.49525333"}}};

// A raw calibration file with one zero-gap loop (the --raw of fit and fidelity).
const Template kRaw{
    R"({"schema": "xstage.calibration_raw/1", "points": [{"mode": "isolated", "phase": "sweep"},
  {"mode": "periodic", "phase": "zero-gap", "target": @points[1].target@, "producers": @points[1].producers@,
   "bytes_per_producer": @points[1].bytes_per_producer@, "gap_us": @points[1].gap_us@}]}
)",
    {{"points[1].target", "\"remote\""}, {"points[1].producers", "64"}, {"points[1].bytes_per_producer", "32768"},
     {"points[1].gap_us", "0.12"}}};

// A traced MoE bench run: a remote-store entry and its local-store control (fidelity --traces).
const Template kTraces{
    R"J({"schema": "xstage.moe_bench", "precision": "bf16", "shape": {"name": "qwen3", "h_inter": @shape.h_inter@},
  "trace": [{"schedule": "wave", "combine_stores": "remote (token's rank)", "layer_median_ms": @trace[0].layer_median_ms@,
             "linear2_remote_store_span": {"median_us": @trace[0].linear2_remote_store_span.median_us@},
             "linear2_mainloop_and_staging": {"median_us": 2.5}, "linear2_mma_wait_at_entry": {"median_us": 0.8}},
            {"schedule": "wave", "combine_stores": "local scratch (control)", "layer_median_ms": 7.2,
             "linear2_remote_store_span": {"median_us": 1.0}, "linear2_mainloop_and_staging": {"median_us": 2.4},
             "linear2_mma_wait_at_entry": {"median_us": @trace[1].linear2_mma_wait_at_entry.median_us@}}]}
)J",
    {{"shape.h_inter", "1536"}, {"trace[0].layer_median_ms", "7.48"}, {"trace[0].linear2_remote_store_span.median_us", "3.58"},
     {"trace[1].linear2_mma_wait_at_entry.median_us", "0.2"}}};

// One point of a Ulysses sweep (fidelity --ulysses), from results/h200-x2/ulysses/ulysses.json.
const Template kUlysses{
    R"({"schema": "xstage.ulysses_sweep/1", "points": [{"heads_per_gpu": @points[0].heads_per_gpu@,
  "head_dim": @points[0].head_dim@, "tile_order": "own-last", "remote_bytes_per_rank": @points[0].remote_bytes_per_rank@,
  "model": {"sigma_us": @points[0].model.sigma_us@, "producers": @points[0].model.producers@, "block_m": 128,
            "block_n": @points[0].model.block_n@,
            "points": [{"seq_len": @points[0].model.points[0].seq_len@, "output_bursts": @points[0].model.points[0].output_bursts@}]},
  "variants": {"fa-only-tma": {"iteration_median_us": @points[0].variants.fa-only-tma.iteration_median_us@},
               "fused-tma": {"iteration_median_us": 210.96}}}]}
)",
    {{"points[0].heads_per_gpu", "4"}, {"points[0].head_dim", "128"}, {"points[0].remote_bytes_per_rank", "4194304"},
     {"points[0].model.sigma_us", "1.657"}, {"points[0].model.producers", "132"}, {"points[0].model.block_n", "128"},
     {"points[0].model.points[0].seq_len", "8192"}, {"points[0].model.points[0].output_bursts", "2"},
     {"points[0].variants.fa-only-tma.iteration_median_us", "202.35"}}};

const Template kBurstGapKernel{
    R"({"schema": "xstage.kernel/1", "kind": "burst_gap", "producers": @producers@, "issue": "piggyback",
  "chunks": @chunks@, "staging_us": @staging_us@, "repeat": @repeat@,
  "tiles": [{"name": "out", "mainloop_us": @tiles[0].mainloop_us@, "bytes": @tiles[0].bytes@,
             "remote_share": @tiles[0].remote_share@, "count": @tiles[0].count@, "k_steps": @tiles[0].k_steps@}]}
)",
    {{"producers", "8"}, {"chunks", "4"}, {"staging_us", "0.5"}, {"repeat", "3"}, {"tiles[0].mainloop_us", "2.5"},
     {"tiles[0].bytes", "32768"}, {"tiles[0].remote_share", "0.5"}, {"tiles[0].count", "2"}, {"tiles[0].k_steps", "8"}}};

// Values no JSON number field may take.
std::vector<std::string> bad_json_numbers() {
  return {nested(60000), "1e400", "-1e400", "1e308", "-1", "null", "true", "{}", "[]", "\"7\"",
          "\"" + std::string(1 << 20, 'x') + "\"", binary_junk(), "\"\xFF\xFE\xFD\"", "\"\x01\n\""};
}
// ... and no integer field (counts, producers, shapes, ids).
std::vector<std::string> bad_json_integers() {
  auto v = bad_json_numbers();
  for (const char* s : {"9999999999", "4294967296", "18446744073709551616", "-9223372036854775809", "2.5", "1e9"})
    v.push_back(s);
  return v;
}
template <class... More>
std::vector<std::string> plus(std::vector<std::string> v, More... more) {
  (v.push_back(more), ...);
  return v;
}

class LoaderFuzz : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(testing::TempDir()) /
           ("xstage_loader_fuzz_" + std::to_string(::getpid()) + "_" +
            testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  std::string write(const std::string& name, const std::string& bytes) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }
  std::vector<std::string> listing() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

  // Runs `command` + path; expects exit 2, one line of < 400 characters naming the path and every
  // fragment, and no new file in the folder.
  void expect_rejected(const std::string& command, const std::string& path, const std::vector<std::string>& fragments,
                       const std::string& what) {
    const auto before = listing();
    const CliRun r = run_cli(command + " " + path);
    const std::string shown = r.err.substr(0, 600);  // today's messages can be megabytes
    EXPECT_EQ(r.code, 2) << what << ": " << command << " (-1: killed by a signal)\nstderr: " << shown;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << what << ": " << command << "\nstderr: " << shown;
    EXPECT_TRUE(!r.err.empty() && r.err.back() == '\n') << what << ": " << shown;
    EXPECT_LT(r.err.size(), 400u) << what << ": " << command << "\nstderr: " << shown;
    EXPECT_NE(r.err.find(path), std::string::npos) << what << ": the file is not named: " << shown;
    for (const auto& f : fragments)
      EXPECT_NE(r.err.find(f), std::string::npos) << what << ": \"" << f << "\" is not named: " << shown;
    EXPECT_EQ(listing(), before) << what << ": " << command << " wrote into the folder";
  }

  // Every bad value of every field of `t`, through every command; then truncation at each field.
  void fuzz_fields(const Template& t, const std::map<std::string, std::vector<std::string>>& bad,
                   const std::vector<std::string>& commands, const std::string& prefix) {
    const std::string good = write("good.json", t.valid());
    for (const auto& c : commands) ASSERT_EQ(run_cli(c + " " + good).code, 0) << "the valid file must load: " << c;
    for (const auto& [field, values] : bad) {
      for (std::size_t i = 0; i < values.size(); ++i) {
        const std::string path = write("bad.json", t.with(field, values[i]));
        for (const auto& c : commands)
          expect_rejected(c, path, {field}, prefix + field + " = bad value #" + std::to_string(i) + " (" +
                                                xstage::bounded_text(values[i], 30) + ")");
      }
      const std::string path = write("bad.json", t.cut_at(field));
      expect_rejected(commands.front(), path, {field}, prefix + "file truncated at " + field);
    }
    std::error_code ec;
    fs::remove(dir_ / "bad.json", ec);
    fs::remove(dir_ / "good.json", ec);
  }

  // Files that are not JSON objects at all: empty, blank, binary, cut anywhere, a folder, too deep.
  void fuzz_files(const Template& t, const std::string& command, const std::string& deep_field) {
    expect_rejected(command, write("empty.json", ""), {"empty"}, "empty file");
    expect_rejected(command, write("blank.json", " \n\t\n"), {"empty"}, "blank file");
    expect_rejected(command, write("junk.json", binary_junk()), {"not valid JSON"}, "binary file");
    expect_rejected(command, write("latin1.json", "{\"schema\": \"caf\xE9\"}"), {"schema", "UTF-8"}, "Latin-1 file");
    const std::string valid = t.valid();
    for (std::size_t n = 1; n + 2 < valid.size(); n += 17)
      expect_rejected(command, write("cut.json", valid.substr(0, n)), {"not valid JSON"}, "cut after " + std::to_string(n) + " bytes");
    // A million levels: refused before parsing, at its first byte beyond the limit.
    expect_rejected(command, write("deep.json", t.with(deep_field, nested(1000000))), {deep_field, "nested deeper"},
                    "nested 1e6 deep");
  }

  fs::path dir_;
};

const std::vector<std::string> kPlatformCommands = {
    "model --producers 4 --bytes-per-producer 1024 --platform", "plan --platform",
    "simulate --producers 4 --bytes-per-producer 1024 --bursts 4 --platform"};

TEST_F(LoaderFuzz, PlatformFile) {
  fuzz_fields(kPlatform,
              {{"drain_rate_gbps", plus(bad_json_numbers(), "0", "1e-4", "1e7")},
               {"issue_floor[0].producers", bad_json_integers()},
               {"issue_floor[0].t_iss0_us", plus(bad_json_numbers(), "0", "1e6")},
               {"capacity[0].bytes", plus(bad_json_numbers(), "0", "1e13")}},
              kPlatformCommands, "platform ");
  fuzz_files(kPlatform, kPlatformCommands.front(), "drain_rate_gbps");
  // One 50 MB string, shown cut with its size.
  const std::string path = write("huge.json", kPlatform.with("drain_rate_gbps", "\"" + std::string(50 << 20, 'x') + "\""));
  expect_rejected(kPlatformCommands.front(), path, {"drain_rate_gbps", "(string of 52428800 bytes)"}, "50 MB string");
  // A folder: refused by the option's own check, still one line with exit 2.
  expect_rejected(kPlatformCommands.front(), dir_.string(), {"directory"}, "a folder as the platform file");
}

TEST_F(LoaderFuzz, ScheduleFile) {
  const std::vector<std::string> commands = {"simulate --schedule"};
  fuzz_fields(kSchedule,
              {{"schema", bad_json_numbers()},
               {"producers[0].count", plus(bad_json_integers(), "0", "100001")},
               {"producers[0].repeat", plus(bad_json_integers(), "0")},
               {"producers[0].steps[0].burst_bytes", plus(bad_json_numbers(), "0", "1e13")},
               {"producers[0].steps[1].compute_us", plus(bad_json_numbers(), "1e6")}},
              commands, "schedule ");
  fuzz_files(kSchedule, commands.front(), "producers[0].steps[0].burst_bytes");
  expect_rejected(commands.front(), dir_.string(), {"directory"}, "a folder as the schedule file");
}

TEST_F(LoaderFuzz, RoutingFile) {
  // No --tokens: the routing file holds the tokens (plan moe refuses --tokens with a routing file).
  const std::vector<std::string> commands = {"plan moe --shape dit-moe-g2-16e2a --simulate --ranks 2 --routing"};
  fuzz_fields(kRouting,
              {{"tokens", plus(bad_json_integers(), "0")},
               {"experts", plus(bad_json_integers(), "0", "65537")},
               {"top_k", plus(bad_json_integers(), "0", "17")},
               {"expert_ids[0]", plus(bad_json_integers(), "16")},
               {"weights[0]", plus(bad_json_numbers(), "1e39")}},
              commands, "routing ");
  fuzz_files(kRouting, commands.front(), "tokens");
  expect_rejected(commands.front(), dir_.string(), {"directory"}, "a folder as the routing file");
}

TEST_F(LoaderFuzz, BurstGapKernelFile) {
  const std::vector<std::string> commands = {"simulate --kernel"};
  fuzz_fields(kBurstGapKernel,
              {{"producers", plus(bad_json_integers(), "0", "1000001")},
               {"chunks", plus(bad_json_integers(), "0", "65")},
               {"staging_us", plus(bad_json_numbers(), "1e6")},
               {"repeat", plus(bad_json_integers(), "0", "1000001")},
               {"tiles[0].mainloop_us", plus(bad_json_numbers(), "0", "1e6")},
               {"tiles[0].bytes", plus(bad_json_numbers(), "1e13")},
               {"tiles[0].remote_share", plus(bad_json_numbers(), "1.5")},
               {"tiles[0].count", plus(bad_json_integers(), "0")},
               {"tiles[0].k_steps", plus(bad_json_integers(), "0", "65537")}},
              commands, "burst-gap kernel ");
  fuzz_files(kBurstGapKernel, commands.front(), "tiles[0].bytes");
  expect_rejected(commands.front(), dir_.string(), {"directory"}, "a folder as the kernel description");
}

TEST_F(LoaderFuzz, RecordsFile) {
  const std::string out = (dir_ / "out.json").string();
  const std::string command = "fit --out " + out + " --records";
  {
    const CliRun ok = run_cli(command + " " + write("good.csv", kRecords.valid()));
    ASSERT_EQ(ok.code, 0) << "the valid records must fit: " << ok.err;
    fs::remove(out);
    fs::remove(dir_ / "good.csv");
  }
  const std::vector<std::string> numbers = {"nan", "NaN", "inf", "-inf", "1e400", "-1e400", "abc", "1x", "0x10", "-1",
                                            "", "\xFF\xFE", "\x01", std::string(1 << 20, '9')};
  const std::map<std::string, std::vector<std::string>> bad = {
      {"producers", plus(numbers, "0", "2.5", "9999999999", "1e7")},
      {"bytes_per_producer", plus(numbers, "0", "1e13")},
      {"gap_us", plus(numbers, "1e6")},
      {"t_iss_us", plus(numbers, "0", "1e6")},
      {"t_period_us", plus(numbers, "0", "1e6")}};
  for (const auto& [column, values] : bad)
    for (std::size_t i = 0; i < values.size(); ++i)
      expect_rejected(command, write("bad.csv", kRecords.with(column, values[i])), {":2: column " + column},
                      "records " + column + " = bad value #" + std::to_string(i));
  // A 10 MB line, binary junk, a cut last line, an empty file, a folder.
  expect_rejected(command, write("long.csv", kRecords.with("gap_us", std::string(10 << 20, 'g'))),
                  {":2: column gap_us", "(10485760 bytes)"}, "10 MB line");
  expect_rejected(command, write("junk.csv", kRecords.with("producers", binary_junk())), {":2:"}, "binary junk");
  const std::string valid = kRecords.valid();
  expect_rejected(command, write("cut.csv", valid.substr(0, valid.size() - 14)), {":9:", "columns"}, "cut last line");
  expect_rejected(command, write("header.csv", valid.substr(0, 20)), {":1:", "header"}, "cut header");
  expect_rejected(command, write("empty.csv", ""), {"empty"}, "empty file");
  expect_rejected(command, dir_.string(), {"directory"}, "a folder as the records file");
  EXPECT_FALSE(fs::exists(out));
}

// --- the loaders of fit and fidelity: --raw, --traces, --ulysses ----------------------------------

TEST_F(LoaderFuzz, RawCalibrationFile) {
  const std::string records = write("rec.csv", kRecords.valid());
  const std::vector<std::string> commands = {"fidelity --records " + records + " --raw",
                                             "fit --force --out " + (dir_ / "out.json").string() + " --records " + records + " --raw"};
  ASSERT_EQ(run_cli(commands[1] + " " + write("good.json", kRaw.valid())).code, 0);
  fs::remove(dir_ / "out.json");
  fuzz_fields(kRaw,
              {{"points[1].target", plus(bad_json_numbers(), "\"elsewhere\"")},
               {"points[1].producers", plus(bad_json_integers(), "0", "1000001", "4294967360")},
               {"points[1].bytes_per_producer", plus(bad_json_numbers(), "0", "1e13")},
               {"points[1].gap_us", plus(bad_json_numbers(), "1e6")}},
              {commands[0]}, "raw ");
  fuzz_files(kRaw, commands.front(), "points[1].gap_us");
  expect_rejected(commands[0], write("schema.json", R"({"schema": "xstage.other/1", "points": []})"), {"schema"}, "schema");
  EXPECT_FALSE(fs::exists(dir_ / "out.json"));
}

TEST_F(LoaderFuzz, TracedMoeBenchFile) {
  const std::vector<std::string> commands = {"fidelity --records " + write("rec.csv", kRecords.valid()) + " --traces"};
  fuzz_fields(kTraces,
              {{"shape.h_inter", plus(bad_json_integers(), "0", "1048577")},
               {"trace[0].layer_median_ms", plus(bad_json_numbers(), "0", "1e6")},
               {"trace[0].linear2_remote_store_span.median_us", plus(bad_json_numbers(), "1e6")},
               {"trace[1].linear2_mma_wait_at_entry.median_us", plus(bad_json_numbers(), "1e6")}},
              commands, "traces ");
  // Found 1: a million levels deep crashed (stack overflow) while the file was copied.
  fuzz_files(kTraces, commands.front(), "shape.h_inter");
  expect_rejected(commands[0], write("set.json", R"({"schema": "xstage.moe_bench_set", "runs": 7})"), {"runs"}, "runs");
}

TEST_F(LoaderFuzz, UlyssesSweepFile) {
  const std::vector<std::string> commands = {"fidelity --records " + write("rec.csv", kRecords.valid()) + " --ulysses"};
  fuzz_fields(kUlysses,
              {{"points[0].heads_per_gpu", plus(bad_json_integers(), "0", "-2147483648", "65537")},
               {"points[0].head_dim", plus(bad_json_integers(), "0", "4097")},
               {"points[0].remote_bytes_per_rank", plus(bad_json_numbers(), "0", "1e13")},
               {"points[0].model.sigma_us", plus(bad_json_numbers(), "0")},
               {"points[0].model.producers", plus(bad_json_integers(), "0", "4294967428", "1000001")},
               // Found 1: block_n 0 divided by zero (SIGFPE).
               {"points[0].model.block_n", plus(bad_json_integers(), "0", "4097")},
               {"points[0].model.points[0].seq_len", plus(bad_json_integers(), "0")},
               {"points[0].model.points[0].output_bursts", plus(bad_json_integers(), "0", "1048577")},
               {"points[0].variants.fa-only-tma.iteration_median_us", plus(bad_json_numbers(), "0", "1e6")}},
              commands, "ulysses ");
  fuzz_files(kUlysses, commands.front(), "points[0].model.sigma_us");
  // Found 3: a million output bursts simulated 132 x 1e6 producer-bursts (11 GB, 41 s); refused first.
  expect_rejected(commands[0], write("work.json", kUlysses.with("points[0].model.points[0].output_bursts", "1000000")),
                  {"points", "exceeds the limit"}, "1e6 output bursts");
}

// --- not regular files: FIFOs never block a loader --------------------------------------------------

// Runs the CLI under a time limit; code 124: it hung.
CliRun run_cli_within(const std::string& args, int seconds) {
  const std::string err_path = testing::TempDir() + "/xstage_fifo_stderr_" + std::to_string(::getpid()) + ".txt";
  const std::string cmd = "timeout -s KILL " + std::to_string(seconds) + " " + std::string(XSTAGE_CLI_PATH) + " " +
                          args + " 2>" + err_path + " </dev/null";
  FILE* p = ::popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int status = ::pclose(p);
  std::ifstream e(err_path);
  std::string err((std::istreambuf_iterator<char>(e)), std::istreambuf_iterator<char>());
  std::remove(err_path.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out, err};
}

TEST_F(LoaderFuzz, FifoInputsAreRefusedWithoutBlocking) {
  const std::string fifo = (dir_ / "input.fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string records = write("rec.csv", kRecords.valid());
  const std::string link = (dir_ / "link.json").string();
  ASSERT_EQ(::symlink(fifo.c_str(), link.c_str()), 0);
  for (const std::string& path : {fifo, link}) {
    for (const std::string& c : std::vector<std::string>{
             "fidelity --records " + records + " --raw ", "fidelity --records " + records + " --traces ",
          "fidelity --records " + records + " --ulysses ", "fit --force --out " + (dir_ / "o.json").string() + " --raw ",
          "fidelity --records ", "model --producers 4 --bytes-per-producer 1024 --platform ", "simulate --schedule "}) {
      const std::string args = c.find("fit ") == 0 ? c + path + " --records " + records : c + path;
      const CliRun r = run_cli_within(args, 20);
      EXPECT_EQ(r.code, 2) << args << " (137: killed after blocking 20 s)\nstderr: " << r.err.substr(0, 600);
      EXPECT_NE(r.err.find("not a regular file"), std::string::npos) << args << "\nstderr: " << r.err.substr(0, 600);
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << "\nstderr: " << r.err.substr(0, 600);
    }
  }
  EXPECT_FALSE(fs::exists(dir_ / "o.json"));
}

// --- the loader registry: every file format the tools read --------------------------------------------

// The fuzz cases above, by registry name: a loader registered without one fails here.
const std::set<std::string> kFuzzedLoaders = {"platform", "schedule", "routing", "kernel", "records", "raw", "traces", "ulysses",
                                               "burst_gap_kernel"};

TEST(LoaderRegistry, EveryLoaderHasFuzzCases) {
  std::set<std::string> names;
  for (const auto& l : xstage::planner::input_loaders()) {
    EXPECT_TRUE(names.insert(std::string(l.name)).second) << "registered twice: " << l.name;
    EXPECT_TRUE(kFuzzedLoaders.count(std::string(l.name))) << "loader " << l.name << " (" << l.option
                                                           << ") has no case in test_loader_fuzz.cpp";
    EXPECT_NE(l.parse, nullptr) << l.name;
  }
  for (const auto& n : kFuzzedLoaders) EXPECT_TRUE(names.count(n)) << n << " is fuzzed but not registered";
}

// Hostile texts through every registered parser in-process: only InputError, one bounded line naming
// the origin, never another exception or a signal.
TEST(LoaderRegistry, EveryLoaderRefusesHostileTextWithOneBoundedLine) {
  std::vector<std::pair<std::string, std::string>> texts = {
      {"empty", ""},
      {"blank", " \n\t\r\n"},
      {"binary", binary_junk()},
      {"deep", nested(1000000)},
      {"deep object", "{\"schema\": " + nested(200000) + "}"},
      {"1e400", "{\"schema\": 1e400}"},
      {"not an object", "[1, 2, 3]"},
      {"string", "\"" + std::string(1 << 20, 'x') + "\""},
      {"huge number list", "[" + std::string(100000, '1').insert(0, "") + "]"},
      {"bom", "\xEF\xBB\xBF{}"},
      {"nul", std::string("{\"schema\": \"\0\"}", 15)},
      {"escapes", "\x1b[31mred\n\x1b]0;title\x07"},
      {"csv junk", "mode,target\n1,2\n"}};
  for (const auto& l : xstage::planner::input_loaders()) {
    for (const auto& [what, text] : texts) {
      const std::string origin = "hostile/" + std::string(l.name) + ".in";
      try {
        l.parse(text, origin);
        ADD_FAILURE() << l.name << ": " << what << " was accepted";
      } catch (const xstage::InputError& e) {
        const std::string m = e.what();
        EXPECT_EQ(m.rfind(origin, 0), 0u) << l.name << ": " << what << ": " << xstage::bounded_text(m, 300);
        EXPECT_LT(m.size(), 400u) << l.name << ": " << what << ": " << xstage::bounded_text(m, 300);
        EXPECT_EQ(m.find('\n'), std::string::npos) << l.name << ": " << what;
        EXPECT_EQ(m.find('\x1b'), std::string::npos) << l.name << ": " << what;
      } catch (const std::exception& e) {
        ADD_FAILURE() << l.name << ": " << what << ": not an InputError: " << xstage::bounded_text(e.what(), 300);
      }
    }
  }
}

// --- the bounded printer ---------------------------------------------------------------------------

TEST(BoundedText, EscapesToOneLineAndCuts) {
  using xstage::bounded_text;
  EXPECT_EQ(bounded_text("plain"), "plain");
  EXPECT_EQ(bounded_text("a\nb\tc\r\"\\"), "a\\nb\\tc\\r\\\"\\\\");
  EXPECT_EQ(bounded_text(std::string("\x00\x01\x7F", 3)), "\\x00\\x01\\x7F");
  EXPECT_EQ(bounded_text("\xFF\xC3"), "\\xFF\\xC3");           // invalid and cut-off UTF-8
  EXPECT_EQ(bounded_text("\xC0\xAF"), "\\xC0\\xAF");           // overlong encoding
  EXPECT_EQ(bounded_text("\xED\xA0\x80"), "\\xED\\xA0\\x80");  // surrogate
  EXPECT_EQ(bounded_text("5 \xC2\xB5s"), "5 \xC2\xB5s");       // valid UTF-8 kept
  const std::string long_text(1000, 'a');
  EXPECT_EQ(bounded_text(long_text), std::string(80, 'a') + "... (1000 bytes)");
  // Cuts never split an escape or a character.
  const std::string ctl = bounded_text(std::string(100, '\x01'));
  EXPECT_EQ(ctl.substr(0, ctl.find("...")).size() % 4, 0u) << ctl;
  std::string mu;
  for (int i = 0; i < 100; ++i) mu += "\xC2\xB5";
  const std::string m = bounded_text(mu);
  EXPECT_EQ(m.substr(0, m.find("...")).size() % 2, 0u) << m;
  EXPECT_NE(m.find("... (200 bytes)"), std::string::npos) << m;
}

TEST(BoundedJson, ScalarsAndSmallValuesAsJson) {
  using nlohmann::json;
  using xstage::bounded_json;
  EXPECT_EQ(bounded_json(json(1.5)), "1.5");
  EXPECT_EQ(bounded_json(json(-4)), "-4");
  EXPECT_EQ(bounded_json(json(18446744073709551615ULL)), "18446744073709551615");
  EXPECT_EQ(bounded_json(json(nullptr)), "null");
  EXPECT_EQ(bounded_json(json("fast")), "\"fast\"");
  EXPECT_EQ(bounded_json(json(std::nan(""))), "nan");
  EXPECT_EQ(bounded_json(json(-INFINITY)), "-inf");
  EXPECT_EQ(bounded_json(json::parse(R"({"a": [1, 2, {"b": null}], "c": "d"})")), R"({"a":[1,2,{"b":null}],"c":"d"})");
  EXPECT_EQ(bounded_json(json::object({{"a\nb", 1}})), R"({"a\nb":1})");
  EXPECT_EQ(bounded_json(json::array()), "[]");
}

TEST(BoundedJson, DeepValuesAreCutWithoutRecursion) {
  using nlohmann::json;
  using xstage::bounded_json;
  // Deeper than a recursive dump survives (it crashed at 60000 levels).
  const json deep = json::parse(nested(200000));
  const std::string s = bounded_json(deep);
  EXPECT_EQ(s, "[[[[...]]]] (array of 1 element, nested 200000 deep)");
  EXPECT_EQ(bounded_json(json::parse("[[[[1]]]]")), "[[[[...]]]] (array of 1 element, nested 4 deep)");
  EXPECT_EQ(bounded_json(json::parse("[[[1]]]")), "[[[1]]]");
  EXPECT_EQ(bounded_json(json::parse(R"({"a": {"b": {"c": {"d": 1}}}})")),
            R"({"a":{"b":{"c":{...}}}} (object of 1 member, nested 4 deep))");
}

TEST(BoundedJson, LongValuesAreCutWithTheirSize) {
  using nlohmann::json;
  using xstage::bounded_json;
  const std::string s = bounded_json(json(std::string(5 << 20, 'x')));
  EXPECT_EQ(s, "\"" + std::string(79, 'x') + "... (string of 5242880 bytes)");
  const std::string a = bounded_json(json(std::vector<int>(1000000, 7)));
  EXPECT_EQ(a.rfind("[7,7,7", 0), 0u) << a;
  EXPECT_NE(a.find("... (array of 1000000 elements)"), std::string::npos) << a;
  EXPECT_LT(a.size(), 130u) << a;
  const std::string junk = bounded_json(json(binary_junk()));
  EXPECT_EQ(junk.rfind("\"\\x00\\x01", 0), 0u) << junk;
  EXPECT_EQ(junk.find('\n'), std::string::npos) << junk;
}

// --- the JSON input path ---------------------------------------------------------------------------

std::string input_error(const std::string& text) {
  try {
    xstage::parse_json_input(text, "f.json");
  } catch (const xstage::InputError& e) {
    return e.what();
  }
  return "";
}

TEST(JsonInput, ParseErrorsNameFilePositionAndField) {
  EXPECT_EQ(input_error("{\"a\": 1,\n \"rate\": 1e400}"),
            "f.json:2:10 (byte 18): rate: number 1e400 is beyond the range of a double (about 1.8e308)");
  EXPECT_EQ(input_error("{\"a\": [1, 2, -1e999]}"),
            "f.json:1:14 (byte 13): a[2]: number -1e999 is beyond the range of a double (about 1.8e308)");
  const std::string syntax = input_error("{\"a\": 1,\n\n \"b\": [1, x]}");
  EXPECT_EQ(syntax.rfind("f.json:3:11 (byte 20): b[1]: not valid JSON: ", 0), 0u) << syntax;
  const std::string cut = input_error("{\"a\": {\"b\": ");
  EXPECT_EQ(cut.rfind("f.json:1:13 (byte 12): a.b: not valid JSON: ", 0), 0u) << cut;
  EXPECT_NE(input_error("{\"a\": \"\xFF\"}").find("a: not valid JSON: "), std::string::npos);
  EXPECT_EQ(input_error(""), "f.json: empty file (expected a JSON object)");
  const std::string deep = input_error("{\"k\": " + nested(1000000) + "}");
  EXPECT_EQ(deep, "f.json:1:70 (byte 69): k[0][0][0][0][0][0][0]...: nested deeper than 64 levels") << deep;
  // Within the limit: parsed.
  EXPECT_EQ(input_error("{\"k\": " + nested(63) + "}"), "");
  // Strings are skipped whole: brackets and digits inside them are text.
  EXPECT_EQ(input_error(R"({"k": "[[[[ 1e999 \" [[["})"), "");
}

TEST(JsonInput, RangesAreChecked) {
  using nlohmann::json;
  const auto number_error = [](const json& v) {
    try {
      xstage::json_number_in(v, "f.json", "x", xstage::ranges::kTimeUs);
    } catch (const xstage::InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(number_error(json(0.5)), "");
  EXPECT_EQ(number_error(json(0)), "f.json: x: must be > 0 and < 1e+06 us, got 0");
  EXPECT_EQ(number_error(json(1e6)), "f.json: x: must be > 0 and < 1e+06 us, got 1000000.0");
  EXPECT_EQ(number_error(json("1")), "f.json: x: must be a number > 0 and < 1e+06 us, got \"1\"");
  const auto integer_of = [](const json& v) { return xstage::json_integer_in(v, "f.json", "n", {1, 1000}); };
  EXPECT_EQ(integer_of(json(7)), 7);
  EXPECT_EQ(integer_of(json(1e3)), 1000);  // integral: taken
  EXPECT_THROW(integer_of(json(2.5)), xstage::InputError);
  EXPECT_THROW(integer_of(json(0)), xstage::InputError);
  EXPECT_THROW(integer_of(json(1001)), xstage::InputError);
  EXPECT_THROW(integer_of(json(4294967297LL)), xstage::InputError);  // 1 after wrapping to 32 bits
  EXPECT_THROW(integer_of(json(18446744073709551615ULL)), xstage::InputError);
  EXPECT_THROW(integer_of(json(INFINITY)), xstage::InputError);
}

}  // namespace
