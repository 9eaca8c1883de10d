// Public C++ API of Ulysses attention over a team of GPUs, one GPU per process, on caller-owned device
// buffers and the caller's stream:
//
//   q, k, v [B, S_local, H, D] bf16, sequence-sharded (rank r holds rows of torch.chunk's split,
//   xstage/ulysses/shards.hpp) → pack + pre-attention All-to-All (NCCL grouped send/recv) → attention
//   over the whole sequence for this rank's H / world heads, whose TMA epilogue stores every output row
//   straight into its owner's symmetric window (the fused post-attention All-to-All, `fused-tma`) → the
//   owner's bounded wait for every sender's flags → copy from the window to the caller's out
//   [B, S_local, H, D].
//
// Joint tokens (xDiT's joint_strategy="rear"): joint_k / joint_v [B, T, H, D] replicated on every rank
// are appended after the sequence's keys and values (each rank takes its heads); joint_q [B, T, H, D]
// (replicated) attends to the same keys, on this rank's heads, and the heads are all-gathered into
// joint_out [B, T, H, D] (the same on every rank).
//
// Precision (xstage/attn/forward.hpp): bf16, or fp8 (8-bit operands after a quantization pre-pass, head_dim
// 128), for the fused attention and the joint queries' attention alike; the All-to-Alls and the output stay
// bf16. An object created with UlyssesLimits::precision fp8 also owns the FP8 pre-pass's workspace and
// serves both precisions; one created for bf16 refuses fp8 forwards until reserve() raises its precision.
// The FP8 pre-pass scales each query row on its own and quantizes K and V in sequence order (the joint
// rows last), as the local FP8 path does on the whole sequence; so the output equals the local FP8
// attention of the whole sequence bit for bit, whatever the split and this rank's query order.
//
// The object owns its symmetric window and work buffers, allocated once for the maximum sizes it was
// created with; reserve() grows them (collective). forward() enqueues on the caller's stream and never
// synchronizes the device; the owner's wait traps the kernel when a sender has not published within the
// wait timeout (the CUDA context is then lost), after recording the rank, the source rank and the step
// in host memory (last_failure()).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <cuda_runtime_api.h>

#include "xstage/attn/forward.hpp"
#include "xstage/comm/team.hpp"
#include "xstage/ulysses/shards.hpp"

namespace xstage::ulysses {

struct UlyssesLimits {
  int max_seq_local = 0;  // rows per rank the buffers hold (the largest shard, ceil(seq / world))
  int heads = 0;          // total heads H (divisible by the world size)
  int head_dim = 128;     // 128 (the fused kernel)
  int max_joint = 0;      // replicated joint tokens T the buffers hold (0: none)
  // The precisions forward may run: kBf16 only, or kFp8 (and kBf16): the FP8 workspace is then sized for
  // the largest problems the limits allow (the fused attention over max_seq_local * world + max_joint keys,
  // the joint queries' attention), one per object (forwards of one object run in the order enqueued).
  attn::AttnPrecision precision = attn::AttnPrecision::kBf16;
};

struct UlyssesForwardArgs {
  int seq = 0;                            // rows of the whole sequence over the team (the sum of the shards)
  attn::BshdView q, k, v;                 // [B, local_len(seq, world, rank), H, D]
  attn::BshdView joint_q, joint_k, joint_v;  // [B, T, H, D], replicated; data null: none
  attn::BshdView out;                     // [B, local_len, H, D]
  attn::BshdView joint_out;               // [B, T, H, D]: with joint_q only
  float softmax_scale = 0.f;              // 0 selects 1/sqrt(D)
  attn::AttnPrecision precision = attn::AttnPrecision::kBf16;  // kFp8: the object's limits must allow it
};

// Why forward cannot run: kValue (shape, size, value), kLayout (a view of an input a contiguous copy
// would fix), kNone (it can run).
enum class UlyssesRefusal { kNone, kValue, kLayout };

class UlyssesAttention {
 public:
  // Collective over the team (every rank, the same limits). The team must drive one GPU in this process.
  UlyssesAttention(comm::Team& team, const UlyssesLimits& limits, uint64_t wait_timeout_ns = 10'000'000'000ull);
  ~UlyssesAttention();
  UlyssesAttention(const UlyssesAttention&) = delete;
  UlyssesAttention& operator=(const UlyssesAttention&) = delete;

  // Empty when the limits can be served on `world` ranks; else a one-line reason naming the field.
  static std::string limits_error(const UlyssesLimits& limits, int world);
  // Empty when forward(args) can run; else a one-line reason naming the argument and the value.
  std::string can_implement(const UlyssesForwardArgs& args, UlyssesRefusal* kind = nullptr) const;
  // Grows the buffers to at least `limits` (heads and head_dim must stay; precision kFp8 adds the FP8
  // workspace, kBf16 keeps an existing one). Collective; synchronizes.
  void reserve(const UlyssesLimits& limits);
  // Enqueues one Ulysses attention on `stream` (the GPU of the team). Throws xstage::InputError when
  // can_implement refuses, comm::TeamTimeout once an earlier forward's wait expired (last_failure),
  // gpu::DeviceError when a launch fails. Every rank calls it with the same
  // seq, batch, heads and joint length, in the same order.
  void forward(const UlyssesForwardArgs& args, cudaStream_t stream);

  const UlyssesLimits& limits() const;
  int rank() const;
  int world() const;

  // The owner's wait that expired, one line naming this rank, the source rank whose stores did not
  // arrive and the step; empty while none has. Read from host memory the kernel wrote before its trap,
  // so it can be called after the CUDA context is lost; forward() refuses (comm::TeamTimeout) once set.
  std::string last_failure() const;

 private:
  friend struct UlyssesTesting;  // src/ulysses/ulysses_testing.hpp: fault injection for the liveness tests
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

namespace testing {
// One rank of a `world`-rank team emulated on one GPU, for tests: q [seq, H / world, D] (the rank's
// heads after the pre-attention All-to-All, rows in the own-rows-last rotated order of `rank`), k and v
// [seq_k, H / world, D] (sequence order, joint rows after seq), every owner's output buffer local:
// owner_out[p] is [local_len(seq, world, p), H, D] contiguous. Runs the fused-tma kernel at `precision`
// (fp8: on a workspace it allocates), waits for it (synchronizes: testing only) and checks every CTA's
// flag reached every owner. Empty or the reason.
std::string emulated_rank_forward(const void* q, const void* k, const void* v, int seq, int seq_k, int heads,
                                  int head_dim, int rank, int world, void* const* owner_out, float softmax_scale,
                                  cudaStream_t stream, attn::AttnPrecision precision = attn::AttnPrecision::kBf16);
}  // namespace testing

}  // namespace xstage::ulysses
