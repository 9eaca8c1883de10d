#include "xstage/testing/interleaved_timing.hpp"

#include <algorithm>

#include "xstage/gpu/check.hpp"
#include "xstage/gpu/provenance.hpp"
#include "xstage/testing/timing.hpp"

namespace xstage::testing {

std::vector<InterleavedPass> time_interleaved(
    const std::vector<TimedStream>& streams, const InterleavedTimingOptions& o,
    const std::function<void(std::size_t k, const std::vector<cudaEvent_t>& sender_done)>& enqueue,
    const std::function<cudaError_t(cudaEvent_t, cudaStream_t)>& record, const std::function<void()>& synchronize) {
  const std::size_t nv = o.variants, ns = streams.size();
  enum { kStart, kSenderDone, kEnd, kMarks };
  // ev[stream][variant]: iters samples of kMarks events, reused by every pass.
  std::vector<std::vector<EventSeries>> ev(ns);
  for (std::size_t i = 0; i < ns; ++i) {
    XSTAGE_CUDA_CHECK(cudaSetDevice(streams[i].device));
    for (std::size_t k = 0; k < nv; ++k) ev[i].emplace_back(o.iters, kMarks);
  }
  std::vector<InterleavedPass> out;
  for (int pass = 0; pass < o.passes; ++pass) {
    InterleavedPass p;
    p.order.resize(nv);
    for (std::size_t k = 0; k < nv; ++k) p.order[k] = (k + pass) % nv;
    if (pass % 2 == 1) std::reverse(p.order.begin(), p.order.end());
    if (o.graph) {
      for (const auto& s : streams) {
        XSTAGE_CUDA_CHECK(cudaSetDevice(s.device));
        XSTAGE_CUDA_CHECK(cudaStreamBeginCapture(s.stream, cudaStreamCaptureModeRelaxed));
      }
    }
    for (int w = 0; w < o.warmup; ++w)
      for (std::size_t k : p.order) enqueue(k, {});
    for (int it = 0; it < o.iters; ++it) {
      for (std::size_t k : p.order) {
        std::vector<cudaEvent_t> sender_done(ns);
        for (std::size_t i = 0; i < ns; ++i) {
          XSTAGE_CUDA_CHECK(cudaSetDevice(streams[i].device));
          XSTAGE_CUDA_CHECK(record(ev[i][k].at(it, kStart), streams[i].stream));
          sender_done[i] = ev[i][k].at(it, kSenderDone);
        }
        enqueue(k, sender_done);
        for (std::size_t i = 0; i < ns; ++i) {
          XSTAGE_CUDA_CHECK(cudaSetDevice(streams[i].device));
          XSTAGE_CUDA_CHECK(record(ev[i][k].at(it, kEnd), streams[i].stream));
        }
      }
    }
    if (o.graph) {
      std::vector<cudaGraphExec_t> exec(ns, nullptr);
      for (std::size_t i = 0; i < ns; ++i) {
        XSTAGE_CUDA_CHECK(cudaSetDevice(streams[i].device));
        cudaGraph_t g = nullptr;
        XSTAGE_CUDA_CHECK(cudaStreamEndCapture(streams[i].stream, &g));
        XSTAGE_CUDA_CHECK(cudaGraphInstantiate(&exec[i], g, 0));
        XSTAGE_CUDA_CHECK(cudaGraphDestroy(g));
        XSTAGE_CUDA_CHECK(cudaGraphUpload(exec[i], streams[i].stream));
      }
      synchronize();  // uploads done: the replays start together
      for (std::size_t i = 0; i < ns; ++i) {
        XSTAGE_CUDA_CHECK(cudaSetDevice(streams[i].device));
        XSTAGE_CUDA_CHECK(cudaGraphLaunch(exec[i], streams[i].stream));
      }
      synchronize();
      for (std::size_t i = 0; i < ns; ++i) {
        XSTAGE_CUDA_CHECK(cudaSetDevice(streams[i].device));
        XSTAGE_CUDA_CHECK(cudaGraphExecDestroy(exec[i]));
      }
    }
    synchronize();
    p.sender_s.assign(nv, std::vector<double>(o.iters, 0.0));
    p.iter_s.assign(nv, std::vector<double>(o.iters, 0.0));
    for (std::size_t k = 0; k < nv; ++k) {
      for (std::size_t i = 0; i < ns; ++i) {
        const std::vector<double> snd = ev[i][k].elapsed_ms(kStart, kSenderDone);
        const std::vector<double> itr = ev[i][k].elapsed_ms(kStart, kEnd);
        for (int it = 0; it < o.iters; ++it) {
          p.sender_s[k][it] = std::max(p.sender_s[k][it], snd[it] * 1e-3);
          p.iter_s[k][it] = std::max(p.iter_s[k][it], itr[it] * 1e-3);
        }
      }
    }
    p.sm_clock_mhz = 1e9;
    for (const auto& s : streams) p.sm_clock_mhz = std::min(p.sm_clock_mhz, gpu::measure_sm_clock_mhz(s.device));
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace xstage::testing
