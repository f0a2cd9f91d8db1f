// libnvindex_pibench.so seen as PiBench sees it (PiBench, Lersch et al.,
// VLDB 2020; pibench/tree_api.h): loaded with dlopen(RTLD_NOW), create_tree
// found with dlsym, every method called through the tree_api vtable, and
// checked against a std::map model: random operations on one thread and on
// two, 8-byte integer keys (PiBench's, an id times 11400714819323198393) and
// 16-byte string keys, a pool given by pool_path recovered by a second
// create_tree, and the refusals (nullptr and a message on stderr). This
// test links no nvindex library: all it knows is the ABI. The library's
// path comes from $NVINDEX_PIBENCH_SO (ctest sets it).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "pibench/tree_api.h"

namespace {

using nvindex::pibench::create_tree_fn;
using nvindex::pibench::tree_api;
using nvindex::pibench::tree_options_t;

/// PiBench's key of id i: i * 11400714819323198393, 8 bytes in host order.
uint64_t pibench_key(uint64_t id) { return id * 11400714819323198393ull; }

/// create_tree of $NVINDEX_PIBENCH_SO, loaded once; nullptr when unset.
create_tree_fn plugin() {
  static create_tree_fn fn = [] {
    const char* so = std::getenv("NVINDEX_PIBENCH_SO");
    if (so == nullptr) return create_tree_fn{nullptr};
    void* h = ::dlopen(so, RTLD_NOW);
    EXPECT_NE(h, nullptr) << ::dlerror();
    if (h == nullptr) return create_tree_fn{nullptr};
    return reinterpret_cast<create_tree_fn>(::dlsym(h, "create_tree"));
  }();
  return fn;
}

/// A tree over `index` (NVINDEX_PIBENCH_INDEX) with these options.
std::unique_ptr<tree_api> make_tree(const std::string& index, tree_options_t o) {
  ::setenv("NVINDEX_PIBENCH_INDEX", index.c_str(), 1);
  ::setenv("NVINDEX_PIBENCH_QUIET", "1", 1);
  return std::unique_ptr<tree_api>(plugin()(o));
}

std::string key_bytes(uint64_t k, size_t key_size) {
  std::string s(key_size, '\0');
  if (key_size == 8) {
    std::memcpy(s.data(), &k, 8);
  } else {
    // A fixed-width string key: "k" and the id, zero-padded, in byte order.
    const std::string t = "k" + std::to_string(k);
    std::memcpy(s.data(), t.data(), std::min(t.size(), key_size));
  }
  return s;
}

uint64_t word(const char* p) {
  uint64_t x;
  std::memcpy(&x, p, 8);
  return x;
}

/// Random finds, inserts, updates, removes and scans (`ordered`) on `t`
/// over keys of `ids` distinct ids offset by `base`, checked against
/// *model (key bytes -> value), `ops` of them.
void run_against_model(tree_api& t, std::map<std::string, uint64_t>* model, size_t key_size,
                       bool ordered, uint64_t seed, size_t ops, uint64_t base, uint64_t ids) {
  std::mt19937_64 rng(seed);
  for (size_t i = 0; i < ops; ++i) {
    const uint64_t id = base + rng() % ids;
    const std::string k = key_bytes(key_size == 8 ? pibench_key(id) : id, key_size);
    const uint64_t v = rng();
    const bool present = model->count(k) == 1;
    char out[8] = {};
    switch (rng() % 5) {
      case 0:
        ASSERT_EQ(t.find(k.data(), k.size(), out), present) << "find, op " << i;
        if (present) {
          ASSERT_EQ(word(out), model->at(k)) << "find's value, op " << i;
        }
        break;
      case 1:
        ASSERT_EQ(t.insert(k.data(), k.size(), reinterpret_cast<const char*>(&v), 8), !present)
            << "insert, op " << i;
        if (!present) (*model)[k] = v;
        break;
      case 2:
        ASSERT_EQ(t.update(k.data(), k.size(), reinterpret_cast<const char*>(&v), 8), present)
            << "update, op " << i;
        if (present) (*model)[k] = v;
        break;
      case 3:
        ASSERT_EQ(t.remove(k.data(), k.size()), present) << "remove, op " << i;
        model->erase(k);
        break;
      case 4: {
        if (!ordered) break;
        const int want = 1 + static_cast<int>(rng() % 100);
        char* pairs = nullptr;
        const int n = t.scan(k.data(), k.size(), want, pairs);
        auto it = model->lower_bound(k);
        int expect = 0;
        for (auto j = it; j != model->end() && expect < want; ++j) ++expect;
        // Integer keys are ordered as numbers, not as bytes.
        if (key_size == 8) {
          std::map<uint64_t, uint64_t> num;
          for (const auto& [kk, vv] : *model) num[word(kk.data())] = vv;
          auto nt = num.lower_bound(word(k.data()));
          expect = 0;
          for (auto j = nt; j != num.end() && expect < want; ++j, ++expect) {
            ASSERT_LT(expect, n) << "scan returned too few, op " << i;
            ASSERT_EQ(word(pairs + 16 * expect), j->first) << "scan key " << expect;
            ASSERT_EQ(word(pairs + 16 * expect + 8), j->second) << "scan value " << expect;
          }
        } else {
          for (int e = 0; e < expect; ++e, ++it) {
            ASSERT_LT(e, n) << "scan returned too few, op " << i;
            const char* p = pairs + e * (key_size + 8);
            ASSERT_EQ(std::string(p, key_size), it->first) << "scan key " << e;
            ASSERT_EQ(word(p + key_size), it->second) << "scan value " << e;
          }
        }
        ASSERT_EQ(n, expect) << "scan count, op " << i;
        break;
      }
    }
  }
}

class PibenchAbi : public ::testing::TestWithParam<std::pair<std::string, bool>> {
 protected:
  void SetUp() override {
    if (plugin() == nullptr) GTEST_SKIP() << "NVINDEX_PIBENCH_SO not set";
  }
};

TEST_P(PibenchAbi, EveryMethodMatchesAMapModelOnOneThread) {
  const auto& [index, ordered] = GetParam();
  tree_options_t o;
  auto t = make_tree(index, o);
  ASSERT_NE(t, nullptr);
  std::map<std::string, uint64_t> model;
  run_against_model(*t, &model, 8, ordered, 1, 20000, 0, 2000);
}

TEST_P(PibenchAbi, EveryMethodMatchesAMapModelOnTwoThreads) {
  const auto& [index, ordered] = GetParam();
  tree_options_t o;
  o.num_threads = 2;
  auto t = make_tree(index, o);
  ASSERT_NE(t, nullptr);
  // Each thread works its own id range, so each has an exact model. A scan
  // could run into the other thread's keys, so the threads do not scan;
  // the whole tree is checked (finds, then scans) once both are done.
  std::map<std::string, uint64_t> m0, m1;
  std::thread a([&] { run_against_model(*t, &m0, 8, false, 2, 20000, 0, 3000); });
  std::thread b([&] { run_against_model(*t, &m1, 8, false, 3, 20000, 1u << 20, 3000); });
  a.join();
  b.join();
  m0.insert(m1.begin(), m1.end());
  char out[8];
  for (const auto& [k, v] : m0) {
    ASSERT_TRUE(t->find(k.data(), 8, out));
    ASSERT_EQ(word(out), v);
  }
  if (ordered) run_against_model(*t, &m0, 8, true, 4, 2000, 0, 3000);
}

INSTANTIATE_TEST_SUITE_P(Indexes, PibenchAbi,
                         ::testing::Values(std::pair<std::string, bool>{"lbtree", true},
                                           std::pair<std::string, bool>{"fastfair", true},
                                           std::pair<std::string, bool>{"btree", true},
                                           std::pair<std::string, bool>{"dash-eh", false}),
                         [](const auto& info) {
                           std::string s = info.param.first;
                           for (char& c : s) c = std::isalnum(uint8_t(c)) ? c : '_';
                           return s;
                         });

class PibenchPlugin : public ::testing::Test {
 protected:
  void SetUp() override {
    if (plugin() == nullptr) GTEST_SKIP() << "NVINDEX_PIBENCH_SO not set";
  }
};

TEST_F(PibenchPlugin, KeysOtherThanEightBytesAreStringKeys) {
  tree_options_t o;
  o.key_size = 16;
  auto t = make_tree("fastfair", o);
  ASSERT_NE(t, nullptr);
  std::map<std::string, uint64_t> model;
  run_against_model(*t, &model, 16, true, 5, 20000, 0, 2000);
}

TEST_F(PibenchPlugin, APoolPathIsRecoveredByTheNextCreateTree) {
  const std::string dir = ::access("/dev/shm", W_OK) == 0 ? "/dev/shm/" : ::testing::TempDir();
  const std::string path = dir + "nvindex-pibench-abi-" + std::to_string(::getpid()) + ".pool";
  ::unlink(path.c_str());
  tree_options_t o;
  o.pool_path = path;
  o.pool_size = 64ull << 20;
  {
    auto t = make_tree("lbtree", o);
    ASSERT_NE(t, nullptr);
    for (uint64_t i = 0; i < 5000; ++i) {
      const uint64_t k = pibench_key(i), v = i * 3;
      ASSERT_TRUE(
          t->insert(reinterpret_cast<const char*>(&k), 8, reinterpret_cast<const char*>(&v), 8));
    }
  }
  ASSERT_EQ(::access(path.c_str(), F_OK), 0) << "a named pool is kept";
  {
    auto t = make_tree("lbtree", o);
    ASSERT_NE(t, nullptr);
    char out[8];
    for (uint64_t i = 0; i < 5000; ++i) {
      const uint64_t k = pibench_key(i);
      ASSERT_TRUE(t->find(reinterpret_cast<const char*>(&k), 8, out)) << i;
      ASSERT_EQ(word(out), i * 3);
    }
  }
  ::unlink(path.c_str());
}

/// Rss of this process's mappings of the file at `path`, bytes, summed
/// from /proc/self/smaps (0 when none).
uint64_t mapped_resident_bytes(const std::string& path) {
  std::ifstream smaps("/proc/self/smaps");
  uint64_t rss = 0;
  bool in = false;
  for (std::string line; std::getline(smaps, line);) {
    if (!line.empty() && std::isxdigit(static_cast<unsigned char>(line[0])) &&
        line.find(' ') < line.find(':')) {
      in = line.size() >= path.size() &&
           line.compare(line.size() - path.size(), path.size(), path) == 0;
    } else if (in && line.rfind("Rss:", 0) == 0) {
      rss += std::stoull(line.substr(4)) * 1024;
    }
  }
  return rss;
}

TEST_F(PibenchPlugin, APoolIsPrefaultedUnlessTurnedOff) {
  const std::string dir = ::access("/dev/shm", W_OK) == 0 ? "/dev/shm/" : ::testing::TempDir();
  const std::string path = dir + "nvindex-pibench-pf-" + std::to_string(::getpid()) + ".pool";
  tree_options_t o;
  o.pool_path = path;
  o.pool_size = 64ull << 20;
  for (const char* prefault : {"1", "0"}) {
    ::unlink(path.c_str());
    ::setenv("NVINDEX_PIBENCH_PREFAULT", prefault, 1);
    auto t = make_tree("lbtree", o);
    ASSERT_NE(t, nullptr) << prefault;
    const uint64_t rss = mapped_resident_bytes(path);
    if (std::string(prefault) == "1") {
      EXPECT_EQ(rss, o.pool_size) << "every page mapped";
    } else {
      EXPECT_GT(rss, 0u);
      EXPECT_LT(rss, o.pool_size / 2) << "only the pages create and the index touched";
    }
  }
  // A bad value is refused with a message, for a persistent index (no pool
  // file left behind) and for a volatile one, which has no pool to prefault.
  ::unlink(path.c_str());
  for (const auto& [index, value] :
       {std::pair<const char*, const char*>{"lbtree", "yes"}, {"btree", "2"}}) {
    ::setenv("NVINDEX_PIBENCH_PREFAULT", value, 1);
    ::testing::internal::CaptureStderr();
    auto t = make_tree(index, o);
    const std::string err = ::testing::internal::GetCapturedStderr();
    ::unsetenv("NVINDEX_PIBENCH_PREFAULT");
    EXPECT_EQ(t, nullptr) << index;
    EXPECT_NE(err.find(std::string("NVINDEX_PIBENCH_PREFAULT must be 0 or 1, got '") + value + "'"),
              std::string::npos)
        << err;
    EXPECT_NE(::access(path.c_str(), F_OK), 0) << index << ": no pool file left behind";
  }
}

TEST_F(PibenchPlugin, RefusesWhatItCannotHoldWithAMessage) {
  struct Case {
    std::string index;
    size_t key_size, value_size;
    std::string message;
  };
  const Case cases[] = {
      {"lbtree", 8, 16, "value_size 16 invalid"},
      {"nosuch", 8, 8, "unknown index 'nosuch'"},
      {"fastfair:inner=sideways", 8, 8, "inner='sideways' invalid"},
      {"lbtree", 300, 8, "key_size 300 invalid"},
      {"dash-eh", 16, 8, "takes 8-byte integer keys only"},
  };
  for (const Case& c : cases) {
    tree_options_t o;
    o.key_size = c.key_size;
    o.value_size = c.value_size;
    ::testing::internal::CaptureStderr();
    auto t = make_tree(c.index, o);
    const std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(t, nullptr) << c.index;
    EXPECT_NE(err.find(c.message), std::string::npos) << c.index << ": " << err;
  }
}

}  // namespace
