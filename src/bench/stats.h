// Latency statistics for the benchmark driver (DESIGN.md §5, "Measurements").
//
// The driver samples a fraction of the run's operations (--latency-sample),
// times each sampled operation with std::chrono::steady_clock in nanoseconds,
// merges the per-thread sample vectors after the run and summarises them here
// with nearest-rank percentiles (the definition PiBench and the papers it
// serves use: the p-th percentile of N sorted samples is the sample at rank
// ceil(p/100 * N), 1-based; no interpolation, so every reported value is a
// latency that was actually observed).
//
// Thread-safety: pure functions on values; no shared state.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace nvindex::bench {

/// Summary of sampled operation latencies, all in nanoseconds. Every field is
/// 0 when samples == 0.
struct LatencySummary {
  uint64_t samples = 0;  ///< how many operations were timed
  uint64_t min = 0;      ///< fastest sample, ns
  uint64_t p50 = 0;      ///< median, ns
  uint64_t p90 = 0;      ///< ns
  uint64_t p99 = 0;      ///< ns
  uint64_t p99_9 = 0;    ///< ns
  uint64_t p99_99 = 0;   ///< ns
  uint64_t p99_999 = 0;  ///< ns
  uint64_t max = 0;      ///< slowest sample, ns
};

/// Nearest-rank percentile of `sorted` (ascending, any length): the element at
/// 1-based rank ceil(pct/100 * N), clamped to [1, N]. pct in [0, 100]; pct 0
/// gives the minimum, pct 100 the maximum. Returns 0 for an empty span.
uint64_t nearest_rank(std::span<const uint64_t> sorted, double pct);

/// Sorts `samples_ns` in place (O(N log N)) and summarises it: min, p50, p90,
/// p99, p99.9, p99.99, p99.999, max by nearest rank.
LatencySummary summarize_latencies(std::vector<uint64_t>* samples_ns);

/// Sampling schedule for 1-in-N latency sampling: a per-thread counter and the
/// next operation index at which to sample. The gap between samples is drawn
/// uniformly from [1, 2/rate - 1] (mean 1/rate) with a per-thread xorshift
/// generator, so a periodic pattern in the operation stream cannot alias with
/// the sampling period. rate <= 0 never samples; rate >= 1 samples every op.
class LatencySampler {
 public:
  /// rate: fraction of operations to time, e.g. 0.01 = 1%. seed: per thread.
  LatencySampler(double rate, uint64_t seed);
  /// True when the operation with 0-based index `op` is to be timed; call
  /// once per operation with increasing `op`.
  bool should_sample(uint64_t op) {
    if (op < next_) return false;
    advance();
    return true;
  }

 private:
  void advance();
  uint64_t next_;
  uint64_t max_gap_;  ///< 0 = never sample
  uint64_t state_;
};

}  // namespace nvindex::bench
