// The model, the simulator and the fit against the committed H200-pair calibration
// (results/h200-x2/calibration/) and the paper's platform file.
#include <gtest/gtest.h>

#include <filesystem>
#include <unistd.h>

#include <cstdio>

#include <algorithm>
#include <cmath>
#include <string>

#include "xstage/model/audit.hpp"
#include "xstage/model/calibration_fit.hpp"
#include "xstage/model/error.hpp"
#include "xstage/model/platform.hpp"
#include "xstage/model/records.hpp"
#include "cli_runner.hpp"
#include "xstage/sim/design_check.hpp"
#include "xstage/sim/fidelity.hpp"
#include "xstage/sim/simulator.hpp"

using namespace xstage;

namespace {
std::string src(const std::string& rel) { return std::string(XSTAGE_SOURCE_DIR) + "/" + rel; }
const std::string kCalib = "results/h200-x2/calibration/";

const sim::FidelityReport& h200_report() {
  static const sim::FidelityReport rep = [] {
    sim::FidelityOptions o;
    o.zero_gap_loops = sim::load_zero_gap_loops(src(kCalib + "raw.json"));
    return sim::fidelity_report(model::load_platform_file(src("platforms/h200_x2_measured.json")),
                                model::load_records_csv(src(kCalib + "records.csv")), o);
  }();
  return rep;
}
double rel(double pred, double meas) { return std::fabs(pred - meas) / meas; }
}  // namespace

TEST(Fidelity, EveryPeriodicRecordIsPredicted) {
  // The bar: every periodic remote record's T_iss and T_period within 5 %, closed form and simulator, except
  // K = 33, whose records want R(33) = 507 GB/s, above the 450 GB/s link: the platform holds R(33) at the
  // bound and the fit reports the misfit (docs/model.md, "Cross-validation and the physical bound of the
  // fit"). There the median producer runs ahead of the link (periods 12-13 % below V/450 GB/s); the stall
  // the model then predicts is what T_iss misses (31 % at 8 KiB, where T_iss is 0.22 us).
  const auto& rep = h200_report();
  EXPECT_EQ(rep.periodic_model_t_iss.points, 45);
  int k33 = 0;
  for (const auto& p : rep.points) {
    if (p.record.mode != model::BurstMode::kPeriodic) continue;
    const auto& r = p.record;
    const std::string at = "K " + std::to_string(r.producers) + " B " + std::to_string(r.bytes_per_producer) + " G " +
                           std::to_string(r.gap_s * 1e6);
    if (r.producers == 33 && r.bytes_per_producer > 4096) {
      ++k33;
      EXPECT_GT(p.model_t_period_s, r.t_period_s) << at;  // the bound: never faster than the link
      EXPECT_LT(rel(p.model_t_period_s, r.t_period_s), 0.15) << at;
      EXPECT_LT(rel(p.sim_t_period_s, r.t_period_s), 0.15) << at;
      EXPECT_LT(rel(p.model_t_iss_s, r.t_iss_s), 0.32) << at;
      continue;
    }
    EXPECT_LT(rel(p.model_t_period_s, r.t_period_s), 0.05) << at;
    EXPECT_LT(rel(p.sim_t_period_s, r.t_period_s), 0.05) << at;
    EXPECT_LT(rel(p.model_t_iss_s, r.t_iss_s), 0.05) << at;
    EXPECT_LT(rel(p.sim_t_iss_s, r.t_iss_s), 0.05) << at;
  }
  EXPECT_EQ(k33, 6);
}

TEST(Fidelity, RobustSlopeMissesTheCornerThatTheMinimaxRateMeets) {
  // Why R(K) is the Chebyshev rate of the period law: with the robust slope through the origin of the
  // zero-gap periods (377.5 GB/s at K = 132), the first gap past G* (T_iss 0.94 µs, period 11.56 µs) is
  // missed by 10 % in T_iss although its period is within 1 %.
  model::Platform p = model::load_platform_file(src("platforms/h200_x2_measured.json"));
  model::FitOptions fo;
  fo.zero_gap_loops = model::load_zero_gap_loops(src(kCalib + "raw.json"));
  const model::FitResult fit = model::fit_platform(model::load_records_csv(src(kCalib + "records.csv")), fo);
  for (auto& d : p.drain_rate_by_producers)
    for (const auto& rp : fit.rate_by_producers)
      if (rp.producers == d.producers) d.bytes_per_s = rp.fit.drain_rate_bytes_per_s;
  sim::FidelityOptions o;
  o.zero_gap_loops = fo.zero_gap_loops;
  const sim::FidelityReport robust = sim::fidelity_report(p, model::load_records_csv(src(kCalib + "records.csv")), o);
  EXPECT_GT(robust.periodic_model_t_iss.max_rel, 0.09);
  EXPECT_LT(robust.periodic_model_t_period.max_rel, 0.05);
  for (const auto& rp : fit.rate_by_producers) {
    EXPECT_LT(rp.max_rel_error, 0.05) << rp.producers;
    EXPECT_NEAR(rp.bytes_per_s / rp.fit.drain_rate_bytes_per_s, 1.0, 0.02) << rp.producers;  // a small correction
  }
}

TEST(Fidelity, GapSweepMedians) {
  const auto& rep = h200_report();
  EXPECT_GE(rep.sweep_model_t_iss.points, 17);
  EXPECT_LE(rep.sweep_model_t_iss.median_rel, 0.01);
  EXPECT_LE(rep.sweep_model_t_period.median_rel, 0.02);
  EXPECT_LE(rep.sweep_sim_t_iss.median_rel, 0.01);
  EXPECT_LE(rep.sweep_sim_t_period.median_rel, 0.02);
}

TEST(Fidelity, SimulatorRecoversBurstsLargerThanTheAlignedCapacity) {
  // K = 132, B = 32 KiB (4.125 MiB, above Q(132)) with G >= 12.2 µs: measured T_iss 0.578-0.590 µs.
  int n = 0;
  for (const auto& p : h200_report().points) {
    const auto& r = p.record;
    if (r.mode != model::BurstMode::kPeriodic || r.producers != 132 || r.gap_s < 12e-6) continue;
    EXPECT_LT(rel(p.sim_t_iss_s, r.t_iss_s), 0.025) << r.gap_s;
    EXPECT_LT(rel(p.sim_t_period_s, r.t_period_s), 0.01) << r.gap_s;
    ++n;
  }
  EXPECT_EQ(n, 10);
}

TEST(Fidelity, IsolatedBurstsFollowTheRampedKnee) {
  const auto& rep = h200_report();
  EXPECT_EQ(rep.isolated_model_t_iss.points, 69);
  EXPECT_LE(rep.isolated_model_t_iss.median_rel, 0.05);
  EXPECT_LE(rep.isolated_model_t_iss.max_rel, 0.15);
  // Past the knee (where the floor points that define T_iss0 do not count).
  EXPECT_GE(rep.isolated_past_knee_model_t_iss.points, 30);
  EXPECT_LE(rep.isolated_past_knee_model_t_iss.median_rel, 0.05);
  EXPECT_LE(rep.isolated_past_knee_model_t_iss.max_rel, 0.15);
  // The simulator drains the same ramp with first-come service; the knee's (Q, R_iso) are fitted for
  // both predictors, so it meets the same bar.
  EXPECT_EQ(rep.isolated_sim_t_iss.points, 69);
  EXPECT_LE(rep.isolated_sim_t_iss.median_rel, 0.05);
  EXPECT_LE(rep.isolated_sim_t_iss.max_rel, 0.15);
  EXPECT_LE(rep.isolated_past_knee_sim_t_iss.median_rel, 0.05);
  EXPECT_LE(rep.isolated_past_knee_sim_t_iss.max_rel, 0.15);
}

// Largest relative error of the simulator's isolated predictions with the platform `p` (its floors, Q, R_iso, τ).
static double simulated_isolated_max_error(const model::Platform& p, const std::vector<model::CalibrationRecord>& records) {
  double worst = 0.0;
  for (const auto& r : records) {
    if (r.mode != model::BurstMode::kIsolated || r.target != model::StoreTarget::kRemote) continue;
    const double t = sim::isolated_issue_time_s(r.producers, r.bytes_per_producer,
                                                p.issue_floor_s(r.producers, r.bytes_per_producer).value,
                                                p.isolated_drain_rate_at(r.producers), p.capacity_bytes(r.producers).value,
                                                p.knee_ramp_s);
    worst = std::max(worst, rel(t, r.t_iss_s));
  }
  return worst;
}

TEST(Fidelity, KneeFittedForTheClosedFormAloneMissesInTheSimulator) {
  // First-come service leaves the last producers a tail at their own rate (about 0.4 of the remaining
  // floor): with (Q, R_iso) fitted for the closed form alone, the simulator misses K = 33, 32 KiB by
  // 16 %; fitted for both predictors, every isolated record is within 15 % in both.
  const auto records = model::load_records_csv(src(kCalib + "records.csv"));
  model::FitOptions fo;
  fo.zero_gap_loops = model::load_zero_gap_loops(src(kCalib + "raw.json"));
  const model::FitResult closed_only = model::fit_platform(records, fo);
  EXPECT_GT(simulated_isolated_max_error(closed_only.platform, records), 0.15);
  fo.isolated_simulator = sim::isolated_issue_time_s;
  const model::FitResult joint = model::fit_platform(records, fo);
  EXPECT_LE(simulated_isolated_max_error(joint.platform, records), 0.15);
  for (const auto& k : joint.knees) {
    if (!k.knee_found) continue;
    EXPECT_LE(k.ramped_max_rel_residual, 0.15) << k.producers;
    EXPECT_LE(k.simulated_max_rel_residual, 0.15) << k.producers;
    EXPECT_GT(k.simulated_max_rel_residual, 0.0) << k.producers;
  }
}

TEST(Fidelity, LocalControlIsReportedNotFitted) {
  const auto& rep = h200_report();
  EXPECT_GT(rep.local_controls.size(), 40u);
  EXPECT_NEAR(rep.local_flat_t_iss_s, 0.547e-6, 0.01e-6);
  EXPECT_NEAR(rep.local_zero_gap_ratio, 1.22, 0.02);  // local memory's own drain at G = 0
  // ... which the platform's local drain (fitted from the local zero-gap records) predicts.
  EXPECT_NEAR(rep.local_drain_rate_bytes_per_s, 4.51e12, 0.05e12);
  EXPECT_LT(rep.local_zero_gap_model_rel_error, 0.01);
  EXPECT_GT(rep.local_zero_gap_model_t_iss_s, 0.0);
}

TEST(Fidelity, CommittedPlatformIsTheFitOfTheCommittedRecords) {
  // The committed platform is `xstage fit --records records.csv --raw raw.json`: R(K) sees the zero-gap
  // records through their measured loop gaps; the knee is fitted for the closed form and the simulator.
  model::FitOptions fo;
  fo.zero_gap_loops = model::load_zero_gap_loops(src(kCalib + "raw.json"));
  fo.isolated_simulator = sim::isolated_issue_time_s;  // as `xstage fit` does
  const model::Platform p = model::load_platform_file(src("platforms/h200_x2_measured.json"));
  fo.max_rate_bytes_per_s = p.bounds.link_rate_bytes_per_s;  // `xstage fit --link-gbps 450`
  ASSERT_DOUBLE_EQ(fo.max_rate_bytes_per_s, 450e9);
  const model::FitResult fit = model::fit_platform(model::load_records_csv(src(kCalib + "records.csv")), fo);
  EXPECT_NEAR(fit.platform.drain_rate_bytes_per_s / p.drain_rate_bytes_per_s, 1.0, 1e-9);
  ASSERT_EQ(fit.platform.drain_rate_by_producers.size(), p.drain_rate_by_producers.size());
  for (std::size_t i = 0; i < p.drain_rate_by_producers.size(); ++i)
    EXPECT_NEAR(fit.platform.drain_rate_by_producers[i].bytes_per_s / p.drain_rate_by_producers[i].bytes_per_s, 1.0, 1e-9);
  ASSERT_EQ(fit.platform.capacity.size(), p.capacity.size());
  for (std::size_t i = 0; i < p.capacity.size(); ++i) {
    EXPECT_NEAR(fit.platform.capacity[i].bytes / p.capacity[i].bytes, 1.0, 1e-9);
    EXPECT_NEAR(fit.platform.capacity[i].isolated_drain_rate_bytes_per_s / p.capacity[i].isolated_drain_rate_bytes_per_s,
                1.0, 1e-9);
  }
  EXPECT_NEAR(fit.platform.knee_ramp_s, p.knee_ramp_s, 1e-12);
  EXPECT_NEAR(fit.platform.burst_overhead_s, p.burst_overhead_s, 1e-12);
  EXPECT_NEAR(fit.platform.zero_gap_overhead_s, p.zero_gap_overhead_s, 1e-12);
  // Measured shape of the refinements: a ramp of about 1.8 µs, h ≈ 0.18 µs, R(K) falling with K past 33.
  EXPECT_NEAR(p.knee_ramp_s, 1.8e-6, 0.3e-6);
  EXPECT_NEAR(p.burst_overhead_s, 0.177e-6, 0.01e-6);
  EXPECT_GT(p.drain_rate_at(33), p.drain_rate_at(132));
}

TEST(Fidelity, FitCommandWritesTheCommittedKnee) {
  // `xstage fit` fits the knee for the simulator too: its capacities are the committed platform's.
  const std::string out = ::testing::TempDir() + "/xstage_fit_knee_platform_" + std::to_string(::getpid()) + ".json";
  const xstage::test::CliRun r = xstage::test::run_cli("fit --records " + src(kCalib + "records.csv") + " --raw " +
                                                       src(kCalib + "raw.json") + " --out " + out + " --force --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const model::Platform fitted = model::load_platform_file(out);
  const model::Platform p = model::load_platform_file(src("platforms/h200_x2_measured.json"));
  ASSERT_EQ(fitted.capacity.size(), p.capacity.size());
  for (std::size_t i = 0; i < p.capacity.size(); ++i) {
    EXPECT_NEAR(fitted.capacity[i].bytes / p.capacity[i].bytes, 1.0, 1e-9);
    EXPECT_NEAR(fitted.capacity[i].isolated_drain_rate_bytes_per_s / p.capacity[i].isolated_drain_rate_bytes_per_s, 1.0, 1e-9);
  }
  // The parsed summary is kept alive: iterating over a member of a temporary reads freed memory.
  const nlohmann::json summary = nlohmann::json::parse(r.out);
  const nlohmann::json& knees = summary.at("knees");
  ASSERT_TRUE(knees.is_array());
  ASSERT_EQ(knees.size(), p.capacity.size()) << "one fitted knee per committed capacity point";
  for (const auto& k : knees) EXPECT_LE(k.at("simulated_max_rel_residual").get<double>(), 0.15);
  std::remove(out.c_str());
}

TEST(Fidelity, ReportCarriesItsProvenance) {
  // The report names the build's revision, the command and every input with its size.
  const std::string records = src(kCalib + "records.csv"), raw = src(kCalib + "raw.json");
  const xstage::test::CliRun r = xstage::test::run_cli("fidelity --records " + records + " --raw " + raw + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  const nlohmann::json& prov = j.at("provenance");
  EXPECT_FALSE(prov.at("git_revision").get<std::string>().empty());
  EXPECT_EQ(prov.at("command"), nlohmann::json({"xstage", "fidelity", "--records", records, "--raw", raw, "--json"}));
  ASSERT_EQ(prov.at("inputs").size(), 2u);
  EXPECT_EQ(prov["inputs"][0]["path"], records);
  EXPECT_EQ(prov["inputs"][1]["path"], raw);
  EXPECT_EQ(prov["inputs"][1]["bytes"], std::filesystem::file_size(raw));
}

TEST(Fidelity, VerdictOfTheGapSweepAgreesWithTheRecords) {
  // G = 13.86 µs: measured T_iss = T_iss0; the aligned capacity bound is violated, the sustained verdict is piggyback.
  const model::Platform p = model::load_platform_file(src("platforms/h200_x2_measured.json"));
  const model::BurstGapAudit a = model::audit_burst_gap(p, {132, 32768, 13.86e-6, std::nullopt, std::nullopt});
  EXPECT_NEAR(a.t_iss_s, 0.579e-6, 0.005e-6);
  EXPECT_FALSE(a.verdict.capacity_bound_ok);
  EXPECT_EQ(a.verdict.action, model::DesignAction::kReshape);  // the aligned worst case, shown as such
  EXPECT_EQ(a.sustained_action, model::DesignAction::kKeep);
  EXPECT_STREQ(a.binding_bound, "capacity (aligned bursts only)");
  const model::BurstGapAudit b = model::audit_burst_gap(p, {132, 32768, 5e-6, std::nullopt, std::nullopt});
  EXPECT_EQ(b.sustained_action, model::DesignAction::kReshape);
  EXPECT_STREQ(b.binding_bound, "rate");
  EXPECT_GT(b.overhead_s, 5e-6);
}

TEST(Fidelity, PaperAuditStillComesOutOnThePaperPlatform) {
  const model::Platform p = model::load_platform_file(src("platforms/paper_8gpu_148sm.json"));
  model::AttentionInput in;
  in.producers = 148;
  in.sigma_s = 0.79e-6;
  in.seq_lens = {8192};
  const model::AttentionAudit a = model::audit_attention(p, in);
  EXPECT_NEAR(a.recovery_gap_s * 1e6, 6.00, 0.005);
  EXPECT_NEAR(a.burst.q_peak0_bytes / (1024.0 * 1024.0), 4.11, 0.005);
  EXPECT_EQ(a.sufficient_seq_len_tokens, 1024);
}

TEST(Fidelity, BadRawFileIsAnInputError) {
  EXPECT_THROW(sim::load_zero_gap_loops(src(kCalib + "records.csv")), InputError);
  EXPECT_THROW(sim::load_zero_gap_loops("/nonexistent/raw.json"), InputError);
}

// The traced MoE kernels cover their store span (T_cover > T_RS), so eq. 15 predicts no stall on them and they
// measure none: they are no test of the stall prediction (a 0 against a 0 cannot fail). That test is
// StallCheck.* (test_stall_check.cpp: planted schedules with a known nonzero stall) and the Table 2 stall rows of
// `xstage paper`. Here: the rows load, every traced T_RS is covered, and the local-store control moves the layer
// time by less than 2 %.
TEST(Fidelity, TracedMoeTilesCoverTheirStoreSpan) {
  int rows = 0, controlled = 0;
  for (const char* f : {"results/h200-x2/moe/moe_wave_trace.json", "results/h200-x2/moe/moe_trace_fp8_qwen3.json",
                        "results/h200-x2/moe/moe_trace_run_qwen3-235b-a22b.json",
                        "results/h200-x2/moe/moe_trace_run_dit-moe-g2-16e2a.json"}) {
    for (const auto& r : sim::tile_stall_rows(src(f))) {
      EXPECT_GT(r.store_span_s, 1e-6);
      EXPECT_GT(r.cover_s, r.store_span_s) << f << " " << r.shape << " " << r.schedule;  // eq. 15 predicts 0
      EXPECT_EQ(r.predicted_stall_s, 0.0);
      if (r.layer_local_s > 0) {
        ++controlled;
        EXPECT_LT(std::fabs(r.residual_s) / r.layer_remote_s, 0.02);  // local stores change layer time < 2 %
      }
      ++rows;
    }
  }
  EXPECT_EQ(rows, 14);
  EXPECT_EQ(controlled, 10);
  EXPECT_THROW(sim::tile_stall_rows(src(kCalib + "raw.json")), InputError);
}

TEST(Fidelity, AsBuiltVerdictOfRecurringBursts) {
  const model::Platform p = model::load_platform_file(src("platforms/h200_x2_measured.json"));
  // The Ulysses epilogue burst (132 x 32 KiB) every Q-loop of M = 8192 (64 KV tiles x 0.79 µs): the
  // aligned first burst stalls on Q, the steady state does not (rate bound: V/R = 11.5 µs < 51 µs).
  const auto a = sim::recurring_burst_check(p, 132, 32768, 64 * 0.79e-6);
  EXPECT_EQ(a.action, model::DesignAction::kKeep);
  EXPECT_STREQ(a.binding_bound, "capacity (first aligned burst only)");
  EXPECT_GT(a.first_burst_stall_s, 1e-6);
  EXPECT_LT(a.steady_stall_s, 0.01e-6);
  // A gap below G* stalls every burst: the rate bound binds, by about V/R − G − T_iss0 − (the stagger).
  const auto b = sim::recurring_burst_check(p, 132, 32768, 5e-6);
  EXPECT_EQ(b.action, model::DesignAction::kReshape);
  EXPECT_STREQ(b.binding_bound, "rate");
  EXPECT_NEAR(b.steady_stall_s, model::issue_overhead_s(p.issue_floor_s(132, 32768).value, 132 * 32768.0,
                                                        p.drain_rate_at(132), 5e-6),
              0.5e-6);
}

TEST(Fidelity, UlyssesResidualAsBuilt) {
  // The fused TMA-epilogue attention: predicted residual (first aligned burst's stall + uncovered tail)
  // against fused-tma − fa-only-tma, within the sweep's timing noise (the 65536 x 4 point measured
  // −22 µs: about 0.3 % of the attention); both at most 0.5 % of the attention for M >= 32K.
  const model::Platform p = model::load_platform_file(src("platforms/h200_x2_measured.json"));
  const auto rows = sim::ulysses_rows(p, src("results/h200-x2/ulysses/ulysses.json"));
  ASSERT_EQ(rows.size(), 9u);
  for (const auto& r : rows) {
    const std::string at = std::to_string(r.seq_len) + " x " + std::to_string(r.heads_per_gpu) + " " + r.tile_order;
    EXPECT_STRNE(r.binding_bound, "rate") << at;  // G_Qloop >> G*: the steady state never stalls
    EXPECT_LT(r.steady_stall_s, 0.01e-6) << at;
    EXPECT_LT(std::fabs(r.predicted_residual_s - r.measured_residual_s), 0.003 * r.fa_s + 2e-6) << at;
    if (r.seq_len >= 32768) {
      EXPECT_LT(r.predicted_residual_s, 0.005 * r.fa_s) << at;
      EXPECT_LT(r.measured_residual_s, 0.0051 * r.fa_s) << at;
    }
  }
}

TEST(Fidelity, OptionalPlatformFieldsAreRangeChecked) {
  nlohmann::json j = nlohmann::json::parse(model::embedded_default_platform_json());
  const model::Platform ok = model::platform_from_json(j, "test");
  EXPECT_EQ(model::platform_from_json(model::platform_to_json(ok), "round trip").drain_rate_by_producers.size(),
            ok.drain_rate_by_producers.size());
  auto fails_naming = [](nlohmann::json bad, const std::string& field) {
    try {
      model::platform_from_json(bad, "test");
      ADD_FAILURE() << "accepted bad " << field;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  };
  nlohmann::json a = j;
  a["knee_ramp_us"] = -1.0;
  fails_naming(a, "knee_ramp_us");
  a = j;
  a["burst_overhead_us"] = 5000.0;
  fails_naming(a, "burst_overhead_us");
  a = j;
  a["drain_rate_by_producers"][0]["drain_rate_gbps"] = 0.0;
  fails_naming(a, "drain_rate_by_producers[0].drain_rate_gbps");
  a = j;
  a["drain_rate_by_producers"].push_back(a["drain_rate_by_producers"][0]);
  fails_naming(a, "drain_rate_by_producers[4]");
  a = j;
  a["capacity"][0]["drain_rate_gbps"] = "fast";
  fails_naming(a, "capacity[0].drain_rate_gbps");
  a = j;
  a["gemm_rate_per_sm"][0]["precision"] = "fp16";
  fails_naming(a, "gemm_rate_per_sm[0].precision");
  a = j;
  a["gemm_rate_per_sm"][1]["tflops_per_sm"] = 0.0;
  fails_naming(a, "gemm_rate_per_sm[1].tflops_per_sm");
  a = j;
  a["gemm_rate_per_sm"].push_back(a["gemm_rate_per_sm"][0]);
  fails_naming(a, "gemm_rate_per_sm[2]");
  a = j;
  a["gemm_rate_per_sm"][0]["tflops"] = 1.0;
  fails_naming(a, "tflops");
  a = j;
  a["local_drain_rate_gbps"] = -1.0;
  fails_naming(a, "local_drain_rate_gbps");
  // The round trip keeps both.
  const model::Platform back = model::platform_from_json(model::platform_to_json(ok), "round trip");
  EXPECT_EQ(back.gemm_rate_per_sm.size(), 2u);
  EXPECT_EQ(back.local_drain_rate_bytes_per_s, ok.local_drain_rate_bytes_per_s);
  // Old files (no optional field) still load and keep the paper's model.
  const model::Platform paper = model::load_platform_file(src("platforms/paper_8gpu_148sm.json"));
  EXPECT_EQ(paper.drain_rate_at(148), paper.drain_rate_bytes_per_s);
  EXPECT_EQ(paper.knee_ramp_s, 0.0);
  EXPECT_EQ(paper.isolated_drain_rate_at(148), paper.drain_rate_bytes_per_s);
}

TEST(Fidelity, PlanAsBuiltVerdictOfTheBuiltInWorkloads) {
  // The embedded platform (the H200 pair): the kernels as built measured no backpressure; the as-built
  // verdict says keep for every attention workload and every MoE shape in both precisions (mainloops
  // at the platform's traced GEMM rates), and the aligned worst case (eq. 10) is still shown as reshape.
  const xstage::test::CliRun r = xstage::test::run_cli("plan --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_FALSE(j["attention"].empty());
  for (const auto& w : j["attention"]) {
    EXPECT_EQ(w["as_built"]["action"], "keep") << w["name"];
    EXPECT_NE(w["as_built"]["binding_bound"], "rate") << w["name"];
    EXPECT_EQ(w["points"][0]["critical_stall_us"].get<double>(), 0.0) << w["name"];
    EXPECT_EQ(w["points"][0]["action"], "reshape") << w["name"];  // aligned, capacity
    EXPECT_FALSE(w["points"][0]["capacity_bound_ok"].get<bool>()) << w["name"];
  }
  int shapes = 0;
  for (const auto& m : j["moe"]) {
    EXPECT_EQ(m["wave_as_built"]["action"], "keep") << m["name"] << " " << m["precision"];
    ++shapes;
  }
  EXPECT_EQ(shapes, 14);
}
