// Media model: a modelled CPU write-back cache in front of a FIFO
// write-combining buffer of 256 B XPLines (DESIGN.md §3, docs/pm.md).
//
// Real Optane DIMMs combine 64 B line writes that reach the same 256 B XPLine
// in an on-DIMM buffer (the XPBuffer, about 16 KiB) and write the XPLine to
// the 3D-XPoint media when it leaves the buffer (Yang et al., FAST'20, §3.2,
// §5.1). We model that buffer as kMediaBufferEntries XPLine addresses,
// replaced first-in first-out: a hit does not refresh an entry's age, so a
// line that is rewritten forever is still written back once per
// kMediaBufferEntries distinct XPLines that pass through, as the hardware's
// periodic write-back does.
//
// What reaches the DIMM is what the CPU cache writes back: a dirty line that
// a clwb/clflushopt flushes, or that the cache evicts to make room. So lines
// a program stores to and never flushes reach the media too, in eviction
// order, which is what group flushing (Ni et al. 2020 §6.2) changes. The
// cache is modelled as one set-associative cache of kCacheWays ways with
// least-recently-used replacement (the textbook model: Hennessy and
// Patterson, "Computer Architecture: A Quantitative Approach", 6th ed.,
// §B.1), write-allocate and write-back, fed only by the PM store helpers: it
// sees no loads (a tree's reads would also compete for the ways, so the
// modelled capacity stands for the share of the cache that dirty PM lines
// keep) and no DRAM traffic; one cache for all threads, as the LLC is shared.
// Set index = line number modulo the number of sets (consecutive lines in
// consecutive sets).
//
// The model counts, and delays only when asked: with media_write_latency_ns
// (--pm-latency-ns media=N) the thread whose flush or store caused a media
// write busy-waits N ns per media write (persist.cc), so that write
// amplification turns into (modelled) time.
#include "pm/media.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <vector>

#include "nvindex/pm/counters.h"
#include "nvindex/pm/persist.h"

namespace nvindex::pm {
namespace detail {
namespace {

struct MediaModel {
  std::atomic_flag lock = ATOMIC_FLAG_INIT;
  // The XPLine buffer.
  std::array<uintptr_t, kMediaBufferEntries> xplines{};  ///< XPLine numbers (addr / 256)
  size_t count = 0;                                      ///< valid entries
  size_t head = 0;                                       ///< index of the oldest entry
  // The cache: sets_ x kCacheWays ways (0 sets: no cache model). A way holds
  // (line number << 1) | dirty, 0 = empty (line 0, address 0..63, is never
  // PM); its stamp is the clock value of its last store (larger = more
  // recent).
  size_t sets = 0;
  std::vector<uint64_t> ways;
  std::vector<uint64_t> stamps;
  uint64_t clock = 0;

  void acquire() {
    while (lock.test_and_set(std::memory_order_acquire)) {
      while (lock.test(std::memory_order_relaxed)) _mm_pause();
    }
  }
  void release() { lock.clear(std::memory_order_release); }

  // One line written back into the XPLine buffer; returns the media writes
  // (0 or 1: an XPLine evicted). Lock held.
  uint64_t write_back(uintptr_t line_no) {
    const uintptr_t xp = line_no * kLineSize / kXPLineSize;
    for (size_t i = 0; i < count; ++i) {
      if (xplines[(head + i) % kMediaBufferEntries] == xp) return 0;
    }
    if (count == kMediaBufferEntries) {
      // Full: the oldest XPLine goes to the media (one 256 B write) and the
      // new one takes its slot, becoming the youngest.
      xplines[head] = xp;
      head = (head + 1) % kMediaBufferEntries;
      return 1;
    }
    xplines[(head + count) % kMediaBufferEntries] = xp;
    ++count;
    return 0;
  }

  // The way of the set of line_no that holds it, or nullptr. Lock held.
  uint64_t* find(uintptr_t line_no) {
    uint64_t* set = &ways[(line_no % sets) * kCacheWays];
    for (unsigned w = 0; w < kCacheWays; ++w) {
      if ((set[w] >> 1) == line_no) return &set[w];
    }
    return nullptr;
  }
};

MediaModel g_media;

}  // namespace

void media_configure(uint32_t cache_kib) {
  g_media.count = 0;
  g_media.head = 0;
  g_media.clock = 0;
  const size_t lines = size_t{cache_kib} * 1024 / kLineSize;
  g_media.sets = cache_kib == 0 ? 0 : std::max<size_t>(1, lines / kCacheWays);
  g_media.ways.assign(g_media.sets * kCacheWays, 0);
  g_media.stamps.assign(g_media.sets * kCacheWays, 0);
}

uint64_t media_store(uintptr_t addr, size_t n) {
  if (n == 0) return 0;
  const uintptr_t first = addr / kLineSize;
  const uintptr_t last = (addr + n - 1) / kLineSize;
  uint64_t evicted = 0;
  uint64_t written = 0;
  MediaModel& m = g_media;
  m.acquire();
  for (uintptr_t line = first; line <= last; ++line) {
    const size_t base = (line % m.sets) * kCacheWays;
    uint64_t* set = &m.ways[base];
    unsigned hit = kCacheWays;
    unsigned victim = 0;
    for (unsigned w = 0; w < kCacheWays; ++w) {
      if ((set[w] >> 1) == line) {
        hit = w;
        break;
      }
      // The victim: an empty way, else the least recently used.
      if (set[victim] != 0 && (set[w] == 0 || m.stamps[base + w] < m.stamps[base + victim])) {
        victim = w;
      }
    }
    if (hit == kCacheWays) {
      if ((set[victim] & 1) != 0) {  // a dirty victim is written back
        evicted += m.write_back(set[victim] >> 1);
        ++written;
      }
      hit = victim;
    }
    set[hit] = line << 1 | 1;
    m.stamps[base + hit] = ++m.clock;
  }
  m.release();
  if (written != 0) {
    ThreadCounters& c = thread_counters();
    bump(c.lines_written_back, written);
    if (evicted != 0) bump(c.media_writes, evicted);
  }
  return evicted;
}

uint64_t media_feed_line(uintptr_t line) {
  const uintptr_t line_no = line / kLineSize;
  MediaModel& m = g_media;
  uint64_t evicted = 0;
  bool written = true;
  m.acquire();
  if (m.sets != 0) {
    uint64_t* way = m.find(line_no);
    written = way != nullptr && (*way & 1) != 0;
    if (written) *way &= ~uint64_t{1};  // clean, still cached (clwb)
  }
  if (written) evicted = m.write_back(line_no);
  m.release();
  if (written) {
    ThreadCounters& c = thread_counters();
    bump(c.lines_written_back);
    if (evicted != 0) bump(c.media_writes, evicted);
  }
  return evicted;
}

}  // namespace detail

void media_drain() {
  if (!detail::g.media_model) return;
  detail::MediaModel& m = detail::g_media;
  uint64_t writes = 0;
  uint64_t written = 0;
  m.acquire();
  // Every dirty line of the cache, set by set, each set's least recently
  // used first, written back into the buffer (and kept, clean).
  std::array<unsigned, detail::kCacheWays> order;
  for (size_t s = 0; s < m.sets; ++s) {
    const size_t base = s * detail::kCacheWays;
    for (unsigned w = 0; w < detail::kCacheWays; ++w) order[w] = w;
    std::sort(order.begin(), order.end(),
              [&](unsigned a, unsigned b) { return m.stamps[base + a] < m.stamps[base + b]; });
    for (unsigned w : order) {
      uint64_t& way = m.ways[base + w];
      if ((way & 1) == 0) continue;
      writes += m.write_back(way >> 1);
      ++written;
      way &= ~uint64_t{1};
    }
  }
  // Then the buffer: each entry still held is one media write.
  writes += m.count;
  m.count = 0;
  m.head = 0;
  m.release();
  ThreadCounters& c = thread_counters();
  bump(c.media_writes, writes);
  bump(c.lines_written_back, written);
}

}  // namespace nvindex::pm
