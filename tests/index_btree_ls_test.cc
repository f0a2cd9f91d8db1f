// btree-ls, what is specific to the log-structured B+-tree (the conformance
// suite, tests/index_conformance_test.cc, holds what every index must do):
// the GC keeps a small pool going under churn far larger than the pool (and
// without it the same churn runs out of space), a crash-like reopen of a
// churned pool replays every log to the same content with 1 and 2 recovery
// threads, and the log count is kept by the pool.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "nvindex/index.h"
#include "nvindex/pm/pool.h"
#include "nvindex/status.h"
#include "support/model_check.h"

namespace nvindex {
namespace {

using testing::FileIndexOf;

// Updates of 2,000 keys, 200,000 times: 12.8 MB of delta records through a
// 4 MiB pool (the logs about 1 MiB each).
constexpr uint64_t kKeys = 2000;
constexpr uint64_t kUpdates = 200'000;

uint64_t key_of(uint64_t i) { return i * 0x9E3779B97F4A7C15ull; }

void expect_content(Index<uint64_t>& idx, const std::map<uint64_t, Value>& model) {
  VerifyReport r;
  const Status s = idx.verify(&r);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(r.keys, model.size());
  std::vector<std::pair<uint64_t, Value>> all;
  idx.scan(0, model.size() + 1, &all);
  const std::vector<std::pair<uint64_t, Value>> want(model.begin(), model.end());
  EXPECT_EQ(all, want);
}

TEST(BtreeLs, GcKeepsASmallPoolGoingUnderChurn) {
  FileIndexOf<uint64_t> f("btree-ls");
  IndexOptions o;
  o.node_size = 256;
  ASSERT_TRUE(f.create(o, pm::kMinPoolSize).ok());
  std::map<uint64_t, Value> model;
  for (uint64_t i = 0; i < kKeys; ++i) {
    ASSERT_TRUE(f.index->insert(key_of(i), i).ok()) << i;
    model[key_of(i)] = i;
  }
  for (uint64_t u = 0; u < kUpdates; ++u) {
    const uint64_t k = key_of(u % kKeys);
    const Status s = f.index->update(k, u);
    ASSERT_TRUE(s.ok()) << "update " << u << ": " << s.ToString();
    model[k] = u;
  }
  ASSERT_NO_FATAL_FAILURE(expect_content(*f.index, model));
  // A crash-like close (no close record): recovery replays the logs from
  // their GC'd heads, with one and then two threads.
  for (unsigned threads : {1u, 2u}) {
    f.crash();
    IndexOptions r;
    r.threads = threads;
    const Status s = f.reopen(r);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_TRUE(f.index->info().recovered);
    ASSERT_NO_FATAL_FAILURE(expect_content(*f.index, model));
  }
}

TEST(BtreeLs, WithoutGcTheSameChurnRunsOutOfSpace) {
  FileIndexOf<uint64_t> f("btree-ls");
  IndexOptions o;
  o.node_size = 256;
  o.extra = {{"gc", "off"}};
  ASSERT_TRUE(f.create(o, pm::kMinPoolSize).ok());
  std::map<uint64_t, Value> model;
  for (uint64_t i = 0; i < kKeys; ++i) {
    ASSERT_TRUE(f.index->insert(key_of(i), i).ok()) << i;
    model[key_of(i)] = i;
  }
  Status s;
  uint64_t u = 0;
  for (; u < kUpdates; ++u) {
    s = f.index->update(key_of(u % kKeys), u);
    if (!s.ok()) break;
    model[key_of(u % kKeys)] = u;
  }
  EXPECT_EQ(s.code(), Code::kOutOfSpace) << "after " << u << " updates";
  // Nothing acknowledged is lost, and the failed update changed nothing.
  ASSERT_NO_FATAL_FAILURE(expect_content(*f.index, model));
  for (const auto& [k, v] : model) ASSERT_EQ(f.index->lookup(k), std::optional<Value>(v)) << k;
}

TEST(BtreeLs, ThePoolKeepsItsLogCount) {
  FileIndexOf<uint64_t> f("btree-ls");
  IndexOptions o;
  o.node_size = 512;
  o.extra = {{"logs", "16"}};
  ASSERT_TRUE(f.create(o, 16ull << 20).ok());
  for (uint64_t i = 0; i < 5000; ++i) ASSERT_TRUE(f.index->insert(key_of(i), i).ok());
  IndexOptions r;
  r.extra = {{"logs", "1"}};
  ASSERT_TRUE(f.reopen(r).ok());
  VerifyReport rep;
  ASSERT_TRUE(f.index->verify(&rep).ok());
  EXPECT_EQ(rep.keys, 5000u);
  for (uint64_t i = 0; i < 5000; ++i) {
    ASSERT_EQ(f.index->lookup(key_of(i)), std::optional<Value>(i)) << i;
  }
  // New records still go to the 16 logs the pool was made with: a reopen
  // after more work finds them all.
  for (uint64_t i = 5000; i < 8000; ++i) ASSERT_TRUE(f.index->insert(key_of(i), i).ok());
  ASSERT_TRUE(f.reopen(r).ok());
  ASSERT_TRUE(f.index->verify(&rep).ok());
  EXPECT_EQ(rep.keys, 8000u);
}

}  // namespace
}  // namespace nvindex
