// Search of a node's sorted keys with the widest SIMD the CPU has, chosen at
// run time (one portable binary): AVX-512, else AVX2, else a branch-free
// scalar binary search. Shared by the indexes whose nodes hold sorted
// 16-byte {key, value-or-child} entries: fastfair's nodes and the DRAM inner
// nodes of lbtree, fptree and wbtree:inner=dram (inner_tree.h).
//
// Why: a binary search over 15..252 keys is a chain of dependent loads and
// compares; counting the keys <= the search key with vector compares makes
// the loads independent and the instruction count small, so more of the
// next lookup fits in the CPU's reorder window and its misses overlap (the
// papers' code scans linearly, or narrows by binary search to 8 keys and
// then scans: LB+-tree, Liu et al. VLDB'20, `lbtree::lookup`).
#pragma once

#include <atomic>
#include <cstdint>
#include <string_view>

namespace nvindex::simd {

/// The instruction set search_le uses on this CPU.
enum class Level : uint8_t { kScalar, kAvx2, kAvx512 };

/// The level chosen once at start-up from CPUID (AVX-512F, else AVX2, else
/// scalar); NVINDEX_SIMD=scalar|avx2|avx512 in the environment caps it (for
/// tests and measurements; a level the CPU lacks is never used).
Level level();
/// "scalar", "avx2", "avx512".
std::string_view level_name(Level l);

/// One 16-byte entry as the searched nodes store it: the key first.
struct KeyEntry {
  std::atomic<uint64_t> key;
  std::atomic<uint64_t> other;  ///< value or child: not read by the search
};
static_assert(sizeof(KeyEntry) == 16);

namespace detail {
int last_le_scalar(const KeyEntry* e, uint32_t n, uint64_t key);
int last_le_avx2(const KeyEntry* e, uint32_t n, uint64_t key);
int last_le_avx512(const KeyEntry* e, uint32_t n, uint64_t key);
extern const Level g_level;
}  // namespace detail

/// Index of the last of the n entries at `e` whose key is <= `key`, or -1
/// when none is; the keys of e[0..n) must be non-decreasing (equal neighbours
/// allowed: the right one of an equal pair is found). Reads e[0..n) only
/// (masked vector loads: nothing past e[n-1] is touched). Lock-free: a reader
/// racing a writer gets some index in [-1, n) and must validate its version
/// before acting on it (vector lanes are not atomic loads). Under
/// ThreadSanitizer always the scalar search (atomic loads).
inline int last_le(const KeyEntry* e, uint32_t n, uint64_t key) {
#if defined(__SANITIZE_THREAD__)
  return detail::last_le_scalar(e, n, key);
#else
  switch (detail::g_level) {
    case Level::kAvx512:
      return detail::last_le_avx512(e, n, key);
    case Level::kAvx2:
      return detail::last_le_avx2(e, n, key);
    case Level::kScalar:
      break;
  }
  return detail::last_le_scalar(e, n, key);
#endif
}

}  // namespace nvindex::simd
