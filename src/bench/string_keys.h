// Byte-string keys for the benchmark (issue 10): how a workload's key ids
// become string keys, and the per-thread key lists the driver builds before
// any timed phase.
//
// A workload always works on 64-bit key ids (workload.h: the key layout, the
// expectations, the trace replay). With KeyType::kString each id names one
// string key:
//  - ids 1..N of a workload with a string table (Workload::key_strings: the
//    N distinct keys of a string keys file or string trace, sorted byte-wise)
//    name key_strings[id - 1]; ids are ranks, so id order is byte order and a
//    scan or find_last_less_than means the same over ids as over strings;
//  - every other id is formatted: "user" followed by the decimal of the id
//    left-padded with '0' to exactly key_size bytes (YCSB's key form, with
//    the padding that makes it order-preserving: for ids a < b, the formatted
//    a is byte-wise less than the formatted b).
// key_size is in [kMinStringKeySize, kMaxKeyBytes] = [5, 255] bytes: "user"
// and at least one digit. It holds key_size - 4 digits, so ids up to
// 10^(key_size-4) - 1 (every uint64 from key_size 24 on, the default; longer
// keys have more leading zeros). A workload with a larger id is refused
// (check_string_key_ids: InvalidArgument naming the largest id and the
// smallest key size that holds it) rather than folded into fewer digits,
// which would merge distinct keys and change their order; hashed ids (the
// default) need 24 bytes, --sequential-keys ids need only their digits.
//
// The value written for a string key is make_value(string_key_hash(key), v):
// its upper 32 bits are a hash of the key's bytes, so a value read back, or a
// scanned pair, is checked against its own key without the id.
//
// Thread-safety: pure functions; a StringKeyList is immutable after build().
#pragma once

#include <xxhash.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "nvindex/status.h"

namespace nvindex::bench {

/// The prefix of a formatted string key (YCSB's "user").
inline constexpr std::string_view kStringKeyPrefix = "user";
/// Smallest --key-size: the prefix and one digit, bytes.
inline constexpr uint32_t kMinStringKeySize = 5;
/// Default --key-size: "user" + 20 digits, every uint64 id, bytes.
inline constexpr uint32_t kDefaultStringKeySize = 24;

/// Ok when key_size is in [kMinStringKeySize, kMaxKeyBytes]; InvalidArgument
/// "--key-size N: expected 5..255 bytes ..." otherwise.
Status check_string_key_size(uint64_t key_size);

/// The largest id a formatted key of key_size bytes holds: 10^(key_size-4)-1,
/// or UINT64_MAX from key_size 24 on. key_size must pass check_string_key_size.
uint64_t max_formatted_id(uint32_t key_size);

/// Writes the formatted key of `id` (see the file comment) to out[0,
/// key_size). id <= max_formatted_id(key_size). No allocation.
void format_string_key(uint64_t id, uint32_t key_size, char* out);
/// The same as a std::string.
std::string formatted_string_key(uint64_t id, uint32_t key_size);

/// XXH3 64 (xxHash) of the key's bytes: the hash make_value() takes for a
/// string key (the file comment).
inline uint64_t string_key_hash(std::string_view key) {
  return XXH3_64bits(key.data(), key.size());
}

/// How ids name string keys: the workload's table (ids 1..table.size()) and
/// the key size of formatted ids.
struct StringKeyNames {
  std::span<const std::string> table;  ///< sorted distinct keys; id i names table[i - 1]
  uint32_t key_size = kDefaultStringKeySize;

  /// The key of `id` as a std::string (untimed paths and messages).
  std::string key_of(uint64_t id) const;
};

/// Checks that every id in `ids` names a key: an id past the table fits
/// key_size's digits (else InvalidArgument naming the id and the smallest
/// --key-size that holds it, or --sequential-keys) and its formatted key is
/// not also a table key (else InvalidArgument: a generated insert key equal
/// to a keys-file key). Cost: O(ids), plus a binary search of the table per
/// id past it.
Status check_string_key_ids(const StringKeyNames& names, std::span<const uint64_t> ids);

/// The string keys of a list of ids, laid out once before a timed phase: the
/// bytes of every key in one arena, a std::string_view and the value hash
/// (string_key_hash) per position. 16 + 8 + key bytes per key.
class StringKeyList {
 public:
  /// Fills the list with the keys of ids[0, n) in order (ids(i) returns the
  /// i-th id). Replaces any earlier contents.
  template <class IdAt>
  void build(const StringKeyNames& names, size_t n, IdAt ids) {
    size_t bytes = 0;
    for (size_t i = 0; i < n; ++i) bytes += length_of(names, ids(i));
    arena_.assign(bytes, '\0');
    views_.resize(n);
    hashes_.resize(n);
    size_t at = 0;
    for (size_t i = 0; i < n; ++i) {
      const uint64_t id = ids(i);
      const size_t len = length_of(names, id);
      char* p = arena_.data() + at;
      if (in_table(names, id)) {
        const std::string& s = names.table[id - 1];
        std::copy(s.begin(), s.end(), p);
      } else {
        format_string_key(id, names.key_size, p);
      }
      views_[i] = std::string_view(p, len);
      hashes_[i] = string_key_hash(views_[i]);
      at += len;
    }
  }
  size_t size() const { return views_.size(); }
  std::string_view view(size_t i) const { return views_[i]; }
  uint64_t hash(size_t i) const { return hashes_[i]; }

 private:
  static bool in_table(const StringKeyNames& names, uint64_t id) {
    return id >= 1 && id <= names.table.size();
  }
  static size_t length_of(const StringKeyNames& names, uint64_t id) {
    return in_table(names, id) ? names.table[id - 1].size() : names.key_size;
  }
  std::vector<char> arena_;
  std::vector<std::string_view> views_;
  std::vector<uint64_t> hashes_;
};

/// Collects distinct string keys as they are read (a keys file, trace
/// files), giving each a provisional id, then renumbers them by byte order
/// (finish()): the ids of a Workload's string table.
class StringKeyInterner {
 public:
  /// The provisional id of `key` (1-based, in order of first appearance),
  /// adding it when new. *fresh (may be null) says whether it was new.
  uint64_t intern(std::string_view key, bool* fresh = nullptr);
  /// Sorts the keys byte-wise into *table and returns the map from
  /// provisional id to final id (rank + 1): remap[provisional] (remap[0]
  /// unused). The interner is empty afterwards.
  std::vector<uint64_t> finish(std::vector<std::string>* table);

 private:
  std::deque<std::string> keys_;                        // a deque: push_back never moves a key
  std::unordered_map<std::string_view, uint64_t> ids_;  // views into keys_' strings
};

}  // namespace nvindex::bench
