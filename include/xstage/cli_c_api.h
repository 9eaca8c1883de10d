/* C ABI of the xstage command line (libxstage_cli.so): every command of the `xstage` binary, run in process.
 * The Python package's console script (`xstage`, `python -m xstage`) and xstage.planner.run() load it with ctypes.
 * It sits above the C ABI of the kernels and the planner (libxstage_capi.so, which does not link it).
 * Thread-safe: calls on different threads share no state; never throws across the boundary.
 */
#ifndef XSTAGE_CLI_C_API_H
#define XSTAGE_CLI_C_API_H

#ifdef __cplusplus
extern "C" {
#endif

/* 1: xstage_cli_run and xstage_cli_free. */
#define XSTAGE_CLI_C_API_VERSION 1
int xstage_cli_c_api_version(void);

/* Runs `xstage ARGV...` (argv without the program name) exactly as the binary would; *out and *err (each may be
 * NULL: that text is dropped) receive its stdout and stderr text, NUL-terminated and malloc'ed: free them with
 * xstage_cli_free. Returns the command's exit code (0 success, 2 bad input, 1 failure, a command's own code), or
 * -1 when the call itself is invalid or the library ran out of host memory, with the reason in *err. */
int xstage_cli_run(int argc, const char* const* argv, char** out, char** err);

/* Frees text returned by xstage_cli_run. NULL is ignored. */
void xstage_cli_free(char* text);

#ifdef __cplusplus
}
#endif

#endif /* XSTAGE_CLI_C_API_H */
