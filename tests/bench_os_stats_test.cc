// bench/os_stats.h: the arithmetic of a phase's process usage and disk I/O,
// the parsing of /sys/block/<disk>/stat (a fake file with known fields), and
// the disk found under a directory (this machine's, when it has sysfs; a
// tmpfs directory has none, with the reason).
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "bench/os_stats.h"
#include "util/temp_files.h"

namespace nvindex::bench {
namespace {

TEST(OsStats, UsageBetweenIsDeltasAndCoresUsed) {
  const UsageSample a{1.0, 0.5, 10, 2};
  const UsageSample b{2.5, 1.0, 25, 3};
  const ProcessUsage p = usage_between(a, b, 0.5);
  EXPECT_DOUBLE_EQ(p.user_seconds, 1.5);
  EXPECT_DOUBLE_EQ(p.system_seconds, 0.5);
  EXPECT_DOUBLE_EQ(p.cores_used, 4.0);  // 2 CPU seconds in half a second
  EXPECT_EQ(p.voluntary_switches, 15u);
  EXPECT_EQ(p.involuntary_switches, 1u);
  EXPECT_EQ(usage_between(a, b, 0).cores_used, 0.0);
}

TEST(OsStats, UsageNowCountsThisProcessesCpuTime) {
  const UsageSample a = usage_now();
  volatile uint64_t x = 0;  // spins in user space until 20 ms are counted
  while (usage_now().user_seconds - a.user_seconds < 0.02) {
    for (uint64_t i = 0; i < 1'000'000; ++i) x = x + i;
  }
  const UsageSample b = usage_now();
  EXPECT_GE(b.user_seconds - a.user_seconds, 0.02);
  EXPECT_GE(b.voluntary, a.voluntary);
}

TEST(OsStats, DiskBetweenFollowsStatRst) {
  const DiskSample a{100, 800, 50, 400, 1000};
  const DiskSample b{300, 1800, 150, 2400, 3000};
  const DiskIo d = disk_between(a, b, 2.0);
  EXPECT_EQ(d.reads, 200u);
  EXPECT_EQ(d.writes, 100u);
  EXPECT_EQ(d.read_bytes, 1000u * 512);
  EXPECT_EQ(d.write_bytes, 2000u * 512);
  EXPECT_DOUBLE_EQ(d.iops, 150.0);
  EXPECT_DOUBLE_EQ(d.mean_outstanding, 1.0);  // 2000 ms in queue over 2000 ms
}

TEST(OsStats, ReadDiskSampleTakesFieldsOneThreeFiveSevenAndEleven) {
  const std::string path = ::testing::TempDir() + "nvindex-os-stats-" + std::to_string(getpid());
  std::ofstream(path) << "  11 0 13 0 15 0 17 0 0 0 21 0 0 0 0 0 0\n";
  DiskSample s;
  ASSERT_TRUE(read_disk_sample(path, &s).ok());
  EXPECT_EQ(s.reads, 11u);
  EXPECT_EQ(s.read_sectors, 13u);
  EXPECT_EQ(s.writes, 15u);
  EXPECT_EQ(s.write_sectors, 17u);
  EXPECT_EQ(s.queue_ms, 21u);
  std::ofstream(path) << "1 2 3\n";
  EXPECT_EQ(read_disk_sample(path, &s).code(), Code::kCorruption);
  std::remove(path.c_str());
  EXPECT_EQ(read_disk_sample(path, &s).code(), Code::kIOError);
}

TEST(OsStats, TheDiskUnderADirectory) {
  std::string name, stat_path;
  const Status s = find_backing_disk(util::temp_device_dir(), &name, &stat_path);
  if (!s.ok()) GTEST_SKIP() << "no disk counters here: " << s.ToString();
  EXPECT_FALSE(name.empty());
  DiskSample d;
  EXPECT_TRUE(read_disk_sample(stat_path, &d).ok()) << stat_path;
  const DiskMeter meter(util::temp_device_dir());
  EXPECT_TRUE(meter.available()) << meter.why();
  EXPECT_EQ(meter.disk(), name);
  if (util::on_tmpfs("/dev/shm")) {
    const DiskMeter none("/dev/shm");
    EXPECT_FALSE(none.available());
    EXPECT_NE(none.why().find("no /sys/dev/block entry"), std::string::npos) << none.why();
  }
  EXPECT_EQ(find_backing_disk("/no/such/path", &name, &stat_path).code(), Code::kIOError);
}

}  // namespace
}  // namespace nvindex::bench
