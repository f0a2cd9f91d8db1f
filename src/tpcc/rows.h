// TPC-C rows in persistent memory (`nvindex tpcc --rows pm`): the rows pool's
// on-media format and the per-client undo log that makes each transaction
// atomic across a crash.
//
// The rows pool is one pm::Pool, `<pool dir>/rows.pool`, layout "tpcc-rows".
// Every row is one block of the pool's Allocator (its class: 64 B for an
// ORDER, 128 B for WAREHOUSE, DISTRICT, HISTORY, ORDER-LINE and ITEM, 512 B
// for STOCK, 1024 B for CUSTOMER), and an index's value is the block's pool
// offset. The pool's root is one 4096 B block, RowsRoot:
//
//   offset size  field
//   ------ ----  ---------------------------------------------------------
//        0    8  magic "TPCCROWS"
//        8    4  format version (1)
//       12    4  warehouses
//       16    4  node size of the indexes, bytes
//       20    4  log slots (the clients of the run that created the pool)
//       24   32  index name, NUL-padded
//       56  512  index options, "name=value" lines, NUL-padded
//      568    8  load complete (0 / 1, written by NAW after the load's rows
//                and keys are durable)
//      576 2048  log blocks: kMaxPmClients x kLogBlocks offsets (0 = none)
//
// Every field but "load complete" is written and persisted once, before the
// root is published (Pool::set_root, a NAW): a crash before it leaves a pool
// without a root, which Database::open reports as "not a TPC-C database".
//
// Undo log (one per client, kLogBlocks blocks of 4096 B; the first 64 B of
// block 0 are its header: active word, entry bytes). A transaction's write
// phase (txn.cc) is bracketed so that a crash at any point leaves either all
// of it or none of it once recovery has run:
//   1. stage, in DRAM, the old bytes of every row range it will overwrite
//      (snapshot) and every index insert and remove it will make;
//   2. begin(): copy the staged entries into the log blocks, flush them and
//      the entry count, fence, then NAW active = 1. A crash before the NAW
//      leaves an inactive log and rows and indexes untouched (nothing has
//      been written in place yet);
//   3. write in place and make the index calls (each index operation is
//      durable and linearizable on return, DESIGN.md §5);
//   4. commit(): flush every overwritten range and every new row, fence,
//      NAW active = 0. A crash before this NAW leaves an active log.
// Recovery (undo_active_logs, at Database::open) walks an active log's
// entries backwards: an insert is undone by removing the key if it holds
// the logged value, a remove by inserting the key back if it is absent, a
// snapshot by copying the old bytes back (each step idempotent, so a crash
// during recovery is recovered again), then persists and NAWs active = 0.
// Two clients' active logs never touch the same row or key (strict 2PL:
// the exclusive locks were held), so the order in which logs are undone does
// not matter. Rows a rolled-back transaction allocated are reached by no
// index afterwards and go back to the allocator in the reachability pass
// that follows (pm::Allocator's recovery).
//
// Row writes are plain stores followed by pm::flush of their ranges; they do
// not go through pm::store, so the crash simulator (src/pm/crashsim.h),
// which follows only the pm:: helpers, is not used on TPC-C rows. The
// process-kill test (tests/tpcc_rows_test.cc) checks the undo log's logic.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "nvindex/index.h"
#include "nvindex/pm/pool.h"
#include "nvindex/status.h"
#include "tpcc/schema.h"

namespace nvindex::tpcc {

class Database;

/// Most clients a database with rows in PM serves (one undo log each).
inline constexpr uint32_t kMaxPmClients = 64;
/// Blocks of one client's undo log (4096 B each).
inline constexpr uint32_t kLogBlocks = 4;
/// The rows pool's layout name (pm::Pool header).
inline constexpr const char* kRowsLayout = "tpcc-rows";

/// The rows pool's root block (the table in the file comment), 4096 B.
struct RowsRoot {
  char magic[8];
  uint32_t version;
  uint32_t warehouses;
  uint32_t node_size;
  uint32_t log_slots;
  char index[32];
  char index_opts[512];
  std::atomic<uint64_t> load_complete;
  uint64_t logs[kMaxPmClients][kLogBlocks];
  char reserved[4096 - 2624];
};
static_assert(offsetof(RowsRoot, warehouses) == 12);
static_assert(offsetof(RowsRoot, index) == 24);
static_assert(offsetof(RowsRoot, index_opts) == 56);
static_assert(offsetof(RowsRoot, load_complete) == 568);
static_assert(offsetof(RowsRoot, logs) == 576);
static_assert(sizeof(RowsRoot) == 4096);

inline constexpr char kRowsMagic[8] = {'T', 'P', 'C', 'C', 'R', 'O', 'W', 'S'};
inline constexpr uint32_t kRowsVersion = 1;

/// Kinds of undo log entry (the kind field of an entry, rows.cc).
enum UndoEntryKind : uint32_t {
  kUndoSnapshot = 1,  ///< old bytes of a row range
  kUndoInsert = 2,    ///< an index insert to undo
  kUndoRemove = 3,    ///< an index remove to undo
};

/// Bytes of one row of table `t` (sizeof its struct, schema.h); 0 for the
/// tables that hold no row (new_order) or point at another table's rows
/// (customer_last, order_customer).
size_t row_bytes_of(Table t);

/// Bytes of the rows pool for `warehouses` warehouses and `transactions`
/// transactions: for every table with rows, max_table_keys() (db.h) times
/// its row's allocator class (a power of two, 64..1024 B), plus 16 MiB for
/// the root, the logs and the allocator's partly used chunks, rounded up to
/// 1 MiB. An upper bound like table_pool_size().
uint64_t rows_pool_size(uint64_t warehouses, uint64_t transactions);

/// One client's undo log (the protocol is in the file comment). A
/// default-constructed UndoLog is disabled (rows in DRAM): every call does
/// nothing and begin() returns Ok. Not thread-safe: one client owns it.
class UndoLog {
 public:
  UndoLog() = default;
  /// The log in `pool` whose kLogBlocks block offsets are `blocks`.
  UndoLog(pm::Pool* pool, const uint64_t* blocks);

  /// True when rows are in PM (the log does something).
  bool enabled() const { return pool_ != nullptr; }
  // Every call below is inline and does nothing but one test when rows are
  // in DRAM (the default), so the transactions' timed loop pays no call.

  /// Stages the current bytes of [p, p + n), a range of a row in the rows
  /// pool the transaction is about to overwrite (n <= 1024).
  void snapshot(const void* p, size_t n) {
    if (pool_ != nullptr) stage_snapshot(p, n);
  }
  /// Stages an index insert of (key, value) into table `t`.
  void will_insert(Table t, uint64_t key, Value value) {
    if (pool_ != nullptr) stage_index_call(kUndoInsert, t, key, value);
  }
  /// Stages an index remove of `key` (which holds `value`) from table `t`.
  void will_remove(Table t, uint64_t key, Value value) {
    if (pool_ != nullptr) stage_index_call(kUndoRemove, t, key, value);
  }
  /// Notes a new row [p, p + n) to flush at commit().
  void new_row(const void* p, size_t n) {
    if (pool_ != nullptr) dirty_.emplace_back(p, n);
  }
  /// Writes the staged entries to the log and makes it active (step 2 of
  /// the protocol): one fence and one NAW; nothing when nothing is staged.
  /// Errors: OutOfSpace when the entries exceed the log's capacity
  /// (kLogBlocks x 4032 B; no TPC-C transaction comes near it); nothing is
  /// written then.
  Status begin() { return pool_ == nullptr || staged_.empty() ? Status::Ok() : write_log(); }
  /// Step 4: flushes every snapshot range (now overwritten) and new row,
  /// fences, NAWs the log inactive, and clears the staging (only clears it
  /// when nothing was staged).
  void commit() {
    if (pool_ != nullptr && !staged_.empty()) finish();
    discard();
  }
  /// Clears the staging without touching PM (a transaction that aborts or
  /// rolls back before begin()).
  void discard() {
    staged_.clear();
    dirty_.clear();
  }

 private:
  /// snapshot()'s work: a snapshot entry and its old bytes, staged.
  void stage_snapshot(const void* p, size_t n);
  /// An insert or remove entry (kUndoInsert, kUndoRemove), staged.
  void stage_index_call(uint32_t kind, Table t, uint64_t key, Value value);
  /// begin()'s work with entries staged.
  Status write_log();
  /// commit()'s PM work: flush, fence, NAW inactive.
  void finish();

  pm::Pool* pool_ = nullptr;
  const uint64_t* blocks_ = nullptr;
  std::vector<std::byte> staged_;                      ///< entries, log format
  std::vector<std::pair<const void*, size_t>> dirty_;  ///< ranges to flush at commit
};

/// What recovery of a rows pool did.
struct RowsRecovery {
  bool clean_shutdown = false;       ///< the rows pool was closed cleanly
  uint32_t undone_transactions = 0;  ///< active undo logs rolled back
  uint64_t undone_entries = 0;       ///< their entries
  uint64_t free_blocks = 0;          ///< blocks no index reached, on the free lists now
                                     ///< (free before, or rows of rolled-back transactions)
};

/// Rolls back every active undo log among the first `log_slots` of
/// db.rows_pool() (the recovery in the file comment) through db's indexes,
/// counting into *recovery (may be null). Errors: Corruption (a log block
/// outside the pool, an entry count over the capacity, a truncated entry,
/// an unknown kind or table, a snapshot outside the pool) before anything
/// is changed; those of the indexes' insert and remove, with the log and
/// table named.
Status undo_active_logs(Database& db, uint32_t log_slots, RowsRecovery* recovery);

}  // namespace nvindex::tpcc
