// batch-spy-test: a test double that shows how the benchmark driver calls
// Index::multi_lookup (BenchOptions::lookup_batch): it records the size of
// every multi_lookup call and counts lookup() calls, and with option
// lie=values it falsifies multi_lookup's results, so a test can show the
// driver checks every key of a batch. Never benchmark it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string_view>

#include "nvindex/index.h"

namespace nvindex {

inline constexpr char kBatchSpyDescription[] =
    "test double recording multi_lookup batch sizes (lie=values falsifies multi_lookup "
    "results): never benchmark it";

inline constexpr std::string_view kBatchSpyLieValues[] = {"none", "values"};
/// Its one option: lie=none (honest; the default) or lie=values (multi_lookup
/// returns every 16th found value with its upper 32 bits inverted; lookup()
/// stays honest).
inline constexpr OptionSpec kBatchSpyOptions[] = {
    {"lie", kBatchSpyLieValues,
     "none: honest; values: multi_lookup inverts the upper 32 bits of every 16th found value"},
};

/// What every batch-spy-test instance of the process has seen since the last
/// reset_batch_spy_log().
struct BatchSpyLog {
  /// Keys per multi_lookup call -> how many calls had that many.
  std::map<size_t, uint64_t> batch_sizes;
  uint64_t lookups = 0;  ///< lookup() calls made by the caller (not from multi_lookup)
  uint64_t lies = 0;     ///< values multi_lookup falsified (lie=values)
};

/// A copy of the process-wide log (thread-safe).
BatchSpyLog batch_spy_log();
/// Empties the process-wide log (thread-safe).
void reset_batch_spy_log();

/// Factory for "batch-spy-test": testing_doubles::MapIndex (an honest
/// std::map behind a mutex: ordered, thread-safe, volatile) whose
/// multi_lookup logs its batch size, looks each key up in the map and, with
/// lie=values, inverts the upper 32 bits of every 16th found value it
/// returns; lookup() is honest and logged. Never fails (make_index has
/// checked the option).
Status make_batch_spy_index(const IndexOptions& options, std::unique_ptr<Index<uint64_t>>* out);
/// The same over string keys (make_index<std::string_view>("batch-spy-test")).
Status make_batch_spy_string_index(const IndexOptions& options,
                                   std::unique_ptr<Index<std::string_view>>* out);

}  // namespace nvindex
