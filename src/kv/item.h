// The KV store's persistent records (docs/kv.md "Item format"): the item
// and the store root, both blocks of the pool's item arena
// (pm::Allocator::Arena::kItems).
//
// Item, at a block of at least 32 + key + value bytes:
//
//   offset size  field                written
//   ------ ----  -------------------  -------------------------------------
//        0    8  CAS unique (>= 1)    once, before the item is published
//        8    4  value length, bytes  once
//       12    4  client flags         once
//       16    4  expiry, Unix s       at publication; touch rewrites the
//                (0 = never)          8-byte word [16, 24) in place by NAW
//       20    4  store time, Unix s   once (flush_all with a delay; touch's
//                                     NAW writes it unchanged)
//       24    4  checksum: low 32 bits of XXH3_64 (seed 0) over bytes
//                [0, 16), [20, 24), [28, 32), the key and the value (all
//                but the expiry and the checksum)
//                                     once
//       28    1  key length, 1..250   once
//       29    1  magic 0xa7           once
//       30    2  zero                 once
//       32    k  key bytes            once
//     32+k    v  value bytes          once
//
// So an item of a 20-byte key and a value of up to 12 bytes is one 64 B
// line (the LB+-tree paper's Memcached keys are 20 bytes).
//
// Crash argument: an item is written whole and persisted (its lines
// flushed, one fence) before the index stores its offset, and it is never
// changed afterwards but for the expiry, in an aligned 8-byte word written
// by NAW: so a key the index maps after a crash names an item that is
// whole, with the old or the new expiry. An item no key reaches after a
// crash (a write that did not publish, or a replaced one whose free had
// not happened) is freed by recovery's walk.
//
// Store root, a 64-byte block, named by the pool header's store_root word:
//
//   offset size  field                written
//   ------ ----  -------------------  -------------------------------------
//        0    8  magic "NVKVSTR\0"    once, before the store root NAW
//        8    4  format version (1)   once
//       12    4  zero
//       16    8  oldest CAS: items with a CAS unique <= it are flushed
//                                     flush_all (NAW)
//       24    8  oldest live, Unix s: from that time on, items stored at or
//                before it are flushed (0 = none)
//                                     flush_all with a delay (NAW)
//       32    8  close record: item bytes (allocator class sizes) at the last
//                clean close, 0 = none
//                                     at close; cleared by recovery
//       40    8  close record: items at the last clean close, plus one
//                                     at close; cleared by recovery
//       48   16  zero
#pragma once

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack
#include <xxhash.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace nvindex::kv {

inline constexpr uint8_t kItemMagic = 0xa7;
inline constexpr uint32_t kItemHeaderBytes = 32;

/// The item header (byte table above).
struct ItemHeader {
  uint64_t cas;
  uint32_t value_bytes;
  uint32_t flags;
  /// expiry (low 32 bits, Unix s, 0 = never) | store time << 32: the word
  /// touch rewrites by NAW.
  std::atomic<uint64_t> times;
  uint32_t checksum;
  uint8_t key_bytes;
  uint8_t magic;
  uint8_t zero[2];

  const char* key() const { return reinterpret_cast<const char*>(this) + kItemHeaderBytes; }
  const char* value() const { return key() + key_bytes; }
  std::string_view key_view() const { return {key(), key_bytes}; }
  std::string_view value_view() const { return {value(), value_bytes}; }
  uint32_t expiry() const { return static_cast<uint32_t>(times.load(std::memory_order_acquire)); }
  uint32_t store_time() const {
    return static_cast<uint32_t>(times.load(std::memory_order_acquire) >> 32);
  }
};
static_assert(offsetof(ItemHeader, cas) == 0);
static_assert(offsetof(ItemHeader, value_bytes) == 8);
static_assert(offsetof(ItemHeader, flags) == 12);
static_assert(offsetof(ItemHeader, times) == 16);
static_assert(offsetof(ItemHeader, checksum) == 24);
static_assert(offsetof(ItemHeader, key_bytes) == 28);
static_assert(offsetof(ItemHeader, magic) == 29);
static_assert(offsetof(ItemHeader, zero) == 30);
static_assert(sizeof(ItemHeader) == kItemHeaderBytes);

/// The 8-byte word at offset 16: expiry and store time (Unix s).
inline uint64_t item_times(uint32_t expiry, uint32_t store_time) {
  return uint64_t{expiry} | uint64_t{store_time} << 32;
}

/// Bytes of an item with a `key`-byte key and a `value`-byte value.
inline uint64_t item_bytes(size_t key, size_t value) { return kItemHeaderBytes + key + value; }

/// The checksum field of an item: over header bytes [0, 16), [20, 24),
/// [28, 32), the key and the value.
inline uint32_t item_checksum(const ItemHeader& h, std::string_view key, std::string_view value) {
  const auto* b = reinterpret_cast<const unsigned char*>(&h);
  XXH3_state_t st;
  XXH3_64bits_reset(&st);
  XXH3_64bits_update(&st, b, 16);
  XXH3_64bits_update(&st, b + 20, 4);
  XXH3_64bits_update(&st, b + 28, 4);
  XXH3_64bits_update(&st, key.data(), key.size());
  XXH3_64bits_update(&st, value.data(), value.size());
  return static_cast<uint32_t>(XXH3_64bits_digest(&st));
}

inline constexpr char kStoreMagic[8] = {'N', 'V', 'K', 'V', 'S', 'T', 'R', '\0'};
inline constexpr uint32_t kStoreVersion = 1;
inline constexpr uint32_t kStoreRootBytes = 64;

/// The store root (byte table above).
struct StoreRoot {
  char magic[8];
  uint32_t version;
  uint32_t zero;
  std::atomic<uint64_t> oldest_cas;
  std::atomic<uint64_t> oldest_live;
  std::atomic<uint64_t> close_bytes;
  std::atomic<uint64_t> close_items_plus_one;
  uint64_t reserved[2];
};
static_assert(offsetof(StoreRoot, magic) == 0);
static_assert(offsetof(StoreRoot, version) == 8);
static_assert(offsetof(StoreRoot, zero) == 12);
static_assert(offsetof(StoreRoot, oldest_cas) == 16);
static_assert(offsetof(StoreRoot, oldest_live) == 24);
static_assert(offsetof(StoreRoot, close_bytes) == 32);
static_assert(offsetof(StoreRoot, close_items_plus_one) == 40);
static_assert(offsetof(StoreRoot, reserved) == 48);
static_assert(sizeof(StoreRoot) == kStoreRootBytes);

}  // namespace nvindex::kv
