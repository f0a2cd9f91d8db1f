// Crash-image enumeration (images.h): full enumeration within the budget,
// then the structured families, the covering array and random choices for
// ADR; evenly spaced prefixes of the global store order for eADR. Moved
// here from the PM layer's recorder (src/pm/crashsim.cc), which now only
// records and hands each crash point's pending stores to a hook.
#include "crash/images.h"

#include <algorithm>
#include <cstring>
#include <random>
#include <set>
#include <utility>

#include "nvindex/pm/persist.h"
#include "util/hex.h"

namespace nvindex::crash {

namespace cs = pm::crashsim;

namespace {

/// Sampling limits (see AdrImages): the structured families stop at this
/// many times the budget; the covering array is built for at most this many
/// dirty lines.
constexpr uint64_t kStructuredFactor = 8;
constexpr size_t kMaxCoveringLines = 64;

/// The images of one ADR crash point. A choice gives, per dirty line (in
/// PendingState::lines order), how many of its pending stores the image
/// keeps. run() visits every combination when they fit the budget, else the
/// sampled families of images.h in order; the random generator is seeded by
/// (seed, crash point number), so the same pending stores give the same
/// images.
class AdrImages {
 public:
  AdrImages(const cs::CrashPoint& cp, const cs::PendingState& state, const ImageOptions& options,
            const ImageVisitor& visitor)
      : cp_(cp),
        state_(state),
        visitor_(visitor),
        budget_(options.budget),
        nl_(state.lines.size()),
        rng_(options.seed * 0x9E3779B97F4A7C15ull + cp.number) {
    for (const cs::DirtyLine& d : state.lines)
      n_.push_back(static_cast<uint32_t>(d.stores->size()));
  }

  /// Visits the images; returns how many were visited.
  uint64_t run() {
    if (fits_budget()) {
      visit_all();
    } else {
      sample();
    }
    return visited_;
  }

 private:
  /// Whether the product of (pending + 1) over the dirty lines is <= budget.
  bool fits_budget() const {
    uint64_t total = 1;
    for (uint32_t c : n_) {
      total *= c + 1;
      if (total > budget_) break;
    }
    return total <= budget_;
  }

  /// Full enumeration, mixed radix over (n_i + 1).
  void visit_all() {
    std::vector<uint32_t> choice(nl_, 0);
    while (true) {
      if (!visit(choice)) return;
      size_t i = 0;
      for (; i < choice.size(); ++i) {
        if (++choice[i] <= n_[i]) break;
        choice[i] = 0;
      }
      if (i == choice.size()) return;
    }
  }

  /// Sampling beyond the budget, in this order, duplicates removed:
  ///  1. none, all, each line alone with each of its prefixes, each pair of
  ///     lines with both full (always, up to kStructuredFactor x budget);
  ///  2. a strength-2 covering array over prefix choices: rows until, for
  ///     every pair of lines (i, j) and every pair of prefixes (a, b), some
  ///     image has line i at a and line j at b, up to the budget; skipped
  ///     beyond kMaxCoveringLines dirty lines (quadratic bookkeeping);
  ///  3. seeded random choices up to the budget.
  void sample() {
    covering_ = nl_ <= kMaxCoveringLines;
    if (covering_) start_covering();
    if (!structured()) return;
    if (covering_ && !covering_rows()) return;
    random_rows();
  }

  /// Family 1; false when the visitor stopped.
  bool structured() {
    const uint64_t cap = kStructuredFactor * budget_;
    if (!emit(std::vector<uint32_t>(nl_, 0))) return false;  // none
    if (!emit(n_)) return false;                             // all
    for (size_t i = 0; i < nl_ && emitted_ < cap; ++i) {     // each line alone
      for (uint32_t k = 1; k <= n_[i] && emitted_ < cap; ++k) {
        std::vector<uint32_t> c(nl_, 0);
        c[i] = k;
        if (!emit(c)) return false;
      }
    }
    for (size_t i = 0; i < nl_ && emitted_ < cap; ++i) {  // pairs, both full
      for (size_t j = i + 1; j < nl_ && emitted_ < cap; ++j) {
        std::vector<uint32_t> c(nl_, 0);
        c[i] = n_[i];
        c[j] = n_[j];
        if (!emit(c)) return false;
      }
    }
    return true;
  }

  /// Sets up the covering bookkeeping: one flag per (i, a, j, b), i < j,
  /// at covered_[pair_off_[i][j] + a * (n_[j] + 1) + b], all uncovered.
  void start_covering() {
    pair_off_.assign(nl_, std::vector<size_t>(nl_, 0));
    size_t total_tuples = 0;
    for (size_t i = 0; i < nl_; ++i) {
      for (size_t j = i + 1; j < nl_; ++j) {
        pair_off_[i][j] = total_tuples;
        total_tuples += size_t{n_[i] + 1} * (n_[j] + 1);
      }
    }
    covered_.assign(total_tuples, 0);
    uncovered_ = total_tuples;
  }

  /// Index in covered_ of line i at prefix a together with line j at b.
  size_t tuple(size_t i, uint32_t a, size_t j, uint32_t b) const {
    if (i > j) {
      std::swap(i, j);
      std::swap(a, b);
    }
    return pair_off_[i][j] + size_t{a} * (n_[j] + 1) + b;
  }

  /// Family 2 (AETG-style, Cohen et al., IEEE TSE 1997): each row starts
  /// from the first uncovered tuple and gives every other line, in random
  /// order, the prefix that covers the most uncovered tuples with the lines
  /// already chosen. False when the visitor stopped.
  bool covering_rows() {
    size_t cursor = 0;  // no uncovered tuple below this index
    while (uncovered_ > 0 && emitted_ < budget_) {
      while (covered_[cursor] != 0) ++cursor;
      if (!emit(covering_row(cursor))) return false;
    }
    return true;
  }

  /// The row that covers tuple `cursor` (decoded into (i, a, j, b)) and
  /// greedily as many others as it can.
  std::vector<uint32_t> covering_row(size_t cursor) {
    size_t i = 0, j = 1;
    for (size_t x = 0; x < nl_; ++x) {
      for (size_t y = x + 1; y < nl_; ++y) {
        if (pair_off_[x][y] <= cursor) {
          i = x;
          j = y;
        }
      }
    }
    const size_t rel = cursor - pair_off_[i][j];
    std::vector<uint32_t> row(nl_, 0);
    std::vector<char> set(nl_, 0);
    row[i] = static_cast<uint32_t>(rel / (n_[j] + 1));
    row[j] = static_cast<uint32_t>(rel % (n_[j] + 1));
    set[i] = set[j] = 1;
    std::vector<size_t> order(nl_);
    for (size_t x = 0; x < nl_; ++x) order[x] = x;
    std::shuffle(order.begin(), order.end(), rng_);
    for (size_t k : order) {
      if (set[k] != 0) continue;
      row[k] = best_prefix(k, row, set);
      set[k] = 1;
    }
    return row;
  }

  /// The prefix of line k that covers the most uncovered tuples with the
  /// lines already chosen (set[x] != 0); ties go to the first met from a
  /// random start.
  uint32_t best_prefix(size_t k, const std::vector<uint32_t>& row, const std::vector<char>& set) {
    uint32_t best = 0;
    int best_gain = -1;
    const uint32_t start = static_cast<uint32_t>(rng_() % (n_[k] + 1));
    for (uint32_t d = 0; d <= n_[k]; ++d) {
      const uint32_t v = (start + d) % (n_[k] + 1);
      int gain = 0;
      for (size_t x = 0; x < nl_; ++x) {
        if (set[x] != 0 && covered_[tuple(k, v, x, row[x])] == 0) ++gain;
      }
      if (gain > best_gain) {
        best_gain = gain;
        best = v;
      }
    }
    return best;
  }

  /// Family 3: random choices until the budget (at most 16 x budget tries,
  /// duplicates being skipped).
  void random_rows() {
    for (uint64_t tries = 0; emitted_ < budget_ && tries < 16 * budget_; ++tries) {
      std::vector<uint32_t> c(nl_);
      for (size_t i = 0; i < nl_; ++i) c[i] = static_cast<uint32_t>(rng_() % (n_[i] + 1));
      if (!emit(c)) return;
    }
  }

  /// Visits choice `c` unless it was visited before, marking the tuples it
  /// covers. False when the visitor stopped.
  bool emit(const std::vector<uint32_t>& c) {
    if (!seen_.insert(c).second) return true;
    ++emitted_;
    if (covering_) {
      for (size_t i = 0; i < nl_; ++i) {
        for (size_t j = i + 1; j < nl_; ++j) {
          char& t = covered_[tuple(i, c[i], j, c[j])];
          if (t == 0) --uncovered_;
          t = 1;
        }
      }
    }
    return visit(c);
  }

  /// Builds the image of `choice` in the working copy, hands it to the
  /// visitor, and restores the lines it changed from the durable copy.
  bool visit(const std::vector<uint32_t>& choice) {
    std::vector<char>& image = *state_.image;
    std::string text;
    for (size_t i = 0; i < nl_; ++i) {
      const cs::DirtyLine& d = state_.lines[i];
      if (!text.empty()) text += ", ";
      text += "line " + hex(d.offset) + ": " + std::to_string(choice[i]) + "/" +
              std::to_string(d.stores->size());
      for (uint32_t k = 0; k < choice[i]; ++k) (*d.stores)[k].apply_to(image.data() + d.offset);
    }
    if (text.empty()) text = "no pending stores";
    ++visited_;
    const bool more = visitor_(cp_, Image{&image, text});
    for (size_t i = 0; i < nl_; ++i) {
      const uint64_t off = state_.lines[i].offset;
      if (choice[i] != 0)
        std::memcpy(image.data() + off, state_.durable->data() + off, pm::kLineSize);
    }
    return more;
  }

  const cs::CrashPoint& cp_;
  const cs::PendingState& state_;
  const ImageVisitor& visitor_;
  const uint64_t budget_;
  const size_t nl_;
  std::vector<uint32_t> n_;  ///< pending stores per dirty line
  std::mt19937_64 rng_;
  uint64_t visited_ = 0;
  // Sampling state.
  std::set<std::vector<uint32_t>> seen_;
  uint64_t emitted_ = 0;
  bool covering_ = false;
  std::vector<std::vector<size_t>> pair_off_;
  std::vector<char> covered_;
  size_t uncovered_ = 0;
};

/// The prefix lengths of `t` stores an eADR crash point visits: 0..t when
/// t + 1 <= budget; t alone for a budget of 1; else `budget` lengths evenly
/// spaced over [0, t], both ends included (duplicates dropped).
std::vector<uint64_t> eadr_prefix_lengths(uint64_t t, uint32_t budget) {
  std::vector<uint64_t> ks;
  if (t + 1 <= budget) {
    for (uint64_t k = 0; k <= t; ++k) ks.push_back(k);
  } else if (budget == 1) {
    ks.push_back(t);
  } else {
    for (uint64_t j = 0; j < budget; ++j) {
      const uint64_t k = j * t / (budget - 1);
      if (ks.empty() || ks.back() != k) ks.push_back(k);
    }
  }
  return ks;
}

/// The images of one eADR crash point: prefixes of the pending stores in
/// global order (Chunk::seq), built incrementally in the working copy, which
/// is restored afterwards. Returns how many were visited.
uint64_t enumerate_eadr(const cs::CrashPoint& cp, const cs::PendingState& state,
                        const ImageOptions& options, const ImageVisitor& visitor) {
  struct Ref {
    uint64_t seq;
    uint64_t line;
    const cs::Chunk* chunk;
  };
  std::vector<Ref> all;
  for (const cs::DirtyLine& d : state.lines) {
    for (const cs::Chunk& c : *d.stores) all.push_back({c.seq, d.offset, &c});
  }
  std::sort(all.begin(), all.end(), [](const Ref& a, const Ref& b) { return a.seq < b.seq; });
  const uint64_t t = all.size();
  std::vector<char>& image = *state.image;
  uint64_t applied = 0, visited = 0;
  for (uint64_t k : eadr_prefix_lengths(t, options.budget)) {
    for (; applied < k; ++applied) all[applied].chunk->apply_to(image.data() + all[applied].line);
    ++visited;
    const bool more = visitor(cp, Image{&image, "eadr: first " + std::to_string(k) + " of " +
                                                    std::to_string(t) + " pending stores"});
    if (!more) break;
  }
  for (uint64_t i = 0; i < applied; ++i) {
    std::memcpy(image.data() + all[i].line, state.durable->data() + all[i].line, pm::kLineSize);
  }
  return visited;
}

}  // namespace

uint64_t enumerate_images(const cs::CrashPoint& point, const cs::PendingState& state,
                          const ImageOptions& options, const ImageVisitor& visitor) {
  if (state.profile == cs::Profile::kEadr) return enumerate_eadr(point, state, options, visitor);
  return AdrImages(point, state, options, visitor).run();
}

Status set_image_visitor(cs::Simulator* sim, const ImageOptions& options, ImageVisitor visitor) {
  if (sim == nullptr) return Status::InvalidArgument("crash images: no simulator");
  if (options.budget == 0) {
    return Status::InvalidArgument("crash images: budget must be at least 1 image");
  }
  if (!visitor) {
    sim->set_crash_point_hook(nullptr);
    return Status::Ok();
  }
  sim->set_crash_point_hook([options, visitor = std::move(visitor)](const cs::CrashPoint& cp,
                                                                    const cs::PendingState& state) {
    return enumerate_images(cp, state, options, visitor);
  });
  return Status::Ok();
}

}  // namespace nvindex::crash
