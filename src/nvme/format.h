// On-disk format of the PA-Tree B+-tree (issue 14): a superblock in node slot
// 0 and nodes of node_size bytes (512..4096, a power of two) in slots
// 1..slots-1, slot i at byte offset i * node_size. Integers little-endian.
//
// Superblock (the first 512 B of slot 0; one sector, so its write is atomic
// on any device, which writes sectors whole):
//   0  magic "NVIXPAT1" (8 B)       8  format version (u32) = 1
//   12 node size, bytes (u32)       16 slots in the store (u64)
//   24 root node (u64)              32 height, levels (u32; 1 = root is a leaf)
//   36 clean (u32: 1 after a clean close, 0 while open)
//   40 high-water mark (u64: slots [1, hwm) have ever been allocated)
//   48 free-list head (u64: valid when clean; 0 = none)
//   56 free slots on the list (u64)  64 generation (u64: +1 per write)
//   504 checksum (u64, XXH64 of bytes 0..503)
//
// Node (node_size bytes; a 32 B header, then the entries):
//   0  checksum (u32: the low 32 bits of XXH64 of bytes 4..node_size)
//   4  level (u16: 0 = leaf; kFreeListLevel = a free-list page)
//   6  count (u16: keys in a node, slot ids in a free-list page)
//   8  right sibling (u64: 0 = rightmost of its level; the next page of the
//      free list)
//   16 high key (u64: every key in the node < high key; meaningful when
//      right != 0: Lehman and Yao's B-link "high key", the first key of the
//      right sibling's range)
//   24 reserved (u64, 0)
//   Leaf: keys[cap] at 32, values[cap] after them; cap = (node_size-32)/16
//         (30 at 512 B, 254 at 4096 B). keys ascending.
//   Inner: keys[cap] at 32, children[cap+1] after them; cap =
//         (node_size-40)/16 (29 at 512 B). child i holds the keys k with
//         keys[i-1] <= k < keys[i].
//   Free-list page: slot ids[(node_size-32)/8] at 32.
// The node checksum finds a torn or damaged node (a write of a node larger
// than one sector that a power failure cut short, or a stray write) when it
// is read; it does not repair it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "nvindex/status.h"

namespace nvindex::nvme {

inline constexpr char kSuperMagic[8] = {'N', 'V', 'I', 'X', 'P', 'A', 'T', '1'};
inline constexpr uint32_t kFormatVersion = 1;
/// Bytes of the superblock that are written and checksummed.
inline constexpr uint32_t kSuperBytes = 512;
inline constexpr uint32_t kNodeHeaderBytes = 32;
/// Node level value that marks a free-list page.
inline constexpr uint16_t kFreeListLevel = 0xffff;

/// True for a node size PA-Tree takes: a power of two in 512..4096 B.
inline bool valid_node_size(uint32_t s) { return s >= 512 && s <= 4096 && (s & (s - 1)) == 0; }

/// Keys a leaf of node_size bytes holds.
inline uint32_t leaf_capacity(uint32_t node_size) { return (node_size - kNodeHeaderBytes) / 16; }
/// Keys an inner node holds (children: one more).
inline uint32_t inner_capacity(uint32_t node_size) {
  return (node_size - kNodeHeaderBytes - 8) / 16;
}
/// Slot ids a free-list page holds.
inline uint32_t free_page_capacity(uint32_t node_size) {
  return (node_size - kNodeHeaderBytes) / 8;
}

/// The superblock's fields (in memory).
struct Super {
  uint32_t node_size = 0;
  uint64_t slots = 0;
  uint64_t root = 0;
  uint32_t height = 0;
  bool clean = false;
  uint64_t hwm = 1;
  uint64_t free_head = 0;
  uint64_t free_count = 0;
  uint64_t generation = 0;
};

/// Writes `s` into the first kSuperBytes of `buf` with its checksum.
void encode_super(const Super& s, std::byte* buf);
/// Reads a superblock from `buf`. Corruption (naming `path`) when the magic
/// is wrong ("not a PA-Tree store"), the checksum does not match ("torn or
/// damaged superblock"), the version is unknown, or a field is out of range
/// (node size, root or hwm beyond `slots`, slots beyond device_bytes).
Status decode_super(const std::byte* buf, uint64_t device_bytes, const std::string& path,
                    Super* out);

/// A view of one node image of node_size bytes (no ownership).
class NodeView {
 public:
  NodeView(std::byte* p, uint32_t node_size) : p_(p), size_(node_size) {}

  uint16_t level() const { return get<uint16_t>(4); }
  void set_level(uint16_t v) { put<uint16_t>(4, v); }
  uint32_t count() const { return get<uint16_t>(6); }
  void set_count(uint32_t v) { put<uint16_t>(6, static_cast<uint16_t>(v)); }
  uint64_t right() const { return get<uint64_t>(8); }
  void set_right(uint64_t v) { put<uint64_t>(8, v); }
  uint64_t high_key() const { return get<uint64_t>(16); }
  void set_high_key(uint64_t v) { put<uint64_t>(16, v); }
  bool is_leaf() const { return level() == 0; }

  /// Keys this node can hold (leaf or inner by level()).
  uint32_t capacity() const { return is_leaf() ? leaf_capacity(size_) : inner_capacity(size_); }
  bool full() const { return count() >= capacity(); }
  uint64_t key(uint32_t i) const { return get<uint64_t>(kNodeHeaderBytes + 8 * i); }
  void set_key(uint32_t i, uint64_t k) { put<uint64_t>(kNodeHeaderBytes + 8 * i, k); }
  /// Leaf value i.
  uint64_t value(uint32_t i) const { return get<uint64_t>(values_at() + 8 * i); }
  void set_value(uint32_t i, uint64_t v) { put<uint64_t>(values_at() + 8 * i, v); }
  /// Inner child i (0..count()).
  uint64_t child(uint32_t i) const { return get<uint64_t>(children_at() + 8 * i); }
  void set_child(uint32_t i, uint64_t c) { put<uint64_t>(children_at() + 8 * i, c); }

  /// First i with key(i) >= k (count() when none): binary search.
  uint32_t lower_bound(uint64_t k) const;
  /// Inner: the child index for key k (keys[i-1] <= k < keys[i]).
  uint32_t child_index(uint64_t k) const;
  /// True when key k is beyond this node (right sibling set and k >= high
  /// key): a B-link search moves right.
  bool beyond(uint64_t k) const { return right() != 0 && k >= high_key(); }

  /// Leaf: inserts (k, v) at position i (count() < capacity()).
  void leaf_insert_at(uint32_t i, uint64_t k, uint64_t v);
  /// Leaf: removes position i.
  void leaf_remove_at(uint32_t i);
  /// Inner: inserts separator k with right child c at key position i.
  void inner_insert_at(uint32_t i, uint64_t k, uint64_t c);

  /// Splits a full node into itself (the lower half) and `right` (zeroed
  /// node_size bytes; gets the upper half, this node's right link and high
  /// key), links this node to right_id with the separator as high key, and
  /// returns the separator: the first key of `right` for a leaf, the middle
  /// key (moved up, kept in neither) for an inner node.
  uint64_t split_into(NodeView right, uint64_t right_id);

  /// Clears the node to an empty one of `level`.
  void init(uint16_t level);

  /// Writes the checksum field (call before the node goes to disk).
  void seal();
  /// True when the checksum field matches the contents.
  bool checksum_ok() const;

  std::byte* data() const { return p_; }
  uint32_t size() const { return size_; }

 private:
  uint32_t values_at() const { return kNodeHeaderBytes + 8 * leaf_capacity(size_); }
  uint32_t children_at() const { return kNodeHeaderBytes + 8 * inner_capacity(size_); }
  template <class T>
  T get(uint32_t off) const {
    T v;
    std::memcpy(&v, p_ + off, sizeof v);
    return v;
  }
  template <class T>
  void put(uint32_t off, T v) {
    std::memcpy(p_ + off, &v, sizeof v);
  }
  std::byte* p_;
  uint32_t size_;
};

}  // namespace nvindex::nvme
