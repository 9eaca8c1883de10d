/* C ABI of xstage (libxstage_capi.so): the public API over DLPack tensors and the caller's CUDA stream.
 *
 * Plain C, so one shared library serves every Python minor version (loaded with ctypes) and every
 * framework that speaks DLPack (PyTorch, CuPy, JAX). Rules every entry point keeps:
 *  - it returns an xstage_status; on anything but XSTAGE_OK, xstage_last_error() holds a one-line
 *    message for the calling thread (naming the argument, its value and what is accepted);
 *  - it never aborts, never throws across the boundary, never synchronizes the device;
 *  - GPU work is enqueued on the stream passed in (a cudaStream_t; NULL is the legacy default stream)
 *    on the device of the tensors; nothing is allocated per call.
 * Tensors are borrowed for the duration of the call; sizes and strides are in elements.
 */
#ifndef XSTAGE_C_API_H
#define XSTAGE_C_API_H

#include <stdint.h>

#include <dlpack/dlpack.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 2: xstage_attention_call gained precision and workspace (its size changed), and the precision and
 * workspace entry points were added. 3: xstage_cli_run moved to the CLI's own library (xstage/cli_c_api.h). */
#define XSTAGE_C_API_VERSION 3

typedef enum xstage_status {
  XSTAGE_OK = 0,
  XSTAGE_ERR_TYPE = 1,        /* wrong dtype or kind of object (Python: TypeError) */
  XSTAGE_ERR_VALUE = 2,       /* wrong device, rank, size, mismatch or argument value (ValueError) */
  XSTAGE_ERR_LAYOUT = 3,      /* a strided view the kernel cannot read in place; a copy would do (ValueError) */
  XSTAGE_ERR_UNSUPPORTED = 4, /* built without CUDA, or a GPU the kernels were not built for (RuntimeError) */
  XSTAGE_ERR_CUDA = 5,        /* a CUDA runtime error at launch (RuntimeError) */
  XSTAGE_ERR_INTERNAL = 6     /* anything else, e.g. out of host memory (RuntimeError) */
} xstage_status;

/* XSTAGE_C_API_VERSION of the library; a loader refuses a library whose version differs. */
int xstage_c_api_version(void);

/* 1 when the GPU kernels are built in, 0 for a model/planner-only build (no nvcc at build time). */
int xstage_has_cuda(void);

/* Library version and build (e.g. "0.1.0 cuda 13.0 sm_90a"); static storage. */
const char* xstage_build_info(void);

/* The calling thread's message for the last failed call ("" if none); valid until its next call. */
const char* xstage_last_error(void);

/* Frees memory returned by the library (xstage_platform_json's out). NULL is ignored. */
void xstage_free(void* p);

/* --- attention forward ------------------------------------------------------------------------
 * q [B, Sq, H, D], k and v [B, Skv, H, D], out [B, Sq, H, D]: bf16 on one CUDA device, D in {64, 128};
 * lse: NULL, or [B, H, Sq] fp32 contiguous (natural-log log-sum-exp of each query row).
 * softmax_scale: 0 selects 1/sqrt(D); otherwise positive and finite.
 * stream: a cudaStream_t of the tensors' device. Validation happens before any launch. */

/* Precision of the two matrix products (the inputs and the output stay bf16):
 *  BF16: bf16 operands, fp32 accumulation. A workspace is optional: with one (of
 *        xstage_attention_workspace_bytes bytes, when that is not 0), a last round of tiles that would
 *        leave most SMs idle has its key blocks spread over every SM and merged (faster at short
 *        sequences; in those tiles as accurate as, not bit-identical to, the call without one). Without
 *        one, every tile runs on one SM, so each row's output depends only on its own inputs.
 *  FP8:  head_dim 128 only. A pre-pass on the same stream quantizes q, k and v to 8 bits (formats and
 *        scales: docs/attn_fp8.md) into a caller-owned workspace, then 8-bit matrix products at twice
 *        the bf16 tensor rate, fp32 accumulation. */
#define XSTAGE_ATTN_PRECISION_BF16 0
#define XSTAGE_ATTN_PRECISION_FP8 1

/* The bf16 forward (XSTAGE_ATTN_PRECISION_BF16); xstage_attention_forward_call takes a precision. */
int xstage_attention_forward(const DLTensor* q, const DLTensor* k, const DLTensor* v, DLTensor* out, DLTensor* lse,
                             float softmax_scale, void* stream);

/* One attention call as a struct, for callers (ctypes) to whom each argument of a call costs; they keep
 * one filled struct per thread. Zero-initialized fields past `stream` select the bf16 forward, so a
 * caller that sets only the first seven fields gets xstage_attention_forward's behaviour. A caller
 * compiled against version 1 passes a shorter struct: comparing xstage_c_api_version() with
 * XSTAGE_C_API_VERSION is what refuses that pairing.
 * Layout (LP64): q 0, k 8, v 16, out 24, lse 32, softmax_scale 40, stream 48, precision 56,
 * workspace 64; 72 bytes. Fields are only ever appended (with XSTAGE_C_API_VERSION raised). */
typedef struct xstage_attention_call {
  const DLTensor* q;
  const DLTensor* k;
  const DLTensor* v;
  DLTensor* out;
  DLTensor* lse; /* NULL: no lse */
  float softmax_scale;
  void* stream;
  /* since version 2 */
  int precision;             /* XSTAGE_ATTN_PRECISION_BF16 (0) or XSTAGE_ATTN_PRECISION_FP8 */
  const DLTensor* workspace; /* BF16: NULL, or as FP8's. FP8: a 1-D uint8 contiguous CUDA tensor on q's device of at
                              * least xstage_attention_workspace_bytes bytes, its data 256-byte aligned,
                              * overlapping no other tensor of the call. The call overwrites it (on
                              * `stream`); the caller must not use it on another stream until that work
                              * is done. Its contents after the call mean nothing. */
} xstage_attention_call;

int xstage_attention_forward_call(const xstage_attention_call* call);

/* *bytes = the device bytes of the workspace a call of this precision on q [B, Sq, H, D] and
 * k [B, Skv, H, D] needs: for FP8 the 8-bit copies of q, k and v^T and their scales (it depends on the
 * shapes only); for BF16 the split last round's partial results on q's device (0 when its schedule splits
 * nothing; it depends on the shapes and the device's SM count). q and k get the checks of xstage_attention_check (as tensors, and k
 * against q) and the precision its rules (FP8: head_dim 128). Builds without CUDA: BF16 answers 0,
 * FP8 is XSTAGE_ERR_UNSUPPORTED after those checks (the layout is the kernel's). */
int xstage_attention_workspace_bytes(const DLTensor* q, const DLTensor* k, int precision, uint64_t* bytes);

/* Every check of xstage_attention_forward, without a launch. In builds without CUDA only the checks
 * of each tensor alone (presence, device, dtype, rank, head_dim, one device, lse, scale): shape
 * agreement and view rules are the kernel's (xstage/attn/forward.hpp). */
int xstage_attention_check(const DLTensor* q, const DLTensor* k, const DLTensor* v, const DLTensor* out,
                           const DLTensor* lse, float softmax_scale);

/* Every check of xstage_attention_forward_call (precision and workspace included), without a launch;
 * `stream` is not used. Builds without CUDA: as xstage_attention_check, plus the precision, the
 * workspace's own checks (presence, device, dtype, rank, contiguity, alignment, overlap); its size
 * needs the kernel's layout. */
int xstage_attention_check_call(const xstage_attention_call* call);

/* XSTAGE_OK when the kernel reads the [B, S, H, D] bf16 view `t` in place; XSTAGE_ERR_LAYOUT when a
 * contiguous copy is needed; name is used in the message. */
int xstage_attention_view_check(const DLTensor* t, const char* name);

/* --- platform model ---------------------------------------------------------------------------
 * The platform (an xstage.platform/1 file at `path`, or the embedded default when path is NULL or
 * empty) as the model reads it, as JSON text in *out (free with xstage_free). A missing or invalid
 * file is XSTAGE_ERR_VALUE with the model's one-line message. */
int xstage_platform_json(const char* path, char** out);

#ifdef __cplusplus
}
#endif

#endif /* XSTAGE_C_API_H */
