// Probe runs: buffers, pointer tables, launches, timing statistics and verification.
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>

#include "xstage/comm/window.hpp"
#include "xstage/gpu/check.hpp"
#include "xstage/gpu/provenance.hpp"
#include "xstage/model/error.hpp"
#include "xstage/model/stats.hpp"
#include "xstage/probe/burst_pattern.hpp"
#include "xstage/probe/probe.hpp"
#include "xstage/probe/verify.hpp"

namespace xstage::probe {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// Slots let successive bursts write fresh addresses (as a pipelined kernel would), bounded so that
// poisoning and verifying a run stays cheap.
constexpr std::uint64_t kSlotBudgetBytes = 256ull << 20;
// Below this run length the in-run clock estimate (cycles over %globaltimer, whose steps can be ~1 µs)
// is too coarse; the pre-run measurement is used instead.
constexpr double kInRunClockMinNs = 200e3;

// The median, NaN for an empty set (never 0, which would read as a measured zero).
double median_or_nan(const std::vector<double>& v) {
  return v.empty() ? std::numeric_limits<double>::quiet_NaN() : stats::median(v);
}

}  // namespace

const char* to_string(Pattern p) {
  switch (p) {
    case Pattern::kPair: return "pair";
    case Pattern::kBidirectional: return "bidirectional";
    case Pattern::kAllToAll: return "all-to-all";
  }
  return "?";
}
const char* to_string(StorePath p) { return p == StorePath::kNcclWindow ? "nccl-window" : "peer-pointer"; }
const char* to_string(GapKind g) { return g == GapKind::kSpin ? "spin" : "mma"; }

Pattern parse_pattern(const std::string& option, const std::string& v) {
  if (v == "pair") return Pattern::kPair;
  if (v == "bidirectional" || v == "bidir") return Pattern::kBidirectional;
  if (v == "all-to-all" || v == "a2a") return Pattern::kAllToAll;
  throw InputError(option + ": unknown pattern '" + v + "' (pair, bidirectional, all-to-all)");
}
StorePath parse_store_path(const std::string& option, const std::string& v) {
  if (v == "nccl-window" || v == "nccl") return StorePath::kNcclWindow;
  if (v == "peer-pointer" || v == "peer") return StorePath::kPeerPointer;
  throw InputError(option + ": unknown store path '" + v + "' (nccl-window, peer-pointer)");
}
GapKind parse_gap_kind(const std::string& option, const std::string& v) {
  if (v == "spin") return GapKind::kSpin;
  if (v == "mma") return GapKind::kMma;
  throw InputError(option + ": unknown gap kind '" + v + "' (spin, mma)");
}
model::StoreTarget parse_target(const std::string& option, const std::string& v) {
  if (v == "remote") return model::StoreTarget::kRemote;
  if (v == "local") return model::StoreTarget::kLocal;
  throw InputError(option + ": unknown target '" + v + "' (remote, local)");
}
model::BurstMode parse_mode(const std::string& option, const std::string& v) {
  if (v == "periodic") return model::BurstMode::kPeriodic;
  if (v == "isolated") return model::BurstMode::kIsolated;
  throw InputError(option + ": unknown mode '" + v + "' (periodic, isolated)");
}

void validate(const ProbeConfig& c, int max_producers) {
  if (c.producers < 1 || c.producers > max_producers)
    throw InputError("producers: " + std::to_string(c.producers) + " outside 1.." + std::to_string(max_producers) +
                     " (one co-resident CTA per SM)");
  if (c.store_bytes != 4 && c.store_bytes != 8 && c.store_bytes != 16)
    throw InputError("store bytes: " + std::to_string(c.store_bytes) + " (4, 8 or 16)");
  if (c.bytes_per_producer == 0 || c.bytes_per_producer % 16 != 0)
    throw InputError("bytes per producer: " + std::to_string(c.bytes_per_producer) + " (a positive multiple of 16)");
  if (c.bytes_per_producer / 4 > 0xffffffffull) throw InputError("bytes per producer: too large");
  if (!(c.gap_s >= 0.0) || c.gap_s > 1.0) throw InputError("gap: " + std::to_string(c.gap_s) + " s (0 .. 1 s)");
  if (c.bursts < 2 || c.bursts > 100000) throw InputError("bursts: " + std::to_string(c.bursts) + " (2 .. 100000)");
  if (c.warmup_bursts < 0 || c.warmup_bursts > 10000)
    throw InputError("warm-up bursts: " + std::to_string(c.warmup_bursts) + " (0 .. 10000)");
  if (c.threads_per_producer < 32 || c.threads_per_producer > 1024 || c.threads_per_producer % 32 != 0)
    throw InputError("threads per producer: " + std::to_string(c.threads_per_producer) + " (a multiple of 32, 32 .. 1024)");
  if (!(c.recovery_s >= 0.0) || c.recovery_s > 0.1) throw InputError("recovery: " + std::to_string(c.recovery_s) + " s");
}

double ProbeResult::t_iss_s() const {
  std::vector<double> v;
  for (const auto& s : senders) v.push_back(s.t_iss_stat_s);
  return median_or_nan(v);
}
double ProbeResult::t_period_s() const {
  if (config.mode != model::BurstMode::kPeriodic) return kNaN;
  std::vector<double> v;
  for (const auto& s : senders) v.push_back(s.t_period_stat_s);
  return median_or_nan(v);
}
double ProbeResult::gap_s() const {
  if (config.mode != model::BurstMode::kPeriodic) return 0.0;
  std::vector<double> v;
  for (const auto& s : senders) v.push_back(s.gap_stat_s);
  return median_or_nan(v);
}

model::CalibrationRecord ProbeResult::to_record() const {
  model::CalibrationRecord r;
  r.mode = config.mode;
  r.target = config.target;
  r.producers = config.producers;
  r.bytes_per_producer = static_cast<double>(config.bytes_per_producer);
  // The measured gap, not the requested one: the model's G is what the producer actually spent
  // (the programmed spin or MMA time plus the loop's own few cycles). A programmed zero gap stays 0:
  // such points are the zero-gap points of the fit; their loop overhead is in raw.json.
  r.gap_s = config.mode == model::BurstMode::kPeriodic && config.gap_s > 0 ? gap_s() : 0.0;
  r.t_iss_s = t_iss_s();
  r.t_period_s = t_period_s();
  return r;
}

nlohmann::json ProbeResult::to_json(bool raw) const {
  nlohmann::json j;
  j["mode"] = model::to_string(config.mode);
  j["target"] = model::to_string(config.target);
  j["pattern"] = to_string(config.pattern);
  j["path"] = to_string(path);
  j["world_size"] = world_size;
  j["producers"] = config.producers;
  j["bytes_per_producer"] = config.bytes_per_producer;
  j["volume_bytes"] = config.bytes_per_producer * static_cast<std::uint64_t>(config.producers);
  j["gap_requested_us"] = config.gap_s * 1e6;
  j["gap_kind"] = to_string(config.gap_kind);
  j["store_bytes"] = config.store_bytes;
  j["bursts"] = config.bursts;
  j["warmup_bursts"] = config.warmup_bursts;
  j["threads_per_producer"] = config.threads_per_producer;
  j["slots"] = slots;
  if (config.mode == model::BurstMode::kIsolated) j["recovery_us"] = config.recovery_s * 1e6;
  auto num = [](double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr); };
  j["t_iss_us"] = num(t_iss_s() * 1e6);
  j["t_period_us"] = num(t_period_s() * 1e6);
  j["gap_us"] = num(gap_s() * 1e6);
  j["verified"] = verified();
  j["words_verified"] = words_verified;
  j["mismatches"] = mismatches;
  if (!first_mismatch.empty()) j["first_mismatch"] = first_mismatch;
  nlohmann::json ss = nlohmann::json::array();
  for (const auto& s : senders) {
    nlohmann::json o{{"rank", s.rank},
                     {"device", s.device},
                     {"destination", s.destination},
                     {"t_iss_us", num(s.t_iss_stat_s * 1e6)},
                     {"t_period_us", num(s.t_period_stat_s * 1e6)},
                     {"gap_us", num(s.gap_stat_s * 1e6)},
                     {"event_elapsed_us", s.event_elapsed_s * 1e6},
                     {"sm_clock_mhz", s.sm_clock_mhz},
                     {"sm_clock_source", s.sm_clock_source},
                     {"mma_instructions", s.mma_instructions}};
    if (raw) {
      auto us = [](const std::vector<double>& v) {
        nlohmann::json a = nlohmann::json::array();
        for (double x : v) a.push_back(std::round(x * 1e9) / 1e3);  // µs with ns resolution
        return a;
      };
      o["t_iss_us_per_burst"] = us(s.t_iss_s);
      if (!s.t_period_s.empty()) o["t_period_us_per_burst"] = us(s.t_period_s);
      if (!s.gap_s.empty()) o["gap_us_per_burst"] = us(s.gap_s);
      o["t_iss_slowest_us_per_burst"] = us(s.t_iss_slowest_s);
      o["t_iss_us_per_producer"] = us(s.t_iss_producer_median_s);
    }
    ss.push_back(o);
  }
  j["senders"] = ss;
  return j;
}

nlohmann::json CopyEngineResult::to_json() const {
  nlohmann::json s = nlohmann::json::array();
  for (double x : seconds) s.push_back(x * 1e6);
  return {{"kind", kind}, {"src_device", src_device}, {"dst_device", dst_device}, {"bytes", bytes},
          {"gbps_median", gbps_median}, {"seconds_us", s}};
}

// ---------------------------------------------------------------------------------------------------

struct ProbeRunner::Impl {
  std::unique_ptr<comm::SymmetricWindow> window;
  std::unique_ptr<comm::PeerBuffers> peers;
  struct PerRank {
    void** d_dst = nullptr;
    BurstSample* d_samples = nullptr;
    unsigned long long* d_mma = nullptr;
    float* d_sink = nullptr;
    std::uint32_t* d_counter = nullptr;
    std::size_t cap_producers = 0, cap_samples = 0;
    cudaEvent_t ev0 = nullptr, ev1 = nullptr;
    double clock_mhz = 0;
    int runs_since_clock = 0;
  };
  std::vector<PerRank> per;
  std::mt19937 rng{std::random_device{}()};

  void* base(comm::Team& team, int local_index) const {
    if (window) return window->local_ptr(local_index);
    return peers->ptr(team.local_ranks()[local_index].rank);
  }
};

ProbeRunner::ProbeRunner(comm::Team& team, std::uint64_t buffer_bytes, StorePath path, int threads)
    : team_(team), buffer_bytes_(buffer_bytes), path_(path), impl_(std::make_unique<Impl>()) {
  if (buffer_bytes % 16 != 0 || buffer_bytes == 0) throw InputError("buffer bytes: a positive multiple of 16");
  if (path == StorePath::kNcclWindow) {
    impl_->window = std::make_unique<comm::SymmetricWindow>(team, buffer_bytes, 1);
  } else {
    impl_->peers = std::make_unique<comm::PeerBuffers>(team, buffer_bytes);
  }
  impl_->per.resize(team.local_ranks().size());
  max_producers_ = std::numeric_limits<int>::max();
  for (std::size_t i = 0; i < team.local_ranks().size(); ++i) {
    const int dev = team.local_ranks()[i].device;
    max_producers_ = std::min(max_producers_, max_coresident_producers(dev, threads));
    int sms = 0;
    XSTAGE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    sm_count_ = sm_count_ ? std::min(sm_count_, sms) : sms;
    auto& pr = impl_->per[i];
    XSTAGE_CUDA_CHECK(cudaSetDevice(dev));
    XSTAGE_CUDA_CHECK(cudaEventCreate(&pr.ev0));
    XSTAGE_CUDA_CHECK(cudaEventCreate(&pr.ev1));
    XSTAGE_CUDA_CHECK(cudaMalloc(&pr.d_counter, sizeof(std::uint32_t)));
  }
}

ProbeRunner::~ProbeRunner() {
  for (std::size_t i = 0; i < impl_->per.size(); ++i) {
    auto& pr = impl_->per[i];
    cudaSetDevice(team_.local_ranks()[i].device);
    cudaDeviceSynchronize();
    cudaFree(pr.d_dst);
    cudaFree(pr.d_samples);
    cudaFree(pr.d_mma);
    cudaFree(pr.d_sink);
    cudaFree(pr.d_counter);
    if (pr.ev0) cudaEventDestroy(pr.ev0);
    if (pr.ev1) cudaEventDestroy(pr.ev1);
  }
}

std::uint64_t ProbeRunner::max_volume_per_sender() const {
  return buffer_bytes_ / static_cast<std::uint64_t>(std::max(1, team_.world_size()));
}

ProbeResult ProbeRunner::run(const ProbeConfig& c) {
  validate(c, max_producers_);
  const int world = team_.world_size();
  const bool remote = c.target == model::StoreTarget::kRemote;
  if (remote && world < 2)
    throw InputError("target remote: needs a team of at least 2 GPUs (this team has " + std::to_string(world) + ")");
  if (c.pattern != Pattern::kPair && world < 2)
    throw InputError(std::string("pattern ") + to_string(c.pattern) + ": needs at least 2 GPUs");
  if (path_ == StorePath::kPeerPointer && team_.mode() != comm::LaunchMode::kSingleProcess)
    throw InputError("path peer-pointer: needs the single-process launch mode");

  const int k = c.producers;
  const std::uint64_t b = c.bytes_per_producer;
  const std::uint64_t v = b * static_cast<std::uint64_t>(k);
  if (v > max_volume_per_sender())
    throw InputError("burst volume " + std::to_string(v) + " B exceeds the buffer limit of " +
                     std::to_string(max_volume_per_sender()) + " B per sender");
  const bool periodic = c.mode == model::BurstMode::kPeriodic;
  const int warm = periodic ? c.warmup_bursts : std::min(c.warmup_bursts, 2);
  // Periodic runs issue one burst more than they measure so the last measured burst has a period.
  const int total = warm + c.bursts + (periodic ? 1 : 0);
  const std::uint64_t slot_budget = std::min<std::uint64_t>(buffer_bytes_, kSlotBudgetBytes);
  const std::uint64_t slots = std::clamp<std::uint64_t>(slot_budget / (static_cast<std::uint64_t>(world) * v), 1,
                                                        static_cast<std::uint64_t>(total));
  auto offset = [&](int src, std::uint64_t slot, int p) {
    return ((static_cast<std::uint64_t>(src) * slots + slot) * k + p) * b;
  };

  // Who sends, and where each producer's stores land.
  std::vector<int> senders;
  if (c.pattern == Pattern::kPair) senders = {0};
  else if (c.pattern == Pattern::kBidirectional) senders = {0, 1};
  else
    for (int r = 0; r < world; ++r) senders.push_back(r);
  auto dest_of = [&](int s, int p) -> int {
    if (!remote) return s;
    if (c.pattern == Pattern::kAllToAll) return (s + 1 + p % (world - 1)) % world;
    return s == 0 ? 1 : 0;
  };
  // One seed for the whole team (rank 0's), so every destination checks the pattern the senders wrote.
  std::vector<long long> seed_in(team_.local_ranks().size(), 0);
  const std::uint32_t my_seed = impl_->rng();
  for (std::size_t i = 0; i < seed_in.size(); ++i)
    if (team_.local_ranks()[i].rank == 0) seed_in[i] = my_seed;
  const auto seed = static_cast<std::uint32_t>(team_.allreduce_sum(seed_in));
  auto& locals = team_.local_ranks();

  // 1. Poison every destination extent, then make sure all ranks have before anyone sends.
  const std::uint64_t extent = offset(world, 0, 0);
  for (std::size_t i = 0; i < locals.size(); ++i) {
    XSTAGE_CUDA_CHECK(cudaSetDevice(locals[i].device));
    poison(impl_->base(team_, static_cast<int>(i)), extent, locals[i].stream);
  }
  team_.synchronize();
  team_.barrier();

  // 2. Launch every local sender.
  ProbeResult res;
  res.config = c;
  res.path = path_;
  res.world_size = world;
  res.slots = static_cast<int>(slots);
  std::vector<int> local_sender_idx;
  for (std::size_t i = 0; i < locals.size(); ++i) {
    const int rank = locals[i].rank;
    if (std::find(senders.begin(), senders.end(), rank) == senders.end()) continue;
    local_sender_idx.push_back(static_cast<int>(i));
    auto& pr = impl_->per[i];
    XSTAGE_CUDA_CHECK(cudaSetDevice(locals[i].device));
    if (pr.clock_mhz == 0 || pr.runs_since_clock >= 16) {
      pr.clock_mhz = gpu::measure_sm_clock_mhz(locals[i].device);
      pr.runs_since_clock = 0;
    }
    ++pr.runs_since_clock;
    if (pr.cap_producers < static_cast<std::size_t>(k)) {
      cudaFree(pr.d_dst);
      cudaFree(pr.d_mma);
      cudaFree(pr.d_sink);
      XSTAGE_CUDA_CHECK(cudaMalloc(&pr.d_dst, sizeof(void*) * k));
      XSTAGE_CUDA_CHECK(cudaMalloc(&pr.d_mma, sizeof(unsigned long long) * k));
      XSTAGE_CUDA_CHECK(cudaMalloc(&pr.d_sink, sizeof(float) * k));
      pr.cap_producers = k;
    }
    const std::size_t n_samples = static_cast<std::size_t>(total) * k;
    if (pr.cap_samples < n_samples) {
      cudaFree(pr.d_samples);
      XSTAGE_CUDA_CHECK(cudaMalloc(&pr.d_samples, sizeof(BurstSample) * n_samples));
      pr.cap_samples = n_samples;
    }
    std::vector<int> peers(k);
    std::vector<std::size_t> offs(k);
    for (int p = 0; p < k; ++p) {
      peers[p] = dest_of(rank, p);
      offs[p] = offset(rank, 0, p);
    }
    if (impl_->window) {
      impl_->window->resolve_lsa_pointers(static_cast<int>(i), peers, offs, pr.d_dst);
    } else {
      std::vector<void*> ptrs(k);
      for (int p = 0; p < k; ++p) ptrs[p] = static_cast<char*>(impl_->peers->ptr(peers[p])) + offs[p];
      XSTAGE_CUDA_CHECK(cudaMemcpy(pr.d_dst, ptrs.data(), sizeof(void*) * k, cudaMemcpyHostToDevice));
    }
    XSTAGE_CUDA_CHECK(cudaMemsetAsync(pr.d_counter, 0, sizeof(std::uint32_t), locals[i].stream));
    XSTAGE_CUDA_CHECK(cudaMemsetAsync(pr.d_mma, 0, sizeof(unsigned long long) * k, locals[i].stream));
    XSTAGE_CUDA_CHECK(cudaMemsetAsync(pr.d_sink, 0, sizeof(float) * k, locals[i].stream));
  }
  for (int i : local_sender_idx) {
    auto& pr = impl_->per[i];
    BurstKernelArgs a;
    a.dst = pr.d_dst;
    a.slot_stride_bytes = v;
    a.slots = static_cast<std::uint32_t>(slots);
    a.bytes_per_producer = b;
    a.store_bytes = static_cast<std::uint32_t>(c.store_bytes);
    a.bursts = static_cast<std::uint32_t>(total);
    a.mode = periodic ? KernelMode::kPeriodic : KernelMode::kIsolated;
    a.gap_kind = c.gap_kind;
    a.gap_cycles = periodic ? static_cast<std::uint64_t>(std::llround(c.gap_s * pr.clock_mhz * 1e6)) : 0;
    a.recovery_ns = static_cast<std::uint64_t>(std::llround(c.recovery_s * 1e9));
    a.run_seed = seed;
    a.sender_rank = static_cast<std::uint32_t>(locals[i].rank);
    a.barrier_counter = pr.d_counter;
    a.samples = pr.d_samples;
    a.mma_issued = pr.d_mma;
    a.sink = pr.d_sink;
    a.team_rank = locals[i].rank;
    XSTAGE_CUDA_CHECK(cudaSetDevice(locals[i].device));
    XSTAGE_CUDA_CHECK(cudaEventRecord(pr.ev0, locals[i].stream));
    launch_burst_kernel(a, k, c.threads_per_producer, locals[i].stream);
    XSTAGE_CUDA_CHECK(cudaEventRecord(pr.ev1, locals[i].stream));
  }
  team_.synchronize();
  // Kernel completion makes every store visible; the barrier orders the receivers' checks after it.
  team_.barrier();

  // 3. Verify every local destination.
  std::vector<long long> mism(locals.size(), 0), words(locals.size(), 0);
  for (std::size_t d = 0; d < locals.size(); ++d) {
    const int drank = locals[d].rank;
    std::vector<VerifyRegion> regions;
    for (int s : senders)
      for (int p = 0; p < k; ++p) {
        if (dest_of(s, p) != drank) continue;
        for (std::uint64_t slot = 0; slot < slots; ++slot) {
          const std::uint64_t last = slot + slots * ((static_cast<std::uint64_t>(total) - 1 - slot) / slots);
          regions.push_back({offset(s, slot, p), burst_tag(seed, s, p, static_cast<std::uint32_t>(last)),
                             static_cast<std::uint32_t>(p), static_cast<std::uint32_t>(s),
                             static_cast<std::uint32_t>(last)});
        }
      }
    XSTAGE_CUDA_CHECK(cudaSetDevice(locals[d].device));
    const VerifyOutcome o = verify_regions(impl_->base(team_, static_cast<int>(d)), regions, b, locals[d].stream);
    mism[d] = static_cast<long long>(o.mismatches);
    words[d] = static_cast<long long>(o.words_checked);
    if (res.first_mismatch.empty() && !o.first_mismatch.empty())
      res.first_mismatch = "destination rank " + std::to_string(drank) + ": " + o.first_mismatch;
  }
  res.mismatches = static_cast<std::uint64_t>(team_.allreduce_sum(mism));
  res.words_verified = static_cast<std::uint64_t>(team_.allreduce_sum(words));

  // 4. Timing statistics per local sender.
  for (int i : local_sender_idx) {
    auto& pr = impl_->per[i];
    XSTAGE_CUDA_CHECK(cudaSetDevice(locals[i].device));
    std::vector<BurstSample> smp(static_cast<std::size_t>(total) * k);
    XSTAGE_CUDA_CHECK(cudaMemcpy(smp.data(), pr.d_samples, sizeof(BurstSample) * smp.size(), cudaMemcpyDeviceToHost));
    std::vector<unsigned long long> mma(k);
    XSTAGE_CUDA_CHECK(cudaMemcpy(mma.data(), pr.d_mma, sizeof(unsigned long long) * k, cudaMemcpyDeviceToHost));
    float ms = 0;
    XSTAGE_CUDA_CHECK(cudaEventElapsedTime(&ms, pr.ev0, pr.ev1));
    SenderResult sr;
    sr.rank = locals[i].rank;
    sr.device = locals[i].device;
    sr.destination = !remote ? "self" : (c.pattern == Pattern::kAllToAll ? "all peers" : "rank " + std::to_string(dest_of(sr.rank, 0)));
    sr.event_elapsed_s = ms * 1e-3;
    for (auto x : mma) sr.mma_instructions += x;
    auto at = [&](int burst, int p) -> const BurstSample& { return smp[static_cast<std::size_t>(burst) * k + p]; };
    // Clock: cycles over %globaltimer across the measured bursts of each producer, if long enough.
    std::vector<double> mhz;
    const int first = warm, last = total - 1;
    for (int p = 0; p < k; ++p) {
      const double dns = static_cast<double>(at(last, p).issue_start_ns - at(first, p).issue_start_ns);
      const double dcyc = static_cast<double>(at(last, p).issue_start_cycles - at(first, p).issue_start_cycles);
      if (dns >= kInRunClockMinNs) mhz.push_back(dcyc / dns * 1e3);
    }
    if (static_cast<int>(mhz.size()) == k) {
      sr.sm_clock_mhz = stats::median(mhz);
      sr.sm_clock_source = "in-run";
    } else {
      sr.sm_clock_mhz = pr.clock_mhz;
      sr.sm_clock_source = "pre-run";
    }
    const double s_per_cycle = 1.0 / (sr.sm_clock_mhz * 1e6);
    // Per burst (raw): the median producer's issue time and period, and the slowest producer's issue
    // time (the burst's own issue time when producers start together, as after a grid barrier).
    std::vector<std::vector<double>> per_producer(k);
    for (int burst = warm; burst < warm + c.bursts; ++burst) {
      std::vector<double> iss(k), per(k), gap(k);
      for (int p = 0; p < k; ++p) {
        const auto& s = at(burst, p);
        iss[p] = static_cast<double>(s.issue_end_cycles - s.issue_start_cycles) * s_per_cycle;
        per_producer[p].push_back(iss[p]);
        if (periodic) {
          per[p] = static_cast<double>(at(burst + 1, p).issue_start_cycles - s.issue_start_cycles) * s_per_cycle;
          gap[p] = static_cast<double>(s.gap_end_cycles - s.issue_end_cycles) * s_per_cycle;
        }
      }
      sr.t_iss_s.push_back(stats::median(iss));
      sr.t_iss_slowest_s.push_back(*std::max_element(iss.begin(), iss.end()));
      if (periodic) {
        sr.t_period_s.push_back(stats::median(per));
        sr.gap_s.push_back(stats::median(gap));
      }
    }
    for (auto& v : per_producer) sr.t_iss_producer_median_s.push_back(stats::median(v));
    if (periodic) {
      // Steady state (eq. 1-3) is a long-run average: a producer's bursts alternate between fast
      // issue into free X-Stage capacity and long stalls, so the median burst would overstate the
      // rate. Per producer: mean period over the measured bursts (start of the first to start of the
      // one after the last), mean issue time, mean gap; then the median producer.
      std::vector<double> mp(k), mi(k), mg(k);
      for (int p = 0; p < k; ++p) {
        const double cyc = static_cast<double>(at(warm + c.bursts, p).issue_start_cycles - at(warm, p).issue_start_cycles);
        mp[p] = cyc * s_per_cycle / c.bursts;
        double si = 0, sg = 0;
        for (int burst = warm; burst < warm + c.bursts; ++burst) {
          const auto& s = at(burst, p);
          si += static_cast<double>(s.issue_end_cycles - s.issue_start_cycles);
          sg += static_cast<double>(s.gap_end_cycles - s.issue_end_cycles);
        }
        mi[p] = si * s_per_cycle / c.bursts;
        mg[p] = sg * s_per_cycle / c.bursts;
      }
      sr.t_period_stat_s = stats::median(mp);
      sr.t_iss_stat_s = stats::median(mi);
      sr.gap_stat_s = stats::median(mg);
    } else {
      // Isolated: every burst starts from a grid barrier, so its issue time is its slowest
      // producer's; the median over bursts.
      sr.t_iss_stat_s = stats::median(sr.t_iss_slowest_s);
      sr.t_period_stat_s = kNaN;
      sr.gap_stat_s = 0.0;
    }
    res.senders.push_back(std::move(sr));
  }
  return res;
}

CopyEngineResult ProbeRunner::copy_engine_bandwidth(int src_rank, int dst_rank, std::uint64_t bytes, int reps) {
  comm::LocalRank* src = team_.local(src_rank);
  comm::LocalRank* dst = team_.local(dst_rank);
  if (!src || !dst) throw InputError("copy-engine reference: both ranks must be driven by this process");
  CopyEngineResult r;
  r.kind = src_rank == dst_rank ? "local_d2d" : "peer";
  r.src_device = src->device;
  r.dst_device = dst->device;
  r.bytes = bytes;
  void *s = nullptr, *d = nullptr;
  XSTAGE_CUDA_CHECK(cudaSetDevice(dst->device));
  XSTAGE_CUDA_CHECK(cudaMalloc(&d, bytes));
  XSTAGE_CUDA_CHECK(cudaSetDevice(src->device));
  XSTAGE_CUDA_CHECK(cudaMalloc(&s, bytes));
  XSTAGE_CUDA_CHECK(cudaMemset(s, 0x3c, bytes));
  if (src->device != dst->device) {
    const cudaError_t e = cudaDeviceEnablePeerAccess(dst->device, 0);
    if (e == cudaErrorPeerAccessAlreadyEnabled) cudaGetLastError();
    else XSTAGE_CUDA_CHECK(e);
  }
  cudaEvent_t e0, e1;
  XSTAGE_CUDA_CHECK(cudaEventCreate(&e0));
  XSTAGE_CUDA_CHECK(cudaEventCreate(&e1));
  for (int i = 0; i < reps + 2; ++i) {
    XSTAGE_CUDA_CHECK(cudaEventRecord(e0, src->stream));
    if (src->device != dst->device)
      XSTAGE_CUDA_CHECK(cudaMemcpyPeerAsync(d, dst->device, s, src->device, bytes, src->stream));
    else
      XSTAGE_CUDA_CHECK(cudaMemcpyAsync(d, s, bytes, cudaMemcpyDeviceToDevice, src->stream));
    XSTAGE_CUDA_CHECK(cudaEventRecord(e1, src->stream));
    XSTAGE_CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    XSTAGE_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    if (i >= 2) r.seconds.push_back(ms * 1e-3);  // two warm-up copies
  }
  // Spot check: the copy must have moved the bytes (first and last 16 bytes).
  unsigned char head[16], tail[16];
  XSTAGE_CUDA_CHECK(cudaMemcpy(head, d, 16, cudaMemcpyDeviceToHost));
  XSTAGE_CUDA_CHECK(cudaMemcpy(tail, static_cast<char*>(d) + bytes - 16, 16, cudaMemcpyDeviceToHost));
  for (int i = 0; i < 16; ++i)
    if (head[i] != 0x3c || tail[i] != 0x3c) throw gpu::DeviceError("copy-engine reference: destination not written");
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  XSTAGE_CUDA_CHECK(cudaFree(s));
  XSTAGE_CUDA_CHECK(cudaSetDevice(dst->device));
  XSTAGE_CUDA_CHECK(cudaFree(d));
  r.gbps_median = static_cast<double>(bytes) / stats::median(r.seconds) / 1e9;
  return r;
}

}  // namespace xstage::probe
