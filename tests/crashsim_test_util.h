// The fixture shared by the crash simulator's tests: pm_crashsim_test (what
// the PM layer's recorder keeps: pending stores, commits, lint, ablation,
// sites) and crash_images_test (the images the crash lab builds from it). A
// small file pool in /dev/shm mapped in crash-sim mode, a simulator attached
// to it, and pointers into the pool's unused heap area.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>

#include "nvindex/pm/persist.h"
#include "nvindex/pm/pool.h"
#include "pm/crashsim.h"
#include "pm_test_util.h"

namespace nvindex::pm::testing {

/// Size of the fixture's pool, bytes.
constexpr uint64_t kSimPoolSize = 4ull << 20;
/// A line-aligned scratch area in the pool's unused heap (offset 2 MiB).
constexpr uint64_t kScratch = 2ull << 20;

/// Creates the pool and attaches the simulator (attach()); tears both down
/// and restores the default PM configuration after each test.
class CrashSimFixture : public ::testing::Test {
 protected:
  void SetUp() override { configure(PersistConfig{}); }
  void TearDown() override {
    sim_.reset();
    pool_.reset();
    configure(PersistConfig{});
  }

  /// Creates the pool (crash-sim mode) and attaches a simulator with
  /// `options`, no crash-point hook yet.
  void attach(crashsim::Options options = crashsim::Options()) {
    ASSERT_TRUE(Pool::create(tp_.path(), kSimPoolSize, "crashsim", Mode::kCrashSim, &pool_).ok());
    ASSERT_TRUE(crashsim::Simulator::attach(pool_.get(), options, &sim_).ok());
  }
  /// Pointer to scratch byte `off`.
  char* at(uint64_t off) { return pool_->base() + kScratch + off; }
  uint64_t* word(uint64_t off) { return reinterpret_cast<uint64_t*>(at(off)); }
  /// Stores 1 then 2 to the first two words of each of `lines` scratch lines
  /// (2 pending stores per line), no flush.
  void two_stores_per_line(int lines) {
    for (int l = 0; l < lines; ++l) {
      store(word(64 * l), uint64_t{1});
      store(word(64 * l + 8), uint64_t{2});
    }
  }

  TempPool tp_;
  std::unique_ptr<Pool> pool_;
  std::unique_ptr<crashsim::Simulator> sim_;
};

}  // namespace nvindex::pm::testing
