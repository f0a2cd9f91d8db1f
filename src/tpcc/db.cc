// The TPC-C database: its indexes, pools and row arenas (db.h).
#include "tpcc/db.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <utility>

#include "nvindex/pm/allocator.h"
#include "nvindex/pm/persist.h"

namespace nvindex::tpcc {

const char* row_place_name(RowPlace p) { return p == RowPlace::kPm ? "pm" : "dram"; }

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

/// A new directory for pools: nvindex-tpcc-XXXXXX under
/// util::temp_pool_dir(). IOError when mkdtemp fails.
Status make_temp_dir(std::string* out) {
  const std::string base = util::temp_pool_dir();
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

IndexOptions Database::index_options() const {
  IndexOptions o;
  o.node_size = options_.node_size;
  o.threads = options_.clients;
  o.extra = options_.index_opts;
  return o;
}

Database::~Database() {
  const std::vector<std::string> paths = pool_paths();  // the pools made
  for (auto& ix : indexes_) ix.reset();
  for (auto& p : pools_) p.reset();  // a clean close of each pool
  rows_pool_.reset();
  if (options_.keep_pools || pool_dir_.empty()) return;
  std::error_code ec;
  for (const std::string& path : paths) std::filesystem::remove(path, ec);
  if (remove_dir_) std::filesystem::remove(pool_dir_, ec);
}

void Database::remove_on_signal(const std::string& path) {
  if (!options_.keep_pools) on_signal_.push_back(std::make_unique<util::RemoveOnSignal>(path));
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
  if (needs_device(entry->caps)) {
    return Status::InvalidArgument("index '" + options.index +
                                   "' is a block-device index: TPC-C keeps its tables in DRAM "
                                   "or in pools, not on a device");
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

  const bool persistent = entry->caps.persistent;
  if (options.rows == RowPlace::kPm) {
    if (!persistent) {
      return Status::InvalidArgument("rows in PM need a persistent index; '" + options.index +
                                     "' is volatile (its keys would not survive a restart)");
    }
    if (options.pm_mode != pm::Mode::kEmulated && options.pm_mode != pm::Mode::kDax) {
      return Status::InvalidArgument(std::string("rows in PM need a pool file: pm mode ") +
                                     std::string(pm::mode_name(options.pm_mode)) +
                                     " (use emulated or dax)");
    }
    if (options.clients > kMaxPmClients) {
      return Status::InvalidArgument("rows in PM serve at most " + std::to_string(kMaxPmClients) +
                                     " clients (one undo log each), got " +
                                     std::to_string(options.clients));
    }
    if (options.index.size() >= sizeof(RowsRoot::index)) {
      return Status::InvalidArgument("index name '" + options.index +
                                     "' is too long for the rows pool");
    }
  }
  std::unique_ptr<Database> db(new Database(options));
  db->arenas_.resize(options.clients);
  db->logs_.resize(options.clients);
  if (persistent && options.pm_mode != pm::Mode::kDram) {
    if (options.pool_dir.empty()) {
      if (Status st = make_temp_dir(&db->pool_dir_); !st.ok()) return st;
      db->remove_dir_ = true;
      db->remove_on_signal(db->pool_dir_);
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
  IndexOptions iopts = db->index_options();
  for (int i = 0; i < kTables; ++i) {
    const Table t = static_cast<Table>(i);
    if (persistent) {
      const uint64_t size = table_pool_size(t, options.warehouses, options.expected_transactions);
      Status st = options.pm_mode == pm::Mode::kDram
                      ? pm::Pool::create_anonymous(size, layout, &db->pools_[i])
                      : pm::Pool::create(db->pool_dir_ + "/" + table_name(t) + ".pool", size,
                                         layout, options.pm_mode, &db->pools_[i]);
      if (!st.ok()) return discard(st);
      if (options.pm_mode != pm::Mode::kDram) {
        db->remove_on_signal(db->pool_dir_ + "/" + table_name(t) + ".pool");
      }
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
  if (options.rows == RowPlace::kPm) {
    if (Status st = db->create_rows_pool(); !st.ok()) return discard(st);
  }
  *out = std::move(db);
  return Status::Ok();
}

namespace {

/// DbOptions::index_opts as the rows root stores them: "name=value" lines.
std::string encode_opts(const std::map<std::string, std::string>& opts) {
  std::string text;
  for (const auto& [k, v] : opts) text += k + "=" + v + "\n";
  return text;
}

/// The inverse of encode_opts; false on a line without '='.
bool decode_opts(std::string_view text, std::map<std::string, std::string>* opts) {
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    const size_t eq = line.find('=');
    if (eq == std::string_view::npos) return false;
    (*opts)[std::string(line.substr(0, eq))] = std::string(line.substr(eq + 1));
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return true;
}

}  // namespace

RowsRoot* Database::rows_root() const { return rows_pool_->ptr<RowsRoot>(rows_pool_->root()); }

Status Database::create_rows_pool() {
  const std::string opts = encode_opts(options_.index_opts);
  if (opts.size() >= sizeof(RowsRoot::index_opts)) {
    return Status::InvalidArgument("index options take " + std::to_string(opts.size()) +
                                   " bytes; the rows pool stores at most " +
                                   std::to_string(sizeof(RowsRoot::index_opts) - 1));
  }
  const std::string path = pool_dir_ + "/rows.pool";
  if (Status st = pm::Pool::create(
          path, rows_pool_size(options_.warehouses, options_.expected_transactions), kRowsLayout,
          options_.pm_mode, &rows_pool_);
      !st.ok()) {
    return st;
  }
  remove_on_signal(path);
  pm::Allocator& alloc = rows_pool_->allocator();
  uint64_t root_off = 0;
  if (Status st = alloc.allocate(sizeof(RowsRoot), &root_off); !st.ok()) return st;
  auto* root = rows_pool_->ptr<RowsRoot>(root_off);
  pm::fill(root, 0, sizeof(RowsRoot));
  pm::copy(root->magic, kRowsMagic, sizeof(kRowsMagic));
  pm::store(&root->version, kRowsVersion);
  pm::store(&root->warehouses, options_.warehouses);
  pm::store(&root->node_size, options_.node_size);
  pm::store(&root->log_slots, uint32_t{options_.clients});
  pm::copy(root->index, options_.index.data(), options_.index.size());
  pm::copy(root->index_opts, opts.data(), opts.size());
  for (unsigned c = 0; c < options_.clients; ++c) {
    for (uint32_t i = 0; i < kLogBlocks; ++i) {
      uint64_t off = 0;
      if (Status st = alloc.allocate(pm::Allocator::kMaxBlock, &off); !st.ok()) return st;
      pm::fill(rows_pool_->ptr<char>(off), 0, pm::Allocator::kMaxBlock);
      pm::flush(rows_pool_->ptr<char>(off), pm::Allocator::kMaxBlock, {"tpcc.rows.create"});
      pm::store(&root->logs[c][i], off);
    }
  }
  // The root and the zeroed logs are durable before the root is published:
  // a crash before set_root leaves a pool without a root (open: "not a
  // TPC-C database"), after it a complete root.
  pm::persist(root, sizeof(RowsRoot), {"tpcc.rows.create"});
  rows_pool_->set_root(root_off);
  row_base_ = reinterpret_cast<uintptr_t>(rows_pool_->base());
  for (unsigned c = 0; c < options_.clients; ++c)
    logs_[c] = UndoLog(rows_pool_.get(), root->logs[c]);
  return Status::Ok();
}

Status Database::new_pm_row(size_t bytes, void** p, Value* handle) {
  uint64_t off = 0;
  if (Status st = rows_pool_->allocator().allocate(static_cast<uint32_t>(bytes), &off); !st.ok()) {
    return Status(st.code(), "tpcc: a row of " + std::to_string(bytes) +
                                 " bytes in the rows pool: " + st.message());
  }
  *p = rows_pool_->ptr<void>(off);
  pm::fill(*p, 0, bytes);  // a reused block may hold an old row
  *handle = off;
  return Status::Ok();
}

void Database::flush_row(Table t, Value handle) const {
  if (rows_pool_ == nullptr) return;
  const size_t n = row_bytes_of(t);
  if (n != 0) pm::flush(row<char>(handle), n, {"tpcc.load.row"});
}

void Database::finish_load() {
  if (rows_pool_ == nullptr) return;
  // Every row was flushed before its key was published; this fence makes
  // the last of them durable before the load is declared complete.
  pm::fence({"tpcc.load.rows"});
  pm::naw(&rows_root()->load_complete, 1, {"tpcc.load.complete"});
}

Status Database::open(const std::string& pool_dir, pm::Mode mode, unsigned clients,
                      std::unique_ptr<Database>* out, RowsRecovery* recovery) {
  const std::string rows_path = pool_dir + "/rows.pool";
  std::error_code ec;
  if (!std::filesystem::exists(rows_path, ec)) {
    return Status::InvalidArgument("no " + rows_path +
                                   ": --check-only needs a database made with --rows pm and "
                                   "kept with --pool");
  }
  std::unique_ptr<pm::Pool> rows;
  if (Status st = pm::Pool::open(rows_path, kRowsLayout, mode, &rows); !st.ok()) return st;
  // On any error below the rows pool is closed "not clean" (its close
  // record untouched), so the next open recovers it again.
  std::unique_ptr<Database> db;
  auto fail = [&rows, &db](Status st) {
    pm::Pool* p = rows != nullptr ? rows.get() : db->rows_pool_.get();
    p->keep_unclean();
    return st;
  };
  const uint64_t root_off = rows->root();
  if (root_off == 0 || !rows->contains(root_off, sizeof(RowsRoot))) {
    return fail(Status::Corruption(rows_path +
                                   " is not a TPC-C database (no root: a crash while it " +
                                   "was being created?)"));
  }
  const auto* root = rows->ptr<RowsRoot>(root_off);
  if (std::memcmp(root->magic, kRowsMagic, sizeof(kRowsMagic)) != 0 ||
      root->version != kRowsVersion || root->log_slots < 1 || root->log_slots > kMaxPmClients ||
      root->index[sizeof(root->index) - 1] != '\0' ||
      root->index_opts[sizeof(root->index_opts) - 1] != '\0') {
    return fail(Status::Corruption(rows_path + ": the root is not a TPC-C rows root (version " +
                                   std::to_string(root->version) + ")"));
  }
  if (root->load_complete.load(std::memory_order_acquire) != 1) {
    return fail(Status::InvalidArgument(rows_path +
                                        ": the load never finished (a crash during it?); nothing "
                                        "to check: load again into a new directory"));
  }
  if (clients < 1 || clients > root->log_slots) {
    return fail(Status::InvalidArgument("clients must be in 1.." + std::to_string(root->log_slots) +
                                        " (the undo logs of this database), got " +
                                        std::to_string(clients)));
  }
  DbOptions options;
  options.index = root->index;
  if (!decode_opts(root->index_opts, &options.index_opts)) {
    return fail(Status::Corruption(rows_path + ": unreadable index options"));
  }
  options.node_size = root->node_size;
  options.warehouses = root->warehouses;
  options.clients = clients;
  options.pm_mode = mode;
  options.pool_dir = pool_dir;
  options.keep_pools = true;
  options.rows = RowPlace::kPm;
  const IndexEntry* entry = find_index_entry(options.index);
  if (entry == nullptr || !entry->caps.persistent) {
    return fail(Status::Corruption(rows_path + " names index '" + options.index +
                                   "', which is not a persistent index of this build"));
  }
  db.reset(new Database(options));
  db->pool_dir_ = pool_dir;
  db->arenas_.resize(clients);
  db->logs_.resize(clients);
  db->rows_pool_ = std::move(rows);
  db->row_base_ = reinterpret_cast<uintptr_t>(db->rows_pool_->base());
  const std::string layout = pool_layout(options.index, KeyType::kInteger);
  IndexOptions iopts = db->index_options();
  for (int i = 0; i < kTables; ++i) {
    const Table t = static_cast<Table>(i);
    const std::string path = pool_dir + "/" + table_name(t) + ".pool";
    if (Status st = pm::Pool::open(path, layout, mode, &db->pools_[i]); !st.ok()) return fail(st);
    iopts.pool = db->pools_[i].get();
    if (Status st = make_index<uint64_t>(options.index, iopts, &db->indexes_[i]); !st.ok()) {
      return fail(
          Status(st.code(), std::string("tpcc: opening ") + table_name(t) + ": " + st.message()));
    }
  }
  RowsRecovery rec;
  rec.clean_shutdown = db->rows_pool_->was_clean_shutdown();
  if (Status st = undo_active_logs(*db, root->log_slots, &rec); !st.ok()) return fail(st);
  if (Status st = db->reclaim_rows(&rec); !st.ok()) return fail(st);
  for (unsigned c = 0; c < clients; ++c) {
    db->logs_[c] = UndoLog(db->rows_pool_.get(), db->rows_root()->logs[c]);
  }
  if (recovery != nullptr) *recovery = rec;
  *out = std::move(db);
  return Status::Ok();
}

Status Database::reclaim_rows(RowsRecovery* rec) {
  pm::Pool& pool = *rows_pool_;
  pm::Allocator& alloc = pool.allocator();
  alloc.begin_recovery();
  Status st = alloc.mark_reachable(pool.root());
  const RowsRoot* root = rows_root();
  for (uint32_t c = 0; st.ok() && c < root->log_slots; ++c) {
    for (uint32_t i = 0; st.ok() && i < kLogBlocks; ++i)
      st = alloc.mark_reachable(root->logs[c][i]);
  }
  std::vector<std::pair<uint64_t, Value>> batch;
  for (int i = 0; st.ok() && i < kTables; ++i) {
    const Table t = static_cast<Table>(i);
    if (row_bytes_of(t) == 0) continue;
    uint64_t from = 0;
    for (;;) {
      batch.clear();
      index(t).scan(from, 4096, &batch);
      for (const auto& [k, v] : batch) {
        st = alloc.mark_reachable(v);
        if (!st.ok()) {
          st = Status::Corruption(std::string("tpcc: ") + table_name(t) + " key " +
                                  std::to_string(k) + " names row " + std::to_string(v) + ": " +
                                  st.message());
          break;
        }
      }
      if (!st.ok() || batch.size() < 4096 || batch.back().first == UINT64_MAX) break;
      from = batch.back().first + 1;
    }
  }
  if (!st.ok()) return st;
  const uint64_t reached = alloc.bytes_in_use();
  const pm::Pool::CloseRecord& record = pool.close_record();
  // A transaction rolled back at this open had allocated rows the close
  // counted and no index reaches now: then the record is an upper bound.
  const bool exact = rec->undone_transactions == 0;
  if (record.bytes != 0 && (exact ? reached != record.bytes : reached > record.bytes)) {
    return Status::Corruption("tpcc: the rows pool was closed cleanly with " +
                              std::to_string(record.bytes) + " bytes of rows, the indexes reach " +
                              std::to_string(reached) +
                              " (a lost or redirected row; nothing reclaimed)");
  }
  pool.consume_close_record(reached);
  rec->free_blocks = alloc.end_recovery().reclaimed_blocks;
  return Status::Ok();
}

pm::PageBacking Database::pool_pages() const {
  pm::PageBacking sum;
  auto add = [&sum](const pm::Pool* p) {
    if (p == nullptr) return;
    const pm::PageBacking b = p->page_backing();
    if (!b.known) return;
    sum.known = true;
    sum.page_bytes = std::max(sum.page_bytes, b.page_bytes);
    sum.mapped_bytes += b.mapped_bytes;
    sum.resident_bytes += b.resident_bytes;
    sum.huge_bytes += b.huge_bytes;
  };
  for (const auto& p : pools_) add(p.get());
  add(rows_pool_.get());
  return sum;
}

size_t Database::row_bytes() const {
  if (rows_pool_ != nullptr) return rows_pool_->allocator().bytes_in_use();
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
  if (rows_pool_ != nullptr) paths.push_back(pool_dir_ + "/rows.pool");
  return paths;
}

}  // namespace nvindex::tpcc
