#include "a2a_tensor_map.hpp"

#include <cuda.h>

#include <cstdint>

namespace xstage::attn {

static_assert(sizeof(CUtensorMap) == kA2ATensorMapBytes, "CUtensorMap size");
static_assert(alignof(CUtensorMap) == kA2ATensorMapAlign, "CUtensorMap alignment");

cudaError_t a2a_encode_out_tensor_map(void* map, void* base, int rows, int heads_total, int head_dim) {
  using Encode = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*, const cuuint64_t*,
                              const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                              CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
  static Encode encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      fn = nullptr;
    return reinterpret_cast<Encode>(fn);
  }();
  if (!encode || !map || !base || rows < 1 || heads_total < 1 || head_dim < 8 || head_dim > 256 || head_dim % 8 != 0)
    return cudaErrorInvalidValue;
  const cuuint64_t dims[3] = {cuuint64_t(head_dim), cuuint64_t(heads_total), cuuint64_t(rows)};
  const cuuint64_t strides[2] = {cuuint64_t(head_dim) * 2, cuuint64_t(heads_total) * head_dim * 2};  // bytes, dims 1-2
  const cuuint32_t box[3] = {cuuint32_t(head_dim), 1, kA2ATensorBoxRows};
  const cuuint32_t elem_strides[3] = {1, 1, 1};
  const CUresult r = encode(static_cast<CUtensorMap*>(map), CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, base, dims, strides, box,
                            elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                            CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

}  // namespace xstage::attn
