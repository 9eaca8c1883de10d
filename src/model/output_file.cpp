#include "xstage/model/output_file.hpp"

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>

#include "xstage/model/bounded_text.hpp"
#include "xstage/model/error.hpp"

namespace xstage {

namespace {

// Temporary output files being written, removed by the SIGINT/SIGTERM/SIGHUP handler (async-signal-safe: fixed
// slots of fixed-size paths, unlink only).
constexpr int kTempSlots = 16;
constexpr std::size_t kTempPathBytes = 4096;
char g_temp_paths[kTempSlots][kTempPathBytes];
std::atomic<int> g_temp_used[kTempSlots];  // 0 free, 1 being filled, 2 holds a path

extern "C" void remove_temps_and_reraise(int sig) {
  for (int i = 0; i < kTempSlots; ++i)
    if (g_temp_used[i].load() == 2) ::unlink(g_temp_paths[i]);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

// Holds a temporary path in a cleanup slot for its lifetime (no slot: the temporary is still removed on every
// normal and error exit, only not on a signal).
class TempSlot {
 public:
  explicit TempSlot(const std::string& path) {
    if (path.size() >= kTempPathBytes) return;
    for (int i = 0; i < kTempSlots; ++i) {
      int expected = 0;
      if (!g_temp_used[i].compare_exchange_strong(expected, 1)) continue;
      std::memcpy(g_temp_paths[i], path.c_str(), path.size() + 1);
      g_temp_used[i].store(2);
      slot_ = i;
      return;
    }
  }
  ~TempSlot() {
    if (slot_ >= 0) g_temp_used[slot_].store(0);
  }
  TempSlot(const TempSlot&) = delete;
  TempSlot& operator=(const TempSlot&) = delete;

 private:
  int slot_ = -1;
};

// The process umask, read without changing it (/proc), or by setting and restoring it.
mode_t current_umask() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("Umask:", 0) == 0) return static_cast<mode_t>(std::strtoul(line.c_str() + 6, nullptr, 8));
  const mode_t m = ::umask(022);
  ::umask(m);
  return m;
}

std::string shown_path(const std::string& option, const std::string& path) {
  return option + " " + bounded_text(path, 240);
}

// Refuses a target that is not absent and not a regular file: a symlink (also a dangling one), a FIFO, a device,
// a socket, a folder. Replacing one would write through it or turn it into a regular file.
void refuse_non_regular_target(const std::string& option, const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return;  // absent
  const std::string shown = shown_path(option, path);
  if (S_ISLNK(st.st_mode)) throw InputError(shown + ": is a symbolic link; refusing to replace it (give the real path)");
  if (S_ISDIR(st.st_mode)) throw InputError(shown + ": is a folder");
  if (!S_ISREG(st.st_mode))
    throw InputError(shown + ": is not a regular file (a device, FIFO or socket); refusing to replace it");
}

}  // namespace

void remove_output_temporaries_on_signals() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
      struct sigaction old {};
      if (::sigaction(sig, nullptr, &old) != 0 || old.sa_handler != SIG_DFL) continue;  // ignored or taken: left alone
      struct sigaction sa {};
      sa.sa_handler = remove_temps_and_reraise;
      sigemptyset(&sa.sa_mask);
      ::sigaction(sig, &sa, nullptr);
    }
  });
}

void check_output_path(const std::string& option, const std::string& path, bool force,
                       const std::vector<std::string>& inputs) {
  namespace fs = std::filesystem;
  if (path.empty()) throw InputError(option + ": empty path");
  const std::string shown = shown_path(option, path);
  const fs::path target(path);
  const fs::path folder = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::error_code ec;
  if (!fs::is_directory(folder, ec))
    throw InputError(shown + ": folder " + bounded_text(folder.string(), 240) + " does not exist");
  if (fs::is_directory(target, ec)) throw InputError(shown + ": is a folder");
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    for (const std::string& in : inputs)
      if (!in.empty() && fs::exists(in, ec) && fs::equivalent(in, target, ec))
        throw InputError(shown + ": is also an input of this command (" + bounded_text(in, 240) + ")");
    if (!force) throw InputError(shown + ": already exists (pass --force to replace it)");
    refuse_non_regular_target(option, path);
  }
}

bool write_output_file(const std::string& path, const std::string& text, bool force,
                       const std::vector<std::string>& inputs, const std::string& option) {
  namespace fs = std::filesystem;
  check_output_path(option, path, force, inputs);
  const std::string shown = shown_path(option, path);
  const fs::path target(path);
  const fs::path folder = target.has_parent_path() ? target.parent_path() : fs::path(".");
  // The temporary's name is chosen here and held in a cleanup slot before the file is created, so a signal at
  // any point finds it (mkstemp would create it before its name is known).
  std::string tmp;
  std::optional<TempSlot> slot;
  int fd = -1;
  static std::atomic<unsigned> counter{0};
  for (int attempt = 0; fd < 0 && attempt < 100; ++attempt) {
    char suffix[32];
    std::snprintf(suffix, sizeof suffix, ".tmp.%d.%u", static_cast<int>(::getpid()), counter.fetch_add(1));
    tmp = (folder / ("." + target.filename().string() + suffix)).string();
    slot.reset();
    slot.emplace(tmp);
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) throw InputError(shown + ": cannot create a file in " + bounded_text(folder.string(), 240) + " (" +
                               std::strerror(errno) + ")");
  // From here every exit removes the temporary unless it became the output.
  bool closed = false, placed = false, created = false;
  try {
    std::size_t done = 0;
    while (done < text.size()) {
      const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
      if (n < 0) {
        if (errno == EINTR) continue;
        throw InputError(shown + ": write failed (" + std::strerror(errno) + ")");
      }
      done += static_cast<std::size_t>(n);
    }
    // The temporary is created 0600; the output gets what a plain create would: 0666 less the umask.
    const bool mode_ok = ::fchmod(fd, 0666 & ~current_umask()) == 0;
    const bool synced = ::fsync(fd) == 0 || errno == EINVAL;
    closed = true;
    if (::close(fd) != 0 || !mode_ok || !synced) throw InputError(shown + ": write failed (" + std::strerror(errno) + ")");
    if (!force) {
      // Create without replacing, atomically: renameat2(RENAME_NOREPLACE) where the file system has it, else
      // link() and unlink; both fail with EEXIST if anything (a file, a dangling symlink, a concurrent writer's
      // output) took the name since the check.
      bool linked = false;
      if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, path.c_str(), RENAME_NOREPLACE) != 0) {
        if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP) {
          if (errno == EEXIST) throw InputError(shown + ": already exists (pass --force to replace it)");
          throw InputError(shown + ": cannot create (" + std::strerror(errno) + ")");
        }
        if (::link(tmp.c_str(), path.c_str()) != 0) {
          if (errno == EEXIST) throw InputError(shown + ": already exists (pass --force to replace it)");
          throw InputError(shown + ": cannot create (" + std::strerror(errno) + ")");
        }
        linked = true;
      }
      placed = true;
      created = true;
      if (linked) ::unlink(tmp.c_str());
    } else {
      refuse_non_regular_target(option, path);  // again, just before the rename
      struct stat before {};
      const bool existed = ::lstat(path.c_str(), &before) == 0;
      if (std::rename(tmp.c_str(), path.c_str()) != 0)
        throw InputError(shown + ": cannot replace (" + std::strerror(errno) + ")");
      placed = true;
      created = !existed;
    }
  } catch (...) {
    if (!closed) ::close(fd);
    if (!placed) ::unlink(tmp.c_str());
    throw;
  }
  return created;
}

}  // namespace xstage
