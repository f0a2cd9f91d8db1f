// The shared model test on "absl-btree", the volatile yardstick.
#include <gtest/gtest.h>

#include "nvindex/index.h"
#include "support/model_check.h"

namespace nvindex {
namespace {

TEST(AbslBtreeTest, MatchesStdMap) {
  for (uint64_t seed : {1u, 2u, 3u}) {
    testing::TestIndex t;
    Status s = testing::open_test_index("absl-btree", 512, &t);
    ASSERT_TRUE(s.ok()) << s.ToString();
    testing::run_model_test(*t.index, seed, 20000, seed == 3 ? uint64_t{1} << 40 : 1 << 13);
    if (HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace nvindex
