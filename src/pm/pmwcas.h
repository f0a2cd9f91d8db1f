// PMwCAS: a persistent multi-word compare-and-swap (Wang, Levandoski,
// Larson, "Easy Lock-Free Indexing in Non-Volatile Memory", ICDE 2018, §III
// and §IV; the volatile MwCAS it extends: Harris, Fraser, Pratt, "A
// Practical Multi-Word Compare-and-Swap Operation", DISC 2002). Up to
// kPmwcasMaxWords 8-byte words of one pool change from their expected old
// values to new values all at once, or none does, and the change survives
// a crash as a whole: the building block of BzTree (issue 13).
//
// Target words. A target word is a std::atomic<uint64_t> in the pool whose
// top three bits are reserved (kPmwcasFlags): a value stored through PMwCAS
// is at most kPmwcasMaxValue. Bit 63 is the dirty bit: the word was written
// and may not be durable yet, so a reader flushes it (and clears the bit)
// before using the value. Bit 62 marks a PMwCAS descriptor pointer, bit 61
// an RDCSS word-entry pointer (the install step); both are pool offsets.
// Words must be read through Pmwcas::read() inside an epoch guard, never
// with a plain load.
//
// Descriptors live in PM: a table of kDescriptorsPerBlock 256 B descriptors
// per 4096 B allocator block, listed by a directory block whose offset the
// index keeps in its root. A descriptor holds its status (free, undecided,
// succeeded, failed; with a dirty bit), its word count and, per word, the
// target's pool offset, the old and the new value.
//
// The protocol (ICDE'18 Algorithm 2), for descriptor D with words sorted
// by address:
//   0. D's word entries and count are written and persisted, then its
//      status is set to undecided and persisted: a crash before that leaves
//      D free or in its old, completed state, and no word names it.
//   1. Install: each word in turn gets, by RDCSS (CAS the word from its old
//      value to a pointer to D's word entry, then, if D is still undecided,
//      CAS that to D's pointer with the dirty bit, else back to the old
//      value), D's pointer; the word is flushed and its dirty bit cleared.
//      A word holding another descriptor's pointer is helped to completion
//      first; a word holding neither the old value nor D decides "failed".
//   2. Decide: CAS D's status from undecided to succeeded or failed (with
//      the dirty bit), flush it, clear the dirty bit. Every installed
//      pointer was durable before the decision, so recovery finds every
//      word D owns.
//   3. Complete: each word holding D's pointer is CASed to the new value
//      (succeeded) or the old one (failed), with the dirty bit, flushed,
//      and the dirty bit cleared; then a fence.
// Any thread that meets D's pointer runs steps 1-3 for D (helping; every
// step is idempotent), so no thread waits on another.
//
// Recovery (Pmwcas::recover, before any other use after a crash): every
// descriptor not free is rolled forward if its durable status is
// succeeded, back otherwise: a word still holding its pointer (or its
// word-entry pointer) gets the new or the old value, persisted; then the
// descriptor is freed. A word with the dirty bit and a value is left as is
// (the bit says "flush before use"; read() clears it).
//
// Memory: a completed descriptor is retired into an EpochManager (its
// fields may still be read by a helper that loaded its pointer) and reused
// once no guard can see it. New blocks an operation installs need no
// PMwCAS-side policy: nvindex's allocator frees, at recovery, every block
// the structure does not reach (pm/allocator.h).
//
// Thread-safety: read(), Op and execute() from any threads, each inside an
// Epoch guard of this Pmwcas; create/open/recover/mark_reachable alone.
//
// Crash simulator: every write to a descriptor or a target word goes
// through the pm:: helpers (pm::cas_strong for the protocol's CASes), so the
// crash lab sees them; tests/crash_pmwcas_test.cc recovers every image at
// every fence of the protocol and checks all-or-nothing.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "nvindex/pm/pool.h"
#include "nvindex/status.h"
#include "util/epoch.h"

namespace nvindex::pm {

/// The dirty bit of a target word (bit 63).
inline constexpr uint64_t kPmwcasDirty = uint64_t{1} << 63;
/// A PMwCAS descriptor pointer (bit 62; the rest is its pool offset).
inline constexpr uint64_t kPmwcasDescriptor = uint64_t{1} << 62;
/// An RDCSS word-entry pointer (bit 61; the rest is the entry's offset).
inline constexpr uint64_t kPmwcasRdcss = uint64_t{1} << 61;
/// The three reserved bits.
inline constexpr uint64_t kPmwcasFlags = kPmwcasDirty | kPmwcasDescriptor | kPmwcasRdcss;
/// Largest value a target word holds.
inline constexpr uint64_t kPmwcasMaxValue = (uint64_t{1} << 61) - 1;
/// Most words one PMwCAS changes.
inline constexpr uint32_t kPmwcasMaxWords = 7;

/// One word of a descriptor, 32 B.
struct PmwcasWord {
  uint64_t address;     ///< pool offset of the target word (8-aligned)
  uint64_t old_value;   ///< expected, <= kPmwcasMaxValue
  uint64_t new_value;   ///< <= kPmwcasMaxValue
  uint64_t descriptor;  ///< pool offset of the descriptor holding this entry
};
static_assert(sizeof(PmwcasWord) == 32);

/// A descriptor, 256 B (4 lines), 64-B aligned in its block.
struct PmwcasDescriptor {
  std::atomic<uint64_t> status;  ///< PmwcasStatus, | kPmwcasDirty while not durable
  uint32_t count;                ///< words in use, 0..kPmwcasMaxWords
  uint32_t reserved;
  PmwcasWord words[kPmwcasMaxWords];
};
static_assert(sizeof(PmwcasDescriptor) == 240);

/// Values of PmwcasDescriptor::status (without the dirty bit).
enum PmwcasStatus : uint64_t {
  kPmwcasFree = 0,
  kPmwcasUndecided = 1,
  kPmwcasSucceeded = 2,
  kPmwcasFailed = 3
};

/// The descriptor pool of one pm::Pool and the PMwCAS operation over it.
class Pmwcas {
 public:
  /// Bytes per descriptor slot in a block.
  static constexpr uint32_t kSlotBytes = 256;
  /// Descriptors per 4096 B block.
  static constexpr uint32_t kDescriptorsPerBlock = 16;
  /// Most blocks a directory lists (one 4096 B directory of offsets).
  static constexpr uint32_t kMaxBlocks = 512;

  /// What recover() did.
  struct RecoveryStats {
    uint64_t rolled_forward = 0;  ///< descriptors durable as succeeded
    uint64_t rolled_back = 0;     ///< undecided or failed ones
    uint64_t words_written = 0;   ///< target words given their new or old value
  };

  /// Makes a descriptor pool of `descriptors` (rounded up to a multiple of
  /// kDescriptorsPerBlock, at most kMaxBlocks blocks) in `pool`, every
  /// descriptor free and persisted, and its directory; *directory receives
  /// the directory's offset for the caller's root (publish it with a NAW
  /// after this returns). Errors: InvalidArgument (descriptors 0 or too
  /// many), those of Allocator::allocate (OutOfSpace).
  static Status create(Pool* pool, uint32_t descriptors, uint64_t* directory,
                       std::unique_ptr<Pmwcas>* out);
  /// Attaches to the descriptor pool whose directory is at `directory`.
  /// Errors: Corruption (the directory or a block is not a 4096 B block of
  /// the pool's allocator, a block is the directory or is listed twice, a
  /// descriptor's count is over kPmwcasMaxWords). Call recover() next.
  static Status open(Pool* pool, uint64_t directory, std::unique_ptr<Pmwcas>* out);

  /// Rolls every descriptor not free forward or back (file comment) and
  /// frees it; idempotent, so a crash during recovery is recovered again.
  /// Errors: Corruption (a word entry names a target outside the pool or
  /// not 8-aligned, a status that is not a PmwcasStatus); nothing is
  /// written for that descriptor then.
  Status recover(RecoveryStats* stats);
  /// Marks the directory and the descriptor blocks for the pool's
  /// reachability pass (Allocator::mark_reachable's errors).
  Status mark_reachable(Allocator& alloc) const;

  /// The epoch manager every reader and writer of target words enters.
  EpochManager& epoch() { return epoch_; }

  /// The value of target word `word` (a pool address): an RDCSS pointer is
  /// completed, a dirty value flushed and its bit cleared, a descriptor
  /// helped to completion, until a plain value remains. Inside a guard.
  uint64_t read(std::atomic<uint64_t>* word);

  /// A PMwCAS being built: add() the words, then execute(). Holds one
  /// descriptor from Pmwcas::begin() until execute() (or its destructor,
  /// which gives it back unused).
  class Op {
   public:
    ~Op();
    Op(const Op&) = delete;
    Op& operator=(const Op&) = delete;
    /// Adds word `word` (in the pool, 8-aligned) to change from `old_value`
    /// to `new_value` (both <= kPmwcasMaxValue). False (nothing added) when
    /// the descriptor is full, the word is already in it, or a value or
    /// the address is out of range.
    bool add(std::atomic<uint64_t>* word, uint64_t old_value, uint64_t new_value);
    /// Runs the protocol; true when every word changed, false when one did
    /// not hold its old value (then none changed). Durable on return either
    /// way. Inside a guard of the Pmwcas. Once only.
    bool execute();

   private:
    friend class Pmwcas;
    Op(Pmwcas* p, PmwcasDescriptor* d) : p_(p), d_(d) {}
    Pmwcas* p_;
    PmwcasDescriptor* d_;
  };
  /// A new operation with a free descriptor, in *op; when none is free it
  /// first frees what this thread retired and no guard sees
  /// (EpochManager::collect). Busy when every descriptor is still in use
  /// or retired and not yet reclaimable (the caller retries after leaving
  /// its guard).
  Status begin(std::unique_ptr<Op>* op);

  /// Descriptors in the pool.
  uint32_t descriptors() const { return static_cast<uint32_t>(all_.size()); }

 private:
  explicit Pmwcas(Pool* pool);
  /// Steps 1-3 for `d` (by its owner or a helper); true when it succeeded.
  bool run(PmwcasDescriptor* d);
  /// The RDCSS of step 1 for entry `w`: returns what the word held before
  /// (w.old_value or D's pointer when installed).
  uint64_t install(PmwcasWord* w);
  /// Completes an RDCSS whose word-entry pointer `entry` is in `word`.
  void complete_install(std::atomic<uint64_t>* word, uint64_t entry);
  /// Flushes `word` and clears its dirty bit if it still holds `v`.
  void persist_clear(std::atomic<uint64_t>* word, uint64_t v);
  static void reclaim(void* ctx, uint64_t item);

  Pool* pool_;
  uint64_t directory_ = 0;
  std::vector<PmwcasDescriptor*> all_;
  std::mutex free_mu_;
  std::vector<PmwcasDescriptor*> free_;
  EpochManager epoch_;
};

}  // namespace nvindex::pm
