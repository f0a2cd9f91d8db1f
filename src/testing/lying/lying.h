// lying-test: a deliberately broken index for testing the benchmark harness.
// It must never appear in a benchmark's default index list. See lying.cc.
#pragma once

#include <memory>

#include "nvindex/index.h"

namespace nvindex {

inline constexpr char kLyingDescription[] =
    "deliberately broken index for testing the harness (drops every 10th insert, "
    "returns wrong values): never benchmark it";

/// Factory for "lying-test": a std::map behind a mutex that silently drops
/// every 10th insert while returning Ok, and returns a corrupted value (upper
/// 32 bits flipped) for every 16th successful lookup. Ignores every option.
/// Never fails.
Status make_lying_index(const IndexOptions& options, std::unique_ptr<Index<uint64_t>>* out);
/// The same over string keys (std::string_view, owned as std::string in the
/// map; byte-wise order), for make_index<std::string_view>("lying-test").
Status make_lying_string_index(const IndexOptions& options,
                               std::unique_ptr<Index<std::string_view>>* out);

}  // namespace nvindex
