// dash-eh under the crash lab with scenarios long enough to split segments
// and double the directory. crash_lab_test's scenarios (12 to 50
// operations) stay below the 84 records a 1 KiB segment holds (56 slots in
// 4 buckets, 28 in the stash), so its dash_eh case crash-tests inserts,
// displacement, the stash, updates and removes, not the split; here one
// 500-operation scenario (about 170 live keys at its peak) crashes at every
// fence of several splits, a doubling among them, and of their recoveries.
#include <gtest/gtest.h>

#include <cstdio>

#include "crash/oracle.h"
#include "nvindex/index.h"

namespace nvindex::crash {
namespace {

TEST(DashCrash, SplitsAndDoublingsRecoverFromEveryCrashPoint) {
  Options o;
  o.index = "dash-eh";
  o.node_size = 1024;
  o.ops = 500;
  o.scenarios = 1;
  o.seed = 3;
  o.images.budget = 2;  // the lab's cover per crash point: none, all, each line alone
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // Under a sanitizer the point is memory errors on the recovery paths: two
  // images per crash point ("none" and "all"), every crash point reached
  // (72 s under ASan with all of budget 1's).
  o.images.budget = 1;
  o.max_images_per_point = 2;
#endif
  o.jobs = 2;
  Report r;
  const Status s = run_crash_test(o, &r);
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::printf("[ crash    ] dash-eh 1 x 500 ops at 1 KiB: %llu crash points, %llu images, %.1f s\n",
              static_cast<unsigned long long>(r.crash_points),
              static_cast<unsigned long long>(r.images), r.seconds);
  EXPECT_EQ(r.failures, 0u) << (r.examples.empty() ? "" : r.examples.front().to_string());
  EXPECT_EQ(r.uninstrumented_writes, 0u);
  // The scenario reached a split with a directory update and one with a
  // doubling, each with its log, publish, clear and done fences.
  for (const char* site : {"dash.split.new_segment", "dash.split.log", "dash.split.directory",
                           "dash.split.publish_directory", "dash.split.clear", "dash.split.done"}) {
    EXPECT_TRUE(r.sites.count(site) != 0 && r.sites.at(site).fences > 0) << site;
  }
}

}  // namespace
}  // namespace nvindex::crash
