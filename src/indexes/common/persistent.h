// The scaffolding every persistent index shares (DESIGN.md §4, §6): the pool
// and the recovery facts info() reports, the root-object check that starts
// every recover(), the allocator's reachability pass with the damage check
// against the pool's close record, the key count recorded at a clean close,
// and the create-or-recover factory that times recovery.
//
// A persistent index derives from PersistentIndex, calls these from its own
// recover() and destructor, and its factory is one call of
// open_persistent_index(). What stays in the index is what differs: its
// layout, its walk of the structure and its repairs.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <iterator>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "indexes/common/factory.h"
#include "nvindex/index.h"
#include "nvindex/pm/allocator.h"
#include "nvindex/pm/persist.h"
#include "nvindex/pm/pool.h"
#include "nvindex/status.h"
#include "util/hex.h"

namespace nvindex {

/// Base of every persistent index over keys K (uint64_t or
/// std::string_view): holds the pool (which must outlive the index) and the
/// recovery facts of info().
template <class K>
class PersistentIndexOf : public Index<K> {
 public:
  explicit PersistentIndexOf(pm::Pool* pool) : pool_(pool) {}

 protected:
  /// info() fields every persistent index fills the same way: name,
  /// description, caps, node_size (bytes), dram_bytes (bytes, the index's
  /// own DRAM), pm_bytes (bytes in allocated blocks of the pool), recovered
  /// and recovery_seconds (set by open_persistent_index).
  IndexInfo persistent_info(std::string_view name, std::string_view description,
                            const Capabilities& caps, uint32_t node_size,
                            uint64_t dram_bytes) const {
    IndexInfo i;
    i.name = std::string(name);
    i.description = std::string(description);
    i.caps = caps;
    i.node_size = node_size;
    i.dram_bytes = dram_bytes;
    i.pm_bytes = pool_->allocator().bytes_in_use();
    i.recovered = recovered_;
    i.recovery_seconds = recovery_seconds_;
    return i;
  }

  /// The root object of a pool that has one (pool root != 0), checked
  /// before anything reads it: the root offset must be the start of an
  /// allocator block of at least `bytes` bytes (default sizeof(Root)), and
  /// the object's first word (Root::magic) must equal `magic`. Errors:
  /// Corruption "<index>: root object offset 0x.. is not a block of at
  /// least N B", "<index>: bad root object magic (not a <index> pool)".
  template <class Root>
  Status open_root_object(std::string_view index, uint64_t magic, Root** out,
                          uint64_t bytes = sizeof(Root)) const {
    const uint64_t ro = pool_->root();
    if (!pool_->contains(ro, bytes) || pool_->allocator().block_size(ro) < bytes) {
      return Status::Corruption(std::string(index) + ": root object offset " + hex(ro) +
                                " is not a block of at least " + std::to_string(bytes) + " B");
    }
    Root* r = pool_->ptr<Root>(ro);
    if (r->magic != magic) {
      return Status::Corruption(std::string(index) + ": bad root object magic (not a " +
                                std::string(index) + " pool)");
    }
    *out = r;
    return Status::Ok();
  }

  /// The reachability pass of a recovery (allocator.h): begins the pass,
  /// marks the root object, then calls mark(allocator, &keys), which marks
  /// every block the structure reaches, counts the keys it holds (as found:
  /// live entries of its leaves) and returns the first error. Then the damage
  /// check: on a pool with a close record (pool.h) the bytes of the marked
  /// blocks must equal the bytes allocated at that clean close, and the keys
  /// the key count recorded then; a lost or redirected offset loses blocks
  /// or keys, a flipped bit keys: Corruption. Only when every mark succeeded
  /// and the record agrees does it consume the record and end the pass
  /// (every unmarked block goes back to the free lists). On error the pass
  /// stays open: nothing is reclaimed, allocate() stays Busy, the record
  /// stays, and ~Pool leaves the pool "not clean", so a damaged pool is
  /// reported at every open, never repaired by freeing what a lost offset
  /// used to reach. The caller must not have changed the structure before
  /// this returns (so a crash before the record is consumed leaves the
  /// state it describes; after, recovery is a crash recovery). Errors:
  /// those of mark and mark_reachable (Corruption: a block reached twice or
  /// not a block), Corruption (close record).
  template <class Mark>
  Status reclaim_unreachable(std::string_view index, Mark&& mark) {
    return reclaim_unreachable(index, std::forward<Mark>(mark),
                               [](pm::Allocator&) { return Status::Ok(); });
  }

  /// reclaim_unreachable with a lost-leaf check: on a pool without a close
  /// record (after a crash, when there is nothing to hold the walk against)
  /// `lost(allocator)` runs after the marks and before any block is
  /// reclaimed, and an error from it fails the pass like a mark's
  /// (check_lost_leaves is the usual `lost`). On a pool with a close record
  /// the record's check covers the same damage and `lost` is not called.
  template <class Mark, class Lost>
  Status reclaim_unreachable(std::string_view index, Mark&& mark, Lost&& lost) {
    pm::Allocator& alloc = pool_->allocator();
    alloc.begin_recovery();
    uint64_t keys = 0;
    Status s = alloc.mark_reachable(pool_->root());
    if (s.ok()) s = mark(alloc, &keys);
    if (!s.ok()) return s;
    const pm::Pool::CloseRecord& record = pool_->close_record();
    const uint64_t reached = alloc.bytes_in_use();
    if (record.bytes != 0 && reached != record.bytes) {
      return Status::Corruption(
          std::string(index) + ": the pool was closed cleanly with " +
          std::to_string(record.bytes) + " bytes in allocated blocks, but the structure reaches " +
          std::to_string(reached) + " (a lost or redirected offset; nothing reclaimed)");
    }
    if (record.bytes != 0 && record.keys && keys != *record.keys) {
      return Status::Corruption(std::string(index) + ": the pool was closed cleanly with " +
                                std::to_string(*record.keys) + " keys, the structure holds " +
                                std::to_string(keys) + " (damage; nothing reclaimed)");
    }
    if (record.bytes == 0) {
      if (Status l = lost(alloc); !l.ok()) return l;
    }
    pool_->consume_close_record(reached);
    alloc.end_recovery();
    return Status::Ok();
  }

  /// The lost-leaf check of a selective-persistence index (its leaf chain
  /// is its only persistent structure), for reclaim_unreachable's `lost`
  /// on integer keys. After a crash there is no close record, so a cleared
  /// or redirected sibling offset would make the chain end early, or skip
  /// leaves, and recovery would reclaim the leaves it no longer reaches,
  /// keys and all. This check reads every unmarked block of the leaf class
  /// (`leaf_bytes`): live_keys(off, &keys) returns false for a block that
  /// is not a whole leaf with live entries (by the index's own format:
  /// magic, count, bitmap, fingerprints; a live slot holding the all-zero
  /// entry means a partly written leaf, see below), else fills its live
  /// keys. A key is held when the reachable leaf covering it holds it:
  /// ranges(&r), called once, on the first live unreachable leaf, fills r
  /// with (lower key, leaf offset) of the reachable leaves in key order (the
  /// lower key is the leaf's low key, or its smallest key; empty leaves may
  /// be left out); the covering leaf is the last whose lower key is <= the
  /// key, and leaf_has(off, key) says whether it holds the key. An
  /// unreachable leaf holding more than `unheld_ok` keys that no reachable
  /// leaf holds is Corruption (nothing is reclaimed, nothing written, the
  /// pool stays not clean).
  ///
  /// The only unreachable leaves a crash leaves with live entries are the
  /// new leaves of splits not yet linked, whose keys their left sibling
  /// still holds (`unheld_ok` 0), or also the key being inserted, where the
  /// split writes it into the new leaf before the link (fptree: 1, so a lost
  /// leaf holding a single key goes unseen there). Every unmarked block of the class that is not
  /// all zero is then zeroed (stored through pm::fill, flushed at `site`, one fence), so that every
  /// free block of the class is zero after a recovery: the index frees no leaf with content at run
  /// time (it zeroes one first), and a never-used block is zero (a pool's heap starts zeroed). So a
  /// split's new leaf that a later crash leaves partly written (its lines
  /// persisted in any order before the fence) holds its own entries and
  /// zero ones, never stale keys of an earlier leaf that later removes made
  /// absent; and a zeroed copy is no longer a leaf. A lost leaf holding the
  /// entry (0, 0) is taken for a partly written one and goes unseen. A crash
  /// while zeroing leaves some blocks zero and others whole: the next
  /// recovery checks and zeroes them again. Cost, after a crash only: one
  /// read of each unmarked block of the class and, once there is a live
  /// one, ranges() and a binary search and leaf_has() per key it holds.
  template <class LiveKeys, class Ranges, class LeafHas>
  Status check_lost_leaves(std::string_view index, pm::Allocator& alloc, uint32_t leaf_bytes,
                           LiveKeys&& live_keys, Ranges&& ranges, LeafHas&& leaf_has,
                           const char* site, uint32_t unheld_ok = 0) const {
    std::vector<std::pair<uint64_t, uint64_t>> lower;  // (lower key, leaf), on first use
    bool have_ranges = false;
    auto held = [&](uint64_t k) {
      if (!have_ranges) {
        ranges(&lower);
        have_ranges = true;
      }
      const auto it = std::upper_bound(lower.begin(), lower.end(), std::make_pair(k, UINT64_MAX));
      return it != lower.begin() && leaf_has(std::prev(it)->second, k);
    };
    std::vector<uint64_t> keys, dirty;
    for (uint64_t off : alloc.unmarked_blocks(leaf_bytes)) {
      const uint32_t bytes = alloc.block_size(off);
      const auto* w = pool_->template ptr<const uint64_t>(off);
      bool zero = true;
      for (uint32_t i = 0; zero && i < bytes / 8; ++i) zero = w[i] == 0;
      if (zero) continue;
      keys.clear();
      if (live_keys(off, &keys)) {
        uint32_t unheld = 0;
        for (uint64_t k : keys) {
          if (!held(k) && ++unheld > unheld_ok) {
            return Status::Corruption(
                std::string(index) + ": leaf " + hex(off) +
                " is not on the leaf chain but holds key " + hex(k) +
                ", which no leaf on the chain holds: a lost or redirected leaf offset (the "
                "pool crashed: no close record to check against; nothing reclaimed)");
          }
        }
      }
      dirty.push_back(off);
    }
    for (uint64_t off : dirty) {
      void* b = pool_->template ptr<char>(off);
      pm::fill(b, 0, alloc.block_size(off));
      pm::flush(b, alloc.block_size(off), {site});
    }
    if (!dirty.empty()) pm::fence({site});
    return Status::Ok();
  }

  /// Zeroes the unpublished block `off` (its allocator block, persisted at
  /// `site`) before the index frees it at run time, so that a free block of
  /// a leaf class is always zero (check_lost_leaves).
  void zero_block(uint64_t off, const char* site) const {
    void* b = pool_->template ptr<char>(off);
    const uint32_t bytes = pool_->allocator().block_size(off);
    pm::fill(b, 0, bytes);
    pm::persist(b, bytes, {site});
  }

  /// Records the key count for the pool's close record; called by the
  /// index's destructor (no concurrent writers). Runs verify() (so a close
  /// costs one traversal of the structure): a structure that fails it, or a
  /// verify() that cannot allocate, records no key count. Does nothing for an
  /// index that never finished opening (create or recover failed) or on an
  /// anonymous pool (it keeps no record).
  void record_close_keys() noexcept {
    if (!opened_ || pool_->anonymous()) return;
    pool_->set_close_keys(std::nullopt);
    try {
      VerifyReport r;
      if (this->verify(&r).ok()) pool_->set_close_keys(r.keys);
    } catch (const std::bad_alloc&) {
      // No key count: the record says "keys not recorded".
    }
  }

  pm::Pool* const pool_;

 private:
  template <class T, class KT, class Create, class Recover, class... Args>
  friend Status open_persistent_index(const IndexOptions&, std::string_view, Create&&, Recover&&,
                                      std::unique_ptr<Index<KT>>*, Args&&...);
  bool opened_ = false;  ///< create or recover succeeded
  bool recovered_ = false;
  double recovery_seconds_ = 0;
};

/// The base of the persistent indexes over 8-byte keys.
using PersistentIndex = PersistentIndexOf<uint64_t>;

/// The factory every persistent index shares, for keys K (T derives from
/// PersistentIndexOf<K>; `layout` is pool_layout(name, key_type_of<K>)):
/// checks IndexOptions::pool (present, layout == `layout`:
/// check_index_pool), constructs
/// T(pool, args...), then
/// on a pool without a root calls create(T&) (a new index; make_index has
/// checked the node size), otherwise recover(T&), timed (wall clock) into
/// info().recovery_seconds with info().recovered set. On success *out owns
/// the index. Errors: check_index_pool's, then those of create or recover
/// (nothing is stored in *out).
template <class T, class K, class Create, class Recover, class... Args>
Status open_persistent_index(const IndexOptions& options, std::string_view layout, Create&& create,
                             Recover&& recover, std::unique_ptr<Index<K>>* out, Args&&... args) {
  if (Status s = check_index_pool(options, layout); !s.ok()) return s;
  auto idx = std::make_unique<T>(options.pool, std::forward<Args>(args)...);
  if (options.pool->root() == 0) {
    // A pool without an index has nothing a close record could describe.
    options.pool->consume_close_record(0);
    if (Status s = create(*idx); !s.ok()) return s;
  } else {
    const auto t0 = std::chrono::steady_clock::now();
    if (Status s = recover(*idx); !s.ok()) return s;
    idx->recovered_ = true;
    idx->recovery_seconds_ =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  idx->opened_ = true;
  *out = std::move(idx);
  return Status::Ok();
}

}  // namespace nvindex
