// Micro benchmarks of one lookup and one insert for every registered index
// (test-only ones excluded), in process, without the harness: the cost of the
// index alone. Persistent indexes live in an emulated pool in /dev/shm (real
// clwb/sfence on DRAM, as `nvindex bench` runs them by default); volatile ones
// need none.
//
//   BM_Lookup/<index>/<node size>: uniform lookups of present keys on a tree
//     loaded with NVINDEX_MICRO_KEYS random keys (default 1,000,000) by
//     inserts in random order; items_per_second = lookups per second.
//   BM_Insert/<index>/<node size>: NVINDEX_MICRO_KEYS inserts of random keys
//     into an empty tree; items_per_second = inserts per second.
//
// Node sizes: 256 and 512 B (each index at its own size where it takes one;
// lbtree's 256 B leaves are the paper's). One thread. Filter with
// --benchmark_filter, e.g. `index_ops --benchmark_filter='Lookup/lbtree'`.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "env_count.h"
#include "nvindex/index.h"
#include "nvindex/pm/pool.h"

namespace nvindex {
namespace {

size_t key_count() { return env_count("NVINDEX_MICRO_KEYS", 1'000'000); }

std::vector<uint64_t> random_keys(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> keys(n);
  for (uint64_t& k : keys) k = rng() >> 1;  // 63-bit keys, as the papers' drivers
  return keys;
}

/// An index and the pool it lives in (none for a volatile index).
struct Opened {
  std::string pool_path;
  std::unique_ptr<pm::Pool> pool;
  std::unique_ptr<Index<uint64_t>> index;
  ~Opened() {
    index.reset();
    pool.reset();
    if (!pool_path.empty()) ::unlink(pool_path.c_str());
  }
};

/// Opens `name` at `node_size`, in a fresh /dev/shm pool of 64 MiB + 256 B
/// per key if it is persistent. Empty index on error (state.SkipWithError).
std::unique_ptr<Opened> open_index(const IndexEntry& e, uint32_t node_size, size_t keys,
                                   std::string* error) {
  auto o = std::make_unique<Opened>();
  IndexOptions opt;
  opt.node_size = node_size;
  if (e.caps.persistent) {
    static int serial = 0;
    o->pool_path = "/dev/shm/nvindex-micro-" + std::to_string(::getpid()) + "-" +
                   std::to_string(serial++) + ".pool";
    Status s = pm::Pool::create(o->pool_path, (64ull << 20) + 256ull * keys, e.name,
                                pm::Mode::kEmulated, &o->pool);
    if (!s.ok()) {
      o->pool_path.clear();
      *error = s.ToString();
      return nullptr;
    }
    opt.pool = o->pool.get();
  }
  Status s = make_index<uint64_t>(e.name, opt, &o->index);
  if (!s.ok()) {
    *error = s.ToString();
    return nullptr;
  }
  return o;
}

void BM_Lookup(benchmark::State& state, const IndexEntry* e, uint32_t node_size) {
  const size_t n = key_count();
  static const std::vector<uint64_t> keys = random_keys(n, 42);
  std::string err;
  auto o = open_index(*e, node_size, n, &err);
  if (!o) return state.SkipWithError(err.c_str());
  for (uint64_t k : keys) {
    if (!o->index->insert(k, k).ok()) return state.SkipWithError("load insert failed");
  }
  std::vector<uint64_t> order = keys;
  std::shuffle(order.begin(), order.end(), std::mt19937_64(7));
  size_t i = 0;
  uint64_t missing = 0;
  for (auto _ : state) {
    const std::optional<Value> v = o->index->lookup(order[i]);
    missing += !v.has_value() || *v != order[i];
    if (++i == n) i = 0;
  }
  if (missing != 0) state.SkipWithError("a lookup of a present key failed");
  state.SetItemsProcessed(state.iterations());
}

void BM_Insert(benchmark::State& state, const IndexEntry* e, uint32_t node_size) {
  const size_t n = key_count();
  static const std::vector<uint64_t> keys = random_keys(n, 7);
  for (auto _ : state) {
    state.PauseTiming();
    std::string err;
    auto o = open_index(*e, node_size, n, &err);
    if (!o) return state.SkipWithError(err.c_str());
    state.ResumeTiming();
    for (uint64_t k : keys) {
      if (!o->index->insert(k, k).ok()) {
        state.SkipWithError("insert failed");
        break;
      }
    }
    state.PauseTiming();
    o.reset();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * n);
}

/// Registers both benchmarks for every non-test index at 256 and 512 B.
int register_all() {
  for (const IndexEntry& e : registered_indexes()) {
    if (is_test_only_index(e.name)) continue;
    for (uint32_t ns : {256u, 512u}) {
      if (ns < e.min_node_size) continue;
      const std::string suffix = std::string(e.name) + "/" + std::to_string(ns);
      benchmark::RegisterBenchmark(("BM_Lookup/" + suffix).c_str(), BM_Lookup, &e, ns)
          ->MinTime(1.0);
      benchmark::RegisterBenchmark(("BM_Insert/" + suffix).c_str(), BM_Insert, &e, ns)
          ->Iterations(1)
          ->Unit(benchmark::kMillisecond);
    }
  }
  return 0;
}

[[maybe_unused]] const int registered = register_all();

}  // namespace
}  // namespace nvindex
