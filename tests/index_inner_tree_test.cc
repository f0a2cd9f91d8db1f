// InnerTree (src/indexes/common/inner_tree.h): bulk build over 1..100000
// leaves at fill 1.0 and 0.7 with every boundary routed; random separator
// inserts against a std::map model; the parallel build giving build()'s tree;
// bad input; and concurrent leaf splits with optimistic readers (run under
// ThreadSanitizer too: Makefile TSAN_TESTS). InnerTreeString: the same for
// byte-string keys (byte-wise order, shorter prefix first, bytes 0x00 and
// 0xff), separators owned by the tree.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "indexes/common/inner_tree.h"

namespace nvindex::inner {
namespace {

/// 1.0 in release, 0.1 under a sanitizer; NVINDEX_TEST_SCALE (0 < x <= 1)
/// overrides.
double scale() {
  if (const char* s = std::getenv("NVINDEX_TEST_SCALE")) {
    const double v = std::atof(s);
    if (v > 0 && v <= 1) return v;
  }
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return 0.1;
#else
  return 1.0;
#endif
}
size_t scaled(size_t n) { return std::max<size_t>(1, static_cast<size_t>(n * scale() + 0.5)); }

uint64_t off_of(size_t i) { return (i + 1) * 64; }  // leaf i's pool offset, never 0

/// n leaves: leaf 0 given low key 3 (build treats it as 0), leaf i >= 1 at
/// low key 4 * i + 1.
std::vector<LeafRef> make_leaves(size_t n) {
  std::vector<LeafRef> v;
  for (size_t i = 0; i < n; ++i) v.emplace_back(i == 0 ? 3 : 4 * i + 1, off_of(i));
  return v;
}

/// Number of "L1" nodes in a dump.
size_t level1_nodes(const std::string& dump) {
  size_t n = 0;
  for (size_t p = dump.find(" L1 "); p != std::string::npos; p = dump.find(" L1 ", p + 1)) ++n;
  return n;
}

struct BuildCase {
  uint32_t node_size;
  double fill;
  size_t leaves;
};

class InnerTreeBuild : public ::testing::TestWithParam<BuildCase> {};

TEST_P(InnerTreeBuild, RoutesEveryBoundary) {
  const BuildCase c = GetParam();
  InnerTree t(c.node_size);
  const std::vector<LeafRef> leaves = make_leaves(c.leaves);
  ASSERT_TRUE(t.build(leaves, c.fill).ok());
  ASSERT_TRUE(t.verify().ok()) << t.verify().ToString();

  // leaves() gives the input back, the first low key as 0.
  std::vector<LeafRef> want = leaves;
  want.front().first = 0;
  EXPECT_EQ(t.leaves(), want);

  // Every boundary: the separator itself routes right, one below routes left.
  for (size_t i = 0; i < c.leaves; ++i) {
    const uint64_t lo = want[i].first;
    const Route r = t.find(lo);
    ASSERT_EQ(r.leaf, off_of(i)) << "key " << lo;
    ASSERT_TRUE(t.validate(r));
    if (i + 1 < c.leaves) {
      const Route below = t.find(want[i + 1].first - 1);
      ASSERT_EQ(below.leaf, off_of(i));
    }
  }
  EXPECT_EQ(t.find(std::numeric_limits<uint64_t>::max()).leaf, off_of(c.leaves - 1));
  EXPECT_EQ(t.find(0).leaf, off_of(0));

  // Shape: level 1 cut into children_per_node(fill) children per node (a
  // lone last child merged left); height between the full-fanout and the
  // cut-fanout bounds; DRAM = nodes x node_size.
  const uint32_t per = t.children_per_node(c.fill);
  size_t l1 = (c.leaves + per - 1) / per;
  if (c.leaves > per && c.leaves % per == 1 && per <= t.capacity()) --l1;
  EXPECT_EQ(level1_nodes(t.dump()), l1);
  auto levels = [](double n, double fanout) {
    uint32_t h = 1;
    for (double x = fanout; x < n; x *= fanout) ++h;
    return h;
  };
  EXPECT_GE(t.height(), levels(static_cast<double>(c.leaves), t.capacity() + 1.0));
  EXPECT_LE(t.height(), levels(static_cast<double>(c.leaves), per));
  EXPECT_EQ(t.dram_bytes(), t.nodes() * c.node_size);
  if (c.leaves == 1) {
    EXPECT_EQ(t.nodes(), 1u);
    EXPECT_EQ(t.height(), 1u);
  }
}

std::vector<BuildCase> build_cases() {
  std::vector<BuildCase> v;
  for (uint32_t ns : {128u, 256u, 4096u}) {
    for (double fill : {1.0, 0.7}) {
      for (size_t n : {1, 2, 14, 15, 16, 1000, 100000}) v.push_back({ns, fill, n});
    }
  }
  return v;
}

INSTANTIATE_TEST_SUITE_P(Sizes, InnerTreeBuild, ::testing::ValuesIn(build_cases()),
                         [](const auto& info) {
                           return "ns" + std::to_string(info.param.node_size) + "_fill" +
                                  std::to_string(static_cast<int>(info.param.fill * 100)) + "_n" +
                                  std::to_string(info.param.leaves);
                         });

TEST(InnerTree, CapacityAndChildrenPerNode) {
  InnerTree t128(128), t256(256), t4k(4096);
  // (node_size - 16) / 16 separators: LB+-tree's 15 keys in 256 B; 255 is
  // the most the 8-bit count holds.
  EXPECT_EQ(t128.capacity(), 7u);
  EXPECT_EQ(t256.capacity(), 15u);
  EXPECT_EQ(t4k.capacity(), 255u);
  EXPECT_EQ(t256.children_per_node(1.0), 16u);
  EXPECT_EQ(t256.children_per_node(0.7), 12u);  // ceil(11.2)
  EXPECT_EQ(t256.children_per_node(0.01), 2u);
  EXPECT_EQ(t128.children_per_node(0.5), 4u);  // ceil(4.0)
  EXPECT_EQ(t256.height(), 0u);
  EXPECT_EQ(t256.nodes(), 0u);
  EXPECT_EQ(t256.find(5).leaf, 0u);  // not built
  EXPECT_FALSE(t256.validate(Route{}));
  EXPECT_TRUE(t256.verify().ok());
}

TEST(InnerTree, BadInputIsRefusedAndKeepsTheTree) {
  InnerTree t(256);
  ASSERT_TRUE(t.build(make_leaves(100)).ok());
  const std::string before = t.dump();
  auto invalid = [](const Status& s) { return s.code() == Code::kInvalidArgument; };
  EXPECT_TRUE(invalid(t.build({})));
  const std::vector<LeafRef> dup{{0, 64}, {5, 128}, {5, 192}};
  EXPECT_TRUE(invalid(t.build(dup)));
  const std::vector<LeafRef> desc{{0, 64}, {9, 128}, {7, 192}};
  EXPECT_TRUE(invalid(t.build(desc)));
  const std::vector<LeafRef> zero{{0, 64}, {9, 0}};
  EXPECT_TRUE(invalid(t.build(zero)));
  EXPECT_TRUE(invalid(t.build(make_leaves(3), 0.0)));
  EXPECT_TRUE(invalid(t.build(make_leaves(3), 1.5)));
  EXPECT_TRUE(invalid(t.build(make_leaves(3), std::nan(""))));
  EXPECT_TRUE(invalid(t.build_segments({}, 2)));
  EXPECT_TRUE(invalid(t.build_segments({{}, {}}, 2)));
  // Ascending within each segment but not across them.
  EXPECT_TRUE(invalid(t.build_segments({{{0, 64}, {10, 128}}, {{10, 192}}}, 2)));
  EXPECT_EQ(t.dump(), before);
  EXPECT_TRUE(t.verify().ok());
}

TEST(InnerTreeDeath, WrongLeftAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  InnerTree t(256);
  ASSERT_TRUE(t.build(make_leaves(10)).ok());
  // Leaf 2 covers [9, 13): 20 - 1 is in leaf 4's range, not leaf 2's.
  EXPECT_DEATH(t.insert_separator(off_of(2), 20, 9999 * 64), "not the leaf covering");
  // sep equal to leaf 2's upper bound 13.
  EXPECT_DEATH(t.insert_separator(off_of(2), 13, 9999 * 64), "upper bound");
  EXPECT_DEATH(InnerTree bad(100), "node_size 100 invalid");
}

// insert_separator's hint: taken when its node is unchanged, has room and
// holds the split leaf between two separators; ignored when stale or when
// the split leaf is not in its node; a wrong `left` aborts with a hint as
// without one (the hinted path keeps the caller-bug checks).
TEST(InnerTreeDeath, HintsRouteAsTheDescentDoes) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  InnerTree t(256);  // fill 0.5: level-1 nodes with room
  const std::vector<LeafRef> leaves = make_leaves(1000);
  ASSERT_TRUE(t.build(leaves, 0.5).ok());
  const Route r = t.find(leaves[3].first);
  ASSERT_EQ(r.leaf, off_of(3));
  ASSERT_EQ(t.find(leaves[4].first).parent, r.parent);
  ASSERT_NE(t.find(leaves[500].first).parent, r.parent);
  // A valid hint and a wrong `left` (leaf 2's range, not 500's).
  EXPECT_DEATH(t.insert_separator(off_of(500), leaves[2].first + 2, off_of(5000), &r),
               "not the leaf covering");
  // Valid, the split leaf (4) interior to the hinted node: taken.
  t.insert_separator(off_of(4), leaves[4].first + 2, off_of(5001), &r);
  ASSERT_FALSE(t.validate(r));
  // Stale now: ignored, the descent routes.
  t.insert_separator(off_of(5), leaves[5].first + 2, off_of(5002), &r);
  // Valid, but the split leaf (500) is in another node: the descent routes.
  const Route r2 = t.find(leaves[3].first);
  t.insert_separator(off_of(500), leaves[500].first + 2, off_of(5003), &r2);
  EXPECT_EQ(t.find(leaves[4].first + 1).leaf, off_of(4));
  EXPECT_EQ(t.find(leaves[4].first + 2).leaf, off_of(5001));
  EXPECT_EQ(t.find(leaves[5].first + 2).leaf, off_of(5002));
  EXPECT_EQ(t.find(leaves[500].first + 2).leaf, off_of(5003));
  EXPECT_EQ(t.find(leaves[500].first).leaf, off_of(500));
  EXPECT_EQ(t.find(leaves[3].first).leaf, off_of(3));
  EXPECT_TRUE(t.verify().ok()) << t.verify().ToString();
}

TEST(InnerTree, ValidateFailsExactlyWhenTheRoutingNodeChanged) {
  InnerTree t(256);  // fill 1.0: leaves 0..14 under the first level-1 node
  const std::vector<LeafRef> leaves = make_leaves(1000);
  ASSERT_TRUE(t.build(leaves, 1.0).ok());
  const Route r = t.find(leaves[3].first);
  ASSERT_EQ(r.leaf, off_of(3));
  ASSERT_TRUE(t.validate(r));
  // A split far away (its full level-1 node splits, upper levels change):
  // r's level-1 node is untouched.
  t.insert_separator(off_of(500), leaves[500].first + 2, off_of(5000));
  EXPECT_TRUE(t.validate(r));
  // A split of a sibling leaf under the same level-1 node (which is full, so
  // it splits too): r is stale.
  t.insert_separator(off_of(5), leaves[5].first + 2, off_of(5001));
  EXPECT_FALSE(t.validate(r));
  const Route again = t.find(leaves[3].first);
  EXPECT_EQ(again.leaf, off_of(3));
  EXPECT_TRUE(t.validate(again));
  EXPECT_NE(again.version, r.version);
  // A split of leaf 3 itself into a level-1 node with room: stale again, and
  // the new route gives the new upper bound.
  t.insert_separator(off_of(3), leaves[3].first + 2, off_of(5002));
  EXPECT_FALSE(t.validate(again));
  const Route third = t.find(leaves[3].first);
  EXPECT_EQ(third.leaf, off_of(3));
  EXPECT_EQ(t.find(leaves[3].first + 1).leaf, off_of(3));
  EXPECT_EQ(t.find(leaves[3].first + 2).leaf, off_of(5002));
  EXPECT_TRUE(t.verify().ok()) << t.verify().ToString();
}

/// Model: low key -> leaf offset. The leaf covering k is upper_bound(k) - 1.
using Model = std::map<uint64_t, uint64_t>;

uint64_t model_leaf(const Model& m, uint64_t k) { return std::prev(m.upper_bound(k))->second; }

void check_key(const InnerTree& t, const Model& m, uint64_t k) {
  const Route r = t.find(k);
  ASSERT_EQ(r.leaf, model_leaf(m, k)) << "key " << k;
  ASSERT_TRUE(t.validate(r));
}

void check_all(const InnerTree& t, const Model& m) {
  ASSERT_TRUE(t.verify().ok()) << t.verify().ToString();
  const std::vector<LeafRef> got = t.leaves();
  ASSERT_EQ(got, std::vector<LeafRef>(m.begin(), m.end()));
}

enum class Order { kRandom, kAscending, kDescending };

struct ModelCase {
  uint32_t node_size;
  size_t initial;  // leaves built first (fill 0.7)
  Order order;
  uint64_t seed;
};

class InnerTreeModel : public ::testing::TestWithParam<ModelCase> {};

// Also covers insert_separator's hint: a fresh Route skips the descent when
// its node has room, a stale one (its node changed since) is ignored.
TEST_P(InnerTreeModel, InsertSeparatorsMatchesStdMap) {
  const ModelCase c = GetParam();
  InnerTree t(c.node_size);
  Model m;
  std::vector<LeafRef> init = make_leaves(c.initial);
  init.front().first = 0;
  for (const LeafRef& l : init) m.emplace(l.first, l.second);
  ASSERT_TRUE(t.build(init, 0.7).ok());
  uint64_t next_off = off_of(c.initial);
  std::mt19937_64 rng(c.seed);
  const size_t n = scaled(20000);
  // Keys above 4 * initial + 1 so they never collide with the built leaves.
  const uint64_t base = 4 * c.initial + 8;
  for (size_t i = 0; i < n; ++i) {
    uint64_t sep = 0;
    switch (c.order) {
      case Order::kRandom:
        do {
          sep = (i % 2 == 0) ? base + rng() % (n * 8) : rng();
        } while (sep == 0 || m.count(sep) != 0);
        break;
      case Order::kAscending:
        sep = base + 3 * i;
        break;
      case Order::kDescending:
        sep = base + 3 * (n - i);
        break;
    }
    // The hint (a Route for a key of `left`): none, a fresh one, or (random
    // order) one taken before another separator went in, which may have
    // changed its node (then it must be ignored, not followed).
    std::optional<Route> hint;
    if (i % 3 == 1) hint = t.find_single(sep - 1);
    if (i % 3 == 2 && c.order == Order::kRandom) {
      hint = t.find(sep - 1);
      uint64_t other = 0;
      do {
        other = base + rng() % (n * 8);
      } while (other == sep || m.count(other) != 0);
      t.insert_separator(model_leaf(m, other), other, next_off);
      m.emplace(other, next_off);
      next_off += 64;
    }
    const uint64_t left = model_leaf(m, sep);
    t.insert_separator(left, sep, next_off, hint ? &*hint : nullptr);
    m.emplace(sep, next_off);
    next_off += 64;
    check_key(t, m, sep);
    check_key(t, m, sep - 1);
    check_key(t, m, rng());
    if ((i + 1) % 1000 == 0) check_all(t, m);
    if (::testing::Test::HasFatalFailure()) return;
  }
  check_all(t, m);
  for (const auto& [lo, leaf] : m) {
    check_key(t, m, lo);
    if (lo > 0) check_key(t, m, lo - 1);
    if (::testing::Test::HasFatalFailure()) return;
  }
  EXPECT_GE(t.height(), 2u);
}

INSTANTIATE_TEST_SUITE_P(Orders, InnerTreeModel,
                         ::testing::Values(ModelCase{128, 1, Order::kRandom, 1},
                                           ModelCase{256, 1, Order::kRandom, 2},
                                           ModelCase{256, 500, Order::kRandom, 3},
                                           ModelCase{512, 37, Order::kRandom, 4},
                                           ModelCase{128, 1, Order::kAscending, 5},
                                           ModelCase{256, 15, Order::kAscending, 6},
                                           ModelCase{128, 1, Order::kDescending, 7},
                                           ModelCase{256, 100, Order::kDescending, 8}));

/// Splits `all` into segments: every one but the last a multiple of `per`
/// leaves (zero allowed), the last whatever remains.
std::vector<std::vector<LeafRef>> aligned_segments(const std::vector<LeafRef>& all, uint32_t per,
                                                   std::mt19937_64* rng) {
  std::vector<std::vector<LeafRef>> segs;
  size_t at = 0;
  while (at < all.size()) {
    size_t take = per * ((*rng)() % 5);
    if (take >= all.size() - at || (*rng)() % 4 == 0) take = all.size() - at;
    segs.emplace_back(all.begin() + at, all.begin() + at + take);
    at += take;
  }
  if ((*rng)() % 2 == 0) segs.insert(segs.begin(), std::vector<LeafRef>{});
  return segs;
}

TEST(InnerTree, ParallelBuildIsIdenticalToBuild) {
  std::mt19937_64 rng(42);
  for (uint32_t ns : {128u, 256u}) {
    for (double fill : {1.0, 0.7}) {
      InnerTree probe(ns);
      const uint32_t per = probe.children_per_node(fill);
      for (size_t n : {size_t{1}, size_t{2}, size_t{per}, size_t{per} + 1, size_t{per} * 7 + 1,
                       size_t{1000}, size_t{5000}}) {
        const std::vector<LeafRef> leaves = make_leaves(n);
        InnerTree ref(ns);
        ASSERT_TRUE(ref.build(leaves, fill).ok());
        for (unsigned threads : {1u, 2u}) {
          for (int round = 0; round < 3; ++round) {
            const auto segs = aligned_segments(leaves, per, &rng);
            InnerTree par(ns);
            ASSERT_TRUE(par.build_segments(segs, threads, fill).ok());
            ASSERT_TRUE(par.verify().ok()) << par.verify().ToString();
            ASSERT_EQ(par.dump(), ref.dump())
                << "ns " << ns << " fill " << fill << " n " << n << " threads " << threads
                << " segments " << segs.size();
            EXPECT_EQ(par.leaves(), ref.leaves());
            EXPECT_EQ(par.height(), ref.height());
            EXPECT_EQ(par.nodes(), ref.nodes());
          }
        }
      }
    }
  }
}

TEST(InnerTree, ParallelBuildUnalignedSegmentsRouteCorrectly) {
  std::mt19937_64 rng(7);
  const std::vector<LeafRef> leaves = make_leaves(3000);
  std::vector<std::vector<LeafRef>> segs;
  for (size_t at = 0; at < leaves.size();) {
    const size_t take = std::min<size_t>(leaves.size() - at, 1 + rng() % 40);
    segs.emplace_back(leaves.begin() + at, leaves.begin() + at + take);
    at += take;
  }
  InnerTree t(256);
  ASSERT_TRUE(t.build_segments(segs, 4, 1.0).ok());
  ASSERT_TRUE(t.verify().ok()) << t.verify().ToString();
  std::vector<LeafRef> want = leaves;
  want.front().first = 0;
  ASSERT_EQ(t.leaves(), want);
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(t.find(want[i].first).leaf, off_of(i));
    if (i > 0) {
      ASSERT_EQ(t.find(want[i].first - 1).leaf, off_of(i - 1));
    }
  }
  // A rebuilt tree takes separators like a fresh one.
  Model m(want.begin(), want.end());
  for (uint64_t k = 2; k < 4 * 3000; k += 4) {
    t.insert_separator(model_leaf(m, k), k, off_of(3000 + k));
    m.emplace(k, off_of(3000 + k));
  }
  check_all(t, m);
}

/// Leaves of the concurrent tests: each a key range [lo, hi) behind a mutex.
template <class K>
struct RangeLeaf {
  std::mutex mu;
  OwnedKey<K> lo{};
  OwnedKey<K> hi{};
  bool has_hi = false;
};

/// Two writers split the leaf covering a random key (gen(&rng)) at that key,
/// two readers route random keys, all with inner_tree.h's find / lock leaf /
/// validate protocol, until max_leaves leaves exist; every leaf locked must
/// cover its key, and the final tree must route exactly the leaves' ranges.
template <class K, class Gen>
void concurrent_splits(uint32_t ns, size_t max_leaves, Gen gen) {
  std::unique_ptr<RangeLeaf<K>[]> leaves(new RangeLeaf<K>[max_leaves]);
  auto leaf_of = [&](uint64_t off) -> RangeLeaf<K>& { return leaves[off / 64 - 1]; };
  InnerTreeT<K> t(ns);
  const std::vector<LeafRefT<K>> first{{OwnedKey<K>{}, off_of(0)}};
  ASSERT_TRUE(t.build(first).ok());
  std::atomic<size_t> next{1};
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> bad{0}, checked{0}, retries{0};

  // Find the leaf covering key and lock it (the protocol in inner_tree.h).
  auto lock_leaf = [&](const OwnedKey<K>& key, Route* r) -> RangeLeaf<K>& {
    while (true) {
      *r = t.find(key);
      RangeLeaf<K>& l = leaf_of(r->leaf);
      l.mu.lock();
      if (t.validate(*r)) return l;
      l.mu.unlock();
      retries.fetch_add(1, std::memory_order_relaxed);
    }
  };
  auto check = [&](const RangeLeaf<K>& l, const OwnedKey<K>& key) {
    const bool ok = l.lo <= key && (!l.has_hi || key < l.hi);
    if (!ok) bad.fetch_add(1, std::memory_order_relaxed);
    checked.fetch_add(1, std::memory_order_relaxed);
  };

  auto writer = [&](uint64_t seed) {
    std::mt19937_64 rng(seed);
    while (true) {
      const OwnedKey<K> key = gen(&rng);
      Route r;
      RangeLeaf<K>& l = lock_leaf(key, &r);
      check(l, key);
      if (key != l.lo) {  // lo < key < hi: split the leaf at key
        const size_t id = next.fetch_add(1);
        if (id >= max_leaves) {
          l.mu.unlock();
          break;
        }
        RangeLeaf<K>& nl = leaves[id];
        {
          std::lock_guard<std::mutex> g(nl.mu);
          nl.lo = key;
          nl.hi = l.hi;
          nl.has_hi = l.has_hi;
        }
        t.insert_separator(r.leaf, key, off_of(id));
        l.hi = key;
        l.has_hi = true;
      }
      l.mu.unlock();
    }
  };
  auto reader = [&](uint64_t seed) {
    std::mt19937_64 rng(seed);
    while (!stop.load(std::memory_order_relaxed)) {
      const OwnedKey<K> key = gen(&rng);
      // Lock-free route only: a leaf that exists.
      const Route lf = t.find(key);
      if (lf.leaf == 0 || lf.leaf / 64 - 1 >= next.load()) bad.fetch_add(1);
      Route r;
      RangeLeaf<K>& l = lock_leaf(key, &r);
      check(l, key);
      l.mu.unlock();
    }
  };
  std::vector<std::thread> ws, rs;
  for (int i = 0; i < 2; ++i) ws.emplace_back(writer, 100 + i);
  for (int i = 0; i < 2; ++i) rs.emplace_back(reader, 200 + i);
  for (std::thread& w : ws) w.join();
  stop.store(true);
  for (std::thread& r : rs) r.join();

  EXPECT_EQ(bad.load(), 0u) << "of " << checked.load() << " checks";
  EXPECT_GT(checked.load(), max_leaves);
  ASSERT_TRUE(t.verify().ok()) << t.verify().ToString();
  // The tree holds exactly the leaves' ranges, contiguous from the smallest key.
  const std::vector<LeafRefT<K>> got = t.leaves();
  ASSERT_EQ(got.size(), max_leaves);
  for (size_t i = 0; i < got.size(); ++i) {
    const RangeLeaf<K>& l = leaf_of(got[i].second);
    ASSERT_EQ(l.lo, got[i].first);
    ASSERT_EQ(l.has_hi, i + 1 < got.size());
    if (l.has_hi) {
      ASSERT_EQ(l.hi, got[i + 1].first);
    }
  }
  EXPECT_GE(t.height(), 3u);
  std::printf("node size %u: %zu leaves, %llu checks, %llu validation retries, height %u\n", ns,
              max_leaves, static_cast<unsigned long long>(checked.load()),
              static_cast<unsigned long long>(retries.load()), t.height());
}

TEST(InnerTreeConcurrent, SplitsWithOptimisticReaders) {
  for (uint32_t ns : {128u, 256u}) {
    // Not scaled down much: this is the part the sanitizers are for.
    concurrent_splits<uint64_t>(ns, std::max<size_t>(scaled(30000), 20000),
                                [](std::mt19937_64* rng) { return (*rng)(); });
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// ---- String keys (InnerTreeString) ----

/// A random key of 0..10 bytes over an alphabet that stresses byte order:
/// 0x00, 0x01, 'a', 'b', 0x7f, 0x80, 0xff (shorter prefixes, bytes above
/// 0x7f compare as unsigned).
std::string random_key(std::mt19937_64* rng) {
  static constexpr char kAlpha[] = {'\x00', '\x01', 'a', 'b', '\x7f', '\x80', '\xff'};
  std::string k((*rng)() % 11, '\0');
  for (char& c : k) c = kAlpha[(*rng)() % sizeof(kAlpha)];
  return k;
}

/// n distinct sorted keys (the first "").
std::vector<std::string> sorted_keys(size_t n, std::mt19937_64* rng) {
  std::set<std::string> s{""};
  while (s.size() < n) s.insert(random_key(rng) + random_key(rng));
  return {s.begin(), s.end()};
}

using StringModel = std::map<std::string, uint64_t>;

uint64_t model_leaf(const StringModel& m, std::string_view k) {
  return std::prev(m.upper_bound(std::string(k)))->second;
}

void check_key(const InnerTreeString& t, const StringModel& m, std::string_view k) {
  const Route r = t.find(k);
  ASSERT_EQ(r.leaf, model_leaf(m, k)) << "key " << ::testing::PrintToString(std::string(k));
  ASSERT_TRUE(t.validate(r));
}

TEST(InnerTreeString, BuildRoutesEveryKeyAndOwnsItsSeparators) {
  std::mt19937_64 rng(11);
  for (uint32_t ns : {128u, 512u}) {
    for (size_t n : {size_t{1}, size_t{2}, size_t{100}, size_t{3000}}) {
      // Every other sorted key is a leaf's low key; the keys between them
      // (and below and above all) are probes.
      const std::vector<std::string> keys = sorted_keys(2 * n + 1, &rng);
      InnerTreeString t(ns);
      StringModel m;
      {
        std::vector<InnerTreeString::LeafRef> leaves;
        for (size_t i = 0; i < n; ++i) leaves.emplace_back(keys[2 * i], off_of(i));
        leaves.front().first = keys[1];  // treated as ""
        ASSERT_TRUE(t.build(leaves, 0.7).ok());
        for (size_t i = 0; i < n; ++i) m.emplace(i == 0 ? "" : keys[2 * i], off_of(i));
        // Scribble over the caller's strings: the tree keeps its own copies.
        for (auto& l : leaves) std::fill(l.first.begin(), l.first.end(), '\xee');
      }
      ASSERT_TRUE(t.verify().ok()) << t.verify().ToString();
      ASSERT_EQ(t.leaves(), std::vector<InnerTreeString::LeafRef>(m.begin(), m.end()));
      for (const std::string& k : keys) {
        check_key(t, m, k);
        check_key(t, m, k + std::string(1, '\0'));
        if (::testing::Test::HasFatalFailure()) return;
      }
      check_key(t, m, std::string(255, '\xff'));
      EXPECT_GE(t.dram_bytes(), t.nodes() * ns);
      if (n == 3000) {
        EXPECT_GE(t.height(), 2u);
      }
    }
  }
}

TEST(InnerTreeString, InsertSeparatorsMatchesStdMap) {
  for (uint32_t ns : {128u, 512u}) {
    std::mt19937_64 rng(ns);
    InnerTreeString t(ns);
    StringModel m{{"", off_of(0)}};
    const std::vector<InnerTreeString::LeafRef> first{{"", off_of(0)}};
    ASSERT_TRUE(t.build(first).ok());
    uint64_t next = off_of(1);
    const size_t n = scaled(20000);
    for (size_t i = 0; i < n; ++i) {
      std::string sep;
      do {
        sep = random_key(&rng) + random_key(&rng);
      } while (sep.empty() || m.count(sep) != 0);
      {
        const std::string copy = sep;  // the tree must not keep the caller's bytes
        t.insert_separator(model_leaf(m, copy), copy, next);
      }
      m.emplace(sep, next);
      next += 64;
      check_key(t, m, sep);
      check_key(t, m, sep.substr(0, sep.size() - 1));
      check_key(t, m, random_key(&rng));
      if (::testing::Test::HasFatalFailure()) return;
    }
    ASSERT_TRUE(t.verify().ok()) << t.verify().ToString();
    ASSERT_EQ(t.leaves(), std::vector<InnerTreeString::LeafRef>(m.begin(), m.end()));
    EXPECT_GE(t.height(), 3u);
    // dump() quotes separators (bytes above 0x7e and below 0x20 escaped).
    EXPECT_NE(t.dump().find("\\x"), std::string::npos);
  }
}

TEST(InnerTreeString, ParallelBuildIsIdenticalToBuild) {
  std::mt19937_64 rng(5);
  const std::vector<std::string> keys = sorted_keys(2000, &rng);
  std::vector<InnerTreeString::LeafRef> leaves;
  for (size_t i = 0; i < keys.size(); ++i) leaves.emplace_back(keys[i], off_of(i));
  for (double fill : {1.0, 0.7}) {
    InnerTreeString ref(256);
    ASSERT_TRUE(ref.build(leaves, fill).ok());
    const uint32_t per = ref.children_per_node(fill);
    std::vector<std::vector<InnerTreeString::LeafRef>> segs;
    for (size_t at = 0; at < leaves.size();) {
      const size_t take = std::min<size_t>(leaves.size() - at, per * (1 + rng() % 4));
      segs.emplace_back(leaves.begin() + at, leaves.begin() + at + take);
      at += take;
    }
    InnerTreeString par(256);
    ASSERT_TRUE(par.build_segments(segs, 2, fill).ok());
    ASSERT_TRUE(par.verify().ok()) << par.verify().ToString();
    EXPECT_EQ(par.dump(), ref.dump());
    EXPECT_EQ(par.leaves(), ref.leaves());
  }
}

TEST(InnerTreeString, BadInputIsRefused) {
  InnerTreeString t(256);
  auto invalid = [](const Status& s) { return s.code() == Code::kInvalidArgument; };
  // "ab" < "b" < "ba": byte order, a prefix first.
  const std::vector<InnerTreeString::LeafRef> ok{{"", 64}, {"ab", 128}, {"b", 192}, {"ba", 256}};
  ASSERT_TRUE(t.build(ok).ok());
  const std::string before = t.dump();
  const std::vector<InnerTreeString::LeafRef> dup{{"", 64}, {"a", 128}, {"a", 192}};
  EXPECT_TRUE(invalid(t.build(dup)));
  const std::vector<InnerTreeString::LeafRef> desc{{"", 64}, {"b", 128}, {"ab", 192}};
  EXPECT_TRUE(invalid(t.build(desc)));
  // 0x80 sorts after 0x7f (unsigned bytes).
  const std::vector<InnerTreeString::LeafRef> sign{{"", 64}, {"\x80", 128}, {"\x7f", 192}};
  EXPECT_TRUE(invalid(t.build(sign)));
  EXPECT_EQ(t.dump(), before);
  EXPECT_EQ(t.find("a").leaf, 64u);
  EXPECT_EQ(t.find("ab").leaf, 128u);
  EXPECT_EQ(t.find("azzz").leaf, 128u);
  EXPECT_EQ(t.find("b").leaf, 192u);
  EXPECT_EQ(t.find("b\xff").leaf, 256u);
}

TEST(InnerTreeStringDeath, SmallestSeparatorAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  InnerTreeString t(256);
  const std::vector<InnerTreeString::LeafRef> two{{"", 64}, {"m", 128}};
  ASSERT_TRUE(t.build(two).ok());
  EXPECT_DEATH(t.insert_separator(64, "", 192), "smallest key");
  EXPECT_DEATH(t.insert_separator(64, "n", 192), "not the leaf covering");
  EXPECT_DEATH(t.insert_separator(64, "m", 192), "upper bound");
}

TEST(InnerTreeStringConcurrent, SplitsWithOptimisticReaders) {
  // Readers compare against separator records while writers move their
  // words between nodes.
  concurrent_splits<std::string_view>(
      128, std::max<size_t>(scaled(20000), 5000),
      [](std::mt19937_64* rng) { return random_key(rng) + random_key(rng); });
}

}  // namespace
}  // namespace nvindex::inner
