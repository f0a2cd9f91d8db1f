// TPC-C's nine tables (TPC-C 5.11 clause 1.3) as fixed-size row structs, and
// the 64-bit keys under which the indexes (Index<uint64_t>) hold them.
//
// Columns follow clause 1.3 with these representations:
//   - money (signed numeric(n,2)): int64_t cents, so the consistency
//     conditions of clause 3.3.2 compare exact integers;
//   - rates (W_TAX, D_TAX: numeric(4,4); C_DISCOUNT: numeric(4,4)):
//     int32_t ten-thousandths (0.1234 = 1234);
//   - date and time: uint64_t microseconds since the Unix epoch, 0 = null
//     (O_CARRIER_ID null is 0 too: carriers are 1..10);
//   - text: a char array of the column's maximum size plus one, NUL-padded
//     (variable text keeps its length implicitly: strnlen).
// Rows live in a RowArena (src/tpcc/db.h); an index's value is the row's
// handle (its address).
//
// Key layouts (bits, most significant first; every field is the column's
// value, unshifted, so keys of one table sort as the primary key does):
//   warehouse       w(16)
//   district        w(16) d(4)
//   customer        w(16) d(4) c(12)
//   customer_last   w(16) d(4) last(10) c(12)     secondary: C_LAST's
//                                                 number 0..999 (clause
//                                                 4.3.2.3), then C_ID
//   history         client(16) seq(48)            no primary key in the spec;
//                                                 each client numbers its own
//   new_order       w(16) d(4) o(28)
//   order           w(16) d(4) o(28)
//   order_customer  w(16) d(4) c(12) o(28)        secondary: a customer's
//                                                 orders, the newest last
//   order_line      w(16) d(4) o(28) ol(4)
//   item            i(17)
//   stock           w(16) i(17)
// Ranges: w 1..65535, d 1..10, c 1..3000, o 1..2^28-1 (268 million orders
// per district), ol 1..15, i 1..100000, last 0..999.
#pragma once

#include <cstdint>

namespace nvindex::tpcc {

/// Districts per warehouse (clause 1.2.1).
inline constexpr uint32_t kDistricts = 10;
/// Customers per district (clause 4.3.3.1).
inline constexpr uint32_t kCustomers = 3000;
/// Items (clause 4.3.3.1).
inline constexpr uint32_t kItems = 100000;
/// Orders per district at load (clause 4.3.3.1).
inline constexpr uint32_t kInitialOrders = 3000;
/// First order id with a new-order row at load (2,101..3,000: 900 rows).
inline constexpr uint32_t kFirstNewOrder = 2101;
/// Most order-lines per order (clause 2.4.1.3: 5..15).
inline constexpr uint32_t kMaxOrderLines = 15;
/// Most warehouses a key can name.
inline constexpr uint32_t kMaxWarehouses = 65535;
/// Largest order id a key can name.
inline constexpr uint64_t kMaxOrderId = (uint64_t{1} << 28) - 1;

/// WAREHOUSE (clause 1.3.1), 104 B.
struct Warehouse {
  uint32_t w_id;
  int32_t w_tax;    ///< ten-thousandths, 0..2000
  int64_t w_ytd;    ///< cents
  char w_name[11];  ///< variable text, size 10
  char w_street_1[21];
  char w_street_2[21];
  char w_city[21];
  char w_state[3];
  char w_zip[10];
};
static_assert(sizeof(Warehouse) == 104);

/// DISTRICT (clause 1.3.2), 112 B.
struct District {
  uint32_t d_id;
  uint32_t d_w_id;
  int32_t d_tax;  ///< ten-thousandths, 0..2000
  uint32_t d_next_o_id;
  int64_t d_ytd;  ///< cents
  char d_name[11];
  char d_street_1[21];
  char d_street_2[21];
  char d_city[21];
  char d_state[3];
  char d_zip[10];
};
static_assert(sizeof(District) == 112);

/// CUSTOMER (clause 1.3.3), 696 B.
struct Customer {
  uint32_t c_id;
  uint32_t c_d_id;
  uint32_t c_w_id;
  int32_t c_discount;     ///< ten-thousandths, 0..5000
  int64_t c_credit_lim;   ///< cents
  int64_t c_balance;      ///< cents, signed
  int64_t c_ytd_payment;  ///< cents
  uint32_t c_payment_cnt;
  uint32_t c_delivery_cnt;
  uint64_t c_since;        ///< microseconds since the epoch
  uint16_t c_last_number;  ///< 0..999: the number C_LAST was made from
  char c_first[17];
  char c_middle[3];
  char c_last[17];
  char c_street_1[21];
  char c_street_2[21];
  char c_city[21];
  char c_state[3];
  char c_zip[10];
  char c_phone[17];
  char c_credit[3];  ///< "GC" or "BC"
  char c_data[501];
};
static_assert(sizeof(Customer) == 696);

/// HISTORY (clause 1.3.4), 72 B.
struct History {
  uint32_t h_c_id;
  uint32_t h_c_d_id;
  uint32_t h_c_w_id;
  uint32_t h_d_id;
  uint32_t h_w_id;
  int64_t h_amount;  ///< cents
  uint64_t h_date;   ///< microseconds since the epoch
  char h_data[25];
};
static_assert(sizeof(History) == 72);

/// NEW-ORDER (clause 1.3.5), 12 B.
struct NewOrder {
  uint32_t no_o_id;
  uint32_t no_d_id;
  uint32_t no_w_id;
};
static_assert(sizeof(NewOrder) == 12);

/// ORDER (clause 1.3.6), 40 B.
struct Order {
  uint32_t o_id;
  uint32_t o_d_id;
  uint32_t o_w_id;
  uint32_t o_c_id;
  uint64_t o_entry_d;     ///< microseconds since the epoch
  uint32_t o_carrier_id;  ///< 1..10, 0 = null
  uint32_t o_ol_cnt;      ///< 5..15
  uint32_t o_all_local;   ///< 0 or 1
};
static_assert(sizeof(Order) == 40);

/// ORDER-LINE (clause 1.3.7), 80 B.
struct OrderLine {
  uint32_t ol_o_id;
  uint32_t ol_d_id;
  uint32_t ol_w_id;
  uint32_t ol_number;
  uint32_t ol_i_id;
  uint32_t ol_supply_w_id;
  uint64_t ol_delivery_d;  ///< microseconds since the epoch, 0 = null
  uint32_t ol_quantity;
  int64_t ol_amount;  ///< cents
  char ol_dist_info[25];
};
static_assert(sizeof(OrderLine) == 80);

/// ITEM (clause 1.3.8), 96 B.
struct Item {
  uint32_t i_id;
  uint32_t i_im_id;
  int64_t i_price;  ///< cents
  char i_name[25];
  char i_data[51];
};
static_assert(sizeof(Item) == 96);

/// STOCK (clause 1.3.9), 336 B.
struct Stock {
  uint32_t s_i_id;
  uint32_t s_w_id;
  int32_t s_quantity;
  uint32_t s_order_cnt;
  uint32_t s_remote_cnt;
  uint64_t s_ytd;
  char s_dist[kDistricts][25];  ///< S_DIST_01 .. S_DIST_10
  char s_data[51];
};
static_assert(sizeof(Stock) == 336);

/// The tables and secondary indexes, one Index<uint64_t> each.
enum class Table : uint8_t {
  kWarehouse,
  kDistrict,
  kCustomer,
  kCustomerLast,
  kHistory,
  kNewOrder,
  kOrder,
  kOrderCustomer,
  kOrderLine,
  kItem,
  kStock,
};
/// How many Table values there are.
inline constexpr int kTables = 11;
/// The table's name as reports print it ("order_line", "customer_last").
const char* table_name(Table t);

/// Keys (see the file comment for the layouts). Arguments must be in their
/// ranges; no check is made here (the loader and the transactions only
/// produce in-range values).
namespace key {
inline constexpr uint64_t warehouse(uint64_t w) { return w; }
inline constexpr uint64_t district(uint64_t w, uint64_t d) { return w << 4 | d; }
inline constexpr uint64_t customer(uint64_t w, uint64_t d, uint64_t c) {
  return district(w, d) << 12 | c;
}
inline constexpr uint64_t customer_last(uint64_t w, uint64_t d, uint64_t last, uint64_t c) {
  return (district(w, d) << 10 | last) << 12 | c;
}
inline constexpr uint64_t history(uint64_t client, uint64_t seq) { return client << 48 | seq; }
inline constexpr uint64_t order(uint64_t w, uint64_t d, uint64_t o) {
  return district(w, d) << 28 | o;
}
inline constexpr uint64_t new_order(uint64_t w, uint64_t d, uint64_t o) { return order(w, d, o); }
inline constexpr uint64_t order_customer(uint64_t w, uint64_t d, uint64_t c, uint64_t o) {
  return customer(w, d, c) << 28 | o;
}
inline constexpr uint64_t order_line(uint64_t w, uint64_t d, uint64_t o, uint64_t ol) {
  return order(w, d, o) << 4 | ol;
}
inline constexpr uint64_t item(uint64_t i) { return i; }
inline constexpr uint64_t stock(uint64_t w, uint64_t i) { return w << 17 | i; }

/// The order id of an order, new_order or order_customer key.
inline constexpr uint32_t order_id_of(uint64_t k) { return static_cast<uint32_t>(k & kMaxOrderId); }
}  // namespace key

}  // namespace nvindex::tpcc
