// Whole TPC-C runs (src/tpcc/driver.h): every registered ordered index
// loads one warehouse, runs the mix with one client, and passes the twelve
// consistency conditions; two clients over two warehouses run concurrently
// (also under ThreadSanitizer) and stay consistent; the mix follows the
// deck; input generation follows clause 2.x.1.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "nvindex/index.h"
#include "support/param_name.h"
#include "tpcc/check.h"
#include "tpcc/db.h"
#include "tpcc/driver.h"
#include "tpcc/load.h"

namespace nvindex::tpcc {
namespace {

/// Under a sanitizer a warehouse's load (660,000 inserts) takes 10 to 30 s:
/// there the suite runs btree and fastfair only, and one two-client run.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitizer = true;
#else
constexpr bool kSanitizer = false;
#endif

/// Loads `warehouses` into a new database of `index` and runs
/// `transactions` with `clients`; fails the test on any error.
void load_run_check(const std::string& index, uint32_t warehouses, unsigned clients,
                    uint64_t transactions, RunStats* stats) {
  DbOptions o;
  o.index = index;
  o.warehouses = warehouses;
  o.clients = clients;
  o.expected_transactions = transactions;
  std::unique_ptr<Database> db;
  ASSERT_TRUE(Database::create(o, &db).ok());
  NurandConstants load_c, run_c;
  draw_constants(7, &load_c, &run_c);
  LoadStats ls;
  ASSERT_TRUE(load(*db, 7, load_c, clients, &ls).ok());
  RunOptions ro;
  ro.transactions = transactions;
  ro.clients = clients;
  ro.seed = 7;
  ro.constants = run_c;
  Status s = run(*db, ro, stats);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(stats->transactions(), transactions);
  CheckReport rep;
  s = check_consistency(*db, &rep);
  EXPECT_TRUE(s.ok()) << index << ": " << s.ToString();
  EXPECT_EQ(rep.total_violations, 0u);
}

/// The registered ordered, non-test indexes TPC-C runs on (not block-device
/// ones: Database::create refuses them).
std::vector<std::string> ordered_indexes() {
  std::vector<std::string> out;
  for (const IndexEntry& e : registered_indexes()) {
    if (e.caps.ordered && !needs_device(e.caps) && !is_test_only_index(e.name)) {
      out.emplace_back(e.name);
    }
  }
  return out;
}

class EveryIndex : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryIndex, OneClientRunKeepsTheTwelveConditions) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "one client: nothing for ThreadSanitizer (TpccConcurrent runs two)";
#endif
  if (kSanitizer && GetParam() != "btree" && GetParam() != "fastfair") {
    GTEST_SKIP() << "under a sanitizer btree and fastfair only (a load takes 10 to 30 s)";
  }
  RunStats stats;
  load_run_check(GetParam(), 1, 1, 2300, &stats);
  // One client never conflicts with itself.
  for (uint64_t a : stats.aborts) EXPECT_EQ(a, 0u);
  // 100 full decks of 23: 1,000 New-Orders (rolled back included), 1,000
  // Payments and 100 of each of the others.
  EXPECT_EQ(stats.committed[static_cast<size_t>(TxType::kNewOrder)] + stats.rolled_back, 1000u);
  EXPECT_EQ(stats.committed[static_cast<size_t>(TxType::kPayment)], 1000u);
  EXPECT_EQ(stats.committed[static_cast<size_t>(TxType::kOrderStatus)], 100u);
  EXPECT_EQ(stats.committed[static_cast<size_t>(TxType::kDelivery)], 100u);
  EXPECT_EQ(stats.committed[static_cast<size_t>(TxType::kStockLevel)], 100u);
  // Each New-Order that commits inserts its order-lines, order, order_customer
  // and new-order keys.
  const OpCounts& ol = stats.ops[static_cast<size_t>(Table::kOrderLine)];
  const uint64_t new_orders = stats.committed[static_cast<size_t>(TxType::kNewOrder)];
  EXPECT_GE(ol.inserts, 5 * new_orders);
  EXPECT_LE(ol.inserts, 15 * new_orders);
  EXPECT_EQ(stats.ops[static_cast<size_t>(Table::kOrder)].inserts, new_orders);
  EXPECT_EQ(stats.ops[static_cast<size_t>(Table::kNewOrder)].inserts, new_orders);
  EXPECT_EQ(stats.ops[static_cast<size_t>(Table::kHistory)].inserts, 1000u);
}

INSTANTIATE_TEST_SUITE_P(Registry, EveryIndex, ::testing::ValuesIn(ordered_indexes()),
                         nvindex::testing::IndexParamName());

TEST(TpccConcurrent, TwoClientsOverTwoWarehousesStayConsistent) {
  if (kSanitizer) GTEST_SKIP() << "under a sanitizer the one-warehouse run only";
  for (const char* index : {"btree", "fastfair"}) {
    RunStats stats;
    load_run_check(index, 2, 2, 4000, &stats);
  }
}

TEST(TpccConcurrent, TwoClientsOnOneWarehouseConflictAndRetry) {
  // Both clients' home is warehouse 1: district and stock locks collide, and
  // each conflict is retried until the transaction commits.
  RunStats stats;
  load_run_check("btree", 1, 2, 4000, &stats);
}

TEST(TpccInputs, GeneratedInputsFollowTheirClauses) {
  NurandConstants load_c, run_c;
  draw_constants(3, &load_c, &run_c);
  InputGenerator gen(5, 4, run_c);
  uint64_t lines = 0, remote = 0, rollbacks = 0, by_name = 0, remote_pay = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    const NewOrderInput no = gen.new_order(2);
    ASSERT_GE(no.lines.size(), 5u);
    ASSERT_LE(no.lines.size(), 15u);
    ASSERT_GE(no.d_id, 1u);
    ASSERT_LE(no.d_id, kDistricts);
    ASSERT_GE(no.c_id, 1u);
    ASSERT_LE(no.c_id, kCustomers);
    for (const auto& l : no.lines) {
      ++lines;
      remote += l.supply_w_id != 2;
      ASSERT_GE(l.quantity, 1u);
      ASSERT_LE(l.quantity, 10u);
      ASSERT_GE(l.supply_w_id, 1u);
      ASSERT_LE(l.supply_w_id, 4u);
    }
    rollbacks += no.lines.back().i_id == kItems + 1;
    const PaymentInput p = gen.payment(2);
    by_name += p.customer.by_last_name;
    remote_pay += p.c_w_id != 2;
    ASSERT_GE(p.h_amount, 100);
    ASSERT_LE(p.h_amount, 500000);
  }
  // 1% of lines remote, 1% of New-Orders rolled back, 60% by name, 15%
  // remote payments (binomial: these bounds are beyond 5 sigma).
  EXPECT_NEAR(static_cast<double>(remote) / static_cast<double>(lines), 0.01, 0.002);
  EXPECT_NEAR(static_cast<double>(rollbacks) / n, 0.01, 0.004);
  EXPECT_NEAR(static_cast<double>(by_name) / n, 0.60, 0.02);
  EXPECT_NEAR(static_cast<double>(remote_pay) / n, 0.15, 0.015);
}

TEST(TpccRun, ASecondRunOnTheSameDatabaseGoesOn) {
  DbOptions o;
  o.index = "btree";
  std::unique_ptr<Database> db;
  ASSERT_TRUE(Database::create(o, &db).ok());
  NurandConstants load_c, run_c;
  draw_constants(9, &load_c, &run_c);
  LoadStats ls;
  ASSERT_TRUE(load(*db, 9, load_c, 1, &ls).ok());
  RunOptions ro;
  ro.transactions = 460;
  ro.constants = run_c;
  RunStats first, second;
  ASSERT_TRUE(run(*db, ro, &first).ok());
  // The second run's Payments insert history keys after the first run's.
  const Status s = run(*db, ro, &second);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(second.transactions(), 460u);
  CheckReport rep;
  EXPECT_TRUE(check_consistency(*db, &rep).ok());
}

TEST(TpccRun, BadOptionsAreClearErrors) {
  DbOptions o;
  o.index = "btree";
  std::unique_ptr<Database> db;
  ASSERT_TRUE(Database::create(o, &db).ok());
  RunStats stats;
  RunOptions ro;
  ro.clients = 2;  // the database was made for one
  ro.transactions = 10;
  Status s = run(*db, ro, &stats);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("clients"), std::string::npos) << s.ToString();
  ro.clients = 1;
  ro.transactions = 0;
  s = run(*db, ro, &stats);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace nvindex::tpcc
