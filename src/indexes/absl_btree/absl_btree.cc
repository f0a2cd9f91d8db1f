// absl-btree: absl::btree_map<uint64_t, Value> behind a reader-writer lock.
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

#include <mutex>
#include <shared_mutex>
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

/// The yardstick over a reader-writer lock type Lock (BrLock or NoLock).
template <class Lock>
class AbslBtree final : public Index<uint64_t> {
 public:
  Status insert(uint64_t key, Value value) override {
    std::unique_lock lock(mu_);
    return map_.try_emplace(key, value).second ? Status::Ok() : Status::AlreadyExists();
  }
  Status update(uint64_t key, Value value) override {
    std::unique_lock lock(mu_);
    auto it = map_.find(key);
    if (it == map_.end()) return Status::NotFound();
    it->second = value;
    return Status::Ok();
  }
  Status remove(uint64_t key) override {
    std::unique_lock lock(mu_);
    return map_.erase(key) == 1 ? Status::Ok() : Status::NotFound();
  }
  std::optional<Value> lookup(uint64_t key) override {
    std::shared_lock lock(mu_);
    auto it = map_.find(key);
    if (it == map_.end()) return std::nullopt;
    return it->second;
  }
  size_t scan(uint64_t start, size_t count, std::vector<std::pair<uint64_t, Value>>* out) override {
    out->clear();
    std::shared_lock lock(mu_);
    for (auto it = map_.lower_bound(start); it != map_.end() && out->size() < count; ++it) {
      out->emplace_back(it->first, it->second);
    }
    return out->size();
  }
  std::optional<std::pair<uint64_t, Value>> find_last_less_than(uint64_t key) override {
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
    i.caps.placement = Placement::kDram;
    // absl::btree_map nodes hold up to 256 B of slots; estimate the footprint
    // from the element count (its allocator does not expose the exact bytes).
    i.dram_bytes = map_.size() * sizeof(std::pair<uint64_t, Value>) * 3 / 2;
    return i;
  }
  Status verify(VerifyReport* report) const override {
    std::shared_lock lock(mu_);
    uint64_t n = 0;
    bool first = true;
    uint64_t prev = 0;
    for (const auto& [k, v] : map_) {
      if (!first && k <= prev) return Status::Corruption("absl-btree: keys out of order");
      first = false;
      prev = k;
      ++n;
    }
    *report = VerifyReport{};
    report->keys = n;
    return Status::Ok();
  }

 private:
  mutable Lock mu_;
  absl::btree_map<uint64_t, Value> map_;
};

}  // namespace

Status make_absl_btree(const IndexOptions& options, std::unique_ptr<Index<uint64_t>>* out) {
  if (options.threads <= 1) {
    *out = std::make_unique<AbslBtree<NoLock>>();
  } else {
    *out = std::make_unique<AbslBtree<BrLock>>();
  }
  return Status::Ok();
}

}  // namespace nvindex
