// Allocator: size classes and alignment, bad sizes, free and reuse, no double
// allocation across threads, OutOfSpace, reclamation of unreachable blocks on
// recovery, mark_reachable errors, Busy before recovery, thread caches across
// several allocators (pools) in one process and across thread exit; the
// classes above 4 KiB and extents of whole chunks, the two arenas apart, and
// the chunk table left by a crash while an extent was assigned.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "nvindex/pm/allocator.h"
#include "nvindex/pm/counters.h"
#include "nvindex/pm/pool.h"
#include "pm_test_util.h"

namespace nvindex::pm {
namespace {

using testing::TempPool;

constexpr uint64_t kChunk = Allocator::kChunkSize;

std::unique_ptr<Pool> anon(uint64_t size = kMinPoolSize) {
  std::unique_ptr<Pool> pool;
  EXPECT_TRUE(Pool::create_anonymous(size, "alloc-test", &pool).ok());
  return pool;
}

/// Allocates `size`-byte blocks until OutOfSpace; returns them. Fails the test
/// on any other error.
std::vector<uint64_t> drain(Allocator& a, uint32_t size) {
  std::vector<uint64_t> out;
  for (;;) {
    uint64_t off = 0;
    const Status s = a.allocate(size, &off);
    if (s.code() == Code::kOutOfSpace) break;
    EXPECT_TRUE(s.ok()) << s.ToString();
    if (!s.ok()) break;
    out.push_back(off);
  }
  return out;
}

/// Expects the blocks [off, off+size) to be pairwise disjoint.
void expect_disjoint(std::vector<std::pair<uint64_t, uint32_t>> blocks) {
  std::sort(blocks.begin(), blocks.end());
  for (size_t i = 1; i < blocks.size(); ++i) {
    ASSERT_LE(blocks[i - 1].first + blocks[i - 1].second, blocks[i].first)
        << "blocks at " << blocks[i - 1].first << " and " << blocks[i].first << " overlap";
  }
}

TEST(Allocator, ClassesAndAlignment) {
  auto pool = anon(16ull << 20);
  Allocator& a = pool->allocator();
  const std::pair<uint32_t, uint32_t> cases[] = {
      {1, 64},      {64, 64},     {65, 128},    {100, 128},   {128, 128},
      {129, 256},   {256, 256},   {300, 512},   {512, 512},   {1000, 1024},
      {1024, 1024}, {1025, 2048}, {2048, 2048}, {4000, 4096}, {4096, 4096}};
  std::vector<std::pair<uint64_t, uint32_t>> blocks;
  for (auto [size, cls] : cases) {
    for (int i = 0; i < 3; ++i) {
      uint64_t off = 0;
      ASSERT_TRUE(a.allocate(size, &off).ok()) << size;
      EXPECT_EQ(a.block_size(off), cls) << size;
      EXPECT_EQ(off % cls, 0u) << size;
      EXPECT_EQ(reinterpret_cast<uintptr_t>(pool->ptr<char>(off)) % cls, 0u);
      EXPECT_TRUE(pool->contains(off, cls));
      blocks.emplace_back(off, cls);
    }
  }
  expect_disjoint(blocks);
  EXPECT_EQ(a.block_size(0), 0u);
  EXPECT_EQ(a.block_size(blocks[0].first + 8), 0u);
  EXPECT_EQ(a.block_size(pool->size() + 4096), 0u);
  EXPECT_EQ(a.heap_bytes() % kChunk, 0u);
  EXPECT_GT(a.heap_bytes(), pool->size() - 2 * kChunk);
}

TEST(Allocator, BadSizes) {
  auto pool = anon();
  uint64_t off = 77;
  Status s = pool->allocator().allocate(0, &off);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
  s = pool->allocator().allocate(Allocator::kMaxExtent + 1, &off);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("1073741825"), std::string::npos) << s.ToString();
  EXPECT_EQ(off, 77u);
}

TEST(Allocator, FreeAndReuseAndCounters) {
  auto pool = anon();
  Allocator& a = pool->allocator();
  const CounterSnapshot before = snapshot();
  uint64_t x = 0, y = 0;
  ASSERT_TRUE(a.allocate(200, &x).ok());
  EXPECT_EQ(a.bytes_in_use(), 256u);
  a.free(x);
  EXPECT_EQ(a.bytes_in_use(), 0u);
  ASSERT_TRUE(a.allocate(256, &y).ok());
  EXPECT_EQ(x, y);  // the thread cache hands back the block just freed
  const CounterSnapshot d = snapshot() - before;
  EXPECT_EQ(d.allocs, 2u);
  EXPECT_EQ(d.frees, 1u);
  EXPECT_EQ(d.lines_flushed, 1u);  // assigning the chunk: its table byte
}

TEST(Allocator, OutOfSpaceThenFreeMakesRoom) {
  auto pool = anon(kMinPoolSize);
  Allocator& a = pool->allocator();
  const uint64_t chunks = a.heap_bytes() / kChunk;
  std::vector<uint64_t> got = drain(a, 4096);
  EXPECT_EQ(got.size(), chunks * (kChunk / 4096));
  EXPECT_EQ(a.bytes_in_use(), a.heap_bytes());
  uint64_t off = 0;
  Status s = a.allocate(64, &off);  // no chunk left for another class either
  EXPECT_EQ(s.code(), Code::kOutOfSpace);
  EXPECT_NE(s.message().find("full"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("64-byte"), std::string::npos) << s.ToString();
  a.free(got[5]);
  ASSERT_TRUE(a.allocate(3000, &off).ok());
  EXPECT_EQ(off, got[5]);
  EXPECT_EQ(a.allocate(4096, &off).code(), Code::kOutOfSpace);
}

TEST(Allocator, NoDoubleAllocationAcrossThreads) {
  auto pool = anon(64ull << 20);
  Allocator& a = pool->allocator();
  constexpr int kThreads = 4;
  std::vector<std::vector<std::pair<uint64_t, uint32_t>>> live(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto& mine = live[t];
      for (int i = 0; i < 3000; ++i) {
        const uint32_t size = 64u << ((i + t) % 7);
        uint64_t off = 0;
        if (!a.allocate(size, &off).ok()) {
          ADD_FAILURE() << "allocate failed";
          return;
        }
        mine.emplace_back(off, size);
        if (i % 3 == 2) {  // free one of the recent blocks
          const size_t k = mine.size() - 2;
          a.free(mine[k].first);
          mine.erase(mine.begin() + static_cast<ptrdiff_t>(k));
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  std::vector<std::pair<uint64_t, uint32_t>> all;
  uint64_t bytes = 0;
  for (auto& v : live) {
    for (auto& b : v) {
      EXPECT_EQ(a.block_size(b.first), b.second);
      bytes += b.second;
    }
    all.insert(all.end(), v.begin(), v.end());
  }
  EXPECT_EQ(all.size(), kThreads * 2000u);
  EXPECT_EQ(a.bytes_in_use(), bytes);
  expect_disjoint(all);
}

TEST(Allocator, RecoveryReclaimsUnreachableBlocks) {
  TempPool tp;
  std::vector<uint64_t> blocks;
  {
    std::unique_ptr<Pool> pool;
    ASSERT_TRUE(Pool::create(tp.path(), kMinPoolSize, "alloc", Mode::kEmulated, &pool).ok());
    for (int i = 0; i < 1000; ++i) {
      uint64_t off = 0;
      ASSERT_TRUE(pool->allocator().allocate(256, &off).ok());
      blocks.push_back(off);
    }
  }
  std::unique_ptr<Pool> pool;
  ASSERT_TRUE(Pool::open(tp.path(), "alloc", Mode::kEmulated, &pool).ok());
  Allocator& a = pool->allocator();
  uint64_t off = 0;
  const Status busy = a.allocate(64, &off);
  EXPECT_EQ(busy.code(), Code::kBusy) << busy.ToString();
  EXPECT_NE(busy.message().find("recovery"), std::string::npos);

  a.begin_recovery();
  EXPECT_EQ(a.allocate(64, &off).code(), Code::kBusy);
  std::set<uint64_t> marked;
  for (size_t i = 0; i < blocks.size(); i += 2) {
    ASSERT_TRUE(a.mark_reachable(blocks[i]).ok());
    marked.insert(blocks[i]);
  }
  EXPECT_EQ(a.bytes_in_use(), 500u * 256);
  const Allocator::RecoveryStats st = a.end_recovery();
  EXPECT_EQ(st.reachable_blocks, 500u);
  EXPECT_EQ(st.chunks, 4u);  // 1000 blocks of 256 B = 4 chunks of 250
  EXPECT_EQ(st.reclaimed_blocks, 4u * (kChunk / 256) - 500);
  EXPECT_EQ(a.bytes_in_use(), 500u * 256);

  // Exhaust the pool: every block but the marked ones is handed out once.
  const std::vector<uint64_t> got = drain(a, 256);
  EXPECT_EQ(got.size(), a.heap_bytes() / 256 - 500);
  const std::set<uint64_t> unique(got.begin(), got.end());
  EXPECT_EQ(unique.size(), got.size());
  for (uint64_t g : got) ASSERT_EQ(marked.count(g), 0u) << "reachable block " << g << " reused";
  // The unmarked blocks of the first session are among the reclaimed ones.
  for (size_t i = 1; i < blocks.size(); i += 2) EXPECT_EQ(unique.count(blocks[i]), 1u);
}

TEST(Allocator, CrashedSessionLeaksNothing) {
  TempPool tp;
  {
    std::unique_ptr<Pool> pool;
    ASSERT_TRUE(Pool::create(tp.path(), kMinPoolSize, "alloc", Mode::kEmulated, &pool).ok());
  }
  // A child allocates 300 blocks, publishes one as the root and crashes.
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::unique_ptr<Pool> pool;
    if (!Pool::open(tp.path(), "alloc", Mode::kEmulated, &pool).ok()) _exit(1);
    pool->allocator().begin_recovery();
    pool->allocator().end_recovery();
    uint64_t off = 0;
    for (int i = 0; i < 300; ++i) {
      if (!pool->allocator().allocate(1024, &off).ok()) _exit(2);
    }
    persist(pool->ptr<char>(off), 1024);
    pool->set_root(off);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;

  std::unique_ptr<Pool> pool;
  ASSERT_TRUE(Pool::open(tp.path(), "alloc", Mode::kEmulated, &pool).ok());
  EXPECT_FALSE(pool->was_clean_shutdown());
  Allocator& a = pool->allocator();
  a.begin_recovery();
  ASSERT_TRUE(a.mark_reachable(pool->root()).ok());
  const auto st = a.end_recovery();
  EXPECT_EQ(st.chunks, 300u / 64 + 1);  // 64 blocks of 1 KiB per chunk
  EXPECT_EQ(st.reachable_blocks, 1u);
  EXPECT_EQ(st.reclaimed_blocks, st.chunks * 64 - 1);
  EXPECT_EQ(a.bytes_in_use(), 1024u);
  // Everything but the root can be allocated again.
  uint64_t total = 0;
  for (uint32_t size : {1024u, 64u}) {
    for (uint64_t off : drain(a, size)) {
      ASSERT_NE(off, pool->root());
      total += size;
    }
  }
  EXPECT_EQ(total + 1024, a.heap_bytes());
}

TEST(Allocator, MarkReachableErrors) {
  auto pool = anon();
  Allocator& a = pool->allocator();
  uint64_t off = 0;
  ASSERT_TRUE(a.allocate(128, &off).ok());
  EXPECT_EQ(a.mark_reachable(off).code(), Code::kInvalidArgument);  // no pass in progress
  a.begin_recovery();
  for (uint64_t bad : {uint64_t{0}, uint64_t{64}, off + 64, off + 8,
                       off + 10 * kChunk /* unassigned chunk */, pool->size() + 128}) {
    const Status s = a.mark_reachable(bad);
    EXPECT_EQ(s.code(), Code::kCorruption) << bad << ": " << s.ToString();
  }
  ASSERT_TRUE(a.mark_reachable(off).ok());
  const Status twice = a.mark_reachable(off);
  EXPECT_EQ(twice.code(), Code::kCorruption);
  EXPECT_NE(twice.message().find("twice"), std::string::npos) << twice.ToString();
  const auto st = a.end_recovery();
  EXPECT_EQ(st.reachable_blocks, 1u);
  EXPECT_EQ(st.chunks, 1u);
}

TEST(Allocator, ParallelMarking) {
  auto pool = anon(16ull << 20);
  Allocator& a = pool->allocator();
  std::vector<uint64_t> blocks;
  for (int i = 0; i < 4000; ++i) {
    uint64_t off = 0;
    ASSERT_TRUE(a.allocate(64u << (i % 7), &off).ok());  // every class
    blocks.push_back(off);
  }
  a.begin_recovery();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (size_t i = t; i < blocks.size(); i += 4) EXPECT_TRUE(a.mark_reachable(blocks[i]).ok());
    });
  }
  for (auto& t : threads) t.join();
  const auto st = a.end_recovery();
  EXPECT_EQ(st.reachable_blocks, blocks.size());
  // Each class's chunks hold whole chunks of blocks; the rest is reclaimed.
  uint64_t capacity = 0;
  for (uint32_t c = 0; c < 7; ++c) {
    const uint64_t n = (4000 + 6 - c) / 7;  // blocks of class c
    const uint64_t per_chunk = kChunk / (64u << c);
    capacity += (n + per_chunk - 1) / per_chunk * per_chunk;
  }
  EXPECT_EQ(st.reachable_blocks + st.reclaimed_blocks, capacity);
  uint64_t bytes = 0;
  for (size_t i = 0; i < blocks.size(); ++i) bytes += 64u << (i % 7);
  EXPECT_EQ(a.bytes_in_use(), bytes);
}

TEST(Allocator, RecoveryForgetsCachedBlocks) {
  auto pool = anon();
  Allocator& a = pool->allocator();
  std::vector<uint64_t> held;
  for (int i = 0; i < 10; ++i) {
    uint64_t off = 0;
    ASSERT_TRUE(a.allocate(64, &off).ok());
    held.push_back(off);
  }
  for (int i = 0; i < 5; ++i) a.free(held[i]);  // now in this thread's cache
  a.begin_recovery();
  for (int i = 5; i < 10; ++i) ASSERT_TRUE(a.mark_reachable(held[i]).ok());
  a.end_recovery();
  const std::vector<uint64_t> got = drain(a, 64);
  EXPECT_EQ(got.size(), a.heap_bytes() / 64 - 5);
  EXPECT_EQ(std::set<uint64_t>(got.begin(), got.end()).size(), got.size());
  for (uint64_t g : got) {
    for (int i = 5; i < 10; ++i) ASSERT_NE(g, held[i]);
  }
}

TEST(Allocator, ThreadExitReturnsCachedBlocks) {
  auto pool = anon();
  Allocator& a = pool->allocator();
  std::thread([&] {
    std::vector<uint64_t> v;
    for (int i = 0; i < 100; ++i) {
      uint64_t off = 0;
      ASSERT_TRUE(a.allocate(64, &off).ok());
      v.push_back(off);
    }
    for (uint64_t off : v) a.free(off);
  }).join();
  EXPECT_EQ(a.bytes_in_use(), 0u);
  // Every block of the pool is still obtainable by this thread.
  const std::vector<uint64_t> got = drain(a, 64);
  EXPECT_EQ(got.size(), a.heap_bytes() / 64);
  EXPECT_EQ(std::set<uint64_t>(got.begin(), got.end()).size(), got.size());
}

TEST(Allocator, SeveralPoolsWithThreadCaches) {
  // Two live pools used by two threads, blocks freed into the caches of both.
  auto p1 = anon();
  auto p2 = anon();
  std::vector<std::thread> threads;
  std::vector<uint64_t> from1[2], from2[2];
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 500; ++i) {
        uint64_t x = 0, y = 0;
        ASSERT_TRUE(p1->allocator().allocate(64, &x).ok());
        ASSERT_TRUE(p2->allocator().allocate(64, &y).ok());
        from1[t].push_back(x);
        from2[t].push_back(y);
        if (i % 2 == 1) {
          p1->allocator().free(from1[t][i - 1]);
          p2->allocator().free(from2[t][i]);
          from1[t][i - 1] = 0;
          from2[t][i] = 0;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto* from : {from1, from2}) {
    std::set<uint64_t> all;
    size_t n = 0;
    for (int t = 0; t < 2; ++t) {
      for (uint64_t off : from[t]) {
        if (off == 0) continue;
        all.insert(off);
        ++n;
      }
    }
    EXPECT_EQ(all.size(), n);
    EXPECT_EQ(n, 500u);
  }
  EXPECT_EQ(p1->allocator().bytes_in_use(), 500u * 64);
  EXPECT_EQ(p2->allocator().bytes_in_use(), 500u * 64);

  // This thread caches blocks of a pool, which is then destroyed; a new pool
  // (likely mapped at the same address, with the same offsets) must never
  // see those cached blocks.
  for (int round = 0; round < 3; ++round) {
    auto old_pool = anon();
    std::vector<uint64_t> v;
    for (int i = 0; i < 40; ++i) {
      uint64_t off = 0;
      ASSERT_TRUE(old_pool->allocator().allocate(128, &off).ok());
      v.push_back(off);
    }
    for (uint64_t off : v) old_pool->allocator().free(off);
    old_pool.reset();
    auto fresh = anon();
    const std::vector<uint64_t> got = drain(fresh->allocator(), 128);
    EXPECT_EQ(got.size(), fresh->allocator().heap_bytes() / 128);
    EXPECT_EQ(std::set<uint64_t>(got.begin(), got.end()).size(), got.size());
    EXPECT_EQ(fresh->allocator().bytes_in_use(), fresh->allocator().heap_bytes());
  }
}

TEST(Allocator, LargeClassesAndExtents) {
  auto pool = anon(64ull << 20);
  Allocator& a = pool->allocator();
  const std::pair<uint32_t, uint64_t> cases[] = {{4097, 8192},
                                                 {16384, 16384},
                                                 {40000, 65536},
                                                 {65536, 65536},
                                                 {65537, 2 * kChunk},
                                                 {131072, 2 * kChunk},
                                                 {1u << 20, 16 * kChunk},
                                                 {(1u << 20) + 1, 17 * kChunk}};
  std::vector<std::pair<uint64_t, uint32_t>> blocks;
  for (auto [size, bytes] : cases) {
    for (int i = 0; i < 2; ++i) {
      uint64_t off = 0;
      ASSERT_TRUE(a.allocate(size, &off).ok()) << size;
      EXPECT_EQ(a.block_size(off), bytes) << size;
      EXPECT_EQ(off % std::min<uint64_t>(bytes, kChunk), 0u) << size;
      EXPECT_TRUE(pool->contains(off, bytes));
      blocks.emplace_back(off, static_cast<uint32_t>(bytes));
    }
  }
  expect_disjoint(blocks);
  uint64_t total = 0;
  for (auto& b : blocks) total += b.second;
  EXPECT_EQ(a.bytes_in_use(), total);
  // Not the start of an extent: its further chunks, an inner offset.
  EXPECT_EQ(a.block_size(blocks.back().first + kChunk), 0u);
  EXPECT_EQ(a.block_size(blocks.back().first + 64), 0u);

  // A freed extent serves the next request of its length, and a longer
  // free one a shorter request when no run of unassigned chunks is left.
  const uint64_t mib = blocks[12].first;
  a.free(mib);
  uint64_t off = 0;
  ASSERT_TRUE(a.allocate(1u << 20, &off).ok());
  EXPECT_EQ(off, mib);
  std::vector<uint64_t> ext = drain(a, 3 * kChunk);
  ASSERT_FALSE(ext.empty());
  const uint64_t in_use = a.bytes_in_use();
  a.free(mib);
  ASSERT_TRUE(a.allocate(2 * kChunk, &off).ok());
  EXPECT_EQ(off, mib);
  EXPECT_EQ(a.block_size(off), 16 * kChunk);
  EXPECT_EQ(a.bytes_in_use(), in_use);
  const Status full = a.allocate(2 * kChunk, &off);
  EXPECT_EQ(full.code(), Code::kOutOfSpace) << full.ToString();
  EXPECT_NE(full.message().find("2 unassigned 64 KiB chunks"), std::string::npos)
      << full.ToString();
}

TEST(Allocator, ArenasKeepTheirBlocksApart) {
  TempPool tp;
  std::vector<uint64_t> idx, items;
  {
    std::unique_ptr<Pool> pool;
    ASSERT_TRUE(Pool::create(tp.path(), 16ull << 20, "alloc", Mode::kEmulated, &pool).ok());
    Allocator& a = pool->allocator();
    Allocator& b = pool->item_allocator();
    EXPECT_EQ(a.arena(), Allocator::Arena::kIndex);
    EXPECT_EQ(b.arena(), Allocator::Arena::kItems);
    for (int i = 0; i < 50; ++i) {
      uint64_t x = 0, y = 0, z = 0;
      ASSERT_TRUE(a.allocate(256, &x).ok());
      ASSERT_TRUE(b.allocate(256, &y).ok());
      ASSERT_TRUE(b.allocate(i % 2 ? 100000 : 5000, &z).ok());
      idx.push_back(x);
      items.push_back(y);
      items.push_back(z);
    }
    EXPECT_EQ(a.bytes_in_use(), 50u * 256);
    EXPECT_EQ(b.bytes_in_use(), 50u * 256 + 25u * 8192 + 25u * 2 * kChunk);
    // A block of one arena is no block of the other.
    EXPECT_EQ(a.block_size(items[0]), 0u);
    EXPECT_EQ(b.block_size(idx[0]), 0u);
    std::vector<std::pair<uint64_t, uint32_t>> all;
    for (uint64_t o : idx) all.emplace_back(o, a.block_size(o));
    for (uint64_t o : items) all.emplace_back(o, b.block_size(o));
    expect_disjoint(all);
  }
  std::unique_ptr<Pool> pool;
  ASSERT_TRUE(Pool::open(tp.path(), "alloc", Mode::kEmulated, &pool).ok());
  Allocator& a = pool->allocator();
  Allocator& b = pool->item_allocator();
  uint64_t off = 0;
  EXPECT_EQ(b.allocate(64, &off).code(), Code::kBusy);
  // The index arena's pass marks its half of its blocks and reclaims the
  // rest of its own, never an item.
  a.begin_recovery();
  for (size_t i = 0; i < idx.size(); i += 2) ASSERT_TRUE(a.mark_reachable(idx[i]).ok());
  EXPECT_EQ(a.mark_reachable(items[0]).code(), Code::kCorruption);
  const auto sa = a.end_recovery();
  EXPECT_EQ(sa.reachable_blocks, 25u);
  EXPECT_EQ(sa.chunks, 1u);
  std::vector<uint64_t> got = drain(a, 256);
  for (uint64_t g : got) {
    ASSERT_EQ(b.block_size(g), 0u);
    for (uint64_t it : items) ASSERT_NE(g, it);
  }
  for (uint64_t g : got) a.free(g);
  // The item arena's pass, after: every item is still there to mark.
  b.begin_recovery();
  for (uint64_t it : items) ASSERT_TRUE(b.mark_reachable(it).ok()) << it;
  EXPECT_EQ(b.mark_reachable(idx[0]).code(), Code::kCorruption);
  const auto sb = b.end_recovery();
  EXPECT_EQ(sb.reachable_blocks, items.size());
  EXPECT_EQ(b.bytes_in_use(), 50u * 256 + 25u * 8192 + 25u * 2 * kChunk);
}

TEST(Allocator, CrashWhileAssigningAnExtentLeavesNoOrphans) {
  // The chunk table a crash inside Chunks::assign can leave, made by hand:
  // an extent of 4 chunks whose second entry is lost (first chunk alone:
  // an extent of one chunk, and two further-chunk entries after nothing).
  TempPool tp;
  uint64_t ext = 0, heap = 0;
  {
    std::unique_ptr<Pool> pool;
    ASSERT_TRUE(Pool::create(tp.path(), 16ull << 20, "alloc", Mode::kEmulated, &pool).ok());
    ASSERT_TRUE(pool->item_allocator().allocate(4 * kChunk, &ext).ok());
    uint64_t small = 0;
    ASSERT_TRUE(pool->item_allocator().allocate(64, &small).ok());  // the chunk after it
    heap = ext - (ext - kPoolHeaderBytes) % kChunk;
    (void)heap;
  }
  const uint64_t first_chunk_entry = [&] {
    std::unique_ptr<Pool> pool;
    EXPECT_TRUE(Pool::open(tp.path(), "alloc", Mode::kEmulated, &pool).ok());
    // The table entry of chunk i is at 4096 + i; the heap offset is at 160.
    uint64_t h = 0;
    std::memcpy(&h, pool->base() + 160, 8);
    return kPoolHeaderBytes + (ext - h) / kChunk;
  }();
  auto table = [&](uint64_t i) {
    const std::vector<char> f = testing::read_file(tp.path());
    return static_cast<unsigned char>(f[first_chunk_entry + i]);
  };
  EXPECT_EQ(table(0), 0x80 | 12);
  EXPECT_EQ(table(1), 0x80 | 13);
  EXPECT_EQ(table(4), 0x80 | 1);
  {
    FILE* f = std::fopen(tp.path().c_str(), "r+b");
    ASSERT_NE(f, nullptr);
    std::fseek(f, static_cast<long>(first_chunk_entry + 1), SEEK_SET);
    std::fputc(0, f);
    std::fclose(f);
  }
  std::unique_ptr<Pool> pool;
  ASSERT_TRUE(Pool::open(tp.path(), "alloc", Mode::kEmulated, &pool).ok());
  pool.reset();
  for (uint64_t i = 0; i < 4; ++i) EXPECT_EQ(table(i), 0u) << i;  // cleared at attach
  EXPECT_EQ(table(4), 0x80 | 1);
  ASSERT_TRUE(Pool::open(tp.path(), "alloc", Mode::kEmulated, &pool).ok());
  Allocator& b = pool->item_allocator();
  b.begin_recovery();
  const auto st = b.end_recovery();
  EXPECT_EQ(st.chunks, 1u);  // the 64 B chunk; the extent is gone
  // The four chunks are unassigned again: a 4-chunk extent takes them.
  uint64_t off = 0;
  ASSERT_TRUE(b.allocate(4 * kChunk, &off).ok());
  EXPECT_EQ(off, ext);
}

TEST(Allocator, RecoveryReclaimsUnreachableExtents) {
  TempPool tp;
  std::vector<uint64_t> ext;
  {
    std::unique_ptr<Pool> pool;
    ASSERT_TRUE(Pool::create(tp.path(), 32ull << 20, "alloc", Mode::kEmulated, &pool).ok());
    for (uint32_t n = 2; n < 8; ++n) {
      uint64_t off = 0;
      ASSERT_TRUE(pool->item_allocator().allocate(n * kChunk, &off).ok());
      ext.push_back(off);
    }
  }
  std::unique_ptr<Pool> pool;
  ASSERT_TRUE(Pool::open(tp.path(), "alloc", Mode::kEmulated, &pool).ok());
  Allocator& b = pool->item_allocator();
  b.begin_recovery();
  for (size_t i = 0; i < ext.size(); i += 2) ASSERT_TRUE(b.mark_reachable(ext[i]).ok());
  EXPECT_EQ(b.mark_reachable(ext[0]).code(), Code::kCorruption);           // twice
  EXPECT_EQ(b.mark_reachable(ext[0] + kChunk).code(), Code::kCorruption);  // a further chunk
  const auto st = b.end_recovery();
  EXPECT_EQ(st.chunks, 6u);
  EXPECT_EQ(st.reachable_blocks, 3u);
  EXPECT_EQ(st.reclaimed_blocks, 3u);
  EXPECT_EQ(b.bytes_in_use(), (2u + 4 + 6) * kChunk);
  // The unmarked extents (3, 5 and 7 chunks) are free again, at their lengths.
  for (uint32_t n : {3u, 5u, 7u}) {
    uint64_t off = 0;
    ASSERT_TRUE(b.allocate(n * kChunk, &off).ok());
    EXPECT_EQ(off, ext[n - 2]) << n;
  }
}

}  // namespace
}  // namespace nvindex::pm
