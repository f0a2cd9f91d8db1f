// perf_event_open(2) counters of the benchmark phases. See perf.h.
#include "bench/perf.h"

#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <utility>

namespace nvindex::bench {
namespace {

/// "EACCES" etc. for the errno values perf_event_open(2) documents.
std::string errno_name(int err) {
  switch (err) {
    case EACCES:
      return "EACCES";
    case EPERM:
      return "EPERM";
    case ENOENT:
      return "ENOENT";
    case EOPNOTSUPP:
      return "EOPNOTSUPP";
    case ENODEV:
      return "ENODEV";
    case ENOSYS:
      return "ENOSYS";
    case EINVAL:
      return "EINVAL";
    case EBUSY:
      return "EBUSY";
    case EMFILE:
      return "EMFILE";
    default:
      return "errno " + std::to_string(err);
  }
}

/// kernel.perf_event_paranoid as text, "unknown" when unreadable.
std::string paranoid_level() {
  std::ifstream f("/proc/sys/kernel/perf_event_paranoid");
  std::string v;
  if (!(f >> v)) return "unknown";
  return v;
}

struct RawReading {
  uint64_t value;
  uint64_t enabled;
  uint64_t running;
};

}  // namespace

PerfEventId instructions_event() {
  return {PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS, "instructions"};
}
PerfEventId cycles_event() { return {PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES, "cycles"}; }
PerfEventId task_clock_event() {
  return {PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK, "task-clock"};
}

std::string perf_event_open_reason(const PerfEventId& event, int err) {
  const std::string name(event.name);
  const std::string code = " (" + errno_name(err) + ")";
  switch (err) {
    case ENOENT:
    case EOPNOTSUPP:
    case ENODEV:
      return "no " + name + " counter on this CPU or VM" + code;
    case EACCES:
    case EPERM:
      return "not permitted: kernel.perf_event_paranoid = " + paranoid_level() + code;
    case ENOSYS:
      return "perf_event_open is not supported by this kernel" + code;
    default:
      return "perf_event_open failed for " + name + ": " + std::strerror(err) + code;
  }
}

ThreadEventCounter::ThreadEventCounter(ThreadEventCounter&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)) {}

ThreadEventCounter& ThreadEventCounter::operator=(ThreadEventCounter&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

ThreadEventCounter::~ThreadEventCounter() {
  if (fd_ >= 0) close(fd_);
}

Status ThreadEventCounter::open(const PerfEventId& event) {
  if (fd_ >= 0) {
    close(fd_);
    fd_ = -1;
  }
  perf_event_attr attr;
  std::memset(&attr, 0, sizeof(attr));
  attr.size = sizeof(attr);
  attr.type = event.type;
  attr.config = event.config;
  attr.exclude_kernel = 1;
  attr.exclude_hv = 1;
  attr.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
  const long fd = syscall(SYS_perf_event_open, &attr, 0 /* this thread */, -1 /* any CPU */,
                          -1 /* no group */, PERF_FLAG_FD_CLOEXEC);
  if (fd < 0) return Status::NotSupported(perf_event_open_reason(event, errno));
  fd_ = static_cast<int>(fd);
  return Status::Ok();
}

Status ThreadEventCounter::read(PerfReading* out) const {
  if (fd_ < 0) return Status::InvalidArgument("perf counter is not open");
  RawReading r{};
  const ssize_t n = ::read(fd_, &r, sizeof(r));
  if (n != static_cast<ssize_t>(sizeof(r))) {
    return Status::IOError(n < 0 ? std::string("read of a perf counter failed: ") +
                                       std::strerror(errno)
                                 : std::string("short read of a perf counter"));
  }
  out->value = r.value;
  out->enabled_ns = r.enabled;
  out->running_ns = r.running;
  return Status::Ok();
}

void ThreadPhaseCounters::open(bool enabled, std::string_view off_reason) {
  slots_.clear();
  counts_ = CpuCounters{};
  const std::pair<PerfEventId, EventCount CpuCounters::*> events[] = {
      {instructions_event(), &CpuCounters::instructions},
      {cycles_event(), &CpuCounters::cycles},
      {task_clock_event(), &CpuCounters::task_clock}};
  for (const auto& [event, member] : events) {
    EventCount& out = counts_.*member;
    if (!enabled) {
      out.reason = std::string(off_reason);
      continue;
    }
    ThreadEventCounter c;
    if (Status st = c.open(event); !st.ok()) {
      out.reason = st.message();
      continue;
    }
    slots_.push_back(Slot{std::move(c), {}, member});
  }
}

void ThreadPhaseCounters::start() {
  for (Slot& s : slots_) {
    if (Status st = s.counter.read(&s.begin); !st.ok()) (counts_.*s.member).reason = st.message();
  }
}

void ThreadPhaseCounters::stop() {
  for (Slot& s : slots_) {
    EventCount& out = counts_.*s.member;
    if (!out.reason.empty()) continue;  // the start() read failed
    PerfReading end;
    if (Status st = s.counter.read(&end); !st.ok()) {
      out.reason = st.message();
      continue;
    }
    const uint64_t enabled = end.enabled_ns - s.begin.enabled_ns;
    const uint64_t running = end.running_ns - s.begin.running_ns;
    if (running != enabled) {
      out.reason = "counter multiplexed with other perf users (counted " +
                   std::to_string(enabled ? running * 100 / enabled : 0) +
                   "% of the phase); the count would be an estimate";
      continue;
    }
    out.available = true;
    out.value = end.value - s.begin.value;
  }
}

CpuCounters cpu_counters_all_available() {
  CpuCounters c;
  c.instructions.available = c.cycles.available = c.task_clock.available = true;
  return c;
}

void add_thread_counts(CpuCounters* total, const CpuCounters& thread) {
  auto add = [](EventCount& t, const EventCount& x) {
    if (!x.available) {
      if (t.reason.empty()) t.reason = x.reason.empty() ? "not measured" : x.reason;
      t.available = false;
      t.value = 0;
      return;
    }
    if (t.available) t.value += x.value;
  };
  add(total->instructions, thread.instructions);
  add(total->cycles, thread.cycles);
  add(total->task_clock, thread.task_clock);
}

}  // namespace nvindex::bench
