// The crash-lab oracle (issue 3 §2, §4, §7; DESIGN.md §6): runs crash
// scenarios on a persistent index under the crash simulator
// (pm/crashsim.h), recovers every crash image in a child process and
// checks it; and the ablation self-test built on it.
//
// A scenario: a kCrashSim file pool (4 MiB by default, in /dev/shm), the
// index created under the simulator WITH crash points on (so a crash during
// index creation is tested too: it must recover to an empty index), then N
// operations (insert / update / remove over a small key universe, biased to
// grow first, forcing splits, then shrink, forcing merges), each followed by
// Simulator::operation_boundary().
//
// At every crash point each image is checked in a forked child, killed after
// Options::child_timeout_s (a hang is a failure). The child writes the image
// to a fresh file pool, opens it in emulated mode and recovers it with
// make_index, then checks (a failure names the first violated one):
//  1. recovery: Pool::open and make_index succeed;
//  2. structure: Index::verify();
//  3. durable linearizability: the content (a full scan, and a lookup of
//     every key of the scenario's universe) equals the model before the
//     operation in flight or after it (wholly absent or wholly applied); at an
//     operation's return, the model after it; every value checked; nothing
//     else appears; verify()'s key count agrees;
//  4. no leaked or doubly owned PM block: a doubly owned block fails
//     recovery (Allocator::mark_reachable); a leak is caught by accounting:
//     Allocator::bytes_in_use() after recovery must equal the bytes of the
//     blocks verify() reached (VerifyReport::pm_bytes when the index counts
//     them: key records, delta records; else its nodes, leaves + inner nodes
//     or leaves only for selective persistence, times its node size) plus
//     the constant overhead measured right after creation (e.g. fastfair's
//     64 B root object). It runs right after verify(), before check 3's
//     reads, since reads may write (p-bwtree's lookups post index entries);
//  5. the index keeps working: inserts of fresh keys interleaved with the
//     existing ones (enough to split several nodes), then removes of those
//     and of every other existing key (merges), each result matched against
//     the model, then verify(), lookups and a full scan again;
//  6. a crash during recovery (a sample: every Options::nested_every-th
//     image, at most Options::nested_max per scenario, checked after the
//     scenario): the image is recovered under a nested simulator, up to
//     Options::nested_per_point images are taken at each fence of the
//     recovery, and each of those is recovered again (emulated): it must
//     pass verify() and reach the same content as the uninterrupted recovery.
//
// Thread-safety: one run at a time per process (the simulator is a
// process-wide hook); not thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "crash/images.h"
#include "nvindex/index.h"
#include "nvindex/status.h"
#include "pm/crashsim.h"

namespace nvindex::crash {

/// One operation of a scenario.
struct Op {
  enum class Kind : uint8_t { kInsert, kUpdate, kRemove };
  Kind kind = Kind::kInsert;
  uint64_t key = 0;
  Value value = 0;
};
/// "insert 7007=0x1f", "update 7=0x0", "remove 9007".
std::string op_text(const Op& op);

/// The model: key -> value.
using Model = std::map<uint64_t, Value>;

/// The operations of one scenario and the keys they use.
struct Scenario {
  std::vector<Op> ops;
  /// Every key any op touches (sorted, distinct): the oracle looks each up.
  std::vector<uint64_t> universe;
};

/// Deterministic scenario of `n` operations from `seed`. Keys: 0,
/// UINT64_MAX and 1000 i + 7 for i < max(8, 2n/3). The first 55% of the
/// operations are 80% inserts (10% of them of present keys), 10% updates,
/// 10% removes; the rest 70% removes (mostly of present keys), 10% inserts,
/// 20% updates. Values are random 64-bit words, 0 included.
Scenario make_scenario(uint64_t seed, size_t n);

/// Applies op to *model and returns the status the index must return (kOk,
/// kAlreadyExists or kNotFound).
Code apply_op(const Op& op, Model* model);

/// What to run.
struct Options {
  std::string index;  ///< registered persistent index
  /// Key type: integer, or string (the index's string instance, keys
  /// string_key(id) of string_keys.h; the index must have caps.string_keys).
  KeyType key_type = KeyType::kInteger;
  uint32_t node_size = 256;                       ///< bytes (small: splits and merges in a few ops)
  std::map<std::string, std::string> index_opts;  ///< IndexOptions::extra
  uint64_t seed = 1;                              ///< scenario s uses seed + s
  size_t ops = 30;                                ///< operations per scenario
  size_t scenarios = 1;
  pm::crashsim::Options sim;  ///< the recorder's profile
  ImageOptions images;        ///< image budget (images.seed is set per scenario)
  /// Ablation of one site (empty: none): its flush and/or fence is dropped.
  std::string ablate_site;
  bool ablate_flush = false;
  bool ablate_fence = false;
  uint64_t pool_bytes = 4ull << 20;  ///< scenario pool size, bytes (>= 4 MiB)
  std::string dir = "/dev/shm";      ///< where pool and image files live
  double child_timeout_s = 20;       ///< a recovery check slower than this is a hang
  unsigned jobs = 1;                 ///< image checks in flight at once (children)
  /// Images checked per crash point, at most: 0 = every image the
  /// enumeration yields (ImageOptions); k = its first k (the first two are
  /// "none" and "all" when a point has more than the budget). The
  /// sanitizer runs of make test use 2: every crash point's recovery runs
  /// under the sanitizer, at a fraction of the images.
  uint32_t max_images_per_point = 0;
  uint32_t nested_every = 16;          ///< crash-during-recovery: every k-th image...
  uint32_t nested_max = 16;            ///< ...at most this many per scenario
  uint32_t nested_per_point = 4;       ///< images per fence of the recovery
  uint32_t nested_total = 48;          ///< images per sampled recovery
  bool stop_at_first_failure = false;  ///< end the run at the first failure
  size_t max_examples = 5;             ///< failures kept with replay details
  bool quiet = true;                   ///< no progress on stderr
};

/// One failure, with everything needed to replay it.
struct Failure {
  std::string index;
  KeyType key_type = KeyType::kInteger;
  uint32_t node_size = 0;
  uint64_t seed = 0;         ///< the scenario's seed (Options::seed + scenario)
  size_t ops = 0;            ///< operations in that scenario
  int64_t op_number = -1;    ///< 0-based op in flight / just returned; -1 = index creation
  std::string op;            ///< op_text, or "create"
  bool live = false;         ///< the live index misbehaved (no crash involved)
  uint64_t crash_point = 0;  ///< CrashPoint::number
  bool at_fence = false;     ///< before a fence (else: at an operation's return)
  std::string site;          ///< fence site key or boundary label
  uint64_t fences = 0;       ///< fences executed before the crash point
  std::string choice;        ///< the image's choice text (prefix per line)
  std::string ablation;      ///< "site/flush", "site/fence" or empty
  std::string what;          ///< what the oracle saw
  /// Multi-line human-readable form, with a replay command line.
  std::string to_string() const;
};

/// What a run saw.
struct Report {
  Options options;
  uint64_t scenarios = 0, operations = 0;
  uint64_t crash_points = 0;  ///< every crash point (fences + returns)
  uint64_t fence_points = 0, boundary_points = 0;
  uint64_t images = 0;            ///< images checked (each recovered in a child)
  uint64_t recovered_before = 0;  ///< images whose content was the pre-op model
  uint64_t recovered_after = 0;   ///< ...the post-op model (both when equal: after)
  uint64_t nested_samples = 0;    ///< images re-recovered under a nested simulator
  uint64_t nested_points = 0;     ///< crash points inside those recoveries
  uint64_t nested_images = 0;     ///< images taken there and recovered again
  uint64_t failures = 0;
  std::vector<Failure> examples;  ///< the first Options::max_examples failures
  uint64_t uninstrumented_writes = 0;
  std::vector<std::string> uninstrumented_examples;
  pm::crashsim::LintReport lint;                                    ///< summed over scenarios
  std::map<std::string, pm::crashsim::SiteCounts> sites;            ///< union over scenarios
  std::vector<std::pair<std::string, std::string>> ablation_notes;  ///< from the index
  double seconds = 0;                                               ///< wall time of the run
  double images_per_second() const { return seconds > 0 ? images / seconds : 0; }
  bool ok() const { return failures == 0 && uninstrumented_writes == 0; }
};

/// Runs Options::scenarios scenarios. Errors (the run could not be made, as
/// opposed to failures found, which go to the report): InvalidArgument
/// (unknown or volatile index, string keys on an index without them, ops 0, scenarios 0, budget 0,
/// jobs 0 or > 16, node size refused by the index), IOError (pool file, fork, pipe), and the errors
/// of Pool::create, Simulator::attach and set_image_visitor.
Status run_crash_test(const Options& options, Report* report);

/// One ablation case: a site's flush or its fence dropped.
struct AblationCase {
  std::string site;
  bool fence = false;   ///< false: the flush was dropped; true: the fence
  bool caught = false;  ///< the run had >= 1 failure or uninstrumented write
  uint64_t images = 0;
  std::string note;  ///< the index's ablation note for it, if any
  Failure first;     ///< first failure when caught
  std::string label() const { return site + (fence ? "/fence" : "/flush"); }
};

/// The ablation self-test.
struct AblationReport {
  Report baseline;  ///< the normal run (must be clean)
  std::vector<AblationCase> cases;
  uint64_t uncaught_without_note = 0;
  double seconds = 0;
  bool ok() const { return baseline.ok() && uncaught_without_note == 0; }
};

/// The ablation self-test (issue 3 §4): a normal run collects every flush and
/// fence site (Simulator::sites()); then for each site, one run with its
/// flush dropped and one with its fence dropped (a kind the site never
/// issued is skipped), each stopping at its first failure and without the
/// crash-during-recovery sample (the baseline run has it). A case is caught
/// when that run fails; an uncaught case needs an ablation note from
/// Index::ablation_notes() (keyed by site, or "site/flush", "site/fence").
/// Errors: as run_crash_test.
Status run_ablation(const Options& options, AblationReport* report);

/// Looks up the note for `site` and kind in notes ("site/flush" or
/// "site/fence" first, then "site"); then the oracle's own note for the
/// fences of the PM layer (sites "allocator.*" and "pool.*": redundant
/// under persist-before-publish, see report.cc); empty when none.
std::string find_note(const std::vector<std::pair<std::string, std::string>>& notes,
                      const std::string& site, bool fence);

}  // namespace nvindex::crash
