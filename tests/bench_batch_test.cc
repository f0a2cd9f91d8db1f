// Tests of the driver's lookup batches (BenchOptions::lookup_batch, `nvindex
// bench --batch N`): runs of consecutive reads go to Index::multi_lookup in
// batches of up to N keys, cut by any other operation; every key is checked
// and counted as one read; a sampled batch records time / n per key. The
// batch-spy-test double (src/testing/batch_spy/) shows the batch sizes the
// index receives and, with lie=values, that a wrong multi_lookup result is a
// verification failure. Operations in flight (BenchOptions::in_flight,
// Index::execute) at the end. The command line's --batch checks are in
// tool_cli_test.
#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <string>

#include "bench/driver.h"
#include "bench/workload.h"
#include "nvindex/index.h"
#include "testing/batch_spy/batch_spy.h"
#include "testing/test_indexes.h"

// The test doubles this file uses (src/testing/test_indexes.h).
[[maybe_unused]] const bool kTestIndexesRegistered =
    (nvindex::test_indexes::register_test_indexes(), true);

namespace nvindex::bench {
namespace {

BenchOptions batch_options(uint32_t batch) {
  BenchOptions o;
  o.latency_sample = 1.0;  // every index call timed
  o.pm.mode = pm::Mode::kEmulated;
  o.lookup_batch = batch;
  return o;
}

Workload generated(const char* preset, uint64_t records, uint64_t operations, unsigned threads,
                   KeyType key_type = KeyType::kInteger) {
  WorkloadSpec spec;
  spec.records = records;
  spec.operations = operations;
  spec.threads = threads;
  spec.key_type = key_type;
  if (preset != nullptr) {
    EXPECT_TRUE(apply_preset(preset, &spec).ok()) << preset;
  }
  Workload w;
  const Status st = make_workload(spec, &w);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return w;
}

/// Operations of each type in all of w's streams.
std::array<uint64_t, kOpTypes> type_counts(const Workload& w) {
  std::array<uint64_t, kOpTypes> n{};
  for (const std::vector<Operation>& ops : w.per_thread) {
    for (const Operation& op : ops) ++n[static_cast<int>(op.type)];
  }
  return n;
}

/// The multi_lookup sizes a run of w with batch n must issue: every maximal
/// run of consecutive reads of each stream, cut into pieces of n keys and a
/// remainder (size -> calls).
std::map<size_t, uint64_t> expected_batches(const Workload& w, size_t n) {
  std::map<size_t, uint64_t> sizes;
  for (const std::vector<Operation>& ops : w.per_thread) {
    size_t run = 0;
    for (size_t i = 0; i <= ops.size(); ++i) {
      if (i < ops.size() && ops[i].type == OpType::kRead) {
        ++run;
        continue;
      }
      if (run >= n) sizes[n] += run / n;
      if (run % n != 0) ++sizes[run % n];
      run = 0;
    }
  }
  return sizes;
}

std::string first_failure(const IndexResult& r) {
  return r.failure_examples.empty() ? "" : r.failure_examples[0];
}

// (a) A read-only workload on btree with batch 8: no failures, one
// operation per key, every key timed (a timed batch records n samples).
TEST(DriverBatch, ReadOnlyBtreeBatch8HasNoFailuresAndCountsKeys) {
  for (unsigned threads : {1u, 2u}) {
    SCOPED_TRACE(threads);
    const Workload w = generated(nullptr, 5000, 5000, threads);  // default spec: 100% reads
    IndexResult r;
    ASSERT_TRUE(run_benchmark(batch_options(8), w, "btree", &r, nullptr).ok());
    EXPECT_EQ(r.failures, 0u) << first_failure(r);
    EXPECT_EQ(r.run.operations, w.total_operations());
    const TypeCounts& reads = r.by_type[static_cast<int>(OpType::kRead)];
    EXPECT_EQ(reads.completed, w.total_operations());
    EXPECT_EQ(reads.succeeded, w.total_operations());
    EXPECT_EQ(r.checked, w.load_keys.size() + w.total_operations() + 1);
    EXPECT_EQ(r.latency.samples, w.total_operations());
    EXPECT_LE(r.latency.min, r.latency.p50);
    EXPECT_LE(r.latency.p50, r.latency.max);
    EXPECT_EQ(std::accumulate(r.timeline.begin(), r.timeline.end(), uint64_t{0}), r.run.operations);
    EXPECT_TRUE(r.structure.ok()) << r.structure.ToString();
  }
}

TEST(DriverBatch, StringKeysBatch8HasNoFailures) {
  const Workload w = generated("ycsb-b", 3000, 3000, 2, KeyType::kString);
  IndexResult r;
  ASSERT_TRUE(run_benchmark(batch_options(8), w, "btree", &r, nullptr).ok());
  EXPECT_EQ(r.failures, 0u) << first_failure(r);
  EXPECT_EQ(r.run.operations, w.total_operations());
}

/// A one-thread stream of loaded-key reads in runs of 20, 1, 8 and 3, each
/// run followed by an update, over 100 loaded keys 1..100.
Workload read_runs() {
  Workload w;
  w.spec.name = "read-runs";
  w.spec.records = 100;
  for (uint64_t k = 1; k <= 100; ++k) w.load_keys.push_back(k);
  w.per_thread.resize(1);
  uint64_t key = 1;
  for (int run : {20, 1, 8, 3}) {
    for (int j = 0; j < run; ++j) {
      w.per_thread[0].push_back(Operation{key++, 0, OpType::kRead, Expect::kFound});
    }
    w.per_thread[0].push_back(Operation{key, 0, OpType::kUpdate, Expect::kFound});
  }
  w.spec.operations = w.total_operations();
  return w;
}

// (b) The index receives the batches: runs of 20, 1, 8, 3 reads with batch 8
// are calls of 8, 8, 4, 1, 8, 3 keys and no lookup(); batch 1 is lookup()
// per read and no multi_lookup.
TEST(DriverBatch, MultiLookupGetsTheRunsOfReadsCutIntoBatches) {
  const Workload w = read_runs();
  reset_batch_spy_log();
  IndexResult r;
  ASSERT_TRUE(run_benchmark(batch_options(8), w, "batch-spy-test", &r, nullptr).ok());
  EXPECT_EQ(r.failures, 0u) << first_failure(r);
  BatchSpyLog log = batch_spy_log();
  EXPECT_EQ(log.batch_sizes, (std::map<size_t, uint64_t>{{1, 1}, {3, 1}, {4, 1}, {8, 3}}));
  EXPECT_EQ(log.batch_sizes, expected_batches(w, 8));
  EXPECT_EQ(log.lookups, 0u);
  EXPECT_EQ(r.by_type[static_cast<int>(OpType::kRead)].completed, 32u);
  EXPECT_EQ(r.by_type[static_cast<int>(OpType::kUpdate)].completed, 4u);
  EXPECT_EQ(r.latency.samples, 36u) << "one sample per key and per update";

  reset_batch_spy_log();
  ASSERT_TRUE(run_benchmark(batch_options(1), w, "batch-spy-test", &r, nullptr).ok());
  EXPECT_EQ(r.failures, 0u) << first_failure(r);
  log = batch_spy_log();
  EXPECT_TRUE(log.batch_sizes.empty());
  EXPECT_EQ(log.lookups, 32u);
}

// (b) A wrong value from multi_lookup is a verification failure, one per
// falsified value, with a single lookup's message; with batch 1 the same
// double (whose lookup() is honest) has none, so the failures come from the
// batches.
TEST(DriverBatch, AWrongMultiLookupResultIsAFailure) {
  for (unsigned threads : {1u, 2u}) {
    SCOPED_TRACE(threads);
    const Workload w = generated("ycsb-c", 2000, 4000, threads);
    BenchOptions o = batch_options(8);
    o.index_extra = {{"lie", "values"}};
    reset_batch_spy_log();
    IndexResult r;
    ASSERT_TRUE(run_benchmark(o, w, "batch-spy-test", &r, nullptr).ok());
    const BatchSpyLog log = batch_spy_log();
    EXPECT_EQ(log.batch_sizes, expected_batches(w, 8));
    EXPECT_GT(log.lies, 0u);
    EXPECT_EQ(r.failures, log.lies);
    ASSERT_FALSE(r.failure_examples.empty());
    EXPECT_NE(r.failure_examples[0].find(": read key "), std::string::npos) << first_failure(r);
    EXPECT_NE(r.failure_examples[0].find("wrong value 0x"), std::string::npos) << first_failure(r);
    const TypeCounts& reads = r.by_type[static_cast<int>(OpType::kRead)];
    EXPECT_EQ(reads.completed, w.total_operations());
    EXPECT_EQ(reads.succeeded, w.total_operations() - log.lies);

    o.lookup_batch = 1;
    reset_batch_spy_log();
    ASSERT_TRUE(run_benchmark(o, w, "batch-spy-test", &r, nullptr).ok());
    EXPECT_EQ(r.failures, 0u) << first_failure(r);
    EXPECT_EQ(batch_spy_log().lies, 0u);
  }
}

// (c) Mixed workloads with batch 4: batches cut by updates, inserts, scans
// and read-modify-writes, every count per type as in the stream, no failure.
TEST(DriverBatch, MixedWorkloadsBatch4HaveNoFailures) {
  for (const char* preset : {"ycsb-a", "ycsb-b", "ycsb-d", "ycsb-e", "ycsb-f"}) {
    for (unsigned threads : {1u, 2u}) {
      SCOPED_TRACE(std::string(preset) + " threads " + std::to_string(threads));
      const Workload w = generated(preset, 3000, 3000, threads);
      const std::array<uint64_t, kOpTypes> want = type_counts(w);
      for (const char* index : {"btree", "absl-btree", "batch-spy-test"}) {
        SCOPED_TRACE(index);
        BenchOptions o = batch_options(4);
        o.latency_sample = 0.1;
        reset_batch_spy_log();
        IndexResult r;
        ASSERT_TRUE(run_benchmark(o, w, index, &r, nullptr).ok());
        EXPECT_EQ(r.failures, 0u) << first_failure(r);
        EXPECT_EQ(r.run.operations, w.total_operations());
        for (int k = 0; k < kOpTypes; ++k) {
          EXPECT_EQ(r.by_type[k].completed, want[k]) << op_name(static_cast<OpType>(k));
        }
        EXPECT_TRUE(r.structure.ok()) << r.structure.ToString();
        if (std::string_view(index) == "batch-spy-test") {
          const BatchSpyLog log = batch_spy_log();
          EXPECT_EQ(log.batch_sizes, expected_batches(w, 4));
          if (want[static_cast<int>(OpType::kRead)] > 0) {
            EXPECT_GT(log.batch_sizes.begin()->second, 0u);
          }
        }
      }
    }
  }
}

// A duration stops batched threads too (the clock is checked whenever the
// operation index passes a multiple of 256), with consistent counts.
TEST(DriverBatch, DurationStopsBatchedThreads) {
  const Workload w = generated(nullptr, 1000, 2'000'000, 2);
  BenchOptions o = batch_options(16);
  o.latency_sample = 0.01;
  o.duration_seconds = 1e-9;  // expired before the first clock check
  IndexResult r;
  ASSERT_TRUE(run_benchmark(o, w, "absl-btree", &r, nullptr).ok());
  EXPECT_LT(r.run.operations, w.total_operations());
  EXPECT_EQ(r.by_type[static_cast<int>(OpType::kRead)].completed, r.run.operations);
  EXPECT_EQ(r.failures, 0u) << first_failure(r);
}

TEST(DriverBatch, BatchOutsideOneTo4096IsInvalidArgument) {
  const Workload w = generated(nullptr, 100, 100, 1);
  for (uint32_t bad : {0u, kMaxLookupBatch + 1}) {
    IndexResult r;
    const Status st = run_benchmark(batch_options(bad), w, "btree", &r, nullptr);
    EXPECT_EQ(st.code(), Code::kInvalidArgument) << bad;
    EXPECT_NE(st.message().find("lookup batch must be in 1..4096"), std::string::npos)
        << st.ToString();
  }
  IndexResult r;
  ASSERT_TRUE(run_benchmark(batch_options(kMaxLookupBatch), w, "btree", &r, nullptr).ok());
  EXPECT_EQ(r.failures, 0u) << first_failure(r);
}

// Operations in flight (BenchOptions::in_flight, Index::execute): mixed
// workloads, scans and read-modify-writes included (they run alone), give
// every count per type as in the stream and no failure, through an index
// with the default execute() (absl-btree: one by one) and one that keeps
// the batch in flight (patree: its engine, per-key order). Every operation
// has its own latency (sampling 1.0: one sample per operation).
TEST(DriverInFlight, MixedWorkloadsHaveNoFailures) {
  for (const char* preset : {"ycsb-a", "ycsb-e", "ycsb-f"}) {
    const Workload w = generated(preset, 1000, 2000, 1);
    const std::array<uint64_t, kOpTypes> want = type_counts(w);
    for (const char* index : {"absl-btree", "patree"}) {
      SCOPED_TRACE(std::string(preset) + " " + index);
      BenchOptions o = batch_options(1);
      o.in_flight = 8;
      IndexResult r;
      const Status st = run_benchmark(o, w, index, &r, nullptr);
      ASSERT_TRUE(st.ok()) << st.ToString();
      EXPECT_EQ(r.failures, 0u) << first_failure(r);
      EXPECT_EQ(r.run.operations, w.total_operations());
      for (int k = 0; k < kOpTypes; ++k) {
        EXPECT_EQ(r.by_type[k].completed, want[k]) << op_name(static_cast<OpType>(k));
      }
      EXPECT_EQ(r.latency.samples, w.total_operations());
      EXPECT_TRUE(r.structure.ok()) << r.structure.ToString();
      EXPECT_GT(r.checked, w.total_operations());
    }
  }
}

TEST(DriverInFlight, BadValuesAndPmIndexesAreInvalidArgument) {
  const Workload w = generated(nullptr, 100, 100, 1);
  auto refused = [&](uint32_t in_flight, uint32_t batch, const char* index, const char* why) {
    BenchOptions o = batch_options(batch);
    o.in_flight = in_flight;
    IndexResult r;
    const Status st = run_benchmark(o, w, index, &r, nullptr);
    EXPECT_EQ(st.code(), Code::kInvalidArgument) << in_flight << " " << index;
    EXPECT_NE(st.message().find(why), std::string::npos) << st.ToString();
  };
  refused(0, 1, "absl-btree", "operations in flight must be in 1..4096");
  refused(kMaxInFlight + 1, 1, "absl-btree", "operations in flight must be in 1..4096");
  refused(4, 4, "absl-btree", "choose one");
  refused(4, 1, "fastfair", "make no PM writes");
}

}  // namespace
}  // namespace nvindex::bench
