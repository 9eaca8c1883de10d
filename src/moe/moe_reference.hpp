// The layer's dimensions, precision, FP8 groups and routing, under the name the fused launch path
// includes (moe_fused_launch.hpp). The CPU reference itself is xstage/testing/moe_reference.hpp.
#pragma once

#include "xstage/moe/moe_dims.hpp"
#include "xstage/moe/moe_numerics.hpp"
#include "xstage/moe/routing.hpp"
