// Micro benchmarks of the persist primitives and the allocator (Google
// Benchmark), in the process-wide default mode (emulated: real flush
// instructions on DRAM, no injected latency). Run: build/<dir>/pm_primitives.
#include <benchmark/benchmark.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "nvindex/pm/allocator.h"
#include "nvindex/pm/persist.h"
#include "nvindex/pm/pool.h"

namespace {

using namespace nvindex::pm;

/// A 4096-aligned, zeroed scratch buffer standing in for PM.
struct Buffer {
  Buffer() : p(static_cast<char*>(std::aligned_alloc(4096, 4096))) { std::memset(p, 0, 4096); }
  ~Buffer() { std::free(p); }
  char* p;
};

/// flush + fence of `range(0)` lines, each stored to first (a dirty line).
void BM_PersistLines(benchmark::State& state) {
  Buffer buf;
  const size_t lines = static_cast<size_t>(state.range(0));
  uint64_t v = 0;
  for (auto _ : state) {
    for (size_t i = 0; i < lines; ++i) store(reinterpret_cast<uint64_t*>(buf.p + 64 * i), ++v);
    persist(buf.p, 64 * lines);
  }
  state.counters["lines"] = static_cast<double>(lines);
}
BENCHMARK(BM_PersistLines)->Arg(1)->Arg(4);

/// One 8-byte NVM atomic write (store, flush, fence).
void BM_Naw(benchmark::State& state) {
  alignas(64) std::atomic<uint64_t> word{0};
  uint64_t v = 0;
  for (auto _ : state) naw(&word, ++v);
}
BENCHMARK(BM_Naw);

/// Non-temporal copy of 256 B (one XPLine) to an aligned destination, fenced.
void BM_NtCopy256(benchmark::State& state) {
  Buffer dst;
  alignas(64) char src[256] = {1};
  for (auto _ : state) {
    nt_copy(dst.p, src, sizeof(src));
    fence();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * 256);
}
BENCHMARK(BM_NtCopy256);

/// allocate(256) + free of the same block (the thread-cache fast path).
void BM_AllocateFree256(benchmark::State& state) {
  std::unique_ptr<Pool> pool;
  if (!Pool::create_anonymous(64ull << 20, "bench", &pool).ok()) {
    state.SkipWithError("cannot create an anonymous pool");
    return;
  }
  Allocator& a = pool->allocator();
  for (auto _ : state) {
    uint64_t off = 0;
    if (!a.allocate(256, &off).ok()) {
      state.SkipWithError("allocate failed");
      break;
    }
    benchmark::DoNotOptimize(off);
    a.free(off);
  }
}
BENCHMARK(BM_AllocateFree256);

}  // namespace
