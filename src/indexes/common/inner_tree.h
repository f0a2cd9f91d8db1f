// InnerTree: the DRAM inner nodes of a selectively persistent B+-tree
// (leaves in PM, inner nodes in DRAM, rebuilt from the leaf chain on
// recovery). Shared by lbtree (Liu et al., VLDB'20 §3.2: "non-leaf nodes in
// DRAM"), fptree (Oukid et al., SIGMOD'16 §3, selective persistence) and
// wbtree's inner-nodes-in-DRAM option.
//
// InnerTreeT<K> is one template for both key types of the project (K =
// uint64_t: InnerTree; K = std::string_view, byte strings of 0..255 bytes in
// byte-wise order, shorter prefix first: InnerTreeString). The tree maps key
// ranges to leaves, identified by their 8-byte pool offset (never 0). Leaf i
// covers keys [sep_i, sep_{i+1}), with sep_0 = the smallest key (0, or the
// empty string: the first leaf covers every key below the second separator)
// and the last leaf unbounded above. Leaves are only ever added by splits (insert_separator) or
// by a whole rebuild (build); none is removed (no merges, as in LB+-tree and
// FP-Tree).
//
// Inner node layout (DRAM, node_size bytes, default 512, 64 B aligned):
//   offset size  field
//   ------ ----  -------------------------------------------------------
//        0    8  version lock (indexes/common/version_lock.h)
//        8    8  meta word: bits 56..63 level (1 = children are leaves,
//                2.. = children are inner nodes), bits 48..55 count
//                (separators in use), bits 0..47 leftmost child (leaf
//                offset at level 1, Node* above): one load gives all three
//       16  8*c  separator key words k[0..c), ascending, contiguous (one
//                SIMD compare covers 8 of them). An integer key word is the
//                key. A string key word is the address of the tree's own DRAM
//                copy of the separator ("separator record": 4-byte length,
//                then the bytes, 8 B aligned), so a separator never depends
//                on a leaf's key record, which the index may free after a
//                remove. Separator records are immutable once published and
//                are freed only with every node (build*(), destructor); a
//                split moves words, never records.
//   16+8*c  8*c  children ch[0..c): ch[i] covers [k[i], k[i+1]); the
//                leftmost child (in meta) covers the keys below k[0]
//   capacity c = (node_size - 16) / 16 (512 B -> 31; 256 B -> 15 separators, 16
//   children, as LB+-tree's 256 B non-leaf node; 4096 B -> 255, the most the
//   8-bit count holds)
// Leaf offsets must be below 2^48 (a pool of at most 256 TiB).
//
// Concurrency (no HTM here, unlike LB+-tree's release): readers descend with
// optimistic lock coupling (read version, read child, validate) and never
// block; inner-node writers (insert_separator) serialize on one mutex per
// tree and write-lock each node they change, so readers overlapping a change
// restart. Leaf splits are far rarer than leaf writes (one per ~7 inserts at
// 14 slots, random keys), so the one mutex does not limit 2-thread runs;
// IndexInfo of the users says so. No node is freed while the tree lives (a
// split keeps the full node as the lower half and adds a new upper half), so
// a reader never touches freed memory (nor a freed separator record: the
// same rule); build*() and the destructor free the old nodes and must not
// run concurrently with anything else. String descents compare with a
// scalar binary search (a string compare per probe, about 5 probes per
// 512 B node); the integer descent is the SIMD search below.
//
// How a leaf writer knows it holds the right leaf (the protocol every user
// follows):
//   Route r = tree.find(key);          // optimistic, lock-free
//   lock leaf r.leaf;                  // the leaf's own lock
//   if (!tree.validate(r)) { unlock; retry; }
//   ... r.leaf covers key for as long as the leaf lock is held ...
// This holds because the only way the leaf covering `key` changes is a split
// of r.leaf, whose splitter holds r.leaf's lock until insert_separator() has
// changed the level-1 node that routes to r.leaf (bumping its version, which
// r recorded). A split that completed before find() is already visible.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "nvindex/status.h"
#include "util/hex.h"

namespace nvindex::inner {

/// The type that owns a key of type K: the key itself for uint64_t, a
/// std::string for std::string_view.
template <class K>
using OwnedKey = std::conditional_t<std::is_same_v<K, std::string_view>, std::string, K>;

/// (low key, leaf offset): the leaf covers keys from `first` up to the next
/// pair's `first` (exclusive).
template <class K>
using LeafRefT = std::pair<OwnedKey<K>, uint64_t>;
using LeafRef = LeafRefT<uint64_t>;

/// Where find() routed a key: the leaf and the level-1 node (with its version
/// when read) that routed there. Opaque to users except `leaf`. (No upper
/// bound of the leaf: no index needs one, and computing it at every level
/// cost a third of a lookup; see find().)
struct Route {
  uint64_t leaf = 0;  ///< offset of the leaf covering the key
  /// The level-1 node that routed to the leaf; its first 8 bytes are the
  /// node's version lock word (so validate() is inline).
  const void* parent = nullptr;
  uint64_t version = 0;  ///< its version lock word when read
};

template <class K>
struct TreeImpl;  // inner_tree.cc

/// The DRAM inner tree over a selectively persistent index's leaves for
/// keys of type K (uint64_t or std::string_view; see the file comment).
template <class K>
class InnerTreeT {
 public:
  /// A (low key, leaf) pair of build() and leaves().
  using LeafRef = LeafRefT<K>;

  /// node_size: bytes per inner node, 128..4096, a multiple of 64 (else the
  /// constructor aborts with a message: a program bug; callers validate).
  /// The tree starts with no leaf: call build() before find().
  /// single_writer: one thread alone calls every method (an index made with
  /// IndexOptions::threads == 1). insert_separator then takes neither the
  /// writers' mutex nor a locked read-modify-write on a node's version: it
  /// sets and clears the locked bit with plain stores, so versions change
  /// exactly as with locking and validate() keeps its meaning. A locked
  /// instruction waits for every clwb the thread issued before it to
  /// complete, and a persistent caller has just issued one (lbtree's split
  /// calls insert_separator right after its NAWs); plain stores let that
  /// write-back overlap the change. Undefined if two threads call in.
  explicit InnerTreeT(uint32_t node_size = 512, bool single_writer = false);
  ~InnerTreeT();
  InnerTreeT(const InnerTreeT&) = delete;
  InnerTreeT& operator=(const InnerTreeT&) = delete;

  /// Replaces the whole tree by one built bottom-up over `leaves` (at least
  /// one pair; keys strictly ascending; leaves[0].first is treated as the
  /// smallest key, 0 or ""; string separators are copied into the tree's
  /// separator records, 8 + len bytes each, rounded up to 8).
  /// Each level is cut, from the left, into nodes of children_per_node(fill)
  /// children (ceil(fill * (capacity() + 1)), at least 2); the level's last
  /// node takes the rest, and if that would be a single child it is merged
  /// into its left neighbour (or, at fill 1.0, takes one child from it), so
  /// every node has at least 2 children unless the level has only one node.
  /// The old tree's nodes are freed. Not safe against concurrent calls of
  /// any other method.
  /// Errors: InvalidArgument (empty, not ascending, leaf offset 0, fill not
  /// in (0, 1]); the old tree is kept then.
  Status build(std::span<const LeafRef> leaves, double fill = 1.0);

  /// Parallel build (recovery, LB+-tree §3.5): `segments` are consecutive
  /// runs of the leaf chain (their concatenation ascending, as for build());
  /// up to `threads` threads (the calling thread and threads - 1 std::threads,
  /// segments handed out in order) each build the level-1 nodes over whole
  /// segments, cut as build() cuts a level; then the upper levels are built
  /// over all level-1 nodes by the calling thread. The resulting tree is
  /// identical (same nodes, same separators) to build() over the
  /// concatenation when every segment but the last holds a multiple of
  /// children_per_node(fill); otherwise nodes at segment ends may be less
  /// full (a segment of one leaf gives a level-1 node with one child, no
  /// separator). Empty segments are allowed; threads 0 counts as 1.
  /// Errors: as build().
  Status build_segments(const std::vector<std::vector<LeafRef>>& segments, unsigned threads,
                        double fill = 1.0);

  /// Optimistic descent to the leaf covering `key`: per level, read the
  /// node's version, count its separators <= key (integers: simd::count_le,
  /// inlined for the CPU's SIMD level; strings: a binary search comparing
  /// bytes), take the child, prefetch the child's lines,
  /// read the child's version, validate the node; restart from the root on
  /// a failed validation (optimistic lock coupling). Never blocks on a
  /// writer longer than one node change. About 70 instructions (AVX-512; a few more at 512 B) and
  /// no data-dependent branch per level (inner_tree.cc says why that matters). An unbuilt tree
  /// returns Route{} (leaf 0).
  Route find(K key) const;

  /// find() for a tree that one thread alone reads and changes (an index
  /// made with IndexOptions::threads == 1, which promises one calling
  /// thread): the same descent without the optimistic locking (no version
  /// reads, no validation, no restart), and for 256 B and 512 B nodes with
  /// the capacity fixed at compile time (the search unrolled, the child's
  /// prefetch a fixed run of lines). Route is filled as find() fills it, so
  /// validate(r) holds until the next change. Undefined under a concurrent
  /// insert_separator or build*(): use find() then.
  Route find_single(K key) const;

  /// True if the level-1 node recorded in `r` is unchanged since find() (see
  /// the protocol in the file comment).
  bool validate(const Route& r) const {
    return r.parent != nullptr && static_cast<const std::atomic<uint64_t>*>(r.parent)->load(
                                      std::memory_order_acquire) == r.version;
  }

  /// Records that leaf `left` (covering some range [lo, hi)) was split: keys
  /// >= `sep` now live in `right`, which covers [sep, hi). The caller holds
  /// the lock of `left` (so no other split of `left` can run). Splits inner
  /// nodes as needed, growing the root. Thread-safe against every other
  /// method but build*().
  ///
  /// How: inner writers serialize on one mutex; the level-1 node routing
  /// the keys just below `sep` (those in [lo, sep), found by counting the
  /// separators < sep) must hold `left`. A string `sep` is copied into a new
  /// separator record first (8 + len bytes, rounded up to 8). A full node is
  /// split (it keeps the lower half, a new right node the upper half, the
  /// middle separator goes up), recursively; a full root gets a new root.
  /// Every existing node that changes is write-locked (vlock::lock) before
  /// the first change and unlocked (version + 1) after the last, so every
  /// optimistic reader that overlapped fails validation; new nodes are
  /// complete before they are published (release store of the child or
  /// root pointer). No node is freed or made obsolete.
  /// A caller bug (tree not built, `left` not covering the keys just below
  /// sep, `sep` not strictly inside left's range, sep the smallest key,
  /// right == 0) aborts with a message.
  ///
  /// `hint`: the Route find()/find_single() gave for a key of `left` (or
  /// nullptr). When its level-1 node is unchanged since (validate(*hint),
  /// checked under the mutex, which every inner writer holds), has a free
  /// slot, and `sep` falls between two of its separators (not in its first
  /// or last child, whose other bound is in an ancestor), that node is the
  /// whole change: the descent from the root is skipped (about 1,000
  /// instructions per lbtree leaf split at 200k keys, callgrind), and the
  /// checks on `left` and `sep` are as complete as after it. Otherwise the
  /// descent runs as without a hint. A valid hint whose node routes `sep`
  /// to another child than `left` is a caller bug and aborts, as above.
  void insert_separator(uint64_t left, K sep, uint64_t right, const Route* hint = nullptr);

  /// All leaves in key order with their low keys (the first is 0 or ""), as
  /// the tree routes them. Not safe against concurrent writers.
  std::vector<LeafRef> leaves() const;

  /// Checks every invariant (separators strictly ascending within a node and
  /// bounded by the parent's, counts in range, levels consistent, no node
  /// left locked). Ok, or Corruption naming the first violation. Not safe
  /// against concurrent writers.
  Status verify() const;

  /// The check a selectively persistent index's verify() makes of its DRAM
  /// inner nodes against its PM leaf chain: verify(), then that the inner
  /// nodes route exactly the leaves `chain` (offsets in chain order, every
  /// leaf routed), and that low_of(leaf), the leaf's stored low key (a K or
  /// an OwnedKey<K>), equals its separator. On success *routes holds leaves(). Errors: Corruption
  /// "<index>: ..." naming the first mismatch.
  template <class LowOf>
  Status verify_routes(std::string_view index, std::span<const uint64_t> chain, LowOf&& low_of,
                       std::vector<LeafRef>* routes) const {
    if (Status s = verify(); !s.ok()) return s;
    *routes = leaves();
    if (routes->size() != chain.size()) {
      return Status::Corruption(std::string(index) + ": the inner nodes route " +
                                std::to_string(routes->size()) + " leaves, the chain holds " +
                                std::to_string(chain.size()));
    }
    for (size_t i = 0; i < chain.size(); ++i) {
      if ((*routes)[i].second != chain[i]) {
        return Status::Corruption(std::string(index) + ": the inner nodes route leaf " +
                                  hex((*routes)[i].second) + " where the chain holds " +
                                  hex(chain[i]));
      }
      if (low_of(chain[i]) != (*routes)[i].first) {
        return Status::Corruption(std::string(index) + ": low key of leaf " + hex(chain[i]) +
                                  " differs from its separator");
      }
    }
    return Status::Ok();
  }

  /// Debug listing of every node, breadth-first from the root, one line per
  /// node: level, separator count, leftmost child, then key:child pairs
  /// (keys in decimal, strings quoted with quote_input; leaf offsets at
  /// level 1, breadth-first node numbers above). Two trees
  /// with equal dumps have the same shape and separators. Not safe against
  /// concurrent writers.
  std::string dump() const;

  /// Separators per node: (node_size - 16) / 16 (512 B -> 31, 256 B -> 15; children one
  /// more).
  uint32_t capacity() const;
  /// Children per inner node at bulk-load fill factor `fill` (in (0, 1]):
  /// ceil(fill * (capacity() + 1)), at least 2, at most capacity() + 1.
  uint32_t children_per_node(double fill) const;

  /// Levels of inner nodes (0 when not built; 1 = the root's children are
  /// leaves).
  uint32_t height() const;
  /// Inner nodes allocated.
  uint64_t nodes() const;
  /// DRAM held by the inner nodes and (strings) their separator records,
  /// bytes.
  uint64_t dram_bytes() const;

 private:
  std::unique_ptr<TreeImpl<K>> impl_;
};

/// The integer-keyed inner tree (fptree, lbtree, wbtree).
using InnerTree = InnerTreeT<uint64_t>;
/// The byte-string-keyed inner tree.
using InnerTreeString = InnerTreeT<std::string_view>;

extern template class InnerTreeT<uint64_t>;
extern template class InnerTreeT<std::string_view>;

}  // namespace nvindex::inner
