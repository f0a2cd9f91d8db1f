// What is specific to the LSM-store yardsticks of issue 14, leveldb and
// rocksdb (src/indexes/common/lsm_store.h; both run the conformance suite
// and the torture by being registered): their directory (created when
// missing, reopened with every key, refused when it is a file, empty, holds
// something else or the other store), their persistence option and
// sync(). Each test runs for both (parameter), in a temporary directory on
// a real disk (tests/support/model_check.h: make_test_device_dir). Whether
// strong persistence syncs every write is bench_driver_test's (it counts the
// disk's write requests).
#include <gtest/gtest.h>

#include <filesystem>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nvindex/index.h"
#include "support/model_check.h"
#include "util/temp_files.h"

namespace nvindex {
namespace {

class LsmStore : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(testing::make_test_device_dir(&dir_)); }
  /// The store's path in the temporary directory (not created).
  std::string path() const { return dir_->path() + "/" + GetParam(); }
  Status open(const std::string& device, std::unique_ptr<Index<uint64_t>>* out,
              const std::string& persistence = "strong") {
    IndexOptions o;
    o.device = device;
    o.threads = 2;
    o.extra["persistence"] = persistence;
    return make_index<uint64_t>(GetParam(), o, out);
  }
  /// The other LSM store's name.
  std::string other() const { return GetParam() == "leveldb" ? "rocksdb" : "leveldb"; }

  std::unique_ptr<util::TempDir> dir_;
};

TEST_P(LsmStore, ReopenKeepsEveryKeyAndSaysItRecovered) {
  std::map<uint64_t, Value> model;
  {
    std::unique_ptr<Index<uint64_t>> idx;
    Status s = open(path(), &idx);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_TRUE(std::filesystem::is_directory(path())) << "the directory is created";
    const IndexInfo i = idx->info();
    EXPECT_FALSE(i.recovered);
    EXPECT_EQ(i.caps.placement, Placement::kBlockDevice);
    for (uint64_t k = 0; k < 300; ++k) {
      ASSERT_TRUE(idx->insert(k * 977, ~k).ok());
      model[k * 977] = ~k;
    }
    for (uint64_t k = 0; k < 300; k += 3) {
      ASSERT_TRUE(idx->remove(k * 977).ok());
      model.erase(k * 977);
    }
    ASSERT_TRUE(idx->update(977, 5).ok());
    model[977] = 5;
  }
  std::unique_ptr<Index<uint64_t>> idx;
  Status s = open(path(), &idx);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(idx->info().recovered);
  EXPECT_GT(idx->info().recovery_seconds, 0.0);
  ASSERT_NO_FATAL_FAILURE(testing::expect_equals_model(*idx, model));
  // Another open of a store in use: the store's own lock refuses it.
  std::unique_ptr<Index<uint64_t>> second;
  s = open(path(), &second);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(second, nullptr);
}

TEST_P(LsmStore, ABadDirectoryIsRefusedAndLeftAsItWas) {
  std::unique_ptr<Index<uint64_t>> idx;
  // No device at all.
  IndexOptions none;
  Status s = make_index<uint64_t>(GetParam(), none, &idx);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
  // A file where the directory should be.
  const std::string file = dir_->path() + "/a-file";
  pm::testing::write_file(file, {'a'});
  s = open(file, &idx);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("not a directory"), std::string::npos) << s.ToString();
  EXPECT_EQ(pm::testing::read_file(file), std::vector<char>{'a'});
  // A non-empty directory without the marker.
  const std::string foreign = dir_->path() + "/foreign";
  std::filesystem::create_directory(foreign);
  pm::testing::write_file(foreign + "/CURRENT", {'x'});
  s = open(foreign, &idx);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("not empty"), std::string::npos) << s.ToString();
  EXPECT_EQ(pm::testing::read_file(foreign + "/CURRENT"), std::vector<char>{'x'});
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(foreign),
                          std::filesystem::directory_iterator()),
            1);
  // The other store's directory.
  const std::string theirs = dir_->path() + "/theirs";
  {
    IndexOptions o;
    o.device = theirs;
    std::unique_ptr<Index<uint64_t>> other_idx;
    ASSERT_TRUE(make_index<uint64_t>(other(), o, &other_idx).ok());
    ASSERT_TRUE(other_idx->insert(1, 1).ok());
  }
  s = open(theirs, &idx);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("holds a " + other() + " store"), std::string::npos) << s.ToString();
  EXPECT_EQ(idx, nullptr);
  // An existing empty directory is a new store.
  const std::string empty = dir_->path() + "/empty";
  std::filesystem::create_directory(empty);
  s = open(empty, &idx);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_FALSE(idx->info().recovered);
}

TEST_P(LsmStore, PersistenceOptionTakesStrongOrWeakOnly) {
  std::unique_ptr<Index<uint64_t>> idx;
  Status s = open(path(), &idx, "sometimes");
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("strong, weak"), std::string::npos) << s.ToString();
  EXPECT_FALSE(std::filesystem::exists(path())) << "a refused option creates nothing";
  for (const char* p : {"strong", "weak"}) {
    SCOPED_TRACE(p);
    std::error_code ec;
    std::filesystem::remove_all(path(), ec);
    s = open(path(), &idx, p);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_TRUE(idx->insert(7, 70).ok());
    EXPECT_EQ(idx->lookup(7), std::optional<Value>(70));
    idx.reset();
  }
}

// Weak persistence: writes, sync() (Ok), more writes and a sync again, then
// a reopen holds every key; sync() on a strong store is Ok too.
TEST_P(LsmStore, SyncMakesWeakWritesDurableAndReopenHoldsThem) {
  std::map<uint64_t, Value> model;
  {
    std::unique_ptr<Index<uint64_t>> idx;
    ASSERT_TRUE(open(path(), &idx, "weak").ok());
    for (uint64_t k = 1; k <= 500; ++k) {
      ASSERT_TRUE(idx->insert(k, k * 3).ok());
      model[k] = k * 3;
    }
    Status s = idx->sync();
    ASSERT_TRUE(s.ok()) << s.ToString();
    for (uint64_t k = 1; k <= 500; k += 2) {
      ASSERT_TRUE(idx->remove(k).ok());
      model.erase(k);
    }
    s = idx->sync();
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  std::unique_ptr<Index<uint64_t>> idx;
  ASSERT_TRUE(open(path(), &idx, "strong").ok());
  ASSERT_NO_FATAL_FAILURE(testing::expect_equals_model(*idx, model));
  Status s = idx->sync();
  EXPECT_TRUE(s.ok()) << s.ToString();
}

INSTANTIATE_TEST_SUITE_P(Stores, LsmStore, ::testing::Values("leveldb", "rocksdb"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace nvindex
