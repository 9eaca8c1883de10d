// Platform files: loading, validation messages, T_iss0 and Q lookup rules.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <functional>

#include "xstage/model/error.hpp"
#include "xstage/model/platform.hpp"

using namespace xstage::model;
using nlohmann::json;

namespace {
json valid() {
  return json::parse(R"({"schema": "xstage.platform/1", "name": "t", "drain_rate_gbps": 500,
    "issue_floor": [{"producers": 128, "bytes_per_producer": 16384, "t_iss0_us": 0.5},
                    {"producers": 128, "bytes_per_producer": 32768, "t_iss0_us": 0.8},
                    {"producers": 128, "bytes_per_producer": 65536, "t_iss0_us": 1.4},
                    {"producers": 16, "bytes_per_producer": 32768, "t_iss0_us": 0.6}],
    "capacity": [{"producers": 16, "bytes": 1000000}, {"producers": 128, "bytes": 4000000}],
    "provenance": {"source": "test"}})");
}

std::string error_of(const json& j) {
  try {
    platform_from_json(j, "f.json");
  } catch (const xstage::InputError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(Platform, PaperFileLoadsWithItsNumbers) {
  const Platform p = load_platform_file(std::string(XSTAGE_SOURCE_DIR) + "/platforms/paper_8gpu_148sm.json");
  EXPECT_DOUBLE_EQ(p.drain_rate_bytes_per_s, 717e9);
  const Lookup t0 = p.issue_floor_s(148, 32768);
  EXPECT_NEAR(t0.value, 0.76e-6, 1e-15);
  EXPECT_EQ(t0.source, LookupSource::kMeasured);
  EXPECT_NEAR(p.capacity_bytes(148).value / (1024.0 * 1024.0), 4.25, 0.005);
}

TEST(Platform, EmbeddedDefaultParses) {
  const Platform p = default_platform();
  EXPECT_FALSE(p.name.empty());
  EXPECT_GT(p.drain_rate_bytes_per_s, 0);
  EXPECT_FALSE(p.issue_floor.empty());
}

TEST(Platform, RoundTrip) {
  const Platform p = platform_from_json(valid(), "t");
  const Platform q = platform_from_json(platform_to_json(p), "t2");
  EXPECT_EQ(q.name, p.name);
  EXPECT_DOUBLE_EQ(q.drain_rate_bytes_per_s, p.drain_rate_bytes_per_s);
  ASSERT_EQ(q.issue_floor.size(), p.issue_floor.size());
  for (std::size_t i = 0; i < p.issue_floor.size(); ++i) EXPECT_NEAR(q.issue_floor[i].t_iss0_s, p.issue_floor[i].t_iss0_s, 1e-18);
  EXPECT_EQ(q.provenance["source"], "test");
}

TEST(Platform, IssueFloorLookupRules) {
  const Platform p = platform_from_json(valid(), "t");
  EXPECT_EQ(p.issue_floor_s(128, 32768).source, LookupSource::kMeasured);
  const Lookup mid = p.issue_floor_s(128, 49152);  // between 32 and 64 KiB
  EXPECT_EQ(mid.source, LookupSource::kInterpolated);
  EXPECT_NEAR(mid.value, 1.1e-6, 1e-12);
  const Lookup hi = p.issue_floor_s(128, 131072);  // beyond: the last segment's slope
  EXPECT_EQ(hi.source, LookupSource::kExtrapolated);
  EXPECT_NEAR(hi.value, 2.6e-6, 1e-12);
  const Lookup lo = p.issue_floor_s(128, 4096);  // below: never under proportional scaling of the first point
  EXPECT_EQ(lo.source, LookupSource::kExtrapolated);
  EXPECT_GE(lo.value, 0.5e-6 * 4096 / 16384 - 1e-18);
  // K = 100 is nearer to 128 than to 16 on a log scale: the K = 128 curve is used.
  EXPECT_NEAR(p.issue_floor_s(100, 32768).value, 0.8e-6, 1e-15);
  EXPECT_EQ(p.issue_floor_s(100, 32768).source, LookupSource::kInterpolated);
  // K = 20 is nearest to 16, which has one point: proportional scaling in B.
  const Lookup scaled = p.issue_floor_s(20, 65536);
  EXPECT_EQ(scaled.source, LookupSource::kScaled);
  EXPECT_NEAR(scaled.value, 1.2e-6, 1e-15);
}

TEST(Platform, CapacityLookup) {
  const Platform p = platform_from_json(valid(), "t");
  EXPECT_DOUBLE_EQ(p.capacity_bytes(16).value, 1e6);
  EXPECT_NEAR(p.capacity_bytes(72).value, 2.5e6, 1e-6);
  EXPECT_EQ(p.capacity_bytes(72).source, LookupSource::kInterpolated);
  // Outside the measured K the per-producer capacity Q/K follows the end segment's line (62 500 B at K = 16,
  // 31 250 B at 128): K = 8 holds 8 x (62 500 + 8 x 31 250 / 112) B, below the smallest K's Q.
  EXPECT_NEAR(p.capacity_bytes(8).value, 8 * (62500.0 + 8 * 31250.0 / 112), 1e-6);
  EXPECT_EQ(p.capacity_bytes(8).source, LookupSource::kExtrapolated);
  // Above: the line gives 200 x 11 161 B = 2.2 MB, less than K = 128 holds; the aggregate never falls with K.
  EXPECT_DOUBLE_EQ(p.capacity_bytes(200).value, 4e6);
  EXPECT_EQ(p.capacity_bytes(200).source, LookupSource::kExtrapolated);
  // One point: held at every K (nothing says how it scales).
  json one = valid();
  one["capacity"] = json::array({{{"producers", 16}, {"bytes", 1000000}}});
  const Platform p1 = platform_from_json(one, "t");
  EXPECT_DOUBLE_EQ(p1.capacity_bytes(8).value, 1e6);
  EXPECT_DOUBLE_EQ(p1.capacity_bytes(200).value, 1e6);
}

TEST(Platform, CapacityOutsideTheMeasuredKFollowsThePerProducerShare) {
  // The 2 x H200 knees: Q/K = 19.0, 17.9, 15.9 KiB at K = 33, 66, 132. Without K = 132, its Q from K = 33 and 66
  // is 132 x 15.6 KiB = 2.01 MiB (2.04 fitted); holding Q(66), as before, said 1.15 MiB.
  const Platform h = load_platform_file(std::string(XSTAGE_SOURCE_DIR) + "/platforms/h200_x2_measured.json");
  Platform cut = h;
  cut.capacity.erase(cut.capacity.begin() + 2);
  EXPECT_NEAR(cut.capacity_bytes(132).value / h.capacity_bytes(132).value, 1.0, 0.03);
  cut = h;
  cut.capacity.erase(cut.capacity.begin());
  EXPECT_NEAR(cut.capacity_bytes(33).value / h.capacity_bytes(33).value, 1.0, 0.05);
}

TEST(PlatformBadInput, EveryFieldIsChecked) {
  struct Case {
    const char* what;
    std::function<void(json&)> mutate;
    const char* expect;
  };
  const std::vector<Case> cases = {
      {"unknown schema", [](json& j) { j["schema"] = "xstage.platform/9"; }, "schema: unknown schema \"xstage.platform/9\""},
      {"missing schema", [](json& j) { j.erase("schema"); }, "schema: missing"},
      {"missing rate", [](json& j) { j.erase("drain_rate_gbps"); }, "drain_rate_gbps: missing"},
      {"negative rate", [](json& j) { j["drain_rate_gbps"] = -5; }, "drain_rate_gbps: must be >= 0.001 and <= 1e+06 GB/s, got -5"},
      {"zero rate", [](json& j) { j["drain_rate_gbps"] = 0; }, "drain_rate_gbps: must be >= 0.001 and <= 1e+06 GB/s, got 0"},
      {"rate wrong type", [](json& j) { j["drain_rate_gbps"] = "fast"; }, "drain_rate_gbps: must be a number >= 0.001 and <= 1e+06 GB/s, got \"fast\""},
      {"rate NaN", [](json& j) { j["drain_rate_gbps"] = std::nan(""); }, "drain_rate_gbps: must be >= 0.001 and <= 1e+06 GB/s, got nan"},
      {"rate inf", [](json& j) { j["drain_rate_gbps"] = INFINITY; }, "drain_rate_gbps: must be >= 0.001 and <= 1e+06 GB/s, got inf"},
      {"name missing", [](json& j) { j.erase("name"); }, "name: missing"},
      {"name empty", [](json& j) { j["name"] = ""; }, "name: must be a string of 1..256 bytes, got \"\""},
      {"floor not array", [](json& j) { j["issue_floor"] = 3; }, "issue_floor: must be a non-empty array, got 3"},
      {"floor empty", [](json& j) { j["issue_floor"] = json::array(); }, "issue_floor: must be a non-empty array"},
      {"floor producers float", [](json& j) { j["issue_floor"][1]["producers"] = 1.5; }, "issue_floor[1].producers: must be an integer in 1..1000000, got 1.5"},
      {"floor producers negative", [](json& j) { j["issue_floor"][0]["producers"] = -4; }, "issue_floor[0].producers: must be an integer in 1..1000000, got -4"},
      {"floor t negative", [](json& j) { j["issue_floor"][2]["t_iss0_us"] = -0.1; }, "issue_floor[2].t_iss0_us: must be > 0 and < 1e+06 us, got -0.1"},
      {"floor t missing", [](json& j) { j["issue_floor"][2].erase("t_iss0_us"); }, "issue_floor[2].t_iss0_us: missing"},
      {"floor unknown key", [](json& j) { j["issue_floor"][0]["t_iss_us"] = 1; }, "issue_floor[0].t_iss_us: unknown field"},
      {"floor duplicate", [](json& j) { j["issue_floor"][1] = j["issue_floor"][0]; }, "issue_floor[1]: duplicate point"},
      {"capacity bytes string", [](json& j) { j["capacity"][0]["bytes"] = "1MiB"; }, "capacity[0].bytes: must be a number >= 1 and <= 1e+12 bytes, got \"1MiB\""},
      {"capacity duplicate", [](json& j) { j["capacity"][1]["producers"] = 16; }, "capacity[1]: duplicate point for producers 16"},
      {"unknown top-level field", [](json& j) { j["drain_rate"] = 1; }, "drain_rate: unknown field"},
      {"provenance not object", [](json& j) { j["provenance"] = "x"; }, "provenance: must be an object"},
      {"not an object", [](json& j) { j = json::array(); }, "(top level): must be a JSON object"},
      {"rate too large", [](json& j) { j["drain_rate_gbps"] = 1e308; }, "drain_rate_gbps: must be >= 0.001 and <= 1e+06 GB/s, got 1e+308"},
      {"rate too small", [](json& j) { j["drain_rate_gbps"] = 1e-4; }, "drain_rate_gbps: must be >= 0.001 and <= 1e+06 GB/s, got 0.0001"},
      {"floor t one second", [](json& j) { j["issue_floor"][0]["t_iss0_us"] = 1e6; }, "issue_floor[0].t_iss0_us: must be > 0 and < 1e+06 us"},
      {"floor bytes beyond range", [](json& j) { j["issue_floor"][0]["bytes_per_producer"] = 1e13; }, "issue_floor[0].bytes_per_producer: must be >= 1 and <= 1e+12 bytes, got 10000000000000.0"},
      {"floor producers beyond int", [](json& j) { j["issue_floor"][0]["producers"] = 9999999999LL; }, "issue_floor[0].producers: must be an integer in 1..1000000, got 9999999999"},
      {"floor producers beyond int64", [](json& j) { j["issue_floor"][0]["producers"] = 18446744073709551615ULL; }, "issue_floor[0].producers: must be an integer in 1..1000000, got 18446744073709551615"},
      {"capacity producers fraction", [](json& j) { j["capacity"][0]["producers"] = 16.5; }, "capacity[0].producers: must be an integer in 1..1000000, got 16.5"},
      {"capacity bytes zero", [](json& j) { j["capacity"][0]["bytes"] = 0; }, "capacity[0].bytes: must be >= 1 and <= 1e+12 bytes, got 0"},
      {"unknown key escaped", [](json& j) { j["a\nb"] = 1; }, "a\\nb: unknown field"},
      {"name too long", [](json& j) { j["name"] = std::string(1000, 'n'); }, "name: must be a string of 1..256 bytes, got \"nnnn"},
  };
  for (const auto& c : cases) {
    json j = valid();
    c.mutate(j);
    const std::string err = error_of(j);
    EXPECT_NE(err.find(c.expect), std::string::npos) << c.what << ": got \"" << err << "\"";
    EXPECT_EQ(err.rfind("f.json: ", 0), 0u) << c.what << ": message must name the file";
  }
}

TEST(Platform, IntegralNumberIsAnInteger) {
  json j = valid();
  j["issue_floor"][0]["producers"] = 128.0;  // what a writer that keeps every number a double produces
  EXPECT_EQ(platform_from_json(j, "t").issue_floor[0].producers, 128);
}

TEST(PlatformBadInput, Files) {
  EXPECT_THROW(load_platform_file("/nonexistent/p.json"), xstage::InputError);
  const std::string path = testing::TempDir() + "/bad_platform.json";
  {
    std::ofstream(path) << "{\"schema\": \"xstage.platform/1\", ";
  }
  try {
    load_platform_file(path);
    FAIL() << "truncated JSON accepted";
  } catch (const xstage::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("not valid JSON"), std::string::npos) << e.what();
  }
}
