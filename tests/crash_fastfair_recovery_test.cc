// fastfair recovery (a clean close and reopen is in the conformance suite,
// tests/index_conformance_test.cc): reopen after SIGKILL of a writer
// process, reclamation of unpublished blocks, errors on foreign or damaged
// pools, and normalisation of transient states built directly in nodes
// (equal-pair holes, entries beyond the upper bound, a missing separator).
// The kill goes through the crash lab's fork-and-SIGKILL helper
// (crash/kill.h), hence the crash_ prefix.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>

#include "crash/kill.h"
#include "indexes/fastfair/fastfair.h"
#include "nvindex/index.h"
#include "nvindex/pm/allocator.h"
#include "nvindex/pm/pool.h"
#include "support/model_check.h"

namespace nvindex {
namespace {

using fastfair::FastFair;
using testing::expect_equals_model;

constexpr uint64_t kPoolBytes = 32ull << 20;

/// A fastfair index in a pool file (tests/support/model_check.h).
struct FilePool : testing::FileIndex {
  explicit FilePool(const std::string& tag) : FileIndex("fastfair", tag) {}
  /// Creates the pool file and an empty index with `node_size`.
  void create(uint32_t node_size) {
    IndexOptions o;
    o.node_size = node_size;
    ASSERT_TRUE(FileIndex::create(o, kPoolBytes).ok());
  }
  FastFair* ff() const { return dynamic_cast<FastFair*>(index.get()); }
};

uint64_t key_of(uint64_t i) { return (i * 0x9E3779B97F4A7C15ull) ^ (i >> 3); }

// (c) SIGKILL a writer process at random moments; every acknowledged key is
// present, at most the one in flight beyond them.
TEST(FastFairRecovery, SigkillDuringInserts) {
  std::mt19937_64 rng(42);
  // Inserts the child acknowledged: a MAP_SHARED page survives its SIGKILL.
  void* page = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(page, MAP_FAILED);
  auto* acks = static_cast<std::atomic<uint64_t>*>(page);
  for (int round = 0; round < 4; ++round) {
    FilePool fp("c" + std::to_string(round));
    acks->store(0);
    // Killed at a random time (up to 2 ms) after the child acknowledged
    // more than stop_after inserts.
    const uint64_t stop_after = 2000 + rng() % 30000;
    crash::KillPlan plan;
    plan.ready = [&] { return acks->load(std::memory_order_acquire) > stop_after; };
    plan.delay = std::chrono::microseconds(rng() % 2000);
    crash::KillResult end;
    const Status ks = crash::fork_and_kill(
        [&] {
          std::unique_ptr<pm::Pool> pool;
          if (!pm::Pool::create(fp.path(), kPoolBytes, "fastfair", pm::Mode::kEmulated, &pool)
                   .ok()) {
            _exit(2);
          }
          IndexOptions o;
          o.pool = pool.get();
          o.node_size = round % 2 ? 128 : 512;
          std::unique_ptr<Index<uint64_t>> idx;
          if (!make_index<uint64_t>("fastfair", o, &idx).ok()) _exit(3);
          for (uint64_t i = 0;; ++i) {
            if (!idx->insert(key_of(i), i).ok()) _exit(4);
            acks->store(i + 1, std::memory_order_release);  // only after insert returned
            if (i % 4096 == 4095) {
              // Some removes too, so that merges are in flight at times; the
              // key is re-inserted so the acknowledged set stays a prefix.
              (void)idx->remove(key_of(i));
              (void)idx->insert(key_of(i), i);
            }
          }
        },
        plan, &end);
    ASSERT_TRUE(ks.ok()) << ks.ToString();
    EXPECT_FALSE(end.hung) << "no " << stop_after << " inserts within 30 s";
    ASSERT_TRUE(end.killed()) << "child " << end.describe();
    const uint64_t acked = acks->load(std::memory_order_acquire);

    Status s = fp.reopen();
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_TRUE(fp.index->info().recovered);
    for (uint64_t i = 0; i < acked; ++i) ASSERT_EQ(fp.index->lookup(key_of(i)), i) << i;
    VerifyReport r;
    s = fp.index->verify(&r);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_GE(r.keys, acked);
    EXPECT_LE(r.keys, acked + 1);
    if (r.keys == acked + 1) {
      EXPECT_EQ(fp.index->lookup(key_of(acked)), acked);  // the in-flight key
    }
    // The recovered tree keeps working.
    for (uint64_t i = acked + 1; i < acked + 2000; ++i) {
      ASSERT_TRUE(fp.index->insert(key_of(i), i).ok());
    }
    ASSERT_TRUE(fp.index->verify(&r).ok());
  }
  munmap(page, 4096);
}

// PM the open tree holds: its nodes, the root object and the spare blocks
// kept for the next split (allocated, never published).
uint64_t tree_bytes(const FastFair& ff) {
  VerifyReport r;
  EXPECT_TRUE(ff.verify(&r).ok());
  return (r.leaves + r.inner_nodes + ff.spare_nodes()) * ff.node_size() +
         sizeof(fastfair::RootObject);
}

// (d) an allocated-but-unpublished node is reclaimed by recovery.
TEST(FastFairRecovery, ReclaimsUnpublishedBlocks) {
  FilePool fp("d");
  ASSERT_NO_FATAL_FAILURE(fp.create(512));
  for (uint64_t i = 0; i < 3000; ++i) ASSERT_TRUE(fp.index->insert(key_of(i), i).ok());
  EXPECT_EQ(fp.pool->allocator().bytes_in_use(), tree_bytes(*fp.ff()));
  // Splits keep the blocks they reserved but did not use (one per level but
  // one, plus one for a new root) instead of freeing them.
  EXPECT_GT(fp.ff()->spare_nodes(), 0u);
  uint64_t leaked = 0;
  ASSERT_TRUE(fp.pool->allocator().allocate(512, &leaked).ok());
  ASSERT_TRUE(fp.pool->allocator().allocate(512, &leaked).ok());
  EXPECT_EQ(fp.pool->allocator().bytes_in_use(), tree_bytes(*fp.ff()) + 1024);
  fp.crash();  // a crash: on a cleanly closed pool the two blocks would be damage
  ASSERT_TRUE(fp.reopen().ok());
  // The spares of the closed tree were freed by its destructor, the two
  // blocks allocated above by recovery.
  EXPECT_EQ(fp.ff()->spare_nodes(), 0u);
  EXPECT_EQ(fp.pool->allocator().bytes_in_use(), tree_bytes(*fp.ff()));
  EXPECT_EQ(fp.index->info().pm_bytes, tree_bytes(*fp.ff()));
}

// (e) a pool of another layout, a damaged root object or node: clear errors.
TEST(FastFairRecovery, ForeignOrDamagedPools) {
  {
    FilePool fp("e1");
    std::unique_ptr<pm::Pool> pool;
    ASSERT_TRUE(pm::Pool::create(fp.path(), kPoolBytes, "other", pm::Mode::kEmulated, &pool).ok());
    pool.reset();
    Status s = fp.reopen();
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("other"), std::string::npos) << s.ToString();
  }
  struct Damage {
    const char* name;
    void (*apply)(pm::Pool&, FastFair&);
  };
  const Damage damages[] = {
      {"root magic",
       [](pm::Pool& p, FastFair&) {
         auto* ro = p.ptr<fastfair::RootObject>(p.root());
         pm::store(&ro->magic, uint64_t{12345});
         pm::persist(ro, 64);
       }},
      {"node size",
       [](pm::Pool& p, FastFair&) {
         auto* ro = p.ptr<fastfair::RootObject>(p.root());
         pm::store(&ro->node_size, uint64_t{100});
         pm::persist(ro, 64);
       }},
      {"root node out of range",
       [](pm::Pool& p, FastFair&) {
         auto* ro = p.ptr<fastfair::RootObject>(p.root());
         pm::naw(&ro->root_node, p.size() + 4096);
       }},
      {"root node misaligned",
       [](pm::Pool& p, FastFair& ff) {
         auto* ro = p.ptr<fastfair::RootObject>(p.root());
         pm::naw(&ro->root_node, ff.root_offset() + 8);
       }},
      {"sibling cycle",
       [](pm::Pool&, FastFair& ff) {
         // The leftmost leaf's sibling's sibling points back to it.
         uint64_t off = ff.root_offset();
         while (ff.node(off)->level() > 0) off = ff.node(off)->leftmost.load();
         const uint64_t next = ff.node(off)->sibling.load();
         pm::naw(&ff.node(next)->sibling, off);
       }},
      {"node magic",
       [](pm::Pool&, FastFair& ff) {
         fastfair::Node* n = ff.node(ff.node(ff.root_offset())->leftmost.load());
         pm::naw(&n->level_magic, 0);
       }},
  };
  for (const Damage& d : damages) {
    FilePool fp(std::string("e2"));
    ASSERT_NO_FATAL_FAILURE(fp.create(256));
    for (uint64_t i = 0; i < 500; ++i) ASSERT_TRUE(fp.index->insert(i, i).ok());
    d.apply(*fp.pool, *fp.ff());
    Status s = fp.reopen();
    EXPECT_EQ(s.code(), Code::kCorruption) << d.name << ": " << s.ToString();
    EXPECT_NE(s.message().find("fastfair"), std::string::npos) << s.ToString();
  }
}

// --- (f) normalisation of transient states ----------------------------------

using fastfair::Entry;
using fastfair::Node;

void set_entry(Entry* e, uint64_t k, uint64_t v) {
  pm::store(&e->value, v);
  pm::store(&e->key, k);
}

std::vector<std::pair<uint64_t, Value>> scan_all(Index<uint64_t>& idx) {
  std::vector<std::pair<uint64_t, Value>> out;
  idx.scan(0, 1u << 20, &out);
  return out;
}

// A crash mid FAST insert of 25 into [10..50]: the shift is done and the new
// value, not yet its key, is in slot 2: [10 20 (30,999) 30 40 50], count 6.
TEST(FastFairRecovery, NormalisesHoleInTheMiddle) {
  FilePool fp("f1");
  ASSERT_NO_FATAL_FAILURE(fp.create(256));
  for (uint64_t k = 10; k <= 50; k += 10) ASSERT_TRUE(fp.index->insert(k, k + 1).ok());
  Node* x = fp.ff()->node(fp.ff()->root_offset());
  Entry* e = x->entries();
  set_entry(&e[5], 50, 51);
  pm::naw(&x->count, 6);
  set_entry(&e[4], 40, 41);
  set_entry(&e[3], 30, 31);
  pm::store(&e[2].value, uint64_t{999});
  pm::persist(x, 256);
  // Reader rule: slot 2 is the hole of the (30, 30) pair.
  EXPECT_EQ(fp.index->lookup(30), 31u);
  EXPECT_FALSE(fp.index->lookup(25).has_value());
  const auto all = scan_all(*fp.index);
  ASSERT_EQ(all.size(), 5u);
  EXPECT_EQ(all[2], (std::pair<uint64_t, Value>{30, 31}));
  EXPECT_EQ(fp.index->find_last_less_than(40), (std::pair<uint64_t, Value>{30, 31}));
  VerifyReport r;
  EXPECT_EQ(fp.index->verify(&r).code(), Code::kCorruption);  // hole left over
  ASSERT_TRUE(fp.reopen().ok());
  EXPECT_EQ(fp.ff()->node(fp.ff()->root_offset())->count.load(), 5u);
  ASSERT_NO_FATAL_FAILURE(
      expect_equals_model(*fp.index, {{10, 11}, {20, 21}, {30, 31}, {40, 41}, {50, 51}}));
}

// A crash right after the first step of a FAST insert: slot n duplicates
// slot n-1 and count includes it: [10 20 30 40 50 50].
TEST(FastFairRecovery, NormalisesHoleAtTheEnd) {
  FilePool fp("f2");
  ASSERT_NO_FATAL_FAILURE(fp.create(256));
  for (uint64_t k = 10; k <= 50; k += 10) ASSERT_TRUE(fp.index->insert(k, k + 1).ok());
  Node* x = fp.ff()->node(fp.ff()->root_offset());
  set_entry(&x->entries()[5], 50, 51);
  pm::persist(x, 256);
  pm::naw(&x->count, 6);
  EXPECT_EQ(fp.index->lookup(50), 51u);
  EXPECT_EQ(scan_all(*fp.index).size(), 5u);
  ASSERT_TRUE(fp.reopen().ok());
  ASSERT_NO_FATAL_FAILURE(
      expect_equals_model(*fp.index, {{10, 11}, {20, 21}, {30, 31}, {40, 41}, {50, 51}}));
  ASSERT_TRUE(fp.index->insert(45, 46).ok());
  EXPECT_EQ(fp.index->lookup(45), 46u);
}

// A crash in a split after the sibling store, before the count store (left
// node keeps entries >= its upper bound), and before the parent insert (the
// new node's separator is missing from the root).
TEST(FastFairRecovery, NormalisesBeyondUpperBoundAndMissingSeparator) {
  FilePool fp("f3");
  ASSERT_NO_FATAL_FAILURE(fp.create(256));  // capacity 12
  std::map<uint64_t, Value> model;
  for (uint64_t k = 1; k <= 40; ++k) {
    ASSERT_TRUE(fp.index->insert(k * 10, k).ok());
    model[k * 10] = k;
  }
  FastFair& ff = *fp.ff();
  Node* root = ff.node(ff.root_offset());
  ASSERT_EQ(root->level(), 1u);
  ASSERT_GE(root->count.load(), 2u);
  // Leaf X = the leftmost leaf, N = its sibling.
  Node* x = ff.node(root->leftmost.load());
  const uint64_t noff = x->sibling.load();
  Node* n = ff.node(noff);
  const uint64_t n_low = n->low_key.load();
  // X keeps a stale copy of N's first entry beyond its upper bound.
  const uint64_t xc = x->count.load();
  ASSERT_LT(xc, ff.capacity());
  set_entry(&x->entries()[xc], n_low, 777);
  pm::persist(&x->entries()[xc], 16);
  pm::naw(&x->count, xc + 1);
  // Remove N's separator (root slot 0) from the root: FAST delete by hand.
  Entry* re = root->entries();
  ASSERT_EQ(re[0].value.load(), noff);
  const uint64_t rc = root->count.load();
  for (uint64_t j = 0; j + 1 < rc; ++j)
    set_entry(&re[j], re[j + 1].key.load(), re[j + 1].value.load());
  pm::persist(root, 256);
  pm::naw(&root->count, rc - 1);
  // Reader rule and B-link: every key still reads right.
  for (const auto& [k, v] : model) ASSERT_EQ(fp.index->lookup(k), v) << k;
  EXPECT_EQ(scan_all(*fp.index).size(), model.size());
  VerifyReport r;
  EXPECT_EQ(fp.index->verify(&r).code(), Code::kCorruption);
  ASSERT_TRUE(fp.reopen().ok());
  ASSERT_NO_FATAL_FAILURE(expect_equals_model(*fp.index, model));
  Node* x2 = fp.ff()->node(fp.ff()->node(fp.ff()->root_offset())->leftmost.load());
  EXPECT_EQ(x2->count.load(), xc);
  // Recovery is idempotent: a second reopen changes nothing.
  ASSERT_TRUE(fp.reopen().ok());
  ASSERT_NO_FATAL_FAILURE(expect_equals_model(*fp.index, model));
}

// A crash in a root split after the old root's sibling store, before the NAW
// of the new root: recovery grows the missing root.
TEST(FastFairRecovery, GrowsMissingRoot) {
  FilePool fp("f4");
  ASSERT_NO_FATAL_FAILURE(fp.create(256));
  std::map<uint64_t, Value> model;
  for (uint64_t k = 1; k <= 12; ++k) {
    ASSERT_TRUE(fp.index->insert(k, k).ok());
    model[k] = k;
  }
  FastFair& ff = *fp.ff();
  const uint64_t xoff = ff.root_offset();
  ASSERT_EQ(ff.node(xoff)->count.load(), ff.capacity());
  ASSERT_TRUE(fp.index->insert(13, 13).ok());  // root split
  model[13] = 13;
  Node* newroot = ff.node(ff.root_offset());
  ASSERT_EQ(newroot->level(), 1u);
  pm::naw(&fp.pool->ptr<fastfair::RootObject>(fp.pool->root())->root_node, xoff);
  for (const auto& [k, v] : model) ASSERT_EQ(fp.index->lookup(k), v) << k;
  fp.crash();  // the state of a crash before the root NAW
  ASSERT_TRUE(fp.reopen().ok());
  VerifyReport r;
  ASSERT_TRUE(fp.index->verify(&r).ok());
  EXPECT_EQ(r.height, 2u);
  ASSERT_NO_FATAL_FAILURE(expect_equals_model(*fp.index, model));
  // The abandoned root block was reclaimed.
  EXPECT_EQ(fp.pool->allocator().bytes_in_use(), tree_bytes(*fp.ff()));
}

}  // namespace
}  // namespace nvindex
