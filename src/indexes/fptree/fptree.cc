// fptree: FP-Tree (Oukid et al., SIGMOD'16). See fptree.h for the persistent
// layout and the concurrency scheme. Crash model: DESIGN.md §6 (a line holds
// a prefix, in program order, of the stores made to it since it was last
// durable; an aligned 8-byte store is never torn; a line is durable after a
// flush of it and a fence). Every entry slot lies in one line; the bitmap,
// the next pointer, the lock byte and the fingerprints share line 0.
#include "indexes/fptree/fptree.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <source_location>
#include <string>
#include <unordered_set>

#include "indexes/common/factory.h"
#include "indexes/common/fingerprint.h"
#include "indexes/common/prefetch.h"
#include "nvindex/pm/persist.h"

namespace nvindex {
namespace fptree {
namespace {

constexpr auto kAcq = std::memory_order_acquire;
constexpr auto kRlx = std::memory_order_relaxed;
constexpr auto kRel = std::memory_order_release;

uintptr_t line_of(const void* p) { return reinterpret_cast<uintptr_t>(p) / pm::kLineSize; }

/// The pool layout of a tree over keys K: "fptree" or "fptree:string".
template <class K>
std::string layout() {
  return pool_layout(kLayout, key_type_of<K>);
}

}  // namespace

bool Layout::of(uint32_t node_size, Layout* out) {
  if (node_size != 256 && node_size != 512 && node_size != 768 && node_size != 1024) return false;
  Layout l;
  l.node_size = node_size;
  l.block = std::bit_ceil(node_size);
  // The largest C whose header (bitmap, next, lock, C fingerprints) fits in
  // line 0 and whose entries, from the header rounded up to 16 B, fit in the
  // leaf.
  for (uint32_t c = kMaxSlots; c > 0; --c) {
    const uint32_t header = kFpOffset + c;
    const uint32_t e = (header + kEntryBytes - 1) / kEntryBytes * kEntryBytes;
    if (header <= pm::kLineSize && e + c * kEntryBytes <= node_size) {
      l.slots = c;
      l.entries_offset = e;
      break;
    }
  }
  *out = l;
  return true;
}

// ---------------------------------------------------------------- basics

template <class K>
FpTreeT<K>::FpTreeT(pm::Pool* pool, double fill) : PersistentIndexOf<K>(pool), fill_(fill) {}

template <class K>
FpTreeT<K>::~FpTreeT() {
  if constexpr (kStringKeys) reclaimer_.free_all(*pool_);
  this->record_close_keys();
}

template <class K>
uint64_t FpTreeT<K>::full_mask() const {
  return (uint64_t{1} << layout_.slots) - 1;
}

// Slots whose fingerprint equals fp (SSE2: 16 fingerprints per compare),
// restricted to the C slots; not yet masked by the bitmap. Under
// ThreadSanitizer a scalar loop of atomic loads (the SIMD load is not an
// atomic access).
template <class K>
uint64_t FpTreeT<K>::match(uint64_t off, uint8_t fp) const {
  uint64_t m = 0;
#if defined(__SANITIZE_THREAD__)
  const Leaf* l = leaf(off);
  for (uint32_t i = 0; i < layout_.slots; ++i) {
    if (l->fp[i].load(kRlx) == fp) m |= uint64_t{1} << i;
  }
#else
  // Loads may read up to 15 bytes past fp[C-1]: still inside the leaf block
  // (the fingerprints end at byte 64 at most, the entries follow); the
  // excess bits are masked off.
  const char* p = reinterpret_cast<const char*>(leaf(off)) + kFpOffset;
  const __m128i needle = _mm_set1_epi8(static_cast<char>(fp));
  for (uint32_t i = 0; i < layout_.slots; i += 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i));
    m |= static_cast<uint64_t>(static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(v, needle))))
         << i;
  }
#endif
  return m & full_mask();
}

// The live slot holding `key` (fingerprint f) in the leaf at `off`, or -1.
// Optimistic readers call it between read_lock and validate; every word is an
// acquire load. String keys: a candidate's record is read only after its
// fingerprint matched (about C/256 false candidates per leaf); its offset
// came from a slot this operation read, so its Guard keeps it from being
// freed.
template <class K>
inline int FpTreeT<K>::find_slot(uint64_t off, K key, uint8_t f) const {
  uint64_t cand = match(off, f) & leaf(off)->bitmap.load(kAcq);
  while (cand != 0) {
    const int i = std::countr_zero(cand);
    cand &= cand - 1;
    const uint64_t w = entry(off, static_cast<uint32_t>(i))->key.load(kAcq);
    if constexpr (kStringKeys) {
      if (key_record(*pool_, w) == key) return i;
    } else {
      if (w == key) return i;
    }
  }
  return -1;
}

template <class K>
inline void FpTreeT<K>::prefetch_leaf(uint64_t off) const {
  versions_->prefetch(off);
  prefetch_bytes(leaf(off), layout_.node_size);
}

// Writer lock of a leaf: its DRAM version word, taken by CAS (vlock::lock;
// why not the PM lock byte: version_lock.h); optimistic readers wait or
// retry while it is held. Nothing about the lock is persisted, so a crash
// never leaves a leaf locked.
template <class K>
void FpTreeT<K>::lock_leaf(uint64_t off) {
  // The leaf's lines and its version word are fetched before the lock's
  // CAS, a full barrier: afterwards every miss would be taken one at a time.
  prefetch_leaf(off);
  vlock::lock(versions_->word(off));  // leaves are never obsolete: true
}

template <class K>
void FpTreeT<K>::unlock_leaf(uint64_t off) {
  vlock::unlock(versions_->word(off));
}

// Locks the leaf covering `key` (InnerTree protocol: find, lock the leaf,
// validate the route, else unlock and retry). Returns its offset.
template <class K>
uint64_t FpTreeT<K>::lock_covering(K key) {
  while (true) {
    const inner::Route r = inner_->find(key);
    lock_leaf(r.leaf);
    if (inner_->validate(r)) return r.leaf;
    unlock_leaf(r.leaf);
  }
}

// Leaf insert (paper §4, insert) of key word `word` (fingerprint f) into the
// free slot `slot` of the locked leaf at `off`. String keys: `word` names a
// key record persisted (flushed and fenced) before this is called, so the
// bitmap store below never publishes a record whose bytes are not durable
// (key_record.h).
//
// Crash argument. 1) The entry (key, value) goes into a slot whose bitmap bit
// is clear: invisible whatever part of it is durable. If the slot is not in
// line 0 it is persisted now, so it is durable before the bitmap bit can be.
// 2) The fingerprint, then the bitmap with the slot's bit set, are stored in
// line 0 and line 0 is persisted once: a durable prefix of line 0 that holds
// the new bitmap also holds the fingerprint stored before it (DESIGN §6), so
// the paper's separate fingerprint persist is not needed. The aligned 8-byte
// bitmap store commits the insert: before it, the old content; after it, the
// new.
template <class K>
void FpTreeT<K>::put_slot(uint64_t off, uint32_t slot, uint64_t word, uint8_t f, Value value,
                          const char* entry_site, const char* commit_site) {
  Leaf* l = leaf(off);
  Entry* e = entry(off, slot);
  pm::store(&e->key, word);
  pm::store(&e->value, value);
  if (line_of(e) != line_of(l)) pm::persist(e, kEntryBytes, {entry_site});
  pm::store<uint8_t>(&l->fp[slot], f);
  pm::store(&l->bitmap, l->bitmap.load(kRlx) | uint64_t{1} << slot);
  pm::persist(&l->bitmap, sizeof(uint64_t), {commit_site});
}

// ---------------------------------------------------------------- create

template <class K>
Status FpTreeT<K>::create(uint32_t node_size) {
  Layout::of(node_size, &layout_);
  versions_ = std::make_unique<LockTable>(pool_->size(), layout_.block);
  lows_ = std::make_unique<LockTable>(pool_->size(), layout_.block);
  inner_ = std::make_unique<inner::InnerTreeT<K>>();
  pm::Allocator& alloc = pool_->allocator();
  uint64_t ro = 0;
  Status s = allocate_root_object(alloc, kRootBytes, &ro);
  if (!s.ok()) return s;
  uint64_t head = 0;
  s = alloc.allocate(layout_.node_size, &head);
  if (!s.ok()) {
    alloc.free(ro);
    return s;
  }
  // Crash argument: the head leaf's line 0 is flushed and the root object
  // persisted (its fence commits both) before Pool::set_root (a NAW)
  // publishes them; a crash earlier leaves a pool with no root, whose blocks
  // the next create reclaims (see above).
  Leaf* l = leaf(head);
  pm::store(&l->bitmap, 0);
  pm::store(&l->sibling, 0);
  pm::store<uint8_t>(&l->lock, 0);
  pm::flush(l, sizeof(uint64_t), {"fptree.create.leaf"});
  root_obj_ = pool_->template ptr<RootObject>(ro);
  pm::store(&root_obj_->magic, kRootMagic);
  pm::store(&root_obj_->node_size, static_cast<uint64_t>(node_size));
  pm::store(&root_obj_->head, head);
  pm::store(&root_obj_->nlogs, static_cast<uint64_t>(kSplitLogs));
  for (auto& r : root_obj_->reserved) pm::store(&r, uint64_t{0});
  for (auto& lg : root_obj_->logs) {
    pm::store(&lg.cur, 0);
    pm::store(&lg.new_leaf, 0);
  }
  pm::persist(root_obj_, kRootBytes, {"fptree.create.root_object"});
  pool_->set_root(ro);
  lows_->word(head).store(0, kRel);
  const LeafRef first{OwnedKey<K>{}, head};
  return inner_->build({&first, 1});
}

// ---------------------------------------------------------------- reads

template <class K>
std::optional<Value> FpTreeT<K>::lookup(K key) {
  const Guard guard(reclaimer_);
  const uint8_t f = fingerprint(key);
  while (true) {
    const inner::Route r = inner_->find(key);
    // The version word and the leaf's lines are fetched in parallel.
    prefetch_leaf(r.leaf);
    uint64_t v = 0;
    if (!vlock::read_lock(versions_->word(r.leaf), &v)) continue;
    const int i = find_slot(r.leaf, key, f);
    const Value val = i >= 0 ? entry(r.leaf, static_cast<uint32_t>(i))->value.load(kAcq) : 0;
    // The leaf snapshot must be consistent, and the leaf must still cover
    // key (a split that moved key right bumps the route's version).
    if (!vlock::validate(versions_->word(r.leaf), v) || !inner_->validate(r)) continue;
    if (i >= 0) return val;
    return std::nullopt;
  }
}

template <class K>
size_t FpTreeT<K>::scan(K start, size_t count, std::vector<std::pair<OwnedKey<K>, Value>>* out) {
  out->clear();
  if (count == 0) return 0;
  const Guard guard(reclaimer_);
  // Leaves are never merged, so a leaf's low bound never rises: the leaf a
  // (possibly stale) route names holds no key >= start that lies left of it,
  // and the next pointers read under each leaf's validated version reach
  // every later key exactly once (a split after our read of a leaf moves
  // keys into a leaf that our validated next pointer skips, keys we have
  // already returned).
  uint64_t off = inner_->find(start).leaf;
  OwnedKey<K> cursor(start);  // keys < cursor are returned already
  std::vector<std::pair<OwnedKey<K>, Value>> buf;
  while (true) {
    uint64_t v = 0, next = 0;
    if (!vlock::read_lock(versions_->word(off), &v)) continue;
    buf.clear();
    const Leaf* l = leaf(off);
    uint64_t live = l->bitmap.load(kAcq) & full_mask();
    while (live != 0) {
      const uint32_t i = static_cast<uint32_t>(std::countr_zero(live));
      live &= live - 1;
      const Entry* e = entry(off, i);
      const K k = key_of(e->key.load(kAcq));
      if (k >= cursor) buf.emplace_back(OwnedKey<K>(k), e->value.load(kAcq));
    }
    next = l->sibling.load(kAcq);
    if (!vlock::validate(versions_->word(off), v)) continue;
    std::sort(buf.begin(), buf.end());
    for (const auto& kv : buf) {
      out->push_back(kv);
      if (out->size() == count) return count;
    }
    if (!buf.empty()) {
      if (!key_after<K>(buf.back().first, &cursor)) return out->size();
    }
    if (next == 0) return out->size();
    off = next;
  }
}

template <class K>
std::optional<std::pair<OwnedKey<K>, Value>> FpTreeT<K>::find_last_less_than(K key) {
  // target: the largest key sought (keys <= target).
  OwnedKey<K> target{};
  if (!key_before<K>(key, &target)) return std::nullopt;
  const Guard guard(reclaimer_);
  while (true) {
    const inner::Route r = inner_->find(target);
    uint64_t v = 0;
    if (!vlock::read_lock(versions_->word(r.leaf), &v)) continue;
    const Leaf* l = leaf(r.leaf);
    bool found = false;
    K bk{};
    uint64_t bv = 0;
    uint64_t live = l->bitmap.load(kAcq) & full_mask();
    while (live != 0) {
      const uint32_t i = static_cast<uint32_t>(std::countr_zero(live));
      live &= live - 1;
      const Entry* e = entry(r.leaf, i);
      const K k = key_of(e->key.load(kAcq));
      if (k <= target && (!found || k > bk)) {
        found = true;
        bk = k;
        bv = e->value.load(kAcq);
      }
    }
    // The leaf's low key never changes (leaves are never merged), so it need
    // not be read under the version (strings: a DRAM copy kept until
    // destruction).
    const uint64_t low = lows_->word(r.leaf).load(kAcq);
    if (!vlock::validate(versions_->word(r.leaf), v) || !inner_->validate(r)) continue;
    // Strings: bk's record may be freed once the guard ends: copied here.
    if (found) return std::make_pair(OwnedKey<K>(bk), bv);
    // Nothing <= target in this leaf: the answer, if any, is left of its low
    // key.
    if (low == 0) return std::nullopt;
    key_before<K>(low_keys_.key(low), &target);  // low != 0 (""): there is one
  }
}

// ---------------------------------------------------------------- writes

template <class K>
Status FpTreeT<K>::insert(K key, Value value) {
  // The slot's key word. String keys: the key's record, written and
  // persisted here (flush, fence), before any lock, and published by
  // put_slot's bitmap store (key_record.h: a crash before it leaves an
  // unreachable record, which recovery reclaims); freed at once if the
  // insert fails (never published).
  uint64_t word = 0;
  if (Status s = new_slot_word<K>(*pool_, kLayout, key, {"fptree.insert.key_record"}, &word);
      !s.ok()) {
    return s;
  }
  const Guard guard(reclaimer_);
  const uint8_t f = fingerprint(key);
  const uint64_t off = lock_covering(key);
  if (find_slot(off, key, f) >= 0) {
    unlock_leaf(off);
    if constexpr (kStringKeys) free_key_record(*pool_, word);
    return Status::AlreadyExists();
  }
  const uint64_t free = ~leaf(off)->bitmap.load(kRlx) & full_mask();
  Status s;
  if (free != 0) {
    put_slot(off, static_cast<uint32_t>(std::countr_zero(free)), word, f, value,
             "fptree.insert.entry", "fptree.insert.commit");
  } else {
    s = split_insert(off, key, f, word, value);
  }
  unlock_leaf(off);
  if constexpr (kStringKeys) {
    if (!s.ok()) free_key_record(*pool_, word);  // never published
  }
  return s;
}

template <class K>
uint32_t FpTreeT<K>::take_log() {
  unsigned spins = 0;
  constexpr uint32_t kAll = (1u << kSplitLogs) - 1;
  while (true) {
    uint32_t busy = log_busy_.load(kRlx);
    const uint32_t free = ~busy & kAll;
    if (free == 0) {
      vlock::backoff(&spins);
      continue;
    }
    const uint32_t i = static_cast<uint32_t>(std::countr_zero(free));
    if (log_busy_.compare_exchange_weak(busy, busy | 1u << i, kAcq, kRlx)) return i;
  }
}

template <class K>
void FpTreeT<K>::release_log(uint32_t i) {
  log_busy_.fetch_and(~(1u << i), kRel);
}

// Leaf split with the split micro-log (paper §4, leaf split; recovery in
// §4), then the insert of (key, value) (key word `word`, fingerprint f), on
// the full, locked leaf L at `off`.
//
// Steps and crash argument:
//  a) Allocate N (OutOfSpace: nothing changed). Write N: the entries with
//     keys >= sep (the median), plus (word, value) when key >= sep, their
//     fingerprints, bitmap, next = L.sibling, lock 0; flush N. N is unreachable:
//     a crash leaves a block that recovery reclaims.
//  b) Take a free micro-log; store new_leaf = N, then cur = L (the commit
//     word), persist the log. Its fence also makes N durable. A crash from
//     here until step d finds the log active.
//  c) In L's line 0 store next = N, then bitmap = the slots with keys < sep;
//     persist line 0. Durable prefixes of line 0: {} (L unchanged, N
//     unreachable: recovery resets the log and the allocator frees N: undo),
//     {next} (N reachable, L still holds N's keys too: recovery sees
//     L.sibling == N and clears from L every key >= N's smallest key: redo),
//     {next, bitmap} (split done; recovery's trim changes nothing).
//  d) Reset the log (cur = 0), persist.
// Then the separator goes into the DRAM inner tree (InnerTree protocol: L
// stays locked until that is done) and, when key < sep, (word, value) goes
// into a slot of L freed by the split (an ordinary leaf insert).
// String keys: N's slots copy L's key words (no record is copied). In the
// undo state N is unreachable and only L's slots name those records (the
// new key's record, if it went to N, is unreachable: reclaimed); in the redo
// state both leaves name them, and recovery's trim (step 2 of Recovery) runs
// before its marking (step 4), so every record is marked once; in the done
// state only N names them.
template <class K>
Status FpTreeT<K>::split_insert(uint64_t off, K key, uint8_t f, uint64_t word, Value value) {
  pm::SmoTimer smo_timer;  // the SMO's wall time, when one is counted (pm/counters.h)
  uint64_t noff = 0;
  Status s = pool_->allocator().allocate(layout_.node_size, &noff);
  if (!s.ok()) return s;
  pm::count_smo();
  Leaf* l = leaf(off);
  Leaf* n = leaf(noff);
  const uint32_t c = layout_.slots;
  std::array<std::pair<K, uint32_t>, kMaxSlots> ks;  // (key, slot)
  for (uint32_t i = 0; i < c; ++i) ks[i] = {key_of(entry(off, i)->key.load(kRlx)), i};
  std::sort(ks.begin(), ks.begin() + c);
  const uint32_t m = c / 2;
  const OwnedKey<K> sep(ks[m].first);  // strings: a DRAM copy
  // a) the new leaf
  uint32_t j = 0;
  for (uint32_t i = m; i < c; ++i, ++j) {
    const Entry* src = entry(off, ks[i].second);
    Entry* dst = entry(noff, j);
    pm::store(&dst->key, src->key.load(kRlx));
    pm::store(&dst->value, src->value.load(kRlx));
    pm::store<uint8_t>(&n->fp[j], l->fp[ks[i].second].load(kRlx));
  }
  const bool right = !(key < sep);
  if (right) {
    Entry* dst = entry(noff, j);
    pm::store(&dst->key, word);
    pm::store(&dst->value, value);
    pm::store<uint8_t>(&n->fp[j], f);
    ++j;
  }
  pm::store(&n->bitmap, (uint64_t{1} << j) - 1);
  pm::store(&n->sibling, l->sibling.load(kRlx));
  pm::store<uint8_t>(&n->lock, 0);
  pm::flush(n, layout_.entries_offset + j * kEntryBytes, {"fptree.split.new_leaf"});
  // b) the micro-log
  const uint32_t li = take_log();
  SplitLog& lg = root_obj_->logs[li];
  pm::store(&lg.new_leaf, noff);
  pm::store(&lg.cur, off);
  pm::count_log_bytes(sizeof(SplitLog));
  pm::persist(&lg, sizeof(SplitLog), {"fptree.split.log"});
  // c) L: link N, then drop the moved half
  uint64_t low_bits = 0;
  for (uint32_t i = 0; i < m; ++i) low_bits |= uint64_t{1} << ks[i].second;
  pm::store(&l->sibling, noff);
  pm::store(&l->bitmap, low_bits);
  pm::persist(&l->bitmap, sizeof(uint64_t), {"fptree.split.leaf"});
  // d) reset the log
  pm::store(&lg.cur, 0);
  pm::persist(&lg.cur, sizeof(uint64_t), {"fptree.split.log_reset"});
  release_log(li);
  lows_->word(noff).store(low_keys_.word(sep), kRel);
  inner_->insert_separator(off, sep, noff);
  if (!right) {
    const uint64_t free = ~l->bitmap.load(kRlx) & full_mask();
    put_slot(off, static_cast<uint32_t>(std::countr_zero(free)), word, f, value,
             "fptree.insert.entry", "fptree.insert.commit");
  }
  return Status::Ok();
}

template <class K>
Status FpTreeT<K>::update(K key, Value value) {
  if constexpr (kStringKeys) {
    if (Status s = check_key(kLayout, key); !s.ok()) return s;
  }
  const Guard guard(reclaimer_);
  const uint64_t off = lock_covering(key);
  const int i = find_slot(off, key, fingerprint(key));
  if (i < 0) {
    unlock_leaf(off);
    return Status::NotFound();
  }
  // In-place 8-byte store of the value: a crash leaves the old or the new
  // value (never torn); durable once its line is persisted, before unlock.
  Entry* e = entry(off, static_cast<uint32_t>(i));
  pm::store(&e->value, value);
  pm::persist(&e->value, sizeof(uint64_t), {"fptree.update.value"});
  unlock_leaf(off);
  return Status::Ok();
}

// Leaf delete (paper §4, delete): clear the slot's bitmap bit, one
// aligned 8-byte store persisted with line 0 (a crash leaves the old or the
// new bitmap). The entry's bytes stay; the slot is free for a later insert.
template <class K>
Status FpTreeT<K>::remove(K key) {
  if constexpr (kStringKeys) {
    if (Status s = check_key(kLayout, key); !s.ok()) return s;
  }
  const Guard guard(reclaimer_);
  const uint64_t off = lock_covering(key);
  const int i = find_slot(off, key, fingerprint(key));
  if (i < 0) {
    unlock_leaf(off);
    return Status::NotFound();
  }
  Leaf* l = leaf(off);
  pm::store(&l->bitmap, l->bitmap.load(kRlx) & ~(uint64_t{1} << i));
  pm::persist(&l->bitmap, sizeof(uint64_t), {"fptree.remove.bitmap"});
  if constexpr (kStringKeys) {
    // The slot's bit is clear and durable: no slot names the record (a key
    // word is copied only by a split, whose copy and source are never both
    // live once the split's bitmap store is durable, and the split held
    // this leaf's lock until then). The word is read before the unlock (then
    // the slot may be reused). A concurrent reader may still hold the
    // offset: retired, freed once no other operation is in flight
    // (RecordReclaimer). After a crash before the free, recovery reclaims
    // it (unmarked).
    const uint64_t word = entry(off, static_cast<uint32_t>(i))->key.load(kRlx);
    unlock_leaf(off);
    reclaimer_.retire(word);
    reclaimer_.reclaim(*pool_);
  } else {
    unlock_leaf(off);
  }
  return Status::Ok();
}

// Bulk load: see fptree.h. Crash argument: every new leaf (string keys: and
// every key record) is written and flushed while unreachable, one fence
// makes them all durable, then one NAW of the head publishes the new chain.
// A crash before the NAW leaves the empty index (the new leaves and records
// are unreachable and reclaimed); after it, the loaded index (the old head
// leaf is unreachable and reclaimed).
template <class K>
Status FpTreeT<K>::bulk_load(std::span<const std::pair<K, Value>> sorted) {
  // An empty index is a fresh one (one empty leaf) or one emptied by
  // removes (empty leaves stay on the chain until recovery unlinks them):
  // the publish NAW below replaces the whole old chain, freed after it.
  std::vector<uint64_t> old;
  for (uint64_t off = head(); off != 0; off = leaf(off)->sibling.load(kAcq)) {
    if (leaf(off)->bitmap.load(kAcq) != 0) {
      return Status::InvalidArgument("fptree bulk_load: the index is not empty");
    }
    old.push_back(off);
  }
  for (size_t i = 0; i < sorted.size(); ++i) {
    if constexpr (kStringKeys) {
      if (Status s = check_key(kLayout, sorted[i].first); !s.ok()) return s;
    }
    if (i > 0 && !(sorted[i - 1].first < sorted[i].first)) {
      return Status::InvalidArgument("fptree bulk_load: keys not strictly ascending at pair " +
                                     std::to_string(i));
    }
  }
  if (sorted.empty()) return Status::Ok();
  const uint32_t per = std::max<uint32_t>(
      1, std::min<uint32_t>(layout_.slots,
                            static_cast<uint32_t>(std::ceil(fill_ * layout_.slots - 1e-9))));
  const size_t nleaves = (sorted.size() + per - 1) / per;
  std::vector<uint64_t> leaves(nleaves);
  pm::Allocator& alloc = pool_->allocator();
  std::vector<uint64_t> words;  // string keys: the key records, in key order
  auto undo = [&](size_t nleaf) {
    for (size_t k = 0; k < nleaf; ++k) alloc.free(leaves[k]);
    for (uint64_t w : words) free_key_record(*pool_, w);
  };
  for (size_t i = 0; i < nleaves; ++i) {
    Status s = alloc.allocate(layout_.node_size, &leaves[i]);
    if (!s.ok()) {
      undo(i);
      return s;
    }
  }
  if constexpr (kStringKeys) {
    // Flushed, not fenced: the fence before the publishing NAW below orders
    // them with the leaves.
    words.reserve(sorted.size());
    for (const auto& kv : sorted) {
      uint64_t w = 0;
      if (Status s = store_key_record(*pool_, kv.first, &w, {"fptree.bulk.key_record"},
                                      RecordFence::kCallerFences);
          !s.ok()) {
        undo(nleaves);
        return s;
      }
      words.push_back(w);
    }
  }
  std::vector<LeafRef> refs(nleaves);
  for (size_t i = 0; i < nleaves; ++i) {
    const uint64_t off = leaves[i];
    Leaf* l = leaf(off);
    const size_t from = i * per;
    const uint32_t cnt = static_cast<uint32_t>(std::min<size_t>(per, sorted.size() - from));
    for (uint32_t j = 0; j < cnt; ++j) {
      Entry* e = entry(off, j);
      if constexpr (kStringKeys) {
        pm::store(&e->key, words[from + j]);
      } else {
        pm::store(&e->key, sorted[from + j].first);
      }
      pm::store(&e->value, sorted[from + j].second);
      pm::store<uint8_t>(&l->fp[j], fingerprint(sorted[from + j].first));
    }
    pm::store(&l->bitmap, (uint64_t{1} << cnt) - 1);
    pm::store(&l->sibling, i + 1 < nleaves ? leaves[i + 1] : 0);
    pm::store<uint8_t>(&l->lock, 0);
    pm::flush(l, layout_.entries_offset + cnt * kEntryBytes, {"fptree.bulk.leaf"});
    refs[i] = {i == 0 ? OwnedKey<K>{} : OwnedKey<K>(sorted[from].first), off};
    lows_->word(off).store(low_keys_.word(refs[i].first), kRel);
  }
  pm::fence({"fptree.bulk.leaves"});
  pm::naw(&root_obj_->head, leaves[0], {"fptree.bulk.publish"});
  // The old chain is unreachable now (a crash from here on has recovery
  // free it); free it for this session once no DRAM route names it.
  Status s = inner_->build(refs);
  if (!s.ok()) return s;
  for (uint64_t off : old) {
    // a free leaf block is zero (check_lost_leaves_of)
    this->zero_block(off, "fptree.bulk.free_old");
    alloc.free(off);
  }
  return Status::Ok();
}

// ---------------------------------------------------------------- recovery

// A leaf offset must be a block of the leaves' class inside the pool, and
// its bitmap must name only the C slots. Never dereferences `off` before the
// range check.
template <class K>
Status FpTreeT<K>::check_leaf(uint64_t off, const char* what) const {
  if (off == 0 || !pool_->contains(off, layout_.block) || off % layout_.block != 0 ||
      pool_->allocator().block_size(off) != layout_.block) {
    return Status::Corruption("fptree: " + std::string(what) + " offset " + hex(off) +
                              " is not a leaf block of the pool");
  }
  if ((leaf(off)->bitmap.load(kRlx) & ~full_mask()) != 0) {
    return Status::Corruption("fptree: leaf " + hex(off) + " has bitmap bits beyond its " +
                              std::to_string(layout_.slots) + " slots");
  }
  return Status::Ok();
}

template <class K>
Status FpTreeT<K>::check_records(uint64_t off) const {
  if constexpr (kStringKeys) {
    for (uint64_t b = leaf(off)->bitmap.load(kRlx); b != 0; b &= b - 1) {
      const uint64_t w = entry(off, static_cast<uint32_t>(std::countr_zero(b)))->key.load(kRlx);
      if (Status s = check_key_record(*pool_, kLayout, w); !s.ok()) return s;
    }
  } else {
    (void)off;
  }
  return Status::Ok();
}

// The leaf chain from the head; Corruption on a bad offset or a cycle.
template <class K>
Status FpTreeT<K>::walk_chain(std::vector<uint64_t>* chain) const {
  chain->clear();
  std::unordered_set<uint64_t> seen;
  for (uint64_t off = head(); off != 0; off = leaf(off)->sibling.load(kRlx)) {
    Status s = check_leaf(off, chain->empty() ? "head leaf" : "next leaf");
    if (!s.ok()) return s;
    if (!seen.insert(off).second) {
      return Status::Corruption("fptree: leaf " + hex(off) + " reached twice (cycle)");
    }
    chain->push_back(off);
  }
  return Status::Ok();
}

// Rebuilds the DRAM inner nodes over the chain: (minus infinity, head), then
// (min key, leaf) for every later leaf (recovery unlinked the empty ones).
// Corruption if the keys of consecutive leaves are not ascending. String
// keys: every live slot's record was checked by recovery's marking.
template <class K>
Status FpTreeT<K>::rebuild_inner(const std::vector<uint64_t>& chain) {
  std::vector<LeafRef> refs;
  refs.reserve(chain.size());
  OwnedKey<K> prev_max{};
  bool any = false;
  for (size_t i = 0; i < chain.size(); ++i) {
    const uint64_t off = chain[i];
    K lo{}, hi{};
    uint64_t live = leaf(off)->bitmap.load(kRlx);
    const bool empty = live == 0;
    for (bool first = true; live != 0; first = false) {
      const uint32_t s = static_cast<uint32_t>(std::countr_zero(live));
      live &= live - 1;
      const K k = key_of(entry(off, s)->key.load(kRlx));
      lo = first || k < lo ? k : lo;
      hi = first || k > hi ? k : hi;
    }
    if (i > 0 && empty) {
      return Status::Corruption("fptree: empty leaf " + hex(off) + " left in the chain");
    }
    if (!empty && any && !(prev_max < lo)) {
      return Status::Corruption("fptree: keys of leaf " + hex(off) +
                                " are not above those of the previous leaf");
    }
    if (!empty) {
      prev_max = OwnedKey<K>(hi);
      any = true;
    }
    refs.emplace_back(i == 0 ? OwnedKey<K>{} : OwnedKey<K>(lo), off);
    lows_->word(off).store(i == 0 ? 0 : low_keys_.word(lo), kRel);
  }
  return inner_->build(refs);
}

// Recovery (paper §4, recovery), single-threaded; it may itself crash and
// run again, so every write is idempotent:
//  1) Validate the root object.
//  2) Every active split micro-log {L, N}: if L.sibling == N (the split's link
//     is durable), finish it: clear from L's bitmap every key >= N's
//     smallest key (one aligned store, persisted; a no-op when the split had
//     completed); otherwise N was never linked: leave it unreachable (undo;
//     the allocator frees it below). Then reset the log (cur = 0, persist).
//     String keys: the records of L's and N's live slots are checked before
//     their keys are compared.
//  3) Walk the chain from the head, checking every leaf and clearing lock
//     bytes left at 1 (not persisted: a later recovery clears them again).
//  4) Mark the root object and every chain leaf reachable (string keys: and
//     the record of every live slot, checked first; a record named by two
//     live slots is Corruption), once each, and check them against the
//     pool's close record (common/persistent.h: on a cleanly closed pool a
//     lost leaf is Corruption, nothing reclaimed); the allocator frees every
//     other block (an undone split's N, leaves and records of an unpublished
//     bulk load, leaves unlinked by an earlier recovery, records of removed
//     keys and of inserts that never published theirs).
//  4b) Unlink every empty leaf but the head (prev.sibling = leaf.sibling, one
//     aligned store, persisted: the chain loses a leaf with no keys, so the
//     content is unchanged) and free it.
//  5) Rebuild the DRAM inner nodes, check the result with verify() and the
//     key count against the close record.
template <class K>
Status FpTreeT<K>::recover() {
  if (Status s = this->open_root_object(layout<K>(), kRootMagic, &root_obj_, kRootBytes); !s.ok())
    return s;
  if (root_obj_->node_size > 1024 ||
      !Layout::of(static_cast<uint32_t>(root_obj_->node_size), &layout_)) {
    return Status::Corruption("fptree: root object has invalid node size " +
                              std::to_string(root_obj_->node_size));
  }
  if (root_obj_->nlogs != kSplitLogs) {
    return Status::Corruption("fptree: root object has " + std::to_string(root_obj_->nlogs) +
                              " split logs, expected " + std::to_string(kSplitLogs));
  }
  versions_ = std::make_unique<LockTable>(pool_->size(), layout_.block);
  lows_ = std::make_unique<LockTable>(pool_->size(), layout_.block);
  inner_ = std::make_unique<inner::InnerTreeT<K>>();

  // 2) split micro-logs
  for (uint32_t li = 0; li < kSplitLogs; ++li) {
    SplitLog& lg = root_obj_->logs[li];
    const uint64_t cur = lg.cur.load(kRlx);
    if (cur == 0) continue;
    const uint64_t nn = lg.new_leaf.load(kRlx);
    Status s = check_leaf(cur, "split log's current leaf");
    if (!s.ok()) return s;
    if (leaf(cur)->sibling.load(kRlx) == nn) {
      s = check_leaf(nn, "split log's new leaf");
      if (s.ok()) s = check_records(nn);
      if (s.ok()) s = check_records(cur);
      if (!s.ok()) return s;
      uint64_t live = leaf(nn)->bitmap.load(kRlx);
      K nmin{};
      const bool nonempty = live != 0;
      for (bool first = true; live != 0; first = false) {
        const uint32_t i = static_cast<uint32_t>(std::countr_zero(live));
        live &= live - 1;
        const K k = key_of(entry(nn, i)->key.load(kRlx));
        nmin = first || k < nmin ? k : nmin;
      }
      Leaf* l = leaf(cur);
      const uint64_t old_bits = l->bitmap.load(kRlx);
      uint64_t bits = old_bits;
      for (uint64_t b = old_bits; nonempty && b != 0; b &= b - 1) {
        const uint32_t i = static_cast<uint32_t>(std::countr_zero(b));
        if (!(key_of(entry(cur, i)->key.load(kRlx)) < nmin)) bits &= ~(uint64_t{1} << i);
      }
      if (bits != old_bits) {
        pm::store(&l->bitmap, bits);
        pm::persist(&l->bitmap, sizeof(uint64_t), {"fptree.recover.trim"});
      }
    }
    pm::store(&lg.cur, 0);
    pm::persist(&lg.cur, sizeof(uint64_t), {"fptree.recover.log_reset"});
  }

  // 3) the chain: lock bytes; every leaf on it, empty or not, is reached
  std::vector<uint64_t> chain;
  {
    std::unordered_set<uint64_t> seen;
    for (uint64_t off = head(); off != 0;) {
      Status s = check_leaf(off, chain.empty() ? "head leaf" : "next leaf");
      if (!s.ok()) return s;
      if (!seen.insert(off).second) {
        return Status::Corruption("fptree: leaf " + hex(off) + " reached twice (cycle)");
      }
      Leaf* l = leaf(off);
      if (l->lock.load(kRlx) != 0) pm::store<uint8_t>(&l->lock, 0);
      chain.push_back(off);
      off = l->sibling.load(kRlx);
    }
  }

  // 4) reachability, before any structural write (common/persistent.h)
  Status s = this->reclaim_unreachable(
      layout<K>(),
      [&](pm::Allocator& alloc, uint64_t* keys) {
        for (uint64_t off : chain) {
          if (Status m = alloc.mark_reachable(off); !m.ok()) return m;
          const uint64_t bm = leaf(off)->bitmap.load(kRlx);
          *keys += static_cast<uint64_t>(std::popcount(bm));
          if constexpr (kStringKeys) {
            for (uint64_t b = bm; b != 0; b &= b - 1) {
              const uint64_t w =
                  entry(off, static_cast<uint32_t>(std::countr_zero(b)))->key.load(kRlx);
              if (Status m = mark_key_record(*pool_, kLayout, w); !m.ok()) return m;
            }
          }
        }
        return Status::Ok();
      },
      [&](pm::Allocator& alloc) { return check_lost_leaves_of(alloc, chain); });
  if (!s.ok()) return s;

  // 4b) unlink every empty leaf but the head; once prev.sibling is durable the
  // leaf is unreachable: freed here, or by the next recovery's pass if a
  // crash comes first.
  std::vector<uint64_t> kept;
  for (uint64_t off : chain) {
    if (!kept.empty() && leaf(off)->bitmap.load(kRlx) == 0) {
      Leaf* prev = leaf(kept.back());
      pm::store(&prev->sibling, leaf(off)->sibling.load(kRlx));
      pm::persist(&prev->sibling, sizeof(uint64_t), {"fptree.recover.unlink"});
      // Zeroed before it is freed: a free leaf block is always zero
      // (check_lost_leaves_of). A crash first leaves it unreachable and
      // not zero, for the next recovery's check to zero.
      this->zero_block(off, "fptree.recover.unlink_zero");
      pool_->allocator().free(off);
    } else {
      kept.push_back(off);
    }
  }

  // 5) inner nodes
  s = rebuild_inner(kept);
  if (!s.ok()) return s;
  VerifyReport report;
  return verify(&report);
}

// After a crash (common/persistent.h, check_lost_leaves): an unreachable
// block of the leaf class is a whole leaf when its bitmap names only its C
// slots, every live slot holds the fingerprint of its key, and none holds
// the all-zero entry (a split's new leaf left partly written). A key is held
// when the non-empty chain leaf covering it (the last whose smallest key is
// <= the key; the chain is in key order) holds it. The only legitimate
// whole leaf off the chain is the new leaf of a split whose sibling NAW was
// lost: the split persists it before that NAW and clears the moved bits of
// the old leaf only after it, so its keys are all still the old leaf's, but
// for the key being inserted when it goes to N (held nowhere: allowed).
// fptree frees a leaf only when recovery unlinks an empty one and in
// bulk_load (the empty ones), zeroed first (both are unreachable by then and
// empty: a crash while zeroing leaves a block that is not a whole leaf,
// which the next recovery zeroes), so no other block of the class holds
// anything. String keys: no check (a live slot names a key record, which
// would have to be checked before it is read), as lbtree's.
template <class K>
Status FpTreeT<K>::check_lost_leaves_of(pm::Allocator& alloc, const std::vector<uint64_t>& chain) {
  if constexpr (kStringKeys) {
    (void)alloc;
    (void)chain;
    return Status::Ok();
  } else {
    const uint64_t slots_mask =
        layout_.slots >= 64 ? ~uint64_t{0} : (uint64_t{1} << layout_.slots) - 1;
    auto live_keys = [&](uint64_t off, std::vector<uint64_t>* keys) {
      const Leaf* l = leaf(off);
      const uint64_t bm = l->bitmap.load(kRlx);
      if ((bm & ~slots_mask) != 0) return false;
      for (uint64_t b = bm; b != 0; b &= b - 1) {
        const uint32_t i = static_cast<uint32_t>(std::countr_zero(b));
        const uint64_t k = entry(off, i)->key.load(kRlx);
        if ((k == 0 && entry(off, i)->value.load(kRlx) == 0) ||
            l->fp[i].load(kRlx) != fingerprint(k)) {
          return false;
        }
        keys->push_back(k);
      }
      return !keys->empty();
    };
    auto ranges = [&](std::vector<std::pair<uint64_t, uint64_t>>* r) {
      for (uint64_t off : chain) {
        uint64_t lo = UINT64_MAX;
        const uint64_t bm = leaf(off)->bitmap.load(kRlx);
        for (uint64_t b = bm; b != 0; b &= b - 1) {
          lo = std::min(lo, entry(off, static_cast<uint32_t>(std::countr_zero(b)))->key.load(kRlx));
        }
        if (bm != 0) r->emplace_back(lo, off);
      }
    };
    auto leaf_has = [&](uint64_t off, uint64_t k) {
      for (uint64_t b = leaf(off)->bitmap.load(kRlx); b != 0; b &= b - 1) {
        if (entry(off, static_cast<uint32_t>(std::countr_zero(b)))->key.load(kRlx) == k) {
          return true;
        }
      }
      return false;
    };
    // The split writes the key being inserted into N when it belongs there,
    // before the link: one key of a legitimate N may be held nowhere.
    return this->check_lost_leaves(kLayout, alloc, layout_.node_size, live_keys, ranges, leaf_has,
                                   "fptree.recover.lost_leaf_check", 1);
  }
}

// ---------------------------------------------------------------- info, verify

template <class K>
IndexInfo FpTreeT<K>::info() const {
  return this->persistent_info(kLayout, kFpTreeDescription,
                               {.ordered = true,
                                .persistent = true,
                                .thread_safe = true,
                                .string_keys = true,  // the entry's claim, whatever this K
                                .bulk_load = true,
                                .placement = Placement::kSelective},
                               layout_.node_size,
                               (inner_ ? inner_->dram_bytes() : 0) +
                                   (versions_ ? versions_->dram_bytes() : 0) +
                                   (lows_ ? lows_->dram_bytes() : 0) + low_keys_.dram_bytes());
}

template <class K>
Status FpTreeT<K>::verify(VerifyReport* report) const {
  std::vector<uint64_t> chain;
  Status s = walk_chain(&chain);
  if (!s.ok()) return s;
  for (uint32_t li = 0; li < kSplitLogs; ++li) {
    if (root_obj_->logs[li].cur.load(kRlx) != 0) {
      return Status::Corruption("fptree: split log " + std::to_string(li) + " is active");
    }
  }
  std::vector<LeafRef> refs;
  s = inner_->verify_routes(
      kLayout, chain, [&](uint64_t off) { return low_keys_.key(lows_->word(off).load(kRlx)); },
      &refs);
  if (!s.ok()) return s;
  VerifyReport r;
  bool any = false;
  OwnedKey<K> prev_max{};
  for (size_t i = 0; i < chain.size(); ++i) {
    const uint64_t off = chain[i];
    const Leaf* l = leaf(off);
    if (l->lock.load(kRlx) != 0) return Status::Corruption("fptree: leaf " + hex(off) + " locked");
    const OwnedKey<K>& lo = refs[i].first;
    const bool bounded = i + 1 < refs.size();
    std::vector<OwnedKey<K>> keys;
    for (uint64_t b = l->bitmap.load(kRlx); b != 0; b &= b - 1) {
      const uint32_t slot = static_cast<uint32_t>(std::countr_zero(b));
      const uint64_t w = entry(off, slot)->key.load(kRlx);
      if constexpr (kStringKeys) {
        if (Status cs = check_key_record(*pool_, kLayout, w); !cs.ok()) return cs;
        r.pm_bytes += pool_->allocator().block_size(w);
      }
      const K k = key_of(w);
      if (l->fp[slot].load(kRlx) != fingerprint(k)) {
        return Status::Corruption("fptree: fingerprint mismatch in leaf " + hex(off) + " slot " +
                                  std::to_string(slot));
      }
      if (k < lo || (bounded && !(k < refs[i + 1].first))) {
        return Status::Corruption("fptree: key outside its leaf's range in leaf " + hex(off));
      }
      keys.emplace_back(k);
    }
    std::sort(keys.begin(), keys.end());
    if (std::adjacent_find(keys.begin(), keys.end()) != keys.end()) {
      return Status::Corruption("fptree: duplicate key in leaf " + hex(off));
    }
    if (!keys.empty()) {
      if (any && !(prev_max < keys.front())) {
        return Status::Corruption("fptree: keys of leaf " + hex(off) +
                                  " not above those of the previous leaf");
      }
      any = true;
      prev_max = keys.back();
    }
    r.keys += keys.size();
    ++r.leaves;
  }
  r.inner_nodes = inner_->nodes();
  r.height = inner_->height() + 1;
  // String keys: the PM reached is the leaves and the key records
  // (VerifyReport::pm_bytes); integer keys report leaves only (pm_bytes 0).
  if constexpr (kStringKeys) r.pm_bytes += r.leaves * uint64_t{layout_.block};
  *report = r;
  return Status::Ok();
}

// ---------------------------------------------------------------- ablation notes

// Ablation notes (issue 3 §4): the flushes and fences whose removal the crash
// lab (`nvindex crashtest --index fptree --ablate all`) does not catch, and
// why each stays.
template <class K>
std::vector<std::pair<std::string, std::string>> FpTreeT<K>::ablation_notes() const {
  return {
      {"fptree.create.leaf/flush",
       "not observable on a fresh pool: the head leaf's block is all zero there, which reads as "
       "the initialised empty leaf (bitmap 0, next 0); the flush is needed when the block holds "
       "an old leaf (a create re-run after a crash during create reuses reclaimed blocks); "
       "committed by the root object's fence, one flush per pool creation"},
      {"fptree.split.log_reset",
       "redundant for consistency: an active log left after a completed split is a no-op in "
       "recovery (if L.sibling is still N, L holds no key >= N's smallest key, since L covers "
       "[lo, sep) and N [sep, hi) for good, so the trim clears nothing; if L was split again, "
       "L.sibling != N and N stays reachable through the chain, so nothing is freed); a torn "
       "rewrite of the stale log by the next split in its slot (L2, N2) reads {L, N2}, which "
       "is that split's own log if L2 == L and otherwise an undo (L.sibling != N2, N2 not yet "
       "reachable); kept so that no log is active at rest (the paper's protocol; verify() "
       "requires it), one persist per split"},
  };
}

template class FpTreeT<uint64_t>;
template class FpTreeT<std::string_view>;

}  // namespace fptree

// ---------------------------------------------------------------- factory

namespace {
template <class K>
Status open_fptree(const IndexOptions& options, std::unique_ptr<Index<K>>* out) {
  // make_index() has checked the node size and fill factor; a recovered
  // tree keeps its own node size.
  using Tree = fptree::FpTreeT<K>;
  return open_persistent_index<Tree>(
      options, pool_layout(fptree::kLayout, key_type_of<K>),
      [&](Tree& t) { return t.create(options.node_size); }, [&](Tree& t) { return t.recover(); },
      out, options.fill_factor);
}
}  // namespace

Status make_fptree(const IndexOptions& options, std::unique_ptr<Index<uint64_t>>* out) {
  return open_fptree(options, out);
}

Status make_fptree_string(const IndexOptions& options,
                          std::unique_ptr<Index<std::string_view>>* out) {
  return open_fptree(options, out);
}

}  // namespace nvindex
