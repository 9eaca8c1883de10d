// The C ABI's DLPack checks (src/capi/capi_common.cpp) on malformed tensors a foreign producer may hand
// over: a null shape, a rank beyond any tensor, negative sizes or strides, an overflowing element count.
// Each gives a message naming the tensor, never a read through a bad pointer.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "../../src/capi/capi_common.hpp"

namespace {

using xstage::capi::check_cuda_tensor;
using xstage::capi::check_tensor_structure;

DLTensor cuda_bf16(int ndim, int64_t* shape, int64_t* strides = nullptr) {
  static char byte;
  DLTensor t{};
  t.data = &byte;
  t.device = {kDLCUDA, 0};
  t.ndim = ndim;
  t.dtype = {kDLBfloat, 16, 1};
  t.shape = shape;
  t.strides = strides;
  return t;
}

std::string check(const DLTensor* t) {
  int status = 0;
  return check_cuda_tensor("q", t, kDLBfloat, 16, 4, "bfloat16", "4 ([B, S, H, D])", &status);
}

TEST(CapiTensorChecks, MalformedTensorsAreRefusedByName) {
  int64_t shape4[4] = {1, 128, 2, 64};
  const DLTensor good = cuda_bf16(4, shape4);
  EXPECT_EQ(check(&good), "");
  EXPECT_NE(check(nullptr).find("null tensor"), std::string::npos);
  // A null shape with rank 4, and with a wrong rank (the rank message printed the shape through it).
  DLTensor t = cuda_bf16(4, nullptr);
  EXPECT_NE(check(&t).find("null shape"), std::string::npos) << check(&t);
  t = cuda_bf16(3, nullptr);
  EXPECT_NE(check(&t).find("null shape"), std::string::npos) << check(&t);
  t = cuda_bf16(1 << 30, shape4);
  EXPECT_NE(check(&t).find("rank 1073741824"), std::string::npos) << check(&t);
  t = cuda_bf16(-1, shape4);
  EXPECT_NE(check(&t).find("rank -1"), std::string::npos) << check(&t);
  int64_t negative[4] = {1, -128, 2, 64};
  t = cuda_bf16(4, negative);
  EXPECT_NE(check(&t).find("negative size"), std::string::npos) << check(&t);
  int64_t strides[4] = {-1, 128, 64, 1};
  t = cuda_bf16(4, shape4, strides);
  EXPECT_NE(check(&t).find("negative stride"), std::string::npos) << check(&t);
  int64_t huge[4] = {int64_t{1} << 40, int64_t{1} << 40, 2, 64};
  t = cuda_bf16(4, huge);
  EXPECT_NE(check(&t).find("2^62"), std::string::npos) << check(&t);
  t = cuda_bf16(4, shape4);
  t.dtype.lanes = 0;
  EXPECT_NE(check_tensor_structure("q", &t).find("0 lanes"), std::string::npos);
  for (const DLTensor* bad : {&t}) EXPECT_EQ(check_tensor_structure("q", bad).rfind("q: ", 0), 0u);
}

}  // namespace
