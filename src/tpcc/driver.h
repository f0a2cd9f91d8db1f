// The TPC-C run: C clients (threads), each a terminal with a home warehouse
// drawing its transactions from its own shuffled deck (TPC-C 5.11 clause
// 5.2.4.2), no think or keying times, every aborted transaction retried
// with the same input until it commits or rolls back.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>

#include "nvindex/status.h"
#include "tpcc/db.h"
#include "tpcc/txn.h"

namespace nvindex::tpcc {

/// The deck of clause 5.2.4.2: 23 cards, 10 New-Order, 10 Payment and one
/// each of Order-Status, Delivery and Stock-Level (Payment 43.5%, the other
/// three 4.3% each, above the minimums of clause 5.2.3).
inline constexpr std::array<TxType, 23> kDeck = {
    TxType::kNewOrder,    TxType::kNewOrder, TxType::kNewOrder,  TxType::kNewOrder,
    TxType::kNewOrder,    TxType::kNewOrder, TxType::kNewOrder,  TxType::kNewOrder,
    TxType::kNewOrder,    TxType::kNewOrder, TxType::kPayment,   TxType::kPayment,
    TxType::kPayment,     TxType::kPayment,  TxType::kPayment,   TxType::kPayment,
    TxType::kPayment,     TxType::kPayment,  TxType::kPayment,   TxType::kPayment,
    TxType::kOrderStatus, TxType::kDelivery, TxType::kStockLevel};

/// What to run.
struct RunOptions {
  uint64_t transactions = 0;  ///< total over all clients; 0: no limit (run for `seconds`)
  double seconds = 0;         ///< > 0: stop after this long, or at `transactions` if sooner
  unsigned clients = 1;       ///< threads, <= the database's clients
  uint64_t seed = 1;
  NurandConstants constants;  ///< the run's (draw_constants)
  /// Called about every 2 s from client 0 with the transactions done so
  /// far (all clients); may be empty.
  std::function<void(uint64_t done)> progress;
};

/// What a run did.
struct RunStats {
  std::array<uint64_t, kTxTypes> committed{};  ///< per TxType (rolled back not included)
  uint64_t rolled_back = 0;                    ///< New-Orders rolled back (clause 2.4.2.3)
  std::array<uint64_t, kTxTypes> aborts{};     ///< lock conflicts (each retried)
  uint64_t skipped_deliveries = 0;             ///< districts Delivery found no new order in
  TableOps ops{};                              ///< index calls per table, all clients
  double seconds = 0;                          ///< wall time of the run
  /// Transactions that ended (committed or rolled back), all types.
  uint64_t transactions() const;
};

/// Runs the mix over `db` with options.clients threads: client k's home
/// warehouse is k mod W + 1 and its Stock-Level district (k / W) mod 10 + 1
/// (clause 2.8.1: fixed per terminal). Errors: InvalidArgument (clients 0 or
/// more than the database was made for; neither transactions nor seconds),
/// else the first error a transaction returned (OutOfSpace: a pool is full;
/// the run stops).
Status run(Database& db, const RunOptions& options, RunStats* stats);

}  // namespace nvindex::tpcc
