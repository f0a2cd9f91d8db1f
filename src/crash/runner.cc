// The crash lab's child processes (runner.h): fork with a verdict pipe, poll
// the pipes against the deadlines, reap, and turn verdict lines into report
// entries.
#include "crash/runner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace nvindex::crash::detail {

void write_line(int fd, const std::string& s) {
  std::string line = s;
  for (char& ch : line) {
    if (ch == '\n') ch = ' ';
  }
  line += '\n';
  size_t off = 0;
  while (off < line.size()) {
    const ssize_t n = ::write(fd, line.data() + off, line.size() - off);
    if (n <= 0) return;
    off += static_cast<size_t>(n);
  }
}

Status Runner::spawn(const Failure& ctx, Kind kind, std::vector<std::string> files,
                     const std::function<void(int)>& job) {
  while (children_.size() >= o_.jobs) wait_some();
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return Status::IOError(std::string("pipe: ") + strerror(errno));
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(p[0]);
    ::close(p[1]);
    return Status::IOError(std::string("fork: ") + strerror(errno));
  }
  if (pid == 0) {
    ::close(p[0]);
    job(p[1]);
    ::_exit(0);
  }
  ::close(p[1]);
  Child c;
  c.pid = pid;
  c.fd = p[0];
  c.kind = kind;
  c.ctx = ctx;
  c.files = std::move(files);
  c.deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                  std::chrono::duration<double>(o_.child_timeout_s));
  children_.push_back(std::move(c));
  return Status::Ok();
}

void Runner::drain() {
  while (!children_.empty()) wait_some();
}

void Runner::fail(const Failure& f) {
  ++r_->failures;
  if (r_->examples.size() < o_.max_examples) r_->examples.push_back(f);
  if (o_.stop_at_first_failure) stop = true;
}

void Runner::wait_some() {
  std::vector<pollfd> fds;
  Clock::time_point first = Clock::time_point::max();
  for (const Child& c : children_) {
    fds.push_back({c.fd, POLLIN, 0});
    first = std::min(first, c.deadline);
  }
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(first - Clock::now());
  const int rc = ::poll(fds.data(), fds.size(), static_cast<int>(std::max<int64_t>(0, ms.count())));
  if (rc < 0 && errno != EINTR) return;
  const Clock::time_point now = Clock::now();
  for (size_t i = children_.size(); i-- > 0;) {
    Child& c = children_[i];
    if (fds[i].revents != 0) {
      char buf[4096];
      const ssize_t n = ::read(c.fd, buf, sizeof(buf));
      if (n > 0) {
        c.out.append(buf, static_cast<size_t>(n));
      } else if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
        c.eof = true;
      }
    }
    if (c.eof || now >= c.deadline) {
      finish(c, !c.eof);
      children_.erase(children_.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }
}

bool Runner::record_verdicts(const Child& c) {
  bool verdict = false;
  size_t pos = 0;
  while (pos < c.out.size()) {
    size_t end = c.out.find('\n', pos);
    if (end == std::string::npos) end = c.out.size();
    const std::string line = c.out.substr(pos, end - pos);
    pos = end + 1;
    if (line.empty()) continue;
    if (line[0] == 'F') {
      verdict = true;
      Failure f = c.ctx;
      f.what = line.substr(std::min<size_t>(2, line.size()));
      fail(f);
    } else if (line[0] == 'A' || line[0] == 'B') {
      verdict = true;
      ++r_->images;
      ++(line[0] == 'A' ? r_->recovered_after : r_->recovered_before);
    } else if (line[0] == 'N') {
      verdict = true;
      unsigned long long pts = 0, imgs = 0;
      if (std::sscanf(line.c_str(), "N %llu %llu", &pts, &imgs) == 2) {
        ++r_->nested_samples;
        r_->nested_points += pts;
        r_->nested_images += imgs;
      }
    }
  }
  return verdict;
}

void Runner::finish(Child& c, bool timed_out) {
  if (timed_out) ::kill(c.pid, SIGKILL);
  int status = 0;
  while (::waitpid(c.pid, &status, 0) < 0 && errno == EINTR) {
  }
  ::close(c.fd);
  for (const std::string& f : c.files) ::unlink(f.c_str());
  const bool verdict = record_verdicts(c);
  const char* nested = c.kind == Kind::kNested ? " (nested recovery check)" : "";
  Failure f = c.ctx;
  if (timed_out) {
    f.what =
        "recovery check hung: killed after " + std::to_string(o_.child_timeout_s) + " s" + nested;
    fail(f);
  } else if (!verdict || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    if (WIFSIGNALED(status)) {
      f.what = "recovery check crashed: signal " + std::to_string(WTERMSIG(status)) + " (" +
               strsignal(WTERMSIG(status)) + ")";
    } else {
      f.what = "recovery check ended without a verdict (exit status " +
               std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) + ")";
    }
    f.what += nested;
    fail(f);
  }
}

}  // namespace nvindex::crash::detail
