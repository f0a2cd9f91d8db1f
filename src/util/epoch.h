// Epoch-based reclamation (EBR) for lock-free indexes whose readers take no
// lock: a record unlinked from the structure may still be read by a thread
// that loaded its address before the unlink, so it is retired, not freed,
// and freed only once every thread that could hold it has moved on.
// Source: Fraser, "Practical lock-freedom", PhD thesis, Cambridge 2004, §5.2.3
// (epoch-based reclamation); the Bw-Tree's own epoch mechanism (Levandoski
// et al., ICDE'13 §V.A) is the same idea with a list of epoch objects.
//
// The scheme here:
// - a global epoch counter (64 bits, never wraps in practice);
// - one announce slot per thread (a 64 B line each, kMaxThreads of them):
//   Guard (enter) stores the global epoch into the thread's slot and loads
//   the global epoch again until both agree, then the thread may read the
//   structure; leaving stores kIdle. Guards nest (a depth count per slot);
// - one retire list per thread slot: retire(item) appends (item, epoch at
//   retirement). Every kReclaimBatch retirements the thread advances the
//   global epoch and frees, through the reclaim callback, each of its items
//   whose retirement epoch is below every active announcement.
//
// Why it is safe: an item is retired after it was unlinked, with epoch e
// read after the unlink. A thread whose announcement is a > e loaded a after
// the global epoch left e, i.e. after the unlink, and it reads the structure
// only after that load, so it cannot reach the item. A thread that was idle
// when the reclaimer scanned the slots either stored its announcement after
// the scan, hence re-read the global epoch after the reclaimer advanced it
// (all accesses are sequentially consistent) and announces > e, or before,
// and then the scan saw it. So an item with e < min(active announcements)
// has no reader left.
//
// Thread-safety: enter/leave/retire may be called from any number of threads
// at once. Each thread gets a process-wide slot id on its first use of any
// EpochManager (kMaxThreads live threads at most: a further one aborts with
// a message), released when the thread exits; a slot's retire list is only
// touched by the thread owning the slot id, and by drain() with no other
// thread inside the manager.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <utility>
#include <vector>

namespace nvindex {

/// Live threads an EpochManager serves at once (each gets one slot).
inline constexpr uint32_t kEpochMaxThreads = 256;

namespace epoch_detail {

/// The process-wide thread slot ids: handed out on a thread's first use,
/// returned at thread exit (a thread_local's destructor), lowest free first.
class SlotIds {
 public:
  static uint32_t acquire() {
    std::lock_guard<std::mutex> g(mu());
    std::vector<uint32_t>& f = free_list();
    if (!f.empty()) {
      const uint32_t id = f.back();
      f.pop_back();
      return id;
    }
    uint32_t& next = next_id();
    if (next >= kEpochMaxThreads) {
      std::fprintf(stderr, "nvindex: EpochManager: more than %u live threads\n", kEpochMaxThreads);
      std::abort();
    }
    return next++;
  }
  static void release(uint32_t id) {
    std::lock_guard<std::mutex> g(mu());
    free_list().push_back(id);
  }

 private:
  static std::mutex& mu() {
    static std::mutex m;
    return m;
  }
  static std::vector<uint32_t>& free_list() {
    static std::vector<uint32_t> f;
    return f;
  }
  static uint32_t& next_id() {
    static uint32_t n = 0;
    return n;
  }
};

/// This thread's slot id (acquired on first call, released at thread exit).
inline uint32_t thread_slot() {
  struct Holder {
    uint32_t id = SlotIds::acquire();
    ~Holder() { SlotIds::release(id); }
  };
  thread_local Holder h;
  return h.id;
}

}  // namespace epoch_detail

/// Epoch-based reclamation of 8-byte item handles (a pool offset, a pointer
/// cast to an integer): see the file comment. Memory: kEpochMaxThreads x
/// 64 B of slots (16 KiB) plus 16 B per retired, not yet freed item.
class EpochManager {
 public:
  /// Frees one retired item; called with `ctx` as given to the constructor.
  using Reclaim = void (*)(void* ctx, uint64_t item);
  /// A thread advances the epoch and tries to free its own retired items
  /// every this many retirements.
  static constexpr uint32_t kReclaimBatch = 64;
  /// The announcement of a thread outside every guard.
  static constexpr uint64_t kIdle = std::numeric_limits<uint64_t>::max();

  EpochManager(Reclaim reclaim, void* ctx) : reclaim_(reclaim), ctx_(ctx) {}
  /// Frees every item still retired (drain()); no thread may be inside.
  ~EpochManager() { drain(); }
  EpochManager(const EpochManager&) = delete;
  EpochManager& operator=(const EpochManager&) = delete;

  /// RAII critical section: while a Guard lives, no item retired after the
  /// Guard was made is freed. Nested Guards of one thread are allowed.
  class Guard {
   public:
    explicit Guard(EpochManager& m) : m_(m), slot_(epoch_detail::thread_slot()) { m_.enter(slot_); }
    ~Guard() { m_.leave(slot_); }
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;

   private:
    EpochManager& m_;
    uint32_t slot_;
  };

  /// Retires `item`, already unlinked from every place a new reader could
  /// find it: it is handed to the reclaim callback once no thread that may
  /// have read it is inside a Guard. May free some of this thread's earlier
  /// items (every kReclaimBatch calls).
  void retire(uint64_t item) {
    Slot& s = slots_[epoch_detail::thread_slot()];
    s.retired.emplace_back(item, global_.load(std::memory_order_seq_cst));
    pending_.fetch_add(1, std::memory_order_relaxed);
    if (++s.since_reclaim >= kReclaimBatch) {
      s.since_reclaim = 0;
      reclaim(s);
    }
  }

  /// Advances the epoch and frees what this thread retired that no Guard
  /// can reach any more: what retire() does every kReclaimBatch calls, on
  /// demand (a caller short of items, e.g. PMwCAS descriptors).
  void collect() {
    Slot& s = slots_[epoch_detail::thread_slot()];
    s.since_reclaim = 0;
    reclaim(s);
  }

  /// Frees every retired item of every slot at once. Only with no thread
  /// inside the manager (an index's destructor, a quiescent test).
  void drain() {
    for (Slot& s : slots_) {
      for (const auto& r : s.retired) reclaim_(ctx_, r.first);
      pending_.fetch_sub(s.retired.size(), std::memory_order_relaxed);
      s.retired.clear();
      s.retired.shrink_to_fit();
    }
  }

  /// Items retired and not yet freed (a snapshot while others retire).
  uint64_t pending() const { return pending_.load(std::memory_order_relaxed); }

  /// The global epoch (tests).
  uint64_t epoch() const { return global_.load(std::memory_order_seq_cst); }

 private:
  struct alignas(64) Slot {
    std::atomic<uint64_t> announce{kIdle};
    uint32_t depth = 0;                                  ///< nesting of this thread's Guards
    uint32_t since_reclaim = 0;                          ///< retirements since the last reclaim
    std::vector<std::pair<uint64_t, uint64_t>> retired;  ///< (item, epoch at retirement)
  };

  void enter(uint32_t slot) {
    Slot& s = slots_[slot];
    if (s.depth++ > 0) return;
    uint64_t e = global_.load(std::memory_order_seq_cst);
    for (;;) {
      s.announce.store(e, std::memory_order_seq_cst);
      const uint64_t again = global_.load(std::memory_order_seq_cst);
      if (again == e) return;
      e = again;
    }
  }
  void leave(uint32_t slot) {
    Slot& s = slots_[slot];
    if (--s.depth == 0) s.announce.store(kIdle, std::memory_order_release);
  }
  /// Advances the global epoch, then frees the items of `s` retired before
  /// every active announcement.
  void reclaim(Slot& s) {
    uint64_t min = global_.fetch_add(1, std::memory_order_seq_cst) + 1;
    for (const Slot& o : slots_) min = std::min(min, o.announce.load(std::memory_order_seq_cst));
    size_t kept = 0;
    for (size_t i = 0; i < s.retired.size(); ++i) {
      if (s.retired[i].second < min) {
        reclaim_(ctx_, s.retired[i].first);
      } else {
        s.retired[kept++] = s.retired[i];
      }
    }
    pending_.fetch_sub(s.retired.size() - kept, std::memory_order_relaxed);
    s.retired.resize(kept);
  }

  Reclaim reclaim_;
  void* ctx_;
  std::atomic<uint64_t> global_{1};
  std::atomic<uint64_t> pending_{0};  ///< retired, not yet freed
  Slot slots_[kEpochMaxThreads];
};

}  // namespace nvindex
