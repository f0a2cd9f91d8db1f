// Media model: a FIFO write-combining buffer of 256 B XPLines (DESIGN.md §3).
//
// Real Optane DIMMs combine 64 B line writes that reach the same 256 B XPLine
// in an on-DIMM buffer (the XPBuffer, about 16 KiB) and write the XPLine to
// the 3D-XPoint media when it leaves the buffer (Yang et al., FAST'20, §3.2,
// §5.1). We model that buffer as kMediaBufferEntries XPLine addresses,
// replaced first-in first-out: a hit does not refresh an entry's age, so a
// line that is rewritten forever is still written back once per
// kMediaBufferEntries distinct XPLines that pass through, as the hardware's
// periodic write-back does. The model counts, and delays only when asked:
// with media_write_latency_ns (--pm-latency-ns media=N) the flushing thread
// busy-waits N ns per media write it caused (persist.cc), so that write
// amplification turns into (modelled) time.
#include "pm/media.h"

#include <array>
#include <atomic>

#include "nvindex/pm/counters.h"
#include "nvindex/pm/persist.h"

namespace nvindex::pm {
namespace detail {
namespace {

struct MediaBuffer {
  std::atomic_flag lock = ATOMIC_FLAG_INIT;
  std::array<uintptr_t, kMediaBufferEntries> xplines{};  ///< XPLine numbers (addr / 256)
  size_t count = 0;                                      ///< valid entries
  size_t head = 0;                                       ///< index of the oldest entry

  void acquire() {
    while (lock.test_and_set(std::memory_order_acquire)) {
      while (lock.test(std::memory_order_relaxed)) _mm_pause();
    }
  }
  void release() { lock.clear(std::memory_order_release); }
};

MediaBuffer g_media;

}  // namespace

uint64_t media_feed_line(uintptr_t line) {
  const uintptr_t xp = line / kXPLineSize;
  uint64_t evicted = 0;
  g_media.acquire();
  bool hit = false;
  for (size_t i = 0; i < g_media.count; ++i) {
    if (g_media.xplines[(g_media.head + i) % kMediaBufferEntries] == xp) {
      hit = true;
      break;
    }
  }
  if (!hit) {
    if (g_media.count == kMediaBufferEntries) {
      // Full: the oldest XPLine goes to the media (one 256 B write) and the new
      // one takes its slot, becoming the youngest.
      g_media.xplines[g_media.head] = xp;
      g_media.head = (g_media.head + 1) % kMediaBufferEntries;
      evicted = 1;
    } else {
      g_media.xplines[(g_media.head + g_media.count) % kMediaBufferEntries] = xp;
      ++g_media.count;
    }
  }
  g_media.release();
  if (evicted != 0) bump(thread_counters().media_writes, evicted);
  return evicted;
}

}  // namespace detail

void media_drain() {
  if (!detail::g.media_model) return;
  detail::g_media.acquire();
  const uint64_t n = detail::g_media.count;
  detail::g_media.count = 0;
  detail::g_media.head = 0;
  detail::g_media.release();
  bump(thread_counters().media_writes, n);
}

}  // namespace nvindex::pm
