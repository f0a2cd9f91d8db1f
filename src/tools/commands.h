// The `nvindex` subcommands. Each lives in its own file (src/tools/<name>.cc)
// and adds itself to the CLI11 app through one function declared here; main.cc
// calls them all. A subcommand's callback returns the process exit code
// through *exit_code (0 success, 1 a failed check or run, 2 bad usage).
#pragma once

#include <CLI/CLI.hpp>
#include <fstream>
#include <string>

namespace nvindex::tools {

/// `nvindex bench`: the benchmark harness (src/tools/bench.cc).
void add_bench_command(CLI::App& app, int* exit_code);
/// `nvindex verify`: open, recover and check a pool's index (src/tools/verify.cc).
void add_verify_command(CLI::App& app, int* exit_code);
/// `nvindex info`: print a pool's header (src/tools/info.cc).
void add_info_command(CLI::App& app, int* exit_code);
/// `nvindex crashtest`: the crash-consistency lab (src/tools/crashtest.cc).
void add_crashtest_command(CLI::App& app, int* exit_code);
/// `nvindex torture`: process-crash torture of a persistent index (src/tools/torture.cc).
void add_torture_command(CLI::App& app, int* exit_code);
/// `nvindex tpcc`: in-memory TPC-C over an index design (src/tools/tpcc.cc).
void add_tpcc_command(CLI::App& app, int* exit_code);
/// `nvindex patree-calibrate`: fit PA-Tree's latency model for a disk
/// (src/tools/patree_calibrate.cc).
void add_patree_calibrate_command(CLI::App& app, int* exit_code);
/// `nvindex serve`: the memcached-protocol server over a persistent store
/// (src/tools/serve.cc).
void add_serve_command(CLI::App& app, int* exit_code);
/// `nvindex kv-load`: fill a new pool with a store of N benchmark items
/// (src/tools/kv_load.cc).
void add_kv_load_command(CLI::App& app, int* exit_code);
/// `nvindex kv-client`: drive a memcached-protocol server with the KV
/// benchmark's items through libmemcached (src/tools/kv_client.cc).
void add_kv_client_command(CLI::App& app, int* exit_code);

/// Writes `text` to the file `path` (created, or truncated); false when it
/// cannot be opened or written (the caller reports it as a usage error:
/// --output names a file that cannot be written).
inline bool write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return false;
  f << text;
  return static_cast<bool>(f.flush());
}

}  // namespace nvindex::tools
