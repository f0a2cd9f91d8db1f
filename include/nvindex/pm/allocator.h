// Allocator: crash-safe block allocator carved from a Pool (DESIGN.md §3
// "Allocator"), in two arenas that share the pool's chunks.
//
// Size classes: the small classes 64, 128, ..., 65536 bytes (powers of
// two; a request is rounded up to its class and every block is aligned to
// its class size, so a 256 B LB+-tree leaf is 256 B aligned), and extents:
// a request above 64 KiB takes a run of whole consecutive chunks (n x 64
// KiB, n >= 2, chunk aligned), up to kMaxExtent bytes.
//
// Persistent state is only the chunk table: the heap is cut into chunks of
// kChunkSize bytes, and each chunk's one-byte table entry says which arena
// (bit 7) and which kind (bits 0..6) it serves: 0 = unassigned, 1..11 = a
// small class (64 << (kind-1) B blocks), 12 = the first chunk of an extent,
// 13 = a further chunk of the extent that starts at the nearest kind-12
// chunk before it. An entry is written and persisted (one aligned byte:
// never torn) before any block of that chunk is handed out, so after a
// crash every block ever handed out lies in a chunk whose class is known.
// An extent's first entry is persisted before the others are stored: a
// crash in between leaves a shorter free extent, whose missing chunks read
// as unassigned or as further-chunk entries after one, which attach()
// clears (orphans: they follow no extent of their arena; an extent left
// with one chunk is cleared too, as none is handed out shorter than two).
//
// Arenas: kIndex (the index's nodes and key records) and kItems (the KV
// store's item records, src/kv/). Each is an Allocator of its own with its
// own free lists, recovery pass and live bytes; a chunk belongs to the
// arena that assigned it, forever. So an index's recovery marks and
// reclaims only its arena, and the store's pass only its own.
//
// Which blocks are in use is *not* persistent: it is the set of blocks the
// owner can reach. On open, the index walks its structure and calls
// mark_reachable() for every block it owns; end_recovery() then frees every
// other block of every assigned chunk of the arena. Hence the publish
// protocol every index follows: allocate, initialise, persist the block,
// then publish it with a single NAW. A crash before the NAW leaves an
// unreachable block, which recovery frees (no leak); a crash after it
// leaves a reachable, initialised block (no dangling pointer). No block can
// be handed out twice, because a reachable block is never on a free list
// and a block is freed only by free() or by end_recovery().
//
// Thread-safety: allocate() and free() may be called concurrently from any
// threads; each thread keeps a cache per small class (refilled from and
// spilled to a shared free list in batches under a mutex); extents go to
// and from one list per length under a mutex. begin_recovery(),
// mark_reachable() and end_recovery() of an arena must not run
// concurrently with allocate()/free() of that arena; mark_reachable() may
// be called from several threads at once (parallel recovery).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "nvindex/status.h"

namespace nvindex::pm {

class Pool;

class Allocator {
 public:
  static constexpr uint32_t kMinBlock = 64;  ///< smallest class, bytes
  /// The largest block an index structure takes (its nodes, logs, key
  /// records), bytes; larger small classes and extents serve items.
  static constexpr uint32_t kMaxBlock = 4096;
  static constexpr uint64_t kChunkSize = 64 * 1024;  ///< bytes per chunk
  /// The largest small class (one block per chunk), bytes.
  static constexpr uint32_t kMaxSmallBlock = 64 * 1024;
  static constexpr uint32_t kSmallClasses = 11;  ///< 64 .. 65536, powers of two
  /// The largest allocation, bytes: an extent of 16384 chunks (1 GiB).
  static constexpr uint32_t kMaxExtent = 1u << 30;

  /// The two arenas of a pool (file comment).
  enum class Arena : uint8_t {
    kIndex = 0,  ///< the index's blocks (Pool::allocator())
    kItems = 1,  ///< the KV store's item records (Pool::allocator(Arena::kItems))
  };

  /// Statistics of one recovery pass.
  struct RecoveryStats {
    uint64_t reachable_blocks = 0;  ///< blocks marked by the index
    uint64_t reclaimed_blocks = 0;  ///< allocated-or-free blocks returned to free lists
    uint64_t chunks = 0;            ///< assigned chunks scanned
  };

  /// Formats the allocator metadata of a new pool (chunk table all zero,
  /// persisted). Called by Pool::create.
  static Status format(Pool* pool);
  /// Attaches to the metadata of an existing (or just formatted) pool: the
  /// allocator of each arena in *index and *items. Corruption if the chunk
  /// table is out of range or names an unknown kind. A freshly formatted
  /// pool is ready; in an opened one each arena needs recovery first. On an
  /// opened pool, after every check passed, clears (stores 0, persists) the
  /// table entries of orphan extent chunks, which only a crash while an
  /// extent was assigned leaves (file comment): further-chunk entries after
  /// no extent of their arena, and extents of one chunk.
  static Status attach(Pool* pool, bool fresh, std::unique_ptr<Allocator>* index,
                       std::unique_ptr<Allocator>* items);

  /// Forgets the DRAM state (free lists; every thread's cached blocks of this
  /// allocator become unreachable to any later allocator). Touches no PM.
  ~Allocator();

  /// Allocates one block of at least `size` bytes (1..kMaxExtent) in this
  /// arena: a small-class block for up to 64 KiB, else an extent of
  /// ceil(size / 64 KiB) chunks (a free one of that length, else newly
  /// assigned consecutive unassigned chunks, else the shortest longer free
  /// one). The block's content is unspecified (it may hold an old node):
  /// initialise and persist it before publishing it. Errors:
  /// InvalidArgument (size 0 or > kMaxExtent), OutOfSpace (no free block
  /// and no unassigned chunk, or no run of enough unassigned chunks), Busy
  /// (recovery not finished on an opened pool). Counts one allocation; a
  /// newly assigned chunk costs one persisted line and fence (an extent:
  /// its first entry's, then the rest's).
  Status allocate(uint32_t size, uint64_t* off);

  /// Returns a block to this thread's cache (spilled to the shared list 32 at
  /// a time; an extent goes to the free list of its length). The caller must have unpublished it
  /// (no persistent pointer to it remains) first. Freeing an offset that is not the start of a
  /// block, or freeing during recovery, is a program bug: it prints the offset and aborts. A double
  /// free is not detected. Counts one free.
  void free(uint64_t off);

  /// Size in bytes of this arena's block starting at `off` (its class size,
  /// or an extent's chunks x 64 KiB), or 0 if `off` is not the start of a
  /// block in a chunk this arena assigned.
  uint32_t block_size(uint64_t off) const;

  /// Starts a recovery pass of this arena: every block of its chunks is
  /// considered unreachable, the free lists and every thread's cached
  /// blocks of this allocator are forgotten
  /// (a new cache generation), allocate() returns Busy until end_recovery().
  /// DRAM: a mark bitmap of one bit per block of each chunk of the arena
  /// (8 to 128 B per chunk; 8 B per extent).
  void begin_recovery();
  /// Marks one block as owned by the arena's owner. Corruption if `off` is
  /// not the start of a block in a chunk of this arena, or if it was
  /// already marked (a
  /// block owned twice); InvalidArgument outside a recovery pass. Safe from
  /// several threads at once (atomic bit-or on the mark bitmap).
  Status mark_reachable(uint64_t off);
  /// During a recovery pass: the start of every block of class `size` (the
  /// class that holds `size` bytes) not marked so far, ascending: what
  /// end_recovery() would reclaim of that class. Never-used blocks are
  /// among them (their bytes are zero: a pool's heap starts zeroed).
  /// Empty outside a pass and for `size` above kMaxSmallBlock. For the
  /// lost-leaf check of selective-persistence
  /// indexes (common/persistent.h, check_lost_leaves), which reads them
  /// before they are reclaimed.
  std::vector<uint64_t> unmarked_blocks(uint32_t size) const;
  /// Ends the pass: every unmarked block of every chunk of the arena goes
  /// to the free lists; allocate() works again. A chunk once assigned keeps its class
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
  /// Bytes of the heap (chunks assigned or not, to either arena).
  uint64_t heap_bytes() const;
  /// Bytes in chunks not yet assigned to an arena.
  uint64_t unassigned_bytes() const;
  /// This allocator's arena.
  Arena arena() const;

 private:
  Allocator() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nvindex::pm
