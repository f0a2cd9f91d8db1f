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
// consecutive sets; a mask when the sets are a power of two, as by default).
//
// Cost. The model runs on every PM store, so its common cases take no lock:
// a store to a line that is already dirty and the most recently used of its
// set (the usual case: an operation stores several words into the same few
// lines) changes nothing in the model, and a flush of a line the cache does
// not hold dirty writes nothing; both are decided from relaxed atomic reads
// of the set. Everything else (a line to mark, a victim to evict, a line to
// write back) takes the spinlock. A lock-free decision may race with another
// thread's flush or eviction of the same line; it is then ordered before
// that thread's operation (a model's approximation: only stores racing on one
// line, which the indexes' locks exclude, can see it).
//
// The model counts, and delays only when asked: with media_write_latency_ns
// (--pm-latency-ns media=N) the thread whose flush or store caused a media
// write busy-waits N ns per media write (persist.cc), so that write
// amplification turns into (modelled) time.
#include "pm/media.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <memory>

#include "nvindex/pm/counters.h"
#include "nvindex/pm/persist.h"

namespace nvindex::pm {
namespace detail {
namespace {

struct MediaModel {
  std::atomic_flag lock = ATOMIC_FLAG_INIT;
  // The XPLine buffer: a FIFO ring of XPLine numbers (addr / 256).
  std::array<uintptr_t, kMediaBufferEntries> xplines{};
  size_t count = 0;  ///< valid entries
  size_t head = 0;   ///< index of the oldest entry
  // The cache: sets x kCacheWays ways (0 sets: no cache model). A way holds
  // (line number << 1) | dirty, 0 = empty (line 0, address 0..63, is never
  // PM), written under the lock and read by the lock-free checks; its stamp
  // (lock held) is the clock value of its last store (larger = more recent);
  // mru[s] is the way of set s stored to last.
  size_t sets = 0;
  uint64_t set_mask = 0;  ///< sets - 1 when sets is a power of two, else 0
  std::unique_ptr<std::atomic<uint64_t>[]> ways;
  std::unique_ptr<uint64_t[]> stamps;
  std::unique_ptr<std::atomic<uint8_t>[]> mru;
  uint64_t clock = 0;

  void acquire() {
    while (lock.test_and_set(std::memory_order_acquire)) {
      while (lock.test(std::memory_order_relaxed)) _mm_pause();
    }
  }
  void release() { lock.clear(std::memory_order_release); }

  size_t set_of(uintptr_t line_no) const {
    return set_mask != 0 ? line_no & set_mask : line_no % sets;
  }
  uint64_t way(size_t set, unsigned w) const {
    return ways[set * kCacheWays + w].load(std::memory_order_relaxed);
  }
  // Lock-free: line_no is dirty and its set's most recently used line, so a
  // store to it changes nothing in the model.
  bool dirty_mru(uintptr_t line_no) const {
    const size_t s = set_of(line_no);
    return way(s, mru[s].load(std::memory_order_relaxed)) == (line_no << 1 | 1);
  }
  // Lock-free: the cache holds line_no dirty.
  bool holds_dirty(uintptr_t line_no) const {
    const size_t s = set_of(line_no);
    for (unsigned w = 0; w < kCacheWays; ++w) {
      if (way(s, w) == (line_no << 1 | 1)) return true;
    }
    return false;
  }

  // One line written back into the XPLine buffer; returns the media writes
  // (0 or 1: an XPLine evicted). Lock held.
  uint64_t write_back(uintptr_t line_no) {
    const uintptr_t xp = line_no * kLineSize / kXPLineSize;
    // Membership only: the valid entries are slots [0, count) until the
    // ring is full, then all of them, whatever the head.
    bool hit = false;
    for (size_t i = 0; i < count; ++i) hit |= xplines[i] == xp;
    if (hit) return 0;
    if (count == kMediaBufferEntries) {
      // Full: the oldest XPLine goes to the media (one 256 B write) and the
      // new one takes its slot, becoming the youngest.
      xplines[head] = xp;
      head = (head + 1) % kMediaBufferEntries;
      return 1;
    }
    xplines[count++] = xp;  // not full: head is 0, entries fill in order
    return 0;
  }

  // Marks line_no dirty and most recently used; returns the media writes of
  // a dirty victim's write-back, and counts it in *written. Lock held.
  uint64_t mark(uintptr_t line_no, uint64_t* written) {
    const size_t s = set_of(line_no);
    const size_t base = s * kCacheWays;
    unsigned hit = kCacheWays;
    unsigned victim = 0;
    for (unsigned w = 0; w < kCacheWays; ++w) {
      const uint64_t v = way(s, w);
      if ((v >> 1) == line_no) {
        hit = w;
        break;
      }
      // The victim: an empty way, else the least recently used.
      if (way(s, victim) != 0 && (v == 0 || stamps[base + w] < stamps[base + victim])) victim = w;
    }
    uint64_t evicted = 0;
    if (hit == kCacheWays) {
      const uint64_t v = way(s, victim);
      if ((v & 1) != 0) {  // a dirty victim is written back
        evicted = write_back(v >> 1);
        ++*written;
      }
      hit = victim;
    }
    ways[base + hit].store(line_no << 1 | 1, std::memory_order_relaxed);
    stamps[base + hit] = ++clock;
    mru[s].store(static_cast<uint8_t>(hit), std::memory_order_relaxed);
    return evicted;
  }
};

MediaModel g_media;

}  // namespace

void media_configure(uint32_t cache_kib) {
  MediaModel& m = g_media;
  m.count = 0;
  m.head = 0;
  m.clock = 0;
  const size_t lines = size_t{cache_kib} * 1024 / kLineSize;
  m.sets = cache_kib == 0 ? 0 : std::max<size_t>(1, lines / kCacheWays);
  m.set_mask = m.sets != 0 && std::has_single_bit(m.sets) ? m.sets - 1 : 0;
  const size_t n = m.sets * kCacheWays;
  m.ways = std::make_unique<std::atomic<uint64_t>[]>(n);  // value-initialised: 0, empty
  m.stamps = std::make_unique<uint64_t[]>(n);
  m.mru = std::make_unique<std::atomic<uint8_t>[]>(m.sets);
}

// Counts `written` lines written back and the `evicted` media writes they
// caused in the calling thread's counters; returns `evicted`.
static uint64_t count_write_backs(uint64_t written, uint64_t evicted) {
  if (written != 0) {
    ThreadCounters& c = thread_counters();
    bump(c.lines_written_back, written);
    if (evicted != 0) bump(c.media_writes, evicted);
  }
  return evicted;
}

uint64_t media_store(uintptr_t addr, size_t n) {
  if (n == 0) return 0;
  MediaModel& m = g_media;
  const uintptr_t first = addr / kLineSize;
  const uintptr_t last = (addr + n - 1) / kLineSize;
  bool change = false;
  for (uintptr_t line = first; line <= last && !change; ++line) change = !m.dirty_mru(line);
  if (!change) return 0;
  uint64_t evicted = 0;
  uint64_t written = 0;
  m.acquire();
  for (uintptr_t line = first; line <= last; ++line) evicted += m.mark(line, &written);
  m.release();
  return count_write_backs(written, evicted);
}

uint64_t media_feed_lines(uintptr_t line, uint64_t n) {
  const uintptr_t first = line / kLineSize;
  MediaModel& m = g_media;
  if (m.sets != 0) {  // only lines held dirty are written: none, no lock
    bool any = false;
    for (uintptr_t l = first; l < first + n && !any; ++l) any = m.holds_dirty(l);
    if (!any) return 0;
  }
  uint64_t evicted = 0;
  uint64_t written = 0;
  m.acquire();
  for (uintptr_t l = first; l < first + n; ++l) {
    if (m.sets != 0) {
      // Dirty (checked again under the lock): written back, kept clean
      // (clwb); else nothing.
      const size_t s = m.set_of(l);
      bool dirty = false;
      for (unsigned w = 0; w < kCacheWays && !dirty; ++w) {
        std::atomic<uint64_t>& way = m.ways[s * kCacheWays + w];
        dirty = way.load(std::memory_order_relaxed) == (l << 1 | 1);
        if (dirty) way.store(l << 1, std::memory_order_relaxed);
      }
      if (!dirty) continue;
    }
    evicted += m.write_back(l);
    ++written;
  }
  m.release();
  return count_write_backs(written, evicted);
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
    bool any = false;
    for (unsigned w = 0; w < detail::kCacheWays; ++w) any |= (m.way(s, w) & 1) != 0;
    if (!any) continue;
    for (unsigned w = 0; w < detail::kCacheWays; ++w) order[w] = w;
    std::sort(order.begin(), order.end(),
              [&](unsigned a, unsigned b) { return m.stamps[base + a] < m.stamps[base + b]; });
    for (unsigned w : order) {
      const uint64_t v = m.way(s, w);
      if ((v & 1) == 0) continue;
      writes += m.write_back(v >> 1);
      ++written;
      m.ways[base + w].store(v & ~uint64_t{1}, std::memory_order_relaxed);
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
