// Status: the result of an operation that can fail, in the style of LevelDB's
// `leveldb::Status`. nvindex never throws across its public API; every
// fallible call returns a Status (or a value plus a Status out-parameter).
//
// Thread-safety: a Status is a value type; distinct objects may be used from
// distinct threads without synchronization.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

namespace nvindex {

/// The kind of outcome. `kOk` is success; every other code is an error whose
/// message (Status::message) says what went wrong in words a user can act on.
enum class Code : uint8_t {
  kOk = 0,
  kNotFound,         ///< key (or file) does not exist
  kAlreadyExists,    ///< insert of a key that is present
  kInvalidArgument,  ///< a bad option, key, size or name
  kIOError,          ///< the OS refused: open, map, truncate, read
  kCorruption,       ///< a pool or structure failed validation
  kOutOfSpace,       ///< the pool (or an allocator size class) is full
  kNotSupported,     ///< the index does not claim this capability
  kBusy,             ///< the resource is in use (e.g. a pool opened twice)
};

/// Result of a fallible call. Costs one byte plus an empty std::string on the
/// success path (no allocation: the message is empty and fits SSO).
/// [[nodiscard]]: a dropped Status is a compile error (-Werror), so no
/// failure can vanish; where one is deliberately not acted on, the code says
/// why next to it.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string msg) : code_(code), msg_(std::move(msg)) {}

  static Status Ok() { return {}; }
  static Status NotFound(std::string msg = {}) { return {Code::kNotFound, std::move(msg)}; }
  static Status AlreadyExists(std::string msg = {}) {
    return {Code::kAlreadyExists, std::move(msg)};
  }
  static Status InvalidArgument(std::string msg) {
    return {Code::kInvalidArgument, std::move(msg)};
  }
  static Status IOError(std::string msg) { return {Code::kIOError, std::move(msg)}; }
  static Status Corruption(std::string msg) { return {Code::kCorruption, std::move(msg)}; }
  static Status OutOfSpace(std::string msg) { return {Code::kOutOfSpace, std::move(msg)}; }
  static Status NotSupported(std::string msg) { return {Code::kNotSupported, std::move(msg)}; }
  static Status Busy(std::string msg) { return {Code::kBusy, std::move(msg)}; }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  bool IsNotFound() const { return code_ == Code::kNotFound; }
  bool IsAlreadyExists() const { return code_ == Code::kAlreadyExists; }
  const std::string& message() const { return msg_; }

  /// "OK", or "<code name>: <message>", e.g. "Corruption: bad magic in /dev/shm/x.pool".
  std::string ToString() const;

  friend bool operator==(const Status& a, const Status& b) { return a.code_ == b.code_; }

 private:
  Code code_ = Code::kOk;
  std::string msg_;
};

/// Name of a code, e.g. "NotFound".
std::string_view CodeName(Code code);

}  // namespace nvindex
