// The C ABI's shared parts: version and build queries, the thread-local error, DLPack tensor checks.
#include "capi_common.hpp"

#include <cstdlib>

namespace xstage::capi {

namespace {
thread_local std::string t_last_error;
}  // namespace

int fail(int status, std::string message) {
  t_last_error = std::move(message);
  return status;
}

int ok() {
  t_last_error.clear();
  return XSTAGE_OK;
}

std::string dtype_name(DLDataType t) {
  std::string s;
  switch (t.code) {
    case kDLInt: s = "int"; break;
    case kDLUInt: s = "uint"; break;
    case kDLFloat: s = "float"; break;
    case kDLBfloat: s = "bfloat"; break;
    case kDLComplex: s = "complex"; break;
    case kDLOpaqueHandle: s = "opaque"; break;
    case 6: s = "bool"; break;  // kDLBool (DLPack >= 0.8)
    default: s = "code"; s += std::to_string(int(t.code)); s += "_"; break;
  }
  if (t.code != 6) s += std::to_string(t.bits);
  if (t.lanes != 1) {
    s += "x";
    s += std::to_string(t.lanes);
  }
  return s;
}

std::string device_name(DLDevice d) {
  switch (d.device_type) {
    case kDLCPU: return "cpu";
    case kDLCUDA: return "cuda:" + std::to_string(d.device_id);
    case kDLCUDAHost: return "cuda_host (pinned host memory)";
    case kDLCUDAManaged: return "cuda_managed:" + std::to_string(d.device_id);
    case kDLROCM: return "rocm:" + std::to_string(d.device_id);
    default: return "DLPack device type " + std::to_string(int(d.device_type));
  }
}

std::string shape_text(const DLTensor& t) {
  if (t.ndim > 0 && !t.shape) return "(null shape)";
  std::string s = "[";
  for (int d = 0; d < t.ndim && d < kMaxTensorRank; ++d) s += (d ? ", " : "") + std::to_string(t.shape[d]);
  return s + (t.ndim > kMaxTensorRank ? ", ...]" : "]");
}

std::string check_tensor_structure(const char* name, const DLTensor* t) {
  const std::string n(name);
  if (!t) return n + ": missing (null tensor)";
  if (t->ndim < 0 || t->ndim > kMaxTensorRank)
    return n + ": rank " + std::to_string(t->ndim) + "; accepted: 0.." + std::to_string(kMaxTensorRank);
  if (t->ndim > 0 && !t->shape) return n + ": null shape array with rank " + std::to_string(t->ndim);
  int64_t elements = 1;
  for (int d = 0; d < t->ndim; ++d) {
    if (t->shape[d] < 0) return n + ": negative size " + std::to_string(t->shape[d]) + " in dimension " + std::to_string(d);
    if (t->strides && t->strides[d] < 0)
      return n + ": negative stride " + std::to_string(t->strides[d]) + " in dimension " + std::to_string(d);
    if (t->shape[d] > 0 && elements > (int64_t{1} << 62) / t->shape[d])
      return n + ": shape " + shape_text(*t) + " has more than 2^62 elements";
    elements *= t->shape[d];
  }
  if (t->dtype.lanes == 0 || t->dtype.bits == 0) return n + ": dtype with 0 bits or 0 lanes";
  return {};
}

bool is_dtype(const DLDataType& t, uint8_t code, uint8_t bits) {
  return t.code == code && t.bits == bits && t.lanes == 1;
}

int64_t stride_of(const DLTensor& t, int d) {
  if (t.strides) return t.strides[d];
  int64_t s = 1;
  for (int i = t.ndim - 1; i > d; --i) s *= t.shape[i];
  return s;
}

const void* data_of(const DLTensor& t) { return static_cast<const char*>(t.data) + t.byte_offset; }

std::string check_cuda_tensor(const char* name, const DLTensor* t, uint8_t code, uint8_t bits, int ndim,
                              const char* dtype_accepted, const char* rank_accepted, int* status) {
  *status = XSTAGE_ERR_VALUE;
  const std::string n(name);
  if (std::string bad = check_tensor_structure(name, t); !bad.empty()) return bad;
  if (t->device.device_type != kDLCUDA) {
    return n + ": device " + device_name(t->device) + "; accepted: a CUDA device tensor";
  }
  if (!is_dtype(t->dtype, code, bits)) {
    *status = XSTAGE_ERR_TYPE;
    return n + ": dtype " + dtype_name(t->dtype) + "; accepted: " + dtype_accepted;
  }
  if (t->ndim != ndim) {
    return n + ": rank " + std::to_string(t->ndim) + " (shape " + shape_text(*t) + "); accepted: " + rank_accepted;
  }
  if (!t->data) return n + ": null data pointer";
  return {};
}

std::string check_same_device(const char* name, const DLTensor& t, const char* ref_name, const DLTensor& ref) {
  if (t.device.device_id == ref.device.device_id) return {};
  return std::string(name) + ": device " + device_name(t.device) + " but " + ref_name + " is on " +
         device_name(ref.device) + "; accepted: every tensor on one device";
}

bool is_contiguous(const DLTensor& t) {
  if (!t.strides) return true;
  int64_t expected = 1;
  for (int d = t.ndim - 1; d >= 0; --d) {
    if (t.shape[d] != 1 && t.strides[d] != expected) return false;
    expected *= t.shape[d];
  }
  return true;
}

int check_precision(int precision) {
  if (precision == XSTAGE_ATTN_PRECISION_BF16 || precision == XSTAGE_ATTN_PRECISION_FP8) return XSTAGE_OK;
  return fail(XSTAGE_ERR_VALUE, "precision: " + std::to_string(precision) +
                                    "; accepted: 0 (XSTAGE_ATTN_PRECISION_BF16), 1 (XSTAGE_ATTN_PRECISION_FP8)");
}

const char* precision_macro(int precision) {
  return precision == XSTAGE_ATTN_PRECISION_FP8 ? "XSTAGE_ATTN_PRECISION_FP8" : "XSTAGE_ATTN_PRECISION_BF16";
}

}  // namespace xstage::capi

extern "C" {

int xstage_c_api_version(void) { return XSTAGE_C_API_VERSION; }

const char* xstage_last_error(void) { return xstage::capi::t_last_error.c_str(); }

void xstage_free(void* p) { std::free(p); }

}  // extern "C"

extern "C" {

int xstage_has_cuda(void) { return XSTAGE_CAPI_HAVE_CUDA; }

const char* xstage_build_info(void) { return XSTAGE_CAPI_BUILD_INFO; }

}  // extern "C"
