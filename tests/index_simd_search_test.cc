// The sorted-key searches of src/indexes/common/simd_search.h (last_le over
// 16 B entries, count_le over contiguous keys): every level the
// CPU has (scalar, AVX2, AVX-512) gives the reference answer on every node
// size the indexes use, with equal neighbours (fastfair's transient holes),
// keys with the top bit set (unsigned order) and the extreme keys 0 and
// 2^64 - 1; and a vector search reads nothing past the last entry. Also
// rank_distinct, the comparison counting that orders a split's keys.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "indexes/common/simd_search.h"

namespace nvindex {
namespace {

using simd::KeyEntry;
using SearchFn = int (*)(const KeyEntry*, uint32_t, uint64_t);
using CountFn = int (*)(const std::atomic<uint64_t>*, uint32_t, uint32_t, uint64_t);

int reference(const std::vector<uint64_t>& keys, uint32_t n, uint64_t key) {
  int r = -1;
  for (uint32_t i = 0; i < n; ++i) {
    if (keys[i] <= key) r = static_cast<int>(i);
  }
  return r;
}

/// The scalar form and each vector form this CPU has, named.
template <class Fn>
std::vector<std::pair<const char*, Fn>> on_this_cpu(Fn scalar, Fn avx2, Fn avx512) {
  std::vector<std::pair<const char*, Fn>> out{{"scalar", scalar}};
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2")) out.emplace_back("avx2", avx2);
  if (__builtin_cpu_supports("avx512f")) out.emplace_back("avx512", avx512);
  return out;
}

std::vector<std::pair<const char*, SearchFn>> levels_on_this_cpu() {
  return on_this_cpu<SearchFn>(simd::detail::last_le_scalar, simd::detail::last_le_avx2,
                               simd::detail::last_le_avx512);
}

std::vector<std::pair<const char*, CountFn>> count_levels_on_this_cpu() {
  return on_this_cpu<CountFn>(simd::detail::count_le_scalar, simd::detail::count_le_avx2,
                              simd::detail::count_le_avx512);
}

TEST(SimdSearch, EveryLevelMatchesTheReference) {
  std::mt19937_64 rng(11);
  for (uint32_t n :
       {0u, 1u, 2u, 3u, 4u, 5u, 7u, 8u, 14u, 15u, 16u, 23u, 28u, 31u, 32u, 60u, 252u, 255u}) {
    for (int round = 0; round < 40; ++round) {
      std::vector<uint64_t> keys(n);
      for (uint64_t& k : keys) {
        // Mix small keys, keys with the top bit set and repeats.
        const uint64_t r = rng();
        k = round % 3 == 0 ? r % 50 : round % 3 == 1 ? r | (uint64_t{1} << 63) : r;
      }
      if (n > 0 && round % 4 == 0) keys[rng() % n] = UINT64_MAX;
      if (n > 0 && round % 5 == 0) keys[rng() % n] = 0;
      std::sort(keys.begin(), keys.end());
      if (n > 2 && round % 2 == 0) {
        const uint32_t i = static_cast<uint32_t>(rng() % (n - 1));
        keys[i] = keys[i + 1];  // an equal pair (a FAST shift's hole)
      }
      std::vector<KeyEntry> e(n);
      for (uint32_t i = 0; i < n; ++i) {
        e[i].key.store(keys[i]);
        e[i].other.store(~keys[i]);  // values never count
      }
      std::vector<uint64_t> probes{0, 1, UINT64_MAX, UINT64_MAX - 1, uint64_t{1} << 63};
      for (uint64_t k : keys) {
        probes.push_back(k);
        probes.push_back(k - 1);
        probes.push_back(k + 1);
      }
      for (int i = 0; i < 10; ++i) probes.push_back(rng());
      for (const auto& [name, fn] : levels_on_this_cpu()) {
        for (uint64_t p : probes) {
          ASSERT_EQ(fn(e.data(), n, p), reference(keys, n, p))
              << name << " n=" << n << " probe=" << p;
        }
      }
      // The dispatched search agrees too.
      for (uint64_t p : probes) ASSERT_EQ(simd::last_le(e.data(), n, p), reference(keys, n, p));
      // count_le over the same keys stored contiguously: last_le + 1, for a
      // span of exactly n and for wider spans (a node's capacity), whose
      // keys past n (garbage here) must not count.
      const uint32_t wide = n + 9;
      std::vector<std::atomic<uint64_t>> k(wide);
      for (uint32_t i = 0; i < wide; ++i) k[i].store(i < n ? keys[i] : 0);
      for (const auto& [name, fn] : count_levels_on_this_cpu()) {
        for (uint32_t span : {n, n + 1, n + 8, wide}) {
          for (uint64_t p : probes) {
            ASSERT_EQ(fn(k.data(), n, span, p), reference(keys, n, p) + 1)
                << name << " count_le n=" << n << " span=" << span << " probe=" << p;
          }
        }
      }
      for (uint64_t p : probes) {
        ASSERT_EQ(simd::count_le(k.data(), n, wide, p), reference(keys, n, p) + 1);
      }
    }
  }
}

// The entries end exactly at a page whose successor is unmapped: a vector
// load past the last entry would fault.
TEST(SimdSearch, ReadsNothingPastTheLastEntry) {
  const long page = ::sysconf(_SC_PAGESIZE);
  void* m = ::mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(m, MAP_FAILED);
  char* second = static_cast<char*>(m) + page;
  ASSERT_EQ(::munmap(second, page), 0);
  for (uint32_t n : {1u, 2u, 3u, 5u, 15u}) {
    auto* e = reinterpret_cast<KeyEntry*>(second - 16 * n);
    for (uint32_t i = 0; i < n; ++i) {
      e[i].key.store(10 * (i + 1));
      e[i].other.store(0);
    }
    for (const auto& [name, fn] : levels_on_this_cpu()) {
      EXPECT_EQ(fn(e, n, 10 * n + 5), static_cast<int>(n) - 1) << name << " n=" << n;
      EXPECT_EQ(fn(e, n, 5), -1) << name << " n=" << n;
    }
  }
  for (uint32_t n : {1u, 2u, 3u, 5u, 8u, 9u, 15u, 23u, 31u}) {
    auto* k = reinterpret_cast<std::atomic<uint64_t>*>(second - 8 * n);
    for (uint32_t i = 0; i < n; ++i) k[i].store(10 * (i + 1));
    for (const auto& [name, fn] : count_levels_on_this_cpu()) {
      // A span past the mapping is fine: lanes past n are never loaded.
      EXPECT_EQ(fn(k, n, n + 16, 10 * n + 5), static_cast<int>(n)) << name << " count_le n=" << n;
      EXPECT_EQ(fn(k, n, n + 16, 5), 0) << name << " count_le n=" << n;
      // Spans of a 256 B and a 512 B node (15 and 31 keys): their unrolled
      // paths mask the loads the same way.
      for (uint32_t span : {16u, 32u}) {
        if (n > span) continue;
        EXPECT_EQ(fn(k, n, span, 10 * n + 5), static_cast<int>(n))
            << name << " count_le n=" << n << " span=" << span;
      }
    }
  }
  ::munmap(m, page);
}

// The whole-node searches (single-threaded descents): every slot of the
// node is loaded, so slots past n hold garbage here (random words, and the
// extremes), which the final mask must hide.
TEST(SimdSearch, WholeNodeSearchesIgnoreSlotsPastTheCount) {
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt");
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("popcnt");
  if (!avx2) GTEST_SKIP() << "no AVX2: the whole-node searches are never used here";
  std::mt19937_64 rng(35);
  const uint64_t specials[] = {0, 1, ~uint64_t{0}, uint64_t{1} << 63};
  for (int round = 0; round < 2000; ++round) {
    // Inner node of 31 separators (count_le), 512 B: keys then children.
    alignas(64) std::atomic<uint64_t> node[64];
    alignas(64) KeyEntry entries[28];
    for (auto& w : node) w.store(rng());
    for (auto& e : entries) {
      e.key.store(rng());
      e.other.store(rng());
    }
    const uint32_t n = static_cast<uint32_t>(rng() % 32);  // 0..31
    const uint32_t m = static_cast<uint32_t>(rng() % 29);  // 0..28
    std::vector<uint64_t> keys(n), ekeys(m);
    for (auto& k : keys) k = round % 4 == 0 ? specials[rng() % 4] : rng();
    for (auto& k : ekeys) k = round % 4 == 1 ? specials[rng() % 4] : rng();
    std::sort(keys.begin(), keys.end());
    std::sort(ekeys.begin(), ekeys.end());
    for (uint32_t i = 0; i < n; ++i) node[i].store(keys[i]);
    for (uint32_t i = 0; i < m; ++i) entries[i].key.store(ekeys[i]);
    for (int q = 0; q < 8; ++q) {
      const uint64_t key = q < 4 ? specials[q] : (n > 0 && q == 4 ? keys[rng() % n] : rng());
      const int want = reference(keys, n, key) + 1;  // count of keys <= key
      EXPECT_EQ(static_cast<int>(simd::CountLeAvx2Whole<31>::count(node, n, 31, key)), want);
      const int ewant = reference(ekeys, m, key);
      EXPECT_EQ(simd::LastLeAvx2Whole<28>::last(entries, m, key), ewant);
      if (avx512) {
        EXPECT_EQ(static_cast<int>(simd::CountLeAvx512Whole<31>::count(node, n, 31, key)), want);
        EXPECT_EQ(simd::LastLeAvx512Whole<28>::last(entries, m, key), ewant);
      }
    }
  }
}

using RankFn = void (*)(const uint64_t*, uint32_t, uint8_t*);

// rank_distinct (comparison counting): at every vector level and every n up to 64,
// over distinct keys with the top bit set in some (unsigned order) and the
// extremes, each key's rank is its index in the sorted keys; it reads
// nothing past key n-1; keys that repeat share a rank (what split's
// permutation check relies on to fall back to a sort).
TEST(SimdSearch, RankDistinctGivesEachKeyItsSortedPosition) {
  // The vector levels this CPU has (rank_distinct has no scalar one).
  std::vector<std::pair<const char*, RankFn>> levels;
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2")) levels.emplace_back("avx2", simd::detail::rank_distinct_avx2);
  if (__builtin_cpu_supports("avx512f")) {
    levels.emplace_back("avx512", simd::detail::rank_distinct_avx512);
  }
  if (levels.empty()) GTEST_SKIP() << "no AVX2: rank_distinct returns false (the caller sorts)";
  std::mt19937_64 rng(17);
  for (uint32_t n = 0; n <= simd::kMaxRankKeys; ++n) {
    for (int round = 0; round < 20; ++round) {
      std::vector<uint64_t> keys;
      std::vector<uint64_t> seen;
      while (keys.size() < n) {
        uint64_t k = rng();
        if (round % 4 == 1) k %= 3 * n + 1;  // dense small keys
        if (round % 4 == 2 && keys.size() < 2) k = keys.empty() ? 0 : ~uint64_t{0};
        if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
      }
      std::vector<uint64_t> sorted = keys;
      std::sort(sorted.begin(), sorted.end());
      for (const auto& [name, fn] : levels) {
        std::vector<uint8_t> rank(n + 1, 0xee);
        fn(keys.data(), n, rank.data());
        for (uint32_t i = 0; i < n; ++i) {
          ASSERT_EQ(sorted[rank[i]], keys[i]) << name << " n=" << n << " i=" << i;
        }
        EXPECT_EQ(rank[n], 0xee) << name << ": wrote past rank[n-1]";
      }
    }
  }
  // Repeated keys share a rank: {5, 9, 5} -> {0, 2, 0}.
  const uint64_t dup[] = {5, 9, 5};
  for (const auto& [name, fn] : levels) {
    uint8_t rank[3];
    fn(dup, 3, rank);
    EXPECT_EQ(rank[0], 0) << name;
    EXPECT_EQ(rank[1], 2) << name;
    EXPECT_EQ(rank[2], 0) << name;
  }
  // Nothing past the last key is read: keys end at an unmapped page.
  const long page = ::sysconf(_SC_PAGESIZE);
  void* m = ::mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(m, MAP_FAILED);
  char* second = static_cast<char*>(m) + page;
  ASSERT_EQ(::munmap(second, page), 0);
  for (uint32_t n : {1u, 3u, 7u, 9u, 14u, 57u}) {
    auto* k = reinterpret_cast<uint64_t*>(second - 8 * n);
    for (uint32_t i = 0; i < n; ++i) k[i] = 1000 - 10 * i;  // descending
    for (const auto& [name, fn] : levels) {
      uint8_t rank[simd::kMaxRankKeys];
      fn(k, n, rank);
      for (uint32_t i = 0; i < n; ++i) EXPECT_EQ(rank[i], n - 1 - i) << name << " n=" << n;
    }
  }
  ::munmap(m, page);
  // The dispatcher ranks at a vector level and declines at the scalar one.
  const uint64_t three[] = {30, 10, 20};
  uint8_t rank[3] = {9, 9, 9};
  const bool ranked = simd::rank_distinct(three, 3, rank);
  EXPECT_EQ(ranked, simd::search_level() != simd::Level::kScalar);
  if (ranked) {
    EXPECT_EQ(rank[0], 2);
    EXPECT_EQ(rank[1], 0);
    EXPECT_EQ(rank[2], 1);
  } else {
    EXPECT_EQ(rank[0], 9) << "nothing written when it declines";
  }
}

TEST(SimdSearch, LevelIsNamed) {
  const std::string_view n = simd::level_name(simd::level());
  EXPECT_TRUE(n == "scalar" || n == "avx2" || n == "avx512") << n;
}

}  // namespace
}  // namespace nvindex
