// divided-skiplist, what is specific to its design (the conformance suite,
// tests/index_conformance_test.cc, holds what every index must do): node
// size ignored, footprint, PM cost per operation, the DRAM towers' height
// distribution, recovery (towers rebuilt, a crash-left unreachable element,
// a pool without a root, damaged pools).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "indexes/divided_skiplist/divided_skiplist.h"
#include "nvindex/index.h"
#include "nvindex/pm/allocator.h"
#include "nvindex/pm/counters.h"
#include "nvindex/pm/pool.h"
#include "support/model_check.h"

namespace nvindex {
namespace {

using divided_skiplist::DividedSkiplist;
using divided_skiplist::Element;
using divided_skiplist::RootObject;
using testing::expect_equals_model;
using testing::open_test_index;
using testing::TestIndex;

constexpr char kName[] = "divided-skiplist";
constexpr uint64_t kPoolBytes = 32ull << 20;

TEST(DividedSkiplist, NodeSizeIsIgnored) {
  for (uint32_t ns : {0u, 64u, 100u, 512u, 8192u}) {
    TestIndex t;
    ASSERT_TRUE(open_test_index(kName, ns, &t, 8ull << 20).ok()) << ns;
    EXPECT_EQ(t.index->info().node_size, 64u);
    EXPECT_TRUE(t.index->insert(1, 2).ok());
  }
}

TEST(DividedSkiplist, InfoClaims) {
  TestIndex t;
  ASSERT_TRUE(open_test_index(kName, 512, &t, 8ull << 20).ok());
  IndexInfo i = t.index->info();
  EXPECT_EQ(i.caps.placement, Placement::kSelective);
  EXPECT_EQ(i.node_size, 64u);
  EXPECT_EQ(i.pm_bytes, 128u);  // root object + head sentinel
  EXPECT_GT(i.dram_bytes, 0u);
  EXPECT_NE(i.description.find("VLDB'20"), std::string::npos);
}

// The PM cost the design promises: insert = element persist + link NAW
// (2 flushed lines, 2 fences, 1 NAW), update = 1 line + 1 fence, remove =
// 1 NAW; no SMO ever. PM bytes = (elements + 2) x 64.
TEST(DividedSkiplist, PmCostPerOperation) {
  TestIndex t;
  ASSERT_TRUE(open_test_index(kName, 128, &t, 16ull << 20).ok());
  Index<uint64_t>& idx = *t.index;
  if (t.pool->mode() == pm::Mode::kDram) GTEST_SKIP() << "volatile mode counts nothing";
  constexpr uint64_t n = 1000;
  pm::CounterSnapshot a = pm::snapshot();
  for (uint64_t k = 0; k < n; ++k) ASSERT_TRUE(idx.insert(k * 7919 % 100003, k).ok());
  pm::CounterSnapshot b = pm::snapshot();
  pm::CounterSnapshot d = b - a;
  EXPECT_EQ(d.lines_flushed, 2 * n);
  EXPECT_EQ(d.fences, 2 * n);
  EXPECT_EQ(d.naws, n);
  EXPECT_EQ(d.allocs, n);
  EXPECT_EQ(d.smos, 0u);
  EXPECT_EQ(t.pool->allocator().bytes_in_use(), (n + 2) * 64);
  for (uint64_t k = 0; k < n; ++k) ASSERT_TRUE(idx.update(k * 7919 % 100003, ~k).ok());
  pm::CounterSnapshot c = pm::snapshot();
  d = c - b;
  EXPECT_EQ(d.lines_flushed, n);
  EXPECT_EQ(d.fences, n);
  EXPECT_EQ(d.naws, 0u);
  for (uint64_t k = 0; k < n; ++k) ASSERT_TRUE(idx.remove(k * 7919 % 100003).ok());
  d = pm::snapshot() - c;
  EXPECT_EQ(d.lines_flushed, n);
  EXPECT_EQ(d.fences, n);
  EXPECT_EQ(d.naws, n);
  EXPECT_EQ(d.frees, n);
  EXPECT_EQ(t.pool->allocator().bytes_in_use(), 2u * 64);
  // Failed operations write nothing.
  c = pm::snapshot();
  ASSERT_TRUE(idx.insert(5, 5).ok());
  b = pm::snapshot();
  EXPECT_TRUE(idx.insert(5, 6).IsAlreadyExists());
  EXPECT_TRUE(idx.update(6, 6).IsNotFound());
  EXPECT_TRUE(idx.remove(6).IsNotFound());
  d = pm::snapshot() - b;
  EXPECT_EQ(d.flushes, 0u);
  EXPECT_EQ(d.fences, 0u);
  EXPECT_EQ(d.allocs, 0u);
}

// Towers: about a quarter of the elements get one (p = 1/4), the height
// grows like log4(n), and removing every element removes every tower.
TEST(DividedSkiplist, TowersFollowTheHeightDistribution) {
  TestIndex t;
  ASSERT_TRUE(open_test_index(kName, 128, &t, 32ull << 20).ok());
  Index<uint64_t>& idx = *t.index;
  const uint64_t dram0 = idx.info().dram_bytes;
  constexpr uint64_t n = 40000;
  for (uint64_t k = 0; k < n; ++k)
    ASSERT_TRUE(idx.insert(k * 2654435761ull % (1ull << 40), k).ok());
  VerifyReport r;
  ASSERT_TRUE(idx.verify(&r).ok());
  EXPECT_EQ(r.keys, n);
  EXPECT_EQ(r.leaves, n + 1);
  EXPECT_GT(r.inner_nodes, n / 5);
  EXPECT_LT(r.inner_nodes, n / 3);
  EXPECT_GE(r.height, 6u);  // log4(40000) ~ 7.6
  EXPECT_LE(r.height, 12u);
  EXPECT_GT(idx.info().dram_bytes, dram0 + r.inner_nodes * 24);
  for (uint64_t k = 0; k < n; ++k) ASSERT_TRUE(idx.remove(k * 2654435761ull % (1ull << 40)).ok());
  ASSERT_TRUE(idx.verify(&r).ok());
  EXPECT_EQ(r.keys, 0u);
  EXPECT_EQ(r.inner_nodes, 0u);
  EXPECT_EQ(idx.info().dram_bytes, dram0);
}

// ---------------------------------------------------------------- recovery

/// A divided-skiplist in a pool file (tests/support/model_check.h).
struct FilePool : testing::FileIndex {
  explicit FilePool(const std::string& tag) : FileIndex(kName, tag) {}
  void create() { ASSERT_TRUE(FileIndex::create({}, kPoolBytes).ok()); }
  const RootObject* root() const { return pool->ptr<RootObject>(pool->root()); }
};

TEST(DividedSkiplistRecovery, ReopenKeepsEveryKeyAndRebuildsTheTowers) {
  FilePool fp("reopen");
  fp.create();
  std::map<uint64_t, Value> model;
  for (uint64_t i = 0; i < 20000; ++i) {
    const uint64_t k = i * 0x9E3779B97F4A7C15ull;
    ASSERT_TRUE(fp.index->insert(k, i).ok());
    model[k] = i;
  }
  for (uint64_t i = 0; i < 20000; i += 3) {
    const uint64_t k = i * 0x9E3779B97F4A7C15ull;
    ASSERT_TRUE(fp.index->remove(k).ok());
    model.erase(k);
  }
  ASSERT_TRUE(fp.reopen().ok());
  IndexInfo info = fp.index->info();
  EXPECT_TRUE(info.recovered);
  EXPECT_GE(info.recovery_seconds, 0.0);
  expect_equals_model(*fp.index, model);
  VerifyReport r;
  ASSERT_TRUE(fp.index->verify(&r).ok());
  EXPECT_GT(r.inner_nodes, model.size() / 5);
  EXPECT_GT(r.height, 4u);
  // Leak check: exactly the root object, the head and the elements.
  EXPECT_EQ(fp.pool->allocator().bytes_in_use(), (model.size() + 2) * 64);
  // The recovered index keeps working, and survives a second reopen.
  for (uint64_t i = 0; i < 1000; ++i) {
    ASSERT_TRUE(fp.index->insert(i, i).ok());
    model[i] = i;
  }
  ASSERT_TRUE(fp.reopen().ok());
  expect_equals_model(*fp.index, model);
}

// A crash between an element's persist and its link NAW leaves a persisted,
// unreachable block: recovery must free it (and the list stays unchanged).
TEST(DividedSkiplistRecovery, UnlinkedElementIsReclaimed) {
  FilePool fp("unlinked");
  fp.create();
  for (uint64_t k = 1; k <= 10; ++k) ASSERT_TRUE(fp.index->insert(k, k).ok());
  uint64_t off = 0;
  ASSERT_TRUE(fp.pool->allocator().allocate(64, &off).ok());
  Element* e = fp.pool->ptr<Element>(off);
  e->key = 5;  // a duplicate key: harmless while unlinked
  e->value.store(99);
  e->next.store(0);
  e->magic = divided_skiplist::kElementMagic;
  EXPECT_EQ(fp.pool->allocator().bytes_in_use(), 13u * 64);
  fp.crash();  // a crash: on a cleanly closed pool the block would be damage
  ASSERT_TRUE(fp.reopen().ok());
  EXPECT_EQ(fp.pool->allocator().bytes_in_use(), 12u * 64);
  EXPECT_EQ(fp.index->lookup(5), 5u);
  VerifyReport r;
  ASSERT_TRUE(fp.index->verify(&r).ok());
  EXPECT_EQ(r.keys, 10u);
}

// A pool created but never given a root (crash inside create) gets a new
// index on reopen, reusing the blocks.
TEST(DividedSkiplistRecovery, PoolWithoutRootGetsANewList) {
  FilePool fp("noroot");
  ASSERT_TRUE(pm::Pool::create(fp.path(), kPoolBytes, kName, pm::Mode::kEmulated, &fp.pool).ok());
  ASSERT_TRUE(fp.reopen().ok());
  EXPECT_FALSE(fp.index->info().recovered);
  ASSERT_TRUE(fp.index->insert(1, 1).ok());
  ASSERT_TRUE(fp.reopen().ok());
  EXPECT_TRUE(fp.index->info().recovered);
  EXPECT_EQ(fp.index->lookup(1), 1u);
}

/// Builds a 3-element list, lets `damage` change the pool, and expects the
/// reopen to fail with Corruption whose message contains `what`.
void expect_corruption(const std::string& tag, const std::string& what,
                       void (*damage)(FilePool&, const std::vector<uint64_t>&)) {
  FilePool fp(tag);
  fp.create();
  for (uint64_t k : {10u, 20u, 30u}) ASSERT_TRUE(fp.index->insert(k, k).ok());
  std::vector<uint64_t> offs;  // head, then the elements in key order
  offs.push_back(fp.root()->head);
  for (int i = 0; i < 3; ++i) offs.push_back(fp.pool->ptr<Element>(offs.back())->next.load());
  fp.index.reset();
  damage(fp, offs);
  fp.pool.reset();
  Status s = fp.reopen();
  EXPECT_EQ(s.code(), Code::kCorruption) << tag << ": " << s.ToString();
  EXPECT_NE(s.message().find(what), std::string::npos) << s.ToString();
  EXPECT_EQ(fp.index, nullptr);
}

TEST(DividedSkiplistRecovery, DamagedPoolsAreRefused) {
  expect_corruption("rootmagic", "root object magic", [](FilePool& fp, const auto&) {
    const_cast<RootObject*>(fp.root())->magic = 1;
  });
  expect_corruption("head", "head sentinel", [](FilePool& fp, const auto&) {
    const_cast<RootObject*>(fp.root())->head = 12345;
  });
  expect_corruption("order", "strictly increasing", [](FilePool& fp, const auto& offs) {
    fp.pool->ptr<Element>(offs[2])->key = 5;
  });
  expect_corruption("cycle", "strictly increasing", [](FilePool& fp, const auto& offs) {
    fp.pool->ptr<Element>(offs[3])->next.store(offs[1]);
  });
  expect_corruption("magic", "element magic", [](FilePool& fp, const auto& offs) {
    fp.pool->ptr<Element>(offs[2])->magic = 0;
  });
  expect_corruption("wild", "not a 64 B block", [](FilePool& fp, const auto& offs) {
    fp.pool->ptr<Element>(offs[1])->next.store(kPoolBytes + 64);
  });
  expect_corruption("toroot", "element magic", [](FilePool& fp, const auto& offs) {
    fp.pool->ptr<Element>(offs[1])->next.store(fp.pool->root());
  });
}

}  // namespace
}  // namespace nvindex
