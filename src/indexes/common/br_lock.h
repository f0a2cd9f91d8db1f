// A big-reader lock: a reader-writer lock whose readers write only a line of
// their own, for indexes whose reads must scale across cores under one
// tree-wide lock (absl-btree, divided-skiplist).
//
// Technique: the distributed reader-writer lock of Hsieh and Weihl,
// "Scalable Reader-Writer Locks for Parallel Systems" (IPPS'92), as in the
// Linux kernel's brlock (big-reader lock) and its percpu_rw_semaphore: one
// reader counter per thread slot, each on its own line, and one writer flag.
// A shared-counter lock (std::shared_mutex, absl::Mutex in reader mode) makes
// every reader write the same line, which then moves between the cores on
// every read; here a reader's line stays in its own core's cache, and the
// writer flag's line is only read until a writer comes.
//
// Protocol (every step that pairs a store with a later load of the other
// side is seq_cst, so the two sides cannot both miss each other, as in
// Dekker's algorithm):
//   reader: increment its slot's counter; load the writer flag; if it is
//           clear, the reader holds the lock; if it is set, decrement the
//           counter, wait until the flag clears, and try again.
//   writer: set the writer flag with a compare-and-swap from clear (this also
//           excludes other writers: the flag is the writer mutex); then wait
//           until every reader counter in use is 0.
//   unlock: readers decrement their counter (release); a writer clears the
//           flag (release).
// Writers have priority: once the flag is set no new reader gets in, so a
// stream of readers cannot starve a writer (a stream of writers can starve
// readers). Waiting spins with `pause` for 64 rounds, then yields the CPU.
//
// Slots: the first time a thread takes any BrLock for reading it gets slot
// (n mod kSlots), n counting the threads that did so before it (slots are
// not given back when a thread exits). Threads whose first read locks are
// fewer than kSlots apart never share a slot, so the worker threads of one
// run, started together, each have their own; two threads whose first read
// locks are kSlots or more apart may share one (the counters are
// read-modify-writes, so that stays correct, only slower). A writer checks
// only the slots handed out so far (min(n, kSlots)).
//
// Costs: a lock holds kSlots lines of counters plus one line for the flag,
// 4160 B. A read lock + unlock is two atomic read-modify-writes of a line
// the thread owns plus one load of a line that is shared read-only; a write
// lock is one compare-and-swap plus one load per slot in use. Not reentrant:
// a thread must not take a BrLock it holds (for reading either: a waiting
// writer would wait for it forever).
//
// The member names are those of std::shared_mutex, so std::unique_lock and
// std::shared_lock work with it. Thread-safety: every method may be called
// from any thread.
#pragma once

#include <atomic>
#include <cstdint>

namespace nvindex {

class BrLock {
 public:
  /// Reader slots per lock (each one 64 B line). Threads beyond this many
  /// share slots.
  static constexpr unsigned kSlots = 64;

  BrLock() = default;
  BrLock(const BrLock&) = delete;
  BrLock& operator=(const BrLock&) = delete;

  /// Takes the lock shared (waits while a writer holds or wants it).
  void lock_shared() {
    std::atomic<uint32_t>& c = slots_[thread_slot()].readers;
    c.fetch_add(1, std::memory_order_seq_cst);
    if (__builtin_expect(writer_.load(std::memory_order_seq_cst), false)) lock_shared_slow(c);
  }
  /// Releases a shared hold taken by this thread.
  void unlock_shared() { slots_[thread_slot()].readers.fetch_sub(1, std::memory_order_release); }
  /// Takes the lock exclusively: waits for the other writers, then for every
  /// reader to leave.
  void lock();
  /// Releases the exclusive hold.
  void unlock() { writer_.store(false, std::memory_order_release); }

  /// This thread's reader slot, 0 .. kSlots - 1 (assigned on first use).
  static unsigned thread_slot() {
    if (__builtin_expect(tls_slot_ == kNoSlot, false)) tls_slot_ = assign_slot();
    return tls_slot_;
  }

 private:
  static constexpr unsigned kNoSlot = ~0u;
  /// One reader counter on a line of its own.
  struct alignas(64) Slot {
    std::atomic<uint32_t> readers{0};
  };

  /// Takes the next slot round-robin (counts the threads in slots_handed_).
  static unsigned assign_slot();
  /// Slots handed out so far, at most kSlots: the ones a writer must check.
  static unsigned slots_in_use();
  /// A reader that found the writer flag set: leave, wait, try again.
  void lock_shared_slow(std::atomic<uint32_t>& c);

  static inline thread_local unsigned tls_slot_ = kNoSlot;
  static inline std::atomic<unsigned> slots_handed_{0};

  Slot slots_[kSlots];
  alignas(64) std::atomic<bool> writer_{false};
  char pad_[64 - sizeof(std::atomic<bool>)] = {};
};

static_assert(sizeof(BrLock) == (BrLock::kSlots + 1) * 64);

}  // namespace nvindex
