// The one parser of command-line values for every `nvindex` subcommand
// (issue 31): counts, real numbers (seconds, fractions), seeds, byte sizes,
// choices, index lists, paths and switches are each declared through one
// function here, so every subcommand has the same limits, the same messages
// and the same exit code for a bad value: a usage error (exit 2, docs/cli.md
// "Exit codes and bad input") raised while the command line is parsed, before
// any work.
//
// A bad value's message is CLI11's "<option>: <why>", e.g.
//   --threads: must be 1..1,024, got '-5'
//   --duration: must be 0..604,800 s (a week), got 'nan'
//   --pool: /missing/dir/p: its directory /missing/dir does not exist
//   --index: empty entry in 'fastfair,' (a comma-separated list, e.g. btree,fastfair)
//   --energy takes no value (a switch: give it alone to turn it on)
// and main.cc prefixes it with "nvindex <command>: ".
//
// Every option added through these functions records what kind of value it
// takes (OptionFacts); `nvindex --list-options` prints them all, and
// tests/tool_cli_test.cc derives its table of bad values from that list, so an
// option declared any other way (a bare CLI11 add_option) is reported there as
// "unchecked" and fails the test.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "nvindex/index.h"
#include "nvindex/status.h"

namespace nvindex::tools {

/// What an option's value is; decides its check and the CLI test's cases.
enum class ValueKind {
  kFlag,          ///< a switch: no value ("--x=value" is refused unless value is "true")
  kCount,         ///< an unsigned integer in [lo, hi]: decimal digits only, no sign
  kReal,          ///< a decimal number in [lo, hi], or (lo, hi] (lo_open): no NaN, no inf
  kSeed,          ///< an unsigned 64-bit integer: decimal digits only
  kByteSize,      ///< bytes with an optional K/M/G/T suffix (bench::parse_byte_size), in range
  kChoice,        ///< one word of a fixed set
  kIndexList,     ///< comma-separated index entries name[:k=v[;k=v]] (parse_index_list)
  kIndexName,     ///< one registered index name
  kText,          ///< text the command parses itself (k=v, a latency spec, a site); not empty
  kInputFile,     ///< an existing regular file, read (a key file, a trace, a pool)
  kNewFile,       ///< a file to create: must not exist; its directory must
  kOutputFile,    ///< a file to write: a regular file or none yet; its directory must exist
  kDirectory,     ///< an existing directory
  kNewDirectory,  ///< a directory, made when missing: its parent must exist
};

/// The name `nvindex --list-options` prints for a kind ("count", "new-file").
const char* kind_name(ValueKind k);

/// What is recorded of one option (see the file comment).
struct OptionFacts {
  ValueKind kind = ValueKind::kText;
  long double lo = 0;    ///< kCount, kReal, kSeed, kByteSize: smallest value
  long double hi = 0;    ///< largest value
  bool lo_open = false;  ///< kReal: lo itself is refused
  /// kByteSize: 0 is taken besides [lo, hi] (e.g. "0 = automatic").
  bool zero_ok = false;
  std::vector<std::string> choices;  ///< kChoice: the words
};

/// The facts recorded for `opt`, or nullptr (an option not declared here).
const OptionFacts* facts_of(const CLI::Option* opt);

/// "1,234,567".
std::string with_commas(uint64_t v);

/// The registered indexes a kv::Store can run over (ordered, string keys,
/// not test-only), persistent or volatile, as "a, b, c" in registration
/// order (`serve` and `kv-load` name them in --help and errors).
std::string kv_store_indexes(bool persistent);

/// This machine's memory, bytes (sysconf; 1 GiB when unknown).
uint64_t physical_memory_bytes();

/// Adds a count option: an unsigned integer in [lo, hi] written in decimal
/// digits only (CLI11 alone would read "-1" as 2^64 - 1, "010" as octal 8
/// and "0x10" as 16). `range` is how the message names the range; default
/// "lo..hi" with commas. Refused: a sign, a fraction, an exponent, NaN,
/// a value past hi (2^64 and beyond included), empty.
template <class T>
CLI::Option* add_count(CLI::App* cmd, const std::string& name, T* into, uint64_t lo, uint64_t hi,
                       const std::string& help, std::string range = "");

/// A count that costs `bytes_each` of memory: 0 (or 1 when `positive`) up
/// to physical memory / bytes_each, the message saying why
/// ("1..393,216,000 (64 B of memory each on this machine)").
template <class T>
CLI::Option* add_memory_count(CLI::App* cmd, const std::string& name, T* into, uint64_t bytes_each,
                              bool positive, const std::string& help);

/// Adds a real-number option in [lo, hi] ((lo, hi] when `lo_open`): a
/// decimal or exponent form ("0.001", "1e-3"); NaN, infinities, values past
/// the range and empty text are refused. `range` names the range with its
/// unit ("0..604,800 s (a week)").
CLI::Option* add_real(CLI::App* cmd, const std::string& name, double* into, long double lo,
                      long double hi, bool lo_open, const std::string& range,
                      const std::string& help);

/// Adds a seed: any unsigned 64-bit integer, decimal digits only.
CLI::Option* add_seed(CLI::App* cmd, const std::string& name, uint64_t* into,
                      const std::string& help);

/// Adds a byte-size option kept as its text (bench::parse_byte_size reads
/// it later and cannot fail then): "4096", "512M", "4G"; the value must be
/// in [lo, hi] bytes, or 0 when `zero_ok`.
CLI::Option* add_byte_size(CLI::App* cmd, const std::string& name, std::string* into, uint64_t lo,
                           uint64_t hi, bool zero_ok, const std::string& help);

/// Adds a choice: one of `choices` (the message lists them).
CLI::Option* add_choice(CLI::App* cmd, const std::string& name, std::string* into,
                        std::vector<std::string> choices, const std::string& help);

/// Adds text the command parses itself; `check` (when given) refuses a bad
/// value with its Status message at parse time; empty text is refused.
template <class T>
CLI::Option* add_text(CLI::App* cmd, const std::string& name, T* into, const std::string& help,
                      std::function<Status(const std::string&)> check = nullptr);

/// Adds --index as a comma-separated list of entries name[:k=v[;k=v]]
/// (parse_index_list: no empty entry, every name registered).
CLI::Option* add_index_list(CLI::App* cmd, const std::string& name, std::string* into,
                            const std::string& help);

/// Adds --index as one registered index name (no list, no options).
CLI::Option* add_index_name(CLI::App* cmd, const std::string& name, std::string* into,
                            const std::string& help);

/// Adds a path option of `kind` (kInputFile .. kNewDirectory), checked by
/// check_path when parsed.
CLI::Option* add_path(CLI::App* cmd, const std::string& name, std::string* into, ValueKind kind,
                      const std::string& help);

/// Adds a switch (ValueKind::kFlag).
CLI::Option* add_switch(CLI::App* cmd, const std::string& name, bool* into,
                        const std::string& help);

/// Adds `--key-type integer|string` (parse_key_type into *t); `what`
/// completes the help text.
CLI::Option* add_key_type_option(CLI::App* cmd, KeyType* t, const std::string& what);

/// The directory that holds `path` ("." for a bare name, "/" for "/x",
/// "/a" for "/a/b" and "/a/b/").
std::string parent_of(const std::string& path);

/// Checks `path` for a path option of `kind` without changing anything and
/// without opening it (a FIFO is never opened): Ok, or InvalidArgument
/// "<path>: <why>", e.g. "'': empty path", "/x/y: its directory /x does
/// not exist", "/dev/null is a character device, not a regular file",
/// "/tmp/p already exists (never overwritten)". The callers that decide a
/// path's kind from other options (tpcc --pool with --check-only) call it
/// themselves.
Status check_path(ValueKind kind, const std::string& path);

/// Checks a directory for a block-device store (bench --device) before any
/// work: check_path(kDirectory), not on
/// tmpfs (memory, not a disk, and no O_DIRECT), and a directory can be made
/// in it (one is made and removed at once: /proc, a read-only mount or a
/// directory without write permission are refused here, not by the run).
/// InvalidArgument with the reason.
Status check_device_dir(const std::string& dir);

/// Prints every option of every subcommand of `app`, one per line, tab
/// separated: command, option (its longest name), kind (kind_name, or
/// "unchecked" for an option declared without this file), lo, hi, lo_open
/// (0/1), zero_ok (0/1), the choices joined by '|' ("-" when none). For the
/// CLI test (`nvindex --list-options`, hidden from --help).
void print_option_table(const CLI::App& app);

}  // namespace nvindex::tools
