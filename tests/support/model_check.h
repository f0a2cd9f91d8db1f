// Model-based test helpers shared by every index test: drive any Index<uint64_t>
// (found by registry name) with random operations and check every result
// against a std::map model, single-threaded and multi-threaded.
//
// Nothing here knows about a particular index: it uses only the Index<uint64_t>
// interface, IndexInfo capabilities and the registry. Failures are reported
// through GoogleTest (ADD_FAILURE / ASSERT): the single-threaded test stops at
// the first mismatch (with the seed and operation number in the message); the
// concurrent test collects the first mismatches of every thread and reports
// them after joining.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "nvindex/index.h"
#include "nvindex/pm/pool.h"

namespace nvindex::testing {

/// An index under test and the pool it lives in (null for volatile indexes).
/// Members are destroyed index first, then pool.
struct TestIndex {
  std::unique_ptr<pm::Pool> pool;
  std::unique_ptr<Index<uint64_t>> index;
};

/// Default pool size for persistent indexes under test, bytes (256 MiB).
inline constexpr uint64_t kTestPoolBytes = 256ull << 20;

/// Creates the index registered as `name` with IndexOptions::node_size =
/// node_size (bytes) and IndexOptions::threads = threads (the threads the
/// test will call it from: pass > 1 for a concurrent test, since an index may
/// drop its locks at 1). When the registry says the index is persistent,
/// first creates an anonymous DRAM pool of pool_bytes bytes with layout =
/// name (Pool::create_anonymous) and passes it in IndexOptions::pool.
/// Errors: InvalidArgument (unknown name, node size out of the index's range,
/// name too long for a pool layout), and whatever the pool or factory return.
Status open_test_index(std::string_view name, uint32_t node_size, TestIndex* out,
                       uint64_t pool_bytes = kTestPoolBytes, unsigned threads = 1);

/// Single-threaded model test: `ops` random operations (insert, update,
/// remove, lookup, scan, find_last_less_than) with keys in [0, key_space) plus
/// the edge keys 0, 1, UINT64_MAX - 1 and UINT64_MAX, and values including 0
/// and UINT64_MAX, each result compared with a std::map model. Three phases:
/// grow (~45% of ops, mostly inserts: forces splits), mixed (~20%), shrink
/// (~35%, mostly removes of present keys, then removal of all but ~1/16 of
/// the keys: forces merges); then a short regrow. Every ops/16 operations
/// verify() must pass and report as many keys as the model holds; at the end
/// a full scan must equal the model. Scans and find_last_less_than run only
/// when info().caps.ordered. Stops at the first mismatch (fatal failure).
void run_model_test(Index<uint64_t>& idx, uint64_t seed, size_t ops, uint64_t key_space);

/// Multi-threaded test (the index must claim caps.thread_safe). Each of
/// `threads` threads (2..8) owns a disjoint key set (keys == t mod threads,
/// interleaved so that threads share leaves; thread threads-1 also owns
/// UINT64_MAX) of keys_per_thread keys and runs ops_per_thread operations:
/// inserts, updates and removes of its own keys (results must match its own
/// model exactly), lookups of its own keys (exact) and of other threads' keys,
/// scans and find_last_less_than (ordered indexes). Every value encodes its
/// key (upper 32 bits = a hash of the key), so a reader checks that each value
/// it sees was written for that key. Threads first grow, then shrink their key
/// sets. Afterwards the index must equal the union of the models exactly
/// (lookups and a full scan), and verify() must pass.
void run_concurrent_test(Index<uint64_t>& idx, unsigned threads, uint64_t seed,
                         size_t ops_per_thread = 20000, uint64_t keys_per_thread = 2048);

}  // namespace nvindex::testing
