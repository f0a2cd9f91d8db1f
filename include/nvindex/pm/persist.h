// Persist primitives and the PM store helpers (DESIGN.md §3).
//
// Hardware model (DESIGN.md §6): x86 with ADR. Caches are volatile; a line is
// durable only after a flush of it followed by a fence by the same thread; an
// aligned store of 8 bytes or less is never torn.
//
// Every store an index makes to persistent memory goes through pm::store,
// pm::copy, pm::move, pm::fill or pm::nt_copy (never a raw assignment or
// memcpy), so that the crash simulator (crashsim.h, issue 3) can follow it.
// Outside Mode::kCrashSim they are plain stores plus one predictable branch.
//
// Every flush, fence, persist and naw takes a trailing Site naming the call
// site (by default the caller's file:line, recorded through
// std::source_location). The crash simulator keys its lint findings and
// ablation switches by Site::key(); in every other mode the Site is unused and
// the compiler drops it.
//
// The process-wide configuration (mode, injected latency, media model) is set
// once by configure() before any index runs; changing it while indexes run is
// not supported.
#pragma once

#include <immintrin.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <source_location>
#include <string>
#include <string_view>

#include "nvindex/pm/counters.h"
#include "nvindex/status.h"

namespace nvindex::pm {

/// Size of a CPU cache line, the unit of flushing, in bytes.
inline constexpr size_t kLineSize = 64;
/// Size of an Optane XPLine, the media's internal write unit, in bytes.
inline constexpr size_t kXPLineSize = 256;

/// How persistent memory is provided (DESIGN.md §3 "Modes").
enum class Mode : uint8_t {
  kDram,      ///< volatile: flush and fence do nothing (and count nothing)
  kEmulated,  ///< DRAM-backed mapping, real clwb/clflushopt/sfence (default)
  kDax,       ///< real persistent memory on a DAX file system
  kCrashSim,  ///< every store, flush and fence routed to the crash simulator
              ///< (crashsim.h); flush and fence execute no instruction but
              ///< still count. Without an attached Simulator they only count.
};

/// "dram", "emulated", "dax", "crash-sim".
std::string_view mode_name(Mode mode);
/// Parses a mode name; InvalidArgument listing the valid names otherwise.
Status parse_mode(std::string_view name, Mode* out);

/// The flush instruction in use, chosen once at start-up from CPUID:
/// clwb if present, else clflushopt, else clflush (Intel SDM Vol. 2A, CPUID
/// leaf 7 EBX bits 24 and 23). NVINDEX_FLUSH=clflush|clflushopt|clwb in the
/// environment caps it at that instruction, never choosing one the CPU
/// lacks; an unknown value caps nothing (as NVINDEX_SIMD caps the SIMD
/// level). valgrind 3.19 decodes clflush but not clwb: run under it with
/// NVINDEX_FLUSH=clflush. Reports name the instruction in use.
enum class FlushInstruction : uint8_t { kClwb, kClflushopt, kClflush };
std::string_view flush_instruction_name(FlushInstruction f);

/// Default capacity of the media model's modelled CPU cache, KiB: 1.375 MiB,
/// one core's share of the last-level cache of the Xeon Scalable CPUs
/// (Skylake-SP, Cascade Lake) that Optane DC PMM pairs with (Intel 64 and
/// IA-32 Architectures Optimization Reference Manual, "Skylake Server
/// Microarchitecture"), 11-way
/// (src/pm/media.h).
inline constexpr uint32_t kDefaultCacheKiB = 1408;

/// Process-wide persistence settings.
struct PersistConfig {
  Mode mode = Mode::kEmulated;
  uint32_t flush_latency_ns = 0;  ///< busy-wait added per flushed line, ns
  uint32_t fence_latency_ns = 0;  ///< busy-wait added per fence, ns
  bool media_model = false;       ///< feed flushed lines to the XPLine model
  /// Modelled media time: busy-wait, ns, charged to the flushing thread per
  /// 256 B XPLine media write the media model counts (an eviction from its
  /// write-combining buffer; media_drain's end-of-phase writes are counted
  /// but not charged). Nonzero turns the media model on (configure()).
  uint32_t media_write_latency_ns = 0;
  /// Capacity of the media model's modelled CPU write-back cache, KiB
  /// (media.h: kCacheWays-way set-associative, LRU; every pm::store, copy,
  /// move, fill and cas dirties its lines there, and a line reaches the
  /// XPLine buffer only when it is written back: flushed while dirty, or
  /// evicted dirty). Default kDefaultCacheKiB, one core's share of a
  /// Cascade Lake LLC. 0 turns the cache model off: every flushed line goes
  /// to the XPLine buffer, stores are not followed (the model before the
  /// cache existed). Used only with media_model.
  uint32_t cache_kib = kDefaultCacheKiB;
};

/// Installs `config` for the whole process. Call before creating indexes; not
/// thread-safe against running primitives. Latency or the media model turn on
/// the slow path of flush()/fence() (one predictable branch when off).
void configure(const PersistConfig& config);
/// Parses "flush=N,fence=N,media=N" (each part optional, in any order, N in
/// ns below 2^32) into *config: flush_latency_ns, fence_latency_ns and
/// media_write_latency_ns (media=N with N > 0 also sets media_model).
/// InvalidArgument on any other text, a part given twice or an empty spec;
/// *config is unchanged on error.
Status parse_latency(std::string_view spec, PersistConfig* config);

/// A flush or fence call site: a stable name or the caller's file:line. Used
/// only in Mode::kCrashSim (lint findings, per-site counts, ablation
/// switches); free elsewhere (never read, so optimised away). Name sites that
/// an ablation self-test should address stably:
///   pm::persist(p, n, {"fastfair.insert.slot"});
struct Site {
  const char* name;          ///< stable name, e.g. "fastfair.split.publish"; nullptr = file:line
  std::source_location loc;  ///< where the call was written
  // NOLINTNEXTLINE(google-explicit-constructor): {"name"} at call sites is the point.
  Site(const char* n = nullptr, std::source_location l = std::source_location::current())
      : name(n), loc(l) {}
  /// The site's key: `name` if set, else "<file basename>:<line>", e.g.
  /// "fastfair.cc:412".
  std::string key() const;
};

namespace detail {
/// The crash simulator's per-process state (crashsim.cc); opaque here.
struct SimState;

struct Globals {
  Mode mode = Mode::kEmulated;
  FlushInstruction flush = FlushInstruction::kClflush;
  uint32_t flush_latency_ns = 0;
  uint32_t fence_latency_ns = 0;
  uint32_t media_write_latency_ns = 0;
  uint32_t cache_kib = 0;  ///< PersistConfig::cache_kib (0 with the media model off)
  bool media_model = false;
  bool cache_model = false;  ///< media_model with cache_kib > 0 (media.h)
  bool slow_path = false;    ///< latency or media model on
  /// Stores call on_store(): Mode::kCrashSim, or the cache model outside
  /// Mode::kDram. One byte tested after every store, as the mode was.
  bool store_hook = false;
  SimState* sim = nullptr;  ///< the attached crash simulator (kCrashSim only)
};
extern Globals g;

// Crash-simulator hooks (crashsim.cc), called only in Mode::kCrashSim. They
// do nothing but count when no Simulator is attached, and ignore addresses
// outside the attached pool. Stores are reported after they were made: the
// simulator reads the new bytes back from memory. Site and source_location
// are passed by value (one or two pointers, in registers) and the hooks are
// cold, so that the fast path of the other modes never materialises them.
/// [dst, dst+n) was just written; chunks recorded in ascending address order,
/// or descending when `descending` (memmove to a higher address).
[[gnu::cold]] void sim_store(const void* dst, size_t n, std::source_location loc, bool descending);
/// Non-temporal stores to [dst, dst+n) were just made: store + flush.
[[gnu::cold]] void sim_nt_store(const void* dst, size_t n, std::source_location loc);
/// flush(addr, len, site) in kCrashSim: records (unless ablated) and counts.
[[gnu::cold]] void sim_flush(const void* addr, size_t len, Site site);
/// fence(site) in kCrashSim: crash point, commit (unless ablated), counts.
[[gnu::cold]] void sim_fence(Site site);
/// Latency injection and media model for the n lines from `line` that a
/// flush() is about to flush (cold path). Called before the flush
/// instructions: the media model's spinlock is a locked instruction, which
/// would wait for every earlier clwb to complete (an ordering real code
/// without a fence does not pay); before them it waits only for clwbs of
/// earlier calls, which have usually completed.
void before_flush(uintptr_t line, uint64_t n);
/// A store helper's hook when g.store_hook is set: [dst, dst+n) was just
/// written. kCrashSim: sim_store(); otherwise the cache model dirties the
/// lines (and charges modelled media time for the media writes that
/// evictions caused).
[[gnu::cold]] void on_store(const void* dst, size_t n, std::source_location loc, bool descending);
/// Recomputes g.store_hook from g.mode and g.cache_model (configure() and the
/// crash simulator, which switch the mode, call it).
void update_store_hook();
/// Latency injection after a fence (cold path).
void after_fence();
}  // namespace detail

/// The configuration in force.
PersistConfig current_config();
/// The flush instruction chosen at start-up.
inline FlushInstruction flush_instruction() { return detail::g.flush; }

namespace detail {
/// The flush instruction chosen at start-up (g.flush) on the line at `p`:
/// no counting, no simulator (flush() and naw() do those).
__attribute__((always_inline)) inline void flush_line(char* p) {
  switch (g.flush) {
    case FlushInstruction::kClwb:
      asm volatile(".byte 0x66; xsaveopt %0" : "+m"(*p));
      break;
    case FlushInstruction::kClflushopt:
      asm volatile(".byte 0x66; clflush %0" : "+m"(*p));
      break;
    case FlushInstruction::kClflush:
      asm volatile("clflush %0" : "+m"(*p));
      break;
  }
}
}  // namespace detail

/// Flushes every 64 B line overlapping [addr, addr+len) with one flush
/// instruction per line (clwb, clflushopt or clflush). Not ordered until the
/// next fence(). Counts one flush and one line per line. No-op in kDram. In
/// kCrashSim: recorded by the simulator, no instruction executed.
inline void flush(const void* addr, size_t len, Site site = Site()) {
  if (detail::g.mode == Mode::kDram || len == 0) return;
  if (__builtin_expect(detail::g.mode == Mode::kCrashSim, 0)) {
    detail::sim_flush(addr, len, site);
    return;
  }
  uintptr_t line = reinterpret_cast<uintptr_t>(addr) & ~(kLineSize - 1);
  const uintptr_t end = reinterpret_cast<uintptr_t>(addr) + len;
  if (__builtin_expect(detail::g.slow_path, 0)) {
    detail::before_flush(line, (end - line + kLineSize - 1) / kLineSize);
  }
  uint64_t n = 0;
  for (; line < end; line += kLineSize, ++n) detail::flush_line(reinterpret_cast<char*>(line));
  ThreadCounters& c = thread_counters();
  bump(c.flushes, n);
  bump(c.lines_flushed, n);
}

/// Store fence (sfence): orders every earlier flush and non-temporal store of
/// this thread before every later store. Counts one fence. No-op in kDram. In
/// kCrashSim: a crash point, then the simulator commits this thread's flushes.
inline void fence(Site site = Site()) {
  if (detail::g.mode == Mode::kDram) return;
  if (__builtin_expect(detail::g.mode == Mode::kCrashSim, 0)) {
    detail::sim_fence(site);
    return;
  }
  _mm_sfence();
  bump(thread_counters().fences);
  if (__builtin_expect(detail::g.slow_path, 0)) detail::after_fence();
}

/// flush(addr, len) then fence(): [addr, addr+len) is durable on return.
/// Both carry `site`.
inline void persist(const void* addr, size_t len, Site site = Site()) {
  flush(addr, len, site);
  fence(site);
}

/// The 8-byte NVM atomic write: store `value` to the aligned commit word, then
/// flush its line and fence. After a crash the word holds the old or the new
/// value, never a mix. Counts one NAW (plus its flush and fence); in kDram
/// it is a plain store and counts nothing.
/// `site` names its flush and fence.
///
/// The common case (kEmulated or kDax, no latency or media model) is
/// written out: an aligned word is one line, so one flush instruction, the
/// fence, and the four counters bumped through one thread_counters()
/// (persist() would loop over the lines and look the counters up three
/// times: about 37 instructions a NAW, callgrind). Counts as persist() of
/// the word plus one NAW (tests/pm_persist_test.cc compares every counter).
inline void naw(std::atomic<uint64_t>* word, uint64_t value, Site site = Site()) {
  word->store(value, std::memory_order_release);
  if (__builtin_expect(detail::g.store_hook, 0)) {
    detail::on_store(word, sizeof(*word), site.loc, false);
  }
  if (detail::g.mode == Mode::kDram) return;
  if (__builtin_expect(detail::g.mode == Mode::kCrashSim || detail::g.slow_path, 0)) {
    persist(word, sizeof(*word), site);
    bump(thread_counters().naws);
    return;
  }
  detail::flush_line(reinterpret_cast<char*>(word));
  _mm_sfence();
  ThreadCounters& c = thread_counters();
  bump(c.flushes);
  bump(c.lines_flushed);
  bump(c.fences);
  bump(c.naws);
}

/// PM store helper: *dst = value for a trivially copyable T of at most 8
/// bytes, naturally aligned (never torn). Every PM store goes through here.
/// `loc` (the caller's, by default) keys the crash simulator's lint finding
/// when the store is still not durable at an operation's return.
template <class T>
__attribute__((always_inline)) inline void store(
    T* dst, T value, std::source_location loc = std::source_location::current()) {
  static_assert(sizeof(T) <= 8, "pm::store is for words; use pm::copy");
  *dst = value;
  if (__builtin_expect(detail::g.store_hook, 0)) {
    detail::on_store(dst, sizeof(T), loc, false);
  }
}

/// PM store helper for a commit word that concurrent readers load: an atomic
/// release store, not yet flushed (pair with flush/fence, or use naw()).
__attribute__((always_inline)) inline void store(
    std::atomic<uint64_t>* dst, uint64_t value,
    std::source_location loc = std::source_location::current()) {
  dst->store(value, std::memory_order_release);
  if (__builtin_expect(detail::g.store_hook, 0)) {
    detail::on_store(dst, sizeof(*dst), loc, false);
  }
}

/// PM store helper for a narrower atomic word (a one-byte fingerprint or lock
/// byte, a 16-bit header word) that concurrent readers load: an atomic release
/// store, not yet flushed, reported to the crash simulator like store().
template <class T>
inline void store(std::atomic<T>* dst, T value,
                  std::source_location loc = std::source_location::current()) {
  static_assert(sizeof(T) <= 8, "pm::store is for words; use pm::copy");
  dst->store(value, std::memory_order_release);
  if (__builtin_expect(detail::g.store_hook, 0)) {
    detail::on_store(dst, sizeof(T), loc, false);
  }
}
/// PM compare-and-swap helper (e.g. a persistent lock bit or byte): one
/// compare_exchange_weak with acquire order on success; true when it stored
/// `desired` (reported to the crash simulator as a store, not flushed); false
/// with *expected updated otherwise (may fail spuriously: call in a loop).
template <class T>
inline bool cas(std::atomic<T>* dst, T* expected, T desired,
                std::source_location loc = std::source_location::current()) {
  static_assert(sizeof(T) <= 8, "pm::cas is for words");
  if (!dst->compare_exchange_weak(*expected, desired, std::memory_order_acquire,
                                  std::memory_order_relaxed)) {
    return false;
  }
  if (__builtin_expect(detail::g.store_hook, 0)) {
    detail::on_store(dst, sizeof(T), loc, false);
  }
  return true;
}
/// PM compare-and-swap helper for a word that other threads also CAS (a
/// PMwCAS target word or descriptor status, pm/pmwcas.h): one
/// compare_exchange_strong with acq_rel order on success (the new value
/// publishes everything the caller wrote before it); true when it stored
/// `desired` (reported to the crash simulator as a store, not flushed);
/// false with *expected updated otherwise (never spuriously).
template <class T>
inline bool cas_strong(std::atomic<T>* dst, T* expected, T desired,
                       std::source_location loc = std::source_location::current()) {
  static_assert(sizeof(T) <= 8, "pm::cas_strong is for words");
  if (!dst->compare_exchange_strong(*expected, desired, std::memory_order_acq_rel,
                                    std::memory_order_acquire)) {
    return false;
  }
  if (__builtin_expect(detail::g.store_hook, 0)) {
    detail::on_store(dst, sizeof(T), loc, false);
  }
  return true;
}
/// PM copy helper: memcpy into PM (regions must not overlap). The crash
/// simulator sees it as aligned chunks of <= 8 bytes in ascending order.
inline void copy(void* dst, const void* src, size_t n,
                 std::source_location loc = std::source_location::current()) {
  std::memcpy(dst, src, n);
  if (__builtin_expect(detail::g.store_hook, 0)) {
    detail::on_store(dst, n, loc, false);
  }
}

/// PM move helper: memmove into PM (regions may overlap). The crash simulator
/// sees aligned chunks of <= 8 bytes in ascending order, or in descending
/// order when dst > src (a real memmove may copy backwards then, so a crash
/// may keep the high end of the move without the low end).
inline void move(void* dst, const void* src, size_t n,
                 std::source_location loc = std::source_location::current()) {
  std::memmove(dst, src, n);
  if (__builtin_expect(detail::g.store_hook, 0)) {
    detail::on_store(dst, n, loc, dst > src);
  }
}

/// PM fill helper: memset into PM (chunks in ascending order, as copy).
inline void fill(void* dst, int byte, size_t n,
                 std::source_location loc = std::source_location::current()) {
  std::memset(dst, byte, n);
  if (__builtin_expect(detail::g.store_hook, 0)) {
    detail::on_store(dst, n, loc, false);
  }
}

/// Non-temporal copy of n bytes into PM (bypasses the cache; still needs a
/// fence() to be ordered and durable). Any alignment: the 16 B-aligned part of
/// the destination is written with movntdq, an 8 B remainder with movnti, and
/// the unaligned head and tail (< 16 B each) with plain stores that are
/// flushed. Counts only the streamed bytes as nt_bytes (plus the flushed head
/// and tail lines). In kDram a plain memcpy that counts nothing. In kCrashSim
/// a memcpy that the simulator records as stores plus flushes of every line
/// (durable at the next fence), counted as above.
void nt_copy(void* dst, const void* src, size_t n,
             std::source_location loc = std::source_location::current());

/// Adds n bytes to this thread's log-bytes counter (WAL and micro-logs call
/// this for every record they append).
inline void count_log_bytes(uint64_t n) { bump(thread_counters().log_bytes, n); }

/// Media model (DESIGN.md §3, docs/pm.md "Media model"), two stages:
///
/// 1. A modelled CPU write-back cache (PersistConfig::cache_kib; 0 = off):
///    every pm::store, copy, move, fill, cas and naw dirties its 64 B lines in
///    a set-associative LRU cache; a dirty line leaves it (is written back)
///    when a flush reaches it, or when a store's line evicts it. A flush of a
///    line the cache holds clean, or does not hold, writes nothing (as a real
///    clwb of a clean line). With the cache off, every flushed line is
///    written back.
/// 2. Written-back lines enter a FIFO write-combining buffer of 64 XPLines
///    (16 KiB, like Optane's XPBuffer, Yang et al. FAST'20 §3.2); a line whose
///    XPLine is buffered combines for free, an XPLine that leaves the buffer
///    counts one 256 B media write (media_writes) in the thread that evicted it.
///
/// Every written-back line counts one lines_written_back. Media write
/// amplification = media_writes * 256 / (lines_written_back * 64), computed
/// by the harness. Lines written with nt_copy's non-temporal stores are not
/// fed to the model (its flushed head and tail lines are).
///
/// media_drain() ends a phase: it writes back every line the cache holds
/// dirty (set by set, each set's least recently used first) into the
/// buffer, then drains the buffer (each entry still held becomes one 256 B
/// media write), so that media_writes and lines_written_back are complete
/// and the next phase starts with a clean cache and an empty buffer. These
/// writes are counted (in the calling thread) but never charged as media
/// time. Call at the start and the end of a measured phase. No-op when the
/// model is off.
void media_drain();

}  // namespace nvindex::pm
