// Latency statistics: nearest-rank percentiles and the 1-in-N sampler. See
// stats.h.
#include "bench/stats.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace nvindex::bench {

uint64_t nearest_rank(std::span<const uint64_t> sorted, double pct) {
  if (sorted.empty()) return 0;
  const double n = static_cast<double>(sorted.size());
  // ceil(p/100 * N) in floating point; guard the product against rounding
  // (e.g. 0.999 * 1000 = 998.9999...) by subtracting a tiny epsilon first.
  double rank = std::ceil(pct / 100.0 * n - 1e-9);
  if (rank < 1) rank = 1;
  if (rank > n) rank = n;
  return sorted[static_cast<size_t>(rank) - 1];
}

LatencySummary summarize_latencies(std::vector<uint64_t>* samples_ns) {
  LatencySummary s;
  if (samples_ns->empty()) return s;
  std::sort(samples_ns->begin(), samples_ns->end());
  std::span<const uint64_t> v(*samples_ns);
  s.samples = v.size();
  s.min = v.front();
  s.p50 = nearest_rank(v, 50);
  s.p90 = nearest_rank(v, 90);
  s.p99 = nearest_rank(v, 99);
  s.p99_9 = nearest_rank(v, 99.9);
  s.p99_99 = nearest_rank(v, 99.99);
  s.p99_999 = nearest_rank(v, 99.999);
  s.max = v.back();
  return s;
}

LatencySampler::LatencySampler(double rate, uint64_t seed)
    : next_(std::numeric_limits<uint64_t>::max()), max_gap_(0), state_(seed | 1) {
  if (!(rate > 0)) return;  // also catches NaN
  if (rate >= 1) {
    max_gap_ = 1;
  } else {
    // Mean gap 1/rate: uniform in [1, 2/rate - 1].
    max_gap_ = std::max<uint64_t>(1, static_cast<uint64_t>(std::llround(2.0 / rate)) - 1);
  }
  // The first sample falls at a random offset in [1, max_gap] (every op: 0).
  next_ = 0;
  if (max_gap_ > 1) advance();
}

void LatencySampler::advance() {
  if (max_gap_ <= 1) {
    next_ += 1;
    return;
  }
  // xorshift64 (Marsaglia 2003).
  state_ ^= state_ << 13;
  state_ ^= state_ >> 7;
  state_ ^= state_ << 17;
  next_ += 1 + state_ % max_gap_;
}

}  // namespace nvindex::bench
