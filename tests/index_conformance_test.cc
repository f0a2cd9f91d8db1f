// The conformance suite: everything that is the same for every index, run
// over every registered index (tests/support/model_check.h,
// registered_index_cases: each node size its entry allows and each
// non-default value of each option it declares). A new index is tested here
// by being registered; its own test file keeps only what is specific to its
// design (layout, line writes, its own SMOs and recovery cases). The
// concurrent half of the suite is tests/index_concurrent_test.cc (run again
// under ThreadSanitizer).
//
// What every index must do (include/nvindex/index.h):
// - match a std::map under random inserts, updates, removes, lookups, scans
//   and find_last_less_than, over dense and sparse keys (MapModel*);
// - take key 0, UINT64_MAX and value 0 like any other, refuse a duplicate
//   insert and an update or remove of an absent key and change nothing
//   (EdgeKeysValuesAndAbsentKeys);
// - answer scans and find_last_less_than at every boundary (empty index,
//   before the first key, on and between keys, after the last one, count 0);
// - bulk load at fill factors 0.5, 0.7 and 1, keep working after it, and
//   refuse unsorted input or a non-empty index without changing anything;
// - refuse an unknown option, a fill factor out of (0, 1], and (persistent
//   ones) a missing pool or a pool of another layout, with InvalidArgument;
// - describe itself: its registry name and capabilities, its node size;
// - persistent ones: keep every key across a clean close and reopen (twice,
//   with work in between), and on a full pool return OutOfSpace, lose
//   nothing, and reopen with every key.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "nvindex/index.h"
#include "nvindex/pm/pool.h"
#include "support/model_check.h"

namespace nvindex {
namespace {

using testing::expect_equals_model;
using testing::FileIndex;
using testing::IndexCase;
using testing::options_for;
using testing::TestIndex;

constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
using Pairs = std::vector<std::pair<uint64_t, Value>>;
using Model = std::map<uint64_t, Value>;

class Conformance : public ::testing::TestWithParam<IndexCase> {
 protected:
  const IndexCase& c() const { return GetParam(); }
  const IndexEntry& entry() const { return *find_index_entry(c().name); }
  bool persistent() const { return entry().caps.persistent; }

  /// A fresh index of this case in an anonymous pool of pool_bytes (when
  /// persistent), with the given fill factor.
  void open(TestIndex* t, double fill_factor = 1.0, uint64_t pool_bytes = 64ull << 20) {
    IndexOptions o = options_for(c());
    o.fill_factor = fill_factor;
    Status s = testing::open_test_index(c().name, o, t, pool_bytes);
    ASSERT_TRUE(s.ok()) << c().label << ": " << s.ToString();
  }

  /// A seed that differs between cases and is the same in every run.
  uint64_t seed() const { return std::hash<std::string>{}(c().label) % 100000; }
};

TEST_P(Conformance, MapModelDenseKeys) {
  TestIndex t;
  ASSERT_NO_FATAL_FAILURE(open(&t));
  // About ten nodes' worth of keys per 1 KiB of node size: splits and merges
  // at several levels for small nodes, at least one level for large ones.
  const uint64_t key_space = std::max<uint64_t>(4000, uint64_t{c().node_size} * 10);
  testing::run_model_test(*t.index, seed(), 20000, key_space);
}

TEST_P(Conformance, MapModelSparseKeys) {
  TestIndex t;
  ASSERT_NO_FATAL_FAILURE(open(&t));
  testing::run_model_test(*t.index, seed() + 1, 8000, 1ull << 62);
}

TEST_P(Conformance, EdgeKeysValuesAndAbsentKeys) {
  TestIndex t;
  ASSERT_NO_FATAL_FAILURE(open(&t));
  Index<uint64_t>& idx = *t.index;
  Model model;
  // Values 0 and UINT64_MAX and one value repeated for many keys: a design
  // that uses 0 as "empty" or compares values to find duplicates breaks here.
  const Value values[] = {0, 7, kMax};
  for (uint64_t k : {uint64_t{0}, uint64_t{1}, kMax - 1, kMax}) {
    ASSERT_TRUE(idx.insert(k, values[k % 3]).ok()) << k;
    model[k] = values[k % 3];
  }
  for (uint64_t k = 1; k <= 600; ++k) {
    ASSERT_TRUE(idx.insert(k * 3, values[k % 3]).ok()) << k;
    model[k * 3] = values[k % 3];
  }
  for (const auto& [k, v] : model) ASSERT_EQ(idx.lookup(k), std::optional<Value>(v)) << k;
  for (uint64_t k = 1; k <= 600; ++k) EXPECT_FALSE(idx.lookup(k * 3 + 1).has_value()) << k;
  EXPECT_FALSE(idx.lookup(kMax - 2).has_value());

  // A duplicate insert, an update or remove of an absent key: refused,
  // nothing changed.
  for (uint64_t k : {uint64_t{0}, uint64_t{3}, kMax}) {
    EXPECT_EQ(idx.insert(k, 12345).code(), Code::kAlreadyExists) << k;
    EXPECT_EQ(idx.lookup(k), std::optional<Value>(model[k])) << k;
  }
  for (uint64_t k : {uint64_t{2}, uint64_t{4}, kMax - 2}) {
    EXPECT_EQ(idx.update(k, 1).code(), Code::kNotFound) << k;
    EXPECT_EQ(idx.remove(k).code(), Code::kNotFound) << k;
    EXPECT_FALSE(idx.lookup(k).has_value()) << k;
  }
  ASSERT_NO_FATAL_FAILURE(expect_equals_model(idx, model));

  // Updates to 0 and UINT64_MAX, removal of the edge keys and every other
  // key, a second remove of each, then re-insertion.
  ASSERT_TRUE(idx.update(kMax, 0).ok());
  ASSERT_TRUE(idx.update(0, kMax).ok());
  model[kMax] = 0;
  model[0] = kMax;
  for (uint64_t k : {uint64_t{1}, kMax - 1}) {
    ASSERT_TRUE(idx.remove(k).ok()) << k;
    EXPECT_EQ(idx.remove(k).code(), Code::kNotFound) << k;
    model.erase(k);
  }
  for (uint64_t k = 1; k <= 600; k += 2) {
    ASSERT_TRUE(idx.remove(k * 3).ok()) << k;
    EXPECT_EQ(idx.remove(k * 3).code(), Code::kNotFound) << k;
    model.erase(k * 3);
  }
  ASSERT_NO_FATAL_FAILURE(expect_equals_model(idx, model));
  ASSERT_TRUE(idx.insert(kMax - 1, 5).ok());
  ASSERT_TRUE(idx.insert(3, 0).ok());
  model[kMax - 1] = 5;
  model[3] = 0;
  ASSERT_NO_FATAL_FAILURE(expect_equals_model(idx, model));
}

TEST_P(Conformance, ScansAndFindLastLessThanAtBoundaries) {
  TestIndex t;
  ASSERT_NO_FATAL_FAILURE(open(&t));
  Index<uint64_t>& idx = *t.index;
  Pairs out = {{99, 99}};  // scan() must clear what was there
  if (!idx.info().caps.ordered) {
    ASSERT_TRUE(idx.insert(5, 5).ok());
    EXPECT_EQ(idx.scan(0, 10, &out), 0u);
    EXPECT_TRUE(out.empty());
    EXPECT_FALSE(idx.find_last_less_than(kMax).has_value());
    return;
  }
  // Empty index.
  EXPECT_EQ(idx.scan(0, 10, &out), 0u);
  EXPECT_TRUE(out.empty());
  EXPECT_FALSE(idx.find_last_less_than(0).has_value());
  EXPECT_FALSE(idx.find_last_less_than(kMax).has_value());

  // Keys 10, 20, ..., 10 n over many leaves at every node size.
  const uint64_t n = 700;
  for (uint64_t i = n; i >= 1; --i) ASSERT_TRUE(idx.insert(i * 10, i).ok());
  auto expect_scan = [&](uint64_t start, size_t count, uint64_t first, size_t want) {
    out = {{99, 99}};
    ASSERT_EQ(idx.scan(start, count, &out), want) << "scan(" << start << ", " << count << ")";
    ASSERT_EQ(out.size(), want);
    for (size_t i = 0; i < want; ++i) {
      ASSERT_EQ(out[i].first, first + 10 * i) << "scan(" << start << ") pair " << i;
      ASSERT_EQ(out[i].second, out[i].first / 10);
    }
  };
  expect_scan(0, 5, 10, 5);
  expect_scan(10, 1, 10, 1);
  expect_scan(11, 1, 20, 1);
  expect_scan(15, 3, 20, 3);
  expect_scan(n * 10, 10, n * 10, 1);
  expect_scan(n * 10 + 1, 10, 0, 0);
  expect_scan(kMax, 10, 0, 0);
  expect_scan(5, 0, 0, 0);
  expect_scan(0, n + 100, 10, n);
  expect_scan(n * 5, n, n * 5, n / 2 + 1);

  auto fllt = [&](uint64_t key) { return idx.find_last_less_than(key); };
  EXPECT_FALSE(fllt(0).has_value());
  EXPECT_FALSE(fllt(10).has_value());
  EXPECT_EQ(fllt(11), std::make_optional(std::pair<uint64_t, Value>{10, 1}));
  EXPECT_EQ(fllt(20), std::make_optional(std::pair<uint64_t, Value>{10, 1}));
  EXPECT_EQ(fllt(21), std::make_optional(std::pair<uint64_t, Value>{20, 2}));
  EXPECT_EQ(fllt(n * 10), std::make_optional(std::pair<uint64_t, Value>{n * 10 - 10, n - 1}));
  EXPECT_EQ(fllt(kMax), std::make_optional(std::pair<uint64_t, Value>{n * 10, n}));
  // Every key's predecessor, across every leaf boundary.
  for (uint64_t i = 2; i <= n; ++i) {
    ASSERT_EQ(fllt(i * 10 - 5), std::make_optional(std::pair<uint64_t, Value>{i * 10 - 10, i - 1}))
        << i;
  }

  // The edge keys.
  ASSERT_TRUE(idx.insert(0, 0).ok());
  ASSERT_TRUE(idx.insert(kMax, 1).ok());
  EXPECT_EQ(fllt(1), std::make_optional(std::pair<uint64_t, Value>{0, 0}));
  EXPECT_EQ(fllt(10), std::make_optional(std::pair<uint64_t, Value>{0, 0}));
  EXPECT_EQ(fllt(kMax), std::make_optional(std::pair<uint64_t, Value>{n * 10, n}));
  out.clear();
  ASSERT_EQ(idx.scan(kMax, 5, &out), 1u);
  EXPECT_EQ(out[0], (std::pair<uint64_t, Value>{kMax, 1}));
  ASSERT_EQ(idx.scan(0, 2, &out), 2u);
  EXPECT_EQ(out[0], (std::pair<uint64_t, Value>{0, 0}));
  EXPECT_EQ(out[1], (std::pair<uint64_t, Value>{10, 1}));

  // After removing every other key, scans skip the holes.
  for (uint64_t i = 1; i <= n; i += 2) ASSERT_TRUE(idx.remove(i * 10).ok());
  out.clear();
  ASSERT_EQ(idx.scan(1, 3, &out), 3u);
  EXPECT_EQ(out[0].first, 20u);
  EXPECT_EQ(out[1].first, 40u);
  EXPECT_EQ(out[2].first, 60u);
  EXPECT_EQ(fllt(30), std::make_optional(std::pair<uint64_t, Value>{20, 2}));
}

TEST_P(Conformance, BulkLoadAtFillFactors) {
  for (double fill : {0.5, 0.7, 1.0}) {
    SCOPED_TRACE("fill factor " + std::to_string(fill));
    TestIndex t;
    ASSERT_NO_FATAL_FAILURE(open(&t, fill));
    Index<uint64_t>& idx = *t.index;
    Pairs sorted;
    Model model;
    for (uint64_t k = 0; k < 6000; ++k) {
      sorted.emplace_back(k * 4 + 2, k);
      model[k * 4 + 2] = k;
    }
    sorted.emplace_back(kMax, 0);
    model[kMax] = 0;
    Status s = idx.bulk_load(sorted);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_NO_FATAL_FAILURE(expect_equals_model(idx, model));
    EXPECT_FALSE(idx.lookup(0).has_value());
    EXPECT_FALSE(idx.lookup(3).has_value());
    // A bulk-loaded index is a normal index: inserts between the loaded
    // keys (splits of partly filled and full nodes), removes, updates.
    for (uint64_t k = 0; k < 6000; k += 3) {
      ASSERT_TRUE(idx.insert(k * 4 + 1, ~k).ok()) << k;
      model[k * 4 + 1] = ~k;
    }
    for (uint64_t k = 0; k < 6000; k += 5) {
      ASSERT_TRUE(idx.remove(k * 4 + 2).ok()) << k;
      model.erase(k * 4 + 2);
    }
    ASSERT_TRUE(idx.update(kMax, 9).ok());
    model[kMax] = 9;
    ASSERT_NO_FATAL_FAILURE(expect_equals_model(idx, model));
    // A non-empty index refuses a bulk load and keeps what it has.
    const Pairs more = {{1ull << 40, 1}};
    EXPECT_EQ(idx.bulk_load(more).code(), Code::kInvalidArgument);
    EXPECT_FALSE(idx.lookup(1ull << 40).has_value());
    ASSERT_NO_FATAL_FAILURE(expect_equals_model(idx, model));
  }
}

TEST_P(Conformance, BulkLoadRefusesBadInputAndChangesNothing) {
  const Pairs unsorted = {{1, 1}, {3, 3}, {2, 2}};
  const Pairs duplicate = {{1, 1}, {2, 2}, {2, 3}};
  for (const Pairs* bad : {&unsorted, &duplicate}) {
    TestIndex t;
    ASSERT_NO_FATAL_FAILURE(open(&t));
    EXPECT_EQ(t.index->bulk_load(*bad).code(), Code::kInvalidArgument);
    // The index holds no key from the refused input (a per-key default bulk
    // load checks the order before inserting anything).
    ASSERT_NO_FATAL_FAILURE(expect_equals_model(*t.index, {}));
    // ... and still takes a valid load.
    ASSERT_TRUE(t.index->bulk_load(Pairs{{4, 4}, {5, 5}}).ok());
    ASSERT_NO_FATAL_FAILURE(expect_equals_model(*t.index, {{4, 4}, {5, 5}}));
  }
  TestIndex t;
  ASSERT_NO_FATAL_FAILURE(open(&t));
  EXPECT_TRUE(t.index->bulk_load(Pairs{}).ok());
  ASSERT_NO_FATAL_FAILURE(expect_equals_model(*t.index, {}));
  // An index emptied by removes is empty: it takes a bulk load.
  for (uint64_t k = 0; k < 2000; ++k) ASSERT_TRUE(t.index->insert(k * 5, k).ok());
  for (uint64_t k = 0; k < 2000; ++k) ASSERT_TRUE(t.index->remove(k * 5).ok());
  Pairs load;
  Model model;
  for (uint64_t k = 0; k < 3000; ++k) {
    load.emplace_back(k * 3 + 1, k);
    model[k * 3 + 1] = k;
  }
  Status s = t.index->bulk_load(load);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_NO_FATAL_FAILURE(expect_equals_model(*t.index, model));
}

TEST_P(Conformance, BadOptionsAreInvalidArgument) {
  std::unique_ptr<pm::Pool> pool;
  auto attempt = [&](IndexOptions o) {
    if (persistent()) {
      pool.reset();
      EXPECT_TRUE(pm::Pool::create_anonymous(16ull << 20, c().name, &pool).ok());
      o.pool = pool.get();
    }
    std::unique_ptr<Index<uint64_t>> idx;
    Status s = make_index<uint64_t>(c().name, o, &idx);
    EXPECT_EQ(idx, nullptr);
    return s;
  };
  IndexOptions o = options_for(c());
  o.extra["no-such-option"] = "1";
  Status s = attempt(o);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("no-such-option"), std::string::npos) << s.ToString();

  for (double bad : {0.0, -0.5, 1.01, 2.0, std::nan("")}) {
    o = options_for(c());
    o.fill_factor = bad;
    s = attempt(o);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << bad << ": " << s.ToString();
    EXPECT_NE(s.message().find("fill_factor"), std::string::npos) << s.ToString();
  }

  if (!persistent()) return;
  std::unique_ptr<Index<uint64_t>> idx;
  s = make_index<uint64_t>(c().name, options_for(c()), &idx);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << "no pool: " << s.ToString();
  EXPECT_NE(s.message().find("pool"), std::string::npos) << s.ToString();
  ASSERT_TRUE(pm::Pool::create_anonymous(16ull << 20, "another-layout", &pool).ok());
  o = options_for(c());
  o.pool = pool.get();
  s = make_index<uint64_t>(c().name, o, &idx);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("layout"), std::string::npos) << s.ToString();
  EXPECT_EQ(pool->root(), 0u) << "a refused index wrote its root into a foreign pool";
}

TEST_P(Conformance, InfoDescribesTheInstance) {
  TestIndex t;
  ASSERT_NO_FATAL_FAILURE(open(&t));
  const IndexInfo i = t.index->info();
  EXPECT_EQ(i.name, c().name);
  // An instance may add what its options chose (wbtree: "; inner nodes in
  // DRAM"); its capabilities are checked against the entry by
  // index_registry_test (CapsOfEveryIndexAreItsEntrys).
  EXPECT_TRUE(i.description.starts_with(entry().description)) << i.description;
  if (c().node_size != 0) {
    EXPECT_EQ(i.node_size, c().node_size);
  }
  EXPECT_FALSE(i.recovered);
  EXPECT_EQ(i.recovery_seconds, 0.0);
  if (persistent()) {
    EXPECT_GT(i.pm_bytes, 0u);
  } else {
    EXPECT_EQ(i.pm_bytes, 0u);
  }
  // Footprint grows with the keys.
  for (uint64_t k = 0; k < 20000; ++k) ASSERT_TRUE(t.index->insert(k, k).ok());
  const IndexInfo full = t.index->info();
  EXPECT_GT(full.pm_bytes + full.dram_bytes, i.pm_bytes + i.dram_bytes);
}

/// Random inserts, updates and removes, applied to the index and the model.
void random_work(Index<uint64_t>& idx, Model* model, uint64_t seed, int ops, uint64_t key_space) {
  std::mt19937_64 rng(seed);
  for (int i = 0; i < ops; ++i) {
    const uint64_t k = rng() % key_space;
    const Value v = rng();
    const bool present = model->count(k) == 1;
    switch (rng() % 4) {
      case 0:
        ASSERT_EQ(idx.remove(k).ok(), present) << k;
        model->erase(k);
        break;
      case 1:
        ASSERT_EQ(idx.update(k, v).ok(), present) << k;
        if (present) (*model)[k] = v;
        break;
      default:
        ASSERT_EQ(idx.insert(k, v).ok(), !present) << k;
        model->emplace(k, v);
    }
  }
}

// The persistent half: the same cases, persistent indexes only.
class PersistentConformance : public Conformance {};

TEST_P(PersistentConformance, ReopenKeepsEveryKey) {
  FileIndex f(c().name);
  ASSERT_TRUE(f.create(options_for(c())).ok());
  Model model;
  ASSERT_NO_FATAL_FAILURE(random_work(*f.index, &model, seed(), 30000, 40000));
  const uint32_t node_size = f.index->info().node_size;
  // Reopen with another node size than the one created: the size stored in
  // the pool wins.
  IndexOptions reopen_options;
  reopen_options.extra = c().extra;
  reopen_options.node_size = c().node_size == 256 ? 512 : 256;
  Status s = f.reopen(reopen_options);
  ASSERT_TRUE(s.ok()) << s.ToString();
  const IndexInfo info = f.index->info();
  EXPECT_TRUE(info.recovered);
  EXPECT_GT(info.recovery_seconds, 0.0);
  EXPECT_EQ(info.node_size, node_size);
  ASSERT_NO_FATAL_FAILURE(expect_equals_model(*f.index, model));
  // The recovered index keeps working (splits, merges, reuse of space) and
  // survives a second reopen.
  ASSERT_NO_FATAL_FAILURE(random_work(*f.index, &model, seed() + 1, 30000, 60000));
  s = f.reopen(reopen_options);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_NO_FATAL_FAILURE(expect_equals_model(*f.index, model));
}

TEST_P(PersistentConformance, FullPoolLosesNothing) {
  FileIndex f(c().name);
  ASSERT_TRUE(f.create(options_for(c()), pm::kMinPoolSize).ok());
  Index<uint64_t>& idx = *f.index;
  // Keys in a scattered order (an odd multiplier is a bijection), so leaves
  // split at random points and many hold free slots when the pool is full.
  auto key = [](uint64_t i) { return i * 0x9E3779B97F4A7C15ull; };
  uint64_t n = 0;
  Status s;
  for (; n < 10'000'000; ++n) {
    s = idx.insert(key(n), n);
    if (!s.ok()) break;
  }
  ASSERT_EQ(s.code(), Code::kOutOfSpace) << "after " << n << " keys: " << s.ToString();
  EXPECT_FALSE(idx.lookup(key(n)).has_value());
  for (uint64_t j = 0; j < n; ++j) ASSERT_EQ(idx.lookup(key(j)), std::optional<Value>(j)) << j;
  VerifyReport r;
  ASSERT_TRUE(idx.verify(&r).ok());
  EXPECT_EQ(r.keys, n);
  // A full pool still takes updates and removes, and an insert into the
  // room a remove made.
  ASSERT_TRUE(idx.update(key(1), 0).ok());
  ASSERT_TRUE(idx.remove(key(0)).ok());
  ASSERT_TRUE(idx.remove(key(2)).ok());
  ASSERT_TRUE(idx.insert(key(2), 5).ok());
  EXPECT_EQ(idx.lookup(key(1)), std::optional<Value>(0));
  // Every key survives a reopen of the full pool.
  s = f.reopen(IndexOptions{.extra = c().extra});
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_TRUE(f.index->verify(&r).ok());
  EXPECT_EQ(r.keys, n - 1);
  EXPECT_FALSE(f.index->lookup(key(0)).has_value());
  for (uint64_t j = 1; j < n; ++j) {
    const Value want = j == 1 ? 0 : j == 2 ? 5 : j;
    ASSERT_EQ(f.index->lookup(key(j)), std::optional<Value>(want)) << j;
  }
}

INSTANTIATE_TEST_SUITE_P(Registered, Conformance,
                         ::testing::ValuesIn(testing::registered_index_cases()),
                         [](const auto& info) { return info.param.label; });

INSTANTIATE_TEST_SUITE_P(Registered, PersistentConformance,
                         ::testing::ValuesIn(testing::persistent_index_cases()),
                         [](const auto& info) { return info.param.label; });

}  // namespace
}  // namespace nvindex
