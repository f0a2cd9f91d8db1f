// nvindex: the command line. One subcommand per file in src/tools/; every
// option value is checked by the one parser of src/tools/cli.h.
//
// Exit codes of every command (docs/cli.md "Exit codes"): 0 success; 1 the work
// ran and something failed (a check or verification, a corrupt pool, an
// index error, an I/O error after the work began); 2 the command line asked
// for something that cannot be done (an unknown option or index, a bad
// value, an option that cannot apply, a path that is missing, of the wrong
// kind or already there), refused before any work.
#include <cstdio>
#include <string>

#include "testing/test_indexes.h"
#include "tools/cli.h"
#include "tools/commands.h"
#include "util/temp_files.h"

namespace {

/// CLI11's message for `e`, in our words where CLI11's are unclear.
std::string usage_message(const CLI::ParseError& e) {
  std::string m = e.what();
  const std::string override_tail = " was given a disallowed flag override";
  if (m.size() > override_tail.size() && m.ends_with(override_tail)) {
    m = m.substr(0, m.size() - override_tail.size());
    if (!m.starts_with("-")) m = "--" + m;  // CLI11 names the flag without its dashes
    m += " takes no value (a switch: give it alone to turn it on)";
  }
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "nvindex: persistent indexes for non-volatile memory, and the harness that compares them.\n"
      "Run `nvindex <command> --help` for a command's options.\n"
      "Exit codes: 0 success, 1 a check or run failed, 2 bad usage (refused before any work)."};
  app.require_subcommand(0, 1);
  app.set_version_flag("--version", "nvindex 0.1.0");
  bool list_options = false;
  // For tests/tool_cli_test.cc: every option and the kind of value it takes.
  app.add_flag("--list-options", list_options,
               "Print every subcommand's options and the kind of value each takes, and exit")
      ->group("");
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
  nvindex::tools::add_serve_command(app, &exit_code);
  nvindex::tools::add_kv_load_command(app, &exit_code);
  nvindex::tools::add_kv_client_command(app, &exit_code);
  try {
    app.parse(argc, argv);
    if (list_options) {
      nvindex::tools::print_option_table(app);
      return 0;
    }
    if (app.get_subcommands().empty()) throw CLI::RequiredError("A subcommand");
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    std::string who = "nvindex";
    for (const CLI::App* sub : app.get_subcommands()) who += " " + sub->get_name();
    std::fprintf(stderr, "%s: %s\nRun '%s --help' for the options.\n", who.c_str(),
                 usage_message(e).c_str(), who.c_str());
    return 2;
  }
  return exit_code;
}
