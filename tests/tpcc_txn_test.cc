// TPC-C's transactions (src/tpcc/txn.h) against expectations computed by
// hand on a tiny database built row by row: one warehouse, one district,
// three customers, three items, two orders. Also the NO_WAIT lock table:
// conflicts, upgrades, re-entry, and that an aborted transaction writes
// nothing.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>

#include "tpcc/db.h"
#include "tpcc/lock_table.h"
#include "tpcc/txn.h"

namespace nvindex::tpcc {
namespace {

template <class Row>
Row* put(Database& db, Table t, uint64_t key) {
  Value v = 0;
  Row* r = nullptr;
  EXPECT_TRUE(db.new_row(0, &r, &v).ok());
  EXPECT_TRUE(db.index(t).insert(key, v).ok()) << table_name(t) << " key " << key;
  return r;
}

/// The tiny database:
///   warehouse 1: W_TAX 10%, W_YTD 0, name "WH1"
///   district (1,1): D_TAX 5%, D_YTD 0, D_NEXT_O_ID 3, name "D1"
///   customers (1,1,c): 1 "BBB" last #5 BC discount 0; 2 "AAA" last #5 GC
///                      discount 10%; 3 "CCC" last #7 GC; balances 0
///   items 1, 2, 3: prices 1.00, 2.50, 10.00; item 1's I_DATA has ORIGINAL
///   stock (1,i): quantities 20, 11, 50; stock 1's S_DATA has ORIGINAL
///   order 1 of customer 1: carrier 5, one line (item 2, 0.00, delivered)
///   order 2 of customer 1: no carrier, lines item 1 (5.00) and item 3 (3.00),
///                          and its NEW-ORDER row
class TinyDb : public ::testing::Test {
 protected:
  void SetUp() override {
    DbOptions o;
    o.index = "btree";
    o.clients = 2;
    ASSERT_TRUE(Database::create(o, &db_).ok());
    Database& db = *db_;
    w_ = put<Warehouse>(db, Table::kWarehouse, key::warehouse(1));
    *w_ = Warehouse{1, 1000, 0, "WH1", "", "", "", "", ""};
    d_ = put<District>(db, Table::kDistrict, key::district(1, 1));
    d_->d_id = 1;
    d_->d_w_id = 1;
    d_->d_tax = 500;
    d_->d_next_o_id = 3;
    std::strcpy(d_->d_name, "D1");
    const char* firsts[] = {"BBB", "AAA", "CCC"};
    const uint16_t lasts[] = {5, 5, 7};
    const int32_t discounts[] = {0, 1000, 0};
    for (uint32_t c = 1; c <= 3; ++c) {
      Customer* r = put<Customer>(db, Table::kCustomer, key::customer(1, 1, c));
      ASSERT_TRUE(db.index(Table::kCustomerLast)
                      .insert(key::customer_last(1, 1, lasts[c - 1], c),
                              db.index(Table::kCustomer).lookup(key::customer(1, 1, c)).value())
                      .ok());
      r->c_id = c;
      r->c_d_id = 1;
      r->c_w_id = 1;
      r->c_discount = discounts[c - 1];
      r->c_last_number = lasts[c - 1];
      std::strcpy(r->c_first, firsts[c - 1]);
      std::strcpy(r->c_credit, c == 1 ? "BC" : "GC");
      std::strcpy(r->c_data, "old-data");
      c_[c] = r;
    }
    const int64_t prices[] = {100, 250, 1000};
    const int32_t quantities[] = {20, 11, 50};
    for (uint32_t i = 1; i <= 3; ++i) {
      Item* it = put<Item>(db, Table::kItem, key::item(i));
      it->i_id = i;
      it->i_price = prices[i - 1];
      std::strcpy(it->i_data, i == 1 ? "xxORIGINALxx" : "plain");
      Stock* s = put<Stock>(db, Table::kStock, key::stock(1, i));
      s->s_i_id = i;
      s->s_w_id = 1;
      s->s_quantity = quantities[i - 1];
      std::strcpy(s->s_data, i == 1 ? "ORIGINAL" : "plain");
      std::snprintf(s->s_dist[0], sizeof(s->s_dist[0]), "dist-%u", i);
      s_[i] = s;
    }
    add_order(1, 1, 5, {{2, 0, 777}});
    add_order(2, 1, 0, {{1, 500, 0}, {3, 300, 0}});
    ASSERT_TRUE(db.index(Table::kNewOrder).insert(key::new_order(1, 1, 2), 0).ok());
  }

  struct L {
    uint32_t item;
    int64_t amount;
    uint64_t delivery_d;
  };
  void add_order(uint32_t o_id, uint32_t c_id, uint32_t carrier, std::vector<L> lines) {
    Database& db = *db_;
    Order* o = put<Order>(db, Table::kOrder, key::order(1, 1, o_id));
    *o = Order{o_id, 1, 1, c_id, 1, carrier, static_cast<uint32_t>(lines.size()), 1};
    ASSERT_TRUE(db.index(Table::kOrderCustomer)
                    .insert(key::order_customer(1, 1, c_id, o_id),
                            db.index(Table::kOrder).lookup(key::order(1, 1, o_id)).value())
                    .ok());
    for (uint32_t n = 1; n <= lines.size(); ++n) {
      OrderLine* ol = put<OrderLine>(db, Table::kOrderLine, key::order_line(1, 1, o_id, n));
      ol->ol_o_id = o_id;
      ol->ol_d_id = 1;
      ol->ol_w_id = 1;
      ol->ol_number = n;
      ol->ol_i_id = lines[n - 1].item;
      ol->ol_supply_w_id = 1;
      ol->ol_quantity = 5;
      ol->ol_amount = lines[n - 1].amount;
      ol->ol_delivery_d = lines[n - 1].delivery_d;
    }
  }

  std::unique_ptr<Database> db_;
  LockTable locks_;
  Warehouse* w_ = nullptr;
  District* d_ = nullptr;
  Customer* c_[4] = {};
  Stock* s_[4] = {};
};

TEST_F(TinyDb, NewOrderWritesTheOrderAndUpdatesStock) {
  Executor ex(*db_, locks_, 0);
  NewOrderInput in;
  in.w_id = 1;
  in.d_id = 1;
  in.c_id = 2;
  in.lines = {{1, 1, 5}, {2, 1, 3}};
  in.entry_d = 42;
  NewOrderOutput out;
  TxOutcome oc{};
  ASSERT_TRUE(ex.new_order(in, &out, &oc).ok());
  ASSERT_EQ(oc, TxOutcome::kCommitted);
  EXPECT_EQ(out.o_id, 3u);
  EXPECT_EQ(d_->d_next_o_id, 4u);
  // Stock 1: 20 >= 5 + 10, so 20 - 5; stock 2: 11 < 3 + 10, so 11 - 3 + 91.
  EXPECT_EQ(s_[1]->s_quantity, 15);
  EXPECT_EQ(s_[2]->s_quantity, 99);
  EXPECT_EQ(s_[1]->s_ytd, 5u);
  EXPECT_EQ(s_[2]->s_order_cnt, 1u);
  EXPECT_EQ(s_[1]->s_remote_cnt, 0u);
  ASSERT_EQ(out.lines.size(), 2u);
  EXPECT_EQ(out.lines[0].ol_amount, 500);
  EXPECT_EQ(out.lines[1].ol_amount, 750);
  EXPECT_EQ(out.lines[0].brand_generic, 'B');  // ORIGINAL in both I_DATA and S_DATA
  EXPECT_EQ(out.lines[1].brand_generic, 'G');
  // 12.50 * (1 - 0.10) * (1 + 0.10 + 0.05) = 12.9375 -> 12.94.
  EXPECT_EQ(out.total_cents, 1294);
  const auto ov = db_->index(Table::kOrder).lookup(key::order(1, 1, 3));
  ASSERT_TRUE(ov.has_value());
  const Order* o = db_->row<Order>(*ov);
  EXPECT_EQ(o->o_c_id, 2u);
  EXPECT_EQ(o->o_ol_cnt, 2u);
  EXPECT_EQ(o->o_carrier_id, 0u);
  EXPECT_EQ(o->o_all_local, 1u);
  EXPECT_EQ(o->o_entry_d, 42u);
  EXPECT_TRUE(db_->index(Table::kNewOrder).lookup(key::new_order(1, 1, 3)).has_value());
  EXPECT_TRUE(db_->index(Table::kOrderCustomer).lookup(key::order_customer(1, 1, 2, 3)));
  const auto olv = db_->index(Table::kOrderLine).lookup(key::order_line(1, 1, 3, 2));
  ASSERT_TRUE(olv.has_value());
  const OrderLine* ol = db_->row<OrderLine>(*olv);
  EXPECT_EQ(ol->ol_i_id, 2u);
  EXPECT_EQ(ol->ol_quantity, 3u);
  EXPECT_STREQ(ol->ol_dist_info, "dist-2");
  EXPECT_EQ(ol->ol_delivery_d, 0u);
  EXPECT_EQ(ex.ops()[static_cast<size_t>(Table::kOrderLine)].inserts, 2u);
}

TEST_F(TinyDb, NewOrderWithAnUnusedItemRollsBackWritingNothing) {
  Executor ex(*db_, locks_, 0);
  NewOrderInput in;
  in.w_id = 1;
  in.d_id = 1;
  in.c_id = 2;
  in.lines = {{1, 1, 5}, {kItems + 1, 1, 3}};
  NewOrderOutput out;
  TxOutcome oc{};
  ASSERT_TRUE(ex.new_order(in, &out, &oc).ok());
  EXPECT_EQ(oc, TxOutcome::kRolledBack);
  EXPECT_EQ(d_->d_next_o_id, 3u);
  EXPECT_EQ(s_[1]->s_quantity, 20);
  EXPECT_FALSE(db_->index(Table::kOrder).lookup(key::order(1, 1, 3)).has_value());
  EXPECT_FALSE(db_->index(Table::kNewOrder).lookup(key::new_order(1, 1, 3)).has_value());
  // Its locks are gone: another transaction takes the district's at once.
  TxLocks other(locks_);
  EXPECT_TRUE(
      other.acquire(Table::kDistrict, key::district(1, 1), LockMode::kExclusive, kNextOrder));
}

TEST_F(TinyDb, PaymentByLastNameTakesTheMiddleCustomerByFirstName) {
  Executor ex(*db_, locks_, 1);
  PaymentInput in;
  in.w_id = in.d_id = in.c_w_id = in.c_d_id = 1;
  in.customer.by_last_name = true;
  in.customer.c_last = 5;  // customers 1 ("BBB") and 2 ("AAA"): n = 2, the 1st by C_FIRST
  in.h_amount = 12345;
  in.h_date = 7;
  PaymentOutput out;
  TxOutcome oc{};
  ASSERT_TRUE(ex.payment(in, &out, &oc).ok());
  ASSERT_EQ(oc, TxOutcome::kCommitted);
  EXPECT_EQ(out.c_id, 2u);
  EXPECT_EQ(w_->w_ytd, 12345);
  EXPECT_EQ(d_->d_ytd, 12345);
  EXPECT_EQ(c_[2]->c_balance, -12345);
  EXPECT_EQ(c_[2]->c_ytd_payment, 12345);
  EXPECT_EQ(c_[2]->c_payment_cnt, 1u);
  EXPECT_TRUE(out.c_data.empty());  // a "GC" customer
  EXPECT_STREQ(c_[2]->c_data, "old-data");
  std::vector<std::pair<uint64_t, Value>> h;
  db_->index(Table::kHistory).scan(0, 10, &h);
  ASSERT_EQ(h.size(), 1u);
  const History* hr = db_->row<History>(h[0].second);
  EXPECT_EQ(hr->h_c_id, 2u);
  EXPECT_EQ(hr->h_amount, 12345);
  EXPECT_EQ(hr->h_date, 7u);
  EXPECT_STREQ(hr->h_data, "WH1    D1");
}

TEST_F(TinyDb, PaymentOfABadCreditCustomerPrependsToCData) {
  Executor ex(*db_, locks_, 0);
  PaymentInput in;
  in.w_id = in.d_id = in.c_w_id = in.c_d_id = 1;
  in.customer.c_id = 1;
  in.h_amount = 1005;
  PaymentOutput out;
  TxOutcome oc{};
  ASSERT_TRUE(ex.payment(in, &out, &oc).ok());
  EXPECT_EQ(out.c_id, 1u);
  EXPECT_EQ(out.c_data, "1 1 1 1 1 10.05|old-data");
  EXPECT_STREQ(c_[1]->c_data, "1 1 1 1 1 10.05|old-data");
  // C_DATA keeps its first 500 characters.
  std::memset(c_[1]->c_data, 'x', 500);
  c_[1]->c_data[500] = 0;
  ASSERT_TRUE(ex.payment(in, &out, &oc).ok());
  EXPECT_EQ(std::strlen(c_[1]->c_data), 500u);
  EXPECT_EQ(std::string(c_[1]->c_data, 16), "1 1 1 1 1 10.05|");
  EXPECT_EQ(out.c_data.size(), 200u);
}

TEST_F(TinyDb, OrderStatusReadsTheNewestOrder) {
  Executor ex(*db_, locks_, 0);
  OrderStatusInput in;
  in.w_id = in.d_id = 1;
  in.customer.c_id = 1;
  OrderStatusOutput out;
  TxOutcome oc{};
  ASSERT_TRUE(ex.order_status(in, &out, &oc).ok());
  ASSERT_EQ(oc, TxOutcome::kCommitted);
  EXPECT_EQ(out.o_id, 2u);
  EXPECT_EQ(out.o_carrier_id, 0u);
  ASSERT_EQ(out.lines.size(), 2u);
  EXPECT_EQ(out.lines[0].i_id, 1u);
  EXPECT_EQ(out.lines[1].amount, 300);
  // Customer 3 has no order: the output says so with o_id 0.
  in.customer.c_id = 3;
  ASSERT_TRUE(ex.order_status(in, &out, &oc).ok());
  EXPECT_EQ(out.o_id, 0u);
  EXPECT_EQ(ex.ops()[static_cast<size_t>(Table::kOrderCustomer)].find_last_less_than, 2u);
}

TEST_F(TinyDb, DeliveryDeliversTheOldestNewOrderAndSkipsEmptyDistricts) {
  Executor ex(*db_, locks_, 0);
  DeliveryInput in;
  in.w_id = 1;
  in.carrier_id = 7;
  in.delivery_d = 99;
  DeliveryOutput out;
  TxOutcome oc{};
  ASSERT_TRUE(ex.delivery(in, &out, &oc).ok());
  ASSERT_EQ(oc, TxOutcome::kCommitted);
  EXPECT_EQ(out.o_id[0], 2u);
  for (uint32_t d = 2; d <= kDistricts; ++d) EXPECT_EQ(out.o_id[d - 1], 0u) << d;
  EXPECT_FALSE(db_->index(Table::kNewOrder).lookup(key::new_order(1, 1, 2)).has_value());
  const Order* o = db_->row<Order>(*db_->index(Table::kOrder).lookup(key::order(1, 1, 2)));
  EXPECT_EQ(o->o_carrier_id, 7u);
  for (uint32_t n = 1; n <= 2; ++n) {
    const auto v = db_->index(Table::kOrderLine).lookup(key::order_line(1, 1, 2, n));
    EXPECT_EQ(db_->row<OrderLine>(*v)->ol_delivery_d, 99u);
  }
  EXPECT_EQ(c_[1]->c_balance, 800);
  EXPECT_EQ(c_[1]->c_delivery_cnt, 1u);
  // Nothing left to deliver: every district skipped.
  ASSERT_TRUE(ex.delivery(in, &out, &oc).ok());
  for (uint32_t d = 1; d <= kDistricts; ++d) EXPECT_EQ(out.o_id[d - 1], 0u) << d;
  EXPECT_EQ(c_[1]->c_balance, 800);
}

TEST_F(TinyDb, StockLevelCountsDistinctLowItemsOfTheLastOrders) {
  Executor ex(*db_, locks_, 0);
  StockLevelInput in;
  in.w_id = in.d_id = 1;
  in.threshold = 21;  // orders 1 and 2: items 2, 1, 3 at 11, 20, 50
  StockLevelOutput out;
  TxOutcome oc{};
  ASSERT_TRUE(ex.stock_level(in, &out, &oc).ok());
  ASSERT_EQ(oc, TxOutcome::kCommitted);
  EXPECT_EQ(out.low_stock, 2u);
  in.threshold = 11;
  ASSERT_TRUE(ex.stock_level(in, &out, &oc).ok());
  EXPECT_EQ(out.low_stock, 0u);
}

TEST_F(TinyDb, ALockConflictAbortsWithNothingWritten) {
  TxLocks holder(locks_);
  ASSERT_TRUE(holder.acquire(Table::kStock, key::stock(1, 2), LockMode::kShared));
  Executor ex(*db_, locks_, 0);
  NewOrderInput in;
  in.w_id = in.d_id = 1;
  in.c_id = 2;
  in.lines = {{1, 1, 5}, {2, 1, 3}};
  NewOrderOutput out;
  TxOutcome oc{};
  ASSERT_TRUE(ex.new_order(in, &out, &oc).ok());
  EXPECT_EQ(oc, TxOutcome::kAborted);
  EXPECT_EQ(d_->d_next_o_id, 3u);
  EXPECT_EQ(s_[1]->s_quantity, 20);
  EXPECT_FALSE(db_->index(Table::kOrder).lookup(key::order(1, 1, 3)).has_value());
  // Stock-Level's shared lock on the same stock does not conflict with the holder's.
  StockLevelInput sl;
  sl.w_id = sl.d_id = 1;
  sl.threshold = 15;
  StockLevelOutput slo;
  ASSERT_TRUE(ex.stock_level(sl, &slo, &oc).ok());
  EXPECT_EQ(oc, TxOutcome::kCommitted);
  holder.release_all();
  ASSERT_TRUE(ex.new_order(in, &out, &oc).ok());
  EXPECT_EQ(oc, TxOutcome::kCommitted);
}

TEST(LockTable, SharedAndExclusiveHoldsConflictAsTwoPhaseLockingSays) {
  LockTable t(10);
  TxLocks a(t), b(t);
  EXPECT_TRUE(a.acquire(Table::kCustomer, 1, LockMode::kShared));
  EXPECT_TRUE(b.acquire(Table::kCustomer, 1, LockMode::kShared));
  EXPECT_FALSE(b.acquire(Table::kCustomer, 1, LockMode::kExclusive));  // a also holds it
  a.release_all();
  EXPECT_TRUE(b.acquire(Table::kCustomer, 1, LockMode::kExclusive));  // sole reader: upgrade
  EXPECT_FALSE(a.acquire(Table::kCustomer, 1, LockMode::kShared));
  EXPECT_TRUE(b.acquire(Table::kCustomer, 1, LockMode::kShared));  // re-entrant
  EXPECT_EQ(b.held(), 1u);
  b.release_all();
  EXPECT_TRUE(a.acquire(Table::kCustomer, 1, LockMode::kExclusive));
}

TEST(LockTable, ColumnGroupsOfOneRowAreSeparateLocks) {
  LockTable t(22);
  TxLocks payment(t), new_order(t);
  EXPECT_TRUE(payment.acquire(Table::kDistrict, key::district(1, 1), LockMode::kExclusive, kYtd));
  EXPECT_TRUE(
      new_order.acquire(Table::kDistrict, key::district(1, 1), LockMode::kExclusive, kNextOrder));
  EXPECT_FALSE(new_order.acquire(Table::kDistrict, key::district(1, 1), LockMode::kShared, kYtd));
}

}  // namespace
}  // namespace nvindex::tpcc
