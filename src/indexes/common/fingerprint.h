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
///
/// Computed by XXH3's 4..8-byte path, which XXH3_64bits takes for 8 bytes
/// with the default secret and seed 0 (xxhash.h, XXH3_len_0to16_64b): about
/// 20 instructions, inlined (xxhash.h forces XXH3_len_4to8_64b inline when
/// optimizing). XXH3_64bits itself is too large for GCC to inline at an
/// insert's call sites, where it was a 29-instruction call (callgrind).
/// tests/index_lbtree_test.cc pins the result to libxxhash's XXH3_64bits.
inline uint8_t fingerprint(uint64_t key) {
  return static_cast<uint8_t>(
      XXH3_len_4to8_64b(reinterpret_cast<const xxh_u8*>(&key), sizeof(key), XXH3_kSecret, 0));
}

/// One-byte fingerprint of a byte-string key: the low byte of XXH3_64bits
/// over all its bytes (lbtree's string leaves). Persistent, as above.
inline uint8_t fingerprint(std::string_view key) {
  return static_cast<uint8_t>(XXH3_64bits(key.data(), key.size()));
}

}  // namespace nvindex
