// fastfair: FAST & FAIR, a persistent B+-tree with failure-atomic shift (FAST)
// and failure-atomic in-place rebalance (FAIR), no logging. Source: Hwang,
// Kim, Won, Nam, "Endurable Transient Inconsistency in Byte-Addressable
// Persistent B+-Tree", FAST'18 (§3 FAST, §4 FAIR, §5 lock-free search).
// docs/indexes/fastfair.md summarises the protocols and our
// departures from the paper and its code; fastfair.cc holds the crash argument of every
// persistent update where the update is.
//
// Persistent layout (pool layout name "fastfair"): the root object and the
// node, byte tables directly above their structs below.
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
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "indexes/common/entry.h"
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

/// Factory for "fastfair". options.pool is required (InvalidArgument
/// otherwise) and must have layout "fastfair" (InvalidArgument naming it
/// otherwise). On a pool with no root: creates an empty tree with
/// options.node_size (128 for tests, or 256..4096, power of two; else
/// InvalidArgument). On a pool with a root: recovers; the stored node size
/// wins over options.node_size. Errors: Corruption (bad root object or
/// node), OutOfSpace (pool full at creation).
Status make_fastfair(const IndexOptions& options, std::unique_ptr<Index<uint64_t>>* out);

namespace fastfair {

/// Pool layout name.
inline constexpr char kLayout[] = "fastfair";
/// Root object magic: "FFAIRv1\0" as a little-endian word.
inline constexpr uint64_t kRootMagic = 0x0031764941524646ull;
/// Node magic (bytes 36..39 of the header): "FFND".
inline constexpr uint32_t kNodeMagic = 0x444e4646u;
/// Node header bytes (line 0).
inline constexpr uint32_t kHeaderBytes = 64;
/// Bytes per entry {key, value}.
inline constexpr uint32_t kEntryBytes = 16;

/// The root object: one 64 B allocator block; Pool::root() -> it.
///   offset size  field
///   ------ ----  -----------------------------------------------------------
///        0    8  magic kRootMagic ("FFAIRv1\0"), written once
///        8    8  node_size, bytes (128 .. 4096, power of two), written once
///       16    8  root node offset (std::atomic, changed only by NAW)
///       24   40  reserved, zero
struct RootObject {
  uint64_t magic;
  uint64_t node_size;
  std::atomic<uint64_t> root_node;
  uint64_t reserved[5];
};
static_assert(offsetof(RootObject, magic) == 0);
static_assert(offsetof(RootObject, node_size) == 8);
static_assert(offsetof(RootObject, root_node) == 16);
static_assert(offsetof(RootObject, reserved) == 24);
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

/// The FAST & FAIR tree. Created by make_fastfair().
class FastFair final : public PersistentIndex {
 public:
  FastFair(pm::Pool* pool);
  /// Frees the nodes retired by merges (unreachable since their merge) and
  /// the spare blocks kept for splits (never published), and records the
  /// key count for the pool's close record (common/persistent.h).
  ~FastFair() override;

  /// Creates an empty tree in a pool with no root (node_size checked by the
  /// caller). Errors: OutOfSpace.
  Status create(uint32_t node_size);
  /// Recovers the tree of a pool with a root (see fastfair.cc "Recovery").
  /// Before writing anything it checks the structure every crash state keeps
  /// (low keys increasing from 0 along each sibling chain; live children
  /// distinct, in chain order, low_key == separator); after normalisation and
  /// separator repair the tree must pass verify().
  /// Errors: Corruption (with the offending node), OutOfSpace.
  Status recover();

  Status insert(uint64_t key, Value value) override;
  Status update(uint64_t key, Value value) override;
  Status remove(uint64_t key) override;
  std::optional<Value> lookup(uint64_t key) override;
  size_t scan(uint64_t start, size_t count, std::vector<std::pair<uint64_t, Value>>* out) override;
  std::optional<std::pair<uint64_t, Value>> find_last_less_than(uint64_t key) override;
  IndexInfo info() const override;
  Status verify(VerifyReport* report) const override;
  /// Why the crash lab's ablation self-test cannot catch the removal of some
  /// flushes and fences (see fastfair.cc "Ablation notes").
  std::vector<std::pair<std::string, std::string>> ablation_notes() const override;

  // --- internals exposed for tests (tests/crash_fastfair_recovery_test.cc
  // builds transient crash states with them) and tools; not for indexes'
  // users: writing through them bypasses every lock.
  /// The node at pool offset `off`.
  /// The node at offset `off` (a valid node offset: callers never pass 0, so
  /// no null check on the hot path).
  Node* node(uint64_t off) const { return reinterpret_cast<Node*>(pool_->base() + off); }
  /// Offset of the current root node.
  uint64_t root_offset() const { return root_obj_->root_node.load(std::memory_order_acquire); }
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

 private:
  enum class Descend { kOk, kRestart, kNoLevel };
  struct Stash;

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

  Descend descend(uint64_t key, uint32_t level, uint64_t* off, uint64_t* ver) const;
  /// descend() and lookup() with the node search of one SIMD level inlined
  /// (simd_search.h policies; fastfair.cc, "descent").
  template <class Search>
  Descend descend_with(uint64_t key, uint32_t level, uint64_t* off, uint64_t* ver) const;
  template <class Search>
  std::optional<Value> lookup_with(uint64_t key);
  Descend descend_avx512(uint64_t key, uint32_t level, uint64_t* off, uint64_t* ver) const;
  Descend descend_avx2(uint64_t key, uint32_t level, uint64_t* off, uint64_t* ver) const;
  Descend descend_scalar(uint64_t key, uint32_t level, uint64_t* off, uint64_t* ver) const;
  std::optional<Value> lookup_avx512(uint64_t key);
  std::optional<Value> lookup_avx2(uint64_t key);
  std::optional<Value> lookup_scalar(uint64_t key);
  Descend lock_covering(uint64_t key, uint32_t level, uint64_t* off);
  void init_node(uint64_t off, uint32_t level, uint64_t low_key, uint64_t leftmost,
                 uint64_t sibling);
  void fast_insert(Node* x, uint32_t n, uint32_t p, uint64_t key, uint64_t value);
  void fast_delete(Node* x, uint32_t n, uint32_t p);
  uint64_t split(uint64_t xoff, uint64_t noff);
  Status insert_separator(uint32_t level, uint64_t sep, uint64_t child, Stash* stash);
  void try_merge(uint32_t level, uint64_t key);
  void collapse_root();
  void retire(uint64_t off);
  Status walk_levels(std::vector<std::vector<uint64_t>>* levels) const;
  Status normalize(uint64_t off);
  /// Keys node `off` holds as normalize() would leave it (entries below its
  /// upper bound, each equal pair counted once), without writing anything.
  uint64_t settled_keys(uint64_t off) const;
  Status repair_separators();

  RootObject* root_obj_ = nullptr;
  uint32_t node_size_ = 0;
  uint32_t cap_ = 0;
  /// Bytes of a node prefetched before it is searched: the whole node up to
  /// 512 B (8 lines), else the first 512 B.
  uint32_t prefetch_bytes_ = 0;
  std::unique_ptr<LockTable> locks_;
  std::mutex root_mu_;    ///< serialises root creation and root collapse
  std::mutex retire_mu_;  ///< guards retired_
  std::vector<uint64_t> retired_;
  /// Most spare node blocks kept between splits (see Stash in fastfair.cc).
  static constexpr size_t kMaxSpare = 64;
  mutable std::mutex spare_mu_;  ///< guards spare_
  /// Allocated, never-published node blocks kept for the next SMO; freed by
  /// the destructor, reclaimed by recovery after a crash.
  std::vector<uint64_t> spare_;
};

}  // namespace fastfair
}  // namespace nvindex
