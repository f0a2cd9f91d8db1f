// Key records: how a persistent index whose slots hold 8 bytes keeps a
// byte-string key (issue 10). The slot holds the pool offset of a key record,
// a block of the pool allocator that holds the key's length and bytes:
//
//   offset  size  field
//        0     1  length, 0..kMaxKeyBytes (255)
//        1   len  key bytes
//
// The block is the allocator's smallest class that fits 1 + len bytes: one
// 64 B line for keys up to 63 bytes (YCSB's 24 B keys), two for up to 127,
// four for up to 255. This is the layout of the papers' successors for
// variable-size keys in PM trees (FAST&FAIR's and wB+-tree's "pointer to the
// key" slots; FP-Tree's and LB+-tree's key pointers next to a fingerprint).
//
// Crash consistency (DESIGN.md §6): a record is written and persisted (flush
// of its lines, one fence) BEFORE the slot that publishes it is written, so a
// published slot never names a record whose bytes are not durable. A record
// that is persisted but never published (a crash between the two) is
// unreachable, and the allocator's recovery pass (reclaim_unreachable in
// persistent.h) frees it: an index's mark() must mark the record of every
// live slot (mark_key_record). A record is freed only after the slot that
// published it is gone and durable, and only when no concurrent reader can
// still hold its offset (the index's reclamation rule: retire until close,
// free when no other operation is in flight as fastfair does, or an epoch),
// so no slot ever names a freed record.
//
// Thread-safety: store_key_record() and free_key_record() call the
// allocator, which is thread-safe; a record is immutable once published, so
// reading one needs no lock.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "nvindex/index.h"
#include "nvindex/pm/allocator.h"
#include "nvindex/pm/persist.h"
#include "nvindex/pm/pool.h"
#include "nvindex/status.h"
#include "util/hex.h"

namespace nvindex {

/// Bytes of a key record holding a key of `len` bytes (before the
/// allocator's rounding to its class: 64, 128, 256 or 512 B).
inline constexpr uint32_t key_record_bytes(size_t len) { return static_cast<uint32_t>(1 + len); }

/// Allocates a key record for `key` (at most kMaxKeyBytes bytes: the caller
/// checked it with check_key), writes length and bytes with pm::copy and
/// persists them (a flush per 64 B line, one fence; `site` names both), and
/// returns its pool offset in *off. Crash: the record is unreachable until the
/// caller publishes *off; recovery frees it then. Errors: OutOfSpace (pool
/// full; nothing allocated), Busy (the allocator is in recovery).
inline Status store_key_record(pm::Pool& pool, std::string_view key, uint64_t* off,
                               pm::Site site = pm::Site()) {
  uint64_t o = 0;
  if (Status s = pool.allocator().allocate(key_record_bytes(key.size()), &o); !s.ok()) return s;
  char* rec = pool.ptr<char>(o);
  const auto len = static_cast<uint8_t>(key.size());
  pm::store(reinterpret_cast<uint8_t*>(rec), len);
  if (!key.empty()) pm::copy(rec + 1, key.data(), key.size());
  pm::persist(rec, key_record_bytes(key.size()), site);
  *off = o;
  return Status::Ok();
}

/// The key held by the record at pool offset `off` (a published, hence
/// persisted, record). No bounds check: hot path.
inline std::string_view key_record(const pm::Pool& pool, uint64_t off) {
  const char* rec = pool.ptr<const char>(off);
  return {rec + 1, static_cast<uint8_t>(rec[0])};
}

/// Checks, without marking it, that the pool offset `off` (read from a
/// possibly damaged pool) names a key record: the start of an allocator
/// block that holds its stated length. Recovery calls it before comparing
/// the key of a record it has not marked yet. Errors: Corruption "<index>:
/// key record offset 0x.. is not a block" or "<index>: key record 0x.. holds
/// a key of N bytes in a block of M B".
inline Status check_key_record(const pm::Pool& pool, std::string_view index, uint64_t off) {
  const uint32_t block = pool.allocator().block_size(off);
  if (block == 0 || !pool.contains(off, block)) {
    return Status::Corruption(std::string(index) + ": key record offset " + hex(off) +
                              " is not a block");
  }
  const size_t len = static_cast<uint8_t>(*pool.ptr<const char>(off));
  if (key_record_bytes(len) > block) {
    return Status::Corruption(std::string(index) + ": key record " + hex(off) + " holds a key of " +
                              std::to_string(len) + " bytes in a block of " +
                              std::to_string(block) + " B");
  }
  return Status::Ok();
}

/// Marks the record at `off` reachable during a recovery pass, after
/// check_key_record. Errors: check_key_record's, and mark_reachable's (a
/// block marked twice: two slots name one record).
inline Status mark_key_record(pm::Pool& pool, std::string_view index, uint64_t off) {
  if (Status s = check_key_record(pool, index, off); !s.ok()) return s;
  return pool.allocator().mark_reachable(off);
}

/// Frees the record at `off`. The caller must have removed, and persisted the
/// removal of, every slot that named it, and no concurrent reader may still
/// hold `off` (see the file comment).
inline void free_key_record(pm::Pool& pool, uint64_t off) { pool.allocator().free(off); }

/// Reclamation of removed keys' records by quiescence (the rule fastfair
/// introduced; lbtree uses it too). An optimistic reader may hold a record's
/// offset it read from a slot before the slot was removed, and read the
/// record's bytes after, until its validation fails; so a retired record may
/// be freed (and reused) only when no operation that could have read the
/// slot is still running. Every public operation counts itself in active_
/// for its scope (Guard: acquire increment before it reads the index,
/// release decrement after its last read). reclaim() takes the retired list
/// first, then reads active_ with an acq_rel RMW: if it is 1 (the caller
/// alone), every other operation either ended (its decrement precedes the
/// RMW in active_'s modification order, so its reads happen before the
/// frees) or starts after (its increment reads from the RMW's release
/// sequence, so it sees every slot removal made before the list was taken
/// and cannot reach those records). Otherwise the list goes back for a
/// later try. A single-threaded user thus reuses every remove's record at
/// once; under concurrency records wait for a quiescent remove, or
/// free_all() at destruction. Costs two atomic RMWs on one shared counter
/// per operation (string keys only). Thread-safe.
class KeyRecordReclaimer {
 public:
  /// Counts the calling operation as in flight for its scope.
  class Guard {
   public:
    explicit Guard(KeyRecordReclaimer* r) : r_(r) {
      r_->active_.fetch_add(1, std::memory_order_acquire);
    }
    ~Guard() { r_->active_.fetch_sub(1, std::memory_order_release); }
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;

   private:
    KeyRecordReclaimer* r_;
  };

  /// Queues the record at `off`: no durable slot names it any more.
  void retire(uint64_t off) {
    std::lock_guard g(mu_);
    retired_.push_back(off);
  }
  /// Frees the queued records if the caller (which holds a Guard) is the
  /// only operation in flight; else keeps them for a later call.
  void reclaim(pm::Pool& pool) {
    std::vector<uint64_t> batch;
    {
      std::lock_guard g(mu_);
      if (retired_.empty()) return;
      batch.swap(retired_);
    }
    if (active_.fetch_add(0, std::memory_order_acq_rel) == 1) {
      for (uint64_t off : batch) free_key_record(pool, off);
      return;
    }
    std::lock_guard g(mu_);
    retired_.insert(retired_.end(), batch.begin(), batch.end());
  }
  /// Frees every queued record (no operation in flight: destruction).
  void free_all(pm::Pool& pool) {
    std::lock_guard g(mu_);
    for (uint64_t off : retired_) free_key_record(pool, off);
    retired_.clear();
  }
  /// Records queued and not yet freed.
  size_t retired() const {
    std::lock_guard g(mu_);
    return retired_.size();
  }

 private:
  std::atomic<uint64_t> active_{0};
  mutable std::mutex mu_;
  std::vector<uint64_t> retired_;
};

}  // namespace nvindex
