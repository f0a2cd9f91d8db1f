// The memcached-protocol server's event loop (libevent, as memcached): one
// listener thread accepts on a TCP socket and hands each connection to one
// of N worker threads, round robin; each worker runs its own event_base and
// feeds what a connection sends to its Session (process.h), writing the
// replies back. Requests may be pipelined; a client whose replies pile up
// (it sends and does not read) is not read from until they drain below
// half of ServerOptions::max_output_bytes, so a stalled client costs its own
// buffers only and never blocks the others.
//
// Thread-safety: start() and stop() from one thread; stop() may be called
// while the workers run (it asks every event_base to leave its loop).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "nvindex/status.h"
#include "server/process.h"

namespace nvindex::server {

struct ServerOptions {
  std::string listen = "127.0.0.1";  ///< IPv4 address to bind (memcached's -l default since 1.5.6)
  uint16_t port = 11211;             ///< TCP port; 0 = any free one (port() says which)
  unsigned threads = 4;              ///< worker threads (memcached's -t default)
  /// Connections at once (memcached's -c, default 1024); one more gets
  /// "ERROR Too many open connections" and is closed.
  uint64_t max_connections = 1024;
  /// Reply bytes queued for one client before its reads pause, bytes.
  size_t max_output_bytes = 4u << 20;
};

class Server {
 public:
  /// Binds and listens (Errors: InvalidArgument for a bad address or port
  /// 0 threads; IOError when the socket cannot be bound, e.g. the port is
  /// in use, naming it), then starts the threads. `state` (its store and
  /// counters) must outlive the server.
  static Status start(ServerState* state, const ServerOptions& options,
                      std::unique_ptr<Server>* out);

  /// Stops accepting, closes every connection, joins the threads.
  ~Server();

  /// The bound port.
  uint16_t port() const;
  /// Asks every thread to stop (returns at once); ~Server waits for them.
  void stop();

  struct Impl;

 private:
  Server() = default;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nvindex::server
