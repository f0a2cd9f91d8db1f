// Model-based test helpers (see model_check.h).
#include "support/model_check.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <latch>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace nvindex::testing {
namespace {

constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
constexpr std::array<uint64_t, 4> kEdgeKeys = {0, 1, kMax - 1, kMax};

using Model = std::map<uint64_t, uint64_t>;
using Pairs = std::vector<std::pair<uint64_t, Value>>;

std::string pairs_to_string(const Pairs& p, size_t limit = 8) {
  std::string s = "[";
  for (size_t i = 0; i < p.size() && i < limit; ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(p[i].first) + ":" + std::to_string(p[i].second);
  }
  if (p.size() > limit) s += ", ... (" + std::to_string(p.size()) + " pairs)";
  return s + "]";
}

Pairs model_scan(const Model& m, uint64_t start, size_t count) {
  Pairs want;
  for (auto it = m.lower_bound(start); it != m.end() && want.size() < count; ++it) {
    want.emplace_back(it->first, it->second);
  }
  return want;
}

std::optional<std::pair<uint64_t, Value>> model_fllt(const Model& m, uint64_t key) {
  auto it = m.lower_bound(key);
  if (it == m.begin()) return std::nullopt;
  --it;
  return std::make_pair(it->first, it->second);
}

// Operation kinds and per-phase weights (percent).
enum Op { kInsert, kUpdate, kRemove, kLookup, kScan, kFllt, kNumOps };
using Mix = std::array<unsigned, kNumOps>;
constexpr Mix kGrowMix = {60, 10, 5, 15, 5, 5};
constexpr Mix kMixedMix = {25, 15, 25, 20, 8, 7};
constexpr Mix kShrinkMix = {5, 10, 60, 15, 5, 5};

Op pick(const Mix& mix, uint64_t r) {
  unsigned x = static_cast<unsigned>(r % 100);
  for (int i = 0; i < kNumOps; ++i) {
    if (x < mix[i]) return static_cast<Op>(i);
    x -= mix[i];
  }
  return kLookup;
}

class ModelRun {
 public:
  ModelRun(Index<uint64_t>& idx, uint64_t seed, uint64_t key_space)
      : idx_(idx), seed_(seed), rng_(seed), key_space_(key_space) {
    ordered_ = idx.info().caps.ordered;
  }

  std::string where() const {
    return "seed " + std::to_string(seed_) + ", operation " + std::to_string(op_);
  }

  uint64_t random_key() {
    const uint64_t r = rng_();
    if (r % 64 == 0) return kEdgeKeys[(r >> 8) % kEdgeKeys.size()];
    return rng_() % key_space_;
  }
  uint64_t random_value() {
    switch (rng_() % 16) {
      case 0:
        return 0;
      case 1:
        return kMax;
      default:
        return rng_();
    }
  }
  // A present key (70%) when there is one, else any key.
  uint64_t target_key() {
    if (!model_.empty() && rng_() % 10 < 7) {
      auto it = model_.lower_bound(random_key());
      if (it == model_.end()) it = model_.begin();
      return it->first;
    }
    return random_key();
  }

  void step(Op op) {
    ++op_;
    switch (op) {
      case kInsert: {
        const uint64_t k = random_key(), v = random_value();
        const bool present = model_.count(k) != 0;
        const Status s = idx_.insert(k, v);
        if (present) {
          ASSERT_TRUE(s.IsAlreadyExists()) << "insert(" << k << ") of a present key returned "
                                           << s.ToString() << " at " << where();
        } else {
          ASSERT_TRUE(s.ok()) << "insert(" << k << ") returned " << s.ToString() << " at "
                              << where();
          model_[k] = v;
        }
        break;
      }
      case kUpdate: {
        const uint64_t k = target_key(), v = random_value();
        auto it = model_.find(k);
        const Status s = idx_.update(k, v);
        if (it == model_.end()) {
          ASSERT_TRUE(s.IsNotFound()) << "update(" << k << ") of an absent key returned "
                                      << s.ToString() << " at " << where();
        } else {
          ASSERT_TRUE(s.ok()) << "update(" << k << ") returned " << s.ToString() << " at "
                              << where();
          it->second = v;
        }
        break;
      }
      case kRemove: {
        const uint64_t k = target_key();
        const bool present = model_.erase(k) != 0;
        const Status s = idx_.remove(k);
        if (present) {
          ASSERT_TRUE(s.ok()) << "remove(" << k << ") returned " << s.ToString() << " at "
                              << where();
        } else {
          ASSERT_TRUE(s.IsNotFound()) << "remove(" << k << ") of an absent key returned "
                                      << s.ToString() << " at " << where();
        }
        break;
      }
      case kLookup: {
        const uint64_t k = target_key();
        auto it = model_.find(k);
        const std::optional<Value> got = idx_.lookup(k);
        if (it == model_.end()) {
          ASSERT_FALSE(got.has_value())
              << "lookup(" << k << ") of an absent key returned " << *got << " at " << where();
        } else {
          ASSERT_TRUE(got.has_value()) << "lookup(" << k << ") missed a present key at " << where();
          ASSERT_EQ(*got, it->second) << "lookup(" << k << ") at " << where();
        }
        break;
      }
      case kScan: {
        if (!ordered_) break;
        const uint64_t start = rng_() % 4 == 0 ? random_key() : target_key();
        const size_t r = rng_() % 16;
        const size_t count = r == 0 ? 0 : r == 1 ? 1000 : rng_() % 40 + 1;
        Pairs got;
        const size_t n = idx_.scan(start, count, &got);
        const Pairs want = model_scan(model_, start, count);
        ASSERT_EQ(n, got.size()) << "scan(" << start << ", " << count
                                 << ") return value != pairs appended at " << where();
        ASSERT_EQ(got, want) << "scan(" << start << ", " << count << ") at " << where() << ": got "
                             << pairs_to_string(got) << ", want " << pairs_to_string(want);
        break;
      }
      case kFllt: {
        if (!ordered_) break;
        const uint64_t k = rng_() % 2 == 0 ? random_key() : target_key() + rng_() % 3;
        const auto got = idx_.find_last_less_than(k);
        const auto want = model_fllt(model_, k);
        ASSERT_EQ(got, want) << "find_last_less_than(" << k << ") at " << where()
                             << (got ? " got key " + std::to_string(got->first) : " got none")
                             << (want ? ", want key " + std::to_string(want->first)
                                      : ", want none");
        break;
      }
      case kNumOps:
        break;
    }
  }

  void check_verify() {
    VerifyReport r;
    const Status s = idx_.verify(&r);
    ASSERT_TRUE(s.ok()) << "verify() failed at " << where() << ": " << s.ToString();
    ASSERT_EQ(r.keys, model_.size()) << "verify() key count at " << where();
  }

  void run_phase(const Mix& mix, size_t ops, size_t verify_every) {
    for (size_t i = 0; i < ops; ++i) {
      step(pick(mix, rng_()));
      if (::testing::Test::HasFatalFailure()) return;
      if ((op_ % verify_every) == 0) {
        check_verify();
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }

  // Removes present keys (in random order) until at most `keep` remain.
  void drain(size_t keep) {
    while (model_.size() > keep) {
      ++op_;
      auto it = model_.lower_bound(rng_() % key_space_);
      if (it == model_.end()) it = model_.begin();
      const uint64_t k = it->first;
      model_.erase(it);
      const Status s = idx_.remove(k);
      ASSERT_TRUE(s.ok()) << "remove(" << k << ") while draining returned " << s.ToString()
                          << " at " << where();
    }
  }

  void check_final() {
    SCOPED_TRACE("final check, seed " + std::to_string(seed_));
    expect_equals_model(idx_, model_);
  }

  Model& model() { return model_; }

 private:
  Index<uint64_t>& idx_;
  uint64_t seed_;
  std::mt19937_64 rng_;
  uint64_t key_space_;
  bool ordered_ = false;
  uint64_t op_ = 0;
  Model model_;
};

// --- concurrent test ---------------------------------------------------------

// Upper 32 bits of every value written for `key`.
uint64_t key_tag(uint64_t key) { return (key * 0x9E3779B97F4A7C15ull) >> 32; }
uint64_t make_value(uint64_t key, uint32_t gen) { return (key_tag(key) << 32) | gen; }
bool value_fits(uint64_t key, uint64_t value) { return (value >> 32) == key_tag(key); }

struct ThreadCtx {
  Index<uint64_t>* idx;
  unsigned t;
  unsigned threads;
  uint64_t keys_per_thread;
  size_t ops;
  bool ordered;
  uint64_t seed;
  Model model;
  std::vector<std::string> errors;
};

bool is_mine(const ThreadCtx& c, uint64_t k) {
  if (k == kMax) return c.t == c.threads - 1;
  return k % c.threads == c.t && k / c.threads < c.keys_per_thread;
}

// One thread's work; returns at its first error (recorded in c->errors).
void concurrent_worker(ThreadCtx* c, std::latch* start) {
  std::mt19937_64 rng(c->seed * 1000003 + c->t);
  Index<uint64_t>& idx = *c->idx;
  const uint64_t own_keys = c->keys_per_thread + (c->t == c->threads - 1 ? 1 : 0);
  auto own_key = [&] {
    const uint64_t i = rng() % own_keys;
    return i == c->keys_per_thread ? kMax : i * c->threads + c->t;
  };
  auto any_key = [&] { return rng() % (c->keys_per_thread * c->threads); };
  auto fail = [&](uint64_t op, const std::string& what) {
    c->errors.push_back("thread " + std::to_string(c->t) + " op " + std::to_string(op) + ": " +
                        what);
  };
  uint32_t gen = 0;
  start->arrive_and_wait();
  for (uint64_t op = 0; op < c->ops; ++op) {
    const bool grow = op < c->ops * 6 / 10;
    const unsigned r = static_cast<unsigned>(rng() % 100);
    // grow: 40 insert, 10 update, 10 remove; shrink: 10 insert, 10 update,
    // 40 remove; then 10 own lookup, 15 foreign lookup, 8 scan, 7 fllt.
    const unsigned ins = grow ? 40 : 10, upd = 10, rem = grow ? 10 : 40;
    if (r < ins + upd + rem) {
      const uint64_t k = own_key();
      auto it = c->model.find(k);
      const bool present = it != c->model.end();
      if (r < ins) {
        const uint64_t v = make_value(k, ++gen);
        const Status s = idx.insert(k, v);
        if (present ? !s.IsAlreadyExists() : !s.ok()) {
          return fail(op, "insert(" + std::to_string(k) + ") returned " + s.ToString() +
                              (present ? " for a present key" : ""));
        }
        if (!present) c->model[k] = v;
      } else if (r < ins + upd) {
        const uint64_t v = make_value(k, ++gen);
        const Status s = idx.update(k, v);
        if (present ? !s.ok() : !s.IsNotFound()) {
          return fail(op, "update(" + std::to_string(k) + ") returned " + s.ToString());
        }
        if (present) it->second = v;
      } else {
        const Status s = idx.remove(k);
        if (present ? !s.ok() : !s.IsNotFound()) {
          return fail(op, "remove(" + std::to_string(k) + ") returned " + s.ToString());
        }
        if (present) c->model.erase(it);
      }
      continue;
    }
    if (r < 70) {  // lookup, own key (exact) or any key (tag check)
      const uint64_t k = r < 70 - 15 ? own_key() : any_key();
      const std::optional<Value> got = idx.lookup(k);
      if (is_mine(*c, k)) {
        auto it = c->model.find(k);
        const std::optional<Value> want =
            it == c->model.end() ? std::nullopt : std::optional<Value>(it->second);
        if (got != want) return fail(op, "lookup(" + std::to_string(k) + ") != own model");
      } else if (got && !value_fits(k, *got)) {
        return fail(op, "lookup(" + std::to_string(k) + ") returned a value never written for it");
      }
      continue;
    }
    if (!c->ordered) continue;
    if (r < 78) {  // scan
      const uint64_t start = any_key();
      const size_t count = rng() % 64 + 1;
      Pairs got;
      const size_t n = idx.scan(start, count, &got);
      if (n != got.size() || got.size() > count) return fail(op, "scan size");
      for (size_t i = 0; i < got.size(); ++i) {
        const auto& [k, v] = got[i];
        if (k < start || (i > 0 && k <= got[i - 1].first)) {
          return fail(
              op, "scan(" + std::to_string(start) + ") out of order: " + pairs_to_string(got, 64));
        }
        if (!value_fits(k, v)) return fail(op, "scan returned a value never written for its key");
      }
      // Own keys do not change during the scan: those in the covered range
      // [start, last returned key] (or to the end) must be exactly the model's.
      const bool to_end = got.size() < count;
      const uint64_t last = got.empty() ? 0 : got.back().first;
      Pairs mine_got, mine_want;
      for (const auto& p : got) {
        if (is_mine(*c, p.first)) mine_got.push_back(p);
      }
      for (auto it = c->model.lower_bound(start);
           it != c->model.end() && (to_end || it->first <= last); ++it) {
        mine_want.emplace_back(it->first, it->second);
      }
      if (mine_got != mine_want) {
        return fail(op, "scan(" + std::to_string(start) + ", " + std::to_string(count) +
                            ") own keys " + pairs_to_string(mine_got) + " != model " +
                            pairs_to_string(mine_want));
      }
      continue;
    }
    // find_last_less_than
    const uint64_t k = rng() % 2 ? any_key() : own_key();
    const auto got = idx.find_last_less_than(k);
    auto it = c->model.lower_bound(k);  // own keys < k are before it
    const bool own_below = it != c->model.begin();
    if (!got) {
      if (own_below) return fail(op, "find_last_less_than(" + std::to_string(k) + ") missed");
      continue;
    }
    if (got->first >= k || !value_fits(got->first, got->second)) {
      return fail(op, "find_last_less_than(" + std::to_string(k) + ") returned key " +
                          std::to_string(got->first) + " or a foreign value");
    }
    if (own_below && std::prev(it)->first > got->first) {
      return fail(op, "find_last_less_than(" + std::to_string(k) + ") skipped own key " +
                          std::to_string(std::prev(it)->first));
    }
    if (is_mine(*c, got->first)) {
      auto mit = c->model.find(got->first);
      if (mit == c->model.end() || mit->second != got->second) {
        return fail(op, "find_last_less_than returned own key " + std::to_string(got->first) +
                            " with a value not in the model");
      }
    }
  }
}

}  // namespace

Status open_test_index(std::string_view name, uint32_t node_size, TestIndex* out,
                       uint64_t pool_bytes, unsigned threads) {
  IndexOptions options;
  options.node_size = node_size;
  options.threads = threads;
  return open_test_index(name, std::move(options), out, pool_bytes);
}

Status open_test_index(std::string_view name, IndexOptions options, TestIndex* out,
                       uint64_t pool_bytes) {
  *out = TestIndex{};
  const IndexEntry* e = find_index_entry(name);
  if (e != nullptr && e->caps.persistent) {
    Status s = pm::Pool::create_anonymous(pool_bytes, name, &out->pool);
    if (!s.ok()) return s;
    options.pool = out->pool.get();
  }
  return make_index<uint64_t>(name, options, &out->index);
}

FileIndex::FileIndex(std::string index, const std::string& tag)
    : name_(std::move(index)), file_(tag) {}

FileIndex::~FileIndex() { close(); }  // then file_ removes the file

Status FileIndex::create(IndexOptions options, uint64_t pool_bytes) {
  close();
  Status s = pm::Pool::create(path(), pool_bytes, name_, pm::Mode::kEmulated, &pool);
  if (!s.ok()) return s;
  options.pool = pool.get();
  return make_index<uint64_t>(name_, options, &index);
}

Status FileIndex::open_pool() {
  close();
  return pm::Pool::open(path(), name_, pm::Mode::kEmulated, &pool);
}

Status FileIndex::reopen(IndexOptions options) {
  Status s = open_pool();
  if (!s.ok()) return s;
  options.pool = pool.get();
  return make_index<uint64_t>(name_, options, &index);
}

void FileIndex::crash() {
  if (pool) pool->keep_unclean();
  close();
}

void FileIndex::close() {
  index.reset();
  pool.reset();
}

void expect_equals_model(Index<uint64_t>& idx, const std::map<uint64_t, Value>& model) {
  VerifyReport r;
  const Status s = idx.verify(&r);
  ASSERT_TRUE(s.ok()) << "verify() failed: " << s.ToString();
  ASSERT_EQ(r.keys, model.size()) << "verify() key count";
  for (const auto& [k, v] : model) {
    ASSERT_EQ(idx.lookup(k), std::optional<Value>(v)) << "lookup(" << k << ")";
  }
  if (!idx.info().caps.ordered) return;
  Pairs got;
  idx.scan(0, std::numeric_limits<size_t>::max(), &got);
  const Pairs want(model.begin(), model.end());
  ASSERT_EQ(got, want) << "full scan: got " << pairs_to_string(got) << ", want "
                       << pairs_to_string(want);
}

std::vector<IndexCase> persistent_index_cases() {
  std::vector<IndexCase> out;
  for (IndexCase& c : registered_index_cases()) {
    if (find_index_entry(c.name)->caps.persistent) out.push_back(std::move(c));
  }
  return out;
}

std::vector<IndexCase> registered_index_cases() {
  static constexpr uint32_t kSizes[] = {128, 256, 512, 768, 1024, 2048, 4096};
  std::vector<IndexCase> cases;
  for (const IndexEntry& e : registered_indexes()) {
    if (is_test_only_index(e.name)) continue;
    std::vector<uint32_t> sizes;
    if (e.node_size_ok == nullptr) {
      sizes.push_back(0);
    } else {
      for (uint32_t s : kSizes) {
        if (e.node_size_ok(s)) sizes.push_back(s);
      }
    }
    auto label = [&](uint32_t size, const std::string& opt) {
      std::string l =
          std::string(e.name) + (size == 0 ? "" : "_" + std::to_string(size) + "B") + opt;
      for (char& c : l) {
        if (!isalnum(static_cast<unsigned char>(c))) c = '_';
      }
      return l;
    };
    for (uint32_t s : sizes) cases.push_back({std::string(e.name), s, {}, label(s, "")});
    for (const OptionSpec& o : e.options) {
      for (size_t v = 1; v < o.values.size(); ++v) {
        std::vector<uint32_t> ends = {sizes.front()};
        if (sizes.back() != sizes.front()) ends.push_back(sizes.back());
        for (uint32_t s : ends) {
          const std::string name(o.name), value(o.values[v]);
          cases.push_back(
              {std::string(e.name), s, {{name, value}}, label(s, "_" + name + "_" + value)});
        }
      }
    }
  }
  return cases;
}

void PrintTo(const IndexCase& c, std::ostream* os) { *os << c.label; }

IndexOptions options_for(const IndexCase& c, unsigned threads) {
  IndexOptions o;
  o.node_size = c.node_size == 0 ? 512 : c.node_size;
  o.extra = c.extra;
  o.threads = threads;
  return o;
}

void run_model_test(Index<uint64_t>& idx, uint64_t seed, size_t ops, uint64_t key_space) {
  ASSERT_GT(key_space, 0u);
  ModelRun run(idx, seed, key_space);
  const size_t verify_every = std::max<size_t>(1, ops / 16);
  run.run_phase(kGrowMix, ops * 45 / 100, verify_every);
  if (::testing::Test::HasFatalFailure()) return;
  run.run_phase(kMixedMix, ops * 20 / 100, verify_every);
  if (::testing::Test::HasFatalFailure()) return;
  const size_t peak = run.model().size();
  run.run_phase(kShrinkMix, ops * 35 / 100, verify_every);
  if (::testing::Test::HasFatalFailure()) return;
  run.drain(peak / 16);
  if (::testing::Test::HasFatalFailure()) return;
  run.check_verify();
  if (::testing::Test::HasFatalFailure()) return;
  run.run_phase(kGrowMix, ops / 10, verify_every);
  if (::testing::Test::HasFatalFailure()) return;
  run.check_final();
}

void run_concurrent_test(Index<uint64_t>& idx, unsigned threads, uint64_t seed,
                         size_t ops_per_thread, uint64_t keys_per_thread) {
  ASSERT_GE(threads, 2u);
  ASSERT_LE(threads, 8u);
  ASSERT_GT(keys_per_thread, 0u);
  const IndexInfo info = idx.info();
  ASSERT_TRUE(info.caps.thread_safe) << info.name << " does not claim thread_safe";
  std::vector<ThreadCtx> ctx(threads);
  for (unsigned t = 0; t < threads; ++t) {
    ctx[t].idx = &idx;
    ctx[t].t = t;
    ctx[t].threads = threads;
    ctx[t].keys_per_thread = keys_per_thread;
    ctx[t].ops = ops_per_thread;
    ctx[t].ordered = info.caps.ordered;
    ctx[t].seed = seed;
  }
  std::latch start(threads);
  std::vector<std::thread> workers;
  for (unsigned t = 0; t < threads; ++t) workers.emplace_back(concurrent_worker, &ctx[t], &start);
  for (std::thread& w : workers) w.join();
  bool failed = false;
  for (const ThreadCtx& c : ctx) {
    for (const std::string& e : c.errors) {
      ADD_FAILURE() << info.name << ", seed " << seed << ", " << threads << " threads: " << e;
      failed = true;
    }
  }
  if (failed) return;
  Model all;
  for (const ThreadCtx& c : ctx) all.insert(c.model.begin(), c.model.end());
  for (const auto& [k, v] : all) {
    ASSERT_EQ(idx.lookup(k), std::optional<Value>(v)) << "lookup(" << k << ") after the run";
  }
  if (info.caps.ordered) {
    Pairs got;
    idx.scan(0, std::numeric_limits<size_t>::max(), &got);
    const Pairs want(all.begin(), all.end());
    ASSERT_EQ(got, want) << "full scan after the run: got " << pairs_to_string(got) << ", want "
                         << pairs_to_string(want);
  }
  VerifyReport report;
  const Status s = idx.verify(&report);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(report.keys, all.size());
}

}  // namespace nvindex::testing
