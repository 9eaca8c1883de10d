// Sequence sharding of Ulysses attention: which rows each rank holds and owns, host and device.
//
// Convention (torch.chunk's, which diffusers' context-parallel split uses): ceil(seq / world) rows per
// rank, the last rank takes the rest, which must be non-empty. torch.tensor_split (diffusers'
// ulysses_anything) gives the first seq % world ranks one row more instead; the two agree exactly when
// seq % world is 0 or world - 1, and ulysses_split_error refuses the other splits with that reason.
// Pure functions: the kernels, the host layer, the C ABI's checks and the CPU tests call the same code.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#if defined(__CUDACC__)
#define XSTAGE_SHARD_HD __host__ __device__ __forceinline__
#else
#define XSTAGE_SHARD_HD inline
#endif

namespace xstage::attn {

// Owner of row g and its local row.
struct A2ARowOwner {
  int owner;
  int local_row;
};
XSTAGE_SHARD_HD A2ARowOwner a2a_row_owner(int row, int shard_len) {
  const int owner = row / shard_len;
  return {owner, row - owner * shard_len};
}

// Sequence sharding: ceil(seq / world) rows per rank, the last rank takes the rest (which must be > 0).
XSTAGE_SHARD_HD int a2a_shard_len(int seq, int world) { return (seq + world - 1) / world; }
XSTAGE_SHARD_HD int a2a_local_len(int seq, int world, int rank) {
  const int s = a2a_shard_len(seq, world);
  const int rest = seq - rank * s;
  return rest < 0 ? 0 : (rest < s ? rest : s);
}

// X-Stage-aware query order: rank r's query rows start after its own shard, so its own rows (whose
// stores stay local) are the last tiles of the persistent schedule. The last wave's burst then drains
// into local memory instead of over the link, where nothing would be left to cover it.
// Attention rows are independent, so the rotation changes no output bit. The pre-attention All-to-All
// delivers Q in this order (the key/value order is untouched).
XSTAGE_SHARD_HD int a2a_own_rows_last_rotation(int seq, int world, int rank) {
  const int end = (rank + 1) * a2a_shard_len(seq, world);
  return end >= seq ? 0 : end;
}
XSTAGE_SHARD_HD int a2a_sequence_row(int kernel_row, int rotation, int seq) {
  const int g = kernel_row + rotation;
  return g >= seq ? g - seq : g;
}
// First kernel row of owner p's shard under rotation `rot` (a shard boundary or 0): shards stay
// contiguous in the rotated order, so the pre-attention All-to-All receives each peer's Q rows at this row.
XSTAGE_SHARD_HD int a2a_rotated_shard_start(int p, int shard_len, int rot, int seq) {
  const int start = p * shard_len - rot;
  return start < 0 ? start + seq : start;
}

}  // namespace xstage::attn

namespace xstage::ulysses {

// Rows of rank `rank` under torch.tensor_split(seq, world) (diffusers' ulysses_anything): floor(seq /
// world), plus one for the first seq % world ranks.
inline int64_t tensor_split_len(int64_t seq, int world, int rank) {
  return seq / world + (rank < seq % world ? 1 : 0);
}

// Empty when rank `rank` of `world` may hold `local_len` rows of a `seq`-row sequence; else the reason.
inline std::string ulysses_local_len_error(int64_t seq, int world, int rank, int64_t local_len) {
  if (world < 1) return "world " + std::to_string(world) + " (at least 1)";
  if (rank < 0 || rank >= world) return "rank " + std::to_string(rank) + " (0.." + std::to_string(world - 1) + ")";
  if (seq < world || seq > (int64_t(1) << 30))
    return "seq " + std::to_string(seq) + " (every one of the " + std::to_string(world) +
           " ranks needs at least one row; at most 2^30)";
  const int s = int(seq);
  if (attn::a2a_local_len(s, world, world - 1) < 1)
    return "seq " + std::to_string(seq) + ": ceil(seq / world) = " + std::to_string(attn::a2a_shard_len(s, world)) +
           " rows per rank leaves rank " + std::to_string(world - 1) + " of " + std::to_string(world) +
           " no rows (torch.chunk would give fewer than world chunks)";
  const int64_t want = attn::a2a_local_len(s, world, rank);
  if (local_len != want) {
    std::string why = "rank " + std::to_string(rank) + " holds " + std::to_string(local_len) + " of " +
                      std::to_string(seq) + " rows; the accepted split is torch.chunk's (ceil(seq / world) = " +
                      std::to_string(attn::a2a_shard_len(s, world)) + " rows per rank, the last rank the rest: " +
                      std::to_string(want) + " on this rank)";
    if (local_len == tensor_split_len(seq, world, rank))
      why += "; this is torch.tensor_split's split (diffusers' ulysses_anything), which differs when seq % world "
             "is neither 0 nor world - 1";
    return why;
  }
  return {};
}

// Empty when `world` ranks holding `local_lens` rows each (rank order) form the split above of their
// sum; else a one-line reason naming the first rank whose length differs.
inline std::string ulysses_split_error(const std::vector<int64_t>& local_lens) {
  int64_t seq = 0;
  for (int64_t n : local_lens) seq += n;
  const int world = int(local_lens.size());
  for (int r = 0; r < world; ++r) {
    std::string why = ulysses_local_len_error(seq, world, r, local_lens[r]);
    if (!why.empty()) return why;
  }
  return world < 1 ? "no ranks" : std::string();
}

// Empty when `heads` split evenly over `world` ranks; else the reason naming both.
inline std::string ulysses_heads_error(int64_t heads, int world) {
  if (heads < 1 || world < 1 || heads % world != 0)
    return "heads " + std::to_string(heads) + " not divisible by the world size " + std::to_string(world) +
           " (Ulysses gives every rank heads / world heads)";
  return {};
}

}  // namespace xstage::ulysses
