// btree and unsorted-leaf: the volatile instances of the B+-tree template
// (btree_impl.h), their factories and btree's test hook.
#include "indexes/btree/btree.h"

#include "indexes/btree/btree_impl.h"
#include "indexes/btree/btree_testing.h"

namespace nvindex {

using btree_detail::Btree;
using btree_detail::IntKeys;
using btree_detail::ModelledPmNodes;
using btree_detail::SortedLeaves;
using btree_detail::StringKeys;
using btree_detail::UnsortedLeaves;

Status btree_damage_for_test(Index<uint64_t>* idx, BtreeDamage damage) {
  if (auto* tree = dynamic_cast<Btree<IntKeys, SortedLeaves>*>(idx)) return tree->damage(damage);
  if (auto* tree = dynamic_cast<Btree<IntKeys, UnsortedLeaves>*>(idx)) return tree->damage(damage);
  return Status::InvalidArgument("btree_damage_for_test: not a btree or unsorted-leaf");
}

namespace {

// options.extra["flush"], "off" when absent (make_index() has checked it).
std::string_view flush_option(const IndexOptions& options) {
  const auto it = options.extra.find("flush");
  return it == options.extra.end() ? std::string_view("off") : std::string_view(it->second);
}

}  // namespace

Status make_btree(const IndexOptions& options, std::unique_ptr<Index<uint64_t>>* out) {
  // make_index() has checked the node size (btree_valid_node_size).
  const std::string_view flush = flush_option(options);
  if (flush == "off") {
    *out = std::make_unique<Btree<IntKeys, SortedLeaves>>(options.node_size);
  } else {
    *out = std::make_unique<Btree<IntKeys, SortedLeaves, ModelledPmNodes>>(options.node_size,
                                                                           flush == "group");
  }
  return Status::Ok();
}

Status make_unsorted_leaf(const IndexOptions& options, std::unique_ptr<Index<uint64_t>>* out) {
  // make_index() has checked the node size (btree_valid_node_size) and flush.
  const std::string_view flush = flush_option(options);
  if (flush == "off") {
    *out = std::make_unique<Btree<IntKeys, UnsortedLeaves>>(options.node_size);
  } else {
    *out = std::make_unique<Btree<IntKeys, UnsortedLeaves, ModelledPmNodes>>(options.node_size,
                                                                             flush == "group");
  }
  return Status::Ok();
}

Status make_btree_string(const IndexOptions& options,
                         std::unique_ptr<Index<std::string_view>>* out) {
  if (flush_option(options) != "off") {
    return Status::InvalidArgument("btree: flush=" + std::string(flush_option(options)) +
                                   " takes integer keys (string keys: flush=off)");
  }
  *out = std::make_unique<Btree<StringKeys, SortedLeaves>>(options.node_size);
  return Status::Ok();
}

}  // namespace nvindex
