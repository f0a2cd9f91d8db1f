// TPC-C's consistency conditions, clause 3.3.2.1 .. 3.3.2.12 (check.h).
#include "tpcc/check.h"

#include <chrono>
#include <cstddef>
#include <utility>
#include <vector>

namespace nvindex::tpcc {

namespace {

/// Keys read per Index::scan call.
constexpr size_t kScanBatch = 1024;
/// Violations kept in CheckReport::violations.
constexpr size_t kMaxKept = 100;

/// Calls f(key, value) for every key of index `ix` in [lo, hi], in key
/// order, scanning kScanBatch keys at a time; returns the keys visited.
template <class F>
uint64_t scan_range(Index<uint64_t>& ix, uint64_t lo, uint64_t hi, F&& f) {
  std::vector<std::pair<uint64_t, Value>> batch;
  uint64_t visited = 0;
  uint64_t start = lo;
  for (;;) {
    const size_t n = ix.scan(start, kScanBatch, &batch);
    for (size_t i = 0; i < n; ++i) {
      if (batch[i].first > hi) return visited;
      f(batch[i].first, batch[i].second);
      ++visited;
    }
    if (n < kScanBatch || batch[n - 1].first >= hi) return visited;
    start = batch[n - 1].first + 1;
  }
}

/// One ORDER row of a district, with what the checks gather about it.
struct OrderInfo {
  uint32_t o_id;
  uint32_t c_id;
  uint32_t carrier;
  uint32_t ol_cnt;
  uint32_t lines = 0;  ///< ORDER-LINE rows found
  bool has_new_order = false;
};

class Checker {
 public:
  Checker(Database& db, CheckReport* report)
      : db_(db), report_(report), warehouses_(db.warehouses()) {}

  void run() {
    sum_history();
    for (uint32_t w = 1; w <= warehouses_; ++w) check_warehouse(w);
  }

 private:
  /// HISTORY sums: per H_W_ID (condition 8), per (H_W_ID, H_D_ID)
  /// (condition 9) and per (H_C_W_ID, H_C_D_ID, H_C_ID) (condition 10).
  /// HISTORY has no key by warehouse, so one scan of the whole table.
  /// Rows naming a warehouse, district or customer out of range count
  /// nowhere (the sums they should be in then differ).
  void sum_history() {
    h_w_.assign(warehouses_ + 1, 0);
    h_wd_.assign((warehouses_ + 1) * (kDistricts + 1), 0);
    h_c_.assign(static_cast<size_t>(warehouses_) * kDistricts * kCustomers, 0);
    report_->rows_read +=
        scan_range(db_.index(Table::kHistory), 0, ~uint64_t{0}, [&](uint64_t, Value v) {
          const History* h = db_.row<History>(v);
          if (in_range(h->h_w_id, h->h_d_id)) {
            h_w_[h->h_w_id] += h->h_amount;
            h_wd_[h->h_w_id * (kDistricts + 1) + h->h_d_id] += h->h_amount;
          }
          if (in_range(h->h_c_w_id, h->h_c_d_id) && h->h_c_id >= 1 && h->h_c_id <= kCustomers) {
            h_c_[customer_slot(h->h_c_w_id, h->h_c_d_id, h->h_c_id)] += h->h_amount;
          }
        });
  }

  bool in_range(uint32_t w, uint32_t d) const {
    return w >= 1 && w <= warehouses_ && d >= 1 && d <= kDistricts;
  }
  static size_t customer_slot(uint32_t w, uint32_t d, uint32_t c) {
    return (static_cast<size_t>(w - 1) * kDistricts + (d - 1)) * kCustomers + (c - 1);
  }

  void check_warehouse(uint32_t w) {
    auto wv = db_.index(Table::kWarehouse).lookup(key::warehouse(w));
    if (!wv) {
      violate(1, w, 0, 0, "WAREHOUSE row missing");
      return;
    }
    ++report_->rows_read;
    const int64_t w_ytd = db_.row<Warehouse>(*wv)->w_ytd;
    int64_t sum_d_ytd = 0;
    std::vector<const District*> districts;
    report_->rows_read +=
        scan_range(db_.index(Table::kDistrict), key::district(w, 1), key::district(w, kDistricts),
                   [&](uint64_t, Value v) { districts.push_back(db_.row<District>(v)); });
    for (const District* d : districts) sum_d_ytd += d->d_ytd;
    // 3.3.2.1: W_YTD = sum(D_YTD).
    if (w_ytd != sum_d_ytd) {
      violate(1, w, 0, 0,
              "W_YTD = " + std::to_string(w_ytd) + " != sum(D_YTD) = " + std::to_string(sum_d_ytd));
    }
    // 3.3.2.8: W_YTD = sum(H_AMOUNT) with H_W_ID = W_ID.
    if (w_ytd != h_w_[w]) {
      violate(
          8, w, 0, 0,
          "W_YTD = " + std::to_string(w_ytd) + " != sum(H_AMOUNT) = " + std::to_string(h_w_[w]));
    }
    for (const District* d : districts) check_district(w, *d);
  }

  void check_district(uint32_t w, const District& dist) {
    const uint32_t d = dist.d_id;
    if (!in_range(w, d)) return;
    // ORDER rows of the district, by O_ID.
    std::vector<OrderInfo> orders;
    uint64_t sum_ol_cnt = 0;
    report_->rows_read += scan_range(
        db_.index(Table::kOrder), key::order(w, d, 0), key::order(w, d, kMaxOrderId),
        [&](uint64_t k, Value v) {
          const Order* o = db_.row<Order>(v);
          orders.push_back({key::order_id_of(k), o->o_c_id, o->o_carrier_id, o->o_ol_cnt});
          sum_ol_cnt += o->o_ol_cnt;
        });
    // NEW-ORDER keys of the district, ascending: marks their orders.
    uint64_t no_count = 0;
    uint32_t no_min = 0, no_max = 0;
    size_t oi = 0;
    report_->rows_read += scan_range(db_.index(Table::kNewOrder), key::new_order(w, d, 0),
                                     key::new_order(w, d, kMaxOrderId), [&](uint64_t k, Value) {
                                       const uint32_t o = key::order_id_of(k);
                                       if (no_count == 0) no_min = o;
                                       no_max = o;
                                       ++no_count;
                                       while (oi < orders.size() && orders[oi].o_id < o) ++oi;
                                       if (oi < orders.size() && orders[oi].o_id == o)
                                         orders[oi].has_new_order = true;
                                     });
    // ORDER-LINE rows of the district, ascending by (O_ID, OL_NUMBER):
    // lines per order (6), OL_DELIVERY_D vs O_CARRIER_ID (7), and the
    // delivered OL_AMOUNT per customer (10, 12).
    std::vector<int64_t> delivered(kCustomers + 1, 0);
    uint64_t ol_count = 0;
    oi = 0;
    report_->rows_read +=
        scan_range(db_.index(Table::kOrderLine), key::order_line(w, d, 0, 0),
                   key::order_line(w, d, kMaxOrderId, kMaxOrderLines), [&](uint64_t k, Value v) {
                     ++ol_count;
                     const auto o = static_cast<uint32_t>((k >> 4) & kMaxOrderId);
                     while (oi < orders.size() && orders[oi].o_id < o) ++oi;
                     if (oi == orders.size() || orders[oi].o_id != o)
                       return;  // no ORDER row: see 4
                     OrderInfo& order = orders[oi];
                     ++order.lines;
                     const OrderLine* l = db_.row<OrderLine>(v);
                     // 3.3.2.7: OL_DELIVERY_D null iff O_CARRIER_ID null.
                     if ((l->ol_delivery_d == 0) != (order.carrier == 0)) {
                       violate(7, w, d, o,
                               "OL_NUMBER " + std::to_string(k & 0xf) + ": OL_DELIVERY_D " +
                                   (l->ol_delivery_d == 0 ? "null" : "set") + " but O_CARRIER_ID " +
                                   (order.carrier == 0 ? "null" : std::to_string(order.carrier)));
                     }
                     if (l->ol_delivery_d != 0 && order.c_id >= 1 && order.c_id <= kCustomers) {
                       delivered[order.c_id] += l->ol_amount;
                     }
                   });

    const uint32_t max_o = orders.empty() ? 0 : orders.back().o_id;
    // 3.3.2.2: D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID) (the last part
    // only with new-order rows).
    const int64_t next_minus_1 = static_cast<int64_t>(dist.d_next_o_id) - 1;
    if (next_minus_1 != max_o || (no_count > 0 && next_minus_1 != no_max)) {
      violate(2, w, d, 0,
              "D_NEXT_O_ID - 1 = " + std::to_string(next_minus_1) +
                  ", max(O_ID) = " + std::to_string(max_o) +
                  ", max(NO_O_ID) = " + (no_count > 0 ? std::to_string(no_max) : "none"));
    }
    // 3.3.2.3: max(NO_O_ID) - min(NO_O_ID) + 1 = count(NEW-ORDER).
    if (no_count > 0 && uint64_t{no_max} - no_min + 1 != no_count) {
      violate(3, w, d, 0,
              "max(NO_O_ID) - min(NO_O_ID) + 1 = " + std::to_string(no_max) + " - " +
                  std::to_string(no_min) +
                  " + 1 = " + std::to_string(uint64_t{no_max} - no_min + 1) +
                  " != count(NEW-ORDER) = " + std::to_string(no_count));
    }
    // 3.3.2.4: sum(O_OL_CNT) = count(ORDER-LINE).
    if (sum_ol_cnt != ol_count) {
      violate(4, w, d, 0,
              "sum(O_OL_CNT) = " + std::to_string(sum_ol_cnt) +
                  " != count(ORDER-LINE) = " + std::to_string(ol_count));
    }
    for (const OrderInfo& o : orders) {
      // 3.3.2.5: O_CARRIER_ID null iff a NEW-ORDER row exists.
      if ((o.carrier == 0) != o.has_new_order) {
        violate(5, w, d, o.o_id,
                std::string("O_CARRIER_ID ") +
                    (o.carrier == 0 ? "null" : std::to_string(o.carrier)) +
                    (o.has_new_order ? " with" : " without") + " a NEW-ORDER row");
      }
      // 3.3.2.6: O_OL_CNT = count(ORDER-LINE) of the order.
      if (o.ol_cnt != o.lines) {
        violate(6, w, d, o.o_id,
                "O_OL_CNT = " + std::to_string(o.ol_cnt) +
                    " != count(ORDER-LINE) = " + std::to_string(o.lines));
      }
    }
    // 3.3.2.9: D_YTD = sum(H_AMOUNT) with (H_W_ID, H_D_ID) = (W_ID, D_ID).
    const int64_t h_d = h_wd_[w * (kDistricts + 1) + d];
    if (dist.d_ytd != h_d) {
      violate(
          9, w, d, 0,
          "D_YTD = " + std::to_string(dist.d_ytd) + " != sum(H_AMOUNT) = " + std::to_string(h_d));
    }
    // Customers: 10, 12, and C_DELIVERY_CNT for 11.
    uint64_t delivery_cnt = 0;
    report_->rows_read +=
        scan_range(db_.index(Table::kCustomer), key::customer(w, d, 1), key::customer(w, d, 4095),
                   [&](uint64_t k, Value v) {
                     const auto c = static_cast<uint32_t>(k & 0xfff);
                     const Customer* r = db_.row<Customer>(v);
                     delivery_cnt += r->c_delivery_cnt;
                     if (c > kCustomers) return;
                     const int64_t ol = delivered[c];
                     const int64_t h = h_c_[customer_slot(w, d, c)];
                     // 3.3.2.10: C_BALANCE = sum(delivered OL_AMOUNT) - sum(H_AMOUNT).
                     if (r->c_balance != ol - h) {
                       violate(10, w, d, c,
                               "C_BALANCE = " + std::to_string(r->c_balance) +
                                   " != sum(OL_AMOUNT) - sum(H_AMOUNT) = " + std::to_string(ol) +
                                   " - " + std::to_string(h) + " = " + std::to_string(ol - h));
                     }
                     // 3.3.2.12: C_BALANCE + C_YTD_PAYMENT = sum(delivered OL_AMOUNT).
                     if (r->c_balance + r->c_ytd_payment != ol) {
                       violate(12, w, d, c,
                               "C_BALANCE + C_YTD_PAYMENT = " + std::to_string(r->c_balance) +
                                   " + " + std::to_string(r->c_ytd_payment) + " = " +
                                   std::to_string(r->c_balance + r->c_ytd_payment) +
                                   " != sum(OL_AMOUNT) = " + std::to_string(ol));
                     }
                   });
    // 3.3.2.11, in the form that holds after Delivery too (check.h):
    // count(ORDER) - count(NEW-ORDER) = 2100 + sum(C_DELIVERY_CNT).
    const int64_t lhs = static_cast<int64_t>(orders.size()) - static_cast<int64_t>(no_count);
    const int64_t rhs = int64_t{kFirstNewOrder - 1} + static_cast<int64_t>(delivery_cnt);
    if (lhs != rhs) {
      violate(11, w, d, 0,
              "count(ORDER) - count(NEW-ORDER) = " + std::to_string(orders.size()) + " - " +
                  std::to_string(no_count) + " = " + std::to_string(lhs) +
                  " != 2100 + sum(C_DELIVERY_CNT) = 2100 + " + std::to_string(delivery_cnt));
    }
  }

  void violate(int condition, uint32_t w, uint32_t d, uint32_t id, std::string what) {
    ++report_->total_violations;
    if (report_->violations.size() < kMaxKept) {
      report_->violations.push_back({condition, w, d, id, std::move(what)});
    }
  }

  Database& db_;
  CheckReport* report_;
  const uint32_t warehouses_;
  std::vector<int64_t> h_w_;   ///< sum(H_AMOUNT) by H_W_ID
  std::vector<int64_t> h_wd_;  ///< by H_W_ID * 11 + H_D_ID
  std::vector<int64_t> h_c_;   ///< by customer_slot(H_C_W_ID, H_C_D_ID, H_C_ID)
};

}  // namespace

std::string describe(const Violation& v) {
  std::string s = "condition " + std::to_string(v.condition) + " (clause 3.3.2." +
                  std::to_string(v.condition) + ") w=" + std::to_string(v.w);
  if (v.d != 0) s += " d=" + std::to_string(v.d);
  if (v.id != 0) {
    // Conditions 10 and 12 are per customer, 5, 6 and 7 per order.
    s += (v.condition == 10 || v.condition == 12 ? " c=" : " o=") + std::to_string(v.id);
  }
  return s + ": " + v.what;
}

Status check_consistency(Database& db, CheckReport* report) {
  *report = CheckReport{};
  const auto t0 = std::chrono::steady_clock::now();
  Checker(db, report).run();
  report->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (report->total_violations == 0) return Status::Ok();
  return Status::Corruption("TPC-C consistency: " + describe(report->violations.front()) + " (" +
                            std::to_string(report->total_violations) + " violation" +
                            (report->total_violations == 1 ? "" : "s") + ")");
}

}  // namespace nvindex::tpcc
