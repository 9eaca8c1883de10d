// The planner's commands as functions over their schema'd JSON: a request object (the command's arguments by
// their snake_case names, e.g. {"producers": 132, "bytes_per_producer": 32768, "gap_us": 2}) in, the command's
// JSON output (what `xstage COMMAND --json` prints) out. The C ABI (planner_c_api.h), the Python planner and the
// CLI call these, so the three answer alike by construction.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "xstage/model/audit.hpp"
#include "xstage/model/error.hpp"
#include "xstage/model/platform.hpp"
#include "xstage/planner/simulate.hpp"

namespace xstage::planner {

// A bad request. what(): "<argument>: <rule>, got <value>" or "<argument> is required", the argument named by
// its key in the request.
struct RequestError : InputError {
  using InputError::InputError;
};

// The version every output is stamped with (the project's version).
const char* version();

// "embedded" for an empty path, else the absolute, normalized path: where an output says its platform came from.
std::string platform_source(const std::string& path);

// Stamps an output with its schema and the version; with a platform also {"platform": {"source", "name"}}.
void stamp_output(nlohmann::json& j, const std::string& schema);
void stamp_output(nlohmann::json& j, const std::string& schema, const std::string& platform_path,
                  const model::Platform& platform);

// Largest producer count measured in the platform's issue floors (the machine's SM count in a calibration that ran
// one producer per SM): the K of commands given none.
int platform_max_producers(const model::Platform& p);

// --- model: the Burst–Gap model and design test of one burst shape (xstage.model/1) --------------------
struct ModelRequest {
  std::string platform;  // empty: the embedded platform
  int producers = 0;
  double bytes_per_producer = 0;
  double gap_us = 0;
  std::optional<double> t_iss0_us;
  std::optional<double> capacity_bytes;
};
// Reads and checks a request (the CLI's flags' rules: producers in [1, 1e6], bytes_per_producer in [1, 1e12],
// gap_us in [0, 1e6], t_iss0_us and capacity_bytes > 0 and in range, platform an existing file). Throws
// RequestError.
ModelRequest model_request(const nlohmann::json& request);
model::BurstGapAudit model_audit(const ModelRequest& request, const model::Platform& platform);
nlohmann::json model_output(const ModelRequest& request);
inline nlohmann::json model_output(const nlohmann::json& request) { return model_output(model_request(request)); }

// --- simulate: periodic bursts, a schedule file or a burst-gap kernel description (simulate.hpp) ----------
// Reads and checks a request as the CLI's flags do: each value's rule, then which arguments exclude which (schedule
// and kernel exclude the periodic arguments and each other; kernel also capacity_bytes, completion_coupled,
// latency_us and per_burst) and latency_us requires completion_coupled. Output files (the CLI's --trace) are not
// part of a request. Throws RequestError.
SimulateRequest simulate_request(const nlohmann::json& request);
inline nlohmann::json simulate_output(const nlohmann::json& request) {
  return simulate_output(simulate_request(request));
}

}  // namespace xstage::planner
