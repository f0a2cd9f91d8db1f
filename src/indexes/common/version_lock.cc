// Version locks and the DRAM lock table (version_lock.h).
#include "indexes/common/version_lock.h"

#include <immintrin.h>

#include <bit>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "nvindex/pm/allocator.h"

namespace nvindex {

namespace vlock {

void backoff(unsigned* spins) {
  if (++*spins < 64) {
    _mm_pause();
  } else {
    std::this_thread::yield();
  }
}

bool read_lock_wait(const std::atomic<uint64_t>& w, uint64_t* v) {
  unsigned spins = 0;
  uint64_t x = w.load(std::memory_order_acquire);
  while (x & kLocked) {
    backoff(&spins);
    x = w.load(std::memory_order_acquire);
  }
  *v = x;
  return (x & kObsolete) == 0;
}

bool lock(std::atomic<uint64_t>& w) {
  unsigned spins = 0;
  while (true) {
    uint64_t x = w.load(std::memory_order_acquire);
    if (x & kObsolete) return false;
    if ((x & kLocked) == 0 && w.compare_exchange_weak(x, x | kLocked, std::memory_order_acquire,
                                                      std::memory_order_relaxed)) {
      return true;
    }
    backoff(&spins);
  }
}

}  // namespace vlock

namespace {
constexpr auto kAcq = std::memory_order_acquire;
constexpr auto kRlx = std::memory_order_relaxed;
}  // namespace

LockTable::LockTable(uint64_t pool_size, uint32_t node_size)
    : node_size_(node_size),
      node_shift_(static_cast<unsigned>(std::countr_zero(node_size))),
      per_chunk_(static_cast<uint32_t>(pm::Allocator::kChunkSize / node_size)),
      nchunks_(pool_size / pm::Allocator::kChunkSize + 1),
      chunks_(new std::atomic<std::atomic<uint64_t>*>[nchunks_]) {
  if (node_size < 64 || node_size > 65536 || (node_size & (node_size - 1)) != 0) {
    std::fprintf(stderr, "nvindex::LockTable: node size %u is not a power of two in 64..65536\n",
                 node_size);
    std::abort();
  }
  for (size_t i = 0; i < nchunks_; ++i) chunks_[i].store(nullptr, kRlx);
}

LockTable::~LockTable() {
  for (size_t i = 0; i < nchunks_; ++i) delete[] chunks_[i].load(kRlx);
}

std::atomic<uint64_t>* LockTable::install_chunk(size_t c) {
  std::atomic<uint64_t>* arr = chunks_[c].load(kAcq);
  if (arr != nullptr) return arr;
  auto* fresh = new std::atomic<uint64_t>[per_chunk_];
  for (uint32_t i = 0; i < per_chunk_; ++i) fresh[i].store(0, kRlx);
  if (chunks_[c].compare_exchange_strong(arr, fresh, std::memory_order_acq_rel, kAcq)) {
    allocated_.fetch_add(1, kRlx);
    return fresh;
  }
  delete[] fresh;  // another thread installed the array first (arr = it)
  return arr;
}

uint64_t LockTable::dram_bytes() const {
  return nchunks_ * sizeof(void*) + allocated_.load(kRlx) * per_chunk_ * sizeof(uint64_t);
}

}  // namespace nvindex
