// PiBench's plugin ABI, declared here from its published facts (PiBench,
// Lersch et al., "Evaluating Persistent Memory Range Indexes", VLDB 2020;
// sfu-dis/pibench master a78171a, include/tree_api.hpp). PiBench loads a
// wrapper with dlopen(path, RTLD_NOW), finds the C symbol `create_tree` with
// dlsym, and calls the tree it returns through the vtable of `tree_api`.
//
// It is a C++ ABI, not a C one: the layout of tree_options_t (libstdc++'s
// std::string included, the C++11 ABI: 32 bytes) and the Itanium vtable
// order of tree_api (the destructor's two entries, then find, insert,
// update, remove, scan) must match the wrapper's, and nothing in the ABI
// checks it. Forks differ: the optiql and tls-cleanup branches add
// `bulk_load` before `find`, tum-db's Plush changes the options; a wrapper
// built against one of those is not callable through these declarations
// (pibench/import.h probes a wrapper in a child process before it trusts
// it). The names below live in namespace nvindex::pibench: the class name
// is not part of the ABI (create_tree is extern "C", and neither side uses
// RTTI across the boundary), only the layouts are.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace nvindex::pibench {

/// The options PiBench passes to create_tree (field order and types are the
/// ABI: 5 fields, 64 bytes with libstdc++).
struct tree_options_t {
  size_t key_size = 8;         ///< bytes per key (PiBench: 8, or more with a key prefix)
  size_t value_size = 8;       ///< bytes per value
  std::string pool_path = "";  ///< persistent pool file ("" = the wrapper's choice)
  size_t pool_size = 0;        ///< pool bytes (0 = the wrapper's choice)
  size_t num_threads = 1;      ///< threads that will call the tree concurrently
};

// The layout the ABI fixes, with libstdc++'s C++11 std::string (32 bytes).
static_assert(sizeof(std::string) == 32,
              "tree_options_t's layout assumes libstdc++'s C++11 string");
static_assert(sizeof(tree_options_t) == 64 && offsetof(tree_options_t, pool_path) == 16 &&
                  offsetof(tree_options_t, pool_size) == 48 &&
                  offsetof(tree_options_t, num_threads) == 56,
              "tree_options_t must match PiBench's layout");

/// A PiBench tree: what a wrapper implements and PiBench calls. Keys are
/// `key_sz` bytes (PiBench: an 8-byte integer in host byte order, after an
/// optional prefix); values are tree_options_t::value_size bytes.
class tree_api {
 public:
  virtual ~tree_api() = default;
  /// Copies the value of `key` into value_out (value_size bytes); false when
  /// absent.
  virtual bool find(const char* key, size_t sz, char* value_out) = 0;
  /// Inserts key -> value; false when it could not (e.g. present already).
  virtual bool insert(const char* key, size_t key_sz, const char* value, size_t value_sz) = 0;
  /// Replaces the value of a present key; false when absent.
  virtual bool update(const char* key, size_t key_sz, const char* value, size_t value_sz) = 0;
  /// Removes a key; false when absent.
  virtual bool remove(const char* key, size_t key_sz) = 0;
  /// Up to scan_sz (1..1000 in PiBench) pairs with key >= `key` in key order,
  /// written back to back (key_size bytes of key, value_size bytes of value)
  /// into memory the wrapper owns and points values_out at; returns the
  /// count.
  virtual int scan(const char* key, size_t key_sz, int scan_sz, char*& values_out) = 0;
};

/// The symbol PiBench looks up: `extern "C" tree_api* create_tree(const
/// tree_options_t&)`; nullptr when the wrapper cannot make a tree.
using create_tree_fn = tree_api* (*)(const tree_options_t&);
/// Its name, for dlsym.
inline constexpr const char* kCreateTreeSymbol = "create_tree";

}  // namespace nvindex::pibench
