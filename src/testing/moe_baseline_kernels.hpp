// Kernels of the separate-kernel MoE baseline (host launchers; each returns the launch status). Its dispatch
// plan is the product's (launch_dispatch_plan, src/moe/moe_dispatch_plan.hpp).
// Layouts: token rows are bf16 [rows][width], row-major; a routing slot is token·top_k + j.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace xstage::moe {

// send[row] = x[token_of_send_row[row]] for rows in [0, tokens·top_k); width a multiple of 8.
cudaError_t launch_gather_rows(const std::uint16_t* x, const int* token_of_send_row, int rows, int width,
                               std::uint16_t* send, cudaStream_t stream);

// a[r][i] = bf16(silu(h[r][i]) · h[r][h_inter + i]) for r < rows (h: [rows][2·h_inter]).
cudaError_t launch_swiglu(const std::uint16_t* h, int rows, int h_inter, std::uint16_t* a, cudaStream_t stream);

// y[t] = bf16(Σ_j weights[t·k+j] · returned[send_row_of_slot[t·k+j]]), j in order, float accumulation.
cudaError_t launch_combine(const std::uint16_t* returned, const int* send_row_of_slot, const float* weights,
                           int tokens, int top_k, int hidden, std::uint16_t* y, cudaStream_t stream);

// --- FP8 (e4m3) W8A8 path (rules: moe_numerics.hpp) ---

// send_q[row] = q[token_of_send_row[row]] (hidden e4m3 bytes, hidden a multiple of 16) and
// send_s[row] = s[token_of_send_row[row]] (hidden / 128 scales) for rows in [0, rows).
cudaError_t launch_gather_rows_fp8(const std::uint8_t* q, const float* s, const int* token_of_send_row, int rows,
                                   int hidden, std::uint8_t* send_q, float* send_s, cudaStream_t stream);

// SwiGLU then FP8: a = swiglu_bf16(h[r][i], h[r][h_inter + i]) (bf16 values), quantized per 128
// channels: q [rows][h_inter] e4m3, s [rows][h_inter / 128]. h_inter a multiple of 128.
cudaError_t launch_swiglu_fp8(const std::uint16_t* h, int rows, int h_inter, std::uint8_t* q, float* s,
                              cudaStream_t stream);

// Activation scales in the layout cuBLASLt's VEC128_32F mode reads, one block per GEMM group:
// s [rows][kgroups] (row-major, one row per received token row) -> for group g with table[3g..3g+2] =
// (first row, rows, padded row offset P): dst[kgroups·P + k·pad4(rows) + i] = s[first + i][k] for
// i < rows, 0 for rows <= i < pad4(rows) (pad4: rounded up to a multiple of 4). `max_rows`: the
// largest group's row count (grid size).
cudaError_t launch_pack_group_scales(const float* s, int kgroups, const int* table, int groups, int max_rows,
                                     float* dst, cudaStream_t stream);

// Weight block scales [matrices][row_blocks][col_blocks] -> [matrices][row_blocks][col_blocks_pad]
// (the extra columns 0): cuBLASLt's BLK128x128_32F mode wants the K blocks padded to a multiple of 4.
cudaError_t launch_pad_block_scales(const float* src, int matrices, int row_blocks, int col_blocks,
                                    int col_blocks_pad, float* dst, cudaStream_t stream);

// Fills n bf16 values with a counter-based hash of (seed, index), uniform in [-scale, scale).
cudaError_t launch_fill_uniform_bf16(std::uint16_t* p, std::size_t n, std::uint64_t seed, float scale,
                                     cudaStream_t stream);

}  // namespace xstage::moe
