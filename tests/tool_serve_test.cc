// `nvindex serve` as a user runs it ($NVINDEX_BIN), talked to by a stock
// client: memccapable -a (libmemcached-tools, memcached's ASCII conformance
// tester) passes over every persistent string-key index a store takes; the
// server closes cleanly on SIGTERM and recovers its items, with the last
// shutdown reported, after SIGKILL; a second server on a busy pool is
// refused; 2,000 idle connections and a client that never reads its
// replies do not block another; killed with SIGKILL at random instants
// while four connections write, it loses no acknowledged write and shows
// none but the one in flight per connection (6 kills: the short version). Listens on 127.0.0.1 at a
// free port (--port 0; the port is read from its start-up line); every wait is bounded.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "bench/kv_keys.h"
#include "support/param_name.h"
#include "support/socket_client.h"

namespace {

using nvindex::testing::connect_to;
using nvindex::testing::roundtrip;

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
  const int fd = connect_to(port);
  if (fd < 0) return "";
  const std::string got = roundtrip(fd, req, until);
  ::close(fd);
  return got;
}

/// A pool path removed before use and when the test ends, failed or not.
struct TempPoolFile {
  std::string path;
  explicit TempPoolFile(std::string p) : path(std::move(p)) { std::remove(path.c_str()); }
  ~TempPoolFile() { std::remove(path.c_str()); }
};

bool have_memccapable() { return std::system("command -v memccapable >/dev/null 2>&1") == 0; }

class ServeIndex : public ::testing::TestWithParam<std::string> {};

TEST_P(ServeIndex, MemccapablePassesEveryAsciiTest) {
  if (!have_memccapable()) GTEST_SKIP() << "memccapable (libmemcached-tools) not installed";
  const TempPoolFile file(tmp(GetParam() + ".pool"));
  const std::string& pool = file.path;
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
}

INSTANTIATE_TEST_SUITE_P(Store, ServeIndex,
                         ::testing::Values("lbtree", "fptree", "wbtree", "fastfair", "p-masstree",
                                           "p-bwtree"),
                         nvindex::testing::IndexParamName());

TEST(Serve, ItemsSurviveSigkillAndACleanStop) {
  const TempPoolFile file(tmp("kill.pool"));
  const std::string& pool = file.path;
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
}

// Thousands of idle connections, and a client that sends and never reads
// (its replies pile up), do not keep another client from being served.
TEST(Serve, IdleAndStalledClientsDoNotBlockOthers) {
  rlimit r{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &r), 0);
  const rlim_t want = 2600;
  if (r.rlim_max != RLIM_INFINITY && r.rlim_max < want) GTEST_SKIP() << "open-file limit too low";
  r.rlim_cur = want;
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &r), 0);
  Serve s;
  s.start("--index btree --max-connections 3000 --threads 2", "idle");
  ASSERT_GT(s.port, 0) << slurp(s.err);
  std::vector<int> idle;
  for (int i = 0; i < 2000; ++i) {
    const int fd = connect_to(s.port);
    ASSERT_GE(fd, 0) << i;
    idle.push_back(fd);
  }
  // The stalled client: 64 KiB values asked for 2,000 times, never read.
  const int stalled = connect_to(s.port);
  ASSERT_GE(stalled, 0);
  EXPECT_EQ(roundtrip(stalled, "set big 0 0 65536\r\n" + std::string(65536, 'b') + "\r\n", "\r\n"),
            "STORED\r\n");
  std::string gets;
  for (int i = 0; i < 2000; ++i) gets += "get big\r\n";
  const int flags = ::fcntl(stalled, F_GETFL);
  ::fcntl(stalled, F_SETFL, flags | O_NONBLOCK);
  size_t sent = 0;
  for (int tries = 0; tries < 200 && sent < gets.size(); ++tries) {
    const ssize_t n = ::write(stalled, gets.data() + sent, gets.size() - sent);
    if (n > 0)
      sent += static_cast<size_t>(n);
    else
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  // Another client is served at once, on a new connection and an idle one.
  EXPECT_EQ(ask(s.port, "set k 0 0 1\r\nv\r\nget k\r\n"), "STORED\r\nVALUE k 0 1\r\nv\r\nEND\r\n");
  EXPECT_EQ(roundtrip(idle[1234], "get k\r\n", "END\r\n"), "VALUE k 0 1\r\nv\r\nEND\r\n");
  // The idle ones, the stalled one and this one (an earlier one may not be
  // closed yet on the server's side).
  const std::string st = ask(s.port, "stats\r\n");
  const size_t at = st.find("STAT curr_connections ");
  ASSERT_NE(at, std::string::npos) << st;
  EXPECT_GE(std::atoi(st.c_str() + at + 22), 2002) << st;
  for (int fd : idle) ::close(fd);
  ::close(stalled);
  EXPECT_EQ(s.stop(SIGTERM), 0);
}

// The server killed with SIGKILL at random instants while clients write:
// after each restart every acknowledged write is there, and of the
// unacknowledged only the one in flight per connection may be.
class ServeTorture : public ::testing::TestWithParam<std::string> {};

TEST_P(ServeTorture, KillTortureLosesNoAcknowledgedWrite) {
  // make test: 6 kills over lbtree; make test-long: 100 over lbtree and
  // over wbtree (the closing measurement: 200 kills, 2 indexes).
  const char* long_env = std::getenv("NVINDEX_TEST_LONG");
  const bool long_run = long_env != nullptr && *long_env == '1';
  if (!long_run && GetParam() != "lbtree") GTEST_SKIP() << "runs in make test-long";
  const TempPoolFile file(tmp("torture-" + GetParam() + ".pool"));
  const std::string& pool = file.path;
  constexpr int kConns = 4;
  const int kKills = long_run ? 100 : 6;
  // Per connection: the acknowledged writes, and the next number to write
  // (after a kill the number in flight is skipped: it may or may not be
  // there, and is never written again).
  std::vector<std::vector<uint64_t>> done(kConns);
  std::vector<uint64_t> next(kConns, 1);
  uint64_t in_flight = 0;  ///< writes in flight at the kills so far
  uint64_t seed = 12345;
  auto key = [](int c, uint64_t i) { return "c" + std::to_string(c) + "-" + std::to_string(i); };
  auto value = [](int c, uint64_t i) { return std::to_string(i * 7919 + c); };
  double recovery_max = 0;
  for (int round = 0; round <= kKills; ++round) {
    Serve s;
    s.start("--index " + GetParam() + " --pool " + pool + " --pool-size 256M --threads 2",
            "torture" + std::to_string(round));
    ASSERT_GT(s.port, 0) << slurp(s.err);
    const std::string o = slurp(s.out);
    const size_t at = o.find("recovery ");
    if (at != std::string::npos)
      recovery_max = std::max(recovery_max, std::atof(o.c_str() + at + 9));
    const int check = connect_to(s.port);
    ASSERT_GE(check, 0);
    for (int c = 0; c < kConns; ++c) {
      // The acknowledged writes, 200 keys to a get.
      for (size_t from = 0; from < done[c].size(); from += 200) {
        std::string req = "get", want;
        for (size_t j = from; j < std::min(done[c].size(), from + 200); ++j) {
          const uint64_t i = done[c][j];
          req += " " + key(c, i);
          want += "VALUE " + key(c, i) + " 0 " + std::to_string(value(c, i).size()) + "\r\n" +
                  value(c, i) + "\r\n";
        }
        ASSERT_EQ(roundtrip(check, req + "\r\n", "END\r\n"), want + "END\r\n")
            << "round " << round << ": an acknowledged write of connection " << c << " lost";
      }
      EXPECT_EQ(ask(s.port, "get " + key(c, next[c] + 1) + "\r\n"), "END\r\n")
          << "round " << round << ": " << key(c, next[c] + 1) << " was never written";
      if (round > 0) {
        next[c] += 1;  // the one in flight at the kill
        ++in_flight;
      }
    }
    ::close(check);
    // Nothing else is there: the items are the acknowledged writes and at
    // most the ones in flight at the kills (a phantom would add to them).
    uint64_t acked_now = 0;
    for (const auto& d : done) acked_now += d.size();
    const std::string st = ask(s.port, "stats\r\n");
    const uint64_t items = nvindex::testing::stat_field(st, "curr_items");
    ASSERT_NE(items, ~0ull) << st;
    EXPECT_GE(items, acked_now) << "round " << round;
    EXPECT_LE(items, acked_now + in_flight) << "round " << round << ": a write nobody made";
    if (round == kKills) {
      EXPECT_EQ(s.stop(SIGTERM), 0);
      break;
    }
    // Writers: one connection each, one write in flight, until the kill.
    std::atomic<bool> dead{false};
    std::vector<std::thread> writers;
    for (int c = 0; c < kConns; ++c) {
      writers.emplace_back([&, c] {
        const int fd = connect_to(s.port);
        if (fd < 0) return;
        while (!dead.load()) {
          const uint64_t i = next[c];
          const std::string v = value(c, i);
          const std::string r = roundtrip(
              fd, "set " + key(c, i) + " 0 0 " + std::to_string(v.size()) + "\r\n" + v + "\r\n",
              "\r\n");
          if (r != "STORED\r\n") break;
          done[c].push_back(i);
          next[c] = i + 1;
        }
        ::close(fd);
      });
    }
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    std::this_thread::sleep_for(std::chrono::milliseconds(100 + (seed >> 33) % 300));
    s.stop(SIGKILL);
    dead = true;
    for (auto& w : writers) w.join();
  }
  uint64_t total = 0;
  for (const auto& d : done) total += d.size();
  EXPECT_GT(total, 100u) << "the writers wrote almost nothing";
  std::printf(
      "[ torture  ] %s: %d kills, %llu acknowledged writes kept, 0 lost, 0 phantom, "
      "recovery at most %.3f s\n",
      GetParam().c_str(), kKills, static_cast<unsigned long long>(total), recovery_max);
}

INSTANTIATE_TEST_SUITE_P(Store, ServeTorture, ::testing::Values("lbtree", "wbtree"),
                         nvindex::testing::IndexParamName());

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

// `nvindex kv-load` fills a pool that `nvindex serve` opens without a crash
// recovery: the items are the KV benchmark's (bench/kv_keys.h), so a key
// computed from (seed, i) is there with its value for i < n and missing
// from i = n on; by bulk load at two fills (lbtree) and by sets (p-masstree:
// no bulk load). An existing pool, an index a store cannot use and a key
// too short to be unique are usage errors that create nothing.
TEST(KvLoad, ServeOpensTheLoadedPoolWithEveryItem) {
  constexpr uint64_t kN = 20000;
  for (const auto& [index, fill] : std::vector<std::pair<std::string, std::string>>{
           {"lbtree", "0.7"}, {"lbtree", "1"}, {"p-masstree", "1"}}) {
    SCOPED_TRACE(index + " fill " + fill);
    const TempPoolFile file(tmp("kvload-" + index + ".pool"));
    const std::string out = tmp("kvload.out");
    const int rc =
        std::system((bin() + " kv-load -q --index " + index + " --fill " + fill + " --seed 7 -n " +
                     std::to_string(kN) + " --pool " + file.path + " >" + out + " 2>&1")
                        .c_str());
    const std::string said = slurp(out);
    std::remove(out.c_str());
    ASSERT_EQ(rc, 0) << said;
    EXPECT_NE(said.find(std::to_string(kN) + " items"), std::string::npos) << said;
    EXPECT_NE(said.find(index == "lbtree" ? "bulk load at fill" : "by sets"), std::string::npos)
        << said;
    EXPECT_NE(said.find("\n  pool pages: "), std::string::npos) << said;
    EXPECT_NE(said.find(" resident"), std::string::npos) << said;
    Serve s;
    s.start("--index " + index + " --pool " + file.path, "kvload");
    ASSERT_GT(s.port, 0) << slurp(s.err);
    EXPECT_NE(ask(s.port, "stats\r\n").find("STAT curr_items " + std::to_string(kN) + "\r\n"),
              std::string::npos);
    EXPECT_NE(ask(s.port, "stats\r\n").find("STAT last_shutdown_clean yes"), std::string::npos);
    // The pool's pages: a page size (4 KiB, or a hugetlbfs's) and the
    // loaded pool resident (its items were just read back by the store's
    // recovery walk).
    {
      const std::string st = ask(s.port, "stats\r\n");
      const size_t at = st.find("STAT pool_page_bytes ");
      ASSERT_NE(at, std::string::npos) << st;
      EXPECT_GE(std::stoull(st.substr(at + 21)), 4096u) << st;
      const size_t res = st.find("STAT pool_resident_bytes ");
      ASSERT_NE(res, std::string::npos) << st;
      EXPECT_GT(std::stoull(st.substr(res + 25)), 0u) << st;
      EXPECT_NE(st.find("STAT pool_huge_bytes "), std::string::npos) << st;
    }
    const int fd = connect_to(s.port);
    ASSERT_GE(fd, 0);
    for (uint64_t i = 0; i < kN; i += 97) {
      const std::string k = nvindex::bench::kv_key(7, i, nvindex::bench::kKvDefaultKeySize);
      std::string v(10, '\0');
      nvindex::bench::kv_value(k, 10, v.data());
      ASSERT_EQ(roundtrip(fd, "get " + k + "\r\n", "END\r\n"),
                "VALUE " + k + " 0 10\r\n" + v + "\r\nEND\r\n")
          << i;
    }
    for (uint64_t i = kN; i < kN + 50; ++i) {
      const std::string k = nvindex::bench::kv_key(7, i, nvindex::bench::kKvDefaultKeySize);
      ASSERT_EQ(roundtrip(fd, "get " + k + "\r\n", "END\r\n"), "END\r\n") << i;
    }
    ::close(fd);
    EXPECT_EQ(s.stop(SIGTERM), 0) << slurp(s.err);
  }
  const TempPoolFile file(tmp("kvload-bad.pool"));
  for (const std::string& args : {std::string("--index dash-eh"), std::string("--index btree"),
                                  std::string("--key-size 10")}) {
    SCOPED_TRACE(args);
    EXPECT_EQ(WEXITSTATUS(std::system(
                  (bin() + " kv-load -q -n 10 " + args + " --pool " + file.path + " 2>/dev/null")
                      .c_str())),
              2);
    EXPECT_FALSE(std::ifstream(file.path).good()) << "nothing created";
  }
  std::ofstream(file.path) << "x";
  EXPECT_EQ(WEXITSTATUS(std::system(
                (bin() + " kv-load -q -n 10 --pool " + file.path + " 2>/dev/null").c_str())),
            2);
  EXPECT_EQ(slurp(file.path), "x");
}

// `nvindex kv-client` (libmemcached) against a loaded server: gets of
// loaded items all hit with their values, at 1 and 2 threads; sets insert
// fresh items (curr_items grows by --ops); a mix; a load fills a server
// that had nothing; asking for items past those loaded is a miss and exit
// 1; no server is an error and exit 1; a bad --server is a usage error.
TEST(KvClient, GetsFindTheLoadedItemsAndSetsInsert) {
  constexpr uint64_t kN = 20000;
  const TempPoolFile file(tmp("kvclient.pool"));
  ASSERT_EQ(std::system((bin() + " kv-load -q --seed 5 -n " + std::to_string(kN) + " --pool " +
                         file.path + " >/dev/null 2>&1")
                            .c_str()),
            0);
  Serve s;
  s.start("--index lbtree --threads 2 --pool " + file.path, "kvclient");
  ASSERT_GT(s.port, 0) << slurp(s.err);
  const std::string out = tmp("kvclient.out");
  const auto client = [&](const std::string& args) {
    const int rc = std::system((bin() + " kv-client -q --format json --seed 5 --server 127.0.0.1:" +
                                std::to_string(s.port) + " " + args + " >" + out + " 2>&1")
                                   .c_str());
    return std::make_pair(WEXITSTATUS(rc), slurp(out));
  };
  // A field of kv-client's JSON report; -1 when the output is no report.
  const auto field = [](const std::string& json, const std::string& name) {
    const auto j = nlohmann::json::parse(json, nullptr, false);
    return j.is_object() && j.contains(name) && j[name].is_number() ? j[name].get<double>() : -1.0;
  };
  for (const char* threads : {"1", "2"}) {
    const auto [rc, said] =
        client("--op get --ops 4000 -n 20000 --threads " + std::string(threads));
    EXPECT_EQ(rc, 0) << said;
    EXPECT_EQ(field(said, "gets"), 4000) << said;
    EXPECT_EQ(field(said, "misses"), 0) << said;
    EXPECT_EQ(field(said, "wrong_values"), 0) << said;
    EXPECT_GT(field(said, "ops_per_second"), 0) << said;
    EXPECT_GT(field(said, "p50_us"), 0) << said;
  }
  {
    const auto [rc, said] = client("--op set --ops 3000 -n 20000 --threads 2");
    EXPECT_EQ(rc, 0) << said;
    EXPECT_EQ(field(said, "sets"), 3000) << said;
  }
  EXPECT_NE(ask(s.port, "stats\r\n").find("STAT curr_items 23000\r\n"), std::string::npos);
  {
    const auto [rc, said] =
        client("--op mix --get-ratio 0.5 --fresh-offset 1000000 --ops 2000 -n 20000");
    EXPECT_EQ(rc, 0) << said;
    EXPECT_GT(field(said, "gets"), 800) << said;
    EXPECT_GT(field(said, "sets"), 800) << said;
    EXPECT_EQ(field(said, "gets") + field(said, "sets"), 2000) << said;
  }
  {
    const auto [rc, said] = client("--op get --ops 2000 -n 40000");
    EXPECT_EQ(rc, 1) << said;
    EXPECT_GT(field(said, "misses"), 500) << said;
    EXPECT_EQ(field(said, "wrong_values"), 0) << said;
  }
  EXPECT_EQ(s.stop(SIGTERM), 0) << slurp(s.err);
  // load into a server with nothing, then every item is there
  const TempPoolFile empty(tmp("kvclient-empty.pool"));
  Serve e;
  e.start("--index fptree --pool " + empty.path, "kvclient-empty");
  ASSERT_GT(e.port, 0) << slurp(e.err);
  s.port = e.port;
  {  // pipelined: 64 sets per write, every reply checked
    const auto [rc, said] = client("--op load -n 3000 --threads 2 --pipeline 64 --value-size 100");
    EXPECT_EQ(rc, 0) << said;
    EXPECT_EQ(field(said, "sets"), 3000) << said;
  }
  EXPECT_NE(ask(e.port, "stats\r\n").find("STAT curr_items 3000\r\n"), std::string::npos);
  {  // 3,000 random gets of the pipelined items: found, with their values
    const auto [rc, said] = client("--op get --ops 3000 -n 3000 --value-size 100");
    EXPECT_EQ(rc, 0) << said;
    EXPECT_EQ(field(said, "misses"), 0) << said;
    EXPECT_EQ(field(said, "wrong_values"), 0) << said;
  }
  {  // through libmemcached: the same 3000 again and 500 more
    const auto [rc, said] = client("--op load -n 3500 --value-size 100");
    EXPECT_EQ(rc, 0) << said;
    EXPECT_EQ(field(said, "sets"), 3500) << said;
  }
  EXPECT_NE(ask(e.port, "stats\r\n").find("STAT curr_items 3500\r\n"), std::string::npos);
  {
    const auto [rc, said] = client("--op get --ops 3000 -n 3500 --value-size 100");
    EXPECT_EQ(rc, 0) << said;
    EXPECT_EQ(field(said, "misses"), 0) << said;
  }
  EXPECT_EQ(e.stop(SIGTERM), 0) << slurp(e.err);
  // nothing listening: errors, exit 1; a bad --server: usage
  {
    const auto [rc, said] = client("--op get --ops 10 -n 10");  // e has stopped
    EXPECT_EQ(rc, 1) << said;
    EXPECT_GT(field(said, "errors"), 0) << said;
  }
  EXPECT_EQ(WEXITSTATUS(std::system((bin() + " kv-client --server nowhere 2>/dev/null").c_str())),
            2);
  std::remove(out.c_str());
}

// The keys' generator: distinct for distinct items (the bijective part),
// printable and without a space, the same for the same (seed, i).
TEST(KvLoad, KeysAreDistinctPrintableAndReproducible) {
  std::vector<std::string> keys;
  for (uint64_t i = 0; i < 200000; ++i) keys.push_back(nvindex::bench::kv_key(3, i, 20));
  for (const std::string& k : keys) {
    ASSERT_EQ(k.size(), 20u);
    for (char c : k) ASSERT_TRUE(std::isalnum(static_cast<unsigned char>(c))) << k;
  }
  EXPECT_EQ(nvindex::bench::kv_key(3, 12345, 20), keys[12345]);
  EXPECT_NE(nvindex::bench::kv_key(4, 12345, 20), keys[12345]);
  std::sort(keys.begin(), keys.end());
  EXPECT_EQ(std::adjacent_find(keys.begin(), keys.end()), keys.end());
  EXPECT_EQ(nvindex::bench::kv_key(3, 9, 11), nvindex::bench::kv_key(3, 9, 20).substr(0, 11));
}

}  // namespace
