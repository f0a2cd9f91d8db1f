// The crash lab's child processes, private to the crash lab: Runner forks one
// child per image check (at most Options::jobs at a time), gives each a
// deadline (Options::child_timeout_s, then SIGKILL: a hang), reads the
// verdict lines it writes on a pipe and turns them into report entries.
//
// Verdict-line protocol (one line each, written with write_line): "A" or "B"
// (an image recovered to the model after / before the operation in flight),
// "F <what>" (a failed check), "N <points> <images>" (a crash-during-recovery
// check ran over that many recovery crash points and images). A child that
// dies without a verdict, exits non-zero, or outlives its deadline is a
// failure too.
//
// Thread-safety: not thread-safe; one Runner per run, driven by one thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "crash/oracle.h"
#include "nvindex/status.h"

namespace nvindex::crash::detail {

/// Child side of the protocol: writes `s` as one line to `fd` (newlines in
/// it become spaces); gives up silently when the pipe is closed.
void write_line(int fd, const std::string& s);

/// Runs jobs in forked children with a deadline each and turns their
/// verdicts into report entries.
class Runner {
 public:
  /// The children's verdicts go to *r (images, recovered_before/after,
  /// nested_*, failures and examples), per o's jobs, timeout, max_examples
  /// and stop_at_first_failure.
  Runner(const Options& o, Report* r) : o_(o), r_(r) {}
  /// Waits for every child still running (drain()).
  ~Runner() { drain(); }
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;

  /// What a child checks; named in its failures.
  enum class Kind : int {
    kImage = 0,   ///< an image check (child_check_image)
    kNested = 1,  ///< a crash-during-recovery check (child_nested)
  };

  /// Forks a child running job(fd) (which writes its verdict lines to fd);
  /// the child then exits. Waits first while Options::jobs children run.
  /// `ctx` is the failure reported for what the child finds; `files` are
  /// removed when the child has ended. IOError when pipe or fork fails.
  Status spawn(const Failure& ctx, Kind kind, std::vector<std::string> files,
               const std::function<void(int)>& job);

  /// Waits for every child still running and records its verdicts.
  void drain();

  /// Records a failure (also used for failures the parent sees itself);
  /// sets `stop` with Options::stop_at_first_failure.
  void fail(const Failure& f);

  /// Set once the run should end (stop_at_first_failure and a failure).
  bool stop = false;

 private:
  using Clock = std::chrono::steady_clock;

  /// One child in flight.
  struct Child {
    pid_t pid = 0;
    int fd = -1;  ///< read end of its verdict pipe
    Kind kind = Kind::kImage;
    std::string out;  ///< verdict bytes read so far
    bool eof = false;
    Clock::time_point deadline;
    Failure ctx;
    std::vector<std::string> files;
  };

  /// Polls the children's pipes until some output or the first deadline,
  /// and finishes the children that ended or timed out.
  void wait_some();
  /// Reaps child c (killing it first when it timed out), removes its
  /// files and records its verdict lines, or the failure of its end.
  void finish(Child& c, bool timed_out);
  /// Records the verdict lines in c.out; returns whether there was one.
  bool record_verdicts(const Child& c);

  const Options& o_;
  Report* r_;
  std::vector<Child> children_;
};

}  // namespace nvindex::crash::detail
