#include "xstage/sim/trace_events.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <utility>

#include "xstage/model/error.hpp"
#include "xstage/model/input_file.hpp"
#include "xstage/model/units.hpp"
#include "xstage/sim/moe_order_simulation.hpp"

namespace xstage::sim {

using nlohmann::json;

namespace {

constexpr const char* kMoeTimelineSchema = "xstage.moe_timeline";

// Collects slices and the names of the processes and threads they use; metadata first in the output.
class TraceBuilder {
 public:
  void name_process(int pid, const std::string& name) {
    if (processes_.emplace(pid, name).second) {
      meta_.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", pid}, {"tid", 0}, {"args", {{"name", name}}}});
      meta_.push_back({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", pid}, {"tid", 0},
                       {"args", {{"sort_index", pid}}}});
    }
  }
  void name_thread(int pid, int tid, const std::string& name) {
    if (threads_.emplace(std::pair{pid, tid}, name).second) {
      meta_.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", pid}, {"tid", tid}, {"args", {{"name", name}}}});
      meta_.push_back({{"ph", "M"}, {"name", "thread_sort_index"}, {"pid", pid}, {"tid", tid},
                       {"args", {{"sort_index", tid}}}});
    }
  }
  // An "X" slice from ts to ts + dur (µs).
  void slice(const std::string& name, const char* cat, int pid, int tid, double ts_us, double dur_us, json args) {
    slices_.push_back({{"ph", "X"}, {"name", name}, {"cat", cat}, {"pid", pid}, {"tid", tid}, {"ts", ts_us},
                       {"dur", dur_us}, {"args", std::move(args)}});
  }
  // A "C" counter sample at ts (µs): the process's counter track `name`, one value per key of `values`.
  void counter(const char* name, int pid, double ts_us, json values) {
    slices_.push_back(
        {{"ph", "C"}, {"name", name}, {"pid", pid}, {"tid", 0}, {"ts", ts_us}, {"args", std::move(values)}});
  }
  json take(const json& metadata) {
    json events = std::move(meta_);
    for (auto& e : slices_) events.push_back(std::move(e));
    json out = {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ns"}};
    if (!metadata.is_null()) out["otherData"] = metadata;
    return out;
  }

 private:
  std::map<int, std::string> processes_;
  std::map<std::pair<int, int>, std::string> threads_;
  json meta_ = json::array();
  std::vector<json> slices_;
};

// The slice of a simulated span: its name from the kind and the step's role, its category.
std::pair<TraceSlice, const char*> simulated_slice(const TimelineSpan& s) {
  switch (s.kind) {
    case TimelineSpan::Kind::kCompute:
      if (s.role == StepRole::kStaging) return {TraceSlice::kStaging, "staging"};
      return {TraceSlice::kMainloop, "mainloop"};
    case TimelineSpan::Kind::kIssue: return {TraceSlice::kEpilogueStore, "store"};
    case TimelineSpan::Kind::kWait:
      if (s.role == StepRole::kSlotWait) return {TraceSlice::kSlotWait, "wait"};
      if (s.role == StepRole::kAccumulatorWait) return {TraceSlice::kAccumulatorWait, "wait"};
      return {TraceSlice::kOperandWait, "wait"};
    case TimelineSpan::Kind::kCompletion: break;
  }
  return {TraceSlice::kCompletionWait, "completion"};
}

}  // namespace

const char* trace_slice_name(TraceSlice slice) {
  switch (slice) {
    case TraceSlice::kMainloop: return "mainloop";
    case TraceSlice::kOperandWait: return "operand wait";
    case TraceSlice::kEpilogueStore: return "epilogue store";
    case TraceSlice::kStall: return "stall";
    case TraceSlice::kStaging: return "staging";
    case TraceSlice::kSlotWait: return "slot wait";
    case TraceSlice::kAccumulatorWait: return "accumulator wait";
    case TraceSlice::kCompletionWait: break;
  }
  return "completion wait";
}

std::string trace_slice_name(TraceSlice slice, std::string_view tile_kind) {
  std::string name = trace_slice_name(slice);
  if (slice == TraceSlice::kMainloop && !tile_kind.empty()) name.append(" ").append(tile_kind);
  return name;
}

json chrome_trace(const SimResult& r, const std::vector<TraceTrack>& tracks, const json& metadata) {
  using units::s_to_us;
  if (!metadata.is_null() && !metadata.is_object())
    throw InputError("chrome_trace: metadata must be a JSON object or null, got " + bounded_json(metadata));
  int producers = 0;
  for (const TimelineSpan& s : r.timeline) producers = std::max(producers, s.producer + 1);
  if (!tracks.empty() && static_cast<int>(tracks.size()) < producers)
    throw InputError("chrome_trace: " + std::to_string(tracks.size()) + " tracks for " + std::to_string(producers) +
                     " producers (one track per producer index)");
  const auto track = [&](int producer) {
    if (!tracks.empty()) return tracks[static_cast<std::size_t>(producer)];
    return TraceTrack{0, "simulated", producer, "producer " + std::to_string(producer)};
  };
  TraceBuilder b;
  for (int p = 0; p < producers; ++p) {
    const TraceTrack t = track(p);
    b.name_process(t.pid, t.process);
    b.name_thread(t.pid, t.tid, t.thread);
  }
  const auto tile_kind = [&](int tag) -> std::string_view {
    if (tag < 0 || tag >= static_cast<int>(r.tile_kinds.size())) return {};
    return r.tile_kinds[static_cast<std::size_t>(tag)];
  };
  for (const TimelineSpan& s : r.timeline) {
    const TraceTrack t = track(s.producer);
    const double ts = s_to_us(s.start_s);
    const double dur = s_to_us(s.end_s - s.start_s);
    const std::string_view kind = tile_kind(s.tag);
    json args = {{"producer", s.producer}, {"step", s.step}};
    if (!kind.empty()) args["tile_kind"] = kind;
    if (s.tile >= 0) args["tile"] = s.tile;
    const auto [slice, cat] = simulated_slice(s);
    if (s.kind == TimelineSpan::Kind::kIssue) {
      // The same arithmetic as BurstRecord::stall_s(), so a slice exists exactly for a burst with stall > 0.
      const double stall_s = (s.end_s - s.start_s) - s.issue_floor_s;
      args["bytes"] = s.bytes;
      args["floor_us"] = s_to_us(s.issue_floor_s);
      args["stall_us"] = s_to_us(stall_s);
      b.slice(trace_slice_name(slice), cat, t.pid, t.tid, ts, dur, args);
      if (stall_s > 0)
        b.slice(trace_slice_name(TraceSlice::kStall), "stall", t.pid, t.tid, s_to_us(s.start_s + s.issue_floor_s),
                s_to_us(stall_s), std::move(args));
      continue;
    }
    if (s.kind == TimelineSpan::Kind::kWait) args["counter"] = s.counter;
    b.slice(trace_slice_name(slice, kind), cat, t.pid, t.tid, ts, dur, std::move(args));
  }
  // The path's outstanding bytes, on the first producer's process (one path per simulation).
  if (producers > 0)
    for (const SimResult::OccupancySample& o : r.occupancy)
      b.counter(kTracePathCounter, track(0).pid, s_to_us(o.t_s), {{kTraceOutstandingBytes, o.outstanding_bytes}});
  return b.take(metadata);
}

// --- measured: moe bench per-tile dump ------------------------------------------------------------

namespace {

const json& member(const json& obj, const char* key, std::string_view origin, const std::string& where) {
  const auto it = obj.find(key);
  if (it == obj.end()) input_fail(origin, where.empty() ? key : where + "." + key, "missing");
  return *it;
}

const json& object_at(const json& v, std::string_view origin, const std::string& where) {
  if (!v.is_object()) input_fail(origin, where, "must be a JSON object, got " + bounded_json(v));
  return v;
}

const json& array_at(const json& v, std::string_view origin, const std::string& where) {
  if (!v.is_array()) input_fail(origin, where, "must be an array, got " + bounded_json(v));
  return v;
}

std::string optional_string(const json& obj, const char* key, std::string_view origin, const std::string& where) {
  const auto it = obj.find(key);
  if (it == obj.end()) return "";
  if (!it->is_string()) input_fail(origin, where + "." + key, "must be a string, got " + bounded_json(*it));
  return it->get<std::string>();
}

// Stamps: µs from the rank's first tile entry, up to 1e7 µs (10 s; a traced layer takes milliseconds).
constexpr Range kStampUs{0.0, 1e7, false, false, "us"};
constexpr IntRange kTileIndex{0, 1 << 30};
constexpr IntRange kCtaIndex{0, 1'000'000};
constexpr IntRange kRanks{1, 1024};

struct Tile {
  int stage, row, n;
  double entry, ready, store_begin, store_end;
};

Tile parse_tile(const json& rec, std::string_view origin, const std::string& where) {
  array_at(rec, origin, where);
  if (rec.size() != 7)
    input_fail(origin, where,
               "must be [stage, row, n, entry, operands ready, stores begin, stores issued] (7 numbers), got " +
                   bounded_json(rec));
  const auto at = [&](int i) { return where + "[" + std::to_string(i) + "]"; };
  Tile t{};
  t.stage = static_cast<int>(json_integer_in(rec[0], origin, at(0) + " (stage)", IntRange{1, 2}));
  t.row = static_cast<int>(json_integer_in(rec[1], origin, at(1) + " (row)", kTileIndex));
  t.n = static_cast<int>(json_integer_in(rec[2], origin, at(2) + " (n)", kTileIndex));
  t.entry = json_number_in(rec[3], origin, at(3) + " (entry)", kStampUs);
  t.ready = json_number_in(rec[4], origin, at(4) + " (operands ready)", kStampUs);
  t.store_begin = json_number_in(rec[5], origin, at(5) + " (stores begin)", kStampUs);
  t.store_end = json_number_in(rec[6], origin, at(6) + " (stores issued)", kStampUs);
  const auto order = [&](int i, double later, const char* later_name, double earlier, const char* earlier_name) {
    if (later < earlier)
      input_fail(origin, at(i) + " (" + later_name + ")",
                 "must not be before " + std::string(earlier_name) + " " + bounded_json(earlier) + " us, got " +
                     bounded_json(later));
  };
  order(4, t.ready, "operands ready", t.entry, "entry");
  if (t.stage == 2) {
    order(5, t.store_begin, "stores begin", t.ready, "operands ready");
    order(6, t.store_end, "stores issued", t.store_begin, "stores begin");
  }
  return t;
}

}  // namespace

json chrome_trace_from_moe_timeline(const json& dump, std::string_view origin) {
  object_at(dump, origin, "(top level)");
  const json& schema = member(dump, "schema", origin, "");
  if (!schema.is_string() || schema.get<std::string>() != kMoeTimelineSchema)
    input_fail(origin, "schema",
               "unknown schema " + bounded_json(schema) + " (expected \"" + kMoeTimelineSchema +
                   "\", written by moe bench --trace-dump)");
  json_integer_in(member(dump, "version", origin, ""), origin, "version", IntRange{1, 1});
  const int ranks = static_cast<int>(json_integer_in(member(dump, "ranks", origin, ""), origin, "ranks", kRanks));
  const json& timelines = array_at(member(dump, "timelines", origin, ""), origin, "timelines");
  if (timelines.empty()) input_fail(origin, "timelines", "must be a non-empty array, got []");

  json meta = {{"source", std::string(origin)},
               {"source_schema", kMoeTimelineSchema},
               {"time_origin", "each rank's first tile entry (ranks are not aligned)"},
               {"process_id", "variant * ranks + rank"}};
  // The run's description, copied to the trace's metadata: the grid checked as every loader checks it.
  if (const auto it = dump.find("fused_grid"); it != dump.end())
    json_integer_in(*it, origin, "fused_grid", ranges::kFusedGrid);
  for (const char* key : {"shape", "tokens_per_rank", "routing", "fused_grid"})
    if (const auto it = dump.find(key); it != dump.end() && !it->is_structured()) meta[key] = *it;

  TraceBuilder b;
  for (std::size_t v = 0; v < timelines.size(); ++v) {
    const std::string tw = "timelines[" + std::to_string(v) + "]";
    const json& tl = object_at(timelines[v], origin, tw);
    const std::string schedule = optional_string(tl, "schedule", origin, tw);
    const std::string stores = optional_string(tl, "combine_stores", origin, tw);
    std::string variant = schedule;
    if (!stores.empty()) variant += (variant.empty() ? "" : ", ") + stores;
    if (variant.empty()) variant = "variant " + std::to_string(v);
    const json& rank_list = array_at(member(tl, "ranks", origin, tw), origin, tw + ".ranks");
    std::set<int> seen;
    for (std::size_t ri = 0; ri < rank_list.size(); ++ri) {
      const std::string rw = tw + ".ranks[" + std::to_string(ri) + "]";
      const json& rk = object_at(rank_list[ri], origin, rw);
      const int rank = static_cast<int>(
          json_integer_in(member(rk, "rank", origin, rw), origin, rw + ".rank", IntRange{0, ranks - 1}));
      if (!seen.insert(rank).second) input_fail(origin, rw + ".rank", "rank " + std::to_string(rank) + " appears twice");
      const int pid = static_cast<int>(v) * ranks + rank;
      b.name_process(pid, variant + ": rank " + std::to_string(rank));
      const json& ctas = object_at(member(rk, "ctas", origin, rw), origin, rw + ".ctas");
      for (const auto& [key, recs] : ctas.items()) {
        const std::string cw = rw + ".ctas." + key;
        const json key_number = json::parse(key, nullptr, false);
        if (key_number.is_discarded() || key.empty() || key.find_first_not_of("0123456789") != std::string::npos)
          input_fail(origin, cw, "CTA keys must be decimal CTA indices, got " + bounded_json(key));
        const int cta = static_cast<int>(json_integer_in(key_number, origin, cw, kCtaIndex));
        b.name_thread(pid, cta, "CTA " + std::to_string(cta));
        array_at(recs, origin, cw);
        double prev_end = 0;
        for (std::size_t i = 0; i < recs.size(); ++i) {
          const std::string w = cw + "[" + std::to_string(i) + "]";
          const Tile t = parse_tile(recs[i], origin, w);
          if (i > 0 && t.entry < prev_end)
            input_fail(origin, w + "[3] (entry)",
                       "must not be before the previous tile's end " + bounded_json(prev_end) + " us, got " +
                           bounded_json(t.entry));
          const char* kind = moe_stage_name(t.stage);
          const json args = {{"stage", t.stage}, {"tile_kind", kind}, {"row", t.row}, {"n", t.n}, {"tile", i}};
          const std::string mainloop = trace_slice_name(TraceSlice::kMainloop, kind);
          if (t.ready > t.entry)
            b.slice(trace_slice_name(TraceSlice::kOperandWait), "wait", pid, cta, t.entry, t.ready - t.entry, args);
          if (t.stage == 2) {
            if (t.store_begin > t.ready)
              b.slice(mainloop, "mainloop", pid, cta, t.ready, t.store_begin - t.ready, args);
            if (t.store_end > t.store_begin)
              b.slice(trace_slice_name(TraceSlice::kEpilogueStore), "store", pid, cta, t.store_begin,
                      t.store_end - t.store_begin, args);
            prev_end = t.store_end;
          } else {
            // A Linear-1 tile's work ends where the CTA's next tile enters (no stamp of its own).
            if (i + 1 < recs.size()) {
              const json& next = recs[i + 1];
              if (next.is_array() && next.size() == 7) {
                const double end = json_number_in(next[3], origin, cw + "[" + std::to_string(i + 1) + "][3] (entry)", kStampUs);
                if (end > t.ready) b.slice(mainloop, "mainloop", pid, cta, t.ready, end - t.ready, args);
              }
            }
            prev_end = t.ready;
          }
        }
      }
    }
  }
  return b.take(meta);
}

// --- validator ------------------------------------------------------------------------------------

std::vector<std::string> check_chrome_trace(const json& trace) {
  std::vector<std::string> problems;
  if (!trace.is_object()) return {"trace is not a JSON object"};
  const auto it = trace.find("traceEvents");
  if (it == trace.end() || !it->is_array()) return {"no traceEvents array"};
  std::set<int> named_processes;
  std::set<std::pair<int, int>> named_threads;
  std::set<std::pair<int, int>> used_threads;
  std::set<int> counter_processes;
  const auto integer = [](const json& e, const char* key) { return e.contains(key) && e[key].is_number_integer(); };
  const auto finite = [](const json& e, const char* key) {
    return e.contains(key) && e[key].is_number() && std::isfinite(e[key].get<double>());
  };
  const std::set<std::string> known = {"X", "M", "C", "B", "E", "i", "I"};
  const std::set<std::string> metadata_names = {"process_name", "process_sort_index", "thread_name",
                                                "thread_sort_index", "process_labels"};
  for (std::size_t i = 0; i < it->size(); ++i) {
    const json& e = (*it)[i];
    const std::string at = "event " + std::to_string(i);
    if (!e.is_object()) {
      problems.push_back(at + ": not an object");
      continue;
    }
    if (!e.contains("ph") || !e["ph"].is_string()) {
      problems.push_back(at + ": no ph");
      continue;
    }
    const std::string ph = e["ph"].get<std::string>();
    if (!known.count(ph)) {
      problems.push_back(at + ": unknown ph \"" + bounded_text(ph) + "\"");
      continue;
    }
    if (!integer(e, "pid")) problems.push_back(at + " (" + ph + "): pid missing or not an integer");
    if (!integer(e, "tid")) problems.push_back(at + " (" + ph + "): tid missing or not an integer");
    const bool has_ids = integer(e, "pid") && integer(e, "tid");
    const bool named = e.contains("name") && e["name"].is_string() && !e["name"].get<std::string>().empty();
    if (ph == "M") {
      if (!named || !metadata_names.count(e["name"].get<std::string>())) {
        problems.push_back(at + ": metadata event with an unknown name");
        continue;
      }
      const std::string name = e["name"].get<std::string>();
      const bool is_name = name == "process_name" || name == "thread_name";
      const char* arg = is_name ? "name" : name == "process_labels" ? "labels" : "sort_index";
      if (!e.contains("args") || !e["args"].is_object() || !e["args"].contains(arg) ||
          (is_name && !e["args"][arg].is_string())) {
        problems.push_back(at + ": " + name + " without args." + arg);
        continue;
      }
      if (has_ids && name == "process_name") named_processes.insert(e["pid"].get<int>());
      if (has_ids && name == "thread_name") named_threads.insert({e["pid"].get<int>(), e["tid"].get<int>()});
      continue;
    }
    if (!named) problems.push_back(at + " (" + ph + "): no name");
    if (!finite(e, "ts")) problems.push_back(at + " (" + ph + "): ts missing or not a finite number");
    if (ph == "X") {
      if (!finite(e, "dur")) problems.push_back(at + " (X): dur missing or not a finite number");
      else if (e["dur"].get<double>() < 0) problems.push_back(at + " (X): negative dur " + e["dur"].dump());
    }
    if (ph == "C") {
      if (!e.contains("args") || !e["args"].is_object() || e["args"].empty()) {
        problems.push_back(at + " (C): no args (the counter's values)");
      } else {
        for (const auto& [k, v] : e["args"].items())
          if (!v.is_number() || !std::isfinite(v.get<double>()))
            problems.push_back(at + " (C): value " + bounded_text(k) + " is not a finite number");
      }
      if (integer(e, "pid")) counter_processes.insert(e["pid"].get<int>());
      continue;  // a counter is a process track: no thread name needed
    }
    if (has_ids) used_threads.insert({e["pid"].get<int>(), e["tid"].get<int>()});
  }
  std::set<int> used_processes = counter_processes;
  for (const auto& [pid, tid] : used_threads) {
    used_processes.insert(pid);
    if (!named_threads.count({pid, tid}))
      problems.push_back("thread pid " + std::to_string(pid) + " tid " + std::to_string(tid) + " has no thread_name metadata");
  }
  for (int pid : used_processes)
    if (!named_processes.count(pid)) problems.push_back("process pid " + std::to_string(pid) + " has no process_name metadata");
  return problems;
}

}  // namespace xstage::sim
