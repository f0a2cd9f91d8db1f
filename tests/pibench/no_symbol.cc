// A shared library that is not a PiBench wrapper: it has no create_tree.
// `nvindex bench --index pibench:` must refuse it as a usage error naming
// the missing symbol (tool_cli_test, Cli.PibenchBrokenWrappersAreUsageErrors).
extern "C" __attribute__((visibility("default"))) int make_tree_under_another_name() { return 0; }
