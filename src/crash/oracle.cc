// The crash-lab oracle: see oracle.h for what is checked and why.
//
// Process structure. The parent runs the scenario under the simulator; at
// every crash point the visitor forks one child per image (the child sees the
// image bytes as they were at fork time, copy-on-write, so the parent may go
// on at once; up to Options::jobs children run at a time). A child reports
// one line on a pipe: "B" or "A" (recovered to the model before / after the
// operation), or "F <what>"; a child that dies without a verdict (a crash in
// recovery) or outlives its deadline (killed: a hang) is a failure too.
// Sampled images are kept as line diffs against the pool as created and are
// re-recovered under a nested simulator after the scenario (when no
// simulator is attached in the parent, so the child can attach its own).
#include "crash/oracle.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <set>

#include "nvindex/pm/allocator.h"
#include "nvindex/pm/persist.h"
#include "nvindex/pm/pool.h"
#include "util/hex.h"

namespace nvindex::crash {

namespace cs = pm::crashsim;

namespace {

/// Bytes the allocator hands out for a node of `node_size` bytes: its size
/// class (the next power of two, at least 64), e.g. 1024 for a 768 B leaf.
uint64_t block_bytes(uint32_t node_size) {
  return std::bit_ceil(std::max<uint64_t>(pm::Allocator::kMinBlock, node_size));
}

using Clock = std::chrono::steady_clock;
constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();

std::string key_text(uint64_t k) { return k == kMax ? "UINT64_MAX" : std::to_string(k); }

// ------------------------------------------------------------ image files

/// Writes `size` bytes to a fresh file at `path` (replacing a leftover),
/// skipping all-zero 4 KiB pages (tmpfs reads holes as zeros): most of a
/// small test pool is unused heap, so this is most of the speed.
Status write_image(const std::string& path, const char* bytes, size_t size) {
  static const std::array<char, 4096> kZero{};
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Status::IOError("open " + path + ": " + std::strerror(errno));
  Status s;
  if (::ftruncate(fd, static_cast<off_t>(size)) != 0) {
    s = Status::IOError("ftruncate " + path + ": " + std::strerror(errno));
  }
  for (size_t off = 0; s.ok() && off < size; off += kZero.size()) {
    const size_t n = std::min(kZero.size(), size - off);
    if (std::memcmp(bytes + off, kZero.data(), n) == 0) continue;
    if (::pwrite(fd, bytes + off, n, static_cast<off_t>(off)) != static_cast<ssize_t>(n)) {
      s = Status::IOError("write " + path + ": " + std::strerror(errno));
    }
  }
  ::close(fd);
  return s;
}

/// An image stored as the 64 B lines where it differs from a base.
using LineDiff = std::vector<std::pair<uint64_t, std::array<char, 64>>>;

LineDiff diff_lines(const char* base, const char* image, size_t size) {
  LineDiff d;
  for (size_t off = 0; off + 64 <= size; off += 64) {
    if (std::memcmp(base + off, image + off, 64) != 0) {
      std::array<char, 64> line;
      std::memcpy(line.data(), image + off, 64);
      d.emplace_back(off, line);
    }
  }
  return d;
}

void apply_diff(const LineDiff& d, char* bytes) {
  for (const auto& [off, line] : d) std::memcpy(bytes + off, line.data(), 64);
}

// ------------------------------------------------------------ content checks

/// Reads the index's content: a full scan (ordered indexes: strictly
/// ascending, no duplicates) and a lookup of every key in `keys`, which must
/// agree with the scan. Returns "" or what was wrong.
std::string read_content(Index<uint64_t>& idx, bool ordered, const std::vector<uint64_t>& keys,
                         Model* out) {
  out->clear();
  if (ordered) {
    std::vector<std::pair<uint64_t, Value>> v;
    idx.scan(0, keys.size() + 64, &v);
    for (size_t i = 0; i < v.size(); ++i) {
      if (i > 0 && v[i].first <= v[i - 1].first) {
        return "full scan not strictly ascending at key " + key_text(v[i].first) +
               " (duplicate or out of order)";
      }
      (*out)[v[i].first] = v[i].second;
    }
  }
  for (uint64_t k : keys) {
    const std::optional<Value> got = idx.lookup(k);
    if (ordered) {
      const auto it = out->find(k);
      const bool in_scan = it != out->end();
      if (got.has_value() != in_scan || (got && *got != it->second)) {
        return "lookup(" + key_text(k) + ") = " + (got ? hex(*got) : "absent") +
               " disagrees with the full scan (" + (in_scan ? hex(it->second) : "absent") + ")";
      }
    } else if (got) {
      (*out)[k] = *got;
    }
  }
  return "";
}

/// First few differences between got and want, e.g. "key 7007: got absent,
/// want 0x1f; key 9: got 0x2, want absent".
std::string model_diff(const Model& got, const Model& want, size_t limit = 4) {
  std::string s;
  size_t n = 0;
  auto add = [&](uint64_t k, const std::string& g, const std::string& w) {
    if (n++ < limit) {
      s += (s.empty() ? "" : "; ") + std::string("key ") + key_text(k) + ": got " + g + ", want " +
           w;
    }
  };
  for (const auto& [k, v] : want) {
    auto it = got.find(k);
    if (it == got.end()) {
      add(k, "absent", hex(v));
    } else if (it->second != v) {
      add(k, hex(it->second), hex(v));
    }
  }
  for (const auto& [k, v] : got) {
    if (!want.count(k)) add(k, hex(v), "absent");
  }
  if (n > limit) s += "; ... (" + std::to_string(n) + " differences)";
  return s;
}

/// What the child needs to check one image (inherited through fork).
struct CheckContext {
  const Options* options = nullptr;
  const std::vector<uint64_t>* universe = nullptr;
  const Model* before = nullptr;
  const Model* after = nullptr;
  bool allow_before = false;
  bool ordered = true;
  Placement placement = Placement::kPmOnly;
  bool overhead_known = false;
  uint64_t overhead = 0;  ///< bytes in use beyond the nodes, right after creation
};

// The scenario's index on `pool`: created when the pool has no root,
// recovered otherwise (make_index decides), with the scenario's node size and
// index-specific options. Errors as make_index.
Status make_scenario_index(const Options& o, pm::Pool* pool,
                           std::unique_ptr<Index<uint64_t>>* idx) {
  IndexOptions io;
  io.pool = pool;
  io.node_size = o.node_size;
  io.extra = o.index_opts;
  return make_index<uint64_t>(o.index, io, idx);
}

/// Opens the image file at `path` in `mode` and recovers the index.
Status open_and_recover(const Options& o, const std::string& path, pm::Mode mode,
                        std::unique_ptr<pm::Pool>* pool, std::unique_ptr<Index<uint64_t>>* idx) {
  Status s = pm::Pool::open(path, o.index, mode, pool);
  if (!s.ok()) return Status(s.code(), "Pool::open: " + s.ToString());
  s = make_scenario_index(o, pool->get(), idx);
  if (!s.ok()) return Status(s.code(), "recovery (make_index): " + s.ToString());
  return Status::Ok();
}

/// Checks 2-5 of oracle.h on a recovered index. Returns "" and sets *which
/// ('B' before, 'A' after), or what failed.
std::string check_recovered(const CheckContext& c, pm::Pool* pool, Index<uint64_t>& idx,
                            char* which) {
  const Options& o = *c.options;
  VerifyReport r;
  Status s = idx.verify(&r);
  if (!s.ok()) return "verify() after recovery: " + s.ToString();
  Model got;
  std::string err = read_content(idx, c.ordered, *c.universe, &got);
  if (!err.empty()) return "after recovery: " + err;
  if (got == *c.after) {
    *which = 'A';
  } else if (c.allow_before && got == *c.before) {
    *which = 'B';
  } else {
    std::string m = "durable linearizability: recovered content matches ";
    m += c.allow_before ? "neither the model before nor after the operation"
                        : "not the model "
                          "after the "
                          "operation "
                          "returned";
    m += "; vs after: " + model_diff(got, *c.after);
    if (c.allow_before) m += "; vs before: " + model_diff(got, *c.before);
    return m;
  }
  if (r.keys != got.size()) {
    return "verify() counts " + std::to_string(r.keys) + " keys, the content has " +
           std::to_string(got.size());
  }
  // 4. PM accounting (leak check).
  const IndexInfo info = idx.info();
  if (c.overhead_known) {
    const uint64_t nodes = r.leaves + (c.placement == Placement::kSelective ? 0 : r.inner_nodes);
    const uint64_t want = nodes * block_bytes(info.node_size) + c.overhead;
    const uint64_t have = pool->allocator().bytes_in_use();
    if (have != want) {
      return "PM accounting after recovery: " + std::to_string(have) + " bytes in use, expected " +
             std::to_string(want) + " (" + std::to_string(nodes) + " nodes x " +
             std::to_string(block_bytes(info.node_size)) + " B + " + std::to_string(c.overhead) +
             " B overhead): a block leaked or lost";
    }
  }
  // 5. The index keeps working: fresh keys between the existing ones (splits),
  // then removes (merges), all against the model.
  Model m = got;
  std::vector<uint64_t> keys = *c.universe;
  const uint64_t fresh = std::max<uint64_t>(24, 3ull * o.node_size / 16);
  for (uint64_t i = 0; i < fresh; ++i) {
    const uint64_t k = 1000 * i + 503;
    keys.push_back(k);
    s = idx.insert(k, k ^ 0x5a5a5a5aull);
    if (!s.ok()) return "after recovery: insert(" + key_text(k) + ") = " + s.ToString();
    m[k] = k ^ 0x5a5a5a5aull;
  }
  size_t n = 0;
  for (const auto& [k, v] : got) {
    if (n++ % 3 == 0) {
      s = idx.update(k, ~v);
      if (!s.ok()) return "after recovery: update(" + key_text(k) + ") = " + s.ToString();
      m[k] = ~v;
    }
  }
  for (uint64_t i = fresh; i-- > 0;) {
    const uint64_t k = 1000 * i + 503;
    s = idx.remove(k);
    if (!s.ok()) return "after recovery: remove(" + key_text(k) + ") = " + s.ToString();
    m.erase(k);
  }
  n = 0;
  for (const auto& [k, v] : got) {
    if (n++ % 2 == 1) {
      s = idx.remove(k);
      if (!s.ok()) return "after recovery: remove(" + key_text(k) + ") = " + s.ToString();
      m.erase(k);
    }
  }
  s = idx.verify(&r);
  if (!s.ok()) return "verify() after further inserts and removes: " + s.ToString();
  std::sort(keys.begin(), keys.end());
  Model now;
  err = read_content(idx, c.ordered, keys, &now);
  if (!err.empty()) return "after further inserts and removes: " + err;
  if (now != m) return "after further inserts and removes: " + model_diff(now, m);
  return "";
}

// ------------------------------------------------------------ child processes

/// Runs jobs in forked children with a deadline each and turns their
/// verdicts into report entries.
class Runner {
 public:
  Runner(const Options& o, Report* r) : o_(o), r_(r) {}
  ~Runner() { drain(); }

  /// Forks a child running job(fd) (which writes its verdict lines to fd);
  /// the child then exits. `files` are removed when the child has ended.
  Status spawn(const Failure& ctx, int kind, std::vector<std::string> files,
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

  void drain() {
    while (!children_.empty()) wait_some();
  }

  /// Records a failure (also used for failures the parent sees itself).
  void fail(const Failure& f) {
    ++r_->failures;
    if (r_->examples.size() < o_.max_examples) r_->examples.push_back(f);
    if (o_.stop_at_first_failure) stop = true;
  }

  bool stop = false;

 private:
  struct Child {
    pid_t pid = 0;
    int fd = -1;
    int kind = 0;  // 0: image check, 1: nested recovery check
    std::string out;
    bool eof = false;
    Clock::time_point deadline;
    Failure ctx;
    std::vector<std::string> files;
  };

  void wait_some() {
    std::vector<pollfd> fds;
    Clock::time_point first = Clock::time_point::max();
    for (const Child& c : children_) {
      fds.push_back({c.fd, POLLIN, 0});
      first = std::min(first, c.deadline);
    }
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(first - Clock::now());
    const int rc =
        ::poll(fds.data(), fds.size(), static_cast<int>(std::max<int64_t>(0, ms.count())));
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

  void finish(Child& c, bool timed_out) {
    if (timed_out) ::kill(c.pid, SIGKILL);
    int status = 0;
    while (::waitpid(c.pid, &status, 0) < 0 && errno == EINTR) {
    }
    ::close(c.fd);
    for (const std::string& f : c.files) ::unlink(f.c_str());
    Failure f = c.ctx;
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
    if (timed_out) {
      f.what = "recovery check hung: killed after " + std::to_string(o_.child_timeout_s) + " s" +
               (c.kind == 1 ? " (nested recovery check)" : "");
      fail(f);
    } else if (!verdict || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      if (WIFSIGNALED(status)) {
        f.what = "recovery check crashed: signal " + std::to_string(WTERMSIG(status)) + " (" +
                 strsignal(WTERMSIG(status)) + ")";
      } else {
        f.what = "recovery check ended without a verdict (exit status " +
                 std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) + ")";
      }
      if (c.kind == 1) f.what += " (nested recovery check)";
      fail(f);
    }
  }

  const Options& o_;
  Report* r_;
  std::vector<Child> children_;
};

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

/// Child side of an image check.
void child_check_image(const CheckContext& c, const char* bytes, size_t size,
                       const std::string& path, int fd) {
  cs::Simulator::detach_after_fork();
  pm::PersistConfig cfg = pm::current_config();
  cfg.mode = pm::Mode::kEmulated;
  pm::configure(cfg);
  Status s = write_image(path, bytes, size);
  if (!s.ok()) {
    write_line(fd, "F cannot write the image: " + s.ToString());
    return;
  }
  std::unique_ptr<pm::Pool> pool;
  std::unique_ptr<Index<uint64_t>> idx;
  s = open_and_recover(*c.options, path, pm::Mode::kEmulated, &pool, &idx);
  if (!s.ok()) {
    write_line(fd, "F " + s.message());
    ::unlink(path.c_str());
    return;
  }
  char which = 0;
  const std::string err = check_recovered(c, pool.get(), *idx, &which);
  ::unlink(path.c_str());
  write_line(fd, err.empty() ? std::string(1, which) : "F " + err);
}

/// A sampled image, kept for the crash-during-recovery check.
struct Sample {
  LineDiff diff;  ///< vs the pool as created
  Failure ctx;
};

/// Child side of the crash-during-recovery check (see oracle.h, 6).
void child_nested(const Options& o, const std::vector<uint64_t>& universe, bool ordered,
                  const std::vector<char>& base, const Sample& sample, const std::string& path,
                  const std::string& path2, int fd) {
  std::vector<char> image = base;
  apply_diff(sample.diff, image.data());
  pm::PersistConfig cfg = pm::current_config();
  cfg.mode = pm::Mode::kCrashSim;
  pm::configure(cfg);
  Status s = write_image(path, image.data(), image.size());
  if (!s.ok()) {
    write_line(fd, "F nested: cannot write the image: " + s.ToString());
    return;
  }
  std::unique_ptr<pm::Pool> pool;
  s = pm::Pool::open(path, o.index, pm::Mode::kCrashSim, &pool);
  if (!s.ok()) {
    write_line(fd, "F nested: Pool::open: " + s.ToString());
    return;
  }
  cs::Options so = o.sim;
  so.check_uninstrumented = true;
  std::unique_ptr<cs::Simulator> sim;
  s = cs::Simulator::attach(pool.get(), so, &sim);
  if (!s.ok()) {
    write_line(fd, "F nested: Simulator::attach: " + s.ToString());
    return;
  }
  struct Nested {
    LineDiff diff;
    std::string where;
  };
  std::vector<Nested> nested;
  uint64_t points = 0, last_point = kMax, taken_here = 0;
  std::vector<char> opened(pool->base(), pool->base() + pool->size());
  s = set_image_visitor(sim.get(), o.images, [&](const cs::CrashPoint& cp, const Image& img) {
    if (cp.number != last_point) {
      last_point = cp.number;
      taken_here = 0;
      ++points;
    }
    if (taken_here >= o.nested_per_point || nested.size() >= o.nested_total) return false;
    ++taken_here;
    nested.push_back({diff_lines(opened.data(), img.bytes->data(), opened.size()),
                      "recovery crash point " + std::to_string(cp.number) + " before fence " +
                          cp.site + ", image " + img.choice});
    return true;
  });
  if (!s.ok()) {
    write_line(fd, "F nested: set_image_visitor: " + s.ToString());
    return;
  }
  sim->set_crash_points(true);
  std::unique_ptr<Index<uint64_t>> idx;
  s = make_scenario_index(o, pool.get(), &idx);
  sim->set_crash_points(false);
  if (!s.ok()) {
    write_line(fd, "F nested: recovery under the simulator failed: " + s.ToString());
    return;
  }
  Model first;
  std::string err = read_content(*idx, ordered, universe, &first);
  if (!err.empty()) {
    write_line(fd, "F nested: " + err);
    return;
  }
  const uint64_t uninstrumented = sim->stats().uninstrumented_writes;
  sim.reset();  // detach: the nested images are recovered in emulated mode
  if (uninstrumented != 0) {
    write_line(fd, "F nested: " + std::to_string(uninstrumented) +
                       " uninstrumented writes during recovery");
  }
  cfg.mode = pm::Mode::kEmulated;
  pm::configure(cfg);
  for (const Nested& n : nested) {
    std::vector<char> img2 = opened;
    apply_diff(n.diff, img2.data());
    s = write_image(path2, img2.data(), img2.size());
    if (!s.ok()) {
      write_line(fd, "F nested: cannot write the image: " + s.ToString());
      return;
    }
    std::unique_ptr<pm::Pool> pool2;
    std::unique_ptr<Index<uint64_t>> idx2;
    s = open_and_recover(o, path2, pm::Mode::kEmulated, &pool2, &idx2);
    std::string what;
    if (!s.ok()) {
      what = s.message();
    } else {
      VerifyReport r;
      Status v = idx2->verify(&r);
      Model second;
      if (!v.ok()) {
        what = "verify(): " + v.ToString();
      } else if (std::string e = read_content(*idx2, ordered, universe, &second); !e.empty()) {
        what = e;
      } else if (second != first) {
        what = "content differs from the uninterrupted recovery: " + model_diff(second, first);
      }
    }
    idx2.reset();
    pool2.reset();
    ::unlink(path2.c_str());
    if (!what.empty()) {
      write_line(fd, "F crash during recovery (" + n.where + "), then recovery again: " + what);
      break;
    }
  }
  ::unlink(path.c_str());
  write_line(fd, "N " + std::to_string(points) + " " + std::to_string(nested.size()));
}

// ------------------------------------------------------------ one scenario

template <class M>
void add_counts(M* into, const M& from) {
  for (const auto& [k, v] : from) (*into)[k] += v;
}

Status run_scenario(const Options& o, size_t scenario, Report* rep, Runner* runner,
                    uint64_t* file_counter) {
  const uint64_t seed = o.seed + scenario;
  const Scenario sc = make_scenario(seed, o.ops);
  const std::string prefix = o.dir + "/nvx-crashtest-" + std::to_string(::getpid()) + "-";
  const std::string pool_path = prefix + "s" + std::to_string(scenario) + ".pool";
  ::unlink(pool_path.c_str());

  pm::PersistConfig cfg = pm::current_config();
  cfg.mode = pm::Mode::kCrashSim;
  pm::configure(cfg);
  std::unique_ptr<pm::Pool> pool;
  Status s = pm::Pool::create(pool_path, o.pool_bytes, o.index, pm::Mode::kCrashSim, &pool);
  if (!s.ok()) return s;
  ::unlink(pool_path.c_str());  // the mapping stays; nothing else needs the name
  std::unique_ptr<cs::Simulator> sim;
  s = cs::Simulator::attach(pool.get(), o.sim, &sim);
  if (!s.ok()) return s;
  if (!o.ablate_site.empty()) sim->ablate(o.ablate_site, o.ablate_flush, o.ablate_fence);
  const std::vector<char> base(pool->base(), pool->base() + pool->size());

  Model before, after;
  int64_t op_number = -1;
  bool in_op = false;  // a fence crash point inside an op may show before or after
  const std::string ablation =
      o.ablate_site.empty() ? ""
                            : o.ablate_site + (o.ablate_flush && o.ablate_fence ? "/flush+fence"
                                               : o.ablate_fence                 ? "/fence"
                                                                                : "/flush");
  CheckContext ctx;
  ctx.options = &o;
  ctx.universe = &sc.universe;
  ctx.before = &before;
  ctx.after = &after;
  Failure tmpl;
  tmpl.index = o.index;
  tmpl.node_size = o.node_size;
  tmpl.seed = seed;
  tmpl.ops = o.ops;
  tmpl.ablation = ablation;
  std::vector<Sample> samples;
  uint64_t image_count = 0, last_point = kMax;
  auto op_label = [&]() {
    return op_number < 0 ? std::string("create") : op_text(sc.ops[static_cast<size_t>(op_number)]);
  };

  ImageOptions io = o.images;
  io.seed = seed;
  s = set_image_visitor(sim.get(), io, [&](const cs::CrashPoint& cp, const Image& img) -> bool {
    if (runner->stop) return false;
    if (cp.number != last_point) {
      last_point = cp.number;
      ++(cp.at_fence ? rep->fence_points : rep->boundary_points);
    }
    ctx.allow_before = cp.at_fence && in_op;
    Failure f = tmpl;
    f.op_number = op_number;
    f.op = op_label();
    f.crash_point = cp.number;
    f.at_fence = cp.at_fence;
    f.site = cp.site;
    f.fences = cp.fences;
    f.choice = img.choice;
    const size_t size = img.bytes->size();
    if (o.nested_every > 0 && image_count++ % o.nested_every == 0 &&
        samples.size() < o.nested_max) {
      samples.push_back({diff_lines(base.data(), img.bytes->data(), size), f});
    }
    const std::string path = prefix + std::to_string((*file_counter)++) + ".img";
    const char* bytes = img.bytes->data();
    Status st =
        runner->spawn(f, 0, {path}, [&](int fd) { child_check_image(ctx, bytes, size, path, fd); });
    if (!st.ok()) {
      f.what = "cannot run the check: " + st.ToString();
      runner->fail(f);
      return false;
    }
    return !runner->stop;
  });
  if (!s.ok()) return s;

  // Index creation, with crash points on: a crash here must recover empty.
  sim->set_crash_points(true);
  std::unique_ptr<Index<uint64_t>> idx;
  s = make_scenario_index(o, pool.get(), &idx);
  if (!s.ok()) {
    sim->set_crash_points(false);
    runner->drain();
    return s;
  }
  const IndexInfo info = idx->info();
  sim->operation_boundary("create");
  ctx.ordered = info.caps.ordered;
  ctx.placement = info.caps.placement;
  if (rep->ablation_notes.empty()) rep->ablation_notes = idx->ablation_notes();
  {
    VerifyReport r;
    if (idx->verify(&r).ok()) {
      const uint64_t nodes =
          r.leaves + (info.caps.placement == Placement::kSelective ? 0 : r.inner_nodes);
      const uint64_t in_use = pool->allocator().bytes_in_use();
      const uint64_t block = block_bytes(info.node_size);
      ctx.overhead_known = nodes > 0 && in_use >= nodes * block;
      ctx.overhead = ctx.overhead_known ? in_use - nodes * block : 0;
    }
  }

  Model model;
  for (size_t k = 0; k < sc.ops.size() && !runner->stop; ++k) {
    const Op& op = sc.ops[k];
    before = model;
    after = model;
    const Code want = apply_op(op, &after);
    op_number = static_cast<int64_t>(k);
    in_op = true;
    Status got;
    switch (op.kind) {
      case Op::Kind::kInsert:
        got = idx->insert(op.key, op.value);
        break;
      case Op::Kind::kUpdate:
        got = idx->update(op.key, op.value);
        break;
      case Op::Kind::kRemove:
        got = idx->remove(op.key);
        break;
    }
    in_op = false;
    ++rep->operations;
    if (got.code() != want) {
      Failure f = tmpl;
      f.op_number = op_number;
      f.op = op_text(op);
      f.live = true;
      f.what =
          "the live index returned " + got.ToString() + ", expected " + std::string(CodeName(want));
      runner->fail(f);
    }
    model = after;
    sim->operation_boundary("op " + std::to_string(k) + ": " + op_text(op));
  }
  sim->set_crash_points(false);
  runner->drain();
  // The live index must hold the model too (no crash involved).
  if (!runner->stop) {
    VerifyReport r;
    Status v = idx->verify(&r);
    Model live;
    std::string err =
        v.ok() ? read_content(*idx, ctx.ordered, sc.universe, &live) : "verify(): " + v.ToString();
    if (err.empty() && live != model) err = model_diff(live, model);
    if (!err.empty()) {
      Failure f = tmpl;
      f.op_number = static_cast<int64_t>(sc.ops.size()) - 1;
      f.op = "(end of scenario)";
      f.live = true;
      f.what = "live index after the scenario: " + err;
      runner->fail(f);
    }
  }
  const cs::Stats& st = sim->stats();
  rep->crash_points += st.crash_points;
  rep->uninstrumented_writes += st.uninstrumented_writes;
  for (const std::string& e : st.uninstrumented_examples) {
    if (rep->uninstrumented_examples.size() < 8) rep->uninstrumented_examples.push_back(e);
  }
  add_counts(&rep->lint.not_durable_at_return, sim->lint().not_durable_at_return);
  add_counts(&rep->lint.flush_without_fence, sim->lint().flush_without_fence);
  add_counts(&rep->lint.redundant_flush, sim->lint().redundant_flush);
  add_counts(&rep->lint.redundant_fence, sim->lint().redundant_fence);
  for (const auto& [k, v] : sim->sites()) {
    rep->sites[k].flushes += v.flushes;
    rep->sites[k].fences += v.fences;
  }
  idx.reset();
  sim.reset();  // before the pool (crashsim.h)
  pool.reset();
  ++rep->scenarios;
  if (o.stop_at_first_failure && !rep->ok()) runner->stop = true;

  // 6. Crash during recovery, on the sampled images (no simulator attached
  // in this process now, so each child can attach its own).
  for (const Sample& sample : samples) {
    if (runner->stop) break;
    const std::string p1 = prefix + std::to_string((*file_counter)++) + ".nst";
    const std::string p2 = prefix + std::to_string((*file_counter)++) + ".nst";
    const bool ordered = ctx.ordered;
    s = runner->spawn(sample.ctx, 1, {p1, p2}, [&](int fd) {
      child_nested(o, sc.universe, ordered, base, sample, p1, p2, fd);
    });
    if (!s.ok()) return s;
  }
  runner->drain();
  return Status::Ok();
}

}  // namespace

// ------------------------------------------------------------ scenarios

std::string op_text(const Op& op) {
  switch (op.kind) {
    case Op::Kind::kInsert:
      return "insert " + key_text(op.key) + "=" + hex(op.value);
    case Op::Kind::kUpdate:
      return "update " + key_text(op.key) + "=" + hex(op.value);
    case Op::Kind::kRemove:
      return "remove " + key_text(op.key);
  }
  return "?";
}

Code apply_op(const Op& op, Model* m) {
  const auto it = m->find(op.key);
  switch (op.kind) {
    case Op::Kind::kInsert:
      if (it != m->end()) return Code::kAlreadyExists;
      (*m)[op.key] = op.value;
      return Code::kOk;
    case Op::Kind::kUpdate:
      if (it == m->end()) return Code::kNotFound;
      it->second = op.value;
      return Code::kOk;
    case Op::Kind::kRemove:
      if (it == m->end()) return Code::kNotFound;
      m->erase(it);
      return Code::kOk;
  }
  return Code::kInvalidArgument;
}

Scenario make_scenario(uint64_t seed, size_t n) {
  Scenario sc;
  std::mt19937_64 rng(seed * 0x9e3779b97f4a7c15ull + 1);
  const size_t u = std::max<size_t>(8, 2 * n / 3);
  std::vector<uint64_t> keys = {0, kMax};
  for (size_t i = 0; i < u; ++i) keys.push_back(1000 * i + 7);
  Model m;
  auto pick = [&](bool present) -> uint64_t {
    std::vector<uint64_t> c;
    for (uint64_t k : keys) {
      if (static_cast<bool>(m.count(k)) == present) c.push_back(k);
    }
    if (c.empty()) return keys[rng() % keys.size()];
    return c[rng() % c.size()];
  };
  auto value = [&]() -> Value { return rng() % 8 == 0 ? 0 : rng(); };
  const size_t grow = n * 55 / 100;
  for (size_t i = 0; i < n; ++i) {
    const unsigned r = static_cast<unsigned>(rng() % 100);
    Op op;
    if (i < grow) {
      op.kind = r < 80 ? Op::Kind::kInsert : r < 90 ? Op::Kind::kUpdate : Op::Kind::kRemove;
    } else {
      op.kind = r < 70 ? Op::Kind::kRemove : r < 80 ? Op::Kind::kInsert : Op::Kind::kUpdate;
    }
    const bool usual = rng() % 10 != 0;  // 10%: the failing case
    op.key = pick(op.kind == Op::Kind::kInsert ? !usual : usual);
    op.value = value();
    apply_op(op, &m);
    sc.ops.push_back(op);
  }
  std::sort(keys.begin(), keys.end());
  sc.universe = keys;
  return sc;
}

// ------------------------------------------------------------ reports

std::string Failure::to_string() const {
  std::string s = "index " + index + ", node size " + std::to_string(node_size) + " B, seed " +
                  std::to_string(seed) + ", " + std::to_string(ops) + " ops";
  if (!ablation.empty()) s += ", ablated " + ablation;
  s += "\n  operation " + std::to_string(op_number) + " (" + op + ")";
  if (live) {
    s += ", live index (no crash)";
  } else {
    s += "\n  crash point " + std::to_string(crash_point) + " " +
         (at_fence ? "before fence at " : "at return of ") + site + " (" + std::to_string(fences) +
         " fences so far)";
    s += "\n  image: " + (choice.empty() ? std::string("(durable bytes only)") : choice);
  }
  s += "\n  saw: " + what;
  s += "\n  replay: nvindex crashtest --index " + index + " --node-size " +
       std::to_string(node_size) + " --seed " + std::to_string(seed) + " --ops " +
       std::to_string(ops) + " --scenarios 1";
  if (!ablation.empty()) s += " --ablate " + ablation.substr(0, ablation.rfind('/'));
  return s;
}

std::string find_note(const std::vector<std::pair<std::string, std::string>>& notes,
                      const std::string& site, bool fence) {
  const std::string exact = site + (fence ? "/fence" : "/flush");
  for (const auto& [k, v] : notes) {
    if (k == exact) return v;
  }
  for (const auto& [k, v] : notes) {
    if (k == site) return v;
  }
  // The PM layer's own sites (unnamed: keyed by file:line) are exercised by
  // every index's runs too. Their fences are redundant under the publish
  // protocol every index follows: the flushed line (a chunk's class byte, the
  // pool's root offset) becomes durable at the same thread's next fence, and
  // the index issues one (persisting the new block) before it publishes
  // anything that depends on it; a crash before that fence leaves a chunk no
  // reachable block uses, or a pool with no root, i.e. an empty index.
  if (fence && (site.starts_with("allocator.cc:") || site.starts_with("pool.h:"))) {
    return "PM layer: redundant under persist-before-publish (the flushed line is committed by "
           "the same thread's next fence, which precedes any publication depending on it)";
  }
  return "";
}

// ------------------------------------------------------------ runs

Status run_crash_test(const Options& o, Report* rep) {
  *rep = Report{};
  rep->options = o;
  const IndexEntry* e = find_index_entry(o.index);
  if (e == nullptr || !e->caps.persistent) {
    return Status::InvalidArgument("crashtest: '" + o.index +
                                   "' is not a registered persistent index");
  }
  if (o.ops == 0 || o.scenarios == 0) {
    return Status::InvalidArgument("crashtest: ops and scenarios must be >= 1");
  }
  if (o.images.budget == 0) return Status::InvalidArgument("crashtest: budget must be >= 1");
  if (o.jobs == 0 || o.jobs > 16) return Status::InvalidArgument("crashtest: jobs must be 1..16");
  const pm::PersistConfig saved = pm::current_config();
  const auto t0 = Clock::now();
  Status s;
  {
    Runner runner(o, rep);
    uint64_t counter = 0;
    for (size_t i = 0; i < o.scenarios && s.ok() && !runner.stop; ++i) {
      s = run_scenario(o, i, rep, &runner, &counter);
      if (!o.quiet) {
        std::fprintf(stderr, "crashtest %s: scenario %zu/%zu: %llu images, %llu failures, %.1f s\n",
                     o.index.c_str(), i + 1, o.scenarios,
                     static_cast<unsigned long long>(rep->images),
                     static_cast<unsigned long long>(rep->failures),
                     std::chrono::duration<double>(Clock::now() - t0).count());
      }
    }
  }
  pm::configure(saved);
  rep->seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return s;
}

Status run_ablation(const Options& o, AblationReport* rep) {
  *rep = AblationReport{};
  const auto t0 = Clock::now();
  Options base = o;
  base.ablate_site.clear();
  Status s = run_crash_test(base, &rep->baseline);
  if (!s.ok()) return s;
  if (!rep->baseline.ok()) {
    rep->seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    return Status::Ok();  // a failing baseline makes every case meaningless
  }
  const auto& notes = rep->baseline.ablation_notes;
  for (const auto& [site, counts] : rep->baseline.sites) {
    for (bool fence : {false, true}) {
      if ((fence ? counts.fences : counts.flushes) == 0) continue;
      Options a = o;
      a.ablate_site = site;
      a.ablate_flush = !fence;
      a.ablate_fence = fence;
      a.stop_at_first_failure = true;
      a.max_examples = 1;
      a.nested_every = 0;  // the main checks decide; the baseline covers recovery crashes
      Report r;
      s = run_crash_test(a, &r);
      if (!s.ok()) return s;
      AblationCase c;
      c.site = site;
      c.fence = fence;
      c.caught = !r.ok();
      c.images = r.images;
      c.note = find_note(notes, site, fence);
      if (!r.examples.empty()) c.first = r.examples.front();
      if (c.caught && r.examples.empty()) {
        c.first.what = std::to_string(r.uninstrumented_writes) + " uninstrumented writes";
      }
      if (!c.caught && c.note.empty()) ++rep->uncaught_without_note;
      if (!o.quiet) {
        std::fprintf(stderr, "ablation %s: %s (%llu images)\n", c.label().c_str(),
                     c.caught ? "caught" : (c.note.empty() ? "NOT caught" : "not caught (noted)"),
                     static_cast<unsigned long long>(c.images));
      }
      rep->cases.push_back(std::move(c));
    }
  }
  rep->seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return Status::Ok();
}

}  // namespace nvindex::crash
