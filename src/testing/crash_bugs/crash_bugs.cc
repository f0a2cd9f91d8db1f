// crash_bugs: the deliberately broken persistent list of crash_bugs.h.
//
// Persistent layout (pool layout name = the registry name): the root object
// and node tables sit above their structs below.
//
// Correct protocol (bug = none):
//   insert: write the entry into a free slot, persist it, NAW bitmap with its
//     bit set (the NAW commits; before it the slot is invisible).
//   update: write the new entry into a free slot, persist it, NAW the bitmap
//     with the old bit cleared and the new bit set (one word: atomic swap).
//   remove: NAW the bitmap with the bit cleared.
//   split (node X full): build N (upper half of X's entries, low_key = the
//     first moved key, next = X.next) and persist all of it; NAW X.next := N;
//     NAW X.bitmap := the lower half. Between the two NAWs the moved entries
//     are in X and in N, but readers ignore X's entries >= X's upper bound
//     (N.low_key), and recovery drops them from X's bitmap (by NAW).
// Bugs:
//   publish-before-persist: NAW X.next := N comes before N is persisted; a
//     crash then leaves X pointing at a block whose bytes never reached PM.
//   split-two-naw: readers do not ignore X's entries >= its upper bound and
//     recovery does not drop them, so a crash between the two NAWs leaves the
//     moved keys twice (a scan returns duplicates; verify() reports them).
//
// Not thread-safe (callers serialise every call). Lookups walk the node
// chain: O(nodes), fine for the few dozen keys of a crash test.
#include "testing/crash_bugs/crash_bugs.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdio>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "indexes/common/factory.h"
#include "indexes/common/persistent.h"
#include "nvindex/pm/allocator.h"
#include "nvindex/pm/persist.h"
#include "nvindex/pm/pool.h"

namespace nvindex {
namespace {

constexpr uint64_t kRootMagic = 0x0054534c47554243ull;  // "CBUGLST\0"
constexpr uint64_t kNodeMagic = 0x45444f4e47554243ull;  // "CBUGNODE"
constexpr uint32_t kHeaderBytes = 64;
constexpr uint32_t kEntryBytes = 16;
constexpr auto kRlx = std::memory_order_relaxed;

enum class Bug { kNone, kPublishBeforePersist, kSplitTwoNaw };

/// Root object (one 64 B allocator block; Pool::root() -> it):
///
///   offset size  field
///   ------ ----  ---------------------------------------------------------
///        0    8  magic kRootMagic ("CBUGLST\0"), written once
///        8    8  node_size, bytes (128 .. 1024, power of two), written once
///       16    8  head node offset (never changes after creation)
///       24   40  reserved, zero
struct RootObject {
  uint64_t magic;
  uint64_t node_size;
  uint64_t head;
  uint64_t reserved[5];
};
static_assert(offsetof(RootObject, magic) == 0);
static_assert(offsetof(RootObject, node_size) == 8);
static_assert(offsetof(RootObject, head) == 16);
static_assert(offsetof(RootObject, reserved) == 24);
static_assert(sizeof(RootObject) == 64);

struct Entry {
  uint64_t key;
  uint64_t value;
};

/// Node (one allocator block of node_size bytes). Line 0 is the header:
///
///   offset size  field
///   ------ ----  ---------------------------------------------------------
///        0    8  bitmap: bit i set = slot i holds a live entry (NAW only)
///        8    8  next node offset (0 = last node; NAW only)
///       16    8  low_key: smallest key the node may hold (immutable);
///                upper bound = next ? next->low_key : +infinity
///       24    8  magic kNodeMagic
///       32   32  reserved, zero
///       64  16*  entries {key, value}, unsorted; capacity (node_size-64)/16
///                slots (128 B -> 4, 256 B -> 12, 1024 B -> 60)
struct Node {
  std::atomic<uint64_t> bitmap;
  std::atomic<uint64_t> next;
  uint64_t low_key;
  uint64_t magic;
  uint64_t reserved[4];
  Entry* entries() { return reinterpret_cast<Entry*>(reinterpret_cast<char*>(this) + 64); }
};
static_assert(offsetof(Node, bitmap) == 0);
static_assert(offsetof(Node, next) == 8);
static_assert(offsetof(Node, low_key) == 16);
static_assert(offsetof(Node, magic) == 24);
static_assert(offsetof(Node, reserved) == 32);
static_assert(sizeof(Node) == kHeaderBytes);
static_assert(offsetof(Entry, key) == 0 && offsetof(Entry, value) == 8);

class BugList final : public PersistentIndex {
 public:
  BugList(pm::Pool* pool, std::string name, Bug bug)
      : PersistentIndex(pool), name_(std::move(name)), bug_(bug) {}
  ~BugList() override { record_close_keys(); }

  Status create(uint32_t node_size);
  Status recover();

  Status insert(uint64_t key, Value value) override;
  Status update(uint64_t key, Value value) override;
  Status remove(uint64_t key) override;
  std::optional<Value> lookup(uint64_t key) override;
  size_t scan(uint64_t start, size_t count, std::vector<std::pair<uint64_t, Value>>* out) override;
  std::optional<std::pair<uint64_t, Value>> find_last_less_than(uint64_t key) override;
  IndexInfo info() const override;
  Status verify(VerifyReport* report) const override;

 private:
  Node* node(uint64_t off) const { return reinterpret_cast<Node*>(pool_->base() + off); }
  uint64_t full_mask() const { return cap_ == 64 ? ~0ull : (1ull << cap_) - 1; }
  /// The node whose range [low_key, upper bound) holds key.
  uint64_t find(uint64_t key) const {
    uint64_t off = root_->head;
    while (true) {
      const uint64_t nx = node(off)->next.load(kRlx);
      if (nx == 0 || key < node(nx)->low_key) return off;
      off = nx;
    }
  }
  /// Live slots of node `off`: bitmap bits, minus (correct protocol only)
  /// entries >= the upper bound, left over from an interrupted split.
  uint64_t live(uint64_t off) const {
    Node* n = node(off);
    uint64_t bm = n->bitmap.load(kRlx) & full_mask();
    const uint64_t nx = n->next.load(kRlx);
    if (bug_ == Bug::kSplitTwoNaw || nx == 0) return bm;
    const uint64_t ub = node(nx)->low_key;
    for (uint64_t b = bm; b != 0; b &= b - 1) {
      const int i = std::countr_zero(b);
      if (n->entries()[i].key >= ub) bm &= ~(1ull << i);
    }
    return bm;
  }
  int slot_of(uint64_t off, uint64_t key) const {
    for (uint64_t b = live(off); b != 0; b &= b - 1) {
      const int i = std::countr_zero(b);
      if (node(off)->entries()[i].key == key) return i;
    }
    return -1;
  }
  /// A free slot of node `off` (no bitmap bit), or -1 when full.
  int free_slot(uint64_t off) const {
    const uint64_t free = ~node(off)->bitmap.load(kRlx) & full_mask();
    return free == 0 ? -1 : std::countr_zero(free);
  }
  void init_node(uint64_t off, uint64_t low_key, uint64_t next) {
    Node* n = node(off);
    pm::store(&n->bitmap, 0);
    pm::store(&n->next, next);
    pm::store(&n->low_key, low_key);
    pm::store(&n->magic, kNodeMagic);
    for (auto& r : n->reserved) pm::store(&r, uint64_t{0});
  }
  Status split(uint64_t xoff);
  Status walk(std::vector<uint64_t>* chain) const;

  std::string name_;
  Bug bug_;
  RootObject* root_ = nullptr;
  uint32_t node_size_ = 0;
  uint32_t cap_ = 0;
};

Status BugList::create(uint32_t node_size) {
  node_size_ = node_size;
  cap_ = (node_size - kHeaderBytes) / kEntryBytes;
  pm::Allocator& alloc = pool_->allocator();
  uint64_t ro = 0;
  Status s = allocate_root_object(alloc, sizeof(RootObject), &ro);
  if (!s.ok()) return s;
  uint64_t head = 0;
  s = alloc.allocate(node_size_, &head);
  if (!s.ok()) return s;
  // Crash argument: head node and root object are persisted before the NAW
  // of Pool::set_root publishes them (unpublished blocks are reclaimed).
  init_node(head, 0, 0);
  pm::persist(node(head), kHeaderBytes, {"bug.create.node"});
  root_ = pool_->ptr<RootObject>(ro);
  pm::store(&root_->magic, kRootMagic);
  pm::store(&root_->node_size, static_cast<uint64_t>(node_size_));
  pm::store(&root_->head, head);
  for (auto& r : root_->reserved) pm::store(&r, uint64_t{0});
  pm::persist(root_, sizeof(RootObject), {"bug.create.root"});
  pool_->set_root(ro);
  return Status::Ok();
}

Status BugList::insert(uint64_t key, Value value) {
  while (true) {
    const uint64_t off = find(key);
    if (slot_of(off, key) >= 0) return Status::AlreadyExists();
    const int j = free_slot(off);
    if (j < 0) {
      Status s = split(off);
      if (!s.ok()) return s;
      continue;  // retry in the node that now covers key
    }
    Node* n = node(off);
    pm::store(&n->entries()[j].key, key);
    pm::store(&n->entries()[j].value, value);
    pm::persist(&n->entries()[j], kEntryBytes, {"bug.insert.entry"});
    pm::naw(&n->bitmap, n->bitmap.load(kRlx) | 1ull << j, {"bug.insert.commit"});
    return Status::Ok();
  }
}

Status BugList::update(uint64_t key, Value value) {
  while (true) {
    const uint64_t off = find(key);
    const int i = slot_of(off, key);
    if (i < 0) return Status::NotFound();
    const int j = free_slot(off);
    if (j < 0) {
      Status s = split(off);
      if (!s.ok()) return s;
      continue;
    }
    Node* n = node(off);
    pm::store(&n->entries()[j].key, key);
    pm::store(&n->entries()[j].value, value);
    pm::persist(&n->entries()[j], kEntryBytes, {"bug.update.entry"});
    pm::naw(&n->bitmap, (n->bitmap.load(kRlx) & ~(1ull << i)) | 1ull << j, {"bug.update.commit"});
    return Status::Ok();
  }
}

Status BugList::remove(uint64_t key) {
  const uint64_t off = find(key);
  const int i = slot_of(off, key);
  if (i < 0) return Status::NotFound();
  Node* n = node(off);
  pm::naw(&n->bitmap, n->bitmap.load(kRlx) & ~(1ull << i), {"bug.remove.commit"});
  return Status::Ok();
}

Status BugList::split(uint64_t xoff) {
  uint64_t noff = 0;
  Status s = pool_->allocator().allocate(node_size_, &noff);
  if (!s.ok()) return s;
  Node* x = node(xoff);
  std::vector<std::pair<uint64_t, int>> keys;  // (key, slot) of X's live entries
  for (uint64_t b = live(xoff); b != 0; b &= b - 1) {
    const int i = std::countr_zero(b);
    keys.emplace_back(x->entries()[i].key, i);
  }
  std::sort(keys.begin(), keys.end());
  const size_t m = keys.size() / 2;  // keys[m..] move to N; keys[m] > X.low_key
  init_node(noff, keys[m].first, x->next.load(kRlx));
  Node* nn = node(noff);
  uint64_t nbm = 0, xbm = 0;
  for (size_t k = 0; k < keys.size(); ++k) {
    if (k < m) {
      xbm |= 1ull << keys[k].second;
      continue;
    }
    const uint32_t j = static_cast<uint32_t>(k - m);
    pm::store(&nn->entries()[j].key, keys[k].first);
    pm::store(&nn->entries()[j].value, x->entries()[keys[k].second].value);
    nbm |= 1ull << j;
  }
  pm::store(&nn->bitmap, nbm);
  const size_t nbytes = kHeaderBytes + (keys.size() - m) * kEntryBytes;
  if (bug_ == Bug::kPublishBeforePersist) {
    // THE BUG: N becomes reachable before its bytes are durable.
    pm::naw(&x->next, noff, {"bug.split.link"});
    pm::persist(nn, nbytes, {"bug.split.node"});
  } else {
    pm::persist(nn, nbytes, {"bug.split.node"});
    pm::naw(&x->next, noff, {"bug.split.link"});
  }
  // Second NAW: drop the moved entries from X. (split-two-naw: THE BUG is
  // that nothing tolerates or repairs the state between the two NAWs.)
  pm::naw(&x->bitmap, xbm, {"bug.split.trim"});
  return Status::Ok();
}

std::optional<Value> BugList::lookup(uint64_t key) {
  const uint64_t off = find(key);
  const int i = slot_of(off, key);
  if (i < 0) return std::nullopt;
  return node(off)->entries()[i].value;
}

size_t BugList::scan(uint64_t start, size_t count, std::vector<std::pair<uint64_t, Value>>* out) {
  out->clear();
  for (uint64_t off = find(start); off != 0 && out->size() < count;
       off = node(off)->next.load(kRlx)) {
    std::vector<std::pair<uint64_t, Value>> here;
    for (uint64_t b = live(off); b != 0; b &= b - 1) {
      const int i = std::countr_zero(b);
      const Entry& e = node(off)->entries()[i];
      if (e.key >= start) here.emplace_back(e.key, e.value);
    }
    std::sort(here.begin(), here.end());
    for (const auto& kv : here) {
      if (out->size() == count) break;
      out->push_back(kv);
    }
  }
  return out->size();
}

std::optional<std::pair<uint64_t, Value>> BugList::find_last_less_than(uint64_t key) {
  std::optional<std::pair<uint64_t, Value>> best;
  for (uint64_t off = root_->head; off != 0; off = node(off)->next.load(kRlx)) {
    if (node(off)->low_key >= key) break;
    for (uint64_t b = live(off); b != 0; b &= b - 1) {
      const Entry& e = node(off)->entries()[std::countr_zero(b)];
      if (e.key < key && (!best || e.key > best->first)) best = std::make_pair(e.key, e.value);
    }
  }
  return best;
}

// Walks the chain from the head, validating every offset before reading it.
Status BugList::walk(std::vector<uint64_t>* chain) const {
  chain->clear();
  std::unordered_set<uint64_t> seen;
  uint64_t prev_low = 0;
  for (uint64_t off = root_->head; off != 0; off = node(off)->next.load(kRlx)) {
    if (!pool_->contains(off, node_size_) || off % node_size_ != 0 ||
        pool_->allocator().block_size(off) != node_size_) {
      return Status::Corruption(name_ + ": node offset " + hex(off) + " is not a node block");
    }
    if (node(off)->magic != kNodeMagic) {
      return Status::Corruption(name_ + ": bad node magic at " + hex(off));
    }
    if (!seen.insert(off).second) return Status::Corruption(name_ + ": cycle at " + hex(off));
    const uint64_t low = node(off)->low_key;
    if ((chain->empty() && low != 0) || (!chain->empty() && low <= prev_low)) {
      return Status::Corruption(name_ + ": low keys out of order at " + hex(off));
    }
    prev_low = low;
    chain->push_back(off);
  }
  return Status::Ok();
}

// Recovery: validate the root object and the chain, mark every block, and
// (correct protocol and publish-before-persist) drop entries >= a node's
// upper bound left by an interrupted split, by one NAW of the bitmap (a
// crash during recovery leaves the old or the new bitmap: both read the same
// under the reader rule, and recovery runs again). split-two-naw has no such
// repair: that is its bug.
Status BugList::recover() {
  if (Status s = open_root_object(name_, kRootMagic, &root_); !s.ok()) return s;
  const uint64_t ns = root_->node_size;
  if (ns < 128 || ns > 1024 || (ns & (ns - 1)) != 0) {
    return Status::Corruption(name_ + ": bad node size in root object");
  }
  node_size_ = static_cast<uint32_t>(ns);
  cap_ = (node_size_ - kHeaderBytes) / kEntryBytes;
  if (!pool_->contains(root_->head, node_size_)) {
    return Status::Corruption(name_ + ": head offset out of range");
  }
  std::vector<uint64_t> chain;
  Status s = walk(&chain);
  if (!s.ok()) return s;
  // Nothing is written before the pass (common/persistent.h): it checks what
  // the chain reaches against the pool's close record first, and ends only
  // when every mark succeeded.
  s = reclaim_unreachable(name_, [&](pm::Allocator& alloc, uint64_t* keys) {
    for (uint64_t off : chain) {
      if (Status m = alloc.mark_reachable(off); !m.ok()) return m;
      *keys += static_cast<uint64_t>(std::popcount(live(off)));
    }
    return Status::Ok();
  });
  if (!s.ok()) return s;
  if (bug_ != Bug::kSplitTwoNaw) {
    for (uint64_t off : chain) {
      const uint64_t keep = live(off);
      if (keep != (node(off)->bitmap.load(kRlx) & full_mask())) {
        pm::naw(&node(off)->bitmap, keep, {"bug.recover.trim"});
      }
    }
  }
  VerifyReport r;
  return verify(&r);
}

IndexInfo BugList::info() const {
  return persistent_info(
      name_,
      bug_ == Bug::kSplitTwoNaw ? kBugSplitTwoNawDescription : kBugPublishBeforePersistDescription,
      {.ordered = true, .persistent = true, .placement = Placement::kPmOnly}, node_size_, 0);
}

// Checks: the chain (walk), every bitmap bit names a slot below capacity,
// every live entry lies in [low_key, upper bound), no key twice in the list.
Status BugList::verify(VerifyReport* report) const {
  std::vector<uint64_t> chain;
  Status s = walk(&chain);
  if (!s.ok()) return s;
  VerifyReport r;
  r.height = 1;
  std::unordered_set<uint64_t> keys;
  for (uint64_t off : chain) {
    Node* n = node(off);
    const uint64_t bm = n->bitmap.load(kRlx);
    if ((bm & ~full_mask()) != 0) return Status::Corruption(name_ + ": bitmap beyond capacity");
    const uint64_t nx = n->next.load(kRlx);
    for (uint64_t b = bm; b != 0; b &= b - 1) {
      const uint64_t k = n->entries()[std::countr_zero(b)].key;
      if (k < n->low_key || (nx != 0 && k >= node(nx)->low_key)) {
        return Status::Corruption(name_ + ": key " + std::to_string(k) + " outside node " +
                                  hex(off) + " bounds");
      }
      if (!keys.insert(k).second) {
        return Status::Corruption(name_ + ": key " + std::to_string(k) + " stored twice");
      }
    }
    ++r.leaves;
  }
  r.keys = keys.size();
  *report = r;
  return Status::Ok();
}

Status make_bug_list(const IndexOptions& options, std::string_view name, Bug bug,
                     std::unique_ptr<Index<uint64_t>>* out) {
  // make_index() has checked the node size and the value of "bug" against
  // kBugOptions; a recovered list keeps its stored node size.
  if (auto it = options.extra.find("bug"); it != options.extra.end() && it->second == "none") {
    bug = Bug::kNone;
  }
  return open_persistent_index<BugList>(
      options, name, [&](BugList& l) { return l.create(options.node_size); },
      [](BugList& l) { return l.recover(); }, out, std::string(name), bug);
}

}  // namespace

Status make_bug_publish_before_persist(const IndexOptions& options,
                                       std::unique_ptr<Index<uint64_t>>* out) {
  return make_bug_list(options, "bug-publish-before-persist-test", Bug::kPublishBeforePersist, out);
}

Status make_bug_split_two_naw(const IndexOptions& options, std::unique_ptr<Index<uint64_t>>* out) {
  return make_bug_list(options, "bug-split-two-naw-test", Bug::kSplitTwoNaw, out);
}

}  // namespace nvindex
