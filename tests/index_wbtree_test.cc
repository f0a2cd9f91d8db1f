// wbtree, what is specific to the wB+-tree (the conformance suite,
// tests/index_conformance_test.cc, holds what every index must do, for both
// inner placements): node geometry, empty leaves kept and skipped, PM
// accounting, recovery of crash states built by hand (invalid slot arrays, a
// committed split log, damage), bulk load at a fill factor (node counts,
// freed nodes, out of space), inner=dram (recovery rebuilds inner nodes and
// unlinks empty leaves), and the concurrency protocol (leaf locks,
// optimistic readers, serialised SMOs: readers racing splits at every level,
// checked against what was inserted); and the string-key instance's design
// (key words name key records, wbtree.h): a std::map model across clean and
// crash reopens for both inner placements, exact PM accounting of records
// (leaf keys and separator copies) with unpublished ones reclaimed, damaged
// key words refused, the PM cost of a string insert (writers racing
// readers over string keys: the shared concurrent suite, StringKeys/...).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "indexes/common/key_record.h"
#include "indexes/wbtree/wbtree.h"
#include "nvindex/index.h"
#include "nvindex/pm/pool.h"
#include "support/model_check.h"

namespace nvindex {
namespace {

using testing::open_test_index;
using testing::run_model_test;
using testing::TestIndex;

}  // namespace
}  // namespace nvindex

namespace nvindex {
namespace {

using wbtree::Entry;
using wbtree::Log;
using wbtree::Node;
using wbtree::RootObject;

/// An anonymous pool with layout "wbtree" and an index made with `extra`.
struct Anon {
  std::unique_ptr<pm::Pool> pool;
  std::unique_ptr<Index<uint64_t>> index;
  Status open(uint32_t node_size, std::map<std::string, std::string> extra = {}, double fill = 1.0,
              uint64_t bytes = 32ull << 20) {
    Status s = pm::Pool::create_anonymous(bytes, "wbtree", &pool);
    if (!s.ok()) return s;
    IndexOptions o;
    o.pool = pool.get();
    o.node_size = node_size;
    o.extra = std::move(extra);
    o.fill_factor = fill;
    return make_index<uint64_t>("wbtree", o, &index);
  }
};

/// A wbtree in a pool file (tests/support/model_check.h), with accessors to
/// its root object, log and nodes for tests that build crash states by hand.
struct FilePool : testing::FileIndex {
  explicit FilePool(const std::string& tag) : FileIndex("wbtree", tag) {}
  Status create(uint32_t node_size, std::map<std::string, std::string> extra = {}) {
    IndexOptions o;
    o.node_size = node_size;
    o.extra = std::move(extra);
    return FileIndex::create(o);
  }
  /// Opens the pool file without an index (to damage or inspect it).
  Status open_raw() { return open_pool(); }
  /// Makes the index on the pool opened by open_raw().
  Status open_index(uint32_t node_size, std::map<std::string, std::string> extra = {}) {
    IndexOptions o;
    o.pool = pool.get();
    o.node_size = node_size;
    o.extra = std::move(extra);
    return make_index<uint64_t>("wbtree", o, &index);
  }
  Status reopen(std::map<std::string, std::string> extra = {}) {
    IndexOptions o;
    o.extra = std::move(extra);
    return FileIndex::reopen(o);
  }
  RootObject* root() const { return pool->ptr<RootObject>(pool->root()); }
  Node* root_node() const { return pool->ptr<Node>(root()->root.load()); }
  Log* log() const { return pool->ptr<Log>(root()->log); }
  Entry* entries(Node* n) const {
    uint32_t eoff = 0;
    wbtree::capacity_for(static_cast<uint32_t>(root()->node_size), &eoff);
    return reinterpret_cast<Entry*>(reinterpret_cast<char*>(n) + eoff);
  }
};

std::vector<std::pair<uint64_t, Value>> scan_all(Index<uint64_t>& idx) {
  std::vector<std::pair<uint64_t, Value>> out;
  idx.scan(0, SIZE_MAX, &out);
  return out;
}

TEST(WbTree, Geometry) {
  uint32_t e = 0;
  EXPECT_EQ(wbtree::capacity_for(128, &e), 6u);
  EXPECT_EQ(e, 32u);
  EXPECT_EQ(wbtree::capacity_for(256, &e), 13u);
  EXPECT_EQ(e, 48u);
  EXPECT_EQ(wbtree::capacity_for(512, &e), 28u);
  EXPECT_EQ(e, 64u);
  EXPECT_EQ(wbtree::capacity_for(1024, &e), 58u);
  EXPECT_EQ(e, 96u);
  EXPECT_EQ(wbtree::capacity_for(2048, &e), 0u);
}

// No merges: removing every key leaves empty leaves that the tree still
// routes through; find_last_less_than and scans skip them.
TEST(WbTree, EmptyLeavesStayAndAreSkipped) {
  TestIndex t;
  ASSERT_TRUE(open_test_index("wbtree", 128, &t, 16ull << 20).ok());
  Index<uint64_t>& idx = *t.index;
  for (uint64_t k = 0; k < 1000; ++k) ASSERT_TRUE(idx.insert(k, k).ok());
  VerifyReport full;
  ASSERT_TRUE(idx.verify(&full).ok());
  for (uint64_t k = 10; k < 990; ++k) ASSERT_TRUE(idx.remove(k).ok());
  VerifyReport after;
  ASSERT_TRUE(idx.verify(&after).ok());
  EXPECT_EQ(after.keys, 20u);
  EXPECT_EQ(after.leaves, full.leaves);
  auto fl = idx.find_last_less_than(985);
  ASSERT_TRUE(fl.has_value());
  EXPECT_EQ(fl->first, 9u);
  std::vector<std::pair<uint64_t, Value>> out;
  EXPECT_EQ(idx.scan(5, 10, &out), 10u);
  EXPECT_EQ(out[4].first, 9u);
  EXPECT_EQ(out[5].first, 990u);
}

TEST(WbTree, InfoClaims) {
  TestIndex t;
  ASSERT_TRUE(open_test_index("wbtree", 512, &t, 8ull << 20).ok());
  IndexInfo i = t.index->info();
  EXPECT_EQ(i.caps.placement, Placement::kPmOnly);
  // Root object (64 B), split log (4096 B), one leaf.
  EXPECT_EQ(i.pm_bytes, 64u + 4096u + 512u);
  EXPECT_NE(i.description.find("VLDB'15"), std::string::npos);
  EXPECT_NE(i.description.find("splits serialised on one mutex"), std::string::npos);
}

TEST(WbTree, PmAccountingMatchesNodes) {
  TestIndex t;
  ASSERT_TRUE(open_test_index("wbtree", 256, &t, 16ull << 20).ok());
  for (uint64_t k = 0; k < 5000; ++k) ASSERT_TRUE(t.index->insert(k * 31 % 5003, k).ok());
  VerifyReport r;
  ASSERT_TRUE(t.index->verify(&r).ok());
  EXPECT_EQ(t.index->info().pm_bytes, 64u + 4096u + (r.leaves + r.inner_nodes) * 256u);
}

TEST(WbTree, Concurrent) {
  TestIndex t;
  ASSERT_TRUE(open_test_index("wbtree", 128, &t, 64ull << 20).ok());
  testing::run_concurrent_test(*t.index, 2, 11, 4000, 512);
}

}  // namespace
}  // namespace nvindex

namespace nvindex {
namespace {

// An insert or delete that crashed between its two NAWs leaves bit 0 clear
// and a half-written slot array: recovery rebuilds it from the bitmap.
TEST(WbTreeRecovery, RebuildsAnInvalidSlotArray) {
  FilePool fp("slots");
  ASSERT_TRUE(fp.create(512).ok());
  for (uint64_t k = 20; k > 0; --k) ASSERT_TRUE(fp.index->insert(k * 10, k).ok());
  ASSERT_TRUE(fp.open_raw().ok());
  Node* leaf = fp.root_node();
  ASSERT_EQ(leaf->level(), 0u);
  leaf->bitmap.store(leaf->bitmap.load() & ~wbtree::kValidBit);
  uint8_t* sa = reinterpret_cast<uint8_t*>(leaf) + wbtree::kSlotArrayOffset;
  sa[0] = 3;  // garbage: a crash mid-rewrite
  sa[1] = 7;
  sa[2] = 7;
  // An entry written into a free slot whose bitmap bit never got set (crash
  // before NAW 2 of an insert): not part of the content.
  wbtree::Entry* e = fp.entries(leaf);
  e[25].key.store(5);
  e[25].value.store(55);
  ASSERT_TRUE(fp.open_index(128).ok());
  EXPECT_TRUE(fp.index->info().recovered);
  const auto all = scan_all(*fp.index);
  ASSERT_EQ(all.size(), 20u);
  for (uint64_t k = 1; k <= 20; ++k) EXPECT_EQ(all[k - 1], std::make_pair(k * 10, k));
  EXPECT_FALSE(fp.index->lookup(5).has_value());
  VerifyReport r;
  EXPECT_TRUE(fp.index->verify(&r).ok());
}

// A split whose log was committed but not (wholly) applied is redone.
TEST(WbTreeRecovery, RedoesACommittedLog) {
  FilePool fp("redo");
  ASSERT_TRUE(fp.create(512).ok());
  for (uint64_t k = 1; k <= 10; ++k) ASSERT_TRUE(fp.index->insert(k, k * 100).ok());
  fp.crash();  // the log below is a crash's state, not a clean close's
  ASSERT_TRUE(fp.open_raw().ok());
  Node* leaf = fp.root_node();
  const uint64_t leaf_off = fp.pool->offset(leaf);
  wbtree::Entry* e = fp.entries(leaf);
  // Records: drop the entry holding key 4 from the bitmap (bit 0 clear, as a
  // split logs it) and change the value of key 7, both words still old.
  int slot4 = -1, slot7 = -1;
  for (int s = 0; s < 10; ++s) {
    if (e[s].key == 4) slot4 = s;
    if (e[s].key == 7) slot7 = s;
  }
  ASSERT_GE(slot4, 0);
  ASSERT_GE(slot7, 0);
  const uint64_t bm = leaf->bitmap.load();
  Log* log = fp.log();
  log->records[0] = {leaf_off, bm, (bm & ~(2ull << slot4)) & ~wbtree::kValidBit};
  const uint64_t voff = fp.pool->offset(&e[slot7].value);
  log->records[1] = {voff, 700, 7777};
  log->state.store(wbtree::kLogCommitted | 2);
  ASSERT_TRUE(fp.open_index(128).ok());
  EXPECT_EQ(fp.log()->state.load(), 0u);
  EXPECT_FALSE(fp.index->lookup(4).has_value());
  EXPECT_EQ(fp.index->lookup(7), 7777u);
  EXPECT_EQ(fp.index->lookup(8), 800u);
  VerifyReport r;
  ASSERT_TRUE(fp.index->verify(&r).ok());
  EXPECT_EQ(r.keys, 9u);
  // An uncommitted log (state 0) is ignored whatever its records say.
  ASSERT_TRUE(fp.open_raw().ok());
  fp.log()->records[0] = {fp.pool->offset(fp.root_node()), 0, 0};
  ASSERT_TRUE(fp.open_index(128).ok());
  ASSERT_TRUE(fp.index->verify(&r).ok());
  EXPECT_EQ(r.keys, 9u);
}

TEST(WbTreeRecovery, DamageIsCorruption) {
  FilePool fp("damage");
  ASSERT_TRUE(fp.create(256).ok());
  for (uint64_t k = 1; k <= 100; ++k) ASSERT_TRUE(fp.index->insert(k, k).ok());
  // A committed record whose word holds neither its old nor its new value.
  ASSERT_TRUE(fp.open_raw().ok());
  Log* log = fp.log();
  log->records[0] = {fp.pool->offset(fp.root_node()) + 8, 1, 2};
  log->state.store(wbtree::kLogCommitted | 1);
  Status s = fp.open_index(128);
  EXPECT_EQ(s.code(), Code::kCorruption) << s.ToString();
  // A record outside every node block (here the allocator's metadata).
  log->records[0] = {pm::kPoolHeaderBytes + 8, 0, 0};
  s = fp.open_index(128);
  EXPECT_EQ(s.code(), Code::kCorruption) << s.ToString();
  log->state.store(0);
  ASSERT_TRUE(fp.open_index(128).ok());
  // A slot array marked valid that names a free slot.
  ASSERT_TRUE(fp.open_raw().ok());
  Node* first = fp.pool->ptr<Node>(fp.root_node()->leftmost_or_sibling);
  uint8_t* sa = reinterpret_cast<uint8_t*>(first) + wbtree::kSlotArrayOffset;
  const uint8_t saved_slot = sa[1];
  sa[1] = 200;
  s = fp.open_index(128);
  EXPECT_EQ(s.code(), Code::kCorruption) << s.ToString();
  sa[1] = saved_slot;
  ASSERT_TRUE(fp.open_index(128).ok());
  // A child pointer out of the pool.
  ASSERT_TRUE(fp.open_raw().ok());
  Node* root = fp.root_node();
  ASSERT_GT(root->level(), 0u);
  const uint64_t saved = root->leftmost_or_sibling;
  root->leftmost_or_sibling = 12345;
  s = fp.open_index(128);
  EXPECT_EQ(s.code(), Code::kCorruption) << s.ToString();
  root->leftmost_or_sibling = saved;
  // A bad root object magic.
  fp.root()->magic ^= 1;
  s = fp.open_index(128);
  EXPECT_EQ(s.code(), Code::kCorruption) << s.ToString();
  fp.root()->magic ^= 1;
  ASSERT_TRUE(fp.open_index(128).ok());
  VerifyReport r;
  ASSERT_TRUE(fp.index->verify(&r).ok());
  EXPECT_EQ(r.keys, 100u);
}

}  // namespace
}  // namespace nvindex

namespace nvindex {
namespace {

std::vector<std::pair<uint64_t, Value>> pairs(uint64_t n, uint64_t step) {
  std::vector<std::pair<uint64_t, Value>> v;
  for (uint64_t i = 0; i < n; ++i) v.emplace_back(i * step + 1, i ^ 0x5555);
  return v;
}

TEST(WbTreeBulkLoad, FillsNodesToTheFillFactor) {
  for (double fill : {1.0, 0.7, 0.5, 0.01}) {
    Anon a;
    ASSERT_TRUE(a.open(256, {}, fill).ok());
    const auto data = pairs(5000, 3);
    ASSERT_TRUE(a.index->bulk_load(data).ok()) << fill;
    const uint64_t per = std::max<uint64_t>(1, static_cast<uint64_t>(std::ceil(fill * 13)));
    VerifyReport r;
    ASSERT_TRUE(a.index->verify(&r).ok());
    EXPECT_EQ(r.keys, 5000u);
    EXPECT_EQ(r.leaves, (5000 + per - 1) / per) << fill;
    // The old empty leaf is freed: PM holds exactly the new nodes.
    EXPECT_EQ(a.index->info().pm_bytes, 64u + 4096u + (r.leaves + r.inner_nodes) * 256u);
    const auto all = scan_all(*a.index);
    ASSERT_EQ(all, data);
    EXPECT_EQ(a.index->lookup(1 + 3 * 77), 77u ^ 0x5555);
    EXPECT_FALSE(a.index->lookup(3).has_value());
    // The loaded tree takes further inserts and removes (splits at fill 1).
    for (uint64_t k = 0; k < 2000; ++k) ASSERT_TRUE(a.index->insert(k * 3 + 2, k).ok());
    for (uint64_t k = 0; k < 2000; k += 2) ASSERT_TRUE(a.index->remove(k * 3 + 1).ok());
    ASSERT_TRUE(a.index->verify(&r).ok());
    EXPECT_EQ(r.keys, 6000u);
  }
}

TEST(WbTreeBulkLoad, Errors) {
  Anon a;
  ASSERT_TRUE(a.open(128).ok());
  std::vector<std::pair<uint64_t, Value>> bad{{1, 1}, {3, 3}, {3, 4}};
  EXPECT_EQ(a.index->bulk_load(bad).code(), Code::kInvalidArgument);
  EXPECT_TRUE(a.index->bulk_load({}).ok());
  ASSERT_TRUE(a.index->insert(10, 1).ok());
  EXPECT_EQ(a.index->bulk_load(pairs(10, 1)).code(), Code::kInvalidArgument);
  // Emptied by removes (several empty nodes): a bulk load replaces them all.
  for (uint64_t k = 0; k < 100; ++k) {
    const Status s = a.index->insert(k * 5, k);
    ASSERT_TRUE(s.ok() || (k == 2 && s.IsAlreadyExists())) << k * 5 << " " << s.ToString();
  }
  for (uint64_t k = 0; k < 100; ++k) ASSERT_TRUE(a.index->remove(k * 5).ok()) << k * 5;
  EXPECT_TRUE(a.index->remove(10).IsNotFound());
  ASSERT_TRUE(a.index->bulk_load(pairs(50, 2)).ok());
  VerifyReport r;
  ASSERT_TRUE(a.index->verify(&r).ok());
  EXPECT_EQ(r.keys, 50u);
  EXPECT_EQ(a.index->info().pm_bytes, 64u + 4096u + (r.leaves + r.inner_nodes) * 128u);
  // Out of space: nothing changes.
  Anon small;
  ASSERT_TRUE(small.open(1024, {}, 1.0, pm::kMinPoolSize).ok());
  EXPECT_EQ(small.index->bulk_load(pairs(400000, 1)).code(), Code::kOutOfSpace);
  ASSERT_TRUE(small.index->verify(&r).ok());
  EXPECT_EQ(r.keys, 0u);
  EXPECT_TRUE(small.index->insert(1, 1).ok());
}

TEST(WbTreeBulkLoad, SurvivesReopen) {
  FilePool fp("bulk");
  ASSERT_TRUE(fp.create(512).ok());
  const auto data = pairs(3000, 7);
  ASSERT_TRUE(fp.index->bulk_load(data).ok());
  ASSERT_TRUE(fp.reopen().ok());
  EXPECT_EQ(scan_all(*fp.index), data);
}

}  // namespace
}  // namespace nvindex

namespace nvindex {
namespace {

// inner=dram: the same model test at every node size, leaves in PM and the
// inner nodes in DRAM (InnerTree).

TEST(WbTreeDram, InfoAndAccounting) {
  Anon a;
  ASSERT_TRUE(a.open(256, {{"inner", "dram"}}).ok());
  for (uint64_t k = 0; k < 5000; ++k) ASSERT_TRUE(a.index->insert(k * 31 % 5003, k).ok());
  IndexInfo i = a.index->info();
  EXPECT_EQ(i.caps.placement, Placement::kSelective);
  EXPECT_NE(i.description.find("inner nodes in DRAM"), std::string::npos);
  VerifyReport r;
  ASSERT_TRUE(a.index->verify(&r).ok());
  EXPECT_GT(r.inner_nodes, 0u);
  EXPECT_GE(r.height, 2u);
  // PM holds the leaves only.
  EXPECT_EQ(i.pm_bytes, 64u + 4096u + r.leaves * 256u);
  EXPECT_GT(i.dram_bytes, r.inner_nodes * 256u);
}

// Recovery rebuilds the DRAM inner nodes from the leaf chain; leaves emptied
// by removes are unlinked (their lower bounds were only in DRAM); the stored
// placement wins over the option.
TEST(WbTreeDram, RecoveryRebuildsInnerNodesAndUnlinksEmptyLeaves) {
  FilePool fp("dram");
  ASSERT_TRUE(fp.create(128, {{"inner", "dram"}}).ok());
  std::map<uint64_t, Value> model;
  for (uint64_t k = 0; k < 2000; ++k) {
    ASSERT_TRUE(fp.index->insert(k, k + 1).ok());
    model[k] = k + 1;
  }
  for (uint64_t k = 0; k < 1500; ++k) {  // empties the leftmost leaves
    ASSERT_TRUE(fp.index->remove(k).ok());
    model.erase(k);
  }
  VerifyReport before;
  ASSERT_TRUE(fp.index->verify(&before).ok());
  ASSERT_TRUE(fp.reopen({{"inner", "pm"}}).ok());
  EXPECT_EQ(fp.index->info().caps.placement, Placement::kSelective);
  VerifyReport after;
  ASSERT_TRUE(fp.index->verify(&after).ok());
  EXPECT_EQ(after.keys, model.size());
  EXPECT_LT(after.leaves, before.leaves);
  EXPECT_EQ(fp.index->info().pm_bytes, 64u + 4096u + after.leaves * 128u);
  EXPECT_EQ(fp.index->lookup(1700), 1701u);
  EXPECT_FALSE(fp.index->lookup(17).has_value());
  auto fl = fp.index->find_last_less_than(1600);
  ASSERT_TRUE(fl.has_value());
  EXPECT_EQ(fl->first, 1599u);
  EXPECT_FALSE(fp.index->find_last_less_than(1500).has_value());
  // The rebuilt tree keeps working below its first key (first leaf from 0).
  for (uint64_t k = 0; k < 1500; k += 7) ASSERT_TRUE(fp.index->insert(k, k).ok());
  ASSERT_TRUE(fp.index->verify(&after).ok());
  // Every leaf empty: one leaf stays.
  for (uint64_t k = 0; k < 2000; ++k) {
    const Status s = fp.index->remove(k);
    ASSERT_EQ(s.ok(), k >= 1500 || k % 7 == 0) << k << " " << s.ToString();
  }
  ASSERT_TRUE(fp.reopen().ok());
  ASSERT_TRUE(fp.index->verify(&after).ok());
  EXPECT_EQ(after.leaves, 1u);
  EXPECT_EQ(after.keys, 0u);
  EXPECT_TRUE(fp.index->insert(5, 5).ok());
}

TEST(WbTreeDram, BulkLoad) {
  Anon a;
  ASSERT_TRUE(a.open(512, {{"inner", "dram"}}, 0.5).ok());
  const auto data = pairs(10000, 2);
  ASSERT_TRUE(a.index->bulk_load(data).ok());
  VerifyReport r;
  ASSERT_TRUE(a.index->verify(&r).ok());
  EXPECT_EQ(r.leaves, (10000u + 13) / 14);
  EXPECT_EQ(scan_all(*a.index), data);
  EXPECT_TRUE(a.index->insert(4, 4).ok());
}

TEST(WbTreeDram, Concurrent) {
  Anon a;
  ASSERT_TRUE(a.open(128, {{"inner", "dram"}}, 1.0, 64ull << 20).ok());
  testing::run_concurrent_test(*a.index, 2, 12, 4000, 512);
}

}  // namespace
}  // namespace nvindex

namespace nvindex {
namespace {

// Concurrency protocol (wbtree.h "Concurrency"): writers insert random keys
// into 128 B nodes (6 slots: a split every few inserts, SMOs up to the root,
// root growths), and update their own keys, while readers look up, scan and
// call find_last_less_than. Every key a writer has published (its progress
// counter, release/acquire) must be found by every reader with a value
// written for it; keys never inserted must stay absent; scans must be
// ascending and hold every published key in the range they cover. At the end
// the index holds exactly what was inserted and verify() passes.
struct SplitRace {
  static constexpr unsigned kWriters = 2;
  static constexpr unsigned kReaders = 2;
  static uint64_t key(unsigned w, uint64_t i) {
    // Even keys only (odd keys are never inserted), spread over the key
    // space in a random order: a bijection of i, times kWriters, plus w.
    const uint64_t h = (i * 0x9e3779b97f4a7c15ull) & ((1ull << 40) - 1);
    return ((h * kWriters + w) << 1) + 2;
  }
  static uint64_t tag(uint64_t k) { return ((k * 0xff51afd7ed558ccdull) >> 32) << 32; }

  static void run(Index<uint64_t>& idx, uint64_t per_writer, uint32_t min_height) {
    std::atomic<uint64_t> done[kWriters];
    for (auto& d : done) d.store(0);
    std::atomic<bool> stop{false};
    std::atomic<uint64_t> failures{0}, reads{0};
    std::string first_failure;
    std::atomic<bool> have_failure{false};
    auto fail = [&](const std::string& what) {
      if (!have_failure.exchange(true)) first_failure = what;
      failures.fetch_add(1);
    };
    std::vector<std::thread> threads;
    for (unsigned w = 0; w < kWriters; ++w) {
      threads.emplace_back([&, w] {
        for (uint64_t i = 0; i < per_writer; ++i) {
          const uint64_t k = key(w, i);
          if (!idx.insert(k, tag(k) | 0).ok()) fail("insert " + std::to_string(k));
          done[w].store(i + 1, std::memory_order_release);
          if (i % 4 == 3) {
            // Update an earlier key of this writer, and re-insert it
            // (AlreadyExists: no change).
            const uint64_t old = key(w, i / 2);
            if (!idx.update(old, tag(old) | (i & 0xffffffff)).ok()) fail("update");
            if (idx.insert(old, 7).code() != Code::kAlreadyExists) fail("duplicate insert");
          }
        }
      });
    }
    for (unsigned r = 0; r < kReaders; ++r) {
      threads.emplace_back([&, r] {
        uint64_t x = 0x12345 + r;
        auto rnd = [&x] {
          x ^= x << 13;
          x ^= x >> 7;
          x ^= x << 17;
          return x;
        };
        std::vector<std::pair<uint64_t, Value>> out;
        while (!stop.load(std::memory_order_acquire)) {
          const unsigned w = static_cast<unsigned>(rnd() % kWriters);
          const uint64_t d = done[w].load(std::memory_order_acquire);
          if (d == 0) continue;
          const uint64_t k = key(w, rnd() % d);
          reads.fetch_add(1, std::memory_order_relaxed);
          switch (rnd() % 4) {
            case 0: {  // a published key, and its odd neighbour (never inserted)
              const auto v = idx.lookup(k);
              if (!v || (*v & ~0xffffffffull) != tag(k)) fail("lookup " + std::to_string(k));
              if (idx.lookup(k + 1)) fail("lookup of absent " + std::to_string(k + 1));
              break;
            }
            case 1: {  // find_last_less_than(k + 1) is k itself
              const auto got = idx.find_last_less_than(k + 1);
              if (!got || got->first != k || (got->second & ~0xffffffffull) != tag(k)) {
                fail("find_last_less_than " + std::to_string(k + 1));
              }
              break;
            }
            default: {  // a scan from k covers every key published before it
              uint64_t snap[kWriters];
              for (unsigned v = 0; v < kWriters; ++v)
                snap[v] = done[v].load(std::memory_order_acquire);
              idx.scan(k, 20, &out);
              if (out.empty() || out.front().first != k) {
                fail("scan start " + std::to_string(k));
                break;
              }
              for (size_t j = 0; j < out.size(); ++j) {
                if ((out[j].second & ~0xffffffffull) != tag(out[j].first) ||
                    (j > 0 && out[j - 1].first >= out[j].first)) {
                  fail("scan order or value at " + std::to_string(out[j].first));
                }
              }
              const uint64_t hi = out.back().first;
              for (int probe = 0; probe < 16; ++probe) {
                const unsigned v = static_cast<unsigned>(rnd() % kWriters);
                if (snap[v] == 0) continue;
                const uint64_t pk = key(v, rnd() % snap[v]);
                if (pk < k || pk > hi) continue;
                if (!std::binary_search(
                        out.begin(), out.end(), std::make_pair(pk, Value{0}),
                        [](const auto& a, const auto& b) { return a.first < b.first; })) {
                  fail("scan from " + std::to_string(k) + " missed " + std::to_string(pk));
                }
              }
            }
          }
        }
      });
    }
    for (unsigned w = 0; w < kWriters; ++w) threads[w].join();
    stop.store(true, std::memory_order_release);
    for (unsigned r = 0; r < kReaders; ++r) threads[kWriters + r].join();
    EXPECT_EQ(failures.load(), 0u) << "first: " << first_failure;
    EXPECT_GT(reads.load(), 0u);
    // Exactly the inserted keys, each once, with a value written for it.
    std::vector<uint64_t> want;
    for (unsigned w = 0; w < kWriters; ++w) {
      for (uint64_t i = 0; i < per_writer; ++i) want.push_back(key(w, i));
    }
    std::sort(want.begin(), want.end());
    std::vector<std::pair<uint64_t, Value>> all;
    idx.scan(0, want.size() + 1, &all);
    ASSERT_EQ(all.size(), want.size());
    for (size_t j = 0; j < want.size(); ++j) {
      ASSERT_EQ(all[j].first, want[j]);
      ASSERT_EQ(all[j].second & ~0xffffffffull, tag(want[j]));
    }
    VerifyReport rep;
    ASSERT_TRUE(idx.verify(&rep).ok());
    EXPECT_EQ(rep.keys, want.size());
    EXPECT_GE(rep.height, min_height);  // SMOs reached the inner nodes and grew the root
  }
};

TEST(WbTreeConcurrent, ReadersRaceSplitsInnerPm) {
  for (uint32_t size : {128u, 1024u}) {
    TestIndex t;
    ASSERT_TRUE(open_test_index("wbtree", size, &t, 128ull << 20).ok());
    SplitRace::run(*t.index, size == 128 ? 12000 : 40000, size == 128 ? 5 : 3);
  }
}

TEST(WbTreeConcurrent, ReadersRaceSplitsInnerDram) {
  Anon a;
  ASSERT_TRUE(a.open(128, {{"inner", "dram"}}, 1.0, 128ull << 20).ok());
  SplitRace::run(*a.index, 12000, 5);
}

}  // namespace
}  // namespace nvindex

// ---------------------------------------------------------------- string keys

namespace nvindex {
namespace {

/// A string-key wbtree in a pool file of layout "wbtree:string".
struct StringPool : testing::StringFileIndex {
  explicit StringPool(const std::string& tag = "s") : StringFileIndex("wbtree", tag) {}
  Status create(uint32_t node_size, std::map<std::string, std::string> extra = {}) {
    IndexOptions o;
    o.node_size = node_size;
    o.extra = std::move(extra);
    return StringFileIndex::create(o, 64ull << 20);
  }
  /// Clean close (crash = false) or a crash as far as the pool can tell,
  /// then reopen and recover.
  Status reopen(bool crash = false) {
    if (crash) this->crash();
    return StringFileIndex::reopen();
  }
  wbtree::WbTreeString* tree() const { return dynamic_cast<wbtree::WbTreeString*>(index.get()); }
  RootObject* root() const { return pool->ptr<RootObject>(pool->root()); }
  Node* node(uint64_t off) const { return pool->ptr<Node>(off); }
  Entry* entries(Node* n) const {
    uint32_t eoff = 0;
    wbtree::capacity_for(static_cast<uint32_t>(root()->node_size), &eoff);
    return reinterpret_cast<Entry*>(reinterpret_cast<char*>(n) + eoff);
  }
  /// The live entry slots of n (bitmap bits set), in slot order.
  std::vector<uint32_t> live(Node* n) const {
    std::vector<uint32_t> v;
    for (uint32_t s = 0; s < wbtree::kMaxSlots; ++s) {
      if (n->bitmap.load() & (2ull << s)) v.push_back(s);
    }
    return v;
  }
};

/// Every pair the index holds (a full scan), as a model.
std::map<std::string, Value> contents(Index<std::string_view>& idx) {
  std::vector<std::pair<std::string, Value>> all;
  idx.scan("", SIZE_MAX, &all);
  return {all.begin(), all.end()};
}

// The shared string model test (keys with shared 9- and 17-byte prefixes,
// keys that are prefixes of others, the empty and 255-byte keys, too long
// keys refused) at the smallest node (6 slots: splits of every level and
// root growths) and at 512 B with inner=pm, and at 128 B with inner=dram
// (DRAM inner nodes over string separators, rebuilt from the leaves' smallest
// keys), three rounds, each followed by a reopen that must keep every pair:
// a clean close (each record marked once, the close record's bytes and keys
// agree), a crash, a clean close; each round then empties the tree by
// removes for the next.
TEST(WbTreeString, ModelAcrossReopens) {
  for (const auto& [node_size, inner] : {std::pair{128u, "pm"}, {512u, "pm"}, {128u, "dram"}}) {
    StringPool sp("m" + std::to_string(node_size) + inner);
    ASSERT_TRUE(sp.create(node_size, {{"inner", inner}}).ok());
    for (int round = 0; round < 3; ++round) {
      SCOPED_TRACE("node size " + std::to_string(node_size) + ", inner=" + inner + ", round " +
                   std::to_string(round));
      ASSERT_NO_FATAL_FAILURE(testing::run_model_test(*sp.index, node_size + round, 4000, 1500));
      const std::map<std::string, Value> model = contents(*sp.index);
      VerifyReport r;
      ASSERT_TRUE(sp.index->verify(&r).ok());
      EXPECT_GE(r.height, node_size == 128 ? 3u : 2u);
      EXPECT_EQ(sp.tree()->inner_dram(), std::string(inner) == "dram");
      ASSERT_TRUE(sp.reopen(round == 1).ok());
      ASSERT_TRUE(sp.index->info().recovered);
      ASSERT_NO_FATAL_FAILURE(testing::expect_equals_model(*sp.index, model));
      for (const auto& kv : model) ASSERT_TRUE(sp.index->remove(kv.first).ok());
      ASSERT_NO_FATAL_FAILURE(testing::expect_equals_model(*sp.index, {}));
    }
  }
}

// The PM the tree holds is exactly the root object, the log, its nodes and
// one key record per live entry (a leaf key, or an inner separator: copies
// made by leaf splits), verify()'s pm_bytes counts the nodes and records, a
// single thread's removes free their records at once, and a record persisted
// but never published (an insert that crashed before its NAW 2, or a split
// before its log commit) is reclaimed by recovery.
TEST(WbTreeString, RecordsAccountedFreedAndReclaimed) {
  StringPool sp;
  ASSERT_TRUE(sp.create(128).ok());
  std::map<std::string, Value> model;
  for (uint64_t i = 0; i < 600; ++i) {
    const std::string k = "key-" + std::to_string(i * 7919 % 600);
    ASSERT_TRUE(sp.index->insert(k, i).ok());
    model[k] = i;
  }
  // A duplicate insert's record is freed at once.
  const uint64_t before = sp.pool->allocator().bytes_in_use();
  EXPECT_EQ(sp.index->insert("key-5", 1).code(), Code::kAlreadyExists);
  EXPECT_EQ(sp.pool->allocator().bytes_in_use(), before);
  for (uint64_t i = 0; i < 600; i += 3) {
    ASSERT_TRUE(sp.index->remove("key-" + std::to_string(i)).ok());
    model.erase("key-" + std::to_string(i));
  }
  EXPECT_EQ(sp.tree()->retired_records(), 0u);
  // Every key here is below 64 bytes: one 64 B block per record.
  const auto expect_exact = [&] {
    VerifyReport r;
    ASSERT_TRUE(sp.index->verify(&r).ok());
    uint64_t separators = 0;
    uint64_t nodes_bytes = 0;
    std::vector<uint64_t> stack{sp.root()->root.load()};
    while (!stack.empty()) {
      Node* n = sp.node(stack.back());
      stack.pop_back();
      nodes_bytes += 128;
      if (n->level() == 0) continue;
      stack.push_back(n->leftmost_or_sibling.load());
      for (uint32_t s : sp.live(n)) {
        ++separators;
        stack.push_back(sp.entries(n)[s].value.load());
      }
    }
    EXPECT_EQ(r.keys, model.size());
    EXPECT_EQ(separators, r.leaves - 1);  // inner=pm: one separator per leaf but the first
    EXPECT_EQ(r.pm_bytes, nodes_bytes + (model.size() + separators) * 64);
    EXPECT_EQ(sp.pool->allocator().bytes_in_use(), 64u + 4096u + r.pm_bytes);
  };
  ASSERT_NO_FATAL_FAILURE(expect_exact());
  // The state of an insert that crashed after persisting its key record.
  uint64_t orphan = 0;
  ASSERT_TRUE(store_key_record(*sp.pool, "key-orphan", &orphan).ok());
  ASSERT_TRUE(sp.reopen(/*crash=*/true).ok());
  ASSERT_TRUE(sp.index->info().recovered);
  ASSERT_NO_FATAL_FAILURE(expect_exact());
  EXPECT_EQ(sp.index->lookup("key-orphan"), std::nullopt);
  ASSERT_NO_FATAL_FAILURE(testing::expect_equals_model(*sp.index, model));
  // A clean close: the close record's bytes are what recovery reaches.
  ASSERT_TRUE(sp.index->remove("key-1").ok());
  model.erase("key-1");
  ASSERT_TRUE(sp.reopen().ok());
  ASSERT_NO_FATAL_FAILURE(expect_exact());
}

// Damaged key words are Corruption at recovery, not a wild read or a
// silently different tree: (0) a leaf entry's word that is not the start of
// a block; (1) two owners of one record (a separator redirected to the
// record of the first key of the leaf it routes to: every order check
// holds, but the record would be marked twice); (2) a word whose prefix
// bits are not its record's.
TEST(WbTreeString, RecoveryRefusesDamagedKeyWords) {
  for (int damage = 0; damage < 3; ++damage) {
    StringPool sp("d" + std::to_string(damage));
    ASSERT_TRUE(sp.create(512).ok());
    for (int i = 0; i < 60; ++i)
      ASSERT_TRUE(sp.index->insert("k" + std::to_string(100 + i), i).ok());
    sp.index.reset();  // closed cleanly; damaged below, then reopened
    Node* root = sp.node(sp.root()->root.load());
    ASSERT_GT(root->level(), 0u);
    const uint32_t sep_slot = sp.live(root).front();
    Entry& sep = sp.entries(root)[sep_slot];
    Node* child = sp.node(sep.value.load());
    // The child's first key in key order: the separator's key.
    uint64_t first = 0;
    for (uint32_t s : sp.live(child)) {
      const uint64_t w = sp.entries(child)[s].key.load();
      if (key_record(*sp.pool, record_of(w)) == key_record(*sp.pool, record_of(sep.key.load())))
        first = w;
    }
    ASSERT_NE(first, 0u);
    Entry& leaf_entry = sp.entries(child)[sp.live(child).back()];
    if (damage == 0) {
      leaf_entry.key.store(leaf_entry.key.load() + 8);
    } else if (damage == 1) {
      sep.key.store(first);
    } else {
      leaf_entry.key.store(leaf_entry.key.load() ^ (uint64_t{1} << 48));
    }
    sp.pool.reset();
    const Status s = sp.StringFileIndex::reopen();
    EXPECT_EQ(s.code(), Code::kCorruption) << damage << ": " << s.ToString();
  }
}

// PM cost of an insert: a 24-byte string key against an integer key, on the
// same random order at 512 B nodes (docs/indexes/wbtree.md quotes it).
TEST(WbTreeString, InsertCostAgainstIntegerKeys) {
  testing::InsertCost ints, strs;
  ASSERT_NO_FATAL_FAILURE(testing::measure_insert_cost("wbtree", 512, 20000, &ints, &strs));
  // The record costs one line per insert, a leaf split one more (its
  // separator record), about one per 20 inserts at 28 slots; no fence: the
  // records' flushes ride on the protocol's fences (RecordFence). The keys
  // ("user" + 20 zero-padded digits) sort as their integers do, so both
  // trees split at the same inserts; the fences differ only by the
  // allocator's (one when a chunk takes the records' 64 B class,
  // allocator.chunk_class: 0.001 per insert here).
  EXPECT_GE(strs.lines, ints.lines + 1);
  EXPECT_LE(strs.lines, ints.lines + 1.2);
  EXPECT_NEAR(strs.fences, ints.fences, 0.01);
}

}  // namespace
}  // namespace nvindex
