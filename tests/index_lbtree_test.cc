// lbtree (LB+-tree, Liu et al. VLDB'20), what is specific to its design (the
// conformance suite, tests/index_conformance_test.cc, holds what every index
// must do): PM footprint, entry moving (PM line writes per insert, header
// line freed), bulk load at a fill factor, recovery (empty leaves without
// separators, stale anchors, parallel rebuild equal to the serial one,
// rebuild times, damaged pools), concurrency at every leaf size; string keys
// (insert cost against integer keys, key records freed on remove and marked
// once by recovery, readers racing removes); a damaged leaf's split. The logless
// split and the bulk load under the crash simulator are in
// crash_lbtree_images_test.cc.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "indexes/common/fingerprint.h"
#include "indexes/lbtree/lbtree.h"
#include "nvindex/index.h"
#include "nvindex/pm/allocator.h"
#include "nvindex/pm/counters.h"
#include "nvindex/pm/pool.h"
#include "support/model_check.h"

namespace nvindex {
namespace {

using lbtree::LbTree;
using lbtree::Leaf;
using testing::open_test_index;
using testing::run_concurrent_test;
using testing::run_model_test;
using testing::TestIndex;

LbTree& lb(TestIndex& t) { return static_cast<LbTree&>(*t.index); }

/// Live bitmap of block j of a leaf.
uint64_t bitmap(const Leaf& l, uint32_t j) {
  return lbtree::load_header(l.live_hdr(j, l.alt())).bitmap();
}

// The integer fingerprint is stored in PM leaves, so it is a format: the
// low byte of XXH3_64bits over the key's 8 bytes. fingerprint() computes it
// by XXH3's 4..8-byte path; these values were printed by libxxhash's own
// XXH3_64bits (0.8.1, not inlined), and the rest is checked against
// XXH3_64bits as xxhash.h inlines it.
TEST(LbTree, FingerprintIsTheLowByteOfXxh3) {
  EXPECT_EQ(fingerprint(uint64_t{0}), 0xd9);
  EXPECT_EQ(fingerprint(uint64_t{1}), 0x2e);
  EXPECT_EQ(fingerprint(uint64_t{42}), 0xc8);
  EXPECT_EQ(fingerprint(uint64_t{0xdeadbeefcafef00d}), 0xa8);
  EXPECT_EQ(fingerprint(UINT64_MAX), 0x13);
  EXPECT_EQ(fingerprint(uint64_t{1} << 63), 0x5f);
  std::mt19937_64 rng(35);
  for (int i = 0; i < 100000; ++i) {
    const uint64_t k = rng();
    ASSERT_EQ(fingerprint(k), static_cast<uint8_t>(XXH3_64bits(&k, sizeof(k)))) << k;
  }
}

TEST(LbTree, InfoClaims) {
  TestIndex t;
  ASSERT_TRUE(open_test_index("lbtree", 768, &t, 16ull << 20).ok());
  const IndexInfo i = t.index->info();
  EXPECT_EQ(i.caps.placement, Placement::kSelective);
  // 768 B leaves occupy 1 KiB allocator blocks: root object (1 KiB) + head.
  EXPECT_EQ(t.pool->allocator().bytes_in_use(), 2048u);
}

// ------------------------------------------------------------ entry moving

// Algorithm 2: inserts go to free slots of the header line (line 0) while
// there are any, one PM line write each; an insert into a leaf whose line 0
// is full writes the entry into another line, moves line 0's entries there,
// and leaves line 0 free, for two line writes.
TEST(LbTreeEntryMoving, FullLineZeroIsEmptiedByTheNextInsert) {
  TestIndex t;
  ASSERT_TRUE(open_test_index("lbtree", 256, &t, 16ull << 20).ok());
  LbTree& tree = lb(t);
  const Leaf head = tree.leaf(tree.head());
  for (uint64_t k = 1; k <= 3; ++k) {
    const pm::CounterSnapshot a = pm::snapshot();
    ASSERT_TRUE(tree.insert(k * 10, k).ok());
    const pm::CounterSnapshot d = pm::snapshot() - a;
    EXPECT_EQ(d.lines_flushed, 1u) << "insert into a free slot of line 0 is one line write";
    EXPECT_EQ(d.naws, 1u);
  }
  EXPECT_EQ(bitmap(head, 0), 0x7u) << "the first three inserts fill line 0";
  const pm::CounterSnapshot a = pm::snapshot();
  ASSERT_TRUE(tree.insert(40, 4).ok());
  const pm::CounterSnapshot d = pm::snapshot() - a;
  EXPECT_EQ(d.lines_flushed, 2u) << "entry moving: the target line, then the header line";
  // Line 1 (4 free slots) took the new entry and line 0's three entries.
  EXPECT_EQ(bitmap(head, 0) & lbtree::line_mask(0), 0u) << "line 0 free again";
  EXPECT_EQ(bitmap(head, 0), 0x78u);
  for (uint64_t k = 1; k <= 4; ++k) EXPECT_EQ(tree.lookup(k * 10), k);
  // The next three inserts are one line write each again.
  for (uint64_t k = 5; k <= 7; ++k) {
    const pm::CounterSnapshot b = pm::snapshot();
    ASSERT_TRUE(tree.insert(k * 10, k).ok());
    EXPECT_EQ((pm::snapshot() - b).lines_flushed, 1u);
  }
  VerifyReport r;
  ASSERT_TRUE(tree.verify(&r).ok());
  EXPECT_EQ(r.keys, 7u);
}

/// A tree of `size` B leaves (16 MiB pool) holding one full leaf: keys 10,
/// 20, ..., 10 * capacity, key 10k with value k.
void fill_one_leaf(uint32_t size, TestIndex* t) {
  ASSERT_TRUE(open_test_index("lbtree", size, t, 16ull << 20).ok());
  LbTree& tree = lb(*t);
  const uint32_t cap = tree.leaf(tree.head()).capacity();
  for (uint64_t k = 1; k <= cap; ++k) ASSERT_TRUE(tree.insert(k * 10, k).ok());
  ASSERT_EQ(tree.chain_leaves(), 1u);
}

// After a split the new leaf holds the upper half in its last slots, so its
// header line is free in every 256 B block (distributed headers included).
TEST(LbTreeEntryMoving, NewLeafAfterSplitHasAFreeHeaderLine) {
  for (uint32_t size : {256u, 512u, 768u, 1024u}) {
    TestIndex t;
    ASSERT_NO_FATAL_FAILURE(fill_one_leaf(size, &t));
    LbTree& tree = lb(t);
    const uint32_t cap = tree.leaf(tree.head()).capacity();
    const uint64_t smo = pm::snapshot().smos;
    ASSERT_TRUE(tree.insert(5, 0).ok());  // below the separator: goes left
    EXPECT_EQ(pm::snapshot().smos, smo + 1) << "one SMO per split";
    ASSERT_EQ(tree.chain_leaves(), 2u);
    const Leaf l = tree.leaf(tree.head());
    const uint64_t noff = l.sibling(l.alt()).load();
    ASSERT_NE(noff, 0u);
    const Leaf n = tree.leaf(noff);
    uint32_t left = 0, right = 0;
    for (uint32_t j = 0; j < l.blocks; ++j) {
      EXPECT_EQ(bitmap(n, j) & lbtree::line_mask(n.header_line(j, n.alt())), 0u)
          << size << " B leaf, block " << j << ": the new leaf's header line is free";
      EXPECT_EQ(__builtin_popcountll(bitmap(n, j)), 7) << size << " block " << j;
      left += __builtin_popcountll(bitmap(l, j));
      right += __builtin_popcountll(bitmap(n, j));
    }
    EXPECT_EQ(left, cap / 2 + 1);
    EXPECT_EQ(right, cap / 2);
    EXPECT_TRUE(l.alt()) << "the split flipped the old leaf's alt bit";
    VerifyReport r;
    ASSERT_TRUE(tree.verify(&r).ok()) << size;
    EXPECT_EQ(r.keys, cap + 1);
  }
}

// A leaf that holds a key twice (damage: no operation makes one) still
// splits whole: the split's comparison counting gives ranks that are not a
// permutation (the duplicated largest key leaves the top rank unset, in
// the half that moves), so it falls back to std::sort, and the two leaves
// then hold every entry the full leaf held, the new key added. verify()
// names the duplicate. At 1, 2 and 4 blocks a leaf.
TEST(LbTreeSplit, ALeafHoldingAKeyTwiceStillSplitsWhole) {
  for (uint32_t size : {256u, 512u, 1024u}) {
    TestIndex t;
    ASSERT_NO_FATAL_FAILURE(fill_one_leaf(size, &t));
    LbTree& tree = lb(t);
    const uint32_t cap = tree.leaf(tree.head()).capacity();
    // Damage: the slot of the second largest key now holds the largest,
    // with its value and fingerprint (so that only the duplicate is wrong).
    const uint64_t top = uint64_t{cap} * 10;
    const Leaf l = tree.leaf(tree.head());
    bool damaged = false;
    for (uint32_t j = 0; j < l.blocks && !damaged; ++j) {
      for (uint64_t m = bitmap(l, j); m != 0 && !damaged; m &= m - 1) {
        const uint32_t i = static_cast<uint32_t>(__builtin_ctzll(m));
        if (l.ent(j, i).key.load() == top - 10) {
          l.ent(j, i).key.store(top);
          l.ent(j, i).value.store(cap);
          std::atomic<uint64_t>* hdr = l.live_hdr(j, l.alt());
          lbtree::Header h = lbtree::load_header(hdr);
          h.set_fp(i, fingerprint(top));
          hdr[0].store(h.w0);
          hdr[1].store(h.w1);
          damaged = true;
        }
      }
    }
    ASSERT_TRUE(damaged) << size;
    ASSERT_TRUE(tree.insert(5, 0).ok()) << size << ": the full leaf splits";
    ASSERT_EQ(tree.chain_leaves(), 2u) << size;
    // Every entry of the two leaves, as (key, value) pairs.
    std::multiset<std::pair<uint64_t, uint64_t>> got, want;
    for (uint64_t k = 1; k + 1 < cap; ++k) want.insert({k * 10, k});
    want.insert({top, cap});
    want.insert({top, cap});
    want.insert({5, 0});
    const Leaf left = tree.leaf(tree.head());
    for (const Leaf& x : {left, tree.leaf(left.sibling(left.alt()).load())}) {
      for (uint32_t j = 0; j < x.blocks; ++j) {
        for (uint64_t m = bitmap(x, j); m != 0; m &= m - 1) {
          const uint32_t i = static_cast<uint32_t>(__builtin_ctzll(m));
          got.insert({x.ent(j, i).key.load(), x.ent(j, i).value.load()});
        }
      }
    }
    EXPECT_EQ(got, want) << size << " B leaves";
    VerifyReport r;
    const Status v = tree.verify(&r);
    EXPECT_EQ(v.code(), Code::kCorruption) << size << ": " << v.ToString();
    EXPECT_NE(v.ToString().find("duplicate key"), std::string::npos) << v.ToString();
  }
}

// ------------------------------------------------------------ pool files

/// A pool file in /dev/shm, removed at the end.
struct ShmFile {
  std::string path;
  explicit ShmFile(const std::string& tag)
      : path("/dev/shm/nvindex_lbtree_" + tag + "_" + std::to_string(getpid()) + ".pool") {
    std::remove(path.c_str());
  }
  ~ShmFile() { std::remove(path.c_str()); }
};

// ------------------------------------------------------------ bulk load

TEST(LbTreeBulkLoad, FillFactorsAndLaterInserts) {
  for (double fill : {0.7, 1.0}) {
    for (uint32_t size : {256u, 768u}) {
      std::unique_ptr<pm::Pool> pool;
      ASSERT_TRUE(pm::Pool::create_anonymous(64ull << 20, "lbtree", &pool).ok());
      IndexOptions o;
      o.pool = pool.get();
      o.node_size = size;
      o.fill_factor = fill;
      std::unique_ptr<Index<uint64_t>> idx;
      ASSERT_TRUE(make_index<uint64_t>("lbtree", o, &idx).ok());
      std::vector<std::pair<uint64_t, Value>> pairs;
      for (uint64_t i = 0; i < 20000; ++i) pairs.emplace_back(i * 4, i);
      ASSERT_TRUE(idx->bulk_load(pairs).ok());
      LbTree& tree = static_cast<LbTree&>(*idx);
      const uint32_t cap = 14 * (size / 256);
      const uint32_t per = static_cast<uint32_t>(std::ceil(fill * cap - 1e-9));
      VerifyReport r;
      ASSERT_TRUE(idx->verify(&r).ok());
      EXPECT_EQ(r.keys, 20000u);
      EXPECT_EQ(r.leaves, (20000 + per - 1) / per) << fill << " " << size;
      const uint64_t noff = tree.leaf(tree.head()).sibling(tree.leaf(tree.head()).alt()).load();
      EXPECT_EQ(lbtree::leaf_count(tree.leaf(noff)), per);
      if (fill < 1) {
        // The header lines stay free below capacity.
        const Leaf n = tree.leaf(noff);
        for (uint32_t j = 0; j < n.blocks; ++j) {
          EXPECT_EQ(bitmap(n, j) & lbtree::line_mask(n.header_line(j, n.alt())), 0u);
        }
      }
      EXPECT_EQ(tree.anchors().size(), std::min<uint64_t>(r.leaves, lbtree::kAnchorSlots));
      for (uint64_t i = 0; i < 20000; i += 7) EXPECT_EQ(idx->lookup(i * 4), i);
      for (uint64_t i = 0; i < 20000; i += 3) ASSERT_TRUE(idx->insert(i * 4 + 1, i).ok());
      ASSERT_TRUE(idx->verify(&r).ok());
      EXPECT_EQ(r.keys, 20000u + 6667u);
      std::vector<std::pair<uint64_t, Value>> out;
      EXPECT_EQ(idx->scan(0, 100000, &out), 26667u);
      EXPECT_TRUE(std::is_sorted(out.begin(), out.end()));
      // Only a fresh tree can be bulk loaded.
      EXPECT_TRUE(idx->bulk_load(pairs).code() == Code::kInvalidArgument);
    }
  }
}

TEST(LbTreeBulkLoad, ErrorsLeaveTheTreeEmpty) {
  std::unique_ptr<pm::Pool> pool;
  ASSERT_TRUE(pm::Pool::create_anonymous(4ull << 20, "lbtree", &pool).ok());
  IndexOptions o;
  o.pool = pool.get();
  o.node_size = 1024;
  std::unique_ptr<Index<uint64_t>> idx;
  ASSERT_TRUE(make_index<uint64_t>("lbtree", o, &idx).ok());
  std::vector<std::pair<uint64_t, Value>> bad = {{1, 1}, {3, 3}, {2, 2}};
  EXPECT_TRUE(idx->bulk_load(bad).code() == Code::kInvalidArgument);
  // 4 MiB cannot hold 1M pairs in 1 KiB leaves.
  std::vector<std::pair<uint64_t, Value>> big;
  for (uint64_t i = 0; i < 1000000; ++i) big.emplace_back(i, i);
  const uint64_t used = pool->allocator().bytes_in_use();
  EXPECT_TRUE(idx->bulk_load(big).code() == Code::kOutOfSpace);
  EXPECT_EQ(pool->allocator().bytes_in_use(), used) << "every new leaf freed";
  VerifyReport r;
  ASSERT_TRUE(idx->verify(&r).ok());
  EXPECT_EQ(r.keys, 0u);
  // ...and still usable, also by a bulk load that fits.
  big.resize(1000);
  EXPECT_TRUE(idx->bulk_load(big).ok());
  ASSERT_TRUE(idx->verify(&r).ok());
  EXPECT_EQ(r.keys, 1000u);
}

// ------------------------------------------------------------ full pool

// ------------------------------------------------------------ recovery

struct Reopened {
  std::unique_ptr<pm::Pool> pool;
  std::unique_ptr<Index<uint64_t>> index;
  Status status;
  LbTree& tree() { return static_cast<LbTree&>(*index); }
};

Reopened reopen(const std::string& path, unsigned threads, uint32_t node_size = 256) {
  Reopened r;
  r.status = pm::Pool::open(path, "lbtree", pm::Mode::kEmulated, &r.pool);
  if (!r.status.ok()) return r;
  IndexOptions o;
  o.pool = r.pool.get();
  o.node_size = node_size;
  o.threads = threads;
  r.status = make_index<uint64_t>("lbtree", o, &r.index);
  return r;
}

TEST(LbTreeRecovery, CleanCloseAndReopenAtEverySize) {
  for (uint32_t size : {256u, 512u, 768u, 1024u}) {
    ShmFile f("reopen" + std::to_string(size));
    std::map<uint64_t, Value> model;
    {
      std::unique_ptr<pm::Pool> pool;
      ASSERT_TRUE(pm::Pool::create(f.path, 32ull << 20, "lbtree", pm::Mode::kEmulated, &pool).ok());
      IndexOptions o;
      o.pool = pool.get();
      o.node_size = size;
      std::unique_ptr<Index<uint64_t>> idx;
      ASSERT_TRUE(make_index<uint64_t>("lbtree", o, &idx).ok());
      std::mt19937_64 rng(size);
      for (int i = 0; i < 30000; ++i) {
        const uint64_t k = rng() % 100000;
        if (rng() % 4 == 0) {
          const bool present = model.erase(k) == 1;
          ASSERT_EQ(idx->remove(k).ok(), present) << k;
        } else if (idx->insert(k, i).ok()) {
          model[k] = static_cast<Value>(i);
        }
      }
      // Empty a run of leaves: they stay on the chain with no separator.
      for (uint64_t k = 20000; k < 40000; ++k) {
        if (model.erase(k)) {
          ASSERT_TRUE(idx->remove(k).ok());
        }
      }
    }
    Reopened r = reopen(f.path, 2, 4096 /* ignored: the stored size wins */);
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    EXPECT_EQ(r.index->info().node_size, size);
    EXPECT_TRUE(r.index->info().recovered);
    VerifyReport vr;
    ASSERT_TRUE(r.index->verify(&vr).ok());
    EXPECT_EQ(vr.keys, model.size());
    EXPECT_LT(r.tree().routed_leaves().size(), vr.leaves) << "empty leaves get no separator";
    // Leak check: root object + leaves.
    const uint64_t block = size == 768 ? 1024 : size;
    EXPECT_EQ(r.pool->allocator().bytes_in_use(), lbtree::kRootBytes + vr.leaves * block);
    std::vector<std::pair<uint64_t, Value>> out;
    r.index->scan(0, model.size() + 10, &out);
    const std::vector<std::pair<uint64_t, Value>> want(model.begin(), model.end());
    EXPECT_EQ(out, want);
    // Inserts into the emptied range go to the leaf left of it.
    for (uint64_t k = 20000; k < 40000; k += 5) ASSERT_TRUE(r.index->insert(k, k).ok());
    ASSERT_TRUE(r.index->verify(&vr).ok());
  }
}

/// Builds a tree of `n` random keys in a file pool, closes it cleanly, then
/// grows it further and copies the pool file while it is open (a crash with
/// every store durable: the anchors are stale, covering only the old part).
void build_pool(const std::string& path, const std::string& crashed, uint64_t n,
                std::map<uint64_t, Value>* model) {
  std::mt19937_64 rng(42);
  {
    std::unique_ptr<pm::Pool> pool;
    const uint64_t bytes = std::max<uint64_t>(64ull << 20, (n * 64 + 4095) / 4096 * 4096);
    ASSERT_TRUE(pm::Pool::create(path, bytes, "lbtree", pm::Mode::kEmulated, &pool).ok());
    IndexOptions o;
    o.pool = pool.get();
    o.node_size = 256;
    std::unique_ptr<Index<uint64_t>> idx;
    ASSERT_TRUE(make_index<uint64_t>("lbtree", o, &idx).ok());
    for (uint64_t i = 0; i < n / 2; ++i) {
      const uint64_t k = rng();
      if (idx->insert(k, i).ok()) (*model)[k] = i;
    }
  }
  Reopened r = reopen(path, 1);
  ASSERT_TRUE(r.status.ok());
  for (uint64_t i = n / 2; i < n; ++i) {
    const uint64_t k = rng();
    if (r.index->insert(k, i).ok()) (*model)[k] = i;
  }
  // Copy the open pool (no clean close: anchors from the first close).
  FILE* in = std::fopen(path.c_str(), "rb");
  FILE* out = std::fopen(crashed.c_str(), "wb");
  ASSERT_TRUE(in != nullptr && out != nullptr);
  std::vector<char> buf(1 << 20);
  size_t got;
  while ((got = std::fread(buf.data(), 1, buf.size(), in)) > 0)
    std::fwrite(buf.data(), 1, got, out);
  std::fclose(in);
  std::fclose(out);
}

// The parallel rebuild (anchors -> segments -> one thread per segment run ->
// InnerTree::build_segments) routes exactly as the serial rebuild, from stale
// anchors (after a crash) and from fresh ones (after a clean close); rebuild
// times are printed per leaf count and thread count (wall time on a shared
// machine: informative, not asserted).
TEST(LbTreeRecovery, ParallelRebuildEqualsSerial) {
  ShmFile f("par"), c("parcrash");
  std::map<uint64_t, Value> model;
  // NVINDEX_LBTREE_REBUILD_KEYS=N measures a bigger tree (default 400,000).
  uint64_t keys = 400000;
  if (const char* e = std::getenv("NVINDEX_LBTREE_REBUILD_KEYS"))
    keys = std::strtoull(e, nullptr, 10);
  build_pool(f.path, c.path, keys, &model);
  for (const std::string* path : {&c.path, &f.path}) {  // NOLINT
    std::vector<inner::LeafRef> serial;
    for (unsigned threads : {1u, 2u, 4u}) {
      // Copy so that every run recovers the same image (recovery rewrites
      // the anchors and the clean close too).
      const std::string tmp = *path + ".run";
      {
        FILE* in = std::fopen(path->c_str(), "rb");
        FILE* out = std::fopen(tmp.c_str(), "wb");
        std::vector<char> buf(1 << 20);
        size_t got;
        while ((got = std::fread(buf.data(), 1, buf.size(), in)) > 0) {
          std::fwrite(buf.data(), 1, got, out);
        }
        std::fclose(in);
        std::fclose(out);
      }
      Reopened r = reopen(tmp, threads);
      ASSERT_TRUE(r.status.ok()) << r.status.ToString();
      VerifyReport vr;
      ASSERT_TRUE(r.index->verify(&vr).ok());
      EXPECT_EQ(vr.keys, model.size());
      const std::vector<inner::LeafRef> routed = r.tree().routed_leaves();
      if (threads == 1) {
        serial = routed;
      } else {
        EXPECT_EQ(routed, serial) << threads << " threads";
      }
      EXPECT_EQ(r.tree().rebuild_threads(), threads);
      std::printf("[ rebuild  ] %s: %llu leaves, %u thread(s): rebuild %.2f ms, recovery %.2f ms\n",
                  path == &c.path ? "after crash (stale anchors)" : "after clean close",
                  static_cast<unsigned long long>(vr.leaves), threads,
                  r.tree().rebuild_seconds() * 1e3, r.index->info().recovery_seconds * 1e3);
      size_t i = 0;
      for (const auto& [k, v] : model) {
        if (i++ % 97 == 0) {
          ASSERT_EQ(r.index->lookup(k), v);
        }
      }
      r.index.reset();
      r.pool.reset();
      std::remove(tmp.c_str());
    }
  }
}

TEST(LbTreeRecovery, DamagedRootIsCorruption) {
  ShmFile f("damaged");
  uint64_t ro = 0;
  {
    std::unique_ptr<pm::Pool> pool;
    ASSERT_TRUE(pm::Pool::create(f.path, 8ull << 20, "lbtree", pm::Mode::kEmulated, &pool).ok());
    IndexOptions o;
    o.pool = pool.get();
    o.node_size = 256;
    std::unique_ptr<Index<uint64_t>> idx;
    ASSERT_TRUE(make_index<uint64_t>("lbtree", o, &idx).ok());
    for (uint64_t k = 0; k < 1000; ++k) ASSERT_TRUE(idx->insert(k, k).ok());
    ro = pool->root();
  }
  auto damage = [&](uint64_t off, uint64_t value) {
    std::unique_ptr<pm::Pool> pool;
    ASSERT_TRUE(pm::Pool::open(f.path, "lbtree", pm::Mode::kEmulated, &pool).ok());
    uint64_t* w = pool->ptr<uint64_t>(ro + off);
    const uint64_t old = *w;
    *w = value;  // test-only damage (no index is open)
    pool.reset();
    Reopened r = reopen(f.path, 1);
    EXPECT_TRUE(r.status.code() == Code::kCorruption) << off << ": " << r.status.ToString();
    r.pool.reset();
    ASSERT_TRUE(pm::Pool::open(f.path, "lbtree", pm::Mode::kEmulated, &pool).ok());
    *pool->ptr<uint64_t>(ro + off) = old;
  };
  damage(0, 42);      // magic
  damage(8, 300);     // leaf size
  damage(16, 12345);  // head leaf
  damage(24, 7);      // selector
  Reopened ok = reopen(f.path, 1);
  ASSERT_TRUE(ok.status.ok()) << ok.status.ToString();
  VerifyReport vr;
  ASSERT_TRUE(ok.index->verify(&vr).ok());
  EXPECT_EQ(vr.keys, 1000u);
}

// ------------------------------------------------------------ concurrency

TEST(LbTreeConcurrent, FourThreadsEverySize) {
  for (uint32_t size : {256u, 1024u}) {
    TestIndex t;
    ASSERT_TRUE(open_test_index("lbtree", size, &t, 64ull << 20, /*threads=*/4).ok());
    run_concurrent_test(*t.index, 4, size, 5000, 1024);
  }
}

// ------------------------------------------------------------ string keys

/// An lbtree with string keys in a pool file (lbtree:string).
struct StringTree : testing::StringTreeFile<lbtree::LbTreeString> {
  explicit StringTree(const std::string& tag = "s") : StringTreeFile("lbtree", tag) {}
};

using testing::prefixed_key;

// PM cost of an insert: a 24-byte string key against an integer key, on the
// same random order at 256 B leaves (docs/indexes/lbtree.md quotes it).
TEST(LbTreeString, InsertCostAgainstIntegerKeys) {
  // The record costs one line and one fence per insert; nothing else
  // changes (a split moves key words, the separator is a DRAM copy).
  testing::expect_record_costs_one_line_and_fence("lbtree", 256);
}

// Key records: a removed key's record is freed (single thread: at once),
// a failed insert leaves none behind, and recovery marks every live slot's
// record once (the allocator's bytes equal leaves + records before and after
// crash-style reopens rebuilt by 4 threads from the anchors); keys whose records were
// freed still route (separators and DRAM low keys are copies).
TEST(LbTreeString, RecordsFreedOnRemoveAndMarkedOnceByRecovery) {
  for (uint32_t size : {256u, 768u}) {
    StringTree st("r" + std::to_string(size));
    ASSERT_TRUE(st.create(size).ok());
    std::map<std::string, Value> model;
    std::mt19937_64 rng(size);
    ASSERT_NO_FATAL_FAILURE(
        testing::insert_random_prefixed_keys(*st.index, rng, 6000, 4000, &model));
    // Remove every key that became a leaf's low key (its separator's
    // original), and others.
    for (const auto& [low, leaf] : st.tree().routed_leaves()) {
      if (model.erase(low) != 0) {
        ASSERT_TRUE(st.index->remove(low).ok());
      }
    }
    for (auto it = model.begin(); it != model.end();) {
      if (rng() % 3 == 0) {
        ASSERT_TRUE(st.index->remove(it->first).ok());
        it = model.erase(it);
      } else {
        ++it;
      }
    }
    EXPECT_EQ(st.tree().retired_records(), 0u);
    // Longer than kMaxKeyBytes: refused, nothing allocated.
    const uint64_t before = st.pool->allocator().bytes_in_use();
    EXPECT_EQ(st.index->insert(std::string(256, 'x'), 1).code(), Code::kInvalidArgument);
    EXPECT_EQ(st.index->insert(model.begin()->first, 1).code(), Code::kAlreadyExists);
    EXPECT_EQ(st.pool->allocator().bytes_in_use(), before);
    testing::expect_equals_model(*st.index, model);
    VerifyReport vr;
    ASSERT_TRUE(st.index->verify(&vr).ok());
    const uint64_t block = size == 768 ? 1024 : size;
    EXPECT_EQ(st.pool->allocator().bytes_in_use(), lbtree::kRootBytes + vr.pm_bytes);
    EXPECT_GE(vr.pm_bytes, vr.leaves * block + model.size() * 64);
    // find_last_less_than below every routed low key (through the DRAM low
    // keys of leaves whose low key was removed).
    for (const auto& [low, leaf] : st.tree().routed_leaves()) {
      const auto got = st.index->find_last_less_than(low);
      auto want = model.lower_bound(low);
      if (want == model.begin()) {
        EXPECT_FALSE(got.has_value());
      } else {
        --want;
        ASSERT_TRUE(got.has_value());
        EXPECT_EQ(got->first, want->first);
      }
    }
    // A clean close spreads the anchors; the crash-style reopens after it
    // rebuild the string separators from several segments in parallel.
    const auto routed = st.tree().routed_leaves();
    IndexOptions o;
    o.node_size = size;
    o.threads = 4;
    ASSERT_TRUE(st.reopen(o).ok());
    for (int round = 0; round < 2; ++round) {
      st.crash();
      ASSERT_TRUE(st.reopen(o).ok());
      EXPECT_EQ(st.tree().rebuild_threads(), 4u);
      testing::expect_equals_model(*st.index, model);
      ASSERT_TRUE(st.index->verify(&vr).ok());
      EXPECT_EQ(st.pool->allocator().bytes_in_use(), lbtree::kRootBytes + vr.pm_bytes);
    }
    // Recovery routes each non-empty leaf from its smallest key: the same
    // leaves as before, in order, each at or above its old separator.
    const auto again = st.tree().routed_leaves();
    ASSERT_LE(again.size(), routed.size());
    for (size_t i = 0, j = 0; i < again.size(); ++i) {
      while (j < routed.size() && routed[j].second != again[i].second) ++j;
      ASSERT_LT(j, routed.size()) << "leaf routed after recovery but not before";
      EXPECT_GE(again[i].first, routed[j].first);
    }
  }
}

// Optimistic readers (lookups, scans, find_last_less_than) racing writers
// that remove keys: the readers dereference records of removed keys, which
// stay allocated until no operation is in flight. Run under TSan and ASan.
TEST(LbTreeString, ReadersRaceRemoves) {
  StringTree st;
  ASSERT_TRUE(st.create(256, /*threads=*/4).ok());
  testing::run_string_readers_race_removes(*st.index, 2, 1500);
  // Quiescent again: the next remove frees every retired record.
  ASSERT_TRUE(st.index->remove(prefixed_key(1 * 2)).ok());
  EXPECT_EQ(st.tree().retired_records(), 0u);
}

}  // namespace
}  // namespace nvindex
