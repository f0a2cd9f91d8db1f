// fptree: FP-Tree, a hybrid SCM-DRAM persistent and concurrent B+-tree.
// Source: Oukid, Lasperas, Nica, Willhalm, Lehner, "FPTree: A Hybrid
// SCM-DRAM Persistent and Concurrent B-Tree for Storage Class Memory",
// SIGMOD 2016: §3 (design: selective persistence, unsorted leaves with a
// bitmap, one-byte fingerprints, the split micro-log), §4 (leaf insert,
// split, delete, recovery). fptree.cc holds the crash argument of every
// persistent update where the update is; docs/indexes/fptree.md summarises
// the protocols and our departures from the paper.
//
// Placement (selective persistence, paper §3): the leaves live in PM, the
// inner nodes in DRAM (indexes/common/inner_tree.h), rebuilt from the leaf
// chain on recovery.
//
// Persistent layout (pool layout name "fptree", "fptree:string" for
// byte-string keys):
//
//   The root object and the leaf: byte tables directly above their structs
//   below.
//
// String keys (FpTreeT<std::string_view>, docs/indexes/fptree.md "String
// keys"; the paper's design for variable-size keys: the leaf slot holds a
// pointer to the persisted key, the fingerprint is taken over the key): the
// same leaves; a slot's key word is the pool offset of a persisted key record
// (common/key_record.h) and its fingerprint the low byte of XXH3 over the
// whole key, so a lookup reads a record only for a slot whose fingerprint
// matches. The DRAM inner nodes hold their own copies of the separators
// (inner::InnerTreeString). Every live slot owns its record.
//
// Concurrency (no TSX: version locks, like lbtree): a writer takes the leaf's
// DRAM version lock (LockTable) by CAS and holds it while it modifies and
// persists the leaf; readers are optimistic (read
// the version, search, validate the version, then validate the inner-tree
// route). Inner nodes follow InnerTree's Route/validate protocol. Leaves are
// never merged nor freed while the index lives (as in the paper: a leaf left
// empty by deletes stays in the chain; recovery unlinks empty leaves).
//
// Thread-safety: every Index method may be called concurrently, except
// bulk_load() (on an empty index, with no concurrent calls) and verify()
// (no concurrent writers).
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

#include "indexes/common/entry.h"
#include "indexes/common/inner_tree.h"
#include "indexes/common/key_record.h"
#include "indexes/common/persistent.h"
#include "indexes/common/version_lock.h"
#include "nvindex/index.h"
#include "nvindex/pm/allocator.h"
#include "nvindex/pm/pool.h"

namespace nvindex {

inline constexpr char kFpTreeDescription[] =
    "FP-Tree: unsorted PM leaves with fingerprints, DRAM inner nodes (Oukid et al., SIGMOD'16)";

/// Factory for "fptree". options.pool is required (InvalidArgument
/// otherwise) and must have layout "fptree" (InvalidArgument naming both
/// layouts otherwise). On a pool with no root: creates an empty tree with
/// leaves of options.node_size bytes (256, 512, 768 or 1024; anything else is
/// InvalidArgument naming the valid sizes). On a pool with a root: recovers
/// (finishes or undoes a split in flight from its micro-log, clears lock
/// bytes, unlinks empty leaves, rebuilds the DRAM inner nodes); the stored
/// node size wins over options.node_size. Errors: Corruption (bad root object
/// or leaf chain), OutOfSpace (pool full at creation).
Status make_fptree(const IndexOptions& options, std::unique_ptr<Index<uint64_t>>* out);

/// Factory for "fptree" with byte-string keys (0..kMaxKeyBytes bytes, byte
/// order): as make_fptree, in a pool of layout pool_layout("fptree",
/// KeyType::kString) ("fptree:string").
Status make_fptree_string(const IndexOptions& options,
                          std::unique_ptr<Index<std::string_view>>* out);

namespace fptree {

/// Pool layout name.
inline constexpr char kLayout[] = "fptree";
/// Root object magic: "FPTREEv1" as a little-endian word.
inline constexpr uint64_t kRootMagic = 0x3176454552545046ull;
/// Split micro-logs in the root object (concurrent splits; a splitter waits
/// for a free log when all are in use).
inline constexpr uint32_t kSplitLogs = 12;
/// Bytes of the root object's allocator block.
inline constexpr uint32_t kRootBytes = 256;
/// Byte offset of the fingerprint array in a leaf.
inline constexpr uint32_t kFpOffset = 17;
/// Bytes per entry {key, value}.
inline constexpr uint32_t kEntryBytes = 16;
/// Largest slot count of any leaf (1024 B leaves).
inline constexpr uint32_t kMaxSlots = 47;

/// One split micro-log (paper §3-4, the split micro-log): 16 B, in one line.
/// Active iff cur != 0. Written: new_leaf, then cur (commit), persist;
/// reset: cur = 0, persist.
struct SplitLog {
  std::atomic<uint64_t> cur;       ///< offset of the leaf being split
  std::atomic<uint64_t> new_leaf;  ///< offset of the new (right) leaf
};
static_assert(sizeof(SplitLog) == 16);

/// The root object (one 256 B allocator block; Pool::root() -> it):
///   offset size  field
///   ------ ----  -----------------------------------------------------------
///        0    8  magic kRootMagic ("FPTREEv1"), written once
///        8    8  leaf node_size, bytes (256, 512, 768 or 1024), written once
///       16    8  head: offset of the first leaf (std::atomic; changed only by
///                NAW, by bulk_load)
///       24    8  number of split micro-logs (kSplitLogs), written once
///       32   32  reserved, zero
///       64  192  kSplitLogs = 12 split micro-logs of 16 B (4 per line):
///                {current leaf, new leaf}; a log is active iff its current
///                leaf word is non-zero (the commit word, stored last)
struct RootObject {
  uint64_t magic;
  uint64_t node_size;
  std::atomic<uint64_t> head;
  uint64_t nlogs;
  uint64_t reserved[4];
  SplitLog logs[kSplitLogs];
};
static_assert(offsetof(RootObject, magic) == 0);
static_assert(offsetof(RootObject, node_size) == 8);
static_assert(offsetof(RootObject, head) == 16);
static_assert(offsetof(RootObject, nlogs) == 24);
static_assert(offsetof(RootObject, reserved) == 32);
static_assert(offsetof(RootObject, logs) == 64);
static_assert(sizeof(RootObject) == kRootBytes);

/// One entry slot: the shared 16 B slot (common/entry.h).
using nvindex::Entry;
static_assert(sizeof(Entry) == kEntryBytes);

/// A leaf (one allocator block of node_size bytes; 768 B leaves take a
///   1 KiB block). Line 0 is the header; entries never straddle a line:
///   offset size  field
///   ------ ----  -----------------------------------------------------------
///        0    8  bitmap: bit i set = slot i holds a live entry (the commit
///                word of every insert and delete: one aligned 8 B store)
///        8    8  sibling: offset of the next leaf in key order (0 = last)
///       16    1  lock byte: the paper's writer lock; always written 0
///                (writers lock a DRAM version, see Concurrency); recovery
///                clears a 1 left by an earlier version's crash
///       17    C  fingerprints: fp[i] = low byte of XXH3_64bits(key of slot i)
///                (string keys: of the key's bytes, common/fingerprint.h)
///   E = round_up(17 + C, 16)
///        E  16*C entries {key, value}, slot i at E + 16 i (string keys:
///                key = the pool offset of the key's record, key_record.h)
///   node_size  slots C  E    entries in line 0   unused tail
///   ---------  -------  ---  -----------------   -----------
///      256        14    32           2              0 B
///      512        29    48           1              0 B
///      768        44    64           0              0 B
///     1024        47    64           0            208 B
///   C is the largest slot count whose fingerprints fit in line 0 next to the
///   bitmap, sibling pointer and lock byte (so an insert commits with one persist
///   of line 0, and a split with one more); at 1024 B that limit (47), not the
///   block, bounds the slots.
/// This struct is line 0, the header (the first 17 + C bytes); entries
/// follow at Layout::entries_offset.
struct Leaf {
  std::atomic<uint64_t> bitmap;
  std::atomic<uint64_t> sibling;
  std::atomic<uint8_t> lock;
  std::atomic<uint8_t> fp[kMaxSlots];
};
static_assert(sizeof(Leaf) == 64);
static_assert(offsetof(Leaf, bitmap) == 0);
static_assert(offsetof(Leaf, sibling) == 8);
static_assert(offsetof(Leaf, lock) == 16);
static_assert(offsetof(Leaf, fp) == kFpOffset);
static_assert(offsetof(SplitLog, cur) == 0 && offsetof(SplitLog, new_leaf) == 8);
static_assert(offsetof(Entry, key) == 0 && offsetof(Entry, value) == 8);

/// Shape of a leaf of a given node size (see the table above Leaf).
struct Layout {
  uint32_t node_size = 0;       ///< leaf bytes (256, 512, 768, 1024)
  uint32_t block = 0;           ///< allocator block bytes (768 -> 1024)
  uint32_t slots = 0;           ///< C, entry slots
  uint32_t entries_offset = 0;  ///< E, byte offset of slot 0
  /// The layout of node_size, or false when node_size is not one of the
  /// valid sizes.
  static bool of(uint32_t node_size, Layout* out);
};

/// The FP-Tree over keys K (uint64_t or std::string_view). Created by
/// make_fptree() / make_fptree_string().
///
/// The 8-byte key word of a slot is the key itself for K = uint64_t, and for
/// K = std::string_view the pool offset of the key's record (key_record.h).
/// Record ownership (string keys): every live slot owns its record. A split
/// copies key words into the new leaf N and clears them from the old leaf L
/// in the bitmap store that follows the link; in the one durable state where
/// both name a record (N linked, L's bitmap not yet durable) the split's
/// micro-log is active and recovery trims L before it marks any record, so
/// recovery marks each record once. A removed key's record is retired after
/// the remove's persisted bitmap store and freed by RecordReclaimer
/// (key_record.h: when no other operation is in flight). Separators and the
/// DRAM low keys are DRAM copies, never records. Integer keys keep their
/// protocols and PM writes (the counters of a YCSB-A run are identical to
/// the untemplated tree's); the compiled code differs in inlining (find_slot
/// inlined, the fingerprint computed once per operation), at the same speed
/// within this machine's noise (docs/indexes/fptree.md, "String keys").
template <class K>
class FpTreeT final : public PersistentIndexOf<K> {
 public:
  /// True for byte-string keys (key words are key-record offsets).
  static constexpr bool kStringKeys = std::is_same_v<K, std::string_view>;
  /// A (low key, leaf) pair of the inner tree.
  using LeafRef = typename inner::InnerTreeT<K>::LeafRef;

  /// `fill`: IndexOptions::fill_factor, (0, 1] (checked by make_index),
  /// used by bulk_load().
  FpTreeT(pm::Pool* pool, double fill);
  /// Clean close: the pool's close record (keys); frees retired key records.
  ~FpTreeT() override;

  /// Creates an empty tree (one empty head leaf) in a pool with no root
  /// (node_size checked by the caller). Errors: OutOfSpace.
  Status create(uint32_t node_size);
  /// Recovers the tree of a pool with a root (see fptree.cc "Recovery").
  /// Errors: Corruption (naming the offending leaf, log or key record).
  Status recover();

  /// String keys longer than kMaxKeyBytes: insert/update/remove return
  /// InvalidArgument (nothing changed); lookups find nothing.
  Status insert(K key, Value value) override;
  Status update(K key, Value value) override;
  Status remove(K key) override;
  std::optional<Value> lookup(K key) override;
  size_t scan(K start, size_t count, std::vector<std::pair<OwnedKey<K>, Value>>* out) override;
  std::optional<std::pair<OwnedKey<K>, Value>> find_last_less_than(K key) override;
  /// Bottom-up load (caps.bulk_load): leaves filled to ceil(fill * C)
  /// entries (at least 1), each persisted (string keys: their key records
  /// too), chained, then published by one NAW of the root object's head; the
  /// old empty chain is freed. Errors: InvalidArgument (index not empty,
  /// keys not strictly ascending, a string key over kMaxKeyBytes),
  /// OutOfSpace (the index stays empty). Not concurrent with other calls.
  Status bulk_load(std::span<const std::pair<K, Value>> sorted) override;
  IndexInfo info() const override;
  /// Walks the leaf chain (bitmap within C slots, fingerprints match keys,
  /// keys unique, every key of a leaf below every key of the next, lock
  /// bytes free, no active split log; string keys: every live slot names a
  /// key record) and checks that the inner tree routes exactly the chain's
  /// leaves, each key inside its leaf's range.
  /// Report: leaves = chain leaves, inner_nodes = InnerTree::nodes(),
  /// height = inner levels + 1; string keys: pm_bytes = leaf blocks + key
  /// record blocks (the crash lab's leak check), 0 for integer keys.
  Status verify(VerifyReport* report) const override;
  /// Why the crash lab's ablation self-test cannot catch the removal of some
  /// flushes and fences (see fptree.cc "Ablation notes").
  std::vector<std::pair<std::string, std::string>> ablation_notes() const override;

  /// Entry slots per leaf (C).
  uint32_t slots() const { return layout_.slots; }
  /// The leaf at pool offset `off` (never 0).
  Leaf* leaf(uint64_t off) const { return reinterpret_cast<Leaf*>(pool_->base() + off); }
  /// Slot i of the leaf at `off`.
  Entry* entry(uint64_t off, uint32_t i) const {
    return reinterpret_cast<Entry*>(pool_->base() + off + layout_.entries_offset + i * kEntryBytes);
  }
  /// String keys: removed keys' records retired and not yet freed (0 for
  /// integer keys).
  size_t retired_records() const { return reclaimer_.retired(); }

 private:
  using PersistentIndexOf<K>::pool_;
  /// Counts an operation in flight for the string keys' record reclamation;
  /// no code for integer keys.
  using Guard = RecordReclaimer::InFlight<kStringKeys>;

  // Key policy: key_of, find_slot and low_keys_ (LowKeys) are where the two
  // key types differ, besides `if constexpr` blocks in split, scan,
  // find_last_less_than, bulk load, recovery and verify.
  /// The key a key word names (slot_key, key_record.h).
  K key_of(uint64_t word) const { return slot_key<K>(*pool_, word); }

  uint64_t head() const { return root_obj_->head.load(std::memory_order_acquire); }
  uint64_t full_mask() const;
  uint64_t match(uint64_t off, uint8_t fp) const;
  /// The live slot holding `key` (fingerprint f) in the leaf at `off`, or
  /// -1. Always inlined (on this declaration: GCC ignores attributes on a
  /// class template member's out-of-class definition): the readers' and
  /// writers' hot path.
  __attribute__((always_inline)) inline int find_slot(uint64_t off, K key, uint8_t f) const;
  void lock_leaf(uint64_t off);
  void unlock_leaf(uint64_t off);
  /// Hints the CPU to fetch the leaf's lines and its DRAM version word in
  /// parallel (before a lookup reads them, or the version lock's CAS, a full
  /// barrier, would take their misses one at a time).
  void prefetch_leaf(uint64_t off) const;
  uint64_t lock_covering(K key);
  void put_slot(uint64_t off, uint32_t slot, uint64_t word, uint8_t f, Value value,
                const char* entry_site, const char* commit_site);
  Status split_insert(uint64_t off, K key, uint8_t f, uint64_t word, Value value);
  uint32_t take_log();
  void release_log(uint32_t i);
  Status check_leaf(uint64_t off, const char* what) const;
  /// String keys: check_key_record of every live slot's word in the leaf at
  /// `off` (before recovery or verify reads a key); no code for integers.
  Status check_records(uint64_t off) const;
  Status walk_chain(std::vector<uint64_t>* chain) const;
  Status rebuild_inner(const std::vector<uint64_t>& chain);
  /// After a crash, integer keys: the lost-leaf check (common/persistent.h,
  /// check_lost_leaves) against the leaf `chain`. Errors: Corruption.
  Status check_lost_leaves_of(pm::Allocator& alloc, const std::vector<uint64_t>& chain);

  RootObject* root_obj_ = nullptr;
  Layout layout_;
  std::unique_ptr<LockTable> versions_;  ///< DRAM version lock per leaf
  std::unique_ptr<LockTable> lows_;      ///< DRAM word per leaf: its low key (LowKeys)
  std::unique_ptr<inner::InnerTreeT<K>> inner_;
  std::atomic<uint32_t> log_busy_{0};  ///< DRAM: bit i = split log i in use
  const double fill_;
  LowKeys<K> low_keys_;        ///< the DRAM low keys lows_ names (key_record.h)
  RecordReclaimer reclaimer_;  ///< string keys: removed keys' records
};

/// The integer-key tree (the tests' and tools' name).
using FpTree = FpTreeT<uint64_t>;
/// The string-key tree.
using FpTreeString = FpTreeT<std::string_view>;

extern template class FpTreeT<uint64_t>;
extern template class FpTreeT<std::string_view>;

}  // namespace fptree
}  // namespace nvindex
