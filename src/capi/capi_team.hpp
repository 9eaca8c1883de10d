// The C ABI's team handle (include/xstage/c_api_dist.h), shared by the distributed entry points and the
// fused MoE layer's team constructor (c_api_moe.h's layer on a team).
#pragma once

#if XSTAGE_CAPI_HAVE_DIST
#include "xstage/comm/team.hpp"

struct xstage_team {
  xstage::comm::Team team;
};
#endif
