#include "nvme/device.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <linux/magic.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>

namespace nvindex::nvme {

AlignedBuffer::AlignedBuffer(size_t bytes) {
  n_ = (bytes + kIoAlign - 1) / kIoAlign * kIoAlign;
  if (n_ == 0) return;
  p_ = static_cast<std::byte*>(std::aligned_alloc(kIoAlign, n_));
  if (p_ == nullptr) throw std::bad_alloc();
  std::memset(p_, 0, n_);
}

AlignedBuffer& AlignedBuffer::operator=(AlignedBuffer&& o) noexcept {
  if (this != &o) {
    std::free(p_);
    p_ = o.p_;
    n_ = o.n_;
    o.p_ = nullptr;
    o.n_ = 0;
  }
  return *this;
}

AlignedBuffer::~AlignedBuffer() { std::free(p_); }

namespace {

/// How long open() waits for another holder's lock to go, ms.
constexpr int kLockWaitMs = 1000;

std::string os_error(const std::string& what, const std::string& path, int err) {
  return what + " " + path + ": " + std::strerror(err);
}

/// The directory holding `path` (for statfs of a file not yet created).
std::string parent_dir(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

/// True when `dir` is on tmpfs or ramfs (memory, not a disk).
bool on_memory_fs(const std::string& dir) {
  struct statfs fs {};
  if (statfs(dir.c_str(), &fs) != 0) return false;
  return fs.f_type == TMPFS_MAGIC || fs.f_type == RAMFS_MAGIC;
}

uint32_t file_dio_align(int fd) {
#if defined(STATX_DIOALIGN)
  struct statx sx {};
  if (statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) == 0 && (sx.stx_mask & STATX_DIOALIGN) &&
      sx.stx_dio_offset_align != 0) {
    return sx.stx_dio_offset_align;
  }
#else
  (void)fd;
#endif
  return kSectorBytes;
}

}  // namespace

Status BlockDevice::open(const std::string& path, uint64_t create_bytes,
                         std::unique_ptr<BlockDevice>* out) {
  out->reset();
  if (path.empty()) return Status::InvalidArgument("device: empty path");
  struct stat st {};
  const bool exists = ::stat(path.c_str(), &st) == 0;
  if (!exists && errno != ENOENT) {
    return Status::IOError(os_error("device: cannot stat", path, errno));
  }
  const std::string dir = exists && S_ISBLK(st.st_mode) ? "/dev" : parent_dir(path);
  if (!(exists && S_ISBLK(st.st_mode)) && on_memory_fs(exists ? path : dir)) {
    return Status::InvalidArgument("device: " + path +
                                   " is on tmpfs or ramfs: that is memory, not a disk (and has "
                                   "no direct I/O); give a path on a disk's file system or a "
                                   "block device");
  }
  if (exists && !S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)) {
    return Status::InvalidArgument("device: " + path +
                                   " is neither a regular file nor a block device");
  }
  if (!exists && create_bytes == 0) {
    return Status::InvalidArgument("device: " + path + " does not exist (and no size to create)");
  }
  std::unique_ptr<BlockDevice> d(new BlockDevice());
  d->path_ = path;
  const int flags = O_RDWR | O_DIRECT | O_CLOEXEC | (exists ? 0 : O_CREAT | O_EXCL);
  d->fd_ = ::open(path.c_str(), flags, 0644);
  if (d->fd_ < 0) {
    const int err = errno;
    if (err == EINVAL) {
      return Status::IOError("device: " + path +
                             " refuses O_DIRECT (its file system has no "
                             "direct I/O)");
    }
    return Status::IOError(os_error("device: cannot open", path, err));
  }
  d->created_ = !exists;
  // From here a failure must not leave a half-made new file behind.
  auto fail = [&](Status s) {
    if (d->created_) ::unlink(path.c_str());
    return s;
  };
  // A process killed with an io_uring open keeps its lock until the kernel
  // tears that ring down, asynchronously, a few milliseconds after the
  // process is gone: wait up to kLockWaitMs before calling the device busy.
  for (int waited = 0;; waited += 10) {
    if (::flock(d->fd_, LOCK_EX | LOCK_NB) == 0) break;
    if (errno != EWOULDBLOCK) {
      return fail(Status::IOError(os_error("device: cannot lock", path, errno)));
    }
    if (waited >= kLockWaitMs) {
      return fail(Status::Busy("device: " + path + " is open elsewhere (locked)"));
    }
    ::usleep(10000);
  }
  if (d->created_) {
    const uint64_t bytes = create_bytes / kIoAlign * kIoAlign;
    if (bytes < 2 * kIoAlign) {
      return fail(Status::InvalidArgument("device: size " + std::to_string(create_bytes) +
                                          " B is too small (at least 8192 B)"));
    }
    if (int rc = ::posix_fallocate(d->fd_, 0, static_cast<off_t>(bytes)); rc != 0) {
      return fail(Status::IOError(
          os_error("device: cannot preallocate " + std::to_string(bytes) + " B for", path, rc)));
    }
    d->bytes_ = bytes;
    d->align_ = file_dio_align(d->fd_);
  } else if (S_ISBLK(st.st_mode)) {
    d->block_device_ = true;
    uint64_t bytes = 0;
    int sector = 0;
    if (::ioctl(d->fd_, BLKGETSIZE64, &bytes) != 0 || ::ioctl(d->fd_, BLKSSZGET, &sector) != 0) {
      return Status::IOError(os_error("device: cannot read the size of", path, errno));
    }
    d->bytes_ = bytes / kIoAlign * kIoAlign;
    d->align_ = static_cast<uint32_t>(sector);
  } else {
    d->bytes_ = static_cast<uint64_t>(st.st_size) / kIoAlign * kIoAlign;
    d->align_ = file_dio_align(d->fd_);
  }
  if (d->bytes_ < 2 * kIoAlign) {
    return fail(Status::InvalidArgument("device: " + path + " is too small (" +
                                        std::to_string(d->bytes_) + " B; at least 8192 B)"));
  }
  *out = std::move(d);
  return Status::Ok();
}

BlockDevice::~BlockDevice() {
  if (fd_ < 0) return;
  // Unlock explicitly: an io_uring that registered this file holds the same
  // open file description until its asynchronous teardown, so close() alone
  // could leave the lock on for a moment and a reopen would be Busy.
  (void)::flock(fd_, LOCK_UN);
  ::close(fd_);
}

namespace {
/// pread/pwrite of exactly `len` bytes, retried on short transfers and EINTR.
template <class Call>
Status transfer(const char* what, Call call, uint64_t offset, size_t len, const std::string& path) {
  size_t done = 0;
  while (done < len) {
    const ssize_t n = call(done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return Status::IOError(os_error(std::string("device: ") + what + " of " +
                                          std::to_string(len) + " B at offset " +
                                          std::to_string(offset) + " of",
                                      path, n < 0 ? errno : EIO));
    }
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}
}  // namespace

Status BlockDevice::read(uint64_t offset, void* buf, size_t len) const {
  auto call = [&](size_t done) {
    return ::pread(fd_, static_cast<char*>(buf) + done, len - done,
                   static_cast<off_t>(offset + done));
  };
  return transfer("read", call, offset, len, path_);
}

Status BlockDevice::write(uint64_t offset, const void* buf, size_t len) const {
  auto call = [&](size_t done) {
    return ::pwrite(fd_, static_cast<const char*>(buf) + done, len - done,
                    static_cast<off_t>(offset + done));
  };
  return transfer("write", call, offset, len, path_);
}

Status BlockDevice::datasync() const {
  if (::fdatasync(fd_) != 0) return Status::IOError(os_error("device: fdatasync of", path_, errno));
  return Status::Ok();
}

}  // namespace nvindex::nvme
