// The PA-Tree paper's two synchronous baselines (Wang et al., ICDE 2020,
// §V-A), run over the same tree and latch coupling as PA-Tree (issue 14):
// - DedicatedExecutor ("patree-dedicated"): each calling thread owns an
//   io_uring (made on its first I/O, one per thread and tree) and submits
//   and waits for its own I/O, blocking in io_uring_enter until it
//   completes: one I/O outstanding per thread.
// - SharedExecutor ("patree-shared"): calling threads hand their I/O to one
//   daemon thread through a queue and block on a semaphore; the daemon
//   submits everything queued on its ring and polls for completions while
//   any I/O is outstanding (sleeping on a condition variable when there is
//   none), releasing each caller's semaphore when its I/O completes.
// Both block the calling thread: operations never suspend (io_begin and
// latch_begin return true), so Task::start() runs an operation to its end.
// Latches are BlockingLatches: reader-writer latches per node id that block
// the thread (mutex and condition variable), as the paper's baselines use
// OS locks.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <semaphore>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "nvindex/status.h"
#include "nvme/executor.h"

namespace nvindex::nvme {

class BlockDevice;
class Ring;

/// Shared/exclusive latches by node id that block the calling thread.
/// Entries exist only while a latch is held or awaited (64 stripes, each a
/// mutex, a condition variable and a map).
class BlockingLatches {
 public:
  void lock(uint64_t id, LatchMode m);
  void unlock(uint64_t id, LatchMode m);

 private:
  struct Entry {
    uint32_t readers = 0;
    bool writer = false;
    uint32_t waiters = 0;
  };
  struct Stripe {
    std::mutex mu;
    std::condition_variable cv;
    std::unordered_map<uint64_t, Entry> map;
  };
  static constexpr unsigned kStripes = 64;
  Stripe stripes_[kStripes];
};

/// Runs I/O requests on `ring` and blocks until all complete: submits (in
/// rounds when more than the ring holds) and waits. Sets every result
/// (-EIO for a request the ring refused).
void run_blocking(Ring& ring, std::span<IoReq> reqs, bool device_polls);

/// What both baselines share: blocking latches, and operations that never
/// suspend.
class BlockingExecutor : public Executor {
 public:
  void io_suspend(Op&, std::coroutine_handle<>) override {}
  bool latch_begin(Op&, uint64_t id, LatchMode m) override {
    latches_.lock(id, m);
    return true;
  }
  void latch_suspend(Op&, std::coroutine_handle<>) override {}
  void unlatch(Op&, uint64_t id, LatchMode m) override { latches_.unlock(id, m); }
  /// The ring mode in use and why (Ring::create's note).
  const std::string& ring_note() const { return note_; }

 protected:
  std::string note_;

 private:
  BlockingLatches latches_;
};

/// The "dedicated" baseline executor; see the file comment.
class DedicatedExecutor final : public BlockingExecutor {
 public:
  /// `ring_mode`: Ring::create's mode for the per-thread rings ("auto",
  /// "interrupt", ...). The first ring is made here, so a refused mode is an
  /// error of create().
  static Status create(const BlockDevice& dev, std::string ring_mode,
                       std::unique_ptr<DedicatedExecutor>* out);
  ~DedicatedExecutor() override;

  bool io_begin(Op& op, std::span<IoReq> reqs) override;

 private:
  DedicatedExecutor(const BlockDevice& dev, std::string mode);
  /// This thread's ring, made on first use; nullptr when the kernel refuses
  /// one.
  Ring* my_ring();

  const BlockDevice& dev_;
  const std::string mode_;
  const uint64_t serial_;  ///< unique per executor, keys the threads' ring caches
  std::mutex rings_mu_;
  std::vector<std::unique_ptr<Ring>> rings_;
  Ring* spare_ = nullptr;  ///< create()'s ring until a thread takes it
  bool polls_ = false;
};

/// The "shared" baseline executor; see the file comment.
class SharedExecutor final : public BlockingExecutor {
 public:
  static Status create(const BlockDevice& dev, std::string ring_mode,
                       std::unique_ptr<SharedExecutor>* out);
  ~SharedExecutor() override;  ///< stops and joins the daemon

  bool io_begin(Op& op, std::span<IoReq> reqs) override;

 private:
  struct Request {
    std::span<IoReq> reqs;
    std::atomic<uint32_t> left{0};
    std::binary_semaphore done{0};
  };
  SharedExecutor() = default;
  void daemon();

  std::unique_ptr<Ring> ring_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Request*> queue_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace nvindex::nvme
