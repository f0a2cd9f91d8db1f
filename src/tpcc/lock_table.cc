#include "tpcc/lock_table.h"

#include <algorithm>

#include "util/dcheck.h"

namespace nvindex::tpcc {

uint64_t lock_id(Table t, uint64_t key, LockGroup group) {
  // splitmix64's finaliser over key, table and group: every bit of the
  // input reaches the top bits that pick the word.
  uint64_t x = key ^ (uint64_t{static_cast<uint8_t>(t)} << 56) ^ (uint64_t{group} << 52);
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

LockTable::LockTable(unsigned slot_bits)
    : bits_(std::clamp(slot_bits, 10u, 28u)),
      words_(new std::atomic<uint32_t>[size_t{1} << bits_]) {
  for (size_t i = 0; i < (size_t{1} << bits_); ++i) words_[i].store(0, std::memory_order_relaxed);
}

bool LockTable::try_lock(uint32_t slot, LockMode mode) {
  std::atomic<uint32_t>& w = words_[slot];
  uint32_t cur = w.load(std::memory_order_relaxed);
  if (mode == LockMode::kExclusive) {
    return cur == 0 && w.compare_exchange_strong(cur, kWriter, std::memory_order_acquire,
                                                 std::memory_order_relaxed);
  }
  while ((cur & kWriter) == 0) {
    if (w.compare_exchange_weak(cur, cur + 1, std::memory_order_acquire,
                                std::memory_order_relaxed)) {
      return true;
    }
  }
  return false;
}

bool LockTable::try_upgrade(uint32_t slot) {
  uint32_t one = 1;
  return words_[slot].compare_exchange_strong(one, kWriter, std::memory_order_acquire,
                                              std::memory_order_relaxed);
}

void LockTable::unlock(uint32_t slot, LockMode mode) {
  if (mode == LockMode::kExclusive) {
    NVINDEX_DCHECK(words_[slot].load(std::memory_order_relaxed) == kWriter);
    words_[slot].store(0, std::memory_order_release);
  } else {
    NVINDEX_DCHECK((words_[slot].load(std::memory_order_relaxed) & ~kWriter) > 0);
    words_[slot].fetch_sub(1, std::memory_order_release);
  }
}

bool TxLocks::acquire(Table t, uint64_t key, LockMode mode, LockGroup group) {
  const uint32_t slot = table_.slot_of(lock_id(t, key, group));
  for (Hold& h : held_) {
    if (h.slot != slot) continue;
    if (h.mode == LockMode::kExclusive || mode == LockMode::kShared) return true;
    if (!table_.try_upgrade(slot)) return false;
    h.mode = LockMode::kExclusive;
    return true;
  }
  if (!table_.try_lock(slot, mode)) return false;
  held_.push_back({slot, mode});
  return true;
}

void TxLocks::release_all() {
  for (const Hold& h : held_) table_.unlock(h.slot, h.mode);
  held_.clear();
}

}  // namespace nvindex::tpcc
