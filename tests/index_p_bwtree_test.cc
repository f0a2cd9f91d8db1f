// p-bwtree, what is specific to its design (the conformance, concurrent,
// damage and crash suites hold what every index must do): the epoch manager
// (util/epoch.h), deltas in their base's delta area,
// consolidation of delta chains, splits in two
// halves with index-entry deltas, helping, the mapping table growing past
// one directory block, string keys against a std::map
// model (in memory and across a reopen).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "indexes/p_bwtree/p_bwtree.h"
#include "nvindex/index.h"
#include "nvindex/pm/pool.h"
#include "pm_test_util.h"
#include "support/model_check.h"
#include "util/epoch.h"

namespace nvindex {
namespace {

using testing::open_test_index;
using testing::TestIndex;

constexpr char kName[] = "p-bwtree";

// ---------------------------------------------------------------- epochs

struct Freed {
  std::vector<uint64_t> items;
  static void reclaim(void* ctx, uint64_t item) { static_cast<Freed*>(ctx)->items.push_back(item); }
};

TEST(Epoch, NoGuardMeansReclaimAtTheBatch) {
  Freed f;
  EpochManager m(&Freed::reclaim, &f);
  for (uint64_t i = 0; i < EpochManager::kReclaimBatch - 1; ++i) m.retire(i);
  EXPECT_TRUE(f.items.empty());  // below the batch nothing is freed
  m.retire(999);
  EXPECT_EQ(f.items.size(), EpochManager::kReclaimBatch);
  EXPECT_EQ(m.pending(), 0u);
}

TEST(Epoch, ActiveGuardElsewhereHoldsItemsBack) {
  Freed f;
  EpochManager m(&Freed::reclaim, &f);
  std::atomic<int> stage{0};
  std::thread reader([&] {
    EpochManager::Guard g(m);
    stage = 1;
    while (stage.load() != 2) std::this_thread::yield();
  });
  while (stage.load() != 1) std::this_thread::yield();
  for (uint64_t i = 0; i < 3 * EpochManager::kReclaimBatch; ++i) m.retire(i);
  EXPECT_TRUE(f.items.empty()) << "freed while a reader that entered before was inside";
  stage = 2;
  reader.join();
  for (uint64_t i = 0; i < EpochManager::kReclaimBatch; ++i) m.retire(1000 + i);
  EXPECT_EQ(f.items.size(), 4 * EpochManager::kReclaimBatch);
}

TEST(Epoch, OwnGuardHoldsOwnItemsAndNests) {
  Freed f;
  EpochManager m(&Freed::reclaim, &f);
  {
    EpochManager::Guard outer(m);
    {
      EpochManager::Guard inner(m);  // nested: leaving it keeps the outer announcement
    }
    for (uint64_t i = 0; i < 2 * EpochManager::kReclaimBatch; ++i) m.retire(i);
    EXPECT_TRUE(f.items.empty());
  }
  for (uint64_t i = 0; i < EpochManager::kReclaimBatch; ++i) m.retire(500 + i);
  EXPECT_EQ(f.items.size(), 3 * EpochManager::kReclaimBatch);
}

TEST(Epoch, DrainFreesEverything) {
  Freed f;
  {
    EpochManager m(&Freed::reclaim, &f);
    EpochManager::Guard g(m);
    m.retire(7);
    m.retire(8);
    EXPECT_EQ(m.pending(), 2u);
  }
  std::sort(f.items.begin(), f.items.end());
  EXPECT_EQ(f.items, (std::vector<uint64_t>{7, 8}));
}

// ---------------------------------------------------------------- structure

TEST(PBwTree, ConsolidationBoundsLeafChains) {
  TestIndex t;
  ASSERT_TRUE(open_test_index(kName, 4096, &t, 64ull << 20).ok());
  for (uint64_t k = 0; k < 100; ++k) ASSERT_TRUE(t.index->insert(k, k).ok());
  const p_bwtree::Events e = *p_bwtree::events_of(*t.index);
  // 100 inserts into one leaf (4096 B holds 253 entries: no split): a
  // consolidation every kLeafChainMax deltas.
  EXPECT_EQ(e.splits, 0u);
  EXPECT_GE(e.consolidations, 100 / (p_bwtree::kLeafChainMax + 1));
  const p_bwtree::ChainStats cs = *p_bwtree::chain_stats_of(*t.index);
  EXPECT_LE(cs.max_depth, p_bwtree::kLeafChainMax);
  EXPECT_EQ(cs.nodes, 1u);
  for (uint64_t k = 0; k < 100; ++k) EXPECT_EQ(t.index->lookup(k), std::optional<Value>(k));
}

TEST(PBwTree, DeltasSitInTheirBasesArea) {
  // One leaf (512 B: 29 entries, no split in 7 inserts): each delta goes
  // into the slot of its depth in the base's block.
  TestIndex t;
  ASSERT_TRUE(open_test_index(kName, 512, &t, 64ull << 20).ok());
  for (uint64_t k = 0; k < 7; ++k) ASSERT_TRUE(t.index->insert(k, k).ok());
  p_bwtree::ChainStats cs = *p_bwtree::chain_stats_of(*t.index);
  EXPECT_EQ(cs.nodes, 1u);
  EXPECT_EQ(cs.max_depth, 7u);
  EXPECT_EQ(cs.deltas, 7u);
  EXPECT_EQ(cs.area_deltas, 7u);
  // At 128 B the area has 2 or 3 slots (the block is twice the node): the
  // deeper deltas of a chain are blocks of their own.
  TestIndex small;
  ASSERT_TRUE(open_test_index(kName, 128, &small, 64ull << 20).ok());
  for (uint64_t k = 0; k < 5; ++k) ASSERT_TRUE(small.index->insert(k, k).ok());
  cs = *p_bwtree::chain_stats_of(*small.index);
  EXPECT_EQ(cs.deltas, 5u);
  EXPECT_EQ(cs.area_deltas, 3u);  // an empty base is 40 B: its area starts at 64
  for (uint64_t k = 0; k < 5; ++k) EXPECT_EQ(small.index->lookup(k), std::optional<Value>(k));
  // The same for a string delta over 56 B (a key over 31 B), and both
  // kinds survive a reopen (recovery marks a slot with its base).
  auto key = [](uint64_t i, size_t len) { return std::string(len - 1, 'k') + char('a' + i); };
  testing::FileIndexOf<std::string_view> f(kName);
  IndexOptions o;
  o.node_size = 512;
  ASSERT_TRUE(f.create(o).ok());
  for (uint64_t i = 0; i < 3; ++i) ASSERT_TRUE(f.index->insert(key(i, 24), i).ok());
  for (uint64_t i = 0; i < 3; ++i) ASSERT_TRUE(f.index->insert(key(i, 40), 10 + i).ok());
  cs = *p_bwtree::chain_stats_of(*f.index);
  EXPECT_EQ(cs.deltas, 6u);
  EXPECT_EQ(cs.area_deltas, 3u);
  const Status s = f.reopen();
  ASSERT_TRUE(s.ok()) << s.ToString();
  cs = *p_bwtree::chain_stats_of(*f.index);  // recovery leaves chains as they are
  EXPECT_EQ(cs.deltas, 6u);
  EXPECT_EQ(cs.area_deltas, 3u);
  for (uint64_t i = 0; i < 3; ++i) {
    EXPECT_EQ(f.index->lookup(key(i, 24)), std::optional<Value>(i));
    EXPECT_EQ(f.index->lookup(key(i, 40)), std::optional<Value>(10 + i));
  }
}

TEST(PBwTree, SplitsPostIndexEntriesAndGrowTheRoot) {
  TestIndex t;
  ASSERT_TRUE(open_test_index(kName, 128, &t, 64ull << 20).ok());
  for (uint64_t k = 0; k < 2000; ++k) ASSERT_TRUE(t.index->insert(k * 7919 % 2003, k).ok());
  const p_bwtree::Events e = *p_bwtree::events_of(*t.index);
  EXPECT_GT(e.splits, 100u);
  EXPECT_GT(e.index_entries, 100u);
  EXPECT_GE(e.root_grows, 2u);
  VerifyReport r;
  ASSERT_TRUE(t.index->verify(&r).ok());
  EXPECT_EQ(r.keys, 2000u);
  EXPECT_GE(r.height, 3u);
  const p_bwtree::ChainStats cs = *p_bwtree::chain_stats_of(*t.index);
  EXPECT_LE(cs.max_depth, p_bwtree::kLeafChainMax);
}

TEST(PBwTree, MappingTableGrowsPastOneDirectoryBlockAndRecovers) {
  // One directory block names 256 chunks of 512 ids (131,072 node ids).
  // At 128 B nodes ascending keys leave about 3 per leaf, so 500,000 keys
  // need more ids than that: the second directory block is created at run
  // time, found by recovery, and extended after it.
  constexpr uint64_t kIdsPerDir = p_bwtree::kIdsPerChunk * p_bwtree::kChunksPerDir;
  constexpr uint64_t kKeys = 500000;
  testing::FileIndexOf<uint64_t> f(kName);
  IndexOptions o;
  o.node_size = 128;
  ASSERT_TRUE(f.create(o, 256ull << 20).ok());
  for (uint64_t k = 0; k < kKeys; ++k) ASSERT_TRUE(f.index->insert(k, k + 1).ok()) << k;
  EXPECT_GT(p_bwtree::chain_stats_of(*f.index)->nodes, kIdsPerDir);
  const Status s = f.reopen();
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(f.index->info().recovered);
  for (uint64_t k = kKeys; k < kKeys + 200000; ++k) ASSERT_TRUE(f.index->insert(k, k + 1).ok());
  VerifyReport r;
  ASSERT_TRUE(f.index->verify(&r).ok());
  EXPECT_EQ(r.keys, kKeys + 200000);
  for (uint64_t k = 0; k < kKeys + 200000; k += 997) {
    ASSERT_EQ(f.index->lookup(k), std::optional<Value>(k + 1)) << k;
  }
}

TEST(PBwTree, InnerNodesKeepTwoChildrenWithLongSeparators) {
  // 128 B nodes and keys of 100..199 B: two separators exceed a node, so
  // inner nodes split at 4 children into 2 + 2 and no inner node has one
  // child; the height stays near log2 of the leaves (it passed 64 when an
  // inner split could leave a single child).
  testing::FileIndexOf<std::string_view> f(kName);
  IndexOptions o;
  o.node_size = 128;
  ASSERT_TRUE(f.create(o, 128ull << 20).ok());
  std::mt19937_64 rng(11);
  constexpr int kKeys = 4000;
  for (int i = 0; i < kKeys; ++i) {
    std::string k(100 + rng() % 100, 'x');
    for (char& c : k) c = static_cast<char>('a' + rng() % 26);
    ASSERT_TRUE(f.index->insert(k, static_cast<Value>(i)).ok());
  }
  VerifyReport r;
  const Status s = f.index->verify(&r);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(r.keys, static_cast<uint64_t>(kKeys));
  EXPECT_LE(r.height, 14u);  // 4000 leaves at most: log2(4000) < 12, plus the leaf level
}

TEST(PBwTree, HelpersPostTheSecondHalfOfASplit) {
  TestIndex t;
  ASSERT_TRUE(open_test_index(kName, 128, &t, 64ull << 20).ok());
  ASSERT_TRUE(p_bwtree::defer_index_entries(*t.index, true));
  for (uint64_t k = 0; k < 600; ++k) ASSERT_TRUE(t.index->insert(k * 389 % 601, k).ok());
  p_bwtree::Events e = *p_bwtree::events_of(*t.index);
  EXPECT_GT(e.splits, 20u);
  // Every index entry was posted by a thread that met a split (not the
  // splitter), and the structure stays correct with splits not yet posted.
  EXPECT_GT(e.helped, 0u);
  EXPECT_EQ(e.helped, e.index_entries);
  VerifyReport r;
  ASSERT_TRUE(t.index->verify(&r).ok());
  EXPECT_EQ(r.keys, 600u);
  // Lookups of every key cross every remaining split and post it.
  for (uint64_t k = 0; k < 601; ++k) (void)t.index->lookup(k);
  for (uint64_t k = 0; k < 601; ++k) (void)t.index->lookup(k);
  const p_bwtree::ChainStats cs = *p_bwtree::chain_stats_of(*t.index);
  EXPECT_EQ(cs.unposted_splits, 0u);
  ASSERT_TRUE(t.index->verify(&r).ok());
}

TEST(PBwTree, ConcurrentInsertsHelpEachOther) {
  TestIndex t;
  ASSERT_TRUE(open_test_index(kName, 128, &t, 128ull << 20, 4).ok());
  constexpr uint64_t kPerThread = 5000;
  std::vector<std::thread> ths;
  for (uint64_t th = 0; th < 4; ++th) {
    ths.emplace_back([&, th] {
      for (uint64_t i = 0; i < kPerThread; ++i) {
        const uint64_t k = (i * 4 + th) * 0x9E3779B97F4A7C15ull;
        EXPECT_TRUE(t.index->insert(k, i).ok());
      }
    });
  }
  for (auto& th : ths) th.join();
  VerifyReport r;
  ASSERT_TRUE(t.index->verify(&r).ok());
  EXPECT_EQ(r.keys, 4 * kPerThread);
  for (uint64_t th = 0; th < 4; ++th) {
    for (uint64_t i = 0; i < kPerThread; ++i) {
      ASSERT_EQ(t.index->lookup((i * 4 + th) * 0x9E3779B97F4A7C15ull), std::optional<Value>(i));
    }
  }
}

// ---------------------------------------------------------------- string keys

std::string random_key(std::mt19937_64& rng) {
  // Short keys sharing prefixes (so many compare equal for a while), NULs,
  // the empty key, and some long ones up to kMaxKeyBytes.
  const uint64_t r = rng();
  size_t len = r % 100 < 5 ? kMaxKeyBytes - r % 20 : 1 + r % 24;
  if (r % 1000 == 0) len = 0;
  std::string k(len, 'a');
  for (size_t i = 0; i < len; ++i) k[i] = static_cast<char>("ab\0\xff"[rng() % 4]);
  return k;
}

void check_strings(Index<std::string_view>& idx, const std::map<std::string, Value>& model) {
  VerifyReport r;
  Status s = idx.verify(&r);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(r.keys, model.size());
  std::vector<std::pair<std::string, Value>> out;
  idx.scan(std::string_view(), model.size() + 1, &out);
  ASSERT_EQ(out.size(), model.size());
  size_t i = 0;
  for (const auto& [k, v] : model) {
    ASSERT_EQ(out[i].first, k) << i;
    ASSERT_EQ(out[i].second, v) << i;
    ++i;
  }
}

void run_string_model(Index<std::string_view>& idx, std::map<std::string, Value>* model,
                      uint64_t seed, size_t ops) {
  std::mt19937_64 rng(seed);
  std::vector<std::string> keys;
  for (size_t i = 0; i < 800; ++i) keys.push_back(random_key(rng));
  for (size_t op = 0; op < ops; ++op) {
    const std::string& k = keys[rng() % keys.size()];
    const Value v = rng();
    const auto it = model->find(k);
    switch (rng() % 7) {
      case 0:
      case 1: {
        Status s = idx.insert(k, v);
        ASSERT_EQ(s.ok(), it == model->end()) << s.ToString();
        if (s.ok()) (*model)[k] = v;
        break;
      }
      case 2: {
        Status s = idx.update(k, v);
        ASSERT_EQ(s.ok(), it != model->end());
        if (s.ok()) (*model)[k] = v;
        break;
      }
      case 3: {
        Status s = idx.remove(k);
        ASSERT_EQ(s.ok(), it != model->end());
        if (s.ok()) model->erase(k);
        break;
      }
      case 4: {
        std::optional<Value> got = idx.lookup(k);
        ASSERT_EQ(got.has_value(), it != model->end());
        if (got) {
          ASSERT_EQ(*got, it->second);
        }
        break;
      }
      case 5: {
        std::vector<std::pair<std::string, Value>> out;
        idx.scan(k, 5, &out);
        auto m = model->lower_bound(k);
        for (const auto& [ok, ov] : out) {
          ASSERT_NE(m, model->end());
          ASSERT_EQ(ok, m->first);
          ASSERT_EQ(ov, m->second);
          ++m;
        }
        ASSERT_TRUE(out.size() == 5 || m == model->end());
        break;
      }
      default: {
        auto got = idx.find_last_less_than(k);
        auto m = model->lower_bound(k);
        if (m == model->begin()) {
          ASSERT_FALSE(got.has_value()) << got->first;
        } else {
          --m;
          ASSERT_TRUE(got.has_value());
          ASSERT_EQ(got->first, m->first);
          ASSERT_EQ(got->second, m->second);
        }
      }
    }
  }
}

TEST(PBwTree, StringKeysMatchAMapModel) {
  for (uint32_t ns : {128u, 256u, 512u, 4096u}) {
    SCOPED_TRACE(ns);
    std::unique_ptr<pm::Pool> pool;
    ASSERT_TRUE(pm::Pool::create_anonymous(256ull << 20, "p-bwtree:string", &pool).ok());
    std::unique_ptr<Index<std::string_view>> idx;
    IndexOptions o;
    o.pool = pool.get();
    o.node_size = ns;
    Status s = make_index<std::string_view>(kName, o, &idx);
    ASSERT_TRUE(s.ok()) << s.ToString();
    std::map<std::string, Value> model;
    ASSERT_NO_FATAL_FAILURE(run_string_model(*idx, &model, ns, 20000));
    ASSERT_NO_FATAL_FAILURE(check_strings(*idx, model));
    EXPECT_EQ(idx->insert(std::string(kMaxKeyBytes + 1, 'x'), 1).code(), Code::kInvalidArgument);
  }
}

TEST(PBwTree, StringKeysSurviveAReopen) {
  pm::testing::TempPool tp;
  std::map<std::string, Value> model;
  {
    std::unique_ptr<pm::Pool> pool;
    ASSERT_TRUE(
        pm::Pool::create(tp.path(), 64ull << 20, "p-bwtree:string", pm::Mode::kEmulated, &pool)
            .ok());
    std::unique_ptr<Index<std::string_view>> idx;
    IndexOptions o;
    o.pool = pool.get();
    o.node_size = 256;
    ASSERT_TRUE(make_index<std::string_view>(kName, o, &idx).ok());
    ASSERT_NO_FATAL_FAILURE(run_string_model(*idx, &model, 7, 8000));
  }
  std::unique_ptr<pm::Pool> pool;
  ASSERT_TRUE(pm::Pool::open(tp.path(), "p-bwtree:string", pm::Mode::kEmulated, &pool).ok());
  std::unique_ptr<Index<std::string_view>> idx;
  IndexOptions o;
  o.pool = pool.get();
  Status s = make_index<std::string_view>(kName, o, &idx);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(idx->info().recovered);
  EXPECT_EQ(idx->info().node_size, 256u);
  ASSERT_NO_FATAL_FAILURE(check_strings(*idx, model));
  ASSERT_NO_FATAL_FAILURE(run_string_model(*idx, &model, 8, 4000));
  ASSERT_NO_FATAL_FAILURE(check_strings(*idx, model));
}

}  // namespace
}  // namespace nvindex
