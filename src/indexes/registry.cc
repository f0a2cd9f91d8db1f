// The index registry: one line per index design (DESIGN.md §4, "adding an
// index = one folder + one registration line"). Each index folder exposes one
// factory function, declared here.
#include <string>

#include "indexes/absl_btree/absl_btree.h"
#include "indexes/btree/btree.h"
#include "indexes/crash_bugs/crash_bugs.h"
#include "indexes/divided_skiplist/divided_skiplist.h"
#include "indexes/fastfair/fastfair.h"
#include "indexes/fptree/fptree.h"
#include "indexes/lbtree/lbtree.h"
#include "indexes/lying/lying.h"
#include "indexes/wbtree/wbtree.h"
#include "nvindex/index.h"

namespace nvindex {

// Factories, one per index folder (src/indexes/<name>/), declared in the
// folder's header included above.

namespace {
constexpr IndexEntry kIndexes[] = {
    // {name, description, persistent, min_node_size (0: no nodes), factory}
    {"absl-btree", kAbslBtreeDescription, false, 0, &make_absl_btree},
    {"fastfair", kFastFairDescription, true, 128, &make_fastfair},
    {"btree", kBtreeDescription, false, 128, &make_btree},
    {"lbtree", kLbTreeDescription, true, 256, &make_lbtree},
    {"fptree", kFpTreeDescription, true, 256, &make_fptree},
    {"wbtree", kWbTreeDescription, true, 128, &make_wbtree},
    {"divided-skiplist", kDividedSkiplistDescription, true, 0, &make_divided_skiplist},
    {"lying-test", kLyingDescription, false, 0, &make_lying_index},  // test-only: lies on purpose
    {"bug-publish-before-persist-test", kBugPublishBeforePersistDescription, true, 128,
     &make_bug_publish_before_persist},  // test-only: crash bug on purpose
    {"bug-split-two-naw-test", kBugSplitTwoNawDescription, true, 128,
     &make_bug_split_two_naw},  // test-only: crash bug on purpose
};
}  // namespace

std::span<const IndexEntry> registered_indexes() { return kIndexes; }

const IndexEntry* find_index_entry(std::string_view name) {
  for (const IndexEntry& e : kIndexes) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

uint32_t smallest_node_size(std::string_view name) {
  const IndexEntry* e = find_index_entry(name);
  return e != nullptr && e->min_node_size > 128 ? e->min_node_size : 128;
}

template <>
Status make_index<uint64_t>(std::string_view name, const IndexOptions& options,
                            std::unique_ptr<Index<uint64_t>>* out) {
  std::string known;
  for (const IndexEntry& e : kIndexes) {
    if (e.name == name) return e.make(options, out);
    if (!known.empty()) known += ", ";
    known += e.name;
  }
  return Status::InvalidArgument("unknown index '" + std::string(name) + "' (known: " + known +
                                 ")");
}

}  // namespace nvindex
