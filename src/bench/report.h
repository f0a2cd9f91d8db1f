// Benchmark reports (DESIGN.md §5: "text for people and versioned JSON for
// tools, no parser needed").
//
// Text reads like PiBench's output: the options, then per index the load and
// run time and throughput, per-operation-type completed/succeeded/throughput,
// latency percentiles (ns), PM counters (total and per operation), memory and
// verification; with several indexes, a comparison table with ratios to the
// first index.
//
// JSON (nlohmann::json) follows schema "nvindex.bench/1"; these names are
// fixed (more fields may be added, none renamed or removed):
//   { "schema", "machine", "options", "workload",
//     "results": [ { "index", "info",
//       "load": { "operations", "seconds", "throughput", "pm": PM },
//       "run":  { "operations", "seconds", "throughput",
//                 "by_type": { "<op>": { "completed", "succeeded", "throughput" } },
//                 "latency_ns": { "samples", "min", "p50", "p90", "p99", "p99_9",
//                                 "p99_99", "p99_999", "max" },
//                 "pm": PM, "timeline" },
//       "verification": { "checked", "failures", "examples" },
//       "memory": { "dram_bytes", "pm_bytes" },
//       "media_write_amplification", "recovery_seconds" (persistent only) } ],
//     "errors": [ { "index", "error" } ] }
//   PM = { "flushes", "lines_flushed", "fences", "naws", "media_writes",
//          "per_op": { "flushes", "lines_flushed", "fences", ... } }
// Units: seconds (s), throughput (operations/s), latency (ns), bytes.
//
// Thread-safety: pure functions of their arguments, except
// collect_machine_info() which reads /proc and the clock.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bench/driver.h"
#include "bench/workload.h"
#include "nvindex/status.h"

namespace nvindex::bench {

/// The version string in reports and `nvindex --version`.
inline constexpr char kNvindexVersion[] = "0.1.0";
/// The JSON schema name; bump the number on an incompatible change.
inline constexpr char kBenchSchema[] = "nvindex.bench/1";

/// The machine a benchmark ran on.
struct MachineInfo {
  std::string hostname;
  std::string cpu_model;          ///< "model name" of /proc/cpuinfo ("unknown" if absent)
  unsigned cores = 0;             ///< hardware threads (std::thread::hardware_concurrency)
  uint64_t memory_bytes = 0;      ///< physical memory, bytes
  std::string flush_instruction;  ///< pm::flush_instruction_name of the one in use
  std::string kernel;             ///< uname: sysname release
  std::string date;               ///< ISO 8601 UTC, e.g. "2024-05-01T12:00:00Z"
  std::string version = kNvindexVersion;
};

/// Reads hostname, /proc/cpuinfo, sysconf, uname and the clock.
MachineInfo collect_machine_info();

/// Everything a report shows.
struct BenchReport {
  MachineInfo machine;
  WorkloadSpec spec;                 ///< the workload as specified
  BenchOptions options;              ///< the driver options used
  std::vector<std::string> indexes;  ///< indexes asked for, in order
  /// Extra "options" entries from the caller (e.g. the CLI's format, output).
  nlohmann::json extra_options = nlohmann::json::object();
  std::vector<IndexResult> results;  ///< indexes that ran, in order
  /// Indexes that could not run: name and the error.
  std::vector<std::pair<std::string, Status>> errors;
};

/// The "options" object: every workload and driver setting plus extra_options.
nlohmann::json options_json(const BenchReport& report);
/// The whole report as JSON, schema kBenchSchema (see the file comment).
nlohmann::json report_json(const BenchReport& report);
/// One result as a JSON object (an element of "results").
nlohmann::json result_json(const IndexResult& result);

/// The PiBench-like text report; includes comparison_table() when more than
/// one index ran.
std::string report_text(const BenchReport& report);
/// The comparison table: one row per index with run throughput (ops/s), the
/// ratio to the first index, p50 and p99 latency (ns), and flushes, lines
/// flushed and fences per run operation. Empty string for no results.
std::string comparison_table(const std::vector<IndexResult>& results);

/// True when some index failed a check: verification failures, a structural
/// verify() error, a failed recovery, or an index that could not run. The
/// bench command exits 1 in that case.
bool report_has_failures(const BenchReport& report);

}  // namespace nvindex::bench
