// Tuning knobs of the attention kernel family (src/attn, and the fused Ulysses kernels of src/ulysses, which
// instantiate the same template): the one place that reads an XSTAGE_ATTN_*TUNE* definition. Each knob is a
// CMake cache entry of the macro's name (cmake/XstageAttnTuning.cmake: empty is the default below, a value is
// checked there and passed as -D<name>=<value>); scripts/tuning_builds.sh compiles every other setting.
// Plain C++ (no CUDA): the host code reads the tile table's knobs.
//
// The tile table's knobs (attn_tile_config.hpp) are defined for every target that reads the table, so that the
// host code and the kernels agree; the kernels' own knobs only for the attention and Ulysses targets (other
// targets see the defaults and must not read them). Overrides of a tile-table entry default to 0 or -1: "the
// table's value", so a change of the table reaches every build.
//
// Measured and removed (their code is in 5942f56; docs/attn_fp8.md, docs/attn_notes.md): the FP8 kernel's e4m3
// Q K, V as two e4m3 terms, P V in bf16, Q and K unrotated; the bf16 kernel without K / V loads.
#pragma once

namespace xstage::sched {

// bf16 d = 64 consumer warpgroups, 2 or 3 (3: 192-row tiles, 1.11-1.18x two on one H200, 0.94-0.98x FA4;
// journal/attention.md, round 11).
#if defined(XSTAGE_ATTN_TUNE_WARPGROUPS_D64)
inline constexpr int kAttnD64Warpgroups = XSTAGE_ATTN_TUNE_WARPGROUPS_D64;
#else
inline constexpr int kAttnD64Warpgroups = 3;
#endif
// FP8 consumer warpgroups, 2 or 3 (3 spills at block_n 128, so the table gives it 96-key blocks: 1.02-1.05x two
// at 128 on one H200, 64-key blocks 0.97-0.99x; journal/attention.md, round 11).
#if defined(XSTAGE_ATTN_FP8_TUNE_WARPGROUPS)
inline constexpr int kAttnFp8Warpgroups = XSTAGE_ATTN_FP8_TUNE_WARPGROUPS;
#else
inline constexpr int kAttnFp8Warpgroups = 3;
#endif
// bf16 local forward's key block, 0: the table's 128 (176 slower; journal/attention.md, "Tuning run"). A block
// other than 16/32/64/96/128/192/256 (here or FP8's) builds with CuTe's extended GMMA shapes (XstageAttnTuning.cmake).
#if defined(XSTAGE_ATTN_TUNE_BLOCK_N)
inline constexpr int kAttnTuneBlockN = XSTAGE_ATTN_TUNE_BLOCK_N;
#else
inline constexpr int kAttnTuneBlockN = 0;
#endif
// bf16 local forward's GEMM turns, -1: the table's (on), 0 off (4-7 % slower; journal/attention.md, "Tuning run").
#if defined(XSTAGE_ATTN_TUNE_WG_ORDER)
inline constexpr int kAttnTuneWgOrder = XSTAGE_ATTN_TUNE_WG_ORDER;
#else
inline constexpr int kAttnTuneWgOrder = -1;
#endif
// bf16 Q in registers, -1: the table's (d 128 on, d 64 off), 0 / 1: both (on 1.022-1.025x at d 128; journal, round 10).
#if defined(XSTAGE_ATTN_TUNE_Q_IN_REGS)
inline constexpr int kAttnTuneQInRegs = XSTAGE_ATTN_TUNE_Q_IN_REGS;
#else
inline constexpr int kAttnTuneQInRegs = -1;
#endif
// bf16 local forward's CTAs per cluster, 0: the table's 1 (2: level, geomean 1.002; journal/attention.md, round 10).
#if defined(XSTAGE_ATTN_TUNE_CLUSTER_M)
inline constexpr int kAttnTuneClusterM = XSTAGE_ATTN_TUNE_CLUSTER_M;
#else
inline constexpr int kAttnTuneClusterM = 0;
#endif
// FP8 key block and K-scale block, 0: the table's (96 with three warpgroups, 128 with two; e4m3 Q K: 192 no gain,
// 224 slower; attn_fp8.md, "Speed").
#if defined(XSTAGE_ATTN_FP8_TUNE_BLOCK_N)
inline constexpr int kAttnTuneFp8BlockN = XSTAGE_ATTN_FP8_TUNE_BLOCK_N;
#else
inline constexpr int kAttnTuneFp8BlockN = 0;
#endif
// FP8 exponentials of every 8 on the FMA pipe, 0-8 (2: best of 0-4, 4: 5-6 % slower than 0; attn_fp8.md, "Speed").
#if defined(XSTAGE_ATTN_FP8_TUNE_EXP_EMU)
inline constexpr int kAttnFp8PolyExpPer8 = XSTAGE_ATTN_FP8_TUNE_EXP_EMU;
#else
inline constexpr int kAttnFp8PolyExpPer8 = 2;
#endif

static_assert(kAttnD64Warpgroups == 2 || kAttnD64Warpgroups == 3);
static_assert(kAttnFp8Warpgroups == 2 || kAttnFp8Warpgroups == 3);
static_assert(kAttnTuneBlockN == 0 || (kAttnTuneBlockN % 16 == 0 && kAttnTuneBlockN <= 256));
static_assert(kAttnTuneWgOrder >= -1 && kAttnTuneWgOrder <= 1);
static_assert(kAttnTuneQInRegs >= -1 && kAttnTuneQInRegs <= 1);
static_assert(kAttnTuneClusterM >= 0 && kAttnTuneClusterM <= 2);
static_assert(kAttnTuneFp8BlockN == 0 || (kAttnTuneFp8BlockN % 32 == 0 && kAttnTuneFp8BlockN <= 256));
static_assert(kAttnFp8PolyExpPer8 >= 0 && kAttnFp8PolyExpPer8 <= 8);

}  // namespace xstage::sched
