// nvindex: the command line. One subcommand per file in src/tools/.
#include <cstdio>

#include "testing/test_indexes.h"
#include "tools/commands.h"
#include "util/temp_files.h"

int main(int argc, char** argv) {
  CLI::App app{
      "nvindex: persistent indexes for non-volatile memory, and the harness that compares them.\n"
      "Run `nvindex <command> --help` for a command's options."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "nvindex 0.1.0");
  // The test doubles (lying-test, bug-*-test) are part of the command line,
  // not of the library: the crash lab's and the harness's self-tests use them.
  nvindex::test_indexes::register_test_indexes();
  // Ctrl-C or a kill removes the temporary pools of bench and tpcc.
  nvindex::util::install_remove_on_signal();
  int exit_code = 0;
  nvindex::tools::add_bench_command(app, &exit_code);
  nvindex::tools::add_verify_command(app, &exit_code);
  nvindex::tools::add_info_command(app, &exit_code);
  nvindex::tools::add_crashtest_command(app, &exit_code);
  nvindex::tools::add_torture_command(app, &exit_code);
  nvindex::tools::add_tpcc_command(app, &exit_code);
  nvindex::tools::add_patree_calibrate_command(app, &exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  return exit_code;
}
