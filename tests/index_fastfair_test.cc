// fastfair, what is specific to FAST & FAIR (the conformance suite,
// tests/index_conformance_test.cc, holds what every index must do): its
// description and DRAM lock table, merges that shrink the tree and collapse
// the root, and SMOs racing at capacity 4; and the string-key instance's
// design (key words are key-record offsets, fastfair.h): a std::map model
// over keys with long shared prefixes at every node size, close/reopen,
// recovery reclaiming unpublished and removed key records, marking every
// live record once, and the PM cost of a string insert; and the inner=dram
// option (Ni et al. §5): no inner node in PM, empty leaves kept (no merges),
// the DRAM inner nodes rebuilt at every open (clean or crashed, 1 or 2
// threads give the same tree), the stored placement winning over the
// option, string keys refused, a damaged placement word refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "indexes/common/key_record.h"
#include "indexes/fastfair/fastfair.h"
#include "nvindex/index.h"
#include "nvindex/pm/pool.h"
#include "support/model_check.h"

namespace nvindex {
namespace {

TEST(FastFair, InfoClaims) {
  testing::TestIndex t;
  ASSERT_TRUE(testing::open_test_index("fastfair", 512, &t, 8ull << 20).ok());
  IndexInfo i = t.index->info();
  EXPECT_EQ(i.caps.placement, Placement::kPmOnly);
  EXPECT_NE(i.description.find("FAST'18"), std::string::npos);
  // One calling thread (IndexOptions::threads 1): no lock is taken, so no
  // lock word's page is touched and the tree claims no thread safety.
  ASSERT_TRUE(t.index->insert(1, 1).ok());
  EXPECT_EQ(t.index->info().dram_bytes, 0u);
  EXPECT_FALSE(t.index->info().caps.thread_safe);
  // Two: DRAM is the lock words' pages the tree touched, some once a writer
  // locked a node.
  testing::TestIndex t2;
  ASSERT_TRUE(testing::open_test_index("fastfair", 512, &t2, 8ull << 20, /*threads=*/2).ok());
  ASSERT_TRUE(t2.index->insert(1, 1).ok());
  EXPECT_GT(t2.index->info().dram_bytes, 0u);
  EXPECT_TRUE(t2.index->info().caps.thread_safe);
}

TEST(FastFair, MergesShrinkTheTreeAndCollapseTheRoot) {
  testing::TestIndex t;
  ASSERT_TRUE(testing::open_test_index("fastfair", 128, &t, 16ull << 20).ok());
  Index<uint64_t>& idx = *t.index;
  for (uint64_t k = 0; k < 3000; ++k) ASSERT_TRUE(idx.insert(k * 7 % 3001, k).ok());
  VerifyReport full;
  ASSERT_TRUE(idx.verify(&full).ok());
  EXPECT_GE(full.height, 5u);  // capacity 4: many levels
  const uint64_t pm_full = idx.info().pm_bytes;
  for (uint64_t k = 0; k < 3000; ++k) {
    if (k % 500 != 0) {
      ASSERT_TRUE(idx.remove(k * 7 % 3001).ok());
    }
  }
  VerifyReport small;
  ASSERT_TRUE(idx.verify(&small).ok());
  EXPECT_EQ(small.keys, 6u);
  EXPECT_LT(small.leaves, 10u);
  EXPECT_LT(small.height, full.height);
  // Retired nodes are freed only when the index is destroyed.
  EXPECT_GE(idx.info().pm_bytes, pm_full);
  for (uint64_t k = 0; k < 3000; k += 500) EXPECT_EQ(idx.lookup(k * 7 % 3001), k);
}

// Capacity 4: almost every insert or remove is an SMO (split, merge, root
// growth or collapse) racing with readers and other writers.
TEST(FastFair, ConcurrentSmoStress) {
  for (unsigned threads : {2u, 4u, 8u}) {
    testing::TestIndex t;
    ASSERT_TRUE(testing::open_test_index("fastfair", 128, &t, 64ull << 20, threads).ok());
    testing::run_concurrent_test(*t.index, threads, 100 + threads, 8000, 512);
  }
}

// ---------------------------------------------------------------- string keys

/// A string-key fastfair in a pool file of layout "fastfair:string".
struct StringPool : testing::StringFileIndex {
  explicit StringPool(const std::string& tag = "s") : StringFileIndex("fastfair", tag) {}
  Status create(uint32_t node_size, unsigned threads = 1) {
    IndexOptions o;
    o.node_size = node_size;
    o.threads = threads;
    return StringFileIndex::create(o, 64ull << 20);
  }
  /// Clean close (crash = false) or a crash as far as the pool can tell,
  /// then reopen and recover.
  Status reopen(bool crash = false) {
    if (crash) this->crash();
    return StringFileIndex::reopen();
  }
  fastfair::FastFairString* ff() const {
    return dynamic_cast<fastfair::FastFairString*>(index.get());
  }
};

using testing::prefixed_key;

// Random inserts, updates, removes, lookups, scans and find_last_less_than
// over prefixed keys against a std::map, at the smallest node (capacity 4:
// SMOs nearly every operation) and at 512 B, with a close/reopen (every key
// kept, every record marked once) and a crash/recovery in between.
TEST(FastFairString, ModelWithSharedPrefixes) {
  for (uint32_t node_size : {128u, 512u}) {
    StringPool sp("m" + std::to_string(node_size));
    ASSERT_TRUE(sp.create(node_size).ok());
    std::map<std::string, Value> model;
    std::mt19937_64 rng(node_size);
    for (int round = 0; round < 3; ++round) {
      Index<std::string_view>& idx = *sp.index;
      for (int op = 0; op < 6000; ++op) {
        const std::string k = prefixed_key(rng() % 2400);
        const Value v = rng();
        switch (rng() % 6) {
          case 0:
          case 1: {
            const bool fresh = !model.count(k);
            ASSERT_EQ(idx.insert(k, v).ok(), fresh) << k;
            if (fresh) model[k] = v;
            break;
          }
          case 2: {
            const bool has = model.count(k) > 0;
            ASSERT_EQ(idx.update(k, v).ok(), has);
            if (has) model[k] = v;
            break;
          }
          case 3:
            ASSERT_EQ(idx.remove(k).ok(), model.erase(k) == 1) << k;
            break;
          case 4: {
            std::vector<std::pair<std::string, Value>> got;
            idx.scan(k, 5, &got);
            auto it = model.lower_bound(k);
            std::vector<std::pair<std::string, Value>> want;
            for (; it != model.end() && want.size() < 5; ++it)
              want.emplace_back(it->first, it->second);
            ASSERT_EQ(got, want) << k;
            break;
          }
          default: {
            auto it = model.lower_bound(k);
            const auto got = idx.find_last_less_than(k);
            if (it == model.begin()) {
              ASSERT_FALSE(got.has_value()) << k;
            } else {
              --it;
              ASSERT_TRUE(got.has_value()) << k;
              ASSERT_EQ(got->first, it->first) << k;
              ASSERT_EQ(got->second, it->second) << k;
            }
          }
        }
      }
      ASSERT_NO_FATAL_FAILURE(testing::expect_equals_model(idx, model));
      // Round 0: clean close (the damage check compares marked bytes and
      // keys with the close record); round 1: a crash.
      ASSERT_TRUE(sp.reopen(round == 1).ok()) << round;
      ASSERT_TRUE(sp.index->info().recovered);
      ASSERT_NO_FATAL_FAILURE(testing::expect_equals_model(*sp.index, model));
    }
    // Too long a key: InvalidArgument, nothing changed.
    const std::string too_long(kMaxKeyBytes + 1, 'x');
    EXPECT_EQ(sp.index->insert(too_long, 1).code(), Code::kInvalidArgument);
    EXPECT_EQ(sp.index->update(too_long, 1).code(), Code::kInvalidArgument);
    EXPECT_EQ(sp.index->remove(too_long).code(), Code::kInvalidArgument);
    const std::string longest(kMaxKeyBytes, 'x');
    ASSERT_TRUE(sp.index->insert(longest, 7).ok());
    model[longest] = 7;
    ASSERT_TRUE(sp.reopen().ok());
    ASSERT_NO_FATAL_FAILURE(testing::expect_equals_model(*sp.index, model));
  }
}

// Bytes a string tree needs: its nodes, the root object, the spares, and
// one key record per key and per non-leftmost leaf (its low_key).
uint64_t string_tree_bytes(pm::Pool& pool, fastfair::FastFairString& ff,
                           const std::map<std::string, Value>& model) {
  VerifyReport r;
  EXPECT_TRUE(ff.verify(&r).ok());
  uint64_t bytes =
      (r.leaves + r.inner_nodes + ff.spare_nodes()) * ff.node_size() + sizeof(fastfair::RootObject);
  for (const auto& kv : model) {
    uint64_t off = 0;
    EXPECT_TRUE(pool.allocator().allocate(key_record_bytes(kv.first.size()), &off).ok());
    bytes += pool.allocator().block_size(off);
    pool.allocator().free(off);
  }
  // Separator records: keys here are at most 63 bytes (one 64 B block).
  bytes += (r.leaves - 1) * 64;
  // verify() reports the same blocks (nodes and records, no spares and no
  // root object) for the crash lab's leak check.
  EXPECT_EQ(r.pm_bytes, bytes - ff.spare_nodes() * ff.node_size() - sizeof(fastfair::RootObject));
  return bytes;
}

// A key record persisted but never published (a crash between
// store_key_record and the slot's key store) is reclaimed by recovery;
// every live record (entry keys and leaves' low keys) stays. A single
// thread's removes free their records at once (no other operation in
// flight), so the nodes retired by merges are all that recovery has to
// reclaim besides the orphan.
TEST(FastFairString, RecoveryReclaimsUnpublishedAndRemovedRecords) {
  StringPool sp;
  ASSERT_TRUE(sp.create(128).ok());
  std::map<std::string, Value> model;
  for (uint64_t i = 0; i < 500; ++i) {
    const std::string k = "key-" + std::to_string(i * 7919 % 500);
    ASSERT_TRUE(sp.index->insert(k, i).ok());
    model[k] = i;
  }
  for (uint64_t i = 0; i < 500; i += 3) {
    const std::string k = "key-" + std::to_string(i);
    ASSERT_TRUE(sp.index->remove(k).ok());
    model.erase(k);
  }
  // Removed keys' records (and merged leaves' low keys) were freed: only
  // merged nodes stay retired (whole nodes, so the difference is a multiple
  // of the node size).
  EXPECT_EQ(sp.ff()->retired_records(), 0u);
  const uint64_t live = string_tree_bytes(*sp.pool, *sp.ff(), model);
  ASSERT_GT(sp.pool->allocator().bytes_in_use(), live);
  EXPECT_EQ((sp.pool->allocator().bytes_in_use() - live) % 128, 0u);
  // The state of an insert that crashed after persisting its key record.
  uint64_t orphan = 0;
  ASSERT_TRUE(store_key_record(*sp.pool, "key-orphan", &orphan).ok());
  ASSERT_TRUE(sp.reopen(/*crash=*/true).ok());
  ASSERT_TRUE(sp.index->info().recovered);
  EXPECT_EQ(sp.ff()->retired_records(), 0u);
  EXPECT_EQ(sp.pool->allocator().bytes_in_use(), string_tree_bytes(*sp.pool, *sp.ff(), model));
  EXPECT_EQ(sp.index->lookup("key-orphan"), std::nullopt);
  ASSERT_NO_FATAL_FAILURE(testing::expect_equals_model(*sp.index, model));
  // A clean close frees the retired records: the close record's bytes are
  // what recovery reaches.
  ASSERT_TRUE(sp.index->remove("key-1").ok());
  model.erase("key-1");
  ASSERT_TRUE(sp.reopen().ok());
  EXPECT_EQ(sp.pool->allocator().bytes_in_use(), string_tree_bytes(*sp.pool, *sp.ff(), model));
}

// The key word's prefix (top 16 bits) orders keys like their bytes: over
// sorted keys that differ in, or end within, the first two bytes, the
// prefixes never decrease.
TEST(FastFairString, KeyPrefixIsMonotone) {
  std::vector<std::string> keys = {"",
                                   std::string(1, '\0'),
                                   std::string(2, '\0'),
                                   "a",
                                   "a\x01",
                                   "ab",
                                   "abc",
                                   "b",
                                   "\x7f",
                                   "\x80",
                                   "\xff",
                                   "\xff\xff\xff"};
  keys.push_back(std::string("a") + '\0');
  std::sort(keys.begin(), keys.end());
  for (size_t i = 1; i < keys.size(); ++i) {
    EXPECT_LE(fastfair::key_prefix(keys[i - 1]), fastfair::key_prefix(keys[i])) << i;
  }
  EXPECT_EQ(fastfair::key_prefix("ab"), 0x6162);
  EXPECT_EQ(fastfair::key_prefix("a"), 0x6100);
  EXPECT_EQ(fastfair::record_of(fastfair::key_word(0x1240, "zz")), 0x1240u);
}

// Damaged key words are Corruption at recovery, not a wild read or a
// silently different tree: (0) an entry's word that is not the start of a
// block; (1) two owners of one record (a leaf's low_key and its parent's
// separator redirected to the leaf's first entry's record: every order and
// separator check still holds, but the record would be marked twice); (2) a
// word whose prefix bits are not its record's.
TEST(FastFairString, RecoveryRefusesDamagedKeyWords) {
  for (int damage = 0; damage < 3; ++damage) {
    StringPool sp("d" + std::to_string(damage));
    ASSERT_TRUE(sp.create(512).ok());
    for (int i = 0; i < 60; ++i)
      ASSERT_TRUE(sp.index->insert("k" + std::to_string(100 + i), i).ok());
    fastfair::FastFairString& ff = *sp.ff();
    fastfair::Node* root = ff.node(ff.root_offset());
    ASSERT_GT(root->level(), 0u);
    fastfair::Entry* pe = root->entries();
    fastfair::Node* child = ff.node(pe[0].value.load());
    if (damage == 0) {
      child->entries()[1].key.store(child->entries()[1].key.load() + 8);
    } else if (damage == 2) {
      child->entries()[1].key.store(child->entries()[1].key.load() ^ (uint64_t{1} << 48));
    } else {
      const uint64_t w = child->entries()[0].key.load();
      ASSERT_EQ(key_record(*sp.pool, fastfair::record_of(w)),
                key_record(*sp.pool, fastfair::record_of(child->low_key.load())));
      child->low_key.store(w);
      pe[0].key.store(w);
    }
    const Status s = sp.reopen(/*crash=*/true);
    EXPECT_EQ(s.code(), Code::kCorruption) << damage << ": " << s.ToString();
  }
}

// PM cost of an insert: a 24-byte string key against an integer key, on the
// same random order at 512 B nodes (docs/indexes/fastfair.md quotes it).
TEST(FastFairString, InsertCostAgainstIntegerKeys) {
  constexpr uint64_t kN = 20000;
  testing::InsertCost ints, strs;
  ASSERT_NO_FATAL_FAILURE(testing::measure_insert_cost("fastfair", 512, kN, &ints, &strs));
  // The record costs one line per insert, a leaf split one more record (its
  // separator); no fence (the FAST slot persist or the new node's persist
  // fences them).
  EXPECT_GE(strs.lines, ints.lines + 1);
  EXPECT_LE(strs.lines, ints.lines + 1.2);
  EXPECT_NEAR(strs.fences, ints.fences, 0.01);
}

// Writers and optimistic readers racing on string keys at capacity 4:
// readers dereference key records of keys being removed (retired, never
// freed while the tree lives), scans cross splitting and merging leaves.
TEST(FastFairString, ConcurrentWritersAndReaders) {
  StringPool sp;
  ASSERT_TRUE(sp.create(128, /*threads=*/4).ok());
  testing::run_string_readers_race_removes(*sp.index, 3, 800);
}

// ---------------------------------------------------------------- inner=dram

fastfair::FastFair* ff_of(const std::unique_ptr<Index<uint64_t>>& idx) {
  return dynamic_cast<fastfair::FastFair*>(idx.get());
}

Status create_ff(testing::FileIndex* f, const std::string& inner, uint32_t node_size = 128) {
  IndexOptions o;
  o.node_size = node_size;
  o.extra = {{"inner", inner}};
  return f->create(o, 64ull << 20);
}

// The same keys with inner=pm and inner=dram: after a clean reopen (no
// spare or retired node left) the dram pool holds the root object and the
// leaves only, the pm pool the inner nodes too; both hold the same leaves.
TEST(FastFairDram, NoInnerNodeInPm) {
  testing::FileIndex pm("fastfair", "pm"), dram("fastfair", "dram");
  ASSERT_TRUE(create_ff(&pm, "pm").ok());
  ASSERT_TRUE(create_ff(&dram, "dram").ok());
  for (uint64_t k = 0; k < 4000; ++k) {
    const uint64_t key = (k * 7919 % 4001) + 1;
    ASSERT_TRUE(pm.index->insert(key, k).ok());
    ASSERT_TRUE(dram.index->insert(key, k).ok());
  }
  ASSERT_TRUE(pm.reopen().ok());
  ASSERT_TRUE(dram.reopen().ok());
  VerifyReport rp, rd;
  ASSERT_TRUE(pm.index->verify(&rp).ok());
  ASSERT_TRUE(dram.index->verify(&rd).ok());
  EXPECT_EQ(rd.keys, 4000u);
  EXPECT_EQ(rd.leaves, rp.leaves);  // the same splits on the same keys
  EXPECT_GT(rp.inner_nodes, 0u);
  EXPECT_EQ(rd.inner_nodes, ff_of(dram.index)->inner_tree()->nodes());
  EXPECT_GT(rd.inner_nodes, 0u);
  const IndexInfo ip = pm.index->info(), id = dram.index->info();
  EXPECT_EQ(ip.pm_bytes, 64u + (rp.leaves + rp.inner_nodes) * 128u);
  EXPECT_EQ(id.pm_bytes, 64u + rd.leaves * 128u);
  EXPECT_LT(id.pm_bytes, ip.pm_bytes);
  EXPECT_EQ(id.caps.placement, Placement::kSelective);
  EXPECT_EQ(ip.caps.placement, Placement::kPmOnly);
  EXPECT_NE(id.description.find("inner nodes in DRAM"), std::string::npos);
  EXPECT_GE(id.dram_bytes, ff_of(dram.index)->inner_tree()->dram_bytes());
}

// Leaves emptied by removes stay on the chain (no merges) and take the
// later inserts of their range; a clean reopen, a crash reopen and a reopen
// with 2 threads all rebuild the same DRAM inner nodes, which route every
// key; the stored placement wins over the option.
TEST(FastFairDram, RecoveryRebuildsTheInnerNodes) {
  testing::FileIndex f("fastfair", "dram");
  ASSERT_TRUE(create_ff(&f, "dram").ok());
  std::map<uint64_t, Value> model;
  for (uint64_t k = 1; k <= 3000; ++k) {
    ASSERT_TRUE(f.index->insert(k, k + 1).ok());
    model[k] = k + 1;
  }
  for (uint64_t k = 1; k <= 1500; ++k) {  // empties the leftmost leaves
    ASSERT_TRUE(f.index->remove(k).ok());
    model.erase(k);
  }
  VerifyReport before;
  ASSERT_TRUE(f.index->verify(&before).ok());
  IndexOptions pm_opt;
  pm_opt.extra = {{"inner", "pm"}};
  ASSERT_TRUE(f.reopen(pm_opt).ok());  // the pool says dram
  ASSERT_TRUE(ff_of(f.index)->inner_dram());
  EXPECT_EQ(f.index->info().caps.placement, Placement::kSelective);
  VerifyReport after;
  ASSERT_TRUE(f.index->verify(&after).ok());
  EXPECT_EQ(after.leaves, before.leaves);  // empty leaves kept
  EXPECT_EQ(ff_of(f.index)->inner_tree()->leaves().size(), before.leaves);
  ASSERT_NO_FATAL_FAILURE(testing::expect_equals_model(*f.index, model));
  // Inserts into the emptied range go to the emptied leaves: no new leaf
  // while each receives at most its capacity (4 at 128 B).
  for (uint64_t k = 1; k <= 1500; k += 500) {
    ASSERT_TRUE(f.index->insert(k, k).ok());
    model[k] = k;
  }
  ASSERT_TRUE(f.index->verify(&after).ok());
  EXPECT_EQ(after.leaves, before.leaves);
  // A crash: the inner nodes are rebuilt again, from the leaves alone.
  f.crash();
  IndexOptions two;
  two.threads = 2;
  ASSERT_TRUE(f.reopen(two).ok());
  ASSERT_TRUE(f.index->info().recovered);
  ASSERT_NO_FATAL_FAILURE(testing::expect_equals_model(*f.index, model));
  const std::string dump2 = ff_of(f.index)->inner_tree()->dump();
  ASSERT_TRUE(f.reopen().ok());  // one thread
  EXPECT_EQ(ff_of(f.index)->inner_tree()->dump(), dump2);
  EXPECT_GT(ff_of(f.index)->rebuild_seconds(), 0.0);
  // Every leaf empty: all stay, and the tree still takes inserts.
  for (const auto& [k, v] : model) ASSERT_TRUE(f.index->remove(k).ok());
  ASSERT_TRUE(f.reopen().ok());
  ASSERT_TRUE(f.index->verify(&after).ok());
  EXPECT_EQ(after.keys, 0u);
  EXPECT_EQ(after.leaves, before.leaves);
  EXPECT_TRUE(f.index->insert(5, 5).ok());
  EXPECT_EQ(f.index->lookup(5), 5u);
}

// A pool made with inner=pm stays pm when reopened with inner=dram.
TEST(FastFairDram, PmPoolKeepsPmInnerNodes) {
  testing::FileIndex f("fastfair", "pm");
  ASSERT_TRUE(create_ff(&f, "pm").ok());
  for (uint64_t k = 1; k <= 500; ++k) ASSERT_TRUE(f.index->insert(k, k).ok());
  IndexOptions dram_opt;
  dram_opt.extra = {{"inner", "dram"}};
  ASSERT_TRUE(f.reopen(dram_opt).ok());
  EXPECT_FALSE(ff_of(f.index)->inner_dram());
  EXPECT_EQ(ff_of(f.index)->inner_tree(), nullptr);
  EXPECT_EQ(f.index->info().caps.placement, Placement::kPmOnly);
  VerifyReport r;
  ASSERT_TRUE(f.index->verify(&r).ok());
  EXPECT_GT(r.inner_nodes, 0u);
  EXPECT_EQ(r.keys, 500u);
}

// String keys: inner=dram is refused on a new pool.
TEST(FastFairDram, StringKeysRefused) {
  StringPool sp;
  IndexOptions o;
  o.node_size = 128;
  o.extra = {{"inner", "dram"}};
  const Status s = sp.StringFileIndex::create(o, 16ull << 20);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("inner=dram takes integer keys only"), std::string::npos)
      << s.ToString();
}

// A placement word other than 0 or 1 (or 1 in a string pool) is damage.
TEST(FastFairDram, DamagedPlacementWordRefused) {
  testing::FileIndex f("fastfair", "dmg");
  ASSERT_TRUE(create_ff(&f, "dram").ok());
  for (uint64_t k = 1; k <= 100; ++k) ASSERT_TRUE(f.index->insert(k, k).ok());
  f.close();
  ASSERT_TRUE(f.open_pool().ok());
  auto* ro = f.pool->ptr<fastfair::RootObject>(f.pool->root());
  ASSERT_EQ(ro->inner_dram, 1u);
  ro->inner_dram = 2;
  const Status s = f.reopen();
  EXPECT_EQ(s.code(), Code::kCorruption) << s.ToString();
  EXPECT_NE(s.message().find("invalid inner placement"), std::string::npos) << s.ToString();
}

// inner=dram under racing writers and readers at capacity 4 (splits nearly
// every insert, each one routed in the DRAM inner nodes under the leaf
// lock).
TEST(FastFairDram, ConcurrentSplitStress) {
  for (unsigned threads : {2u, 4u}) {
    testing::TestIndex t;
    IndexOptions o;
    o.node_size = 128;
    o.threads = threads;
    o.extra = {{"inner", "dram"}};
    ASSERT_TRUE(testing::open_test_index<uint64_t>("fastfair", o, &t, 64ull << 20).ok());
    testing::run_concurrent_test(*t.index, threads, 300 + threads, 8000, 512);
  }
}

}  // namespace
}  // namespace nvindex
