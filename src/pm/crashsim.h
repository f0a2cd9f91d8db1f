// The crash simulator's recorder (DESIGN.md §6, issue 3): follows every PM
// store, flush and fence of a pool in Mode::kCrashSim and keeps, per line, the
// stores not yet durable, so that at every crash point the crash lab can build
// the pool images a power failure could leave behind (src/crash/images.h
// enumerates them) and an oracle can recover each one and check it. This file
// only records; it builds no image.
//
// Hardware model. x86 with ADR: caches are volatile; a dirty line may be
// written back at any time and in any order; an aligned store of at most 8
// bytes is never torn; a line is durable only after a flush of it followed by
// a fence by the same thread. After a crash each line holds some prefix, in
// program order, of the stores made to it since it was last durable. With the
// eADR profile (caches in the persistence domain) a crash keeps instead any
// prefix of the global store order.
//
// Bookkeeping, per 64 B line: the stores not yet durable, in program order, as
// chunks of at most 8 aligned bytes (offset in line, length, new bytes). A
// flush records how many of the line's pending stores become durable at the
// issuing thread's next fence; a fence makes them durable (applies them to
// the durable image). clflush is a flush plus an immediate commit of that line.
// A non-temporal store is a store plus a flush. pm::copy/fill/move of n bytes
// are their chunks in ascending address order, except pm::move to a higher
// address, recorded in descending order (a real memmove may copy backwards).
// A flush of a line made with clflush (pm::flush_instruction() == kClflush)
// commits at once.
//
// Crash points: just before every fence (with the fence's Site), and at every
// operation's return (Simulator::operation_boundary). At each one (while
// crash points are on) the crash-point hook receives the CrashPoint and the
// PendingState: the durable bytes, a working copy equal to them, and the
// pending stores of every dirty line. Under eADR every store is durable after
// the crash point, which happens also while crash points are switched off
// (see set_crash_points).
//
// Instrumentation check. At every fence and operation boundary while crash
// points are on (and once when they are switched on, which covers set-up) the
// simulator compares the pool with its own copy (durable image + every
// pending store); any difference is a store that did not go through the pm::
// helpers, counted once per line as an uninstrumented write (an error) and
// from then on followed as a pending store of unknown origin. Cost: one
// memcmp of the whole pool per check (about 1-2 ms for 16 MiB), which is why
// crash tests use 4-16 MiB pools; a dirty-page scan (soft-dirty bits or
// mprotect) would make it proportional to the pages written, not done yet.
//
// Memory: three pool-size copies (durable image, expected pool, and the
// working copy the hook builds images in, kept equal to the durable image
// between crash points so that an image costs O(64 B x dirty lines), not a
// pool-size copy) plus the pending chunks.
//
// Thread-safety: not thread-safe. Crash tests run their operations from one
// thread at a time; flush marks are nevertheless kept per thread, so a fence
// commits only its own thread's flushes. Stores, flushes and fences issued
// from inside the hook are ignored (the hook must not write the pool).
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "nvindex/pm/persist.h"
#include "nvindex/status.h"

namespace nvindex::pm {

class Pool;

namespace crashsim {

/// Which persistence domain images are drawn from.
enum class Profile : uint8_t {
  kAdr,   ///< caches volatile: per-line prefixes of pending stores (the default)
  kEadr,  ///< caches persistent: any prefix of the global store order
};
/// "adr" or "eadr".
std::string_view profile_name(Profile p);
/// Parses "adr" or "eadr" into *out; InvalidArgument naming the valid ones
/// otherwise.
Status parse_profile(std::string_view name, Profile* out);

/// What the recorder does (the images it leads to are chosen by the crash
/// lab: src/crash/images.h, ImageOptions).
struct Options {
  Profile profile = Profile::kAdr;   ///< which stores a crash point may keep
  bool check_uninstrumented = true;  ///< compare pool and copy at every crash point
};

/// Where a crash happens.
struct CrashPoint {
  uint64_t number = 0;          ///< 0-based count of crash points so far (while on)
  bool at_fence = false;        ///< true: just before a fence; false: an operation returned
  std::string site;             ///< the fence's site key, or the boundary's label
  uint64_t fences = 0;          ///< fences executed (not ablated) before this point
  uint64_t dirty_lines = 0;     ///< lines with pending stores here
  uint64_t pending_stores = 0;  ///< pending store chunks over those lines
  /// Number of distinct images the model allows here (ADR: the product of
  /// pending + 1 over dirty lines; eADR: pending + 1), saturating at 2^64-1.
  /// More than the crash lab's image budget (crash::ImageOptions::budget)
  /// means its images are sampled.
  uint64_t image_space = 1;
};

/// One store not yet durable, as recorded: at most 8 bytes inside one
/// aligned 8-byte word of a 64 B line.
struct Chunk {
  uint64_t data = 0;           ///< the new bytes (first `len` bytes used)
  uint64_t seq = 0;            ///< position in the global store order (0-based)
  const char* file = nullptr;  ///< source file of the pm:: call that made it
                               ///< ("(uninstrumented)" for a raw write)
  uint32_t line = 0;           ///< its line (0 for a raw write)
  uint8_t off = 0;             ///< offset in the 64 B line, bytes
  uint8_t len = 0;             ///< 1..8 bytes

  /// Writes the store into `line_bytes`, the 64 B line it belongs to.
  void apply_to(char* line_bytes) const { std::memcpy(line_bytes + off, &data, len); }
};

/// A line with pending stores.
struct DirtyLine {
  uint64_t offset = 0;                         ///< pool offset of the 64 B line
  const std::vector<Chunk>* stores = nullptr;  ///< its pending stores, program order (>= 1)
};

/// What a crash point leaves to choose from, handed to the crash-point hook;
/// valid only during the hook call.
struct PendingState {
  Profile profile = Profile::kAdr;
  /// The durable image: the whole pool as a crash with no pending store kept
  /// would leave it (pool->size() bytes).
  const std::vector<char>* durable = nullptr;
  /// A working copy equal to *durable on entry, for the hook to build images
  /// in; the hook must leave it equal to *durable again (restore every line
  /// it changed) before it returns.
  std::vector<char>* image = nullptr;
  /// Every line with pending stores, by ascending offset.
  std::vector<DirtyLine> lines;
};

/// Lint findings (issue 3 §3), collected only while crash points are on;
/// counts accumulate over the Simulator's life. Not every finding is a bug.
struct LintReport {
  /// Stores still not durable when an operation returned, keyed by the
  /// "<file>:<line>" of the pm::store/copy/move/fill call that made them
  /// ("(uninstrumented):0" for raw writes); counted once per (line, key) per
  /// operation boundary.
  std::map<std::string, uint64_t> not_durable_at_return;
  /// Lines flushed by the returning thread whose flush no fence has followed
  /// yet, by the flush's site key (nt_copy: "<file>:<line> (nt_copy)"); once
  /// per line per operation boundary.
  std::map<std::string, uint64_t> flush_without_fence;
  /// Flushed lines whose flush made nothing new durable-to-be (no pending
  /// store, or all of them already covered by this thread's earlier flush),
  /// by site key, once per line.
  std::map<std::string, uint64_t> redundant_flush;
  /// Fences that made nothing durable (no flush before them, or only
  /// redundant ones), by site key.
  std::map<std::string, uint64_t> redundant_fence;
};

/// Counts of what the simulator saw.
struct Stats {
  uint64_t stores = 0;                 ///< store chunks (<= 8 aligned bytes) recorded in the pool
  uint64_t flushes = 0;                ///< lines flushed (not ablated)
  uint64_t fences = 0;                 ///< fences (not ablated)
  uint64_t crash_points = 0;           ///< crash points while on
  uint64_t images = 0;                 ///< images the crash-point hook reported building
  uint64_t uninstrumented_writes = 0;  ///< lines that changed outside pm::
  std::vector<std::string> uninstrumented_examples;  ///< first few, with line offsets
};

/// Per-site totals, for the ablation self-test: every flush and fence site
/// reached, keyed by Site::key(), ablated or not, crash points on or off.
struct SiteCounts {
  uint64_t flushes = 0;  ///< lines flushed from this site (one per flush instruction)
  uint64_t fences = 0;   ///< fences from this site
};

class Simulator {
 public:
  /// Called at every crash point while crash points are on, with what the
  /// point leaves pending; returns how many images it built from it (added to
  /// Stats::images). The crash lab's image enumeration is one
  /// (crash::set_image_visitor, src/crash/images.h).
  using CrashPointHook = std::function<uint64_t(const CrashPoint&, const PendingState&)>;

  /// Attaches to `pool` (which must be in Mode::kCrashSim) and installs the
  /// simulator as the process's crash-sim hook: from now on every pm:: store,
  /// flush and fence on this pool is followed. The pool's current bytes are
  /// taken as durable. Switches the process-wide mode (pm::configure) to
  /// kCrashSim while attached; the destructor restores the previous mode.
  /// Destroy the Simulator before the Pool. Errors: InvalidArgument (pool
  /// null or not in kCrashSim mode), Busy (another Simulator is installed).
  static Status attach(Pool* pool, const Options& options, std::unique_ptr<Simulator>* out);
  /// Uninstalls the hook and restores the process-wide mode.
  ~Simulator();
  Simulator(const Simulator&) = delete;
  Simulator& operator=(const Simulator&) = delete;

  /// In a child process forked while a Simulator is attached (e.g. from the
  /// visitor, to recover an image): stops following this process's stores
  /// without touching the parent's simulator state, so that the child may
  /// attach a Simulator of its own. Frees nothing (the child's copy of the
  /// parent's simulator is simply abandoned).
  static void detach_after_fork();

  /// Sets the crash-point hook (nullptr: crash points are counted, no images
  /// built).
  void set_crash_point_hook(CrashPointHook hook);
  /// Turns crash-point generation off (set-up, the oracle's own checks) or on.
  /// Bookkeeping of stores, flushes and fences continues either way.
  void set_crash_points(bool on);
  /// A crash point at an operation's return, labelled `label`; also runs the
  /// uninstrumented-write check and the lint checks for the operation that
  /// just ended (only while crash points are on).
  void operation_boundary(std::string_view label);

  /// Ablation (issue 3 §4): the flush (and/or fence) issued at the site whose
  /// key is `site_key` is dropped: not recorded and not executed. Empty key
  /// clears every ablation. An ablated call still counts in sites(), not in
  /// stats() or the PM counters. (nt_copy's implied flush is not ablatable.)
  /// Calling again for the same key replaces its switches.
  void ablate(std::string_view site_key, bool drop_flush, bool drop_fence);

  /// Every site seen so far with its flush and fence counts.
  const std::map<std::string, SiteCounts>& sites() const;
  const LintReport& lint() const;
  const Stats& stats() const;

  /// Makes every pending store durable (as if every dirty line were written
  /// back), e.g. after set-up; drops every thread's flush marks.
  void make_all_durable();

 private:
  Simulator() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace crashsim
}  // namespace nvindex::pm
