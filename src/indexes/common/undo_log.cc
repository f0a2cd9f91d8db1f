// UndoLog (undo_log.h): the shared write-ahead log of btree-wal and
// persistent-unsorted.
#include "indexes/common/undo_log.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "indexes/common/factory.h"
#include "nvindex/pm/persist.h"
#include "util/hex.h"

namespace nvindex {

namespace {

constexpr uint64_t kValid = 1;

// The slot a thread tries first: threads are numbered in the order of their
// first transaction (in any log), so that concurrent threads keep to slots
// of their own, and a single-threaded run always uses slot 0: the pools it
// leaves differ in no byte between runs (the fuzzer's seed pools must be
// reproducible; a hash of the thread id put the record anywhere).
uint32_t slot_hint(uint32_t slots) {
  static std::atomic<uint32_t> next_thread{0};
  static thread_local const uint32_t id = next_thread.fetch_add(1, std::memory_order_relaxed);
  return id % slots;
}

}  // namespace

uint32_t UndoLog::blocks_for(uint64_t payload, uint32_t segments) {
  const uint64_t bytes =
      kUndoLogHeaderBytes + payload + uint64_t{segments} * kUndoSegmentHeaderBytes;
  return static_cast<uint32_t>((bytes + kUndoLogBlockBytes - 1) / kUndoLogBlockBytes);
}

UndoLog::UndoLog(pm::Pool* pool, uint32_t slots, uint32_t blocks, const char* index)
    : pool_(pool),
      slots_(slots),
      blocks_(blocks),
      index_(index),
      site_record_(index_ + ".wal.record"),
      site_valid_(index_ + ".wal.valid"),
      site_apply_(index_ + ".wal.apply"),
      site_commit_(index_ + ".wal.commit"),
      site_recover_(index_ + ".wal.recover"),
      busy_(new std::atomic<bool>[slots]) {
  for (uint32_t s = 0; s < slots; ++s) busy_[s].store(false, std::memory_order_relaxed);
}

Status UndoLog::create(pm::Pool* pool, uint32_t slots, uint32_t blocks,
                       std::atomic<uint64_t>* table, const char* index,
                       std::unique_ptr<UndoLog>* out) {
  std::unique_ptr<UndoLog> log(new UndoLog(pool, slots, blocks, index));
  const size_t n = size_t{slots} * blocks;
  for (size_t i = 0; i < n; ++i) {
    uint64_t off;
    if (Status s = pool->allocator().allocate(kUndoLogBlockBytes, &off); !s.ok()) return s;
    // Zeroed and persisted before the root object that names it is
    // published: a slot starts with state 0 (no record).
    char* p = pool->ptr<char>(off);
    pm::fill(p, 0, kUndoLogBlockBytes);
    pm::flush(p, kUndoLogBlockBytes, {log->site_record_.c_str()});
    pm::store(&table[i], off);
    log->block_ptr_.push_back(p);
    log->block_off_.push_back(off);
  }
  // The caller's root object is persisted and published after this; its
  // fence commits these flushes too (they are unreachable until then).
  pm::flush(table, n * sizeof(uint64_t), {log->site_record_.c_str()});
  *out = std::move(log);
  return Status::Ok();
}

Status UndoLog::open(pm::Pool* pool, uint32_t slots, uint32_t blocks,
                     const std::atomic<uint64_t>* table, const char* index,
                     std::unique_ptr<UndoLog>* out) {
  std::unique_ptr<UndoLog> log(new UndoLog(pool, slots, blocks, index));
  const size_t n = size_t{slots} * blocks;
  for (size_t i = 0; i < n; ++i) {
    const uint64_t off = table[i].load(std::memory_order_relaxed);
    if (off % kUndoLogBlockBytes != 0 || !pool->contains(off, kUndoLogBlockBytes) ||
        off < kUndoLogBlockBytes || pool->allocator().block_size(off) != kUndoLogBlockBytes) {
      return Status::Corruption(std::string(index) + ": undo log block " + std::to_string(i) +
                                " at " + hex(off) + " is not a " +
                                std::to_string(kUndoLogBlockBytes) + " B block of the pool");
    }
    log->block_ptr_.push_back(pool->ptr<char>(off));
    log->block_off_.push_back(off);
  }
  *out = std::move(log);
  return Status::Ok();
}

void UndoLog::copy_slot(uint32_t s, uint64_t p, void* buf, size_t n, bool to_log) const {
  char* b = static_cast<char*>(buf);
  while (n > 0) {
    const size_t chunk = std::min<size_t>(n, kUndoLogBlockBytes - p % kUndoLogBlockBytes);
    if (to_log) {
      pm::copy(at(s, p), b, chunk);
    } else {
      std::memcpy(b, at(s, p), chunk);
    }
    p += chunk, b += chunk, n -= chunk;
  }
}

void UndoLog::flush_slot(uint32_t s, uint64_t p, uint64_t n, const char* site) const {
  while (n > 0) {
    const uint64_t chunk = std::min<uint64_t>(n, kUndoLogBlockBytes - p % kUndoLogBlockBytes);
    pm::flush(at(s, p), chunk, {site});
    p += chunk, n -= chunk;
  }
}

Status UndoLog::recover(bool clean_close, uint32_t* rolled_back) {
  *rolled_back = 0;
  const uint64_t capacity = uint64_t{blocks_} * kUndoLogBlockBytes;
  struct Segment {
    uint64_t off, len, at;  // pool offset, length, slot byte of the old bytes
  };
  std::vector<std::pair<uint32_t, std::vector<Segment>>> records;
  // Check every valid record before writing anything.
  for (uint32_t s = 0; s < slots_; ++s) {
    const uint64_t st = state(s)->load(std::memory_order_acquire);
    if (st == 0) continue;
    auto bad = [&](const std::string& what) {
      return Status::Corruption(index_ + ": undo log slot " + std::to_string(s) + ": " + what);
    };
    if (st != kValid) return bad("state word " + hex(st) + " is neither 0 nor 1");
    if (clean_close) {
      return bad(
          "a valid undo record in a pool that was closed cleanly (no transaction can "
          "have been open): damage");
    }
    uint64_t payload;
    copy_slot(s, 8, &payload, 8, false);
    if (payload % 8 != 0 || payload > capacity - kUndoLogHeaderBytes) {
      return bad("payload of " + std::to_string(payload) + " bytes does not fit the slot");
    }
    std::vector<Segment> segs;
    for (uint64_t p = kUndoLogHeaderBytes; p < kUndoLogHeaderBytes + payload;) {
      uint64_t h[2];
      if (p + kUndoSegmentHeaderBytes > kUndoLogHeaderBytes + payload) {
        return bad("a segment header runs past the payload");
      }
      copy_slot(s, p, h, sizeof(h), false);
      const uint64_t off = h[0], len = h[1];
      p += kUndoSegmentHeaderBytes;
      if (len == 0 || len % 8 != 0 || off % 8 != 0 || off < pm::kPoolHeaderBytes ||
          !pool_->contains(off, len) || p + len > kUndoLogHeaderBytes + payload) {
        return bad("segment of " + std::to_string(len) + " bytes at pool offset " + hex(off) +
                   " is misaligned, outside the pool or past the payload");
      }
      segs.push_back({off, len, p});
      p += len;
    }
    records.emplace_back(s, std::move(segs));
  }
  // Roll back: old bytes copied back, last saved first; persisted; then the
  // mark cleared. A crash before the clear leaves the record valid and its
  // old bytes unchanged, so the next recovery does the same again.
  for (const auto& [s, segs] : records) {
    for (auto it = segs.rbegin(); it != segs.rend(); ++it) {
      std::vector<char> old(it->len);
      copy_slot(s, it->at, old.data(), it->len, false);
      char* dst = pool_->ptr<char>(it->off);
      pm::copy(dst, old.data(), it->len);
      pm::flush(dst, it->len, {site_recover_.c_str()});
    }
    pm::fence({site_recover_.c_str()});
    pm::naw(state(s), 0, {site_recover_.c_str()});
    ++*rolled_back;
  }
  return Status::Ok();
}

Status UndoLog::mark(pm::Allocator& alloc) const {
  for (uint64_t off : block_off_) {
    if (Status s = alloc.mark_reachable(off); !s.ok()) return s;
  }
  return Status::Ok();
}

UndoLog::Txn UndoLog::begin() {
  const uint32_t start = slot_hint(slots_);
  for (unsigned spins = 0;; ++spins) {
    for (uint32_t i = 0; i < slots_; ++i) {
      const uint32_t s = (start + i) % slots_;
      bool expect = false;
      if (!busy_[s].load(std::memory_order_relaxed) &&
          busy_[s].compare_exchange_strong(expect, true, std::memory_order_acquire)) {
        return Txn(this, s);
      }
    }
    std::this_thread::yield();
  }
}

UndoLog::Txn::~Txn() { log_->busy_[slot_].store(false, std::memory_order_release); }

void UndoLog::Txn::save(const void* addr, size_t len) {
  if (len == 0) return;
  const uint64_t capacity = uint64_t{log_->blocks_} * kUndoLogBlockBytes;
  if (pos_ + kUndoSegmentHeaderBytes + len > capacity) {
    std::fprintf(stderr, "%s: undo record of more than %llu bytes: slot too small (a bug)\n",
                 log_->index_.c_str(), static_cast<unsigned long long>(capacity));
    std::abort();
  }
  const uint64_t h[2] = {log_->pool_->offset(addr), len};
  log_->copy_slot(slot_, pos_, const_cast<uint64_t*>(h), sizeof(h), true);
  log_->copy_slot(slot_, pos_ + kUndoSegmentHeaderBytes, const_cast<void*>(addr), len, true);
  pos_ += kUndoSegmentHeaderBytes + len;
}

void UndoLog::Txn::seal() {
  // The payload length, then the payload and the header persisted, then the
  // valid mark: a crash before the mark's NAW leaves no valid record (the
  // node is untouched so far); after it, a complete record.
  const uint64_t payload = pos_ - kUndoLogHeaderBytes;
  // Nothing saved (an SMO of persistent-unsorted:inner=dram over DRAM inner
  // nodes only): there is nothing to roll back, so no record.
  if (payload == 0) return;
  pm::store(reinterpret_cast<uint64_t*>(log_->at(slot_, 8)), payload);
  log_->flush_slot(slot_, 0, pos_, log_->site_record_.c_str());
  pm::fence({log_->site_record_.c_str()});
  pm::naw(log_->state(slot_), kValid, {log_->site_valid_.c_str()});
  pm::count_log_bytes(pos_);
  sealed_ = true;
}

void UndoLog::Txn::dirty(const void* addr, size_t len) {
  if (len == 0) return;
  dirtied_ = true;
  if (ndirty_ == dirty_.size()) flush_dirty();  // committed by commit()'s fence
  dirty_[ndirty_++] = {addr, len};
}

void UndoLog::Txn::commit() {
  // Every changed range persisted, then the mark cleared: a crash before the
  // clear's NAW rolls the transaction back (the record is valid and holds
  // the old bytes); after it, the transaction is durable. Ranges that share
  // a line (a small node's count word and first keys) flush it once.
  if (!dirtied_ && !sealed_) return;  // nothing written, nothing logged
  flush_dirty();
  pm::fence({log_->site_apply_.c_str()});
  if (sealed_) pm::naw(log_->state(slot_), 0, {log_->site_commit_.c_str()});
  sealed_ = false;
}

void UndoLog::Txn::flush_dirty() {
  std::array<uintptr_t, 512> lines;
  size_t n = 0;
  auto flush_lines = [&] {
    std::sort(lines.begin(), lines.begin() + static_cast<ptrdiff_t>(n));
    const auto end = std::unique(lines.begin(), lines.begin() + static_cast<ptrdiff_t>(n));
    for (auto it = lines.begin(); it != end; ++it) {
      pm::flush(reinterpret_cast<const void*>(*it), pm::kLineSize, {log_->site_apply_.c_str()});
    }
    n = 0;
  };
  for (uint32_t i = 0; i < ndirty_; ++i) {
    const uintptr_t first = reinterpret_cast<uintptr_t>(dirty_[i].first) & ~(pm::kLineSize - 1);
    const uintptr_t end = reinterpret_cast<uintptr_t>(dirty_[i].first) + dirty_[i].second;
    for (uintptr_t line = first; line < end; line += pm::kLineSize) {
      if (n == lines.size()) flush_lines();
      lines[n++] = line;
    }
  }
  flush_lines();
  ndirty_ = 0;
}

}  // namespace nvindex
