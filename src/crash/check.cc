// The crash lab's image checks (check.h): image files, content reads and
// model diffs, the checks of a recovered image (oracle.h, 1-5) and the
// crash-during-recovery check (6), each run in a forked child that reports
// verdict lines (runner.h).
#include "crash/check.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <optional>

#include "crash/images.h"
#include "crash/runner.h"
#include "crash/string_keys.h"
#include "nvindex/pm/allocator.h"
#include "pm/crashsim.h"
#include "util/hex.h"

namespace nvindex::crash::detail {

namespace cs = pm::crashsim;

std::string key_text(uint64_t k) { return k == kMax ? "UINT64_MAX" : std::to_string(k); }

uint64_t block_bytes(uint32_t node_size) {
  return std::bit_ceil(std::max<uint64_t>(pm::Allocator::kMinBlock, node_size));
}

uint64_t structure_bytes(const VerifyReport& r, const IndexInfo& info) {
  if (r.pm_bytes != 0) return r.pm_bytes;
  const uint64_t nodes =
      r.leaves + (info.caps.placement == Placement::kSelective ? 0 : r.inner_nodes);
  return nodes * block_bytes(info.node_size);
}

// ------------------------------------------------------------ image files

namespace {

/// Writes `size` bytes to a fresh file at `path` (replacing a leftover),
/// skipping all-zero 4 KiB pages (tmpfs reads holes as zeros): most of a
/// small test pool is unused heap, so this is most of the speed. IOError
/// naming the failed call and the path.
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

/// Writes the lines of `d` over `bytes`.
void apply_diff(const LineDiff& d, char* bytes) {
  for (const auto& [off, line] : d) std::memcpy(bytes + off, line.data(), 64);
}

}  // namespace

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

// ------------------------------------------------------------ content checks

std::string read_content(Index<uint64_t>& idx, bool ordered, const std::vector<uint64_t>& keys,
                         Model* out) {
  out->clear();
  if (ordered) {
    std::vector<std::pair<uint64_t, Value>> v;
    idx.scan(0, keys.size() + 64, &v);
    if (std::string e = take_key_error(idx); !e.empty()) return "full scan: " + e;
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

std::string model_diff(const Model& got, const Model& want, size_t limit) {
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

Status make_scenario_index(const Options& o, pm::Pool* pool,
                           std::unique_ptr<Index<uint64_t>>* idx) {
  IndexOptions io;
  io.pool = pool;
  io.node_size = o.node_size;
  io.extra = o.index_opts;
  return make_keyed_index(o.index, o.key_type, io, idx);
}

namespace {

/// Opens the image file at `path` in `mode` and recovers the index. Errors
/// of Pool::open and make_index, their messages prefixed with the step.
Status open_and_recover(const Options& o, const std::string& path, pm::Mode mode,
                        std::unique_ptr<pm::Pool>* pool, std::unique_ptr<Index<uint64_t>>* idx) {
  Status s = pm::Pool::open(path, pool_layout(o.index, o.key_type), mode, pool);
  if (!s.ok()) return Status(s.code(), "Pool::open: " + s.ToString());
  s = make_scenario_index(o, pool->get(), idx);
  if (!s.ok()) return Status(s.code(), "recovery (make_index): " + s.ToString());
  return Status::Ok();
}

/// Check 3 of oracle.h, after verify() filled `r` (check 2): the content
/// equals the model after the operation (*which = 'A') or, when allowed,
/// before it ('B'), and verify()'s key count agrees. Fills *got. Returns ""
/// or what failed.
std::string check_content(const CheckContext& c, Index<uint64_t>& idx, Model* got,
                          const VerifyReport* r, char* which) {
  std::string err = read_content(idx, c.ordered, *c.universe, got);
  if (!err.empty()) return "after recovery: " + err;
  if (*got == *c.after) {
    *which = 'A';
  } else if (c.allow_before && *got == *c.before) {
    *which = 'B';
  } else {
    std::string m = "durable linearizability: recovered content matches ";
    m += c.allow_before ? "neither the model before nor after the operation"
                        : "not the model after the operation returned";
    m += "; vs after: " + model_diff(*got, *c.after);
    if (c.allow_before) m += "; vs before: " + model_diff(*got, *c.before);
    return m;
  }
  if (r->keys != got->size()) {
    return "verify() counts " + std::to_string(r->keys) + " keys, the content has " +
           std::to_string(got->size());
  }
  return "";
}

/// Check 4 of oracle.h (leak check): the allocator's bytes in use equal the
/// blocks verify() accounts for (`r`: structure_bytes) plus the overhead
/// measured after creation. Skipped when that overhead is unknown. Returns
/// "" or what failed.
std::string check_accounting(const CheckContext& c, pm::Pool* pool, Index<uint64_t>& idx,
                             const VerifyReport& r) {
  if (!c.overhead_known) return "";
  const uint64_t structure = structure_bytes(r, idx.info());
  const uint64_t want = structure + c.overhead;
  const uint64_t have = pool->allocator().bytes_in_use();
  if (have == want) return "";
  return "PM accounting after recovery: " + std::to_string(have) + " bytes in use, expected " +
         std::to_string(want) + " (" + std::to_string(structure) +
         " B reached by verify(): " + std::to_string(r.leaves) + " leaves, " +
         std::to_string(r.inner_nodes) + " inner nodes, + " + std::to_string(c.overhead) +
         " B overhead): a block leaked or lost";
}

/// Check 5 of oracle.h: the recovered index (content `got`) keeps working:
/// max(24, 3 x node_size / 16) fresh keys between the existing ones
/// (splits), updates of every third existing key, removes of the fresh keys
/// and of every other existing key (merges), each result against the model,
/// then verify() and the content again. Returns "" or what failed.
std::string check_keeps_working(const CheckContext& c, Index<uint64_t>& idx, const Model& got) {
  const Options& o = *c.options;
  Model m = got;
  std::vector<uint64_t> keys = *c.universe;
  const uint64_t fresh = std::max<uint64_t>(24, 3ull * o.node_size / 16);
  Status s;
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
  VerifyReport r;
  s = idx.verify(&r);
  if (!s.ok()) return "verify() after further inserts and removes: " + s.ToString();
  std::sort(keys.begin(), keys.end());
  Model now;
  const std::string err = read_content(idx, c.ordered, keys, &now);
  if (!err.empty()) return "after further inserts and removes: " + err;
  if (now != m) return "after further inserts and removes: " + model_diff(now, m);
  return "";
}

/// Checks 2-5 of oracle.h on a recovered index. Returns "" and sets *which
/// ('B' before, 'A' after), or what failed.
std::string check_recovered(const CheckContext& c, pm::Pool* pool, Index<uint64_t>& idx,
                            char* which) {
  VerifyReport r;
  if (Status s = idx.verify(&r); !s.ok()) return "verify() after recovery: " + s.ToString();
  // The leak check comes before any read: a read may change PM (p-bwtree's
  // lookups help a half-done split by posting its index entry and
  // consolidate long inner chains), and verify()'s bytes describe the index
  // as recovery left it.
  std::string err = check_accounting(c, pool, idx, r);
  Model got;
  if (err.empty()) err = check_content(c, idx, &got, &r, which);
  if (err.empty()) err = check_keeps_working(c, idx, got);
  return err;
}

}  // namespace

// ------------------------------------------------------------ child processes

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

namespace {

/// An image taken at a crash point of a recovery.
struct Nested {
  LineDiff diff;      ///< vs the image as opened
  std::string where;  ///< crash point, fence site and choice
};

/// What an uninterrupted recovery under the nested simulator gave. The
/// recovered pool and index stay open until the check ends.
struct NestedRecovery {
  std::unique_ptr<pm::Pool> pool;
  std::unique_ptr<Index<uint64_t>> idx;
  std::vector<char> opened;     ///< the image as opened, before recovery
  std::vector<Nested> images;   ///< images taken during the recovery
  uint64_t points = 0;          ///< crash points of the recovery
  Model content;                ///< the recovered content
  uint64_t uninstrumented = 0;  ///< uninstrumented writes the recovery made
};

/// Writes `image` to `path`, opens it in crash-sim mode (configuring *cfg
/// for it) and recovers it under a simulator that keeps up to
/// nested_per_point images per crash point (nested_total in all); the
/// simulator is detached on return. Fills *out; returns "" or what failed
/// (to follow "F nested: ").
std::string recover_under_simulator(const Options& o, const std::vector<uint64_t>& universe,
                                    bool ordered, const std::vector<char>& image,
                                    const std::string& path, pm::PersistConfig* cfg,
                                    NestedRecovery* out) {
  cfg->mode = pm::Mode::kCrashSim;
  pm::configure(*cfg);
  Status s = write_image(path, image.data(), image.size());
  if (!s.ok()) return "cannot write the image: " + s.ToString();
  std::unique_ptr<pm::Pool>& pool = out->pool;
  s = pm::Pool::open(path, pool_layout(o.index, o.key_type), pm::Mode::kCrashSim, &pool);
  if (!s.ok()) return "Pool::open: " + s.ToString();
  cs::Options so = o.sim;
  so.check_uninstrumented = true;
  std::unique_ptr<cs::Simulator> sim;
  s = cs::Simulator::attach(pool.get(), so, &sim);
  if (!s.ok()) return "Simulator::attach: " + s.ToString();
  uint64_t last_point = kMax, taken_here = 0;
  out->opened.assign(pool->base(), pool->base() + pool->size());
  s = set_image_visitor(sim.get(), o.images, [&](const cs::CrashPoint& cp, const Image& img) {
    if (cp.number != last_point) {
      last_point = cp.number;
      taken_here = 0;
      ++out->points;
    }
    if (taken_here >= o.nested_per_point || out->images.size() >= o.nested_total) return false;
    ++taken_here;
    out->images.push_back({diff_lines(out->opened.data(), img.bytes->data(), out->opened.size()),
                           "recovery crash point " + std::to_string(cp.number) + " before fence " +
                               cp.site + ", image " + img.choice});
    return true;
  });
  if (!s.ok()) return "set_image_visitor: " + s.ToString();
  sim->set_crash_points(true);
  std::unique_ptr<Index<uint64_t>>& idx = out->idx;
  s = make_scenario_index(o, pool.get(), &idx);
  sim->set_crash_points(false);
  if (!s.ok()) return "recovery under the simulator failed: " + s.ToString();
  std::string err = read_content(*idx, ordered, universe, &out->content);
  if (!err.empty()) return err;
  out->uninstrumented = sim->stats().uninstrumented_writes;
  return "";
}

/// Recovers nested image `n` (written to `path2`) again in emulated mode;
/// returns "" when it passes verify() and holds the content of the
/// uninterrupted recovery `r`, else what differed (*io_error set when the
/// image could not even be written).
std::string recover_again(const Options& o, const std::vector<uint64_t>& universe, bool ordered,
                          const NestedRecovery& r, const Nested& n, const std::string& path2,
                          bool* io_error) {
  std::vector<char> img2 = r.opened;
  apply_diff(n.diff, img2.data());
  Status s = write_image(path2, img2.data(), img2.size());
  if (!s.ok()) {
    *io_error = true;
    return "cannot write the image: " + s.ToString();
  }
  std::unique_ptr<pm::Pool> pool2;
  std::unique_ptr<Index<uint64_t>> idx2;
  s = open_and_recover(o, path2, pm::Mode::kEmulated, &pool2, &idx2);
  std::string what;
  if (!s.ok()) {
    what = s.message();
  } else {
    VerifyReport vr;
    Status v = idx2->verify(&vr);
    Model second;
    if (!v.ok()) {
      what = "verify(): " + v.ToString();
    } else if (std::string e = read_content(*idx2, ordered, universe, &second); !e.empty()) {
      what = e;
    } else if (second != r.content) {
      what = "content differs from the uninterrupted recovery: " + model_diff(second, r.content);
    }
  }
  idx2.reset();
  pool2.reset();
  ::unlink(path2.c_str());
  return what;
}

}  // namespace

void child_nested(const Options& o, const std::vector<uint64_t>& universe, bool ordered,
                  const std::vector<char>& base, const Sample& sample, const std::string& path,
                  const std::string& path2, int fd) {
  std::vector<char> image = base;
  apply_diff(sample.diff, image.data());
  pm::PersistConfig cfg = pm::current_config();
  NestedRecovery r;
  const std::string err = recover_under_simulator(o, universe, ordered, image, path, &cfg, &r);
  if (!err.empty()) {
    write_line(fd, "F nested: " + err);
    return;
  }
  // The simulator is detached: the nested images are recovered in emulated mode.
  if (r.uninstrumented != 0) {
    write_line(fd, "F nested: " + std::to_string(r.uninstrumented) +
                       " uninstrumented writes during recovery");
  }
  cfg.mode = pm::Mode::kEmulated;
  pm::configure(cfg);
  for (const Nested& n : r.images) {
    bool io_error = false;
    const std::string what = recover_again(o, universe, ordered, r, n, path2, &io_error);
    if (io_error) {
      write_line(fd, "F nested: " + what);
      return;
    }
    if (!what.empty()) {
      write_line(fd, "F crash during recovery (" + n.where + "), then recovery again: " + what);
      break;
    }
  }
  ::unlink(path.c_str());
  write_line(fd, "N " + std::to_string(r.points) + " " + std::to_string(r.images.size()));
}

}  // namespace nvindex::crash::detail
