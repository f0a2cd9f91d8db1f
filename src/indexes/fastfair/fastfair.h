// fastfair: FAST & FAIR, a persistent B+-tree with failure-atomic shift (FAST)
// and failure-atomic in-place rebalance (FAIR), no logging. Source: Hwang,
// Kim, Won, Nam, "Endurable Transient Inconsistency in Byte-Addressable
// Persistent B+-Tree", FAST'18 (§3 FAST, §4 FAIR, §5 lock-free search).
// docs/indexes/fastfair.md summarises the protocols and our
// departures from the paper and its code; fastfair.cc holds the crash argument of every
// persistent update where the update is.
//
// Persistent layout (pool layout name "fastfair", "fastfair:string" for
// byte-string keys): the root object and the node, byte tables directly
// above their structs below; string keys' key words: FastFairT.
//
// Reader rule (transient duplicates, paper §3.2 mended): entries are sorted;
// a slot i < count-1 with key[i] == key[i+1] is a hole and is skipped (the
// right one of an equal pair is the real entry); entries with key >= the
// node's upper bound are ignored (moved to the sibling by a split). Every
// 64-bit value is valid: no NULL terminator, no pointer-equality tests.
//
// Concurrency: locks live in DRAM (LockTable), one version lock per node.
// Readers are optimistic (OLC); writers lock top-down and left-to-right.
// Thread-safety: every Index method may be called concurrently; verify()
// needs no concurrent writers.
//
// Option inner=dram (Ni et al., "Persistent Memory B+-Tree Indexes: a
// Comparative Study", §5 selective persistence; integer keys only): the
// leaves stay in PM with every protocol above, the inner nodes are the shared
// DRAM inner::InnerTree (common/inner_tree.h), rebuilt from the leaf chain at
// every open. A leaf is found by the InnerTree's route protocol (find, lock
// or read the leaf, validate the route); a leaf split keeps the leaf lock
// until InnerTree::insert_separator has routed the new leaf. Leaves never
// merge (the InnerTree removes no separator): an emptied leaf stays on the
// chain and takes the later inserts of its range.
#pragma once

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
#include "indexes/common/version_lock.h"
#include "nvindex/index.h"
#include "nvindex/pm/allocator.h"
#include "nvindex/pm/pool.h"

namespace nvindex {

/// Node sizes fastfair takes (IndexOptions::node_size): a power of two in
/// 128..4096 bytes.
namespace fastfair {
inline bool valid_node_size(uint32_t s) { return s >= 128 && s <= 4096 && (s & (s - 1)) == 0; }
}  // namespace fastfair

inline constexpr char kFastFairDescription[] =
    "FAST & FAIR persistent B+-tree: failure-atomic shift and in-place rebalance, "
    "no logging (Hwang et al., FAST'18)";

/// The values of fastfair's one option, "inner" (the default first).
inline constexpr std::string_view kFastFairInnerValues[] = {"pm", "dram"};
/// fastfair's options (registry entry). inner=dram takes integer keys only.
inline constexpr OptionSpec kFastFairOptions[] = {
    {"inner", kFastFairInnerValues,
     "where inner nodes live: pm (the paper's) or dram (rebuilt from the leaf chain at every "
     "open, placement selective, leaves never merge; integer keys only)",
     true}};

/// Factory for "fastfair". options.pool is required (InvalidArgument
/// otherwise) and must have layout "fastfair" (InvalidArgument naming it
/// otherwise). options.extra["inner"]: "pm" (default, the paper's tree, all
/// in PM) or "dram" (inner nodes in DRAM, rebuilt from the leaf chain with
/// options.threads threads at every open; Ni et al. §5); make_index()
/// refuses any other key or value (kFastFairOptions). On a pool with no
/// root: creates an empty tree with options.node_size (128 for tests, or
/// 256..4096, power of two; else InvalidArgument). On a pool with a root:
/// recovers; the stored node size and inner placement win over the options
/// (a pool made with inner=pm reopens as inner=pm whatever the option says,
/// and the other way round). Errors: Corruption (bad root object or node),
/// OutOfSpace (pool full at creation).
Status make_fastfair(const IndexOptions& options, std::unique_ptr<Index<uint64_t>>* out);
/// Factory for "fastfair" with byte-string keys: as make_fastfair, in a pool
/// of layout pool_layout("fastfair", KeyType::kString) ("fastfair:string").
/// Key words are key-record offsets (fastfair.h, FastFairT). inner=dram on a
/// new pool: InvalidArgument (integer keys only).
Status make_fastfair_string(const IndexOptions& options,
                            std::unique_ptr<Index<std::string_view>>* out);

namespace fastfair {

/// Pool layout name of the integer-key tree, and the index name in messages;
/// the string-key tree's layout is pool_layout(kLayout, KeyType::kString).
inline constexpr char kLayout[] = "fastfair";
/// Root object magic: "FFAIRv1\0" as a little-endian word.
inline constexpr uint64_t kRootMagic = 0x0031764941524646ull;
/// Node magic (bytes 36..39 of the header): "FFND".
inline constexpr uint32_t kNodeMagic = 0x444e4646u;
/// Node header bytes (line 0).
inline constexpr uint32_t kHeaderBytes = 64;
/// Bytes per entry {key, value}.
inline constexpr uint32_t kEntryBytes = 16;
/// Entries of a 512 B node (the default size): 28, which the single-threaded
/// lookup searches whole (FastFairT::lookup_whole_avx512).
inline constexpr uint32_t kWholeEntries = (512 - kHeaderBytes) / kEntryBytes;

/// The root object: one 64 B allocator block; Pool::root() -> it.
///   offset size  field
///   ------ ----  -----------------------------------------------------------
///        0    8  magic kRootMagic ("FFAIRv1\0"), written once
///        8    8  node_size, bytes (128 .. 4096, power of two), written once
///       16    8  root node offset (std::atomic): inner=pm: the root node,
///                changed only by NAW; inner=dram: the leftmost leaf, written
///                once (it never changes: leaves never merge then)
///       24    8  inner placement: 0 = inner nodes in PM, 1 = in DRAM;
///                written once (a word reserved, zero, before the option:
///                older pools read as inner=pm)
///       32   32  reserved, zero
struct RootObject {
  uint64_t magic;
  uint64_t node_size;
  std::atomic<uint64_t> root_node;
  uint64_t inner_dram;
  uint64_t reserved[4];
};
static_assert(offsetof(RootObject, magic) == 0);
static_assert(offsetof(RootObject, node_size) == 8);
static_assert(offsetof(RootObject, root_node) == 16);
static_assert(offsetof(RootObject, inner_dram) == 24);
static_assert(offsetof(RootObject, reserved) == 32);
static_assert(sizeof(RootObject) == 64);

/// One entry slot: the shared 16 B slot (common/entry.h).
using nvindex::Entry;
static_assert(sizeof(Entry) == kEntryBytes);

/// A node: one allocator block of node_size bytes; line 0 is this header.
///   offset size  field
///   ------ ----  -----------------------------------------------------------
///        0    8  count: live entries are slots [0, count)
///        8    8  sibling offset (0 = rightmost node of its level)
///       16    8  low_key: smallest key the node may hold (immutable); its
///                upper bound is sibling ? sibling->low_key : +infinity
///       24    8  leftmost child (inner nodes; 0 in leaves)
///       32    4  level (0 = leaf)
///       36    4  node magic kNodeMagic
///       40   24  reserved, zero
///       64  16*  entries {key, value-or-child}; capacity = (node_size-64)/16
///                slots (128 B -> 4, 256 B -> 12, 512 B -> 28, 4096 B -> 252)
struct Node {
  std::atomic<uint64_t> count;
  std::atomic<uint64_t> sibling;
  std::atomic<uint64_t> low_key;
  std::atomic<uint64_t> leftmost;
  std::atomic<uint64_t> level_magic;  ///< level (low 32 bits) | magic << 32
  std::atomic<uint64_t> reserved[3];

  Entry* entries() {
    return reinterpret_cast<Entry*>(reinterpret_cast<char*>(this) + kHeaderBytes);
  }
  uint32_t level() const {
    return static_cast<uint32_t>(level_magic.load(std::memory_order_acquire));
  }
  uint32_t magic() const {
    return static_cast<uint32_t>(level_magic.load(std::memory_order_acquire) >> 32);
  }
};
static_assert(offsetof(Node, count) == 0);
static_assert(offsetof(Node, sibling) == 8);
static_assert(offsetof(Node, low_key) == 16);
static_assert(offsetof(Node, leftmost) == 24);
static_assert(offsetof(Node, level_magic) == 32);  // level: bytes 32..35, magic: 36..39 (LE)
static_assert(offsetof(Node, reserved) == 40);
static_assert(sizeof(Node) == kHeaderBytes);
static_assert(offsetof(Entry, key) == 0 && offsetof(Entry, value) == 8);

/// String keys: a key word is (prefix << 48) | record offset, the 2-byte
/// prefix and the helpers shared with wbtree (common/key_record.h).
using nvindex::key_prefix;
using nvindex::key_word;
using nvindex::kRecordMask;
using nvindex::record_of;
using nvindex::StringProbe;

/// The FAST & FAIR tree over keys K (uint64_t or std::string_view). Created
/// by make_fastfair() / make_fastfair_string().
///
/// The 8-byte key word of an entry (and a node's low_key) is the key itself
/// for K = uint64_t, and for K = std::string_view the pool offset of a key
/// record (common/key_record.h) with the key's 2-byte prefix in the top 16
/// bits (key_word; 0 in a low_key = minus infinity, the leftmost node of a
/// level). Both instances share every protocol: the
/// reader rule's holes are equal WORDS (a shifted slot is a copy of its
/// neighbour, so a hole names the same record), and only ordering
/// comparisons dereference a record. Integer keys compile to the same code
/// as before the template (the key policy's comparisons are the word's).
///
/// Key record ownership (string keys; recovery marks each record once):
/// every leaf entry owns its key's record; every leaf owns the record its
/// low_key names (a separator record, a copy of the key the split moved
/// first, made by the leaf split). An inner node's low_key and its
/// separators name the record of a leaf's low_key (a child's low_key equals
/// its separator, a leftmost child's the parent's low_key), never their own.
/// A record is retired once no slot names it durably: a removed key's record
/// after its remove's count NAW, a separator record after the leaf merge
/// that unlinks its owner (no separator names it then). Retired records are
/// freed when no other operation is in flight (see reclaim_records in
/// fastfair.cc: an operation counter, so a single writer reuses the space of
/// every remove at once), else at the next quiescent remove or at
/// destruction. Nodes stay retired until destruction.
template <class K>
class FastFairT final : public PersistentIndexOf<K> {
 public:
  /// True for byte-string keys (key words are key-record offsets).
  static constexpr bool kStringKeys = std::is_same_v<K, std::string_view>;
  /// What a search compares entries against: the key (integers) or a
  /// StringProbe (KeyWords, common/key_record.h).
  using Probe = typename KeyWords<K>::Probe;
  /// How a Probe is passed: integer keys by value (in a register, as before
  /// the template), string probes by reference.
  using ProbeArg = typename KeyWords<K>::ProbeArg;

  explicit FastFairT(pm::Pool* pool);
  /// Frees the nodes retired by merges (unreachable since their merge), the
  /// key records retired by removes and leaf merges (string keys), and the
  /// spare blocks kept for splits (never published), and records the key
  /// count for the pool's close record (common/persistent.h).
  ~FastFairT() override;

  /// The single-threaded contract (IndexOptions::threads == 1: one calling
  /// thread, as absl-btree's NoLock instance): the DRAM version locks are
  /// neither read, taken nor fetched (every lock primitive is a no-op that
  /// succeeds), inner=dram descends with InnerTree::find_single, and
  /// info().caps.thread_safe is false. The PM protocol is unchanged (the
  /// locks are DRAM only). Set by the factory before create()/recover().
  void set_single_threaded(bool single) { single_ = single; }

  /// Creates an empty tree in a pool with no root (node_size checked by the
  /// caller); inner_dram: inner nodes in DRAM (one empty leaf routed by a
  /// one-node InnerTree of node_size-byte nodes). Errors: OutOfSpace;
  /// InvalidArgument for inner_dram with string keys.
  Status create(uint32_t node_size, bool inner_dram = false);
  /// Recovers the tree of a pool with a root (see fastfair.cc "Recovery").
  /// Before writing anything it checks the structure every crash state keeps
  /// (low keys increasing from 0 along each sibling chain; live children
  /// distinct, in chain order, low_key == separator; string keys: every key
  /// word names a key record); after normalisation and separator repair
  /// (inner=pm) or the rebuild of the DRAM inner nodes from the leaf chain
  /// with up to `threads` threads (inner=dram, InnerTree::build_segments)
  /// the tree must pass verify(). Errors: Corruption (with the offending
  /// node or record), OutOfSpace.
  Status recover(unsigned threads = 1);

  Status insert(K key, Value value) override;
  Status update(K key, Value value) override;
  Status remove(K key) override;
  std::optional<Value> lookup(K key) override;
  /// Interleaved multi-get (Ni et al. §6.1), integer keys: up to 32 of the
  /// batch's descents advance round-robin one node per step, each step
  /// prefetching the node (and its lock word) it moves to before the next
  /// lookup's step; a lookup whose validation fails finishes as lookup().
  /// String keys, and inner=dram: the default loop of lookup() (the DRAM
  /// inner nodes are not interleaved).
  void multi_lookup(std::span<const K> keys, std::span<std::optional<Value>> out) override;
  size_t scan(K start, size_t count, std::vector<std::pair<OwnedKey<K>, Value>>* out) override;
  std::optional<std::pair<OwnedKey<K>, Value>> find_last_less_than(K key) override;
  IndexInfo info() const override;
  Status verify(VerifyReport* report) const override;
  /// Why the crash lab's ablation self-test cannot catch the removal of some
  /// flushes and fences (see fastfair.cc "Ablation notes").
  std::vector<std::pair<std::string, std::string>> ablation_notes() const override;

  // --- internals exposed for tests (tests/crash_fastfair_recovery_test.cc
  // builds transient crash states with them) and tools; not for indexes'
  // users: writing through them bypasses every lock.
  /// The node at offset `off` (a valid node offset: callers never pass 0, so
  /// no null check on the hot path).
  Node* node(uint64_t off) const { return reinterpret_cast<Node*>(pool_->base() + off); }
  /// Offset of the current root node (inner=dram: of the leftmost leaf).
  uint64_t root_offset() const { return root_obj_->root_node.load(std::memory_order_acquire); }
  /// True when the inner nodes are in DRAM (option inner=dram, as stored in
  /// the root object).
  bool inner_dram() const { return inner_dram_; }
  /// inner=dram: the DRAM inner nodes (nullptr with inner=pm).
  const inner::InnerTree* inner_tree() const { return tree_.get(); }
  /// inner=dram: wall time of the last rebuild of the DRAM inner nodes
  /// (InnerTree::build_segments over the recovered chain), seconds; 0 at
  /// create and with inner=pm.
  double rebuild_seconds() const { return rebuild_seconds_; }
  /// Entry slots per node.
  uint32_t capacity() const { return cap_; }
  /// Bytes per node.
  uint32_t node_size() const { return node_size_; }
  /// Spare node blocks held for the next split (allocated, unpublished; at
  /// most kMaxSpare). Counted in the allocator's bytes in use.
  size_t spare_nodes() const {
    std::lock_guard g(spare_mu_);
    return spare_.size();
  }
  /// Key records retired by removes and leaf merges and not yet freed
  /// (string keys: freed when no other operation is in flight; 0 for
  /// integer keys).
  size_t retired_records() const { return records_.retired(); }

 private:
  using PersistentIndexOf<K>::pool_;
  enum class Descend { kOk, kRestart, kNoLevel };
  struct Stash;

  // Key policy: the only places where the two key types differ.
  /// The probe for a user's key.
  static Probe probe(K key);
  /// The probe for a key word (a separator or low_key) of this tree.
  Probe probe_of_word(uint64_t word) const;
  /// word <= probe (strict probe: word < key); a string low_key 0 is minus
  /// infinity.
  bool word_le(uint64_t word, ProbeArg p) const;
  /// The key word names the probe's key.
  bool word_eq(uint64_t word, ProbeArg p) const;
  /// Three-way comparison of two key words (recovery and verify).
  int compare_words(uint64_t a, uint64_t b) const;
  /// Index of the last slot in [0, n) whose key word_le the probe, or -1.
  int last_le(Entry* e, uint32_t n, ProbeArg p) const;
  /// The owned key (scan results) of a key word.
  OwnedKey<K> owned_key(uint64_t word) const;

  uint32_t clamp_count(const Node* n) const;
  /// Prefetches the first prefetch_bytes_ of the node at `off` and its lock
  /// word (a hint; no effect on correctness).
  void prefetch_node(uint64_t off) const;
  bool upper_bound_of(Node* n, uint64_t* ub) const;
  bool read_lock(uint64_t off, uint64_t* v) const;
  bool validate(uint64_t off, uint64_t v) const;
  bool lock(uint64_t off) const;
  bool upgrade(uint64_t off, uint64_t v) const;
  void unlock(uint64_t off) const;
  void unlock_obsolete(uint64_t off) const;

  Descend descend(ProbeArg key, uint32_t level, uint64_t* off, uint64_t* ver) const;
  /// inner=dram: the leaf covering `key` by the InnerTree's route protocol
  /// (find, read the leaf's version, validate the route); kRestart when the
  /// leaf is locked or the route changed. Integer keys only.
  Descend route_leaf(ProbeArg key, uint64_t* off, uint64_t* ver) const;
  /// inner=dram: locks the leaf covering `key` (find, lock, validate the
  /// route; retries until the route holds). Integer keys only.
  uint64_t lock_routed_leaf(ProbeArg key);
  /// inner=dram: builds the DRAM inner nodes over the leaf chain `chain`
  /// (each leaf routed from its low_key) with up to `threads` threads.
  /// Errors: Corruption (the build refused the chain's low keys).
  Status rebuild_inner(const std::vector<uint64_t>& chain, unsigned threads);
  /// descend() and lookup() with the node search of one SIMD level inlined
  /// (simd_search.h policies; fastfair.cc, "descent"). String keys use the
  /// scalar policy type only as a tag: their search is last_le().
  /// kWholeBytes != 0: one calling thread (set_single_threaded) and nodes of
  /// that many bytes: no lock primitive compiled in, the pool base read
  /// once, a fixed prefetch of each child (the whole-node searches' lookups).
  template <class Search, uint32_t kWholeBytes = 0>
  Descend descend_with(ProbeArg key, uint32_t level, uint64_t* off, uint64_t* ver) const;
  /// kRouted: the leaf through route_leaf (inner=dram), else descend_with
  /// (kWholeBytes passed on; no leaf validation when it is not 0).
  template <class Search, bool kRouted = false, uint32_t kWholeBytes = 0>
  std::optional<Value> lookup_with(ProbeArg key);
  // The SIMD level's attributes are on these declarations: GCC ignores
  // attributes on the out-of-class definition of a class template's member,
  // and without `flatten` and the target the search would not be inlined.
  __attribute__((target("avx512f,popcnt"), flatten)) Descend descend_avx512(ProbeArg key,
                                                                            uint32_t level,
                                                                            uint64_t* off,
                                                                            uint64_t* ver) const;
  __attribute__((target("avx2,popcnt"), flatten)) Descend descend_avx2(ProbeArg key, uint32_t level,
                                                                       uint64_t* off,
                                                                       uint64_t* ver) const;
  Descend descend_scalar(ProbeArg key, uint32_t level, uint64_t* off, uint64_t* ver) const;
  __attribute__((target("avx512f,popcnt"), flatten)) std::optional<Value> lookup_avx512(
      ProbeArg key);
  __attribute__((target("avx2,popcnt"), flatten)) std::optional<Value> lookup_avx2(ProbeArg key);
  std::optional<Value> lookup_scalar(ProbeArg key);
  /// inner=dram: lookup() through route_leaf, one instance per SIMD level
  /// (fastfair.cc).
  __attribute__((target("avx512f,popcnt"), flatten)) std::optional<Value> lookup_routed_avx512(
      ProbeArg key);
  __attribute__((target("avx2,popcnt"), flatten)) std::optional<Value> lookup_routed_avx2(
      ProbeArg key);
  std::optional<Value> lookup_routed_scalar(ProbeArg key);
  /// Single-threaded lookups over 512 B nodes (28 entries, the default):
  /// lookup_with with the whole-node searches (simd::LastLe*Whole<28>) and
  /// kWholeBytes 512, one per SIMD level.
  __attribute__((target("avx512f,popcnt"), flatten)) std::optional<Value> lookup_whole_avx512(
      ProbeArg key);
  __attribute__((target("avx2,popcnt"), flatten)) std::optional<Value> lookup_whole_avx2(
      ProbeArg key);
  /// multi_lookup's groups (integer keys) with one SIMD level's search.
  template <class Search>
  void multi_lookup_with(std::span<const K> keys, std::span<std::optional<Value>> out);
  __attribute__((target("avx512f,popcnt"), flatten)) void multi_lookup_avx512(
      std::span<const K> keys, std::span<std::optional<Value>> out);
  __attribute__((target("avx2,popcnt"), flatten)) void multi_lookup_avx2(
      std::span<const K> keys, std::span<std::optional<Value>> out);
  void multi_lookup_scalar(std::span<const K> keys, std::span<std::optional<Value>> out);
  Descend lock_covering(ProbeArg key, uint32_t level, uint64_t* off);
  void init_node(uint64_t off, uint32_t level, uint64_t low_key, uint64_t leftmost,
                 uint64_t sibling);
  void fast_insert(Node* x, uint32_t n, uint32_t p, uint64_t key, uint64_t value);
  void fast_delete(Node* x, uint32_t n, uint32_t p);
  uint64_t split(uint64_t xoff, uint64_t noff, uint64_t low_record);
  Status insert_separator(uint32_t level, uint64_t sep, uint64_t child, Stash* stash);
  void try_merge(uint32_t level, ProbeArg key);
  void collapse_root();
  void retire(uint64_t off);
  void retire_record(uint64_t word);
  /// String keys: frees the retired records if no operation but the
  /// caller's is in flight (RecordReclaimer::reclaim).
  void reclaim_records();
  /// String keys: counts the calling operation in records_ for its scope (no
  /// code for integer keys).
  using InFlight = RecordReclaimer::InFlight<kStringKeys>;
  Status walk_levels(std::vector<std::vector<uint64_t>>* levels) const;
  /// String keys: checks that every key word of the nodes (low keys, entries
  /// below count) names a key record, before recovery compares any. Errors:
  /// Corruption (check_key_record's).
  Status check_key_words(const std::vector<std::vector<uint64_t>>& levels) const;
  Status normalize(uint64_t off);
  /// Calls f(slot) for each entry node `off` holds as normalize() would leave
  /// it (entries below its upper bound, each equal pair once), without
  /// writing anything.
  template <class F>
  void for_each_settled(uint64_t off, F&& f) const;
  Status repair_separators();
  /// inner=dram, after a crash: the lost-leaf check (common/persistent.h,
  /// check_lost_leaves) over the unreachable node blocks, against the leaf
  /// `chain` (ascending low keys). Errors: Corruption (a lost leaf).
  Status check_lost_leaves_of(pm::Allocator& alloc, const std::vector<uint64_t>& chain);

  /// The key policy's comparisons (common/key_record.h).
  [[no_unique_address]] const KeyWords<K> keys_;
  RootObject* root_obj_ = nullptr;
  uint32_t node_size_ = 0;
  uint32_t cap_ = 0;
  /// Bytes of a node prefetched before it is searched: the whole node up to
  /// 512 B (8 lines), else the first 512 B.
  uint32_t prefetch_bytes_ = 0;
  std::unique_ptr<LockTable> locks_;
  /// inner=dram (root object word 24 == 1): inner nodes in tree_, leaves
  /// never merge; else inner nodes in PM and tree_ is null.
  bool inner_dram_ = false;
  bool single_ = false;  ///< set_single_threaded: one calling thread
  std::unique_ptr<inner::InnerTree> tree_;
  double rebuild_seconds_ = 0;    ///< see rebuild_seconds()
  std::mutex root_mu_;            ///< serialises root creation and root collapse
  mutable std::mutex retire_mu_;  ///< guards retired_
  std::vector<uint64_t> retired_;
  /// String keys: retired key records and the operations in flight (see
  /// RecordReclaimer, "Key record reclamation" in fastfair.cc); unused for
  /// integer keys.
  RecordReclaimer records_;
  /// Most spare node blocks kept between splits (see Stash in fastfair.cc).
  static constexpr size_t kMaxSpare = 64;
  mutable std::mutex spare_mu_;  ///< guards spare_
  /// Allocated, never-published node blocks kept for the next SMO; freed by
  /// the destructor, reclaimed by recovery after a crash.
  std::vector<uint64_t> spare_;
};

/// The integer-key tree (the tests' and tools' name).
using FastFair = FastFairT<uint64_t>;
/// The string-key tree.
using FastFairString = FastFairT<std::string_view>;

extern template class FastFairT<uint64_t>;
extern template class FastFairT<std::string_view>;

}  // namespace fastfair
}  // namespace nvindex
