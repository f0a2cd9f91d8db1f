// Process-crash torture: see torture.h for the protocol and what it proves.
#include "crash/torture.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <thread>
#include <utility>

#include "crash/kill.h"
#include "crash/string_keys.h"
#include "nvindex/pm/pool.h"

namespace nvindex::crash {
namespace {

using Clock = std::chrono::steady_clock;

enum OpKind : uint8_t { kInsert, kUpdate, kRemove, kLookup };
constexpr const char* kOpName[] = {"insert", "update", "remove", "lookup"};

struct Op {
  OpKind kind;
  uint64_t key;
  Value value;
};

/// Percentages of one round's op mix; lookups take the rest.
struct Mix {
  uint32_t insert, update, remove;
  const char* name;
};
constexpr Mix kMixes[3] = {{55, 10, 10, "grow"}, {10, 10, 55, "shrink"}, {30, 20, 25, "balanced"}};

/// SplitMix64 (Steele, Lea, Flood, OOPSLA'14): derives independent seeds.
uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

const Mix& round_mix(uint64_t seed, uint32_t round) {
  return kMixes[splitmix(seed ^ (uint64_t{round} << 32)) % 3];
}

/// The operations of thread `thread` in round `round`: a pure function of
/// (seed, round, thread), so the parent replays what the child did from the
/// acknowledgements alone.
class OpStream {
 public:
  OpStream(uint64_t seed, uint32_t round, unsigned thread, unsigned threads, uint64_t slots)
      : rng_(splitmix(splitmix(seed) ^ (uint64_t{round} << 20) ^ thread)),
        mix_(round_mix(seed, round)),
        thread_(thread),
        threads_(threads),
        slots_(slots) {}

  Op next() {
    const uint32_t r = static_cast<uint32_t>(rng_() % 100);
    Op op;
    op.kind = r < mix_.insert                               ? kInsert
              : r < mix_.insert + mix_.update               ? kUpdate
              : r < mix_.insert + mix_.update + mix_.remove ? kRemove
                                                            : kLookup;
    op.key = 1 + thread_ + threads_ * (rng_() % slots_);
    const uint64_t v = rng_();
    op.value = v % 16 == 0 ? 0 : v;  // value 0 is valid and must survive too
    return op;
  }

 private:
  std::mt19937_64 rng_;
  const Mix& mix_;
  unsigned thread_, threads_;
  uint64_t slots_;
};

/// One acknowledgement (16 bytes), written by the child after the index
/// returned and committed by raising its thread's count.
struct Record {
  uint8_t code;   ///< nvindex::Code of the operation's Status (kOk for lookups)
  uint8_t found;  ///< lookups: 1 when the key was found
  uint8_t reserved[6];
  uint64_t value;  ///< lookups: the value found
};
static_assert(sizeof(Record) == 16);

/// Most threads a child runs.
constexpr unsigned kMaxThreads = 16;
/// Acknowledgements one child thread can log; a thread that reaches it stops
/// (its child then exits by itself, which is not a failure). 2^22 operations
/// take seconds, far more than a child normally lives.
constexpr uint64_t kLogCapacity = uint64_t{1} << 22;

/// The acknowledgement log: a MAP_SHARED anonymous mapping (a side file in
/// memory) created by the parent before fork, so it survives the child's
/// SIGKILL. Page 0 is this header; then kLogCapacity records per thread.
/// Protocol: a thread writes record i with plain stores, then stores
/// count[t] = i + 1 (release); the parent reads counts (acquire) after
/// waitpid. A kill between the two leaves record i unacknowledged. No system
/// call per operation, so the kill lands inside the index far more often than
/// with a pipe (where the child spends most of its time in write(2)).
struct LogHeader {
  std::atomic<uint32_t> ready;  ///< 1 once open + recovery succeeded
  uint32_t reserved;
  std::atomic<uint64_t> count[kMaxThreads];  ///< acknowledged ops per thread
  /// Weak persistence (sync_every > 0): completed sync() calls; the durable
  /// frontier of the last one is frontier[sync_seq % 2] (thread 0 writes the
  /// other half, then raises sync_seq with a release store, so a kill
  /// mid-write leaves the previous frontier intact).
  std::atomic<uint64_t> sync_seq;
  uint64_t frontier[2][kMaxThreads];  ///< acknowledged counts before the sync call
};
constexpr uint64_t kLogHeaderBytes = 4096;
static_assert(sizeof(LogHeader) <= kLogHeaderBytes);
constexpr uint64_t log_bytes(unsigned threads) {
  return kLogHeaderBytes + uint64_t{threads} * kLogCapacity * sizeof(Record);
}
Record* log_records(void* log, unsigned thread) {
  return reinterpret_cast<Record*>(static_cast<char*>(log) + kLogHeaderBytes) +
         thread * kLogCapacity;
}

/// Exit codes of a child that was not killed.
constexpr int kChildOpenFailed = 3;

/// True when the run's index is a block-device one (its store at a device
/// path, no pool).
bool on_device(const TortureOptions& o) {
  const IndexEntry* e = find_index_entry(o.index);
  return e != nullptr && needs_device(e->caps);
}

/// Opens the pool file at `path` (layout pool_layout(index, key type)) and
/// recovers the index in it with the run's node size and threads; for a
/// block-device index, opens (recovers) the store at device path `path`
/// (*pool stays null). Errors of Pool::open and make_keyed_index.
Status open_index(const TortureOptions& o, const std::string& path, std::unique_ptr<pm::Pool>* pool,
                  std::unique_ptr<Index<uint64_t>>* idx);

/// The child: open and recover the pool, report ready, run `threads` op
/// streams, acknowledging each operation after it returns. Never returns;
/// normally ends by SIGKILL (fork_and_kill also makes it die with the
/// parent).
[[noreturn]] void child_main(const TortureOptions& o, uint32_t round, uint64_t slots, void* log) {
  auto* hdr = static_cast<LogHeader*>(log);
  std::unique_ptr<pm::Pool> pool;
  std::unique_ptr<Index<uint64_t>> idx;
  Status s = open_index(o, o.pool_path, &pool, &idx);
  if (!s.ok()) {
    std::fprintf(stderr, "torture child (round %u): open/recovery failed: %s\n", round,
                 s.ToString().c_str());
    _exit(kChildOpenFailed);
  }
  hdr->ready.store(1, std::memory_order_release);
  auto worker = [&](unsigned t) {
    OpStream ops(o.seed, round, t, o.threads, slots);
    Record* recs = log_records(log, t);
    uint64_t inserts = 0;
    for (uint64_t i = 0; i < kLogCapacity; ++i) {
      if (t == 0 && o.sync_every != 0 && i != 0 && i % o.sync_every == 0) {
        // Weak persistence: snapshot the acknowledged counts, sync, publish.
        const uint64_t seq = hdr->sync_seq.load(std::memory_order_relaxed);
        uint64_t* next = hdr->frontier[(seq + 1) % 2];
        for (unsigned u = 0; u < o.threads; ++u) {
          next[u] = hdr->count[u].load(std::memory_order_acquire);
        }
        if (idx->sync().ok()) hdr->sync_seq.store(seq + 1, std::memory_order_release);
      }
      const Op op = ops.next();
      Record r{};
      switch (op.kind) {
        case kInsert:
          ++inserts;
          if (o.inject_lost_insert_every != 0 && inserts % o.inject_lost_insert_every == 0) {
            r.code = static_cast<uint8_t>(Code::kOk);  // the injected lie
          } else {
            r.code = static_cast<uint8_t>(idx->insert(op.key, op.value).code());
          }
          break;
        case kUpdate:
          r.code = static_cast<uint8_t>(idx->update(op.key, op.value).code());
          break;
        case kRemove:
          r.code = static_cast<uint8_t>(idx->remove(op.key).code());
          break;
        case kLookup: {
          const std::optional<Value> v = idx->lookup(op.key);
          r.found = v.has_value();
          r.value = v.value_or(0);
          break;
        }
      }
      recs[i] = r;
      hdr->count[t].store(i + 1, std::memory_order_release);
    }
  };
  std::vector<std::thread> workers;
  for (unsigned t = 1; t < o.threads; ++t) workers.emplace_back(worker, t);
  worker(0);
  for (auto& w : workers) w.join();
  _exit(0);
}

std::string describe(const std::optional<Value>& v) {
  return v ? "value " + std::to_string(*v) : std::string("absent");
}

using Model = std::map<uint64_t, Value>;

std::optional<Value> model_get(const Model& m, uint64_t key) {
  const auto it = m.find(key);
  return it == m.end() ? std::nullopt : std::optional<Value>(it->second);
}

/// Sets `key`'s state in the model: a value, or absent.
void model_set(Model* m, uint64_t key, const std::optional<Value>& state) {
  if (state) {
    (*m)[key] = *state;
  } else {
    m->erase(key);
  }
}

/// Applies one acknowledged op to the model; empty string when its result
/// matches, else what differed.
std::string replay(const Op& op, const Record& r, Model* model) {
  const std::optional<Value> before = model_get(*model, op.key);
  const bool present = before.has_value();
  Code want = Code::kOk;
  switch (op.kind) {
    case kInsert:
      want = present ? Code::kAlreadyExists : Code::kOk;
      if (!present) (*model)[op.key] = op.value;
      break;
    case kUpdate:
      want = present ? Code::kOk : Code::kNotFound;
      if (present) (*model)[op.key] = op.value;
      break;
    case kRemove:
      want = present ? Code::kOk : Code::kNotFound;
      if (present) model->erase(op.key);
      break;
    case kLookup: {
      const std::optional<Value> got =
          r.found ? std::optional<Value>(r.value) : std::optional<Value>();
      if (got != before)
        return "lookup returned " + describe(got) + ", model has " + describe(before);
      return {};
    }
  }
  if (r.code != static_cast<uint8_t>(want)) {
    return std::string("returned ") + std::string(CodeName(static_cast<Code>(r.code))) +
           ", expected " + std::string(CodeName(want)) + " (model had " + describe(before) + ")";
  }
  return {};
}

/// The state an op leaves `key` in, given the state before it.
std::optional<Value> apply(const Op& op, const std::optional<Value>& before) {
  switch (op.kind) {
    case kInsert:
      return before ? before : std::optional<Value>(op.value);
    case kUpdate:
      return before ? std::optional<Value>(op.value) : std::nullopt;
    case kRemove:
      return std::nullopt;
    case kLookup:
      return before;
  }
  return before;
}

std::string op_text(const Op& op) {
  return std::string(kOpName[op.kind]) + "(" + std::to_string(op.key) +
         (op.kind == kInsert || op.kind == kUpdate ? ", " + std::to_string(op.value) : "") + ")";
}

/// Full check of a recovered index against the model: verify(), key count,
/// a lookup of every key of the key space, and a full scan when ordered.
std::string check_state(Index<uint64_t>& idx, const Model& model, unsigned threads, uint64_t slots,
                        VerifyReport* vr) {
  const Status s = idx.verify(vr);
  if (!s.ok()) return "verify() failed: " + s.ToString();
  if (vr->keys != model.size()) {
    return "verify() counts " + std::to_string(vr->keys) + " keys, the model holds " +
           std::to_string(model.size());
  }
  for (uint64_t k = 1; k <= uint64_t{threads} * slots; ++k) {
    const std::optional<Value> got = idx.lookup(k);
    const std::optional<Value> want = model_get(model, k);
    if (got != want) {
      return "lookup(" + std::to_string(k) + ") after recovery: " + describe(got) + ", model has " +
             describe(want) + (want ? " (an acknowledged operation was lost)" : " (appeared)");
    }
  }
  if (idx.info().caps.ordered) {
    std::vector<std::pair<uint64_t, Value>> all;
    idx.scan(0, model.size() + 16, &all);
    if (std::string e = take_key_error(idx); !e.empty()) return "full scan after recovery: " + e;
    const std::vector<std::pair<uint64_t, Value>> want(model.begin(), model.end());
    if (all != want) {
      size_t i = 0;
      while (i < all.size() && i < want.size() && all[i] == want[i]) ++i;
      return "full scan differs from the model at position " + std::to_string(i) + " (scan " +
             std::to_string(all.size()) + " pairs, model " + std::to_string(want.size()) + ")";
    }
  }
  return {};
}

Status open_index(const TortureOptions& o, const std::string& path, std::unique_ptr<pm::Pool>* pool,
                  std::unique_ptr<Index<uint64_t>>* idx) {
  IndexOptions io;
  if (on_device(o)) {
    io.device = path;
  } else {
    Status s = pm::Pool::open(path, pool_layout(o.index, o.key_type), pm::Mode::kEmulated, pool);
    if (!s.ok()) return s;
    io.pool = pool->get();
  }
  io.node_size = o.node_size;
  io.threads = o.threads;
  io.extra = o.index_opts;
  return make_keyed_index(o.index, o.key_type, io, idx);
}

double percentile_sorted(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
}

/// Checks the options and derives the key slots per thread (*slots).
/// InvalidArgument (torture.h) or AlreadyExists (the pool file exists).
Status check_options(const TortureOptions& o, uint64_t* slots) {
  if (Status s = check_keyed_index("torture", o.index, o.key_type, false); !s.ok()) return s;
  if (o.threads < 1 || o.threads > 16) {
    return Status::InvalidArgument("torture: threads must be 1..16");
  }
  if (o.kills < 1 || !(o.seconds > 0) || !(o.max_run_ms > 0)) {
    return Status::InvalidArgument("torture: kills, seconds and max_run_ms must be > 0");
  }
  if (o.sync_every != 0 && !on_device(o)) {
    return Status::InvalidArgument("torture: sync_every is for block-device indexes (" + o.index +
                                   " makes every operation durable before it returns)");
  }
  if (!on_device(o) && o.pool_bytes < pm::kMinPoolSize) {
    return Status::InvalidArgument("torture: pool size below " + std::to_string(pm::kMinPoolSize) +
                                   " bytes");
  }
  const uint64_t keys =
      o.keys != 0 ? o.keys : std::max<uint64_t>(64ull * o.node_size / 16, 64ull * o.threads);
  *slots = keys / o.threads;
  if (*slots == 0 || keys > (uint64_t{1} << 32)) {
    return Status::InvalidArgument("torture: key space must be threads..2^32 keys");
  }
  std::error_code ec;
  if (std::filesystem::exists(o.pool_path, ec)) {
    return Status::AlreadyExists("torture: " + o.pool_path +
                                 " exists; torture creates its own pool (remove it first)");
  }
  return Status::Ok();
}

/// Pool setup: creates the pool file and an empty index in it, then closes
/// both (the first child recovers it). Errors of Pool::create and
/// make_index, InvalidArgument for threads > 1 on an index that is not
/// thread-safe; the file is removed after an error.
Status create_pool(const TortureOptions& o) {
  std::unique_ptr<pm::Pool> pool;
  std::unique_ptr<Index<uint64_t>> idx;
  IndexOptions io;
  if (on_device(o)) {
    io.device = o.pool_path;
    io.device_bytes = o.pool_bytes;
  } else {
    Status s = pm::Pool::create(o.pool_path, o.pool_bytes, pool_layout(o.index, o.key_type),
                                pm::Mode::kEmulated, &pool);
    if (!s.ok()) return s;
    io.pool = pool.get();
  }
  Status s;
  io.node_size = o.node_size;
  io.threads = o.threads;
  io.extra = o.index_opts;
  s = make_keyed_index(o.index, o.key_type, io, &idx);
  if (s.ok() && o.threads > 1 && !idx->info().caps.thread_safe) {
    s = Status::InvalidArgument("torture: " + o.index + " is not thread-safe; use threads 1");
  }
  idx.reset();
  pool.reset();
  if (!s.ok()) {
    std::error_code ec;
    std::filesystem::remove_all(o.pool_path, ec);
  }
  return s;
}

/// How one round's child was killed.
struct RoundKill {
  bool early = false;   ///< killed at a random time after fork, not after ready
  double delay_ms = 0;  ///< the drawn delay, ms
  KillResult result;    ///< how the child ended (fork_and_kill)
};

/// The rounds of one run (torture.h), each: fork a child on the pool file
/// and kill it (kill_child), replay its acknowledgements on the model
/// (replay_acks), recover a copy of the crashed pool and check it
/// (check_recovery). The model, the kill-delay generator and the
/// fork-to-ready statistics carry over from round to round.
class Torture {
 public:
  Torture(const TortureOptions& o, uint64_t slots, TortureReport* rep)
      : o_(o),
        slots_(slots),
        rep_(rep),
        check_path_(o.pool_path + ".check"),
        rng_(splitmix(o.seed ^ 0x746f7274757265ull)),  // kill delays
        t_start_(Clock::now()) {}

  /// Runs rounds until options.kills kills, options.seconds seconds or the
  /// first failure, then removes the pool files after a clean run (unless
  /// keep_pool). Errors (IOError) end the run at once.
  Status run() {
    while (rep_->kills < o_.kills && elapsed() < o_.seconds && rep_->failures.empty()) {
      const Status s = run_round();
      if (!s.ok()) return s;
    }
    rep_->seconds = elapsed();
    if (rep_->failures.empty() && !o_.keep_pool) {
      std::error_code ec;
      std::filesystem::remove_all(o_.pool_path, ec);
      std::filesystem::remove_all(check_path_, ec);
    }
    return Status::Ok();
  }

 private:
  double elapsed() const { return std::chrono::duration<double>(Clock::now() - t_start_).count(); }

  /// Records a failure of `round` with the replay details.
  void fail(uint32_t round, std::string what) {
    rep_->failures.push_back(TortureFailure{
        round, o_.seed,
        std::move(what) + " [seed " + std::to_string(o_.seed) + ", round " + std::to_string(round) +
            ", mix " + round_mix(o_.seed, round).name + "; crashed pool kept at " + o_.pool_path +
            ", recovered copy at " + check_path_ + "]"});
  }

  /// One round. Failures go to the report (the run then stops); errors
  /// (IOError: the acknowledgement log, fork, waitpid, the copy) are
  /// returned.
  Status run_round() {
    const uint32_t round = ++rep_->rounds;
    void* log = mmap(nullptr, log_bytes(o_.threads), PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (log == MAP_FAILED) {
      return Status::IOError(std::string("torture: mmap of the acknowledgement log: ") +
                             std::strerror(errno));
    }
    auto* hdr = static_cast<LogHeader*>(log);
    RoundKill k;
    if (Status s = kill_child(round, log, &k); !s.ok()) {
      munmap(log, log_bytes(o_.threads));
      return Status(s.code(), "torture: " + s.message());
    }
    const bool was_ready = hdr->ready.load(std::memory_order_acquire) != 0;
    std::vector<uint64_t> acked(o_.threads);
    for (unsigned t = 0; t < o_.threads; ++t) {
      acked[t] = std::min(hdr->count[t].load(std::memory_order_acquire), kLogCapacity);
    }
    // The durable frontier (weak persistence): nothing is known durable in a
    // round before its first completed sync but what the round started from.
    std::vector<uint64_t> durable(o_.threads, 0);
    if (const uint64_t seq = hdr->sync_seq.load(std::memory_order_acquire); seq != 0) {
      rep_->syncs += seq;
      for (unsigned t = 0; t < o_.threads; ++t) durable[t] = hdr->frontier[seq % 2][t];
    }
    record_end(round, k.result, was_ready);
    std::vector<OpStream> streams = replay_acks(round, log, acked, durable);
    munmap(log, log_bytes(o_.threads));
    if (!rep_->failures.empty()) return Status::Ok();
    return check_recovery(round, k, was_ready, acked, &streams);
  }

  /// Weak persistence: adds `state` to the states `key` may be found in
  /// after the kill.
  void allow(uint64_t key, const std::optional<Value>& state) {
    std::vector<std::optional<Value>>& v = allowed_[key];
    if (std::find(v.begin(), v.end(), state) == v.end()) v.push_back(state);
  }

  /// Forks the round's child (child_main) and kills it: four rounds in five
  /// at a random time uniform in [0, max_run_ms] after it reported ready,
  /// one in five uniform in [0, the median fork-to-ready time seen so far]
  /// after fork (during fork, open or recovery). Updates that median from
  /// the rounds that waited for ready. Errors of fork_and_kill.
  Status kill_child(uint32_t round, void* log, RoundKill* k) {
    auto* hdr = static_cast<LogHeader*>(log);
    k->early = rng_() % 5 == 0;
    k->delay_ms =
        std::uniform_real_distribution<double>(0, k->early ? ready_ms_ : o_.max_run_ms)(rng_);
    KillPlan plan;
    if (!k->early) {  // wait for ready (or the child's own exit), at most 30 s
      plan.ready = [hdr] { return hdr->ready.load(std::memory_order_acquire) != 0; };
    }
    plan.delay = std::chrono::nanoseconds(static_cast<int64_t>(k->delay_ms * 1e6));
    const uint64_t slots = slots_;
    Status s = fork_and_kill([&] { child_main(o_, round, slots, log); }, plan, &k->result);
    if (!s.ok()) return s;
    if (k->result.ready) {  // running median of fork-to-ready, ms
      ready_samples_.push_back(k->result.ready_ms);
      ready_ms_ = percentile_sorted(ready_samples_, 0.5);
    }
    return Status::Ok();
  }

  /// Counts the kill, or records how the child ended otherwise (another
  /// signal, its own exit, a failed open, a hang before ready) as a failure.
  void record_end(uint32_t round, const KillResult& r, bool was_ready) {
    const int status = r.status;
    const bool finished = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (r.killed()) {
      ++rep_->kills;
      if (!was_ready) ++rep_->killed_before_ready;
    } else if (WIFSIGNALED(status)) {
      fail(round, "the child died of signal " + std::to_string(WTERMSIG(status)) + " (" +
                      strsignal(WTERMSIG(status)) + ") before the kill");
    } else if (!finished) {
      fail(round,
           WEXITSTATUS(status) == kChildOpenFailed
               ? "the child could not open or recover the pool (its message is on stderr)"
               : "the child exited by itself with status " + std::to_string(WEXITSTATUS(status)));
    }
    if (r.hung) fail(round, "the child did not finish open + recovery within 30 s (hang)");
  }

  /// Replays each thread's acknowledged operations on the model (threads
  /// own disjoint keys, so their order relative to each other does not
  /// matter), checking each status and lookup result; the first mismatch is
  /// a failure. Returns the threads' op streams, positioned at each
  /// thread's in-flight operation.
  /// Weak persistence (sync_every > 0): from each thread's durable
  /// frontier durable[t] on, records in allowed_ every state a key held
  /// (its state at the frontier, then after each later operation).
  std::vector<OpStream> replay_acks(uint32_t round, void* log, const std::vector<uint64_t>& acked,
                                    const std::vector<uint64_t>& durable) {
    allowed_.clear();
    std::vector<OpStream> streams;
    for (unsigned t = 0; t < o_.threads; ++t) {
      streams.emplace_back(o_.seed, round, t, o_.threads, slots_);
    }
    for (unsigned t = 0; t < o_.threads && rep_->failures.empty(); ++t) {
      const Record* recs = log_records(log, t);
      for (uint64_t i = 0; i < acked[t]; ++i) {
        const Op op = streams[t].next();
        const bool weak = o_.sync_every != 0 && i >= durable[t];
        if (weak && !allowed_.count(op.key)) allow(op.key, model_get(model_, op.key));
        const std::string bad = replay(op, recs[i], &model_);
        if (weak) allow(op.key, model_get(model_, op.key));
        if (!bad.empty()) {
          fail(round, "thread " + std::to_string(t) + " op " + std::to_string(i) + " " +
                          op_text(op) + " " + bad);
          break;
        }
        ++rep_->acked_ops;
        uint64_t* by_kind[] = {&rep_->acked_inserts, &rep_->acked_updates, &rep_->acked_removes,
                               &rep_->acked_lookups};
        ++*by_kind[op.kind];
      }
    }
    return streams;
  }

  /// Recovers a copy of the crashed pool (the original stays as it was, for
  /// the next child to recover and for replay if a check fails), timing open
  /// + recovery, then checks the in-flight operations (check_inflight) and
  /// the whole state (check_state). Failures go to the report; IOError when
  /// the copy cannot be made.
  Status check_recovery(uint32_t round, const RoundKill& k, bool was_ready,
                        const std::vector<uint64_t>& acked, std::vector<OpStream>* streams) {
    std::error_code ec;
    std::filesystem::remove_all(check_path_, ec);
    // A pool file, or a block-device index's store: a file, or a directory
    // (copied whole; a LevelDB/RocksDB lock is an fcntl lock, gone with the
    // killed child).
    std::filesystem::copy(o_.pool_path, check_path_, std::filesystem::copy_options::recursive, ec);
    if (ec) return Status::IOError("torture: copy to " + check_path_ + ": " + ec.message());
    std::unique_ptr<pm::Pool> pool;
    std::unique_ptr<Index<uint64_t>> idx;
    const auto t0 = Clock::now();
    Status s = open_index(o_, check_path_, &pool, &idx);
    const double rec_s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (!s.ok()) {
      fail(round, "recovery after the kill failed: " + s.ToString());
      return Status::Ok();
    }
    ++rep_->recoveries;
    rep_->recovery_seconds.push_back(rec_s);
    if (o_.sync_every != 0) {
      check_weak(round, *idx, acked, streams);
    } else if (was_ready) {
      check_inflight(round, *idx, acked, streams);
    }
    if (!rep_->failures.empty()) return Status::Ok();
    const std::string bad = check_state(*idx, model_, o_.threads, slots_, &rep_->last_verify);
    if (!bad.empty()) {
      fail(round, bad + " (kill " + std::to_string(k.delay_ms) + " ms after " +
                      (k.early ? "fork" : "ready") + ")");
      return Status::Ok();
    }
    rep_->final_keys = model_.size();
    return Status::Ok();
  }

  /// Each thread's in-flight operation (the next in its stream) must have
  /// left its key wholly applied or wholly absent; the model takes
  /// whichever the recovered index shows. A thread that filled its log had
  /// nothing in flight.
  void check_inflight(uint32_t round, Index<uint64_t>& idx, const std::vector<uint64_t>& acked,
                      std::vector<OpStream>* streams) {
    for_each_inflight(acked, streams, [&](unsigned t, const Op& op) {
      const std::optional<Value> before = model_get(model_, op.key);
      const std::optional<Value> after = apply(op, before);
      const std::optional<Value> got = idx.lookup(op.key);
      if (got == before) return;
      if (got == after) {
        ++rep_->inflight_applied;
        model_set(&model_, op.key, after);
        return;
      }
      fail(round, "thread " + std::to_string(t) + " in-flight op " + std::to_string(acked[t]) +
                      " " + op_text(op) + " left " + describe(got) + ", neither the old " +
                      describe(before) + " nor the new " + describe(after));
    });
  }

  /// Calls fn(t, op) with each thread's in-flight write (the next operation
  /// of its stream; none for a thread that filled its log, nor a lookup).
  template <class Fn>
  void for_each_inflight(const std::vector<uint64_t>& acked, std::vector<OpStream>* streams,
                         Fn fn) {
    for (unsigned t = 0; t < o_.threads; ++t) {
      if (acked[t] == kLogCapacity) continue;  // the thread stopped: nothing in flight
      const Op op = (*streams)[t].next();
      if (op.kind != kLookup) fn(t, op);
    }
  }

  /// Weak persistence: every key's state must be its model state (all its
  /// acknowledged operations are before the durable frontier) or one of
  /// allowed_[key] (with the thread's in-flight operation's result added);
  /// the model then takes what the recovered index holds, for check_state
  /// and the next round.
  void check_weak(uint32_t round, Index<uint64_t>& idx, const std::vector<uint64_t>& acked,
                  std::vector<OpStream>* streams) {
    std::map<uint64_t, std::optional<Value>> inflight_after;  // key -> its in-flight op's result
    for_each_inflight(acked, streams, [&](unsigned, const Op& op) {
      const std::optional<Value> before = model_get(model_, op.key);
      if (!allowed_.count(op.key)) allow(op.key, before);
      inflight_after[op.key] = apply(op, before);
      allow(op.key, inflight_after[op.key]);
    });
    for (uint64_t k = 1; k <= uint64_t{o_.threads} * slots_; ++k) {
      const std::optional<Value> got = idx.lookup(k);
      const std::optional<Value> last = model_get(model_, k);
      if (got == last) continue;
      if (const auto f = inflight_after.find(k); f != inflight_after.end() && got == f->second) {
        ++rep_->inflight_applied;
        model_set(&model_, k, got);
        continue;
      }
      const auto it = allowed_.find(k);
      if (it == allowed_.end() ||
          std::find(it->second.begin(), it->second.end(), got) == it->second.end()) {
        fail(round, "key " + std::to_string(k) + " after recovery: " + describe(got) +
                        ", but since the last completed sync it held only " +
                        (it == allowed_.end() ? describe(last) : describe_all(it->second)) +
                        " (an operation synced before the kill was lost, or a value appeared)");
        return;
      }
      ++rep_->unsynced_lost;
      model_set(&model_, k, got);
    }
  }

  static std::string describe_all(const std::vector<std::optional<Value>>& states) {
    std::string s;
    for (const auto& v : states) s += (s.empty() ? "" : " / ") + describe(v);
    return s;
  }

  const TortureOptions& o_;
  const uint64_t slots_;
  /// Weak persistence: states each key may hold after the kill (replay_acks).
  std::map<uint64_t, std::vector<std::optional<Value>>> allowed_;
  TortureReport* const rep_;
  const std::string check_path_;  ///< where the crashed pool is copied and recovered
  Model model_;                   ///< every acknowledged operation so far
  std::mt19937_64 rng_;           ///< kill delays
  const Clock::time_point t_start_;
  double ready_ms_ = 2.0;  ///< median fork-to-ready time of a child, ms (a first guess)
  std::vector<double> ready_samples_;
};

}  // namespace

double TortureReport::recovery_min() const { return percentile_sorted(recovery_seconds, 0); }
double TortureReport::recovery_median() const { return percentile_sorted(recovery_seconds, 0.5); }
double TortureReport::recovery_max() const { return percentile_sorted(recovery_seconds, 1); }

Status run_torture(const TortureOptions& o, TortureReport* rep) {
  *rep = TortureReport{};
  uint64_t slots = 0;
  Status s = check_options(o, &slots);
  if (s.ok()) s = create_pool(o);
  if (!s.ok()) return s;
  return Torture(o, slots, rep).run();
}

}  // namespace nvindex::crash
