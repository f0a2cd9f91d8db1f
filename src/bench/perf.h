// CPU event counters of the benchmark phases with perf_event_open(2): retired
// user-space instructions, CPU cycles and (a software event, available even
// in a VM without a PMU) task-clock time.
//
// Each worker thread opens its own counters on itself (pid 0, any CPU,
// exclude_kernel = 1, exclude_hv = 1, enabled at once) before the phase's
// start barrier, reads them right before and right after its own loop, and
// the phase's count is the sum of the per-thread differences. Nothing runs
// per operation: two read(2) calls per counter per thread per phase. The
// count therefore covers everything the worker's loop does for each
// operation, the harness's checking and bookkeeping included (the same for
// every index); threads of an index's own (background) are not counted.
//
// A counter that cannot be opened (no hardware counters in a VM, a
// perf_event_paranoid setting that forbids it, a kernel without perf events)
// or that the kernel multiplexed with other perf users during the phase (its
// count would be an estimate) is "not available" with the reason; no number
// is ever made up.
//
// Thread-safety: a ThreadEventCounter belongs to the thread that opened it
// (it counts that thread); the free functions are thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "nvindex/status.h"

namespace nvindex::bench {

/// One event for perf_event_open(2): perf_event_attr type and config (e.g.
/// PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS) and a name for reports.
struct PerfEventId {
  uint32_t type = 0;
  uint64_t config = 0;
  std::string_view name;  ///< e.g. "instructions"
};

/// Retired instructions (PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS).
PerfEventId instructions_event();
/// CPU cycles (PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES).
PerfEventId cycles_event();
/// Task clock, ns of CPU time of the thread (PERF_TYPE_SOFTWARE,
/// PERF_COUNT_SW_TASK_CLOCK): works without hardware counters.
PerfEventId task_clock_event();

/// A counter value and how long it was enabled and actually counting (the
/// kernel multiplexes counters when there are more than the PMU holds).
struct PerfReading {
  uint64_t value = 0;       ///< events counted so far
  uint64_t enabled_ns = 0;  ///< time the counter was enabled, ns
  uint64_t running_ns = 0;  ///< time it was scheduled on the PMU, ns (< enabled: multiplexed)
};

/// One perf_event_open(2) counter of the calling thread, user space only.
/// Move-only; closes its file descriptor when destroyed.
class ThreadEventCounter {
 public:
  ThreadEventCounter() = default;
  ThreadEventCounter(ThreadEventCounter&& other) noexcept;
  ThreadEventCounter& operator=(ThreadEventCounter&& other) noexcept;
  ThreadEventCounter(const ThreadEventCounter&) = delete;
  ThreadEventCounter& operator=(const ThreadEventCounter&) = delete;
  ~ThreadEventCounter();

  /// Opens `event` counting the calling thread from now on (pid 0, cpu -1,
  /// exclude_kernel, exclude_hv, not inherited). Errors: NotSupported with
  /// the reason (perf_event_open_reason()) when the kernel refuses; the
  /// counter then stays closed.
  Status open(const PerfEventId& event);
  /// Whether open() succeeded.
  bool is_open() const { return fd_ >= 0; }
  /// Reads the current value (one read(2)). IOError on a failed or short
  /// read; InvalidArgument when not open.
  Status read(PerfReading* out) const;

 private:
  int fd_ = -1;
};

/// A human-readable reason for a perf_event_open(2) failure with `err`
/// (errno) on `event`, e.g. "no hardware counter for instructions on this CPU
/// or VM (ENOENT)" or "not permitted: kernel.perf_event_paranoid = 3 (EACCES)".
std::string perf_event_open_reason(const PerfEventId& event, int err);

/// One event over one phase, summed over the worker threads.
struct EventCount {
  bool available = false;  ///< counted exactly in every worker thread over the whole phase
  std::string reason;      ///< why not, when !available (empty otherwise)
  uint64_t value = 0;      ///< sum of the per-thread counts (0 when !available)
};

/// The CPU counters of one phase (PhaseResult::cpu).
struct CpuCounters {
  EventCount instructions;  ///< retired user-space instructions
  EventCount cycles;        ///< user-space CPU cycles
  EventCount task_clock;    ///< CPU time of the workers, ns (software event)
};

/// One worker thread's counters over one phase: open() before the start
/// barrier, start() right before the thread's loop, stop() right after.
class ThreadPhaseCounters {
 public:
  /// Opens instructions, cycles and task-clock on the calling thread. With
  /// `enabled` false nothing is opened and every event reports `off_reason`.
  void open(bool enabled, std::string_view off_reason);
  /// Reads every open counter (the phase starts).
  void start();
  /// Reads them again and keeps the differences (the phase ended). An event
  /// whose count was multiplexed in between becomes not available.
  void stop();
  /// This thread's counts (valid after stop()).
  const CpuCounters& counts() const { return counts_; }

 private:
  struct Slot {
    ThreadEventCounter counter;
    PerfReading begin;
    EventCount CpuCounters::*member = nullptr;  ///< where the difference goes
  };
  std::vector<Slot> slots_;
  CpuCounters counts_;
};

/// Adds `thread` (one worker's counts) to `total`: a value is available only
/// when it was in every thread; the first reason found is kept. Start with
/// `total` from cpu_counters_all_available() and add each thread in turn.
void add_thread_counts(CpuCounters* total, const CpuCounters& thread);
/// Every event available with value 0: the identity of add_thread_counts().
CpuCounters cpu_counters_all_available();

}  // namespace nvindex::bench
