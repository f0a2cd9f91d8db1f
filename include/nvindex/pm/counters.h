// PM cost counters (DESIGN.md §3): every persist primitive and the allocator
// count what they do in thread-local counters, summed on demand. There are no
// hardware counters on the machines we run on, so these counts are how the
// harness reports PM cost (flushes, PM line writes, fences per operation).
//
// Thread-safety: each thread writes only its own ThreadCounters (relaxed
// atomic load+store, no lock prefix on the hot path); snapshot() may run
// concurrently from any thread and sums every live and exited thread.
#pragma once

#include <atomic>
#include <cstdint>

namespace nvindex::pm {

/// A point-in-time sum of all threads' counters. Subtract two snapshots to get
/// the cost of a phase (counters are never reset, so phases never race).
struct CounterSnapshot {
  uint64_t flushes = 0;        ///< flush instructions issued (one per 64 B line)
  uint64_t lines_flushed = 0;  ///< distinct 64 B lines flushed = PM line writes
  uint64_t fences = 0;         ///< sfence instructions
  uint64_t naws = 0;           ///< 8-byte NVM atomic writes (store+flush+fence)
  uint64_t nt_bytes = 0;       ///< bytes written with non-temporal stores
  uint64_t log_bytes = 0;      ///< bytes appended to logs (WAL, micro-logs)
  uint64_t allocs = 0;         ///< PM blocks allocated
  uint64_t frees = 0;          ///< PM blocks freed
  uint64_t media_writes = 0;   ///< 256 B XPLine writes (media model; 0 when off)
  /// 64 B lines written back into the media model's XPLine buffer (dirty
  /// lines flushed or evicted from the modelled cache, or written back by
  /// media_drain; with the cache model off, every flushed line): the bytes
  /// that reach the DIMM, the denominator of media write amplification.
  /// 0 when the media model is off.
  uint64_t lines_written_back = 0;
  /// Structure modification operations (SMOs) an index made: node splits,
  /// merges, root growth or collapse, each counted once by the index with
  /// count_smo(). Counted in every mode (volatile indexes too), so the
  /// harness can separate split inserts from non-split ones.
  uint64_t smos = 0;

  /// Field-wise difference (this - o): the cost between two snapshots, where
  /// `o` is the earlier one (counters only grow, so no field underflows).
  CounterSnapshot operator-(const CounterSnapshot& o) const;
  /// Field-wise sum, e.g. to total several phases.
  CounterSnapshot& operator+=(const CounterSnapshot& o);
};

/// One thread's counters. Only the owning thread increments them.
struct alignas(64) ThreadCounters {
  std::atomic<uint64_t> flushes{0};
  std::atomic<uint64_t> lines_flushed{0};
  std::atomic<uint64_t> fences{0};
  std::atomic<uint64_t> naws{0};
  std::atomic<uint64_t> nt_bytes{0};
  std::atomic<uint64_t> log_bytes{0};
  std::atomic<uint64_t> allocs{0};
  std::atomic<uint64_t> frees{0};
  std::atomic<uint64_t> media_writes{0};
  std::atomic<uint64_t> lines_written_back{0};
  std::atomic<uint64_t> smos{0};
};

/// Registers this thread's counters on first use; the returned reference is
/// valid for the thread's lifetime (its totals are kept after it exits).
ThreadCounters& register_thread_counters();

namespace detail {
inline thread_local ThreadCounters* tls_counters = nullptr;
}

/// This thread's counters (one TLS load and a predictable branch).
inline ThreadCounters& thread_counters() {
  ThreadCounters* c = detail::tls_counters;
  if (__builtin_expect(c == nullptr, 0)) c = &register_thread_counters();
  return *c;
}

/// Adds n to one of this thread's counters without a locked instruction.
inline void bump(std::atomic<uint64_t>& counter, uint64_t n = 1) {
  counter.store(counter.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

/// Counts one structure modification operation (a node split, merge, root
/// growth or collapse) of this thread, in every mode. Indexes call it once per
/// SMO, where the SMO is decided.
inline void count_smo() { bump(thread_counters().smos); }

/// Sum over every thread that ever counted, live or exited.
CounterSnapshot snapshot();

}  // namespace nvindex::pm
