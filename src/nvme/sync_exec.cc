#include "nvme/sync_exec.h"

#include <cerrno>

#include "nvme/device.h"
#include "nvme/ring.h"

namespace nvindex::nvme {

// ---------------------------------------------------------------------------
// BlockingLatches

void BlockingLatches::lock(uint64_t id, LatchMode m) {
  Stripe& s = stripes_[id % kStripes];
  std::unique_lock g(s.mu);
  Entry& e = s.map[id];  // references into an unordered_map survive rehashing
  auto free_for = [&] { return m == LatchMode::kShared ? !e.writer : !e.writer && e.readers == 0; };
  if (!free_for()) {
    ++e.waiters;
    s.cv.wait(g, free_for);
    --e.waiters;
  }
  if (m == LatchMode::kShared) {
    ++e.readers;
  } else {
    e.writer = true;
  }
}

void BlockingLatches::unlock(uint64_t id, LatchMode m) {
  Stripe& s = stripes_[id % kStripes];
  bool wake = false;
  {
    std::lock_guard g(s.mu);
    auto it = s.map.find(id);
    Entry& e = it->second;
    if (m == LatchMode::kShared) {
      --e.readers;
    } else {
      e.writer = false;
    }
    wake = e.waiters > 0;
    if (!e.writer && e.readers == 0 && e.waiters == 0) s.map.erase(it);
  }
  if (wake) s.cv.notify_all();
}

// ---------------------------------------------------------------------------
// Blocking I/O on one ring

void run_blocking(Ring& ring, std::span<IoReq> reqs, bool device_polls) {
  size_t next = 0, done = 0;
  while (done < reqs.size()) {
    while (next < reqs.size()) {
      IoReq& r = reqs[next];
      if (!ring.prep(r, next)) break;  // ring full: submit, then queue the rest
      ++next;
    }
    if (const int rc = ring.submit(); rc < 0) {
      for (size_t i = done; i < reqs.size(); ++i) reqs[i].result = rc;
      return;
    }
    unsigned got = 0;
    while (got == 0) {
      got = ring.reap([&](uint64_t i, int res) { reqs[i].result = res; });
      if (got == 0 && !device_polls && ring.wait() < 0) {
        for (size_t i = done; i < reqs.size(); ++i) reqs[i].result = -EIO;
        return;
      }
    }
    done += got;
  }
}

// ---------------------------------------------------------------------------
// DedicatedExecutor

namespace {
std::atomic<uint64_t> g_executor_serial{1};
}

DedicatedExecutor::DedicatedExecutor(const BlockDevice& dev, std::string mode)
    : dev_(dev), mode_(std::move(mode)), serial_(g_executor_serial.fetch_add(1)) {}

Status DedicatedExecutor::create(const BlockDevice& dev, std::string ring_mode,
                                 std::unique_ptr<DedicatedExecutor>* out) {
  std::unique_ptr<DedicatedExecutor> e(new DedicatedExecutor(dev, std::move(ring_mode)));
  std::unique_ptr<Ring> first;
  // 8 entries: a thread has one operation's I/O at a time (a checkpoint
  // group goes in rounds).
  if (Status s = Ring::create(dev, 8, e->mode_, &first, &e->note_); !s.ok()) return s;
  e->polls_ = first->mode() == RingMode::kIopoll;
  e->spare_ = first.get();
  e->rings_.push_back(std::move(first));
  *out = std::move(e);
  return Status::Ok();
}

DedicatedExecutor::~DedicatedExecutor() = default;

Ring* DedicatedExecutor::my_ring() {
  // One ring per (thread, executor): a one-entry cache keyed by the
  // executor's serial (never reused, so a stale entry cannot match).
  thread_local uint64_t cached_serial = 0;
  thread_local Ring* cached = nullptr;
  if (cached_serial == serial_) return cached;
  std::lock_guard g(rings_mu_);
  Ring* r = nullptr;
  if (spare_ != nullptr) {
    r = spare_;  // create()'s ring, made to check the mode
    spare_ = nullptr;
  } else {
    std::unique_ptr<Ring> made;
    // create() made a ring of this mode, so a refusal now is the kernel out
    // of io_uring resources: the caller fails its I/O with -ENOMEM.
    if (!Ring::create(dev_, 8, mode_, &made).ok()) return nullptr;
    r = made.get();
    rings_.push_back(std::move(made));
  }
  cached_serial = serial_;
  cached = r;
  return r;
}

bool DedicatedExecutor::io_begin(Op&, std::span<IoReq> reqs) {
  Ring* ring = my_ring();
  if (ring == nullptr) {
    for (IoReq& r : reqs) r.result = -ENOMEM;
    return true;
  }
  run_blocking(*ring, reqs, polls_);
  return true;
}

// ---------------------------------------------------------------------------
// SharedExecutor

Status SharedExecutor::create(const BlockDevice& dev, std::string ring_mode,
                              std::unique_ptr<SharedExecutor>* out) {
  std::unique_ptr<SharedExecutor> e(new SharedExecutor());
  if (Status s = Ring::create(dev, 256, ring_mode, &e->ring_, &e->note_); !s.ok()) return s;
  e->thread_ = std::thread([p = e.get()] { p->daemon(); });
  *out = std::move(e);
  return Status::Ok();
}

SharedExecutor::~SharedExecutor() {
  {
    std::lock_guard g(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

bool SharedExecutor::io_begin(Op&, std::span<IoReq> reqs) {
  Request r;
  r.reqs = reqs;
  r.left.store(static_cast<uint32_t>(reqs.size()));
  {
    std::lock_guard g(mu_);
    queue_.push_back(&r);
  }
  cv_.notify_one();
  r.done.acquire();
  return true;
}

void SharedExecutor::daemon() {
  // user_data = a slot of this table: (request, index of its IoReq).
  struct Slot {
    Request* req;
    size_t index;
  };
  std::vector<Slot> slots;
  std::vector<size_t> free_slots;
  std::deque<std::pair<Request*, size_t>> backlog;  // (request, next index) not yet queued
  for (;;) {
    {
      std::unique_lock g(mu_);
      if (ring_->in_flight() == 0 && ring_->queued() == 0 && backlog.empty()) {
        cv_.wait(g, [&] { return stop_ || !queue_.empty(); });
      }
      if (stop_ && queue_.empty() && ring_->in_flight() == 0 && ring_->queued() == 0 &&
          backlog.empty()) {
        return;
      }
      while (!queue_.empty()) {
        backlog.emplace_back(queue_.front(), 0);
        queue_.pop_front();
      }
    }
    // Queue what fits.
    while (!backlog.empty()) {
      auto& [req, i] = backlog.front();
      IoReq& r = req->reqs[i];
      size_t slot;
      if (free_slots.empty()) {
        slot = slots.size();
        slots.push_back({});
      } else {
        slot = free_slots.back();
        free_slots.pop_back();
      }
      if (!ring_->prep(r, slot)) {
        free_slots.push_back(slot);
        break;
      }
      slots[slot] = {req, i};
      if (++i == req->reqs.size()) backlog.pop_front();
    }
    // A refused submission (-EAGAIN, -EBUSY: the kernel short of
    // resources) leaves the entries queued; the loop submits them again.
    (void)ring_->submit();
    // Poll for completions while I/O is outstanding (the daemon never
    // sleeps with I/O in flight: it is the paper's polling daemon).
    if (ring_->in_flight() > 0) {
      ring_->reap([&](uint64_t slot, int res) {
        Slot s = slots[slot];
        free_slots.push_back(slot);
        s.req->reqs[s.index].result = res;
        if (s.req->left.fetch_sub(1) == 1) s.req->done.release();
      });
    }
  }
}

}  // namespace nvindex::nvme
