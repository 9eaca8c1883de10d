// Host interface of the remote-store burst kernel (src/probe/burst_kernel.cu).
//
// K producers (one CTA each, co-resident, launched cooperatively) each store B bytes per burst with
// 4-, 8- or 16-byte stores into their own destination region, then spend a producer-side gap G:
//  - periodic: bursts back to back after one grid barrier; per burst the sender-visible issue time
//    (first store issued → all of the CTA's stores accepted, a CTA barrier) and the start-to-start
//    period, from clock64 (same SM, fine-grained) with a %globaltimer stamp for cross-SM alignment;
//  - isolated: every burst starts from a grid barrier after a system-scope fence (the previous
//    burst's stores have completed) and a recovery spin, so each burst meets an empty X-Stage.
// The gap is a clock64 spin by one thread or Tensor Core work by every warp (mma_gap.cuh).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace xstage::probe {

enum class KernelMode : std::uint32_t { kPeriodic = 0, kIsolated = 1 };
enum class GapKind : std::uint32_t { kSpin = 0, kMma = 1 };

struct BurstSample {
  std::uint64_t issue_start_cycles;  // thread 0, after the CTA barrier that opens the burst
  std::uint64_t issue_end_cycles;    // thread 0, after the CTA barrier that closes the burst
  std::uint64_t gap_end_cycles;      // end of the gap (periodic) or of the recovery (isolated)
  std::uint64_t issue_start_ns;      // %globaltimer at issue start
};

struct BurstKernelArgs {
  void* const* dst = nullptr;         // device array [K]: producer p's region of slot 0
  std::uint64_t slot_stride_bytes = 0;  // from one slot of a producer to its next
  std::uint32_t slots = 1;            // burst i writes slot i % slots
  std::uint64_t bytes_per_producer = 0;
  std::uint32_t store_bytes = 16;     // 4, 8 or 16
  std::uint32_t bursts = 0;           // all bursts, warm-up included
  KernelMode mode = KernelMode::kPeriodic;
  GapKind gap_kind = GapKind::kSpin;
  std::uint64_t gap_cycles = 0;       // periodic: producer-side gap after each burst
  std::uint64_t recovery_ns = 0;      // isolated: extra spin after the completion fence
  std::uint32_t run_seed = 0;
  std::uint32_t sender_rank = 0;
  std::uint32_t* barrier_counter = nullptr;  // device, zero before the launch
  BurstSample* samples = nullptr;     // device [bursts × K], burst-major
  unsigned long long* mma_issued = nullptr;  // device [K]: MMA instructions issued in gaps (per CTA)
  float* sink = nullptr;              // device [K]: keeps the MMA results alive
  std::uint64_t wait_timeout_ns = 2'000'000'000ull;  // bounded waits (grid barrier)
  std::int32_t team_rank = 0;         // printed by bounded-wait diagnostics
};

// Throws xstage::gpu::DeviceError if the launch fails (e.g. more producers than can be co-resident).
void launch_burst_kernel(const BurstKernelArgs& args, int producers, int threads_per_producer, cudaStream_t stream);

// How many producers (CTAs of `threads_per_producer`) can be co-resident on `device` (grid-barrier limit).
int max_coresident_producers(int device, int threads_per_producer);

}  // namespace xstage::probe
