// Workload generation: see workload.h for the contract and the key layout,
// generators.h for the distributions, trace.h for the file formats.
#include "bench/workload.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "bench/generators.h"
#include "bench/string_keys.h"
#include "bench/trace.h"

namespace nvindex::bench {

std::string_view op_name(OpType type) {
  switch (type) {
    case OpType::kRead:
      return "read";
    case OpType::kInsert:
      return "insert";
    case OpType::kUpdate:
      return "update";
    case OpType::kRemove:
      return "remove";
    case OpType::kScan:
      return "scan";
    case OpType::kReadModifyWrite:
      return "rmw";
  }
  return "?";
}

std::string_view distribution_name(Distribution d) {
  switch (d) {
    case Distribution::kUniform:
      return "uniform";
    case Distribution::kZipfian:
      return "zipfian";
    case Distribution::kSelfSimilar:
      return "selfsimilar";
    case Distribution::kLatest:
      return "latest";
    case Distribution::kSequential:
      return "sequential";
  }
  return "?";
}

Status parse_distribution(std::string_view name, Distribution* out) {
  for (Distribution d : {Distribution::kUniform, Distribution::kZipfian, Distribution::kSelfSimilar,
                         Distribution::kLatest, Distribution::kSequential}) {
    if (name == distribution_name(d)) {
      *out = d;
      return Status::Ok();
    }
  }
  return Status::InvalidArgument("unknown distribution '" + std::string(name) +
                                 "' (expected uniform, zipfian, selfsimilar, latest or "
                                 "sequential)");
}

std::string_view insert_pattern_name(InsertPattern p) {
  switch (p) {
    case InsertPattern::kRandom:
      return "random";
    case InsertPattern::kDense:
      return "dense";
  }
  return "?";
}

Status parse_insert_pattern(std::string_view name, InsertPattern* out) {
  for (InsertPattern p : {InsertPattern::kRandom, InsertPattern::kDense}) {
    if (name == insert_pattern_name(p)) {
      *out = p;
      return Status::Ok();
    }
  }
  return Status::InvalidArgument("unknown insert pattern '" + std::string(name) +
                                 "' (expected random or dense)");
}

Status apply_preset(std::string_view name, WorkloadSpec* spec) {
  WorkloadSpec p;
  p.records = spec->records;
  p.operations = spec->operations;
  p.threads = spec->threads;
  p.seed = spec->seed;
  p.sequential_keys = spec->sequential_keys;
  p.keys_file = spec->keys_file;
  p.trace_load = spec->trace_load;
  p.trace_run = spec->trace_run;
  p.dense_gap = spec->dense_gap;
  p.key_type = spec->key_type;
  p.key_size = spec->key_size;
  p.read_ratio = 0.0;
  p.distribution = Distribution::kZipfian;
  p.skew = ZipfianGenerator::kDefaultTheta;
  p.scan_size = 100;
  p.scan_uniform = false;
  if (name == "ycsb-a") {
    p.read_ratio = 0.5;
    p.update_ratio = 0.5;
  } else if (name == "ycsb-b") {
    p.read_ratio = 0.95;
    p.update_ratio = 0.05;
  } else if (name == "ycsb-c") {
    p.read_ratio = 1.0;
  } else if (name == "ycsb-d") {
    p.read_ratio = 0.95;
    p.insert_ratio = 0.05;
    p.distribution = Distribution::kLatest;
  } else if (name == "ycsb-e") {
    p.scan_ratio = 0.95;
    p.insert_ratio = 0.05;
    p.scan_uniform = true;
  } else if (name == "ycsb-f") {
    p.read_ratio = 0.5;
    p.rmw_ratio = 0.5;
  } else if (name == "insert" || name == "dense-insert") {
    p.insert_ratio = 1.0;
    p.distribution = Distribution::kUniform;
    if (name == "dense-insert") p.insert_pattern = InsertPattern::kDense;
  } else if (name == "search") {
    p.read_ratio = 1.0;
    p.distribution = Distribution::kUniform;
  } else if (name == "delete") {
    p.remove_ratio = 1.0;
    p.distribution = Distribution::kUniform;
  } else {
    return Status::InvalidArgument("unknown workload preset '" + std::string(name) +
                                   "' (expected " + std::string(kPresetList) + ")");
  }
  p.name = std::string(name);
  *spec = std::move(p);
  return Status::Ok();
}

uint64_t Workload::total_operations() const {
  uint64_t n = 0;
  for (const auto& ops : per_thread) n += ops.size();
  return n;
}

namespace {

constexpr std::array<OpType, kOpTypes> kTypes = {OpType::kRead,   OpType::kInsert,
                                                 OpType::kUpdate, OpType::kRemove,
                                                 OpType::kScan,   OpType::kReadModifyWrite};

std::array<double, kOpTypes> ratios_of(const WorkloadSpec& s) {
  return {s.read_ratio, s.insert_ratio, s.update_ratio, s.remove_ratio, s.scan_ratio, s.rmw_ratio};
}

constexpr std::array<const char*, kOpTypes> kRatioNames = {
    "read_ratio", "insert_ratio", "update_ratio", "remove_ratio", "scan_ratio", "rmw_ratio"};

Status validate(const WorkloadSpec& spec) {
  const auto r = ratios_of(spec);
  long double sum = 0;
  for (int i = 0; i < kOpTypes; ++i) {
    if (!(r[i] >= 0.0 && r[i] <= 1.0)) {
      return Status::InvalidArgument(std::string(kRatioNames[i]) + " must be in [0, 1], got " +
                                     std::to_string(r[i]));
    }
    sum += r[i];
  }
  if (std::fabs(static_cast<double>(sum) - 1.0) > 1e-9) {
    return Status::InvalidArgument(
        "operation ratios must sum to 1 (read + insert + update + remove + scan + rmw = " +
        std::to_string(static_cast<double>(sum)) + ")");
  }
  if (spec.keys_file.empty() && spec.records == 0) {
    return Status::InvalidArgument("records must be >= 1 (keys loaded before the run)");
  }
  if (spec.scan_size == 0) return Status::InvalidArgument("scan_size must be >= 1");
  switch (spec.distribution) {
    case Distribution::kZipfian:
      return check_zipfian_theta(spec.skew, "zipfian skew (theta)");
    case Distribution::kLatest:
      return check_zipfian_theta(spec.skew, "latest skew (zipfian theta)");
    case Distribution::kSelfSimilar:
      if (!(spec.skew > 0.0 && spec.skew < 1.0)) {
        return Status::InvalidArgument(
            "self-similar skew h must be in (0, 1) (0.2 = 80% of accesses on 20% of keys), "
            "got " +
            std::to_string(spec.skew));
      }
      return Status::Ok();
    case Distribution::kUniform:
    case Distribution::kSequential:
      return Status::Ok();
  }
  return Status::InvalidArgument("unknown distribution");
}

/// Exact operation counts per type: floor(ratio * n), then the remainder
/// handed out by largest fractional part (ties: type order), so they sum to n.
std::array<uint64_t, kOpTypes> apportion(const std::array<double, kOpTypes>& ratios, uint64_t n) {
  std::array<uint64_t, kOpTypes> counts{};
  std::array<long double, kOpTypes> frac{};
  long double total = 0;
  for (double r : ratios) total += r;
  uint64_t assigned = 0;
  for (int i = 0; i < kOpTypes; ++i) {
    const long double exact = static_cast<long double>(ratios[i]) / total * n;
    counts[i] = static_cast<uint64_t>(std::floor(exact));
    if (counts[i] > n) counts[i] = n;
    frac[i] = exact - counts[i];
    assigned += counts[i];
  }
  while (assigned < n) {
    int best = -1;
    for (int i = 0; i < kOpTypes; ++i) {
      if (ratios[i] > 0 && (best < 0 || frac[i] > frac[best])) best = i;
    }
    ++counts[best];
    frac[best] = -1;  // at most one extra per type (remainder < kOpTypes)
    ++assigned;
  }
  while (assigned > n) {  // floating-point overshoot, practically never
    for (int i = kOpTypes - 1; i >= 0 && assigned > n; --i) {
      if (counts[i] > 0) {
        --counts[i];
        --assigned;
      }
    }
  }
  return counts;
}

uint64_t key_of(uint64_t index, bool sequential) { return sequential ? index + 1 : fnv1a64(index); }

/// Appends `count` keys to *out from key indices 0, 1, 2, ... of key_of,
/// skipping 0 (some indexes reserve it), any key in `avoid_sorted` and any
/// key equal to one produced before. The fast path generates and proves
/// distinctness by sorting; only if that finds a clash (FNV-1a 64 is not
/// injective; extremely rare) or when `avoid_sorted` overlaps does the slow
/// path redo the walk with a hash set.
void generate_keys(uint64_t count, bool sequential, const std::vector<uint64_t>& avoid_sorted,
                   std::vector<uint64_t>* out) {
  out->clear();
  out->reserve(count);
  for (uint64_t i = 0; out->size() < count; ++i) {
    const uint64_t k = key_of(i, sequential);
    if (k != 0) out->push_back(k);
  }
  bool clash = false;
  if (!sequential || !avoid_sorted.empty()) {
    std::vector<uint64_t> sorted = *out;
    std::sort(sorted.begin(), sorted.end());
    clash = std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end();
    if (!clash && !avoid_sorted.empty()) {
      auto a = sorted.begin();
      auto b = avoid_sorted.begin();
      while (a != sorted.end() && b != avoid_sorted.end()) {
        if (*a < *b) {
          ++a;
        } else if (*b < *a) {
          ++b;
        } else {
          clash = true;
          break;
        }
      }
    }
  }
  if (!clash) return;
  std::unordered_set<uint64_t> used(avoid_sorted.begin(), avoid_sorted.end());
  used.reserve(avoid_sorted.size() + count);
  out->clear();
  for (uint64_t i = 0; out->size() < count; ++i) {
    const uint64_t k = key_of(i, sequential);
    if (k != 0 && used.insert(k).second) out->push_back(k);
  }
}

/// One thread's key chooser over the target keys (plus, for Latest, the
/// keys the thread inserted so far).
class KeyChooser {
 public:
  KeyChooser(Distribution d, uint64_t targets, unsigned thread, unsigned threads)
      : dist_(d), uniform_(targets), sequential_(targets, targets / threads * thread) {}

  Status init(double skew, const ScrambledZipfianGenerator* zipf) {
    switch (dist_) {
      case Distribution::kZipfian:
        zipf_ = *zipf;
        return Status::Ok();
      case Distribution::kLatest:
        return LatestGenerator::Create(uniform_.items(), skew, &latest_);
      case Distribution::kSelfSimilar:
        return SelfSimilarGenerator::Create(uniform_.items(), skew, &self_similar_);
      default:
        return Status::Ok();
    }
  }

  /// An item: < targets is load_keys[item]; otherwise own_inserts[item - targets].
  uint64_t next(Rng& rng) {
    switch (dist_) {
      case Distribution::kUniform:
        return uniform_.next(rng);
      case Distribution::kZipfian:
        return zipf_.next(rng);
      case Distribution::kSelfSimilar:
        return self_similar_.next(rng);
      case Distribution::kLatest:
        return latest_.next(rng);
      case Distribution::kSequential:
        return sequential_.next();
    }
    return 0;
  }

  /// The thread inserted one more key; Latest may now choose it.
  void inserted() {
    if (dist_ == Distribution::kLatest) latest_.add_item();
  }

 private:
  Distribution dist_;
  UniformGenerator uniform_;
  SequentialGenerator sequential_;
  ScrambledZipfianGenerator zipf_;
  LatestGenerator latest_;
  SelfSimilarGenerator self_similar_;
};

Status make_generated(const WorkloadSpec& spec, Workload* w) {
  if (Status s = validate(spec); !s.ok()) return s;
  const unsigned threads = spec.threads;
  w->spec = spec;

  // 1. The exact operation mix, shuffled and dealt round-robin.
  const auto counts = apportion(ratios_of(spec), spec.operations);
  std::vector<OpType> types;
  types.reserve(spec.operations);
  for (int i = 0; i < kOpTypes; ++i) types.insert(types.end(), counts[i], kTypes[i]);
  Rng master = Rng::for_stream(spec.seed, 0);
  for (uint64_t i = types.size(); i > 1; --i) std::swap(types[i - 1], types[master.uniform(i)]);
  w->per_thread.assign(threads, {});
  std::vector<uint64_t> inserts(threads, 0), removes(threads, 0);
  for (unsigned t = 0; t < threads; ++t) {
    w->per_thread[t].reserve(spec.operations / threads + 1);
  }
  for (uint64_t i = 0; i < types.size(); ++i) {
    const unsigned t = static_cast<unsigned>(i % threads);
    w->per_thread[t].push_back(Operation{0, 0, types[i], Expect::kFound});
    if (types[i] == OpType::kInsert) ++inserts[t];
    if (types[i] == OpType::kRemove) ++removes[t];
  }
  std::vector<OpType>().swap(types);
  const uint64_t max_inserts = *std::max_element(inserts.begin(), inserts.end());
  const bool dense = spec.insert_pattern == InsertPattern::kDense;
  const uint64_t fresh_count = dense ? 0 : max_inserts * threads;

  // 2. Load keys and fresh insert keys (all distinct).
  std::vector<uint64_t> fresh;
  if (!spec.keys_file.empty()) {
    StringKeyInterner strings;
    const bool string_keys = spec.key_type == KeyType::kString;
    if (Status s = read_keys_file(spec.keys_file, &w->load_keys, &w->duplicate_keys,
                                  string_keys ? &strings : nullptr);
        !s.ok()) {
      return s;
    }
    if (string_keys) {
      // Ids become ranks in byte order (string_keys.h).
      const std::vector<uint64_t> remap = strings.finish(&w->key_strings);
      for (uint64_t& k : w->load_keys) k = remap[k];
    }
    if (w->load_keys.empty()) {
      return Status::InvalidArgument(spec.keys_file + ": keys file holds no keys");
    }
    w->spec.records = w->load_keys.size();
    if (fresh_count > 0) {
      std::vector<uint64_t> sorted = w->load_keys;
      std::sort(sorted.begin(), sorted.end());
      generate_keys(fresh_count, spec.sequential_keys, sorted, &fresh);
    }
  } else {
    std::vector<uint64_t> all;
    generate_keys(spec.records + fresh_count, spec.sequential_keys, {}, &all);
    fresh.assign(all.begin() + spec.records, all.end());
    all.resize(spec.records);
    w->load_keys = std::move(all);
  }
  const uint64_t records = w->load_keys.size();

  // 2b. Dense inserts: thread t's region starts at max_loaded + 1 + t * span.
  // Every key is above every loaded key and the regions are disjoint, so the
  // keys are fresh and distinct and every insert still expects Ok.
  uint64_t dense_first = 0, dense_span = 0;
  if (dense && max_inserts > 0) {
    const uint64_t max_loaded = *std::max_element(w->load_keys.begin(), w->load_keys.end());
    dense_span = std::max(max_inserts, spec.dense_gap);
    const uint64_t room = UINT64_MAX - max_loaded;  // keys max_loaded+1 .. UINT64_MAX
    // Needed: (threads - 1) * span + max_inserts keys above max_loaded.
    const bool overflow = max_inserts > room || (threads > 1 && dense_span > 0 &&
                                                 (threads - 1) > (room - max_inserts) / dense_span);
    if (overflow) {
      return Status::InvalidArgument(
          "dense inserts overflow the key space: " + std::to_string(threads) +
          " thread regions of " + std::to_string(dense_span) +
          " keys above the largest loaded key " + std::to_string(max_loaded) + " pass " +
          std::to_string(UINT64_MAX) +
          " (use fewer inserts or threads, a smaller dense_gap, or --sequential-keys)");
    }
    dense_first = max_loaded + 1;
  }

  // 3. Reserve the last R load keys for removes; the rest are targets.
  uint64_t total_removes = 0;
  for (uint64_t r : removes) total_removes += r;
  if (total_removes > records) {
    return Status::InvalidArgument(
        std::to_string(total_removes) + " remove operations need as many loaded keys, but only " +
        std::to_string(records) + " are loaded (lower remove_ratio or raise records)");
  }
  const uint64_t targets = records - total_removes;
  const uint64_t targeted_ops = spec.operations - counts[1] - counts[3];  // not insert/remove
  if (targets == 0 && targeted_ops > 0) {
    return Status::InvalidArgument(
        "every loaded key is reserved for removes, none is left for reads, updates and scans "
        "(lower remove_ratio or raise records)");
  }

  // 4. Keys per thread stream.
  ScrambledZipfianGenerator zipf;
  if (spec.distribution == Distribution::kZipfian && targets > 0) {
    if (Status s = ScrambledZipfianGenerator::Create(targets, spec.skew, &zipf); !s.ok()) return s;
  }
  uint64_t remove_cursor = targets;
  for (unsigned t = 0; t < threads; ++t) {
    Rng rng = Rng::for_stream(spec.seed, t + 1);
    KeyChooser chooser(spec.distribution, targets, t, threads);
    if (targets > 0) {
      if (Status s = chooser.init(spec.skew, &zipf); !s.ok()) return s;
    }
    std::vector<uint64_t> own_inserts;
    uint64_t next_insert = 0;
    for (Operation& op : w->per_thread[t]) {
      switch (op.type) {
        case OpType::kInsert:
          op.key =
              dense ? dense_first + t * dense_span + next_insert : fresh[t + next_insert * threads];
          ++next_insert;
          if (spec.distribution == Distribution::kLatest) own_inserts.push_back(op.key);
          chooser.inserted();
          break;
        case OpType::kRemove:
          op.key = w->load_keys[remove_cursor++];
          break;
        case OpType::kScan:
        case OpType::kRead:
        case OpType::kUpdate:
        case OpType::kReadModifyWrite: {
          const uint64_t item = chooser.next(rng);
          op.key = item < targets ? w->load_keys[item] : own_inserts[item - targets];
          if (op.type == OpType::kScan) {
            op.scan_length = spec.scan_uniform
                                 ? static_cast<uint32_t>(1 + rng.uniform(spec.scan_size))
                                 : spec.scan_size;
          }
          break;
        }
      }
      op.expect = Expect::kFound;  // see the key discipline in workload.h
    }
  }
  return Status::Ok();
}

Status make_trace(const WorkloadSpec& spec, Workload* w) {
  if (!spec.keys_file.empty()) {
    return Status::InvalidArgument(
        "keys_file and a trace (trace_load/trace_run) cannot be combined: the trace's load "
        "file supplies the keys");
  }
  if (spec.insert_pattern != InsertPattern::kRandom) {
    return Status::InvalidArgument(
        "insert_pattern dense applies to generated workloads; a trace's inserts are its own");
  }
  const unsigned threads = spec.threads;
  w->spec = spec;
  w->spec.name = "trace";

  std::vector<TraceOp> load, run;
  StringKeyInterner strings;
  StringKeyInterner* const interner = spec.key_type == KeyType::kString ? &strings : nullptr;
  if (!spec.trace_load.empty()) {
    if (Status s = read_trace(spec.trace_load, /*load_file=*/true, &load, interner); !s.ok()) {
      return s;
    }
  }
  if (!spec.trace_run.empty()) {
    if (Status s = read_trace(spec.trace_run, /*load_file=*/false, &run, interner); !s.ok()) {
      return s;
    }
  }
  if (interner != nullptr) {
    // Ids become ranks in byte order (string_keys.h), so the replay below
    // (which compares ids for scans) sees the strings' order.
    const std::vector<uint64_t> remap = strings.finish(&w->key_strings);
    for (TraceOp& op : load) op.key = remap[op.key];
    for (TraceOp& op : run) op.key = remap[op.key];
  }

  std::unordered_set<uint64_t> loaded;
  loaded.reserve(load.size());
  uint64_t max_loaded = 0;
  bool any_loaded = false;
  for (const TraceOp& op : load) {
    if (loaded.insert(op.key).second) {
      w->load_keys.push_back(op.key);
      max_loaded = std::max(max_loaded, op.key);
      any_loaded = true;
    } else {
      ++w->duplicate_keys;
    }
  }
  std::vector<TraceOp>().swap(load);

  // Pre-pass: which threads insert each non-loaded key anywhere in the run.
  struct Inserters {
    unsigned first;
    bool several;
  };
  std::unordered_map<uint64_t, Inserters> inserters;
  for (uint64_t i = 0; i < run.size(); ++i) {
    if (run[i].verb != TraceVerb::kInsert || loaded.count(run[i].key)) continue;
    const unsigned t = static_cast<unsigned>(i % threads);
    auto [it, fresh] = inserters.try_emplace(run[i].key, Inserters{t, false});
    if (!fresh && it->second.first != t) it->second.several = true;
  }

  // Sequential replay. A key inserted during the run stays present (traces
  // have no removes), so "thread u inserted k earlier in its own stream"
  // guarantees k is present when u's later operations run.
  std::unordered_set<uint64_t> inserted_by_sole;             // keys with one inserter
  std::set<std::pair<uint64_t, unsigned>> inserted_by_some;  // keys with several
  auto own_earlier = [&](uint64_t key, unsigned t, const Inserters& in) {
    return in.several ? inserted_by_some.count({key, t}) > 0
                      : (in.first == t && inserted_by_sole.count(key) > 0);
  };
  std::vector<uint64_t> max_own(threads, 0);
  std::vector<bool> any_own(threads, false);
  w->per_thread.assign(threads, {});
  for (unsigned t = 0; t < threads; ++t) w->per_thread[t].reserve(run.size() / threads + 1);
  std::array<uint64_t, kOpTypes> verb_counts{};
  for (uint64_t i = 0; i < run.size(); ++i) {
    const TraceOp& top = run[i];
    const unsigned t = static_cast<unsigned>(i % threads);
    Operation op{top.key, 0, OpType::kRead, Expect::kFound};
    const auto it = inserters.find(top.key);
    const bool is_loaded = it == inserters.end() && loaded.count(top.key) > 0;
    switch (top.verb) {
      case TraceVerb::kRead:
      case TraceVerb::kUpdate: {
        op.type = top.verb == TraceVerb::kRead ? OpType::kRead : OpType::kUpdate;
        if (is_loaded) {
          op.expect = Expect::kFound;
        } else if (it == inserters.end()) {
          op.expect = Expect::kNotFound;  // nobody ever inserts it
        } else if (own_earlier(top.key, t, it->second)) {
          op.expect = Expect::kFound;
        } else if (it->second.several || it->second.first != t) {
          op.expect = Expect::kAny;  // another thread inserts it, before or after
        } else {
          op.expect = Expect::kNotFound;  // only this thread inserts it, later
        }
        break;
      }
      case TraceVerb::kInsert: {
        op.type = OpType::kInsert;
        if (is_loaded) {
          op.expect = Expect::kNotFound;
        } else if (own_earlier(top.key, t, it->second)) {
          op.expect = Expect::kNotFound;
        } else if (it->second.several) {
          op.expect = Expect::kAny;  // whichever thread comes first succeeds
        } else {
          op.expect = Expect::kFound;
        }
        if (!is_loaded) {
          if (it->second.several) {
            inserted_by_some.insert({top.key, t});
          } else {
            inserted_by_sole.insert(top.key);
          }
        }
        if (!any_own[t] || top.key > max_own[t]) max_own[t] = top.key;
        any_own[t] = true;
        break;
      }
      case TraceVerb::kScan: {
        op.type = OpType::kScan;
        op.scan_length = top.count;
        const bool surely =
            (any_loaded && max_loaded >= top.key) || (any_own[t] && max_own[t] >= top.key);
        op.expect = surely ? Expect::kFound : Expect::kAny;
        break;
      }
    }
    ++verb_counts[static_cast<int>(op.type)];
    w->per_thread[t].push_back(op);
  }

  w->spec.records = w->load_keys.size();
  w->spec.operations = run.size();
  const double n = run.empty() ? 1.0 : static_cast<double>(run.size());
  w->spec.read_ratio = verb_counts[static_cast<int>(OpType::kRead)] / n;
  w->spec.insert_ratio = verb_counts[static_cast<int>(OpType::kInsert)] / n;
  w->spec.update_ratio = verb_counts[static_cast<int>(OpType::kUpdate)] / n;
  w->spec.scan_ratio = verb_counts[static_cast<int>(OpType::kScan)] / n;
  w->spec.remove_ratio = 0.0;
  w->spec.rmw_ratio = 0.0;
  return Status::Ok();
}

/// String keys: every id of the workload names a key (check_string_key_ids).
Status check_string_ids(const Workload& w) {
  const StringKeyNames names = w.string_key_names();
  if (Status s = check_string_key_ids(names, w.load_keys); !s.ok()) return s;
  std::vector<uint64_t> ids;
  for (const std::vector<Operation>& ops : w.per_thread) {
    ids.clear();
    for (const Operation& op : ops) ids.push_back(op.key);
    if (Status s = check_string_key_ids(names, ids); !s.ok()) return s;
  }
  return Status::Ok();
}

}  // namespace

StringKeyNames Workload::string_key_names() const {
  return StringKeyNames{key_strings, spec.key_size};
}

Status make_workload(const WorkloadSpec& spec, Workload* out) {
  *out = Workload{};
  if (spec.threads == 0) return Status::InvalidArgument("threads must be >= 1");
  if (spec.key_type == KeyType::kString) {
    if (Status s = check_string_key_size(spec.key_size); !s.ok()) return s;
  }
  Workload w;
  const bool trace = !spec.trace_load.empty() || !spec.trace_run.empty();
  Status s = trace ? make_trace(spec, &w) : make_generated(spec, &w);
  if (s.ok() && spec.key_type == KeyType::kString) s = check_string_ids(w);
  if (s.ok()) *out = std::move(w);
  return s;
}

}  // namespace nvindex::bench
