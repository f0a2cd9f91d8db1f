// Population of a TPC-C database (TPC-C 5.11 clause 4.3.3.1) and the random
// functions of clause 2.1.6 and 4.3.2 it and the transactions share.
#pragma once

#include <cstdint>
#include <random>
#include <string>

#include "nvindex/status.h"
#include "tpcc/db.h"

namespace nvindex::tpcc {

/// The run-time constants C of NURand (clause 2.1.6): one set for the load,
/// one for the run. For C_LAST the run's constant differs from the load's
/// by a delta in [65..119], neither 96 nor 112 (clause 2.1.6.1).
struct NurandConstants {
  uint32_t c_last = 0;   ///< A = 255: 0..255
  uint32_t c_id = 0;     ///< A = 1023: 0..1023
  uint32_t ol_i_id = 0;  ///< A = 8191: 0..8191
};

/// A source of the random values of clause 2.1.6 and 4.3.2 (a
/// std::mt19937_64; one per thread).
class Random {
 public:
  explicit Random(uint64_t seed) : rng_(seed) {}
  /// Uniform in [lo, hi] (lo <= hi).
  uint64_t uniform(uint64_t lo, uint64_t hi);
  /// NURand(A, x, y) = (((random(0, A) | random(x, y)) + C) % (y - x + 1)) + x
  /// (clause 2.1.6), with `c` the constant C for this A.
  uint64_t nurand(uint64_t a, uint64_t x, uint64_t y, uint64_t c);
  /// A random a-string (clause 4.3.2.2) of length in [lo, hi] into `out`
  /// (lo <= hi <= capacity - 1; NUL-terminated): letters and digits.
  void astring(char* out, uint32_t lo, uint32_t hi);
  /// A random n-string (digits) of length in [lo, hi], NUL-terminated.
  void nstring(char* out, uint32_t lo, uint32_t hi);
  std::mt19937_64& engine() { return rng_; }

 private:
  std::mt19937_64 rng_;
};

/// C_LAST of the number n in 0..999 (clause 4.3.2.3): the syllables of its
/// three decimal digits, e.g. 371 -> "PRICALLYOUGHT". `out` holds 17 bytes.
void last_name(uint32_t n, char* out);

/// Draws the load's and the run's NURand constants from `seed`, the run's
/// C_LAST constant obeying clause 2.1.6.1.
void draw_constants(uint64_t seed, NurandConstants* load, NurandConstants* run);

/// What the load did.
struct LoadStats {
  uint64_t rows[kTables] = {};  ///< keys inserted per Table
  double seconds = 0;           ///< wall time
};

/// Populates an empty database per clause 4.3.3.1 for db.warehouses()
/// warehouses: ITEM once, then per warehouse its WAREHOUSE, STOCK, DISTRICT,
/// CUSTOMER (and customer_last), HISTORY, ORDER (and order_customer),
/// ORDER-LINE and NEW-ORDER rows, inserted through the indexes. With
/// `threads` > 1 the warehouses are shared out over that many threads
/// (threads <= db.options().clients, each using its own row arena),
/// warehouse w to thread (w - 1) % threads.
///
/// Values: every key's value is its row's handle (customer_last's the
/// CUSTOMER row, order_customer's the ORDER row) except new_order's, which
/// is 0 (no row). Text columns per clause 4.3.2 (a-strings of letters and
/// digits; zip = 4 random digits + "11111"; "ORIGINAL" in 10% of I_DATA and
/// S_DATA); C_LAST of C_ID 1..1000 from the number C_ID - 1, of the others
/// from NURand(255, 0, 999) with load_constants.c_last, the number kept in
/// c_last_number; dates one clock read per warehouse.
/// HISTORY keys are key::history(t, seq) with seq = 0, 1, ... for loading
/// thread t: fewer than 30,000 * W per thread, far below the sequence
/// numbers the run's clients start at (txn.cc: 2^40).
///
/// Row content depends only on the seed and the warehouse (each warehouse
/// draws from its own stream; ITEM from another), not on `threads`; HISTORY
/// keys and which arena holds a row do. Errors: InvalidArgument (threads
/// not in 1..clients); those of the indexes' insert (OutOfSpace: a pool too
/// small), with the table and key named.
Status load(Database& db, uint64_t seed, const NurandConstants& load_constants, unsigned threads,
            LoadStats* stats);

}  // namespace nvindex::tpcc
