// Platform file (schema "xstage.platform/1"): M_X = (T_iss0(K,B), R, Q(K)) with provenance.
//
// {
//   "schema": "xstage.platform/1",
//   "name": "...", "description": "...",
//   "drain_rate_gbps": 717.0,
//   "issue_floor": [ {"producers": 148, "bytes_per_producer": 32768, "t_iss0_us": 0.76}, ... ],
//   "capacity":    [ {"producers": 148, "bytes": 4456296}, ... ],
//   "provenance":  { free-form object: source, device, date, git revision, command, ... }
// }
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace xstage::model {

inline constexpr std::string_view kPlatformSchema = "xstage.platform/1";

struct IssueFloorPoint {
  int producers;
  double bytes_per_producer;
  double t_iss0_s;
};

struct CapacityPoint {
  int producers;
  double bytes;
  // Aggregate drain of an aligned (isolated) burst past the knee; 0: not measured, use R(K).
  double isolated_drain_rate_bytes_per_s = 0.0;
};

// R(K): the sustained drain rate that periodic bursts of K producers see (optional table).
struct DrainRatePoint {
  int producers;
  double bytes_per_s;
};

// Sustained per-SM Tensor Core rate of the fused kernels' 128 × 128 GEMM tiles at one precision, as the
// traced kernels ran on this platform (optional table, docs/platform.md): FLOP/s per SM, with where it
// comes from (which traced runs, which formula; free-form).
struct GemmRatePoint {
  std::string precision;  // "bf16" or "fp8"
  double flop_per_s_per_sm;
  // How the rate was obtained: "measured" (timed by xstage on this platform), "derived" (computed from a named
  // table of published times; the provenance names it) or "datasheet" (a vendor's peak figure).
  std::string source = "measured";
  nlohmann::json provenance = nlohmann::json::object();
};
// The datasheet fallback where a platform states no measured rate: the H100/H200 SXM dense Tensor Core
// rates over 132 SMs, 989.4 TFLOP/s bf16 and twice that FP8 (an upper bound a kernel does not reach).
inline constexpr double kDatasheetSmFlopPerS = 989.4e12 / 132.0;
inline constexpr double kDatasheetFp8SmFlopPerS = 2.0 * kDatasheetSmFlopPerS;
struct GemmRate {
  double flop_per_s_per_sm;
  std::string source;  // the platform entry's source ("measured", "derived", "datasheet"), else "datasheet"
};

// How a T_iss0 or Q value was obtained from the measured points.
enum class LookupSource { kMeasured, kInterpolated, kExtrapolated, kScaled, kOverride };
const char* to_string(LookupSource s);

struct Lookup {
  double value;
  LookupSource source;
};

// The physical limits a platform was fitted under: the link's rate per direction (every drain rate of the
// file must stay at or below it), the copy engine's measured rate between the same GPUs, the SM count.
struct PhysicalBounds {
  double link_rate_bytes_per_s = 0.0;  // 0: not stated
  std::string link_source;             // where the link rate comes from (a datasheet, a specification)
  double copy_engine_bytes_per_s = 0.0;  // 0: not measured
  int sms = 0;                           // 0: not stated
};

struct Platform {
  std::string name;
  std::string description;
  double drain_rate_bytes_per_s = 0.0;
  std::vector<IssueFloorPoint> issue_floor;
  std::vector<CapacityPoint> capacity;
  // Optional refinements (docs/platform.md); absent fields keep the paper's model.
  std::vector<DrainRatePoint> drain_rate_by_producers;  // R(K); empty: drain_rate_bytes_per_s for every K
  double knee_ramp_s = 0.0;            // τ of the isolated knee (burst_gap.hpp); 0: eq. 7's corner
  double burst_overhead_s = 0.0;       // h: probe time per burst outside issue and recorded gap
  double zero_gap_overhead_s = 0.0;    // h at a zero-gap record (includes the loop's own cycles)
  // Local memory's own drain: what back-to-back local stores of the calibration's local control meet
  // (fitted from its zero-gap records); 0: not measured. Never used for remote stores.
  double local_drain_rate_bytes_per_s = 0.0;
  std::vector<GemmRatePoint> gemm_rate_per_sm;  // empty: the datasheet for every precision
  PhysicalBounds bounds;  // optional; when the link rate is stated, the loader refuses any drain rate above it
  nlohmann::json provenance = nlohmann::json::object();

  // T_iss0 at (K, B). Rule (documented in docs/platform.md):
  //  1. take the measured producer count K' nearest to K on a log scale (ties: the larger);
  //  2. at K', interpolate linearly in B between the measured points that bracket B; outside them,
  //     extrapolate the nearest segment's line (below the range never under T_min·B/B_min);
  //     with one point only, scale in proportion to B (constant per-producer issue rate).
  Lookup issue_floor_s(int producers, double bytes_per_producer) const;
  // Q(K): linear interpolation in K between measured points. Outside them, with two or more points, the
  // per-producer capacity Q/K extrapolated along the end segment's line (never less in all than the largest
  // K's Q above the range, never more than the smallest K's below it); with one point, that point's Q.
  Lookup capacity_bytes(int producers) const;
  // R(K): linear in K between the points of drain_rate_by_producers, clamped outside; without the
  // table, drain_rate_bytes_per_s.
  double drain_rate_at(int producers) const;
  // Drain of an aligned burst past the knee at K: the nearest capacity point's isolated rate (linear
  // in K between points), else R(K).
  double isolated_drain_rate_at(int producers) const;
  // Per-SM GEMM rate at `precision` ("bf16" or "fp8"; InputError otherwise): the measured table's value,
  // else the datasheet's. The one source of every mainloop-time estimate.
  GemmRate gemm_rate_at(std::string_view precision) const;
};

// Parses and validates; throws xstage::InputError naming the field (e.g. "issue_floor[1].t_iss0_us")
// and the bad value. `origin` (a path or "embedded") is put into the messages.
Platform platform_from_json(const nlohmann::json& j, std::string_view origin);
Platform load_platform_file(const std::string& path);
nlohmann::json platform_to_json(const Platform& p);

// The default platform compiled into the binary (see cmake/XstageDeps.cmake).
std::string_view embedded_default_platform_json();
std::string_view embedded_default_platform_origin();
Platform default_platform();

// `path` empty → the embedded default; otherwise the file.
Platform load_platform_or_default(const std::string& path);

}  // namespace xstage::model
