// Provenance of a GPU run: what every results JSON carries so a number can be traced to the code,
// the machine and the command that produced it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace xstage::gpu {

// {
//   "git_revision": "<sha>[-dirty.<diff hash>]", "git_describe": "...", "build_type": "Release",
//   "date_utc": "2026-11-30T18:00:00Z", "command": "xstage calibrate --gpus 0,1 ...",
//   "cuda_runtime_version": "13.0", "cuda_driver_version": "13.0", "nvidia_driver": "580.xx",
//   "nccl_header_version": "2.28.9", "nccl_runtime_version": "2.28.9" | null,
//   "devices": [ {"ordinal": 0, "name": "NVIDIA H200", "uuid": "...", "pci_bus_id": "...",
//                 "sm_count": 132, "compute_capability": "9.0", "l2_bytes": ..., "memory_bytes": ...,
//                 "max_sm_clock_mhz": ..., "memory_clock_mhz": ...}, ... ],
//   "hostname": "..."
// }
// argc == 0 / argv == nullptr: the command line is read from /proc/self/cmdline.
// Devices that cannot be queried appear with an "error" field instead of failing the run: a
// provenance block must never be the reason a measurement is lost.
nlohmann::json collect_provenance(const std::vector<int>& devices, int argc, char** argv);

// The git revision of the source tree this binary was built from (regenerated at every build).
const char* build_git_revision();

// SM clock of `device` in MHz, measured now: a ~1 ms single-thread kernel compares clock64() with
// %globaltimer; the median of a few launches. Record it beside timings (throttling shows here).
double measure_sm_clock_mhz(int device);

}  // namespace xstage::gpu
