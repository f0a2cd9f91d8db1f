// Persist primitives: process-wide configuration, flush-instruction choice,
// latency injection, mode and latency parsing, non-temporal copy
// (DESIGN.md §3 "Modes", "Primitives").
#include "nvindex/pm/persist.h"

#include <cpuid.h>
#include <emmintrin.h>

#include <charconv>
#include <chrono>
#include <cstdlib>
#include <string>

#include "pm/media.h"

namespace nvindex::pm {

namespace detail {

Globals g;

namespace {

/// CPUID leaf 7, sub-leaf 0, EBX: bit 24 = CLWB, bit 23 = CLFLUSHOPT
/// (Intel SDM Vol. 2A, CPUID, "Structured Extended Feature Flags").
FlushInstruction detect_flush_instruction() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_max(0, nullptr) < 7) return FlushInstruction::kClflush;
  __cpuid_count(7, 0, eax, ebx, ecx, edx);
  if (ebx & (1u << 24)) return FlushInstruction::kClwb;
  if (ebx & (1u << 23)) return FlushInstruction::kClflushopt;
  return FlushInstruction::kClflush;
}

/// The CPU's flush instruction capped by NVINDEX_FLUSH=clflush|clflushopt|clwb
/// (oldest to newest: clflush, clflushopt, clwb): the cap never selects an
/// instruction the CPU lacks, and an unknown value caps nothing, as
/// NVINDEX_SIMD does for SIMD. For tools that cannot decode the newer
/// instructions (valgrind 3.19 decodes clflush only) and for measuring what
/// each instruction costs.
FlushInstruction choose_flush_instruction() {
  const FlushInstruction cpu = detect_flush_instruction();
  const char* cap = std::getenv("NVINDEX_FLUSH");
  if (cap == nullptr) return cpu;
  // FlushInstruction orders newest first (kClwb = 0): a larger value is older.
  for (FlushInstruction f :
       {FlushInstruction::kClwb, FlushInstruction::kClflushopt, FlushInstruction::kClflush}) {
    if (flush_instruction_name(f) == cap) return f > cpu ? f : cpu;
  }
  return cpu;
}

/// Chooses the flush instruction once, during static initialisation. Until it
/// has run (other translation units' static initialisers), g.flush holds
/// kClflush, which every x86-64 CPU supports, so an early flush is still valid.
[[maybe_unused]] const bool g_flush_chosen = [] {
  g.flush = choose_flush_instruction();
  return true;
}();

/// Busy-waits for at least `ns` nanoseconds (steady clock; never sleeps, as
/// the emulated media delay is on the critical path of the store).
void spin_ns(uint64_t ns) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(ns);
  while (std::chrono::steady_clock::now() < until) _mm_pause();
}

}  // namespace

void before_flush(uintptr_t line, uint64_t n) {
  if (g.flush_latency_ns != 0) spin_ns(n * g.flush_latency_ns);
  if (g.media_model) {
    const uint64_t writes = media_feed_lines(line, n);
    if (writes != 0 && g.media_write_latency_ns != 0) spin_ns(writes * g.media_write_latency_ns);
  }
}

void on_store(const void* dst, size_t n, std::source_location loc, bool descending) {
  if (g.mode == Mode::kCrashSim) {
    sim_store(dst, n, loc, descending);
    return;
  }
  const uint64_t writes = media_store(reinterpret_cast<uintptr_t>(dst), n);
  if (writes != 0 && g.media_write_latency_ns != 0) spin_ns(writes * g.media_write_latency_ns);
}

void update_store_hook() {
  g.store_hook = g.mode == Mode::kCrashSim || (g.cache_model && g.mode != Mode::kDram);
}

void after_fence() {
  if (g.fence_latency_ns != 0) spin_ns(g.fence_latency_ns);
}

}  // namespace detail

std::string Site::key() const {
  if (name != nullptr) return name;
  std::string_view file = loc.file_name();
  const size_t slash = file.rfind('/');
  if (slash != std::string_view::npos) file.remove_prefix(slash + 1);
  return std::string(file) + ":" + std::to_string(loc.line());
}

std::string_view mode_name(Mode mode) {
  switch (mode) {
    case Mode::kDram:
      return "dram";
    case Mode::kEmulated:
      return "emulated";
    case Mode::kDax:
      return "dax";
    case Mode::kCrashSim:
      return "crash-sim";
  }
  return "unknown";
}

Status parse_mode(std::string_view name, Mode* out) {
  for (Mode m : {Mode::kDram, Mode::kEmulated, Mode::kDax, Mode::kCrashSim}) {
    if (name == mode_name(m)) {
      *out = m;
      return Status::Ok();
    }
  }
  return Status::InvalidArgument("unknown PM mode '" + std::string(name) +
                                 "' (valid: dram, emulated, dax, crash-sim)");
}

std::string_view flush_instruction_name(FlushInstruction f) {
  switch (f) {
    case FlushInstruction::kClwb:
      return "clwb";
    case FlushInstruction::kClflushopt:
      return "clflushopt";
    case FlushInstruction::kClflush:
      return "clflush";
  }
  return "unknown";
}

void configure(const PersistConfig& config) {
  detail::g.mode = config.mode;
  detail::g.flush_latency_ns = config.flush_latency_ns;
  detail::g.fence_latency_ns = config.fence_latency_ns;
  detail::g.media_write_latency_ns = config.media_write_latency_ns;
  detail::g.media_model = config.media_model || config.media_write_latency_ns > 0;
  detail::g.cache_kib = detail::g.media_model ? config.cache_kib : 0;
  detail::g.cache_model = detail::g.cache_kib > 0;
  detail::g.slow_path =
      config.flush_latency_ns > 0 || config.fence_latency_ns > 0 || detail::g.media_model;
  detail::media_configure(detail::g.cache_kib);
  detail::update_store_hook();
}

PersistConfig current_config() {
  PersistConfig c;
  c.mode = detail::g.mode;
  c.flush_latency_ns = detail::g.flush_latency_ns;
  c.fence_latency_ns = detail::g.fence_latency_ns;
  c.media_model = detail::g.media_model;
  c.media_write_latency_ns = detail::g.media_write_latency_ns;
  c.cache_kib = detail::g.cache_kib;
  return c;
}

Status parse_latency(std::string_view spec, PersistConfig* config) {
  const std::string usage =
      " (expected \"flush=N,fence=N,media=N\", N in ns, each part optional; media: per 256 B "
      "XPLine media write, modelled)";
  if (spec.empty()) return Status::InvalidArgument("empty latency spec" + usage);
  PersistConfig result = *config;
  bool seen_flush = false, seen_fence = false, seen_media = false;
  size_t pos = 0;
  while (pos <= spec.size()) {
    size_t comma = spec.find(',', pos);
    if (comma == std::string_view::npos) comma = spec.size();
    const std::string_view part = spec.substr(pos, comma - pos);
    const size_t eq = part.find('=');
    if (eq == std::string_view::npos) {
      return Status::InvalidArgument("bad latency item '" + std::string(part) + "'" + usage);
    }
    const std::string_view key = part.substr(0, eq);
    const std::string_view num = part.substr(eq + 1);
    uint32_t value = 0;
    const auto [end, ec] = std::from_chars(num.data(), num.data() + num.size(), value);
    if (num.empty() || ec != std::errc() || end != num.data() + num.size()) {
      return Status::InvalidArgument("bad latency value '" + std::string(num) + "' for '" +
                                     std::string(key) + "': need a whole number of ns below 2^32" +
                                     usage);
    }
    if (key == "flush" && !seen_flush) {
      result.flush_latency_ns = value;
      seen_flush = true;
    } else if (key == "fence" && !seen_fence) {
      result.fence_latency_ns = value;
      seen_fence = true;
    } else if (key == "media" && !seen_media) {
      result.media_write_latency_ns = value;
      if (value > 0) result.media_model = true;
      seen_media = true;
    } else if (key == "flush" || key == "fence" || key == "media") {
      return Status::InvalidArgument("latency '" + std::string(key) + "' given twice" + usage);
    } else {
      return Status::InvalidArgument("unknown latency key '" + std::string(key) + "'" + usage);
    }
    pos = comma + 1;
  }
  *config = result;
  return Status::Ok();
}

void nt_copy(void* dst, const void* src, size_t n, std::source_location loc) {
  if (n == 0) return;
  if (detail::g.mode == Mode::kDram) {
    std::memcpy(dst, src, n);
    return;
  }
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  const uintptr_t start = reinterpret_cast<uintptr_t>(d);
  // Split [d, d+n) into an unaligned head (up to the next 16 B boundary), a
  // 16 B-aligned body written with movntdq, an 8 B-aligned remainder written
  // with movnti, and an unaligned tail. Head and tail are plain stores that we
  // flush, so that after the caller's fence every byte is durable either way.
  size_t head = ((start + 15) & ~uintptr_t{15}) - start;
  if (head > n) head = n;
  if (detail::g.mode == Mode::kCrashSim) {
    // Every byte ends up "stored and flushed", durable at the next fence,
    // which is what the simulator records. Counted like the real path.
    std::memcpy(d, s, n);
    detail::sim_nt_store(d, n, loc);
    const size_t streamed = (n - head) & ~size_t{7};
    const uintptr_t tail = start + head + streamed;
    const uintptr_t end = start + n;
    uint64_t lines = 0;
    if (head != 0) lines += ((start + head - 1) / kLineSize) - (start / kLineSize) + 1;
    if (tail < end) lines += ((end - 1) / kLineSize) - (tail / kLineSize) + 1;
    ThreadCounters& c = thread_counters();
    bump(c.flushes, lines);
    bump(c.lines_flushed, lines);
    bump(c.nt_bytes, streamed);
    return;
  }
  // The head and tail are cached stores: the cache model sees them before
  // their flush.
  if (head != 0) {
    std::memcpy(d, s, head);
    if (detail::g.store_hook) detail::on_store(d, head, loc, false);
    flush(d, head);
  }
  size_t i = head;
  uint64_t nt = 0;
  for (; i + 16 <= n; i += 16, nt += 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i), v);
  }
  if (i + 8 <= n) {
    long long v;  // NOLINT(google-runtime-int): the intrinsic's type
    std::memcpy(&v, s + i, 8);
    _mm_stream_si64(reinterpret_cast<long long*>(d + i), v);
    i += 8;
    nt += 8;
  }
  if (i < n) {
    std::memcpy(d + i, s + i, n - i);
    if (detail::g.store_hook) detail::on_store(d + i, n - i, loc, false);
    flush(d + i, n - i);
  }
  bump(thread_counters().nt_bytes, nt);
}

}  // namespace nvindex::pm
