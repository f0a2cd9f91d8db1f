// Search of a node's sorted keys with the widest SIMD the CPU has, chosen at
// run time (one portable binary): AVX-512, else AVX2, else a branch-free
// scalar binary search. Two search shapes: last_le over sorted 16-byte {key,
// value-or-child} entries (fastfair's persistent nodes), count_le over
// contiguous sorted keys (the DRAM inner nodes of lbtree, fptree and
// wbtree:inner=dram, inner_tree.h). And one ordering: rank_distinct, the
// comparison counting that orders a splitting leaf's unsorted keys
// (lbtree).
//
// Why: a binary search over 15..252 keys is a chain of dependent loads and
// compares; counting the keys <= the search key with vector compares makes
// the loads independent and the instruction count small, so more of the
// next lookup fits in the CPU's reorder window and its misses overlap (the
// papers' code scans linearly, or narrows by binary search to 8 keys and
// then scans: LB+-tree, Liu et al. VLDB'20, `lbtree::lookup`).
#pragma once

#include <immintrin.h>

#include <atomic>
#include <bit>
#include <cstdint>
#include <string_view>

#include "util/dcheck.h"

namespace nvindex::simd {

/// An instruction set the searches can use.
enum class Level : uint8_t { kScalar, kAvx2, kAvx512 };

/// "scalar", "avx2", "avx512".
std::string_view level_name(Level l);

/// One 16-byte entry as the searched nodes store it: the key first.
struct KeyEntry {
  std::atomic<uint64_t> key;
  std::atomic<uint64_t> other;  ///< value or child: not read by the search
};
static_assert(sizeof(KeyEntry) == 16);

namespace detail {
/// The low n bits set (all 64 for n >= 64): the mask that cuts a whole
/// node's compare bits to its first n slots (the *Whole searches).
inline uint64_t low_bits(uint32_t n) { return n >= 64 ? ~uint64_t{0} : (uint64_t{1} << n) - 1; }
/// Lanes of the step at key i that hold keys < n: min(n - i, lanes), 0 when
/// i >= n (conditional moves, not branches).
inline uint32_t lanes_left(uint32_t n, uint32_t i, uint32_t lanes) {
  const uint32_t left = n > i ? n - i : 0;
  return left < lanes ? left : lanes;
}
/// AVX-512 load and compare mask of the eight keys at key i of n: a bit
/// for each lane below n (0 when i >= n).
inline __mmask8 lanes_mask8(uint32_t n, uint32_t i) {
  return static_cast<__mmask8>((1u << lanes_left(n, i, 8)) - 1);
}
/// AVX2: the four 8-byte keys at p, of which the first `left` (0..4) are
/// loaded (the others are not read: a masked load, so a node's last key may
/// end its allocation) and every lane's sign bit flipped, so that the signed
/// 64-bit compare orders them unsigned (a lane not loaded reads as 0 before
/// the flip).
__attribute__((target("avx2"), always_inline)) inline __m256i load_flipped_avx2(const long long* p,
                                                                                uint32_t left) {
  const __m256i load = _mm256_cmpgt_epi64(_mm256_set1_epi64x(left), _mm256_setr_epi64x(0, 1, 2, 3));
  return _mm256_xor_si256(_mm256_maskload_epi64(p, load),
                          _mm256_set1_epi64x(static_cast<long long>(0x8000000000000000ull)));
}
}  // namespace detail

/// The last_le search of one level, inline, for a caller compiled for that
/// level (same target attribute, or flattened into one: fastfair's
/// descent). Each has
///   static int last(const KeyEntry* e, uint32_t n, uint64_t key)
/// with last_le's contract (below).
struct LastLeScalar {
  /// Branch-free binary search (Khuong and Morin, "Array Layouts for
  /// Comparison-Based Searching", JEA 2017, §3.1): floor(log2(n)) + 1
  /// conditional moves. Invariant: the answer, if >= b, lies in [b, b + len).
  static int last(const KeyEntry* e, uint32_t n, uint64_t key) {
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
};

struct LastLeAvx2 {
  /// Two entries (4 lanes: key, other, key, other) per 256-bit masked load
  /// (one entry's two lanes for an odd last one); keys <= key counted over
  /// the even lanes. Unsigned compare via the signed one with both sides'
  /// sign bits flipped. Sorted keys: the count of keys <= key, minus one, is
  /// the last such index. popcnt is a target feature: without it
  /// std::popcount is a dozen shifts and adds.
  __attribute__((target("avx2,popcnt"))) static int last(const KeyEntry* e, uint32_t n,
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
      const auto gt =
          static_cast<uint32_t>(_mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpgt_epi64(v, k))));
      const uint32_t keys = i + 1 < n ? 0x5u : 0x1u;
      count += static_cast<uint32_t>(std::popcount(~gt & keys));
    }
    return static_cast<int>(count) - 1;
  }
};

struct LastLeAvx512 {
  /// Four entries (eight words: key, other, ...) per 512-bit load, the keys
  /// compared in place: one unsigned compare under the even-lane mask 0x55,
  /// so no permute and no per-step mask arithmetic. Full steps (all four
  /// entries below n) load under the all-ones mask, two per loop trip; the
  /// 0..7 entries left take two steps under masks of their entries (nothing
  /// past entry n-1 is touched, so a node's last entry may end its
  /// allocation). About four instructions per four entries, against twelve
  /// for eight-entry steps with a permute (issue 8: fewer instructions
  /// between one lookup's misses and the next's).
  __attribute__((target("avx512f,popcnt"))) static int last(const KeyEntry* e, uint32_t n,
                                                            uint64_t key) {
    const __m512i k = _mm512_set1_epi64(static_cast<long long>(key));
    const auto* w = reinterpret_cast<const char*>(e);
    uint32_t count = 0;
    uint32_t j = 0;  // steps done
    for (; 4 * j + 8 <= n; j += 2) count += two(w, j, 0xff, 0xff, k);
    // The 0..7 entries left: no branch on n.
    const uint32_t left = n - 4 * j;
    const uint32_t first = left < 4 ? left : 4;
    count += two(w, j, static_cast<__mmask8>((1u << (2 * first)) - 1),
                 static_cast<__mmask8>((1u << (2 * (left - first))) - 1), k);
    return static_cast<int>(count) - 1;
  }

 private:
  /// Two steps at entry 4 * j under load masks m1, m2 (an empty mask loads
  /// nothing): how many loaded keys are <= k.
  __attribute__((target("avx512f,popcnt"))) static uint32_t two(const char* w, uint32_t j,
                                                                __mmask8 m1, __mmask8 m2,
                                                                __m512i k) {
    constexpr __mmask8 kKeys = 0x55;  // lanes 0, 2, 4, 6: the keys
    const __m512i a = _mm512_maskz_loadu_epi64(m1, w + 64 * j);
    const __m512i b = _mm512_maskz_loadu_epi64(m2, w + 64 * j + 64);
    const uint32_t le = static_cast<uint32_t>(_mm512_mask_cmple_epu64_mask(m1 & kKeys, a, k)) |
                        static_cast<uint32_t>(_mm512_mask_cmple_epu64_mask(m2 & kKeys, b, k)) << 8;
    return static_cast<uint32_t>(std::popcount(le));
  }
};

/// last_le over a whole node of kEntries entries (16 B each: key, value),
/// for one thread whose node memory past entry n-1 is readable (fastfair's
/// single-threaded lookups: a node is node_size bytes, its kEntries entries
/// fill it to the end): every entry is loaded with plain vector loads, the
/// keys compared, and the mask cut to the first n entries afterwards, so the
/// search has a fixed trip count (no loop exit on n to mispredict) and no
/// load masks. Not lock-free (see CountLeAvx512Whole). kEntries a multiple
/// of 4 (AVX-512: four entries a load; AVX2: two), at most 32.
template <uint32_t kEntries>
struct LastLeAvx512Whole {
  __attribute__((target("avx512f,popcnt"))) static int last(const KeyEntry* e, uint32_t n,
                                                            uint64_t key) {
    static_assert(kEntries % 4 == 0 && kEntries <= 32);
    constexpr __mmask8 kKeys = 0x55;  // lanes 0, 2, 4, 6: the keys
    const __m512i k = _mm512_set1_epi64(static_cast<long long>(key));
    const auto* w = reinterpret_cast<const char*>(e);
    uint64_t le = 0;  // bit 2i: entry i's key <= key
#pragma GCC unroll 8
    for (uint32_t q = 0; q < kEntries / 4; ++q) {
      const __m512i v = _mm512_loadu_si512(w + 64 * q);
      le |= static_cast<uint64_t>(_mm512_mask_cmple_epu64_mask(kKeys, v, k)) << (8 * q);
    }
    return static_cast<int>(std::popcount(le & detail::low_bits(2 * n))) - 1;
  }
};
template <uint32_t kEntries>
struct LastLeAvx2Whole {
  __attribute__((target("avx2,popcnt"))) static int last(const KeyEntry* e, uint32_t n,
                                                         uint64_t key) {
    static_assert(kEntries % 2 == 0 && kEntries <= 32);
    const __m256i flip = _mm256_set1_epi64x(static_cast<long long>(0x8000000000000000ull));
    const __m256i k = _mm256_xor_si256(_mm256_set1_epi64x(static_cast<long long>(key)), flip);
    const auto* w = reinterpret_cast<const char*>(e);
    uint64_t gt = 0;  // bit 2i: entry i's key > key (odd bits: values, ignored)
#pragma GCC unroll 16
    for (uint32_t q = 0; q < kEntries / 2; ++q) {
      const __m256i v =
          _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 32 * q)), flip);
      gt |= static_cast<uint64_t>(static_cast<uint32_t>(
                _mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpgt_epi64(v, k)))))
            << (4 * q);
    }
    return static_cast<int>(std::popcount(~gt & detail::low_bits(2 * n) & 0x5555555555555555ull)) -
           1;
  }
};

namespace detail {
int last_le_scalar(const KeyEntry* e, uint32_t n, uint64_t key);
int last_le_avx2(const KeyEntry* e, uint32_t n, uint64_t key);
int last_le_avx512(const KeyEntry* e, uint32_t n, uint64_t key);
int count_le_scalar(const std::atomic<uint64_t>* k, uint32_t n, uint32_t span, uint64_t key);
int count_le_avx2(const std::atomic<uint64_t>* k, uint32_t n, uint32_t span, uint64_t key);
int count_le_avx512(const std::atomic<uint64_t>* k, uint32_t n, uint32_t span, uint64_t key);
void rank_distinct_avx2(const uint64_t* keys, uint32_t n, uint8_t* rank);
void rank_distinct_avx512(const uint64_t* keys, uint32_t n, uint8_t* rank);
extern const Level g_level;
}  // namespace detail

/// The level chosen once at start-up from CPUID (AVX-512F, else AVX2, else
/// scalar); NVINDEX_SIMD=scalar|avx2|avx512 in the environment caps it (for
/// tests and measurements; a level the CPU lacks is never used).
inline Level level() { return detail::g_level; }

/// The level every search runs at: level(), except scalar under
/// ThreadSanitizer (vector lanes are not atomic loads, so a racing optimistic
/// read would be reported). Every dispatch (last_le, count_le, InnerTree's
/// and fastfair's descents) switches on this one.
inline Level search_level() {
#if defined(__SANITIZE_THREAD__)
  return Level::kScalar;
#else
  return detail::g_level;
#endif
}

/// Index of the last of the n entries at `e` whose key is <= `key`, or -1
/// when none is; the keys of e[0..n) must be non-decreasing (equal neighbours
/// allowed: the right one of an equal pair is found). Reads e[0..n) only
/// (masked vector loads: nothing past e[n-1] is touched). Lock-free: a reader
/// racing a writer gets some index in [-1, n) and must validate its version
/// before acting on it (vector lanes are not atomic loads). Under
/// ThreadSanitizer always the scalar search (atomic loads).
inline int last_le(const KeyEntry* e, uint32_t n, uint64_t key) {
  switch (search_level()) {
    case Level::kAvx512:
      return detail::last_le_avx512(e, n, key);
    case Level::kAvx2:
      return detail::last_le_avx2(e, n, key);
    case Level::kScalar:
      break;
  }
  return detail::last_le_scalar(e, n, key);
}

/// The count_le search of one level, inline, for a caller that is itself
/// compiled for that level (a function with the same target attribute, or
/// flattened into one: InnerTree's descent). Each has
///   static uint32_t count(const std::atomic<uint64_t>* k, uint32_t n,
///                         uint32_t span, uint64_t key)
/// with count_le's contract (below).
struct CountLeScalar {
  /// Branch-free binary search (Khuong and Morin, JEA 2017, §3.1);
  /// `span` unused (the fallback path: its loop count follows n).
  static uint32_t count(const std::atomic<uint64_t>* k, uint32_t n, uint32_t /*span*/,
                        uint64_t key) {
    if (n == 0) return 0;
    uint32_t b = 0;
    uint32_t len = n;
    while (len > 1) {
      const uint32_t half = len / 2;
      b = k[b + half].load(std::memory_order_acquire) <= key ? b + half : b;
      len -= half;
    }
    return b + (k[b].load(std::memory_order_acquire) <= key ? 1 : 0);
  }
};

struct CountLeAvx2 {
  /// Four keys per 256-bit masked load; unsigned compare through the signed
  /// one with both sides' sign bits flipped; lanes past key n-1 neither
  /// loaded nor counted. ceil(span / 4) steps.
  __attribute__((target("avx2,popcnt"))) static uint32_t count(const std::atomic<uint64_t>* k,
                                                               uint32_t n, uint32_t span,
                                                               uint64_t key) {
    const __m256i flip = _mm256_set1_epi64x(static_cast<long long>(0x8000000000000000ull));
    const __m256i kk = _mm256_xor_si256(_mm256_set1_epi64x(static_cast<long long>(key)), flip);
    const auto* w = reinterpret_cast<const long long*>(k);
    uint32_t c = 0;
    // Unrolled where span is a compile-time constant (a descent that knows
    // its node capacity: InnerTree::find_single).
#pragma GCC unroll 8
    for (uint32_t i = 0; i < span; i += 4) {
      const uint32_t left = detail::lanes_left(n, i, 4);
      const __m256i v = detail::load_flipped_avx2(w + i, left);
      const auto gt =
          static_cast<uint32_t>(_mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpgt_epi64(v, kk))));
      c += static_cast<uint32_t>(std::popcount(~gt & ((1u << left) - 1)));
    }
    return c;
  }
};

struct CountLeAvx512 {
  /// Eight keys per 512-bit masked load, one unsigned compare into a mask
  /// register each; up to 16 keys (a 256 B inner node holds 15) in two
  /// loads, two compares and one popcnt, up to 32 (a 512 B node holds 31) in
  /// four, with no loop at all.
  __attribute__((target("avx512f,popcnt"))) static uint32_t count(const std::atomic<uint64_t>* k,
                                                                  uint32_t n, uint32_t span,
                                                                  uint64_t key) {
    const __m512i kk = _mm512_set1_epi64(static_cast<long long>(key));
    const auto* w = reinterpret_cast<const char*>(k);
    if (span <= 16) return unrolled<2>(w, n, kk);
    if (span <= 32) return unrolled<4>(w, n, kk);
    uint32_t c = 0;
    for (uint32_t i = 0; i < span; i += 8) {
      const __mmask8 valid = detail::lanes_mask8(n, i);
      const __m512i v = _mm512_maskz_loadu_epi64(valid, w + 8 * i);
      c += static_cast<uint32_t>(
          std::popcount(static_cast<uint32_t>(_mm512_mask_cmple_epu64_mask(valid, v, kk))));
    }
    return c;
  }

 private:
  /// kSteps masked eight-key steps with a compile-time trip count (fully
  /// unrolled): keys past n are neither loaded nor counted. n <= 8 * kSteps.
  template <uint32_t kSteps>
  __attribute__((target("avx512f,popcnt"))) static uint32_t unrolled(const char* w, uint32_t n,
                                                                     __m512i kk) {
    static_assert(kSteps <= 4);  // the keys' mask fits 32 bits
    const uint64_t m = (uint64_t{1} << n) - 1;
    uint64_t le = 0;
    // Unrolled by hand-off to the compiler: GCC 12 keeps this loop (and
    // its shifts by a register) unless told, 10 instructions a step.
#pragma GCC unroll 4
    for (uint32_t q = 0; q < kSteps; ++q) {
      const auto mq = static_cast<__mmask8>(m >> (8 * q));
      const __m512i v = _mm512_maskz_loadu_epi64(mq, w + 64 * q);
      le |= static_cast<uint64_t>(_mm512_mask_cmple_epu64_mask(mq, v, kk)) << (8 * q);
    }
    return static_cast<uint32_t>(std::popcount(le));
  }
};

/// count_le over a whole node of kSpan key slots, for a caller whose slots
/// past n are readable memory (a DRAM inner node is zeroed when made, and its
/// kSpan slots always allocated): every slot is loaded with a plain vector
/// load and compared, and the compare mask is cut to the first n bits
/// afterwards, so no load mask is computed (AVX-512: 4 loads, 4 compares
/// and a popcnt for 31 keys; AVX2: 8 of each for 31). Not lock-free like
/// count_le: a slot past n may change under a racing writer, which only the
/// final mask hides, so it is for InnerTree::find_single, one thread. kSpan
/// a multiple of the lanes, or the last step reads up to 3 (AVX2) or 7
/// (AVX-512) words past the slots: a 512 B node's 31 slots are followed by
/// its children, still node memory. n <= kSpan <= 64.
template <uint32_t kSpan>
struct CountLeAvx512Whole {
  __attribute__((target("avx512f,popcnt"))) static uint32_t count(const std::atomic<uint64_t>* k,
                                                                  uint32_t n, uint32_t /*span*/,
                                                                  uint64_t key) {
    static_assert(kSpan <= 64);
    const __m512i kk = _mm512_set1_epi64(static_cast<long long>(key));
    const auto* w = reinterpret_cast<const char*>(k);
    uint64_t le = 0;
#pragma GCC unroll 8
    for (uint32_t q = 0; q < (kSpan + 7) / 8; ++q) {
      const __m512i v = _mm512_loadu_si512(w + 64 * q);
      le |= static_cast<uint64_t>(_mm512_cmple_epu64_mask(v, kk)) << (8 * q);
    }
    return static_cast<uint32_t>(std::popcount(le & detail::low_bits(n)));
  }
};
template <uint32_t kSpan>
struct CountLeAvx2Whole {
  __attribute__((target("avx2,popcnt"))) static uint32_t count(const std::atomic<uint64_t>* k,
                                                               uint32_t n, uint32_t /*span*/,
                                                               uint64_t key) {
    static_assert(kSpan <= 64);
    const __m256i flip = _mm256_set1_epi64x(static_cast<long long>(0x8000000000000000ull));
    const __m256i kk = _mm256_xor_si256(_mm256_set1_epi64x(static_cast<long long>(key)), flip);
    const auto* w = reinterpret_cast<const char*>(k);
    uint64_t gt = 0;
#pragma GCC unroll 16
    for (uint32_t q = 0; q < (kSpan + 3) / 4; ++q) {
      const __m256i v =
          _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 32 * q)), flip);
      gt |= static_cast<uint64_t>(static_cast<uint32_t>(
                _mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpgt_epi64(v, kk)))))
            << (4 * q);
    }
    return static_cast<uint32_t>(std::popcount(~gt & detail::low_bits(n)));
  }
};

/// How many of the n keys at `k` are <= `key` (0..n); the keys must be
/// non-decreasing and contiguous (8 B apart), as the DRAM inner nodes store
/// them (inner_tree.h). `span` >= n is the node's key capacity: the vector
/// loops run over span keys, not n, so their trip count is the same for
/// every node of a tree and never mispredicted (a mispredicted branch that
/// waits for a node's miss stops the next lookup's misses from overlapping
/// this one's). One 8-lane AVX-512 compare (or two 4-lane AVX2 ones) per 8
/// keys: a 15-key node takes two. Reads k[0..n) only (masked loads). Lock-
/// free like last_le: a racing reader gets some count in [0, n] and must
/// validate. Under ThreadSanitizer the scalar search.
inline int count_le(const std::atomic<uint64_t>* k, uint32_t n, uint32_t span, uint64_t key) {
  switch (search_level()) {
    case Level::kAvx512:
      return detail::count_le_avx512(k, n, span, key);
    case Level::kAvx2:
      return detail::count_le_avx2(k, n, span, key);
    case Level::kScalar:
      break;
  }
  return detail::count_le_scalar(k, n, span, key);
}

/// Most keys rank_distinct takes.
inline constexpr uint32_t kMaxRankKeys = 64;

/// Comparison counting (Knuth, TAOCP vol. 3, §5.2, Algorithm C): for n
/// distinct keys (n <= kMaxRankKeys, compared unsigned), rank[i] = the
/// number of keys[j] < keys[i], so keys[i] is the rank[i]-th smallest and
/// rank is a permutation of 0..n-1. Every compare is a lane of a vector
/// compare, counted by popcount: n * ceil(n / 8) 8-lane compares with
/// AVX-512, n * ceil(n / 4) 4-lane ones with AVX2, and no branch that
/// depends on the keys. lbtree's split orders its full leaf's 14, 28, 42 or
/// 56 keys (1 to 4 blocks) this way: std::sort's insertion sort of random
/// keys mispredicts about once per key. Keys that are not distinct get
/// equal ranks (not a permutation): the caller's keys must be a set, or
/// the caller must check. Reads keys[0, n) only (masked loads), writes
/// rank[0, n) (n bytes). Returns false, writing nothing, at the scalar
/// level (search_level(): no AVX2, NVINDEX_SIMD=scalar, ThreadSanitizer),
/// where counting would take n * n scalar compares: the caller sorts.
inline bool rank_distinct(const uint64_t* keys, uint32_t n, uint8_t* rank) {
  NVINDEX_DCHECK(n <= kMaxRankKeys);
  switch (search_level()) {
    case Level::kAvx512:
      detail::rank_distinct_avx512(keys, n, rank);
      return true;
    case Level::kAvx2:
      detail::rank_distinct_avx2(keys, n, rank);
      return true;
    case Level::kScalar:
      break;
  }
  return false;
}

}  // namespace nvindex::simd
