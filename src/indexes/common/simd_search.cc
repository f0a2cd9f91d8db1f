// Run-time SIMD dispatch of the sorted-key search (simd_search.h).
#include "indexes/common/simd_search.h"

#include <immintrin.h>

#include <bit>
#include <cstdlib>
#include <cstring>

namespace nvindex::simd {
namespace detail {

namespace {

Level detect() {
  __builtin_cpu_init();
  Level best = Level::kScalar;
  // popcnt is part of both vector paths (every CPU with AVX2 has it).
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt")) best = Level::kAvx2;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("popcnt")) best = Level::kAvx512;
  const char* cap = std::getenv("NVINDEX_SIMD");
  if (cap != nullptr) {
    Level want = best;
    if (std::strcmp(cap, "scalar") == 0) want = Level::kScalar;
    if (std::strcmp(cap, "avx2") == 0) want = Level::kAvx2;
    if (std::strcmp(cap, "avx512") == 0) want = Level::kAvx512;
    if (want < best) best = want;
  }
  return best;
}

}  // namespace

const Level g_level = detect();

// Branch-free binary search (Khuong and Morin, "Array Layouts for
// Comparison-Based Searching", JEA 2017, §3.1): floor(log2(n)) + 1
// conditional moves. Invariant: the answer, if >= b, lies in [b, b + len).
int last_le_scalar(const KeyEntry* e, uint32_t n, uint64_t key) {
  if (n == 0) return -1;
  uint32_t b = 0;
  uint32_t len = n;
  while (len > 1) {
    const uint32_t half = len / 2;
    b = e[b + half].key.load(std::memory_order_acquire) <= key ? b + half : b;
    len -= half;
  }
  return e[b].key.load(std::memory_order_acquire) <= key ? static_cast<int>(b)
                                                         : static_cast<int>(b) - 1;
}

// AVX2: two entries (4 lanes: key, other, key, other) per 256-bit masked
// load (one entry's two lanes for an odd last one); keys <= key counted over
// the even lanes. Unsigned compare via the signed one with both sides' sign
// bits flipped. Sorted keys: the count of keys <= key, minus one, is the
// last such index. popcnt is a target feature: without it std::popcount is a
// dozen shifts and adds.
__attribute__((target("avx2,popcnt"))) int last_le_avx2(const KeyEntry* e, uint32_t n,
                                                        uint64_t key) {
  const __m256i flip = _mm256_set1_epi64x(static_cast<long long>(0x8000000000000000ull));
  const __m256i k = _mm256_xor_si256(_mm256_set1_epi64x(static_cast<long long>(key)), flip);
  const __m256i two = _mm256_set1_epi64x(-1);
  const __m256i one = _mm256_setr_epi64x(-1, -1, 0, 0);
  const char* p = reinterpret_cast<const char*>(e);
  uint32_t count = 0;
  for (uint32_t i = 0; i < n; i += 2) {
    const __m256i load = i + 1 < n ? two : one;  // masked-off lanes are not read
    const __m256i v = _mm256_xor_si256(
        _mm256_maskload_epi64(reinterpret_cast<const long long*>(p + 16 * i), load), flip);
    const uint32_t gt =
        static_cast<uint32_t>(_mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpgt_epi64(v, k))));
    const uint32_t keys = i + 1 < n ? 0x5u : 0x1u;
    count += static_cast<uint32_t>(std::popcount(~gt & keys));
  }
  return static_cast<int>(count) - 1;
}

// AVX-512: eight entries per step: two 512-bit masked loads (16 words), the
// eight keys gathered into one register by a two-source permute, one
// unsigned compare into a mask register, one popcnt. Words past entry n-1
// are masked off (not loaded, so a node's last entry may end its
// allocation). Masks: (1 << b) - 1 truncated to 8 bits is all ones for
// b >= 8, so a full step needs no branch.
__attribute__((target("avx512f,popcnt"))) int last_le_avx512(const KeyEntry* e, uint32_t n,
                                                             uint64_t key) {
  const __m512i k = _mm512_set1_epi64(static_cast<long long>(key));
  const __m512i even = _mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14);
  const auto* w = reinterpret_cast<const char*>(e);
  uint32_t count = 0;
  for (uint32_t i = 0; i < n; i += 8) {
    const uint32_t left = n - i < 8 ? n - i : 8;
    const auto lo = static_cast<__mmask8>((1u << (2 * left)) - 1);
    const auto hi = static_cast<__mmask8>(left > 4 ? (1u << (2 * left - 8)) - 1 : 0);
    const auto valid = static_cast<__mmask8>((1u << left) - 1);
    const __m512i a = _mm512_maskz_loadu_epi64(lo, w + 16 * i);
    const __m512i b = _mm512_maskz_loadu_epi64(hi, w + 16 * i + 64);
    const __m512i keys = _mm512_permutex2var_epi64(a, even, b);
    count += static_cast<uint32_t>(
        std::popcount(static_cast<uint32_t>(_mm512_mask_cmple_epu64_mask(valid, keys, k))));
  }
  return static_cast<int>(count) - 1;
}

// The out-of-line forms of the inline searches (simd_search.h).
int count_le_scalar(const std::atomic<uint64_t>* k, uint32_t n, uint32_t span, uint64_t key) {
  return static_cast<int>(CountLeScalar::count(k, n, span, key));
}
__attribute__((target("avx2,popcnt"))) int count_le_avx2(const std::atomic<uint64_t>* k, uint32_t n,
                                                         uint32_t span, uint64_t key) {
  return static_cast<int>(CountLeAvx2::count(k, n, span, key));
}
__attribute__((target("avx512f,popcnt"))) int count_le_avx512(const std::atomic<uint64_t>* k,
                                                              uint32_t n, uint32_t span,
                                                              uint64_t key) {
  return static_cast<int>(CountLeAvx512::count(k, n, span, key));
}

}  // namespace detail

std::string_view level_name(Level l) {
  switch (l) {
    case Level::kAvx512:
      return "avx512";
    case Level::kAvx2:
      return "avx2";
    case Level::kScalar:
      break;
  }
  return "scalar";
}

}  // namespace nvindex::simd
