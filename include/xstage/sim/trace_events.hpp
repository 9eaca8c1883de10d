// Timelines as Chrome trace-event JSON (opens in Perfetto and chrome://tracing):
//   {"traceEvents": [...], "displayTimeUnit": "ns", "otherData": {...}}
// "X" complete events (ts and dur in microseconds, as doubles) on one thread per producer or CTA, "C" counter
// events, and "M" metadata events naming and ordering every process and thread used.
//
// One table of slice names (TraceSlice) for both writers, so that predicted and measured timelines line up:
//   "mainloop L1" / "mainloop L2" / "mainloop <tile>" a tile's mainloop ("mainloop" with no tile kind);
//   "operand wait"     a tile waiting for its operands (the Linear-1 tiles of its row);
//   "epilogue store"   remote stores issued, from the first to the last accepted byte (T_iss; measured: T_RS);
//   "stall"            nested in an epilogue store, its part beyond the backpressure-free floor (simulated);
//   "staging"          accumulators to shared memory before the stores (simulated; measured inside mainloop L2);
//   "slot wait"        a producer waiting at a tile's entry for a free accumulator slot (epilogue issuer; eq. 15);
//   "accumulator wait" an epilogue issuer waiting for its next tile's mainloop;
//   "completion wait"  the completion-coupled wait (simulated counterfactual).
//
// Simulated (chrome_trace): one slice per TimelineSpan of a SimResult recorded with SimConfig::record_timeline,
// named from its kind and role (StepRole: a compute step is a mainloop unless it is staging, a burst is epilogue
// stores, a wait is an operand wait unless it is a slot or accumulator wait), the tile kind (SimResult::tile_kinds)
// in the mainloop's name and every slice's args, and a stall slice nested in each epilogue store whose issue time
// exceeds its floor. A counter track "X-Stage path" (args.outstanding_bytes: injected − drained bytes) on the
// first producer's process, from SimResult::occupancy.
//
// Measured (chrome_trace_from_moe_timeline): the per-tile stamps `xstage moe bench --trace --trace-dump`
// writes (schema xstage.moe_timeline, version 1). One process per traced variant and rank, one thread per
// CTA; per tile an "operand wait" (entry to operands ready), then "mainloop L1" (to the next tile's entry;
// the CTA's last Linear-1 tile has no end stamp and no slice) or "mainloop L2" (to the stores' begin,
// staging included) and "epilogue store" (the Combine stores' issue span T_RS).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "xstage/sim/simulator.hpp"

namespace xstage::sim {

// Where one producer's slices go.
struct TraceTrack {
  int pid;
  std::string process;
  int tid;
  std::string thread;
};

// The slice names of both writers (the table above).
enum class TraceSlice {
  kMainloop, kOperandWait, kEpilogueStore, kStall, kStaging, kSlotWait, kAccumulatorWait, kCompletionWait
};
const char* trace_slice_name(TraceSlice slice);
// With the tile kind: "mainloop L1" for a mainloop (as the measured traces name it), the plain name otherwise
// (the kind goes to args.tile_kind).
std::string trace_slice_name(TraceSlice slice, std::string_view tile_kind);
// The counter track of the path's outstanding bytes, and its one value's key.
inline constexpr const char* kTracePathCounter = "X-Stage path";
inline constexpr const char* kTraceOutstandingBytes = "outstanding_bytes";

// The trace of `r`'s timeline. `tracks` has one entry per producer index (at least as many as the
// producers in the timeline), or is empty: then pid 0 "simulated", tid = producer, "producer N".
// Slice args: producer, step, tile_kind and tile (when the step has them), and per kind bytes, floor_us and
// stall_us (epilogue store, stall) or counter (waits). Counter samples: one per SimResult::occupancy sample.
// `metadata` (an object, or null) goes to "otherData". Throws InputError for too few tracks.
nlohmann::json chrome_trace(const SimResult& r, const std::vector<TraceTrack>& tracks = {},
                            const nlohmann::json& metadata = nullptr);

// The trace of a moe bench per-tile dump (parsed JSON read from `origin`). Throws InputError naming
// `origin` and the field for anything the writer does not produce: wrong schema or version, a field
// missing or of the wrong type, stamps that are negative, not finite or out of order.
nlohmann::json chrome_trace_from_moe_timeline(const nlohmann::json& dump, std::string_view origin);

// Problems of a trace, one line each (empty: none): no traceEvents array, an event without ph, an
// unknown ph, an X without a name or with ts/dur/pid/tid missing or not numbers, a negative dur, a C
// without a name, ts or args, or with a value that is not a finite number, a metadata event without its
// args, a thread used by a slice without thread_name metadata (or its process, or a counter's, without
// process_name).
std::vector<std::string> check_chrome_trace(const nlohmann::json& trace);

}  // namespace xstage::sim
