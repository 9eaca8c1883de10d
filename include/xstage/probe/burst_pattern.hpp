// The data each probe store writes, shared by the kernel (which writes it), the verification kernel
// (which checks the destination) and the CPU tests. Every 4-byte word encodes the run, the sender,
// the producer, the burst and its own position, so a lost, torn, misplaced or stale store reads back
// as a mismatch. Cheap on purpose: one hash per burst per thread, then one multiply-xor per word, so
// generating data adds next to nothing to the measured issue time.
#pragma once

#include <cstdint>

#include "xstage/gpu/host_device.hpp"

namespace xstage::probe {

// murmur3 finaliser: a bijection on 32 bits with good avalanche.
XSTAGE_HOST_DEVICE_INLINE std::uint32_t mix32(std::uint32_t h) {
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  h ^= h >> 16;
  return h;
}

// Tag of one burst of one producer of one sender in one run.
XSTAGE_HOST_DEVICE_INLINE std::uint32_t burst_tag(std::uint32_t run_seed, std::uint32_t sender_rank,
                                                 std::uint32_t producer,
                                  std::uint32_t burst) {
  return mix32(run_seed ^ mix32(sender_rank * 0x9e3779b9u ^ mix32(producer * 0x7f4a7c15u ^ mix32(burst + 0x165667b1u))));
}

// Word `word_index` (counted in 4-byte words from the start of the producer's burst region).
XSTAGE_HOST_DEVICE_INLINE std::uint32_t pattern_word(std::uint32_t tag, std::uint32_t word_index) {
  return tag ^ (word_index * 0x9e3779b1u + 0x632be5abu);
}

}  // namespace xstage::probe
