// The benchmark driver: load, run, check, verify, recover. See driver.h.
#include "bench/driver.h"

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cinttypes>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "bench/string_keys.h"
#include "nvindex/pm/pool.h"
#include "util/quote.h"
#include "util/temp_files.h"

namespace nvindex::bench {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

/// One worker thread's private tallies, on its own cache lines. Only the
/// owner writes them; the monitor reads `done` (relaxed) while the phase runs,
/// everything else is read after join().
struct alignas(64) ThreadState {
  std::atomic<uint64_t> done{0};  ///< operations completed so far (progress)
  alignas(64) std::array<TypeCounts, kOpTypes> by_type{};
  uint64_t completed = 0;
  uint64_t checked = 0;
  uint64_t failures = 0;
  uint64_t skipped = 0;
  int64_t key_delta = 0;       ///< inserts expected to add a key minus removes expected to drop one
  bool delta_unknown = false;  ///< an insert or remove had Expect::kAny
  std::vector<std::string> examples;
  std::vector<uint64_t> latencies;  ///< sampled run latencies, ns
  Clock::time_point end;
  ThreadPhaseCounters perf;  ///< this worker's perf counters over the phase

  void fail(std::string what) {
    ++failures;
    if (examples.size() < kMaxFailureExamples) examples.push_back(std::move(what));
  }
};

/// The CPUs this process may run on, for round-robin pinning.
std::vector<int> allowed_cpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
    }
  }
  return cpus;
}

void pin_current_thread(const std::vector<int>& cpus, unsigned t) {
  if (cpus.empty()) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpus[t % cpus.size()], &set);
  // A refusal (containers, restricted cpusets) only costs stability: ignore it.
  (void)pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

std::string_view expect_name(Expect e) {
  switch (e) {
    case Expect::kFound:
      return "found";
    case Expect::kNotFound:
      return "not found";
    case Expect::kAny:
      return "any";
  }
  return "?";
}

/// A key as failure messages show it: the decimal of an integer key, a
/// string key quoted (util/quote.h).
std::string key_text(uint64_t key) { return std::to_string(key); }
std::string key_text(std::string_view key) { return quote_input(key); }

/// The hash make_value() takes for a key (string_keys.h): an integer key
/// itself, a string key's string_key_hash.
inline uint64_t value_key(uint64_t key) { return key; }
inline uint64_t value_key(std::string_view key) { return string_key_hash(key); }

template <class K>
std::string where(std::string_view phase, unsigned t, uint64_t i, std::string_view op, K key) {
  return std::string(phase) + " thread " + std::to_string(t) + " op " + std::to_string(i) + ": " +
         std::string(op) + " key " + key_text(key);
}

/// Checks a write's Status against its expectation: Ok is the kFound outcome
/// (update/remove of a present key, insert of a fresh key), `absent_code`
/// (NotFound, or AlreadyExists for inserts) the kNotFound outcome, any other
/// code an index error. Returns whether the operation succeeded (TypeCounts).
/// `key` is the operation's key (K: uint64_t or std::string_view).
template <class K>
bool check_write(const Status& st, Expect expect, Code absent_code, ThreadState& ts,
                 std::string_view phase, unsigned t, uint64_t i, const Operation& op, K key) {
  const bool ok = st.ok();
  const bool other = !ok && st.code() != absent_code;
  if (other) {
    ts.fail(where(phase, t, i, op_name(op.type), key) + ": index error " + st.ToString());
    return false;
  }
  if (expect == Expect::kAny) return ok;
  const bool want_ok = expect == Expect::kFound;
  if (ok != want_ok) {
    ts.fail(where(phase, t, i, op_name(op.type), key) + ": expected " +
            (want_ok ? "Ok" : std::string(CodeName(absent_code))) + ", got " + st.ToString());
    return false;
  }
  return true;
}

/// Checks a lookup's result. Returns whether it succeeded. The common
/// verdict (found with the right value when expected, absent when expected)
/// is inline, a few instructions in the timed loop, so the harness adds
/// little between one lookup's misses and the next's (an index whose lookups
/// overlap in the CPU would otherwise be measured slower than its code is);
/// everything else, failures included, is check_read_rest. `vkey` is the
/// key's value_key (precomputed for string keys).
template <class K>
[[gnu::noinline]] bool check_read_rest(const std::optional<Value>& v, Expect expect,
                                       ThreadState& ts, std::string_view phase, unsigned t,
                                       uint64_t i, const Operation& op, K key, uint64_t vkey);
template <class K>
inline bool check_read(const std::optional<Value>& v, Expect expect, ThreadState& ts,
                       std::string_view phase, unsigned t, uint64_t i, const Operation& op, K key,
                       uint64_t vkey) {
  if (v ? expect != Expect::kNotFound && value_matches(vkey, *v) : expect == Expect::kNotFound) {
    return true;
  }
  return check_read_rest(v, expect, ts, phase, t, i, op, key, vkey);
}

template <class K>
[[gnu::noinline]] bool check_read_rest(const std::optional<Value>& v, Expect expect,
                                       ThreadState& ts, std::string_view phase, unsigned t,
                                       uint64_t i, const Operation& op, K key, uint64_t vkey) {
  if (v && !value_matches(vkey, *v)) {
    char buf[40];
    std::snprintf(buf, sizeof(buf), "0x%016" PRIx64, *v);
    ts.fail(where(phase, t, i, op_name(op.type), key) + ": wrong value " + buf);
    return false;
  }
  if (expect == Expect::kAny) return v.has_value();
  const bool want = expect == Expect::kFound;
  if (v.has_value() != want) {
    ts.fail(where(phase, t, i, op_name(op.type), key) + ": expected " +
            std::string(expect_name(expect)) + ", got " + (v ? "found" : "not found"));
    return false;
  }
  return true;
}

/// Checks a scan's pairs: count <= requested, keys >= start and strictly
/// ascending, every value matches its key; Expect::kFound wants >= 1 pair,
/// Expect::kNotFound wants none. Returns whether it succeeded. `start` is
/// the scan's start key; keys compare as K does (numbers, or bytes).
template <class K>
bool check_scan(const std::vector<std::pair<OwnedKey<K>, Value>>& out, size_t n, Expect expect,
                ThreadState& ts, std::string_view phase, unsigned t, uint64_t i,
                const Operation& op, K start) {
  auto bad = [&](const std::string& what) {
    ts.fail(where(phase, t, i, "scan", start) + " count " + std::to_string(op.scan_length) + ": " +
            what);
    return false;
  };
  if (n != out.size()) {
    return bad("returned " + std::to_string(n) + " but appended " + std::to_string(out.size()));
  }
  if (n > op.scan_length) return bad("returned " + std::to_string(n) + " pairs");
  for (size_t j = 0; j < n; ++j) {
    const K k = out[j].first;
    if (j == 0 && k < start) return bad("first key " + key_text(k) + " below start");
    if (j > 0 && k <= K(out[j - 1].first)) {
      return bad("keys not ascending at pair " + std::to_string(j) + " (" +
                 key_text(K(out[j - 1].first)) + " then " + key_text(k) + ")");
    }
    if (!value_matches(value_key(k), out[j].second)) {
      return bad("wrong value for key " + key_text(k));
    }
  }
  if (expect == Expect::kAny) return n > 0;
  if ((n > 0) != (expect == Expect::kFound)) {
    return bad("expected " + std::string(expect_name(expect)) + ", got " + std::to_string(n) +
               " pairs");
  }
  return true;
}

/// Runs and checks one run-phase operation on `key` (the op's key as K; for
/// string keys a view into the thread's pre-built StringKeyList) whose
/// value_key is `vkey`. `version` tags written values. Returns whether it
/// succeeded; failures are recorded in ts. Inlined into the timed loop (one
/// call site per K), so a lookup costs the loop no call.
template <class K>
[[gnu::always_inline]] inline bool run_op(Index<K>& index, const Operation& op, K key,
                                          uint64_t vkey, uint32_t version,
                                          std::vector<std::pair<OwnedKey<K>, Value>>* scratch,
                                          ThreadState& ts, unsigned t, uint64_t i,
                                          std::optional<uint64_t>* latency_ns) {
  const bool timed = latency_ns != nullptr;
  Clock::time_point t0;
  if (timed) t0 = Clock::now();
  auto stop = [&] {
    if (timed) {
      *latency_ns = static_cast<uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
    }
  };
  switch (op.type) {
    case OpType::kRead: {
      std::optional<Value> v = index.lookup(key);
      stop();
      return check_read(v, op.expect, ts, "run", t, i, op, key, vkey);
    }
    case OpType::kInsert: {
      Status st = index.insert(key, make_value(vkey, version));
      stop();
      return check_write(st, op.expect, Code::kAlreadyExists, ts, "run", t, i, op, key);
    }
    case OpType::kUpdate: {
      Status st = index.update(key, make_value(vkey, version));
      stop();
      return check_write(st, op.expect, Code::kNotFound, ts, "run", t, i, op, key);
    }
    case OpType::kRemove: {
      Status st = index.remove(key);
      stop();
      return check_write(st, op.expect, Code::kNotFound, ts, "run", t, i, op, key);
    }
    case OpType::kScan: {
      size_t n = index.scan(key, op.scan_length, scratch);
      stop();
      return check_scan<K>(*scratch, n, op.expect, ts, "run", t, i, op, key);
    }
    case OpType::kReadModifyWrite: {
      std::optional<Value> v = index.lookup(key);
      Status st;
      if (v) st = index.update(key, make_value(vkey, version));
      stop();
      if (!check_read(v, op.expect, ts, "run", t, i, op, key, vkey)) return false;
      if (!v) return op.expect == Expect::kNotFound;  // absent: nothing to modify
      return check_write(st, op.expect == Expect::kNotFound ? Expect::kAny : op.expect,
                         Code::kNotFound, ts, "run", t, i, op, key);
    }
  }
  return false;
}

/// Runs `body(t, state, deadline)` on `threads` pinned std::threads that
/// start together; the calling thread monitors progress (every 100 ms) and
/// builds the per-second timeline. Fills phase operations/seconds/throughput
/// and the PM counters spent. With `perf`, each worker opens its own perf
/// counters (bench/perf.h) before the barrier and reads them right before and
/// after its body; their sum over the workers is the phase's PhaseResult::cpu.
class PhaseRunner {
 public:
  /// `energy`: the meter read around the phase (null: no energy figure);
  /// `disk`: the disk meter of a block-device index (null: no disk figure).
  PhaseRunner(unsigned threads, bool pin, const pm::PersistConfig& pm, bool perf,
              const EnergyMeter* energy, const DiskMeter* disk)
      : n_(threads),
        pin_(pin),
        media_model_(pm.media_model),
        perf_(perf),
        energy_(energy),
        disk_(disk),
        states_(threads) {}

  using Body = std::function<void(unsigned t, ThreadState& ts, std::optional<Clock::time_point>)>;

  void run(std::string_view phase, std::string_view index, uint64_t total_ops, double duration_s,
           ProgressSink* progress, const Body& body, PhaseResult* out,
           std::vector<uint64_t>* timeline, double* last_fraction) {
    const std::vector<int> cpus = pin_ ? allowed_cpus() : std::vector<int>{};
    std::atomic<unsigned> ready{0};
    std::atomic<bool> go{false};
    std::optional<Clock::time_point> deadline;
    Clock::time_point start;
    std::vector<std::thread> workers;
    workers.reserve(n_);
    for (unsigned t = 0; t < n_; ++t) {
      workers.emplace_back([&, t] {
        pin_current_thread(cpus, t);
        pm::thread_counters();  // register before the clock starts
        states_[t].perf.open(perf_, "turned off (--no-perf-counters)");
        ready.fetch_add(1);
        while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
        states_[t].perf.start();
        body(t, states_[t], deadline);
        states_[t].end = Clock::now();
        states_[t].perf.stop();
        // Media model: complete this thread's media_writes before the
        // after-phase snapshot (a no-op when the model is off).
        if (media_model_) pm::media_drain();
        std::lock_guard lock(mu_);
        ++finished_;
        cv_.notify_all();
      });
    }
    while (ready.load() < n_) std::this_thread::yield();
    // Media model: lines left dirty or buffered by what ran before (index
    // creation, an earlier index's verify or recovery) are written out
    // before the phase's counters start, so no phase pays for another's.
    if (media_model_) pm::media_drain();
    const pm::CounterSnapshot before = pm::snapshot();
    const EnergySample energy_before = energy_ ? energy_->sample() : EnergySample{};
    const DiskSample disk_before = disk_ ? disk_->sample() : DiskSample{};
    const UsageSample usage_before = usage_now();
    start = Clock::now();
    if (duration_s > 0) {
      deadline = start + std::chrono::duration_cast<Clock::duration>(
                             std::chrono::duration<double>(duration_s));
    }
    go.store(true, std::memory_order_release);

    const uint64_t last_second_total =
        monitor(phase, index, total_ops, duration_s, progress, start, timeline);
    for (std::thread& w : workers) w.join();
    const UsageSample usage_after = usage_now();
    const DiskSample disk_after = disk_ ? disk_->sample() : DiskSample{};
    if (media_model_) pm::media_drain();
    const pm::CounterSnapshot after = pm::snapshot();
    if (energy_) out->energy = energy_->between(energy_before, energy_->sample());

    Clock::time_point end = start;
    uint64_t ops = 0;
    out->cpu = cpu_counters_all_available();
    for (const ThreadState& s : states_) {
      end = std::max(end, s.end);
      ops += s.completed;
      add_thread_counts(&out->cpu, s.perf.counts());
    }
    out->operations = ops;
    out->seconds = seconds_between(start, end);
    out->throughput = out->seconds > 0 ? ops / out->seconds : 0;
    out->pm = after - before;
    out->process = usage_between(usage_before, usage_after, out->seconds);
    if (disk_) out->disk = disk_between(disk_before, disk_after, out->seconds);
    if (timeline != nullptr) {
      timeline->push_back(ops - last_second_total);
      const double whole = static_cast<double>(timeline->size() - 1);
      *last_fraction = std::clamp(out->seconds - whole, 0.0, 1.0);
    }
    if (progress != nullptr) {
      progress->update(phase, index, 1.0, out->throughput);
      progress->finish(phase, index);
    }
  }

  std::vector<ThreadState>& states() { return states_; }

 private:
  /// The calling thread while the workers run: wakes every 100 ms from
  /// `start` until every worker is done, appends each whole second's
  /// completed operations to *timeline (when not null) and reports the
  /// fraction done (of duration_s seconds, else of total_ops) and the
  /// ops/s so far to `progress` (when not null). Returns the operations the
  /// timeline holds so far.
  uint64_t monitor(std::string_view phase, std::string_view index, uint64_t total_ops,
                   double duration_s, ProgressSink* progress, Clock::time_point start,
                   std::vector<uint64_t>* timeline) {
    uint64_t last_second_total = 0;
    int tick = 0;
    for (;;) {
      ++tick;
      const Clock::time_point wake = start + std::chrono::milliseconds(100) * tick;
      {
        std::unique_lock lock(mu_);
        if (cv_.wait_until(lock, wake, [&] { return finished_ == n_; })) break;
      }
      const uint64_t total = done_total();
      if (tick % 10 == 0 && timeline != nullptr) {
        timeline->push_back(total - last_second_total);
        last_second_total = total;
      }
      if (progress != nullptr) {
        const double el = seconds_between(start, Clock::now());
        double frac = duration_s > 0 ? el / duration_s
                                     : (total_ops ? static_cast<double>(total) / total_ops : 1);
        progress->update(phase, index, std::min(1.0, frac), el > 0 ? total / el : 0);
      }
    }
    return last_second_total;
  }

  uint64_t done_total() const {
    uint64_t s = 0;
    for (const ThreadState& t : states_) s += t.done.load(std::memory_order_relaxed);
    return s;
  }

  const unsigned n_;
  const bool pin_;
  const bool media_model_;
  const bool perf_;
  const EnergyMeter* energy_;
  const DiskMeter* disk_;
  std::vector<ThreadState> states_;
  std::mutex mu_;
  std::condition_variable cv_;
  unsigned finished_ = 0;
};

}  // namespace

std::vector<std::string_view> string_key_indexes() {
  std::vector<std::string_view> names;
  for (const IndexEntry& e : registered_indexes()) {
    if (e.caps.string_keys && e.make_string != nullptr) names.push_back(e.name);
  }
  return names;
}

std::string string_key_index_list() {
  std::string s;
  for (std::string_view n : string_key_indexes()) {
    s += s.empty() ? "" : ", ";
    s += n;
    if (is_test_only_index(n)) s += " (test only)";
  }
  return s.empty() ? "none" : s;
}

namespace {

/// The automatic pool size: 64 MiB + 256 B per key the run can hold, plus,
/// for string keys, the longest key's bytes per key (its key record).
uint64_t auto_pool_size(const Workload& w) {
  uint64_t keys = w.load_keys.size() + w.total_operations();
  uint64_t per_key = 256;
  if (w.spec.key_type == KeyType::kString) {
    size_t longest = w.spec.key_size;
    for (const std::string& k : w.key_strings) longest = std::max(longest, k.size());
    per_key += longest + 1;
  }
  uint64_t bytes = (64ull << 20) + keys * per_key;
  return (bytes + (1ull << 20) - 1) & ~((1ull << 20) - 1);
}

void merge_thread_states(std::vector<ThreadState>& states, IndexResult* out,
                         std::vector<uint64_t>* latencies) {
  for (ThreadState& s : states) {
    out->checked += s.checked;
    out->failures += s.failures;
    out->skipped += s.skipped;
    for (std::string& e : s.examples) {
      if (out->failure_examples.size() < kMaxFailureExamples) {
        out->failure_examples.push_back(std::move(e));
      }
    }
    if (latencies != nullptr) {
      for (int k = 0; k < kOpTypes; ++k) {
        out->by_type[k].completed += s.by_type[k].completed;
        out->by_type[k].succeeded += s.by_type[k].succeeded;
        out->by_type[k].flushes += s.by_type[k].flushes;
        out->by_type[k].lines_flushed += s.by_type[k].lines_flushed;
        out->by_type[k].fences += s.by_type[k].fences;
        out->by_type[k].smo_ops += s.by_type[k].smo_ops;
        out->by_type[k].smos += s.by_type[k].smos;
        out->by_type[k].smo_flushes += s.by_type[k].smo_flushes;
        out->by_type[k].smo_lines_flushed += s.by_type[k].smo_lines_flushed;
        out->by_type[k].smo_fences += s.by_type[k].smo_fences;
      }
      latencies->insert(latencies->end(), s.latencies.begin(), s.latencies.end());
    }
  }
}

/// After a bulk load: checks that the index holds exactly `sorted` (keys and
/// values). Ordered: scans the whole index in chunks of 4096 pairs and
/// compares pair by pair, then scans past the last key (must be empty).
/// Unordered: looks every key up. Adds one check per key to ts.checked; the
/// first mismatch is one failure and ends the check (later pairs would all
/// be shifted).
template <class K>
void check_bulk_loaded(Index<K>& index, bool ordered,
                       const std::vector<std::pair<K, Value>>& sorted, ThreadState& ts) {
  const uint64_t n = sorted.size();
  ts.checked += n;
  if (n == 0) return;
  if (!ordered) {
    for (uint64_t i = 0; i < n; ++i) {
      const std::optional<Value> v = index.lookup(sorted[i].first);
      if (!v || *v != sorted[i].second) {
        ts.fail("after bulk load: key " + key_text(sorted[i].first) +
                (v ? " has a wrong value" : " is missing"));
        return;
      }
    }
    return;
  }
  std::vector<std::pair<OwnedKey<K>, Value>> buf;
  uint64_t i = 0;
  while (i < n) {
    const size_t got = index.scan(sorted[i].first, 4096, &buf);
    if (got == 0 || buf.size() != got) {
      ts.fail("after bulk load: scan from key " + key_text(sorted[i].first) + " returned " +
              std::to_string(got) + " pairs, " + std::to_string(n - i) + " keys expected");
      return;
    }
    for (const auto& [k, v] : buf) {
      if (i >= n || K(k) != sorted[i].first) {
        ts.fail("after bulk load: scan returned key " + key_text(K(k)) + " where " +
                (i < n ? "key " + key_text(sorted[i].first) : std::string("no more keys")) +
                " was loaded");
        return;
      }
      if (v != sorted[i].second) {
        ts.fail("after bulk load: key " + key_text(K(k)) + " has a wrong value");
        return;
      }
      ++i;
    }
  }
  // The smallest key above the last: last + 1, or for a string the string
  // with a 0 byte appended (none past UINT64_MAX or a 255-byte string with
  // no room left: scanning from the last key then must return only it).
  size_t want = 0;
  size_t got = 0;
  if constexpr (std::is_same_v<K, uint64_t>) {
    want = sorted.back().first == UINT64_MAX ? 1 : 0;
    got = index.scan(want ? sorted.back().first : sorted.back().first + 1, 2, &buf);
  } else {
    const std::string next = std::string(sorted.back().first) + '\0';
    want = next.size() > kMaxKeyBytes ? 1 : 0;
    got = index.scan(want ? sorted.back().first : std::string_view(next), 2, &buf);
  }
  if (got > want) {
    ts.fail("after bulk load: key " + key_text(K(buf[want].first)) +
            " above the largest loaded key");
  }
}

/// The stderr progress line (see make_stderr_progress).
class StderrProgress final : public ProgressSink {
 public:
  explicit StderrProgress(double interval_s) : tty_(isatty(2) == 1), interval_s_(interval_s) {}
  void update(std::string_view phase, std::string_view index, double fraction,
              double ops_per_s) override {
    const Clock::time_point now = Clock::now();
    if (!tty_ && printed_ && fraction < 1 && seconds_between(last_, now) < interval_s_) return;
    last_ = now;
    printed_ = true;
    char line[160];
    std::snprintf(line, sizeof(line), "%.*s %.*s %3.0f%% %.2f Mops/s",
                  static_cast<int>(phase.size()), phase.data(), static_cast<int>(index.size()),
                  index.data(), fraction * 100, ops_per_s / 1e6);
    if (tty_) {
      std::fprintf(stderr, "\r%-60s", line);
    } else {
      std::fprintf(stderr, "%s\n", line);
    }
    std::fflush(stderr);
  }
  void finish(std::string_view, std::string_view) override {
    if (tty_) std::fputc('\n', stderr);
    printed_ = false;
  }

 private:
  const bool tty_;
  const double interval_s_;
  bool printed_ = false;
  Clock::time_point last_;
};

}  // namespace

TypeCounts TypeCounts::without_smo() const {
  TypeCounts c;
  c.completed = completed - smo_ops;
  c.flushes = flushes - smo_flushes;
  c.lines_flushed = lines_flushed - smo_lines_flushed;
  c.fences = fences - smo_fences;
  return c;
}

TypeCounts TypeCounts::with_smo() const {
  TypeCounts c;
  c.completed = smo_ops;
  c.flushes = smo_flushes;
  c.lines_flushed = smo_lines_flushed;
  c.fences = smo_fences;
  return c;
}

std::string_view load_method_name(LoadMethod m) {
  switch (m) {
    case LoadMethod::kInserts:
      return "inserts";
    case LoadMethod::kBulkLoad:
      return "bulk_load";
    case LoadMethod::kBulkLoadByInserts:
      return "bulk_load_by_inserts";
  }
  return "?";
}

std::string file_safe(std::string_view text) {
  std::string s(text);
  for (char& c : s) {
    const bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
    if (!ok) c = '_';
  }
  return s;
}

std::unique_ptr<ProgressSink> make_stderr_progress(double interval_s) {
  return std::make_unique<StderrProgress>(interval_s);
}

double media_write_amplification(const pm::CounterSnapshot& pm) {
  if (pm.lines_written_back == 0) return 0;
  return static_cast<double>(pm.media_writes) * pm::kXPLineSize /
         (static_cast<double>(pm.lines_written_back) * pm::kLineSize);
}

Status check_run_options(const BenchOptions& options, const IndexEntry& entry) {
  if (!(options.fill_factor > 0.0 && options.fill_factor <= 1.0)) {
    return Status::InvalidArgument("fill factor must be in (0, 1], got " +
                                   std::to_string(options.fill_factor));
  }
  if (options.lookup_batch < 1 || options.lookup_batch > kMaxLookupBatch) {
    return Status::InvalidArgument("lookup batch must be in 1.." + std::to_string(kMaxLookupBatch) +
                                   ", got " + std::to_string(options.lookup_batch));
  }
  if (options.in_flight < 1 || options.in_flight > kMaxInFlight) {
    return Status::InvalidArgument("operations in flight must be in 1.." +
                                   std::to_string(kMaxInFlight) + ", got " +
                                   std::to_string(options.in_flight));
  }
  if (options.in_flight > 1 && options.lookup_batch > 1) {
    return Status::InvalidArgument(
        "operations in flight (Index::execute) and lookup batches (multi_lookup) are two ways "
        "to batch reads: choose one");
  }
  if (options.in_flight > 1 && needs_pool(entry.caps)) {
    return Status::InvalidArgument(
        "operations in flight are for indexes that make no PM writes (block-device and volatile "
        "ones): '" +
        std::string(entry.name) +
        "' runs each operation to its end on the calling thread, and a batch's PM cost could "
        "not be charged to its operations; use threads");
  }
  return Status::Ok();
}

namespace {

/// Checks what run_benchmark() can refuse before any work (the file comment
/// of driver.h): the index is registered (*entry), takes the workload's key
/// type, the workload has thread streams, and check_run_options.
/// InvalidArgument otherwise, naming the registered indexes for an unknown
/// one and the string-key ones for an index without string keys.
Status check_inputs(const BenchOptions& options, const Workload& workload,
                    std::string_view index_name, const IndexEntry** entry) {
  *entry = find_index_entry(index_name);
  if (*entry == nullptr) {
    std::string known;
    for (const IndexEntry& e : registered_indexes()) {
      known += known.empty() ? "" : ", ";
      known += e.name;
    }
    return Status::InvalidArgument("unknown index '" + std::string(index_name) +
                                   "' (registered: " + known + ")");
  }
  if (workload.per_thread.empty()) {
    return Status::InvalidArgument("workload has no thread streams (threads must be >= 1)");
  }
  if (workload.spec.key_type == KeyType::kString && (*entry)->make_string == nullptr) {
    return Status::InvalidArgument(
        "index '" + std::string(index_name) +
        "' does not take string keys (string-key indexes: " + string_key_index_list() + ")");
  }
  return check_run_options(options, **entry);
}

/// IndexInfo::counters `after` minus `before`, by name, in after's order (a
/// name missing from before counts from 0).
std::vector<std::pair<std::string, uint64_t>> counter_delta(
    const std::vector<std::pair<std::string, uint64_t>>& before,
    const std::vector<std::pair<std::string, uint64_t>>& after) {
  std::vector<std::pair<std::string, uint64_t>> d;
  for (const auto& [name, v] : after) {
    uint64_t b = 0;
    for (const auto& [n0, v0] : before) {
      if (n0 == name) b = v0;
    }
    d.emplace_back(name, v >= b ? v - b : 0);
  }
  return d;
}

/// One worker's PM counters (pm::thread_counters()) as they were after its
/// previous operation. charge() bills the difference to the operation just
/// done: exact per operation because only this thread writes them and the
/// harness makes no PM writes between two operations, so each operation
/// reads the four counters once (see driver.h, TypeCounts).
class OpCostMeter {
 public:
  explicit OpCostMeter(const pm::ThreadCounters& pc)
      : pc_(pc),
        flushes0_(pc.flushes.load(kRelaxed)),
        lines0_(pc.lines_flushed.load(kRelaxed)),
        fences0_(pc.fences.load(kRelaxed)),
        smos0_(pc.smos.load(kRelaxed)) {}

  /// Adds the flushes, lines and fences since the previous call to c, and to
  /// its smo_* fields too when an SMO was counted in between.
  [[gnu::always_inline]] inline void charge(TypeCounts& c) {
    const uint64_t flushes1 = pc_.flushes.load(kRelaxed);
    const uint64_t lines1 = pc_.lines_flushed.load(kRelaxed);
    const uint64_t fences1 = pc_.fences.load(kRelaxed);
    const uint64_t smos1 = pc_.smos.load(kRelaxed);
    const uint64_t flushes = flushes1 - flushes0_;
    const uint64_t lines = lines1 - lines0_;
    const uint64_t fences = fences1 - fences0_;
    const uint64_t smos = smos1 - smos0_;
    flushes0_ = flushes1;
    lines0_ = lines1;
    fences0_ = fences1;
    smos0_ = smos1;
    c.flushes += flushes;
    c.lines_flushed += lines;
    c.fences += fences;
    if (smos > 0) {
      ++c.smo_ops;
      c.smos += smos;
      c.smo_flushes += flushes;
      c.smo_lines_flushed += lines;
      c.smo_fences += fences;
    }
  }

 private:
  static constexpr auto kRelaxed = std::memory_order_relaxed;
  const pm::ThreadCounters& pc_;
  uint64_t flushes0_, lines0_, fences0_, smos0_;
};

/// One run_benchmark() call, phase by phase (driver.h, steps 1-5): open
/// (PM configuration, pool, index), load, run, check (structure and key
/// count), recover. The destructor closes the index and the pool and
/// removes a pool file this run created, unless BenchOptions::keep_pool.
/// Results go to *out; progress to `progress` (may be null).
/// K is the key type (Workload::spec.key_type): uint64_t, where an id is its
/// own key, or std::string_view, where the keys of the load phase and of
/// each thread's stream are laid out in StringKeyLists by open(), before any
/// timed phase, so the timed loops never format a key.
template <class K>
class BenchRun {
  static constexpr bool kStringKeys = std::is_same_v<K, std::string_view>;

 public:
 public:
  BenchRun(const BenchOptions& options, const Workload& workload, std::string_view index_name,
           const IndexEntry& entry, IndexResult* out, ProgressSink* progress)
      : options_(options),
        workload_(workload),
        index_name_(index_name),
        entry_(entry),
        out_(out),
        progress_(progress),
        threads_(static_cast<unsigned>(workload.per_thread.size())),
        layout_(pool_layout(index_name, key_type_of<K>)) {}
  BenchRun(const BenchRun&) = delete;
  BenchRun& operator=(const BenchRun&) = delete;
  ~BenchRun() {
    index_.reset();
    pool_.reset();
    if (device_dir_ != nullptr && options_.keep_pool) device_dir_->keep();
    device_dir_.reset();  // removes the store's directory
    if (remove_pool_file_) {
      std::error_code ec;
      std::filesystem::remove(pool_path_, ec);
    }
  }

  /// Configures the PM layer (BenchOptions::pm), creates the pool and the
  /// index. Errors of pm::Pool::create / create_anonymous and make_index;
  /// InvalidArgument for threads > 1 on an index that is not thread-safe.
  Status open() {
    out_->persistent = entry_.caps.persistent;
    out_->media_model = options_.pm.media_model;
    if (options_.energy) {
      meter_ = std::make_unique<EnergyMeter>(options_.powercap_root);
      out_->energy_measured = true;
      out_->energy_why = meter_->why();
      out_->energy_dram = meter_->has_dram();
    }
    pm::configure(options_.pm);
    Status st = needs_device(entry_.caps) ? create_device() : create_pool();
    if (st.ok()) st = create_index();
    if (st.ok()) build_string_keys();
    return st;
  }

  /// LOAD: one bulk_load() of the sorted keys, or inserts split evenly over
  /// the threads; every result checked (driver.h, step 2).
  void load() {
    const IndexInfo before = index_->info();
    if (options_.bulk_load) {
      load_by_bulk_load();
    } else {
      load_by_inserts();
    }
    out_->load.index_counters = counter_delta(before.counters, index_->info().counters);
  }

  /// RUN: each thread replays its own stream (run_thread) behind a barrier,
  /// with the run's time limit; per-type counts, PM cost, latencies and the
  /// timeline go to the result (driver.h, step 3).
  void run() {
    PhaseRunner runner(threads_, options_.pin_threads, options_.pm, options_.perf_counters,
                       energy_meter(), disk_meter());
    auto body = [this](unsigned t, ThreadState& ts, std::optional<Clock::time_point> deadline) {
      if (options_.in_flight > 1) {
        run_thread_in_flight(t, ts, deadline);
      } else if (options_.lookup_batch > 1) {
        run_thread<true>(t, ts, deadline);
      } else {
        run_thread<false>(t, ts, deadline);
      }
    };
    const IndexInfo before = index_->info();
    runner.run("run", out_->index, workload_.total_operations(), options_.duration_seconds,
               progress_, body, &out_->run, &out_->timeline, &out_->timeline_last_fraction);
    out_->run.index_counters = counter_delta(before.counters, index_->info().counters);
    std::vector<uint64_t> latencies;
    for (const ThreadState& ts : runner.states()) {
      key_delta_ += ts.key_delta;
      delta_unknown_ |= ts.delta_unknown;
    }
    merge_thread_states(runner.states(), out_, &latencies);
    out_->latency = summarize_latencies(&latencies);
  }

  /// Index::verify(), the footprint, and the final key count: loaded keys +
  /// inserts - removes expected to succeed, exact when no insert or remove
  /// had Expect::kAny. It catches an index that acknowledges an insert it
  /// dropped (no later operation need touch that key); a mismatch is a
  /// verification failure (driver.h, step 4).
  void check() {
    out_->structure = index_->verify(&out_->verify_report);
    out_->info = index_->info();
    if (!out_->structure.ok() || delta_unknown_) return;
    const int64_t want = static_cast<int64_t>(workload_.load_keys.size()) + key_delta_;
    ++out_->checked;
    if (static_cast<int64_t>(out_->verify_report.keys) == want) return;
    ++out_->failures;
    if (out_->failure_examples.size() < kMaxFailureExamples) {
      out_->failure_examples.push_back("after run: index holds " +
                                       std::to_string(out_->verify_report.keys) +
                                       " keys, expected " + std::to_string(want));
    }
  }

  /// Index::sync() after the run phase, timed (IndexResult::sync_seconds):
  /// a weakly persistent index makes every completed operation durable, so
  /// recover() reopens it with every key. Ok at once for a PM index.
  void sync() {
    const Clock::time_point t0 = Clock::now();
    out_->sync = index_->sync();
    out_->sync_seconds = seconds_between(t0, Clock::now());
  }

  /// Records how the pool's mapping is backed by pages after the run
  /// (IndexResult::pool_pages; pm::PageBacking): the page size a pool got
  /// decides what TLB misses a PM-only index pays at scale. Nothing for an
  /// index without a pool.
  void record_pool_pages() {
    if (pool_) out_->pool_pages = pool_->page_backing();
  }

  /// For a persistent index on a pool file, or a block-device index on its
  /// device path: closes the index and the pool
  /// (a clean shutdown), reopens them with BenchOptions::recovery_threads,
  /// timing open + recovery (recovery_seconds, s) and the index's own
  /// rebuild (rebuild_seconds, s), then verify() must pass and count the
  /// keys of before the close. The outcome goes to IndexResult::recovery
  /// (Corruption for a different key count); nothing for other indexes.
  void recover() {
    const bool device = needs_device(entry_.caps);
    if (!entry_.caps.persistent || (pool_path_.empty() && !device)) return;
    index_.reset();
    pool_.reset();  // sets the clean-shutdown flag
    out_->recovery_threads = options_.recovery_threads ? options_.recovery_threads : threads_;
    iopts_.threads = out_->recovery_threads;
    const Clock::time_point t0 = Clock::now();
    Status st;
    if (!device) {
      st = pm::Pool::open(pool_path_, layout_, options_.pm.mode, &pool_);
      iopts_.pool = pool_.get();
    }
    if (st.ok()) st = make_index<K>(index_name_, iopts_, &index_);
    out_->recovery_seconds = seconds_between(t0, Clock::now());
    if (st.ok()) {
      out_->rebuild_seconds = index_->info().recovery_seconds;
      VerifyReport r;
      st = index_->verify(&r);
      if (st.ok() && out_->structure.ok() && r.keys != out_->verify_report.keys) {
        st = Status::Corruption("recovered index holds " + std::to_string(r.keys) + " keys, " +
                                std::to_string(out_->verify_report.keys) +
                                " before the pool was closed");
      }
    }
    out_->recovery = st;
  }

 private:
  /// The energy meter a phase reads: null without BenchOptions::energy or
  /// when the machine has no readable RAPL counter (no figure then).
  const EnergyMeter* energy_meter() const {
    return meter_ && meter_->available() ? meter_.get() : nullptr;
  }

  /// The disk meter of a block-device index whose disk has counters, else
  /// null.
  const DiskMeter* disk_meter() const {
    return disk_ && disk_->available() ? disk_.get() : nullptr;
  }

  /// Device setup for a block-device index: a fresh temporary directory
  /// nvindex-<label>-XXXXXX under BenchOptions::device_dir (default
  /// util::temp_device_dir()), refused on tmpfs, and the index's path in it
  /// (not created: the index creates its file or directory), the disk meter
  /// of that directory. Errors: InvalidArgument (tmpfs), IOError (mkdtemp).
  Status create_device() {
    const std::string parent =
        options_.device_dir.empty() ? util::temp_device_dir() : options_.device_dir;
    if (util::on_tmpfs(parent)) {
      return Status::InvalidArgument("device directory " + parent +
                                     " is on tmpfs: memory, not a disk, and no O_DIRECT");
    }
    device_dir_ =
        std::make_unique<util::TempDir>(parent, "nvindex-" + file_safe(out_->index) + "-");
    if (!device_dir_->ok()) return Status::IOError(device_dir_->error());
    out_->device_path = device_dir_->path() + "/" + file_safe(out_->index);
    disk_ = std::make_unique<DiskMeter>(device_dir_->path());
    out_->disk = disk_->disk();
    out_->disk_why = disk_->why();
    return Status::Ok();
  }

  /// Pool setup for a persistent index: an anonymous pool in kDram mode,
  /// else a new pool file (BenchOptions::pool_path, or a temporary file
  /// named after the label), of BenchOptions::pool_size bytes or the
  /// automatic size, prefaulted with BenchOptions::prefault. A volatile
  /// index gets none. Errors of Pool::create / create_anonymous (an
  /// existing file is refused there, and kept) and Pool::prefault.
  Status create_pool() {
    const uint64_t pool_size = options_.pool_size ? options_.pool_size : auto_pool_size(workload_);
    if (entry_.caps.persistent) {
      if (options_.pm.mode == pm::Mode::kDram) {
        Status st = pm::Pool::create_anonymous(pool_size, layout_, &pool_);
        if (!st.ok()) return st;
      } else {
        pool_path_ = options_.pool_path;
        if (pool_path_.empty()) {
          pool_path_ = util::temp_pool_dir() + "/nvindex-" + std::to_string(getpid()) + "-" +
                       file_safe(out_->index) + ".pool";
        }
        Status st = pm::Pool::create(pool_path_, pool_size, layout_, options_.pm.mode, &pool_);
        if (!st.ok()) return st;
        remove_pool_file_ = !options_.keep_pool;
        // Registered once created (never a file that existed before): an
        // interrupted run removes it too (util/temp_files.h).
        if (remove_pool_file_) on_signal_ = std::make_unique<util::RemoveOnSignal>(pool_path_);
        if (options_.prefault) {
          st = pool_->prefault(&out_->prefault_seconds);
          if (!st.ok()) return st;
        }
      }
    }
    out_->pool_path = pool_path_;
    return Status::Ok();
  }

  /// Creates the index on the pool with the run's options. Errors of
  /// make_index; InvalidArgument for threads > 1 on an index that is not
  /// thread-safe.
  Status create_index() {
    iopts_.pool = pool_.get();
    iopts_.device = out_->device_path;
    iopts_.device_bytes = options_.device_bytes;
    iopts_.node_size = run_node_size(entry_, options_.node_size);
    iopts_.threads = threads_;
    iopts_.fill_factor = options_.fill_factor;
    iopts_.extra = options_.index_extra;
    if (Status st = make_index<K>(index_name_, iopts_, &index_); !st.ok()) {
      index_.reset();
      pool_.reset();
      return st;
    }
    caps_ = index_->info().caps;
    if (threads_ > 1 && !caps_.thread_safe) {
      index_.reset();
      pool_.reset();
      return Status::InvalidArgument("index '" + std::string(index_name_) +
                                     "' is not thread-safe; run it with --threads 1");
    }
    return Status::Ok();
  }

  /// String keys: lays out the load keys and each thread's operation keys
  /// (StringKeyList: bytes in one arena, a view and value hash per key).
  /// Untimed; nothing for integer keys.
  void build_string_keys() {
    if constexpr (kStringKeys) {
      const StringKeyNames names = workload_.string_key_names();
      const std::vector<uint64_t>& ids = workload_.load_keys;
      load_keys_.build(names, ids.size(), [&](size_t i) { return ids[i]; });
      op_keys_.resize(threads_);
      for (unsigned t = 0; t < threads_; ++t) {
        const std::vector<Operation>& ops = workload_.per_thread[t];
        op_keys_[t].build(names, ops.size(), [&](size_t i) { return ops[i].key; });
      }
    }
  }

  /// Load key i as K, and its value_key.
  K load_key(size_t i) const {
    if constexpr (kStringKeys) {
      return load_keys_.view(i);
    } else {
      return workload_.load_keys[i];
    }
  }
  uint64_t load_value_key(size_t i) const {
    if constexpr (kStringKeys) {
      return load_keys_.hash(i);
    } else {
      return workload_.load_keys[i];
    }
  }

  /// The load keys sorted (untimed), then one bulk_load() on one thread as
  /// the timed load phase, then every key checked (check_bulk_loaded).
  void load_by_bulk_load() {
    out_->load_method = caps_.bulk_load ? LoadMethod::kBulkLoad : LoadMethod::kBulkLoadByInserts;
    // Sorting is preparation, not loading: done before the clock starts.
    std::vector<std::pair<K, Value>> sorted;
    const size_t n = workload_.load_keys.size();
    sorted.reserve(n);
    for (size_t i = 0; i < n; ++i)
      sorted.emplace_back(load_key(i), make_value(load_value_key(i), 0));
    std::sort(sorted.begin(), sorted.end());
    PhaseRunner runner(1, options_.pin_threads, options_.pm, options_.perf_counters, energy_meter(),
                       disk_meter());
    auto body = [&](unsigned, ThreadState& ts, std::optional<Clock::time_point>) {
      Status st = index_->bulk_load(sorted);
      ++ts.checked;
      if (!st.ok()) {
        ts.fail("load: bulk_load of " + std::to_string(sorted.size()) + " keys: got " +
                st.ToString());
      }
      ts.completed = sorted.size();
      ts.done.store(ts.completed, std::memory_order_relaxed);
    };
    runner.run("load", out_->index, sorted.size(), 0, progress_, body, &out_->load, nullptr,
               nullptr);
    ThreadState& ts = runner.states()[0];
    if (ts.failures == 0) check_bulk_loaded(*index_, caps_.ordered, sorted, ts);
    merge_thread_states(runner.states(), out_, nullptr);
  }

  /// Thread t inserts its contiguous share of the load keys, value
  /// make_value(key, 0), each result checked.
  void load_by_inserts() {
    PhaseRunner runner(threads_, options_.pin_threads, options_.pm, options_.perf_counters,
                       energy_meter(), disk_meter());
    const uint64_t n = workload_.load_keys.size();
    auto body = [&](unsigned t, ThreadState& ts, std::optional<Clock::time_point>) {
      const uint64_t begin = n * t / threads_, end = n * (t + 1) / threads_;
      if (options_.in_flight > 1) {
        // In batches of 16 N through Index::execute (BenchOptions::in_flight;
        // load keys are distinct, so the whole batch may be in flight).
        std::vector<BatchOp<K>> batch;
        for (uint64_t i = begin; i < end;) {
          const uint64_t stop = std::min<uint64_t>(end, i + 16 * uint64_t{options_.in_flight});
          batch.resize(stop - i);
          for (uint64_t j = i; j < stop; ++j) {
            BatchOp<K>& b = batch[j - i];
            b.kind = BatchOp<K>::Kind::kInsert;
            b.key = load_key(j);
            b.value = make_value(load_value_key(j), 0);
          }
          index_->execute(std::span<BatchOp<K>>(batch), options_.in_flight);
          for (; i < stop; ++i) {
            const BatchOp<K>& b = batch[i + batch.size() - stop];
            ++ts.checked;
            if (!b.status.ok()) {
              ts.fail(where("load", t, i, "insert", b.key) + ": got " + b.status.ToString());
            }
            ++ts.completed;
          }
          ts.done.store(ts.completed, std::memory_order_relaxed);
        }
        return;
      }
      for (uint64_t i = begin; i < end; ++i) {
        const K key = load_key(i);
        Status st = index_->insert(key, make_value(load_value_key(i), 0));
        ++ts.checked;
        if (!st.ok()) ts.fail(where("load", t, i, "insert", key) + ": got " + st.ToString());
        ++ts.completed;
        ts.done.store(ts.completed, std::memory_order_relaxed);
      }
    };
    runner.run("load", out_->index, n, 0, progress_, body, &out_->load, nullptr, nullptr);
    merge_thread_states(runner.states(), out_, nullptr);
  }

  /// One worker of the run phase: replays Workload::per_thread[t] until its
  /// end or the deadline (checked whenever the operation index reaches the
  /// next multiple of 256), skipping scans on an unordered index; each
  /// operation run and checked (run_op), its latency sampled at
  /// BenchOptions::latency_sample, its type's counts and PM cost
  /// (OpCostMeter) and the expected key-count change kept in ts.
  /// kBatched (BenchOptions::lookup_batch > 1): each run of consecutive reads
  /// goes to the index in batches (run_batch); the sampler then counts index
  /// calls (a batch is one), not operations. !kBatched is the loop of one
  /// index call per operation, sampled by operation index.
  template <bool kBatched>
  void run_thread(unsigned t, ThreadState& ts, std::optional<Clock::time_point> deadline) {
    Index<K>& index = *index_;
    const bool ordered = caps_.ordered;
    const std::vector<Operation>& ops = workload_.per_thread[t];
    [[maybe_unused]] const StringKeyList* keys = kStringKeys ? &op_keys_[t] : nullptr;
    LatencySampler sampler(options_.latency_sample, workload_.spec.seed * 7919 + t + 1);
    std::vector<std::pair<OwnedKey<K>, Value>> scratch;
    ts.latencies.reserve(static_cast<size_t>(
        std::min<double>(ops.size(), ops.size() * options_.latency_sample * 1.2 + 16)));
    OpCostMeter meter(pm::thread_counters());
    [[maybe_unused]] BatchBuffers batch;
    if constexpr (kBatched) batch.resize(options_.lookup_batch);
    [[maybe_unused]] uint64_t calls = 0;  // index calls so far (kBatched: the sampler's clock)
    uint64_t next_clock_check = 0;
    for (uint64_t i = 0; i < ops.size();) {
      if (deadline && i >= next_clock_check) {
        if (Clock::now() >= *deadline) break;
        next_clock_check = (i | 255) + 1;
      }
      const Operation& op = ops[i];
      if constexpr (kBatched) {
        if (op.type == OpType::kRead) {
          i += run_batch(index, ops, i, keys, batch, sampler.should_sample(calls++), ts, t, meter);
          continue;
        }
      }
      if (op.type == OpType::kScan && !ordered) {
        ++ts.skipped;
        ++i;
        continue;
      }
      std::optional<uint64_t> lat;
      const bool timed = sampler.should_sample(kBatched ? calls++ : i);
      bool ok;
      if constexpr (kStringKeys) {
        ok = run_op<K>(index, op, keys->view(i), keys->hash(i), static_cast<uint32_t>(i + 1),
                       &scratch, ts, t, i, timed ? &lat : nullptr);
      } else {
        ok = run_op<K>(index, op, op.key, op.key, static_cast<uint32_t>(i + 1), &scratch, ts, t, i,
                       timed ? &lat : nullptr);
      }
      ++ts.checked;
      if (op.type == OpType::kInsert || op.type == OpType::kRemove) {
        if (op.expect == Expect::kAny) ts.delta_unknown = true;
        if (op.expect == Expect::kFound) ts.key_delta += op.type == OpType::kInsert ? 1 : -1;
      }
      TypeCounts& c = ts.by_type[static_cast<int>(op.type)];
      ++c.completed;
      c.succeeded += ok ? 1 : 0;
      meter.charge(c);
      if (lat) ts.latencies.push_back(*lat);
      ++ts.completed;
      ts.done.store(ts.completed, std::memory_order_relaxed);
      ++i;
    }
  }

  /// One worker of the run phase with BenchOptions::in_flight N > 1: its
  /// stream in batches of up to 16 N consecutive point operations, one
  /// Index::execute(batch, N) call each (a scan, skipped on an unordered
  /// index, or a read-modify-write runs alone through run_op, as in
  /// run_thread); every result checked as run_op checks it, latencies the
  /// index's own per operation (BatchOp::latency_ns), sampled per operation.
  /// The deadline is checked before each batch.
  void run_thread_in_flight(unsigned t, ThreadState& ts,
                            std::optional<Clock::time_point> deadline) {
    Index<K>& index = *index_;
    const bool ordered = caps_.ordered;
    const std::vector<Operation>& ops = workload_.per_thread[t];
    [[maybe_unused]] const StringKeyList* keys = kStringKeys ? &op_keys_[t] : nullptr;
    LatencySampler sampler(options_.latency_sample, workload_.spec.seed * 7919 + t + 1);
    std::vector<std::pair<OwnedKey<K>, Value>> scratch;
    ts.latencies.reserve(static_cast<size_t>(
        std::min<double>(ops.size(), ops.size() * options_.latency_sample * 1.2 + 16)));
    OpCostMeter meter(pm::thread_counters());
    const size_t most = 16 * size_t{options_.in_flight};
    std::vector<BatchOp<K>> batch;
    batch.reserve(most);
    auto key_of = [&](uint64_t i) -> K {
      if constexpr (kStringKeys) {
        return keys->view(i);
      } else {
        return ops[i].key;
      }
    };
    auto vkey_of = [&](uint64_t i) -> uint64_t {
      if constexpr (kStringKeys) {
        return keys->hash(i);
      } else {
        return ops[i].key;
      }
    };
    auto tally = [&](const Operation& op, bool ok) {
      ++ts.checked;
      if (op.type == OpType::kInsert || op.type == OpType::kRemove) {
        if (op.expect == Expect::kAny) ts.delta_unknown = true;
        if (op.expect == Expect::kFound) ts.key_delta += op.type == OpType::kInsert ? 1 : -1;
      }
      TypeCounts& c = ts.by_type[static_cast<int>(op.type)];
      ++c.completed;
      c.succeeded += ok ? 1 : 0;
      meter.charge(c);  // no PM writes (check_inputs): zero
      ++ts.completed;
    };
    for (uint64_t i = 0; i < ops.size();) {
      if (deadline && Clock::now() >= *deadline) break;
      const Operation& first = ops[i];
      if (first.type == OpType::kScan || first.type == OpType::kReadModifyWrite) {
        if (first.type == OpType::kScan && !ordered) {
          ++ts.skipped;
        } else {
          std::optional<uint64_t> lat;
          const bool ok =
              run_op<K>(index, first, key_of(i), vkey_of(i), static_cast<uint32_t>(i + 1), &scratch,
                        ts, t, i, sampler.should_sample(i) ? &lat : nullptr);
          tally(first, ok);
          if (lat) ts.latencies.push_back(*lat);
        }
        ++i;
        ts.done.store(ts.completed, std::memory_order_relaxed);
        continue;
      }
      batch.clear();
      for (uint64_t j = i; j < ops.size() && batch.size() < most; ++j) {
        const OpType type = ops[j].type;
        if (type == OpType::kScan || type == OpType::kReadModifyWrite) break;
        BatchOp<K> b;
        b.kind = type == OpType::kRead     ? BatchOp<K>::Kind::kLookup
                 : type == OpType::kInsert ? BatchOp<K>::Kind::kInsert
                 : type == OpType::kUpdate ? BatchOp<K>::Kind::kUpdate
                                           : BatchOp<K>::Kind::kRemove;
        b.key = key_of(j);
        b.value = make_value(vkey_of(j), static_cast<uint32_t>(j + 1));
        batch.push_back(b);
      }
      index.execute(std::span<BatchOp<K>>(batch), options_.in_flight);
      for (size_t n = 0; n < batch.size(); ++n, ++i) {
        const Operation& op = ops[i];
        const BatchOp<K>& b = batch[n];
        bool ok;
        switch (op.type) {
          case OpType::kRead:
            ok = check_read(b.found, op.expect, ts, "run", t, i, op, b.key, vkey_of(i));
            break;
          case OpType::kInsert:
            ok = check_write(b.status, op.expect, Code::kAlreadyExists, ts, "run", t, i, op, b.key);
            break;
          default:
            ok = check_write(b.status, op.expect, Code::kNotFound, ts, "run", t, i, op, b.key);
            break;
        }
        tally(op, ok);
        if (sampler.should_sample(i)) ts.latencies.push_back(b.latency_ns);
      }
      ts.done.store(ts.completed, std::memory_order_relaxed);
    }
  }

  /// One worker's multi_lookup arguments, BenchOptions::lookup_batch entries
  /// each, allocated before the run loop.
  struct BatchBuffers {
    std::vector<K> keys;
    std::vector<uint64_t> value_keys;  ///< value_key of each key
    std::vector<std::optional<Value>> results;
    void resize(size_t n) {
      keys.resize(n);
      value_keys.resize(n);
      results.resize(n);
    }
  };

  /// Issues the run of reads of `ops` starting at index `first` (a read), up
  /// to BenchOptions::lookup_batch of them, as one Index::multi_lookup call,
  /// then checks each key's result with check_read (the messages of a single
  /// lookup, operation index first + j) and counts each key as one read
  /// operation; the batch's PM cost goes to the read type. `timed`: the
  /// call's time / n is recorded n times (per-key latency). Returns n, the
  /// keys issued (>= 1).
  size_t run_batch(Index<K>& index, const std::vector<Operation>& ops, uint64_t first,
                   [[maybe_unused]] const StringKeyList* keys, BatchBuffers& batch, bool timed,
                   ThreadState& ts, unsigned t, OpCostMeter& meter) {
    const size_t most = std::min<uint64_t>(batch.keys.size(), ops.size() - first);
    size_t n = 0;
    for (; n < most && ops[first + n].type == OpType::kRead; ++n) {
      if constexpr (kStringKeys) {
        batch.keys[n] = keys->view(first + n);
        batch.value_keys[n] = keys->hash(first + n);
      } else {
        batch.keys[n] = ops[first + n].key;
        batch.value_keys[n] = ops[first + n].key;
      }
    }
    Clock::time_point t0;
    if (timed) t0 = Clock::now();
    index.multi_lookup(std::span<const K>(batch.keys.data(), n),
                       std::span<std::optional<Value>>(batch.results.data(), n));
    uint64_t per_key_ns = 0;
    if (timed) {
      per_key_ns =
          static_cast<uint64_t>(
              std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count()) /
          n;
    }
    TypeCounts& c = ts.by_type[static_cast<int>(OpType::kRead)];
    for (size_t j = 0; j < n; ++j) {
      const Operation& op = ops[first + j];
      const bool ok = check_read(batch.results[j], op.expect, ts, "run", t, first + j, op,
                                 batch.keys[j], batch.value_keys[j]);
      c.succeeded += ok ? 1 : 0;
      if (timed) ts.latencies.push_back(per_key_ns);
    }
    c.completed += n;
    ts.checked += n;
    meter.charge(c);
    ts.completed += n;
    ts.done.store(ts.completed, std::memory_order_relaxed);
    return n;
  }

  const BenchOptions& options_;
  const Workload& workload_;
  const std::string_view index_name_;
  const IndexEntry& entry_;
  IndexResult* const out_;
  ProgressSink* const progress_;
  const unsigned threads_;
  const std::string layout_;  ///< pool_layout(index, key type)
  std::string pool_path_;     ///< the pool file ("" for volatile or anonymous)
  std::unique_ptr<util::RemoveOnSignal> on_signal_;  ///< pool_path_ while it is ours to remove
  bool remove_pool_file_ = false;  ///< this run created pool_path_ and keeps it not
  /// Block-device index: the temporary directory its store is in (removed
  /// with it when the run ends, unless keep_pool), and its disk's meter.
  std::unique_ptr<util::TempDir> device_dir_;
  std::unique_ptr<DiskMeter> disk_;
  std::unique_ptr<pm::Pool> pool_;
  IndexOptions iopts_;
  std::unique_ptr<Index<K>> index_;
  StringKeyList load_keys_;             ///< string keys: the load keys (build_string_keys)
  std::vector<StringKeyList> op_keys_;  ///< string keys: thread t's operation keys
  Capabilities caps_;                   ///< the index's, from info() after creation
  int64_t key_delta_ = 0;               ///< run: inserts minus removes expected to succeed
  bool delta_unknown_ = false;          ///< run: an insert or remove had Expect::kAny
  std::unique_ptr<EnergyMeter> meter_;  ///< BenchOptions::energy: the RAPL meter (a pointer: GCC 12
                                        ///< at -O1 warned maybe-uninitialized on an optional)
};

/// The phases of one run (driver.h, steps 1-5) with keys of type K.
template <class K>
Status run_phases(const BenchOptions& options, const Workload& workload,
                  std::string_view index_name, const IndexEntry& entry, IndexResult* out,
                  ProgressSink* progress) {
  BenchRun<K> run(options, workload, index_name, entry, out, progress);
  if (Status st = run.open(); !st.ok()) return st;
  run.load();
  run.run();
  run.sync();
  run.record_pool_pages();
  run.check();
  run.recover();
  return Status::Ok();
}

}  // namespace

Status run_benchmark(const BenchOptions& options, const Workload& workload,
                     std::string_view index_name, IndexResult* out, ProgressSink* progress) {
  *out = IndexResult{};
  out->index = options.label.empty() ? std::string(index_name) : options.label;
  out->index_name = std::string(index_name);
  out->index_options = options.index_extra;
  out->fill_factor = options.fill_factor;
  const IndexEntry* entry = nullptr;
  if (Status st = check_inputs(options, workload, index_name, &entry); !st.ok()) return st;
  if (workload.spec.key_type == KeyType::kString) {
    return run_phases<std::string_view>(options, workload, index_name, *entry, out, progress);
  }
  return run_phases<uint64_t>(options, workload, index_name, *entry, out, progress);
}

}  // namespace nvindex::bench
