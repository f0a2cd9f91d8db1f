// lbtree: see lbtree.cc. (Interface placeholder: the implementation lands with issue 4.)
#pragma once

#include <memory>

#include "nvindex/index.h"

namespace nvindex {

inline constexpr char kLbTreeDescription[] =
    "LB+-tree: 256 B PM leaves with entry moving and logless splits, DRAM inner nodes (Liu et al., "
    "VLDB'20)";

/// Factory for "lbtree". (Not implemented yet: returns NotSupported.)
Status make_lbtree(const IndexOptions& options, std::unique_ptr<Index<uint64_t>>* out);

}  // namespace nvindex
