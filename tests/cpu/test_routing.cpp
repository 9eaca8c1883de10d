// Routing generators and routing files.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>
#include <set>

#include "xstage/model/error.hpp"
#include "xstage/moe/routing.hpp"

using namespace xstage::moe;

namespace {
void expect_valid(const Routing& r) {
  EXPECT_NO_THROW(validate_routing(r, "gen"));
  for (int t = 0; t < r.tokens; ++t) {
    float sum = 0;
    for (int j = 0; j < r.top_k; ++j) sum += r.weights[t * r.top_k + j];
    EXPECT_NEAR(sum, 1.0f, 1e-5f);
  }
}
std::string error_of(const nlohmann::json& j) {
  try {
    routing_from_json(j, "r.json");
  } catch (const xstage::InputError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(Routing, BalancedIsExactlyBalanced) {
  const Routing r = balanced_routing(1024, 64, 6, 7);
  expect_valid(r);
  const auto c = tokens_per_expert(r);
  EXPECT_EQ(*std::max_element(c.begin(), c.end()) - *std::min_element(c.begin(), c.end()), 0);  // 6144 / 64 = 96
  EXPECT_EQ(std::accumulate(c.begin(), c.end(), 0LL), 1024LL * 6);
  const Routing ragged = balanced_routing(1000, 48, 8, 3);  // 8000 slots over 48: 166 or 167 each
  const auto rc = tokens_per_expert(ragged);
  EXPECT_LE(*std::max_element(rc.begin(), rc.end()) - *std::min_element(rc.begin(), rc.end()), 1);
  expect_valid(ragged);
  // Seeded: same seed, same routing; another seed, another pairing.
  EXPECT_EQ(balanced_routing(256, 32, 4, 9).expert_ids, balanced_routing(256, 32, 4, 9).expert_ids);
  EXPECT_NE(balanced_routing(256, 32, 4, 9).expert_ids, balanced_routing(256, 32, 4, 10).expert_ids);
}

TEST(Routing, SkewedConcentratesOnHotExperts) {
  const Routing r = skewed_routing(4096, 128, 8, 1.2, 5);
  expect_valid(r);
  const auto c = tokens_per_expert(r);
  const double mean = 4096.0 * 8 / 128;
  EXPECT_GT(c[0], 4 * mean);   // the hottest expert
  EXPECT_GT(c[0], c[10]);
  EXPECT_GT(c[10], c[100]);
  EXPECT_EQ(std::accumulate(c.begin(), c.end(), 0LL), 4096LL * 8);
}

TEST(Routing, FileRoundTripAndBadFiles) {
  const Routing r = skewed_routing(64, 16, 2, 1.0, 1);
  const std::string path = testing::TempDir() + "/routing.json";
  std::ofstream(path) << routing_to_json(r).dump();
  const Routing back = load_routing_file(path);
  EXPECT_EQ(back.expert_ids, r.expert_ids);
  EXPECT_EQ(back.weights, r.weights);

  const nlohmann::json good = routing_to_json(balanced_routing(4, 8, 2, 1));
  auto with = [&](auto mutate) {
    nlohmann::json j = good;
    mutate(j);
    return error_of(j);
  };
  EXPECT_NE(with([](auto& j) { j["schema"] = "xstage.routing/0"; }).find("schema: unknown schema"), std::string::npos);
  EXPECT_NE(with([](auto& j) { j.erase("top_k"); }).find("top_k: missing"), std::string::npos);
  EXPECT_NE(with([](auto& j) { j["top_k"] = 9; }).find("top_k: must be an integer in 1..8, got 9"), std::string::npos);
  EXPECT_NE(with([](auto& j) { j["expert_ids"][3] = 8; }).find("expert_ids[3]: must be an integer in 0..7, got 8"), std::string::npos);
  EXPECT_NE(with([](auto& j) { j["expert_ids"][1] = j["expert_ids"][0]; }).find("repeated within token 0"), std::string::npos);
  EXPECT_NE(with([](auto& j) { j["weights"][2] = -0.5; }).find("weights[2]: must be >= 0 and <= 3.40282e+38, got -0.5"), std::string::npos);
  EXPECT_NE(with([](auto& j) { j["weights"][2] = "a"; }).find("weights[2]: must be a number"), std::string::npos);
  EXPECT_NE(with([](auto& j) { j["expert_ids"].erase(0); }).find("expert_ids: must hold tokens*top_k = 8 entries, got 7"),
            std::string::npos);
  EXPECT_NE(with([](auto& j) { j["extra"] = 1; }).find("extra: unknown field"), std::string::npos);
  // Integers beyond int are refused, not wrapped.
  EXPECT_NE(with([](auto& j) { j["tokens"] = 9999999999LL; }).find("tokens: must be an integer in 1..16777216, got 9999999999"),
            std::string::npos);
  EXPECT_NE(with([](auto& j) { j["tokens"] = 4294967300LL; }).find("tokens: must be an integer in 1..16777216"), std::string::npos);
  EXPECT_NE(with([](auto& j) { j["experts"] = -8; }).find("experts: must be an integer in 1..65536, got -8"), std::string::npos);
  EXPECT_NE(with([](auto& j) { j["expert_ids"][0] = 4294967296LL; }).find("expert_ids[0]: must be an integer in 0..7, got 4294967296"),
            std::string::npos);
  EXPECT_NE(with([](auto& j) { j["expert_ids"][0] = 1.5; }).find("expert_ids[0]: must be an integer in 0..7, got 1.5"),
            std::string::npos);
  EXPECT_NE(with([](auto& j) { j["weights"][0] = 1e39; }).find("weights[0]: must be >= 0 and <= 3.40282e+38, got 1e+39"),
            std::string::npos);
  EXPECT_THROW(load_routing_file("/nonexistent.json"), xstage::InputError);
  EXPECT_THROW(balanced_routing(0, 8, 2, 1), xstage::InputError);
  EXPECT_THROW(balanced_routing(4, 8, 9, 1), xstage::InputError);
  EXPECT_THROW(skewed_routing(4, 8, 2, 0.0, 1), xstage::InputError);
}
