// Timing of several variants of one layer on a team of GPUs, interleaved at iteration granularity
// (v0, v1, ..., v0, v1, ...) so that clock drift under the power limit falls on every variant alike; each
// pass rotates the order by its index and every other pass reverses it. Per timed iteration and stream:
// an event at its start, one where the sender's part ends and one at its end; the time of an iteration
// is the slowest stream's. With `graph`, each pass (warm-up and timed iterations) is captured into one
// CUDA graph per GPU and replayed once, so the iterations run back to back without host launches in
// between (the events are then external record nodes); otherwise the same launches are queued on the
// streams directly. The SM clock is measured after each pass (the slowest GPU's).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>
#include <vector>

namespace xstage::testing {

struct TimedStream {
  int device = 0;
  cudaStream_t stream = nullptr;
};

struct InterleavedTimingOptions {
  std::size_t variants = 0;
  int warmup = 0;  // untimed iterations of each variant before each pass's timed ones
  int iters = 1;   // timed iterations of each variant per pass
  int passes = 1;
  bool graph = false;
};

struct InterleavedPass {
  std::vector<std::size_t> order;            // variant indices in the order they ran
  std::vector<std::vector<double>> sender_s;  // [variant][iteration]: start to the sender's part's end
  std::vector<std::vector<double>> iter_s;    // [variant][iteration]: start to end
  double sm_clock_mhz = 0;                    // after the pass, the lowest of the GPUs
};

// enqueue(k, sender_done) queues variant k once on every stream; sender_done holds one event per stream
// to record where the sender's part ends (empty in warm-up). record(event, stream) records a timing
// event (it must work inside a stream capture); synchronize() waits for every stream.
std::vector<InterleavedPass> time_interleaved(
    const std::vector<TimedStream>& streams, const InterleavedTimingOptions& options,
    const std::function<void(std::size_t k, const std::vector<cudaEvent_t>& sender_done)>& enqueue,
    const std::function<cudaError_t(cudaEvent_t, cudaStream_t)>& record, const std::function<void()>& synchronize);

}  // namespace xstage::testing
