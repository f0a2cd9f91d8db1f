// BrLock (src/indexes/common/br_lock.h), the big-reader lock: writers exclude
// readers and each other, readers share, slots are distinct per thread; run
// under ThreadSanitizer too (TSAN_TESTS in the Makefile), where a broken
// exclusion also shows as a data race on the unprotected payload.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <vector>

#include "indexes/common/br_lock.h"

namespace nvindex {
namespace {

TEST(BrLockTest, ThreadsGetDistinctSlots) {
  unsigned a = 0, b = 0;
  std::thread([&] { a = BrLock::thread_slot(); }).join();
  std::thread([&] { b = BrLock::thread_slot(); }).join();
  EXPECT_LT(a, BrLock::kSlots);
  EXPECT_LT(b, BrLock::kSlots);
  EXPECT_NE(a, b);  // consecutive threads: consecutive slots mod kSlots
  EXPECT_EQ(BrLock::thread_slot(), BrLock::thread_slot());
}

TEST(BrLockTest, ReadersShare) {
  BrLock lock;
  std::shared_lock r1(lock);
  std::atomic<bool> second_in{false};
  // A second reader gets in while the first holds the lock (it would hang
  // here, and the test time out, if readers excluded each other).
  std::thread([&] {
    std::shared_lock r2(lock);
    second_in.store(true);
  }).join();
  EXPECT_TRUE(second_in.load());
}

// A writer must not get in while a reader holds the lock, and must get in
// once the reader leaves. The 100000 yields give a broken lock ample chance
// to let the writer in; a correct lock passes however the threads run.
TEST(BrLockTest, WriterWaitsForReader) {
  BrLock lock;
  std::atomic<int> writer_in{0};
  lock.lock_shared();
  std::thread w([&] {
    std::unique_lock x(lock);
    writer_in.store(1);
  });
  int seen = 0;
  for (int i = 0; i < 100000 && seen == 0; ++i) {
    seen = writer_in.load();
    std::this_thread::yield();
  }
  EXPECT_EQ(seen, 0) << "a writer got in while a reader held the lock";
  lock.unlock_shared();
  w.join();
  EXPECT_EQ(writer_in.load(), 1);
}

// Readers and writers on `threads` threads. Writers hold the lock
// exclusively while they write every word of a plain (non-atomic) payload
// with one number and bump a plain counter; readers check that all words are
// equal. The atomics count who is inside: a writer must find nobody, a
// reader no writer. Broken exclusion shows as a violation, a torn payload, a
// lost counter increment, or (under TSan) a data race.
void stress(unsigned threads, unsigned ops, unsigned write_every) {
  BrLock lock;
  constexpr int kWords = 8;
  uint64_t payload[kWords] = {};
  uint64_t writes = 0;
  std::atomic<int> readers_in{0}, writers_in{0};
  std::atomic<uint64_t> violations{0}, torn{0}, expected_writes{0};
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      uint64_t mine = 0;
      for (unsigned i = 0; i < ops; ++i) {
        if ((i + t) % write_every == 0) {
          std::unique_lock x(lock);
          if (writers_in.fetch_add(1) != 0 || readers_in.load() != 0) violations.fetch_add(1);
          const uint64_t v = payload[0] + 1;
          for (int k = 0; k < kWords; ++k) payload[k] = v;
          ++writes;
          ++mine;
          writers_in.fetch_sub(1);
        } else {
          std::shared_lock r(lock);
          readers_in.fetch_add(1);
          if (writers_in.load() != 0) violations.fetch_add(1);
          for (int k = 1; k < kWords; ++k) {
            if (payload[k] != payload[0]) torn.fetch_add(1);
          }
          readers_in.fetch_sub(1);
        }
      }
      expected_writes.fetch_add(mine);
    });
  }
  for (auto& th : ts) th.join();
  EXPECT_EQ(violations.load(), 0u);
  EXPECT_EQ(torn.load(), 0u);
  EXPECT_EQ(writes, expected_writes.load()) << "lost writes: writers overlapped";
  EXPECT_EQ(payload[0], writes);
}

TEST(BrLockTest, ExclusionUnderMostlyReads) { stress(4, 20000, 50); }
TEST(BrLockTest, ExclusionUnderHalfWrites) { stress(4, 20000, 2); }
// More threads than slots: some threads share a slot counter.
TEST(BrLockTest, ExclusionWithSharedSlots) { stress(BrLock::kSlots + 6, 300, 3); }

}  // namespace
}  // namespace nvindex
