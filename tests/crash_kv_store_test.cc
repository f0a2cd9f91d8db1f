// The KV store under the crash simulator (docs/kv.md "Crash consistency"):
// `kv-store-test` (src/testing/kv_store/) runs the store's add, set, cas,
// append, incr, replace and delete paths as an integer-key index, so the
// crash lab's oracle checks every image a power failure could leave: the
// store (and its index) recover, every acknowledged write is there, the one
// in flight is wholly applied or absent, nothing else appears, no index block
// leaks, and the recovered store keeps working. Over lbtree, wbtree,
// fastfair and p-masstree; the ablation self-test over lbtree.
//
// Size: `make test` checks at least 3,000 images per index (12,000 or more
// in all), `make test-long` (NVINDEX_TEST_LONG=1) 10,000 per index. Under a
// sanitizer one scenario per index, two images per crash point, no
// ablation. Not over p-bwtree: its reads post index entries and retire
// delta chains, and the store's recovery walk reads every key, so the lab's
// PM accounting (oracle.h, check 4) cannot hold it to verify()'s count;
// kv_store_test covers the store over p-bwtree.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "crash/oracle.h"
#include "nvindex/index.h"
#include "support/param_name.h"
#include "testing/test_indexes.h"

[[maybe_unused]] const bool kTestIndexesRegistered =
    (nvindex::test_indexes::register_test_indexes(), true);

namespace nvindex::crash {
namespace {

bool sanitized() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return true;
#else
  return false;
#endif
}

bool long_run() {
  const char* e = std::getenv("NVINDEX_TEST_LONG");
  return e != nullptr && *e == '1';
}

Options base(const std::string& over) {
  Options o;
  o.index = "kv-store-test";
  o.index_opts = {{"over", over}};
  o.jobs = 2;
  if (sanitized()) o.max_images_per_point = 2;
  return o;
}

class KvStoreCrash : public ::testing::TestWithParam<std::string> {};

TEST_P(KvStoreCrash, EveryImageRecoversToTheModel) {
  const uint64_t bar = sanitized() ? 1 : long_run() ? 10000 : 3000;
  uint64_t images = 0, nested = 0;
  uint64_t seed = 1;
  for (int run = 0; run < 40 && images < bar; ++run) {
    Options o = base(GetParam());
    o.seed = seed;
    o.ops = 50;
    o.scenarios = 1;
    seed += 100;
    Report r;
    const Status s = run_crash_test(o, &r);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(r.failures, 0u) << (r.examples.empty() ? "" : r.examples.front().to_string());
    EXPECT_EQ(r.uninstrumented_writes, 0u)
        << (r.uninstrumented_examples.empty() ? "" : r.uninstrumented_examples.front());
    EXPECT_GT(r.fence_points, 0u);
    // The store's own sites were reached: its items and its root.
    EXPECT_EQ(r.sites.count("kv.item.write"), 1u);
    EXPECT_EQ(r.sites.count("kv.create.root"), 1u);
    images += r.images;
    nested += r.nested_images;
    if (sanitized()) break;
  }
  EXPECT_GE(images, bar);
  std::printf("[ crash    ] kv-store-test over %s: %llu images, %llu after a crash in recovery\n",
              GetParam().c_str(), static_cast<unsigned long long>(images),
              static_cast<unsigned long long>(nested));
}

INSTANTIATE_TEST_SUITE_P(Over, KvStoreCrash,
                         ::testing::Values("lbtree", "fptree", "wbtree", "fastfair", "p-masstree"),
                         nvindex::testing::IndexParamName());

TEST(KvStoreCrash, AblationEverySiteIsCaughtOrHasAWrittenReason) {
  if (sanitized()) GTEST_SKIP() << "the release run holds the ablation self-test";
  Options o = base("lbtree");
  o.ops = 24;
  o.images.budget = 8;
  AblationReport r;
  const Status s = run_ablation(o, &r);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(r.baseline.ok());
  bool item_flush = false, item_fence = false;
  for (const AblationCase& c : r.cases) {
    EXPECT_TRUE(c.caught || !c.note.empty()) << c.label() << " is not caught and has no note";
    if (c.site == "kv.item.write") (c.fence ? item_fence : item_flush) = c.caught;
  }
  // The item's own persist is what makes a write durable before the index
  // publishes it: dropping either half must be seen.
  EXPECT_TRUE(item_flush);
  EXPECT_TRUE(item_fence);
  EXPECT_EQ(r.uncaught_without_note, 0u);
}

}  // namespace
}  // namespace nvindex::crash
