// The attention forward API moved to the public header; this forwarding include keeps local includes working.
#pragma once
#include "xstage/attn/forward.hpp"
