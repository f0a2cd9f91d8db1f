// The benchmark driver (DESIGN.md §5): runs one generated Workload against one
// index, the same way for every index, so that differences come from the
// indexes and not from the harness.
//
// Per index, run_benchmark():
//  1. configures the PM layer (pm::configure: mode, injected latency, media
//     model) and, for a persistent index, creates a fresh pool (a temporary
//     file in /dev/shm, else $TMPDIR, else /tmp, unless BenchOptions::pool_path
//     names one; an anonymous DRAM pool in pm::Mode::kDram), a pool file
//     prefaulted untimed (BenchOptions::prefault);
//  2. LOAD: inserts Workload::load_keys, split evenly across the threads (each
//     thread a contiguous share), value make_value(key, 0), every result
//     checked. With BenchOptions::bulk_load instead: the load keys are
//     sorted (untimed), then ONE Index::bulk_load() call on one thread is the
//     timed load phase (an index with caps.bulk_load builds nodes bottom-up
//     at BenchOptions::fill_factor; any other index gets the interface's
//     default, one insert per key, and the report says the fill factor was
//     not applied); afterwards every loaded key is checked (untimed): an
//     ordered index by a full scan compared pair by pair with the sorted
//     keys and values, an unordered one by a lookup of every key;
//  3. RUN: each thread replays its own pre-generated stream
//     (Workload::per_thread[t]); threads start together on a barrier and the
//     clock starts when the barrier opens, so generation is never timed. With
//     a duration, each thread checks the clock every 256 operations and stops
//     when the time is up (or when its stream ends, whichever comes first).
//     With BenchOptions::lookup_batch N > 1, runs of consecutive reads go to
//     the index in batches of up to N keys, one Index::multi_lookup call each
//     (see lookup_batch); with BenchOptions::in_flight N > 1, runs of point
//     operations go to Index::execute, up to N in flight (see in_flight);
//  4. checks the structure with Index::verify() and the final key count
//     (loaded keys + inserts expected to succeed - removes expected to
//     succeed, when no insert or remove had Expect::kAny: this catches an
//     index that acknowledges an insert and drops it), and, for a persistent index,
//     closes and reopens the pool to measure recovery with
//     BenchOptions::recovery_threads (IndexOptions::threads on reopen) and
//     checks that the recovered index holds the same number of keys;
//  5. removes the temporary pool file unless keep_pool.
// A block-device index (needs_device: the LevelDB and RocksDB yardsticks,
// PA-Tree) gets no pool: step 1 creates a fresh temporary directory under
// BenchOptions::device_dir (a real disk; tmpfs is refused) and gives the
// index a path in it that does not exist yet (IndexOptions::device, with
// BenchOptions::device_bytes); after the run phase every index's sync() is
// called and timed (IndexResult::sync_seconds), so a weakly persistent
// index's reopen holds every key; step 4's reopen is from the device path;
// step 5 removes the directory unless keep_pool (and on SIGINT/SIGTERM,
// util/temp_files.h).
// Per phase, for every index, the process's CPU time and context switches
// (getrusage: the whole process, all threads; PhaseResult::process), and for
// a block-device index the I/O of the disk its directory is on
// (/sys/block/<disk>/stat: device-wide, every process; PhaseResult::disk,
// or IndexResult::disk_why when the machine has no such counters):
// bench/os_stats.h.
// Per phase (never per operation), each worker thread counts its own
// user-space instructions, cycles and task-clock time with perf_event_open(2)
// around its loop (bench/perf.h; PhaseResult::cpu), unless
// BenchOptions::perf_counters is false; a counter the machine does not offer
// is reported as not available with the reason.
// With BenchOptions::energy, an EnergyMeter (bench/energy.h: RAPL through
// powercap) is read right before the phase's clock starts and right after
// its last worker ends (next to the PM counters' snapshots), so a phase's
// joules are the whole machine's package and DRAM energy over the phase;
// a machine without RAPL gets no figure, only the reason
// (IndexResult::energy_why).
// Keys: Workload::spec.key_type. Integer keys are the workload's ids;
// string keys (Index<std::string_view> from make_index<std::string_view>, a
// persistent index's pool laid out as pool_layout(name, KeyType::kString))
// are named by the ids (bench/string_keys.h) and laid out, with their value
// hashes, in one arena for the load keys and one per thread's stream before
// step 1's index is loaded, so no timed loop formats a key. The load, run,
// checks and recovery are the same code for both (templated on the key
// type); a string key's value is make_value(string_key_hash(key), version),
// and a scan's pairs are checked in byte order.
// Every operation is checked against its Expect and every value returned with
// value_matches(); each mismatch is a verification failure, the first
// kMaxFailureExamples of which are kept with a description.
//
// Threads are std::thread (no OpenMP), pinned round-robin to the CPUs the
// process may run on with pthread_setaffinity_np when allowed (a refusal is
// ignored). A monitor thread samples per-thread completed-operation counters
// every 100 ms for the progress line and the per-second throughput timeline.
//
// Thread-safety: run_benchmark() configures the process-wide PM settings, so
// only one run_benchmark() may execute at a time in a process.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bench/energy.h"
#include "bench/os_stats.h"
#include "bench/perf.h"
#include "bench/stats.h"
#include "bench/workload.h"
#include "nvindex/index.h"
#include "nvindex/pm/counters.h"
#include "nvindex/pm/persist.h"
#include "nvindex/pm/pool.h"
#include "nvindex/status.h"
#include "util/byte_size.h"

namespace nvindex::bench {

/// How many failure descriptions a run keeps for the report.
inline constexpr size_t kMaxFailureExamples = 10;
/// Largest BenchOptions::lookup_batch (keys per multi_lookup call).
inline constexpr uint32_t kMaxLookupBatch = 4096;
/// Largest BenchOptions::in_flight (operations per worker at once).
inline constexpr uint32_t kMaxInFlight = 4096;

/// Driver settings that are not part of the workload (the workload's own
/// settings are in WorkloadSpec).
struct BenchOptions {
  /// Pool file for a persistent index. Empty: a fresh temporary file
  /// <dir>/nvindex-<pid>-<index>.pool, dir = /dev/shm, else $TMPDIR, else
  /// /tmp. A named file must not exist yet (pools are never overwritten).
  std::string pool_path;
  /// Pool size in bytes; 0 = automatic: 64 MiB + 256 B per key that the run
  /// can hold (loaded keys + run operations), rounded up to 1 MiB.
  uint64_t pool_size = 0;
  /// Keep the pool file after the run (for `nvindex verify` / `info`). The
  /// file, temporary or named, is removed otherwise. Also keeps a
  /// block-device index's temporary directory.
  bool keep_pool = false;
  /// Block-device indexes: the directory (on a real disk, not tmpfs) in which
  /// each gets a fresh temporary directory nvindex-<index>-XXXXXX holding its
  /// store. Empty: util::temp_device_dir() ($NVINDEX_DEVICE_DIR, else
  /// /var/tmp).
  std::string device_dir;
  /// Block-device indexes: IndexOptions::device_bytes, the size of a new
  /// store, bytes (0: the index's default; the LSM stores ignore it).
  uint64_t device_bytes = 0;
  /// PM mode, injected flush/fence latency (ns), media model.
  pm::PersistConfig pm;
  /// Node size for indexes that take one, bytes; an index that does not take
  /// it and declares IndexEntry::default_node_size runs at that
  /// (run_node_size, e.g. dash-eh at 16384).
  uint32_t node_size = 512;
  /// Index-specific knobs passed through to IndexOptions::extra.
  std::map<std::string, std::string> index_extra;
  /// Run phase time limit in seconds; 0 = run every operation.
  double duration_seconds = 0;
  /// Fraction of run operations whose latency is measured (0.01 = 1%). With
  /// lookup_batch > 1 it is the fraction of index calls timed, a batch being
  /// one call (see lookup_batch).
  double latency_sample = 0.01;
  /// Run phase: lookups issued in batches of up to this many keys through
  /// Index::multi_lookup, in 1..kMaxLookupBatch (run_benchmark:
  /// InvalidArgument otherwise). 1 = one lookup() per read operation and no
  /// multi_lookup call. With N > 1, each worker groups each run of
  /// consecutive reads of its stream into batches of up to N keys (any other
  /// operation ends a batch early, so operations keep their order) and issues
  /// each batch as one multi_lookup call; every key's result is checked as a
  /// single lookup's is (same failure messages) and counts as one read
  /// operation (throughput = keys per second). Latency: a batch is sampled
  /// as one call at latency_sample; a sampled batch of n keys records its
  /// time / n once per key, so percentiles are per key. PM cost: the whole
  /// batch is charged to the read type (a batch with an SMO counts as one
  /// smo_ops operation). The load phase is unchanged.
  uint32_t lookup_batch = 1;
  /// Run phase: operations each worker keeps in flight, in 1..kMaxInFlight
  /// (run_benchmark: InvalidArgument otherwise). 1 = one index call per
  /// operation. With N > 1 (an index that makes no PM writes only, and not
  /// with lookup_batch > 1), each worker cuts its stream into batches of up
  /// to 16 N consecutive point operations (lookups, inserts, updates,
  /// removes; a scan or read-modify-write ends a batch and runs alone) and
  /// issues each as one Index::execute(batch, N) call: an index with
  /// caps.async keeps up to N of them in flight (PA-Tree's asynchronous
  /// clients: one thread, many operations), any other runs them one by one.
  /// Every result is checked as a single call's is (same failure
  /// messages); the deadline is checked between batches. Latency: each
  /// operation's own (BatchOp::latency_ns, from its submission to its
  /// completion), sampled per operation at latency_sample. The load phase's
  /// inserts (not a bulk load) go the same way, in batches of 16 N.
  uint32_t in_flight = 1;
  /// Pin worker threads to CPUs (ignored when the OS refuses).
  bool pin_threads = true;
  /// Fault in every page of a new pool file before the load phase
  /// (pm::Pool::prefault, untimed; its time goes to
  /// IndexResult::prefault_seconds), as the authors' drivers and
  /// libpmemobj's prefault.at_create do: without it the load phase pays
  /// the first touch of each 4 KiB page of an emulated pool, a cost of
  /// tmpfs that PM on DAX (2 MiB pages) mostly does not have. The pool
  /// reopened for the recovery measurement is not prefaulted.
  bool prefault = true;
  /// Load with one Index::bulk_load() of the sorted load keys instead of
  /// inserts (see the file comment).
  bool bulk_load = false;
  /// IndexOptions::fill_factor: fraction of each node's slots a bottom-up
  /// bulk load fills, in (0, 1] (run_benchmark: InvalidArgument otherwise).
  /// Passed to every index; only a bulk load with caps.bulk_load uses it.
  double fill_factor = 1.0;
  /// IndexOptions::threads when the pool is reopened after the run (the
  /// rebuild threads of an index with a parallel recovery, e.g. lbtree);
  /// 0 = the run's threads.
  unsigned recovery_threads = 0;
  /// Count user-space instructions, cycles and task-clock time per phase with
  /// perf_event_open(2) (bench/perf.h: per worker thread, read before and
  /// after its loop). false: not opened, reported as turned off.
  bool perf_counters = true;
  /// Read the package and DRAM energy of each phase from RAPL
  /// (bench/energy.h), when the machine offers it (see the file comment).
  bool energy = false;
  /// The powercap directory the energy meter reads (tests point it at a
  /// fake tree).
  std::string powercap_root = "/sys/class/powercap";
  /// The name reports show for this run (e.g. the CLI's index spec
  /// "wbtree:inner=dram"); empty = the registry name.
  std::string label;
};

/// How the load phase loaded the keys.
enum class LoadMethod : uint8_t {
  kInserts,            ///< insert() per key, split across the threads
  kBulkLoad,           ///< one bulk_load() of an index with caps.bulk_load (fill factor applied)
  kBulkLoadByInserts,  ///< one bulk_load() of an index without it: the default, inserts
};
/// "inserts", "bulk_load", "bulk_load_by_inserts" (the JSON report's names).
std::string_view load_method_name(LoadMethod m);

/// `text` with every character outside [A-Za-z0-9._-] replaced by '_', for
/// file names built from a label such as "wbtree:inner=dram".
std::string file_safe(std::string_view text);

/// Measurements of one phase (load or run).
struct PhaseResult {
  uint64_t operations = 0;  ///< operations completed by all threads
  double seconds = 0;       ///< wall time from barrier release to the last thread's end, s
  double throughput = 0;    ///< operations / seconds, ops/s
  pm::CounterSnapshot pm;   ///< PM counters spent in the phase (after - before)
  /// Instructions, cycles and task-clock ns of the worker threads in the
  /// phase (bench/perf.h), each with whether it could be counted and why not.
  CpuCounters cpu;
  /// Package and DRAM joules of the whole machine over the phase, with
  /// BenchOptions::energy on a machine whose RAPL counters can be read;
  /// nullopt otherwise (IndexResult::energy_why says why).
  std::optional<Joules> energy;
  /// CPU time (user + system, cores used) and context switches of the whole
  /// process over the phase (getrusage RUSAGE_SELF: all threads, the
  /// index's background threads included). (`{}` here and below: an
  /// aggregate initializer that stops before them stays warning-free.)
  ProcessUsage process{};
  /// Block-device indexes: the I/O of the disk under the device directory
  /// over the phase (device-wide); nullopt for other indexes or without
  /// counters (IndexResult::disk_why).
  std::optional<DiskIo> disk{};
  /// IndexInfo::counters spent in the phase (after - before), by name.
  std::vector<std::pair<std::string, uint64_t>> index_counters{};
};

/// Completed and succeeded operations of one OpType in the run phase.
/// succeeded = the index returned the expected outcome (a found key for a read
/// of an existing key, Ok for an insert of a fresh key, ...); for Expect::kAny
/// an operation succeeds when it found its key (read, update, rmw, remove),
/// inserted it, or returned a non-empty scan.
/// flushes, lines_flushed and fences are the PM cost of those operations:
/// the worker thread's own counters (pm::thread_counters()) read before and
/// after each operation, so the cost is exact per type even in a mixed run
/// (background work of other threads is never charged to an operation).
///
/// Split vs non-split cost: the operations during which the worker's own SMO
/// counter (pm::ThreadCounters::smos, bumped by pm::count_smo() once per
/// split, merge, root growth or collapse) grew are "with SMO"; their count
/// and PM cost are kept in the smo_* fields, so the cost of the operations
/// without an SMO is the total minus those (without_smo()). This separates
/// split inserts from non-split ones (the LB+-tree paper's line writes per
/// insertion, Liu et al., PVLDB 2020, §3.2 and §4.2). An index that never
/// calls count_smo() has smo_ops == 0.
struct TypeCounts {
  uint64_t completed = 0;
  uint64_t succeeded = 0;
  uint64_t flushes = 0;            ///< flush instructions issued by these operations
  uint64_t lines_flushed = 0;      ///< 64 B lines flushed (PM line writes)
  uint64_t fences = 0;             ///< fences issued by these operations
  uint64_t smo_ops = 0;            ///< operations during which >= 1 SMO was counted
  uint64_t smos = 0;               ///< SMOs counted during all these operations
  uint64_t smo_flushes = 0;        ///< flushes of the smo_ops operations
  uint64_t smo_lines_flushed = 0;  ///< lines flushed by the smo_ops operations
  uint64_t smo_fences = 0;         ///< fences of the smo_ops operations

  /// The operations without an SMO: completed, flushes, lines_flushed and
  /// fences of those only (smo_* fields 0).
  TypeCounts without_smo() const;
  /// The operations with an SMO, as a TypeCounts (completed = smo_ops).
  TypeCounts with_smo() const;
};

/// Everything run_benchmark() measured for one index.
struct IndexResult {
  std::string index;       ///< label (BenchOptions::label, else the registry name)
  std::string index_name;  ///< registry name
  /// IndexOptions::extra the index ran with (BenchOptions::index_extra).
  std::map<std::string, std::string> index_options;
  IndexInfo info;  ///< info() after the run (footprint, capabilities)
  LoadMethod load_method = LoadMethod::kInserts;
  double fill_factor = 1.0;  ///< BenchOptions::fill_factor (applied only for kBulkLoad)
  PhaseResult load;
  PhaseResult run;
  std::array<TypeCounts, kOpTypes> by_type{};  ///< indexed by OpType
  uint64_t skipped = 0;    ///< operations the index does not claim (scans on unordered)
  LatencySummary latency;  ///< run phase, sampled
  std::vector<uint64_t>
      timeline;  ///< completed run operations in each second (last may be partial)
  double timeline_last_fraction = 1;          ///< length of the last timeline bucket, s (<= 1)
  uint64_t checked = 0;                       ///< operations checked (load + run)
  uint64_t failures = 0;                      ///< operations whose outcome or value was wrong
  std::vector<std::string> failure_examples;  ///< first kMaxFailureExamples descriptions
  Status structure;                           ///< Index::verify() after the run
  VerifyReport verify_report;                 ///< filled when structure.ok()
  bool persistent = false;
  double recovery_seconds = 0;    ///< reopen of the pool after the run (persistent only), s
  unsigned recovery_threads = 0;  ///< IndexOptions::threads of that reopen
  /// info().recovery_seconds of the reopened index: its own rebuild time
  /// (inner nodes, allocator), s; part of recovery_seconds.
  double rebuild_seconds = 0;
  Status recovery;           ///< outcome of that reopen
  bool media_model = false;  ///< media model was on (media_writes meaningful)
  std::string pool_path;     ///< file used ("" for volatile or anonymous)
  /// How the pool's mapping was backed by pages after the run (4 KiB, or
  /// huge pages where the machine allowed them); known = false for an index
  /// without a pool.
  pm::PageBacking pool_pages;
  /// BenchOptions::prefault on a new pool file: the time pm::Pool::prefault
  /// took, s, before the load phase (not part of it); negative when the
  /// pool was not prefaulted (off, no pool file, or an anonymous pool).
  double prefault_seconds = -1;
  /// Block-device index: the path given as IndexOptions::device ("" else).
  std::string device_path;
  std::string disk;      ///< the disk under device_path ("vda"), "" when unknown
  std::string disk_why;  ///< why there are no disk counters ("" when there are)
  /// Index::sync() after the run phase (every index; Ok at once for PM
  /// ones), wall time, s, and its outcome.
  double sync_seconds = 0;
  Status sync;
  bool energy_measured = false;  ///< BenchOptions::energy was on
  /// With energy_measured and no figure: why the meter had none (e.g. "no
  /// /sys/class/powercap: the machine exposes no RAPL counters"); "" else.
  std::string energy_why;
  bool energy_dram = false;  ///< the meter found a DRAM zone (Joules::dram meaningful)
};

/// Media write amplification of a phase: media_writes * 256 B over
/// lines_written_back * 64 B, the bytes the media wrote over the bytes that
/// reached the DIMM (1.0 = every 256 B XPLine written once per four line
/// write-backs; 4.0 = one media write per line). 0 when no line was
/// written back.
double media_write_amplification(const pm::CounterSnapshot& pm);

/// Receives progress reports while a benchmark runs (called from the monitor
/// thread, about every 100 ms, and once with fraction 1 at a phase's end).
class ProgressSink {
 public:
  virtual ~ProgressSink() = default;
  /// phase: "load" or "run"; fraction of the phase done in [0, 1] (with a
  /// duration: of the time); ops_per_s over the phase so far.
  virtual void update(std::string_view phase, std::string_view index, double fraction,
                      double ops_per_s) = 0;
  /// The phase ended.
  virtual void finish(std::string_view phase, std::string_view index) = 0;
};

/// A progress line on stderr, "load fastfair  45%  1.20 Mops/s": rewritten in
/// place with '\r' when stderr is a terminal, otherwise one line every
/// `interval_s` seconds.
std::unique_ptr<ProgressSink> make_stderr_progress(double interval_s = 5.0);

/// The options run_benchmark() refuses for the index of `entry` whatever the
/// workload (the command line checks them for every index before any
/// work): Ok, or InvalidArgument for fill_factor outside (0, 1],
/// lookup_batch outside 1..kMaxLookupBatch, in_flight outside
/// 1..kMaxInFlight, in_flight above 1 with lookup_batch above 1, or in_flight
/// above 1 for an index that makes PM writes (needs_pool: a batch's PM cost
/// could not be charged to its operations).
Status check_run_options(const BenchOptions& options, const IndexEntry& entry);

/// Runs `workload` against the index registered as `index_name` (see the file
/// comment) and fills *out. Returns Ok when the benchmark ran to the end, even
/// with verification failures (they are in out->failures); errors:
/// InvalidArgument (unknown index, string keys (workload.spec.key_type) on
/// an index without caps.string_keys, threads > 1 on an index that is not
/// thread-safe, workload with no thread streams, bad pool size, fill_factor
/// outside (0, 1], lookup_batch outside 1..kMaxLookupBatch, in_flight
/// outside 1..kMaxInFlight or above 1 for a PM index or with lookup_batch,
/// a block-device
/// index with a device directory on tmpfs), any error of
/// pm::Pool::create / make_index (pool, recovery), IOError (temporary pool
/// directory). `progress` may be null.
Status run_benchmark(const BenchOptions& options, const Workload& workload,
                     std::string_view index_name, IndexResult* out, ProgressSink* progress);

/// The registered indexes that take string keys (caps.string_keys, with a
/// std::string_view factory), in registry order.
std::vector<std::string_view> string_key_indexes();
/// The same names comma-separated, a test-only one marked "(test only)";
/// "none" when there is none (messages).
std::string string_key_index_list();

/// Parses a byte size "4096", "512K", "512M", "4G", "1T" into *out bytes
/// (util/byte_size.h).
using util::parse_byte_size;

}  // namespace nvindex::bench
