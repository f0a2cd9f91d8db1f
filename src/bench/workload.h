// Workloads (DESIGN.md §5): what the benchmark driver feeds to an index.
//
// A Workload is generated completely before any timing starts: the keys to
// load, and for each worker thread its own stream of operations, each with the
// outcome the driver must see (so that an index that answers wrongly is
// caught, never silently counted).
//
// Key discipline (what PiBench does, with what its users asked for):
//  - inserts use fresh keys (never loaded, never inserted before), and the
//    fresh keys are split evenly and disjointly across threads;
//  - reads, updates and read-modify-writes target keys that exist;
//  - removes target keys that exist and that no other operation of the run
//    touches (each thread removes from its own disjoint share of the loaded
//    keys), so every remove expects Ok and no read can race with it;
//  - each thread's share of the operations is even (differs by at most 1).
// Where an outcome depends on how threads interleave (a trace replayed by
// several threads reading a key another thread inserts), the expectation is
// Expect::kAny and only the value's integrity is checked.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "bench/string_keys.h"
#include "nvindex/index.h"
#include "nvindex/status.h"

namespace nvindex::bench {

/// Operation kinds. kReadModifyWrite is YCSB F: a read, then an update of the
/// same key with a new value.
enum class OpType : uint8_t { kRead, kInsert, kUpdate, kRemove, kScan, kReadModifyWrite };
inline constexpr int kOpTypes = 6;
/// "read", "insert", "update", "remove", "scan", "rmw".
std::string_view op_name(OpType type);

/// What the driver must observe for an operation.
enum class Expect : uint8_t {
  kFound,     ///< read/update/rmw/remove: key present (Ok); insert: Ok (fresh key);
              ///< scan: at least one pair returned
  kNotFound,  ///< read: absent; update/remove: NotFound; insert: AlreadyExists
  kAny,       ///< outcome depends on thread interleaving; value integrity still checked
};

/// One operation, 16 bytes. For kScan, scan_length is the number of pairs
/// asked for; otherwise 0.
struct Operation {
  uint64_t key;
  uint32_t scan_length;
  OpType type;
  Expect expect;
};
static_assert(sizeof(Operation) == 16);

/// Key-choice distributions (for reads, updates, scans, rmw).
enum class Distribution : uint8_t {
  kUniform,      ///< every existing key equally likely
  kZipfian,      ///< YCSB scrambled zipfian over the loaded keys (skew = theta, 0.99)
  kSelfSimilar,  ///< PiBench self-similar: skew h, e.g. 0.2 = 80% of ops on 20% of keys
  kLatest,       ///< YCSB latest: zipfian over recency, newest keys most likely
  kSequential,   ///< keys in load order, wrapping around
};
/// "uniform", "zipfian", "selfsimilar", "latest", "sequential".
std::string_view distribution_name(Distribution d);
Status parse_distribution(std::string_view name, Distribution* out);

/// How fresh insert keys are chosen (LB+-tree paper, Liu et al., PVLDB 13(7)
/// 2020, §4.2: "random" and "dense" insertions).
enum class InsertPattern : uint8_t {
  /// Keys of the key function past the loaded ones (hashed: random positions
  /// all over the tree), dealt round-robin to the threads.
  kRandom,
  /// Each thread inserts consecutive ascending keys in its own region above
  /// the largest loaded key: thread t inserts base_t, base_t + 1, ... with
  /// base_t = max_loaded + 1 + t * span and span = max(largest per-thread
  /// insert count, WorkloadSpec::dense_gap). So every thread appends at its
  /// own hot spot (the rightmost leaf of its region).
  kDense,
};
/// "random", "dense".
std::string_view insert_pattern_name(InsertPattern p);
/// Parses "random" or "dense"; InvalidArgument naming both otherwise.
Status parse_insert_pattern(std::string_view name, InsertPattern* out);

/// Everything that defines a workload. Ratios are fractions that sum to 1
/// (checked by make_workload: InvalidArgument otherwise).
struct WorkloadSpec {
  std::string name = "custom";      ///< a preset name (apply_preset), "trace", or "custom"
  uint64_t records = 1'000'000;     ///< keys loaded before the run
  uint64_t operations = 1'000'000;  ///< run operations, all threads together
  unsigned threads = 1;             ///< worker threads (>= 1)
  double read_ratio = 1.0;
  double insert_ratio = 0.0;
  double update_ratio = 0.0;
  double remove_ratio = 0.0;
  double scan_ratio = 0.0;
  double rmw_ratio = 0.0;
  uint32_t scan_size = 100;   ///< pairs per scan (max length when scan_uniform)
  bool scan_uniform = false;  ///< YCSB E: scan length uniform in [1, scan_size]
  Distribution distribution = Distribution::kUniform;
  double skew = 0.99;  ///< zipfian/latest theta in (0, 1), or self-similar h in (0, 1)
  /// Key values: false = the i-th key is FNV-1a 64 of i (YCSB's hashed
  /// insert order: random-looking 64-bit keys); true = the i-th key is i+1.
  /// A key equal to 0 or to an earlier key (FNV-1a 64 is not injective;
  /// practically never) is skipped, so all keys of a workload are distinct.
  bool sequential_keys = false;
  uint64_t seed = 1;  ///< every random choice derives from it
  /// Where inserts go (generated workloads only; a trace with kDense is
  /// InvalidArgument).
  InsertPattern insert_pattern = InsertPattern::kRandom;
  /// kDense: minimum key distance between two threads' regions (0 = the
  /// largest per-thread insert count, so the regions touch).
  uint64_t dense_gap = 0;
  /// Key type of the run: integer keys are the ids themselves; string keys
  /// are named by the ids (string_keys.h: a keys file's or trace's own
  /// strings, else "user" + zero-padded decimal id of key_size bytes).
  KeyType key_type = KeyType::kInteger;
  /// String keys: bytes of a formatted key, in [5, 255] (make_workload:
  /// InvalidArgument otherwise); unused for integer keys and for a string
  /// keys file's or trace's own keys (their length is their own).
  uint32_t key_size = kDefaultStringKeySize;
  /// Load keys: one per line; a decimal uint64 for integer keys, the line's
  /// bytes for string keys (trace.h, read_keys_file).
  std::string keys_file;
  std::string trace_load;  ///< index-microbench load file (INSERT <key> lines)
  std::string trace_run;   ///< index-microbench run file
};

/// Every preset apply_preset() knows, in --help order.
inline constexpr std::string_view kPresetNames[] = {"ycsb-a", "ycsb-b", "ycsb-c", "ycsb-d",
                                                    "ycsb-e", "ycsb-f", "insert", "dense-insert",
                                                    "search", "delete"};
/// The same names as one comma-separated string, for messages.
inline constexpr char kPresetList[] =
    "ycsb-a, ycsb-b, ycsb-c, ycsb-d, ycsb-e, ycsb-f, insert, dense-insert, search, delete";

/// Sets `spec` to preset `name`, keeping records, operations, threads, seed,
/// dense_gap and the key source (sequential_keys, keys_file, trace_load,
/// trace_run); every other field is reset (all other ratios 0, scan_size 100,
/// scan_uniform false except E, insert_pattern random except dense-insert).
///
/// YCSB workloads "ycsb-a" .. "ycsb-f" with YCSB's own parameters (YCSB
/// workloads/workload[a-f], CoreWorkload defaults: requestdistribution
/// zipfian = scrambled zipfian, zipfian constant 0.99, hashed insert order,
/// maxscanlength 100 with scanlengthdistribution uniform):
///   A: 50% read, 50% update, zipfian 0.99     B: 95% read, 5% update, zipfian
///   C: 100% read, zipfian                     D: 95% read, 5% insert, latest
///   E: 95% scan (length uniform 1-100), 5% insert, zipfian
///   F: 50% read, 50% read-modify-write, zipfian
///
/// The LB+-tree paper's micro-benchmarks (Liu et al., PVLDB 13(7) 2020, §4.2;
/// combine with BenchOptions::bulk_load and fill_factor for its "bulk load at
/// a fill factor, then ..." setup), distribution uniform:
///   insert:       100% inserts of fresh random keys (InsertPattern::kRandom)
///   dense-insert: 100% inserts, each thread ascending in its own region above
///                 the largest loaded key (InsertPattern::kDense)
///   search:       100% reads of loaded keys, uniform
///   delete:       100% removes of loaded keys (needs operations <= records)
/// InvalidArgument for any other name, listing the valid ones.
Status apply_preset(std::string_view name, WorkloadSpec* spec);

/// A generated workload.
///
/// Layout of the keys (generated and keys-file workloads):
///  - load_keys[0, records - R) are the *target* keys: reads, updates, rmw
///    and scan start keys are drawn from them by the distribution (item i of
///    a distribution = load_keys[i]; for kLatest, items past the target keys
///    are the keys this thread inserted, newest last);
///  - load_keys[records - R, records) (the last R in load order, R = number
///    of remove operations) are reserved for removes: thread t removes its
///    own contiguous share of them, in load order, and no other operation of
///    any thread targets them;
///  - insert keys are fresh. InsertPattern::kRandom: key indices records,
///    records+1, ... of the same key function (spec.sequential_keys), dealt
///    round-robin to the threads (thread t takes indices records + t,
///    records + t + threads, ...), with any key equal to an earlier one (or
///    to a keys-file key) skipped. InsertPattern::kDense: thread t's j-th
///    insert is max_loaded + 1 + t * span + j (see InsertPattern), ascending.
/// So every operation's Expect is exact (kFound) whatever the interleaving.
struct Workload {
  WorkloadSpec spec;                ///< as given, with records/operations/ratios filled in
                                    ///< from the keys file or trace when one is used
  std::vector<uint64_t> load_keys;  ///< loaded in this order, split across threads
  std::vector<std::vector<Operation>> per_thread;  ///< run operations, one stream per thread
  /// Keys skipped because they repeat an earlier key of the keys file or of
  /// the trace load file (the first occurrence is kept, in its place).
  uint64_t duplicate_keys = 0;
  /// String keys from a keys file or a trace (spec.key_type kString): the
  /// distinct keys sorted byte-wise; key id i (1-based) names
  /// key_strings[i - 1], so ids compare as their strings do. Empty
  /// otherwise (every id then names its formatted key).
  std::vector<std::string> key_strings;
  uint64_t total_operations() const;
  /// How this workload's ids name string keys (string_keys.h).
  StringKeyNames string_key_names() const;
};

/// Generates the workload: keys from the key file, the trace or the key
/// generator; operations drawn with spec.seed, expectations computed by
/// simulating the run. Deterministic: the same spec gives the same Workload.
///
/// Generated workloads: the operation mix is exact, not sampled: the count
/// of each type is round(ratio * operations) (largest remainder, so the
/// counts sum to operations), the types are shuffled with spec.seed and
/// dealt round-robin, so thread t gets operations/threads ops (+1 for the
/// first operations % threads threads). Each thread then draws its keys with
/// its own Rng stream (Rng::for_stream(seed, t + 1)) and its own copy of the
/// distribution (see Workload for the key layout). Scan length is scan_size,
/// or uniform in [1, scan_size] when scan_uniform. Every Expect is kFound.
///
/// keys_file: load keys are the file's keys in file order (duplicates are
/// skipped and counted in duplicate_keys); spec.records becomes their count.
///
/// Traces (trace_load and/or trace_run set; keys_file must be empty): load
/// keys are the load file's keys (duplicates skipped, counted); run op i goes
/// to thread i % threads, keeping each thread's order; READ -> kRead,
/// UPDATE -> kUpdate, INSERT -> kInsert, SCAN -> kScan. Expect comes from
/// replaying the trace sequentially over the key set: a READ/UPDATE of a
/// loaded key, or of a key the same thread inserted earlier, is kFound; of a
/// key only other threads insert (before or after) kAny; of a key nobody
/// inserts kNotFound. An INSERT of a loaded key, or of a key the same thread
/// inserted before, is kNotFound (AlreadyExists); of a key another thread
/// also inserts kAny; else kFound. A SCAN is kFound when a key >= start is
/// surely present (loaded, inserted before by the same thread, or with one
/// thread inserted before by anyone), else kAny. spec.name becomes "trace",
/// records/operations the trace's counts, the ratios its verb mix.
///
/// String keys (spec.key_type kString): a keys file or trace is read as byte
/// strings; its distinct keys become Workload::key_strings and the ids are
/// their ranks (string_keys.h), so every expectation above holds for the
/// strings. Generated and fresh insert ids name formatted keys of
/// spec.key_size bytes.
///
/// Errors: InvalidArgument (a ratio outside [0, 1] or ratios not summing to 1
/// within 1e-9, threads 0, records 0 without a trace, scan_size 0, a skew
/// outside (0, 1) for zipfian/latest/selfsimilar, more removes than records,
/// no target key left for reads, an empty keys file, keys_file together with
/// a trace, dense inserts with a trace, dense insert regions that would pass
/// UINT64_MAX; string keys: key_size outside [5, 255], an id past the
/// table too large for key_size's digits, a generated key equal to a
/// keys-file key), NotFound/IOError (a missing or unreadable file, naming it),
/// Corruption (a malformed line: "file:line: expected ..."). *out is reset
/// to an empty Workload on error.
/// Cost: O(records + operations) time and memory, plus a sort of the keys
/// when they are FNV-hashed (to prove them distinct).
Status make_workload(const WorkloadSpec& spec, Workload* out);

/// The value written for `key` by its `version`-th write: the upper 32 bits
/// are a hash of the key, the lower 32 bits the version. A value read back for
/// `key` whose upper half does not match is wrong (another key's value or
/// garbage), whatever the interleaving. With string keys the driver passes
/// string_key_hash(key) (XXH3 64 of the key's bytes) as `key`.
inline uint64_t make_value(uint64_t key, uint32_t version) {
  uint64_t h = key * 0x9E3779B97F4A7C15ull;
  h ^= h >> 29;
  return (h & 0xFFFFFFFF00000000ull) | version;
}
inline bool value_matches(uint64_t key, uint64_t value) {
  return (make_value(key, 0) >> 32) == (value >> 32);
}

}  // namespace nvindex::bench
