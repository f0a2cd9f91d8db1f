// The GoogleTest parameter name of a test over index names: the name with
// '-' as '_' ("p-masstree" -> "p_masstree"), since GoogleTest allows only
// letters, digits and '_' there. For INSTANTIATE_TEST_SUITE_P(..., IndexParamName()).
#pragma once

#include <gtest/gtest.h>

#include <string>

namespace nvindex::testing {

struct IndexParamName {
  std::string operator()(const ::testing::TestParamInfo<std::string>& info) const {
    std::string n = info.param;
    for (char& c : n) {
      if (c == '-') c = '_';
    }
    return n;
  }
};

}  // namespace nvindex::testing
