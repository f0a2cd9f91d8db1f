// bztree: a latch-free persistent B+-tree built on PMwCAS, for integer keys.
// Source: Arulraj, Levandoski, Minhas, Larson, "BzTree: A High-Performance
// Latch-free Range Index for Non-Volatile Memory", VLDB 2018: node layout
// (§3: status word, record metadata, sorted and unsorted parts), leaf
// operations (§4: insert by reserving space and publishing with PMwCAS,
// delete, update, read, range scan), structure modifications (§5: freeze,
// consolidate, split, merge, each installed with one PMwCAS on the parent's
// pointer in the grandparent or on the root pointer), recovery (§6: PMwCAS
// recovery, then in-progress records are garbage). The PMwCAS it builds on
// is pm/pmwcas.h (Wang et al., ICDE 2018). docs/indexes/bztree.md describes
// the design and where it departs from the paper; bztree.cc holds the crash
// argument of every persistent update where the update is.
//
// Persistent state (pool layout "bztree"), all in pool allocator blocks:
// - the root object (RootObject, 64 B): magic, node size, the root pointer
//   (a PMwCAS target word), the PMwCAS descriptor directory;
// - the PMwCAS descriptor pool (pm/pmwcas.h), sized for IndexOptions::threads;
// - nodes of node_size bytes: leaves (status word, record metadata words
//   growing forward, 16 B records growing backward from the node's end) and
//   inner nodes (status word, sorted (key, child) entries). Every status
//   word, metadata word and inner child word changes only by PMwCAS.
//
// Thresholds, as fractions of the node size S (the paper's 4096 B node
// splits at 3072 B and merges below 1024 B: 3/4 and 1/4):
// - a leaf takes another record while 32 + 24 x (records + 1) <= 3/4 S
//   (header, 8 B metadata word and 16 B record per slot);
// - a full leaf is consolidated (one new leaf) when its live records need
//   at most 1/2 S (32 + 24 x live), and split into two otherwise;
// - after a delete, a leaf whose live records need less than 1/4 S is
//   merged with a sibling under the same parent when the two together need
//   at most 1/2 S;
// - an inner node holds up to (S - 32) / 16 entries and is split when a
//   split below would make it hold more.
//
// Concurrency: no locks. Readers never block and never write (bar the
// PMwCAS read path's dirty-bit flush and helping). Writers change words only
// by PMwCAS inside an epoch guard of the PMwCAS pool; a thread that freezes
// a node owns its replacement and always either installs it or unfreezes
// the node. A writer that meets a node frozen by another thread waits for
// that thread (yield, traverse again). Replaced nodes are retired to an
// epoch manager and freed when no reader can hold them. Every Index method
// may be called concurrently.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include "nvindex/index.h"

namespace nvindex {

inline constexpr char kBzTreeDescription[] =
    "BzTree: latch-free PM B+-tree, every node change a PMwCAS (status word, record metadata), "
    "freeze + copy-on-write SMOs (Arulraj et al., VLDB'18; PMwCAS, ICDE'18)";

/// Factory for "bztree" over integer keys. options.pool is required, with
/// layout "bztree"; options.node_size (a power of two in 256..4096 B; the
/// paper's node is 4096 B) is the node size of a new index (a recovered one
/// keeps its own); options.threads sizes the PMwCAS descriptor pool of a new
/// index (bztree::descriptors_for). On a pool with no root: creates an empty
/// tree (root object, descriptor pool, one empty leaf). Otherwise recovers
/// (PMwCAS recovery, reachability pass, unfreezing, dropping in-progress
/// records). Errors: InvalidArgument (pool), Corruption (damaged pool),
/// OutOfSpace.
Status make_bztree(const IndexOptions& options, std::unique_ptr<Index<uint64_t>>* out);

namespace bztree {

/// Root object magic "BZTREv1\0".
inline constexpr uint64_t kRootMagic = 0x0031765245525a42ull;
/// Bytes of the node header (leaf and inner).
inline constexpr uint32_t kHeaderBytes = 32;
/// Bytes of a leaf record: key (8 B), value (8 B).
inline constexpr uint32_t kRecordBytes = 16;
/// Bytes of an inner entry: key (8 B), child pool offset (8 B).
inline constexpr uint32_t kEntryBytes = 16;
/// Most levels a tree may have (verify() and the traversal path).
inline constexpr uint32_t kMaxHeight = 32;
/// Descriptors per thread of a new index's PMwCAS pool. An operation holds
/// one at a time; a thread's retired descriptors are reused after its next
/// EpochManager::kReclaimBatch = 64 retirements, once no guard sees them;
/// a thread short of descriptors waits outside its PMwCAS guard (so a short
/// pool costs waiting, never a deadlock).
inline constexpr uint32_t kDescriptorsPerThread = 64;

/// True for the node sizes a new index accepts (powers of two, 256..4096 B).
bool valid_node_size(uint32_t bytes);
/// Descriptors of a new index's PMwCAS pool for `threads` threads:
/// kDescriptorsPerThread x (threads + 1), at least 128 (8 blocks of 4 KiB),
/// at most Pmwcas::kMaxBlocks x 16 = 8192.
uint32_t descriptors_for(unsigned threads);

/// Status word bits (a PMwCAS target; bits 61..63 are PMwCAS's):
///   bit 60     frozen (the node is immutable and being replaced)
///   bits 0-15  record count: metadata slots in use (leaves)
///   bits 16-31 delete count: records deleted or replaced by an update
///              (leaves; the paper's delete size, in records of 16 B)
inline constexpr uint64_t kFrozen = uint64_t{1} << 60;
inline constexpr uint64_t kCountMask = 0xffff;
inline constexpr uint64_t kDeleteUnit = uint64_t{1} << 16;

/// Record metadata word bits (a PMwCAS target):
///   bit 60      visible
///   bit 59      reserved: space claimed by an insert or update that has
///               not yet published the record (offset bits then 0)
///   bits 32-58  offset of the record in the node
///   bits 16-31  key length (8)
///   bits 0-15   total length (16)
/// 0 = a vacant slot; not visible and not reserved = a deleted record or a
/// dead reservation (garbage, dropped at the next consolidation).
inline constexpr uint64_t kVisible = uint64_t{1} << 60;
inline constexpr uint64_t kReserved = uint64_t{1} << 59;

/// The root object (64 B block; Pool::root() -> it):
///   offset size  field
///   ------ ----  ---------------------------------------------------------
///        0    8  magic kRootMagic
///        8    8  node size, bytes
///       16    8  root: pool offset of the root node (PMwCAS target)
///       24    8  pool offset of the PMwCAS descriptor directory
///       32   32  reserved, zero
struct RootObject {
  uint64_t magic;
  uint64_t node_size;
  std::atomic<uint64_t> root;
  uint64_t pmwcas_directory;
  uint64_t reserved[4];
};
static_assert(offsetof(RootObject, magic) == 0);
static_assert(offsetof(RootObject, node_size) == 8);
static_assert(offsetof(RootObject, root) == 16);
static_assert(offsetof(RootObject, pmwcas_directory) == 24);
static_assert(offsetof(RootObject, reserved) == 32);
static_assert(sizeof(RootObject) == 64);

/// The node header (32 B), leaf and inner:
///   offset size  field
///   ------ ----  ---------------------------------------------------------
///        0    8  status word (PMwCAS target; kFrozen, counts above)
///        8    4  level: 0 for a leaf, 1 + the children's level for inner
///       12    4  leaf: sorted count (records [0, n) sorted by key, set
///                when the node is built); inner: entry count
///       16   16  reserved, zero
/// A leaf continues with metadata word i at 32 + 8 i (PMwCAS targets) and
/// record i at S - 16 (i + 1): key (8 B), value (8 B), immutable once
/// published. An inner node continues with entry i at 32 + 16 i: key (8 B;
/// entry 0's key is the node's low key and is not used for routing), child
/// (8 B pool offset, PMwCAS target); child i covers [key i, key i+1).
struct NodeHeader {
  std::atomic<uint64_t> status;
  uint32_t level;
  uint32_t count;
  uint64_t reserved[2];
};
static_assert(offsetof(NodeHeader, status) == 0);
static_assert(offsetof(NodeHeader, level) == 8);
static_assert(offsetof(NodeHeader, count) == 12);
static_assert(offsetof(NodeHeader, reserved) == 16);
static_assert(sizeof(NodeHeader) == kHeaderBytes);

/// An inner entry (16 B; see NodeHeader's table).
struct InnerEntry {
  uint64_t key;
  std::atomic<uint64_t> child;
};
static_assert(offsetof(InnerEntry, key) == 0);
static_assert(offsetof(InnerEntry, child) == 8);
static_assert(sizeof(InnerEntry) == kEntryBytes);

/// A leaf record (16 B; see NodeHeader's table).
struct Record {
  uint64_t key;
  uint64_t value;
};
static_assert(offsetof(Record, key) == 0);
static_assert(offsetof(Record, value) == 8);
static_assert(sizeof(Record) == kRecordBytes);

/// Counters of the tree's own events since open, for tests and reports.
struct Events {
  uint64_t consolidations = 0;   ///< leaves replaced by one compacted leaf
  uint64_t splits = 0;           ///< leaves split in two
  uint64_t inner_splits = 0;     ///< inner nodes split in two
  uint64_t merges = 0;           ///< leaf pairs merged into one
  uint64_t root_changes = 0;     ///< root pointer swaps
  uint64_t install_retries = 0;  ///< install PMwCASes that failed and were retried
};

/// Events of a bztree index (nullopt for another index).
std::optional<Events> events_of(const Index<uint64_t>& index);

}  // namespace bztree
}  // namespace nvindex
