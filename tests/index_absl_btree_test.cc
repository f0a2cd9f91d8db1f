// The shared model test on "absl-btree", the volatile yardstick, with and
// without its lock; the concurrent test runs in index_concurrent_test.
#include <gtest/gtest.h>

#include "nvindex/index.h"
#include "support/model_check.h"

namespace nvindex {
namespace {

TEST(AbslBtreeTest, MatchesStdMap) {
  for (unsigned threads : {1u, 2u}) {
    for (uint64_t seed : {1u, 2u, 3u}) {
      testing::TestIndex t;
      Status s = testing::open_test_index("absl-btree", 512, &t, testing::kTestPoolBytes, threads);
      ASSERT_TRUE(s.ok()) << s.ToString();
      testing::run_model_test(*t.index, seed, 20000, seed == 3 ? uint64_t{1} << 40 : 1 << 13);
      if (HasFatalFailure()) return;
    }
  }
}

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
