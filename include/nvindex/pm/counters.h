// PM cost counters (DESIGN.md §3): every persist primitive and the allocator
// count what they do in thread-local counters, summed on demand. There are no
// hardware counters on the machines we run on, so these counts are how the
// harness reports PM cost (flushes, PM line writes, fences per operation).
//
// Thread-safety: each thread writes only its own ThreadCounters (relaxed
// atomic load+store, no lock prefix on the hot path); snapshot() may run
// concurrently from any thread and sums every live and exited thread.
#pragma once

#include <array>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstdint>

namespace nvindex::pm {

/// Buckets of the SMO duration histogram (smo_time_bucket): bucket 0 holds
/// durations below 16 ns, then four buckets per power of two (quarter
/// octaves: 16, 20, 24, 28, 32, 40, ... ns), the last one open-ended from
/// 7 x 2^29 ns (3.8 s).
inline constexpr int kSmoTimeBuckets = 1 + 4 * 28;

/// The histogram bucket of an SMO that took `ns` nanoseconds (see
/// kSmoTimeBuckets); a bucket spans at most 25% of its lower bound.
constexpr int smo_time_bucket(uint64_t ns) {
  if (ns < 16) return 0;
  const int e = 63 - std::countl_zero(ns);  // 2^e <= ns < 2^(e+1), e >= 4
  const int b = 1 + (e - 4) * 4 + static_cast<int>((ns >> (e - 2)) & 3);
  return b < kSmoTimeBuckets ? b : kSmoTimeBuckets - 1;
}

/// The smallest duration, ns, of histogram bucket `b` (0 for bucket 0).
constexpr uint64_t smo_time_bucket_floor(int b) {
  if (b <= 0) return 0;
  const int e = 4 + (b - 1) / 4;
  return static_cast<uint64_t>(4 + (b - 1) % 4) << (e - 2);
}
static_assert(smo_time_bucket(15) == 0 && smo_time_bucket(16) == 1 && smo_time_bucket(19) == 1 &&
              smo_time_bucket(20) == 2 && smo_time_bucket(32) == 5);
static_assert(smo_time_bucket_floor(1) == 16 && smo_time_bucket_floor(2) == 20 &&
              smo_time_bucket_floor(5) == 32 && smo_time_bucket(~0ull) == kSmoTimeBuckets - 1 &&
              smo_time_bucket_floor(kSmoTimeBuckets - 1) == (7ull << 29));

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
  /// Wall time of the SMO scopes an index timed with SmoTimer (one per
  /// operation that made SMOs; a cascade is one), ns in total, and their
  /// durations as a histogram (smo_time_bucket); the number timed is the
  /// histogram's sum. An index that counts SMOs but does not time them
  /// leaves both 0.
  uint64_t smo_ns = 0;
  std::array<uint64_t, kSmoTimeBuckets> smo_time{};

  /// SMOs timed: the sum of smo_time.
  uint64_t smos_timed() const;

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
  std::atomic<uint64_t> smo_ns{0};
  std::array<std::atomic<uint64_t>, kSmoTimeBuckets> smo_time{};
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

/// Records one SMO of this thread that took `ns` nanoseconds (SmoTimer
/// calls it).
inline void record_smo_time(uint64_t ns) {
  ThreadCounters& c = thread_counters();
  bump(c.smo_ns, ns);
  bump(c.smo_time[smo_time_bucket(ns)]);
}

namespace detail {
/// Nesting depth of this thread's live SmoTimers.
inline thread_local int smo_timer_depth = 0;
}  // namespace detail

/// Times a scope that may make SMOs (a split with its parent update, a
/// merge attempt, a consolidation, root growth or collapse, a segment split
/// or directory doubling) with std::chrono::steady_clock, and records its
/// wall time (record_smo_time) only if this thread counted at least one
/// SMO (count_smo) inside it; otherwise nothing (the scope made no SMO,
/// e.g. an allocation failed or a merge found no partner). Timers nest: only
/// the outermost records, so a cascade caused by one operation (a leaf
/// split that splits its parent, or a merge that collapses the root) is one
/// entry, however many SMOs it counted. An index declares one at the start
/// of the code that decides on and completes the SMO, so the histogram
/// answers "how long does a split take" (PiBench-style evaluations, e.g.
/// BzTree's split vs LB+-tree's); the time includes waiting for locks and
/// helping other threads, as the operation sees it. Cost: two clock reads
/// (about 20-40 ns each) per timed scope.
class SmoTimer {
 public:
  SmoTimer()
      : smos_(thread_counters().smos.load(std::memory_order_relaxed)),
        start_(std::chrono::steady_clock::now()) {
    ++detail::smo_timer_depth;
  }
  ~SmoTimer() {
    if (--detail::smo_timer_depth != 0) return;
    if (thread_counters().smos.load(std::memory_order_relaxed) == smos_) return;
    const auto d = std::chrono::steady_clock::now() - start_;
    record_smo_time(
        static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count()));
  }
  SmoTimer(const SmoTimer&) = delete;
  SmoTimer& operator=(const SmoTimer&) = delete;

 private:
  uint64_t smos_;  ///< this thread's SMO count at construction
  std::chrono::steady_clock::time_point start_;
};

/// Sum over every thread that ever counted, live or exited.
CounterSnapshot snapshot();

}  // namespace nvindex::pm
