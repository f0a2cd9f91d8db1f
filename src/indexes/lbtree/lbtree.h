// lbtree: the LB+-tree (Liu, Chen, Wang, "LB+-Trees: Optimizing Persistent
// Index Performance on 3DXPoint Memory", VLDB 2020, §3): 256 B (or 512, 768,
// 1024 B) leaves in PM with a slot bitmap, one-byte fingerprints compared with
// SIMD, entry moving (Algorithm 2), logless splits with alternate sibling
// pointers (Algorithm 3), distributed headers for multi-256 B leaves (§3.4);
// inner nodes in DRAM (selective persistence, indexes/common/inner_tree.h),
// rebuilt from the leaf chain on recovery in parallel from anchor leaves
// (§3.5). The leaf layout table is in leaf.h, where the leaf is declared; the
// crash argument of every persistent update is where the update is (leaf.h,
// lbtree.cc).
//
// Persistent layout (pool layout name "lbtree", "lbtree:string" for
// byte-string keys):
//
//   The root object: byte table directly above its struct below.
//
// String keys (LbTreeT<std::string_view>, docs/indexes/lbtree.md "String
// keys"): the same leaves; a slot's key word is the pool offset of a key
// record (common/key_record.h) and its fingerprint the low byte of XXH3 over
// the whole key; the DRAM inner nodes hold their own copies of the
// separators (inner::InnerTreeString). Every live slot owns its record.
//
// Anchors (§3.5, parallel rebuild): up to 59 leaves spread evenly over the
// leaf chain. Recomputed after a bulk load, after recovery and at a clean
// close: the inactive array is written and persisted, then the selector is
// flipped by NAW, so a crash leaves the old or the new array. Because no leaf
// is ever unlinked (no merge, as in the paper), every leaf an anchor names
// stays on the chain, in the same order relative to the others: an anchor
// can never dangle. (The "updated when a leaf they name is emptied"
// is therefore not needed: an emptied leaf stays on the chain and remains a
// valid segment boundary.)
//
// Concurrency. One DRAM version lock per leaf (LockTable, OLFIT-style):
// writers take it by CAS for mutual exclusion and hold it while they modify
// and persist the leaf; optimistic readers read the version, search the
// leaf, validate the version (slot reuse makes the PM header word
// ABA-prone, so readers cannot validate on it). The paper's PM lock bit
// (which its RTM transactions read) is not used: see version_lock.h. Routing:
// the InnerTree's Route/validate protocol (inner_tree.h). A writer:
//   find -> lock the version (CAS) -> validate(route) (else unlock, retry)
//   -> modify, persist -> unlock the version (a release store).
// A split holds the leaf (and the new leaf) until InnerTree::insert_separator
// returns. Every flush happens before the lock is released.
//
// Thread-safety: every Index method may be called concurrently; verify(),
// bulk_load() and the destructor need no concurrent calls.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "indexes/common/inner_tree.h"
#include "indexes/common/key_record.h"
#include "indexes/common/persistent.h"
#include "indexes/common/version_lock.h"
#include "indexes/lbtree/leaf.h"
#include "nvindex/index.h"
#include "nvindex/pm/pool.h"

namespace nvindex {

inline constexpr char kLbTreeDescription[] =
    "LB+-tree: 256 B PM leaves with entry moving and logless splits, DRAM inner nodes (Liu et al., "
    "VLDB'20)";

/// Factory for "lbtree". options.pool is required (InvalidArgument otherwise)
/// and must have layout "lbtree" (InvalidArgument naming it otherwise). On a
/// pool with no root: creates an empty tree (one empty head leaf) with
/// options.node_size = leaf bytes, 256, 512, 768 or 1024 (else
/// InvalidArgument naming the valid sizes). On a pool with a root: recovers
/// with options.threads threads (>= 1; the stored leaf size wins). Errors:
/// Corruption (bad root object, anchor or leaf), OutOfSpace (pool full at
/// creation).
Status make_lbtree(const IndexOptions& options, std::unique_ptr<Index<uint64_t>>* out);
/// Factory for "lbtree" with byte-string keys: as make_lbtree, in a pool of
/// layout pool_layout("lbtree", KeyType::kString) ("lbtree:string").
Status make_lbtree_string(const IndexOptions& options,
                          std::unique_ptr<Index<std::string_view>>* out);

namespace lbtree {

/// Pool layout name of the integer-key tree, and the index name in messages;
/// the string-key tree's layout is pool_layout(kLayout, KeyType::kString).
inline constexpr char kLayout[] = "lbtree";
/// Root object magic: "LBTREEv1" as a little-endian word.
inline constexpr uint64_t kRootMagic = 0x3176454552544c42ull;
/// Anchor leaves per array.
inline constexpr uint32_t kAnchorSlots = 59;
/// Bytes of the root object (one allocator block).
inline constexpr uint32_t kRootBytes = 1024;
/// Inner node bytes (DRAM): 31 separators. The paper's non-leaf node is 256 B
/// (15); 512 B makes the inner tree one level shorter on 2M random keys
/// (4 inner levels instead of 5) and lookups about 1.2x faster (issue 8,
/// measured on AMD EPYC); DRAM nodes have no 256 B XPLine to match.
inline constexpr uint32_t kInnerNodeBytes = 512;

/// One anchor array (480 B, 64 B aligned within the root object).
struct AnchorArray {
  uint64_t count;               ///< anchors in use, 1..kAnchorSlots
  uint64_t leaf[kAnchorSlots];  ///< leaf offsets in chain order
};
static_assert(offsetof(AnchorArray, count) == 0 && offsetof(AnchorArray, leaf) == 8);
static_assert(sizeof(AnchorArray) == 480);

/// The root object (one 1024 B allocator block; Pool::root() -> it):
///   offset size  field
///   ------ ----  -----------------------------------------------------------
///        0    8  magic kRootMagic ("LBTREEv1"), written once
///        8    8  leaf size, bytes (256, 512, 768 or 1024), written once
///       16    8  head leaf offset: the leftmost leaf; written once (splits
///                add leaves to the right of an existing leaf, bulk load
///                fills the head leaf in place, there is no merge)
///       24    8  anchor selector (0 or 1): which anchor array is live;
///                changed only by NAW
///       32   32  reserved, zero
///       64  480  anchor array 0: word 0 = count n (1..59), words 1..n = leaf
///                offsets in chain order, the first = the head leaf
///      544  480  anchor array 1 (same format)
struct RootObject {
  uint64_t magic;
  uint64_t leaf_size;
  uint64_t head;
  std::atomic<uint64_t> selector;
  uint64_t reserved[4];
  AnchorArray anchors[2];
};
static_assert(offsetof(RootObject, magic) == 0);
static_assert(offsetof(RootObject, leaf_size) == 8);
static_assert(offsetof(RootObject, head) == 16);
static_assert(offsetof(RootObject, selector) == 24);
static_assert(offsetof(RootObject, reserved) == 32);
static_assert(offsetof(RootObject, anchors) == 64);
static_assert(offsetof(RootObject, anchors) + sizeof(AnchorArray) == 544);
static_assert(sizeof(RootObject) == kRootBytes);

/// True for the leaf sizes lbtree accepts (256, 512, 768, 1024 bytes).
inline bool valid_leaf_size(uint64_t s) { return s == 256 || s == 512 || s == 768 || s == 1024; }

/// The LB+-tree over keys K (uint64_t or std::string_view). Created by
/// make_lbtree() / make_lbtree_string().
///
/// The 8-byte key word of a slot is the key itself for K = uint64_t, and for
/// K = std::string_view the pool offset of the key's record (key_record.h).
/// Record ownership (string keys): every live slot owns its record; entry
/// moving and splits copy a key word into a free (invisible) slot and clear
/// the old bit in the same NAW that sets the new one, or publish the new
/// leaf in the NAW that clears the old bits, so in every durable state
/// exactly one live slot names each record, and recovery marks it once.
/// A removed key's record is retired after the remove's NAW and freed by
/// RecordReclaimer (key_record.h: when no other operation is in flight).
/// Separators and the DRAM low keys are DRAM copies, never records.
/// Integer keys compile to the code they had before the template.
template <class K>
class LbTreeT final : public PersistentIndexOf<K> {
 public:
  /// True for byte-string keys (key words are key-record offsets).
  static constexpr bool kStringKeys = std::is_same_v<K, std::string_view>;
  /// A (low key, leaf) pair of the inner tree.
  using LeafRef = typename inner::InnerTreeT<K>::LeafRef;

  /// `fill`: IndexOptions::fill_factor, (0, 1] (checked by make_index), the
  /// fill of the inner nodes built by bulk load and recovery.
  LbTreeT(pm::Pool* pool, double fill);
  /// Clean close: recomputes the anchors (persisted, selector by NAW) so the
  /// next recovery splits the chain evenly; frees retired key records.
  /// Touches nothing else.
  ~LbTreeT() override;

  /// The single-threaded contract (IndexOptions::threads == 1: the caller
  /// promises one calling thread, as absl-btree's NoLock instance): lookups
  /// and writers descend with InnerTree::find_single and take no leaf
  /// version (no lock CAS, no version read or validation, no DRAM version
  /// word fetched), and info().caps.thread_safe is false. The persistent
  /// protocol is the same (the version words are DRAM only, never
  /// persisted). Set by the factory before create()/recover().
  void set_single_threaded(bool single) { single_ = single; }

  /// Creates an empty tree (root object + one empty head leaf) in a pool
  /// with no root; leaf_size checked by the caller. Errors: OutOfSpace.
  Status create(uint32_t leaf_size);
  /// Recovers the tree of a pool with a root (lbtree.cc "Recovery") with
  /// `threads` threads (>= 1). Errors: Corruption (naming the offending
  /// offset), OutOfSpace.
  Status recover(unsigned threads);

  /// String keys longer than kMaxKeyBytes: insert/update/remove return
  /// InvalidArgument (nothing changed); lookups find nothing.
  Status insert(K key, Value value) override;
  Status update(K key, Value value) override;
  Status remove(K key) override;
  std::optional<Value> lookup(K key) override;
  size_t scan(K start, size_t count, std::vector<std::pair<OwnedKey<K>, Value>>* out) override;
  std::optional<std::pair<OwnedKey<K>, Value>> find_last_less_than(K key) override;
  /// Bottom-up load at IndexOptions::fill_factor (lbtree.cc "Bulk load").
  /// Requires a fresh tree (only the empty head leaf): InvalidArgument
  /// otherwise, also for keys not strictly ascending (or longer than
  /// kMaxKeyBytes); OutOfSpace leaves the tree empty.
  Status bulk_load(std::span<const std::pair<K, Value>> sorted) override;
  IndexInfo info() const override;
  Status verify(VerifyReport* report) const override;
  std::vector<std::pair<std::string, std::string>> ablation_notes() const override;

  // --- for tests and tools (not for users of the index) ---
  /// The leaf at pool offset `off`.
  Leaf leaf(uint64_t off) const { return Leaf{pool_->template ptr<Block>(off), blocks_}; }
  /// Offset of the head (leftmost) leaf.
  uint64_t head() const { return root_->head; }
  /// Leaf bytes.
  uint32_t leaf_size() const { return leaf_size_; }
  /// The leaves as the inner nodes route them, (low key, leaf) in key order.
  std::vector<LeafRef> routed_leaves() const { return tree_->leaves(); }
  /// The live anchors (leaf offsets, chain order).
  std::vector<uint64_t> anchors() const;
  /// Wall time of the last recovery's rebuild (chain walk + inner nodes),
  /// seconds, and the threads it used; leaves found on the chain.
  double rebuild_seconds() const { return rebuild_seconds_; }
  unsigned rebuild_threads() const { return rebuild_threads_; }
  uint64_t chain_leaves() const { return leaves_.load(std::memory_order_relaxed); }
  /// String keys: removed keys' records retired and not yet freed (0 for
  /// integer keys).
  size_t retired_records() const { return reclaimer_.retired(); }

 private:
  using PersistentIndexOf<K>::pool_;
  /// Counts an operation in flight for the string keys' record reclamation;
  /// no code for integer keys.
  using Guard = RecordReclaimer::InFlight<kStringKeys>;

  // Key policy: the only places where the two key types differ.
  /// The key a key word names (slot_key, key_record.h).
  K key_of(uint64_t word) const { return slot_key<K>(*pool_, word); }
  /// Finds `key` (fingerprint f) in leaf l: leaf_find_fp with the key type's
  /// equality. Always inlined (on this declaration: GCC ignores attributes
  /// on a class template member's out-of-class definition), so the integer
  /// instance's writers are the code they were before the template.
  __attribute__((always_inline)) inline bool find_in(const Leaf& l, K key, uint8_t f,
                                                     SlotRef* where, uint64_t* value) const;

  /// Algorithm 2 into leaf l (leaf_insert_fp), with the block count fixed
  /// at compile time for 256 B leaves. Always inlined, as find_in.
  __attribute__((always_inline)) inline bool insert_in(const Leaf& l, uint8_t f, uint64_t word,
                                                       Value value);

  inner::Route lock_leaf_for(K key);
  void unlock_leaf(uint64_t off);
  /// Hints the CPU to fetch the leaf's lines and its DRAM version word in
  /// parallel (before a lookup reads them, or a writer's lock CAS, a full
  /// barrier, would take their misses one at a time); single-threaded, the
  /// leaf's lines only.
  void prefetch_leaf(uint64_t off) const;
  /// Algorithm 3: splits the full leaf `at` routes to (locked by the
  /// caller, unlocked here) and inserts (key, value) into the half that
  /// covers it: into the new leaf as part of the split, before its commit
  /// NAW, or into the old one after it (lbtree.cc).
  Status split_and_insert(const inner::Route& at, K key, uint8_t f, uint64_t word, Value value);
  void write_anchors(const std::vector<uint64_t>& anchors);
  std::vector<uint64_t> spread_anchors() const;
  uint32_t block_class() const;
  bool leaf_offset_ok(uint64_t off) const;

  /// One leaf as recovery's chain walk found it: its offset, smallest and
  /// largest key (meaningless when empty) and its key count.
  struct WalkedLeaf {
    uint64_t off;
    OwnedKey<K> min, max;
    uint64_t keys;
    bool empty;
  };
  /// Recovery phases (lbtree.cc, "Recovery"): the root object and the live
  /// anchor array; one segment's walk (from anchor i to anchor i+1); the
  /// walk of every segment on `nthreads` threads; the chain-order check and
  /// the DRAM rebuild; the anchors spread again.
  Status open_root_and_anchors(std::vector<uint64_t>* anchor);
  Status walk_segment(const std::vector<uint64_t>& anchor, size_t i, pm::Allocator& alloc,
                      std::vector<WalkedLeaf>* out);
  Status walk_chain(const std::vector<uint64_t>& anchor, unsigned nthreads, pm::Allocator& alloc,
                    std::vector<std::vector<WalkedLeaf>>* seg);
  Status rebuild_from(const std::vector<std::vector<WalkedLeaf>>& seg, unsigned nthreads);
  /// After a crash, integer keys: the lost-leaf check (common/persistent.h,
  /// check_lost_leaves) against the walked leaves `seg`. Errors: Corruption.
  Status check_lost_leaves_of(pm::Allocator& alloc,
                              const std::vector<std::vector<WalkedLeaf>>& seg);
  void respread_anchors(const std::vector<std::vector<WalkedLeaf>>& seg,
                        const std::vector<uint64_t>& anchor);

  RootObject* root_ = nullptr;
  uint32_t leaf_size_ = 0;
  uint32_t blocks_ = 1;
  const double fill_;
  std::unique_ptr<inner::InnerTreeT<K>> tree_;
  std::unique_ptr<LockTable> versions_;  ///< DRAM version per leaf
  std::unique_ptr<LockTable> lows_;      ///< DRAM word per leaf: its low key (LowKeys)
  LowKeys<K> low_keys_;                  ///< the DRAM low keys lows_ names (key_record.h)
  RecordReclaimer reclaimer_;            ///< string keys: removed keys' records
  std::atomic<uint64_t> leaves_{0};      ///< leaves on the chain
  bool ready_ = false;                   ///< created or recovered successfully
  bool single_ = false;                  ///< set_single_threaded: one calling thread
  double rebuild_seconds_ = 0;
  unsigned rebuild_threads_ = 0;
};

/// The integer-key tree (the tests' and tools' name).
using LbTree = LbTreeT<uint64_t>;
/// The string-key tree.
using LbTreeString = LbTreeT<std::string_view>;

extern template class LbTreeT<uint64_t>;
extern template class LbTreeT<std::string_view>;

}  // namespace lbtree
}  // namespace nvindex
