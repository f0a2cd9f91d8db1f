#include "tpcc/driver.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

namespace nvindex::tpcc {

uint64_t RunStats::transactions() const {
  uint64_t n = rolled_back;
  for (uint64_t c : committed) n += c;
  return n;
}

namespace {

using Clock = std::chrono::steady_clock;

uint64_t now_us() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

/// One client's loop; its counts go to *stats (its own), its error to *error.
void client_loop(Database& db, LockTable& locks, const RunOptions& o, unsigned k, uint64_t quota,
                 const Clock::time_point deadline, std::atomic<uint64_t>& done,
                 std::atomic<bool>& stop, RunStats* stats, Status* error) {
  const uint32_t w_home = k % db.warehouses() + 1;
  const uint32_t d_stock = (k / db.warehouses()) % kDistricts + 1;
  Executor ex(db, locks, k);
  InputGenerator gen(o.seed * 0x9e3779b97f4a7c15ull + k + 1, db.warehouses(), o.constants);
  std::mt19937_64 deck_rng(o.seed ^ (uint64_t{k} << 32));
  const bool timed = o.seconds > 0;
  std::array<TxType, kDeck.size()> deck = kDeck;
  size_t card = deck.size();
  auto last_progress = Clock::now();
  for (uint64_t n = 0; n < quota; ++n) {
    if (stop.load(std::memory_order_relaxed)) break;
    if (timed && (n & 15) == 0 && Clock::now() >= deadline) break;
    if (card == deck.size()) {
      std::shuffle(deck.begin(), deck.end(), deck_rng);
      card = 0;
    }
    const TxType t = deck[card++];
    const auto ti = static_cast<size_t>(t);
    TxOutcome outcome = TxOutcome::kAborted;
    Status s;
    // Inputs are drawn once; an aborted transaction retries the same input
    // (its timestamps taken anew).
    NewOrderInput no;
    PaymentInput pay;
    OrderStatusInput os;
    DeliveryInput del;
    StockLevelInput sl;
    switch (t) {
      case TxType::kNewOrder:
        no = gen.new_order(w_home);
        break;
      case TxType::kPayment:
        pay = gen.payment(w_home);
        break;
      case TxType::kOrderStatus:
        os = gen.order_status(w_home);
        break;
      case TxType::kDelivery:
        del = gen.delivery(w_home);
        break;
      case TxType::kStockLevel:
        sl = gen.stock_level(w_home, d_stock);
        break;
    }
    for (unsigned attempt = 0;; ++attempt) {
      switch (t) {
        case TxType::kNewOrder: {
          no.entry_d = now_us();
          NewOrderOutput out;
          s = ex.new_order(no, &out, &outcome);
          break;
        }
        case TxType::kPayment: {
          pay.h_date = now_us();
          PaymentOutput out;
          s = ex.payment(pay, &out, &outcome);
          break;
        }
        case TxType::kOrderStatus: {
          OrderStatusOutput out;
          s = ex.order_status(os, &out, &outcome);
          break;
        }
        case TxType::kDelivery: {
          del.delivery_d = now_us();
          DeliveryOutput out;
          s = ex.delivery(del, &out, &outcome);
          if (s.ok() && outcome == TxOutcome::kCommitted) {
            for (uint32_t x : out.o_id) stats->skipped_deliveries += x == 0 ? 1 : 0;
          }
          break;
        }
        case TxType::kStockLevel: {
          StockLevelOutput out;
          s = ex.stock_level(sl, &out, &outcome);
          break;
        }
      }
      if (!s.ok() || outcome != TxOutcome::kAborted) break;
      ++stats->aborts[ti];
      // Back off before the retry: the holder needs a few microseconds.
      for (unsigned i = 0; i < std::min(attempt, 8u); ++i) std::this_thread::yield();
    }
    if (!s.ok()) {
      *error = s;
      stop.store(true, std::memory_order_relaxed);
      break;
    }
    if (outcome == TxOutcome::kRolledBack) {
      ++stats->rolled_back;
    } else {
      ++stats->committed[ti];
    }
    const uint64_t all = done.fetch_add(1, std::memory_order_relaxed) + 1;
    if (k == 0 && o.progress && Clock::now() - last_progress > std::chrono::seconds(2)) {
      last_progress = Clock::now();
      o.progress(all);
    }
  }
  stats->ops = ex.ops();
}

}  // namespace

Status run(Database& db, const RunOptions& o, RunStats* stats) {
  *stats = RunStats{};
  if (o.clients == 0 || o.clients > db.options().clients) {
    return Status::InvalidArgument("tpcc: clients must be 1.." +
                                   std::to_string(db.options().clients) + ", got " +
                                   std::to_string(o.clients));
  }
  if (o.transactions == 0 && !(o.seconds > 0)) {
    return Status::InvalidArgument("tpcc: give a number of transactions or a duration");
  }
  LockTable locks;
  std::atomic<uint64_t> done{0};
  std::atomic<bool> stop{false};
  std::vector<RunStats> per(o.clients);
  std::vector<Status> errors(o.clients);
  const auto start = Clock::now();
  const auto deadline =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.seconds));
  std::vector<std::thread> threads;
  for (unsigned k = 0; k < o.clients; ++k) {
    // A client's share of the transactions (it may be 0: fewer
    // transactions than clients); no limit without a count.
    const uint64_t quota = o.transactions == 0
                               ? UINT64_MAX
                               : o.transactions / o.clients + (k < o.transactions % o.clients);
    threads.emplace_back(client_loop, std::ref(db), std::ref(locks), std::cref(o), k, quota,
                         deadline, std::ref(done), std::ref(stop), &per[k], &errors[k]);
  }
  for (std::thread& t : threads) t.join();
  stats->seconds = std::chrono::duration<double>(Clock::now() - start).count();
  for (const RunStats& p : per) {
    for (int t = 0; t < kTxTypes; ++t) {
      stats->committed[t] += p.committed[t];
      stats->aborts[t] += p.aborts[t];
    }
    stats->rolled_back += p.rolled_back;
    stats->skipped_deliveries += p.skipped_deliveries;
    for (int t = 0; t < kTables; ++t) stats->ops[t] += p.ops[t];
  }
  for (const Status& e : errors) {
    if (!e.ok()) return e;
  }
  return Status::Ok();
}

}  // namespace nvindex::tpcc
