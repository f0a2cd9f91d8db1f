// TPC-C's five transactions (TPC-C 5.11 clauses 2.4 .. 2.8): their input
// generation and their execution over a Database, serializable under strict
// two-phase locking with NO_WAIT (lock_table.h).
//
// Execution has two phases. The first takes every lock and reads (and
// computes) everything; a lock conflict there aborts with nothing written,
// so an abort needs no undo. The second writes: row updates in place and
// index inserts and removes, and cannot conflict. Then every lock is
// released (commit). New-Order's 1% rollback (an unused item id) is found in
// the first phase too, so it also leaves nothing behind.
//
// Locks (what each transaction takes; "S" shared, "X" exclusive):
//   New-Order     X district D_NEXT_O_ID; X each STOCK row; X the new order
//                 (its ORDER, NEW-ORDER and ORDER-LINE rows share the
//                 order's lock, taken before they enter any index)
//   Payment       X warehouse W_YTD; X district D_YTD; X the customer
//   Order-Status  S the customer; S the customer's newest order
//   Delivery      per district: X the oldest new order (then checked to be
//                 still there); X its customer
//   Stock-Level   S district D_NEXT_O_ID; S each STOCK row read
// Columns no transaction writes (W_TAX, D_TAX, C_DISCOUNT, C_LAST, C_CREDIT,
// C_FIRST, names and addresses, ITEM, OL_I_ID) are read without locks: the
// load wrote them before any client started. Phantoms: new orders get ids
// above every existing one under the district's D_NEXT_O_ID lock, and enter
// the indexes only while their order lock is held, so a reader that finds a
// new order's key (Delivery, Order-Status) conflicts on its lock instead of
// seeing a half-inserted order; Stock-Level reads the order-lines of orders
// below D_NEXT_O_ID under the S lock of D_NEXT_O_ID, which every New-Order
// holds X until its order-lines are in.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "nvindex/status.h"
#include "tpcc/db.h"
#include "tpcc/load.h"
#include "tpcc/lock_table.h"

namespace nvindex::tpcc {

/// The five transaction types.
enum class TxType : uint8_t { kNewOrder, kPayment, kOrderStatus, kDelivery, kStockLevel };
inline constexpr int kTxTypes = 5;
/// "new_order", "payment", "order_status", "delivery", "stock_level".
const char* tx_name(TxType t);

/// How a transaction ended.
enum class TxOutcome : uint8_t {
  kCommitted,
  kRolledBack,  ///< New-Order's unused item id (clause 2.4.2.3): nothing written
  kAborted,     ///< a lock conflict (NO_WAIT): nothing written; retry
};

/// Index calls per table (what the thesis counts), per client.
struct OpCounts {
  uint64_t inserts = 0;
  uint64_t lookups = 0;
  uint64_t scans = 0;  ///< Index::scan calls
  uint64_t find_last_less_than = 0;
  uint64_t removes = 0;
  OpCounts& operator+=(const OpCounts& o);
};
using TableOps = std::array<OpCounts, kTables>;

/// Chooses a customer by C_ID (by_last_name false) or by the number of its
/// C_LAST (clause 2.5.1.2, 2.6.1.2).
struct CustomerChoice {
  bool by_last_name = false;
  uint32_t c_id = 0;    ///< 1..3000
  uint32_t c_last = 0;  ///< 0..999
};

/// New-Order's input (clause 2.4.1).
struct NewOrderInput {
  uint32_t w_id = 0, d_id = 0, c_id = 0;
  struct Line {
    uint32_t i_id;  ///< 1..100000; kItems + 1 = unused (rollback)
    uint32_t supply_w_id;
    uint32_t quantity;  ///< 1..10
  };
  std::vector<Line> lines;  ///< 5..15
  uint64_t entry_d = 0;     ///< O_ENTRY_D, microseconds since the epoch
};
/// New-Order's output (clause 2.4.3.3).
struct NewOrderOutput {
  uint32_t o_id = 0;
  int64_t total_cents = 0;  ///< sum(OL_AMOUNT) * (1 - C_DISCOUNT) * (1 + W_TAX + D_TAX), rounded
  struct Line {
    int32_t s_quantity;  ///< after the update
    char brand_generic;  ///< 'B' or 'G'
    int64_t i_price;     ///< cents
    int64_t ol_amount;   ///< cents
  };
  std::vector<Line> lines;
};

/// Payment's input (clause 2.5.1).
struct PaymentInput {
  uint32_t w_id = 0, d_id = 0;
  uint32_t c_w_id = 0, c_d_id = 0;
  CustomerChoice customer;
  int64_t h_amount = 0;  ///< cents, 100..500000
  uint64_t h_date = 0;   ///< microseconds since the epoch
};
/// Payment's output (clause 2.5.3.3, in part).
struct PaymentOutput {
  uint32_t c_id = 0;
  int64_t c_balance = 0;  ///< cents, after the payment
  std::string c_data;     ///< first 200 characters of C_DATA for a "BC" customer, else empty
};

/// Order-Status's input (clause 2.6.1).
struct OrderStatusInput {
  uint32_t w_id = 0, d_id = 0;
  CustomerChoice customer;
};
/// Order-Status's output (clause 2.6.3.3).
struct OrderStatusOutput {
  uint32_t c_id = 0;
  int64_t c_balance = 0;
  uint32_t o_id = 0;          ///< the customer's newest order
  uint32_t o_carrier_id = 0;  ///< 0 = null
  struct Line {
    uint32_t i_id, supply_w_id, quantity;
    int64_t amount;
    uint64_t delivery_d;  ///< 0 = null
  };
  std::vector<Line> lines;
};

/// Delivery's input (clause 2.7.1).
struct DeliveryInput {
  uint32_t w_id = 0;
  uint32_t carrier_id = 0;  ///< 1..10
  uint64_t delivery_d = 0;  ///< OL_DELIVERY_D, microseconds since the epoch
};
/// Delivery's output: the order delivered per district, 0 where the
/// district had no new order (skipped).
struct DeliveryOutput {
  std::array<uint32_t, kDistricts> o_id{};
};

/// Stock-Level's input (clause 2.8.1).
struct StockLevelInput {
  uint32_t w_id = 0, d_id = 0;
  int32_t threshold = 0;  ///< 10..20
};
/// Stock-Level's output.
struct StockLevelOutput {
  uint32_t low_stock = 0;  ///< distinct items of the last 20 orders below the threshold
};

/// Draws transaction inputs per clause 2.x.1 for a terminal whose home is
/// warehouse `w_id` of `warehouses`, with the run's NURand constants.
class InputGenerator {
 public:
  InputGenerator(uint64_t seed, uint32_t warehouses, const NurandConstants& run)
      : rng_(seed), warehouses_(warehouses), c_(run) {}
  NewOrderInput new_order(uint32_t w_id);
  PaymentInput payment(uint32_t w_id);
  OrderStatusInput order_status(uint32_t w_id);
  DeliveryInput delivery(uint32_t w_id);
  StockLevelInput stock_level(uint32_t w_id, uint32_t d_id);

 private:
  uint32_t other_warehouse(uint32_t w_id);
  CustomerChoice customer();
  Random rng_;
  uint32_t warehouses_;
  NurandConstants c_;
};

/// Runs transactions for one client (one thread) over a database shared
/// with the other clients' Executors. Each call returns Ok with the outcome
/// in *outcome (kAborted: nothing written; the caller retries the same
/// input), or an index's error (OutOfSpace: a pool is full; the database may
/// then be partly written and the run must stop), or InvalidArgument for an
/// input naming a warehouse, district or customer that does not exist.
class Executor {
 public:
  /// `client` < db.options().clients: the row arena and history keys it uses.
  Executor(Database& db, LockTable& locks, unsigned client);

  Status new_order(const NewOrderInput& in, NewOrderOutput* out, TxOutcome* outcome);
  Status payment(const PaymentInput& in, PaymentOutput* out, TxOutcome* outcome);
  Status order_status(const OrderStatusInput& in, OrderStatusOutput* out, TxOutcome* outcome);
  /// All ten districts in one transaction (clause 2.7.4).
  Status delivery(const DeliveryInput& in, DeliveryOutput* out, TxOutcome* outcome);
  Status stock_level(const StockLevelInput& in, StockLevelOutput* out, TxOutcome* outcome);

  /// Index calls so far, per table.
  const TableOps& ops() const { return ops_; }

 private:
  /// Index calls that count into ops_.
  std::optional<Value> lookup(Table t, uint64_t key);
  Status insert(Table t, uint64_t key, Value v);
  Status remove(Table t, uint64_t key);
  /// Up to `count` pairs from `start` below `end` (exclusive).
  void scan(Table t, uint64_t start, uint64_t end, size_t count,
            std::vector<std::pair<uint64_t, Value>>* out);
  std::optional<std::pair<uint64_t, Value>> find_last_less_than(Table t, uint64_t key);
  /// The customer a choice names in (w, d) (clause 2.5.2.2: by last name,
  /// the ceil(n/2)-th by C_FIRST), or nullptr.
  Customer* find_customer(uint32_t w, uint32_t d, const CustomerChoice& c);
  Status abort(TxOutcome* outcome);

  Database& db_;
  TxLocks locks_;
  unsigned client_;
  uint64_t history_seq_ = 0;
  TableOps ops_{};
  std::vector<std::pair<uint64_t, Value>> buf_;
};

}  // namespace nvindex::tpcc
