// The shared concurrent test on every registered index that claims
// thread_safe (so absl-btree, btree and every later one are covered without
// editing this file), with 2 and 4 threads at node sizes 256 and 512 B; and a
// self-test that the shared helpers catch an index that lies.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "nvindex/index.h"
#include "support/model_check.h"
#include "testing/test_indexes.h"

// The test doubles this file uses (src/testing/test_indexes.h).
[[maybe_unused]] const bool kTestIndexesRegistered =
    (nvindex::test_indexes::register_test_indexes(), true);

namespace nvindex {
namespace {

std::vector<std::string> index_names() {
  std::vector<std::string> names;
  for (const IndexEntry& e : registered_indexes()) {
    if (!is_test_only_index(e.name)) names.emplace_back(e.name);
  }
  return names;
}

using Param = std::tuple<std::string, unsigned, uint32_t>;  // name, threads, node size

class ConcurrentTest : public ::testing::TestWithParam<Param> {};

TEST_P(ConcurrentTest, DisjointWritersAndReadersMatchTheModel) {
  const auto& [name, threads, node_size] = GetParam();
  testing::TestIndex t;
  Status s = testing::open_test_index(name, node_size, &t, testing::kTestPoolBytes, threads);
  ASSERT_TRUE(s.ok()) << s.ToString();
  if (!t.index->info().caps.thread_safe) GTEST_SKIP() << name << " does not claim thread_safe";
  testing::run_concurrent_test(*t.index, threads, threads * 7919 + node_size);
}

INSTANTIATE_TEST_SUITE_P(Registered, ConcurrentTest,
                         ::testing::Combine(::testing::ValuesIn(index_names()),
                                            ::testing::Values(2u, 4u),
                                            ::testing::Values(256u, 512u)),
                         [](const auto& info) {
                           std::string n = std::get<0>(info.param);
                           for (char& c : n) {
                             if (!isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return n + "_" + std::to_string(std::get<1>(info.param)) + "threads_" +
                                  std::to_string(std::get<2>(info.param)) + "B";
                         });

// Counts the failures the helpers report against "lying-test" (which drops
// inserts and corrupts lookups) without failing this test.
int failures_against_liar(bool concurrent) {
  testing::TestIndex t;
  if (!testing::open_test_index("lying-test", 512, &t, testing::kTestPoolBytes, 2).ok()) return -1;
  ::testing::TestPartResultArray results;
  {
    ::testing::ScopedFakeTestPartResultReporter reporter(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ALL_THREADS, &results);
    if (concurrent) {
      testing::run_concurrent_test(*t.index, 2, 1, 2000, 256);
    } else {
      testing::run_model_test(*t.index, 1, 2000, 1 << 10);
    }
  }
  return results.size();
}

TEST(ModelCheckSelfTest, CatchesALyingIndex) {
  bool registered = false;
  for (const IndexEntry& e : registered_indexes()) registered |= e.name == "lying-test";
  if (!registered) GTEST_SKIP() << "no lying-test index registered";
  EXPECT_GT(failures_against_liar(false), 0) << "run_model_test missed a lying index";
  EXPECT_GT(failures_against_liar(true), 0) << "run_concurrent_test missed a lying index";
}

}  // namespace
}  // namespace nvindex
