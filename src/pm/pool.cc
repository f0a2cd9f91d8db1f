// Pool: create, open, validate and map a pool file with libpmem2
// (DESIGN.md §3 "Pool"; the on-media header format is in pool.h).
#include "nvindex/pm/pool.h"

#include <fcntl.h>
#include <libpmem2.h>
#include <linux/magic.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>

#include "nvindex/pm/allocator.h"
#include "util/file_kind.h"

namespace nvindex::pm {
namespace {

/// Bytes covered by the header checksum: [0, 56).
constexpr size_t kChecksummed = offsetof(PoolHeader, checksum);

std::string errno_text(int err) { return std::strerror(err); }

/// Opens the existing pool file `path` with `flags` (O_RDONLY or O_RDWR;
/// O_CLOEXEC added) without blocking: O_NONBLOCK, so a FIFO cannot hold
/// open() or a later read until a writer comes, then anything but a regular
/// file is refused before a byte is read, and O_NONBLOCK is cleared. A
/// device DAX character device is refused too: a pool is a file (on a DAX
/// file system for --pm-mode dax). Errors: NotFound (no such file),
/// InvalidArgument "<path> is a FIFO, not a pool file" (a directory, a
/// socket, a character or block device likewise), IOError (open, fstat,
/// fcntl). Nothing is changed in any case.
Status open_pool_file(const std::string& path, int flags, int* out) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return Status::NotFound("pool file " + path + " does not exist");
    if (err == EISDIR) return Status::InvalidArgument(path + " is a directory, not a pool file");
    return Status::IOError("cannot open " + path + ": " + errno_text(err));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return Status::IOError("cannot stat " + path + ": " + errno_text(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::InvalidArgument(path + " is " + file_kind(st.st_mode) + ", not a pool file");
  }
  const int fl = ::fcntl(fd, F_GETFL);
  if (fl < 0 || ::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
    const int err = errno;
    ::close(fd);
    return Status::IOError("cannot set " + path + " to blocking I/O: " + errno_text(err));
  }
  *out = fd;
  return Status::Ok();
}

std::string pmem2_text() {
  const char* m = pmem2_errormsg();
  return (m != nullptr && *m != '\0') ? std::string(m) : std::string("unknown libpmem2 error");
}

/// The header fields of a pool file as read with pread (no mapping).
struct RawHeader {
  unsigned char bytes[sizeof(PoolHeader)];

  template <class T>
  T field(size_t off) const {
    T v;
    std::memcpy(&v, bytes + off, sizeof(T));
    return v;
  }
  uint32_t version() const { return field<uint32_t>(offsetof(PoolHeader, version)); }
  uint32_t header_size() const { return field<uint32_t>(offsetof(PoolHeader, header_size)); }
  uint64_t size() const { return field<uint64_t>(offsetof(PoolHeader, size)); }
  uint64_t checksum() const { return field<uint64_t>(offsetof(PoolHeader, checksum)); }
  uint64_t root() const { return field<uint64_t>(offsetof(PoolHeader, root)); }
  uint64_t clean() const { return field<uint64_t>(offsetof(PoolHeader, clean_shutdown)); }
  uint64_t close_bytes() const { return field<uint64_t>(offsetof(PoolHeader, close_bytes)); }
  uint64_t close_keys_plus_one() const {
    return field<uint64_t>(offsetof(PoolHeader, close_keys_plus_one));
  }
  uint64_t store_root() const { return field<uint64_t>(offsetof(PoolHeader, store_root)); }
  bool layout(std::string* out) const {
    const char* p = reinterpret_cast<const char*>(bytes + offsetof(PoolHeader, layout));
    const size_t n = strnlen(p, sizeof(PoolHeader::layout));
    if (n == sizeof(PoolHeader::layout)) return false;  // not NUL-terminated
    out->assign(p, n);
    return true;
  }
  bool checksum_ok() const { return XXH64(bytes, kChecksummed, 0) == checksum(); }
};

/// Reads and validates the header of the open pool file `fd` without writing
/// it. Checks, in order: file at least one PoolHeader long, magic, version,
/// header size, layout name terminated, checksum (only if `check_checksum`),
/// recorded size sane and equal to the file size. Fills *hdr on success.
Status read_and_validate(int fd, const std::string& path, bool check_checksum, RawHeader* hdr,
                         std::string* layout) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return Status::IOError("cannot stat " + path + ": " + errno_text(errno));
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);
  if (file_size < sizeof(PoolHeader)) {
    return Status::Corruption(
        path + " is not an nvindex pool (file too small: " + std::to_string(file_size) + " bytes)");
  }
  const ssize_t got = pread(fd, hdr->bytes, sizeof(hdr->bytes), 0);
  if (got != static_cast<ssize_t>(sizeof(hdr->bytes))) {
    return Status::IOError("cannot read the header of " + path + ": " +
                           (got < 0 ? errno_text(errno) : std::string("short read")));
  }
  if (std::memcmp(hdr->bytes, kPoolMagic, sizeof(kPoolMagic)) != 0) {
    return Status::Corruption(path + " is not an nvindex pool (bad magic)");
  }
  if (hdr->version() != kPoolVersion) {
    return Status::Corruption(path + " has pool format version " + std::to_string(hdr->version()) +
                              "; this build reads version " + std::to_string(kPoolVersion));
  }
  if (hdr->header_size() != kPoolHeaderBytes) {
    return Status::Corruption(path + " has a header of " + std::to_string(hdr->header_size()) +
                              " bytes; expected " + std::to_string(kPoolHeaderBytes));
  }
  if (!hdr->layout(layout)) {
    return Status::Corruption(path + " has a layout name that is not NUL-terminated");
  }
  if (check_checksum && !hdr->checksum_ok()) {
    return Status::Corruption(path + " has a bad header checksum (the header is damaged)");
  }
  const uint64_t size = hdr->size();
  if (size < kMinPoolSize || size % kPoolHeaderBytes != 0) {
    return Status::Corruption(path + " records an impossible pool size of " + std::to_string(size) +
                              " bytes");
  }
  if (file_size < size) {
    return Status::Corruption(path + " is truncated: the file has " + std::to_string(file_size) +
                              " bytes, the pool header says " + std::to_string(size));
  }
  if (file_size != size) {
    return Status::Corruption(path + " has " + std::to_string(file_size) +
                              " bytes but its pool header says " + std::to_string(size));
  }
  return Status::Ok();
}

Status check_layout_name(std::string_view layout) {
  if (layout.empty() || layout.size() > kMaxLayoutLen) {
    return Status::InvalidArgument("layout name must be 1.." + std::to_string(kMaxLayoutLen) +
                                   " bytes, got " + std::to_string(layout.size()));
  }
  if (layout.find('\0') != std::string_view::npos) {
    return Status::InvalidArgument("layout name must not contain a NUL byte");
  }
  return Status::Ok();
}

/// Checks a requested pool size against kMinPoolSize and rounds it down to a
/// multiple of kPoolHeaderBytes (4096). InvalidArgument when too small.
Status check_pool_size(uint64_t* size) {
  if (*size < kMinPoolSize) {
    return Status::InvalidArgument("pool size " + std::to_string(*size) +
                                   " bytes is below the minimum of " +
                                   std::to_string(kMinPoolSize) + " bytes (4 MiB)");
  }
  *size -= *size % kPoolHeaderBytes;
  return Status::Ok();
}

Status check_file_mode(Mode mode) {
  if (mode == Mode::kDram) {
    return Status::InvalidArgument(
        "a pool file cannot be mapped in dram mode; use Pool::create_anonymous for volatile runs");
  }
  return Status::Ok();
}

/// Maps the whole file `fd` with libpmem2. Store granularity: page for
/// kEmulated and kCrashSim (any file system: msync-level durability is all
/// that is asked of the mapping; our own flushes model the PM cost), cache
/// line for kDax (a DAX file mapped with MAP_SYNC, where clwb+sfence is
/// durable). libpmem2 refuses the cache-line request on a non-DAX file.
Status map_file(int fd, const std::string& path, Mode mode, struct pmem2_map** map) {
  struct pmem2_source* src = nullptr;
  if (pmem2_source_from_fd(&src, fd) != 0) {
    return Status::IOError("cannot map " + path + ": " + pmem2_text());
  }
  struct pmem2_config* cfg = nullptr;
  if (pmem2_config_new(&cfg) != 0) {
    pmem2_source_delete(&src);
    return Status::IOError("cannot map " + path + ": " + pmem2_text());
  }
  const auto gran = mode == Mode::kDax ? PMEM2_GRANULARITY_CACHE_LINE : PMEM2_GRANULARITY_PAGE;
  Status s;
  int rc = pmem2_config_set_required_store_granularity(cfg, gran);
  if (rc == 0) rc = pmem2_map_new(map, cfg, src);
  if (rc != 0) {
    if (mode == Mode::kDax && rc == PMEM2_E_GRANULARITY_NOT_SUPPORTED) {
      s = Status::NotSupported(
          "dax mode needs a file on a DAX file system (real persistent memory, mapped with "
          "MAP_SYNC); " +
          path + " cannot be mapped with cache-line store granularity: " + pmem2_text());
    } else {
      s = Status::IOError("cannot map " + path + ": " + pmem2_text());
    }
  }
  pmem2_config_delete(&cfg);
  pmem2_source_delete(&src);
  return s;
}

/// Advises the kernel to back [base, base + size) with transparent huge
/// pages (MADV_HUGEPAGE). A hint: where THP is off for the mapping (tmpfs
/// mounted huge=never, THP disabled) it changes nothing, and a failure is
/// ignored, as it changes nothing either. On hugetlbfs the pages are huge
/// already.
void advise_huge_pages(void* base, uint64_t size) { (void)::madvise(base, size, MADV_HUGEPAGE); }

/// On hugetlbfs, rounds *size down to the mount's page size (f_bsize), as
/// mmap of a hugetlbfs file needs a whole number of its pages; elsewhere
/// nothing. InvalidArgument when that leaves less than kMinPoolSize.
Status round_to_file_system_pages(int fd, const std::string& path, uint64_t* size) {
  struct statfs fs {};
  if (::fstatfs(fd, &fs) != 0 || fs.f_type != HUGETLBFS_MAGIC || fs.f_bsize <= 0) {
    return Status::Ok();
  }
  const uint64_t page = static_cast<uint64_t>(fs.f_bsize);
  *size -= *size % page;
  if (*size < kMinPoolSize) {
    return Status::InvalidArgument("pool size on hugetlbfs (" + path + ") must hold at least one " +
                                   std::to_string(page) + "-byte page and " +
                                   std::to_string(kMinPoolSize) + " bytes");
  }
  return Status::Ok();
}

/// Takes the exclusive advisory lock that keeps a pool open once at a time.
Status lock_file(int fd, const std::string& path) {
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) {
      return Status::Busy(path + " is already open (by this or another process)");
    }
    return Status::IOError("cannot lock " + path + ": " + errno_text(errno));
  }
  return Status::Ok();
}

}  // namespace

/// Formats the header of a mapped, zero-filled region. Crash argument: every
/// field but the magic, and the allocator metadata, are written and persisted
/// first; the magic is written and persisted last. A crash before the last
/// persist leaves a file without the magic, which open() rejects as "not an
/// nvindex pool" (and create() never reuses an existing file).
static Status format_region(Pool* pool, char* base, uint64_t size, std::string_view layout) {
  auto* h = reinterpret_cast<PoolHeader*>(base);
  // The checksum covers the magic too, so compute it over a DRAM image.
  unsigned char image[kChecksummed] = {};
  std::memcpy(image, kPoolMagic, sizeof(kPoolMagic));
  std::memcpy(image + offsetof(PoolHeader, version), &kPoolVersion, 4);
  const uint32_t hs = kPoolHeaderBytes;
  std::memcpy(image + offsetof(PoolHeader, header_size), &hs, 4);
  std::memcpy(image + offsetof(PoolHeader, layout), layout.data(), layout.size());
  std::memcpy(image + offsetof(PoolHeader, size), &size, 8);
  const uint64_t checksum = XXH64(image, kChecksummed, 0);

  fill(base, 0, kPoolHeaderBytes);
  copy(base + sizeof(kPoolMagic), image + sizeof(kPoolMagic), kChecksummed - sizeof(kPoolMagic));
  store(&h->checksum, checksum);
  store(&h->root, 0);
  store(&h->clean_shutdown, 0);
  Status s = Allocator::format(pool);
  if (!s.ok()) return s;
  persist(base, kPoolHeaderBytes, {"pool.create.header"});
  copy(h->magic, kPoolMagic, sizeof(kPoolMagic));
  persist(h->magic, sizeof(kPoolMagic), {"pool.create.magic"});
  return Status::Ok();
}

Status Pool::create(const std::string& path, uint64_t size, std::string_view layout, Mode mode,
                    std::unique_ptr<Pool>* out) {
  Status s = check_layout_name(layout);
  if (!s.ok()) return s;
  s = check_file_mode(mode);
  if (!s.ok()) return s;
  s = check_pool_size(&size);
  if (!s.ok()) return s;
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    if (errno == EEXIST) {
      return Status::AlreadyExists(path + " already exists (create never overwrites a file)");
    }
    return Status::IOError("cannot create " + path + ": " + errno_text(errno));
  }
  std::unique_ptr<Pool> pool(new Pool);
  pool->fd_ = fd;  // closed by ~Pool
  pool->path_ = path;
  pool->mode_ = mode;
  auto fail = [&](Status st) {
    pool->base_ = nullptr;  // nothing to mark clean
    if (pool->map_ != nullptr) pmem2_map_delete(&pool->map_);
    pool.reset();
    ::unlink(path.c_str());  // we created it: remove the half-made file
    return st;
  };
  s = lock_file(fd, path);
  if (!s.ok()) return fail(s);
  s = round_to_file_system_pages(fd, path, &size);
  if (!s.ok()) return fail(s);
  const int rc = posix_fallocate(fd, 0, static_cast<off_t>(size));
  if (rc != 0) {
    return fail(Status::IOError("cannot allocate " + std::to_string(size) + " bytes for " + path +
                                ": " + errno_text(rc)));
  }
  s = map_file(fd, path, mode, &pool->map_);
  if (!s.ok()) return fail(s);
  pool->base_ = static_cast<char*>(pmem2_map_get_address(pool->map_));
  pool->size_ = size;
  advise_huge_pages(pool->base_, size);
  s = format_region(pool.get(), pool->base_, size, layout);
  if (!s.ok()) return fail(s);
  s = Allocator::attach(pool.get(), /*fresh=*/true, &pool->allocator_, &pool->items_allocator_);
  if (!s.ok()) return fail(s);
  pool->was_clean_ = false;
  *out = std::move(pool);
  return Status::Ok();
}

Status Pool::open(const std::string& path, std::string_view layout, Mode mode,
                  std::unique_ptr<Pool>* out) {
  Status s = check_file_mode(mode);
  if (!s.ok()) return s;
  int fd = -1;
  s = open_pool_file(path, O_RDWR, &fd);
  if (!s.ok()) return s;
  std::unique_ptr<Pool> pool(new Pool);
  pool->fd_ = fd;
  pool->path_ = path;
  pool->mode_ = mode;
  // Until the clean flag is cleared below, ~Pool must not write the file.
  auto fail = [&](Status st) {
    pool->allocator_.reset();
    pool->items_allocator_.reset();
    pool->base_ = nullptr;
    if (pool->map_ != nullptr) pmem2_map_delete(&pool->map_);
    pool.reset();
    return st;
  };
  s = lock_file(fd, path);
  if (!s.ok()) return fail(s);
  RawHeader hdr;
  std::string stored_layout;
  s = read_and_validate(fd, path, /*check_checksum=*/true, &hdr, &stored_layout);
  if (!s.ok()) return fail(s);
  if (stored_layout != layout) {
    return fail(Status::InvalidArgument("layout mismatch: " + path + " holds layout '" +
                                        stored_layout + "', opened as '" + std::string(layout) +
                                        "'"));
  }
  s = map_file(fd, path, mode, &pool->map_);
  if (!s.ok()) return fail(s);
  char* base = static_cast<char*>(pmem2_map_get_address(pool->map_));
  const uint64_t size = hdr.size();
  if (pmem2_map_get_size(pool->map_) < size) {
    return fail(Status::IOError("libpmem2 mapped fewer bytes of " + path + " than the pool size"));
  }
  const auto* ph = reinterpret_cast<PoolHeader*>(base);
  for (const auto& [what, off] :
       {std::pair<const char*, uint64_t>{"root", ph->root.load(std::memory_order_acquire)},
        {"store root", ph->store_root.load(std::memory_order_acquire)}}) {
    if (off != 0 && (off < kPoolHeaderBytes || off >= size)) {
      return fail(Status::Corruption(path + " has a " + what + " offset " + std::to_string(off) +
                                     " outside the pool's " + std::to_string(size) + " bytes"));
    }
  }
  pool->base_ = base;
  pool->size_ = size;
  advise_huge_pages(base, size);
  // Validate the allocator metadata before writing anything.
  s = Allocator::attach(pool.get(), /*fresh=*/false, &pool->allocator_, &pool->items_allocator_);
  if (!s.ok()) return fail(s);
  // The pool is valid: from here on it is open. Clearing the clean flag by
  // NAW marks the session; a crash before ~Pool leaves it 0 ("crashed").
  pool->was_clean_ = pool->header()->clean_shutdown.load(std::memory_order_acquire) == 1;
  pool->close_record_.bytes = pool->header()->close_bytes.load(std::memory_order_acquire);
  const uint64_t keys = pool->header()->close_keys_plus_one.load(std::memory_order_acquire);
  if (pool->close_record_.bytes != 0 && keys != 0) pool->close_record_.keys = keys - 1;
  pool->close_record_at_open_ = pool->close_record_;
  naw(&pool->header()->clean_shutdown, 0, {"pool.open.clean_flag"});
  *out = std::move(pool);
  return Status::Ok();
}

Status Pool::create_anonymous(uint64_t size, std::string_view layout, std::unique_ptr<Pool>* out) {
  Status s = check_layout_name(layout);
  if (!s.ok()) return s;
  s = check_pool_size(&size);
  if (!s.ok()) return s;
  // Plain mmap, not libpmem2: there is no file to detect a store granularity
  // for, nothing here is ever persistent, and MAP_NORESERVE lets tests create
  // large sparse pools cheaply. The primitives still run (and count) in the
  // process-wide mode.
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  if (p == MAP_FAILED) {
    return Status::IOError("cannot map " + std::to_string(size) +
                           " bytes of anonymous memory: " + errno_text(errno));
  }
  advise_huge_pages(p, size);
  std::unique_ptr<Pool> pool(new Pool);
  pool->anonymous_ = true;
  pool->base_ = static_cast<char*>(p);
  pool->size_ = size;
  pool->mode_ = current_config().mode;
  pool->path_ = "(anonymous)";
  s = format_region(pool.get(), pool->base_, size, layout);
  if (s.ok())
    s = Allocator::attach(pool.get(), /*fresh=*/true, &pool->allocator_, &pool->items_allocator_);
  if (!s.ok()) return s;  // ~Pool unmaps
  *out = std::move(pool);
  return Status::Ok();
}

Status Pool::read_header(const std::string& path, PoolHeaderInfo* info) {
  int fd = -1;
  Status s = open_pool_file(path, O_RDONLY, &fd);
  if (!s.ok()) return s;
  RawHeader hdr;
  std::string layout;
  s = read_and_validate(fd, path, /*check_checksum=*/false, &hdr, &layout);
  ::close(fd);
  if (!s.ok()) return s;
  info->layout = layout;
  info->version = hdr.version();
  info->size = hdr.size();
  info->root = hdr.root();
  info->clean_shutdown = hdr.clean() == 1;
  info->close_bytes = hdr.close_bytes();
  info->close_keys.reset();
  if (hdr.close_bytes() != 0 && hdr.close_keys_plus_one() != 0) {
    info->close_keys = hdr.close_keys_plus_one() - 1;
  }
  info->store_root = hdr.store_root();
  info->checksum = hdr.checksum();
  info->checksum_ok = hdr.checksum_ok();
  return Status::Ok();
}

Pool::~Pool() {
  // Clean close: the index has persisted its state, so the session is marked
  // over, unless the pool's state is not known to be whole: an index failed
  // to open on it (keep_unclean, set by make_index), a recovery pass was
  // begun and not ended, or the previous session crashed and no recovery
  // completed in this one. Such a pool stays "not clean" and the next open
  // recovers it again.
  // The item arena's pass too: one begun and not ended (a store that
  // failed to open) leaves the pool not clean; one never begun (no store,
  // or a tool that opened only the index) says nothing.
  const bool whole = allocator_ != nullptr && !keep_unclean_ &&
                     (allocator_->ready() || (was_clean_ && !allocator_->recovering())) &&
                     !items_allocator_->recovering();
  // The close record (file comment) describes this session's end state: it
  // is written when the allocator worked in this session (a pool opened and
  // never recovered keeps the record it had). It shares the header's line 1
  // with the clean flag and is persisted before the flag's NAW; a crash
  // between them leaves a record of the state on media, with the flag 0.
  const bool record = whole && allocator_->ready() && root() != 0;
  const uint64_t bytes = record ? allocator_->bytes_in_use() : 0;
  allocator_.reset();
  items_allocator_.reset();
  if (anonymous_) {
    if (base_ != nullptr) munmap(base_, size_);
    return;
  }
  if (base_ != nullptr && record) {
    store(&header()->close_bytes, bytes);
    store(&header()->close_keys_plus_one, close_keys_ ? *close_keys_ + 1 : 0);
    persist(&header()->close_bytes, 2 * sizeof(uint64_t), {"pool.close.record"});
  }
  if (base_ != nullptr && whole) naw(&header()->clean_shutdown, 1, {"pool.close.clean_flag"});
  if (map_ != nullptr) pmem2_map_delete(&map_);
  if (fd_ >= 0) ::close(fd_);
}

void Pool::consume_close_record(uint64_t reached_bytes) {
  reached_bytes_ = reached_bytes;
  if (close_record_.bytes == 0 || anonymous_) return;
  store(&header()->close_bytes, uint64_t{0});
  store(&header()->close_keys_plus_one, uint64_t{0});
  persist(&header()->close_bytes, 2 * sizeof(uint64_t), {"pool.recover.close_record"});
  close_record_ = CloseRecord{};
}

std::string_view Pool::layout() const {
  const char* p = header()->layout;
  return std::string_view(p, strnlen(p, sizeof(PoolHeader::layout)));
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14, include/uapi/asm-generic/mman-common.h
#endif

Status Pool::prefault(double* seconds) {
  const auto t0 = std::chrono::steady_clock::now();
  Status s;
  if (::madvise(base_, size_, MADV_POPULATE_WRITE) != 0) {
    if (errno != EINVAL) {
      s = Status::IOError("cannot prefault " + std::to_string(size_) + " bytes of pool " + path_ +
                          ": madvise(MADV_POPULATE_WRITE): " + errno_text(errno));
    } else {
      // Older kernel: a read per page maps it (readable). volatile: the
      // loads must happen, and change nothing.
      const volatile char* p = base_;
      char sink = 0;
      for (uint64_t off = 0; off < size_; off += 4096) sink ^= p[off];
      (void)sink;
    }
  }
  if (seconds != nullptr) {
    *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  return s;
}

PageBacking page_backing(const void* addr, size_t len) {
  PageBacking b;
  std::ifstream smaps("/proc/self/smaps");
  const uintptr_t lo = reinterpret_cast<uintptr_t>(addr), hi = lo + len;
  bool in_range = false;
  for (std::string line; std::getline(smaps, line);) {
    // A mapping's header line: "start-end perms offset dev inode [path]";
    // its fields follow as "Name:   value kB".
    const size_t dash = line.find('-'), colon = line.find(':');
    if (dash != std::string::npos && (colon == std::string::npos || dash < colon) &&
        line.find(' ') > dash) {
      const uintptr_t start = std::strtoull(line.c_str(), nullptr, 16);
      const uintptr_t end = std::strtoull(line.c_str() + dash + 1, nullptr, 16);
      in_range = start < hi && lo < end;
      if (in_range) {
        b.known = true;
        b.mapped_bytes += end - start;
      }
      continue;
    }
    if (!in_range || colon == std::string::npos) continue;
    const std::string_view name(line.data(), colon);
    const uint64_t bytes = std::strtoull(line.c_str() + colon + 1, nullptr, 10) * 1024;
    if (name == "Rss") {
      b.resident_bytes += bytes;
    } else if (name == "Shared_Hugetlb" || name == "Private_Hugetlb") {
      b.resident_bytes += bytes;  // hugetlb pages are not in Rss
      b.huge_bytes += bytes;
    } else if (name == "AnonHugePages" || name == "ShmemPmdMapped" || name == "FilePmdMapped") {
      b.huge_bytes += bytes;
    } else if (name == "KernelPageSize") {
      b.page_bytes = std::max(b.page_bytes, bytes);
    }
  }
  return b;
}

}  // namespace nvindex::pm
