// P-Masstree: Masstree (Mao, Kohler, Morris, "Cache Craftiness for Fast
// Multicore Key-Value Storage", EuroSys 2012) made persistent in the manner of
// RECIPE (Lee et al., "RECIPE: Converting Concurrent DRAM Indexes to
// Persistent-Memory Indexes", SOSP 2019, §4 condition #1: writes by atomic
// stores, readers tolerate), with the root-split ordering Witcher (Fu et al.,
// SOSP 2021) found missing in RECIPE's P-Masstree. Page:
// docs/indexes/p-masstree.md.
//
// A trie of B+-trees ("layers") over 8-byte key slices. Layer d indexes bytes
// [8d, 8d+8) of the key, loaded big-endian so that integer compare is byte
// order. A border (leaf) node holds up to 15 entries in unsorted slots whose
// sorted order and count are one 8-byte permutation word, published by one
// NAW. An entry is (slice, keylen, value word): keylen 0..8 for a key that
// ends in this slice (the value word is the value), kLong (9) for a key with
// more bytes (the value word names a tagged block: a suffix record holding the
// whole key and its value, or the header of the next layer's tree). Entries
// sort by (slice, min(keylen, 9)). Integer keys (Index<uint64_t>) are one
// slice of keylen 8: the same template, with the string paths compiled out.
//
// Concurrency: node version locks in DRAM (common/version_lock.h, one word per
// 512 B node): readers are optimistic and retry when a version changed;
// writers lock one node at a time (and a new split node), left to right. Each
// level of each layer's tree is a B-link chain (every node has an immutable
// low key and a sibling pointer), so a split is committed by one NAW of the
// sibling pointer and a separator missing from the parent only costs a move
// right (Lehman and Yao 1981), the way Masstree's border nodes link and the
// way RECIPE's P-Masstree tolerates a crash between a split and its parent
// update. Nodes never merge; removed entries leave the permutation.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "indexes/common/persistent.h"
#include "indexes/common/version_lock.h"
#include "nvindex/index.h"
#include "nvindex/pm/pool.h"

namespace nvindex {

inline constexpr char kPMasstreeDescription[] =
    "P-Masstree: trie of B+-trees over 8-byte key slices, permutation-word border nodes, "
    "optimistic version reads (Mao et al., EuroSys'12; persistent as in RECIPE, SOSP'19)";

/// Factories (registry.cc): integer keys and byte-string keys. Errors: those
/// of open_persistent_index (no pool, a pool of another layout, Corruption of
/// a damaged pool, OutOfSpace).
Status make_p_masstree(const IndexOptions& options, std::unique_ptr<Index<uint64_t>>* out);
Status make_p_masstree_string(const IndexOptions& options,
                              std::unique_ptr<Index<std::string_view>>* out);

namespace masstree {

inline constexpr char kName[] = "p-masstree";
inline constexpr uint32_t kWidth = 15;       ///< entries per node (Masstree's width)
inline constexpr uint32_t kNodeBytes = 512;  ///< allocator block of a node (320 B used)
inline constexpr uint8_t kLong = 9;          ///< keylen of an entry whose key has more bytes
inline constexpr uint32_t kMaxDepth = 32;    ///< layers: 255-byte keys need 32
inline constexpr uint64_t kRootMagic = 0x31544d4d53414d50ull;    ///< "PMASMMT1": layer 0
inline constexpr uint64_t kLayerMagic = 0x52594c54534d4d50ull;   ///< "PMMSTLYR": layer >= 1
inline constexpr uint64_t kSuffixMagic = 0x58465553534d4d50ull;  ///< "PMMSSUFX"
inline constexpr uint32_t kNodeMagic = 0x444e4d50u;              ///< "PMND"

/// The permutation word of a node (Masstree §4.6.2): bits 0..3 hold the
/// entry count n (0..15); the 4-bit field at bits 4p+4 .. 4p+7 holds the slot
/// of the entry at sorted position p. Positions 0..n-1 are the live entries in
/// key order; positions n..14 the free slots. Always a permutation of 0..14.
struct Perm {
  uint64_t x;
  /// count 0, slots 0..14 free in order.
  static constexpr Perm empty() {
    uint64_t v = 0;
    for (uint64_t i = 0; i < kWidth; ++i) v |= i << (4 * i + 4);
    return Perm{v};
  }
  uint32_t size() const { return static_cast<uint32_t>(x & 15); }
  uint32_t slot(uint32_t pos) const { return static_cast<uint32_t>((x >> (4 * pos + 4)) & 15); }
  /// The word with the first free slot (position size()) moved to position
  /// `pos` (<= size() < 15) and the count one higher; *slot gets that slot.
  Perm inserted(uint32_t pos, uint32_t* slot) const;
  /// The word with the entry at position `pos` (< size()) removed: its slot
  /// becomes the first free one, the count one lower.
  Perm removed(uint32_t pos) const;
  /// The word with count `n` (<= size()): positions >= n become free, in
  /// their order.
  Perm truncated(uint32_t n) const { return Perm{(x & ~uint64_t{15}) | n}; }
  /// True when the 15 fields are a permutation of 0..14 and the count <= 15.
  bool valid() const;
};

/// The root object (layer 0, pool root) and the header of a deeper layer:
/// one 64 B block naming its tree's root node.
///
///   offset size  field
///        0    8  magic (kRootMagic or kLayerMagic)
///        8    8  root: pool offset of the tree's root node (changed by one
///                NAW, after the new root is persisted)
///       16   48  reserved (0)
struct TreeRoot {
  uint64_t magic;
  std::atomic<uint64_t> root;
  uint64_t reserved[6];
};
static_assert(sizeof(TreeRoot) == 64 && offsetof(TreeRoot, root) == 8);

/// A suffix record: a key longer than its slice (string keys only), whole, and
/// its value. A block of 17 + len bytes (64 B class up to 47-byte keys).
/// Immutable once published except `value` (changed by NAW under the node
/// lock of the entry that names it).
///
///   offset size  field
///        0    8  magic (kSuffixMagic)
///        8    8  value
///       16    1  key length (9..255)
///       17  len  key bytes (the whole key, not only the suffix)
struct SuffixRecord {
  uint64_t magic;
  std::atomic<uint64_t> value;
  uint8_t len;
  char bytes[1];
  std::string_view key() const { return {bytes, len}; }
};
static_assert(offsetof(SuffixRecord, value) == 8 && offsetof(SuffixRecord, len) == 16 &&
              offsetof(SuffixRecord, bytes) == 17);

/// A node (border at level 0, interior above), 320 B in a 512 B block.
///
///   offset size  field
///        0    8  perm: the permutation word (Perm), published by NAW
///        8    8  next: sibling at the same level (B-link), 0 for the last
///       16    8  lowkey: every slice in this node is >= lowkey; immutable
///                while reachable (0 for the leftmost node of a level)
///       24    8  leftmost: interior only, the child for slices < keys of
///                position 0
///       32    4  magic (kNodeMagic)
///       36    4  level (0 = border)
///       40   15  keylen[15]: border only, 0..8 or kLong (9); 8 for integer
///                keys (never written after the node is made)
///       55    9  reserved
///       64  120  keys[15]: slices
///      184    8  reserved
///      192  120  vals[15]: value, suffix record or layer header offset
///                (border); child offset (interior)
struct Node {
  std::atomic<uint64_t> perm;
  std::atomic<uint64_t> next;
  uint64_t lowkey;
  std::atomic<uint64_t> leftmost;
  uint32_t magic;
  uint32_t level;
  std::atomic<uint8_t> keylen[kWidth];
  uint8_t reserved0[9];
  std::atomic<uint64_t> keys[kWidth];
  uint64_t reserved1;
  std::atomic<uint64_t> vals[kWidth];
};
static_assert(offsetof(Node, keylen) == 40 && offsetof(Node, keys) == 64 &&
              offsetof(Node, vals) == 192 && sizeof(Node) == 312);

/// One entry as seen by a reader's snapshot or a writer's split.
struct Slot {
  uint64_t slice;
  uint8_t keylen;
  uint64_t val;
};

/// The tree of P-Masstree for keys K (uint64_t or std::string_view).
template <class K>
class PMasstree final : public PersistentIndexOf<K> {
 public:
  using Owned = OwnedKey<K>;
  explicit PMasstree(pm::Pool* pool) : PersistentIndexOf<K>(pool) {}
  /// Frees the suffix records retired by removals and layer creation (no
  /// entry names them since a persisted NAW, and no reader runs once the
  /// index is gone), then records the key count for the close record.
  ~PMasstree() override;

  /// A new, empty tree (one border node) in a pool without a root. Errors:
  /// OutOfSpace.
  Status create();
  /// Opens the tree of a pool with a root: marks every reachable block
  /// (counting keys), then trims the entries a crash mid-split left behind a
  /// committed sibling (see p_masstree.cc "Recovery"). Errors: Corruption,
  /// OutOfSpace.
  Status recover();

  Status insert(K key, Value value) override;
  Status update(K key, Value value) override;
  Status remove(K key) override;
  std::optional<Value> lookup(K key) override;
  size_t scan(K start, size_t count, std::vector<std::pair<Owned, Value>>* out) override;
  std::optional<std::pair<Owned, Value>> find_last_less_than(K key) override;
  IndexInfo info() const override;
  /// Also counts VerifyReport::pm_bytes: 512 B per node, the blocks of the
  /// suffix records and layer headers reached (not the root object, nor
  /// retired suffix records awaiting the destructor).
  Status verify(VerifyReport* report) const override;
  std::vector<std::pair<std::string, std::string>> ablation_notes() const override;

  // --- internals for tests (tests/index_p_masstree_test.cc)
  Node* node(uint64_t off) const { return this->pool_->template ptr<Node>(off); }
  TreeRoot* tree(uint64_t off) const { return this->pool_->template ptr<TreeRoot>(off); }
  /// The layer-0 tree (the pool's root object).
  TreeRoot* root_object() const { return root_; }
  /// Layers (trees) reachable, layer 0 included, with no concurrent writer.
  size_t layer_count() const;

 private:
  struct Found {
    uint32_t pos;  ///< the entry's position, or where it would be inserted
    bool found;
    uint32_t slot;  ///< the entry's slot when found
  };
  /// A border node locked by lock_key: the tree and layer it is in, its
  /// permutation, the key's search result there, the key's slice and keylen
  /// at that layer, and the suffix record of a found keylen-9 entry (0 when
  /// none).
  struct Locked {
    const TreeRoot* t;
    unsigned d;
    uint64_t off;
    Perm p;
    Found f;
    uint64_t slice;
    uint8_t keylen;
    uint64_t rec;
  };
  /// Descends through the layers to the border node of `key` and locks it
  /// (a layer entry is followed after unlocking its node).
  Locked lock_key(K key);
  /// True when the locked entry of l is `key` (a suffix record compares the
  /// whole key).
  bool holds(const Locked& l, K key) const;
  std::atomic<uint64_t>& lockword(uint64_t off) const { return locks_->word(off); }
  Status new_node(uint32_t level, uint64_t lowkey, uint64_t* off);
  void descend(const TreeRoot* t, uint64_t s, uint32_t level, uint64_t* off, uint64_t* v) const;
  uint64_t lock_node(const TreeRoot* t, uint64_t s, uint32_t level);
  Found find(const Node* n, Perm p, uint64_t s, uint8_t lk) const;
  void put(Node* n, uint32_t pos, const Slot& e);
  Status split(const TreeRoot* t, uint64_t off, uint32_t pos, const Slot& e);
  void insert_separator(const TreeRoot* t, uint32_t level, uint64_t sep, uint64_t child);
  Status make_layer(Node* n, uint32_t slot, unsigned d);
  void retire(uint64_t off);
  bool snapshot(uint64_t off, std::vector<Slot>* e, uint64_t* next) const;
  bool scan_tree(const TreeRoot* t, unsigned d, const K* start, std::string* prefix, size_t count,
                 std::vector<std::pair<Owned, Value>>* out) const;
  std::optional<std::pair<Owned, Value>> last_less(const TreeRoot* t, unsigned d, const K* bound,
                                                   std::string* prefix) const;
  Status mark_tree(pm::Allocator& a, uint64_t tree_off, unsigned d, uint64_t* keys);
  Status verify_tree(const TreeRoot* t, unsigned d, std::string* prefix, VerifyReport* r) const;
  void trim_tree(const TreeRoot* t);

  TreeRoot* root_ = nullptr;
  std::unique_ptr<LockTable> locks_;
  mutable std::mutex retired_mu_;
  std::vector<uint64_t> retired_;
};

}  // namespace masstree
}  // namespace nvindex
