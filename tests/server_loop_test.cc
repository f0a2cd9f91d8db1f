// The server's event loop in process (src/server/server.h), so that it runs
// under ThreadSanitizer too: clients on four threads set and get over their
// own connections to a server with two worker threads, every reply checked;
// the connection counts; stopping with clients still connected; a port in
// use is an IOError naming it.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "nvindex/kv.h"
#include "nvindex/pm/pool.h"
#include "server/server.h"
#include "support/socket_client.h"

namespace nvindex::server {
namespace {

using nvindex::testing::connect_to;
using nvindex::testing::roundtrip;

struct Fixture {
  std::unique_ptr<pm::Pool> pool;
  std::unique_ptr<kv::Store> store;
  ServerState state;
  std::unique_ptr<Server> server;

  explicit Fixture(unsigned threads) {
    EXPECT_TRUE(pm::Pool::create_anonymous(64ull << 20, kv::Store::layout("lbtree"), &pool).ok());
    kv::Options o;
    o.index = "lbtree";
    o.threads = threads + 1;
    EXPECT_TRUE(kv::Store::open(pool.get(), o, &store).ok());
    state.store = store.get();
    state.threads = threads;
    ServerOptions so;
    so.port = 0;
    so.threads = threads;
    const Status s = Server::start(&state, so, &server);
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  ~Fixture() {
    server.reset();  // before the store
    store.reset();
  }
};

TEST(ServerLoop, ClientsOnSeveralThreadsGetTheirOwnReplies) {
  Fixture f(2);
  ASSERT_NE(f.server, nullptr);
  std::atomic<int> bad{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 4; ++t) {
    clients.emplace_back([&, t] {
      const int fd = connect_to(f.server->port());
      if (fd < 0) {
        ++bad;
        return;
      }
      for (int i = 0; i < 300; ++i) {
        const std::string k = "t" + std::to_string(t) + "-" + std::to_string(i % 50);
        const std::string v = std::to_string(i * 31 + t);
        if (roundtrip(fd, "set " + k + " 0 0 " + std::to_string(v.size()) + "\r\n" + v + "\r\n",
                      "\r\n") != "STORED\r\n") {
          ++bad;
        }
        if (roundtrip(fd, "get " + k + "\r\n", "END\r\n") !=
            "VALUE " + k + " 0 " + std::to_string(v.size()) + "\r\n" + v + "\r\nEND\r\n") {
          ++bad;
        }
      }
      ::close(fd);
    });
  }
  for (auto& c : clients) c.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(f.state.total_connections.load(), 4u);
  EXPECT_EQ(f.store->stats().curr_items, 200u);
}

TEST(ServerLoop, StopsWithClientsConnected) {
  Fixture f(2);
  ASSERT_NE(f.server, nullptr);
  std::vector<int> fds;
  for (int i = 0; i < 20; ++i) fds.push_back(connect_to(f.server->port()));
  EXPECT_EQ(roundtrip(fds[3], "version\r\n", "\r\n"), "VERSION 1.6.0\r\n");
  f.server.reset();  // closes every connection, joins the threads
  char c = 0;
  EXPECT_LE(::read(fds[3], &c, 1), 0);  // closed by the server
  for (int fd : fds) ::close(fd);
  EXPECT_EQ(f.state.curr_connections.load(), 0u);
}

TEST(ServerLoop, APortInUseIsAnIoErrorNamingIt) {
  Fixture f(1);
  ASSERT_NE(f.server, nullptr);
  ServerOptions so;
  so.port = f.server->port();
  so.threads = 1;
  ServerState other;
  other.store = f.store.get();
  std::unique_ptr<Server> second;
  const Status s = Server::start(&other, so, &second);
  EXPECT_EQ(s.code(), Code::kIOError) << s.ToString();
  EXPECT_NE(s.message().find(std::to_string(so.port)), std::string::npos) << s.ToString();
  so.listen = "not-an-address";
  EXPECT_EQ(Server::start(&other, so, &second).code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace nvindex::server
