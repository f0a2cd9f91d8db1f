// The memcached ASCII protocol (src/server/): bytes in, bytes out through a
// Session over a store on an anonymous pool, as a connection would see it:
// every command's reply, noreply, pipelining and requests split at every
// byte, and the bad input memcached answers with an error (docs/kv.md "The
// protocol"): keys too long or with a NUL or CR, bad numbers, a data
// block longer or shorter than announced, one above the largest value
// (refused and swallowed, the old item kept), a line without a newline past
// the limit, binary garbage, a full pool.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "nvindex/kv.h"
#include "nvindex/pm/pool.h"
#include "server/process.h"
#include "server/protocol.h"
#include "support/socket_client.h"

namespace nvindex::server {
namespace {

constexpr int64_t kNow = 1'800'000'000;

class Protocol : public ::testing::Test {
 protected:
  void SetUp() override { open(64ull << 20); }

  void open(uint64_t pool_bytes, uint32_t max_value = 1u << 20) {
    store_.reset();
    pool_.reset();
    ASSERT_TRUE(pm::Pool::create_anonymous(pool_bytes, kv::Store::layout("lbtree"), &pool_).ok());
    kv::Options o;
    o.index = "lbtree";
    o.max_value_bytes = max_value;
    o.clock = [this] { return now_; };
    ASSERT_TRUE(kv::Store::open(pool_.get(), o, &store_).ok());
    state_ = std::make_unique<ServerState>();
    state_->store = store_.get();
    state_->max_value_bytes = max_value;
    state_->started = kNow - 5;
    session_ = std::make_unique<Session>(*state_);
  }

  /// Feeds `in` whole; returns the replies.
  std::string send(std::string_view in) {
    std::string out;
    last_ = session_->feed(in, now_, &out);
    return out;
  }
  /// Feeds `in` one byte at a time; returns the replies.
  std::string trickle(std::string_view in) {
    std::string out;
    for (char c : in) last_ = session_->feed(std::string_view(&c, 1), now_, &out);
    return out;
  }

  int64_t now_ = kNow;
  std::unique_ptr<pm::Pool> pool_;
  std::unique_ptr<kv::Store> store_;
  std::unique_ptr<ServerState> state_;
  std::unique_ptr<Session> session_;
  After last_ = After::kContinue;
};

TEST_F(Protocol, StorageAndRetrieval) {
  EXPECT_EQ(send("set k 5 0 3\r\nabc\r\n"), "STORED\r\n");
  EXPECT_EQ(send("get k\r\n"), "VALUE k 5 3\r\nabc\r\nEND\r\n");
  const std::string gets = send("gets k\r\n");
  EXPECT_TRUE(gets.starts_with("VALUE k 5 3 ")) << gets;
  const std::string cas = gets.substr(12, gets.find("\r\n") - 12);
  EXPECT_EQ(send("cas k 0 0 1 " + cas + "\r\nx\r\n"), "STORED\r\n");
  EXPECT_EQ(send("cas k 0 0 1 " + cas + "\r\ny\r\n"), "EXISTS\r\n");
  EXPECT_EQ(send("cas nope 0 0 1 1\r\ny\r\n"), "NOT_FOUND\r\n");
  EXPECT_EQ(send("add k 0 0 1\r\nz\r\n"), "NOT_STORED\r\n");
  EXPECT_EQ(send("replace nope 0 0 1\r\nz\r\n"), "NOT_STORED\r\n");
  EXPECT_EQ(send("append k 0 0 2\r\n++\r\n"), "STORED\r\n");
  EXPECT_EQ(send("prepend k 0 0 2\r\n--\r\n"), "STORED\r\n");
  EXPECT_EQ(send("append nope 0 0 1\r\nz\r\n"), "NOT_STORED\r\n");
  EXPECT_EQ(send("get k nope k\r\n"), "VALUE k 0 5\r\n--x++\r\nVALUE k 0 5\r\n--x++\r\nEND\r\n");
  EXPECT_EQ(send("delete k\r\n"), "DELETED\r\n");
  EXPECT_EQ(send("delete k\r\n"), "NOT_FOUND\r\n");
  EXPECT_EQ(send("set e 0 0 0\r\n\r\n"), "STORED\r\n");  // an empty value
  EXPECT_EQ(send("get e\r\n"), "VALUE e 0 0\r\n\r\nEND\r\n");
  EXPECT_EQ(send("set bare 0 0 1\nq\r\nget bare\n"), "STORED\r\nVALUE bare 0 1\r\nq\r\nEND\r\n");
}

TEST_F(Protocol, PipelinedAndSplitAtEveryByte) {
  const std::string in =
      "set a 1 0 2\r\nxy\r\nset b 2 0 0\r\n\r\nget a b c\r\nincr n 1\r\ndelete a\r\nmn\r\n";
  const std::string want =
      "STORED\r\nSTORED\r\nVALUE a 1 2\r\nxy\r\nVALUE b 2 0\r\n\r\nEND\r\nNOT_FOUND\r\n"
      "DELETED\r\nMN\r\n";
  EXPECT_EQ(trickle(in), want);
  EXPECT_EQ(session_->pending(), 0u);
  EXPECT_EQ(send(in), want);
}

TEST_F(Protocol, NoreplySendsNothing) {
  EXPECT_EQ(send("set k 0 0 1 noreply\r\na\r\nadd k 0 0 1 noreply\r\nb\r\n"
                 "incr k 1 noreply\r\ntouch k 10 noreply\r\ndelete k noreply\r\n"
                 "flush_all noreply\r\nflush_all 0 noreply\r\nverbosity 1 noreply\r\n"
                 "verbosity noreply\r\nset k bad 0 1 noreply\r\nz\r\nversion\r\n"),
            "VERSION 1.6.0\r\n");
}

TEST_F(Protocol, IncrDecrTouchGatFlush) {
  EXPECT_EQ(send("set n 0 0 2\r\n10\r\nincr n 5\r\ndecr n 100\r\n"), "STORED\r\n15\r\n0\r\n");
  EXPECT_EQ(send("set n 0 0 20\r\n18446744073709551615\r\nincr n 1\r\n"), "STORED\r\n0\r\n");
  EXPECT_EQ(send("incr n abc\r\n"), "CLIENT_ERROR invalid numeric delta argument\r\n");
  EXPECT_EQ(send("incr n -1\r\n"), "CLIENT_ERROR invalid numeric delta argument\r\n");
  EXPECT_EQ(send("set s 0 0 1\r\nx\r\nincr s 1\r\n"),
            "STORED\r\nCLIENT_ERROR cannot increment or decrement non-numeric value\r\n");
  EXPECT_EQ(send("incr nope 1\r\n"), "NOT_FOUND\r\n");
  EXPECT_EQ(send("set t 0 10 1\r\nx\r\ntouch t 100\r\ntouch nope 1\r\n"),
            "STORED\r\nTOUCHED\r\nNOT_FOUND\r\n");
  EXPECT_EQ(send("touch t abc\r\n"), "CLIENT_ERROR invalid exptime argument\r\n");
  now_ += 50;
  EXPECT_EQ(send("gat 1 t\r\n"), "VALUE t 0 1\r\nx\r\nEND\r\n");
  now_ += 2;
  EXPECT_EQ(send("get t\r\n"), "END\r\n");
  EXPECT_EQ(send("gat abc t\r\n"), "CLIENT_ERROR invalid exptime argument\r\n");
  // A negative expiry returns the item, then it is gone (memcached 1.6.18).
  EXPECT_EQ(send("set u 0 0 1\r\ny\r\ngat -1 u\r\nget u\r\n"),
            "STORED\r\nVALUE u 0 1\r\ny\r\nEND\r\nEND\r\n");
  EXPECT_EQ(send("set f 0 0 1\r\nx\r\nflush_all\r\nget f\r\n"), "STORED\r\nOK\r\nEND\r\n");
  EXPECT_EQ(send("flush_all x\r\n"), "CLIENT_ERROR invalid exptime argument\r\n");
  EXPECT_EQ(send("set g 0 0 1\r\nx\r\nflush_all 10\r\nget g\r\n"),
            "STORED\r\nOK\r\nVALUE g 0 1\r\nx\r\nEND\r\n");
  now_ += 11;
  EXPECT_EQ(send("get g\r\n"), "END\r\n");
}

TEST_F(Protocol, BadCommandLines) {
  EXPECT_EQ(send("bogus\r\n"), "ERROR\r\n");
  EXPECT_EQ(send("GET k\r\n"), "ERROR\r\n");  // commands are lower case
  EXPECT_EQ(send("\r\n"), "CLIENT_ERROR bad command line format\r\n");
  EXPECT_EQ(send("get\r\n"), "CLIENT_ERROR bad command line format\r\n");
  EXPECT_EQ(send("gets\r\n"), "CLIENT_ERROR bad command line format\r\n");
  EXPECT_EQ(send("delete\r\n"), "CLIENT_ERROR bad command line format\r\n");
  EXPECT_EQ(send("delete a b c d e\r\n"), "ERROR\r\n");
  EXPECT_EQ(send("delete a 5\r\n"),
            "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\n");
  EXPECT_EQ(send("delete a 0\r\n"), "NOT_FOUND\r\n");
  EXPECT_EQ(send("verbosity\r\n"), "CLIENT_ERROR bad command line format\r\n");
  EXPECT_EQ(send("verbosity 1\r\n"), "OK\r\n");
  EXPECT_EQ(send("stats noreply\r\n"), "ERROR\r\n");
  EXPECT_EQ(send("version foo bar\r\n"), "VERSION 1.6.0\r\n");
  const std::string k251(251, 'k');
  EXPECT_EQ(send("get " + k251 + "\r\n"), "CLIENT_ERROR bad command line format\r\n");
  EXPECT_EQ(send(std::string("get a\0b\r\n", 9)), "CLIENT_ERROR bad command line format\r\n");
  EXPECT_EQ(send("get a\rb\r\n"), "CLIENT_ERROR bad command line format\r\n");
  // Other control characters are key bytes, as memcached takes them
  // (memcaslap's keys start with eight 0x10 bytes).
  EXPECT_EQ(send("set \x10\x10k\t 0 0 1\r\nv\r\nget \x10\x10k\t\r\n"),
            "STORED\r\nVALUE \x10\x10k\t 0 1\r\nv\r\nEND\r\n");
  // A refused storage line swallows its data block (memcached 1.6)...
  EXPECT_EQ(send("set " + k251 + " 0 0 1\r\nx\r\nset k 0 0 1\r\ny\r\n"),
            "CLIENT_ERROR bad command line format\r\nSTORED\r\n");
  EXPECT_EQ(send("set k -1 0 1\r\nx\r\n"), "CLIENT_ERROR bad command line format\r\n");
  EXPECT_EQ(send("set k 4294967296 0 1\r\nx\r\n"), "CLIENT_ERROR bad command line format\r\n");
  EXPECT_EQ(send("set k 0 zz 1\r\nx\r\n"), "CLIENT_ERROR bad command line format\r\n");
  EXPECT_EQ(send("cas k 0 0 1\r\nx\r\n"), "CLIENT_ERROR bad command line format\r\n");
  // ...but not a bad length: the data is then read as a command.
  EXPECT_EQ(send("set k 0 0 -1\r\nx\r\n"), "CLIENT_ERROR bad command line format\r\nERROR\r\n");
  EXPECT_EQ(send("set k 0 0\r\n"), "CLIENT_ERROR bad command line format\r\n");
  EXPECT_EQ(send("get k\r\n"), "VALUE k 0 1\r\ny\r\nEND\r\n");
  EXPECT_EQ(send("rget a\r\n"), "CLIENT_ERROR bad command line format\r\n");
}

TEST_F(Protocol, DataBlocksLongerShorterOrTooLarge) {
  EXPECT_EQ(send("set k 0 0 1\r\nv\r\n"), "STORED\r\n");
  // Longer than announced: bad data chunk; the rest is the next line.
  EXPECT_EQ(send("set k 0 0 1\r\nabc\r\n"),
            "CLIENT_ERROR bad data chunk\r\nCLIENT_ERROR bad command line format\r\n");
  // Shorter: the next line's bytes complete the block, then the check fails.
  EXPECT_EQ(send("set k 0 0 5\r\nab\r\nget k\r\n"), "CLIENT_ERROR bad data chunk\r\nERROR\r\n");
  EXPECT_EQ(send("get k\r\n"), "VALUE k 0 1\r\nv\r\nEND\r\n");
  // Above the largest value: refused before any of it is read, swallowed
  // as it arrives (here in three pieces), the old item kept.
  open(64ull << 20, 1000);
  EXPECT_EQ(send("set k 0 0 1\r\nv\r\n"), "STORED\r\n");
  const std::string big(1001, 'x');
  std::string out = send("set k 0 0 1001\r\n" + big.substr(0, 400));
  out += send(big.substr(400, 500));
  out += send(big.substr(900) + "\r\nget k\r\n");
  EXPECT_EQ(out, "SERVER_ERROR object too large for cache\r\nVALUE k 0 1\r\nv\r\nEND\r\n");
  EXPECT_EQ(send("append k 0 0 1000\r\n" + std::string(1000, 'y') + "\r\n"),
            "SERVER_ERROR object too large for cache\r\n");
  EXPECT_EQ(state_->store_too_large.load(), 1u);
}

TEST_F(Protocol, LongLinesAndGarbage) {
  // No newline past 2048 bytes: an error, then the connection closes.
  EXPECT_EQ(send(std::string(2049, 'a')), "CLIENT_ERROR line too long\r\n");
  EXPECT_EQ(last_, After::kClose);
  open(64ull << 20);
  // A get line may be longer (many keys).
  std::string get = "get";
  for (int i = 0; i < 400; ++i) get += " key" + std::to_string(i);
  EXPECT_EQ(send(get + "\r\n"), "END\r\n");
  // Binary garbage: errors, no crash, the session goes on.
  std::string junk;
  for (int i = 0; i < 4096; ++i) junk.push_back(static_cast<char>((i * 131 + 7) % 256));
  std::string out = send(junk + "\r\n");
  EXPECT_NE(out.find("ERROR"), std::string::npos);
  if (last_ == After::kContinue) {
    EXPECT_EQ(send("version\r\n"), "VERSION 1.6.0\r\n");
  }
}

TEST_F(Protocol, QuitClosesAndStatsReport) {
  EXPECT_EQ(send("set k 0 0 1\r\nv\r\nget k nope\r\n"), "STORED\r\nVALUE k 0 1\r\nv\r\nEND\r\n");
  const std::string stats = send("stats\r\n");
  for (const char* field : {"STAT pid ", "STAT uptime 5\r\n", "STAT version 1.6.0\r\n",
                            "STAT curr_items 1\r\n", "STAT total_items 1\r\n", "STAT cmd_get 2\r\n",
                            "STAT get_hits 1\r\n", "STAT get_misses 1\r\n", "STAT cmd_set 1\r\n",
                            "STAT index lbtree\r\n", "STAT recovery_seconds ", "STAT bytes "}) {
    EXPECT_NE(stats.find(field), std::string::npos) << field << " in\n" << stats;
  }
  EXPECT_TRUE(stats.ends_with("END\r\n"));
  // The PM counters move with a set: its item record and the index's leaf
  // are at least two flushed lines, each persist a fence.
  using nvindex::testing::stat_field;
  EXPECT_NE(stat_field(stats, "pm_naws"), ~0ull) << stats;
  const std::string after = send("set k2 0 0 1\r\nw\r\nstats\r\n");
  ASSERT_TRUE(after.starts_with("STORED\r\n")) << after;
  EXPECT_GE(stat_field(after, "pm_lines_flushed"), stat_field(stats, "pm_lines_flushed") + 2)
      << after;
  EXPECT_GE(stat_field(after, "pm_flushes"), stat_field(stats, "pm_flushes") + 2) << after;
  EXPECT_GE(stat_field(after, "pm_fences"), stat_field(stats, "pm_fences") + 1) << after;
  EXPECT_EQ(send("quit\r\nget k\r\n"), "");
  EXPECT_EQ(last_, After::kClose);
}

TEST_F(Protocol, MetaCommands) {
  EXPECT_EQ(send("ms k 2 F7 T0\r\nhi\r\n"), "HD\r\n");
  EXPECT_EQ(send("mg k v f s k Oab\r\n"), "VA 2 f7 s2 kk Oab\r\nhi\r\n");
  EXPECT_EQ(send("mg nope v\r\n"), "EN\r\n");
  EXPECT_EQ(send("mg nope v q\r\nmn\r\n"), "MN\r\n");
  EXPECT_EQ(send("ms k 1 q\r\nx\r\nmn\r\n"), "MN\r\n");
  EXPECT_EQ(send("ms k 1 ME\r\ny\r\n"), "NS\r\n");  // add mode on a present key
  EXPECT_EQ(send("ms k 1 MX\r\ny\r\n"), "CLIENT_ERROR invalid mode for ms M token\r\n");
  const std::string got = send("mg k c\r\n");
  const std::string cas = got.substr(4, got.find("\r\n") - 4);
  EXPECT_EQ(send("ms k 1 C" + cas + "\r\nz\r\n"), "HD\r\n");
  EXPECT_EQ(send("ms k 1 C" + cas + "\r\nw\r\n"), "EX\r\n");
  EXPECT_EQ(send("ms k 1 MA\r\n+\r\nmg k v\r\n"), "HD\r\nVA 2\r\nz+\r\n");
  EXPECT_EQ(send("ma n\r\n"), "NF\r\n");
  EXPECT_EQ(send("ma n N0 J10 v\r\n"), "VA 2\r\n10\r\n");
  EXPECT_EQ(send("ma n D5 v\r\nma n MD D100 v\r\n"), "VA 2\r\n15\r\nVA 1\r\n0\r\n");
  EXPECT_EQ(send("ma n Mx\r\n"), "CLIENT_ERROR invalid mode for ma M token\r\n");
  EXPECT_EQ(send("md k q\r\nmd k\r\nmn\r\n"), "NF\r\nMN\r\n");
  EXPECT_EQ(send("mg k zz\r\n"), "CLIENT_ERROR invalid flag\r\n");
  EXPECT_EQ(send("mg k v v\r\n"), "CLIENT_ERROR duplicate flag\r\n");
  EXPECT_EQ(send("me nope\r\n"), "EN\r\n");
}

TEST_F(Protocol, RangeReadsFollowMemcacheDb) {
  for (const char* k : {"a", "b", "c", "d", "e"}) {
    ASSERT_EQ(send(std::string("set ") + k + " 0 0 1\r\n" + k + "\r\n"), "STORED\r\n");
  }
  auto keys = [&](const std::string& cmd) {
    std::string out = send(cmd + "\r\n"), ks;
    for (size_t p = out.find("VALUE "); p != std::string::npos; p = out.find("VALUE ", p + 1)) {
      ks += out[p + 6];
    }
    EXPECT_TRUE(out.ends_with("END\r\n")) << out;
    return ks;
  };
  EXPECT_EQ(keys("rget b d 0 0 100"), "bcd");
  EXPECT_EQ(keys("rget b d 1 0 100"), "cd");
  EXPECT_EQ(keys("rget b d 0 1 100"), "bc");
  EXPECT_EQ(keys("rget b d 1 1 100"), "c");
  EXPECT_EQ(keys("rget a e 0 0 2"), "ab");
  EXPECT_EQ(send("rget a e 2 0 5\r\n"), "CLIENT_ERROR bad command line format\r\n");
  EXPECT_EQ(send("rget a e 0 0 0\r\n"), "CLIENT_ERROR bad command line format\r\n");
}

TEST_F(Protocol, AFullPoolAnswersOutOfMemoryAndKeepsEverything) {
  open(8ull << 20);
  int stored = 0;
  std::string last;
  for (int i = 0; i < 20000; ++i) {
    last = send("set k" + std::to_string(i) + " 0 0 3000\r\n" + std::string(3000, 'v') + "\r\n");
    if (last != "STORED\r\n") break;
    ++stored;
  }
  EXPECT_EQ(last, "SERVER_ERROR out of memory storing object\r\n");
  EXPECT_GT(stored, 100);
  for (int i = 0; i < stored; i += 37) {
    EXPECT_EQ(
        send("get k" + std::to_string(i) + "\r\n"),
        "VALUE k" + std::to_string(i) + " 0 3000\r\n" + std::string(3000, 'v') + "\r\nEND\r\n");
  }
  EXPECT_EQ(state_->store_no_memory.load(), 1u);
}

}  // namespace
}  // namespace nvindex::server
