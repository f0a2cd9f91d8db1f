// btree-ls: the persistency-optimised log-structured B+-tree of Ni et al.
// Source: Ni et al., "Closing the Performance Gap between DRAM and PM for
// In-Memory Index Structures" (UCSC tech report, 2020; issue 11), §6.3
// (log-structured leaves: a mapping table of logical leaf ids, delta chains
// in PM, consolidation, logs per leaf group, garbage collection, parallel log
// replay). btree_ls.cc holds the crash
// argument of every persistent update where the update is;
// docs/indexes/btree-ls.md summarises the design, the byte tables and our
// departures from the paper.
//
// Placement: selective. The leaves exist only as records in PM logs; the
// mapping table (logical leaf id, LNID -> newest record of its chain) and the
// inner nodes (the shared DRAM InnerTree, indexes/common/inner_tree.h, which
// routes a key to LNID + 1) are DRAM, rebuilt from the logs on recovery. That
// departs from the "inner nodes as in btree": btree's template has no
// leaves named by a mapping table.
//
// A leaf is a chain, newest first, of delta records (one 64 B line each:
// insert, update or remove of one key) ending in a base record (a header line
// and the leaf's sorted entries). Every record goes to log hash(LNID) % logs
// (a split's record to the left LNID's log) and is persisted with one flush
// and one fence before the operation returns: that is the whole persistent
// update. A chain of node_size / 16 deltas is consolidated by the next write
// of its leaf into one new base record; when the leaf then holds more than
// node_size / 16 entries, ONE split base record holds both halves, both LNIDs
// and the separator, so a split is atomic. Leaves never merge.
//
// Persistent layout (pool layout name "btree-ls"): the root object, the
// segment tables and the records: byte tables directly above their structs
// below.
//
// Concurrency: a writer takes its LNID's DRAM version lock (mapping table)
// and follows InnerTree's Route/validate protocol; appends to one log
// serialize on that log's mutex (record written and persisted under it, so a
// log's records are durable in log order); readers are optimistic (version,
// chain walk with every offset checked, validate). The garbage collector of
// a log runs on one writer thread at a time (try-lock), after that writer has
// released its leaf, and locks one LNID at a time.
//
// Thread-safety: every Index method may be called concurrently, except
// verify() (no concurrent writers).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "indexes/common/inner_tree.h"
#include "indexes/common/persistent.h"
#include "nvindex/index.h"
#include "nvindex/pm/pool.h"

namespace nvindex {

inline constexpr char kBtreeLsDescription[] =
    "log-structured B+-tree: DRAM mapping table and inner nodes, leaves as delta chains in "
    "PM logs (Ni et al. 2020 §6.3)";

inline constexpr std::string_view kBtreeLsLogValues[] = {"4", "1", "16"};
inline constexpr std::string_view kBtreeLsGcValues[] = {"on", "off"};
inline constexpr std::string_view kBtreeLsGcAtValues[] = {"50", "0"};
inline constexpr std::string_view kBtreeLsPrefetchValues[] = {"32", "0"};
/// The options of "btree-ls" (IndexEntry::options; values[0] is the default).
inline constexpr OptionSpec kBtreeLsOptions[] = {
    {"logs", kBtreeLsLogValues,
     "PM logs the records are spread over by hash of the LNID (kept by the pool on reopen)"},
    {"gc", kBtreeLsGcValues, "garbage collection of the logs (off: a full log is OutOfSpace)"},
    {"gc_at", kBtreeLsGcAtValues,
     "percent of a log in use above which a writer runs a GC step on it (0: after every write)"},
    {"prefetch", kBtreeLsPrefetchValues,
     "newest records of a chain (at most 32) whose lines a traversal prefetches, from the "
     "offsets the mapping table caches (32: every record of a chain at 256 and 512 B)"}};

/// Factory for "btree-ls" (integer keys only: no string factory, so string
/// keys are InvalidArgument from the registry). options.pool is required
/// (InvalidArgument otherwise) and must have layout "btree-ls". On a pool
/// with no root: creates an empty index whose leaves consolidate at
/// options.node_size / 16 entries (node_size 256, 512 or 1024 B; else
/// InvalidArgument) and whose logs take every free 4 KiB block of the pool.
/// On a pool with a root: recovers (replays the logs with options.threads
/// threads); the stored node size and log count win over the options.
/// Options (kBtreeLsOptions): logs, gc, gc_at, prefetch.
/// Errors: Corruption (bad root object, segment table or record), OutOfSpace
/// (pool too small for two segments per log).
Status make_btree_ls(const IndexOptions& options, std::unique_ptr<Index<uint64_t>>* out);

namespace btree_ls {

/// Pool layout name.
inline constexpr char kLayout[] = "btree-ls";
/// Root object magic: "BTREELS1" as a little-endian word.
inline constexpr uint64_t kRootMagic = 0x31534c4545525442ull;
/// Bytes of a log segment (one allocator block of the largest class).
inline constexpr uint32_t kSegBytes = 4096;
/// Offsets per segment-table block (and table offsets per directory block).
inline constexpr uint32_t kPerTable = kSegBytes / 8;
/// Most logs.
inline constexpr uint32_t kMaxLogs = 16;
/// Bytes of the root object's allocator block.
inline constexpr uint32_t kRootBytes = 1024;
/// Most LNIDs (mapping-table capacity).
inline constexpr uint64_t kMaxLnids = uint64_t{1} << 24;
/// Most record offsets a mapping-table slot keeps for prefetching (a ring
/// indexed by chain position: the newest kMaxPrefetch records).
inline constexpr uint32_t kMaxPrefetch = 32;

/// One log's words in the root object (32 B).
struct LogMeta {
  uint64_t dir;                ///< offset of the directory block (4 KiB), written once
  uint64_t segments;           ///< segments S of the log, written once
  std::atomic<uint64_t> head;  ///< logical position of the oldest record; NAW only (GC)
  uint64_t reserved;           ///< zero
};
static_assert(sizeof(LogMeta) == 32);

/// The root object (one 1 KiB allocator block; Pool::root() -> it):
///   offset size  field
///   ------ ----  -----------------------------------------------------------
///        0    8  magic kRootMagic ("BTREELS1"), written once
///        8    8  node size, bytes (256, 512 or 1024), written once
///       16    8  logs N (1..16), written once
///       24    8  segment bytes (4096), written once
///       32   32  reserved, zero
///       64  32*N per log: directory offset, segments S, head (logical byte
///                position of the log's oldest record, a multiple of 64;
///                changed only by NAW, by the garbage collector), reserved
/// A log is a circle of S segments of 4 KiB: logical position p lies in
/// segment (p / 4096) mod S at byte p mod 4096. The directory block holds the
/// offsets of ceil(S / 512) table blocks, each holding 512 segment offsets.
struct RootObject {
  uint64_t magic;
  uint64_t node_size;
  uint64_t logs;
  uint64_t seg_bytes;
  uint64_t reserved[4];
  LogMeta log[kMaxLogs];
};
static_assert(offsetof(RootObject, magic) == 0);
static_assert(offsetof(RootObject, node_size) == 8);
static_assert(offsetof(RootObject, logs) == 16);
static_assert(offsetof(RootObject, seg_bytes) == 24);
static_assert(offsetof(RootObject, reserved) == 32);
static_assert(offsetof(RootObject, log) == 64);
static_assert(offsetof(LogMeta, head) == 16);
static_assert(sizeof(RootObject) <= kRootBytes);

/// Record kinds (tag bits 0..7).
enum Kind : uint8_t { kInsert = 1, kUpdate = 2, kRemove = 3, kBase = 4 };
/// Tag bits 56..63 of every record: a valid tag has this byte.
inline constexpr uint64_t kTagMagic = 0xB5;

/// A record header: the first (for a delta, the only) 64 B line of a record.
/// Records are 64 B aligned and never straddle a segment.
///   offset size  field
///   ------ ----  -----------------------------------------------------------
///        0    8  tag: bits 0..7 kind (Kind), 8..23 lines (record bytes / 64),
///                24..39 entries of the left LNID (base), 40..55 entries of
///                the right LNID (split base), 56..63 kTagMagic
///        8    8  pos: the record's logical position in its log (so a record
///                left over from an earlier lap of the circle never matches)
///       16    8  seq: global sequence number (per LNID, the order of its
///                records: a chain is its newest base and the deltas after it)
///       24    8  lnid (base: the left LNID)
///       32    8  delta: key;   base: low key of lnid
///       40    8  delta: value; base: right LNID (0 = no split: LNID 0 is
///                never a right half)
///       48    8  delta: prev, pool offset of the chain's previous record;
///                base: separator (low key of the right LNID)
///       56    8  checksum: XXH3_64bits of bytes [0, 56), and for a base,
///                XXH3_64bits_withSeed(entries, that value)
///   (base) 64  16*(left + right) entries {key, value}, ascending, left LNID's
///                first; lines = ceil((64 + 16*(left+right)) / 64)
/// A record is valid when its tag has kTagMagic and a known kind, it fits
/// its segment, pos equals its position and the checksum matches; a torn
/// record (an operation that was never acknowledged) is not.
struct Header {
  std::atomic<uint64_t> tag;
  std::atomic<uint64_t> pos;
  std::atomic<uint64_t> seq;
  std::atomic<uint64_t> lnid;
  std::atomic<uint64_t> a;
  std::atomic<uint64_t> b;
  std::atomic<uint64_t> c;
  std::atomic<uint64_t> checksum;
};
static_assert(sizeof(Header) == 64);
static_assert(offsetof(Header, tag) == 0 && offsetof(Header, pos) == 8 &&
              offsetof(Header, seq) == 16 && offsetof(Header, lnid) == 24 &&
              offsetof(Header, a) == 32 && offsetof(Header, b) == 40 && offsetof(Header, c) == 48 &&
              offsetof(Header, checksum) == 56);

/// A base record's entry (16 B).
struct PmEntry {
  std::atomic<uint64_t> key;
  std::atomic<uint64_t> value;
};
static_assert(sizeof(PmEntry) == 16);

/// One mapping-table slot (DRAM, 320 B): everything a reader needs before it
/// touches PM.
struct alignas(64) Slot {
  std::atomic<uint64_t> lock{0};      ///< version lock (indexes/common/version_lock.h)
  std::atomic<uint64_t> head{0};      ///< pool offset of the newest record (0: no leaf)
  std::atomic<uint64_t> base_seq{0};  ///< seq of the chain's base record
  std::atomic<uint64_t> low{0};       ///< low key (immutable once set)
  std::atomic<uint64_t> next{0};      ///< LNID + 1 of the next leaf in key order (0: last)
  std::atomic<uint32_t> chain{0};     ///< deltas in the chain
  std::atomic<uint32_t> unused{0};    ///< zero
  /// Pool offsets of the chain's records by position (0: the base, i: the
  /// i-th delta after it) modulo kMaxPrefetch: the newest kMaxPrefetch.
  std::atomic<uint64_t> recent[kMaxPrefetch];
};

/// The log-structured B+-tree. Created by make_btree_ls().
class BtreeLs final : public PersistentIndex {
 public:
  /// Runtime knobs (not stored in the pool): gc on/off, gc_at percent,
  /// prefetch depth (0..kMaxPrefetch), recovery threads.
  struct Knobs {
    bool gc = true;
    uint32_t gc_at = 50;
    uint32_t prefetch = 32;
    unsigned threads = 1;
  };
  BtreeLs(pm::Pool* pool, Knobs knobs);
  ~BtreeLs() override;

  /// Creates an empty index (LNID 0: an empty base record) with `logs` logs
  /// taking every free 4 KiB block of the pool. Errors: OutOfSpace.
  Status create(uint32_t node_size, uint32_t logs);
  /// Recovers from the logs (btree_ls.cc, "Recovery"). Errors: Corruption.
  Status recover();

  Status insert(uint64_t key, Value value) override;
  Status update(uint64_t key, Value value) override;
  Status remove(uint64_t key) override;
  std::optional<Value> lookup(uint64_t key) override;
  size_t scan(uint64_t start, size_t count, std::vector<std::pair<uint64_t, Value>>* out) override;
  std::optional<std::pair<uint64_t, Value>> find_last_less_than(uint64_t key) override;
  IndexInfo info() const override;
  /// Walks the leaves in key order (next links from LNID 0), checks that the
  /// inner nodes route exactly them, and materialises every chain with every
  /// record checked (valid, of its LNID, prev links, chain length, sorted
  /// base entries, keys inside the leaf's range). Report: leaves = LNIDs,
  /// pm_bytes = root object + directory, table and segment blocks.
  Status verify(VerifyReport* report) const override;
  std::vector<std::pair<std::string, std::string>> ablation_notes() const override;

 private:
  struct Log;
  struct Scanned;
  using Entries = std::vector<std::pair<uint64_t, Value>>;

  Slot& slot(uint64_t lnid) const;
  Status new_lnid(uint64_t* lnid);
  uint32_t log_of(uint64_t lnid) const;
  Header* at(uint64_t off) const { return reinterpret_cast<Header*>(pool_->base() + off); }
  uint64_t phys(const Log& lg, uint64_t pos) const;
  uint64_t lock_covering(uint64_t key);
  void prefetch_chain(const Slot& s) const;
  template <class OnDelta>
  int walk(uint64_t lnid, uint64_t head, uint32_t chain, OnDelta&& on_delta,
           const PmEntry** entries, uint32_t* lo, uint32_t* hi) const;
  int search(uint64_t lnid, uint64_t head, uint32_t chain, uint64_t key, Value* v) const;
  bool materialize(uint64_t lnid, uint64_t head, uint32_t chain, Entries* out) const;
  Status append(uint32_t log, uint64_t* w, size_t nwords, const char* site, uint64_t* off,
                bool use_reserve);
  Status write_delta(uint64_t lnid, Kind kind, uint64_t key, Value value);
  Status consolidate(uint64_t lnid, bool* split);
  Status write_op(uint64_t key, Value value, Kind kind);
  void maybe_gc(uint32_t log, bool whole);
  bool read_record(const Log& lg, uint64_t pos, std::vector<uint64_t>* words) const;
  Status scan_log(uint32_t log, std::vector<Scanned>* out) const;
  Status no_whole_record_in(const Log& lg, uint32_t log, uint64_t from, uint64_t to,
                            uint64_t gap) const;
  Status check_chain(uint64_t lnid, uint64_t* keys, Entries* scratch) const;

  const Knobs knobs_;
  RootObject* root_obj_ = nullptr;
  uint32_t node_size_ = 0;
  uint32_t cap_ = 0;  ///< entries per leaf, and deltas per chain, node_size / 16
  uint32_t nlogs_ = 0;
  std::vector<std::unique_ptr<Log>> logs_;
  std::unique_ptr<std::atomic<Slot*>[]> chunks_;  ///< mapping table, lazily filled
  std::mutex chunk_mu_;
  std::atomic<uint64_t> next_lnid_{0};
  std::atomic<uint64_t> seq_{0};
  std::atomic<uint64_t> keys_{0};  ///< live keys
  /// keys_ when an insert last found its log full (0: never): inserts below
  /// it may use the logs' reserve.
  std::atomic<uint64_t> full_keys_{0};
  uint64_t meta_blocks_ = 0;  ///< directory + table + segment blocks
  std::unique_ptr<inner::InnerTree> inner_;
};

}  // namespace btree_ls
}  // namespace nvindex
