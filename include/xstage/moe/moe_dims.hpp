// Dimensions and precision of the expert-parallel MoE layer: what every MoE layer, its launch path and
// its CPU reference (xstage/testing/moe_reference.hpp) agree on.
#pragma once

#include <string>

#include "xstage/model/error.hpp"

namespace xstage::moe {

enum class MoePrecision { kBf16, kFp8 };
inline const char* to_string(MoePrecision p) { return p == MoePrecision::kFp8 ? "fp8" : "bf16"; }

struct MoeDims {
  int ranks = 1;
  int tokens = 0;   // per rank
  int hidden = 0;
  int h_inter = 0;
  int experts = 0;  // global; a multiple of ranks
  int top_k = 0;
  int experts_per_rank() const { return experts / ranks; }
};

// Throws xstage::InputError naming the offending field.
inline void validate_dims(const MoeDims& d) {
  auto positive = [](const char* name, long long v) {
    if (v <= 0) throw InputError(std::string(name) + ": must be > 0, got " + std::to_string(v));
  };
  positive("ranks", d.ranks);
  positive("tokens", d.tokens);
  positive("hidden", d.hidden);
  positive("h_inter", d.h_inter);
  positive("experts", d.experts);
  positive("top_k", d.top_k);
  if (d.experts % d.ranks != 0) {
    throw InputError("experts: " + std::to_string(d.experts) + " is not a multiple of the rank count " +
                     std::to_string(d.ranks));
  }
  if (d.top_k > d.experts) {
    throw InputError("top_k: " + std::to_string(d.top_k) + " exceeds the expert count " + std::to_string(d.experts));
  }
}

}  // namespace xstage::moe
