// Key generators and key-choice distributions for the benchmark harness
// (DESIGN.md §5), as YCSB defines them (Cooper et al., "Benchmarking Cloud
// Serving Systems with YCSB", SoCC'10, §4.1, and the YCSB source,
// core/src/main/java/site/ycsb/generator/) and as PiBench uses them.
//
// Every generator here returns an *item index* in [0, items); the workload
// maps item indices to keys (load order, or recency for Latest). Generators
// hold no random state of their own: each draw takes the caller's Rng, so
// one immutable generator (whose zeta constant is computed once) can be
// copied into every thread's stream, and a stream is reproducible from its
// seed alone.
//
// Thread-safety: none of these types synchronise; give each thread its own
// Rng and its own copy of a generator (copies are cheap: a few doubles).
#pragma once

#include <cstdint>

#include "nvindex/status.h"

namespace nvindex::bench {

// ---------------------------------------------------------------------------
// Hashing and random numbers
// ---------------------------------------------------------------------------

/// FNV-1a 64 of the 8 bytes of `x`, least significant byte first (Fowler,
/// Noll, Vo; offset basis 0xCBF29CE484222325, prime 0x100000001B3). This is
/// YCSB's Utils.fnvhash64 without its final Math.abs (we keep all 64 bits).
/// Used for YCSB's hashed insert order (key i = fnv1a64(i)) and to scramble
/// zipfian item numbers. Not injective: callers that need distinct keys must
/// check (see generate_keys in workload.cc).
uint64_t fnv1a64(uint64_t x);

/// SplitMix64 (Steele, Lea, Flood, "Fast splittable pseudorandom number
/// generators", OOPSLA'14): advances *state by the golden gamma and returns a
/// well-mixed 64-bit value. Used to seed Rng streams from one seed.
uint64_t splitmix64(uint64_t* state);

/// xoshiro256** (Blackman and Vigna, "Scrambled linear pseudorandom number
/// generators", ACM TOMS 2021): 32 bytes of state, period 2^256 - 1, about
/// 1 ns per draw. One Rng per thread stream; never shared between threads.
class Rng {
 public:
  /// Seeds the 256-bit state with four SplitMix64 outputs of `seed` (so any
  /// seed, including 0, gives a non-zero state).
  explicit Rng(uint64_t seed = 1);
  /// An independent stream `stream` of seed `seed` (e.g. one per thread):
  /// the seed and stream number are mixed through SplitMix64, so streams of
  /// the same seed do not overlap in practice and are reproducible.
  static Rng for_stream(uint64_t seed, uint64_t stream);

  /// The next 64 uniformly random bits.
  uint64_t next();
  /// Uniform double in [0, 1) with 53 random bits.
  double next_double();
  /// Uniform integer in [0, n), n >= 1, without modulo bias (Lemire,
  /// "Fast random integer generation in an interval", ACM TOMACS 2019).
  /// Returns 0 for n == 0.
  uint64_t uniform(uint64_t n);

 private:
  uint64_t s_[4];
};

// ---------------------------------------------------------------------------
// Zeta and the zipfian family
// ---------------------------------------------------------------------------

/// zeta(n, theta) = sum_{i=1..n} 1 / i^theta, the zipfian normalising
/// constant. Exact summation for n <= 4096; above that the first 1000 terms
/// are summed and the tail is taken from the Euler-Maclaurin formula (error
/// below 1e-12 relative), so zeta(10^10, 0.99) = 26.469028201783 (YCSB's
/// ScrambledZipfianGenerator.ZETAN) costs microseconds, not minutes.
/// n = 0 gives 0.
double zeta(uint64_t n, double theta);

/// Checks that `theta` is a usable zipfian skew: 0 < theta < 1 (Gray et
/// al.'s method divides by 1 - theta). InvalidArgument otherwise, naming
/// `what` (e.g. "zipfian skew").
Status check_zipfian_theta(double theta, const char* what);

/// Zipfian item numbers in [0, items): item i has probability
/// (1 / (i+1)^theta) / zeta(items, theta), so item 0 is the most popular.
/// Algorithm: Gray, Sundaresan, Englert, Baclawski, Weinberger, "Quickly
/// generating billion-record synthetic databases", SIGMOD'94, §6 (the
/// closed-form approximation YCSB's ZipfianGenerator uses): zeta computed
/// once, then each draw is O(1): u in [0,1), item 0 if u*zetan < 1, item 1
/// if u*zetan < 1 + 0.5^theta, else items * (eta*u - eta + 1)^(1/(1-theta)).
/// The item count may grow between draws (next(rng, items), as YCSB's
/// nextLong(itemcount)): zeta is then extended by the new terms only.
class ZipfianGenerator {
 public:
  /// YCSB's default skew (ZipfianGenerator.ZIPFIAN_CONSTANT).
  static constexpr double kDefaultTheta = 0.99;

  ZipfianGenerator() = default;
  /// items >= 1 and check_zipfian_theta(theta); InvalidArgument otherwise.
  /// Computes zeta(items, theta) once (O(min(items, 4096))).
  static Status Create(uint64_t items, double theta, ZipfianGenerator* out);
  /// As Create, with zeta(items, theta) supplied by the caller (YCSB passes a
  /// precomputed constant for its 10^10-item scrambled space).
  static Status CreateWithZeta(uint64_t items, double theta, double zetan, ZipfianGenerator* out);

  /// An item in [0, items()).
  uint64_t next(Rng& rng) const;
  /// An item in [0, items) after setting the item count to `items` (>= 1):
  /// a larger count extends zeta by the added terms (O(added)); a smaller
  /// one recomputes it.
  uint64_t next(Rng& rng, uint64_t items);

  uint64_t items() const { return items_; }
  double theta() const { return theta_; }
  double zetan() const { return zetan_; }
  /// The exact probability of item `i` (0-based): 1 / ((i+1)^theta * zetan).
  double probability(uint64_t i) const;

 private:
  void set_items(uint64_t items);
  void update_eta();

  uint64_t items_ = 1;
  double theta_ = kDefaultTheta;
  double zetan_ = 1.0;
  double zeta2theta_ = 1.0;
  double alpha_ = 1.0;
  double eta_ = 0.0;
};

/// YCSB's ScrambledZipfianGenerator: a zipfian draw over a large item space
/// (10^10 items, as YCSB's ITEM_COUNT) hashed with fnv1a64 and reduced mod
/// `items`, so the popular items are scattered over [0, items) instead of
/// being the lowest indices; the popularity skew is kept (up to collisions of
/// the hash mod items, which only merge popularity). For theta = 0.99 zeta
/// is YCSB's constant ZETAN = 26.46902820178302; otherwise zeta(10^10, theta)
/// is computed once (Euler-Maclaurin, microseconds).
class ScrambledZipfianGenerator {
 public:
  /// YCSB's ScrambledZipfianGenerator.ITEM_COUNT.
  static constexpr uint64_t kItemSpace = 10'000'000'000ull;
  /// YCSB's ScrambledZipfianGenerator.ZETAN = zeta(10^10, 0.99).
  static constexpr double kZetan099 = 26.46902820178302;

  ScrambledZipfianGenerator() = default;
  /// items >= 1 and check_zipfian_theta(theta); InvalidArgument otherwise.
  static Status Create(uint64_t items, double theta, ScrambledZipfianGenerator* out);
  /// An item in [0, items).
  uint64_t next(Rng& rng) const;
  uint64_t items() const { return items_; }

 private:
  ZipfianGenerator zipf_;
  uint64_t items_ = 1;
};

/// YCSB's SkewedLatestGenerator: the most recently added items are the most
/// likely. Items are numbered in order of arrival, 0 the oldest and
/// items()-1 the newest; a draw is newest - zipfian(items) (zipfian rank 0 =
/// newest). add_item() makes one more (newer) item; zeta grows with it
/// incrementally (one term per added item).
class LatestGenerator {
 public:
  LatestGenerator() = default;
  /// items >= 1 and check_zipfian_theta(theta); InvalidArgument otherwise.
  static Status Create(uint64_t items, double theta, LatestGenerator* out);
  /// An item in [0, items()); item items()-1 (the newest) is the likeliest.
  uint64_t next(Rng& rng);
  /// Registers one newer item: items() grows by 1.
  void add_item() { ++items_; }
  uint64_t items() const { return items_; }

 private:
  ZipfianGenerator zipf_;
  uint64_t items_ = 1;
};

/// Self-similar distribution (Gray et al., SIGMOD'94, §5; PiBench's
/// "selfsimilar"): with skew h, a fraction 1-h of the draws hit the first
/// h of the items, recursively (h = 0.2: 80% of draws on the lowest 20% of
/// indices, 64% on the lowest 4%, ...). A draw is
/// floor(items * u^(log h / log(1-h))), u uniform in [0,1). h = 0.5 is
/// uniform.
class SelfSimilarGenerator {
 public:
  SelfSimilarGenerator() = default;
  /// items >= 1 and 0 < h < 1; InvalidArgument otherwise.
  static Status Create(uint64_t items, double h, SelfSimilarGenerator* out);
  /// An item in [0, items).
  uint64_t next(Rng& rng) const;
  uint64_t items() const { return items_; }

 private:
  uint64_t items_ = 1;
  double exponent_ = 1.0;
};

/// Every item in [0, items) equally likely.
class UniformGenerator {
 public:
  explicit UniformGenerator(uint64_t items = 1) : items_(items) {}
  uint64_t next(Rng& rng) const { return rng.uniform(items_); }
  uint64_t items() const { return items_; }

 private:
  uint64_t items_;
};

/// Items start, start+1, ..., items-1, 0, 1, ... (wrapping around).
class SequentialGenerator {
 public:
  /// items >= 1 (0 is treated as 1); start is reduced mod items.
  explicit SequentialGenerator(uint64_t items = 1, uint64_t start = 0);
  uint64_t next();
  uint64_t items() const { return items_; }

 private:
  uint64_t items_;
  uint64_t cursor_;
};

}  // namespace nvindex::bench
