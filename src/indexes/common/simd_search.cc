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
