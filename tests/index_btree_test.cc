// Tests of the volatile "btree" index and its unsorted-leaf variant, what is
// specific to them (the
// conformance suite, tests/index_conformance_test.cc, holds what every index
// must do): node-size validation, its DRAM footprint, that removes really
// merge nodes (leaves and height shrink), and that verify() catches damage;
// with string keys: node capacities, and that key records are counted in
// dram_bytes and retired, not freed, by removes.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "indexes/btree/btree.h"
#include "indexes/btree/btree_testing.h"
#include "nvindex/index.h"
#include "nvindex/pm/counters.h"
#include "nvindex/pm/persist.h"
#include "support/model_check.h"

namespace nvindex {
namespace {

constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
using Pairs = std::vector<std::pair<uint64_t, Value>>;

std::unique_ptr<Index<uint64_t>> open_btree(uint32_t node_size, const char* name = "btree") {
  testing::TestIndex t;
  Status s = testing::open_test_index(name, node_size, &t);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return std::move(t.index);
}

TEST(BtreeTest, NodeSizeMustBeAMultipleOf64In128To4096) {
  for (uint32_t bad : {0u, 64u, 100u, 127u, 130u, 1000u, 4097u, 4160u, 8192u}) {
    IndexOptions o;
    o.node_size = bad;
    std::unique_ptr<Index<uint64_t>> idx;
    Status s = make_index<uint64_t>("btree", o, &idx);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << "node_size " << bad;
    EXPECT_NE(s.message().find("node size"), std::string::npos) << s.message();
    EXPECT_EQ(idx, nullptr);
  }
  for (uint32_t good : {128u, 192u, 512u, 4096u}) {
    IndexOptions o;
    o.node_size = good;
    std::unique_ptr<Index<uint64_t>> idx;
    EXPECT_TRUE(make_index<uint64_t>("btree", o, &idx).ok()) << "node_size " << good;
    ASSERT_NE(idx, nullptr);
    EXPECT_EQ(idx->info().node_size, good);
  }
}

TEST(BtreeTest, InfoDescribesAVolatileOrderedThreadSafeTree) {
  auto idx = open_btree(512);
  const IndexInfo info = idx->info();
  EXPECT_EQ(info.caps.placement, Placement::kDram);
  EXPECT_EQ(info.dram_bytes, 512u);  // one empty root leaf
  for (uint64_t k = 0; k < 1000; ++k) ASSERT_TRUE(idx->insert(k, k).ok());
  VerifyReport r;
  ASSERT_TRUE(idx->verify(&r).ok());
  EXPECT_GE(idx->info().dram_bytes, (r.leaves + r.inner_nodes) * 512);
}

// Removes merge leaves and inner nodes: the leaf count and the height fall,
// and the tree shrinks back to a single leaf when emptied.
TEST(BtreeTest, RemovesMergeNodesAndCollapseTheRoot) {
  for (const char* name : {"btree", "unsorted-leaf"})
    for (uint32_t node_size : {128u, 512u}) {
      SCOPED_TRACE(name);
      auto idx = open_btree(node_size, name);
      constexpr uint64_t kKeys = 20000;
      for (uint64_t i = 0; i < kKeys; ++i) ASSERT_TRUE(idx->insert(i * 7919 % kKeys, i).ok());
      VerifyReport full;
      ASSERT_TRUE(idx->verify(&full).ok());
      ASSERT_EQ(full.keys, kKeys);
      for (uint64_t i = 0; i < kKeys; ++i) {
        if (i % 64 == 0) continue;
        ASSERT_TRUE(idx->remove(i).ok()) << i;
      }
      VerifyReport sparse;
      Status s = idx->verify(&sparse);
      ASSERT_TRUE(s.ok()) << s.ToString();
      EXPECT_EQ(sparse.keys, kKeys / 64 + 1);
      EXPECT_LT(sparse.leaves * 8, full.leaves) << "leaves did not merge, node " << node_size;
      EXPECT_LT(sparse.inner_nodes * 4, full.inner_nodes + 4) << "inner nodes did not merge";
      EXPECT_LT(sparse.height, full.height) << "root did not collapse, node " << node_size;
      for (uint64_t i = 0; i < kKeys; i += 64) ASSERT_TRUE(idx->remove(i).ok());
      VerifyReport empty;
      ASSERT_TRUE(idx->verify(&empty).ok());
      EXPECT_EQ(empty.keys, 0u);
      EXPECT_LE(empty.height, 2u);
      EXPECT_LE(empty.leaves, 2u);
      for (uint64_t i = 0; i < 1000; ++i) ASSERT_TRUE(idx->insert(i, i).ok());
      ASSERT_TRUE(idx->verify(&empty).ok());
      EXPECT_EQ(empty.keys, 1000u);
    }
}

// verify() of index `name` (btree or unsorted-leaf, 128 B nodes, 100 keys)
// reports each damage of `cases` as Corruption with a message naming the
// index and the damage's words.
void expect_damage_reported(const char* name,
                            std::initializer_list<std::pair<BtreeDamage, const char*>> cases) {
  for (const auto& [damage, words] : cases) {
    auto idx = open_btree(128, name);
    for (uint64_t k = 1; k <= 100; ++k) ASSERT_TRUE(idx->insert(k * 10, k).ok());
    VerifyReport r;
    ASSERT_TRUE(idx->verify(&r).ok());
    ASSERT_TRUE(btree_damage_for_test(idx.get(), damage).ok());
    const Status s = idx->verify(&r);
    EXPECT_EQ(s.code(), Code::kCorruption) << words;
    EXPECT_NE(s.message().find(words), std::string::npos) << s.message();
    EXPECT_EQ(s.message().rfind(std::string(name) + ": ", 0), 0u) << s.message();
  }
}

// verify() reports each kind of damage as Corruption with a message naming it.
TEST(BtreeTest, VerifyReportsCorruption) {
  expect_damage_reported("btree", {
                                      {BtreeDamage::kUnsortedLeaf, "ascending"},
                                      {BtreeDamage::kLeafChainCycle, "right link"},
                                      {BtreeDamage::kFenceMismatch, "low fence"},
                                      {BtreeDamage::kKeyOutOfRange, "outside the range"},
                                      {BtreeDamage::kCountMismatch, "key count mismatch"},
                                  });
  auto small = open_btree(128);
  EXPECT_EQ(btree_damage_for_test(small.get(), BtreeDamage::kUnsortedLeaf).code(),
            Code::kInvalidArgument);
}

// unsorted-leaf's verify() checks what a sorted leaf's order checked: no key
// twice, and a bitmap that names no slot past the capacity; and every btree
// check still applies.
TEST(UnsortedLeafTest, VerifyReportsCorruption) {
  expect_damage_reported("unsorted-leaf", {
                                              {BtreeDamage::kUnsortedLeaf, "held twice"},
                                              {BtreeDamage::kBitmapPastCapacity, "past the leaf's"},
                                              {BtreeDamage::kLeafChainCycle, "right link"},
                                              {BtreeDamage::kFenceMismatch, "low fence"},
                                              {BtreeDamage::kKeyOutOfRange, "outside the range"},
                                              {BtreeDamage::kCountMismatch, "key count mismatch"},
                                          });
  auto sorted = open_btree(128);
  for (uint64_t k = 1; k <= 100; ++k) ASSERT_TRUE(sorted->insert(k * 10, k).ok());
  EXPECT_EQ(btree_damage_for_test(sorted.get(), BtreeDamage::kBitmapPastCapacity).code(),
            Code::kInvalidArgument);
}

// Leaf capacities: an unsorted leaf gives ceil(C / 64) words to its bitmap,
// so it holds what a sorted leaf holds, less where the bitmap takes a pair's
// room: 128 B 5 (btree 5), 512 B 29 (29), 4 KiB 251 (253). C keys fit in
// one leaf, C + 1 split it.
TEST(UnsortedLeafTest, LeafCapacityPerNodeSize) {
  const struct {
    uint32_t node_size;
    uint64_t btree, unsorted;
  } cases[] = {{128, 5, 5}, {512, 29, 29}, {4096, 253, 251}};
  for (const auto& c : cases) {
    for (const auto& [name, cap] :
         {std::pair{"btree", c.btree}, std::pair{"unsorted-leaf", c.unsorted}}) {
      SCOPED_TRACE(std::string(name) + " " + std::to_string(c.node_size) + " B");
      auto idx = open_btree(c.node_size, name);
      for (uint64_t k = 0; k < cap; ++k) ASSERT_TRUE(idx->insert(cap - k, k).ok());
      VerifyReport r;
      ASSERT_TRUE(idx->verify(&r).ok());
      EXPECT_EQ(r.leaves, 1u);
      ASSERT_TRUE(idx->insert(cap + 1, 0).ok());
      ASSERT_TRUE(idx->verify(&r).ok());
      EXPECT_EQ(r.leaves, 2u);
    }
  }
}

// Scans sort each unsorted leaf in DRAM: keys inserted in descending order
// (each leaf's slots hold them unsorted) come back ascending, from any start.
TEST(UnsortedLeafTest, ScansReturnKeysInOrderFromUnsortedLeaves) {
  auto idx = open_btree(512, "unsorted-leaf");
  for (uint64_t k = 1000; k >= 1; --k) ASSERT_TRUE(idx->insert(k * 2, k).ok());
  std::vector<std::pair<uint64_t, Value>> out;
  ASSERT_EQ(idx->scan(101, 50, &out), 50u);
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_EQ(out[i].first, 102 + 2 * i);
    EXPECT_EQ(out[i].second, 51 + i);
  }
  const auto before = idx->find_last_less_than(101);
  ASSERT_TRUE(before.has_value());
  EXPECT_EQ(before->first, 100u);
}

// This file does not register the test doubles (src/testing/): the
// production registry has none of them.
TEST(ProductionRegistry, HasNoTestDoubles) {
  for (const IndexEntry& e : registered_indexes()) {
    EXPECT_FALSE(is_test_only_index(e.name)) << e.name;
  }
  EXPECT_EQ(find_index_entry("lying-test"), nullptr);
}

// String keys: a 512 B leaf holds 19 pairs (16 B key slots: record pointer
// and prefix word), the footprint counts each key record (1 + length
// bytes), and a removed key's record stays (retired until the tree is
// destroyed), so removes do not lower dram_bytes.
TEST(BtreeStringKeys, KeyRecordsAreCountedAndRetiredNotFreed) {
  testing::StringTestIndex t;
  IndexOptions o;
  o.node_size = 512;
  ASSERT_TRUE(testing::open_test_index("btree", o, &t).ok());
  Index<std::string_view>& idx = *t.index;
  const uint64_t empty = idx.info().dram_bytes;
  EXPECT_EQ(empty, 512u);  // one empty root leaf, no records
  // 19 keys fit the root leaf; the 20th splits it.
  auto key = [](int i) { return std::string(200, 'k') + std::to_string(1000 + i); };
  for (int i = 0; i < 19; ++i) ASSERT_TRUE(idx.insert(key(i), i).ok());
  VerifyReport r;
  ASSERT_TRUE(idx.verify(&r).ok());
  EXPECT_EQ(r.leaves, 1u);
  EXPECT_EQ(idx.info().dram_bytes, 512u + 19 * (1 + 204));
  ASSERT_TRUE(idx.insert(key(19), 19).ok());
  ASSERT_TRUE(idx.verify(&r).ok());
  EXPECT_EQ(r.height, 2u);
  for (int i = 20; i < 2000; ++i) ASSERT_TRUE(idx.insert(key(i), i).ok());
  const uint64_t full = idx.info().dram_bytes;
  ASSERT_TRUE(idx.verify(&r).ok());
  EXPECT_EQ(full, (r.leaves + r.inner_nodes) * 512 + 2000 * (1 + 204));
  // A refused duplicate frees its record at once: no change.
  EXPECT_EQ(idx.insert(key(5), 0).code(), Code::kAlreadyExists);
  EXPECT_EQ(idx.info().dram_bytes, full);
  for (int i = 0; i < 2000; ++i) ASSERT_TRUE(idx.remove(key(i)).ok());
  ASSERT_TRUE(idx.verify(&r).ok());
  EXPECT_EQ(r.keys, 0u);
  EXPECT_GE(idx.info().dram_bytes, full);  // nodes and records retired, not freed
  // The emptied tree takes the keys again (new records).
  for (int i = 0; i < 2000; i += 7) ASSERT_TRUE(idx.insert(key(i), i).ok());
  for (int i = 0; i < 2000; ++i) {
    ASSERT_EQ(idx.lookup(key(i)), i % 7 == 0 ? std::optional<Value>(i) : std::nullopt) << i;
  }
}

// persistent-unsorted:inner=dram (selective persistence, Ni et al. §5):
// leaves in the pool, inner nodes in DRAM, rebuilt from the leaf chain at
// every open; the stored placement wins over the option; a damaged
// placement word is refused.
struct PmRun {
  IndexInfo info;
  VerifyReport report;
};

// Inserts 6000 keys in a scattered order and removes every third (leaf
// merges) in a new persistent-unsorted of 256 B nodes with `inner`; checks
// the model and returns info() and verify()'s report.
PmRun fill_persistent_unsorted(testing::FileIndex* fi, const std::string& inner,
                               std::map<uint64_t, Value>* model) {
  PmRun out;
  IndexOptions o;
  o.node_size = 256;
  o.extra = {{"inner", inner}};
  Status s = fi->create(o);
  EXPECT_TRUE(s.ok()) << s.ToString();
  if (!s.ok()) return out;
  for (uint64_t i = 0; i < 6000; ++i) {
    const uint64_t k = i * 7919 % 6007;
    EXPECT_TRUE(fi->index->insert(k, k + 1).ok());
    (*model)[k] = k + 1;
  }
  for (uint64_t k = 0; k < 6007; k += 3) {
    if (model->erase(k) != 0) {
      EXPECT_TRUE(fi->index->remove(k).ok());
    }
  }
  testing::expect_equals_model(*fi->index, *model);
  out.info = fi->index->info();
  EXPECT_TRUE(fi->index->verify(&out.report).ok());
  return out;
}

TEST(PersistentUnsortedDram, InnerNodesLiveInDramAndAreRebuiltAtEveryOpen) {
  testing::FileIndex pm_tree("persistent-unsorted", "pm");
  testing::FileIndex dram_tree("persistent-unsorted", "dram");
  std::map<uint64_t, Value> model, dram_model;
  const PmRun p = fill_persistent_unsorted(&pm_tree, "pm", &model);
  const PmRun d = fill_persistent_unsorted(&dram_tree, "dram", &dram_model);
  EXPECT_EQ(p.info.caps.placement, Placement::kPmOnly);
  EXPECT_EQ(d.info.caps.placement, Placement::kSelective);
  EXPECT_NE(d.info.description.find("inner nodes in DRAM"), std::string::npos);
  ASSERT_GE(d.report.height, 3u);
  ASSERT_GT(d.report.inner_nodes, 1u);
  // The same operations: the same leaves (the same code splits and merges
  // them), the inner nodes moved from the pool to DRAM.
  EXPECT_EQ(d.report.leaves, p.report.leaves);
  EXPECT_EQ(d.report.inner_nodes, p.report.inner_nodes);
  EXPECT_EQ(p.info.pm_bytes - d.info.pm_bytes, p.report.inner_nodes * 256u);
  EXPECT_GE(d.info.dram_bytes, p.info.dram_bytes + d.report.inner_nodes * 256u);

  // Reopened (a clean close) with the other option: the stored placement
  // wins, the inner nodes are rebuilt three quarters full (fewer than the
  // inserts left), every key is there and the tree takes more.
  ASSERT_TRUE(dram_tree.reopen(IndexOptions{.extra = {{"inner", "pm"}}}).ok());
  const IndexInfo ri = dram_tree.index->info();
  EXPECT_EQ(ri.caps.placement, Placement::kSelective);
  EXPECT_TRUE(ri.recovered);
  EXPECT_GT(ri.recovery_seconds, 0.0);
  VerifyReport r;
  ASSERT_TRUE(dram_tree.index->verify(&r).ok());
  EXPECT_EQ(r.leaves, d.report.leaves);
  EXPECT_GT(r.inner_nodes, 0u);
  EXPECT_EQ(ri.pm_bytes, d.info.pm_bytes);
  testing::expect_equals_model(*dram_tree.index, dram_model);
  for (uint64_t k = 0; k < 6007; k += 3) {
    ASSERT_TRUE(dram_tree.index->insert(k, 7).ok());
    dram_model[k] = 7;
  }
  ASSERT_TRUE(dram_tree.index->verify(&r).ok());
  testing::expect_equals_model(*dram_tree.index, dram_model);

  // And after a crash (no close record): the same.
  dram_tree.crash();
  ASSERT_TRUE(dram_tree.reopen().ok());
  testing::expect_equals_model(*dram_tree.index, dram_model);
  // An inner=pm pool stays inner=pm whatever the option says.
  ASSERT_TRUE(pm_tree.reopen(IndexOptions{.extra = {{"inner", "dram"}}}).ok());
  EXPECT_EQ(pm_tree.index->info().caps.placement, Placement::kPmOnly);
  testing::expect_equals_model(*pm_tree.index, model);
}

TEST(PersistentUnsortedDram, ADamagedPlacementWordIsCorruption) {
  testing::FileIndex fi("persistent-unsorted", "word");
  IndexOptions o;
  o.node_size = 256;
  o.extra = {{"inner", "dram"}};
  ASSERT_TRUE(fi.create(o).ok());
  for (uint64_t k = 0; k < 500; ++k) ASSERT_TRUE(fi.index->insert(k, k).ok());
  fi.close();
  ASSERT_TRUE(fi.open_pool().ok());
  // The placement word: bytes 32..39 of the root object (btree_impl.h).
  auto* word = fi.pool->ptr<uint64_t>(fi.pool->root() + 32);
  ASSERT_EQ(*word, 1u);
  *word = 2;
  fi.pool.reset();
  const Status s = fi.reopen();
  EXPECT_EQ(s.code(), Code::kCorruption) << s.ToString();
  EXPECT_NE(s.message().find("inner placement word is 2"), std::string::npos) << s.ToString();
}

// --- btree:flush=none|group (Ni et al. 2020 §6.2 group flushing) -------------

std::unique_ptr<Index<uint64_t>> open_flush(const char* flush, uint32_t node_size = 512,
                                            const char* name = "btree") {
  testing::TestIndex t;
  IndexOptions o;
  o.node_size = node_size;
  o.threads = 2;
  o.extra = {{"flush", flush}};
  const Status s = testing::open_test_index<uint64_t>(name, o, &t);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return std::move(t.index);
}

/// Lines one insert of `key` into `idx` flushes (PM counters).
uint64_t lines_flushed_by_insert(Index<uint64_t>& idx, uint64_t key) {
  const pm::CounterSnapshot before = pm::snapshot();
  EXPECT_TRUE(idx.insert(key, key).ok());
  return (pm::snapshot() - before).lines_flushed;
}

/// Media model on (emulated mode, cache of `cache_kib`), restored after.
class FlushOption : public ::testing::Test {
 protected:
  void model(uint32_t cache_kib = pm::kDefaultCacheKiB) {
    pm::PersistConfig c;
    c.media_model = true;
    c.cache_kib = cache_kib;
    pm::configure(c);
  }
  void TearDown() override { pm::configure(pm::PersistConfig{}); }
  // flush=group's WA well below flush=none's for index `name`, with a cache
  // of 64 KiB and a tree 8 times as large.
  void group_flushing_lowers_wa(const char* name);
};

TEST_F(FlushOption, IsNotPersistentAndSaysSo) {
  for (const char* flush : {"none", "group"}) {
    auto idx = open_flush(flush);
    ASSERT_NE(idx, nullptr);
    const IndexInfo info = idx->info();
    EXPECT_FALSE(info.caps.persistent) << flush;
    EXPECT_FALSE(info.caps.string_keys) << flush;
    EXPECT_NE(info.description.find("no crash-consistency claim"), std::string::npos) << flush;
    EXPECT_NE(info.description.find(std::string("flush=") + flush), std::string::npos) << flush;
  }
  EXPECT_EQ(open_btree(512)->info().description, kBtreeDescription) << "flush=off is the DRAM tree";
  IndexOptions o;
  o.extra = {{"flush", "group"}};
  std::unique_ptr<Index<std::string_view>> str;
  EXPECT_EQ(make_index<std::string_view>("btree", o, &str).code(), Code::kInvalidArgument);
  o.extra = {{"flush", "sometimes"}};
  std::unique_ptr<Index<uint64_t>> bad;
  EXPECT_EQ(make_index<uint64_t>("btree", o, &bad).code(), Code::kInvalidArgument);
}

TEST_F(FlushOption, ModelTestAtEveryNodeSize) {
  model();
  for (const char* name : {"btree", "unsorted-leaf"}) {
    for (const char* flush : {"none", "group"}) {
      for (uint32_t node_size : {128u, 192u, 512u, 4096u}) {
        SCOPED_TRACE(std::string(name) + " " + flush + " " + std::to_string(node_size));
        auto idx = open_flush(flush, node_size, name);
        testing::run_model_test(*idx, 11 + node_size, 20000, 3000);
      }
    }
  }
}

TEST_F(FlushOption, ConcurrentUnderTheMediaModel) {
  model(64);  // small: evictions from every thread
  for (const char* name : {"btree", "unsorted-leaf"}) {
    for (const char* flush : {"none", "group"}) {
      SCOPED_TRACE(std::string(name) + " " + flush);
      auto idx = open_flush(flush, 256, name);
      testing::run_concurrent_test(*idx, 2, 5, 5000, 1024);
    }
  }
}

// unsorted-leaf: an insert into a 512 B leaf writes its key (slot i at byte
// 48 + 8 i), its value (byte 280 + 8 i) and its bitmap word (byte 40), and
// group flushing flushes those lines once each: lines 0 and 4 for slot 0.
TEST_F(FlushOption, UnsortedLeafGroupFlushesKeyValueAndBitmapLines) {
  model();
  auto group = open_flush("group", 512, "unsorted-leaf");
  auto none = open_flush("none", 512, "unsorted-leaf");
  const auto lines_of = lines_flushed_by_insert;
  EXPECT_EQ(lines_of(*group, 1000), 2u);
  EXPECT_EQ(lines_of(*none, 1000), 0u);
  // Slot 7: key at byte 104 (line 1), value at 336 (line 5), bitmap line 0.
  for (uint64_t k = 1; k < 7; ++k) ASSERT_TRUE(group->insert(k, k).ok());
  EXPECT_EQ(lines_of(*group, 2000), 3u);
}

// What group flushing flushes: after an insert into a 512 B leaf (keys at
// bytes 40..271, values at 272..503), the lines of its count word and of
// the pairs it shifted, each once, in address order; flush=none flushes
// nothing. A root split (node initialisation) flushes both new nodes whole.
TEST_F(FlushOption, GroupFlushesTheModifiedLinesOfEachUpdate) {
  model();
  auto none = open_flush("none");
  auto group = open_flush("group");
  const auto lines_of = lines_flushed_by_insert;
  // Slot 0 of the empty root leaf: count and key in line 0, value in line 4.
  EXPECT_EQ(lines_of(*group, 1000), 2u);
  EXPECT_EQ(lines_of(*none, 1000), 0u);
  // Slots 0..1 (a shift of one pair): the same two lines.
  EXPECT_EQ(lines_of(*group, 500), 2u);
  // 26 more keys above: slots 2..27; key 1001 at slot 2 shifts 2..27
  // (keys 56..272: lines 0..4; values 288..504: lines 4..7): lines 0..7.
  for (uint64_t k = 2000; k < 2026; ++k) ASSERT_TRUE(group->insert(k, k).ok());
  EXPECT_EQ(lines_of(*group, 1001), 8u);
  // The leaf is full (29 pairs): the next insert splits the root, writing
  // a new leaf and a new root (8 lines each, flushed whole) besides the
  // old leaf's ranges and the insert's own.
  EXPECT_GE(lines_of(*group, 3000), 16u + 2u);
  VerifyReport r;
  ASSERT_TRUE(group->verify(&r).ok());
  EXPECT_EQ(r.height, 2u);
}

// Ni et al. 2020 §6.2 on the media model: the volatile tree's modified lines,
// flushed in address order right after each update, combine in the XPLine
// buffer; left to the cache's evictions they mostly do not. flush=none
// writes lines back only by eviction (and the final drain), never by flush.
TEST_F(FlushOption, GroupFlushingLowersMediaWriteAmplification) {
  for (const char* name : {"btree", "unsorted-leaf"}) {
    SCOPED_TRACE(name);
    group_flushing_lowers_wa(name);
  }
}

void FlushOption::group_flushing_lowers_wa(const char* name) {
  model(64);  // 1,024 lines: a 20,000-key tree (~1,000 leaves of 8 lines) is 8x as large
  auto wa = [&](const char* flush, pm::CounterSnapshot* out) {
    auto idx = open_flush(flush, 512, name);
    pm::media_drain();
    const pm::CounterSnapshot before = pm::snapshot();
    for (uint64_t i = 0; i < 20000; ++i) EXPECT_TRUE(idx->insert(i * 7919 % 20011, i).ok());
    pm::media_drain();
    *out = pm::snapshot() - before;
    return static_cast<double>(out->media_writes) * pm::kXPLineSize /
           (static_cast<double>(out->lines_written_back) * pm::kLineSize);
  };
  pm::CounterSnapshot n, g;
  const double wa_none = wa("none", &n);
  const double wa_group = wa("group", &g);
  EXPECT_EQ(n.flushes, 0u);
  EXPECT_GT(n.lines_written_back, 20000u) << "evictions write the dirty lines back";
  EXPECT_GT(g.flushes, 20000u);
  // By more than a fifth for btree (3.40 -> 1.96 here; 3.82 -> 2.30 under
  // ASan, whose heap places the nodes elsewhere), by more than a tenth for
  // unsorted-leaf (3.71 -> 2.70; under ASan 3.92 -> 3.18).
  const double most = std::string_view(name) == "btree" ? 0.8 : 0.9;
  EXPECT_LT(wa_group, wa_none * most) << "none " << wa_none << ", group " << wa_group;
  // btree: fewer media writes too, though more lines are written back (the
  // cache no longer absorbs repeated stores to a line): true when, as here,
  // the tree is much larger than the cache (at 4x the cache, flush=none
  // wrote less). unsorted-leaf: not so (48,826 against 54,434 media writes
  // here): an insert writes two or three scattered lines (no shift), and
  // flushing them at once sends each to the media where the cache would
  // have absorbed the next stores to the bitmap word's line.
  if (std::string_view(name) == "btree") {
    EXPECT_LT(g.media_writes, n.media_writes);
  }
  std::printf(
      "%s flush=none: %llu lines written back, %llu media writes, WA %.2f\n"
      "%s flush=group: %llu lines written back, %llu media writes, WA %.2f\n",
      name, static_cast<unsigned long long>(n.lines_written_back),
      static_cast<unsigned long long>(n.media_writes), wa_none, name,
      static_cast<unsigned long long>(g.lines_written_back),
      static_cast<unsigned long long>(g.media_writes), wa_group);
}

}  // namespace
}  // namespace nvindex
