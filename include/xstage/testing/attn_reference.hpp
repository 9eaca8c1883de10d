// Host reference of attention forward for checking the kernel: exact (fp64) and a same-precision
// emulation (bf16 scores, probabilities and output) that gives the error a bf16 implementation reaches.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "xstage/attn/forward.hpp"

namespace xstage::attn {

float bf16_to_float(uint16_t bits);
uint16_t float_to_bf16(float f);  // round to nearest even; NaN stays NaN

struct AttnRow {
  int batch;
  int head;
  int row;  // query index
};

enum class AttnRefPrecision {
  kExact,  // fp64 scores, softmax and accumulation
  kBf16,   // scores and probabilities rounded to bf16, fp32 accumulation, output rounded to bf16
};

// Reference output (head_dim floats per row, in order) and log-sum-exp of the given rows. Inputs are bf16
// bit patterns laid out with the problem's strides.
void attn_reference_rows(const AttnForwardProblem& p, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                         const std::vector<AttnRow>& rows, AttnRefPrecision precision, std::vector<float>& out,
                         std::vector<float>& lse);

// Gathers the same rows from an output tensor (bf16 bits, problem's o strides) as floats.
std::vector<float> attn_gather_rows(const AttnForwardProblem& p, const uint16_t* o, const std::vector<AttnRow>& rows);

struct AttnErrorStats {
  double rel_l2 = 0;        // ||x - ref|| / ||ref||
  double rel_l1 = 0;        // sum |x - ref| / sum |ref|
  double cosine = 1;        // x . ref / (||x|| ||ref||)
  double max_abs = 0;       // max |x - ref|
  size_t non_finite = 0;    // NaN or Inf in x (unwritten elements are poisoned with NaN)
};
AttnErrorStats attn_compare(const std::vector<float>& x, const std::vector<float>& ref);

// Rows spread over all (batch, head) pairs and all query tiles, including the first and last rows.
std::vector<AttnRow> attn_sample_rows(const AttnForwardProblem& p, size_t count, uint64_t seed);
std::vector<AttnRow> attn_all_rows(const AttnForwardProblem& p);

// Counts NaN/Inf in the valid elements of an output tensor (bf16 bits, problem's o strides).
size_t attn_count_non_finite(const AttnForwardProblem& p, const uint16_t* o);

}  // namespace xstage::attn
