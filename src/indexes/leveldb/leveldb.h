// leveldb: the LevelDB key-value store (an LSM-tree) as an Index<uint64_t>,
// one of issue 14's external yardsticks for PA-Tree. See leveldb.cc.
#pragma once

#include <memory>

#include "indexes/common/lsm_store.h"
#include "nvindex/index.h"

namespace nvindex {

inline constexpr char kLevelDbDescription[] =
    "LevelDB (LSM-tree, Debian's libleveldb) in a directory on a disk; external yardstick of "
    "PA-Tree";

inline constexpr OptionSpec kLevelDbOptions[] = {
    {"persistence", lsm::kPersistenceValues,
     "strong: every write synced (WriteOptions::sync) before it returns; weak: not synced, "
     "sync() makes every completed write durable"}};

/// Factory for "leveldb": opens (or creates) a LevelDB store in the directory
/// IndexOptions::device (created if missing; an existing one must be empty or
/// hold a leveldb store of nvindex: lsm::prepare_store_dir). Keys 8 bytes
/// big-endian, values 8 bytes; insert/update/remove atomic per key through
/// striped mutexes (src/indexes/common/lsm_store.h). Store options: block
/// cache 8 MiB (lsm::kLsmBlockCacheBytes, LevelDB's default), no compression
/// (PA-Tree compresses nothing), LevelDB's other defaults (4 MiB write
/// buffer, 2 MiB tables). I/O: LevelDB has no direct I/O, so its reads and
/// writes go through the page cache (PA-Tree's do not: O_DIRECT); a run that
/// fits the page cache reads from DRAM after the first touch.
/// Option persistence (kLevelDbOptions): "strong" (default) writes with
/// WriteOptions::sync = true (the log record is fdatasynced before the write
/// returns); "weak" with sync = false, and sync() makes everything durable by
/// an empty write with sync = true (fdatasync of the current log file, which
/// holds every write since the last memtable switch; writes of an older log
/// are durable once LevelDB has written their memtable to a table, which it
/// syncs). A process kill loses nothing either way (each write reaches the
/// OS before it returns). IndexOptions::device_bytes is ignored (no size
/// limit but the file system's), as are node_size and fill_factor. info():
/// recovered = an existing store was opened, recovery_seconds = the wall
/// time of its DB::Open (log replay); dram_bytes and pm_bytes 0.
/// Errors: InvalidArgument (see prepare_store_dir), Corruption (LevelDB
/// found its files damaged), IOError (LevelDB could not open the store, e.g.
/// another process holds its lock).
Status make_leveldb(const IndexOptions& options, std::unique_ptr<Index<uint64_t>>* out);

}  // namespace nvindex
