// fastfair, what is specific to FAST & FAIR (the conformance suite,
// tests/index_conformance_test.cc, holds what every index must do): its
// description and DRAM lock table, merges that shrink the tree and collapse
// the root, and SMOs racing at capacity 4.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "nvindex/index.h"
#include "support/model_check.h"

namespace nvindex {
namespace {

TEST(FastFair, InfoClaims) {
  testing::TestIndex t;
  ASSERT_TRUE(testing::open_test_index("fastfair", 512, &t, 8ull << 20).ok());
  IndexInfo i = t.index->info();
  EXPECT_EQ(i.caps.placement, Placement::kPmOnly);
  EXPECT_NE(i.description.find("FAST'18"), std::string::npos);
  // DRAM is the lock words' pages the tree touched: some once a writer
  // locked a node.
  ASSERT_TRUE(t.index->insert(1, 1).ok());
  EXPECT_GT(t.index->info().dram_bytes, 0u);
}

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
