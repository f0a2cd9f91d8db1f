// Process-crash torture (issue 3 §5): the real recovery path, outside the
// crash simulator.
//
// A child process opens (and so recovers) a file-backed pool in emulated mode
// and runs a mixed workload on it (insert / update / remove / lookup); after
// each operation returns it logs the acknowledgement (the Status code, and
// for a lookup the value found) to a side log the parent reads: a
// MAP_SHARED anonymous mapping created before fork, which outlives the
// child. A record is written with plain stores and then committed by raising
// the thread's acknowledged count (release store), so a kill leaves every
// record either acknowledged or not. The parent kills the child with SIGKILL
// (fork_and_kill, crash/kill.h) after a seeded random delay (one round in
// five before the child reported ready: during its open and recovery),
// copies the crashed pool file, opens the copy (recovery), runs verify() and
// checks that every acknowledged operation is present and nothing else
// appeared: the state equals a std::map model built from the
// acknowledgements, except that each thread's one in-flight operation (the
// next in its stream) may be wholly applied or wholly absent. The next
// child then recovers the original crashed file (so crashes during recovery
// are exercised too, and checked by the next round).
//
// Why a shared mapping rather than a side file with write + fdatasync, or a
// pipe: SIGKILL loses nothing a process wrote to a shared mapping, a pipe or
// the page cache, so all three are equally durable against a process crash;
// the mapping costs two stores per operation and no system call, so the
// child spends its time inside the index and the kill lands there (with a
// pipe, it spent most of its time in write(2) and in-flight operations were
// almost never caught half-done).
//
// What this does not test: a process crash never loses CPU caches, so a
// missing flush or fence is invisible here (that is the crash simulator's
// job, DESIGN.md §6). What it tests is that every state the index can be
// killed in, at instruction granularity, recovers to a consistent index that
// holds exactly the acknowledged operations, and that recovery itself can be
// killed and rerun.
//
// Block-device indexes (Placement::kBlockDevice: PA-Tree, the LevelDB and
// RocksDB yardsticks of issue 14) run the same protocol on their device
// path (TortureOptions::pool_path is then the path given as
// IndexOptions::device: a directory or file the index creates): the parent
// copies the crashed directory or file instead of the pool file and reopens
// the copy (recovery). With strong persistence (every acknowledged write
// durable) the model above applies unchanged. Weak persistence
// (TortureOptions::sync_every = N > 0): thread 0 calls Index::sync() after
// every N of its operations; before the call it snapshots every thread's
// acknowledged count, and after the call returns Ok it publishes that
// snapshot in the side log as the durable frontier. After the kill, every
// operation acknowledged before the frontier must be present, and each key
// must hold a state it held at or after the frontier (its state at the
// frontier, after any later acknowledged operation of it, or after the
// thread's in-flight operation; absent likewise). The recovered state then
// becomes the model of the next round.
//
// Workload: keys are 1 + t + threads * slot for thread t and slot in
// [0, keys / threads), so threads own disjoint keys (each thread's stream is
// linearizable on its own and the model is exact); each round picks one of
// three mixes (grow: mostly inserts, shrink: mostly removes, balanced) so that
// the tree keeps splitting and merging across rounds. Every operation stream
// is a pure function of (seed, round, thread): a failure is replayed from the
// seed and the round number.
//
// Thread-safety: run_torture() forks; call it from a process with no other
// threads running (a test binary's main thread, the CLI).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "nvindex/index.h"
#include "nvindex/status.h"

namespace nvindex::crash {

/// What run_torture() does.
struct TortureOptions {
  std::string index;  ///< registered persistent index, e.g. "fastfair", or block-device one
  /// Key type: integer, or string (the index's string instance; key ids
  /// become string_key(id) of string_keys.h).
  KeyType key_type = KeyType::kInteger;
  /// Pool file to create (must not exist), e.g. /dev/shm/t.pool; for a
  /// block-device index (needs_device), its device path (must not exist; on
  /// a real disk, e.g. /var/tmp/t.ldb), given as IndexOptions::device.
  std::string pool_path;
  double seconds = 10;       ///< stop after this much wall time, seconds (> 0) ...
  uint32_t kills = 100;      ///< ... or after this many SIGKILLs (>= 1), whichever first
  uint64_t seed = 1;         ///< seeds the op streams and the kill delays
  uint32_t node_size = 256;  ///< IndexOptions::node_size at creation, bytes
  /// IndexOptions::extra at creation and at every reopen (e.g. inner=dram);
  /// make_index checks them.
  std::map<std::string, std::string> index_opts;
  unsigned threads = 1;  ///< worker threads in the child (1..16; > 1 needs thread_safe)
  uint64_t keys = 0;     ///< key space size; 0 = 64 nodes' worth of entries
                         ///< (64 * node_size / 16), at least 64 per thread
  /// Pool file size, bytes (>= pm::kMinPoolSize); for a block-device index,
  /// IndexOptions::device_bytes of the new store (an index without a size
  /// limit ignores it).
  uint64_t pool_bytes = 16ull << 20;
  /// Weak persistence: thread 0 of a child calls Index::sync() after every
  /// sync_every of its operations, and the check is the weak one (file
  /// comment). 0 (default): no sync calls, every acknowledged operation must
  /// survive (strong persistence; every PM index).
  uint32_t sync_every = 0;
  double max_run_ms = 10;  ///< a child runs uniform [0, max_run_ms] ms after it
                           ///< reported ready before it is killed (> 0)
  bool keep_pool = false;  ///< keep the pool file (and its checked copy) on success;
                           ///< on failure both are always kept for replay
  /// Test-only fault injection, proving the checker can fail: when N > 0 the
  /// child skips every N-th insert but acknowledges it as done (a lost
  /// acknowledged operation). Never set outside tests.
  uint32_t inject_lost_insert_every = 0;
};

/// One failed check, with what is needed to replay it.
struct TortureFailure {
  uint32_t round = 0;  ///< 1-based round (child) number
  uint64_t seed = 0;   ///< TortureOptions::seed of the run
  std::string what;    ///< which check failed, the key/op/thread/op number and
                       ///< what was expected and found
};

/// What run_torture() saw.
struct TortureReport {
  uint32_t rounds = 0;               ///< children started
  uint32_t kills = 0;                ///< children killed with SIGKILL
  uint32_t killed_before_ready = 0;  ///< of those, killed before they reported ready
                                     ///< (during open + recovery, or earlier)
  uint64_t acked_ops = 0;            ///< operations acknowledged by children, all rounds
  uint64_t acked_inserts = 0, acked_updates = 0, acked_removes = 0, acked_lookups = 0;
  uint64_t inflight_applied = 0;  ///< in-flight operations found applied after a kill
  uint64_t syncs = 0;             ///< completed sync() calls (sync_every > 0), all rounds
  /// Weak persistence: keys found (after a kill) in an older state than the
  /// one their last acknowledged operation left, but one allowed since the
  /// last completed sync; all rounds.
  uint64_t unsynced_lost = 0;
  uint32_t recoveries = 0;               ///< recoveries checked by the parent (one per round)
  std::vector<double> recovery_seconds;  ///< wall time of each parent open + recovery, s
  uint64_t final_keys = 0;               ///< keys in the model after the last check
  VerifyReport last_verify;              ///< verify() report of the last check
  double seconds = 0;                    ///< wall time of the whole run, s
  std::vector<TortureFailure> failures;  ///< empty when every check passed (the run
                                         ///< stops at the first failure)

  /// Min, median and max of recovery_seconds (0 when empty), seconds.
  double recovery_min() const;
  double recovery_median() const;
  double recovery_max() const;
};

/// Runs the torture described above until options.kills kills or
/// options.seconds seconds, whichever first, or the first failed check.
/// Returns Ok when the run happened (failures are in report->failures, not in
/// the Status); InvalidArgument for bad options (unknown or volatile index,
/// sync_every on an index that is not a block-device one,
/// threads > 1 on an index that is not thread-safe, a zero or out-of-range
/// count), AlreadyExists (the pool file exists: torture creates its own), and
/// the pool's or the index's error when the initial pool cannot be created,
/// IOError when pipe/fork/copy fails. On success the pool file is removed
/// unless options.keep_pool.
Status run_torture(const TortureOptions& options, TortureReport* report);

}  // namespace nvindex::crash
