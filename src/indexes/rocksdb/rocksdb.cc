// rocksdb: RocksDB (Meta, github.com/facebook/rocksdb; Debian's librocksdb)
// behind the shared LSM-store adapter (common/lsm_store.h). What is RocksDB's
// own: opening the store with its options (direct I/O, block cache) and
// sync().
#include "indexes/rocksdb/rocksdb.h"

#include <rocksdb/cache.h>
#include <rocksdb/db.h>
#include <rocksdb/iterator.h>
#include <rocksdb/options.h>
#include <rocksdb/table.h>

#include <string>
#include <utility>

namespace nvindex {
namespace {

/// An open RocksDB store.
struct RocksDbStore {
  struct Api {
    using DB = rocksdb::DB;
    using ReadOptions = rocksdb::ReadOptions;
    using WriteOptions = rocksdb::WriteOptions;
    using Slice = rocksdb::Slice;
    using Iterator = rocksdb::Iterator;
  };
  rocksdb::DB* db = nullptr;
  ~RocksDbStore() { delete db; }
  /// FlushWAL(true): writes the WAL's buffer out and syncs the WAL files.
  Status sync() {
    const rocksdb::Status s = db->FlushWAL(true);
    return s.ok() ? Status::Ok() : lsm::from_store(s, "rocksdb");
  }
};

}  // namespace

Status make_rocksdb(const IndexOptions& options, std::unique_ptr<Index<uint64_t>>* out) {
  auto open = [](const std::string& dir, RocksDbStore* store) {
    rocksdb::Options o;
    o.create_if_missing = true;
    o.compression = rocksdb::kNoCompression;
    o.use_direct_reads = true;
    o.use_direct_io_for_flush_and_compaction = true;
    rocksdb::BlockBasedTableOptions t;
    t.block_cache = rocksdb::NewLRUCache(lsm::kLsmBlockCacheBytes);
    o.table_factory.reset(rocksdb::NewBlockBasedTableFactory(t));
    const rocksdb::Status s = rocksdb::DB::Open(o, dir, &store->db);
    return s.ok() ? Status::Ok() : lsm::from_store(s, "rocksdb");
  };
  return lsm::open_lsm_index<RocksDbStore>(options, "rocksdb", kRocksDbDescription, open, out);
}

}  // namespace nvindex
