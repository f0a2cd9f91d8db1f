// "absl-btree", the volatile yardstick: what is specific to it (the
// conformance suite, tests/index_conformance_test.cc and
// index_concurrent_test.cc, holds what every index must do).
#include <gtest/gtest.h>

#include "nvindex/index.h"
#include "support/model_check.h"

namespace nvindex {
namespace {

// A single-threaded instance takes no lock and must not claim thread_safe;
// one made for several threads does.
TEST(AbslBtreeTest, ThreadSafeOnlyWhenMadeForThreads) {
  for (unsigned threads : {1u, 2u, 8u}) {
    testing::TestIndex t;
    ASSERT_TRUE(
        testing::open_test_index("absl-btree", 512, &t, testing::kTestPoolBytes, threads).ok());
    EXPECT_EQ(t.index->info().caps.thread_safe, threads > 1) << threads << " threads";
  }
}

}  // namespace
}  // namespace nvindex
