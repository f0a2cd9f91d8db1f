// Tests of the per-phase CPU counters (src/bench/perf.h): the reasons given
// when a counter cannot be opened, a refused event staying closed, the
// software task-clock event read around a busy loop (it works without
// hardware counters, so it exercises the same open/start/stop path as
// instructions and cycles), counters turned off, and the sum over threads.
#include <gtest/gtest.h>
#include <linux/perf_event.h>

#include <cerrno>
#include <cstdint>
#include <string>

#include "bench/perf.h"

namespace nvindex::bench {
namespace {

/// Burns some user-space CPU time; returns a value the compiler must keep.
uint64_t burn(uint64_t n) {
  volatile uint64_t x = 1;
  for (uint64_t i = 0; i < n; ++i) x = x * 6364136223846793005ull + i;
  return x;
}

/// Whether this machine lets a thread count its own task-clock (perf
/// events may be forbidden altogether, e.g. kernel.perf_event_paranoid 3).
bool task_clock_available(std::string* why) {
  ThreadEventCounter c;
  Status st = c.open(task_clock_event());
  if (!st.ok()) *why = st.message();
  return st.ok();
}

TEST(PerfReason, NamesTheCauseAndTheErrno) {
  const std::string none = perf_event_open_reason(instructions_event(), ENOENT);
  EXPECT_NE(none.find("no instructions counter on this CPU or VM"), std::string::npos) << none;
  EXPECT_NE(none.find("ENOENT"), std::string::npos) << none;
  const std::string denied = perf_event_open_reason(cycles_event(), EACCES);
  EXPECT_NE(denied.find("perf_event_paranoid"), std::string::npos) << denied;
  EXPECT_NE(denied.find("EACCES"), std::string::npos) << denied;
  const std::string nosys = perf_event_open_reason(cycles_event(), ENOSYS);
  EXPECT_NE(nosys.find("not supported by this kernel"), std::string::npos) << nosys;
  const std::string other = perf_event_open_reason(cycles_event(), EMFILE);
  EXPECT_NE(other.find("cycles"), std::string::npos) << other;
  EXPECT_NE(other.find("EMFILE"), std::string::npos) << other;
}

TEST(PerfCounter, ARefusedEventStaysClosedWithAReason) {
  // No PMU has a generic hardware event with this number: the kernel refuses.
  const PerfEventId bogus{PERF_TYPE_HARDWARE, 0xfffff, "bogus"};
  ThreadEventCounter c;
  const Status st = c.open(bogus);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Code::kNotSupported);
  EXPECT_FALSE(st.message().empty());
  EXPECT_FALSE(c.is_open());
  PerfReading r;
  EXPECT_EQ(c.read(&r).code(), Code::kInvalidArgument);
}

TEST(PerfCounter, TaskClockGrowsAroundABusyLoop) {
  std::string why;
  if (!task_clock_available(&why)) GTEST_SKIP() << "perf events unavailable: " << why;
  ThreadEventCounter c;
  ASSERT_TRUE(c.open(task_clock_event()).ok());
  PerfReading a, b;
  ASSERT_TRUE(c.read(&a).ok());
  EXPECT_NE(burn(2'000'000), 0u);
  ASSERT_TRUE(c.read(&b).ok());
  EXPECT_GT(b.value, a.value);
  EXPECT_EQ(b.running_ns - a.running_ns, b.enabled_ns - a.enabled_ns)
      << "software: never multiplexed";
  // Moving transfers the descriptor.
  ThreadEventCounter d = std::move(c);
  EXPECT_FALSE(c.is_open());  // NOLINT(bugprone-use-after-move): the moved-from state is specified
  EXPECT_TRUE(d.is_open());
}

TEST(PerfPhase, CountsTheLoopOrSaysWhyNot) {
  ThreadPhaseCounters p;
  p.open(true, "unused");
  p.start();
  EXPECT_NE(burn(2'000'000), 0u);
  p.stop();
  const CpuCounters& c = p.counts();
  for (const EventCount* e : {&c.instructions, &c.cycles, &c.task_clock}) {
    if (e->available) {
      EXPECT_GT(e->value, 0u);
      EXPECT_TRUE(e->reason.empty()) << e->reason;
    } else {
      EXPECT_EQ(e->value, 0u);
      EXPECT_FALSE(e->reason.empty()) << "an unavailable count must say why";
    }
  }
  std::string why;
  if (task_clock_available(&why)) {
    ASSERT_TRUE(c.task_clock.available) << c.task_clock.reason;
    // Two million multiply-adds take well over 100 us of CPU time.
    EXPECT_GT(c.task_clock.value, 100'000u);
  }
}

TEST(PerfPhase, TurnedOffOpensNothingAndSaysSo) {
  ThreadPhaseCounters p;
  p.open(false, "turned off (--no-perf-counters)");
  p.start();
  p.stop();
  for (const EventCount* e :
       {&p.counts().instructions, &p.counts().cycles, &p.counts().task_clock}) {
    EXPECT_FALSE(e->available);
    EXPECT_EQ(e->value, 0u);
    EXPECT_EQ(e->reason, "turned off (--no-perf-counters)");
  }
}

TEST(PerfPhase, SumOverThreadsNeedsEveryThread) {
  CpuCounters a, b;
  a.instructions = {true, "", 100};
  b.instructions = {true, "", 50};
  a.cycles = {true, "", 40};
  b.cycles = {false, "no cycles counter on this CPU or VM (ENOENT)", 0};
  a.task_clock = {true, "", 7};
  b.task_clock = {false, "", 0};
  CpuCounters total = cpu_counters_all_available();
  add_thread_counts(&total, a);
  add_thread_counts(&total, b);
  EXPECT_TRUE(total.instructions.available);
  EXPECT_EQ(total.instructions.value, 150u);
  EXPECT_FALSE(total.cycles.available);
  EXPECT_EQ(total.cycles.value, 0u);
  EXPECT_EQ(total.cycles.reason, "no cycles counter on this CPU or VM (ENOENT)");
  EXPECT_FALSE(total.task_clock.available);
  EXPECT_EQ(total.task_clock.reason, "not measured");
  // A later thread's reason does not replace the first one.
  CpuCounters c;
  c.cycles = {false, "another reason", 0};
  add_thread_counts(&total, c);
  EXPECT_EQ(total.cycles.reason, "no cycles counter on this CPU or VM (ENOENT)");
}

}  // namespace
}  // namespace nvindex::bench
