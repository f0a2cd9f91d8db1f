#include "nvme/engine.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <random>
#include <unordered_set>

#include "nvme/device.h"
#include "nvme/ring.h"

namespace nvindex::nvme {

std::string_view probe_strategy_name(ProbeStrategy p) {
  switch (p) {
    case ProbeStrategy::kModel:
      return "model";
    case ProbeStrategy::kEveryLoop:
      return "every";
    case ProbeStrategy::kAverage:
      return "average";
  }
  return "?";
}

namespace {
uint64_t now_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}
}  // namespace

/// One operation in flight: the scheduler's Op, the request, the coroutine.
struct Engine::Ctx : Op {
  Request* req = nullptr;
  Task<Status> task;
  bool started = false;
};

/// One latch: holders and the FIFO queue of waiting operations.
struct Engine::LatchEntry {
  uint32_t readers = 0;
  bool writer = false;
  std::deque<std::pair<Ctx*, LatchMode>> waiting;
  bool grants(LatchMode m) const {
    return m == LatchMode::kShared ? !writer : !writer && readers == 0;
  }
};

bool Engine::ReadyOrder::operator()(const Ctx* a, const Ctx* b) const {
  // std::priority_queue pops the largest: "a < b" means b runs first.
  const bool aw = a->x_latches > 0, bw = b->x_latches > 0;
  if (aw != bw) return bw;
  return a->admission > b->admission;
}

Engine::Engine(Tree* tree, const EngineOptions& o)
    : tree_(tree), options_(o), tail_(&stub_), head_(&stub_), avg_latency_ns_(o.model.a_ns) {}

Status Engine::create(Tree* tree, const BlockDevice& dev, const std::string& ring_mode,
                      const EngineOptions& options, std::unique_ptr<Engine>* out) {
  if (options.queue_depth == 0 || options.queue_depth > 4096) {
    return Status::InvalidArgument("patree: queue depth " + std::to_string(options.queue_depth) +
                                   " out of range 1..4096");
  }
  std::unique_ptr<Engine> e(new Engine(tree, options));
  // Room for every operation's I/O at once (a checkpoint submits more and
  // waits for room: io_begin submits when the queue is full).
  const unsigned entries = std::min(4096u, std::max(64u, options.queue_depth * 2));
  if (Status s = Ring::create(dev, entries, ring_mode, &e->ring_, &e->note_); !s.ok()) return s;
  tree->set_executor(e.get());
  e->thread_ = std::thread([p = e.get()] { p->worker(); });
  *out = std::move(e);
  return Status::Ok();
}

Engine::~Engine() {
  stop_.store(true);
  {
    std::lock_guard g(idle_mu_);
    idle_cv_.notify_one();
  }
  if (thread_.joinable()) thread_.join();
  for (Ctx* c : free_ctx_) delete c;
  for (auto& [id, e] : latches_) delete e;
}

// ---------------------------------------------------------------------------
// Submission: Vyukov's intrusive MPSC queue

void Engine::submit(Request* r) {
  r->submitted_ns = now_ns();
  r->next.store(nullptr, std::memory_order_relaxed);
  Request* prev = tail_.exchange(r, std::memory_order_seq_cst);
  prev->next.store(r, std::memory_order_release);
  // Dekker with the idle worker (worker()): it sets sleeping_ and then looks
  // at the queue; this pushed and then looks at sleeping_ (both seq_cst), so
  // at least one of the two sees the other. The mutex orders the notify
  // after the worker is waiting.
  if (sleeping_.load(std::memory_order_seq_cst)) {
    std::lock_guard g(idle_mu_);
    idle_cv_.notify_one();
  }
}

Request* Engine::pop_submission() {
  Request* head = head_;
  Request* next = head->next.load(std::memory_order_acquire);
  if (head == &stub_) {
    if (next == nullptr) return nullptr;
    head_ = next;
    head = next;
    next = next->next.load(std::memory_order_acquire);
  }
  if (next != nullptr) {
    head_ = next;
    return head;
  }
  if (head != tail_.load(std::memory_order_acquire)) return nullptr;  // a push in progress
  // head is the last: put the stub behind it so head can be taken.
  stub_.next.store(nullptr, std::memory_order_relaxed);
  Request* prev = tail_.exchange(&stub_, std::memory_order_acq_rel);
  prev->next.store(&stub_, std::memory_order_release);
  next = head->next.load(std::memory_order_acquire);
  if (next != nullptr) {
    head_ = next;
    return head;
  }
  return nullptr;
}

namespace {

/// Where a waiting caller learns of its requests' completions. The worker
/// signals under the mutex, so the caller cannot return (and destroy this)
/// before the worker is done with it (an atomic's notify after the store
/// could touch it after the caller returned).
struct Completions {
  std::mutex mu;
  std::condition_variable cv;
  Request* done = nullptr;  ///< completed requests, newest first (done_next)
  bool waiting = false;
  static void on_done(Request* r, void* arg) {
    auto* c = static_cast<Completions*>(arg);
    std::lock_guard g(c->mu);
    r->done_next = c->done;
    c->done = r;
    if (c->waiting) c->cv.notify_one();
  }
  /// Blocks until a request completed; returns them all (a list).
  Request* take() {
    std::unique_lock g(mu);
    waiting = true;
    cv.wait(g, [&] { return done != nullptr; });
    waiting = false;
    Request* list = done;
    done = nullptr;
    return list;
  }
};

}  // namespace

Status Engine::run(Request* r) {
  Completions c;
  r->on_done = &Completions::on_done;
  r->arg = &c;
  submit(r);
  (void)c.take();
  return r->status;
}

void Engine::run_batch(std::span<Request> reqs, unsigned window) {
  Completions c;
  std::unordered_set<uint64_t> busy;  // keys with a request in flight
  size_t next = 0, in_flight = 0, completed = 0;
  window = std::max(1u, window);
  while (completed < reqs.size()) {
    while (next < reqs.size() && in_flight < window && !busy.contains(reqs[next].key)) {
      Request& r = reqs[next++];
      busy.insert(r.key);
      r.on_done = &Completions::on_done;
      r.arg = &c;
      ++in_flight;
      submit(&r);
    }
    for (Request* r = c.take(); r != nullptr; r = r->done_next) {
      busy.erase(r->key);
      --in_flight;
      ++completed;
    }
  }
}

// ---------------------------------------------------------------------------
// The worker

Task<Status> start_request(Tree& tree, Op& op, Request& r) {
  switch (r.kind) {
    case Request::Kind::kInsert:
      return tree.insert(op, r.key, r.value);
    case Request::Kind::kUpdate:
      return tree.update(op, r.key, r.value);
    case Request::Kind::kRemove:
      return tree.remove(op, r.key);
    case Request::Kind::kLookup:
      return tree.lookup(op, r.key, &r.found);
    case Request::Kind::kScan:
      return tree.scan(op, r.key, r.count, r.scan_out);
    case Request::Kind::kLastLess:
      return tree.last_less_than(op, r.key, &r.pair);
    case Request::Kind::kSync:
      break;
  }
  return tree.checkpoint(op);
}

void Engine::admit(Request* r) {
  Ctx* c;
  if (free_ctx_.empty()) {
    c = new Ctx();
  } else {
    c = free_ctx_.back();
    free_ctx_.pop_back();
  }
  c->req = r;
  c->started = false;
  c->state = OpState::kReady;
  c->admission = admissions_++;
  c->x_latches = 0;
  c->pending_io = 0;
  c->task = start_request(*tree_, *c, *r);
  ++in_flight_ops_;
  ready_.push(c);
}

void Engine::make_ready(Ctx* c) {
  c->state = OpState::kReady;
  ready_.push(c);
}

void Engine::finish(Ctx* c) {
  Request* r = c->req;
  r->status = std::move(c->task.result());
  c->task = Task<Status>();
  c->state = OpState::kDone;
  c->req = nullptr;
  free_ctx_.push_back(c);
  --in_flight_ops_;
  st_ops_.fetch_add(1, std::memory_order_relaxed);
  const bool update = r->kind == Request::Kind::kInsert || r->kind == Request::Kind::kUpdate ||
                      r->kind == Request::Kind::kRemove;
  r->completed_ns = now_ns();
  if (r->on_done != nullptr) r->on_done(r, r->arg);  // r may be gone after this
  // Weak persistence: a checkpoint when half the buffer is dirty, admitted
  // as an operation of its own (one at a time).
  static thread_local Request internal;
  static thread_local bool internal_running = false;
  if (update && !internal_running && tree_->wants_checkpoint()) {
    internal_running = true;
    internal.kind = Request::Kind::kSync;
    internal.on_done = [](Request*, void*) { internal_running = false; };
    internal.arg = nullptr;
    admit(&internal);
  }
}

uint64_t Engine::next_due() const {
  uint64_t due = UINT64_MAX;
  for (const IoReq* r : outstanding_) {
    uint64_t predicted = 0;
    if (options_.probe == ProbeStrategy::kModel) {
      predicted = static_cast<uint64_t>(
          std::max(0.0, options_.model.predict(r->reads_at_submit, r->writes_at_submit)));
    } else {
      predicted = static_cast<uint64_t>(avg_latency_ns_);
    }
    due = std::min(due, r->submit_ns + predicted);
  }
  return std::max(due, probe_after_ns_);
}

unsigned Engine::reap(uint64_t now) {
  st_probes_.fetch_add(1, std::memory_order_relaxed);
  unsigned n = ring_->reap([&](uint64_t user_data, int res) {
    IoReq* r = reinterpret_cast<IoReq*>(user_data);
    r->result = res;
    // The I/O completed somewhere between the previous probe (or its
    // submission, if later) and now: take the middle. Taking `now` would
    // count the probe's own delay as latency, and under probe=average, which
    // probes at the running average, every I/O would then measure at least
    // that average: it could only grow (a run of the default mix went from
    // 80 us to tens of ms, 2.3 K ops/s).
    const uint64_t from = std::max(r->submit_ns, last_probe_ns_);
    const uint64_t lat = now > from ? (from + now) / 2 - r->submit_ns : 0;
    avg_latency_ns_ = 0.95 * avg_latency_ns_ + 0.05 * static_cast<double>(lat);
    st_latency_sum_.fetch_add(lat, std::memory_order_relaxed);
    st_ios_.fetch_add(1, std::memory_order_relaxed);
    if (r->kind == IoReq::Kind::kRead) {
      --out_reads_;
    } else {
      --out_writes_;
    }
    outstanding_.erase(std::find(outstanding_.begin(), outstanding_.end(), r));
    Ctx* c = static_cast<Ctx*>(r->op);
    if (--c->pending_io == 0) make_ready(c);
  });
  last_probe_ns_ = now;
  if (n == 0) {
    st_empty_.fetch_add(1, std::memory_order_relaxed);
    probe_after_ns_ = now + static_cast<uint64_t>(avg_latency_ns_ / 8);
  } else {
    probe_after_ns_ = 0;
  }
  return n;
}

void Engine::worker() {
  for (;;) {
    // Admit submissions while there is room.
    while (in_flight_ops_ < options_.queue_depth) {
      Request* r = pop_submission();
      if (r == nullptr) break;
      admit(r);
    }
    // Run every ready operation until it waits or ends.
    while (!ready_.empty()) {
      Ctx* c = ready_.top();
      ready_.pop();
      c->state = OpState::kRunning;
      if (!c->started) {
        c->started = true;
        c->task.start();
      } else {
        c->waiter.resume();
      }
      if (c->task.done()) finish(c);
    }
    if (ring_->queued() > 0) (void)ring_->submit();
    st_loops_.fetch_add(1, std::memory_order_relaxed);
    st_outstanding_sum_.fetch_add(outstanding_.size(), std::memory_order_relaxed);
    if (!outstanding_.empty()) {
      const uint64_t now = now_ns();
      const bool due = options_.probe == ProbeStrategy::kEveryLoop || now >= next_due();
      if (due && reap(now) > 0) continue;
      if (ready_.empty() && head_->next.load(std::memory_order_acquire) == nullptr &&
          next_due() > now + static_cast<uint64_t>(options_.yield_ns)) {
        st_yields_.fetch_add(1, std::memory_order_relaxed);
        sched_yield();
      }
      continue;
    }
    if (in_flight_ops_ > 0 || !ready_.empty()) continue;
    // Idle: nothing in flight. Sleep until a submission (or the stop); the
    // timeout only bounds the cost of a wakeup that could still be missed.
    std::unique_lock g(idle_mu_);
    sleeping_.store(true, std::memory_order_seq_cst);
    const bool empty = head_->next.load(std::memory_order_seq_cst) == nullptr &&
                       tail_.load(std::memory_order_seq_cst) == head_;
    if (empty && stop_.load()) return;
    if (empty) {
      st_sleeps_.fetch_add(1, std::memory_order_relaxed);
      idle_cv_.wait_for(g, std::chrono::milliseconds(10));
    }
    sleeping_.store(false, std::memory_order_relaxed);
  }
}

// ---------------------------------------------------------------------------
// Executor: I/O and latches (worker thread)

bool Engine::io_begin(Op& op, std::span<IoReq> reqs) {
  const uint64_t now = now_ns();
  // Set first: a reap below (the ring full) may complete some of reqs,
  // and the operation is made ready only when all of them are done.
  op.pending_io = static_cast<uint32_t>(reqs.size());
  for (IoReq& r : reqs) {
    r.op = &op;
    r.submit_ns = now;
    r.reads_at_submit = out_reads_;
    r.writes_at_submit = out_writes_;
    const uint64_t ud = reinterpret_cast<uint64_t>(&r);
    while (!ring_->prep(r, ud)) {
      (void)ring_->submit();  // the submission queue is full: make room
      if (ring_->in_flight() + ring_->queued() >= ring_->cq_capacity()) {
        // The completion queue is full (a checkpoint of many nodes): wait
        // for a completion. reap() only marks operations ready; none runs
        // until this one suspends.
        if (ring_->wait() == 0) (void)reap(now_ns());
      }
    }
    if (r.kind == IoReq::Kind::kRead) {
      ++out_reads_;
    } else {
      ++out_writes_;
    }
    outstanding_.push_back(&r);
  }
  if (reqs.empty()) return true;
  op.state = OpState::kWaitingIo;
  return false;
}

void Engine::io_suspend(Op& op, std::coroutine_handle<> h) { op.waiter = h; }

bool Engine::latch_begin(Op& op, uint64_t id, LatchMode m) {
  LatchEntry*& e = latches_[id];
  if (e == nullptr) e = new LatchEntry();
  if (e->waiting.empty() && e->grants(m)) {
    if (m == LatchMode::kShared) {
      ++e->readers;
    } else {
      e->writer = true;
      ++op.x_latches;
    }
    return true;
  }
  e->waiting.emplace_back(static_cast<Ctx*>(&op), m);
  op.state = OpState::kWaitingLatch;
  return false;
}

void Engine::latch_suspend(Op& op, std::coroutine_handle<> h) { op.waiter = h; }

void Engine::unlatch(Op& op, uint64_t id, LatchMode m) {
  auto it = latches_.find(id);
  LatchEntry* e = it->second;
  if (m == LatchMode::kShared) {
    --e->readers;
  } else {
    e->writer = false;
    --op.x_latches;
  }
  while (!e->waiting.empty() && e->grants(e->waiting.front().second)) {
    auto [c, wm] = e->waiting.front();
    e->waiting.pop_front();
    if (wm == LatchMode::kShared) {
      ++e->readers;
    } else {
      e->writer = true;
      ++c->x_latches;
    }
    make_ready(c);
  }
  if (e->readers == 0 && !e->writer && e->waiting.empty()) {
    delete e;
    latches_.erase(it);
  }
}

EngineStats Engine::stats() const {
  EngineStats s;
  s.operations = st_ops_.load(std::memory_order_relaxed);
  s.ios = st_ios_.load(std::memory_order_relaxed);
  s.probes = st_probes_.load(std::memory_order_relaxed);
  s.empty_probes = st_empty_.load(std::memory_order_relaxed);
  s.yields = st_yields_.load(std::memory_order_relaxed);
  s.sleeps = st_sleeps_.load(std::memory_order_relaxed);
  s.loops = st_loops_.load(std::memory_order_relaxed);
  s.outstanding_sum = st_outstanding_sum_.load(std::memory_order_relaxed);
  s.latency_sum_ns = st_latency_sum_.load(std::memory_order_relaxed);
  s.mean_outstanding = s.loops ? static_cast<double>(s.outstanding_sum) / s.loops : 0;
  s.mean_latency_ns = s.ios ? static_cast<double>(s.latency_sum_ns) / s.ios : 0;
  return s;
}

// ---------------------------------------------------------------------------
// Calibration

Status calibrate(const BlockDevice& dev, uint32_t node_size, uint64_t write_from, uint64_t write_to,
                 LatencyModel* out, std::string* report) {
  if (write_to < write_from + 64) {
    return Status::InvalidArgument("patree calibrate: fewer than 64 free slots to use");
  }
  std::mt19937_64 rng(1);
  const unsigned kDepths[] = {1, 2, 4, 8, 16, 32, 64};
  AlignedBuffer bufs(64ull * node_size);
  // The reads go to slots written first: a file system answers a read of a
  // preallocated, never written extent with zeros without touching the
  // disk, which would fit a read cost of nearly nothing. Written before the
  // ring is made, whose IOPOLL probe reads offset 0 (slot 0 of a store is
  // its superblock; of patree-calibrate's scratch file, one of these).
  const uint64_t read_from = write_from;
  const uint64_t read_to = std::min(write_to, write_from + 4096);
  for (uint64_t id = read_from; id < read_to;) {
    const uint64_t n = std::min<uint64_t>(64, read_to - id);
    if (!dev.write(id * node_size, bufs.data(), n * node_size).ok()) {
      return Status::IOError("patree calibrate: writing the slots to read failed");
    }
    id += n;
  }
  std::unique_ptr<Ring> ring;
  if (Status s = Ring::create(dev, 256, "auto", &ring); !s.ok()) return s;
  int failed = 0;  // the first I/O error (-errno), 0 while none
  struct Sample {
    double reads, writes, latency;
  };
  std::vector<Sample> samples;
  std::string table;
  for (const bool writes : {false, true}) {
    for (const unsigned depth : kDepths) {
      // Keep `depth` I/Os outstanding for ~400 completions.
      std::vector<uint64_t> submit_at(depth);
      std::vector<uint32_t> r_at(depth), w_at(depth);
      uint32_t out_r = 0, out_w = 0;
      auto issue = [&](unsigned slot) {
        const bool w = writes && (rng() & 1);
        const uint64_t id = w ? write_from + rng() % (write_to - write_from)
                              : read_from + rng() % (read_to - read_from);
        std::byte* b = bufs.data() + slot * node_size;
        const bool ok = w ? ring->prep_write(b, node_size, id * node_size, slot * 2 + 1)
                          : ring->prep_read(b, node_size, id * node_size, slot * 2);
        if (!ok) return;
        submit_at[slot] = now_ns();
        r_at[slot] = out_r;
        w_at[slot] = out_w;
        (w ? out_w : out_r)++;
      };
      for (unsigned i = 0; i < depth; ++i) issue(i);
      (void)ring->submit();
      unsigned done = 0;
      double sum = 0;
      while (done < 400) {
        if (ring->wait() < 0) return Status::IOError("patree calibrate: wait failed");
        const uint64_t now = now_ns();
        std::vector<unsigned> again;
        ring->reap([&](uint64_t ud, int res) {
          const unsigned slot = static_cast<unsigned>(ud / 2);
          (ud & 1 ? out_w : out_r)--;
          if (res < 0) {
            if (failed == 0) failed = res;
            return;
          }
          const double lat = static_cast<double>(now - submit_at[slot]);
          samples.push_back(
              {static_cast<double>(r_at[slot]), static_cast<double>(w_at[slot]), lat});
          sum += lat;
          ++done;
          again.push_back(slot);
        });
        if (failed != 0) {  // a lost slot would leave the loop waiting forever
          while (ring->in_flight() > 0 && ring->wait() == 0) ring->reap([](uint64_t, int) {});
          return Status::IOError(std::string("patree calibrate: an I/O failed: ") +
                                 std::strerror(-failed));
        }
        for (unsigned slot : again) issue(slot);
        (void)ring->submit();
      }
      while (ring->in_flight() > 0) {
        if (ring->wait() < 0) break;
        ring->reap([](uint64_t, int) {});
      }
      table += std::string(writes ? "mixed" : "reads") + " depth " + std::to_string(depth) + ": " +
               std::to_string(static_cast<int>(sum / done / 1000)) + " us\n";
    }
  }
  // Least squares for latency = a + b r + c w (normal equations, 3x3).
  double m[3][4] = {};
  for (const Sample& s : samples) {
    const double x[3] = {1, s.reads, s.writes};
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 3; ++j) m[i][j] += x[i] * x[j];
      m[i][3] += x[i] * s.latency;
    }
  }
  for (int i = 0; i < 3; ++i) {  // Gauss-Jordan with partial pivoting
    int p = i;
    for (int r = i + 1; r < 3; ++r) {
      if (std::fabs(m[r][i]) > std::fabs(m[p][i])) p = r;
    }
    std::swap(m[i], m[p]);
    if (std::fabs(m[i][i]) < 1e-9) return Status::InvalidArgument("patree calibrate: singular fit");
    for (int r = 0; r < 3; ++r) {
      if (r == i) continue;
      const double f = m[r][i] / m[i][i];
      for (int k = i; k < 4; ++k) m[r][k] -= f * m[i][k];
    }
  }
  out->a_ns = m[0][3] / m[0][0];
  out->ns_per_read = m[1][3] / m[1][1];
  out->ns_per_write = m[2][3] / m[2][2];
  if (report != nullptr) *report = table;
  return Status::Ok();
}

}  // namespace nvindex::nvme
