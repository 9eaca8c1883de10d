#include "cli_run.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <set>
#include <new>
#include <sstream>

#include <unistd.h>

#include "cli_common.hpp"
#include "cli_version.hpp"
#include "registry.hpp"
#include "xstage/model/bounded_text.hpp"
#include "xstage/model/error.hpp"

namespace xstage::cli {

std::string version_text() {
  std::string s = std::string("xstage ") + kBuildInfo.version + "\n";
  s += std::string("git revision: ") + kXstageGitDescribe + " (" + kXstageGitRevision + ")\n";
  s += std::string("build type: ") + kBuildInfo.build_type + "\n";
  s += std::string("CUDA: ") + kBuildInfo.cuda + "\n";
  s += std::string("NCCL: ") + kBuildInfo.nccl + "\n";
  s += std::string("CUTLASS: ") + kBuildInfo.cutlass + "\n";
  return s;
}

namespace {

int run_parsed(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  CLI::App app{
      "xstage: measure, model and exploit the X-Stage (post-issue progress of GPU remote stores)",
      "xstage"};
  app.require_subcommand(1);
  app.fallthrough(false);
  app.option_defaults()->always_capture_default();
  bool show_version = false;
  app.add_flag("--version", show_version, "Version, git revision, build type and CUDA/NCCL/CUTLASS versions");
  const std::vector<Subcommand> registry = subcommands();
  for (const auto& sub : registry) sub.add(app);
  apply_number_conventions(app);
  apply_option_needs(app);
  if (!args.empty() && args[0] == "--version") {
    out << version_text();
    return 0;
  }
  if (!args.empty() && !args[0].empty() && args[0][0] != '-') {
    bool known = false;
    std::string names;
    for (const auto& sub : registry) {
      known = known || args[0] == sub.name;
      names += std::string(names.empty() ? "" : ", ") + sub.name;
    }
    if (!known) {
      err << "xstage: error: unknown command \"" << shown_text(args[0], 60) << "\" (commands: " << names << ")\n";
      return 2;
    }
  }
  // Help wins over every other argument: "model --help --producers x" prints model's help (the
  // subcommand path is the leading words before the first option).
  std::vector<std::string> effective = args;
  for (const auto& a : args) {
    if (a == "--") break;
    if (a == "--help" || a == "-h") {
      effective.clear();
      for (const auto& w : args) {
        if (w.empty() || w[0] == '-') break;
        effective.push_back(w);
      }
      effective.push_back("--help");
      break;
    }
  }
  // A token that looks like a long option but is no option of any command ("--producers4") is named,
  // instead of surfacing as a missing required option or an unexpected argument.
  {
    std::set<std::string> known = {"--help", "--version"};
    std::vector<const CLI::App*> apps = {&app};
    while (!apps.empty()) {
      const CLI::App* a = apps.back();
      apps.pop_back();
      for (const CLI::Option* o : a->get_options())
        for (const auto& n : o->get_lnames()) known.insert("--" + n);
      for (const CLI::App* sub : a->get_subcommands([](const CLI::App*) { return true; })) apps.push_back(sub);
    }
    for (const auto& a : effective) {
      if (a == "--") break;
      if (a.size() > 2 && a.compare(0, 2, "--") == 0 && !known.count(a.substr(0, a.find('=')))) {
        err << "xstage: error: unknown option \"" << shown_text(a.substr(0, a.find('=')), 60) << "\"\n";
        return 2;
      }
    }
  }
  std::vector<std::string> reversed(effective.rbegin(), effective.rend());  // CLI11 consumes from the back
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e, out, err);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e, out, err);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e, out, err);
    // CLI11's messages echo the arguments: bounded and escaped to one line.
    err << "xstage: error: " << one_line(e.what(), 300) << "\n";
    return 2;
  }
  return 0;
}

}  // namespace

int run_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err, bool interactive) {
  OutputScope scope(out, err, interactive);
  CommandLineScope command_line(args);
  take_created_files();  // none from an earlier command on this thread
  int code = 1;
  try {
    code = run_parsed(args, out, err);
  } catch (const InputError& e) {
    // The message's parts echoing user data are bounded where they are made; one_line keeps the whole one line
    // with nothing a terminal acts on, whichever part was not.
    err << "xstage: error: " << one_line(e.what(), 560) << "\n";
    code = 2;
  } catch (const std::filesystem::filesystem_error& e) {
    err << "xstage: error: " << shown_text(e.path1().string(), 240) << ": " << shown_text(e.code().message(), 120) << "\n";
    code = 2;
  } catch (const CommandExit& e) {
    code = e.code;
  } catch (const std::bad_alloc&) {
    err << "xstage: failed: out of memory\n";
    code = 1;
  } catch (const std::exception& e) {
    err << "xstage: failed: " << one_line(e.what(), 300) << "\n";
    code = 1;
  } catch (...) {
    err << "xstage: failed: unknown error\n";
    code = 1;
  }
  // Output that could not be written (a full disk, a closed pipe, /dev/full) is a failure, never a
  // success: the stream's state and, for the process's own stdout, stdio's.
  errno = 0;
  out.flush();
  bool out_failed = !out;
  if (interactive) out_failed = (std::fflush(stdout) != 0 || std::ferror(stdout)) || out_failed;
  if (out_failed) {
    const int saved = errno;
    // The command failed: the files it created go too (files it replaced with --force cannot come back).
    std::string removed;
    for (const auto& f : take_created_files())
      if (::unlink(f.c_str()) == 0) removed += (removed.empty() ? "; removed " : ", ") + shown_text(f, 240);
    err << "xstage: error: cannot write the output to stdout" << (saved ? std::string(" (") + std::strerror(saved) + ")" : "")
        << removed << "\n";
    if (code == 0) code = 1;
  }
  take_created_files();
  err.flush();
  return code;
}

int run_cli(const std::vector<std::string>& args, std::string& out, std::string& err) {
  try {
    std::ostringstream o, e;
    const int code = run_cli(args, o, e, false);
    out = o.str();
    err = e.str();
    return code;
  } catch (...) {  // only an allocation failure of the captured text itself
    err = "xstage: failed: out of memory\n";
    return 1;
  }
}

}  // namespace xstage::cli
