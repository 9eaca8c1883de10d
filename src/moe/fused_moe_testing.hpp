// Fault injection into the public fused MoE layer, for the liveness tests only (the C ABI's
// xstage_testing_moe_withhold_rows and the GPU tests): no product code calls it.
#pragma once

#include <cstdint>

#include "xstage/moe/fused_moe.hpp"

namespace xstage::moe {

struct FusedMoeTesting {
  // Waits for the layer's previous run, then raises every local expert's arrival base by `rows`: the
  // next run's TMA producers wait for `rows` more dispatched rows than any rank sends, as when a peer
  // rank never dispatches, so that run's bounded arrival wait expires (kMoeWaitArrival), records itself
  // in the failure record and traps. The CUDA context is lost afterwards: use in a child process.
  static void withhold_rows(FusedMoe& layer, std::uint64_t rows);
};

}  // namespace xstage::moe
