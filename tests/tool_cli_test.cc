// Tests of the `nvindex` command line (src/tools/{bench,verify,info}.cc): runs
// the binary named by $NVINDEX_BIN and checks exit codes (0 ok, 1 failed
// check, 2 usage), error messages, the JSON report's schema, and a trace run
// over the shared YCSB samples ($NVINDEX_DATA/ycsb).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

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

/// Runs `$NVINDEX_BIN args` through the shell, capturing stdout and stderr.
Outcome nvindex(const std::string& args) {
  const char* bin = std::getenv("NVINDEX_BIN");
  Outcome r;
  if (bin == nullptr) return r;
  const std::string out = tmp_path("stdout"), err = tmp_path("stderr");
  const std::string cmd = std::string(bin) + " " + args + " >" + out + " 2>" + err;
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

TEST_F(Cli, BenchHelpMentionsEveryOption) {
  Outcome r = nvindex("bench --help");
  ASSERT_EQ(r.rc, 0) << r.err;
  for (const char* o : {"--index",         "--records",     "--operations",      "--duration",
                        "--threads",       "--read-ratio",  "--insert-ratio",    "--update-ratio",
                        "--remove-ratio",  "--scan-ratio",  "--rmw-ratio",       "--scan-size",
                        "--distribution",  "--skew",        "--sequential-keys", "--latency-sample",
                        "--seed",          "--workload",    "--keys-file",       "--trace-load",
                        "--trace-run",     "--pool",        "--pool-size",       "--pm-mode",
                        "--pm-latency-ns", "--media-model", "--node-size",       "--format",
                        "--output",        "--json-output", "--keep-pool",       "--quiet",
                        "--list-indexes",  "lying-test"}) {
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
  Outcome r = nvindex("verify --index absl-btree --pool /nonexistent");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("volatile"), std::string::npos) << r.err;
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
  fs::remove(pool);
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

}  // namespace
