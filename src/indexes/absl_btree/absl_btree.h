// absl-btree: the volatile yardstick, absl::btree_map behind a big-reader
// lock (none for a single-threaded instance). See absl_btree.cc.
#pragma once

#include <memory>
#include <string_view>

#include "nvindex/index.h"

namespace nvindex {

inline constexpr char kAbslBtreeDescription[] =
    "absl::btree_map behind a big-reader lock, none at threads 1 (volatile yardstick)";

/// Factory for "absl-btree". IndexOptions::threads decides the locking: with
/// threads > 1 every call takes a BrLock (readers shared, writers exclusive)
/// and info().caps.thread_safe is true; with threads <= 1 no call takes a
/// lock and caps.thread_safe is false (callers must serialize every call).
/// Ignores every other option. Never fails.
Status make_absl_btree(const IndexOptions& options, std::unique_ptr<Index<uint64_t>>* out);

/// Factory for "absl-btree" with string keys (absl::btree_map<std::string,
/// Value>; keys up to kMaxKeyBytes bytes, a longer one is InvalidArgument in
/// insert, update and remove). Locking as make_absl_btree. Never fails.
Status make_absl_btree_string(const IndexOptions& options,
                              std::unique_ptr<Index<std::string_view>>* out);

}  // namespace nvindex
