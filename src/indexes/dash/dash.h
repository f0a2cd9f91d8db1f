// dash-eh: Dash extendible hashing, a persistent and concurrent hash table.
// Source: Lu, Hao, Wang, Levandoski, "Dash: Scalable Hashing on Persistent
// Memory", VLDB 2020 (PVLDB 13(8)): §3 (design principles), §4 (Dash-EH:
// segments of buckets, fingerprints, balanced insert, displacement, stash,
// optimistic bucket locks, segment split and directory doubling), §5
// (instant recovery with a clean-shutdown flag and a global version, lazy
// per-segment recovery). dash.cc holds the crash argument of every persistent
// update where the update is; docs/indexes/dash-eh.md summarises the
// protocols and our departures from the paper.
//
// Unordered: scan() returns 0 and find_last_less_than() returns nullopt
// (caps.ordered = false), as Index<K> defines for unordered indexes.
//
// Placement: PM only. The root object, the directory and every segment live
// in the pool; the DRAM state is a mutex for directory changes, a mutex for
// lazy segment recovery and the list of replaced directories (freed when the
// index is destroyed).
//
// Persistent layout (pool layout name "dash-eh"): the byte tables directly
// above RootObject, DirHeader, DirBlock, Bucket and SegmentHead below. A
// segment of node_size bytes of normal buckets (16 KiB: 64 buckets, the
// paper's; down to 1 KiB, 4 buckets, for tests) is node_size / 4096
// allocator blocks of 4 KiB (16 buckets each: the allocator's largest class
// is 4 KiB; one block of node_size bytes below 4 KiB) plus a 1 KiB head
// block with the segment's header line and its 2 stash buckets.
//
// Concurrency (paper §4.4, no HTM): every bucket (normal and stash) has a
// 32-bit version lock in its first word, in PM as in the paper: bit 31 the
// lock bit, bits 0..30 the version, bumped by every unlock. Writers lock the
// target bucket and try-lock its neighbour (and the buckets a displacement
// or a stash insert needs; any failed try-lock releases everything and
// retries); readers take no lock: they read the versions, search, and
// validate the versions. A split locks every bucket of its segment, then
// takes the DRAM directory mutex for the directory update or doubling.
// Thread-safety: every Index method may be called concurrently, except
// verify() (no concurrent writers).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "indexes/common/entry.h"
#include "indexes/common/persistent.h"
#include "nvindex/index.h"
#include "nvindex/pm/allocator.h"
#include "nvindex/pm/pool.h"

namespace nvindex {

inline constexpr char kDashDescription[] =
    "Dash-EH: extendible hashing, 256 B buckets with fingerprints, stash, lazy recovery "
    "(Lu et al., VLDB'20)";

/// Factory for "dash-eh". options.pool is required (InvalidArgument
/// otherwise) and must have layout "dash-eh" (InvalidArgument naming both
/// layouts otherwise). On a pool with no root: creates an empty table (global
/// depth 0, one segment) whose segments have options.node_size bytes of
/// normal buckets (16384: 64 buckets, the paper's segment; any power of two
/// down to 1024, 4 buckets, for tests; anything else is InvalidArgument,
/// checked by make_index). On a pool with a
/// root: recovers (paper §5: instant; a clean shutdown changes nothing, a
/// crash bumps the global version so that each segment is recovered on its
/// first access); the stored node size wins over options.node_size. Errors:
/// Corruption (bad root object, directory or segment), OutOfSpace (pool full
/// at creation).
Status make_dash(const IndexOptions& options, std::unique_ptr<Index<uint64_t>>* out);

namespace dash {

/// Pool layout name.
inline constexpr char kLayout[] = "dash-eh";
/// Root object magic: "DASHEHv1" as a little-endian word.
inline constexpr uint64_t kRootMagic = 0x3176484548534144ull;
/// Bytes of a bucket (paper §4.1: 256 B, one Optane XPLine).
inline constexpr uint32_t kBucketBytes = 256;
/// Record slots per bucket (paper §4.1: 14 records of 16 B after a 32 B header).
inline constexpr uint32_t kSlots = 14;
/// Stash buckets per segment (paper §4.2: 2).
inline constexpr uint32_t kStashBuckets = 2;
/// Overflow fingerprints per bucket (paper §4.2: 4).
inline constexpr uint32_t kOverflowFps = 4;
/// Bytes of a bucket group block (the allocator's largest class).
inline constexpr uint32_t kGroupBytes = 4096;
/// Buckets per group block.
inline constexpr uint32_t kBucketsPerGroup = kGroupBytes / kBucketBytes;
/// Most group blocks per segment (16 KiB of normal buckets).
inline constexpr uint32_t kMaxGroups = 4;
/// Bytes of a segment head block (header line + 2 stash buckets = 576 B).
inline constexpr uint32_t kHeadBytes = 1024;
/// Directory entries per directory block (4 KiB of 8 B segment offsets).
inline constexpr uint32_t kEntriesPerBlock = 512;
/// Directory blocks a directory header names at most.
inline constexpr uint32_t kMaxDirBlocks = 256;
/// Largest global depth: kMaxDirBlocks * kEntriesPerBlock = 2^17 entries.
inline constexpr uint32_t kMaxDepth = 17;
/// Bytes of the root object's allocator block.
inline constexpr uint32_t kRootBytes = 64;

/// True for the node sizes (bytes of normal buckets per segment) a new
/// table accepts: a power of two from 1024 (4 buckets) to 16384 (64
/// buckets, the paper's segment). Below 16384 B a segment exists so that
/// tests and the crash lab reach splits and directory doublings within a
/// few dozen operations.
inline bool valid_node_size(uint32_t bytes) {
  return bytes >= 1024 && bytes <= 16384 && (bytes & (bytes - 1)) == 0;
}
/// Bytes of one bucket group block of a segment with node_size bytes of
/// normal buckets: node_size up to 4096, else 4096.
inline uint32_t group_bytes(uint32_t node_size) {
  return node_size < kGroupBytes ? node_size : kGroupBytes;
}

/// The root object (one 64 B allocator block; Pool::root() -> it):
///   offset size  field
///   ------ ----  -----------------------------------------------------------
///        0    8  magic kRootMagic ("DASHEHv1"), written once
///        8    8  dir: offset of the directory header (changed only by NAW,
///                by a directory doubling)
///       16    8  node_size: bytes of normal buckets per segment (4096 or
///                16384), written once
///       24    8  clean: 1 after a clean shutdown, 0 while open (paper §5)
///       32    8  global_version: bumped by every recovery after a crash; a
///                segment whose version differs is recovered on first access
///       40   24  reserved, zero
struct RootObject {
  uint64_t magic;
  std::atomic<uint64_t> dir;
  uint64_t node_size;
  std::atomic<uint64_t> clean;
  std::atomic<uint64_t> global_version;
  uint64_t reserved[3];
};
static_assert(offsetof(RootObject, magic) == 0);
static_assert(offsetof(RootObject, dir) == 8);
static_assert(offsetof(RootObject, node_size) == 16);
static_assert(offsetof(RootObject, clean) == 24);
static_assert(offsetof(RootObject, global_version) == 32);
static_assert(offsetof(RootObject, reserved) == 40);
static_assert(sizeof(RootObject) == kRootBytes);

/// The directory header (one 4 KiB block); written whole before the NAW of
/// RootObject::dir publishes it, never changed after:
///   offset size  field
///   ------ ----  -----------------------------------------------------------
///        0    8  global depth G (0..kMaxDepth): 2^G entries
///        8    8  nblocks: directory blocks, ceil(2^G / 512)
///       16   48  reserved, zero
///       64 8*504 blocks[i]: offset of directory block i (i < nblocks; at
///                most kMaxDirBlocks = 256 are used)
struct DirHeader {
  uint64_t depth;
  uint64_t nblocks;
  uint64_t reserved[6];
  uint64_t blocks[504];
};
static_assert(offsetof(DirHeader, depth) == 0);
static_assert(offsetof(DirHeader, nblocks) == 8);
static_assert(offsetof(DirHeader, reserved) == 16);
static_assert(offsetof(DirHeader, blocks) == 64);
static_assert(sizeof(DirHeader) == 4096);

/// A directory block (one 4 KiB block): entries 512 i .. 512 i + 511 of the
/// directory, each the offset of a segment's head block. Entry x covers the
/// hashes whose top G bits are x (paper §4.1). An entry changes only by a
/// split (an aligned 8 B store, persisted, under the directory mutex).
///   offset size  field
///   ------ ----  -----------------------------------------------------------
///        0 4096  entries[512]
struct DirBlock {
  std::atomic<uint64_t> entries[kEntriesPerBlock];
};
static_assert(offsetof(DirBlock, entries) == 0);
static_assert(sizeof(DirBlock) == 4096);

/// A bucket (paper §4.1, Figure 4): 256 B, a 32 B header and 14 records.
///   offset size  field
///   ------ ----  -----------------------------------------------------------
///        0    4  lock: version lock, bit 31 lock bit, bits 0..30 version
///                (never flushed on purpose; reset by segment recovery)
///        4    4  bitmap: bits 0..3 record count, bits 4..17 membership
///                (bit 4 + i: slot i holds a record whose home is the
///                previous bucket), bits 18..31 allocation (bit 18 + i: slot
///                i holds a record); the commit word of every insert and
///                delete (one aligned 4 B store)
///        8   14  fp[i]: fingerprint of slot i's key (low byte of its hash)
///       22    4  ofp[j]: overflow fingerprints of stash records (paper §4.2)
///       26    1  ofl_bitmap: bit j = ofp[j] in use
///       27    1  ofl_index: bits 2j..2j+1 = stash bucket of ofp[j]
///       28    1  ofl_member: bit j = ofp[j] belongs to the previous bucket
///       29    1  ofl_count: stash records of this home bucket with no ofp
///                anywhere (lookups then search every stash bucket)
///       30    2  reserved
///       32  224  records[14] {key, value}, slot i at 32 + 16 i
/// Bytes 22..29 are metadata that lookups use and recovery rebuilds from
/// the stash (paper §4.2, §5): they are never relied on after a crash.
struct Bucket {
  std::atomic<uint32_t> lock;
  std::atomic<uint32_t> bitmap;
  std::atomic<uint8_t> fp[kSlots];
  std::atomic<uint8_t> ofp[kOverflowFps];
  std::atomic<uint8_t> ofl_bitmap;
  std::atomic<uint8_t> ofl_index;
  std::atomic<uint8_t> ofl_member;
  std::atomic<uint8_t> ofl_count;
  uint8_t reserved[2];
  Entry records[kSlots];
};
static_assert(offsetof(Bucket, lock) == 0);
static_assert(offsetof(Bucket, bitmap) == 4);
static_assert(offsetof(Bucket, fp) == 8);
static_assert(offsetof(Bucket, ofp) == 22);
static_assert(offsetof(Bucket, ofl_bitmap) == 26);
static_assert(offsetof(Bucket, ofl_index) == 27);
static_assert(offsetof(Bucket, ofl_member) == 28);
static_assert(offsetof(Bucket, ofl_count) == 29);
static_assert(offsetof(Bucket, reserved) == 30);
static_assert(offsetof(Bucket, records) == 32);
static_assert(sizeof(Bucket) == kBucketBytes);

/// A segment's head block (one 1 KiB block; 576 B used). The header line:
///   offset size  field
///   ------ ----  -----------------------------------------------------------
///        0    4  local_depth L: every key of the segment shares its hash's
///                top L bits (paper §4.1)
///        4    4  state: 0 normal, 1 splitting (paper §4.5: a split in
///                flight, finished by recovery)
///        8    8  pattern: those top L bits
///       16    8  split_new: while state = 1, the offset of the new segment
///                (the split's log: it keeps the new segment reachable)
///       24    8  version: the global version at the segment's creation or
///                last recovery; another value means "recover me first"
///       32   32  groups[4]: offsets of the bucket group blocks (4 KiB, 16
///                buckets each; node_size / 4096 in use; below 16 KiB one
///                block of node_size bytes), written once
///       64  512  stash[2]: the stash buckets (same layout as Bucket; their
///                membership bits and overflow fields are unused)
struct SegmentHead {
  std::atomic<uint32_t> local_depth;
  std::atomic<uint32_t> state;
  std::atomic<uint64_t> pattern;
  std::atomic<uint64_t> split_new;
  std::atomic<uint64_t> version;
  uint64_t groups[kMaxGroups];
  Bucket stash[kStashBuckets];
};
static_assert(offsetof(SegmentHead, local_depth) == 0);
static_assert(offsetof(SegmentHead, state) == 4);
static_assert(offsetof(SegmentHead, pattern) == 8);
static_assert(offsetof(SegmentHead, split_new) == 16);
static_assert(offsetof(SegmentHead, version) == 24);
static_assert(offsetof(SegmentHead, groups) == 32);
static_assert(offsetof(SegmentHead, stash) == 64);
static_assert(sizeof(SegmentHead) == 576 && sizeof(SegmentHead) <= kHeadBytes);

/// The Dash-EH table. Created by make_dash().
class Dash final : public PersistentIndex {
 public:
  explicit Dash(pm::Pool* pool);
  ~Dash() override;

  /// Creates an empty table (global depth 0, one segment) in a pool with no
  /// root; node_size checked by the caller (valid_node_size). Errors:
  /// OutOfSpace.
  Status create(uint32_t node_size);
  /// Recovers the table of a pool with a root (dash.cc "Recovery"). Errors:
  /// Corruption naming the offending block.
  Status recover();

  Status insert(uint64_t key, Value value) override;
  Status update(uint64_t key, Value value) override;
  Status remove(uint64_t key) override;
  std::optional<Value> lookup(uint64_t key) override;
  /// Unordered: clears *out and returns 0.
  size_t scan(uint64_t start, size_t count, std::vector<std::pair<uint64_t, Value>>* out) override;
  /// Unordered: nullopt.
  std::optional<std::pair<uint64_t, Value>> find_last_less_than(uint64_t key) override;
  IndexInfo info() const override;
  /// First recovers every segment a crash left unrecovered (as their first
  /// access would), then checks: directory entries against local depths
  /// and patterns (each segment covers 2^(G-L) consecutive entries), every
  /// record in its segment (hash prefix = pattern) and in its home bucket or
  /// the next (membership bit set iff in the next) or in the stash (and
  /// then named by its home bucket's overflow metadata), fingerprints, counts, no duplicate key, no
  /// lock held, no split in flight. Report: keys, leaves = segments, inner_nodes = directory blocks
  /// (+ header), height 2, pm_bytes = bytes of every block reached.
  Status verify(VerifyReport* report) const override;
  /// Why the crash lab's ablation self-test cannot catch the removal of some
  /// flushes and fences (dash.cc "Ablation notes").
  std::vector<std::pair<std::string, std::string>> ablation_notes() const override;

  /// Segments reachable from the directory (no concurrent splits).
  uint64_t segments() const;
  /// Global depth of the directory.
  uint32_t global_depth() const;
  /// Records held in stash buckets (no concurrent writers).
  uint64_t stash_records() const;
  /// Segments recovered lazily since this index was opened.
  uint64_t lazy_recoveries() const { return lazy_recoveries_.load(std::memory_order_relaxed); }
  /// Segments whose version differs from the global version (no concurrent
  /// writers): those a crash left for lazy recovery.
  uint64_t stale_segments() const;

  /// The object at pool offset `off`.
  template <class T>
  T* at(uint64_t off) const {
    return reinterpret_cast<T*>(pool_->base() + off);
  }

 private:
  struct Found;
  struct LockedPair;
  /// Locks the home pair of hash h in the segment that covers it: bucket y
  /// (lock), then y + 1 (try-lock, the paper's order). False when the caller
  /// must retry (segment not yet recovered; y + 1 busy: after a backoff on
  /// *spins; the segment split meanwhile): nothing is held then.
  bool lock_pair(uint64_t h, uint32_t y, unsigned* spins, LockedPair* out);
  DirHeader* dir() const { return at<DirHeader>(root_->dir.load(std::memory_order_acquire)); }
  std::atomic<uint64_t>* dir_entry(const DirHeader* d, uint64_t x) const;
  uint64_t segment_of(uint64_t h) const;
  Bucket* bucket(const SegmentHead* s, uint32_t b) const;
  uint32_t nbuckets() const { return node_size_ / kBucketBytes; }
  uint32_t ngroups() const { return (node_size_ + kGroupBytes - 1) / kGroupBytes; }
  bool covers(const SegmentHead* s, uint64_t h) const;
  bool ensure_recovered(uint64_t seg);
  void recover_segment(uint64_t seg);
  void recover_all() const;
  Status split(uint64_t seg, uint64_t h);
  Status new_segment(uint64_t* off);
  void free_segment(uint64_t off);
  void publish_split(uint64_t seg, uint64_t nseg, bool in_recovery);
  Status double_directory(uint64_t seg, uint64_t nseg);
  void rebuild_overflow(SegmentHead* s);
  bool stash_insert(SegmentHead* s, uint32_t y, uint64_t key, Value value, uint8_t fp, bool* retry);
  int search(const Bucket* b, uint64_t key, uint8_t fp, uint32_t member_want) const;
  bool find_locked(SegmentHead* s, uint32_t y, uint64_t key, uint8_t fp, Found* f) const;
  Status walk(pm::Allocator* alloc, uint64_t* keys, VerifyReport* r, bool check, bool clean) const;

  RootObject* root_ = nullptr;
  uint32_t node_size_ = 0;
  uint64_t version_ = 0;           ///< DRAM copy of RootObject::global_version
  std::mutex dir_mu_;              ///< directory updates and doublings
  std::mutex recovery_mu_;         ///< lazy segment recovery
  std::vector<uint64_t> retired_;  ///< replaced directory blocks (freed at close)
  std::atomic<uint64_t> lazy_recoveries_{0};
};

}  // namespace dash
}  // namespace nvindex
