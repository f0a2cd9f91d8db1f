// fptree: see fptree.cc. (Interface placeholder: the implementation lands with issue 4.)
#pragma once

#include <memory>

#include "nvindex/index.h"

namespace nvindex {

inline constexpr char kFpTreeDescription[] =
    "FP-Tree: unsorted PM leaves with fingerprints, DRAM inner nodes (Oukid et al., SIGMOD'16)";

/// Factory for "fptree". (Not implemented yet: returns NotSupported.)
Status make_fptree(const IndexOptions& options, std::unique_ptr<Index<uint64_t>>* out);

}  // namespace nvindex
