// Whether a team lies in one NVLink domain. The fused Ulysses and MoE paths and the probes reach a peer's buffer
// by load/store through ncclGetLsaPointer, which has a pointer only for ranks of the caller's LSA team (NCCL's
// load/store-accessible ranks: one NVLink domain). A team that spans domains (two nodes) is refused when it is
// created, naming the ranks and the domain sizes, instead of handing kernels null peer pointers.
// Pure logic over NCCL's team description (ncclTeamLsa: nRanks, rank, stride), so it is tested on CPU.
#pragma once

#include <string>
#include <vector>

namespace xstage::comm {

struct LsaTeamView {
  int world_size = 1;  // ranks in the team
  int world_rank = 0;  // this rank
  int lsa_size = 1;    // ranks of this rank's NVLink (LSA) domain
  int lsa_rank = 0;    // this rank's index in its domain
  int lsa_stride = 1;  // world-rank distance between consecutive domain members
};

// The team ranks of `v.world_rank`'s domain, ascending (empty when `v` is not a consistent description).
inline std::vector<int> lsa_domain_ranks(const LsaTeamView& v) {
  if (v.world_size < 1 || v.world_rank < 0 || v.world_rank >= v.world_size || v.lsa_size < 1 || v.lsa_rank < 0 ||
      v.lsa_rank >= v.lsa_size || v.lsa_stride < 1 || v.lsa_size > v.world_size)
    return {};
  const long long base = static_cast<long long>(v.world_rank) - static_cast<long long>(v.lsa_rank) * v.lsa_stride;
  const long long last = base + static_cast<long long>(v.lsa_size - 1) * v.lsa_stride;
  if (base < 0 || last >= v.world_size) return {};
  std::vector<int> ranks;
  for (int i = 0; i < v.lsa_size; ++i) ranks.push_back(static_cast<int>(base + static_cast<long long>(i) * v.lsa_stride));
  return ranks;
}

// "" when this rank's domain holds the whole team; otherwise why the team is refused.
inline std::string one_domain_refusal(const LsaTeamView& v) {
  const std::vector<int> ranks = lsa_domain_ranks(v);
  const std::string who = "rank " + std::to_string(v.world_rank) + " of a " + std::to_string(v.world_size) + "-rank team";
  if (ranks.empty())
    return who + ": NCCL described an inconsistent NVLink (LSA) domain (size " + std::to_string(v.lsa_size) +
           ", index " + std::to_string(v.lsa_rank) + ", stride " + std::to_string(v.lsa_stride) + ")";
  if (v.lsa_size == v.world_size) return "";
  std::string list;
  constexpr std::size_t kShown = 16;
  for (std::size_t i = 0; i < ranks.size() && i < kShown; ++i) list += (i ? ", " : "") + std::to_string(ranks[i]);
  if (ranks.size() > kShown) list += ", ... (" + std::to_string(ranks.size()) + " ranks)";
  return who + " spans more than one NVLink domain: this rank's domain holds " + std::to_string(v.lsa_size) +
         " of the " + std::to_string(v.world_size) + " ranks (" + list +
         "). xstage's fused paths store to peers by load/store inside one NVLink domain: create the team from the "
         "ranks of one domain (one node), and cross domains with NCCL collectives (docs/multinode.md)";
}

}  // namespace xstage::comm
