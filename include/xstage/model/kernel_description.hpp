// A kernel description (schema xstage.kernel/1, docs/kernel_description.md): the kernel a user asks the
// design test about, written once as a file or as the flags of `xstage plan moe` (the flags are turned into
// the same JSON object and go through the same parser). The built-in MoE shapes and the paper's kernels are
// files of this schema (kernels/moe/), compiled into the library.
#pragma once

#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace xstage::model {

inline constexpr const char* kKernelSchema = "xstage.kernel/1";

// One expert-parallel MoE layer and how its fused kernel issues the Combine.
struct MoeKernel {
  std::string name = "custom";
  std::string description, source;   // what it is; where its dimensions come from
  std::vector<std::string> assumptions;
  // Dimensions (required).
  int hidden = 0, h_inter = 0, experts = 0, top_k = 0;
  // Launch (defaults: two ranks, 8,192 tokens per rank, bf16, balanced routing, 128 x 128 bf16 tiles).
  int ranks = 2;
  long long tokens = 8192;         // per rank
  std::string precision = "bf16";  // "bf16" or "fp8": which of the platform's per-SM GEMM rates
  std::string routing = "balanced";  // "balanced", "skewed" (Zipf, zipf_s) or a routing file
  double zipf_s = 1.2;
  int block_m = 128, block_n = 128, out_bytes = 2;
  // Measured full-tile mainloops (0: estimated from the GEMM rate); the rate itself (0: the platform's).
  double t_l1_us = 0, t_l2_us = 0;
  std::string mainloop_source;
  double sm_tflops = 0;
  // Roles. combine "piggyback": the producer issues a Linear-2 tile's Combine in chunks at the k-steps of the
  // tiles that follow (xstage's fused kernel, its default); "epilogue": the producer stores the tile in one
  // burst after its mainloop (xstage's --combine epilogue); "epilogue_issuer": a separate epilogue issuer stages
  // each tile and stores a Linear-2 tile in one burst while the producer runs ahead by at most cover_slots − 1
  // tiles (MegaMoE's double-buffered staging: cover_slots 2, eq. 15's cover window).
  std::string combine = "piggyback";
  double staging_us = 0;  // per tile, before its Combine stores (every issue mode)
  int cover_slots = 2;    // epilogue_issuer: accumulator slots shared by the producer and the epilogue issuer
  // Tile order parameters (0: the fused layer's defaults).
  int lead_rows = 0, experts_per_wave = 0;

  bool mainloops_given() const { return t_l1_us > 0 && t_l2_us > 0; }
};

// A burst–gap kernel (kind "burst_gap"): `producers` CTAs each run the same tiles in order, `repeat` times.
// A tile kind has a mainloop, `bytes` of output per tile of which `remote_share` is stored to other GPUs, and
// `count` consecutive tiles of it. The roles (`issue`): "epilogue" — the producer stages the tile and stores its
// remote bytes in one burst after its mainloop; "piggyback" — they leave in `chunks` chunks at the k-steps of
// the following tile's mainloop (`k_steps` per tile kind, default `chunks`); "epilogue_issuer" — a separate
// epilogue issuer stages each tile and stores it in one burst while the producer runs ahead by at most
// cover_slots − 1 tiles (eq. 15's cover window with 2 slots).
struct BurstGapTile {
  std::string name;
  double mainloop_us = 0;
  double bytes = 0;            // output bytes of one tile (one producer)
  double remote_share = 1.0;   // the part of them stored to other GPUs, in [0, 1]
  long long count = 1;         // consecutive tiles of this kind
  int k_steps = 0;             // 0: the kernel's chunks (piggyback only)
  double remote_bytes() const { return bytes * remote_share; }
};
struct BurstGapKernel {
  std::string name = "custom";
  std::string description, source;
  std::vector<std::string> assumptions;
  int producers = 0;  // 0: the platform's largest measured producer count
  std::string issue = "epilogue";  // "epilogue", "piggyback" or "epilogue_issuer"
  int chunks = 8;                  // piggyback: chunks per tile
  int cover_slots = 2;             // epilogue_issuer: accumulator slots
  double staging_us = 0;           // per storing tile (per tile with an epilogue issuer), before its stores
  long long repeat = 1;            // the tile list, this many times per producer
  std::vector<BurstGapTile> tiles;
  long long tiles_per_producer() const;  // repeat × Σ count
};

// The kind of a description ("moe" or "burst_gap"), its schema checked; an InputError names `origin`.
std::string kernel_kind(const nlohmann::json& j, std::string_view origin);
// The field names each kind accepts (the parser's key lists: one source for the flags of `plan moe`).
std::span<const char* const> moe_kernel_fields();
std::span<const char* const> burst_gap_kernel_fields();
std::span<const char* const> burst_gap_tile_fields();

// Parses and validates a kind "burst_gap" description; an InputError names `origin` and the field. The tiles
// per producer (repeat × Σ count) are bounded by `max_tiles_per_producer`.
BurstGapKernel burst_gap_kernel_from_json(const nlohmann::json& j, std::string_view origin,
                                          long long max_tiles_per_producer = 10'000'000);
nlohmann::json to_json(const BurstGapKernel& k);

// Parses and validates; an InputError names `origin` and the field. `base_dir`: where a relative routing file
// of a description file is found (empty: as given).
MoeKernel moe_kernel_from_json(const nlohmann::json& j, std::string_view origin, const std::string& base_dir = "");
nlohmann::json to_json(const MoeKernel& k);  // with every field, so it reads back the same

// A built-in description's JSON by name (nullptr: none), and every built-in (the plan's shapes first, in the
// order of `xstage plan`, then the paper's kernels).
const nlohmann::json* builtin_kernel_json(std::string_view name);
std::vector<std::string> builtin_kernel_names();
// The built-ins of one folder of kernels/moe/: "builtin" (the shapes `xstage plan` audits) or "paper".
std::vector<std::string> builtin_kernel_names_in(std::string_view group);
// A built-in name or a description file's path: the description's JSON object and where it came from
// (the JSON, not yet parsed, so that flags can be laid over it before one parse). `option` names the argument
// that gave the name in the refusal of an unknown one ("--shape" for plan moe --shape).
struct KernelSource {
  nlohmann::json json;
  std::string origin;    // "built-in NAME" or the path
  std::string base_dir;  // the file's folder, for a relative routing file
};
KernelSource kernel_source(const std::string& name_or_path, std::string_view option = "--kernel");

namespace detail {
// One compiled-in description file (kernels/moe/GROUP/NAME.json); the table is generated at configure time
// (cmake/XstageDeps.cmake).
struct EmbeddedKernel {
  const char* group;
  const char* path;
  const char* text;
};
std::span<const EmbeddedKernel> embedded_kernels();
}  // namespace detail

}  // namespace xstage::model
