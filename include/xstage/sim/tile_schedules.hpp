// Simulator schedules of a burst–gap kernel from its tiles: one code path for every kernel description
// (the MoE layer's Linear-1/Linear-2 orders, sim::moe_producer_schedule and sim::moe_role_schedules, and
// the generic `kind: "burst_gap"` description, sim/burst_gap_kernel.hpp).
//
// A producer (CTA) runs a sequence of tiles; each has a mainloop of `k_steps` k-steps and `remote_bytes`
// of remote stores in its epilogue. How those stores leave (TileIssue):
//   epilogue:        the producer stages the tile (staging_s) and stores its remote bytes in one burst
//                    after the mainloop;
//   piggyback:       the producer stages the tile and its remote bytes leave in `chunks` equal chunks, one
//                    at each of the first k-steps of the tiles that follow (each chunk taking its issue
//                    floor out of the k-step); chunks still pending when the next storing tile ends, or at
//                    the end, go out back to back first;
//   epilogue_issuer: two roles per CTA. The producer runs the mainloops, waiting at a tile's entry for one
//                    of `cover_slots` accumulator slots (eq. 15's stall); the epilogue issuer takes the
//                    tiles in order, stages each (every tile, storing or not) and stores its remote bytes in
//                    one burst, then frees the slot.
// Every step is labelled for timelines (Step::as): the tile's kind (tag) and ordinal in its sequence, and its role:
// mainloop, staging, store (a chunk: the storing tile's labels), operand wait (a tile's dependency), slot wait
// (the producer waiting for a free accumulator slot) or accumulator wait (the issuer waiting for the next tile).
// Dependencies between producers: a tile may wait before its mainloop for a counter to reach a target,
// and signal a counter once its output is written (after the mainloop, or with an epilogue issuer after
// the tile's epilogue).
#pragma once

#include <vector>

#include "xstage/sim/simulator.hpp"

namespace xstage::sim {

struct TileStep {
  double mainloop_s = 0.0;
  int k_steps = 1;               // piggyback: the k-steps a following tile's chunks are issued at (> 0)
  double remote_bytes = 0.0;     // remote stores of the tile's epilogue (0: none)
  double issue_floor_s = 0.0;    // T_iss0 of the one-burst store (epilogue, epilogue_issuer)
  double chunk_issue_floor_s = 0.0;  // T_iss0 of one chunk (piggyback)
  int wait_counter = -1, wait_target = 0;  // before the mainloop: wait until the counter reaches the target
  int signal_counter = -1;                 // once the tile's output is written: add one to the counter
  int tag = 0;  // the caller's tile kind, copied to TileRef and to the tile's steps (Step::tag, for timelines)
};

enum class TileIssueMode { kEpilogue, kPiggyback, kEpilogueIssuer };

struct TileIssue {
  TileIssueMode mode = TileIssueMode::kEpilogue;
  int chunks = 1;       // piggyback: chunks per storing tile (>= 1)
  int cover_slots = 2;  // epilogue_issuer: accumulator slots (>= 1)
  double staging_s = 0.0;  // per storing tile (per tile with an epilogue issuer), before its stores
};

// Where a tile's work went: its producer and, with an epilogue issuer, the step of its slot wait (-1: none,
// the tile is among the first cover_slots); the role that issued its stores, the step of its first burst
// (-1: no store) and its bursts as ordinals among that role's bursts (BurstRecord::index), first_burst ..
// first_burst + bursts − 1.
struct TileRef {
  int tag, producer, slot_wait_step, issuer, burst_step, first_burst, bursts;
};

struct TileSchedules {
  std::vector<ProducerSchedule> schedules;  // epilogue_issuer: producers [0, C), their issuers [C, 2C)
  std::vector<TileRef> tiles;               // producer by producer, each in its order
};

// One schedule per sequence (two per sequence with an epilogue issuer). `first_free_counter`: the counters the
// tiles name are below it; the epilogue issuer's slot counters are allocated from it. Throws InputError for a
// bad issue model or tile.
TileSchedules tile_schedules(const std::vector<std::vector<TileStep>>& sequences, const TileIssue& issue,
                             int first_free_counter = 0);

// Steps one sequence becomes (an upper bound; counts every chunk and every optional step), for work limits
// checked before anything is built.
double tile_schedule_steps(double tiles, const TileIssue& issue);

}  // namespace xstage::sim
