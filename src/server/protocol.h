// The memcached ASCII protocol's request side (memcached doc/protocol.txt):
// one request parsed from the front of a connection's input buffer, with the
// framing rules and the error replies memcached gives. No I/O and no store:
// the parse module of a Pelikan-style split (parse / compose / process /
// event loop), testable and fuzzable alone (tests/server_protocol_test.cc,
// tests/fuzz/protocol_fuzz.cc).
//
// Framing: a command line ends at "\n" (a "\r" before it is dropped, as
// memcached does); a storage command's line is followed by exactly <bytes>
// data bytes and "\r\n". Views in a Request point into the caller's buffer
// and stay valid until those bytes are consumed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace nvindex::server {

/// Longest key, bytes (memcached's KEY_MAX_LENGTH).
inline constexpr size_t kMaxKeyBytes = 250;
/// Longest command line, bytes, for any command but get and gets: with
/// more buffered and no newline, memcached closes the connection; we send
/// "CLIENT_ERROR line too long" first, and refuse a longer line that came
/// whole too (memcached serves it when it arrived in one read).
inline constexpr size_t kMaxLineBytes = 2048;
/// Longest get or gets line (many keys), bytes (memcached: no limit).
inline constexpr size_t kMaxGetLineBytes = 1u << 20;
/// Tokens of a line that count (memcached records 23 and ignores the rest;
/// the get family's keys are not limited).
inline constexpr size_t kMaxTokens = 23;
/// Most tokens of a meta command (memcached: "options flags are too long").
inline constexpr size_t kMaxMetaTokens = 20;

/// The commands.
enum class Command : uint8_t {
  kGet,
  kGets,
  kGat,
  kGats,
  kSet,
  kAdd,
  kReplace,
  kAppend,
  kPrepend,
  kCas,
  kDelete,
  kIncr,
  kDecr,
  kTouch,
  kStats,
  kFlushAll,
  kVersion,
  kVerbosity,
  kQuit,
  kMetaGet,
  kMetaSet,
  kMetaDelete,
  kMetaArithmetic,
  kMetaNoop,
  kMetaDebug,
  kRget,  ///< the range extension (docs/kv.md "Range reads")
};

/// One parsed request. Unused fields keep their defaults.
struct Request {
  Command cmd = Command::kGet;
  /// The get family's keys (gat/gats: after the exptime); rget: lo and hi.
  std::vector<std::string_view> keys;
  /// The key of a single-key command.
  std::string_view key;
  uint32_t flags = 0;
  int64_t exptime = 0;  ///< memcached's form (kv::expiry_from_memcached)
  uint64_t cas = 0;     ///< cas: the unique to compare
  uint64_t delta = 0;   ///< incr, decr
  int64_t delay = 0;    ///< flush_all
  uint32_t verbosity = 0;
  bool noreply = false;
  /// Storage commands: the data block, without its "\r\n".
  std::string_view data;
  /// stats: its arguments; meta commands: their flag tokens (after the key,
  /// and for ms after the data length); rget: none.
  std::vector<std::string_view> args;
  /// rget (MemcacheDB's `rget <start> <end> <left-open> <right-open>
  /// <max>`): whether each end is open (excluded), and the most items.
  bool lo_open = false, hi_open = false;
  uint64_t max = 0;
};

/// What parse() found.
enum class ParseStatus : uint8_t {
  kOk,        ///< *req holds a request of `consumed` bytes
  kNeedMore,  ///< no whole request yet: read more, nothing consumed
  /// A bad request: send `reply` (unless empty), drop `consumed` bytes, then
  /// drop `swallow` more as they arrive (a refused data block), and close
  /// the connection after the reply when `close` is set.
  kError,
};

struct ParseResult {
  ParseStatus status = ParseStatus::kNeedMore;
  size_t consumed = 0;
  size_t swallow = 0;
  bool close = false;
  std::string_view reply;  ///< a static error line, with its "\r\n"
};

/// Parses the request at the front of `in`. `max_value_bytes`: a storage
/// command announcing more data is refused before any of it is read
/// ("SERVER_ERROR object too large for cache", the block swallowed).
ParseResult parse(std::string_view in, size_t max_value_bytes, Request* req);

/// A strict unsigned decimal below 2^64: digits only, no sign, no spaces
/// (memcached's numeric arguments: cas uniques, deltas, meta flags' values).
bool parse_u64(std::string_view text, uint64_t* out);
/// A strict signed 32-bit decimal, optional '-' (memcached's exptime and
/// delay arguments).
bool parse_i32(std::string_view text, int64_t* out);

/// Whether `key` is a key this server takes: 1..250 bytes (it holds no
/// space: spaces separate tokens), no NUL and no CR. memcached takes any
/// other byte, control characters included, and stock clients send them.
bool valid_key(std::string_view key);

}  // namespace nvindex::server
