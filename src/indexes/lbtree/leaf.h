// lbtree leaf layer: the persistent LB+-tree leaf (Liu, Chen, Wang, "LB+-Trees:
// Optimizing Persistent Index Performance on 3DXPoint Memory", VLDB 2020, §3.1
// layout, Algorithm 1 search, Algorithm 2 insert with entry moving, Algorithm 3
// logless split, §3.4 multi-256 B leaves with distributed headers).
//
// A leaf is m 256 B blocks (m = 1, 2, 3 or 4: 256, 512, 768, 1024 B), stored in
// one allocator block aligned to its class size (256, 512, 1024, 1024 B), so
// every 256 B block is 256 B aligned: four 64 B lines, sixteen 16 B units.
//
// Block 0 (every leaf):
//   unit  bytes    line  field
//   ----  -------  ----  ----------------------------------------------------
//      0    0..1      0  header word (16 bit, little endian):
//                          bits 0..13  slot bitmap (bit i: slot i in use)
//                          bit  14     lock bit: the paper's writer lock;
//                                      always written 0 (writers lock a
//                                      DRAM version, lbtree.h), cleared by
//                                      recovery in older pools
//                          bit  15     alt bit (which sibling pointer, and
//                                      which header of blocks 1..m-1, is live)
//      0    2..15     0  fingerprints fp[0..13], one byte per slot
//                        (fp[0..5] share the 8-byte word with the header
//                        word: "word 0"; fp[6..13] are "word 1")
//    1-3   16..63     0  slots 0..2:   {8 B key, 8 B value}
//    4-7   64..127    1  slots 3..6
//   8-11  128..191    2  slots 7..10
//  12-14  192..239    3  slots 11..13
//     15  240..247    3  sibling pointer sibling[0] (pool offset, 0 = last leaf)
//     15  248..255    3  sibling pointer sibling[1]; sibling[alt] is live
//
// Blocks 1..m-1 (multi-256 B leaves, distributed headers, paper §3.4): the same
// 14 slots in units 1..14, and two headers, unit 0 and unit 15 (same format as
// block 0's unit 0, with the lock and alt bits always 0). Block 0's alt bit
// chooses the live one: alt = 0 -> unit 0 (header line = line 0), alt = 1 ->
// unit 15 (header line = line 3). Either way the header line holds three
// slots (0..2 or 11..13), so entry moving works the same in every block. One
// NAW of block 0's word 0 flips alt: it switches the sibling pointer and every
// block's header at once (the logless split of a multi-256 B leaf).
//
// Invariants (every durable state keeps them): a slot's key, value and
// fingerprint are meaningful only while its bit is set in the live header of
// its block; the keys of a leaf are distinct; every key of a leaf is smaller
// than every key of the leaves after it on the sibling chain.
//
// Concurrency: writers hold the leaf's DRAM version lock (lbtree.h);
// optimistic readers load every
// word with acquire loads and validate a DRAM version (see lbtree.h). Every
// PM word is a std::atomic<uint64_t> so that no compiler can tear it and so
// that optimistic reads are race-free in the C++ memory model.
#pragma once

#include <emmintrin.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "indexes/common/entry.h"
#include "indexes/common/fingerprint.h"
#include "nvindex/pm/persist.h"
#include "util/dcheck.h"

namespace nvindex::lbtree {

/// Bytes per 256 B block (Optane's XPLine).
inline constexpr uint32_t kBlockBytes = 256;
/// Slots per 256 B block.
inline constexpr uint32_t kSlots = 14;
/// Slot bitmap bits of a header word.
inline constexpr uint64_t kBitmapMask = 0x3fff;
/// Lock bit of block 0's header word.
inline constexpr uint64_t kLockBit = uint64_t{1} << 14;
/// Alt bit of block 0's header word.
inline constexpr uint64_t kAltBit = uint64_t{1} << 15;
/// Most blocks per leaf (1 KiB).
inline constexpr uint32_t kMaxBlocks = 4;

/// Line (0..3) of slot i within its block: slot i is unit i + 1.
inline constexpr uint32_t line_of_slot(uint32_t i) { return (i + 1) / 4; }
/// Bitmap mask of the slots in line l (0..3) of a block.
inline constexpr uint64_t line_mask(uint32_t l) {
  return l == 0 ? 0x7 : l == 1 ? 0x78 : l == 2 ? 0x780 : 0x3800;
}

/// One entry slot: the shared 16 B slot (common/entry.h).
using nvindex::Entry;

/// One 256 B block (see the table above).
struct alignas(kBlockBytes) Block {
  std::atomic<uint64_t> hdr[2];   ///< unit 0: word 0, word 1 of the header
  Entry ent[kSlots];              ///< units 1..14
  std::atomic<uint64_t> tail[2];  ///< unit 15: block 0: sibling[0], sibling[1];
                                  ///< blocks >= 1: the alternate header
};
static_assert(offsetof(Block, hdr) == 0);     // unit 0
static_assert(offsetof(Block, ent) == 16);    // units 1..14
static_assert(offsetof(Block, tail) == 240);  // unit 15
static_assert(sizeof(Block) == kBlockBytes);

/// A DRAM copy of a 16-byte header (word 0, word 1), with accessors.
struct Header {
  uint64_t w0 = 0;
  uint64_t w1 = 0;

  uint64_t bitmap() const { return w0 & kBitmapMask; }
  uint8_t fp(uint32_t i) const {
    return static_cast<uint8_t>(i < 6 ? w0 >> (16 + 8 * i) : w1 >> (8 * (i - 6)));
  }
  void set_fp(uint32_t i, uint8_t f) {
    if (i < 6) {
      const uint32_t sh = 16 + 8 * i;
      w0 = (w0 & ~(uint64_t{0xff} << sh)) | (uint64_t{f} << sh);
    } else {
      const uint32_t sh = 8 * (i - 6);
      w1 = (w1 & ~(uint64_t{0xff} << sh)) | (uint64_t{f} << sh);
    }
  }
  void set(uint32_t i) { w0 |= uint64_t{1} << i; }
  void clear(uint32_t i) { w0 &= ~(uint64_t{1} << i); }

  /// Slots in use whose fingerprint equals f (Algorithm 1: all 14
  /// fingerprints compared at once with SSE2 _mm_cmpeq_epi8 over the 16-byte
  /// header unit; bytes 0..1, the header word, are shifted out).
  uint32_t match(uint8_t f) const {
    const __m128i h = _mm_set_epi64x(static_cast<long long>(w1), static_cast<long long>(w0));
    const __m128i k = _mm_set1_epi8(static_cast<char>(f));
    const uint32_t m = static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(h, k))) >> 2;
    return m & static_cast<uint32_t>(bitmap());
  }
};

/// Loads a header (acquire: optimistic readers validate a version after).
inline Header load_header(const std::atomic<uint64_t>* h) {
  Header r;
  r.w0 = h[0].load(std::memory_order_acquire);
  r.w1 = h[1].load(std::memory_order_acquire);
  return r;
}

/// A view of one leaf: `blocks` 256 B blocks starting at `b`.
struct Leaf {
  Block* b = nullptr;
  uint32_t blocks = 1;

  /// Word 0 of block 0 (header word, lock and alt bits, fp[0..5]).
  std::atomic<uint64_t>& word0() const { return b[0].hdr[0]; }
  /// The alt bit as stored now.
  bool alt() const { return (word0().load(std::memory_order_acquire) & kAltBit) != 0; }
  /// The live header of block j under `alt`.
  std::atomic<uint64_t>* live_hdr(uint32_t j, bool alt) const {
    return j == 0 || !alt ? b[j].hdr : b[j].tail;
  }
  /// The inactive header of block j >= 1 under `alt`.
  std::atomic<uint64_t>* spare_hdr(uint32_t j, bool alt) const {
    return alt ? b[j].hdr : b[j].tail;
  }
  /// Line (0 or 3) of block j that holds its live header under `alt`.
  uint32_t header_line(uint32_t j, bool alt) const { return j == 0 || !alt ? 0 : 3; }
  /// The live sibling pointer under `alt`.
  std::atomic<uint64_t>& sibling(bool alt) const { return b[0].tail[alt ? 1 : 0]; }
  /// Slot i of block j.
  Entry& ent(uint32_t j, uint32_t i) const { return b[j].ent[i]; }
  /// Address of line l of block j.
  void* line(uint32_t j, uint32_t l) const {
    return reinterpret_cast<char*>(&b[j]) + l * pm::kLineSize;
  }
  /// Slots per leaf.
  uint32_t capacity() const { return kSlots * blocks; }
};

/// Where a key sits in a leaf.
struct SlotRef {
  uint32_t block = 0;
  uint32_t slot = 0;
};

/// Algorithm 1 (search in a leaf) for any key type: per block, the SIMD
/// match of fingerprint `f`, then the bitmap and, for each candidate, eq(key
/// word) (integers: word == key; strings: the key record's bytes == key).
/// Lock-free: the caller validates the leaf's version afterwards (or holds
/// the lock). True and *where / *value when found. kBlocks: the leaf's
/// block count when known at compile time (1 for 256 B leaves: no block
/// loop), 0 for l.blocks.
template <uint32_t kBlocks = 0, class Eq>
inline bool leaf_find_fp(const Leaf& l, uint8_t f, Eq&& eq, SlotRef* where, uint64_t* value) {
  NVINDEX_DCHECK(kBlocks == 0 || kBlocks == l.blocks);
  const uint32_t blocks = kBlocks != 0 ? kBlocks : l.blocks;
  const bool alt = blocks > 1 && l.alt();  // block 0's header is the same under either alt
  for (uint32_t j = 0; j < blocks; ++j) {
    const Header h = load_header(l.live_hdr(j, alt));
    for (uint32_t m = h.match(f); m != 0; m &= m - 1) {
      const uint32_t i = static_cast<uint32_t>(__builtin_ctz(m));
      if (eq(l.ent(j, i).key.load(std::memory_order_acquire))) {
        if (where != nullptr) *where = {j, i};
        if (value != nullptr) *value = l.ent(j, i).value.load(std::memory_order_acquire);
        return true;
      }
    }
  }
  return false;
}

/// leaf_find_fp for an integer key (its fingerprint, word == key); kBlocks
/// as there.
template <uint32_t kBlocks = 0>
inline bool leaf_find(const Leaf& l, uint64_t key, SlotRef* where, uint64_t* value) {
  return leaf_find_fp<kBlocks>(
      l, fingerprint(key), [key](uint64_t w) { return w == key; }, where, value);
}

/// Calls f(entry, fingerprint) for every live slot of the leaf (the live
/// header of each block under the alt bit as stored now), block by block,
/// until f returns false; returns false when f did. Lock-free like
/// leaf_find (the caller validates).
template <class F>
inline bool for_each_live_slot(const Leaf& l, F&& f) {
  const bool alt = l.alt();
  for (uint32_t j = 0; j < l.blocks; ++j) {
    const Header h = load_header(l.live_hdr(j, alt));
    for (uint64_t m = h.bitmap(); m != 0; m &= m - 1) {
      const uint32_t i = static_cast<uint32_t>(__builtin_ctzll(m));
      if (!f(l.ent(j, i), h.fp(i))) return false;
    }
  }
  return true;
}

/// Set bits of a slot bitmap (its low 16 bits are counted; bitmaps have
/// 14), inline: the portable build has no popcnt instruction, where
/// __builtin_popcountll is a call into libgcc (21 instructions per insert,
/// callgrind).
inline int slot_count(uint64_t m) {
  uint32_t x = static_cast<uint32_t>(m & 0xffff);
  x = x - ((x >> 1) & 0x5555);
  x = (x & 0x3333) + ((x >> 2) & 0x3333);
  x = (x + (x >> 4)) & 0x0f0f;
  return static_cast<int>((x + (x >> 8)) & 0x1f);
}

/// Live entries of the leaf.
inline uint32_t leaf_count(const Leaf& l) {
  const bool alt = l.alt();
  uint32_t n = 0;
  for (uint32_t j = 0; j < l.blocks; ++j) {
    n += static_cast<uint32_t>(slot_count(load_header(l.live_hdr(j, alt)).bitmap()));
  }
  return n;
}

/// Algorithm 2 (insert into a leaf with a free slot), for a leaf whose lock
/// the caller holds and that does not hold the key: `word` is the key word
/// (integers: the key; strings: its key record's offset, the record
/// persisted before this call) and `f` the key's fingerprint. False
/// (nothing written) when every slot is in use: the caller splits.
///
/// Block choice: the first block whose header line has a free slot (one line
/// write), else the block with the most free slots (entry moving there).
///
/// Crash argument. (a) Free slot in the header line: the entry (key, value),
/// the fingerprint and the bitmap bit are all in the header line and stored
/// in that order (word 1 before word 0 when the fingerprint is in word 1),
/// then the line is persisted by the NAW of word 0. A crash keeps a prefix of
/// these stores: without the bitmap store the slot is free and its content
/// is ignored; with it, everything before it in the same line is there too.
/// One PM line write. (b) Header line full: the entry goes to a free slot of
/// another line k of the block, and as many header-line entries as there are
/// further free slots in line k are copied there (entry moving: the copies
/// are in free slots, invisible); line k is persisted (site
/// "lbtree.insert.line"); then one header update sets the new bits, clears
/// the moved entries' old bits and writes their fingerprints (word 1, then
/// word 0 by NAW, both in the header line). Before that NAW the leaf reads
/// as before; after it, as after; moved entries are never absent or twice
/// visible. Two PM line writes, and the header line gains free slots for the
/// next inserts.
///
/// kBlocks: the leaf's block count when known at compile time (1 for 256 B
/// leaves: no block loop, no alt bit read), 0 for l.blocks. The stores and
/// their order are the same either way.
template <uint32_t kBlocks = 0>
inline bool leaf_insert_fp(const Leaf& l, uint8_t f, uint64_t key, uint64_t value) {
  NVINDEX_DCHECK(kBlocks == 0 || kBlocks == l.blocks);
  const uint32_t blocks = kBlocks != 0 ? kBlocks : l.blocks;
  const bool alt = blocks > 1 && l.alt();  // block 0's header is the same under either alt
  int best = -1;
  int best_free = 0;
  Header h;  // the chosen block's live header
  for (uint32_t j = 0; j < blocks; ++j) {
    const Header hj = load_header(l.live_hdr(j, alt));
    const uint64_t free = ~hj.bitmap() & kBitmapMask;
    if ((free & line_mask(l.header_line(j, alt))) != 0) {
      best = static_cast<int>(j);
      h = hj;
      break;
    }
    const int n = slot_count(free);
    if (n > best_free) {
      best_free = n;
      best = static_cast<int>(j);
      h = hj;
    }
  }
  if (best < 0) return false;
  const uint32_t j = static_cast<uint32_t>(best);
  std::atomic<uint64_t>* hp = l.live_hdr(j, alt);
  const uint64_t free = ~h.bitmap() & kBitmapMask;
  const uint32_t hl = l.header_line(j, alt);
  const uint64_t hmask = line_mask(hl);
  const uint64_t old_w1 = h.w1;
  if ((free & hmask) != 0) {
    // (a) one line write.
    const uint32_t i = static_cast<uint32_t>(__builtin_ctzll(free & hmask));
    pm::store(&l.ent(j, i).key, key);
    pm::store(&l.ent(j, i).value, value);
    h.set_fp(i, f);
    h.set(i);
    if (h.w1 != old_w1) pm::store(&hp[1], h.w1);
    pm::naw(&hp[0], h.w0, {"lbtree.insert.header"});
    return true;
  }
  // (b) entry moving: the line (other than the header line) with the most
  // free slots.
  uint32_t k = 4;
  int kfree = 0;
  for (uint32_t ln = 0; ln < 4; ++ln) {
    if (ln == hl) continue;
    const int n = slot_count(free & line_mask(ln));
    if (n > kfree) {
      kfree = n;
      k = ln;
    }
  }
  uint64_t kslots = free & line_mask(k);
  const uint32_t i = static_cast<uint32_t>(__builtin_ctzll(kslots));
  kslots &= kslots - 1;
  pm::store(&l.ent(j, i).key, key);
  pm::store(&l.ent(j, i).value, value);
  h.set_fp(i, f);
  h.set(i);
  // Move header-line entries into the remaining free slots of line k.
  for (uint64_t src = h.bitmap() & hmask; src != 0 && kslots != 0; src &= src - 1) {
    const uint32_t s = static_cast<uint32_t>(__builtin_ctzll(src));
    const uint32_t d = static_cast<uint32_t>(__builtin_ctzll(kslots));
    kslots &= kslots - 1;
    pm::store(&l.ent(j, d).key, l.ent(j, s).key.load(std::memory_order_relaxed));
    pm::store(&l.ent(j, d).value, l.ent(j, s).value.load(std::memory_order_relaxed));
    h.set_fp(d, h.fp(s));
    h.set(d);
    h.clear(s);
  }
  pm::persist(l.line(j, k), pm::kLineSize, {"lbtree.insert.line"});
  if (h.w1 != old_w1) pm::store(&hp[1], h.w1);
  pm::naw(&hp[0], h.w0, {"lbtree.insert.moved_header"});
  return true;
}

/// leaf_insert_fp for an integer key.
inline bool leaf_insert(const Leaf& l, uint64_t key, uint64_t value) {
  return leaf_insert_fp(l, fingerprint(key), key, value);
}

/// Delete of slot `at` of a leaf whose lock the caller holds: one NAW of the
/// live header's word 0 with the slot's bit cleared (the bitmap is in word 0
/// in every block). A crash leaves the bit set (key present) or clear
/// (absent). No merge, as in the paper.
inline void leaf_remove(const Leaf& l, SlotRef at) {
  std::atomic<uint64_t>* hp = l.live_hdr(at.block, l.alt());
  const uint64_t w0 = hp[0].load(std::memory_order_relaxed);
  pm::naw(&hp[0], w0 & ~(uint64_t{1} << at.slot), {"lbtree.delete.header"});
}

/// In-place update of slot `at` (lock held): one aligned 8-byte store of the
/// value, then a persist of its line. A crash leaves the old or the new
/// value, never a torn one.
inline void leaf_update(const Leaf& l, SlotRef at, uint64_t value) {
  Entry& e = l.ent(at.block, at.slot);
  pm::store(&e.value, value);
  pm::persist(&e, sizeof(Entry), {"lbtree.update.value"});
}

}  // namespace nvindex::lbtree
