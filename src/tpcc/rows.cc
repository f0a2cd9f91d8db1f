// TPC-C rows in persistent memory: sizes and the undo log (rows.h).
#include "tpcc/rows.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "nvindex/pm/allocator.h"
#include "nvindex/pm/persist.h"
#include "tpcc/db.h"

namespace nvindex::tpcc {

namespace {

/// Bytes at the head of every log block (block 0: LogHeader).
constexpr size_t kLogHeaderBytes = 64;
/// Entry bytes one log block holds.
constexpr size_t kLogBlockData = pm::Allocator::kMaxBlock - kLogHeaderBytes;
/// Entry bytes one log holds.
constexpr size_t kLogCapacity = kLogBlockData * kLogBlocks;

/// The first 64 B of a log's block 0.
struct LogHeader {
  std::atomic<uint64_t> active;  ///< 1 while a transaction's writes are under way (NAW)
  uint64_t bytes;                ///< entry bytes of the active transaction
  uint64_t reserved[6];
};
static_assert(sizeof(LogHeader) == kLogHeaderBytes);

/// A log entry's fixed part, 24 B; a snapshot's old bytes follow, padded to
/// a multiple of 8.
struct LogEntry {
  uint32_t kind;  ///< UndoEntryKind
  uint32_t len;   ///< snapshot: bytes; insert / remove: the Table
  uint64_t a;     ///< snapshot: pool offset of the range; insert / remove: the key
  uint64_t b;     ///< insert / remove: the value
};
static_assert(sizeof(LogEntry) == 24);

/// Largest range one snapshot covers, bytes (a CUSTOMER row's C_DATA is 501).
constexpr size_t kMaxSnapshot = 1024;

size_t padded(size_t n) { return (n + 7) & ~size_t{7}; }

/// The allocator class (a power of two, 64..4096) of a block of `bytes`.
uint64_t class_bytes(size_t bytes) {
  uint64_t c = pm::Allocator::kMinBlock;
  while (c < bytes) c *= 2;
  return c;
}

}  // namespace

size_t row_bytes_of(Table t) {
  switch (t) {
    case Table::kWarehouse:
      return sizeof(Warehouse);
    case Table::kDistrict:
      return sizeof(District);
    case Table::kCustomer:
      return sizeof(Customer);
    case Table::kHistory:
      return sizeof(History);
    case Table::kOrder:
      return sizeof(Order);
    case Table::kOrderLine:
      return sizeof(OrderLine);
    case Table::kItem:
      return sizeof(Item);
    case Table::kStock:
      return sizeof(Stock);
    case Table::kCustomerLast:
    case Table::kNewOrder:
    case Table::kOrderCustomer:
      return 0;
  }
  return 0;
}

uint64_t rows_pool_size(uint64_t warehouses, uint64_t transactions) {
  uint64_t bytes = uint64_t{16} << 20;
  for (int i = 0; i < kTables; ++i) {
    const Table t = static_cast<Table>(i);
    const size_t row = row_bytes_of(t);
    if (row != 0) bytes += max_table_keys(t, warehouses, transactions) * class_bytes(row);
  }
  return (bytes + (uint64_t{1} << 20) - 1) & ~((uint64_t{1} << 20) - 1);
}

UndoLog::UndoLog(pm::Pool* pool, const uint64_t* blocks) : pool_(pool), blocks_(blocks) {}

void UndoLog::stage_snapshot(const void* p, size_t n) {
  const LogEntry e{kUndoSnapshot, static_cast<uint32_t>(n), pool_->offset(p), 0};
  const size_t at = staged_.size();
  staged_.resize(at + sizeof(e) + padded(n));
  std::memcpy(staged_.data() + at, &e, sizeof(e));
  std::memcpy(staged_.data() + at + sizeof(e), p, n);
  dirty_.emplace_back(p, n);
}

void UndoLog::stage_index_call(uint32_t kind, Table t, uint64_t key, Value value) {
  const LogEntry e{kind, static_cast<uint32_t>(t), key, value};
  const size_t at = staged_.size();
  staged_.resize(at + sizeof(e));
  std::memcpy(staged_.data() + at, &e, sizeof(e));
}

Status UndoLog::write_log() {
  if (staged_.size() > kLogCapacity) {
    const size_t staged = staged_.size();
    discard();
    return Status::OutOfSpace("tpcc: a transaction's undo log needs " + std::to_string(staged) +
                              " bytes, the log holds " + std::to_string(kLogCapacity));
  }
  // The entries and their count are durable before the log turns active;
  // until then the log is inactive and nothing has been written in place.
  for (size_t pos = 0, i = 0; pos < staged_.size(); pos += kLogBlockData, ++i) {
    char* dst = pool_->ptr<char>(blocks_[i]) + kLogHeaderBytes;
    const size_t n = std::min(kLogBlockData, staged_.size() - pos);
    pm::copy(dst, staged_.data() + pos, n);
    pm::flush(dst, n, {"tpcc.undo.entries"});
  }
  auto* header = pool_->ptr<LogHeader>(blocks_[0]);
  pm::store(&header->bytes, uint64_t{staged_.size()});
  pm::flush(&header->bytes, sizeof(header->bytes), {"tpcc.undo.bytes"});
  pm::fence({"tpcc.undo.entries"});
  pm::naw(&header->active, 1, {"tpcc.undo.begin"});
  return Status::Ok();
}

void UndoLog::finish() {
  // Every overwritten range and new row is durable before the log turns
  // inactive; a crash before the NAW rolls the transaction back.
  for (const auto& [p, n] : dirty_) pm::flush(p, n, {"tpcc.undo.rows"});
  pm::fence({"tpcc.undo.rows"});
  pm::naw(&pool_->ptr<LogHeader>(blocks_[0])->active, 0, {"tpcc.undo.commit"});
}

Status undo_active_logs(Database& db, uint32_t log_slots, RowsRecovery* recovery) {
  pm::Pool& pool = *db.rows_pool();
  const auto* root = pool.ptr<RowsRoot>(pool.root());
  for (uint32_t slot = 0; slot < log_slots; ++slot) {
    const uint64_t* blocks = root->logs[slot];
    for (uint32_t i = 0; i < kLogBlocks; ++i) {
      if (!pool.contains(blocks[i], pm::Allocator::kMaxBlock)) {
        return Status::Corruption("tpcc: undo log " + std::to_string(slot) + " block " +
                                  std::to_string(i) + " at offset " + std::to_string(blocks[i]) +
                                  " is outside the rows pool");
      }
    }
    auto* header = pool.ptr<LogHeader>(blocks[0]);
    if (header->active.load(std::memory_order_acquire) == 0) continue;
    const std::string where = "tpcc: undo log " + std::to_string(slot) + ": ";
    if (header->bytes > kLogCapacity) {
      return Status::Corruption(where + std::to_string(header->bytes) + " entry bytes, at most " +
                                std::to_string(kLogCapacity));
    }
    std::vector<std::byte> bytes(header->bytes);
    for (size_t pos = 0, i = 0; pos < bytes.size(); pos += kLogBlockData, ++i) {
      const size_t n = std::min(kLogBlockData, bytes.size() - pos);
      std::memcpy(bytes.data() + pos, pool.ptr<char>(blocks[i]) + kLogHeaderBytes, n);
    }
    // Parse every entry before changing anything.
    std::vector<size_t> starts;
    for (size_t pos = 0; pos < bytes.size();) {
      if (bytes.size() - pos < sizeof(LogEntry)) {
        return Status::Corruption(where + "a truncated entry at byte " + std::to_string(pos));
      }
      LogEntry e;
      std::memcpy(&e, bytes.data() + pos, sizeof(e));
      size_t size = sizeof(e);
      if (e.kind == kUndoSnapshot) {
        if (e.len > kMaxSnapshot || !pool.contains(e.a, e.len) ||
            bytes.size() - pos - sizeof(e) < padded(e.len)) {
          return Status::Corruption(where + "a snapshot of " + std::to_string(e.len) +
                                    " bytes at offset " + std::to_string(e.a) +
                                    " is outside the pool or the log");
        }
        size += padded(e.len);
      } else if (e.kind != kUndoInsert && e.kind != kUndoRemove) {
        return Status::Corruption(where + "unknown entry kind " + std::to_string(e.kind));
      } else if (e.len >= static_cast<uint32_t>(kTables)) {
        return Status::Corruption(where + "an entry names table " + std::to_string(e.len));
      }
      starts.push_back(pos);
      pos += size;
    }
    for (auto it = starts.rbegin(); it != starts.rend(); ++it) {
      LogEntry e;
      std::memcpy(&e, bytes.data() + *it, sizeof(e));
      if (e.kind == kUndoSnapshot) {
        char* dst = pool.ptr<char>(e.a);
        pm::copy(dst, bytes.data() + *it + sizeof(e), e.len);
        pm::flush(dst, e.len, {"tpcc.undo.restore"});
        continue;
      }
      const auto t = static_cast<Table>(e.len);
      Index<uint64_t>& index = db.index(t);
      const std::optional<Value> now = index.lookup(e.a);
      Status st;
      if (e.kind == kUndoInsert && now && *now == e.b) st = index.remove(e.a);
      if (e.kind == kUndoRemove && !now) st = index.insert(e.a, e.b);
      if (!st.ok()) {
        return Status(st.code(), where + "undoing an " +
                                     (e.kind == kUndoInsert ? "insert into " : "remove from ") +
                                     table_name(t) + ": " + st.message());
      }
    }
    pm::fence({"tpcc.undo.restore"});
    pm::naw(&header->active, 0, {"tpcc.undo.recovered"});
    if (recovery != nullptr) {
      ++recovery->undone_transactions;
      recovery->undone_entries += starts.size();
    }
  }
  return Status::Ok();
}

}  // namespace nvindex::tpcc
