// The communication substrate: NCCL version check, teams (single process and per process), symmetric
// windows with LSA pointers and barriers.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "gpu_test_support.hpp"
#include "xstage/comm/team.hpp"
#include "xstage/comm/window.hpp"
#include "xstage/gpu/check.hpp"

namespace {

using namespace xstage;

using test::device_count;

// The xstage binary sits one level above the test binary (build/xstage, build/tests/xstage_gpu_tests).
std::string cli_path() {
  if (const char* e = std::getenv("XSTAGE_CLI")) return e;
  return (std::filesystem::read_symlink("/proc/self/exe").parent_path().parent_path() / "xstage").string();
}

struct Cmd {
  int rc;
  std::string out;
};
Cmd run(const std::string& cmd) {
  Cmd r{-1, ""};
  FILE* p = popen((cmd + " 2>/dev/null").c_str(), "r");
  if (!p) return r;
  char buf[4096];
  std::size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
  const int st = pclose(p);
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

TEST(Comm, NcclLibraryMatchesHeaders) {
  REQUIRE_GPUS(1);
  EXPECT_NO_THROW(comm::check_nccl_version());
}

TEST(Comm, MulticastStaysOff) {
  comm::disable_multicast_env();
  ASSERT_NE(std::getenv("NCCL_NVLS_ENABLE"), nullptr);
  EXPECT_STREQ(std::getenv("NCCL_NVLS_ENABLE"), "0");
}

TEST(Comm, OneRankTeamWindowPointersBarrierAndAllreduce) {
  REQUIRE_GPUS(1);
  auto team = comm::Team::single_process({0});
  EXPECT_EQ(team.world_size(), 1);
  comm::SymmetricWindow win(team, 4 << 20, 2);
  void** d_out = nullptr;
  XSTAGE_CUDA_CHECK(cudaMalloc(&d_out, 2 * sizeof(void*)));
  win.resolve_lsa_pointers(0, {0, 0}, {0, 4096}, d_out);
  void* h[2] = {nullptr, nullptr};
  XSTAGE_CUDA_CHECK(cudaMemcpy(h, d_out, sizeof(h), cudaMemcpyDeviceToHost));
  // The LSA pointer of one's own rank is a usable address of the same memory (write through one, read
  // through the other).
  ASSERT_NE(h[0], nullptr);
  EXPECT_EQ(static_cast<char*>(h[1]) - static_cast<char*>(h[0]), 4096);
  const unsigned magic = 0x5eed1234u;
  XSTAGE_CUDA_CHECK(cudaMemcpy(h[1], &magic, 4, cudaMemcpyHostToDevice));
  unsigned back = 0;
  XSTAGE_CUDA_CHECK(cudaMemcpy(&back, static_cast<char*>(win.local_ptr(0)) + 4096, 4, cudaMemcpyDeviceToHost));
  EXPECT_EQ(back, magic);
  win.device_barrier(0);
  win.device_barrier(1);
  team.synchronize();
  EXPECT_EQ(team.allreduce_sum({41}), 41);
  XSTAGE_CUDA_CHECK(cudaFree(d_out));
}

TEST(Comm, TwoRankTeamWindowPointersDifferAndBarrierCompletes) {
  REQUIRE_GPUS(2);
  auto team = comm::Team::single_process({0, 1});
  comm::SymmetricWindow win(team, 4 << 20, 1);
  void** d_out = nullptr;
  XSTAGE_CUDA_CHECK(cudaSetDevice(0));
  XSTAGE_CUDA_CHECK(cudaMalloc(&d_out, 2 * sizeof(void*)));
  win.resolve_lsa_pointers(0, {0, 1}, {128, 128}, d_out);
  void* h[2] = {nullptr, nullptr};
  XSTAGE_CUDA_CHECK(cudaMemcpy(h, d_out, sizeof(h), cudaMemcpyDeviceToHost));
  EXPECT_NE(h[0], h[1]);  // stores through them reaching the peer: Window.* in test_flags.cu
  win.device_barrier(0);
  team.synchronize();
  EXPECT_EQ(team.allreduce_sum({3, 4}), 7);
  XSTAGE_CUDA_CHECK(cudaFree(d_out));
}

// Per-process launch mode through the CLI: one rank without mpirun (XSTAGE_RANK), and N ranks under
// mpirun when it and N GPUs are present. Data verification decides the exit status.
TEST(Comm, PerProcessLaunchOneRank) {
  REQUIRE_GPUS(1);
  const std::string dir = "/tmp/xstage_rdv_" + std::to_string(getpid());
  const Cmd c = run("XSTAGE_RANK=0 XSTAGE_WORLD_SIZE=1 " + cli_path() +
                    " probe --launch per-process --rendezvous " + dir +
                    " --gpus 0 --target local --producers 8 --bytes-kib 16 --bursts 16");
  ASSERT_EQ(c.rc, 0) << c.out;
  const auto j = nlohmann::json::parse(c.out);
  EXPECT_EQ(j["launch"], "per-process");
  EXPECT_TRUE(j["verified"].get<bool>());
  std::filesystem::remove_all(dir);
}

TEST(Comm, PerProcessLaunchUnderMpirunTwoRanks) {
  REQUIRE_GPUS(2);
  if (run("command -v mpirun").rc != 0) GTEST_SKIP() << "mpirun not found";
  const std::string dir = "/tmp/xstage_rdv_mpi_" + std::to_string(getpid());
  for (const char* pattern : {"pair", "bidirectional"}) {
    const Cmd c = run("mpirun --allow-run-as-root -np 2 -x NCCL_NVLS_ENABLE=0 -x LD_LIBRARY_PATH " + cli_path() +
                      " probe --launch per-process --rendezvous " + dir + " --gpus 0,1 --pattern " + pattern +
                      " --bytes-kib 32 --bursts 32");
    ASSERT_EQ(c.rc, 0) << pattern << ": " << c.out;
    const auto j = nlohmann::json::parse(c.out);
    EXPECT_TRUE(j["verified"].get<bool>()) << pattern;
    EXPECT_EQ(j["world_size"], 2);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
