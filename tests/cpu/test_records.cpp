// Calibration records CSV: round trip and bad input naming line, column and value.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "xstage/model/error.hpp"
#include "xstage/model/records.hpp"

using namespace xstage::model;

namespace {
std::string parse_error(const std::string& text) {
  std::istringstream in(text);
  try {
    parse_records_csv(in, "r.csv");
  } catch (const xstage::InputError& e) {
    return e.what();
  }
  return "";
}
const std::string kHeader = std::string(kRecordsHeader) + "\n";
}  // namespace

TEST(Records, RoundTrip) {
  std::vector<CalibrationRecord> rs = {
      {BurstMode::kPeriodic, StoreTarget::kRemote, 132, 32768, 1.5e-6, 2.25e-6, 3.75e-6},
      {BurstMode::kIsolated, StoreTarget::kLocal, 8, 4096, 0.0, 0.3e-6, std::nan("")},
  };
  std::stringstream ss;
  write_records_csv(ss, rs);
  const auto back = parse_records_csv(ss, "mem");
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].mode, BurstMode::kPeriodic);
  EXPECT_EQ(back[0].target, StoreTarget::kRemote);
  EXPECT_EQ(back[0].producers, 132);
  EXPECT_NEAR(back[0].gap_s, 1.5e-6, 1e-15);
  EXPECT_NEAR(back[0].t_period_s, 3.75e-6, 1e-15);
  EXPECT_EQ(back[1].mode, BurstMode::kIsolated);
  EXPECT_TRUE(std::isnan(back[1].t_period_s));
  EXPECT_DOUBLE_EQ(back[1].volume_bytes(), 8 * 4096.0);
}

TEST(Records, BadInput) {
  EXPECT_NE(parse_error("").find("empty records file"), std::string::npos);
  EXPECT_NE(parse_error("mode,target\n").find("header must be"), std::string::npos);
  EXPECT_NE(parse_error(kHeader + "burst,remote,1,1,0,1,1\n").find("r.csv:2: column mode: must be periodic or isolated, got \"burst\""),
            std::string::npos);
  EXPECT_NE(parse_error(kHeader + "periodic,peer,1,1,0,1,1\n").find("column target"), std::string::npos);
  EXPECT_NE(parse_error(kHeader + "periodic,remote,0,1,0,1,1\n").find("column producers: must be an integer in 1..1000000, got \"0\""),
            std::string::npos);
  EXPECT_NE(parse_error(kHeader + "periodic,remote,2.5,1,0,1,1\n").find("column producers"), std::string::npos);
  EXPECT_NE(parse_error(kHeader + "periodic,remote,1,-8,0,1,1\n").find("column bytes_per_producer: must be >= 1 and <= 1e+12 bytes, got \"-8\""),
            std::string::npos);
  EXPECT_NE(parse_error(kHeader + "periodic,remote,1,8,-1,1,1\n").find("column gap_us: must be >= 0 and < 1e+06 us, got \"-1\""), std::string::npos);
  EXPECT_NE(parse_error(kHeader + "periodic,remote,1,8,0,nan,1\n").find("column t_iss_us"), std::string::npos);
  EXPECT_NE(parse_error(kHeader + "periodic,remote,1,8,0,1,\n").find("column t_period_us: missing value"), std::string::npos);
  EXPECT_NE(parse_error(kHeader + "isolated,remote,1,8,0,1,5\n").find("must be empty for isolated"), std::string::npos);
  EXPECT_NE(parse_error(kHeader + "periodic,remote,1,8,0,1\n").find("expected 7 columns, got 6"), std::string::npos);
  EXPECT_NE(parse_error(kHeader + "periodic,remote,1,8,0,1x,1\n").find("not a number, got \"1x\""), std::string::npos);
  EXPECT_NE(parse_error(kHeader + "periodic,remote,1,8,0,1e400,1\n").find("column t_iss_us: beyond the range of a double, got \"1e400\""),
            std::string::npos);
  EXPECT_NE(parse_error(kHeader + "periodic,remote,1,8,inf,1,1\n").find("column gap_us: must be >= 0 and < 1e+06 us, got \"inf\""),
            std::string::npos);
  EXPECT_NE(parse_error(kHeader + "periodic,remote,1,8,0,1,1e6\n").find("column t_period_us: must be > 0 and < 1e+06 us"),
            std::string::npos);
  EXPECT_NE(parse_error(kHeader + "periodic,remote,1e7,8,0,1,1\n").find("column producers: must be an integer in 1..1000000"),
            std::string::npos);
  EXPECT_NE(parse_error(kHeader + "periodic,remote,1,1e13,0,1,1\n").find("column bytes_per_producer: must be >= 1 and <= 1e+12"),
            std::string::npos);
  // A long value is shown cut, with its size; control bytes escaped.
  const std::string err = parse_error(kHeader + "periodic,remote,1,8,0,\x01" + std::string(100000, '7') + ",1\n");
  EXPECT_NE(err.find("column t_iss_us: not a number, got \"\\x01777"), std::string::npos) << err;
  EXPECT_NE(err.find("... (100001 bytes)"), std::string::npos) << err;
  EXPECT_LT(err.size(), 300u) << err;
  EXPECT_THROW(load_records_csv("/nonexistent.csv"), xstage::InputError);
}
