// One-byte key fingerprints and node prefetching, shared by the indexes that
// keep fingerprints in their leaves (lbtree: Liu et al., VLDB'20 §3.1;
// fptree: Oukid et al., SIGMOD'16 §3.2) and by every index that prefetches a
// node before searching it.
#pragma once

#include <cstdint>

// Inline XXH3 (the same function, with the same results, as the library's
// XXH3_64bits): a fingerprint is then a few multiplies on the lookup's path,
// not a call into libxxhash.
#define XXH_INLINE_ALL
#include <xxhash.h>

namespace nvindex {

/// One-byte fingerprint of an 8-byte integer key: the low byte of
/// XXH3_64bits over its 8 bytes (little-endian). Any byte value, 0 included,
/// is a valid fingerprint. Persistent: fingerprints stored in PM leaves were
/// made by this function, so it must never change for a pool format.
inline uint8_t fingerprint(uint64_t key) {
  return static_cast<uint8_t>(XXH3_64bits(&key, sizeof(key)));
}

/// Hints the CPU to fetch the `bytes` bytes at `p` (rounded out to whole
/// 64 B lines) before a search reads them, so that the misses of one node
/// overlap instead of following one another. A hint only: no effect on
/// correctness, no fault on any address.
inline void prefetch_bytes(const void* p, uint32_t bytes) {
  const char* c = static_cast<const char*>(p);
  for (uint32_t off = 0; off < bytes; off += 64) __builtin_prefetch(c + off);
}

}  // namespace nvindex
