// wbtree: see wbtree.cc. (Interface placeholder: the implementation lands with issue 4.)
#pragma once

#include <memory>

#include "nvindex/index.h"

namespace nvindex {

inline constexpr char kWbTreeDescription[] =
    "wB+-tree: unsorted PM nodes with bitmap and slot array, tree-wide lock (Chen and Jin, "
    "VLDB'15)";

/// Factory for "wbtree". (Not implemented yet: returns NotSupported.)
Status make_wbtree(const IndexOptions& options, std::unique_ptr<Index<uint64_t>>* out);

}  // namespace nvindex
