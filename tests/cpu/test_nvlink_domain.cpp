// A team spanning NVLink domains is refused with the ranks and domain sizes named (nvlink_domain.hpp).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "xstage/comm/nvlink_domain.hpp"

using xstage::comm::lsa_domain_ranks;
using xstage::comm::LsaTeamView;
using xstage::comm::one_domain_refusal;

TEST(NvlinkDomain, OneDomainIsAccepted) {
  for (int world : {1, 2, 8})
    for (int r = 0; r < world; ++r) EXPECT_EQ(one_domain_refusal({world, r, world, r, 1}), "") << world << " " << r;
}

TEST(NvlinkDomain, TwoNodesAreRefusedNamingRanksAndSizes) {
  // Two nodes of 4 GPUs, ranks node-major: rank 5's domain is ranks 4..7.
  const LsaTeamView v{8, 5, 4, 1, 1};
  EXPECT_EQ(lsa_domain_ranks(v), (std::vector<int>{4, 5, 6, 7}));
  const std::string why = one_domain_refusal(v);
  EXPECT_NE(why.find("rank 5 of a 8-rank team"), std::string::npos) << why;
  EXPECT_NE(why.find("holds 4 of the 8 ranks (4, 5, 6, 7)"), std::string::npos) << why;
  EXPECT_NE(why.find("docs/multinode.md"), std::string::npos) << why;
  // Ranks interleaved across nodes (stride 2): rank 3's domain is 1, 3, 5, 7.
  EXPECT_EQ(lsa_domain_ranks({8, 3, 4, 1, 2}), (std::vector<int>{1, 3, 5, 7}));
  EXPECT_NE(one_domain_refusal({8, 3, 4, 1, 2}).find("(1, 3, 5, 7)"), std::string::npos);
  // Every GPU alone (no load/store peers): refused too.
  EXPECT_NE(one_domain_refusal({2, 1, 1, 0, 1}).find("holds 1 of the 2 ranks (1)"), std::string::npos);
}

TEST(NvlinkDomain, LongDomainListsAreBounded) {
  const std::string why = one_domain_refusal({1024, 0, 512, 0, 1});
  EXPECT_NE(why.find("... (512 ranks)"), std::string::npos) << why;
  EXPECT_LT(why.size(), 600u);
}

TEST(NvlinkDomain, InconsistentDescriptionsAreRefusedNotTrusted) {
  for (const LsaTeamView& v : {LsaTeamView{4, 0, 0, 0, 1}, LsaTeamView{4, 0, 2, 2, 1}, LsaTeamView{4, 0, 2, 0, 0},
                               LsaTeamView{4, 3, 2, 0, 1}, LsaTeamView{4, 0, 8, 0, 1}, LsaTeamView{4, 4, 4, 0, 1},
                               LsaTeamView{4, 0, 2, 1, 1}}) {
    EXPECT_TRUE(lsa_domain_ranks(v).empty());
    EXPECT_NE(one_domain_refusal(v).find("inconsistent"), std::string::npos) << one_domain_refusal(v);
  }
}
