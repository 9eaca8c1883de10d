#include "moe_rank_buffers.hpp"

#include <algorithm>
#include <string>

#include "moe_baseline_kernels.hpp"
#include "xstage/gpu/check.hpp"
#include "xstage/model/error.hpp"
#include "xstage/moe/moe_numerics.hpp"

namespace xstage::moe {

namespace {

// Seed of one random input buffer (x of a rank, W1/W2 of an expert) from the run seed.
std::uint64_t moe_input_seed(std::uint64_t a, std::uint64_t b) {
  std::uint64_t z = a * 0x9e3779b97f4a7c15ull + b + 0x632be59bd9b4e019ull;
  z = (z ^ (z >> 31)) * 0xbf58476d1ce4e5b9ull;
  return z ^ (z >> 29);
}

std::vector<std::uint16_t> to_bf16(const float* x, size_t n) {
  std::vector<std::uint16_t> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = float_to_bf16_bits(x[i]);
  return b;
}

std::vector<float> download_bf16(int device, const std::uint16_t* src, size_t n) {
  std::vector<std::uint16_t> b(n);
  XSTAGE_CUDA_CHECK(cudaSetDevice(device));
  XSTAGE_CUDA_CHECK(cudaMemcpy(b.data(), src, n * 2, cudaMemcpyDeviceToHost));
  std::vector<float> f(n);
  for (size_t i = 0; i < n; ++i) f[i] = bf16_bits_to_float(b[i]);
  return f;
}

size_t w1_elems(const MoeDims& d) { return size_t(2) * d.h_inter * d.hidden; }  // one expert
size_t w2_elems(const MoeDims& d) { return size_t(d.hidden) * d.h_inter; }

}  // namespace

void alloc_rank_buffers(const MoeDims& d, MoeRankBuffers& b) {
  const size_t el = size_t(d.experts_per_rank()), T = size_t(d.tokens), H = size_t(d.hidden);
  const size_t slots = T * d.top_k;
  b.x = device_alloc_zeroed<std::uint16_t>(T * H);
  b.w1 = device_alloc_zeroed<std::uint16_t>(el * w1_elems(d));
  b.w2 = device_alloc_zeroed<std::uint16_t>(el * w2_elems(d));
  b.y = device_alloc_zeroed<std::uint16_t>(T * H);
  b.ids = device_alloc_zeroed<int>(slots);
  b.weights = device_alloc_zeroed<float>(slots);
  b.expert_rows = device_alloc_zeroed<int>(d.experts);
  b.expert_offset = device_alloc_zeroed<int>(d.experts);
  b.send_row_of_slot = device_alloc_zeroed<int>(slots);
  b.token_of_send_row = device_alloc_zeroed<int>(slots);
}

void free_rank_buffers(MoeRankBuffers& b) noexcept {
  for (void* p : {(void*)b.x, (void*)b.w1, (void*)b.w2, (void*)b.y, (void*)b.ids, (void*)b.weights,
                  (void*)b.expert_rows, (void*)b.expert_offset, (void*)b.send_row_of_slot, (void*)b.token_of_send_row})
    cudaFree(p);
  b = MoeRankBuffers{};
}

void upload_tokens(const MoeDims& d, int device, const MoeRankBuffers& b, const std::vector<float>& x) {
  if (x.size() != size_t(d.tokens) * d.hidden) throw InputError("x: wrong size " + std::to_string(x.size()));
  const auto h = to_bf16(x.data(), x.size());
  XSTAGE_CUDA_CHECK(cudaSetDevice(device));
  XSTAGE_CUDA_CHECK(cudaMemcpy(b.x, h.data(), h.size() * 2, cudaMemcpyHostToDevice));
  // A pageable upload may still be in flight when cudaMemcpy returns; the team's streams do not
  // order after the default stream.
  XSTAGE_CUDA_CHECK(cudaDeviceSynchronize());
}

void upload_weights(const MoeDims& d, int device, const MoeRankBuffers& b, const float* w1, const float* w2) {
  const size_t el = size_t(d.experts_per_rank());
  const size_t n1 = el * w1_elems(d), n2 = el * w2_elems(d);
  const auto b1 = to_bf16(w1, n1), b2 = to_bf16(w2, n2);
  XSTAGE_CUDA_CHECK(cudaSetDevice(device));
  XSTAGE_CUDA_CHECK(cudaMemcpy(b.w1, b1.data(), n1 * 2, cudaMemcpyHostToDevice));
  XSTAGE_CUDA_CHECK(cudaMemcpy(b.w2, b2.data(), n2 * 2, cudaMemcpyHostToDevice));
  XSTAGE_CUDA_CHECK(cudaDeviceSynchronize());
}

void upload_routing(const MoeDims& d, int device, int rank, const MoeRankBuffers& b, const Routing& r) {
  validate_routing(r, "routing of rank " + std::to_string(rank));
  if (r.tokens != d.tokens || r.experts != d.experts || r.top_k != d.top_k) {
    throw InputError("routing: shape (" + std::to_string(r.tokens) + " tokens, " + std::to_string(r.experts) +
                     " experts, top-" + std::to_string(r.top_k) + ") does not match the layer");
  }
  XSTAGE_CUDA_CHECK(cudaSetDevice(device));
  XSTAGE_CUDA_CHECK(cudaMemcpy(b.ids, r.expert_ids.data(), r.expert_ids.size() * sizeof(int), cudaMemcpyHostToDevice));
  XSTAGE_CUDA_CHECK(cudaMemcpy(b.weights, r.weights.data(), r.weights.size() * sizeof(float), cudaMemcpyHostToDevice));
  XSTAGE_CUDA_CHECK(cudaDeviceSynchronize());
}

void fill_random_inputs(const MoeDims& d, int device, int rank, const MoeRankBuffers& b, std::uint64_t seed,
                        float weight_scale, cudaStream_t st) {
  const int el = d.experts_per_rank();
  const size_t n1 = w1_elems(d), n2 = w2_elems(d);
  XSTAGE_CUDA_CHECK(cudaSetDevice(device));
  XSTAGE_CUDA_CHECK(launch_fill_uniform_bf16(b.x, size_t(d.tokens) * d.hidden, moe_input_seed(seed, 1000 + rank), 1.f, st));
  for (int l = 0; l < el; ++l) {
    const int e = rank * el + l;
    XSTAGE_CUDA_CHECK(launch_fill_uniform_bf16(b.w1 + size_t(l) * n1, n1, moe_input_seed(seed, 2 * e + 1), weight_scale, st));
    XSTAGE_CUDA_CHECK(launch_fill_uniform_bf16(b.w2 + size_t(l) * n2, n2, moe_input_seed(seed, 2 * e + 2), weight_scale, st));
  }
  XSTAGE_CUDA_CHECK(cudaStreamSynchronize(st));
}

void poison_output_async(const MoeDims& d, const MoeRankBuffers& b) {
  XSTAGE_CUDA_CHECK(cudaMemset(b.y, 0xff, size_t(d.tokens) * d.hidden * 2));  // 0xffff: bf16 NaN
}

std::vector<float> download_output(const MoeDims& d, int device, const MoeRankBuffers& b) {
  return download_bf16(device, b.y, size_t(d.tokens) * d.hidden);
}

std::vector<float> download_tokens(const MoeDims& d, int device, const MoeRankBuffers& b) {
  return download_bf16(device, b.x, size_t(d.tokens) * d.hidden);
}

void download_expert_weights(const MoeDims& d, int device, const MoeRankBuffers& b, int local_expert,
                             std::vector<float>& w1, std::vector<float>& w2) {
  const size_t n1 = w1_elems(d), n2 = w2_elems(d);
  w1 = download_bf16(device, b.w1 + size_t(local_expert) * n1, n1);
  w2 = download_bf16(device, b.w2 + size_t(local_expert) * n2, n2);
}

}  // namespace xstage::moe
