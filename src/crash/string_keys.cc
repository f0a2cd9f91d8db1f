// String keys in the crash lab and torture (string_keys.h).
#include "crash/string_keys.h"

#include <utility>
#include <vector>

#include "util/hex.h"
#include "util/quote.h"

namespace nvindex::crash {

namespace {

constexpr std::string_view kPrefix = "nvindex/crash-lab/";
constexpr unsigned kRepeatModulus = 29;

/// How often byte b is repeated in a key: 1..29.
unsigned repeats(uint8_t b) { return 1 + b % kRepeatModulus; }

}  // namespace

std::string string_key(uint64_t id) {
  std::string k(kPrefix);
  int last = 7;  // the last nonzero byte, big-endian position
  while (last >= 0 && ((id >> (8 * (7 - last))) & 0xff) == 0) --last;
  for (int i = 0; i <= last; ++i) {
    const auto b = static_cast<uint8_t>(id >> (8 * (7 - i)));
    k.append(repeats(b), static_cast<char>(b));
  }
  return k;
}

bool string_key_id(std::string_view key, uint64_t* id) {
  if (!key.starts_with(kPrefix)) return false;
  key.remove_prefix(kPrefix.size());
  uint64_t v = 0;
  int bytes = 0;
  uint8_t b = 0;
  while (!key.empty()) {
    if (bytes == 8) return false;
    b = static_cast<uint8_t>(key[0]);
    const unsigned r = repeats(b);
    if (key.size() < r) return false;
    for (unsigned j = 0; j < r; ++j) {
      if (static_cast<uint8_t>(key[j]) != b) return false;
    }
    key.remove_prefix(r);
    v |= uint64_t{b} << (8 * (7 - bytes));
    ++bytes;
  }
  if (bytes > 0 && b == 0) return false;  // trailing zero bytes are dropped
  *id = v;
  return true;
}

bool StringKeyIndex::id_of(std::string_view key, uint64_t* id) {
  if (string_key_id(key, id)) return true;
  if (key_error_.empty()) {
    key_error_ = "the index returned key " + quote_input(key) + " (" + std::to_string(key.size()) +
                 " bytes), which no operation wrote";
  }
  return false;
}

size_t StringKeyIndex::scan(uint64_t start, size_t count,
                            std::vector<std::pair<uint64_t, Value>>* out) {
  out->clear();
  std::vector<std::pair<std::string, Value>> got;
  index_->scan(string_key(start), count, &got);
  for (const auto& [k, v] : got) {
    uint64_t id = 0;
    if (id_of(k, &id)) out->emplace_back(id, v);
  }
  return out->size();
}

std::optional<std::pair<uint64_t, Value>> StringKeyIndex::find_last_less_than(uint64_t key) {
  const auto got = index_->find_last_less_than(string_key(key));
  uint64_t id = 0;
  if (!got || !id_of(got->first, &id)) return std::nullopt;
  return std::make_pair(id, got->second);
}

Status StringKeyIndex::bulk_load(std::span<const std::pair<uint64_t, Value>> sorted) {
  std::vector<std::string> keys;
  keys.reserve(sorted.size());
  for (const auto& kv : sorted) keys.push_back(string_key(kv.first));
  std::vector<std::pair<std::string_view, Value>> pairs;
  pairs.reserve(sorted.size());
  for (size_t i = 0; i < sorted.size(); ++i) pairs.emplace_back(keys[i], sorted[i].second);
  return index_->bulk_load(pairs);
}

std::string StringKeyIndex::take_key_error() { return std::exchange(key_error_, std::string()); }

Status make_keyed_index(std::string_view name, KeyType t, const IndexOptions& options,
                        std::unique_ptr<Index<uint64_t>>* out) {
  if (t == KeyType::kInteger) return make_index<uint64_t>(name, options, out);
  std::unique_ptr<Index<std::string_view>> idx;
  if (Status s = make_index<std::string_view>(name, options, &idx); !s.ok()) return s;
  *out = std::make_unique<StringKeyIndex>(std::move(idx));
  return Status::Ok();
}

Status check_keyed_index(std::string_view tool, const std::string& index, KeyType t,
                         bool simulated) {
  const IndexEntry* e = find_index_entry(index);
  if (e == nullptr || !e->caps.persistent) {
    return Status::InvalidArgument(std::string(tool) + ": '" + index +
                                   "' is not a registered persistent index");
  }
  if (simulated && !crash_lab_runs_on(e->caps)) {
    return Status::InvalidArgument(std::string(tool) + ": '" + index +
                                   "' is a block-device index: " + kNoCrashLabOnDevices);
  }
  if (t == KeyType::kString && !e->caps.string_keys) {
    return Status::InvalidArgument(std::string(tool) + ": '" + index + "' has no string keys");
  }
  return Status::Ok();
}

std::string take_key_error(Index<uint64_t>& idx) {
  auto* s = dynamic_cast<StringKeyIndex*>(&idx);
  return s == nullptr ? std::string() : s->take_key_error();
}

}  // namespace nvindex::crash
