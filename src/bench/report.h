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
//                 "by_type": { "<op>": { "completed", "succeeded", "throughput",
//                                        "pm": OPPM } },
//                 "latency_ns": { "samples", "min", "p50", "p90", "p99", "p99_9",
//                                 "p99_99", "p99_999", "max" },
//                 "pm": PM, "timeline" },
//       "verification": { "checked", "failures", "examples" },
//       "memory": { "dram_bytes", "pm_bytes" },
//       "media_write_amplification", "recovery_seconds" (persistent only) } ],
//     "errors": [ { "index", "error" } ] }
//   PM = { "flushes", "lines_flushed", "fences", "naws", "media_writes",
//          "per_op": { "flushes", "lines_flushed", "fences", ... } }
// Added fields (same schema version; see result_json and options_json):
//   options: "bulk_load", "fill_factor", "recovery_threads", "insert_pattern",
//            "dense_gap";
//   results[]: "index_name" (registry name; "index" is the label, e.g.
//            "wbtree:inner=dram"), "index_options" (the IndexOptions::extra it
//            ran with: --index-opt ones and its label's own),
//            "load": { "method": "inserts"|"bulk_load"|"bulk_load_by_inserts",
//            "fill_factor" (number when applied, else null), "description" },
//            "recovery_threads", "rebuild_seconds" (persistent only);
//   PM: "smos" (structure modification operations: splits, merges);
//   PM: "smo_time": { "timed", "mean_ns", "p50_ns", "p90_ns", "p99_ns",
//       "p99_9_ns", "max_ns", "total_ns", "buckets": [[floor_ns, count]] }
//       (the indexes' pm::SmoTimer scopes; SmoTimeSummary);
//   PM: "lines_written_back" (and per_op): 64 B lines that reached the media
//       model's XPLine buffer, the denominator of media_write_amplification;
//   options: "media_cache_kib" (the media model's modelled CPU cache, KiB;
//            0 = off; 0 too when the media model is off);
//   OPPM = { "flushes", "lines_flushed", "fences", "per_op": {...},
//            "smos", "with_smo": SPLIT, "without_smo": SPLIT },
//   SPLIT = { "operations", "flushes", "lines_flushed", "fences",
//             "per_op": { "flushes", "lines_flushed", "fences" } }
//   (with_smo: the operations of that type during which the worker counted
//   an SMO, e.g. split inserts; without_smo: the others).
//   options: "perf_counters" (false with --no-perf-counters);
//   options: "key_type" ("integer" or "string"), "key_size" (bytes: 8 for
//            integer keys, --key-size for string keys: the length of a
//            generated key; a keys file's or trace's own keys keep theirs);
//   options: "batch" (BenchOptions::lookup_batch, 1 = single lookups; N > 1:
//            run-phase reads issued through multi_lookup in batches of up to
//            N keys, each key one read operation, latency per key = batch
//            time / batch size; the text header then says "Lookup batch: N
//            (multi_lookup)");
//   "load" and "run": "cpu": CPU, the worker threads' perf_event_open(2)
//   counts over the phase (bench/perf.h), where
//   CPU = { "instructions": EVENT, "cycles": EVENT, "task_clock_ns": EVENT,
//           "ipc": instructions / cycles, or null when either is missing },
//   EVENT = { "available": bool, "count": total over the threads or null,
//             "per_op": count / phase operations or null,
//             "reason": why not available (string) or null }.
//   "instructions" and "cycles" are user-space only; they are null with a
//   reason (e.g. "no instructions counter on this CPU or VM (ENOENT)") on a
//   machine without hardware counters: never an estimate.
//   options: "energy" (the shape of nvindex.tpcc/1's options.energy): null
//            without --energy, {"available": true, "dram": bool (a DRAM zone
//            was found)}, or {"available": false, "reason": string} (e.g. "no
//            /sys/class/powercap: the machine exposes no RAPL counters");
//   "load" and "run": "energy": null without --energy, {"available": false,
//   "reason"} on a machine without readable RAPL counters, else
//   {"available": true, "package_j", "dram_j", "package_j_per_op",
//   "dram_j_per_op"}: joules of the whole machine over the phase
//   (bench/energy.h), "dram_j" and "dram_j_per_op" null without a DRAM zone;
//   never an estimate.
//   "load" and "run": "process": { "user_seconds", "system_seconds",
//   "cores_used" ((user + system) / phase seconds), "voluntary_switches",
//   "involuntary_switches" }: getrusage(RUSAGE_SELF) deltas, the whole
//   process (every thread, an index's background threads included);
//   "load" and "run": "disk": null but for a block-device index, else
//   {"available": false, "reason"} or {"available": true, "disk", "reads",
//   "writes", "read_bytes", "write_bytes", "iops", "mean_outstanding"}:
//   /sys/block/<disk>/stat deltas of the disk under the device directory,
//   device-wide (every process's I/O); mean_outstanding = time_in_queue
//   delta (ms) / phase ms (issue 14's Table I);
//   results[]: "sync_seconds", "sync" ("ok" or the error): Index::sync()
//   after the run phase; "device" (block-device indexes: the path given as
//   IndexOptions::device; "pool" stays for pools); "prefault_seconds": the
//   time pm::Pool::prefault took on a new pool file before the load phase,
//   s (absent when it was not prefaulted);
//   options: "prefault", "device_dir", "device_bytes", "in_flight"
//   (BenchOptions::in_flight: operations each thread keeps in flight through
//   Index::execute; 1 = one call per operation);
//   "load" and "run": "index_counters": {name: count} of IndexInfo::counters
//   spent in the phase ({} for an index without counters; PA-Tree's engine:
//   "engine.ios", "engine.probes", "engine.empty_probes", ...).
// Units: seconds (s), throughput (operations/s), latency (ns), energy
// (joules), bytes.
//
// Thread-safety: pure functions of their arguments, except
// collect_machine_info() which reads /proc and the clock.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bench/driver.h"
#include "bench/workload.h"
#include "nvindex/pm/pool.h"
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
/// The "machine" object of a JSON report (nvindex.bench/1, nvindex.tpcc/1).
nlohmann::json machine_json(const MachineInfo& m);

/// How a pool's mapping was backed by pages, for a report (every tool that
/// runs on pools names it; docs/bench.md, "Page size"): text "4 KiB pages;
/// 0 B of 138.00 MiB resident on transparent huge pages (0%)" or "2 MiB
/// pages; 138.00 MiB resident", JSON {page_bytes, mapped_bytes,
/// resident_bytes, huge_bytes} (bytes).
std::string pool_pages_text(const pm::PageBacking& b);
nlohmann::json pool_pages_json(const pm::PageBacking& b);
/// The whole report as JSON, schema kBenchSchema (see the file comment).
nlohmann::json report_json(const BenchReport& report);
/// One result as a JSON object (an element of "results").
nlohmann::json result_json(const IndexResult& result);

/// Instructions per cycle of a phase: instructions / cycles when both were
/// counted (and cycles > 0), else nullopt.
std::optional<double> instructions_per_cycle(const CpuCounters& c);

/// The text line of a phase's CPU counters, e.g. "\trun  instructions:
/// 1234.5/op (1234500); cycles: 600.0/op (600000); IPC 2.06; task-clock:
/// 310.2 ns/op (310200)\n", or per event "instructions: not available
/// (reason)". `ops`: the phase's operations (the per-op divisor).
std::string cpu_counters_text(std::string_view phase, const CpuCounters& c, uint64_t ops);

/// The PiBench-like text report; includes comparison_table() when more than
/// one index ran.
std::string report_text(const BenchReport& report);
/// The comparison table: one row per index with run throughput (ops/s), the
/// ratio to the first index, p50 and p99 latency (ns), and flushes, lines
/// flushed and fences per run operation; when some index's run instructions
/// were counted, also instructions per run operation and IPC ("n/a" for a
/// row without them), otherwise a line "instructions/op: not available
/// (reason)" under the table. Empty string for no results.
std::string comparison_table(const std::vector<IndexResult>& results);

/// How the load phase loaded: "inserts", "bulk load at fill 0.70" (an index
/// with caps.bulk_load) or "bulk load by inserts: fill factor not applied"
/// (an index without it: the interface's default bulk_load()).
std::string load_description(const IndexResult& result);

/// The text lines of the split vs non-split cost of one operation type, e.g.
/// "insert: 2.10 lines/op; without SMO: 1.31 lines/op over 9800 ops; with
/// SMO: 40.2 lines/op over 200 ops (204 SMOs)" (flushes and fences likewise).
/// Empty when `c` completed nothing.
std::string smo_split_text(std::string_view op, const TypeCounts& c);

/// The SMO time histogram of a phase (pm::CounterSnapshot::smo_time,
/// recorded by the indexes' pm::SmoTimer) summarised: scopes timed, their
/// mean (exact, from smo_ns) and percentiles, ns. A percentile is the
/// midpoint of the quarter-octave bucket it falls in (within 12.5%); max is
/// the upper bound of the highest non-empty bucket. All 0 when nothing was
/// timed.
struct SmoTimeSummary {
  uint64_t timed = 0;   ///< SMO scopes timed (a cascade counts once)
  double mean_ns = 0;   ///< smo_ns / timed
  uint64_t p50_ns = 0;  ///< median
  uint64_t p90_ns = 0;
  uint64_t p99_ns = 0;
  uint64_t p99_9_ns = 0;
  uint64_t max_ns = 0;  ///< upper bound of the highest non-empty bucket
};
/// Summarises `c`'s SMO time histogram (see SmoTimeSummary).
SmoTimeSummary smo_time_summary(const pm::CounterSnapshot& c);
/// "SMO time: 412 timed, mean 1.9 us, 50% 1.7 us, 90% ..., max < 30 us", or
/// "" when nothing was timed.
std::string smo_time_text(const pm::CounterSnapshot& c);

/// True when some index failed a check: verification failures, a structural
/// verify() error, a failed recovery, or an index that could not run. The
/// bench command exits 1 in that case.
bool report_has_failures(const BenchReport& report);

}  // namespace nvindex::bench
