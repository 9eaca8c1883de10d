// Fault injection into the public Ulysses attention, for the liveness tests only (the C ABI's
// xstage_testing_ulysses_withhold_flags): no product code calls it.
#pragma once

#include <cstdint>

#include "xstage/ulysses/ulysses.hpp"

namespace xstage::ulysses {

struct UlyssesTesting {
  // Every later forward's owner waits for flags `epochs` publications ahead of what any rank sends, as
  // when a peer rank never stores its rows: the wait expires after the object's wait timeout, records
  // itself (UlyssesAttention::last_failure) and traps. The CUDA context is lost afterwards: use in a
  // child process. 0 restores the normal wait.
  static void withhold_flags(UlyssesAttention& u, std::uint32_t epochs);
};

}  // namespace xstage::ulysses
