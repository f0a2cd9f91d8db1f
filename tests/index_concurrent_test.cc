// The concurrent half of the conformance suite (tests/index_conformance_test.cc):
// the shared concurrent map-model test on every registered configuration
// that claims thread_safe (so every later index is covered without editing
// this file; a block-device index at a quarter of the operations), with 2
// threads at each node size and option value, and 4
// threads at the default size, with integer keys (IntegerKeys/...) and, for
// the indexes with caps.string_keys, with string keys (StringKeys/...); and
// a self-test that the shared helpers
// catch an index that lies. Runs again under ThreadSanitizer (make test).
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

// Every registered configuration (tests/support/model_check.h) at 2 threads,
// and those at the default node size (or without nodes) at 4 threads too.
using Param = std::tuple<testing::IndexCase, unsigned>;  // case, threads

std::vector<Param> params(const std::vector<testing::IndexCase>& cases) {
  std::vector<Param> out;
  for (const testing::IndexCase& c : cases) {
    out.emplace_back(c, 2u);
    if (c.extra.empty() && (c.node_size == 0 || c.node_size == 512)) out.emplace_back(c, 4u);
  }
  return out;
}

class ConcurrentTest : public ::testing::TestWithParam<Param> {
 protected:
  template <class K>
  void run() {
    const auto& [c, threads] = GetParam();
    testing::TestIndexOf<K> t;
    Status s = testing::open_test_index(c.name, testing::options_for(c, threads), &t);
    ASSERT_TRUE(s.ok()) << s.ToString();
    if (!t.index->info().caps.thread_safe) GTEST_SKIP() << c.name << " does not claim thread_safe";
    // A block-device index runs a quarter of the operations: each strong
    // write is an fdatasync (the full count took 8 s for leveldb and rocksdb
    // in release, 17 s under ASan).
    const size_t ops = needs_device(find_index_entry(c.name)->caps) ? 5000 : 20000;
    testing::run_concurrent_test(*t.index, threads, threads * 7919 + c.node_size, ops);
  }
};

TEST_P(ConcurrentTest, DisjointWritersAndReadersMatchTheModel) {
  if (std::get<0>(GetParam()).key_type == KeyType::kString) {
    run<std::string_view>();
  } else {
    run<uint64_t>();
  }
}

auto param_name = [](const auto& info) {
  return std::get<0>(info.param).label + "_" + std::to_string(std::get<1>(info.param)) + "threads";
};
INSTANTIATE_TEST_SUITE_P(IntegerKeys, ConcurrentTest,
                         ::testing::ValuesIn(params(testing::registered_index_cases())),
                         param_name);
INSTANTIATE_TEST_SUITE_P(StringKeys, ConcurrentTest,
                         ::testing::ValuesIn(params(testing::registered_string_index_cases())),
                         param_name);

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
