// Block storage of the NVMe indexes (issue 14; DESIGN.md §2, nvme/): a file on
// a disk's file system, or a block device, opened with O_DIRECT so that every
// read and write goes to the device and none is absorbed by the page cache
// (PA-Tree's own buffers are the only cache, as with the paper's SPDK, which
// bypasses the kernel entirely).
//
// A path that does not exist becomes a new file of the requested size,
// preallocated with fallocate(2) (so a write never fails for lack of space
// and never changes the file's size: only data reaches the disk, no file
// metadata, and fdatasync(2) then flushes the device's write cache alone).
// A path on tmpfs or ramfs is refused: it is memory, not a disk, and its
// "direct" I/O would measure memcpy. The file or device is locked with
// flock(LOCK_EX) while open, so a second open (another process, or the same
// one) gets Busy, after waiting up to a second for the lock (a killed
// process's io_uring holds it until the kernel's asynchronous teardown),
// instead of two trees writing one device.
//
// Errors are Status values naming the path and the OS's reason.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "nvindex/status.h"

namespace nvindex::nvme {

/// The smallest unit of NVMe I/O and of a node, bytes (one logical block of
/// the usual NVMe format; the paper's node size).
inline constexpr uint32_t kSectorBytes = 512;
/// Alignment of every I/O buffer, bytes (a page: enough for any O_DIRECT
/// alignment a device asks for).
inline constexpr size_t kIoAlign = 4096;

/// A heap buffer aligned to kIoAlign, for O_DIRECT I/O; zero-filled. Move-only.
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  /// `bytes` rounded up to kIoAlign; aborts (std::bad_alloc) when memory is
  /// exhausted, like operator new.
  explicit AlignedBuffer(size_t bytes);
  AlignedBuffer(AlignedBuffer&& o) noexcept : p_(o.p_), n_(o.n_) { o.p_ = nullptr, o.n_ = 0; }
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept;
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  ~AlignedBuffer();

  std::byte* data() const { return p_; }
  size_t size() const { return n_; }

 private:
  std::byte* p_ = nullptr;
  size_t n_ = 0;
};

/// An open file or block device for direct I/O.
class BlockDevice {
 public:
  /// Opens `path` read-write with O_DIRECT. When it does not exist and
  /// create_bytes > 0, creates a regular file of create_bytes bytes (rounded
  /// down to kIoAlign), preallocated, and reports created() = true.
  /// Errors: InvalidArgument (empty path; missing path with create_bytes 0;
  /// a path on tmpfs or ramfs; a directory or other non-regular, non-block
  /// file; a device smaller than 2 * kIoAlign), Busy (locked by another
  /// open), IOError (open, fallocate, or the device refuses O_DIRECT, with
  /// the OS's message). A new file that cannot be completed is removed.
  static Status open(const std::string& path, uint64_t create_bytes,
                     std::unique_ptr<BlockDevice>* out);

  BlockDevice(const BlockDevice&) = delete;
  BlockDevice& operator=(const BlockDevice&) = delete;
  ~BlockDevice();  ///< unlocks and closes

  int fd() const { return fd_; }
  /// Usable size, bytes: the file's size, or the block device's
  /// (BLKGETSIZE64), rounded down to kIoAlign.
  uint64_t bytes() const { return bytes_; }
  /// The alignment O_DIRECT needs for offsets and lengths, bytes: the block
  /// device's logical block size (BLKSSZGET), or for a file statx's
  /// dio_offset_align when the kernel reports it, else 512.
  uint32_t direct_io_align() const { return align_; }
  bool is_block_device() const { return block_device_; }
  bool created() const { return created_; }
  const std::string& path() const { return path_; }

  /// Synchronous pread(2)/pwrite(2) of exactly `len` bytes at `offset`
  /// (both multiples of direct_io_align(), `buf` aligned to kIoAlign),
  /// retried on short transfers. IOError naming the offset otherwise.
  Status read(uint64_t offset, void* buf, size_t len) const;
  Status write(uint64_t offset, const void* buf, size_t len) const;
  /// fdatasync(2): the written data (and the device's write cache) made
  /// durable. IOError otherwise.
  Status datasync() const;

 private:
  BlockDevice() = default;
  int fd_ = -1;
  uint64_t bytes_ = 0;
  uint32_t align_ = kSectorBytes;
  bool block_device_ = false;
  bool created_ = false;
  std::string path_;
};

}  // namespace nvindex::nvme
