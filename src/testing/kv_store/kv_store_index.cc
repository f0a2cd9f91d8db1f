// kv-store-test (kv_store_index.h): the KV store as an Index<uint64_t>.
#include "testing/kv_store/kv_store_index.h"

#include <cinttypes>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "nvindex/kv.h"
#include "nvindex/pm/pool.h"

namespace nvindex {

namespace {

constexpr size_t kAppendLimit = 200;  ///< value bytes past which update 2 replaces

std::string store_key(uint64_t k) {
  char b[24];
  std::snprintf(b, sizeof(b), "k%020" PRIu64, k);
  return b;
}

uint64_t key_of(std::string_view s) {
  uint64_t k = 0;
  for (char c : s.substr(1)) k = k * 10 + static_cast<uint64_t>(c - '0');
  return k;
}

std::string encode(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof(b), "%020" PRIu64, v);
  return b;
}

/// The value an item decodes to (kv_store_index.h); nullopt when it is not
/// a number (never for what this index writes).
std::optional<uint64_t> decode(std::string_view s) {
  if (s.size() > 20) s = s.substr(s.size() - 20);
  if (s.empty()) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    const uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) return std::nullopt;
    v = v * 10 + d;
  }
  return v;
}

class KvStoreIndex final : public Index<uint64_t> {
 public:
  explicit KvStoreIndex(std::unique_ptr<kv::Store> store) : store_(std::move(store)) {}

  Status insert(uint64_t key, Value value) override {
    return store_->add(store_key(key), encode(value), 0, 0);
  }

  Status update(uint64_t key, Value value) override {
    const std::string k = store_key(key);
    std::string old;
    kv::ItemInfo info;
    if (Status s = store_->get(k, &old, &info); !s.ok()) return s;
    const std::string v = encode(value);
    switch (value % 5) {
      case 0:
        return store_->set(k, v, 0, 0);
      case 1:
        return store_->cas(k, v, 0, 0, info.cas);
      case 2:
        if (old.size() < kAppendLimit) return store_->append(k, v);
        return store_->replace(k, v, 0, 0);
      case 3:
        if (old.size() <= 20) {
          const std::optional<uint64_t> was = decode(old);
          uint64_t got = 0;
          if (!was) return Status::Corruption("kv-store-test: value '" + old + "' of " + k);
          Status s = store_->incr(k, value - *was, &got);
          if (s.ok() && got != value) {
            return Status::Corruption("kv-store-test: incr gave " + std::to_string(got) +
                                      ", expected " + std::to_string(value));
          }
          return s;
        }
        return store_->replace(k, v, 0, 0);
      default:
        return store_->replace(k, v, 0, 0);
    }
  }

  Status remove(uint64_t key) override { return store_->remove(store_key(key)); }

  std::optional<Value> lookup(uint64_t key) override {
    std::string v;
    if (!store_->get(store_key(key), &v).ok()) return std::nullopt;
    return decode(v);
  }

  size_t scan(uint64_t start, size_t count, std::vector<std::pair<uint64_t, Value>>* out) override {
    out->clear();
    (void)store_->scan(store_key(start), count,
                       [out](std::string_view k, std::string_view v, const kv::ItemInfo&) {
                         out->emplace_back(key_of(k), decode(v).value_or(0));
                         return true;
                       });
    return out->size();
  }

  std::optional<std::pair<uint64_t, Value>> find_last_less_than(uint64_t key) override {
    std::optional<std::pair<uint64_t, Value>> last;
    (void)store_->range(kv::Bound::none(), kv::Bound::excluding(store_key(key)), 0,
                        [&last](std::string_view k, std::string_view v, const kv::ItemInfo&) {
                          last.emplace(key_of(k), decode(v).value_or(0));
                          return true;
                        });
    return last;
  }

  IndexInfo info() const override {
    IndexInfo i = store_->index_info();
    i.name = "kv-store-test";
    i.description = kKvStoreTestDescription;
    i.caps.string_keys = false;
    i.caps.bulk_load = false;
    i.caps.placement = Placement::kPmOnly;
    return i;
  }

  Status verify(VerifyReport* report) const override {
    uint64_t items = 0;
    if (Status s = store_->verify(&items, report); !s.ok()) return s;
    if (report->keys != items) {
      return Status::Corruption("kv-store-test: the index holds " + std::to_string(report->keys) +
                                " keys, the store walked " + std::to_string(items) + " items");
    }
    return Status::Ok();
  }

  std::vector<std::pair<std::string, std::string>> ablation_notes() const override {
    return store_->ablation_notes();
  }

 private:
  std::unique_ptr<kv::Store> store_;
};

}  // namespace

Status make_kv_store_test_index(const IndexOptions& options,
                                std::unique_ptr<Index<uint64_t>>* out) {
  if (options.pool == nullptr) {
    return Status::InvalidArgument("kv-store-test is persistent: IndexOptions.pool is required");
  }
  kv::Options o;
  const auto it = options.extra.find("over");
  o.index = it == options.extra.end() ? std::string(kKvStoreOverValues[0]) : it->second;
  o.node_size = smallest_node_size(o.index);
  o.threads = options.threads;
  o.pool_layout = pool_layout("kv-store-test", KeyType::kInteger);
  std::unique_ptr<kv::Store> store;
  if (Status s = kv::Store::open(options.pool, o, &store); !s.ok()) return s;
  *out = std::make_unique<KvStoreIndex>(std::move(store));
  return Status::Ok();
}

}  // namespace nvindex
