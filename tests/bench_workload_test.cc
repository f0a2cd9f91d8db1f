// Tests for workload generation (src/bench/workload.h) and the key-choice
// generators (src/bench/generators.h): YCSB presets, distribution shapes,
// the key discipline (fresh disjoint inserts, reserved removes, even thread
// shares), reproducibility, validation and keys files.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "bench/generators.h"
#include "bench/string_keys.h"
#include "bench/workload.h"

namespace nvindex::bench {
namespace {

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "nvindex_workload_" + std::to_string(::getpid()) + "_" + name;
}

std::string write_file(const std::string& name, const std::string& text) {
  const std::string path = temp_path(name);
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

std::array<uint64_t, kOpTypes> count_types(const Workload& w) {
  std::array<uint64_t, kOpTypes> c{};
  for (const auto& ops : w.per_thread) {
    for (const Operation& op : ops) ++c[static_cast<int>(op.type)];
  }
  return c;
}

// --- presets ---------------------------------------------------------------

struct PresetCase {
  const char* name;
  double read, insert, update, scan, rmw;
  Distribution dist;
};

TEST(WorkloadPreset, YcsbAtoFProportionsFor100kOps) {
  const PresetCase cases[] = {
      {"ycsb-a", 0.5, 0, 0.5, 0, 0, Distribution::kZipfian},
      {"ycsb-b", 0.95, 0, 0.05, 0, 0, Distribution::kZipfian},
      {"ycsb-c", 1.0, 0, 0, 0, 0, Distribution::kZipfian},
      {"ycsb-d", 0.95, 0.05, 0, 0, 0, Distribution::kLatest},
      {"ycsb-e", 0, 0.05, 0, 0.95, 0, Distribution::kZipfian},
      {"ycsb-f", 0.5, 0, 0, 0, 0.5, Distribution::kZipfian},
  };
  for (const PresetCase& c : cases) {
    SCOPED_TRACE(c.name);
    WorkloadSpec spec;
    spec.records = 1000;
    spec.operations = 100'000;
    spec.threads = 3;
    spec.seed = 7;
    spec.remove_ratio = 0.3;  // reset by the preset
    ASSERT_TRUE(apply_preset(c.name, &spec).ok());
    EXPECT_EQ(spec.name, c.name);
    EXPECT_EQ(spec.records, 1000u);
    EXPECT_EQ(spec.threads, 3u);
    EXPECT_EQ(spec.seed, 7u);
    EXPECT_EQ(spec.distribution, c.dist);
    EXPECT_DOUBLE_EQ(spec.skew, 0.99);
    EXPECT_EQ(spec.remove_ratio, 0.0);
    Workload w;
    Status s = make_workload(spec, &w);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_EQ(w.total_operations(), 100'000u);
    const auto n = count_types(w);
    const double N = 100'000;
    EXPECT_NEAR(n[static_cast<int>(OpType::kRead)] / N, c.read, 0.005);
    EXPECT_NEAR(n[static_cast<int>(OpType::kInsert)] / N, c.insert, 0.005);
    EXPECT_NEAR(n[static_cast<int>(OpType::kUpdate)] / N, c.update, 0.005);
    EXPECT_NEAR(n[static_cast<int>(OpType::kScan)] / N, c.scan, 0.005);
    EXPECT_NEAR(n[static_cast<int>(OpType::kReadModifyWrite)] / N, c.rmw, 0.005);
    EXPECT_EQ(n[static_cast<int>(OpType::kRemove)], 0u);
    if (std::string(c.name) == "ycsb-e") {
      EXPECT_TRUE(spec.scan_uniform);
      EXPECT_EQ(spec.scan_size, 100u);
      uint64_t sum = 0, scans = 0;
      uint32_t lo = UINT32_MAX, hi = 0;
      for (const auto& ops : w.per_thread) {
        for (const Operation& op : ops) {
          if (op.type != OpType::kScan) {
            EXPECT_EQ(op.scan_length, 0u);
            continue;
          }
          sum += op.scan_length;
          ++scans;
          lo = std::min(lo, op.scan_length);
          hi = std::max(hi, op.scan_length);
        }
      }
      EXPECT_EQ(lo, 1u);
      EXPECT_EQ(hi, 100u);
      EXPECT_NEAR(static_cast<double>(sum) / scans, 50.5, 1.0);  // uniform 1..100
    }
  }
}

TEST(WorkloadPreset, UnknownNameIsInvalidArgument) {
  WorkloadSpec spec;
  Status s = apply_preset("ycsb-g", &spec);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("ycsb-g"), std::string::npos);
}

TEST(WorkloadNames, OpAndDistributionNamesRoundTrip) {
  EXPECT_EQ(op_name(OpType::kReadModifyWrite), "rmw");
  EXPECT_EQ(op_name(OpType::kRemove), "remove");
  for (Distribution d : {Distribution::kUniform, Distribution::kZipfian, Distribution::kSelfSimilar,
                         Distribution::kLatest, Distribution::kSequential}) {
    Distribution back = Distribution::kUniform;
    ASSERT_TRUE(parse_distribution(distribution_name(d), &back).ok());
    EXPECT_EQ(back, d);
  }
  Distribution d;
  EXPECT_EQ(parse_distribution("gaussian", &d).code(), Code::kInvalidArgument);
}

// --- generators ------------------------------------------------------------

TEST(Generators, Fnv1a64MatchesReference) {
  // FNV-1a 64 of eight zero bytes (reference computed byte by byte).
  uint64_t h = 0xCBF29CE484222325ull;
  for (int i = 0; i < 8; ++i) h = (h ^ 0) * 0x100000001B3ull;
  EXPECT_EQ(fnv1a64(0), h);
  h = 0xCBF29CE484222325ull;
  const uint64_t x = 0x0102030405060708ull;
  for (int i = 0; i < 8; ++i) h = (h ^ ((x >> (8 * i)) & 0xFF)) * 0x100000001B3ull;
  EXPECT_EQ(fnv1a64(x), h);
}

TEST(Generators, ZetaMatchesExactSumAndYcsbConstant) {
  long double exact = 0;
  for (uint64_t i = 1; i <= 100'000; ++i) exact += std::pow(static_cast<long double>(i), -0.99L);
  EXPECT_NEAR(zeta(100'000, 0.99), static_cast<double>(exact), 1e-9);
  // YCSB's ScrambledZipfianGenerator.ZETAN = zeta(10^10, 0.99).
  EXPECT_NEAR(zeta(10'000'000'000ull, 0.99), ScrambledZipfianGenerator::kZetan099, 1e-9);
  EXPECT_EQ(zeta(0, 0.5), 0.0);
  EXPECT_DOUBLE_EQ(zeta(1, 0.5), 1.0);
}

TEST(Generators, ZipfianMostPopularItemHasExpectedFrequency) {
  ZipfianGenerator z;
  ASSERT_TRUE(ZipfianGenerator::Create(1000, 0.99, &z).ok());
  Rng rng(42);
  std::vector<uint64_t> hits(1000, 0);
  const int kDraws = 100'000;
  for (int i = 0; i < kDraws; ++i) {
    const uint64_t v = z.next(rng);
    ASSERT_LT(v, 1000u);
    ++hits[v];
  }
  const double p0 = 1.0 / zeta(1000, 0.99);  // ~0.134
  EXPECT_NEAR(z.probability(0), p0, 1e-12);
  EXPECT_NEAR(static_cast<double>(hits[0]) / kDraws, p0, 0.01);
  EXPECT_EQ(std::max_element(hits.begin(), hits.end()) - hits.begin(), 0);
  uint64_t top = 0;
  for (int i = 0; i < 100; ++i) top += hits[i];
  // Expected share of the top 10%: zeta(100) / zeta(1000) ~ 0.68.
  EXPECT_NEAR(static_cast<double>(top) / kDraws, zeta(100, 0.99) / zeta(1000, 0.99), 0.03);
  EXPECT_GT(static_cast<double>(top) / kDraws, 0.6);
}

TEST(Generators, ZipfianItemCountCanGrow) {
  ZipfianGenerator z;
  ASSERT_TRUE(ZipfianGenerator::Create(10, 0.99, &z).ok());
  Rng rng(3);
  for (uint64_t n = 10; n < 3000; ++n) ASSERT_LT(z.next(rng, n), n);
  EXPECT_NEAR(z.zetan(), zeta(2999, 0.99), 1e-9);
  EXPECT_LT(z.next(rng, 5), 5u);  // shrinking recomputes
  EXPECT_NEAR(z.zetan(), zeta(5, 0.99), 1e-12);
}

TEST(Generators, InvalidParametersAreRejected) {
  ZipfianGenerator z;
  EXPECT_EQ(ZipfianGenerator::Create(0, 0.99, &z).code(), Code::kInvalidArgument);
  EXPECT_EQ(ZipfianGenerator::Create(10, 1.0, &z).code(), Code::kInvalidArgument);
  EXPECT_EQ(ZipfianGenerator::Create(10, 0.0, &z).code(), Code::kInvalidArgument);
  SelfSimilarGenerator s;
  EXPECT_EQ(SelfSimilarGenerator::Create(10, 1.0, &s).code(), Code::kInvalidArgument);
  ScrambledZipfianGenerator sz;
  EXPECT_EQ(ScrambledZipfianGenerator::Create(0, 0.99, &sz).code(), Code::kInvalidArgument);
}

TEST(Generators, ScrambledZipfianSpreadsHotKeysButKeepsSkew) {
  ScrambledZipfianGenerator z;
  ASSERT_TRUE(ScrambledZipfianGenerator::Create(1000, 0.99, &z).ok());
  Rng rng(11);
  std::vector<uint64_t> hits(1000, 0);
  const int kDraws = 100'000;
  for (int i = 0; i < kDraws; ++i) {
    const uint64_t v = z.next(rng);
    ASSERT_LT(v, 1000u);
    ++hits[v];
  }
  std::vector<uint64_t> order(1000);
  for (uint64_t i = 0; i < 1000; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](uint64_t a, uint64_t b) { return hits[a] > hits[b]; });
  // The 10 hottest items are not the 10 lowest indices: at most a few of
  // them fall in the lowest 10% (a random placement puts 1 there on average).
  int low = 0;
  for (int i = 0; i < 10; ++i) low += order[i] < 100;
  EXPECT_LE(low, 4);
  // The skew is kept, as YCSB's: item 0 of the 10^10-item space alone has
  // probability 1/ZETAN ~ 0.038 (vs uniform 0.001), and the 100 hottest
  // items get about zeta(100)/ZETAN + 0.1 * (1 - zeta(100)/ZETAN) ~ 0.28
  // (the tail of the large space spreads almost uniformly).
  EXPECT_GT(static_cast<double>(hits[order[0]]) / kDraws, 1.0 / 26.47);
  uint64_t top = 0;
  for (int i = 0; i < 100; ++i) top += hits[order[i]];
  const double head = zeta(100, 0.99) / ScrambledZipfianGenerator::kZetan099;
  EXPECT_NEAR(static_cast<double>(top) / kDraws, head + 0.1 * (1 - head), 0.03);
}

TEST(Generators, LatestFavoursNewestItems) {
  LatestGenerator g;
  ASSERT_TRUE(LatestGenerator::Create(1000, 0.99, &g).ok());
  Rng rng(5);
  std::vector<uint64_t> hits(1100, 0);
  for (int i = 0; i < 50'000; ++i) ++hits[g.next(rng)];
  EXPECT_EQ(std::max_element(hits.begin(), hits.end()) - hits.begin(), 999);
  uint64_t newest = 0;
  for (int i = 900; i < 1000; ++i) newest += hits[i];
  EXPECT_GT(newest / 50'000.0, 0.6);  // newest 10% of items
  // After 100 more items the newest one is the new favourite.
  for (int i = 0; i < 100; ++i) g.add_item();
  std::fill(hits.begin(), hits.end(), 0);
  for (int i = 0; i < 50'000; ++i) {
    const uint64_t v = g.next(rng);
    ASSERT_LT(v, 1100u);
    ++hits[v];
  }
  EXPECT_EQ(std::max_element(hits.begin(), hits.end()) - hits.begin(), 1099);
}

TEST(Generators, SelfSimilarPutsEightyPercentOnTwentyPercent) {
  SelfSimilarGenerator g;
  ASSERT_TRUE(SelfSimilarGenerator::Create(1000, 0.2, &g).ok());
  Rng rng(9);
  int low = 0;
  const int kDraws = 100'000;
  for (int i = 0; i < kDraws; ++i) {
    const uint64_t v = g.next(rng);
    ASSERT_LT(v, 1000u);
    low += v < 200;
  }
  EXPECT_NEAR(static_cast<double>(low) / kDraws, 0.8, 0.01);
}

TEST(Generators, UniformPassesChiSquare) {
  UniformGenerator g(100);
  Rng rng(123);
  std::vector<int> hits(100, 0);
  const int kDraws = 100'000;
  for (int i = 0; i < kDraws; ++i) {
    const uint64_t v = g.next(rng);
    ASSERT_LT(v, 100u);
    ++hits[v];
  }
  double chi2 = 0;
  const double expected = kDraws / 100.0;
  for (int h : hits) chi2 += (h - expected) * (h - expected) / expected;
  // 99 degrees of freedom: mean 99, standard deviation 14; 5 sigma bound.
  EXPECT_LT(chi2, 99 + 5 * 14);
  EXPECT_GT(chi2, 99 - 5 * 14);
  double sum = 0;
  for (int i = 0; i < 10'000; ++i) {
    const double d = rng.next_double();
    ASSERT_GE(d, 0.0);
    ASSERT_LT(d, 1.0);
    sum += d;
  }
  EXPECT_NEAR(sum / 10'000, 0.5, 0.02);
}

TEST(Generators, SequentialWrapsAround) {
  SequentialGenerator g(3, 2);
  EXPECT_EQ(g.next(), 2u);
  EXPECT_EQ(g.next(), 0u);
  EXPECT_EQ(g.next(), 1u);
  EXPECT_EQ(g.next(), 2u);
}

TEST(Generators, StreamsAreReproducibleAndDistinct) {
  Rng a = Rng::for_stream(1, 0), b = Rng::for_stream(1, 0), c = Rng::for_stream(1, 1),
      d = Rng::for_stream(2, 0);
  const uint64_t va = a.next();
  EXPECT_EQ(va, b.next());
  EXPECT_NE(va, c.next());
  EXPECT_NE(va, d.next());
}

// --- the key discipline ------------------------------------------------------

WorkloadSpec mixed_spec() {
  WorkloadSpec spec;
  spec.records = 2000;
  spec.operations = 10'003;
  spec.threads = 4;
  spec.read_ratio = 0.4;
  spec.insert_ratio = 0.2;
  spec.update_ratio = 0.1;
  spec.remove_ratio = 0.1;
  spec.scan_ratio = 0.1;
  spec.rmw_ratio = 0.1;
  spec.scan_size = 20;
  spec.distribution = Distribution::kZipfian;
  spec.seed = 99;
  return spec;
}

TEST(WorkloadKeys, ThreadSharesEvenInsertsFreshAndDisjoint) {
  WorkloadSpec spec = mixed_spec();
  Workload w;
  ASSERT_TRUE(make_workload(spec, &w).ok());
  ASSERT_EQ(w.per_thread.size(), 4u);
  ASSERT_EQ(w.load_keys.size(), 2000u);
  size_t lo = SIZE_MAX, hi = 0;
  for (const auto& ops : w.per_thread) {
    lo = std::min(lo, ops.size());
    hi = std::max(hi, ops.size());
  }
  EXPECT_LE(hi - lo, 1u);
  EXPECT_EQ(w.total_operations(), 10'003u);

  const std::unordered_set<uint64_t> loaded(w.load_keys.begin(), w.load_keys.end());
  EXPECT_EQ(loaded.size(), w.load_keys.size()) << "load keys must be distinct";
  EXPECT_EQ(loaded.count(0), 0u);
  std::unordered_map<uint64_t, unsigned> insert_owner;
  for (unsigned t = 0; t < 4; ++t) {
    for (const Operation& op : w.per_thread[t]) {
      if (op.type != OpType::kInsert) continue;
      EXPECT_EQ(op.expect, Expect::kFound);
      EXPECT_EQ(loaded.count(op.key), 0u) << "insert key was loaded";
      EXPECT_TRUE(insert_owner.emplace(op.key, t).second) << "insert key used twice";
    }
  }
  EXPECT_EQ(insert_owner.size(), 2001u);  // 20% of 10003, largest remainder
}

TEST(WorkloadKeys, RemovesUniqueReservedAndNeverTargeted) {
  WorkloadSpec spec = mixed_spec();
  Workload w;
  ASSERT_TRUE(make_workload(spec, &w).ok());
  const std::unordered_set<uint64_t> loaded(w.load_keys.begin(), w.load_keys.end());
  std::unordered_set<uint64_t> removed, targeted;
  for (const auto& ops : w.per_thread) {
    for (const Operation& op : ops) {
      EXPECT_EQ(op.expect, Expect::kFound);
      if (op.type == OpType::kRemove) {
        EXPECT_EQ(loaded.count(op.key), 1u);
        EXPECT_TRUE(removed.insert(op.key).second) << "key removed twice";
      } else if (op.type != OpType::kInsert) {
        EXPECT_EQ(loaded.count(op.key), 1u) << "read/update/scan/rmw of a key not loaded";
        targeted.insert(op.key);
      }
      if (op.type == OpType::kScan) {
        EXPECT_EQ(op.scan_length, 20u);
      }
    }
  }
  EXPECT_EQ(removed.size(), 1000u);
  for (uint64_t k : removed) EXPECT_EQ(targeted.count(k), 0u) << "a removed key is also read";
  // The reserved slice is the tail of the load order.
  for (size_t i = 1000; i < 2000; ++i) EXPECT_EQ(removed.count(w.load_keys[i]), 1u);
}

TEST(WorkloadKeys, LatestReadsOnlyExistingKeysAndFavoursOwnNewInserts) {
  WorkloadSpec spec;
  spec.records = 5000;
  spec.operations = 40'000;
  spec.threads = 2;
  ASSERT_TRUE(apply_preset("ycsb-d", &spec).ok());
  Workload w;
  ASSERT_TRUE(make_workload(spec, &w).ok());
  const std::unordered_set<uint64_t> loaded(w.load_keys.begin(), w.load_keys.end());
  uint64_t own_reads = 0, reads = 0;
  for (const auto& ops : w.per_thread) {
    std::unordered_set<uint64_t> own;
    for (const Operation& op : ops) {
      if (op.type == OpType::kInsert) {
        own.insert(op.key);
      } else {
        ASSERT_EQ(op.type, OpType::kRead);
        ++reads;
        const bool mine = own.count(op.key) > 0;
        own_reads += mine;
        EXPECT_TRUE(mine || loaded.count(op.key)) << "read of a key that does not exist yet";
      }
    }
  }
  // Own inserts are at most 1000 of the 5000+ items per thread, yet the
  // newest ones draw a large share of the reads.
  EXPECT_GT(static_cast<double>(own_reads) / reads, 0.4);
}

TEST(WorkloadKeys, SequentialKeysAndDistribution) {
  WorkloadSpec spec;
  spec.records = 10;
  spec.operations = 25;
  spec.threads = 1;
  spec.sequential_keys = true;
  spec.distribution = Distribution::kSequential;
  spec.read_ratio = 1.0;
  Workload w;
  ASSERT_TRUE(make_workload(spec, &w).ok());
  for (uint64_t i = 0; i < 10; ++i) EXPECT_EQ(w.load_keys[i], i + 1);
  for (size_t i = 0; i < 25; ++i) EXPECT_EQ(w.per_thread[0][i].key, i % 10 + 1);
}

TEST(WorkloadKeys, ZeroOperationsGivesEmptyStreams) {
  WorkloadSpec spec;
  spec.records = 5;
  spec.operations = 0;
  spec.threads = 3;
  Workload w;
  ASSERT_TRUE(make_workload(spec, &w).ok());
  EXPECT_EQ(w.per_thread.size(), 3u);
  EXPECT_EQ(w.total_operations(), 0u);
  EXPECT_EQ(w.load_keys.size(), 5u);
}

TEST(WorkloadKeys, SameSeedSameWorkloadOtherSeedDiffers) {
  WorkloadSpec spec = mixed_spec();
  Workload a, b, c;
  ASSERT_TRUE(make_workload(spec, &a).ok());
  ASSERT_TRUE(make_workload(spec, &b).ok());
  spec.seed = 100;
  ASSERT_TRUE(make_workload(spec, &c).ok());
  auto same = [](const Workload& x, const Workload& y) {
    if (x.load_keys != y.load_keys || x.per_thread.size() != y.per_thread.size()) return false;
    for (size_t t = 0; t < x.per_thread.size(); ++t) {
      const auto& p = x.per_thread[t];
      const auto& q = y.per_thread[t];
      if (p.size() != q.size()) return false;
      for (size_t i = 0; i < p.size(); ++i) {
        if (p[i].key != q[i].key || p[i].type != q[i].type || p[i].expect != q[i].expect ||
            p[i].scan_length != q[i].scan_length) {
          return false;
        }
      }
    }
    return true;
  };
  EXPECT_TRUE(same(a, b));
  EXPECT_FALSE(same(a, c));
}

// --- validation ------------------------------------------------------------

Status make_with(void (*edit)(WorkloadSpec*)) {
  WorkloadSpec spec;
  spec.records = 100;
  spec.operations = 100;
  edit(&spec);
  Workload w;
  return make_workload(spec, &w);
}

TEST(WorkloadValidation, BadSpecsAreInvalidArgument) {
  struct Case {
    const char* what;
    void (*edit)(WorkloadSpec*);
    const char* needle;
  };
  const Case cases[] = {
      {"sum above 1", [](WorkloadSpec* s) { s->update_ratio = 0.5; }, "sum to 1"},
      {"sum below 1", [](WorkloadSpec* s) { s->read_ratio = 0.5; }, "sum to 1"},
      {"negative", [](WorkloadSpec* s) { s->read_ratio = 1.5, s->update_ratio = -0.5; },
       "read_ratio"},
      {"nan", [](WorkloadSpec* s) { s->scan_ratio = std::nan(""); }, "scan_ratio"},
      {"threads 0", [](WorkloadSpec* s) { s->threads = 0; }, "threads"},
      {"records 0", [](WorkloadSpec* s) { s->records = 0; }, "records"},
      {"scan size 0", [](WorkloadSpec* s) { s->scan_size = 0; }, "scan_size"},
      {"zipf theta 1",
       [](WorkloadSpec* s) { s->distribution = Distribution::kZipfian, s->skew = 1.0; }, "zipfian"},
      {"latest theta 0",
       [](WorkloadSpec* s) { s->distribution = Distribution::kLatest, s->skew = 0.0; }, "latest"},
      {"selfsimilar h 1.5",
       [](WorkloadSpec* s) { s->distribution = Distribution::kSelfSimilar, s->skew = 1.5; },
       "self-similar"},
      {"too many removes",
       [](WorkloadSpec* s) { s->records = 10, s->read_ratio = 0.5, s->remove_ratio = 0.5; },
       "remove"},
      {"no target left",
       [](WorkloadSpec* s) { s->records = 50, s->read_ratio = 0.5, s->remove_ratio = 0.5; },
       "reserved for removes"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    Status s = make_with(c.edit);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find(c.needle), std::string::npos) << s.message();
  }
  // Within 1e-9 of 1 is accepted.
  EXPECT_TRUE(
      make_with([](WorkloadSpec* s) { s->read_ratio = 0.1 + 0.2, s->update_ratio = 0.7; }).ok());
  // Uniform ignores the skew.
  EXPECT_TRUE(make_with([](WorkloadSpec* s) { s->skew = 7.0; }).ok());
}

// --- keys files --------------------------------------------------------------

TEST(WorkloadKeysFile, GoodFileWithBlankLinesAndDuplicates) {
  const std::string path = write_file("good", "5\n\n  7 \r\n3\n5\n\n9");
  WorkloadSpec spec;
  spec.records = 1;  // replaced by the file's count
  spec.operations = 50;
  spec.read_ratio = 0.8;
  spec.insert_ratio = 0.2;
  spec.keys_file = path;
  Workload w;
  Status s = make_workload(spec, &w);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(w.load_keys, (std::vector<uint64_t>{5, 7, 3, 9}));
  EXPECT_EQ(w.duplicate_keys, 1u);
  EXPECT_EQ(w.spec.records, 4u);
  const std::set<uint64_t> loaded(w.load_keys.begin(), w.load_keys.end());
  for (const Operation& op : w.per_thread[0]) {
    if (op.type == OpType::kInsert) {
      EXPECT_EQ(loaded.count(op.key), 0u);
    } else {
      EXPECT_EQ(loaded.count(op.key), 1u);
    }
  }
  std::remove(path.c_str());
}

TEST(WorkloadKeysFile, InsertKeysAvoidFileKeysThatTheGeneratorWouldProduce) {
  // The file holds the first keys of YCSB's hashed order; inserts must skip them.
  std::string text;
  for (uint64_t i = 0; i < 20; ++i) text += std::to_string(fnv1a64(i)) + "\n";
  const std::string path = write_file("hashed", text);
  WorkloadSpec spec;
  spec.operations = 100;
  spec.threads = 2;
  spec.read_ratio = 0.5;
  spec.insert_ratio = 0.5;
  spec.keys_file = path;
  Workload w;
  ASSERT_TRUE(make_workload(spec, &w).ok());
  std::set<uint64_t> seen(w.load_keys.begin(), w.load_keys.end());
  EXPECT_EQ(seen.size(), 20u);
  for (const auto& ops : w.per_thread) {
    for (const Operation& op : ops) {
      if (op.type == OpType::kInsert) {
        EXPECT_TRUE(seen.insert(op.key).second);
      }
    }
  }
  EXPECT_EQ(seen.size(), 70u);
  std::remove(path.c_str());
}

TEST(WorkloadKeysFile, MalformedLineIsCorruptionWithLineNumber) {
  for (const char* bad :
       {"1\n2\nx3\n", "1\n2\n3 4\n", "1\n2\n18446744073709551616\n", "1\n2\n-3\n"}) {
    const std::string path = write_file("bad", bad);
    WorkloadSpec spec;
    spec.keys_file = path;
    spec.operations = 1;
    Workload w;
    Status s = make_workload(spec, &w);
    EXPECT_EQ(s.code(), Code::kCorruption) << bad;
    EXPECT_NE(s.message().find(path + ":3:"), std::string::npos) << s.message();
    EXPECT_TRUE(w.load_keys.empty());
    std::remove(path.c_str());
  }
}

TEST(WorkloadKeysFile, MissingAndEmptyFiles) {
  WorkloadSpec spec;
  spec.keys_file = temp_path("does_not_exist");
  Workload w;
  Status s = make_workload(spec, &w);
  EXPECT_EQ(s.code(), Code::kNotFound);
  EXPECT_NE(s.message().find(spec.keys_file), std::string::npos);
  const std::string path = write_file("empty", "\n\n");
  spec.keys_file = path;
  s = make_workload(spec, &w);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("no keys"), std::string::npos);
  std::remove(path.c_str());
}

// --- LB+-tree paper presets and dense inserts (issue 4) ----------------------

TEST(WorkloadPreset, LbtreePresetsSetRatiosDistributionAndPattern) {
  struct Case {
    const char* name;
    double read, insert, remove;
    InsertPattern pattern;
  };
  for (const Case& c : {Case{"insert", 0, 1, 0, InsertPattern::kRandom},
                        Case{"dense-insert", 0, 1, 0, InsertPattern::kDense},
                        Case{"search", 1, 0, 0, InsertPattern::kRandom},
                        Case{"delete", 0, 0, 1, InsertPattern::kRandom}}) {
    WorkloadSpec spec;
    spec.records = 5000;
    spec.operations = 3000;
    spec.threads = 2;
    spec.seed = 9;
    spec.dense_gap = 77;
    spec.insert_pattern = InsertPattern::kDense;  // reset by every preset but dense-insert
    spec.update_ratio = 0.5;                      // reset by every preset
    ASSERT_TRUE(apply_preset(c.name, &spec).ok()) << c.name;
    EXPECT_EQ(spec.name, c.name);
    EXPECT_EQ(spec.read_ratio, c.read) << c.name;
    EXPECT_EQ(spec.insert_ratio, c.insert) << c.name;
    EXPECT_EQ(spec.remove_ratio, c.remove) << c.name;
    EXPECT_EQ(spec.update_ratio, 0.0) << c.name;
    EXPECT_EQ(spec.scan_ratio + spec.rmw_ratio, 0.0) << c.name;
    EXPECT_EQ(spec.distribution, Distribution::kUniform) << c.name;
    EXPECT_EQ(spec.insert_pattern, c.pattern) << c.name;
    EXPECT_EQ(spec.records, 5000u);
    EXPECT_EQ(spec.operations, 3000u);
    EXPECT_EQ(spec.threads, 2u);
    EXPECT_EQ(spec.seed, 9u);
    EXPECT_EQ(spec.dense_gap, 77u);

    Workload w;
    Status st = make_workload(spec, &w);
    ASSERT_TRUE(st.ok()) << c.name << ": " << st.ToString();
    const auto counts = count_types(w);
    EXPECT_EQ(counts[static_cast<int>(OpType::kRead)], c.read * 3000) << c.name;
    EXPECT_EQ(counts[static_cast<int>(OpType::kInsert)], c.insert * 3000) << c.name;
    EXPECT_EQ(counts[static_cast<int>(OpType::kRemove)], c.remove * 3000) << c.name;
    // Reads and removes target loaded keys; inserts never do.
    const std::unordered_set<uint64_t> loaded(w.load_keys.begin(), w.load_keys.end());
    std::unordered_set<uint64_t> removed;
    for (const auto& ops : w.per_thread) {
      for (const Operation& op : ops) {
        EXPECT_EQ(op.expect, Expect::kFound);
        EXPECT_EQ(loaded.count(op.key) > 0, op.type != OpType::kInsert) << c.name;
        if (op.type == OpType::kRemove) {
          EXPECT_TRUE(removed.insert(op.key).second);
        }
      }
    }
  }
}

TEST(WorkloadPreset, UnknownPresetListsTheLbtreeOnes) {
  WorkloadSpec spec;
  Status s = apply_preset("dense", &spec);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  for (const char* n : {"'dense'", "ycsb-f", "insert", "dense-insert", "search", "delete"}) {
    EXPECT_NE(s.message().find(n), std::string::npos) << s.message();
  }
  for (std::string_view n : kPresetNames) EXPECT_TRUE(apply_preset(n, &spec).ok()) << n;
}

TEST(WorkloadPreset, DeleteNeedsAsManyLoadedKeys) {
  WorkloadSpec spec;
  spec.records = 100;
  spec.operations = 101;
  ASSERT_TRUE(apply_preset("delete", &spec).ok());
  Workload w;
  Status s = make_workload(spec, &w);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("101 remove operations"), std::string::npos) << s.message();
  spec.operations = 100;  // every loaded key removed, none read: fine
  EXPECT_TRUE(make_workload(spec, &w).ok());
}

TEST(WorkloadNames, InsertPatternRoundTrip) {
  for (InsertPattern p : {InsertPattern::kRandom, InsertPattern::kDense}) {
    InsertPattern q = InsertPattern::kRandom;
    ASSERT_TRUE(parse_insert_pattern(insert_pattern_name(p), &q).ok());
    EXPECT_EQ(p, q);
  }
  InsertPattern q;
  Status s = parse_insert_pattern("sequential", &q);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("random or dense"), std::string::npos) << s.message();
}

/// Checks the dense layout: thread t's inserts are base + t * span + 0, 1,
/// 2, ... in stream order, with base = largest loaded key + 1.
void expect_dense(const Workload& w, uint64_t span) {
  const uint64_t base = *std::max_element(w.load_keys.begin(), w.load_keys.end()) + 1;
  for (unsigned t = 0; t < w.per_thread.size(); ++t) {
    uint64_t j = 0;
    for (const Operation& op : w.per_thread[t]) {
      if (op.type != OpType::kInsert) continue;
      EXPECT_EQ(op.key, base + t * span + j) << "thread " << t << " insert " << j;
      EXPECT_EQ(op.expect, Expect::kFound);
      ++j;
    }
  }
}

TEST(WorkloadKeys, DenseInsertsAscendInDisjointRegionsAboveTheLoadedKeys) {
  for (bool sequential : {false, true}) {
    WorkloadSpec spec;
    spec.records = 1000;
    spec.operations = 900;
    spec.threads = 3;
    spec.sequential_keys = sequential;
    ASSERT_TRUE(apply_preset("dense-insert", &spec).ok());
    Workload w;
    ASSERT_TRUE(make_workload(spec, &w).ok());
    ASSERT_EQ(w.per_thread.size(), 3u);
    for (const auto& ops : w.per_thread) EXPECT_EQ(ops.size(), 300u);
    expect_dense(w, 300);  // span = the per-thread insert count: regions touch
    // The same load keys as a random-insert workload of the same spec.
    WorkloadSpec random = spec;
    random.insert_pattern = InsertPattern::kRandom;
    Workload wr;
    ASSERT_TRUE(make_workload(random, &wr).ok());
    EXPECT_EQ(w.load_keys, wr.load_keys);

    // A gap larger than the insert count spreads the regions apart.
    spec.dense_gap = 1'000'000;
    ASSERT_TRUE(make_workload(spec, &w).ok());
    expect_dense(w, 1'000'000);
  }
}

TEST(WorkloadKeys, DenseInsertsMixedWithReads) {
  WorkloadSpec spec;
  spec.records = 2000;
  spec.operations = 1001;  // uneven shares: span = the largest share's inserts
  spec.threads = 2;
  spec.read_ratio = 0.5;
  spec.insert_ratio = 0.5;
  spec.insert_pattern = InsertPattern::kDense;
  Workload w;
  ASSERT_TRUE(make_workload(spec, &w).ok());
  uint64_t most = 0;
  for (const auto& ops : w.per_thread) {
    most = std::max<uint64_t>(most, std::count_if(ops.begin(), ops.end(), [](const Operation& op) {
                                return op.type == OpType::kInsert;
                              }));
  }
  expect_dense(w, most);
  const std::unordered_set<uint64_t> loaded(w.load_keys.begin(), w.load_keys.end());
  for (const auto& ops : w.per_thread) {
    for (const Operation& op : ops) {
      if (op.type == OpType::kRead) {
        EXPECT_TRUE(loaded.count(op.key));
      }
    }
  }
}

TEST(WorkloadKeys, DenseInsertsPastUint64MaxAreInvalidArgument) {
  // The largest loaded key leaves 10 keys of room: 2 threads x 5 inserts fit
  // exactly, 2 x 6 do not.
  const uint64_t top = UINT64_MAX - 10;
  const std::string path = write_file("dense_top", "5\n" + std::to_string(top) + "\n");
  WorkloadSpec spec;
  spec.keys_file = path;
  spec.threads = 2;
  spec.operations = 10;
  ASSERT_TRUE(apply_preset("dense-insert", &spec).ok());
  Workload w;
  Status s = make_workload(spec, &w);
  ASSERT_TRUE(s.ok()) << s.ToString();
  expect_dense(w, 5);
  EXPECT_EQ(w.per_thread[1].back().key, UINT64_MAX);
  spec.operations = 12;
  s = make_workload(spec, &w);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("overflow"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(std::to_string(top)), std::string::npos) << s.message();
  EXPECT_TRUE(w.per_thread.empty());
  // A gap that overflows with few inserts is refused the same way.
  spec.operations = 2;
  spec.dense_gap = UINT64_MAX / 2;
  EXPECT_EQ(make_workload(spec, &w).code(), Code::kInvalidArgument);
  std::remove(path.c_str());
}

TEST(WorkloadKeys, DenseInsertsWithATraceAreInvalidArgument) {
  const std::string path = write_file("dense_trace", "INSERT 5\nINSERT 7\n");
  WorkloadSpec spec;
  spec.trace_load = path;
  spec.insert_pattern = InsertPattern::kDense;
  Workload w;
  Status s = make_workload(spec, &w);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("dense"), std::string::npos) << s.message();
  std::remove(path.c_str());
}

// --- string keys (bench/string_keys.h) -----------------------------------------

TEST(StringKeys, FormattedKeysHaveTheSizeThePrefixAndTheIdsOrder) {
  std::vector<uint64_t> ids = {0, 1, 9, 10, 99, 12345, 1ull << 40, UINT64_MAX - 1, UINT64_MAX};
  for (uint64_t i = 0; i < 1000; ++i) ids.push_back(i * 0x9E3779B97F4A7C15ull);
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  for (uint32_t size : {24u, 25u, 40u, 255u}) {
    SCOPED_TRACE(size);
    std::string prev;
    for (uint64_t id : ids) {
      const std::string k = formatted_string_key(id, size);
      ASSERT_EQ(k.size(), size);
      EXPECT_EQ(k.substr(0, 4), "user");
      EXPECT_EQ(std::stoull(k.substr(4)), id) << k;
      if (!prev.empty()) {
        EXPECT_LT(prev, k) << "order not preserved";
      }
      prev = k;
    }
  }
  EXPECT_EQ(formatted_string_key(42, 24), "user00000000000000000042");
  EXPECT_EQ(formatted_string_key(42, 28), "user000000000000000000000042");
  EXPECT_EQ(formatted_string_key(7, 5), "user7");
  EXPECT_EQ(max_formatted_id(5), 9u);
  EXPECT_EQ(max_formatted_id(12), 99'999'999u);
  EXPECT_EQ(max_formatted_id(23), 9'999'999'999'999'999'999ull);
  EXPECT_EQ(max_formatted_id(24), UINT64_MAX);
  EXPECT_TRUE(check_string_key_size(5).ok());
  EXPECT_TRUE(check_string_key_size(255).ok());
  EXPECT_EQ(check_string_key_size(4).code(), Code::kInvalidArgument);
  EXPECT_EQ(check_string_key_size(256).code(), Code::kInvalidArgument);
}

TEST(StringKeys, KeyListLaysOutTableAndFormattedKeysWithTheirHashes) {
  const std::vector<std::string> table = {"apple", "banana", "cherry"};
  const StringKeyNames names{table, 10};
  const std::vector<uint64_t> ids = {2, 77, 1, 3, 4};
  StringKeyList list;
  list.build(names, ids.size(), [&](size_t i) { return ids[i]; });
  ASSERT_EQ(list.size(), 5u);
  EXPECT_EQ(list.view(0), "banana");
  EXPECT_EQ(list.view(1), "user000077");
  EXPECT_EQ(list.view(2), "apple");
  EXPECT_EQ(list.view(3), "cherry");
  EXPECT_EQ(list.view(4), "user000004");
  for (size_t i = 0; i < list.size(); ++i) {
    EXPECT_EQ(list.hash(i), string_key_hash(list.view(i)));
    EXPECT_EQ(names.key_of(ids[i]), list.view(i));
  }
  EXPECT_NE(string_key_hash("apple"), string_key_hash("apples"));
}

TEST(StringKeys, InternerRanksKeysInByteOrder) {
  StringKeyInterner in;
  bool fresh = false;
  EXPECT_EQ(in.intern("b", &fresh), 1u);
  EXPECT_TRUE(fresh);
  EXPECT_EQ(in.intern("a\xff"), 2u);
  EXPECT_EQ(in.intern("a"), 3u);
  EXPECT_EQ(in.intern("b", &fresh), 1u);
  EXPECT_FALSE(fresh);
  for (int i = 0; i < 100; ++i) in.intern("k" + std::to_string(i));  // forces rehashes
  std::vector<std::string> table;
  const std::vector<uint64_t> remap = in.finish(&table);
  ASSERT_EQ(table.size(), 103u);
  EXPECT_TRUE(std::is_sorted(table.begin(), table.end()));
  EXPECT_EQ(table[remap[3] - 1], "a");
  EXPECT_EQ(table[remap[2] - 1], "a\xff");  // bytes compare unsigned: 0xff after 'a' alone
  EXPECT_EQ(table[remap[1] - 1], "b");
  EXPECT_LT(remap[3], remap[2]);
}

TEST(StringKeys, GeneratedWorkloadKeepsItsIdsAndChecksTheyFit) {
  WorkloadSpec spec;
  spec.records = 500;
  spec.operations = 500;
  spec.key_type = KeyType::kString;
  ASSERT_TRUE(apply_preset("ycsb-e", &spec).ok());
  EXPECT_EQ(spec.key_type, KeyType::kString) << "a preset keeps the key type";
  Workload w;
  ASSERT_TRUE(make_workload(spec, &w).ok());
  EXPECT_TRUE(w.key_strings.empty());
  // Hashed ids need 24 bytes: 12 is refused, naming the size that fits.
  spec.key_size = 12;
  Status s = make_workload(spec, &w);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("use --key-size 2"), std::string::npos) << s.message();
  // Sequential ids 1..records + inserts fit 12 bytes.
  spec.sequential_keys = true;
  s = make_workload(spec, &w);
  ASSERT_TRUE(s.ok()) << s.ToString();
  spec.key_size = 4;
  EXPECT_EQ(make_workload(spec, &w).code(), Code::kInvalidArgument);
}

TEST(StringKeys, KeysFileOfWordsBecomesASortedTableWithRankIds) {
  const std::string path = ::testing::TempDir() + "nvindex_words_" + std::to_string(getpid());
  std::ofstream(path, std::ios::binary) << "pear\nApple\r\n\napple\npear\nzebra\n";
  WorkloadSpec spec;
  spec.key_type = KeyType::kString;
  spec.keys_file = path;
  spec.operations = 100;
  ASSERT_TRUE(apply_preset("ycsb-e", &spec).ok());
  Workload w;
  Status s = make_workload(spec, &w);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(w.key_strings, (std::vector<std::string>{"Apple", "apple", "pear", "zebra"}));
  EXPECT_EQ(w.duplicate_keys, 1u);
  EXPECT_EQ(w.load_keys, (std::vector<uint64_t>{3, 1, 2, 4}));  // file order, rank ids
  // Inserts of ycsb-e are fresh ids past the table: formatted keys.
  const StringKeyNames names = w.string_key_names();
  uint64_t inserts = 0;
  for (const auto& ops : w.per_thread) {
    for (const Operation& op : ops) {
      if (op.type != OpType::kInsert) continue;
      ++inserts;
      EXPECT_GT(op.key, 4u);
      EXPECT_EQ(names.key_of(op.key).substr(0, 4), "user");
    }
  }
  EXPECT_GT(inserts, 0u);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace nvindex::bench
