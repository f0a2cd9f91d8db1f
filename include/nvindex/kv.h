// nvindex::kv::Store: a persistent key-value store with byte-string keys
// and values over any registered index that takes string keys (docs/kv.md).
//
// An item is a record in the pool's item arena (pm::Allocator::Arena::kItems):
// a 32-byte header (64-bit CAS unique, value length, 32-bit client flags,
// expiry, store time, checksum, key length), then the key, then the value
// (src/kv/item.h has the byte table). The index maps the key to the item's
// pool offset. The operations are memcached's (doc/protocol.txt: set, add,
// replace, append, prepend, cas, delete, incr/decr, touch, flush_all) plus
// ordered range reads and a bulk load; the names a pmemkv user knows (put,
// get, remove, exists, count_all, get_all, get_above, get_below,
// get_between, each with a callback) are there too.
//
// Durability: every write returns only once it is durable (the item is
// persisted before the index publishes its offset, and the index's own
// protocol makes the publication durable before it returns), so a crash at
// any instant leaves each key at its old or its new item, never a torn one.
// A replaced or removed item is freed through epoch reclamation
// (util/epoch.h) once no reader can hold it. Recovery walks the index and
// frees every item no key reaches; on a pool closed cleanly it also checks
// the item count and bytes against the store's close record (damage is
// Corruption, never silently repaired).
//
// A store, not a cache: nothing is evicted (memcached's -M); a full pool
// refuses the write with OutOfSpace and changes nothing.
//
// Thread-safety: every operation may be called from any number of threads
// at once when Options::threads > 1 (the index is opened for that many
// threads); writers of one key serialize on a striped lock, readers take no
// lock. Open and destruction are not concurrent with other calls.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "nvindex/index.h"
#include "nvindex/pm/pool.h"
#include "nvindex/status.h"

namespace nvindex::pm {
class Pool;
}

namespace nvindex::kv {

/// Longest key, bytes (memcached's KEY_MAX_LENGTH).
inline constexpr size_t kMaxKeyBytes = 250;
/// Default largest value, bytes (memcached's -I default, 1 MiB).
inline constexpr uint32_t kDefaultMaxValueBytes = 1u << 20;
/// Largest max_value_bytes a store takes, bytes (memcached's -I maximum is
/// 1 GiB; the allocator's largest extent, less the item header and key).
inline constexpr uint32_t kMaxValueBytesLimit = (1u << 30) - 32 - 250;
/// memcached's boundary between relative and absolute expiry times, s
/// (30 days, doc/protocol.txt "Expiration times").
inline constexpr int64_t kRelativeExpiryLimit = 60 * 60 * 24 * 30;

/// The absolute expiry (Unix seconds, 0 = never) of a memcached `exptime`
/// read at Unix time `now`: 0 stays 0; a negative value is expired at once
/// (1, long past); up to 30 days (2,592,000 s) it is relative to now; above
/// it is an absolute Unix time (doc/protocol.txt "Expiration times").
int64_t expiry_from_memcached(int64_t exptime, int64_t now);

/// What a read returns besides the value.
struct ItemInfo {
  uint32_t flags = 0;        ///< the client's 32-bit flags
  uint64_t cas = 0;          ///< the CAS unique: changes with every write of the item
  int64_t expiry = 0;        ///< absolute Unix seconds, 0 = never (kept in 32 bits: to 2106)
  uint32_t value_bytes = 0;  ///< the value's length, bytes
};

/// How a store is opened.
struct Options {
  /// The registered index that maps keys to items: one with string keys
  /// (caps.string_keys) and scans (caps.ordered), persistent for a pool
  /// file; a volatile one (btree, absl-btree) only on an anonymous pool.
  std::string index = "lbtree";
  /// The index's options (IndexOptions::extra, e.g. inner=dram).
  std::map<std::string, std::string> index_options;
  /// Bytes per index node; 0 = the index's run_node_size for 512.
  uint32_t node_size = 0;
  /// Fill of each node's slots by bulk_load(), (0, 1].
  double fill_factor = 1.0;
  /// Threads that will call the store at once (> 1 for concurrent use).
  unsigned threads = 1;
  /// Largest value, bytes, 1..kMaxValueBytesLimit: a longer one is
  /// InvalidArgument (memcached: "object too large for cache").
  uint32_t max_value_bytes = kDefaultMaxValueBytes;
  /// The clock, Unix seconds (default: time(nullptr)); tests set it.
  std::function<int64_t()> clock;
  /// The pool layout the store expects (empty: Store::layout(index)), for
  /// a store inside a pool named after something else (the crash lab's
  /// `kv-store-test`, whose pools are named after it).
  std::string pool_layout;
};

/// Counts for memcached's `stats` (all since the store was opened unless
/// said otherwise).
struct Stats {
  uint64_t curr_items = 0;   ///< items held now (expired ones until reaped)
  uint64_t total_items = 0;  ///< items stored since open
  uint64_t bytes = 0;        ///< bytes of the items held (header + key + value)
  uint64_t get_hits = 0;
  uint64_t get_misses = 0;
  uint64_t get_expired = 0;  ///< reads that found an expired item
  uint64_t get_flushed = 0;  ///< reads that found an item a flush_all made invisible
  uint64_t cmd_set = 0;      ///< storage requests, whatever their outcome
  uint64_t cmd_touch = 0;
  uint64_t touch_hits = 0, touch_misses = 0;
  uint64_t delete_hits = 0, delete_misses = 0;
  uint64_t incr_hits = 0, incr_misses = 0, decr_hits = 0, decr_misses = 0;
  uint64_t cas_hits = 0, cas_misses = 0, cas_badval = 0;
  uint64_t reclaimed = 0;          ///< expired or flushed items removed by reap()
  uint64_t item_arena_bytes = 0;   ///< bytes in item blocks (allocator class sizes)
  uint64_t index_arena_bytes = 0;  ///< bytes in index blocks
  uint64_t unassigned_bytes = 0;   ///< pool bytes no arena took yet
};

/// Facts about the open store.
struct StoreInfo {
  std::string index;                     ///< the index's registry name
  bool created = false;                  ///< a new store (else recovered)
  bool clean_shutdown = false;           ///< the previous session closed the pool cleanly
  double index_recovery_seconds = 0;     ///< the index's recovery, wall s
  double item_recovery_seconds = 0;      ///< the item walk and reclamation, wall s
  uint64_t items_at_open = 0;            ///< items found at open
  uint64_t items_reclaimed_at_open = 0;  ///< item blocks no key reached, freed at open
  uint32_t max_value_bytes = 0;
  bool ordered = false;     ///< range reads work
  uint64_t pool_bytes = 0;  ///< the pool's size, bytes
};

/// One item of a bulk load.
struct BulkItem {
  std::string_view key;
  std::string_view value;
  uint32_t flags = 0;
  int64_t expiry = 0;  ///< absolute Unix seconds, 0 = never
};

/// One end of a range read: a key, whether the end is open (the key itself
/// excluded), or no bound at all (from the first key / to the last).
struct Bound {
  std::string_view key;
  bool open = false;
  bool unbounded = false;
  static Bound none() { return Bound{{}, false, true}; }
  static Bound closed(std::string_view k) { return Bound{k, false, false}; }
  static Bound excluding(std::string_view k) { return Bound{k, true, false}; }
};

/// Called per item of a read: key, value, info. Return false to stop (range
/// reads); the views are valid only during the call.
using ItemCallback =
    std::function<bool(std::string_view key, std::string_view value, const ItemInfo& info)>;

/// The store. Made by open(); destroying it closes it cleanly (the close
/// record is written), leaving the pool to its owner.
class Store {
 public:
  /// Opens the store in `pool` (which must outlive it; its layout must be
  /// the index's string layout, pool_layout(index, kString)): a pool without
  /// a store and with an empty (or no) index gets a new store; a pool with
  /// one is recovered (the index first, then the item walk). Errors:
  /// InvalidArgument (an index without string keys or scans, a volatile
  /// index on a pool file, a pool holding an index with keys but no store,
  /// max_value_bytes out of range, a bad index option), Corruption (a
  /// damaged store root, an item a key reaches that is damaged, an item
  /// reached twice, a close record that disagrees: nothing is reclaimed and
  /// the pool stays not clean), the index's own errors, OutOfSpace.
  static Status open(pm::Pool* pool, const Options& options, std::unique_ptr<Store>* out);

  /// Opens (or creates, `size` bytes, when missing) the pool file at `path`
  /// in emulated mode and the store in it; the store owns the pool. Errors:
  /// pm::Pool::create's and open's, then open()'s.
  static Status open_file(const std::string& path, uint64_t size, const Options& options,
                          std::unique_ptr<Store>* out);

  /// The pool layout a store over `index` lives in ("<index>:string").
  static std::string layout(std::string_view index);

  virtual ~Store() = default;

  // ---- memcached's commands (doc/protocol.txt). Keys are 1..250 bytes
  // (InvalidArgument otherwise); values up to max_value_bytes
  // (InvalidArgument "object too large"). Writes return OutOfSpace on a full
  // pool (nothing changed). *cas_out, when given, gets the new CAS unique.

  /// Stores the item whatever was there.
  virtual Status set(std::string_view key, std::string_view value, uint32_t flags, int64_t expiry,
                     uint64_t* cas_out = nullptr) = 0;
  /// Stores it only if the key holds no live item: AlreadyExists otherwise.
  virtual Status add(std::string_view key, std::string_view value, uint32_t flags, int64_t expiry,
                     uint64_t* cas_out = nullptr) = 0;
  /// Stores it only if the key holds a live item: NotFound otherwise.
  virtual Status replace(std::string_view key, std::string_view value, uint32_t flags,
                         int64_t expiry, uint64_t* cas_out = nullptr) = 0;
  /// Appends (prepend: puts before) `data` to the live item's value,
  /// keeping its flags and expiry: NotFound when there is none;
  /// InvalidArgument when the result would exceed max_value_bytes.
  virtual Status append(std::string_view key, std::string_view data,
                        uint64_t* cas_out = nullptr) = 0;
  virtual Status prepend(std::string_view key, std::string_view data,
                         uint64_t* cas_out = nullptr) = 0;
  /// Stores it only if the live item's CAS unique is `expected`: NotFound
  /// when there is no live item, AlreadyExists (memcached's EXISTS) when it
  /// changed since.
  virtual Status cas(std::string_view key, std::string_view value, uint32_t flags, int64_t expiry,
                     uint64_t expected, uint64_t* cas_out = nullptr) = 0;
  /// Removes the live item: NotFound when there is none.
  virtual Status remove(std::string_view key) = 0;
  /// Adds `delta` to the value read as a decimal 64-bit unsigned number
  /// (incr wraps at 2^64) or subtracts it (decr stops at 0), storing the
  /// decimal result as a new item with the old flags and expiry: *result is
  /// the new value. NotFound (no live item), InvalidArgument "cannot
  /// increment or decrement non-numeric value" (not 1..20 digits, optional
  /// trailing spaces, below 2^64).
  virtual Status incr(std::string_view key, uint64_t delta, uint64_t* result) = 0;
  virtual Status decr(std::string_view key, uint64_t delta, uint64_t* result) = 0;
  /// Sets the live item's expiry (absolute Unix s, 0 = never) in place, one
  /// 8-byte NAW: NotFound when there is none. The CAS unique stays.
  virtual Status touch(std::string_view key, int64_t expiry) = 0;
  /// Makes every item stored before now invisible (delay_s == 0), or every
  /// item stored up to Unix time now + delay_s invisible from then on
  /// (memcached's flush_all [delay]); one NAW. The items' space comes back
  /// as reap() or later writes of their keys remove them.
  virtual Status flush_all(int64_t delay_s = 0) = 0;

  /// The live item: value copied into *value, info into *info (either may
  /// be null). NotFound when absent, expired or flushed.
  virtual Status get(std::string_view key, std::string* value, ItemInfo* info = nullptr) = 0;
  /// The live item handed to `cb` without a copy (views valid during the
  /// call). NotFound when there is none (cb not called).
  virtual Status get(std::string_view key, const ItemCallback& cb) = 0;
  /// get() that also sets the expiry (memcached's gat): NotFound, else as get.
  virtual Status get_and_touch(std::string_view key, int64_t expiry, std::string* value,
                               ItemInfo* info = nullptr) = 0;

  // ---- ordered reads (caps.ordered: every index a store takes). Keys
  // compare as bytes (memcmp, then shorter first); expired and flushed
  // items are skipped. Each returns how many items it gave to cb.

  /// Up to `count` live items with key >= start, ascending.
  virtual Status scan(std::string_view start, size_t count, const ItemCallback& cb,
                      size_t* given = nullptr) = 0;
  /// Live items between two bounds, ascending, at most `max` (0 = no
  /// limit). InvalidArgument for a bound key longer than 250 bytes.
  virtual Status range(const Bound& lo, const Bound& hi, size_t max, const ItemCallback& cb,
                       size_t* given = nullptr) = 0;

  // ---- pmemkv's names (pmem::kv::db): thin forms of the above.
  /// set(key, value, 0, 0).
  Status put(std::string_view key, std::string_view value) { return set(key, value, 0, 0); }
  /// Ok when the key holds a live item, else NotFound.
  Status exists(std::string_view key);
  /// Live items (a full walk: expired and flushed items are not counted).
  virtual Status count_all(uint64_t* n) = 0;
  /// Every live item, ascending.
  Status get_all(const ItemCallback& cb) { return range(Bound::none(), Bound::none(), 0, cb); }
  /// Items with key > `key` (pmemkv: strictly above), ascending.
  Status get_above(std::string_view key, const ItemCallback& cb) {
    return range(Bound::excluding(key), Bound::none(), 0, cb);
  }
  /// Items with key < `key`, ascending.
  Status get_below(std::string_view key, const ItemCallback& cb) {
    return range(Bound::none(), Bound::excluding(key), 0, cb);
  }
  /// Items with lo < key < hi, ascending.
  Status get_between(std::string_view lo, std::string_view hi, const ItemCallback& cb) {
    return range(Bound::excluding(lo), Bound::excluding(hi), 0, cb);
  }

  /// Loads `sorted` (keys strictly ascending, 1..250 bytes) into an empty
  /// store: every item is written and persisted, then the index's
  /// bulk_load() publishes them at Options::fill_factor (bottom-up where
  /// the index has it), so a crash leaves the empty store. Errors:
  /// InvalidArgument (store not empty, keys not ascending, a key or value
  /// out of range; nothing changed), OutOfSpace (nothing stored).
  virtual Status bulk_load(std::span<const BulkItem> sorted) = 0;

  /// Removes up to `max` expired or flushed items (memcached's LRU crawler
  /// for a store), from key `*cursor` on; sets *cursor to where to go on
  /// ("" when the walk wrapped). Returns how many it removed.
  virtual uint64_t reap(std::string* cursor, uint64_t max) = 0;

  /// The structural check: the index's verify() (its report in *index when
  /// given), then every item a key reaches (header, key, checksum): their
  /// count in *items. Ok, or the index's Corruption, or Corruption naming
  /// the first damaged item. No concurrent writers.
  virtual Status verify(uint64_t* items, VerifyReport* index = nullptr) const = 0;

  /// The crash lab's ablation notes (Index::ablation_notes()): the
  /// index's, then the store's own.
  virtual std::vector<std::pair<std::string, std::string>> ablation_notes() const = 0;

  virtual Stats stats() const = 0;
  virtual StoreInfo info() const = 0;
  /// How the store's pool is backed by pages now (pm::Pool::page_backing:
  /// page size, mapped, resident and huge-page bytes, read from
  /// /proc/self/smaps, about 1 ms per GiB mapped with 4 KiB pages; known =
  /// false where smaps cannot be read). For reports: `nvindex kv-load`'s
  /// summary and `nvindex serve`'s stats (docs/bench.md, "Page size").
  virtual pm::PageBacking pool_pages() const = 0;
  /// The index's registry name.
  virtual std::string index_name() const = 0;
  /// The index's info() (node size, caps, its PM and DRAM bytes).
  virtual IndexInfo index_info() const = 0;
};

}  // namespace nvindex::kv
