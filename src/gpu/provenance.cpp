// Provenance block for results JSON (see provenance.hpp for the schema).
#include "xstage/gpu/provenance.hpp"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <fstream>
#include <string>
#include <vector>

#include "xstage/gpu/check.hpp"
#include "xstage_git_revision.hpp"  // generated at every build (src/gpu/CMakeLists.txt)

#ifndef XSTAGE_BUILD_TYPE
#define XSTAGE_BUILD_TYPE "unknown"
#endif

namespace xstage::gpu {
namespace {

std::string version_string(int code, int major_div, int minor_div, int minor_mod) {
  return std::to_string(code / major_div) + "." + std::to_string((code / minor_div) % minor_mod);
}

// NCCL_VERSION_CODE layout since 2.9: major*10000 + minor*100 + patch.
std::string nccl_version_string(int code) {
  return std::to_string(code / 10000) + "." + std::to_string((code / 100) % 100) + "." + std::to_string(code % 100);
}

// The NCCL library this process would use, asked through the dynamic loader so the provenance of a
// binary that does not link NCCL still records it; the handle is the already-loaded library when the
// process links it, so the answer is the one that matters for device-API code.
nlohmann::json nccl_runtime_version() {
  void* lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_NOLOAD);
  if (!lib) lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return nullptr;
  using get_version_fn = int (*)(int*);
  auto fn = reinterpret_cast<get_version_fn>(dlsym(lib, "ncclGetVersion"));
  nlohmann::json out = nullptr;
  int code = 0;
  if (fn && fn(&code) == 0) out = nccl_version_string(code);
  Dl_info info{};
  if (fn && dladdr(reinterpret_cast<void*>(fn), &info) && info.dli_fname) {
    out = nlohmann::json{{"version", out}, {"path", info.dli_fname}};
  }
  return out;
}

std::string utc_now_iso8601() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// Arguments with spaces or shell metacharacters are single-quoted so the command can be re-run.
// Without argv (argc == 0) the command line is read from /proc/self/cmdline.
std::string join_command(int argc, char** argv) {
  std::vector<std::string> args;
  if (argc > 0 && argv) {
    for (int i = 0; i < argc; ++i) args.emplace_back(argv[i] ? argv[i] : "");
  } else {
    std::ifstream f("/proc/self/cmdline", std::ios::binary);
    std::string a;
    while (std::getline(f, a, '\0')) args.push_back(a);
  }
  std::string cmd;
  for (const std::string& a : args) {
    const bool plain = !a.empty() && a.find_first_of(" \t\n'\"\\$`*?;&|<>()[]{}!#~") == std::string::npos;
    if (!cmd.empty()) cmd += ' ';
    if (plain) {
      cmd += a;
    } else {
      cmd += '\'';
      for (char c : a) cmd += (c == '\'') ? std::string("'\\''") : std::string(1, c);
      cmd += '\'';
    }
  }
  return cmd;
}

nlohmann::json nvidia_driver_version() {
  std::ifstream f("/proc/driver/nvidia/version");
  std::string line;
  if (!f || !std::getline(f, line)) return nullptr;
  // "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.95.05  ..." → the first token with two dots.
  std::size_t pos = 0;
  while (pos < line.size()) {
    const std::size_t end = line.find(' ', pos);
    const std::string tok = line.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    int dots = 0;
    bool numeric = !tok.empty();
    for (char c : tok) {
      if (c == '.') ++dots;
      else if (c < '0' || c > '9') numeric = false;
    }
    if (numeric && dots >= 1) return tok;
    if (end == std::string::npos) break;
    pos = end + 1;
  }
  return line;
}

nlohmann::json device_info(int ordinal) {
  nlohmann::json d{{"ordinal", ordinal}};
  cudaDeviceProp p{};
  const cudaError_t err = cudaGetDeviceProperties(&p, ordinal);
  if (err != cudaSuccess) {
    d["error"] = std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
    cudaGetLastError();
    return d;
  }
  char uuid[64];
  std::snprintf(uuid, sizeof(uuid),
                "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                static_cast<unsigned char>(p.uuid.bytes[0]), static_cast<unsigned char>(p.uuid.bytes[1]),
                static_cast<unsigned char>(p.uuid.bytes[2]), static_cast<unsigned char>(p.uuid.bytes[3]),
                static_cast<unsigned char>(p.uuid.bytes[4]), static_cast<unsigned char>(p.uuid.bytes[5]),
                static_cast<unsigned char>(p.uuid.bytes[6]), static_cast<unsigned char>(p.uuid.bytes[7]),
                static_cast<unsigned char>(p.uuid.bytes[8]), static_cast<unsigned char>(p.uuid.bytes[9]),
                static_cast<unsigned char>(p.uuid.bytes[10]), static_cast<unsigned char>(p.uuid.bytes[11]),
                static_cast<unsigned char>(p.uuid.bytes[12]), static_cast<unsigned char>(p.uuid.bytes[13]),
                static_cast<unsigned char>(p.uuid.bytes[14]), static_cast<unsigned char>(p.uuid.bytes[15]));
  char bus[32];
  std::snprintf(bus, sizeof(bus), "%04x:%02x:%02x.0", p.pciDomainID, p.pciBusID, p.pciDeviceID);
  int sm_clock_khz = 0, mem_clock_khz = 0;
  cudaDeviceGetAttribute(&sm_clock_khz, cudaDevAttrClockRate, ordinal);
  cudaDeviceGetAttribute(&mem_clock_khz, cudaDevAttrMemoryClockRate, ordinal);
  cudaGetLastError();
  d["name"] = p.name;
  d["uuid"] = uuid;
  d["pci_bus_id"] = bus;
  d["sm_count"] = p.multiProcessorCount;
  d["compute_capability"] = std::to_string(p.major) + "." + std::to_string(p.minor);
  d["l2_bytes"] = p.l2CacheSize;
  d["memory_bytes"] = p.totalGlobalMem;
  d["max_sm_clock_mhz"] = sm_clock_khz / 1000.0;
  d["memory_clock_mhz"] = mem_clock_khz / 1000.0;
  return d;
}

}  // namespace

const char* build_git_revision() { return kXstageGitRevision; }

nlohmann::json collect_provenance(const std::vector<int>& devices, int argc, char** argv) {
  nlohmann::json j;
  j["git_revision"] = kXstageGitRevision;
  j["git_describe"] = kXstageGitDescribe;
  j["build_type"] = XSTAGE_BUILD_TYPE;
  j["date_utc"] = utc_now_iso8601();
  j["command"] = join_command(argc, argv);
  char host[256] = {0};
  j["hostname"] = gethostname(host, sizeof(host) - 1) == 0 ? nlohmann::json(host) : nlohmann::json(nullptr);
  int rt = 0, drv = 0;
  j["cuda_runtime_version"] =
      cudaRuntimeGetVersion(&rt) == cudaSuccess ? nlohmann::json(version_string(rt, 1000, 10, 100)) : nullptr;
  // 0 means no driver is loaded (a machine without a GPU).
  j["cuda_driver_version"] = cudaDriverGetVersion(&drv) == cudaSuccess && drv > 0
                                 ? nlohmann::json(version_string(drv, 1000, 10, 100))
                                 : nlohmann::json(nullptr);
  cudaGetLastError();
  j["nvidia_driver"] = nvidia_driver_version();
#ifdef NCCL_VERSION_CODE
  j["nccl_header_version"] = nccl_version_string(NCCL_VERSION_CODE);
#else
  j["nccl_header_version"] = nullptr;
#endif
  j["nccl_runtime_version"] = nccl_runtime_version();
  nlohmann::json devs = nlohmann::json::array();
  for (int d : devices) devs.push_back(device_info(d));
  j["devices"] = devs;
  return j;
}

}  // namespace xstage::gpu
