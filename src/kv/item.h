// The KV store's persistent records (docs/kv.md "Item format"): the item
// and the store root, both blocks of the pool's item arena
// (pm::Allocator::Arena::kItems).
//
// Item, at a block of at least 40 + key + value bytes:
//
//   offset size  field                written
//   ------ ----  -------------------  -------------------------------------
//        0    4  magic "NVKI"         once, before the item is published
//        4    1  key length, 1..250   once
//        5    3  zero                 once
//        8    4  value length, bytes  once
//       12    4  client flags         once
//       16    8  CAS unique (>= 1)    once
//       24    4  store time, Unix s   once (flush_all with a delay)
//       28    4  checksum: low 32 bits of XXH3_64 (seed 0) over bytes
//                [0, 28), the key and the value
//                                     once
//       32    8  expiry, Unix s       at publication; touch rewrites it in
//                (0 = never)          place by NAW (outside the checksum)
//       40    k  key bytes            once
//     40+k    v  value bytes          once
//
// Crash argument: an item is written whole and persisted (its lines
// flushed, one fence) before the index stores its offset, and it is never
// changed afterwards but for the expiry word, an aligned 8-byte NAW: so a
// key the index maps after a crash names an item that is whole, with the
// old or the new expiry. An item no key reaches after a crash (a write that
// did not publish, or a replaced one whose free had not happened) is freed
// by recovery's walk.
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

inline constexpr uint32_t kItemMagic = 0x494b564e;  // "NVKI" in memory order
inline constexpr uint32_t kItemHeaderBytes = 40;

/// The item header (byte table above).
struct ItemHeader {
  uint32_t magic;
  uint8_t key_bytes;
  uint8_t zero[3];
  uint32_t value_bytes;
  uint32_t flags;
  uint64_t cas;
  uint32_t store_time;
  uint32_t checksum;
  std::atomic<uint64_t> expiry;  ///< Unix s, 0 = never

  const char* key() const { return reinterpret_cast<const char*>(this) + kItemHeaderBytes; }
  const char* value() const { return key() + key_bytes; }
  std::string_view key_view() const { return {key(), key_bytes}; }
  std::string_view value_view() const { return {value(), value_bytes}; }
};
static_assert(offsetof(ItemHeader, magic) == 0);
static_assert(offsetof(ItemHeader, key_bytes) == 4);
static_assert(offsetof(ItemHeader, zero) == 5);
static_assert(offsetof(ItemHeader, value_bytes) == 8);
static_assert(offsetof(ItemHeader, flags) == 12);
static_assert(offsetof(ItemHeader, cas) == 16);
static_assert(offsetof(ItemHeader, store_time) == 24);
static_assert(offsetof(ItemHeader, checksum) == 28);
static_assert(offsetof(ItemHeader, expiry) == 32);
static_assert(sizeof(ItemHeader) == kItemHeaderBytes);

/// Bytes of an item with a `key`-byte key and a `value`-byte value.
inline uint64_t item_bytes(size_t key, size_t value) { return kItemHeaderBytes + key + value; }

/// The checksum field of an item: over header bytes [0, 28), key, value.
inline uint32_t item_checksum(const ItemHeader& h, std::string_view key, std::string_view value) {
  XXH3_state_t st;
  XXH3_64bits_reset(&st);
  XXH3_64bits_update(&st, &h, offsetof(ItemHeader, checksum));
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
