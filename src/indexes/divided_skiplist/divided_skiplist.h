// divided-skiplist: a skip list divided between persistent memory and DRAM.
// Source: Liu, Chen, Wang, "LB+-Trees: Optimizing Persistent Index
// Performance on 3DXPoint Memory", VLDB'20 §4.1 (the X-Engine experiment: the
// memtable's skip list with its bottom level in NVM and its upper levels in
// DRAM, the baseline LB+-tree is compared with). The paper gives no code for
// it; the protocol below is ours and follows DESIGN.md §3 (publish by NAW).
// docs/indexes/divided-skiplist.md summarises it; divided_skiplist.cc
// holds the crash argument of every persistent update where the update is.
//
// The bottom level (level 0) is an ordered singly linked list of elements in
// PM, one 64 B allocator block each, starting at a head sentinel element. It
// alone holds the content: it is the whole persistent state. Every change of
// the list is one NAW of one `next` word:
//   insert: the new element {key, value, next = successor} is written and
//           persisted first, then NAW pred.next := new element;
//   remove: NAW pred.next := victim.next, then the victim is freed;
//   update: value store + persist (8 B aligned: never torn).
// The upper levels (1 .. kMaxLevels-1) are DRAM towers, one per element whose
// random height is >= 2 (p = 1/4 per level), each holding its element's key
// and PM offset and one forward pointer per upper level. They are never
// persisted: recovery rebuilds them by one walk of the bottom list, with
// heights drawn from a seeded RNG. No splits or merges exist (no SMO).
//
// Persistent layout (pool layout name "divided-skiplist"):
//
//   The root object and the element: byte tables directly above their
//   structs below.
//
// Concurrency: one reader-writer lock per index, a BrLock (big-reader lock,
// src/indexes/common/br_lock.h; Hsieh & Weihl, IPPS'92), whose readers write
// only a counter line of their own, so reads scale with cores. lookup, scan,
// find_last_less_than, update, info and verify take it shared; insert and
// remove take it exclusively (they change the DRAM towers and the list, and
// remove frees the victim, which is safe because no reader can hold it).
// update changes only an atomic value word, so concurrent updates and
// readers never conflict. Thread-safety: every Index method may be called
// concurrently.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "indexes/common/br_lock.h"
#include "indexes/common/persistent.h"
#include "nvindex/index.h"
#include "nvindex/pm/pool.h"

namespace nvindex {

inline constexpr char kDividedSkiplistDescription[] =
    "divided skip list: PM bottom list linked by NAW, DRAM upper levels rebuilt on recovery, "
    "one big-reader lock (Liu et al., VLDB'20 §4.1)";

/// Factory for "divided-skiplist". options.pool is required (InvalidArgument
/// otherwise) and must have layout "divided-skiplist" (InvalidArgument naming
/// both layouts otherwise). options.node_size is ignored (elements are always
/// 64 B); options.extra is ignored. On a pool with no root: creates an empty
/// list (root object + head sentinel, 2 x 64 B). On a pool with a root:
/// recovers (one walk of the bottom list; see DividedSkiplist::recover).
/// Errors: Corruption (bad root object, element or list order), OutOfSpace
/// (pool full at creation).
Status make_divided_skiplist(const IndexOptions& options, std::unique_ptr<Index<uint64_t>>* out);

namespace divided_skiplist {

/// Pool layout name (= the registry name).
inline constexpr char kLayout[] = "divided-skiplist";
/// Root object magic: "DSKIPv1\0" as a little-endian word.
inline constexpr uint64_t kRootMagic = 0x00317650494b5344ull;
/// Element magic (word 3 of a list element): "DSKELEM\0".
inline constexpr uint64_t kElementMagic = 0x004d454c454b5344ull;
/// Head sentinel magic (word 3 of the head element): "DSKHEAD\0".
inline constexpr uint64_t kHeadMagic = 0x00444145484b5344ull;
/// Bytes per element (one allocator block of the smallest class, one line).
inline constexpr uint32_t kElementBytes = 64;
/// Levels of the skip list, the PM bottom level included (19 DRAM levels:
/// enough for 4^19 elements at p = 1/4).
inline constexpr uint32_t kMaxLevels = 20;
/// Seed of the height RNG: recovery restarts it, so a recovered list gets the
/// same heights for the same key order whatever happened before.
inline constexpr uint64_t kHeightSeed = 0x9e3779b97f4a7c15ull;

/// The root object (one 64 B allocator block; Pool::root() -> it), written once:
///   offset size  field
///   ------ ----  ---------------------------------------------------------
///        0    8  magic kRootMagic ("DSKIPv1\0")
///        8    8  element bytes (64)
///       16    8  head sentinel offset
///       24   40  reserved, zero
struct RootObject {
  uint64_t magic;
  uint64_t element_bytes;
  uint64_t head;
  uint64_t reserved[5];
};
static_assert(offsetof(RootObject, magic) == 0);
static_assert(offsetof(RootObject, element_bytes) == 8);
static_assert(offsetof(RootObject, head) == 16);
static_assert(offsetof(RootObject, reserved) == 24);
static_assert(sizeof(RootObject) == 64);

/// One bottom-level element (one 64 B allocator block = one line; the head sentinel has the
///   same layout with magic kHeadMagic and key/value 0, which are not read):
///   offset size  field
///   ------ ----  ---------------------------------------------------------
///        0    8  key (written before the element is published, immutable)
///        8    8  value (std::atomic; changed in place by update())
///       16    8  next element offset, 0 = end of list (std::atomic; changed
///                only by NAW)
///       24    8  magic kElementMagic (kHeadMagic for the sentinel)
///       32   32  reserved, zero
/// value and next are atomics: readers load them while update() stores a value.
struct Element {
  uint64_t key;
  std::atomic<uint64_t> value;
  std::atomic<uint64_t> next;
  uint64_t magic;
  uint64_t reserved[4];
};
static_assert(offsetof(Element, key) == 0);
static_assert(offsetof(Element, value) == 8);
static_assert(offsetof(Element, next) == 16);
static_assert(offsetof(Element, magic) == 24);
static_assert(offsetof(Element, reserved) == 32);
static_assert(sizeof(Element) == kElementBytes);

/// A DRAM tower: the upper levels 1..levels of one element (levels >= 1).
/// Layout: this 24 B header, then `levels` forward pointers (links()[i] is
/// the next tower on level i + 1, nullptr at the end). The head tower has
/// kMaxLevels - 1 levels and the head sentinel's offset.
struct Tower {
  uint64_t key;     ///< the element's key (copy; keys are immutable)
  uint64_t elem;    ///< pool offset of the bottom element
  uint32_t levels;  ///< upper levels this tower is on, 1 .. kMaxLevels-1
  uint32_t pad;
  Tower** links() { return reinterpret_cast<Tower**>(this + 1); }
  Tower* const* links() const { return reinterpret_cast<Tower* const*>(this + 1); }
  /// Bytes of a tower with `levels` upper levels.
  static size_t bytes(uint32_t levels) { return sizeof(Tower) + levels * sizeof(Tower*); }
};
static_assert(sizeof(Tower) == 24);

/// The divided skip list. Created by make_divided_skiplist().
class DividedSkiplist final : public PersistentIndex {
 public:
  explicit DividedSkiplist(pm::Pool* pool);
  /// Frees the DRAM towers (the PM list stays as it is: it is the index).
  ~DividedSkiplist() override;
  DividedSkiplist(const DividedSkiplist&) = delete;
  DividedSkiplist& operator=(const DividedSkiplist&) = delete;

  /// Creates an empty list in a pool with no root: root object and head
  /// sentinel (2 blocks of 64 B). Errors: OutOfSpace.
  Status create();
  /// Recovers a pool with a root: validates the root object, walks the
  /// bottom list once (checking every element's offset, block size, magic and
  /// strictly increasing keys, which also rules out cycles), marks every
  /// element reachable for the allocator and rebuilds the DRAM towers.
  /// Writes nothing to PM. Errors: Corruption naming the offending offset
  /// (the allocator is then left in recovery: it hands out no block).
  Status recover();

  /// One element allocated, persisted, linked by one NAW (2 flushes, 2
  /// fences, 1 NAW). AlreadyExists / OutOfSpace change nothing.
  Status insert(uint64_t key, Value value) override;
  /// Value store + persist of one line. NotFound when absent.
  Status update(uint64_t key, Value value) override;
  /// One NAW unlinks the element; its block is freed. NotFound when absent.
  Status remove(uint64_t key) override;
  std::optional<Value> lookup(uint64_t key) override;
  /// Descends the DRAM towers to the last element < start, then follows the
  /// bottom list.
  size_t scan(uint64_t start, size_t count, std::vector<std::pair<uint64_t, Value>>* out) override;
  /// The element before the first one >= key (not the head sentinel).
  std::optional<std::pair<uint64_t, Value>> find_last_less_than(uint64_t key) override;
  /// node_size = 64 (the element block), placement kSelective, dram_bytes =
  /// the towers, pm_bytes = allocator bytes in use.
  IndexInfo info() const override;
  /// Walks the bottom list (magic, strictly increasing keys) and every DRAM
  /// level (strictly increasing, each tower on all its levels and naming an
  /// element of the list with its key). Report: keys = elements, leaves =
  /// elements + 1 (the head sentinel is a bottom block too), inner_nodes =
  /// DRAM towers (head excluded), height = levels in use (1 = bottom only).
  Status verify(VerifyReport* report) const override;
  /// The flushes and fences the crash lab does not catch: none (every site
  /// is caught when ablated; see divided_skiplist.cc "Ablation notes").
  std::vector<std::pair<std::string, std::string>> ablation_notes() const override;

 private:
  Element* elem(uint64_t off) const { return reinterpret_cast<Element*>(pool_->base() + off); }
  /// Last tower with key < `key` on level 1 (or the head tower); when
  /// `preds` is set, preds[i] = last tower with key < `key` on level i + 1.
  Tower* descend(uint64_t key, Tower** preds) const;
  /// Offset of the last bottom element with key < `key` (or the head).
  uint64_t find_pred(uint64_t key, Tower** preds) const;
  /// A random height in 1..kMaxLevels (p = 1/4 per extra level).
  uint32_t random_height();
  /// Allocates a DRAM tower.
  Tower* new_tower(uint64_t key, uint64_t elem, uint32_t levels);
  void delete_tower(Tower* t);
  /// Draws a random height for element `off` (key `key`); when it is >= 2,
  /// links a new tower after preds[i] on each of its levels i + 1 (preds
  /// from descend(), or the level tails during recovery) and returns it;
  /// nullptr for height 1 (no tower).
  Tower* add_tower(uint64_t key, uint64_t off, Tower** preds);

  RootObject* root_obj_ = nullptr;
  uint64_t head_ = 0;  ///< head sentinel offset
  Tower* head_tower_ = nullptr;
  uint32_t top_ = 0;     ///< upper levels in use (0 = bottom only)
  uint64_t towers_ = 0;  ///< DRAM towers, head excluded
  uint64_t dram_bytes_ = 0;
  uint64_t rng_ = kHeightSeed;
  mutable BrLock mu_;
};

}  // namespace divided_skiplist
}  // namespace nvindex
