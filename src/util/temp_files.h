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
// Thread-safety: RemoveOnSignal may be created and destroyed from any
// thread; a slot's path is written before the slot is published.
#pragma once

#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

namespace nvindex::util {

/// The directory for temporary pools: /dev/shm when writable (memory, like
/// an emulated PM device), else $TMPDIR when set, else /tmp.
inline std::string temp_pool_dir() {
  if (access("/dev/shm", W_OK | X_OK) == 0) return "/dev/shm";
  if (const char* d = std::getenv("TMPDIR"); d != nullptr && *d != '\0') return d;
  return "/tmp";
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
  char path[kMaxPathBytes] = {};
};
inline PathSlot g_slots[kMaxPaths];
inline std::atomic<uint64_t> g_next_seq{1};

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
    if (::unlink(g_slots[pick].path) != 0) ::rmdir(g_slots[pick].path);
    below = best;
  }
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}
}  // namespace detail

/// Registers `path` (a file or an empty-at-the-end directory) for removal on
/// SIGINT, SIGTERM or SIGHUP while this object lives; the owner removes the
/// path itself on the normal path. A path too long for a slot, or a full
/// table, is not registered (registered() says so): the run goes on, only
/// the cleanup on interruption is lost for it.
class RemoveOnSignal {
 public:
  explicit RemoveOnSignal(const std::string& path) {
    if (path.size() + 1 > detail::kMaxPathBytes) return;
    const uint64_t seq = detail::g_next_seq.fetch_add(1, std::memory_order_relaxed);
    for (int i = 0; i < detail::kMaxPaths; ++i) {
      detail::PathSlot& s = detail::g_slots[i];
      uint64_t expected = 0;
      // Claim with a sentinel so that the handler skips it while the path
      // is written, then publish the real sequence number.
      if (s.seq.compare_exchange_strong(expected, UINT64_MAX, std::memory_order_acquire)) {
        std::memcpy(s.path, path.c_str(), path.size() + 1);
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

}  // namespace nvindex::util
