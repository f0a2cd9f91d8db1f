// A count for a micro benchmark from the environment (sizes of its data set).
#pragma once

#include <cstddef>
#include <cstdlib>

namespace nvindex {

/// The positive integer in environment variable `name`, or `fallback` when
/// it is unset, empty, not a number or not positive.
inline size_t env_count(const char* name, size_t fallback) {
  const char* e = std::getenv(name);
  const long long n = e != nullptr ? std::atoll(e) : 0;
  return n > 0 ? static_cast<size_t>(n) : fallback;
}

}  // namespace nvindex
