#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "moe_dispatch_plan.hpp"

namespace xstage::moe {
namespace {

constexpr int kPlanThreads = 256;

// One block per expert: counts the slots routed to it (each thread a contiguous chunk of slots).
__global__ void count_kernel(const int* __restrict__ ids, int slots, int* __restrict__ expert_rows) {
  using Reduce = cub::BlockReduce<int, kPlanThreads>;
  __shared__ typename Reduce::TempStorage tmp;
  const int e = blockIdx.x;
  int n = 0;
  for (int s = threadIdx.x; s < slots; s += kPlanThreads) n += ids[s] == e;
  const int total = Reduce(tmp).Sum(n);
  if (threadIdx.x == 0) expert_rows[e] = total;
}

// One block: exclusive prefix sum over experts (any count, in chunks of the block size).
__global__ void offsets_kernel(const int* __restrict__ expert_rows, int experts, int* __restrict__ expert_offset) {
  using Scan = cub::BlockScan<int, kPlanThreads>;
  __shared__ typename Scan::TempStorage tmp;
  __shared__ int carry;
  if (threadIdx.x == 0) carry = 0;
  __syncthreads();
  for (int base = 0; base < experts; base += kPlanThreads) {
    const int e = base + threadIdx.x;
    const int v = e < experts ? expert_rows[e] : 0;
    int excl, chunk_total;
    Scan(tmp).ExclusiveSum(v, excl, chunk_total);
    if (e < experts) expert_offset[e] = carry + excl;
    __syncthreads();
    if (threadIdx.x == 0) carry += chunk_total;
    __syncthreads();
  }
}

// One block per expert: each thread owns a contiguous chunk of slots, so an exclusive scan of the
// per-thread match counts gives every match its position in slot order (stable, deterministic).
__global__ void position_kernel(const int* __restrict__ ids, int slots, int top_k, const int* __restrict__ expert_offset,
                                int* __restrict__ send_row_of_slot, int* __restrict__ token_of_send_row) {
  using Scan = cub::BlockScan<int, kPlanThreads>;
  __shared__ typename Scan::TempStorage tmp;
  const int e = blockIdx.x;
  const int chunk = (slots + kPlanThreads - 1) / kPlanThreads;
  const int s0 = threadIdx.x * chunk, s1 = min(slots, s0 + chunk);
  int n = 0;
  for (int s = s0; s < s1; ++s) n += ids[s] == e;
  int pos;
  Scan(tmp).ExclusiveSum(n, pos);
  int row = expert_offset[e] + pos;
  for (int s = s0; s < s1; ++s) {
    if (ids[s] == e) {
      send_row_of_slot[s] = row;
      token_of_send_row[row] = s / top_k;
      ++row;
    }
  }
}

}  // namespace

cudaError_t launch_dispatch_plan(const int* expert_ids, int tokens, int top_k, int experts, int* expert_rows,
                                 int* expert_offset, int* send_row_of_slot, int* token_of_send_row,
                                 cudaStream_t stream) {
  const int slots = tokens * top_k;
  count_kernel<<<experts, kPlanThreads, 0, stream>>>(expert_ids, slots, expert_rows);
  offsets_kernel<<<1, kPlanThreads, 0, stream>>>(expert_rows, experts, expert_offset);
  position_kernel<<<experts, kPlanThreads, 0, stream>>>(expert_ids, slots, top_k, expert_offset, send_row_of_slot,
                                                        token_of_send_row);
  return cudaGetLastError();
}

}  // namespace xstage::moe
