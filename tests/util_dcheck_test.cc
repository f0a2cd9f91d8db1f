// NVINDEX_DCHECK (src/util/dcheck.h): checked in Debug builds (the sanitizer
// presets), not evaluated in Release builds.
#include <gtest/gtest.h>

#include "util/dcheck.h"

namespace {

TEST(Dcheck, ChecksInDebugBuildsAndIsNotEvaluatedInRelease) {
  int evaluated = 0;
  auto touch = [&] {
    ++evaluated;
    return true;
  };
  NVINDEX_DCHECK(touch());
#ifdef NVINDEX_DCHECKS
  EXPECT_EQ(evaluated, 1);
  EXPECT_DEATH(NVINDEX_DCHECK(evaluated == 2), "invariant broken: evaluated == 2 \\(.*:[0-9]+\\)");
#else
  EXPECT_EQ(evaluated, 0);
#endif
}

}  // namespace
