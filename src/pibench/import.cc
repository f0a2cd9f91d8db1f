// PiBench wrappers as indexes of the harness (import.h).
#include "pibench/import.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "nvindex/index.h"
#include "pibench/tree_api.h"
#include "util/byte_size.h"
#include "util/kv_list.h"
#include "util/quote.h"
#include "util/temp_files.h"

namespace nvindex::pibench {
namespace {

/// Default tree_options_t::pool_size given to a wrapper, bytes.
constexpr uint64_t kDefaultPoolBytes = 1ull << 30;
/// How long the probe's child may take, s.
constexpr int kProbeSeconds = 10;

/// One registered wrapper: what its factory slot makes.
struct Plugin {
  std::string text;  ///< the --index entry that registered it
  std::string path;
  std::string name;  ///< registry name (file name[:options])
  std::string description;
  void* handle = nullptr;  ///< dlopen handle, never closed (indexes may outlive a run)
  create_tree_fn create = nullptr;
  bool ordered = true;
  uint64_t pool_bytes = kDefaultPoolBytes;
  /// Value bits the wrapper holds (value_bits=N, 32..64): values go in
  /// shifted right by 64 - N bits and come back shifted left.
  unsigned value_bits = 64;
  /// scan_keys=swapped: the wrapper's scan returns keys byte-swapped.
  bool swap_scan_keys = false;
};

/// Registered wrappers by slot; a deque keeps the strings an IndexEntry
/// points at in place.
std::deque<Plugin>& plugins() {
  static std::deque<Plugin> p;
  return p;
}

/// Little-endian (host) 8-byte key and value bytes.
std::array<char, 8> bytes_of(uint64_t x) {
  std::array<char, 8> b;
  std::memcpy(b.data(), &x, 8);
  return b;
}
uint64_t from_bytes(const char* p) {
  uint64_t x;
  std::memcpy(&x, p, 8);
  return x;
}

/// A temporary pool path for a wrapper that names nothing yet
/// (util::fresh_temp_path): nvindex-plugin-<pid>-<n>.pool.
std::string temp_pool_path() { return util::fresh_temp_path("nvindex-plugin"); }

/// An Index<uint64_t> over one wrapper's tree (import.h). Thread-safety:
/// the wrapper's; it was told IndexOptions::threads as num_threads.
class PluginIndex final : public Index<uint64_t> {
 public:
  PluginIndex(const Plugin& p, tree_api* tree, std::string pool_path,
              std::unique_ptr<util::RemoveOnSignal> remove)
      : plugin_(p), tree_(tree), pool_path_(std::move(pool_path)), remove_(std::move(remove)) {}

  ~PluginIndex() override {
    delete tree_;
    // The wrapper may have made a file or a directory there.
    util::detail::remove_tree(pool_path_.c_str());
  }

  Status insert(uint64_t key, Value value) override {
    const auto k = bytes_of(key);
    const auto v = bytes_of(value >> shift_);
    if (tree_->insert(k.data(), 8, v.data(), 8)) return Status::Ok();
    return Status::AlreadyExists("the wrapper's insert returned false");
  }
  Status update(uint64_t key, Value value) override {
    const auto k = bytes_of(key);
    const auto v = bytes_of(value >> shift_);
    if (tree_->update(k.data(), 8, v.data(), 8)) return Status::Ok();
    return Status::NotFound("the wrapper's update returned false");
  }
  Status remove(uint64_t key) override {
    const auto k = bytes_of(key);
    if (tree_->remove(k.data(), 8)) return Status::Ok();
    return Status::NotFound("the wrapper's remove returned false");
  }
  std::optional<Value> lookup(uint64_t key) override {
    const auto k = bytes_of(key);
    char v[8] = {};
    if (!tree_->find(k.data(), 8, v)) return std::nullopt;
    return from_bytes(v) << shift_;
  }
  size_t scan(uint64_t start, size_t count, std::vector<std::pair<uint64_t, Value>>* out) override {
    out->clear();
    if (!plugin_.ordered || count == 0) return 0;
    const auto k = bytes_of(start);
    char* pairs = nullptr;
    const int n =
        tree_->scan(k.data(), 8, static_cast<int>(std::min<size_t>(count, INT32_MAX)), pairs);
    // A wrapper that returns more than it was asked for, or a negative
    // count, gets its answer cut: the harness checks what is returned.
    const size_t got = n <= 0 || pairs == nullptr ? 0 : std::min<size_t>(size_t(n), count);
    out->reserve(got);
    for (size_t i = 0; i < got; ++i) {
      const uint64_t key = from_bytes(pairs + 16 * i);
      out->emplace_back(plugin_.swap_scan_keys ? __builtin_bswap64(key) : key,
                        from_bytes(pairs + 16 * i + 8) << shift_);
    }
    return got;
  }
  /// Not in PiBench's ABI: always nullopt (TPC-C refuses plugins).
  std::optional<std::pair<uint64_t, Value>> find_last_less_than(uint64_t) override {
    return std::nullopt;
  }
  IndexInfo info() const override {
    IndexInfo i;
    i.name = plugin_.name;
    i.description = plugin_.description;
    i.caps = caps_of(plugin_);
    return i;
  }
  /// Counts the keys by scans of 256 from key 0, each next scan from the
  /// last key + 1, and checks they ascend strictly: Corruption naming the
  /// first pair out of order. NotSupported with scan=no.
  Status verify(VerifyReport* report) const override {
    *report = {};
    if (!plugin_.ordered) {
      return Status::NotSupported(plugin_.name + ": scan=no, so the keys cannot be counted");
    }
    std::vector<std::pair<uint64_t, Value>> chunk;
    uint64_t from = 0;
    std::optional<uint64_t> last;
    for (;;) {
      const size_t n = const_cast<PluginIndex*>(this)->scan(from, 256, &chunk);
      for (const auto& [k, v] : chunk) {
        if (last && k <= *last) {
          return Status::Corruption(plugin_.name + ": scan returned key " + std::to_string(k) +
                                    " after " + std::to_string(*last));
        }
        last = k;
        ++report->keys;
      }
      if (n < 256 || *last == UINT64_MAX) break;
      from = *last + 1;
    }
    return Status::Ok();
  }

  static Capabilities caps_of(const Plugin& p) {
    return Capabilities{.ordered = p.ordered, .thread_safe = true, .plugin = true};
  }

 private:
  const Plugin& plugin_;
  const unsigned shift_ = 64 - plugin_.value_bits;  ///< value_bits' shift, 0..32
  tree_api* tree_;
  std::string pool_path_;
  std::unique_ptr<util::RemoveOnSignal> remove_;  ///< pool_path_ (file or directory) on Ctrl-C
};

/// The factory of slot I: one function per slot, since IndexEntry::make
/// takes no context. Errors: InvalidArgument when create_tree returns
/// nullptr.
Status make_plugin(size_t slot, const IndexOptions& o, std::unique_ptr<Index<uint64_t>>* out) {
  const Plugin& p = plugins()[slot];
  tree_options_t to;
  to.key_size = 8;
  to.value_size = 8;
  to.pool_path = temp_pool_path();
  to.pool_size = p.pool_bytes;
  to.num_threads = o.threads > 0 ? o.threads : 1;
  // Registered before create_tree, which may take long to make the pool.
  auto remove = std::make_unique<util::RemoveOnSignal>(to.pool_path, true);
  tree_api* tree = p.create(to);
  if (tree == nullptr) {
    util::detail::remove_tree(to.pool_path.c_str());
    return Status::InvalidArgument(p.name + ": the wrapper's create_tree returned nullptr");
  }
  *out = std::make_unique<PluginIndex>(p, tree, to.pool_path, std::move(remove));
  return Status::Ok();
}
template <size_t I>
Status make_slot(const IndexOptions& o, std::unique_ptr<Index<uint64_t>>* out) {
  return make_plugin(I, o, out);
}
template <size_t... I>
constexpr auto make_slots(std::index_sequence<I...>) {
  return std::array<Status (*)(const IndexOptions&, std::unique_ptr<Index<uint64_t>>*),
                    sizeof...(I)>{&make_slot<I>...};
}
constexpr auto kSlots = make_slots(std::make_index_sequence<kMaxPlugins>());

/// True when the library at `path` defines a dynamic symbol whose name
/// holds "bulk_load" (a method of a fork's tree_api). False when it cannot
/// tell (not a 64-bit ELF file, unreadable).
bool defines_bulk_load(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (bytes.size() < sizeof(Elf64_Ehdr)) return false;
  Elf64_Ehdr eh;
  std::memcpy(&eh, bytes.data(), sizeof eh);
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64) {
    return false;
  }
  auto section = [&](size_t i, Elf64_Shdr* sh) {
    const uint64_t at = eh.e_shoff + i * uint64_t(eh.e_shentsize);
    if (eh.e_shentsize < sizeof(Elf64_Shdr) || at + sizeof(Elf64_Shdr) > bytes.size()) {
      return false;
    }
    std::memcpy(sh, bytes.data() + at, sizeof *sh);
    return sh->sh_offset <= bytes.size() && sh->sh_size <= bytes.size() - sh->sh_offset;
  };
  for (size_t i = 0; i < eh.e_shnum; ++i) {
    Elf64_Shdr sym, str;
    if (!section(i, &sym) || sym.sh_type != SHT_DYNSYM || !section(sym.sh_link, &str)) continue;
    for (uint64_t o = 0; o + sizeof(Elf64_Sym) <= sym.sh_size; o += sizeof(Elf64_Sym)) {
      Elf64_Sym s;
      std::memcpy(&s, bytes.data() + sym.sh_offset + o, sizeof s);
      if (s.st_shndx == SHN_UNDEF || s.st_name >= str.sh_size) continue;
      const char* name = bytes.data() + str.sh_offset + s.st_name;
      const size_t max = str.sh_size - s.st_name;
      if (std::string_view(name, strnlen(name, max)).find("bulk_load") != std::string_view::npos) {
        return true;
      }
    }
  }
  return false;
}

/// The probe child's exit codes for each failed check (0: all passed),
/// above the 1 a sanitizer's crash report exits with and the small codes a
/// wrapper's own exit() may use.
enum ProbeExit : int {
  kProbeNullTree = 101,
  kProbeFoundAbsent,
  kProbeInsertFind,
  kProbeUpdateFind,
  kProbeRemoveFind,
  kProbeScan,
};

/// The probe's checks, run in the child: 0 when all pass, else the number
/// of the first that failed (probe_failure() says which).
int probe_child(const Plugin& p, const std::string& pool_path) {
  tree_options_t o;
  o.pool_path = pool_path;
  o.pool_size = 64ull << 20;
  tree_api* t = p.create(o);
  if (t == nullptr) return kProbeNullTree;
  const uint64_t k1 = 0x9e3779b97f4a7c15ull, k2 = k1 + 1, k3 = k1 + 2, absent = 42;
  char v[8];
  auto find = [&](uint64_t k) { return t->find(bytes_of(k).data(), 8, v); };
  auto put = [&](uint64_t k, uint64_t x) {
    return t->insert(bytes_of(k).data(), 8, bytes_of(x).data(), 8);
  };
  int rc = 0;
  if (find(absent)) {
    rc = kProbeFoundAbsent;
  } else if (!put(k1, 7) || !find(k1) || from_bytes(v) != 7) {
    rc = kProbeInsertFind;
  } else if (!t->update(bytes_of(k1).data(), 8, bytes_of(8).data(), 8) || !find(k1) ||
             from_bytes(v) != 8) {
    rc = kProbeUpdateFind;
  } else if (!t->remove(bytes_of(k1).data(), 8) || find(k1)) {
    rc = kProbeRemoveFind;
  } else if (p.ordered) {
    char* pairs = nullptr;
    auto key_at = [&](int i) {
      const uint64_t k = from_bytes(pairs + 16 * i);
      return p.swap_scan_keys ? __builtin_bswap64(k) : k;
    };
    if (!put(k3, 3) || !put(k1, 1) || !put(k2, 2) ||
        t->scan(bytes_of(k1).data(), 8, 3, pairs) != 3 || pairs == nullptr || key_at(0) != k1 ||
        from_bytes(pairs + 8) != 1 || key_at(1) != k2 || from_bytes(pairs + 24) != 2 ||
        key_at(2) != k3 || from_bytes(pairs + 40) != 3) {
      rc = kProbeScan;
    }
  }
  delete t;
  return rc;
}

std::string probe_failure(int rc) {
  switch (rc) {
    case kProbeNullTree:
      return "create_tree returned nullptr (its own message, if any, is above)";
    case kProbeFoundAbsent:
      return "find of an absent key returned true";
    case kProbeInsertFind:
      return "insert then find did not give the value back";
    case kProbeUpdateFind:
      return "update then find did not give the new value";
    case kProbeRemoveFind:
      return "remove then find still found the key";
    case kProbeScan:
      return "a scan of three keys did not return them in order with their values "
             "(scan=no skips scans)";
    default:
      // Not one of ours: a sanitizer's report of a crash (AddressSanitizer
      // exits 1), or the wrapper called exit() itself.
      return "the probe crashed or the wrapper exited (exit status " + std::to_string(rc) + ")";
  }
}

/// Runs probe_child in a child process (fork, no exec: the child runs the
/// wrapper's code in a copy of this process, whose only threads before the
/// benchmark starts are those a loaded wrapper's constructors made) with a
/// kProbeSeconds limit, killed with SIGKILL past it; the probe's pool path
/// is chosen here and removed here, whatever became of the child. Ok, or
/// InvalidArgument with the cause, or IOError (fork or waitpid failed).
Status probe(const Plugin& p) {
  const std::string pool_path = temp_pool_path();
  util::RemoveOnSignal remove(pool_path, true);
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) return Status::IOError(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    const int rc = probe_child(p, pool_path);
    std::fflush(nullptr);  // the wrapper's own messages, if any
    std::_Exit(rc);
  }
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(kProbeSeconds);
  int ws = 0;
  bool timed_out = false;
  for (;;) {
    const pid_t r = ::waitpid(pid, &ws, WNOHANG);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) {
      util::detail::remove_tree(pool_path.c_str());
      return Status::IOError(std::string("waitpid: ") + std::strerror(errno));
    }
    if (!timed_out && Clock::now() >= deadline) {
      ::kill(pid, SIGKILL);
      timed_out = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  util::detail::remove_tree(pool_path.c_str());
  std::string cause;
  if (WIFEXITED(ws) && WEXITSTATUS(ws) == 0) return Status::Ok();
  if (timed_out) {
    cause = "the probe did not finish within " + std::to_string(kProbeSeconds) + " s";
  } else if (WIFEXITED(ws)) {
    cause = probe_failure(WEXITSTATUS(ws));
  } else {
    cause = std::string("the probe crashed (") + strsignal(WTERMSIG(ws)) + ")";
  }
  std::string hint =
      "; is it built against PiBench master's tree_api (find, insert, update, remove, scan)?";
  if (defines_bulk_load(p.path)) {
    hint +=
        " It defines a bulk_load method: the optiql and tls-cleanup forks put bulk_load "
        "before find in the vtable, which nvindex does not call through";
  }
  return Status::InvalidArgument(quote_input(p.path, 200) +
                                 ": the wrapper failed nvindex's probe: " + cause + hint);
}

}  // namespace

Status register_pibench_plugin(std::string_view text, std::string* name) {
  for (const Plugin& p : plugins()) {
    if (p.text == text) {
      *name = p.name;
      return Status::Ok();
    }
  }
  const std::string_view rest = text.substr(kPluginPrefix.size());
  // Options start at the first ':' after the last '/', so a directory may
  // hold a ':' (a file name may not).
  const size_t slash = rest.rfind('/');
  const size_t colon = rest.find(':', slash == std::string_view::npos ? 0 : slash);
  Plugin p;
  p.text = std::string(text);
  p.path = std::string(rest.substr(0, colon));
  if (p.path.empty()) {
    return Status::InvalidArgument(quote_input(text) +
                                   ": expected pibench:PATH.so[:k=v[;k=v]], the path of a "
                                   "PiBench wrapper");
  }
  const std::string opts =
      colon == std::string_view::npos ? "" : std::string(rest.substr(colon + 1));
  auto invalid = [&](const std::string& kv) {
    return Status::InvalidArgument(quote_input(text) + ": option " + quote_input(kv) +
                                   " invalid (options of a PiBench wrapper: scan=yes|no, "
                                   "pool_size=BYTES, value_bits=32..64, scan_keys=host|swapped)");
  };
  std::vector<std::pair<std::string, std::string>> kvs;
  std::string bad;
  if (colon != std::string_view::npos && !util::split_kv_list(opts, &kvs, &bad)) {
    return invalid(bad);
  }
  for (const auto& [k, v] : kvs) {
    if (k == "scan" && (v == "yes" || v == "no")) {
      p.ordered = v == "yes";
    } else if (k == "pool_size" && util::parse_byte_size(v, &p.pool_bytes).ok()) {
    } else if (k == "value_bits" && v.size() == 2 && std::isdigit(uint8_t(v[0])) &&
               std::isdigit(uint8_t(v[1])) && std::stoul(v) >= 32 && std::stoul(v) <= 64) {
      p.value_bits = static_cast<unsigned>(std::stoul(v));
    } else if (k == "scan_keys" && (v == "host" || v == "swapped")) {
      p.swap_scan_keys = v == "swapped";
    } else {
      return invalid(k + "=" + v);
    }
  }
  p.name = p.path.substr(slash == std::string_view::npos ? 0 : slash + 1);
  if (!opts.empty()) p.name += ":" + opts;
  if (find_index_entry(p.name) != nullptr) {
    return Status::InvalidArgument(quote_input(text) + ": an index named " + quote_input(p.name) +
                                   " is registered already (two wrappers with one file name?)");
  }
  if (plugins().size() >= kMaxPlugins) {
    return Status::InvalidArgument(quote_input(text) + ": at most " + std::to_string(kMaxPlugins) +
                                   " PiBench wrappers in one run");
  }
  // dlopen searches the library path for a name without '/': say ./ for a
  // file here, as PiBench's users do.
  p.handle = ::dlopen(p.path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (p.handle == nullptr) {
    const char* err = ::dlerror();
    std::string hint;
    if (p.path.find('/') == std::string::npos && ::access(p.path.c_str(), F_OK) == 0) {
      hint = " (a name without '/' is searched on the library path, as dlopen does: say ./" +
             p.path + " for the file here)";
    }
    return Status::InvalidArgument("cannot load PiBench wrapper " + quote_input(p.path, 200) +
                                   ": " + (err ? err : "dlopen failed") + hint);
  }
  p.create = reinterpret_cast<create_tree_fn>(::dlsym(p.handle, kCreateTreeSymbol));
  if (p.create == nullptr) {
    return Status::InvalidArgument(
        quote_input(p.path, 200) + " is not a PiBench wrapper: it has no symbol '" +
        kCreateTreeSymbol + "' (extern \"C\" tree_api* create_tree(const tree_options_t&))");
  }
  p.description = "PiBench wrapper " + p.path +
                  " (8-byte keys; PM counters, footprint and "
                  "structure n/a: plugin)";
  if (Status s = probe(p); !s.ok()) return s;
  const size_t slot = plugins().size();
  plugins().push_back(std::move(p));
  const Plugin& reg = plugins().back();
  IndexEntry e{};
  e.name = reg.name;
  e.description = reg.description;
  e.caps = PluginIndex::caps_of(reg);
  e.min_node_size = 0;
  e.node_sizes = "";
  e.node_size_ok = nullptr;
  e.options = {};
  e.make = kSlots[slot];
  if (Status s = register_index(e); !s.ok()) {
    plugins().pop_back();
    return s;
  }
  *name = reg.name;
  return Status::Ok();
}

}  // namespace nvindex::pibench
