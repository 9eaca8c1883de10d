# The link rules of the C libraries the Python package loads with ctypes (libxstage_capi.so, libxstage_cli.so):
# only the symbols of `exports_map` are exported, so the static CUDA runtime, CUTLASS and libstdc++ helpers linked
# in stay local and never bind to another copy loaded in the process (torch's); no undefined symbol is left for
# the loader (except in a sanitizer build, scripts/sanitize.sh: clang links the sanitizer runtimes into the
# executable only, so a shared library's __asan_* / __ubsan_* / __sanitizer_cov_* references stay undefined until
# it is loaded); the file lands in the build folder and, installed, beside the package's Python files ($ORIGIN; NCCL
# comes from the process, see python/xstage/_native.py; neither library needs cuBLAS, which the MoE bench baseline
# loads on first use, src/testing/cublas_loader.hpp).
function(xstage_package_library target output_name exports_map)
  target_compile_options(${target} PRIVATE -Wall -Wextra)
  target_link_options(${target} PRIVATE "-Wl,--version-script=${exports_map}" -Wl,--exclude-libs,ALL)
  if(NOT CMAKE_CXX_FLAGS MATCHES "-fsanitize=")
    target_link_options(${target} PRIVATE -Wl,--no-undefined)
  endif()
  set_target_properties(${target} PROPERTIES
    OUTPUT_NAME ${output_name}
    LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}
    LINK_DEPENDS ${exports_map}
    INSTALL_RPATH "$ORIGIN")
  install(TARGETS ${target} LIBRARY DESTINATION xstage COMPONENT python)
endfunction()
