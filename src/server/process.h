// The memcached ASCII protocol's process and compose side: one parsed
// Request (protocol.h) run against a kv::Store, its reply appended to an
// output buffer in memcached's form (doc/protocol.txt; docs/kv.md "The
// protocol"). No I/O: the event loop (server.h) feeds it, and the tests
// drive it with bytes alone.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "nvindex/kv.h"
#include "server/protocol.h"

namespace nvindex::server {

/// The version `version` and `stats` report: the protocol level, 1.6
/// (memccapable holds a server reporting 1.6 or later to the 1.6 rules).
inline constexpr char kProtocolVersion[] = "1.6.0";

/// What the server shares with every connection's processing: settings for
/// `stats` and the counts only the server knows. Counters are atomics
/// (every worker thread bumps them).
struct ServerState {
  kv::Store* store = nullptr;
  int64_t started = 0;           ///< Unix s, for uptime
  unsigned threads = 1;          ///< worker threads
  uint64_t max_connections = 0;  ///< --max-connections
  uint64_t pool_bytes = 0;       ///< the pool's size (limit_maxbytes)
  size_t max_value_bytes = kv::kDefaultMaxValueBytes;
  std::atomic<uint64_t> curr_connections{0}, total_connections{0}, rejected_connections{0};
  std::atomic<uint64_t> cmd_get{0}, cmd_flush{0}, cmd_meta{0};
  std::atomic<uint64_t> bytes_read{0}, bytes_written{0};
  std::atomic<uint64_t> store_too_large{0}, store_no_memory{0};
  std::atomic<uint32_t> verbosity{0};
};

/// What the connection does after a request.
enum class After : uint8_t { kContinue, kClose };

/// Runs `req` on state.store and appends its reply (nothing under
/// noreply, or for a meta command's reply that `q` hides). `now` is the
/// Unix time in s. kClose for `quit`.
After process(const Request& req, ServerState& state, int64_t now, std::string* out);

/// One connection's protocol state: bytes received and not yet parsed, and
/// the rest of a refused data block still to drop. The event loop calls
/// feed() with what it read; the tests call it with bytes alone.
class Session {
 public:
  explicit Session(ServerState& state) : state_(state) {}

  /// Appends `bytes` to the input, then parses and runs every whole request
  /// in it (pipelined requests in order), appending their replies to *out.
  /// kClose: send *out, then close (quit, a line too long). `now`: Unix s.
  After feed(std::string_view bytes, int64_t now, std::string* out);

  /// Bytes received and not yet parsed (a partial request).
  size_t pending() const { return in_.size() - start_; }

 private:
  ServerState& state_;
  std::string in_;
  size_t start_ = 0;    ///< first unparsed byte of in_
  size_t swallow_ = 0;  ///< bytes of a refused data block still to drop
};

}  // namespace nvindex::server
