// Key records: how a persistent index whose slots hold 8 bytes keeps a
// byte-string key (issue 10). The slot holds the pool offset of a key record,
// a block of the pool allocator that holds the key's length and bytes:
//
//   offset  size  field
//        0     1  length, 0..kMaxKeyBytes (255)
//        1   len  key bytes
//
// The block is the allocator's smallest class that fits 1 + len bytes: one
// 64 B line for keys up to 63 bytes (YCSB's 24 B keys), two for up to 127,
// four for up to 255. This is the layout of the papers' successors for
// variable-size keys in PM trees (FAST&FAIR's and wB+-tree's "pointer to the
// key" slots; FP-Tree's and LB+-tree's key pointers next to a fingerprint).
//
// Crash consistency (DESIGN.md §6): a record is written and persisted (flush
// of its lines, one fence) BEFORE the slot that publishes it is written, so a
// published slot never names a record whose bytes are not durable. (An index
// whose protocol fences anyway between the record and the publishing store,
// as wbtree's entry persist before its NAWs, flushes the record without a
// fence of its own: RecordFence::kCallerFences.) A record
// that is persisted but never published (a crash between the two) is
// unreachable, and the allocator's recovery pass (reclaim_unreachable in
// persistent.h) frees it: an index's mark() must mark the record of every
// live slot (mark_key_record). A record is freed only after the slot that
// published it is gone and durable, and only when no concurrent reader can
// still hold its offset (the index's reclamation rule: retire until close,
// free when no other operation is in flight as fastfair does, or an epoch),
// so no slot ever names a freed record.
//
// Thread-safety: store_key_record() and free_key_record() call the
// allocator, which is thread-safe; a record is immutable once published, so
// reading one needs no lock.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "nvindex/index.h"
#include "nvindex/pm/allocator.h"
#include "nvindex/pm/persist.h"
#include "nvindex/pm/pool.h"
#include "nvindex/status.h"
#include "util/hex.h"

namespace nvindex {

/// Bytes of a key record holding a key of `len` bytes (before the
/// allocator's rounding to its class: 64, 128, 256 or 512 B).
inline constexpr uint32_t key_record_bytes(size_t len) { return static_cast<uint32_t>(1 + len); }

/// Whether store_key_record ends with a fence.
enum class RecordFence {
  kFence,  ///< persist: flush the record's lines, then fence
  /// flush only: the caller's protocol fences before the store that
  /// publishes the record (that fence orders these flushes too), so a fence
  /// here would be redundant
  kCallerFences,
};

/// Allocates a key record for `key` (at most kMaxKeyBytes bytes: the caller
/// checked it with check_key), writes length and bytes with pm::copy and
/// persists them (a flush per 64 B line and, with RecordFence::kFence, one
/// fence; `site` names both), and returns its pool offset in *off. Crash:
/// the record is unreachable until the caller publishes *off; recovery frees
/// it then. Errors: OutOfSpace (pool full; nothing allocated), Busy (the
/// allocator is in recovery).
inline Status store_key_record(pm::Pool& pool, std::string_view key, uint64_t* off,
                               pm::Site site = pm::Site(),
                               RecordFence fence = RecordFence::kFence) {
  uint64_t o = 0;
  if (Status s = pool.allocator().allocate(key_record_bytes(key.size()), &o); !s.ok()) return s;
  char* rec = pool.ptr<char>(o);
  const auto len = static_cast<uint8_t>(key.size());
  pm::store(reinterpret_cast<uint8_t*>(rec), len);
  if (!key.empty()) pm::copy(rec + 1, key.data(), key.size());
  if (fence == RecordFence::kFence) {
    pm::persist(rec, key_record_bytes(key.size()), site);
  } else {
    pm::flush(rec, key_record_bytes(key.size()), site);
  }
  *off = o;
  return Status::Ok();
}

/// The key held by the record at pool offset `off` (a published, hence
/// persisted, record). No bounds check: hot path.
inline std::string_view key_record(const pm::Pool& pool, uint64_t off) {
  const char* rec = pool.ptr<const char>(off);
  return {rec + 1, static_cast<uint8_t>(rec[0])};
}

/// Checks, without marking it, that the pool offset `off` (read from a
/// possibly damaged pool) names a key record: the start of an allocator
/// block that holds its stated length. Recovery calls it before comparing
/// the key of a record it has not marked yet. Errors: Corruption "<index>:
/// key record offset 0x.. is not a block" or "<index>: key record 0x.. holds
/// a key of N bytes in a block of M B".
inline Status check_key_record(const pm::Pool& pool, std::string_view index, uint64_t off) {
  const uint32_t block = pool.allocator().block_size(off);
  if (block == 0 || !pool.contains(off, block)) {
    return Status::Corruption(std::string(index) + ": key record offset " + hex(off) +
                              " is not a block");
  }
  const size_t len = static_cast<uint8_t>(*pool.ptr<const char>(off));
  if (key_record_bytes(len) > block) {
    return Status::Corruption(std::string(index) + ": key record " + hex(off) + " holds a key of " +
                              std::to_string(len) + " bytes in a block of " +
                              std::to_string(block) + " B");
  }
  return Status::Ok();
}

/// Marks the record at `off` reachable during a recovery pass, after
/// check_key_record. Errors: check_key_record's, and mark_reachable's (a
/// block marked twice: two slots name one record).
inline Status mark_key_record(pm::Pool& pool, std::string_view index, uint64_t off) {
  if (Status s = check_key_record(pool, index, off); !s.ok()) return s;
  return pool.allocator().mark_reachable(off);
}

/// Frees the record at `off`. The caller must have removed, and persisted the
/// removal of, every slot that named it, and no concurrent reader may still
/// hold `off` (see the file comment).
inline void free_key_record(pm::Pool& pool, uint64_t off) { pool.allocator().free(off); }

/// The largest key of at most kMaxKeyBytes bytes below `key` (its
/// predecessor under byte order, shorter prefix first: a longer key's
/// kMaxKeyBytes-byte prefix; else drop a trailing 0x00 byte, or decrement
/// the last byte and pad with 0xff to kMaxKeyBytes) into *out; false when
/// there is none (key ""). An index whose find_last_less_than searches for
/// the last key <= a target (lbtree, fptree) searches for this one.
inline bool key_predecessor(std::string_view key, std::string* out) {
  if (key.size() > kMaxKeyBytes) {
    out->assign(key.substr(0, kMaxKeyBytes));  // a proper prefix: below key
    return true;
  }
  out->assign(key);
  if (out->empty()) return false;
  if (out->back() == '\0') {
    out->pop_back();
    return true;
  }
  out->back() = static_cast<char>(static_cast<uint8_t>(out->back()) - 1);
  out->resize(kMaxKeyBytes, '\xff');
  return true;
}

/// The largest key below `key` into *out (integers: key - 1; strings:
/// key_predecessor); false when there is none (0, ""). For an index whose
/// find_last_less_than searches the last key <= a target (lbtree, fptree).
template <class K>
inline bool key_before(K key, OwnedKey<K>* out) {
  if constexpr (std::is_same_v<K, std::string_view>) {
    return key_predecessor(key, out);
  } else {
    if (key == 0) return false;
    *out = key - 1;
    return true;
  }
}

/// The smallest key above `key` into *out (integers: key + 1; strings: key
/// followed by a 0x00 byte); false when there is none (UINT64_MAX). For a
/// scan's cursor past the last key it returned.
template <class K>
inline bool key_after(const OwnedKey<K>& key, OwnedKey<K>* out) {
  if constexpr (std::is_same_v<K, std::string_view>) {
    *out = key + '\0';
    return true;
  } else {
    if (key == UINT64_MAX) return false;
    *out = key + 1;
    return true;
  }
}

/// The key a slot's 8-byte key word names, in an index whose slots hold the
/// key itself for integer keys and a key record's offset for string keys
/// (lbtree, fptree): integers the word, strings the record's bytes (read
/// without a check: the word came from a live slot, whose record is
/// published and hence persisted).
template <class K>
inline K slot_key(const pm::Pool& pool, uint64_t word) {
  if constexpr (std::is_same_v<K, std::string_view>) {
    return key_record(pool, word);
  } else {
    (void)pool;
    return word;
  }
}

/// The key word of a new slot for `key` in such an index: integers the key
/// (never fails); strings, after check_key (`index` names the index), a new
/// key record, written and persisted (store_key_record, `site` names its
/// flush and fence) before the caller publishes the word. Errors (strings,
/// nothing allocated): InvalidArgument (key over kMaxKeyBytes), OutOfSpace,
/// Busy.
template <class K>
inline Status new_slot_word(pm::Pool& pool, std::string_view index, K key, pm::Site site,
                            uint64_t* word) {
  if constexpr (std::is_same_v<K, std::string_view>) {
    if (Status s = check_key(index, key); !s.ok()) return s;
    return store_key_record(pool, key, word, site);
  } else {
    (void)pool;
    (void)index;
    (void)site;
    *word = key;
    return Status::Ok();
  }
}

/// The DRAM low keys of the leaves of a tree whose inner nodes live in DRAM
/// (lbtree, fptree: a leaf's low key is its separator, immutable while the
/// leaf is routed to; find_last_less_than steps left of it). A leaf's low key
/// is one 8-byte word in a LockTable: for integer keys the key, for string
/// keys the address of a DRAM copy kept until the tree is destroyed (never a
/// key record, which a remove may free while the separator stays), 0 for
/// "" (the head leaf's minus infinity).
template <class K>
class LowKeys;

template <>
class LowKeys<uint64_t> {
 public:
  /// The low-key word of `low`: the key.
  static uint64_t word(uint64_t low) { return low; }
  /// The low key a word names.
  static uint64_t key(uint64_t word) { return word; }
  /// DRAM held by copies: none.
  static uint64_t dram_bytes() { return 0; }
};

template <>
class LowKeys<std::string_view> {
 public:
  /// The low-key word of `low`: the address of a new DRAM copy (0 for "").
  /// Thread-safe.
  uint64_t word(std::string_view low) {
    if (low.empty()) return 0;
    std::lock_guard g(mu_);
    const std::string& s = keys_.emplace_back(low);
    bytes_ += sizeof(std::string) + (s.capacity() > 15 ? s.capacity() + 1 : 0);
    return reinterpret_cast<uintptr_t>(&s);
  }
  /// The low key a word names (valid while this lives).
  static std::string_view key(uint64_t word) {
    return word == 0 ? std::string_view() : *reinterpret_cast<const std::string*>(word);
  }
  /// DRAM held by the copies (string objects and heap bytes), bytes.
  uint64_t dram_bytes() const {
    std::lock_guard g(mu_);
    return bytes_;
  }

 private:
  std::deque<std::string> keys_;  ///< a deque never moves its elements
  uint64_t bytes_ = 0;
  mutable std::mutex mu_;  ///< guards appends and bytes_
};

// ---------------------------------------------------------------- key words

/// A string key's 8-byte key word, as fastfair and wbtree store it in a slot:
/// (prefix << 48) | record offset, where the record offset (a key record
/// above) is below 2^48 (the index refuses a larger pool) and the prefix is
/// the key's first two bytes, big-endian, zero-padded (key_prefix). The
/// prefix is monotone in the key (s <= t implies prefix(s) <= prefix(t)), so
/// two different prefixes order their keys without reading either record;
/// equal prefixes read the records. A copy of a word carries the same
/// prefix, so word equality means "the same record".
inline constexpr uint64_t kRecordMask = (uint64_t{1} << 48) - 1;
/// The key record offset of a string key word.
inline uint64_t record_of(uint64_t word) { return word & kRecordMask; }
/// The 2-byte prefix of a string key: bytes 0 and 1 big-endian, 0 for a
/// missing byte.
inline uint16_t key_prefix(std::string_view k) {
  const unsigned b0 = k.size() > 0 ? static_cast<uint8_t>(k[0]) : 0u;
  const unsigned b1 = k.size() > 1 ? static_cast<uint8_t>(k[1]) : 0u;
  return static_cast<uint16_t>(b0 << 8 | b1);
}
/// The key word naming the record at `off` that holds `key`.
inline uint64_t key_word(uint64_t off, std::string_view key) {
  return off | uint64_t{key_prefix(key)} << 48;
}

/// Probe of a string-key search: the key, its prefix, and whether the search
/// wants the last entry < key (strict, find_last_less_than) instead of <=.
struct StringProbe {
  StringProbe() = default;
  StringProbe(std::string_view k, bool s) : key(k), prefix(key_prefix(k)), strict(s) {}
  std::string_view key;
  uint16_t prefix = 0;
  bool strict = false;
};

/// The key policy of an index whose 8-byte slots hold key words, for keys K
/// (uint64_t or std::string_view): the only code that differs between an
/// index's two instances when its protocols compare words (fastfair,
/// wbtree). Integer keys: the word is the key, compared as an unsigned
/// integer, with no pool access (the code of an untemplated tree). String
/// keys: the word is a key word (above); word 0 is minus infinity (a lower
/// bound at the left edge), and a comparison reads a record only when the
/// prefixes are equal.
template <class K>
class KeyWords;

template <>
class KeyWords<uint64_t> {
 public:
  /// What a search compares entries against, and how it is passed.
  using Probe = uint64_t;
  using ProbeArg = uint64_t;
  explicit KeyWords(pm::Pool*) {}
  /// The key word of a new entry: the key. Never fails.
  static Status new_word(std::string_view, uint64_t key, uint64_t* word, pm::Site = {},
                         RecordFence = RecordFence::kFence) {
    *word = key;
    return Status::Ok();
  }
  /// Releases a word new_word made that was never published: nothing.
  static void free_word(uint64_t) {}
  /// The probe of a user's key; strict (the last entry < key is wanted)
  /// only for key > 0.
  static Probe probe(uint64_t key, bool strict = false) { return strict ? key - 1 : key; }
  /// The probe of a key word of the index.
  static Probe probe_of_word(uint64_t word) { return word; }
  /// word <= probe.
  static bool le(uint64_t word, uint64_t p) { return word <= p; }
  /// The word is the probe's key.
  static bool eq(uint64_t word, uint64_t p) { return word == p; }
  /// Three-way comparison of two words.
  static int compare(uint64_t a, uint64_t b) { return a < b ? -1 : (a > b ? 1 : 0); }
  /// The key a scan returns.
  static uint64_t owned(uint64_t word) { return word; }
};

template <>
class KeyWords<std::string_view> {
 public:
  using Probe = StringProbe;
  using ProbeArg = const StringProbe&;
  /// `pool`: the index's pool (outlives this).
  explicit KeyWords(pm::Pool* pool) : pool_(pool) {}
  /// The key word of a new entry for `key`: checks its length (check_key,
  /// `index` names the index in the message), then allocates its key record
  /// and persists it (store_key_record, `site` names the flush and fence;
  /// `fence` as there).
  /// The record is unreachable until the caller publishes the word (a crash
  /// before that: recovery reclaims it). Errors: InvalidArgument (key over
  /// kMaxKeyBytes), OutOfSpace, Busy (nothing allocated).
  Status new_word(std::string_view index, std::string_view key, uint64_t* word, pm::Site site = {},
                  RecordFence fence = RecordFence::kFence) const {
    if (Status s = check_key(index, key); !s.ok()) return s;
    uint64_t rec = 0;
    if (Status s = store_key_record(*pool_, key, &rec, site, fence); !s.ok()) return s;
    *word = key_word(rec, key);
    return Status::Ok();
  }
  /// Frees the record of a word new_word made that was never published.
  void free_word(uint64_t word) const { free_key_record(*pool_, record_of(word)); }
  static Probe probe(std::string_view key, bool strict = false) { return {key, strict}; }
  /// The (non-strict) probe of the key a key word names (a published record).
  Probe probe_of_word(uint64_t word) const {
    return StringProbe{key_record(*pool_, record_of(word)), false};
  }
  /// word's key <= p.key (strict probe: <); word 0 is minus infinity.
  bool le(uint64_t word, const StringProbe& p) const {
    if (word == 0) return true;
    const auto wp = static_cast<uint16_t>(word >> 48);
    if (wp != p.prefix) return wp < p.prefix;  // settled without the record
    const int c = key_record(*pool_, record_of(word)).compare(p.key);
    return c < 0 || (c == 0 && !p.strict);
  }
  /// The word names the probe's key (word 0 names none).
  bool eq(uint64_t word, const StringProbe& p) const {
    return word != 0 && static_cast<uint16_t>(word >> 48) == p.prefix &&
           key_record(*pool_, record_of(word)) == p.key;
  }
  /// Three-way comparison (-1, 0, 1) of the keys of two words; word 0 is
  /// minus infinity (below every key, the empty one included).
  int compare(uint64_t a, uint64_t b) const {
    if (a == b) return 0;
    if (a == 0 || b == 0) return a == 0 ? -1 : 1;
    if ((a >> 48) != (b >> 48)) return (a >> 48) < (b >> 48) ? -1 : 1;
    const int c = key_record(*pool_, record_of(a)).compare(key_record(*pool_, record_of(b)));
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  std::string owned(uint64_t word) const {
    return std::string(key_record(*pool_, record_of(word)));
  }

 private:
  pm::Pool* pool_;
};

/// Checks, without marking it, that a key word read from a possibly damaged
/// pool names a key record (check_key_record) and that its prefix bits are
/// that record's key's prefix (a wrong prefix would order keys differently
/// from their bytes). Errors: check_key_record's, Corruption "<index>: key
/// word 0x.. has a prefix that is not its record's".
inline Status check_key_word(const pm::Pool& pool, std::string_view index, uint64_t word) {
  if (Status s = check_key_record(pool, index, record_of(word)); !s.ok()) return s;
  if (word != key_word(record_of(word), key_record(pool, record_of(word)))) {
    return Status::Corruption(std::string(index) + ": key word " + hex(word) +
                              " has a prefix that is not its record's");
  }
  return Status::Ok();
}

// ---------------------------------------------------------------- reclamation

/// Reclamation of removed keys' records under optimistic readers, for an
/// index without epochs (fastfair, wbtree). An optimistic reader may hold a
/// record's offset it read from a slot before the slot was removed, and read
/// the record's bytes after, until its validation fails; so a retired record
/// may be freed (and reused) only when no operation that could have read the
/// slot is still running. Every public operation counts itself in flight
/// (InFlight: acquire increment before it reads the index, release decrement
/// after its last read). reclaim() takes the retired list first, then reads
/// the counter with an acq_rel RMW: if it is 1 (the caller alone), every
/// other operation either ended (its decrement precedes the RMW in the
/// counter's modification order, so its reads happen before the frees) or
/// starts after (its increment reads from the RMW's release sequence, so it
/// sees every slot removal made before the list was taken and cannot reach
/// those records). Otherwise the list goes back for a later try; records
/// retired after the list was taken are not in it. A single-threaded user
/// thus reuses every remove's record at once; under concurrency records wait
/// for a quiescent remove, or free_all() at the index's destruction. Costs
/// one atomic increment and decrement per operation (string instances only).
/// Thread-safety: every method may be called concurrently except free_all().
class RecordReclaimer {
 public:
  /// Counts the calling operation in flight for its scope when kCount (a
  /// string-key instance); no code otherwise (integer keys).
  template <bool kCount>
  class InFlight {
   public:
    explicit InFlight(RecordReclaimer& r) : r_(r) {
      if constexpr (kCount) r_.active_.fetch_add(1, std::memory_order_acquire);
    }
    ~InFlight() {
      if constexpr (kCount) r_.active_.fetch_sub(1, std::memory_order_release);
    }
    InFlight(const InFlight&) = delete;
    InFlight& operator=(const InFlight&) = delete;

   private:
    [[maybe_unused]] RecordReclaimer& r_;
  };

  /// Retires the record at pool offset `off`: no slot names it durably any
  /// more (the caller's removal is persisted).
  void retire(uint64_t off) {
    std::lock_guard g(mu_);
    retired_.push_back(off);
  }
  /// Frees the retired records if no operation but the caller's (which must
  /// be counted by an InFlight) is in flight; else keeps them for a later
  /// call.
  void reclaim(pm::Pool& pool) {
    std::vector<uint64_t> batch;
    {
      std::lock_guard g(mu_);
      if (retired_.empty()) return;
      batch.swap(retired_);
    }
    if (active_.fetch_add(0, std::memory_order_acq_rel) == 1) {
      for (uint64_t off : batch) free_key_record(pool, off);
      return;
    }
    std::lock_guard g(mu_);
    retired_.insert(retired_.end(), batch.begin(), batch.end());
  }
  /// Frees every retired record (the index's destructor: no operation in
  /// flight).
  void free_all(pm::Pool& pool) {
    for (uint64_t off : retired_) free_key_record(pool, off);
    retired_.clear();
  }
  /// Records retired and not yet freed.
  size_t retired() const {
    std::lock_guard g(mu_);
    return retired_.size();
  }

 private:
  mutable std::mutex mu_;  ///< guards retired_
  std::vector<uint64_t> retired_;
  std::atomic<uint64_t> active_{0};  ///< operations in flight
};

}  // namespace nvindex
