// Output files, written the one way every tool writes them (the CLI's --out of every subcommand, the probe's
// calibration folder): checked before any work, then written through a temporary in the same folder and a rename,
// so an error never leaves a partial file or a temporary behind. Every error is an InputError of one bounded line
// that names the argument (`option`, e.g. "--out") and the path.
#pragma once

#include <string>
#include <vector>

namespace xstage {

// Checks an output path before any work: non-empty, its folder exists, it is not a folder, it is not one of
// `inputs` (same file by inode, also through links), and it does not exist unless `force`; an existing target
// that is not a regular file (a symbolic link, FIFO, device, socket) is refused even with `force`.
void check_output_path(const std::string& option, const std::string& path, bool force,
                       const std::vector<std::string>& inputs = {});

// Writes `text` to `path` atomically after check_output_path: without `force` the file is created only if no
// file took the name meanwhile (never replaced); with `force` an existing regular file is replaced. The file
// gets the mode a plain create would (0666 less the umask). Returns true when it created `path`, false when it
// replaced a file that existed.
bool write_output_file(const std::string& path, const std::string& text, bool force,
                       const std::vector<std::string>& inputs = {}, const std::string& option = "--out");

// Removes the temporaries write_output_file is writing when SIGINT, SIGTERM or SIGHUP arrives, then re-raises
// the signal. Installs handlers only for signals still at their default action (never over a host process's
// own, such as Python's); idempotent. Programs that own their process (the xstage binary) call it.
void remove_output_temporaries_on_signals();

}  // namespace xstage
