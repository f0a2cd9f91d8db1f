// P-Masstree (see p_masstree.h and docs/indexes/p-masstree.md).
//
// Persistence (RECIPE §4, condition #1, "writes by atomic stores, readers
// tolerate"): every change a reader or a recovery can observe is published by
// one 8-byte NAW (pm::naw: store, flush, fence) of a word that names only
// data persisted before it:
//   insert     slot fields written to a free slot (not in the permutation) and
//              persisted, then the permutation NAW adds the slot. A crash
//              before it leaves the old permutation: the slot is free garbage.
//   remove     the permutation NAW drops the slot.
//   update     NAW of the value word (in the node, or in the suffix record).
//   suffix     the suffix record is persisted before the slot naming it.
//   layer      the new layer's node and header are persisted, then one NAW of
//              the entry's value word swaps the suffix record for the header
//              (both are tagged blocks, so either word is consistent).
//   split      the new right node R (upper entries, lowkey = separator, next =
//              the old next) is persisted, then NAW left.next = R commits the
//              split (the B-link: every key is reachable through it), then NAW
//              of left's permutation trims the moved entries. A crash between
//              the two leaves entries in left whose slices are >= R.lowkey:
//              readers move right before they look at them, and recovery
//              ignores then trims them. The separator is inserted into the
//              parent afterwards, by the same insert; a crash before it leaves
//              R reachable only by the sibling pointer, which B-link readers
//              and every later operation tolerate.
//   root split the new root (leftmost = old root, one separator) is persisted
//              BEFORE the NAW of the tree's root word that publishes it (the
//              ordering whose absence Witcher reported in RECIPE's P-Masstree).
//
// Reclamation: nodes are never freed while the index is open (no merges).
// Suffix records that a removal or a layer creation unlinked are retired to a
// list freed by the destructor (an optimistic reader may still hold one); a
// crash loses the list and recovery's reachability pass frees them.
#include "indexes/p_masstree/p_masstree.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "indexes/common/prefetch.h"
#include "nvindex/pm/allocator.h"
#include "nvindex/pm/persist.h"

namespace nvindex {
namespace masstree {

namespace {

constexpr auto kAcq = std::memory_order_acquire;
constexpr auto kRlx = std::memory_order_relaxed;
constexpr bool kIsInt(const uint64_t*) { return true; }
constexpr bool kIsInt(const std::string_view*) { return false; }
template <class K>
constexpr bool kInt = kIsInt(static_cast<const K*>(nullptr));

/// Slice of layer d: bytes [8d, 8d+8) big-endian, zero-padded.
inline uint64_t slice_of(uint64_t key, unsigned) { return key; }
inline uint64_t slice_of(std::string_view key, unsigned d) {
  const size_t o = size_t{8} * d;
  uint64_t v = 0;
  if (o < key.size()) std::memcpy(&v, key.data() + o, std::min<size_t>(8, key.size() - o));
  return __builtin_bswap64(v);
}
/// keylen of layer d: the bytes left (0..8), or kLong when more than 8 are.
inline uint8_t keylen_of(uint64_t, unsigned) { return 8; }
inline uint8_t keylen_of(std::string_view key, unsigned d) {
  const size_t o = size_t{8} * d;
  const size_t rem = key.size() > o ? key.size() - o : 0;
  return rem > 8 ? kLong : static_cast<uint8_t>(rem);
}
/// Appends the first n bytes of a slice to s.
inline void append_slice(std::string* s, uint64_t slice, size_t n) {
  const uint64_t be = __builtin_bswap64(slice);
  s->append(reinterpret_cast<const char*>(&be), n);
}
/// (slice, keylen) order of entries in a layer.
inline bool entry_less(uint64_t s1, uint8_t l1, uint64_t s2, uint8_t l2) {
  return s1 < s2 || (s1 == s2 && l1 < l2);
}

}  // namespace

// ---------------------------------------------------------------- Perm

Perm Perm::inserted(uint32_t pos, uint32_t* slot_out) const {
  const uint32_t n = size();
  const uint32_t s = slot(n);
  uint64_t v = 0;
  for (uint32_t p = 0, q = 0; p < kWidth; ++p) {
    uint32_t sl;
    if (p == pos) {
      sl = s;
    } else {
      if (q == n) ++q;  // skip the slot being moved
      sl = slot(q++);
    }
    v |= uint64_t{sl} << (4 * p + 4);
  }
  *slot_out = s;
  return Perm{v | (n + 1)};
}

Perm Perm::removed(uint32_t pos) const {
  const uint32_t n = size();
  const uint32_t s = slot(pos);
  uint64_t v = 0;
  for (uint32_t p = 0, q = 0; p < kWidth; ++p) {
    uint32_t sl;
    if (p == n - 1) {
      sl = s;
    } else {
      if (q == pos) ++q;
      sl = slot(q++);
    }
    v |= uint64_t{sl} << (4 * p + 4);
  }
  return Perm{v | (n - 1)};
}

bool Perm::valid() const {
  if (size() > kWidth) return false;
  uint32_t seen = 0;
  for (uint32_t p = 0; p < kWidth; ++p) {
    const uint32_t s = slot(p);
    if (s >= kWidth || (seen & (1u << s)) != 0) return false;
    seen |= 1u << s;
  }
  return true;
}

// ---------------------------------------------------------------- helpers

template <class K>
PMasstree<K>::~PMasstree() {
  for (uint64_t off : retired_) this->pool_->allocator().free(off);
  this->record_close_keys();
}

template <class K>
void PMasstree<K>::retire(uint64_t off) {
  std::lock_guard g(retired_mu_);
  retired_.push_back(off);
}

template <class K>
Status PMasstree<K>::new_node(uint32_t level, uint64_t lowkey, uint64_t* off) {
  if (Status s = this->pool_->allocator().allocate(kNodeBytes, off); !s.ok()) return s;
  // Unpublished until a later NAW names it, after the caller persists it.
  Node* n = node(*off);
  pm::fill(n, 0, sizeof(Node));
  pm::store(&n->perm, Perm::empty().x);
  pm::store(&n->lowkey, lowkey);
  pm::store(&n->magic, kNodeMagic);
  pm::store(&n->level, level);
  for (auto& kl : n->keylen) pm::store(&kl, uint8_t{8});
  return Status::Ok();
}

template <class K>
typename PMasstree<K>::Found PMasstree<K>::find(const Node* n, Perm p, uint64_t s,
                                                uint8_t lk) const {
  const uint32_t cnt = std::min(p.size(), kWidth);
  for (uint32_t pos = 0; pos < cnt; ++pos) {
    const uint32_t sl = p.slot(pos);
    const uint64_t ks = n->keys[sl].load(kAcq);
    if (ks < s) continue;
    if (ks > s) return {pos, false, 0};
    if constexpr (kInt<K>) {
      return {pos, true, sl};
    } else {
      const uint8_t kl = n->keylen[sl].load(kAcq);
      if (kl < lk) continue;
      if (kl == lk) return {pos, true, sl};
      return {pos, false, 0};
    }
  }
  return {cnt, false, 0};
}

namespace {
/// The child of interior node n for slice s: the child of the largest key
/// <= s, or leftmost. *hint_child and *hint_sep get the next child and its
/// separator (0 and 0 when the child is the last one): when the child's
/// sibling is that node, its lowkey is that separator, so the descent need
/// not read the sibling to decide whether to move right.
inline uint64_t child_of(const Node* n, uint64_t s, uint64_t* hint_child, uint64_t* hint_sep) {
  const Perm p{n->perm.load(kAcq)};
  const uint32_t cnt = std::min(p.size(), kWidth);
  uint64_t c = n->leftmost.load(kAcq);
  *hint_child = 0;
  *hint_sep = 0;
  for (uint32_t pos = 0; pos < cnt; ++pos) {
    const uint32_t sl = p.slot(pos);
    const uint64_t k = n->keys[sl].load(kAcq);
    if (k > s) {
      *hint_child = n->vals[sl].load(kAcq);
      *hint_sep = k;
      break;
    }
    c = n->vals[sl].load(kAcq);
  }
  return c;
}

/// Prefetches the lines of a node a descent reads (header, slices, values).
inline void prefetch_node(const Node* n) { prefetch_bytes(n, sizeof(Node)); }
}  // namespace

template <class K>
void PMasstree<K>::descend(const TreeRoot* t, uint64_t s, uint32_t level, uint64_t* off,
                           uint64_t* v) const {
  for (;;) {
    uint64_t o = t->root.load(kAcq);
    uint64_t ver = 0;
    uint64_t hint_child = 0, hint_sep = 0;
    if (!vlock::read_lock(lockword(o), &ver)) continue;
    for (;;) {
      const Node* n = node(o);
      const uint64_t nx = n->next.load(kAcq);
      // Lowkeys are immutable and nodes never freed: nx is a whole node. A
      // sibling the parent names has the parent's separator as its lowkey.
      if (nx != 0 && s >= (nx == hint_child ? hint_sep : node(nx)->lowkey)) {
        if (!vlock::validate(lockword(o), ver)) break;
        o = nx;
        hint_child = 0;
        if (!vlock::read_lock(lockword(o), &ver)) break;
        continue;
      }
      if (n->level <= level) {
        *off = o;
        *v = ver;
        return;
      }
      const uint64_t c = child_of(n, s, &hint_child, &hint_sep);
      prefetch_node(node(c));
      locks_->prefetch(c);
      if (!vlock::validate(lockword(o), ver)) break;
      o = c;
      if (!vlock::read_lock(lockword(o), &ver)) break;
    }
  }
}

template <class K>
uint64_t PMasstree<K>::lock_node(const TreeRoot* t, uint64_t s, uint32_t level) {
  uint64_t o = 0, v = 0;
  descend(t, s, level, &o, &v);
  vlock::lock(lockword(o));
  // B-link move right under the lock (lock coupling left to right only).
  for (;;) {
    const uint64_t nx = node(o)->next.load(kAcq);
    if (nx == 0 || s < node(nx)->lowkey) return o;
    vlock::lock(lockword(nx));
    vlock::unlock(lockword(o));
    o = nx;
  }
}

template <class K>
void PMasstree<K>::put(Node* n, uint32_t pos, const Slot& e) {
  const Perm p{n->perm.load(kRlx)};
  uint32_t sl = 0;
  const Perm q = p.inserted(pos, &sl);
  // The slot is free (outside the permutation): readers that see it fail
  // their version check; a crash before the NAW leaves it unreferenced.
  pm::store(&n->keys[sl], e.slice);
  pm::store(&n->vals[sl], e.val);
  pm::flush(&n->keys[sl], 8, {"p-masstree.insert.slot"});
  pm::flush(&n->vals[sl], 8, {"p-masstree.insert.slot"});
  if constexpr (!kInt<K>) {
    if (n->keylen[sl].load(kRlx) != e.keylen) {
      pm::store(&n->keylen[sl], e.keylen);
      pm::flush(&n->keylen[sl], 1, {"p-masstree.insert.slot"});
    }
  }
  pm::fence({"p-masstree.insert.slot"});
  pm::naw(&n->perm, q.x, {"p-masstree.insert.perm"});
}

template <class K>
Status PMasstree<K>::split(const TreeRoot* t, uint64_t off, uint32_t pos, const Slot& e) {
  pm::SmoTimer smo_timer;  // the SMO's wall time, when one is counted (pm/counters.h)
  Node* n = node(off);
  const Perm p{n->perm.load(kRlx)};
  const uint32_t level = n->level;
  Slot a[kWidth + 1];
  for (uint32_t i = 0, q = 0; i <= kWidth; ++i) {
    if (i == pos) {
      a[i] = e;
      continue;
    }
    const uint32_t sl = p.slot(q++);
    a[i] = {n->keys[sl].load(kRlx), n->keylen[sl].load(kRlx), n->vals[sl].load(kRlx)};
  }
  // Border: split between two different slices, nearest the middle (at most
  // 10 entries share a slice: keylen 0..8 and one long entry). Interior: the
  // middle key moves up.
  uint32_t m = (kWidth + 1) / 2;
  if (level == 0) {
    for (uint32_t dlt = 0; dlt < kWidth; ++dlt) {
      if (m + dlt <= kWidth && a[m + dlt - 1].slice != a[m + dlt].slice) {
        m = m + dlt;
        break;
      }
      if (m - dlt >= 1 && a[m - dlt - 1].slice != a[m - dlt].slice) {
        m = m - dlt;
        break;
      }
    }
  }
  const uint64_t sep = a[m].slice;
  uint64_t r = 0;
  if (Status s = new_node(level, sep, &r); !s.ok()) return s;
  Node* rn = node(r);
  const uint32_t first = level == 0 ? m : m + 1;
  if (level > 0) pm::store(&rn->leftmost, a[m].val);
  for (uint32_t j = first; j <= kWidth; ++j) {
    const uint32_t sl = j - first;
    pm::store(&rn->keys[sl], a[j].slice);
    pm::store(&rn->vals[sl], a[j].val);
    if constexpr (!kInt<K>) pm::store(&rn->keylen[sl], a[j].keylen);
  }
  pm::store(&rn->perm, Perm::empty().x | (kWidth + 1 - first));
  pm::store(&rn->next, n->next.load(kRlx));
  pm::persist(rn, sizeof(Node), {"p-masstree.split.node"});
  vlock::lock(lockword(r));
  // Commit: R is reachable (and holds the upper entries) from here.
  pm::naw(&n->next, r, {"p-masstree.split.link"});
  pm::naw(&n->perm, p.truncated(pos < m ? m - 1 : m).x, {"p-masstree.split.trim"});
  if (pos < m) put(n, pos, e);
  vlock::unlock(lockword(r));
  vlock::unlock(lockword(off));
  pm::count_smo();
  insert_separator(t, level + 1, sep, r);
  return Status::Ok();
}

template <class K>
void PMasstree<K>::insert_separator(const TreeRoot* t, uint32_t level, uint64_t sep,
                                    uint64_t child) {
  for (;;) {
    const uint64_t ro = t->root.load(kAcq);
    if (node(ro)->level < level) {
      // Root split: only the holder of the root's lock replaces the root.
      vlock::lock(lockword(ro));
      if (t->root.load(kAcq) != ro) {
        vlock::unlock(lockword(ro));
        continue;
      }
      uint64_t p = 0;
      if (!new_node(level, 0, &p).ok()) {
        // Pool full: the separator stays missing; the B-link keeps every
        // key reachable (the insert itself is complete).
        vlock::unlock(lockword(ro));
        return;
      }
      Node* pn = node(p);
      pm::store(&pn->leftmost, ro);
      pm::store(&pn->keys[0], sep);
      pm::store(&pn->vals[0], child);
      pm::store(&pn->perm, Perm::empty().x | 1);
      // The new root is durable before the root word names it.
      pm::persist(pn, sizeof(Node), {"p-masstree.root.node"});
      pm::naw(&const_cast<TreeRoot*>(t)->root, p, {"p-masstree.root.publish"});
      vlock::unlock(lockword(ro));
      return;
    }
    const uint64_t o = lock_node(t, sep, level);
    Node* n = node(o);
    const Perm pp{n->perm.load(kRlx)};
    uint32_t pos = 0;
    bool dup = false;
    for (; pos < pp.size(); ++pos) {
      const uint64_t k = n->keys[pp.slot(pos)].load(kRlx);
      if (k == sep) dup = true;
      if (k >= sep) break;
    }
    if (dup) {  // cannot happen: lowkeys of a level are distinct
      vlock::unlock(lockword(o));
      return;
    }
    const Slot e{sep, 8, child};
    if (pp.size() < kWidth) {
      put(n, pos, e);
      vlock::unlock(lockword(o));
    } else if (!split(t, o, pos, e).ok()) {
      vlock::unlock(lockword(o));  // pool full: the separator stays missing
    }
    return;
  }
}

template <class K>
Status PMasstree<K>::make_layer(Node* n, uint32_t slot, unsigned d) {
  if constexpr (kInt<K>) {
    return Status::Ok();
  } else {
    const uint64_t recoff = n->vals[slot].load(kRlx);
    const auto* rec = this->pool_->template ptr<const SuffixRecord>(recoff);
    const std::string_view kk = rec->key();
    const uint64_t s2 = slice_of(kk, d + 1);
    const uint8_t l2 = keylen_of(kk, d + 1);
    pm::Allocator& alloc = this->pool_->allocator();
    uint64_t lo = 0, hdr = 0;
    if (Status s = new_node(0, 0, &lo); !s.ok()) return s;
    if (Status s = alloc.allocate(sizeof(TreeRoot), &hdr); !s.ok()) {
      alloc.free(lo);
      return s;
    }
    Node* ln = node(lo);
    pm::store(&ln->keys[0], s2);
    pm::store(&ln->keylen[0], l2);
    pm::store(&ln->vals[0], l2 == kLong ? recoff : rec->value.load(kRlx));
    pm::store(&ln->perm, Perm::empty().x | 1);
    pm::persist(ln, sizeof(Node), {"p-masstree.layer.node"});
    TreeRoot* h = tree(hdr);
    pm::fill(h, 0, sizeof(TreeRoot));
    pm::store(&h->magic, kLayerMagic);
    pm::store(&h->root, lo);
    pm::persist(h, sizeof(TreeRoot), {"p-masstree.layer.header"});
    pm::naw(&n->vals[slot], hdr, {"p-masstree.layer.link"});
    if (l2 != kLong) retire(recoff);
    return Status::Ok();
  }
}

// ---------------------------------------------------------------- operations

template <class K>
std::optional<Value> PMasstree<K>::lookup(K key) {
  if (!key_fits(key)) return std::nullopt;
  const TreeRoot* t = root_;
  unsigned d = 0;
  for (;;) {
    const uint64_t s = slice_of(key, d);
    const uint8_t lk = keylen_of(key, d);
    uint64_t o = 0, v = 0;
    descend(t, s, 0, &o, &v);
    const Node* n = node(o);
    const Found f = find(n, Perm{n->perm.load(kAcq)}, s, lk);
    const uint64_t val = f.found ? n->vals[f.slot].load(kAcq) : 0;
    if (!vlock::validate(lockword(o), v)) continue;
    if (!f.found) return std::nullopt;
    if constexpr (kInt<K>) {
      return val;
    } else {
      if (lk <= 8) return val;
      if (tree(val)->magic == kLayerMagic) {
        t = tree(val);
        ++d;
        continue;
      }
      const auto* rec = this->pool_->template ptr<const SuffixRecord>(val);
      const bool eq = rec->key() == key;
      const uint64_t x = rec->value.load(kAcq);
      if (!vlock::validate(lockword(o), v)) continue;
      if (!eq) return std::nullopt;
      return x;
    }
  }
}

template <class K>
typename PMasstree<K>::Locked PMasstree<K>::lock_key(K key) {
  const TreeRoot* t = root_;
  for (unsigned d = 0;; ++d) {
    const uint64_t s = slice_of(key, d);
    const uint8_t lk = keylen_of(key, d);
    const uint64_t o = lock_node(t, s, 0);
    Node* n = node(o);
    const Perm p{n->perm.load(kRlx)};
    const Found f = find(n, p, s, lk);
    Locked l{t, d, o, p, f, s, lk, 0};
    if constexpr (!kInt<K>) {
      if (f.found && lk == kLong) {
        const uint64_t b = n->vals[f.slot].load(kRlx);
        if (tree(b)->magic == kLayerMagic) {
          vlock::unlock(lockword(o));
          t = tree(b);
          continue;
        }
        l.rec = b;
      }
    }
    return l;
  }
}

template <class K>
Status PMasstree<K>::insert(K key, Value value) {
  if (Status s = check_key(kName, key); !s.ok()) return s;
  for (;;) {
    const Locked l = lock_key(key);
    Node* n = node(l.off);
    if (l.f.found) {
      if constexpr (!kInt<K>) {
        if (l.rec != 0 && this->pool_->template ptr<const SuffixRecord>(l.rec)->key() != key) {
          // Two keys share this slice and continue: a new layer takes the
          // existing one; the next round descends into it.
          const Status st = make_layer(n, l.f.slot, l.d);
          vlock::unlock(lockword(l.off));
          if (!st.ok()) return st;
          continue;
        }
      }
      vlock::unlock(lockword(l.off));
      return Status::AlreadyExists("key exists");
    }
    Slot e{l.slice, l.keylen, value};
    if constexpr (!kInt<K>) {
      if (l.keylen == kLong) {
        uint64_t r = 0;
        if (Status st = this->pool_->allocator().allocate(
                static_cast<uint32_t>(offsetof(SuffixRecord, bytes) + key.size()), &r);
            !st.ok()) {
          vlock::unlock(lockword(l.off));
          return st;
        }
        auto* rec = this->pool_->template ptr<SuffixRecord>(r);
        pm::store(&rec->magic, kSuffixMagic);
        pm::store(&rec->value, value);
        pm::store(&rec->len, static_cast<uint8_t>(key.size()));
        pm::copy(rec->bytes, key.data(), key.size());
        pm::persist(rec, offsetof(SuffixRecord, bytes) + key.size(), {"p-masstree.suffix"});
        e.val = r;
      }
    }
    if (l.p.size() < kWidth) {
      put(n, l.f.pos, e);
      vlock::unlock(lockword(l.off));
      return Status::Ok();
    }
    const Status st = split(l.t, l.off, l.f.pos, e);
    if (!st.ok()) {
      vlock::unlock(lockword(l.off));
      if (e.keylen == kLong) this->pool_->allocator().free(e.val);  // never published
    }
    return st;
  }
}

template <class K>
bool PMasstree<K>::holds(const Locked& l, K key) const {
  if constexpr (!kInt<K>) {
    if (l.rec != 0) return this->pool_->template ptr<const SuffixRecord>(l.rec)->key() == key;
  }
  return l.f.found;
}

template <class K>
Status PMasstree<K>::update(K key, Value value) {
  if (Status s = check_key(kName, key); !s.ok()) return s;
  const Locked l = lock_key(key);
  Node* n = node(l.off);
  Status st = Status::Ok();
  if (!holds(l, key)) {
    st = Status::NotFound("no such key");
  } else if (l.rec != 0) {
    pm::naw(&this->pool_->template ptr<SuffixRecord>(l.rec)->value, value, {"p-masstree.update"});
  } else {
    pm::naw(&n->vals[l.f.slot], value, {"p-masstree.update"});
  }
  vlock::unlock(lockword(l.off));
  return st;
}

template <class K>
Status PMasstree<K>::remove(K key) {
  if (Status s = check_key(kName, key); !s.ok()) return s;
  const Locked l = lock_key(key);
  if (!holds(l, key)) {
    vlock::unlock(lockword(l.off));
    return Status::NotFound("no such key");
  }
  pm::naw(&node(l.off)->perm, l.p.removed(l.f.pos).x, {"p-masstree.remove.perm"});
  vlock::unlock(lockword(l.off));
  if (l.rec != 0) retire(l.rec);
  return Status::Ok();
}

template <class K>
bool PMasstree<K>::snapshot(uint64_t off, std::vector<Slot>* e, uint64_t* next) const {
  uint64_t v = 0;
  if (!vlock::read_lock(lockword(off), &v)) return false;
  const Node* n = node(off);
  const Perm p{n->perm.load(kAcq)};
  const uint32_t cnt = std::min(p.size(), kWidth);
  e->clear();
  for (uint32_t pos = 0; pos < cnt; ++pos) {
    const uint32_t sl = p.slot(pos);
    e->push_back({n->keys[sl].load(kAcq), kInt<K> ? uint8_t{8} : n->keylen[sl].load(kAcq),
                  n->vals[sl].load(kAcq)});
  }
  *next = n->next.load(kAcq);
  return vlock::validate(lockword(off), v);
}

template <class K>
bool PMasstree<K>::scan_tree(const TreeRoot* t, unsigned d, const K* start, std::string* prefix,
                             size_t count, std::vector<std::pair<Owned, Value>>* out) const {
  const uint64_t s0 = start != nullptr ? slice_of(*start, d) : 0;
  const uint8_t l0 = start != nullptr ? keylen_of(*start, d) : 0;
  uint64_t cs = s0;
  uint8_t cl = l0;
  bool incl = true;
  uint64_t o = 0, v = 0;
  descend(t, s0, 0, &o, &v);
  std::vector<Slot> es;
  es.reserve(kWidth);
  for (;;) {
    uint64_t nx = 0;
    while (!snapshot(o, &es, &nx)) {
    }
    for (const Slot& e : es) {
      if (entry_less(e.slice, e.keylen, cs, cl) || (e.slice == cs && e.keylen == cl && !incl)) {
        continue;
      }
      if (out->size() >= count) return false;
      if constexpr (kInt<K>) {
        out->emplace_back(e.slice, e.val);
      } else {
        const bool at = start != nullptr && e.slice == s0 && e.keylen == l0;
        if (e.keylen <= 8) {
          std::string k = *prefix;
          append_slice(&k, e.slice, e.keylen);
          out->emplace_back(std::move(k), e.val);
        } else if (tree(e.val)->magic == kLayerMagic) {
          append_slice(prefix, e.slice, 8);
          const bool more = scan_tree(tree(e.val), d + 1, at ? start : nullptr, prefix, count, out);
          prefix->resize(size_t{8} * d);
          if (!more) return false;
        } else {
          const auto* rec = this->pool_->template ptr<const SuffixRecord>(e.val);
          if (!at || rec->key() >= *start) {
            out->emplace_back(std::string(rec->key()), rec->value.load(kAcq));
          }
        }
      }
      cs = e.slice;
      cl = e.keylen;
      incl = false;
    }
    if (nx == 0) return true;
    o = nx;
  }
}

template <class K>
size_t PMasstree<K>::scan(K start, size_t count, std::vector<std::pair<Owned, Value>>* out) {
  out->clear();
  if (count == 0) return 0;
  std::string prefix;
  scan_tree(root_, 0, &start, &prefix, count, out);
  return out->size();
}

template <class K>
std::optional<std::pair<OwnedKey<K>, Value>> PMasstree<K>::last_less(const TreeRoot* t, unsigned d,
                                                                     const K* bound,
                                                                     std::string* prefix) const {
  bool bounded = bound != nullptr;
  const uint64_t s0 = bounded ? slice_of(*bound, d) : std::numeric_limits<uint64_t>::max();
  const uint8_t l0 = bounded ? keylen_of(*bound, d) : kLong;
  uint64_t target = s0;
  std::vector<Slot> es;
  es.reserve(kWidth);
  for (;;) {
    uint64_t o = 0, v = 0;
    descend(t, target, 0, &o, &v);
    uint64_t nx = 0;
    for (;;) {
      while (!snapshot(o, &es, &nx)) {
      }
      if (nx != 0 && node(nx)->lowkey <= target) {
        o = nx;  // split since the descent: the entries up to target moved right
        continue;
      }
      break;
    }
    for (auto it = es.rbegin(); it != es.rend(); ++it) {
      const Slot& e = *it;
      if (bounded && entry_less(s0, l0, e.slice, e.keylen)) continue;
      const bool at = bounded && e.slice == s0 && e.keylen == l0;
      if constexpr (kInt<K>) {
        if (at) continue;
        return std::make_pair(e.slice, e.val);
      } else {
        if (e.keylen <= 8) {
          if (at) continue;
          std::string k = *prefix;
          append_slice(&k, e.slice, e.keylen);
          return std::make_pair(std::move(k), e.val);
        }
        if (tree(e.val)->magic == kLayerMagic) {
          append_slice(prefix, e.slice, 8);
          auto r = last_less(tree(e.val), d + 1, at ? bound : nullptr, prefix);
          prefix->resize(size_t{8} * d);
          if (r) return r;
          continue;
        }
        const auto* rec = this->pool_->template ptr<const SuffixRecord>(e.val);
        if (at && !(rec->key() < *bound)) continue;
        return std::make_pair(std::string(rec->key()), rec->value.load(kAcq));
      }
    }
    const uint64_t low = node(o)->lowkey;
    if (low == 0) return std::nullopt;
    // Every entry left of this node is below its lowkey, hence below bound.
    target = low - 1;
    bounded = false;
  }
}

template <class K>
std::optional<std::pair<OwnedKey<K>, Value>> PMasstree<K>::find_last_less_than(K key) {
  std::string prefix;
  return last_less(root_, 0, &key, &prefix);
}

// ---------------------------------------------------------------- create, recover

template <class K>
Status PMasstree<K>::create() {
  locks_ = std::make_unique<LockTable>(this->pool_->size(), kNodeBytes);
  pm::Allocator& alloc = this->pool_->allocator();
  uint64_t ro = 0;
  if (Status s = allocate_root_object(alloc, sizeof(TreeRoot), &ro); !s.ok()) return s;
  uint64_t leaf = 0;
  if (Status s = new_node(0, 0, &leaf); !s.ok()) {
    alloc.free(ro);
    return s;
  }
  // Crash argument: leaf and root object are persisted before Pool::set_root
  // (a NAW) publishes them; a crash earlier leaves a pool without a root,
  // whose blocks the next create reclaims (allocate_root_object).
  // The leaf's flush is ordered by the root object's fence below.
  pm::flush(node(leaf), sizeof(Node), {"p-masstree.create.leaf"});
  root_ = tree(ro);
  pm::fill(root_, 0, sizeof(TreeRoot));
  pm::store(&root_->magic, kRootMagic);
  pm::store(&root_->root, leaf);
  pm::persist(root_, sizeof(TreeRoot), {"p-masstree.create.root_object"});
  this->pool_->set_root(ro);
  return Status::Ok();
}

namespace {
Status corrupt(const std::string& what, uint64_t off) {
  return Status::Corruption(std::string(kName) + ": " + what + " at " + hex(off));
}
}  // namespace

// Recovery, pass 1 (inside reclaim_unreachable, nothing written): every
// level of every layer's tree is walked along its sibling chain from its
// leftmost node (the root, then each leftmost child), so a node whose
// separator a crash kept out of its parent is reached too. Each node is
// checked (a block of >= 512 B, magic, level, valid permutation, lowkeys
// strictly increasing along the chain) before it is read. Border entries
// whose slice is >= the next node's lowkey are the leftovers of a crash
// between a split's link and its trim: skipped (their copies in the right
// node are the live ones). Suffix records and layer headers are marked and
// checked; live keys are counted.
template <class K>
Status PMasstree<K>::mark_tree(pm::Allocator& a, uint64_t tree_off, unsigned d, uint64_t* keys) {
  if (d >= kMaxDepth) return corrupt("layer deeper than 32", tree_off);
  if (d > 0) {
    if (Status s = a.mark_reachable(tree_off); !s.ok()) return s;
    if (a.block_size(tree_off) < sizeof(TreeRoot)) return corrupt("small layer header", tree_off);
  }
  const TreeRoot* t = tree(tree_off);
  if (t->magic != (d == 0 ? kRootMagic : kLayerMagic)) return corrupt("bad tree magic", tree_off);
  auto check_node = [&](uint64_t off, uint32_t level, bool any_level) -> Status {
    if (off == 0 || off % kNodeBytes != 0) return corrupt("bad node offset", off);
    if (Status s = a.mark_reachable(off); !s.ok()) return s;
    if (a.block_size(off) < kNodeBytes) return corrupt("node block too small", off);
    const Node* n = node(off);
    if (n->magic != kNodeMagic) return corrupt("bad node magic", off);
    if (!any_level && n->level != level) return corrupt("wrong node level", off);
    if (n->level >= 64) return corrupt("node level out of range", off);
    if (!Perm{n->perm.load(kRlx)}.valid()) return corrupt("invalid permutation", off);
    if constexpr (kInt<K>) {
      // new_node sets every keylen byte to 8 and integer inserts never write
      // one (put), so a free slot's byte is 8 too: an insert into it must
      // not publish a damaged keylen (found by the pool fuzzer).
      for (const auto& kl : n->keylen) {
        if (kl.load(kRlx) != 8) return corrupt("integer node with a keylen != 8", off);
      }
    }
    return Status::Ok();
  };
  uint64_t start = t->root.load(kRlx);
  if (Status s = check_node(start, 0, true); !s.ok()) return s;
  for (uint32_t level = node(start)->level;; --level) {
    if (node(start)->lowkey != 0) return corrupt("leftmost node with a lowkey", start);
    for (uint64_t o = start; o != 0;) {
      const Node* n = node(o);
      const uint64_t nx = n->next.load(kRlx);
      uint64_t hi = std::numeric_limits<uint64_t>::max();
      bool has_hi = false;
      if (nx != 0) {
        if (Status s = check_node(nx, level, false); !s.ok()) return s;
        if (node(nx)->lowkey <= n->lowkey) return corrupt("sibling lowkeys not increasing", nx);
        hi = node(nx)->lowkey;
        has_hi = true;
      }
      const Perm p{n->perm.load(kRlx)};
      for (uint32_t pos = 0; level == 0 && pos < p.size(); ++pos) {
        const uint32_t sl = p.slot(pos);
        const uint64_t ks = n->keys[sl].load(kRlx);
        if (has_hi && ks >= hi) continue;  // moved by a split; trimmed below
        if (ks < n->lowkey) return corrupt("slice below the node's lowkey", o);
        const uint8_t kl = n->keylen[sl].load(kRlx);
        if constexpr (kInt<K>) {
          if (kl != 8) return corrupt("integer entry with keylen != 8", o);
        } else {
          if (kl > kLong) return corrupt("bad keylen", o);
          // A key of kl < 8 bytes here has a slice zero-padded past them (a
          // lookup builds its slice so, and would miss a key a scan returns).
          if (kl < 8 && (ks & (~uint64_t{0} >> (8 * kl))) != 0) {
            return corrupt("slice has nonzero bytes past its key length", o);
          }
          if (kl == kLong) {
            const uint64_t b = n->vals[sl].load(kRlx);
            if (b == 0 || b % 64 != 0 || !this->pool_->contains(b, 64)) {
              return corrupt("bad suffix or layer offset", o);
            }
            if (tree(b)->magic == kLayerMagic) {
              if (Status s = mark_tree(a, b, d + 1, keys); !s.ok()) return s;
              continue;
            }
            if (Status s = a.mark_reachable(b); !s.ok()) return s;
            const auto* rec = this->pool_->template ptr<const SuffixRecord>(b);
            if (rec->magic != kSuffixMagic || rec->len <= 8 * (d + 1) ||
                offsetof(SuffixRecord, bytes) + rec->len > a.block_size(b)) {
              return corrupt("bad suffix record", b);
            }
          }
        }
        ++*keys;
      }
      o = nx;
    }
    if (level == 0) break;
    const uint64_t lm = node(start)->leftmost.load(kRlx);
    if (Status s = check_node(lm, level - 1, false); !s.ok()) return s;
    start = lm;
  }
  return Status::Ok();
}

// Recovery, pass 2 (after the reachability pass): trims, by one NAW of the
// permutation each, the entries a crash between a split's link and its trim
// left behind (slices >= the next node's lowkey), in every node of every
// layer. Idempotent: a crash during it leaves entries pass 1 skips again.
template <class K>
void PMasstree<K>::trim_tree(const TreeRoot* t) {
  uint64_t start = t->root.load(kRlx);
  for (;;) {
    for (uint64_t o = start; o != 0;) {
      Node* n = node(o);
      const uint64_t nx = n->next.load(kRlx);
      const Perm p{n->perm.load(kRlx)};
      uint32_t live = p.size();
      if (nx != 0) {
        const uint64_t hi = node(nx)->lowkey;
        while (live > 0 && n->keys[p.slot(live - 1)].load(kRlx) >= hi) --live;
      }
      if (live != p.size()) pm::naw(&n->perm, p.truncated(live).x, {"p-masstree.recover.trim"});
      if constexpr (!kInt<K>) {
        for (uint32_t pos = 0; n->level == 0 && pos < live; ++pos) {
          const uint32_t sl = p.slot(pos);
          if (n->keylen[sl].load(kRlx) != kLong) continue;
          const TreeRoot* l = tree(n->vals[sl].load(kRlx));
          if (l->magic == kLayerMagic) trim_tree(l);
        }
      }
      o = nx;
    }
    if (node(start)->level == 0) return;
    start = node(start)->leftmost.load(kRlx);
  }
}

template <class K>
Status PMasstree<K>::recover() {
  locks_ = std::make_unique<LockTable>(this->pool_->size(), kNodeBytes);
  if (Status s = this->template open_root_object<TreeRoot>(kName, kRootMagic, &root_); !s.ok()) {
    return s;
  }
  const uint64_t ro = this->pool_->root();
  if (Status s = this->reclaim_unreachable(
          kName, [&](pm::Allocator& a, uint64_t* keys) { return mark_tree(a, ro, 0, keys); });
      !s.ok()) {
    return s;
  }
  trim_tree(root_);
  return Status::Ok();
}

// ---------------------------------------------------------------- verify, info

template <class K>
Status PMasstree<K>::verify_tree(const TreeRoot* t, unsigned d, std::string* prefix,
                                 VerifyReport* r) const {
  const uint64_t max_nodes = this->pool_->size() / kNodeBytes;
  auto node_ok = [&](uint64_t off) {
    return off != 0 && off % kNodeBytes == 0 && this->pool_->contains(off, kNodeBytes) &&
           node(off)->magic == kNodeMagic;
  };
  uint64_t start = t->root.load(kAcq);
  if (!node_ok(start)) return corrupt("bad root node", start);
  const uint32_t top = node(start)->level;
  if (d == 0) r->height = top + 1;
  for (uint32_t level = top;; --level) {
    if (node(start)->lowkey != 0) return corrupt("leftmost node with a lowkey", start);
    uint64_t seen = 0;
    for (uint64_t o = start; o != 0;) {
      if (++seen > max_nodes) return corrupt("sibling cycle", start);
      const Node* n = node(o);
      if (n->level != level) return corrupt("wrong level in chain", o);
      const Perm p{n->perm.load(kAcq)};
      if (!p.valid()) return corrupt("invalid permutation", o);
      const uint64_t nx = n->next.load(kAcq);
      if (nx != 0 && (!node_ok(nx) || node(nx)->lowkey <= n->lowkey)) {
        return corrupt("bad sibling", o);
      }
      uint64_t ps = 0;
      uint8_t pl = 0;
      for (uint32_t pos = 0; pos < p.size(); ++pos) {
        const uint32_t sl = p.slot(pos);
        const uint64_t ks = n->keys[sl].load(kAcq);
        const uint8_t kl = level == 0 ? n->keylen[sl].load(kAcq) : uint8_t{8};
        if (ks < n->lowkey || (nx != 0 && ks >= node(nx)->lowkey)) {
          return corrupt("slice outside the node's key range", o);
        }
        if (pos > 0 && !entry_less(ps, pl, ks, kl)) return corrupt("entries out of order", o);
        if (level > 0 && pos > 0 && ps == ks) return corrupt("equal separators", o);
        ps = ks;
        pl = kl;
        const uint64_t val = n->vals[sl].load(kAcq);
        if (level > 0) {
          if (!node_ok(val) || node(val)->level != level - 1 || node(val)->lowkey != ks) {
            return corrupt("separator does not bound its child", o);
          }
          continue;
        }
        if constexpr (kInt<K>) {
          if (kl != 8) return corrupt("integer entry with keylen != 8", o);
        } else {
          if (kl > kLong) return corrupt("bad keylen", o);
          // A key of kl < 8 bytes here has a slice zero-padded past them (a
          // lookup builds its slice so, and would miss a key a scan returns).
          if (kl < 8 && (ks & (~uint64_t{0} >> (8 * kl))) != 0) {
            return corrupt("slice has nonzero bytes past its key length", o);
          }
          if (kl == kLong) {
            if (val == 0 || val % 64 != 0 || !this->pool_->contains(val, 64)) {
              return corrupt("bad suffix or layer offset", o);
            }
            if (tree(val)->magic == kLayerMagic) {
              if (d + 1 >= kMaxDepth) return corrupt("layer too deep", val);
              append_slice(prefix, ks, 8);
              r->pm_bytes += this->pool_->allocator().block_size(val);
              Status s = verify_tree(tree(val), d + 1, prefix, r);
              prefix->resize(size_t{8} * d);
              if (!s.ok()) return s;
              continue;
            }
            const auto* rec = this->pool_->template ptr<const SuffixRecord>(val);
            if (rec->magic != kSuffixMagic || rec->len <= 8 * (d + 1) ||
                rec->key().substr(0, size_t{8} * d) != *prefix || slice_of(rec->key(), d) != ks) {
              return corrupt("bad suffix record", val);
            }
            r->pm_bytes += this->pool_->allocator().block_size(val);
          }
        }
        ++r->keys;
      }
      r->pm_bytes += kNodeBytes;
      if (level > 0) {
        ++r->inner_nodes;
        const uint64_t lm = n->leftmost.load(kAcq);
        if (!node_ok(lm) || node(lm)->level != level - 1 || node(lm)->lowkey != n->lowkey) {
          return corrupt("leftmost child does not start the node's range", o);
        }
      } else {
        ++r->leaves;
      }
      o = nx;
    }
    if (level == 0) return Status::Ok();
    start = node(start)->leftmost.load(kAcq);
  }
}

template <class K>
Status PMasstree<K>::verify(VerifyReport* report) const {
  VerifyReport r;
  std::string prefix;
  if (Status s = verify_tree(root_, 0, &prefix, &r); !s.ok()) return s;
  *report = r;
  return Status::Ok();
}

template <class K>
size_t PMasstree<K>::layer_count() const {
  size_t n = 1;
  if constexpr (!kInt<K>) {
    std::vector<const TreeRoot*> todo{root_};
    n = 0;
    while (!todo.empty()) {
      const TreeRoot* t = todo.back();
      todo.pop_back();
      ++n;
      uint64_t o = t->root.load(kAcq);
      while (node(o)->level > 0) o = node(o)->leftmost.load(kAcq);
      for (; o != 0; o = node(o)->next.load(kAcq)) {
        const Node* nd = node(o);
        const Perm p{nd->perm.load(kAcq)};
        for (uint32_t pos = 0; pos < p.size(); ++pos) {
          const uint32_t sl = p.slot(pos);
          if (nd->keylen[sl].load(kAcq) != kLong) continue;
          const TreeRoot* l = tree(nd->vals[sl].load(kAcq));
          if (l->magic == kLayerMagic) todo.push_back(l);
        }
      }
    }
  }
  return n;
}

template <class K>
IndexInfo PMasstree<K>::info() const {
  return this->persistent_info(kName, kPMasstreeDescription,
                               {.ordered = true,
                                .persistent = true,
                                .thread_safe = true,
                                .string_keys = true,
                                .placement = Placement::kPmOnly},
                               kNodeBytes, locks_ ? locks_->dram_bytes() : 0);
}

template <class K>
std::vector<std::pair<std::string, std::string>> PMasstree<K>::ablation_notes() const {
  // String keys only (integer keys never reach these sites). Each fence is
  // followed, before the store that publishes what it persists, by another
  // fence of the same thread, which orders the earlier flushes too; the
  // crash lab therefore cannot catch its removal. It stays so that each
  // step is durable on its own, not by the accident of the next step.
  return {
      {"p-masstree.suffix/fence",
       "redundant: the suffix record is published by the permutation NAW of put() or by the "
       "link NAW of a split, and put()'s p-masstree.insert.slot fence or the split's "
       "p-masstree.split.node persist fences first, ordering the record's flushes"},
      {"p-masstree.layer.node/fence",
       "redundant: the layer header's persist (p-masstree.layer.header) fences before the NAW "
       "that links the layer, ordering the new layer node's flush too"},
      {"p-masstree.layer.link/fence",
       "redundant for content: the link replaces a suffix record by a layer that holds the same "
       "key and value (the old record is retired, not freed, until close), so a crash either "
       "way recovers the same content; the insert that made the layer then fences "
       "(p-masstree.insert.slot) before its own permutation NAW, which orders the link's "
       "flush before the new key is published"},
  };
}

template class PMasstree<uint64_t>;
template class PMasstree<std::string_view>;

}  // namespace masstree

Status make_p_masstree(const IndexOptions& options, std::unique_ptr<Index<uint64_t>>* out) {
  using T = masstree::PMasstree<uint64_t>;
  return open_persistent_index<T>(
      options, pool_layout(masstree::kName, KeyType::kInteger), [](T& t) { return t.create(); },
      [](T& t) { return t.recover(); }, out);
}

Status make_p_masstree_string(const IndexOptions& options,
                              std::unique_ptr<Index<std::string_view>>* out) {
  using T = masstree::PMasstree<std::string_view>;
  return open_persistent_index<T>(
      options, pool_layout(masstree::kName, KeyType::kString), [](T& t) { return t.create(); },
      [](T& t) { return t.recover(); }, out);
}

}  // namespace nvindex
