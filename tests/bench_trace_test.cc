// Tests for the index-microbench trace reader (src/bench/trace.h) and for
// trace workloads (make_workload with trace_load / trace_run): the real YCSB
// samples in shared/data/ycsb, malformed files, and the expectations computed
// by replaying a trace with one and with several threads.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <unordered_set>
#include <vector>

#include "bench/driver.h"
#include "bench/trace.h"
#include "bench/workload.h"
#include "nvindex/index.h"

namespace nvindex::bench {
namespace {

/// The shared data directory: $NVINDEX_DATA (set by CMake for tests), else
/// ../shared/data relative to the source tree.
std::string data_dir() {
  if (const char* env = std::getenv("NVINDEX_DATA"); env != nullptr && *env != '\0') return env;
  std::string here = __FILE__;                                 // <src>/tests/bench_trace_test.cc
  here = here.substr(0, here.rfind('/'));                      // <src>/tests
  return here.substr(0, here.rfind('/')) + "/../shared/data";  // <src>/../shared/data
}

std::string ycsb(const std::string& name) { return data_dir() + "/ycsb/" + name; }

std::string write_file(const std::string& name, const std::string& text) {
  const std::string path =
      ::testing::TempDir() + "nvindex_trace_" + std::to_string(::getpid()) + "_" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

std::map<TraceVerb, uint64_t> verb_counts(const std::vector<TraceOp>& ops) {
  std::map<TraceVerb, uint64_t> c;
  for (const TraceOp& op : ops) ++c[op.verb];
  return c;
}

// --- the real samples ---------------------------------------------------------

TEST(TraceReader, RealSamplesMatchGrepCounts) {
  std::vector<TraceOp> ops;
  // Expected counts are `grep -c '^VERB ' <file>` on the committed samples.
  Status s = read_trace(ycsb("txn_randint_workloada"), false, &ops);
  ASSERT_TRUE(s.ok()) << s.ToString() << " (data dir " << data_dir() << ")";
  auto c = verb_counts(ops);
  EXPECT_EQ(ops.size(), 10000u);
  EXPECT_EQ(c[TraceVerb::kRead], 4989u);
  EXPECT_EQ(c[TraceVerb::kUpdate], 5011u);
  EXPECT_EQ(ops[0].verb, TraceVerb::kRead);
  EXPECT_EQ(ops[0].key, 356684817142765603ull);
  EXPECT_EQ(ops[1].verb, TraceVerb::kUpdate);
  EXPECT_EQ(ops[1].key, 628189298418143201ull);

  ASSERT_TRUE(read_trace(ycsb("txn_randint_workloadc"), false, &ops).ok());
  c = verb_counts(ops);
  EXPECT_EQ(c[TraceVerb::kRead], 10000u);
  EXPECT_EQ(c.size(), 1u);

  ASSERT_TRUE(read_trace(ycsb("txn_randint_workloade"), false, &ops).ok());
  c = verb_counts(ops);
  EXPECT_EQ(c[TraceVerb::kScan], 9486u);
  EXPECT_EQ(c[TraceVerb::kInsert], 514u);
  EXPECT_EQ(ops[0].key, 8445642882264147041ull);
  EXPECT_EQ(ops[0].count, 70u);
  for (const TraceOp& op : ops) {
    if (op.verb == TraceVerb::kScan) {
      EXPECT_GE(op.count, 1u);
      EXPECT_LE(op.count, 100u);
    } else {
      EXPECT_EQ(op.count, 0u);
    }
  }

  for (const char* load :
       {"load_randint_workloada", "load_randint_workloadc", "load_randint_workloade"}) {
    ASSERT_TRUE(read_trace(ycsb(load), true, &ops).ok()) << load;
    EXPECT_EQ(ops.size(), 10000u);
    EXPECT_EQ(verb_counts(ops)[TraceVerb::kInsert], 10000u);
  }
  EXPECT_EQ(ops[0].key, 6284781860667377211ull);
}

TEST(TraceReader, RunFileIsNotALoadFile) {
  std::vector<TraceOp> ops;
  Status s = read_trace(ycsb("txn_randint_workloada"), true, &ops);
  EXPECT_EQ(s.code(), Code::kCorruption);
  EXPECT_NE(s.message().find("txn_randint_workloada:1: expected INSERT"), std::string::npos)
      << s.message();
  EXPECT_TRUE(ops.empty());
}

TEST(TraceWorkload, YcsbASingleThreadAllFound) {
  WorkloadSpec spec;
  spec.trace_load = ycsb("load_randint_workloada");
  spec.trace_run = ycsb("txn_randint_workloada");
  Workload w;
  Status s = make_workload(spec, &w);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(w.spec.name, "trace");
  EXPECT_EQ(w.load_keys.size(), 10000u);
  EXPECT_EQ(w.duplicate_keys, 0u);
  EXPECT_EQ(w.spec.records, 10000u);
  EXPECT_EQ(w.spec.operations, 10000u);
  EXPECT_NEAR(w.spec.read_ratio, 0.4989, 1e-12);
  EXPECT_NEAR(w.spec.update_ratio, 0.5011, 1e-12);
  ASSERT_EQ(w.per_thread.size(), 1u);
  for (const Operation& op : w.per_thread[0]) {
    EXPECT_TRUE(op.type == OpType::kRead || op.type == OpType::kUpdate);
    EXPECT_EQ(op.expect, Expect::kFound);  // every key of the sample is loaded
  }
}

TEST(TraceWorkload, YcsbEFourThreadsRoundRobinInOrder) {
  WorkloadSpec spec;
  spec.threads = 4;
  spec.trace_load = ycsb("load_randint_workloade");
  spec.trace_run = ycsb("txn_randint_workloade");
  Workload w;
  ASSERT_TRUE(make_workload(spec, &w).ok());
  std::vector<TraceOp> run;
  ASSERT_TRUE(read_trace(spec.trace_run, false, &run).ok());
  ASSERT_EQ(w.per_thread.size(), 4u);
  EXPECT_EQ(w.total_operations(), run.size());
  for (size_t i = 0; i < run.size(); ++i) {
    const Operation& op = w.per_thread[i % 4][i / 4];
    EXPECT_EQ(op.key, run[i].key);
    EXPECT_EQ(op.type, run[i].verb == TraceVerb::kScan ? OpType::kScan : OpType::kInsert);
    EXPECT_EQ(op.scan_length, run[i].count);
    // The sample's inserts are fresh keys and every scan starts below the
    // largest loaded key, so every outcome is certain even with 4 threads.
    EXPECT_EQ(op.expect, Expect::kFound) << "op " << i;
  }
}

// --- malformed files ----------------------------------------------------------

TEST(TraceReader, MalformedLinesAreCorruptionWithLineNumber) {
  struct Case {
    const char* text;
    bool load;
    const char* needle;
  };
  const Case cases[] = {
      {"READ 1\nREAD 2\nDELETE 3\n", false, "unknown verb 'DELETE'"},
      {"READ 1\nREAD 2\nREAD\n", false, "expected a key"},
      {"READ 1\nREAD 2\nREAD 12x\n", false, "expected a decimal uint64 key"},
      {"READ 1\nREAD 2\nREAD user6284781860667377211\n", false, "pass --key-type string"},
      {"READ 1\nREAD 2\nREAD 18446744073709551616\n", false, "decimal uint64"},
      {"READ 1\nREAD 2\nSCAN 5\n", false, "no count"},
      {"READ 1\nREAD 2\nSCAN 5 0\n", false, "scan count"},
      {"READ 1\nREAD 2\nSCAN 5 x\n", false, "scan count"},
      {"READ 1\nREAD 2\nREAD 5 6\n", false, "expected end of line"},
      {"READ 1\nREAD 2\nSCAN 5 6 7\n", false, "expected end of line"},
      {"INSERT 1\nINSERT 2\nREAD 3\n", true, "expected INSERT <key> in a load file"},
      {"INSERT 1\nINSERT 2\ninsert 3\n", true, "unknown verb"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    const std::string path = write_file("bad", c.text);
    std::vector<TraceOp> ops;
    Status s = read_trace(path, c.load, &ops);
    EXPECT_EQ(s.code(), Code::kCorruption);
    EXPECT_NE(s.message().find(path + ":3: expected"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(c.needle), std::string::npos) << s.message();
    EXPECT_TRUE(ops.empty());
    std::remove(path.c_str());
  }
}

TEST(TraceReader, BlankLinesCrlfAndTabsAreAccepted) {
  const std::string path = write_file("crlf", "\r\nINSERT\t7\r\n\nSCAN 3  2\r\n  READ 9 \n");
  std::vector<TraceOp> ops;
  Status s = read_trace(path, false, &ops);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(ops.size(), 3u);
  EXPECT_EQ(ops[0].verb, TraceVerb::kInsert);
  EXPECT_EQ(ops[0].key, 7u);
  EXPECT_EQ(ops[1].verb, TraceVerb::kScan);
  EXPECT_EQ(ops[1].count, 2u);
  EXPECT_EQ(ops[2].key, 9u);
  EXPECT_EQ(trace_verb_name(TraceVerb::kScan), "SCAN");
  std::remove(path.c_str());
}

TEST(TraceReader, MissingFileIsNotFoundNamingPath) {
  std::vector<TraceOp> ops;
  const std::string path = data_dir() + "/ycsb/no_such_trace";
  Status s = read_trace(path, false, &ops);
  EXPECT_EQ(s.code(), Code::kNotFound);
  EXPECT_NE(s.message().find(path), std::string::npos);
  WorkloadSpec spec;
  spec.trace_run = path;
  Workload w;
  EXPECT_EQ(make_workload(spec, &w).code(), Code::kNotFound);
}

// --- expectations from replaying a trace -------------------------------------

TEST(TraceWorkload, SingleThreadReplayIsExact) {
  const std::string load = write_file("load1", "INSERT 10\nINSERT 20\nINSERT 10\nINSERT 30\n");
  const std::string run = write_file("run1",
                                     "READ 10\n"      // loaded
                                     "READ 15\n"      // never present
                                     "INSERT 15\n"    // fresh
                                     "UPDATE 15\n"    // inserted earlier
                                     "INSERT 20\n"    // loaded: AlreadyExists
                                     "INSERT 15\n"    // inserted earlier: AlreadyExists
                                     "SCAN 31 5\n"    // nothing >= 31 yet
                                     "SCAN 30 5\n"    // 30 is loaded
                                     "INSERT 40\n"    // fresh
                                     "SCAN 31 5\n");  // 40 now present
  WorkloadSpec spec;
  spec.trace_load = load;
  spec.trace_run = run;
  Workload w;
  ASSERT_TRUE(make_workload(spec, &w).ok());
  EXPECT_EQ(w.load_keys, (std::vector<uint64_t>{10, 20, 30}));
  EXPECT_EQ(w.duplicate_keys, 1u);
  const std::vector<Expect> want = {
      Expect::kFound,    Expect::kNotFound, Expect::kFound, Expect::kFound, Expect::kNotFound,
      Expect::kNotFound, Expect::kAny,      Expect::kFound, Expect::kFound, Expect::kFound};
  ASSERT_EQ(w.per_thread[0].size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(static_cast<int>(w.per_thread[0][i].expect), static_cast<int>(want[i])) << "op " << i;
  }
  EXPECT_EQ(w.per_thread[0][6].scan_length, 5u);
  std::remove(load.c_str());
  std::remove(run.c_str());
}

TEST(TraceWorkload, TwoThreadsMarkRacesAsAny) {
  const std::string load = write_file("load2", "INSERT 10\n");
  // Op i runs on thread i % 2.
  const std::string run = write_file("run2",
                                     "INSERT 50\n"    // t0: only t0 inserts 50 -> Found
                                     "READ 50\n"      // t1: t0 inserted it -> Any
                                     "READ 50\n"      // t0: own insert earlier -> Found
                                     "READ 60\n"      // t1: only t1 inserts 60, later -> NotFound
                                     "READ 70\n"      // t0: t1 inserts 70 later -> Any
                                     "INSERT 60\n"    // t1: Found
                                     "INSERT 80\n"    // t0: 80 also inserted by t1 -> Any
                                     "INSERT 70\n"    // t1: Found (only t1 inserts 70)
                                     "READ 99\n"      // t0: nobody inserts 99 -> NotFound
                                     "INSERT 80\n"    // t1: raced with t0 -> Any
                                     "INSERT 80\n"    // t0: t0 inserted 80 before -> NotFound
                                     "SCAN 55 3\n"    // t1: t1 inserted 60, 70 -> Found
                                     "SCAN 90 3\n"    // t0: nothing surely >= 90 -> Any
                                     "UPDATE 10\n");  // t1: loaded -> Found
  WorkloadSpec spec;
  spec.threads = 2;
  spec.trace_load = load;
  spec.trace_run = run;
  Workload w;
  ASSERT_TRUE(make_workload(spec, &w).ok());
  const std::vector<Expect> want = {
      Expect::kFound,    Expect::kAny,   Expect::kFound, Expect::kNotFound, Expect::kAny,
      Expect::kFound,    Expect::kAny,   Expect::kFound, Expect::kNotFound, Expect::kAny,
      Expect::kNotFound, Expect::kFound, Expect::kAny,   Expect::kFound};
  ASSERT_EQ(w.total_operations(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(static_cast<int>(w.per_thread[i % 2][i / 2].expect), static_cast<int>(want[i]))
        << "op " << i;
  }
  std::remove(load.c_str());
  std::remove(run.c_str());
}

TEST(TraceWorkload, RunWithoutLoadAndKeysFileConflict) {
  const std::string run = write_file("run3", "INSERT 5\nREAD 5\n");
  WorkloadSpec spec;
  spec.records = 0;  // allowed for traces
  spec.trace_run = run;
  Workload w;
  ASSERT_TRUE(make_workload(spec, &w).ok());
  EXPECT_TRUE(w.load_keys.empty());
  EXPECT_EQ(w.per_thread[0][0].expect, Expect::kFound);
  EXPECT_EQ(w.per_thread[0][1].expect, Expect::kFound);
  spec.keys_file = run;
  Status s = make_workload(spec, &w);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("keys_file"), std::string::npos);
  spec.keys_file.clear();
  spec.threads = 0;
  EXPECT_EQ(make_workload(spec, &w).code(), Code::kInvalidArgument);
  std::remove(run.c_str());
}

// --- string keys ---------------------------------------------------------------

TEST(StringTrace, RealSamplesReadAsStringsAndRefusedAsNumbers) {
  std::vector<TraceOp> ops;
  Status s = read_trace(ycsb("load_string_workloada"), true, &ops);
  EXPECT_EQ(s.code(), Code::kCorruption);
  EXPECT_NE(s.message().find(":1: "), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("pass --key-type string"), std::string::npos) << s.message();
  StringKeyInterner in;
  s = read_trace(ycsb("txn_string_workloada"), false, &ops, &in);
  ASSERT_TRUE(s.ok()) << s.ToString();
  auto c = verb_counts(ops);
  EXPECT_EQ(ops.size(), 10000u);
  EXPECT_EQ(c[TraceVerb::kRead] + c[TraceVerb::kUpdate], 10000u);
  std::vector<std::string> table;
  const std::vector<uint64_t> remap = in.finish(&table);
  ASSERT_FALSE(table.empty());
  EXPECT_TRUE(std::is_sorted(table.begin(), table.end()));
  for (const std::string& k : table) {
    EXPECT_EQ(k.substr(0, 4), "user");
    EXPECT_GE(k.size(), 5u);
    EXPECT_LE(k.size(), 24u);
  }
  // The first line of the file.
  EXPECT_EQ(ops[0].verb, TraceVerb::kUpdate);
  EXPECT_EQ(table[remap[ops[0].key] - 1], "user5247664635010229000");
}

/// The workload of a shared trace pair over `threads` threads
/// (make_workload's status): load_randint_<w> / txn_randint_<w> for integer
/// keys, load_string_<w> / txn_string_<w> for string keys.
Status make_shared_trace(KeyType kt, const char* w, unsigned threads, Workload* out) {
  const std::string kind = kt == KeyType::kString ? "string_" : "randint_";
  WorkloadSpec spec;
  spec.threads = threads;
  spec.key_type = kt;
  spec.trace_load = ycsb("load_" + kind + w);
  spec.trace_run = ycsb("txn_" + kind + w);
  return make_workload(spec, out);
}
Status make_string_trace(const char* w, unsigned threads, Workload* out) {
  return make_shared_trace(KeyType::kString, w, threads, out);
}

// One thread: every expectation is exact, and checked here against a replay
// over the strings themselves (std::set<std::string>, byte order), so rank
// ids must order as their strings do for the scans to agree.
TEST(StringTrace, WorkloadIdsAreByteOrderRanksAndExpectationsMatchAStringReplay) {
  for (const char* w : {"workloada", "workloadc", "workloade"}) {
    SCOPED_TRACE(w);
    Workload sw;
    Status s = make_string_trace(w, 1, &sw);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(sw.load_keys.size(), 10000u);
    EXPECT_EQ(sw.total_operations(), 10000u);
    EXPECT_TRUE(std::is_sorted(sw.key_strings.begin(), sw.key_strings.end()));
    EXPECT_EQ(std::adjacent_find(sw.key_strings.begin(), sw.key_strings.end()),
              sw.key_strings.end());
    const StringKeyNames names = sw.string_key_names();
    std::set<std::string> present;
    for (uint64_t id : sw.load_keys) {
      ASSERT_GE(id, 1u);
      ASSERT_LE(id, sw.key_strings.size());
      present.insert(names.key_of(id));
    }
    EXPECT_EQ(present.size(), 10000u);
    uint64_t scans = 0;
    for (const Operation& op : sw.per_thread[0]) {
      const std::string key = names.key_of(op.key);
      const bool here = present.count(key) > 0;
      switch (op.type) {
        case OpType::kRead:
        case OpType::kUpdate:
          EXPECT_EQ(op.expect, here ? Expect::kFound : Expect::kNotFound) << key;
          break;
        case OpType::kInsert:
          EXPECT_EQ(op.expect, here ? Expect::kNotFound : Expect::kFound) << key;
          present.insert(key);
          break;
        case OpType::kScan:
          ++scans;
          EXPECT_EQ(op.expect,
                    present.lower_bound(key) != present.end() ? Expect::kFound : Expect::kAny)
              << key;
          break;
        default:
          ADD_FAILURE() << "unexpected op type";
      }
    }
    if (std::string(w) == "workloade") {
      EXPECT_GT(scans, 9000u);
    }
  }
}

// The shared samples (workloads A, C, E; E's scans skipped, and counted, on
// an unordered index) replayed by the driver on every
// registered index that takes the key type (test doubles excluded) at 1 and
// 2 threads, and with integer keys on each non-default value of each option
// an index declares (inner=dram): zero verification failures
// (bench_driver_test shows the same checks catch lying-test). A block-device
// index that declares persistence=strong|weak (leveldb, rocksdb) replays
// weak only: strong fdatasyncs each of a replay's 10,000 inserts (3 s a
// replay, a minute for the twelve), and the results the driver checks do
// not depend on it (bench_driver_test runs strong).
void replay_shared_samples(KeyType kt) {
  std::vector<std::pair<std::string, std::map<std::string, std::string>>> cases;
  for (const IndexEntry& e : registered_indexes()) {
    if ((kt == KeyType::kInteger || e.caps.string_keys) && !is_test_only_index(e.name)) {
      bool weak_only = false;
      for (const OptionSpec& opt : e.options) {
        weak_only |= needs_device(e.caps) && opt.name == "persistence";
      }
      if (weak_only) {
        cases.emplace_back(std::string(e.name),
                           std::map<std::string, std::string>{{"persistence", "weak"}});
        continue;
      }
      cases.emplace_back(std::string(e.name), std::map<std::string, std::string>{});
      if (kt != KeyType::kInteger) continue;
      for (const OptionSpec& opt : e.options) {
        for (size_t v = 1; v < opt.values.size(); ++v) {  // values[0] is the default
          cases.emplace_back(std::string(e.name),
                             std::map<std::string, std::string>{
                                 {std::string(opt.name), std::string(opt.values[v])}});
        }
      }
    }
  }
  ASSERT_GE(cases.size(), 4u);  // absl-btree, btree, fastfair, p-masstree at least
  for (const auto& [name, extra] : cases) {
    std::string label = name;
    for (const auto& [k, v] : extra) label += ":" + k + "=" + v;
    for (const char* w : {"workloada", "workloadc", "workloade"}) {
      for (unsigned threads : {1u, 2u}) {
        SCOPED_TRACE(label + " " + w + " threads " + std::to_string(threads));
        Workload wl;
        Status s = make_shared_trace(kt, w, threads, &wl);
        ASSERT_TRUE(s.ok()) << s.ToString();
        BenchOptions o;
        o.pm.mode = pm::Mode::kEmulated;
        o.index_extra = extra;
        IndexResult r;
        s = run_benchmark(o, wl, name, &r, nullptr);
        ASSERT_TRUE(s.ok()) << s.ToString();
        EXPECT_EQ(r.failures, 0u) << (r.failure_examples.empty() ? "" : r.failure_examples[0]);
        EXPECT_EQ(r.load.operations, 10000u);
        // An unordered index (dash-eh) skips workload E's scans, and says so.
        EXPECT_EQ(r.run.operations + r.skipped, 10000u);
        if (find_index_entry(name)->caps.ordered) {
          EXPECT_EQ(r.skipped, 0u);
        }
        EXPECT_TRUE(r.structure.ok());
        EXPECT_GE(r.verify_report.keys, 10000u);
      }
    }
  }
}

TEST(StringTrace, SharedSamplesReplayWithoutFailures) { replay_shared_samples(KeyType::kString); }

TEST(IntegerTrace, SharedSamplesReplayWithoutFailures) { replay_shared_samples(KeyType::kInteger); }

TEST(StringKeysFile, WordsWithDuplicatesAndATooLongLine) {
  const std::string path =
      write_file("words", "zebra\ncaf\xc3\xa9\nApple\r\n\nzebra\n  spaced  \n");
  std::vector<uint64_t> ids;
  uint64_t dups = 0;
  StringKeyInterner in;
  Status s = read_keys_file(path, &ids, &dups, &in);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(ids.size(), 4u);
  EXPECT_EQ(dups, 1u);
  std::vector<std::string> table;
  const std::vector<uint64_t> remap = in.finish(&table);
  EXPECT_EQ(table, (std::vector<std::string>{"  spaced  ", "Apple", "caf\xc3\xa9", "zebra"}));
  EXPECT_EQ(table[remap[ids[0]] - 1], "zebra");
  const std::string ok255 = std::string(255, 'y');
  const std::string long_path =
      write_file("long-words", "a\n" + ok255 + "\nb\n" + std::string(256, 'z') + "\n");
  StringKeyInterner in2;
  s = read_keys_file(long_path, &ids, &dups, &in2);
  EXPECT_EQ(s.code(), Code::kCorruption);
  EXPECT_NE(s.message().find(long_path + ":4: key of 256 bytes is longer than 255"),
            std::string::npos)
      << s.message();
  EXPECT_TRUE(ids.empty());
  std::remove(path.c_str());
  std::remove(long_path.c_str());
}

}  // namespace
}  // namespace nvindex::bench
