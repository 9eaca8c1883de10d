// Release/acquire flag ordering and bounded waits (include/xstage/gpu/flags.cuh, bounded_wait.cuh), on
// one GPU (two CTAs of one kernel, the same code path as across GPUs) and across two GPUs (peer pointers
// and NCCL window LSA pointers).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <cstdlib>
#include <vector>

#include "gpu_test_support.hpp"
#include "xstage/comm/team.hpp"
#include "xstage/comm/window.hpp"
#include "xstage/gpu/check.hpp"
#include "xstage/gpu/flags.cuh"

namespace {

using namespace xstage;

using test::device_count;

__host__ __device__ inline std::uint32_t payload_word(std::uint32_t round, std::uint32_t i) {
  return round * 2654435761u ^ (i * 40503u + 7u);
}

constexpr std::uint64_t kTimeoutNs = 2'000'000'000ull;

// Producer side of the ping-pong: for each round, wait for the consumer's ack of the previous round,
// write the payload (all threads), CTA barrier, publish the round with a system-scope release.
// `skip_payload_round`: a round whose payload is deliberately not written (the checker must notice).
__device__ void produce(std::uint32_t* payload, std::uint32_t words, std::uint32_t* flag, const std::uint32_t* ack,
                        std::uint32_t rounds, std::uint32_t skip_payload_round, int rank) {
  for (std::uint32_t r = 1; r <= rounds; ++r) {
    if (threadIdx.x == 0) gpu::wait_flag_geq_or_trap(ack, r - 1, kTimeoutNs, {"flag test: consumer ack", rank, -1});
    __syncthreads();
    if (r != skip_payload_round)
      for (std::uint32_t i = threadIdx.x; i < words; i += blockDim.x) payload[i] = payload_word(r, i);
    __syncthreads();
    if (threadIdx.x == 0) gpu::publish_flag_release(flag, r);
  }
}

// Consumer side: acquire the round's flag, CTA barrier, ordinary loads of the payload, count wrong
// words, acknowledge.
__device__ void consume(const std::uint32_t* payload, std::uint32_t words, const std::uint32_t* flag, std::uint32_t* ack,
                        std::uint32_t rounds, unsigned long long* wrong, int rank) {
  for (std::uint32_t r = 1; r <= rounds; ++r) {
    if (threadIdx.x == 0) gpu::wait_flag_geq_or_trap(flag, r, kTimeoutNs, {"flag test: payload flag", rank, -1});
    __syncthreads();
    unsigned local = 0;
    for (std::uint32_t i = threadIdx.x; i < words; i += blockDim.x)
      if (payload[i] != payload_word(r, i)) ++local;
    if (local) atomicAdd(wrong, static_cast<unsigned long long>(local));
    __syncthreads();
    if (threadIdx.x == 0) gpu::publish_flag_release(ack, r);
  }
}

__global__ void pingpong_one_kernel(std::uint32_t* payload, std::uint32_t words, std::uint32_t* flag, std::uint32_t* ack,
                                    std::uint32_t rounds, std::uint32_t skip_round, unsigned long long* wrong) {
  if (blockIdx.x == 0) produce(payload, words, flag, ack, rounds, skip_round, 0);
  else consume(payload, words, flag, ack, rounds, wrong, 0);
}

__global__ void producer_kernel(std::uint32_t* const* ptrs, std::uint32_t words, std::uint32_t* ack, std::uint32_t rounds) {
  // ptrs[0]: payload on the peer, ptrs[1]: flag on the peer (resolved by the caller: peer or LSA pointers).
  produce(ptrs[0], words, ptrs[1], ack, rounds, 0, 0);
}

__global__ void consumer_kernel(const std::uint32_t* payload, std::uint32_t words, const std::uint32_t* flag,
                                std::uint32_t* const* ack_remote, std::uint32_t rounds, unsigned long long* wrong) {
  consume(payload, words, flag, ack_remote[0], rounds, wrong, 1);
}

__global__ void wait_never_set_kernel(const std::uint32_t* flag, std::uint64_t timeout_ns, int* result) {
  *result = gpu::wait_flag_geq(flag, 1, timeout_ns, {"flag test: a flag nobody sets (expected timeout)", 0, -1}) ? 1 : 0;
}

// gpu::bounded_wait on a poll that counts its calls and succeeds at call `succeed_after`.
struct BoundedWaitRecord {
  std::uint32_t polls, timeouts, seen_at_timeout, result;
  std::uint64_t waited_ns;
};
__global__ void bounded_wait_kernel(std::uint32_t succeed_after, std::uint64_t timeout_ns, BoundedWaitRecord* out) {
  BoundedWaitRecord r{};
  r.result = gpu::bounded_wait<16, gpu::WaitTimeout::kGiveUp>(
      [&] { return ++r.polls; }, [&](std::uint32_t v) { return v >= succeed_after; }, timeout_ns,
      [&](std::uint32_t v, std::uint64_t waited_ns) {
        ++r.timeouts;
        r.seen_at_timeout = v;
        r.waited_ns = waited_ns;
      });
  *out = r;
}

BoundedWaitRecord run_bounded_wait(std::uint32_t succeed_after, std::uint64_t timeout_ns) {
  XSTAGE_CUDA_CHECK(cudaSetDevice(0));
  BoundedWaitRecord* d;
  XSTAGE_CUDA_CHECK(cudaMalloc(&d, sizeof(BoundedWaitRecord)));
  XSTAGE_CUDA_CHECK(cudaMemset(d, 0xff, sizeof(BoundedWaitRecord)));
  bounded_wait_kernel<<<1, 1>>>(succeed_after, timeout_ns, d);
  XSTAGE_CUDA_CHECK_LAUNCH();
  XSTAGE_CUDA_CHECK(cudaDeviceSynchronize());
  BoundedWaitRecord h{};
  XSTAGE_CUDA_CHECK(cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost));
  XSTAGE_CUDA_CHECK(cudaFree(d));
  return h;
}

__global__ void trap_never_set_kernel(const std::uint32_t* flag) {
  gpu::wait_flag_geq_or_trap(flag, 1, 1'000'000, {"flag test: trap path (expected)", 0, -1});
}

unsigned long long run_one_gpu_pingpong(std::uint32_t words, std::uint32_t rounds, std::uint32_t skip_round) {
  XSTAGE_CUDA_CHECK(cudaSetDevice(0));
  std::uint32_t *payload, *flags;
  unsigned long long* wrong;
  XSTAGE_CUDA_CHECK(cudaMalloc(&payload, words * 4));
  XSTAGE_CUDA_CHECK(cudaMalloc(&flags, 2 * 4));
  XSTAGE_CUDA_CHECK(cudaMalloc(&wrong, 8));
  XSTAGE_CUDA_CHECK(cudaMemset(payload, 0, words * 4));
  XSTAGE_CUDA_CHECK(cudaMemset(flags, 0, 8));
  XSTAGE_CUDA_CHECK(cudaMemset(wrong, 0, 8));
  pingpong_one_kernel<<<2, 256>>>(payload, words, flags, flags + 1, rounds, skip_round, wrong);
  XSTAGE_CUDA_CHECK_LAUNCH();
  XSTAGE_CUDA_CHECK(cudaDeviceSynchronize());
  unsigned long long h = 0;
  XSTAGE_CUDA_CHECK(cudaMemcpy(&h, wrong, 8, cudaMemcpyDeviceToHost));
  XSTAGE_CUDA_CHECK(cudaFree(payload));
  XSTAGE_CUDA_CHECK(cudaFree(flags));
  XSTAGE_CUDA_CHECK(cudaFree(wrong));
  return h;
}

TEST(FlagOrdering, TwoCtasOneGpuSeeWholePayloadEveryRound) {
  REQUIRE_GPUS(1);
  EXPECT_EQ(run_one_gpu_pingpong(1 << 16, 2000, 0), 0ull);
}

TEST(FlagOrdering, CheckerCatchesAStalePayload) {
  REQUIRE_GPUS(1);
  // Round 7's payload is never written: the consumer reads round 6's data under round 7's flag.
  EXPECT_EQ(run_one_gpu_pingpong(1 << 12, 20, 7), static_cast<unsigned long long>(1 << 12));
}

TEST(BoundedWait, FirstPollSuccessPollsOnce) {
  REQUIRE_GPUS(1);
  const BoundedWaitRecord r = run_bounded_wait(1, 1'000'000'000ull);
  EXPECT_EQ(r.polls, 1u);
  EXPECT_EQ(r.result, 1u);
  EXPECT_EQ(r.timeouts, 0u);
}

TEST(BoundedWait, PollsUntilDoneWithoutRecording) {
  REQUIRE_GPUS(1);
  const BoundedWaitRecord r = run_bounded_wait(50, 1'000'000'000ull);
  EXPECT_EQ(r.polls, 50u);
  EXPECT_EQ(r.result, 50u);
  EXPECT_EQ(r.timeouts, 0u);
}

TEST(BoundedWait, RecordsOnceWithTheLastObservationAndReturnsIt) {
  REQUIRE_GPUS(1);
  const BoundedWaitRecord r = run_bounded_wait(0xffffffffu, 2'000'000ull);
  EXPECT_EQ(r.timeouts, 1u);
  EXPECT_EQ(r.seen_at_timeout, r.polls);
  EXPECT_EQ(r.result, r.polls);
  EXPECT_GT(r.polls, 1u);
  EXPECT_GT(r.waited_ns, 2'000'000ull);
  EXPECT_LT(r.waited_ns, 2'000'000'000ull);
}

TEST(BoundedWait, TimesOutAndReports) {
  REQUIRE_GPUS(1);
  XSTAGE_CUDA_CHECK(cudaSetDevice(0));
  std::uint32_t* flag;
  int* result;
  XSTAGE_CUDA_CHECK(cudaMalloc(&flag, 4));
  XSTAGE_CUDA_CHECK(cudaMalloc(&result, 4));
  XSTAGE_CUDA_CHECK(cudaMemset(flag, 0, 4));
  XSTAGE_CUDA_CHECK(cudaMemset(result, 0xff, 4));
  const auto t0 = std::chrono::steady_clock::now();
  wait_never_set_kernel<<<1, 1>>>(flag, 5'000'000, result);
  XSTAGE_CUDA_CHECK_LAUNCH();
  XSTAGE_CUDA_CHECK(cudaDeviceSynchronize());
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  int h = -1;
  XSTAGE_CUDA_CHECK(cudaMemcpy(&h, result, 4, cudaMemcpyDeviceToHost));
  EXPECT_EQ(h, 0);
  EXPECT_GE(ms, 5.0);
  EXPECT_LT(ms, 2000.0);
  XSTAGE_CUDA_CHECK(cudaFree(flag));
  XSTAGE_CUDA_CHECK(cudaFree(result));
}

// Runs in the death test's child process: a wait nobody satisfies must trap (not hang), and the host
// must see the error at the next synchronising call.
void trap_child() {
  cudaSetDevice(0);
  std::uint32_t* flag = nullptr;
  cudaMalloc(&flag, 4);
  cudaMemset(flag, 0, 4);
  trap_never_set_kernel<<<1, 1>>>(flag);
  const cudaError_t e = cudaDeviceSynchronize();
  std::fprintf(stderr, "sync: %s\n", cudaGetErrorName(e));
  std::exit(e == cudaSuccess ? 0 : 42);
}

TEST(BoundedWaitDeathTest, TrapsInsteadOfHanging) {
  REQUIRE_GPUS(1);
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(trap_child(), ::testing::ExitedWithCode(42), "sync: cuda");
}

// Two GPUs: producer on rank 0 writes rank 1's memory; consumer on rank 1 acks into rank 0's memory.
void two_gpu_pingpong(bool through_nccl_window) {
  auto team = comm::Team::single_process({0, 1});
  const std::uint32_t words = 1 << 16, rounds = 500;
  const std::size_t bytes = words * 4 + 256;
  std::unique_ptr<comm::SymmetricWindow> win;
  std::unique_ptr<comm::PeerBuffers> peer;
  std::uint32_t* base[2];
  if (through_nccl_window) {
    win = std::make_unique<comm::SymmetricWindow>(team, bytes, 1);
    base[0] = static_cast<std::uint32_t*>(win->local_ptr(0));
    base[1] = static_cast<std::uint32_t*>(win->local_ptr(1));
  } else {
    peer = std::make_unique<comm::PeerBuffers>(team, bytes);
    base[0] = static_cast<std::uint32_t*>(peer->ptr(0));
    base[1] = static_cast<std::uint32_t*>(peer->ptr(1));
  }
  // Layout in each rank's buffer: payload [0, words), flag at word `words`, ack at word `words + 32`.
  std::uint32_t** d_ptrs[2];
  for (int r = 0; r < 2; ++r) {
    XSTAGE_CUDA_CHECK(cudaSetDevice(r));
    XSTAGE_CUDA_CHECK(cudaMemset(base[r], 0, bytes));
    XSTAGE_CUDA_CHECK(cudaMalloc(&d_ptrs[r], 2 * sizeof(void*)));
  }
  if (through_nccl_window) {
    win->resolve_lsa_pointers(0, {1, 1}, {0, words * 4ull}, reinterpret_cast<void**>(d_ptrs[0]));
    win->resolve_lsa_pointers(1, {0, 0}, {(words + 32) * 4ull, (words + 32) * 4ull}, reinterpret_cast<void**>(d_ptrs[1]));
  } else {
    std::uint32_t* p0[2] = {base[1], base[1] + words};
    std::uint32_t* p1[2] = {base[0] + words + 32, base[0] + words + 32};
    XSTAGE_CUDA_CHECK(cudaMemcpy(d_ptrs[0], p0, sizeof(p0), cudaMemcpyHostToDevice));
    XSTAGE_CUDA_CHECK(cudaMemcpy(d_ptrs[1], p1, sizeof(p1), cudaMemcpyHostToDevice));
  }
  unsigned long long* wrong;
  XSTAGE_CUDA_CHECK(cudaSetDevice(1));
  XSTAGE_CUDA_CHECK(cudaMalloc(&wrong, 8));
  XSTAGE_CUDA_CHECK(cudaMemset(wrong, 0, 8));
  XSTAGE_CUDA_CHECK(cudaDeviceSynchronize());
  XSTAGE_CUDA_CHECK(cudaSetDevice(0));
  producer_kernel<<<1, 256, 0, team.local_ranks()[0].stream>>>(d_ptrs[0], words, base[0] + words + 32, rounds);
  XSTAGE_CUDA_CHECK_LAUNCH();
  XSTAGE_CUDA_CHECK(cudaSetDevice(1));
  consumer_kernel<<<1, 256, 0, team.local_ranks()[1].stream>>>(base[1], words, base[1] + words, d_ptrs[1], rounds, wrong);
  XSTAGE_CUDA_CHECK_LAUNCH();
  team.synchronize();
  unsigned long long h = 1;
  XSTAGE_CUDA_CHECK(cudaMemcpy(&h, wrong, 8, cudaMemcpyDeviceToHost));
  EXPECT_EQ(h, 0ull);
  XSTAGE_CUDA_CHECK(cudaFree(wrong));
  for (int r = 0; r < 2; ++r) {
    XSTAGE_CUDA_CHECK(cudaSetDevice(r));
    XSTAGE_CUDA_CHECK(cudaFree(d_ptrs[r]));
  }
}

__global__ void store_through_kernel(std::uint32_t* const* ptrs, int n, std::uint32_t value) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) ptrs[i][0] = value + i;
}

// Stores through LSA pointers resolved on rank 0 land in each rank's own window memory.
TEST(Window, LsaPointerStoresLandInEveryRanksMemory) {
  REQUIRE_GPUS(1);
  const int n = device_count() >= 2 ? 2 : 1;
  std::vector<int> devs;
  for (int i = 0; i < n; ++i) devs.push_back(i);
  auto team = comm::Team::single_process(devs);
  comm::SymmetricWindow win(team, 1 << 20, 1);
  std::vector<int> peers;
  std::vector<std::size_t> offs;
  for (int r = 0; r < n; ++r) {
    peers.push_back(r);
    offs.push_back(4096);
  }
  XSTAGE_CUDA_CHECK(cudaSetDevice(0));
  std::uint32_t** d_ptrs = nullptr;
  XSTAGE_CUDA_CHECK(cudaMalloc(&d_ptrs, n * sizeof(void*)));
  win.resolve_lsa_pointers(0, peers, offs, reinterpret_cast<void**>(d_ptrs));
  store_through_kernel<<<1, 32>>>(d_ptrs, n, 0x600d0000u);
  XSTAGE_CUDA_CHECK_LAUNCH();
  XSTAGE_CUDA_CHECK(cudaDeviceSynchronize());
  for (int r = 0; r < n; ++r) {
    std::uint32_t got = 0;
    XSTAGE_CUDA_CHECK(cudaSetDevice(r));
    XSTAGE_CUDA_CHECK(cudaMemcpy(&got, static_cast<char*>(win.local_ptr(r)) + 4096, 4, cudaMemcpyDeviceToHost));
    EXPECT_EQ(got, 0x600d0000u + r) << "rank " << r;
  }
  XSTAGE_CUDA_CHECK(cudaSetDevice(0));
  XSTAGE_CUDA_CHECK(cudaFree(d_ptrs));
}

TEST(FlagOrdering, AcrossTwoGpusThroughPeerPointers) {
  REQUIRE_GPUS(2);
  two_gpu_pingpong(false);
}

TEST(FlagOrdering, AcrossTwoGpusThroughNcclWindow) {
  REQUIRE_GPUS(2);
  two_gpu_pingpong(true);
}

}  // namespace
