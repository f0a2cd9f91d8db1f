// Temporary pool files and directories of the command-line tools: where they
// go (temp_pool_dir) and their removal when the user interrupts a run. A run
// of `nvindex bench` or `nvindex tpcc` without --pool creates its pools in
// /dev/shm (memory) and removes them when it ends; without this, Ctrl-C or a
// kill left them behind, holding memory until someone deleted them.
//
// RemoveOnSignal registers a path for the lifetime of the object; a tool's
// main() calls install_remove_on_signal() once, after which SIGINT, SIGTERM
// and SIGHUP remove every registered path, newest first (so a directory's
// files before the directory), then end the process by the same signal (its
// exit status says so). The handler uses only unlink() and rmdir(), which
// are async-signal-safe; the registry is a fixed table of kMaxPaths slots
// claimed and released with atomics, so registering never allocates.
// Registration without install_remove_on_signal() (the libraries' tests)
// only records the path.
//
// A directory registered as a tree (RemoveOnSignal(path, true), as TempDir
// does) is removed with what it holds (files and directories, kMaxDepth
// levels deep, by getdents64/unlinkat/rmdir: system calls, safe in a signal
// handler), so a block-device index's store (a LevelDB directory, a PA-Tree
// file) in a TempDir goes too; any other directory only when empty.
//
// TempDir is the temporary directory on a real disk that block-device
// indexes (Placement::kBlockDevice) get in the tests and in `nvindex bench
// --device` (temp_device_dir: $NVINDEX_DEVICE_DIR, else /var/tmp; never
// /dev/shm, which is tmpfs: no O_DIRECT, not a disk).
//
// Thread-safety: RemoveOnSignal may be created and destroyed from any
// thread; a slot's path is written before the slot is published.
#pragma once

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

namespace nvindex::util {

/// The directory for temporary pools: $NVINDEX_POOL_DIR when set (e.g. a
/// hugetlbfs mount, or a tmpfs mounted with huge=within_size, so that pools
/// get 2 MiB pages as PM on DAX does: docs/bench.md, "Page size"), else
/// /dev/shm when writable (memory, like an emulated PM device), else $TMPDIR
/// when set, else /tmp.
inline std::string temp_pool_dir() {
  if (const char* d = std::getenv("NVINDEX_POOL_DIR"); d != nullptr && *d != '\0') return d;
  if (access("/dev/shm", W_OK | X_OK) == 0) return "/dev/shm";
  if (const char* d = std::getenv("TMPDIR"); d != nullptr && *d != '\0') return d;
  return "/tmp";
}

/// A path in temp_pool_dir() that names nothing yet:
/// <dir>/<stem>-<pid>-<n>.pool for the first n (one counter per process,
/// from 0) whose path does not exist, so a leftover of an earlier process
/// with the same pid is never reused. Nothing is created (two processes
/// never share a pid at once, and n is taken atomically).
inline std::string fresh_temp_path(std::string_view stem) {
  static std::atomic<unsigned> serial{0};
  const std::string base =
      temp_pool_dir() + "/" + std::string(stem) + "-" + std::to_string(::getpid()) + "-";
  for (;;) {
    std::string p = base + std::to_string(serial.fetch_add(1)) + ".pool";
    if (::access(p.c_str(), F_OK) != 0) return p;
  }
}

namespace detail {
/// Most paths registered at once (a TPC-C run: one directory and 10 pools
/// per index in flight).
inline constexpr int kMaxPaths = 64;
/// Longest path kept, bytes with the terminating NUL (longer ones are not
/// registered: PATH_MAX).
inline constexpr size_t kMaxPathBytes = 4096;
struct PathSlot {
  std::atomic<uint64_t> seq{0};  ///< 0 = free; else registration order (1, 2, ...)
  bool tree = false;             ///< remove a directory with its contents
  char path[kMaxPathBytes] = {};
};
inline PathSlot g_slots[kMaxPaths];
inline std::atomic<uint64_t> g_next_seq{1};

/// Directory levels remove_tree() descends.
inline constexpr int kMaxDepth = 4;

/// Removes what directory `dfd` (an open descriptor) holds, `depth` levels
/// deep, then closes it. System calls only (async-signal-safe).
inline void remove_tree_at(int dfd, int depth) {
  alignas(8) char buf[2048];
  for (;;) {
    const long n = ::syscall(SYS_getdents64, dfd, buf, sizeof buf);
    if (n <= 0) break;
    for (long off = 0; off < n;) {
      struct Dirent64 {
        uint64_t ino;
        int64_t off;
        unsigned short reclen;
        unsigned char type;
        char name[1];
      };
      const auto* d = reinterpret_cast<const Dirent64*>(buf + off);
      off += d->reclen;
      const char* name = d->name;
      if (name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'))) continue;
      if (::unlinkat(dfd, name, 0) == 0 || depth <= 0) continue;
      const int sub = ::openat(dfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
      if (sub >= 0) remove_tree_at(sub, depth - 1);
      ::unlinkat(dfd, name, AT_REMOVEDIR);
    }
  }
  ::close(dfd);
}

/// Removes `path`: a file, or a directory with what it holds (kMaxDepth
/// levels). System calls only (async-signal-safe).
inline void remove_tree(const char* path) {
  if (::unlink(path) == 0 || ::rmdir(path) == 0) return;
  const int dfd = ::open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (dfd < 0) return;
  remove_tree_at(dfd, kMaxDepth);
  ::rmdir(path);
}

/// Removes every registered path, newest first, then re-raises `sig` with
/// the default action.
inline void remove_registered_and_reraise(int sig) {
  uint64_t below = UINT64_MAX;
  for (;;) {
    int pick = -1;
    uint64_t best = 0;
    for (int i = 0; i < kMaxPaths; ++i) {
      const uint64_t s = g_slots[i].seq.load(std::memory_order_acquire);
      if (s != 0 && s < below && s > best) {
        best = s;
        pick = i;
      }
    }
    if (pick < 0) break;
    if (g_slots[pick].tree) {
      remove_tree(g_slots[pick].path);
    } else if (::unlink(g_slots[pick].path) != 0) {
      ::rmdir(g_slots[pick].path);
    }
    below = best;
  }
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}
}  // namespace detail

/// Registers `path` (a file or an empty-at-the-end directory; with `tree`, a
/// directory removed with its contents) for removal on SIGINT, SIGTERM or
/// SIGHUP while this object lives; the owner removes the path itself on the
/// normal path. A path too long for a slot, or a full
/// table, is not registered (registered() says so): the run goes on, only
/// the cleanup on interruption is lost for it.
class RemoveOnSignal {
 public:
  explicit RemoveOnSignal(const std::string& path, bool tree = false) {
    if (path.size() + 1 > detail::kMaxPathBytes) return;
    const uint64_t seq = detail::g_next_seq.fetch_add(1, std::memory_order_relaxed);
    for (int i = 0; i < detail::kMaxPaths; ++i) {
      detail::PathSlot& s = detail::g_slots[i];
      uint64_t expected = 0;
      // Claim with a sentinel so that the handler skips it while the path
      // is written, then publish the real sequence number.
      if (s.seq.compare_exchange_strong(expected, UINT64_MAX, std::memory_order_acquire)) {
        std::memcpy(s.path, path.c_str(), path.size() + 1);
        s.tree = tree;
        s.seq.store(seq, std::memory_order_release);
        slot_ = i;
        return;
      }
    }
  }
  ~RemoveOnSignal() {
    if (slot_ >= 0) detail::g_slots[slot_].seq.store(0, std::memory_order_release);
  }
  RemoveOnSignal(const RemoveOnSignal&) = delete;
  RemoveOnSignal& operator=(const RemoveOnSignal&) = delete;
  /// True when the path is in the table.
  bool registered() const { return slot_ >= 0; }

 private:
  int slot_ = -1;
};

/// Installs the removal handler for SIGINT, SIGTERM and SIGHUP, except for
/// a signal the process ignores (e.g. SIGHUP under nohup). Call once from
/// main().
inline void install_remove_on_signal() {
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;
    struct sigaction sa {};
    sa.sa_handler = detail::remove_registered_and_reraise;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND;  // a second signal during the cleanup ends the process at once
    ::sigaction(sig, &sa, nullptr);
  }
}

/// Bytes a new file in directory `dir` can take: statvfs's f_bavail *
/// f_frsize, except on a hugetlbfs mount without a size limit (f_blocks 0),
/// where it is the free huge pages of the mount's page size
/// (/sys/kernel/mm/hugepages/hugepages-<kB>kB/free_hugepages) times that
/// size. nullopt when the directory cannot be statfs'd.
inline std::optional<uint64_t> free_bytes_in(const std::string& dir) {
  struct statfs fs {};
  if (::statfs(dir.c_str(), &fs) != 0) return std::nullopt;
  const uint64_t unit = fs.f_frsize ? fs.f_frsize : fs.f_bsize;
  if (fs.f_type != HUGETLBFS_MAGIC || fs.f_blocks != 0) return uint64_t(fs.f_bavail) * unit;
  std::FILE* f = std::fopen(("/sys/kernel/mm/hugepages/hugepages-" +
                             std::to_string(fs.f_bsize / 1024) + "kB/free_hugepages")
                                .c_str(),
                            "r");
  if (f == nullptr) return std::nullopt;
  unsigned long long pages = 0;
  const bool read = std::fscanf(f, "%llu", &pages) == 1;
  std::fclose(f);
  if (!read) return std::nullopt;
  return pages * uint64_t(fs.f_bsize);
}

/// True when `path` is on tmpfs or devtmpfs (statfs f_type TMPFS_MAGIC): memory, not a
/// disk, and no O_DIRECT, so no place for a block-device index. False when
/// it is not, or cannot be statfs'd.
inline bool on_tmpfs(const std::string& path) {
  struct statfs fs {};
  return ::statfs(path.c_str(), &fs) == 0 && fs.f_type == TMPFS_MAGIC;
}

/// The parent directory of temporary block-device stores: $NVINDEX_DEVICE_DIR
/// when set, else /var/tmp (on the root file system's disk; /tmp and
/// /dev/shm may be tmpfs).
inline std::string temp_device_dir() {
  if (const char* d = std::getenv("NVINDEX_DEVICE_DIR"); d != nullptr && *d != '\0') return d;
  return "/var/tmp";
}

/// A new directory `<parent>/<prefix>XXXXXX` (mkdtemp), removed with its
/// contents when the object is destroyed and, while it lives, on SIGINT,
/// SIGTERM and SIGHUP (RemoveOnSignal). keep() leaves it in place.
class TempDir {
 public:
  TempDir() = default;
  /// Creates the directory; ok() is false (and error() says why) when mkdtemp
  /// fails.
  TempDir(const std::string& parent, const std::string& prefix) {
    std::string templ = parent + "/" + prefix + "XXXXXX";
    if (::mkdtemp(templ.data()) == nullptr) {
      error_ = "cannot create a directory in " + parent + ": " + std::strerror(errno);
      return;
    }
    path_ = std::move(templ);
    guard_ = std::make_unique<RemoveOnSignal>(path_, true);
  }
  ~TempDir() {
    guard_.reset();
    if (!path_.empty() && !keep_) {
      std::error_code ec;
      std::filesystem::remove_all(path_, ec);
    }
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  bool ok() const { return !path_.empty(); }
  const std::string& error() const { return error_; }
  /// The directory (empty when creation failed).
  const std::string& path() const { return path_; }
  /// Leaves the directory when the object is destroyed.
  void keep() { keep_ = true; }

 private:
  std::string path_;
  std::string error_;
  bool keep_ = false;
  std::unique_ptr<RemoveOnSignal> guard_;
};

}  // namespace nvindex::util
