// p-bwtree: a persistent Bw-Tree for integer and byte-string keys.
// Sources: Levandoski, Lomet, Sengupta, "The Bw-Tree: A B-tree for New
// Hardware Platforms", ICDE'13 (mapping table, delta chains, the two-half
// split §IV.B, consolidation §IV.A, epochs §V.A); Wang et al., "Building a
// Bw-Tree Takes More Than Just Buzz Words", SIGMOD'18 (OpenBwTree: chain
// length thresholds 8 for leaves and 2 for inner nodes, helping along any
// incomplete split a thread meets, no merges needed for correctness); Lee
// et al., "RECIPE: Converting Concurrent DRAM Indexes to Persistent-Memory
// Indexes", SOSP'19 §5 (P-BwTree: every record persisted before the CAS that
// publishes it, the CAS'd mapping word persisted before returning).
// docs/indexes/p-bwtree.md summarises the design; p_bwtree.cc holds the
// crash argument of every persistent update where the update is.
//
// Persistent state (pool layout "p-bwtree", "p-bwtree:string" for string
// keys), all in pool allocator blocks:
// - the root object (4096 B): magic, node size, root node id, and the
//   directory of directory blocks (2048 B, 256 chunk offsets each) that
//   name the mapping-table chunks;
// - mapping-table chunks (4096 B = 512 words each): word `id` holds the pool
//   offset of node id's newest record (its delta chain head), bit 0 set
//   while the word may not yet be durable (below), 0 for a free id;
// - records: base nodes (leaf or inner, up to node_size bytes) and delta
//   records (insert, update, delete, split, index-entry), each naming the
//   next older record of its chain. Records are immutable once published.
//   A base's block continues with a delta area of kAreaSlots 64 B slots
//   (OpenBwTree's delta record pre-allocation, Wang et al., SIGMOD'18):
//   the delta of depth d goes into slot d - 1 when it fits and the slot is
//   free, so a chain is a few neighbouring lines of one block, retired and
//   freed with its base; other deltas are blocks of their own.
//
// Keys are inline in the records (no separate key records): an integer key
// is one 8 B field; a string key is a length byte and its bytes in a delta
// record, or a 16 B slot (value, offset, length) plus its bytes in a base
// node's key heap. So a string insert writes one record, one line for keys
// up to 39 bytes, and the mapping word: no line more than an integer insert
// at YCSB's 24 B keys; consolidation copies the keys into the new base.
//
// Concurrency: no locks. Every change is one CAS of a mapping-table word
// (or of the root id) from the head a thread read to a new record; a failed
// CAS retries from a fresh read. Readers never block. Replaced chains are
// retired to an epoch manager (util/epoch.h) and freed when no
// reader can hold them. Thread-safety: every Index method may be called
// concurrently.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "indexes/common/persistent.h"
#include "nvindex/index.h"
#include "nvindex/pm/pool.h"
#include "util/epoch.h"

namespace nvindex {

inline constexpr char kPBwTreeDescription[] =
    "persistent Bw-Tree: PM mapping table and delta chains published by CAS, two-half splits, "
    "epochs (Levandoski et al., ICDE'13; OpenBwTree, SIGMOD'18; RECIPE, SOSP'19)";

/// Factory for "p-bwtree" over integer keys. options.pool is required, with
/// layout "p-bwtree"; options.node_size (a power of two in 128..4096 B) is
/// the base node size of a new index (a recovered one keeps its own). On a
/// pool with no root: creates an empty tree (root object, one mapping chunk,
/// one empty base leaf). Otherwise recovers (PBwTree::recover). Errors:
/// InvalidArgument (pool), Corruption (damaged pool), OutOfSpace.
Status make_p_bwtree(const IndexOptions& options, std::unique_ptr<Index<uint64_t>>* out);
/// The same for string keys (pool layout "p-bwtree:string").
Status make_p_bwtree_string(const IndexOptions& options,
                            std::unique_ptr<Index<std::string_view>>* out);

namespace p_bwtree {

/// Root object magic "PBWTv3\0\0" (v2: base nodes carry a delta area; v3:
/// the root object names directory blocks of chunks, not chunks. Pools of
/// v1 and v2 are refused).
inline constexpr uint64_t kRootMagic = 0x0000337654574250ull;
/// Bytes of the root object and of a mapping-table chunk (one 4 KiB block
/// each), and of a directory block (2 KiB: a block class of its own, so
/// that the root object and the first chunk stay the first two blocks of
/// the pool's first 4 KiB-class chunk, where the fuzzer's image windows,
/// tests/fuzz/pool_image.h, see them).
inline constexpr uint32_t kRootBytes = 4096;
inline constexpr uint32_t kDirBytes = 2048;
inline constexpr uint32_t kChunkBytes = 4096;
/// Mapping words per chunk.
inline constexpr uint64_t kIdsPerChunk = kChunkBytes / 8;
/// Chunk offsets per directory block.
inline constexpr uint64_t kChunksPerDir = kDirBytes / 8;
/// Directory-block entries in the root object.
inline constexpr uint32_t kMaxDirs = (kRootBytes - 32) / 8;
/// Chunks the mapping table can hold (130,048).
inline constexpr uint64_t kMaxChunks = kMaxDirs * kChunksPerDir;
/// Node ids the mapping table can hold (66,584,576, more than a pool of
/// 16 GiB has base nodes): a split that needs one more gets OutOfSpace.
inline constexpr uint64_t kMaxNodeIds = kMaxChunks * kIdsPerChunk;
/// "No node" (a base node without right sibling).
inline constexpr uint64_t kNoNode = ~0ull;
/// Deltas above a base before a leaf's chain is consolidated (OpenBwTree's
/// LEAF_DELTA_CHAIN_LENGTH_THRESHOLD).
inline constexpr uint32_t kLeafChainMax = 8;
/// The same for inner nodes (the SIGMOD'18 text; OpenBwTree's and RECIPE's
/// code use 8). Measured at 8 with delta areas (1M integer keys, YCSB C and
/// A, 1 thread, 3 interleaved pairs): C +10 %, A -11 %, no clear gain;
/// and with 26 B string keys at 128 B nodes, whose inner nodes hold two
/// separators, the tree outgrew verify()'s 64 levels at 20,000 keys.
inline constexpr uint32_t kInnerChainMax = 2;
/// Delta slots in a base node's delta area (OpenBwTree's preallocated
/// delta space after each base, "ElasticNode"): 64 B each, slot i holding
/// the delta of depth i + 1, so a whole leaf chain up to kLeafChainMax
/// sits in the base's block. A delta that has no free slot (area full or
/// claimed by a racing writer, deeper than the area, or a string delta over
/// kSlotRecordBytes) is a block of its own, as before.
inline constexpr uint32_t kAreaSlots = 8;
/// Bytes of one delta slot (one line): the delta record, then at 56 the
/// slot's claim word (8 B, 0 = free).
inline constexpr uint32_t kSlotBytes = 64;
/// Largest delta record a slot holds (integer deltas; string deltas of
/// keys up to 31 B).
inline constexpr uint32_t kSlotRecordBytes = kSlotBytes - 8;
/// Bit 0 of a mapping word: set by the CAS that publishes a record, cleared
/// after the word is persisted; a reader that sees it persists the word
/// before relying on it (link-and-persist, David et al., ATC'18).
inline constexpr uint64_t kDirty = 1;

/// True for the node sizes a new index accepts (powers of two, 128..4096 B).
bool valid_node_size(uint32_t bytes);

/// Record types (byte 0 of every record).
enum RecordType : uint8_t {
  kBaseLeaf = 1,
  kBaseInner = 2,
  kInsert = 3,      ///< leaf delta: key -> value added
  kUpdate = 4,      ///< leaf delta: key's value replaced
  kDelete = 5,      ///< leaf delta: key removed
  kSplit = 6,       ///< keys >= separator now live in the sibling node
  kIndexEntry = 7,  ///< inner delta: keys >= separator route to child (until the next one)
};
/// flags bit: the record belongs to a leaf node.
inline constexpr uint8_t kLeafFlag = 1;
/// flags bit (base nodes): the node has a high key (otherwise unbounded).
inline constexpr uint8_t kHasHighFlag = 2;

/// The root object (4096 B block; Pool::root() -> it):
///   offset size  field
///   ------ ----  ---------------------------------------------------------
///        0    8  magic kRootMagic
///        8    8  node size, bytes (base nodes of a new index)
///       16    8  root node id (std::atomic; changed by CAS when the root grows)
///       24    8  reserved, zero
///       32 8*508 directory: pool offset of directory block d, 0 = none
///                (std::atomic; set once, used in order)
/// A directory block (2048 B) holds 256 pool offsets (std::atomic, set
/// once, 0 = none): entry i of block d names mapping chunk d * 256 + i.
/// Chunks are used in order, so the nonzero entries are a prefix of the
/// concatenated blocks.
struct RootObject {
  uint64_t magic;
  uint64_t node_size;
  std::atomic<uint64_t> root_id;
  uint64_t reserved;
  std::atomic<uint64_t> dirs[kMaxDirs];
};
static_assert(offsetof(RootObject, magic) == 0);
static_assert(offsetof(RootObject, node_size) == 8);
static_assert(offsetof(RootObject, root_id) == 16);
static_assert(offsetof(RootObject, reserved) == 24);
static_assert(offsetof(RootObject, dirs) == 32);
static_assert(sizeof(RootObject) == kRootBytes);

/// The header every record starts with (16 B):
///   offset size  field
///   ------ ----  ---------------------------------------------------------
///        0    1  type (RecordType)
///        1    1  flags (kLeafFlag, kHasHighFlag)
///        2    2  depth: deltas between this record and its base (0 = base)
///        4    4  count: live items (leaf) or children (inner) of the node
///                as of this record
///        8    8  next: pool offset of the next older record (0 for a base)
/// A delta continues (16 B in all):
///       16    8  value (insert, update), sibling id (split), child id
///                (index entry); 0 for delete
///       24    .  key: integer keys 8 B; string keys a length byte, then the
///                bytes (the separator of a split or an index entry)
/// A base node continues (its block: bit_ceil(max(bytes, node_size) +
/// min(kAreaSlots * 64, node_size)) bytes, without the area when that is
/// over 4096; the delta area starts at the first line after `bytes`, holds
/// min(kAreaSlots, lines left in the block) slots, and a slot whose claim
/// word, its last 8 bytes, is 0 is free):
///       16    8  right sibling id (kNoNode: none)
///       24    4  bytes of the record
///       28    2  string keys: offset of the high key in the record
///       30    2  string keys: length of the high key
///       32    .  integer keys: high key (8 B), then count entries of 16 B
///                (key, value or child id), ascending;
///                string keys: count slots of 16 B (value or child id at 0,
///                key offset in the record at 8 (2 B), key length at 10
///                (2 B)), ascending by key, then the key bytes.
/// An inner base's first entry carries the node's low key (for the
/// leftmost node of a level, the smallest key).
struct RecordHeader {
  uint8_t type;
  uint8_t flags;
  uint16_t depth;
  uint32_t count;
  uint64_t next;
};
static_assert(offsetof(RecordHeader, type) == 0);
static_assert(offsetof(RecordHeader, flags) == 1);
static_assert(offsetof(RecordHeader, depth) == 2);
static_assert(offsetof(RecordHeader, count) == 4);
static_assert(offsetof(RecordHeader, next) == 8);
static_assert(sizeof(RecordHeader) == 16);

/// Delta record (see RecordHeader's table).
struct Delta {
  RecordHeader h;
  uint64_t value;
  // key at offset 24 (KeyCodec)
};
static_assert(offsetof(Delta, value) == 16);
static_assert(sizeof(Delta) == 24);

/// Base node header (see RecordHeader's table).
struct Base {
  RecordHeader h;
  uint64_t right;
  uint32_t bytes;
  uint16_t high_off;
  uint16_t high_len;
  // items at offset 32 (KeyCodec)
};
static_assert(offsetof(Base, right) == 16);
static_assert(offsetof(Base, bytes) == 24);
static_assert(offsetof(Base, high_off) == 28);
static_assert(offsetof(Base, high_len) == 30);
static_assert(sizeof(Base) == 32);

/// Counters of the tree's own events (since open), for tests and reports.
struct Events {
  uint64_t consolidations = 0;  ///< chains replaced by a new base
  uint64_t splits = 0;          ///< split deltas published
  uint64_t index_entries = 0;   ///< index-entry deltas published (own or helped)
  uint64_t helped = 0;          ///< of those, posted by a thread that met a split
  uint64_t root_grows = 0;      ///< new roots published
  uint64_t cas_failures = 0;    ///< mapping CASes that lost a race
};

/// Chain statistics of one traversal (verify-time, no concurrent writers).
struct ChainStats {
  uint64_t nodes = 0;            ///< nodes reached
  uint64_t max_depth = 0;        ///< longest delta chain (deltas above a base)
  uint64_t deltas = 0;           ///< delta records in chains
  uint64_t area_deltas = 0;      ///< of those, in their base's delta area
  uint64_t split_deltas = 0;     ///< split deltas still in chains
  uint64_t index_deltas = 0;     ///< index-entry deltas still in chains
  uint64_t unposted_splits = 0;  ///< nodes reached only through a sibling link
};

/// The persistent Bw-Tree over keys K (uint64_t or std::string_view).
/// Created by make_p_bwtree / make_p_bwtree_string.
template <class K>
class PBwTree;

/// Events of a p-bwtree index (nullopt for another index).
template <class K>
std::optional<Events> events_of(const Index<K>& index);
/// Chain statistics of a p-bwtree index (nullopt for another index), with
/// no concurrent writers.
template <class K>
std::optional<ChainStats> chain_stats_of(const Index<K>& index);

/// Tests: when `on`, a thread that splits a node does not post the
/// index entry itself, leaving it to the threads that later move right
/// across the split (helping). False for another index.
template <class K>
bool defer_index_entries(Index<K>& index, bool on);

}  // namespace p_bwtree
}  // namespace nvindex
