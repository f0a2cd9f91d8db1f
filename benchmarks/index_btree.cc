// Micro benchmarks of the volatile "btree": point lookups and inserts on a
// tree of 1M uniformly random keys, at node sizes 256, 512 and 1024 bytes;
// and interleaved multi-get (Ni et al. §6.1) on a 10M-key tree (larger than
// the last-level cache, where interleaving has misses to overlap) at node
// sizes 128..1024 B and batches of 1..16 keys. Reports items_per_second
// (keys looked up per second, one thread).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <vector>

#include "nvindex/index.h"

namespace nvindex {
namespace {

constexpr size_t kKeys = 1'000'000;

std::vector<uint64_t> random_keys(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> keys(n);
  for (uint64_t& k : keys) k = rng();
  return keys;
}

std::unique_ptr<Index<uint64_t>> new_btree(uint32_t node_size) {
  IndexOptions o;
  o.node_size = node_size;
  std::unique_ptr<Index<uint64_t>> idx;
  if (!make_index<uint64_t>("btree", o, &idx).ok()) return nullptr;
  return idx;
}

// One loaded tree per node size and key count, built once (outside any
// timed region).
Index<uint64_t>* loaded_btree(uint32_t node_size, const std::vector<uint64_t>& keys) {
  static std::map<std::pair<uint32_t, size_t>, std::unique_ptr<Index<uint64_t>>> trees;
  auto& t = trees[{node_size, keys.size()}];
  if (!t) {
    t = new_btree(node_size);
    for (uint64_t k : keys) (void)t->insert(k, k);
  }
  return t.get();
}

// Lookups of present keys, in random order, on a 1M-key tree.
void BM_BtreeLookup(benchmark::State& state) {
  static const std::vector<uint64_t> keys = random_keys(kKeys, 42);
  Index<uint64_t>* idx = loaded_btree(static_cast<uint32_t>(state.range(0)), keys);
  if (idx == nullptr) return state.SkipWithError("make_index failed");
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(idx->lookup(keys[i]));
    i = (i + 7919) % kKeys;
  }
  state.SetItemsProcessed(state.iterations());
}

// Inserts of 1M fresh random keys into an empty tree (the tree grows to 1M).
void BM_BtreeInsert(benchmark::State& state) {
  static const std::vector<uint64_t> keys = random_keys(kKeys, 7);
  for (auto _ : state) {
    state.PauseTiming();
    auto idx = new_btree(static_cast<uint32_t>(state.range(0)));
    if (idx == nullptr) return state.SkipWithError("make_index failed");
    state.ResumeTiming();
    for (uint64_t k : keys) benchmark::DoNotOptimize(idx->insert(k, k));
    state.PauseTiming();
    idx.reset();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * kKeys);
}

// multi_lookup of present keys in batches of state.range(1) keys (1: the
// interleaving is off, one lookup() per key), node size state.range(0), on a
// 10M-key tree; keys in random order.
void BM_BtreeMultiLookup(benchmark::State& state) {
  static const std::vector<uint64_t> keys = random_keys(10 * kKeys, 43);
  Index<uint64_t>* idx = loaded_btree(static_cast<uint32_t>(state.range(0)), keys);
  if (idx == nullptr) return state.SkipWithError("make_index failed");
  const size_t batch = static_cast<size_t>(state.range(1));
  std::vector<uint64_t> probe(batch);
  std::vector<std::optional<Value>> out(batch);
  size_t i = 0;
  for (auto _ : state) {
    for (uint64_t& k : probe) {
      k = keys[i];
      i = (i + 7919) % keys.size();
    }
    idx->multi_lookup(probe, out);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(batch));
}

BENCHMARK(BM_BtreeLookup)->Arg(256)->Arg(512)->Arg(1024);
BENCHMARK(BM_BtreeMultiLookup)->ArgsProduct({{128, 256, 512, 1024}, {1, 2, 4, 8, 16}});
BENCHMARK(BM_BtreeInsert)
    ->Arg(256)
    ->Arg(512)
    ->Arg(1024)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace nvindex
