// divided-skiplist: std::map model tests, edge keys and values, capability
// claims, PM cost per operation, OutOfSpace, recovery (clean close, a
// crash-left unreachable element, damaged pools) and the DRAM towers.
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
using testing::open_test_index;
using testing::run_model_test;
using testing::TestIndex;

constexpr char kName[] = "divided-skiplist";
constexpr uint64_t kPoolBytes = 32ull << 20;

struct ModelCase {
  uint64_t seed;
  size_t ops;
  uint64_t key_space;
};

class SkiplistModel : public ::testing::TestWithParam<ModelCase> {};

TEST_P(SkiplistModel, MatchesStdMap) {
  const ModelCase c = GetParam();
  TestIndex t;
  ASSERT_TRUE(open_test_index(kName, 128, &t, 64ull << 20).ok());
  run_model_test(*t.index, c.seed, c.ops, c.key_space);
}

INSTANTIATE_TEST_SUITE_P(Seeds, SkiplistModel,
                         ::testing::Values(ModelCase{1, 20000, 4000}, ModelCase{2, 20000, 100000},
                                           ModelCase{3, 20000, 500},
                                           ModelCase{4, 10000, 1ull << 62},
                                           ModelCase{5, 30000, 20000}),
                         [](const auto& info) { return "s" + std::to_string(info.param.seed); });

TEST(DividedSkiplist, EdgeKeysValueZeroAndRepeatedValues) {
  TestIndex t;
  ASSERT_TRUE(open_test_index(kName, 128, &t, 16ull << 20).ok());
  Index<uint64_t>& idx = *t.index;
  EXPECT_FALSE(idx.find_last_less_than(0).has_value());
  EXPECT_FALSE(idx.find_last_less_than(UINT64_MAX).has_value());
  for (uint64_t k = 1; k <= 500; ++k) ASSERT_TRUE(idx.insert(k * 3, k % 2 ? 0 : 7).ok());
  ASSERT_TRUE(idx.insert(0, UINT64_MAX).ok());
  ASSERT_TRUE(idx.insert(UINT64_MAX, 0).ok());
  EXPECT_EQ(idx.lookup(0), UINT64_MAX);
  EXPECT_EQ(idx.lookup(UINT64_MAX), 0u);
  for (uint64_t k = 1; k <= 500; ++k) {
    ASSERT_EQ(idx.lookup(k * 3), k % 2 ? 0u : 7u) << k;
    EXPECT_FALSE(idx.lookup(k * 3 + 1).has_value());
  }
  std::vector<std::pair<uint64_t, Value>> out;
  EXPECT_EQ(idx.scan(0, 1000, &out), 502u);
  EXPECT_EQ(out.front().first, 0u);
  EXPECT_EQ(out.back().first, UINT64_MAX);
  for (size_t i = 1; i + 1 < out.size(); ++i) EXPECT_EQ(out[i].first, i * 3);
  EXPECT_EQ(idx.scan(4, 2, &out), 2u);
  EXPECT_EQ(out[0].first, 6u);
  EXPECT_EQ(out[1].first, 9u);
  EXPECT_EQ(idx.scan(1501, 10, &out), 1u);  // only UINT64_MAX is >= 1501
  EXPECT_EQ(idx.scan(0, 0, &out), 0u);
  EXPECT_TRUE(out.empty());
  auto fl = idx.find_last_less_than(7);
  ASSERT_TRUE(fl.has_value());
  EXPECT_EQ(fl->first, 6u);
  EXPECT_EQ(fl->second, 7u);
  fl = idx.find_last_less_than(1);
  ASSERT_TRUE(fl.has_value());
  EXPECT_EQ(fl->first, 0u);
  fl = idx.find_last_less_than(UINT64_MAX);
  ASSERT_TRUE(fl.has_value());
  EXPECT_EQ(fl->first, 1500u);
  EXPECT_TRUE(idx.insert(3, 1).IsAlreadyExists());
  EXPECT_EQ(idx.lookup(3), 0u);  // unchanged
  EXPECT_TRUE(idx.update(4, 1).IsNotFound());
  EXPECT_TRUE(idx.update(3, 42).ok());
  EXPECT_EQ(idx.lookup(3), 42u);
  for (uint64_t k = 1; k <= 500; k += 2) ASSERT_TRUE(idx.remove(k * 3).ok());
  EXPECT_TRUE(idx.remove(3).IsNotFound());
  ASSERT_TRUE(idx.remove(0).ok());
  ASSERT_TRUE(idx.remove(UINT64_MAX).ok());
  VerifyReport r;
  ASSERT_TRUE(idx.verify(&r).ok());
  EXPECT_EQ(r.keys, 250u);
  EXPECT_EQ(r.leaves, 251u);  // the head sentinel is a bottom block too
}

TEST(DividedSkiplist, NodeSizeIsIgnored) {
  for (uint32_t ns : {0u, 64u, 100u, 512u, 8192u}) {
    TestIndex t;
    ASSERT_TRUE(open_test_index(kName, ns, &t, 8ull << 20).ok()) << ns;
    EXPECT_EQ(t.index->info().node_size, 64u);
    EXPECT_TRUE(t.index->insert(1, 2).ok());
  }
}

TEST(DividedSkiplist, NeedsPoolWithItsLayout) {
  IndexOptions o;
  std::unique_ptr<Index<uint64_t>> idx;
  EXPECT_EQ(make_index<uint64_t>(kName, o, &idx).code(), Code::kInvalidArgument);
  std::unique_ptr<pm::Pool> pool;
  ASSERT_TRUE(pm::Pool::create_anonymous(8ull << 20, "fastfair", &pool).ok());
  o.pool = pool.get();
  Status s = make_index<uint64_t>(kName, o, &idx);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("layout"), std::string::npos) << s.ToString();
  EXPECT_EQ(idx, nullptr);
}

TEST(DividedSkiplist, InfoClaims) {
  TestIndex t;
  ASSERT_TRUE(open_test_index(kName, 512, &t, 8ull << 20).ok());
  IndexInfo i = t.index->info();
  EXPECT_EQ(i.name, kName);
  EXPECT_TRUE(i.caps.ordered);
  EXPECT_TRUE(i.caps.persistent);
  EXPECT_TRUE(i.caps.thread_safe);
  EXPECT_FALSE(i.caps.string_keys);
  EXPECT_FALSE(i.caps.bulk_load);
  EXPECT_EQ(i.caps.placement, Placement::kSelective);
  EXPECT_EQ(i.node_size, 64u);
  EXPECT_EQ(i.pm_bytes, 128u);  // root object + head sentinel
  EXPECT_GT(i.dram_bytes, 0u);
  EXPECT_FALSE(i.recovered);
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

TEST(DividedSkiplist, OutOfSpaceChangesNothing) {
  TestIndex t;
  ASSERT_TRUE(open_test_index(kName, 128, &t, pm::kMinPoolSize).ok());
  Index<uint64_t>& idx = *t.index;
  uint64_t k = 0;
  Status s;
  for (; k < 10'000'000; ++k) {
    s = idx.insert(k * 3, k);
    if (!s.ok()) break;
  }
  ASSERT_EQ(s.code(), Code::kOutOfSpace) << s.ToString();
  EXPECT_FALSE(idx.lookup(k * 3).has_value());
  for (uint64_t j = 0; j < k; j += 97) ASSERT_EQ(idx.lookup(j * 3), j);
  VerifyReport r;
  ASSERT_TRUE(idx.verify(&r).ok());
  EXPECT_EQ(r.keys, k);
  EXPECT_EQ(idx.update(3, 9).code(), Code::kOk);  // updates need no space
  ASSERT_TRUE(idx.remove(6).ok());                // a freed element is reused
  EXPECT_TRUE(idx.insert(7, 7).ok());
  EXPECT_EQ(idx.insert(8, 8).code(), Code::kOutOfSpace);
}

// ---------------------------------------------------------------- recovery

/// A pool file in /dev/shm, removed at the end of the test.
class FilePool {
 public:
  explicit FilePool(const std::string& tag)
      : path_("/dev/shm/nvindex_dsl_" + tag + "_" + std::to_string(getpid()) + ".pool") {
    std::remove(path_.c_str());
  }
  ~FilePool() {
    close();
    std::remove(path_.c_str());
  }
  void create() {
    ASSERT_TRUE(pm::Pool::create(path_, kPoolBytes, kName, pm::Mode::kEmulated, &pool).ok());
    IndexOptions o;
    o.pool = pool.get();
    ASSERT_TRUE(make_index<uint64_t>(kName, o, &index).ok());
  }
  void close() {
    index.reset();
    pool.reset();
  }
  Status reopen() {
    close();
    Status s = pm::Pool::open(path_, kName, pm::Mode::kEmulated, &pool);
    if (!s.ok()) return s;
    IndexOptions o;
    o.pool = pool.get();
    return make_index<uint64_t>(kName, o, &index);
  }
  const std::string& path() const { return path_; }
  const RootObject* root() const { return pool->ptr<RootObject>(pool->root()); }

  std::unique_ptr<pm::Pool> pool;
  std::unique_ptr<Index<uint64_t>> index;

 private:
  std::string path_;
};

void expect_equals_model(Index<uint64_t>& idx, const std::map<uint64_t, Value>& model) {
  std::vector<std::pair<uint64_t, Value>> out;
  idx.scan(0, model.size() + 10, &out);
  ASSERT_EQ(out.size(), model.size());
  size_t i = 0;
  for (const auto& [k, v] : model) {
    ASSERT_EQ(out[i].first, k) << i;
    ASSERT_EQ(out[i].second, v) << i;
    ++i;
  }
  VerifyReport r;
  Status s = idx.verify(&r);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(r.keys, model.size());
}

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
