// The key-value entry slot every PM node design here stores (fastfair,
// fptree, lbtree, wbtree): one struct, so its size, layout and atomicity are
// stated once.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace nvindex {

/// One entry slot of a node: 16 B, a key word then a value word (a value, or
/// a child offset in an inner node). Every node layout places slots 16 B
/// aligned, so a slot never straddles a 64 B line. Both words are atomics:
/// optimistic readers load them while a writer may store them.
///
///   offset size  field
///   ------ ----  -----
///        0    8  key
///        8    8  value (or child offset)
struct Entry {
  std::atomic<uint64_t> key;
  std::atomic<uint64_t> value;
};
static_assert(offsetof(Entry, key) == 0);
static_assert(offsetof(Entry, value) == 8);
static_assert(sizeof(Entry) == 16);

}  // namespace nvindex
