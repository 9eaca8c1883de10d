// Kernels of the separate-kernel MoE baseline (host launchers; each returns the launch status).
// Layouts: token rows are bf16 [rows][width], row-major; a routing slot is token·top_k + j.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace xstage::moe {

// Dispatch plan of one rank, deterministic (no atomics): expert_rows[e] = slots routed to expert e;
// expert_offset[e] = Σ_{e'<e} expert_rows[e']; send_row_of_slot[slot] = expert_offset[e] + (rank of
// the slot among expert e's slots in slot order); token_of_send_row[row] = slot / top_k.
// Send rows are thus grouped by global expert, hence by destination rank (experts are contiguous per rank).
cudaError_t launch_dispatch_plan(const int* expert_ids, int tokens, int top_k, int experts, int* expert_rows,
                                 int* expert_offset, int* send_row_of_slot, int* token_of_send_row,
                                 cudaStream_t stream);

// send[row] = x[token_of_send_row[row]] for rows in [0, tokens·top_k); width a multiple of 8.
cudaError_t launch_gather_rows(const std::uint16_t* x, const int* token_of_send_row, int rows, int width,
                               std::uint16_t* send, cudaStream_t stream);

// a[r][i] = bf16(silu(h[r][i]) · h[r][h_inter + i]) for r < rows (h: [rows][2·h_inter]).
cudaError_t launch_swiglu(const std::uint16_t* h, int rows, int h_inter, std::uint16_t* a, cudaStream_t stream);

// y[t] = bf16(Σ_j weights[t·k+j] · returned[send_row_of_slot[t·k+j]]), j in order, float accumulation.
cudaError_t launch_combine(const std::uint16_t* returned, const int* send_row_of_slot, const float* weights,
                           int tokens, int top_k, int hidden, std::uint16_t* y, cudaStream_t stream);

// Fills n bf16 values with a counter-based hash of (seed, index), uniform in [-scale, scale).
cudaError_t launch_fill_uniform_bf16(std::uint16_t* p, std::size_t n, std::uint64_t seed, float scale,
                                     cudaStream_t stream);

}  // namespace xstage::moe
