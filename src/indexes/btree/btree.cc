// btree: a volatile B+-tree with sorted nodes, linear search and optimistic
// concurrency, the DRAM baseline of Ni et al., "Closing the Performance Gap
// between DRAM and PM for In-Memory Index Structures" (UCSC 2020), §3.1.
//
// Concurrency: optimistic lock coupling (OLFIT, Cha et al., VLDB'01; Leis et
// al., "The ART of Practical Synchronization", DaMoN'16) with B-link sibling
// links and fence keys (Lehman & Yao, TODS'81):
//   - every node starts with a version lock word (bit 0 obsolete, bit 1
//     locked, bits 2.. version counter);
//   - readers never write shared memory: they read the version (waiting while
//     it is locked), read the node, and re-check the version; a change means
//     the read may be torn and the operation restarts;
//   - a writer "upgrades" the version it read to locked with one CAS, which
//     fails (and the writer restarts) if the node changed since it was read,
//     so writers never block while holding a lock and cannot deadlock;
//   - every node carries its key range [low, high) (fence keys) and a sibling
//     link; an operation that reaches a node after it split moves right
//     (key >= high), and one that reaches a node that lost its low keys to a
//     rebalance (key < low) or was merged away (obsolete) restarts from the
//     root. A node is thus self-validating: once its version is validated and
//     key lies in its fences, it is the node for key.
//   - SMOs are done top-down and one level at a time, like Leis's OLC B-tree:
//     an insert that meets a full node on its way down splits it (holding its
//     parent and the node locked, the separator goes into the parent at once)
//     and restarts; a remove that meets an underfull node merges it with, or
//     rebalances it against, a sibling (parent, left and right locked) and
//     restarts. The root is replaced (root split, root collapse) under a
//     separate root version lock.
//
// Memory ordering: every node field a reader reads optimistically is a
// std::atomic, loaded with acquire and stored with release (plain moves on
// x86). Acquire loads keep the final version check after the data loads;
// release stores keep the data stores after the locking CAS. This is the
// seqlock protocol without stand-alone fences, and ThreadSanitizer sees no
// data race in it.
//
// Reclamation: a node freed by a merge or a root collapse is marked obsolete
// and never freed or reused until the tree is destroyed (every node ever
// allocated stays in `nodes_`), so an optimistic reader may always
// dereference a stale pointer; it then sees the obsolete bit and restarts.
// The cost is memory: info().dram_bytes counts retired nodes too.
#include "indexes/btree/btree.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "indexes/btree/btree_testing.h"

namespace nvindex {
namespace {

// Version lock word bits.
constexpr uint64_t kObsolete = 1;
constexpr uint64_t kLocked = 2;

// Node header size, bytes; the slots follow.
constexpr size_t kHeaderBytes = 40;

// A node. Its size (node_size, 128..4096 B, a multiple of 64) is a run-time
// parameter of the tree; the struct declares the 40-byte header and the slots
// follow it, 64-byte aligned as a whole:
//
//   offset        size  field
//   ------------  ----  ----------------------------------------------------
//        0           8  version lock: bit 0 obsolete, bit 1 locked, bits
//                       2..63 version (+1 per write unlock)
//        8           2  count: keys in the node (leaf: pairs; inner: separators)
//       10           2  level: 0 = leaf, parent = child + 1 (immutable)
//       12           4  padding
//       16           8  low fence key: every key in the node is >= low
//       24           8  high fence key: every key is < high (meaningful only
//                       when sibling != null; the rightmost node is unbounded)
//       32           8  sibling: next node on the same level, or null
//   leaf (C = (node_size - 40) / 16 pairs; 512 B -> 29):
//       40         8*C  keys[C], sorted ascending
//    40+8C         8*C  values[C]
//   inner (C = (node_size - 48) / 16 separators; 512 B -> 29, 30 children):
//       40         8*C  keys[C], sorted ascending
//    40+8C     8*(C+1)  children[C+1]: child i holds keys in [keys[i-1],
//                       keys[i]) (child 0 from low, child C up to high)
//
// Who may change what: level is written before the node is published and
// never again; every other field is written only by the holder of the
// node's lock (a new, unpublished node excepted) and read by anyone.
struct Node {
  explicit Node(uint16_t lvl) : level(lvl) {}

  std::atomic<uint64_t> version{0};
  std::atomic<uint16_t> count{0};
  const uint16_t level;
  uint32_t pad = 0;
  std::atomic<uint64_t> low{0};
  std::atomic<uint64_t> high{0};
  std::atomic<Node*> sibling{nullptr};

  std::atomic<uint64_t>* slots() {
    return reinterpret_cast<std::atomic<uint64_t>*>(reinterpret_cast<char*>(this) + kHeaderBytes);
  }
  const std::atomic<uint64_t>* slots() const {
    return reinterpret_cast<const std::atomic<uint64_t>*>(reinterpret_cast<const char*>(this) +
                                                          kHeaderBytes);
  }
};
static_assert(sizeof(Node) == kHeaderBytes);
static_assert(sizeof(std::atomic<uint64_t>) == 8 && sizeof(std::atomic<Node*>) == 8);

template <class T>
T ld(const std::atomic<T>& a) {
  return a.load(std::memory_order_acquire);
}
template <class T>
void st(std::atomic<T>& a, T v) {
  a.store(v, std::memory_order_release);
}

void cpu_relax(unsigned* spins) {
  if (++*spins < 64) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  } else {
    std::this_thread::yield();
  }
}

// Optimistic read lock: waits while `word` is locked; false if obsolete.
bool read_lock(const std::atomic<uint64_t>& word, uint64_t* v) {
  unsigned spins = 0;
  for (;;) {
    uint64_t x = ld(word);
    if (x & kObsolete) return false;
    if (!(x & kLocked)) {
      *v = x;
      return true;
    }
    cpu_relax(&spins);
  }
}
// True when `word` still holds version v (nothing changed since read_lock).
bool check(const std::atomic<uint64_t>& word, uint64_t v) { return ld(word) == v; }
// One B-link step of a descent (Lehman & Yao): reads *n's version into *v
// and follows right links while key >= the node's high fence (a split moved
// the key's range right), setting *moved_right when it follows one. False
// when the descent must restart: the node is obsolete, lost its low keys to a
// rebalance (key < low fence), or changed before its right link was read.
bool settle(uint64_t key, Node** n, uint64_t* v, bool* moved_right) {
  for (;;) {
    if (!read_lock((*n)->version, v)) return false;
    if (key < ld((*n)->low)) return false;
    Node* r = ld((*n)->sibling);
    if (r == nullptr || key < ld((*n)->high)) return true;
    if (!check((*n)->version, *v)) return false;
    *n = r;
    *moved_right = true;
  }
}
// Locks `word` if it still holds version v; never waits.
bool upgrade(std::atomic<uint64_t>& word, uint64_t v) {
  return word.compare_exchange_strong(v, v | kLocked, std::memory_order_acquire,
                                      std::memory_order_relaxed);
}
// Unlocks and bumps the version (v|locked + 2 = v + 4). A release store, not
// an atomic add (as vlock::unlock, indexes/common/version_lock.h): while the
// locked bit is set only its holder writes the word (upgrade() CASes from an
// unlocked version, readers never write), and a locked read-modify-write
// also waits for the holder's stores to drain, on every update even with one
// thread: update-only, uniform, 1M keys, 1 thread: 2.49 -> 3.09 Mops/s
// (medians of 5 interleaved runs on a shared 2-core VM).
void unlock(std::atomic<uint64_t>& word) {
  word.store(word.load(std::memory_order_relaxed) + kLocked, std::memory_order_release);
}
// Unlocks, bumps the version and marks the node obsolete for good.
void unlock_obsolete(std::atomic<uint64_t>& word) {
  word.store(word.load(std::memory_order_relaxed) + (kLocked | kObsolete),
             std::memory_order_release);
}

constexpr size_t kMaxLeafCap = (kBtreeMaxNodeSize - kHeaderBytes) / 16;

class Btree final : public Index<uint64_t> {
 public:
  explicit Btree(uint32_t node_size)
      : node_size_(node_size),
        leaf_cap_((node_size - kHeaderBytes) / 16),
        inner_cap_((node_size - kHeaderBytes - 8) / 16) {
    root_.store(alloc_node(0), std::memory_order_release);
  }

  ~Btree() override {
    for (Node* n : nodes_) ::operator delete (n, std::align_val_t{64});
  }

  Btree(const Btree&) = delete;
  Btree& operator=(const Btree&) = delete;

  Status insert(uint64_t key, Value value) override {
    Status s;
    for (unsigned spins = 0; !try_insert(key, value, &s); cpu_relax(&spins)) {
    }
    return s;
  }

  Status update(uint64_t key, Value value) override {
    for (unsigned spins = 0;; cpu_relax(&spins)) {
      uint64_t v;
      Node* leaf = find_leaf(key, &v);
      unsigned cnt = count_of(leaf);
      unsigned i = leaf_lower_bound(leaf, cnt, key);
      bool found = i < cnt && ld(keys(leaf)[i]) == key;
      if (!found) {
        if (!check(leaf->version, v)) continue;
        return Status::NotFound();
      }
      if (!upgrade(leaf->version, v)) continue;
      st(vals(leaf)[i], value);
      unlock(leaf->version);
      return Status::Ok();
    }
  }

  Status remove(uint64_t key) override {
    Status s;
    for (unsigned spins = 0; !try_remove(key, &s); cpu_relax(&spins)) {
    }
    return s;
  }

  std::optional<Value> lookup(uint64_t key) override {
    for (unsigned spins = 0;; cpu_relax(&spins)) {
      uint64_t v;
      Node* leaf = find_leaf(key, &v);
      unsigned cnt = count_of(leaf);
      unsigned i = leaf_lower_bound(leaf, cnt, key);
      bool found = i < cnt && ld(keys(leaf)[i]) == key;
      Value val = found ? ld(vals(leaf)[i]) : 0;
      if (!check(leaf->version, v)) continue;
      if (!found) return std::nullopt;
      return val;
    }
  }

  // Walks the leaf chain through right links; each leaf is read under its
  // version and re-read (re-located from the root) on a conflict, so every
  // returned pair was present at the moment its leaf was validated.
  size_t scan(uint64_t start, size_t count, std::vector<std::pair<uint64_t, Value>>* out) override {
    out->clear();
    if (count == 0) return 0;
    uint64_t cursor = start;
    uint64_t v;
    Node* leaf = find_leaf(cursor, &v);
    std::vector<std::pair<uint64_t, Value>> buf;
    buf.reserve(leaf_cap_);
    for (unsigned spins = 0;;) {
      buf.clear();
      size_t want = count - out->size();
      unsigned cnt = count_of(leaf);
      for (unsigned i = 0; i < cnt && buf.size() < want; ++i) {
        uint64_t k = ld(keys(leaf)[i]);
        if (k >= cursor) buf.emplace_back(k, ld(vals(leaf)[i]));
      }
      Node* next = ld(leaf->sibling);
      uint64_t hi = ld(leaf->high);
      if (!check(leaf->version, v)) {
        cpu_relax(&spins);
        leaf = find_leaf(cursor, &v);
        continue;
      }
      out->insert(out->end(), buf.begin(), buf.end());
      if (out->size() >= count || next == nullptr) break;
      cursor = hi;  // > every key of this leaf, == low fence of `next`
      leaf = step_right(next, cursor, &v);
    }
    return out->size();
  }

  // Largest key < `key`: searches the leaf holding key-1; if it has no such
  // key, repeats below its low fence (leaves have no left links).
  std::optional<std::pair<uint64_t, Value>> find_last_less_than(uint64_t key) override {
    if (key == 0) return std::nullopt;
    uint64_t target = key;
    for (unsigned spins = 0;;) {
      uint64_t v;
      Node* leaf = find_leaf(target - 1, &v);
      unsigned cnt = count_of(leaf);
      unsigned i = leaf_lower_bound(leaf, cnt, target);  // first key >= target
      bool found = i > 0;
      uint64_t k = found ? ld(keys(leaf)[i - 1]) : 0;
      Value val = found ? ld(vals(leaf)[i - 1]) : 0;
      uint64_t low = ld(leaf->low);
      if (!check(leaf->version, v)) {
        cpu_relax(&spins);
        continue;
      }
      if (found) return std::make_pair(k, val);
      if (low == 0) return std::nullopt;  // leftmost leaf (a separator is never 0)
      target = low;
    }
  }

  IndexInfo info() const override {
    IndexInfo i;
    i.name = "btree";
    i.description = kBtreeDescription;
    i.caps.ordered = true;
    i.caps.thread_safe = true;
    i.caps.placement = Placement::kDram;
    i.node_size = node_size_;
    std::lock_guard lock(nodes_mu_);
    i.dram_bytes = static_cast<uint64_t>(nodes_.size()) * node_size_;
    return i;
  }

  Status verify(VerifyReport* report) const override;

  /// See btree_damage_for_test() in btree.h.
  Status damage(BtreeDamage d);

 private:
  // --- node access --------------------------------------------------------
  std::atomic<uint64_t>* keys(Node* n) const { return n->slots(); }
  const std::atomic<uint64_t>* keys(const Node* n) const { return n->slots(); }
  std::atomic<uint64_t>* vals(Node* n) const { return n->slots() + leaf_cap_; }
  const std::atomic<uint64_t>* vals(const Node* n) const { return n->slots() + leaf_cap_; }
  std::atomic<uint64_t>* kids(Node* n) const { return n->slots() + inner_cap_; }
  const std::atomic<uint64_t>* kids(const Node* n) const { return n->slots() + inner_cap_; }
  Node* kid(const Node* n, unsigned i) const {
    return reinterpret_cast<Node*>(static_cast<uintptr_t>(ld(kids(n)[i])));
  }
  void set_kid(Node* n, unsigned i, Node* c) const {
    st(kids(n)[i], static_cast<uint64_t>(reinterpret_cast<uintptr_t>(c)));
  }
  unsigned cap(const Node* n) const { return n->level == 0 ? leaf_cap_ : inner_cap_; }
  // Count clamped to the capacity, so a torn optimistic read stays in bounds.
  unsigned count_of(const Node* n) const { return std::min<unsigned>(ld(n->count), cap(n)); }
  bool underfull(const Node* n, unsigned cnt) const { return cnt * 4 < cap(n); }

  // First slot i with keys[i] >= key (linear search, Ni et al. §3.1).
  unsigned leaf_lower_bound(const Node* n, unsigned cnt, uint64_t key) const {
    unsigned i = 0;
    while (i < cnt && ld(keys(n)[i]) < key) ++i;
    return i;
  }
  // Child slot for key: first i with key < keys[i] (or cnt).
  unsigned child_pos(const Node* n, unsigned cnt, uint64_t key) const {
    unsigned i = 0;
    while (i < cnt && key >= ld(keys(n)[i])) ++i;
    return i;
  }

  Node* alloc_node(uint16_t level) {
    void* p = ::operator new (node_size_, std::align_val_t{64});
    Node* n = new (p) Node(level);
    std::atomic<uint64_t>* s = n->slots();
    for (size_t i = 0; i < (node_size_ - kHeaderBytes) / 8; ++i)
      new (s + i) std::atomic<uint64_t>(0);
    std::lock_guard lock(nodes_mu_);
    nodes_.push_back(n);
    return n;
  }

  // The leaf whose fences hold `key`, and the version it was read at (not yet
  // re-checked: the caller reads the leaf, then checks the version).
  Node* find_leaf(uint64_t key, uint64_t* v_out) const {
    for (unsigned spins = 0;; cpu_relax(&spins)) {
      Node* n = root_.load(std::memory_order_acquire);
      for (;;) {
        uint64_t v;
        bool moved_right = false;
        if (!settle(key, &n, &v, &moved_right)) break;
        if (n->level == 0) {
          *v_out = v;
          return n;
        }
        Node* c = kid(n, child_pos(n, count_of(n), key));
        if (c == nullptr || !check(n->version, v)) break;
        n = c;
      }
    }
  }

  // The leaf for `key` (the low fence of `next`) after a scan left a leaf:
  // `next` itself when it still covers key, else a search from the root.
  Node* step_right(Node* next, uint64_t key, uint64_t* v_out) const {
    uint64_t v;
    if (read_lock(next->version, &v) && key >= ld(next->low) &&
        (ld(next->sibling) == nullptr || key < ld(next->high)) && check(next->version, v)) {
      *v_out = v;
      return next;
    }
    return find_leaf(key, v_out);
  }

  bool try_insert(uint64_t key, Value value, Status* s);
  bool try_remove(uint64_t key, Status* s);
  void split(Node* parent, uint64_t pv, unsigned pos, Node* n, uint64_t v, uint64_t rv);
  Node* split_node(Node* n, uint64_t* sep);
  void merge_or_rebalance(Node* parent, uint64_t pv, unsigned pcnt, unsigned pos, Node* n,
                          uint64_t v);
  void collapse_root(Node* n, uint64_t v, uint64_t rv);

  struct VerifyState;
  Status verify_node(const Node* n, uint64_t lo, bool bounded, uint64_t hi, unsigned level,
                     VerifyState* vs) const;

  const uint32_t node_size_;
  const unsigned leaf_cap_;
  const unsigned inner_cap_;
  std::atomic<Node*> root_{nullptr};
  std::atomic<uint64_t> root_lock_{0};  // version lock guarding root_ replacement
  std::atomic<uint64_t> size_{0};       // live keys
  mutable std::mutex nodes_mu_;
  std::vector<Node*> nodes_;  // every node ever allocated, retired ones included
};

// Insert (one attempt; false = restart). Top-down: a full inner node on the
// path, or a full leaf that must take the key, is split first (holding its
// parent) and the insert restarts, so a split never propagates more than one
// level and the parent always has room for the separator.
bool Btree::try_insert(uint64_t key, Value value, Status* s) {
  uint64_t rv = 0;
  read_lock(root_lock_, &rv);
  Node* n = root_.load(std::memory_order_acquire);
  Node* parent = nullptr;
  uint64_t pv = 0;
  unsigned pos = 0;
  bool direct = true;  // n was reached from parent (or is the root), not by a right link
  for (;;) {
    uint64_t v;
    bool moved_right = false;
    if (!settle(key, &n, &v, &moved_right)) return false;
    if (moved_right) direct = false;
    unsigned cnt = count_of(n);
    if (n->level == 0) {
      unsigned i = leaf_lower_bound(n, cnt, key);
      if (i < cnt && ld(keys(n)[i]) == key) {
        if (!check(n->version, v)) return false;
        *s = Status::AlreadyExists();
        return true;
      }
      if (cnt == leaf_cap_) {
        if (direct) split(parent, pv, pos, n, v, rv);
        return false;
      }
      if (!upgrade(n->version, v)) return false;
      // Shift the larger pairs right by one slot; concurrent readers see a
      // torn node only under the lock, and their version check rejects it.
      for (unsigned j = cnt; j > i; --j) {
        st(keys(n)[j], ld(keys(n)[j - 1]));
        st(vals(n)[j], ld(vals(n)[j - 1]));
      }
      st(keys(n)[i], key);
      st(vals(n)[i], value);
      st(n->count, static_cast<uint16_t>(cnt + 1));
      unlock(n->version);
      size_.fetch_add(1, std::memory_order_relaxed);
      *s = Status::Ok();
      return true;
    }
    if (cnt == inner_cap_) {
      if (direct) split(parent, pv, pos, n, v, rv);
      return false;
    }
    pos = child_pos(n, cnt, key);
    Node* c = kid(n, pos);
    if (c == nullptr || !check(n->version, v)) return false;
    parent = n;
    pv = v;
    n = c;
    direct = true;
  }
}

// Splits the full node n (read at version v) whose parent (read at pv) routes
// to it through child slot pos; parent == nullptr means n is the root (read
// under root version rv). Locks parent (or the root lock), then n; gives up
// silently if either changed (the caller restarts anyway).
void Btree::split(Node* parent, uint64_t pv, unsigned pos, Node* n, uint64_t v, uint64_t rv) {
  if (parent == nullptr) {
    if (!upgrade(root_lock_, rv)) return;
    if (root_.load(std::memory_order_acquire) != n || !upgrade(n->version, v)) {
      unlock(root_lock_);
      return;
    }
    uint64_t sep;
    Node* sib = split_node(n, &sep);
    // Root split: a new root with one separator above n and its new sibling.
    Node* root = alloc_node(static_cast<uint16_t>(n->level + 1));
    st(keys(root)[0], sep);
    set_kid(root, 0, n);
    set_kid(root, 1, sib);
    st(root->count, static_cast<uint16_t>(1));
    root_.store(root, std::memory_order_release);
    unlock(n->version);
    unlock(root_lock_);
    return;
  }
  if (!upgrade(parent->version, pv)) return;
  if (!upgrade(n->version, v)) {
    unlock(parent->version);
    return;
  }
  uint64_t sep;
  Node* sib = split_node(n, &sep);
  // The parent is not full: the insert split it on the way down otherwise.
  unsigned pcnt = count_of(parent);
  for (unsigned j = pcnt; j > pos; --j) {
    st(keys(parent)[j], ld(keys(parent)[j - 1]));
    set_kid(parent, j + 1, kid(parent, j));
  }
  st(keys(parent)[pos], sep);
  set_kid(parent, pos + 1, sib);
  st(parent->count, static_cast<uint16_t>(pcnt + 1));
  unlock(n->version);
  unlock(parent->version);
}

// Moves the upper half of the locked, full node n into a new right sibling
// (B-link: the sibling inherits n's high fence and right link, n's high
// fence becomes the separator). Returns the sibling and the separator.
Node* Btree::split_node(Node* n, uint64_t* sep) {
  Node* sib = alloc_node(n->level);
  unsigned cnt = count_of(n);
  if (n->level == 0) {
    unsigned half = cnt / 2;
    for (unsigned j = half; j < cnt; ++j) {
      st(keys(sib)[j - half], ld(keys(n)[j]));
      st(vals(sib)[j - half], ld(vals(n)[j]));
    }
    st(sib->count, static_cast<uint16_t>(cnt - half));
    *sep = ld(keys(sib)[0]);
    st(n->count, static_cast<uint16_t>(half));
  } else {
    unsigned mid = cnt / 2;  // keys[mid] moves up
    *sep = ld(keys(n)[mid]);
    for (unsigned j = mid + 1; j < cnt; ++j) st(keys(sib)[j - mid - 1], ld(keys(n)[j]));
    for (unsigned j = mid + 1; j <= cnt; ++j) set_kid(sib, j - mid - 1, kid(n, j));
    st(sib->count, static_cast<uint16_t>(cnt - mid - 1));
    st(n->count, static_cast<uint16_t>(mid));
  }
  st(sib->low, *sep);
  st(sib->high, ld(n->high));
  st(sib->sibling, ld(n->sibling));
  st(n->sibling, sib);  // publishes the fully built sibling
  st(n->high, *sep);
  return sib;
}

// Remove (one attempt; false = restart). Top-down: an underfull node on the
// path is merged with or rebalanced against a sibling first, and a root with
// a single child is replaced by that child; then the key leaves its leaf.
bool Btree::try_remove(uint64_t key, Status* s) {
  uint64_t rv = 0;
  read_lock(root_lock_, &rv);
  Node* n = root_.load(std::memory_order_acquire);
  Node* parent = nullptr;
  uint64_t pv = 0;
  unsigned pcnt = 0;
  unsigned pos = 0;
  bool direct = true;
  for (;;) {
    uint64_t v;
    bool moved_right = false;
    if (!settle(key, &n, &v, &moved_right)) return false;
    if (moved_right) direct = false;
    unsigned cnt = count_of(n);
    if (direct && parent == nullptr && n->level > 0 && cnt == 0) {
      collapse_root(n, v, rv);
      return false;
    }
    if (direct && parent != nullptr && pcnt > 0 && underfull(n, cnt)) {
      merge_or_rebalance(parent, pv, pcnt, pos, n, v);
      return false;
    }
    if (n->level == 0) {
      unsigned i = leaf_lower_bound(n, cnt, key);
      if (i >= cnt || ld(keys(n)[i]) != key) {
        if (!check(n->version, v)) return false;
        *s = Status::NotFound();
        return true;
      }
      if (!upgrade(n->version, v)) return false;
      for (unsigned j = i + 1; j < cnt; ++j) {
        st(keys(n)[j - 1], ld(keys(n)[j]));
        st(vals(n)[j - 1], ld(vals(n)[j]));
      }
      st(n->count, static_cast<uint16_t>(cnt - 1));
      unlock(n->version);
      size_.fetch_sub(1, std::memory_order_relaxed);
      *s = Status::Ok();
      return true;
    }
    pos = child_pos(n, cnt, key);
    Node* c = kid(n, pos);
    if (c == nullptr || !check(n->version, v)) return false;
    parent = n;
    pv = v;
    pcnt = cnt;
    n = c;
    direct = true;
  }
}

// Merges the underfull node n (child `pos` of parent, which has pcnt >= 1
// separators) with its right sibling (its left one if n is the last child),
// or, when the two do not fit in one node, rebalances them to half each and
// moves the separator. Locks parent, left, right in that order, each only if
// unchanged since read; gives up (caller restarts) otherwise. A merged-away
// right node is marked obsolete and retired (never freed while the tree
// lives), so readers holding a pointer to it restart.
void Btree::merge_or_rebalance(Node* parent, uint64_t pv, unsigned pcnt, unsigned pos, Node* n,
                               uint64_t v) {
  const bool n_left = pos < pcnt;
  const unsigned sep_idx = n_left ? pos : pos - 1;
  Node* sib = kid(parent, n_left ? pos + 1 : pos - 1);
  uint64_t sv;
  if (sib == nullptr || !read_lock(sib->version, &sv) || !check(parent->version, pv)) return;
  Node* left = n_left ? n : sib;
  Node* right = n_left ? sib : n;
  const uint64_t lv = n_left ? v : sv;
  const uint64_t rv = n_left ? sv : v;
  if (!upgrade(parent->version, pv)) return;
  if (!upgrade(left->version, lv)) {
    unlock(parent->version);
    return;
  }
  if (!upgrade(right->version, rv)) {
    unlock(left->version);
    unlock(parent->version);
    return;
  }
  const unsigned lc = count_of(left);
  const unsigned rc = count_of(right);
  const bool leaf = left->level == 0;
  const bool merge = leaf ? lc + rc < leaf_cap_ : lc + rc + 1 < inner_cap_;
  if (merge) {
    if (leaf) {
      for (unsigned j = 0; j < rc; ++j) {
        st(keys(left)[lc + j], ld(keys(right)[j]));
        st(vals(left)[lc + j], ld(vals(right)[j]));
      }
      st(left->count, static_cast<uint16_t>(lc + rc));
    } else {
      // The separator comes down between the two key runs.
      st(keys(left)[lc], ld(keys(parent)[sep_idx]));
      for (unsigned j = 0; j < rc; ++j) st(keys(left)[lc + 1 + j], ld(keys(right)[j]));
      for (unsigned j = 0; j <= rc; ++j) set_kid(left, lc + 1 + j, kid(right, j));
      st(left->count, static_cast<uint16_t>(lc + rc + 1));
    }
    st(left->high, ld(right->high));
    st(left->sibling, ld(right->sibling));
    // Drop separator sep_idx and child sep_idx + 1 (= right) from the parent.
    for (unsigned j = sep_idx + 1; j < pcnt; ++j) {
      st(keys(parent)[j - 1], ld(keys(parent)[j]));
      set_kid(parent, j, kid(parent, j + 1));
    }
    st(parent->count, static_cast<uint16_t>(pcnt - 1));
    unlock(left->version);
    unlock_obsolete(right->version);
    unlock(parent->version);
    return;
  }
  // Rebalance through a scratch copy of both nodes' contents.
  std::array<uint64_t, 2 * kMaxLeafCap + 2> k{};
  std::array<uint64_t, 2 * kMaxLeafCap + 2> x{};
  uint64_t sep;
  if (leaf) {
    const unsigned total = lc + rc;
    for (unsigned j = 0; j < lc; ++j) k[j] = ld(keys(left)[j]), x[j] = ld(vals(left)[j]);
    for (unsigned j = 0; j < rc; ++j)
      k[lc + j] = ld(keys(right)[j]), x[lc + j] = ld(vals(right)[j]);
    const unsigned nl = total / 2;
    for (unsigned j = 0; j < nl; ++j) st(keys(left)[j], k[j]), st(vals(left)[j], x[j]);
    for (unsigned j = nl; j < total; ++j)
      st(keys(right)[j - nl], k[j]), st(vals(right)[j - nl], x[j]);
    st(left->count, static_cast<uint16_t>(nl));
    st(right->count, static_cast<uint16_t>(total - nl));
    sep = k[nl];
  } else {
    // Keys: left's, the separator, right's; children: left's then right's.
    const unsigned total = lc + 1 + rc;
    for (unsigned j = 0; j < lc; ++j) k[j] = ld(keys(left)[j]);
    k[lc] = ld(keys(parent)[sep_idx]);
    for (unsigned j = 0; j < rc; ++j) k[lc + 1 + j] = ld(keys(right)[j]);
    std::array<Node*, 2 * kMaxLeafCap + 2> c{};
    for (unsigned j = 0; j <= lc; ++j) c[j] = kid(left, j);
    for (unsigned j = 0; j <= rc; ++j) c[lc + 1 + j] = kid(right, j);
    const unsigned mid = total / 2;  // k[mid] becomes the separator
    for (unsigned j = 0; j < mid; ++j) st(keys(left)[j], k[j]);
    for (unsigned j = 0; j <= mid; ++j) set_kid(left, j, c[j]);
    for (unsigned j = mid + 1; j < total; ++j) st(keys(right)[j - mid - 1], k[j]);
    for (unsigned j = mid + 1; j <= total; ++j) set_kid(right, j - mid - 1, c[j]);
    st(left->count, static_cast<uint16_t>(mid));
    st(right->count, static_cast<uint16_t>(total - mid - 1));
    sep = k[mid];
  }
  st(keys(parent)[sep_idx], sep);
  st(left->high, sep);
  st(right->low, sep);
  unlock(right->version);
  unlock(left->version);
  unlock(parent->version);
}

// Replaces an inner root with no separators (one child) by that child.
void Btree::collapse_root(Node* n, uint64_t v, uint64_t rv) {
  if (!upgrade(root_lock_, rv)) return;
  if (root_.load(std::memory_order_acquire) != n || !upgrade(n->version, v)) {
    unlock(root_lock_);
    return;
  }
  root_.store(kid(n, 0), std::memory_order_release);
  unlock_obsolete(n->version);
  unlock(root_lock_);
}

// --- verify ------------------------------------------------------------------

struct Btree::VerifyState {
  std::vector<std::vector<const Node*>> levels;  // per level, left to right
  uint64_t keys = 0;
};

Status Btree::verify_node(const Node* n, uint64_t lo, bool bounded, uint64_t hi, unsigned level,
                          VerifyState* vs) const {
  auto bad = [&](const std::string& what) {
    return Status::Corruption("btree: level " + std::to_string(level) + " node with low fence " +
                              std::to_string(lo) + ": " + what);
  };
  const uint64_t ver = ld(n->version);
  if (ver & kLocked) return bad("left locked");
  if (ver & kObsolete) return bad("obsolete node still reachable");
  if (n->level != level) {
    return bad("level " + std::to_string(n->level) + ", expected " + std::to_string(level) +
               " (leaves not all at the same depth)");
  }
  const unsigned cnt = ld(n->count);
  if (cnt > cap(n)) return bad("count " + std::to_string(cnt) + " above capacity");
  if (ld(n->low) != lo) return bad("low fence " + std::to_string(ld(n->low)) + " != separator");
  if (bounded && ld(n->high) != hi) {
    return bad("high fence " + std::to_string(ld(n->high)) + " != separator " + std::to_string(hi));
  }
  for (unsigned i = 0; i < cnt; ++i) {
    const uint64_t k = ld(keys(n)[i]);
    if (i > 0 && k <= ld(keys(n)[i - 1]))
      return bad("keys not strictly ascending at slot " + std::to_string(i));
    if (k < lo || (bounded && k >= hi)) {
      return bad("key " + std::to_string(k) + " outside the range its parent's separators bound");
    }
  }
  vs->levels[level].push_back(n);
  if (level == 0) {
    vs->keys += cnt;
    return Status::Ok();
  }
  for (unsigned i = 0; i <= cnt; ++i) {
    const Node* c = kid(n, i);
    if (c == nullptr) return bad("null child " + std::to_string(i));
    const uint64_t clo = i == 0 ? lo : ld(keys(n)[i - 1]);
    const bool cb = i < cnt || bounded;
    const uint64_t chi = i < cnt ? ld(keys(n)[i]) : hi;
    Status s = verify_node(c, clo, cb, chi, level - 1, vs);
    if (!s.ok()) return s;
  }
  return Status::Ok();
}

Status Btree::verify(VerifyReport* report) const {
  const Node* root = root_.load(std::memory_order_acquire);
  if (ld(root->low) != 0 || ld(root->sibling) != nullptr) {
    return Status::Corruption("btree: root has a low fence or a right link");
  }
  VerifyState vs;
  vs.levels.resize(root->level + 1u);
  Status s = verify_node(root, 0, false, 0, root->level, &vs);
  if (!s.ok()) return s;
  // Right links: on each level, the in-order nodes chained left to right,
  // high fence = next node's low fence, the last one unlinked (acyclic).
  uint64_t inner = 0;
  for (size_t lv = 0; lv < vs.levels.size(); ++lv) {
    const auto& nodes = vs.levels[lv];
    for (size_t j = 0; j < nodes.size(); ++j) {
      const Node* want = j + 1 < nodes.size() ? nodes[j + 1] : nullptr;
      if (ld(nodes[j]->sibling) != want) {
        return Status::Corruption("btree: level " + std::to_string(lv) + " node " +
                                  std::to_string(j) +
                                  ": right link does not point at the next "
                                  "node in key order");
      }
      if (want != nullptr && ld(nodes[j]->high) != ld(want->low)) {
        return Status::Corruption("btree: level " + std::to_string(lv) + " node " +
                                  std::to_string(j) + ": high fence != right sibling's low fence");
      }
    }
    if (lv > 0) inner += nodes.size();
  }
  // The leaf chain, walked by right links from the leftmost leaf, in order.
  uint64_t chain_keys = 0;
  bool first = true;
  uint64_t prev = 0;
  size_t steps = 0;
  for (const Node* l = vs.levels[0].front(); l != nullptr; l = ld(l->sibling)) {
    if (++steps > vs.levels[0].size()) return Status::Corruption("btree: leaf chain has a cycle");
    for (unsigned i = 0; i < ld(l->count); ++i) {
      const uint64_t k = ld(keys(l)[i]);
      if (!first && k <= prev) return Status::Corruption("btree: leaf chain out of key order");
      first = false;
      prev = k;
      ++chain_keys;
    }
  }
  const uint64_t size = size_.load(std::memory_order_relaxed);
  if (chain_keys != vs.keys || vs.keys != size) {
    return Status::Corruption("btree: key count mismatch: tree walk " + std::to_string(vs.keys) +
                              ", leaf chain " + std::to_string(chain_keys) + ", counter " +
                              std::to_string(size));
  }
  *report = VerifyReport{};
  report->keys = vs.keys;
  report->leaves = vs.levels[0].size();
  report->inner_nodes = inner;
  report->height = root->level + 1u;
  return Status::Ok();
}

Status Btree::damage(BtreeDamage d) {
  Node* first = root_.load(std::memory_order_acquire);
  while (first->level > 0) first = kid(first, 0);
  Node* second = ld(first->sibling);
  if (second == nullptr || ld(first->count) < 2 || ld(second->count) < 2) {
    return Status::InvalidArgument("btree_damage_for_test: the tree needs two leaves of 2+ keys");
  }
  switch (d) {
    case BtreeDamage::kUnsortedLeaf: {
      const uint64_t k0 = ld(keys(first)[0]);
      st(keys(first)[0], ld(keys(first)[1]));
      st(keys(first)[1], k0);
      break;
    }
    case BtreeDamage::kLeafChainCycle:
      st(second->sibling, first);
      break;
    case BtreeDamage::kFenceMismatch:
      st(second->low, ld(second->low) + 1);
      break;
    case BtreeDamage::kKeyOutOfRange:
      st(keys(first)[ld(first->count) - 1u], ~uint64_t{0});
      break;
    case BtreeDamage::kCountMismatch:
      size_.fetch_add(1, std::memory_order_relaxed);
      break;
  }
  return Status::Ok();
}

}  // namespace

Status btree_damage_for_test(Index<uint64_t>* idx, BtreeDamage damage) {
  auto* tree = dynamic_cast<Btree*>(idx);
  if (tree == nullptr) return Status::InvalidArgument("btree_damage_for_test: not a btree");
  return tree->damage(damage);
}

Status make_btree(const IndexOptions& options, std::unique_ptr<Index<uint64_t>>* out) {
  // make_index() has checked the node size (btree_valid_node_size).
  *out = std::make_unique<Btree>(options.node_size);
  return Status::Ok();
}

}  // namespace nvindex
