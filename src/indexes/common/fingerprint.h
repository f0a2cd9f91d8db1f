// One-byte key fingerprints, shared by the indexes that keep fingerprints in
// their leaves (lbtree: Liu et al., VLDB'20 §3.1; fptree: Oukid et al.,
// SIGMOD'16 §3.2).
#pragma once

#include <cstdint>
#include <string_view>

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

/// One-byte fingerprint of a byte-string key: the low byte of XXH3_64bits
/// over all its bytes (lbtree's string leaves). Persistent, as above.
inline uint8_t fingerprint(std::string_view key) {
  return static_cast<uint8_t>(XXH3_64bits(key.data(), key.size()));
}

}  // namespace nvindex
