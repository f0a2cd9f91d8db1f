// p-masstree, what is specific to Masstree (the conformance, concurrent,
// damage and crash suites hold what every index must do): the permutation
// word, layers (keys sharing 8-byte slices, keys differing only in length, a
// key that is a prefix of another, 255-byte keys), string keys against a
// std::map model, persistence of string keys across a reopen, and concurrent
// layer creation.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "indexes/p_masstree/p_masstree.h"
#include "nvindex/index.h"
#include "nvindex/pm/pool.h"
#include "pm_test_util.h"

namespace nvindex {
namespace {

using masstree::Perm;
using SIndex = Index<std::string_view>;
using Model = std::map<std::string, Value>;

// --- the permutation word

std::vector<uint32_t> order(Perm p) {
  std::vector<uint32_t> v;
  for (uint32_t i = 0; i < p.size(); ++i) v.push_back(p.slot(i));
  return v;
}

TEST(PMasstreePerm, InsertTakesTheFirstFreeSlotAtItsSortedPosition) {
  Perm p = Perm::empty();
  EXPECT_EQ(p.size(), 0u);
  EXPECT_TRUE(p.valid());
  uint32_t s = 99;
  p = p.inserted(0, &s);  // slot 0 at position 0
  EXPECT_EQ(s, 0u);
  p = p.inserted(0, &s);  // slot 1 before it
  EXPECT_EQ(s, 1u);
  p = p.inserted(1, &s);  // slot 2 between them
  EXPECT_EQ(s, 2u);
  EXPECT_EQ(order(p), (std::vector<uint32_t>{1, 2, 0}));
  EXPECT_TRUE(p.valid());
  // Removing position 1 frees slot 2, which the next insert reuses.
  p = p.removed(1);
  EXPECT_EQ(order(p), (std::vector<uint32_t>{1, 0}));
  EXPECT_EQ(p.slot(2), 2u);
  p = p.inserted(2, &s);
  EXPECT_EQ(s, 2u);
  EXPECT_EQ(order(p), (std::vector<uint32_t>{1, 0, 2}));
  EXPECT_EQ(order(p.truncated(1)), (std::vector<uint32_t>{1}));
  EXPECT_TRUE(p.truncated(1).valid());
}

TEST(PMasstreePerm, RandomEditsStayAPermutationAndMatchAModel) {
  std::mt19937_64 rng(5);
  Perm p = Perm::empty();
  std::vector<uint32_t> model;  // slots in position order
  for (int i = 0; i < 20000; ++i) {
    if (model.size() < masstree::kWidth && (model.empty() || rng() % 2 == 0)) {
      const uint32_t pos = static_cast<uint32_t>(rng() % (model.size() + 1));
      uint32_t s = 0;
      p = p.inserted(pos, &s);
      EXPECT_EQ(std::count(model.begin(), model.end(), s), 0);
      model.insert(model.begin() + pos, s);
    } else {
      const uint32_t pos = static_cast<uint32_t>(rng() % model.size());
      p = p.removed(pos);
      model.erase(model.begin() + pos);
    }
    ASSERT_TRUE(p.valid());
    ASSERT_EQ(order(p), model);
  }
  // Damaged words are refused: a slot twice, a count above 15.
  const uint64_t e = Perm::empty().x;
  EXPECT_FALSE((Perm{(e & ~uint64_t{0xF00}) | 0x500}.valid()));  // slot 5 twice (positions 1, 5)
  EXPECT_FALSE((Perm{(e & ~uint64_t{0xF00}) | 0xF00}.valid()));  // slot 15 does not exist
  EXPECT_TRUE((Perm{e | 15}).valid());
  EXPECT_EQ(Perm{e | 15}.size(), 15u);
}

// --- string keys

struct StringIndex {
  std::unique_ptr<pm::Pool> pool;
  std::unique_ptr<SIndex> index;
  masstree::PMasstree<std::string_view>* tree() const {
    return static_cast<masstree::PMasstree<std::string_view>*>(index.get());
  }
};

void open_anonymous(StringIndex* s, uint64_t bytes = 64ull << 20, unsigned threads = 1) {
  ASSERT_TRUE(
      pm::Pool::create_anonymous(bytes, pool_layout("p-masstree", KeyType::kString), &s->pool)
          .ok());
  IndexOptions o;
  o.pool = s->pool.get();
  o.threads = threads;
  ASSERT_TRUE(make_index<std::string_view>("p-masstree", o, &s->index).ok());
}

/// The index equals `m`: verify, every lookup, a full scan, and scans and
/// find_last_less_than from every model key and its neighbours.
void expect_equals(SIndex& idx, const Model& m) {
  VerifyReport r;
  const Status vs = idx.verify(&r);
  ASSERT_TRUE(vs.ok()) << vs.ToString();
  ASSERT_EQ(r.keys, m.size());
  for (const auto& [k, v] : m) ASSERT_EQ(idx.lookup(k), std::optional<Value>(v)) << k;
  std::vector<std::pair<std::string, Value>> out;
  ASSERT_EQ(idx.scan("", m.size() + 5, &out), m.size());
  ASSERT_EQ(out, (std::vector<std::pair<std::string, Value>>(m.begin(), m.end())));
  for (const auto& [k, v] : m) {
    for (const std::string& probe : {k, k + std::string(1, '\0'), k.substr(0, k.size() / 2)}) {
      auto lo = m.lower_bound(probe);
      std::vector<std::pair<std::string, Value>> want;
      for (auto it = lo; it != m.end() && want.size() < 4; ++it) want.emplace_back(*it);
      idx.scan(probe, 4, &out);
      ASSERT_EQ(out, want) << "scan from " << probe;
      auto fl = idx.find_last_less_than(probe);
      if (lo == m.begin()) {
        ASSERT_FALSE(fl.has_value()) << probe;
      } else {
        ASSERT_TRUE(fl.has_value()) << probe;
        ASSERT_EQ(*fl, (std::pair<std::string, Value>(*std::prev(lo))))
            << "find_last_less_than " << probe;
      }
    }
  }
}

Status insert(SIndex& idx, Model* m, const std::string& k, Value v) {
  Status s = idx.insert(k, v);
  if (s.ok()) (*m)[k] = v;
  return s;
}

TEST(PMasstreeLayers, SharedSlicesMakeLayersAndKeysDifferingInLengthStayApart) {
  StringIndex s;
  open_anonymous(&s);
  SIndex& idx = *s.index;
  Model m;
  const std::string p8 = "abcdefgh";
  // One long key: a suffix record, no layer yet.
  ASSERT_TRUE(insert(idx, &m, p8 + "1234", 1).ok());
  EXPECT_EQ(s.tree()->layer_count(), 1u);
  // A second long key with the same first slice: layer 1.
  ASSERT_TRUE(insert(idx, &m, p8 + "12345678" + "x", 2).ok());
  EXPECT_EQ(s.tree()->layer_count(), 2u);
  // Same first 16 bytes, both longer: a third layer.
  ASSERT_TRUE(insert(idx, &m, p8 + "12345678" + "y", 3).ok());
  EXPECT_EQ(s.tree()->layer_count(), 3u);
  // Keys that differ only in length, each a prefix of the next, NUL bytes
  // included: "", "a", ..., "abcdefgh", "abcdefgh\0", "abcdefgh\0\0".
  for (size_t n = 0; n <= 8; ++n) ASSERT_TRUE(insert(idx, &m, p8.substr(0, n), 10 + n).ok());
  ASSERT_TRUE(insert(idx, &m, p8 + std::string(1, '\0'), 30).ok());
  ASSERT_TRUE(insert(idx, &m, p8 + std::string(2, '\0'), 31).ok());
  ASSERT_TRUE(insert(idx, &m, std::string(3, '\0'), 32).ok());
  ASSERT_TRUE(insert(idx, &m, std::string(9, '\0'), 33).ok());
  // A key that is a prefix of a layer's keys lives in the layer above.
  ASSERT_TRUE(insert(idx, &m, p8 + "12345678", 34).ok());
  ASSERT_TRUE(insert(idx, &m, p8 + "1234567", 35).ok());
  EXPECT_EQ(idx.insert(p8 + "1234", 99).code(), Code::kAlreadyExists);
  EXPECT_EQ(idx.insert(p8, 99).code(), Code::kAlreadyExists);
  expect_equals(idx, m);
  // Updates and removes reach keys in every layer and in suffix records.
  ASSERT_TRUE(idx.update(p8 + "12345678" + "y", 300).ok());
  m[p8 + "12345678" + "y"] = 300;
  ASSERT_TRUE(idx.update(p8 + "1234", 100).ok());
  m[p8 + "1234"] = 100;
  EXPECT_EQ(idx.update(p8 + "12345678" + "z", 1).code(), Code::kNotFound);
  EXPECT_EQ(idx.remove(p8 + "123").code(), Code::kNotFound);
  ASSERT_TRUE(idx.remove(p8 + "12345678" + "x").ok());
  m.erase(p8 + "12345678" + "x");
  ASSERT_TRUE(idx.remove(std::string(3, '\0')).ok());
  m.erase(std::string(3, '\0'));
  expect_equals(idx, m);
}

TEST(PMasstreeLayers, LongKeysUpTo255BytesAndTooLongOnes) {
  StringIndex s;
  open_anonymous(&s);
  SIndex& idx = *s.index;
  Model m;
  const std::string base(kMaxKeyBytes, 'k');
  // Keys of 255 bytes differing only in the last byte: 31 layers deep.
  for (char c : std::string("azAZ09")) {
    std::string k = base;
    k.back() = c;
    ASSERT_TRUE(insert(idx, &m, k, static_cast<Value>(c)).ok());
  }
  EXPECT_EQ(s.tree()->layer_count(), 32u);
  // Every prefix length of the same key: one per layer and keylen.
  for (size_t n = 0; n < kMaxKeyBytes; n += 7)
    ASSERT_TRUE(insert(idx, &m, base.substr(0, n), n).ok());
  expect_equals(idx, m);
  const std::string too_long(kMaxKeyBytes + 1, 'k');
  EXPECT_EQ(idx.insert(too_long, 1).code(), Code::kInvalidArgument);
  EXPECT_EQ(idx.update(too_long, 1).code(), Code::kInvalidArgument);
  EXPECT_EQ(idx.remove(too_long).code(), Code::kInvalidArgument);
  EXPECT_FALSE(idx.lookup(too_long).has_value());
  expect_equals(idx, m);
}

/// Random keys over a small alphabet with lengths 0..40 (many shared
/// slices, prefixes and layers): random operations against a std::map.
void random_ops(SIndex& idx, Model* m, uint64_t seed, int ops) {
  std::mt19937_64 rng(seed);
  auto key = [&] {
    std::string k;
    const size_t n = rng() % 4 == 0 ? rng() % 41 : 8 + rng() % 12;
    for (size_t i = 0; i < n; ++i) k.push_back("ab\0\xff"[rng() % (i < 10 ? 2 : 4)]);
    return k;
  };
  for (int i = 0; i < ops; ++i) {
    const std::string k = key();
    const Value v = rng();
    const auto it = m->find(k);
    switch (rng() % 6) {
      case 0:
      case 1: {
        const Status st = idx.insert(k, v);
        ASSERT_EQ(st.ok(), it == m->end()) << st.ToString();
        if (st.ok()) (*m)[k] = v;
        break;
      }
      case 2: {
        const Status st = idx.update(k, v);
        ASSERT_EQ(st.ok(), it != m->end());
        if (st.ok()) (*m)[k] = v;
        break;
      }
      case 3: {
        const Status st = idx.remove(k);
        ASSERT_EQ(st.ok(), it != m->end());
        if (st.ok()) m->erase(k);
        break;
      }
      default:
        ASSERT_EQ(idx.lookup(k), it == m->end() ? std::nullopt : std::optional<Value>(it->second));
    }
  }
}

TEST(PMasstreeStrings, RandomOperationsMatchAMapModel) {
  StringIndex s;
  open_anonymous(&s);
  Model m;
  for (uint64_t round = 0; round < 4; ++round) {
    random_ops(*s.index, &m, 40 + round, 6000);
    expect_equals(*s.index, m);
  }
  EXPECT_GT(s.tree()->layer_count(), 10u);
}

TEST(PMasstreeStrings, ReopenKeepsEveryKey) {
  pm::testing::TempPool file;
  const std::string layout = pool_layout("p-masstree", KeyType::kString);
  Model m;
  {
    std::unique_ptr<pm::Pool> pool;
    ASSERT_TRUE(
        pm::Pool::create(file.path(), 32ull << 20, layout, pm::Mode::kEmulated, &pool).ok());
    IndexOptions o;
    o.pool = pool.get();
    std::unique_ptr<SIndex> idx;
    ASSERT_TRUE(make_index<std::string_view>("p-masstree", o, &idx).ok());
    random_ops(*idx, &m, 7, 8000);
  }
  std::unique_ptr<pm::Pool> pool;
  ASSERT_TRUE(pm::Pool::open(file.path(), layout, pm::Mode::kEmulated, &pool).ok());
  IndexOptions o;
  o.pool = pool.get();
  std::unique_ptr<SIndex> idx;
  const Status st = make_index<std::string_view>("p-masstree", o, &idx);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_TRUE(idx->info().recovered);
  expect_equals(*idx, m);
  random_ops(*idx, &m, 8, 2000);
  expect_equals(*idx, m);
}

// Threads insert keys that share slices with other threads' keys, so layers
// are created while other threads descend through the same border nodes.
TEST(PMasstreeStrings, ConcurrentLayerCreation) {
  StringIndex s;
  open_anonymous(&s, 64ull << 20, 4);
  constexpr int kThreads = 4, kPerThread = 3000;
  auto key = [](int t, int i) {
    // Slice 0 from 64 values, slice 1 from 4: many shared slices.
    std::string k = "prefix" + std::to_string(i % 64);
    k.resize(8, '.');
    k += "middle" + std::to_string(i % 4);
    k.resize(16, '.');
    return k + std::to_string(t) + "-" + std::to_string(i);
  };
  std::atomic<bool> bad{false};
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t) {
    ts.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        if (!s.index->insert(key(t, i), static_cast<Value>(t * kPerThread + i)).ok()) bad = true;
        // Read back an own key (even keys are never removed) and another
        // thread's (maybe absent) key.
        const int j = (i / 2) & ~1;
        if (s.index->lookup(key(t, j)) != std::optional<Value>(t * kPerThread + j)) bad = true;
        auto other = s.index->lookup(key((t + 1) % kThreads, i));
        if (other && *other != static_cast<Value>(((t + 1) % kThreads) * kPerThread + i)) {
          bad = true;
        }
        if (i % 2 == 1 && !s.index->remove(key(t, i)).ok()) bad = true;
      }
    });
  }
  for (auto& th : ts) th.join();
  EXPECT_FALSE(bad.load());
  Model m;
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kPerThread; i += 2) m[key(t, i)] = static_cast<Value>(t * kPerThread + i);
  }
  VerifyReport r;
  ASSERT_TRUE(s.index->verify(&r).ok());
  EXPECT_EQ(r.keys, m.size());
  std::vector<std::pair<std::string, Value>> out;
  ASSERT_EQ(s.index->scan("", m.size() + 1, &out), m.size());
  EXPECT_EQ(out, (std::vector<std::pair<std::string, Value>>(m.begin(), m.end())));
}

// --- integer keys: one slice, the same code

TEST(PMasstreeIntegers, BigEndianSlicesKeepNumericOrderAcrossSplits) {
  std::unique_ptr<pm::Pool> pool;
  ASSERT_TRUE(pm::Pool::create_anonymous(32ull << 20, "p-masstree", &pool).ok());
  IndexOptions o;
  o.pool = pool.get();
  std::unique_ptr<Index<uint64_t>> idx;
  ASSERT_TRUE(make_index<uint64_t>("p-masstree", o, &idx).ok());
  // Keys whose byte order differs from their numeric order on little-endian.
  std::map<uint64_t, Value> m;
  for (uint64_t i = 0; i < 5000; ++i) {
    const uint64_t k = (i << 56) | (i * 0x10001);
    ASSERT_TRUE(idx->insert(k, i).ok());
    m[k] = i;
  }
  VerifyReport r;
  ASSERT_TRUE(idx->verify(&r).ok());
  EXPECT_EQ(r.keys, m.size());
  EXPECT_GE(r.height, 3u);  // 15-entry nodes: several levels
  std::vector<std::pair<uint64_t, Value>> out;
  ASSERT_EQ(idx->scan(0, m.size(), &out), m.size());
  EXPECT_EQ(out, (std::vector<std::pair<uint64_t, Value>>(m.begin(), m.end())));
}

}  // namespace
}  // namespace nvindex
