// Media model (DESIGN.md §3 "Counters"): an internal interface between the
// persist primitives and the XPLine write-combining buffer model.
#pragma once

#include <cstddef>
#include <cstdint>

namespace nvindex::pm::detail {

/// Entries of the modelled write-combining buffer: 64 XPLines of 256 B =
/// 16 KiB, the size of the XPBuffer measured on Optane DC PMM (Yang et al.,
/// "An Empirical Guide to the Behavior and Use of Scalable Persistent
/// Memory", FAST'20, §3.2).
inline constexpr size_t kMediaBufferEntries = 64;

/// Feeds one flushed 64 B line (its address) to the buffer. A line whose
/// XPLine is already buffered is combined (no media write); otherwise the
/// XPLine enters the buffer, evicting the oldest entry when full (FIFO), and
/// the eviction counts one 256 B media write in the calling thread's
/// media_writes counter. Returns the media writes it counted (0 or 1), which
/// the caller charges as modelled media time (media_write_latency_ns).
/// Thread-safe (a spinlock, taken only when the media model is on).
uint64_t media_feed_line(uintptr_t line);

}  // namespace nvindex::pm::detail
