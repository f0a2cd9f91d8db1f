// Pool: a mapped region of persistent memory (DESIGN.md §3), mapped with
// PMDK's libpmem2. Addressed by 8-byte offsets from the pool base, never raw
// pointers, so a pool may be mapped at any address. Offset 0 is the header,
// so offset 0 doubles as the null offset.
//
// On-media format of the header (the first 4096 bytes of the file):
//
//   offset size  field               written
//   ------ ----  ------------------  ----------------------------------------
//        0    8  magic "NVIDXPL\0"   once, at create
//        8    4  format version (1)  once
//       12    4  header bytes (4096) once
//       16   32  layout name, NUL-padded (the index name, e.g. "fastfair")
//       48    8  pool size, bytes    once
//       56    8  checksum: XXH64 (seed 0) of bytes [0, 56)
//   ---- line 1: mutable words, each written only by NAW, outside the checksum
//       64    8  root offset (0 = no root yet)
//       72    8  clean-shutdown flag (1 = closed cleanly, 0 = open or crashed)
//       80    8  close record: bytes in allocated blocks at the last clean
//                close (0 = no record)
//       88    8  close record: keys in the index at the last clean close,
//                plus one (0 = not recorded)
//       96    8  store root: the KV store's root object, in the item arena
//                (0 = the pool holds no store; src/kv/store.cc), only by NAW
//      104   24  reserved, zero
//   ---- 128 .. 4096: reserved for the allocator's fixed metadata (see
//        allocator.h); the allocator's chunk table and heap follow.
//
// The close record is how damage to a cleanly closed pool is told apart
// from a crash (issue 9): the allocator keeps no persistent allocation map,
// so after a crash an allocated block nothing reaches is indistinguishable
// from a free one; but at a clean close the pool records how many bytes of
// blocks were allocated and how many keys the index held, and the next
// recovery compares what the structure reaches with them (a redirected
// child or sibling offset loses blocks and keys; see
// src/indexes/common/persistent.h). ~Pool writes both words (persisted)
// before the clean-shutdown NAW, when the pool holds an index (root != 0).
// Recovery clears them (consume_close_record) once its reachability pass
// agrees, before it changes the structure, so a record never outlives the
// state it describes; a recovery that finds a mismatch leaves the record, so
// every later open reports the damage again.
//
// Create writes and persists every field and the allocator metadata first,
// then writes and persists the magic: a crash during create leaves a file
// that open() rejects as "not an nvindex pool", never a half-formatted pool.
//
// Thread-safety: root()/set_root() and the mapping accessors are safe from any
// thread; create/open/destruction are not concurrent with other use.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "nvindex/pm/persist.h"
#include "nvindex/status.h"

/// libpmem2's mapping handle (global namespace, declared in <libpmem2.h>).
struct pmem2_map;

namespace nvindex::pm {

class Allocator;

/// The header as stored at offset 0 (the byte table at the top of this file,
/// which also describes the allocator area that follows the header).
struct PoolHeader {
  char magic[8];
  uint32_t version;
  uint32_t header_size;
  char layout[32];
  uint64_t size;
  uint64_t checksum;
  std::atomic<uint64_t> root;
  std::atomic<uint64_t> clean_shutdown;
  std::atomic<uint64_t> close_bytes;
  std::atomic<uint64_t> close_keys_plus_one;
  std::atomic<uint64_t> store_root;
  uint64_t reserved[3];
};
// One assertion per row of the table at the top of this file.
static_assert(offsetof(PoolHeader, magic) == 0);
static_assert(offsetof(PoolHeader, version) == 8);
static_assert(offsetof(PoolHeader, header_size) == 12);
static_assert(offsetof(PoolHeader, layout) == 16);
static_assert(offsetof(PoolHeader, size) == 48);
static_assert(offsetof(PoolHeader, checksum) == 56);
static_assert(offsetof(PoolHeader, root) == 64);
static_assert(offsetof(PoolHeader, clean_shutdown) == 72);
static_assert(offsetof(PoolHeader, close_bytes) == 80);
static_assert(offsetof(PoolHeader, close_keys_plus_one) == 88);
static_assert(offsetof(PoolHeader, store_root) == 96);
static_assert(offsetof(PoolHeader, reserved) == 104);
static_assert(sizeof(PoolHeader) == 128);

inline constexpr char kPoolMagic[8] = {'N', 'V', 'I', 'D', 'X', 'P', 'L', '\0'};
inline constexpr uint32_t kPoolVersion = 1;
inline constexpr uint64_t kPoolHeaderBytes = 4096;
/// Smallest pool create() accepts, bytes.
inline constexpr uint64_t kMinPoolSize = 4ull << 20;
/// Longest layout name, bytes (the field is NUL-terminated).
inline constexpr size_t kMaxLayoutLen = 31;

/// A plain copy of the header fields, for `nvindex info`.
struct PoolHeaderInfo {
  std::string layout;
  uint32_t version = 0;
  uint64_t size = 0;
  uint64_t root = 0;
  bool clean_shutdown = false;
  uint64_t close_bytes = 0;            ///< close record: allocated bytes (0: none)
  std::optional<uint64_t> close_keys;  ///< close record: keys (none: not recorded)
  uint64_t store_root = 0;             ///< the KV store's root object (0: no store)
  uint64_t checksum = 0;
  bool checksum_ok = false;
};

/// How the pages of a mapping are backed, read from /proc/self/smaps (Linux,
/// Documentation/filesystems/proc.rst, "/proc/pid/smaps"). Persistent memory
/// on a DAX file system is mapped with 2 MiB pages where aligned; a pool
/// emulated in a tmpfs file gets 4 KiB pages unless the machine allows more:
///  - a hugetlbfs mount (the file's pages are huge outright: page_bytes is
///    the mount's page size);
///  - a tmpfs mounted with huge=always or huge=within_size (or
///    /sys/kernel/mm/transparent_hugepage/shmem_enabled = force): transparent
///    huge pages (THP) wherever the kernel could assemble 2 MiB;
///  - an anonymous pool (--pm-mode dram) under MADV_HUGEPAGE, when
///    /sys/kernel/mm/transparent_hugepage/enabled is madvise or always.
/// At tens of millions of keys the 4 KiB pages cost a PM-only index TLB
/// misses that real PM would not, which is why reports name the backing.
struct PageBacking {
  bool known = false;           ///< false: smaps unreadable or no mapping found (rest 0)
  uint64_t page_bytes = 0;      ///< KernelPageSize: 4096, or the hugetlbfs page size, bytes
  uint64_t mapped_bytes = 0;    ///< size of the mappings overlapping the range, bytes
  uint64_t resident_bytes = 0;  ///< of those, bytes resident in memory (Rss + hugetlb)
  uint64_t huge_bytes = 0;      ///< of the resident, bytes mapped by pages > 4 KiB
                                ///< (hugetlb pages, or THP: AnonHugePages +
                                ///< ShmemPmdMapped + FilePmdMapped)
};

/// The page backing of the mappings that overlap [addr, addr + len), summed
/// over them (smaps reports whole mappings: a mapping that only overlaps the
/// range counts whole). page_bytes is the largest KernelPageSize among them.
/// Reading smaps walks the page tables: about 1 ms per GiB mapped with 4 KiB
/// pages. Never fails: known = false when /proc/self/smaps cannot be read.
PageBacking page_backing(const void* addr, size_t len);

/// An open pool: the mapping, its header and its Allocator. Owned through a
/// std::unique_ptr from create/open/create_anonymous; destroying it closes
/// the pool cleanly. Size: whole file (>= kMinPoolSize, a multiple of 4096;
/// on hugetlbfs a multiple of the mount's page size, as mmap requires there).
class Pool {
 public:
  /// Creates a pool file of `size` bytes (>= kMinPoolSize, rounded down to a
  /// multiple of 4096, or on hugetlbfs of its page size) at `path` holding layout `layout` (1..31
  /// bytes), maps it in `mode` (kEmulated, kDax or kCrashSim; kDax requires a DAX mapping and fails
  /// otherwise) and formats the header and allocator metadata. Errors: InvalidArgument (size,
  /// layout, or mode kDram: use create_anonymous), AlreadyExists (the file exists: create never
  /// overwrites), NotSupported (kDax on a file libpmem2 cannot map with
  /// cache-line store granularity, i.e. not on a DAX file system), IOError
  /// (create, fallocate, map). On error no file is left behind.
  static Status create(const std::string& path, uint64_t size, std::string_view layout, Mode mode,
                       std::unique_ptr<Pool>* out);

  /// Opens an existing pool file and validates it before touching it: magic
  /// (Corruption "not an nvindex pool"), version, size equal to the file size
  /// (Corruption "truncated"), checksum (Corruption), layout equal to
  /// `layout` (InvalidArgument naming both layouts). On any error the file is
  /// not modified. On success clears the clean-shutdown flag (NAW) and
  /// remembers whether it was set. The allocator then needs recovery (see
  /// Allocator::begin_recovery) before it hands out blocks. Other errors:
  /// NotFound (no such file), InvalidArgument "<path> is a FIFO, not a
  /// pool file" (a directory, socket or device likewise: only a regular
  /// file is a pool, and it is opened without blocking, so a FIFO never
  /// hangs the caller), Corruption "not an nvindex pool (file too
  /// small)" / "(bad magic)", a damaged allocator metadata or chunk table,
  /// Busy (the pool is open already: an exclusive flock is held while open),
  /// InvalidArgument (mode kDram), NotSupported/IOError as for create().
  static Status open(const std::string& path, std::string_view layout, Mode mode,
                     std::unique_ptr<Pool>* out);

  /// Creates a pool in anonymous DRAM (no file), formatted like create().
  /// For volatile runs and tests; nothing survives the process. Mapped with
  /// plain mmap (MAP_ANONYMOUS | MAP_NORESERVE), not libpmem2: there is no file
  /// whose store granularity libpmem2 could detect, and nothing is durable.
  /// mode() is the process-wide mode at creation (the primitives follow it).
  /// Errors: InvalidArgument (size, layout), IOError (mmap).
  static Status create_anonymous(uint64_t size, std::string_view layout,
                                 std::unique_ptr<Pool>* out);

  /// Reads and validates the header of a pool file without mapping it for
  /// writing and without changing it. Errors as for open(), except that a
  /// bad checksum is reported in info->checksum_ok rather than as an error.
  static Status read_header(const std::string& path, PoolHeaderInfo* info);

  /// Sets the clean-shutdown flag (NAW: the index must have persisted its
  /// state before), unmaps, closes the file (releasing the lock).
  ~Pool();
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  /// Address of offset 0 (the header); page aligned.
  char* base() const { return base_; }
  /// Pool size in bytes, header included (the file size).
  uint64_t size() const { return size_; }
  /// The mode the pool was mapped in (for an anonymous pool: see above).
  Mode mode() const { return mode_; }
  /// The pool file's path, or "(anonymous)".
  const std::string& path() const { return path_; }
  /// The layout name stored in the header (1..31 bytes).
  std::string_view layout() const;
  /// How the pool's mapping is backed by pages now (page_backing over
  /// [base(), base() + size())). Every pool's mapping is advised
  /// MADV_HUGEPAGE at create/open, a hint that takes effect where the
  /// machine allows transparent huge pages for it (see PageBacking).
  PageBacking page_backing() const { return pm::page_backing(base_, size_); }
  /// Faults in every page of the mapping now, writable, so that no later
  /// access to the pool pays a page fault: madvise(MADV_POPULATE_WRITE)
  /// (Linux 5.14), which maps each page as a write would without changing a
  /// byte; on a kernel without it (EINVAL), one read per 4 KiB page (which
  /// maps each page; on a file system that tracks writes, a DAX ext4 or
  /// xfs, a page's first write still takes a minor fault). It is what libpmemobj's
  /// `prefault.at_create` and `prefault.at_open` controls do (PMDK, pmemobj_ctl_get(3)), and what
  /// the LB+-tree and FAST&FAIR authors' drivers do to their pools before
  /// timing. On an emulated pool in a tmpfs file each 4 KiB page costs a
  /// minor fault once (0.5 s for 1 GiB on a 2-core Zen 4 VM); on DAX or hugetlbfs 2 MiB
  /// pages there are few. Nothing is written, so a crash during it changes
  /// nothing. On an anonymous pool it commits the whole size in memory.
  /// Errors: IOError naming the madvise failure (EFAULT: a page could not
  /// be supplied, e.g. the file was truncated or its huge pages are gone;
  /// ENOMEM: no memory for the page tables; EINTR: a signal). Returns the
  /// time taken in *seconds when non-null (also on error).
  Status prefault(double* seconds = nullptr);

  /// Pointer to the object at offset `off` (nullptr for 0). No bounds check
  /// on the hot path; use contains() to validate untrusted offsets.
  template <class T>
  T* ptr(uint64_t off) const {
    return off == 0 ? nullptr : reinterpret_cast<T*>(base_ + off);
  }
  /// Offset of a pointer into the pool (0 for nullptr).
  uint64_t offset(const void* p) const {
    return p == nullptr ? 0 : static_cast<uint64_t>(static_cast<const char*>(p) - base_);
  }
  /// True when [off, off+len) lies inside the pool past the header.
  bool contains(uint64_t off, uint64_t len) const {
    return off >= kPoolHeaderBytes && off <= size_ && len <= size_ - off;
  }

  /// The root offset (0 until set_root()).
  uint64_t root() const { return header()->root.load(std::memory_order_acquire); }
  /// Publishes the root object by NAW. The object must be persisted first.
  void set_root(uint64_t off) { naw(&header()->root, off, {"pool.set_root"}); }
  /// The KV store's root object (a block of the item arena), 0 when the
  /// pool holds no store.
  uint64_t store_root() const { return header()->store_root.load(std::memory_order_acquire); }
  /// Publishes the KV store's root object by NAW (persisted first).
  void set_store_root(uint64_t off) { naw(&header()->store_root, off, {"pool.set_store_root"}); }
  /// Whether the previous session closed the pool cleanly (false after a crash
  /// and for a newly created pool).
  bool was_clean_shutdown() const { return was_clean_; }
  /// Marks this session's state as not known whole: the close will leave
  /// the pool "not clean", so the next open recovers it again. make_index()
  /// calls it when an index fails to open (recover) on this pool.
  void keep_unclean() { keep_unclean_ = true; }

  /// The close record read at open (see the file comment): bytes in
  /// allocated blocks and keys at the last clean close. bytes == 0: no
  /// record (a new pool, or a recovery consumed it); keys empty: the index
  /// did not record them.
  struct CloseRecord {
    uint64_t bytes = 0;
    std::optional<uint64_t> keys;
  };
  const CloseRecord& close_record() const { return close_record_; }
  /// The close record as read at open (for reports; close_record() is empty
  /// once recovery consumed it).
  const CloseRecord& close_record_at_open() const { return close_record_at_open_; }
  /// Clears the close record, on media (both words, one persisted line;
  /// nothing is written when there is none) and in close_record(), and
  /// remembers `reached_bytes` for reached_bytes(). Called by recovery once
  /// its reachability pass agrees with the record, before it changes the
  /// structure (and with 0 when an index is created on a pool without one).
  void consume_close_record(uint64_t reached_bytes);
  /// The bytes in blocks the last recovery's reachability pass reached (0
  /// when none ran in this session): what `nvindex verify` reports as
  /// reachable, before recovery's own repairs freed or allocated blocks.
  uint64_t reached_bytes() const { return reached_bytes_; }
  /// The key count ~Pool records for this session's clean close (an index
  /// calls it as it is destroyed); nullopt: "keys not recorded".
  void set_close_keys(std::optional<uint64_t> keys) { close_keys_ = keys; }
  /// True for a pool made by create_anonymous (nothing persists; no close
  /// record is kept).
  bool anonymous() const { return anonymous_; }

  /// The pool's block allocator of the index arena (lives as long as the
  /// pool; allocator.h).
  Allocator& allocator() { return *allocator_; }
  const Allocator& allocator() const { return *allocator_; }
  /// The allocator of the item arena (Allocator::Arena::kItems), the KV
  /// store's item records.
  Allocator& item_allocator() { return *items_allocator_; }
  const Allocator& item_allocator() const { return *items_allocator_; }

 private:
  Pool() = default;
  PoolHeader* header() const { return reinterpret_cast<PoolHeader*>(base_); }

  char* base_ = nullptr;
  uint64_t size_ = 0;
  Mode mode_ = Mode::kEmulated;
  std::string path_;
  bool was_clean_ = false;
  bool keep_unclean_ = false;
  CloseRecord close_record_;
  CloseRecord close_record_at_open_;
  std::optional<uint64_t> close_keys_;
  uint64_t reached_bytes_ = 0;
  bool anonymous_ = false;
  ::pmem2_map* map_ = nullptr;
  int fd_ = -1;
  std::unique_ptr<Allocator> allocator_;
  std::unique_ptr<Allocator> items_allocator_;

  friend class PoolFactory;
};

}  // namespace nvindex::pm
