// Media model (DESIGN.md §3 "Counters", docs/pm.md "Media model"): an
// internal interface between the persist primitives and the two modelled
// stages, a CPU write-back cache and the XPLine write-combining buffer.
#pragma once

#include <cstddef>
#include <cstdint>

namespace nvindex::pm::detail {

/// Entries of the modelled write-combining buffer: 64 XPLines of 256 B =
/// 16 KiB, the size of the XPBuffer measured on Optane DC PMM (Yang et al.,
/// "An Empirical Guide to the Behavior and Use of Scalable Persistent
/// Memory", FAST'20, §3.2).
inline constexpr size_t kMediaBufferEntries = 64;

/// Ways of the modelled CPU cache: 11, the associativity of the last-level
/// cache of Intel Xeon Scalable (Skylake-SP and Cascade Lake, the CPUs of the
/// Optane DC PMM generation Ni et al. measured on): 1.375 MiB per core,
/// 11-way (Intel 64 and IA-32 Architectures Optimization Reference Manual,
/// "Skylake Server Microarchitecture", its cache parameters). With the
/// default 1408 KiB: 22,528 lines in 2,048 sets.
inline constexpr unsigned kCacheWays = 11;

/// (Re)builds the media model for configure(): an empty XPLine buffer and,
/// when cache_kib > 0, an empty (all clean) cache of cache_kib KiB:
/// max(1, cache_kib * 16 / kCacheWays) sets of kCacheWays lines (a capacity
/// that is not a multiple of 11 lines loses the remainder). Not thread-safe
/// against running primitives, like configure().
void media_configure(uint32_t cache_kib);

/// The cache model's store: each 64 B line overlapping [addr, addr+n) is
/// made the most recently used line of its set and marked dirty; a line not
/// held takes the set's least recently used way, and if that way held a
/// dirty line, the victim is written back into the XPLine buffer (which may
/// evict an XPLine: one media write). Returns the media writes it counted in
/// the calling thread's media_writes (the caller charges their modelled
/// time). Only with the cache model on. Thread-safe (the model's spinlock).
uint64_t media_store(uintptr_t addr, size_t n);

/// Feeds n flushed 64 B lines (from address `line`, ascending) to the model
/// under one acquisition of its lock (none when no line is dirty). Per line,
/// cache model on:
/// a line held dirty is written back into the XPLine buffer and kept clean
/// (clwb keeps the line cached); a line held clean, or not held, writes
/// nothing (a real clwb of a clean line sends nothing to memory). Cache
/// model off: every flushed line is written back. A written-back line whose
/// XPLine is buffered combines (no media write); otherwise the XPLine enters
/// the buffer, evicting the oldest entry when full (FIFO), and the eviction
/// counts one 256 B media write in the calling thread's media_writes.
/// Returns the media writes it counted, which the caller charges as
/// modelled media time (media_write_latency_ns). Thread-safe (a spinlock,
/// taken only when the media model is on).
uint64_t media_feed_lines(uintptr_t line, uint64_t n);

}  // namespace nvindex::pm::detail
