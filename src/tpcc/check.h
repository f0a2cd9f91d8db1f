// TPC-C's consistency conditions (TPC-C 5.11 clause 3.3.2.1 .. 3.3.2.12),
// checked over a whole database after a load or a run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nvindex/status.h"
#include "tpcc/db.h"

namespace nvindex::tpcc {

/// One violated condition.
struct Violation {
  int condition = 0;  ///< 1..12 (clause 3.3.2.N)
  uint32_t w = 0;     ///< warehouse, 0 when not per warehouse
  uint32_t d = 0;     ///< district, 0 when not per district
  uint32_t id = 0;    ///< customer or order id, 0 when not per row
  std::string what;   ///< the equation and both sides' values
};

/// A violation as one line: "condition N (clause 3.3.2.N) w=W d=D c=C: what"
/// (d, and c or o, only when set; c for conditions 10 and 12, o for the
/// per-order ones).
std::string describe(const Violation& v);

/// The outcome of a check.
struct CheckReport {
  std::vector<Violation> violations;  ///< at most 100 kept
  uint64_t total_violations = 0;      ///< all found
  uint64_t rows_read = 0;             ///< rows visited by the scans
  double seconds = 0;                 ///< wall time
};

/// Checks conditions 1..12 of clause 3.3.2 over every warehouse and
/// district. Condition 11 (the spec's count(ORDER) - count(NEW-ORDER) =
/// 2100 per district, true as loaded) is checked in the form that holds
/// after Delivery too: count(ORDER) - count(NEW-ORDER) = 2100 + the
/// district's sum of C_DELIVERY_CNT. Must not run concurrently with
/// transactions. Ok when the database is consistent; Corruption naming the
/// first violation (condition, warehouse, district, values) otherwise, with
/// every violation (up to 100) in *report.
Status check_consistency(Database& db, CheckReport* report);

}  // namespace nvindex::tpcc
