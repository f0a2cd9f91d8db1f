// rocksdb: the RocksDB key-value store (an LSM-tree) as an Index<uint64_t>,
// one of issue 14's external yardsticks for PA-Tree. See rocksdb.cc.
#pragma once

#include <memory>

#include "indexes/common/lsm_store.h"
#include "nvindex/index.h"

namespace nvindex {

inline constexpr char kRocksDbDescription[] =
    "RocksDB (LSM-tree, Debian's librocksdb) in a directory on a disk, direct I/O; external "
    "yardstick of PA-Tree";

inline constexpr OptionSpec kRocksDbOptions[] = {
    {"persistence", lsm::kPersistenceValues,
     "strong: every write synced (WriteOptions::sync) before it returns; weak: not synced, "
     "sync() makes every completed write durable (FlushWAL(true))"}};

/// Factory for "rocksdb": opens (or creates) a RocksDB store in the directory
/// IndexOptions::device (created if missing; an existing one must be empty or
/// hold a rocksdb store of nvindex: lsm::prepare_store_dir). Keys 8 bytes
/// big-endian, values 8 bytes; insert/update/remove atomic per key through
/// striped mutexes (src/indexes/common/lsm_store.h). Store options: block
/// cache 8 MiB (lsm::kLsmBlockCacheBytes, an LRU cache set explicitly), no
/// compression (PA-Tree compresses nothing), use_direct_reads and
/// use_direct_io_for_flush_and_compaction (table reads, flushes and
/// compactions bypass the page cache, as PA-Tree's O_DIRECT I/O does; the
/// write-ahead log is still written through the page cache, which RocksDB
/// does not let direct I/O cover), RocksDB's other defaults (64 MiB write
/// buffer, 2 background jobs). Direct I/O needs a file system that has it
/// (not tmpfs: opening fails with IOError/InvalidArgument there).
/// Option persistence (kRocksDbOptions): "strong" (default) writes with
/// WriteOptions::sync = true (the WAL record is synced before the write
/// returns); "weak" with sync = false, and sync() calls FlushWAL(true)
/// (writes out and syncs the WAL: every completed write is durable). A
/// process kill loses nothing either way (each write reaches the OS before
/// it returns). IndexOptions::device_bytes is ignored (no size limit but the
/// file system's), as are node_size and fill_factor. info(): recovered = an
/// existing store was opened, recovery_seconds = the wall time of its
/// DB::Open (log replay); dram_bytes and pm_bytes 0.
/// Errors: InvalidArgument (see prepare_store_dir), Corruption (RocksDB
/// found its files damaged), IOError (RocksDB could not open the store, e.g.
/// another process holds its lock, or no direct I/O).
Status make_rocksdb(const IndexOptions& options, std::unique_ptr<Index<uint64_t>>* out);

}  // namespace nvindex
