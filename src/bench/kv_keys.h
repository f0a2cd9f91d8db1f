// The key-value benchmark's keys (`nvindex kv-load`, the KV client and
// scripts/bench-kv): item i of a run with seed s has a key of key_size bytes
// that every tool computes alike from (s, i) alone, so a client can ask for
// loaded keys (or fresh ones, i >= the records loaded) without a key file.
//
// The key: the first kKvKeyCore = 11 characters are the base-62 digits
// (0-9, A-Z, a-z) of mix(i + s * golden), where mix is the splitmix64
// finalizer, a bijection of 64-bit words (each of its steps is invertible),
// so distinct i give distinct keys for one seed; the other key_size - 11
// characters are base-62 digits of a second mix, filler that looks random.
// Keys are spread uniformly over the key space (the LB+-tree paper's
// "random 20-byte string keys", §4.4), printable, and contain no space or
// control character, as memcached's ASCII protocol requires. key_size is
// kKvKeyCore..250 (memcached's limit); the LB+-tree paper's size, 20, is the
// default.
//
// The value of item i: value_size bytes, byte j = key[j mod key_size], so a
// get can check that it returned the item of its own key.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace nvindex::bench {

/// Characters fixed by the bijective part of a key.
inline constexpr uint32_t kKvKeyCore = 11;
/// Default key size, bytes (the LB+-tree paper's Memcached runs).
inline constexpr uint32_t kKvDefaultKeySize = 20;
/// Default value size, bytes (kv-load, kv-client, scripts/bench-kv).
inline constexpr uint32_t kKvDefaultValueSize = 10;
/// Largest key size, bytes (memcached's key limit).
inline constexpr uint32_t kKvMaxKeySize = 250;

/// The splitmix64 finalizer (Steele, Lea, Flood, "Fast splittable
/// pseudorandom number generators", OOPSLA 2014): a bijection on uint64_t.
inline uint64_t kv_mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

/// Writes the key of item `i` under `seed` (key_size bytes, kKvKeyCore..
/// kKvMaxKeySize; the caller checks it) to out[0, key_size).
inline void kv_key(uint64_t seed, uint64_t i, uint32_t key_size, char* out) {
  static constexpr char kDigits[] =
      "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  const uint64_t core = kv_mix(i + seed * 0x9e3779b97f4a7c15ull);
  uint64_t c = core;
  for (uint32_t j = 0; j < kKvKeyCore; ++j) {  // 62^11 > 2^64: every digit
    out[j] = kDigits[c % 62];
    c /= 62;
  }
  uint64_t fill = kv_mix(core ^ kv_mix(i ^ ~seed));
  for (uint32_t j = kKvKeyCore; j < key_size; ++j) {
    if ((j - kKvKeyCore) % 10 == 0) fill = kv_mix(fill + j);  // 10 digits per word
    out[j] = kDigits[fill % 62];
    fill /= 62;
  }
}

/// The key of item `i` as a string.
inline std::string kv_key(uint64_t seed, uint64_t i, uint32_t key_size) {
  std::string k(key_size, '\0');
  kv_key(seed, i, key_size, k.data());
  return k;
}

/// Writes the value of the item whose key is `key` (value_size bytes; see
/// the file comment) to out[0, value_size).
inline void kv_value(std::string_view key, uint32_t value_size, char* out) {
  for (uint32_t j = 0; j < value_size; ++j) out[j] = key[j % key.size()];
}

}  // namespace nvindex::bench
