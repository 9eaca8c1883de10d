// Tile orders of the expert-parallel fused MoE: the expert-wave baseline and the X-Stage-aware
// interleaved order (the paper's Algorithm 1). Pure code, host and device: the kernel and the CPU
// tests (coverage, dependencies, no deadlock) run the same functions.
//
// Rows: each local expert e owns rows_e scheduler rows (a row is one b_m block of its received
// tokens); rows are numbered expert by expert, O_e is expert e's first row, P the total. Each row has
// n1 Linear-1 N-tiles and n2 Linear-2 N-tiles, mapped in pairs to two paired CTAs (role r ∈ {0, 1}
// takes N-tile 2·j + r), so a row has P_i = n_i / 2 pairs per stage (n_i even). G scheduler
// instances (CTA pairs) take pair cursors g, g + G, g + 2G, ... of each stream; cursor c of row p is
// pair j = (c mod P_i + p) mod P_i (rotated by the row: MoeRowLayout::make_tile).
// Dependencies: a Linear-2 tile of row p reads every Linear-1 tile of row p (the SwiGLU output);
// the kernel enforces them with per-row readiness counters, the schedules only order the work.
#pragma once

#include <cstdint>

#include "xstage/gpu/host_device.hpp"

namespace xstage::sched {

// Cursor / pairs. On the GPU a 64-bit division is a subroutine call, which in a GMMA kernel costs
// spills; the kernels guarantee rows · pairs < 2^31 (checked by their launchers), so 32 bits suffice there.
XSTAGE_HOST_DEVICE inline long long cursor_div(long long cursor, int pairs) {
#if defined(__CUDA_ARCH__)
  return static_cast<int>(cursor) / pairs;
#else
  return cursor / pairs;
#endif
}
XSTAGE_HOST_DEVICE inline int cursor_mod(long long cursor, int pairs) {
#if defined(__CUDA_ARCH__)
  return static_cast<int>(cursor) % pairs;
#else
  return static_cast<int>(cursor % pairs);
#endif
}

enum class MoeStage : std::uint8_t { kLinear1 = 1, kLinear2 = 2 };

struct MoeTile {
  MoeStage stage;
  int expert;
  int m;    // row within the expert
  int n;    // N-tile index within the stage
  int row;  // global scheduler row (O_e + m)
};

// Row layout of the local experts: offsets[e] = O_e, offsets[num_experts] = P. Not owning.
struct MoeRowLayout {
  const int* offsets = nullptr;
  int num_experts = 0;
  int pairs_l1 = 0;  // P_1 = n1 / 2
  int pairs_l2 = 0;  // P_2 = n2 / 2

  XSTAGE_HOST_DEVICE int rows() const { return offsets[num_experts]; }
  // e(p): the expert owning row p (binary search; experts with no rows are skipped).
  XSTAGE_HOST_DEVICE int expert_of_row(int p) const {
    int lo = 0, hi = num_experts - 1;
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (offsets[mid] <= p) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  }
  // The pair of a cursor is rotated by its row, (cursor mod P + p) mod P: with a stride of instances that
  // is a multiple of P, an unrotated instance would take the same pair in every row, and the CTAs of
  // the last pair would always draw the padding tile of an odd N-tile count (and no work with it).
  XSTAGE_HOST_DEVICE MoeTile make_tile(MoeStage stage, long long cursor, int role) const {
    const int pairs = stage == MoeStage::kLinear1 ? pairs_l1 : pairs_l2;
    const int p = static_cast<int>(cursor_div(cursor, pairs));
    const int e = expert_of_row(p);
    const int j = (cursor_mod(cursor, pairs) + p) % pairs;  // < 2^31: the kernels bound rows · pairs
    return MoeTile{stage, e, p - offsets[e], 2 * j + role, p};
  }
};

// One stage's stream of pair cursors c, c + stride, c + 2·stride, ...: the tile of each is
// layout.make_tile(stage, c, role), but the cursor keeps its row p = c / P, c mod P, the tile's pair
// j = (c mod P + p) mod P and the expert of p up to date by additions alone, so the schedules divide only
// when a stream starts (on the GPU an integer division is some twenty instructions, once per tile on
// every role's path). Eight 32-bit values: the fused kernel's TMA warp (in 40 registers) and consumer
// warps keep their schedules in registers, and rows · P < 2^31 there. The CPU tests check tile() against
// make_tile() cursor by cursor.
struct MoeStreamCursor {
  int p = 0, c_mod = 0, j = 0, expert = 0;
  int pairs = 1, rows_step = 0, mod_step = 0, j_step = 0;  // P, stride / P, stride % P, (stride % P + stride / P) % P

  XSTAGE_HOST_DEVICE MoeStreamCursor() = default;
  XSTAGE_HOST_DEVICE MoeStreamCursor(const MoeRowLayout& layout, MoeStage stage, long long start, int stride)
      : pairs(stage == MoeStage::kLinear1 ? layout.pairs_l1 : layout.pairs_l2) {
    p = static_cast<int>(cursor_div(start, pairs));
    c_mod = cursor_mod(start, pairs);
    j = (c_mod + p % pairs) % pairs;
    rows_step = stride / pairs;
    mod_step = stride % pairs;
    j_step = (mod_step + rows_step % pairs) % pairs;
    expert = p < layout.rows() ? layout.expert_of_row(p) : layout.num_experts - 1;
  }
  // The same stage's stream from cursor row_begin · P + start (row_begin: the first row of expert
  // first_expert; start < stride): as the constructor, without its division by the stride or the search
  // for the expert.
  XSTAGE_HOST_DEVICE void restart(const MoeRowLayout& layout, int first_expert, int start) {
    p = layout.offsets[first_expert] + start / pairs;
    c_mod = start % pairs;
    j = (c_mod + p % pairs) % pairs;
    expert = first_expert;
    while (expert + 1 < layout.num_experts && layout.offsets[expert + 1] <= p) ++expert;
  }
  XSTAGE_HOST_DEVICE void advance(const MoeRowLayout& layout) {
    c_mod += mod_step;
    const int carry = c_mod >= pairs ? 1 : 0;
    c_mod -= carry * pairs;
    p += rows_step + carry;
    j += j_step + carry;  // < 2·P
    if (j >= pairs) j -= pairs;
    while (expert + 1 < layout.num_experts && layout.offsets[expert + 1] <= p) ++expert;
  }
  XSTAGE_HOST_DEVICE MoeTile tile(const MoeRowLayout& layout, MoeStage stage, int role) const {
    return MoeTile{stage, expert, p - layout.offsets[expert], 2 * j + role, p};
  }
};

// Algorithm 1: merge the Linear-1 and Linear-2 streams; emit Linear-2 only when the Linear-1 cursor
// leads by at least D rows, otherwise the next Linear-1 tile (Linear-1 adds useful work between
// Combine bursts without adding stores). Once Linear-1 is done, Linear-2 drains.
struct InterleavedMoeScheduler {
  MoeRowLayout layout;
  int instance = 0;  // g
  int stride = 1;    // G
  int role = 0;      // r
  int lead_rows = 1; // D (the CLI's default: model::moe_default_lead_rows, >= eq. 16's D_knee)
  MoeStreamCursor k1, k2;  // the next Linear-1 and Linear-2 pair cursors

  XSTAGE_HOST_DEVICE InterleavedMoeScheduler(MoeRowLayout l, int g, int G, int r, int d)
      : layout(l), instance(g), stride(G), role(r), lead_rows(d), k1(l, MoeStage::kLinear1, g, G),
        k2(l, MoeStage::kLinear2, g, G) {}

  XSTAGE_HOST_DEVICE bool next(MoeTile& out) {
    const int rows = layout.rows();
    if (k1.p >= rows && k2.p >= rows) return false;
    const long long p1 = k1.p < rows ? k1.p : (1LL << 62);
    if (k2.p < rows && static_cast<long long>(k2.p) + lead_rows <= p1) {
      out = k2.tile(layout, MoeStage::kLinear2, role);
      k2.advance(layout);
    } else {
      out = k1.tile(layout, MoeStage::kLinear1, role);
      k1.advance(layout);
    }
    return true;
  }
};

// Expert-wave baseline: experts are taken in waves of `experts_per_wave`; within a wave every
// Linear-1 tile comes first, then every Linear-2 tile, so the wave's Combine stores are concentrated.
struct ExpertWaveMoeScheduler {
  MoeRowLayout layout;
  int instance = 0, stride = 1, role = 0, experts_per_wave = 1, num_waves = 0;
  int wave = 0;
  MoeStage stage = MoeStage::kLinear1;
  bool started = false;      // the current (wave, stage) stream has begun
  MoeStreamCursor k1, k2;    // the Linear-1 and Linear-2 streams, restarted at each wave

  XSTAGE_HOST_DEVICE ExpertWaveMoeScheduler(MoeRowLayout l, int g, int G, int r, int w)
      : layout(l), instance(g), stride(G), role(r), experts_per_wave(w),
        num_waves((l.num_experts + w - 1) / w), k1(l, MoeStage::kLinear1, g, G), k2(l, MoeStage::kLinear2, g, G) {}

  // The next tile of the current (wave, stage) stream, if it has one; the stream of this wave's rows at
  // this stage begins at cursor row_begin · P + g.
  XSTAGE_HOST_DEVICE bool take(MoeStreamCursor& cursor, int first_expert, int last_expert, MoeTile& out) {
    if (!started) {
      cursor.restart(layout, first_expert, instance);
      started = true;
    }
    if (cursor.p >= layout.offsets[last_expert]) return false;
    out = cursor.tile(layout, stage, role);
    cursor.advance(layout);
    return true;
  }

  XSTAGE_HOST_DEVICE bool next(MoeTile& out) {
    while (wave < num_waves) {
      const int first_expert = wave * experts_per_wave;
      const int last_expert = first_expert + experts_per_wave < layout.num_experts ? first_expert + experts_per_wave
                                                                                 : layout.num_experts;
      // (k1 or k2 by name, not through a reference chosen at run time, which would put both in memory)
      if (stage == MoeStage::kLinear1 ? take(k1, first_expert, last_expert, out) : take(k2, first_expert, last_expert, out))
        return true;
      started = false;
      if (stage == MoeStage::kLinear1) {
        stage = MoeStage::kLinear2;
      } else {
        stage = MoeStage::kLinear1;
        ++wave;
      }
    }
    return false;
  }
};

// The expert-wave order's default wave: a quarter of the local experts (at least one). The kernel's
// launcher, the planner and the simulator's orders take the same default from here.
constexpr int default_experts_per_wave(int local_experts) { return local_experts / 4 > 1 ? local_experts / 4 : 1; }

}  // namespace xstage::sched
