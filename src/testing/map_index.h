// MapIndex: the honest core of the test doubles that need a working index
// (lying-test, batch-spy-test): a std::map<key, Value> behind one mutex,
// K = uint64_t, or std::string_view with the keys owned as std::string
// (byte-wise order). A double derives from it and overrides the operations it
// falsifies or observes. Not persistent; ordered; claims thread_safe and
// string_keys. The key-length check (check_key: a string key over 255 bytes
// is InvalidArgument) is honest.
//
// Thread-safety: every method takes mu_; thread-safe.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "nvindex/index.h"

namespace nvindex::testing_doubles {

template <class K>
class MapIndex : public Index<K> {
 public:
  /// `name` and `description` are what info() reports (static strings).
  MapIndex(std::string_view name, std::string_view description)
      : name_(name), description_(description) {}

  /// Ok, AlreadyExists, or InvalidArgument (a string key over 255 bytes).
  Status insert(K key, Value value) override {
    if (Status st = check_key(name_, key); !st.ok()) return st;
    std::lock_guard lock(mu_);
    return map_.try_emplace(OwnedKey<K>(key), value).second ? Status::Ok()
                                                            : Status::AlreadyExists();
  }
  /// Ok, NotFound, or InvalidArgument (a string key over 255 bytes).
  Status update(K key, Value value) override {
    if (Status st = check_key(name_, key); !st.ok()) return st;
    std::lock_guard lock(mu_);
    auto it = map_.find(key);
    if (it == map_.end()) return Status::NotFound();
    it->second = value;
    return Status::Ok();
  }
  /// Ok, NotFound, or InvalidArgument (a string key over 255 bytes).
  Status remove(K key) override {
    if (Status st = check_key(name_, key); !st.ok()) return st;
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
    i.name = std::string(name_);
    i.description = std::string(description_);
    i.caps.ordered = true;
    i.caps.thread_safe = true;
    i.caps.string_keys = true;
    i.caps.placement = Placement::kDram;
    // std::map node: three pointers, colour, key and value (~48 B) plus
    // allocator overhead; an estimate, like absl-btree's.
    i.dram_bytes = map_.size() * 64;
    return i;
  }
  /// Ok; report->keys = the pairs held (nothing else to check in a std::map).
  Status verify(VerifyReport* report) const override {
    std::lock_guard lock(mu_);
    *report = VerifyReport{};
    report->keys = map_.size();
    return Status::Ok();
  }

 private:
  const std::string_view name_;
  const std::string_view description_;
  mutable std::mutex mu_;
  std::map<OwnedKey<K>, Value, std::less<>> map_;
};

}  // namespace nvindex::testing_doubles
