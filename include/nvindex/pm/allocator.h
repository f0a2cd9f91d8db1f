// Allocator: crash-safe fixed-size block allocator carved from a Pool
// (DESIGN.md §3 "Allocator").
//
// Size classes: 64, 128, 256, 512, 1024, 2048, 4096 bytes. A request is
// rounded up to its class; every block is aligned to its class size (so a
// 256 B LB+-tree leaf is 256 B aligned).
//
// Persistent state is only the chunk table: the heap is cut into chunks of
// kChunkSize bytes, and each chunk's one-byte table entry says which class it
// serves (0 = unassigned). An entry is written and persisted (one aligned
// byte: never torn) before any block of that chunk is handed out, so after a
// crash every block ever handed out lies in a chunk whose class is known.
//
// Which blocks are in use is *not* persistent: it is the set of blocks the
// index can reach. On open, the index walks its structure and calls
// mark_reachable() for every block it owns; end_recovery() then frees every
// other block of every assigned chunk. Hence the publish protocol every index
// follows: allocate, initialise, persist the block, then publish it with a
// single NAW. A crash before the NAW leaves an unreachable block, which
// recovery frees (no leak); a crash after it leaves a reachable, initialised
// block (no dangling pointer). No block can be handed out twice, because a
// reachable block is never on a free list and a block is freed only by
// free() or by end_recovery().
//
// Thread-safety: allocate() and free() may be called concurrently from any
// threads; each thread keeps a cache per class (refilled from and spilled to
// a shared free list in batches under a mutex). begin_recovery(),
// mark_reachable() and end_recovery() must not run concurrently with
// allocate()/free(); mark_reachable() may be called from several threads at
// once (parallel recovery).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "nvindex/status.h"

namespace nvindex::pm {

class Pool;

class Allocator {
 public:
  static constexpr uint32_t kMinBlock = 64;          ///< smallest class, bytes
  static constexpr uint32_t kMaxBlock = 4096;        ///< largest class, bytes
  static constexpr uint32_t kClasses = 7;            ///< 64 .. 4096, powers of two
  static constexpr uint64_t kChunkSize = 64 * 1024;  ///< bytes per chunk

  /// Statistics of one recovery pass.
  struct RecoveryStats {
    uint64_t reachable_blocks = 0;  ///< blocks marked by the index
    uint64_t reclaimed_blocks = 0;  ///< allocated-or-free blocks returned to free lists
    uint64_t chunks = 0;            ///< assigned chunks scanned
  };

  /// Formats the allocator metadata of a new pool (chunk table all zero,
  /// persisted). Called by Pool::create.
  static Status format(Pool* pool);
  /// Attaches to the metadata of an existing (or just formatted) pool.
  /// Corruption if the chunk table is out of range or names an unknown class.
  /// A freshly formatted pool is ready; an opened one needs recovery first.
  static Status attach(Pool* pool, bool fresh, std::unique_ptr<Allocator>* out);

  /// Forgets the DRAM state (free lists; every thread's cached blocks of this
  /// allocator become unreachable to any later allocator). Touches no PM.
  ~Allocator();

  /// Allocates one block of at least `size` bytes (1..kMaxBlock). The block's
  /// content is unspecified (it may hold an old node): initialise and persist
  /// it before publishing it. Errors: InvalidArgument (size 0 or > kMaxBlock),
  /// OutOfSpace (no free block and no unassigned chunk), Busy (recovery not
  /// finished on an opened pool). Counts one allocation.
  Status allocate(uint32_t size, uint64_t* off);

  /// Returns a block to this thread's cache (spilled to the shared list 32 at
  /// a time). The caller must have unpublished it (no persistent pointer to it
  /// remains) first. Freeing an offset that is not the start of a block, or
  /// freeing during recovery, is a program bug: it prints the offset and
  /// aborts. A double free is not detected. Counts one free.
  void free(uint64_t off);

  /// Class size of the block starting at `off`, or 0 if `off` is not the start
  /// of a block in an assigned chunk.
  uint32_t block_size(uint64_t off) const;

  /// Starts a recovery pass: every block is considered unreachable, the free
  /// lists and every thread's cached blocks of this allocator are forgotten
  /// (a new cache generation), allocate() returns Busy until end_recovery().
  /// DRAM: a mark bitmap of one bit per block of each assigned chunk (8 to
  /// 128 B per chunk).
  void begin_recovery();
  /// Marks one block as owned by the index. Corruption if `off` is not the
  /// start of a block in an assigned chunk, or if it was already marked (a
  /// block owned twice); InvalidArgument outside a recovery pass. Safe from
  /// several threads at once (atomic bit-or on the mark bitmap).
  Status mark_reachable(uint64_t off);
  /// During a recovery pass: the start of every block of class `size` (the
  /// class that holds `size` bytes) not marked so far, ascending: what
  /// end_recovery() would reclaim of that class. Never-used blocks are
  /// among them (their bytes are zero: a pool's heap starts zeroed).
  /// Empty outside a pass. For the lost-leaf check of selective-persistence
  /// indexes (common/persistent.h, check_lost_leaves), which reads them
  /// before they are reclaimed.
  std::vector<uint64_t> unmarked_blocks(uint32_t size) const;
  /// Ends the pass: every unmarked block of every assigned chunk goes to the
  /// free lists; allocate() works again. A chunk once assigned keeps its class
  /// forever (no chunk is returned to the unassigned pool). Without a pass in
  /// progress it does nothing and returns zero stats.
  RecoveryStats end_recovery();
  /// True when allocate() works: a freshly formatted pool, or a recovery pass
  /// ended (end_recovery). False on a just-opened pool and during a pass.
  bool ready() const;
  /// True between begin_recovery() and end_recovery().
  bool recovering() const;

  /// Bytes in blocks currently handed out (live), by class size (after
  /// recovery: the marked blocks).
  uint64_t bytes_in_use() const;
  /// Bytes of the heap (chunks assigned or not).
  uint64_t heap_bytes() const;

 private:
  Allocator() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nvindex::pm
