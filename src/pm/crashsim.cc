// The crash simulator's recorder (crashsim.h; DESIGN.md §6; issue 3 §1 and
// §3) and the kCrashSim hooks of the persist primitives (persist.h
// detail::sim_*). The images built from what it records are the crash lab's
// (src/crash/images.cc).
//
// State, for a pool of S bytes: three S-byte copies (durable image, shadow =
// durable + every pending store, i.e. what the pool must hold, and the
// working copy handed to the crash-point hook, equal to the durable image
// between crash points), and per 64 B line with pending stores the list of
// those stores as chunks. Cost: a store costs one hash lookup per chunk; a
// flush one per line; a fence commits the issuing thread's flush marks; a
// crash point costs one O(S) memcmp when the uninstrumented-write check is
// on, plus whatever the hook does.
#include "pm/crashsim.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <set>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "nvindex/pm/counters.h"
#include "nvindex/pm/pool.h"

namespace nvindex::pm {

namespace detail {

/// Pending stores of one 64 B line. `base` is the absolute index (count of
/// stores to this line ever made durable) of pending[0], so that flush marks
/// stay meaningful while other threads commit the same line.
struct SimLine {
  uint64_t base = 0;
  std::vector<crashsim::Chunk> pending;
};

/// A flush of one line not yet followed by its thread's fence: stores with
/// absolute index < upto become durable at that fence.
struct SimMark {
  uint64_t upto = 0;
  uint32_t site = 0;  ///< interned site key
};

struct SimState {
  Pool* pool = nullptr;
  char* base = nullptr;
  uint64_t size = 0;
  crashsim::Options options;
  Mode previous_mode = Mode::kEmulated;

  std::vector<char> durable;
  std::vector<char> shadow;
  std::vector<char> image;  ///< the hook's working copy: equal to durable between crash points

  std::unordered_map<uint64_t, SimLine> lines;  ///< by line offset
  std::set<uint64_t> dirty;                     ///< offsets of lines with pending stores
  std::unordered_map<std::thread::id, std::unordered_map<uint64_t, SimMark>> marks;
  uint64_t seq = 0;

  crashsim::Simulator::CrashPointHook hook;
  bool crash_points = true;
  bool in_hook = false;

  std::map<std::string, crashsim::SiteCounts> sites;
  std::unordered_map<std::string, std::pair<bool, bool>> ablated;  ///< key -> (flush, fence)
  crashsim::LintReport lint;
  crashsim::Stats stats;

  std::vector<std::string> site_names;
  std::unordered_map<std::string, uint32_t> site_ids;

  uint32_t intern(const std::string& key) {
    auto [it, fresh] = site_ids.emplace(key, static_cast<uint32_t>(site_names.size()));
    if (fresh) site_names.push_back(key);
    return it->second;
  }

  /// Clips [p, p+n) to the pool; false when nothing of it is inside.
  bool clip(const void* p, size_t n, uint64_t* off, uint64_t* len) const {
    const auto a = reinterpret_cast<uintptr_t>(p);
    const auto b = reinterpret_cast<uintptr_t>(base);
    if (a + n <= b || a >= b + size) return false;
    const uintptr_t lo = std::max(a, b);
    const uintptr_t hi = std::min<uintptr_t>(a + n, b + size);
    *off = lo - b;
    *len = hi - lo;
    return true;
  }

  void record_chunk(uint64_t off, uint32_t len, const char* file, uint32_t line) {
    crashsim::Chunk c;
    std::memcpy(&c.data, base + off, len);
    c.seq = seq++;
    c.file = file;
    c.line = line;
    c.off = static_cast<uint8_t>(off % kLineSize);
    c.len = static_cast<uint8_t>(len);
    const uint64_t l = off - off % kLineSize;
    SimLine& sl = lines[l];
    if (sl.pending.empty()) dirty.insert(l);
    sl.pending.push_back(c);
    std::memcpy(shadow.data() + off, base + off, len);
    ++stats.stores;
  }

  /// Records [off, off+len) as aligned chunks of <= 8 bytes.
  void record(uint64_t off, uint64_t len, const std::source_location& loc, bool descending) {
    const char* file = loc.file_name();
    const uint32_t line = loc.line();
    if (!descending) {
      for (uint64_t a = off; a < off + len;) {
        const uint64_t next = std::min((a | 7) + 1, off + len);
        record_chunk(a, static_cast<uint32_t>(next - a), file, line);
        a = next;
      }
    } else {
      for (uint64_t e = off + len; e > off;) {
        const uint64_t a = std::max((e - 1) & ~uint64_t{7}, off);
        record_chunk(a, static_cast<uint32_t>(e - a), file, line);
        e = a;
      }
    }
  }

  /// Makes the stores of line `l` with absolute index < upto durable.
  /// Returns true when that committed anything.
  bool commit(uint64_t l, uint64_t upto) {
    auto it = lines.find(l);
    if (it == lines.end()) return false;
    SimLine& sl = it->second;
    if (upto <= sl.base) return false;
    const uint64_t k = std::min<uint64_t>(upto - sl.base, sl.pending.size());
    if (k == 0) return false;
    for (uint64_t i = 0; i < k; ++i) {
      sl.pending[i].apply_to(durable.data() + l);
      sl.pending[i].apply_to(image.data() + l);
    }
    sl.pending.erase(sl.pending.begin(), sl.pending.begin() + static_cast<ptrdiff_t>(k));
    sl.base += k;
    if (sl.pending.empty()) dirty.erase(l);
    return true;
  }

  void commit_all() {
    for (uint64_t l : std::vector<uint64_t>(dirty.begin(), dirty.end())) {
      SimLine& sl = lines[l];
      commit(l, sl.base + sl.pending.size());
    }
    marks.clear();
  }

  /// Marks line `l` as flushed by this thread (site `site`); returns false
  /// when the flush covers no store that was not already covered.
  bool flush_line(uint64_t l, uint32_t site) {
    auto it = lines.find(l);
    if (it == lines.end() || it->second.pending.empty()) return false;
    const uint64_t upto = it->second.base + it->second.pending.size();
    auto& mine = marks[std::this_thread::get_id()];
    auto [m, fresh] = mine.emplace(l, SimMark{upto, site});
    if (!fresh) {
      if (m->second.upto >= upto) return false;
      m->second = SimMark{upto, site};
    }
    return true;
  }

  /// Compares the pool with the shadow; records every differing 8-byte word
  /// as a pending store of unknown origin and counts the line.
  void check_uninstrumented() {
    if (!options.check_uninstrumented) return;
    if (std::memcmp(base, shadow.data(), size) == 0) return;
    for (uint64_t l = 0; l < size; l += kLineSize) {
      if (std::memcmp(base + l, shadow.data() + l, kLineSize) == 0) continue;
      ++stats.uninstrumented_writes;
      for (uint64_t w = l; w < l + kLineSize; w += 8) {
        if (std::memcmp(base + w, shadow.data() + w, 8) == 0) continue;
        if (stats.uninstrumented_examples.size() < 16) {
          uint64_t got = 0, want = 0;
          std::memcpy(&got, base + w, 8);
          std::memcpy(&want, shadow.data() + w, 8);
          char buf[160];
          std::snprintf(buf, sizeof(buf),
                        "line 0x%" PRIx64 " word 0x%" PRIx64 ": pool holds 0x%016" PRIx64
                        ", the pm:: stores left 0x%016" PRIx64,
                        l, w, got, want);
          stats.uninstrumented_examples.emplace_back(buf);
        }
        record_chunk(w, 8, "(uninstrumented)", 0);
      }
    }
  }

  /// A crash point: the hook sees what is pending (when on), then under eADR
  /// every store so far is durable (its crash states were all offered here).
  void crash_point(bool at_fence, std::string_view label) {
    if (crash_points) {
      crashsim::CrashPoint cp;
      cp.number = stats.crash_points++;
      cp.at_fence = at_fence;
      cp.site = std::string(label);
      cp.fences = stats.fences;
      cp.dirty_lines = dirty.size();
      const bool eadr = options.profile == crashsim::Profile::kEadr;
      for (uint64_t l : dirty) {
        const uint64_t p = lines[l].pending.size();
        cp.pending_stores += p;
        if (!eadr) {
          cp.image_space =
              cp.image_space > UINT64_MAX / (p + 1) ? UINT64_MAX : cp.image_space * (p + 1);
        }
      }
      if (eadr) cp.image_space = cp.pending_stores + 1;
      if (hook) {
        crashsim::PendingState state;
        state.profile = options.profile;
        state.durable = &durable;
        state.image = &image;
        for (uint64_t l : dirty) state.lines.push_back({l, &lines[l].pending});
        in_hook = true;
        stats.images += hook(cp, state);
        in_hook = false;
      }
    }
    if (options.profile == crashsim::Profile::kEadr) commit_all();
  }
};

namespace {

/// Lines overlapping [addr, addr+len), for counting.
uint64_t line_count(const void* addr, size_t len) {
  const auto a = reinterpret_cast<uintptr_t>(addr);
  return (a + len - 1) / kLineSize - a / kLineSize + 1;
}

}  // namespace

void sim_store(const void* dst, size_t n, std::source_location loc, bool descending) {
  SimState* s = g.sim;
  if (s == nullptr || n == 0 || s->in_hook) return;
  uint64_t off = 0, len = 0;
  if (!s->clip(dst, n, &off, &len)) return;
  s->record(off, len, loc, descending);
}

void sim_nt_store(const void* dst, size_t n, std::source_location loc) {
  SimState* s = g.sim;
  if (s == nullptr || n == 0 || s->in_hook) return;
  uint64_t off = 0, len = 0;
  if (!s->clip(dst, n, &off, &len)) return;
  s->record(off, len, loc, false);
  // A non-temporal store is a store plus a flush: durable at the next fence.
  std::string f = loc.file_name();
  const size_t slash = f.rfind('/');
  if (slash != std::string::npos) f.erase(0, slash + 1);
  const uint32_t site = s->intern(f + ":" + std::to_string(loc.line()) + " (nt_copy)");
  for (uint64_t l = off - off % kLineSize; l < off + len; l += kLineSize) s->flush_line(l, site);
}

void sim_flush(const void* addr, size_t len, Site site) {
  SimState* s = g.sim;
  const uint64_t nlines = line_count(addr, len);
  if (s != nullptr && !s->in_hook) {
    const std::string key = site.key();
    s->sites[key].flushes += nlines;
    auto ab = s->ablated.find(key);
    if (ab != s->ablated.end() && ab->second.first) return;  // ablated: dropped entirely
    s->stats.flushes += nlines;
    uint64_t off = 0, clipped = 0;
    if (s->clip(addr, len, &off, &clipped)) {
      const uint32_t id = s->intern(key);
      const bool immediate = flush_instruction() == FlushInstruction::kClflush;
      for (uint64_t l = off - off % kLineSize; l < off + clipped; l += kLineSize) {
        const bool useful = s->flush_line(l, id);
        if (useful && immediate) {
          // clflush is ordered with the stores before it: the line is
          // written back now, no fence needed (Intel SDM Vol. 2A, CLFLUSH).
          auto& mine = s->marks[std::this_thread::get_id()];
          auto m = mine.find(l);
          s->commit(l, m->second.upto);
          mine.erase(m);
        }
        if (!useful && s->crash_points) ++s->lint.redundant_flush[key];
      }
    }
  }
  ThreadCounters& c = thread_counters();
  bump(c.flushes, nlines);
  bump(c.lines_flushed, nlines);
}

void sim_fence(Site site) {
  SimState* s = g.sim;
  if (s != nullptr && !s->in_hook) {
    const std::string key = site.key();
    s->sites[key].fences += 1;
    auto ab = s->ablated.find(key);
    if (ab != s->ablated.end() && ab->second.second) return;  // ablated: dropped entirely
    // Would this fence make anything durable? (Decided before the crash
    // point, which under eADR commits everything.)
    bool useful = false;
    auto mine = s->marks.find(std::this_thread::get_id());
    if (mine != s->marks.end()) {
      for (const auto& [l, m] : mine->second) {
        auto it = s->lines.find(l);
        if (it != s->lines.end() && m.upto > it->second.base) {
          useful = true;
          break;
        }
      }
    }
    if (s->crash_points) {
      s->check_uninstrumented();
      if (!useful) ++s->lint.redundant_fence[key];
    }
    s->crash_point(/*at_fence=*/true, key);
    ++s->stats.fences;
    mine = s->marks.find(std::this_thread::get_id());
    if (mine != s->marks.end()) {
      for (const auto& [l, m] : mine->second) s->commit(l, m.upto);
      s->marks.erase(mine);
    }
  }
  bump(thread_counters().fences);
}

}  // namespace detail

namespace crashsim {

std::string_view profile_name(Profile p) {
  switch (p) {
    case Profile::kAdr:
      return "adr";
    case Profile::kEadr:
      return "eadr";
  }
  return "unknown";
}

Status parse_profile(std::string_view name, Profile* out) {
  for (Profile p : {Profile::kAdr, Profile::kEadr}) {
    if (name == profile_name(p)) {
      *out = p;
      return Status::Ok();
    }
  }
  return Status::InvalidArgument("unknown crash-sim profile '" + std::string(name) +
                                 "' (valid: adr, eadr)");
}

struct Simulator::Impl : detail::SimState {};

Status Simulator::attach(Pool* pool, const Options& options, std::unique_ptr<Simulator>* out) {
  if (pool == nullptr) return Status::InvalidArgument("crash simulator: no pool");
  if (pool->mode() != Mode::kCrashSim) {
    return Status::InvalidArgument("crash simulator: pool " + pool->path() + " is in " +
                                   std::string(mode_name(pool->mode())) +
                                   " mode; create or open it in crash-sim mode");
  }
  if (detail::g.sim != nullptr) {
    return Status::Busy("crash simulator: another simulator is attached in this process");
  }
  std::unique_ptr<Simulator> sim(new Simulator);
  sim->impl_ = std::make_unique<Impl>();
  Impl& s = *sim->impl_;
  s.pool = pool;
  s.base = pool->base();
  s.size = pool->size();
  s.options = options;
  s.durable.assign(s.base, s.base + s.size);
  s.shadow = s.durable;
  s.image = s.durable;
  s.previous_mode = detail::g.mode;
  detail::g.mode = Mode::kCrashSim;
  detail::update_store_hook();
  detail::g.sim = &s;
  *out = std::move(sim);
  return Status::Ok();
}

Simulator::~Simulator() {
  if (impl_ != nullptr && detail::g.sim == impl_.get()) {
    detail::g.sim = nullptr;
    detail::g.mode = impl_->previous_mode;
    detail::update_store_hook();
  }
}

void Simulator::detach_after_fork() { detail::g.sim = nullptr; }

void Simulator::set_crash_point_hook(CrashPointHook hook) { impl_->hook = std::move(hook); }

void Simulator::set_crash_points(bool on) {
  if (on && !impl_->crash_points) impl_->check_uninstrumented();
  impl_->crash_points = on;
}

void Simulator::operation_boundary(std::string_view label) {
  Impl& s = *impl_;
  if (s.crash_points) {
    s.check_uninstrumented();
    // Lint: stores not durable, by the (file:line) of the pm:: call that made
    // them, once per line; flushes of this thread with no fence yet.
    for (uint64_t l : s.dirty) {
      std::set<std::pair<const char*, uint32_t>> keys;
      for (const Chunk& c : s.lines[l].pending) keys.emplace(c.file, c.line);
      for (const auto& [file, line] : keys) {
        std::string_view f = file;
        const size_t slash = f.rfind('/');
        if (slash != std::string_view::npos) f.remove_prefix(slash + 1);
        ++s.lint.not_durable_at_return[std::string(f) + ":" + std::to_string(line)];
      }
    }
    auto mine = s.marks.find(std::this_thread::get_id());
    if (mine != s.marks.end()) {
      for (const auto& [l, m] : mine->second) {
        auto it = s.lines.find(l);
        if (it != s.lines.end() && m.upto > it->second.base) {
          ++s.lint.flush_without_fence[s.site_names[m.site]];
        }
      }
    }
  }
  s.crash_point(/*at_fence=*/false, label);
}

void Simulator::ablate(std::string_view site_key, bool drop_flush, bool drop_fence) {
  if (site_key.empty()) {
    impl_->ablated.clear();
    return;
  }
  impl_->ablated[std::string(site_key)] = {drop_flush, drop_fence};
}

const std::map<std::string, SiteCounts>& Simulator::sites() const { return impl_->sites; }
const LintReport& Simulator::lint() const { return impl_->lint; }
const Stats& Simulator::stats() const { return impl_->stats; }

void Simulator::make_all_durable() { impl_->commit_all(); }

}  // namespace crashsim
}  // namespace nvindex::pm
