// xstage trace convert: a measured timeline (moe bench --trace-dump) as Chrome trace-event JSON, the
// format `simulate --trace` writes, so measured and simulated timelines open side by side in Perfetto.
#include <memory>
#include <string>

#include "cli_common.hpp"
#include "registry.hpp"
#include "xstage/model/error.hpp"
#include "xstage/model/input_file.hpp"
#include "xstage/sim/trace_events.hpp"

namespace xstage::cli {
namespace {

struct ConvertOptions {
  std::string from;
  std::string input;
  std::string out;
  bool force = false;
};

void run_convert(const ConvertOptions& o) {
  check_output_path("--out", o.out, o.force, {o.input});
  const std::string text = read_input_file(o.input, "moe bench trace dump");
  if (text.size() >= 2 && static_cast<unsigned char>(text[0]) == 0x1f && static_cast<unsigned char>(text[1]) == 0x8b)
    throw InputError(bounded_text(o.input, 240) + ": gzip-compressed; decompress it first (gunzip -k " +
                     bounded_text(o.input, 240) + ")");
  const nlohmann::json dump = parse_json_input(text, o.input);
  const nlohmann::json trace = sim::chrome_trace_from_moe_timeline(dump, o.input);
  write_file_atomically(o.out, trace.dump() + "\n", o.force, {o.input}, "--out");
  std::size_t slices = 0, threads = 0;
  for (const auto& e : trace["traceEvents"]) {
    slices += e["ph"] == "X";
    threads += e["ph"] == "M" && e["name"] == "thread_name";
  }
  out_stream() << "wrote " << o.out << ": " << slices << " slices on " << threads
               << " threads (Chrome trace-event JSON; open in https://ui.perfetto.dev or chrome://tracing)\n";
}

void add_trace(CLI::App& root) {
  CLI::App* trace = root.add_subcommand("trace", "Timelines as Chrome trace-event JSON (Perfetto, chrome://tracing)");
  trace->require_subcommand(1);
  auto o = std::make_shared<ConvertOptions>();
  CLI::App* c = trace->add_subcommand(
      "convert", "Convert a measured per-tile timeline to Chrome trace-event JSON: one process per variant and rank, "
                 "one thread per CTA; operand waits, mainloops and epilogue store spans");
  c->add_option("--from", o->from, "Format of FILE: moe-bench (the JSON of moe bench --trace --trace-dump)")
      ->required()
      ->check(CLI::IsMember({"moe-bench"}));
  c->add_option("file", o->input, "Input file (uncompressed JSON)")->required();
  add_out_option(c, o->out, "Chrome trace-event JSON to write")->required();
  add_force_option(c, o->force);
  c->callback([o] { run_convert(*o); });
}

}  // namespace
}  // namespace xstage::cli

XSTAGE_SUBCOMMAND(cmd_trace, "trace", 38, add_trace);
