// The dispatch plan of one rank (host launcher of three small kernels; returns the launch status): run
// before the fused MoE kernel (enqueue_moe_fused_run) and by the separate-kernel baseline.
#pragma once

#include <cuda_runtime_api.h>

namespace xstage::moe {

// Dispatch plan of one rank, deterministic (no atomics): expert_rows[e] = slots routed to expert e;
// expert_offset[e] = Σ_{e'<e} expert_rows[e']; send_row_of_slot[slot] = expert_offset[e] + (rank of
// the slot among expert e's slots in slot order); token_of_send_row[row] = slot / top_k.
// Send rows are thus grouped by global expert, hence by destination rank (experts are contiguous per rank).
cudaError_t launch_dispatch_plan(const int* expert_ids, int tokens, int top_k, int experts, int* expert_rows,
                                 int* expert_offset, int* send_row_of_slot, int* token_of_send_row,
                                 cudaStream_t stream);

}  // namespace xstage::moe
