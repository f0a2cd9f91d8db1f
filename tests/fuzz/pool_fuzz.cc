// libFuzzer target: damaged pool files (issue 3 §6). Each input is a pool
// image (tests/fuzz/pool_image.h): it is written as a pool file in /dev/shm,
// opened with Pool::open for the layout it claims (a registered persistent,
// non-test index, or "<index>:string" for the string-key instance of one that
// has string keys; any other layout is opened as "fastfair", which must
// refuse it), and the index is made (recovered) with make_index<uint64_t> or
// make_index<std::string_view>. Every input must
// give either a clear error (a non-OK Status with a message) or a consistent
// index: verify() passes (or reports Corruption), a full scan agrees with
// verify()'s key count, lookups agree with the scan, and a bounded burst of
// inserts, updates and removes matches a std::map model and leaves a tree
// that verify() accepts. Crashes, hangs and out-of-bounds accesses are found
// by libFuzzer, ASan and UBSan; a wrong answer aborts with a message.
//
// Build: cmake --preset fuzz && cmake --build --preset fuzz (clang only).
// Run: tests/fuzz/run-fuzz.sh SECONDS (or `make test-fuzz FUZZ_SECONDS=N`).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/pool_image.h"
#include "nvindex/index.h"
#include "nvindex/pm/persist.h"
#include "nvindex/pm/pool.h"

namespace {

using nvindex::Index;
using nvindex::IndexEntry;
using nvindex::Status;
using nvindex::Value;

[[noreturn]] void die(const char* what, const std::string& detail) {
  std::fprintf(stderr, "pool_fuzz: %s: %s\n", what, detail.c_str());
  std::abort();
}

/// An error must be an error, with a message a user can act on.
void expect_clear_error(const Status& s, const char* where) {
  if (s.ok()) die(where, "expected an error");
  if (s.message().empty()) die(where, "error without a message: " + s.ToString());
}

/// The layout name the header claims (bytes 16..47, NUL-padded), if it names a
/// registered persistent non-test index (for string keys, one that has
/// them); else "fastfair".
std::string claimed_layout(const std::vector<uint8_t>& w) {
  const char* p = reinterpret_cast<const char*>(w.data() + 16);
  const std::string layout(p, strnlen(p, 32));
  const auto [name, type] = nvindex::parse_pool_layout(layout);
  for (const IndexEntry& e : nvindex::registered_indexes()) {
    if (nvindex::needs_pool(e.caps) && !nvindex::is_test_only_index(e.name) && e.name == name &&
        (type == nvindex::KeyType::kInteger || e.caps.string_keys)) {
      return layout;
    }
  }
  return "fastfair";
}

/// Text of a key for a message.
std::string key_text(uint64_t k) { return std::to_string(k); }
std::string key_text(const std::string& k) { return "of " + std::to_string(k.size()) + " bytes"; }

/// The n-th key of a burst near `base` (n < 512): base + n for integers;
/// for strings, base with the decimal of n appended (a key that shares the
/// existing key's bytes, so it lands in the recovered nodes).
uint64_t near_key(uint64_t base, uint64_t n) { return base + n; }
std::string near_key(const std::string& base, uint64_t n) {
  return base.substr(0, nvindex::kMaxKeyBytes - 3) + std::to_string(n);
}

/// Checks a recovered index (keys K) and runs a bounded burst of operations
/// on it.
template <class K>
void exercise(Index<K>& idx, const uint8_t* data, size_t size) {
  using Key = nvindex::OwnedKey<K>;
  nvindex::VerifyReport rep;
  if (Status s = idx.verify(&rep); !s.ok()) {
    expect_clear_error(s, "verify after recovery");
    return;  // a clear Corruption: the index refuses the pool
  }
  const bool ordered = idx.info().caps.ordered;
  std::map<Key, Value> model;
  if (ordered) {
    std::vector<std::pair<Key, Value>> all;
    idx.scan(K{}, rep.keys + 16, &all);
    if (all.size() != rep.keys) {
      die("scan",
          std::to_string(all.size()) + " pairs, verify counted " + std::to_string(rep.keys));
    }
    for (size_t i = 0; i < all.size(); ++i) {
      if (i > 0 && all[i].first <= all[i - 1].first) die("scan", "keys not ascending");
      model.emplace(all[i]);
    }
    size_t n = 0;
    for (const auto& [k, v] : model) {
      if (++n > 256) break;
      const std::optional<Value> got = idx.lookup(k);
      if (!got || *got != v) die("lookup", "key " + key_text(k) + " disagrees with scan");
    }
  }
  // A burst of operations, keys drawn from the input bytes (small key range
  // near existing keys so that they land in the recovered nodes).
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < size; i += 61) h = (h ^ data[i]) * 1099511628211ull;
  const Key base = model.empty() ? Key{} : model.begin()->first;
  for (int i = 0; i < 96; ++i) {
    h = h * 6364136223846793005ull + 1442695040888963407ull;
    const Key key = near_key(base, (h >> 40) % 512);
    const auto it = model.find(key);
    const bool present = it != model.end();
    const int op = static_cast<int>((h >> 20) % 3);
    Status s;
    if (op == 0) {
      s = idx.insert(key, h);
      if (s.code() == nvindex::Code::kOutOfSpace) continue;
      if (ordered && s.ok() == present) die("insert", "key " + key_text(key) + " vs model");
      if (s.ok()) model[key] = h;
    } else if (op == 1) {
      s = idx.update(key, h + 1);
      if (ordered && s.ok() != present) die("update", "key " + key_text(key) + " vs model");
      if (s.ok()) model[key] = h + 1;
    } else {
      s = idx.remove(key);
      if (ordered && s.ok() != present) die("remove", "key " + key_text(key) + " vs model");
      if (s.ok()) model.erase(key);
    }
  }
  if (Status s = idx.verify(&rep); !s.ok()) {
    die("verify after operations on a recovered index", s.ToString());
  }
  if (ordered) {
    std::vector<std::pair<Key, Value>> all;
    idx.scan(K{}, model.size() + 16, &all);
    if (all != std::vector<std::pair<Key, Value>>(model.begin(), model.end())) {
      die("scan after operations", "differs from the model");
    }
  }
}

/// Recovers the index `name` (keys K) in `pool` and exercises it, or checks
/// that its refusal is a clear error.
template <class K>
void recover_and_exercise(std::string_view name, nvindex::pm::Pool* pool, const uint8_t* data,
                          size_t size) {
  nvindex::IndexOptions o;
  o.pool = pool;
  o.node_size = 256;
  std::unique_ptr<Index<K>> idx;
  const Status s = nvindex::make_index<K>(name, o, &idx);
  if (!s.ok()) {
    expect_clear_error(s, "make_index (recovery)");
  } else {
    exercise(*idx, data, size);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path =
      "/dev/shm/nvindex_pool_fuzz_" + std::to_string(getpid()) + ".pool";
  if (!nvindex::fuzz::write_pool_file(path, data, size)) die("write", path);
  const std::vector<uint8_t> w = nvindex::fuzz::head_bytes(data, size);
  const std::string layout = claimed_layout(w);
  const auto [name, type] = nvindex::parse_pool_layout(layout);
  {
    std::unique_ptr<nvindex::pm::Pool> pool;
    Status s = nvindex::pm::Pool::open(path, layout, nvindex::pm::Mode::kEmulated, &pool);
    if (!s.ok()) {
      expect_clear_error(s, "Pool::open");
    } else if (type == nvindex::KeyType::kString) {
      recover_and_exercise<std::string_view>(name, pool.get(), data, size);
    } else {
      recover_and_exercise<uint64_t>(name, pool.get(), data, size);
    }
  }
  ::unlink(path.c_str());
  return 0;
}
