// absl-btree: absl::btree_map<uint64_t, Value> (string keys:
// absl::btree_map<std::string, Value>, the key bytes owned by the map and
// looked up by std::string_view through absl's transparent string compare)
// behind a reader-writer lock.
// The volatile yardstick (DESIGN.md §1): a well-tuned in-DRAM B-tree with no
// persistence cost, against which every persistent design is compared.
//
// Thread-safety depends on IndexOptions::threads:
//   threads > 1: lookups, scans, find_last_less_than, info and verify take a
//     BrLock (src/indexes/common/br_lock.h, a big-reader lock: Hsieh & Weihl,
//     IPPS'92) shared; insert, update and remove take it exclusively.
//     Readers write only a counter line of their own, so reads scale with
//     cores (YCSB C); writes do not scale, and the yardstick says so by being
//     what it is. Before it, a shared-counter lock (absl::Mutex in reader
//     mode) made every lookup write the same line, and two threads read at
//     the speed of one: YCSB C, 1M keys, 2 threads vs 1, 3.82 vs 3.91 Mops/s
//     with absl::Mutex, 9.05 vs 4.64 with BrLock (medians of 4 quiet
//     interleaved runs on a 2-core VM); YCSB A at 2 threads 2.74 -> 3.44.
//     Waiting spins, then yields, never sleeps (std::shared_mutex sleeps at
//     once, which had put the p99 of YCSB A/B at 2 threads at ~50 us); YCSB
//     A p99 at 2 threads: ~2.5 us (absl::Mutex: 2.2-10.5 us in 2 runs).
//   threads == 1: no lock at all (the caller promised one thread), and
//     info().caps.thread_safe is false, so the harness and the tests never
//     call it concurrently. A single-threaded run then measures the tree
//     alone: YCSB C 3.91 -> 4.64 Mops/s against the absl::Mutex reader lock.
#include "indexes/absl_btree/absl_btree.h"

#include <functional>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <type_traits>

#include "absl/container/btree_map.h"
#include "indexes/common/br_lock.h"

namespace nvindex {
namespace {

/// The lock of a single-threaded instance (IndexOptions::threads == 1):
/// every operation is a no-op.
struct NoLock {
  void lock() {}
  void unlock() {}
  void lock_shared() {}
  void unlock_shared() {}
};

/// The yardstick for keys K (uint64_t or std::string_view) over a
/// reader-writer lock type Lock (BrLock or NoLock).
template <class K, class Lock>
class AbslBtree final : public Index<K> {
 public:
  Status insert(K key, Value value) override {
    if (Status s = check_key("absl-btree", key); !s.ok()) return s;
    std::unique_lock lock(mu_);
    return map_.try_emplace(key, value).second ? Status::Ok() : Status::AlreadyExists();
  }
  Status update(K key, Value value) override {
    if (Status s = check_key("absl-btree", key); !s.ok()) return s;
    std::unique_lock lock(mu_);
    auto it = map_.find(key);
    if (it == map_.end()) return Status::NotFound();
    it->second = value;
    return Status::Ok();
  }
  Status remove(K key) override {
    if (Status s = check_key("absl-btree", key); !s.ok()) return s;
    std::unique_lock lock(mu_);
    auto it = map_.find(key);
    if (it == map_.end()) return Status::NotFound();
    map_.erase(it);
    return Status::Ok();
  }
  std::optional<Value> lookup(K key) override {
    std::shared_lock lock(mu_);
    auto it = map_.find(key);
    if (it == map_.end()) return std::nullopt;
    return it->second;
  }
  size_t scan(K start, size_t count, std::vector<std::pair<OwnedKey<K>, Value>>* out) override {
    out->clear();
    std::shared_lock lock(mu_);
    for (auto it = map_.lower_bound(start); it != map_.end() && out->size() < count; ++it) {
      out->emplace_back(it->first, it->second);
    }
    return out->size();
  }
  std::optional<std::pair<OwnedKey<K>, Value>> find_last_less_than(K key) override {
    std::shared_lock lock(mu_);
    auto it = map_.lower_bound(key);
    if (it == map_.begin()) return std::nullopt;
    --it;
    return std::make_pair(it->first, it->second);
  }
  IndexInfo info() const override {
    std::shared_lock lock(mu_);
    IndexInfo i;
    i.name = "absl-btree";
    i.description = kAbslBtreeDescription;
    i.caps.ordered = true;
    i.caps.thread_safe = !std::is_same_v<Lock, NoLock>;
    i.caps.string_keys = true;
    i.caps.placement = Placement::kDram;
    // absl::btree_map nodes hold up to 256 B of slots; estimate the footprint
    // from the element count (its allocator does not expose the exact bytes),
    // plus the heap bytes of string keys longer than the inline buffer.
    i.dram_bytes = map_.size() * sizeof(typename Map::value_type) * 3 / 2 + heap_key_bytes();
    return i;
  }
  Status verify(VerifyReport* report) const override {
    std::shared_lock lock(mu_);
    uint64_t n = 0;
    const OwnedKey<K>* prev = nullptr;
    for (const auto& [k, v] : map_) {
      if (prev != nullptr && !(*prev < k))
        return Status::Corruption("absl-btree: keys out of order");
      prev = &k;
      ++n;
    }
    *report = VerifyReport{};
    report->keys = n;
    return Status::Ok();
  }

 private:
  /// Byte-wise order of string keys, transparent so that a std::string_view
  /// finds a std::string key without a copy; std::less<> for integers.
  struct BytesLess {
    using is_transparent = void;
    bool operator()(std::string_view a, std::string_view b) const { return a < b; }
  };
  using Map = absl::btree_map<
      OwnedKey<K>, Value,
      std::conditional_t<std::is_same_v<K, std::string_view>, BytesLess, std::less<>>>;

  /// Heap bytes of string keys (0 for integer keys): the capacity of every
  /// key beyond std::string's inline buffer. O(keys): info() only.
  uint64_t heap_key_bytes() const {
    if constexpr (std::is_same_v<K, std::string_view>) {
      uint64_t b = 0;
      for (const auto& kv : map_) {
        if (kv.first.capacity() > std::string().capacity()) b += kv.first.capacity() + 1;
      }
      return b;
    } else {
      return 0;
    }
  }

  mutable Lock mu_;
  Map map_;
};

template <class K>
Status make_absl_btree_of(const IndexOptions& options, std::unique_ptr<Index<K>>* out) {
  if (options.threads <= 1) {
    *out = std::make_unique<AbslBtree<K, NoLock>>();
  } else {
    *out = std::make_unique<AbslBtree<K, BrLock>>();
  }
  return Status::Ok();
}

}  // namespace

Status make_absl_btree(const IndexOptions& options, std::unique_ptr<Index<uint64_t>>* out) {
  return make_absl_btree_of(options, out);
}

Status make_absl_btree_string(const IndexOptions& options,
                              std::unique_ptr<Index<std::string_view>>* out) {
  return make_absl_btree_of(options, out);
}

}  // namespace nvindex
