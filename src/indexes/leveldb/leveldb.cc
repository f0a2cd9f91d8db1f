// leveldb: LevelDB (Ghemawat and Dean, github.com/google/leveldb; Debian's
// libleveldb) behind the shared LSM-store adapter (common/lsm_store.h).
// What is LevelDB's own: opening the store with its options and sync().
#include "indexes/leveldb/leveldb.h"

#include <leveldb/cache.h>
#include <leveldb/db.h>
#include <leveldb/iterator.h>
#include <leveldb/options.h>
#include <leveldb/write_batch.h>

#include <string>
#include <utility>

namespace nvindex {
namespace {

/// An open LevelDB store: the cache outlives the DB (declared first).
struct LevelDbStore {
  struct Api {
    using DB = leveldb::DB;
    using ReadOptions = leveldb::ReadOptions;
    using WriteOptions = leveldb::WriteOptions;
    using Slice = leveldb::Slice;
    using Iterator = leveldb::Iterator;
  };
  std::unique_ptr<leveldb::Cache> cache;
  leveldb::DB* db = nullptr;
  ~LevelDbStore() { delete db; }
  /// An empty batch written with sync = true: LevelDB appends its (empty)
  /// record to the current log and fdatasyncs the log.
  Status sync() {
    leveldb::WriteOptions w;
    w.sync = true;
    leveldb::WriteBatch empty;
    const leveldb::Status s = db->Write(w, &empty);
    return s.ok() ? Status::Ok() : lsm::from_store(s, "leveldb");
  }
};

}  // namespace

Status make_leveldb(const IndexOptions& options, std::unique_ptr<Index<uint64_t>>* out) {
  auto open = [](const std::string& dir, LevelDbStore* store) {
    store->cache.reset(leveldb::NewLRUCache(lsm::kLsmBlockCacheBytes));
    leveldb::Options o;
    o.create_if_missing = true;
    o.block_cache = store->cache.get();
    o.compression = leveldb::kNoCompression;
    const leveldb::Status s = leveldb::DB::Open(o, dir, &store->db);
    return s.ok() ? Status::Ok() : lsm::from_store(s, "leveldb");
  };
  return lsm::open_lsm_index<LevelDbStore>(options, "leveldb", kLevelDbDescription, open, out);
}

}  // namespace nvindex
