// lbtree: the LB+-tree (Liu, Chen, Wang, VLDB 2020). See lbtree.h for the root
// object, the anchors and the concurrency protocol, leaf.h for the leaf layout
// and the in-leaf algorithms (search, insert with entry moving, delete).
// This file: the index operations, the logless split (Algorithm 3), bulk
// load, recovery with the parallel rebuild of the DRAM inner nodes (§3.5),
// verify() and the ablation notes. Crash model: DESIGN.md §6 (a line holds a
// prefix, in program order, of the stores made to it since it was last
// durable; an aligned 8-byte store is never torn).
#include "indexes/lbtree/lbtree.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <thread>
#include <unordered_set>

#include "indexes/common/factory.h"
#include "indexes/common/prefetch.h"
#include "indexes/common/simd_search.h"
#include "nvindex/pm/allocator.h"
#include "nvindex/pm/persist.h"
#include "util/quote.h"

namespace nvindex {
namespace lbtree {
namespace {

constexpr auto kAcq = std::memory_order_acquire;
constexpr auto kRlx = std::memory_order_relaxed;

/// The pool layout of a tree over keys K: "lbtree" or "lbtree:string".
template <class K>
std::string layout() {
  return pool_layout(kLayout, key_type_of<K>);
}

/// Slot t (0..13) of a block in the order bulk load and split fill them:
/// the slots outside the header line first (from the far end of the
/// block), the header line last, so that a leaf filled below capacity keeps
/// its header line free (paper §3.3: "the new leaf receives the entries in
/// its last slots, so its line 0 stays free").
constexpr uint32_t fill_slot(uint32_t header_line, uint32_t t) {
  return header_line == 0 ? kSlots - 1 - t : t;
}

}  // namespace

// ---------------------------------------------------------------- key policy

// The only places where the two key types differ (besides `if constexpr`
// blocks in split, scan, find_last_less_than, bulk load and recovery).

template <class K>
bool LbTreeT<K>::find_in(const Leaf& l, K key, uint8_t f, SlotRef* where, uint64_t* value) const {
  if constexpr (kStringKeys) {
    // A candidate's record is read only after its fingerprint matched (about
    // 14/256 false candidates per 256 B block); its offset came from a slot
    // this operation read, so its Guard keeps it from being freed.
    return leaf_find_fp(
        l, f, [&](uint64_t w) { return key_record(*pool_, w) == key; }, where, value);
  } else {
    (void)f;
    // 256 B leaves (the paper's size) get the search without a block loop.
    return blocks_ == 1 ? leaf_find<1>(l, key, where, value) : leaf_find(l, key, where, value);
  }
}

template <class K>
bool LbTreeT<K>::insert_in(const Leaf& l, uint8_t f, uint64_t word, Value value) {
  return blocks_ == 1 ? leaf_insert_fp<1>(l, f, word, value) : leaf_insert_fp(l, f, word, value);
}

// ---------------------------------------------------------------- basics

template <class K>
LbTreeT<K>::LbTreeT(pm::Pool* pool, double fill) : PersistentIndexOf<K>(pool), fill_(fill) {}

template <class K>
LbTreeT<K>::~LbTreeT() {
  if constexpr (kStringKeys) reclaimer_.free_all(*pool_);
  if (!ready_) return;  // creation or recovery failed: touch nothing
  this->record_close_keys();
  // Clean close: spread the anchors over the chain as it is now, unless they
  // already are (no write at all then).
  const std::vector<uint64_t> a = spread_anchors();
  if (a != anchors()) write_anchors(a);
}

template <class K>
uint32_t LbTreeT<K>::block_class() const {
  return leaf_size_ == 768 ? 1024 : leaf_size_;
}

template <class K>
bool LbTreeT<K>::leaf_offset_ok(uint64_t off) const {
  const uint32_t c = block_class();
  return off != 0 && off % c == 0 && pool_->contains(off, c) &&
         pool_->allocator().block_size(off) == c;
}

// Writer lock of a leaf: its DRAM version word, taken by CAS (vlock::lock;
// why not the PM lock bit: version_lock.h). Nothing about the lock is
// persisted, so a crash never leaves a leaf locked.
// Single-threaded (set_single_threaded): no lock is taken, and so none is
// released (unlock_leaf, and the new leaf's lock in split_and_insert, skip
// too); only the leaf's lines are prefetched (prefetch_leaf).
template <class K>
inner::Route LbTreeT<K>::lock_leaf_for(K key) {
  if (single_) {
    const inner::Route r = tree_->find_single(key);
    prefetch_leaf(r.leaf);
    return r;
  }
  while (true) {
    const inner::Route r = tree_->find(key);
    // The leaf's lines and its version word are fetched before the lock's
    // CAS, a full barrier: afterwards every miss would be taken one at a
    // time.
    prefetch_leaf(r.leaf);
    vlock::lock(versions_->word(r.leaf));  // leaves are never obsolete: true
    if (tree_->validate(r)) return r;
    unlock_leaf(r.leaf);
  }
}

template <class K>
inline void LbTreeT<K>::prefetch_leaf(uint64_t off) const {
  if (!single_) versions_->prefetch(off);  // one thread reads no version
  prefetch_bytes(leaf(off).b, blocks_ * kBlockBytes);
}

template <class K>
void LbTreeT<K>::unlock_leaf(uint64_t off) {
  if (single_) return;  // lock_leaf_for took none
  vlock::unlock(versions_->word(off));
}

template <class K>
std::vector<uint64_t> LbTreeT<K>::anchors() const {
  const AnchorArray& a = root_->anchors[root_->selector.load(kAcq) & 1];
  const uint64_t n = std::min<uint64_t>(a.count, kAnchorSlots);
  return std::vector<uint64_t>(a.leaf, a.leaf + n);
}

template <class K>
std::vector<uint64_t> LbTreeT<K>::spread_anchors() const {
  // Two passes over the chain (count, then pick), O(1) DRAM.
  uint64_t n = 0;
  for (uint64_t off = root_->head; off != 0; off = leaf(off).sibling(leaf(off).alt()).load(kAcq))
    ++n;
  const uint64_t k = std::min<uint64_t>(n, kAnchorSlots);
  std::vector<uint64_t> out;
  out.reserve(k);
  uint64_t pos = 0;
  for (uint64_t off = root_->head; off != 0 && out.size() < k;
       off = leaf(off).sibling(leaf(off).alt()).load(kAcq), ++pos) {
    if (pos == out.size() * n / k) out.push_back(off);
  }
  return out;
}

// Crash argument: the inactive array is written and persisted while the
// selector still names the live one; the NAW of the selector then switches
// to it. A crash leaves the old array (every anchor of which is still a leaf
// of the chain: no leaf is ever unlinked) or the new one.
template <class K>
void LbTreeT<K>::write_anchors(const std::vector<uint64_t>& a) {
  const uint64_t sel = root_->selector.load(kAcq) & 1;
  AnchorArray& dst = root_->anchors[1 - sel];
  pm::store(&dst.count, static_cast<uint64_t>(a.size()));
  for (size_t i = 0; i < a.size(); ++i) pm::store(&dst.leaf[i], a[i]);
  pm::persist(&dst, sizeof(uint64_t) * (1 + a.size()), {"lbtree.anchors.array"});
  pm::naw(&root_->selector, 1 - sel, {"lbtree.anchors.select"});
}

// ---------------------------------------------------------------- create

template <class K>
Status LbTreeT<K>::create(uint32_t leaf_size) {
  leaf_size_ = leaf_size;
  blocks_ = leaf_size / kBlockBytes;
  pm::Allocator& alloc = pool_->allocator();
  uint64_t ro = 0;
  Status s = allocate_root_object(alloc, kRootBytes, &ro);
  if (!s.ok()) return s;
  uint64_t head = 0;
  s = alloc.allocate(leaf_size_, &head);
  if (!s.ok()) {
    alloc.free(ro);
    return s;
  }
  // Crash argument: the head leaf (all zero: no slot in use, alt 0, no
  // sibling) and the root object are persisted before Pool::set_root (a NAW)
  // publishes them; a crash earlier leaves a pool with no root whose blocks
  // the next create reclaims (above).
  // The head's flush is committed by the root object's fence below.
  pm::fill(pool_->template ptr<char>(head), 0, leaf_size_);
  pm::flush(pool_->template ptr<char>(head), leaf_size_, {"lbtree.create.head"});
  root_ = pool_->template ptr<RootObject>(ro);
  pm::fill(root_, 0, kRootBytes);
  pm::store(&root_->magic, kRootMagic);
  pm::store(&root_->leaf_size, static_cast<uint64_t>(leaf_size_));
  pm::store(&root_->head, head);
  pm::store(&root_->anchors[0].count, uint64_t{1});
  pm::store(&root_->anchors[0].leaf[0], head);
  pm::persist(root_, kRootBytes, {"lbtree.create.root_object"});
  pool_->set_root(ro);
  tree_ = std::make_unique<inner::InnerTreeT<K>>(kInnerNodeBytes, single_);
  const LeafRef only[] = {{OwnedKey<K>{}, head}};
  s = tree_->build(only, fill_);
  if (!s.ok()) return s;
  versions_ = std::make_unique<LockTable>(pool_->size(), block_class());
  lows_ = std::make_unique<LockTable>(pool_->size(), block_class());
  leaves_.store(1);
  ready_ = true;
  return Status::Ok();
}

// ---------------------------------------------------------------- reads

template <class K>
std::optional<Value> LbTreeT<K>::lookup(K key) {
  const Guard guard(reclaimer_);
  const uint8_t f = fingerprint(key);
  if (single_) {
    // One calling thread: nothing changes under the lookup, so no version
    // is read or validated, and the leaf's DRAM version word is not
    // fetched (one line fewer per lookup).
    const inner::Route r = tree_->find_single(key);
    prefetch_leaf(r.leaf);
    uint64_t val = 0;
    if (find_in(leaf(r.leaf), key, f, nullptr, &val)) return val;
    return std::nullopt;
  }
  while (true) {
    const inner::Route r = tree_->find(key);
    // The version word and the leaf's lines are fetched in parallel.
    prefetch_leaf(r.leaf);
    std::atomic<uint64_t>& ver = versions_->word(r.leaf);
    uint64_t v = 0;
    if (!vlock::read_lock(ver, &v)) continue;
    uint64_t val = 0;
    const bool found = find_in(leaf(r.leaf), key, f, nullptr, &val);
    if (!vlock::validate(ver, v) || !tree_->validate(r)) continue;
    if (found) return val;
    return std::nullopt;
  }
}

// Scan: start at the leaf covering `start`, then follow the sibling chain.
// Every key of a leaf is smaller than every key of the leaves after it, and a
// leaf only ever moves keys to a new leaf inserted right after it, so a walk
// that starts at (or left of) the covering leaf and reads each leaf under its
// version sees every key >= start in order. Leaves are unsorted: each leaf's
// keys >= cursor are sorted in DRAM.
template <class K>
size_t LbTreeT<K>::scan(K start, size_t count, std::vector<std::pair<OwnedKey<K>, Value>>* out) {
  out->clear();
  if (count == 0) return 0;
  const Guard guard(reclaimer_);
  OwnedKey<K> cursor(start);  // every key < cursor was returned or skipped
  std::vector<std::pair<OwnedKey<K>, Value>> buf;
  uint64_t off = tree_->find(start).leaf;
  while (true) {
    std::atomic<uint64_t>& ver = versions_->word(off);
    uint64_t v = 0;
    if (!vlock::read_lock(ver, &v)) continue;
    buf.clear();
    const Leaf l = leaf(off);
    const bool alt = l.alt();
    // The slot loop of for_each_live_slot, written out: the scan's inner loop
    // (through the lambda it took 0.7% more instructions, callgrind).
    for (uint32_t j = 0; j < l.blocks; ++j) {
      const Header h = load_header(l.live_hdr(j, alt));
      for (uint64_t m = h.bitmap(); m != 0; m &= m - 1) {
        const uint32_t i = static_cast<uint32_t>(__builtin_ctzll(m));
        const K k = key_of(l.ent(j, i).key.load(kAcq));
        if (k >= cursor) buf.emplace_back(OwnedKey<K>(k), l.ent(j, i).value.load(kAcq));
      }
    }
    const uint64_t next = l.sibling(alt).load(kAcq);
    if (!vlock::validate(ver, v)) continue;
    std::sort(buf.begin(), buf.end());
    for (const auto& kv : buf) {
      if (out->size() == count) break;
      out->push_back(kv);
    }
    if (out->size() == count || next == 0) return out->size();
    if (!buf.empty()) {
      if (!key_after<K>(buf.back().first, &cursor)) return out->size();
    }
    off = next;
  }
}

template <class K>
std::optional<std::pair<OwnedKey<K>, Value>> LbTreeT<K>::find_last_less_than(K key) {
  // target: the largest key sought (keys <= target).
  OwnedKey<K> target{};
  if (!key_before<K>(key, &target)) return std::nullopt;
  const Guard guard(reclaimer_);
  while (true) {
    const inner::Route r = tree_->find(target);
    std::atomic<uint64_t>& ver = versions_->word(r.leaf);
    uint64_t v = 0;
    if (!vlock::read_lock(ver, &v)) continue;
    bool found = false;
    K bk{};
    uint64_t bv = 0;
    const Leaf l = leaf(r.leaf);
    const bool alt = l.alt();
    for (uint32_t j = 0; j < l.blocks; ++j) {
      const Header h = load_header(l.live_hdr(j, alt));
      for (uint64_t m = h.bitmap(); m != 0; m &= m - 1) {
        const uint32_t i = static_cast<uint32_t>(__builtin_ctzll(m));
        const K k = key_of(l.ent(j, i).key.load(kAcq));
        if (k <= target && (!found || k > bk)) {
          found = true;
          bk = k;
          bv = l.ent(j, i).value.load(kAcq);
        }
      }
    }
    // The leaf's low key (its separator) never changes while the leaf is
    // routed to, so it need not be read under the version.
    // (Strings: the low word names a DRAM copy kept until destruction.)
    const uint64_t low = lows_->word(r.leaf).load(kAcq);
    if (!vlock::validate(ver, v) || !tree_->validate(r)) continue;
    // Strings: bk's record may be freed once the guard ends: copied here.
    if (found) return std::make_pair(OwnedKey<K>(bk), bv);
    // Nothing <= target in this leaf: the answer, if any, is below its low.
    if (low == 0) return std::nullopt;
    key_before<K>(low_keys_.key(low), &target);  // low != 0 (""): there is one
  }
}

// ---------------------------------------------------------------- writes

template <class K>
Status LbTreeT<K>::update(K key, Value value) {
  if constexpr (kStringKeys) {
    if (Status s = check_key(kLayout, key); !s.ok()) return s;
  }
  const Guard guard(reclaimer_);
  const inner::Route r = lock_leaf_for(key);
  const Leaf l = leaf(r.leaf);
  SlotRef at;
  if (!find_in(l, key, fingerprint(key), &at, nullptr)) {
    unlock_leaf(r.leaf);
    return Status::NotFound();
  }
  leaf_update(l, at, value);
  unlock_leaf(r.leaf);
  return Status::Ok();
}

template <class K>
Status LbTreeT<K>::remove(K key) {
  if constexpr (kStringKeys) {
    if (Status s = check_key(kLayout, key); !s.ok()) return s;
  }
  const Guard guard(reclaimer_);
  const inner::Route r = lock_leaf_for(key);
  const Leaf l = leaf(r.leaf);
  SlotRef at;
  if (!find_in(l, key, fingerprint(key), &at, nullptr)) {
    unlock_leaf(r.leaf);
    return Status::NotFound();
  }
  leaf_remove(l, at);
  if constexpr (kStringKeys) {
    // The slot's bit is clear and durable (leaf_remove's NAW): no slot
    // names the record (it is not copied elsewhere: a live slot's word is
    // only copied by entry moving or a split, which clear the source bit in
    // the NAW that publishes the copy). The word is read before the unlock
    // (then the slot may be reused). A concurrent reader may still hold the
    // offset: retired, freed once no other operation is in flight
    // (RecordReclaimer). After a crash before the free, recovery
    // reclaims it (unmarked).
    const uint64_t word = l.ent(at.block, at.slot).key.load(kRlx);
    unlock_leaf(r.leaf);
    reclaimer_.retire(word);
    reclaimer_.reclaim(*pool_);
  } else {
    unlock_leaf(r.leaf);
  }
  return Status::Ok();
}

template <class K>
Status LbTreeT<K>::insert(K key, Value value) {
  // The slot's key word. String keys: the key's record, written and
  // persisted here (flush, fence), before any lock, and published by
  // leaf_insert's bitmap NAW (key_record.h: a crash before it leaves an
  // unreachable record, which recovery reclaims); freed at once if the
  // insert fails (never published).
  uint64_t word = 0;
  if (Status s = new_slot_word<K>(*pool_, kLayout, key, {"lbtree.insert.key_record"}, &word);
      !s.ok()) {
    return s;
  }
  const Guard guard(reclaimer_);
  const uint8_t f = fingerprint(key);
  const inner::Route r = lock_leaf_for(key);
  const Leaf l = leaf(r.leaf);
  if (find_in(l, key, f, nullptr, nullptr)) {
    unlock_leaf(r.leaf);
    if constexpr (kStringKeys) free_key_record(*pool_, word);
    return Status::AlreadyExists();
  }
  if (insert_in(l, f, word, value)) {
    unlock_leaf(r.leaf);
    return Status::Ok();
  }
  return split_and_insert(r, key, f, word, value);
}

// Logless split (Algorithm 3, §3.4 for multi-256 B leaves) of the full leaf L
// at `off`, whose lock the caller holds, with the insert of (key, value): a
// key >= the split key goes into N as part of the split (as the authors'
// code does), a smaller one into L after it. Releases L's lock.
//
// Crash argument. (1) The new leaf N is allocated before anything changes
// (OutOfSpace: nothing changed). N receives the upper half of L's entries,
// plus the new entry when its key goes to N, in key order (7 or 8 per 256 B
// block, in the block's last slots: its header line stays free), live
// headers with their bits and fingerprints, alt = 0, sibling[0] =
// L's live sibling; the lines of N that were written are
// flushed while nothing points to it (a crash leaves an unreachable block
// that recovery reclaims); step (2)'s fence makes them durable.
// (2) L's unused sibling pointer sibling[!alt] := N, and for each block j >= 1
// the spare header := the live one without the moved bits; these are
// persisted while alt still selects the old pointer and headers, so they are
// invisible. (3) One NAW of L's word 0 flips alt and clears the moved bits
// of block 0: before it, L holds all its entries and links to its old
// sibling; after it, L holds the lower half (its live headers are the spare
// ones written in step 2), links to N, and N holds the upper half and links
// to L's old sibling. Every key is in exactly one leaf of the chain, in key
// order, in either state. No log. A new entry in N is thus absent before
// the NAW and present after it, with the split: the insert is atomic with
// it. (4) Otherwise the new entry goes into L by Algorithm 2 after the NAW;
// a crash between the two leaves the split done and the key absent.
//
// String keys: N's slots receive the moved entries' key words (record
// offsets) and their fingerprints, copied; before the NAW only L's live
// slots name those records (N is unreachable), after it only N's (the NAW
// clears L's bits), so every record stays named by exactly one live slot.
// The new key's record (persisted by insert() before the split) is named by
// N's slot only after the NAW; before it, it is unreachable and recovery
// reclaims it.
// The separator (the moved first key) goes to the DRAM inner tree and the
// DRAM low key as copies, never as the record, which its key's remove may
// free while the separator stays.
template <class K>
Status LbTreeT<K>::split_and_insert(const inner::Route& at, K key, uint8_t f, uint64_t word,
                                    Value value) {
  const uint64_t off = at.leaf;
  pm::SmoTimer smo_timer;  // the SMO's wall time, when one is counted (pm/counters.h)
  uint64_t noff = 0;
  Status s = pool_->allocator().allocate(leaf_size_, &noff);
  if (!s.ok()) {
    unlock_leaf(off);
    if constexpr (kStringKeys) free_key_record(*pool_, word);  // never published
    return s;
  }
  pm::count_smo();
  const Leaf l = leaf(off);
  const Leaf n = leaf(noff);
  const bool alt = l.alt();
  // An entry of L with its fingerprint (copied to N, not recomputed);
  // strings also keep the key (a view of its record); integers are compared
  // by the key word itself.
  struct IntItem {
    uint64_t key, value;  // key word
    uint8_t block, slot, fp;
  };
  struct StringItem {
    uint64_t key, value;  // key word
    uint8_t block, slot, fp;
    std::string_view k;
  };
  using Item = std::conditional_t<kStringKeys, StringItem, IntItem>;
  std::array<Item, kSlots * kMaxBlocks> items;  // [0, cnt) filled below
  // Integers: the items' keys again, contiguous for rank_distinct's vector loads.
  [[maybe_unused]] std::array<uint64_t, kSlots * kMaxBlocks> words;
  uint32_t cnt = 0;
  for (uint32_t j = 0; j < blocks_; ++j) {
    const Header h = load_header(l.live_hdr(j, alt));
    for (uint64_t m = h.bitmap(); m != 0; m &= m - 1) {
      const uint32_t i = static_cast<uint32_t>(__builtin_ctzll(m));
      const uint64_t w = l.ent(j, i).key.load(kRlx);
      Item& it = items[cnt++];
      it.key = w;
      it.value = l.ent(j, i).value.load(kRlx);
      it.block = static_cast<uint8_t>(j);
      it.slot = static_cast<uint8_t>(i);
      it.fp = h.fp(i);
      if constexpr (kStringKeys) {
        it.k = key_of(w);
      } else {
        words[cnt - 1] = w;
      }
    }
  }
  const auto key_of_item = [](const Item& it) {
    if constexpr (kStringKeys) {
      return it.k;
    } else {
      return it.key;
    }
  };
  // The items in key order, by pointer (the 24- or 40-byte items are not
  // moved; the paper sorts the entries themselves, qsortBleaf): the split
  // key is the median, and N receives the upper half in key order, so that
  // its later split frees whole lines (N filled in slot order measured
  // +1.5% PM line writes per insert). Integer keys are ranked by
  // comparison counting (simd::rank_distinct: vector compares, no branch
  // on the keys; std::sort's insertion sort of a leaf's random keys was
  // about 4% of an insert's time, mostly mispredicted branches); a leaf
  // whose keys are not distinct (damage: no operation makes one) gives
  // ranks that are not a permutation and falls back to std::sort, as does
  // a CPU without vector compares (rank_distinct returns false there).
  std::array<const Item*, kSlots * kMaxBlocks + 1> by_key;  // + the new entry
  bool sorted = false;
  if constexpr (!kStringKeys) {
    static_assert(kSlots * kMaxBlocks < simd::kMaxRankKeys);
    std::array<uint8_t, kSlots * kMaxBlocks> rank;
    if (simd::rank_distinct(words.data(), cnt, rank.data())) {
      uint64_t seen = 0;
      for (uint32_t t = 0; t < cnt; ++t) {
        seen |= uint64_t{1} << rank[t];
        by_key[rank[t]] = &items[t];
      }
      sorted = seen == simd::detail::low_bits(cnt);
    }
  }
  if (!sorted) {
    for (uint32_t t = 0; t < cnt; ++t) by_key[t] = &items[t];
    std::sort(by_key.begin(), by_key.begin() + cnt,
              [&](const Item* a, const Item* b) { return key_of_item(*a) < key_of_item(*b); });
  }
  const uint32_t half = cnt / 2;
  const OwnedKey<K> sep(key_of_item(*by_key[half]));  // strings: a DRAM copy
  // The new entry, when its key goes to N (key >= sep), is one more of N's
  // entries, in key order among them (the authors' code does the same): it
  // is written and flushed with N's lines and published by the commit NAW,
  // so no insert (and no NAW) follows the split. block kNewEntry: from no
  // slot of L.
  constexpr uint8_t kNewEntry = 0xff;
  const bool to_new = !(key < sep);
  Item fresh{};
  uint32_t n_entries = cnt - half;  // N's entries: by_key[half, half + n_entries)
  if (to_new) {
    fresh.key = word;
    fresh.value = value;
    fresh.block = kNewEntry;
    fresh.fp = f;
    if constexpr (kStringKeys) fresh.k = key;
    uint32_t p = cnt;
    for (; p > half && key_of_item(fresh) < key_of_item(*by_key[p - 1]); --p) {
      by_key[p] = by_key[p - 1];
    }
    by_key[p] = &fresh;
    ++n_entries;
  }

  // (1) Build N. Its DRAM version is locked before it becomes reachable
  // (a scan may reach it through L's sibling pointer right after the NAW).
  if (!single_) vlock::lock(versions_->word(noff));  // unlock_leaf skips it when single
  uint64_t moved_bits[kMaxBlocks] = {};
  uint32_t next_item = half;        // in by_key[]
  uint32_t lines[kMaxBlocks] = {};  // bit l: line l of block j was written
  for (uint32_t j = 0; j < blocks_; ++j) {
    const uint32_t take = n_entries * (j + 1) / blocks_ - n_entries * j / blocks_;
    Header h;
    lines[j] = 1u << 0 | 1u << 3;  // header, unit 15
    for (uint32_t t = 0; t < take; ++t) {
      const Item& it = *by_key[next_item++];
      const uint32_t i = fill_slot(0, t);
      lines[j] |= 1u << line_of_slot(i);
      pm::store(&n.ent(j, i).key, it.key);
      pm::store(&n.ent(j, i).value, it.value);
      h.set_fp(i, it.fp);
      h.set(i);
      if (it.block != kNewEntry) moved_bits[it.block] |= uint64_t{1} << it.slot;
    }
    pm::store(&n.b[j].hdr[0], h.w0);
    pm::store(&n.b[j].hdr[1], h.w1);
    pm::store(&n.b[j].tail[0], j == 0 ? l.sibling(alt).load(kRlx) : uint64_t{0});
    pm::store(&n.b[j].tail[1], uint64_t{0});
  }
  for (uint32_t j = 0; j < blocks_; ++j) {
    for (uint32_t ln = 0; ln < 4; ++ln) {
      if (lines[j] & (1u << ln)) pm::flush(n.line(j, ln), pm::kLineSize, {"lbtree.split.new_leaf"});
    }
  }
  // No fence here: the fence of step (2) commits these flushes too, before
  // the commit NAW (same thread).
  lows_->word(noff).store(low_keys_.word(sep), std::memory_order_release);

  // (2) L's spare sibling pointer and spare headers.
  pm::store(&l.sibling(!alt), noff);
  pm::flush(&l.sibling(!alt), sizeof(uint64_t), {"lbtree.split.spare"});
  for (uint32_t j = 1; j < blocks_; ++j) {
    Header h = load_header(l.live_hdr(j, alt));
    h.w0 &= ~moved_bits[j];
    std::atomic<uint64_t>* spare = l.spare_hdr(j, alt);
    pm::store(&spare[1], h.w1);
    pm::store(&spare[0], h.w0);
    pm::flush(spare, 2 * sizeof(uint64_t), {"lbtree.split.spare"});
  }
  pm::fence({"lbtree.split.spare"});

  // (3) Commit: one NAW of L's word 0. Its flush is needed: when the key
  // goes to N below, nothing else flushes L's line 0 before the insert is
  // acknowledged (see the ablation note "lbtree.split.commit/flush").
  const uint64_t w0 = l.word0().load(kRlx);
  pm::naw(&l.word0(), (w0 ^ kAltBit) & ~moved_bits[0], {"lbtree.split.commit"});
  // The DRAM leaf count. One thread: a plain add (pm::bump), since a locked
  // one would wait right here for the commit's clwb to complete
  // (InnerTreeT's single_writer says why that matters).
  if (single_) {
    pm::bump(leaves_);
  } else {
    leaves_.fetch_add(1, kRlx);
  }

  // The insert proper: into N it was part of the split (above); into L,
  // now, into a slot the split freed (Algorithm 2). A crash before it leaves
  // the split done and the key absent: the insert is wholly absent.
  const bool inserted = to_new || insert_in(l, f, word, value);
  // Route keys >= sep to N, then let go of N and L (L last: see the
  // Route/validate protocol in inner_tree.h). `at` lets the inner tree skip
  // its descent when the level-1 node that routed to L is unchanged and
  // has room.
  tree_->insert_separator(off, sep, noff, &at);
  unlock_leaf(noff);
  unlock_leaf(off);
  if (!inserted) {  // a half of a split leaf with no free slot: a damaged leaf
    if constexpr (kStringKeys) free_key_record(*pool_, word);  // never published
    return Status::Corruption("lbtree: no free slot in a leaf just split at " + hex(off));
  }
  return Status::Ok();
}

// ---------------------------------------------------------------- bulk load

// Bulk load (paper §4, "bulk loading at a fill factor"): the pairs are cut
// into leaves of ceil(fill * capacity) entries (at least 1), each leaf's
// entries spread evenly over its 256 B blocks and placed header line last.
//
// Crash argument. Every new leaf (the second one on) is allocated first
// (OutOfSpace: nothing changed, blocks freed), filled, linked to the next
// (sibling[0]) and persisted while unreachable. The first leaf's entries go into
// the head leaf, which is empty: its slots are free, so writing them, the
// fingerprints of word 1, the spare headers of blocks >= 1 and the spare
// sibling pointer (-> the second leaf) changes nothing visible; the head is
// persisted; then one NAW of its word 0 sets its bitmap and flips alt,
// publishing the whole chain at once. A crash before the NAW leaves the empty
// tree (the new leaves are reclaimed by recovery); after it, every leaf.
// String keys: every key's record is written and persisted (store_key_record)
// before the first leaf is filled, so the records are durable before the
// NAW publishes the slots that name them; before it they are unreachable
// (reclaimed by recovery), and OutOfSpace frees them.
template <class K>
Status LbTreeT<K>::bulk_load(std::span<const std::pair<K, Value>> sorted) {
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (Status s = check_key(kLayout, sorted[i].first); !s.ok()) return s;
    if (i > 0 && !(sorted[i - 1].first < sorted[i].first)) {
      return Status::InvalidArgument("lbtree bulk_load: keys not strictly ascending at pair " +
                                     std::to_string(i));
    }
  }
  const Leaf head = leaf(root_->head);
  const bool halt = head.alt();
  // An empty tree is a fresh one (one empty leaf) or one emptied by removes
  // (its empty leaves stay on the chain). The commit below drops the leaves
  // after the head from the chain; they are freed after it.
  if (leaf_count(head) != 0)
    return Status::InvalidArgument("lbtree bulk_load: the tree is not empty");
  std::vector<uint64_t> old;
  for (uint64_t off = head.sibling(halt).load(kRlx); off != 0;) {
    const Leaf l = leaf(off);
    if (leaf_count(l) != 0)
      return Status::InvalidArgument("lbtree bulk_load: the tree is not empty");
    old.push_back(off);
    off = l.sibling(l.alt()).load(kRlx);
  }
  if (sorted.empty()) return Status::Ok();
  const uint32_t cap = head.capacity();
  const uint32_t per = std::clamp<uint32_t>(
      static_cast<uint32_t>(std::ceil(fill_ * static_cast<double>(cap) - 1e-9)), 1, cap);
  const size_t nleaves = (sorted.size() + per - 1) / per;
  std::vector<uint64_t> offs(nleaves);
  offs[0] = root_->head;
  for (size_t i = 1; i < nleaves; ++i) {
    Status s = pool_->allocator().allocate(leaf_size_, &offs[i]);
    if (!s.ok()) {
      for (size_t j = 1; j < i; ++j) pool_->allocator().free(offs[j]);
      return s;
    }
  }
  // String keys: the records, persisted, before any leaf names them.
  std::vector<uint64_t> records;
  if constexpr (kStringKeys) {
    records.resize(sorted.size());
    for (size_t i = 0; i < sorted.size(); ++i) {
      Status s = store_key_record(*pool_, sorted[i].first, &records[i], {"lbtree.bulk.key_record"});
      if (!s.ok()) {
        for (size_t j = 0; j < i; ++j) free_key_record(*pool_, records[j]);
        for (size_t j = 1; j < nleaves; ++j) pool_->allocator().free(offs[j]);
        return s;
      }
    }
  }
  // The key word of pair i.
  auto word_at = [&](size_t i) -> uint64_t {
    if constexpr (kStringKeys) {
      return records[i];
    } else {
      return sorted[i].first;
    }
  };
  // Fills leaf `idx` (its live headers are selected by `alt`; for the head,
  // the spare ones) with its pairs; returns block 0's header.
  auto fill_leaf = [&](size_t idx, bool alt) -> Header {
    const Leaf l = leaf(offs[idx]);
    const size_t b = idx * per;
    const uint32_t c = static_cast<uint32_t>(std::min<size_t>(per, sorted.size() - b));
    Header h0;
    uint32_t k = 0;
    for (uint32_t j = 0; j < blocks_; ++j) {
      const uint32_t take = c * (j + 1) / blocks_ - c * j / blocks_;
      const uint32_t hl = l.header_line(j, alt);
      Header h;
      for (uint32_t t = 0; t < take; ++t, ++k) {
        const uint32_t i = fill_slot(hl, t);
        pm::store(&l.ent(j, i).key, word_at(b + k));
        pm::store(&l.ent(j, i).value, sorted[b + k].second);
        h.set_fp(i, fingerprint(sorted[b + k].first));
        h.set(i);
      }
      if (j == 0) {
        h0 = h;
      } else {
        std::atomic<uint64_t>* hp = l.live_hdr(j, alt);
        pm::store(&hp[1], h.w1);
        pm::store(&hp[0], h.w0);
      }
    }
    pm::store(&l.sibling(alt), idx + 1 < nleaves ? offs[idx + 1] : uint64_t{0});
    return h0;
  };
  for (size_t idx = nleaves; idx-- > 1;) {
    const Leaf l = leaf(offs[idx]);
    const Header h0 = fill_leaf(idx, false);
    pm::store(&l.b[0].hdr[1], h0.w1);
    pm::store(&l.b[0].hdr[0], h0.w0);
    pm::store(&l.sibling(true), uint64_t{0});
    for (uint32_t j = 1; j < blocks_; ++j) {
      pm::store(&l.b[j].tail[0], uint64_t{0});
      pm::store(&l.b[j].tail[1], uint64_t{0});
    }
    pm::persist(l.b, leaf_size_, {"lbtree.bulk.leaf"});
  }
  // An emptied tree's anchors may name leaves the commit drops: first the
  // head alone becomes the anchor (a valid anchor set for the old chain and
  // the new one, since recovery walks the chain from the head), so that no
  // crash leaves an anchor on a dropped leaf. A fresh tree's only anchor is
  // the head already: nothing is written.
  if (!old.empty()) write_anchors({root_->head});
  const Header h0 = fill_leaf(0, !halt);
  pm::store(&head.b[0].hdr[1], h0.w1);  // fingerprints of free slots only
  pm::persist(head.b, leaf_size_, {"lbtree.bulk.head"});
  pm::naw(&head.word0(), h0.w0 | (halt ? 0 : kAltBit), {"lbtree.bulk.commit"});

  // DRAM side: inner nodes at the fill factor, low keys, anchors.
  std::vector<LeafRef> refs(nleaves);
  for (size_t i = 0; i < nleaves; ++i) {
    refs[i] = {i == 0 ? OwnedKey<K>{} : OwnedKey<K>(sorted[i * per].first), offs[i]};
    lows_->word(offs[i]).store(low_keys_.word(refs[i].first), kRlx);
  }
  Status s = tree_->build(refs, fill_);
  if (!s.ok()) return s;
  // The dropped empty leaves are unreachable since the commit (a crash from
  // there on has recovery free them); free them for this session now that
  // no DRAM route names them.
  // A freed leaf is zeroed first, so that a free block of the leaf class is
  // always zero (check_lost_leaves_of: its stale entries could otherwise be
  // taken for lost keys after a later crash). A crash mid-zeroing leaves an
  // empty leaf that no route reaches: the next recovery frees it, and its
  // lost-leaf check finds no live entry in it.
  for (uint64_t off : old) {
    this->zero_block(off, "lbtree.bulk.free_old");
    pool_->allocator().free(off);
  }
  leaves_.store(nleaves);
  write_anchors(spread_anchors());
  return Status::Ok();
}

// ---------------------------------------------------------------- recovery

// Recovery (§3.5): validate the root object and the live anchor array, then
// rebuild the DRAM inner nodes from the leaf chain in parallel. The anchors
// cut the chain into segments [anchor_i, anchor_i+1); each of `threads`
// threads walks whole segments: checks each leaf's offset, marks it reachable
// (Allocator::mark_reachable is thread-safe and refuses a block marked twice,
// which also catches a cycle or an anchor that is not on the chain), clears
// a lock bit left set by a crash (store + flush; one fence per thread), and
// collects (min key, leaf). What the walk reached is checked against the
// pool's close record (common/persistent.h: on a cleanly closed pool a lost
// leaf is Corruption and nothing is reclaimed); then the allocator frees
// every unmarked block (e.g. the new leaf of a split whose commit NAW was
// lost). The chain order
// (every key of a leaf below every key of the next non-empty leaf) is checked
// across segments, and InnerTree::build_segments builds the level-1 nodes of
// each segment in parallel and the upper levels on top.
//
// Empty leaves get no separator of their own: their range joins the previous
// leaf's (they stay on the chain, scans skip them, and no insert reaches them
// again). The head leaf always gets one, with low key 0.
//
// Every PM write of recovery (lock bits, anchors) is idempotent, so a crash
// during recovery and a second recovery reach the same state.
template <class K>
Status LbTreeT<K>::recover(unsigned threads) {
  std::vector<uint64_t> anchor;
  if (Status s = open_root_and_anchors(&anchor); !s.ok()) return s;
  versions_ = std::make_unique<LockTable>(pool_->size(), block_class());
  lows_ = std::make_unique<LockTable>(pool_->size(), block_class());
  tree_ = std::make_unique<inner::InnerTreeT<K>>(kInnerNodeBytes, single_);

  const auto r0 = std::chrono::steady_clock::now();
  // The crash simulator follows one thread at a time: recover serially there.
  unsigned nthreads = std::max(1u, threads);
  if (pm::current_config().mode == pm::Mode::kCrashSim) nthreads = 1;
  nthreads = static_cast<unsigned>(std::min<size_t>(nthreads, anchor.size()));
  // The walk writes nothing structural (lock bits only), so the pass checks
  // what it reached against the close record before anything changes.
  std::vector<std::vector<WalkedLeaf>> seg;
  Status s = this->reclaim_unreachable(
      layout<K>(),
      [&](pm::Allocator& alloc, uint64_t* keys) {
        Status w = walk_chain(anchor, nthreads, alloc, &seg);
        for (const auto& sg : seg) {
          for (const WalkedLeaf& li : sg) *keys += li.keys;
        }
        return w;
      },
      [&](pm::Allocator& alloc) { return check_lost_leaves_of(alloc, seg); });
  if (!s.ok()) return s;
  s = rebuild_from(seg, nthreads);
  if (!s.ok()) return s;
  rebuild_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - r0).count();
  rebuild_threads_ = nthreads;
  respread_anchors(seg, anchor);
  ready_ = true;
  return Status::Ok();
}

// After a crash (common/persistent.h, check_lost_leaves), integer keys: an
// unreachable block of the leaf class is a whole leaf when every live slot
// of every block's live header (alt bit) has the fingerprint of its key and
// none holds the all-zero entry (a split's new leaf left partly written).
// A key is held when the walked non-empty leaf covering it (the last whose
// smallest key is <= the key; the chain is in key order) holds it. The only
// legitimate whole leaf off the chain is the new leaf of a logless split
// whose commit NAW was lost: the split persists it before the NAW that
// links it and clears the moved bits in the old leaf, so its keys are all
// still the old leaf's, but for the key being inserted when it went to the
// new leaf (one unheld key allowed). lbtree frees a leaf only in bulk_load (the empty
// ones after the head, zeroed first), so no other block of the class holds
// anything. String keys: no check (a live slot names a key record, which
// would have to be checked before it is read).
template <class K>
Status LbTreeT<K>::check_lost_leaves_of(pm::Allocator& alloc,
                                        const std::vector<std::vector<WalkedLeaf>>& seg) {
  if constexpr (kStringKeys) {
    return Status::Ok();
  } else {
    auto live_keys = [&](uint64_t off, std::vector<uint64_t>* keys) {
      const bool whole = for_each_live_slot(leaf(off), [keys](const Entry& e, uint8_t fp) {
        const uint64_t k = e.key.load(kRlx);
        if ((k == 0 && e.value.load(kRlx) == 0) || fp != fingerprint(k)) return false;
        keys->push_back(k);
        return true;
      });
      return whole && !keys->empty();
    };
    auto ranges = [&](std::vector<std::pair<uint64_t, uint64_t>>* r) {
      for (const auto& sg : seg) {
        for (const WalkedLeaf& w : sg) {
          if (!w.empty) r->emplace_back(w.min, w.off);
        }
      }
    };
    auto leaf_has = [&](uint64_t off, uint64_t k) {
      return leaf_find(leaf(off), k, nullptr, nullptr);
    };
    // The split writes the key being inserted into N when it belongs there,
    // before the link (split_and_insert): one key of a legitimate N may be
    // held nowhere, as in fptree.
    return this->check_lost_leaves(layout<K>(), alloc, leaf_size_, live_keys, ranges, leaf_has,
                                   "lbtree.recover.lost_leaf_check", 1);
  }
}

// The root object, its leaf size and head, and the live anchor array
// (distinct valid leaf offsets, the head first), before anything is read
// through them. Errors: Corruption naming the bad field.
template <class K>
Status LbTreeT<K>::open_root_and_anchors(std::vector<uint64_t>* anchor) {
  if (Status s = this->open_root_object(layout<K>(), kRootMagic, &root_, kRootBytes); !s.ok())
    return s;
  if (!valid_leaf_size(root_->leaf_size)) {
    return Status::Corruption("lbtree: root object has invalid leaf size " +
                              std::to_string(root_->leaf_size));
  }
  leaf_size_ = static_cast<uint32_t>(root_->leaf_size);
  blocks_ = leaf_size_ / kBlockBytes;
  if (!leaf_offset_ok(root_->head)) {
    return Status::Corruption("lbtree: head leaf offset " + hex(root_->head) + " invalid");
  }
  const uint64_t sel = root_->selector.load(kAcq);
  if (sel > 1) return Status::Corruption("lbtree: anchor selector " + hex(sel) + " invalid");
  const AnchorArray& aa = root_->anchors[sel];
  if (aa.count == 0 || aa.count > kAnchorSlots || aa.leaf[0] != root_->head) {
    return Status::Corruption("lbtree: live anchor array invalid (count " +
                              std::to_string(aa.count) + ")");
  }
  anchor->assign(aa.leaf, aa.leaf + aa.count);
  std::unordered_set<uint64_t> seen;
  for (uint64_t a : *anchor) {
    if (!leaf_offset_ok(a) || !seen.insert(a).second) {
      return Status::Corruption("lbtree: anchor " + hex(a) + " invalid or repeated");
    }
  }
  return Status::Ok();
}

// Segment i: from anchor i up to (not including) anchor i+1, or the chain's
// end. Marks each leaf reachable (a block marked twice is a cycle or an
// anchor off the chain), clears a lock bit left by an earlier version's
// writer (store + flush; one fence per segment), records the leaf's key
// range and count, and sets its DRAM low key. Errors: Corruption.
template <class K>
Status LbTreeT<K>::walk_segment(const std::vector<uint64_t>& anchor, size_t i, pm::Allocator& alloc,
                                std::vector<WalkedLeaf>* out) {
  const uint64_t stop = i + 1 < anchor.size() ? anchor[i + 1] : 0;
  const uint64_t head = root_->head;
  bool dirty = false;
  Status st;
  for (uint64_t off = anchor[i]; off != stop;) {
    if (off == 0) {
      st = Status::Corruption("lbtree: anchor " + hex(stop) + " is not on the chain");
      break;
    }
    if (!leaf_offset_ok(off)) {
      st = Status::Corruption("lbtree: leaf offset " + hex(off) + " invalid");
      break;
    }
    if (Status ms = alloc.mark_reachable(off); !ms.ok()) {
      st = Status::Corruption("lbtree: leaf " + hex(off) +
                              " reached twice (cycle or bad anchor): " + ms.ToString());
      break;
    }
    const Leaf l = leaf(off);
    const uint64_t w0 = l.word0().load(kRlx);
    // This version never sets the lock bit; a pool written by an earlier
    // one (which took it as the writer lock) may hold it after a crash.
    if ((w0 & kLockBit) != 0) {
      pm::store(&l.word0(), w0 & ~kLockBit);
      pm::flush(&l.word0(), sizeof(uint64_t), {"lbtree.recover.unlock"});
      dirty = true;
    }
    const bool alt = (w0 & kAltBit) != 0;
    WalkedLeaf li{off, {}, {}, 0, true};
    K lo{}, hi{};  // the leaf's smallest and largest key so far
    for (uint32_t j = 0; j < blocks_ && st.ok(); ++j) {
      const Header h = load_header(l.live_hdr(j, alt));
      if (j > 0 && (h.w0 & (kLockBit | kAltBit)) != 0) {
        st = Status::Corruption("lbtree: leaf " + hex(off) + " block " + std::to_string(j) +
                                " header has lock/alt bits");
        break;
      }
      for (uint64_t m = h.bitmap(); m != 0; m &= m - 1) {
        const uint64_t w = l.ent(j, static_cast<uint32_t>(__builtin_ctzll(m))).key.load(kRlx);
        if constexpr (kStringKeys) {
          // Checked (a block holding its length) and marked before its bytes
          // are read; a record named by two live slots is refused here.
          if (Status ms = mark_key_record(*pool_, kLayout, w); !ms.ok()) {
            st = ms;
            break;
          }
        }
        const K k = key_of(w);
        lo = li.empty || k < lo ? k : lo;
        hi = li.empty || k > hi ? k : hi;
        li.empty = false;
        ++li.keys;
      }
    }
    if (!st.ok()) break;
    if (!li.empty) {
      li.min = OwnedKey<K>(lo);
      li.max = OwnedKey<K>(hi);
    }
    if (off == head || !li.empty) {
      lows_->word(off).store(off == head ? 0 : low_keys_.word(lo), kRlx);
    }
    out->push_back(li);
    off = l.sibling(alt).load(kRlx);
  }
  if (dirty) pm::fence({"lbtree.recover.unlock"});
  return st;
}

// Every segment, each walked whole by one of `nthreads` threads (segment i
// by thread i mod nthreads); the first error of any segment, in segment
// order.
template <class K>
Status LbTreeT<K>::walk_chain(const std::vector<uint64_t>& anchor, unsigned nthreads,
                              pm::Allocator& alloc, std::vector<std::vector<WalkedLeaf>>* seg) {
  const size_t nseg = anchor.size();
  seg->assign(nseg, {});
  std::vector<Status> seg_status(nseg);
  auto run = [&](unsigned t) {
    for (size_t i = t; i < nseg; i += nthreads) {
      seg_status[i] = walk_segment(anchor, i, alloc, &(*seg)[i]);
    }
  };
  std::vector<std::thread> workers;
  for (unsigned t = 1; t < nthreads; ++t) workers.emplace_back(run, t);
  run(0);
  for (auto& th : workers) th.join();
  for (const Status& ss : seg_status) {
    if (!ss.ok()) return ss;
  }
  return Status::Ok();
}

// Checks the chain order across all leaves (every key of a leaf below every
// key of the next non-empty leaf; key 0 only in the head) and builds the
// DRAM inner nodes over the (low key, leaf) pairs of each segment in
// parallel (InnerTree::build_segments). Errors: Corruption.
template <class K>
Status LbTreeT<K>::rebuild_from(const std::vector<std::vector<WalkedLeaf>>& seg,
                                unsigned nthreads) {
  const size_t nseg = seg.size();
  const uint64_t head = root_->head;
  std::vector<std::vector<LeafRef>> refs(nseg);
  bool any = false;
  OwnedKey<K> prev_max{};
  uint64_t total = 0;
  for (size_t i = 0; i < nseg; ++i) {
    for (const WalkedLeaf& li : seg[i]) {
      ++total;
      if (!li.empty) {
        if (any && li.min <= prev_max) {
          return Status::Corruption("lbtree: leaf " + hex(li.off) +
                                    " holds a key not above the previous leaf's keys");
        }
        any = true;
        prev_max = li.max;
      }
      if (li.off == head) {
        refs[i].emplace_back(OwnedKey<K>{}, li.off);
      } else if (!li.empty) {
        if (li.min == OwnedKey<K>{}) {
          return Status::Corruption("lbtree: the smallest key (0 or \"\") in leaf " + hex(li.off) +
                                    " after the head");
        }
        refs[i].emplace_back(li.min, li.off);
      }
    }
  }
  Status s = tree_->build_segments(refs, nthreads, fill_);
  if (!s.ok()) return Status::Corruption("lbtree: rebuild: " + s.ToString());
  leaves_.store(total);
  return Status::Ok();
}

// Spreads the anchors evenly over the chain as the walk found it (written
// only when they change; write_anchors is crash-safe by its selector NAW).
template <class K>
void LbTreeT<K>::respread_anchors(const std::vector<std::vector<WalkedLeaf>>& seg,
                                  const std::vector<uint64_t>& anchor) {
  const uint64_t total = leaves_.load();
  std::vector<uint64_t> na;
  const uint64_t k = std::min<uint64_t>(total, kAnchorSlots);
  uint64_t pos = 0;
  for (size_t i = 0; i < seg.size() && na.size() < k; ++i) {
    for (const WalkedLeaf& li : seg[i]) {
      if (na.size() < k && pos == na.size() * total / k) na.push_back(li.off);
      ++pos;
    }
  }
  if (na != anchor) write_anchors(na);
}

// ---------------------------------------------------------------- info, verify

template <class K>
IndexInfo LbTreeT<K>::info() const {
  return this->persistent_info(
      kLayout, kLbTreeDescription,
      {.ordered = true,
       .persistent = true,
       .thread_safe = !single_,
       .string_keys = true,  // the entry's claim, whatever this instance's K
       .bulk_load = true,
       .placement = Placement::kSelective},
      leaf_size_,
      (tree_ ? tree_->dram_bytes() : 0) + (versions_ ? versions_->dram_bytes() : 0) +
          (lows_ ? lows_->dram_bytes() : 0) + low_keys_.dram_bytes());
}

template <class K>
Status LbTreeT<K>::verify(VerifyReport* report) const {
  VerifyReport r;
  std::unordered_set<uint64_t> seen;
  std::vector<uint64_t> chain;
  std::vector<std::vector<OwnedKey<K>>> keys;  // per chain leaf
  bool any = false;
  OwnedKey<K> prev_max{};
  for (uint64_t off = root_->head; off != 0;) {
    if (!leaf_offset_ok(off)) return Status::Corruption("lbtree: leaf offset " + hex(off));
    if (!seen.insert(off).second) return Status::Corruption("lbtree: cycle at leaf " + hex(off));
    const Leaf l = leaf(off);
    const uint64_t w0 = l.word0().load(kAcq);
    if ((w0 & kLockBit) != 0) return Status::Corruption("lbtree: lock bit set in " + hex(off));
    const bool alt = (w0 & kAltBit) != 0;
    std::vector<OwnedKey<K>> ks;
    for (uint32_t j = 0; j < blocks_; ++j) {
      const Header h = load_header(l.live_hdr(j, alt));
      if (j > 0 && (h.w0 & (kLockBit | kAltBit)) != 0) {
        return Status::Corruption("lbtree: block header with lock/alt bits in " + hex(off));
      }
      for (uint64_t m = h.bitmap(); m != 0; m &= m - 1) {
        const uint32_t i = static_cast<uint32_t>(__builtin_ctzll(m));
        const uint64_t w = l.ent(j, i).key.load(kAcq);
        if constexpr (kStringKeys) {
          if (Status cs = check_key_record(*pool_, kLayout, w); !cs.ok()) return cs;
          r.pm_bytes += pool_->allocator().block_size(w);
        }
        const K k = key_of(w);
        if (h.fp(i) != fingerprint(k)) {
          return Status::Corruption("lbtree: fingerprint mismatch in " + hex(off) + " block " +
                                    std::to_string(j) + " slot " + std::to_string(i));
        }
        ks.emplace_back(k);
      }
    }
    std::sort(ks.begin(), ks.end());
    if (std::adjacent_find(ks.begin(), ks.end()) != ks.end()) {
      return Status::Corruption("lbtree: duplicate key in " + hex(off));
    }
    if (!ks.empty()) {
      if (any && ks.front() <= prev_max) {
        return Status::Corruption("lbtree: keys out of order on the chain at " + hex(off));
      }
      any = true;
      prev_max = ks.back();
    }
    r.keys += ks.size();
    chain.push_back(off);
    keys.push_back(std::move(ks));
    off = l.sibling(alt).load(kAcq);
  }
  r.leaves = chain.size();
  if (r.leaves != leaves_.load()) {
    return Status::Corruption("lbtree: " + std::to_string(r.leaves) + " leaves on the chain, " +
                              std::to_string(leaves_.load()) + " counted");
  }
  Status s = tree_->verify();
  if (!s.ok()) return s;
  // The inner nodes route to a subsequence of the chain that starts at the
  // head and holds every non-empty leaf; each routed leaf's keys lie in its
  // range [low, next low).
  const std::vector<LeafRef> routed = tree_->leaves();
  if (routed.empty() || routed.front().second != root_->head) {
    return Status::Corruption("lbtree: the inner nodes do not start at the head leaf");
  }
  size_t p = 0;
  for (size_t q = 0; q < routed.size(); ++q) {
    while (p < chain.size() && chain[p] != routed[q].second) {
      if (!keys[p].empty()) {
        return Status::Corruption("lbtree: non-empty leaf " + hex(chain[p]) +
                                  " is not routed to by the inner nodes");
      }
      ++p;
    }
    if (p == chain.size()) {
      return Status::Corruption("lbtree: inner nodes route to " + hex(routed[q].second) +
                                ", not on the chain (or out of order)");
    }
    const OwnedKey<K> lo = q == 0 ? OwnedKey<K>{} : routed[q].first;
    const bool has_hi = q + 1 < routed.size();
    const OwnedKey<K> hi = has_hi ? routed[q + 1].first : OwnedKey<K>{};
    for (const OwnedKey<K>& k : keys[p]) {
      if (k < lo || (has_hi && k >= hi)) {
        std::string shown;
        if constexpr (kStringKeys) {
          shown = quote_input(k);
        } else {
          shown = std::to_string(k);
        }
        return Status::Corruption("lbtree: key " + shown + " of leaf " + hex(chain[p]) +
                                  " outside its routed range");
      }
    }
    if (low_keys_.key(lows_->word(chain[p]).load(kAcq)) != lo) {
      return Status::Corruption("lbtree: stored low key of " + hex(chain[p]) +
                                " differs from its separator");
    }
    ++p;
  }
  for (; p < chain.size(); ++p) {
    if (!keys[p].empty()) {
      return Status::Corruption("lbtree: non-empty leaf " + hex(chain[p]) + " not routed to");
    }
  }
  r.inner_nodes = tree_->nodes();
  r.height = tree_->height() + 1;
  // String keys: the PM reached is the leaves and the key records
  // (VerifyReport::pm_bytes); integer keys report leaves only (pm_bytes 0).
  if constexpr (kStringKeys) r.pm_bytes += r.leaves * uint64_t{block_class()};
  *report = r;
  return Status::Ok();
}

// ---------------------------------------------------------------- ablation notes

// Ablation notes (issue 3 §4): the flushes and fences whose removal the crash
// lab (`nvindex crashtest --index lbtree --ablate all`) does not catch, and
// why each stays.
template <class K>
std::vector<std::pair<std::string, std::string>> LbTreeT<K>::ablation_notes() const {
  std::vector<std::pair<std::string, std::string>> notes = {
      {"lbtree.create.head",
       "not observable in a crash test: a fresh pool's blocks are zero, which is exactly the empty "
       "head leaf; the flush is needed when the allocator hands out a reused block (e.g. one "
       "reclaimed after a crash during an earlier create), whose old bytes would otherwise "
       "survive a crash behind the published root; its fence is the root object's"},
      {"lbtree.split.commit/flush",
       "needed, but the self-test's scenario misses it: when the key that triggered the split goes "
       "to the new leaf N (written with N, before the commit), nothing after the commit flushes "
       "L's line 0 (L's lock release is a plain store), so L's alt flip is still dirty when the "
       "insert returns and an image keeping none of that line's stores has N unreachable and the "
       "acknowledged key lost; when the key goes to L, leaf_insert's header NAW on L's line 0 "
       "flushes the flip too, so nothing is lost. The self-test's scenario (seed 1, 80 ops, "
       "256 B leaves) splits twice, both times with the key going to L; the lab catches the drop "
       "in scenarios with the key going to N; covered deterministically by "
       "crash_lbtree_images_test LbTreeLoglessSplit.CommitFlushIsNeededWhenTheKeyGoesToTheNewLeaf"},
      {"lbtree.split.commit/fence",
       "needed when the key goes to N: it is then the insert's last fence, and without it the "
       "flush of L's line 0 is still uncommitted when the insert returns (the same loss as a "
       "dropped flush; crash_lbtree_images_test covers it). Redundant when the key goes to L, "
       "the only kind of split in the self-test's scenario: the insert into L that follows at "
       "once ends with its own header NAW's fence, which commits this flush too"},
  };
  return notes;
}

template class LbTreeT<uint64_t>;
template class LbTreeT<std::string_view>;

}  // namespace lbtree

// ---------------------------------------------------------------- factory

namespace {
template <class K>
Status open_lbtree(const IndexOptions& options, std::unique_ptr<Index<K>>* out) {
  // make_index() has checked the leaf size, fill factor and threads; a
  // recovered tree keeps its stored leaf size and rebuilds on
  // options.threads threads.
  using Tree = lbtree::LbTreeT<K>;
  return open_persistent_index<Tree>(
      options, pool_layout(lbtree::kLayout, key_type_of<K>),
      [&](Tree& t) {
        t.set_single_threaded(options.threads <= 1);
        return t.create(options.node_size);
      },
      [&](Tree& t) {
        t.set_single_threaded(options.threads <= 1);
        return t.recover(options.threads);
      },
      out, options.fill_factor);
}
}  // namespace

Status make_lbtree(const IndexOptions& options, std::unique_ptr<Index<uint64_t>>* out) {
  return open_lbtree(options, out);
}

Status make_lbtree_string(const IndexOptions& options,
                          std::unique_ptr<Index<std::string_view>>* out) {
  return open_lbtree(options, out);
}

}  // namespace nvindex
