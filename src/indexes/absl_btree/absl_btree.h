// absl-btree: the volatile yardstick, absl::btree_map behind a reader-writer
// lock. See absl_btree.cc.
#pragma once

#include <memory>

#include "nvindex/index.h"

namespace nvindex {

inline constexpr char kAbslBtreeDescription[] =
    "absl::btree_map behind an absl::Mutex reader-writer lock (volatile yardstick)";

/// Factory for "absl-btree". Ignores every option. Never fails.
Status make_absl_btree(const IndexOptions& options, std::unique_ptr<Index<uint64_t>>* out);

}  // namespace nvindex
