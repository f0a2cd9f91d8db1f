// lying-test: an index that lies, so that tests can show the harness catches
// an index returning success without doing the work (DESIGN.md §5: "every
// operation's result is checked against what the workload expects").
//
// It wraps std::map<uint64_t, Value> behind one mutex and
//  - drops every 10th insert (counted over all inserts) while returning Ok;
//  - returns the value with its upper 32 bits inverted for every 16th
//    successful lookup (the value no longer matches its key's tag).
// Updates, removes, scans and verify() are honest. Not persistent.
//
// Thread-safety: every method takes the mutex; thread-safe (and claims it).
#include "testing/lying/lying.h"

#include <map>
#include <mutex>

namespace nvindex {
namespace {

class LyingIndex final : public Index<uint64_t> {
 public:
  Status insert(uint64_t key, Value value) override {
    std::lock_guard lock(mu_);
    if (++inserts_ % 10 == 0) return Status::Ok();  // the lie: nothing stored
    return map_.try_emplace(key, value).second ? Status::Ok() : Status::AlreadyExists();
  }
  Status update(uint64_t key, Value value) override {
    std::lock_guard lock(mu_);
    auto it = map_.find(key);
    if (it == map_.end()) return Status::NotFound();
    it->second = value;
    return Status::Ok();
  }
  Status remove(uint64_t key) override {
    std::lock_guard lock(mu_);
    return map_.erase(key) == 1 ? Status::Ok() : Status::NotFound();
  }
  std::optional<Value> lookup(uint64_t key) override {
    std::lock_guard lock(mu_);
    auto it = map_.find(key);
    if (it == map_.end()) return std::nullopt;
    if (++lookups_ % 16 == 0) return it->second ^ 0xFFFFFFFF00000000ull;  // the lie
    return it->second;
  }
  size_t scan(uint64_t start, size_t count, std::vector<std::pair<uint64_t, Value>>* out) override {
    out->clear();
    std::lock_guard lock(mu_);
    for (auto it = map_.lower_bound(start); it != map_.end() && out->size() < count; ++it) {
      out->emplace_back(it->first, it->second);
    }
    return out->size();
  }
  std::optional<std::pair<uint64_t, Value>> find_last_less_than(uint64_t key) override {
    std::lock_guard lock(mu_);
    auto it = map_.lower_bound(key);
    if (it == map_.begin()) return std::nullopt;
    --it;
    return std::make_pair(it->first, it->second);
  }
  IndexInfo info() const override {
    std::lock_guard lock(mu_);
    IndexInfo i;
    i.name = "lying-test";
    i.description = kLyingDescription;
    i.caps.ordered = true;
    i.caps.thread_safe = true;
    i.caps.placement = Placement::kDram;
    // std::map node: three pointers, colour, key and value (~48 B) plus
    // allocator overhead; an estimate, like absl-btree's.
    i.dram_bytes = map_.size() * 64;
    return i;
  }
  Status verify(VerifyReport* report) const override {
    std::lock_guard lock(mu_);
    *report = VerifyReport{};
    report->keys = map_.size();
    return Status::Ok();
  }

 private:
  mutable std::mutex mu_;
  std::map<uint64_t, Value> map_;
  uint64_t inserts_ = 0;
  uint64_t lookups_ = 0;
};

}  // namespace

Status make_lying_index(const IndexOptions&, std::unique_ptr<Index<uint64_t>>* out) {
  *out = std::make_unique<LyingIndex>();
  return Status::Ok();
}

}  // namespace nvindex
