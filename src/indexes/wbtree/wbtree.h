// wbtree: the wB+-tree, a write-atomic B+-tree for persistent memory. Source:
// Chen and Jin, "Persistent B+-Trees in Non-Volatile Main Memory", VLDB 2015
// (§3: unsorted nodes with a bitmap and a slot array; §4.1-4.2: insertion and
// deletion with two NAW sections around a recoverable intermediate state;
// §4.3: undo-redo logging for node splits; §4.4: recovery). wbtree_impl.h holds
// the crash argument of every persistent update where the update is;
// docs/indexes/wbtree.md summarises the protocols and our departures.
//
// Persistent layout (pool layout name "wbtree", "wbtree:string" for
// byte-string keys):
//   The root object, the split log and the node: byte tables directly
//   above their structs below; string keys' key words: WbTreeT.
//   Inner node entry i: child covers [key_i, next key in sorted order); the
//   leftmost child covers [the node's lower bound, smallest key).
//
// Invariant outside an operation: every bitmap has bit 0 set and its slot
// array lists exactly its set entry slots, sorted by key; the log is empty.
// A crash may leave a bitmap with bit 0 clear (its slot array is rebuilt from
// the bitmap and the keys by recovery) or a committed log (redone).
//
// Concurrency (the original is single-threaded; this is the protocol the
// LB+-tree paper's comparison ran it with: leaf locks, optimistic inner-node
// reads). Every node has a version lock (indexes/common/version_lock.h) in a
// DRAM LockTable keyed by its pool offset, so locking writes nothing to PM;
// inner=pm also has a DRAM version lock for the root word (root_lock_).
//  - Readers (lookup, scan, find_last_less_than) take no lock. inner=pm:
//    optimistic lock coupling from the root word down (read the root lock,
//    the root word, the root node's version, validate the root lock; per
//    level: search the node, read the child, validate the node, read the
//    child's version, validate the node again), then search the leaf and
//    validate its version; any failed validation restarts from the root.
//    inner=dram: InnerTree::find, the leaf's version, search, validate the
//    leaf and the route (inner_tree.h). A reader never dereferences a child
//    before its parent validated, and every node word a writer may store
//    concurrently (bitmap, level, leftmost_or_sibling, slot array, entries) is a
//    std::atomic<uint64_t> read with acquire loads; the slot array's bytes
//    are read and written as whole 8-byte words.
//  - Leaf writers (insert without a split, update, remove) lock only the
//    leaf: descend as a reader, lock the leaf's version, validate the parent
//    (inner=pm; the root lock for a root leaf) or the route (inner=dram),
//    else unlock and retry; modify and persist; unlock (version + 1).
//  - SMOs (leaf splits, with every full ancestor and a root growth) use the
//    single split log, so they are serialised on one mutex (smo_mu_, said in
//    IndexInfo). An insert that finds its leaf full unlocks it, takes smo_mu_,
//    descends again (inner nodes and the root word change only under
//    smo_mu_, so this descent needs no validation), locks the leaf and, if it
//    is still full, splits: it locks every node the split changes (the
//    ancestors that split, the parent that receives the separator, the root
//    lock when the root grows) and the new nodes before they become
//    reachable, applies the split exactly as single-threaded (same PM
//    writes), inserts the key into the half that covers it, (inner=dram:
//    InnerTree::insert_separator), then unlocks the new nodes and ancestors
//    and the leaf last. Lock order: smo_mu_, then the leaf, then the rest;
//    leaf writers hold one leaf lock and wait for nothing else, so no
//    deadlock. Readers overlapping an SMO fail validation and restart.
//  - No node is freed while the tree is in use (no merges), so a reader
//    never touches freed memory. String keys: a removed key's record is
//    freed only when no other operation is in flight (RecordReclaimer,
//    common/key_record.h), so a reader never reads a freed record either.
// Thread-safety: insert, update, remove, lookup, scan, find_last_less_than
// and info may be called concurrently; bulk_load, verify and the destructor
// need no concurrent calls. Recovery runs before any operation.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
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
#include "indexes/common/prefetch.h"
#include "indexes/common/version_lock.h"
#include "nvindex/index.h"
#include "nvindex/pm/allocator.h"
#include "nvindex/pm/pool.h"

namespace nvindex {

/// Node sizes wbtree takes (IndexOptions::node_size): 128, 256, 512 or 1024
/// bytes.
namespace wbtree {
inline bool valid_node_size(uint32_t s) { return s == 128 || s == 256 || s == 512 || s == 1024; }
}  // namespace wbtree

inline constexpr char kWbTreeDescription[] =
    "wB+-tree: unsorted PM nodes with bitmap and slot array, undo-redo logged splits; DRAM "
    "version lock per node, optimistic readers, splits serialised on one mutex (Chen and Jin, "
    "VLDB'15)";

/// The values of wbtree's one option, "inner" (the default first).
inline constexpr std::string_view kWbTreeInnerValues[] = {"pm", "dram"};
/// wbtree's options (registry entry).
inline constexpr OptionSpec kWbTreeOptions[] = {
    {"inner", kWbTreeInnerValues,
     "where inner nodes live: pm (the paper's) or dram (rebuilt from the leaves on recovery, "
     "placement selective)"}};

/// Factory for "wbtree". options.pool is required (InvalidArgument otherwise)
/// and must have layout "wbtree" (InvalidArgument naming it otherwise).
/// options.extra["inner"]: "pm" (default: inner nodes in PM, as in the paper)
/// or "dram" (inner nodes in DRAM, rebuilt from the leaf chain on recovery:
/// the LB+-tree paper's selective-persistence comparison); make_index()
/// refuses any other key or value (kWbTreeOptions).
/// On a pool with no root: creates an empty tree with options.node_size
/// (128, 256, 512 or 1024 bytes; else InvalidArgument). On a pool with a
/// root: recovers; the stored node size and inner placement win over the
/// options. Errors: Corruption (bad root object, log or node), OutOfSpace.
Status make_wbtree(const IndexOptions& options, std::unique_ptr<Index<uint64_t>>* out);
/// Factory for "wbtree" with byte-string keys: as make_wbtree, in a pool of
/// layout pool_layout("wbtree", KeyType::kString) ("wbtree:string"); key
/// words are key-record offsets (WbTreeT); both inner placements. Errors: as
/// make_wbtree, and InvalidArgument for a pool of 2^48 bytes or more (a key
/// word holds a 48-bit record offset).
Status make_wbtree_string(const IndexOptions& options,
                          std::unique_ptr<Index<std::string_view>>* out);

namespace wbtree {

/// Pool layout name of the integer-key tree, and the index name in messages;
/// the string-key tree's layout is pool_layout(kLayout, KeyType::kString).
inline constexpr char kLayout[] = "wbtree";
/// Root object magic: "WBTREEv1" as a little-endian word.
inline constexpr uint64_t kRootMagic = 0x3176454552544257ull;
/// Node magic (high 32 bits of the level word): "WBND".
inline constexpr uint32_t kNodeMagic = 0x444e4257u;
/// Bitmap bit 0: the slot array is valid.
inline constexpr uint64_t kValidBit = 1;
/// Most entry slots per node (bitmap bits 1..63).
inline constexpr uint32_t kMaxSlots = 63;
/// Byte offset of the slot array in a node.
inline constexpr uint32_t kSlotArrayOffset = 24;
/// Bytes per entry {key, value}.
inline constexpr uint32_t kEntryBytes = 16;
/// Bytes of the split log block.
inline constexpr uint32_t kLogBytes = 4096;
/// Log state tag of a committed log ("LOGC" << 32); the low 32 bits count
/// the records.
inline constexpr uint64_t kLogCommitted = 0x434f474cull << 32;

/// The root object (one 64 B allocator block; Pool::root() -> it):
///   offset size  field
///   ------ ----  -----------------------------------------------------------
///        0    8  magic kRootMagic ("WBTREEv1"), written once
///        8    8  node_size, bytes (128, 256, 512 or 1024), written once
///       16    8  root word (std::atomic; changed only through the split log
///                or by one NAW): inner=pm: the root node; inner=dram: the
///                first leaf of the leaf chain
///       24    8  offset of the split log (one 4096 B block), written once
///       32    8  inner placement: 0 = inner nodes in PM, 1 = in DRAM; once
///       40   24  reserved, zero
struct RootObject {
  uint64_t magic;
  uint64_t node_size;
  std::atomic<uint64_t> root;
  uint64_t log;
  uint64_t inner_dram;
  uint64_t reserved[3];
};
static_assert(offsetof(RootObject, magic) == 0);
static_assert(offsetof(RootObject, node_size) == 8);
static_assert(offsetof(RootObject, root) == 16);
static_assert(offsetof(RootObject, log) == 24);
static_assert(offsetof(RootObject, inner_dram) == 32);
static_assert(offsetof(RootObject, reserved) == 40);
static_assert(sizeof(RootObject) == 64);

/// One undo-redo log record (24 B): the 8-byte word at pool offset `off`
/// held `old_value` before the split and holds `new_value` after it.
struct LogRecord {
  uint64_t off;
  uint64_t old_value;
  uint64_t new_value;
};
static_assert(sizeof(LogRecord) == 24);

/// The split log (one 4096 B allocator block, reachable from the root object):
///   offset size  field
///   ------ ----  -----------------------------------------------------------
///        0    8  state (std::atomic, written only by NAW): 0 = empty, or
///                kLogCommitted | n = n committed records follow
///        8   56  reserved, zero
///       64  24*  records {word offset in the pool, old value, new value};
///                at most kLogRecords = (4096 - 64) / 24 = 168
struct Log {
  std::atomic<uint64_t> state;
  uint64_t reserved[7];
  LogRecord records[(kLogBytes - 64) / sizeof(LogRecord)];
};
static_assert(offsetof(Log, state) == 0);
static_assert(offsetof(Log, reserved) == 8);
static_assert(offsetof(Log, records) == 64);
static_assert(sizeof(Log) <= kLogBytes);
/// Records the log holds.
inline constexpr uint32_t kLogRecords = (kLogBytes - 64) / sizeof(LogRecord);

/// One entry slot: the shared 16 B slot (common/entry.h).
using nvindex::Entry;
static_assert(sizeof(Entry) == kEntryBytes);

/// A node (one allocator block of node_size bytes):
///   offset size  field
///   ------ ----  -----------------------------------------------------------
///        0    8  bitmap (std::atomic): bit 0 = slot array valid, bit i+1 =
///                entry slot i in use; written only by NAW (or the split log)
///        8    8  level (low 32 bits, 0 = leaf) | kNodeMagic << 32; once
///       16    8  leftmost_or_sibling: leaf: its sibling, the next leaf (0 =
///                last); inner node: its leftmost child
///       24  1+c  slot array: byte 24 = count n, bytes 25..24+n = entry slot
///                indices in ascending key order; meaningful only while the
///                bitmap's bit 0 is set; read and written only as the 8-byte
///                words of bytes 24..E-1 (atomic: optimistic readers)
///        E  16*c entries {key, value-or-child}, E = 24+1+c rounded up to 16,
///                so no entry straddles a 64 B line
///   capacity c (slots) and E (bytes) per node size:
///     128 B -> c = 6, E = 32;   256 B -> c = 13, E = 48;
///     512 B -> c = 28, E = 64;  1024 B -> c = 58, E = 96   (c <= 63)
/// This struct is the 24 B header; the slot array and the entries follow.
/// Atomic words: optimistic readers load them while a writer may store them
/// (level_magic is written once, before the node is published).
struct Node {
  std::atomic<uint64_t> bitmap;
  std::atomic<uint64_t> level_magic;  ///< level (low 32 bits) | kNodeMagic << 32
  /// Leaf: its sibling (the next leaf, 0 = last); inner node: its leftmost
  /// child (one word, as in the paper's node layout).
  std::atomic<uint64_t> leftmost_or_sibling;
  /// Level (0 = leaf).
  uint32_t level() const {
    return static_cast<uint32_t>(level_magic.load(std::memory_order_acquire));
  }
  /// Node magic (kNodeMagic in a valid node).
  uint32_t magic() const {
    return static_cast<uint32_t>(level_magic.load(std::memory_order_acquire) >> 32);
  }
};
static_assert(offsetof(Node, bitmap) == 0);
static_assert(offsetof(Node, level_magic) == 8);
static_assert(offsetof(Node, leftmost_or_sibling) == 16);
static_assert(sizeof(Node) == kSlotArrayOffset);
static_assert(offsetof(Entry, key) == 0 && offsetof(Entry, value) == 8);
static_assert(offsetof(LogRecord, off) == 0 && offsetof(LogRecord, old_value) == 8 &&
              offsetof(LogRecord, new_value) == 16);

/// Entry slots of a node of `node_size` bytes (0 for a size that is not
/// 128, 256, 512 or 1024), and in *entries_offset the byte offset of slot 0.
uint32_t capacity_for(uint32_t node_size, uint32_t* entries_offset);

/// The wB+-tree over keys K (uint64_t or std::string_view). Created by
/// make_wbtree() / make_wbtree_string().
///
/// The 8-byte key word of an entry (leaf key or inner separator) is the key
/// itself for K = uint64_t, and for K = std::string_view a key word of
/// common/key_record.h: the pool offset of a key record (length byte +
/// bytes) in the low 48 bits, the key's first two bytes in the top 16, so
/// most comparisons of the slot-array binary search read no record. Word 0
/// (a leaf's lower bound at the left edge) is minus infinity. Both instances
/// share every protocol; only ordering and equality tests differ (keys_, a
/// KeyWords<K> of common/key_record.h), and integer keys compile to the code
/// the untemplated tree had (the lookup path instruction for instruction).
///
/// Key record ownership (string keys; recovery marks each record exactly
/// once): every live leaf entry (bitmap bit set) owns its key's record;
/// inner=pm: every live inner entry owns its separator's record, a copy of
/// the key a leaf split moved first, made for that split (flushed before the
/// split's prepare fence, published by its log commit; an inner split moves
/// an entry's word up to the parent, so it stays owned by one live entry).
/// An entry whose bitmap bit is clear owns nothing (recovery reads only live
/// entries). Separators are never freed (no merges). inner=dram: the DRAM
/// inner nodes and leaves' lower bounds hold DRAM copies of the separators
/// (InnerTreeT, keep_low), nothing in PM. A removed key's record is retired
/// after the remove's NAW 2 and freed by RecordReclaimer (key_record.h) once
/// no other operation is in flight, else at destruction.
template <class K>
class WbTreeT final : public PersistentIndexOf<K> {
 public:
  /// True for byte-string keys (key words are key-record offsets).
  static constexpr bool kStringKeys = std::is_same_v<K, std::string_view>;
  /// What a search compares entries against (the key, or a StringProbe),
  /// and how it is passed (by value, or by reference): KeyWords,
  /// common/key_record.h.
  using Probe = typename KeyWords<K>::Probe;
  using ProbeArg = typename KeyWords<K>::ProbeArg;

  /// `fill`: IndexOptions::fill_factor, (0, 1] (checked by make_index),
  /// used by bulk_load().
  WbTreeT(pm::Pool* pool, double fill);
  /// Frees the retired key records (string keys) and records the key count
  /// for the pool's close record (common/persistent.h).
  ~WbTreeT() override;

  /// Creates an empty tree (one empty leaf, the root object and the log) in a
  /// pool with no root; node_size was checked by the caller. Errors:
  /// OutOfSpace; string keys: InvalidArgument (inner_dram, or a pool of
  /// 2^48 bytes or more).
  Status create(uint32_t node_size, bool inner_dram);
  /// Recovers the tree of a pool with a root (see wbtree_impl.h "Recovery"):
  /// redoes a committed split log, rebuilds every slot array whose valid bit
  /// is clear, reclaims unreachable blocks, rebuilds the DRAM inner nodes
  /// (inner=dram). String keys: every live entry's key word is checked
  /// (check_key_word) before any comparison, and each record is marked once.
  /// Errors: Corruption (naming the offending node or record), OutOfSpace
  /// never (recovery allocates nothing).
  Status recover();

  Status insert(K key, Value value) override;
  Status update(K key, Value value) override;
  Status remove(K key) override;
  std::optional<Value> lookup(K key) override;
  size_t scan(K start, size_t count, std::vector<std::pair<OwnedKey<K>, Value>>* out) override;
  std::optional<std::pair<OwnedKey<K>, Value>> find_last_less_than(K key) override;
  /// Bottom-up bulk load at IndexOptions::fill_factor (see Index::bulk_load):
  /// leaves and (inner=pm) inner nodes get ceil(fill * capacity) entries,
  /// each persisted, then one NAW of the root word publishes them; the old
  /// (empty) nodes are freed after. String keys: a key record per key and
  /// (inner=pm) a separator record per leaf but the first are allocated and
  /// flushed first, made durable by the nodes' fence. Errors: InvalidArgument (index holds a key,
  /// keys not strictly ascending, a key longer than kMaxKeyBytes), OutOfSpace (nothing changed).
  Status bulk_load(std::span<const std::pair<K, Value>> sorted) override;
  IndexInfo info() const override;
  Status verify(VerifyReport* report) const override;
  /// Why the crash lab's ablation self-test cannot catch the removal of some
  /// flushes and fences (see wbtree_impl.h "Ablation notes").
  std::vector<std::pair<std::string, std::string>> ablation_notes() const override;

  /// Entry slots per node.
  uint32_t capacity() const { return cap_; }
  /// True when the inner nodes live in DRAM.
  bool inner_dram() const { return inner_dram_; }
  /// Key records retired by removes and not yet freed (string keys; 0 for
  /// integer keys).
  size_t retired_records() const { return records_.retired(); }

 private:
  using PersistentIndexOf<K>::pool_;
  using InFlight = RecordReclaimer::InFlight<kStringKeys>;
  struct SplitWal;
  struct Sorted {
    uint64_t key;
    uint64_t value;
    uint32_t slot;
  };
  /// Where an optimistic descent (inner=pm) ended: the leaf, its version
  /// lock word and the version read, the lock of the node that routed to it
  /// (its parent, or root_lock_ for a root leaf) with the version read, and
  /// the leaf's lower bound (a key word; 0 for the first leaf).
  struct Loc {
    uint64_t off;
    std::atomic<uint64_t>* lock;
    uint64_t v;
    std::atomic<uint64_t>* parent;
    uint64_t pv;
    uint64_t low;
  };

  Node* node(uint64_t off) const { return reinterpret_cast<Node*>(pool_->base() + off); }
  Entry* entries(Node* n) const {
    return reinterpret_cast<Entry*>(reinterpret_cast<char*>(n) + eoff_);
  }
  uint8_t* slots(Node* n) const { return reinterpret_cast<uint8_t*>(n) + kSlotArrayOffset; }
  /// The slot array as 8-byte words (byte i of the slot array is byte i % 8
  /// of word i / 8): readers and writers access it only through these words.
  static std::atomic<uint64_t>* slot_words(Node* n) {
    return reinterpret_cast<std::atomic<uint64_t>*>(reinterpret_cast<char*>(n) + kSlotArrayOffset);
  }
  /// Byte i of n's slot array (0 = count, 1 + j = slot of the j-th entry in
  /// key order), by one acquire load of its word.
  static uint32_t sa_byte(Node* n, uint32_t i) {
    return static_cast<uint32_t>(slot_words(n)[i >> 3].load(std::memory_order_acquire) >>
                                 (8 * (i & 7))) &
           0xff;
  }
  /// Entries listed by n's slot array, at most c (a byte read while a
  /// writer changes the node, or left from an older format, never makes a
  /// reader leave the node: its validation fails afterwards).
  uint32_t sa_count(Node* n) const { return std::min(sa_byte(n, 0), cap_); }
  /// Entry slot of the j-th entry in key order (< c, as sa_count).
  uint32_t sa_slot(Node* n, uint32_t j) const {
    const uint32_t s = sa_byte(n, 1 + j);
    return s < cap_ ? s : 0;
  }
  void load_slot_array(Node* n, uint8_t* buf) const;
  void store_slot_array(Node* n, const uint8_t* buf, uint32_t len);
  uint64_t root_word() const { return root_obj_->root.load(std::memory_order_acquire); }

  /// String keys: every live entry's key word of `nodes` names a key record
  /// with its prefix (check_key_word), before recovery compares any.
  Status check_key_words(const std::vector<uint64_t>& nodes) const;
  uint32_t used(const Node* n) const;
  bool full(const Node* n) const { return used(n) == cap_; }
  void prefetch(const Node* n) const { prefetch_bytes(n, node_size_); }
  int last_le(Node* n, ProbeArg key) const;
  uint64_t child_at(Node* n, int pos) const;
  bool locate(ProbeArg key, Loc* out) const;
  template <bool kLow, class F>
  void read_leaf(ProbeArg key, F&& f) const;
  uint64_t lock_leaf(ProbeArg key);
  void smo_path(ProbeArg key, std::vector<uint64_t>* path) const;
  void leaf_insert(Node* x, int p, uint64_t word, Value value);
  std::vector<Sorted> sorted_entries(Node* n) const;
  void init_node(uint64_t off, uint32_t level, uint64_t leftmost_or_sibling,
                 std::span<const Sorted> items);
  void write_slot_array(Node* n, uint64_t bitmap, const char* site);
  void apply_records(const LogRecord* recs, size_t n, const char* site);
  Status split(const std::vector<uint64_t>& path, uint64_t word, ProbeArg key, Value value);
  Status walk(std::vector<uint64_t>* nodes, std::vector<uint64_t>* leaves) const;
  Status check_node(uint64_t off, const char* what) const;
  Status verify_subtree(uint64_t off, uint32_t level, uint64_t lo, bool has_hi, uint64_t hi,
                        std::vector<uint64_t>* leaves, VerifyReport* r) const;
  /// String keys: bytes of the key records the live entries of `off` own.
  uint64_t record_bytes(uint64_t off) const;
  Status verify_node_slots(uint64_t off) const;
  Status rebuild_inner(double fill = 1.0);
  void unlink_empty_leaves();
  /// inner=dram, after a crash, integer keys: the lost-leaf check
  /// (common/persistent.h, check_lost_leaves) against the leaf `chain`.
  /// Errors: Corruption.
  Status check_lost_leaves_of(pm::Allocator& alloc, const std::vector<uint64_t>& chain);
  /// inner=dram: the lower bound of `leaf` (0 or "" for the first).
  OwnedKey<K> low_of(uint64_t leaf) const;
  /// Where route_key builds a string key's predecessor (nothing to build,
  /// and no code, for integer keys).
  using RouteBuf = std::conditional_t<kStringKeys, std::string, char>;
  static K route_key(ProbeArg key, RouteBuf* buf);
  uint64_t keep_low(std::string_view low);
  std::string_view low_key(uint64_t low) const;

  /// The key policy: the only comparisons that differ between the two key
  /// types (common/key_record.h).
  [[no_unique_address]] const KeyWords<K> keys_;
  RootObject* root_obj_ = nullptr;
  Log* log_ = nullptr;
  uint32_t node_size_ = 0;
  uint32_t cap_ = 0;
  uint32_t eoff_ = 0;
  bool inner_dram_ = false;
  const double fill_;
  /// DRAM version lock per node (keyed by pool offset); never persisted.
  std::unique_ptr<LockTable> locks_;
  /// inner=pm: DRAM version lock of the root word (an SMO that changes the
  /// root word holds it, so a reader that read the old root restarts).
  mutable std::atomic<uint64_t> root_lock_{0};
  /// Serialises SMOs (they share the one split log) and bulk loads.
  std::mutex smo_mu_;
  /// inner=dram only: the DRAM inner nodes, and each leaf's lower bound in a
  /// DRAM word per leaf (for find_last_less_than, which walks leaves right to
  /// left).
  std::unique_ptr<inner::InnerTreeT<K>> tree_;
  std::unique_ptr<LockTable> lows_;
  /// inner=dram, string keys: each leaf's lower bound word in lows_ is the
  /// address of one of these DRAM copies (keep_low), kept until the next
  /// rebuild_inner; low_key_bytes_ counts them for info().dram_bytes.
  std::vector<std::unique_ptr<std::string>> low_keys_;
  uint64_t low_key_bytes_ = 0;
  /// String keys: removed keys' records and the operations in flight
  /// (RecordReclaimer); unused for integer keys.
  RecordReclaimer records_;
};

/// The integer-key tree (the tests' and tools' name).
using WbTree = WbTreeT<uint64_t>;
/// The string-key tree.
using WbTreeString = WbTreeT<std::string_view>;

extern template class WbTreeT<uint64_t>;
extern template class WbTreeT<std::string_view>;

}  // namespace wbtree
}  // namespace nvindex
