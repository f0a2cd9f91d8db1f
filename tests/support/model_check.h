// Model-based test helpers shared by every index test: drive any Index<K>
// (K = uint64_t or std::string_view; found by registry name) with random
// operations and check every result against a std::map model,
// single-threaded and multi-threaded.
//
// Nothing here knows about a particular index: it uses only the Index<K>
// interface, IndexInfo capabilities and the registry. Failures are reported
// through GoogleTest (ADD_FAILURE / ASSERT): the single-threaded test stops at
// the first mismatch (with the seed and operation number in the message); the
// concurrent test collects the first mismatches of every thread and reports
// them after joining. The logic is one template on K; what differs between
// the key types is only how keys are made (test_key, string_test_key) and
// printed (show_key).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "nvindex/index.h"
#include "nvindex/pm/counters.h"
#include "nvindex/pm/pool.h"
#include "pm_test_util.h"
#include "util/temp_files.h"

namespace nvindex::testing {

/// An index under test and the pool it lives in (null for volatile indexes
/// and block-device ones), or, for a block-device index (needs_device), the
/// temporary directory on a real disk its store is in (null otherwise:
/// test_device_dir). Members are destroyed index first, then pool, then the
/// directory (removed with its contents).
template <class K>
struct TestIndexOf {
  std::unique_ptr<util::TempDir> device_dir;
  std::unique_ptr<pm::Pool> pool;
  std::unique_ptr<Index<K>> index;
};
using TestIndex = TestIndexOf<uint64_t>;
using StringTestIndex = TestIndexOf<std::string_view>;

/// Default pool size for persistent indexes under test, bytes (256 MiB).
inline constexpr uint64_t kTestPoolBytes = 256ull << 20;

/// A new temporary directory for block-device stores under test:
/// util::temp_device_dir() ($NVINDEX_DEVICE_DIR, else /var/tmp: a real
/// disk, never /dev/shm), removed with its contents when destroyed. Fatal
/// failure (ASSERT) when it cannot be created, so call it through
/// ASSERT_NO_FATAL_FAILURE.
void make_test_device_dir(std::unique_ptr<util::TempDir>* out);

/// Creates the integer-key index registered as `name` with
/// IndexOptions::node_size = node_size (bytes) and IndexOptions::threads =
/// threads (the threads the test will call it from: pass > 1 for a concurrent
/// test, since an index may drop its locks at 1). When the registry says the
/// index needs a pool (needs_pool), first creates an anonymous DRAM pool of
/// pool_bytes bytes with layout pool_layout(name, key type)
/// (Pool::create_anonymous) and passes it in IndexOptions::pool; when it needs
/// a device (needs_device), creates a temporary directory on a real disk
/// (out->device_dir, as make_test_device_dir) and passes the path
/// "<dir>/<name>", which does not exist yet, in IndexOptions::device: the
/// index creates what it needs there (a file for PA-Tree, a directory for
/// LevelDB and RocksDB).
/// Errors: InvalidArgument (unknown name, node size out of the index's range,
/// name too long for a pool layout), and whatever the pool or factory return.
Status open_test_index(std::string_view name, uint32_t node_size, TestIndex* out,
                       uint64_t pool_bytes = kTestPoolBytes, unsigned threads = 1);

/// As above for keys of type K (uint64_t or std::string_view; a string
/// instance needs an entry with make_string, else InvalidArgument) with every
/// option given (options.pool, or options.device, is set here).
/// Errors: as above, and IOError when the device directory cannot be made.
template <class K>
Status open_test_index(std::string_view name, IndexOptions options, TestIndexOf<K>* out,
                       uint64_t pool_bytes = kTestPoolBytes);

/// Single-threaded model test: `ops` random operations (insert, update,
/// remove, lookup, scan, find_last_less_than) with keys in [0, key_space) plus
/// the edge keys 0, 1, UINT64_MAX - 1 and UINT64_MAX, and values including 0
/// and UINT64_MAX, each result compared with a std::map model. Three phases:
/// grow (~45% of ops, mostly inserts: forces splits), mixed (~20%), shrink
/// (~35%, mostly removes of present keys, then removal of all but ~1/16 of
/// the keys: forces merges); then a short regrow. Every ops/16 operations
/// verify() must pass and report as many keys as the model holds; at the end
/// a full scan must equal the model. Scans and find_last_less_than run only
/// when info().caps.ordered. Stops at the first mismatch (fatal failure).
void run_model_test(Index<uint64_t>& idx, uint64_t seed, size_t ops, uint64_t key_space);

/// The same model test for string keys: keys are string_test_key(i) for i
/// in [0, key_space) (1..247 bytes: shared prefixes of 9 and 17 bytes, keys
/// that are prefixes of others or differ only by a trailing NUL, NUL bytes
/// and bytes >= 0x80 inside) plus the edge keys of string_edge_keys() (the
/// empty key, "\0", "\0\0", "a", "a\0", "ab", 255 bytes of 0x00 and of
/// 0xff, ...); find_last_less_than also probes keys next to present ones (a
/// NUL appended, the last byte dropped or incremented). About 1 in 32
/// inserts, updates and removes uses a key of 256..258 bytes instead: it must
/// return InvalidArgument and change nothing (a lookup of it must miss).
/// The model is a std::map<std::string, Value> (unsigned byte-wise order,
/// shorter first on a tie: std::string_view's operator<).
void run_model_test(Index<std::string_view>& idx, uint64_t seed, size_t ops, uint64_t key_space);

/// Multi-threaded test (the index must claim caps.thread_safe). Each of
/// `threads` threads (2..8) owns a disjoint key set (keys == t mod threads,
/// interleaved so that threads share leaves; thread threads-1 also owns
/// UINT64_MAX) of keys_per_thread keys and runs ops_per_thread operations:
/// inserts, updates and removes of its own keys (results must match its own
/// model exactly), lookups of its own keys (exact) and of other threads' keys,
/// scans and find_last_less_than (ordered indexes). Every value encodes its
/// key (upper 32 bits = a hash of the key), so a reader checks that each value
/// it sees was written for that key. Threads first grow, then shrink their key
/// sets. Afterwards the index must equal the union of the models exactly
/// (lookups and a full scan), and verify() must pass.
void run_concurrent_test(Index<uint64_t>& idx, unsigned threads, uint64_t seed,
                         size_t ops_per_thread = 20000, uint64_t keys_per_thread = 2048);

/// The same concurrent test for string keys: key i is string_test_key(i)
/// (owner i mod threads, as above), and thread threads-1 also owns the empty
/// key (in place of UINT64_MAX).
void run_concurrent_test(Index<std::string_view>& idx, unsigned threads, uint64_t seed,
                         size_t ops_per_thread = 20000, uint64_t keys_per_thread = 2048);

/// The i-th key of the string model tests (injective in i, not ordered by
/// i): one of eight shapes chosen by i mod 8, 1..247 bytes, listed at
/// run_model_test. Never equal to an edge key.
std::string string_test_key(uint64_t i);

/// The edge keys of the string model tests: the empty key, "\0", "\0\0",
/// "\x01", "a", "a\0", "ab", "\xff", 254 and 255 bytes of 0xff, 255 bytes
/// of 0x00.
const std::vector<std::string>& string_edge_keys();

/// An order-preserving key of type K for integer i (test_key<K>(a) <
/// test_key<K>(b) exactly when a < b), so a test written with integers runs
/// for both key types: i itself for uint64_t; for strings the 17-byte
/// prefix "nvindex/test/key/", i as 8 bytes big-endian (NUL bytes and
/// bytes >= 0x80 inside), then i mod 3 bytes more (26..27 bytes).
template <class K>
OwnedKey<K> test_key(uint64_t i);
template <>
uint64_t test_key<uint64_t>(uint64_t i);
template <>
std::string test_key<std::string_view>(uint64_t i);

/// A key for messages: the number, or the bytes of a string key with
/// non-printable ones as \xNN (the first 40, then "...") and its length.
std::string show_key(uint64_t key);
std::string show_key(std::string_view key);

/// A string key for per-index tests: one of four prefixes (40 bytes of 'p',
/// the same plus "q", 39 'p' and 0xff, or none) chosen by r % 4, then the
/// base-7 digits of r / 4 as bytes 'a'..'f' and 0x00: long shared prefixes,
/// keys that are prefixes of one another, bytes 0x00 and 0xff, the empty key
/// (r = 3). Distinct r give distinct keys.
std::string prefixed_key(uint64_t r);

/// n inserts of prefixed_key(rng() % space) into `idx` and `model`, value
/// the insert's number: each is Ok for a key new to the model and
/// AlreadyExists otherwise (fatal failure else). `rng` goes on from where
/// it is, for the caller's later draws.
void insert_random_prefixed_keys(Index<std::string_view>& idx, std::mt19937_64& rng, uint64_t n,
                                 uint64_t space, std::map<std::string, Value>* model);

/// Writers and an optimistic reader racing on string keys, for indexes that
/// free removed keys' records: `writers` threads insert prefixed_key(i *
/// writers + w) -> i for i < per, then remove the even i; meanwhile one
/// reader scans 50 keys from 40 bytes of 'p' (each result ascending), looks
/// up prefixed_key(17) and asks find_last_less_than(prefixed_key(33)), so it
/// dereferences records of keys being removed. Afterwards the index must
/// equal the model of the odd i (expect_equals_model). Every operation's
/// result is checked (gtest failures).
void run_string_readers_race_removes(Index<std::string_view>& idx, int writers, uint64_t per);

}  // namespace nvindex::testing

namespace nvindex::testing {

/// A persistent index in a pool file under /dev/shm, for tests that close and
/// reopen a pool or damage its bytes, for keys of type K. The pool layout is
/// pool_layout(index, key type). The path is pm::testing::TempPool's
/// (unique to this process, test and tag); the file is removed before first
/// use and on destruction. Members are destroyed index
/// first, then pool, so destroying a FileIndexOf is a clean close.
/// A block-device index (needs_device) lives instead at path() =
/// "<dir>/<index>" in a temporary directory on a real disk
/// (make_test_device_dir, removed on destruction), given as
/// IndexOptions::device; create() and reopen() open it there, `pool` stays
/// null, open_pool() and crash() do not apply (InvalidArgument / a plain
/// close).
template <class K>
class FileIndexOf {
 public:
  /// `index` is the registry name; `tag` distinguishes several files in one
  /// test.
  explicit FileIndexOf(std::string index, const std::string& tag = "p");
  ~FileIndexOf();
  FileIndexOf(const FileIndexOf&) = delete;
  FileIndexOf& operator=(const FileIndexOf&) = delete;

  /// Creates the pool file (pool_bytes bytes, emulated mode) and a new index
  /// with `options` (its pool field is set here); for a block-device index,
  /// a new index at path() (options.device set here; pool_bytes unused:
  /// options.device_bytes is the store's size). Errors: those of
  /// pm::Pool::create and make_index; IOError when the device directory
  /// cannot be made.
  Status create(IndexOptions options, uint64_t pool_bytes = 32ull << 20);
  /// Closes (index, then pool: a clean close), reopens the pool file and
  /// recovers the index with `options` (pool set here). Errors: those of
  /// pm::Pool::open and make_index; on error `index` is null and `pool` is
  /// the opened pool (or null when the pool did not open).
  Status reopen(IndexOptions options = {});
  /// Reopens only the pool (no index): to inspect or damage its bytes.
  Status open_pool();
  /// Destroys the index, then the pool.
  void close();
  /// Closes like a crash would as far as the pool can tell: the pool is
  /// left "not clean" and without a close record (Pool::keep_unclean), so
  /// the next open recovers it as after a crash. For tests that build a
  /// crash state by hand.
  void crash();
  const std::string& path() const { return device_ ? device_path_ : file_.path(); }
  const std::string& name() const { return name_; }
  /// True for a block-device index (see the class comment).
  bool on_device() const { return device_; }

  std::unique_ptr<pm::Pool> pool;
  std::unique_ptr<Index<K>> index;

 private:
  /// Creates the device directory on first use (block-device index).
  Status ensure_device_dir();

  std::string name_;
  pm::testing::TempPool file_;
  bool device_ = false;
  std::unique_ptr<util::TempDir> device_dir_;
  std::string device_path_;
};
/// The integer-key and string-key FileIndexOf (classes, not aliases, so a
/// test may derive from them and name the base).
class FileIndex : public FileIndexOf<uint64_t> {
 public:
  using FileIndexOf::FileIndexOf;
};
class StringFileIndex : public FileIndexOf<std::string_view> {
 public:
  using FileIndexOf::FileIndexOf;
};

/// A string-key tree of registered name `index` and concrete type Tree
/// (lbtree::LbTreeString, fptree::FpTreeString) in a 64 MiB pool file, for
/// the per-index tests of what string keys add.
template <class Tree>
class StringTreeFile : public StringFileIndex {
 public:
  explicit StringTreeFile(std::string index, const std::string& tag = "s")
      : StringFileIndex(std::move(index), tag) {}
  /// A new tree with nodes of node_size bytes (StringFileIndex::create),
  /// for `threads` calling threads (IndexOptions::threads: a test that races
  /// threads on it must pass their number).
  Status create(uint32_t node_size, unsigned threads = 1) {
    IndexOptions o;
    o.node_size = node_size;
    o.threads = threads;
    return StringFileIndex::create(o, 64ull << 20);
  }
  /// The open index as its concrete type.
  Tree& tree() const { return dynamic_cast<Tree&>(*index); }
};

/// Checks that `idx` holds exactly `model`: verify() passes with
/// report.keys == model.size(), every model key looks up its value, and (for
/// ordered indexes) a full scan equals the model. Fatal failure on the first
/// difference. run_model_test's final check is this one.
void expect_equals_model(Index<uint64_t>& idx, const std::map<uint64_t, Value>& model);
void expect_equals_model(Index<std::string_view>& idx, const std::map<std::string, Value>& model);

/// PM counters of an insert, averaged: flushes, 64 B lines flushed, fences.
struct InsertCost {
  double flushes = 0;
  double lines = 0;
  double fences = 0;
};

/// The per-insert PM cost of the index registered as `name`, integer keys
/// against 24-byte string keys (the string-key docs quote it): inserts n
/// keys in one pseudo-random order (i * 7919 mod n, n coprime to 7919) into
/// a new integer instance (keys k * 0x9e3779b97f4a7c15) and a new string
/// instance (YCSB's form, "user" + the same integer as 20 decimal digits) at
/// node_size bytes, in 64 MiB pools; fills *ints and *strs and prints both
/// ("per insert: ..."). Fatal failure if an index does not open or an
/// insert fails.
void measure_insert_cost(std::string_view name, uint32_t node_size, uint64_t n, InsertCost* ints,
                         InsertCost* strs);

/// For an index whose string slots hold a key record's offset where integer
/// slots hold the key (lbtree, fptree): measure_insert_cost over 20,000 keys
/// at node_size bytes, and expects the string insert to cost exactly the
/// record's line and fence more (within 0.05 per insert: the two runs split
/// alike but not identically).
void expect_record_costs_one_line_and_fence(std::string_view name, uint32_t node_size);

/// One configuration of a registered index the conformance suite runs: a
/// node size the registry entry allows (0 for an index without nodes), index
/// options (empty = the defaults; otherwise one non-default value of one
/// declared option) and the key type. `label` names it in test names, e.g.
/// "wbtree_512B_inner_dram" (the key type is in the instantiation name).
struct IndexCase {
  std::string name;
  uint32_t node_size = 0;
  std::map<std::string, std::string> extra;
  std::string label;
  KeyType key_type = KeyType::kInteger;
};

/// Every integer-key configuration of every registered index except the test
/// doubles (is_test_only_index): each node size in {128, 256, 512, 768, 1024,
/// 2048, 4096} B that the entry's node_size_ok accepts (one case with node
/// size 0 when the entry has no nodes), each with the default options; and
/// each non-default value of each declared option at the entry's smallest and
/// largest accepted size. Under a sanitizer (ASan, TSan builds): only the
/// smallest size, with the option values there. Options declared
/// runtime_only: their default only. A block-device index: the smallest and
/// largest size, option values at the smallest (under a sanitizer the
/// smallest size only).
std::vector<IndexCase> registered_index_cases();

/// registered_index_cases() of the persistent indexes only.
std::vector<IndexCase> persistent_index_cases();

/// The same configurations of the indexes that take string keys
/// (caps.string_keys), with key_type kString, but for the non-default values
/// of options declared integer_keys_only (fastfair's inner=dram).
std::vector<IndexCase> registered_string_index_cases();

/// registered_string_index_cases() of the persistent indexes only.
std::vector<IndexCase> persistent_string_index_cases();

/// Prints a case by its label (test parameter names in failure messages).
void PrintTo(const IndexCase& c, std::ostream* os);

/// IndexOptions for `c`: node size (512 when c.node_size is 0, which an index
/// without nodes ignores), extra options and threads; no pool.
IndexOptions options_for(const IndexCase& c, unsigned threads = 1);

}  // namespace nvindex::testing
