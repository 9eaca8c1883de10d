// What the fused Ulysses kernels and every caller of them share: the query-tile order, the
// post-attention All-to-All epilogue parameters of a rank, and the owners' window pointers. Used by the
// public API (ulysses_attention.cpp) and by the bench layer (xstage/testing/ulysses_layer.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "a2a_params.hpp"
#include "xstage/attn/forward.hpp"
#include "xstage/comm/window.hpp"

namespace xstage::attn {

// The value among `values` whose to_string is `s` (the parsers of the Ulysses enums).
template <class E, class Values>
bool parse_by_name(const std::string& s, const Values& values, E* out) {
  for (E v : values) {
    if (s == to_string(v)) {
      *out = v;
      return true;
    }
  }
  return false;
}

// Query-tile order of the attention kernels on rank r.
enum class UlyssesTileOrder {
  kNatural,      // sequence order, m-block fastest per head
  kOwnLast,      // rotated: the rank's own rows are the last m-blocks of every head (a2a_own_rows_last_rotation)
  kRemoteFirst,  // rotated as kOwnLast, and the m-blocks holding other owners' rows of every head run before
                 // any own-row m-block (a2a_remote_m_blocks): the last remote stores end earlier waves,
                 // so later Q-loops drain them; only the fused kernels' schedule changes (rows do not)
};
const char* to_string(UlyssesTileOrder o);
bool parse_ulysses_tile_order(const std::string& s, UlyssesTileOrder* out);

// The post-attention All-to-All parameters of `rank`: every owner's output buffer and flag array in the
// device table `table` ([dst x world, flags x world] as this GPU reaches them), the rotation of
// UlyssesTileOrder `order` (row_rotation) and its first scheduling phase (first_m_blocks).
A2AEpilogueParams ulysses_epilogue_params(int rank, int world, int seq, int heads_per_gpu, int head_dim,
                                          AttnPrecision precision, UlyssesTileOrder order, void* const* table, const uint32_t* epoch);

// The [dst x world, flags x world] pointers of every rank's window as local rank `local_index` reaches
// them (LSA pointers: output at offset 0, flags at `flags_offset`), checked non-null and 16-byte aligned.
std::vector<void*> ulysses_window_owner_table(comm::SymmetricWindow& window, int local_index, int world,
                                              std::size_t flags_offset, cudaStream_t stream);

}  // namespace xstage::attn
