// DLPack tensor → the attention API's [B, S, H, D] view (sizes and strides in elements), for every C ABI
// entry point over attention-shaped tensors. CUDA builds only (xstage/attn/forward.hpp).
#pragma once

#include "capi_common.hpp"
#include "xstage/attn/forward.hpp"

namespace xstage::capi {

static_assert(XSTAGE_ATTN_PRECISION_BF16 == int(attn::AttnPrecision::kBf16) &&
                  XSTAGE_ATTN_PRECISION_FP8 == int(attn::AttnPrecision::kFp8),
              "the C ABI's precision values are the C++ API's");

// A code that check_precision accepted, as the C++ API's enum.
inline attn::AttnPrecision precision_of(int precision) { return static_cast<attn::AttnPrecision>(precision); }

inline attn::BshdView view_of(const DLTensor& t) {
  attn::BshdView v;
  v.data = data_of(t);
  for (int d = 0; d < 4; ++d) {
    v.size[d] = t.shape[d];
    v.stride[d] = stride_of(t, d);
  }
  return v;
}

}  // namespace xstage::capi
