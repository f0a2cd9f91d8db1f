// The conformance suite: everything that is the same for every index, run
// over every registered index (tests/support/model_check.h,
// registered_index_cases: each node size its entry allows and each
// non-default value of each option it declares), once with integer keys
// (instantiation IntegerKeys) and, for the indexes with caps.string_keys,
// once with byte-string keys (StringKeys; registered_string_index_cases).
// The tests are templates on the key type; a test written with integers
// runs for strings through the order-preserving test_key<K>. A new index is tested here
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
//   (EdgeKeysValuesAndAbsentKeys); string keys: take the empty key and keys
//   of 255 bytes, refuse one of 256 bytes with InvalidArgument and change
//   nothing;
// - answer scans and find_last_less_than at every boundary (empty index,
//   before the first key, on and between keys, after the last one, count 0);
//   string keys: at prefix boundaries ("a" < "a\0" < "a\0\0" < "a\x01" <
//   "ab"), from the empty key, and from a key too long to insert
//   (StringConformance);
// - bulk load at fill factors 0.5, 0.7 and 1, keep working after it, and
//   refuse unsorted input or a non-empty index without changing anything;
// - refuse an unknown option, a fill factor out of (0, 1], and (persistent
//   ones) a missing pool or a pool of another layout, with InvalidArgument;
// - describe itself: its registry name and capabilities, its node size;
// - persistent ones: keep every key across a clean close and reopen (twice,
//   with work in between), and on a full pool return OutOfSpace, lose
//   nothing, and reopen with every key.
// Block-device indexes (Placement::kBlockDevice: a store on a real disk,
// IndexOptions::device, no pool) run the same cases, their store in a
// temporary directory (open_test_index, FileIndexOf); what is about pools
// becomes the device's: a missing device and a directory holding something
// else are InvalidArgument, reopen is from the device path, a full device
// comes from a small device_bytes (skipped for an index without nodes: the
// LSM stores have no size limit but the file system's), and IndexInfo's
// footprint (DRAM and PM bytes) is not theirs to grow.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
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
#include "util/temp_files.h"

namespace nvindex {
namespace {

using testing::expect_equals_model;
using testing::FileIndexOf;
using testing::IndexCase;
using testing::options_for;
using testing::show_key;
using testing::test_key;
using testing::TestIndexOf;

constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
template <class K>
using Pairs = std::vector<std::pair<OwnedKey<K>, Value>>;
template <class K>
using Model = std::map<OwnedKey<K>, Value>;
template <class K>
using Loaded = std::vector<std::pair<K, Value>>;  // bulk_load's input
template <class K>
constexpr bool kString = std::is_same_v<K, std::string_view>;

/// The key of integer i (test_key: order-preserving for both key types).
template <class K>
OwnedKey<K> key(uint64_t i) {
  return test_key<K>(i);
}

/// bulk_load's input from owned pairs (string_views into `owned`).
template <class K>
Loaded<K> as_input(const Pairs<K>& owned) {
  return Loaded<K>(owned.begin(), owned.end());
}

class Conformance : public ::testing::TestWithParam<IndexCase> {
 protected:
  const IndexCase& c() const { return GetParam(); }
  const IndexEntry& entry() const { return *find_index_entry(c().name); }
  bool persistent() const { return entry().caps.persistent; }
  bool pooled() const { return needs_pool(entry().caps); }
  bool on_device() const { return needs_device(entry().caps); }
  /// `n` operations or keys, a quarter of them for a block-device index
  /// (every write of a strong-persistence store is an fdatasync: the full
  /// counts took 31 s for leveldb and rocksdb; the PM cases keep theirs).
  uint64_t scaled(uint64_t n) const { return on_device() ? n / 4 : n; }
  bool strings() const { return c().key_type == KeyType::kString; }

  /// A fresh index of this case in an anonymous pool of pool_bytes (when
  /// persistent), with the given fill factor.
  template <class K>
  void open(TestIndexOf<K>* t, double fill_factor = 1.0, uint64_t pool_bytes = 64ull << 20) {
    IndexOptions o = options_for(c());
    o.fill_factor = fill_factor;
    Status s = testing::open_test_index(c().name, o, t, pool_bytes);
    ASSERT_TRUE(s.ok()) << c().label << ": " << s.ToString();
  }

  /// A seed that differs between cases and is the same in every run.
  uint64_t seed() const { return std::hash<std::string>{}(c().label) % 100000; }

  template <class K>
  void map_model(uint64_t seed, size_t ops, uint64_t key_space) {
    TestIndexOf<K> t;
    ASSERT_NO_FATAL_FAILURE(open(&t));
    testing::run_model_test(*t.index, seed, ops, key_space);
  }
  template <class K>
  void edge_keys();
  template <class K>
  void scans_at_boundaries();
  template <class K>
  void bulk_load_at_fill_factors();
  template <class K>
  void bulk_load_refuses_bad_input();
  template <class K>
  void bad_options();
  template <class K>
  void info_describes_the_instance();
};

/// Runs `member<K>` for the case's key type.
#define FOR_KEY_TYPE(member, ...)            \
  do {                                       \
    if (strings()) {                         \
      member<std::string_view>(__VA_ARGS__); \
    } else {                                 \
      member<uint64_t>(__VA_ARGS__);         \
    }                                        \
  } while (0)

TEST_P(Conformance, MapModelDenseKeys) {
  // About ten nodes' worth of keys per 1 KiB of node size: splits and merges
  // at several levels for small nodes, at least one level for large ones.
  const uint64_t key_space = std::max<uint64_t>(4000, uint64_t{c().node_size} * 10);
  FOR_KEY_TYPE(map_model, seed(), scaled(20000), key_space);
}

TEST_P(Conformance, MapModelSparseKeys) { FOR_KEY_TYPE(map_model, seed() + 1, 8000, 1ull << 62); }

template <class K>
void Conformance::edge_keys() {
  TestIndexOf<K> t;
  ASSERT_NO_FATAL_FAILURE(open(&t));
  Index<K>& idx = *t.index;
  Model<K> model;
  // Values 0 and UINT64_MAX and one value repeated for many keys: a design
  // that uses 0 as "empty" or compares values to find duplicates breaks here.
  const Value values[] = {0, 7, kMax};
  for (uint64_t k : {uint64_t{0}, uint64_t{1}, kMax - 1, kMax}) {
    ASSERT_TRUE(idx.insert(key<K>(k), values[k % 3]).ok()) << k;
    model[key<K>(k)] = values[k % 3];
  }
  for (uint64_t k = 1; k <= 600; ++k) {
    ASSERT_TRUE(idx.insert(key<K>(k * 3), values[k % 3]).ok()) << k;
    model[key<K>(k * 3)] = values[k % 3];
  }
  for (const auto& [k, v] : model) {
    ASSERT_EQ(idx.lookup(k), std::optional<Value>(v)) << show_key(k);
  }
  for (uint64_t k = 1; k <= 600; ++k) EXPECT_FALSE(idx.lookup(key<K>(k * 3 + 1)).has_value()) << k;
  EXPECT_FALSE(idx.lookup(key<K>(kMax - 2)).has_value());

  // A duplicate insert, an update or remove of an absent key: refused,
  // nothing changed.
  for (uint64_t k : {uint64_t{0}, uint64_t{3}, kMax}) {
    EXPECT_EQ(idx.insert(key<K>(k), 12345).code(), Code::kAlreadyExists) << k;
    EXPECT_EQ(idx.lookup(key<K>(k)), std::optional<Value>(model[key<K>(k)])) << k;
  }
  for (uint64_t k : {uint64_t{2}, uint64_t{4}, kMax - 2}) {
    EXPECT_EQ(idx.update(key<K>(k), 1).code(), Code::kNotFound) << k;
    EXPECT_EQ(idx.remove(key<K>(k)).code(), Code::kNotFound) << k;
    EXPECT_FALSE(idx.lookup(key<K>(k)).has_value()) << k;
  }
  ASSERT_NO_FATAL_FAILURE(expect_equals_model(idx, model));

  // Updates to 0 and UINT64_MAX, removal of the edge keys and every other
  // key, a second remove of each, then re-insertion.
  ASSERT_TRUE(idx.update(key<K>(kMax), 0).ok());
  ASSERT_TRUE(idx.update(key<K>(0), kMax).ok());
  model[key<K>(kMax)] = 0;
  model[key<K>(0)] = kMax;
  for (uint64_t k : {uint64_t{1}, kMax - 1}) {
    ASSERT_TRUE(idx.remove(key<K>(k)).ok()) << k;
    EXPECT_EQ(idx.remove(key<K>(k)).code(), Code::kNotFound) << k;
    model.erase(key<K>(k));
  }
  for (uint64_t k = 1; k <= 600; k += 2) {
    ASSERT_TRUE(idx.remove(key<K>(k * 3)).ok()) << k;
    EXPECT_EQ(idx.remove(key<K>(k * 3)).code(), Code::kNotFound) << k;
    model.erase(key<K>(k * 3));
  }
  ASSERT_NO_FATAL_FAILURE(expect_equals_model(idx, model));
  ASSERT_TRUE(idx.insert(key<K>(kMax - 1), 5).ok());
  ASSERT_TRUE(idx.insert(key<K>(3), 0).ok());
  model[key<K>(kMax - 1)] = 5;
  model[key<K>(3)] = 0;
  ASSERT_NO_FATAL_FAILURE(expect_equals_model(idx, model));

  if constexpr (kString<K>) {
    // The empty key, keys of 255 bytes (the longest), NUL and 0xff keys.
    for (const std::string& k : testing::string_edge_keys()) {
      ASSERT_TRUE(idx.insert(k, k.size()).ok()) << show_key(k);
      model[k] = k.size();
    }
    ASSERT_NO_FATAL_FAILURE(expect_equals_model(idx, model));
    // A key of 256 bytes: InvalidArgument from insert, update and remove,
    // nothing changed, and a lookup misses. Its 255-byte prefix is present.
    const std::string too_long(kMaxKeyBytes + 1, '\xff');
    EXPECT_EQ(idx.insert(too_long, 1).code(), Code::kInvalidArgument);
    EXPECT_EQ(idx.update(too_long, 1).code(), Code::kInvalidArgument);
    EXPECT_EQ(idx.remove(too_long).code(), Code::kInvalidArgument);
    EXPECT_FALSE(idx.lookup(too_long).has_value());
    ASSERT_NO_FATAL_FAILURE(expect_equals_model(idx, model));
    // The empty key is a key like any other.
    ASSERT_TRUE(idx.update("", 99).ok());
    EXPECT_EQ(idx.insert("", 1).code(), Code::kAlreadyExists);
    model[""] = 99;
    ASSERT_NO_FATAL_FAILURE(expect_equals_model(idx, model));
    ASSERT_TRUE(idx.remove("").ok());
    EXPECT_EQ(idx.remove("").code(), Code::kNotFound);
    model.erase("");
    ASSERT_NO_FATAL_FAILURE(expect_equals_model(idx, model));
  }
}

TEST_P(Conformance, EdgeKeysValuesAndAbsentKeys) { FOR_KEY_TYPE(edge_keys); }

template <class K>
void Conformance::scans_at_boundaries() {
  TestIndexOf<K> t;
  ASSERT_NO_FATAL_FAILURE(open(&t));
  Index<K>& idx = *t.index;
  using P = std::pair<OwnedKey<K>, Value>;
  Pairs<K> out = {{key<K>(99), 99}};  // scan() must clear what was there
  if (!idx.info().caps.ordered) {
    ASSERT_TRUE(idx.insert(key<K>(5), 5).ok());
    EXPECT_EQ(idx.scan(key<K>(0), 10, &out), 0u);
    EXPECT_TRUE(out.empty());
    EXPECT_FALSE(idx.find_last_less_than(key<K>(kMax)).has_value());
    return;
  }
  // Empty index.
  EXPECT_EQ(idx.scan(key<K>(0), 10, &out), 0u);
  EXPECT_TRUE(out.empty());
  EXPECT_FALSE(idx.find_last_less_than(key<K>(0)).has_value());
  EXPECT_FALSE(idx.find_last_less_than(key<K>(kMax)).has_value());

  // Keys 10, 20, ..., 10 n over many leaves at every node size.
  const uint64_t n = 700;
  for (uint64_t i = n; i >= 1; --i) ASSERT_TRUE(idx.insert(key<K>(i * 10), i).ok());
  auto expect_scan = [&](uint64_t start, size_t count, uint64_t first, size_t want) {
    out = {{key<K>(99), 99}};
    ASSERT_EQ(idx.scan(key<K>(start), count, &out), want)
        << "scan(" << start << ", " << count << ")";
    ASSERT_EQ(out.size(), want);
    for (size_t i = 0; i < want; ++i) {
      ASSERT_EQ(out[i].first, key<K>(first + 10 * i)) << "scan(" << start << ") pair " << i;
      ASSERT_EQ(out[i].second, (first + 10 * i) / 10);
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

  auto fllt = [&](uint64_t k) { return idx.find_last_less_than(key<K>(k)); };
  auto pair = [](uint64_t k, Value v) { return std::make_optional(P{key<K>(k), v}); };
  EXPECT_FALSE(fllt(0).has_value());
  EXPECT_FALSE(fllt(10).has_value());
  EXPECT_EQ(fllt(11), pair(10, 1));
  EXPECT_EQ(fllt(20), pair(10, 1));
  EXPECT_EQ(fllt(21), pair(20, 2));
  EXPECT_EQ(fllt(n * 10), pair(n * 10 - 10, n - 1));
  EXPECT_EQ(fllt(kMax), pair(n * 10, n));
  // Every key's predecessor, across every leaf boundary.
  for (uint64_t i = 2; i <= n; ++i) ASSERT_EQ(fllt(i * 10 - 5), pair(i * 10 - 10, i - 1)) << i;

  // The edge keys.
  ASSERT_TRUE(idx.insert(key<K>(0), 0).ok());
  ASSERT_TRUE(idx.insert(key<K>(kMax), 1).ok());
  EXPECT_EQ(fllt(1), pair(0, 0));
  EXPECT_EQ(fllt(10), pair(0, 0));
  EXPECT_EQ(fllt(kMax), pair(n * 10, n));
  out.clear();
  ASSERT_EQ(idx.scan(key<K>(kMax), 5, &out), 1u);
  EXPECT_EQ(out[0], (P{key<K>(kMax), 1}));
  ASSERT_EQ(idx.scan(key<K>(0), 2, &out), 2u);
  EXPECT_EQ(out[0], (P{key<K>(0), 0}));
  EXPECT_EQ(out[1], (P{key<K>(10), 1}));

  // After removing every other key, scans skip the holes.
  for (uint64_t i = 1; i <= n; i += 2) ASSERT_TRUE(idx.remove(key<K>(i * 10)).ok());
  out.clear();
  ASSERT_EQ(idx.scan(key<K>(1), 3, &out), 3u);
  EXPECT_EQ(out[0].first, key<K>(20));
  EXPECT_EQ(out[1].first, key<K>(40));
  EXPECT_EQ(out[2].first, key<K>(60));
  EXPECT_EQ(fllt(30), pair(20, 2));
}

TEST_P(Conformance, ScansAndFindLastLessThanAtBoundaries) { FOR_KEY_TYPE(scans_at_boundaries); }

template <class K>
void Conformance::bulk_load_at_fill_factors() {
  const uint64_t n = scaled(6000);
  for (double fill : {0.5, 0.7, 1.0}) {
    SCOPED_TRACE("fill factor " + std::to_string(fill));
    TestIndexOf<K> t;
    ASSERT_NO_FATAL_FAILURE(open(&t, fill));
    Index<K>& idx = *t.index;
    Pairs<K> sorted;
    Model<K> model;
    for (uint64_t k = 0; k < n; ++k) {
      sorted.emplace_back(key<K>(k * 4 + 2), k);
      model[key<K>(k * 4 + 2)] = k;
    }
    sorted.emplace_back(key<K>(kMax), 0);
    model[key<K>(kMax)] = 0;
    Status s = idx.bulk_load(as_input<K>(sorted));
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_NO_FATAL_FAILURE(expect_equals_model(idx, model));
    EXPECT_FALSE(idx.lookup(key<K>(0)).has_value());
    EXPECT_FALSE(idx.lookup(key<K>(3)).has_value());
    // A bulk-loaded index is a normal index: inserts between the loaded
    // keys (splits of partly filled and full nodes), removes, updates.
    for (uint64_t k = 0; k < n; k += 3) {
      ASSERT_TRUE(idx.insert(key<K>(k * 4 + 1), ~k).ok()) << k;
      model[key<K>(k * 4 + 1)] = ~k;
    }
    for (uint64_t k = 0; k < n; k += 5) {
      ASSERT_TRUE(idx.remove(key<K>(k * 4 + 2)).ok()) << k;
      model.erase(key<K>(k * 4 + 2));
    }
    ASSERT_TRUE(idx.update(key<K>(kMax), 9).ok());
    model[key<K>(kMax)] = 9;
    ASSERT_NO_FATAL_FAILURE(expect_equals_model(idx, model));
    // A non-empty index refuses a bulk load and keeps what it has.
    const Pairs<K> more = {{key<K>(1ull << 40), 1}};
    EXPECT_EQ(idx.bulk_load(as_input<K>(more)).code(), Code::kInvalidArgument);
    EXPECT_FALSE(idx.lookup(key<K>(1ull << 40)).has_value());
    ASSERT_NO_FATAL_FAILURE(expect_equals_model(idx, model));
  }
}

TEST_P(Conformance, BulkLoadAtFillFactors) { FOR_KEY_TYPE(bulk_load_at_fill_factors); }

template <class K>
void Conformance::bulk_load_refuses_bad_input() {
  const Pairs<K> unsorted = {{key<K>(1), 1}, {key<K>(3), 3}, {key<K>(2), 2}};
  const Pairs<K> duplicate = {{key<K>(1), 1}, {key<K>(2), 2}, {key<K>(2), 3}};
  const Pairs<K> good = {{key<K>(4), 4}, {key<K>(5), 5}};
  for (const Pairs<K>* bad : {&unsorted, &duplicate}) {
    TestIndexOf<K> t;
    ASSERT_NO_FATAL_FAILURE(open(&t));
    EXPECT_EQ(t.index->bulk_load(as_input<K>(*bad)).code(), Code::kInvalidArgument);
    // The index holds no key from the refused input (a per-key default bulk
    // load checks the order before inserting anything).
    ASSERT_NO_FATAL_FAILURE(expect_equals_model(*t.index, {}));
    // ... and still takes a valid load.
    ASSERT_TRUE(t.index->bulk_load(as_input<K>(good)).ok());
    ASSERT_NO_FATAL_FAILURE(expect_equals_model(*t.index, Model<K>(good.begin(), good.end())));
  }
  TestIndexOf<K> t;
  ASSERT_NO_FATAL_FAILURE(open(&t));
  EXPECT_TRUE(t.index->bulk_load(Loaded<K>{}).ok());
  ASSERT_NO_FATAL_FAILURE(expect_equals_model(*t.index, {}));
  // An index emptied by removes is empty: it takes a bulk load.
  const uint64_t n = scaled(2000);
  for (uint64_t k = 0; k < n; ++k) ASSERT_TRUE(t.index->insert(key<K>(k * 5), k).ok());
  for (uint64_t k = 0; k < n; ++k) ASSERT_TRUE(t.index->remove(key<K>(k * 5)).ok());
  Pairs<K> load;
  Model<K> model;
  for (uint64_t k = 0; k < n * 3 / 2; ++k) {
    load.emplace_back(key<K>(k * 3 + 1), k);
    model[key<K>(k * 3 + 1)] = k;
  }
  Status s = t.index->bulk_load(as_input<K>(load));
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_NO_FATAL_FAILURE(expect_equals_model(*t.index, model));
}

TEST_P(Conformance, BulkLoadRefusesBadInputAndChangesNothing) {
  FOR_KEY_TYPE(bulk_load_refuses_bad_input);
}

template <class K>
void Conformance::bad_options() {
  const std::string layout = pool_layout(c().name, key_type_of<K>);
  std::unique_ptr<pm::Pool> pool;
  auto attempt = [&](IndexOptions o) {
    if (pooled()) {
      pool.reset();
      EXPECT_TRUE(pm::Pool::create_anonymous(16ull << 20, layout, &pool).ok());
      o.pool = pool.get();
    }
    std::unique_ptr<Index<K>> idx;
    Status s = make_index<K>(c().name, o, &idx);
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
  std::unique_ptr<Index<K>> idx;
  if (on_device()) {
    // No device; a file where a store should be, or a non-empty directory
    // holding something else: InvalidArgument, and nothing in it changes.
    s = make_index<K>(c().name, options_for(c()), &idx);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << "no device: " << s.ToString();
    EXPECT_NE(s.message().find("device"), std::string::npos) << s.ToString();
    std::unique_ptr<util::TempDir> dir;
    ASSERT_NO_FATAL_FAILURE(testing::make_test_device_dir(&dir));
    const std::string other = dir->path() + "/other.txt";
    pm::testing::write_file(other, {'x', 'y'});
    o = options_for(c());
    o.device = dir->path();
    s = make_index<K>(c().name, o, &idx);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << "foreign directory: " << s.ToString();
    EXPECT_EQ(idx, nullptr);
    size_t entries = 0;
    for ([[maybe_unused]] const auto& f : std::filesystem::directory_iterator(dir->path())) {
      ++entries;
    }
    EXPECT_EQ(entries, 1u) << "a refused index wrote into a foreign directory";
    EXPECT_EQ(pm::testing::read_file(other), (std::vector<char>{'x', 'y'}));
    return;
  }
  s = make_index<K>(c().name, options_for(c()), &idx);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << "no pool: " << s.ToString();
  EXPECT_NE(s.message().find("pool"), std::string::npos) << s.ToString();
  // A foreign layout, and (string keys) the same index's integer-key layout.
  std::vector<std::string> foreign = {"another-layout"};
  if (kString<K>) foreign.push_back(pool_layout(c().name, KeyType::kInteger));
  for (const std::string& l : foreign) {
    ASSERT_TRUE(pm::Pool::create_anonymous(16ull << 20, l, &pool).ok());
    o = options_for(c());
    o.pool = pool.get();
    s = make_index<K>(c().name, o, &idx);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << l << ": " << s.ToString();
    EXPECT_NE(s.message().find("layout"), std::string::npos) << s.ToString();
    EXPECT_EQ(pool->root(), 0u) << "a refused index wrote its root into a foreign pool " << l;
  }
}

TEST_P(Conformance, BadOptionsAreInvalidArgument) { FOR_KEY_TYPE(bad_options); }

template <class K>
void Conformance::info_describes_the_instance() {
  TestIndexOf<K> t;
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
  if (pooled()) {
    EXPECT_GT(i.pm_bytes, 0u);
  } else {
    EXPECT_EQ(i.pm_bytes, 0u);
  }
  // A block-device index's data is on its device: IndexInfo has no field
  // for it, so there is no footprint to grow.
  if (on_device()) return;
  // Footprint grows with the keys.
  for (uint64_t k = 0; k < 20000; ++k) ASSERT_TRUE(t.index->insert(key<K>(k), k).ok());
  const IndexInfo full = t.index->info();
  EXPECT_GT(full.pm_bytes + full.dram_bytes, i.pm_bytes + i.dram_bytes);
}

TEST_P(Conformance, InfoDescribesTheInstance) { FOR_KEY_TYPE(info_describes_the_instance); }

// String keys only: scans and find_last_less_than where keys share
// prefixes, differ only in length or by a trailing NUL, hold bytes >= 0x80,
// from the empty key and from a key longer than kMaxKeyBytes (compared like
// any other key), each answer checked against a std::map.
class StringConformance : public Conformance {};

TEST_P(StringConformance, ScansAtPrefixBoundaries) {
  TestIndexOf<std::string_view> t;
  ASSERT_NO_FATAL_FAILURE(open(&t));
  Index<std::string_view>& idx = *t.index;
  if (!idx.info().caps.ordered) GTEST_SKIP() << "unordered";
  using std::string_literals::operator""s;
  Model<std::string_view> model;
  std::vector<std::string> keys = {"\0"s, "\0\0"s, "a",    "a\0"s, "a\0\0"s,   "a\x01",  "ab",
                                   "abc", "b",     "\x80", "\xff", "\xff\xff", "\xff\0"s};
  // Many keys behind one 20-byte prefix and behind its 8- and 16-byte
  // prefixes, so the boundaries fall inside and between leaves.
  const std::string p20 = "shared/prefix/20byte";
  for (int i = 0; i < 300; ++i) {
    const std::string n = std::to_string(i);
    keys.push_back(p20 + n);
    keys.push_back(p20.substr(0, 8) + n);
    keys.push_back(p20.substr(0, 16) + std::string(i % 4, '\0') + n);
  }
  keys.push_back(p20);
  keys.push_back(p20.substr(0, 8));
  keys.push_back(std::string(kMaxKeyBytes, 'z'));
  for (size_t i = 0; i < keys.size(); ++i) {
    ASSERT_TRUE(idx.insert(keys[i], i).ok()) << show_key(keys[i]);
    model[keys[i]] = i;
  }
  ASSERT_NO_FATAL_FAILURE(expect_equals_model(idx, model));

  // Known answers.
  using P = std::pair<std::string, Value>;
  EXPECT_FALSE(idx.find_last_less_than("").has_value());
  EXPECT_FALSE(idx.find_last_less_than("\0"s).has_value());
  EXPECT_EQ(idx.find_last_less_than("\0\0\0"s), std::make_optional(P{"\0\0"s, 1}));
  EXPECT_EQ(idx.find_last_less_than("a"), std::make_optional(P{"\0\0"s, 1}));
  EXPECT_EQ(idx.find_last_less_than("ab"), std::make_optional(P{"a\x01", 5}));
  Pairs<std::string_view> out;
  ASSERT_EQ(idx.scan("a", 4, &out), 4u);
  EXPECT_EQ(out, (Pairs<std::string_view>{{"a", 2}, {"a\0"s, 3}, {"a\0\0"s, 4}, {"a\x01", 5}}));
  ASSERT_EQ(idx.scan("", 1, &out), 1u);
  EXPECT_EQ(out[0], (P{"\0"s, 0}));

  // Every key and its neighbours as scan start and find_last_less_than
  // probe: the key, with a NUL appended, without its last byte, with its
  // last byte incremented, and padded past kMaxKeyBytes.
  std::vector<std::string> probes = {"", std::string(kMaxKeyBytes + 1, 'z'),
                                     std::string(kMaxKeyBytes + 1, '\xff')};
  for (const std::string& k : keys) {
    probes.push_back(k);
    probes.push_back(k + '\0');
    if (!k.empty()) probes.push_back(k.substr(0, k.size() - 1));
    if (!k.empty() && k.back() != '\xff')
      probes.push_back(k.substr(0, k.size() - 1) + char(k.back() + 1));
  }
  for (const std::string& p : probes) {
    auto it = model.lower_bound(p);
    Pairs<std::string_view> want;
    for (auto w = it; w != model.end() && want.size() < 3; ++w) want.emplace_back(*w);
    ASSERT_EQ(idx.scan(p, 3, &out), want.size()) << show_key(p);
    ASSERT_EQ(out, want) << "scan(" << show_key(p) << ", 3)";
    const auto got = idx.find_last_less_than(p);
    if (it == model.begin()) {
      ASSERT_FALSE(got.has_value()) << show_key(p);
    } else {
      ASSERT_EQ(got, std::make_optional(P(*std::prev(it)))) << show_key(p);
    }
  }
  // Removing the keys that are prefixes of others leaves the longer ones.
  for (const std::string& k : {"a"s, "a\0"s, p20, p20.substr(0, 8)}) {
    ASSERT_TRUE(idx.remove(k).ok()) << show_key(k);
    model.erase(k);
  }
  ASSERT_NO_FATAL_FAILURE(expect_equals_model(idx, model));
  EXPECT_EQ(idx.find_last_less_than("a\0\0"s), std::make_optional(P{"\0\0"s, 1}));
  ASSERT_EQ(idx.scan("a", 1, &out), 1u);
  EXPECT_EQ(out[0], (P{"a\0\0"s, 4}));
}

/// Random inserts, updates and removes, applied to the index and the model.
template <class K>
void random_work(Index<K>& idx, Model<K>* model, uint64_t seed, int ops, uint64_t key_space) {
  std::mt19937_64 rng(seed);
  for (int i = 0; i < ops; ++i) {
    const OwnedKey<K> k = key<K>(rng() % key_space);
    const Value v = rng();
    const bool present = model->count(k) == 1;
    switch (rng() % 4) {
      case 0:
        ASSERT_EQ(idx.remove(k).ok(), present) << show_key(k);
        model->erase(k);
        break;
      case 1:
        ASSERT_EQ(idx.update(k, v).ok(), present) << show_key(k);
        if (present) (*model)[k] = v;
        break;
      default:
        ASSERT_EQ(idx.insert(k, v).ok(), !present) << show_key(k);
        model->emplace(k, v);
    }
  }
}

/// Nodes of a block-device index's full-device case (device_bytes = this
/// many nodes of the case's size: three levels at 512 B, about 1,300 keys;
/// every insert of an unbuffered case reads its path, so a few thousand
/// keys already take seconds of disk I/O).
constexpr uint64_t kSmallDeviceNodes = 64;

// The persistent half: the same cases, persistent indexes only.
class PersistentConformance : public Conformance {
 protected:
  template <class K>
  void reopen_keeps_every_key();
  template <class K>
  void full_pool_loses_nothing();
};

template <class K>
void PersistentConformance::reopen_keeps_every_key() {
  FileIndexOf<K> f(c().name);
  ASSERT_TRUE(f.create(options_for(c())).ok());
  Model<K> model;
  ASSERT_NO_FATAL_FAILURE(random_work(*f.index, &model, seed(), scaled(30000), 40000));
  const uint32_t node_size = f.index->info().node_size;
  // Reopen with another node size than the one created: the size stored in
  // the pool wins.
  IndexOptions reopen_options;
  reopen_options.extra = c().extra;
  // (another size the index takes: 256, or 4096 when it takes no 256)
  const IndexEntry* entry = find_index_entry(c().name);
  uint32_t other = c().node_size == 256 ? 512 : 256;
  if (entry != nullptr && entry->node_size_ok != nullptr && !entry->node_size_ok(other)) {
    other = c().node_size == 4096 ? 512 : 4096;
  }
  reopen_options.node_size = other;
  Status s = f.reopen(reopen_options);
  ASSERT_TRUE(s.ok()) << s.ToString();
  const IndexInfo info = f.index->info();
  EXPECT_TRUE(info.recovered);
  EXPECT_GT(info.recovery_seconds, 0.0);
  EXPECT_EQ(info.node_size, node_size);
  ASSERT_NO_FATAL_FAILURE(expect_equals_model(*f.index, model));
  // The recovered index keeps working (splits, merges, reuse of space) and
  // survives a second reopen.
  ASSERT_NO_FATAL_FAILURE(random_work(*f.index, &model, seed() + 1, scaled(30000), 60000));
  s = f.reopen(reopen_options);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_NO_FATAL_FAILURE(expect_equals_model(*f.index, model));
}

TEST_P(PersistentConformance, ReopenKeepsEveryKey) { FOR_KEY_TYPE(reopen_keeps_every_key); }

template <class K>
void PersistentConformance::full_pool_loses_nothing() {
  FileIndexOf<K> f(c().name);
  if (f.on_device()) {
    if (entry().node_size_ok == nullptr) {
      GTEST_SKIP() << c().name << " has no nodes: an external store without a size limit but "
                   << "the file system's (device_bytes is ignored), so no full device to test";
    }
    IndexOptions o = options_for(c());
    o.device_bytes = kSmallDeviceNodes * std::max<uint32_t>(c().node_size, 512);
    ASSERT_TRUE(f.create(o).ok());
  } else {
    ASSERT_TRUE(f.create(options_for(c()), pm::kMinPoolSize).ok());
  }
  Index<K>& idx = *f.index;
  // Keys in a scattered order (an odd multiplier is a bijection), so leaves
  // split at random points and many hold free slots when the pool is full.
  auto k = [](uint64_t i) { return key<K>(i * 0x9E3779B97F4A7C15ull); };
  uint64_t n = 0;
  Status s;
  for (; n < 10'000'000; ++n) {
    s = idx.insert(k(n), n);
    if (!s.ok()) break;
  }
  ASSERT_EQ(s.code(), Code::kOutOfSpace) << "after " << n << " keys: " << s.ToString();
  EXPECT_FALSE(idx.lookup(k(n)).has_value());
  for (uint64_t j = 0; j < n; ++j) ASSERT_EQ(idx.lookup(k(j)), std::optional<Value>(j)) << j;
  VerifyReport r;
  ASSERT_TRUE(idx.verify(&r).ok());
  EXPECT_EQ(r.keys, n);
  // A full pool still takes updates and removes, and an insert into the
  // room a remove made.
  ASSERT_TRUE(idx.update(k(1), 0).ok());
  ASSERT_TRUE(idx.remove(k(0)).ok());
  ASSERT_TRUE(idx.remove(k(2)).ok());
  ASSERT_TRUE(idx.insert(k(2), 5).ok());
  EXPECT_EQ(idx.lookup(k(1)), std::optional<Value>(0));
  // Every key survives a reopen of the full pool.
  IndexOptions reopen_options;
  reopen_options.extra = c().extra;
  s = f.reopen(reopen_options);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_TRUE(f.index->verify(&r).ok());
  EXPECT_EQ(r.keys, n - 1);
  EXPECT_FALSE(f.index->lookup(k(0)).has_value());
  for (uint64_t j = 1; j < n; ++j) {
    const Value want = j == 1 ? 0 : j == 2 ? 5 : j;
    ASSERT_EQ(f.index->lookup(k(j)), std::optional<Value>(want)) << j;
  }
}

TEST_P(PersistentConformance, FullPoolLosesNothing) { FOR_KEY_TYPE(full_pool_loses_nothing); }

auto case_label = [](const auto& info) { return info.param.label; };

INSTANTIATE_TEST_SUITE_P(IntegerKeys, Conformance,
                         ::testing::ValuesIn(testing::registered_index_cases()), case_label);
INSTANTIATE_TEST_SUITE_P(StringKeys, Conformance,
                         ::testing::ValuesIn(testing::registered_string_index_cases()), case_label);
INSTANTIATE_TEST_SUITE_P(StringKeys, StringConformance,
                         ::testing::ValuesIn(testing::registered_string_index_cases()), case_label);

INSTANTIATE_TEST_SUITE_P(IntegerKeys, PersistentConformance,
                         ::testing::ValuesIn(testing::persistent_index_cases()), case_label);
INSTANTIATE_TEST_SUITE_P(StringKeys, PersistentConformance,
                         ::testing::ValuesIn(testing::persistent_string_index_cases()), case_label);

}  // namespace
}  // namespace nvindex
