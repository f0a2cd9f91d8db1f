// nvindex::kv::Store (include/nvindex/kv.h; formats in src/kv/item.h; the
// protocol and crash arguments in docs/kv.md).
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kv/item.h"
#include "nvindex/index.h"
#include "nvindex/kv.h"
#include "nvindex/pm/allocator.h"
#include "nvindex/pm/persist.h"
#include "nvindex/pm/pool.h"
#include "util/epoch.h"
#include "util/hex.h"

namespace nvindex::kv {

int64_t expiry_from_memcached(int64_t exptime, int64_t now) {
  if (exptime == 0) return 0;
  if (exptime < 0) return 1;  // expired at once: long past
  if (exptime <= kRelativeExpiryLimit) return now + exptime;
  return exptime;
}

Status Store::exists(std::string_view key) { return get(key, nullptr, nullptr); }

std::string Store::layout(std::string_view index) { return pool_layout(index, KeyType::kString); }

namespace {

constexpr size_t kStripes = 1024;
/// Keys a walk (recovery, verify, count, scans) asks the index for at a time.
constexpr size_t kWalkBatch = 512;

using KeyIndex = Index<std::string_view>;
using Pairs = std::vector<std::pair<std::string, Value>>;

Status check_key(std::string_view key) {
  if (key.empty()) return Status::InvalidArgument("kv: empty key (a key is 1..250 bytes)");
  if (key.size() > kMaxKeyBytes) {
    return Status::InvalidArgument("kv: key of " + std::to_string(key.size()) +
                                   " bytes is longer than 250");
  }
  return Status::Ok();
}

/// The smallest key after `k` (k followed by a zero byte).
std::string key_after(std::string_view k) {
  std::string s(k);
  s.push_back('\0');
  return s;
}

/// memcached's number rule for incr/decr: optional leading spaces, 1..20
/// digits, optional trailing spaces, below 2^64.
bool parse_counter(std::string_view v, uint64_t* out) {
  size_t i = 0;
  while (i < v.size() && v[i] == ' ') ++i;
  const size_t start = i;
  uint64_t n = 0;
  while (i < v.size() && v[i] >= '0' && v[i] <= '9') {
    const uint64_t d = static_cast<uint64_t>(v[i] - '0');
    if (n > (UINT64_MAX - d) / 10) return false;
    n = n * 10 + d;
    ++i;
  }
  if (i == start || i - start > 20) return false;
  while (i < v.size() && v[i] == ' ') ++i;
  if (i != v.size()) return false;
  *out = n;
  return true;
}

class StoreImpl final : public Store {
 public:
  StoreImpl(pm::Pool* pool, const Options& o, std::unique_ptr<pm::Pool> owned)
      : owned_pool_(std::move(owned)),
        pool_(pool),
        items_(pool->item_allocator()),
        options_(o),
        epochs_(&StoreImpl::free_item, this) {
    if (!options_.clock) options_.clock = [] { return static_cast<int64_t>(std::time(nullptr)); };
  }

  ~StoreImpl() override {
    // No thread is inside: every retired item can go now, before the count.
    epochs_.drain();
    if (opened_ && !pool_->anonymous() && items_.ready() && root_ != nullptr) {
      // The close record (item bytes, items + 1), persisted before ~Pool's
      // clean flag NAW; recovery holds the walk against it only when that
      // flag says the close completed (a crash in between: the record is
      // cleared unchecked).
      pm::store(&root_->close_bytes, items_.bytes_in_use());
      pm::store(&root_->close_items_plus_one, curr_items_.load() + 1);
      pm::persist(&root_->close_bytes, 2 * sizeof(uint64_t), {"kv.close.record"});
    }
    index_.reset();  // the index records its own close before the pool goes
  }

  Status open(const IndexEntry& entry) {
    info_.index = options_.index;
    info_.max_value_bytes = options_.max_value_bytes;
    info_.ordered = entry.caps.ordered;
    info_.pool_bytes = pool_->size();
    info_.clean_shutdown = pool_->was_clean_shutdown();
    IndexOptions io;
    io.pool = pool_;
    io.node_size = options_.node_size != 0 ? options_.node_size : run_node_size(entry, 512);
    io.fill_factor = options_.fill_factor;
    io.threads = options_.threads;
    io.extra = options_.index_options;
    io.pool_layout = options_.pool_layout;
    if (Status s = make_index<std::string_view>(options_.index, io, &index_); !s.ok()) return s;
    info_.index_recovery_seconds = index_->info().recovery_seconds;
    const auto t0 = std::chrono::steady_clock::now();
    const bool had_root = pool_->store_root() != 0;
    info_.created = !had_root;
    if (!had_root) {
      Pairs first;
      if (index_->scan(std::string_view(), 1, &first) != 0) {
        return Status::InvalidArgument(
            "kv: " + pool_->path() + " holds a " + options_.index +
            " index with keys but no store (a pool of `nvindex bench` or another tool?)");
      }
    }
    if (!items_.ready()) {
      if (Status s = recover_items(had_root); !s.ok()) {
        pool_->keep_unclean();
        return s;
      }
    }
    if (!had_root) {
      if (Status s = create_root(); !s.ok()) return s;
    }
    info_.item_recovery_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    opened_ = true;
    return Status::Ok();
  }

  // ---------------------------------------------------------------- writes

  Status set(std::string_view key, std::string_view value, uint32_t flags, int64_t expiry,
             uint64_t* cas_out) override {
    stats_bump(cmd_set_);
    return store_item(Mode::kSet, key, value, flags, expiry, 0, cas_out);
  }
  Status add(std::string_view key, std::string_view value, uint32_t flags, int64_t expiry,
             uint64_t* cas_out) override {
    stats_bump(cmd_set_);
    return store_item(Mode::kAdd, key, value, flags, expiry, 0, cas_out);
  }
  Status replace(std::string_view key, std::string_view value, uint32_t flags, int64_t expiry,
                 uint64_t* cas_out) override {
    stats_bump(cmd_set_);
    return store_item(Mode::kReplace, key, value, flags, expiry, 0, cas_out);
  }
  Status append(std::string_view key, std::string_view data, uint64_t* cas_out) override {
    stats_bump(cmd_set_);
    return store_item(Mode::kAppend, key, data, 0, 0, 0, cas_out);
  }
  Status prepend(std::string_view key, std::string_view data, uint64_t* cas_out) override {
    stats_bump(cmd_set_);
    return store_item(Mode::kPrepend, key, data, 0, 0, 0, cas_out);
  }
  Status cas(std::string_view key, std::string_view value, uint32_t flags, int64_t expiry,
             uint64_t expected, uint64_t* cas_out) override {
    stats_bump(cmd_set_);
    return store_item(Mode::kCas, key, value, flags, expiry, expected, cas_out);
  }

  Status remove(std::string_view key) override {
    if (Status s = check_key(key); !s.ok()) return s;
    std::lock_guard<std::mutex> g(stripe(key));
    const std::optional<Value> old = index_->lookup(key);
    if (!old) {
      stats_bump(delete_misses_);
      return Status::NotFound();
    }
    const bool was_live = live(*item(*old), now());
    // The index's remove is durable on return (its own protocol); the item
    // is then unreachable and goes to the epochs.
    if (Status s = index_->remove(key); !s.ok()) return s;
    retire(*old);
    curr_items_.fetch_sub(1, std::memory_order_relaxed);
    stats_bump(was_live ? delete_hits_ : delete_misses_);
    return was_live ? Status::Ok() : Status::NotFound();
  }

  Status incr(std::string_view key, uint64_t delta, uint64_t* result) override {
    return arith(key, delta, true, result);
  }
  Status decr(std::string_view key, uint64_t delta, uint64_t* result) override {
    return arith(key, delta, false, result);
  }

  Status touch(std::string_view key, int64_t expiry) override {
    if (Status s = check_key(key); !s.ok()) return s;
    stats_bump(cmd_touch_);
    std::lock_guard<std::mutex> g(stripe(key));
    const std::optional<Value> off = index_->lookup(key);
    if (!off || !live(*item(*off), now())) {
      stats_bump(touch_misses_);
      return Status::NotFound();
    }
    // Crash argument: the expiry is in an aligned 8-byte word with the
    // store time (unchanged), outside the checksum; one NAW gives the old or
    // the new expiry, the item whole either way.
    ItemHeader* h = item(*off);
    pm::naw(&h->times, item_times(clamp_expiry(expiry), h->store_time()), {"kv.touch.expiry"});
    stats_bump(touch_hits_);
    return Status::Ok();
  }

  Status flush_all(int64_t delay_s) override {
    // One NAW either way: the flush is wholly applied or absent after a crash.
    if (delay_s <= 0) {
      pm::naw(&root_->oldest_cas, next_cas_.load(std::memory_order_acquire) - 1,
              {"kv.flush.oldest_cas"});
    } else {
      pm::naw(&root_->oldest_live, static_cast<uint64_t>(now() + delay_s),
              {"kv.flush.oldest_live"});
    }
    return Status::Ok();
  }

  // ----------------------------------------------------------------- reads

  Status get(std::string_view key, std::string* value, ItemInfo* info) override {
    if (Status s = check_key(key); !s.ok()) return s;
    EpochManager::Guard g(epochs_);
    const ItemHeader* h = find_live(key);
    if (h == nullptr) return Status::NotFound();
    if (value != nullptr) value->assign(h->value(), h->value_bytes);
    if (info != nullptr) *info = info_of(*h);
    return Status::Ok();
  }

  Status get(std::string_view key, const ItemCallback& cb) override {
    if (Status s = check_key(key); !s.ok()) return s;
    EpochManager::Guard g(epochs_);
    const ItemHeader* h = find_live(key);
    if (h == nullptr) return Status::NotFound();
    cb(h->key_view(), h->value_view(), info_of(*h));
    return Status::Ok();
  }

  // memcached's gat: the live item is read, then its expiry set, so a
  // negative expiry still returns the item (and expires it).
  Status get_and_touch(std::string_view key, int64_t expiry, std::string* value,
                       ItemInfo* info) override {
    if (Status s = check_key(key); !s.ok()) return s;
    stats_bump(cmd_touch_);
    std::lock_guard<std::mutex> g(stripe(key));
    EpochManager::Guard eg(epochs_);
    ItemHeader* h = find_live(key);
    if (h == nullptr) {
      stats_bump(touch_misses_);
      return Status::NotFound();
    }
    if (value != nullptr) value->assign(h->value(), h->value_bytes);
    // Crash argument: as touch(): one NAW of the times word, outside the
    // checksum.
    pm::naw(&h->times, item_times(clamp_expiry(expiry), h->store_time()), {"kv.touch.expiry"});
    if (info != nullptr) *info = info_of(*h);
    stats_bump(touch_hits_);
    return Status::Ok();
  }

  Status scan(std::string_view start, size_t count, const ItemCallback& cb,
              size_t* given) override {
    if (given != nullptr) *given = 0;
    if (count == 0) return check_bound(start);
    return range(Bound::closed(start), Bound::none(), count, cb, given);
  }

  Status count_all(uint64_t* n) override {
    *n = 0;
    return range(
        Bound::none(), Bound::none(), 0,
        [n](std::string_view, std::string_view, const ItemInfo&) {
          ++*n;
          return true;
        },
        nullptr);
  }

  // ----------------------------------------------------------- bulk, reap

  Status bulk_load(std::span<const BulkItem> sorted) override {
    Pairs first;
    if (index_->scan(std::string_view(), 1, &first) != 0 || curr_items_.load() != 0) {
      return Status::InvalidArgument("kv: bulk_load: the store is not empty");
    }
    for (size_t i = 0; i < sorted.size(); ++i) {
      if (Status s = check_key(sorted[i].key); !s.ok()) return s;
      if (Status s = check_value(sorted[i].value.size()); !s.ok()) return s;
      if (i > 0 && !(sorted[i - 1].key < sorted[i].key)) {
        return Status::InvalidArgument("kv: bulk_load: keys not strictly ascending at item " +
                                       std::to_string(i));
      }
    }
    // Every item written and flushed, one fence, then one bulk_load of the
    // index publishes them all: a crash before it returns leaves items no
    // key reaches (recovery frees them) and the empty index (its bottom-up
    // load publishes with one NAW; the default inserts one by one, each
    // item already durable).
    std::vector<std::pair<std::string_view, Value>> pairs;
    pairs.reserve(sorted.size());
    uint64_t bytes = 0;
    const uint32_t t = static_cast<uint32_t>(now());
    for (const BulkItem& b : sorted) {
      uint64_t off = 0;
      Status s = write_item(b.key, {}, b.value, {}, b.flags, b.expiry, t, &off, /*fence=*/false);
      if (!s.ok()) {
        for (auto& p : pairs) items_.free(p.second);
        return s;
      }
      pairs.emplace_back(b.key, off);
      bytes += item_bytes(b.key.size(), b.value.size());
    }
    pm::fence({"kv.bulk.items"});
    if (Status s = index_->bulk_load(pairs); !s.ok()) {
      Pairs any;
      if (index_->scan(std::string_view(), 1, &any) == 0) {
        for (auto& p : pairs) items_.free(p.second);
      }
      // else the default bulk_load stored a prefix: those items are
      // reachable; the rest no key reaches until the next recovery.
      return s;
    }
    curr_items_.fetch_add(sorted.size(), std::memory_order_relaxed);
    total_items_.fetch_add(sorted.size(), std::memory_order_relaxed);
    bytes_.fetch_add(bytes, std::memory_order_relaxed);
    return Status::Ok();
  }

  uint64_t reap(std::string* cursor, uint64_t max) override {
    uint64_t removed = 0;
    size_t walked = 0;
    const int64_t t = now();
    std::string start = *cursor;
    Pairs batch;
    while (removed < max && walked < 8 * kWalkBatch) {
      index_->scan(start, kWalkBatch, &batch);
      if (batch.empty()) {
        *cursor = std::string();
        return removed;
      }
      walked += batch.size();
      for (const auto& [key, off] : batch) {
        if (removed >= max) break;
        {
          EpochManager::Guard g(epochs_);
          if (live(*item(off), t)) continue;
        }
        std::lock_guard<std::mutex> lg(stripe(key));
        const std::optional<Value> now_off = index_->lookup(key);
        if (!now_off || *now_off != off || live(*item(off), t)) continue;
        if (!index_->remove(key).ok()) continue;
        retire(off);
        curr_items_.fetch_sub(1, std::memory_order_relaxed);
        reclaimed_.fetch_add(1, std::memory_order_relaxed);
        ++removed;
      }
      start = key_after(batch.back().first);
    }
    *cursor = start;
    return removed;
  }

  Status verify(uint64_t* items, VerifyReport* index) const override {
    // The item walk first: an index whose scans write (p-bwtree posts index
    // entries) then reports the structure as the walk left it.
    uint64_t n = 0;
    Status s = walk([&](const std::string& key, uint64_t off) {
      ++n;
      return check_item(key, off);
    });
    if (items != nullptr) *items = n;
    if (!s.ok()) return s;
    VerifyReport r;
    if (s = index_->verify(&r); !s.ok()) return s;
    if (index != nullptr) *index = r;
    return Status::Ok();
  }

  Stats stats() const override {
    Stats s;
    s.curr_items = curr_items_.load();
    s.total_items = total_items_.load();
    s.bytes = bytes_.load();
    s.get_hits = get_hits_.load();
    s.get_misses = get_misses_.load();
    s.get_expired = get_expired_.load();
    s.get_flushed = get_flushed_.load();
    s.cmd_set = cmd_set_.load();
    s.cmd_touch = cmd_touch_.load();
    s.touch_hits = touch_hits_.load();
    s.touch_misses = touch_misses_.load();
    s.delete_hits = delete_hits_.load();
    s.delete_misses = delete_misses_.load();
    s.incr_hits = incr_hits_.load();
    s.incr_misses = incr_misses_.load();
    s.decr_hits = decr_hits_.load();
    s.decr_misses = decr_misses_.load();
    s.cas_hits = cas_hits_.load();
    s.cas_misses = cas_misses_.load();
    s.cas_badval = cas_badval_.load();
    s.reclaimed = reclaimed_.load();
    s.item_arena_bytes = items_.bytes_in_use();
    s.index_arena_bytes = pool_->allocator().bytes_in_use();
    s.unassigned_bytes = items_.unassigned_bytes();
    return s;
  }

  std::vector<std::pair<std::string, std::string>> ablation_notes() const override {
    // The store's own sites (kv.*) need none: each is caught (docs/kv.md).
    std::vector<std::pair<std::string, std::string>> notes = index_->ablation_notes();
    notes.emplace_back(
        "pool.set_root/flush",
        "under a store, redundant: the pool header's root and store-root words share line 1, "
        "and a new store publishes its root by NAW (store, flush, fence) right after the index "
        "set its root and before any key is written; a crash before that NAW leaves no store "
        "root, i.e. a new store over an empty index");
    return notes;
  }

  StoreInfo info() const override { return info_; }
  pm::PageBacking pool_pages() const override { return pool_->page_backing(); }
  std::string index_name() const override { return options_.index; }
  IndexInfo index_info() const override { return index_->info(); }

 private:
  enum class Mode : uint8_t { kSet, kAdd, kReplace, kAppend, kPrepend, kCas };

  static void free_item(void* ctx, uint64_t off) { static_cast<StoreImpl*>(ctx)->items_.free(off); }

  int64_t now() const { return options_.clock(); }
  static void stats_bump(std::atomic<uint64_t>& c) { c.fetch_add(1, std::memory_order_relaxed); }

  std::mutex& stripe(std::string_view key) {
    return stripes_[XXH3_64bits(key.data(), key.size()) % kStripes];
  }

  ItemHeader* item(uint64_t off) const { return pool_->ptr<ItemHeader>(off); }

  bool live(const ItemHeader& h, int64_t t) const {
    const uint64_t times = h.times.load(std::memory_order_acquire);
    const uint32_t e = static_cast<uint32_t>(times);
    if (e != 0 && static_cast<int64_t>(e) <= t) return false;
    if (h.cas <= root_->oldest_cas.load(std::memory_order_acquire)) return false;
    const uint64_t ol = root_->oldest_live.load(std::memory_order_acquire);
    return !(ol != 0 && static_cast<int64_t>(ol) <= t && (times >> 32) <= ol);
  }

  /// The live item of `key`, counting the hit or the miss; inside a Guard.
  ItemHeader* find_live(std::string_view key) {
    const std::optional<Value> off = index_->lookup(key);
    if (!off) {
      stats_bump(get_misses_);
      return nullptr;
    }
    ItemHeader* h = item(*off);
    const int64_t t = now();
    if (!live(*h, t)) {
      stats_bump(get_misses_);
      const uint32_t e = h->expiry();
      stats_bump(e != 0 && static_cast<int64_t>(e) <= t ? get_expired_ : get_flushed_);
      return nullptr;
    }
    stats_bump(get_hits_);
    return h;
  }

  static ItemInfo info_of(const ItemHeader& h) {
    ItemInfo i;
    i.flags = h.flags;
    i.cas = h.cas;
    i.expiry = h.expiry();
    i.value_bytes = h.value_bytes;
    return i;
  }

  /// An absolute expiry as the item stores it: 0 stays 0 (never), a
  /// negative one is 1 (long past), and one beyond 2106 is the largest.
  static uint32_t clamp_expiry(int64_t expiry) {
    if (expiry < 0) return 1;
    return expiry > int64_t{UINT32_MAX} ? UINT32_MAX : static_cast<uint32_t>(expiry);
  }

  /// A range bound: any key of 0..250 bytes.
  static Status check_bound(std::string_view key) {
    if (key.size() > kMaxKeyBytes) return check_key(key);
    return Status::Ok();
  }

  Status check_value(uint64_t bytes) const {
    if (bytes > options_.max_value_bytes) {
      return Status::InvalidArgument("kv: object too large for cache: value of " +
                                     std::to_string(bytes) + " bytes, the largest is " +
                                     std::to_string(options_.max_value_bytes));
    }
    return Status::Ok();
  }

  /// Writes an item (value = a then b then c) in a new block and persists
  /// it (flush, then a fence unless `fence` is false: the caller fences).
  /// Nothing publishes it: see the crash argument in item.h. Errors:
  /// OutOfSpace (the allocator's message).
  Status write_item(std::string_view key, std::string_view a, std::string_view b,
                    std::string_view c, uint32_t flags, int64_t expiry, uint32_t store_time,
                    uint64_t* off, bool fence = true, uint64_t* cas_out = nullptr) {
    const uint64_t vbytes = a.size() + b.size() + c.size();
    const uint64_t bytes = item_bytes(key.size(), vbytes);
    uint64_t o = 0;
    if (Status s = items_.allocate(static_cast<uint32_t>(bytes), &o); !s.ok()) return s;
    alignas(8) unsigned char hdr[kItemHeaderBytes] = {};
    const uint32_t vb = static_cast<uint32_t>(vbytes);
    const uint64_t cas = next_cas_.fetch_add(1, std::memory_order_acq_rel);
    const uint64_t times = item_times(clamp_expiry(expiry), store_time);
    std::memcpy(hdr + offsetof(ItemHeader, cas), &cas, 8);
    std::memcpy(hdr + offsetof(ItemHeader, value_bytes), &vb, 4);
    std::memcpy(hdr + offsetof(ItemHeader, flags), &flags, 4);
    std::memcpy(hdr + offsetof(ItemHeader, times), &times, 8);
    hdr[offsetof(ItemHeader, key_bytes)] = static_cast<uint8_t>(key.size());
    hdr[offsetof(ItemHeader, magic)] = kItemMagic;
    char* dst = pool_->ptr<char>(o);
    pm::copy(dst, hdr, kItemHeaderBytes);
    char* p = dst + kItemHeaderBytes;
    pm::copy(p, key.data(), key.size());
    p += key.size();
    for (std::string_view part : {a, b, c}) {
      if (part.empty()) continue;  // an empty view's data() may be null
      pm::copy(p, part.data(), part.size());
      p += part.size();
    }
    // The checksum, over the bytes just written (unflushed: still this
    // thread's stores), then the flush of the whole item.
    ItemHeader* h = item(o);
    pm::store(&h->checksum, item_checksum(*h, h->key_view(), h->value_view()));
    pm::flush(dst, bytes, {"kv.item.write"});
    if (fence) pm::fence({"kv.item.write"});
    *off = o;
    if (cas_out != nullptr) *cas_out = cas;
    return Status::Ok();
  }

  /// Retires the item at `off`, which no key reaches any more.
  void retire(uint64_t off) {
    const ItemHeader* h = item(off);
    bytes_.fetch_sub(item_bytes(h->key_bytes, h->value_bytes), std::memory_order_relaxed);
    epochs_.retire(off);
  }

  /// The storage commands. Under the key's stripe lock: the old item is
  /// read, the mode's condition checked, the new item written and persisted,
  /// then published by the index's insert or update (durable when it
  /// returns), then the old item retired. A crash before the publication
  /// leaves the old item (the new one no key reaches: recovery frees it);
  /// after it, the new one.
  Status store_item(Mode mode, std::string_view key, std::string_view data, uint32_t flags,
                    int64_t expiry, uint64_t expected, uint64_t* cas_out) {
    if (Status s = check_key(key); !s.ok()) return s;
    if (Status s = check_value(data.size()); !s.ok()) return s;
    std::lock_guard<std::mutex> g(stripe(key));
    const std::optional<Value> old = index_->lookup(key);
    const int64_t t = now();
    const ItemHeader* oh = old ? item(*old) : nullptr;
    const bool present = oh != nullptr && live(*oh, t);
    std::string_view a, b, c;
    switch (mode) {
      case Mode::kSet:
        b = data;
        break;
      case Mode::kAdd:
        if (present) return Status::AlreadyExists();
        b = data;
        break;
      case Mode::kReplace:
        if (!present) return Status::NotFound();
        b = data;
        break;
      case Mode::kCas:
        if (!present) {
          stats_bump(cas_misses_);
          return Status::NotFound();
        }
        if (oh->cas != expected) {
          stats_bump(cas_badval_);
          return Status::AlreadyExists();
        }
        b = data;
        break;
      case Mode::kAppend:
      case Mode::kPrepend:
        if (!present) return Status::NotFound();
        if (Status s = check_value(uint64_t{oh->value_bytes} + data.size()); !s.ok()) return s;
        flags = oh->flags;
        expiry = oh->expiry();
        if (mode == Mode::kAppend) {
          a = oh->value_view();
          b = data;
        } else {
          a = data;
          b = oh->value_view();
        }
        break;
    }
    uint64_t off = 0;
    if (Status s =
            write_item(key, a, b, c, flags, expiry, static_cast<uint32_t>(t), &off, true, cas_out);
        !s.ok()) {
      return s;
    }
    if (Status s = publish(key, old, off); !s.ok()) return s;
    if (mode == Mode::kCas) stats_bump(cas_hits_);
    return Status::Ok();
  }

  /// Points `key` at the persisted item `off` (insert, or update of `old`),
  /// then retires `old`. On the index's error the new item is freed.
  Status publish(std::string_view key, const std::optional<Value>& old, uint64_t off) {
    const Status s = old ? index_->update(key, off) : index_->insert(key, off);
    if (!s.ok()) {
      items_.free(off);  // never published
      return s;
    }
    const ItemHeader* h = item(off);
    bytes_.fetch_add(item_bytes(h->key_bytes, h->value_bytes), std::memory_order_relaxed);
    total_items_.fetch_add(1, std::memory_order_relaxed);
    if (old) {
      retire(*old);
    } else {
      curr_items_.fetch_add(1, std::memory_order_relaxed);
    }
    return Status::Ok();
  }

  Status arith(std::string_view key, uint64_t delta, bool up, uint64_t* result) {
    if (Status s = check_key(key); !s.ok()) return s;
    std::atomic<uint64_t>& hits = up ? incr_hits_ : decr_hits_;
    std::atomic<uint64_t>& misses = up ? incr_misses_ : decr_misses_;
    std::lock_guard<std::mutex> g(stripe(key));
    const std::optional<Value> old = index_->lookup(key);
    const int64_t t = now();
    const ItemHeader* oh = old ? item(*old) : nullptr;
    if (oh == nullptr || !live(*oh, t)) {
      stats_bump(misses);
      return Status::NotFound();
    }
    uint64_t n = 0;
    if (!parse_counter(oh->value_view(), &n)) {
      return Status::InvalidArgument("cannot increment or decrement non-numeric value");
    }
    n = up ? n + delta : (delta > n ? 0 : n - delta);  // incr wraps; decr stops at 0
    const std::string text = std::to_string(n);
    uint64_t off = 0;
    if (Status s =
            write_item(key, {}, text, {}, oh->flags, oh->expiry(), static_cast<uint32_t>(t), &off);
        !s.ok()) {
      return s;
    }
    if (Status s = publish(key, old, off); !s.ok()) return s;
    stats_bump(hits);
    *result = n;
    return Status::Ok();
  }

  Status range(const Bound& lo, const Bound& hi, size_t max, const ItemCallback& cb,
               size_t* given) override {
    if (given != nullptr) *given = 0;
    if (!lo.unbounded) {
      if (Status s = check_bound(lo.key); !s.ok()) return s;
    }
    if (!hi.unbounded) {
      if (Status s = check_bound(hi.key); !s.ok()) return s;
    }
    std::string start = lo.unbounded ? std::string() : std::string(lo.key);
    bool skip_equal = !lo.unbounded && lo.open;
    size_t n = 0;
    Pairs batch;
    const int64_t t = now();
    for (;;) {
      EpochManager::Guard g(epochs_);
      index_->scan(start, kWalkBatch, &batch);
      if (batch.empty()) break;
      for (const auto& [key, off] : batch) {
        if (skip_equal && key == lo.key) continue;
        if (!hi.unbounded) {
          const int c = std::string_view(key).compare(hi.key);
          if (c > 0 || (c == 0 && hi.open)) {
            if (given != nullptr) *given = n;
            return Status::Ok();
          }
        }
        const ItemHeader* h = item(off);
        if (!live(*h, t)) continue;
        ++n;
        if (!cb(key, h->value_view(), info_of(*h)) || (max != 0 && n >= max)) {
          if (given != nullptr) *given = n;
          return Status::Ok();
        }
      }
      skip_equal = false;
      start = key_after(batch.back().first);
    }
    if (given != nullptr) *given = n;
    return Status::Ok();
  }

  /// Calls f(key, offset) for every key of the index, ascending; stops at
  /// f's first error. No concurrent writers.
  template <class F>
  Status walk(F&& f) const {
    std::string start;
    Pairs batch;
    for (;;) {
      index_->scan(start, kWalkBatch, &batch);
      if (batch.empty()) return Status::Ok();
      for (const auto& [key, off] : batch) {
        if (Status s = f(key, off); !s.ok()) return s;
      }
      start = key_after(batch.back().first);
    }
  }

  /// Ok when `off` is a whole item of `key` in a block of the item arena.
  Status check_item(const std::string& key, uint64_t off) const {
    auto bad = [&](const std::string& why) {
      return Status::Corruption("kv: key '" + key.substr(0, 64) + "' maps to " + hex(off) + ", " +
                                why + " (damage; nothing reclaimed)");
    };
    const uint32_t block = items_.block_size(off);
    if (block < kItemHeaderBytes || !pool_->contains(off, block)) {
      return bad("which is not a block of the item arena");
    }
    const ItemHeader* h = item(off);
    if (h->magic != kItemMagic) return bad("which is not an item (bad magic)");
    if (item_bytes(h->key_bytes, h->value_bytes) > block) {
      return bad("an item longer (" + std::to_string(item_bytes(h->key_bytes, h->value_bytes)) +
                 " bytes) than its block (" + std::to_string(block) + ")");
    }
    if (h->key_view() != key) return bad("an item of another key");
    if (h->checksum != item_checksum(*h, h->key_view(), h->value_view())) {
      return bad("an item whose checksum does not match");
    }
    return Status::Ok();
  }

  /// The item arena's recovery pass: the store root, then every item a key
  /// reaches (checked whole, marked once), then the close record check,
  /// then every other block of the arena freed. Nothing is written before
  /// the pass agrees (the close record is cleared only then), so a crash
  /// during recovery leaves what the next recovery needs.
  Status recover_items(bool had_root) {
    items_.begin_recovery();
    if (had_root) {
      const uint64_t ro = pool_->store_root();
      if (!pool_->contains(ro, kStoreRootBytes) || items_.block_size(ro) < kStoreRootBytes) {
        return Status::Corruption("kv: store root " + hex(ro) + " of " + pool_->path() +
                                  " is not a block of the item arena");
      }
      root_ = pool_->ptr<StoreRoot>(ro);
      if (std::memcmp(root_->magic, kStoreMagic, sizeof(kStoreMagic)) != 0 ||
          root_->version != kStoreVersion) {
        return Status::Corruption("kv: bad store root magic or version in " + pool_->path());
      }
      if (Status s = items_.mark_reachable(ro); !s.ok()) return s;
    }
    uint64_t n = 0, bytes = 0, max_cas = 0;
    Status s = walk([&](const std::string& key, uint64_t off) {
      if (Status c = check_item(key, off); !c.ok()) return c;
      if (Status m = items_.mark_reachable(off); !m.ok()) return m;
      const ItemHeader* h = item(off);
      ++n;
      bytes += item_bytes(h->key_bytes, h->value_bytes);
      max_cas = std::max(max_cas, h->cas);
      return Status::Ok();
    });
    if (!s.ok()) return s;
    if (root_ != nullptr) {
      const uint64_t cb = root_->close_bytes.load(std::memory_order_acquire);
      const uint64_t ci = root_->close_items_plus_one.load(std::memory_order_acquire);
      if (cb != 0 && pool_->was_clean_shutdown()) {
        if (cb != items_.bytes_in_use() || (ci != 0 && ci - 1 != n)) {
          return Status::Corruption(
              "kv: " + pool_->path() + " was closed cleanly with " +
              std::to_string(ci == 0 ? 0 : ci - 1) + " items in " + std::to_string(cb) +
              " bytes, but its keys reach " + std::to_string(n) + " items in " +
              std::to_string(items_.bytes_in_use()) + " bytes (damage; nothing reclaimed)");
        }
      }
      if (cb != 0 || ci != 0) {
        pm::store(&root_->close_bytes, uint64_t{0});
        pm::store(&root_->close_items_plus_one, uint64_t{0});
        pm::persist(&root_->close_bytes, 2 * sizeof(uint64_t), {"kv.recover.close_record"});
      }
      max_cas = std::max<uint64_t>(max_cas, root_->oldest_cas.load(std::memory_order_acquire));
    }
    const pm::Allocator::RecoveryStats st = items_.end_recovery();
    info_.items_at_open = n;
    info_.items_reclaimed_at_open = st.reclaimed_blocks;
    curr_items_.store(n);
    bytes_.store(bytes);
    next_cas_.store(max_cas + 1);
    return Status::Ok();
  }

  /// A new store root: allocated, written, persisted, then published by
  /// the pool header's store-root NAW (a crash before it leaves a block no
  /// one reaches, freed by the next recovery's pass).
  Status create_root() {
    uint64_t ro = 0;
    if (Status s = items_.allocate(kStoreRootBytes, &ro); !s.ok()) return s;
    char* p = pool_->ptr<char>(ro);
    pm::fill(p, 0, kStoreRootBytes);
    pm::copy(p, kStoreMagic, sizeof(kStoreMagic));
    const uint32_t v = kStoreVersion;
    pm::copy(p + offsetof(StoreRoot, version), &v, sizeof(v));
    pm::persist(p, kStoreRootBytes, {"kv.create.root"});
    pool_->set_store_root(ro);
    root_ = pool_->ptr<StoreRoot>(ro);
    return Status::Ok();
  }

  std::unique_ptr<pm::Pool> owned_pool_;  // destroyed last
  pm::Pool* const pool_;
  pm::Allocator& items_;
  Options options_;
  std::unique_ptr<KeyIndex> index_;
  StoreRoot* root_ = nullptr;
  StoreInfo info_;
  bool opened_ = false;
  EpochManager epochs_;
  std::array<std::mutex, kStripes> stripes_;
  std::atomic<uint64_t> next_cas_{1};
  std::atomic<uint64_t> curr_items_{0}, total_items_{0}, bytes_{0};
  std::atomic<uint64_t> get_hits_{0}, get_misses_{0}, get_expired_{0}, get_flushed_{0};
  std::atomic<uint64_t> cmd_set_{0}, cmd_touch_{0}, touch_hits_{0}, touch_misses_{0};
  std::atomic<uint64_t> delete_hits_{0}, delete_misses_{0};
  std::atomic<uint64_t> incr_hits_{0}, incr_misses_{0}, decr_hits_{0}, decr_misses_{0};
  std::atomic<uint64_t> cas_hits_{0}, cas_misses_{0}, cas_badval_{0}, reclaimed_{0};
};

/// The checks of Options that need no pool: the index (registered, string
/// keys, scans) and the largest value. *entry gets the index's entry.
Status check_options(const Options& o, const IndexEntry** entry) {
  const IndexEntry* e = find_index_entry(o.index);
  auto with_strings = [] {
    std::string names;
    for (const IndexEntry& x : registered_indexes()) {
      if (!x.caps.string_keys || !x.caps.ordered || is_test_only_index(x.name)) continue;
      names += (names.empty() ? "" : ", ") + std::string(x.name);
    }
    return names;
  };
  if (e == nullptr) {
    return Status::InvalidArgument("kv: unknown index '" + o.index + "' (a store takes " +
                                   with_strings() + ")");
  }
  if (!e->caps.string_keys || e->make_string == nullptr) {
    return Status::InvalidArgument("kv: index '" + o.index +
                                   "' has no string keys (a store takes " + with_strings() + ")");
  }
  if (!e->caps.ordered) {
    return Status::InvalidArgument("kv: index '" + o.index +
                                   "' has no scans, and a store walks its keys at recovery (it "
                                   "takes " +
                                   with_strings() + ")");
  }
  if (o.max_value_bytes == 0 || o.max_value_bytes > kMaxValueBytesLimit) {
    return Status::InvalidArgument("kv: largest value of " + std::to_string(o.max_value_bytes) +
                                   " bytes: it must be 1.." + std::to_string(kMaxValueBytesLimit));
  }
  *entry = e;
  return Status::Ok();
}

Status volatile_on_file(const std::string& index) {
  return Status::InvalidArgument("kv: index '" + index +
                                 "' is volatile: its keys would not survive a restart, so a "
                                 "store over it takes only an anonymous pool");
}

Status open_with(pm::Pool* pool, const Options& o, std::unique_ptr<pm::Pool> owned,
                 std::unique_ptr<Store>* out) {
  if (pool == nullptr) return Status::InvalidArgument("kv: no pool");
  const IndexEntry* entry = nullptr;
  if (Status s = check_options(o, &entry); !s.ok()) return s;
  if (!needs_pool(entry->caps) && !pool->anonymous()) return volatile_on_file(o.index);
  const std::string want = o.pool_layout.empty() ? Store::layout(o.index) : o.pool_layout;
  if (needs_pool(entry->caps) && pool->layout() != want) {
    return Status::InvalidArgument("kv: " + pool->path() + " holds layout '" +
                                   std::string(pool->layout()) + "', a store over " + o.index +
                                   " lives in layout '" + want + "'");
  }
  auto s = std::make_unique<StoreImpl>(pool, o, std::move(owned));
  if (Status st = s->open(*entry); !st.ok()) return st;
  *out = std::move(s);
  return Status::Ok();
}

}  // namespace

Status Store::open(pm::Pool* pool, const Options& options, std::unique_ptr<Store>* out) {
  return open_with(pool, options, nullptr, out);
}

Status Store::open_file(const std::string& path, uint64_t size, const Options& options,
                        std::unique_ptr<Store>* out) {
  const pm::Mode mode = pm::current_config().mode;
  if (mode == pm::Mode::kDram) {
    return Status::InvalidArgument(
        "kv: PM mode dram keeps nothing: a pool file needs emulated, "
        "dax or crash-sim");
  }
  const IndexEntry* entry = nullptr;
  if (Status s = check_options(options, &entry); !s.ok()) return s;
  if (!needs_pool(entry->caps)) return volatile_on_file(options.index);
  std::unique_ptr<pm::Pool> pool;
  Status s = pm::Pool::open(path, Store::layout(options.index), mode, &pool);
  bool created = false;
  if (s.code() == Code::kNotFound) {
    s = pm::Pool::create(path, size, Store::layout(options.index), mode, &pool);
    created = s.ok();
  }
  if (!s.ok()) return s;
  pm::Pool* p = pool.get();
  s = open_with(p, options, std::move(pool), out);
  if (!s.ok() && created) std::remove(path.c_str());  // the pool it made holds nothing
  return s;
}

}  // namespace nvindex::kv
