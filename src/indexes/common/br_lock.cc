// The big-reader lock's slow paths (br_lock.h).
#include "indexes/common/br_lock.h"

#include <algorithm>

#include "indexes/common/version_lock.h"

namespace nvindex {

unsigned BrLock::assign_slot() {
  return slots_handed_.fetch_add(1, std::memory_order_seq_cst) % kSlots;
}

unsigned BrLock::slots_in_use() {
  return std::min(slots_handed_.load(std::memory_order_seq_cst), kSlots);
}

void BrLock::lock_shared_slow(std::atomic<uint32_t>& c) {
  for (;;) {
    // Leave (the writer may be waiting for this counter), wait for the
    // writer to go, and announce ourselves again.
    c.fetch_sub(1, std::memory_order_relaxed);
    unsigned spins = 0;
    while (writer_.load(std::memory_order_acquire)) vlock::backoff(&spins);
    c.fetch_add(1, std::memory_order_seq_cst);
    if (!writer_.load(std::memory_order_seq_cst)) return;
  }
}

void BrLock::lock() {
  unsigned spins = 0;
  for (;;) {
    bool clear = false;
    if (!writer_.load(std::memory_order_relaxed) &&
        writer_.compare_exchange_weak(clear, true, std::memory_order_seq_cst,
                                      std::memory_order_relaxed)) {
      break;
    }
    vlock::backoff(&spins);
  }
  // The flag is set (seq_cst): a reader whose increment these loads miss
  // comes after the flag in the total order of seq_cst operations, so it sees
  // the flag and leaves. A thread that took its slot number before
  // incrementing is counted by slots_in_use() for the same reason.
  const unsigned n = slots_in_use();
  for (unsigned i = 0; i < n; ++i) {
    spins = 0;
    while (slots_[i].readers.load(std::memory_order_seq_cst) != 0) vlock::backoff(&spins);
  }
}

}  // namespace nvindex
