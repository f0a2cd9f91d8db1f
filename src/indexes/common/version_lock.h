// Version locks in DRAM, shared by the indexes that keep their node locks out
// of persistent memory (fastfair, lbtree, fptree).
//
// A version lock is one 64-bit word: version << 2 | locked << 1 | obsolete
// (optimistic lock coupling, Leis, Haubenschild, Neumann, "Optimistic Lock
// Coupling: A Scalable and Efficient General-Purpose Synchronization Method",
// IEEE Data Eng. Bull. 2019, §2). Readers take no lock: they read the version
// (read_lock), read the node, and check that the version did not change
// (validate). Writers set the locked bit with a compare-and-swap (lock, or
// upgrade from a version read earlier); unlock() clears it and increments the
// version in one release store (only the holder writes a locked word), so
// every reader that overlapped the write fails its validation.
//
// LockTable maps the pool offset of a node to its lock word without touching
// the node: the lock words live in DRAM (they are never persisted, so a crash
// never leaves a node locked), one word per node_size slot of the pool in one
// flat mapping whose pages the kernel supplies on first use.
//
// lbtree and fptree writers lock a leaf by its word here (lock/unlock), not
// by the papers' lock bit (byte) in the leaf, which only their TSX
// transactions needed: a CAS on the leaf's PM line 0 and a clearing store
// after the leaf's last flush touch a line that flush just wrote back, a
// full miss per write on CPUs whose clwb evicts (AMD's). The PM bit (byte)
// stays in their layouts, always written 0.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "indexes/common/prefetch.h"

namespace nvindex::vlock {

inline constexpr uint64_t kObsolete = 1;  ///< the node was unlinked; restart
inline constexpr uint64_t kLocked = 2;    ///< a writer holds the node

/// Spin-wait step: pause for the first 64 spins, then yield the CPU.
void backoff(unsigned* spins);

/// read_lock's wait for a writer (out of line: the uncontended path is
/// inline).
bool read_lock_wait(const std::atomic<uint64_t>& w, uint64_t* v);

/// Waits until `w` is unlocked and stores its word in *v. False if the node
/// is obsolete (the caller restarts).
inline bool read_lock(const std::atomic<uint64_t>& w, uint64_t* v) {
  const uint64_t x = w.load(std::memory_order_acquire);
  if (__builtin_expect((x & kLocked) != 0, 0)) return read_lock_wait(w, v);
  *v = x;
  return (x & kObsolete) == 0;
}

/// True if `w` still equals the word read by read_lock (no writer since).
/// Every node word a reader loads must be an acquire load (no fence here).
inline bool validate(const std::atomic<uint64_t>& w, uint64_t v) {
  return w.load(std::memory_order_acquire) == v;
}

/// Spins until it sets the locked bit. False (not locked) if the node is or
/// becomes obsolete.
bool lock(std::atomic<uint64_t>& w);

/// lock() for a word that no other thread writes (a structure with one
/// writer thread): sets the locked bit with a plain store, no
/// compare-and-swap, since a locked read-modify-write would wait for the
/// writer's earlier flushes to complete (as unlock() says). unlock() then
/// advances the version as after lock(). False (not locked) if the node is
/// obsolete or already locked (with one writer, a bug of the caller's).
inline bool lock_single_writer(std::atomic<uint64_t>& w) {
  const uint64_t x = w.load(std::memory_order_relaxed);
  if (x & (kObsolete | kLocked)) return false;
  w.store(x | kLocked, std::memory_order_relaxed);
  return true;
}

/// Sets the locked bit only if `w` still equals v (read by read_lock). False
/// otherwise (the caller restarts).
inline bool upgrade(std::atomic<uint64_t>& w, uint64_t v) {
  return w.compare_exchange_strong(v, v | kLocked, std::memory_order_acquire,
                                   std::memory_order_relaxed);
}

/// Clears the locked bit and increments the version: locked + kLocked =
/// version + 1, unlocked. A plain release store, not an atomic add: while
/// the bit is set only its holder writes the word (lock() and upgrade()
/// compare-and-swap from an unlocked value, readers never write), and a
/// locked read-modify-write here would wait for the holder's flushes to
/// drain, which a persistent index's writer has just issued.
inline void unlock(std::atomic<uint64_t>& w) {
  w.store(w.load(std::memory_order_relaxed) + kLocked, std::memory_order_release);
}

/// Unlocks and marks the node obsolete (it was unlinked by the writer); a
/// plain release store, as unlock().
inline void unlock_obsolete(std::atomic<uint64_t>& w) {
  w.store(w.load(std::memory_order_relaxed) + (kLocked | kObsolete), std::memory_order_release);
}

}  // namespace nvindex::vlock

namespace nvindex {

/// DRAM table of per-node version locks (see vlock above), keyed by pool
/// offset: one flat array of pool_size / node_size words, word i for the
/// node at offset i * node_size (a shift: node_size is a power of two).
/// Every node of one table must be node_size bytes, node_size aligned.
/// Thread-safe; words start at 0 (unlocked, version 0).
///
/// The array is one anonymous mapping reserved without backing
/// (MAP_NORESERVE): the kernel supplies zeroed pages on first touch, so DRAM
/// grows with the part of the pool the index uses, and the words of nodes
/// allocated together sit together. It asks for transparent huge pages
/// (madvise), so a lookup's version read rarely misses the TLB. word() is
/// one shift and one load. Virtual size: 8 B per node_size bytes of pool.
class LockTable {
 public:
  /// pool_size: bytes of the pool (offsets < pool_size); node_size: bytes per
  /// node, a power of two in 64 .. 65536 (anything else, or a failed mmap,
  /// aborts with a message: a program bug or an exhausted address space).
  LockTable(uint64_t pool_size, uint32_t node_size);
  ~LockTable();
  LockTable(const LockTable&) = delete;
  LockTable& operator=(const LockTable&) = delete;
  /// The lock word of the node at pool offset `off` (node_size aligned).
  std::atomic<uint64_t>& word(uint64_t off) { return words_[off >> node_shift_]; }
  /// Hints the CPU to bring the lock word of `off` into the cache.
  void prefetch(uint64_t off) const { prefetch_line(&words_[off >> node_shift_]); }
  /// DRAM held by the table: its resident pages (mincore), bytes.
  uint64_t dram_bytes() const;

 private:
  unsigned node_shift_;
  size_t bytes_;  ///< size of the mapping
  std::atomic<uint64_t>* words_;
};

}  // namespace nvindex
