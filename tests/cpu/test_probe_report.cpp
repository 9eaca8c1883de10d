// Calibration outputs: the report (fit once, predictions vs measurements, checks) on synthetic
// records with known parameters, and the output-directory rules (no overwrite without --force,
// atomic writes).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include "xstage/model/burst_gap.hpp"
#include "xstage/model/output_file.hpp"
#include "xstage/probe/calibration_report.hpp"

namespace {

using namespace xstage;
using namespace xstage::probe;
using model::BurstMode;
using model::CalibrationRecord;
using model::StoreTarget;

// A synthetic platform: R = 390 GB/s, T_iss0 = 0.14 µs + B / 60 GB/s per producer-burst, Q = 2.2 MB.
constexpr double kRate = 390e9;
constexpr double kCapacity = 2.2e6;
double floor_s(double b) { return 0.14e-6 + b / 60e9; }

std::vector<LabeledRecord> synthetic(StoreTarget target, double noise, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-noise, noise);
  auto jitter = [&](double x) { return x * (1.0 + u(rng)); };
  std::vector<LabeledRecord> out;
  for (int k : {16, 33, 66, 132})
    for (double b : {8192.0, 32768.0, 131072.0}) {
      const double v = k * b;
      const double t0 = floor_s(b);
      CalibrationRecord r{BurstMode::kPeriodic, target, k, b, 0.0, jitter(model::issue_time_s(t0, v, kRate, 0)),
                          jitter(model::period_s(t0, v, kRate, 0))};
      out.push_back({r, SweepPhase::kZeroGap, false});
    }
  const double v = 132 * 32768.0;
  for (int i = 0; i < 17; ++i) {
    const double g = 2.5 * v / kRate * i / 16;
    const double t0 = floor_s(32768);
    CalibrationRecord r{BurstMode::kPeriodic, target, 132, 32768, g, jitter(model::issue_time_s(t0, v, kRate, g)),
                        jitter(model::period_s(t0, v, kRate, g))};
    out.push_back({r, SweepPhase::kGapSweep, false});
  }
  for (int k : {33, 66, 132})
    for (double b = 2048; b * k <= 24e6; b *= std::sqrt(2.0)) {
      const double bb = std::round(b / 16) * 16;
      const double t = model::isolated_issue_time_s(floor_s(bb), k * bb, kRate, kCapacity);
      CalibrationRecord r{BurstMode::kIsolated, target, k, bb, 0.0, jitter(t), std::nan("")};
      out.push_back({r, SweepPhase::kIsolated, false});
    }
  return out;
}

TEST(CalibrationReport, RecoversKnownParametersAndPredictsEveryPoint) {
  auto pts = synthetic(StoreTarget::kRemote, 0.01, 7);
  // The local control: flat issue time in G.
  for (int i = 0; i < 9; ++i) {
    CalibrationRecord r{BurstMode::kPeriodic, StoreTarget::kLocal, 132, 32768, i * 2e-6, 0.55e-6 * (1 + 0.01 * (i % 3)),
                        0.55e-6 + i * 2e-6};
    pts.push_back({r, SweepPhase::kGapSweep, false});
  }
  ReportInputs in;
  in.points = pts;
  in.fit = model::fit_platform(fit_records(pts));
  in.copy_engine_peer_gbps = 400.0;
  const auto j = build_calibration_report(in);
  EXPECT_EQ(j["schema"], kReportSchema);
  EXPECT_NEAR(j["fitted"]["drain_rate_gbps"].get<double>(), 390.0, 390.0 * 0.03);
  EXPECT_NEAR(j["fitted"]["drain_rate_over_copy_engine"].get<double>(), 390.0 / 400.0, 0.03);
  // Every remote point has a prediction; the local control has none (it is not fitted).
  int predicted = 0, local = 0;
  for (const auto& p : j["points"]) {
    if (p["target"] == "remote") {
      EXPECT_TRUE(p.contains("pred_t_iss_us")) << p.dump();
      ++predicted;
    } else {
      EXPECT_FALSE(p.contains("pred_t_iss_us"));
      ++local;
    }
  }
  EXPECT_EQ(predicted + local, static_cast<int>(pts.size()));
  const auto& s = j["summary"];
  EXPECT_LT(s["gap_sweep_t_period"]["median_rel_error"].get<double>(), 0.05);
  EXPECT_LT(s["gap_sweep_t_iss"]["median_rel_error"].get<double>(), 0.10);
  EXPECT_LT(s["local_control_t_iss_flatness"]["max_rel_deviation_from_median"].get<double>(), 0.05);
  EXPECT_GE(j["fitted"]["knees"].size(), 3u);
  for (const auto& c : j["checks"])
    if (c["name"] != "store_paths_agree_on_drain_rate") {
      EXPECT_TRUE(c["applicable"].get<bool>()) << c.dump();
    }
}

TEST(CalibrationReport, WrongRateIsCaughtByTheChecks) {
  // The same records against a copy-engine reference far above R: the R/CE check must fail.
  auto pts = synthetic(StoreTarget::kRemote, 0.0, 1);
  ReportInputs in;
  in.points = pts;
  in.fit = model::fit_platform(fit_records(pts));
  in.copy_engine_peer_gbps = 600.0;
  const auto j = build_calibration_report(in);
  bool found = false;
  for (const auto& c : j["checks"])
    if (c["name"] == "drain_rate_vs_copy_engine") {
      found = true;
      EXPECT_FALSE(c["pass"].get<bool>());
    }
  EXPECT_TRUE(found);
}

TEST(CalibrationReport, LocalOnlyFitIsLabelledAndMakesNoRemoteClaim) {
  auto pts = synthetic(StoreTarget::kLocal, 0.01, 3);
  ReportInputs in;
  in.points = pts;
  in.fit_is_local_control = true;
  in.fit = model::fit_platform(relabel_local_as_fit_input(fit_records(pts)));
  const auto j = build_calibration_report(in);
  EXPECT_TRUE(j["fit_is_local_control"].get<bool>());
  EXPECT_NE(j["fit_note"].get<std::string>().find("not a remote platform"), std::string::npos);
  for (const auto& c : j["checks"])
    if (c["name"] == "drain_rate_vs_copy_engine") EXPECT_FALSE(c["applicable"].get<bool>());
  // Predictions are made for the fitted (local) points.
  EXPECT_GT(j["summary"]["zero_gap_t_period"]["points"].get<int>(), 0);
}

TEST(CalibrationReport, FitInputLeavesOutMmaAndPathCheckPoints) {
  std::vector<LabeledRecord> pts;
  CalibrationRecord r{BurstMode::kPeriodic, StoreTarget::kRemote, 8, 4096, 0, 1e-6, 1e-6};
  pts.push_back({r, SweepPhase::kZeroGap, false});
  pts.push_back({r, SweepPhase::kGapSweepMma, true});
  pts.push_back({r, SweepPhase::kPathCheck, false});
  EXPECT_EQ(fit_records(pts).size(), 1u);
}

class OutputDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (std::filesystem::temp_directory_path() / ("xstage_cal_" + std::to_string(getpid()))).string();
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(OutputDir, RefusesToOverwriteWithoutForce) {
  prepare_output_dir(dir_, false, {"report.json"});
  write_output_file(dir_ + "/report.json", "{}\n", true);
  try {
    prepare_output_dir(dir_, false, {"records.csv", "report.json"});
    FAIL() << "no throw";
  } catch (const InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("--out"), std::string::npos);
    EXPECT_NE(m.find("report.json"), std::string::npos);
    EXPECT_NE(m.find("--force"), std::string::npos);
  }
  EXPECT_NO_THROW(prepare_output_dir(dir_, true, {"report.json"}));
  std::ifstream f(dir_ + "/report.json");
  std::string s((std::istreambuf_iterator<char>(f)), {});
  EXPECT_EQ(s, "{}\n");  // untouched until replaced
}

// The one writer of output files (the CLI's and the calibration's): created or replaced as asked, never through a
// link, never over a file without force, an error naming the argument.
TEST_F(OutputDir, OutputFileCreatesReplacesOnlyWithForceAndNeverThroughALink) {
  prepare_output_dir(dir_, false, {"a.json"});
  const std::string a = dir_ + "/a.json";
  EXPECT_TRUE(write_output_file(a, "1\n", false));
  EXPECT_FALSE(write_output_file(a, "2\n", true));  // replaced, not created
  try {
    write_output_file(a, "3\n", false, {}, "--report");
    FAIL() << "replaced without force";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--report"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--force"), std::string::npos) << e.what();
  }
  std::ifstream f(a);
  std::string s((std::istreambuf_iterator<char>(f)), {});
  EXPECT_EQ(s, "2\n");
  const std::string link = dir_ + "/link.json";
  std::filesystem::create_symlink(a, link);
  EXPECT_THROW(write_output_file(link, "4\n", true), InputError);
  EXPECT_THROW(write_output_file(a, "5\n", true, {link}), InputError);  // an input of the command, through a link
  EXPECT_THROW(write_output_file(dir_ + "/missing/b.json", "6\n", true), InputError);
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir_)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"a.json", "link.json"}));
}

TEST_F(OutputDir, AtomicWriteLeavesNoTemporaryAndCsvHasTheSchemaHeader) {
  prepare_output_dir(dir_, false, {"records.csv"});
  CalibrationRecord r{BurstMode::kIsolated, StoreTarget::kRemote, 4, 1024, 0, 1e-6, std::nan("")};
  write_output_file(dir_ + "/records.csv", records_csv_text({r}), true);
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir_)) names.push_back(e.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{"records.csv"});  // no temporary left beside it
  const auto back = model::load_records_csv(dir_ + "/records.csv");
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].producers, 4);
  std::ifstream f(dir_ + "/records.csv");
  std::string header;
  std::getline(f, header);
  EXPECT_EQ(header, model::kRecordsHeader);
}

TEST_F(OutputDir, NotADirectoryIsAnInputError) {
  { std::ofstream(dir_) << "x"; }
  EXPECT_THROW(prepare_output_dir(dir_, false, {"a"}), InputError);
  std::filesystem::remove(dir_);
}

}  // namespace
