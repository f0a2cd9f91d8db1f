// Key-choice generators: see generators.h for the algorithms and sources.
#include "bench/generators.h"

#include <cmath>
#include <string>

namespace nvindex::bench {

uint64_t fnv1a64(uint64_t x) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (int i = 0; i < 8; ++i) {
    h ^= x & 0xFF;
    h *= 0x100000001B3ull;
    x >>= 8;
  }
  return h;
}

uint64_t splitmix64(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

Rng::Rng(uint64_t seed) {
  uint64_t st = seed;
  for (uint64_t& w : s_) w = splitmix64(&st);
}

Rng Rng::for_stream(uint64_t seed, uint64_t stream) {
  uint64_t st = seed;
  uint64_t a = splitmix64(&st);
  st = stream ^ 0xD1B54A32D192ED03ull;
  uint64_t b = splitmix64(&st);
  return Rng(a ^ (b * 0x9E3779B97F4A7C15ull) ^ stream);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t Rng::next() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double Rng::next_double() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

uint64_t Rng::uniform(uint64_t n) {
  if (n == 0) return 0;
  __extension__ using u128 = unsigned __int128;
  u128 m = static_cast<u128>(next()) * n;
  uint64_t low = static_cast<uint64_t>(m);
  if (low < n) {
    const uint64_t threshold = (0 - n) % n;
    while (low < threshold) {
      m = static_cast<u128>(next()) * n;
      low = static_cast<uint64_t>(m);
    }
  }
  return static_cast<uint64_t>(m >> 64);
}

// ---------------------------------------------------------------------------

double zeta(uint64_t n, double theta) {
  constexpr uint64_t kExactLimit = 4096;
  constexpr uint64_t kHead = 1000;  // terms summed exactly before the tail
  long double sum = 0;
  if (n <= kExactLimit) {
    for (uint64_t i = 1; i <= n; ++i) sum += std::pow(static_cast<long double>(i), -theta);
    return static_cast<double>(sum);
  }
  // Euler-Maclaurin: sum_{i=m}^{N} f(i) = int_m^N f + (f(m) + f(N)) / 2
  //   + B2/2! (f'(N) - f'(m)) + B4/4! (f'''(N) - f'''(m)) + R, f(x) = x^-s,
  // |R| ~ s^5 m^(-s-5) / 30240 < 1e-19 for m = 1000.
  for (uint64_t i = 1; i < kHead; ++i) sum += std::pow(static_cast<long double>(i), -theta);
  const long double s = theta;
  const long double m = static_cast<long double>(kHead);
  const long double N = static_cast<long double>(n);
  auto f = [&](long double x) { return std::pow(x, -s); };
  auto f1 = [&](long double x) { return -s * std::pow(x, -s - 1); };
  auto f3 = [&](long double x) { return -s * (s + 1) * (s + 2) * std::pow(x, -s - 3); };
  long double integral = (std::pow(N, 1 - s) - std::pow(m, 1 - s)) / (1 - s);
  sum += integral + (f(m) + f(N)) / 2 + (f1(N) - f1(m)) / 12 - (f3(N) - f3(m)) / 720;
  return static_cast<double>(sum);
}

Status check_zipfian_theta(double theta, const char* what) {
  if (!(theta > 0.0 && theta < 1.0)) {
    return Status::InvalidArgument(std::string(what) + " must be in (0, 1) (YCSB uses 0.99), got " +
                                   std::to_string(theta));
  }
  return Status::Ok();
}

Status ZipfianGenerator::Create(uint64_t items, double theta, ZipfianGenerator* out) {
  if (Status s = check_zipfian_theta(theta, "zipfian skew (theta)"); !s.ok()) return s;
  return CreateWithZeta(items, theta, zeta(items, theta), out);
}

Status ZipfianGenerator::CreateWithZeta(uint64_t items, double theta, double zetan,
                                        ZipfianGenerator* out) {
  if (Status s = check_zipfian_theta(theta, "zipfian skew (theta)"); !s.ok()) return s;
  if (items == 0) return Status::InvalidArgument("zipfian generator needs at least 1 item");
  if (!(zetan >= 1.0)) return Status::InvalidArgument("zipfian zeta must be >= 1");
  ZipfianGenerator g;
  g.items_ = items;
  g.theta_ = theta;
  g.zetan_ = zetan;
  g.zeta2theta_ = 1.0 + std::pow(0.5, theta);
  g.alpha_ = 1.0 / (1.0 - theta);
  g.update_eta();
  *out = g;
  return Status::Ok();
}

void ZipfianGenerator::update_eta() {
  // Gray et al. §6: eta = (1 - (2/n)^(1-theta)) / (1 - zeta(2)/zeta(n)).
  // For n <= 2 the first two branches of next() cover all of [0, 1).
  if (items_ <= 2) {
    eta_ = 0.0;
    return;
  }
  eta_ = (1.0 - std::pow(2.0 / static_cast<double>(items_), 1.0 - theta_)) /
         (1.0 - zeta2theta_ / zetan_);
}

void ZipfianGenerator::set_items(uint64_t items) {
  if (items == items_ || items == 0) return;
  if (items > items_ && items - items_ <= 4096) {
    long double add = 0;
    for (uint64_t i = items_ + 1; i <= items; ++i) {
      add += std::pow(static_cast<long double>(i), -theta_);
    }
    zetan_ += static_cast<double>(add);
  } else {
    zetan_ = zeta(items, theta_);
  }
  items_ = items;
  update_eta();
}

uint64_t ZipfianGenerator::next(Rng& rng) const {
  const double u = rng.next_double();
  const double uz = u * zetan_;
  if (uz < 1.0) return 0;
  if (uz < 1.0 + std::pow(0.5, theta_)) return items_ > 1 ? 1 : 0;
  const double v = static_cast<double>(items_) * std::pow(eta_ * u - eta_ + 1.0, alpha_);
  const uint64_t r = v >= static_cast<double>(items_) ? items_ - 1 : static_cast<uint64_t>(v);
  return r < items_ ? r : items_ - 1;
}

uint64_t ZipfianGenerator::next(Rng& rng, uint64_t items) {
  set_items(items);
  return next(rng);
}

double ZipfianGenerator::probability(uint64_t i) const {
  if (i >= items_) return 0.0;
  return std::pow(static_cast<double>(i + 1), -theta_) / zetan_;
}

Status ScrambledZipfianGenerator::Create(uint64_t items, double theta,
                                         ScrambledZipfianGenerator* out) {
  if (items == 0) return Status::InvalidArgument("scrambled zipfian generator needs >= 1 item");
  ScrambledZipfianGenerator g;
  const double z = theta == 0.99 ? kZetan099 : zeta(kItemSpace, theta);
  if (Status s = ZipfianGenerator::CreateWithZeta(kItemSpace, theta, z, &g.zipf_); !s.ok()) {
    return s;
  }
  g.items_ = items;
  *out = g;
  return Status::Ok();
}

uint64_t ScrambledZipfianGenerator::next(Rng& rng) const {
  return fnv1a64(zipf_.next(rng)) % items_;
}

Status LatestGenerator::Create(uint64_t items, double theta, LatestGenerator* out) {
  LatestGenerator g;
  if (Status s = ZipfianGenerator::Create(items, theta, &g.zipf_); !s.ok()) return s;
  g.items_ = items;
  *out = g;
  return Status::Ok();
}

uint64_t LatestGenerator::next(Rng& rng) {
  const uint64_t rank = zipf_.next(rng, items_);  // 0 = newest
  return items_ - 1 - rank;
}

Status SelfSimilarGenerator::Create(uint64_t items, double h, SelfSimilarGenerator* out) {
  if (items == 0) return Status::InvalidArgument("self-similar generator needs >= 1 item");
  if (!(h > 0.0 && h < 1.0)) {
    return Status::InvalidArgument(
        "self-similar skew h must be in (0, 1) (0.2 = 80% of accesses on 20% of keys), got " +
        std::to_string(h));
  }
  SelfSimilarGenerator g;
  g.items_ = items;
  g.exponent_ = std::log(h) / std::log(1.0 - h);
  *out = g;
  return Status::Ok();
}

uint64_t SelfSimilarGenerator::next(Rng& rng) const {
  const double v = static_cast<double>(items_) * std::pow(rng.next_double(), exponent_);
  const uint64_t r = v >= static_cast<double>(items_) ? items_ - 1 : static_cast<uint64_t>(v);
  return r < items_ ? r : items_ - 1;
}

SequentialGenerator::SequentialGenerator(uint64_t items, uint64_t start)
    : items_(items == 0 ? 1 : items), cursor_(start % (items == 0 ? 1 : items)) {}

uint64_t SequentialGenerator::next() {
  const uint64_t r = cursor_;
  cursor_ = cursor_ + 1 == items_ ? 0 : cursor_ + 1;
  return r;
}

}  // namespace nvindex::bench
