// The Ulysses kernels' shared parameters (ulysses_epilogue.hpp).
#include "ulysses_epilogue.hpp"

#include <stdexcept>
#include <string>

#include "xstage/gpu/check.hpp"
#include "xstage/sched/attn_tile_config.hpp"

namespace xstage::attn {

const char* to_string(UlyssesTileOrder o) {
  switch (o) {
    case UlyssesTileOrder::kNatural: return "natural";
    case UlyssesTileOrder::kOwnLast: return "own-last";
    case UlyssesTileOrder::kRemoteFirst: return "remote-first";
  }
  return "?";
}

bool parse_ulysses_tile_order(const std::string& s, UlyssesTileOrder* out) {
  const UlyssesTileOrder all[] = {UlyssesTileOrder::kNatural, UlyssesTileOrder::kOwnLast, UlyssesTileOrder::kRemoteFirst};
  return parse_by_name(s, all, out);
}

A2AEpilogueParams ulysses_epilogue_params(int rank, int world, int seq, int heads_per_gpu, int head_dim,
                                          AttnPrecision precision,
                                          UlyssesTileOrder order, void* const* table, const uint32_t* epoch) {
  A2AEpilogueParams ep{};
  ep.rank = rank;
  ep.world = world;
  ep.seq = seq;
  ep.shard_len = a2a_shard_len(seq, world);
  ep.heads_total = heads_per_gpu * world;
  ep.head_offset = rank * heads_per_gpu;
  ep.epoch = epoch;
  ep.row_rotation = order == UlyssesTileOrder::kNatural ? 0 : a2a_own_rows_last_rotation(seq, world, rank);
  ep.first_m_blocks = order == UlyssesTileOrder::kRemoteFirst
                          ? a2a_remote_m_blocks(seq, world, rank, sched::attn_block_m(head_dim, precision == AttnPrecision::kFp8))
                          : 0;
  ep.dst = table;
  ep.flags = reinterpret_cast<uint32_t* const*>(table + world);
  return ep;
}

std::vector<void*> ulysses_window_owner_table(comm::SymmetricWindow& window, int local_index, int world,
                                              std::size_t flags_offset, cudaStream_t stream) {
  const int n = world;
  std::vector<int> peers;
  std::vector<std::size_t> offs;
  for (int p = 0; p < n; ++p) {
    peers.push_back(p);
    offs.push_back(0);
    peers.push_back(p);
    offs.push_back(flags_offset);
  }
  void** d_ptrs = nullptr;
  XSTAGE_CUDA_CHECK(cudaMalloc(&d_ptrs, sizeof(void*) * 2 * n));
  window.resolve_lsa_pointers(local_index, peers, offs, d_ptrs);
  XSTAGE_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<void*> pairs(2 * n);
  XSTAGE_CUDA_CHECK(cudaMemcpy(pairs.data(), d_ptrs, sizeof(void*) * 2 * n, cudaMemcpyDeviceToHost));
  XSTAGE_CUDA_CHECK(cudaFree(d_ptrs));
  std::vector<void*> h(2 * n);
  for (int p = 0; p < n; ++p) {
    h[p] = pairs[2 * p];
    h[n + p] = pairs[2 * p + 1];
    if (!h[p] || !h[n + p] || reinterpret_cast<uintptr_t>(h[p]) % 16 != 0)
      throw std::runtime_error("ulysses: unusable peer pointer for rank " + std::to_string(p));
  }
  return h;
}

}  // namespace xstage::attn
