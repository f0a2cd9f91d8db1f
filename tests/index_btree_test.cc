// Tests of the volatile "btree" index: the shared model test at every node
// size, node-size validation, the empty tree, scan and find_last_less_than
// edges, and that removes really merge nodes (leaves and height shrink).
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "indexes/btree/btree.h"
#include "indexes/btree/btree_testing.h"
#include "nvindex/index.h"
#include "support/model_check.h"

namespace nvindex {
namespace {

constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
using Pairs = std::vector<std::pair<uint64_t, Value>>;

std::unique_ptr<Index<uint64_t>> open_btree(uint32_t node_size) {
  testing::TestIndex t;
  Status s = testing::open_test_index("btree", node_size, &t);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return std::move(t.index);
}

class BtreeModelTest : public ::testing::TestWithParam<uint32_t> {};

TEST_P(BtreeModelTest, MatchesStdMap) {
  const uint32_t node_size = GetParam();
  auto idx = open_btree(node_size);
  ASSERT_NE(idx, nullptr);
  EXPECT_EQ(idx->info().node_size, node_size);
  // A dense key space (many AlreadyExists / present-key hits) and a sparse one.
  testing::run_model_test(*idx, node_size * 7 + 1, 40000, 1 << 13);
  if (HasFatalFailure()) return;
  auto sparse = open_btree(node_size);
  testing::run_model_test(*sparse, node_size * 13 + 5, 12000, uint64_t{1} << 40);
}

INSTANTIATE_TEST_SUITE_P(NodeSizes, BtreeModelTest, ::testing::Values(128, 256, 512, 1024, 4096),
                         [](const auto& info) { return std::to_string(info.param) + "B"; });

TEST(BtreeTest, NodeSizeMustBeAMultipleOf64In128To4096) {
  for (uint32_t bad : {0u, 64u, 100u, 127u, 130u, 1000u, 4097u, 4160u, 8192u}) {
    IndexOptions o;
    o.node_size = bad;
    std::unique_ptr<Index<uint64_t>> idx;
    Status s = make_index<uint64_t>("btree", o, &idx);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << "node_size " << bad;
    EXPECT_NE(s.message().find("node_size"), std::string::npos) << s.message();
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
  EXPECT_EQ(info.name, "btree");
  EXPECT_TRUE(info.caps.ordered);
  EXPECT_TRUE(info.caps.thread_safe);
  EXPECT_FALSE(info.caps.persistent);
  EXPECT_EQ(info.caps.placement, Placement::kDram);
  EXPECT_EQ(info.dram_bytes, 512u);  // one empty root leaf
  for (uint64_t k = 0; k < 1000; ++k) ASSERT_TRUE(idx->insert(k, k).ok());
  VerifyReport r;
  ASSERT_TRUE(idx->verify(&r).ok());
  EXPECT_GE(idx->info().dram_bytes, (r.leaves + r.inner_nodes) * 512);
}

TEST(BtreeTest, EmptyTree) {
  auto idx = open_btree(256);
  EXPECT_EQ(idx->lookup(0), std::nullopt);
  EXPECT_EQ(idx->lookup(kMax), std::nullopt);
  EXPECT_TRUE(idx->remove(5).IsNotFound());
  EXPECT_TRUE(idx->update(5, 1).IsNotFound());
  Pairs out = {{1, 1}};
  EXPECT_EQ(idx->scan(0, 10, &out), 0u);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(idx->find_last_less_than(kMax), std::nullopt);
  VerifyReport r;
  ASSERT_TRUE(idx->verify(&r).ok());
  EXPECT_EQ(r.keys, 0u);
  EXPECT_EQ(r.leaves, 1u);
  EXPECT_EQ(r.height, 1u);
  // Emptied again after use: still a valid empty tree.
  ASSERT_TRUE(idx->insert(7, 0).ok());
  EXPECT_EQ(idx->lookup(7), std::optional<Value>(0));
  ASSERT_TRUE(idx->remove(7).ok());
  EXPECT_EQ(idx->lookup(7), std::nullopt);
  ASSERT_TRUE(idx->verify(&r).ok());
  EXPECT_EQ(r.keys, 0u);
}

// Keys 10, 20, ..., 2000 in 128 B nodes (5 pairs per leaf): many leaves and
// levels, so the edges fall on leaf boundaries too.
class BtreeEdgeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    idx_ = open_btree(128);
    for (uint64_t k = 10; k <= 2000; k += 10) ASSERT_TRUE(idx_->insert(k, k * 3).ok());
    VerifyReport r;
    ASSERT_TRUE(idx_->verify(&r).ok());
    ASSERT_GE(r.height, 3u);
  }
  std::unique_ptr<Index<uint64_t>> idx_;
};

TEST_F(BtreeEdgeTest, ScanEdges) {
  Pairs out;
  EXPECT_EQ(idx_->scan(2001, 5, &out), 0u) << "start beyond the largest key";
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(idx_->scan(kMax, 5, &out), 0u);
  out = {{1, 1}};
  EXPECT_EQ(idx_->scan(10, 0, &out), 0u) << "count 0";
  EXPECT_TRUE(out.empty());
  for (uint64_t start = 0; start <= 2010; start += 5) {  // at every key and between keys
    ASSERT_EQ(idx_->scan(start, 7, &out),
              start > 2000 ? 0u : std::min<size_t>(7, (2000 - start) / 10 + 1));
    const uint64_t first = (start + 9) / 10 * 10 == 0 ? 10 : (start + 9) / 10 * 10;
    for (size_t i = 0; i < out.size(); ++i) {
      ASSERT_EQ(out[i].first, first + 10 * i) << "scan from " << start;
      ASSERT_EQ(out[i].second, out[i].first * 3);
    }
  }
  EXPECT_EQ(idx_->scan(0, 100000, &out), 200u) << "count above the key count";
  EXPECT_EQ(out.back().first, 2000u);
}

TEST_F(BtreeEdgeTest, FindLastLessThanEdges) {
  EXPECT_EQ(idx_->find_last_less_than(0), std::nullopt);
  EXPECT_EQ(idx_->find_last_less_than(5), std::nullopt) << "below the smallest key";
  EXPECT_EQ(idx_->find_last_less_than(10), std::nullopt) << "the smallest key itself";
  using P = std::optional<std::pair<uint64_t, Value>>;
  EXPECT_EQ(idx_->find_last_less_than(11), P({10, 30}));
  EXPECT_EQ(idx_->find_last_less_than(kMax), P({2000, 6000})) << "above the largest key";
  for (uint64_t k = 20; k <= 2000; k += 10) {
    ASSERT_EQ(idx_->find_last_less_than(k), P({k - 10, (k - 10) * 3})) << k;
  }
  // With 0 and UINT64_MAX present, and leaves emptied below the key.
  ASSERT_TRUE(idx_->insert(0, kMax).ok());
  ASSERT_TRUE(idx_->insert(kMax, 0).ok());
  EXPECT_EQ(idx_->find_last_less_than(kMax), P({2000, 6000}));
  EXPECT_EQ(idx_->find_last_less_than(1), P({0, kMax}));
  for (uint64_t k = 10; k <= 1500; k += 10) ASSERT_TRUE(idx_->remove(k).ok());
  EXPECT_EQ(idx_->find_last_less_than(1505), P({0, kMax}));
  EXPECT_EQ(idx_->find_last_less_than(1515), P({1510, 4530}));
}

// Removes merge leaves and inner nodes: the leaf count and the height fall,
// and the tree shrinks back to a single leaf when emptied.
TEST(BtreeTest, RemovesMergeNodesAndCollapseTheRoot) {
  for (uint32_t node_size : {128u, 512u}) {
    auto idx = open_btree(node_size);
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

// verify() reports each kind of damage as Corruption with a message naming it.
TEST(BtreeTest, VerifyReportsCorruption) {
  const std::pair<BtreeDamage, const char*> cases[] = {
      {BtreeDamage::kUnsortedLeaf, "ascending"},
      {BtreeDamage::kLeafChainCycle, "right link"},
      {BtreeDamage::kFenceMismatch, "low fence"},
      {BtreeDamage::kKeyOutOfRange, "outside the range"},
      {BtreeDamage::kCountMismatch, "key count mismatch"},
  };
  for (const auto& [damage, words] : cases) {
    auto idx = open_btree(128);
    for (uint64_t k = 1; k <= 100; ++k) ASSERT_TRUE(idx->insert(k * 10, k).ok());
    VerifyReport r;
    ASSERT_TRUE(idx->verify(&r).ok());
    ASSERT_TRUE(btree_damage_for_test(idx.get(), damage).ok());
    const Status s = idx->verify(&r);
    EXPECT_EQ(s.code(), Code::kCorruption) << words;
    EXPECT_NE(s.message().find(words), std::string::npos) << s.message();
  }
  auto small = open_btree(128);
  EXPECT_EQ(btree_damage_for_test(small.get(), BtreeDamage::kUnsortedLeaf).code(),
            Code::kInvalidArgument);
}

// This file does not register the test doubles (src/testing/): the
// production registry has none of them.
TEST(ProductionRegistry, HasNoTestDoubles) {
  for (const IndexEntry& e : registered_indexes()) {
    EXPECT_FALSE(is_test_only_index(e.name)) << e.name;
  }
  EXPECT_EQ(find_index_entry("lying-test"), nullptr);
}

}  // namespace
}  // namespace nvindex
