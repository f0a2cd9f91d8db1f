// `nvindex serve` as a user runs it ($NVINDEX_BIN), talked to by a stock
// client: memccapable -a (libmemcached-tools, memcached's ASCII conformance
// tester) passes over every persistent string-key index a store takes; the
// server closes cleanly on SIGTERM and recovers its items, with the last
// shutdown reported, after SIGKILL; a second server on a busy pool or port
// is refused. Listens on 127.0.0.1 at a free port (--port 0; the port is
// read from its start-up line); every wait is bounded.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "support/param_name.h"

namespace {

std::string bin() {
  const char* b = std::getenv("NVINDEX_BIN");
  return b != nullptr ? b : "nvindex";
}

std::string tmp(const std::string& tag) {
  return "/dev/shm/nvindex-serve-test-" + std::to_string(::getpid()) + "-" + tag;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

/// A running `nvindex serve`, its stdout and stderr in files.
struct Serve {
  pid_t pid = -1;
  int port = 0;
  std::string out, err;

  /// Starts it with `args` and waits (at most 30 s) for its "listening on"
  /// line; port 0 when it exited or never said so.
  void start(const std::string& args, const std::string& tag) {
    out = tmp(tag + ".out");
    err = tmp(tag + ".err");
    pid = ::fork();
    if (pid == 0) {
      const std::string cmd =
          "exec " + bin() + " serve --port 0 " + args + " >" + out + " 2>" + err;
      ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    for (int i = 0; i < 300 && port == 0; ++i) {
      const std::string o = slurp(out);
      const size_t at = o.find("listening on 127.0.0.1:");
      if (at != std::string::npos) port = std::atoi(o.c_str() + at + 23);
      int status = 0;
      if (port == 0 && ::waitpid(pid, &status, WNOHANG) == pid) {
        pid = -1;
        return;
      }
      if (port == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }

  /// Sends `sig` and waits (at most 30 s); the exit status, or -1.
  int stop(int sig) {
    if (pid <= 0) return -1;
    ::kill(pid, sig);
    for (int i = 0; i < 300; ++i) {
      int status = 0;
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        pid = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    pid = -1;
    return -1;
  }

  ~Serve() {
    if (pid > 0) stop(SIGKILL);
    std::remove(out.c_str());
    std::remove(err.c_str());
  }
};

/// Sends `req` on a new connection and reads until `until` is at the end
/// of the reply (at most 10 s).
std::string ask(int port, const std::string& req, const std::string& until = "END\r\n") {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  std::string got;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      ::write(fd, req.data(), req.size()) == static_cast<ssize_t>(req.size())) {
    char buf[4096];
    while (!got.ends_with(until)) {
      const ssize_t n = ::read(fd, buf, sizeof(buf));
      if (n <= 0) break;
      got.append(buf, static_cast<size_t>(n));
    }
  }
  ::close(fd);
  return got;
}

bool have_memccapable() { return std::system("command -v memccapable >/dev/null 2>&1") == 0; }

class ServeIndex : public ::testing::TestWithParam<std::string> {};

TEST_P(ServeIndex, MemccapablePassesEveryAsciiTest) {
  if (!have_memccapable()) GTEST_SKIP() << "memccapable (libmemcached-tools) not installed";
  const std::string pool = tmp(GetParam() + ".pool");
  std::remove(pool.c_str());
  Serve s;
  s.start("--index " + GetParam() + " --pool " + pool + " --pool-size 64M --threads 2", GetParam());
  ASSERT_GT(s.port, 0) << slurp(s.err);
  const std::string log = tmp(GetParam() + ".memccapable");
  const int rc = std::system(("timeout 120 memccapable -a -h 127.0.0.1 -p " +
                              std::to_string(s.port) + " >" + log + " 2>&1")
                                 .c_str());
  const std::string report = slurp(log);
  std::remove(log.c_str());
  EXPECT_EQ(rc, 0) << report;
  EXPECT_NE(report.find("All tests passed"), std::string::npos) << report;
  EXPECT_EQ(s.stop(SIGTERM), 0) << slurp(s.err);
  EXPECT_NE(slurp(s.out).find("closed cleanly"), std::string::npos) << slurp(s.out);
  std::remove(pool.c_str());
}

INSTANTIATE_TEST_SUITE_P(Store, ServeIndex,
                         ::testing::Values("lbtree", "wbtree", "fastfair", "p-masstree",
                                           "p-bwtree"),
                         nvindex::testing::IndexParamName());

TEST(Serve, ItemsSurviveSigkillAndACleanStop) {
  const std::string pool = tmp("kill.pool");
  std::remove(pool.c_str());
  {
    Serve s;
    s.start("--pool " + pool + " --pool-size 64M", "kill1");
    ASSERT_GT(s.port, 0) << slurp(s.err);
    EXPECT_NE(slurp(s.out).find("a new store"), std::string::npos) << slurp(s.out);
    EXPECT_EQ(
        ask(s.port, "set a 7 0 5\r\nhello\r\nset b 0 0 1\r\nx\r\ndelete b\r\n", "DELETED\r\n"),
        "STORED\r\nSTORED\r\nDELETED\r\n");
    EXPECT_EQ(s.stop(SIGKILL), 128 + SIGKILL);
  }
  {
    Serve s;
    s.start("--pool " + pool, "kill2");
    ASSERT_GT(s.port, 0) << slurp(s.err);
    const std::string o = slurp(s.out);
    EXPECT_NE(o.find("last shutdown NOT clean"), std::string::npos) << o;
    EXPECT_NE(o.find(", 1 items"), std::string::npos) << o;
    EXPECT_EQ(ask(s.port, "get a b\r\n"), "VALUE a 7 5\r\nhello\r\nEND\r\n");
    // A second server on the same pool is refused (the pool is locked).
    Serve t;
    t.start("--pool " + pool, "kill3");
    EXPECT_EQ(t.port, 0);
    EXPECT_NE(slurp(t.err).find("Busy"), std::string::npos) << slurp(t.err);
    EXPECT_EQ(s.stop(SIGTERM), 0);
  }
  {
    Serve s;
    s.start("--pool " + pool, "kill4");
    ASSERT_GT(s.port, 0) << slurp(s.err);
    EXPECT_NE(slurp(s.out).find("last shutdown clean"), std::string::npos) << slurp(s.out);
    const std::string st = ask(s.port, "stats\r\n");
    EXPECT_NE(st.find("STAT curr_items 1\r\n"), std::string::npos) << st;
    EXPECT_NE(st.find("STAT index lbtree\r\n"), std::string::npos) << st;
    EXPECT_NE(st.find("STAT last_shutdown_clean yes\r\n"), std::string::npos) << st;
    EXPECT_EQ(s.stop(SIGINT), 0);
  }
  std::remove(pool.c_str());
}

TEST(Serve, UsageErrorsExitTwo) {
  for (const std::string& args :
       {std::string("--index lbtree"), std::string("--index dash-eh --pool ") + tmp("x.pool"),
        std::string("--index btree --pool ") + tmp("y.pool"),
        std::string("--index btree --listen nowhere")}) {
    SCOPED_TRACE(args);
    const std::string cmd = bin() + " serve --port 0 " + args + " >/dev/null 2>&1";
    const int rc = std::system(("timeout 30 " + cmd).c_str());
    EXPECT_TRUE(WIFEXITED(rc));
    EXPECT_EQ(WEXITSTATUS(rc), 2);
  }
  EXPECT_NE(::access(tmp("x.pool").c_str(), F_OK), 0) << "no pool left behind";
}

}  // namespace
