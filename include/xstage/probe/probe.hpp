// Remote-store probe runs on a team of GPUs: configure, launch, time, verify.
//
// Patterns (who sends where; every sender runs K producers):
//  - pair: team rank 0 sends to rank 1 (the paper's one-directional pair);
//  - bidirectional: rank 0 ↔ rank 1 at the same time;
//  - all-to-all: every rank sends, producer p of rank s writing to rank (s + 1 + p mod (N−1)) mod N.
// Targets: remote (the peer's memory through the symmetric window, or through a plain peer pointer)
// and local (the same kernel writing the sender's own buffer: the control).
// After every run each destination is checked word for word; any mismatch fails the run.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "xstage/comm/team.hpp"
#include "xstage/model/records.hpp"
#include "xstage/probe/burst_kernel.hpp"

namespace xstage::probe {

enum class Pattern { kPair, kBidirectional, kAllToAll };
enum class StorePath { kNcclWindow, kPeerPointer };
const char* to_string(Pattern p);
const char* to_string(StorePath p);
const char* to_string(GapKind g);
// Throw xstage::InputError naming `option` and the value.
Pattern parse_pattern(const std::string& option, const std::string& v);
StorePath parse_store_path(const std::string& option, const std::string& v);
GapKind parse_gap_kind(const std::string& option, const std::string& v);
model::StoreTarget parse_target(const std::string& option, const std::string& v);
model::BurstMode parse_mode(const std::string& option, const std::string& v);

struct ProbeConfig {
  model::BurstMode mode = model::BurstMode::kPeriodic;
  model::StoreTarget target = model::StoreTarget::kRemote;
  Pattern pattern = Pattern::kPair;
  int producers = 0;
  std::uint64_t bytes_per_producer = 0;
  double gap_s = 0.0;               // periodic: requested producer-side gap
  GapKind gap_kind = GapKind::kSpin;
  int store_bytes = 16;
  int bursts = 64;                  // measured bursts
  int warmup_bursts = 8;            // periodic: leading bursts left out of the statistics
  int threads_per_producer = 512;
  double recovery_s = 20e-6;        // isolated: spin after the completion fence, before the next burst
};

// Throws xstage::InputError naming the field when a configuration cannot run.
void validate(const ProbeConfig& c, int max_producers);

struct SenderResult {
  int rank = 0;
  int device = 0;
  std::string destination;            // "rank 1", "self", "all peers"
  std::vector<double> t_iss_s;        // per measured burst: median over producers
  std::vector<double> t_iss_slowest_s;  // per measured burst: the slowest producer
  std::vector<double> t_period_s;     // periodic: per burst, start-to-start, median over producers
  std::vector<double> gap_s;          // periodic: measured gap per burst, median over producers
  std::vector<double> t_iss_producer_median_s;  // per producer: median over bursts
  // The statistics the records carry. Periodic: per producer the mean over the measured bursts (the
  // steady state of eq. 1-3 is a long-run average), then the median producer. Isolated: per burst the
  // slowest producer (producers start together), then the median burst.
  double t_iss_stat_s = 0, t_period_stat_s = 0, gap_stat_s = 0;
  double event_elapsed_s = 0;         // CUDA events around the whole kernel
  double sm_clock_mhz = 0;            // used to turn cycles into seconds
  std::string sm_clock_source;        // "in-run" (cycles over %globaltimer during the run) or "pre-run"
  unsigned long long mma_instructions = 0;  // issued in gaps, all producers
};

struct ProbeResult {
  ProbeConfig config;
  StorePath path = StorePath::kNcclWindow;
  int world_size = 0;
  std::vector<SenderResult> senders;  // this process's senders
  std::uint64_t words_verified = 0;   // team-wide
  std::uint64_t mismatches = 0;       // team-wide
  std::string first_mismatch;         // this process's first, if any
  int slots = 1;

  bool verified() const { return mismatches == 0 && words_verified > 0; }
  double t_iss_s() const;     // median over senders of their statistics
  double t_period_s() const;  // periodic only; NaN otherwise
  double gap_s() const;       // measured
  model::CalibrationRecord to_record() const;
  nlohmann::json to_json(bool raw_samples) const;
};

struct CopyEngineResult {
  std::string kind;  // "peer" (cudaMemcpyPeerAsync rank a → b) or "local_d2d"
  int src_device = 0, dst_device = 0;
  std::uint64_t bytes = 0;
  std::vector<double> seconds;  // one per timed copy
  double gbps_median = 0;       // bytes moved across / median time (for local_d2d: bytes copied, not read+written)
  nlohmann::json to_json() const;
};

class ProbeRunner {
 public:
  // buffer_bytes: the destination buffer per rank (symmetric window or peer allocation).
  ProbeRunner(comm::Team& team, std::uint64_t buffer_bytes, StorePath path, int threads_per_producer = 512);
  ~ProbeRunner();
  ProbeRunner(const ProbeRunner&) = delete;
  ProbeRunner& operator=(const ProbeRunner&) = delete;

  // Throws xstage::InputError for configurations that cannot run, DeviceError for CUDA/NCCL failures.
  ProbeResult run(const ProbeConfig& config);

  int max_producers() const { return max_producers_; }
  int sm_count() const { return sm_count_; }
  std::uint64_t buffer_bytes() const { return buffer_bytes_; }
  // Largest V = K·B one sender may write in one burst with this buffer.
  std::uint64_t max_volume_per_sender() const;
  StorePath path() const { return path_; }

  // Copy-engine reference: cudaMemcpyPeerAsync between team ranks (single-process teams), or a local
  // device-to-device copy when src == dst.
  CopyEngineResult copy_engine_bandwidth(int src_rank, int dst_rank, std::uint64_t bytes, int reps);

 private:
  struct Impl;
  comm::Team& team_;
  std::uint64_t buffer_bytes_;
  StorePath path_;
  int max_producers_ = 0;
  int sm_count_ = 0;
  std::unique_ptr<Impl> impl_;
};

}  // namespace xstage::probe
