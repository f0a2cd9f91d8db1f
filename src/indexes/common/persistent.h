// The scaffolding every persistent index shares (DESIGN.md §4, §6): the pool
// and the recovery facts info() reports, the root-object check that starts
// every recover(), the allocator's reachability pass with the damage check
// against the pool's close record, the key check that ends a recovery, the
// key count recorded at a clean close, and the create-or-recover factory
// that times recovery.
//
// A persistent index derives from PersistentIndex, calls these from its own
// recover() and destructor, and its factory is one call of
// open_persistent_index(). What stays in the index is what differs: its
// layout, its walk of the structure and its repairs.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "indexes/common/factory.h"
#include "nvindex/index.h"
#include "nvindex/pm/allocator.h"
#include "nvindex/pm/pool.h"
#include "nvindex/status.h"
#include "util/hex.h"

namespace nvindex {

/// Base of every persistent index over 8-byte keys: holds the pool (which
/// must outlive the index) and the recovery facts of info().
class PersistentIndex : public Index<uint64_t> {
 public:
  explicit PersistentIndex(pm::Pool* pool) : pool_(pool) {}

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
  /// marks the root object, then calls mark(allocator), which marks every
  /// block the structure reaches and returns the first error. Then the
  /// damage check: on a pool with a close record (pool.h) the bytes of the
  /// marked blocks must equal the bytes allocated at that clean close, else
  /// a block is lost or a free one is reached: Corruption. Only when every
  /// mark succeeded and the check passed does it consume the close record
  /// and end the pass (every unmarked block goes back to the free lists).
  /// On error the pass stays open: nothing is reclaimed, allocate() stays
  /// Busy, and ~Pool leaves the pool "not clean", so a damaged pool is
  /// reported, never repaired by freeing what a lost offset used to reach.
  /// The caller must not have changed the structure before this returns
  /// (so a crash before the record is consumed leaves the state it
  /// describes). Errors: those of mark and mark_reachable (Corruption: a
  /// block reached twice or not a block), Corruption (close record).
  template <class Mark>
  Status reclaim_unreachable(std::string_view index, Mark&& mark) {
    pm::Allocator& alloc = pool_->allocator();
    alloc.begin_recovery();
    Status s = alloc.mark_reachable(pool_->root());
    if (s.ok()) s = mark(alloc);
    if (!s.ok()) return s;
    const uint64_t recorded = pool_->close_record().bytes;
    const uint64_t reached = alloc.bytes_in_use();
    if (recorded != 0 && reached != recorded) {
      return Status::Corruption(
          std::string(index) + ": the pool was closed cleanly with " + std::to_string(recorded) +
          " bytes in allocated blocks, but the structure reaches " + std::to_string(reached) +
          " (a lost or redirected offset; nothing reclaimed)");
    }
    pool_->consume_close_record();
    alloc.end_recovery();
    return Status::Ok();
  }

  /// The key check that ends a recovery: on a pool whose close record holds
  /// a key count, `keys` (what the recovered structure holds) must equal it.
  /// On a mismatch the record is written back (so the next open reports it
  /// again) and the result is Corruption "<index>: the pool was closed
  /// cleanly with N keys, the recovered structure holds M".
  Status check_recovered_keys(std::string_view index, uint64_t keys) {
    const auto& want = pool_->close_record().keys;
    if (!want || *want == keys) return Status::Ok();
    pool_->restore_close_record();
    return Status::Corruption(std::string(index) + ": the pool was closed cleanly with " +
                              std::to_string(*want) + " keys, the recovered structure holds " +
                              std::to_string(keys));
  }

  /// Records the key count for the pool's close record; called by the
  /// index's destructor (no concurrent writers). Runs verify(): a structure
  /// that fails it records no key count. Does nothing for an index that
  /// never finished opening (create or recover failed).
  void record_close_keys() {
    VerifyReport r;
    if (opened_ && verify(&r).ok()) pool_->set_close_keys(r.keys);
  }

  pm::Pool* const pool_;

 private:
  template <class T, class Create, class Recover>
  friend Status open_persistent_index(const IndexOptions&, std::string_view, Create&&, Recover&&,
                                      std::unique_ptr<Index<uint64_t>>*);
  bool opened_ = false;  ///< create or recover succeeded
  bool recovered_ = false;
  double recovery_seconds_ = 0;
};

/// The factory every persistent index shares: checks IndexOptions::pool
/// (present, layout == `layout`: check_index_pool), constructs T(pool), then
/// on a pool without a root calls create(T&) (a new index; make_index has
/// checked the node size), otherwise recover(T&), timed (wall clock) into
/// info().recovery_seconds with info().recovered set. On success *out owns
/// the index. Errors: check_index_pool's, then those of create or recover
/// (nothing is stored in *out).
template <class T, class Create, class Recover>
Status open_persistent_index(const IndexOptions& options, std::string_view layout, Create&& create,
                             Recover&& recover, std::unique_ptr<Index<uint64_t>>* out) {
  if (Status s = check_index_pool(options, layout); !s.ok()) return s;
  auto idx = std::make_unique<T>(options.pool);
  if (options.pool->root() == 0) {
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
