// The TPC-C database: one Index<uint64_t> per table and secondary index
// (schema.h, Table), all of the same registered index design, and the rows
// they point at.
//
// Rows live in DRAM, in per-client arenas (RowArena): an index's value is
// the row's address. Rows are never freed while the database lives (the
// only delete of TPC-C, Delivery's of a NEW-ORDER row, removes a key whose
// value is unused: the new_order index holds no row). A persistent index
// design gets one pool per table (a pool holds one root), in
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
#include "tpcc/schema.h"

namespace nvindex::tpcc {

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
  static Status create(const DbOptions& options, std::unique_ptr<Database>* out);
  ~Database();

  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  /// The index of table `t`.
  Index<uint64_t>& index(Table t) { return *indexes_[static_cast<size_t>(t)]; }
  const Index<uint64_t>& index(Table t) const { return *indexes_[static_cast<size_t>(t)]; }

  /// A new zeroed row of type Row from client `client`'s arena, and its
  /// handle (the value an index stores for it).
  template <class Row>
  Row* new_row(unsigned client, Value* handle) {
    auto* r = static_cast<Row*>(arenas_[client].allocate(sizeof(Row)));
    *handle = reinterpret_cast<uintptr_t>(r);
    return r;
  }
  /// The row a handle names.
  template <class Row>
  static Row* row(Value handle) {
    return reinterpret_cast<Row*>(static_cast<uintptr_t>(handle));
  }

  const DbOptions& options() const { return options_; }
  uint32_t warehouses() const { return options_.warehouses; }
  /// DRAM bytes of rows, over every arena.
  size_t row_bytes() const;
  /// The pool files of a persistent index, `<dir>/<table_name>.pool` in
  /// Table order (empty for a volatile one and for anonymous pools).
  std::vector<std::string> pool_paths() const;

 private:
  explicit Database(const DbOptions& options);

  DbOptions options_;
  std::string pool_dir_;
  bool remove_dir_ = false;
  std::array<std::unique_ptr<pm::Pool>, kTables> pools_;
  std::array<std::unique_ptr<Index<uint64_t>>, kTables> indexes_;
  std::vector<RowArena> arenas_;
};

}  // namespace nvindex::tpcc
