#include "tpcc/txn.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <string_view>

namespace nvindex::tpcc {

namespace {

__extension__ using i128 = __int128;

/// History keys of the run start here, above any the load numbers.
constexpr uint64_t kRunHistorySeq = uint64_t{1} << 40;

bool contains_original(const char* s) { return std::strstr(s, "ORIGINAL") != nullptr; }

}  // namespace

const char* tx_name(TxType t) {
  switch (t) {
    case TxType::kNewOrder:
      return "new_order";
    case TxType::kPayment:
      return "payment";
    case TxType::kOrderStatus:
      return "order_status";
    case TxType::kDelivery:
      return "delivery";
    case TxType::kStockLevel:
      return "stock_level";
  }
  return "?";
}

OpCounts& OpCounts::operator+=(const OpCounts& o) {
  inserts += o.inserts;
  lookups += o.lookups;
  scans += o.scans;
  find_last_less_than += o.find_last_less_than;
  removes += o.removes;
  return *this;
}

// --- input generation (clauses 2.4.1, 2.5.1, 2.6.1, 2.7.1, 2.8.1) ----------

uint32_t InputGenerator::other_warehouse(uint32_t w_id) {
  if (warehouses_ == 1) return w_id;
  const auto o = static_cast<uint32_t>(rng_.uniform(1, warehouses_ - 1));
  return o >= w_id ? o + 1 : o;
}

CustomerChoice InputGenerator::customer() {
  CustomerChoice c;
  c.by_last_name = rng_.uniform(1, 100) <= 60;
  if (c.by_last_name) {
    c.c_last = static_cast<uint32_t>(rng_.nurand(255, 0, 999, c_.c_last));
  } else {
    c.c_id = static_cast<uint32_t>(rng_.nurand(1023, 1, kCustomers, c_.c_id));
  }
  return c;
}

NewOrderInput InputGenerator::new_order(uint32_t w_id) {
  NewOrderInput in;
  in.w_id = w_id;
  in.d_id = static_cast<uint32_t>(rng_.uniform(1, kDistricts));
  in.c_id = static_cast<uint32_t>(rng_.nurand(1023, 1, kCustomers, c_.c_id));
  const auto ol_cnt = static_cast<uint32_t>(rng_.uniform(5, kMaxOrderLines));
  const bool rollback = rng_.uniform(1, 100) == 1;
  for (uint32_t n = 1; n <= ol_cnt; ++n) {
    NewOrderInput::Line l{};
    l.i_id = rollback && n == ol_cnt
                 ? kItems + 1
                 : static_cast<uint32_t>(rng_.nurand(8191, 1, kItems, c_.ol_i_id));
    l.supply_w_id = rng_.uniform(1, 100) > 1 ? w_id : other_warehouse(w_id);
    l.quantity = static_cast<uint32_t>(rng_.uniform(1, 10));
    in.lines.push_back(l);
  }
  return in;
}

PaymentInput InputGenerator::payment(uint32_t w_id) {
  PaymentInput in;
  in.w_id = w_id;
  in.d_id = static_cast<uint32_t>(rng_.uniform(1, kDistricts));
  if (rng_.uniform(1, 100) <= 85) {
    in.c_w_id = w_id;
    in.c_d_id = in.d_id;
  } else {
    in.c_w_id = other_warehouse(w_id);
    in.c_d_id = static_cast<uint32_t>(rng_.uniform(1, kDistricts));
  }
  in.customer = customer();
  in.h_amount = static_cast<int64_t>(rng_.uniform(100, 500000));
  return in;
}

OrderStatusInput InputGenerator::order_status(uint32_t w_id) {
  OrderStatusInput in;
  in.w_id = w_id;
  in.d_id = static_cast<uint32_t>(rng_.uniform(1, kDistricts));
  in.customer = customer();
  return in;
}

DeliveryInput InputGenerator::delivery(uint32_t w_id) {
  DeliveryInput in;
  in.w_id = w_id;
  in.carrier_id = static_cast<uint32_t>(rng_.uniform(1, 10));
  return in;
}

StockLevelInput InputGenerator::stock_level(uint32_t w_id, uint32_t d_id) {
  StockLevelInput in;
  in.w_id = w_id;
  in.d_id = d_id;
  in.threshold = static_cast<int32_t>(rng_.uniform(10, 20));
  return in;
}

// --- execution ----------------------------------------------------------------

Executor::Executor(Database& db, LockTable& locks, unsigned client)
    : db_(db), locks_(locks), client_(client), history_seq_(kRunHistorySeq) {
  // A later run on the same database goes on after this client's last
  // history key (keys are unique: the history index refuses a repeat).
  const auto last = db.index(Table::kHistory).find_last_less_than(key::history(client + 1, 0));
  constexpr uint64_t kSeqMask = (uint64_t{1} << 48) - 1;
  if (last && last->first >> 48 == client && (last->first & kSeqMask) >= kRunHistorySeq) {
    history_seq_ = (last->first & kSeqMask) + 1;
  }
}

std::optional<Value> Executor::lookup(Table t, uint64_t key) {
  ++ops_[static_cast<size_t>(t)].lookups;
  return db_.index(t).lookup(key);
}

namespace {
/// An index's error with the call and table named ("tpcc: insert into
/// order_line: OutOfSpace: ..."); Ok as it is.
Status named(Status s, const char* call, Table t) {
  if (s.ok()) return s;
  return Status(s.code(), std::string("tpcc: ") + call + table_name(t) + ": " + s.ToString());
}
}  // namespace

Status Executor::insert(Table t, uint64_t key, Value v) {
  ++ops_[static_cast<size_t>(t)].inserts;
  return named(db_.index(t).insert(key, v), "insert into ", t);
}

Status Executor::remove(Table t, uint64_t key) {
  ++ops_[static_cast<size_t>(t)].removes;
  return named(db_.index(t).remove(key), "remove from ", t);
}

void Executor::scan(Table t, uint64_t start, uint64_t end, size_t count,
                    std::vector<std::pair<uint64_t, Value>>* out) {
  ++ops_[static_cast<size_t>(t)].scans;
  out->clear();
  db_.index(t).scan(start, count, out);
  while (!out->empty() && out->back().first >= end) out->pop_back();
}

std::optional<std::pair<uint64_t, Value>> Executor::find_last_less_than(Table t, uint64_t key) {
  ++ops_[static_cast<size_t>(t)].find_last_less_than;
  return db_.index(t).find_last_less_than(key);
}

Status Executor::abort(TxOutcome* outcome) {
  locks_.release_all();
  *outcome = TxOutcome::kAborted;
  return Status::Ok();
}

Customer* Executor::find_customer(uint32_t w, uint32_t d, const CustomerChoice& c) {
  if (!c.by_last_name) {
    const std::optional<Value> v = lookup(Table::kCustomer, key::customer(w, d, c.c_id));
    return v ? db_.row<Customer>(*v) : nullptr;
  }
  // Every customer of (w, d) with this C_LAST: about 3 of 3,000; a district
  // has at most 3,000, so one scan of that many always reaches the end.
  const uint64_t lo = key::customer_last(w, d, c.c_last, 0);
  const uint64_t hi = key::customer_last(w, d, c.c_last + 1, 0);
  scan(Table::kCustomerLast, lo, hi, 16, &buf_);
  if (buf_.size() == 16) scan(Table::kCustomerLast, lo, hi, kCustomers, &buf_);
  if (buf_.empty()) return nullptr;
  std::vector<Customer*> found;
  for (const auto& [k, v] : buf_) found.push_back(db_.row<Customer>(v));
  std::sort(found.begin(), found.end(), [](const Customer* a, const Customer* b) {
    const int r = std::strcmp(a->c_first, b->c_first);
    return r != 0 ? r < 0 : a->c_id < b->c_id;
  });
  return found[(found.size() - 1) / 2];  // position ceil(n / 2), from 1
}

Status Executor::new_order(const NewOrderInput& in, NewOrderOutput* out, TxOutcome* outcome) {
  *out = NewOrderOutput{};
  // Phase 1: locks and reads.
  const std::optional<Value> wv = lookup(Table::kWarehouse, key::warehouse(in.w_id));
  const std::optional<Value> dv = lookup(Table::kDistrict, key::district(in.w_id, in.d_id));
  const std::optional<Value> cv =
      lookup(Table::kCustomer, key::customer(in.w_id, in.d_id, in.c_id));
  if (!wv || !dv || !cv) return Status::InvalidArgument("tpcc: new_order: no such w/d/c");
  const Warehouse* w = db_.row<Warehouse>(*wv);
  District* d = db_.row<District>(*dv);
  const Customer* c = db_.row<Customer>(*cv);
  if (!locks_.acquire(Table::kDistrict, key::district(in.w_id, in.d_id), LockMode::kExclusive,
                      kNextOrder)) {
    return abort(outcome);
  }
  const uint32_t o_id = d->d_next_o_id;
  if (!locks_.acquire(Table::kOrder, key::order(in.w_id, in.d_id, o_id), LockMode::kExclusive)) {
    return abort(outcome);
  }
  struct Pending {
    const Item* item;
    Stock* stock;
  };
  std::vector<Pending> pending;
  bool all_local = true;
  for (const NewOrderInput::Line& l : in.lines) {
    const std::optional<Value> iv = lookup(Table::kItem, key::item(l.i_id));
    if (!iv) {
      // Clause 2.4.2.3: an unused item id rolls the whole transaction back.
      locks_.release_all();
      *outcome = TxOutcome::kRolledBack;
      return Status::Ok();
    }
    const std::optional<Value> sv = lookup(Table::kStock, key::stock(l.supply_w_id, l.i_id));
    if (!sv) return Status::InvalidArgument("tpcc: new_order: no stock row");
    if (!locks_.acquire(Table::kStock, key::stock(l.supply_w_id, l.i_id), LockMode::kExclusive)) {
      return abort(outcome);
    }
    pending.push_back({db_.row<Item>(*iv), db_.row<Stock>(*sv)});
    all_local = all_local && l.supply_w_id == in.w_id;
  }
  // Phase 2: writes (no conflict can happen from here on). With rows in PM
  // the undo log first records every range overwritten and every key
  // inserted (rows.h), so a crash anywhere below rolls the order back.
  UndoLog& log = db_.undo_log(client_);
  log.discard();  // what an earlier failed transaction staged
  Value ov = 0;
  Order* o = nullptr;
  if (Status st = db_.new_row(client_, &o, &ov); !st.ok()) return st;
  log.new_row(o, sizeof(Order));
  std::array<Value, kMaxOrderLines> olv{};
  std::array<OrderLine*, kMaxOrderLines> ols{};
  for (size_t n = 0; n < in.lines.size(); ++n) {
    if (Status st = db_.new_row(client_, &ols[n], &olv[n]); !st.ok()) return st;
    log.new_row(ols[n], sizeof(OrderLine));
    log.will_insert(Table::kOrderLine, key::order_line(in.w_id, in.d_id, o_id, n + 1), olv[n]);
  }
  log.snapshot(&d->d_next_o_id, sizeof(d->d_next_o_id));
  for (const Pending& p : pending) {
    // S_QUANTITY, S_ORDER_CNT, S_REMOTE_CNT and S_YTD: bytes [8, 32).
    log.snapshot(&p.stock->s_quantity,
                 offsetof(Stock, s_ytd) + sizeof(uint64_t) - offsetof(Stock, s_quantity));
  }
  log.will_insert(Table::kOrder, key::order(in.w_id, in.d_id, o_id), ov);
  log.will_insert(Table::kOrderCustomer, key::order_customer(in.w_id, in.d_id, in.c_id, o_id), ov);
  log.will_insert(Table::kNewOrder, key::new_order(in.w_id, in.d_id, o_id), 0);
  if (Status st = log.begin(); !st.ok()) return st;
  d->d_next_o_id = o_id + 1;
  o->o_id = o_id;
  o->o_d_id = in.d_id;
  o->o_w_id = in.w_id;
  o->o_c_id = in.c_id;
  o->o_entry_d = in.entry_d;
  o->o_carrier_id = 0;
  o->o_ol_cnt = static_cast<uint32_t>(in.lines.size());
  o->o_all_local = all_local ? 1 : 0;
  int64_t sum = 0;
  for (size_t n = 0; n < in.lines.size(); ++n) {
    const NewOrderInput::Line& l = in.lines[n];
    const Item* item = pending[n].item;
    Stock* s = pending[n].stock;
    const auto q = static_cast<int32_t>(l.quantity);
    s->s_quantity = s->s_quantity >= q + 10 ? s->s_quantity - q : s->s_quantity - q + 91;
    s->s_ytd += l.quantity;
    s->s_order_cnt += 1;
    if (l.supply_w_id != in.w_id) s->s_remote_cnt += 1;
    OrderLine* ol = ols[n];
    ol->ol_o_id = o_id;
    ol->ol_d_id = in.d_id;
    ol->ol_w_id = in.w_id;
    ol->ol_number = static_cast<uint32_t>(n + 1);
    ol->ol_i_id = l.i_id;
    ol->ol_supply_w_id = l.supply_w_id;
    ol->ol_delivery_d = 0;
    ol->ol_quantity = l.quantity;
    ol->ol_amount = static_cast<int64_t>(l.quantity) * item->i_price;
    std::memcpy(ol->ol_dist_info, s->s_dist[in.d_id - 1], sizeof(ol->ol_dist_info));
    sum += ol->ol_amount;
    out->lines.push_back(
        {s->s_quantity, contains_original(item->i_data) && contains_original(s->s_data) ? 'B' : 'G',
         item->i_price, ol->ol_amount});
    if (Status st =
            insert(Table::kOrderLine, key::order_line(in.w_id, in.d_id, o_id, n + 1), olv[n]);
        !st.ok()) {
      return st;
    }
  }
  // Readers find an order through order / order_customer / new_order, so its
  // order-lines go in first (they hold the order's lock regardless).
  if (Status st = insert(Table::kOrder, key::order(in.w_id, in.d_id, o_id), ov); !st.ok()) {
    return st;
  }
  if (Status st =
          insert(Table::kOrderCustomer, key::order_customer(in.w_id, in.d_id, in.c_id, o_id), ov);
      !st.ok()) {
    return st;
  }
  if (Status st = insert(Table::kNewOrder, key::new_order(in.w_id, in.d_id, o_id), 0); !st.ok()) {
    return st;
  }
  log.commit();
  // total = sum * (1 - discount) * (1 + w_tax + d_tax), rates in 1/10000;
  // rounded to the nearest cent.
  const i128 num = static_cast<i128>(sum) * (10000 - c->c_discount) * (10000 + w->w_tax + d->d_tax);
  out->total_cents = static_cast<int64_t>((num + 50000000) / 100000000);
  out->o_id = o_id;
  locks_.release_all();
  *outcome = TxOutcome::kCommitted;
  return Status::Ok();
}

Status Executor::payment(const PaymentInput& in, PaymentOutput* out, TxOutcome* outcome) {
  *out = PaymentOutput{};
  const std::optional<Value> wv = lookup(Table::kWarehouse, key::warehouse(in.w_id));
  const std::optional<Value> dv = lookup(Table::kDistrict, key::district(in.w_id, in.d_id));
  if (!wv || !dv) return Status::InvalidArgument("tpcc: payment: no such w/d");
  Warehouse* w = db_.row<Warehouse>(*wv);
  District* d = db_.row<District>(*dv);
  Customer* c = find_customer(in.c_w_id, in.c_d_id, in.customer);
  if (c == nullptr) return Status::InvalidArgument("tpcc: payment: no such customer");
  if (!locks_.acquire(Table::kWarehouse, key::warehouse(in.w_id), LockMode::kExclusive, kYtd) ||
      !locks_.acquire(Table::kDistrict, key::district(in.w_id, in.d_id), LockMode::kExclusive,
                      kYtd) ||
      !locks_.acquire(Table::kCustomer, key::customer(in.c_w_id, in.c_d_id, c->c_id),
                      LockMode::kExclusive)) {
    return abort(outcome);
  }
  // Writes, after the undo log has their old values (rows in PM; rows.h).
  UndoLog& log = db_.undo_log(client_);
  log.discard();  // what an earlier failed transaction staged
  Value hv = 0;
  History* h = nullptr;
  if (Status st = db_.new_row(client_, &h, &hv); !st.ok()) return st;
  const uint64_t h_key = key::history(client_, history_seq_++);
  const bool bad_credit = std::strcmp(c->c_credit, "BC") == 0;
  log.new_row(h, sizeof(History));
  log.snapshot(&w->w_ytd, sizeof(w->w_ytd));
  log.snapshot(&d->d_ytd, sizeof(d->d_ytd));
  // C_BALANCE, C_YTD_PAYMENT, C_PAYMENT_CNT and C_DELIVERY_CNT: bytes [24, 48).
  log.snapshot(&c->c_balance, offsetof(Customer, c_delivery_cnt) + sizeof(uint32_t) -
                                  offsetof(Customer, c_balance));
  if (bad_credit) log.snapshot(c->c_data, sizeof(c->c_data));
  log.will_insert(Table::kHistory, h_key, hv);
  if (Status st = log.begin(); !st.ok()) return st;
  w->w_ytd += in.h_amount;
  d->d_ytd += in.h_amount;
  c->c_balance -= in.h_amount;
  c->c_ytd_payment += in.h_amount;
  c->c_payment_cnt += 1;
  if (bad_credit) {
    // Clause 2.5.2.2: the history values go in at the left of C_DATA, which
    // keeps its first 500 characters.
    char head[96];
    const int n =
        std::snprintf(head, sizeof(head), "%u %u %u %u %u %lld.%02lld|", c->c_id, in.c_d_id,
                      in.c_w_id, in.d_id, in.w_id, static_cast<long long>(in.h_amount / 100),
                      static_cast<long long>(in.h_amount % 100));
    std::string data = std::string(head, static_cast<size_t>(n)) + c->c_data;
    data.resize(std::min<size_t>(data.size(), sizeof(c->c_data) - 1));
    std::memset(c->c_data, 0, sizeof(c->c_data));
    std::memcpy(c->c_data, data.data(), data.size());
    out->c_data = data.substr(0, 200);
  }
  h->h_c_id = c->c_id;
  h->h_c_d_id = in.c_d_id;
  h->h_c_w_id = in.c_w_id;
  h->h_d_id = in.d_id;
  h->h_w_id = in.w_id;
  h->h_amount = in.h_amount;
  h->h_date = in.h_date;
  std::snprintf(h->h_data, sizeof(h->h_data), "%.10s    %.10s", w->w_name, d->d_name);
  if (Status st = insert(Table::kHistory, h_key, hv); !st.ok()) return st;
  log.commit();
  out->c_id = c->c_id;
  out->c_balance = c->c_balance;
  locks_.release_all();
  *outcome = TxOutcome::kCommitted;
  return Status::Ok();
}

Status Executor::order_status(const OrderStatusInput& in, OrderStatusOutput* out,
                              TxOutcome* outcome) {
  *out = OrderStatusOutput{};
  Customer* c = find_customer(in.w_id, in.d_id, in.customer);
  if (c == nullptr) return Status::InvalidArgument("tpcc: order_status: no such customer");
  if (!locks_.acquire(Table::kCustomer, key::customer(in.w_id, in.d_id, c->c_id),
                      LockMode::kShared)) {
    return abort(outcome);
  }
  out->c_id = c->c_id;
  out->c_balance = c->c_balance;
  // The newest order: the largest order_customer key of this customer.
  const auto last = find_last_less_than(Table::kOrderCustomer,
                                        key::order_customer(in.w_id, in.d_id, c->c_id + 1, 0));
  if (last && last->first >= key::order_customer(in.w_id, in.d_id, c->c_id, 0)) {
    const uint32_t o_id = key::order_id_of(last->first);
    if (!locks_.acquire(Table::kOrder, key::order(in.w_id, in.d_id, o_id), LockMode::kShared)) {
      return abort(outcome);
    }
    const Order* o = db_.row<Order>(last->second);
    out->o_id = o_id;
    out->o_carrier_id = o->o_carrier_id;
    scan(Table::kOrderLine, key::order_line(in.w_id, in.d_id, o_id, 0),
         key::order_line(in.w_id, in.d_id, o_id + 1, 0), kMaxOrderLines, &buf_);
    for (const auto& [k, v] : buf_) {
      const OrderLine* ol = db_.row<OrderLine>(v);
      out->lines.push_back(
          {ol->ol_i_id, ol->ol_supply_w_id, ol->ol_quantity, ol->ol_amount, ol->ol_delivery_d});
    }
  }
  locks_.release_all();
  *outcome = TxOutcome::kCommitted;
  return Status::Ok();
}

Status Executor::delivery(const DeliveryInput& in, DeliveryOutput* out, TxOutcome* outcome) {
  *out = DeliveryOutput{};
  struct Pending {
    uint32_t d_id, o_id;
    Order* order;
    Customer* customer;
    std::vector<OrderLine*> lines;
  };
  std::vector<Pending> pending;
  // Phase 1: per district, the oldest new order, locked and checked.
  for (uint32_t d_id = 1; d_id <= kDistricts; ++d_id) {
    scan(Table::kNewOrder, key::new_order(in.w_id, d_id, 0), key::new_order(in.w_id, d_id + 1, 0),
         1, &buf_);
    if (buf_.empty()) continue;  // no new order: the district is skipped
    const uint32_t o_id = key::order_id_of(buf_.front().first);
    if (!locks_.acquire(Table::kOrder, key::order(in.w_id, d_id, o_id), LockMode::kExclusive)) {
      return abort(outcome);
    }
    // Another Delivery may have taken it between the scan and the lock.
    if (!lookup(Table::kNewOrder, key::new_order(in.w_id, d_id, o_id))) return abort(outcome);
    const std::optional<Value> ov = lookup(Table::kOrder, key::order(in.w_id, d_id, o_id));
    if (!ov) return Status::Corruption("tpcc: delivery: a new order without its order");
    Order* o = db_.row<Order>(*ov);
    const std::optional<Value> cv =
        lookup(Table::kCustomer, key::customer(in.w_id, d_id, o->o_c_id));
    if (!cv) return Status::Corruption("tpcc: delivery: an order without its customer");
    if (!locks_.acquire(Table::kCustomer, key::customer(in.w_id, d_id, o->o_c_id),
                        LockMode::kExclusive)) {
      return abort(outcome);
    }
    Pending p{d_id, o_id, o, db_.row<Customer>(*cv), {}};
    scan(Table::kOrderLine, key::order_line(in.w_id, d_id, o_id, 0),
         key::order_line(in.w_id, d_id, o_id + 1, 0), kMaxOrderLines, &buf_);
    for (const auto& [k, v] : buf_) p.lines.push_back(db_.row<OrderLine>(v));
    pending.push_back(std::move(p));
  }
  // Phase 2: writes, after the undo log has their old values (rows in PM;
  // rows.h). A Delivery that found no new order writes nothing.
  UndoLog& log = db_.undo_log(client_);
  log.discard();  // what an earlier failed transaction staged
  for (const Pending& p : pending) {
    log.will_remove(Table::kNewOrder, key::new_order(in.w_id, p.d_id, p.o_id), 0);
    log.snapshot(&p.order->o_carrier_id, sizeof(p.order->o_carrier_id));
    for (const OrderLine* ol : p.lines) log.snapshot(&ol->ol_delivery_d, sizeof(ol->ol_delivery_d));
    // C_BALANCE .. C_DELIVERY_CNT: bytes [24, 48).
    log.snapshot(&p.customer->c_balance, offsetof(Customer, c_delivery_cnt) + sizeof(uint32_t) -
                                             offsetof(Customer, c_balance));
  }
  if (Status st = log.begin(); !st.ok()) return st;
  for (Pending& p : pending) {
    if (Status st = remove(Table::kNewOrder, key::new_order(in.w_id, p.d_id, p.o_id)); !st.ok()) {
      return st;
    }
    p.order->o_carrier_id = in.carrier_id;
    int64_t sum = 0;
    for (OrderLine* ol : p.lines) {
      ol->ol_delivery_d = in.delivery_d;
      sum += ol->ol_amount;
    }
    p.customer->c_balance += sum;
    p.customer->c_delivery_cnt += 1;
    out->o_id[p.d_id - 1] = p.o_id;
  }
  log.commit();
  locks_.release_all();
  *outcome = TxOutcome::kCommitted;
  return Status::Ok();
}

Status Executor::stock_level(const StockLevelInput& in, StockLevelOutput* out, TxOutcome* outcome) {
  *out = StockLevelOutput{};
  const std::optional<Value> dv = lookup(Table::kDistrict, key::district(in.w_id, in.d_id));
  if (!dv) return Status::InvalidArgument("tpcc: stock_level: no such w/d");
  if (!locks_.acquire(Table::kDistrict, key::district(in.w_id, in.d_id), LockMode::kShared,
                      kNextOrder)) {
    return abort(outcome);
  }
  const uint32_t next = db_.row<District>(*dv)->d_next_o_id;
  const uint32_t first = next > 20 ? next - 20 : 1;
  scan(Table::kOrderLine, key::order_line(in.w_id, in.d_id, first, 0),
       key::order_line(in.w_id, in.d_id, next, 0), size_t{20} * kMaxOrderLines, &buf_);
  std::vector<uint32_t> items;
  for (const auto& [k, v] : buf_) items.push_back(db_.row<OrderLine>(v)->ol_i_id);
  std::sort(items.begin(), items.end());
  items.erase(std::unique(items.begin(), items.end()), items.end());
  uint32_t low = 0;
  for (uint32_t i : items) {
    const std::optional<Value> sv = lookup(Table::kStock, key::stock(in.w_id, i));
    if (!sv) continue;  // an unused item id never reaches an order-line
    if (!locks_.acquire(Table::kStock, key::stock(in.w_id, i), LockMode::kShared)) {
      return abort(outcome);
    }
    if (db_.row<Stock>(*sv)->s_quantity < in.threshold) ++low;
  }
  out->low_stock = low;
  locks_.release_all();
  *outcome = TxOutcome::kCommitted;
  return Status::Ok();
}

}  // namespace nvindex::tpcc
