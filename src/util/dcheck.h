// NVINDEX_DCHECK(cond): an invariant the code relies on and that no input
// can break (a broken one is a bug in nvindex). Checked in Debug builds,
// which the sanitizer presets (asan, tsan, fuzz) are: a failure prints the
// condition and its place to stderr and aborts. In Release builds the
// condition is not evaluated (it must have no side effect) but still
// compiles, so it cannot rot. Errors an input can cause (a damaged pool, a
// full pool, a bad option) are Status values, never DCHECKs.
#pragma once

#include <cstdio>
#include <cstdlib>

namespace nvindex::detail {

[[noreturn, gnu::cold]] inline void dcheck_failed(const char* cond, const char* file, int line) {
  std::fprintf(stderr, "nvindex: invariant broken: %s (%s:%d)\n", cond, file, line);
  std::abort();
}

}  // namespace nvindex::detail

#ifdef NVINDEX_DCHECKS
#define NVINDEX_DCHECK(cond) \
  ((cond) ? static_cast<void>(0) : ::nvindex::detail::dcheck_failed(#cond, __FILE__, __LINE__))
#else
#define NVINDEX_DCHECK(cond) static_cast<void>(sizeof(static_cast<bool>(cond)))
#endif
