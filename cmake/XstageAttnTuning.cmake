# Tuning knobs of the attention kernel family: one cache entry per knob of xstage/sched/attn_tuning.hpp, which
# holds each one's default and what it changes. Empty (the default) defines nothing; a value is checked here and
# defined as <knob>=<value>. scripts/tuning_builds.sh compiles the attention and Ulysses objects with every value
# that differs from the default.
#   XSTAGE_ATTN_TABLE_TUNE   the tile table's knobs (xstage/sched/attn_tile_config.hpp): for every target that
#                            reads the table's block_m (the kernels and launchers, the Ulysses and attention bench
#                            layers, the GPU tests), so that they agree; the rest of the build compiles unchanged
#                            (and from ccache).
#   XSTAGE_ATTN_KERNEL_TUNE  the kernels' own knobs: the attention and Ulysses targets only (src/attn, src/ulysses).

# _xstage_attn_knob(LIST NAME MIN MAX STEP HELP): cache entry NAME, accepted an integer in [MIN, MAX] that is a
# multiple of STEP; set, NAME=<value> is appended to LIST.
function(_xstage_attn_knob list name min max step help)
  set(${name} "" CACHE STRING "${help} (tuning builds only; empty: the default of xstage/sched/attn_tuning.hpp)")
  set(value "${${name}}")
  if(value STREQUAL "")
    return()
  endif()
  set(ok FALSE)
  if(value MATCHES "^-?[0-9]+$")
    math(EXPR rem "${value} % ${step}")
    if(NOT value LESS min AND NOT value GREATER max AND rem EQUAL 0)
      set(ok TRUE)
    endif()
  endif()
  if(NOT ok)
    math(EXPR span "${max} - ${min}")
    if(step EQUAL 1 AND span EQUAL 1)
      message(FATAL_ERROR "${name}=${value}: accepted ${min} or ${max}")
    elseif(step EQUAL 1)
      message(FATAL_ERROR "${name}=${value}: accepted ${min} to ${max}")
    else()
      message(FATAL_ERROR "${name}=${value}: accepted a multiple of ${step} from ${min} to ${max}")
    endif()
  endif()
  set(${list} ${${list}} ${name}=${value} PARENT_SCOPE)
endfunction()

set(XSTAGE_ATTN_TABLE_TUNE "")
_xstage_attn_knob(XSTAGE_ATTN_TABLE_TUNE XSTAGE_ATTN_TUNE_WARPGROUPS_D64 2 3 1
                  "bf16 attention, head_dim 64: consumer warpgroups, 2 or 3")
_xstage_attn_knob(XSTAGE_ATTN_TABLE_TUNE XSTAGE_ATTN_FP8_TUNE_WARPGROUPS 2 3 1
                  "FP8 attention: consumer warpgroups, 2 or 3")

set(XSTAGE_ATTN_KERNEL_TUNE "")
_xstage_attn_knob(XSTAGE_ATTN_KERNEL_TUNE XSTAGE_ATTN_TUNE_BLOCK_N 16 256 16
                  "bf16 attention, local forward: key block, a multiple of 16 up to 256")
_xstage_attn_knob(XSTAGE_ATTN_KERNEL_TUNE XSTAGE_ATTN_TUNE_WG_ORDER 0 1 1
                  "bf16 attention, local forward: GEMM turns between the consumer warpgroups, 0 or 1")
_xstage_attn_knob(XSTAGE_ATTN_KERNEL_TUNE XSTAGE_ATTN_TUNE_Q_IN_REGS 0 1 1
                  "bf16 attention: Q in registers for S = Q K^T at every head_dim, 0 or 1")
_xstage_attn_knob(XSTAGE_ATTN_KERNEL_TUNE XSTAGE_ATTN_TUNE_CLUSTER_M 1 2 1
                  "bf16 attention, local forward: CTAs per cluster of whole tiles, 1 or 2")
_xstage_attn_knob(XSTAGE_ATTN_KERNEL_TUNE XSTAGE_ATTN_FP8_TUNE_BLOCK_N 32 256 32
                  "FP8 attention: key block and K-scale block, a multiple of 32 up to 256")
_xstage_attn_knob(XSTAGE_ATTN_KERNEL_TUNE XSTAGE_ATTN_FP8_TUNE_EXP_EMU 0 8 1
                  "FP8 attention: exponentials of every 8 on the FMA pipe, 0 to 8")

set(_xstage_gmma_n_without_extended_shapes 16 32 64 96 128 192 256)
# A key block CuTe's GMMA selector covers with one instruction only when CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED is
# defined (every multiple of 8 but 16, 32, 64, 96, 128, 192 and 256): without it S = Q K^T would be split into
# narrower GMMAs (176 keys: eleven 16-wide ones), so the macro is defined for the attention and Ulysses targets
# (src/attn/attn_kernel_traits.cuh asserts that the atom is as wide as the block).
foreach(_knob XSTAGE_ATTN_TUNE_BLOCK_N XSTAGE_ATTN_FP8_TUNE_BLOCK_N)
  if(NOT "${${_knob}}" STREQUAL "" AND NOT "${${_knob}}" IN_LIST _xstage_gmma_n_without_extended_shapes)
    if(NOT "CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED" IN_LIST XSTAGE_ATTN_KERNEL_TUNE)
      list(APPEND XSTAGE_ATTN_KERNEL_TUNE CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED)
    endif()
    message(STATUS "${_knob}=${${_knob}}: CuTe's extended GMMA shapes enabled for the attention kernels")
  endif()
endforeach()

# Measured and removed (the code of each is in 5942f56; docs/attn_fp8.md, docs/attn_notes.md): set, the build
# would silently be the default one.
foreach(_knob XSTAGE_ATTN_FP8_TUNE_QK_E4M3 XSTAGE_ATTN_FP8_TUNE_V_TERMS XSTAGE_ATTN_FP8_TUNE_PV_BF16
              XSTAGE_ATTN_FP8_TUNE_NO_ROTATION XSTAGE_ATTN_TUNE_KV_NOLOAD)
  if(${_knob})
    message(FATAL_ERROR "${_knob}=${${_knob}}: that variant was measured and removed (its code is in 5942f56)")
  endif()
endforeach()
