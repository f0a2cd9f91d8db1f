// p-masstree under the crash lab, what is specific to its design: the root
// split is published only after the new root is persisted (the ordering
// Witcher, Fu et al. SOSP'21, found missing in RECIPE's P-Masstree). With
// the persist of the new root in place, every crash image of scenarios that
// split the root recovers; with that flush ablated, the crash lab catches it.
#include <gtest/gtest.h>

#include "crash/oracle.h"

namespace nvindex::crash {
namespace {

Options root_split_scenarios() {
  Options o;
  o.index = "p-masstree";
  o.ops = 80;  // 15-entry nodes: the root splits within the first ~20 inserts
  o.seed = 3;
  o.scenarios = 2;
  return o;
}

TEST(PMasstreeCrash, RootSplitsRecoverAtEveryCrashPoint) {
  Report r;
  const Status s = run_crash_test(root_split_scenarios(), &r);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(r.failures, 0u) << (r.examples.empty() ? "" : r.examples.front().to_string());
  EXPECT_GT(r.images, 100u);
}

TEST(PMasstreeCrash, PublishingAnUnpersistedRootIsCaught) {
  Options o = root_split_scenarios();
  o.ablate_site = "p-masstree.root.node";
  o.ablate_flush = true;
  o.stop_at_first_failure = true;
  Report r;
  const Status s = run_crash_test(o, &r);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_GT(r.failures, 0u);
  EXPECT_EQ(r.examples.front().ablation, "p-masstree.root.node/flush");
}

}  // namespace
}  // namespace nvindex::crash
