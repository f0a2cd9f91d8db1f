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

FpTree::FpTree(pm::Pool* pool, double fill) : PersistentIndex(pool), fill_(fill) {}

FpTree::~FpTree() { record_close_keys(); }

uint64_t FpTree::full_mask() const { return (uint64_t{1} << layout_.slots) - 1; }

// Slots whose fingerprint equals fp (SSE2: 16 fingerprints per compare),
// restricted to the C slots; not yet masked by the bitmap. Under
// ThreadSanitizer a scalar loop of atomic loads (the SIMD load is not an
// atomic access).
uint64_t FpTree::match(uint64_t off, uint8_t fp) const {
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

// The live slot holding `key` in the leaf at `off`, or -1. Optimistic readers
// call it between read_lock and validate; every word is an acquire load.
int FpTree::find_slot(uint64_t off, uint64_t key) const {
  uint64_t cand = match(off, fingerprint(key)) & leaf(off)->bitmap.load(kAcq);
  while (cand != 0) {
    const int i = std::countr_zero(cand);
    cand &= cand - 1;
    if (entry(off, static_cast<uint32_t>(i))->key.load(kAcq) == key) return i;
  }
  return -1;
}

inline void FpTree::prefetch_leaf(uint64_t off) const {
  versions_->prefetch(off);
  prefetch_bytes(leaf(off), layout_.node_size);
}

// Writer lock of a leaf: its DRAM version word, taken by CAS (vlock::lock;
// why not the PM lock byte: version_lock.h); optimistic readers wait or
// retry while it is held. Nothing about the lock is persisted, so a crash
// never leaves a leaf locked.
void FpTree::lock_leaf(uint64_t off) {
  // The leaf's lines and its version word are fetched before the lock's
  // CAS, a full barrier: afterwards every miss would be taken one at a time.
  prefetch_leaf(off);
  vlock::lock(versions_->word(off));  // leaves are never obsolete: true
}

void FpTree::unlock_leaf(uint64_t off) { vlock::unlock(versions_->word(off)); }

// Locks the leaf covering `key` (InnerTree protocol: find, lock the leaf,
// validate the route, else unlock and retry). Returns its offset.
uint64_t FpTree::lock_covering(uint64_t key) {
  while (true) {
    const inner::Route r = inner_->find(key);
    lock_leaf(r.leaf);
    if (inner_->validate(r)) return r.leaf;
    unlock_leaf(r.leaf);
  }
}

// Leaf insert (paper §4, insert) into the free slot `slot` of
// the locked leaf at `off`.
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
void FpTree::put_slot(uint64_t off, uint32_t slot, uint64_t key, Value value,
                      const char* entry_site, const char* commit_site) {
  Leaf* l = leaf(off);
  Entry* e = entry(off, slot);
  pm::store(&e->key, key);
  pm::store(&e->value, value);
  if (line_of(e) != line_of(l)) pm::persist(e, kEntryBytes, {entry_site});
  pm::store<uint8_t>(&l->fp[slot], fingerprint(key));
  pm::store(&l->bitmap, l->bitmap.load(kRlx) | uint64_t{1} << slot);
  pm::persist(&l->bitmap, sizeof(uint64_t), {commit_site});
}

// ---------------------------------------------------------------- create

Status FpTree::create(uint32_t node_size) {
  Layout::of(node_size, &layout_);
  versions_ = std::make_unique<LockTable>(pool_->size(), layout_.block);
  lows_ = std::make_unique<LockTable>(pool_->size(), layout_.block);
  inner_ = std::make_unique<inner::InnerTree>();
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
  root_obj_ = pool_->ptr<RootObject>(ro);
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
  const inner::LeafRef first{0, head};
  return inner_->build({&first, 1});
}

// ---------------------------------------------------------------- reads

std::optional<Value> FpTree::lookup(uint64_t key) {
  while (true) {
    const inner::Route r = inner_->find(key);
    // The version word and the leaf's lines are fetched in parallel.
    prefetch_leaf(r.leaf);
    uint64_t v = 0;
    if (!vlock::read_lock(versions_->word(r.leaf), &v)) continue;
    const int i = find_slot(r.leaf, key);
    const Value val = i >= 0 ? entry(r.leaf, static_cast<uint32_t>(i))->value.load(kAcq) : 0;
    // The leaf snapshot must be consistent, and the leaf must still cover
    // key (a split that moved key right bumps the route's version).
    if (!vlock::validate(versions_->word(r.leaf), v) || !inner_->validate(r)) continue;
    if (i >= 0) return val;
    return std::nullopt;
  }
}

size_t FpTree::scan(uint64_t start, size_t count, std::vector<std::pair<uint64_t, Value>>* out) {
  out->clear();
  if (count == 0) return 0;
  // Leaves are never merged, so a leaf's low bound never rises: the leaf a
  // (possibly stale) route names holds no key >= start that lies left of it,
  // and the next pointers read under each leaf's validated version reach
  // every later key exactly once (a split after our read of a leaf moves
  // keys into a leaf that our validated next pointer skips, keys we have
  // already returned).
  uint64_t off = inner_->find(start).leaf;
  uint64_t cursor = start;  // keys < cursor are returned already
  std::vector<std::pair<uint64_t, Value>> buf;
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
      const uint64_t k = e->key.load(kAcq);
      if (k >= cursor) buf.emplace_back(k, e->value.load(kAcq));
    }
    next = l->sibling.load(kAcq);
    if (!vlock::validate(versions_->word(off), v)) continue;
    std::sort(buf.begin(), buf.end());
    for (const auto& kv : buf) {
      out->push_back(kv);
      if (out->size() == count) return count;
    }
    if (!buf.empty()) {
      if (buf.back().first == UINT64_MAX) return out->size();
      cursor = buf.back().first + 1;
    }
    if (next == 0) return out->size();
    off = next;
  }
}

std::optional<std::pair<uint64_t, Value>> FpTree::find_last_less_than(uint64_t key) {
  if (key == 0) return std::nullopt;
  uint64_t target = key - 1;
  while (true) {
    const inner::Route r = inner_->find(target);
    uint64_t v = 0;
    if (!vlock::read_lock(versions_->word(r.leaf), &v)) continue;
    const Leaf* l = leaf(r.leaf);
    bool found = false;
    uint64_t bk = 0, bv = 0;
    uint64_t live = l->bitmap.load(kAcq) & full_mask();
    while (live != 0) {
      const uint32_t i = static_cast<uint32_t>(std::countr_zero(live));
      live &= live - 1;
      const Entry* e = entry(r.leaf, i);
      const uint64_t k = e->key.load(kAcq);
      if (k <= target && (!found || k > bk)) {
        found = true;
        bk = k;
        bv = e->value.load(kAcq);
      }
    }
    if (!vlock::validate(versions_->word(r.leaf), v) || !inner_->validate(r)) continue;
    if (found) return std::make_pair(bk, bv);
    // Nothing <= target in this leaf: the answer, if any, is left of its low
    // key (immutable: leaves are never merged).
    const uint64_t low = lows_->word(r.leaf).load(kAcq);
    if (low == 0) return std::nullopt;
    target = low - 1;
  }
}

// ---------------------------------------------------------------- writes

Status FpTree::insert(uint64_t key, Value value) {
  const uint64_t off = lock_covering(key);
  if (find_slot(off, key) >= 0) {
    unlock_leaf(off);
    return Status::AlreadyExists();
  }
  const uint64_t free = ~leaf(off)->bitmap.load(kRlx) & full_mask();
  Status s;
  if (free != 0) {
    put_slot(off, static_cast<uint32_t>(std::countr_zero(free)), key, value, "fptree.insert.entry",
             "fptree.insert.commit");
  } else {
    s = split_insert(off, key, value);
  }
  unlock_leaf(off);
  return s;
}

uint32_t FpTree::take_log() {
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

void FpTree::release_log(uint32_t i) { log_busy_.fetch_and(~(1u << i), kRel); }

// Leaf split with the split micro-log (paper §4, leaf split; recovery in
// §4), then the insert of (key, value), on the full, locked leaf L at
// `off`.
//
// Steps and crash argument:
//  a) Allocate N (OutOfSpace: nothing changed). Write N: the entries with
//     keys >= sep (the median), plus (key, value) when key >= sep, their
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
// stays locked until that is done) and, when key < sep, (key, value) goes
// into a slot of L freed by the split (an ordinary leaf insert).
Status FpTree::split_insert(uint64_t off, uint64_t key, Value value) {
  pm::SmoTimer smo_timer;  // the SMO's wall time, when one is counted (pm/counters.h)
  uint64_t noff = 0;
  Status s = pool_->allocator().allocate(layout_.node_size, &noff);
  if (!s.ok()) return s;
  pm::count_smo();
  Leaf* l = leaf(off);
  Leaf* n = leaf(noff);
  const uint32_t c = layout_.slots;
  std::array<std::pair<uint64_t, uint32_t>, kMaxSlots> ks;  // (key, slot)
  for (uint32_t i = 0; i < c; ++i) ks[i] = {entry(off, i)->key.load(kRlx), i};
  std::sort(ks.begin(), ks.begin() + c);
  const uint32_t m = c / 2;
  const uint64_t sep = ks[m].first;
  // a) the new leaf
  uint32_t j = 0;
  for (uint32_t i = m; i < c; ++i, ++j) {
    const Entry* src = entry(off, ks[i].second);
    Entry* dst = entry(noff, j);
    pm::store(&dst->key, src->key.load(kRlx));
    pm::store(&dst->value, src->value.load(kRlx));
    pm::store<uint8_t>(&n->fp[j], l->fp[ks[i].second].load(kRlx));
  }
  if (key >= sep) {
    Entry* dst = entry(noff, j);
    pm::store(&dst->key, key);
    pm::store(&dst->value, value);
    pm::store<uint8_t>(&n->fp[j], fingerprint(key));
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
  lows_->word(noff).store(sep, kRel);
  inner_->insert_separator(off, sep, noff);
  if (key < sep) {
    const uint64_t free = ~l->bitmap.load(kRlx) & full_mask();
    put_slot(off, static_cast<uint32_t>(std::countr_zero(free)), key, value, "fptree.insert.entry",
             "fptree.insert.commit");
  }
  return Status::Ok();
}

Status FpTree::update(uint64_t key, Value value) {
  const uint64_t off = lock_covering(key);
  const int i = find_slot(off, key);
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
Status FpTree::remove(uint64_t key) {
  const uint64_t off = lock_covering(key);
  const int i = find_slot(off, key);
  if (i < 0) {
    unlock_leaf(off);
    return Status::NotFound();
  }
  Leaf* l = leaf(off);
  pm::store(&l->bitmap, l->bitmap.load(kRlx) & ~(uint64_t{1} << i));
  pm::persist(&l->bitmap, sizeof(uint64_t), {"fptree.remove.bitmap"});
  unlock_leaf(off);
  return Status::Ok();
}

// Bulk load: see fptree.h. Crash argument: every new leaf is written and
// flushed while unreachable, one fence makes them all durable, then one NAW
// of the head publishes the new chain. A crash before the NAW leaves the
// empty index (the new leaves are unreachable and reclaimed); after it, the
// loaded index (the old head leaf is unreachable and reclaimed).
Status FpTree::bulk_load(std::span<const std::pair<uint64_t, Value>> sorted) {
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
  for (size_t i = 1; i < sorted.size(); ++i) {
    if (!(sorted[i - 1].first < sorted[i].first)) {
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
  for (size_t i = 0; i < nleaves; ++i) {
    Status s = alloc.allocate(layout_.node_size, &leaves[i]);
    if (!s.ok()) {
      for (size_t k = 0; k < i; ++k) alloc.free(leaves[k]);
      return s;
    }
  }
  std::vector<inner::LeafRef> refs(nleaves);
  for (size_t i = 0; i < nleaves; ++i) {
    const uint64_t off = leaves[i];
    Leaf* l = leaf(off);
    const size_t from = i * per;
    const uint32_t cnt = static_cast<uint32_t>(std::min<size_t>(per, sorted.size() - from));
    for (uint32_t j = 0; j < cnt; ++j) {
      Entry* e = entry(off, j);
      pm::store(&e->key, sorted[from + j].first);
      pm::store(&e->value, sorted[from + j].second);
      pm::store<uint8_t>(&l->fp[j], fingerprint(sorted[from + j].first));
    }
    pm::store(&l->bitmap, (uint64_t{1} << cnt) - 1);
    pm::store(&l->sibling, i + 1 < nleaves ? leaves[i + 1] : 0);
    pm::store<uint8_t>(&l->lock, 0);
    pm::flush(l, layout_.entries_offset + cnt * kEntryBytes, {"fptree.bulk.leaf"});
    refs[i] = {i == 0 ? 0 : sorted[from].first, off};
    lows_->word(off).store(refs[i].first, kRel);
  }
  pm::fence({"fptree.bulk.leaves"});
  pm::naw(&root_obj_->head, leaves[0], {"fptree.bulk.publish"});
  // The old chain is unreachable now (a crash from here on has recovery
  // free it); free it for this session once no DRAM route names it.
  Status s = inner_->build(refs);
  if (!s.ok()) return s;
  for (uint64_t off : old) {
    zero_block(off, "fptree.bulk.free_old");  // a free leaf block is zero (check_lost_leaves_of)
    alloc.free(off);
  }
  return Status::Ok();
}

// ---------------------------------------------------------------- recovery

// A leaf offset must be a block of the leaves' class inside the pool, and
// its bitmap must name only the C slots. Never dereferences `off` before the
// range check.
Status FpTree::check_leaf(uint64_t off, const char* what) const {
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

// The leaf chain from the head; Corruption on a bad offset or a cycle.
Status FpTree::walk_chain(std::vector<uint64_t>* chain) const {
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

// Rebuilds the DRAM inner nodes over the chain: (0, head), then (min key,
// leaf) for every later leaf (recovery unlinked the empty ones). Corruption
// if the keys of consecutive leaves are not ascending.
Status FpTree::rebuild_inner(const std::vector<uint64_t>& chain) {
  std::vector<inner::LeafRef> refs;
  refs.reserve(chain.size());
  uint64_t prev_max = 0;
  bool any = false;
  for (size_t i = 0; i < chain.size(); ++i) {
    const uint64_t off = chain[i];
    uint64_t lo = UINT64_MAX, hi = 0;
    uint64_t live = leaf(off)->bitmap.load(kRlx);
    const bool empty = live == 0;
    while (live != 0) {
      const uint32_t s = static_cast<uint32_t>(std::countr_zero(live));
      live &= live - 1;
      const uint64_t k = entry(off, s)->key.load(kRlx);
      lo = std::min(lo, k);
      hi = std::max(hi, k);
    }
    if (i > 0 && empty) {
      return Status::Corruption("fptree: empty leaf " + hex(off) + " left in the chain");
    }
    if (!empty && any && lo <= prev_max) {
      return Status::Corruption("fptree: keys of leaf " + hex(off) +
                                " are not above those of the previous leaf");
    }
    if (!empty) {
      prev_max = hi;
      any = true;
    }
    refs.emplace_back(i == 0 ? 0 : lo, off);
    lows_->word(off).store(refs.back().first, kRel);
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
//  3) Walk the chain from the head, checking every leaf and clearing lock
//     bytes left at 1 (not persisted: a later recovery clears them again).
//  4) Mark the root object and every chain leaf reachable, once each, and
//     check them against the pool's close record (common/persistent.h: on a
//     cleanly closed pool a lost leaf is Corruption, nothing reclaimed); the
//     allocator frees every other block (an undone split's N, leaves of an
//     unpublished bulk load, leaves unlinked by an earlier recovery).
//  4b) Unlink every empty leaf but the head (prev.sibling = leaf.sibling, one
//     aligned store, persisted: the chain loses a leaf with no keys, so the
//     content is unchanged) and free it.
//  5) Rebuild the DRAM inner nodes, check the result with verify() and the
//     key count against the close record.
Status FpTree::recover() {
  if (Status s = open_root_object(kLayout, kRootMagic, &root_obj_, kRootBytes); !s.ok()) return s;
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
  inner_ = std::make_unique<inner::InnerTree>();

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
      if (!s.ok()) return s;
      uint64_t live = leaf(nn)->bitmap.load(kRlx);
      uint64_t nmin = UINT64_MAX;
      bool nonempty = live != 0;
      while (live != 0) {
        const uint32_t i = static_cast<uint32_t>(std::countr_zero(live));
        live &= live - 1;
        nmin = std::min(nmin, entry(nn, i)->key.load(kRlx));
      }
      Leaf* l = leaf(cur);
      const uint64_t old_bits = l->bitmap.load(kRlx);
      uint64_t bits = old_bits;
      for (uint64_t b = old_bits; nonempty && b != 0; b &= b - 1) {
        const uint32_t i = static_cast<uint32_t>(std::countr_zero(b));
        if (entry(cur, i)->key.load(kRlx) >= nmin) bits &= ~(uint64_t{1} << i);
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
  Status s = reclaim_unreachable(
      kLayout,
      [&](pm::Allocator& alloc, uint64_t* keys) {
        for (uint64_t off : chain) {
          if (Status m = alloc.mark_reachable(off); !m.ok()) return m;
          *keys += static_cast<uint64_t>(std::popcount(leaf(off)->bitmap.load(kRlx)));
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
      zero_block(off, "fptree.recover.unlink_zero");
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
// anything.
Status FpTree::check_lost_leaves_of(pm::Allocator& alloc, const std::vector<uint64_t>& chain) {
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
      if (entry(off, static_cast<uint32_t>(std::countr_zero(b)))->key.load(kRlx) == k) return true;
    }
    return false;
  };
  // The split writes the key being inserted into N when it belongs there,
  // before the link: one key of a legitimate N may be held nowhere.
  return check_lost_leaves(kLayout, alloc, layout_.node_size, live_keys, ranges, leaf_has,
                           "fptree.recover.lost_leaf_check", 1);
}

// ---------------------------------------------------------------- info, verify

IndexInfo FpTree::info() const {
  return persistent_info(kLayout, kFpTreeDescription,
                         {.ordered = true,
                          .persistent = true,
                          .thread_safe = true,
                          .bulk_load = true,
                          .placement = Placement::kSelective},
                         layout_.node_size,
                         (inner_ ? inner_->dram_bytes() : 0) +
                             (versions_ ? versions_->dram_bytes() : 0) +
                             (lows_ ? lows_->dram_bytes() : 0));
}

Status FpTree::verify(VerifyReport* report) const {
  std::vector<uint64_t> chain;
  Status s = walk_chain(&chain);
  if (!s.ok()) return s;
  for (uint32_t li = 0; li < kSplitLogs; ++li) {
    if (root_obj_->logs[li].cur.load(kRlx) != 0) {
      return Status::Corruption("fptree: split log " + std::to_string(li) + " is active");
    }
  }
  std::vector<inner::LeafRef> refs;
  s = inner_->verify_routes(
      kLayout, chain, [&](uint64_t off) { return lows_->word(off).load(kRlx); }, &refs);
  if (!s.ok()) return s;
  VerifyReport r;
  bool any = false;
  uint64_t prev_max = 0;
  for (size_t i = 0; i < chain.size(); ++i) {
    const uint64_t off = chain[i];
    const Leaf* l = leaf(off);
    if (l->lock.load(kRlx) != 0) return Status::Corruption("fptree: leaf " + hex(off) + " locked");
    const uint64_t lo = refs[i].first;
    const bool bounded = i + 1 < refs.size();
    const uint64_t hi = bounded ? refs[i + 1].first : 0;
    std::vector<uint64_t> keys;
    for (uint64_t b = l->bitmap.load(kRlx); b != 0; b &= b - 1) {
      const uint32_t slot = static_cast<uint32_t>(std::countr_zero(b));
      const uint64_t k = entry(off, slot)->key.load(kRlx);
      if (l->fp[slot].load(kRlx) != fingerprint(k)) {
        return Status::Corruption("fptree: fingerprint mismatch in leaf " + hex(off) + " slot " +
                                  std::to_string(slot));
      }
      if (k < lo || (bounded && k >= hi)) {
        return Status::Corruption("fptree: key outside its leaf's range in leaf " + hex(off));
      }
      keys.push_back(k);
    }
    std::sort(keys.begin(), keys.end());
    if (std::adjacent_find(keys.begin(), keys.end()) != keys.end()) {
      return Status::Corruption("fptree: duplicate key in leaf " + hex(off));
    }
    if (!keys.empty()) {
      if (any && keys.front() <= prev_max) {
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
  *report = r;
  return Status::Ok();
}

// ---------------------------------------------------------------- ablation notes

// Ablation notes (issue 3 §4): the flushes and fences whose removal the crash
// lab (`nvindex crashtest --index fptree --ablate all`) does not catch, and
// why each stays.
std::vector<std::pair<std::string, std::string>> FpTree::ablation_notes() const {
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

}  // namespace fptree

// ---------------------------------------------------------------- factory

Status make_fptree(const IndexOptions& options, std::unique_ptr<Index<uint64_t>>* out) {
  // make_index() has checked the node size and fill factor; a recovered
  // tree keeps its own node size.
  return open_persistent_index<fptree::FpTree>(
      options, fptree::kLayout, [&](fptree::FpTree& t) { return t.create(options.node_size); },
      [&](fptree::FpTree& t) { return t.recover(); }, out, options.fill_factor);
}

}  // namespace nvindex
