// Persist primitives and counters: mode and latency parsing, the flush
// instruction choice, exact counts of flushes/lines/fences/NAWs/nt bytes,
// nt_copy correctness at every alignment, snapshot sums over live and exited
// threads, dram mode counting nothing, the media model (XPLine buffer and
// modelled cache), and latency injection (lower bounds only).
#include <cpuid.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include "nvindex/pm/counters.h"
#include "nvindex/pm/persist.h"

namespace nvindex::pm {
namespace {

/// Restores the default configuration after each test.
class Persist : public ::testing::Test {
 protected:
  void SetUp() override { configure(PersistConfig{}); }
  void TearDown() override { configure(PersistConfig{}); }
};

/// A buffer of `n` bytes aligned to 4096, zeroed.
struct Aligned {
  explicit Aligned(size_t n) : p(static_cast<char*>(std::aligned_alloc(4096, n))), size(n) {
    std::memset(p, 0, n);
  }
  ~Aligned() { std::free(p); }
  char* p;
  size_t size;
};

TEST_F(Persist, ParseMode) {
  for (std::string_view name : {"dram", "emulated", "dax", "crash-sim"}) {
    Mode m = Mode::kDram;
    ASSERT_TRUE(parse_mode(name, &m).ok()) << name;
    EXPECT_EQ(mode_name(m), name);
  }
  Mode m = Mode::kDax;
  const Status s = parse_mode("pmem", &m);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("'pmem'"), std::string::npos);
  EXPECT_NE(s.message().find("crash-sim"), std::string::npos);
  EXPECT_EQ(m, Mode::kDax);  // untouched on error
  EXPECT_EQ(parse_mode("", &m).code(), Code::kInvalidArgument);
  EXPECT_EQ(parse_mode("DRAM", &m).code(), Code::kInvalidArgument);
}

TEST_F(Persist, ParseLatency) {
  PersistConfig c;
  ASSERT_TRUE(parse_latency("flush=300,fence=100", &c).ok());
  EXPECT_EQ(c.flush_latency_ns, 300u);
  EXPECT_EQ(c.fence_latency_ns, 100u);
  PersistConfig d;
  ASSERT_TRUE(parse_latency("fence=7", &d).ok());
  EXPECT_EQ(d.flush_latency_ns, 0u);
  EXPECT_EQ(d.fence_latency_ns, 7u);
  ASSERT_TRUE(parse_latency("fence=1,flush=2", &d).ok());
  EXPECT_EQ(d.flush_latency_ns, 2u);
  EXPECT_EQ(d.fence_latency_ns, 1u);
  EXPECT_EQ(d.media_write_latency_ns, 0u);
  EXPECT_FALSE(d.media_model);
  PersistConfig m;
  ASSERT_TRUE(parse_latency("media=500,flush=3", &m).ok());
  EXPECT_EQ(m.media_write_latency_ns, 500u);
  EXPECT_EQ(m.flush_latency_ns, 3u);
  EXPECT_TRUE(m.media_model) << "media=N must turn the media model on";
  PersistConfig z;
  ASSERT_TRUE(parse_latency("media=0", &z).ok());
  EXPECT_FALSE(z.media_model);
  for (std::string_view bad :
       {"", "flush", "flush=", "flush=abc", "flush=-1", "flush=1.5", "flush=1,", ",fence=1",
        "flush=1,flush=2", "media=1,media=2", "media=", "latency=3", "flush=99999999999",
        "flush = 1", "fence=1;flush=2"}) {
    PersistConfig e;
    e.flush_latency_ns = 11;
    const Status s = parse_latency(bad, &e);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << "'" << bad << "'";
    EXPECT_NE(s.message().find("flush=N,fence=N"), std::string::npos) << s.ToString();
    EXPECT_EQ(e.flush_latency_ns, 11u) << "config changed on error for '" << bad << "'";
  }
}

TEST_F(Persist, ConfigureAndCurrentConfig) {
  PersistConfig c;
  c.mode = Mode::kCrashSim;
  c.flush_latency_ns = 5;
  c.fence_latency_ns = 6;
  c.media_model = true;
  configure(c);
  const PersistConfig got = current_config();
  EXPECT_EQ(got.mode, Mode::kCrashSim);
  EXPECT_EQ(got.flush_latency_ns, 5u);
  EXPECT_EQ(got.fence_latency_ns, 6u);
  EXPECT_TRUE(got.media_model);
  EXPECT_EQ(got.cache_kib, kDefaultCacheKiB);
  EXPECT_TRUE(detail::g.slow_path);
  configure(PersistConfig{});
  EXPECT_FALSE(detail::g.slow_path);
  EXPECT_EQ(current_config().cache_kib, 0u) << "no cache model without the media model";
}

TEST_F(Persist, FlushInstructionMatchesCpuid) {
  unsigned a = 0, b = 0, c = 0, d = 0;
  FlushInstruction want = FlushInstruction::kClflush;
  if (__get_cpuid_max(0, nullptr) >= 7) {
    __cpuid_count(7, 0, a, b, c, d);
    if (b & (1u << 24)) {
      want = FlushInstruction::kClwb;
    } else if (b & (1u << 23)) {
      want = FlushInstruction::kClflushopt;
    }
  }
  EXPECT_EQ(flush_instruction(), want) << flush_instruction_name(flush_instruction());
  EXPECT_EQ(flush_instruction_name(FlushInstruction::kClwb), "clwb");
  EXPECT_EQ(flush_instruction_name(FlushInstruction::kClflushopt), "clflushopt");
  EXPECT_EQ(flush_instruction_name(FlushInstruction::kClflush), "clflush");
}

TEST_F(Persist, FlushCountsLines) {
  Aligned buf(4096);
  CounterSnapshot before = snapshot();
  flush(buf.p + 60, 100);  // [60, 160) overlaps lines 0, 1 and 2
  CounterSnapshot d = snapshot() - before;
  EXPECT_EQ(d.flushes, 3u);
  EXPECT_EQ(d.lines_flushed, 3u);
  EXPECT_EQ(d.fences, 0u);

  before = snapshot();
  flush(buf.p, 100);  // lines 0 and 1
  flush(buf.p + 64, 64);
  flush(buf.p + 63, 1);
  flush(buf.p, 0);
  d = snapshot() - before;
  EXPECT_EQ(d.lines_flushed, 4u);

  before = snapshot();
  persist(buf.p + 128, 256);
  d = snapshot() - before;
  EXPECT_EQ(d.lines_flushed, 4u);
  EXPECT_EQ(d.fences, 1u);
  EXPECT_EQ(d.naws, 0u);
}

// naw's written-out path (one line, one counter lookup) counts exactly what
// persist() of its word counts, plus one NAW: every counter compared, so a
// counter added to flush() or fence() and not to naw() fails here.
TEST_F(Persist, NawCountsAsPersistOfItsWordPlusOneNaw) {
  alignas(64) std::atomic<uint64_t> word{0};
  CounterSnapshot before = snapshot();
  word.store(7, std::memory_order_release);
  persist(&word, sizeof(word));
  const CounterSnapshot p = snapshot() - before;
  before = snapshot();
  naw(&word, 8);
  const CounterSnapshot n = snapshot() - before;
  EXPECT_EQ(word.load(), 8u);
  EXPECT_EQ(p.naws, 0u);
  EXPECT_EQ(n.naws, 1u);
  EXPECT_EQ(n.flushes, p.flushes);
  EXPECT_EQ(n.lines_flushed, p.lines_flushed);
  EXPECT_EQ(n.fences, p.fences);
  EXPECT_EQ(n.nt_bytes, p.nt_bytes);
  EXPECT_EQ(n.log_bytes, p.log_bytes);
  EXPECT_EQ(n.media_writes, p.media_writes);
  EXPECT_EQ(n.lines_written_back, p.lines_written_back);
  EXPECT_EQ(n.flushes, 1u);
  EXPECT_EQ(n.fences, 1u);
}

TEST_F(Persist, NawFenceAndLogCounts) {
  alignas(64) std::atomic<uint64_t> word{0};
  const CounterSnapshot before = snapshot();
  naw(&word, 42);
  fence();
  count_log_bytes(100);
  const CounterSnapshot d = snapshot() - before;
  EXPECT_EQ(word.load(), 42u);
  EXPECT_EQ(d.naws, 1u);
  EXPECT_EQ(d.flushes, 1u);
  EXPECT_EQ(d.fences, 2u);
  EXPECT_EQ(d.log_bytes, 100u);
}

TEST_F(Persist, NtCopyEveryAlignment) {
  Aligned dst(4096);
  std::vector<char> src(1024);
  std::iota(src.begin(), src.end(), 1);
  for (size_t align = 0; align < 24; ++align) {
    for (size_t n : {0, 1, 7, 8, 15, 16, 17, 64, 100, 255, 256, 257, 1000}) {
      std::memset(dst.p, 0x5a, 2048);
      const CounterSnapshot before = snapshot();
      nt_copy(dst.p + align, src.data() + 3, n);
      fence();
      const CounterSnapshot d = snapshot() - before;
      ASSERT_EQ(std::memcmp(dst.p + align, src.data() + 3, n), 0) << align << " " << n;
      ASSERT_EQ(dst.p[align + n], 0x5a) << "wrote past the end";
      if (align > 0) {
        ASSERT_EQ(dst.p[align - 1], 0x5a) << "wrote before the start";
      }
      ASSERT_LE(d.nt_bytes, n);
      ASSERT_EQ(d.nt_bytes % 8, 0u);
    }
  }
  // Aligned 256 B: all of it non-temporal, nothing flushed.
  const CounterSnapshot before = snapshot();
  nt_copy(dst.p, src.data(), 256);
  CounterSnapshot d = snapshot() - before;
  EXPECT_EQ(d.nt_bytes, 256u);
  EXPECT_EQ(d.lines_flushed, 0u);
  // 100 bytes at dst+3: 13 B head (flushed), 80 B movntdq, 7 B tail (flushed).
  const CounterSnapshot b2 = snapshot();
  nt_copy(dst.p + 3, src.data(), 100);
  d = snapshot() - b2;
  EXPECT_EQ(d.nt_bytes, 80u);
  EXPECT_EQ(d.lines_flushed, 2u);  // head in line 0, tail in line 1
}

TEST_F(Persist, SnapshotSumsLiveAndExitedThreads) {
  const CounterSnapshot before = snapshot();
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([] {
      for (int i = 0; i < 10; ++i) fence();
      count_log_bytes(5);
    });
  }
  for (auto& t : threads) t.join();  // the threads have exited
  fence();
  const CounterSnapshot d = snapshot() - before;
  EXPECT_EQ(d.fences, 31u);
  EXPECT_EQ(d.log_bytes, 15u);
  CounterSnapshot sum;
  sum += d;
  sum += d;
  EXPECT_EQ(sum.fences, 62u);
}

TEST_F(Persist, DramModeCountsNothing) {
  PersistConfig c;
  c.mode = Mode::kDram;
  configure(c);
  Aligned buf(4096);
  alignas(64) std::atomic<uint64_t> word{0};
  std::vector<char> src(300, 'q');
  const CounterSnapshot before = snapshot();
  flush(buf.p, 4096);
  fence();
  persist(buf.p, 64);
  naw(&word, 9);
  nt_copy(buf.p + 1, src.data(), src.size());
  const CounterSnapshot d = snapshot() - before;
  EXPECT_EQ(word.load(), 9u);
  EXPECT_EQ(std::memcmp(buf.p + 1, src.data(), src.size()), 0);
  EXPECT_EQ(d.flushes, 0u);
  EXPECT_EQ(d.lines_flushed, 0u);
  EXPECT_EQ(d.fences, 0u);
  EXPECT_EQ(d.naws, 0u);
  EXPECT_EQ(d.nt_bytes, 0u);
}

/// Media writes caused by `fn`, including those left in the buffer.
template <class Fn>
uint64_t media_writes_of(Fn fn) {
  media_drain();
  const CounterSnapshot before = snapshot();
  fn();
  media_drain();
  return (snapshot() - before).media_writes;
}

// The XPLine buffer alone (no cache model: every flushed line reaches it).
TEST_F(Persist, MediaModelCombinesWithinAnXPLine) {
  PersistConfig c;
  c.media_model = true;
  c.cache_kib = 0;
  configure(c);
  Aligned buf(64 * 1024);
  // Four lines of one XPLine, flushed one by one: one 256 B media write.
  EXPECT_EQ(media_writes_of([&] {
              for (int i = 0; i < 4; ++i) persist(buf.p + 64 * i, 64);
            }),
            1u);
  // The same line flushed 10 times while buffered: one media write.
  EXPECT_EQ(media_writes_of([&] {
              for (int i = 0; i < 10; ++i) persist(buf.p + 512, 8);
            }),
            1u);
  // One line in each of 8 XPLines: one media write each.
  EXPECT_EQ(media_writes_of([&] {
              for (int i = 0; i < 8; ++i) persist(buf.p + 256 * i + 64, 64);
            }),
            8u);
  // More distinct XPLines than buffer entries: evictions count before drain.
  media_drain();
  const CounterSnapshot before = snapshot();
  for (int i = 0; i < 65; ++i) persist(buf.p + 256 * i, 64);
  EXPECT_EQ((snapshot() - before).media_writes, 1u);  // the 65th evicted the 1st
  media_drain();
  EXPECT_EQ((snapshot() - before).media_writes, 65u);
}

TEST_F(Persist, MediaModelOffCountsNothing) {
  Aligned buf(4096);
  EXPECT_EQ(media_writes_of([&] { persist(buf.p, 4096); }), 0u);
}

TEST_F(Persist, FenceLatencyIsInjected) {
  PersistConfig c;
  c.fence_latency_ns = 200'000;
  configure(c);
  const auto t0 = std::chrono::steady_clock::now();
  fence();
  const auto dt = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(dt, std::chrono::nanoseconds(200'000));
}

// media=N: time is charged per media write the model counts, not per
// flushed line. 64 distinct XPLines fill the 64-entry buffer without an
// eviction; each further distinct XPLine evicts one (one media write).
TEST_F(Persist, MediaLatencyIsPerMediaWrite) {
  PersistConfig c;
  c.media_write_latency_ns = 100'000;
  c.cache_kib = 0;  // the buffer alone: every flushed line reaches it
  configure(c);
  EXPECT_TRUE(current_config().media_model) << "media latency must turn the media model on";
  media_drain();
  Aligned buf(256 * 80);
  // Evictions only (media_writes_of also counts what is drained at the end).
  auto evictions_of = [](auto fn) {
    const CounterSnapshot before = snapshot();
    fn();
    return (snapshot() - before).media_writes;
  };
  // Lines of the same 4 XPLines, flushed again and again: no eviction.
  EXPECT_EQ(evictions_of([&] {
              for (int r = 0; r < 8; ++r) flush(buf.p, 1024);
            }),
            0u);
  media_drain();
  // 68 distinct XPLines: 4 evictions, so at least 400 us of modelled media time.
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(evictions_of([&] {
              for (int x = 0; x < 68; ++x) flush(buf.p + 256 * x, 64);
            }),
            4u);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::nanoseconds(400'000));
  media_drain();
}

/// Lines written back and media writes caused by `fn`, including what the
/// drain at the end writes back.
struct WriteBacks {
  uint64_t lines = 0;
  uint64_t media = 0;
};
template <class Fn>
WriteBacks write_backs_of(Fn fn) {
  media_drain();
  const CounterSnapshot before = snapshot();
  fn();
  media_drain();
  const CounterSnapshot d = snapshot() - before;
  return {d.lines_written_back, d.media_writes};
}

/// The cache model on, `kib` KiB (1 KiB = 16 lines: one set of 11 ways).
void cache_model(uint32_t kib, uint32_t media_ns = 0) {
  PersistConfig c;
  c.media_model = true;
  c.cache_kib = kib;
  c.media_write_latency_ns = media_ns;
  configure(c);
}

// A clwb of a clean line writes nothing to the media: a flush reaches the
// XPLine buffer only for a line stored to (through the pm:: helpers) since
// its last write-back.
TEST_F(Persist, CacheModelFlushOfACleanLineWritesNothing) {
  cache_model(kDefaultCacheKiB);
  Aligned buf(4096);
  EXPECT_EQ(write_backs_of([&] { persist(buf.p, 4096); }).lines, 0u) << "never stored to";
  const WriteBacks w = write_backs_of([&] {
    store(reinterpret_cast<uint64_t*>(buf.p + 64), uint64_t{1});
    persist(buf.p, 256);  // 4 lines flushed, 1 dirty
    persist(buf.p, 256);  // all clean now
  });
  EXPECT_EQ(w.lines, 1u);
  EXPECT_EQ(w.media, 1u);
  // copy, fill and move dirty every line they cover.
  EXPECT_EQ(write_backs_of([&] {
              fill(buf.p + 32, 1, 64);  // lines 0 and 1 (bytes 32..95)
              persist(buf.p, 4096);
            }).lines,
            2u);
  EXPECT_EQ(write_backs_of([&] {
              move(buf.p + 1024, buf.p, 512);  // lines 16..23
              persist(buf.p, 4096);
            }).lines,
            8u);
}

// A dirty line that is never flushed still reaches the media: when the
// cache evicts it (least recently stored first), or at media_drain.
TEST_F(Persist, CacheModelEvictsTheLeastRecentlyUsedDirtyLine) {
  cache_model(1);  // one set of 11 ways
  Aligned buf(64 * 64);
  auto line = [&](int i) { return reinterpret_cast<uint64_t*>(buf.p + 64 * i); };
  media_drain();
  const CounterSnapshot before = snapshot();
  for (int i = 0; i < 11; ++i) store(line(i), uint64_t{1});
  EXPECT_EQ((snapshot() - before).lines_written_back, 0u) << "11 lines fit in 11 ways";
  store(line(0), uint64_t{2});   // line 0 becomes the most recently used
  store(line(11), uint64_t{1});  // evicts line 1, the least recently used
  EXPECT_EQ((snapshot() - before).lines_written_back, 1u);
  flush(line(1), 8);  // line 1 is no longer held: nothing to write
  EXPECT_EQ((snapshot() - before).lines_written_back, 1u);
  flush(line(0), 8);  // line 0 is still held dirty
  EXPECT_EQ((snapshot() - before).lines_written_back, 2u);
  // The drain writes back the 10 lines still dirty (2..11) and empties the
  // buffer: lines 0..11 are XPLines 0, 1 and 2, three media writes.
  media_drain();
  const CounterSnapshot d = snapshot() - before;
  EXPECT_EQ(d.lines_written_back, 12u);
  EXPECT_EQ(d.media_writes, 3u);
  EXPECT_EQ(write_backs_of([] {}).lines, 0u) << "the drain leaves the cache clean";
}

// Why flushing in address order pays (Ni et al. 2020 §6.2): lines of one
// XPLine evicted far apart in time reach the buffer separately, once per
// eviction window, while the same lines flushed together combine.
TEST_F(Persist, CacheModelWriteBackOrderDecidesCombining) {
  cache_model(1);
  Aligned buf(256 * 208);  // a multiple of 4096 (aligned_alloc)
  auto touch = [&](int xpline, int line) {
    store(reinterpret_cast<uint64_t*>(buf.p + 256 * xpline + 64 * line), uint64_t{1});
  };
  // Line 0 of XPLines 0..99, then line 1 of each, and so on: each line is
  // evicted 11 stores later, when the buffer (64 XPLines) has long lost its
  // XPLine: one media write per line.
  const WriteBacks scattered = write_backs_of([&] {
    for (int l = 0; l < 4; ++l) {
      for (int x = 0; x < 100; ++x) touch(x, l);
    }
  });
  EXPECT_EQ(scattered.lines, 400u);
  EXPECT_EQ(scattered.media, 400u);
  // The same stores, each XPLine's four lines flushed as soon as written.
  const WriteBacks grouped = write_backs_of([&] {
    for (int l = 0; l < 4; ++l) {
      for (int x = 0; x < 100; ++x) {
        touch(x, l);
        flush(buf.p + 256 * x + 64 * l, 64);
      }
    }
  });
  EXPECT_EQ(grouped.lines, 400u);
  EXPECT_EQ(grouped.media, 400u) << "flushed one by one across 100 XPLines: no combining either";
  const WriteBacks together = write_backs_of([&] {
    for (int x = 0; x < 100; ++x) {
      for (int l = 0; l < 4; ++l) touch(x, l);
      flush(buf.p + 256 * x, 256);
    }
  });
  EXPECT_EQ(together.lines, 400u);
  EXPECT_EQ(together.media, 100u) << "four lines of an XPLine written back together: one write";
}

// In dram mode stores are not followed (nothing counts there), and with
// cache_kib 0 neither: every flushed line is written back as before.
TEST_F(Persist, CacheModelOffFollowsNoStores) {
  PersistConfig c;
  c.mode = Mode::kDram;
  c.media_model = true;
  configure(c);
  EXPECT_FALSE(detail::g.store_hook);
  cache_model(0);
  EXPECT_FALSE(detail::g.store_hook);
  Aligned buf(4096);
  EXPECT_EQ(write_backs_of([&] { persist(buf.p, 512); }).lines, 8u);
  cache_model(kDefaultCacheKiB);
  EXPECT_TRUE(detail::g.store_hook);
}

// nt_copy's flushed head and tail are cached stores the model follows.
TEST_F(Persist, CacheModelSeesNtCopyEdges) {
  cache_model(kDefaultCacheKiB);
  Aligned buf(4096);
  std::vector<char> src(200, 'x');
  // buf+8: an 8 B head (line 0), 192 B streamed, no tail.
  EXPECT_EQ(write_backs_of([&] { nt_copy(buf.p + 8, src.data(), 200); }).lines, 1u);
}

// A store whose eviction causes a media write charges its modelled time.
TEST_F(Persist, CacheModelChargesMediaTimeToTheEvictingStore) {
  cache_model(1, 100'000);
  media_drain();
  Aligned buf(256 * 80);
  const auto t0 = std::chrono::steady_clock::now();
  const CounterSnapshot before = snapshot();
  // 77 lines in distinct XPLines: 66 evicted from the cache, the last 2 of
  // which find the buffer's 64 entries full.
  for (int x = 0; x < 77; ++x) store(reinterpret_cast<uint64_t*>(buf.p + 256 * x), uint64_t{1});
  const CounterSnapshot d = snapshot() - before;
  EXPECT_EQ(d.lines_written_back, 66u);
  EXPECT_EQ(d.media_writes, 2u);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::nanoseconds(200'000));
  media_drain();
}

TEST_F(Persist, FlushLatencyIsPerLine) {
  PersistConfig c;
  c.flush_latency_ns = 50'000;
  configure(c);
  Aligned buf(4096);
  const auto t0 = std::chrono::steady_clock::now();
  flush(buf.p, 256);  // 4 lines
  const auto dt = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(dt, std::chrono::nanoseconds(200'000));
}

TEST(SmoTime, BucketsAreQuarterOctavesAndContainTheirFloors) {
  for (int b = 1; b < kSmoTimeBuckets; ++b) {
    const uint64_t lo = smo_time_bucket_floor(b);
    EXPECT_EQ(smo_time_bucket(lo), b) << b;
    EXPECT_EQ(smo_time_bucket(lo - 1), b - 1) << b;
    if (b + 1 < kSmoTimeBuckets) {
      // At most 25% wide.
      EXPECT_LE(smo_time_bucket_floor(b + 1) - lo, lo / 4) << b;
    }
  }
}

TEST(SmoTime, TimerRecordsOnlyAScopeThatCountedAnSmoAndCascadesOnce) {
  const CounterSnapshot before = snapshot();
  { SmoTimer t; }  // no SMO: nothing recorded
  {
    SmoTimer outer;
    count_smo();
    {
      SmoTimer inner;  // a cascade: the parent split inside the leaf split
      count_smo();
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }
  const CounterSnapshot d = snapshot() - before;
  EXPECT_EQ(d.smos, 2u);
  EXPECT_EQ(d.smos_timed(), 1u);
  EXPECT_GE(d.smo_ns, 200'000u);
  EXPECT_EQ(d.smo_time[smo_time_bucket(d.smo_ns)], 1u);
}

}  // namespace
}  // namespace nvindex::pm
