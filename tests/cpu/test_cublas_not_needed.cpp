// cuBLAS is the MoE bench baseline's alone and is loaded on first use (src/testing/cublas_loader.{hpp,cpp}), so
// the libraries the wheel ships (libxstage_capi.so, libxstage_cli.so) and the `xstage` executable carry no NEEDED
// entry for libcublas / libcublasLt (readelf -d; skipped where readelf is absent). The loader's failure path
// names the missing library (or function) and how to install it; with the CUDA toolkit's own copies it resolves
// every function of its table.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#ifdef XSTAGE_HAVE_CUBLAS_LOADER
#include <sys/stat.h>

#include "cublas_loader.hpp"
#endif

namespace {

bool on_path(const std::string& tool) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return false;
  std::string dirs = path;
  size_t start = 0;
  while (start <= dirs.size()) {
    const size_t end = std::min(dirs.find(':', start), dirs.size());
    const std::string dir = dirs.substr(start, end - start);
    if (!dir.empty() && access((dir + "/" + tool).c_str(), X_OK) == 0) return true;
    start = end + 1;
  }
  return false;
}

// The NEEDED sonames of `file` as readelf -d lists them; `ok` false (with readelf's output in `error`) where
// readelf fails.
std::vector<std::string> needed_of(const std::string& file, bool& ok, std::string& error) {
  const std::string cmd = "readelf -d '" + file + "' 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::vector<std::string> needed;
  ok = false;
  if (p == nullptr) {
    error = "popen failed";
    return needed;
  }
  std::string out;
  std::array<char, 4096> buf;
  while (std::fgets(buf.data(), int(buf.size()), p) != nullptr) out += buf.data();
  const int st = pclose(p);
  error = out;
  ok = st == 0;
  // "... (NEEDED)             Shared library: [libc.so.6]"
  size_t pos = 0;
  while ((pos = out.find("(NEEDED)", pos)) != std::string::npos) {
    const size_t open = out.find('[', pos), close = out.find(']', open);
    const size_t eol = out.find('\n', pos);
    if (open == std::string::npos || close == std::string::npos || (eol != std::string::npos && open > eol)) break;
    needed.push_back(out.substr(open + 1, close - open - 1));
    pos = close;
  }
  return needed;
}

}  // namespace

TEST(CublasNotNeeded, ShippedLibrariesAndTheCliHaveNoNeededEntryForCublas) {
  if (!on_path("readelf")) GTEST_SKIP() << "readelf is not on PATH (binutils): the NEEDED entries are not checked";
  const std::pair<const char*, const char*> files[] = {
      {"libxstage_cli.so", XSTAGE_CLI_LIBRARY_PATH},
      {"libxstage_capi.so", XSTAGE_CAPI_LIBRARY_PATH},
      {"xstage", XSTAGE_CLI_PATH},
  };
  for (const auto& [name, path] : files) {
    bool ok = false;
    std::string output;
    const std::vector<std::string> needed = needed_of(path, ok, output);
    ASSERT_TRUE(ok) << name << ": readelf -d " << path << " failed:\n" << output;
    // The parse works: every one of them is dynamically linked against the C library.
    bool libc = false;
    for (const auto& n : needed) libc = libc || n.rfind("libc.so", 0) == 0;
    EXPECT_TRUE(libc) << name << ": no NEEDED libc.so.* read from\n" << output;
    for (const auto& n : needed) {
      EXPECT_EQ(n.find("libcublas"), std::string::npos)
          << name << " (" << path << ") needs " << n
          << ": cuBLAS must come through src/testing/cublas_loader (dlopen on first use), not the link";
    }
  }
}

#ifdef XSTAGE_HAVE_CUBLAS_LOADER

using xstage::testing::CublasApi;
using xstage::testing::CublasUnavailable;
using xstage::testing::load_cublas;

namespace {

std::string failure_of(const char* blas, const char* lt) {
  try {
    load_cublas(blas, lt);
  } catch (const CublasUnavailable& e) {
    return e.what();
  }
  return "";
}

void expect_install_hint(const std::string& msg) {
  EXPECT_NE(msg.find("the MoE baseline needs cuBLAS"), std::string::npos) << msg;
  EXPECT_NE(msg.find("pip install 'xstage[bench]'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("nvidia-cublas"), std::string::npos) << msg;
  EXPECT_NE(msg.find("LD_LIBRARY_PATH"), std::string::npos) << msg;
  // The CLI prints the first 300 characters of a failure: the library and the hint fit in them.
  EXPECT_NE(msg.substr(0, 300).find("LD_LIBRARY_PATH"), std::string::npos) << msg;
}

}  // namespace

TEST(CublasLoader, AMissingLibraryIsNamedWithHowToInstallIt) {
  // cuBLASLt is opened first.
  const std::string lt_missing = failure_of("libxstage_test_no_cublas.so.13", "libxstage_test_no_cublasLt.so.13");
  ASSERT_FALSE(lt_missing.empty()) << "a library that does not exist loaded";
  EXPECT_NE(lt_missing.find("(libxstage_test_no_cublasLt.so.13)"), std::string::npos) << lt_missing;
  expect_install_hint(lt_missing);

  // cuBLASLt present (any loadable library stands in), cuBLAS not.
  const std::string blas_missing = failure_of("libxstage_test_no_cublas.so.13", "libc.so.6");
  ASSERT_FALSE(blas_missing.empty());
  EXPECT_NE(blas_missing.find("(libxstage_test_no_cublas.so.13)"), std::string::npos) << blas_missing;
  expect_install_hint(blas_missing);
}

TEST(CublasLoader, ALibraryWithoutTheFunctionsIsNamedWithTheFunction) {
  const std::string msg = failure_of("libc.so.6", "libc.so.6");
  ASSERT_FALSE(msg.empty()) << "libc.so.6 passed for cuBLAS";
  EXPECT_NE(msg.find("libc.so.6 has no cublasCreate_v2"), std::string::npos) << msg;
  expect_install_hint(msg);
}

TEST(CublasLoader, TheToolkitsLibrariesResolveEveryFunction) {
  const std::string dir = XSTAGE_CUDA_LIBRARY_DIR;
  const std::string blas = dir + "/libcublas.so.13", lt = dir + "/libcublasLt.so.13";
  struct stat sb {};
  if (stat(blas.c_str(), &sb) != 0 || stat(lt.c_str(), &sb) != 0)
    GTEST_SKIP() << "no " << blas << " / " << lt << " (the CUDA toolkit's cuBLAS) here";
  CublasApi api;
  try {
    api = load_cublas(blas.c_str(), lt.c_str());
  } catch (const CublasUnavailable& e) {
    FAIL() << e.what();
  }
  // Every slot of the table (all function pointers of one size) is filled.
  static_assert(sizeof(CublasApi) % sizeof(void*) == 0);
  std::array<void*, sizeof(CublasApi) / sizeof(void*)> slots{};
  std::memcpy(slots.data(), &api, sizeof(api));
  EXPECT_EQ(slots.size(), 19u);
  for (size_t i = 0; i < slots.size(); ++i) EXPECT_NE(slots[i], nullptr) << "slot " << i;
  // A call through the table that needs no GPU: the status names come from the loaded library.
  EXPECT_STREQ(api.get_status_name(CUBLAS_STATUS_NOT_INITIALIZED), "CUBLAS_STATUS_NOT_INITIALIZED");
}

#endif  // XSTAGE_HAVE_CUBLAS_LOADER
