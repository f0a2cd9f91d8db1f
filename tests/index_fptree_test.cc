// fptree, what is specific to the FP-Tree (the conformance suite,
// tests/index_conformance_test.cc, holds what every index must do): leaf
// layout per node size, fingerprint collisions, capability claims, PM per
// split, bulk load at fill factors (leaf counts, freed head leaf), recovery
// (a split caught in flight by its micro-log in both of its crash states,
// stale lock bytes, empty leaves unlinked, damaged pools), a concurrent
// split stress, and string keys (PM per insert against integer keys, key
// records freed on remove and marked once by recovery, readers racing
// removes).
#include <gtest/gtest.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <iterator>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "indexes/fptree/fptree.h"
#include "nvindex/index.h"
#include "nvindex/pm/allocator.h"
#include "nvindex/pm/pool.h"
#include "support/model_check.h"

namespace nvindex {
namespace {

using fptree::FpTree;
using testing::open_test_index;
using testing::run_model_test;
using testing::TestIndex;

TEST(FpTreeLayout, SlotsPerNodeSize) {
  struct Want {
    uint32_t node_size, block, slots, entries;
  };
  for (const Want w : {Want{256, 256, 14, 32}, Want{512, 512, 29, 48}, Want{768, 1024, 44, 64},
                       Want{1024, 1024, 47, 64}}) {
    fptree::Layout l;
    ASSERT_TRUE(fptree::Layout::of(w.node_size, &l)) << w.node_size;
    EXPECT_EQ(l.block, w.block);
    EXPECT_EQ(l.slots, w.slots) << w.node_size;
    EXPECT_EQ(l.entries_offset, w.entries);
    // Header (bitmap, next, lock, fingerprints) in line 0; entries fit.
    EXPECT_LE(fptree::kFpOffset + l.slots, 64u);
    EXPECT_LE(l.entries_offset + l.slots * fptree::kEntryBytes, w.node_size);
  }
  fptree::Layout l;
  for (uint32_t bad : {0u, 128u, 384u, 2048u, 4096u}) EXPECT_FALSE(fptree::Layout::of(bad, &l));
}

// Keys whose fingerprints are equal must still be told apart by the key
// compare (the fingerprint only filters).
TEST(FpTree, FingerprintCollisions) {
  TestIndex t;
  ASSERT_TRUE(open_test_index("fptree", 256, &t, 16ull << 20).ok());
  Index<uint64_t>& idx = *t.index;
  std::vector<uint64_t> same;  // keys with the fingerprint of key 1
  const uint8_t fp1 = static_cast<uint8_t>(XXH3_64bits("\x01\0\0\0\0\0\0\0", 8));
  for (uint64_t k = 1; same.size() < 40; ++k) {
    if (static_cast<uint8_t>(XXH3_64bits(&k, 8)) == fp1) same.push_back(k);
  }
  for (uint64_t k : same) ASSERT_TRUE(idx.insert(k, k * 2).ok());
  for (uint64_t k : same) ASSERT_EQ(idx.lookup(k), k * 2);
  for (size_t i = 0; i < same.size(); i += 2) ASSERT_TRUE(idx.remove(same[i]).ok());
  for (size_t i = 0; i < same.size(); ++i) {
    EXPECT_EQ(idx.lookup(same[i]).has_value(), i % 2 == 1) << same[i];
  }
  VerifyReport r;
  ASSERT_TRUE(idx.verify(&r).ok());
  EXPECT_EQ(r.keys, 20u);
}

TEST(FpTree, InfoClaims) {
  TestIndex t;
  ASSERT_TRUE(open_test_index("fptree", 768, &t, 8ull << 20).ok());
  IndexInfo i = t.index->info();
  EXPECT_EQ(i.caps.placement, Placement::kSelective);
  // Root object (256 B) + one empty head leaf (a 1 KiB block at 768 B).
  EXPECT_EQ(i.pm_bytes, 256u + 1024u);
  EXPECT_GT(i.dram_bytes, 0u);
  EXPECT_NE(i.description.find("SIGMOD'16"), std::string::npos);
  VerifyReport r;
  ASSERT_TRUE(t.index->verify(&r).ok());
  EXPECT_EQ(r.leaves, 1u);
  EXPECT_EQ(r.keys, 0u);
}

TEST(FpTree, SplitsCountOneSmoEachAndPmMatchesLeaves) {
  TestIndex t;
  ASSERT_TRUE(open_test_index("fptree", 256, &t, 16ull << 20).ok());
  const pm::CounterSnapshot before = pm::snapshot();
  for (uint64_t k = 0; k < 2000; ++k) ASSERT_TRUE(t.index->insert(k * 7919 % 2003, k).ok());
  const pm::CounterSnapshot d = pm::snapshot() - before;
  VerifyReport r;
  ASSERT_TRUE(t.index->verify(&r).ok());
  EXPECT_EQ(r.keys, 2000u);
  EXPECT_EQ(d.smos, r.leaves - 1);  // one SMO per leaf split
  EXPECT_EQ(t.index->info().pm_bytes, 256u + 256u * r.leaves);
  EXPECT_GE(r.inner_nodes, 1u);
  EXPECT_GE(r.height, 2u);
}

TEST(FpTree, BulkLoad) {
  for (uint32_t ns : {256u, 512u, 768u, 1024u}) {
    for (double fill : {1.0, 0.7, 0.01}) {
      std::unique_ptr<pm::Pool> pool;
      ASSERT_TRUE(pm::Pool::create_anonymous(64ull << 20, "fptree", &pool).ok());
      IndexOptions o;
      o.pool = pool.get();
      o.node_size = ns;
      o.fill_factor = fill;
      std::unique_ptr<Index<uint64_t>> idx;
      ASSERT_TRUE(make_index<uint64_t>("fptree", o, &idx).ok());
      std::vector<std::pair<uint64_t, Value>> kv;
      for (uint64_t k = 0; k < 5000; ++k) kv.emplace_back(k * 5 + 3, k);
      ASSERT_TRUE(idx->bulk_load(kv).ok());
      fptree::Layout l;
      fptree::Layout::of(ns, &l);
      const uint64_t per = std::max<uint64_t>(1, static_cast<uint64_t>(std::ceil(fill * l.slots)));
      VerifyReport r;
      ASSERT_TRUE(idx->verify(&r).ok());
      EXPECT_EQ(r.keys, 5000u);
      EXPECT_EQ(r.leaves, (5000 + per - 1) / per) << ns << " " << fill;
      // The old empty head leaf was freed: PM = root object + the leaves.
      EXPECT_EQ(idx->info().pm_bytes, 256u + l.block * r.leaves);
      for (uint64_t k = 0; k < 5000; k += 7) ASSERT_EQ(idx->lookup(k * 5 + 3), k);
      EXPECT_FALSE(idx->lookup(4).has_value());
      EXPECT_TRUE(idx->bulk_load(kv).code() == Code::kInvalidArgument);  // not empty
      // The loaded tree keeps working: inserts between the keys split leaves.
      for (uint64_t k = 0; k < 2000; ++k) ASSERT_TRUE(idx->insert(k * 5 + 4, k).ok());
      ASSERT_TRUE(idx->verify(&r).ok());
      EXPECT_EQ(r.keys, 7000u);
      std::vector<std::pair<uint64_t, Value>> out;
      EXPECT_EQ(idx->scan(0, 10000, &out), 7000u);
    }
  }
  TestIndex t;
  ASSERT_TRUE(open_test_index("fptree", 256, &t, 8ull << 20).ok());
  std::vector<std::pair<uint64_t, Value>> bad = {{1, 1}, {3, 3}, {3, 4}};
  EXPECT_TRUE(t.index->bulk_load(bad).code() == Code::kInvalidArgument);
  VerifyReport r;
  ASSERT_TRUE(t.index->verify(&r).ok());
  EXPECT_EQ(r.keys, 0u);
}

TEST(FpTree, BulkLoadOutOfSpaceLeavesTheIndexEmpty) {
  TestIndex t;
  ASSERT_TRUE(open_test_index("fptree", 256, &t, pm::kMinPoolSize).ok());
  std::vector<std::pair<uint64_t, Value>> kv;
  for (uint64_t k = 0; k < 400000; ++k) kv.emplace_back(k, k);
  const uint64_t before = t.index->info().pm_bytes;
  EXPECT_EQ(t.index->bulk_load(kv).code(), Code::kOutOfSpace);
  EXPECT_EQ(t.index->info().pm_bytes, before);
  VerifyReport r;
  ASSERT_TRUE(t.index->verify(&r).ok());
  EXPECT_EQ(r.keys, 0u);
  ASSERT_TRUE(t.index->insert(7, 7).ok());
}

// Capacity 14: one split every ~7 inserts, racing with readers and writers.
TEST(FpTree, ConcurrentSplitStress) {
  for (unsigned threads : {2u, 4u, 8u}) {
    TestIndex t;
    ASSERT_TRUE(open_test_index("fptree", 256, &t, 64ull << 20).ok());
    testing::run_concurrent_test(*t.index, threads, 100 + threads, 8000, 512);
  }
}

// ---------------------------------------------------------------- recovery

class FpTreeRecovery : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = "/dev/shm/nvindex_fptree_test_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".pool";
    std::filesystem::remove(path_);
  }
  void TearDown() override { std::filesystem::remove(path_); }

  Status open(uint32_t node_size, std::unique_ptr<pm::Pool>* pool,
              std::unique_ptr<Index<uint64_t>>* idx) {
    Status s = std::filesystem::exists(path_)
                   ? pm::Pool::open(path_, "fptree", pm::Mode::kEmulated, pool)
                   : pm::Pool::create(path_, 16ull << 20, "fptree", pm::Mode::kEmulated, pool);
    if (!s.ok()) return s;
    IndexOptions o;
    o.pool = pool->get();
    o.node_size = node_size;
    return make_index<uint64_t>("fptree", o, idx);
  }
  static FpTree* tree(Index<uint64_t>* i) { return dynamic_cast<FpTree*>(i); }
  static fptree::RootObject* root(pm::Pool* p) { return p->ptr<fptree::RootObject>(p->root()); }

  std::string path_;
};

// A split caught after its link (L.sibling = N durable) but before L's bitmap:
// L still holds N's keys; the active micro-log lets recovery finish the
// split by clearing them from L.
TEST_F(FpTreeRecovery, SplitLogRedoClearsMovedKeys) {
  uint64_t l_off = 0, n_off = 0, full_bits = 0;
  {
    std::unique_ptr<pm::Pool> pool;
    std::unique_ptr<Index<uint64_t>> idx;
    ASSERT_TRUE(open(256, &pool, &idx).ok());
    FpTree* t = tree(idx.get());
    for (uint64_t k = 1; k <= t->slots(); ++k) ASSERT_TRUE(idx->insert(k * 10, k).ok());
    l_off = root(pool.get())->head.load();
    full_bits = t->leaf(l_off)->bitmap.load();
    ASSERT_EQ(full_bits, (uint64_t{1} << t->slots()) - 1);
    ASSERT_TRUE(idx->insert(1000, 1000).ok());  // splits
    n_off = t->leaf(l_off)->sibling.load();
    ASSERT_NE(n_off, 0u);
    // Back to the crash state {log active, L.sibling = N, L's bitmap full}.
    t->leaf(l_off)->bitmap.store(full_bits);
    t->leaf(l_off)->lock.store(1);  // and a lock byte that reached PM
    root(pool.get())->logs[3].new_leaf.store(n_off);
    root(pool.get())->logs[3].cur.store(l_off);
  }
  std::unique_ptr<pm::Pool> pool;
  std::unique_ptr<Index<uint64_t>> idx;
  ASSERT_TRUE(open(256, &pool, &idx).ok());
  EXPECT_EQ(root(pool.get())->logs[3].cur.load(), 0u);
  VerifyReport r;
  ASSERT_TRUE(idx->verify(&r).ok());
  EXPECT_EQ(r.keys, tree(idx.get())->slots() + 1);
  EXPECT_EQ(r.leaves, 2u);
  for (uint64_t k = 1; k <= tree(idx.get())->slots(); ++k) {
    EXPECT_EQ(idx->lookup(k * 10), k);
  }
  EXPECT_EQ(idx->lookup(1000), 1000u);
  EXPECT_TRUE(idx->insert(15, 15).ok());  // the lock byte was cleared
}

// A split caught before its link: N is unreachable; recovery resets the log
// and the allocator frees N (undo).
TEST_F(FpTreeRecovery, SplitLogUndoFreesTheNewLeaf) {
  uint64_t slots = 0;
  {
    std::unique_ptr<pm::Pool> pool;
    std::unique_ptr<Index<uint64_t>> idx;
    ASSERT_TRUE(open(256, &pool, &idx).ok());
    FpTree* t = tree(idx.get());
    slots = t->slots();
    for (uint64_t k = 1; k <= slots; ++k) ASSERT_TRUE(idx->insert(k * 10, k).ok());
    const uint64_t l_off = root(pool.get())->head.load();
    const uint64_t full_bits = t->leaf(l_off)->bitmap.load();
    ASSERT_TRUE(idx->insert(1000, 1000).ok());  // splits
    const uint64_t n_off = t->leaf(l_off)->sibling.load();
    // Back to {log active, L unchanged}: the insert of 1000 is undone too.
    t->leaf(l_off)->bitmap.store(full_bits);
    t->leaf(l_off)->sibling.store(0);
    root(pool.get())->logs[0].new_leaf.store(n_off);
    root(pool.get())->logs[0].cur.store(l_off);
    idx.reset();
    pool->keep_unclean();  // a crash: the state above is not a clean close's
  }
  std::unique_ptr<pm::Pool> pool;
  std::unique_ptr<Index<uint64_t>> idx;
  ASSERT_TRUE(open(256, &pool, &idx).ok());
  VerifyReport r;
  ASSERT_TRUE(idx->verify(&r).ok());
  EXPECT_EQ(r.keys, slots);
  EXPECT_EQ(r.leaves, 1u);
  EXPECT_EQ(pool->allocator().bytes_in_use(), 256u + 256u);  // N reclaimed
  EXPECT_FALSE(idx->lookup(1000).has_value());
  ASSERT_TRUE(idx->insert(1000, 1).ok());
  ASSERT_TRUE(idx->verify(&r).ok());
  EXPECT_EQ(r.leaves, 2u);
}

TEST_F(FpTreeRecovery, EmptyLeavesAreUnlinked) {
  {
    std::unique_ptr<pm::Pool> pool;
    std::unique_ptr<Index<uint64_t>> idx;
    ASSERT_TRUE(open(256, &pool, &idx).ok());
    for (uint64_t k = 0; k < 1000; ++k) ASSERT_TRUE(idx->insert(k, k).ok());
    for (uint64_t k = 0; k < 1000; ++k) {
      if (k < 100 || (k > 400 && k < 800)) {
        ASSERT_TRUE(idx->remove(k).ok());
      }
    }
  }
  std::unique_ptr<pm::Pool> pool;
  std::unique_ptr<Index<uint64_t>> idx;
  ASSERT_TRUE(open(256, &pool, &idx).ok());
  VerifyReport r;
  ASSERT_TRUE(idx->verify(&r).ok());
  EXPECT_EQ(r.keys, 501u);  // 100..400 and 800..999
  // Leaves hold 7 or 8 keys after ascending splits: about 501 / 7 + head.
  EXPECT_LE(r.leaves, 501u / 7 + 2);
  EXPECT_EQ(pool->allocator().bytes_in_use(), 256u + 256u * r.leaves);
  auto fl = idx->find_last_less_than(800);
  ASSERT_TRUE(fl.has_value());
  EXPECT_EQ(fl->first, 400u);
  EXPECT_FALSE(idx->find_last_less_than(100).has_value());
  for (uint64_t k = 0; k < 1000; ++k) {
    if (k < 100 || (k > 400 && k < 800)) {
      ASSERT_TRUE(idx->insert(k, k).ok());
    }
  }
  ASSERT_TRUE(idx->verify(&r).ok());
  EXPECT_EQ(r.keys, 1000u);
}

TEST_F(FpTreeRecovery, DamagedPoolsAreRefused) {
  uint64_t head = 0;
  {
    std::unique_ptr<pm::Pool> pool;
    std::unique_ptr<Index<uint64_t>> idx;
    ASSERT_TRUE(open(256, &pool, &idx).ok());
    for (uint64_t k = 0; k < 100; ++k) ASSERT_TRUE(idx->insert(k, k).ok());
    head = root(pool.get())->head.load();
    // A cycle: the last leaf points back at the head.
    uint64_t off = head;
    FpTree* t = tree(idx.get());
    while (t->leaf(off)->sibling.load() != 0) off = t->leaf(off)->sibling.load();
    t->leaf(off)->sibling.store(head);
  }
  {
    std::unique_ptr<pm::Pool> pool;
    std::unique_ptr<Index<uint64_t>> idx;
    Status s = open(256, &pool, &idx);
    EXPECT_EQ(s.code(), Code::kCorruption) << s.ToString();
    EXPECT_NE(s.message().find("cycle"), std::string::npos) << s.ToString();
    root(pool.get())->head.store(12345);  // not a leaf block
  }
  {
    std::unique_ptr<pm::Pool> pool;
    std::unique_ptr<Index<uint64_t>> idx;
    Status s = open(256, &pool, &idx);
    EXPECT_EQ(s.code(), Code::kCorruption) << s.ToString();
    root(pool.get())->magic = 42;
  }
  std::unique_ptr<pm::Pool> pool;
  std::unique_ptr<Index<uint64_t>> idx;
  Status s = open(256, &pool, &idx);
  EXPECT_EQ(s.code(), Code::kCorruption) << s.ToString();
  EXPECT_NE(s.message().find("magic"), std::string::npos) << s.ToString();
}

// ------------------------------------------------------------ string keys

/// An fptree with string keys in a pool file (fptree:string).
struct StringTree : testing::StringTreeFile<fptree::FpTreeString> {
  explicit StringTree(const std::string& tag = "s") : StringTreeFile("fptree", tag) {}
};

using testing::prefixed_key;

// PM cost of an insert: a 24-byte string key against an integer key, on the
// same random order at 256 B leaves (docs/indexes/fptree.md quotes it).
TEST(FpTreeString, InsertCostAgainstIntegerKeys) {
  // The record costs one line and one fence per insert; nothing else
  // changes (a split moves key words, the separator is a DRAM copy).
  testing::expect_record_costs_one_line_and_fence("fptree", 256);
}

// Key records: a removed key's record is freed (single thread: at once), a
// failed insert leaves none behind, and recovery marks every live slot's
// record once: the allocator's bytes equal root + leaves + records before and
// after crash-style reopens, also after removes emptied whole leaves (which
// recovery unlinks) and with a split's micro-log found active.
TEST(FpTreeString, RecordsFreedOnRemoveAndMarkedOnceByRecovery) {
  for (uint32_t size : {256u, 768u}) {
    StringTree st("r" + std::to_string(size));
    ASSERT_TRUE(st.create(size).ok());
    std::map<std::string, Value> model;
    std::mt19937_64 rng(size);
    ASSERT_NO_FATAL_FAILURE(
        testing::insert_random_prefixed_keys(*st.index, rng, 6000, 4000, &model));
    // Remove a run of consecutive keys (emptying whole leaves) and others.
    auto run = model.lower_bound(prefixed_key(1000));
    for (int i = 0; i < 400 && run != model.end(); ++i) {
      ASSERT_TRUE(st.index->remove(run->first).ok());
      run = model.erase(run);
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
    EXPECT_EQ(st.pool->allocator().bytes_in_use(), fptree::kRootBytes + vr.pm_bytes);
    EXPECT_GE(vr.pm_bytes, vr.leaves * block + model.size() * 64);
    const uint64_t leaves_before = vr.leaves;
    for (int round = 0; round < 2; ++round) {
      st.crash();
      IndexOptions o;
      o.node_size = size;
      ASSERT_TRUE(st.reopen(o).ok());
      testing::expect_equals_model(*st.index, model);
      ASSERT_TRUE(st.index->verify(&vr).ok());
      EXPECT_EQ(st.pool->allocator().bytes_in_use(), fptree::kRootBytes + vr.pm_bytes);
    }
    EXPECT_LT(vr.leaves, leaves_before) << "recovery unlinks the emptied leaves";
    // find_last_less_than just above and below every key of a sample.
    for (auto it = model.begin(); it != model.end();
         std::advance(it, std::min<size_t>(37, std::distance(it, model.end())))) {
      const auto got = st.index->find_last_less_than(it->first + '\0');
      ASSERT_TRUE(got.has_value());
      EXPECT_EQ(got->first, it->first);
    }
  }
}

// Optimistic readers (lookups, scans, find_last_less_than) racing writers
// that remove keys: the readers dereference records of removed keys, which
// stay allocated until no operation is in flight. Run under TSan and ASan.
TEST(FpTreeString, ReadersRaceRemoves) {
  StringTree st;
  ASSERT_TRUE(st.create(256).ok());
  testing::run_string_readers_race_removes(*st.index, 2, 1500);
  // Quiescent again: the next remove frees every retired record.
  ASSERT_TRUE(st.index->remove(prefixed_key(1 * 2)).ok());
  EXPECT_EQ(st.tree().retired_records(), 0u);
}

}  // namespace
}  // namespace nvindex
