// The index registry: one line per index design (DESIGN.md §4, "adding an
// index = one folder + one registration line"). Each index folder exposes one
// factory function, declared here.
#include <string>

#include "indexes/absl_btree/absl_btree.h"
#include "indexes/btree/btree.h"
#include "indexes/crash_bugs/crash_bugs.h"
#include "indexes/fastfair/fastfair.h"
#include "indexes/lying/lying.h"
#include "nvindex/index.h"

namespace nvindex {

// Factories, one per index folder (src/indexes/<name>/), declared in the
// folder's header included above.

namespace {
constexpr IndexEntry kIndexes[] = {
    // {name, description, persistent, factory}
    {"absl-btree", kAbslBtreeDescription, false, &make_absl_btree},
    {"fastfair", kFastFairDescription, true, &make_fastfair},
    {"btree", kBtreeDescription, false, &make_btree},
    {"lying-test", kLyingDescription, false, &make_lying_index},  // test-only: lies on purpose
    {"bug-publish-before-persist-test", kBugPublishBeforePersistDescription, true,
     &make_bug_publish_before_persist},  // test-only: crash bug on purpose
    {"bug-split-two-naw-test", kBugSplitTwoNawDescription, true,
     &make_bug_split_two_naw},  // test-only: crash bug on purpose
};
}  // namespace

std::span<const IndexEntry> registered_indexes() { return kIndexes; }

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
