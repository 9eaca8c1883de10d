// Stand-alone kernels of the Ulysses layer: remote-store All-to-All, the owner's bounded wait, and the
// head-block copies around NCCL's per-peer chunks.
#include "ulysses_kernels.hpp"

#include <cstdio>
#include <string>

#include "xstage/gpu/flags.cuh"

namespace xstage::attn {

namespace {

constexpr int kA2AThreads = 512;

// Every thread moves 16-byte vectors of o_local [seq, heads_per_gpu, head_dim] to the owner's
// [local_seq, heads_total, head_dim]; consecutive threads take consecutive vectors of one row, so a
// warp writes contiguous 512-byte runs (two heads' 256-byte rows of one token). Then one flag per CTA per receiver.
__global__ void __launch_bounds__(kA2AThreads) a2a_remote_store_kernel(const uint4* __restrict__ o_local,
                                                                        const A2AEpilogueParams ep, int heads_per_gpu,
                                                                        int vec_per_row) {
  const int64_t vec_per_token = int64_t(heads_per_gpu) * vec_per_row;
  const int64_t total = int64_t(ep.seq) * vec_per_token;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int row = int(i / vec_per_token);  // o_local row; the sequence row is rotated like the query rows
    const int rem = int(i - int64_t(row) * vec_per_token);
    const int h = rem / vec_per_row;
    const int chunk = rem - h * vec_per_row;
    const A2ARowOwner o = a2a_row_owner(a2a_sequence_row(row, ep.row_rotation, ep.seq), ep.shard_len);
    uint4* dst = static_cast<uint4*>(ep.dst[o.owner]);
    dst[(int64_t(o.local_row) * ep.heads_total + ep.head_offset + h) * vec_per_row + chunk] = o_local[i];
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    const uint32_t next = *ep.epoch + 1;
    for (int r = 0; r < ep.world; ++r) gpu::publish_flag_release(ep.flags[r] + ep.rank * kA2AMaxCtas + blockIdx.x, next);
  }
}

// One CTA; thread i waits for flags i, i + blockDim.x, ... against one deadline. The first thread whose
// wait expires claims the record in shared memory and every thread stops waiting; after the barrier
// thread 0 writes the host-mapped record (fields, fence, then `expired`), prints it and traps. A trap by
// the claimer alone could end the kernel before its record is complete, hence the barrier first.
__global__ void a2a_wait_kernel(const uint32_t* flags, uint32_t* epoch, int world, int ctas_per_src, int rank,
                                uint64_t timeout_ns, A2AWaitFailure* failure, uint32_t extra_epochs) {
  __shared__ int failed;  // 0, or 1 once a thread's wait expired (claimed with atomicCAS)
  __shared__ A2AWaitFailure record;
  if (threadIdx.x == 0) failed = 0;
  __syncthreads();
  const uint32_t target = *epoch + 1;
  const uint32_t awaited = target + extra_epochs;
  const uint64_t t0 = gpu::globaltimer_ns();
  for (int i = threadIdx.x; i < world * ctas_per_src; i += blockDim.x) {
    const int src = i / ctas_per_src, cta = i % ctas_per_src;
    const uint32_t* flag = flags + src * kA2AMaxCtas + cta;
    const uint64_t now = gpu::globaltimer_ns();
    const uint64_t left = now - t0 < timeout_ns ? timeout_ns - (now - t0) : 0;
    bool expired = false;
    gpu::bounded_wait<32, gpu::WaitTimeout::kGiveUp>(
        [&] { return *static_cast<volatile int*>(&failed) != 0 ? awaited : gpu::load_flag_acquire(flag); },
        [&](uint32_t v) { return v >= awaited; }, left, [&](uint32_t v, uint64_t) {
          expired = true;
          if (atomicCAS(&failed, 0, 1) == 0) {
            record = A2AWaitFailure{1u, uint32_t(rank), uint32_t(src), uint32_t(cta), awaited, v,
                                    gpu::globaltimer_ns() - t0};
          }
        });
    if (expired || *static_cast<volatile int*>(&failed) != 0) break;
  }
  __syncthreads();
  if (failed != 0) {
    if (threadIdx.x == 0) {
      if (failure != nullptr) {
        volatile A2AWaitFailure* f = failure;
        f->rank = record.rank;
        f->src = record.src;
        f->cta = record.cta;
        f->target = record.target;
        f->seen = record.seen;
        f->waited_ns = record.waited_ns;
        __threadfence_system();
        f->expired = 1;
        __threadfence_system();
      }
      printf("xstage: bounded wait timed out after %llu ns: rank %u waited for the post-attention All-to-All "
             "(source rank %u CTA %u: flag >= %u, last seen %u)\n",
             static_cast<unsigned long long>(record.waited_ns), record.rank, record.src, record.cta, record.target,
             record.seen);
    }
    __syncthreads();
    __trap();
  }
  if (threadIdx.x == 0) *epoch = target;  // every flag acquired (barrier above) before the epoch advances
}

__global__ void head_block_copy_kernel(uint4* blocks, uint4* rows, int nblocks, int seq, int heads_per_block,
                                       int vec_per_head, bool to_blocks) {
  const int64_t per_block = int64_t(seq) * heads_per_block * vec_per_head;
  const int64_t total = per_block * nblocks;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int b = int(i / per_block);
    int64_t rem = i - b * per_block;
    const int s = int(rem / (int64_t(heads_per_block) * vec_per_head));
    rem -= int64_t(s) * heads_per_block * vec_per_head;  // h * vec_per_head + chunk
    const int64_t r = (int64_t(s) * nblocks * heads_per_block + int64_t(b) * heads_per_block) * vec_per_head + rem;
    if (to_blocks) {
      blocks[i] = rows[r];
    } else {
      rows[r] = blocks[i];
    }
  }
}

int sm_count() {
  int dev = 0, n = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev);
  return n > 0 ? n : 1;
}

}  // namespace

cudaError_t a2a_remote_store(const void* o_local, const A2AEpilogueParams& ep, int heads_per_gpu, int head_dim,
                             int grid, cudaStream_t stream) {
  if (grid < 1 || grid > kA2AMaxCtas || head_dim % 8 != 0 || ep.world > kA2AMaxRanks) return cudaErrorInvalidValue;
  a2a_remote_store_kernel<<<grid, kA2AThreads, 0, stream>>>(static_cast<const uint4*>(o_local), ep, heads_per_gpu,
                                                            head_dim / 8);
  return cudaGetLastError();
}

cudaError_t a2a_wait(const uint32_t* flags_local, uint32_t* epoch, int world, int ctas_per_src, int rank,
                     uint64_t timeout_ns, cudaStream_t stream, A2AWaitFailure* failure, uint32_t extra_epochs) {
  if (ctas_per_src < 1 || ctas_per_src > kA2AMaxCtas || world < 1 || world > kA2AMaxRanks) return cudaErrorInvalidValue;
  a2a_wait_kernel<<<1, 256, 0, stream>>>(flags_local, epoch, world, ctas_per_src, rank, timeout_ns, failure,
                                         extra_epochs);
  return cudaGetLastError();
}

std::string a2a_wait_failure_text(const A2AWaitFailure& f) {
  if (f.expired == 0) return {};
  char waited[32];
  std::snprintf(waited, sizeof(waited), "%.2f", double(f.waited_ns) * 1e-9);
  return "rank " + std::to_string(f.rank) + " timed out after " + waited +
         " s waiting for the post-attention All-to-All (Ulysses attention: the owner's wait for source rank " +
         std::to_string(f.src) + ", CTA " + std::to_string(f.cta) + ": flag wanted epoch " + std::to_string(f.target) +
         ", saw " + std::to_string(f.seen) + "; that rank did not store its rows)";
}

cudaError_t head_block_copy(void* blocks, void* rows, int nblocks, int seq, int heads_per_block, int head_dim,
                            bool to_blocks, cudaStream_t stream) {
  if (head_dim % 8 != 0) return cudaErrorInvalidValue;
  if (seq == 0) return cudaSuccess;
  head_block_copy_kernel<<<2 * sm_count(), 512, 0, stream>>>(static_cast<uint4*>(blocks), static_cast<uint4*>(rows),
                                                             nblocks, seq, heads_per_block, head_dim / 8, to_blocks);
  return cudaGetLastError();
}

}  // namespace xstage::attn
