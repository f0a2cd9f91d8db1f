// Micro benchmark of the shared DRAM inner tree (src/indexes/common/
// inner_tree.h) alone: find() of random keys over a tree built by build() on
// NVINDEX_MICRO_LEAVES leaves (default 202,723: a 2M-key lbtree of 256 B
// leaves after random inserts) at fill 0.69 (what random splits leave) and
// 1.0. items_per_second = finds per second, one thread. No leaf is touched:
// this is the inner-node part of every lbtree / fptree / wbtree:inner=dram
// lookup.
#include "indexes/common/inner_tree.h"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <vector>

#include "env_count.h"

namespace nvindex {
namespace {

size_t leaf_count() { return env_count("NVINDEX_MICRO_LEAVES", 202'723); }

void BM_InnerTreeFind(benchmark::State& state) {
  const size_t n = leaf_count();
  const double fill = static_cast<double>(state.range(0)) / 100.0;
  std::mt19937_64 rng(5);
  std::vector<uint64_t> lows(n);
  for (uint64_t& k : lows) k = rng() >> 1;
  std::sort(lows.begin(), lows.end());
  lows.erase(std::unique(lows.begin(), lows.end()), lows.end());
  std::vector<inner::LeafRef> leaves;
  for (size_t i = 0; i < lows.size(); ++i) leaves.emplace_back(lows[i], 256 * (i + 1));
  inner::InnerTree tree(256);
  if (!tree.build(leaves, fill).ok()) return state.SkipWithError("build failed");
  std::vector<uint64_t> probes(1 << 20);
  for (uint64_t& p : probes) p = rng() >> 1;
  size_t i = 0;
  uint64_t sum = 0;
  for (auto _ : state) {
    sum += tree.find(probes[i]).leaf;
    i = (i + 1) & (probes.size() - 1);
  }
  benchmark::DoNotOptimize(sum);
  state.counters["height"] = tree.height();
  state.SetItemsProcessed(state.iterations());
}

BENCHMARK(BM_InnerTreeFind)->Arg(69)->Arg(100)->MinTime(1.0);

}  // namespace
}  // namespace nvindex
