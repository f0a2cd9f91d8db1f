// The RAPL energy meter (src/bench/energy.h) over a fake powercap tree: the
// package and DRAM zones found, energy between samples (a counter's wrap
// included), and a clear reason when there is nothing to read.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "bench/energy.h"

namespace nvindex::bench {
namespace {

namespace fs = std::filesystem;

class FakePowercap : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("nvindex_powercap_" + std::to_string(getpid()));
    fs::remove_all(root_);
    zone("intel-rapl:0", "package-0", 1000, 5000000);
    zone("intel-rapl:0:0", "dram", 200, 5000000);
    zone("intel-rapl:0:1", "core", 7, 5000000);  // not DRAM: left out
    zone("intel-rapl:1", "package-1", 4999000, 5000000);
  }
  void TearDown() override { fs::remove_all(root_); }
  void zone(const std::string& dir, const std::string& name, uint64_t uj, uint64_t range) {
    fs::create_directories(root_ / dir);
    std::ofstream(root_ / dir / "name") << name << "\n";
    std::ofstream(root_ / dir / "energy_uj") << uj << "\n";
    std::ofstream(root_ / dir / "max_energy_range_uj") << range << "\n";
  }
  void set(const std::string& dir, uint64_t uj) {
    std::ofstream(root_ / dir / "energy_uj") << uj << "\n";
  }
  fs::path root_;
};

TEST_F(FakePowercap, PackagesAndDramBetweenTwoSamples) {
  EnergyMeter m(root_.string());
  ASSERT_TRUE(m.available()) << m.why();
  EXPECT_TRUE(m.has_dram());
  const EnergySample a = m.sample();
  ASSERT_EQ(a.package_uj.size(), 2u);
  ASSERT_EQ(a.dram_uj.size(), 1u);
  set("intel-rapl:0", 3001000);   // +3 J
  set("intel-rapl:0:0", 500200);  // +0.5 J
  set("intel-rapl:1", 1000);      // wrapped at 5 J: 1,000 + 1,000 uJ = +0.002 J
  const Joules j = m.between(a, m.sample());
  EXPECT_DOUBLE_EQ(j.package, 3.0 + 0.002);
  EXPECT_DOUBLE_EQ(j.dram, 0.5);
}

TEST_F(FakePowercap, AnUnreadableCounterMeansNoFigureAndSaysWhy) {
  fs::remove(root_ / "intel-rapl:1" / "energy_uj");
  EnergyMeter m(root_.string());
  EXPECT_FALSE(m.available());
  EXPECT_NE(m.why().find("cannot read"), std::string::npos) << m.why();
}

TEST(EnergyMeter, NoPowercapDirectoryMeansNotAvailable) {
  EnergyMeter m("/nonexistent/powercap");
  EXPECT_FALSE(m.available());
  EXPECT_NE(m.why().find("no /nonexistent/powercap"), std::string::npos) << m.why();
  EXPECT_FALSE(m.has_dram());
}

}  // namespace
}  // namespace nvindex::bench
