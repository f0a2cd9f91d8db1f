// Row locks for TPC-C's transactions: strict two-phase locking with the
// NO_WAIT policy (Bernstein, Hadzilacos and Goodman, "Concurrency Control and
// Recovery in Database Systems", 1987, §3.2 and §3.7; NO_WAIT as in Yu et
// al., "Staring into the Abyss", VLDB 2014, §3.1): a lock request that
// conflicts fails at once, and the transaction aborts, releases every lock
// and is retried. A transaction never waits for a lock, so there is no
// deadlock to detect.
//
// The lock table is a fixed array of lock words; a lock id (a table, a key
// and a column group) hashes to one word. Two ids that share a word conflict
// falsely, which costs a retry and never correctness. A transaction's
// TxLocks counts what it holds per word, so taking the same word twice
// (a repeated item in an order, or two ids that share a word) is re-entrant.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "tpcc/schema.h"

namespace nvindex::tpcc {

/// A lock's mode.
enum class LockMode : uint8_t { kShared, kExclusive };

/// Column groups a lock can cover instead of a whole row (group 0 is the
/// row): the columns of WAREHOUSE and DISTRICT that different transactions
/// write never meet, so they do not share a lock.
enum LockGroup : uint64_t {
  kRow = 0,
  kYtd = 1,        ///< W_YTD, D_YTD (Payment writes them)
  kNextOrder = 2,  ///< D_NEXT_O_ID (New-Order writes it, Stock-Level reads it)
};

/// The lock id of (table, key, group): a 64-bit mix of the three.
uint64_t lock_id(Table t, uint64_t key, LockGroup group = kRow);

/// The shared array of lock words (4 B each: bit 31 = an exclusive holder,
/// bits 0..30 = shared holders). Thread-safe.
class LockTable {
 public:
  /// 2^slot_bits words (slot_bits 10..28; 2^22 words = 16 MiB by default).
  explicit LockTable(unsigned slot_bits = 22);

  /// The word of a lock id.
  uint32_t slot_of(uint64_t id) const { return static_cast<uint32_t>(id >> (64 - bits_)); }
  /// Takes the word in `mode` if no holder conflicts; false otherwise.
  bool try_lock(uint32_t slot, LockMode mode);
  /// Turns the caller's shared hold into an exclusive one if it is the only
  /// holder; false otherwise (the shared hold stays).
  bool try_upgrade(uint32_t slot);
  /// Releases a hold of `mode` (the caller has it).
  void unlock(uint32_t slot, LockMode mode);

 private:
  static constexpr uint32_t kWriter = 1u << 31;
  unsigned bits_;
  std::unique_ptr<std::atomic<uint32_t>[]> words_;
};

/// The locks one transaction holds (one client; not thread-safe). Strict
/// 2PL: everything is held until release_all() at commit or abort.
class TxLocks {
 public:
  explicit TxLocks(LockTable& table) : table_(table) {}
  ~TxLocks() { release_all(); }
  TxLocks(const TxLocks&) = delete;
  TxLocks& operator=(const TxLocks&) = delete;

  /// Takes (t, key, group) in `mode`, or upgrades a shared hold of its word
  /// to exclusive. False on a conflict: the caller must abort (release_all)
  /// and may retry.
  bool acquire(Table t, uint64_t key, LockMode mode, LockGroup group = kRow);
  /// Releases every hold.
  void release_all();
  /// Words held.
  size_t held() const { return held_.size(); }

 private:
  struct Hold {
    uint32_t slot;
    LockMode mode;
  };
  LockTable& table_;
  std::vector<Hold> held_;
};

}  // namespace nvindex::tpcc
