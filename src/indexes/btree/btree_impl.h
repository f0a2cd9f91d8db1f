// btree_impl.h: the B+-tree template of btree, unsorted-leaf, btree-wal and
// persistent-unsorted (one code base, as in the paper).
//
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
//
// String keys (issue 10): the tree is a template on a key policy (IntKeys,
// StringKeys below), so the integer instance compiles to the code it had
// before. A string key lives in a key record on the heap (1 length byte +
// the bytes, immutable once published); a key slot holds the record's
// pointer and, in a parallel array next to it, an 8-byte inline prefix word:
// the key's first 7 bytes big-endian in bits 63..8 (zero-padded) and
// min(length, 8) in bits 7..0. Comparing two prefix words orders the keys
// exactly as std::string_view does whenever the words differ, and equal
// words with a length byte below 8 mean equal keys; only equal words with
// length byte 8 (both keys >= 8 bytes, same first 7 bytes) dereference the
// records to compare bytes 7 onward. Fence keys carry a word too. Key
// records follow the node rule: a record whose key is removed is retired
// (kept in `retired_`) and freed only when the tree is destroyed, because an
// optimistic reader may still hold its pointer; separators and fences share
// the records of leaf keys (live or retired), so they own none.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstring>
#include <mutex>
#include <new>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <unordered_set>
#include <vector>

#include "indexes/btree/btree.h"
#include "indexes/btree/btree_testing.h"
#include "indexes/common/factory.h"
#include "indexes/common/persistent.h"
#include "indexes/common/prefetch.h"
#include "indexes/common/undo_log.h"
#include "indexes/common/version_lock.h"
#include "nvindex/pm/persist.h"
#include "util/hex.h"

namespace nvindex {
namespace btree_detail {

// Version lock word bits.
using vlock::kLocked;
using vlock::kObsolete;

template <class T>
T ld(const std::atomic<T>& a) {
  return a.load(std::memory_order_acquire);
}
template <class T>
void st(std::atomic<T>& a, T v) {
  a.store(v, std::memory_order_release);
}

// --- key policies -------------------------------------------------------------
//
// A key occupies kWords 8-byte words in a node, in kWords parallel arrays of
// `cap` slots each (word j of key i at w[j * cap + i]); fence keys are the
// same with cap 1. Search is a key prepared once per operation, Stored what
// a slot holds.

// uint64_t keys: one word, the key itself.
struct IntKeys {
  using Key = uint64_t;
  using Owned = uint64_t;
  using Search = uint64_t;
  using Stored = uint64_t;
  static constexpr unsigned kWords = 1;

  static Search search(Key k) { return k; }
  static Search search_of(Stored s) { return s; }
  static Owned owned(Stored s) { return s; }
  static Stored load(const std::atomic<uint64_t>* w, unsigned, unsigned i) { return ld(w[i]); }
  static void store(std::atomic<uint64_t>* w, unsigned, unsigned i, Stored k) { st(w[i], k); }
  // slot i < k, k < slot i, slot i == k.
  static bool slot_lt(const std::atomic<uint64_t>* w, unsigned, unsigned i, Search k) {
    return ld(w[i]) < k;
  }
  static bool lt_slot(Search k, const std::atomic<uint64_t>* w, unsigned, unsigned i) {
    return k < ld(w[i]);
  }
  static bool slot_eq(const std::atomic<uint64_t>* w, unsigned, unsigned i, Search k) {
    return ld(w[i]) == k;
  }
  static bool lt(Stored a, Stored b) { return a < b; }
  static bool eq(Stored a, Stored b) { return a == b; }
  static bool is_min(Stored s) { return s == 0; }  // the smallest key: the leftmost low fence
  static bool consistent(Stored) { return true; }
  static std::string show(Stored s) { return std::to_string(s); }
};

// Byte-string keys: word 0 the key record's pointer, word 1 the inline
// prefix word (see the file comment). A record is `new char[1 + len]`:
// length byte, then the bytes.
struct StringKeys {
  using Key = std::string_view;
  using Owned = std::string;
  struct Search {
    uint64_t word;
    std::string_view key;
  };
  struct Stored {
    const char* rec = nullptr;  // nullptr: the empty key (the leftmost low fence)
    uint64_t word = 0;
  };
  static constexpr unsigned kWords = 2;
  static constexpr uint64_t kLong = 8;  // length byte of a word whose key has >= 8 bytes

  static std::string_view view(const char* rec) {
    return rec == nullptr ? std::string_view()
                          : std::string_view(rec + 1, static_cast<uint8_t>(rec[0]));
  }
  static uint64_t word_of(std::string_view k) {
    uint64_t w = 0;
    if (!k.empty()) std::memcpy(&w, k.data(), std::min<size_t>(k.size(), 7));
    if constexpr (std::endian::native == std::endian::little) w = __builtin_bswap64(w);
    return w | std::min<uint64_t>(k.size(), kLong);
  }
  static Search search(Key k) { return {word_of(k), k}; }
  static Search search_of(const Stored& s) { return {s.word, view(s.rec)}; }
  static Owned owned(const Stored& s) { return Owned(view(s.rec)); }
  static Stored load(const std::atomic<uint64_t>* w, unsigned cap, unsigned i) {
    return {reinterpret_cast<const char*>(static_cast<uintptr_t>(ld(w[i]))), ld(w[cap + i])};
  }
  static void store(std::atomic<uint64_t>* w, unsigned cap, unsigned i, const Stored& k) {
    st(w[i], static_cast<uint64_t>(reinterpret_cast<uintptr_t>(k.rec)));
    st(w[cap + i], k.word);
  }
  // Three-way compare of bytes 7.. of two keys whose words are equal with
  // length byte 8. (Safe on torn optimistic reads: never reads out of a
  // record.)
  static int tail_cmp(std::string_view a, std::string_view b) {
    a.remove_prefix(std::min<size_t>(7, a.size()));
    b.remove_prefix(std::min<size_t>(7, b.size()));
    return a.compare(b);
  }
  static const char* rec_at(const std::atomic<uint64_t>* w, unsigned i) {
    return reinterpret_cast<const char*>(static_cast<uintptr_t>(ld(w[i])));
  }
  static bool slot_lt(const std::atomic<uint64_t>* w, unsigned cap, unsigned i, const Search& k) {
    const uint64_t sw = ld(w[cap + i]);
    if (sw != k.word) return sw < k.word;
    return (sw & 0xff) == kLong && tail_cmp(view(rec_at(w, i)), k.key) < 0;
  }
  static bool lt_slot(const Search& k, const std::atomic<uint64_t>* w, unsigned cap, unsigned i) {
    const uint64_t sw = ld(w[cap + i]);
    if (sw != k.word) return k.word < sw;
    return (sw & 0xff) == kLong && tail_cmp(k.key, view(rec_at(w, i))) < 0;
  }
  static bool slot_eq(const std::atomic<uint64_t>* w, unsigned cap, unsigned i, const Search& k) {
    const uint64_t sw = ld(w[cap + i]);
    if (sw != k.word) return false;
    return (sw & 0xff) != kLong || tail_cmp(view(rec_at(w, i)), k.key) == 0;
  }
  static bool lt(const Stored& a, const Stored& b) {
    if (a.word != b.word) return a.word < b.word;
    return (a.word & 0xff) == kLong && tail_cmp(view(a.rec), view(b.rec)) < 0;
  }
  static bool eq(const Stored& a, const Stored& b) { return !lt(a, b) && !lt(b, a); }
  static bool is_min(const Stored& s) { return s.word == 0; }  // only "" has word 0
  static bool consistent(const Stored& s) { return s.word == word_of(view(s.rec)); }
  static std::string show(const Stored& s) {
    std::string out = "\"";
    for (unsigned char c : view(s.rec).substr(0, 32)) {
      if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
        out += static_cast<char>(c);
      } else {
        static constexpr char kHex[] = "0123456789abcdef";
        out += "\\x";
        out += kHex[c >> 4];
        out += kHex[c & 15];
      }
    }
    return out + (view(s.rec).size() > 32 ? "...\"" : "\"");
  }
  // A new record holding k (k.size() <= kMaxKeyBytes).
  static Stored make(const Search& k) {
    char* r = new char[1 + k.key.size()];
    r[0] = static_cast<char>(static_cast<uint8_t>(k.key.size()));
    if (!k.key.empty()) std::memcpy(r + 1, k.key.data(), k.key.size());
    return {r, k.word};
  }
  static void free(const char* rec) { delete[] rec; }
  static uint64_t record_bytes(const Stored& s) { return 1 + view(s.rec).size(); }
};

// --- leaf layouts ----------------------------------------------------------------
//
// The tree is also a template on its leaf layout, so that the variants of
// Ni et al. share one code base and one concurrency scheme, as in the paper:
// sorted leaves (btree, §3.1) or unsorted leaves with a validity bitmap
// (unsorted-leaf, §3.2). Inner nodes are sorted in both.

// Sorted leaves: keys ascending in slots 0..count-1; an insert or remove
// shifts the larger pairs by one slot.
//
// Each layout also names its persistent variant (the tree in a pool,
// PmNodes below): its registry name, description, root-object magic and the
// names of its own persist sites (the log's are "<name>.wal.*").
struct SortedLeaves {
  static constexpr bool kUnsorted = false;
  static constexpr const char* kName = "btree";
  static constexpr const char* kDescription = kBtreeDescription;
  static constexpr const char* kPmName = "btree-wal";
  static constexpr const char* kPmDescription = kBtreeWalDescription;
  static constexpr uint64_t kPmMagic = 0x0031574c41574254ull;  // "TBWALW1\0"
  static constexpr const char* kSiteCreate = "btree-wal.create";
  static constexpr const char* kSiteUpdate = "btree-wal.update.value";
  static constexpr const char* kSiteCollapse = "btree-wal.collapse_root";
};

// Unsorted leaves: pairs in any slots, slot i in use iff bit i of the
// validity bitmap is set (the bitmap words follow the header); an insert
// takes the first free slot and sets its bit after writing the pair, a
// remove clears the bit; a lookup scans the valid slots; a scan or an SMO
// sorts the leaf's pairs in DRAM. A leaf's count is its bitmap's population
// count (count_of); the header's count field stays 0 in an unsorted leaf.
struct UnsortedLeaves {
  static constexpr bool kUnsorted = true;
  static constexpr const char* kName = "unsorted-leaf";
  static constexpr const char* kDescription = kUnsortedLeafDescription;
  static constexpr const char* kPmName = "persistent-unsorted";
  static constexpr const char* kPmDescription = kPersistentUnsortedDescription;
  static constexpr uint64_t kPmMagic = 0x0031534e55525054ull;  // "TPRUNS1\0"
  static constexpr const char* kSiteCreate = "persistent-unsorted.create";
  static constexpr const char* kSiteUpdate = "persistent-unsorted.update.value";
  static constexpr const char* kSiteInsertSlot = "persistent-unsorted.insert.slot";
  static constexpr const char* kSiteBitmap = "persistent-unsorted.bitmap";
  static constexpr const char* kSiteCollapse = "persistent-unsorted.collapse_root";
};

// --- storage ----------------------------------------------------------------------
//
// Where the nodes live. DramNodes: heap nodes, child and sibling words hold
// addresses, the version lock is the node's first word, stores are plain
// release stores (btree, unsorted-leaf). PmNodes: pool blocks, child and
// sibling words hold pool offsets, version locks in a DRAM LockTable (the
// node's first word stays 0), every store goes through pm::store, and every
// change is made durable by the leaf layout's protocol: btree-wal logs each
// insert, remove and SMO in the UndoLog; persistent-unsorted writes a pair
// into a free slot, persists it and publishes it with one NAW of its bitmap
// word, and logs only SMOs (Ni et al. §3.3). Updates of a value are one NAW
// in both. PmLeaves (selective persistence, Ni et al. §5; the option
// persistent-unsorted:inner=dram): leaves as in PmNodes, inner nodes as in
// DramNodes (child words and inner siblings are addresses, the version lock
// is the inner node's first word, stores are plain); the inner nodes are
// never logged or flushed and are rebuilt from the leaf chain at every open
// (recover()).
struct DramNodes {
  static constexpr bool kPm = false;
  static constexpr bool kInnerDram = false;
};
struct PmNodes {
  static constexpr bool kPm = true;
  static constexpr bool kInnerDram = false;
};
struct PmLeaves {
  static constexpr bool kPm = true;
  static constexpr bool kInnerDram = true;
};
// ModelledPmNodes (btree:flush=none|group, Ni et al. §6.2): DramNodes' heap
// nodes, addresses and in-node version locks, but every store into a node
// goes through the pm:: helpers, and flush=group flushes what an operation
// changed (GroupFlushTxn), so that the PM counters and the media model (its
// modelled CPU cache, src/pm/media.h) follow the tree as if its nodes were in
// PM. Nothing is logged, fenced or recovered: no crash-consistency claim.
// The version lock words are not followed (the shared vlock code stores
// them, as DRAM state: btree-wal keeps them in a DRAM LockTable); every
// insert, remove and SMO also stores the count word beside the lock in line
// 0, so only update() leaves its lock's line unmodelled (unsorted leaves
// keep no count: their inserts and removes leave it unmodelled too). Integer
// keys; btree's and unsorted-leaf's leaves.
struct ModelledPmNodes {
  static constexpr bool kPm = false;
  static constexpr bool kInnerDram = false;
  static constexpr bool kModelled = true;
};

// btree:flush=group's transaction (Ni et al. §6.2, "group flushing"): it
// collects the byte ranges an insert, remove or SMO changed (the dirty()
// calls that tell the persistent trees' logs what to persist at commit: a
// leaf shift's count word and pairs, an SMO's nodes, a new node whole) and
// at commit() flushes every line they cover once, in ascending address
// order, so that a node's modified lines leave the cache together and in
// order and combine in the XPLine buffer instead of being evicted one by one
// at random times. No fence: the tree claims no durability, and a fence
// orders the flushes only against later stores, not among themselves, and
// combining needs none (the buffer combines lines in any order within its
// window). Disabled (flush=none): does nothing.
class GroupFlushTxn {
 public:
  explicit GroupFlushTxn(bool on) : on_(on) {}
  void save(const void*, size_t) {}
  void seal() {}
  void dirty(const void* p, size_t len) {
    if (!on_ || len == 0) return;
    if (n_ == kMaxRanges) commit();  // more ranges than any operation makes: flush these first
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    ranges_[n_++] = {a, a + len};
  }
  void commit() {
    std::sort(ranges_.begin(), ranges_.begin() + n_);
    for (unsigned i = 0; i < n_;) {
      const uintptr_t lo = ranges_[i].first & ~(pm::kLineSize - 1);
      uintptr_t hi = ranges_[i].second;
      // Ranges that share a line with this group join it: each line once.
      for (++i; i < n_ && (ranges_[i].first & ~(pm::kLineSize - 1)) < hi; ++i) {
        hi = std::max(hi, ranges_[i].second);
      }
      pm::flush(reinterpret_cast<const void*>(lo), hi - lo, {"btree.group_flush"});
    }
    n_ = 0;
  }

 private:
  // An operation dirties at most 9 ranges (a rebalance: three nodes' header,
  // keys and values or children).
  static constexpr unsigned kMaxRanges = 12;
  bool on_;
  unsigned n_ = 0;
  std::array<std::pair<uintptr_t, uintptr_t>, kMaxRanges> ranges_{};
};

/// The root object of btree-wal and persistent-unsorted: one allocator block
/// of kBtreeRootBytes; Pool::root() -> it.
///   offset size  field
///   ------ ----  -----------------------------------------------------------
///        0    8  magic (SortedLeaves/UnsortedLeaves::kPmMagic), written once
///        8    8  node_size, bytes (a multiple of 64 in 128..4096), written once
///       16    8  inner=pm: root node offset (changed inside logged
///                transactions); inner=dram: the leftmost leaf's offset (the
///                first leaf, never merged away: a merge removes the right
///                node), written once
///       24    4  log slots, written once
///       28    4  log blocks per slot, written once
///       32    8  inner placement: 0 = inner nodes in PM, 1 = in DRAM
///                (PmLeaves), written once
///       40   24  reserved, zero
///       64  8*n  the log's block offsets, n = slots x blocks (UndoLog), written once
struct BtreeRoot {
  uint64_t magic;
  uint64_t node_size;
  std::atomic<uint64_t> root_node;
  uint32_t log_slots;
  uint32_t log_blocks;
  uint64_t inner_dram;
  uint64_t reserved[3];
  std::atomic<uint64_t> log_table[1];  // log_slots * log_blocks entries
};
static_assert(offsetof(BtreeRoot, magic) == 0);
static_assert(offsetof(BtreeRoot, node_size) == 8);
static_assert(offsetof(BtreeRoot, root_node) == 16);
static_assert(offsetof(BtreeRoot, log_slots) == 24);
static_assert(offsetof(BtreeRoot, log_blocks) == 28);
static_assert(offsetof(BtreeRoot, inner_dram) == 32);
static_assert(offsetof(BtreeRoot, reserved) == 40);
static_assert(offsetof(BtreeRoot, log_table) == 64);
/// Bytes of the root object's block.
inline constexpr uint32_t kBtreeRootBytes = 2048;
/// Log slots: transactions that can be open at once (more threads wait).
inline constexpr uint32_t kBtreeLogSlots = 32;

// A node. Its size (node_size, 128..4096 B, a multiple of 64) is a run-time
// parameter of the tree; the struct declares the header (40 B for integer
// keys, 56 B for string keys) and the slots follow it, 64-byte aligned as a
// whole. Integer keys (W = 1 word per key), header 40 B:
//
//   offset        size  field
//   ------------  ----  ----------------------------------------------------
//        0           8  version lock: bit 0 obsolete, bit 1 locked, bits
//                       2..63 version (+1 per write unlock)
//        8           2  count: keys in the node (leaf: pairs; inner: separators;
//                       an unsorted leaf: 0, its bitmap counts)
//       10           2  level: 0 = leaf, parent = child + 1 (immutable)
//       12           4  padding
//       16         8*W  low fence key: every key in the node is >= low
//     16+8W        8*W  high fence key: every key is < high (meaningful only
//                       when sibling != null; the rightmost node is unbounded)
//     16+16W         8  sibling: next node on the same level, or null
//   sorted leaf (C = (node_size - H) / (8 (W + 1)) pairs; 512 B -> 29
//   integer, 19 string pairs):
//        H       8*W*C  keys[C], sorted ascending (W parallel arrays of C)
//   H+8WC         8*C  values[C]
//   unsorted leaf (integer keys; B = ceil(C / 64) bitmap words, C the
//   largest with H + 8B + 16C <= node_size; 128 B -> 5, 512 B -> 29, 4 KiB
//   -> 251 pairs):
//        H         8*B  validity bitmap: bit i of word i/64 set iff slot i
//                       holds a pair
//     H+8B         8*C  keys[C], in any order
//   H+8B+8C        8*C  values[C]
//   inner (C = (node_size - H - 8) / (8 (W + 1)) separators; 512 B -> 29
//   integer, 18 string separators):
//        H       8*W*C  keys[C], sorted ascending
//   H+8WC     8*(C+1)  children[C+1]: child i holds keys in [keys[i-1],
//                       keys[i]) (child 0 from low, child C up to high)
//
// String keys (W = 2): a key is its record pointer (array 0) and its prefix
// word (array 1); a fence likewise (pointer, then word), header 56 B.
//
// Who may change what: level is written before the node is published and
// never again; every other field is written only by the holder of the
// node's lock (a new, unpublished node excepted) and read by anyone.
template <class KP>
struct Node {
  explicit Node(uint16_t lvl) : level(lvl) {}

  mutable std::atomic<uint64_t> version{0};  // mutable: readers of a const node lock it
  std::atomic<uint16_t> count{0};
  const uint16_t level;
  uint32_t pad = 0;
  std::atomic<uint64_t> low[KP::kWords]{};
  std::atomic<uint64_t> high[KP::kWords]{};
  std::atomic<uint64_t> sibling{0};  // the right sibling's word (a pointer's bits)

  std::atomic<uint64_t>* slots() {
    return reinterpret_cast<std::atomic<uint64_t>*>(reinterpret_cast<char*>(this) + sizeof(Node));
  }
  const std::atomic<uint64_t>* slots() const {
    return reinterpret_cast<const std::atomic<uint64_t>*>(reinterpret_cast<const char*>(this) +
                                                          sizeof(Node));
  }
};
static_assert(sizeof(Node<IntKeys>) == 40);
static_assert(sizeof(Node<StringKeys>) == 56);
static_assert(sizeof(std::atomic<uint64_t>) == 8);

// The version lock (optimistic lock coupling) is the shared one,
// indexes/common/version_lock.h: read_lock waits while a node is locked and
// fails on an obsolete one, check (vlock::validate) compares the version,
// upgrade locks by CAS from a version read earlier, unlock and
// unlock_obsolete are release stores by the holder (no locked
// read-modify-write: update-only, uniform, 1M keys, 1 thread: 2.49 -> 3.09
// Mops/s against an atomic add, medians of 5 interleaved runs).
using vlock::read_lock;
using vlock::unlock;
using vlock::unlock_obsolete;
using vlock::upgrade;
inline bool check(const std::atomic<uint64_t>& word, uint64_t v) {
  return vlock::validate(word, v);
}
inline void cpu_relax(unsigned* spins) { vlock::backoff(spins); }

// A transaction that does nothing: the volatile trees' (every call compiles
// away).
struct NoTxn {
  void save(const void*, size_t) {}
  void seal() {}
  void dirty(const void*, size_t) {}
  void commit() {}
};

template <class KP, class LP, class SP = DramNodes>
class Btree final : public std::conditional_t<SP::kPm, PersistentIndexOf<typename KP::Key>,
                                              Index<typename KP::Key>> {
  using K = typename KP::Key;
  static constexpr bool kPm = SP::kPm;
  // Selective persistence (PmLeaves): leaves in PM, inner nodes in DRAM.
  static constexpr bool kInnerDram = SP::kInnerDram;
  using Owned = typename KP::Owned;
  using Search = typename KP::Search;
  // How the tree passes a search key: by value when it is one word (integer
  // keys: in a register, as before the template), else by reference.
  using SearchArg = std::conditional_t<sizeof(Search) <= 8, Search, const Search&>;
  using Stored = typename KP::Stored;
  using N = Node<KP>;
  static constexpr unsigned W = KP::kWords;
  static constexpr bool kString = std::is_same_v<KP, StringKeys>;
  static constexpr bool kUnsorted = LP::kUnsorted;
  static_assert(!(kUnsorted && kString), "unsorted leaves take integer keys");
  static_assert(!(kPm && kString), "the trees in PM take integer keys");
  // btree:flush=none|group (ModelledPmNodes): node stores through the pm::
  // helpers, group flushing when group_flush_.
  static constexpr bool kModelled = requires { requires SP::kModelled; };
  static_assert(!(kModelled && kString), "flush=none|group: integer keys");
  static constexpr const char* kName = kPm ? LP::kPmName : LP::kName;
  static constexpr size_t kHeaderBytes = sizeof(N);
  static constexpr size_t kMaxLeafCap = (kBtreeMaxNodeSize - kHeaderBytes) / (8 * (W + 1));

  // Pairs per leaf: sorted, (node_size - H) / (8 (W + 1)); unsorted, the
  // largest C that leaves room for ceil(C / 64) bitmap words.
  static unsigned leaf_capacity(uint32_t node_size) {
    unsigned c = static_cast<unsigned>((node_size - kHeaderBytes) / (8 * (W + 1)));
    if constexpr (kUnsorted) {
      while (kHeaderBytes + 8 * ((c + 63) / 64) + 8 * (W + 1) * c > node_size) --c;
    }
    return c;
  }

 public:
  // A volatile tree with an empty root leaf. group_flush: flush=group
  // (ModelledPmNodes only).
  explicit Btree(uint32_t node_size, bool group_flush = false) requires(!kPm)
      : group_flush_(group_flush),
        node_size_(node_size),
        leaf_cap_(leaf_capacity(node_size)),
        leaf_bits_(kUnsorted ? (leaf_cap_ + 63) / 64 : 0),
        inner_cap_((node_size - kHeaderBytes - 8) / (8 * (W + 1))) {
    N* root;
    (void)alloc_node(0, &root);  // DRAM: never fails
    adopt(root);
    root_.store(root, std::memory_order_release);
  }

  // A tree in `pool`, not yet usable: the factory calls create() (an empty
  // pool) or recover() (a pool with a root). node_size: options' (create)
  // or 0 (recover reads it from the root object).
  Btree(pm::Pool* pool, uint32_t node_size) requires(kPm)
      : PersistentIndexOf<K>(pool),
        node_size_(node_size),
        leaf_cap_(leaf_capacity(node_size)),
        leaf_bits_(kUnsorted ? (leaf_cap_ + 63) / 64 : 0),
        inner_cap_((node_size - kHeaderBytes - 8) / (8 * (W + 1))),
        block_(std::bit_ceil(node_size)),
        base_(pool->base()),
        pool_bytes_(pool->size()) {}

  Status create();
  Status recover();

  ~Btree() override {
    if constexpr (kPm) {
      // Nodes unlinked by merges and root collapses: no durable state names
      // them (their transactions committed), and no operation is in flight.
      // Freed before the close record counts the bytes in use.
      if (log_ != nullptr) {
        for (uint64_t off : retired_nodes_) this->pool_->allocator().free(off);
      }
      this->record_close_keys();
      // PmLeaves: the DRAM inner nodes (retired ones included).
      for (N* n : nodes_) ::operator delete (n, std::align_val_t{64});
      return;
    }
    if constexpr (kString) {
      // Every record is the key of one leaf slot or retired: separators and
      // fences only share them.
      const N* n = root_.load(std::memory_order_acquire);
      while (n->level > 0) n = kid(n, 0);
      for (; n != nullptr; n = sib_of(n)) {
        for (unsigned i = 0; i < count_of(n); ++i) KP::free(key_at(n, i).rec);
      }
      for (const char* r : retired_) KP::free(r);
    }
    for (N* n : nodes_) ::operator delete (n, std::align_val_t{64});
  }

  Btree(const Btree&) = delete;
  Btree& operator=(const Btree&) = delete;

  Status insert(K key, Value value) override {
    if constexpr (kString) {
      if (Status s = check_key(LP::kName, key); !s.ok()) return s;
    }
    const Search sk = KP::search(key);
    Status s;
    Stored fresh{};
    bool made = false;
    for (unsigned spins = 0; !try_insert(sk, value, &fresh, &made, &s); cpu_relax(&spins)) {
    }
    if constexpr (kString) {
      if (made && !s.ok()) {  // never published
        record_bytes_.fetch_sub(KP::record_bytes(fresh), std::memory_order_relaxed);
        KP::free(fresh.rec);
      }
    }
    return s;
  }

  Status update(K key, Value value) override {
    if constexpr (kString) {
      if (Status s = check_key(LP::kName, key); !s.ok()) return s;
    }
    const Search sk = KP::search(key);
    for (unsigned spins = 0;; cpu_relax(&spins)) {
      uint64_t v;
      N* leaf = find_leaf(sk, &v);
      unsigned i;
      bool found = leaf_find(leaf, sk, &i);
      if (!found) {
        if (!check(ver(leaf), v)) continue;
        return Status::NotFound();
      }
      if (!upgrade(ver(leaf), v)) continue;
      // PM: one NAW of the aligned 8-byte value (never torn): a crash leaves
      // the old or the new value, and the update is durable on return.
      put_durable(vals(leaf)[i], value, LP::kSiteUpdate);
      unlock(ver(leaf));
      return Status::Ok();
    }
  }

  Status remove(K key) override {
    if constexpr (kString) {
      if (Status s = check_key(LP::kName, key); !s.ok()) return s;
    }
    const Search sk = KP::search(key);
    Status s;
    for (unsigned spins = 0; !try_remove(sk, &s); cpu_relax(&spins)) {
    }
    return s;
  }

  std::optional<Value> lookup(K key) override {
    if constexpr (kString) {
      if (!key_fits(key)) return std::nullopt;
    }
    const Search sk = KP::search(key);
    for (unsigned spins = 0;; cpu_relax(&spins)) {
      uint64_t v;
      N* leaf = find_leaf(sk, &v);
      unsigned i;
      bool found = leaf_find(leaf, sk, &i);
      Value val = found ? ld(vals(leaf)[i]) : 0;
      if (!check(ver(leaf), v)) continue;
      if (!found) return std::nullopt;
      return val;
    }
  }

  // Interleaved multi-get (Ni et al. §6.1): the batch's descents advance
  // round-robin one node at a time, and each step prefetches the whole child
  // node it moves to before switching to the next lookup, so the cache misses
  // of up to kInterleave descents overlap instead of following one another.
  // A hand-rolled state machine (AMAC style: per lookup, the node it is at),
  // not coroutines: the state is one pointer per lookup. Each step is one
  // step of lookup()'s descent (settle, then the child or the leaf search,
  // then the version check); a lookup whose check fails finishes as a plain
  // lookup() (restarting from the root), so every result is what lookup()
  // could have returned during the call.
  void multi_lookup(std::span<const K> keys, std::span<std::optional<Value>> out) override {
    for (size_t base = 0; base < keys.size(); base += kInterleave) {
      const size_t n = std::min(kInterleave, keys.size() - base);
      if (n == 1) {
        out[base] = lookup(keys[base]);
      } else {
        lookup_group(keys.subspan(base, n), out.subspan(base, n));
      }
    }
  }

  // Walks the leaf chain through right links; each leaf is read under its
  // version and re-read (re-located from the root) on a conflict, so every
  // returned pair was present at the moment its leaf was validated.
  size_t scan(K start, size_t count, std::vector<std::pair<Owned, Value>>* out) override {
    out->clear();
    if (count == 0) return 0;
    Search cursor = search_long(start);
    uint64_t v;
    N* leaf = find_leaf(cursor, &v);
    std::vector<std::pair<Owned, Value>> buf;
    buf.reserve(leaf_cap_);
    for (unsigned spins = 0;;) {
      buf.clear();
      size_t want = count - out->size();
      if constexpr (kUnsorted) {
        // Every valid pair >= cursor, then the smallest `want` of them in
        // key order (the leaf is sorted in DRAM, Ni et al. §3.2).
        const std::atomic<uint64_t>* lk = leaf_keys(leaf);
        const std::atomic<uint64_t>* lv = vals(leaf);
        for_valid(leaf, [&](unsigned i) {
          if (!KP::slot_lt(lk, leaf_cap_, i, cursor)) {
            buf.emplace_back(KP::owned(KP::load(lk, leaf_cap_, i)), ld(lv[i]));
          }
        });
        // std::sort, not partial_sort: a leaf's few dozen pairs take an
        // insertion sort, where partial_sort's heap select costs 3x the scan.
        std::sort(buf.begin(), buf.end(),
                  [](const auto& a, const auto& b) { return a.first < b.first; });
        if (buf.size() > want) buf.resize(want);
      } else {
        unsigned cnt = count_of(leaf);
        for (unsigned i = 0; i < cnt && buf.size() < want; ++i) {
          if (!KP::slot_lt(leaf->slots(), leaf_cap_, i, cursor)) {
            buf.emplace_back(KP::owned(key_at(leaf, i)), ld(vals(leaf)[i]));
          }
        }
      }
      N* next = sib_of(leaf);
      Stored hi = high_of(leaf);
      if (!check(ver(leaf), v)) {
        cpu_relax(&spins);
        leaf = find_leaf(cursor, &v);
        continue;
      }
      out->insert(out->end(), std::make_move_iterator(buf.begin()),
                  std::make_move_iterator(buf.end()));
      if (out->size() >= count || next == nullptr) break;
      cursor = KP::search_of(hi);  // > every key of this leaf, == low fence of `next`
      leaf = step_right(next, cursor, &v);
    }
    return out->size();
  }

  std::optional<std::pair<Owned, Value>> find_last_less_than(K key) override {
    if constexpr (kString) {
      return fllt_strict(search_long(key));
    } else {
      // Largest key < `key`: searches the leaf holding key-1; if it has no
      // such key, repeats below its low fence (leaves have no left links).
      if (key == 0) return std::nullopt;
      uint64_t target = key;
      for (unsigned spins = 0;;) {
        uint64_t v;
        N* leaf = find_leaf(target - 1, &v);
        bool found;
        uint64_t k = 0;
        Value val = 0;
        if constexpr (kUnsorted) {
          // The largest valid key below target.
          found = false;
          const std::atomic<uint64_t>* lk = leaf_keys(leaf);
          for_valid(leaf, [&](unsigned j) {
            const uint64_t kj = ld(lk[j]);
            if (kj < target && (!found || kj > k)) {
              found = true;
              k = kj;
              val = ld(vals(leaf)[j]);
            }
          });
        } else {
          unsigned cnt = count_of(leaf);
          unsigned i = leaf_lower_bound(leaf, cnt, target);  // first key >= target
          found = i > 0;
          k = found ? ld(keys(leaf)[i - 1]) : 0;
          val = found ? ld(vals(leaf)[i - 1]) : 0;
        }
        uint64_t low = ld(leaf->low[0]);
        if (!check(ver(leaf), v)) {
          cpu_relax(&spins);
          continue;
        }
        if (found) return std::make_pair(k, val);
        if (low == 0) return std::nullopt;  // leftmost leaf (a separator is never 0)
        target = low;
      }
    }
  }

  IndexInfo info() const override {
    if constexpr (kPm) {
      Capabilities caps;
      caps.ordered = true;
      caps.persistent = true;
      caps.thread_safe = true;
      caps.placement = kInnerDram ? Placement::kSelective : Placement::kPmOnly;
      uint64_t dram = locks_ != nullptr ? locks_->dram_bytes() : 0;
      if constexpr (kInnerDram) {
        std::lock_guard lock(nodes_mu_);
        dram += static_cast<uint64_t>(nodes_.size()) * node_size_;
      }
      return this->persistent_info(
          kName,
          std::string(LP::kPmDescription) +
              (kInnerDram ? "; inner nodes in DRAM" : "; inner nodes in PM"),
          caps, node_size_, dram);
    }
    IndexInfo i;
    i.name = LP::kName;
    i.description = LP::kDescription;
    if constexpr (kModelled) {  // the entry's description, then what flush= chose
      i.description += group_flush_ ? kBtreeGroupFlushInfo : kBtreeFlushNoneInfo;
    }
    i.caps.ordered = true;
    i.caps.thread_safe = true;
    i.caps.string_keys = !kUnsorted && !kModelled;
    i.caps.placement = Placement::kDram;
    i.node_size = node_size_;
    std::lock_guard lock(nodes_mu_);
    i.dram_bytes = static_cast<uint64_t>(nodes_.size()) * node_size_ +
                   record_bytes_.load(std::memory_order_relaxed);
    return i;
  }

  Status verify(VerifyReport* report) const override;

  std::vector<std::pair<std::string, std::string>> ablation_notes() const override;

  /// See btree_damage_for_test() in btree_testing.h (integer keys only).
  Status damage(BtreeDamage d);

 private:
  // --- node access --------------------------------------------------------
  // Key words of n (W parallel arrays of cap(n)); an unsorted leaf's follow
  // its bitmap.
  unsigned key_base(const N* n) const {
    if constexpr (kUnsorted) return n->level == 0 ? leaf_bits_ : 0;
    return 0;
  }
  std::atomic<uint64_t>* keys(N* n) const { return n->slots() + key_base(n); }
  // Key words of a node known to be a leaf (no level test).
  const std::atomic<uint64_t>* leaf_keys(const N* n) const {
    return n->slots() + (kUnsorted ? leaf_bits_ : 0);
  }
  const std::atomic<uint64_t>* keys(const N* n) const { return n->slots() + key_base(n); }
  // (kUnsorted ? leaf_bits_ : 0): the sorted tree's offsets stay constants.
  std::atomic<uint64_t>* vals(N* n) const {
    return n->slots() + (kUnsorted ? leaf_bits_ : 0) + W * leaf_cap_;
  }
  const std::atomic<uint64_t>* vals(const N* n) const {
    return n->slots() + (kUnsorted ? leaf_bits_ : 0) + W * leaf_cap_;
  }
  // An unsorted leaf's validity bitmap (leaf_bits_ words).
  std::atomic<uint64_t>* bitmap(N* n) const { return n->slots(); }
  const std::atomic<uint64_t>* bitmap(const N* n) const { return n->slots(); }
  // Calls f(i) for every valid slot i of the unsorted leaf n, ascending
  // (bits past the capacity, possible only in a torn optimistic read, are
  // skipped; the caller's version check rejects such a read).
  template <class F>
  void for_valid(const N* n, F&& f) const {
    for (unsigned w = 0; w < leaf_bits_; ++w) {
      for (uint64_t bits = ld(bitmap(n)[w]); bits != 0; bits &= bits - 1) {
        const unsigned i = w * 64 + static_cast<unsigned>(std::countr_zero(bits));
        if (i >= leaf_cap_) return;
        f(i);
      }
    }
  }
  // Whether the leaf holds key, and its slot. Sorted: the linear lower
  // bound; unsorted: a scan of the valid slots (Ni et al. §3.2).
  bool leaf_find(const N* n, SearchArg key, unsigned* slot) const {
    if constexpr (kUnsorted) {
      const std::atomic<uint64_t>* lk = leaf_keys(n);
      for (unsigned w = 0; w < leaf_bits_; ++w) {
        const uint64_t bits = ld(bitmap(n)[w]);
        const unsigned end = std::min(leaf_cap_, w * 64 + 64);
        for (unsigned i = w * 64; i < end; ++i) {
          if (KP::slot_eq(lk, leaf_cap_, i, key) && (bits >> (i % 64) & 1) != 0) {
            *slot = i;
            return true;
          }
        }
      }
      return false;
    } else {
      const unsigned cnt = count_of(n);
      const unsigned i = leaf_lower_bound(n, cnt, key);
      *slot = i;
      return i < cnt && KP::slot_eq(keys(n), leaf_cap_, i, key);
    }
  }
  // The first free slot of the locked, not full, unsorted leaf n.
  unsigned first_free(const N* n) const {
    for (unsigned w = 0;; ++w) {
      const uint64_t free = ~ld(bitmap(n)[w]);
      if (free != 0) return w * 64 + static_cast<unsigned>(std::countr_zero(free));
    }
  }
  // The pairs of leaf n in key order into k[], x[] (room for leaf_cap_);
  // returns how many. Unsorted leaves sort in DRAM.
  unsigned leaf_sorted(const N* n, Stored* k, Value* x) const {
    unsigned c = 0;
    if constexpr (kUnsorted) {
      std::array<std::pair<Stored, Value>, kMaxLeafCap> tmp;
      for_valid(n, [&](unsigned i) { tmp[c++] = {key_at(n, i), ld(vals(n)[i])}; });
      std::sort(tmp.begin(), tmp.begin() + c,
                [](const auto& a, const auto& b) { return KP::lt(a.first, b.first); });
      for (unsigned j = 0; j < c; ++j) k[j] = tmp[j].first, x[j] = tmp[j].second;
    } else {
      c = count_of(n);
      for (unsigned j = 0; j < c; ++j) k[j] = key_at(n, j), x[j] = ld(vals(n)[j]);
    }
    return c;
  }
  // Makes the locked (or unpublished) leaf n hold exactly the cnt pairs
  // k[], x[] in slots 0..cnt-1 (unsorted: bits 0..cnt-1 set, the rest clear).
  void leaf_assign(N* n, const Stored* k, const Value* x, unsigned cnt) const {
    for (unsigned j = 0; j < cnt; ++j) set_key(n, j, k[j]), put(vals(n)[j], x[j]);
    if constexpr (kUnsorted) {
      for (unsigned w = 0; w < leaf_bits_; ++w) {
        const unsigned lo = w * 64;
        const uint64_t bits = cnt >= lo + 64 ? ~uint64_t{0}
                              : cnt > lo     ? (uint64_t{1} << (cnt - lo)) - 1
                                             : 0;
        put(bitmap(n)[w], bits);
      }
    } else {
      put(n->count, static_cast<uint16_t>(cnt));
    }
  }
  std::atomic<uint64_t>* kids(N* n) const { return n->slots() + W * inner_cap_; }
  const std::atomic<uint64_t>* kids(const N* n) const { return n->slots() + W * inner_cap_; }
  // A child word: the child's word (to_word); with inner nodes in DRAM
  // (PmLeaves) its address, leaf or inner node alike.
  N* kid(const N* n, unsigned i) const {
    if constexpr (kInnerDram) {
      return reinterpret_cast<N*>(static_cast<uintptr_t>(ld(kids(n)[i])));
    } else {
      return to_node(ld(kids(n)[i]));
    }
  }
  void set_kid(N* n, unsigned i, N* c) const {
    if constexpr (kInnerDram) {
      put(kids(n)[i], static_cast<uint64_t>(reinterpret_cast<uintptr_t>(c)));
    } else {
      put(kids(n)[i], to_word(c));
    }
  }
  // --- storage: how a node is named, locked and written ------------------------
  // Whether n lives in DRAM: every node of a volatile tree, the inner nodes
  // of a PmLeaves tree.
  static bool in_dram(const N* n) { return !kPm || (kInnerDram && n->level > 0); }
  // A node's own word (a leaf's right link, the root object's root word, a
  // LockTable key): its address (DRAM), its pool offset (PM; 0 = none).
  N* to_node(uint64_t w) const {
    if constexpr (kPm) {
      return w == 0 ? nullptr : reinterpret_cast<N*>(base_ + w);
    } else {
      return reinterpret_cast<N*>(static_cast<uintptr_t>(w));
    }
  }
  uint64_t to_word(const N* n) const {
    if constexpr (kPm) {
      return n == nullptr ? 0 : static_cast<uint64_t>(reinterpret_cast<const char*>(n) - base_);
    } else {
      return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(n));
    }
  }
  // A right link: the sibling's word, an address between DRAM inner nodes.
  N* sib_of(const N* n) const {
    if (kInnerDram && n->level > 0) {
      return reinterpret_cast<N*>(static_cast<uintptr_t>(ld(n->sibling)));
    }
    return to_node(ld(n->sibling));
  }
  void set_sib(N* n, const N* s) const {
    if (kInnerDram && n->level > 0) {
      put(n->sibling, static_cast<uint64_t>(reinterpret_cast<uintptr_t>(s)));
    } else {
      put(n->sibling, to_word(s));
    }
  }
  // The node's version lock word: in the node (DRAM), in the LockTable (PM).
  std::atomic<uint64_t>& ver(const N* n) const {
    if constexpr (kPm) {
      if (kInnerDram && n->level > 0) return n->version;
      return locks_->word(to_word(n));
    } else {
      return n->version;
    }
  }
  // Every store into a node: a release store (readers validate afterwards);
  // in PM through pm::store, which the crash simulator follows (and the
  // media model: ModelledPmNodes too). PmLeaves: a store outside the pool
  // (an inner node's) is a plain release store.
  template <class T>
  void put(std::atomic<T>& a, T v) const {
    if constexpr (kPm) {
      if (kInnerDram &&
          reinterpret_cast<uintptr_t>(&a) - reinterpret_cast<uintptr_t>(base_) >= pool_bytes_) {
        a.store(v, std::memory_order_release);
        return;
      }
      pm::store(&a, v);
    } else if constexpr (kModelled) {
      pm::store(&a, v);
    } else {
      a.store(v, std::memory_order_release);
    }
  }
  // One 8-byte word made durable in place (NAW): a value update, a bitmap
  // word, the root word. Volatile trees: a store (flush=group: and its
  // line's flush, the update's group).
  void put_durable(std::atomic<uint64_t>& a, uint64_t v, const char* site) const {
    if constexpr (kPm) {
      pm::naw(&a, v, {site});
    } else if constexpr (kModelled) {
      put(a, v);
      if (group_flush_) pm::flush(&a, sizeof(a), {"btree.group_flush"});
    } else {
      (void)site;
      a.store(v, std::memory_order_release);
    }
  }
  // A logged transaction (PM: one UndoLog slot; flush=none|group: group
  // flushing, on or off; volatile: nothing).
  auto begin_txn() {
    if constexpr (kPm) {
      return log_->begin();
    } else if constexpr (kModelled) {
      return GroupFlushTxn(group_flush_);
    } else {
      return NoTxn{};
    }
  }
  // The node's 8-byte word holding count (and level): saved and dirtied
  // whenever count changes.
  static const void* count_word(const N* n) { return reinterpret_cast<const char*>(n) + 8; }
  // The bytes a sorted leaf's shift from slot i changes, as f(addr, len):
  // the count word and the pairs [i, end) (end >= i).
  template <class F>
  void shift_ranges(const N* n, unsigned i, unsigned end, F&& f) const {
    f(count_word(n), 8);
    f(&keys(n)[i], 8 * size_t{end - i});
    f(&vals(n)[i], 8 * size_t{end - i});
  }
  // The bytes of n an SMO may change, for the log (save) and the flush
  // (dirty): the header and the live slots (sorted leaf: keys and values
  // [0, count); inner node: keys [0, count), children [0, count]); an
  // unsorted leaf whole (its live slots are anywhere).
  template <class Txn>
  void save_node(Txn& tx, const N* n) const {
    node_ranges(n, [&](const void* p, size_t len) { tx.save(p, len); });
  }
  template <class Txn>
  void dirty_node(Txn& tx, const N* n) const {
    node_ranges(n, [&](const void* p, size_t len) { tx.dirty(p, len); });
  }
  // A node the SMO allocated: its used bytes; flush=group the whole node,
  // every line of which its initialisation wrote (alloc_node).
  template <class Txn>
  void dirty_new_node(Txn& tx, const N* n) const {
    if constexpr (kModelled) {
      tx.dirty(n, node_size_);
    } else {
      dirty_node(tx, n);
    }
  }
  // A DRAM inner node (PmLeaves) has none: it is neither logged nor flushed
  // (ModelledPmNodes: every node is in the modelled PM, and flushed).
  template <class F>
  void node_ranges(const N* n, F&& f) const {
    if (!kModelled && in_dram(n)) return;
    if (kUnsorted && n->level == 0) {
      f(n, node_size_);
      return;
    }
    const unsigned cnt = count_of(n);
    f(n, kHeaderBytes);
    f(keys(n), 8 * W * size_t{cnt});
    if (n->level == 0) {
      f(vals(n), 8 * size_t{cnt});
    } else {
      f(kids(n), 8 * (size_t{cnt} + 1));
    }
  }
  unsigned cap(const N* n) const { return n->level == 0 ? leaf_cap_ : inner_cap_; }
  Stored key_at(const N* n, unsigned i) const { return KP::load(keys(n), cap(n), i); }
  void set_key(N* n, unsigned i, const Stored& k) const {
    if constexpr (kPm || kModelled) {
      put(keys(n)[i], k);
    } else {
      KP::store(keys(n), cap(n), i, k);
    }
  }
  void move_key(N* dst, unsigned j, const N* src, unsigned i) const {
    set_key(dst, j, key_at(src, i));
  }
  Stored low_of(const N* n) const { return KP::load(n->low, 1, 0); }
  Stored high_of(const N* n) const { return KP::load(n->high, 1, 0); }
  void set_low(N* n, const Stored& k) const {
    if constexpr (kPm || kModelled) {
      put(n->low[0], k);
    } else {
      KP::store(n->low, 1, 0, k);
    }
  }
  void set_high(N* n, const Stored& k) const {
    if constexpr (kPm || kModelled) {
      put(n->high[0], k);
    } else {
      KP::store(n->high, 1, 0, k);
    }
  }
  // Count clamped to the capacity, so a torn optimistic read stays in bounds.
  // An unsorted leaf's is its bitmap's population count (its header count
  // is not kept: one store less per insert and remove).
  unsigned count_of(const N* n) const {
    if constexpr (kUnsorted) {
      if (n->level == 0) {
        unsigned c = 0;
        for (unsigned w = 0; w < leaf_bits_; ++w) {
          c += static_cast<unsigned>(std::popcount(ld(bitmap(n)[w])));
        }
        return std::min(c, leaf_cap_);
      }
    }
    return std::min<unsigned>(ld(n->count), cap(n));
  }
  bool underfull(const N* n, unsigned cnt) const { return cnt * 4 < cap(n); }

  // A search key for scan and find_last_less_than, which take any key: one
  // longer than kMaxKeyBytes compares like any other (its prefix word is
  // that of its first bytes and length byte 8, exact for the order).
  static Search search_long(K key) { return KP::search(key); }

  // First slot i with keys[i] >= key (linear search, Ni et al. §3.1).
  unsigned leaf_lower_bound(const N* n, unsigned cnt, SearchArg key) const {
    unsigned i = 0;
    while (i < cnt && KP::slot_lt(keys(n), cap(n), i, key)) ++i;
    return i;
  }
  // Child slot for key: first i with key < keys[i] (or cnt).
  unsigned child_pos(const N* n, unsigned cnt, SearchArg key) const {
    unsigned i = 0;
    while (i < cnt && !KP::lt_slot(key, keys(n), cap(n), i)) ++i;
    return i;
  }

  // One B-link step of a descent (Lehman & Yao): reads *n's version into *v
  // and follows right links while key >= the node's high fence (a split moved
  // the key's range right), setting *moved_right when it follows one. False
  // when the descent must restart: the node is obsolete, lost its low keys to a
  // rebalance (key < low fence), or changed before its right link was read.
  // With `before` (find_last_less_than of string keys) the node must instead
  // hold the keys just below `key`: low < key <= high.
  template <bool before = false>
  bool settle(SearchArg key, N** n, uint64_t* v, bool* moved_right) const {
    for (;;) {
      if (!read_lock(ver(*n), v)) return false;
      if constexpr (before) {
        if (!KP::slot_lt((*n)->low, 1, 0, key)) return false;
      } else {
        if (KP::lt_slot(key, (*n)->low, 1, 0)) return false;
      }
      N* r = sib_of((*n));
      if constexpr (before) {
        if (r == nullptr || !KP::slot_lt((*n)->high, 1, 0, key)) return true;
      } else {
        if (r == nullptr || KP::lt_slot(key, (*n)->high, 1, 0)) return true;
      }
      if (!check(ver(*n), *v)) return false;
      *n = r;
      *moved_right = true;
    }
  }

  // A new, zeroed, unpublished node (DRAM: never fails). SMOs allocate
  // before they lock anything, then adopt() what they publish and discard()
  // what they do not.
  Status alloc_node(uint16_t level, N** out) {
    if constexpr (kPm) {
      if (!(kInnerDram && level > 0)) {  // else a DRAM inner node (PmLeaves)
        // A pool block, zeroed and given its level with PM stores; flushed by
        // the transaction that publishes it (dirty_node), before its commit.
        uint64_t off;
        if (Status s = this->pool_->allocator().allocate(node_size_, &off); !s.ok()) {
          if (s.code() == Code::kOutOfSpace) {
            return Status::OutOfSpace(std::string(kName) + ": the pool is full (a node of " +
                                      std::to_string(node_size_) + " B); nothing changed");
          }
          return s;
        }
        char* p = base_ + off;
        pm::fill(p, 0, node_size_);
        N* n = reinterpret_cast<N*>(p);
        pm::store(const_cast<uint16_t*>(&n->level), level);
        *out = n;
        return Status::Ok();
      }
    }
    void* p = ::operator new (node_size_, std::align_val_t{64});
    // flush=none|group: the zeroing stores, as the media model sees them.
    if constexpr (kModelled) pm::fill(p, 0, node_size_);
    N* n = new (p) N(level);
    std::atomic<uint64_t>* s = n->slots();
    for (size_t i = 0; i < (node_size_ - kHeaderBytes) / 8; ++i)
      new (s + i) std::atomic<uint64_t>(0);
    *out = n;
    return Status::Ok();
  }
  // n is published: kept (in nodes_) until the tree is destroyed (PM: the
  // structure owns it).
  void adopt(N* n) {
    if (in_dram(n)) {
      std::lock_guard lock(nodes_mu_);
      nodes_.push_back(n);
    }
  }
  // n was never published: freed now.
  void discard(N* n) {
    if constexpr (kPm) {
      if (!in_dram(n)) {
        this->pool_->allocator().free(to_word(n));
        return;
      }
    }
    ::operator delete (n, std::align_val_t{64});
  }
  // n was unlinked by a committed SMO (merge, root collapse) and marked
  // obsolete: an optimistic reader may still read it, so it is kept until
  // the tree is destroyed (DRAM: it is in nodes_ already).
  void retire_node(N* n) {
    if constexpr (kPm) {
      if (!in_dram(n)) {
        std::lock_guard lock(retired_nodes_mu_);
        retired_nodes_.push_back(to_word(n));
      }
    }
  }

  // The leaf whose fences hold `key`, and the version it was read at (not yet
  // re-checked: the caller reads the leaf, then checks the version). With
  // `before`: the leaf whose range holds the keys just below `key` (low <
  // key <= high; `key` must not be the smallest key).
  template <bool before = false>
  N* find_leaf(SearchArg key, uint64_t* v_out) const {
    for (unsigned spins = 0;; cpu_relax(&spins)) {
      N* n = root_.load(std::memory_order_acquire);
      for (;;) {
        uint64_t v;
        bool moved_right = false;
        if (!settle<before>(key, &n, &v, &moved_right)) break;
        if (n->level == 0) {
          *v_out = v;
          return n;
        }
        const unsigned cnt = count_of(n);
        N* c = kid(n, before ? leaf_lower_bound(n, cnt, key) : child_pos(n, cnt, key));
        if (c == nullptr || !check(ver(n), v)) break;
        n = c;
      }
    }
  }

  // Largest key < `target` for string keys (no predecessor key to search
  // for): descends to the leaf whose range holds the keys just below target;
  // if it has none below target, repeats below its low fence (leaves have no
  // left links).
  std::optional<std::pair<Owned, Value>> fllt_strict(Search target) const {
    if (target.word == 0) return std::nullopt;  // the empty key: nothing below
    for (unsigned spins = 0;;) {
      uint64_t v;
      N* leaf = find_leaf<true>(target, &v);
      unsigned cnt = count_of(leaf);
      unsigned i = leaf_lower_bound(leaf, cnt, target);  // first key >= target
      bool found = i > 0;
      std::optional<std::pair<Owned, Value>> got;
      if (found) got.emplace(KP::owned(key_at(leaf, i - 1)), ld(vals(leaf)[i - 1]));
      Stored low = low_of(leaf);
      if (!check(ver(leaf), v)) {
        cpu_relax(&spins);
        continue;
      }
      if (found) return got;
      if (KP::is_min(low)) return std::nullopt;  // leftmost leaf (a separator is never "")
      target = KP::search_of(low);
    }
  }

  // The leaf for `key` (the low fence of `next`) after a scan left a leaf:
  // `next` itself when it still covers key, else a search from the root.
  N* step_right(N* next, SearchArg key, uint64_t* v_out) const {
    uint64_t v;
    if (read_lock(ver(next), &v) && !KP::lt_slot(key, next->low, 1, 0) &&
        (sib_of(next) == nullptr || KP::lt_slot(key, next->high, 1, 0)) && check(ver(next), v)) {
      *v_out = v;
      return next;
    }
    return find_leaf(key, v_out);
  }

  // Most lookups of a multi_lookup in flight at once: beyond the CPU's
  // outstanding-miss buffers (10-12 line fill buffers) more adds no overlap.
  static constexpr size_t kInterleave = 32;

  // One group (2..kInterleave keys) of multi_lookup.
  void lookup_group(std::span<const K> keys, std::span<std::optional<Value>> out) {
    const size_t n = keys.size();
    std::array<N*, kInterleave> at;
    std::array<Search, kInterleave> sk;
    uint64_t pending = 0;  // bit i: lookup i still descending
    N* const root = root_.load(std::memory_order_acquire);
    for (size_t i = 0; i < n; ++i) {
      if constexpr (kString) {
        if (!key_fits(keys[i])) {  // as lookup(): a key that cannot be stored
          out[i] = std::nullopt;
          continue;
        }
      }
      sk[i] = KP::search(keys[i]);
      at[i] = root;
      pending |= uint64_t{1} << i;
    }
    while (pending != 0) {
      for (uint64_t bits = pending; bits != 0; bits &= bits - 1) {
        const unsigned i = static_cast<unsigned>(std::countr_zero(bits));
        N* node = at[i];
        uint64_t v;
        bool moved_right = false;
        bool done = true;
        if (!settle(sk[i], &node, &v, &moved_right)) {
          out[i] = lookup(keys[i]);
        } else if (node->level == 0) {
          unsigned slot;
          const bool found = leaf_find(node, sk[i], &slot);
          const Value val = found ? ld(vals(node)[slot]) : 0;
          if (!check(ver(node), v)) {
            out[i] = lookup(keys[i]);
          } else {
            out[i] = found ? std::optional<Value>(val) : std::nullopt;
          }
        } else {
          N* c = kid(node, child_pos(node, count_of(node), sk[i]));
          if (c == nullptr || !check(ver(node), v)) {
            out[i] = lookup(keys[i]);
          } else {
            at[i] = c;
            prefetch_bytes(c, node_size_);
            done = false;
          }
        }
        if (done) pending &= ~(uint64_t{1} << i);
      }
    }
  }

  // A removed key's record: kept until the tree is destroyed (see the file
  // comment). Integer keys: nothing.
  void retire(const Stored& k) {
    if constexpr (kString) {
      std::lock_guard lock(retired_mu_);
      retired_.push_back(k.rec);
    }
  }

  bool try_insert(SearchArg key, Value value, Stored* fresh, bool* made, Status* s);
  bool try_remove(SearchArg key, Status* s);
  bool split(N* parent, uint64_t pv, unsigned pos, N* n, uint64_t v, uint64_t rv, Status* s);
  void split_node(N* n, N* sib, Stored* sep);
  void merge_or_rebalance(N* parent, uint64_t pv, unsigned pcnt, unsigned pos, N* n, uint64_t v);
  void collapse_root(N* n, uint64_t v, uint64_t rv);

  // PM: the geometry of node_size (the constructor's, or the root object's
  // at recovery); the log's blocks per slot (a record holds at most three
  // nodes' changed bytes, in at most 12 segments: a rebalance).
  void set_geometry(uint32_t node_size) {
    node_size_ = node_size;
    leaf_cap_ = leaf_capacity(node_size);
    leaf_bits_ = kUnsorted ? (leaf_cap_ + 63) / 64 : 0;
    inner_cap_ = (node_size - kHeaderBytes - 8) / (8 * (W + 1));
    block_ = std::bit_ceil(node_size);
  }
  static uint32_t log_blocks(uint32_t node_size) {
    return UndoLog::blocks_for(3 * uint64_t{node_size}, 12);
  }
  // PmLeaves recovery: builds DRAM inner levels bottom-up over the leaves
  // `chain` (offsets in chain order, checked), and returns the root (the
  // leaf itself when there is one leaf). Each level is cut into the fewest
  // nodes of at most rebuild_children() children, sizes differing by
  // at most one (so none is underfull); separators are the children's low
  // fences, fences and right links as a split would leave them.
  N* build_inner(const std::vector<uint64_t>& chain);
  // Children per rebuilt inner node: three quarters of the most it holds, so
  // the first inserts after a recovery do not split every inner node they
  // pass (inserts split full nodes on the way down); at least 2.
  unsigned rebuild_children() const { return std::max(2u, (3 * (inner_cap_ + 1) + 3) / 4); }
  // Recovery's walk: checks the node at `off` and its subtree (every word
  // it follows names a node block of this tree, never twice; levels, counts
  // and bitmaps in range) and lists the nodes per level in key order.
  Status walk(uint64_t off, int level, std::vector<std::vector<uint64_t>>* levels,
              std::unordered_set<uint64_t>* seen, uint64_t* keys) const;

  struct VerifyState;
  Status verify_node(const N* n, const Stored& lo, bool bounded, const Stored& hi, unsigned level,
                     VerifyState* vs) const;

  // Geometry: set by the constructor (and, in PM, by recover() from the
  // root object), then fixed.
  const bool group_flush_ = false;  // flush=group (ModelledPmNodes)
  uint32_t node_size_;
  unsigned leaf_cap_;
  unsigned leaf_bits_;  // bitmap words of an unsorted leaf (0: sorted leaves)
  unsigned inner_cap_;
  // PM only: allocator block bytes of a node (node_size rounded up to a
  // power of two), the pool's base address, the root object, the version
  // locks, the undo log, and the nodes unlinked by SMOs (freed when the tree
  // is destroyed; a crash leaves them to recovery's reachability pass).
  uint32_t block_ = 0;
  char* base_ = nullptr;
  uint64_t pool_bytes_ = 0;  // the pool's size (PmLeaves: what put() stores with pm::store)
  BtreeRoot* root_obj_ = nullptr;
  std::unique_ptr<LockTable> locks_;
  std::unique_ptr<UndoLog> log_;
  std::mutex retired_nodes_mu_;
  std::vector<uint64_t> retired_nodes_;
  std::atomic<N*> root_{nullptr};
  std::atomic<uint64_t> root_lock_{0};  // version lock guarding root_ replacement
  std::atomic<uint64_t> size_{0};       // live keys
  mutable std::mutex nodes_mu_;
  std::vector<N*> nodes_;  // every node ever allocated, retired ones included
  // String keys: bytes of every key record allocated and not yet freed
  // (live and retired), and the retired records.
  std::atomic<uint64_t> record_bytes_{0};
  std::mutex retired_mu_;
  std::vector<const char*> retired_;
};

// Insert (one attempt; false = restart). Top-down: a full inner node on the
// path, or a full leaf that must take the key, is split first (holding its
// parent) and the insert restarts, so a split never propagates more than one
// level and the parent always has room for the separator. The key to store
// is made once (*fresh, *made; for string keys its record, allocated before
// the leaf is locked) and kept across restarts.
template <class KP, class LP, class SP>
bool Btree<KP, LP, SP>::try_insert(SearchArg key, Value value, Stored* fresh, bool* made,
                                   Status* s) {
  uint64_t rv = 0;
  read_lock(root_lock_, &rv);
  N* n = root_.load(std::memory_order_acquire);
  N* parent = nullptr;
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
      unsigned i;
      if (leaf_find(n, key, &i)) {
        if (!check(ver(n), v)) return false;
        *s = Status::AlreadyExists();
        return true;
      }
      if (cnt == leaf_cap_) return direct && split(parent, pv, pos, n, v, rv, s);
      if constexpr (kString) {
        if (!*made) {
          *fresh = KP::make(key);
          *made = true;
          record_bytes_.fetch_add(KP::record_bytes(*fresh), std::memory_order_relaxed);
        }
      } else {
        *fresh = key;
        (void)made;
      }
      if (!upgrade(ver(n), v)) return false;
      if constexpr (kUnsorted) {
        // The pair into the first free slot, then its bit (no shift). PM
        // (Ni et al. §3.3): the pair is persisted before the bitmap word
        // that publishes it is written, and the bitmap word with one NAW,
        // so a crash leaves the slot free (its bit clear: the pair's bytes
        // are ignored) or the pair whole and published.
        i = first_free(n);
        set_key(n, i, *fresh);
        put(vals(n)[i], value);
        if constexpr (kPm) {
          pm::flush(&keys(n)[i], 8, {LP::kSiteInsertSlot});
          pm::flush(&vals(n)[i], 8, {LP::kSiteInsertSlot});
          pm::fence({LP::kSiteInsertSlot});
        }
        if constexpr (kModelled) {
          // flush=group: the key's, the value's and the bitmap word's lines
          // in one group, in address order (flush=none: stores only).
          put(bitmap(n)[i / 64], ld(bitmap(n)[i / 64]) | uint64_t{1} << (i % 64));
          auto tx = begin_txn();
          tx.dirty(&keys(n)[i], 8);
          tx.dirty(&vals(n)[i], 8);
          tx.dirty(&bitmap(n)[i / 64], 8);
          tx.commit();
        } else {
          put_durable(bitmap(n)[i / 64], ld(bitmap(n)[i / 64]) | uint64_t{1} << (i % 64),
                      LP::kSiteBitmap);
        }
      } else {
        // Shift the larger pairs right by one slot; concurrent readers see a
        // torn node only under the lock, and their version check rejects it.
        // PM (btree-wal): one logged transaction; the record holds the old
        // count word and the old pairs [i, cnt) that the shift overwrites
        // (slot cnt is past the old count: no old value to keep).
        auto tx = begin_txn();
        shift_ranges(n, i, cnt, [&](const void* p, size_t len) { tx.save(p, len); });
        tx.seal();
        for (unsigned j = cnt; j > i; --j) {
          move_key(n, j, n, j - 1);
          put(vals(n)[j], ld(vals(n)[j - 1]));
        }
        set_key(n, i, *fresh);
        put(vals(n)[i], value);
        put(n->count, static_cast<uint16_t>(cnt + 1));
        shift_ranges(n, i, cnt + 1, [&](const void* p, size_t len) { tx.dirty(p, len); });
        tx.commit();
      }
      unlock(ver(n));
      size_.fetch_add(1, std::memory_order_relaxed);
      *s = Status::Ok();
      return true;
    }
    if (cnt == inner_cap_) {
      return direct && split(parent, pv, pos, n, v, rv, s);
    }
    pos = child_pos(n, cnt, key);
    N* c = kid(n, pos);
    if (c == nullptr || !check(ver(n), v)) return false;
    parent = n;
    pv = v;
    n = c;
    direct = true;
  }
}

// Splits the full node n (read at version v) whose parent (read at pv) routes
// to it through child slot pos; parent == nullptr means n is the root (read
// under root version rv). Allocates the new node(s) first, then locks parent
// (or the root lock), then n; gives up silently if either changed. Returns
// false (the insert restarts) unless the allocation failed: then true with
// *s = the allocator's error (OutOfSpace), nothing changed.
template <class KP, class LP, class SP>
bool Btree<KP, LP, SP>::split(N* parent, uint64_t pv, unsigned pos, N* n, uint64_t v, uint64_t rv,
                              Status* s) {
  N* sib;
  if (Status a = alloc_node(n->level, &sib); !a.ok()) {
    *s = a;
    return true;
  }
  if (parent == nullptr) {
    N* root;
    if (Status a = alloc_node(static_cast<uint16_t>(n->level + 1), &root); !a.ok()) {
      discard(sib);
      *s = a;
      return true;
    }
    if (!upgrade(root_lock_, rv)) {
      discard(root), discard(sib);
      return false;
    }
    if (root_.load(std::memory_order_acquire) != n || !upgrade(ver(n), v)) {
      unlock(root_lock_);
      discard(root), discard(sib);
      return false;
    }
    // PM: one logged transaction (the record: n's changed bytes and the
    // root word; sib and root are new, unpublished until the root word
    // changes, and persisted before the commit).
    auto tx = begin_txn();
    save_node(tx, n);
    if constexpr (kPm && !kInnerDram) tx.save(&root_obj_->root_node, 8);
    tx.seal();
    Stored sep;
    split_node(n, sib, &sep);
    // Root split: a new root with one separator above n and its new sibling.
    set_key(root, 0, sep);
    set_kid(root, 0, n);
    set_kid(root, 1, sib);
    put(root->count, static_cast<uint16_t>(1));
    if constexpr (kPm && !kInnerDram) {
      put(root_obj_->root_node, to_word(root));
      tx.dirty(&root_obj_->root_node, 8);
    }
    dirty_node(tx, n), dirty_new_node(tx, sib), dirty_new_node(tx, root);
    tx.commit();
    adopt(sib), adopt(root);
    root_.store(root, std::memory_order_release);
    unlock(ver(n));
    unlock(root_lock_);
    return false;
  }
  if (!upgrade(ver(parent), pv)) {
    discard(sib);
    return false;
  }
  if (!upgrade(ver(n), v)) {
    unlock(ver(parent));
    discard(sib);
    return false;
  }
  // PM: one logged transaction (the record: the parent's and n's changed
  // bytes; sib is new, published by the parent's child slot and n's right
  // link, and persisted before the commit).
  auto tx = begin_txn();
  save_node(tx, parent);
  save_node(tx, n);
  tx.seal();
  Stored sep;
  split_node(n, sib, &sep);
  adopt(sib);
  // The parent is not full: the insert split it on the way down otherwise.
  unsigned pcnt = count_of(parent);
  for (unsigned j = pcnt; j > pos; --j) {
    move_key(parent, j, parent, j - 1);
    set_kid(parent, j + 1, kid(parent, j));
  }
  set_key(parent, pos, sep);
  set_kid(parent, pos + 1, sib);
  put(parent->count, static_cast<uint16_t>(pcnt + 1));
  dirty_node(tx, parent), dirty_node(tx, n), dirty_new_node(tx, sib);
  tx.commit();
  unlock(ver(n));
  unlock(ver(parent));
  return false;
}

// Moves the upper half of the locked, full node n into sib, a new node of
// n's level, as n's right sibling (B-link: the sibling inherits n's high
// fence and right link, n's high fence becomes the separator). Returns the
// separator.
template <class KP, class LP, class SP>
void Btree<KP, LP, SP>::split_node(N* n, N* sib, Stored* sep) {
  unsigned cnt = count_of(n);
  if (kUnsorted && n->level == 0) {
    // Sort the pairs in DRAM; the lower half stays (rewritten in slots
    // 0..half-1), the upper half goes to the sibling.
    std::array<Stored, kMaxLeafCap> k;
    std::array<Value, kMaxLeafCap> x;
    cnt = leaf_sorted(n, k.data(), x.data());
    const unsigned half = cnt / 2;
    leaf_assign(sib, k.data() + half, x.data() + half, cnt - half);
    *sep = k[half];
    leaf_assign(n, k.data(), x.data(), half);
  } else if (n->level == 0) {
    unsigned half = cnt / 2;
    for (unsigned j = half; j < cnt; ++j) {
      move_key(sib, j - half, n, j);
      put(vals(sib)[j - half], ld(vals(n)[j]));
    }
    put(sib->count, static_cast<uint16_t>(cnt - half));
    *sep = key_at(sib, 0);
    put(n->count, static_cast<uint16_t>(half));
  } else {
    unsigned mid = cnt / 2;  // keys[mid] moves up
    *sep = key_at(n, mid);
    for (unsigned j = mid + 1; j < cnt; ++j) move_key(sib, j - mid - 1, n, j);
    for (unsigned j = mid + 1; j <= cnt; ++j) set_kid(sib, j - mid - 1, kid(n, j));
    put(sib->count, static_cast<uint16_t>(cnt - mid - 1));
    put(n->count, static_cast<uint16_t>(mid));
  }
  set_low(sib, *sep);
  set_high(sib, high_of(n));
  set_sib(sib, sib_of(n));
  set_sib(n, sib);  // publishes the fully built sibling
  set_high(n, *sep);
}

// Remove (one attempt; false = restart). Top-down: an underfull node on the
// path is merged with or rebalanced against a sibling first, and a root with
// a single child is replaced by that child; then the key leaves its leaf.
template <class KP, class LP, class SP>
bool Btree<KP, LP, SP>::try_remove(SearchArg key, Status* s) {
  uint64_t rv = 0;
  read_lock(root_lock_, &rv);
  N* n = root_.load(std::memory_order_acquire);
  N* parent = nullptr;
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
      unsigned i;
      if (!leaf_find(n, key, &i)) {
        if (!check(ver(n), v)) return false;
        *s = Status::NotFound();
        return true;
      }
      if (!upgrade(ver(n), v)) return false;
      const Stored gone = key_at(n, i);
      if constexpr (kUnsorted) {
        // PM: one NAW of the bitmap word (the pair is gone or still there).
        put_durable(bitmap(n)[i / 64], ld(bitmap(n)[i / 64]) & ~(uint64_t{1} << (i % 64)),
                    LP::kSiteBitmap);
      } else {
        // PM (btree-wal): logged; the record holds the old count word and
        // the old pairs [i, cnt) that the shift overwrites.
        auto tx = begin_txn();
        shift_ranges(n, i, cnt, [&](const void* p, size_t len) { tx.save(p, len); });
        tx.seal();
        for (unsigned j = i + 1; j < cnt; ++j) {
          move_key(n, j - 1, n, j);
          put(vals(n)[j - 1], ld(vals(n)[j]));
        }
        put(n->count, static_cast<uint16_t>(cnt - 1));
        shift_ranges(n, i, cnt - 1, [&](const void* p, size_t len) { tx.dirty(p, len); });
        tx.commit();
      }
      unlock(ver(n));
      retire(gone);
      size_.fetch_sub(1, std::memory_order_relaxed);
      *s = Status::Ok();
      return true;
    }
    pos = child_pos(n, cnt, key);
    N* c = kid(n, pos);
    if (c == nullptr || !check(ver(n), v)) return false;
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
template <class KP, class LP, class SP>
void Btree<KP, LP, SP>::merge_or_rebalance(N* parent, uint64_t pv, unsigned pcnt, unsigned pos,
                                           N* n, uint64_t v) {
  const bool n_left = pos < pcnt;
  const unsigned sep_idx = n_left ? pos : pos - 1;
  N* sib = kid(parent, n_left ? pos + 1 : pos - 1);
  uint64_t sv;
  if (sib == nullptr || !read_lock(ver(sib), &sv) || !check(ver(parent), pv)) return;
  N* left = n_left ? n : sib;
  N* right = n_left ? sib : n;
  const uint64_t lv = n_left ? v : sv;
  const uint64_t rv = n_left ? sv : v;
  if (!upgrade(ver(parent), pv)) return;
  if (!upgrade(ver(left), lv)) {
    unlock(ver(parent));
    return;
  }
  if (!upgrade(ver(right), rv)) {
    unlock(ver(left));
    unlock(ver(parent));
    return;
  }
  const unsigned lc = count_of(left);
  const unsigned rc = count_of(right);
  const bool leaf = left->level == 0;
  // Merge when the two fit with room to spare; also when they just fit and
  // a rebalance would leave one of them underfull (only with the tiny
  // inner nodes of 128 B string-key trees, 2 separators: 1 + 0 separators
  // rebalance to 1 + 0 again, and the remove would restart for ever).
  const unsigned total = leaf ? lc + rc : lc + 1 + rc;  // keys to place (inner: + separator)
  const unsigned half = total / 2;                      // left's share (inner: the separator index)
  const unsigned right_share = leaf ? total - half : total - half - 1;
  const bool rebalance_helps = !underfull(left, half) && !underfull(right, right_share);
  const bool merge =
      leaf ? lc + rc < leaf_cap_ || (lc + rc == leaf_cap_ && !rebalance_helps)
           : lc + rc + 1 < inner_cap_ || (lc + rc + 1 == inner_cap_ && !rebalance_helps);
  // PM: one logged transaction (the record: the changed bytes of the
  // parent, of left, and, for a rebalance, of right; a merge leaves right
  // as it is, unlinked, and retires it after the commit).
  auto tx = begin_txn();
  save_node(tx, parent);
  save_node(tx, left);
  if (!merge) save_node(tx, right);
  tx.seal();
  if (merge) {
    if (kUnsorted && leaf) {
      // Right's pairs into left's free slots: both sorted in DRAM and
      // rewritten (an SMO; the common path never sorts).
      std::array<Stored, 2 * kMaxLeafCap> k;
      std::array<Value, 2 * kMaxLeafCap> x;
      unsigned c = leaf_sorted(left, k.data(), x.data());
      c += leaf_sorted(right, k.data() + c, x.data() + c);
      leaf_assign(left, k.data(), x.data(), c);
    } else if (leaf) {
      for (unsigned j = 0; j < rc; ++j) {
        move_key(left, lc + j, right, j);
        put(vals(left)[lc + j], ld(vals(right)[j]));
      }
      put(left->count, static_cast<uint16_t>(lc + rc));
    } else {
      // The separator comes down between the two key runs.
      move_key(left, lc, parent, sep_idx);
      for (unsigned j = 0; j < rc; ++j) move_key(left, lc + 1 + j, right, j);
      for (unsigned j = 0; j <= rc; ++j) set_kid(left, lc + 1 + j, kid(right, j));
      put(left->count, static_cast<uint16_t>(lc + rc + 1));
    }
    set_high(left, high_of(right));
    set_sib(left, sib_of(right));
    // Drop separator sep_idx and child sep_idx + 1 (= right) from the parent.
    for (unsigned j = sep_idx + 1; j < pcnt; ++j) {
      move_key(parent, j - 1, parent, j);
      set_kid(parent, j, kid(parent, j + 1));
    }
    put(parent->count, static_cast<uint16_t>(pcnt - 1));
    dirty_node(tx, parent), dirty_node(tx, left);
    tx.commit();
    unlock(ver(left));
    unlock_obsolete(ver(right));
    unlock(ver(parent));
    retire_node(right);
    return;
  }
  // Rebalance through a scratch copy of both nodes' contents.
  std::array<Stored, 2 * kMaxLeafCap + 2> k{};
  std::array<uint64_t, 2 * kMaxLeafCap + 2> x{};
  Stored sep;
  if (kUnsorted && leaf) {
    // Both leaves' pairs in key order (left's are all below right's).
    const unsigned c = leaf_sorted(left, k.data(), x.data());
    leaf_sorted(right, k.data() + c, x.data() + c);
    leaf_assign(left, k.data(), x.data(), half);
    leaf_assign(right, k.data() + half, x.data() + half, total - half);
    sep = k[half];
  } else if (leaf) {
    for (unsigned j = 0; j < lc; ++j) k[j] = key_at(left, j), x[j] = ld(vals(left)[j]);
    for (unsigned j = 0; j < rc; ++j) k[lc + j] = key_at(right, j), x[lc + j] = ld(vals(right)[j]);
    const unsigned nl = half;
    for (unsigned j = 0; j < nl; ++j) set_key(left, j, k[j]), put(vals(left)[j], x[j]);
    for (unsigned j = nl; j < total; ++j)
      set_key(right, j - nl, k[j]), put(vals(right)[j - nl], x[j]);
    put(left->count, static_cast<uint16_t>(nl));
    put(right->count, static_cast<uint16_t>(total - nl));
    sep = k[nl];
  } else {
    // Keys: left's, the separator, right's; children: left's then right's.
    for (unsigned j = 0; j < lc; ++j) k[j] = key_at(left, j);
    k[lc] = key_at(parent, sep_idx);
    for (unsigned j = 0; j < rc; ++j) k[lc + 1 + j] = key_at(right, j);
    std::array<N*, 2 * kMaxLeafCap + 2> c{};
    for (unsigned j = 0; j <= lc; ++j) c[j] = kid(left, j);
    for (unsigned j = 0; j <= rc; ++j) c[lc + 1 + j] = kid(right, j);
    const unsigned mid = half;  // k[mid] becomes the separator
    for (unsigned j = 0; j < mid; ++j) set_key(left, j, k[j]);
    for (unsigned j = 0; j <= mid; ++j) set_kid(left, j, c[j]);
    for (unsigned j = mid + 1; j < total; ++j) set_key(right, j - mid - 1, k[j]);
    for (unsigned j = mid + 1; j <= total; ++j) set_kid(right, j - mid - 1, c[j]);
    put(left->count, static_cast<uint16_t>(mid));
    put(right->count, static_cast<uint16_t>(total - mid - 1));
    sep = k[mid];
  }
  set_key(parent, sep_idx, sep);
  set_high(left, sep);
  set_low(right, sep);
  dirty_node(tx, parent), dirty_node(tx, left), dirty_node(tx, right);
  tx.commit();
  unlock(ver(right));
  unlock(ver(left));
  unlock(ver(parent));
}

// Replaces an inner root with no separators (one child) by that child.
template <class KP, class LP, class SP>
void Btree<KP, LP, SP>::collapse_root(N* n, uint64_t v, uint64_t rv) {
  if (!upgrade(root_lock_, rv)) return;
  if (root_.load(std::memory_order_acquire) != n || !upgrade(ver(n), v)) {
    unlock(root_lock_);
    return;
  }
  // PM: the root word by one NAW (a crash leaves the old root, a valid
  // tree one level taller with the same keys, or the child). PmLeaves: the
  // root word names the first leaf, which no collapse changes.
  if constexpr (kPm && !kInnerDram) {
    put_durable(root_obj_->root_node, ld(kids(n)[0]), LP::kSiteCollapse);
  }
  root_.store(kid(n, 0), std::memory_order_release);
  unlock_obsolete(ver(n));
  unlock(root_lock_);
  retire_node(n);
}

// --- verify ------------------------------------------------------------------

template <class KP, class LP, class SP>
struct Btree<KP, LP, SP>::VerifyState {
  std::vector<std::vector<const N*>> levels;  // per level, left to right
  uint64_t keys = 0;
};

template <class KP, class LP, class SP>
Status Btree<KP, LP, SP>::verify_node(const N* n, const Stored& lo, bool bounded, const Stored& hi,
                                      unsigned level, VerifyState* vs) const {
  auto bad = [&](const std::string& what) {
    return Status::Corruption(std::string(kName) + ": level " + std::to_string(level) +
                              " node with low fence " + KP::show(lo) + ": " + what);
  };
  const uint64_t word = ld(ver(n));
  if (word & kLocked) return bad("left locked");
  if (word & kObsolete) return bad("obsolete node still reachable");
  if (n->level != level) {
    return bad("level " + std::to_string(n->level) + ", expected " + std::to_string(level) +
               " (leaves not all at the same depth)");
  }
  // (An unsorted leaf's count is its bitmap's population count.)
  const unsigned cnt = kUnsorted && level == 0 ? count_of(n) : ld(n->count);
  if (cnt > cap(n)) return bad("count " + std::to_string(cnt) + " above capacity");
  if (!KP::eq(low_of(n), lo)) return bad("low fence " + KP::show(low_of(n)) + " != separator");
  if (bounded && !KP::eq(high_of(n), hi)) {
    return bad("high fence " + KP::show(high_of(n)) + " != separator " + KP::show(hi));
  }
  if (!KP::consistent(low_of(n)) || (bounded && !KP::consistent(high_of(n)))) {
    return bad("a fence's prefix word does not match its key");
  }
  // An unsorted leaf's valid pairs, sorted: its keys must then ascend
  // strictly (no duplicate) like a sorted node's; its bitmap must name no
  // slot past the capacity.
  std::array<Stored, kMaxLeafCap> sorted;
  std::array<Value, kMaxLeafCap> unused;
  if (kUnsorted && level == 0) {
    for (unsigned w = 0; w < leaf_bits_; ++w) {
      const uint64_t bits = ld(bitmap(n)[w]);
      const unsigned lo_slot = w * 64;
      if (lo_slot + 64 > leaf_cap_ && (bits >> (leaf_cap_ - lo_slot)) != 0) {
        return bad("bitmap has bits set past the leaf's " + std::to_string(leaf_cap_) + " slots");
      }
    }
    leaf_sorted(n, sorted.data(), unused.data());
  }
  for (unsigned i = 0; i < cnt; ++i) {
    const Stored k = kUnsorted && level == 0 ? sorted[i] : key_at(n, i);
    if (!KP::consistent(k)) {
      return bad("prefix word of slot " + std::to_string(i) + " does not match its key");
    }
    if (i > 0 && !KP::lt(kUnsorted && level == 0 ? sorted[i - 1] : key_at(n, i - 1), k)) {
      return bad(kUnsorted && level == 0
                     ? "key " + KP::show(k) + " held twice"
                     : "keys not strictly ascending at slot " + std::to_string(i));
    }
    if (KP::lt(k, lo) || (bounded && !KP::lt(k, hi))) {
      return bad("key " + KP::show(k) + " outside the range its parent's separators bound");
    }
  }
  vs->levels[level].push_back(n);
  if (level == 0) {
    vs->keys += cnt;
    return Status::Ok();
  }
  for (unsigned i = 0; i <= cnt; ++i) {
    const N* c = kid(n, i);
    if (c == nullptr) return bad("null child " + std::to_string(i));
    const Stored clo = i == 0 ? lo : key_at(n, i - 1);
    const bool cb = i < cnt || bounded;
    const Stored chi = i < cnt ? key_at(n, i) : hi;
    Status s = verify_node(c, clo, cb, chi, level - 1, vs);
    if (!s.ok()) return s;
  }
  return Status::Ok();
}

template <class KP, class LP, class SP>
Status Btree<KP, LP, SP>::verify(VerifyReport* report) const {
  const N* root = root_.load(std::memory_order_acquire);
  if (!KP::is_min(low_of(root)) || sib_of(root) != nullptr) {
    return Status::Corruption(std::string(kName) + ": root has a low fence or a right link");
  }
  VerifyState vs;
  vs.levels.resize(root->level + 1u);
  Status s = verify_node(root, Stored{}, false, Stored{}, root->level, &vs);
  if (!s.ok()) return s;
  // Right links: on each level, the in-order nodes chained left to right,
  // high fence = next node's low fence, the last one unlinked (acyclic).
  uint64_t inner = 0;
  for (size_t lv = 0; lv < vs.levels.size(); ++lv) {
    const auto& nodes = vs.levels[lv];
    for (size_t j = 0; j < nodes.size(); ++j) {
      const N* want = j + 1 < nodes.size() ? nodes[j + 1] : nullptr;
      if (sib_of(nodes[j]) != want) {
        return Status::Corruption(std::string(kName) + ": level " + std::to_string(lv) + " node " +
                                  std::to_string(j) +
                                  ": right link does not point at the next "
                                  "node in key order");
      }
      if (want != nullptr && !KP::eq(high_of(nodes[j]), low_of(want))) {
        return Status::Corruption(std::string(kName) + ": level " + std::to_string(lv) + " node " +
                                  std::to_string(j) + ": high fence != right sibling's low fence");
      }
    }
    if (lv > 0) inner += nodes.size();
  }
  // The leaf chain, walked by right links from the leftmost leaf, in order.
  uint64_t chain_keys = 0;
  bool first = true;
  Stored prev{};
  size_t steps = 0;
  for (const N* l = vs.levels[0].front(); l != nullptr; l = sib_of(l)) {
    if (++steps > vs.levels[0].size())
      return Status::Corruption(std::string(kName) + ": leaf chain has a cycle");
    std::array<Stored, kMaxLeafCap> ks;
    std::array<Value, kMaxLeafCap> xs;
    const unsigned c = leaf_sorted(l, ks.data(), xs.data());
    for (unsigned i = 0; i < c; ++i) {
      const Stored k = ks[i];
      if (!first && !KP::lt(prev, k)) {
        return Status::Corruption(std::string(kName) + ": leaf chain out of key order");
      }
      first = false;
      prev = k;
      ++chain_keys;
    }
  }
  const uint64_t size = size_.load(std::memory_order_relaxed);
  if (chain_keys != vs.keys || vs.keys != size) {
    return Status::Corruption(std::string(kName) + ": key count mismatch: tree walk " +
                              std::to_string(vs.keys) + ", leaf chain " +
                              std::to_string(chain_keys) + ", counter " + std::to_string(size));
  }
  *report = VerifyReport{};
  report->keys = vs.keys;
  report->leaves = vs.levels[0].size();
  report->inner_nodes = inner;
  report->height = root->level + 1u;
  return Status::Ok();
}

template <class KP, class LP, class SP>
Status Btree<KP, LP, SP>::damage(BtreeDamage d) {
  static_assert(!kString, "btree_damage_for_test takes integer-key trees");
  N* first = root_.load(std::memory_order_acquire);
  while (first->level > 0) first = kid(first, 0);
  N* second = sib_of(first);
  if (second == nullptr || count_of(first) < 2 || count_of(second) < 2) {
    return Status::InvalidArgument("btree_damage_for_test: the tree needs two leaves of 2+ keys");
  }
  switch (d) {
    case BtreeDamage::kUnsortedLeaf: {
      if constexpr (kUnsorted) {  // out of order is allowed: a duplicate key instead
        put(keys(first)[1], ld(keys(first)[0]));
        break;
      }
      const uint64_t k0 = ld(keys(first)[0]);
      put(keys(first)[0], ld(keys(first)[1]));
      put(keys(first)[1], k0);
      break;
    }
    case BtreeDamage::kLeafChainCycle:
      set_sib(second, first);
      break;
    case BtreeDamage::kFenceMismatch:
      put(second->low[0], ld(second->low[0]) + 1);
      break;
    case BtreeDamage::kKeyOutOfRange:
      put(keys(first)[count_of(first) - 1u], ~uint64_t{0});
      break;
    case BtreeDamage::kCountMismatch:
      size_.fetch_add(1, std::memory_order_relaxed);
      break;
    case BtreeDamage::kBitmapPastCapacity:
      if constexpr (!kUnsorted) {
        return Status::InvalidArgument(
            "btree_damage_for_test: kBitmapPastCapacity needs unsorted leaves");
      } else {
        const unsigned w = (leaf_cap_ - 1) / 64;  // the last word, which has bits past the capacity
        put(bitmap(first)[w], ld(bitmap(first)[w]) | uint64_t{1} << 63);
      }
      break;
  }
  return Status::Ok();
}

// --- PM: create, recover -------------------------------------------------------

// Creates an empty tree in an empty pool: the root object (with the log's
// block table) and an empty root leaf are written and persisted, then the
// pool's root is set by one NAW. A crash before that NAW leaves a pool with
// no root, which the next open creates anew (allocate_root_object reclaims
// the blocks of the crashed create).
template <class KP, class LP, class SP>
Status Btree<KP, LP, SP>::create() {
  if constexpr (kPm) {
    set_geometry(node_size_);
    uint64_t ro;
    if (Status s = allocate_root_object(this->pool_->allocator(), kBtreeRootBytes, &ro); !s.ok()) {
      return s;
    }
    root_obj_ = this->pool_->template ptr<BtreeRoot>(ro);
    pm::fill(root_obj_, 0, kBtreeRootBytes);
    locks_ = std::make_unique<LockTable>(this->pool_->size(), block_);
    const uint32_t blocks = log_blocks(node_size_);
    if (Status s = UndoLog::create(this->pool_, kBtreeLogSlots, blocks, root_obj_->log_table, kName,
                                   &log_);
        !s.ok()) {
      return s;
    }
    N* leaf;
    if (Status s = alloc_node(0, &leaf); !s.ok()) return s;
    pm::flush(leaf, node_size_, {LP::kSiteCreate});
    pm::store(&root_obj_->magic, LP::kPmMagic);
    pm::store(&root_obj_->node_size, uint64_t{node_size_});
    pm::store(&root_obj_->log_slots, kBtreeLogSlots);
    pm::store(&root_obj_->log_blocks, blocks);
    pm::store(&root_obj_->inner_dram, uint64_t{kInnerDram ? 1u : 0u});
    put(root_obj_->root_node, to_word(leaf));
    pm::persist(root_obj_, kBtreeRootBytes, {LP::kSiteCreate});
    this->pool_->set_root(ro);
    root_.store(leaf, std::memory_order_release);
    return Status::Ok();
  } else {
    return Status::NotSupported("create: a volatile tree");
  }
}

template <class KP, class LP, class SP>
Status Btree<KP, LP, SP>::walk(uint64_t off, int level, std::vector<std::vector<uint64_t>>* levels,
                               std::unordered_set<uint64_t>* seen, uint64_t* keys) const {
  auto bad = [&](const std::string& what) {
    return Status::Corruption(std::string(kName) + ": node " + hex(off) + ": " + what);
  };
  pm::Pool* pool = this->pool_;
  if (off == 0 || off % block_ != 0 || off < kUndoLogBlockBytes || !pool->contains(off, block_) ||
      pool->allocator().block_size(off) != block_) {
    return bad("not a " + std::to_string(block_) + " B block of the pool");
  }
  if (!seen->insert(off).second) return bad("reached twice");
  const N* n = to_node(off);
  const int lvl = n->level;
  if (level < 0 ? lvl >= 64 : lvl != level) {
    return bad("level " + std::to_string(lvl) +
               (level < 0 ? " (64 or more)" : ", expected " + std::to_string(level)));
  }
  if (levels->empty()) levels->resize(static_cast<size_t>(lvl) + 1);
  if (lvl > 0 || !kUnsorted) {
    const unsigned raw = ld(n->count);
    if (raw > cap(n)) return bad("count " + std::to_string(raw) + " above capacity");
  } else {
    for (unsigned w = 0; w < leaf_bits_; ++w) {
      const uint64_t bits = ld(bitmap(n)[w]);
      if (w * 64 + 64 > leaf_cap_ && (bits >> (leaf_cap_ - w * 64)) != 0) {
        return bad("bitmap names slots past the capacity");
      }
    }
  }
  (*levels)[static_cast<size_t>(lvl)].push_back(off);
  const unsigned cnt = count_of(n);
  if (lvl == 0) {
    *keys += cnt;
    return Status::Ok();
  }
  for (unsigned i = 0; i <= cnt; ++i) {
    if (Status s = walk(ld(kids(n)[i]), lvl - 1, levels, seen, keys); !s.ok()) return s;
  }
  return Status::Ok();
}

template <class KP, class LP, class SP>
typename Btree<KP, LP, SP>::N* Btree<KP, LP, SP>::build_inner(const std::vector<uint64_t>& chain) {
  std::vector<N*> level;
  level.reserve(chain.size());
  for (uint64_t off : chain) level.push_back(to_node(off));
  const size_t per = rebuild_children();
  for (uint16_t lvl = 1; level.size() > 1; ++lvl) {
    const size_t m = (level.size() + per - 1) / per;  // nodes on this level
    std::vector<N*> up;
    up.reserve(m);
    size_t at = 0;
    for (size_t j = 0; j < m; ++j) {
      const size_t take = level.size() / m + (j < level.size() % m ? 1 : 0);  // >= 2
      N* p;
      (void)alloc_node(lvl, &p);  // a DRAM inner node: never fails
      for (size_t c = 0; c < take; ++c) {
        set_kid(p, static_cast<unsigned>(c), level[at + c]);
        if (c > 0) set_key(p, static_cast<unsigned>(c - 1), low_of(level[at + c]));
      }
      put(p->count, static_cast<uint16_t>(take - 1));
      set_low(p, low_of(level[at]));
      if (!up.empty()) {
        set_high(up.back(), low_of(level[at]));
        set_sib(up.back(), p);
      }
      adopt(p);
      up.push_back(p);
      at += take;
    }
    level.swap(up);
  }
  return level.front();
}

// Recovery (after a crash or a clean close): (1) the root object and its
// geometry; (2) the undo log rolls back every transaction a crash cut short
// (only without a close record: on a cleanly closed pool a valid record is
// damage), so every SMO and every btree-wal leaf change is all or nothing
// and the tree is exactly a state between transactions; (3) the walk checks
// every node word before anything follows it (PmLeaves: the leaf chain from
// the first leaf, the only durable structure); (4) the reachability pass
// (log blocks and nodes; keys = the leaves' counts) against the close
// record; (5) the DRAM state (root pointer, key count, fresh version locks;
// PmLeaves: the inner nodes, built over the leaf chain); (6) verify(), the full structural check,
// as a safety net against damage the walk cannot see (key order, fences).
template <class KP, class LP, class SP>
Status Btree<KP, LP, SP>::recover() {
  if constexpr (kPm) {
    if (Status s = this->open_root_object(kName, LP::kPmMagic, &root_obj_, kBtreeRootBytes);
        !s.ok()) {
      return s;
    }
    const uint64_t ns = root_obj_->node_size;
    if (ns > kBtreeMaxNodeSize || !btree_valid_node_size(static_cast<uint32_t>(ns))) {
      return Status::Corruption(std::string(kName) + ": root object has invalid node size " +
                                std::to_string(ns));
    }
    if (root_obj_->inner_dram != (kInnerDram ? 1u : 0u)) {
      return Status::Corruption(std::string(kName) + ": root object's inner placement word is " +
                                std::to_string(root_obj_->inner_dram) + ", expected " +
                                (kInnerDram ? "1 (inner nodes in DRAM)" : "0 (inner nodes in PM)"));
    }
    set_geometry(static_cast<uint32_t>(ns));
    if (root_obj_->log_slots != kBtreeLogSlots || root_obj_->log_blocks != log_blocks(node_size_)) {
      return Status::Corruption(std::string(kName) + ": root object has a log of " +
                                std::to_string(root_obj_->log_slots) + " slots of " +
                                std::to_string(root_obj_->log_blocks) + " blocks, expected " +
                                std::to_string(kBtreeLogSlots) + " of " +
                                std::to_string(log_blocks(node_size_)));
    }
    locks_ = std::make_unique<LockTable>(this->pool_->size(), block_);
    if (Status s = UndoLog::open(this->pool_, kBtreeLogSlots, root_obj_->log_blocks,
                                 root_obj_->log_table, kName, &log_);
        !s.ok()) {
      return s;
    }
    uint32_t rolled_back = 0;
    if (Status s = log_->recover(this->pool_->close_record().bytes != 0, &rolled_back); !s.ok()) {
      return s;
    }
    std::vector<std::vector<uint64_t>> levels;
    std::unordered_set<uint64_t> seen;
    uint64_t keys = 0;
    const uint64_t root_off = root_obj_->root_node.load(std::memory_order_acquire);
    if constexpr (kInnerDram) {
      // The leaf chain from the first leaf: each right link checked (a node
      // block of this tree, a leaf, never reached twice) before it is
      // followed, and the low fences strictly ascending from the smallest
      // key, so the inner nodes built over them route every key.
      levels.resize(1);
      for (uint64_t off = root_off; off != 0; off = ld(to_node(off)->sibling)) {
        if (Status s = walk(off, 0, &levels, &seen, &keys); !s.ok()) return s;
        const auto& chain = levels[0];
        const N* n = to_node(off);
        if (chain.size() == 1 ? !KP::is_min(low_of(n))
                              : !KP::lt(low_of(to_node(chain[chain.size() - 2])), low_of(n))) {
          return Status::Corruption(std::string(kName) + ": leaf " + hex(off) + ": low fence " +
                                    KP::show(low_of(n)) +
                                    (chain.size() == 1 ? " in the first leaf (not the smallest key)"
                                                       : " not above its left neighbour's"));
        }
      }
    } else {
      if (Status s = walk(root_off, -1, &levels, &seen, &keys); !s.ok()) return s;
      // Right links (PmLeaves built its chain from them: nothing to check).
      for (size_t lv = 0; lv < levels.size(); ++lv) {
        const auto& chain = levels[lv];
        for (size_t j = 0; j < chain.size(); ++j) {
          const uint64_t want = j + 1 < chain.size() ? chain[j + 1] : 0;
          if (ld(to_node(chain[j])->sibling) != want) {
            return Status::Corruption(std::string(kName) + ": node " + hex(chain[j]) +
                                      ": right link " + hex(ld(to_node(chain[j])->sibling)) +
                                      " does not name the next node of level " +
                                      std::to_string(lv) + " (" + hex(want) + ")");
          }
        }
      }
    }
    Status s = this->reclaim_unreachable(kName, [&](pm::Allocator& alloc, uint64_t* k) {
      if (Status m = log_->mark(alloc); !m.ok()) return m;
      for (const auto& chain : levels) {
        for (uint64_t off : chain) {
          if (Status m = alloc.mark_reachable(off); !m.ok()) return m;
        }
      }
      *k = keys;
      return Status::Ok();
    });
    if (!s.ok()) return s;
    if constexpr (kInnerDram) {
      root_.store(build_inner(levels[0]), std::memory_order_release);
    } else {
      root_.store(to_node(root_off), std::memory_order_release);
    }
    size_.store(keys, std::memory_order_relaxed);
    VerifyReport r;
    if (Status v = verify(&r); !v.ok()) return v;
    return Status::Ok();
  } else {
    return Status::NotSupported("recover: a volatile tree");
  }
}

// The persist sites no crash test can catch by removing them, and why
// (crash lab ablation self-test, crash/oracle.h).
template <class KP, class LP, class SP>
std::vector<std::pair<std::string, std::string>> Btree<KP, LP, SP>::ablation_notes() const {
  if constexpr (!kPm) return {};
  if constexpr (kInnerDram) {
    return {
        {std::string(kName) + ".wal.commit/fence",
         "not observable with inner nodes in DRAM: only leaf SMOs are logged, and after one "
         "the operation restarts and ends with a fence of its own (the slot's persist or the "
         "bitmap NAW) before any other logged transaction can start in its slot, so a crash "
         "can lose the cleared mark only while rolling back is harmless (a complete split or "
         "merge undone: the same keys). The fence is needed once two logged transactions follow "
         "each other in one slot with no fence between (the next record's stores must not "
         "reach PM before the cleared mark), which inner=pm does (an inner split, then a leaf "
         "split) and catches"},
    };
  }
  return {
      {LP::kSiteCollapse,
       "not observable in a crash test: a lost collapse leaves the old root (no separator, one "
       "child: the new root) as a valid tree one level taller with the same keys; the NAW is "
       "needed because the old root is retired and freed when the index is destroyed, after "
       "which its block may be reused while a durable root word still named it"},
  };
}

}  // namespace btree_detail
}  // namespace nvindex
