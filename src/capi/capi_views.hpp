// DLPack tensor → the attention API's [B, S, H, D] view (sizes and strides in elements), for every C ABI
// entry point over attention-shaped tensors. CUDA builds only (xstage/attn/forward.hpp).
#pragma once

#include "capi_common.hpp"
#include "xstage/attn/forward.hpp"

namespace xstage::capi {

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
