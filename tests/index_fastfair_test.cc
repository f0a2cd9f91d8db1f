// fastfair: model tests at every node size (splits and merges at 1..4 levels),
// values 0 and repeated values, node-size errors, capability claims.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>

#include "indexes/fastfair/fastfair.h"
#include "nvindex/index.h"
#include "nvindex/pm/pool.h"
#include "support/model_check.h"

namespace nvindex {
namespace {

using testing::open_test_index;
using testing::run_model_test;
using testing::TestIndex;

struct ModelCase {
  uint32_t node_size;
  uint64_t seed;
  size_t ops;
  uint64_t key_space;
};

class FastFairModel : public ::testing::TestWithParam<ModelCase> {};

TEST_P(FastFairModel, MatchesStdMap) {
  const ModelCase c = GetParam();
  TestIndex t;
  ASSERT_TRUE(open_test_index("fastfair", c.node_size, &t, 64ull << 20).ok());
  EXPECT_EQ(t.index->info().node_size, c.node_size);
  run_model_test(*t.index, c.seed, c.ops, c.key_space);
}

INSTANTIATE_TEST_SUITE_P(
    NodeSizes, FastFairModel,
    ::testing::Values(ModelCase{128, 1, 20000, 4000}, ModelCase{128, 2, 20000, 100000},
                      ModelCase{256, 3, 20000, 5000}, ModelCase{512, 4, 20000, 8000},
                      ModelCase{512, 5, 10000, 1ull << 62}, ModelCase{1024, 6, 20000, 20000},
                      ModelCase{4096, 7, 20000, 40000}),
    [](const auto& info) {
      return "n" + std::to_string(info.param.node_size) + "_s" + std::to_string(info.param.seed);
    });

TEST(FastFair, ValueZeroAndRepeatedValues) {
  TestIndex t;
  ASSERT_TRUE(open_test_index("fastfair", 128, &t, 16ull << 20).ok());
  Index<uint64_t>& idx = *t.index;
  // Every key maps to value 0 or 7: the original code's NULL terminator and
  // pointer-equality duplicate check would break on these.
  for (uint64_t k = 1; k <= 500; ++k) ASSERT_TRUE(idx.insert(k * 3, k % 2 ? 0 : 7).ok());
  for (uint64_t k = 1; k <= 500; ++k) {
    auto v = idx.lookup(k * 3);
    ASSERT_TRUE(v.has_value()) << k;
    EXPECT_EQ(*v, k % 2 ? 0u : 7u);
    EXPECT_FALSE(idx.lookup(k * 3 + 1).has_value());
  }
  std::vector<std::pair<uint64_t, Value>> out;
  EXPECT_EQ(idx.scan(0, 1000, &out), 500u);
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i].first, (i + 1) * 3);
  auto fl = idx.find_last_less_than(7);
  ASSERT_TRUE(fl.has_value());
  EXPECT_EQ(fl->first, 6u);
  EXPECT_EQ(fl->second, 7u);
  EXPECT_TRUE(idx.insert(3, 1).IsAlreadyExists());
  EXPECT_TRUE(idx.update(4, 1).IsNotFound());
  for (uint64_t k = 1; k <= 500; k += 2) ASSERT_TRUE(idx.remove(k * 3).ok());
  EXPECT_TRUE(idx.remove(3).IsNotFound());
  VerifyReport r;
  ASSERT_TRUE(idx.verify(&r).ok());
  EXPECT_EQ(r.keys, 250u);
}

TEST(FastFair, NodeSizeErrors) {
  for (uint32_t bad : {0u, 64u, 100u, 192u, 300u, 8192u}) {
    std::unique_ptr<pm::Pool> pool;
    ASSERT_TRUE(pm::Pool::create_anonymous(8ull << 20, "fastfair", &pool).ok());
    IndexOptions o;
    o.pool = pool.get();
    o.node_size = bad;
    std::unique_ptr<Index<uint64_t>> idx;
    Status s = make_index<uint64_t>("fastfair", o, &idx);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << bad << " " << s.ToString();
    EXPECT_EQ(idx, nullptr);
  }
}

TEST(FastFair, NeedsPoolWithItsLayout) {
  IndexOptions o;
  std::unique_ptr<Index<uint64_t>> idx;
  EXPECT_EQ(make_index<uint64_t>("fastfair", o, &idx).code(), Code::kInvalidArgument);
  std::unique_ptr<pm::Pool> pool;
  ASSERT_TRUE(pm::Pool::create_anonymous(8ull << 20, "other", &pool).ok());
  o.pool = pool.get();
  Status s = make_index<uint64_t>("fastfair", o, &idx);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("layout"), std::string::npos) << s.ToString();
}

TEST(FastFair, InfoClaims) {
  TestIndex t;
  ASSERT_TRUE(open_test_index("fastfair", 512, &t, 8ull << 20).ok());
  IndexInfo i = t.index->info();
  EXPECT_EQ(i.name, "fastfair");
  EXPECT_TRUE(i.caps.ordered);
  EXPECT_TRUE(i.caps.persistent);
  EXPECT_TRUE(i.caps.thread_safe);
  EXPECT_EQ(i.caps.placement, Placement::kPmOnly);
  EXPECT_EQ(i.node_size, 512u);
  EXPECT_GT(i.pm_bytes, 0u);
  EXPECT_FALSE(i.recovered);
  // DRAM is the lock words' pages the tree touched: some once a writer
  // locked a node.
  ASSERT_TRUE(t.index->insert(1, 1).ok());
  EXPECT_GT(t.index->info().dram_bytes, 0u);
  EXPECT_NE(i.description.find("FAST'18"), std::string::npos);
}

TEST(FastFair, OutOfSpaceChangesNothing) {
  TestIndex t;
  ASSERT_TRUE(open_test_index("fastfair", 4096, &t, pm::kMinPoolSize).ok());
  Index<uint64_t>& idx = *t.index;
  uint64_t k = 0;
  Status s;
  for (; k < 10'000'000; ++k) {
    s = idx.insert(k, k);
    if (!s.ok()) break;
  }
  ASSERT_EQ(s.code(), Code::kOutOfSpace) << s.ToString();
  EXPECT_FALSE(idx.lookup(k).has_value());
  for (uint64_t j = 0; j < k; j += 97) ASSERT_EQ(idx.lookup(j), j);
  VerifyReport r;
  ASSERT_TRUE(idx.verify(&r).ok());
  EXPECT_EQ(r.keys, k);
  // Removing frees room in leaves: inserts into non-full leaves work again.
  ASSERT_TRUE(idx.remove(5).ok());
  EXPECT_TRUE(idx.insert(5, 5).ok());
}

}  // namespace
}  // namespace nvindex

namespace nvindex {
namespace {

TEST(FastFair, MergesShrinkTheTreeAndCollapseTheRoot) {
  testing::TestIndex t;
  ASSERT_TRUE(testing::open_test_index("fastfair", 128, &t, 16ull << 20).ok());
  Index<uint64_t>& idx = *t.index;
  for (uint64_t k = 0; k < 3000; ++k) ASSERT_TRUE(idx.insert(k * 7 % 3001, k).ok());
  VerifyReport full;
  ASSERT_TRUE(idx.verify(&full).ok());
  EXPECT_GE(full.height, 5u);  // capacity 4: many levels
  const uint64_t pm_full = idx.info().pm_bytes;
  for (uint64_t k = 0; k < 3000; ++k) {
    if (k % 500 != 0) {
      ASSERT_TRUE(idx.remove(k * 7 % 3001).ok());
    }
  }
  VerifyReport small;
  ASSERT_TRUE(idx.verify(&small).ok());
  EXPECT_EQ(small.keys, 6u);
  EXPECT_LT(small.leaves, 10u);
  EXPECT_LT(small.height, full.height);
  // Retired nodes are freed only when the index is destroyed.
  EXPECT_GE(idx.info().pm_bytes, pm_full);
  for (uint64_t k = 0; k < 3000; k += 500) EXPECT_EQ(idx.lookup(k * 7 % 3001), k);
}

}  // namespace
}  // namespace nvindex

namespace nvindex {
namespace {

// Capacity 4: almost every insert or remove is an SMO (split, merge, root
// growth or collapse) racing with readers and other writers.
TEST(FastFair, ConcurrentSmoStress) {
  for (unsigned threads : {2u, 4u, 8u}) {
    testing::TestIndex t;
    ASSERT_TRUE(testing::open_test_index("fastfair", 128, &t, 64ull << 20).ok());
    testing::run_concurrent_test(*t.index, threads, 100 + threads, 8000, 512);
  }
}

}  // namespace
}  // namespace nvindex
