// Population of a TPC-C database (TPC-C 5.11 clause 4.3.3.1) and the random
// functions of clauses 2.1.6 and 4.3.2 (load.h).
#include "tpcc/load.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

namespace nvindex::tpcc {

namespace {

/// 128-bit products for multiply-shift (a GCC/Clang extension).
__extension__ using u128 = unsigned __int128;

/// SplitMix64's finalizer (Steele, Lea, Flood, OOPSLA'14): a bijective mix
/// of 64 bits, for deriving independent stream seeds from one seed.
uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// The seed of random stream `stream` of a load seeded with `seed`: stream
/// 0 is ITEM, stream w (1..65535) is warehouse w, kConstantsStream the NURand
/// constants. Each warehouse's content therefore depends on the seed and
/// its number only, not on which thread loads it.
uint64_t stream_seed(uint64_t seed, uint64_t stream) {
  return splitmix64(seed ^ splitmix64(stream));
}
constexpr uint64_t kItemStream = 0;
constexpr uint64_t kConstantsStream = uint64_t{1} << 32;

/// The syllables of C_LAST (clause 4.3.2.3), by digit.
constexpr const char* kSyllables[10] = {"BAR", "OUGHT", "ABLE",  "PRI",   "PRES",
                                        "ESE", "ANTI",  "CALLY", "ATION", "EING"};

/// The a-string alphabet (clause 4.3.2.2): digits and letters, 62 symbols.
constexpr char kAlnum[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
constexpr uint64_t kAlnumSize = sizeof(kAlnum) - 1;

/// Microseconds since the Unix epoch (the schema's date and time).
uint64_t now_micros() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

/// `n` random characters of `alphabet` (of `size` symbols) into out (no
/// NUL): eight per 64-bit draw, each the integer part of the running
/// fraction times `size` (Lemire's multiply-shift, repeated).
void fill_chars(std::mt19937_64& rng, char* out, uint32_t n, const char* alphabet, uint64_t size) {
  uint32_t i = 0;
  while (i < n) {
    uint64_t r = rng();
    for (int k = 0; k < 8 && i < n; ++k, ++i) {
      const u128 m = static_cast<u128>(r) * size;
      out[i] = alphabet[static_cast<uint64_t>(m >> 64)];
      r = static_cast<uint64_t>(m);
    }
  }
}

/// `n` random upper-case letters, NUL-terminated (W_STATE, D_STATE,
/// C_STATE: "a-string of 2 letters").
void letters(Random& rng, char* out, uint32_t n) {
  fill_chars(rng.engine(), out, n, kAlnum + 10, 26);
  out[n] = '\0';
}

/// A zip code (clause 4.3.2.7): a random n-string of 4 digits followed by
/// "11111"; `out` holds 10 bytes.
void zip(Random& rng, char* out) {
  rng.nstring(out, 4, 4);
  std::memcpy(out + 4, "11111", 6);
}

/// I_DATA, S_DATA (clause 4.3.3.1): a random a-string of [26 .. 50]; for
/// 10% of rows, chosen at random, "ORIGINAL" overwrites 8 consecutive
/// characters at a random position.
void data_with_original(Random& rng, char* out) {
  rng.astring(out, 26, 50);
  if (rng.uniform(1, 10) == 1) {
    const size_t len = std::strlen(out);
    const size_t pos = rng.uniform(0, len - 8);
    std::memcpy(out + pos, "ORIGINAL", 8);
  }
}

/// Street 1, street 2, city (a-strings of [10 .. 20]), state and zip of a
/// WAREHOUSE, DISTRICT or CUSTOMER row.
void address(Random& rng, char* street_1, char* street_2, char* city, char* state, char* zip_out) {
  rng.astring(street_1, 10, 20);
  rng.astring(street_2, 10, 20);
  rng.astring(city, 10, 20);
  letters(rng, state, 2);
  zip(rng, zip_out);
}

/// Loads rows for one loading thread (`client`: its row arena and the
/// client field of its HISTORY keys), counting the keys it inserts.
class Loader {
 public:
  Loader(Database& db, unsigned client, const NurandConstants& constants, uint64_t* rows)
      : db_(db), client_(client), constants_(constants), rows_(rows) {}

  /// ITEM: 100,000 rows, I_ID 1..100000.
  Status items(Random& rng) {
    for (uint32_t i = 1; i <= kItems; ++i) {
      Value h;
      Item* r = nullptr;
      if (Status st = db_.new_row(client_, &r, &h); !st.ok()) return st;
      r->i_id = i;
      r->i_im_id = static_cast<uint32_t>(rng.uniform(1, 10000));
      rng.astring(r->i_name, 14, 24);
      r->i_price = static_cast<int64_t>(rng.uniform(100, 10000));
      data_with_original(rng, r->i_data);
      if (Status st = put(Table::kItem, key::item(i), h); !st.ok()) return st;
    }
    return Status::Ok();
  }

  /// Warehouse w's rows, each table in key order: WAREHOUSE, STOCK, then per
  /// district its DISTRICT, CUSTOMER (+ customer_last) and HISTORY rows, its
  /// ORDER (+ order_customer) rows each followed by its ORDER-LINEs, and its
  /// NEW-ORDER keys.
  Status warehouse(uint32_t w, Random& rng) {
    const uint64_t now = now_micros();
    {
      Value h;
      Warehouse* r = nullptr;
      if (Status st = db_.new_row(client_, &r, &h); !st.ok()) return st;
      r->w_id = w;
      rng.astring(r->w_name, 6, 10);
      address(rng, r->w_street_1, r->w_street_2, r->w_city, r->w_state, r->w_zip);
      r->w_tax = static_cast<int32_t>(rng.uniform(0, 2000));
      r->w_ytd = 30'000'000;  // 300,000.00
      if (Status st = put(Table::kWarehouse, key::warehouse(w), h); !st.ok()) return st;
    }
    for (uint32_t i = 1; i <= kItems; ++i) {
      Value h;
      Stock* r = nullptr;
      if (Status st = db_.new_row(client_, &r, &h); !st.ok()) return st;
      r->s_i_id = i;
      r->s_w_id = w;
      r->s_quantity = static_cast<int32_t>(rng.uniform(10, 100));
      for (auto& dist : r->s_dist) rng.astring(dist, 24, 24);
      data_with_original(rng, r->s_data);  // S_YTD, S_ORDER_CNT, S_REMOTE_CNT stay 0
      if (Status st = put(Table::kStock, key::stock(w, i), h); !st.ok()) return st;
    }
    for (uint32_t d = 1; d <= kDistricts; ++d) {
      if (Status st = district(w, d, now, rng); !st.ok()) return st;
    }
    return Status::Ok();
  }

 private:
  Status district(uint32_t w, uint32_t d, uint64_t now, Random& rng) {
    {
      Value h;
      District* r = nullptr;
      if (Status st = db_.new_row(client_, &r, &h); !st.ok()) return st;
      r->d_id = d;
      r->d_w_id = w;
      rng.astring(r->d_name, 6, 10);
      address(rng, r->d_street_1, r->d_street_2, r->d_city, r->d_state, r->d_zip);
      r->d_tax = static_cast<int32_t>(rng.uniform(0, 2000));
      r->d_ytd = 3'000'000;  // 30,000.00
      r->d_next_o_id = kInitialOrders + 1;
      if (Status st = put(Table::kDistrict, key::district(w, d), h); !st.ok()) return st;
    }
    for (uint32_t c = 1; c <= kCustomers; ++c) {
      if (Status st = customer(w, d, c, now, rng); !st.ok()) return st;
    }
    // O_C_ID: a random permutation of [1 .. 3,000] (Fisher-Yates).
    std::array<uint32_t, kInitialOrders> perm;
    std::iota(perm.begin(), perm.end(), 1u);
    for (uint32_t i = kInitialOrders - 1; i > 0; --i) {
      std::swap(perm[i], perm[rng.uniform(0, i)]);
    }
    for (uint32_t o = 1; o <= kInitialOrders; ++o) {
      if (Status st = order(w, d, o, perm[o - 1], now, rng); !st.ok()) return st;
    }
    for (uint32_t o = kFirstNewOrder; o <= kInitialOrders; ++o) {
      // The new_order index holds keys only (db.h): value 0.
      if (Status st = put(Table::kNewOrder, key::new_order(w, d, o), 0); !st.ok()) return st;
    }
    return Status::Ok();
  }

  /// CUSTOMER (w, d, c) with its customer_last key and its HISTORY row.
  Status customer(uint32_t w, uint32_t d, uint32_t c, uint64_t now, Random& rng) {
    Value h;
    Customer* r = nullptr;
    if (Status st = db_.new_row(client_, &r, &h); !st.ok()) return st;
    r->c_id = c;
    r->c_d_id = d;
    r->c_w_id = w;
    const uint32_t number =
        c <= 1000 ? c - 1 : static_cast<uint32_t>(rng.nurand(255, 0, 999, constants_.c_last));
    r->c_last_number = static_cast<uint16_t>(number);
    last_name(number, r->c_last);
    std::memcpy(r->c_middle, "OE", 3);
    rng.astring(r->c_first, 8, 16);
    address(rng, r->c_street_1, r->c_street_2, r->c_city, r->c_state, r->c_zip);
    rng.nstring(r->c_phone, 16, 16);
    r->c_since = now;
    std::memcpy(r->c_credit, rng.uniform(1, 10) == 1 ? "BC" : "GC", 3);
    r->c_credit_lim = 5'000'000;  // 50,000.00
    r->c_discount = static_cast<int32_t>(rng.uniform(0, 5000));
    r->c_balance = -1000;     // -10.00
    r->c_ytd_payment = 1000;  // 10.00
    r->c_payment_cnt = 1;
    r->c_delivery_cnt = 0;
    rng.astring(r->c_data, 300, 500);
    if (Status st = put(Table::kCustomer, key::customer(w, d, c), h); !st.ok()) return st;
    if (Status st = put(Table::kCustomerLast, key::customer_last(w, d, number, c), h); !st.ok()) {
      return st;
    }

    Value hh;
    History* hr = nullptr;
    if (Status st = db_.new_row(client_, &hr, &hh); !st.ok()) return st;
    hr->h_c_id = c;
    hr->h_c_d_id = d;
    hr->h_c_w_id = w;
    hr->h_d_id = d;
    hr->h_w_id = w;
    hr->h_date = now;
    hr->h_amount = 1000;  // 10.00
    rng.astring(hr->h_data, 12, 24);
    return put(Table::kHistory, key::history(client_, history_seq_++), hh);
  }

  /// ORDER (w, d, o) of customer c, its order_customer key and its
  /// O_OL_CNT ORDER-LINE rows.
  Status order(uint32_t w, uint32_t d, uint32_t o, uint32_t c, uint64_t now, Random& rng) {
    const bool delivered = o < kFirstNewOrder;
    Value h;
    Order* r = nullptr;
    if (Status st = db_.new_row(client_, &r, &h); !st.ok()) return st;
    r->o_id = o;
    r->o_d_id = d;
    r->o_w_id = w;
    r->o_c_id = c;
    r->o_entry_d = now;
    r->o_carrier_id = delivered ? static_cast<uint32_t>(rng.uniform(1, 10)) : 0;
    r->o_ol_cnt = static_cast<uint32_t>(rng.uniform(5, 15));
    r->o_all_local = 1;
    if (Status st = put(Table::kOrder, key::order(w, d, o), h); !st.ok()) return st;
    if (Status st = put(Table::kOrderCustomer, key::order_customer(w, d, c, o), h); !st.ok()) {
      return st;
    }
    for (uint32_t ol = 1; ol <= r->o_ol_cnt; ++ol) {
      Value lh;
      OrderLine* l = nullptr;
      if (Status st = db_.new_row(client_, &l, &lh); !st.ok()) return st;
      l->ol_o_id = o;
      l->ol_d_id = d;
      l->ol_w_id = w;
      l->ol_number = ol;
      l->ol_i_id = static_cast<uint32_t>(rng.uniform(1, kItems));
      l->ol_supply_w_id = w;
      l->ol_delivery_d = delivered ? now : 0;
      l->ol_quantity = 5;
      l->ol_amount = delivered ? 0 : static_cast<int64_t>(rng.uniform(1, 999'999));
      rng.astring(l->ol_dist_info, 24, 24);
      if (Status st = put(Table::kOrderLine, key::order_line(w, d, o, ol), lh); !st.ok()) {
        return st;
      }
    }
    return Status::Ok();
  }

  /// Inserts key -> v into table t; an error names the table.
  /// Inserts (k, v) into table t's index; with rows in PM it flushes the
  /// row first (the insert's own fence, or finish_load's, orders the flush
  /// before the key is durable).
  Status put(Table t, uint64_t k, Value v) {
    db_.flush_row(t, v);
    Status st = db_.index(t).insert(k, v);
    if (!st.ok()) {
      return Status(st.code(), std::string("load: ") + table_name(t) + " key " + std::to_string(k) +
                                   ": " + st.message());
    }
    ++rows_[static_cast<size_t>(t)];
    return Status::Ok();
  }

  Database& db_;
  const unsigned client_;
  const NurandConstants constants_;
  uint64_t* rows_;
  uint64_t history_seq_ = 0;
};

}  // namespace

uint64_t Random::uniform(uint64_t lo, uint64_t hi) {
  const uint64_t range = hi - lo + 1;
  if (range == 0) return rng_();  // the whole 64-bit range
  // Lemire's multiply-shift (bias below range / 2^64, negligible here).
  return lo + static_cast<uint64_t>((static_cast<u128>(rng_()) * range) >> 64);
}

uint64_t Random::nurand(uint64_t a, uint64_t x, uint64_t y, uint64_t c) {
  return (((uniform(0, a) | uniform(x, y)) + c) % (y - x + 1)) + x;
}

void Random::astring(char* out, uint32_t lo, uint32_t hi) {
  const auto len = static_cast<uint32_t>(uniform(lo, hi));
  fill_chars(rng_, out, len, kAlnum, kAlnumSize);
  out[len] = '\0';
}

void Random::nstring(char* out, uint32_t lo, uint32_t hi) {
  const auto len = static_cast<uint32_t>(uniform(lo, hi));
  fill_chars(rng_, out, len, kAlnum, 10);
  out[len] = '\0';
}

void last_name(uint32_t n, char* out) {
  out[0] = '\0';
  std::strcat(out, kSyllables[n / 100 % 10]);
  std::strcat(out, kSyllables[n / 10 % 10]);
  std::strcat(out, kSyllables[n % 10]);
}

void draw_constants(uint64_t seed, NurandConstants* load, NurandConstants* run) {
  Random rng(stream_seed(seed, kConstantsStream));
  load->c_last = static_cast<uint32_t>(rng.uniform(0, 255));
  load->c_id = static_cast<uint32_t>(rng.uniform(0, 1023));
  load->ol_i_id = static_cast<uint32_t>(rng.uniform(0, 8191));
  // Clause 2.1.6.1: |C_run - C_load| in [65 .. 119], not 96 nor 112. Some
  // value in 0..255 always qualifies (load + 65 <= 255 or load - 65 >= 0).
  for (;;) {
    const auto c = static_cast<uint32_t>(rng.uniform(0, 255));
    const uint32_t delta = c > load->c_last ? c - load->c_last : load->c_last - c;
    if (delta >= 65 && delta <= 119 && delta != 96 && delta != 112) {
      run->c_last = c;
      break;
    }
  }
  run->c_id = static_cast<uint32_t>(rng.uniform(0, 1023));
  run->ol_i_id = static_cast<uint32_t>(rng.uniform(0, 8191));
}

Status load(Database& db, uint64_t seed, const NurandConstants& load_constants, unsigned threads,
            LoadStats* stats) {
  if (threads < 1 || threads > db.options().clients) {
    return Status::InvalidArgument("load threads must be in 1.." +
                                   std::to_string(db.options().clients) + " (the clients), got " +
                                   std::to_string(threads));
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::array<uint64_t, kTables>> rows(threads, std::array<uint64_t, kTables>{});
  {
    Loader items(db, 0, load_constants, rows[0].data());
    Random rng(stream_seed(seed, kItemStream));
    if (Status st = items.items(rng); !st.ok()) return st;
  }
  std::vector<Status> status(threads);
  std::atomic<bool> failed{false};
  const uint32_t warehouses = db.warehouses();
  auto work = [&](unsigned t) {
    Loader loader(db, t, load_constants, rows[t].data());
    for (uint32_t w = t + 1; w <= warehouses && !failed.load(std::memory_order_relaxed);
         w += threads) {
      Random rng(stream_seed(seed, w));
      if (Status st = loader.warehouse(w, rng); !st.ok()) {
        status[t] = st;
        failed.store(true, std::memory_order_relaxed);
        return;
      }
    }
  };
  if (threads == 1) {
    work(0);
  } else {
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < threads; ++t) pool.emplace_back(work, t);
    for (std::thread& th : pool) th.join();
  }
  for (const Status& st : status) {
    if (!st.ok()) return st;
  }
  db.finish_load();
  if (stats != nullptr) {
    *stats = LoadStats{};
    for (const auto& r : rows) {
      for (int i = 0; i < kTables; ++i) stats->rows[i] += r[i];
    }
    stats->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  return Status::Ok();
}

}  // namespace nvindex::tpcc
