// Per-rank state of the separate-kernel MoE baseline (MoeBaseline), shared by the layer and the testing
// library's harness over it (xstage::testing::MoeBaselineHarness: random fill, output poison), which
// reaches it as a friend.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "cublas_loader.hpp"  // cuBLAS / cuBLASLt through testing::cublas(), loaded on first use
#include "moe_baseline.hpp"
#include "moe_rank_buffers.hpp"
#include "xstage/gpu/check.hpp"

namespace xstage::moe {

[[noreturn]] inline void throw_cublas_error(cublasStatus_t st, const char* expr, const char* file, int line) {
  const testing::CublasApi& api = testing::cublas();  // loaded: `st` came from one of its calls
  throw gpu::DeviceError(std::string(file) + ":" + std::to_string(line) + ": " + expr + " failed: " +
                         api.get_status_name(st) + " (" + api.get_status_string(st) + ")");
}

#define XSTAGE_CUBLAS_CHECK(expr)                                               \
  do {                                                                          \
    const cublasStatus_t xstage_cublas_st_ = (expr);                            \
    if (xstage_cublas_st_ != CUBLAS_STATUS_SUCCESS)                             \
      throw_cublas_error(xstage_cublas_st_, #expr, __FILE__, __LINE__);         \
  } while (0)

// cuBLASLt workspace per rank (FP8 GEMMs).
inline constexpr size_t kLtWorkspaceBytes = size_t(32) << 20;

// Events of one run on a rank's stream, in stage order.
namespace baseline_events {
enum Ev { kStart, kDispatched, kLinear1, kSwiglu, kLinear2, kCombined, kCountsReady, kEvents };
}

// Inputs, routing, dispatch plan and output: MoeRankBuffers.
struct MoeBaseline::RankState : MoeRankBuffers {
  comm::LocalRank* lr = nullptr;
  cublasHandle_t blas = nullptr;
  int* recv_expert_rows = nullptr;  // [source rank][local expert]
  int *expert_rows_h = nullptr, *recv_expert_rows_h = nullptr;  // pinned copies
  // rows
  std::uint16_t *send = nullptr, *recv = nullptr, *h = nullptr, *a = nullptr, *out = nullptr, *returned = nullptr;
  // grouped GEMM pointer arrays: pinned staging and device copies, [3][max_groups] per linear layer
  const void** ptrs_h[2] = {nullptr, nullptr};
  const void** ptrs_d[2] = {nullptr, nullptr};
  cudaEvent_t ev[baseline_events::kEvents] = {};
  long long received_rows = 0;

  // --- FP8 path (precision kFp8 only; null otherwise) ---
  cublasLtHandle_t lt = nullptr;
  void* lt_workspace = nullptr;
  // weights: e4m3 values, block scales as quantized ([E/N][rows/128][cols/128]) and padded to the
  // layout cuBLASLt reads ([E/N][rows/128][pad4(cols/128)])
  std::uint8_t *w1q = nullptr, *w2q = nullptr;
  float *w1s_raw = nullptr, *w2s_raw = nullptr, *w1s = nullptr, *w2s = nullptr;
  // activations: x quantized [tokens][hidden] + [tokens][hidden/128]; send/recv rows and scales;
  // the SwiGLU output [rows][h_inter] + [rows][h_inter/128]; per-group scales for cuBLASLt
  std::uint8_t *xq = nullptr, *send_q = nullptr, *recv_q = nullptr, *aq = nullptr;
  float *xs = nullptr, *send_s = nullptr, *recv_s = nullptr, *as = nullptr, *packed_s = nullptr;
  int* group_table_d = nullptr;  // [max_groups][3]: first row, rows, padded row offset
  int* group_table_h = nullptr;  // pinned staging
  // One matmul descriptor and A (weight) layout per linear layer; B / D layouts and the heuristic's
  // algorithm per (layer, padded group rows), made on first use.
  cublasLtMatmulDesc_t lt_desc[2] = {nullptr, nullptr};
  cublasLtMatrixLayout_t lt_a[2] = {nullptr, nullptr};
  struct LtShape {
    cublasLtMatrixLayout_t b = nullptr, d = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  std::map<std::pair<int, int>, LtShape> lt_shapes;

  // The layouts and algorithm of a layer's GEMM over n rows (out [n][M] = in [n][Kd] · W^T), cached.
  // Throws gpu::DeviceError with cuBLASLt's status when it has no algorithm for the block scaling.
  const LtShape& lt_shape(int layer, int M, int Kd, int n) {
    const auto key = std::make_pair(layer, n);
    auto it = lt_shapes.find(key);
    if (it != lt_shapes.end()) return it->second;
    const testing::CublasApi& api = testing::cublas();
    LtShape sh;
    XSTAGE_CUBLAS_CHECK(api.lt_matrix_layout_create(&sh.b, CUDA_R_8F_E4M3, Kd, n, Kd));
    XSTAGE_CUBLAS_CHECK(api.lt_matrix_layout_create(&sh.d, CUDA_R_16BF, M, n, M));
    cublasLtMatmulPreference_t pref = nullptr;
    XSTAGE_CUBLAS_CHECK(api.lt_matmul_preference_create(&pref));
    const size_t ws = kLtWorkspaceBytes;
    XSTAGE_CUBLAS_CHECK(
        api.lt_matmul_preference_set_attribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
    cublasLtMatmulHeuristicResult_t res{};
    int found = 0;
    const cublasStatus_t status =
        api.lt_matmul_algo_get_heuristic(lt, lt_desc[layer], lt_a[layer], sh.b, sh.d, sh.d, pref, 1, &res, &found);
    api.lt_matmul_preference_destroy(pref);
    if (status != CUBLAS_STATUS_SUCCESS || found == 0) {
      api.lt_matrix_layout_destroy(sh.b);
      api.lt_matrix_layout_destroy(sh.d);
      throw gpu::DeviceError(std::string("moe baseline fp8: cuBLASLt offers no algorithm for the block-scaled e4m3 GEMM") +
                             " (A = weight BLK128x128_32F, B = activations VEC128_32F, bf16 D, m " + std::to_string(M) +
                             ", n " + std::to_string(n) + ", k " + std::to_string(Kd) +
                             "): cublasLtMatmulAlgoGetHeuristic returned " + api.get_status_name(status) + " with " +
                             std::to_string(found) + " result(s)");
    }
    sh.algo = res.algo;
    return lt_shapes.emplace(key, sh).first->second;
  }
};

}  // namespace xstage::moe
