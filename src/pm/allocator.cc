// Allocator: crash-safe fixed-size block allocator (DESIGN.md §3
// "Allocator"; the protocol and crash argument are in allocator.h).
//
// On-media format: the fixed fields (struct Meta, its byte table above it
// below) at pool offset 128, then the chunk table at 4096 (one byte per
// chunk: 0 = unassigned, c = serves 64 << (c-1) B blocks), then the chunks
// from the heap offset H (a multiple of the chunk size): chunk i at
// H + i * 65536.
//
// The fixed fields are written once by format(), before the pool magic, so a
// pool that open() accepts always has them. Only the chunk table changes
// afterwards, one byte at a time.
//
// DRAM state: per class a mutex-protected global free list; per thread and
// per allocator generation a cache of free blocks per class (refilled and
// spilled 32 blocks at a time); the stack of unassigned chunks; a live-bytes
// counter. None of it is persistent: recovery rebuilds it from the chunk table
// and the blocks the index marks as reachable.
#include "nvindex/pm/allocator.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "nvindex/pm/counters.h"
#include "nvindex/pm/persist.h"
#include "nvindex/pm/pool.h"

namespace nvindex::pm {

namespace alloc_detail {

constexpr uint64_t kMetaOffset = 128;
constexpr uint64_t kTableOffset = kPoolHeaderBytes;
constexpr char kAllocMagic[8] = {'N', 'V', 'A', 'L', 'L', 'O', 'C', '\0'};
/// Blocks moved between a thread cache and the global list at a time.
constexpr size_t kBatch = 32;
/// A thread cache holding more than this many blocks of a class spills kBatch.
constexpr size_t kCacheMax = 2 * kBatch;
/// Mark bitmap words for a chunk of `bs`-byte blocks: one bit per block, so
/// 16 words (128 B) for 64 B blocks down to 1 word for 2 KiB and 4 KiB blocks.
constexpr uint64_t mark_words(uint32_t bs) { return (Allocator::kChunkSize / bs + 63) / 64; }

/// The fixed fields at pool offset 128 (offsets below are from the pool
/// base; written once by format()):
///
///   offset  size  field
///   ------  ----  --------------------------------------------
///      128     8  allocator magic "NVALLOC\0"
///      136     8  chunk size, bytes (65536)
///      144     8  chunk table offset (4096)
///      152     8  chunk count N
///      160     8  heap offset H (a multiple of the chunk size)
struct Meta {
  char magic[8];
  uint64_t chunk_size;
  uint64_t table_offset;
  uint64_t chunk_count;
  uint64_t heap_offset;
};
static_assert(kMetaOffset == 128);
static_assert(offsetof(Meta, magic) == 0);          // 128
static_assert(offsetof(Meta, chunk_size) == 8);     // 136
static_assert(offsetof(Meta, table_offset) == 16);  // 144
static_assert(offsetof(Meta, chunk_count) == 24);   // 152
static_assert(offsetof(Meta, heap_offset) == 32);   // 160
static_assert(sizeof(Meta) == 40 && kMetaOffset + sizeof(Meta) <= kTableOffset);

/// Chunk count and heap offset for a pool of `pool_size` bytes: the largest N
/// such that the table [4096, 4096+N) and N chunks after it fit.
void compute_layout(uint64_t pool_size, uint64_t* chunk_count, uint64_t* heap_offset) {
  const uint64_t k = Allocator::kChunkSize;
  const uint64_t n0 = pool_size / k;
  const uint64_t heap = (kTableOffset + n0 + k - 1) / k * k;
  *heap_offset = heap;
  *chunk_count = pool_size > heap ? (pool_size - heap) / k : 0;
}

/// Class index 0..6 for a request of 1..4096 bytes (64 << index >= size).
inline uint32_t class_of(uint32_t size) {
  const uint32_t s = size < Allocator::kMinBlock ? Allocator::kMinBlock : size;
  return static_cast<uint32_t>(std::bit_width(s - 1)) - 6;
}
inline uint32_t class_bytes(uint32_t cls) { return Allocator::kMinBlock << cls; }

/// The allocator's state; Allocator::Impl is this type (named outside the
/// class so that the thread caches below can refer to it).
struct HeapState {
  Pool* pool = nullptr;
  char* base = nullptr;
  uint8_t* table = nullptr;  ///< the chunk table, in PM
  uint64_t chunk_count = 0;
  uint64_t heap_offset = 0;
  /// Key of this allocator's thread-cache entries. Unique in the process and
  /// never reused; replaced by begin_recovery() so that blocks cached before
  /// recovery are never handed out after it.
  std::atomic<uint64_t> cache_key{0};
  std::atomic<bool> ready{false};  ///< allocate() allowed
  std::atomic<bool> recovering{false};
  std::atomic<uint64_t> live_bytes{0};

  struct ClassList {
    std::mutex mu;
    std::vector<uint64_t> blocks;  ///< free block offsets; back() is handed out first
  };
  ClassList lists[Allocator::kClasses];

  std::mutex chunk_mu;
  std::vector<uint32_t> unassigned;  ///< unassigned chunk indexes; back() is the lowest

  // Recovery pass only: mark bitmap of each assigned chunk.
  std::vector<uint64_t> mark_word;  ///< chunk -> first word in marks, or kNoMarks
  std::unique_ptr<std::atomic<uint64_t>[]> marks;
  static constexpr uint64_t kNoMarks = UINT64_MAX;

  uint64_t chunk_offset(uint64_t chunk) const {
    return heap_offset + chunk * Allocator::kChunkSize;
  }
  /// Class index of the block starting at `off`, or -1.
  int class_at(uint64_t off) const {
    if (off < heap_offset) return -1;
    const uint64_t rel = off - heap_offset;
    const uint64_t chunk = rel / Allocator::kChunkSize;
    if (chunk >= chunk_count) return -1;
    const uint8_t t = table[chunk];
    if (t == 0 || t > Allocator::kClasses) return -1;
    if (rel % class_bytes(t - 1u) != 0) return -1;
    return t - 1;
  }
};

/// Keys of live allocator generations -> their state. Never destroyed (thread
/// caches of exiting threads consult it, possibly during static destruction).
struct LiveRegistry {
  std::mutex mu;
  std::unordered_map<uint64_t, HeapState*> live;
  uint64_t next_key = 1;
};
LiveRegistry& registry() {
  static LiveRegistry* r = new LiveRegistry;
  return *r;
}

uint64_t new_key(HeapState* h) {
  LiveRegistry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  const uint64_t old = h->cache_key.load(std::memory_order_relaxed);
  if (old != 0) r.live.erase(old);
  const uint64_t key = r.next_key++;
  r.live.emplace(key, h);
  h->cache_key.store(key, std::memory_order_release);
  return key;
}

void retire_key(HeapState* h) {
  LiveRegistry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.live.erase(h->cache_key.load(std::memory_order_relaxed));
}

/// Moves up to n blocks from the back of `from` to `to`.
void move_blocks(std::vector<uint64_t>* from, std::vector<uint64_t>* to, size_t n) {
  n = std::min(n, from->size());
  to->insert(to->end(), from->end() - static_cast<ptrdiff_t>(n), from->end());
  from->resize(from->size() - n);
}

/// One thread's free blocks of one allocator generation.
struct CacheEntry {
  uint64_t key = 0;
  std::vector<uint64_t> lists[Allocator::kClasses];
};

/// A thread's caches of every allocator it used. On thread exit, blocks of
/// live generations go back to their global lists (no leak while the pool
/// stays open); blocks of dead ones are dropped.
struct ThreadCache {
  std::vector<std::unique_ptr<CacheEntry>> entries;
  CacheEntry* last = nullptr;

  ~ThreadCache() {
    LiveRegistry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);  // keeps every live allocator alive meanwhile
    for (auto& e : entries) {
      auto it = r.live.find(e->key);
      if (it == r.live.end()) continue;
      for (uint32_t c = 0; c < Allocator::kClasses; ++c) {
        std::lock_guard<std::mutex> l(it->second->lists[c].mu);
        move_blocks(&e->lists[c], &it->second->lists[c].blocks, e->lists[c].size());
      }
    }
  }

  CacheEntry* get(uint64_t key) {
    if (last != nullptr && last->key == key) return last;
    for (auto& e : entries) {
      if (e->key == key) return last = e.get();
    }
    {
      // First use of this generation by this thread: drop entries of dead
      // generations first, so the cache does not grow with every pool.
      LiveRegistry& r = registry();
      std::lock_guard<std::mutex> lock(r.mu);
      std::erase_if(entries, [&](const std::unique_ptr<CacheEntry>& e) {
        return r.live.find(e->key) == r.live.end();
      });
    }
    entries.push_back(std::make_unique<CacheEntry>());
    entries.back()->key = key;
    return last = entries.back().get();
  }
};

thread_local ThreadCache t_cache;

[[noreturn]] void die(const char* what, uint64_t off) {
  std::fprintf(stderr, "nvindex allocator: %s (offset %llu)\n", what,
               static_cast<unsigned long long>(off));
  std::abort();
}

}  // namespace alloc_detail

using namespace alloc_detail;

struct Allocator::Impl : HeapState {};

Status Allocator::format(Pool* pool) {
  uint64_t chunk_count = 0, heap_offset = 0;
  compute_layout(pool->size(), &chunk_count, &heap_offset);
  if (chunk_count == 0) {
    return Status::InvalidArgument("pool of " + std::to_string(pool->size()) +
                                   " bytes has no room for a 64 KiB allocator chunk");
  }
  Meta m{};
  std::memcpy(m.magic, kAllocMagic, sizeof(m.magic));
  m.chunk_size = kChunkSize;
  m.table_offset = kTableOffset;
  m.chunk_count = chunk_count;
  m.heap_offset = heap_offset;
  char* base = pool->base();
  // Crash argument: these bytes are persisted before the pool magic (see
  // Pool::create), so a crash here leaves a file open() rejects.
  copy(base + kMetaOffset, &m, sizeof(m));
  fill(base + kTableOffset, 0, chunk_count);
  persist(base + kMetaOffset, sizeof(m), {"allocator.format"});
  persist(base + kTableOffset, chunk_count, {"allocator.format"});
  return Status::Ok();
}

Status Allocator::attach(Pool* pool, bool fresh, std::unique_ptr<Allocator>* out) {
  Meta m;
  std::memcpy(&m, pool->base() + kMetaOffset, sizeof(m));
  const std::string where = "allocator metadata of " + pool->path();
  if (std::memcmp(m.magic, kAllocMagic, sizeof(m.magic)) != 0) {
    return Status::Corruption(where + ": bad allocator magic");
  }
  uint64_t want_count = 0, want_heap = 0;
  compute_layout(pool->size(), &want_count, &want_heap);
  if (m.chunk_size != kChunkSize || m.table_offset != kTableOffset || m.chunk_count != want_count ||
      m.heap_offset != want_heap) {
    return Status::Corruption(where + ": chunk size " + std::to_string(m.chunk_size) +
                              ", table at " + std::to_string(m.table_offset) + ", " +
                              std::to_string(m.chunk_count) + " chunks, heap at " +
                              std::to_string(m.heap_offset) + " do not match a pool of " +
                              std::to_string(pool->size()) + " bytes");
  }
  std::unique_ptr<Allocator> a(new Allocator);
  a->impl_ = std::make_unique<Impl>();
  Impl& h = *a->impl_;
  h.pool = pool;
  h.base = pool->base();
  h.table = reinterpret_cast<uint8_t*>(pool->base() + kTableOffset);
  h.chunk_count = m.chunk_count;
  h.heap_offset = m.heap_offset;
  for (uint64_t i = h.chunk_count; i-- > 0;) {
    const uint8_t t = h.table[i];
    if (t > kClasses) {
      return Status::Corruption(where + ": chunk table entry " + std::to_string(i) +
                                " names unknown size class " + std::to_string(t));
    }
    if (t == 0) h.unassigned.push_back(static_cast<uint32_t>(i));
  }
  new_key(&h);
  // A fresh pool has no blocks in use; an opened one must be recovered first.
  h.ready.store(fresh, std::memory_order_release);
  *out = std::move(a);
  return Status::Ok();
}

Allocator::~Allocator() {
  if (impl_ != nullptr) retire_key(impl_.get());
}

Status Allocator::allocate(uint32_t size, uint64_t* off) {
  if (size == 0 || size > kMaxBlock) {
    return Status::InvalidArgument("allocation of " + std::to_string(size) +
                                   " bytes: size must be 1.." + std::to_string(kMaxBlock));
  }
  Impl& h = *impl_;
  if (!h.ready.load(std::memory_order_acquire)) {
    return Status::Busy("the allocator of " + h.pool->path() +
                        " needs recovery first (begin_recovery, mark_reachable, end_recovery)");
  }
  const uint32_t cls = class_of(size);
  CacheEntry* e = t_cache.get(h.cache_key.load(std::memory_order_acquire));
  std::vector<uint64_t>& mine = e->lists[cls];
  if (mine.empty()) {
    HeapState::ClassList& global = h.lists[cls];
    std::lock_guard<std::mutex> lock(global.mu);
    if (global.blocks.empty()) {
      // Assign a new chunk to this class. Crash argument: the table byte is
      // stored (one byte: never torn) and persisted before any block of the
      // chunk leaves this function, so every block ever handed out lies in a
      // chunk whose class is durable; a crash after the persist and before
      // any publication leaves a chunk whose blocks are all unreachable, and
      // recovery puts them on the free list of that class.
      uint32_t chunk = 0;
      {
        std::lock_guard<std::mutex> cl(h.chunk_mu);
        if (h.unassigned.empty()) {
          return Status::OutOfSpace(
              "pool " + h.pool->path() + " is full: no free " + std::to_string(class_bytes(cls)) +
              "-byte block and no unassigned " + std::to_string(kChunkSize / 1024) +
              " KiB chunk (heap " + std::to_string(heap_bytes()) + " bytes, " +
              std::to_string(bytes_in_use()) + " bytes in use)");
        }
        chunk = h.unassigned.back();
        h.unassigned.pop_back();
        store(&h.table[chunk], static_cast<uint8_t>(cls + 1));
        persist(&h.table[chunk], 1, {"allocator.chunk_class"});
      }
      const uint64_t start = h.chunk_offset(chunk);
      const uint32_t bs = class_bytes(cls);
      for (uint64_t b = kChunkSize / bs; b-- > 0;) global.blocks.push_back(start + b * bs);
    }
    move_blocks(&global.blocks, &mine, kBatch);
  }
  *off = mine.back();
  mine.pop_back();
  h.live_bytes.fetch_add(class_bytes(cls), std::memory_order_relaxed);
  bump(thread_counters().allocs);
  return Status::Ok();
}

void Allocator::free(uint64_t off) {
  Impl& h = *impl_;
  if (!h.ready.load(std::memory_order_acquire)) die("free() during recovery", off);
  const int cls = h.class_at(off);
  if (cls < 0) die("free() of an offset that is not the start of a block", off);
  CacheEntry* e = t_cache.get(h.cache_key.load(std::memory_order_acquire));
  std::vector<uint64_t>& mine = e->lists[cls];
  mine.push_back(off);
  if (mine.size() > kCacheMax) {
    HeapState::ClassList& global = h.lists[cls];
    std::lock_guard<std::mutex> lock(global.mu);
    move_blocks(&mine, &global.blocks, kBatch);
  }
  h.live_bytes.fetch_sub(class_bytes(static_cast<uint32_t>(cls)), std::memory_order_relaxed);
  bump(thread_counters().frees);
}

uint32_t Allocator::block_size(uint64_t off) const {
  const int cls = impl_->class_at(off);
  return cls < 0 ? 0 : class_bytes(static_cast<uint32_t>(cls));
}

void Allocator::begin_recovery() {
  Impl& h = *impl_;
  h.ready.store(false, std::memory_order_release);
  // A new generation: blocks in any thread's cache are forgotten (the pass
  // decides afresh which blocks are free).
  new_key(&h);
  for (auto& l : h.lists) {
    std::lock_guard<std::mutex> lock(l.mu);
    l.blocks.clear();
  }
  std::lock_guard<std::mutex> cl(h.chunk_mu);
  h.unassigned.clear();
  h.mark_word.assign(h.chunk_count, HeapState::kNoMarks);
  uint64_t words = 0;
  for (uint64_t i = h.chunk_count; i-- > 0;) {
    if (h.table[i] == 0) {
      h.unassigned.push_back(static_cast<uint32_t>(i));
    } else {
      h.mark_word[i] = words;
      words += mark_words(class_bytes(h.table[i] - 1u));
    }
  }
  h.marks = std::make_unique<std::atomic<uint64_t>[]>(words);  // zeroed
  h.live_bytes.store(0, std::memory_order_relaxed);
  h.recovering.store(true, std::memory_order_release);
}

Status Allocator::mark_reachable(uint64_t off) {
  Impl& h = *impl_;
  if (!h.recovering.load(std::memory_order_acquire)) {
    return Status::InvalidArgument("mark_reachable(" + std::to_string(off) +
                                   ") outside a recovery pass (call begin_recovery first)");
  }
  const int cls = h.class_at(off);
  if (cls < 0) {
    return Status::Corruption("reachable offset " + std::to_string(off) + " in " + h.pool->path() +
                              " is not the start of a block in an assigned chunk");
  }
  const uint64_t rel = off - h.heap_offset;
  const uint64_t chunk = rel / kChunkSize;
  const uint32_t bs = class_bytes(static_cast<uint32_t>(cls));
  const uint64_t bit = (rel % kChunkSize) / bs;
  std::atomic<uint64_t>& word = h.marks[h.mark_word[chunk] + bit / 64];
  const uint64_t mask = uint64_t{1} << (bit % 64);
  if (word.fetch_or(mask, std::memory_order_relaxed) & mask) {
    return Status::Corruption("block at offset " + std::to_string(off) + " (" + std::to_string(bs) +
                              " bytes) in " + h.pool->path() + " is reachable twice (owned twice)");
  }
  h.live_bytes.fetch_add(bs, std::memory_order_relaxed);
  return Status::Ok();
}

bool Allocator::ready() const { return impl_->ready.load(std::memory_order_acquire); }
bool Allocator::recovering() const { return impl_->recovering.load(std::memory_order_acquire); }

std::vector<uint64_t> Allocator::unmarked_blocks(uint32_t size) const {
  const Impl& h = *impl_;
  std::vector<uint64_t> out;
  if (!h.recovering.load(std::memory_order_acquire) || size == 0 || size > kMaxBlock) return out;
  const uint32_t want = class_of(size);
  for (uint64_t i = 0; i < h.chunk_count; ++i) {
    const uint64_t first = h.mark_word[i];
    if (first == HeapState::kNoMarks || h.table[i] - 1u != want) continue;
    const uint32_t bs = class_bytes(want);
    const uint64_t start = h.chunk_offset(i);
    for (uint64_t b = 0; b < kChunkSize / bs; ++b) {
      const uint64_t w = h.marks[first + b / 64].load(std::memory_order_relaxed);
      if (!(w & (uint64_t{1} << (b % 64)))) out.push_back(start + b * bs);
    }
  }
  return out;
}

Allocator::RecoveryStats Allocator::end_recovery() {
  Impl& h = *impl_;
  RecoveryStats st;
  if (!h.recovering.load(std::memory_order_acquire)) return st;  // no pass in progress
  for (uint64_t i = 0; i < h.chunk_count; ++i) {
    const uint64_t first = h.mark_word[i];
    if (first == HeapState::kNoMarks) continue;
    const uint32_t cls = h.table[i] - 1u;
    const uint32_t bs = class_bytes(cls);
    const uint64_t start = h.chunk_offset(i);
    std::vector<uint64_t>& global = h.lists[cls].blocks;  // no concurrent use during recovery
    ++st.chunks;
    for (uint64_t b = kChunkSize / bs; b-- > 0;) {
      const uint64_t w = h.marks[first + b / 64].load(std::memory_order_relaxed);
      if (w & (uint64_t{1} << (b % 64))) {
        ++st.reachable_blocks;
      } else {
        global.push_back(start + b * bs);
        ++st.reclaimed_blocks;
      }
    }
  }
  // Chunks are scanned in ascending order and each pushes its blocks in
  // descending order; reverse per class so that low offsets go out first.
  for (auto& l : h.lists) std::reverse(l.blocks.begin(), l.blocks.end());
  h.marks.reset();
  h.mark_word.clear();
  h.mark_word.shrink_to_fit();
  h.recovering.store(false, std::memory_order_release);
  h.ready.store(true, std::memory_order_release);
  return st;
}

uint64_t Allocator::bytes_in_use() const {
  return impl_->live_bytes.load(std::memory_order_relaxed);
}

uint64_t Allocator::heap_bytes() const { return impl_->chunk_count * kChunkSize; }

}  // namespace nvindex::pm
