// lying-test: an index that lies, so that tests can show the harness catches
// an index returning success without doing the work (DESIGN.md §5: "every
// operation's result is checked against what the workload expects").
//
// It wraps std::map<key, Value> behind one mutex (K = uint64_t, or
// std::string_view with the keys owned as std::string) and
//  - drops every 10th insert (counted over all inserts) while returning Ok;
//  - returns the value with its upper 32 bits inverted for every 16th
//    successful lookup (the value no longer matches its key's tag).
// Updates, removes, scans, verify() and the key-length check (check_key:
// a string key over 255 bytes is InvalidArgument) are honest. Not
// persistent.
//
// Thread-safety: every method takes the mutex; thread-safe (and claims it).
#include "testing/lying/lying.h"

#include <map>
#include <mutex>

namespace nvindex {
namespace {

template <class K>
class LyingIndex final : public Index<K> {
 public:
  Status insert(K key, Value value) override {
    if (Status st = check_key("lying-test", key); !st.ok()) return st;  // honest: too long
    std::lock_guard lock(mu_);
    if (++inserts_ % 10 == 0) return Status::Ok();  // the lie: nothing stored
    return map_.try_emplace(OwnedKey<K>(key), value).second ? Status::Ok()
                                                            : Status::AlreadyExists();
  }
  Status update(K key, Value value) override {
    if (Status st = check_key("lying-test", key); !st.ok()) return st;  // honest: too long
    std::lock_guard lock(mu_);
    auto it = map_.find(key);
    if (it == map_.end()) return Status::NotFound();
    it->second = value;
    return Status::Ok();
  }
  Status remove(K key) override {
    if (Status st = check_key("lying-test", key); !st.ok()) return st;  // honest: too long
    std::lock_guard lock(mu_);
    auto it = map_.find(key);
    if (it == map_.end()) return Status::NotFound();
    map_.erase(it);
    return Status::Ok();
  }
  std::optional<Value> lookup(K key) override {
    std::lock_guard lock(mu_);
    auto it = map_.find(key);
    if (it == map_.end()) return std::nullopt;
    if (++lookups_ % 16 == 0) return it->second ^ 0xFFFFFFFF00000000ull;  // the lie
    return it->second;
  }
  size_t scan(K start, size_t count, std::vector<std::pair<OwnedKey<K>, Value>>* out) override {
    out->clear();
    std::lock_guard lock(mu_);
    for (auto it = map_.lower_bound(start); it != map_.end() && out->size() < count; ++it) {
      out->emplace_back(it->first, it->second);
    }
    return out->size();
  }
  std::optional<std::pair<OwnedKey<K>, Value>> find_last_less_than(K key) override {
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
    i.caps.string_keys = true;
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
  std::map<OwnedKey<K>, Value, std::less<>> map_;
  uint64_t inserts_ = 0;
  uint64_t lookups_ = 0;
};

}  // namespace

Status make_lying_index(const IndexOptions&, std::unique_ptr<Index<uint64_t>>* out) {
  *out = std::make_unique<LyingIndex<uint64_t>>();
  return Status::Ok();
}

Status make_lying_string_index(const IndexOptions&, std::unique_ptr<Index<std::string_view>>* out) {
  *out = std::make_unique<LyingIndex<std::string_view>>();
  return Status::Ok();
}

}  // namespace nvindex
