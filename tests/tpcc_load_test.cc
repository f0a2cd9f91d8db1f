// Tests of the TPC-C population (src/tpcc/load.h, clause 4.3.3.1) and the
// random functions of clauses 2.1.6 and 4.3.2: row counts per table for 1
// and 2 warehouses, the spec's initial values, last names, NURand and its
// constants, the same content from 1 and 2 load threads, and a loaded
// database passing the consistency conditions (src/tpcc/check.h).
#include <gtest/gtest.h>

#include <cctype>
#include <cstdio>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "tpcc/check.h"
#include "tpcc/db.h"
#include "tpcc/load.h"
#include "tpcc/schema.h"

namespace nvindex::tpcc {
namespace {

constexpr uint64_t kSeed = 42;

/// A loaded database and what its load reported.
struct Loaded {
  std::unique_ptr<Database> db;
  LoadStats stats;
};

/// Loads `warehouses` warehouses over btree with `threads` load threads.
std::unique_ptr<Loaded> load_btree(uint32_t warehouses, unsigned threads, uint64_t seed) {
  DbOptions o;
  o.index = "btree";
  o.warehouses = warehouses;
  o.clients = threads;
  auto out = std::make_unique<Loaded>();
  Status st = Database::create(o, &out->db);
  EXPECT_TRUE(st.ok()) << st.ToString();
  if (!st.ok()) return nullptr;
  NurandConstants load_c, run_c;
  draw_constants(seed, &load_c, &run_c);
  st = load(*out->db, seed, load_c, threads, &out->stats);
  EXPECT_TRUE(st.ok()) << st.ToString();
  if (!st.ok()) return nullptr;
  return out;
}

/// Calls f(key, value) for every key of `ix` (in key order).
template <class F>
uint64_t for_each_key(Index<uint64_t>& ix, F&& f) {
  std::vector<std::pair<uint64_t, Value>> batch;
  uint64_t n = 0, start = 0;
  for (;;) {
    const size_t got = ix.scan(start, 4096, &batch);
    for (size_t i = 0; i < got; ++i) f(batch[i].first, batch[i].second);
    n += got;
    if (got < 4096) return n;
    start = batch[got - 1].first + 1;
  }
}

uint64_t count_keys(Database& db, Table t) {
  return for_each_key(db.index(t), [](uint64_t, Value) {});
}

/// FNV-1a over bytes.
uint64_t fnv(uint64_t h, const void* p, size_t n) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001b3ull;
  return h;
}

/// A digest of the rows of WAREHOUSE, DISTRICT, CUSTOMER, HISTORY, ORDER,
/// ORDER-LINE, ITEM and STOCK, with the date columns (one clock read per
/// warehouse) reduced to null / not null. HISTORY keys depend on the load
/// thread, so its rows are summed as a multiset; the other tables are
/// hashed with their keys in key order.
uint64_t digest(Database& db) {
  uint64_t h = 0xcbf29ce484222325ull;
  auto keyed = [&](Table t, auto row_fn) {
    for_each_key(db.index(t), [&](uint64_t k, Value v) {
      h = fnv(h, &k, sizeof k);
      row_fn(v);
    });
  };
  keyed(Table::kWarehouse, [&](Value v) { h = fnv(h, db.row<Warehouse>(v), sizeof(Warehouse)); });
  keyed(Table::kDistrict, [&](Value v) { h = fnv(h, db.row<District>(v), sizeof(District)); });
  keyed(Table::kCustomer, [&](Value v) {
    Customer c = *db.row<Customer>(v);
    c.c_since = c.c_since != 0;
    h = fnv(h, &c, sizeof c);
  });
  keyed(Table::kOrder, [&](Value v) {
    Order o = *db.row<Order>(v);
    o.o_entry_d = o.o_entry_d != 0;
    h = fnv(h, &o, sizeof o);
  });
  keyed(Table::kOrderLine, [&](Value v) {
    OrderLine l = *db.row<OrderLine>(v);
    l.ol_delivery_d = l.ol_delivery_d != 0;
    h = fnv(h, &l, sizeof l);
  });
  keyed(Table::kItem, [&](Value v) { h = fnv(h, db.row<Item>(v), sizeof(Item)); });
  keyed(Table::kStock, [&](Value v) { h = fnv(h, db.row<Stock>(v), sizeof(Stock)); });
  keyed(Table::kCustomerLast, [](Value) {});
  keyed(Table::kOrderCustomer, [](Value) {});
  keyed(Table::kNewOrder, [](Value) {});
  uint64_t history_sum = 0;
  for_each_key(db.index(Table::kHistory), [&](uint64_t, Value v) {
    History r = *db.row<History>(v);
    r.h_date = r.h_date != 0;
    history_sum += fnv(0xcbf29ce484222325ull, &r, sizeof r);
  });
  return fnv(h, &history_sum, sizeof history_sum);
}

class TpccLoadTest : public ::testing::Test {
 protected:
  /// Shared loads, made on first use (ctest runs each case in its own
  /// process, so a case pays only for the loads it uses).
  static Loaded& one_warehouse() {
    if (!w1_) w1_ = load_btree(1, 1, kSeed);
    return *w1_;
  }
  static Loaded& two_warehouses(unsigned threads) {
    auto& slot = threads == 1 ? w2_one_thread_ : w2_two_threads_;
    if (!slot) slot = load_btree(2, threads, kSeed);
    return *slot;
  }
  static void TearDownTestSuite() {
    w1_.reset();
    w2_one_thread_.reset();
    w2_two_threads_.reset();
  }

  static void expect_counts(Loaded& l, uint64_t w) {
    Database& db = *l.db;
    uint64_t sum_ol_cnt = 0;
    for_each_key(db.index(Table::kOrder),
                 [&](uint64_t, Value v) { sum_ol_cnt += db.row<Order>(v)->o_ol_cnt; });
    const std::pair<Table, uint64_t> want[] = {
        {Table::kItem, 100000},
        {Table::kWarehouse, w},
        {Table::kDistrict, 10 * w},
        {Table::kCustomer, 30000 * w},
        {Table::kCustomerLast, 30000 * w},
        {Table::kHistory, 30000 * w},
        {Table::kOrder, 30000 * w},
        {Table::kOrderCustomer, 30000 * w},
        {Table::kNewOrder, 9000 * w},
        {Table::kOrderLine, sum_ol_cnt},
        {Table::kStock, 100000 * w},
    };
    for (const auto& [t, n] : want) {
      EXPECT_EQ(count_keys(db, t), n) << table_name(t) << " with " << w << " warehouses";
      EXPECT_EQ(l.stats.rows[static_cast<size_t>(t)], n) << table_name(t);
    }
    // O_OL_CNT is 5..15, mean 10: the order-lines of 30,000 orders per
    // warehouse lie well inside 9.8..10.2 per order.
    EXPECT_GT(sum_ol_cnt, 294000 * w);
    EXPECT_LT(sum_ol_cnt, 306000 * w);
  }

  static std::unique_ptr<Loaded> w1_, w2_one_thread_, w2_two_threads_;
};
std::unique_ptr<Loaded> TpccLoadTest::w1_;
std::unique_ptr<Loaded> TpccLoadTest::w2_one_thread_;
std::unique_ptr<Loaded> TpccLoadTest::w2_two_threads_;

TEST(TpccRandomTest, LastNamesFollowTheSyllableTable) {
  char name[17];
  last_name(371, name);
  EXPECT_STREQ(name, "PRICALLYOUGHT");
  last_name(0, name);
  EXPECT_STREQ(name, "BARBARBAR");
  last_name(999, name);
  EXPECT_STREQ(name, "EINGEINGEING");
  std::set<std::string> names;
  for (uint32_t n = 0; n < 1000; ++n) {
    last_name(n, name);
    EXPECT_LE(std::strlen(name), 16u);
    names.insert(name);
  }
  EXPECT_EQ(names.size(), 1000u);
}

TEST(TpccRandomTest, NurandStaysInRange) {
  Random rng(7);
  struct Case {
    uint64_t a, x, y;
  };
  for (const Case& c : {Case{255, 0, 999}, Case{1023, 1, 3000}, Case{8191, 1, 100000}}) {
    for (uint64_t constant : {uint64_t{0}, c.a / 2, c.a}) {
      const uint64_t range = c.y - c.x + 1;
      std::vector<bool> seen(range);
      uint64_t distinct = 0;
      for (uint64_t i = 0; i < 10 * range; ++i) {
        const uint64_t v = rng.nurand(c.a, c.x, c.y, constant);
        ASSERT_GE(v, c.x);
        ASSERT_LE(v, c.y);
        distinct += !seen[v - c.x];
        seen[v - c.x] = true;
      }
      // Non-uniform, but spread: 10 draws per value reach most of [x .. y].
      EXPECT_GT(distinct, range / 2) << "A=" << c.a << " C=" << constant;
    }
  }
}

TEST(TpccRandomTest, ConstantsObeyTheDeltaRule) {
  std::set<uint32_t> deltas;
  for (uint64_t seed = 0; seed < 2000; ++seed) {
    NurandConstants load_c, run_c;
    draw_constants(seed, &load_c, &run_c);
    ASSERT_LE(load_c.c_last, 255u);
    ASSERT_LE(run_c.c_last, 255u);
    ASSERT_LE(load_c.c_id, 1023u);
    ASSERT_LE(run_c.c_id, 1023u);
    ASSERT_LE(load_c.ol_i_id, 8191u);
    ASSERT_LE(run_c.ol_i_id, 8191u);
    const uint32_t delta =
        run_c.c_last > load_c.c_last ? run_c.c_last - load_c.c_last : load_c.c_last - run_c.c_last;
    ASSERT_GE(delta, 65u) << "seed " << seed;
    ASSERT_LE(delta, 119u) << "seed " << seed;
    ASSERT_NE(delta, 96u) << "seed " << seed;
    ASSERT_NE(delta, 112u) << "seed " << seed;
    deltas.insert(delta);
  }
  EXPECT_GT(deltas.size(), 40u);  // the rule is met by drawing, not by one fixed delta
}

TEST(TpccRandomTest, StringsHaveTheirLengthsAndAlphabets) {
  Random rng(3);
  char buf[64];
  std::set<size_t> lengths;
  for (int i = 0; i < 2000; ++i) {
    rng.astring(buf, 26, 50);
    const size_t n = std::strlen(buf);
    ASSERT_GE(n, 26u);
    ASSERT_LE(n, 50u);
    lengths.insert(n);
    for (size_t j = 0; j < n; ++j) ASSERT_TRUE(std::isalnum(static_cast<unsigned char>(buf[j])));
    rng.nstring(buf, 16, 16);
    ASSERT_EQ(std::strlen(buf), 16u);
    for (size_t j = 0; j < 16; ++j) ASSERT_TRUE(std::isdigit(static_cast<unsigned char>(buf[j])));
  }
  EXPECT_EQ(lengths.size(), 25u);  // every length of 26..50 occurs
}

TEST_F(TpccLoadTest, RowCountsOneWarehouse) {
  Loaded& l = one_warehouse();
  expect_counts(l, 1);
  std::printf("load of 1 warehouse over btree, 1 thread: %.2f s\n", l.stats.seconds);
}

TEST_F(TpccLoadTest, RowCountsTwoWarehouses) { expect_counts(two_warehouses(1), 2); }

TEST_F(TpccLoadTest, InitialValuesFollowClause4331) {
  Database& db = *one_warehouse().db;
  const Warehouse* w = db.row<Warehouse>(*db.index(Table::kWarehouse).lookup(1));
  EXPECT_EQ(w->w_ytd, 30'000'000);
  EXPECT_LE(w->w_tax, 2000);
  EXPECT_EQ(std::strlen(w->w_zip), 9u);
  EXPECT_STREQ(w->w_zip + 4, "11111");
  for (uint32_t d = 1; d <= kDistricts; ++d) {
    const District* r = db.row<District>(*db.index(Table::kDistrict).lookup(key::district(1, d)));
    EXPECT_EQ(r->d_ytd, 3'000'000);
    EXPECT_EQ(r->d_next_o_id, 3001u);
    // O_C_ID is a permutation of 1..3000 per district.
    std::set<uint32_t> customers;
    for (uint32_t o = 1; o <= kInitialOrders; ++o) {
      const Order* ord = db.row<Order>(*db.index(Table::kOrder).lookup(key::order(1, d, o)));
      customers.insert(ord->o_c_id);
      EXPECT_EQ(ord->o_carrier_id == 0, o >= kFirstNewOrder);
      EXPECT_TRUE(db.index(Table::kOrderCustomer)
                      .lookup(key::order_customer(1, d, ord->o_c_id, o))
                      .has_value());
    }
    EXPECT_EQ(customers.size(), 3000u);
    EXPECT_EQ(*customers.begin(), 1u);
    EXPECT_EQ(*customers.rbegin(), 3000u);
  }
  uint64_t bad_credit = 0, customers = 0;
  for_each_key(db.index(Table::kCustomer), [&](uint64_t k, Value v) {
    const Customer* c = db.row<Customer>(v);
    ++customers;
    EXPECT_EQ(k, key::customer(c->c_w_id, c->c_d_id, c->c_id));
    EXPECT_EQ(c->c_balance, -1000);
    EXPECT_EQ(c->c_ytd_payment, 1000);
    EXPECT_EQ(c->c_payment_cnt, 1u);
    EXPECT_EQ(c->c_delivery_cnt, 0u);
    EXPECT_EQ(c->c_credit_lim, 5'000'000);
    EXPECT_LE(c->c_discount, 5000);
    EXPECT_STREQ(c->c_middle, "OE");
    EXPECT_GE(std::strlen(c->c_data), 300u);
    if (c->c_id <= 1000) {
      EXPECT_EQ(uint32_t{c->c_last_number}, c->c_id - 1);
    }
    char name[17];
    last_name(c->c_last_number, name);
    EXPECT_STREQ(c->c_last, name);
    auto by_name = db.index(Table::kCustomerLast)
                       .lookup(key::customer_last(c->c_w_id, c->c_d_id, c->c_last_number, c->c_id));
    ASSERT_TRUE(by_name.has_value());
    EXPECT_EQ(*by_name, v);
    bad_credit += std::strcmp(c->c_credit, "BC") == 0;
  });
  EXPECT_EQ(customers, 30000u);
  EXPECT_GT(bad_credit, 2500u);  // 10% of 30,000 at random
  EXPECT_LT(bad_credit, 3500u);
  uint64_t original = 0;
  for_each_key(db.index(Table::kItem), [&](uint64_t, Value v) {
    const Item* i = db.row<Item>(v);
    EXPECT_GE(i->i_price, 100);
    EXPECT_LE(i->i_price, 10000);
    original += std::strstr(i->i_data, "ORIGINAL") != nullptr;
  });
  EXPECT_GT(original, 9000u);  // 10% of 100,000 at random
  EXPECT_LT(original, 11000u);
  for_each_key(db.index(Table::kOrderLine), [&](uint64_t k, Value v) {
    const OrderLine* l = db.row<OrderLine>(v);
    EXPECT_EQ(k, key::order_line(l->ol_w_id, l->ol_d_id, l->ol_o_id, l->ol_number));
    if (l->ol_o_id < kFirstNewOrder) {
      EXPECT_EQ(l->ol_amount, 0);
      EXPECT_NE(l->ol_delivery_d, 0u);
    } else {
      EXPECT_GE(l->ol_amount, 1);
      EXPECT_LE(l->ol_amount, 999'999);
      EXPECT_EQ(l->ol_delivery_d, 0u);
    }
  });
  for_each_key(db.index(Table::kNewOrder), [&](uint64_t k, Value v) {
    EXPECT_EQ(v, 0u);
    EXPECT_GE(key::order_id_of(k), kFirstNewOrder);
  });
}

TEST_F(TpccLoadTest, SameContentWithOneAndTwoLoadThreads) {
  const uint64_t one = digest(*two_warehouses(1).db);
  const uint64_t two = digest(*two_warehouses(2).db);
  EXPECT_EQ(one, two);
  expect_counts(two_warehouses(2), 2);
  // The digest sees the content: another seed gives another one.
  std::unique_ptr<Loaded> other = load_btree(2, 1, kSeed + 1);
  ASSERT_NE(other, nullptr);
  EXPECT_NE(digest(*other->db), one);
}

TEST_F(TpccLoadTest, LoadedDatabasePassesTheConsistencyConditions) {
  CheckReport report;
  Status st = check_consistency(*one_warehouse().db, &report);
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(report.total_violations, 0u);
  EXPECT_GT(report.rows_read, 390000u);  // all but ITEM and STOCK
  st = check_consistency(*two_warehouses(1).db, &report);
  EXPECT_TRUE(st.ok()) << st.ToString();
  std::printf("check of 2 warehouses over btree: %.2f s\n", report.seconds);
}

TEST(TpccDbTest, CreateRefusesBadOptions) {
  std::unique_ptr<Database> db;
  DbOptions o;
  o.index = "no-such-index";
  EXPECT_EQ(Database::create(o, &db).code(), Code::kInvalidArgument);
  o.index = "btree";
  o.warehouses = 0;
  EXPECT_EQ(Database::create(o, &db).code(), Code::kInvalidArgument);
  o.warehouses = 1;
  o.node_size = 100;  // btree takes multiples of 64
  EXPECT_EQ(Database::create(o, &db).code(), Code::kInvalidArgument);
  o.node_size = 512;
  o.index_opts["no-such-option"] = "1";
  EXPECT_EQ(Database::create(o, &db).code(), Code::kInvalidArgument);
  o.index_opts.clear();
  ASSERT_TRUE(Database::create(o, &db).ok());
  NurandConstants c;
  EXPECT_EQ(load(*db, 1, c, 2, nullptr).code(), Code::kInvalidArgument);  // 2 threads, 1 client
}

TEST(TpccDbTest, PoolSizesCoverTheReachableKeys) {
  EXPECT_EQ(max_table_keys(Table::kOrderLine, 2, 0), 2u * 30000 * 15);
  EXPECT_EQ(max_table_keys(Table::kHistory, 1, 1000), 31000u);
  EXPECT_EQ(max_table_keys(Table::kItem, 5, 1000), 100000u);
  EXPECT_EQ(table_pool_size(Table::kWarehouse, 1, 0), kPoolFloorBytes + (uint64_t{1} << 20));
  EXPECT_EQ(table_pool_size(Table::kStock, 1, 0) % (1u << 20), 0u);
  EXPECT_GE(table_pool_size(Table::kStock, 1, 0), kPoolFloorBytes + 100000 * kPoolBytesPerKey);
}

}  // namespace
}  // namespace nvindex::tpcc
