// A minimal TCP client for the server tests (server_loop_test,
// tool_serve_test): connect to 127.0.0.1, send a request, read until the
// reply ends with a given suffix. Reads time out after 10 s, so no test
// waits forever on a server that does not answer.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

namespace nvindex::testing {

/// A socket connected to 127.0.0.1:port, or -1.
inline int connect_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

/// Sends `req` on `fd` and reads until the reply ends with `until` (or the
/// peer closes, or 10 s pass); returns what was read.
inline std::string roundtrip(int fd, const std::string& req, const std::string& until) {
  if (::write(fd, req.data(), req.size()) != static_cast<ssize_t>(req.size())) return "";
  std::string got;
  char buf[4096];
  while (!got.ends_with(until)) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  return got;
}

/// The value of `STAT <name> <value>` in a stats reply, or ~0 when the
/// reply has no such line.
inline uint64_t stat_field(const std::string& stats, const std::string& name) {
  const size_t at = stats.find("STAT " + name + " ");
  return at == std::string::npos ? ~0ull
                                 : std::strtoull(stats.c_str() + at + name.size() + 6, nullptr, 10);
}

}  // namespace nvindex::testing
