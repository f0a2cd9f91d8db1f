// Tests of UndoLog (src/indexes/common/undo_log.h), the write-ahead log of
// btree-wal and persistent-unsorted, on its own: a transaction cut short
// (sealed, changed, never committed) is rolled back by recovery, once; a
// committed one is kept; a damaged record, or a valid record in a cleanly
// closed pool, is Corruption before anything is written; a transaction that
// saves nothing writes no record. The crash lab
// covers the log through the two indexes at every crash point.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "indexes/common/undo_log.h"
#include "nvindex/pm/counters.h"
#include "nvindex/pm/pool.h"

namespace nvindex {
namespace {

class UndoLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(pm::Pool::create_anonymous(4ull << 20, "undo-log-test", &pool_).ok());
    ASSERT_TRUE(pool_->allocator().allocate(64, &table_off_).ok());
    ASSERT_TRUE(pool_->allocator().allocate(256, &data_off_).ok());
    ASSERT_TRUE(UndoLog::create(pool_.get(), kSlots, 1, table(), "test", &log_).ok());
    fill_data('a');
  }
  std::atomic<uint64_t>* table() { return pool_->ptr<std::atomic<uint64_t>>(table_off_); }
  char* data() { return pool_->ptr<char>(data_off_); }
  void fill_data(char c) { std::memset(data(), c, 256); }
  bool data_is(char c) {
    for (int i = 0; i < 256; ++i) {
      if (data()[i] != c) return false;
    }
    return true;
  }
  // Byte p of slot s's first block.
  char* slot_byte(uint32_t s, uint64_t p) { return pool_->ptr<char>(table()[s].load()) + p; }
  // A transaction that saves the data block's first 128 bytes, changes them
  // to 'b', and stops before its commit: the state a crash leaves.
  void cut_short() {
    auto tx = log_->begin();
    tx.save(data(), 128);
    tx.seal();
    std::memset(data(), 'b', 128);
    tx.dirty(data(), 128);
  }
  // The log reopened from its table, as a recovery does.
  std::unique_ptr<UndoLog> reopen() {
    std::unique_ptr<UndoLog> log;
    EXPECT_TRUE(UndoLog::open(pool_.get(), kSlots, 1, table(), "test", &log).ok());
    return log;
  }

  static constexpr uint32_t kSlots = 2;
  std::unique_ptr<pm::Pool> pool_;
  uint64_t table_off_ = 0, data_off_ = 0;
  std::unique_ptr<UndoLog> log_;
};

TEST_F(UndoLogTest, ACutShortTransactionIsRolledBackOnce) {
  cut_short();
  ASSERT_FALSE(data_is('a'));
  auto log = reopen();
  uint32_t rolled = 0;
  ASSERT_TRUE(log->recover(false, &rolled).ok());
  EXPECT_EQ(rolled, 1u);
  EXPECT_TRUE(data_is('a')) << "the saved bytes were not restored";
  ASSERT_TRUE(log->recover(false, &rolled).ok());
  EXPECT_EQ(rolled, 0u) << "the record stayed valid after its rollback";
}

TEST_F(UndoLogTest, ACommittedTransactionIsKept) {
  {
    auto tx = log_->begin();
    tx.save(data(), 128);
    tx.seal();
    std::memset(data(), 'b', 128);
    tx.dirty(data(), 128);
    tx.commit();
  }
  auto log = reopen();
  uint32_t rolled = 7;
  ASSERT_TRUE(log->recover(false, &rolled).ok());
  EXPECT_EQ(rolled, 0u);
  for (int i = 0; i < 256; ++i) ASSERT_EQ(data()[i], i < 128 ? 'b' : 'a') << i;
}

// A transaction that saves nothing writes no record: with nothing dirtied it
// writes and fences nothing at all (an SMO of persistent-unsorted:inner=dram
// over DRAM inner nodes only); with ranges dirtied, commit() persists them
// (one fence) and writes no state word.
TEST_F(UndoLogTest, ATransactionThatSavesNothingWritesNoRecord) {
  pm::CounterSnapshot before = pm::snapshot();
  {
    auto tx = log_->begin();
    tx.seal();
    tx.commit();
  }
  pm::CounterSnapshot d = pm::snapshot() - before;
  EXPECT_EQ(d.flushes, 0u);
  EXPECT_EQ(d.fences, 0u);
  EXPECT_EQ(d.naws, 0u);
  before = pm::snapshot();
  {
    auto tx = log_->begin();
    std::memset(data(), 'c', 64);
    tx.dirty(data(), 64);
    tx.commit();
  }
  d = pm::snapshot() - before;
  EXPECT_EQ(d.flushes, 1u);
  EXPECT_EQ(d.fences, 1u);
  EXPECT_EQ(d.naws, 0u) << "no record, so no valid mark to clear";
  auto log = reopen();
  uint32_t rolled = 7;
  ASSERT_TRUE(log->recover(false, &rolled).ok());
  EXPECT_EQ(rolled, 0u);
}

TEST_F(UndoLogTest, AValidRecordInACleanlyClosedPoolIsCorruption) {
  cut_short();
  auto log = reopen();
  uint32_t rolled = 0;
  const Status s = log->recover(true, &rolled);
  EXPECT_EQ(s.code(), Code::kCorruption);
  EXPECT_NE(s.message().find("closed cleanly"), std::string::npos) << s.message();
  EXPECT_EQ(std::memcmp(data(), std::string(128, 'b').data(), 128), 0) << "recovery wrote";
}

// Each damage: Corruption naming it, and nothing written.
TEST_F(UndoLogTest, DamagedRecordsAreCorruptionAndNothingIsWritten) {
  struct Case {
    const char* what;
    uint64_t at;     // slot byte to overwrite
    uint64_t value;  // with this word
    const char* words;
  };
  const Case cases[] = {
      {"state word", 0, 7, "neither 0 nor 1"},
      {"payload length", 8, 1ull << 40, "does not fit"},
      {"segment offset", 64, 3, "misaligned"},
      {"segment offset past the pool", 64, 1ull << 40, "outside the pool"},
      {"segment length", 72, 1ull << 20, "past the payload"},
  };
  cut_short();
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    uint64_t saved;
    uint32_t s0 = 0;
    // The record is in whichever slot the transaction took.
    if (reinterpret_cast<std::atomic<uint64_t>*>(slot_byte(0, 0))->load() == 0) s0 = 1;
    std::memcpy(&saved, slot_byte(s0, c.at), 8);
    std::memcpy(slot_byte(s0, c.at), &c.value, 8);
    auto log = reopen();
    uint32_t rolled = 0;
    const Status s = log->recover(false, &rolled);
    EXPECT_EQ(s.code(), Code::kCorruption);
    EXPECT_NE(s.message().find(c.words), std::string::npos) << s.message();
    EXPECT_EQ(std::memcmp(data(), std::string(128, 'b').data(), 128), 0) << "recovery wrote";
    std::memcpy(slot_byte(s0, c.at), &saved, 8);
  }
  // Repaired: the rollback works again.
  auto log = reopen();
  uint32_t rolled = 0;
  ASSERT_TRUE(log->recover(false, &rolled).ok());
  EXPECT_TRUE(data_is('a'));
}

TEST_F(UndoLogTest, ATableEntryThatIsNotALogBlockIsCorruption) {
  table()[1].store(data_off_);  // a 256 B block, not a 4 KiB one
  std::unique_ptr<UndoLog> log;
  const Status s = UndoLog::open(pool_.get(), kSlots, 1, table(), "test", &log);
  EXPECT_EQ(s.code(), Code::kCorruption);
  EXPECT_NE(s.message().find("undo log block 1"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace nvindex
