// `xstage attn ulysses`'s measurement on a team of local GPUs (the CLI parses and checks the options,
// stamps, writes and prints the result).
#pragma once

#include <array>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "xstage/model/platform.hpp"
#include "xstage/testing/ulysses_layer.hpp"

namespace xstage::testing {

struct UlyssesBenchSettings {
  int seq_image = 0, text = 0;           // as given (cfg.seq is their sum)
  std::string store_path, tile_order;    // the option values, for the record
  int warmup = 3, iters = 10, passes = 2;
  bool graph = false;                    // each pass captured into a CUDA graph and replayed
  long long seed = -1;                   // -1: a fresh seed
};

struct UlyssesBenchRun {
  nlohmann::json result;                         // xstage.ulysses/1, unstamped
  std::vector<std::array<std::string, 3>> rows;  // variant, sender-side median us, iteration median us
  bool bit_identical = false;                    // every checked variant equal to serial-ours
};

// Fresh inputs, the bit-identity check, then the variants timed interleaved (interleaved_timing.hpp).
UlyssesBenchRun run_ulysses_bench(const std::vector<int>& gpus, const attn::UlyssesConfig& cfg,
                                  const std::vector<attn::UlyssesVariant>& variants, const UlyssesBenchSettings& s,
                                  const model::Platform& platform);

}  // namespace xstage::testing
