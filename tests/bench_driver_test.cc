// Tests of the benchmark driver (src/bench/driver.h): counts per operation
// type, checking of every result (an honest index has 0 failures, the lying
// test index has some), PM counters of volatile indexes, latency sampling,
// the throughput timeline, 1 and 2 threads, byte-size parsing, and the
// per-phase CPU counters (counted, or not available with a reason).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>

#include "bench/driver.h"
#include "bench/workload.h"
#include "nvindex/index.h"
#include "testing/test_indexes.h"
#include "util/temp_files.h"

// The test doubles this file uses (src/testing/test_indexes.h).
[[maybe_unused]] const bool kTestIndexesRegistered =
    (nvindex::test_indexes::register_test_indexes(), true);

namespace nvindex::bench {
namespace {

constexpr uint64_t kLoaded = 1000;
constexpr uint64_t kReservedForRemove = 100;

uint64_t loaded_key(uint64_t i) { return i * 1000 + 1; }

bool registered(std::string_view name) {
  for (const IndexEntry& e : registered_indexes()) {
    if (e.name == name) return true;
  }
  return false;
}

/// A hand-made workload over kLoaded keys: per thread, reads of present and
/// absent keys, inserts of fresh and present keys, updates, removes of the
/// thread's own reserved keys, scans and read-modify-writes, every one with
/// an exact expectation. counts[type] receives the operations of each type.
Workload hand_made(unsigned threads, std::array<uint64_t, kOpTypes>* counts) {
  Workload w;
  w.spec.name = "hand-made";
  w.spec.threads = threads;
  w.spec.records = kLoaded;
  for (uint64_t i = 0; i < kLoaded; ++i) w.load_keys.push_back(loaded_key(i));
  w.per_thread.resize(threads);
  counts->fill(0);
  const uint64_t targets = kLoaded - kReservedForRemove;
  for (unsigned t = 0; t < threads; ++t) {
    std::vector<Operation>& ops = w.per_thread[t];
    auto add = [&](OpType type, uint64_t key, Expect e, uint32_t len = 0) {
      ops.push_back(Operation{key, len, type, e});
      ++(*counts)[static_cast<int>(type)];
    };
    for (uint64_t j = 0; j < 200; ++j) {
      const uint64_t target = loaded_key((j * 37 + t * 11) % targets);
      add(OpType::kRead, target, Expect::kFound);
      add(OpType::kRead, target + 1, Expect::kNotFound);  // keys are 1 mod 1000
      add(OpType::kUpdate, target, Expect::kFound);
      add(OpType::kUpdate, target + 2, Expect::kNotFound);
      add(OpType::kInsert, 1'000'000'000ull + t * 100'000 + j, Expect::kFound);
      add(OpType::kInsert, target, Expect::kNotFound);
      add(OpType::kScan, target, Expect::kFound, 10);
      add(OpType::kReadModifyWrite, target, Expect::kFound);
    }
    // Removes: this thread's share of the reserved keys (the last ones).
    for (uint64_t i = targets + t; i < kLoaded; i += threads) {
      add(OpType::kRemove, loaded_key(i), Expect::kFound);
      add(OpType::kRemove, loaded_key(i) + 3, Expect::kNotFound);
    }
  }
  w.spec.operations = w.total_operations();
  return w;
}

BenchOptions quiet_options() {
  BenchOptions o;
  o.latency_sample = 1.0;  // time every operation: samples == operations
  o.pm.mode = pm::Mode::kEmulated;
  return o;
}

class DriverThreads : public ::testing::TestWithParam<unsigned> {};

TEST_P(DriverThreads, AbslBtreeHandMadeWorkloadCountsAndNoFailures) {
  const unsigned threads = GetParam();
  std::array<uint64_t, kOpTypes> counts;
  Workload w = hand_made(threads, &counts);
  IndexResult r;
  ASSERT_TRUE(run_benchmark(quiet_options(), w, "absl-btree", &r, nullptr).ok());

  EXPECT_EQ(r.failures, 0u) << (r.failure_examples.empty() ? "" : r.failure_examples[0]);
  EXPECT_TRUE(r.failure_examples.empty());
  EXPECT_EQ(r.load.operations, kLoaded);
  EXPECT_EQ(r.run.operations, w.total_operations());
  // Every load and run operation, plus the final key-count check.
  EXPECT_EQ(r.checked, kLoaded + w.total_operations() + 1);
  for (int k = 0; k < kOpTypes; ++k) {
    EXPECT_EQ(r.by_type[k].completed, counts[k]) << op_name(static_cast<OpType>(k));
    EXPECT_EQ(r.by_type[k].succeeded, counts[k]) << op_name(static_cast<OpType>(k));
  }
  EXPECT_GT(r.load.seconds, 0);
  EXPECT_GT(r.run.seconds, 0);
  EXPECT_GT(r.run.throughput, 0);

  // Volatile index: no PM cost at all.
  EXPECT_EQ(r.load.pm.flushes, 0u);
  EXPECT_EQ(r.load.pm.fences, 0u);
  EXPECT_EQ(r.run.pm.flushes, 0u);
  EXPECT_EQ(r.run.pm.lines_flushed, 0u);
  EXPECT_EQ(r.run.pm.fences, 0u);
  EXPECT_EQ(r.run.pm.naws, 0u);
  EXPECT_FALSE(r.persistent);

  // Every operation timed; percentiles ordered.
  EXPECT_EQ(r.latency.samples, w.total_operations());
  EXPECT_LE(r.latency.min, r.latency.p50);
  EXPECT_LE(r.latency.p50, r.latency.p99);
  EXPECT_LE(r.latency.p99, r.latency.max);

  // The timeline accounts for every run operation.
  ASSERT_FALSE(r.timeline.empty());
  EXPECT_EQ(std::accumulate(r.timeline.begin(), r.timeline.end(), uint64_t{0}), r.run.operations);

  // Structure and the final key count: loaded + fresh inserts - removes.
  ASSERT_TRUE(r.structure.ok()) << r.structure.ToString();
  EXPECT_EQ(r.verify_report.keys, kLoaded + 200 * threads - kReservedForRemove);
  EXPECT_EQ(r.info.name, "absl-btree");
  EXPECT_GT(r.info.dram_bytes, 0u);
}

TEST_P(DriverThreads, LyingIndexIsCaught) {
  const unsigned threads = GetParam();
  std::array<uint64_t, kOpTypes> counts;
  Workload w = hand_made(threads, &counts);
  IndexResult r;
  ASSERT_TRUE(run_benchmark(quiet_options(), w, "lying-test", &r, nullptr).ok());
  // Dropped loads (every 10th insert) make reads, updates and scans of those
  // keys fail; every 16th lookup returns a foreign value.
  EXPECT_GT(r.failures, 0u);
  EXPECT_FALSE(r.failure_examples.empty());
  EXPECT_LE(r.failure_examples.size(), kMaxFailureExamples);
  const uint64_t reads = r.by_type[static_cast<int>(OpType::kRead)].completed;
  EXPECT_LT(r.by_type[static_cast<int>(OpType::kRead)].succeeded, reads);
  EXPECT_EQ(r.run.operations, w.total_operations());
}

INSTANTIATE_TEST_SUITE_P(Threads, DriverThreads, ::testing::Values(1u, 2u));

TEST(Driver, SamplingFractionGivesSomeSamples) {
  std::array<uint64_t, kOpTypes> counts;
  Workload w = hand_made(1, &counts);
  BenchOptions o = quiet_options();
  o.latency_sample = 0.05;
  IndexResult r;
  ASSERT_TRUE(run_benchmark(o, w, "absl-btree", &r, nullptr).ok());
  EXPECT_GT(r.latency.samples, 0u);
  EXPECT_LT(r.latency.samples, w.total_operations());
}

TEST(Driver, DurationStopsEarlyAndCountsStayConsistent) {
  std::array<uint64_t, kOpTypes> counts;
  Workload w = hand_made(2, &counts);
  BenchOptions o = quiet_options();
  o.duration_seconds = 1e-9;  // expired before the first clock check
  IndexResult r;
  ASSERT_TRUE(run_benchmark(o, w, "absl-btree", &r, nullptr).ok());
  EXPECT_LT(r.run.operations, w.total_operations());
  uint64_t sum = 0;
  for (const TypeCounts& c : r.by_type) sum += c.completed;
  EXPECT_EQ(sum, r.run.operations);
  EXPECT_EQ(r.failures, 0u);
}

TEST(Driver, GeneratedYcsbWorkloadsHaveNoFailures) {
  for (const char* preset : {"ycsb-a", "ycsb-e", "ycsb-f"}) {
    for (unsigned threads : {1u, 2u}) {
      WorkloadSpec spec;
      spec.records = 3000;
      spec.operations = 3000;
      spec.threads = threads;
      ASSERT_TRUE(apply_preset(preset, &spec).ok());
      Workload w;
      Status st = make_workload(spec, &w);
      ASSERT_TRUE(st.ok()) << st.ToString();
      for (const char* index : {"absl-btree", "btree"}) {
        if (!registered(index)) continue;
        IndexResult r;
        BenchOptions o = quiet_options();
        o.latency_sample = 0.01;
        st = run_benchmark(o, w, index, &r, nullptr);
        ASSERT_TRUE(st.ok()) << index << ": " << st.ToString();
        EXPECT_EQ(r.failures, 0u) << index << " " << preset << " threads " << threads << ": "
                                  << (r.failure_examples.empty() ? "" : r.failure_examples[0]);
        EXPECT_EQ(r.run.operations, w.total_operations());
        EXPECT_TRUE(r.structure.ok()) << r.structure.ToString();
      }
      IndexResult lie;
      ASSERT_TRUE(run_benchmark(quiet_options(), w, "lying-test", &lie, nullptr).ok());
      EXPECT_GT(lie.failures, 0u) << preset;
    }
  }
}

TEST(Driver, PersistentIndexUsesATemporaryPoolAndRecovers) {
  const IndexEntry* entry = nullptr;
  for (const IndexEntry& e : registered_indexes()) {
    if (needs_pool(e.caps) && e.name != "lying-test") {
      entry = &e;
      break;
    }
  }
  if (entry == nullptr) GTEST_SKIP() << "no persistent index registered yet";
  std::array<uint64_t, kOpTypes> counts;
  Workload w = hand_made(1, &counts);
  BenchOptions o = quiet_options();
  o.pool_path = ::testing::TempDir() + "nvindex-driver-test-" + std::to_string(getpid()) + ".pool";
  IndexResult r;
  Status st = run_benchmark(o, w, entry->name, &r, nullptr);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(r.failures, 0u) << (r.failure_examples.empty() ? "" : r.failure_examples[0]);
  EXPECT_TRUE(r.persistent);
  EXPECT_TRUE(r.recovery.ok()) << r.recovery.ToString();
  EXPECT_GT(r.run.pm.flushes, 0u);
  EXPECT_GT(r.run.pm.fences, 0u);
  EXPECT_FALSE(std::filesystem::exists(o.pool_path)) << "pool not removed without keep_pool";
  // Per-type PM cost: a lookup or scan of a persistent index persists
  // nothing; a successful insert and update each persist at least one line
  // with at least one fence (half of the hand-made inserts and updates are of
  // fresh and present keys respectively, the other half must fail and may
  // persist nothing); and the per-type costs add up to the phase total.
  const auto& by = r.by_type;
  for (OpType t : {OpType::kRead, OpType::kScan}) {
    EXPECT_EQ(by[static_cast<int>(t)].flushes, 0u) << op_name(t);
    EXPECT_EQ(by[static_cast<int>(t)].fences, 0u) << op_name(t);
  }
  for (OpType t : {OpType::kInsert, OpType::kUpdate}) {
    const TypeCounts& c = by[static_cast<int>(t)];
    EXPECT_GE(c.lines_flushed, c.completed / 2) << op_name(t);
    EXPECT_GE(c.fences, c.completed / 2) << op_name(t);
  }
  uint64_t flushes = 0, fences = 0;
  for (const TypeCounts& c : by) {
    flushes += c.flushes;
    fences += c.fences;
  }
  EXPECT_EQ(flushes, r.run.pm.flushes);
  EXPECT_EQ(fences, r.run.pm.fences);
}

TEST(Driver, UnknownIndexAndEmptyWorkloadAreInvalidArgument) {
  std::array<uint64_t, kOpTypes> counts;
  Workload w = hand_made(1, &counts);
  IndexResult r;
  Status st = run_benchmark(quiet_options(), w, "no-such-index", &r, nullptr);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("absl-btree"), std::string::npos) << st.message();
  Workload empty;
  st = run_benchmark(quiet_options(), empty, "absl-btree", &r, nullptr);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
}

TEST(Driver, ParseByteSize) {
  uint64_t v = 0;
  ASSERT_TRUE(parse_byte_size("4096", &v).ok());
  EXPECT_EQ(v, 4096u);
  ASSERT_TRUE(parse_byte_size("512M", &v).ok());
  EXPECT_EQ(v, 512ull << 20);
  ASSERT_TRUE(parse_byte_size("4G", &v).ok());
  EXPECT_EQ(v, 4ull << 30);
  ASSERT_TRUE(parse_byte_size("2gib", &v).ok());
  EXPECT_EQ(v, 2ull << 30);
  ASSERT_TRUE(parse_byte_size("64KB", &v).ok());
  EXPECT_EQ(v, 64ull << 10);
  EXPECT_FALSE(parse_byte_size("", &v).ok());
  EXPECT_FALSE(parse_byte_size("G", &v).ok());
  EXPECT_FALSE(parse_byte_size("12X", &v).ok());
  EXPECT_FALSE(parse_byte_size("-1", &v).ok());
  EXPECT_FALSE(parse_byte_size("99999999999T", &v).ok());
}

TEST(Driver, MediaWriteAmplification) {
  pm::CounterSnapshot c;
  EXPECT_EQ(media_write_amplification(c), 0.0);
  c.lines_flushed = 8;  // flushes alone: not what reached the DIMM
  c.media_writes = 4;   // 1024 B of media writes
  EXPECT_EQ(media_write_amplification(c), 0.0) << "no line written back";
  c.lines_written_back = 8;  // 512 B reached the DIMM (the media model's denominator)
  EXPECT_DOUBLE_EQ(media_write_amplification(c), 2.0);
}

// --- issue 4: bulk load, dense inserts, SMO split, recovery threads, labels --

/// A generated workload from `preset` over `records` hashed keys.
Workload preset_workload(const char* preset, uint64_t records, uint64_t ops, unsigned threads) {
  WorkloadSpec spec;
  spec.records = records;
  spec.operations = ops;
  spec.threads = threads;
  EXPECT_TRUE(apply_preset(preset, &spec).ok()) << preset;
  Workload w;
  Status st = make_workload(spec, &w);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return w;
}

std::string first_failure(const IndexResult& r) {
  return r.failure_examples.empty() ? "" : r.failure_examples[0];
}

TEST(DriverBulkLoad, VolatileAndPersistentIndexesLoadEveryKeyAndSayHow) {
  for (const char* index : {"absl-btree", "btree", "fastfair", "divided-skiplist"}) {
    if (!registered(index)) continue;
    for (unsigned threads : {1u, 2u}) {
      Workload w = preset_workload("insert", 3000, 1000, threads);
      BenchOptions o = quiet_options();
      o.latency_sample = 0.01;
      o.node_size = smallest_node_size(index);  // many nodes, many splits
      o.bulk_load = true;
      o.fill_factor = 0.7;
      IndexResult r;
      Status st = run_benchmark(o, w, index, &r, nullptr);
      ASSERT_TRUE(st.ok()) << index << ": " << st.ToString();
      EXPECT_EQ(r.failures, 0u) << index << ": " << first_failure(r);
      // One bulk_load() of every key, each key then checked (scan or
      // lookup), every run op, and the final key count.
      EXPECT_EQ(r.load.operations, 3000u);
      EXPECT_EQ(r.checked, 1 + 3000 + 1000 + 1u) << index;
      EXPECT_EQ(r.load_method,
                r.info.caps.bulk_load ? LoadMethod::kBulkLoad : LoadMethod::kBulkLoadByInserts)
          << index;
      EXPECT_DOUBLE_EQ(r.fill_factor, 0.7);
      ASSERT_TRUE(r.structure.ok()) << r.structure.ToString();
      EXPECT_EQ(r.verify_report.keys, 4000u);
      if (r.persistent) {
        EXPECT_TRUE(r.recovery.ok()) << r.recovery.ToString();
        EXPECT_GT(r.load.pm.lines_flushed, 0u) << "a persistent load persists its nodes";
      }
    }
  }
}

TEST(DriverBulkLoad, FillFactorOutsideZeroOneIsInvalidArgument) {
  Workload w = preset_workload("search", 100, 10, 1);
  for (double fill : {0.0, -0.5, 1.5, std::nan("")}) {
    BenchOptions o = quiet_options();
    o.bulk_load = true;
    o.fill_factor = fill;
    IndexResult r;
    Status st = run_benchmark(o, w, "absl-btree", &r, nullptr);
    EXPECT_EQ(st.code(), Code::kInvalidArgument) << fill;
    EXPECT_NE(st.message().find("(0, 1]"), std::string::npos) << st.message();
  }
}

TEST(DriverBulkLoad, LyingIndexIsCaughtAfterABulkLoad) {
  // The lying index drops every 10th insert: the post-load check must see it.
  Workload w = preset_workload("search", 500, 100, 1);
  BenchOptions o = quiet_options();
  o.bulk_load = true;
  IndexResult r;
  ASSERT_TRUE(run_benchmark(o, w, "lying-test", &r, nullptr).ok());
  EXPECT_GT(r.failures, 0u);
}

TEST(DriverWorkloads, DenseInsertSearchAndDeleteHaveNoFailures) {
  for (const char* preset : {"dense-insert", "search", "delete"}) {
    for (const char* index : {"absl-btree", "btree", "fastfair", "divided-skiplist"}) {
      if (!registered(index)) continue;
      Workload w = preset_workload(preset, 4000, 2000, 2);
      BenchOptions o = quiet_options();
      o.latency_sample = 0.01;
      o.node_size = smallest_node_size(index);
      o.bulk_load = true;
      IndexResult r;
      Status st = run_benchmark(o, w, index, &r, nullptr);
      ASSERT_TRUE(st.ok()) << index << " " << preset << ": " << st.ToString();
      EXPECT_EQ(r.failures, 0u) << index << " " << preset << ": " << first_failure(r);
      ASSERT_TRUE(r.structure.ok()) << r.structure.ToString();
      const uint64_t want = std::string(preset) == "dense-insert" ? 6000
                            : std::string(preset) == "delete"     ? 2000
                                                                  : 4000;
      EXPECT_EQ(r.verify_report.keys, want) << index << " " << preset;
    }
  }
}

TEST(DriverSmoSplit, FastfairSplitInsertsCostMoreLinesThanNonSplitOnes) {
  if (!registered("fastfair")) GTEST_SKIP() << "fastfair not registered";
  Workload w = preset_workload("insert", 2000, 6000, 1);
  BenchOptions o = quiet_options();
  o.latency_sample = 0.01;
  o.node_size = 128;  // 7 slots a node: a split every few inserts
  IndexResult r;
  ASSERT_TRUE(run_benchmark(o, w, "fastfair", &r, nullptr).ok());
  ASSERT_EQ(r.failures, 0u) << first_failure(r);
  const TypeCounts& c = r.by_type[static_cast<int>(OpType::kInsert)];
  ASSERT_EQ(c.completed, 6000u);
  // fastfair calls count_smo() once per split: some inserts split, most not.
  EXPECT_GT(c.smo_ops, 0u);
  EXPECT_LT(c.smo_ops, c.completed / 2);
  EXPECT_GE(c.smos, c.smo_ops);
  EXPECT_EQ(c.smos, r.run.pm.smos) << "every run-phase SMO happened inside an insert";
  EXPECT_GT(r.load.pm.smos, 0u) << "loading 2000 keys into 128 B nodes splits";
  // The split into with/without adds up, and a split insert persists more.
  const TypeCounts a = c.without_smo(), b = c.with_smo();
  EXPECT_EQ(a.completed + b.completed, c.completed);
  EXPECT_EQ(a.lines_flushed + b.lines_flushed, c.lines_flushed);
  EXPECT_EQ(a.flushes + b.flushes, c.flushes);
  EXPECT_EQ(a.fences + b.fences, c.fences);
  ASSERT_GT(a.completed, 0u);
  const double lines_without = double(a.lines_flushed) / a.completed;
  const double lines_with = double(b.lines_flushed) / b.completed;
  EXPECT_GE(lines_without, 1.0) << "a non-split insert persists at least one line";
  EXPECT_GT(lines_with, lines_without + 1.0) << "a split persists the new node too";

  // Searches never split; a volatile index never counts SMOs here either.
  Workload reads = preset_workload("search", 2000, 2000, 1);
  ASSERT_TRUE(run_benchmark(o, reads, "fastfair", &r, nullptr).ok());
  EXPECT_EQ(r.by_type[static_cast<int>(OpType::kRead)].smo_ops, 0u);
  ASSERT_TRUE(run_benchmark(o, w, "absl-btree", &r, nullptr).ok());
  EXPECT_EQ(r.by_type[static_cast<int>(OpType::kInsert)].smo_ops, 0u);
}

TEST(DriverRecovery, RecoveryThreadsDefaultToTheRunsAndCanBeSet) {
  if (!registered("fastfair")) GTEST_SKIP() << "fastfair not registered";
  Workload w = preset_workload("insert", 1000, 500, 2);
  BenchOptions o = quiet_options();
  o.latency_sample = 0.01;
  IndexResult r;
  ASSERT_TRUE(run_benchmark(o, w, "fastfair", &r, nullptr).ok());
  EXPECT_TRUE(r.recovery.ok()) << r.recovery.ToString();
  EXPECT_EQ(r.recovery_threads, 2u);
  EXPECT_GT(r.recovery_seconds, 0.0);
  EXPECT_LE(r.rebuild_seconds, r.recovery_seconds);
  o.recovery_threads = 1;
  ASSERT_TRUE(run_benchmark(o, w, "fastfair", &r, nullptr).ok());
  EXPECT_TRUE(r.recovery.ok()) << r.recovery.ToString();
  EXPECT_EQ(r.recovery_threads, 1u);
}

TEST(DriverLabel, LabelNamesTheResultAndOptionsReachTheIndex) {
  std::array<uint64_t, kOpTypes> counts;
  Workload w = hand_made(1, &counts);
  BenchOptions o = quiet_options();
  o.label = "wbtree:inner=dram";
  o.index_extra = {{"inner", "dram"}};
  IndexResult r;
  ASSERT_TRUE(run_benchmark(o, w, "wbtree", &r, nullptr).ok());
  EXPECT_EQ(r.index, "wbtree:inner=dram");
  EXPECT_EQ(r.index_name, "wbtree");
  EXPECT_EQ(r.info.name, "wbtree");
  EXPECT_EQ(r.info.caps.placement, Placement::kSelective) << "the option reached the index";
  EXPECT_EQ(r.index_options.at("inner"), "dram");
  EXPECT_EQ(r.failures, 0u) << first_failure(r);
  // An option the index does not take is refused, not ignored.
  o.index_extra = {{"flavour", "plain"}};
  const Status bad = run_benchmark(o, w, "btree", &r, nullptr);
  EXPECT_EQ(bad.code(), Code::kInvalidArgument) << bad.ToString();
  EXPECT_NE(bad.message().find("unknown option 'flavour'"), std::string::npos) << bad.ToString();
  EXPECT_EQ(file_safe("wbtree:inner=dram;x=1"), "wbtree_inner_dram_x_1");
}

/// Expects `e` to be either counted (> 0) or not available with a reason.
void expect_counted_or_explained(const EventCount& e, const char* what) {
  if (e.available) {
    EXPECT_GT(e.value, 0u) << what;
  } else {
    EXPECT_EQ(e.value, 0u) << what;
    EXPECT_FALSE(e.reason.empty()) << what << ": an unavailable count must say why";
  }
}

TEST(DriverPerfCounters, EachPhaseCountsItsWorkersOrSaysWhyNot) {
  // Whether this machine lets a thread count its own task-clock at all.
  ThreadEventCounter probe;
  const Status probe_st = probe.open(task_clock_event());
  for (unsigned threads : {1u, 2u}) {
    std::array<uint64_t, kOpTypes> counts;
    Workload w = hand_made(threads, &counts);
    IndexResult r;
    ASSERT_TRUE(run_benchmark(quiet_options(), w, "absl-btree", &r, nullptr).ok());
    for (const PhaseResult* p : {&r.load, &r.run}) {
      expect_counted_or_explained(p->cpu.instructions, "instructions");
      expect_counted_or_explained(p->cpu.cycles, "cycles");
      expect_counted_or_explained(p->cpu.task_clock, "task-clock");
      if (probe_st.ok()) {
        // The software event works without hardware counters: every worker
        // thread's loop spent some CPU time (ns), at most the phase's wall
        // time each (plus 1 ms for the counter reads after the clock stops).
        ASSERT_TRUE(p->cpu.task_clock.available) << p->cpu.task_clock.reason;
        EXPECT_GT(p->cpu.task_clock.value, 0u);
        EXPECT_LE(static_cast<double>(p->cpu.task_clock.value), threads * (p->seconds * 1e9 + 1e6));
      }
    }
  }
}

TEST(DriverPerfCounters, TurnedOffEveryPhaseSaysSo) {
  std::array<uint64_t, kOpTypes> counts;
  Workload w = hand_made(2, &counts);
  BenchOptions o = quiet_options();
  o.perf_counters = false;
  IndexResult r;
  ASSERT_TRUE(run_benchmark(o, w, "absl-btree", &r, nullptr).ok());
  for (const PhaseResult* p : {&r.load, &r.run}) {
    for (const EventCount* e : {&p->cpu.instructions, &p->cpu.cycles, &p->cpu.task_clock}) {
      EXPECT_FALSE(e->available);
      EXPECT_EQ(e->value, 0u);
      EXPECT_NE(e->reason.find("--no-perf-counters"), std::string::npos) << e->reason;
    }
  }
  EXPECT_EQ(r.failures, 0u);
}

// --- energy (--energy) ----------------------------------------------------------

/// A fake powercap tree (the layout bench/energy.h reads): one package zone
/// at 1 J and its DRAM subzone at 0.25 J; removed by the destructor.
struct FakePowercapTree {
  std::filesystem::path root = std::filesystem::temp_directory_path() /
                               ("nvindex_driver_powercap_" + std::to_string(getpid()));
  FakePowercapTree() {
    std::filesystem::remove_all(root);
    zone("intel-rapl:0", "package-0", 1000000);
    zone("intel-rapl:0:0", "dram", 250000);
  }
  ~FakePowercapTree() { std::filesystem::remove_all(root); }
  void zone(const std::string& dir, const std::string& name, uint64_t uj) {
    std::filesystem::create_directories(root / dir);
    std::ofstream(root / dir / "name") << name << "\n";
    std::ofstream(root / dir / "energy_uj") << uj << "\n";
    std::ofstream(root / dir / "max_energy_range_uj") << 262143328850ull << "\n";
  }
};

TEST(DriverEnergy, EachPhaseReadsTheMeterOrSaysWhyNot) {
  std::array<uint64_t, kOpTypes> counts;
  Workload w = hand_made(2, &counts);
  BenchOptions o = quiet_options();
  IndexResult r;
  // Not asked for: no figure, no reason.
  ASSERT_TRUE(run_benchmark(o, w, "absl-btree", &r, nullptr).ok());
  EXPECT_FALSE(r.energy_measured);
  EXPECT_FALSE(r.load.energy.has_value());
  EXPECT_FALSE(r.run.energy.has_value());

  // No powercap tree: no figure in either phase, and the reason.
  o.energy = true;
  o.powercap_root = "/nonexistent/powercap";
  ASSERT_TRUE(run_benchmark(o, w, "absl-btree", &r, nullptr).ok());
  EXPECT_TRUE(r.energy_measured);
  EXPECT_NE(r.energy_why.find("no /nonexistent/powercap"), std::string::npos) << r.energy_why;
  EXPECT_FALSE(r.load.energy.has_value());
  EXPECT_FALSE(r.run.energy.has_value());
  EXPECT_EQ(r.failures, 0u);

  // A readable tree: each phase has a reading. The fake counters stand
  // still, so each phase spent exactly 0 J (a real meter's would grow).
  FakePowercapTree fake;
  o.powercap_root = fake.root.string();
  ASSERT_TRUE(run_benchmark(o, w, "absl-btree", &r, nullptr).ok());
  EXPECT_TRUE(r.energy_measured);
  EXPECT_EQ(r.energy_why, "");
  EXPECT_TRUE(r.energy_dram);
  for (const PhaseResult* p : {&r.load, &r.run}) {
    ASSERT_TRUE(p->energy.has_value());
    EXPECT_EQ(p->energy->package, 0.0);
    EXPECT_EQ(p->energy->dram, 0.0);
  }
  EXPECT_EQ(r.failures, 0u);
}

// --- string keys ---------------------------------------------------------------

/// A generated workload over string keys.
Workload string_workload(const char* preset, unsigned threads, uint32_t key_size = 24,
                         bool sequential = false) {
  WorkloadSpec spec;
  spec.records = 3000;
  spec.operations = 3000;
  spec.threads = threads;
  spec.key_type = KeyType::kString;
  spec.key_size = key_size;
  spec.sequential_keys = sequential;
  EXPECT_TRUE(apply_preset(preset, &spec).ok());
  Workload w;
  Status st = make_workload(spec, &w);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return w;
}

TEST(DriverStringKeys, GeneratedYcsbWorkloadsHaveNoFailuresAndTheLiarIsCaught) {
  for (const char* preset : {"ycsb-a", "ycsb-c", "ycsb-e", "ycsb-f", "delete"}) {
    for (unsigned threads : {1u, 2u}) {
      SCOPED_TRACE(std::string(preset) + " threads " + std::to_string(threads));
      const Workload w = string_workload(preset, threads);
      for (std::string_view index : string_key_indexes()) {
        if (is_test_only_index(index)) continue;
        IndexResult r;
        BenchOptions o = quiet_options();
        o.latency_sample = 0.01;
        Status st = run_benchmark(o, w, index, &r, nullptr);
        ASSERT_TRUE(st.ok()) << index << ": " << st.ToString();
        EXPECT_EQ(r.failures, 0u) << index << ": "
                                  << (r.failure_examples.empty() ? "" : r.failure_examples[0]);
        EXPECT_EQ(r.run.operations, w.total_operations());
        EXPECT_EQ(r.load.operations, w.load_keys.size());
        EXPECT_TRUE(r.structure.ok()) << r.structure.ToString();
        EXPECT_TRUE(r.info.caps.string_keys);
      }
      IndexResult lie;
      ASSERT_TRUE(run_benchmark(quiet_options(), w, "lying-test", &lie, nullptr).ok());
      EXPECT_GT(lie.failures, 0u);
    }
  }
}

TEST(DriverStringKeys, ShortSequentialKeysAndABulkLoadHaveNoFailures) {
  const Workload w = string_workload("ycsb-e", 1, 9, /*sequential=*/true);
  for (bool bulk : {false, true}) {
    IndexResult r;
    BenchOptions o = quiet_options();
    o.bulk_load = bulk;
    ASSERT_TRUE(run_benchmark(o, w, "absl-btree", &r, nullptr).ok());
    EXPECT_EQ(r.failures, 0u) << (r.failure_examples.empty() ? "" : r.failure_examples[0]);
    EXPECT_EQ(r.verify_report.keys,
              w.load_keys.size() + static_cast<uint64_t>(std::llround(0.05 * w.spec.operations)));
  }
}

TEST(DriverStringKeys, AnIndexWithoutStringKeysIsInvalidArgumentNamingThoseWith) {
  const Workload w = string_workload("ycsb-c", 1);
  for (const IndexEntry& e : registered_indexes()) {
    if (e.caps.string_keys) continue;
    IndexResult r;
    Status st = run_benchmark(quiet_options(), w, e.name, &r, nullptr);
    EXPECT_EQ(st.code(), Code::kInvalidArgument) << e.name;
    EXPECT_NE(st.message().find("does not take string keys"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("absl-btree"), std::string::npos) << st.message();
  }
  for (std::string_view n : string_key_indexes()) {
    EXPECT_NE(find_index_entry(n)->make_string, nullptr) << n;
  }
}

// Block-device indexes (issue 14): each runs in a fresh temporary directory
// under BenchOptions::device_dir, is synced after the run and reopened from
// its device path with every key, reports the process's CPU and context
// switches and the disk's I/O, and leaves nothing behind (keep_pool keeps
// it). Strong persistence (the default) fdatasyncs every write: the load's
// inserts are at least as many disk write requests (device-wide counters
// only add other processes' requests, so the bound cannot fail by noise).
TEST(Driver, BlockDeviceIndexesRunInATemporaryDirectoryAndRecover) {
  for (const char* name : {"leveldb", "rocksdb"}) {
    SCOPED_TRACE(name);
    util::TempDir dir(util::temp_device_dir(), "nvindex-driver-");
    ASSERT_TRUE(dir.ok()) << dir.error();
    std::array<uint64_t, kOpTypes> counts;
    Workload w = hand_made(2, &counts);
    BenchOptions o = quiet_options();
    o.device_dir = dir.path();
    IndexResult r;
    Status st = run_benchmark(o, w, name, &r, nullptr);
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(r.failures, 0u) << first_failure(r);
    EXPECT_TRUE(r.structure.ok()) << r.structure.ToString();
    EXPECT_TRUE(r.persistent);
    EXPECT_TRUE(r.sync.ok()) << r.sync.ToString();
    EXPECT_TRUE(r.recovery.ok()) << r.recovery.ToString();
    EXPECT_GT(r.recovery_seconds, 0.0);
    EXPECT_TRUE(r.device_path.starts_with(dir.path() + "/")) << r.device_path;
    EXPECT_TRUE(r.pool_path.empty());
    EXPECT_TRUE(std::filesystem::is_empty(dir.path())) << "the store is removed after the run";
    // Every write waits for the disk: the load blocked at least once.
    EXPECT_GT(r.load.process.voluntary_switches, 0u);
    EXPECT_GT(r.load.process.user_seconds + r.load.process.system_seconds, 0.0);
    EXPECT_GT(r.load.process.cores_used, 0.0);
    if (!r.disk_why.empty()) {
      EXPECT_FALSE(r.load.disk.has_value());
      continue;  // a machine without /sys/block counters
    }
    EXPECT_FALSE(r.disk.empty());
    ASSERT_TRUE(r.load.disk.has_value());
    ASSERT_TRUE(r.run.disk.has_value());
    EXPECT_GE(r.load.disk->writes, w.load_keys.size()) << "strong persistence syncs every insert";
    EXPECT_GE(r.load.disk->write_bytes, r.load.disk->writes * 512);
    EXPECT_GT(r.load.disk->iops, 0.0);
    EXPECT_GE(r.load.disk->mean_outstanding, 0.0);
  }
  // keep_pool keeps the store's directory.
  util::TempDir dir(util::temp_device_dir(), "nvindex-driver-");
  ASSERT_TRUE(dir.ok()) << dir.error();
  std::array<uint64_t, kOpTypes> counts;
  Workload w = hand_made(1, &counts);
  BenchOptions o = quiet_options();
  o.device_dir = dir.path();
  o.keep_pool = true;
  o.index_extra["persistence"] = "weak";
  IndexResult r;
  ASSERT_TRUE(run_benchmark(o, w, "leveldb", &r, nullptr).ok());
  EXPECT_EQ(r.failures, 0u) << first_failure(r);
  EXPECT_TRUE(r.recovery.ok()) << r.recovery.ToString();
  EXPECT_TRUE(std::filesystem::is_directory(r.device_path)) << r.device_path;
}

TEST(Driver, ADeviceDirectoryOnTmpfsIsRefused) {
  if (!util::on_tmpfs("/dev/shm")) GTEST_SKIP() << "/dev/shm is not tmpfs here";
  std::array<uint64_t, kOpTypes> counts;
  Workload w = hand_made(1, &counts);
  BenchOptions o = quiet_options();
  o.device_dir = "/dev/shm";
  IndexResult r;
  const Status st = run_benchmark(o, w, "leveldb", &r, nullptr);
  EXPECT_EQ(st.code(), Code::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find("tmpfs"), std::string::npos) << st.ToString();
}

// getrusage counts for every index, a volatile one included; no disk figure.
TEST(Driver, EveryIndexReportsProcessUsage) {
  const Workload w = preset_workload("ycsb-a", 20000, 200000, 1);
  IndexResult r;
  ASSERT_TRUE(run_benchmark(quiet_options(), w, "absl-btree", &r, nullptr).ok());
  EXPECT_GT(r.run.process.user_seconds, 0.0);
  EXPECT_GT(r.run.process.cores_used, 0.0);
  EXPECT_LT(r.run.process.cores_used, 64.0);
  EXPECT_FALSE(r.run.disk.has_value());
  EXPECT_TRUE(r.device_path.empty());
  EXPECT_TRUE(r.sync.ok());
}

}  // namespace
}  // namespace nvindex::bench
