// Verification of probe destinations: after a run, every word of every region a burst last wrote must
// hold exactly the pattern of that burst (burst_pattern.hpp). Runs on the GPU that owns the memory.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <vector>

namespace xstage::probe {

struct VerifyRegion {
  std::uint64_t offset_bytes;  // from the destination buffer's base
  std::uint32_t tag;           // burst_tag(...) of the burst that wrote it last
  std::uint32_t producer;      // for the diagnostic only
  std::uint32_t sender_rank;   // for the diagnostic only
  std::uint32_t burst;         // for the diagnostic only
};

struct VerifyOutcome {
  std::uint64_t words_checked = 0;
  std::uint64_t mismatches = 0;
  std::string first_mismatch;  // empty when none: "sender 0 producer 3 burst 71 word 17: got 0x..., expected 0x..."
};

// Checks `regions` (each `bytes_per_region` long) of `buffer` on the current device; synchronous on `stream`.
VerifyOutcome verify_regions(const void* buffer, const std::vector<VerifyRegion>& regions, std::uint64_t bytes_per_region,
                             cudaStream_t stream);

// Fills [buffer, buffer + bytes) with a value no pattern word is likely to equal, so an unwritten
// word is caught.
void poison(void* buffer, std::uint64_t bytes, cudaStream_t stream);

}  // namespace xstage::probe
