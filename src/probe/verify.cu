// Destination verification of probe runs (see include/xstage/probe/verify.hpp).
#include <algorithm>
#include <cstdio>

#include "xstage/gpu/check.hpp"
#include "xstage/probe/burst_pattern.hpp"
#include "xstage/probe/verify.hpp"

namespace xstage::probe {
namespace {

struct MismatchInfo {
  unsigned long long count;
  unsigned long long first_key;  // (region << 32 | word) of the lowest mismatch, for a stable report
  std::uint32_t got, expected;
};

__global__ void verify_kernel(const std::uint32_t* buffer, const VerifyRegion* regions, std::uint32_t n_regions,
                              std::uint64_t words_per_region, MismatchInfo* info) {
  for (std::uint32_t r = blockIdx.x; r < n_regions; r += gridDim.x) {
    const VerifyRegion reg = regions[r];
    // Ordinary coherent loads: the data was written by a peer through the fabric; no __ldg.
    const std::uint32_t* base = buffer + reg.offset_bytes / 4;
    unsigned local = 0;
    for (std::uint64_t w = threadIdx.x; w < words_per_region; w += blockDim.x) {
      const std::uint32_t expect = pattern_word(reg.tag, static_cast<std::uint32_t>(w));
      const std::uint32_t got = base[w];
      if (got != expect) {
        ++local;
        const unsigned long long key = (static_cast<unsigned long long>(r) << 32) | w;
        const unsigned long long prev = atomicMin(&info->first_key, key);
        if (key < prev) {
          // Racy between threads, but the final key/value pair is re-read on the host from the key.
          info->got = got;
          info->expected = expect;
        }
      }
    }
    if (local) atomicAdd(&info->count, static_cast<unsigned long long>(local));
  }
}

__global__ void poison_kernel(uint4* p, std::uint64_t n) {
  for (std::uint64_t i = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::uint64_t>(gridDim.x) * blockDim.x)
    p[i] = make_uint4(0xa5a5a5a5u, 0x5a5a5a5au, 0xa5a5a5a5u, 0x5a5a5a5au);
}

}  // namespace

void poison(void* buffer, std::uint64_t bytes, cudaStream_t stream) {
  if (bytes % 16 != 0) throw gpu::DeviceError("poison: size not a multiple of 16 bytes");
  poison_kernel<<<1024, 256, 0, stream>>>(static_cast<uint4*>(buffer), bytes / 16);
  XSTAGE_CUDA_CHECK_LAUNCH();
}

VerifyOutcome verify_regions(const void* buffer, const std::vector<VerifyRegion>& regions, std::uint64_t bytes_per_region,
                             cudaStream_t stream) {
  VerifyOutcome out;
  if (regions.empty()) return out;
  VerifyRegion* d_regions = nullptr;
  MismatchInfo* d_info = nullptr;
  XSTAGE_CUDA_CHECK(cudaMallocAsync(&d_regions, sizeof(VerifyRegion) * regions.size(), stream));
  XSTAGE_CUDA_CHECK(cudaMallocAsync(&d_info, sizeof(MismatchInfo), stream));
  XSTAGE_CUDA_CHECK(cudaMemcpyAsync(d_regions, regions.data(), sizeof(VerifyRegion) * regions.size(),
                                    cudaMemcpyHostToDevice, stream));
  MismatchInfo init{0, ~0ull, 0, 0};
  XSTAGE_CUDA_CHECK(cudaMemcpyAsync(d_info, &init, sizeof(init), cudaMemcpyHostToDevice, stream));
  const std::uint64_t words = bytes_per_region / 4;
  const unsigned blocks = static_cast<unsigned>(std::min<std::size_t>(regions.size(), 4096));
  verify_kernel<<<blocks, 256, 0, stream>>>(static_cast<const std::uint32_t*>(buffer), d_regions,
                                            static_cast<std::uint32_t>(regions.size()), words, d_info);
  XSTAGE_CUDA_CHECK_LAUNCH();
  MismatchInfo info{};
  XSTAGE_CUDA_CHECK(cudaMemcpyAsync(&info, d_info, sizeof(info), cudaMemcpyDeviceToHost, stream));
  XSTAGE_CUDA_CHECK(cudaFreeAsync(d_regions, stream));
  XSTAGE_CUDA_CHECK(cudaFreeAsync(d_info, stream));
  XSTAGE_CUDA_CHECK(cudaStreamSynchronize(stream));
  out.words_checked = words * regions.size();
  out.mismatches = info.count;
  if (info.count) {
    const std::uint32_t r = static_cast<std::uint32_t>(info.first_key >> 32);
    const std::uint32_t w = static_cast<std::uint32_t>(info.first_key & 0xffffffffu);
    const VerifyRegion& reg = regions[r];
    // Re-read the first mismatching word so the reported value belongs to the reported position.
    std::uint32_t got = 0;
    XSTAGE_CUDA_CHECK(cudaMemcpy(&got, static_cast<const char*>(buffer) + reg.offset_bytes + 4ull * w, 4,
                                 cudaMemcpyDeviceToHost));
    char buf[256];
    std::snprintf(buf, sizeof(buf), "sender %u producer %u burst %u word %u: got 0x%08x, expected 0x%08x", reg.sender_rank,
                  reg.producer, reg.burst, w, got, pattern_word(reg.tag, w));
    out.first_mismatch = buf;
  }
  return out;
}

}  // namespace xstage::probe
