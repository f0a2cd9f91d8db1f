#include "bench/energy.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

namespace nvindex::bench {

namespace {

/// The first line of a sysfs file, or "" when it cannot be read.
std::string read_line(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::string s;
  if (!f || !std::getline(f, s)) return "";
  return s;
}

bool read_u64(const std::string& path, uint64_t* out) {
  const std::string s = read_line(path);
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos) return false;
  *out = std::stoull(s);
  return true;
}

}  // namespace

EnergyMeter::EnergyMeter(const std::string& root) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) {
    why_ = "no " + root + ": the machine exposes no RAPL counters";
    return;
  }
  std::vector<fs::path> zones;
  for (const fs::directory_entry& d : fs::directory_iterator(root, ec)) {
    if (d.path().filename().string().rfind("intel-rapl:", 0) == 0) zones.push_back(d.path());
  }
  std::sort(zones.begin(), zones.end());
  for (const fs::path& z : zones) {
    const std::string leaf = z.filename().string();
    const bool sub = std::count(leaf.begin(), leaf.end(), ':') == 2;
    const std::string name = read_line(z / "name");
    if (sub && name != "dram") continue;
    if (!sub && name.rfind("package", 0) != 0) continue;
    Zone zone{(z / "energy_uj").string(), 0};
    uint64_t probe = 0;
    if (!read_u64(zone.energy_path, &probe)) {
      why_ = "cannot read " + zone.energy_path + " (RAPL counters are root-only since Linux 5.10)";
      packages_.clear();
      dram_.clear();
      return;
    }
    if (!read_u64((z / "max_energy_range_uj").string(), &zone.range_uj)) zone.range_uj = 0;
    (sub ? dram_ : packages_).push_back(zone);
  }
  if (packages_.empty()) {
    why_ = "no RAPL package zone under " + root;
    dram_.clear();
    return;
  }
  available_ = true;
}

EnergySample EnergyMeter::sample() const {
  EnergySample s;
  for (const Zone& z : packages_) {
    uint64_t v = 0;
    s.package_uj.push_back(read_u64(z.energy_path, &v) ? v : 0);
  }
  for (const Zone& z : dram_) {
    uint64_t v = 0;
    s.dram_uj.push_back(read_u64(z.energy_path, &v) ? v : 0);
  }
  return s;
}

Joules EnergyMeter::between(const EnergySample& a, const EnergySample& b) const {
  auto sum = [](const std::vector<Zone>& zones, const std::vector<uint64_t>& x,
                const std::vector<uint64_t>& y) {
    double uj = 0;
    for (size_t i = 0; i < zones.size() && i < x.size() && i < y.size(); ++i) {
      if (y[i] >= x[i]) {
        uj += static_cast<double>(y[i] - x[i]);
      } else if (zones[i].range_uj > x[i]) {  // the counter wrapped once
        uj += static_cast<double>(zones[i].range_uj - x[i] + y[i]);
      }
    }
    return uj / 1e6;
  };
  return {sum(packages_, a.package_uj, b.package_uj), sum(dram_, a.dram_uj, b.dram_uj)};
}

}  // namespace nvindex::bench
