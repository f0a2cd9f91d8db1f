// String keys of the benchmark: see string_keys.h.
#include "bench/string_keys.h"

#include <numeric>

#include "nvindex/index.h"
#include "util/quote.h"

namespace nvindex::bench {

Status check_string_key_size(uint64_t key_size) {
  if (key_size >= kMinStringKeySize && key_size <= kMaxKeyBytes) return Status::Ok();
  return Status::InvalidArgument("--key-size " + std::to_string(key_size) + ": expected " +
                                 std::to_string(kMinStringKeySize) + ".." +
                                 std::to_string(kMaxKeyBytes) + " bytes (\"" +
                                 std::string(kStringKeyPrefix) + "\" and at least one digit)");
}

uint64_t max_formatted_id(uint32_t key_size) {
  const uint32_t digits = key_size - static_cast<uint32_t>(kStringKeyPrefix.size());
  if (digits >= 20) return UINT64_MAX;
  uint64_t p = 1;
  for (uint32_t i = 0; i < digits; ++i) p *= 10;
  return p - 1;
}

void format_string_key(uint64_t id, uint32_t key_size, char* out) {
  std::copy(kStringKeyPrefix.begin(), kStringKeyPrefix.end(), out);
  char* p = out + key_size;
  char* const digits_begin = out + kStringKeyPrefix.size();
  while (p > digits_begin) {
    *--p = static_cast<char>('0' + id % 10);
    id /= 10;
  }
}

std::string formatted_string_key(uint64_t id, uint32_t key_size) {
  std::string s(key_size, '\0');
  format_string_key(id, key_size, s.data());
  return s;
}

std::string StringKeyNames::key_of(uint64_t id) const {
  if (id >= 1 && id <= table.size()) return table[id - 1];
  return formatted_string_key(id, key_size);
}

namespace {

/// The number of decimal digits of v (1 for 0).
uint32_t decimal_digits(uint64_t v) {
  uint32_t d = 1;
  while (v >= 10) {
    v /= 10;
    ++d;
  }
  return d;
}

}  // namespace

Status check_string_key_ids(const StringKeyNames& names, std::span<const uint64_t> ids) {
  const uint64_t n = names.table.size();
  const uint64_t max_id = max_formatted_id(names.key_size);
  uint64_t largest = 0;
  bool any = false;
  for (uint64_t id : ids) {
    if (id >= 1 && id <= n) continue;
    largest = any ? std::max(largest, id) : id;
    any = true;
    if (n > 0) {
      const std::string key = formatted_string_key(id, names.key_size);
      if (std::binary_search(names.table.begin(), names.table.end(), key)) {
        return Status::InvalidArgument("generated key " + quote_input(key) +
                                       " is also a keys-file key; every key must be distinct");
      }
    }
  }
  if (!any || largest <= max_id) return Status::Ok();
  const uint32_t need = static_cast<uint32_t>(kStringKeyPrefix.size()) + decimal_digits(largest);
  return Status::InvalidArgument("--key-size " + std::to_string(names.key_size) + " holds " +
                                 std::to_string(names.key_size - kStringKeyPrefix.size()) +
                                 " digits (key ids up to " + std::to_string(max_id) +
                                 "), but this workload has key id " + std::to_string(largest) +
                                 ": use --key-size " + std::to_string(need) +
                                 " or more, or --sequential-keys (ids 1..records + inserts)");
}

uint64_t StringKeyInterner::intern(std::string_view key, bool* fresh) {
  auto it = ids_.find(key);
  if (it != ids_.end()) {
    if (fresh != nullptr) *fresh = false;
    return it->second;
  }
  keys_.emplace_back(key);
  const uint64_t id = keys_.size();
  ids_.emplace(std::string_view(keys_.back()), id);
  if (fresh != nullptr) *fresh = true;
  return id;
}

std::vector<uint64_t> StringKeyInterner::finish(std::vector<std::string>* table) {
  std::vector<uint64_t> order(keys_.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](uint64_t a, uint64_t b) { return keys_[a] < keys_[b]; });
  std::vector<uint64_t> remap(keys_.size() + 1, 0);
  table->clear();
  table->reserve(keys_.size());
  for (uint64_t rank = 0; rank < order.size(); ++rank) {
    remap[order[rank] + 1] = rank + 1;
    table->push_back(std::move(keys_[order[rank]]));
  }
  ids_.clear();
  keys_.clear();
  return remap;
}

}  // namespace nvindex::bench
