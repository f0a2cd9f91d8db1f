// PM cost counters: the registry of every thread's counters (DESIGN.md §3).
//
// Each thread's ThreadCounters is heap-allocated on first use and registered
// in a process-wide list that is never freed, so the totals of threads that
// have exited stay in every later snapshot() (a benchmark phase's worker
// threads usually exit before the harness reads the counters).
#include "nvindex/pm/counters.h"

#include <mutex>
#include <vector>

namespace nvindex::pm {
namespace {

struct Registry {
  std::mutex mu;
  std::vector<ThreadCounters*> all;
};

/// Never destroyed: threads may still register or count during static
/// destruction, and the counters must outlive every thread.
Registry& registry() {
  static Registry* r = new Registry;
  return *r;
}

}  // namespace

ThreadCounters& register_thread_counters() {
  if (detail::tls_counters != nullptr) return *detail::tls_counters;
  auto* c = new ThreadCounters;
  Registry& r = registry();
  {
    std::lock_guard<std::mutex> lock(r.mu);
    r.all.push_back(c);
  }
  detail::tls_counters = c;
  return *c;
}

CounterSnapshot snapshot() {
  CounterSnapshot s;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  for (const ThreadCounters* c : r.all) {
    s.flushes += c->flushes.load(std::memory_order_relaxed);
    s.lines_flushed += c->lines_flushed.load(std::memory_order_relaxed);
    s.fences += c->fences.load(std::memory_order_relaxed);
    s.naws += c->naws.load(std::memory_order_relaxed);
    s.nt_bytes += c->nt_bytes.load(std::memory_order_relaxed);
    s.log_bytes += c->log_bytes.load(std::memory_order_relaxed);
    s.allocs += c->allocs.load(std::memory_order_relaxed);
    s.frees += c->frees.load(std::memory_order_relaxed);
    s.media_writes += c->media_writes.load(std::memory_order_relaxed);
    s.lines_written_back += c->lines_written_back.load(std::memory_order_relaxed);
    s.smos += c->smos.load(std::memory_order_relaxed);
    s.smo_ns += c->smo_ns.load(std::memory_order_relaxed);
    for (int b = 0; b < kSmoTimeBuckets; ++b) {
      s.smo_time[b] += c->smo_time[b].load(std::memory_order_relaxed);
    }
  }
  return s;
}

uint64_t CounterSnapshot::smos_timed() const {
  uint64_t n = 0;
  for (uint64_t c : smo_time) n += c;
  return n;
}

CounterSnapshot CounterSnapshot::operator-(const CounterSnapshot& o) const {
  CounterSnapshot d;
  d.flushes = flushes - o.flushes;
  d.lines_flushed = lines_flushed - o.lines_flushed;
  d.fences = fences - o.fences;
  d.naws = naws - o.naws;
  d.nt_bytes = nt_bytes - o.nt_bytes;
  d.log_bytes = log_bytes - o.log_bytes;
  d.allocs = allocs - o.allocs;
  d.frees = frees - o.frees;
  d.media_writes = media_writes - o.media_writes;
  d.lines_written_back = lines_written_back - o.lines_written_back;
  d.smos = smos - o.smos;
  d.smo_ns = smo_ns - o.smo_ns;
  for (int b = 0; b < kSmoTimeBuckets; ++b) d.smo_time[b] = smo_time[b] - o.smo_time[b];
  return d;
}

CounterSnapshot& CounterSnapshot::operator+=(const CounterSnapshot& o) {
  flushes += o.flushes;
  lines_flushed += o.lines_flushed;
  fences += o.fences;
  naws += o.naws;
  nt_bytes += o.nt_bytes;
  log_bytes += o.log_bytes;
  allocs += o.allocs;
  frees += o.frees;
  media_writes += o.media_writes;
  lines_written_back += o.lines_written_back;
  smos += o.smos;
  smo_ns += o.smo_ns;
  for (int b = 0; b < kSmoTimeBuckets; ++b) smo_time[b] += o.smo_time[b];
  return *this;
}

}  // namespace nvindex::pm
