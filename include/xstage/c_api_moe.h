/* C ABI of the fused MoE layer (libxstage_capi.so; C++ API: xstage/moe/fused_moe.hpp). The rules of
 * xstage/c_api.h hold: xstage_status returns, a one-line message in xstage_last_error() naming the
 * argument, no exception across the boundary, no device synchronization, work on the caller's stream.
 *
 * A layer (one GPU, or one rank of an expert-parallel team: xstage_moe_create_on_team) is created once for its dimensions, precision and schedule;
 * it owns a workspace sized for max_tokens. Weights are set once (and again whenever they move): the
 * layer keeps the tensors' device pointers, so the caller keeps those tensors alive and unchanged in
 * place while runs may use them. Each run takes x, the routing and y for any T <= max_tokens.
 *
 * Tensors (compact row-major, on the layer's CUDA device, 16-byte aligned data):
 *   x, y          bfloat16 [T, hidden]
 *   topk_ids      int32    [T, top_k]   distinct experts in [0, experts) per token: not checked on the
 *                                       device (out-of-range or repeated ids make those rows undefined)
 *   topk_weights  float32  [T, top_k]
 *   w1            [experts, 2*h_inter, hidden]  rows 0..h_inter-1 gate, then up
 *   w2            [experts, hidden, h_inter]
 *     bf16 layer: bfloat16; fp8 layer: e4m3 bytes as uint8 (DLPack 0.6 has no float8 code) plus
 *   w1_scale      float32 [experts, 2*h_inter/128, hidden/128]  (one scale per 128 x 128 block)
 *   w2_scale      float32 [experts, hidden/128, h_inter/128]
 * Runs of one layer are ordered on the device even across streams (each waits for the previous run's
 * completion event); a layer is not thread-safe, and runs cannot be captured in a CUDA graph.
 */
#ifndef XSTAGE_C_API_MOE_H
#define XSTAGE_C_API_MOE_H

#include <stdint.h>

#include <dlpack/dlpack.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct xstage_moe_layer xstage_moe_layer; /* opaque */
typedef struct xstage_team xstage_team;           /* c_api_dist.h */

#define XSTAGE_MOE_BF16 0
#define XSTAGE_MOE_FP8 1
#define XSTAGE_MOE_INTERLEAVED 0
#define XSTAGE_MOE_WAVE 1

/* XSTAGE_OK when the kernel can run this layer on `device` (-1: the current device); otherwise the
 * reason, naming the field, in xstage_last_error(). *workspace_bytes (may be NULL) receives the device
 * memory xstage_moe_create would allocate. lead_rows / experts_per_wave: 0 for the defaults. */
int xstage_moe_can_implement(int device, int hidden, int h_inter, int experts, int top_k, int max_tokens, int precision,
                             int schedule, int lead_rows, int experts_per_wave, uint64_t* workspace_bytes);

/* The tile order the schedule "auto" runs (CPU only, no device or layer needed): the event simulator's
 * makespans of both orders (xstage/sim/moe_order_simulation.hpp, predict_moe_schedule) on the embedded platform,
 * for `tokens` tokens on each of `ranks` ranks routed evenly over the experts, with the layer's launch: grid
 * (CTAs, even), lead_rows (the interleaved order's lead) and experts_per_wave (the wave order's), as
 * xstage_moe_info reports them for each order. *choice receives XSTAGE_MOE_INTERLEAVED or XSTAGE_MOE_WAVE,
 * *predicted_speedup (may be NULL) the wave order's makespan over the interleaved one's. */
int xstage_moe_predict_schedule(int hidden, int h_inter, int experts, int top_k, int tokens, int ranks, int precision,
                                int grid, int lead_rows, int experts_per_wave, int* choice, double* predicted_speedup);

/* Allocates the layer and its workspace on `device`; *out receives the handle. */
int xstage_moe_create(int device, int hidden, int h_inter, int experts, int top_k, int max_tokens, int precision,
                      int schedule, int lead_rows, int experts_per_wave, xstage_moe_layer** out);

/* Expert parallelism: the layer as one rank of `team` (c_api_dist.h; one process per GPU, the team's
 * GPU): `experts` is the team's total (divisible by its world size W); rank r holds experts
 * [r*experts/W, (r+1)*experts/W), so its w1, w2 (and scales) have experts/W as their first dimension,
 * and topk_ids name global experts. The kernel's dispatch and Combine store into the peers' symmetric
 * windows. Collective: every rank creates the layer with the same arguments (window registration and a
 * barrier; synchronizes the device) and runs it once per step in the same order, with its own T
 * (0 included: a rank without tokens still runs, its experts serve the others). wait_timeout_s, in
 * (0, 10], bounds each in-kernel wait; when one expires (a rank that does not arrive), the kernel records
 * the rank, the wait and the peer (xstage_moe_last_failure) and traps: the CUDA context is then lost.
 * The team must outlive the layer. */
int xstage_moe_create_on_team(xstage_team* team, int hidden, int h_inter, int experts, int top_k, int max_tokens,
                              int precision, int schedule, int lead_rows, int experts_per_wave, double wait_timeout_s,
                              xstage_moe_layer** out);

/* The layer's team rank and world size (0 and 1 for a layer on one GPU); either pointer may be NULL. */
int xstage_moe_team_info(xstage_moe_layer* layer, int* rank, int* ranks);

/* Frees the layer once its enqueued runs are complete (waits for them). NULL is ignored. */
void xstage_moe_destroy(xstage_moe_layer* layer);

/* Changes the schedule of the following runs (no allocation). */
int xstage_moe_set_schedule(xstage_moe_layer* layer, int schedule, int lead_rows, int experts_per_wave);

/* Sets the weights (checked: dtype, shape, contiguity, device). Scales: NULL for a bf16 layer,
 * required for an fp8 one. */
int xstage_moe_set_weights(xstage_moe_layer* layer, const DLTensor* w1, const DLTensor* w2, const DLTensor* w1_scale,
                           const DLTensor* w2_scale);

/* Every check of xstage_moe_run, without a launch. */
int xstage_moe_check(xstage_moe_layer* layer, const DLTensor* x, const DLTensor* topk_ids,
                     const DLTensor* topk_weights, const DLTensor* y, void* stream);

/* y = the layer applied to x with the routing (topk_ids, topk_weights), enqueued on `stream`
 * (a cudaStream_t of the layer's device; NULL is the legacy default stream). */
int xstage_moe_run(xstage_moe_layer* layer, const DLTensor* x, const DLTensor* topk_ids, const DLTensor* topk_weights,
                   DLTensor* y, void* stream);

/* The layer's kernel grid, launched schedule parameter (lead rows or experts per wave) and runs so far
 * (any pointer may be NULL). */
int xstage_moe_info(xstage_moe_layer* layer, int* grid, int* schedule_param, uint64_t* runs);

/* The in-kernel wait that expired in an earlier run, as one line ("" when none); readable after a
 * sticky CUDA error. Storage owned by the layer, valid until its next call. */
const char* xstage_moe_last_failure(xstage_moe_layer* layer);

/* TESTING ONLY (the liveness tests): waits for the layer's previous run, then makes its next run wait
 * for `rows` more dispatched rows per local expert than any rank sends, as when a peer never dispatches:
 * that run's bounded wait expires, records itself (xstage_moe_last_failure) and traps, which loses the
 * CUDA context (use in a process of its own). */
int xstage_testing_moe_withhold_rows(xstage_moe_layer* layer, uint64_t rows);

/* bf16 weights -> e4m3 (uint8) and one float32 scale per 128 x 128 block, on `stream`:
 * w bfloat16 [rows, cols] or [matrices, rows, cols] (rows, cols multiples of 128), q uint8 of w's shape,
 * scales float32 [(matrices,) rows/128, cols/128]; all compact, on one CUDA device. */
int xstage_moe_quantize_fp8(const DLTensor* w, DLTensor* q, DLTensor* scales, void* stream);

/* The built-in MoE shapes (those of `xstage moe bench --shape`) as a JSON array of {"name", "source",
 * "hidden", "h_inter", "experts", "top_k"}; static storage. Needs no GPU ("[]" on out of memory). */
const char* xstage_moe_builtin_shapes(void);

#ifdef __cplusplus
}
#endif

#endif /* XSTAGE_C_API_MOE_H */
