// The index interface (DESIGN.md §4): every index design in nvindex implements
// Index<K>, is created by name through make_index<K>(), and describes itself
// through IndexInfo so that the harness runs only what it claims.
//
// Keys: K = uint64_t (compared numerically) or K = std::string_view, a byte
// string of 0..kMaxKeyBytes (255) bytes compared byte-wise as unsigned
// (memcmp over the common length, then the shorter key first: "ab" < "ab\0" <
// "b"), the order of std::string_view's operator<. A string key may hold any
// byte, NUL included. insert(), update() and remove() of a longer key return
// InvalidArgument and change nothing; lookup() of one returns nullopt, and
// scan() and find_last_less_than() compare it like any other key. An index
// takes string keys when its registry entry has a string factory
// (IndexEntry::make_string; caps.string_keys). Values: 8 bytes, every 64-bit
// value including 0 is valid.
//
// Thread-safety: an index whose IndexInfo::caps.thread_safe is true accepts
// concurrent calls of every method from any number of threads (each call is
// linearizable; persistent ones are durably linearizable). Otherwise callers
// must serialize all calls. caps.thread_safe describes an instance: one made
// with IndexOptions::threads = 1 may claim less than one made with more.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "nvindex/status.h"

namespace nvindex {

namespace pm {
class Pool;
}

/// An 8-byte value. Every value is valid, 0 included.
using Value = uint64_t;

/// Longest byte-string key, bytes (a length fits one byte).
inline constexpr size_t kMaxKeyBytes = 255;

/// The key types an index can be instantiated for.
enum class KeyType : uint8_t {
  kInteger,  ///< uint64_t, compared numerically
  kString,   ///< std::string_view of 0..kMaxKeyBytes bytes, compared byte-wise
};
/// "integer" or "string" (the values of `--key-type`).
std::string_view key_type_name(KeyType t);
/// Parses "integer" (also "int") or "string"; InvalidArgument naming the
/// valid values otherwise.
Status parse_key_type(std::string_view text, KeyType* out);

/// The KeyType of K (uint64_t or std::string_view).
template <class K>
inline constexpr KeyType key_type_of =
    std::is_same_v<K, std::string_view> ? KeyType::kString : KeyType::kInteger;

/// True when `key` is a key an index accepts: always for integer keys; for
/// string keys at most kMaxKeyBytes bytes.
inline bool key_fits(uint64_t) { return true; }
inline bool key_fits(std::string_view key) { return key.size() <= kMaxKeyBytes; }

/// The error insert(), update() and remove() return for a string key longer
/// than kMaxKeyBytes: InvalidArgument "<index>: key of N bytes is longer
/// than 255".
Status key_too_long(std::string_view index, std::string_view key);

/// The check insert(), update() and remove() of index `index` start with:
/// Ok for a key that fits (key_fits), else key_too_long(index, key). Inline,
/// so it costs one compare for string keys and nothing for integer keys.
inline Status check_key(std::string_view, uint64_t) { return Status::Ok(); }
inline Status check_key(std::string_view index, std::string_view key) {
  if (key.size() > kMaxKeyBytes) [[unlikely]]
    return key_too_long(index, key);
  return Status::Ok();
}

/// The pool layout name (pm::Pool::layout(), 1..31 bytes) of index `index`
/// instantiated for key type `t`: the index name for integer keys,
/// "<index>:string" for string keys, so a pool of one key type is never
/// opened as the other (check_index_pool refuses it).
std::string pool_layout(std::string_view index, KeyType t);
/// The inverse of pool_layout(): splits a layout into index name and key
/// type ("fastfair:string" -> "fastfair", kString; "fastfair" -> "fastfair",
/// kInteger).
std::pair<std::string_view, KeyType> parse_pool_layout(std::string_view layout);

/// The owned form of a key, as returned by scans: uint64_t for integer keys,
/// std::string for byte-string keys.
template <class K>
struct OwnedKeyOf {
  using type = K;
};
template <>
struct OwnedKeyOf<std::string_view> {
  using type = std::string;
};
template <class K>
using OwnedKey = typename OwnedKeyOf<K>::type;

/// Where an index keeps its nodes.
enum class Placement : uint8_t {
  kDram,       ///< volatile: everything in DRAM, nothing survives a restart
  kPmOnly,     ///< every node in persistent memory
  kSelective,  ///< inner nodes in DRAM (rebuilt on recovery), leaves in PM
  /// nodes (or an external store's files) on a block device or in a file on
  /// a disk's file system, reached by I/O rather than loads and stores
  /// (src/nvme/: PA-Tree; the LevelDB and RocksDB yardsticks). Such an index
  /// is persistent but takes IndexOptions::device, not a pool.
  kBlockDevice,
};

/// What an index supports. The harness skips operations an index does not
/// claim, and every result it gets is checked, so a claim must be true.
struct Capabilities {
  bool ordered = false;  ///< scan() and find_last_less_than() work
  /// survives close/reopen and crashes: in a pool (IndexOptions::pool), or,
  /// with placement kBlockDevice, on a device (IndexOptions::device)
  bool persistent = false;
  bool thread_safe = false;  ///< concurrent calls allowed (see file comment)
  /// has a std::string_view instantiation (IndexEntry::make_string); an
  /// instance reports the same value whatever its key type.
  bool string_keys = false;
  /// bulk_load() builds nodes directly at IndexOptions::fill_factor (false:
  /// the default bulk_load(), one insert() per pair, fill factor ignored).
  bool bulk_load = false;
  Placement placement = Placement::kDram;
  /// execute() keeps several operations of a batch in flight at once (the
  /// PA-Tree engine: one worker thread, operations suspended at their I/O);
  /// false: the default execute(), one operation after another.
  bool async = false;
  /// A PiBench wrapper loaded at run time (`nvindex bench --index
  /// pibench:PATH.so`, pibench/import.h), not one of nvindex's indexes: its
  /// PM writes bypass nvindex's pm layer and its structure and footprint are
  /// its own, so reports print "n/a: plugin" for them, and the crash lab and
  /// TPC-C refuse it. Whatever it keeps persistent is never reopened.
  bool plugin = false;

  bool operator==(const Capabilities&) const = default;
};

/// "dram", "pm-only", "selective", "block-device".
std::string_view placement_name(Placement p);

/// True for an index that lives in a pool of persistent memory: persistent
/// and not on a block device (placement kBlockDevice takes
/// IndexOptions::device instead). The harness, the tests and the crash lab
/// create pools only for these.
inline bool needs_pool(const Capabilities& c) {
  return c.persistent && c.placement != Placement::kBlockDevice;
}
/// True for an index on a block device (placement kBlockDevice): it needs
/// IndexOptions::device.
inline bool needs_device(const Capabilities& c) { return c.placement == Placement::kBlockDevice; }

/// Self-description of an index instance.
struct IndexInfo {
  std::string name;         ///< registry name, e.g. "fastfair"
  std::string description;  ///< one line: design and source paper
  Capabilities caps;
  uint32_t node_size = 0;       ///< bytes per node (0 when not applicable)
  uint64_t dram_bytes = 0;      ///< DRAM in use by the index structure, bytes
  uint64_t pm_bytes = 0;        ///< PM allocated to the index, bytes
  bool recovered = false;       ///< true when opened on an existing pool
  double recovery_seconds = 0;  ///< wall time of that recovery, seconds
  /// Index-specific event counts since the instance opened, name -> count
  /// (e.g. PA-Tree's engine: "engine.ios", "engine.probes"); empty for most
  /// indexes. The bench harness reports each phase's difference.
  std::vector<std::pair<std::string, uint64_t>> counters{};
};

/// Outcome of Index::verify(): the structural check of DESIGN.md §6.
struct VerifyReport {
  uint64_t keys = 0;         ///< live keys found by a full traversal
  uint64_t leaves = 0;       ///< leaf nodes visited
  uint64_t inner_nodes = 0;  ///< inner nodes visited
  uint32_t height = 0;       ///< levels, leaves included (1 = root is a leaf)
  /// Bytes of the PM blocks the traversal reached (allocator class sizes:
  /// nodes, key records, delta records, ...), for an index whose PM is not
  /// just leaves (+ inner nodes) of node_size bytes; 0 when it does not count
  /// them. The crash lab's leak check (crash/oracle.h, check 4) compares it
  /// with the allocator's bytes in use (after the root object's overhead).
  uint64_t pm_bytes = 0;
};

/// Options given to make_index(). Unused fields are ignored by an index that
/// has no such knob; a value out of an index's range is InvalidArgument.
struct IndexOptions {
  /// The pool a persistent index lives in (must outlive the index). Required
  /// when caps.persistent; ignored otherwise. An empty pool (root offset 0)
  /// gets a new index; a pool with a root is recovered.
  pm::Pool* pool = nullptr;
  uint32_t node_size = 512;  ///< bytes per node; each index states its range
  double fill_factor = 1.0;  ///< bulk-load fill of each node's slots, (0, 1]
  /// Worker threads the caller will call the index from. Indexes with a
  /// parallel recovery (lbtree) rebuild with this many threads; an index may
  /// drop its synchronization when it is 1 (absl-btree takes no lock, lbtree
  /// and fastfair read and take no version; each then reports
  /// caps.thread_safe false), so a caller that will call an index
  /// concurrently must pass its number of threads (> 1).
  unsigned threads = 1;
  /// Block-device indexes only (placement kBlockDevice, needs_device()):
  /// where the index keeps its data, a path on a real disk (never tmpfs,
  /// which has no O_DIRECT): a file or a block device for PA-Tree, a
  /// directory for LevelDB and RocksDB. A path that does not exist gets a new
  /// index; an existing one is opened and recovered. Each index documents
  /// what it accepts; a path it cannot use is InvalidArgument. (Its `{}`
  /// keeps designated initializers that skip it, IndexOptions{.extra = ...},
  /// free of -Wmissing-field-initializers.)
  std::string device{};
  /// Block-device indexes only: size of a new store, bytes (a PA-Tree file
  /// is created and preallocated at this size; a block device's own size
  /// wins). 0 = the index's default.
  uint64_t device_bytes = 0;
  /// Index-specific knobs, "name" -> "value" (e.g. from --index-opt k=v).
  std::map<std::string, std::string> extra;
  /// The layout the pool must have (pm::Pool::layout()), for an index that
  /// is one part of a larger structure in a pool named after that structure
  /// (the KV store's crash-lab case, `kv-store-test`); empty: the index's
  /// own, pool_layout(name, key type). A persistent index's factory refuses
  /// a pool of another layout with InvalidArgument.
  std::string pool_layout{};
};

/// One point operation of an Index::execute() batch: its input (kind, key,
/// value) and, once execute() returns, its outcome.
template <class K>
struct BatchOp {
  enum class Kind : uint8_t { kLookup, kInsert, kUpdate, kRemove };
  Kind kind = Kind::kLookup;
  K key{};
  Value value = 0;  ///< insert and update: the value to write
  /// insert, update, remove: what the single call would return (lookup: Ok).
  Status status;
  std::optional<Value> found;  ///< lookup: the value, or nullopt when absent
  /// Time from the operation's submission to its completion, ns (the
  /// default execute(): the call's own time).
  uint64_t latency_ns = 0;
};

/// A key-value index over keys of type K (DESIGN.md §4).
template <class K>
class Index {
 public:
  virtual ~Index() = default;

  /// Inserts key -> value. Ok, or AlreadyExists (nothing changed), or
  /// OutOfSpace (pool full; nothing changed).
  virtual Status insert(K key, Value value) = 0;
  /// Replaces the value of an existing key. Ok, or NotFound.
  virtual Status update(K key, Value value) = 0;
  /// Removes a key. Ok, or NotFound.
  virtual Status remove(K key) = 0;
  /// The value of key, or nullopt when absent.
  virtual std::optional<Value> lookup(K key) = 0;

  /// Ordered indexes only: clears *out, then appends up to `count` pairs with
  /// key >= start in ascending key order; returns how many it appended.
  /// Unordered indexes return 0 and leave *out empty.
  virtual size_t scan(K start, size_t count, std::vector<std::pair<OwnedKey<K>, Value>>* out) = 0;

  /// Ordered indexes only: the largest key strictly less than `key`, with its
  /// value; nullopt when there is none (or the index is unordered).
  virtual std::optional<std::pair<OwnedKey<K>, Value>> find_last_less_than(K key) = 0;

  /// Looks up keys[i] into out[i] for every i (spans of equal length). The
  /// default calls lookup() in a loop; an index may interleave the batch.
  virtual void multi_lookup(std::span<const K> keys, std::span<std::optional<Value>> out) {
    for (size_t i = 0; i < keys.size(); ++i) out[i] = lookup(keys[i]);
  }

  /// Loads `sorted` (keys strictly ascending) into an *empty* index. An index
  /// with caps.bulk_load builds its leaves (and inner nodes) bottom-up, each
  /// filled to IndexOptions::fill_factor of its slots (at least one entry per
  /// node), persisting every node before publishing the whole structure with
  /// one NAW, so a crash during a bulk load leaves the empty index. The
  /// default inserts each pair with insert() (fill factor ignored); it finds
  /// a non-empty index with scan(), or, for an unordered index (no scan),
  /// with verify()'s key count (a walk of the whole index: bulk_load runs
  /// once, on an empty index).
  /// Errors: InvalidArgument (the index is not empty, or keys not strictly
  /// ascending; nothing changed), OutOfSpace (pool full; the index stays
  /// empty for a bottom-up load, holds a prefix of `sorted` for the default),
  /// verify()'s errors for an unordered index whose structure is damaged.
  virtual Status bulk_load(std::span<const std::pair<K, Value>> sorted) {
    bool empty = true;
    if (info().caps.ordered) {
      std::vector<std::pair<OwnedKey<K>, Value>> first;
      empty = scan(K{}, 1, &first) == 0;
    } else {
      VerifyReport r;
      if (Status s = verify(&r); !s.ok()) return s;
      empty = r.keys == 0;
    }
    if (!empty) return Status::InvalidArgument("bulk_load: the index is not empty");
    for (size_t i = 1; i < sorted.size(); ++i) {
      if (!(sorted[i - 1].first < sorted[i].first)) {
        return Status::InvalidArgument("bulk_load: keys not strictly ascending at pair " +
                                       std::to_string(i));
      }
    }
    for (const auto& [key, value] : sorted) {
      if (Status s = insert(key, value); !s.ok()) return s;
    }
    return Status::Ok();
  }

  /// Runs every operation of `ops` and fills in its outcome, returning when
  /// all are complete. The outcome is that of running them one after
  /// another in span order: operations on the same key start in that order,
  /// each after the one before it completed; operations on different keys
  /// may overlap. An index with caps.async keeps up to `window` (>= 1) in
  /// flight at once (PA-Tree: its engine runs them as suspended state
  /// machines, Wang et al., ICDE 2020, §III; its queue_depth bounds them
  /// too); the default runs them one by one, timing each, and ignores
  /// `window`. Errors: each operation's own, in its status (a failed write
  /// does not stop the others).
  virtual void execute(std::span<BatchOp<K>> ops, unsigned window) {
    (void)window;
    for (BatchOp<K>& op : ops) {
      const auto t0 = std::chrono::steady_clock::now();
      switch (op.kind) {
        case BatchOp<K>::Kind::kLookup:
          op.found = lookup(op.key);
          op.status = Status::Ok();
          break;
        case BatchOp<K>::Kind::kInsert:
          op.status = insert(op.key, op.value);
          break;
        case BatchOp<K>::Kind::kUpdate:
          op.status = update(op.key, op.value);
          break;
        case BatchOp<K>::Kind::kRemove:
          op.status = remove(op.key);
          break;
      }
      op.latency_ns = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                std::chrono::steady_clock::now() - t0)
                                                .count());
    }
  }

  /// Makes every operation completed before the call durable, returning
  /// when it is (weak persistence: an index that buffers writes, e.g.
  /// PA-Tree with its read-write buffer, writes its dirty nodes back and
  /// issues fdatasync). An index whose every completed operation is already
  /// durable (every PM index: durable linearizability) returns Ok at once,
  /// the default. Errors: IOError from the device; the index stays usable
  /// and the next sync() tries again.
  virtual Status sync() { return Status::Ok(); }

  /// Name, capabilities, footprint, recovery time.
  virtual IndexInfo info() const = 0;

  /// Checks every structural invariant (keys ordered within and across nodes,
  /// separators bound children, sibling links consistent and acyclic, no
  /// transient state left over) with no concurrent writers. Ok and a filled
  /// report, or Corruption naming the first violation.
  virtual Status verify(VerifyReport* report) const = 0;

  /// Crash-lab ablation notes (issue 3 §4): for each flush or fence site
  /// (pm::Site key, e.g. "fastfair.split.node"; "<key>/flush" or
  /// "<key>/fence" to address one kind only) whose removal the crash lab
  /// (`nvindex crashtest --ablate all`) does not catch, the written reason
  /// why that flush or fence is nonetheless needed or harmlessly redundant.
  /// An uncaught site without a note fails the ablation self-test. Default:
  /// no notes.
  virtual std::vector<std::pair<std::string, std::string>> ablation_notes() const { return {}; }
};

/// Creates (or, on a pool with a root, recovers) the index registered as
/// `name`, for K = uint64_t or K = std::string_view. Errors: InvalidArgument
/// (unknown name: the message lists the known ones; for string keys, an
/// index without string keys: the message lists those with them; a bad
/// option), InvalidArgument (persistent index without a pool),
/// Corruption (the pool holds another index or a damaged one), OutOfSpace.
template <class K>
Status make_index(std::string_view name, const IndexOptions& options,
                  std::unique_ptr<Index<K>>* out);

/// One index-specific option: a key of IndexOptions::extra that an index
/// reads, and every value it accepts. make_index() refuses any other key or
/// value (InvalidArgument naming the valid ones), so a misspelt option never
/// runs the default silently.
struct OptionSpec {
  std::string_view name;                     ///< the key, e.g. "inner"
  std::span<const std::string_view> values;  ///< accepted values; values[0] is the default
  std::string_view meaning;                  ///< one line, for --list-indexes
  /// The values after values[0] take integer keys only: the index's string
  /// factory refuses them on a new pool (InvalidArgument), and the string-key
  /// test cases (registered_string_index_cases) leave them out.
  bool integer_keys_only = false;
  /// The option changes how operations are run (I/O mode, scheduling,
  /// queue depth, the size of a DRAM cache), not what is stored or how: the
  /// conformance suite runs
  /// only its default (registered_index_cases), and the index's own tests
  /// cover the other values.
  bool runtime_only = false;
};

/// One registry entry (src/indexes/registry.cc): what an index is, what it
/// can do and what it accepts, declared once; `nvindex bench --list-indexes`
/// prints it and the registry test checks it against the index itself.
struct IndexEntry {
  std::string_view name;
  std::string_view description;  ///< one line: design and source paper
  /// What an instance made with the default options and
  /// IndexOptions::threads > 1 claims in info().caps (one made with
  /// threads == 1 may claim less: absl-btree, lbtree and fastfair drop
  /// thread_safe).
  Capabilities caps;
  /// Smallest node size (bytes) the index accepts, 0 for an index without
  /// nodes; tests and the crash lab use it to make splits happen within a few
  /// operations.
  uint32_t min_node_size;
  /// The node sizes it accepts, as a person reads them, with the unit
  /// ("128, 256, 512 or 1024 B"; "" without nodes).
  std::string_view node_sizes;
  /// Whether it accepts IndexOptions::node_size `bytes` for a new index
  /// (nullptr without nodes); the factory refuses the others
  /// (InvalidArgument), the tools check first (a usage error).
  bool (*node_size_ok)(uint32_t bytes);
  std::span<const OptionSpec> options;  ///< the IndexOptions::extra keys it reads
  /// The factory for integer keys (make_index<uint64_t>).
  Status (*make)(const IndexOptions&, std::unique_ptr<Index<uint64_t>>*);
  /// The factory for string keys (make_index<std::string_view>), nullptr
  /// when the index has none; caps.string_keys says the same. A persistent
  /// index's string instance lives in a pool of layout
  /// pool_layout(name, KeyType::kString).
  Status (*make_string)(const IndexOptions&, std::unique_ptr<Index<std::string_view>>*) = nullptr;
  /// The node size (bytes) the harness gives this index when the run's
  /// common node size (`nvindex bench --node-size`, default 512) is not one
  /// it accepts, e.g. dash-eh's 16384 B segment; 0 = none (the common size
  /// must then be one it accepts). See run_node_size().
  uint32_t default_node_size = 0;
};

/// The node size a run whose common node size is `common` (bytes) gives the
/// index of `entry`: `common` when the index accepts it or has no nodes,
/// else entry.default_node_size when set, else `common` (which the factory
/// then refuses with InvalidArgument).
inline uint32_t run_node_size(const IndexEntry& entry, uint32_t common) {
  if (entry.node_size_ok == nullptr || entry.node_size_ok(common) || entry.default_node_size == 0) {
    return common;
  }
  return entry.default_node_size;
}

/// True for registry names ending in "-test": indexes that exist only to test
/// the harness and the crash lab (some deliberately broken). They are never in
/// a default benchmark list nor in the per-index test sweeps.
inline bool is_test_only_index(std::string_view name) { return name.ends_with("-test"); }

/// Checks `extra` (IndexOptions::extra) against entry.options: Ok, or
/// InvalidArgument "<index>: unknown option 'k' (options: inner=pm|dram)"
/// (or "(it takes no options)") or "<index>: option k='v' invalid (valid:
/// pm, dram)". make_index() calls it before the factory; the tools call it
/// to report a bad --index-opt as a usage error before any work.
Status check_index_options(const IndexEntry& entry,
                           const std::map<std::string, std::string>& extra);

/// Ok when entry takes node size `bytes` for a new index (or has no nodes),
/// else InvalidArgument "<index>: node size N B invalid (valid: <node_sizes>)".
Status check_node_size(const IndexEntry& entry, uint32_t bytes);

/// entry.options as "k=v1|v2 k2=..." (values[0], the default, first), or ""
/// when it takes none.
std::string option_summary(const IndexEntry& entry);

/// Adds `entry` to the registry (after the built-in indexes of
/// src/indexes/registry.cc), e.g. the test doubles of
/// src/testing/test_indexes.h. Call it at start-up, before other threads use
/// the registry (it is not thread-safe against the other registry calls).
/// It may move the entries: spans from registered_indexes() and pointers
/// from find_index_entry() taken before it are invalid after it.
/// InvalidArgument when the name is taken or the entry has no name or
/// factory.
Status register_index(const IndexEntry& entry);

/// Every registered index, in registration order (all take integer keys;
/// those with caps.string_keys take string keys too).
std::span<const IndexEntry> registered_indexes();

/// The registry entry named `name`, or nullptr.
const IndexEntry* find_index_entry(std::string_view name);

/// The node size (bytes) tests and the crash lab use for `name` so that splits
/// happen within a few operations: its min_node_size, at least 128 (an index
/// without nodes ignores it); 128 for an unknown name.
uint32_t smallest_node_size(std::string_view name);

}  // namespace nvindex
