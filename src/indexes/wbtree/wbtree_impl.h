// wbtree: the wB+-tree (Chen and Jin, VLDB'15), the definitions of
// WbTreeT<K>. Included only by wbtree.cc (which instantiates the integer-key
// tree) and wbtree_string.cc (the string-key tree): one instance per
// translation unit, so that each compiles as it would alone (the integer
// instance's inlining decisions are the untemplated tree's; with both in
// one unit GCC stopped inlining pm::store into update). See wbtree.h for the
// persistent layout. Crash model: DESIGN.md §6 (a line holds a prefix, in
// program order, of the stores made to it since it was last durable; an
// aligned 8-byte store is never torn). Every entry slot (16 B, 16 B aligned)
// lies in one line.
//
// Every persistent update below states where it happens why a crash at any
// point leaves a consistent state. The three update protocols:
//  - insert and delete (paper §4.1-4.2, bitmap + slot array variant): two NAW
//    sections around an intermediate state (bitmap bit 0 clear = slot array
//    invalid) that recovery repairs by rebuilding the slot array from the
//    bitmap and the keys;
//  - update: one 8-byte store of the value, persisted (atomic);
//  - split (paper §4.3, undo-redo logging): new nodes are written and
//    persisted while unreachable; every word of an existing node (and the
//    root word) that the split changes is logged as {offset, old, new} and
//    persisted; one NAW commits the log; the words are then stored in place
//    and persisted; one NAW clears the log; finally the slot arrays of the
//    changed nodes are rebuilt (the logged bitmaps have bit 0 clear).
#pragma once

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <unordered_set>

#include "indexes/common/factory.h"
#include "indexes/wbtree/wbtree.h"
#include "nvindex/pm/persist.h"

namespace nvindex {
namespace wbtree {
namespace {

constexpr auto kAcq = std::memory_order_acquire;
constexpr auto kRlx = std::memory_order_relaxed;

/// Bitmap bit of entry slot s.
constexpr uint64_t slot_bit(uint32_t s) { return 2ull << s; }

std::atomic<uint64_t>* word_at(char* base, uint64_t off) {
  return reinterpret_cast<std::atomic<uint64_t>*>(base + off);
}

}  // namespace

// ---------------------------------------------------------------- split WAL

/// The undo-redo WAL records of one split (old and new value of every word
/// it changes), built in DRAM before anything is written to the persistent
/// Log. Each word is logged once (a second set() of the same word replaces
/// its new value); `nodes` are the existing nodes whose bitmap the split rewrites
/// (their slot arrays are rebuilt after the log clears).
template <class K>
struct WbTreeT<K>::SplitWal {
  char* base;
  std::vector<LogRecord> recs;
  std::vector<uint64_t> nodes;
  void set(const void* word, uint64_t value) {
    const uint64_t off = static_cast<uint64_t>(static_cast<const char*>(word) - base);
    for (LogRecord& r : recs) {
      if (r.off == off) {
        r.new_value = value;
        return;
      }
    }
    recs.push_back({off, word_at(base, off)->load(kRlx), value});
  }
};

// ---------------------------------------------------------------- basics

template <class K>
WbTreeT<K>::WbTreeT(pm::Pool* pool, double fill)
    : PersistentIndexOf<K>(pool), keys_(pool), fill_(fill) {}

template <class K>
WbTreeT<K>::~WbTreeT() {
  // Retired records: no slot names them durably (their removes completed),
  // and no thread can read them once the index is gone.
  records_.free_all(*pool_);
  this->record_close_keys();
}

template <class K>
uint32_t WbTreeT<K>::used(const Node* n) const {
  return static_cast<uint32_t>(std::popcount(n->bitmap.load(kAcq) & ~kValidBit));
}

// Copies n's whole slot array (count and 63 slot bytes; bytes past the
// node's capacity are the first entry bytes or padding and are never used)
// into buf[0..63] by 8-byte loads, the only way the slot array is read.
template <class K>
void WbTreeT<K>::load_slot_array(Node* n, uint8_t* buf) const {
  const std::atomic<uint64_t>* w = slot_words(n);
  const uint32_t words = (1 + cap_ + 7) / 8;
  for (uint32_t i = 0; i < words; ++i) {
    const uint64_t x = w[i].load(kAcq);
    std::memcpy(buf + 8 * i, &x, sizeof(x));
  }
}

// Writes buf[0..len) into n's slot array as whole 8-byte words (the bytes
// that share a word with them come from buf too: callers fill buf with
// load_slot_array first or write the whole array), storing only the words
// that change, in ascending order. Not flushed. Every word lies within bytes
// 24..E of the node (E = 24+1+c rounded up to 16), so no entry is touched.
template <class K>
void WbTreeT<K>::store_slot_array(Node* n, const uint8_t* buf, uint32_t len) {
  std::atomic<uint64_t>* w = slot_words(n);
  const uint32_t words = (len + 7) / 8;
  for (uint32_t i = 0; i < words; ++i) {
    uint64_t x;
    std::memcpy(&x, buf + 8 * i, sizeof(x));
    if (w[i].load(kRlx) != x) pm::store(&w[i], x);
  }
}

// Position (0-based, in the slot array) of the last entry with key <= `key`,
// or -1. Binary search over the slot array (valid outside an operation; an
// optimistic reader may see a changing one, but every byte it reads is a
// count <= c or a slot < c, so it stays inside the node, and its validation
// fails).
//
// Branch-free (Khuong and Morin, "Array Layouts for Comparison-Based
// Searching", JEA 2017, §3.1): each step is a conditional move, so no
// mispredicted branch waits for the node's miss (which would keep the next
// lookup's misses from overlapping this one's, inner_tree.cc find).
// Invariant: the answer, if >= b, lies in [b, b + len). String keys: the
// same search with word_le (a record read only when the prefixes are equal);
// an optimistic reader may read a record of a slot being changed, which is
// not freed while it is in flight (RecordReclaimer), and its validation
// fails.
template <class K>
inline int WbTreeT<K>::last_le(Node* n, ProbeArg key) const {
  Entry* e = entries(n);
  const uint32_t cnt = sa_count(n);
  if (cnt == 0) return -1;
  uint32_t b = 0;
  uint32_t len = cnt;
  while (len > 1) {
    const uint32_t half = len / 2;
    const uint64_t k = e[sa_slot(n, b + half)].key.load(kAcq);
    b = keys_.le(k, key) ? b + half : b;
    len -= half;
  }
  const uint64_t k = e[sa_slot(n, b)].key.load(kAcq);
  return static_cast<int>(b) - (keys_.le(k, key) ? 0 : 1);
}

template <class K>
inline uint64_t WbTreeT<K>::child_at(Node* n, int pos) const {
  return pos < 0 ? n->leftmost_or_sibling.load(kAcq)
                 : entries(n)[sa_slot(n, static_cast<uint32_t>(pos))].value.load(kAcq);
}

// inner=pm: optimistic descent with lock coupling (see wbtree.h
// "Concurrency") to the leaf covering `key`. False when a validation failed
// (the caller restarts). On true, *out holds the leaf with the version read
// and its parent's lock with the version that was validated after the
// leaf's version was read: the leaf covered `key` at that moment, and
// still does for as long as the parent's version is unchanged (a split of
// the leaf changes its parent, or the root word).
template <class K>
inline bool WbTreeT<K>::locate(ProbeArg key, Loc* out) const {
  uint64_t rv = 0;
  vlock::read_lock(root_lock_, &rv);
  uint64_t off = root_word();
  Node* n = node(off);
  prefetch(n);
  std::atomic<uint64_t>* lk = &locks_->word(off);
  uint64_t v = 0;
  if (!vlock::read_lock(*lk, &v) || !vlock::validate(root_lock_, rv)) return false;
  std::atomic<uint64_t>* plk = &root_lock_;
  uint64_t pv = rv;
  uint64_t low = 0;
  while (n->level() != 0) {
    const int p = last_le(n, key);
    uint64_t child = 0;
    uint64_t clow = low;
    if (p < 0) {
      child = n->leftmost_or_sibling.load(kAcq);
    } else {
      const Entry& e = entries(n)[sa_slot(n, static_cast<uint32_t>(p))];
      child = e.value.load(kAcq);
      clow = e.key.load(kAcq);
    }
    // The child offset is trusted (dereferenced, looked up in the lock
    // table) only once the node validates.
    if (!vlock::validate(*lk, v)) return false;
    Node* c = node(child);
    prefetch(c);
    std::atomic<uint64_t>* clk = &locks_->word(child);
    uint64_t cv = 0;
    if (!vlock::read_lock(*clk, &cv) || !vlock::validate(*lk, v)) return false;
    plk = lk;
    pv = v;
    lk = clk;
    v = cv;
    n = c;
    off = child;
    low = clow;
  }
  *out = Loc{off, lk, v, plk, pv, low};
  return true;
}

// inner=dram: the key the InnerTree routes a probe by. Integers: the probe
// (a strict probe is already key - 1). Strings: the probe's key, or for a
// strict probe its predecessor among keys of at most kMaxKeyBytes bytes
// (built in *buf): the key without its last byte if that is 0x00, else the
// key with its last byte decremented and padded with 0xff to kMaxKeyBytes;
// no key of the index lies strictly between the two, so the leaf covering
// the predecessor is the one holding the last keys below the probe's (the
// empty key has none: it routes to the first leaf, whose lower bound is 0).
template <class K>
K WbTreeT<K>::route_key(ProbeArg key, RouteBuf* buf) {
  if constexpr (kStringKeys) {
    if (!key.strict || key.key.empty()) return key.key;
    buf->assign(key.key);
    if (buf->back() == '\0') {
      buf->pop_back();
    } else {
      buf->back() = static_cast<char>(static_cast<uint8_t>(buf->back()) - 1);
      buf->resize(kMaxKeyBytes, '\xff');
    }
    return *buf;
  } else {
    (void)buf;
    return key;
  }
}

// inner=dram, string keys: a DRAM copy of a leaf's lower bound, kept until
// the next rebuild_inner or destruction; its address is the leaf's word in
// lows_ (0 = the first leaf). Called under smo_mu_ (splits) or with no
// concurrent operation (rebuild_inner).
template <class K>
uint64_t WbTreeT<K>::keep_low(std::string_view low) {
  low_keys_.push_back(std::make_unique<std::string>(low));
  low_key_bytes_ += sizeof(std::string) + low_keys_.back()->capacity();
  return reinterpret_cast<uint64_t>(low_keys_.back().get());
}

// The key a leaf's lower bound word names (a find_last_less_than loop
// continues below it): inner=pm, a separator's key record (never freed: no
// merges); inner=dram, the DRAM copy of keep_low (strings only). Non-zero.
template <class K>
std::string_view WbTreeT<K>::low_key(uint64_t low) const {
  if (inner_dram_) return *reinterpret_cast<const std::string*>(low);
  return key_record(*pool_, record_of(low));
}

// Optimistic read of the leaf covering `key`: calls f(leaf, low) (low: the
// leaf's lower bound when kLow, else 0), which must only read (acquire loads)
// and keep its results in locals it overwrites on every call, until a call
// validates (the leaf's version, and its route). Lock-free.
template <class K>
template <bool kLow, class F>
inline void WbTreeT<K>::read_leaf(ProbeArg key, F&& f) const {
  if (inner_dram_) {
    RouteBuf buf;
    const K rk = route_key(key, &buf);
    while (true) {
      const inner::Route r = tree_->find(rk);
      Node* n = node(r.leaf);
      prefetch(n);
      std::atomic<uint64_t>& w = locks_->word(r.leaf);
      uint64_t v = 0;
      if (!vlock::read_lock(w, &v)) continue;
      f(n, kLow ? lows_->word(r.leaf).load(kAcq) : 0);
      if (vlock::validate(w, v) && tree_->validate(r)) return;
    }
  }
  while (true) {
    Loc l;
    if (!locate(key, &l)) continue;
    f(node(l.off), l.low);
    if (vlock::validate(*l.lock, l.v)) return;
  }
}

// Locks (version lock) the leaf covering `key` and returns its offset; the
// leaf keeps covering `key` until the caller unlocks it (a split of the leaf
// needs its lock). inner=pm: descend, lock, check that the parent (or the
// root lock) is unchanged since the leaf was reached; inner=dram: the
// InnerTree's find / lock / validate protocol (inner_tree.h).
template <class K>
uint64_t WbTreeT<K>::lock_leaf(ProbeArg key) {
  if (inner_dram_) {
    RouteBuf buf;
    const K rk = route_key(key, &buf);
    while (true) {
      const inner::Route r = tree_->find(rk);
      std::atomic<uint64_t>& w = locks_->word(r.leaf);
      vlock::lock(w);  // never obsolete: no node is unlinked while in use
      if (tree_->validate(r)) return r.leaf;
      vlock::unlock(w);
    }
  }
  while (true) {
    Loc l;
    if (!locate(key, &l)) continue;
    vlock::lock(*l.lock);
    if (vlock::validate(*l.parent, l.pv)) return l.off;
    vlock::unlock(*l.lock);
  }
}

// inner=pm, under smo_mu_: the nodes from the root down to the leaf
// covering `key`. Inner nodes and the root word change only under smo_mu_,
// so this descent needs no validation (leaves are not read).
template <class K>
void WbTreeT<K>::smo_path(ProbeArg key, std::vector<uint64_t>* path) const {
  path->clear();
  uint64_t off = root_word();
  while (true) {
    path->push_back(off);
    Node* n = node(off);
    if (n->level() == 0) return;
    off = child_at(n, last_le(n, key));
  }
}

template <class K>
std::vector<typename WbTreeT<K>::Sorted> WbTreeT<K>::sorted_entries(Node* n) const {
  Entry* e = entries(n);
  const uint32_t k = sa_count(n);
  std::vector<Sorted> out;
  out.reserve(k);
  for (uint32_t j = 0; j < k; ++j) {
    const uint32_t sl = sa_slot(n, j);
    out.push_back({e[sl].key.load(kAcq), e[sl].value.load(kAcq), sl});
  }
  return out;
}

// Writes a whole node into the unpublished block at `off`: items in slots
// 0..k-1 (already sorted), slot array 0..k-1, bitmap with bit 0 set; flushes
// it (the caller fences). The block is unreachable until a later NAW or a
// committed log publishes it, so the order of these stores is free.
template <class K>
void WbTreeT<K>::init_node(uint64_t off, uint32_t level, uint64_t leftmost_or_sibling,
                           std::span<const Sorted> items) {
  Node* n = node(off);
  const uint32_t k = static_cast<uint32_t>(items.size());
  uint64_t bm = kValidBit;
  uint8_t sa[1 + kMaxSlots] = {};  // bytes past k: slot 0 (never read as an entry)
  sa[0] = static_cast<uint8_t>(k);
  Entry* e = entries(n);
  for (uint32_t i = 0; i < k; ++i) {
    bm |= slot_bit(i);
    sa[1 + i] = static_cast<uint8_t>(i);
    pm::store(&e[i].key, items[i].key);
    pm::store(&e[i].value, items[i].value);
  }
  pm::store(&n->bitmap, bm);
  pm::store(&n->level_magic, static_cast<uint64_t>(kNodeMagic) << 32 | level);
  pm::store(&n->leftmost_or_sibling, leftmost_or_sibling);
  store_slot_array(n, sa, 1 + cap_);
  pm::flush(n, eoff_ + k * kEntryBytes, {"wbtree.new_node"});
}

// Rewrites n's slot array from `bitmap` (its entry bits) and the keys, in
// ascending key order, and flushes it (the caller fences, then sets bit 0).
// Used only while bit 0 is clear (durably), so any prefix of these stores is
// an invalid slot array that recovery rebuilds again.
template <class K>
void WbTreeT<K>::write_slot_array(Node* n, uint64_t bitmap, const char* site) {
  Entry* e = entries(n);
  uint8_t sa[1 + kMaxSlots];
  load_slot_array(n, sa);
  uint32_t k = 0;
  for (uint32_t s = 0; s < cap_; ++s) {
    if (bitmap & slot_bit(s)) sa[1 + k++] = static_cast<uint8_t>(s);
  }
  std::sort(sa + 1, sa + 1 + k, [&](uint8_t a, uint8_t b) {
    return keys_.compare(e[a].key.load(kRlx), e[b].key.load(kRlx)) < 0;
  });
  sa[0] = static_cast<uint8_t>(k);
  store_slot_array(n, sa, 1 + k);
  pm::flush(slots(n), 1 + k, {site});
}

// Stores the new value of every record in place, flushes each changed line
// once, and fences. Used after the log is committed (split) and by recovery's
// redo: every word then holds its old or new value, and redoing is
// idempotent.
template <class K>
void WbTreeT<K>::apply_records(const LogRecord* recs, size_t n, const char* site) {
  std::vector<uint64_t> lines;
  lines.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    pm::store(word_at(pool_->base(), recs[i].off), recs[i].new_value);
    lines.push_back(recs[i].off / pm::kLineSize);
  }
  std::sort(lines.begin(), lines.end());
  lines.erase(std::unique(lines.begin(), lines.end()), lines.end());
  for (uint64_t l : lines) pm::flush(pool_->base() + l * pm::kLineSize, pm::kLineSize, {site});
  pm::fence({site});
}

// ---------------------------------------------------------------- create

template <class K>
Status WbTreeT<K>::create(uint32_t node_size, bool inner_dram) {
  if constexpr (kStringKeys) {
    if (pool_->size() > kRecordMask) {
      return Status::InvalidArgument("wbtree: string keys need a pool below 2^48 bytes");
    }
  }
  node_size_ = node_size;
  cap_ = capacity_for(node_size, &eoff_);
  inner_dram_ = inner_dram;
  pm::Allocator& alloc = pool_->allocator();
  uint64_t ro = 0;
  Status s = allocate_root_object(alloc, sizeof(RootObject), &ro);
  if (!s.ok()) return s;
  uint64_t lo = 0, leaf = 0;
  s = alloc.allocate(kLogBytes, &lo);
  if (s.ok()) s = alloc.allocate(node_size_, &leaf);
  if (!s.ok()) {
    alloc.free(ro);
    if (lo != 0) alloc.free(lo);
    return s;
  }
  // Crash argument: the leaf, the log and the root object are persisted
  // before Pool::set_root (a NAW) publishes them; a crash earlier leaves a
  // pool with no root whose blocks the next create reclaims (see above).
  init_node(leaf, 0, 0, {});
  log_ = pool_->template ptr<Log>(lo);
  pm::store(&log_->state, uint64_t{0});
  for (auto& r : log_->reserved) pm::store(&r, uint64_t{0});
  pm::flush(log_, 64, {"wbtree.create.log"});
  root_obj_ = pool_->template ptr<RootObject>(ro);
  pm::store(&root_obj_->magic, kRootMagic);
  pm::store(&root_obj_->node_size, static_cast<uint64_t>(node_size_));
  pm::store(&root_obj_->root, leaf);
  pm::store(&root_obj_->log, lo);
  pm::store(&root_obj_->inner_dram, static_cast<uint64_t>(inner_dram_ ? 1 : 0));
  for (auto& r : root_obj_->reserved) pm::store(&r, uint64_t{0});
  pm::persist(root_obj_, sizeof(RootObject), {"wbtree.create.root_object"});
  pool_->set_root(ro);
  locks_ = std::make_unique<LockTable>(pool_->size(), node_size_);
  if (inner_dram_) {
    lows_ = std::make_unique<LockTable>(pool_->size(), node_size_);
    Status b = rebuild_inner();
    if (!b.ok()) return b;
  }
  return Status::Ok();
}

// ---------------------------------------------------------------- reads

template <class K>
std::optional<Value> WbTreeT<K>::lookup(K k) {
  const InFlight in_flight(records_);
  const Probe key = KeyWords<K>::probe(k);
  bool found = false;
  uint64_t val = 0;
  read_leaf<false>(key, [&](Node* n, uint64_t) {
    const int p = last_le(n, key);
    found = false;
    if (p < 0) return;
    const Entry& e = entries(n)[sa_slot(n, static_cast<uint32_t>(p))];
    if constexpr (kStringKeys) {
      if (!keys_.eq(e.key.load(kAcq), key)) return;
    } else {
      if (e.key.load(kAcq) != key) return;  // the untemplated tree's order of loads
    }
    val = e.value.load(kAcq);
    found = true;
  });
  if (!found) return std::nullopt;
  return val;
}

// Scan: start at the leaf covering `start`, then follow the next links, each
// leaf read under its version (re-read until it validates). A split only
// moves the upper half of a leaf to a new leaf linked right after it, and no
// leaf is unlinked while the tree is in use, so a walk from the leaf that
// covered `start` (or one left of it) meets every key >= start in order; the
// cursor skips keys already returned.
template <class K>
size_t WbTreeT<K>::scan(K start, size_t count, std::vector<std::pair<OwnedKey<K>, Value>>* out) {
  const InFlight in_flight(records_);
  out->clear();
  if (count == 0) return 0;
  uint64_t off = 0;
  const Probe first = KeyWords<K>::probe(start);
  if (inner_dram_) {
    off = tree_->find(start).leaf;
  } else {
    Loc l;
    while (!locate(first, &l)) {
    }
    off = l.off;
  }
  // Every key < cursor was returned or skipped. String keys: the cursor is
  // the start key (inclusive), then the last key returned (exclusive: a
  // non-strict probe finds the last entry <= it); it views the caller's key
  // or a record of this tree, which is not freed while this operation is in
  // flight (RecordReclaimer).
  uint64_t cursor = 0;
  StringProbe scursor;
  if constexpr (kStringKeys) {
    scursor = StringProbe{start, true};
  } else {
    cursor = start;
  }
  std::pair<uint64_t, Value> buf[kMaxSlots];
  while (true) {
    std::atomic<uint64_t>& w = locks_->word(off);
    uint64_t v = 0;
    vlock::read_lock(w, &v);
    Node* n = node(off);
    const uint32_t cnt = sa_count(n);
    const size_t want = count - out->size();
    uint32_t j = 0;
    if constexpr (kStringKeys) {
      j = static_cast<uint32_t>(last_le(n, scursor) + 1);
    } else {
      const int p = last_le(n, cursor);
      j = static_cast<uint32_t>(p + 1);
      if (p >= 0 && entries(n)[sa_slot(n, static_cast<uint32_t>(p))].key.load(kAcq) == cursor) --j;
    }
    size_t got = 0;
    for (; j < cnt && got < want; ++j) {
      const Entry& e = entries(n)[sa_slot(n, j)];
      buf[got++] = {e.key.load(kAcq), e.value.load(kAcq)};
    }
    const uint64_t next = n->leftmost_or_sibling.load(kAcq);
    if (!vlock::validate(w, v)) continue;
    if constexpr (kStringKeys) {
      for (size_t i = 0; i < got; ++i) out->emplace_back(keys_.owned(buf[i].first), buf[i].second);
    } else {
      out->insert(out->end(), buf, buf + got);
    }
    if (out->size() == count || next == 0) return out->size();
    if (got > 0) {
      if constexpr (kStringKeys) {
        scursor = StringProbe{key_record(*pool_, record_of(buf[got - 1].first)), false};
      } else {
        if (buf[got - 1].first == UINT64_MAX) return out->size();
        cursor = buf[got - 1].first + 1;
      }
    }
    off = next;
  }
}

// find_last_less_than: the leaf covering the target, then (through each
// leaf's lower bound: from the separators met on the way down with
// inner=pm, from the DRAM word with inner=dram) the leaves left of it, until
// one holds a key <= the target (empty leaves may sit anywhere: no merges).
template <class K>
std::optional<std::pair<OwnedKey<K>, Value>> WbTreeT<K>::find_last_less_than(K key) {
  const InFlight in_flight(records_);
  if constexpr (!kStringKeys) {
    if (key == 0) return std::nullopt;
  }
  // Integer keys: the last key <= key - 1; string keys: a strict probe (the
  // descent routes to the leaf covering keys just below it, last_le finds
  // the last key < it). A lower bound met on the way is a separator's word,
  // whose record is never freed (no merges).
  Probe target = KeyWords<K>::probe(key, true);
  while (true) {
    bool found = false;
    uint64_t bk = 0, bv = 0, low = 0;
    read_leaf<true>(target, [&](Node* n, uint64_t lo) {
      low = lo;
      const int p = last_le(n, target);
      found = p >= 0;
      if (!found) return;
      const Entry& e = entries(n)[sa_slot(n, static_cast<uint32_t>(p))];
      bk = e.key.load(kAcq);
      bv = e.value.load(kAcq);
    });
    // A string key's record is not freed while this operation is in flight
    // (RecordReclaimer), so it may be copied after the validation.
    if (found) return std::make_pair(keys_.owned(bk), bv);
    if (low == 0) return std::nullopt;
    // < the previous target: the loop ends.
    if constexpr (kStringKeys) {
      target = StringProbe{low_key(low), true};
    } else {
      target = low - 1;
    }
  }
}

// ---------------------------------------------------------------- writes

template <class K>
Status WbTreeT<K>::update(K k, Value value) {
  if constexpr (kStringKeys) {
    if (Status s = check_key(kLayout, k); !s.ok()) return s;
  }
  const InFlight in_flight(records_);
  const Probe key = KeyWords<K>::probe(k);
  const uint64_t off = lock_leaf(key);
  std::atomic<uint64_t>& w = locks_->word(off);
  Node* n = node(off);
  const int p = last_le(n, key);
  Entry* e = p < 0 ? nullptr : &entries(n)[sa_slot(n, static_cast<uint32_t>(p))];
  if (e == nullptr || !keys_.eq(e->key.load(kRlx), key)) {
    vlock::unlock(w);
    return Status::NotFound();
  }
  // One aligned 8-byte store of the value (never torn): a crash leaves the
  // old or the new value; durable once persisted (before the unlock).
  pm::store(&e->value, value);
  pm::persist(&e->value, sizeof(uint64_t), {"wbtree.update.value"});
  vlock::unlock(w);
  return Status::Ok();
}

// Inserts (word, value) into the leaf x, which the caller holds locked, has a
// free slot and no entry with the word's key; p = last_le(x, key). word: the
// key (integers) or its key word (strings: a persisted record, published by
// NAW 2).
//
// Insert (paper §4.1, Algorithm 1 with bitmap and slot array).
//
// Crash argument. 1) The entry goes into a free slot s (its bitmap bit is
// clear: unused space) and is persisted: a crash leaves the old content. 2)
// NAW 1: the bitmap with bit 0 cleared (entry bits unchanged): from here
// until NAW 2 the slot array is invalid and recovery rebuilds it from the
// bitmap, which does not yet hold s: the old content. 3) The slot array gets
// s at its sorted position (the 8-byte words of the slot array that change
// are stored) and is persisted. 4) NAW 2: the bitmap with s's bit and bit 0
// set: the new content, with a valid slot array.
template <class K>
void WbTreeT<K>::leaf_insert(Node* x, int p, uint64_t word, Value value) {
  const uint64_t bm = x->bitmap.load(kRlx);
  const uint32_t s = static_cast<uint32_t>(std::countr_zero(~bm >> 1));
  Entry* e = &entries(x)[s];
  pm::store(&e->key, word);
  pm::store(&e->value, value);
  pm::persist(e, kEntryBytes, {"wbtree.insert.entry"});
  pm::naw(&x->bitmap, bm & ~kValidBit, {"wbtree.insert.invalidate"});
  uint8_t sa[1 + kMaxSlots];
  load_slot_array(x, sa);
  const uint32_t n = sa[0];
  const uint32_t pos = static_cast<uint32_t>(p + 1);
  if (pos < n) std::memmove(sa + 2 + pos, sa + 1 + pos, n - pos);
  sa[1 + pos] = static_cast<uint8_t>(s);
  sa[0] = static_cast<uint8_t>(n + 1);
  store_slot_array(x, sa, 2 + n);
  pm::persist(slots(x), 2 + n, {"wbtree.insert.slot_array"});
  pm::naw(&x->bitmap, bm | slot_bit(s) | kValidBit, {"wbtree.insert.commit"});
}

// Insert: the leaf writer's path (lock the leaf only); a full leaf sends the
// insert to the SMO path (under smo_mu_, see wbtree.h "Concurrency").
// String keys: the key's record is written and flushed first, before any
// lock (store_key_record without a fence of its own: the entry's persist in
// leaf_insert fences before NAW 1, ordering the record's flush too), and
// published by leaf_insert's NAW 2, so it is durable before any durable
// word names it; a crash before NAW 2 leaves an unreachable record that
// recovery reclaims. A duplicate key's record, or one of an insert that
// fails, is freed at once (never published).
template <class K>
Status WbTreeT<K>::insert(K k, Value value) {
  uint64_t word = 0;
  if (Status s = keys_.new_word(kLayout, k, &word, {"wbtree.insert.key_record"},
                                RecordFence::kCallerFences);
      !s.ok())
    return s;
  const InFlight in_flight(records_);
  const auto fail = [&](Status s) {
    keys_.free_word(word);
    return s;
  };
  const Probe key = KeyWords<K>::probe(k);
  {
    const uint64_t off = lock_leaf(key);
    std::atomic<uint64_t>& w = locks_->word(off);
    Node* x = node(off);
    const int p = last_le(x, key);
    if (p >= 0 && keys_.eq(entries(x)[sa_slot(x, static_cast<uint32_t>(p))].key.load(kRlx), key)) {
      vlock::unlock(w);
      return fail(Status::AlreadyExists());
    }
    if (!full(x)) {
      leaf_insert(x, p, word, value);
      vlock::unlock(w);
      return Status::Ok();
    }
    vlock::unlock(w);
  }
  // SMO path: inner nodes and the root word change only under smo_mu_, so
  // the route found below stays valid; the leaf may have changed since (its
  // lock was released), so it is checked again under its lock.
  std::lock_guard g(smo_mu_);
  std::vector<uint64_t> path;
  uint64_t off = 0;
  if (inner_dram_) {
    off = lock_leaf(key);
    path.push_back(off);
  } else {
    smo_path(key, &path);
    off = path.back();
    vlock::lock(locks_->word(off));
  }
  std::atomic<uint64_t>& w = locks_->word(off);
  Node* x = node(off);
  const int p = last_le(x, key);
  Status s = Status::Ok();
  if (p >= 0 && keys_.eq(entries(x)[sa_slot(x, static_cast<uint32_t>(p))].key.load(kRlx), key)) {
    s = Status::AlreadyExists();
  } else if (!full(x)) {
    leaf_insert(x, p, word, value);
  } else {
    s = split(path, word, key, value);
  }
  vlock::unlock(w);  // the leaf last (inner_tree.h: after insert_separator)
  return s.ok() ? s : fail(s);
}

template <class K>
Status WbTreeT<K>::remove(K k) {
  if constexpr (kStringKeys) {
    if (Status s = check_key(kLayout, k); !s.ok()) return s;
  }
  const InFlight in_flight(records_);
  const Probe key = KeyWords<K>::probe(k);
  const uint64_t off = lock_leaf(key);
  std::atomic<uint64_t>& w = locks_->word(off);
  Node* x = node(off);
  const int p = last_le(x, key);
  const uint32_t s = p < 0 ? 0 : sa_slot(x, static_cast<uint32_t>(p));
  if (p < 0 || !keys_.eq(entries(x)[s].key.load(kRlx), key)) {
    vlock::unlock(w);
    return Status::NotFound();
  }
  // Delete (paper §4.2 with bitmap and slot array). No merge: a leaf may
  // become empty and stays in the tree (the paper does not merge either).
  //
  // Crash argument. 1) NAW 1: bitmap with bit 0 cleared: recovery would
  // rebuild the slot array from the bitmap, which still holds s: the old
  // content. 2) The slot array loses position p (the 8-byte words that
  // change are stored) and is persisted. 3) NAW 2: the bitmap without s's
  // bit, bit 0 set: the new content. The entry's bytes stay as unused space.
  const uint64_t bm = x->bitmap.load(kRlx);
  pm::naw(&x->bitmap, bm & ~kValidBit, {"wbtree.delete.invalidate"});
  uint8_t sa[1 + kMaxSlots];
  load_slot_array(x, sa);
  const uint32_t n = sa[0];
  const uint32_t pos = static_cast<uint32_t>(p);
  if (pos + 1 < n) std::memmove(sa + 1 + pos, sa + 2 + pos, n - 1 - pos);
  sa[0] = static_cast<uint8_t>(n - 1);
  store_slot_array(x, sa, n);
  pm::persist(slots(x), n, {"wbtree.delete.slot_array"});
  pm::naw(&x->bitmap, (bm & ~slot_bit(s)) | kValidBit, {"wbtree.delete.commit"});
  [[maybe_unused]] uint64_t word = 0;
  if constexpr (kStringKeys) word = entries(x)[s].key.load(kRlx);
  vlock::unlock(w);
  // String keys: no live slot names the record any more, durably (NAW 2;
  // the slot's bytes stay, but recovery reads only live entries). An
  // optimistic reader may still hold its offset, so it is retired and freed
  // once no other operation is in flight (RecordReclaimer); after a crash
  // recovery reclaims it (unreachable).
  if constexpr (kStringKeys) {
    records_.retire(record_of(word));
    records_.reclaim(*pool_);
  }
  return Status::Ok();
}

// ---------------------------------------------------------------- split

// Splits the full leaf at the end of `path` and, bottom-up, every full
// ancestor (inner=pm), growing a new root when the root splits too
// (paper §4.3, undo-redo logging), then inserts (key, value) into the half
// that covers it. The caller holds smo_mu_ and the leaf's lock (and unlocks
// the leaf after this returns); this locks every other node it changes (the
// ancestors that split, the parent receiving the separator, root_lock_ when
// the root grows) and the new nodes before they become reachable, and
// unlocks them before returning, so every optimistic reader overlapping the
// split fails validation and restarts. Locking writes nothing to PM: the PM
// writes are the single-threaded split's.
//
// Each split node S keeps its lower half (the first m = n/2 entries in key
// order); a new node N gets the upper half (a leaf: entries m..n-1, N's first
// key is the separator; an inner node: entry m's key goes up as the separator
// and its child becomes N's leftmost). The separator and N go into S's parent
// (into a slot the parent's own split freed, or into its new node), or into a
// new root.
//
// Crash argument. a) Every new node is allocated before anything changes
// (OutOfSpace leaves the tree untouched) and written and flushed while
// unreachable. b) Every word of an existing node that changes (S's bitmap,
// with bit 0 clear; a leaf's sibling; the parent's new entry and bitmap;
// the root word) is logged as {offset, old, new} in the log block; the new
// nodes and the records are made durable by one fence. A crash before the
// commit NAW: the log state is 0 (its records are ignored), nothing in place
// has changed, the new nodes are unreachable and recovery reclaims them: the
// old tree. c) NAW commit (state = kLogCommitted | records). d) The words are
// stored in place and persisted; a crash from c) on finds a committed log and
// recovery redoes it (every logged word then holds its new value): the split
// tree, whose changed bitmaps have bit 0 clear, so recovery also rebuilds
// their slot arrays. e) NAW clear (state = 0): the split tree is durable. f)
// The slot arrays of the changed nodes are rewritten and persisted while
// their bit 0 is clear (durably, since d), then bit 0 is set (one flush per
// bitmap, one fence): every crash state in between is repaired by recovery's
// slot-array rebuild. Under recovery's redo every logged word holds its old
// or new value (checked), so undo is never needed: with the commit before the
// first in-place store, the old values serve as that check.
//
// String keys, inner=pm: the separator a leaf split sends up is a new key
// record, a copy of the first moved key (the leaf entry keeps its own
// record), written and flushed in a) with the new nodes and made durable by
// the same fence (b); it becomes reachable only through a new node or a
// logged word, i.e. at the commit (before it a crash leaves it unreachable,
// and recovery reclaims it), and from then on one live inner entry owns it
// (wbtree.h). An inner split sends its middle entry's word up (no new
// record: the entry moves, its slot in S is no longer live). inner=dram
// makes no separator record: the InnerTree copies the key into DRAM.
template <class K>
Status WbTreeT<K>::split(const std::vector<uint64_t>& path, uint64_t word, ProbeArg key,
                         Value value) {
  pm::SmoTimer smo_timer;  // the SMO's wall time, when one is counted (pm/counters.h)
  const size_t h = path.size();
  size_t top = h - 1;  // path[top..h-1] split
  if (!inner_dram_) {
    while (top > 0 && full(node(path[top - 1]))) --top;
  }
  const bool grow = !inner_dram_ && top == 0;
  const size_t fresh_count = (h - top) + (grow ? 1 : 0);
  // Records: per split node its bitmap plus a leaf's sibling or a received
  // entry (2 words); the parent 3, the root word 1.
  if (3 * (h - top) + 4 > kLogRecords) {
    return Status::Corruption("wbtree: tree of " + std::to_string(h) +
                              " levels exceeds the split log (" + std::to_string(kLogRecords) +
                              " records)");
  }
  pm::Allocator& alloc = pool_->allocator();
  std::vector<uint64_t> fresh;
  for (size_t i = 0; i < fresh_count; ++i) {
    uint64_t off = 0;
    Status s = alloc.allocate(node_size_, &off);
    if (!s.ok()) {
      for (uint64_t b : fresh) alloc.free(b);
      return s;
    }
    fresh.push_back(off);
  }
  [[maybe_unused]] uint64_t sep_copy = 0;  // string keys, inner=pm: the separator record
  if constexpr (kStringKeys) {
    if (!inner_dram_) {
      const std::vector<Sorted> li = sorted_entries(node(path.back()));
      const std::string_view moved = key_record(*pool_, record_of(li[li.size() / 2].key));
      uint64_t rec = 0;
      Status s = store_key_record(*pool_, moved, &rec, {"wbtree.split.separator_record"},
                                  RecordFence::kCallerFences);
      if (!s.ok()) {
        for (uint64_t b : fresh) alloc.free(b);
        return s;
      }
      sep_copy = key_word(rec, moved);
    }
  }
  // Lock every node that changes (top-down; only SMOs, serialised on
  // smo_mu_, lock inner nodes, so nothing waits here but for readers'
  // spins) and the new nodes (a scan may reach the new leaf through the
  // split leaf's sibling as soon as the leaf is unlocked).
  std::vector<std::atomic<uint64_t>*> held;
  if (grow) {
    held.push_back(&root_lock_);
  } else if (!inner_dram_) {
    held.push_back(&locks_->word(path[top - 1]));
  }
  for (size_t i = top; i + 1 < h; ++i) held.push_back(&locks_->word(path[i]));
  for (uint64_t off : fresh) held.push_back(&locks_->word(off));
  for (std::atomic<uint64_t>* w : held) vlock::lock(*w);
  SplitWal t{pool_->base(), {}, {}};
  size_t fi = 0;
  bool has_up = false;
  uint64_t up_key = 0, up_child = 0;
  uint64_t leaf_sep = 0, leaf_new = 0;  // the leaf's separator and new half
  for (size_t i = h; i-- > top;) {
    const uint64_t soff = path[i];
    Node* s = node(soff);
    const std::vector<Sorted> items = sorted_entries(s);
    const uint32_t n = static_cast<uint32_t>(items.size());
    const uint32_t m = n / 2;
    const bool leaf = s->level() == 0;
    const uint64_t sep = items[m].key;
    const uint64_t noff = fresh[fi++];
    std::vector<Sorted> right(items.begin() + (leaf ? m : m + 1), items.end());
    uint64_t keep = 0;  // S's new bitmap: bit 0 clear until its slot array is rebuilt
    for (uint32_t j = 0; j < m; ++j) keep |= slot_bit(items[j].slot);
    if (has_up) {
      if (keys_.compare(up_key, sep) < 0) {
        // Into S, in a slot freed by this split (logged: the slot still
        // holds a live entry until the log commits).
        const uint32_t f = items[m].slot;
        t.set(&entries(s)[f].key, up_key);
        t.set(&entries(s)[f].value, up_child);
        keep |= slot_bit(f);
      } else {
        const auto at = std::lower_bound(
            right.begin(), right.end(), up_key,
            [&](const Sorted& a, uint64_t k) { return keys_.compare(a.key, k) < 0; });
        right.insert(at, Sorted{up_key, up_child, 0});
      }
    }
    init_node(noff, s->level(), leaf ? s->leftmost_or_sibling.load(kRlx) : items[m].value, right);
    t.set(&s->bitmap, keep);
    t.nodes.push_back(soff);
    if (leaf) {
      t.set(&s->leftmost_or_sibling, noff);
    }
    pm::count_smo();
    if (leaf) {
      leaf_sep = sep;
      leaf_new = noff;
    }
    has_up = true;
    up_key = sep;
    if constexpr (kStringKeys) {
      if (leaf) up_key = sep_copy;
    }
    up_child = noff;
  }
  if (grow) {
    const uint64_t r = fresh[fi++];
    const Sorted one[1] = {{up_key, up_child, 0}};
    init_node(r, node(path[0])->level() + 1, path[0], one);
    t.set(&root_obj_->root, r);
    pm::count_smo();
  } else if (!inner_dram_) {
    Node* p = node(path[top - 1]);
    const uint64_t bm = p->bitmap.load(kRlx);
    const uint32_t f = static_cast<uint32_t>(std::countr_zero(~bm >> 1));
    t.set(&entries(p)[f].key, up_key);
    t.set(&entries(p)[f].value, up_child);
    t.set(&p->bitmap, (bm | slot_bit(f)) & ~kValidBit);
    t.nodes.push_back(path[top - 1]);
  }
  // b) log the records; one fence makes them and the new nodes durable.
  const uint32_t nrec = static_cast<uint32_t>(t.recs.size());
  pm::copy(log_->records, t.recs.data(), nrec * sizeof(LogRecord));
  pm::count_log_bytes(nrec * sizeof(LogRecord));
  pm::flush(log_->records, nrec * sizeof(LogRecord), {"wbtree.split.log_records"});
  pm::fence({"wbtree.split.prepare"});
  // c) commit, d) apply in place, e) clear.
  pm::naw(&log_->state, kLogCommitted | nrec, {"wbtree.split.log_commit"});
  apply_records(t.recs.data(), nrec, "wbtree.split.apply");
  pm::naw(&log_->state, 0, {"wbtree.split.log_clear"});
  // f) rebuild the slot arrays of the changed nodes, then set their bit 0.
  for (uint64_t off : t.nodes) {
    write_slot_array(node(off), node(off)->bitmap.load(kRlx), "wbtree.split.slot_array");
  }
  pm::fence({"wbtree.split.slot_array"});
  for (uint64_t off : t.nodes) {
    Node* n = node(off);
    pm::store(&n->bitmap, n->bitmap.load(kRlx) | kValidBit);
    pm::flush(&n->bitmap, sizeof(uint64_t), {"wbtree.split.valid"});
  }
  pm::fence({"wbtree.split.valid"});
  // The insert proper, into the half that covers the key (each half has a
  // free slot: a split halves a full leaf), with the ordinary insert
  // protocol (leaf_insert). A crash between the split and it leaves the
  // split tree without the key: the insert is wholly absent.
  Node* half = keys_.le(leaf_sep, key) ? node(leaf_new) : node(path.back());
  leaf_insert(half, last_le(half, key), word, value);
  if (inner_dram_) {
    // DRAM inner nodes: route keys >= sep to the new leaf (volatile; rebuilt
    // from the leaf chain after a crash). The new leaf's lower bound is set
    // first: a reader routed to it reads it. String keys: the InnerTree and
    // the lower bound hold DRAM copies of the separator, never the leaf
    // entry's record (freed if its key is removed).
    if constexpr (kStringKeys) {
      const std::string_view sk = key_record(*pool_, record_of(leaf_sep));
      lows_->word(leaf_new).store(keep_low(sk), std::memory_order_release);
      tree_->insert_separator(path[0], sk, leaf_new);
    } else {
      lows_->word(leaf_new).store(leaf_sep, std::memory_order_release);
      tree_->insert_separator(path[0], leaf_sep, leaf_new);
    }
  }
  for (std::atomic<uint64_t>* w : held) vlock::unlock(*w);
  return Status::Ok();
}

// ---------------------------------------------------------------- bulk load

template <class K>
Status WbTreeT<K>::bulk_load(std::span<const std::pair<K, Value>> sorted) {
  std::lock_guard g(smo_mu_);
  if constexpr (kStringKeys) {
    for (const auto& kv : sorted) {
      if (Status s = check_key(kLayout, kv.first); !s.ok()) return s;
    }
  }
  for (size_t i = 1; i < sorted.size(); ++i) {
    if (!(sorted[i - 1].first < sorted[i].first)) {
      return Status::InvalidArgument("bulk_load: keys not strictly ascending at pair " +
                                     std::to_string(i));
    }
  }
  std::vector<uint64_t> old_nodes, old_leaves;
  Status s = walk(&old_nodes, &old_leaves);
  if (!s.ok()) return s;
  for (uint64_t l : old_leaves) {
    if (used(node(l)) != 0) return Status::InvalidArgument("bulk_load: the index is not empty");
  }
  if (sorted.empty()) return Status::Ok();
  const double fill = std::clamp(fill_, 1e-9, 1.0);
  const uint32_t per = std::clamp<uint32_t>(static_cast<uint32_t>(std::ceil(fill * cap_)), 1, cap_);
  // Node counts per level, bottom-up, so that every block is allocated
  // before anything is written (OutOfSpace leaves the index as it was).
  std::vector<size_t> counts{(sorted.size() + per - 1) / per};
  if (!inner_dram_) {
    while (counts.back() > 1) counts.push_back((counts.back() + per) / (per + 1));
  }
  pm::Allocator& alloc = pool_->allocator();
  std::vector<std::vector<uint64_t>> blocks(counts.size());
  for (size_t l = 0; l < counts.size(); ++l) {
    for (size_t i = 0; i < counts[l]; ++i) {
      uint64_t off = 0;
      s = alloc.allocate(node_size_, &off);
      if (!s.ok()) {
        for (auto& v : blocks) {
          for (uint64_t b : v) alloc.free(b);
        }
        return s;
      }
      blocks[l].push_back(off);
    }
  }
  // The key words. String keys: a record per key (the leaf entry's) and a
  // separator record per leaf but the first (a copy of its first key, owned
  // by the inner entry that routes to the leaf: wbtree.h; inner=pm only),
  // each flushed while unreachable; the node fence below makes them durable
  // before the root word's NAW publishes them.
  std::vector<uint64_t> words, lows;
  if constexpr (kStringKeys) {
    const auto store = [&](std::string_view k, std::vector<uint64_t>* to) {
      uint64_t rec = 0;
      Status r =
          store_key_record(*pool_, k, &rec, {"wbtree.bulk.key_record"}, RecordFence::kCallerFences);
      if (r.ok()) to->push_back(key_word(rec, k));
      return r;
    };
    for (size_t j = 0; s.ok() && j < sorted.size(); ++j) s = store(sorted[j].first, &words);
    for (size_t i = 1; s.ok() && !inner_dram_ && i < counts[0]; ++i) {
      s = store(sorted[i * per].first, &lows);
    }
    if (!s.ok()) {
      for (auto& v : blocks) {
        for (uint64_t b : v) alloc.free(b);
      }
      for (uint64_t w : words) free_key_record(*pool_, record_of(w));
      for (uint64_t w : lows) free_key_record(*pool_, record_of(w));
      return s;
    }
  }
  // Crash argument: every new node is written and flushed while unreachable
  // (one fence for all), then one NAW of the root word publishes the whole
  // tree; a crash before it leaves the old (empty) tree and unreachable
  // blocks that recovery reclaims. The old nodes are freed after the NAW
  // (unreachable from then on), with (string keys) the separator records
  // their inner entries owned (no concurrent calls: see wbtree.h).
  std::vector<std::pair<uint64_t, uint64_t>> level;  // (low key, node)
  std::vector<Sorted> items;
  for (size_t i = 0; i < counts[0]; ++i) {
    items.clear();
    for (size_t j = i * per; j < std::min(sorted.size(), (i + 1) * per); ++j) {
      if constexpr (kStringKeys) {
        items.push_back({words[j], sorted[j].second, 0});
      } else {
        items.push_back({sorted[j].first, sorted[j].second, 0});
      }
    }
    const uint64_t next = i + 1 < counts[0] ? blocks[0][i + 1] : 0;
    init_node(blocks[0][i], 0, next, items);
    uint64_t low = 0;
    if (i > 0 && !inner_dram_) low = kStringKeys ? lows[i - 1] : items.front().key;
    level.emplace_back(low, blocks[0][i]);
  }
  for (size_t l = 1; l < counts.size(); ++l) {
    std::vector<std::pair<uint64_t, uint64_t>> up;
    for (size_t i = 0; i < counts[l]; ++i) {
      const size_t b = i * (per + 1), e = std::min(level.size(), b + per + 1);
      items.clear();
      for (size_t j = b + 1; j < e; ++j) items.push_back({level[j].first, level[j].second, 0});
      init_node(blocks[l][i], static_cast<uint32_t>(l), level[b].second, items);
      up.emplace_back(level[b].first, blocks[l][i]);
    }
    level.swap(up);
  }
  pm::fence({"wbtree.bulk.nodes"});
  vlock::lock(root_lock_);
  pm::naw(&root_obj_->root, blocks.back().front(), {"wbtree.bulk.publish"});
  vlock::unlock(root_lock_);
  for (uint64_t off : old_nodes) {
    if constexpr (kStringKeys) {
      if (node(off)->level() != 0) {
        for (const Sorted& e : sorted_entries(node(off))) free_key_record(*pool_, record_of(e.key));
      }
    }
    // A free node block is zero (check_lost_leaves_of: stale entries could
    // otherwise be taken for lost keys after a later crash). The old nodes
    // are unreachable since the publish NAW above; their leaves held no keys
    // (bulk load takes an empty tree), so a crash mid-zeroing leaves a block
    // no route reaches and, for a leaf, no live entry for the lost-leaf
    // check: the next recovery frees it.
    this->zero_block(off, "wbtree.bulk.free_old");
    alloc.free(off);
  }
  if (inner_dram_) return rebuild_inner(fill);
  return Status::Ok();
}

// ---------------------------------------------------------------- recovery

// Checks that `off` is a node block of this tree (range, alignment, block
// size, magic, entry bits within the capacity) before anything reads it.
template <class K>
Status WbTreeT<K>::check_node(uint64_t off, const char* what) const {
  if (off == 0 || !pool_->contains(off, node_size_) || off % node_size_ != 0 ||
      pool_->allocator().block_size(off) != node_size_) {
    return Status::Corruption("wbtree: " + std::string(what) + " offset " + hex(off) +
                              " is not a node block of the pool");
  }
  const Node* n = node(off);
  if (n->magic() != kNodeMagic) return Status::Corruption("wbtree: bad node magic at " + hex(off));
  if ((n->bitmap.load(kRlx) & ~kValidBit) >> (cap_ + 1) != 0) {
    return Status::Corruption("wbtree: node " + hex(off) + " bitmap names slots beyond capacity");
  }
  return Status::Ok();
}

// Every node reachable from the root word (inner=pm: the tree, through the
// leftmost children and the entries the bitmaps name; inner=dram: the leaf
// chain), validated, each once (a node reached twice is Corruption: a cycle
// or a shared child). Needs no valid slot array. *leaves: the leaves among
// them (inner=dram: in chain order).
template <class K>
Status WbTreeT<K>::walk(std::vector<uint64_t>* nodes, std::vector<uint64_t>* leaves) const {
  nodes->clear();
  leaves->clear();
  std::unordered_set<uint64_t> seen;
  const uint64_t root = root_word();
  if (inner_dram_) {
    for (uint64_t off = root; off != 0; off = node(off)->leftmost_or_sibling) {
      Status s = check_node(off, off == root ? "first leaf" : "next leaf");
      if (!s.ok()) return s;
      if (node(off)->level() != 0)
        return Status::Corruption("wbtree: chain node " + hex(off) + " is not a leaf");
      if (!seen.insert(off).second)
        return Status::Corruption("wbtree: leaf chain cycle at " + hex(off));
      nodes->push_back(off);
      leaves->push_back(off);
    }
    return Status::Ok();
  }
  Status s = check_node(root, "root");
  if (!s.ok()) return s;
  if (node(root)->level() > 64) return Status::Corruption("wbtree: root level too large");
  std::vector<uint64_t> stack{root};
  seen.insert(root);
  while (!stack.empty()) {
    const uint64_t off = stack.back();
    stack.pop_back();
    nodes->push_back(off);
    Node* n = node(off);
    if (n->level() == 0) {
      leaves->push_back(off);
      continue;
    }
    std::vector<uint64_t> children{n->leftmost_or_sibling.load(kAcq)};
    const uint64_t bm = n->bitmap.load(kRlx);
    for (uint32_t sl = 0; sl < cap_; ++sl) {
      if (bm & slot_bit(sl)) children.push_back(entries(n)[sl].value);
    }
    for (uint64_t c : children) {
      s = check_node(c, "child");
      if (!s.ok()) return s;
      if (node(c)->level() + 1 != n->level()) {
        return Status::Corruption("wbtree: child " + hex(c) + " of " + hex(off) + " has level " +
                                  std::to_string(node(c)->level()) + ", expected " +
                                  std::to_string(n->level() - 1));
      }
      if (!seen.insert(c).second) {
        return Status::Corruption("wbtree: node " + hex(c) + " reached twice");
      }
      stack.push_back(c);
    }
  }
  return Status::Ok();
}

// String keys: every live entry's key word (leaf keys and separators) names
// a key record with its prefix (check_key_word), checked before recovery
// compares any (a damaged word is Corruption, not a wild read). Entries
// whose bitmap bit is clear are never read.
template <class K>
Status WbTreeT<K>::check_key_words(const std::vector<uint64_t>& nodes) const {
  if constexpr (kStringKeys) {
    for (uint64_t off : nodes) {
      Node* n = node(off);
      const uint64_t bm = n->bitmap.load(kRlx);
      for (uint32_t sl = 0; sl < cap_; ++sl) {
        if (!(bm & slot_bit(sl))) continue;
        if (Status s = check_key_word(*pool_, kLayout, entries(n)[sl].key.load(kRlx)); !s.ok()) {
          return s;
        }
      }
    }
  }
  (void)nodes;
  return Status::Ok();
}

// Recovery (paper §4.4): 1) validate the root object and the log; 2) redo a
// committed log (every logged word must hold its old or new value), then
// clear it; 3) walk every node; 4) rebuild every slot array whose bitmap bit
// 0 is clear (an insert or delete between its two NAWs, or a split after its
// log commit), then set bit 0; 5) hand the reachable set to the allocator,
// checked against the pool's close record (common/persistent.h: on a
// cleanly closed pool a lost node is Corruption and nothing is reclaimed;
// otherwise every other block, e.g. a new node of an uncommitted split, is
// reclaimed); 6) inner=dram: unlink and free the empty leaves, rebuild the
// DRAM inner nodes; 7) verify(), and the key count against the close record.
//
// Crash during recovery: the redo stores new values only (idempotent) and
// the log is cleared only after they are durable; a slot array is rewritten
// only while its bit 0 is durably clear, and bit 0 is set only after the
// rewrite is durable: any prefix recovers again to the same content.
template <class K>
Status WbTreeT<K>::recover() {
  if (Status s = this->open_root_object(kLayout, kRootMagic, &root_obj_); !s.ok()) return s;
  const uint64_t ro = pool_->root();
  if (root_obj_->node_size > 4096 ||
      !valid_node_size(static_cast<uint32_t>(root_obj_->node_size))) {
    return Status::Corruption("wbtree: root object has invalid node size " +
                              std::to_string(root_obj_->node_size));
  }
  if (root_obj_->inner_dram > 1) {
    return Status::Corruption("wbtree: root object has invalid inner placement " +
                              std::to_string(root_obj_->inner_dram));
  }
  if constexpr (kStringKeys) {
    if (pool_->size() > kRecordMask) {
      return Status::InvalidArgument("wbtree: string keys need a pool below 2^48 bytes");
    }
  }
  node_size_ = static_cast<uint32_t>(root_obj_->node_size);
  cap_ = capacity_for(node_size_, &eoff_);
  inner_dram_ = root_obj_->inner_dram == 1;
  const uint64_t lo = root_obj_->log;
  if (!pool_->contains(lo, kLogBytes) || pool_->allocator().block_size(lo) != kLogBytes ||
      lo % kLogBytes != 0) {
    return Status::Corruption("wbtree: log offset " + hex(lo) + " is not a log block");
  }
  log_ = pool_->template ptr<Log>(lo);
  const uint64_t st = log_->state.load(kRlx);
  if (st != 0) {
    const uint64_t nrec = st & 0xffffffffull;
    if ((st & ~0xffffffffull) != kLogCommitted || nrec > kLogRecords) {
      return Status::Corruption("wbtree: bad log state " + hex(st));
    }
    for (uint64_t i = 0; i < nrec; ++i) {
      const LogRecord& r = log_->records[i];
      // A record names the root word or a word of a node block (never the
      // allocator's metadata or another block class: damage, not a crash).
      const uint64_t base = r.off - r.off % node_size_;
      const bool root_word_rec = r.off == ro + offsetof(RootObject, root);
      if (!pool_->contains(r.off, 8) || r.off % 8 != 0 ||
          (!root_word_rec && (!pool_->contains(base, node_size_) ||
                              pool_->allocator().block_size(base) != node_size_))) {
        return Status::Corruption("wbtree: log record " + std::to_string(i) + " offset " +
                                  hex(r.off) + " out of range");
      }
      const uint64_t cur = word_at(pool_->base(), r.off)->load(kRlx);
      if (cur != r.old_value && cur != r.new_value) {
        return Status::Corruption("wbtree: logged word at " + hex(r.off) +
                                  " holds neither its old nor its new value");
      }
    }
    apply_records(log_->records, nrec, "wbtree.recover.redo");
    pm::naw(&log_->state, 0, {"wbtree.recover.log_clear"});
  }
  std::vector<uint64_t> nodes, leaves;
  Status s = walk(&nodes, &leaves);
  if (!s.ok()) return s;
  s = check_key_words(nodes);
  if (!s.ok()) return s;
  std::vector<uint64_t> invalid;
  for (uint64_t off : nodes) {
    Node* n = node(off);
    const uint64_t bm = n->bitmap.load(kRlx);
    if (bm & kValidBit) continue;
    // Distinct keys are required for a sorted slot array (a crash never
    // leaves two live entries with one key).
    std::vector<uint64_t> keys;
    for (uint32_t sl = 0; sl < cap_; ++sl) {
      if (bm & slot_bit(sl)) keys.push_back(entries(n)[sl].key);
    }
    const auto less = [&](uint64_t a, uint64_t b) { return keys_.compare(a, b) < 0; };
    std::sort(keys.begin(), keys.end(), less);
    if (std::adjacent_find(keys.begin(), keys.end(), [&](uint64_t a, uint64_t b) {
          return keys_.compare(a, b) == 0;
        }) != keys.end()) {
      return Status::Corruption("wbtree: duplicate key in node " + hex(off));
    }
    write_slot_array(n, bm, "wbtree.recover.slot_array");
    invalid.push_back(off);
  }
  if (!invalid.empty()) {
    pm::fence({"wbtree.recover.slot_array"});
    for (uint64_t off : invalid) {
      Node* n = node(off);
      pm::store(&n->bitmap, n->bitmap.load(kRlx) | kValidBit);
      pm::flush(&n->bitmap, sizeof(uint64_t), {"wbtree.recover.valid"});
    }
    pm::fence({"wbtree.recover.valid"});
  }
  // Every slot array is valid now (else the pool is damaged): the steps
  // below and verify() read entries through them.
  for (uint64_t off : nodes) {
    s = verify_node_slots(off);
    if (!s.ok()) return s;
  }
  // No structural write so far on a cleanly closed pool (its log is clear
  // and every slot array valid): the pass compares what the walk reached
  // with the close record before the unlinks below change the chain.
  // String keys: each record is marked by its owner (wbtree.h), a live
  // entry of a leaf or an inner node; one named twice is damage (marked
  // twice: Corruption).
  s = this->reclaim_unreachable(
      kLayout,
      [&](pm::Allocator& alloc, uint64_t* keys) {
        Status m = alloc.mark_reachable(lo);
        for (uint64_t off : nodes) {
          if (m.ok()) m = alloc.mark_reachable(off);
          if constexpr (kStringKeys) {
            const uint64_t bm = node(off)->bitmap.load(kRlx);
            for (uint32_t sl = 0; m.ok() && sl < cap_; ++sl) {
              if (bm & slot_bit(sl)) {
                m = mark_key_record(*pool_, kLayout,
                                    record_of(entries(node(off))[sl].key.load(kRlx)));
              }
            }
          }
        }
        for (uint64_t off : leaves) *keys += used(node(off));
        return m;
      },
      [&](pm::Allocator& alloc) {
        // inner=dram: the leaf chain is the only persistent level.
        return inner_dram_ ? check_lost_leaves_of(alloc, leaves) : Status::Ok();
      });
  if (!s.ok()) return s;
  if (inner_dram_) {
    unlink_empty_leaves();
    s = walk(&nodes, &leaves);
    if (!s.ok()) return s;
  }
  locks_ = std::make_unique<LockTable>(pool_->size(), node_size_);
  if (inner_dram_) {
    lows_ = std::make_unique<LockTable>(pool_->size(), node_size_);
    s = rebuild_inner();
    if (!s.ok()) return s;
  }
  VerifyReport report;
  return verify(&report);
}

// inner=dram: builds the DRAM inner nodes over the leaf chain, each with
// InnerTree::children_per_node(fill) children (fill 1.0 except after a bulk
// load): the first leaf covers keys from 0, every other leaf from its
// smallest key (every leaf but the first holds a key: see
// unlink_empty_leaves). Touches no PM.
template <class K>
Status WbTreeT<K>::rebuild_inner(double fill) {
  std::vector<inner::LeafRefT<K>> refs;
  if constexpr (kStringKeys) {
    low_keys_.clear();
    low_key_bytes_ = 0;
  }
  for (uint64_t off = root_word(); off != 0; off = node(off)->leftmost_or_sibling.load(kAcq)) {
    Node* n = node(off);
    uint64_t low = 0;
    if (refs.empty()) {
      refs.emplace_back(OwnedKey<K>{}, off);
    } else {
      if (sa_count(n) == 0) {
        return Status::Corruption("wbtree: empty leaf " + hex(off) + " inside the leaf chain");
      }
      const uint64_t first = entries(n)[sa_slot(n, 0)].key.load(kAcq);
      OwnedKey<K> k = keys_.owned(first);
      if (k <= refs.back().first) {
        return Status::Corruption("wbtree: leaf " + hex(off) + " keys overlap its predecessor");
      }
      if constexpr (kStringKeys) {
        low = keep_low(k);
      } else {
        low = first;
      }
      refs.emplace_back(std::move(k), off);
    }
    lows_->word(off).store(low, std::memory_order_release);
  }
  if (!tree_) tree_ = std::make_unique<inner::InnerTreeT<K>>(node_size_);
  return tree_->build(refs, fill);
}

// inner=dram recovery: a leaf's lower bound is not stored (only the DRAM
// inner nodes knew it), so the rebuild takes each leaf's smallest key as its
// lower bound; an empty leaf has none and is unlinked from the chain (unless
// it is the only leaf). Each unlink is one NAW of its predecessor's sibling
// (or of the root word for the first leaf) that skips only empty leaves: every
// crash state is a chain with the same content. The skipped leaves are
// freed after the NAWs (the allocator pass has ended); a crash first leaves
// them unreachable, for the next recovery's pass to reclaim.
template <class K>
void WbTreeT<K>::unlink_empty_leaves() {
  std::vector<uint64_t> chain, kept;
  for (uint64_t off = root_word(); off != 0; off = node(off)->leftmost_or_sibling.load(kAcq)) {
    chain.push_back(off);
    if (sa_count(node(off)) != 0) kept.push_back(off);
  }
  if (kept.empty()) kept.push_back(chain.front());
  if (root_word() != kept.front()) {
    pm::naw(&root_obj_->root, kept.front(), {"wbtree.recover.unlink"});
  }
  for (size_t i = 0; i < kept.size(); ++i) {
    const uint64_t next = i + 1 < kept.size() ? kept[i + 1] : 0;
    Node* n = node(kept[i]);
    if (n->leftmost_or_sibling.load(kRlx) != next)
      pm::naw(&n->leftmost_or_sibling, next, {"wbtree.recover.unlink"});
  }
  size_t k = 0;
  for (uint64_t off : chain) {
    if (k < kept.size() && kept[k] == off) {
      ++k;
    } else {
      // Zeroed before it is freed: a free leaf block is always zero
      // (check_lost_leaves_of); a crash first leaves it for the next
      // recovery's check to zero.
      this->zero_block(off, "wbtree.recover.unlink_zero");
      pool_->allocator().free(off);
    }
  }
}

// inner=dram, after a crash (common/persistent.h, check_lost_leaves),
// integer keys: an unreachable node block is a whole leaf when it has the
// node magic and level 0, its bitmap names only its slots, and no live slot
// holds the all-zero entry (a split's new node left partly written). A key
// is held when the non-empty chain leaf covering it (the last whose smallest
// key is <= the key; the chain is in key order) holds it in a live slot.
// The only legitimate whole leaf off the chain is the new node of a split
// whose log was not committed: the split fills and persists it before the
// commit, and the old leaf changes only when the log is applied (redone by
// recovery once committed), so its keys are all still the old leaf's.
// wbtree frees a leaf only when recovery unlinks an empty one and in
// bulk_load (the empty root leaf), zeroed first, so no other block of the
// node class holds anything. String keys: no check (a live slot names a key
// record, to be checked before it is read).
template <class K>
Status WbTreeT<K>::check_lost_leaves_of(pm::Allocator& alloc, const std::vector<uint64_t>& chain) {
  if constexpr (kStringKeys) {
    return Status::Ok();
  } else {
    const uint64_t slots_mask =
        ((cap_ >= 63 ? ~uint64_t{0} : (uint64_t{2} << cap_) - 1)) & ~kValidBit;
    auto live = [&](Node* n) { return n->bitmap.load(kRlx) & ~kValidBit; };
    auto live_keys = [&](uint64_t off, std::vector<uint64_t>* keys) {
      Node* n = node(off);
      if (n->magic() != kNodeMagic || n->level() != 0 || (live(n) & ~slots_mask) != 0) return false;
      for (uint64_t b = live(n); b != 0; b &= b - 1) {
        const Entry& e = entries(n)[std::countr_zero(b) - 1];
        const uint64_t k = e.key.load(kRlx);
        if (k == 0 && e.value.load(kRlx) == 0) return false;
        keys->push_back(k);
      }
      return !keys->empty();
    };
    auto ranges = [&](std::vector<std::pair<uint64_t, uint64_t>>* r) {
      for (uint64_t off : chain) {
        Node* n = node(off);
        uint64_t lo = UINT64_MAX;
        for (uint64_t b = live(n); b != 0; b &= b - 1) {
          lo = std::min(lo, entries(n)[std::countr_zero(b) - 1].key.load(kRlx));
        }
        if (live(n) != 0) r->emplace_back(lo, off);
      }
    };
    auto leaf_has = [&](uint64_t off, uint64_t k) {
      Node* n = node(off);
      for (uint64_t b = live(n); b != 0; b &= b - 1) {
        if (entries(n)[std::countr_zero(b) - 1].key.load(kRlx) == k) return true;
      }
      return false;
    };
    return this->check_lost_leaves(kLayout, alloc, node_size_, live_keys, ranges, leaf_has,
                                   "wbtree.recover.lost_leaf_check");
  }
}

template <class K>
OwnedKey<K> WbTreeT<K>::low_of(uint64_t leaf) const {
  const uint64_t low = lows_->word(leaf).load(kAcq);
  if constexpr (kStringKeys) {
    return low == 0 ? std::string() : std::string(low_key(low));
  } else {
    return low;
  }
}

// ---------------------------------------------------------------- info, verify

template <class K>
IndexInfo WbTreeT<K>::info() const {
  return this->persistent_info(
      kLayout,
      std::string(kWbTreeDescription) +
          (inner_dram_ ? "; inner nodes in DRAM" : "; inner nodes in PM"),
      {.ordered = true,
       .persistent = true,
       .thread_safe = true,
       .string_keys = true,  // the entry's claim, whatever this instance's K
       .bulk_load = true,
       .placement = inner_dram_ ? Placement::kSelective : Placement::kPmOnly},
      node_size_,
      sizeof(*this) + (locks_ ? locks_->dram_bytes() : 0) + (lows_ ? lows_->dram_bytes() : 0) +
          (tree_ ? tree_->dram_bytes() : 0) + low_key_bytes_);
}

// The slot array of `off` is valid (bit 0 set), lists exactly the set entry
// slots, and its keys ascend strictly.
template <class K>
Status WbTreeT<K>::verify_node_slots(uint64_t off) const {
  Node* n = node(off);
  const uint64_t bm = n->bitmap.load(kRlx);
  if (!(bm & kValidBit)) {
    return Status::Corruption("wbtree: node " + hex(off) + " slot array marked invalid");
  }
  uint8_t sa[1 + kMaxSlots];
  load_slot_array(n, sa);
  if (sa[0] != used(n)) {
    return Status::Corruption("wbtree: node " + hex(off) + " slot array count " +
                              std::to_string(sa[0]) + " != bitmap entries " +
                              std::to_string(used(n)));
  }
  uint64_t seen = 0;
  for (uint32_t j = 0; j < sa[0]; ++j) {
    const uint32_t sl = sa[1 + j];
    if (sl >= cap_ || !(bm & slot_bit(sl)) || (seen & slot_bit(sl))) {
      return Status::Corruption("wbtree: node " + hex(off) + " slot array names slot " +
                                std::to_string(sl) + " (free, repeated or out of range)");
    }
    seen |= slot_bit(sl);
    if (j > 0 &&
        keys_.compare(entries(n)[sa[j]].key.load(kRlx), entries(n)[sl].key.load(kRlx)) >= 0) {
      return Status::Corruption("wbtree: node " + hex(off) + " keys not strictly ascending");
    }
  }
  return Status::Ok();
}

// String keys: the allocator bytes of the records that the live entries of
// node `off` own (wbtree.h: every live entry owns its key word's record).
template <class K>
uint64_t WbTreeT<K>::record_bytes(uint64_t off) const {
  uint64_t bytes = 0;
  if constexpr (kStringKeys) {
    Node* n = node(off);
    const uint64_t bm = n->bitmap.load(kRlx);
    for (uint32_t sl = 0; sl < cap_; ++sl) {
      if (bm & slot_bit(sl)) {
        bytes += pool_->allocator().block_size(record_of(entries(n)[sl].key.load(kRlx)));
      }
    }
  }
  (void)off;
  return bytes;
}

// Checks the subtree at `off` (level `level`) against the key range
// [lo, hi) (hi = +infinity unless has_hi); appends its leaves in key order.
template <class K>
Status WbTreeT<K>::verify_subtree(uint64_t off, uint32_t level, uint64_t lo, bool has_hi,
                                  uint64_t hi, std::vector<uint64_t>* leaves,
                                  VerifyReport* r) const {
  Node* n = node(off);
  if (n->level() != level)
    return Status::Corruption("wbtree: node " + hex(off) + " level mismatch");
  Status s = verify_node_slots(off);
  if (!s.ok()) return s;
  const std::vector<Sorted> items = sorted_entries(n);
  for (const Sorted& e : items) {
    const int c = keys_.compare(e.key, lo);
    if (c < 0 || (has_hi && keys_.compare(e.key, hi) >= 0) || (level > 0 && c == 0)) {
      return Status::Corruption("wbtree: key " + hex(e.key) + " outside the bounds of node " +
                                hex(off));
    }
  }
  if constexpr (kStringKeys) r->pm_bytes += node_size_ + record_bytes(off);
  if (level == 0) {
    ++r->leaves;
    r->keys += items.size();
    leaves->push_back(off);
    return Status::Ok();
  }
  ++r->inner_nodes;
  s = verify_subtree(n->leftmost_or_sibling, level - 1, lo, items.empty() ? has_hi : true,
                     items.empty() ? hi : items.front().key, leaves, r);
  for (size_t j = 0; s.ok() && j < items.size(); ++j) {
    const bool last = j + 1 == items.size();
    s = verify_subtree(items[j].value, level - 1, items[j].key, last ? has_hi : true,
                       last ? hi : items[j + 1].key, leaves, r);
  }
  return s;
}

template <class K>
Status WbTreeT<K>::verify(VerifyReport* report) const {
  if (log_->state.load(kRlx) != 0) return Status::Corruption("wbtree: split log not cleared");
  std::vector<uint64_t> nodes, leaves;
  Status s = walk(&nodes, &leaves);
  if (!s.ok()) return s;
  VerifyReport r;
  std::vector<uint64_t> order;
  if (inner_dram_) {
    uint64_t prev_max = 0;
    bool any = false;
    for (uint64_t off : leaves) {
      s = verify_node_slots(off);
      if (!s.ok()) return s;
      const std::vector<Sorted> items = sorted_entries(node(off));
      if (!items.empty()) {
        if (any && keys_.compare(items.front().key, prev_max) <= 0) {
          return Status::Corruption("wbtree: leaf " + hex(off) + " keys overlap its predecessor");
        }
        prev_max = items.back().key;
        any = true;
      }
      ++r.leaves;
      r.keys += items.size();
      if constexpr (kStringKeys) r.pm_bytes += node_size_ + record_bytes(off);
    }
    // The DRAM inner nodes route exactly the chain, each leaf within its
    // bounds.
    std::vector<inner::LeafRefT<K>> refs;
    s = tree_->verify_routes(
        kLayout, leaves, [&](uint64_t off) { return low_of(off); }, &refs);
    if (!s.ok()) return s;
    for (size_t i = 0; i < refs.size(); ++i) {
      for (const Sorted& e : sorted_entries(node(leaves[i]))) {
        const OwnedKey<K> k = keys_.owned(e.key);
        if (k < refs[i].first || (i + 1 < refs.size() && k >= refs[i + 1].first)) {
          return Status::Corruption("wbtree: key " + hex(e.key) + " outside the bounds of leaf " +
                                    hex(leaves[i]));
        }
      }
    }
    r.inner_nodes = tree_->nodes();
    r.height = tree_->height() + 1;
    *report = r;
    return Status::Ok();
  }
  const uint64_t root = root_word();
  s = verify_subtree(root, node(root)->level(), 0, false, 0, &order, &r);
  if (!s.ok()) return s;
  for (size_t i = 0; i < order.size(); ++i) {
    const uint64_t want = i + 1 < order.size() ? order[i + 1] : 0;
    if (node(order[i])->leftmost_or_sibling != want) {
      return Status::Corruption("wbtree: leaf " + hex(order[i]) + " sibling " +
                                hex(node(order[i])->leftmost_or_sibling) + ", expected " +
                                hex(want));
    }
  }
  r.height = node(root)->level() + 1;
  *report = r;
  return Status::Ok();
}

// ---------------------------------------------------------------- ablation notes

// Ablation notes (issue 3 §4): the flushes and fences whose removal the crash
// lab (`nvindex crashtest --index wbtree --ablate all`, at the smallest node
// size, 128 B) does not catch, and why each stays. Several rest on one fact:
// in nodes of 128..512 B the slot array (bytes 24..24+c, c <= 28) lies in
// line 0 with the bitmap, and a line persists a prefix of its stores in
// program order (DESIGN.md §6), so at those sizes the order bitmap (bit 0
// clear) -> slot array -> bitmap (bit 0 set) holds without a fence; in
// 1024 B nodes the slot array reaches byte 82 (line 1) and the removal is
// caught there (`--node-size 1024 --ops 150 --ablate <site>`).
template <class K>
std::vector<std::pair<std::string, std::string>> WbTreeT<K>::ablation_notes() const {
  const std::string same_line =
      "not observable at 128..512 B nodes: the slot array shares line 0 with the bitmap, and a "
      "line persists a prefix of its stores in program order, so the slot array cannot become "
      "durable before the bitmap store that precedes it nor after the one that follows; needed "
      "for 1024 B nodes, whose slot array reaches line 1 (caught there: nvindex crashtest "
      "--node-size 1024 --ops 150 --ablate ";
  // String keys add no note: the key and separator records have no fence of
  // their own (RecordFence::kCallerFences), and dropping their flushes is
  // caught (wbtree.insert.key_record, wbtree.split.separator_record).
  return {
      {"wbtree.create.log/flush",
       "not observable in the crash lab, whose pools start zeroed: without it the log's state word "
       "may stay non-durable, and a fresh pool reads 0 there anyway; needed because the log block "
       "may hold stale bytes (a block reclaimed from a create that crashed before its root was "
       "set), which a lost state store would expose as a committed log; one flush per pool "
       "creation, committed by the root object's fence"},
      {"wbtree.insert.entry/fence",
       "redundant in this order: the entry's flush is committed by the fence of NAW 1 "
       "(wbtree.insert.invalidate), which precedes NAW 2, the only store that makes the entry "
       "visible; kept because the paper's insertion algorithm (§4.1) persists the entry before "
       "NAW 1, so the measured fences per insert are the paper's"},
      {"wbtree.insert.invalidate", same_line + "wbtree.insert.invalidate)"},
      {"wbtree.insert.slot_array", same_line + "wbtree.insert.slot_array)"},
      {"wbtree.delete.invalidate", same_line + "wbtree.delete.invalidate)"},
      {"wbtree.delete.slot_array", same_line + "wbtree.delete.slot_array)"},
      {"wbtree.split.slot_array",
       "not observable in the crash lab: a rebuilt slot array lies in line 0 with its bitmap "
       "unless the node keeps more than 39 entries after the split (a 1024 B parent receiving a "
       "separator), which the lab's short scenarios never reach, and a line persists a prefix "
       "of its stores in program order; needed for that case, where without it bit 0 could be "
       "durably set while the slot array's line 1 is not yet written"},
      {"wbtree.split.log_clear/fence",
       "redundant: the clear's flush is committed by the next fence (wbtree.split.slot_array), "
       "and until then only slot arrays of nodes whose bit 0 is clear change; a redo of the "
       "still-committed log stores into each logged word the new value it already holds, so "
       "every crash state in that window recovers to the split tree; one fence per split"},
      {"wbtree.split.valid",
       "not needed for crash consistency: a node whose bit 0 stays clear only makes recovery "
       "rebuild its slot array, which is already correct; persisting the set bit 0 keeps every "
       "store durable at the operation's return (no lint finding) and spares recovery the "
       "rebuild; one fence per split"},
  };
}

// ---------------------------------------------------------------- factory

/// The factory of both instances (make_wbtree, make_wbtree_string).
template <class K>
Status open_wbtree(const IndexOptions& options, std::unique_ptr<Index<K>>* out) {
  // make_index() has checked the node size, the fill factor and the value
  // of "inner" against kWbTreeOptions; a recovered tree keeps its stored
  // node size and placement.
  using Tree = wbtree::WbTreeT<K>;
  const auto inner = options.extra.find("inner");
  const bool inner_dram = inner != options.extra.end() && inner->second == "dram";
  return open_persistent_index<Tree>(
      options, pool_layout(wbtree::kLayout, key_type_of<K>),
      [&](Tree& t) { return t.create(options.node_size, inner_dram); },
      [&](Tree& t) { return t.recover(); }, out, options.fill_factor);
}
}  // namespace wbtree
}  // namespace nvindex
