/* Typed C ABI of the planner library (exported by libxstage_capi.so): each command takes its request as JSON
 * text (an object of the command's arguments by their snake_case names, include/xstage/planner/requests.hpp)
 * and returns the command's JSON output, the same object `xstage COMMAND ... --json` prints.
 *
 * Every function returns 0 and sets *response (and *error to NULL) on success; 2 for a bad request, 1 for any
 * other failure, each with *response NULL and *error a one-line message naming the argument
 * ("producers: must be > 0, got 0"). Strings returned are malloc'ed and owned by the caller: free them with
 * xstage_planner_free. Thread-safe; never throws across the boundary; no GPU needed.
 */
#ifndef XSTAGE_PLANNER_C_API_H
#define XSTAGE_PLANNER_C_API_H

#ifdef __cplusplus
extern "C" {
#endif

/* 1: xstage_planner_model. 2: xstage_planner_simulate. 3: xstage_planner_plan, xstage_planner_plan_attn.
 * 4: xstage_planner_plan_moe. 5: xstage_planner_fit, xstage_planner_fidelity. */
#define XSTAGE_PLANNER_C_API_VERSION 5
int xstage_planner_c_api_version(void);

/* xstage model: {"producers", "bytes_per_producer", "gap_us", "t_iss0_us", "capacity_bytes", "platform"} ->
 * xstage.model/1. */
int xstage_planner_model(const char* request_json, char** response_json, char** error);

/* xstage simulate: periodic bursts {"producers", "bytes_per_producer", "gap_us", "bursts", "t_iss0_us",
 * "capacity_bytes", "completion_coupled", "latency_us", "per_burst"}, or {"schedule": FILE} (xstage.schedule/1), or
 * {"kernel": FILE} (xstage.kernel/1, kind "burst_gap"); each with an optional "platform" -> xstage.simulate/1
 * (xstage.simulate.kernel/1 for a kernel). The CLI's --trace (an output file) is not part of a request. */
int xstage_planner_simulate(const char* request_json, char** response_json, char** error);

/* xstage plan: {"producers", "platform"} -> xstage.plan/1, the design test of the built-in DiT attention and MoE
 * workloads (include/xstage/planner/plan.hpp). */
int xstage_planner_plan(const char* request_json, char** response_json, char** error);

/* xstage plan attn: {"producers", "block_m", "head_dim", "block_n", "out_bytes", "sigma_us", "qk_cover_us",
 * "latency_us", "cover_us", "seq" (a list of sequence lengths), "heads_per_gpu", "batch", "platform"} ->
 * xstage.plan.attn/1, one attention kernel's epilogue All-to-All (eq. 17-20). */
int xstage_planner_plan_attn(const char* request_json, char** response_json, char** error);

/* xstage plan moe: a kernel description {"kernel" or "shape" (a built-in name or an xstage.kernel/1 file), "hidden",
 * "h_inter", "experts", "top_k", "precision", "sm_tflops", "t_l1_us", "t_l2_us", "block_m", "block_n", "out_bytes",
 * "staging_us", "ranks", "combine"} or the tile-level form {"tile_bytes", "n1", "n2", "t_l1_us", "t_l2_us",
 * "h_inter", "block_n", "staging_us", "ranks", "combine"}; "simulate" (true: both tile orders simulated) with
 * "tokens", "routing", "zipf_s", "lead_rows", "experts_per_wave", "cover_slots"; "producers", "platform" ->
 * xstage.plan.moe/1, one MoE layer's Combine (eq. 12-16; include/xstage/planner/moe_plan.hpp). The CLI's --trace
 * (an output file) is not part of a request. */
int xstage_planner_plan_moe(const char* request_json, char** response_json, char** error);

/* xstage fit: {"records" (required: xstage calibrate's records.csv), "raw" (its raw.json), "name", "link_gbps",
 * "link_source", "copy_engine_gbps", "sms"} -> xstage.fit/1 with "out" null and the fitted xstage.platform/1
 * document under "platform" (what the CLI writes to its --out file; include/xstage/planner/fit.hpp). The CLI's --out
 * and --force (an output file) are not part of a request. */
int xstage_planner_fit(const char* request_json, char** response_json, char** error);

/* xstage fidelity: {"records" (required), "raw", "platform", "traces" (a list of traced MoE bench files), "ulysses"
 * (a Ulysses sweep file), "cross_validate", "folds" (with cross_validate, 2..10)} -> xstage.fidelity/1, every
 * calibration record predicted against its measurement; its "provenance" holds the version and the files read
 * (the CLI's adds its command line and the build's git revision). The CLI's --out and --force (a copy of the
 * report) are not part of a request. */
int xstage_planner_fidelity(const char* request_json, char** response_json, char** error);

void xstage_planner_free(char* text);

#ifdef __cplusplus
}
#endif

#endif /* XSTAGE_PLANNER_C_API_H */
