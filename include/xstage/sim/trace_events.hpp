// Timelines as Chrome trace-event JSON (opens in Perfetto and chrome://tracing):
//   {"traceEvents": [...], "displayTimeUnit": "ns", "otherData": {...}}
// "X" complete events (ts and dur in microseconds, as doubles) on one thread per producer or CTA, and
// "M" metadata events naming and ordering every process and thread used.
//
// Simulated (chrome_trace): one slice per TimelineSpan of a SimResult recorded with
// SimConfig::record_timeline — "compute", "burst issue" (start to last accepted byte), "wait" (on a
// counter), "completion wait" (completion-coupled mode) — and, nested in a burst issue whose time exceeds
// its backpressure-free floor, a "stall" slice covering the excess (from start + floor to the issue end).
// No outstanding-bytes counter track: the result does not record the path's occupancy over time.
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

// Slice names, shared by the writers and their tests.
inline constexpr const char* kTraceCompute = "compute";
inline constexpr const char* kTraceBurstIssue = "burst issue";
inline constexpr const char* kTraceStall = "stall";
inline constexpr const char* kTraceWait = "wait";
inline constexpr const char* kTraceCompletionWait = "completion wait";
inline constexpr const char* kTraceOperandWait = "operand wait";
inline constexpr const char* kTraceMainloopL1 = "mainloop L1";
inline constexpr const char* kTraceMainloopL2 = "mainloop L2";
inline constexpr const char* kTraceEpilogueStore = "epilogue store";

// The trace of `r`'s timeline. `tracks` has one entry per producer index (at least as many as the
// producers in the timeline), or is empty: then pid 0 "simulated", tid = producer, "producer N".
// Slice args: step, and per kind bytes, floor_us and stall_us (burst issue, stall) or counter (wait).
// `metadata` (an object, or null) goes to "otherData". Throws InputError for too few tracks.
nlohmann::json chrome_trace(const SimResult& r, const std::vector<TraceTrack>& tracks = {},
                            const nlohmann::json& metadata = nullptr);

// The trace of a moe bench per-tile dump (parsed JSON read from `origin`). Throws InputError naming
// `origin` and the field for anything the writer does not produce: wrong schema or version, a field
// missing or of the wrong type, stamps that are negative, not finite or out of order.
nlohmann::json chrome_trace_from_moe_timeline(const nlohmann::json& dump, std::string_view origin);

// Problems of a trace, one line each (empty: none): no traceEvents array, an event without ph, an
// unknown ph, an X without a name or with ts/dur/pid/tid missing or not numbers, a negative dur, a
// metadata event without its args, a thread used by a slice without thread_name metadata (or its
// process without process_name).
std::vector<std::string> check_chrome_trace(const nlohmann::json& trace);

}  // namespace xstage::sim
