// What the operating system counts for a phase (issue 14's Table I columns
// besides throughput and latency): the process's CPU time and context
// switches (getrusage), and, for a block-device index, the I/O of the disk
// its store is on (/sys/block/<disk>/stat).
//
// Both are wider than the index: getrusage(RUSAGE_SELF) counts the whole
// process, every thread (workers, the progress monitor, an index's own
// background threads such as RocksDB's compactions); the disk's counters
// count every request to that disk, from any process. A phase's figures are
// deltas between a sample right before its clock starts and one right after
// its last worker ends (bench/driver.h, PhaseRunner).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "nvindex/status.h"

namespace nvindex::bench {

/// getrusage(RUSAGE_SELF) at one moment: CPU seconds and context switches.
struct UsageSample {
  double user_seconds = 0;    ///< ru_utime, s
  double system_seconds = 0;  ///< ru_stime, s
  uint64_t voluntary = 0;     ///< ru_nvcsw: waits (I/O, locks, sleeps)
  uint64_t involuntary = 0;   ///< ru_nivcsw: preemptions
};
/// The process's usage now (all threads).
UsageSample usage_now();

/// CPU consumption and context switches of a phase, whole process.
struct ProcessUsage {
  double user_seconds = 0;    ///< user CPU time, s
  double system_seconds = 0;  ///< system CPU time, s
  /// (user + system) / wall seconds of the phase: the cores the process kept
  /// busy on average (2.0 = two cores all the time).
  double cores_used = 0;
  uint64_t voluntary_switches = 0;    ///< delta of ru_nvcsw
  uint64_t involuntary_switches = 0;  ///< delta of ru_nivcsw
};
/// The usage between `a` and `b` over a phase of `wall_seconds`.
ProcessUsage usage_between(const UsageSample& a, const UsageSample& b, double wall_seconds);

/// The fields of /sys/block/<disk>/stat this report uses (Linux
/// Documentation/block/stat.rst): 1 read I/Os, 3 read sectors, 5 write I/Os,
/// 7 write sectors, 11 time_in_queue (ms, weighted by requests in flight).
/// Sectors are 512 B whatever the disk's block size.
struct DiskSample {
  uint64_t reads = 0, read_sectors = 0, writes = 0, write_sectors = 0, queue_ms = 0;
};

/// A phase's I/O on one disk (device-wide: every process's requests).
struct DiskIo {
  uint64_t reads = 0;        ///< read requests completed
  uint64_t writes = 0;       ///< write requests completed
  uint64_t read_bytes = 0;   ///< bytes read (sectors * 512)
  uint64_t write_bytes = 0;  ///< bytes written
  double iops = 0;           ///< (reads + writes) / wall seconds
  /// Mean outstanding I/Os: delta of time_in_queue (ms) / wall ms, the
  /// average number of requests in flight (queued or at the device).
  double mean_outstanding = 0;
};
/// The I/O between `a` and `b` over a phase of `wall_seconds`.
DiskIo disk_between(const DiskSample& a, const DiskSample& b, double wall_seconds);

/// Reads a disk's stat counters from the file at `stat_path`.
/// Errors: IOError (unreadable), Corruption (fewer than 11 fields).
Status read_disk_sample(const std::string& stat_path, DiskSample* out);

/// The disk backing `path` (a file or directory that exists): stat()'s
/// st_dev -> /sys/dev/block/<major>:<minor>, and for a partition its parent
/// disk. Sets *name ("vda") and *stat_path ("/sys/dev/block/254:0/stat" or
/// the parent's). Errors: NotFound with the reason when there is none to
/// read (no sysfs; a file system on no block device, e.g. tmpfs or overlay:
/// st_dev is then an anonymous device with no /sys/dev/block entry), IOError
/// when stat() fails.
Status find_backing_disk(const std::string& path, std::string* name, std::string* stat_path);

/// Samples one disk around phases: built from a path on it; available() is
/// false, with why(), when find_backing_disk or the first read failed.
class DiskMeter {
 public:
  explicit DiskMeter(const std::string& path);
  bool available() const { return why_.empty(); }
  const std::string& why() const { return why_; }
  const std::string& disk() const { return disk_; }
  /// The counters now (zeros when unavailable or unreadable).
  DiskSample sample() const;

 private:
  std::string disk_, stat_path_, why_;
};

}  // namespace nvindex::bench
