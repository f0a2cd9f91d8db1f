// Tests of the `nvindex` command line (src/tools/{bench,verify,info}.cc): runs
// the binary named by $NVINDEX_BIN and checks exit codes (0 ok, 1 failed
// check, 2 usage), error messages, the JSON report's schema, and a trace run
// over the shared YCSB samples ($NVINDEX_DATA/ycsb); and scripts/plot.py
// --tpcc (make bench's TPC-C section) over two nvindex tpcc reports.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "nvindex/index.h"
#include "util/temp_files.h"

namespace {

namespace fs = std::filesystem;

struct Outcome {
  int rc = -1;
  std::string out;
  std::string err;
};

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string tmp_path(const std::string& name) {
  return ::testing::TempDir() + "nvindex-cli-" + std::to_string(getpid()) + "-" + name;
}

/// Runs `$NVINDEX_BIN args` through the shell, capturing stdout and stderr;
/// with `timeout_s` > 0 under `timeout` (rc 124 when it had to stop it) and
/// with stdin from /dev/null.
Outcome nvindex(const std::string& args, int timeout_s = 0) {
  const char* bin = std::getenv("NVINDEX_BIN");
  Outcome r;
  if (bin == nullptr) return r;
  const std::string out = tmp_path("stdout"), err = tmp_path("stderr");
  const std::string cmd =
      (timeout_s > 0 ? "timeout " + std::to_string(timeout_s) + " " : std::string()) +
      std::string(bin) + " " + args + " >" + out + " 2>" + err +
      (timeout_s > 0 ? " </dev/null" : "");
  const int status = std::system(cmd.c_str());
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(out);
  r.err = slurp(err);
  fs::remove(out);
  fs::remove(err);
  return r;
}

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::getenv("NVINDEX_BIN") == nullptr) GTEST_SKIP() << "NVINDEX_BIN not set";
  }
};

constexpr char kSmall[] = " --quiet -n 2000 -p 2000 ";

// Block-device indexes (issue 14): --device is a directory on a real disk;
// tmpfs, a missing directory and a bad --device-bytes are usage errors; a run
// reports the process's CPU and context switches for every index and the
// disk's I/O for a block-device one, and leaves nothing behind.
TEST_F(Cli, BenchDeviceOptionsAndTheirReports) {
  if (nvindex::util::on_tmpfs("/dev/shm")) {
    Outcome r = nvindex("bench --index leveldb --device /dev/shm" + std::string(kSmall));
    EXPECT_EQ(r.rc, 2) << r.err;
    EXPECT_NE(r.err.find("tmpfs"), std::string::npos) << r.err;
  }
  Outcome r = nvindex("bench --index leveldb --device /no/such/dir" + std::string(kSmall));
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_NE(r.err.find("--device: /no/such/dir: its directory /no/such does not exist"),
            std::string::npos)
      << r.err;
  r = nvindex("bench --index leveldb --device-bytes 12Q" + std::string(kSmall));
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_NE(r.err.find("--device-bytes"), std::string::npos) << r.err;

  nvindex::util::TempDir dir(nvindex::util::temp_device_dir(), "nvindex-cli-");
  ASSERT_TRUE(dir.ok()) << dir.error();
  const std::string json = tmp_path("device.json");
  r = nvindex("bench --index leveldb:persistence=weak,rocksdb,absl-btree --device " + dir.path() +
              " --quiet -n 300 -p 300 --workload ycsb-a --json-output " + json);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("mean outstanding I/Os"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("cores used"), std::string::npos) << r.out;
  const nlohmann::json j = nlohmann::json::parse(slurp(json));
  fs::remove(json);
  EXPECT_EQ(j["options"]["device_dir"], dir.path());
  for (const auto& x : j["results"]) {
    SCOPED_TRACE(x["index"].get<std::string>());
    for (const char* phase : {"load", "run"}) {
      const auto& p = x[phase]["process"];
      EXPECT_GE(p["cores_used"].get<double>(), 0.0);
      EXPECT_TRUE(p.contains("voluntary_switches"));
      EXPECT_TRUE(p.contains("involuntary_switches"));
    }
    EXPECT_EQ(x["sync"], "ok");
    if (x["index_name"] == "absl-btree") {
      EXPECT_TRUE(x["run"]["disk"].is_null());
      EXPECT_FALSE(x.contains("device"));
      continue;
    }
    EXPECT_EQ(x["recovery"], "ok");
    EXPECT_TRUE(x["device"].get<std::string>().starts_with(dir.path() + "/")) << x["device"];
    const auto& d = x["load"]["disk"];
    ASSERT_TRUE(d.is_object());
    if (d["available"].get<bool>()) {
      // Strong persistence syncs every insert; weak may leave the load in
      // the page cache.
      if (x["index_options"].value("persistence", "") != "weak") {
        EXPECT_GT(d["writes"].get<uint64_t>(), 0u) << "a synced load of 300 keys wrote nothing";
      }
      EXPECT_TRUE(d.contains("mean_outstanding"));
      EXPECT_TRUE(d.contains("iops"));
    }
  }
  EXPECT_TRUE(fs::is_empty(dir.path())) << "the stores' directories are removed after the run";
}

// `nvindex patree-calibrate` (issue 14): fits and stores PA-Tree's latency
// model for the disk under --device, printing the mean latency per queue
// depth and the fit, and leaves no scratch file; a bad node size, tmpfs and
// a missing directory are usage errors. `bench --in-flight` runs patree's
// engine with a window of operations and reports the engine's counters.
TEST_F(Cli, PatreeCalibrateAndInFlight) {
  nvindex::util::TempDir dir(nvindex::util::temp_device_dir(), "nvindex-cli-");
  ASSERT_TRUE(dir.ok()) << dir.error();
  Outcome r = nvindex("patree-calibrate --device " + dir.path());
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("reads depth 64:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("model: latency ="), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("saved to /var/tmp/nvindex-patree-model-v2-"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::is_empty(dir.path())) << "the scratch file is removed";
  r = nvindex("patree-calibrate --node-size 768 --device " + dir.path());
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_NE(r.err.find("768"), std::string::npos) << r.err;
  r = nvindex("patree-calibrate --device /no/such/dir");
  EXPECT_EQ(r.rc, 2) << r.err;
  if (nvindex::util::on_tmpfs("/dev/shm")) {
    r = nvindex("patree-calibrate --device /dev/shm");
    EXPECT_EQ(r.rc, 2) << r.err;
  }

  const std::string json = tmp_path("inflight.json");
  r = nvindex("bench --index patree --device " + dir.path() +
              " --quiet -n 2000 -p 2000 --workload ycsb-a --in-flight 16 --json-output " + json);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("Operations in flight per thread: 16"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("run  index counters: engine.operations"), std::string::npos) << r.out;
  const nlohmann::json j = nlohmann::json::parse(slurp(json));
  fs::remove(json);
  EXPECT_EQ(j["options"]["in_flight"], 16);
  const auto& c = j["results"][0]["run"]["index_counters"];
  EXPECT_GE(c["engine.operations"].get<uint64_t>(), 2000u) << c;
  EXPECT_GT(c["engine.probes"].get<uint64_t>(), 0u) << c;
  r = nvindex("bench --index patree --device " + dir.path() + " -n 10 -p 10 --in-flight 0");
  EXPECT_EQ(r.rc, 2) << r.err;
}

TEST_F(Cli, BenchHelpMentionsEveryOption) {
  Outcome r = nvindex("bench --help");
  ASSERT_EQ(r.rc, 0) << r.err;
  for (const char* o : {"--index",
                        "--records",
                        "--operations",
                        "--duration",
                        "--threads",
                        "--read-ratio",
                        "--insert-ratio",
                        "--update-ratio",
                        "--remove-ratio",
                        "--scan-ratio",
                        "--rmw-ratio",
                        "--scan-size",
                        "--distribution",
                        "--skew",
                        "--sequential-keys",
                        "--latency-sample",
                        "--seed",
                        "--workload",
                        "--keys-file",
                        "--trace-load",
                        "--trace-run",
                        "--pool",
                        "--pool-size",
                        "--device",
                        "--device-bytes",
                        "--in-flight",
                        "--pm-mode",
                        "--pm-latency-ns",
                        "--media-model",
                        "--node-size",
                        "--format",
                        "--media-cache-kib",
                        "--output",
                        "--json-output",
                        "--keep-pool",
                        "--quiet",
                        "--list-indexes",
                        "lying-test",
                        "--bulk-load",
                        "--fill",
                        "--insert-pattern",
                        "--dense-gap",
                        "--recovery-threads",
                        "dense-insert",
                        "search",
                        "delete",
                        "--no-perf-counters",
                        "--energy",
                        "--key-type",
                        "--key-size",
                        "--batch",
                        "multi_lookup",
                        "keys per second"}) {
    EXPECT_NE(r.out.find(o), std::string::npos) << o;
  }
  EXPECT_EQ(nvindex("verify --help").rc, 0);
  EXPECT_EQ(nvindex("info --help").rc, 0);
}

TEST_F(Cli, ListIndexes) {
  Outcome r = nvindex("bench --list-indexes");
  ASSERT_EQ(r.rc, 0);
  EXPECT_NE(r.out.find("absl-btree\t"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("lying-test\ttest-only"), std::string::npos) << r.out;
}

TEST_F(Cli, ListIndexesGivesCapsNodeSizesAndOptions) {
  Outcome r = nvindex("bench --list-indexes");
  ASSERT_EQ(r.rc, 0);
  const size_t at = r.out.find("\nwbtree\tpersistent\t");
  ASSERT_NE(at, std::string::npos) << r.out;
  const std::string line = r.out.substr(at + 1, r.out.find('\n', at + 1) - at - 1);
  EXPECT_NE(line.find("\tordered, thread-safe, string keys, bulk-load, placement pm-only\t"),
            std::string::npos)
      << line;
  EXPECT_NE(line.find("\t128, 256, 512 or 1024 B\tinner=pm|dram"), std::string::npos) << line;
}

TEST_F(Cli, MisspeltOrRefusedIndexOptionIsUsageError) {
  Outcome r = nvindex(std::string("bench") + kSmall + "--index absl-btree --index-opt innr=dram");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("--index-opt innr: no selected index takes it"), std::string::npos) << r.err;
  Outcome v = nvindex(std::string("bench") + kSmall + "--index 'absl-btree:inner=dram'");
  EXPECT_EQ(v.rc, 2);
  EXPECT_NE(v.err.find("absl-btree: unknown option 'inner' (it takes no options)"),
            std::string::npos)
      << v.err;
  Outcome c = nvindex("crashtest --index lbtree --index-opt inner=dram");
  EXPECT_EQ(c.rc, 2);
  EXPECT_NE(c.err.find("lbtree: unknown option 'inner'"), std::string::npos) << c.err;
  Outcome t = nvindex("torture --index fastfair --index-opt inner=dramm --pool /dev/shm/unused");
  EXPECT_EQ(t.rc, 2);
  EXPECT_NE(t.err.find("fastfair: option inner='dramm' invalid (valid: pm, dram)"),
            std::string::npos)
      << t.err;
}

/// One row of `nvindex --list-options` (src/tools/cli.h): an option of a
/// subcommand and the kind of value it takes.
struct OptionRow {
  std::string command, option, kind;
  long double lo = 0, hi = 0;
  bool lo_open = false, zero_ok = false;
};

std::vector<OptionRow> option_table() {
  std::vector<OptionRow> rows;
  std::istringstream in(nvindex("--list-options").out);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    OptionRow r;
    std::string lo, hi, lo_open, zero_ok;
    std::getline(f, r.command, '\t');
    std::getline(f, r.option, '\t');
    std::getline(f, r.kind, '\t');
    std::getline(f, lo, '\t');
    std::getline(f, hi, '\t');
    std::getline(f, lo_open, '\t');
    std::getline(f, zero_ok, '\t');
    r.lo = std::strtold(lo.c_str(), nullptr);
    r.hi = std::strtold(hi.c_str(), nullptr);
    r.lo_open = lo_open == "1";
    r.zero_ok = zero_ok == "1";
    rows.push_back(r);
  }
  return rows;
}

/// "'x'" for the shell (single quotes; no value here holds one).
std::string sh(const std::string& v) { return "'" + v + "'"; }

// The command lines of issue 31 (items 1-6), as reported: each is a usage
// error (exit 2) naming what is wrong, before any work, and none hangs.
TEST_F(Cli, TheReportedBadCommandLinesExitTwo) {
  const std::string file = tmp_path("issue31-file"), fifo = tmp_path("issue31-fifo");
  std::ofstream(file) << "x";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  struct Case {
    std::string args;
    const char* says;
  };
  const Case cases[] = {
      {"tpcc -q -n -5", "--transactions: must be 1.."},
      {"tpcc -q -n 18446744073709551616", "--transactions: must be 1.."},
      {"tpcc -q -n 10 --duration nan", "--duration: must be (0, 604,800] s"},
      {"tpcc -q -n 10 --seed -1", "--seed: must be a whole number"},
      {"tpcc -q -n 10 --seed 18446744073709551616", "--seed: must be a whole number"},
      {"tpcc -q -n 10 --energy=yes", "--energy takes no value"},
      {"tpcc -q -n 10 --index 'fastfair,'", "--index: empty entry in 'fastfair,'"},
      {"tpcc --index ',' -n 10", "--index: empty entry in ','"},
      {"info --pool " + fifo, "is a FIFO, not a regular file"},
      {"bench -q -n 100 -p 100 --in-flight 4 --index fastfair",
       "--in-flight: operations in flight"},
      {"bench -q -n 100 -p 100 --in-flight 4 --index bztree", "--in-flight: operations in flight"},
      {"bench -q -n 100 -p 100 --in-flight 4 --index dash-eh", "--in-flight: operations in flight"},
      {"bench -q -n 100 -p 100 --in-flight 4 --index lbtree", "--in-flight: operations in flight"},
      {"bench -q -n 100 -p 100 --in-flight 4 --batch 2 --index btree", "choose one"},
      {"bench -q -n 100 -p 100 --index fastfair --pool /missing/dir/p",
       "--pool: /missing/dir/p: its directory /missing/dir does not exist"},
      {"bench -q -n 100 -p 100 --index btree --output /missing/dir/x",
       "--output: /missing/dir/x: its directory"},
      {"bench -q -n 100 -p 100 --index btree --json-output /tmp",
       "--json-output: /tmp is a directory"},
      {"bench -q -n 100 -p 100 --index leveldb --device /proc",
       "--device: cannot make a directory in /proc"},
      {"bench -q -n 100 -p 100 --index leveldb --device ''", "--device: '': empty path"},
      {"patree-calibrate --device ''", "--device: '': empty path"},
      {"tpcc --check-only --pool /nonexistent/dir", "--pool: /nonexistent/dir"},
      {"tpcc --check-only --pool " + file, "is a regular file, not a directory"},
      {"tpcc --check-only --pool /dev/null", "is a character device, not a directory"},
      {"tpcc -q -n 10 --index fastfair --pool /nonexistent/dir/x",
       "--pool: /nonexistent/dir/x: its directory /nonexistent/dir does not exist"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args);
    const Outcome r = nvindex(c.args, 60);
    EXPECT_NE(r.rc, 124) << "hung";
    EXPECT_EQ(r.rc, 2) << r.err << r.out;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << r.err;
  }
  EXPECT_FALSE(fs::exists("/nonexistent/dir"));
  fs::remove(file);
  fs::remove(fifo);
}

// verify says what the previous close let recovery check: a clean close's
// record, or after a crash nothing to hold the entry count against (issue
// 31 item 7). The crash is made by hand: the header's clean-shutdown flag
// and close record cleared (they lie outside the header checksum), which is
// how a pool killed after its last operation looks.
TEST_F(Cli, VerifySaysWhetherTheCloseRecordWasChecked) {
  const std::string pool = tmp_path("closecheck.pool");
  ASSERT_EQ(
      nvindex(std::string("bench") + kSmall + "--index fastfair --keep-pool --pool " + pool).rc, 0);
  Outcome v = nvindex("verify --index fastfair --pool " + pool);
  EXPECT_EQ(v.rc, 0) << v.err;
  EXPECT_NE(v.out.find("previous close:  clean; allocated bytes and entry count checked against "
                       "its close record"),
            std::string::npos)
      << v.out;
  {
    std::fstream f(pool, std::ios::in | std::ios::out | std::ios::binary);
    const uint64_t zero[3] = {0, 0, 0};  // clean flag (72), close record (80, 88)
    f.seekp(72);
    f.write(reinterpret_cast<const char*>(zero), sizeof(zero));
  }
  v = nvindex("verify --index fastfair --pool " + pool);
  EXPECT_EQ(v.rc, 0) << v.err;
  EXPECT_NE(v.out.find("previous close:  not clean (a crash); entry count not checked against a "
                       "record"),
            std::string::npos)
      << v.out;
  EXPECT_NE(v.out.find("keys:            2000"), std::string::npos) << v.out;
  // That recovery consumed nothing and closed cleanly: the next open checks
  // its close record again; JSON says which.
  v = nvindex("verify --format json --index fastfair --pool " + pool);
  ASSERT_EQ(v.rc, 0) << v.err;
  EXPECT_TRUE(nlohmann::json::parse(v.out)["close_record_checked"].get<bool>()) << v.out;
  fs::remove(pool);
}

// An index that does not take a command's default node size runs at its own
// default in every command (run_node_size), as in bench (issue 31 item 5):
// dash-eh takes 1024..16384 B, the commands' defaults are 256 and 512.
TEST_F(Cli, EveryCommandGivesAnIndexItsOwnDefaultNodeSize) {
  const std::string pool = tmp_path("dash.pool"), tpool = tmp_path("dash-torture.pool");
  ASSERT_EQ(
      nvindex(std::string("bench") + kSmall + "--index dash-eh --keep-pool --pool " + pool).rc, 0);
  Outcome v = nvindex("verify --index dash-eh --pool " + pool);
  EXPECT_EQ(v.rc, 0) << v.err << v.out;
  EXPECT_NE(v.out.find("keys:            2000"), std::string::npos) << v.out;
  Outcome t = nvindex("torture --index dash-eh --kills 2 --seconds 20 --pool " + tpool);
  EXPECT_EQ(t.rc, 0) << t.err << t.out;
  EXPECT_NE(t.out.find("node size 16384"), std::string::npos) << t.out;
  Outcome c = nvindex("crashtest -q --index dash-eh --ops 2 --budget 2");
  EXPECT_EQ(c.rc, 0) << c.err << c.out;
  EXPECT_NE(c.out.find("node size 16384 B"), std::string::npos) << c.out;
  // Given explicitly, a size the index does not take is still refused.
  Outcome bad = nvindex("torture --index dash-eh --node-size 256 --kills 1 --pool " + tpool);
  EXPECT_EQ(bad.rc, 2) << bad.err;
  EXPECT_NE(bad.err.find("dash-eh: node size 256 B invalid"), std::string::npos) << bad.err;
  fs::remove(pool);
  fs::remove(tpool);
}

// Every option of every subcommand, as `nvindex --list-options` lists them
// (so an option added later is in the table without editing it): each bad
// value its kind can be given is a usage error (exit 2) that names the
// option, refused before any work, and nothing hangs (each call is bounded by
// `timeout`). Numbers: negative, zero (where below the range), NaN, infinity,
// overflow, a fraction for an integer, past the largest, empty; paths: empty,
// a missing directory, a directory, a FIFO, a device file (and a regular file
// where a directory is asked for); choices, index lists and texts: empty and
// unknown; switches: a value. An option declared without the shared parser is
// "unchecked" and fails here.
TEST_F(Cli, EveryOptionOfEveryCommandRefusesBadValuesBeforeAnyWork) {
  const std::string dir = tmp_path("opt-dir"), fifo = tmp_path("opt-fifo");
  const std::string plain = tmp_path("opt-plain"), pool = tmp_path("opt-pool");
  const std::string never = tmp_path("opt-never");
  fs::create_directory(dir);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::ofstream(plain) << "not a pool\n";
  ASSERT_EQ(nvindex("bench -q --index fastfair -n 100 -p 100 --keep-pool --pool " + pool).rc, 0);
  // Base arguments per command: valid (and quick) for every option but the
  // one under test, which is dropped from them.
  const std::map<std::string, std::vector<std::pair<std::string, std::string>>> base = {
      {"bench",
       {{"--quiet", ""}, {"--index", "btree"}, {"--records", "100"}, {"--operations", "100"}}},
      {"verify", {{"--index", "fastfair"}, {"--pool", pool}}},
      {"info", {{"--pool", pool}}},
      {"crashtest", {{"--quiet", ""}, {"--index", "fastfair"}, {"--ops", "2"}, {"--budget", "2"}}},
      {"torture", {{"--index", "fastfair"}, {"--pool", never}, {"--kills", "1"}}},
      {"tpcc", {{"--quiet", ""}, {"--index", "btree"}, {"--transactions", "10"}}},
      {"patree-calibrate", {}},
      {"serve", {{"--quiet", ""}, {"--index", "btree"}, {"--port", "0"}}},
      {"kv-load", {{"--quiet", ""}, {"--pool", never}, {"--records", "100"}}},
      {"kv-client",
       {{"--quiet", ""}, {"--server", "127.0.0.1:1"}, {"--ops", "1"}, {"--records", "1"}}},
  };
  const std::vector<OptionRow> rows = option_table();
  ASSERT_GT(rows.size(), 80u);
  std::set<std::string> commands;
  size_t cases = 0;
  for (const OptionRow& o : rows) {
    SCOPED_TRACE(o.command + " " + o.option + " (" + o.kind + ")");
    commands.insert(o.command);
    EXPECT_NE(o.kind, "unchecked") << "declare it through src/tools/cli.h";
    ASSERT_TRUE(base.count(o.command)) << "add base arguments for " << o.command;
    std::vector<std::string> bad;
    const bool integer = o.kind == "count" || o.kind == "seed";
    if (integer || o.kind == "real") {
      bad = {"nan", "inf", "", "1e5000", "-5"};
      if (integer) bad.insert(bad.end(), {"1.5", "1e30", "18446744073709551616"});
      if (o.lo > 0 || (o.kind == "real" && o.lo_open)) bad.push_back("0");
      if (o.hi < 1e18L) bad.push_back(std::to_string(static_cast<uint64_t>(o.hi) + 1));
    } else if (o.kind == "byte-size") {
      bad = {"", "-1", "nan", "1.5G", "12Q", "100000000000000T"};
      if (o.lo > 1) bad.push_back("1");
    } else if (o.kind == "choice") {
      bad = {"", "bogus"};
    } else if (o.kind == "index-list") {
      bad = {"", ",", "btree,", ",btree", "btree,,fastfair", "nope"};
    } else if (o.kind == "index-name") {
      bad = {"", "nope", "btree,fastfair"};
    } else if (o.kind == "text") {
      bad = {""};
    } else if (o.kind == "input-file" || o.kind == "new-file" || o.kind == "output-file") {
      bad = {"", "/nonexistent-nvindex-dir/x", dir, fifo, "/dev/null"};
    } else if (o.kind == "directory" || o.kind == "new-directory") {
      bad = {"", "/nonexistent-nvindex-dir/x", plain, fifo, "/dev/null"};
    } else if (o.kind == "flag") {
      bad = {"=yes"};
    }
    EXPECT_FALSE(bad.empty()) << "no bad values for kind " << o.kind;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    // Under a sanitizer (each call about 0.2 s; every value: 2 minutes of
    // test time): one bad value per option, taken in turn, so that every
    // value of a kind still runs across its options.
    if (!bad.empty()) bad = {bad[static_cast<size_t>(&o - rows.data()) % bad.size()]};
#endif
    for (const std::string& v : bad) {
      std::string args = o.command;
      for (const auto& [k, val] : base.at(o.command)) {
        if (k != o.option) args += " " + k + (val.empty() ? "" : " " + sh(val));
      }
      args += " " + o.option + (o.kind == "flag" ? v : " " + sh(v));
      SCOPED_TRACE(args);
      const Outcome r = nvindex(args, 60);
      EXPECT_NE(r.rc, 124) << "hung";
      EXPECT_EQ(r.rc, 2) << r.err << r.out;
      EXPECT_NE(r.err.find(o.option), std::string::npos) << r.err;
      EXPECT_EQ(r.err.find("generating workload"), std::string::npos) << "refused before any work";
      ++cases;
    }
  }
  EXPECT_EQ(commands,
            (std::set<std::string>{"bench", "verify", "info", "crashtest", "torture", "tpcc",
                                   "patree-calibrate", "serve", "kv-load", "kv-client"}));
  std::printf("%zu options, %zu bad values refused\n", rows.size(), cases);
  EXPECT_FALSE(fs::exists(never)) << "nothing created";
  EXPECT_EQ(slurp(plain), "not a pool\n");
  for (const std::string& f : {dir, fifo, plain, pool}) fs::remove_all(f);
}

// One exit-code rule: a malformed or existing file and an option that
// cannot apply are usage errors (2), refused before any work.
TEST_F(Cli, FilesAndOptionsThatCannotApplyAreUsageErrors) {
  const std::string keys = tmp_path("bad-keys.txt"), pool = tmp_path("exists.pool");
  const std::string load = tmp_path("load.trace"), run = tmp_path("run.trace");
  {
    std::ofstream(keys) << "12\nabc\n";
    std::ofstream(pool) << "not a pool";
    std::ofstream(load) << "INSERT 1\nINSERT 2\n";
    std::ofstream(run) << "READ 1\n";
  }
  struct Case {
    std::string args;
    const char* says;
  };
  const Case cases[] = {
      {"--index btree --keys-file " + keys, "expected a decimal uint64 key"},
      {"--index fastfair --pool " + pool, "already exists"},
      {"--index fastfair --pool " + pool + "-new --pm-mode dram", "--pm-mode dram"},
      {"--index btree --skew 0.5", "--skew applies to"},
      {"--index btree --dense-gap 5", "--dense-gap applies to dense inserts"},
      {"--index btree --trace-load " + load + " --trace-run " + run + " -r 0.5 -u 0.5",
       "--trace-run gives the operations"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args);
    const Outcome r = nvindex(std::string("bench") + kSmall + c.args);
    EXPECT_EQ(r.rc, 2) << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << r.err;
  }
  EXPECT_EQ(slurp(pool), "not a pool") << "an existing file is never touched";
  EXPECT_FALSE(fs::exists(pool + "-new"));
  for (const std::string& f : {keys, pool, load, run}) fs::remove(f);
}

TEST_F(Cli, NumbersAreReadAsTheCheckReadsThem) {
  // An exponent with a minus sign is not a negative number.
  EXPECT_EQ(nvindex(std::string("bench") + kSmall + "--index btree --latency-sample 1e-3").rc, 0);
  // "010" would reach the option as octal 8, "0x10" as 16: refused.
  for (const char* v : {"010", "0x10", "1.5"}) {
    const Outcome r = nvindex(std::string("bench") + kSmall + "--index btree --threads " + v);
    EXPECT_EQ(r.rc, 2) << v;
    EXPECT_NE(r.err.find("--threads"), std::string::npos) << r.err;
  }
}

TEST_F(Cli, GlobalNodeSizeNeedsOneIndexThatTakesIt) {
  // Only lbtree selected, and it does not take 128 B: a usage error.
  Outcome r = nvindex(std::string("bench") + kSmall + "--index lbtree --node-size 128");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("lbtree: node size 128 B invalid"), std::string::npos) << r.err;
  // btree takes it: the run goes on and reports lbtree's refusal as its error.
  r = nvindex(std::string("bench") + kSmall + "--index btree,lbtree --node-size 128");
  EXPECT_EQ(r.rc, 1) << r.err;
  EXPECT_NE(r.err.find("lbtree"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("btree"), std::string::npos) << r.out;
  // A size an entry names is checked against its own index.
  r = nvindex(std::string("bench") + kSmall + "--index 'btree,lbtree:node_size=128'");
  EXPECT_EQ(r.rc, 2);
  // --pool-size is checked against free space only when a pool file is made.
  EXPECT_EQ(nvindex(std::string("bench") + kSmall + "--index btree --pool-size 1000T").rc, 0);
}

TEST_F(Cli, UnknownIndexIsUsageErrorListingRegistered) {
  Outcome r = nvindex(std::string("bench") + kSmall + "--index absl-btree,nope");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("unknown index 'nope'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("absl-btree"), std::string::npos) << r.err;
}

TEST_F(Cli, BadRatiosAreUsageErrors) {
  EXPECT_EQ(nvindex(std::string("bench") + kSmall + "--index absl-btree -r 1.5").rc, 2);
  Outcome r = nvindex(std::string("bench") + kSmall + "--index absl-btree -r 0.5 -u 0.2");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("sum to 1"), std::string::npos) << r.err;
  r = nvindex(std::string("bench") + kSmall + "--index absl-btree --workload ycsb-a -r 1");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("--workload"), std::string::npos) << r.err;
  EXPECT_EQ(nvindex(std::string("bench") + kSmall + "--index absl-btree --pool-size 12X").rc, 2);
  EXPECT_EQ(nvindex(std::string("bench") + kSmall + "--index absl-btree --no-such-flag").rc, 2);
}

TEST_F(Cli, BadFillInsertPatternPresetAndIndexSpecAreUsageErrors) {
  const std::string small = std::string("bench") + kSmall + "--index absl-btree ";
  for (const char* fill : {"0", "1.5", "-1"}) {
    Outcome r = nvindex(small + "--bulk-load --fill " + fill);
    EXPECT_EQ(r.rc, 2) << fill;
    EXPECT_NE(r.err.find("--fill: must be (0, 1]"), std::string::npos) << r.err;
  }
  Outcome r = nvindex(small + "--fill 0.7");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("--bulk-load"), std::string::npos) << r.err;
  r = nvindex(small + "--insert-pattern sideways");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("--insert-pattern: must be one of random, dense"), std::string::npos)
      << r.err;
  r = nvindex(small + "--workload insertz");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("dense-insert"), std::string::npos) << "lists the presets: " << r.err;
  r = nvindex(std::string("bench") + kSmall + "--index 'absl-btree:oops'");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("name:k=v"), std::string::npos) << r.err;
  r = nvindex(std::string("bench") + kSmall + "--index 'nope:a=b'");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("unknown index 'nope'"), std::string::npos) << r.err;
  // Dense inserts past 2^64 are refused before anything runs.
  const std::string keys = tmp_path("top.keys");
  std::ofstream(keys) << "18446744073709551610\n";
  r = nvindex("bench --quiet --index absl-btree --keys-file " + keys +
              " -p 100 --workload dense-insert");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("overflow"), std::string::npos) << r.err;
  fs::remove(keys);
}

TEST_F(Cli, LbtreePresetsBulkLoadAndPerIndexOptionsInJson) {
  const std::string out = tmp_path("lb.json");
  Outcome r = nvindex(std::string("bench") + kSmall +
                      "--index 'wbtree,wbtree:inner=dram,absl-btree' -t 2 --workload "
                      "dense-insert --bulk-load --fill 0.7 --index-opt inner=pm --format json "
                      "--output " +
                      out);
  ASSERT_EQ(r.rc, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("bulk load by inserts: fill factor not applied"), std::string::npos)
      << r.out;
  const nlohmann::json j = nlohmann::json::parse(slurp(out));
  EXPECT_EQ(j["workload"]["name"], "dense-insert");
  EXPECT_EQ(j["options"]["insert_pattern"], "dense");
  EXPECT_EQ(j["options"]["bulk_load"], true);
  ASSERT_EQ(j["results"].size(), 3u);
  EXPECT_EQ(j["results"][0]["index"], "wbtree");
  EXPECT_EQ(j["results"][0]["index_options"]["inner"], "pm") << "--index-opt applies";
  EXPECT_EQ(j["results"][1]["index"], "wbtree:inner=dram");
  EXPECT_EQ(j["results"][1]["index_name"], "wbtree");
  EXPECT_EQ(j["results"][1]["index_options"]["inner"], "dram") << "the entry's own option wins";
  EXPECT_EQ(j["results"][1]["info"]["placement"], "selective");
  EXPECT_TRUE(j["results"][2]["index_options"].empty()) << "absl-btree takes no 'inner'";
  fs::remove(out);

  // node_size=N in an entry sets that entry's IndexOptions::node_size.
  r = nvindex(std::string("bench") + kSmall +
              "--index 'btree:node_size=128,btree:node_size=256' --workload insert --format json "
              "--output " +
              out);
  ASSERT_EQ(r.rc, 0) << r.err;
  const nlohmann::json n = nlohmann::json::parse(slurp(out));
  EXPECT_EQ(n["results"][0]["info"]["node_size"], 128);
  EXPECT_EQ(n["results"][1]["info"]["node_size"], 256);
  EXPECT_FALSE(n["results"][0]["index_options"].contains("node_size"));
  EXPECT_EQ(nvindex(std::string("bench") + kSmall + "--index 'btree:node_size=big'").rc, 2);
  for (const auto& res : j["results"]) {
    EXPECT_EQ(res["verification"]["failures"], 0);
    // wbtree builds bottom-up, absl-btree inserts.
    EXPECT_EQ(res["load"]["method"],
              res["index_name"] == "wbtree" ? "bulk_load" : "bulk_load_by_inserts");
    EXPECT_EQ(res["run"]["by_type"]["insert"]["completed"], 2000);
    EXPECT_EQ(res["verification"]["structure"]["keys"], 4000);
  }
  fs::remove(out);
}

TEST_F(Cli, MissingTraceFileIsNamed) {
  const std::string missing = tmp_path("no-such-trace");
  Outcome r = nvindex("bench --quiet --index absl-btree --trace-load " + missing);
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.err.find(missing), std::string::npos) << r.err;
}

TEST_F(Cli, InfoOnNonPoolFileFailsAndLeavesItUnchanged) {
  const std::string path = tmp_path("not-a-pool");
  std::string content(8192, 'x');
  content.replace(0, 20, "just some text file\n");
  {
    std::ofstream f(path, std::ios::binary);
    f << content;
  }
  Outcome r = nvindex("info --pool " + path);
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.err.find(path), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("not an nvindex pool"), std::string::npos) << r.err;
  EXPECT_EQ(slurp(path), content);
  r = nvindex("verify --index fastfair --pool " + path);
  EXPECT_NE(r.rc, 0);
  EXPECT_EQ(slurp(path), content);
  fs::remove(path);
  EXPECT_EQ(nvindex("info --pool " + path).rc, 2);  // missing file
}

TEST_F(Cli, VerifyOfVolatileIndexIsUsageError) {
  const std::string file = tmp_path("volatile.pool");
  std::ofstream(file) << "not a pool";
  Outcome r = nvindex("verify --index absl-btree --pool " + file);
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("volatile"), std::string::npos) << r.err;
  fs::remove(file);
}

TEST_F(Cli, JsonOutputHasTheSchema) {
  const std::string out = tmp_path("report.json"), also = tmp_path("also.json");
  Outcome r =
      nvindex(std::string("bench") + kSmall +
              "--index absl-btree,lying-test -t 2 --workload ycsb-b --format json --output " + out +
              " --json-output " + also);
  EXPECT_EQ(r.rc, 1) << "lying-test must make the run fail: " << r.err;
  EXPECT_NE(r.out.find("Comparison"), std::string::npos) << "text summary on stdout";
  const nlohmann::json j = nlohmann::json::parse(slurp(out));
  EXPECT_EQ(j, nlohmann::json::parse(slurp(also)));
  EXPECT_EQ(j["schema"], "nvindex.bench/1");
  EXPECT_EQ(j["workload"]["name"], "ycsb-b");
  EXPECT_EQ(j["options"]["threads"], 2);
  ASSERT_EQ(j["results"].size(), 2u);
  EXPECT_EQ(j["results"][0]["index"], "absl-btree");
  EXPECT_EQ(j["results"][0]["verification"]["failures"], 0);
  EXPECT_EQ(j["results"][0]["run"]["operations"], 2000);
  EXPECT_GT(j["results"][1]["verification"]["failures"].get<uint64_t>(), 0u);
  EXPECT_TRUE(j["results"][0]["run"]["latency_ns"]["p99_999"].is_number());
  fs::remove(out);
  fs::remove(also);
}

// --batch N: 1..4096, else a usage error naming the range before any work;
// N > 1 is in the text header and every JSON report has options.batch.
TEST_F(Cli, LookupBatchIsCheckedAndReported) {
  for (const char* v : {"0", "5000"}) {
    SCOPED_TRACE(v);
    const Outcome r = nvindex(std::string("bench") + kSmall + "--index btree --batch " + v);
    EXPECT_EQ(r.rc, 2) << r.err << r.out;
    EXPECT_NE(r.err.find("--batch"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("1..4,096"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("generating workload"), std::string::npos) << "refused before any work";
  }
  const std::string out = tmp_path("batch.json");
  const Outcome b =
      nvindex(std::string("bench") + kSmall + "--index btree --batch 8 --json-output " + out);
  ASSERT_EQ(b.rc, 0) << b.err;
  EXPECT_NE(b.out.find("# Lookup batch: 8 (multi_lookup)"), std::string::npos) << b.out;
  const nlohmann::json j = nlohmann::json::parse(slurp(out));
  EXPECT_EQ(j["schema"], "nvindex.bench/1");
  EXPECT_EQ(j["options"]["batch"], 8);
  EXPECT_EQ(j["results"][0]["run"]["operations"], 2000) << "one operation per key";
  EXPECT_EQ(j["results"][0]["verification"]["failures"], 0);
  const Outcome one =
      nvindex(std::string("bench") + kSmall + "--index btree --format json --output " + out);
  ASSERT_EQ(one.rc, 0) << one.err;
  EXPECT_EQ(one.out.find("Lookup batch"), std::string::npos) << "no line for batch 1";
  EXPECT_EQ(nlohmann::json::parse(slurp(out))["options"]["batch"], 1);
  fs::remove(out);
}

// Issue 35: NVINDEX_FLUSH caps the flush instruction (valgrind decodes only
// clflush), NVINDEX_POOL_DIR moves temporary pools (onto huge pages), and
// every report says how the pool's mapping was backed by pages.
TEST_F(Cli, FlushCapPoolDirAndPoolPagesAreInTheReport) {
  const std::string out = tmp_path("pages.json");
  const std::string dir = tmp_path("pooldir");
  fs::create_directories(dir);
  const std::string args = std::string("bench") + kSmall + "--index fastfair --json-output " + out;
  Outcome r = nvindex(args);
  ASSERT_EQ(r.rc, 0) << r.err;
  const std::string cpu_flush = nlohmann::json::parse(slurp(out))["machine"]["flush_instruction"];
  ::setenv("NVINDEX_FLUSH", "clflush", 1);
  ::setenv("NVINDEX_POOL_DIR", dir.c_str(), 1);
  r = nvindex(args + " --keep-pool");
  ::unsetenv("NVINDEX_POOL_DIR");
  ASSERT_EQ(r.rc, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(slurp(out));
  EXPECT_EQ(j["machine"]["flush_instruction"], "clflush");
  EXPECT_NE(r.out.find("flush: clflush"), std::string::npos) << r.out;
  const nlohmann::json& res = j["results"][0];
  EXPECT_EQ(res["pool"].get<std::string>().rfind(dir + "/", 0), 0u) << res["pool"];
  EXPECT_TRUE(fs::exists(res["pool"].get<std::string>())) << "--keep-pool keeps it";
  const nlohmann::json& pages = res["pool_pages"];
  EXPECT_GE(pages["page_bytes"].get<uint64_t>(), 4096u);
  EXPECT_GT(pages["resident_bytes"].get<uint64_t>(), 0u);
  EXPECT_LE(pages["resident_bytes"].get<uint64_t>(), pages["mapped_bytes"].get<uint64_t>());
  EXPECT_LE(pages["huge_bytes"].get<uint64_t>(), pages["resident_bytes"].get<uint64_t>());
  EXPECT_NE(r.out.find("Pool pages: "), std::string::npos) << r.out;
  // Prefaulted by default: every page of the pool mapped before the load.
  EXPECT_TRUE(j["options"]["prefault"].get<bool>());
  EXPECT_GE(res["prefault_seconds"].get<double>(), 0.0);
  EXPECT_EQ(pages["resident_bytes"].get<uint64_t>(), pages["mapped_bytes"].get<uint64_t>());
  EXPECT_NE(r.out.find("; prefaulted before the load in "), std::string::npos) << r.out;
  r = nvindex(args + " --no-prefault");
  ASSERT_EQ(r.rc, 0) << r.err;
  j = nlohmann::json::parse(slurp(out));
  EXPECT_FALSE(j["options"]["prefault"].get<bool>());
  EXPECT_FALSE(j["results"][0].contains("prefault_seconds"));
  EXPECT_LT(j["results"][0]["pool_pages"]["resident_bytes"].get<uint64_t>(),
            j["results"][0]["pool_pages"]["mapped_bytes"].get<uint64_t>());
  EXPECT_NE(r.out.find("; not prefaulted"), std::string::npos) << r.out;
  // An unknown cap caps nothing.
  ::setenv("NVINDEX_FLUSH", "clwb2", 1);
  r = nvindex(args);
  ::unsetenv("NVINDEX_FLUSH");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(slurp(out))["machine"]["flush_instruction"], cpu_flush);
  // A volatile index has no pool, so no page line.
  r = nvindex(std::string("bench") + kSmall + "--index absl-btree --json-output " + out);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_FALSE(nlohmann::json::parse(slurp(out))["results"][0].contains("pool_pages"));
  EXPECT_EQ(r.out.find("Pool pages: "), std::string::npos) << r.out;
  fs::remove_all(dir);
  fs::remove(out);
}

TEST_F(Cli, CpuCountersAreCountedOrExplainedAndCanBeTurnedOff) {
  const std::string out = tmp_path("cpu.json");
  Outcome r = nvindex(std::string("bench") + kSmall + "--index absl-btree --json-output " + out);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("CPU counters"), std::string::npos) << r.out;
  nlohmann::json j = nlohmann::json::parse(slurp(out));
  EXPECT_EQ(j["options"]["perf_counters"], true);
  for (const char* phase : {"load", "run"}) {
    const nlohmann::json& e = j["results"][0][phase]["cpu"]["instructions"];
    if (e["available"].get<bool>()) {
      EXPECT_GT(e["count"].get<uint64_t>(), 0u) << phase;
      EXPECT_GT(e["per_op"].get<double>(), 0) << phase;
    } else {
      EXPECT_TRUE(e["count"].is_null()) << phase;
      EXPECT_TRUE(e["per_op"].is_null()) << phase;
      const std::string why = e["reason"];
      EXPECT_FALSE(why.empty()) << phase;
      EXPECT_NE(r.out.find("instructions: not available (" + why + ")"), std::string::npos)
          << r.out;
    }
  }
  r = nvindex(std::string("bench") + kSmall + "--index absl-btree --no-perf-counters " +
              "--json-output " + out);
  ASSERT_EQ(r.rc, 0) << r.err;
  j = nlohmann::json::parse(slurp(out));
  EXPECT_EQ(j["options"]["perf_counters"], false);
  EXPECT_EQ(j["results"][0]["run"]["cpu"]["instructions"]["reason"],
            "turned off (--no-perf-counters)");
  EXPECT_NE(r.out.find("instructions: not available (turned off (--no-perf-counters))"),
            std::string::npos)
      << r.out;
  fs::remove(out);
}

TEST_F(Cli, PersistentIndexKeepPoolThenVerifyAndInfo) {
  Outcome list = nvindex("bench --list-indexes");
  if (list.out.find("fastfair\tpersistent") == std::string::npos) {
    GTEST_SKIP() << "fastfair not registered";
  }
  const std::string pool = tmp_path("ff.pool");
  Outcome r =
      nvindex(std::string("bench") + kSmall + "--index fastfair --keep-pool --pool " + pool);
  ASSERT_EQ(r.rc, 0) << r.err << r.out;
  ASSERT_TRUE(fs::exists(pool));
  Outcome info = nvindex("info --format json --pool " + pool);
  ASSERT_EQ(info.rc, 0) << info.err;
  const nlohmann::json h = nlohmann::json::parse(info.out);
  EXPECT_EQ(h["layout"], "fastfair");
  EXPECT_TRUE(h["checksum_ok"].get<bool>());
  Outcome v = nvindex("verify --index fastfair --pool " + pool);
  EXPECT_EQ(v.rc, 0) << v.err;
  EXPECT_NE(v.out.find("keys:            2000"), std::string::npos) << v.out;
  Outcome wrong = nvindex("verify --index btree --pool " + pool);
  EXPECT_EQ(wrong.rc, 2);
  // An integer-key pool opened for string keys: refused (its layout is
  // "fastfair", a string-key pool's is "fastfair:string"), the pool intact.
  const std::string before = slurp(pool);
  Outcome as_string = nvindex("verify --index fastfair --key-type string --pool " + pool);
  EXPECT_EQ(as_string.rc, 2) << as_string.err;
  EXPECT_EQ(slurp(pool), before);
  EXPECT_EQ(nvindex("verify --index fastfair --key-type text --pool " + pool).rc, 2);
  fs::remove(pool);
}

// verify prints what was allocated at the last clean close and what the
// structure reaches; a pool whose close record disagrees with its structure
// (here: the recorded key count, as a lost leaf would leave it) fails
// recovery, stays "not clean" and keeps the record, so every later verify
// reports it again.
TEST_F(Cli, VerifyComparesWithTheCloseRecordAndKeepsReportingDamage) {
  const std::string pool = tmp_path("rec.pool");
  Outcome r = nvindex(std::string("bench") + kSmall + "--index lbtree --keep-pool --pool " + pool);
  ASSERT_EQ(r.rc, 0) << r.err << r.out;
  Outcome v = nvindex("verify --format json --index lbtree --pool " + pool);
  ASSERT_EQ(v.rc, 0) << v.err;
  const nlohmann::json j = nlohmann::json::parse(v.out);
  EXPECT_EQ(j["allocated_bytes_at_close"], j["reachable_bytes"]) << v.out;
  EXPECT_EQ(j["keys_at_close"], 2000) << v.out;
  v = nvindex("verify --index lbtree --pool " + pool);
  EXPECT_NE(v.out.find("allocated:       "), std::string::npos) << v.out;
  EXPECT_NE(v.out.find("reachable:       "), std::string::npos) << v.out;
  // The header's close record: keys + 1 at offset 88 (pool.h).
  const uint64_t wrong_keys = 1500 + 1;
  {
    std::fstream f(pool, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(88);
    f.write(reinterpret_cast<const char*>(&wrong_keys), sizeof(wrong_keys));
  }
  for (int i = 0; i < 2; ++i) {
    v = nvindex("verify --index lbtree --pool " + pool);
    EXPECT_EQ(v.rc, 1) << v.out;
    EXPECT_NE(v.err.find("closed cleanly with 1500 keys"), std::string::npos) << v.err;
    Outcome info = nvindex("info --format json --pool " + pool);
    ASSERT_EQ(info.rc, 0) << info.err;
    const nlohmann::json h = nlohmann::json::parse(info.out);
    EXPECT_FALSE(h["clean_shutdown"].get<bool>());
    EXPECT_EQ(h["close_keys"], 1500);
  }
  fs::remove(pool);
}

TEST_F(Cli, RecoveryThreadsAndVerifyRebuildTime) {
  Outcome list = nvindex("bench --list-indexes");
  if (list.out.find("fastfair\tpersistent") == std::string::npos) {
    GTEST_SKIP() << "fastfair not registered";
  }
  const std::string pool = tmp_path("ff-rt.pool"), out = tmp_path("rt.json");
  Outcome r = nvindex(std::string("bench") + kSmall +
                      "--index fastfair --workload insert --bulk-load -t 2 --recovery-threads 1 "
                      "--keep-pool --pool " +
                      pool + " --format json --output " + out);
  ASSERT_EQ(r.rc, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("with 1 thread "), std::string::npos) << r.out;
  const nlohmann::json j = nlohmann::json::parse(slurp(out));
  EXPECT_EQ(j["options"]["recovery_threads"], 1);
  EXPECT_EQ(j["results"][0]["recovery_threads"], 1);
  EXPECT_TRUE(j["results"][0]["rebuild_seconds"].is_number());
  EXPECT_EQ(j["results"][0]["recovery"], "ok");

  Outcome v = nvindex("verify --index fastfair --threads 2 --pool " + pool);
  EXPECT_EQ(v.rc, 0) << v.err;
  EXPECT_NE(v.out.find("2 threads"), std::string::npos) << v.out;
  EXPECT_NE(v.out.find("rebuild:"), std::string::npos) << v.out;
  EXPECT_NE(v.out.find("keys:            4000"), std::string::npos) << v.out;
  v = nvindex("verify --index fastfair --threads 1 --format json --pool " + pool);
  ASSERT_EQ(v.rc, 0) << v.err;
  const nlohmann::json vj = nlohmann::json::parse(v.out);
  EXPECT_EQ(vj["schema"], "nvindex.verify/1");
  EXPECT_EQ(vj["threads"], 1);
  EXPECT_EQ(vj["keys"], 4000);
  EXPECT_TRUE(vj["structure_ok"].get<bool>());
  EXPECT_TRUE(vj["rebuild_seconds"].is_number());
  EXPECT_GT(vj["recovery_seconds"].get<double>(), 0.0);
  EXPECT_GT(vj["leaves"].get<uint64_t>(), 0u);
  EXPECT_EQ(nvindex("verify --index fastfair --threads 0 --pool " + pool).rc, 2);
  fs::remove(pool);
  fs::remove(out);
}

// --key-type and --key-size: a bogus type, a size outside 5..255, a size
// with integer keys, an integer-only index named with string keys (the
// message names those that take them) and a key space that does not fit the
// digits are usage errors.
TEST_F(Cli, KeyTypeOptionsAreCheckedBeforeAnyWork) {
  ASSERT_FALSE(nvindex::find_index_entry("btree-ls")->caps.string_keys)
      << "pick an index without them";
  struct Case {
    std::string args;
    const char* says;
  };
  const Case cases[] = {
      {"--index absl-btree --key-type bogus", "--key-type: key type 'bogus' invalid"},
      {"--index absl-btree --key-type string --key-size 4", "--key-size: must be 5..255 bytes"},
      {"--index absl-btree --key-type string --key-size 256", "--key-size: must be 5..255"},
      {"--index absl-btree --key-size 30", "--key-size applies to --key-type string"},
      {"--index btree-ls --key-type string", "index 'btree-ls' does not take string keys"},
      {"--index btree-ls --key-type string", "absl-btree"},
      {"--index absl-btree --key-type string --key-size 12", "use --key-size"},
      {"--index absl-btree --key-type string --key-size 010", "--key-size"},  // not octal 8
      {"--index absl-btree --key-type string --key-size -1", "--key-size"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args);
    const Outcome r = nvindex(std::string("bench") + kSmall + c.args);
    EXPECT_EQ(r.rc, 2) << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << r.err;
  }
}

// String keys end to end: a generated run at the default 24 B and at 12 B
// with sequential keys, both reported with their key type and size; without
// --index the string-capable indexes run.
TEST_F(Cli, StringKeyRunsReportKeyTypeAndSize) {
  const std::string out = tmp_path("string.json");
  Outcome r = nvindex(std::string("bench") + kSmall +
                      "--index absl-btree --key-type string --workload ycsb-e --format json "
                      "--output " +
                      out);
  ASSERT_EQ(r.rc, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(slurp(out));
  EXPECT_EQ(j["schema"], "nvindex.bench/1");
  EXPECT_EQ(j["options"]["key_type"], "string");
  EXPECT_EQ(j["options"]["key_size"], 24);
  EXPECT_EQ(j["results"][0]["verification"]["failures"], 0);
  EXPECT_NE(r.out.find("Key type: string, 24 bytes"), std::string::npos) << r.out;
  r = nvindex(std::string("bench") + kSmall +
              "--key-type string --key-size 12 --sequential-keys --workload ycsb-a --format json "
              "--output " +
              out);
  ASSERT_EQ(r.rc, 0) << r.err;
  j = nlohmann::json::parse(slurp(out));
  EXPECT_EQ(j["options"]["key_size"], 12);
  ASSERT_GE(j["results"].size(), 1u);
  for (const auto& res : j["results"]) {
    EXPECT_TRUE(res["info"]["string_keys"].get<bool>()) << res["index"];
    EXPECT_EQ(res["verification"]["failures"], 0) << res["index"];
  }
  r = nvindex(std::string("bench") + kSmall + "--index absl-btree --format json --output " + out);
  ASSERT_EQ(r.rc, 0) << r.err;
  j = nlohmann::json::parse(slurp(out));
  EXPECT_EQ(j["options"]["key_type"], "integer");
  EXPECT_EQ(j["options"]["key_size"], 8);
  fs::remove(out);
}

// A keys file of words: each line's bytes are a key, duplicates skipped; a
// line longer than 255 bytes is a usage error naming the line.
TEST_F(Cli, StringKeysFileOfWords) {
  const std::string words = tmp_path("words.txt"), bad = tmp_path("long-words.txt");
  const std::string out = tmp_path("words.json");
  {
    std::ofstream f(words);
    for (int i = 0; i < 500; ++i) f << "word" << i * 7919 % 1000 << (i % 3 ? "s" : "'s") << "\n";
    f << "word0's\n";  // a duplicate of line 1
    f << "caf\xc3\xa9 au lait\n";
    std::ofstream(bad) << "short\n" << std::string(256, 'x') << "\n";
  }
  Outcome r = nvindex("bench --quiet --index absl-btree --key-type string --keys-file " + words +
                      " -p 2000 --workload ycsb-b --format json --output " + out);
  ASSERT_EQ(r.rc, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(slurp(out));
  EXPECT_EQ(j["results"][0]["verification"]["failures"], 0);
  EXPECT_EQ(j["results"][0]["load"]["operations"], 501);
  r = nvindex("bench --quiet --index absl-btree --key-type string --keys-file " + bad);
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find(bad + ":2: key of 256 bytes is longer than 255"), std::string::npos)
      << r.err;
  for (const std::string& f : {words, bad, out}) fs::remove(f);
}

TEST_F(Cli, TraceRunOfSharedSamplesHasNoFailures) {
  const char* data = std::getenv("NVINDEX_DATA");
  if (data == nullptr) GTEST_SKIP() << "NVINDEX_DATA not set";
  const std::string dir = std::string(data) + "/ycsb/";
  if (!fs::exists(dir + "load_randint_workloada")) GTEST_SKIP() << "no samples in " << dir;
  for (const char* w : {"workloada", "workloade"}) {
    const std::string out = tmp_path(std::string(w) + ".json");
    Outcome r =
        nvindex("bench --quiet --index absl-btree -t 2 --trace-load " + dir + "load_randint_" + w +
                " --trace-run " + dir + "txn_randint_" + w + " --format json --output " + out);
    ASSERT_EQ(r.rc, 0) << w << ": " << r.err;
    const nlohmann::json j = nlohmann::json::parse(slurp(out));
    EXPECT_EQ(j["results"][0]["verification"]["failures"], 0) << w;
    EXPECT_EQ(j["results"][0]["load"]["operations"], 10000) << w;
    EXPECT_EQ(j["results"][0]["run"]["operations"], 10000) << w;
    fs::remove(out);
  }
}

// The string-key samples: refused without --key-type string (the message
// says to pass it), replayed with it at 1 and 2 threads, no failures.
TEST_F(Cli, StringTraceRunOfSharedSamplesHasNoFailures) {
  const char* data = std::getenv("NVINDEX_DATA");
  if (data == nullptr) GTEST_SKIP() << "NVINDEX_DATA not set";
  const std::string dir = std::string(data) + "/ycsb/";
  if (!fs::exists(dir + "load_string_workloada")) GTEST_SKIP() << "no samples in " << dir;
  Outcome r =
      nvindex("bench --quiet --index absl-btree --trace-load " + dir + "load_string_workloada");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("pass --key-type string"), std::string::npos) << r.err;
  for (const char* w : {"workloada", "workloade"}) {
    for (const char* threads : {"1", "2"}) {
      SCOPED_TRACE(std::string(w) + " threads " + threads);
      const std::string out = tmp_path(std::string(w) + "-string.json");
      r = nvindex("bench --quiet --index absl-btree --key-type string -t " + std::string(threads) +
                  " --trace-load " + dir + "load_string_" + w + " --trace-run " + dir +
                  "txn_string_" + w + " --format json --output " + out);
      ASSERT_EQ(r.rc, 0) << r.err;
      const nlohmann::json j = nlohmann::json::parse(slurp(out));
      EXPECT_EQ(j["options"]["key_type"], "string");
      EXPECT_EQ(j["results"][0]["verification"]["failures"], 0);
      EXPECT_EQ(j["results"][0]["load"]["operations"], 10000);
      EXPECT_EQ(j["results"][0]["run"]["operations"], 10000);
      fs::remove(out);
    }
  }
}

TEST_F(Cli, BenchEnergyGivesFiguresOrTheReasonThereAreNone) {
  // This machine: figures, or the one line with the reason (never silence).
  Outcome r = nvindex(std::string("bench --index btree --energy") + kSmall);
  ASSERT_EQ(r.rc, 0) << r.err;
  const bool figures =
      r.out.find("Energy (RAPL, whole machine over the phase):") != std::string::npos;
  const bool reason = r.out.find("Energy: not available on this machine (") != std::string::npos;
  EXPECT_TRUE(figures != reason) << r.out;
  r = nvindex(std::string("bench --index btree --energy --format json") + kSmall);
  ASSERT_EQ(r.rc, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  const nlohmann::json& e = j["options"]["energy"];
  if (e["available"].get<bool>()) {
    EXPECT_TRUE(j["results"][0]["run"]["energy"]["package_j"].is_number()) << j.dump();
  } else {
    EXPECT_FALSE(e["reason"].get<std::string>().empty()) << e.dump();
    EXPECT_EQ(j["results"][0]["run"]["energy"]["reason"], e["reason"]);
  }

  // No powercap tree at all (this VM's case, forced on any machine).
  r = nvindex(std::string("bench --index btree,fastfair --energy --powercap-root /nonexistent/pc") +
              kSmall);
  ASSERT_EQ(r.rc, 0) << r.err;
  const std::string line =
      "Energy: not available on this machine (no /nonexistent/pc: the machine exposes no RAPL "
      "counters)\n";
  EXPECT_NE(r.out.find(line), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find(" J package"), std::string::npos) << r.out;
  r = nvindex(
      std::string("bench --index btree --energy --powercap-root /nonexistent/pc --format json") +
      kSmall);
  ASSERT_EQ(r.rc, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["options"]["energy"]["available"], false);
  for (const char* phase : {"load", "run"}) {
    EXPECT_EQ(j["results"][0][phase]["energy"]["available"], false) << phase;
    EXPECT_NE(
        j["results"][0][phase]["energy"]["reason"].get<std::string>().find("no /nonexistent/pc"),
        std::string::npos);
  }

  // A fake powercap tree (a package zone and its DRAM subzone): figures for
  // each phase. The fake counters stand still, so every figure is 0 J.
  const fs::path tree = tmp_path("powercap");
  for (const auto& [dir, name] : {std::pair<std::string, std::string>{"intel-rapl:0", "package-0"},
                                  {"intel-rapl:0:0", "dram"}}) {
    fs::create_directories(tree / dir);
    std::ofstream(tree / dir / "name") << name << "\n";
    std::ofstream(tree / dir / "energy_uj") << 123456 << "\n";
    std::ofstream(tree / dir / "max_energy_range_uj") << 262143328850ull << "\n";
  }
  r = nvindex("bench --index btree --energy --powercap-root " + tree.string() + kSmall);
  ASSERT_EQ(r.rc, 0) << r.err;
  for (const char* s : {"Energy (RAPL, whole machine over the phase):\n",
                        "\tload 0.000 J package, 0.000 J DRAM; 0.000 uJ/op package, 0.000 uJ/op "
                        "DRAM\n",
                        "\trun  0.000 J package, 0.000 J DRAM; 0.000 uJ/op package, 0.000 uJ/op "
                        "DRAM\n"}) {
    EXPECT_NE(r.out.find(s), std::string::npos) << "missing '" << s << "' in\n" << r.out;
  }
  EXPECT_EQ(r.out.find("not available on this machine"), std::string::npos) << r.out;
  r = nvindex("bench --index btree --energy --format json --powercap-root " + tree.string() +
              kSmall);
  ASSERT_EQ(r.rc, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["options"]["energy"], (nlohmann::json{{"available", true}, {"dram", true}}));
  const nlohmann::json& run = j["results"][0]["run"]["energy"];
  EXPECT_EQ(run["available"], true);
  EXPECT_EQ(run["package_j"], 0.0);
  EXPECT_EQ(run["dram_j"], 0.0);
  EXPECT_EQ(run["package_j_per_op"], 0.0);
  fs::remove_all(tree);
}

TEST_F(Cli, TpccRunsChecksAndReportsInBothFormats) {
  Outcome r = nvindex("tpcc --index btree -n 1000 --energy --quiet");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("consistency: the 12 conditions of clause 3.3.2 hold"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("tx/s"), std::string::npos);
  // Energy: a figure or the reason there is none, never silence.
  EXPECT_NE(r.out.find("energy"), std::string::npos) << r.out;
  r = nvindex("tpcc --index btree -n 500 --energy --quiet --format json");
  ASSERT_EQ(r.rc, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["schema"], "nvindex.tpcc/1");
  EXPECT_EQ(j["results"][0]["run"]["transactions"], 500);
  EXPECT_TRUE(j["results"][0]["check"]["ok"].get<bool>());
  const nlohmann::json& e = j["options"]["energy"];
  EXPECT_TRUE(e["available"].get<bool>() || !e["reason"].get<std::string>().empty()) << e.dump();
}

TEST_F(Cli, TpccRowsPmSurvivesAKilledRunAndChecksOnly) {
  // The pools go to /dev/shm when it is writable (about 1 GiB for one
  // warehouse and 100,000 transactions; pm::Pool::create allocates it all).
  const std::string base = access("/dev/shm", W_OK) == 0 ? "/dev/shm/" : ::testing::TempDir();
  const std::string dir = base + "nvindex-cli-tpcc-kill-" + std::to_string(getpid());
  const std::string err = tmp_path("tpcc-kill-stderr");
  fs::remove_all(dir);
  const std::string cmd = std::string(std::getenv("NVINDEX_BIN")) +
                          " tpcc --index fastfair --rows pm -n 100000 --pool " + dir +
                          " >/dev/null 2>" + err + " & echo $!";
  std::FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  long pid = 0;
  ASSERT_EQ(std::fscanf(p, "%ld", &pid), 1);
  pclose(p);
  // Kill it (SIGKILL: no clean close) 0.3 s into the run, after the load.
  bool running = false;
  for (int i = 0; i < 1200 && !running; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    running = slurp(err).find("running") != std::string::npos;
  }
  ASSERT_TRUE(running) << slurp(err);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const bool killed = kill(static_cast<pid_t>(pid), SIGKILL) == 0;
  for (int i = 0; i < 100 && kill(static_cast<pid_t>(pid), 0) == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(killed) << "the run ended before the kill: " << slurp(err);
  Outcome r = nvindex("tpcc --check-only --quiet --format json --pool " + dir);
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  const nlohmann::json& res = j["results"][0];
  EXPECT_EQ(res["index"], "fastfair");
  EXPECT_FALSE(res["recovery"]["clean_shutdown"].get<bool>());
  EXPECT_TRUE(res["check"]["ok"].get<bool>()) << res.dump();
  // A second check after the recovery's clean close: nothing left to undo.
  r = nvindex("tpcc --check-only --quiet --pool " + dir);
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("reopened after a clean close; 0 transaction(s) rolled back"),
            std::string::npos)
      << r.out;
  fs::remove_all(dir);
  fs::remove(err);
  // Bad usage: no --pool, a directory without a database, rows in PM for a
  // volatile index or without pool files.
  EXPECT_EQ(nvindex("tpcc --check-only").rc, 2);
  EXPECT_EQ(nvindex("tpcc --check-only --pool " + dir).rc, 2);  // missing: usage
  fs::create_directory(dir);
  EXPECT_EQ(nvindex("tpcc --check-only --pool " + dir).rc, 1);  // no database in it
  fs::remove_all(dir);
  EXPECT_EQ(nvindex("tpcc --index btree --rows pm -n 10").rc, 2);
  EXPECT_EQ(nvindex("tpcc --index fastfair --rows pm --pm-mode dram -n 10").rc, 2);
}

// make bench's TPC-C section: scripts/plot.py --tpcc over two nvindex tpcc
// reports (1 and 2 clients) writes the summary table and tpcc.png.
TEST_F(Cli, BenchPibenchSummaryHasEveryIndexAndTheSmoTimeTable) {
  const std::string here = __FILE__;  // <src>/tests/tool_cli_test.cc
  const std::string script = here.substr(0, here.rfind("/tests/")) + "/scripts/bench-pibench";
  ASSERT_TRUE(fs::exists(script)) << script;
  const char* bin = std::getenv("NVINDEX_BIN");
  ASSERT_NE(bin, nullptr);
  const std::string dir = tmp_path("pibench");
  fs::create_directories(dir);
  // Bad usage: exit 2, nothing run.
  std::string cmd = "/usr/bin/python3 " + script + " --bin " + bin + " --mixes nosuch --results " +
                    dir + " >/dev/null 2>&1";
  EXPECT_EQ(WEXITSTATUS(std::system(cmd.c_str())), 2) << cmd;
  cmd = "/usr/bin/python3 " + script + " --bin " + bin +
        " --indexes lbtree,fastfair,no-such-index --subject lbtree --records 3000 --operations "
        "3000 --mixes ins50 --dists uniform --threads 1 --results " +
        dir + " 2>/dev/null";
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  char buf[4096] = {};
  const size_t n = std::fread(buf, 1, sizeof(buf) - 1, p);
  ASSERT_EQ(WEXITSTATUS(::pclose(p)), 0) << cmd;
  std::string path(buf, n);
  while (!path.empty() && path.back() == '\n') path.pop_back();
  const std::string t = slurp(path);
  EXPECT_NE(t.find("| lbtree | uniform | 1 |"), std::string::npos) << t;
  EXPECT_NE(t.find("| fastfair | uniform | 1 |"), std::string::npos) << t;
  EXPECT_EQ(t.find("no-such-index |"), std::string::npos) << t;
  // Both trees split while loading 3000 keys: timed SMOs in the load row.
  EXPECT_NE(t.find("| lbtree | load | "), std::string::npos) << t;
  EXPECT_EQ(t.find("| lbtree | load | 0 |"), std::string::npos) << t;
  EXPECT_EQ(t.find("FAILED"), std::string::npos) << t;
  fs::remove_all(dir);
}

TEST_F(Cli, PlotPyTpccSummaryAndPlot) {
  if (std::system("/usr/bin/python3 -c 'import matplotlib' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "no /usr/bin/python3 with matplotlib";
  }
  const std::string here = __FILE__;  // <src>/tests/tool_cli_test.cc
  const std::string plot = here.substr(0, here.rfind("/tests/")) + "/scripts/plot.py";
  ASSERT_TRUE(fs::exists(plot)) << plot;
  const std::string c1 = tmp_path("tpcc-c1.json"), c2 = tmp_path("tpcc-c2.json");
  for (const auto& [clients, out] : {std::pair<int, std::string>{1, c1}, {2, c2}}) {
    const Outcome r = nvindex("tpcc --index btree,fastfair -w 1 -n 400 --quiet --format json -c " +
                              std::to_string(clients) + " --output " + out);
    ASSERT_EQ(r.rc, 0) << r.err;
    // The report names the page backing of fastfair's pools; btree has none.
    const nlohmann::json j = nlohmann::json::parse(slurp(out));
    EXPECT_FALSE(j["results"][0].contains("pool_pages")) << j["results"][0]["index"];
    const nlohmann::json& pages = j["results"][1]["pool_pages"];
    EXPECT_GE(pages["page_bytes"].get<uint64_t>(), 4096u);
    EXPECT_GT(pages["resident_bytes"].get<uint64_t>(), 0u);
    EXPECT_LE(pages["huge_bytes"].get<uint64_t>(), pages["resident_bytes"].get<uint64_t>());
  }
  const std::string dir = tmp_path("tpcc-plots"), summary = dir + "/summary.txt";
  fs::create_directories(dir);
  const std::string cmd = "/usr/bin/python3 " + plot + " --tpcc --summary " + summary + " " + dir +
                          " " + c2 + " " + c1 + " " + tmp_path("missing.json") + " >/dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const std::string t = slurp(summary);
  // Columns by client count, sorted (c1 before c2 whatever the order given).
  EXPECT_NE(t.find("tx/s c1    tx/s c2   c2/c1   /btree c1   /btree c2"), std::string::npos) << t;
  std::istringstream lines(t);
  std::string line;
  int rows = 0;
  while (std::getline(lines, line)) {
    if (line.rfind("btree ", 0) == 0 || line.rfind("fastfair ", 0) == 0) {
      ++rows;
      EXPECT_NE(line.find(" ok"), std::string::npos) << line;  // the consistency check
    }
    // btree against itself: 1.00 with each client count.
    if (line.rfind("btree ", 0) == 0) {
      EXPECT_NE(line.find("1.00        1.00"), std::string::npos) << line;
    }
  }
  EXPECT_EQ(rows, 2) << t;
  EXPECT_NE(t.find("options: 1 client(s): 1 warehouse(s), 400 transactions; 2 client(s): 1 "
                   "warehouse(s), 400 transactions;"),
            std::string::npos)
      << t;
  EXPECT_GT(fs::file_size(dir + "/tpcc.png"), 1000u);
  fs::remove_all(dir);
  fs::remove(c1);
  fs::remove(c2);
}

TEST_F(Cli, TpccRefusesBadUsage) {
  EXPECT_EQ(nvindex("tpcc --index nope -n 10").rc, 2);
  EXPECT_EQ(nvindex("tpcc --index btree -n 0").rc, 2);
  EXPECT_EQ(nvindex("tpcc --index btree --warehouses 0").rc, 2);
  EXPECT_EQ(nvindex("tpcc --index btree --format xml").rc, 2);
  const Outcome r = nvindex("tpcc --index btree --node-size 100 -n 10");
  EXPECT_EQ(r.rc, 2);
  EXPECT_FALSE(r.err.empty());
}

// PiBench wrappers as indexes (src/pibench/import.h): our own exported
// plugin (libnvindex_pibench.so over btree, $NVINDEX_PIBENCH_SO) imported
// beside nvindex's btree in one call, every operation checked, and the
// figures a wrapper cannot give reported as "n/a: plugin".
TEST_F(Cli, PibenchWrapperRunsBesideOurIndexAndIsChecked) {
  const char* so = std::getenv("NVINDEX_PIBENCH_SO");
  if (so == nullptr) GTEST_SKIP() << "NVINDEX_PIBENCH_SO not set";
  const std::string out = tmp_path("pibench.json");
  const std::string wrapper = std::string("pibench:") + so;
  Outcome r = nvindex(std::string("bench") + kSmall + "--index '" + wrapper +
                          ",btree' -t 2 --workload ycsb-e --format json --output " + out,
                      300);
  ASSERT_EQ(r.rc, 0) << r.err << r.out;
  const nlohmann::json j = nlohmann::json::parse(slurp(out));
  ASSERT_EQ(j["results"].size(), 2u);
  const nlohmann::json& p = j["results"][0];
  EXPECT_EQ(p["index"], "libnvindex_pibench.so");
  EXPECT_EQ(p["info"]["plugin"], true);
  EXPECT_EQ(p["run"]["pm"]["available"], false);
  EXPECT_EQ(p["run"]["pm"]["reason"], "n/a: plugin");
  EXPECT_EQ(p["memory"]["reason"], "n/a: plugin");
  EXPECT_EQ(p["verification"]["structure"]["height"], "n/a: plugin");
  EXPECT_EQ(j["results"][1]["info"]["plugin"], false);
  for (const auto& res : j["results"]) {
    EXPECT_EQ(res["verification"]["failures"], 0) << res["verification"]["examples"];
    EXPECT_GT(res["run"]["by_type"]["scan"]["succeeded"], 0) << "YCSB E scans the wrapper";
    // Loaded keys plus the run's inserts, counted by scans for the wrapper.
    EXPECT_EQ(res["verification"]["structure"]["keys"],
              2000 + res["run"]["by_type"]["insert"]["succeeded"].get<int>());
  }
  fs::remove(out);
  // value_bits=40: values go in shifted right by 24 bits and come back
  // shifted left, every check still passing; scan=no: no scans, and the
  // keys cannot be counted (NotSupported, not a failure: exit 0).
  r = nvindex(std::string("bench") + kSmall + "--index '" + wrapper + ":value_bits=40,pibench:" +
                  so + ":scan=no' --workload ycsb-e --format json " + "--output " + out,
              300);
  ASSERT_EQ(r.rc, 0) << r.err << r.out;
  const nlohmann::json v = nlohmann::json::parse(slurp(out));
  ASSERT_EQ(v["results"].size(), 2u);
  EXPECT_EQ(v["results"][0]["index"], "libnvindex_pibench.so:value_bits=40");
  EXPECT_EQ(v["results"][0]["verification"]["failures"], 0);
  EXPECT_GT(v["results"][0]["run"]["by_type"]["scan"]["succeeded"], 0);
  EXPECT_EQ(v["results"][1]["run"]["skipped"],
            v["results"][0]["run"]["by_type"]["scan"]["completed"]);
  EXPECT_NE(v["results"][1]["verification"]["structure"]["message"].get<std::string>().find(
                "cannot be counted"),
            std::string::npos);
  fs::remove(out);
  // The crash lab and TPC-C refuse a wrapper with the reason.
  r = nvindex("crashtest --index " + wrapper);
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("not a PiBench wrapper"), std::string::npos) << r.err;
  r = nvindex("tpcc --quiet --index " + wrapper);
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("find_last_less_than"), std::string::npos) << r.err;
}

// A broken wrapper is a usage error (exit 2) naming the cause, never a
// crash: a library that cannot be loaded, one without create_tree, one
// whose create_tree returns nullptr, one built against a fork's tree_api
// (bulk_load before find in the vtable: tests/pibench/fork_vtable.cc).
TEST_F(Cli, PibenchBrokenWrappersAreUsageErrors) {
  const char* dir = std::getenv("NVINDEX_PIBENCH_TEST_DIR");
  if (dir == nullptr) GTEST_SKIP() << "NVINDEX_PIBENCH_TEST_DIR not set";
  const std::string d = std::string(dir) + "/";
  const std::pair<std::string, std::string> cases[] = {
      {"pibench:" + d + "no-such-wrapper.so", "cannot load PiBench wrapper"},
      {"pibench:" + d + "libpibench_no_symbol.so", "has no symbol 'create_tree'"},
      {"pibench:" + d + "libpibench_null_tree.so", "create_tree returned nullptr"},
      {"pibench:" + d + "libpibench_fork_vtable.so", "bulk_load before find"},
      {"pibench:" + d + "libpibench_crash_on_find.so", "the probe crashed"},
      {"pibench:" + d + "libpibench_null_tree.so:scan=maybe", "option 'scan=maybe' invalid"},
      {"pibench:" + d + "libpibench_null_tree.so:value_bits=3a", "option 'value_bits=3a' invalid"},
      {"pibench:" + d + "libpibench_null_tree.so:value_bits=31", "option 'value_bits=31' invalid"},
      {"pibench:", "expected pibench:PATH.so"},
  };
  for (const auto& [spec, message] : cases) {
    Outcome r = nvindex(std::string("bench") + kSmall + "--index '" + spec + "'", 60);
    EXPECT_EQ(r.rc, 2) << spec << ": " << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << spec << ": " << r.err;
  }
}

}  // namespace
