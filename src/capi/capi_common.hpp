// Helpers every C ABI entry point shares: the thread-local error message, the exception barrier and
// DLPack tensor checks that name the argument. Entry points for other layers (e.g. MoE) use them too.
#pragma once

#include <cstdint>
#include <exception>
#include <new>
#include <string>

#include "xstage/c_api.h"
#include "xstage/model/error.hpp"
#if XSTAGE_CAPI_HAVE_CUDA
#include "xstage/gpu/check.hpp"
#endif
#if XSTAGE_CAPI_HAVE_DIST
#include "xstage/c_api_dist.h"
#include "xstage/comm/team.hpp"
#endif

namespace xstage::capi {

// Records `message` as the calling thread's last error and returns `status`.
int fail(int status, std::string message);

// Clears the calling thread's last error; returns XSTAGE_OK.
int ok();

// Runs `body` (returning an xstage_status) so that no C++ exception crosses the C boundary.
template <class Body>
int guarded(Body&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return fail(XSTAGE_ERR_INTERNAL, "out of host memory");
  } catch (const std::exception& e) {
    return fail(XSTAGE_ERR_INTERNAL, e.what());
  } catch (...) {
    return fail(XSTAGE_ERR_INTERNAL, "unknown C++ exception");
  }
}

// Runs an entry point of a GPU layer (MoE, teams, Ulysses), `guarded`, with the C++ API's exceptions as statuses:
// bad input (InputError) VALUE, or UNSUPPORTED where it names a device the kernels are not built for (sm_90a); a
// team's bounded wait that gave up (comm::TeamTimeout) TIMEOUT; a CUDA or NCCL failure (gpu::DeviceError) CUDA.
template <class Body>
int guarded_layer(Body&& body) noexcept {
  return guarded([&]() -> int {
    try {
      return body();
    } catch (const InputError& e) {
      const std::string what = e.what();
      return fail(what.find("sm_90a") != std::string::npos ? XSTAGE_ERR_UNSUPPORTED : XSTAGE_ERR_VALUE, what);
#if XSTAGE_CAPI_HAVE_DIST
    } catch (const comm::TeamTimeout& e) {
      return fail(XSTAGE_ERR_TIMEOUT, e.what());
#endif
#if XSTAGE_CAPI_HAVE_CUDA
    } catch (const gpu::DeviceError& e) {
      return fail(XSTAGE_ERR_CUDA, e.what());
#endif
    }
  });
}

// "bfloat16", "float32", "int64", ... for messages.
std::string dtype_name(DLDataType t);
// "cpu", "cuda:1", "cuda_host", ... for messages.
std::string device_name(DLDevice d);
// "[2, 1024, 24, 128]" for messages.
// Largest rank a DLPack tensor handed to the C ABI may have (the kernels take rank 2 to 4).
constexpr int kMaxTensorRank = 8;
std::string shape_text(const DLTensor& t);
// The tensor's own fields checked before any is read (null tensor or shape, rank, negative sizes or
// strides, element-count overflow, zero-bit dtype): "" or a message naming `name`. check_cuda_tensor
// runs it first; every entry point taking a DLTensor goes through one of the two.
std::string check_tensor_structure(const char* name, const DLTensor* t);

bool is_dtype(const DLDataType& t, uint8_t code, uint8_t bits);

// Size and stride of dimension d (strides NULL: compact row-major, as DLPack defines).
int64_t stride_of(const DLTensor& t, int d);
// First element's address (data + byte_offset).
const void* data_of(const DLTensor& t);

// Empty when `t` is non-null, on a CUDA device, of dtype (code, bits) with `ndim` dimensions; else
// the reason, starting with `name`. *status receives the matching xstage_status.
std::string check_cuda_tensor(const char* name, const DLTensor* t, uint8_t code, uint8_t bits, int ndim,
                              const char* dtype_accepted, const char* rank_accepted, int* status);

// Empty when `t` lies on the same device as `ref` (named ref_name); else the reason.
std::string check_same_device(const char* name, const DLTensor& t, const char* ref_name, const DLTensor& ref);

// True when `t`'s elements are compact row-major (size-1 dimensions' strides ignored).
bool is_contiguous(const DLTensor& t);

// The attention precision codes of c_api.h (XSTAGE_ATTN_PRECISION_*), for every entry point that takes one:
// XSTAGE_OK, or XSTAGE_ERR_VALUE naming `precision`, the value and the accepted codes.
int check_precision(int precision);
// "XSTAGE_ATTN_PRECISION_BF16" or "..._FP8" (for messages; the code was checked).
const char* precision_macro(int precision);

}  // namespace xstage::capi
