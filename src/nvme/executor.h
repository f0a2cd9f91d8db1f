// How a PA-Tree operation waits (issue 14): the Executor interface between
// the tree algorithm (nvme/tree.h), which says *what* to wait for (node I/O,
// a latch), and the three ways of running it:
// - the polled-mode asynchronous engine (nvme/engine.h, index "patree"): one
//   worker thread; an operation that waits is suspended and the worker runs
//   others (Wang et al., ICDE 2020, §III);
// - "dedicated" (nvme/sync_exec.h): each calling thread does its own I/O on
//   its own io_uring and blocks until it completes (the paper's first
//   synchronous baseline);
// - "shared": calling threads hand I/O to one daemon thread and block on a
//   semaphore until it completes (the paper's second baseline).
//
// An Op is one operation in flight. The awaitables IoAwait and LatchAwait
// ask the executor first whether the wait is already over (*_begin returns
// true: a synchronous executor blocked inside it, or the engine granted a
// free latch at once); only otherwise is the coroutine suspended and its
// handle given to the executor (*_suspend), which resumes it later.
#pragma once

#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <span>

namespace nvindex::nvme {

/// A latch mode: shared (readers) or exclusive (a writer).
enum class LatchMode : uint8_t { kShared, kExclusive };

/// One I/O request: a node read or write, or an fdatasync.
struct IoReq {
  enum class Kind : uint8_t { kRead, kWrite, kSync };
  Kind kind = Kind::kRead;
  bool dsync = false;   ///< write with RWF_DSYNC (durable on completion)
  uint32_t len = 0;     ///< bytes (a node; 0 for kSync)
  uint64_t offset = 0;  ///< byte offset on the device
  std::byte* buf = nullptr;
  int result = 0;  ///< set on completion: bytes transferred, or -errno
  /// Engine bookkeeping: submission time (ns, steady clock) and the
  /// outstanding reads and writes at submission (for the latency model).
  uint64_t submit_ns = 0;
  uint32_t reads_at_submit = 0;
  uint32_t writes_at_submit = 0;
  struct Op* op = nullptr;
};

/// Where an operation is in the engine's scheduler (its explicit state;
/// the synchronous executors only ever see kRunning).
enum class OpState : uint8_t { kReady, kRunning, kWaitingIo, kWaitingLatch, kDone };

/// One operation in flight: the scheduler's view of it. The algorithm's
/// state (node, latches held, key) is in its coroutine frame.
struct Op {
  OpState state = OpState::kReady;
  uint64_t admission = 0;          ///< admission order (engine priority, second key)
  uint32_t x_latches = 0;          ///< exclusive latches held (engine priority, first key)
  uint32_t pending_io = 0;         ///< I/Os of the current wait not yet completed
  std::coroutine_handle<> waiter;  ///< what to resume when the wait ends
  Op* next = nullptr;              ///< intrusive link (engine queues)
};

/// The waits of a tree operation; see the file comment.
class Executor {
 public:
  virtual ~Executor() = default;
  /// Starts every request of `reqs` (in parallel where the executor can).
  /// True when all have completed on return (results set), false when the
  /// operation must suspend (io_suspend follows at once).
  virtual bool io_begin(Op& op, std::span<IoReq> reqs) = 0;
  virtual void io_suspend(Op& op, std::coroutine_handle<> h) = 0;
  /// Acquires latch `id` in mode m. True when granted on return; false when
  /// the operation must suspend until granted (latch_suspend follows).
  virtual bool latch_begin(Op& op, uint64_t id, LatchMode m) = 0;
  virtual void latch_suspend(Op& op, std::coroutine_handle<> h) = 0;
  /// Releases latch `id` held in mode m (may make waiting operations ready).
  virtual void unlatch(Op& op, uint64_t id, LatchMode m) = 0;
};

/// co_await IoAwait{ex, op, reqs}: every request done (results in reqs).
struct IoAwait {
  Executor& ex;
  Op& op;
  std::span<IoReq> reqs;
  bool await_ready() { return ex.io_begin(op, reqs); }
  void await_suspend(std::coroutine_handle<> h) { ex.io_suspend(op, h); }
  void await_resume() const noexcept {}
};

/// co_await LatchAwait{ex, op, id, mode}: the latch is held.
struct LatchAwait {
  Executor& ex;
  Op& op;
  uint64_t id;
  LatchMode mode;
  bool await_ready() { return ex.latch_begin(op, id, mode); }
  void await_suspend(std::coroutine_handle<> h) { ex.latch_suspend(op, h); }
  void await_resume() const noexcept {}
};

}  // namespace nvindex::nvme
