// The crash simulator (crashsim.h; DESIGN.md §6; issue 3 §1 and §3) and the
// kCrashSim hooks of the persist primitives (persist.h detail::sim_*).
//
// State, for a pool of S bytes: three S-byte copies (durable image, shadow =
// durable + every pending store, i.e. what the pool must hold, and the image
// buffer handed to the visitor, equal to the durable image between visits),
// and per 64 B line with pending stores the list of those stores as chunks.
// Cost: a store costs one hash lookup per chunk; a flush one per line; a
// fence commits the issuing thread's flush marks; a crash point costs one
// O(S) memcmp when the uninstrumented-write check is on, plus O(64 B x dirty
// lines) per image (apply the chosen prefixes to the image buffer, undo from
// the durable copy).
#include "pm/crashsim.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <random>
#include <set>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "nvindex/pm/counters.h"
#include "nvindex/pm/pool.h"
#include "util/hex.h"

namespace nvindex::pm {

namespace detail {

/// Sampling limits (see enumerate_adr): the structured families stop at this
/// many times the budget; the covering array is built for at most this many
/// dirty lines.
constexpr uint64_t kStructuredFactor = 8;
constexpr size_t kMaxCoveringLines = 64;

/// One store chunk: at most 8 bytes, inside one aligned 8-byte word.
struct SimChunk {
  uint64_t data = 0;           ///< the new bytes (first `len` bytes used)
  uint64_t seq = 0;            ///< position in the global store order
  const char* file = nullptr;  ///< caller of the pm:: helper
  uint32_t line = 0;
  uint8_t off = 0;  ///< offset in the 64 B line
  uint8_t len = 0;  ///< 1..8
};

/// Pending stores of one 64 B line. `base` is the absolute index (count of
/// stores to this line ever made durable) of pending[0], so that flush marks
/// stay meaningful while other threads commit the same line.
struct SimLine {
  uint64_t base = 0;
  std::vector<SimChunk> pending;
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
  std::vector<char> image;

  std::unordered_map<uint64_t, SimLine> lines;  ///< by line offset
  std::set<uint64_t> dirty;                     ///< offsets of lines with pending stores
  std::unordered_map<std::thread::id, std::unordered_map<uint64_t, SimMark>> marks;
  uint64_t seq = 0;

  crashsim::Simulator::Visitor visitor;
  bool crash_points = true;
  bool in_visitor = false;

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
    SimChunk c;
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

  static void apply(char* dst, const SimChunk& c) { std::memcpy(dst + c.off, &c.data, c.len); }

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
      apply(durable.data() + l, sl.pending[i]);
      apply(image.data() + l, sl.pending[i]);
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

  /// Visits one image: `choice[i]` stores of dirty line `lines_[i]`.
  bool visit_choice(const crashsim::CrashPoint& cp, const std::vector<uint64_t>& dl,
                    const std::vector<const SimLine*>& sl, const std::vector<uint32_t>& choice) {
    std::string text;
    for (size_t i = 0; i < dl.size(); ++i) {
      if (!text.empty()) text += ", ";
      text += "line " + hex(dl[i]) + ": " + std::to_string(choice[i]) + "/" +
              std::to_string(sl[i]->pending.size());
      for (uint32_t k = 0; k < choice[i]; ++k) apply(image.data() + dl[i], sl[i]->pending[k]);
    }
    if (text.empty()) text = "no pending stores";
    ++stats.images;
    in_visitor = true;
    const bool more = visitor(cp, crashsim::Image{&image, text});
    in_visitor = false;
    for (size_t i = 0; i < dl.size(); ++i) {
      if (choice[i] != 0) std::memcpy(image.data() + dl[i], durable.data() + dl[i], kLineSize);
    }
    return more;
  }

  void enumerate_adr(const crashsim::CrashPoint& cp) {
    std::vector<uint64_t> dl(dirty.begin(), dirty.end());
    std::vector<const SimLine*> sl;
    std::vector<uint32_t> n;
    for (uint64_t l : dl) {
      sl.push_back(&lines[l]);
      n.push_back(static_cast<uint32_t>(sl.back()->pending.size()));
    }
    const uint64_t budget = options.budget;
    uint64_t total = 1;
    for (uint32_t c : n) {
      total *= c + 1;
      if (total > budget) break;
    }
    std::vector<uint32_t> choice(dl.size(), 0);
    if (total <= budget) {
      // Full enumeration, mixed radix over (n_i + 1).
      while (true) {
        if (!visit_choice(cp, dl, sl, choice)) return;
        size_t i = 0;
        for (; i < choice.size(); ++i) {
          if (++choice[i] <= n[i]) break;
          choice[i] = 0;
        }
        if (i == choice.size()) return;
      }
    }
    // Sampling beyond the budget, in this order, duplicates removed:
    //  1. none, all, each line alone with each of its prefixes, each pair of
    //     lines with both full (always, up to kStructuredFactor x budget);
    //  2. a strength-2 covering array over prefix choices: rows until, for
    //     every pair of lines (i, j) and every pair of prefixes (a, b), some
    //     image has line i at a and line j at b (greedy, AETG-style: Cohen et
    //     al., IEEE TSE 1997), up to the budget; skipped beyond
    //     kMaxCoveringLines dirty lines (quadratic bookkeeping);
    //  3. seeded random choices up to the budget.
    std::set<std::vector<uint32_t>> seen;
    uint64_t emitted = 0;
    const uint64_t structured_cap = kStructuredFactor * budget;
    const size_t nl = dl.size();
    const bool covering = nl <= kMaxCoveringLines;
    // covered[pair_off[i][j] + a * (n[j] + 1) + b] for i < j.
    std::vector<std::vector<size_t>> pair_off;
    std::vector<char> covered;
    size_t uncovered = 0;
    if (covering) {
      pair_off.assign(nl, std::vector<size_t>(nl, 0));
      size_t total_tuples = 0;
      for (size_t i = 0; i < nl; ++i) {
        for (size_t j = i + 1; j < nl; ++j) {
          pair_off[i][j] = total_tuples;
          total_tuples += size_t{n[i] + 1} * (n[j] + 1);
        }
      }
      covered.assign(total_tuples, 0);
      uncovered = total_tuples;
    }
    auto tuple = [&](size_t i, uint32_t a, size_t j, uint32_t b) {
      if (i > j) {
        std::swap(i, j);
        std::swap(a, b);
      }
      return pair_off[i][j] + size_t{a} * (n[j] + 1) + b;
    };
    auto emit = [&](const std::vector<uint32_t>& c) {
      if (!seen.insert(c).second) return true;
      ++emitted;
      if (covering) {
        for (size_t i = 0; i < nl; ++i) {
          for (size_t j = i + 1; j < nl; ++j) {
            char& t = covered[tuple(i, c[i], j, c[j])];
            if (t == 0) --uncovered;
            t = 1;
          }
        }
      }
      return visit_choice(cp, dl, sl, c);
    };
    if (!emit(choice)) return;                                     // none
    if (!emit(n)) return;                                          // all
    for (size_t i = 0; i < nl && emitted < structured_cap; ++i) {  // each line alone
      for (uint32_t k = 1; k <= n[i] && emitted < structured_cap; ++k) {
        std::vector<uint32_t> c(nl, 0);
        c[i] = k;
        if (!emit(c)) return;
      }
    }
    for (size_t i = 0; i < nl && emitted < structured_cap; ++i) {  // pairs, both full
      for (size_t j = i + 1; j < nl && emitted < structured_cap; ++j) {
        std::vector<uint32_t> c(nl, 0);
        c[i] = n[i];
        c[j] = n[j];
        if (!emit(c)) return;
      }
    }
    std::mt19937_64 rng(options.seed * 0x9E3779B97F4A7C15ull + cp.number);
    if (covering) {
      size_t cursor = 0;  // no uncovered tuple below this index
      std::vector<size_t> order(nl);
      while (uncovered > 0 && emitted < budget) {
        while (covered[cursor] != 0) ++cursor;
        // Decode the first uncovered tuple: (i, a, j, b).
        size_t i = 0, j = 1;
        for (size_t x = 0; x < nl; ++x) {
          for (size_t y = x + 1; y < nl; ++y) {
            if (pair_off[x][y] <= cursor) {
              i = x;
              j = y;
            }
          }
        }
        const size_t rel = cursor - pair_off[i][j];
        std::vector<uint32_t> row(nl, 0);
        std::vector<char> set(nl, 0);
        row[i] = static_cast<uint32_t>(rel / (n[j] + 1));
        row[j] = static_cast<uint32_t>(rel % (n[j] + 1));
        set[i] = set[j] = 1;
        for (size_t x = 0; x < nl; ++x) order[x] = x;
        std::shuffle(order.begin(), order.end(), rng);
        for (size_t k : order) {
          if (set[k] != 0) continue;
          // The prefix of line k that covers the most uncovered tuples with
          // the lines already chosen; ties broken at random.
          uint32_t best = 0;
          int best_gain = -1;
          const uint32_t start = static_cast<uint32_t>(rng() % (n[k] + 1));
          for (uint32_t d = 0; d <= n[k]; ++d) {
            const uint32_t v = (start + d) % (n[k] + 1);
            int gain = 0;
            for (size_t x = 0; x < nl; ++x) {
              if (set[x] != 0 && covered[tuple(k, v, x, row[x])] == 0) ++gain;
            }
            if (gain > best_gain) {
              best_gain = gain;
              best = v;
            }
          }
          row[k] = best;
          set[k] = 1;
        }
        if (!emit(row)) return;
      }
    }
    for (uint64_t tries = 0; emitted < budget && tries < 16 * budget; ++tries) {
      std::vector<uint32_t> c(nl);
      for (size_t i = 0; i < nl; ++i) c[i] = static_cast<uint32_t>(rng() % (n[i] + 1));
      if (!emit(c)) return;
    }
  }

  void enumerate_eadr(const crashsim::CrashPoint& cp) {
    struct Ref {
      uint64_t seq;
      uint64_t line;
      const SimChunk* chunk;
    };
    std::vector<Ref> all;
    for (uint64_t l : dirty) {
      for (const SimChunk& c : lines[l].pending) all.push_back({c.seq, l, &c});
    }
    std::sort(all.begin(), all.end(), [](const Ref& a, const Ref& b) { return a.seq < b.seq; });
    const uint64_t t = all.size();
    std::vector<uint64_t> ks;
    if (t + 1 <= options.budget) {
      for (uint64_t k = 0; k <= t; ++k) ks.push_back(k);
    } else if (options.budget == 1) {
      ks.push_back(t);
    } else {
      for (uint64_t j = 0; j < options.budget; ++j) {
        const uint64_t k = j * t / (options.budget - 1);
        if (ks.empty() || ks.back() != k) ks.push_back(k);
      }
    }
    uint64_t applied = 0;
    bool more = true;
    for (uint64_t k : ks) {
      for (; applied < k; ++applied) apply(image.data() + all[applied].line, *all[applied].chunk);
      ++stats.images;
      in_visitor = true;
      more = visitor(cp, crashsim::Image{&image, "eadr: first " + std::to_string(k) + " of " +
                                                     std::to_string(t) + " pending stores"});
      in_visitor = false;
      if (!more) break;
    }
    for (uint64_t i = 0; i < applied; ++i) {
      std::memcpy(image.data() + all[i].line, durable.data() + all[i].line, kLineSize);
    }
  }

  /// A crash point: images to the visitor (when on), then under eADR every
  /// store so far is durable (its crash states were all offered here).
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
      if (visitor) {
        if (options.profile == crashsim::Profile::kEadr) {
          enumerate_eadr(cp);
        } else {
          enumerate_adr(cp);
        }
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
  if (s == nullptr || n == 0 || s->in_visitor) return;
  uint64_t off = 0, len = 0;
  if (!s->clip(dst, n, &off, &len)) return;
  s->record(off, len, loc, descending);
}

void sim_nt_store(const void* dst, size_t n, std::source_location loc) {
  SimState* s = g.sim;
  if (s == nullptr || n == 0 || s->in_visitor) return;
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
  if (s != nullptr && !s->in_visitor) {
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
  if (s != nullptr && !s->in_visitor) {
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
  if (options.budget == 0) {
    return Status::InvalidArgument("crash simulator: budget must be at least 1 image");
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
  detail::g.sim = &s;
  *out = std::move(sim);
  return Status::Ok();
}

Simulator::~Simulator() {
  if (impl_ != nullptr && detail::g.sim == impl_.get()) {
    detail::g.sim = nullptr;
    detail::g.mode = impl_->previous_mode;
  }
}

void Simulator::detach_after_fork() { detail::g.sim = nullptr; }

void Simulator::set_visitor(Visitor visitor) { impl_->visitor = std::move(visitor); }

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
      for (const detail::SimChunk& c : s.lines[l].pending) keys.emplace(c.file, c.line);
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
