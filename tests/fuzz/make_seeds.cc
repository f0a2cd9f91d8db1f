// Seed corpus generator for pool_fuzz (tests/fuzz/pool_fuzz.cc): writes small
// valid pools of every registered persistent non-test index as fuzz images
// (tests/fuzz/pool_image.h) into DIR, and of the string-key instance of each
// that has string keys (keys "user" + 1..24 digits, some of them repeated
// to 60..200 bytes). For each index: node sizes 128 and 256
// bytes (those the index accepts; its smallest node size when it takes
// neither), 0, 8, 40 and 150 keys (a lone leaf, a
// two-level and a three-level tree), then the same after removing most keys
// (merges), each in a cleanly closed and a "crashed" variant (clean-shutdown
// flag 0). A pool whose data lies outside the image windows is written as an
// extent image (btree-ls, whose logs spread over the pool); one whose extent
// image is too large is skipped with a message. Usage: pool_fuzz_seeds DIR. Exit 0, or 1 when no
// seed was written.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/pool_image.h"
#include "nvindex/index.h"
#include "nvindex/pm/pool.h"

namespace {

using nvindex::Status;

/// Key number k (< 1000) of a seed pool: k itself, or for string keys
/// "user" + its decimal, every third one repeated to a long key.
uint64_t seed_key(uint64_t k, uint64_t) { return k; }
std::string seed_key(uint64_t k, std::string) {
  std::string s = "user" + std::to_string(k * 1000003);
  if (k % 3 == 0) s += std::string(60 + k % 140, static_cast<char>('a' + k % 26));
  return s;
}

template <class K>
bool make_pool(const std::string& path, const std::string& name,
               const std::map<std::string, std::string>& extra, uint32_t node_size, int keys,
               bool shrink, uint64_t seed) {
  using Key = nvindex::OwnedKey<K>;
  std::unique_ptr<nvindex::pm::Pool> pool;
  std::filesystem::remove(path);
  if (!nvindex::pm::Pool::create(path, nvindex::pm::kMinPoolSize,
                                 nvindex::pool_layout(name, nvindex::key_type_of<K>),
                                 nvindex::pm::Mode::kEmulated, &pool)
           .ok()) {
    return false;
  }
  nvindex::IndexOptions o;
  o.pool = pool.get();
  o.node_size = node_size;
  o.extra = extra;
  std::unique_ptr<nvindex::Index<K>> idx;
  if (!nvindex::make_index<K>(name, o, &idx).ok()) return false;
  std::mt19937_64 rng(seed);
  std::vector<Key> inserted;
  for (int i = 0; i < keys; ++i) {
    const uint64_t n = rng() % 1000;
    const Key k = seed_key(n, Key{});
    if (idx->insert(k, n * 3 + 1).ok()) inserted.push_back(k);
  }
  if (shrink) {
    for (size_t i = 0; i + 2 < inserted.size(); ++i) (void)idx->remove(inserted[i]);
  }
  return true;  // index then pool destroyed: a clean close
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  std::filesystem::create_directories(dir);
  const std::string tmp = "/dev/shm/nvindex_fuzz_seed_" + std::to_string(getpid()) + ".pool";
  int written = 0;
  for (const bool strings : {false, true}) {
    for (const nvindex::IndexEntry& e : nvindex::registered_indexes()) {
      const std::string name(e.name);
      if (!nvindex::needs_pool(e.caps) || nvindex::is_test_only_index(name)) continue;
      if (strings && !e.caps.string_keys) continue;
      // The defaults, then (integer keys, the smaller node size) each non-default
      // value of each declared option: the pool records it (inner=dram).
      std::vector<std::map<std::string, std::string>> variants = {{}};
      for (const nvindex::OptionSpec& opt : e.options) {
        for (size_t v = 1; v < opt.values.size() && !strings; ++v) {
          variants.push_back({{std::string(opt.name), std::string(opt.values[v])}});
        }
      }
      for (const auto& extra : variants) {
        std::string label = strings ? name + "-string" : name;
        for (const auto& [k, v] : extra) label += "-" + k + "-" + v;
        // Option variants at the smaller node size the index accepts. An
        // index that takes neither 128 nor 256 (dash-eh: segments of at
        // least 1 KiB of buckets) gets its smallest node size instead.
        const uint32_t variant_ns = e.node_size_ok && !e.node_size_ok(128) ? 256 : 128;
        std::vector<uint32_t> sizes = {128u, 256u};
        if (e.node_size_ok && !e.node_size_ok(128) && !e.node_size_ok(256)) {
          sizes = {e.min_node_size};
        }
        for (uint32_t ns : sizes) {
          if (!extra.empty() && ns != variant_ns) continue;
          for (int keys : {0, 8, 40, 150}) {
            for (bool shrink : {false, true}) {
              if (shrink && keys < 40) continue;
              const bool made =
                  strings
                      ? make_pool<std::string_view>(tmp, name, extra, ns, keys, shrink, 1000 + keys)
                      : make_pool<uint64_t>(tmp, name, extra, ns, keys, shrink, 1000 + keys);
              if (!made) continue;  // size refused
              std::vector<uint8_t> file;
              std::string why;
              if (!nvindex::fuzz::read_pool_file(tmp, &file, &why)) {
                std::fprintf(stderr, "make_seeds: %s node %u keys %d: skipped: %s\n", label.c_str(),
                             ns, keys, why.c_str());
                continue;
              }
              for (bool crashed : {false, true}) {
                if (crashed) file[72] = 0;  // clean-shutdown word (offset 72) = 0
                std::vector<uint8_t> img;
                if (!nvindex::fuzz::encode_image(file, &img, &why)) {
                  std::fprintf(stderr, "make_seeds: %s node %u keys %d: skipped: %s\n",
                               label.c_str(), ns, keys, why.c_str());
                  break;
                }
                const std::string name_of = dir + "/seed-" + label + "-n" + std::to_string(ns) +
                                            "-k" + std::to_string(keys) +
                                            (shrink ? "-shrunk" : "") +
                                            (crashed ? "-crashed" : "-clean");
                std::ofstream(name_of, std::ios::binary)
                    .write(reinterpret_cast<const char*>(img.data()),
                           static_cast<std::streamsize>(img.size()));
                ++written;
              }
            }
          }
        }
      }
    }
  }
  std::filesystem::remove(tmp);
  std::printf("make_seeds: %d seeds in %s\n", written, dir.c_str());
  return written > 0 ? 0 : 1;
}
