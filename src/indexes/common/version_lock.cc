// Version locks and the DRAM lock table (version_lock.h).
#include "indexes/common/version_lock.h"

#include <immintrin.h>
#include <sys/mman.h>

#include <bit>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

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

LockTable::LockTable(uint64_t pool_size, uint32_t node_size)
    : node_shift_(static_cast<unsigned>(std::countr_zero(node_size))) {
  if (node_size < 64 || node_size > 65536 || (node_size & (node_size - 1)) != 0) {
    std::fprintf(stderr, "nvindex::LockTable: node size %u is not a power of two in 64..65536\n",
                 node_size);
    std::abort();
  }
  const uint64_t words = pool_size / node_size + 1;
  bytes_ = (words * sizeof(uint64_t) + 4095) / 4096 * 4096;
  void* m = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) {
    std::fprintf(stderr, "nvindex::LockTable: mmap of %zu bytes failed\n", bytes_);
    std::abort();
  }
  (void)::madvise(m, bytes_, MADV_HUGEPAGE);  // a hint: failure changes nothing
  // Zero-filled pages are words of value 0 (std::atomic<uint64_t> is a plain
  // 8-byte word, always lock-free).
  static_assert(std::atomic<uint64_t>::is_always_lock_free &&
                sizeof(std::atomic<uint64_t>) == sizeof(uint64_t));
  words_ = static_cast<std::atomic<uint64_t>*>(m);
}

LockTable::~LockTable() { ::munmap(words_, bytes_); }

uint64_t LockTable::dram_bytes() const {
  const size_t pages = bytes_ / 4096;
  std::vector<unsigned char> resident(pages);
  if (::mincore(words_, bytes_, resident.data()) != 0) return 0;
  uint64_t n = 0;
  for (unsigned char r : resident) n += r & 1;
  return n * 4096;
}

}  // namespace nvindex
