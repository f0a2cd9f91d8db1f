// A PiBench wrapper whose find dies with SIGSEGV (a wrapper with a bug, or
// one called through a vtable it was not built for): the import's probe,
// run in a child process, must report the crash as a usage error while the
// harness lives on (tool_cli_test, Cli.PibenchBrokenWrappersAreUsageErrors).
#include <csignal>

#include "pibench/tree_api.h"

namespace crash_wrapper {

class CrashOnFind final : public nvindex::pibench::tree_api {
 public:
  bool find(const char*, size_t, char*) override {
    std::raise(SIGSEGV);
    return false;
  }
  bool insert(const char*, size_t, const char*, size_t) override { return true; }
  bool update(const char*, size_t, const char*, size_t) override { return true; }
  bool remove(const char*, size_t) override { return true; }
  int scan(const char*, size_t, int, char*&) override { return 0; }
};

}  // namespace crash_wrapper

extern "C" __attribute__((visibility("default"))) nvindex::pibench::tree_api* create_tree(
    const nvindex::pibench::tree_options_t&) {
  return new crash_wrapper::CrashOnFind();
}
