// dash-eh, what is specific to Dash extendible hashing (the conformance
// suite, tests/index_conformance_test.cc, holds what every index must do):
// segment splits and directory doublings keep every key, the stash takes
// records when a bucket and its neighbour are full, a crash leaves every
// segment for lazy recovery on its first access while a clean shutdown
// leaves none, segment recovery resets a lock left set and removes the
// duplicate an interrupted displacement leaves, verify() catches a stash
// record its home bucket's overflow metadata does not name, and readers stay right
// while concurrent inserts split segments and double the directory.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "indexes/dash/dash.h"
#include "nvindex/index.h"
#include "nvindex/pm/pool.h"
#include "support/model_check.h"

namespace nvindex {
namespace {

using dash::Dash;
using testing::expect_equals_model;
using testing::FileIndex;
using testing::open_test_index;
using testing::TestIndex;

Dash& dash_of(Index<uint64_t>& idx) { return dynamic_cast<Dash&>(idx); }

uint64_t key_of(uint64_t i) { return i * 0x9e3779b97f4a7c15ull + 7; }

// The normal buckets (4 at 1 KiB) of the segment the first directory entry
// names, in a pool opened without its index (FileIndex::open_pool).
dash::Bucket* first_segment_buckets(pm::Pool& pool) {
  char* base = pool.base();
  const auto* root = reinterpret_cast<const dash::RootObject*>(base + pool.root());
  const auto* dir = reinterpret_cast<const dash::DirHeader*>(base + root->dir.load());
  const auto* blk = reinterpret_cast<const dash::DirBlock*>(base + dir->blocks[0]);
  auto* seg = reinterpret_cast<dash::SegmentHead*>(base + blk->entries[0].load());
  return reinterpret_cast<dash::Bucket*>(base + seg->groups[0]);
}

// With 1 KiB of buckets per segment (4 buckets, 56 slots + 28 in the stash)
// 5,000 keys take dozens of segments: the directory doubles several times,
// segments split without doubling in between, and every key survives.
TEST(Dash, SplitsAndDirectoryDoublingsKeepEveryKey) {
  TestIndex t;
  ASSERT_TRUE(open_test_index("dash-eh", 1024, &t, 64ull << 20).ok());
  Dash& d = dash_of(*t.index);
  EXPECT_EQ(d.global_depth(), 0u);
  EXPECT_EQ(d.segments(), 1u);
  std::map<uint64_t, Value> model;
  uint32_t depth = 0, doublings = 0;
  for (uint64_t i = 0; i < 5000; ++i) {
    ASSERT_TRUE(t.index->insert(key_of(i), i).ok()) << i;
    model[key_of(i)] = i;
    if (d.global_depth() != depth) {
      ASSERT_EQ(d.global_depth(), depth + 1) << "a doubling adds one bit";
      depth = d.global_depth();
      ++doublings;
      // Every key inserted so far survives the doubling.
      for (const auto& [k, v] : model) ASSERT_EQ(t.index->lookup(k), v) << k;
    }
  }
  EXPECT_GE(doublings, 5u);
  // More segments than a directory of depth G - 1 could name: splits
  // without doubling happened too; fewer than 2^G: segments share entries.
  EXPECT_GT(d.segments(), uint64_t{1} << (depth - 1));
  ASSERT_NO_FATAL_FAILURE(expect_equals_model(*t.index, model));
  VerifyReport r;
  ASSERT_TRUE(t.index->verify(&r).ok());
  EXPECT_EQ(r.leaves, d.segments());
  EXPECT_EQ(r.keys, 5000u);
}

// Records go to the stash only when the home bucket and its neighbour are
// full and no displacement helps; a lookup finds them through the overflow
// fingerprints (or the overflow count), and removing them clears the stash.
TEST(Dash, StashTakesOverflowAndLookupsFindIt) {
  TestIndex t;
  ASSERT_TRUE(open_test_index("dash-eh", 1024, &t, 16ull << 20).ok());
  Dash& d = dash_of(*t.index);
  std::vector<uint64_t> keys;
  // Insert until the first split: a segment splits only when a record finds
  // its two buckets full, no displacement and both stash buckets full, so
  // right before it the stash holds 2 x 14 records.
  uint64_t before = 0;
  for (uint64_t i = 0; d.segments() == 1; ++i) {
    ASSERT_LT(i, 200u) << "no split after 200 inserts into 84 slots";
    before = d.stash_records();
    ASSERT_TRUE(t.index->insert(key_of(i), i).ok());
    keys.push_back(key_of(i));
  }
  EXPECT_EQ(before, 2 * dash::kSlots);
  for (uint64_t i = keys.size(); i < 400; ++i) {
    ASSERT_TRUE(t.index->insert(key_of(i), i).ok());
    keys.push_back(key_of(i));
  }
  EXPECT_GT(d.stash_records(), 0u);
  for (uint64_t i = 0; i < keys.size(); ++i) ASSERT_EQ(t.index->lookup(keys[i]), i) << i;
  for (uint64_t k : keys) ASSERT_TRUE(t.index->remove(k).ok());
  EXPECT_EQ(d.stash_records(), 0u);
  for (uint64_t k : keys) EXPECT_FALSE(t.index->lookup(k).has_value());
  VerifyReport r;
  ASSERT_TRUE(t.index->verify(&r).ok());
  EXPECT_EQ(r.keys, 0u);
}

// After a crash, open does no per-segment work: every segment is stale and
// is recovered by the first operation that reaches it. After a clean
// shutdown no segment is stale.
TEST(Dash, LazyRecoveryTouchesSegmentsOnAccess) {
  FileIndex f("dash-eh");
  IndexOptions o;
  o.node_size = 1024;
  ASSERT_TRUE(f.create(o).ok());
  std::map<uint64_t, Value> model;
  for (uint64_t i = 0; i < 2000; ++i) {
    ASSERT_TRUE(f.index->insert(key_of(i), i).ok());
    model[key_of(i)] = i;
  }
  const uint64_t segs = dash_of(*f.index).segments();
  ASSERT_GT(segs, 4u);
  f.crash();
  ASSERT_TRUE(f.reopen().ok());
  Dash& d = dash_of(*f.index);
  EXPECT_EQ(d.stale_segments(), segs);
  EXPECT_EQ(d.lazy_recoveries(), 0u);
  ASSERT_EQ(f.index->lookup(key_of(5)), 5u);
  EXPECT_EQ(d.lazy_recoveries(), 1u);
  EXPECT_EQ(d.stale_segments(), segs - 1);
  ASSERT_TRUE(f.index->insert(key_of(5), 0).code() == Code::kAlreadyExists);
  EXPECT_EQ(d.lazy_recoveries(), 1u) << "the same segment is not recovered twice";
  ASSERT_NO_FATAL_FAILURE(expect_equals_model(*f.index, model));  // verify() recovers the rest
  EXPECT_EQ(d.stale_segments(), 0u);
  EXPECT_EQ(d.lazy_recoveries(), segs);
  // A clean shutdown: nothing to recover.
  ASSERT_TRUE(f.reopen().ok());
  EXPECT_EQ(dash_of(*f.index).stale_segments(), 0u);
  ASSERT_NO_FATAL_FAILURE(expect_equals_model(*f.index, model));
  EXPECT_EQ(dash_of(*f.index).lazy_recoveries(), 0u);
}

// A crash state built by hand in segment 0: a bucket lock left set and the
// duplicate of an interrupted displacement (a record of bucket b, home b,
// copied into b + 1 as a member). Lazy recovery resets the lock (the lookup
// does not hang) and clears the copy (verify counts each key once).
TEST(Dash, SegmentRecoveryResetsLocksAndRemovesDisplacementDuplicates) {
  FileIndex f("dash-eh");
  IndexOptions o;
  o.node_size = 1024;
  ASSERT_TRUE(f.create(o).ok());
  std::map<uint64_t, Value> model;
  for (uint64_t i = 0; i < 20; ++i) {
    ASSERT_TRUE(f.index->insert(key_of(i), i).ok());
    model[key_of(i)] = i;
  }
  ASSERT_EQ(dash_of(*f.index).segments(), 1u);
  f.crash();
  ASSERT_TRUE(f.open_pool().ok());
  dash::Bucket* buckets = first_segment_buckets(*f.pool);
  // A home record (membership 0) in bucket b with room in bucket b + 1.
  int b = -1, slot = -1;
  for (int c = 0; c < 4 && b < 0; ++c) {
    const uint32_t bm = buckets[c].bitmap.load();
    const uint32_t homes = ((bm >> 18) & 0x3FFF) & ~((bm >> 4) & 0x3FFF);
    const uint32_t next_alloc = (buckets[(c + 1) % 4].bitmap.load() >> 18) & 0x3FFF;
    if (homes != 0 && next_alloc != 0x3FFF) {
      b = c;
      slot = __builtin_ctz(homes);
    }
  }
  ASSERT_GE(b, 0);
  dash::Bucket& src = buckets[b];
  dash::Bucket& dst = buckets[(b + 1) % 4];
  const uint32_t free =
      static_cast<uint32_t>(__builtin_ctz(~((dst.bitmap.load() >> 18) & 0x3FFF) & 0x3FFF));
  dst.records[free].key.store(src.records[slot].key.load());
  dst.records[free].value.store(src.records[slot].value.load());
  dst.fp[free].store(src.fp[slot].load());
  dst.bitmap.store((dst.bitmap.load() + 1) | 1u << (18 + free) | 1u << (4 + free));
  src.lock.store(src.lock.load() | 1u << 31);
  const uint64_t dup = src.records[slot].key.load();
  f.crash();
  ASSERT_TRUE(f.reopen().ok());
  ASSERT_EQ(f.index->lookup(dup), model[dup]);  // recovers segment 0 first
  ASSERT_TRUE(f.index->remove(dup).ok());
  EXPECT_FALSE(f.index->lookup(dup).has_value()) << "the copy was left behind";
  model.erase(dup);
  ASSERT_NO_FATAL_FAILURE(expect_equals_model(*f.index, model));
}

// A cleanly closed pool keeps the overflow metadata as it was (no segment
// recovery), so verify() checks that each stash record is named by its home
// bucket's metadata: with that metadata erased by hand the record would be
// invisible to lookups and an insert of its key would make a duplicate.
// After a crash the same damage is harmless: segment recovery rebuilds the
// metadata from the stash.
TEST(Dash, VerifyCatchesAStashRecordItsHomeBucketDoesNotName) {
  FileIndex f("dash-eh");
  IndexOptions o;
  o.node_size = 1024;
  ASSERT_TRUE(f.create(o).ok());
  std::map<uint64_t, Value> model;
  for (uint64_t i = 0; dash_of(*f.index).stash_records() == 0; ++i) {
    ASSERT_LT(i, 200u) << "no stash record after 200 inserts into 56 bucket slots";
    ASSERT_TRUE(f.index->insert(key_of(i), i).ok());
    model[key_of(i)] = i;
  }
  ASSERT_EQ(dash_of(*f.index).segments(), 1u);
  // crashed: the index's last close is a crash (open_pool() alone leaves
  // the pool's close record as it found it).
  auto erase_overflow_metadata = [&](bool crashed) {
    if (crashed) {
      f.crash();
    } else {
      f.close();
    }
    ASSERT_TRUE(f.open_pool().ok());
    dash::Bucket* buckets = first_segment_buckets(*f.pool);
    for (int b = 0; b < 4; ++b) {
      buckets[b].ofl_bitmap.store(0);
      buckets[b].ofl_count.store(0);
    }
  };
  ASSERT_NO_FATAL_FAILURE(erase_overflow_metadata(false));
  ASSERT_TRUE(f.reopen(o).ok());  // clean: the damaged metadata is kept
  VerifyReport r;
  const Status s = f.index->verify(&r);
  EXPECT_EQ(s.code(), Code::kCorruption);
  EXPECT_NE(s.message().find("not named by the overflow metadata"), std::string::npos)
      << s.ToString();
  // The same damage before a crash: recovery rebuilds the metadata.
  ASSERT_NO_FATAL_FAILURE(erase_overflow_metadata(true));
  f.close();
  ASSERT_TRUE(f.reopen(o).ok());
  EXPECT_EQ(dash_of(*f.index).stale_segments(), 1u);
  ASSERT_NO_FATAL_FAILURE(expect_equals_model(*f.index, model));
}

// Writers whose inserts split segments and double the directory (1 KiB
// segments) race with a reader of keys loaded before and a remover of
// other loaded keys: the reader always finds its keys with their values
// (a split moves records between segments while it validates), and the
// table ends equal to the model. Runs under ThreadSanitizer
// (NVINDEX_TSAN_TESTS).
TEST(Dash, ConcurrentSplitsAndDoublingsKeepReadersRight) {
  TestIndex t;
  ASSERT_TRUE(open_test_index("dash-eh", 1024, &t, 128ull << 20, 4).ok());
  Index<uint64_t>& idx = *t.index;
  constexpr uint64_t kLoaded = 2000, kPerWriter = 6000;
  for (uint64_t i = 0; i < kLoaded; ++i) ASSERT_TRUE(idx.insert(key_of(i), i).ok());
  const uint32_t depth0 = dash_of(idx).global_depth();
  std::atomic<bool> done{false};
  std::atomic<uint64_t> wrong{0}, reads{0};
  std::vector<std::thread> threads;
  for (uint64_t w = 0; w < 2; ++w) {
    threads.emplace_back([&, w] {
      for (uint64_t i = 0; i < kPerWriter; ++i) {
        const uint64_t n = kLoaded + 1 + w * kPerWriter + i;
        if (!idx.insert(key_of(n), n).ok()) wrong.fetch_add(1);
      }
    });
  }
  threads.emplace_back([&] {  // removes the odd loaded keys
    for (uint64_t i = 1; i < kLoaded; i += 2) {
      if (!idx.remove(key_of(i)).ok()) wrong.fetch_add(1);
    }
  });
  std::thread reader([&] {  // the even loaded keys never change
    while (!done.load()) {
      for (uint64_t i = 0; i < kLoaded; i += 2) {
        if (idx.lookup(key_of(i)) != i) wrong.fetch_add(1);
        reads.fetch_add(1, std::memory_order_relaxed);
      }
    }
  });
  for (std::thread& th : threads) th.join();
  done.store(true);
  reader.join();
  EXPECT_EQ(wrong.load(), 0u);
  EXPECT_GT(reads.load(), 0u);
  EXPECT_GT(dash_of(idx).global_depth(), depth0) << "no doubling during the race";
  std::map<uint64_t, Value> model;
  for (uint64_t i = 0; i < kLoaded; i += 2) model[key_of(i)] = i;
  for (uint64_t n = kLoaded + 1; n < kLoaded + 1 + 2 * kPerWriter; ++n) model[key_of(n)] = n;
  ASSERT_NO_FATAL_FAILURE(expect_equals_model(idx, model));
}

// The pool of a crash during a directory doubling or a split: covered by
// the crash lab (crash_lab_test, dash_eh), whose scenarios at 1 KiB
// segments split and double.

}  // namespace
}  // namespace nvindex
