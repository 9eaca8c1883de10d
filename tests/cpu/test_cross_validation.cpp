// Cross-validation of the platform fit and the physical bound of fitted rates, on the committed 2 x H200
// calibration records.
#include <gtest/gtest.h>

#include <string>

#include "xstage/model/calibration_fit.hpp"
#include "xstage/model/error.hpp"
#include "xstage/model/platform.hpp"
#include "xstage/model/records.hpp"
#include "xstage/sim/cross_validation.hpp"

using namespace xstage;

namespace {
std::string src(const std::string& rel) { return std::string(XSTAGE_SOURCE_DIR) + "/" + rel; }
std::vector<model::CalibrationRecord> records() {
  return model::load_records_csv(src("results/h200-x2/calibration/records.csv"));
}
constexpr double kLink = 450e9;  // H200 NVLink, 18 links, per direction
}  // namespace

TEST(FitBound, NoFittedRateExceedsTheBoundAndTheMisfitIsReported) {
  model::FitOptions fo;
  fo.max_rate_bytes_per_s = kLink;
  const model::FitResult fit = model::fit_platform(records(), fo);
  EXPECT_LE(fit.platform.drain_rate_bytes_per_s, kLink);
  for (const auto& d : fit.platform.drain_rate_by_producers) EXPECT_LE(d.bytes_per_s, kLink) << d.producers;
  for (const auto& c : fit.platform.capacity) EXPECT_LE(c.isolated_drain_rate_bytes_per_s, kLink) << c.producers;
  // K = 33's periodic records want about 507 GB/s (the median producer's statistic): reported, not written.
  bool r33 = false;
  for (const auto& b : fit.bounded)
    if (b.parameter == "R(33)") {
      r33 = true;
      EXPECT_GT(b.unbounded_bytes_per_s, 490e9);
      EXPECT_DOUBLE_EQ(b.written_bytes_per_s, kLink);
      EXPECT_GT(b.max_rel_error_bounded, b.max_rel_error_unbounded);
    }
  EXPECT_TRUE(r33);
  // Unbounded, the same records put R(33) above the link: the fit the committed platform holds.
  const model::FitResult free = model::fit_platform(records(), {});
  bool above = false;
  for (const auto& d : free.platform.drain_rate_by_producers) above = above || d.bytes_per_s > kLink;
  EXPECT_TRUE(above);
  EXPECT_TRUE(free.bounded.empty());
}

TEST(FitBound, PlatformWithPhysicalBoundsRefusesARateAboveTheLink) {
  auto j = model::platform_to_json(model::load_platform_file(src("platforms/h200_x2_measured.json")));
  j["physical_bounds"] = {{"link_rate_gbps", 450.0}, {"link_source", "NVLink 4, 18 links x 25 GB/s per direction"},
                          {"copy_engine_gbps", 392.5}, {"sms", 132}};
  try {
    model::platform_from_json(j, "p.json");
    ADD_FAILURE() << "R(33) = 507 GB/s accepted above a 450 GB/s link";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("drain_rate_by_producers[1].drain_rate_gbps"), std::string::npos) << e.what();
  }
  j["drain_rate_by_producers"][1]["drain_rate_gbps"] = 450.0;
  const model::Platform p = model::platform_from_json(j, "p.json");
  EXPECT_DOUBLE_EQ(p.bounds.link_rate_bytes_per_s, 450e9);
  EXPECT_EQ(p.bounds.sms, 132);
  EXPECT_EQ(model::platform_to_json(p)["physical_bounds"]["copy_engine_gbps"], 392.5);
  j["physical_bounds"].erase("link_source");
  EXPECT_THROW(model::platform_from_json(j, "p.json"), InputError);
}

TEST(CrossValidation, EveryRemoteRecordIsPredictedOnceByAFitThatDidNotSeeIt) {
  const auto recs = records();
  int remote = 0;
  for (const auto& r : recs) remote += r.target == model::StoreTarget::kRemote;
  sim::CvOptions o;  // closed-form fit only (no simulator refinement): fast
  o.fit.max_rate_bytes_per_s = kLink;
  const sim::CrossValidation cv = sim::cross_validate(recs, o);
  ASSERT_EQ(cv.schemes.size(), 4u);
  for (const auto& s : cv.schemes) {
    EXPECT_LE(s.max_fitted_rate_bytes_per_s, kLink * (1 + 1e-12)) << s.name;
    int failed = 0;
    for (const auto& f : s.failed) failed += f.records;
    if (s.name == "leave one gap sweep out") continue;  // only the swept records
    EXPECT_EQ(static_cast<int>(s.points.size()) + failed, remote) << s.name;
  }
  EXPECT_EQ(cv.schemes[0].folds, 2);
  EXPECT_EQ(cv.schemes[1].folds, 4);  // K = 16, 33, 66, 132
  EXPECT_EQ(cv.schemes[3].folds, 1);  // the one gap sweep (K = 132, 32 KiB)
  EXPECT_THROW(sim::cross_validate(recs, sim::CvOptions{1}), InputError);
}
