// kv-store-test: the key-value store (kv::Store, docs/kv.md) seen as an
// Index<uint64_t>, so that the crash lab, its ablation self-test and torture
// run the store's write paths by registration, as they run an index
// (test-only: the name ends in -test).
//
// Key k is the store key "k" + k as 20 zero-padded decimal digits (so key
// order is numeric order); value v is an item value that decodes to v: its
// last 20 bytes as a decimal number, or the whole value when it is 20 bytes
// or shorter (an incr result has no padding). The operations:
//   insert(k, v)  add
//   update(k, v)  by v mod 5: 0 a get then set; 1 a get then cas with the
//                 CAS unique it read; 2 append (replace once the value
//                 reaches 200 bytes); 3 incr by v - old (mod 2^64, memcached
//                 wraps), or replace when the value is not a 20-digit
//                 number; 4 replace. Each is one store write.
//   remove(k)     delete
//   lookup, scan  get, scan (decoded)
// The option "over" names the string-key index under the store; node sizes
// are that index's smallest (splits within a few operations). Pools are
// named after this index (IndexOptions::pool_layout, kv::Options::pool_layout).
#pragma once

#include <memory>
#include <string_view>

#include "nvindex/index.h"

namespace nvindex {

inline constexpr char kKvStoreTestDescription[] =
    "the KV store over a string-key index, as an integer-key index for the crash lab and torture "
    "(test only)";

/// The values of the option "over" (the default first).
inline constexpr std::string_view kKvStoreOverValues[] = {"lbtree",   "fptree",     "wbtree",
                                                          "fastfair", "p-masstree", "p-bwtree"};
inline constexpr OptionSpec kKvStoreTestOptions[] = {
    {"over", kKvStoreOverValues, "the string-key index that maps the store's keys to items"}};

/// Factory for "kv-store-test": a kv::Store over extra["over"] in
/// options.pool (required, layout "kv-store-test"), created or recovered.
/// Errors: those of kv::Store::open.
Status make_kv_store_test_index(const IndexOptions& options, std::unique_ptr<Index<uint64_t>>* out);

}  // namespace nvindex
