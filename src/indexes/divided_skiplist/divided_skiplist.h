// divided-skiplist: see divided_skiplist.cc. (Interface placeholder: the implementation lands with
// issue 4.)
#pragma once

#include <memory>

#include "nvindex/index.h"

namespace nvindex {

inline constexpr char kDividedSkiplistDescription[] =
    "divided skip list: PM bottom list, DRAM upper levels (Liu et al., VLDB'20 §4.1)";

/// Factory for "divided-skiplist". (Not implemented yet: returns NotSupported.)
Status make_divided_skiplist(const IndexOptions& options, std::unique_ptr<Index<uint64_t>>* out);

}  // namespace nvindex
