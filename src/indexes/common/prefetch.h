// Node prefetching, shared by every index that fetches a node's lines before
// it searches them (as LB+-tree's and FAST&FAIR's code prefetch whole nodes:
// Liu et al., VLDB'20 §3.2; Hwang et al., FAST'18 §4).
#pragma once

#include <cstdint>
#include <utility>

namespace nvindex {

/// Hints the CPU to fetch the 64 B line holding `p` into every cache level
/// (x86 prefetcht0). A hint only: no effect on correctness, no fault on any
/// address.
///
/// Why inline asm and not __builtin_prefetch: GCC treats the builtin as
/// free of side effects, so it infers that an out-of-line function whose
/// only work is prefetching (a `prefetch_leaf(off)` member) is const, and
/// deletes every call to it: the prefetch silently never runs. An asm
/// volatile statement is never deleted, and neither is a call to a function
/// that contains one. No "memory" clobber: loads and stores around it may
/// still be reordered freely.
inline void prefetch_line(const void* p) {
  asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(p)));
}

/// Hints the CPU to fetch the `bytes` bytes at `p` (rounded out to whole
/// 64 B lines) before a search reads them, so that the misses of one node
/// overlap instead of following one another. A hint only, as prefetch_line.
/// Unrolled by four lines (256 B, the common node size), so a 256 B node
/// costs four prefetches and one loop test.
inline void prefetch_bytes(const void* p, uint32_t bytes) {
  const char* c = static_cast<const char*>(p);
  uint32_t off = 0;
  for (; off + 256 <= bytes; off += 256) {
    prefetch_line(c + off);
    prefetch_line(c + off + 64);
    prefetch_line(c + off + 128);
    prefetch_line(c + off + 192);
  }
  for (; off < bytes; off += 64) prefetch_line(c + off);
}

/// prefetch_bytes with a compile-time size: kBytes / 64 prefetches (rounded
/// up), no loop and no test, for a descent that knows its node size.
template <uint32_t kBytes>
inline void prefetch_bytes_fixed(const void* p) {
  const char* c = static_cast<const char*>(p);
  [&]<uint32_t... I>(std::integer_sequence<uint32_t, I...>) { (prefetch_line(c + 64 * I), ...); }
  (std::make_integer_sequence<uint32_t, (kBytes + 63) / 64>{});
}

}  // namespace nvindex
