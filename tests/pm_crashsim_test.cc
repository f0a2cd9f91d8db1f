// Crash simulator recorder (pm/crashsim.h): what it keeps at each crash
// point (the durable bytes and each dirty line's pending stores, as the
// crash-point hook sees them) after stores, flushes and fences (commits by
// fence and clflush, nt stores, copy/move/fill chunking, per-thread flush
// marks, eADR), crash-point counting and the hook's image count, the
// uninstrumented-write check, ablation, lint, site keys, and attach errors.
// The images built from it are tested in crash_images_test. Every test runs
// on a small file pool in /dev/shm mapped in crash-sim mode and writes into
// its unused heap area.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "crashsim_test_util.h"
#include "nvindex/pm/allocator.h"
#include "nvindex/pm/persist.h"
#include "nvindex/pm/pool.h"
#include "pm/crashsim.h"
#include "pm_test_util.h"

namespace nvindex::pm::crashsim {
namespace {

using nvindex::pm::testing::kScratch;
using nvindex::pm::testing::kSimPoolSize;
using nvindex::pm::testing::TempPool;

/// One pending store as the test states it: (offset from kScratch, length,
/// the value of its bytes read as a little-endian integer).
struct Store {
  uint64_t off;
  uint32_t len;
  uint64_t value;
  bool operator==(const Store&) const = default;
};

/// One crash point as the hook saw it.
struct Seen {
  CrashPoint point;
  std::vector<char> durable;         ///< 8 lines of the durable image from kScratch
  std::vector<Store> pending;        ///< every pending store, by line, program order
  bool copy_equals_durable = false;  ///< the working copy matched the durable image
};

class CrashSim : public nvindex::pm::testing::CrashSimFixture {
 protected:
  /// Creates the pool and attaches a simulator whose hook records every
  /// crash point and reports `images` images for each.
  void start(Options options = Options(), uint64_t images = 0) {
    attach(options);
    sim_->set_crash_point_hook([this, images](const CrashPoint& cp, const PendingState& st) {
      Seen s;
      s.point = cp;
      s.durable.assign(st.durable->data() + kScratch, st.durable->data() + kScratch + 512);
      for (const DirtyLine& d : st.lines) {
        for (const Chunk& c : *d.stores) {
          uint64_t v = 0;
          std::memcpy(&v, &c.data, c.len);
          s.pending.push_back({d.offset + c.off - kScratch, c.len, v});
        }
      }
      s.copy_equals_durable = *st.image == *st.durable;
      seen_.push_back(std::move(s));
      return images;
    });
  }
  /// The durable 8-byte word at `off` of crash point i's scratch.
  uint64_t durable_word(size_t i, uint64_t off) const {
    uint64_t v;
    std::memcpy(&v, seen_[i].durable.data() + off, 8);
    return v;
  }

  std::vector<Seen> seen_;
};

using Stores = std::vector<Store>;

TEST_F(CrashSim, StoreIsPendingUntilFlushAndFence) {
  start();
  store(word(0), uint64_t{7});
  sim_->operation_boundary("op");
  ASSERT_EQ(seen_.size(), 1u);
  EXPECT_FALSE(seen_[0].point.at_fence);
  EXPECT_EQ(seen_[0].point.site, "op");
  EXPECT_EQ(seen_[0].pending, (Stores{{0, 8, 7}}));
  EXPECT_EQ(durable_word(0, 0), 0u);
  persist(word(0), 8);
  seen_.clear();
  sim_->operation_boundary("op2");
  ASSERT_EQ(seen_.size(), 1u);
  EXPECT_TRUE(seen_[0].pending.empty());
  EXPECT_EQ(durable_word(0, 0), 7u);
}

TEST_F(CrashSim, StoresToOneLineAreKeptInProgramOrder) {
  start();
  store(word(8), uint64_t{2});
  store(word(0), uint64_t{1});
  sim_->operation_boundary("op");
  EXPECT_EQ(seen_[0].pending, (Stores{{8, 8, 2}, {0, 8, 1}}));
  EXPECT_EQ(seen_[0].point.dirty_lines, 1u);
  EXPECT_EQ(seen_[0].point.image_space, 3u);
}

TEST_F(CrashSim, TwoLinesAreTwoDirtyLines) {
  start();
  store(word(64), uint64_t{2});
  store(word(0), uint64_t{1});
  sim_->operation_boundary("op");
  EXPECT_EQ(seen_[0].pending, (Stores{{0, 8, 1}, {64, 8, 2}}));  // by line offset
  EXPECT_EQ(seen_[0].point.dirty_lines, 2u);
  EXPECT_EQ(seen_[0].point.pending_stores, 2u);
  EXPECT_EQ(seen_[0].point.image_space, 4u);
}

TEST_F(CrashSim, CrashPointBeforeEveryFence) {
  start();
  store(word(0), uint64_t{5});
  flush(word(0), 8);
  fence({"test.fence"});
  // Just before the fence: flushed but not yet durable.
  ASSERT_EQ(seen_.size(), 1u);
  EXPECT_TRUE(seen_[0].point.at_fence);
  EXPECT_EQ(seen_[0].point.site, "test.fence");
  EXPECT_EQ(seen_[0].point.number, 0u);
  EXPECT_EQ(seen_[0].point.fences, 0u);
  EXPECT_EQ(seen_[0].pending, (Stores{{0, 8, 5}}));
  sim_->operation_boundary("op");
  EXPECT_EQ(sim_->stats().crash_points, 2u);
  EXPECT_EQ(seen_.back().point.number, 1u);
  EXPECT_EQ(seen_.back().point.fences, 1u);
  EXPECT_TRUE(seen_.back().pending.empty());
}

TEST_F(CrashSim, StoreAfterFlushIsNotCoveredByIt) {
  start();
  store(word(0), uint64_t{1});
  flush(word(0), 8);
  store(word(0), uint64_t{2});
  fence();
  seen_.clear();
  sim_->operation_boundary("op");
  // The first store is durable; the second is pending.
  EXPECT_EQ(durable_word(0, 0), 1u);
  EXPECT_EQ(seen_[0].pending, (Stores{{0, 8, 2}}));
}

TEST_F(CrashSim, ClflushCommitsImmediately) {
  start();
  const FlushInstruction saved = detail::g.flush;
  detail::g.flush = FlushInstruction::kClflush;
  store(word(0), uint64_t{9});
  flush(word(0), 8);
  detail::g.flush = saved;
  sim_->operation_boundary("op");
  ASSERT_EQ(seen_.size(), 1u);
  EXPECT_TRUE(seen_[0].pending.empty());
  EXPECT_EQ(durable_word(0, 0), 9u);
}

TEST_F(CrashSim, NonTemporalCopyIsStorePlusFlush) {
  start();
  std::vector<char> src(100, 'x');
  nt_copy(at(3), src.data(), src.size());
  sim_->operation_boundary("op");
  EXPECT_FALSE(seen_[0].pending.empty());  // pending until a fence
  fence();
  seen_.clear();
  sim_->operation_boundary("op2");
  ASSERT_EQ(seen_.size(), 1u);
  EXPECT_TRUE(seen_[0].pending.empty());
  EXPECT_EQ(std::string(seen_[0].durable.data() + 3, 100), std::string(100, 'x'));
}

TEST_F(CrashSim, CopyIsChunkedInAddressOrder) {
  start();
  // 20 bytes from offset 4: chunks [4,8) [8,16) [16,24) in one line.
  std::vector<char> src(20, 'a');
  copy(at(4), src.data(), src.size());
  EXPECT_EQ(sim_->stats().stores, 3u);
  sim_->operation_boundary("op");
  EXPECT_EQ(
      seen_[0].pending,
      (Stores{{4, 4, 0x61616161u}, {8, 8, 0x6161616161616161u}, {16, 8, 0x6161616161616161u}}));
}

TEST_F(CrashSim, MoveToHigherAddressIsRecordedBackwards) {
  start();
  const std::string init = "AAAAAAAABBBBBBBBCCCCCCCC";
  copy(at(0), init.data(), init.size());
  persist(at(0), init.size());
  seen_.clear();
  move(at(8), at(0), 16);  // memmove may go backwards: [16,24) first, then [8,16)
  sim_->operation_boundary("op");
  EXPECT_EQ(seen_[0].pending, (Stores{{16, 8, 0x4242424242424242u},    // "BBBBBBBB"
                                      {8, 8, 0x4141414141414141u}}));  // "AAAAAAAA"
}

TEST_F(CrashSim, MoveToLowerAddressAndFillAreRecordedForwards) {
  start();
  const std::string init = "AAAAAAAABBBBBBBBCCCCCCCC";
  copy(at(0), init.data(), init.size());
  persist(at(0), init.size());
  seen_.clear();
  move(at(0), at(8), 16);  // [0,8) first, then [8,16)
  sim_->operation_boundary("op");
  EXPECT_EQ(seen_[0].pending, (Stores{{0, 8, 0x4242424242424242u},     // "BBBBBBBB"
                                      {8, 8, 0x4343434343434343u}}));  // "CCCCCCCC"
  persist(at(0), 24);
  seen_.clear();
  pm::fill(at(60), 'f', 8);  // crosses a line: [60,64) in line 0, [64,68) in line 1
  EXPECT_EQ(sim_->stats().stores, 3u + 2u + 2u);
  sim_->operation_boundary("op2");
  EXPECT_EQ(seen_[0].pending, (Stores{{60, 4, 0x66666666u}, {64, 4, 0x66666666u}}));
  EXPECT_EQ(seen_[0].point.dirty_lines, 2u);
}

TEST_F(CrashSim, TheWorkingCopyEqualsTheDurableImageAtEveryCrashPoint) {
  start();
  two_stores_per_line(3);
  flush(word(0), 8);
  fence();
  store(word(8), uint64_t{9});
  sim_->operation_boundary("op");
  ASSERT_EQ(seen_.size(), 2u);
  for (const Seen& s : seen_) EXPECT_TRUE(s.copy_equals_durable) << s.point.site;
}

TEST_F(CrashSim, HookReportsItsImagesAndWithoutOneCrashPointsAreOnlyCounted) {
  start(Options(), /*images=*/3);
  store(word(0), uint64_t{1});
  persist(word(0), 8);
  sim_->operation_boundary("op");
  EXPECT_EQ(sim_->stats().crash_points, 2u);
  EXPECT_EQ(sim_->stats().images, 6u);
  sim_->set_crash_point_hook(nullptr);
  seen_.clear();
  persist(word(0), 8);
  sim_->operation_boundary("op");
  EXPECT_EQ(sim_->stats().crash_points, 4u);
  EXPECT_EQ(sim_->stats().images, 6u);
  EXPECT_TRUE(seen_.empty());
}

TEST_F(CrashSim, UninstrumentedWriteIsReported) {
  start();
  *word(64) = 42;  // raw store, not through pm::
  store(word(0), uint64_t{1});
  persist(word(0), 8);
  EXPECT_EQ(sim_->stats().uninstrumented_writes, 1u);
  ASSERT_EQ(sim_->stats().uninstrumented_examples.size(), 1u);
  EXPECT_NE(sim_->stats().uninstrumented_examples[0].find("0x000000000000002a"), std::string::npos);
  // Reported once: the write is then followed like any pending store.
  sim_->operation_boundary("op");
  EXPECT_EQ(sim_->stats().uninstrumented_writes, 1u);
  EXPECT_EQ(seen_.back().pending, (Stores{{64, 8, 42}}));
}

TEST_F(CrashSim, UninstrumentedCheckCanBeTurnedOff) {
  Options o;
  o.check_uninstrumented = false;
  start(o);
  *word(64) = 42;
  sim_->operation_boundary("op");
  EXPECT_EQ(sim_->stats().uninstrumented_writes, 0u);
}

TEST_F(CrashSim, RawWriteDuringSetUpIsFoundWhenCrashPointsTurnOn) {
  start();
  sim_->set_crash_points(false);
  *word(128) = 1;  // raw, during set-up
  persist(word(128), 8);
  EXPECT_EQ(sim_->stats().uninstrumented_writes, 0u);
  sim_->set_crash_points(true);
  EXPECT_EQ(sim_->stats().uninstrumented_writes, 1u);
}

TEST_F(CrashSim, AblatedFlushLeavesStorePending) {
  start();
  sim_->ablate("test.persist", /*drop_flush=*/true, /*drop_fence=*/false);
  store(word(0), uint64_t{3});
  persist(word(0), 8, {"test.persist"});
  seen_.clear();
  sim_->operation_boundary("op");
  EXPECT_EQ(seen_[0].pending, (Stores{{0, 8, 3}}));
  EXPECT_EQ(sim_->sites().at("test.persist").flushes, 1u);  // reached, though dropped
  EXPECT_EQ(sim_->stats().flushes, 0u);
}

TEST_F(CrashSim, AblatedFenceLeavesStorePending) {
  start();
  sim_->ablate("test.persist", /*drop_flush=*/false, /*drop_fence=*/true);
  store(word(0), uint64_t{3});
  persist(word(0), 8, {"test.persist"});
  EXPECT_TRUE(seen_.empty());  // no crash point: the fence is gone
  sim_->operation_boundary("op");
  EXPECT_EQ(seen_[0].pending, (Stores{{0, 8, 3}}));
  sim_->ablate("", false, false);
  persist(word(0), 8, {"test.persist"});
  seen_.clear();
  sim_->operation_boundary("op");
  EXPECT_TRUE(seen_[0].pending.empty());
  EXPECT_EQ(durable_word(0, 0), 3u);
}

TEST_F(CrashSim, SiteKeys) {
  EXPECT_EQ(pm::Site("fastfair.split.publish").key(), "fastfair.split.publish");
  const pm::Site here;
  const int line = __LINE__ - 1;
  EXPECT_EQ(here.key(), "pm_crashsim_test.cc:" + std::to_string(line));
  start();
  store(word(0), uint64_t{1});
  persist(word(0), 8);
  const int pline = __LINE__ - 1;
  const auto& sites = sim_->sites();
  ASSERT_EQ(sites.count("pm_crashsim_test.cc:" + std::to_string(pline)), 1u);
  EXPECT_EQ(sites.at("pm_crashsim_test.cc:" + std::to_string(pline)).flushes, 1u);
  EXPECT_EQ(sites.at("pm_crashsim_test.cc:" + std::to_string(pline)).fences, 1u);
}

TEST_F(CrashSim, EadrMakesEveryStoreDurableAfterACrashPoint) {
  Options o;
  o.profile = Profile::kEadr;
  start(o);
  store(word(0), uint64_t{1});
  store(word(64), uint64_t{2});
  store(word(8), uint64_t{3});
  sim_->operation_boundary("op");
  EXPECT_EQ(seen_[0].point.image_space, 4u);  // pending + 1
  EXPECT_EQ(seen_[0].pending, (Stores{{0, 8, 1}, {8, 8, 3}, {64, 8, 2}}));
  seen_.clear();
  sim_->operation_boundary("op2");
  ASSERT_EQ(seen_.size(), 1u);
  EXPECT_TRUE(seen_[0].pending.empty());
  EXPECT_EQ(durable_word(0, 8), 3u);
  // Also while crash points are off.
  sim_->set_crash_points(false);
  store(word(16), uint64_t{4});
  sim_->operation_boundary("setup");
  sim_->set_crash_points(true);
  seen_.clear();
  sim_->operation_boundary("op3");
  EXPECT_EQ(durable_word(0, 16), 4u);
}

TEST_F(CrashSim, ParseProfile) {
  Profile p = Profile::kAdr;
  ASSERT_TRUE(parse_profile("eadr", &p).ok());
  EXPECT_EQ(p, Profile::kEadr);
  EXPECT_EQ(profile_name(p), "eadr");
  ASSERT_TRUE(parse_profile("adr", &p).ok());
  EXPECT_EQ(p, Profile::kAdr);
  const Status s = parse_profile("ADR2", &p);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("adr, eadr"), std::string::npos);
}

TEST_F(CrashSim, LintStoreNotDurableAtReturn) {
  start();
  store(word(0), uint64_t{1});
  const int line = __LINE__ - 1;
  sim_->operation_boundary("op");
  const auto& lint = sim_->lint().not_durable_at_return;
  ASSERT_EQ(lint.size(), 1u);
  EXPECT_EQ(lint.begin()->first, "pm_crashsim_test.cc:" + std::to_string(line));
  EXPECT_EQ(lint.begin()->second, 1u);
}

TEST_F(CrashSim, LintFlushWithoutFence) {
  start();
  store(word(0), uint64_t{1});
  flush(word(0), 8, {"t.flush"});
  sim_->operation_boundary("op");
  EXPECT_EQ(sim_->lint().flush_without_fence.at("t.flush"), 1u);
  EXPECT_TRUE(sim_->lint().redundant_flush.empty());
}

TEST_F(CrashSim, LintRedundantFlushAndFence) {
  start();
  store(word(0), uint64_t{1});
  persist(word(0), 8, {"t.first"});
  persist(word(0), 8, {"t.again"});  // nothing new to make durable
  fence({"t.lonely"});               // no flush before it
  sim_->operation_boundary("op");
  const LintReport& lint = sim_->lint();
  EXPECT_EQ(lint.redundant_flush.count("t.first"), 0u);
  EXPECT_EQ(lint.redundant_fence.count("t.first"), 0u);
  EXPECT_EQ(lint.redundant_flush.at("t.again"), 1u);
  EXPECT_EQ(lint.redundant_fence.at("t.again"), 1u);
  EXPECT_EQ(lint.redundant_fence.at("t.lonely"), 1u);
  EXPECT_TRUE(lint.not_durable_at_return.empty());
  EXPECT_TRUE(lint.flush_without_fence.empty());
}

TEST_F(CrashSim, CrashPointsOffStillKeepsTheBooks) {
  start();
  sim_->set_crash_points(false);
  store(word(0), uint64_t{1});
  persist(word(0), 8);
  store(word(8), uint64_t{2});
  fence({"t.lonely"});
  sim_->operation_boundary("setup");
  EXPECT_TRUE(seen_.empty());
  EXPECT_EQ(sim_->stats().crash_points, 0u);
  EXPECT_TRUE(sim_->lint().redundant_fence.empty());  // lint only while on
  sim_->set_crash_points(true);
  sim_->operation_boundary("op");
  EXPECT_EQ(durable_word(0, 0), 1u);
  EXPECT_EQ(seen_[0].pending, (Stores{{8, 8, 2}}));
  EXPECT_EQ(sim_->stats().crash_points, 1u);
}

TEST_F(CrashSim, MakeAllDurable) {
  start();
  two_stores_per_line(3);
  flush(word(0), 8);
  sim_->make_all_durable();
  fence();  // nothing left to commit
  seen_.clear();
  sim_->operation_boundary("op");
  ASSERT_EQ(seen_.size(), 1u);
  EXPECT_TRUE(seen_[0].pending.empty());
  EXPECT_EQ(durable_word(0, 128), 1u);
  EXPECT_EQ(durable_word(0, 136), 2u);
}

TEST_F(CrashSim, FlushIsCommittedOnlyByTheSameThreadsFence) {
  start();
  std::thread t1([&] {
    store(word(0), uint64_t{4});
    flush(word(0), 8);
  });
  t1.join();
  fence();  // another thread's fence: does not order t1's flush
  seen_.clear();
  sim_->operation_boundary("op");
  EXPECT_EQ(seen_[0].pending, (Stores{{0, 8, 4}}));
  EXPECT_EQ(sim_->lint().flush_without_fence.size(), 0u);  // not this thread's flush
}

TEST_F(CrashSim, ChildOfAForkCanDetach) {
  start();
  ASSERT_EQ(Simulator::attach(pool_.get(), Options(), &sim_).code(), Code::kBusy);
  std::unique_ptr<Simulator> second;
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    Simulator::detach_after_fork();
    _exit(Simulator::attach(pool_.get(), Options(), &second).ok() ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  // The parent's simulator is still attached.
  EXPECT_EQ(Simulator::attach(pool_.get(), Options(), &second).code(), Code::kBusy);
}

TEST_F(CrashSim, PoolAndAllocatorWriteOnlyThroughPmHelpers) {
  start();
  // Allocations assign chunks (a persisted class byte): every write the
  // allocator and the pool make must be seen by the simulator.
  std::vector<uint64_t> blocks;
  for (uint32_t size : {64u, 256u, 4096u, 64u}) {
    uint64_t off = 0;
    ASSERT_TRUE(pool_->allocator().allocate(size, &off).ok());
    blocks.push_back(off);
    sim_->operation_boundary("allocate");
  }
  pool_->set_root(blocks[0]);
  sim_->operation_boundary("set_root");
  for (uint64_t off : blocks) pool_->allocator().free(off);
  sim_->operation_boundary("free");
  EXPECT_EQ(sim_->stats().uninstrumented_writes, 0u);
  EXPECT_GT(sim_->stats().crash_points, 6u);
}

TEST_F(CrashSim, AttachErrors) {
  std::unique_ptr<Simulator> sim;
  // Not a crash-sim pool.
  TempPool other("emulated");
  std::unique_ptr<Pool> emulated;
  ASSERT_TRUE(
      Pool::create(other.path(), kSimPoolSize, "crashsim", Mode::kEmulated, &emulated).ok());
  EXPECT_EQ(Simulator::attach(emulated.get(), Options(), &sim).code(), Code::kInvalidArgument);
  EXPECT_EQ(Simulator::attach(nullptr, Options(), &sim).code(), Code::kInvalidArgument);
  start();
  // A second simulator.
  EXPECT_EQ(Simulator::attach(pool_.get(), Options(), &sim).code(), Code::kBusy);
  EXPECT_EQ(sim, nullptr);
}

}  // namespace
}  // namespace nvindex::pm::crashsim
