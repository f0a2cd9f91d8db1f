// wbtree: the integer-key wB+-tree (WbTree = WbTreeT<uint64_t>), its
// factory and the node geometry. The definitions are in wbtree_impl.h (the
// string-key instance is compiled in wbtree_string.cc).
#include "indexes/wbtree/wbtree.h"

#include "indexes/wbtree/wbtree_impl.h"

namespace nvindex {
namespace wbtree {

uint32_t capacity_for(uint32_t node_size, uint32_t* entries_offset) {
  if (!valid_node_size(node_size)) return 0;
  for (uint32_t c = kMaxSlots; c > 0; --c) {
    const uint32_t e = (kSlotArrayOffset + 1 + c + 15) / 16 * 16;
    if (e + kEntryBytes * c <= node_size) {
      *entries_offset = e;
      return c;
    }
  }
  return 0;
}

template class WbTreeT<uint64_t>;

}  // namespace wbtree

Status make_wbtree(const IndexOptions& options, std::unique_ptr<Index<uint64_t>>* out) {
  return wbtree::open_wbtree(options, out);
}

}  // namespace nvindex
