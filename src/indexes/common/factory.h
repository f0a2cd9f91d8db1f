// The checks every persistent index's factory starts with (one place for the
// wording of their errors), and the offset format of their error messages.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "nvindex/index.h"
#include "nvindex/pm/allocator.h"
#include "nvindex/pm/pool.h"
#include "nvindex/status.h"
#include "util/hex.h"

namespace nvindex {

/// Checks that a persistent index named `name` (its pool_layout) was given a
/// pool (IndexOptions::pool) whose layout name is `name`, or
/// IndexOptions::pool_layout when that is set. Errors: InvalidArgument
/// "<name> is persistent: IndexOptions.pool is required", or "<name>: pool
/// layout is '<layout>', expected '<name>'" (a pool of another index, refused
/// before anything is read or written).
inline Status check_index_pool(const IndexOptions& options, std::string_view name) {
  if (options.pool == nullptr) {
    return Status::InvalidArgument(std::string(name) +
                                   " is persistent: IndexOptions.pool is required");
  }
  const std::string_view want =
      options.pool_layout.empty() ? name : std::string_view(options.pool_layout);
  if (options.pool->layout() != want) {
    return Status::InvalidArgument(std::string(name) + ": pool layout is '" +
                                   std::string(options.pool->layout()) + "', expected '" +
                                   std::string(want) + "'");
  }
  return Status::Ok();
}

/// Allocates the root object (`bytes`, 1..4096) of a new index in a pool
/// with no root. On a pool opened after a crash during create (a root was
/// never set), the allocator is still in recovery (allocate() is Busy) and
/// nothing is reachable: an empty recovery pass reclaims every block that
/// create had allocated, then the allocation is retried. Errors: those of
/// Allocator::allocate (OutOfSpace, InvalidArgument).
inline Status allocate_root_object(pm::Allocator& alloc, uint32_t bytes, uint64_t* off) {
  Status s = alloc.allocate(bytes, off);
  if (s.code() == Code::kBusy) {
    alloc.begin_recovery();
    alloc.end_recovery();
    s = alloc.allocate(bytes, off);
  }
  return s;
}

}  // namespace nvindex
