// btree-wal and persistent-unsorted: the PM instances of the B+-tree
// template (btree_impl.h, storage PmNodes; persistent-unsorted:inner=dram
// PmLeaves) and their factories.
#include "indexes/btree/btree.h"
#include "indexes/btree/btree_impl.h"

namespace nvindex {

using btree_detail::Btree;
using btree_detail::IntKeys;
using btree_detail::PmLeaves;
using btree_detail::PmNodes;
using btree_detail::SortedLeaves;
using btree_detail::UnsortedLeaves;

namespace {

// The shared factory: a new tree on an empty pool, else a recovery (the
// stored node size wins). make_index() has checked the node size.
template <class LP, class SP = PmNodes>
Status open_pm_btree(const IndexOptions& options, std::unique_ptr<Index<uint64_t>>* out) {
  using Tree = Btree<IntKeys, LP, SP>;
  return open_persistent_index<Tree>(
      options, pool_layout(LP::kPmName, KeyType::kInteger), [](Tree& t) { return t.create(); },
      [](Tree& t) { return t.recover(); }, out, options.node_size);
}

}  // namespace

Status make_btree_wal(const IndexOptions& options, std::unique_ptr<Index<uint64_t>>* out) {
  return open_pm_btree<SortedLeaves>(options, out);
}

Status make_persistent_unsorted(const IndexOptions& options,
                                std::unique_ptr<Index<uint64_t>>* out) {
  // make_index() has checked the value of "inner". A pool with a root keeps
  // the placement it was created with: its root object's placement word
  // picks the instance (read only when the root object lies in the pool;
  // the instance's recover() checks the object whole, the word included).
  bool inner_dram = false;
  if (const auto it = options.extra.find("inner"); it != options.extra.end()) {
    inner_dram = it->second == "dram";
  }
  if (pm::Pool* pool = options.pool; pool != nullptr && pool->root() != 0) {
    // A damaged root offset (not a block, misaligned) picks inner=pm, whose
    // recover() reports it; the word is read only inside the pool, aligned.
    const uint64_t root = pool->root();
    inner_dram = root % alignof(btree_detail::BtreeRoot) == 0 &&
                 pool->contains(root, btree_detail::kBtreeRootBytes) &&
                 pool->ptr<btree_detail::BtreeRoot>(root)->inner_dram == 1;
  }
  if (inner_dram) return open_pm_btree<UnsortedLeaves, PmLeaves>(options, out);
  return open_pm_btree<UnsortedLeaves>(options, out);
}

}  // namespace nvindex
