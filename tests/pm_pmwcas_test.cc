// PMwCAS (src/pm/pmwcas.h): all-or-nothing multi-word updates, refusals,
// linearizable concurrent updates (a conserved sum), recovery of every
// state a crash can leave a descriptor in (rolled forward only when durably
// succeeded), and reattaching to a pool's descriptors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "nvindex/pm/allocator.h"
#include "nvindex/pm/pool.h"
#include "pm/pmwcas.h"

namespace nvindex::pm {
namespace {

/// A pool with a descriptor pool and `n` zeroed target words in one block.
struct Fixture {
  std::unique_ptr<Pool> pool;
  std::unique_ptr<Pmwcas> mw;
  uint64_t directory = 0;
  std::atomic<uint64_t>* words = nullptr;
  explicit Fixture(uint32_t descriptors = 64) {
    EXPECT_TRUE(Pool::create_anonymous(kMinPoolSize, "pmwcas-test", &pool).ok());
    EXPECT_TRUE(Pmwcas::create(pool.get(), descriptors, &directory, &mw).ok());
    uint64_t off = 0;
    EXPECT_TRUE(pool->allocator().allocate(Allocator::kMaxBlock, &off).ok());
    words = pool->ptr<std::atomic<uint64_t>>(off);
    for (int i = 0; i < 512; ++i) words[i].store(0);
  }
};

TEST(Pmwcas, ChangesEveryWordOrNone) {
  Fixture f;
  EpochManager::Guard g(f.mw->epoch());
  f.words[0] = 5;
  f.words[9] = 7;
  f.words[3] = 11;
  std::unique_ptr<Pmwcas::Op> op;
  ASSERT_TRUE(f.mw->begin(&op).ok());
  EXPECT_TRUE(op->add(&f.words[9], 7, 70));  // out of address order on purpose
  EXPECT_TRUE(op->add(&f.words[0], 5, 50));
  EXPECT_TRUE(op->add(&f.words[3], 11, 110));
  EXPECT_TRUE(op->execute());
  EXPECT_EQ(f.mw->read(&f.words[0]), 50u);
  EXPECT_EQ(f.mw->read(&f.words[3]), 110u);
  EXPECT_EQ(f.mw->read(&f.words[9]), 70u);
  // One stale expectation: nothing changes.
  ASSERT_TRUE(f.mw->begin(&op).ok());
  EXPECT_TRUE(op->add(&f.words[0], 50, 1));
  EXPECT_TRUE(op->add(&f.words[3], 999, 2));
  EXPECT_TRUE(op->add(&f.words[9], 70, 3));
  EXPECT_FALSE(op->execute());
  EXPECT_EQ(f.mw->read(&f.words[0]), 50u);
  EXPECT_EQ(f.mw->read(&f.words[3]), 110u);
  EXPECT_EQ(f.mw->read(&f.words[9]), 70u);
  for (int i : {0, 3, 9}) EXPECT_EQ(f.words[i].load() & kPmwcasFlags, 0u) << i;
}

TEST(Pmwcas, AddRefusesWhatItCannotHold) {
  Fixture f;
  std::unique_ptr<Pmwcas::Op> op;
  ASSERT_TRUE(f.mw->begin(&op).ok());
  EXPECT_FALSE(op->add(&f.words[0], kPmwcasMaxValue + 1, 0));
  EXPECT_FALSE(op->add(&f.words[0], 0, kPmwcasDirty));
  std::atomic<uint64_t> outside{0};
  EXPECT_FALSE(op->add(&outside, 0, 1));
  EXPECT_TRUE(op->add(&f.words[0], 0, 1));
  EXPECT_FALSE(op->add(&f.words[0], 0, 2));  // twice
  for (uint32_t i = 1; i < kPmwcasMaxWords; ++i) EXPECT_TRUE(op->add(&f.words[i], 0, 1));
  EXPECT_FALSE(op->add(&f.words[kPmwcasMaxWords], 0, 1));  // full
}

TEST(Pmwcas, BusyWhenEveryDescriptorIsTaken) {
  Fixture f(16);
  std::vector<std::unique_ptr<Pmwcas::Op>> ops(16);
  for (auto& op : ops) ASSERT_TRUE(f.mw->begin(&op).ok());
  std::unique_ptr<Pmwcas::Op> more;
  EXPECT_EQ(f.mw->begin(&more).code(), Code::kBusy);
  ops.pop_back();  // an unused Op gives its descriptor back
  EXPECT_TRUE(f.mw->begin(&more).ok());
  EXPECT_EQ(Pmwcas::create(f.pool.get(), 0, &f.directory, &f.mw).code(), Code::kInvalidArgument);
}

TEST(Pmwcas, ConcurrentUpdatesConserveTheSum) {
  // Each operation moves one unit from one word to another and bumps a
  // third (an operation counter word): lost or half-applied updates would
  // change the sum or the counter.
  Fixture f(256);
  constexpr int kWords = 8;
  for (int i = 0; i < kWords; ++i) f.words[i] = 1000;
  std::atomic<uint64_t> committed{0};
  auto worker = [&](unsigned seed) {
    std::mt19937 rng(seed);
    for (int n = 0; n < 20000; ++n) {
      // begin() outside the guard, as Pmwcas::begin says: inside it, a
      // thread would hold back the reclamation it waits for (a preempted
      // guard on a loaded machine starved every thread of descriptors).
      std::unique_ptr<Pmwcas::Op> op;
      if (!f.mw->begin(&op).ok()) {
        std::this_thread::yield();
        continue;
      }
      EpochManager::Guard g(f.mw->epoch());
      const int a = static_cast<int>(rng() % kWords);
      int b = static_cast<int>(rng() % (kWords - 1));
      if (b >= a) ++b;
      const uint64_t va = f.mw->read(&f.words[a]);
      const uint64_t vb = f.mw->read(&f.words[b]);
      const uint64_t vc = f.mw->read(&f.words[100]);
      if (va == 0) continue;
      ASSERT_TRUE(op->add(&f.words[a], va, va - 1));
      ASSERT_TRUE(op->add(&f.words[b], vb, vb + 1));
      ASSERT_TRUE(op->add(&f.words[100], vc, vc + 1));
      if (op->execute()) committed.fetch_add(1);
    }
  };
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < 3; ++t) ts.emplace_back(worker, t + 1);
  for (auto& t : ts) t.join();
  EpochManager::Guard g(f.mw->epoch());
  uint64_t sum = 0;
  for (int i = 0; i < kWords; ++i) sum += f.mw->read(&f.words[i]);
  EXPECT_EQ(sum, uint64_t{kWords} * 1000);
  EXPECT_EQ(f.mw->read(&f.words[100]), committed.load());
  EXPECT_GT(committed.load(), 1000u);
}

/// Leaves descriptor state as a crash in the middle of the protocol would:
/// `status` durable, words 0..count-1 of the op holding `held[i]` (the
/// descriptor pointer, the word entry pointer, the old or the new value).
enum Held { kOld, kNew, kPointer, kEntry };
void crash_state(Fixture& f, uint64_t status, const std::vector<Held>& held) {
  std::unique_ptr<Pmwcas::Op> op;
  ASSERT_TRUE(f.mw->begin(&op).ok());
  for (size_t i = 0; i < held.size(); ++i) {
    f.words[i] = 10 + i;
    ASSERT_TRUE(op->add(&f.words[i], 10 + i, 20 + i));
  }
  // The descriptor as the protocol would have it (reached through the
  // pool's descriptor table: the op's descriptor is the last handed out).
  PmwcasDescriptor* d = nullptr;
  {
    // Find the descriptor whose first entry targets words[0].
    const auto* dir = f.pool->ptr<uint64_t>(f.directory);
    for (uint32_t b = 0; dir[b] != 0 && d == nullptr; ++b) {
      for (uint32_t i = 0; i < Pmwcas::kDescriptorsPerBlock; ++i) {
        auto* c = f.pool->ptr<PmwcasDescriptor>(dir[b] + i * Pmwcas::kSlotBytes);
        if (c->count == held.size() && c->words[0].address == f.pool->offset(&f.words[0])) {
          d = c;
          break;
        }
      }
    }
  }
  ASSERT_NE(d, nullptr);
  d->status = status;
  for (size_t i = 0; i < held.size(); ++i) {
    const uint64_t v = held[i] == kOld       ? 10 + i
                       : held[i] == kNew     ? 20 + i
                       : held[i] == kPointer ? f.pool->offset(d) | kPmwcasDescriptor | kPmwcasDirty
                                             : f.pool->offset(&d->words[i]) | kPmwcasRdcss;
    f.words[i] = v;
  }
  // "Crashed": never executed (the Op gives the descriptor back to this
  // Pmwcas's DRAM free list only; the test reopens the pool).
}

TEST(Pmwcas, RecoveryRollsForwardOnlyWhatSucceededDurably) {
  struct Case {
    uint64_t status;
    std::vector<Held> held;
    bool forward;
  };
  const std::vector<Case> cases = {
      {kPmwcasUndecided, {kPointer, kEntry, kOld}, false},  // step 1 under way
      {kPmwcasUndecided | kPmwcasDirty, {kPointer, kPointer, kPointer}, false},
      {kPmwcasFailed, {kOld, kPointer, kPointer}, false},  // step 3 of a failure
      {kPmwcasSucceeded, {kPointer, kPointer, kPointer}, true},
      {kPmwcasSucceeded, {kNew, kNew, kPointer}, true},  // step 3 half done
  };
  for (size_t c = 0; c < cases.size(); ++c) {
    SCOPED_TRACE(c);
    Fixture f;
    crash_state(f, cases[c].status, cases[c].held);
    std::unique_ptr<Pmwcas> mw;
    ASSERT_TRUE(Pmwcas::open(f.pool.get(), f.directory, &mw).ok());
    Pmwcas::RecoveryStats st;
    ASSERT_TRUE(mw->recover(&st).ok());
    EXPECT_EQ(st.rolled_forward + st.rolled_back, 1u);
    EXPECT_EQ(st.rolled_forward, cases[c].forward ? 1u : 0u);
    for (size_t i = 0; i < cases[c].held.size(); ++i) {
      EXPECT_EQ(f.words[i].load() & ~kPmwcasDirty, (cases[c].forward ? 20 : 10) + i) << i;
    }
    // Recovery again finds nothing to do; every descriptor is usable.
    ASSERT_TRUE(mw->recover(&st).ok());
    EXPECT_EQ(st.rolled_forward + st.rolled_back, 0u);
    f.mw.reset();
    std::vector<std::unique_ptr<Pmwcas::Op>> ops(mw->descriptors());
    for (auto& op : ops) EXPECT_TRUE(mw->begin(&op).ok());
  }
}

TEST(Pmwcas, OpenRefusesADamagedDirectory) {
  Fixture f;
  std::unique_ptr<Pmwcas> mw;
  EXPECT_EQ(Pmwcas::open(f.pool.get(), 0, &mw).code(), Code::kCorruption);
  auto* dir = f.pool->ptr<uint64_t>(f.directory);
  const uint64_t saved = dir[0];
  dir[0] = f.pool->size() + 4096;
  EXPECT_EQ(Pmwcas::open(f.pool.get(), f.directory, &mw).code(), Code::kCorruption);
  dir[0] = saved + 64;  // misaligned
  EXPECT_EQ(Pmwcas::open(f.pool.get(), f.directory, &mw).code(), Code::kCorruption);
  dir[0] = f.directory;  // the directory itself
  EXPECT_EQ(Pmwcas::open(f.pool.get(), f.directory, &mw).code(), Code::kCorruption);
  dir[0] = saved;
  if (dir[1] != 0) {
    const uint64_t second = dir[1];
    dir[1] = saved;  // listed twice
    EXPECT_EQ(Pmwcas::open(f.pool.get(), f.directory, &mw).code(), Code::kCorruption);
    dir[1] = second;
  }
  // A misaligned directory offset (the fuzzer's find through BzTree's root).
  EXPECT_EQ(Pmwcas::open(f.pool.get(), f.directory + 8, &mw).code(), Code::kCorruption);
  f.pool->ptr<PmwcasDescriptor>(saved)->count = kPmwcasMaxWords + 1;
  EXPECT_EQ(Pmwcas::open(f.pool.get(), f.directory, &mw).code(), Code::kCorruption);
}

}  // namespace
}  // namespace nvindex::pm
