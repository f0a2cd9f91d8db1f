// One io_uring (liburing) on one BlockDevice: the I/O path of every NVMe index
// (issue 14). Reads and writes of whole nodes at node-aligned offsets, and
// fdatasync, each tagged with a 64-bit user_data that comes back with its
// completion.
//
// Modes (chosen when the ring is made, reported by mode()):
// - kInterrupt: the device raises an interrupt per completion and the kernel
//   posts the completion into the shared completion queue; reap() only reads
//   that queue (no system call), so polling it costs nanoseconds.
// - kIopoll (IORING_SETUP_IOPOLL): no interrupts; completions are found only
//   by polling the device's queue from io_uring_enter(2), so reap() is a
//   system call. Needs a device whose driver polls (NVMe with poll queues);
//   this machine's virtio disk refuses it, which create() detects by a probe
//   read and then reports.
// - kSqpoll (IORING_SETUP_SQPOLL): a kernel thread polls the submission
//   queue, so submit() makes no system call while that thread is awake; it
//   costs a core of its own (on a 2-core machine, half the CPU), so it is
//   chosen only on request.
// The PA-Tree paper's engine polls the device through SPDK from user space;
// kIopoll is the kernel's closest equivalent, kInterrupt the fallback.
//
// Thread-safety: none; a ring belongs to one thread at a time.
#pragma once

#include <liburing.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "nvindex/status.h"

namespace nvindex::nvme {

class BlockDevice;
struct IoReq;

/// How the ring finds completions (see the file comment).
enum class RingMode : uint8_t { kInterrupt, kIopoll, kSqpoll };
/// "interrupt", "iopoll", "sqpoll".
std::string_view ring_mode_name(RingMode m);

/// One io_uring bound to one device (registered as fixed file 0).
class Ring {
 public:
  /// Makes a ring of `entries` submission slots (1..4096) on `dev` in mode
  /// `want`: "interrupt", "iopoll", "sqpoll", or "auto" (iopoll when a probe
  /// read of the device's first sector completes on an IOPOLL ring, else
  /// interrupt). *why (when not null) gets a sentence on the choice, e.g.
  /// "iopoll refused by the device (Operation not supported): interrupt".
  /// Errors: InvalidArgument (unknown mode, entries out of range),
  /// IOError/NotSupported (the kernel refuses the requested mode, with its
  /// reason).
  static Status create(const BlockDevice& dev, unsigned entries, std::string_view want,
                       std::unique_ptr<Ring>* out, std::string* why = nullptr);
  Ring(const Ring&) = delete;
  Ring& operator=(const Ring&) = delete;
  ~Ring();

  RingMode mode() const { return mode_; }

  /// Queues a read (write) of `len` bytes at byte `offset` into (from) `buf`
  /// (aligned as O_DIRECT needs). False when the submission queue is full
  /// (submit() first) or when the requests queued and in flight fill the
  /// completion queue (cq_capacity(): reap() first). With dsync, the write is RWF_DSYNC: durable
  /// (FUA or a cache flush) when it completes.
  bool prep_read(void* buf, uint32_t len, uint64_t offset, uint64_t user_data);
  bool prep_write(const void* buf, uint32_t len, uint64_t offset, uint64_t user_data,
                  bool dsync = false);
  /// Queues an fdatasync of the device (IORING_FSYNC_DATASYNC).
  bool prep_fdatasync(uint64_t user_data);

  /// Queues request `r` (read, write or fdatasync, by r.kind) tagged
  /// user_data; false when the submission queue is full.
  bool prep(const IoReq& r, uint64_t user_data);

  /// Submits everything queued; returns how many (>= 0) or -errno.
  int submit();

  /// Calls fn(user_data, res) for every completion available now (res =
  /// bytes transferred or -errno), without blocking; returns how many. In
  /// kIopoll mode it first polls the device (one io_uring_enter).
  template <class F>
  unsigned reap(F&& fn) {
    if (mode_ == RingMode::kIopoll) poll_device();
    unsigned n = 0;
    io_uring_cqe* cqe = nullptr;
    unsigned head = 0;
    io_uring_for_each_cqe(&ring_, head, cqe) {
      fn(cqe->user_data, cqe->res);
      ++n;
    }
    if (n > 0) io_uring_cq_advance(&ring_, n);
    in_flight_ -= n;
    return n;
  }

  /// Blocks until at least one completion is available (kIopoll: polls until
  /// one is). Returns 0 or -errno.
  int wait();

  /// Operations submitted and not yet reaped.
  unsigned in_flight() const { return in_flight_; }
  /// Completion-queue entries (twice the submission slots): the most
  /// requests queued and in flight at once (the prep calls refuse more).
  unsigned cq_capacity() const { return ring_.cq.ring_entries; }
  /// Operations queued and not yet submitted.
  unsigned queued() const { return queued_; }

 private:
  Ring() = default;
  void poll_device();
  io_uring_sqe* next_sqe();

  io_uring ring_{};
  bool ready_ = false;
  RingMode mode_ = RingMode::kInterrupt;
  unsigned in_flight_ = 0;
  unsigned queued_ = 0;
};

}  // namespace nvindex::nvme
