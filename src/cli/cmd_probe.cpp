// xstage probe: one remote-store probe run (any pattern, target, mode, store path, launch mode),
// printed as JSON with provenance and raw per-burst samples. The per-process launch mode is the
// scale-out path: `mpirun -np N xstage probe --launch per-process --rendezvous DIR ...`.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>

#include "cli_common.hpp"
#include "cli_gpu.hpp"
#include "registry.hpp"
#include "xstage/comm/team.hpp"
#include "xstage/gpu/check.hpp"
#include "xstage/gpu/provenance.hpp"
#include "xstage/model/error.hpp"
#include "xstage/probe/calibrate.hpp"
#include "xstage/probe/probe.hpp"

namespace xstage::cli {
namespace {

struct ProbeCli {
  std::string gpus = "0,1";
  std::string launch = "single";
  std::string rendezvous;
  std::string mode = "periodic", target = "remote", pattern = "pair", path = "nccl-window", gap_kind = "spin";
  int producers = 0;
  double bytes_per_producer = 32768;
  std::optional<double> bytes_kib;  // deprecated spelling, KiB
  double gap_us = 0;
  int store_bytes = 16;
  int bursts = 64;
  int warmup = 8;
  int threads = 512;
  double buffer_mib = 1024;
  bool raw = false;
  bool copy_engine = false;
};

void run_probe_cli(const ProbeCli& c) {
  probe::ProbeConfig cfg;
  cfg.mode = probe::parse_mode("--mode", c.mode);
  cfg.target = probe::parse_target("--target", c.target);
  cfg.pattern = probe::parse_pattern("--pattern", c.pattern);
  cfg.gap_kind = probe::parse_gap_kind("--gap-kind", c.gap_kind);
  const auto path = probe::parse_store_path("--path", c.path);
  const char* bytes_option = c.bytes_kib ? "--bytes-kib" : "--bytes-per-producer";
  const double bytes = c.bytes_kib ? *c.bytes_kib * 1024.0 : c.bytes_per_producer;
  if (!(bytes > 0 && bytes <= 1073741824.0))
    throw InputError(std::string(bytes_option) + ": must be in (0, 1 GiB], got " + std::to_string(bytes) + " bytes");
  if (bytes != static_cast<double>(static_cast<std::uint64_t>(bytes)) || static_cast<std::uint64_t>(bytes) % 16)
    throw InputError(std::string(bytes_option) + ": " + std::to_string(bytes) + " bytes is not a whole multiple of 16 bytes");
  cfg.bytes_per_producer = static_cast<std::uint64_t>(bytes);
  if (!(c.gap_us >= 0 && c.gap_us <= kMaxGapUs))
    throw InputError("--gap-us: must be in [0, 1e+06], got " + std::to_string(c.gap_us));
  cfg.gap_s = c.gap_us * 1e-6;
  if (c.store_bytes != 4 && c.store_bytes != 8 && c.store_bytes != 16)
    throw InputError("--store-bytes: must be 4, 8 or 16, got " + std::to_string(c.store_bytes));
  if (c.bursts < 1 || c.bursts > 1000000) throw InputError("--bursts: must be in [1, 1000000], got " + std::to_string(c.bursts));
  if (c.warmup < 0 || c.warmup > 1000000) throw InputError("--warmup: must be in [0, 1000000], got " + std::to_string(c.warmup));
  if (c.threads < 32 || c.threads > 1024 || c.threads % 32)
    throw InputError("--threads: a multiple of 32 in [32, 1024], got " + std::to_string(c.threads));
  if (c.producers < 0 || c.producers > 1 << 20)
    throw InputError("--producers: must be in [0, 1048576] (0: one per SM), got " + std::to_string(c.producers));
  cfg.store_bytes = c.store_bytes;
  cfg.bursts = c.bursts;
  cfg.warmup_bursts = c.warmup;
  cfg.threads_per_producer = c.threads;
  if (!(c.buffer_mib >= 1 && c.buffer_mib <= 65536))
    throw InputError("--buffer-mib: within 1 .. 65536, got " + std::to_string(c.buffer_mib));
  const std::vector<int> gpus = cli::parse_gpu_list("--gpus", c.gpus);
  if (c.launch != "single" && c.launch != "per-process")
    throw InputError("--launch: '" + c.launch + "' (single or per-process)");

  std::unique_ptr<comm::Team> team;
  std::vector<int> my_devices;
  if (c.launch == "single") {
    cli::require_cuda_devices("probe", gpus);
    team = std::make_unique<comm::Team>(comm::Team::single_process(gpus));
    my_devices = gpus;
  } else if (c.launch == "per-process") {
    const comm::LauncherEnv env = comm::launcher_env();
    if (!env.found)
      throw InputError("--launch per-process: no launcher environment (run under mpirun, or set XSTAGE_RANK and "
                       "XSTAGE_WORLD_SIZE)");
    if (env.local_rank >= static_cast<int>(gpus.size()))
      throw InputError("--gpus: local rank " + std::to_string(env.local_rank) + " has no GPU in '" + c.gpus + "'");
    cli::require_cuda_devices("probe", {gpus[env.local_rank]});
    team = std::make_unique<comm::Team>(comm::Team::per_process(env, gpus[env.local_rank], c.rendezvous));
    my_devices = {gpus[env.local_rank]};
  } else {
    throw InputError("--launch: '" + c.launch + "' (single or per-process)");
  }
  probe::ProbeRunner runner(*team, static_cast<std::uint64_t>(c.buffer_mib * 1048576.0) / 16 * 16, path, c.threads);
  if (cfg.producers == 0) cfg.producers = c.producers > 0 ? c.producers : runner.max_producers();
  const probe::ProbeResult res = runner.run(cfg);

  nlohmann::json j = res.to_json(c.raw);
  stamp_json(j, "xstage.probe/1");
  j["launch"] = comm::to_string(team->mode());
  if (c.copy_engine && team->mode() == comm::LaunchMode::kSingleProcess) {
    const int dst = team->world_size() >= 2 ? 1 : 0;
    j["copy_engine"] = runner.copy_engine_bandwidth(0, dst, 256ull << 20, 10).to_json();
  }
  j["provenance"] = gpu::collect_provenance(my_devices, 0, nullptr);
  const bool printer = team->local(0) != nullptr;  // the process holding rank 0 prints the result
  if (printer) out_stream() << j.dump(2) << "\n";
  for (const auto& s : res.senders)
    err_printf("rank %d -> %s: T_iss %.3f us, T_period %.3f us, gap %.3f us, verified %s\n", s.rank,
                 s.destination.c_str(), s.t_iss_stat_s * 1e6, s.t_period_stat_s * 1e6, s.gap_stat_s * 1e6,
                 res.verified() ? "yes" : "NO");
  if (!res.verified()) {
    err_printf("xstage probe: verification FAILED: %llu of %llu words wrong; %s\n",
                 static_cast<unsigned long long>(res.mismatches), static_cast<unsigned long long>(res.words_verified),
                 res.first_mismatch.c_str());
    throw CommandExit{3};
  }
}

void add_probe(CLI::App& root) {
  auto c = std::make_shared<ProbeCli>();
  auto* cmd = root.add_subcommand("probe", "One remote-store burst probe run, verified, as JSON");
  add_gpus_option(cmd, c->gpus, "team rank i drives the i-th; per-process: by local rank");
  cmd->add_option("--launch", c->launch, "single (one process drives all GPUs) or per-process (mpirun)")
      ->capture_default_str();
  cmd->add_option("--rendezvous", c->rendezvous, "per-process: shared directory for the NCCL unique id");
  cmd->add_option("--mode", c->mode, "periodic or isolated")->capture_default_str();
  cmd->add_option("--target", c->target, "remote or local")->capture_default_str();
  cmd->add_option("--pattern", c->pattern, "pair, bidirectional or all-to-all")->capture_default_str();
  cmd->add_option("--path", c->path, "nccl-window or peer-pointer")->capture_default_str();
  cmd->add_option("--producers", c->producers, "K (default: one per SM)");
  // Bytes, as every other subcommand's --bytes-per-producer; --bytes-kib is the deprecated KiB spelling.
  auto* bytes = cmd->add_option("--bytes-per-producer", c->bytes_per_producer, "B per producer per burst, bytes (a multiple of 16)")
                    ->capture_default_str();
  cmd->add_option("--bytes-kib", c->bytes_kib, "deprecated: B in KiB (use --bytes-per-producer)")->excludes(bytes);
  cmd->add_option("--gap-us", c->gap_us, "producer-side gap after each burst, µs")->capture_default_str();
  cmd->add_option("--gap-kind", c->gap_kind, "spin or mma")->capture_default_str();
  cmd->add_option("--store-bytes", c->store_bytes, "4, 8 or 16")->capture_default_str();
  cmd->add_option("--bursts", c->bursts, "measured bursts")->capture_default_str();
  cmd->add_option("--warmup", c->warmup, "warm-up bursts")->capture_default_str();
  cmd->add_option("--threads", c->threads, "threads per producer")->capture_default_str();
  cmd->add_option("--buffer-mib", c->buffer_mib, "destination buffer per GPU, MiB")->capture_default_str();
  cmd->add_flag("--raw", c->raw, "include per-burst samples");
  cmd->add_flag("--copy-engine", c->copy_engine, "also measure the copy-engine bandwidth (single-process)");
  cmd->callback([c] { run_probe_cli(*c); });
}

}  // namespace
}  // namespace xstage::cli

XSTAGE_SUBCOMMAND(cmd_probe, "probe", 41, add_probe);
