// Run-time SIMD dispatch of the sorted-key searches and of rank_distinct
// (simd_search.h).
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

// The out-of-line forms of the inline searches (simd_search.h).
int last_le_scalar(const KeyEntry* e, uint32_t n, uint64_t key) {
  return LastLeScalar::last(e, n, key);
}
__attribute__((target("avx2,popcnt"))) int last_le_avx2(const KeyEntry* e, uint32_t n,
                                                        uint64_t key) {
  return LastLeAvx2::last(e, n, key);
}
__attribute__((target("avx512f,popcnt"))) int last_le_avx512(const KeyEntry* e, uint32_t n,
                                                             uint64_t key) {
  return LastLeAvx512::last(e, n, key);
}
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

__attribute__((target("avx2,popcnt"))) void rank_distinct_avx2(const uint64_t* keys, uint32_t n,
                                                               uint8_t* rank) {
  // Unsigned order through the signed compare: both sides' sign bits flipped.
  const __m256i flip = _mm256_set1_epi64x(static_cast<long long>(0x8000000000000000ull));
  constexpr uint32_t kChunks = kMaxRankKeys / 4;
  __m256i v[kChunks];
  uint32_t valid[kChunks];  // movemask bits of the lanes below n
  const uint32_t chunks = (n + 3) / 4;
  for (uint32_t c = 0; c < chunks; ++c) {
    const uint32_t lanes = detail::lanes_left(n, 4 * c, 4);
    valid[c] = (1u << lanes) - 1;
    v[c] = detail::load_flipped_avx2(reinterpret_cast<const long long*>(keys + 4 * c), lanes);
  }
  for (uint32_t i = 0; i < n; ++i) {
    const __m256i k = _mm256_xor_si256(_mm256_set1_epi64x(static_cast<long long>(keys[i])), flip);
    uint32_t r = 0;
    for (uint32_t c = 0; c < chunks; ++c) {
      const auto lt = static_cast<uint32_t>(
          _mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpgt_epi64(k, v[c]))));
      r += static_cast<uint32_t>(std::popcount(lt & valid[c]));
    }
    rank[i] = static_cast<uint8_t>(r);
  }
}

__attribute__((target("avx512f,popcnt"))) void rank_distinct_avx512(const uint64_t* keys,
                                                                    uint32_t n, uint8_t* rank) {
  constexpr uint32_t kChunks = kMaxRankKeys / 8;
  __m512i v[kChunks];
  __mmask8 m[kChunks];
  const uint32_t chunks = (n + 7) / 8;
  for (uint32_t c = 0; c < chunks; ++c) {
    m[c] = detail::lanes_mask8(n, 8 * c);
    v[c] = _mm512_maskz_loadu_epi64(m[c], keys + 8 * c);  // lanes past n: not read
  }
  for (uint32_t i = 0; i < n; ++i) {
    const __m512i k = _mm512_set1_epi64(static_cast<long long>(keys[i]));
    uint32_t r = 0;
    for (uint32_t c = 0; c < chunks; ++c) {
      r += static_cast<uint32_t>(std::popcount(_mm512_mask_cmplt_epu64_mask(m[c], v[c], k)));
    }
    rank[i] = static_cast<uint8_t>(r);
  }
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
