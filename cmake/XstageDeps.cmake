# Dependencies are installed by scripts/install_deps.sh; the build never downloads anything.
find_package(nlohmann_json 3.10 REQUIRED)
find_package(CLI11 REQUIRED)
find_package(fmt REQUIRED)  # used header-only (fmt::fmt-header-only): binaries carry no libfmt.so

# CUDA: enabled when nvcc is found (a laptop without it still builds the CLI, model and simulator).
set(XSTAGE_HAS_CUDA OFF)
if(XSTAGE_ENABLE_CUDA)
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90a)  # wgmma and setmaxnreg need sm_90a
    endif()
    enable_language(CUDA)
    # CMake 3.25 does not know nvcc's C++20 dialect: CUDA translation units are C++17 (host-only
    # code is C++20), so headers shared with .cu files stay C++17.
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    set(CMAKE_CUDA_RUNTIME_LIBRARY Static)
    find_package(CUDAToolkit REQUIRED)
    set(XSTAGE_HAS_CUDA ON)
  endif()
endif()

# CUTLASS 4 / CuTe headers come from the pinned PyPI package nvidia-cutlass (include/ tree under
# cutlass_library/source/include).
# A wheel build (pip install .) runs in an isolated environment without that package: the path comes
# from the environment variable XSTAGE_CUTLASS_INCLUDE (scripts/python_package.sh sets it), or from
# another python3 on PATH that has the package.
if(XSTAGE_HAS_CUDA)
  if(NOT XSTAGE_CUTLASS_INCLUDE AND DEFINED ENV{XSTAGE_CUTLASS_INCLUDE})
    set(XSTAGE_CUTLASS_INCLUDE "$ENV{XSTAGE_CUTLASS_INCLUDE}" CACHE PATH "CUTLASS/CuTe include directory")
  endif()
  if(NOT XSTAGE_CUTLASS_INCLUDE)
    # Asked: CMake's Python, then every python3 on PATH. A plain `pip install .` configures inside an
    # isolated environment without nvidia-cutlass, while the python3 that install_deps.sh installed it
    # into is further along PATH; each is asked without pip's isolation variables.
    find_package(Python3 COMPONENTS Interpreter)
    execute_process(COMMAND sh -c "which -a python3 2>/dev/null" OUTPUT_VARIABLE _pythons
                    OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    string(REPLACE "\n" ";" _pythons "${_pythons}")
    set(_candidates ${Python3_EXECUTABLE} ${_pythons})
    list(REMOVE_DUPLICATES _candidates)
    foreach(_python IN LISTS _candidates)
      execute_process(
        COMMAND ${CMAKE_COMMAND} -E env --unset=PYTHONPATH --unset=PYTHONNOUSERSITE ${_python} -c
          "import cutlass_library, os; print(os.path.join(os.path.dirname(cutlass_library.__file__), 'source', 'include'))"
        OUTPUT_VARIABLE _cutlass_inc OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _cutlass_rc ERROR_QUIET)
      if(_cutlass_rc EQUAL 0 AND EXISTS "${_cutlass_inc}/cute/tensor.hpp")
        set(XSTAGE_CUTLASS_INCLUDE "${_cutlass_inc}" CACHE PATH "CUTLASS/CuTe include directory")
        break()
      endif()
    endforeach()
  endif()
  if(NOT XSTAGE_CUTLASS_INCLUDE OR NOT EXISTS "${XSTAGE_CUTLASS_INCLUDE}/cute/tensor.hpp")
    message(FATAL_ERROR "CUTLASS/CuTe headers not found: run scripts/install_deps.sh "
                        "(pip package nvidia-cutlass) or pass -DXSTAGE_CUTLASS_INCLUDE=<dir> (or set it in the "
                        "environment, e.g. for pip install .)")
  endif()
  message(STATUS "xstage: CUDA ${CMAKE_CUDA_COMPILER_VERSION}, archs ${CMAKE_CUDA_ARCHITECTURES}, "
                 "CUTLASS ${XSTAGE_CUTLASS_INCLUDE}")
else()
  message(STATUS "xstage: nvcc not found or disabled: building the CPU-only core and CLI")
endif()

# The embedded default platform: platforms/default.json is turned into a C++ source at configure time,
# so the CLI runs with no files beside it.
set(XSTAGE_DEFAULT_PLATFORM "${CMAKE_SOURCE_DIR}/platforms/h200_x2_measured.json" CACHE FILEPATH
    "Platform file embedded as the default")
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${XSTAGE_DEFAULT_PLATFORM}")
file(READ "${XSTAGE_DEFAULT_PLATFORM}" _xstage_default_platform_text)
set(XSTAGE_EMBEDDED_PLATFORM_CPP "${CMAKE_BINARY_DIR}/generated/embedded_platform.cpp")
file(CONFIGURE OUTPUT "${XSTAGE_EMBEDDED_PLATFORM_CPP}" CONTENT
"// Generated from @XSTAGE_DEFAULT_PLATFORM@ at configure time. Do not edit.
#include \"xstage/model/platform.hpp\"
namespace xstage::model {
std::string_view embedded_default_platform_json() {
  return R\"xstage_platform(@_xstage_default_platform_text@)xstage_platform\";
}
std::string_view embedded_default_platform_origin() { return \"@XSTAGE_DEFAULT_PLATFORM@\"; }
}  // namespace xstage::model
" @ONLY)

# The built-in kernel descriptions (kernels/moe/builtin: the MoE shapes `xstage plan` audits, in its order;
# kernels/moe/paper: the paper's MegaMoE kernels) are compiled in the same way: the files are their one source.
set(XSTAGE_BUILTIN_KERNELS
  builtin/deepseek-v4-flash builtin/deepseek-v4-pro builtin/deepseek-v3 builtin/qwen3-235b-a22b builtin/mimo-v2-flash
  builtin/dit-moe-g2-16e2a builtin/glm-4.5
  paper/paper-dit-moe paper/paper-qwen3.5 paper/paper-hy3 paper/paper-mimo-v2.5 paper/paper-glm-5.2
  paper/paper-dsv4-flash paper/paper-dsv4-pro)
set(_xstage_kernel_entries "")
foreach(_k ${XSTAGE_BUILTIN_KERNELS})
  set(_f "${CMAKE_SOURCE_DIR}/kernels/moe/${_k}.json")
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${_f}")
  file(READ "${_f}" _text)
  string(FIND "${_text}" ")xstage_kernel\"" _bad)
  if(NOT _bad EQUAL -1)
    message(FATAL_ERROR "${_f} contains the raw-string delimiter )xstage_kernel\"")
  endif()
  get_filename_component(_group "${_k}" DIRECTORY)
  string(APPEND _xstage_kernel_entries "    {\"${_group}\", \"kernels/moe/${_k}.json\", R\"xstage_kernel(${_text})xstage_kernel\"},\n")
endforeach()
set(XSTAGE_EMBEDDED_KERNELS_CPP "${CMAKE_BINARY_DIR}/generated/embedded_kernels.cpp")
file(CONFIGURE OUTPUT "${XSTAGE_EMBEDDED_KERNELS_CPP}" CONTENT
"// Generated from kernels/moe/ at configure time (cmake/XstageDeps.cmake). Do not edit.
#include \"xstage/model/kernel_description.hpp\"
namespace xstage::model::detail {
std::span<const EmbeddedKernel> embedded_kernels() {
  static const EmbeddedKernel kKernels[] = {
@_xstage_kernel_entries@  };
  return kKernels;
}
}  // namespace xstage::model::detail
" @ONLY)
