// UndoLog: the write-ahead log of the B+-tree variants of Ni et al., "Closing
// the Performance Gap between DRAM and PM for In-Memory Index Structures"
// (UCSC 2020): btree-wal logs every modification (§3.1's "double write"
// baseline, the WAL B+-tree), persistent-unsorted only its SMOs (§3.3). One
// implementation for both, as the issue asks.
//
// Undo, not redo. A transaction saves the old bytes of every range it will
// change (save), persists them and then marks the record valid with one NAW
// (seal), changes the ranges in place (ordinary PM stores), persists them
// (flushes of every range it wrote, dirty, then one fence) and clears the
// mark with a second NAW (commit). Recovery rolls back every record still
// marked valid. Per operation that is 4 fences and, for an insert into a
// 512 B sorted leaf, about 12 flushes: the record (the shifted key and value
// ranges, the count word, each with a 16 B segment header, and the record
// header: about 5 lines), the valid mark (1), the changed lines of the node
// (about 5) and the commit mark (1), Table 2's 12 clwb / 4 sfence. A redo
// log flushes as many lines (the new bytes instead of the old) and could
// defer the in-place write-back past the operation's return (2 fences
// instead of 4), but then a thread's record stays live after its locks are
// released, so records of different threads may name the same node and
// recovery must replay them in a global order (a log sequence number per
// record) and truncate them only after their in-place writes are durable.
// An undo record lives only while its transaction holds the locks of every
// node it changes, so the valid records after a crash touch disjoint bytes
// and roll back independently, in any order: no sequence number, no
// truncation protocol. That simplicity under concurrency is the choice.
//
// Layout. The log is `slots` slots, each `blocks` allocator blocks of
// kUndoLogBlockBytes, named by a table of slots x blocks pool offsets that
// the index keeps in its root object (written once at create). A slot is a
// logical byte space of blocks x 4096 B: byte p lives in block p / 4096 at
// offset p % 4096.
//
//   slot byte  size  field
//   ---------  ----  ---------------------------------------------------------
//           0     8  state: 0 = no record, 1 = the record is valid (NAW only)
//           8     8  payload bytes of the record (a multiple of 8)
//          16    48  reserved, zero
//          64     .  payload: segments, each
//                      +0  8  pool offset of the saved range (8-byte aligned)
//                      +8  8  length of the range, bytes (a multiple of 8, > 0)
//                     +16  L  the range's old bytes
//
// Concurrency: a transaction takes a free slot (a DRAM flag per slot,
// claimed by compare-and-swap, starting at a per-thread hint) for its whole
// length; with every slot busy it waits. Transactions run while the caller
// holds the locks of the nodes they change.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nvindex/pm/allocator.h"
#include "nvindex/pm/pool.h"
#include "nvindex/status.h"

namespace nvindex {

/// Bytes of one log block (an allocator block of the largest class).
inline constexpr uint32_t kUndoLogBlockBytes = 4096;
/// Bytes of a slot's header (state, payload bytes, reserved).
inline constexpr uint32_t kUndoLogHeaderBytes = 64;
/// Bytes of a segment header (pool offset, length).
inline constexpr uint32_t kUndoSegmentHeaderBytes = 16;

/// See the file comment.
class UndoLog {
 public:
  /// Blocks a slot needs to hold a record of up to `payload` bytes of saved
  /// ranges and `segments` segment headers.
  static uint32_t blocks_for(uint64_t payload, uint32_t segments);

  /// Creates a log of `slots` slots of `blocks` blocks: allocates and zeroes
  /// every block, persists them, and writes their offsets into `table`
  /// (slots x blocks words of the caller's root object, persisted here; the
  /// caller publishes the root object after). `index` names the index in
  /// messages. Errors: the allocator's (OutOfSpace); blocks allocated
  /// before the error stay unreachable (recovery reclaims them).
  static Status create(pm::Pool* pool, uint32_t slots, uint32_t blocks,
                       std::atomic<uint64_t>* table, const char* index,
                       std::unique_ptr<UndoLog>* out);

  /// Attaches to the log whose block offsets are in `table` (slots x blocks
  /// words) of a pool being recovered. Checks that every offset is the start
  /// of an allocator block of kUndoLogBlockBytes within the pool. Errors:
  /// Corruption ("<index>: undo log block <i> at 0x.. is not a block ...").
  static Status open(pm::Pool* pool, uint32_t slots, uint32_t blocks,
                     const std::atomic<uint64_t>* table, const char* index,
                     std::unique_ptr<UndoLog>* out);

  /// Recovery: rolls back every valid record (its segments' old bytes
  /// copied back, last saved first, persisted; then its state cleared by
  /// NAW), so every transaction a crash interrupted is undone. A crash during
  /// this leaves the records valid, and a second recovery rolls them back
  /// again (the saved bytes are unchanged): idempotent. `clean_close`: the
  /// pool was closed cleanly, when no transaction can be open, so a valid
  /// record is damage. Errors: Corruption (a valid record on a cleanly
  /// closed pool; a payload longer than the slot; a segment outside the
  /// pool, inside the pool header, misaligned or running past the payload).
  /// Nothing is written before every record has been checked. Sets
  /// *rolled_back to the number of records rolled back.
  Status recover(bool clean_close, uint32_t* rolled_back);

  /// Marks every log block reachable (recovery's reachability pass).
  Status mark(pm::Allocator& alloc) const;

  /// One transaction in one slot (see the file comment). Use: save() every
  /// range to be changed, seal(), change them (PM stores), dirty() every
  /// range written (saved or not: also new, unpublished nodes), commit().
  /// A transaction that saves nothing may skip seal(); commit() then only
  /// persists the dirty ranges.
  class Txn {
   public:
    Txn(Txn&&) = delete;
    Txn& operator=(Txn&&) = delete;
    ~Txn();  // releases the slot (after commit)
    /// Appends the current bytes of [addr, addr + len) to the record: addr
    /// in the pool, 8-byte aligned; len a multiple of 8 (0: nothing).
    /// Aborts the process (a program bug) if the record outgrows the slot.
    void save(const void* addr, size_t len);
    /// Persists the record (payload and header; one fence), then marks it
    /// valid with one NAW. Named flush and fence sites: "<index>.wal.record",
    /// "<index>.wal.valid". Nothing saved: writes nothing (no record is
    /// needed when nothing can be rolled back).
    void seal();
    /// Records [addr, addr + len) as written, to be flushed by commit().
    void dirty(const void* addr, size_t len);
    /// Flushes every dirty range, one fence, then clears the record's mark
    /// with one NAW: the transaction is durable. Sites "<index>.wal.apply",
    /// "<index>.wal.commit". Nothing dirtied and no record sealed: writes
    /// nothing, no fence.
    void commit();

   private:
    friend class UndoLog;
    /// Flushes every line of the dirty ranges once, in address order.
    void flush_dirty();
    Txn(UndoLog* log, uint32_t slot) : log_(log), slot_(slot) {}
    UndoLog* log_;
    uint32_t slot_;
    uint64_t pos_ = kUndoLogHeaderBytes;  ///< next payload byte of the slot
    bool sealed_ = false;
    bool dirtied_ = false;  ///< dirty() was called
    uint32_t ndirty_ = 0;
    std::array<std::pair<const void*, size_t>, 24> dirty_{};
  };

  /// Starts a transaction in a free slot (waits while every slot is busy).
  /// The returned object must be committed before it is destroyed.
  Txn begin();

  /// Slots, blocks per slot, and the bytes of every block together.
  uint32_t slots() const { return slots_; }
  uint32_t blocks() const { return blocks_; }
  uint64_t bytes() const { return uint64_t{slots_} * blocks_ * kUndoLogBlockBytes; }

 private:
  UndoLog(pm::Pool* pool, uint32_t slots, uint32_t blocks, const char* index);
  /// Address of byte p of slot s.
  char* at(uint32_t s, uint64_t p) const {
    return block_ptr_[size_t{s} * blocks_ + p / kUndoLogBlockBytes] + p % kUndoLogBlockBytes;
  }
  /// Copies n bytes between slot s's logical bytes [p, p + n) and `buf`
  /// (to_log: into the log, with PM stores; else out of it).
  void copy_slot(uint32_t s, uint64_t p, void* buf, size_t n, bool to_log) const;
  /// Flushes slot s's logical bytes [p, p + n).
  void flush_slot(uint32_t s, uint64_t p, uint64_t n, const char* site) const;
  std::atomic<uint64_t>* state(uint32_t s) const {
    return reinterpret_cast<std::atomic<uint64_t>*>(at(s, 0));
  }

  pm::Pool* pool_;
  uint32_t slots_;
  uint32_t blocks_;
  std::string index_;
  std::string site_record_, site_valid_, site_apply_, site_commit_, site_recover_;
  std::vector<char*> block_ptr_;  ///< slots x blocks block addresses
  std::vector<uint64_t> block_off_;
  std::unique_ptr<std::atomic<bool>[]> busy_;  ///< per slot: a transaction holds it
};

}  // namespace nvindex
