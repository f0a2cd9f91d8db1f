// String keys in the crash lab and torture (issue 10): both drive an index
// through Index<uint64_t> and keep their models keyed by integers. For a
// string-key run (KeyType::kString) every integer key id names one byte
// string through an encoding that is injective and order-preserving (id a <
// id b exactly when string(a) < string(b) byte-wise, shorter first), so the
// models, the scenarios, the content checks and the messages stay as they
// are, while the index under test holds and orders real byte strings.
//
// The encoding of id (string_key): the prefix "nvindex/crash-lab/" (18
// bytes: every key shares more than two 8-byte slices), then for each byte b
// of id in big-endian order, trailing zero bytes dropped, the byte b repeated
// 1 + b mod 29 times. So id 0 is the prefix alone (a prefix of every other
// key), keys are 18..250 bytes long, hold NUL and high bytes, and ids that
// differ only in trailing bytes give keys of which one is a prefix of the
// other; a key of up to 250 bytes fills up to four 64 B lines of a key
// record.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "nvindex/index.h"
#include "nvindex/status.h"

namespace nvindex::crash {

/// The byte-string key of integer key `id` (the file comment's encoding),
/// 18..250 bytes.
std::string string_key(uint64_t id);

/// The inverse of string_key: true and *id when `key` is string_key(*id),
/// false for any other byte string.
bool string_key_id(std::string_view key, uint64_t* id);

/// An Index<uint64_t> over an Index<std::string_view>: every key id goes to
/// the index as string_key(id), every key it returns comes back as its id.
/// A key the index returns that is no string_key (a corrupt or invented
/// key) cannot be returned as an id: it is left out of the result and the
/// first such key is kept for key_error(). info(), verify() and
/// ablation_notes() are the index's own.
class StringKeyIndex final : public Index<uint64_t> {
 public:
  explicit StringKeyIndex(std::unique_ptr<Index<std::string_view>> index)
      : index_(std::move(index)) {}

  Status insert(uint64_t key, Value value) override {
    return index_->insert(string_key(key), value);
  }
  Status update(uint64_t key, Value value) override {
    return index_->update(string_key(key), value);
  }
  Status remove(uint64_t key) override { return index_->remove(string_key(key)); }
  std::optional<Value> lookup(uint64_t key) override { return index_->lookup(string_key(key)); }
  size_t scan(uint64_t start, size_t count, std::vector<std::pair<uint64_t, Value>>* out) override;
  std::optional<std::pair<uint64_t, Value>> find_last_less_than(uint64_t key) override;
  Status bulk_load(std::span<const std::pair<uint64_t, Value>> sorted) override;
  IndexInfo info() const override { return index_->info(); }
  Status verify(VerifyReport* report) const override { return index_->verify(report); }
  std::vector<std::pair<std::string, std::string>> ablation_notes() const override {
    return index_->ablation_notes();
  }

  /// "" or a description of the first key returned by scan() or
  /// find_last_less_than() that is no string_key (then cleared).
  std::string take_key_error();

 private:
  /// The id of `key` returned by the index; false (and the error kept) for
  /// a key that is no string_key.
  bool id_of(std::string_view key, uint64_t* id);

  std::unique_ptr<Index<std::string_view>> index_;
  std::string key_error_;
};

/// make_index for a run with key type `t`, as an Index<uint64_t>: the index
/// itself for integer keys, a StringKeyIndex over make_index<std::string_view>
/// for string keys. Errors: those of make_index (an index without string
/// keys: InvalidArgument naming those with them).
Status make_keyed_index(std::string_view name, KeyType t, const IndexOptions& options,
                        std::unique_ptr<Index<uint64_t>>* out);

/// Why the crash lab (the crash simulator and everything on it: crashtest,
/// its images and oracle, tests/crash_cases.h) skips block-device indexes.
inline constexpr char kNoCrashLabOnDevices[] =
    "the crash simulator sees only pm:: stores to a pool, and a block-device index writes "
    "through the kernel's I/O (its crash test is the process-crash torture, nvindex torture)";

/// Whether the crash lab runs on an index with capabilities `c`: the one
/// place that decides it. Only on pools (needs_pool): not on a block-device
/// index (kNoCrashLabOnDevices), nor a volatile one.
inline bool crash_lab_runs_on(const Capabilities& c) { return needs_pool(c); }

/// The check crashtest and torture start with: `index` is a registered
/// persistent index and, for string keys, has them; with `simulated`
/// (crashtest), one the crash lab runs on (crash_lab_runs_on). Errors:
/// InvalidArgument "<tool>: '<index>' is not a registered persistent index",
/// "<tool>: '<index>' is a block-device index: <kNoCrashLabOnDevices>" or
/// "<tool>: '<index>' has no string keys".
Status check_keyed_index(std::string_view tool, const std::string& index, KeyType t,
                         bool simulated);

/// "" or StringKeyIndex::take_key_error() when `idx` is a StringKeyIndex.
std::string take_key_error(Index<uint64_t>& idx);

}  // namespace nvindex::crash
