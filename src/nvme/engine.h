// PA-Tree's polled-mode asynchronous engine (issue 14; Wang et al., "PA-Tree:
// Polled-Mode Asynchronous B+ Tree for NVMe", ICDE 2020, §III-§IV): one worker
// thread runs up to queue_depth tree operations at once. Each operation is a
// coroutine (nvme/task.h) with an explicit scheduler state (Op::state: ready,
// running, waiting for I/O, waiting for a latch, done); at every node I/O it
// suspends, its request goes into the io_uring submission queue, and the
// worker runs the next ready operation, so the device sees many outstanding
// I/Os from one thread and no context switch.
//
// - Submission: any thread calls submit() with a Request; a lock-free
//   multi-producer single-consumer queue (Vyukov's intrusive MPSC) carries it
//   to the worker, which admits requests while fewer than queue_depth are in
//   flight. Completion: the Request's callback runs on the worker thread;
//   run() is the blocking form (submit, then wait), and run_batch() keeps a
//   window of a caller's operations in flight, in per-key order (the
//   harness's asynchronous client: Index::execute).
// - Latches are granted by the worker (no OS locks, no blocking): a latch
//   table of shared/exclusive holders with a FIFO queue of waiting
//   operations; a release grants the queue's compatible prefix and makes
//   those operations ready.
// - Scheduling (§IV-B): ready operations in a priority queue, those holding
//   an exclusive latch first (they block others), then by admission order.
// - Probing (§IV-A): when to look for completions. kEveryLoop probes on
//   every pass of the loop; kAverage probes when the oldest outstanding I/O
//   has been out for the running average latency; kModel predicts each
//   I/O's completion at submission from a linear model of latency over the
//   outstanding reads and writes (LatencyModel, fit by calibrate()) and
//   probes at the earliest prediction. A probe that finds nothing defers
//   the next by an eighth of the average latency. When nothing is ready and
//   the next predicted completion is more than yield_ns away the worker
//   yields the CPU (sched_yield); with nothing in flight and nothing
//   submitted it sleeps until a submission.
// Note on this machine: on an interrupt-driven ring a probe only reads the
// completion queue in shared memory (nanoseconds), so the strategies differ
// in when completions are noticed, not in probe cost as with SPDK's polling
// of the device; with an IOPOLL ring a probe is a system call.
//
// Thread-safety: submit() and run() from any thread; everything else is the
// worker's.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <queue>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "nvindex/status.h"
#include "nvme/executor.h"
#include "nvme/task.h"
#include "nvme/tree.h"

namespace nvindex::nvme {

class BlockDevice;
class Ring;

/// Completion latency of one I/O, ns = a + b * reads + c * writes, where
/// reads and writes are the I/Os outstanding when it was submitted (the
/// paper's §IV-A model).
struct LatencyModel {
  double a_ns = 80000;
  double ns_per_read = 0;
  double ns_per_write = 0;
  double predict(uint32_t reads, uint32_t writes) const {
    return a_ns + ns_per_read * reads + ns_per_write * writes;
  }
};

/// When the worker probes for completions (see the file comment).
enum class ProbeStrategy : uint8_t { kModel, kEveryLoop, kAverage };
/// "model", "every", "average".
std::string_view probe_strategy_name(ProbeStrategy p);

/// Engine settings.
struct EngineOptions {
  unsigned queue_depth = 64;  ///< operations in flight at once, 1..4096
  ProbeStrategy probe = ProbeStrategy::kModel;
  LatencyModel model;
  double yield_ns = 20000;  ///< yield the CPU when no completion is due sooner, ns
};

/// What the engine counted since it started (read with no operation running,
/// or as a snapshot: the fields are atomics read relaxed).
struct EngineStats {
  uint64_t operations = 0;       ///< completed operations
  uint64_t ios = 0;              ///< completed I/Os
  uint64_t probes = 0;           ///< completion-queue probes
  uint64_t empty_probes = 0;     ///< probes that found nothing
  uint64_t yields = 0;           ///< sched_yield calls
  uint64_t sleeps = 0;           ///< waits for a submission with nothing to do
  double mean_outstanding = 0;   ///< mean I/Os outstanding per loop pass
  double mean_latency_ns = 0;    ///< mean I/O completion latency, ns
  uint64_t loops = 0;            ///< passes of the worker's loop
  uint64_t outstanding_sum = 0;  ///< I/Os outstanding, summed over the passes
  uint64_t latency_sum_ns = 0;   ///< I/O completion latencies summed, ns
};

/// One operation submitted to the engine. The caller owns it until done.
struct Request {
  enum class Kind : uint8_t { kInsert, kUpdate, kRemove, kLookup, kScan, kLastLess, kSync };
  Kind kind = Kind::kLookup;
  uint64_t key = 0;
  uint64_t value = 0;                     ///< insert, update
  size_t count = 0;                       ///< scan
  std::vector<Pair>* scan_out = nullptr;  ///< scan
  // Results, set before completion.
  Status status;
  std::optional<uint64_t> found;  ///< lookup
  std::optional<Pair> pair;       ///< last-less-than
  /// Called on the worker thread when the operation is done (may be null);
  /// `run()` sets it to its own.
  void (*on_done)(Request*, void* arg) = nullptr;
  void* arg = nullptr;
  std::atomic<Request*> next{nullptr};  ///< MPSC link
  /// Set by the engine: when submit() took the request and when its
  /// operation ended (CLOCK_MONOTONIC, ns): the latency its caller saw.
  uint64_t submitted_ns = 0, completed_ns = 0;
  Request* done_next = nullptr;  ///< run_batch()'s list of completed requests
};

/// The tree operation that carries out `r` (its results go into r), as a
/// task to run with `op` (the engine's and the synchronous adapters' one
/// dispatch from a Request to the tree).
Task<Status> start_request(Tree& tree, Op& op, Request& r);

/// The engine; see the file comment.
class Engine final : public Executor {
 public:
  /// Starts the worker for `tree` on `dev` (both outlive the engine) with a
  /// ring of Ring::create mode `ring_mode`. Sets the tree's executor.
  /// Errors: InvalidArgument (queue depth out of range), the ring's errors.
  static Status create(Tree* tree, const BlockDevice& dev, const std::string& ring_mode,
                       const EngineOptions& options, std::unique_ptr<Engine>* out);
  /// Finishes every submitted operation, then stops and joins the worker.
  ~Engine() override;

  /// Queues `r` (any thread). Its on_done runs on the worker when done.
  void submit(Request* r);
  /// Submits `r` and blocks until it is done; returns r->status.
  Status run(Request* r);
  /// Runs the point operations `reqs` (insert, update, remove, lookup) with
  /// up to `window` (>= 1) submitted at once, and blocks until all are done
  /// (their results and completed_ns set). Operations on the same key are
  /// submitted in span order, each after the one before it completed (a
  /// request whose key is in flight waits, and the ones after it with it),
  /// so the outcome is that of running them one by one; the engine's
  /// queue_depth bounds what runs at once. Their on_done and arg are
  /// overwritten.
  void run_batch(std::span<Request> reqs, unsigned window);

  EngineStats stats() const;
  /// The ring mode and why (Ring::create's note).
  const std::string& ring_note() const { return note_; }

  // Executor (worker thread only).
  bool io_begin(Op& op, std::span<IoReq> reqs) override;
  void io_suspend(Op& op, std::coroutine_handle<> h) override;
  bool latch_begin(Op& op, uint64_t id, LatchMode m) override;
  void latch_suspend(Op& op, std::coroutine_handle<> h) override;
  void unlatch(Op& op, uint64_t id, LatchMode m) override;

 private:
  struct Ctx;
  struct LatchEntry;
  struct ReadyOrder {
    bool operator()(const Ctx* a, const Ctx* b) const;
  };
  Engine(Tree* tree, const EngineOptions& o);
  void worker();
  Request* pop_submission();
  void admit(Request* r);
  void make_ready(Ctx* c);
  void finish(Ctx* c);
  unsigned reap(uint64_t now);
  uint64_t next_due() const;

  Tree* tree_;
  EngineOptions options_;
  std::unique_ptr<Ring> ring_;
  std::string note_;
  // MPSC queue (Vyukov): producers exchange tail_, the worker follows head_.
  Request stub_;
  std::atomic<Request*> tail_;
  Request* head_;
  std::mutex idle_mu_;  ///< the idle worker's sleep (worker(), submit())
  std::condition_variable idle_cv_;
  std::atomic<bool> sleeping_{false};
  std::atomic<bool> stop_{false};
  // Worker state.
  std::priority_queue<Ctx*, std::vector<Ctx*>, ReadyOrder> ready_;
  std::unordered_map<uint64_t, LatchEntry*> latches_;
  std::vector<IoReq*> outstanding_;
  uint32_t out_reads_ = 0, out_writes_ = 0;
  unsigned in_flight_ops_ = 0;
  uint64_t admissions_ = 0;
  uint64_t probe_after_ns_ = 0;  ///< earliest time of the next probe after an empty one
  uint64_t last_probe_ns_ = 0;   ///< time of the previous probe
  /// Running average of I/O completion latency (each I/O's completion taken
  /// at the middle of the interval between the probe that found it and the
  /// one before), ns.
  double avg_latency_ns_ = 80000;
  std::vector<Ctx*> free_ctx_;
  // Statistics (written by the worker, read by anyone).
  std::atomic<uint64_t> st_ops_{0}, st_ios_{0}, st_probes_{0}, st_empty_{0}, st_yields_{0},
      st_sleeps_{0}, st_loops_{0}, st_outstanding_sum_{0}, st_latency_sum_{0};
  std::thread thread_;
};

/// Fits a LatencyModel on `dev` (§IV-A's linear model): writes the first
/// min(4096, write_to - write_from) slots of [write_from, write_to) once,
/// then, at queue depths 1..64, keeps that many random node-size I/Os
/// outstanding for 400 completions each, reads of those written slots and
/// then half reads, half writes anywhere in the range; least squares of each
/// completion's latency (ns) over the reads and writes outstanding at its
/// submission. The range must hold nothing (slots at or above a tree's
/// high-water mark). *report (when not null) gets a line per depth with
/// the mean latency (us). Errors: InvalidArgument (fewer than 64 slots, a
/// singular fit), IOError, the ring's errors.
Status calibrate(const BlockDevice& dev, uint32_t node_size, uint64_t write_from, uint64_t write_to,
                 LatencyModel* out, std::string* report = nullptr);

}  // namespace nvindex::nvme
