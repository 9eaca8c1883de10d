// CUDA-event timing for the benches: a series of samples, each with a few events (marks) recorded on a
// stream, and the times between two marks of every sample. Events are created on the current device
// at construction and destroyed with the series.
#pragma once

#include <cuda_runtime_api.h>

#include <functional>
#include <vector>

namespace xstage::testing {

class EventSeries {
 public:
  explicit EventSeries(int samples, int marks = 2);
  ~EventSeries();
  EventSeries(const EventSeries&) = delete;
  EventSeries& operator=(const EventSeries&) = delete;
  EventSeries(EventSeries&& o) noexcept;
  EventSeries& operator=(EventSeries&&) = delete;

  int samples() const { return samples_; }
  cudaEvent_t at(int sample, int mark) const { return ev_[size_t(sample) * marks_ + mark]; }
  // Milliseconds from mark `from` to mark `to` of every sample; the events must have completed.
  std::vector<double> elapsed_ms(int from = 0, int to = 1) const;

 private:
  int samples_ = 0, marks_ = 0;
  std::vector<cudaEvent_t> ev_;
};

// `warmup` untimed calls launch(0 .. warmup-1), then `iters` calls launch(0 .. iters-1), each between its
// own pair of events on `stream`; waits for the stream and returns the per-call milliseconds.
std::vector<double> time_launches(cudaStream_t stream, int warmup, int iters,
                                  const std::function<void(int i)>& launch);

}  // namespace xstage::testing
