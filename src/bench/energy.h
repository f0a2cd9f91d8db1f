// Energy from the RAPL counters (Running Average Power Limit: Intel, and AMD
// family 17h and later) through Linux's powercap interface
// (Documentation/power/powercap/powercap.rst): each package is a zone
// directory "intel-rapl:N" under /sys/class/powercap, with a subzone
// "intel-rapl:N:M" whose `name` is "dram" where the CPU meters its memory.
// Each zone's `energy_uj` counts microjoules and wraps at
// `max_energy_range_uj`. A machine without the interface (a VM, as the
// project's), or one whose counters only root may read (Linux 5.10 and
// later), has no energy figure: the meter says why and nothing is made up.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nvindex::bench {

/// One reading of every zone's counter, microjoules.
struct EnergySample {
  std::vector<uint64_t> package_uj;  ///< one per package zone
  std::vector<uint64_t> dram_uj;     ///< one per DRAM subzone
};

/// Energy between two samples, joules.
struct Joules {
  double package = 0;  ///< every package zone together
  double dram = 0;     ///< every DRAM subzone together (0 without one)
};

/// The RAPL zones of one machine.
class EnergyMeter {
 public:
  /// Finds the package zones and their DRAM subzones under `root` and reads
  /// each counter once. available() is false, with why(), when there is no
  /// package zone or a counter cannot be read.
  explicit EnergyMeter(const std::string& root = "/sys/class/powercap");

  bool available() const { return available_; }
  /// Why there is no figure ("" when available()).
  const std::string& why() const { return why_; }
  /// Whether some package has a DRAM subzone.
  bool has_dram() const { return !dram_.empty(); }
  /// Reads every counter (zero where one cannot be read).
  EnergySample sample() const;
  /// The energy from `a` to `b` (b taken later), counting one wrap of a
  /// counter at its max_energy_range_uj.
  Joules between(const EnergySample& a, const EnergySample& b) const;

 private:
  struct Zone {
    std::string energy_path;
    uint64_t range_uj = 0;  ///< max_energy_range_uj (0: unknown, no wrap counted)
  };
  std::vector<Zone> packages_, dram_;
  bool available_ = false;
  std::string why_;
};

}  // namespace nvindex::bench
