// A PiBench wrapper whose create_tree always returns nullptr (as a wrapper
// does when it cannot open its pool): the import must refuse it as a usage
// error (tool_cli_test, Cli.PibenchBrokenWrappersAreUsageErrors).
#include <cstdio>

#include "pibench/tree_api.h"

extern "C" __attribute__((visibility("default"))) nvindex::pibench::tree_api* create_tree(
    const nvindex::pibench::tree_options_t&) {
  std::fprintf(stderr, "null_tree: no tree today\n");
  return nullptr;
}
