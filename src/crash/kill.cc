// The fork-and-SIGKILL helper (kill.h): fork, wait for readiness by polling,
// sleep, SIGKILL, reap.
#include "crash/kill.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <thread>

namespace nvindex::crash {
namespace {

using Clock = std::chrono::steady_clock;

/// Waits for child `pid` to end (retrying on EINTR) and stores its status.
/// IOError "waitpid: ..." otherwise.
Status reap(pid_t pid, int* status) {
  while (::waitpid(pid, status, 0) < 0) {
    if (errno != EINTR) return Status::IOError(std::string("waitpid: ") + std::strerror(errno));
  }
  return Status::Ok();
}

/// Polls plan.ready until it holds (out->ready, out->ready_ms from
/// `forked`), the child ends by itself (out->ended_early, out->status) or
/// plan.ready_timeout passes (out->hung). IOError "waitpid: ..." when the
/// child cannot be polled (it is killed and reaped first).
Status wait_ready(pid_t pid, const KillPlan& plan, Clock::time_point forked, KillResult* out) {
  const Clock::time_point deadline = Clock::now() + plan.ready_timeout;
  while (!plan.ready()) {
    const pid_t w = ::waitpid(pid, &out->status, WNOHANG);
    if (w == pid) {
      out->ended_early = true;
      return Status::Ok();
    }
    if (w < 0 && errno != EINTR) {
      const Status err = Status::IOError(std::string("waitpid: ") + std::strerror(errno));
      ::kill(pid, SIGKILL);
      int ignored = 0;
      (void)reap(pid, &ignored);
      return err;
    }
    if (Clock::now() > deadline) {
      out->hung = true;
      return Status::Ok();
    }
    std::this_thread::sleep_for(plan.poll);
  }
  out->ready = true;
  out->ready_ms = std::chrono::duration<double, std::milli>(Clock::now() - forked).count();
  return Status::Ok();
}

}  // namespace

bool KillResult::killed() const { return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL; }

std::string KillResult::describe() const {
  if (killed()) return "killed by SIGKILL";
  if (WIFSIGNALED(status)) {
    return "died of signal " + std::to_string(WTERMSIG(status)) + " (" +
           strsignal(WTERMSIG(status)) + ")";
  }
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  return "ended with wait status " + std::to_string(status);
}

Status fork_and_kill(const std::function<void()>& child, const KillPlan& plan, KillResult* result) {
  *result = KillResult{};
  std::fflush(stdout);
  std::fflush(stderr);
  const Clock::time_point forked = Clock::now();
  const pid_t pid = ::fork();
  if (pid < 0) return Status::IOError(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive a parent that died
    child();
    ::_exit(0);
  }
  if (plan.ready) {
    const Status s = wait_ready(pid, plan, forked, result);
    if (!s.ok() || result->ended_early) return s;
  }
  std::this_thread::sleep_for(plan.delay);
  ::kill(pid, SIGKILL);
  return reap(pid, &result->status);
}

}  // namespace nvindex::crash
