/* C ABI of xstage's distributed layer (libxstage_capi.so): teams of GPUs, one per process, joined by an
 * NCCL unique id the caller distributes (e.g. over a torch ProcessGroup), and Ulysses attention over
 * DLPack tensors on the caller's stream (include/xstage/ulysses/ulysses.hpp).
 *
 * The rules of c_api.h hold (status codes, xstage_last_error, no exception across the boundary); in
 * addition XSTAGE_ERR_TIMEOUT reports a bounded host-side wait that gave up, its message naming the
 * rank and the step. The NCCL library is the process's libnccl.so.2 (torch's, when torch is imported
 * first); a version other than the headers' is refused at team creation with a clear message.
 */
#ifndef XSTAGE_C_API_DIST_H
#define XSTAGE_C_API_DIST_H

#include <stdint.h>

#include <dlpack/dlpack.h>

#include "xstage/c_api.h"

#ifdef __cplusplus
extern "C" {
#endif

#define XSTAGE_ERR_TIMEOUT 7 /* a bounded wait gave up (Python: TimeoutError) */

#define XSTAGE_NCCL_UNIQUE_ID_BYTES 128 /* sizeof(ncclUniqueId) */

typedef struct xstage_team xstage_team;
typedef struct xstage_ulysses xstage_ulysses;

/* 1 when the distributed layer (NCCL teams, fused Ulysses attention) is built in. */
int xstage_dist_available(void);

/* A fresh NCCL unique id into out[0..size) (size XSTAGE_NCCL_UNIQUE_ID_BYTES), on the rank that
 * creates the team's id; the caller sends the bytes to every rank. */
int xstage_dist_unique_id(uint8_t* out, int64_t size);

/* This process's member (rank of world, CUDA device) of the team of `id`. Collective: every rank
 * calls it with the same id within timeout_s seconds, else XSTAGE_ERR_TIMEOUT. Multicast stays off. */
int xstage_team_create(const uint8_t* id, int64_t id_size, int rank, int world, int device, double timeout_s,
                       xstage_team** out);
/* NULL is ignored. Destroy every object created on the team first. */
int xstage_team_destroy(xstage_team* team);

/* Ulysses attention on `team` with buffers for max_seq_local rows per rank, `heads` total heads
 * (divisible by the world), head_dim 128 and max_joint replicated joint tokens. Collective (every rank,
 * the same sizes; allocates and synchronizes the device once). wait_timeout_s bounds the owner's wait
 * for the other ranks' stores (when it passes, the kernel records the rank, the source rank and the step
 * for xstage_ulysses_last_failure and traps; the CUDA context is then lost). */
int xstage_ulysses_create(xstage_team* team, int64_t max_seq_local, int64_t heads, int64_t head_dim,
                          int64_t max_joint, double wait_timeout_s, xstage_ulysses** out);
/* Grows the buffers (collective, synchronizes): a forward larger than the reserved sizes is refused. */
int xstage_ulysses_reserve(xstage_ulysses* u, int64_t max_seq_local, int64_t max_joint);
int xstage_ulysses_destroy(xstage_ulysses* u);

/* Precision: `precision` is the attention's operand precision, XSTAGE_ATTN_PRECISION_BF16 or
 * XSTAGE_ATTN_PRECISION_FP8 (c_api.h: 8-bit operands after a quantization pre-pass; head_dim 128); another
 * value is XSTAGE_ERR_VALUE naming `precision`. The functions without the suffix are these with BF16.
 * An object created (or reserved) with FP8 owns the FP8 workspace and runs either precision; one
 * created for BF16 refuses an FP8 forward (XSTAGE_ERR_VALUE) until reserved with FP8. */
int xstage_ulysses_create_with_precision(xstage_team* team, int64_t max_seq_local, int64_t heads, int64_t head_dim,
                                         int64_t max_joint, double wait_timeout_s, int precision,
                                         xstage_ulysses** out);
int xstage_ulysses_reserve_with_precision(xstage_ulysses* u, int64_t max_seq_local, int64_t max_joint,
                                          int precision);

/* One forward: q, k, v, out [B, S_local, H, D] bf16 (S_local: this rank's rows of torch.chunk's split
 * of `seq`); joint_k, joint_v [B, T, H, D] replicated or NULL; joint_q [B, T, H, D] and joint_out
 * [B, T, H, D] together or NULL. softmax_scale 0: 1/sqrt(D). stream: a cudaStream_t of the team's
 * device. A view of q, k, v or a joint input that must be copied first is XSTAGE_ERR_LAYOUT. */
typedef struct xstage_ulysses_call {
  const DLTensor* q;
  const DLTensor* k;
  const DLTensor* v;
  const DLTensor* joint_q;
  const DLTensor* joint_k;
  const DLTensor* joint_v;
  DLTensor* out;
  DLTensor* joint_out;
  int64_t seq;
  float softmax_scale;
  void* stream;
} xstage_ulysses_call;

int xstage_ulysses_forward(xstage_ulysses* u, const xstage_ulysses_call* call);
/* Every check of xstage_ulysses_forward, without a launch. */
int xstage_ulysses_check(xstage_ulysses* u, const xstage_ulysses_call* call);
/* The same at `precision` (above). */
int xstage_ulysses_forward_with_precision(xstage_ulysses* u, const xstage_ulysses_call* call, int precision);
int xstage_ulysses_check_with_precision(xstage_ulysses* u, const xstage_ulysses_call* call, int precision);

/* The owner's in-kernel wait that expired, one line naming this rank, the source rank whose stores did
 * not arrive and the step; "" while none has (or for NULL). Readable after the kernel trapped and the
 * CUDA context is lost (host memory the kernel wrote first); the string lives until the next call on
 * `u`. Once set, xstage_ulysses_forward returns XSTAGE_ERR_TIMEOUT naming it, before any launch. */
const char* xstage_ulysses_last_failure(xstage_ulysses* u);

/* Shard arithmetic (no GPU needed): out[0] rows per rank (ceil(seq / world)), out[1] rank's rows,
 * out[2] the rank's own-rows-last query rotation, out[3] rank's rows under torch.tensor_split.
 * XSTAGE_ERR_VALUE (naming the field) when the split leaves a rank without rows. */
int xstage_ulysses_shard_info(int64_t seq, int world, int rank, int64_t out[4]);
/* XSTAGE_OK when ranks holding local_lens[0..world) rows form the accepted split of their sum, else
 * XSTAGE_ERR_VALUE naming the first rank that differs (and whether it is torch.tensor_split's split). */
int xstage_ulysses_split_check(const int64_t* local_lens, int world);
/* XSTAGE_OK when `heads` split evenly over `world` ranks, else XSTAGE_ERR_VALUE naming both. */
int xstage_ulysses_heads_check(int64_t heads, int world);

/* --- testing only -------------------------------------------------------------------------------
 * One rank `rank` of a `world`-rank team emulated on one GPU (every owner's buffer local): q [1, seq,
 * H / world, D] (the rank's heads, rows in its own-rows-last rotated order: xstage_ulysses_shard_info's
 * out[2]), k, v [1, seq_k, H / world, D] (joint rows after seq), owner_out[p] [local_len(p), H, D]
 * contiguous bf16. Runs the fused-tma kernel, synchronizes the stream and checks every CTA's flag
 * reached every owner. Not for production use: it allocates and synchronizes. */
int xstage_testing_ulysses_emulated_rank(const DLTensor* q, const DLTensor* k, const DLTensor* v, int64_t heads,
                                         int rank, int world, DLTensor* const* owner_out, float softmax_scale,
                                         void* stream);
/* The same at `precision` (XSTAGE_ATTN_PRECISION_*): FP8 on a workspace it allocates. */
int xstage_testing_ulysses_emulated_rank_with_precision(const DLTensor* q, const DLTensor* k, const DLTensor* v,
                                                        int64_t heads, int rank, int world, DLTensor* const* owner_out,
                                                        float softmax_scale, void* stream, int precision);
/* Fault injection for the liveness tests: every later forward's owner waits for flags `epochs` (0..2^20)
 * publications beyond what any rank sends, as when a peer rank never stores its rows, so its wait
 * expires, records itself (xstage_ulysses_last_failure) and traps; 0 restores the normal wait. */
int xstage_testing_ulysses_withhold_flags(xstage_ulysses* u, uint32_t epochs);

#ifdef __cplusplus
}
#endif

#endif /* XSTAGE_C_API_DIST_H */
