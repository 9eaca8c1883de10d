// Per-rank and peer-reachable state of the fused MoE layer (MoeFused), shared by the layer and the
// testing library's harness over it (xstage::testing::MoeFusedHarness: random fill, output poison,
// traces, GEMM-only timing), which reaches it as a friend.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "moe_fused_layer.hpp"
#include "moe_rank_buffers.hpp"
#include "xstage/comm/window.hpp"

namespace xstage::moe {

// Peer-reachable buffers (one allocation per rank each); the layout of the control block is sizes_'s.
struct MoeFused::Shared {
  std::unique_ptr<comm::PeerBuffers> recv, recv_scale, origin, comb, ctrl;  // recv_scale: FP8 only
  std::vector<MoeFusedPeerView> views;  // per team rank
};

// Inputs, routing and output (MoeRankBuffers), work buffers and plan (MoeFusedLocalBuffers).
struct MoeFused::RankState : MoeRankBuffers {
  comm::LocalRank* lr = nullptr;
  int local_index = 0;
  MoeFusedLocalBuffers local;
  std::uint8_t *w1q = nullptr, *w2q = nullptr;  // FP8 weights (layout of w1, w2)
  float *w1s = nullptr, *w2s = nullptr;          // FP8 block scales
  MoeFusedTileTrace* trace = nullptr;
  std::uint32_t* trace_count = nullptr;
  std::uint16_t* comb_local = nullptr;
  cudaEvent_t ev[2] = {};
};

}  // namespace xstage::moe
