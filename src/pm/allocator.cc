// Allocator: crash-safe fixed-size block allocator (DESIGN.md §3
// "Allocator"; the protocol and crash argument are in allocator.h).
//
// On-media format: the fixed fields (struct Meta, its byte table above it
// below) at pool offset 128, then the chunk table at 4096 (one byte per
// chunk: bit 7 the arena, bits 0..6 the kind: 0 = unassigned, c in 1..11 =
// serves 64 << (c-1) B blocks, 12 = first chunk of an extent, 13 = further
// chunk of one; allocator.h), then the chunks from the heap offset H (a
// multiple of the chunk size): chunk i at H + i * 65536.
//
// The fixed fields are written once by format(), before the pool magic, so a
// pool that open() accepts always has them. Only the chunk table changes
// afterwards, one byte at a time.
//
// DRAM state, shared by the two arenas (Chunks): the table's address, the
// lowest chunk that may be unassigned, each extent's length in chunks. Per
// arena (HeapState): per small class a mutex-protected global free list;
// per thread and per allocator generation a cache of free blocks per class
// (refilled and spilled 32 blocks at a time); free extents by length; a
// live-bytes counter. None of it is persistent: recovery rebuilds it from
// the chunk table and the blocks the owner marks as reachable.
#include "nvindex/pm/allocator.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
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

/// Small class index 0..10 for a request of 1..65536 bytes (64 << index >= size).
inline uint32_t class_of(uint32_t size) {
  const uint32_t s = size < Allocator::kMinBlock ? Allocator::kMinBlock : size;
  return static_cast<uint32_t>(std::bit_width(s - 1)) - 6;
}
inline uint32_t class_bytes(uint32_t cls) { return Allocator::kMinBlock << cls; }

/// Chunk table entry: bit 7 the arena, bits 0..6 the kind.
constexpr uint8_t kArenaBit = 0x80;
constexpr uint8_t kKindMask = 0x7f;
constexpr uint8_t kExtentHead = Allocator::kSmallClasses + 1;  // 12
constexpr uint8_t kExtentMore = Allocator::kSmallClasses + 2;  // 13
inline uint8_t kind_of(uint8_t t) { return t & kKindMask; }
inline bool is_small(uint8_t kind) { return kind >= 1 && kind <= Allocator::kSmallClasses; }

/// What the two arenas of a pool share: the chunk table and its DRAM
/// mirror of extent lengths. `mu` guards the assignment of chunks (the
/// table's zero entries, `low`, `extent_len` of new extents).
struct Chunks {
  Pool* pool = nullptr;
  uint8_t* table = nullptr;  ///< the chunk table, in PM
  uint64_t chunk_count = 0;
  uint64_t heap_offset = 0;
  std::mutex mu;
  uint64_t low = 0;  ///< every chunk below is assigned
  /// At the first chunk of an extent: its length in chunks; 0 elsewhere.
  /// Written under `mu` before the extent is handed out.
  std::vector<uint32_t> extent_len;

  uint64_t chunk_offset(uint64_t chunk) const {
    return heap_offset + chunk * Allocator::kChunkSize;
  }

  /// Assigns the first run of `n` unassigned chunks at or above `low` to
  /// table entry `first` (then `more` for the rest): the first entry is
  /// stored and persisted, then the others stored and persisted. Crash
  /// argument: nothing in the run is handed out before both persists
  /// return; a crash before the first persist leaves the run unassigned, a
  /// crash between them (or within the second, whose lines may persist in
  /// any order) a shorter extent starting at the run, free, followed by
  /// unassigned entries and orphan further-chunk entries, which attach()
  /// clears. Returns the first chunk, or UINT64_MAX when no run is long
  /// enough. Caller holds `mu`.
  uint64_t assign(uint64_t n, uint8_t first, uint8_t more) {
    uint64_t run = 0, first_zero = UINT64_MAX, start = UINT64_MAX;
    for (uint64_t i = low; i < chunk_count; ++i) {
      if (table[i] != 0) {
        run = 0;
        continue;
      }
      if (first_zero == UINT64_MAX) first_zero = i;
      if (++run == n) {
        start = i + 1 - n;
        break;
      }
    }
    if (start == UINT64_MAX) {
      if (first_zero != UINT64_MAX) low = first_zero;
      return UINT64_MAX;
    }
    store(&table[start], first);
    persist(&table[start], 1, {n == 1 ? "allocator.chunk_class" : "allocator.extent_first"});
    if (n > 1) {
      for (uint64_t i = start + 1; i < start + n; ++i) store(&table[i], more);
      persist(&table[start + 1], n - 1, {"allocator.extent_chunks"});
      extent_len[start] = static_cast<uint32_t>(n);
    }
    low = first_zero == start ? start + n : first_zero;
    return start;
  }
};

/// One arena's allocator state; Allocator::Impl is this type (named outside
/// the class so that the thread caches below can refer to it).
struct HeapState {
  std::shared_ptr<Chunks> chunks;
  Pool* pool = nullptr;
  uint8_t arena_bit = 0;  ///< 0 or kArenaBit
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
  ClassList lists[Allocator::kSmallClasses];

  std::mutex extent_mu;
  std::map<uint32_t, std::vector<uint64_t>> extents;  ///< free extents by length in chunks

  // Recovery pass only: mark bitmap of each chunk of the arena.
  std::vector<uint64_t> mark_word;  ///< chunk -> first word in marks, or kNoMarks
  std::unique_ptr<std::atomic<uint64_t>[]> marks;
  static constexpr uint64_t kNoMarks = UINT64_MAX;

  /// Table entry of this arena for `kind`.
  uint8_t entry(uint8_t kind) const { return static_cast<uint8_t>(kind | arena_bit); }
  /// True when table entry `t` is a chunk of this arena (assigned).
  bool mine(uint8_t t) const { return t != 0 && (t & kArenaBit) == arena_bit; }

  /// Bytes of this arena's block starting at `off`, or 0; *cls is its small
  /// class, or -1 for an extent.
  uint64_t block_at(uint64_t off, int* cls) const {
    const Chunks& c = *chunks;
    if (off < c.heap_offset) return 0;
    const uint64_t rel = off - c.heap_offset;
    const uint64_t chunk = rel / Allocator::kChunkSize;
    if (chunk >= c.chunk_count) return 0;
    const uint8_t t = c.table[chunk];
    if (!mine(t)) return 0;
    const uint8_t k = kind_of(t);
    if (is_small(k)) {
      if (rel % class_bytes(k - 1u) != 0) return 0;
      *cls = k - 1;
      return class_bytes(k - 1u);
    }
    if (k != kExtentHead || rel % Allocator::kChunkSize != 0) return 0;
    *cls = -1;
    return uint64_t{c.extent_len[chunk]} * Allocator::kChunkSize;
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
  std::vector<uint64_t> lists[Allocator::kSmallClasses];
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
      for (uint32_t c = 0; c < Allocator::kSmallClasses; ++c) {
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

Status Allocator::attach(Pool* pool, bool fresh, std::unique_ptr<Allocator>* index,
                         std::unique_ptr<Allocator>* items) {
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
  auto c = std::make_shared<Chunks>();
  c->pool = pool;
  c->table = reinterpret_cast<uint8_t*>(pool->base() + kTableOffset);
  c->chunk_count = m.chunk_count;
  c->heap_offset = m.heap_offset;
  c->extent_len.assign(c->chunk_count, 0);
  // Every entry is checked before anything is written; an extent's length
  // is its first chunk and the run of further-chunk entries of its arena
  // after it. Orphans: a further-chunk entry after no extent of its arena,
  // and an extent of one chunk (every extent handed out has two or more:
  // one chunk is a crash between its first entry's persist and the rest's).
  std::vector<uint64_t> orphans;
  uint64_t head = UINT64_MAX;  // the extent the previous chunk belongs to
  for (uint64_t i = 0; i < c->chunk_count; ++i) {
    const uint8_t t = c->table[i];
    const uint8_t k = kind_of(t);
    if (k > kExtentMore || t == kArenaBit) {
      return Status::Corruption(where + ": chunk table entry " + std::to_string(i) +
                                " names unknown size class " + std::to_string(t));
    }
    if (k == kExtentHead) {
      if (head != UINT64_MAX && c->extent_len[head] == 1) orphans.push_back(head);
      head = i;
      c->extent_len[i] = 1;
    } else if (k == kExtentMore && head != UINT64_MAX &&
               (c->table[head] & kArenaBit) == (t & kArenaBit)) {
      ++c->extent_len[head];
    } else {
      if (k == kExtentMore) orphans.push_back(i);
      if (head != UINT64_MAX && c->extent_len[head] == 1) orphans.push_back(head);
      head = UINT64_MAX;
    }
  }
  if (head != UINT64_MAX && c->extent_len[head] == 1) orphans.push_back(head);
  for (uint64_t i : orphans) c->extent_len[i] = 0;
  if (!fresh) {
    // Crash residue of an extent's assignment (Chunks::assign): cleared,
    // one byte each, so no later extent in front of them absorbs them.
    for (uint64_t i : orphans) {
      store(&c->table[i], uint8_t{0});
      flush(&c->table[i], 1, {"allocator.attach.orphans"});
    }
    if (!orphans.empty()) fence({"allocator.attach.orphans"});
  }
  for (uint64_t i = 0; i < c->chunk_count; ++i) {
    if (c->table[i] == 0) {
      c->low = i;
      break;
    }
    c->low = i + 1;
  }
  for (int arena = 0; arena < 2; ++arena) {
    std::unique_ptr<Allocator> a(new Allocator);
    a->impl_ = std::make_unique<Impl>();
    Impl& h = *a->impl_;
    h.chunks = c;
    h.pool = pool;
    h.arena_bit = arena == 0 ? 0 : kArenaBit;
    new_key(&h);
    // A fresh pool has no blocks in use; an opened one must be recovered first.
    h.ready.store(fresh, std::memory_order_release);
    *(arena == 0 ? index : items) = std::move(a);
  }
  return Status::Ok();
}

Allocator::~Allocator() {
  if (impl_ != nullptr) retire_key(impl_.get());
}

Status Allocator::allocate(uint32_t size, uint64_t* off) {
  if (size == 0 || size > kMaxExtent) {
    return Status::InvalidArgument("allocation of " + std::to_string(size) +
                                   " bytes: size must be 1.." + std::to_string(kMaxExtent));
  }
  Impl& h = *impl_;
  Chunks& c = *h.chunks;
  if (!h.ready.load(std::memory_order_acquire)) {
    return Status::Busy("the allocator of " + h.pool->path() +
                        " needs recovery first (begin_recovery, mark_reachable, end_recovery)");
  }
  auto full = [&](const std::string& what) {
    return Status::OutOfSpace("pool " + h.pool->path() + " is full: " + what + " (heap " +
                              std::to_string(heap_bytes()) + " bytes, " +
                              std::to_string(bytes_in_use()) + " bytes in use in this arena, " +
                              std::to_string(unassigned_bytes()) + " unassigned)");
  };
  if (size > kMaxSmallBlock) {
    const uint32_t n = static_cast<uint32_t>((size + kChunkSize - 1) / kChunkSize);
    std::lock_guard<std::mutex> el(h.extent_mu);
    auto it = h.extents.find(n);
    if (it == h.extents.end()) {
      uint64_t chunk = 0;
      {
        std::lock_guard<std::mutex> cl(c.mu);
        chunk = c.assign(n, h.entry(kExtentHead), h.entry(kExtentMore));
      }
      if (chunk != UINT64_MAX) {
        *off = c.chunk_offset(chunk);
        h.live_bytes.fetch_add(uint64_t{n} * kChunkSize, std::memory_order_relaxed);
        bump(thread_counters().allocs);
        return Status::Ok();
      }
      it = h.extents.lower_bound(n);  // a longer free extent, the shortest
      if (it == h.extents.end()) {
        return full("no free extent of " + std::to_string(n) + " chunks and no run of " +
                    std::to_string(n) + " unassigned 64 KiB chunks");
      }
    }
    *off = it->second.back();
    it->second.pop_back();
    h.live_bytes.fetch_add(uint64_t{it->first} * kChunkSize, std::memory_order_relaxed);
    if (it->second.empty()) h.extents.erase(it);
    bump(thread_counters().allocs);
    return Status::Ok();
  }
  const uint32_t cls = class_of(size);
  CacheEntry* e = t_cache.get(h.cache_key.load(std::memory_order_acquire));
  std::vector<uint64_t>& mine = e->lists[cls];
  if (mine.empty()) {
    HeapState::ClassList& global = h.lists[cls];
    std::lock_guard<std::mutex> lock(global.mu);
    if (global.blocks.empty()) {
      // Assign a new chunk to this class (Chunks::assign: its table byte is
      // persisted before any block of it leaves this function, so every
      // block ever handed out lies in a chunk whose class is durable; a
      // crash after the persist and before any publication leaves a chunk
      // whose blocks are all unreachable, and recovery frees them).
      uint64_t chunk = 0;
      {
        std::lock_guard<std::mutex> cl(c.mu);
        chunk = c.assign(1, h.entry(static_cast<uint8_t>(cls + 1)), 0);
      }
      if (chunk == UINT64_MAX) {
        return full("no free " + std::to_string(class_bytes(cls)) +
                    "-byte block and no unassigned " + std::to_string(kChunkSize / 1024) +
                    " KiB chunk");
      }
      const uint64_t start = c.chunk_offset(chunk);
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
  int cls = 0;
  const uint64_t bytes = h.block_at(off, &cls);
  if (bytes == 0) die("free() of an offset that is not the start of a block", off);
  if (cls < 0) {
    std::lock_guard<std::mutex> el(h.extent_mu);
    h.extents[static_cast<uint32_t>(bytes / kChunkSize)].push_back(off);
  } else {
    CacheEntry* e = t_cache.get(h.cache_key.load(std::memory_order_acquire));
    std::vector<uint64_t>& mine = e->lists[cls];
    mine.push_back(off);
    if (mine.size() > kCacheMax) {
      HeapState::ClassList& global = h.lists[cls];
      std::lock_guard<std::mutex> lock(global.mu);
      move_blocks(&mine, &global.blocks, kBatch);
    }
  }
  h.live_bytes.fetch_sub(bytes, std::memory_order_relaxed);
  bump(thread_counters().frees);
}

uint32_t Allocator::block_size(uint64_t off) const {
  int cls = 0;
  return static_cast<uint32_t>(impl_->block_at(off, &cls));
}

void Allocator::begin_recovery() {
  Impl& h = *impl_;
  Chunks& c = *h.chunks;
  h.ready.store(false, std::memory_order_release);
  // A new generation: blocks in any thread's cache are forgotten (the pass
  // decides afresh which blocks are free).
  new_key(&h);
  for (auto& l : h.lists) {
    std::lock_guard<std::mutex> lock(l.mu);
    l.blocks.clear();
  }
  {
    std::lock_guard<std::mutex> el(h.extent_mu);
    h.extents.clear();
  }
  std::lock_guard<std::mutex> cl(c.mu);  // the other arena may assign chunks meanwhile
  h.mark_word.assign(c.chunk_count, HeapState::kNoMarks);
  uint64_t words = 0;
  for (uint64_t i = 0; i < c.chunk_count; ++i) {
    const uint8_t t = c.table[i];
    if (!h.mine(t)) continue;
    const uint8_t k = kind_of(t);
    if (is_small(k)) {
      h.mark_word[i] = words;
      words += mark_words(class_bytes(k - 1u));
    } else if (k == kExtentHead) {
      h.mark_word[i] = words++;
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
  int cls = 0;
  const uint64_t bytes = h.block_at(off, &cls);
  if (bytes == 0) {
    return Status::Corruption("reachable offset " + std::to_string(off) + " in " + h.pool->path() +
                              " is not the start of a block in an assigned chunk" +
                              (h.arena_bit != 0 ? " of the item arena" : ""));
  }
  const Chunks& c = *h.chunks;
  const uint64_t rel = off - c.heap_offset;
  const uint64_t chunk = rel / kChunkSize;
  const uint64_t bit = cls < 0 ? 0 : (rel % kChunkSize) / bytes;
  std::atomic<uint64_t>& word = h.marks[h.mark_word[chunk] + bit / 64];
  const uint64_t mask = uint64_t{1} << (bit % 64);
  if (word.fetch_or(mask, std::memory_order_relaxed) & mask) {
    return Status::Corruption("block at offset " + std::to_string(off) + " (" +
                              std::to_string(bytes) + " bytes) in " + h.pool->path() +
                              " is reachable twice (owned twice)");
  }
  h.live_bytes.fetch_add(bytes, std::memory_order_relaxed);
  return Status::Ok();
}

std::vector<uint64_t> Allocator::unmarked_blocks(uint32_t size) const {
  const Impl& h = *impl_;
  const Chunks& c = *h.chunks;
  std::vector<uint64_t> out;
  if (!h.recovering.load(std::memory_order_acquire) || size == 0 || size > kMaxSmallBlock) {
    return out;
  }
  const uint32_t want = class_of(size);
  for (uint64_t i = 0; i < c.chunk_count; ++i) {
    const uint64_t first = h.mark_word[i];
    if (first == HeapState::kNoMarks || kind_of(c.table[i]) != want + 1) continue;
    const uint32_t bs = class_bytes(want);
    const uint64_t start = c.chunk_offset(i);
    for (uint64_t b = 0; b < kChunkSize / bs; ++b) {
      const uint64_t w = h.marks[first + b / 64].load(std::memory_order_relaxed);
      if (!(w & (uint64_t{1} << (b % 64)))) out.push_back(start + b * bs);
    }
  }
  return out;
}

Allocator::RecoveryStats Allocator::end_recovery() {
  Impl& h = *impl_;
  const Chunks& c = *h.chunks;
  RecoveryStats st;
  if (!h.recovering.load(std::memory_order_acquire)) return st;  // no pass in progress
  // The arena's chunks are those begin_recovery() gave marks: none of them
  // changed since (only this arena assigns its chunks, and it is in recovery).
  for (uint64_t i = 0; i < c.chunk_count; ++i) {
    const uint64_t first = h.mark_word[i];
    if (first == HeapState::kNoMarks) continue;
    const uint8_t k = kind_of(c.table[i]);
    const uint64_t start = c.chunk_offset(i);
    ++st.chunks;
    if (k == kExtentHead) {
      if (h.marks[first].load(std::memory_order_relaxed) & 1) {
        ++st.reachable_blocks;
      } else {
        h.extents[c.extent_len[i]].push_back(start);  // no concurrent use during recovery
        ++st.reclaimed_blocks;
      }
      continue;
    }
    const uint32_t cls = k - 1u;
    const uint32_t bs = class_bytes(cls);
    std::vector<uint64_t>& global = h.lists[cls].blocks;  // no concurrent use during recovery
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
  for (auto& [n, v] : h.extents) std::reverse(v.begin(), v.end());
  h.marks.reset();
  h.mark_word.clear();
  h.mark_word.shrink_to_fit();
  h.recovering.store(false, std::memory_order_release);
  h.ready.store(true, std::memory_order_release);
  return st;
}

bool Allocator::ready() const { return impl_->ready.load(std::memory_order_acquire); }
bool Allocator::recovering() const { return impl_->recovering.load(std::memory_order_acquire); }

uint64_t Allocator::bytes_in_use() const {
  return impl_->live_bytes.load(std::memory_order_relaxed);
}

uint64_t Allocator::heap_bytes() const { return impl_->chunks->chunk_count * kChunkSize; }

uint64_t Allocator::unassigned_bytes() const {
  Chunks& c = *impl_->chunks;
  std::lock_guard<std::mutex> cl(c.mu);
  uint64_t n = 0;
  for (uint64_t i = c.low; i < c.chunk_count; ++i) n += c.table[i] == 0 ? 1 : 0;
  return n * kChunkSize;
}

Allocator::Arena Allocator::arena() const {
  return impl_->arena_bit == 0 ? Arena::kIndex : Arena::kItems;
}

}  // namespace nvindex::pm
