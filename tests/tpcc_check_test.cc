// Tests of the consistency checker (src/tpcc/check.h, TPC-C clause 3.3.2):
// a loaded database passes; for each condition 1..12 the smallest
// corruption of a loaded one-warehouse database that breaks it is reported
// as exactly the conditions it breaks (one alone where one change can break
// it alone), with the condition, warehouse, district and values named; then
// the corruption is undone and the database passes again. One load over
// fastfair (persistent: one pool per table) passes as well.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "tpcc/check.h"
#include "tpcc/db.h"
#include "tpcc/load.h"
#include "tpcc/schema.h"

namespace nvindex::tpcc {
namespace {

constexpr uint64_t kSeed = 7;

Status make_and_load(const DbOptions& o, std::unique_ptr<Database>* db, LoadStats* stats) {
  if (Status st = Database::create(o, db); !st.ok()) return st;
  NurandConstants load_c, run_c;
  draw_constants(kSeed, &load_c, &run_c);
  return load(**db, kSeed, load_c, 1, stats);
}

class TpccCheckTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    DbOptions o;
    o.index = "btree";
    o.warehouses = 1;
    LoadStats stats;
    Status st = make_and_load(o, &db_, &stats);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  static void TearDownTestSuite() { db_.reset(); }

  void SetUp() override { ASSERT_NE(db_, nullptr); }

  template <class Row>
  static Row* row(Table t, uint64_t k) {
    std::optional<Value> v = db_->index(t).lookup(k);
    EXPECT_TRUE(v.has_value()) << table_name(t) << " key " << k;
    return v ? db_->row<Row>(*v) : nullptr;
  }

  /// Applies `corrupt`, expects check_consistency to report Corruption
  /// whose first violation is condition `first` and whose violated
  /// conditions are exactly `want`, then applies `undo` and expects a clean
  /// check. Returns the message.
  static std::string expect_broken(const std::function<void()>& corrupt,
                                   const std::function<void()>& undo, int first,
                                   const std::set<int>& want) {
    corrupt();
    CheckReport report;
    Status st = check_consistency(*db_, &report);
    undo();
    EXPECT_EQ(st.code(), Code::kCorruption) << st.ToString();
    std::set<int> got;
    for (const Violation& v : report.violations) got.insert(v.condition);
    EXPECT_EQ(got, want);
    EXPECT_GE(report.total_violations, report.violations.size());
    EXPECT_NE(st.message().find("condition " + std::to_string(first) + " (clause 3.3.2." +
                                std::to_string(first) + ")"),
              std::string::npos)
        << st.message();
    CheckReport after;
    Status again = check_consistency(*db_, &after);
    EXPECT_TRUE(again.ok()) << "after undo: " << again.ToString();
    return st.message();
  }

  static std::unique_ptr<Database> db_;
};
std::unique_ptr<Database> TpccCheckTest::db_;

TEST_F(TpccCheckTest, LoadedDatabasePasses) {
  CheckReport report;
  Status st = check_consistency(*db_, &report);
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_TRUE(report.violations.empty());
  EXPECT_GT(report.rows_read, 390000u);  // all but ITEM and STOCK
  std::printf("check of 1 warehouse over btree: %.3f s\n", report.seconds);
}

// 1: W_YTD = sum(D_YTD). D_YTD + 1 cent also breaks 9 (D_YTD = its
// history's sum); 1 cannot break alone, since 8 and 9 imply it.
TEST_F(TpccCheckTest, Condition1WarehouseYtdIsTheDistrictsSum) {
  District* d = row<District>(Table::kDistrict, key::district(1, 3));
  ASSERT_NE(d, nullptr);
  const std::string msg = expect_broken([&] { d->d_ytd += 1; }, [&] { d->d_ytd -= 1; }, 1, {1, 9});
  EXPECT_NE(msg.find("w=1: W_YTD = 30000000 != sum(D_YTD) = 30000001"), std::string::npos) << msg;
}

// 2: D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID), alone.
TEST_F(TpccCheckTest, Condition2NextOrderIdFollowsTheLastOrder) {
  District* d = row<District>(Table::kDistrict, key::district(1, 4));
  ASSERT_NE(d, nullptr);
  const std::string msg =
      expect_broken([&] { ++d->d_next_o_id; }, [&] { --d->d_next_o_id; }, 2, {2});
  EXPECT_NE(msg.find("w=1 d=4: D_NEXT_O_ID - 1 = 3001, max(O_ID) = 3000, max(NO_O_ID) = 3000"),
            std::string::npos)
      << msg;
}

// 3: max(NO_O_ID) - min(NO_O_ID) + 1 = count(NEW-ORDER). A new-order key
// removed from the middle; its order then has no new-order row (5) and the
// district one order fewer outstanding (11).
TEST_F(TpccCheckTest, Condition3NewOrdersAreContiguous) {
  const uint64_t k = key::new_order(1, 2, 2500);
  Index<uint64_t>& ix = db_->index(Table::kNewOrder);
  const std::string msg = expect_broken([&] { ASSERT_TRUE(ix.remove(k).ok()); },
                                        [&] { ASSERT_TRUE(ix.insert(k, 0).ok()); }, 3, {3, 5, 11});
  EXPECT_NE(msg.find("w=1 d=2: max(NO_O_ID) - min(NO_O_ID) + 1 = 3000 - 2101 + 1 = 900 != "
                     "count(NEW-ORDER) = 899"),
            std::string::npos)
      << msg;
}

// 4: sum(O_OL_CNT) = count(ORDER-LINE), alone: an order-line of no order.
TEST_F(TpccCheckTest, Condition4OrderLinesMatchTheOrdersCounts) {
  const uint64_t k = key::order_line(1, 5, kInitialOrders + 1, 1);
  Value h;
  OrderLine* l = nullptr;
  ASSERT_TRUE(db_->new_row(0, &l, &h).ok());
  l->ol_o_id = kInitialOrders + 1;
  l->ol_d_id = 5;
  l->ol_w_id = 1;
  l->ol_number = 1;
  Index<uint64_t>& ix = db_->index(Table::kOrderLine);
  const std::string msg = expect_broken([&] { ASSERT_TRUE(ix.insert(k, h).ok()); },
                                        [&] { ASSERT_TRUE(ix.remove(k).ok()); }, 4, {4});
  EXPECT_NE(msg.find("w=1 d=5: sum(O_OL_CNT) = "), std::string::npos) << msg;
}

// 5: O_CARRIER_ID null iff a NEW-ORDER row exists. A new-order key for a
// delivered order (2100, just below the outstanding ones, so 3 still
// holds); the district has one more outstanding order (11).
TEST_F(TpccCheckTest, Condition5CarrierNullIffNewOrder) {
  const uint64_t k = key::new_order(1, 6, kFirstNewOrder - 1);
  Index<uint64_t>& ix = db_->index(Table::kNewOrder);
  const std::string msg = expect_broken([&] { ASSERT_TRUE(ix.insert(k, 0).ok()); },
                                        [&] { ASSERT_TRUE(ix.remove(k).ok()); }, 5, {5, 11});
  EXPECT_NE(msg.find("w=1 d=6 o=2100: O_CARRIER_ID "), std::string::npos) << msg;
  EXPECT_NE(msg.find(" with a NEW-ORDER row"), std::string::npos) << msg;
}

// 6: O_OL_CNT = the order's ORDER-LINE rows. Changing O_OL_CNT changes the
// district's sum too (4).
TEST_F(TpccCheckTest, Condition6OrderLineCountPerOrder) {
  Order* o = row<Order>(Table::kOrder, key::order(1, 7, 42));
  ASSERT_NE(o, nullptr);
  const std::string msg = expect_broken([&] { ++o->o_ol_cnt; }, [&] { --o->o_ol_cnt; }, 4, {4, 6});
  CheckReport report;
  ++o->o_ol_cnt;
  EXPECT_FALSE(check_consistency(*db_, &report).ok());
  --o->o_ol_cnt;
  bool named = false;
  for (const Violation& v : report.violations) {
    if (v.condition != 6) continue;
    named = true;
    EXPECT_EQ(describe(v), "condition 6 (clause 3.3.2.6) w=1 d=7 o=42: O_OL_CNT = " +
                               std::to_string(o->o_ol_cnt + 1) +
                               " != count(ORDER-LINE) = " + std::to_string(o->o_ol_cnt));
  }
  EXPECT_TRUE(named) << msg;
}

// 7: OL_DELIVERY_D null iff O_CARRIER_ID null, alone: a delivered order's
// line (OL_AMOUNT 0.00, so 10 and 12 are unchanged) made undelivered.
TEST_F(TpccCheckTest, Condition7DeliveryDateIffCarrier) {
  OrderLine* l = row<OrderLine>(Table::kOrderLine, key::order_line(1, 8, 17, 3));
  ASSERT_NE(l, nullptr);
  const uint64_t date = l->ol_delivery_d;
  ASSERT_NE(date, 0u);
  const std::string msg =
      expect_broken([&] { l->ol_delivery_d = 0; }, [&] { l->ol_delivery_d = date; }, 7, {7});
  EXPECT_NE(msg.find("w=1 d=8 o=17: OL_NUMBER 3: OL_DELIVERY_D null but O_CARRIER_ID "),
            std::string::npos)
      << msg;
}

// 8: W_YTD = sum(H_AMOUNT). W_YTD + 1 cent also breaks 1.
TEST_F(TpccCheckTest, Condition8WarehouseYtdIsTheHistorySum) {
  Warehouse* w = row<Warehouse>(Table::kWarehouse, key::warehouse(1));
  ASSERT_NE(w, nullptr);
  const std::string msg = expect_broken([&] { w->w_ytd += 1; }, [&] { w->w_ytd -= 1; }, 1, {1, 8});
  CheckReport report;
  w->w_ytd += 1;
  EXPECT_FALSE(check_consistency(*db_, &report).ok());
  w->w_ytd -= 1;
  ASSERT_EQ(report.violations.size(), 2u) << msg;
  EXPECT_EQ(describe(report.violations[1]),
            "condition 8 (clause 3.3.2.8) w=1: W_YTD = 30000001 != sum(H_AMOUNT) = 30000000");
}

// 9: D_YTD = sum(H_AMOUNT) of the district, alone: a payment moved to
// another district of the same warehouse (8 and, as 10 follows H_C_*, 10
// hold).
TEST_F(TpccCheckTest, Condition9DistrictYtdIsTheHistorySum) {
  std::vector<std::pair<uint64_t, Value>> first;
  ASSERT_EQ(db_->index(Table::kHistory).scan(0, 1, &first), 1u);
  History* h = db_->row<History>(first[0].second);
  const uint32_t d = h->h_d_id;
  const uint32_t other = d % kDistricts + 1;
  const std::string msg = expect_broken([&] { h->h_d_id = other; }, [&] { h->h_d_id = d; }, 9, {9});
  EXPECT_NE(msg.find("w=1 d=" + std::to_string(d) + ": D_YTD = 3000000 != sum(H_AMOUNT) = 2999000"),
            std::string::npos)
      << msg;
}

// 10: C_BALANCE = sum(delivered OL_AMOUNT) - sum(H_AMOUNT), alone: the
// balance and the year-to-date payment moved by the same cent (12 holds).
TEST_F(TpccCheckTest, Condition10BalanceFromOrdersAndPayments) {
  Customer* c = row<Customer>(Table::kCustomer, key::customer(1, 9, 1234));
  ASSERT_NE(c, nullptr);
  const std::string msg = expect_broken(
      [&] {
        c->c_balance += 1;
        c->c_ytd_payment -= 1;
      },
      [&] {
        c->c_balance -= 1;
        c->c_ytd_payment += 1;
      },
      10, {10});
  EXPECT_NE(msg.find("w=1 d=9 c=1234: C_BALANCE = -999 != sum(OL_AMOUNT) - sum(H_AMOUNT) = 0 - "
                     "1000 = -1000"),
            std::string::npos)
      << msg;
}

// 11: count(ORDER) - count(NEW-ORDER) = 2100 + sum(C_DELIVERY_CNT), alone.
TEST_F(TpccCheckTest, Condition11DeliveredOrdersCount) {
  Customer* c = row<Customer>(Table::kCustomer, key::customer(1, 10, 3000));
  ASSERT_NE(c, nullptr);
  const std::string msg =
      expect_broken([&] { ++c->c_delivery_cnt; }, [&] { --c->c_delivery_cnt; }, 11, {11});
  EXPECT_NE(msg.find("w=1 d=10: count(ORDER) - count(NEW-ORDER) = 3000 - 900 = 2100 != 2100 + "
                     "sum(C_DELIVERY_CNT) = 2100 + 1"),
            std::string::npos)
      << msg;
}

// 12: C_BALANCE + C_YTD_PAYMENT = sum(delivered OL_AMOUNT), alone.
TEST_F(TpccCheckTest, Condition12BalancePlusPayments) {
  Customer* c = row<Customer>(Table::kCustomer, key::customer(1, 1, 1));
  ASSERT_NE(c, nullptr);
  const std::string msg =
      expect_broken([&] { c->c_ytd_payment += 1; }, [&] { c->c_ytd_payment -= 1; }, 12, {12});
  EXPECT_NE(msg.find("w=1 d=1 c=1: C_BALANCE + C_YTD_PAYMENT = -1000 + 1001 = 1 != "
                     "sum(OL_AMOUNT) = 0"),
            std::string::npos)
      << msg;
}

// Every violation is counted; the report keeps at most 100.
TEST_F(TpccCheckTest, ManyViolationsAreCountedAndCapped) {
  std::vector<Customer*> customers;
  for (uint32_t c = 1; c <= 150; ++c) {
    customers.push_back(row<Customer>(Table::kCustomer, key::customer(1, 2, c)));
  }
  for (Customer* c : customers) c->c_ytd_payment += 1;
  CheckReport report;
  Status st = check_consistency(*db_, &report);
  for (Customer* c : customers) c->c_ytd_payment -= 1;
  EXPECT_EQ(st.code(), Code::kCorruption);
  EXPECT_EQ(report.total_violations, 150u);
  EXPECT_EQ(report.violations.size(), 100u);
  EXPECT_NE(st.message().find("(150 violations)"), std::string::npos) << st.message();
}

// A persistent index: one pool file per table, removed with the database.
TEST(TpccCheckPersistentTest, FastFairLoadPassesAndItsPoolsAreRemoved) {
  DbOptions o;
  o.index = "fastfair";
  o.warehouses = 1;
  std::unique_ptr<Database> db;
  LoadStats stats;
  Status st = make_and_load(o, &db, &stats);
  ASSERT_TRUE(st.ok()) << st.ToString();
  const std::vector<std::string> paths = db->pool_paths();
  ASSERT_EQ(paths.size(), static_cast<size_t>(kTables));
  for (const std::string& p : paths) EXPECT_TRUE(std::filesystem::exists(p)) << p;
  EXPECT_EQ(std::filesystem::path(paths[static_cast<size_t>(Table::kOrderLine)]).filename(),
            "order_line.pool");
  for (int t = 0; t < kTables; ++t) {
    EXPECT_TRUE(db->index(static_cast<Table>(t)).info().caps.persistent);
  }
  CheckReport report;
  st = check_consistency(*db, &report);
  EXPECT_TRUE(st.ok()) << st.ToString();
  std::printf("fastfair: load %.2f s, check %.2f s\n", stats.seconds, report.seconds);
  db.reset();
  for (const std::string& p : paths) EXPECT_FALSE(std::filesystem::exists(p)) << p;
  EXPECT_FALSE(std::filesystem::exists(std::filesystem::path(paths[0]).parent_path()));
}

// A pool file already there is refused (AlreadyExists) and kept; the pools
// made before it are removed, even with keep_pools.
TEST(TpccCheckPersistentTest, ExistingPoolFileIsRefusedAndTheOthersRemoved) {
  std::string dir = "/tmp/tpcc-check-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  const std::string taken = dir + "/customer.pool";
  std::FILE* f = std::fopen(taken.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fclose(f);
  DbOptions o;
  o.index = "fastfair";
  o.pool_dir = dir;
  o.keep_pools = true;
  std::unique_ptr<Database> db;
  Status st = Database::create(o, &db);
  EXPECT_EQ(st.code(), Code::kAlreadyExists) << st.ToString();
  EXPECT_EQ(db, nullptr);
  EXPECT_TRUE(std::filesystem::exists(taken));
  EXPECT_FALSE(std::filesystem::exists(dir + "/warehouse.pool"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/district.pool"));
  std::filesystem::remove_all(dir);
}

// pm_mode kDram: the pools are anonymous, so there are no files.
TEST(TpccCheckPersistentTest, AnonymousPoolsInDramMode) {
  DbOptions o;
  o.index = "fastfair";
  o.warehouses = 1;
  o.pm_mode = pm::Mode::kDram;
  std::unique_ptr<Database> db;
  LoadStats stats;
  Status st = make_and_load(o, &db, &stats);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_TRUE(db->pool_paths().empty());
  EXPECT_TRUE(db->index(Table::kStock).info().caps.persistent);
  CheckReport report;
  st = check_consistency(*db, &report);
  EXPECT_TRUE(st.ok()) << st.ToString();
}

}  // namespace
}  // namespace nvindex::tpcc
