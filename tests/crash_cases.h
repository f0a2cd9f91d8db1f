// The configurations the crash-lab suites (crash_lab_test, crash_ablation_test,
// crash_torture_test) run: every registered persistent index that is not a
// test double, with integer keys, and again with string keys when it has
// them (caps.string_keys; the crash lab's string keys are crash/string_keys.h).
#pragma once

#include <algorithm>
#include <ostream>
#include <string>
#include <vector>

#include "nvindex/index.h"

namespace nvindex::crash {

/// One index and key type the crash-lab suites run.
struct CrashCase {
  std::string index;
  KeyType key_type = KeyType::kInteger;

  /// A GoogleTest parameter name: the index name with '-' as '_', plus
  /// "_string" for string keys ("p_masstree_string").
  std::string label() const {
    std::string n = index;
    std::replace(n.begin(), n.end(), '-', '_');
    return key_type == KeyType::kString ? n + "_string" : n;
  }
};

/// Prints a case by its label (test parameter values in failure messages).
inline void PrintTo(const CrashCase& c, std::ostream* os) { *os << c.label(); }

/// Every persistent non-test index with integer keys, then those with
/// string keys again with string keys, in registration order.
inline std::vector<CrashCase> persistent_crash_cases() {
  std::vector<CrashCase> cases;
  for (KeyType t : {KeyType::kInteger, KeyType::kString}) {
    for (const IndexEntry& e : registered_indexes()) {
      if (!e.caps.persistent || is_test_only_index(e.name)) continue;
      if (t == KeyType::kString && !e.caps.string_keys) continue;
      cases.push_back({std::string(e.name), t});
    }
  }
  return cases;
}

/// The persistent non-test indexes without string keys (each must be
/// refused for --key-type string), in registration order.
inline std::vector<std::string> persistent_indexes_without_string_keys() {
  std::vector<std::string> names;
  for (const IndexEntry& e : registered_indexes()) {
    if (e.caps.persistent && !e.caps.string_keys && !is_test_only_index(e.name)) {
      names.emplace_back(e.name);
    }
  }
  return names;
}

}  // namespace nvindex::crash
