// fastfair: FAST & FAIR (Hwang et al., FAST'18). See fastfair.h for the
// persistent layout and the reader rule, docs/indexes/fastfair.md for
// the overview. Crash model: DESIGN.md §6 (a line holds a prefix, in program
// order, of the stores made to it since it was last durable; an aligned
// 8-byte store is never torn). Every entry slot (16 B at 64 + 16 i) lies in
// one line, so the value and key stores of one slot persist in store order.
#include "indexes/fastfair/fastfair.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "indexes/common/factory.h"
#include "indexes/common/key_record.h"
#include "indexes/common/prefetch.h"
#include "indexes/common/simd_search.h"
#include "nvindex/pm/persist.h"
#include "util/dcheck.h"

namespace nvindex {
namespace fastfair {
namespace {

constexpr auto kAcq = std::memory_order_acquire;
constexpr auto kRlx = std::memory_order_relaxed;

uintptr_t line_of(const void* p) { return reinterpret_cast<uintptr_t>(p) / pm::kLineSize; }

}  // namespace

// ---------------------------------------------------------------- Stash

/// Nodes allocated before an SMO starts, so that OutOfSpace is reported
/// before anything changes. take() falls back to allocating when empty.
///
/// A split reserves one node per level plus a new root but nearly always
/// uses one. The unused ones go back to the tree's spare list (spare_, at
/// most kMaxSpare blocks) for the next split instead of being freed, so a
/// split costs one allocation, not height + 2 allocations and height + 1
/// frees. Spare blocks are allocated but unreachable: after a crash recovery
/// reclaims them like any unpublished block (allocator.h, reachability).
template <class K>
struct FastFairT<K>::Stash {
  FastFairT* tree;
  std::vector<uint64_t> blocks;
  Status fill(size_t n) {
    if (blocks.size() < n) {
      std::lock_guard g(tree->spare_mu_);
      while (blocks.size() < n && !tree->spare_.empty()) {
        blocks.push_back(tree->spare_.back());
        tree->spare_.pop_back();
      }
    }
    while (blocks.size() < n) {
      uint64_t off = 0;
      Status s = tree->pool_->allocator().allocate(tree->node_size_, &off);
      if (!s.ok()) return s;
      blocks.push_back(off);
    }
    return Status::Ok();
  }
  Status take(uint64_t* off) {
    if (!blocks.empty()) {
      *off = blocks.back();
      blocks.pop_back();
      return Status::Ok();
    }
    return tree->pool_->allocator().allocate(tree->node_size_, off);
  }
  /// Returns what was not used to the spare list (never published, so it
  /// is free to reuse), freeing what does not fit.
  ~Stash() {
    if (blocks.empty()) return;
    std::lock_guard g(tree->spare_mu_);
    for (uint64_t b : blocks) {
      if (tree->spare_.size() < kMaxSpare) {
        tree->spare_.push_back(b);
      } else {
        tree->pool_->allocator().free(b);
      }
    }
  }
};

// ---------------------------------------------------------------- basics

template <class K>
FastFairT<K>::FastFairT(pm::Pool* pool) : PersistentIndexOf<K>(pool), keys_(pool) {}

template <class K>
FastFairT<K>::~FastFairT() {
  // Retired nodes were unlinked from every persistent pointer by their merge
  // (or root collapse), retired key records from every slot and low_key by
  // their durable remove or leaf merge, and no thread can read them once the
  // index is gone.
  for (uint64_t off : retired_) pool_->allocator().free(off);
  records_.free_all(*pool_);
  for (uint64_t off : spare_) pool_->allocator().free(off);
  this->record_close_keys();
}

// ---------------------------------------------------------------- key policy

// Integer keys: the word is the key, compared as an unsigned integer (the
// code the tree had before it was templated). String keys: the word is a
// key-record offset; a low_key of 0 (leftmost node of a level) is minus
// infinity and compares below every key, "" included. Holes are equal words
// in both cases (see fastfair.h), so no comparison here decides a hole.

template <class K>
inline typename FastFairT<K>::Probe FastFairT<K>::probe(K key) {
  return KeyWords<K>::probe(key);
}

template <class K>
inline typename FastFairT<K>::Probe FastFairT<K>::probe_of_word(uint64_t word) const {
  return keys_.probe_of_word(word);
}

template <class K>
inline bool FastFairT<K>::word_le(uint64_t word, ProbeArg p) const {
  return keys_.le(word, p);
}

template <class K>
inline bool FastFairT<K>::word_eq(uint64_t word, ProbeArg p) const {
  return keys_.eq(word, p);
}

template <class K>
int FastFairT<K>::compare_words(uint64_t a, uint64_t b) const {
  return keys_.compare(a, b);
}

// Index of the last slot in [0, n) with key <= `key`, or -1. Keys are
// non-decreasing (equal pairs allowed), so the slot found is never the left
// (hole) of an equal pair. Integer keys: the SIMD search of simd_search.h
// (AVX-512 / AVX2 / branch-free scalar binary search, chosen at run time).
// String keys: a binary search over the records (word_le is monotone over
// sorted slots), one record read per probe.
template <class K>
inline int FastFairT<K>::last_le(Entry* e, uint32_t n, ProbeArg p) const {
  if constexpr (kStringKeys) {
    uint32_t lo = 0, hi = n;  // answer + 1 in [lo, hi]
    while (lo < hi) {
      const uint32_t mid = (lo + hi) / 2;
      if (word_le(e[mid].key.load(kAcq), p)) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    return static_cast<int>(lo) - 1;
  } else {
    static_assert(sizeof(Entry) == sizeof(simd::KeyEntry) && offsetof(Entry, key) == 0);
    return simd::last_le(reinterpret_cast<const simd::KeyEntry*>(e), n, p);
  }
}

template <class K>
OwnedKey<K> FastFairT<K>::owned_key(uint64_t word) const {
  return keys_.owned(word);
}

template <class K>
uint32_t FastFairT<K>::clamp_count(const Node* n) const {
  // An optimistic read may see any count a writer stored; it is always
  // <= cap_, but clamp so that a torn view can never index past the node.
  return static_cast<uint32_t>(std::min<uint64_t>(n->count.load(kAcq), cap_));
}

// Single-threaded (set_single_threaded): every lock primitive below is a
// no-op that succeeds (read_lock/validate/lock/upgrade true, unlock nothing),
// consistently, so no version is read, taken or released and no lock word
// is fetched: with one calling thread nothing can change between a read and
// its validation, and no node a descent reaches is obsolete (a merge unlinks
// a node before it retires it, in the same call).
template <class K>
inline void FastFairT<K>::prefetch_node(uint64_t off) const {
  if (!single_) locks_->prefetch(off);
  prefetch_bytes(node(off), prefetch_bytes_);
}

template <class K>
bool FastFairT<K>::upper_bound_of(Node* n, uint64_t* ub) const {
  const uint64_t sib = n->sibling.load(kAcq);
  if (sib == 0) return false;
  *ub = node(sib)->low_key.load(kAcq);
  return true;
}

template <class K>
bool FastFairT<K>::read_lock(uint64_t off, uint64_t* v) const {
  if (single_) {
    *v = 0;
    return true;
  }
  return vlock::read_lock(locks_->word(off), v);
}

template <class K>
bool FastFairT<K>::validate(uint64_t off, uint64_t v) const {
  // Every node word is read with an acquire load, so no later access (this
  // re-read of the version) can be reordered before those reads: no fence
  // is needed (and GCC's ThreadSanitizer does not support one).
  return single_ || vlock::validate(locks_->word(off), v);
}

template <class K>
bool FastFairT<K>::lock(uint64_t off) const {
  return single_ || vlock::lock(locks_->word(off));
}

template <class K>
bool FastFairT<K>::upgrade(uint64_t off, uint64_t v) const {
  return single_ || vlock::upgrade(locks_->word(off), v);
}

template <class K>
void FastFairT<K>::unlock(uint64_t off) const {
  if (!single_) vlock::unlock(locks_->word(off));
}

template <class K>
void FastFairT<K>::unlock_obsolete(uint64_t off) const {
  if (!single_) vlock::unlock_obsolete(locks_->word(off));
}

template <class K>
void FastFairT<K>::retire(uint64_t off) {
  std::lock_guard g(retire_mu_);
  retired_.push_back(off);
}

template <class K>
void FastFairT<K>::retire_record(uint64_t word) {
  if constexpr (kStringKeys) records_.retire(record_of(word));
}

// Key record reclamation (string keys): common/key_record.h, RecordReclaimer
// (an optimistic reader may hold a retired record's offset, so records are
// freed only when no other operation is in flight; every public operation
// counts itself with an InFlight guard).
template <class K>
void FastFairT<K>::reclaim_records() {
  if constexpr (kStringKeys) records_.reclaim(*pool_);
}

// ---------------------------------------------------------------- create

template <class K>
void FastFairT<K>::init_node(uint64_t off, uint32_t level, uint64_t low_key, uint64_t leftmost,
                             uint64_t sibling) {
  // The block is unpublished: no reader can reach it until a later NAW or
  // sibling store, which comes after the caller persists it.
  Node* n = node(off);
  pm::store(&n->count, 0);
  pm::store(&n->sibling, sibling);
  pm::store(&n->low_key, low_key);
  pm::store(&n->leftmost, leftmost);
  pm::store(&n->level_magic, static_cast<uint64_t>(kNodeMagic) << 32 | level);
  for (auto& r : n->reserved) pm::store(&r, 0);
}

template <class K>
Status FastFairT<K>::create(uint32_t node_size, bool inner_dram) {
  if (kStringKeys && pool_->size() > kRecordMask) {
    return Status::InvalidArgument("fastfair: string keys need a pool below 2^48 bytes");
  }
  if (kStringKeys && inner_dram) {
    return Status::InvalidArgument(
        "fastfair: inner=dram takes integer keys only (string keys: inner=pm)");
  }
  node_size_ = node_size;
  inner_dram_ = inner_dram;
  cap_ = (node_size - kHeaderBytes) / kEntryBytes;
  prefetch_bytes_ = std::min<uint32_t>(node_size_, 512);
  locks_ = std::make_unique<LockTable>(pool_->size(), node_size_);
  pm::Allocator& alloc = pool_->allocator();
  uint64_t ro = 0;
  Status s = allocate_root_object(alloc, sizeof(RootObject), &ro);
  if (!s.ok()) return s;
  uint64_t leaf = 0;
  s = alloc.allocate(node_size_, &leaf);
  if (!s.ok()) {
    alloc.free(ro);
    return s;
  }
  // Crash argument: the leaf and the root object (inner placement included)
  // are persisted before Pool::set_root (a NAW) publishes them; a crash
  // earlier leaves a pool with no root whose blocks the next create reclaims
  // (see above). inner=dram: the leaf is the leftmost leaf for good (no merge
  // ever unlinks it), so root_node is never written again.
  init_node(leaf, 0, 0, 0, 0);
  pm::persist(node(leaf), kHeaderBytes, {"fastfair.create.leaf"});
  root_obj_ = pool_->template ptr<RootObject>(ro);
  pm::store(&root_obj_->magic, kRootMagic);
  pm::store(&root_obj_->node_size, static_cast<uint64_t>(node_size_));
  pm::store(&root_obj_->root_node, leaf);
  pm::store(&root_obj_->inner_dram, static_cast<uint64_t>(inner_dram_ ? 1 : 0));
  for (auto& r : root_obj_->reserved) pm::store(&r, uint64_t{0});
  pm::persist(root_obj_, sizeof(RootObject), {"fastfair.create.root_object"});
  pool_->set_root(ro);
  if (inner_dram_) return rebuild_inner({leaf}, 1);
  return Status::Ok();
}

// ---------------------------------------------------------------- FAST

// FAST insert (paper §3.1, Algorithm 1 mended) of (key, value) at slot p of
// locked node x holding n < cap_ entries.
//
// Crash argument. The store sequence is: [slot n := slot n-1; persist;
// NAW count = n+1]; then for j = n-1 .. p+1: slot j := slot j-1 (value, then
// key); then slot p := (value, key). Before the count NAW slot n is beyond
// count (invisible). After it, slots n-1, n form an equal pair: content
// unchanged. Invariant before each step j: slots j, j+1 are an equal pair
// (j is the hole). Storing slot j's value leaves it a hole (its key still
// equals key[j+1]); storing its key makes slot j equal to slot j-1, so the
// hole moves to j-1 and the content is unchanged. Finally slot p (a hole)
// gets value then key: the key store commits the insert. A line is flushed
// and fenced whenever the next slot is on a lower line, so every durable
// state is a prefix of this sequence, and every prefix reads, under the
// reader rule, as the old or the new content.
template <class K>
void FastFairT<K>::fast_insert(Node* x, uint32_t n, uint32_t p, uint64_t key, uint64_t value) {
  Entry* e = x->entries();
  if (p < n) {
    pm::store(&e[n].value, e[n - 1].value.load(kRlx));
    pm::store(&e[n].key, e[n - 1].key.load(kRlx));
    pm::persist(&e[n], kEntryBytes, {"fastfair.insert.shift_last"});
    pm::naw(&x->count, n + 1, {"fastfair.insert.count_shift"});
    for (uint32_t j = n - 1; j > p; --j) {
      pm::store(&e[j].value, e[j - 1].value.load(kRlx));
      pm::store(&e[j].key, e[j - 1].key.load(kRlx));
      if (line_of(&e[j - 1]) != line_of(&e[j]))
        pm::persist(&e[j], kEntryBytes, {"fastfair.insert.shift_line"});
    }
    pm::store(&e[p].value, value);
    pm::store(&e[p].key, key);
    pm::persist(&e[p], kEntryBytes, {"fastfair.insert.slot"});
    return;
  }
  // Append: slot n is beyond count until the NAW.
  pm::store(&e[n].value, value);
  pm::store(&e[n].key, key);
  pm::persist(&e[n], kEntryBytes, {"fastfair.insert.append"});
  pm::naw(&x->count, n + 1, {"fastfair.insert.count_append"});
}

// FAST delete (paper §3.1 mended) of slot p of locked node x holding n
// entries.
//
// Crash argument. For j = p .. n-2: slot j := slot j+1, key first, then
// value. The key store at slot p commits the delete: slot p then equals
// slot p+1 in key and is the hole of an equal pair (the real entry p+1 is
// intact). Storing its value completes the copy; the key store at j+1 then
// makes j+1 the hole while j holds a full copy. Before moving to a slot on a
// higher line, the finished line is flushed and fenced; the last modified
// line is persisted; then NAW count = n-1 drops the final duplicate. Every
// prefix reads as the old content with key[p] removed or not at all.
template <class K>
void FastFairT<K>::fast_delete(Node* x, uint32_t n, uint32_t p) {
  Entry* e = x->entries();
  for (uint32_t j = p; j + 1 < n; ++j) {
    pm::store(&e[j].key, e[j + 1].key.load(kRlx));
    pm::store(&e[j].value, e[j + 1].value.load(kRlx));
    if (j + 2 < n && line_of(&e[j + 1]) != line_of(&e[j]))
      pm::persist(&e[j], kEntryBytes, {"fastfair.delete.shift_line"});
  }
  if (p + 1 < n) pm::persist(&e[n - 2], kEntryBytes, {"fastfair.delete.last_line"});
  pm::naw(&x->count, n - 1, {"fastfair.delete.count"});
}

// FAIR split (paper §4.1, mended) of the full, locked node at xoff into the
// fresh block noff. Returns the separator (N's low_key): `low_record` when
// non-zero (string leaves: a persisted copy of the first moved key's record,
// which N then owns, see fastfair.h), else the first moved key word itself
// (integer keys; string inner nodes, whose pushed-up key already names the
// record of a leaf's low_key).
//
// Crash argument. N is filled and persisted entirely before anything points
// to it (a crash before leaves an unreachable block that recovery reclaims).
// Then, in X's header line, sibling := N and count := m (same line, in that
// order): durable states are {}, {sibling}, {sibling, count}. With only the
// sibling, X's entries >= N.low_key lie beyond X's upper bound and are
// ignored (and dropped by recovery), so X and N together hold the old
// content exactly once. N is reachable through X.sibling only until the
// caller inserts the separator into the parent (B-link); recovery re-inserts
// a missing separator.
template <class K>
uint64_t FastFairT<K>::split(uint64_t xoff, uint64_t noff, uint64_t low_record) {
  pm::count_smo();
  Node* x = node(xoff);
  Node* nn = node(noff);
  Entry* xe = x->entries();
  Entry* ne = nn->entries();
  const uint32_t n = clamp_count(x);
  const uint32_t m = n / 2;
  const bool leaf = x->level() == 0;
  const uint64_t low = low_record != 0 ? low_record : xe[m].key.load(kRlx);
  // Inner nodes push the middle key up: its child becomes N's leftmost.
  const uint32_t from = leaf ? m : m + 1;
  init_node(noff, x->level(), low, leaf ? 0 : xe[m].value.load(kRlx), x->sibling.load(kRlx));
  for (uint32_t i = from; i < n; ++i) {
    pm::store(&ne[i - from].key, xe[i].key.load(kRlx));
    pm::store(&ne[i - from].value, xe[i].value.load(kRlx));
  }
  pm::store(&nn->count, static_cast<uint64_t>(n - from));
  pm::persist(nn, kHeaderBytes + (n - from) * kEntryBytes, {"fastfair.split.new_node"});
  pm::store(&x->sibling, noff);
  pm::store(&x->count, static_cast<uint64_t>(m));
  pm::persist(x, kHeaderBytes, {"fastfair.split.header"});
  return low;
}

// ---------------------------------------------------------------- descent

// Optimistic descent (OLC) from the root to the node at `level` whose range
// holds `key`, moving right whenever key >= a node's upper bound (B-link).
// On kOk, *off is that node and *ver its version (not locked).
//
// The upper bound of a node is its sibling's low_key. Reading it would touch
// one more node per level (a cache miss per level on a large tree), so the
// descent carries what the parent said about the node right of the child it
// routed to: when the parent's next entry names the child's sibling, that
// entry's key is the sibling's low_key (a child's low_key equals its
// separator, and low keys are immutable while a node is reachable; retired
// nodes are not freed while the tree is open), so no read of the sibling is
// needed. Only a child whose sibling the parent does not name (the parent's
// last child, or a split whose separator is not yet in the parent) reads
// the sibling's low_key. Every value used was read under a version that is
// validated before the descent acts on it.
//
// Each node's lines and its child's lock word are prefetched as soon as the
// offset is known, so the misses of one level overlap (the paper's code
// reads a node front to back; a binary search would otherwise take its
// misses one after another).
//
// The search of each node is inlined for the CPU's SIMD level (one
// flattened copy of the descent per level, as InnerTree's), and the child
// and the parent's next entry are chosen by masks, not branches: a
// mispredicted branch that waits for a node's miss keeps the next lookup's
// misses from overlapping this one's (inner_tree.cc, find).
// kWholeBytes != 0: the single-threaded lookup over nodes of that size
// (set_single_threaded; lookup_whole_*): the lock primitives, no-ops there,
// are compiled out rather than tested, the pool base is read once, and each
// child's prefetch is a fixed run of lines.
template <class K>
template <class Search, uint32_t kWholeBytes>
typename FastFairT<K>::Descend FastFairT<K>::descend_with(ProbeArg key, uint32_t level,
                                                          uint64_t* off, uint64_t* ver) const {
  constexpr bool kSingle = kWholeBytes != 0;
  char* const base = pool_->base();
  const auto node = [base](uint64_t o) { return reinterpret_cast<Node*>(base + o); };
  const auto read_lock = [this](uint64_t o, uint64_t* v) {
    if constexpr (kSingle) return (*v = 0, true);
    return this->read_lock(o, v);
  };
  const auto validate = [this](uint64_t o, uint64_t v) {
    if constexpr (kSingle) return true;
    return this->validate(o, v);
  };
  uint64_t cur = root_offset();
  uint64_t v = 0;
  if (!read_lock(cur, &v)) return Descend::kRestart;
  if (node(cur)->level() < level) {
    return validate(cur, v) ? Descend::kNoLevel : Descend::kRestart;
  }
  uint64_t next_off = 0;  // the node right of `cur` as its parent names it (0 = unknown)
  uint64_t next_low = 0;  // that node's low_key
  while (true) {
    Node* n = node(cur);
    const uint32_t lvl = n->level();
    const uint64_t sib = n->sibling.load(kAcq);
    bool right = false;
    if (sib != 0) {
      const uint64_t ub = sib == next_off ? next_low : node(sib)->low_key.load(kAcq);
      right = word_le(ub, key);
    }
    uint64_t next;
    if (right) {
      next = sib;
      next_off = 0;
    } else if (lvl <= level) {
      if (!validate(cur, v) || lvl != level) return Descend::kRestart;
      *off = cur;
      *ver = v;
      return Descend::kOk;
    } else {
      Entry* e = n->entries();
      const uint32_t cnt = clamp_count(n);
      int i;
      if constexpr (kStringKeys) {
        i = last_le(e, cnt, key);
      } else {
        i = Search::last(reinterpret_cast<const simd::KeyEntry*>(e), cnt, key);
      }
      // Child: entry i's, or the leftmost when i is -1.
      const uint64_t found = uint64_t{0} - (i >= 0 ? 1u : 0u);  // all ones when i >= 0
      const uint64_t child = e[i >= 0 ? i : 0].value.load(kAcq);
      next = (child & found) | (n->leftmost.load(kAcq) & ~found);
      // The parent's next entry (i + 1) names the child's right sibling when
      // there is one; 0 otherwise (never equal to a real sibling).
      const uint32_t j = static_cast<uint32_t>(i + 1);
      const uint64_t named = uint64_t{0} - (j < cnt ? 1u : 0u);
      const uint32_t at = j < cnt ? j : 0;
      next_off = e[at].value.load(kAcq) & named;
      next_low = e[at].key.load(kAcq);
    }
    // A hint: harmless even if validation fails.
    if constexpr (kSingle) {
      prefetch_bytes_fixed<kWholeBytes>(node(next));
    } else {
      prefetch_node(next);
    }
    if (!validate(cur, v)) return Descend::kRestart;
    uint64_t nv = 0;
    if (!read_lock(next, &nv)) return Descend::kRestart;
    cur = next;
    v = nv;
  }
}

template <class K>
__attribute__((target("avx512f,popcnt"), flatten)) typename FastFairT<K>::Descend
FastFairT<K>::descend_avx512(ProbeArg key, uint32_t level, uint64_t* off, uint64_t* ver) const {
  return descend_with<simd::LastLeAvx512>(key, level, off, ver);
}
template <class K>
__attribute__((target("avx2,popcnt"), flatten)) typename FastFairT<K>::Descend
FastFairT<K>::descend_avx2(ProbeArg key, uint32_t level, uint64_t* off, uint64_t* ver) const {
  return descend_with<simd::LastLeAvx2>(key, level, off, ver);
}
template <class K>
typename FastFairT<K>::Descend FastFairT<K>::descend_scalar(ProbeArg key, uint32_t level,
                                                            uint64_t* off, uint64_t* ver) const {
  return descend_with<simd::LastLeScalar>(key, level, off, ver);
}

template <class K>
typename FastFairT<K>::Descend FastFairT<K>::descend(ProbeArg key, uint32_t level, uint64_t* off,
                                                     uint64_t* ver) const {
  if (inner_dram_) return level == 0 ? route_leaf(key, off, ver) : Descend::kNoLevel;
  if constexpr (kStringKeys) return descend_scalar(key, level, off, ver);
  switch (simd::search_level()) {
    case simd::Level::kAvx512:
      return descend_avx512(key, level, off, ver);
    case simd::Level::kAvx2:
      return descend_avx2(key, level, off, ver);
    case simd::Level::kScalar:
      break;
  }
  return descend_scalar(key, level, off, ver);
}

// inner=dram: the InnerTree's route protocol (inner_tree.h). The leaf
// covering a key changes only by a split of that leaf, and the splitter
// holds the leaf's lock from before split() until insert_separator() has
// bumped the version of the level-1 inner node that routed to it. So a leaf
// version read unlocked after find(), followed by a successful validation of
// the route, and later by a successful validation of that leaf version (the
// caller's, after its search), means the leaf covered `key` for the whole
// read: a split finished before the version read changed the route (caught
// here, or already seen by find()), one overlapping the read changed the
// leaf's version (caught by the caller). No upper-bound check (no read of
// the sibling) is needed.
template <class K>
typename FastFairT<K>::Descend FastFairT<K>::route_leaf(ProbeArg key, uint64_t* off,
                                                        uint64_t* ver) const {
  if constexpr (kStringKeys) {
    // Unreachable: create() refuses inner=dram for string keys and recover()
    // refuses a string pool that says inner=dram.
    (void)key, (void)off, (void)ver;
    std::abort();
  } else {
    const inner::Route r = single_ ? tree_->find_single(key) : tree_->find(key);
    uint64_t v = 0;
    if (!read_lock(r.leaf, &v) || !tree_->validate(r)) return Descend::kRestart;
    *off = r.leaf;
    *ver = v;
    return Descend::kOk;
  }
}

// inner=dram: find, lock the leaf, validate the route (inner_tree.h); the
// leaf keeps covering `key` while its lock is held. A leaf is never obsolete
// (no merges), so lock() always succeeds.
template <class K>
uint64_t FastFairT<K>::lock_routed_leaf(ProbeArg key) {
  if constexpr (kStringKeys) {
    (void)key;
    std::abort();  // unreachable, as route_leaf
  } else {
    while (true) {
      const inner::Route r = single_ ? tree_->find_single(key) : tree_->find(key);
      const bool locked = lock(r.leaf);
      NVINDEX_DCHECK(locked);
      if (tree_->validate(r)) return r.leaf;
      unlock(r.leaf);
    }
  }
}

// Locks the node at `level` covering `key` (moving right, lock coupling
// left-to-right, while key >= its upper bound). kNoLevel when the tree has
// no such level. inner=dram: lock_routed_leaf (level 0; no other level is
// in PM).
template <class K>
typename FastFairT<K>::Descend FastFairT<K>::lock_covering(ProbeArg key, uint32_t level,
                                                           uint64_t* off) {
  if (inner_dram_) {
    if (level != 0) return Descend::kNoLevel;
    *off = lock_routed_leaf(key);
    return Descend::kOk;
  }
  while (true) {
    uint64_t cur = 0, v = 0;
    const Descend d = descend(key, level, &cur, &v);
    if (d == Descend::kNoLevel) return d;
    if (d == Descend::kRestart || !upgrade(cur, v)) continue;
    bool ok = true;
    while (true) {
      uint64_t ub = 0;
      if (!upper_bound_of(node(cur), &ub) || !word_le(ub, key)) break;
      const uint64_t sib = node(cur)->sibling.load(kRlx);
      // A locked node's sibling is never obsolete (a merge unlinks R while
      // holding L's lock), but stay safe: restart if it is.
      if (!lock(sib)) {
        ok = false;
        unlock(cur);
        break;
      }
      unlock(cur);
      cur = sib;
    }
    if (!ok) continue;
    *off = cur;
    return Descend::kOk;
  }
}

// ---------------------------------------------------------------- reads

template <class K>
template <class Search, bool kRouted, uint32_t kWholeBytes>
std::optional<Value> FastFairT<K>::lookup_with(ProbeArg key) {
  while (true) {
    uint64_t off = 0, v = 0;
    if constexpr (kRouted) {
      if (route_leaf(key, &off, &v) != Descend::kOk) continue;
    } else {
      if (descend_with<Search, kWholeBytes>(key, 0, &off, &v) != Descend::kOk) continue;
    }
    Node* n = node(off);
    Entry* e = n->entries();
    int i;
    if constexpr (kStringKeys) {
      i = last_le(e, clamp_count(n), key);
    } else {
      i = Search::last(reinterpret_cast<const simd::KeyEntry*>(e), clamp_count(n), key);
    }
    const Entry& at = e[i >= 0 ? i : 0];
    const bool found = i >= 0 && word_eq(at.key.load(kAcq), key);
    const Value val = at.value.load(kAcq);
    if (kWholeBytes == 0 && !validate(off, v)) continue;  // one thread: nothing to validate
    if (found) return val;
    return std::nullopt;
  }
}

template <class K>
__attribute__((target("avx512f,popcnt"), flatten)) std::optional<Value> FastFairT<K>::lookup_avx512(
    ProbeArg key) {
  return lookup_with<simd::LastLeAvx512>(key);
}
template <class K>
__attribute__((target("avx2,popcnt"), flatten)) std::optional<Value> FastFairT<K>::lookup_avx2(
    ProbeArg key) {
  return lookup_with<simd::LastLeAvx2>(key);
}
template <class K>
std::optional<Value> FastFairT<K>::lookup_scalar(ProbeArg key) {
  return lookup_with<simd::LastLeScalar>(key);
}

// inner=dram: route_leaf, then lookup_with()'s leaf search inlined for the
// CPU's SIMD level and one validation of the leaf. Instances of their own
// (kRouted), so that the inner=pm lookup's flattened descent stays as it was
// (with a run-time branch in it, inner=pm lookups measured 8-12% slower than
// main's in alternating runs on the loaded 2-core machine; without, equal
// within noise).
template <class K>
__attribute__((target("avx512f,popcnt"), flatten)) std::optional<Value>
FastFairT<K>::lookup_routed_avx512(ProbeArg key) {
  return lookup_with<simd::LastLeAvx512, true>(key);
}
template <class K>
__attribute__((target("avx2,popcnt"), flatten)) std::optional<Value>
FastFairT<K>::lookup_routed_avx2(ProbeArg key) {
  return lookup_with<simd::LastLeAvx2, true>(key);
}
template <class K>
std::optional<Value> FastFairT<K>::lookup_routed_scalar(ProbeArg key) {
  return lookup_with<simd::LastLeScalar, true>(key);
}

// Single-threaded, 512 B nodes, inner=pm: every node a lookup visits is
// searched whole (28 entries, a fixed trip count), as one thread may
// (simd::LastLeAvx512Whole).
template <class K>
__attribute__((target("avx512f,popcnt"), flatten)) std::optional<Value>
FastFairT<K>::lookup_whole_avx512(ProbeArg key) {
  return lookup_with<simd::LastLeAvx512Whole<kWholeEntries>, false, 512>(key);
}
template <class K>
__attribute__((target("avx2,popcnt"), flatten)) std::optional<Value>
FastFairT<K>::lookup_whole_avx2(ProbeArg key) {
  return lookup_with<simd::LastLeAvx2Whole<kWholeEntries>, false, 512>(key);
}

template <class K>
std::optional<Value> FastFairT<K>::lookup(K k) {
  const InFlight in_flight(records_);
  const Probe key = probe(k);
  if constexpr (kStringKeys) return lookup_scalar(key);  // never inner=dram
  if (single_ && cap_ == kWholeEntries && !inner_dram_) {
    switch (simd::search_level()) {
      case simd::Level::kAvx512:
        return lookup_whole_avx512(key);
      case simd::Level::kAvx2:
        return lookup_whole_avx2(key);
      case simd::Level::kScalar:
        break;
    }
  }
  switch (simd::search_level()) {
    case simd::Level::kAvx512:
      return inner_dram_ ? lookup_routed_avx512(key) : lookup_avx512(key);
    case simd::Level::kAvx2:
      return inner_dram_ ? lookup_routed_avx2(key) : lookup_avx2(key);
    case simd::Level::kScalar:
      break;
  }
  return inner_dram_ ? lookup_routed_scalar(key) : lookup_scalar(key);
}

// Interleaved multi-get (Ni et al. §6.1): the steps of descend_with() and
// lookup_with() for up to kGroup lookups, round-robin, one node per step.
// A lookup's state is the node it is at and what its parent said of that
// node's right sibling; each step read-locks the node (prefetched, with its
// lock word, by the step that chose it), moves right or down (prefetching
// the next node) or searches the leaf, and validates, exactly as one
// iteration of descend_with(): a pause between two of its statements, as a
// preempted thread has, changes nothing in its argument. A failed
// validation finishes that lookup as lookup() does (restart from the root).
template <class K>
template <class Search>
void FastFairT<K>::multi_lookup_with(std::span<const K> keys, std::span<std::optional<Value>> out) {
  if constexpr (kStringKeys) {
    Index<K>::multi_lookup(keys, out);  // not interleaved (multi_lookup never calls this)
  } else {
    constexpr size_t kGroup = 32;
    struct State {
      uint64_t cur;       // the node this lookup reads next (prefetched)
      uint64_t next_off;  // the node right of `cur` as its parent names it (0 = unknown)
      uint64_t next_low;  // that node's low_key
      Probe key;
    };
    std::array<State, kGroup> st;
    for (size_t base = 0; base < keys.size(); base += kGroup) {
      const size_t n = std::min(kGroup, keys.size() - base);
      uint64_t pending = (uint64_t{1} << n) - 1;
      const uint64_t root = root_offset();
      for (size_t i = 0; i < n; ++i) st[i] = {root, 0, 0, probe(keys[base + i])};
      while (pending != 0) {
        for (uint64_t bits = pending; bits != 0; bits &= bits - 1) {
          const unsigned i = static_cast<unsigned>(std::countr_zero(bits));
          State& s = st[i];
          std::optional<Value>& result = out[base + i];
          const uint64_t done = uint64_t{1} << i;
          uint64_t v = 0;
          if (!read_lock(s.cur, &v)) {
            result = lookup_with<Search>(s.key);
            pending &= ~done;
            continue;
          }
          Node* nd = node(s.cur);
          const uint32_t lvl = nd->level();
          const uint64_t sib = nd->sibling.load(kAcq);
          bool right = false;
          if (sib != 0) {
            const uint64_t ub = sib == s.next_off ? s.next_low : node(sib)->low_key.load(kAcq);
            right = word_le(ub, s.key);
          }
          Entry* e = nd->entries();
          const uint32_t cnt = clamp_count(nd);
          const int at = Search::last(reinterpret_cast<const simd::KeyEntry*>(e), cnt, s.key);
          if (!right && lvl == 0) {
            // The leaf: lookup_with()'s search, then one validation.
            const Entry& x = e[at >= 0 ? at : 0];
            const bool found = at >= 0 && word_eq(x.key.load(kAcq), s.key);
            const Value val = x.value.load(kAcq);
            if (!validate(s.cur, v)) {
              result = lookup_with<Search>(s.key);
            } else {
              result = found ? std::optional<Value>(val) : std::nullopt;
            }
            pending &= ~done;
            continue;
          }
          uint64_t next;
          if (right) {
            next = sib;
            s.next_off = 0;
          } else {
            const uint64_t found = uint64_t{0} - (at >= 0 ? 1u : 0u);
            const uint64_t child = e[at >= 0 ? at : 0].value.load(kAcq);
            next = (child & found) | (nd->leftmost.load(kAcq) & ~found);
            const uint32_t j = static_cast<uint32_t>(at + 1);
            const uint64_t named = uint64_t{0} - (j < cnt ? 1u : 0u);
            const uint32_t k = j < cnt ? j : 0;
            s.next_off = e[k].value.load(kAcq) & named;
            s.next_low = e[k].key.load(kAcq);
          }
          if (next == 0 || !validate(s.cur, v)) {
            result = lookup_with<Search>(s.key);
            pending &= ~done;
            continue;
          }
          prefetch_node(next);
          s.cur = next;
        }
      }
    }
  }
}

template <class K>
__attribute__((target("avx512f,popcnt"), flatten)) void FastFairT<K>::multi_lookup_avx512(
    std::span<const K> keys, std::span<std::optional<Value>> out) {
  multi_lookup_with<simd::LastLeAvx512>(keys, out);
}
template <class K>
__attribute__((target("avx2,popcnt"), flatten)) void FastFairT<K>::multi_lookup_avx2(
    std::span<const K> keys, std::span<std::optional<Value>> out) {
  multi_lookup_with<simd::LastLeAvx2>(keys, out);
}
template <class K>
void FastFairT<K>::multi_lookup_scalar(std::span<const K> keys,
                                       std::span<std::optional<Value>> out) {
  multi_lookup_with<simd::LastLeScalar>(keys, out);
}

template <class K>
void FastFairT<K>::multi_lookup(std::span<const K> keys, std::span<std::optional<Value>> out) {
  if (kStringKeys || inner_dram_) {
    Index<K>::multi_lookup(keys, out);  // one lookup() per key
    return;
  }
  if constexpr (!kStringKeys) {
    if (keys.size() <= 1) {
      if (keys.size() == 1) out[0] = lookup(keys[0]);
      return;
    }
    switch (simd::search_level()) {
      case simd::Level::kAvx512:
        return multi_lookup_avx512(keys, out);
      case simd::Level::kAvx2:
        return multi_lookup_avx2(keys, out);
      case simd::Level::kScalar:
        break;
    }
    multi_lookup_scalar(keys, out);
  }
}

template <class K>
size_t FastFairT<K>::scan(K start, size_t count, std::vector<std::pair<OwnedKey<K>, Value>>* out) {
  const InFlight in_flight(records_);
  out->clear();
  if (count == 0) return 0;
  // Every key < cursor has been returned or skipped. String keys: the
  // cursor views the caller's key or a low_key's record, which is not freed
  // while this operation is in flight (in_flight: records are freed only
  // when no other operation is, "Key record reclamation").
  Probe cursor = probe(start);
  std::vector<std::pair<uint64_t, Value>> buf;  // (key word, value) of one leaf
  while (true) {
    uint64_t off = 0, v = 0;
    if (descend(cursor, 0, &off, &v) != Descend::kOk) continue;
    bool restart = false;
    while (!restart) {
      Node* n = node(off);
      buf.clear();
      const uint32_t cnt = clamp_count(n);
      uint64_t ub = 0;
      const bool has_ub = upper_bound_of(n, &ub);
      const uint64_t sib = n->sibling.load(kAcq);
      Entry* e = n->entries();
      for (uint32_t i = 0; i < cnt; ++i) {
        const uint64_t k = e[i].key.load(kAcq);
        if (i + 1 < cnt && e[i + 1].key.load(kAcq) == k) continue;  // hole
        if constexpr (kStringKeys) {
          if (has_ub && compare_words(k, ub) >= 0) break;  // moved right
          if (!word_le(k, StringProbe{cursor.key, true}))
            buf.emplace_back(k, e[i].value.load(kAcq));
        } else {
          if (has_ub && k >= ub) break;  // moved right
          if (k >= cursor) buf.emplace_back(k, e[i].value.load(kAcq));
        }
      }
      if (!validate(off, v)) {
        if (!read_lock(off, &v)) restart = true;  // obsolete: from the root
        continue;
      }
      for (const auto& kv : buf) {
        if (out->size() == count) break;
        out->emplace_back(owned_key(kv.first), kv.second);
      }
      if (out->size() == count || sib == 0) return out->size();
      // Every key of this leaf is < ub. A re-read after a failed validation
      // may see a leaf whose ub shrank (split) below the cursor: never move
      // the cursor backwards.
      if constexpr (kStringKeys) {
        if (!word_le(ub, cursor)) cursor = probe_of_word(ub);
      } else {
        cursor = std::max(cursor, ub);
      }
      if (!read_lock(sib, &v)) {
        restart = true;
        continue;
      }
      off = sib;
    }
  }
}

template <class K>
std::optional<std::pair<OwnedKey<K>, Value>> FastFairT<K>::find_last_less_than(K key) {
  const InFlight in_flight(records_);
  // The probe: integer keys, the last key <= key - 1; string keys, a strict
  // probe (the descent routes to the leaf covering keys just below it, and
  // last_le finds the last key < it).
  Probe target;
  if constexpr (kStringKeys) {
    target = StringProbe{key, true};
  } else {
    if (key == 0) return std::nullopt;
    target = key - 1;
  }
  while (true) {
    uint64_t off = 0, v = 0;
    if (descend(target, 0, &off, &v) != Descend::kOk) continue;
    Node* n = node(off);
    const int i = last_le(n->entries(), clamp_count(n), target);
    uint64_t k = 0, val = 0;
    if (i >= 0) {
      k = n->entries()[i].key.load(kAcq);
      val = n->entries()[i].value.load(kAcq);
    }
    const uint64_t low = n->low_key.load(kAcq);
    if (!validate(off, v)) continue;
    // A string key's record is not freed while this operation is in flight
    // (the InFlight guard, "Key record reclamation"), so it may be copied
    // after the validation.
    if (i >= 0) return std::make_pair(owned_key(k), val);
    // Nothing below the probe here: the answer, if any, is left of low_key
    // (strictly smaller each round).
    if (low == 0) return std::nullopt;
    if constexpr (kStringKeys) {
      target = StringProbe{key_record(*pool_, record_of(low)), true};
    } else {
      target = low - 1;
    }
  }
}

// ---------------------------------------------------------------- writes

template <class K>
Status FastFairT<K>::update(K k, Value value) {
  if constexpr (kStringKeys) {
    if (Status s = check_key(kLayout, k); !s.ok()) return s;
  }
  const InFlight in_flight(records_);
  const Probe key = probe(k);
  uint64_t off = 0;
  lock_covering(key, 0, &off);
  Node* n = node(off);
  const uint32_t cnt = clamp_count(n);
  const int i = last_le(n->entries(), cnt, key);
  if (i < 0 || !word_eq(n->entries()[i].key.load(kRlx), key)) {
    unlock(off);
    return Status::NotFound();
  }
  // In-place 8-byte store of the value: a crash leaves the old or the new
  // value (never torn), durable once its line is persisted.
  pm::store(&n->entries()[i].value, value);
  pm::persist(&n->entries()[i], kEntryBytes, {"fastfair.update.value"});
  unlock(off);
  return Status::Ok();
}

template <class K>
Status FastFairT<K>::insert(K k, Value value) {
  // The entry's key word. String keys: the key's record, written and
  // persisted here, before any lock, and published by fast_insert's key
  // store (key_record.h: a crash before that leaves an unreachable record,
  // which recovery reclaims); freed at once if the insert fails (never
  // published).
  uint64_t word = 0;
  // The record is flushed, not fenced: fast_insert persists a slot (flush
  // and fence) before the store that publishes the key word (the count NAW
  // of an append, the key store at slot p after a shift), and a split
  // persists the new node before X.sibling publishes it; either fence
  // commits the record's flushes first.
  if (Status s = keys_.new_word(kLayout, k, &word, {"fastfair.insert.key_record"},
                                RecordFence::kCallerFences);
      !s.ok())
    return s;
  const InFlight in_flight(records_);
  const auto fail = [&](Status s) {
    keys_.free_word(word);
    return s;
  };
  const Probe key = probe(k);
  uint64_t off = 0;
  lock_covering(key, 0, &off);
  Node* x = node(off);
  uint32_t n = clamp_count(x);
  int i = last_le(x->entries(), n, key);
  if (i >= 0 && word_eq(x->entries()[i].key.load(kRlx), key)) {
    unlock(off);
    return fail(Status::AlreadyExists());
  }
  if (n < cap_) {
    fast_insert(x, n, static_cast<uint32_t>(i + 1), word, value);
    unlock(off);
    return Status::Ok();
  }
  // Split. Allocate every node the SMO may need (one per level plus a new
  // root) before changing anything, so OutOfSpace leaves the tree unchanged.
  pm::SmoTimer smo_timer;  // the SMO's wall time, when one is counted (pm/counters.h)
  Stash stash{this, {}};
  Status s = stash.fill(node(root_offset())->level() + 2);
  if (!s.ok()) {
    unlock(off);
    return fail(s);
  }
  // String keys: N's low_key (and the separator in the parent) is a record
  // of its own, a copy of the key split() moves first (slot n / 2), which N
  // owns; persisted here, reachable only once split() publishes N.
  uint64_t low_record = 0;
  if constexpr (kStringKeys) {
    const uint64_t first_moved = x->entries()[n / 2].key.load(kRlx);
    const std::string_view moved = key_record(*pool_, record_of(first_moved));
    // Flushed only: the new node's persist below fences before X.sibling
    // publishes the node that owns it.
    s = store_key_record(*pool_, moved, &low_record, {"fastfair.split.separator_record"},
                         RecordFence::kCallerFences);
    if (!s.ok()) {
      unlock(off);
      return fail(s);
    }
    low_record = key_word(low_record, moved);
  }
  uint64_t noff = 0;
  const Status took = stash.take(&noff);
  NVINDEX_DCHECK(took.ok());  // filled with at least two nodes above
  const uint64_t sep = split(off, noff, low_record);
  Node* target = word_le(sep, key) ? node(noff) : x;
  n = clamp_count(target);
  i = last_le(target->entries(), n, key);
  fast_insert(target, n, static_cast<uint32_t>(i + 1), word, value);
  if (inner_dram_) {
    // inner=dram: route N in the DRAM inner nodes while X's lock is held
    // (the route protocol, route_leaf); nothing in PM changes, so a crash
    // at any point recovers the leaf level split() made durable and rebuilds
    // the inner nodes from it.
    if constexpr (!kStringKeys) tree_->insert_separator(off, sep, noff);
    unlock(off);
    return Status::Ok();
  }
  // N is reachable only through X.sibling, and X is locked: the insert into
  // N above was exclusive. The child is consistent on its own (B-link), so
  // release it before locking the parent.
  unlock(off);
  // If the root grew concurrently beyond the stash and the pool is full
  // (OutOfSpace), the separator stays missing: correct for every operation
  // (B-link), and recovery re-inserts it. The key itself is inserted. Any
  // other error is a damaged tree, reported to the caller.
  if (Status ss = insert_separator(1, sep, noff, &stash);
      !ss.ok() && ss.code() != Code::kOutOfSpace) {
    return ss;
  }
  return Status::Ok();
}

// Inserts the separator (sep -> child) into the node at `level` covering
// sep, splitting it (recursively) when full; grows a new root when the tree
// has no node at `level` (the child's level is the root's).
template <class K>
Status FastFairT<K>::insert_separator(uint32_t level, uint64_t sep, uint64_t child, Stash* stash) {
  while (true) {
    const Probe sp = probe_of_word(sep);
    uint64_t off = 0;
    if (lock_covering(sp, level, &off) == Descend::kNoLevel) {
      std::lock_guard g(root_mu_);
      const uint64_t old_root = root_offset();
      const uint32_t root_level = node(old_root)->level();
      if (root_level >= level) continue;  // another thread grew the tree
      if (root_level + 1 != level) return Status::Corruption("fastfair: level skipped");
      uint64_t r = 0;
      Status s = stash->take(&r);
      if (!s.ok()) return s;
      // Root split (failure-atomic): the new root is built and persisted
      // while unreachable, then one NAW of the root offset publishes it. The
      // old root is the leftmost node of its level, so {leftmost = old root,
      // (sep, child)} routes correctly even if other separators of that
      // level are still missing (they are found by moving right).
      init_node(r, level, 0, old_root, 0);
      Entry* e = node(r)->entries();
      pm::store(&e[0].key, sep);
      pm::store(&e[0].value, child);
      pm::store(&node(r)->count, 1);
      pm::persist(node(r), kHeaderBytes + kEntryBytes, {"fastfair.root_split.new_root"});
      pm::naw(&root_obj_->root_node, r, {"fastfair.root_split.publish"});
      return Status::Ok();
    }
    Node* p = node(off);
    const uint32_t n = clamp_count(p);
    const int i = last_le(p->entries(), n, sp);
    if (i >= 0 && word_eq(p->entries()[i].key.load(kRlx), sp)) {
      unlock(off);  // already present (recovery re-running): nothing to do
      return Status::Ok();
    }
    if (n < cap_) {
      fast_insert(p, n, static_cast<uint32_t>(i + 1), sep, child);
      unlock(off);
      return Status::Ok();
    }
    uint64_t noff = 0;
    Status s = stash->take(&noff);
    if (!s.ok()) {
      unlock(off);
      return s;
    }
    // An inner split pushes its middle key word up (no new record: it names
    // a leaf's low_key record, fastfair.h).
    const uint64_t up = split(off, noff, 0);
    Node* target = word_le(up, sp) ? node(noff) : p;
    const uint32_t tn = clamp_count(target);
    fast_insert(target, tn, static_cast<uint32_t>(last_le(target->entries(), tn, sp) + 1), sep,
                child);
    unlock(off);
    sep = up;
    child = noff;
    ++level;
  }
}

template <class K>
Status FastFairT<K>::remove(K k) {
  if constexpr (kStringKeys) {
    if (Status s = check_key(kLayout, k); !s.ok()) return s;
  }
  const InFlight in_flight(records_);
  const Probe key = probe(k);
  uint64_t off = 0;
  lock_covering(key, 0, &off);
  Node* x = node(off);
  const uint32_t n = clamp_count(x);
  const int i = last_le(x->entries(), n, key);
  if (i < 0 || !word_eq(x->entries()[i].key.load(kRlx), key)) {
    unlock(off);
    return Status::NotFound();
  }
  const uint64_t word = x->entries()[i].key.load(kRlx);
  fast_delete(x, n, static_cast<uint32_t>(i));
  unlock(off);
  // String keys: the slot is gone and durable (fast_delete ends with the
  // count NAW); an optimistic reader may still hold the record's offset, so
  // the record is retired and freed once no other operation is in flight
  // ("Key record reclamation"; after a crash recovery reclaims it: no slot
  // names it).
  retire_record(word);
  // inner=dram: no merge (the InnerTree removes no separator); an empty
  // leaf stays on the chain and takes the later inserts of its range.
  if (!inner_dram_ && n - 1 < cap_ / 4) {
    pm::SmoTimer smo_timer;  // the SMO's wall time, when one is counted (pm/counters.h)
    try_merge(0, key);
  }
  reclaim_records();
  return Status::Ok();
}

// FAIR merge (paper §4.2, mended), best effort: any failed condition leaves
// the tree as it is (an underfull node is legal). Locks the parent P at
// level+1 covering `key`, then L and R (top-down, left-to-right), where R is
// absorbed into its left neighbour L under the same parent.
//
// Crash argument. 1) FAST-delete R's separator from P: R stays reachable
// through L.sibling (B-link); recovery would re-insert the separator. 2)
// Append R's entries (for inner nodes first (sep, R.leftmost)) after L's
// count and persist them: invisible. 3) In L's header line store count, then
// sibling := R.sibling, persist. Durable states {count}: the new entries are
// >= L's upper bound (R.low_key) and ignored; {count, sibling}: merged. 4) R
// is unreachable: retired (freed at destruction; after a crash recovery
// reclaims it).
template <class K>
void FastFairT<K>::try_merge(uint32_t level, ProbeArg key) {
  uint64_t poff = 0;
  if (lock_covering(key, level + 1, &poff) == Descend::kNoLevel) return;
  Node* p = node(poff);
  const uint32_t pn = clamp_count(p);
  Entry* pe = p->entries();
  const bool p_is_root = poff == root_offset();
  if (pn == 0) {
    // P has a single child: nothing to merge at this level, but P itself is
    // underfull: merge it one level up (or collapse it if it is the root).
    unlock(poff);
    if (p_is_root) {
      collapse_root();
    } else {
      try_merge(level + 1, key);
    }
    return;
  }
  const int idx = last_le(pe, pn, key);
  const uint32_t sepi = idx < 0 ? 0 : static_cast<uint32_t>(idx);
  const uint64_t roff = pe[sepi].value.load(kRlx);
  const uint64_t loff = sepi == 0 ? p->leftmost.load(kRlx) : pe[sepi - 1].value.load(kRlx);
  const uint64_t sep = pe[sepi].key.load(kRlx);
  const uint64_t coff = idx < 0 ? loff : roff;  // the underfull node
  if (!lock(loff)) {
    unlock(poff);
    return;
  }
  if (!lock(roff)) {
    unlock(loff);
    unlock(poff);
    return;
  }
  Node* l = node(loff);
  Node* r = node(roff);
  const uint32_t ln = clamp_count(l);
  const uint32_t rn = clamp_count(r);
  const uint32_t extra = level > 0 ? 1 : 0;
  // Merge when the combined node is at most 3/4 full (paper: leaves room, no
  // split right after); an empty node is absorbed whenever everything fits,
  // so that empty nodes do not linger next to a fuller neighbour.
  const uint32_t cn = clamp_count(node(coff));
  const uint32_t limit = cn == 0 ? cap_ : cap_ * 3 / 4;
  if (l->sibling.load(kRlx) != roff || r->low_key.load(kRlx) != sep || cn >= cap_ / 4 ||
      ln + rn + extra > limit) {
    unlock(roff);
    unlock(loff);
    unlock(poff);
    return;
  }
  fast_delete(p, pn, sepi);  // 1)
  Entry* le = l->entries();
  Entry* re = r->entries();
  uint32_t at = ln;  // 2)
  if (extra) {
    pm::store(&le[at].key, sep);
    pm::store(&le[at].value, r->leftmost.load(kRlx));
    ++at;
  }
  for (uint32_t j = 0; j < rn; ++j, ++at) {
    pm::store(&le[at].key, re[j].key.load(kRlx));
    pm::store(&le[at].value, re[j].value.load(kRlx));
  }
  if (at > ln) pm::persist(&le[ln], (at - ln) * kEntryBytes, {"fastfair.merge.entries"});
  pm::store(&l->count, static_cast<uint64_t>(at));  // 3)
  pm::store(&l->sibling, r->sibling.load(kRlx));
  pm::count_smo();
  pm::persist(l, kHeaderBytes, {"fastfair.merge.header"});
  unlock_obsolete(roff);  // 4)
  retire(roff);
  // String keys: a leaf merge leaves R's low_key record named by nothing
  // (P's separator is deleted, R is unreachable, L's entries own their own
  // records; R is not P's leftmost child, so no ancestor names it). An inner
  // merge keeps it as the separator appended to L.
  if (level == 0) retire_record(sep);
  unlock(loff);
  unlock(poff);
  if (p_is_root) {
    if (pn - 1 == 0) collapse_root();
  } else if (pn - 1 < cap_ / 4) {
    try_merge(level + 1, key);
  }
}

// Root collapse: an inner root with no entry and no sibling is replaced by
// its only child with one NAW of the root offset (failure-atomic; the old
// root becomes unreachable and is retired, or reclaimed after a crash).
template <class K>
void FastFairT<K>::collapse_root() {
  std::lock_guard g(root_mu_);
  const uint64_t r = root_offset();
  Node* n = node(r);
  if (n->level() == 0 || !lock(r)) return;
  if (n->count.load(kRlx) == 0 && n->sibling.load(kRlx) == 0) {
    pm::naw(&root_obj_->root_node, n->leftmost.load(kRlx), {"fastfair.collapse_root.publish"});
    unlock_obsolete(r);
    retire(r);
  } else {
    unlock(r);
  }
}

// ---------------------------------------------------------------- recovery

// Collects every node level by level, top-down, each level as its sibling
// chain from the leftmost node; validates offsets, alignment, block size,
// magic, level and count; detects cycles. Never dereferences an offset it
// has not validated.
template <class K>
Status FastFairT<K>::walk_levels(std::vector<std::vector<uint64_t>>* levels) const {
  levels->clear();
  std::unordered_set<uint64_t> seen;
  auto check = [&](uint64_t off, uint32_t level, const char* what) -> Status {
    if (off == 0 || !pool_->contains(off, node_size_) || off % node_size_ != 0 ||
        pool_->allocator().block_size(off) != node_size_) {
      return Status::Corruption("fastfair: " + std::string(what) + " offset " + hex(off) +
                                " is not a node block of the pool");
    }
    const Node* n = node(off);
    if (n->magic() != kNodeMagic) {
      return Status::Corruption("fastfair: bad node magic at " + hex(off));
    }
    if (n->level() != level) {
      return Status::Corruption("fastfair: node " + hex(off) + " has level " +
                                std::to_string(n->level()) + ", expected " + std::to_string(level));
    }
    if (n->count.load(kRlx) > cap_) {
      return Status::Corruption("fastfair: node " + hex(off) + " count exceeds capacity");
    }
    if (!seen.insert(off).second) {
      return Status::Corruption("fastfair: node " + hex(off) + " reached twice (cycle)");
    }
    return Status::Ok();
  };
  uint64_t first = root_offset();
  if (first == 0 || !pool_->contains(first, node_size_) || first % node_size_ != 0) {
    return Status::Corruption("fastfair: root node offset " + hex(first) +
                              " out of range or misaligned");
  }
  // Read the level only after the range check; check() validates the rest.
  if (node(first)->level() > 64) return Status::Corruption("fastfair: root level too large");
  for (int64_t lvl = node(first)->level(); lvl >= 0; --lvl) {
    // Every level has a leftmost node: the root, or the leftmost child of the
    // level above (0 there is damage, found by the pool fuzzer).
    if (first == 0) {
      return Status::Corruption("fastfair: level " + std::to_string(lvl) +
                                " has no leftmost node (inner node without a leftmost child)");
    }
    std::vector<uint64_t> chain;
    for (uint64_t off = first; off != 0; off = node(off)->sibling.load(kRlx)) {
      Status s = check(off, static_cast<uint32_t>(lvl), chain.empty() ? "leftmost" : "sibling");
      if (!s.ok()) return s;
      chain.push_back(off);
    }
    if (lvl > 0) first = node(chain.front())->leftmost.load(kRlx);
    levels->push_back(std::move(chain));
  }
  return Status::Ok();
}

// Normalises one node (single-threaded, during recovery): drops entries >=
// its upper bound, then removes equal-pair holes.
//
// Crash argument (recovery itself may crash and run again): dropping the
// tail is one NAW of count and removes only entries the reader rule already
// ignores. A hole is removed by FAST delete of the hole's slot: its first key
// store writes the key the slot already has, and every later state reads the
// same content, so any prefix is an equivalent, still-normalisable node.
template <class K>
template <class F>
void FastFairT<K>::for_each_settled(uint64_t off, F&& f) const {
  Node* x = node(off);
  const Entry* e = x->entries();
  uint32_t n = clamp_count(x);
  uint64_t ub = 0;
  if (upper_bound_of(x, &ub)) {
    while (n > 0 && compare_words(e[n - 1].key.load(kRlx), ub) >= 0) --n;
  }
  for (uint32_t i = 0; i < n; ++i) {
    if (i + 1 < n && e[i].key.load(kRlx) == e[i + 1].key.load(kRlx)) continue;  // hole
    f(i);
  }
}

// String keys: every key word a recovery comparison may read (low keys;
// entries below count, holes and entries beyond the upper bound included)
// must name a key record before any is dereferenced, so a damaged word gives
// Corruption, not a wild read.
template <class K>
Status FastFairT<K>::check_key_words(const std::vector<std::vector<uint64_t>>& levels) const {
  if constexpr (kStringKeys) {
    for (const auto& chain : levels) {
      for (size_t j = 0; j < chain.size(); ++j) {
        const Node* x = node(chain[j]);
        const uint64_t low = x->low_key.load(kRlx);
        // The leftmost node's low_key is 0 (minus infinity), checked below.
        if (j > 0 || low != 0) {
          if (Status s = check_key_word(*pool_, kLayout, low); !s.ok()) return s;
        }
        const Entry* e = const_cast<Node*>(x)->entries();
        for (uint32_t i = 0; i < clamp_count(x); ++i) {
          if (Status s = check_key_word(*pool_, kLayout, e[i].key.load(kRlx)); !s.ok()) return s;
        }
      }
    }
  }
  (void)levels;
  return Status::Ok();
}

template <class K>
Status FastFairT<K>::normalize(uint64_t off) {
  Node* x = node(off);
  Entry* e = x->entries();
  uint32_t n = clamp_count(x);
  for (uint32_t i = 0; i + 1 < n; ++i) {
    if (compare_words(e[i].key.load(kRlx), e[i + 1].key.load(kRlx)) > 0) {
      return Status::Corruption("fastfair: keys out of order in node " + hex(off));
    }
  }
  uint64_t ub = 0;
  if (upper_bound_of(x, &ub)) {
    uint32_t cut = n;
    while (cut > 0 && compare_words(e[cut - 1].key.load(kRlx), ub) >= 0) --cut;
    if (cut < n) {
      pm::naw(&x->count, cut, {"fastfair.recover.trim"});
      n = cut;
    }
  }
  for (uint32_t i = n - (n > 0 ? 1 : 0); i-- > 0;) {
    if (e[i].key.load(kRlx) == e[i + 1].key.load(kRlx)) {
      fast_delete(x, n, i);
      --n;
    }
  }
  return Status::Ok();
}

// inner=dram, after a crash (common/persistent.h, check_lost_leaves): an
// unreachable node block is a whole leaf when it has the node magic, level
// 0, and its slots below count hold keys that ascend (equal pairs are holes,
// counted once), none below its low_key, and no all-zero entry (the mark of
// a split's new leaf that the crash left partly written: its unpersisted
// lines are zero, check_lost_leaves). Its sibling offset is not followed. A
// key is held when the chain leaf covering it (by low_key: they strictly
// ascend, checked by walk_levels) holds it as a settled entry. The only legitimate whole leaf off
// the chain is a split's new leaf N not yet linked: the split persists N whole before the NAW that
// links it and truncates the old leaf's count only after that, so every key of N is still the old
// leaf's. Under inner=dram leaves never merge and no leaf is freed, so no other block of the node
// class holds anything.
template <class K>
Status FastFairT<K>::check_lost_leaves_of(pm::Allocator& alloc,
                                          const std::vector<uint64_t>& chain) {
  if constexpr (kStringKeys) {
    return Status::Ok();  // inner=dram takes integer keys only
  } else {
    auto live_keys = [&](uint64_t off, std::vector<uint64_t>* keys) {
      Node* n = node(off);
      if (n->magic() != kNodeMagic || n->level() != 0) return false;
      const Entry* e = n->entries();
      const uint32_t c = clamp_count(n);
      const uint64_t low = n->low_key.load(kRlx);
      for (uint32_t i = 0; i < c; ++i) {
        const uint64_t k = e[i].key.load(kRlx);
        if ((k == 0 && e[i].value.load(kRlx) == 0) || k < low) return false;
        if (i + 1 < c && e[i + 1].key.load(kRlx) == k) continue;  // a hole
        if (!keys->empty() && k <= keys->back()) return false;
        keys->push_back(k);
      }
      return !keys->empty();
    };
    auto ranges = [&](std::vector<std::pair<uint64_t, uint64_t>>* r) {
      for (uint64_t off : chain) r->emplace_back(node(off)->low_key.load(kRlx), off);
    };
    auto leaf_has = [&](uint64_t leaf, uint64_t k) {
      const Entry* e = node(leaf)->entries();
      bool found = false;
      for_each_settled(leaf, [&](uint32_t i) { found = found || e[i].key.load(kRlx) == k; });
      return found;
    };
    return this->check_lost_leaves(kLayout, alloc, node_size_, live_keys, ranges, leaf_has,
                                   "fastfair.recover.lost_leaf_check");
  }
}

// Re-inserts separators missing from parents, bottom-up: a node on a
// level's sibling chain that no parent references (a crash between a split's
// sibling store and its parent insert, or during a merge after its parent
// delete) gets (low_key, node) inserted into the parent covering low_key,
// with the ordinary crash-safe insert (which may split or grow a new root).
template <class K>
Status FastFairT<K>::repair_separators() {
  Stash stash{this, {}};
  for (uint32_t lvl = 0;; ++lvl) {
    std::vector<std::vector<uint64_t>> levels;
    Status s = walk_levels(&levels);
    if (!s.ok()) return s;
    const uint32_t top = static_cast<uint32_t>(levels.size()) - 1;
    if (lvl > top) return Status::Ok();
    const std::vector<uint64_t>& chain = levels[top - lvl];
    std::unordered_set<uint64_t> referenced;
    if (lvl < top) {
      for (uint64_t poff : levels[top - lvl - 1]) {
        Node* p = node(poff);
        referenced.insert(p->leftmost.load(kRlx));
        for (uint32_t i = 0; i < clamp_count(p); ++i) {
          referenced.insert(p->entries()[i].value.load(kRlx));
        }
      }
    } else {
      referenced.insert(chain.front());  // the root
    }
    for (uint64_t off : chain) {
      if (referenced.count(off)) continue;
      s = insert_separator(lvl + 1, node(off)->low_key.load(kRlx), off, &stash);
      if (!s.ok()) return s;
    }
  }
}

// Recovery: validate the root object, walk every node (Corruption on a bad
// offset, magic, level or a cycle; never a crash), hand the reachable set to
// the allocator (every other block, e.g. an allocated-but-unpublished node,
// is reclaimed), normalise every node, re-insert missing separators.
// inner=dram: the same steps on the one PM level (the leaf chain from the
// leftmost leaf; no separator to repair), then the DRAM inner nodes are
// built from the chain (rebuild_inner), at every open, clean or not.
template <class K>
Status FastFairT<K>::recover(unsigned threads) {
  if (Status s = this->open_root_object(kLayout, kRootMagic, &root_obj_); !s.ok()) return s;
  if (root_obj_->node_size > 4096 ||
      !valid_node_size(static_cast<uint32_t>(root_obj_->node_size))) {
    return Status::Corruption("fastfair: root object has invalid node size " +
                              std::to_string(root_obj_->node_size));
  }
  if (kStringKeys && pool_->size() > kRecordMask) {
    return Status::InvalidArgument("fastfair: string keys need a pool below 2^48 bytes");
  }
  // A string pool never says inner=dram (create refuses it): damage.
  if (root_obj_->inner_dram > 1 || (kStringKeys && root_obj_->inner_dram != 0)) {
    return Status::Corruption("fastfair: root object has invalid inner placement " +
                              std::to_string(root_obj_->inner_dram));
  }
  inner_dram_ = root_obj_->inner_dram == 1;
  node_size_ = static_cast<uint32_t>(root_obj_->node_size);
  cap_ = (node_size_ - kHeaderBytes) / kEntryBytes;
  prefetch_bytes_ = std::min<uint32_t>(node_size_, 512);
  locks_ = std::make_unique<LockTable>(pool_->size(), node_size_);

  std::vector<std::vector<uint64_t>> levels;
  Status s = walk_levels(&levels);
  if (!s.ok()) return s;
  if (inner_dram_ && levels.size() != 1) {
    return Status::Corruption("fastfair: inner=dram, but the root object names node " +
                              hex(root_offset()) + " of level " +
                              std::to_string(levels.size() - 1) + ", not the leftmost leaf");
  }
  s = check_key_words(levels);
  if (!s.ok()) return s;
  // Structural checks before anything is written (a damaged pool must give
  // Corruption, not be "normalised" into a different tree, nor recover into
  // a tree whose later operations loop or lock a node twice). Every state a
  // crash can leave satisfies them: on each level the low keys strictly
  // increase from 0 along the sibling chain (low keys are immutable, a split
  // inserts N right of X with X.low < N.low, a merge unlinks a node), and the
  // live children of a level's nodes in chain order (leftmost, then the
  // entries that are neither holes nor beyond the node's upper bound) are
  // distinct nodes of the level below, in chain order, each with low_key
  // equal to its separator (leftmost: equal to the parent's low_key). Nodes
  // of the level below that no parent names are the missing separators
  // repaired below.
  for (size_t li = 0; li < levels.size(); ++li) {
    uint64_t prev_low = 0;
    for (size_t j = 0; j < levels[li].size(); ++j) {
      const uint64_t low = node(levels[li][j])->low_key.load(kRlx);
      if ((j == 0 && low != 0) || (j > 0 && (low == 0 || compare_words(low, prev_low) <= 0))) {
        return Status::Corruption("fastfair: low keys out of order on the sibling chain at " +
                                  hex(levels[li][j]));
      }
      prev_low = low;
    }
    if (li + 1 == levels.size()) break;
    std::unordered_map<uint64_t, size_t> below;
    for (size_t j = 0; j < levels[li + 1].size(); ++j) below.emplace(levels[li + 1][j], j);
    size_t next = 0;  // children must appear at increasing chain positions
    auto child_ok = [&](uint64_t parent, uint64_t c, uint64_t sep) -> Status {
      const auto it = below.find(c);
      if (it == below.end()) {
        return Status::Corruption("fastfair: child " + hex(c) + " of " + hex(parent) +
                                  " is not on the level below");
      }
      if (it->second < next) {
        return Status::Corruption("fastfair: child " + hex(c) + " of " + hex(parent) +
                                  " named twice or out of order");
      }
      if (node(c)->low_key.load(kRlx) != sep) {
        return Status::Corruption("fastfair: child " + hex(c) + " of " + hex(parent) +
                                  " has low_key != its separator");
      }
      next = it->second + 1;
      return Status::Ok();
    };
    for (uint64_t poff : levels[li]) {
      Node* p = node(poff);
      uint64_t ub = 0;
      const bool has_ub = upper_bound_of(p, &ub);
      s = child_ok(poff, p->leftmost.load(kRlx), p->low_key.load(kRlx));
      if (!s.ok()) return s;
      const uint32_t n = clamp_count(p);
      Entry* e = p->entries();
      for (uint32_t i = 0; i < n; ++i) {
        const uint64_t k = e[i].key.load(kRlx);
        if ((i + 1 < n && e[i + 1].key.load(kRlx) == k) || (has_ub && compare_words(k, ub) >= 0)) {
          continue;
        }
        s = child_ok(poff, e[i].value.load(kRlx), k);
        if (!s.ok()) return s;
      }
    }
  }
  // Nothing was written so far: the pass below compares what the levels
  // reach with the pool's close record before anything changes.
  s = this->reclaim_unreachable(
      kLayout,
      [&](pm::Allocator& alloc, uint64_t* keys) {
        for (const auto& chain : levels) {
          for (uint64_t off : chain) {
            if (Status m = alloc.mark_reachable(off); !m.ok()) return m;
          }
        }
        // The leaves' live entries are the keys. String keys: each record is
        // marked by its owner (fastfair.h): a leaf's live entry, or a leaf's
        // non-zero low_key; holes and entries beyond the upper bound are copies
        // of live entries and are skipped, and inner nodes name leaves' low_key
        // records (checked above: separator == child's low_key), so a record
        // named twice is damage (mark_reachable: marked twice).
        Status m = Status::Ok();
        for (uint64_t off : levels.back()) {
          Entry* e = node(off)->entries();
          for_each_settled(off, [&](uint32_t i) {
            ++*keys;
            if constexpr (kStringKeys) {
              if (m.ok()) m = mark_key_record(*pool_, kLayout, record_of(e[i].key.load(kRlx)));
            }
          });
          if constexpr (kStringKeys) {
            const uint64_t low = node(off)->low_key.load(kRlx);
            if (m.ok() && low != 0) m = mark_key_record(*pool_, kLayout, record_of(low));
          }
          if (!m.ok()) return m;
        }
        return Status::Ok();
      },
      [&](pm::Allocator& alloc) {
        // The leaf chain is the only persistent level: a cut sibling offset
        // would otherwise lose the leaves past it without a word.
        return inner_dram_ ? check_lost_leaves_of(alloc, levels.back()) : Status::Ok();
      });
  if (!s.ok()) return s;
  for (const auto& chain : levels) {
    for (uint64_t off : chain) {
      s = normalize(off);
      if (!s.ok()) return s;
    }
  }
  if (inner_dram_) {
    // The crash simulator follows one thread at a time: rebuild serially
    // there (as lbtree's recovery).
    if (pm::current_config().mode == pm::Mode::kCrashSim) threads = 1;
    s = rebuild_inner(levels.back(), threads);
  } else {
    s = repair_separators();
  }
  if (!s.ok()) return s;
  // Safety net: the recovered tree must pass the strict check (no holes, no
  // missing separator); anything else is damage the checks above missed.
  VerifyReport report;
  return verify(&report);
}

// inner=dram: the DRAM inner nodes over the leaf chain, leaf i routed from
// its low_key (the leftmost leaf's is 0; recovery checked that they strictly
// increase along the chain). Empty leaves keep their range (no merges: an
// insert of their range goes there). The chain is cut into up to `threads`
// segments at multiples of InnerTree::children_per_node(1.0), so the
// parallel build gives the same tree as a serial one (inner_tree.h,
// build_segments). Touches no PM. Times the build (rebuild_seconds()).
template <class K>
Status FastFairT<K>::rebuild_inner(const std::vector<uint64_t>& chain, unsigned threads) {
  if constexpr (kStringKeys) {
    (void)chain, (void)threads;
    std::abort();  // unreachable, as route_leaf
  } else {
    const auto t0 = std::chrono::steady_clock::now();
    if (!tree_) tree_ = std::make_unique<inner::InnerTree>(node_size_);
    const size_t per = tree_->children_per_node(1.0);
    const size_t nodes = (chain.size() + per - 1) / per;  // level-1 nodes
    const size_t nseg = std::max<size_t>(1, std::min<size_t>(std::max(1u, threads), nodes));
    const size_t seg_nodes = (nodes + nseg - 1) / nseg;  // level-1 nodes per segment
    std::vector<std::vector<inner::LeafRef>> segments(nseg);
    for (size_t i = 0; i < chain.size(); ++i) {
      segments[std::min(nseg - 1, i / per / std::max<size_t>(1, seg_nodes))].emplace_back(
          node(chain[i])->low_key.load(kRlx), chain[i]);
    }
    Status s = tree_->build_segments(segments, static_cast<unsigned>(nseg));
    rebuild_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!s.ok()) return Status::Corruption("fastfair: rebuild of the inner nodes: " + s.ToString());
    return Status::Ok();
  }
}

// ---------------------------------------------------------------- info, verify

template <class K>
IndexInfo FastFairT<K>::info() const {
  return this->persistent_info(
      kLayout,
      inner_dram_ ? std::string(kFastFairDescription) + "; inner nodes in DRAM (rebuilt at open)"
                  : std::string(kFastFairDescription),
      {.ordered = true,
       .persistent = true,
       .thread_safe = !single_,
       .string_keys = true,  // the entry's claim, whatever this instance's K
       .placement = inner_dram_ ? Placement::kSelective : Placement::kPmOnly},
      node_size_, (locks_ ? locks_->dram_bytes() : 0) + (tree_ ? tree_->dram_bytes() : 0));
}

template <class K>
Status FastFairT<K>::verify(VerifyReport* report) const {
  std::vector<std::vector<uint64_t>> levels;
  Status s = walk_levels(&levels);
  if (!s.ok()) return s;
  VerifyReport r;
  r.height = static_cast<uint32_t>(levels.size());
  if (inner_dram_ && levels.size() != 1) {
    return Status::Corruption("fastfair: inner=dram, but the root object names an inner node");
  }
  if (!inner_dram_ && levels.front().size() != 1) {
    return Status::Corruption("fastfair: root has a sibling");
  }
  for (size_t li = 0; li < levels.size(); ++li) {
    const std::vector<uint64_t>& chain = levels[li];
    const bool leaf = li + 1 == levels.size();
    std::vector<std::pair<uint64_t, uint64_t>> children;  // (child, separator)
    if (node(chain.front())->low_key.load(kRlx) != 0) {
      return Status::Corruption("fastfair: leftmost node of a level has low_key != 0");
    }
    for (uint64_t off : chain) {
      Node* n = node(off);
      Entry* e = n->entries();
      const uint32_t cnt = clamp_count(n);
      const uint64_t low = n->low_key.load(kRlx);
      uint64_t ub = 0;
      const bool has_ub = upper_bound_of(n, &ub);
      if (has_ub && compare_words(ub, low) <= 0) {
        return Status::Corruption("fastfair: sibling chain out of order");
      }
      for (uint32_t i = 0; i < cnt; ++i) {
        const uint64_t k = e[i].key.load(kRlx);
        if (i > 0 && compare_words(k, e[i - 1].key.load(kRlx)) <= 0) {
          return Status::Corruption("fastfair: keys not strictly increasing (hole) in " + hex(off));
        }
        if (compare_words(k, low) < 0 || (has_ub && compare_words(k, ub) >= 0)) {
          return Status::Corruption("fastfair: key outside node bounds in " + hex(off));
        }
        // Leaves: low <= k; inner separators must exceed low (the leftmost
        // child covers [low, first separator)).
        if (!leaf && compare_words(k, low) == 0) {
          return Status::Corruption("fastfair: separator equals low_key");
        }
      }
      if (leaf) {
        r.keys += cnt;
        ++r.leaves;
        if constexpr (kStringKeys) {
          // The records this leaf owns (fastfair.h): its entries' and its
          // low_key's.
          const pm::Allocator& alloc = pool_->allocator();
          for (uint32_t i = 0; i < cnt; ++i) {
            r.pm_bytes += alloc.block_size(record_of(e[i].key.load(kRlx)));
          }
          if (low != 0) r.pm_bytes += alloc.block_size(record_of(low));
        }
        if (n->leftmost.load(kRlx) != 0) return Status::Corruption("fastfair: leaf has a child");
        continue;
      }
      ++r.inner_nodes;
      // Collect (child, expected low_key) first and dereference the children
      // only once they are known to be the nodes of the level below (a
      // damaged child pointer must give Corruption, not a wild read).
      children.emplace_back(n->leftmost.load(kRlx), low);
      for (uint32_t i = 0; i < cnt; ++i) {
        children.emplace_back(e[i].value.load(kRlx), e[i].key.load(kRlx));
      }
    }
    if (leaf) break;
    const std::vector<uint64_t>& below = levels[li + 1];
    bool same = children.size() == below.size();
    for (size_t j = 0; same && j < below.size(); ++j) same = children[j].first == below[j];
    if (!same) {
      return Status::Corruption("fastfair: children of level " + std::to_string(li) +
                                " do not match the sibling chain below (missing separator)");
    }
    for (const auto& [c, sep] : children) {
      if (node(c)->low_key.load(kRlx) != sep) {
        return Status::Corruption("fastfair: child " + hex(c) + " low_key != its separator");
      }
    }
  }
  if (inner_dram_) {
    // The DRAM inner nodes must route exactly the chain, each leaf from its
    // low_key.
    if constexpr (!kStringKeys) {
      std::vector<inner::LeafRef> routes;
      s = tree_->verify_routes(
          kLayout, levels.back(), [&](uint64_t leaf) { return node(leaf)->low_key.load(kRlx); },
          &routes);
      if (!s.ok()) return s;
      r.inner_nodes = tree_->nodes();
      r.height = tree_->height() + 1;
    }
  }
  // String keys: the blocks reached are the nodes and the key records
  // (VerifyReport::pm_bytes); integer keys report nodes only (pm_bytes 0).
  if constexpr (kStringKeys) r.pm_bytes += (r.leaves + r.inner_nodes) * uint64_t{node_size_};
  *report = r;
  return Status::Ok();
}

// ---------------------------------------------------------------- ablation notes

// Ablation notes (issue 3 §4): the flushes and fences whose removal the crash
// lab (`nvindex crashtest --index fastfair --ablate all`) does not catch, and
// why each stays.
template <class K>
std::vector<std::pair<std::string, std::string>> FastFairT<K>::ablation_notes() const {
  std::vector<std::pair<std::string, std::string>> notes = {
      {"fastfair.create.leaf/fence",
       "redundant: the leaf's flush is committed by the fence of the root object's persist that "
       "follows at once, before the NAW that publishes both; one fence per pool creation"},
      {"fastfair.root_split.publish",
       "tolerated by recovery: if the NAW of the new root is lost, the old root is the leftmost "
       "node of its level with a sibling, i.e. a missing separator, which recovery repairs by "
       "growing the root again (repair_separators); the persist keeps a crash from undoing the "
       "split and costs one NAW per root split"},
      {"fastfair.collapse_root.publish",
       "not observable in a crash test: a lost collapse leaves the old root (no entries, leftmost "
       "= the new root) as a valid, one level taller tree with the same content; the NAW is "
       "needed because the old root is retired and freed when the index is destroyed: a later "
       "index on the same pool could reuse the block while the durable root still named it"},
      {"fastfair.merge.header",
       "not observable in a crash test: without it, L's count/sibling stores stay pending and a "
       "crash leaves the state after merge step 1 (R unlinked from P but still L's sibling), "
       "which recovery repairs by re-inserting R's separator; the persist is needed because R "
       "is retired and freed when the index is destroyed, after which its block may be reused "
       "while the durable L.sibling still named it"},
  };
  return notes;
}

template class FastFairT<uint64_t>;
template class FastFairT<std::string_view>;

}  // namespace fastfair

// ---------------------------------------------------------------- factory

namespace {
template <class K>
Status open_fastfair(const IndexOptions& options, std::unique_ptr<Index<K>>* out) {
  // make_index() has checked the node size; a recovered tree keeps its own.
  // make_index() has checked the value of "inner" against kFastFairOptions;
  // a recovered tree keeps its stored placement.
  using Tree = fastfair::FastFairT<K>;
  const auto inner = options.extra.find("inner");
  const bool inner_dram = inner != options.extra.end() && inner->second == "dram";
  return open_persistent_index<Tree>(
      options, pool_layout(fastfair::kLayout, key_type_of<K>),
      [&](Tree& t) {
        t.set_single_threaded(options.threads <= 1);
        return t.create(options.node_size, inner_dram);
      },
      [&](Tree& t) {
        t.set_single_threaded(options.threads <= 1);
        return t.recover(options.threads);
      },
      out);
}
}  // namespace

Status make_fastfair(const IndexOptions& options, std::unique_ptr<Index<uint64_t>>* out) {
  return open_fastfair(options, out);
}

Status make_fastfair_string(const IndexOptions& options,
                            std::unique_ptr<Index<std::string_view>>* out) {
  return open_fastfair(options, out);
}

}  // namespace nvindex
