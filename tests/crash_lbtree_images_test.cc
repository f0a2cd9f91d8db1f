// lbtree (LB+-tree, Liu et al. VLDB'20) under the crash simulator: every
// crash image of an insert that splits a full leaf (logless split) holds the
// old or the new pair of leaves; the flush of the split's commit is needed
// when the key goes to the new leaf; every image of a bulk load holds the
// empty tree or the whole loaded chain; with string keys, every image of a
// split names each key record once. The images come from the crash lab
// (src/crash/images.h), hence the crash_ prefix; the rest of lbtree's tests
// are in index_lbtree_test.cc.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "crash/images.h"
#include "indexes/lbtree/lbtree.h"
#include "nvindex/index.h"
#include "nvindex/pm/pool.h"
#include "pm/crashsim.h"
#include "pm_test_util.h"

namespace nvindex {
namespace {

using lbtree::Block;
using lbtree::Header;
using lbtree::LbTree;
using lbtree::Leaf;
using pm::testing::TempPool;

/// Keys of the leaf at `off` in a pool image (copied to an aligned buffer),
/// its alt bit and live sibling.
struct ImageLeaf {
  std::set<uint64_t> keys;
  bool alt = false;
  uint64_t next = 0;
};
ImageLeaf read_image_leaf(const std::vector<char>& img, uint64_t off, uint32_t blocks) {
  alignas(256) static char buf[1024];
  std::memcpy(buf, img.data() + off, blocks * lbtree::kBlockBytes);
  const Leaf l{reinterpret_cast<Block*>(buf), blocks};
  ImageLeaf r;
  r.alt = l.alt();
  r.next = l.sibling(r.alt).load();
  for (uint32_t j = 0; j < blocks; ++j) {
    const Header h = lbtree::load_header(l.live_hdr(j, r.alt));
    for (uint64_t m = h.bitmap(); m != 0; m &= m - 1) {
      r.keys.insert(l.ent(j, static_cast<uint32_t>(__builtin_ctzll(m))).key.load());
    }
  }
  return r;
}

/// An lbtree on a 4 MiB crash-sim pool file with a simulator attached and
/// crash points off (for set-up); index, simulator and pool are destroyed
/// in that order, then the file.
template <class K>
struct SimTreeOf {
  explicit SimTreeOf(const std::string& tag) : file(tag) {}
  ~SimTreeOf() {}
  /// Creates the pool, attaches the simulator and creates the tree with
  /// `leaf_size` B leaves and bulk-load fill factor `fill` (call it inside
  /// ASSERT_NO_FATAL_FAILURE).
  void open(uint32_t leaf_size, double fill = IndexOptions().fill_factor) {
    ASSERT_TRUE(pm::Pool::create(file.path(), 4ull << 20, pool_layout("lbtree", key_type_of<K>),
                                 pm::Mode::kCrashSim, &pool)
                    .ok());
    ASSERT_TRUE(pm::crashsim::Simulator::attach(pool.get(), {}, &sim).ok());
    sim->set_crash_points(false);
    IndexOptions o;
    o.pool = pool.get();
    o.node_size = leaf_size;
    o.fill_factor = fill;
    ASSERT_TRUE(make_index<K>("lbtree", o, &idx).ok());
  }
  lbtree::LbTreeT<K>& tree() { return static_cast<lbtree::LbTreeT<K>&>(*idx); }

  TempPool file;
  std::unique_ptr<pm::Pool> pool;
  std::unique_ptr<pm::crashsim::Simulator> sim;
  std::unique_ptr<Index<K>> idx;
};
using SimTree = SimTreeOf<uint64_t>;

// Every crash image taken at the fences and the return of an insert that
// splits a full leaf holds either the old leaf (all keys, old sibling) or
// the new pair (lower half + upper half, linked), never a mix; the inserted
// key appears only after the split committed.
TEST(LbTreeLoglessSplit, EveryFenceLeavesOldOrNewPair) {
  for (uint32_t size : {256u, 512u, 1024u}) {
    SimTree t("split" + std::to_string(size));
    ASSERT_NO_FATAL_FAILURE(t.open(size));
    LbTree& tree = t.tree();
    const uint32_t blocks = size / 256;
    const uint32_t cap = 14 * blocks;
    std::set<uint64_t> all;
    for (uint64_t k = 1; k <= cap; ++k) {
      ASSERT_TRUE(tree.insert(k * 10, k).ok());
      all.insert(k * 10);
    }
    t.sim->make_all_durable();
    const uint64_t head = tree.head();
    size_t images = 0, old_state = 0, new_state = 0, with_key = 0;
    std::set<uint64_t> fence_sites_seen;
    std::vector<std::string> problems;
    ASSERT_TRUE(crash::set_image_visitor(
                    t.sim.get(), {},
                    [&](const pm::crashsim::CrashPoint&, const crash::Image& img) {
                      ++images;
                      const ImageLeaf l = read_image_leaf(*img.bytes, head, blocks);
                      std::set<uint64_t> keys = l.keys;
                      if (!l.alt) {
                        ++old_state;
                        if (l.next != 0) problems.push_back("old state with a sibling");
                      } else {
                        ++new_state;
                        if (l.next == 0) {
                          problems.push_back("new state without a sibling");
                          return true;
                        }
                        const ImageLeaf n = read_image_leaf(*img.bytes, l.next, blocks);
                        if (n.next != 0) problems.push_back("new leaf links somewhere");
                        if (!l.keys.empty() && !n.keys.empty() &&
                            *l.keys.rbegin() >= *n.keys.begin()) {
                          problems.push_back("halves out of order");
                        }
                        keys.insert(n.keys.begin(), n.keys.end());
                        if (keys.size() != l.keys.size() + n.keys.size())
                          problems.push_back("key in both");
                      }
                      if (keys.count(cap * 10 + 5)) {
                        ++with_key;
                        keys.erase(cap * 10 + 5);
                        if (!l.alt) problems.push_back("inserted key before the split committed");
                      }
                      if (keys != all) problems.push_back("keys lost or invented");
                      return true;
                    })
                    .ok());
    t.sim->set_crash_points(true);
    const uint64_t fences0 = t.sim->stats().fences;
    ASSERT_TRUE(tree.insert(cap * 10 + 5, 99).ok());  // the largest key: goes right
    t.sim->operation_boundary("insert");
    t.sim->set_crash_points(false);
    EXPECT_TRUE(problems.empty()) << size << ": " << problems.front();
    // The key goes to N, so it is written with N, before the commit: no
    // insert follows the split (a key going to L adds the insert's fence).
    EXPECT_EQ(t.sim->stats().fences - fences0, 2u) << "new leaf with the key + spare, commit";
    EXPECT_GT(old_state, 0u) << size;
    EXPECT_GT(new_state, 0u) << size;
    EXPECT_GT(with_key, 0u) << size;
    std::printf("[ split    ] %u B leaves: %zu images, %zu old pair, %zu new pair\n", size, images,
                old_state, new_state);
  }
}

// The flush of the split's commit NAW ("lbtree.split.commit") is needed when
// the key that triggered the split goes to the new leaf N: the key is written
// with N before the commit, nothing after it persists anything, and the lock
// release of L is a plain store,
// so without that flush L's line 0 (alt flip + moved bits) is still dirty
// when the insert returns, and an ADR crash image that keeps no store of
// that line (DESIGN.md §6: a prefix, here the empty one) holds L with alt
// unflipped: N is unreachable and the acknowledged key is lost. When the key
// goes to L instead, leaf_insert(L)'s header NAW flushes L's line 0 with the
// alt flip in it, so the same ablation is invisible; that is the only kind
// of split the ablation self-test's scenario (seed 1, 80 ops, 256 B leaves)
// contains, hence the ablation note in LbTree::ablation_notes(). Checks the
// images at the insert's return (the crash point where the insert is
// acknowledged), with and without the flush dropped, for both sides.
// The commit's fence likewise: with the key in N it is the insert's last
// fence, and with it dropped the flush of L's line 0 is still pending at the
// return; with the key going to L the insert's own header NAW fences it.
TEST(LbTreeLoglessSplit, CommitFlushIsNeededWhenTheKeyGoesToTheNewLeaf) {
  struct Case {
    bool ablate;      // drop the flush of "lbtree.split.commit" (its fence stays)
    bool key_right;   // the triggering key goes to N (else to L)
    bool drop_fence;  // drop the fence of "lbtree.split.commit" instead (its flush stays)
  };
  for (uint32_t size : {256u, 1024u}) {
    for (const Case c :
         {Case{false, true, false}, Case{true, true, false}, Case{true, false, false},
          Case{false, true, true}, Case{false, false, true}}) {
      const std::string what =
          std::to_string(size) + " B leaves, " + (c.drop_fence ? "fence" : "flush") + " " +
          (c.ablate || c.drop_fence ? "dropped" : "kept") + ", key to " + (c.key_right ? "N" : "L");
      SimTree t("commit" + std::to_string(size));
      ASSERT_NO_FATAL_FAILURE(t.open(size));
      LbTree& tree = t.tree();
      const uint32_t blocks = size / 256;
      const uint32_t cap = 14 * blocks;
      for (uint64_t k = 1; k <= cap; ++k) ASSERT_TRUE(tree.insert(k * 10, k).ok());
      t.sim->make_all_durable();
      if (c.ablate || c.drop_fence) {
        t.sim->ablate("lbtree.split.commit", /*drop_flush=*/c.ablate, /*drop_fence=*/c.drop_fence);
      }
      const uint64_t key = c.key_right ? cap * 10 + 5 : 5;
      const uint64_t head = tree.head();
      size_t at_return = 0, with_key = 0, old_alt = 0;
      ASSERT_TRUE(crash::set_image_visitor(
                      t.sim.get(), {},
                      [&](const pm::crashsim::CrashPoint& cp, const crash::Image& img) {
                        if (cp.at_fence) return true;  // in flight: either state is allowed
                        ++at_return;
                        const ImageLeaf l = read_image_leaf(*img.bytes, head, blocks);
                        bool found = l.keys.count(key) != 0;
                        if (!l.alt) {
                          ++old_alt;
                        } else if (l.next != 0) {
                          found = found ||
                                  read_image_leaf(*img.bytes, l.next, blocks).keys.count(key) != 0;
                        }
                        with_key += found ? 1 : 0;
                        return true;
                      })
                      .ok());
      t.sim->set_crash_points(true);
      ASSERT_TRUE(tree.insert(key, 77).ok()) << what;  // acknowledged
      t.sim->operation_boundary("insert");
      t.sim->set_crash_points(false);
      ASSERT_EQ(tree.chain_leaves(), 2u) << what << ": the insert split the leaf";
      ASSERT_GT(at_return, 0u) << what;
      if ((c.ablate || c.drop_fence) && c.key_right) {
        // L's line 0 is dirty (or its flush unfenced) at the return: some
        // image keeps the old alt (N unreachable) and loses the acknowledged
        // key.
        EXPECT_GT(old_alt, 0u) << what;
        EXPECT_LT(with_key, at_return) << what << ": no image lost the key";
      } else {
        EXPECT_EQ(old_alt, 0u) << what << ": the split is durable at the return";
        EXPECT_EQ(with_key, at_return) << what << ": every image holds the key";
      }
      std::printf("[ commit   ] %s: %zu images at the return, %zu with the key\n", what.c_str(),
                  at_return, with_key);
    }
  }
}

// Every crash image taken during a bulk load holds the empty tree or the
// whole loaded chain (one NAW of the head leaf publishes every leaf).
TEST(LbTreeBulkLoad, CrashDuringBulkLoadLeavesEmptyOrAll) {
  for (uint32_t size : {256u, 768u}) {
    SimTree t("bulk" + std::to_string(size));
    ASSERT_NO_FATAL_FAILURE(t.open(size, 0.7));
    LbTree& tree = t.tree();
    t.sim->make_all_durable();
    std::vector<std::pair<uint64_t, Value>> pairs;
    std::set<uint64_t> all;
    for (uint64_t i = 1; i <= 200; ++i) {
      pairs.emplace_back(i * 11, i);
      all.insert(i * 11);
    }
    const uint32_t blocks = size / 256;
    size_t images = 0, empty = 0, full = 0;
    std::vector<std::string> problems;
    ASSERT_TRUE(crash::set_image_visitor(
                    t.sim.get(), {},
                    [&](const pm::crashsim::CrashPoint&, const crash::Image& img) {
                      ++images;
                      std::set<uint64_t> keys;
                      size_t leaves = 0;
                      for (uint64_t off = tree.head(); off != 0 && leaves < 1000; ++leaves) {
                        const ImageLeaf l = read_image_leaf(*img.bytes, off, blocks);
                        keys.insert(l.keys.begin(), l.keys.end());
                        off = l.next;
                      }
                      if (keys.empty() && leaves == 1) {
                        ++empty;
                      } else if (keys == all) {
                        ++full;
                      } else {
                        problems.push_back(std::to_string(keys.size()) + " keys in " +
                                           std::to_string(leaves) + " leaves");
                      }
                      return true;
                    })
                    .ok());
    t.sim->set_crash_points(true);
    ASSERT_TRUE(t.idx->bulk_load(pairs).ok());
    t.sim->operation_boundary("bulk_load");
    t.sim->set_crash_points(false);
    EXPECT_TRUE(problems.empty()) << size << ": " << problems.front();
    EXPECT_GT(empty, 0u);
    EXPECT_GT(full, 0u);
    std::printf("[ bulk     ] %u B leaves: %zu images, %zu empty, %zu complete\n", size, images,
                empty, full);
  }
}

// String keys: every crash image of an insert that splits a full leaf names
// each key record from exactly one live slot of the old leaf or of the new
// pair (the ownership recovery's marking relies on), and every record a
// live slot names holds its key in the image (records are durable before
// the NAW that publishes them); the new key appears only with its record.
TEST(LbTreeStringSplit, EveryImageNamesEachRecordOnce) {
  for (uint32_t size : {256u, 512u}) {
    SimTreeOf<std::string_view> t("ssplit" + std::to_string(size));
    ASSERT_NO_FATAL_FAILURE(t.open(size));
    auto& tree = t.tree();
    const uint32_t blocks = size / 256;
    const uint32_t cap = 14 * blocks;
    auto key = [](uint64_t k) { return "key-" + std::to_string(1000 + k); };
    std::set<std::string> all;
    for (uint64_t k = 1; k <= cap; ++k) {
      ASSERT_TRUE(tree.insert(key(k * 10), k).ok());
      all.insert(key(k * 10));
    }
    t.sim->make_all_durable();
    const std::string added = key(cap * 10 + 5);  // the largest: goes right
    const uint64_t head = tree.head();
    size_t images = 0, with_key = 0;
    std::vector<std::string> problems;
    ASSERT_TRUE(crash::set_image_visitor(
                    t.sim.get(), {},
                    [&](const pm::crashsim::CrashPoint&, const crash::Image& img) {
                      ++images;
                      const ImageLeaf l = read_image_leaf(*img.bytes, head, blocks);
                      std::vector<uint64_t> words(l.keys.begin(), l.keys.end());
                      if (l.alt && l.next != 0) {
                        const ImageLeaf n = read_image_leaf(*img.bytes, l.next, blocks);
                        words.insert(words.end(), n.keys.begin(), n.keys.end());
                      }
                      if (std::set<uint64_t>(words.begin(), words.end()).size() != words.size()) {
                        problems.push_back("a record named by two live slots");
                      }
                      std::set<std::string> keys;
                      for (uint64_t w : words) {
                        const auto len = static_cast<uint8_t>((*img.bytes)[w]);
                        keys.emplace(img.bytes->data() + w + 1, len);
                      }
                      if (keys.erase(added) != 0) ++with_key;
                      if (keys != all) problems.push_back("keys lost, invented or torn");
                      return true;
                    })
                    .ok());
    t.sim->set_crash_points(true);
    ASSERT_TRUE(tree.insert(added, 99).ok());
    t.sim->operation_boundary("insert");
    t.sim->set_crash_points(false);
    EXPECT_TRUE(problems.empty()) << size << ": " << problems.front();
    EXPECT_GT(with_key, 0u) << size;
    EXPECT_GT(images, with_key) << size;
    std::printf("[ ssplit   ] %u B leaves: %zu images, %zu with the new key\n", size, images,
                with_key);
  }
}

}  // namespace
}  // namespace nvindex
