// The TPC-C database: its indexes, pools and row arenas (db.h).
#include "tpcc/db.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <utility>

namespace nvindex::tpcc {

void* RowArena::allocate(size_t bytes) {
  bytes = (bytes + 7) & ~size_t{7};
  if (used_ + bytes > kChunk) {
    // new std::byte[n]() zeroes the chunk; operator new[] aligns it to at
    // least alignof(std::max_align_t) (16 B).
    chunks_.push_back(std::unique_ptr<std::byte[]>(new std::byte[kChunk]()));
    used_ = 0;
  }
  void* p = chunks_.back().get() + used_;
  used_ += bytes;
  total_ += bytes;
  return p;
}

uint64_t max_table_keys(Table t, uint64_t warehouses, uint64_t transactions) {
  const uint64_t w = warehouses;
  const uint64_t per_district = kCustomers;  // customers = orders per district at load
  switch (t) {
    case Table::kWarehouse:
      return w;
    case Table::kDistrict:
      return w * kDistricts;
    case Table::kCustomer:
    case Table::kCustomerLast:
      return w * kDistricts * per_district;
    case Table::kHistory:
      return w * kDistricts * per_district + transactions;
    case Table::kNewOrder:
      return w * kDistricts * (kInitialOrders - kFirstNewOrder + 1) + transactions;
    case Table::kOrder:
    case Table::kOrderCustomer:
      return w * kDistricts * kInitialOrders + transactions;
    case Table::kOrderLine:
      return (w * kDistricts * kInitialOrders + transactions) * kMaxOrderLines;
    case Table::kItem:
      return kItems;
    case Table::kStock:
      return w * kItems;
  }
  return 0;
}

uint64_t table_pool_size(Table t, uint64_t warehouses, uint64_t transactions) {
  const uint64_t bytes =
      kPoolFloorBytes + max_table_keys(t, warehouses, transactions) * kPoolBytesPerKey;
  return (bytes + (uint64_t{1} << 20) - 1) & ~((uint64_t{1} << 20) - 1);
}

namespace {

/// A new directory for pools: /dev/shm/nvindex-tpcc-XXXXXX (or under
/// $TMPDIR, or /tmp, when /dev/shm is not writable). IOError when mkdtemp
/// fails.
Status make_temp_dir(std::string* out) {
  std::string base = "/tmp";
  if (access("/dev/shm", W_OK | X_OK) == 0) {
    base = "/dev/shm";
  } else if (const char* d = std::getenv("TMPDIR"); d != nullptr && *d != '\0') {
    base = d;
  }
  std::string templ = base + "/nvindex-tpcc-XXXXXX";
  if (mkdtemp(templ.data()) == nullptr) {
    return Status::IOError("cannot create a pool directory under " + base + ": " +
                           std::strerror(errno));
  }
  *out = templ;
  return Status::Ok();
}

std::string registered_names() {
  std::string known;
  for (const IndexEntry& e : registered_indexes()) {
    known += known.empty() ? "" : ", ";
    known += e.name;
  }
  return known;
}

}  // namespace

Database::Database(const DbOptions& options) : options_(options) {}

Database::~Database() {
  const std::vector<std::string> paths = pool_paths();  // the pools made
  for (auto& ix : indexes_) ix.reset();
  for (auto& p : pools_) p.reset();  // a clean close of each pool
  if (options_.keep_pools || pool_dir_.empty()) return;
  std::error_code ec;
  for (const std::string& path : paths) std::filesystem::remove(path, ec);
  if (remove_dir_) std::filesystem::remove(pool_dir_, ec);
}

Status Database::create(const DbOptions& options, std::unique_ptr<Database>* out) {
  const IndexEntry* entry = find_index_entry(options.index);
  if (entry == nullptr) {
    return Status::InvalidArgument("unknown index '" + options.index +
                                   "' (registered: " + registered_names() + ")");
  }
  if (!entry->caps.ordered) {
    return Status::InvalidArgument("index '" + options.index +
                                   "' is not ordered: TPC-C needs scan and find_last_less_than");
  }
  if (Status st = check_index_options(*entry, options.index_opts); !st.ok()) return st;
  if (Status st = check_node_size(*entry, options.node_size); !st.ok()) return st;
  if (options.warehouses < 1 || options.warehouses > kMaxWarehouses) {
    return Status::InvalidArgument("warehouses must be in 1.." + std::to_string(kMaxWarehouses) +
                                   ", got " + std::to_string(options.warehouses));
  }
  if (options.clients < 1 || options.clients > 65535) {
    return Status::InvalidArgument("clients must be in 1..65535, got " +
                                   std::to_string(options.clients));
  }
  if (options.clients > 1 && !entry->caps.thread_safe) {
    return Status::InvalidArgument("index '" + options.index +
                                   "' is not thread-safe; run it with 1 client");
  }

  std::unique_ptr<Database> db(new Database(options));
  db->arenas_.resize(options.clients);
  const bool persistent = entry->caps.persistent;
  if (persistent && options.pm_mode != pm::Mode::kDram) {
    if (options.pool_dir.empty()) {
      if (Status st = make_temp_dir(&db->pool_dir_); !st.ok()) return st;
      db->remove_dir_ = true;
    } else {
      db->pool_dir_ = options.pool_dir;
    }
  }
  // On an error ~Database removes the pool files made so far (and a
  // temporary directory), whatever keep_pools says.
  auto discard = [&db](Status st) {
    db->options_.keep_pools = false;
    db.reset();
    return st;
  };
  const std::string layout = pool_layout(options.index, KeyType::kInteger);
  IndexOptions iopts;
  iopts.node_size = options.node_size;
  iopts.threads = options.clients;
  iopts.extra = options.index_opts;
  for (int i = 0; i < kTables; ++i) {
    const Table t = static_cast<Table>(i);
    if (persistent) {
      const uint64_t size = table_pool_size(t, options.warehouses, options.expected_transactions);
      Status st = options.pm_mode == pm::Mode::kDram
                      ? pm::Pool::create_anonymous(size, layout, &db->pools_[i])
                      : pm::Pool::create(db->pool_dir_ + "/" + table_name(t) + ".pool", size,
                                         layout, options.pm_mode, &db->pools_[i]);
      if (!st.ok()) return discard(st);
      iopts.pool = db->pools_[i].get();
    }
    if (Status st = make_index<uint64_t>(options.index, iopts, &db->indexes_[i]); !st.ok()) {
      return discard(st);
    }
    if (options.clients > 1 && !db->indexes_[i]->info().caps.thread_safe) {
      return discard(Status::InvalidArgument("index '" + options.index +
                                             "' is not thread-safe; run it with 1 client"));
    }
  }
  *out = std::move(db);
  return Status::Ok();
}

size_t Database::row_bytes() const {
  size_t total = 0;
  for (const RowArena& a : arenas_) total += a.bytes();
  return total;
}

std::vector<std::string> Database::pool_paths() const {
  std::vector<std::string> paths;
  if (pool_dir_.empty()) return paths;
  for (int i = 0; i < kTables; ++i) {
    if (pools_[i] == nullptr) continue;
    paths.push_back(pool_dir_ + "/" + table_name(static_cast<Table>(i)) + ".pool");
  }
  return paths;
}

}  // namespace nvindex::tpcc
