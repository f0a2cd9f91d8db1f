// libnvindex_pibench.so: nvindex's indexes as a PiBench plugin (PiBench,
// Lersch et al., VLDB 2020; the ABI in pibench/tree_api.h). PiBench dlopens
// the library and calls create_tree(options); the tree it gets is one index
// made by make_index() (nvindex/index.h), chosen by the environment:
//
//   NVINDEX_PIBENCH_INDEX      the index as `nvindex bench --index` takes it,
//                              name[:k=v[;k=v]] (node_size=N among the
//                              options), e.g. "fastfair:inner=dram" or
//                              "lbtree:node_size=256"; default "lbtree"
//   NVINDEX_PIBENCH_PM         PM mode of the pool: emulated (default), dax,
//                              dram (flush and fence do nothing)
//   NVINDEX_PIBENCH_POOL_SIZE  pool bytes when tree_options_t::pool_size is
//                              0 (e.g. 4G; default 1G)
//   NVINDEX_PIBENCH_PREFAULT   1 (default): a pool file's pages are all
//                              mapped before create_tree returns
//                              (pm::Pool::prefault); 0: not
//   NVINDEX_PIBENCH_QUIET      set: no line on stderr naming what was made
//
// Keys of tree_options_t::key_size 8 are the index's integer keys (the 8
// bytes read as a uint64_t in host byte order, PiBench's own encoding);
// any other key size (1..255) makes a string-key index, keys compared as
// bytes. Values of value_size 1..8 bytes are held in the 8-byte Value
// (zero-padded); a longer value_size is refused at create_tree (nullptr, a
// message on stderr), as is an unknown index, a bad option, or a pool that
// cannot be made, recovered or prefaulted. A persistent index lives in a pool:
// tree_options_t::pool_path when set (an existing pool file is recovered, a
// missing one created with pool_size bytes), else a temporary pool in
// /dev/shm (else $TMPDIR, else /tmp; a path no file has) that the library
// removes when the tree is deleted or the process exits normally (a crash
// or a kill leaves it).
// tree_options_t::num_threads is IndexOptions::threads. The PM mode is set
// by the first create_tree of a process (the PM layer is configured once);
// a later NVINDEX_PIBENCH_PM is ignored, and the line on stderr says the
// mode in force.
//
// The library holds its own copy of the PM layer and the indexes, compiled
// with hidden visibility: only create_tree is exported, so it never clashes
// with another copy of nvindex in the process (nvindex bench importing this
// very plugin, for one).
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "nvindex/index.h"
#include "nvindex/pm/persist.h"
#include "nvindex/pm/pool.h"
#include "pibench/import.h"
#include "pibench/tree_api.h"
#include "tools/index_opts.h"
#include "util/byte_size.h"
#include "util/temp_files.h"

namespace nvindex::pibench {
namespace {

/// Pool bytes when neither tree_options_t::pool_size nor
/// NVINDEX_PIBENCH_POOL_SIZE says: 1 GiB (Pool::create allocates the whole
/// file, posix_fallocate: on tmpfs that much memory).
constexpr uint64_t kDefaultPoolBytes = 1ull << 30;

/// Temporary pool files still in use, removed at a normal exit (a static
/// destructor: PiBench may end without deleting its tree) or by the tree's
/// destructor.
struct TempPools {
  std::mutex mu;
  std::set<std::string> paths;
  ~TempPools() {
    for (const std::string& p : paths) ::unlink(p.c_str());
  }
};
TempPools& temp_pools() {
  static TempPools t;
  return t;
}

/// Forgets a temporary pool: removes the file and its entry in temp_pools().
void forget_temp_pool(const std::string& path) {
  ::unlink(path.c_str());
  std::lock_guard<std::mutex> g(temp_pools().mu);
  temp_pools().paths.erase(path);
}

void complain(const std::string& what) {
  std::fprintf(stderr, "libnvindex_pibench: %s\n", what.c_str());
}

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : std::string(fallback);
}

/// Value of `sz` (1..8) bytes at `p`, zero-padded to 8 (host byte order).
Value read_value(const char* p, size_t sz) {
  Value v = 0;
  std::memcpy(&v, p, std::min<size_t>(sz, sizeof v));
  return v;
}

/// Key as the index takes it: 8 bytes read as a uint64_t, or the bytes.
template <class K>
K read_key(const char* p, size_t sz);
template <>
uint64_t read_key<uint64_t>(const char* p, size_t sz) {
  uint64_t k = 0;
  std::memcpy(&k, p, std::min<size_t>(sz, sizeof k));
  return k;
}
template <>
std::string_view read_key<std::string_view>(const char* p, size_t sz) {
  return {p, sz};
}

/// Writes a scanned key at `at` in `key_size` bytes: an integer key's 8
/// bytes, a string key's bytes zero-padded (a longer one cut: PiBench's
/// slots are fixed).
void put_key(char* at, uint64_t k, size_t) { std::memcpy(at, &k, sizeof k); }
void put_key(char* at, const std::string& k, size_t key_size) {
  const size_t n = std::min(key_size, k.size());
  std::memcpy(at, k.data(), n);
  std::memset(at + n, 0, key_size - n);
}

/// A PiBench tree over one nvindex index of key type K, owning its pool
/// (null for a volatile index). Thread-safety: the index's (PiBench calls
/// from num_threads threads; IndexOptions::threads says so to the index).
template <class K>
class IndexTree final : public tree_api {
 public:
  IndexTree(std::unique_ptr<pm::Pool> pool, std::unique_ptr<Index<K>> index,
            const tree_options_t& o, std::string temp_path)
      : pool_(std::move(pool)),
        index_(std::move(index)),
        key_size_(o.key_size),
        value_size_(o.value_size),
        temp_path_(std::move(temp_path)) {}

  ~IndexTree() override {
    index_.reset();
    pool_.reset();  // a clean close: the next open recovers without a crash
    if (!temp_path_.empty()) forget_temp_pool(temp_path_);
  }

  bool find(const char* key, size_t sz, char* value_out) override {
    const std::optional<Value> v = index_->lookup(read_key<K>(key, sz));
    if (!v) return false;
    std::memcpy(value_out, &*v, std::min(value_size_, sizeof(Value)));
    return true;
  }

  bool insert(const char* key, size_t key_sz, const char* value, size_t value_sz) override {
    if (value_sz > sizeof(Value)) return too_long(value_sz);
    const Status s = index_->insert(read_key<K>(key, key_sz), read_value(value, value_sz));
    if (s.code() == Code::kOutOfSpace) report_once(&full_said_, s.ToString());
    return s.ok();
  }

  bool update(const char* key, size_t key_sz, const char* value, size_t value_sz) override {
    if (value_sz > sizeof(Value)) return too_long(value_sz);
    return index_->update(read_key<K>(key, key_sz), read_value(value, value_sz)).ok();
  }

  bool remove(const char* key, size_t key_sz) override {
    return index_->remove(read_key<K>(key, key_sz)).ok();
  }

  /// The pairs land in this thread's buffer (valid until its next scan of
  /// any tree), key_size + value_size bytes each.
  int scan(const char* key, size_t key_sz, int scan_sz, char*& values_out) override {
    // One thread_local (one TLS lookup in a shared library) for both.
    struct Buffers {
      std::vector<std::pair<OwnedKey<K>, Value>> pairs;
      std::vector<char> bytes;
    };
    thread_local Buffers b;
    const size_t n =
        index_->scan(read_key<K>(key, key_sz), scan_sz > 0 ? size_t(scan_sz) : 0, &b.pairs);
    const size_t stride = key_size_ + value_size_;
    if (b.bytes.size() < n * stride) b.bytes.resize(n * stride);
    char* at = b.bytes.data();
    for (size_t i = 0; i < n; ++i, at += stride) {
      put_key(at, b.pairs[i].first, key_size_);
      std::memcpy(at + key_size_, &b.pairs[i].second, value_size_);  // value_size_ <= 8
    }
    values_out = b.bytes.data();
    return static_cast<int>(n);
  }

 private:
  bool too_long(size_t value_sz) {
    report_once(&long_said_, "a value of " + std::to_string(value_sz) +
                                 " bytes is longer than 8: refused (nvindex values are 8 bytes)");
    return false;
  }
  static void report_once(std::atomic<bool>* said, const std::string& what) {
    if (!said->exchange(true)) complain(what);
  }

  std::unique_ptr<pm::Pool> pool_;
  std::unique_ptr<Index<K>> index_;
  size_t key_size_;
  size_t value_size_;
  std::string temp_path_;  ///< a temporary pool file to remove, or ""
  std::atomic<bool> full_said_{false};
  std::atomic<bool> long_said_{false};
};

/// The pool of a persistent index: in PM mode dram an anonymous one of
/// `bytes` (nothing persists); else opened (recovered) when `path` exists,
/// else created with `bytes`. Errors of pm::Pool::open / create /
/// create_anonymous.
Status open_pool(const std::string& path, uint64_t bytes, const std::string& layout, pm::Mode mode,
                 std::unique_ptr<pm::Pool>* out) {
  if (mode == pm::Mode::kDram) return pm::Pool::create_anonymous(bytes, layout, out);
  if (::access(path.c_str(), F_OK) == 0) return pm::Pool::open(path, layout, mode, out);
  return pm::Pool::create(path, bytes, layout, mode, out);
}

/// The tree of create_tree over keys K: the index `spec` names on its pool
/// (open_pool; prefaulted when `prefault` and the pool is a file), or
/// nullptr with the reason on stderr (the pool's errors, make_index's).
template <class K>
tree_api* create(const tree_options_t& o, const tools::IndexSpec& spec, const IndexEntry& entry,
                 pm::Mode mode, bool prefault) {
  IndexOptions io;
  io.node_size = spec.node_size != 0 ? spec.node_size : run_node_size(entry, 512);
  io.extra = spec.extra;
  io.threads = o.num_threads > 0 ? static_cast<unsigned>(o.num_threads) : 1;
  std::unique_ptr<pm::Pool> pool;
  std::string temp_path;
  if (needs_device(entry.caps)) {
    complain(spec.label + " lives on a block device, which this plugin does not set up");
    return nullptr;
  }
  if (needs_pool(entry.caps)) {
    uint64_t bytes = o.pool_size;
    if (bytes == 0) {
      bytes = kDefaultPoolBytes;
      if (const char* s = std::getenv("NVINDEX_PIBENCH_POOL_SIZE"); s != nullptr && *s != '\0') {
        if (Status st = util::parse_byte_size(s, &bytes); !st.ok()) {
          complain("NVINDEX_PIBENCH_POOL_SIZE: " + st.ToString());
          return nullptr;
        }
      }
    }
    std::string path = o.pool_path;
    if (path.empty()) {
      path = util::fresh_temp_path("nvindex-pibench");
      temp_path = path;
    }
    const std::string layout = pool_layout(spec.name, key_type_of<K>);
    if (Status st = open_pool(path, bytes, layout, mode, &pool); !st.ok()) {
      complain("pool " + path + ": " + st.ToString());
      return nullptr;
    }
    if (!temp_path.empty()) {
      std::lock_guard<std::mutex> g(temp_pools().mu);
      temp_pools().paths.insert(temp_path);
    }
    // Prefaulted as the authors' wrappers do to their pools in their
    // create_tree (pm::Pool::prefault): PiBench times what follows.
    if (Status st = prefault && mode != pm::Mode::kDram ? pool->prefault() : Status::Ok();
        !st.ok()) {
      complain("pool " + path + ": " + st.ToString());
      pool.reset();
      if (!temp_path.empty()) forget_temp_pool(temp_path);
      return nullptr;
    }
    io.pool = pool.get();
  }
  std::unique_ptr<Index<K>> index;
  if (Status st = make_index<K>(spec.name, io, &index); !st.ok()) {
    complain(spec.label + ": " + st.ToString());
    pool.reset();
    if (!temp_path.empty()) forget_temp_pool(temp_path);
    return nullptr;
  }
  if (std::getenv("NVINDEX_PIBENCH_QUIET") == nullptr) {
    const IndexInfo info = index->info();
    std::fprintf(
        stderr, "libnvindex_pibench: %s (%s keys, node %u B, %u threads, PM mode %s)%s%s%s\n",
        spec.label.c_str(), std::string(key_type_name(key_type_of<K>)).c_str(), info.node_size,
        io.threads, std::string(pm::mode_name(mode)).c_str(), pool ? ", pool " : "",
        pool ? pool->path().c_str() : "", info.recovered ? " (recovered)" : "");
  }
  return new IndexTree<K>(std::move(pool), std::move(index), o, std::move(temp_path));
}

}  // namespace
}  // namespace nvindex::pibench

/// PiBench's entry point (pibench/tree_api.h): a tree over the index
/// NVINDEX_PIBENCH_INDEX names (see the file comment), or nullptr with the
/// reason on stderr: an unknown index or bad option, a string-key size
/// (key_size other than 8) the index does not take or over 255 bytes, a
/// key_size or value_size of 0, a value_size over 8 bytes, a bad
/// NVINDEX_PIBENCH_PM, NVINDEX_PIBENCH_POOL_SIZE or NVINDEX_PIBENCH_PREFAULT,
/// a pool that cannot be created, recovered or prefaulted (pm::Pool's
/// errors).
extern "C" __attribute__((visibility("default"))) nvindex::pibench::tree_api* create_tree(
    const nvindex::pibench::tree_options_t& o) {
  using namespace nvindex;
  using namespace nvindex::pibench;
  if (o.key_size == 0 || o.key_size > kMaxKeyBytes) {
    complain("key_size " + std::to_string(o.key_size) + " invalid (1.." +
             std::to_string(kMaxKeyBytes) + " bytes)");
    return nullptr;
  }
  if (o.value_size == 0 || o.value_size > sizeof(Value)) {
    complain("value_size " + std::to_string(o.value_size) +
             " invalid: nvindex values are 1..8 bytes (PiBench's -v 8)");
    return nullptr;
  }
  const std::string index = env_or("NVINDEX_PIBENCH_INDEX", "lbtree");
  if (is_plugin_spec(index)) {
    complain("NVINDEX_PIBENCH_INDEX: " + index + " is a PiBench wrapper, not an nvindex index");
    return nullptr;
  }
  tools::IndexSpec spec;
  if (Status st = tools::parse_index_spec(index, &spec); !st.ok()) {
    complain("NVINDEX_PIBENCH_INDEX: " + st.ToString());
    return nullptr;
  }
  const IndexEntry& entry = *find_index_entry(spec.name);
  if (Status st = check_index_options(entry, spec.extra); !st.ok()) {
    complain("NVINDEX_PIBENCH_INDEX: " + st.ToString());
    return nullptr;
  }
  pm::Mode mode = pm::Mode::kEmulated;
  if (Status st = pm::parse_mode(env_or("NVINDEX_PIBENCH_PM", "emulated"), &mode);
      !st.ok() || mode == pm::Mode::kCrashSim) {
    complain("NVINDEX_PIBENCH_PM: " + (st.ok() ? "crash-sim is for tests" : st.ToString()) +
             " (valid: emulated, dax, dram)");
    return nullptr;
  }
  // The first create_tree configures the PM layer; the mode it set stays.
  static const pm::Mode configured = [mode] {
    pm::PersistConfig c;
    c.mode = mode;
    pm::configure(c);
    return mode;
  }();
  mode = configured;
  const std::string prefault = env_or("NVINDEX_PIBENCH_PREFAULT", "1");
  if (prefault != "0" && prefault != "1") {
    complain("NVINDEX_PIBENCH_PREFAULT must be 0 or 1, got '" + prefault + "'");
    return nullptr;
  }
  if (o.key_size == sizeof(uint64_t)) {
    return create<uint64_t>(o, spec, entry, mode, prefault == "1");
  }
  if (entry.make_string == nullptr) {
    complain(spec.name + " takes 8-byte integer keys only, not key_size " +
             std::to_string(o.key_size));
    return nullptr;
  }
  return create<std::string_view>(o, spec, entry, mode, prefault == "1");
}
