// TPC-C with rows in persistent memory (src/tpcc/rows.h): every registered
// persistent ordered index keeps a database across a clean close; a
// transaction interrupted after its undo log turned active is rolled back
// at the next open; open refuses what is not a complete TPC-C database.
// (A process killed mid-run is in tests/tool_cli_test.cc, Cli.TpccRowsPm*.)
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "nvindex/index.h"
#include "nvindex/pm/pool.h"
#include "tpcc/check.h"
#include "tpcc/db.h"
#include "tpcc/driver.h"
#include "tpcc/load.h"
#include "tpcc/lock_table.h"
#include "tpcc/txn.h"

namespace nvindex::tpcc {
namespace {

namespace fs = std::filesystem;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitizer = true;
#else
constexpr bool kSanitizer = false;
#endif

/// A fresh directory under the test's temp dir, removed with the object.
struct TempDir {
  std::string path;
  explicit TempDir(const std::string& name)
      : path(::testing::TempDir() + "nvindex-tpcc-rows-" + std::to_string(getpid()) + "-" + name) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

DbOptions pm_options(const std::string& index, const std::string& dir, uint64_t transactions) {
  DbOptions o;
  o.index = index;
  o.warehouses = 1;
  o.clients = 1;
  o.pool_dir = dir;
  o.keep_pools = true;
  o.rows = RowPlace::kPm;
  o.expected_transactions = transactions;
  return o;
}

/// Loads a new database of `index` with rows in PM into `dir` and runs
/// `transactions`; the database is closed (cleanly) on return.
void create_load_run(const std::string& index, const std::string& dir, uint64_t transactions) {
  std::unique_ptr<Database> db;
  Status s = Database::create(pm_options(index, dir, transactions), &db);
  ASSERT_TRUE(s.ok()) << s.ToString();
  NurandConstants load_c, run_c;
  draw_constants(3, &load_c, &run_c);
  s = load(*db, 3, load_c, 1, nullptr);
  ASSERT_TRUE(s.ok()) << s.ToString();
  RunOptions ro;
  ro.transactions = transactions;
  ro.seed = 3;
  ro.constants = run_c;
  RunStats stats;
  s = run(*db, ro, &stats);
  ASSERT_TRUE(s.ok()) << s.ToString();
}

/// Sum of W_YTD and of C_BALANCE over warehouse 1: two figures every
/// Payment changes.
std::pair<int64_t, int64_t> money(Database& db) {
  const auto wv = db.index(Table::kWarehouse).lookup(key::warehouse(1));
  EXPECT_TRUE(wv.has_value());
  int64_t balance = 0;
  std::vector<std::pair<uint64_t, Value>> out;
  db.index(Table::kCustomer).scan(0, kDistricts * kCustomers + 1, &out);
  for (const auto& [k, v] : out) balance += db.row<Customer>(v)->c_balance;
  return {wv ? db.row<Warehouse>(*wv)->w_ytd : 0, balance};
}

std::vector<std::string> persistent_ordered_indexes() {
  std::vector<std::string> out;
  for (const IndexEntry& e : registered_indexes()) {
    if (!e.caps.ordered || !needs_pool(e.caps) || is_test_only_index(e.name)) continue;
    if (kSanitizer && e.name != "fastfair") continue;
    out.emplace_back(e.name);
  }
  return out;
}

TEST(TpccRows, EveryPersistentIndexKeepsTheDatabaseAcrossAReopen) {
  const std::vector<std::string> names = persistent_ordered_indexes();
  ASSERT_FALSE(names.empty());
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    TempDir dir(name);
    create_load_run(name, dir.path, 2300);
    std::unique_ptr<Database> db;
    RowsRecovery rec;
    Status s = Database::open(dir.path, pm::Mode::kEmulated, 1, &db, &rec);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_TRUE(rec.clean_shutdown);
    EXPECT_EQ(rec.undone_transactions, 0u);
    EXPECT_EQ(db->options().index, name);
    EXPECT_TRUE(db->rows_in_pm());
    CheckReport rep;
    s = check_consistency(*db, &rep);
    EXPECT_TRUE(s.ok()) << s.ToString();
    EXPECT_GT(rep.rows_read, 400000u);
    // The reopened database runs on (its history keys go on after the
    // last, its rows come from the recovered allocator) and stays whole.
    NurandConstants load_c, run_c;
    draw_constants(4, &load_c, &run_c);
    RunOptions ro;
    ro.transactions = 1000;
    ro.seed = 4;
    ro.constants = run_c;
    RunStats stats;
    s = run(*db, ro, &stats);
    ASSERT_TRUE(s.ok()) << s.ToString();
    s = check_consistency(*db, &rep);
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
}

TEST(TpccRows, APaymentInterruptedAfterItsLogTurnedActiveIsRolledBack) {
  TempDir dir("interrupted");
  std::pair<int64_t, int64_t> before;
  uint64_t entries = 4;  // W_YTD, D_YTD, the customer's money, the history insert
  {
    std::unique_ptr<Database> db;
    ASSERT_TRUE(Database::create(pm_options("fastfair", dir.path, 100), &db).ok());
    NurandConstants load_c, run_c;
    draw_constants(5, &load_c, &run_c);
    ASSERT_TRUE(load(*db, 5, load_c, 1, nullptr).ok());
    before = money(*db);
    LockTable locks;
    Executor ex(*db, locks, 0);  // its first history key: (0, 2^40)
    // Take the history key client 0's next Payment will insert (a valid
    // row of amount 0, so the money conditions still hold): the Payment
    // writes W_YTD, D_YTD and the customer in place, then fails on the
    // insert with its undo log active, as a crash there would leave it.
    History* h = nullptr;
    Value hv = 0;
    ASSERT_TRUE(db->new_row(0, &h, &hv).ok());
    h->h_c_id = 1;
    h->h_c_d_id = 1;
    h->h_c_w_id = 1;
    h->h_d_id = 1;
    h->h_w_id = 1;
    db->flush_row(Table::kHistory, hv);
    ASSERT_TRUE(db->index(Table::kHistory).insert(key::history(0, uint64_t{1} << 40), hv).ok());
    const auto cv = db->index(Table::kCustomer).lookup(key::customer(1, 1, 7));
    ASSERT_TRUE(cv.has_value());
    if (std::strcmp(db->row<Customer>(*cv)->c_credit, "BC") == 0) ++entries;  // and C_DATA
    PaymentInput in;
    in.w_id = in.d_id = in.c_w_id = in.c_d_id = 1;
    in.customer.c_id = 7;
    in.h_amount = 12345;
    PaymentOutput out;
    TxOutcome outcome = TxOutcome::kAborted;
    const Status s = ex.payment(in, &out, &outcome);
    ASSERT_EQ(s.code(), Code::kAlreadyExists) << s.ToString();
    EXPECT_EQ(money(*db).first, before.first + 12345);  // written in place
  }
  std::unique_ptr<Database> db;
  RowsRecovery rec;
  const Status s = Database::open(dir.path, pm::Mode::kEmulated, 1, &db, &rec);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(rec.undone_transactions, 1u);
  EXPECT_EQ(rec.undone_entries, entries);
  EXPECT_EQ(money(*db), before);
  CheckReport rep;
  EXPECT_TRUE(check_consistency(*db, &rep).ok());
}

TEST(TpccRows, CreateRefusesWhatCannotHoldRowsInPm) {
  TempDir dir("refuse");
  std::unique_ptr<Database> db;
  DbOptions o = pm_options("btree", dir.path, 0);  // volatile
  EXPECT_EQ(Database::create(o, &db).code(), Code::kInvalidArgument);
  o = pm_options("fastfair", dir.path, 0);
  o.pm_mode = pm::Mode::kDram;
  EXPECT_EQ(Database::create(o, &db).code(), Code::kInvalidArgument);
  o = pm_options("fastfair", dir.path, 0);
  o.clients = kMaxPmClients + 1;
  EXPECT_EQ(Database::create(o, &db).code(), Code::kInvalidArgument);
  EXPECT_TRUE(fs::is_empty(dir.path));  // nothing left behind
}

TEST(TpccRows, OpenRefusesWhatIsNotACompleteDatabase) {
  std::unique_ptr<Database> db;
  {
    TempDir dir("empty");
    const Status s = Database::open(dir.path, pm::Mode::kEmulated, 1, &db, nullptr);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
  }
  {
    // Created, never loaded (a crash during the load looks the same).
    TempDir dir("unloaded");
    ASSERT_TRUE(Database::create(pm_options("fastfair", dir.path, 0), &db).ok());
    db.reset();
    const Status s = Database::open(dir.path, pm::Mode::kEmulated, 1, &db, nullptr);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find("load never finished"), std::string::npos) << s.ToString();
  }
  {
    // A rows.pool that is some index's pool, not a rows pool.
    TempDir dir("foreign");
    std::unique_ptr<pm::Pool> p;
    ASSERT_TRUE(pm::Pool::create(dir.path + "/rows.pool", pm::kMinPoolSize, "fastfair",
                                 pm::Mode::kEmulated, &p)
                    .ok());
    p.reset();
    const Status s = Database::open(dir.path, pm::Mode::kEmulated, 1, &db, nullptr);
    EXPECT_FALSE(s.ok());
    EXPECT_EQ(db, nullptr);
  }
  {
    // A damaged root (magic) and a damaged undo log (an entry of unknown
    // kind in an active log): Corruption, and nothing changed.
    TempDir dir("damaged");
    create_load_run("fastfair", dir.path, 50);
    auto patch = [&](auto&& edit) {
      std::unique_ptr<pm::Pool> p;
      ASSERT_TRUE(
          pm::Pool::open(dir.path + "/rows.pool", kRowsLayout, pm::Mode::kEmulated, &p).ok());
      edit(*p, *p->ptr<RowsRoot>(p->root()));
      p->keep_unclean();
    };
    patch([](pm::Pool&, RowsRoot& r) { r.magic[0] = 'X'; });
    Status s = Database::open(dir.path, pm::Mode::kEmulated, 1, &db, nullptr);
    EXPECT_EQ(s.code(), Code::kCorruption) << s.ToString();
    patch([](pm::Pool& p, RowsRoot& r) {
      r.magic[0] = 'T';
      auto* words = p.ptr<uint64_t>(r.logs[0][0]);
      words[0] = 1;   // active
      words[1] = 24;  // one entry
      std::memset(p.ptr<char>(r.logs[0][0]) + 64, 0x7f, 24);
    });
    s = Database::open(dir.path, pm::Mode::kEmulated, 1, &db, nullptr);
    EXPECT_EQ(s.code(), Code::kCorruption) << s.ToString();
    EXPECT_NE(s.message().find("unknown entry kind"), std::string::npos) << s.ToString();
  }
}

}  // namespace
}  // namespace nvindex::tpcc
