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
  if (__builtin_cpu_supports("avx2")) best = Level::kAvx2;
  if (__builtin_cpu_supports("avx512f")) best = Level::kAvx512;
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
// last such index.
__attribute__((target("avx2"))) int last_le_avx2(const KeyEntry* e, uint32_t n, uint64_t key) {
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

// AVX-512: four entries (8 lanes) per 512-bit masked load, one unsigned
// compare into a mask register; lanes past entry n-1 are masked off (not
// loaded, so a node's last entry may end its allocation).
__attribute__((target("avx512f"))) int last_le_avx512(const KeyEntry* e, uint32_t n, uint64_t key) {
  const __m512i k = _mm512_set1_epi64(static_cast<long long>(key));
  const char* p = reinterpret_cast<const char*>(e);
  uint32_t count = 0;
  for (uint32_t i = 0; i < n; i += 4) {
    const uint32_t left = n - i < 4 ? n - i : 4;
    const __mmask8 load = static_cast<__mmask8>((1u << (2 * left)) - 1);
    const __m512i v = _mm512_maskz_loadu_epi64(load, p + 16 * i);
    const __mmask8 le = _mm512_mask_cmple_epu64_mask(static_cast<__mmask8>(load & 0x55), v, k);
    count += static_cast<uint32_t>(std::popcount(static_cast<uint32_t>(le)));
  }
  return static_cast<int>(count) - 1;
}

}  // namespace detail

Level level() { return detail::g_level; }

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
