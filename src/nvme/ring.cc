#include "nvme/ring.h"

#include <sys/uio.h>

#include <cerrno>
#include <cstring>

#include "nvme/device.h"
#include "nvme/executor.h"

namespace nvindex::nvme {

std::string_view ring_mode_name(RingMode m) {
  switch (m) {
    case RingMode::kInterrupt:
      return "interrupt";
    case RingMode::kIopoll:
      return "iopoll";
    case RingMode::kSqpoll:
      return "sqpoll";
  }
  return "?";
}

namespace {

/// Sets up `ring` in mode `m` on fd; 0 or -errno.
int setup(io_uring* ring, unsigned entries, RingMode m, int fd) {
  io_uring_params p{};
  if (m == RingMode::kIopoll) p.flags |= IORING_SETUP_IOPOLL;
  if (m == RingMode::kSqpoll) {
    p.flags |= IORING_SETUP_SQPOLL;
    p.sq_thread_idle = 50;  // ms before the kernel thread sleeps
  }
  int rc = io_uring_queue_init_params(entries, ring, &p);
  if (rc < 0) return rc;
  rc = io_uring_register_files(ring, &fd, 1);
  if (rc < 0) {
    io_uring_queue_exit(ring);
    return rc;
  }
  return 0;
}

}  // namespace

Status Ring::create(const BlockDevice& dev, unsigned entries, std::string_view want,
                    std::unique_ptr<Ring>* out, std::string* why) {
  out->reset();
  if (entries == 0 || entries > 4096) {
    return Status::InvalidArgument("ring: " + std::to_string(entries) +
                                   " entries out of range 1..4096");
  }
  if (want != "auto" && want != "interrupt" && want != "iopoll" && want != "sqpoll") {
    return Status::InvalidArgument("ring: unknown mode '" + std::string(want) +
                                   "' (valid: auto, interrupt, iopoll, sqpoll)");
  }
  std::unique_ptr<Ring> r(new Ring());
  std::string note;
  auto try_mode = [&](RingMode m) -> int {
    int rc = setup(&r->ring_, entries, m, dev.fd());
    if (rc < 0) return rc;
    r->ready_ = true;
    r->mode_ = m;
    if (m != RingMode::kIopoll) return 0;
    // Probe: an IOPOLL ring is accepted by the kernel whatever the device;
    // the device's refusal shows only in the completion of a read. Offset 0
    // must hold written data: a file system answers a read of a never
    // written extent itself, so the probe would pass and every later read
    // fail with EOPNOTSUPP (patree-calibrate's scratch file did).
    void* buf = nullptr;
    if (posix_memalign(&buf, kIoAlign, dev.direct_io_align()) != 0) return -ENOMEM;
    int res = -EIO;
    if (r->prep_read(buf, dev.direct_io_align(), 0, 1) && r->submit() == 1 && r->wait() == 0) {
      r->reap([&](uint64_t, int v) { res = v; });
    }
    std::free(buf);
    if (res >= 0) return 0;
    io_uring_queue_exit(&r->ring_);
    r->ready_ = false;
    r->in_flight_ = 0;
    return res;
  };
  int rc = 0;
  if (want == "auto") {
    rc = try_mode(RingMode::kIopoll);
    if (rc == 0) {
      note = "iopoll (the device polls)";
    } else {
      note = std::string("iopoll refused by the device (") + std::strerror(-rc) + "): interrupt";
      rc = try_mode(RingMode::kInterrupt);
    }
  } else {
    const RingMode m = want == "iopoll"   ? RingMode::kIopoll
                       : want == "sqpoll" ? RingMode::kSqpoll
                                          : RingMode::kInterrupt;
    rc = try_mode(m);
    note = std::string(want) + " (requested)";
  }
  if (rc < 0) {
    return Status::IOError("ring: the kernel or device refuses a " + std::string(want) +
                           " io_uring on " + dev.path() + ": " + std::strerror(-rc));
  }
  if (why != nullptr) *why = note;
  *out = std::move(r);
  return Status::Ok();
}

Ring::~Ring() {
  if (ready_) io_uring_queue_exit(&ring_);
}

io_uring_sqe* Ring::next_sqe() {
  // Never more requests out than the completion queue holds: beyond it the
  // kernel keeps completions on an overflow list that reap() (which reads
  // only the shared queue) does not see, and older kernels refuse further
  // submissions (-EBUSY) until it drains: an engine waiting for those
  // completions would wait forever.
  if (in_flight_ + queued_ >= ring_.cq.ring_entries) return nullptr;
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  if (sqe != nullptr) ++queued_;
  return sqe;
}

bool Ring::prep_read(void* buf, uint32_t len, uint64_t offset, uint64_t user_data) {
  io_uring_sqe* sqe = next_sqe();
  if (sqe == nullptr) return false;
  io_uring_prep_read(sqe, 0, buf, len, offset);
  sqe->flags |= IOSQE_FIXED_FILE;
  io_uring_sqe_set_data64(sqe, user_data);
  return true;
}

bool Ring::prep_write(const void* buf, uint32_t len, uint64_t offset, uint64_t user_data,
                      bool dsync) {
  io_uring_sqe* sqe = next_sqe();
  if (sqe == nullptr) return false;
  io_uring_prep_write(sqe, 0, buf, len, offset);
  if (dsync) sqe->rw_flags = RWF_DSYNC;
  sqe->flags |= IOSQE_FIXED_FILE;
  io_uring_sqe_set_data64(sqe, user_data);
  return true;
}

bool Ring::prep_fdatasync(uint64_t user_data) {
  io_uring_sqe* sqe = next_sqe();
  if (sqe == nullptr) return false;
  io_uring_prep_fsync(sqe, 0, IORING_FSYNC_DATASYNC);
  sqe->flags |= IOSQE_FIXED_FILE;
  io_uring_sqe_set_data64(sqe, user_data);
  return true;
}

bool Ring::prep(const IoReq& r, uint64_t user_data) {
  switch (r.kind) {
    case IoReq::Kind::kRead:
      return prep_read(r.buf, r.len, r.offset, user_data);
    case IoReq::Kind::kWrite:
      return prep_write(r.buf, r.len, r.offset, user_data, r.dsync);
    case IoReq::Kind::kSync:
      break;
  }
  return prep_fdatasync(user_data);
}

int Ring::submit() {
  if (queued_ == 0) return 0;
  int rc = io_uring_submit(&ring_);
  while (rc == -EINTR) rc = io_uring_submit(&ring_);
  if (rc < 0) return rc;
  if (mode_ == RingMode::kSqpoll) {
    // With SQPOLL, io_uring_submit() returns how many entries the kernel
    // thread has not yet taken from the ring (tail - head), not how many
    // this call passed on: 0 when the thread was quick, or more than were
    // queued. Every queued entry is in the ring now and the thread will
    // take it, so all of them count as in flight. Counting rc instead left
    // queued_ above 0 and wrapped in_flight_ below 0 at the next reap, and
    // the completion-queue cap (next_sqe) then refused every request: the
    // engine's sqpoll case hung under CPU load (index_patree_test under
    // ThreadSanitizer, 1 run in 3 with two busy loops beside it).
    rc = static_cast<int>(queued_);
  }
  in_flight_ += static_cast<unsigned>(rc);
  queued_ -= static_cast<unsigned>(rc);
  return rc;
}

void Ring::poll_device() {
  // Errors (EINTR, EAGAIN) leave the completions for the next poll.
  (void)io_uring_get_events(&ring_);
}

int Ring::wait() {
  io_uring_cqe* cqe = nullptr;
  int rc = 0;
  do {
    rc = io_uring_wait_cqe(&ring_, &cqe);
  } while (rc == -EINTR);
  return rc < 0 ? rc : 0;
}

}  // namespace nvindex::nvme
