// One fork-and-SIGKILL helper for every process-crash test (issue 9): forks a
// child that runs a callable, lets it run for a given time after it reports
// readiness or progress (or after fork), kills it with SIGKILL, reaps it, and
// reports how it ended. Torture (torture.cc) and the fastfair kill tests use
// it.
//
// The child learns nothing from the parent but what it inherited at fork;
// it reports progress through memory shared with the parent (a MAP_SHARED
// mapping created before fork, which survives the SIGKILL), and the parent
// polls that memory through KillPlan::ready. The child is also killed if the
// parent dies (PR_SET_PDEATHSIG), so a crashed test never leaves it running.
//
// Thread-safety: forks; call it from a process with no other threads
// running (a test binary's main thread, the CLI). Not reentrant.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "nvindex/status.h"

namespace nvindex::crash {

/// When the parent kills the child.
struct KillPlan {
  /// Polled by the parent after fork, every `poll`, until it returns true:
  /// the child's "ready" or progress signal (e.g. a flag or a count in a
  /// MAP_SHARED page). Empty: no wait; `delay` runs from fork.
  std::function<bool()> ready;
  /// Time from readiness (or from fork, when `ready` is empty) to the
  /// SIGKILL, nanoseconds (>= 0).
  std::chrono::nanoseconds delay{0};
  /// Longest wait for `ready`; past it the child is killed after `delay`
  /// anyway and KillResult::hung is set.
  std::chrono::nanoseconds ready_timeout = std::chrono::seconds(30);
  /// Interval between two polls of `ready`.
  std::chrono::nanoseconds poll = std::chrono::microseconds(200);
};

/// How the child ended.
struct KillResult {
  int status = 0;            ///< its waitpid(2) status
  bool ready = false;        ///< KillPlan::ready returned true before the kill
  double ready_ms = 0;       ///< fork to readiness, milliseconds (when `ready`)
  bool hung = false;         ///< KillPlan::ready_timeout passed before readiness
  bool ended_early = false;  ///< the child ended by itself while the parent waited
                             ///< for readiness, so no SIGKILL was sent

  /// The child died of SIGKILL (ours, or any other sender's).
  bool killed() const;
  /// "killed by SIGKILL", "exited with status 3", "died of signal 11
  /// (Segmentation fault)".
  std::string describe() const;
};

/// Forks a child that runs `child` and then _exit(0)s (the child may exit
/// by itself earlier, with any status). The parent waits for KillPlan::ready
/// (unless empty, the child ends first, or ready_timeout passes), sleeps
/// KillPlan::delay, sends SIGKILL, reaps the child and fills *result.
/// stdout and stderr are flushed before fork. Errors: IOError "fork: ..."
/// when the child cannot be made, IOError "waitpid: ..." when it cannot be
/// reaped (the child is killed first).
Status fork_and_kill(const std::function<void()>& child, const KillPlan& plan, KillResult* result);

}  // namespace nvindex::crash
