// The checks every persistent index's factory starts with (one place for the
// wording of their errors).
#pragma once

#include <string>
#include <string_view>

#include "nvindex/index.h"
#include "nvindex/pm/pool.h"
#include "nvindex/status.h"

namespace nvindex {

/// Checks that a persistent index named `name` was given a pool
/// (IndexOptions::pool) whose layout name is `name`. Errors: InvalidArgument
/// "<name> is persistent: IndexOptions.pool is required", or "<name>: pool
/// layout is '<layout>', expected '<name>'" (a pool of another index, refused
/// before anything is read or written).
inline Status check_index_pool(const IndexOptions& options, std::string_view name) {
  if (options.pool == nullptr) {
    return Status::InvalidArgument(std::string(name) +
                                   " is persistent: IndexOptions.pool is required");
  }
  if (options.pool->layout() != name) {
    return Status::InvalidArgument(std::string(name) + ": pool layout is '" +
                                   std::string(options.pool->layout()) + "', expected '" +
                                   std::string(name) + "'");
  }
  return Status::Ok();
}

}  // namespace nvindex
