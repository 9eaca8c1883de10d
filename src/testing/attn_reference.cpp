// Host reference of attention forward (see xstage/testing/attn_reference.hpp).
#include "xstage/testing/attn_reference.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

namespace xstage::attn {

float bf16_to_float(uint16_t bits) {
  const uint32_t u = uint32_t(bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

uint16_t float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

namespace {
float round_bf16(double x) { return bf16_to_float(float_to_bf16(float(x))); }
}  // namespace

void attn_reference_rows(const AttnForwardProblem& p, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                         const std::vector<AttnRow>& rows, AttnRefPrecision precision, std::vector<float>& out,
                         std::vector<float>& lse) {
  const int d = p.head_dim;
  const double scale = p.softmax_scale > 0.f ? p.softmax_scale : 1.0 / std::sqrt(double(d));
  const bool bf16 = precision == AttnRefPrecision::kBf16;
  out.assign(rows.size() * size_t(d), 0.f);
  lse.assign(rows.size(), 0.f);
  std::vector<double> qrow(d), s(p.seq_k), acc(d);
  std::vector<float> vcol;
  for (size_t r = 0; r < rows.size(); ++r) {
    const AttnRow& row = rows[r];
    const uint16_t* qp = q + row.batch * p.q_stride_batch + int64_t(row.row) * p.q_stride_seq + row.head * p.q_stride_head;
    for (int c = 0; c < d; ++c) qrow[c] = bf16_to_float(qp[c]);
    double m = -std::numeric_limits<double>::infinity();
    for (int j = 0; j < p.seq_k; ++j) {
      const uint16_t* kp = k + row.batch * p.k_stride_batch + int64_t(j) * p.k_stride_seq + row.head * p.k_stride_head;
      double dot = 0;
      for (int c = 0; c < d; ++c) dot += qrow[c] * double(bf16_to_float(kp[c]));
      s[j] = bf16 ? double(round_bf16(dot)) * scale : dot * scale;
      m = std::max(m, s[j]);
    }
    double sum = 0;
    for (int j = 0; j < p.seq_k; ++j) {
      s[j] = std::exp(s[j] - m);
      sum += s[j];
    }
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int j = 0; j < p.seq_k; ++j) {
      // The bf16 emulation normalizes before rounding P, as a bf16 softmax followed by a bf16 matmul does.
      const double pj = bf16 ? double(round_bf16(s[j] / sum)) : s[j];
      const uint16_t* vp = v + row.batch * p.v_stride_batch + int64_t(j) * p.v_stride_seq + row.head * p.v_stride_head;
      for (int c = 0; c < d; ++c) acc[c] += pj * double(bf16_to_float(vp[c]));
    }
    for (int c = 0; c < d; ++c) {
      const double o = bf16 ? acc[c] : acc[c] / sum;
      out[r * d + c] = bf16 ? round_bf16(o) : float(o);
    }
    lse[r] = float(m + std::log(sum));
  }
}

std::vector<float> attn_gather_rows(const AttnForwardProblem& p, const uint16_t* o, const std::vector<AttnRow>& rows) {
  std::vector<float> out(rows.size() * size_t(p.head_dim));
  for (size_t r = 0; r < rows.size(); ++r) {
    const AttnRow& row = rows[r];
    const uint16_t* op = o + row.batch * p.o_stride_batch + int64_t(row.row) * p.o_stride_seq + row.head * p.o_stride_head;
    for (int c = 0; c < p.head_dim; ++c) out[r * p.head_dim + c] = bf16_to_float(op[c]);
  }
  return out;
}

AttnErrorStats attn_compare(const std::vector<float>& x, const std::vector<float>& ref) {
  AttnErrorStats st;
  double num = 0, den = 0, l1 = 0, l1_ref = 0, dot = 0, xx = 0;
  for (size_t i = 0; i < x.size() && i < ref.size(); ++i) {
    if (!std::isfinite(x[i])) {
      ++st.non_finite;
      continue;
    }
    const double diff = double(x[i]) - double(ref[i]);
    num += diff * diff;
    den += double(ref[i]) * double(ref[i]);
    l1 += std::fabs(diff);
    l1_ref += std::fabs(double(ref[i]));
    dot += double(x[i]) * double(ref[i]);
    xx += double(x[i]) * double(x[i]);
    st.max_abs = std::max(st.max_abs, std::fabs(diff));
  }
  st.rel_l2 = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  st.rel_l1 = l1_ref > 0 ? l1 / l1_ref : l1;
  st.cosine = xx > 0 && den > 0 ? dot / std::sqrt(xx * den) : (xx == den ? 1.0 : 0.0);
  if (st.non_finite > 0) {
    st.rel_l2 = st.rel_l1 = std::numeric_limits<double>::infinity();
    st.cosine = 0;
  }
  return st;
}

std::vector<AttnRow> attn_sample_rows(const AttnForwardProblem& p, size_t count, uint64_t seed) {
  std::vector<AttnRow> rows;
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> b(0, p.batch - 1), h(0, p.heads - 1), r(0, p.seq_q - 1);
  // Always include both ends of the sequence (first tile and the ragged last tile).
  rows.push_back({0, 0, 0});
  rows.push_back({p.batch - 1, p.heads - 1, p.seq_q - 1});
  while (rows.size() < count) rows.push_back({b(rng), h(rng), r(rng)});
  return rows;
}

std::vector<AttnRow> attn_all_rows(const AttnForwardProblem& p) {
  std::vector<AttnRow> rows;
  rows.reserve(size_t(p.batch) * p.heads * p.seq_q);
  for (int bi = 0; bi < p.batch; ++bi)
    for (int hi = 0; hi < p.heads; ++hi)
      for (int ri = 0; ri < p.seq_q; ++ri) rows.push_back({bi, hi, ri});
  return rows;
}

size_t attn_count_non_finite(const AttnForwardProblem& p, const uint16_t* o) {
  size_t bad = 0;
  for (int bi = 0; bi < p.batch; ++bi)
    for (int ri = 0; ri < p.seq_q; ++ri)
      for (int hi = 0; hi < p.heads; ++hi) {
        const uint16_t* op = o + bi * p.o_stride_batch + int64_t(ri) * p.o_stride_seq + hi * p.o_stride_head;
        for (int c = 0; c < p.head_dim; ++c) bad += (op[c] & 0x7f80u) == 0x7f80u;  // exponent all ones
      }
  return bad;
}

}  // namespace xstage::attn
