// Process usage and disk I/O counters of a phase: see os_stats.h.
#include "bench/os_stats.h"

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace nvindex::bench {

UsageSample usage_now() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto secs = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec * 1e-6; };
  return {secs(u.ru_utime), secs(u.ru_stime), static_cast<uint64_t>(u.ru_nvcsw),
          static_cast<uint64_t>(u.ru_nivcsw)};
}

ProcessUsage usage_between(const UsageSample& a, const UsageSample& b, double wall_seconds) {
  ProcessUsage p;
  p.user_seconds = b.user_seconds - a.user_seconds;
  p.system_seconds = b.system_seconds - a.system_seconds;
  p.cores_used = wall_seconds > 0 ? (p.user_seconds + p.system_seconds) / wall_seconds : 0;
  p.voluntary_switches = b.voluntary - a.voluntary;
  p.involuntary_switches = b.involuntary - a.involuntary;
  return p;
}

DiskIo disk_between(const DiskSample& a, const DiskSample& b, double wall_seconds) {
  DiskIo d;
  d.reads = b.reads - a.reads;
  d.writes = b.writes - a.writes;
  d.read_bytes = (b.read_sectors - a.read_sectors) * 512;
  d.write_bytes = (b.write_sectors - a.write_sectors) * 512;
  if (wall_seconds > 0) {
    d.iops = static_cast<double>(d.reads + d.writes) / wall_seconds;
    d.mean_outstanding = static_cast<double>(b.queue_ms - a.queue_ms) / (wall_seconds * 1e3);
  }
  return d;
}

Status read_disk_sample(const std::string& stat_path, DiskSample* out) {
  std::ifstream in(stat_path);
  if (!in) return Status::IOError("cannot read " + stat_path);
  uint64_t f[11];
  for (uint64_t& v : f) {
    if (!(in >> v)) return Status::Corruption(stat_path + ": fewer than 11 fields");
  }
  *out = DiskSample{f[0], f[2], f[4], f[6], f[10]};
  return Status::Ok();
}

Status find_backing_disk(const std::string& path, std::string* name, std::string* stat_path) {
  namespace fs = std::filesystem;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return Status::IOError("stat " + path + ": " + std::strerror(errno));
  }
  if (!fs::exists("/sys/dev/block")) {
    return Status::NotFound("no /sys/dev/block (sysfs not mounted)");
  }
  const std::string dev = std::to_string(major(st.st_dev)) + ":" + std::to_string(minor(st.st_dev));
  std::error_code ec;
  fs::path sys = fs::canonical("/sys/dev/block/" + dev, ec);
  if (ec) {
    return Status::NotFound("the file system of " + path + " is on device " + dev +
                            ", which has no /sys/dev/block entry (not a block device: tmpfs, "
                            "overlay, a network file system?)");
  }
  if (fs::exists(sys / "partition")) sys = sys.parent_path();  // the partition's disk
  if (!fs::exists(sys / "stat")) return Status::NotFound("no " + (sys / "stat").string());
  *name = sys.filename().string();
  *stat_path = (sys / "stat").string();
  return Status::Ok();
}

DiskMeter::DiskMeter(const std::string& path) {
  Status s = find_backing_disk(path, &disk_, &stat_path_);
  DiskSample probe;
  if (s.ok()) s = read_disk_sample(stat_path_, &probe);
  if (!s.ok()) why_ = s.message();
}

DiskSample DiskMeter::sample() const {
  DiskSample d;
  if (available() && !read_disk_sample(stat_path_, &d).ok()) d = DiskSample{};
  return d;
}

}  // namespace nvindex::bench
