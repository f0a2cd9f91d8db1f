// The TPC-C database: one Index<uint64_t> per table and secondary index
// (schema.h, Table), all of the same registered index design, and the rows
// they point at.
//
// Rows live in DRAM by default, in per-client arenas (RowArena): an index's
// value is the row's address. With DbOptions::rows == RowPlace::kPm they
// live in a rows pool instead (rows.h: one allocator block per row, the
// value its pool offset, each transaction atomic across a crash through a
// per-client undo log), and Database::open reopens the database after a
// clean close or a crash. Rows are never freed while the database lives
// (the only delete of TPC-C, Delivery's of a NEW-ORDER row, removes a key
// whose value is unused: the new_order index holds no row). A persistent
// index design gets one pool per table (a pool holds one root), in
// DbOptions::pool_dir or a temporary directory.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "nvindex/index.h"
#include "nvindex/pm/pool.h"
#include "nvindex/status.h"
#include "tpcc/rows.h"
#include "tpcc/schema.h"
#include "util/temp_files.h"

namespace nvindex::tpcc {

/// Where rows live.
enum class RowPlace : uint8_t {
  kDram,  ///< per-client DRAM arenas; lost at exit (the default)
  kPm,    ///< the rows pool (rows.h), persisted; needs a persistent index and a pool file
};
/// "dram" or "pm".
const char* row_place_name(RowPlace p);

/// What a Database is built from.
struct DbOptions {
  std::string index = "btree";                    ///< registered index name (every table uses it)
  std::map<std::string, std::string> index_opts;  ///< its IndexOptions::extra
  uint32_t node_size = 512;                       ///< bytes; the index's range applies
  uint32_t warehouses = 1;                        ///< 1..kMaxWarehouses
  unsigned clients = 1;                           ///< threads that will call the indexes
  pm::Mode pm_mode = pm::Mode::kEmulated;         ///< for a persistent index's pools
  /// Directory for the pools of a persistent index ("": a temporary one,
  /// removed with the database unless keep_pools). Each table gets the file
  /// `<pool_dir>/<table_name>.pool`, which must not exist yet. With pm_mode
  /// kDram the pools are anonymous (no files).
  std::string pool_dir;
  /// Keep the pool files (and a temporary pool directory) when the database
  /// is destroyed; otherwise they are removed.
  bool keep_pools = false;
  /// Transactions the run will execute (0: a load only). Sizes the pools of
  /// a persistent index (table_pool_size); ignored for a volatile one.
  uint64_t expected_transactions = 0;
  /// Where rows live. kPm needs a persistent index, pm_mode kEmulated or
  /// kDax (a file to reopen) and clients <= kMaxPmClients.
  RowPlace rows = RowPlace::kDram;
};

/// Most keys table `t` can hold after loading `warehouses` warehouses and
/// running `transactions` transactions of any mix: the load's rows (clause
/// 4.3.3.1; ORDER-LINE counted at 15 lines per order, the most O_OL_CNT
/// allows) plus, for HISTORY, NEW-ORDER, ORDER, order_customer and
/// ORDER-LINE, what every transaction could add if each were a Payment
/// (1 history row) or a New-Order (1 new-order, order and order_customer
/// key, 15 order-lines). An upper bound, not an estimate.
uint64_t max_table_keys(Table t, uint64_t warehouses, uint64_t transactions);

/// Bytes of the pool of table `t` for a persistent index: kPoolFloorBytes
/// plus kPoolBytesPerKey per key of max_table_keys(), rounded up to 1 MiB
/// (the budget bench's automatic pool size uses per key). pm::Pool::create
/// allocates the whole file (posix_fallocate), so on /dev/shm this much
/// memory is taken while the pool exists.
inline constexpr uint64_t kPoolBytesPerKey = 256;
/// The part of a table's pool that does not grow with its keys: 16 MiB (11
/// tables: 176 MiB; every registered persistent index passes the TPC-C run
/// tests with it).
inline constexpr uint64_t kPoolFloorBytes = uint64_t{16} << 20;
uint64_t table_pool_size(Table t, uint64_t warehouses, uint64_t transactions);

/// A bump allocator of DRAM rows for one client (not thread-safe: one
/// owner). Memory comes in 1 MiB chunks and is released with the arena.
class RowArena {
 public:
  /// `bytes` of zeroed memory aligned to 8 bytes (bytes <= 1 MiB).
  void* allocate(size_t bytes);
  /// Bytes handed out so far.
  size_t bytes() const { return total_; }

 private:
  static constexpr size_t kChunk = size_t{1} << 20;
  std::vector<std::unique_ptr<std::byte[]>> chunks_;
  size_t used_ = kChunk;  ///< bytes used of the newest chunk
  size_t total_ = 0;
};

/// The tables of one TPC-C database.
class Database {
 public:
  /// Makes the 11 empty indexes (Table) of `options.index` and one row arena
  /// per client. Errors: InvalidArgument (unknown index, an option or node
  /// size it refuses, an unordered index: TPC-C needs scan and
  /// find_last_less_than, clients > 1 with an index that is not
  /// thread-safe, warehouses out of range, clients not in 1..65535: the
  /// client field of a HISTORY key is 16 bits); for a persistent index,
  /// IOError (the temporary pool directory) and those of pm::Pool::create
  /// (AlreadyExists: a pool file is there already) / create_anonymous
  /// (pm_mode kDram) and make_index. On error nothing is left behind.
  /// With options.rows == kPm also the rows pool `<pool_dir>/rows.pool`
  /// (rows_pool_size(); its root written last), and InvalidArgument for a
  /// volatile index, pm_mode kDram or more than kMaxPmClients clients.
  static Status create(const DbOptions& options, std::unique_ptr<Database>* out);
  /// Reopens a database created with rows in PM in `pool_dir` (kept pools:
  /// DbOptions::keep_pools), after a clean close or a crash: opens
  /// rows.pool and the 11 table pools in `mode`, remakes the indexes (each
  /// recovers, DESIGN.md §5), rolls back every transaction whose undo log
  /// is active (rows.h), then runs the rows pool's reachability pass (every
  /// row a primary table's index reaches is marked; the others are freed)
  /// and, after a clean close, compares the bytes reached with the pool's
  /// close record (equal; at most, when a transaction was rolled back: its
  /// new rows were counted at the close). The database keeps its pools when destroyed. `clients`
  /// (1..the log slots of the pool) sizes the row arenas and locks for a
  /// later run. Errors: InvalidArgument (no rows.pool in pool_dir, clients
  /// out of range, the load never finished: a crash during it), Corruption
  /// (a root that is not a TPC-C rows root, a row reached twice, a close
  /// record that disagrees, an undo log entry naming a table or range that
  /// does not exist), and those of pm::Pool::open and make_index. `recovery`
  /// (may be null) receives what recovery did.
  static Status open(const std::string& pool_dir, pm::Mode mode, unsigned clients,
                     std::unique_ptr<Database>* out, RowsRecovery* recovery);
  ~Database();

  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  /// The index of table `t`.
  Index<uint64_t>& index(Table t) { return *indexes_[static_cast<size_t>(t)]; }
  const Index<uint64_t>& index(Table t) const { return *indexes_[static_cast<size_t>(t)]; }

  /// A new zeroed row of type Row for client `client` in *row, and its
  /// handle (the value an index stores for it) in *handle: from the
  /// client's DRAM arena, or (rows in PM) one block of the rows pool, not
  /// yet flushed (the caller persists it before publishing it). Errors
  /// (rows in PM only): OutOfSpace (the rows pool is full), with the
  /// table's row named.
  template <class Row>
  Status new_row(unsigned client, Row** row, Value* handle) {
    if (rows_pool_ == nullptr) {
      *row = static_cast<Row*>(arenas_[client].allocate(sizeof(Row)));
      *handle = reinterpret_cast<uintptr_t>(*row);
      return Status::Ok();
    }
    void* p = nullptr;
    if (Status st = new_pm_row(sizeof(Row), &p, handle); !st.ok()) return st;
    *row = static_cast<Row*>(p);
    return Status::Ok();
  }
  /// The row a handle names (an address, or an offset in the rows pool).
  template <class Row>
  Row* row(Value handle) const {
    return reinterpret_cast<Row*>(row_base_ + static_cast<uintptr_t>(handle));
  }
  /// Flushes (no fence) the row of table `t` that `handle` names, when rows
  /// are in PM: the loader's step before it publishes the row's key (the
  /// index insert's own fence, or finish_load's, orders it). Does nothing
  /// for DRAM rows and for tables without rows (row_bytes_of() == 0).
  void flush_row(Table t, Value handle) const;
  /// Marks the load done: fence, then NAW the rows pool's load-complete
  /// word (Database::open refuses a pool without it). Nothing for DRAM
  /// rows.
  void finish_load();
  /// Client `client`'s undo log (disabled for DRAM rows).
  UndoLog& undo_log(unsigned client) { return logs_[client]; }
  /// True when rows are in the rows pool.
  bool rows_in_pm() const { return rows_pool_ != nullptr; }
  /// The rows pool (null for DRAM rows).
  pm::Pool* rows_pool() const { return rows_pool_.get(); }

  const DbOptions& options() const { return options_; }
  uint32_t warehouses() const { return options_.warehouses; }
  /// How the pools' mappings are backed by pages (pm::PageBacking summed
  /// over the table pools and rows.pool; page_bytes the largest): known
  /// false for a volatile index, whose tables have no pool.
  pm::PageBacking pool_pages() const;
  /// Bytes of rows: over every DRAM arena, or the rows pool's allocated
  /// blocks (rows rounded up to their allocator class, plus the root and
  /// the logs).
  size_t row_bytes() const;
  /// The pool files of a persistent index, `<dir>/<table_name>.pool` in
  /// Table order, then `<dir>/rows.pool` with rows in PM (empty for a
  /// volatile one and for anonymous pools).
  std::vector<std::string> pool_paths() const;

 private:
  explicit Database(const DbOptions& options);
  /// The IndexOptions of every table's index (node size, clients as
  /// threads, index options; no pool yet), for create() and open().
  IndexOptions index_options() const;
  /// new_row's PM path: allocate, zero.
  Status new_pm_row(size_t bytes, void** p, Value* handle);
  /// Creates the rows pool and its root and logs (create()).
  Status create_rows_pool();
  /// open()'s reachability pass over the rows pool (see open()).
  Status reclaim_rows(RowsRecovery* rec);
  /// The rows root (rows in PM only).
  RowsRoot* rows_root() const;

  /// Registers a pool file or the temporary directory this database made
  /// for removal if the process is interrupted (util/temp_files.h), unless
  /// keep_pools.
  void remove_on_signal(const std::string& path);

  DbOptions options_;
  std::string pool_dir_;
  bool remove_dir_ = false;
  std::vector<std::unique_ptr<util::RemoveOnSignal>> on_signal_;
  std::array<std::unique_ptr<pm::Pool>, kTables> pools_;
  std::array<std::unique_ptr<Index<uint64_t>>, kTables> indexes_;
  std::vector<RowArena> arenas_;
  std::unique_ptr<pm::Pool> rows_pool_;  ///< rows in PM only; destroyed after the indexes
  uintptr_t row_base_ = 0;               ///< added to a handle: 0, or the rows pool's base
  std::vector<UndoLog> logs_;            ///< one per client
};

}  // namespace nvindex::tpcc
