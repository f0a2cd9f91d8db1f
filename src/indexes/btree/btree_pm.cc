// btree-wal and persistent-unsorted: the PM instances of the B+-tree
// template (btree_impl.h, storage PmNodes) and their factories.
#include "indexes/btree/btree.h"
#include "indexes/btree/btree_impl.h"

namespace nvindex {

using btree_detail::Btree;
using btree_detail::IntKeys;
using btree_detail::PmNodes;
using btree_detail::SortedLeaves;
using btree_detail::UnsortedLeaves;

namespace {

// The shared factory: a new tree on an empty pool, else a recovery (the
// stored node size wins). make_index() has checked the node size.
template <class LP>
Status open_pm_btree(const IndexOptions& options, std::unique_ptr<Index<uint64_t>>* out) {
  using Tree = Btree<IntKeys, LP, PmNodes>;
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
  return open_pm_btree<UnsortedLeaves>(options, out);
}

}  // namespace nvindex
