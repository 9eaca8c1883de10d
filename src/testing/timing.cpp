#include "xstage/testing/timing.hpp"

#include "xstage/gpu/check.hpp"

namespace xstage::testing {

EventSeries::EventSeries(int samples, int marks) : samples_(samples), marks_(marks), ev_(size_t(samples) * marks) {
  for (auto& e : ev_) XSTAGE_CUDA_CHECK(cudaEventCreate(&e));
}

EventSeries::EventSeries(EventSeries&& o) noexcept : samples_(o.samples_), marks_(o.marks_), ev_(std::move(o.ev_)) {
  o.ev_.clear();
}

EventSeries::~EventSeries() {
  for (auto e : ev_)
    if (e) cudaEventDestroy(e);
}

std::vector<double> EventSeries::elapsed_ms(int from, int to) const {
  std::vector<double> ms(samples_);
  for (int i = 0; i < samples_; ++i) {
    float v = 0;
    XSTAGE_CUDA_CHECK(cudaEventElapsedTime(&v, at(i, from), at(i, to)));
    ms[i] = v;
  }
  return ms;
}

std::vector<double> time_launches(cudaStream_t stream, int warmup, int iters,
                                  const std::function<void(int i)>& launch) {
  for (int i = 0; i < warmup; ++i) launch(i);
  EventSeries ev(iters);
  for (int i = 0; i < iters; ++i) {
    XSTAGE_CUDA_CHECK(cudaEventRecord(ev.at(i, 0), stream));
    launch(i);
    XSTAGE_CUDA_CHECK(cudaEventRecord(ev.at(i, 1), stream));
  }
  XSTAGE_CUDA_CHECK(cudaStreamSynchronize(stream));
  return ev.elapsed_ms();
}

}  // namespace xstage::testing
