// bztree: see bztree.h and docs/indexes/bztree.md.
#include "indexes/bztree/bztree.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "indexes/common/factory.h"
#include "indexes/common/persistent.h"
#include "nvindex/pm/counters.h"
#include "nvindex/pm/persist.h"
#include "nvindex/pm/pool.h"
#include "pm/pmwcas.h"
#include "util/epoch.h"
#include "util/hex.h"

namespace nvindex {
namespace bztree {

bool valid_node_size(uint32_t bytes) {
  return bytes >= 256 && bytes <= 4096 && std::has_single_bit(bytes);
}

uint32_t descriptors_for(unsigned threads) {
  const uint64_t want = uint64_t{kDescriptorsPerThread} * (uint64_t{threads} + 1);
  const uint64_t most = uint64_t{pm::Pmwcas::kMaxBlocks} * pm::Pmwcas::kDescriptorsPerBlock;
  return static_cast<uint32_t>(std::clamp<uint64_t>(want, 128, most));
}

namespace {

constexpr char kName[] = "bztree";
constexpr auto kRlx = std::memory_order_relaxed;

/// A leaf metadata word for a published record in slot `i` of a node of
/// `node_size` bytes (bztree.h: visible, offset, key length, total length).
uint64_t visible_meta(uint32_t node_size, uint32_t i) {
  const uint64_t off = node_size - kRecordBytes * (i + 1);
  return kVisible | (off << 32) | (uint64_t{8} << 16) | kRecordBytes;
}
/// The same record not visible: deleted, or a dead reservation.
uint64_t dead_meta(uint32_t node_size, uint32_t i) {
  return visible_meta(node_size, i) & ~kVisible;
}

/// What a leaf or SMO step tells its operation's loop.
enum class Step { kDone, kRetry };

/// An operation's two epoch guards: PMwCAS words (the descriptor pool's
/// manager) and tree nodes (the tree's own). A thread that must wait for
/// another one leaves the words guard while it waits: a thread inside it
/// holds back the reuse of every descriptor retired since, so waiting
/// inside could starve the very thread waited for of descriptors
/// (Pmwcas::begin() Busy, which makes every thread wait). The nodes guard
/// stays, so every node pointer the operation holds stays valid.
class OpGuards {
 public:
  OpGuards(EpochManager& words, EpochManager& nodes)
      : words_(words), nodes_guard_(nodes), outer_(current_) {
    words_guard_.emplace(words_);
    current_ = this;
  }
  ~OpGuards() { current_ = outer_; }
  OpGuards(const OpGuards&) = delete;
  OpGuards& operator=(const OpGuards&) = delete;
  /// Leaves the words guard, yields, enters it again: every word must be
  /// read again (through Pmwcas::read) after it.
  void pause() {
    words_guard_.reset();
    std::this_thread::yield();
    words_guard_.emplace(words_);
  }
  /// The guards of this thread's operation in progress (nullptr outside).
  static OpGuards* current() { return current_; }

 private:
  EpochManager& words_;
  EpochManager::Guard nodes_guard_;
  std::optional<EpochManager::Guard> words_guard_;
  OpGuards* outer_;
  static thread_local OpGuards* current_;
};
thread_local OpGuards* OpGuards::current_ = nullptr;

}  // namespace

class BzTree final : public PersistentIndex {
 public:
  BzTree(pm::Pool* pool, uint32_t node_size, unsigned threads)
      : PersistentIndex(pool),
        node_size_(node_size),
        threads_(threads),
        epoch_(&BzTree::reclaim_node, this) {}
  ~BzTree() override {
    epoch_.drain();
    for (uint64_t n : reserve_) pool_->allocator().free(n);
    reserve_.clear();
    if (mw_) this->record_close_keys();
  }

  Status create();
  Status recover();

  Status insert(uint64_t key, Value value) override;
  Status update(uint64_t key, Value value) override;
  Status remove(uint64_t key) override;
  std::optional<Value> lookup(uint64_t key) override;
  size_t scan(uint64_t start, size_t count, std::vector<std::pair<uint64_t, Value>>* out) override;
  std::optional<std::pair<uint64_t, Value>> find_last_less_than(uint64_t key) override;
  IndexInfo info() const override {
    return persistent_info(kName, kBzTreeDescription,
                           Capabilities{.ordered = true,
                                        .persistent = true,
                                        .thread_safe = true,
                                        .placement = Placement::kPmOnly},
                           node_size_, sizeof(*this));
  }
  Status verify(VerifyReport* report) const override;
  std::vector<std::pair<std::string, std::string>> ablation_notes() const override {
    const std::string before_pmwcas =
        "redundant before the PMwCAS that publishes it: Pmwcas::Op::execute persists its "
        "descriptor with a fence (pmwcas.prepare) before any target word changes, and that fence "
        "also commits this flush; kept so that the persist-before-publish rule does not rest on "
        "PMwCAS's internals";
    return {
        {"bztree.insert.record/fence", before_pmwcas},
        {"bztree.update.record/fence", before_pmwcas},
        {"bztree.node.leaf/fence", before_pmwcas + " (the install or root change)"},
        {"bztree.node.inner/fence", before_pmwcas + " (the install or root change)"},
        {"pmwcas.create/fence",
         "redundant at creation: the descriptor blocks and directory are flushed, and "
         "Pool::set_root's persist, which publishes the root object naming the directory, "
         "fences them before anything can reach them"},
        {"pmwcas.complete/flush",
         "needed, caught by PMwCAS's own crash lab (tests/crash_pmwcas_test.cc, whose 16 "
         "descriptors are reused within its script): a completed descriptor is freed for reuse "
         "after its words' final values, and without this flush a crash after the reuse loses a "
         "final value recovery can no longer roll forward. This self-test's 20 operations never "
         "reuse one of BzTree's 128 descriptors, so no image here shows it"},
        {"pmwcas.complete/fence",
         "needed, caught by PMwCAS's own crash lab as pmwcas.complete/flush (the fence makes the "
         "final values durable before the dirty bits are cleared and the descriptor is reused)"},
    };
  }

  Events events() const {
    Events e;
    e.consolidations = ev_consolidations_.load(kRlx);
    e.splits = ev_splits_.load(kRlx);
    e.inner_splits = ev_inner_splits_.load(kRlx);
    e.merges = ev_merges_.load(kRlx);
    e.root_changes = ev_root_changes_.load(kRlx);
    e.install_retries = ev_install_retries_.load(kRlx);
    return e;
  }

 private:
  /// The nodes from the root to a leaf: node[d] at depth d (0 = root),
  /// slot[d] the entry of node[d] followed; low / high bound the leaf's keys.
  struct Path {
    uint64_t node[kMaxHeight];
    uint32_t slot[kMaxHeight];
    uint32_t depth = 0;  ///< index of the last node (the leaf, or the stop node)
    uint64_t low = 0;
    bool has_low = false;
    uint64_t high = 0;
    bool has_high = false;
  };
  /// One replacement of a node in its parent: the new node and, for the
  /// second of a split, its separator (the first key it holds).
  struct Repl {
    uint64_t key;
    uint64_t node;
  };
  /// One word of a PMwCAS.
  struct Word {
    std::atomic<uint64_t>* word;
    uint64_t old_value;
    uint64_t new_value;
  };
  /// The nodes an SMO froze (it owns them) and the new ones it built.
  struct Smo {
    std::vector<uint64_t> frozen;
    std::vector<uint64_t> fresh;
  };

  /// The epoch manager's reclaim callback: refills the reserve, frees the
  /// other nodes.
  static void reclaim_node(void* ctx, uint64_t off) {
    auto* t = static_cast<BzTree*>(ctx);
    {
      std::lock_guard<std::mutex> g(t->reserve_mu_);
      if (t->reserve_.size() < kReserveNodes) {
        t->reserve_.push_back(off);
        return;
      }
    }
    t->pool_->allocator().free(off);
  }
  /// Allocates up to kReserveNodes nodes into the reserve. OutOfSpace.
  Status fill_reserve() {
    std::lock_guard<std::mutex> g(reserve_mu_);
    while (reserve_.size() < kReserveNodes) {
      uint64_t off = 0;
      if (Status s = pool_->allocator().allocate(node_size_, &off); !s.ok()) return s;
      reserve_.push_back(off);
    }
    return Status::Ok();
  }

  NodeHeader* hdr(uint64_t off) const { return pool_->ptr<NodeHeader>(off); }
  std::atomic<uint64_t>* meta(uint64_t leaf, uint32_t i) const {
    return reinterpret_cast<std::atomic<uint64_t>*>(pool_->base() + leaf + kHeaderBytes + 8 * i);
  }
  const Record* rec(uint64_t leaf, uint32_t i) const {
    return reinterpret_cast<const Record*>(pool_->base() + leaf + node_size_ -
                                           kRecordBytes * (i + 1));
  }
  InnerEntry* entry(uint64_t inner, uint32_t i) const {
    return reinterpret_cast<InnerEntry*>(pool_->base() + inner + kHeaderBytes + kEntryBytes * i);
  }
  uint64_t rd(std::atomic<uint64_t>* w) const { return mw_->read(w); }
  /// Slots a leaf may use: 32 + 24 (n) <= 3/4 S.
  uint32_t leaf_slots() const { return (node_size_ * 3 / 4 - kHeaderBytes) / 24; }
  /// Slots that fit in a leaf at all (an update of a full pool may use the
  /// room above the split threshold).
  uint32_t physical_slots() const { return (node_size_ - kHeaderBytes) / 24; }
  /// Most live records a consolidated or merged leaf takes: 32 + 24 n <= S/2.
  uint32_t compact_records() const { return (node_size_ / 2 - kHeaderBytes) / 24; }
  /// Live records below which a leaf is merged: 32 + 24 n < S/4.
  bool below_merge(uint32_t live) const { return kHeaderBytes + 24 * live < node_size_ / 4; }
  uint32_t inner_capacity() const { return (node_size_ - kHeaderBytes) / kEntryBytes; }

  /// Runs one PMwCAS over `words`; true when it succeeded. Inside an
  /// operation's OpGuards; while every descriptor is in use it waits
  /// outside the words guard (OpGuards::pause).
  bool pmwcas(std::initializer_list<Word> words) {
    std::unique_ptr<pm::Pmwcas::Op> op;
    while (!mw_->begin(&op).ok()) OpGuards::current()->pause();
    for (const Word& w : words) {
      if (!op->add(w.word, w.old_value, w.new_value)) {
        std::fprintf(stderr, "bztree: PMwCAS word refused (a bug)\n");
        std::abort();
      }
    }
    return op->execute();
  }

  /// Descends to the leaf covering `key` (or, with stop_level > 0, to the
  /// node of that level on key's path), filling *p.
  void descend(uint64_t key, Path* p, uint32_t stop_level = 0) const;
  /// Visible records of `leaf` (count slots), sorted by key.
  void live_records(uint64_t leaf, uint32_t count, std::vector<Record>* out) const;
  /// live_records() of `leaf` read twice-checked: repeated until the
  /// status word is the same before and after (readers of scan and
  /// find_last_less_than).
  void stable_records(uint64_t leaf, std::vector<Record>* out) const;
  /// Slot of the visible record of `key` in `leaf` (count slots) and its
  /// metadata; false when none.
  bool find_visible(uint64_t leaf, uint32_t count, uint64_t key, uint32_t* slot, uint64_t* m) const;

  /// A new node from an image (persisted before return); with
  /// `from_reserve`, a full pool's node comes from the reserve. OutOfSpace.
  Status write_node(const std::vector<char>& img, uint64_t* off, pm::Site site,
                    bool from_reserve = false);
  Status new_leaf(const std::vector<Record>& recs, uint64_t* off, bool from_reserve = false);
  Status new_inner(uint32_t level, const std::vector<Repl>& entries, uint64_t* off);

  /// The operations, one attempt each inside the guards (kRetry: traverse
  /// again after leaving them).
  /// Writes record {key, value} into `leaf`'s reserved slot `slot` and
  /// persists it (flush + fence at `site`), for insert and update.
  /// Crash argument: the record is durable before the PMwCAS that makes it
  /// visible, so a visible record is never torn; until then its slot is
  /// reserved and every read ignores it.
  void write_record(uint64_t leaf, uint32_t slot, uint64_t key, Value value, pm::Site site);
  /// Gives reserved slot `slot` of `leaf` up (one word, without the status
  /// word, so also in a frozen node, whose SMO may be abandoned): it becomes
  /// garbage and no later insert waits for it. Recovery does the same after
  /// a crash.
  void drop_reservation(uint64_t leaf, uint32_t slot);
  Step try_insert(uint64_t key, Value value, OpGuards& g, Status* out);
  Step try_update(uint64_t key, Value value, bool slack, Status* out);
  Step try_remove(uint64_t key, Status* out);

  /// Freezes the leaf of path p (if nobody else has) and consolidates or
  /// splits it. kRetry when done or when another thread owns it.
  Step leaf_smo(Path& p, uint64_t key, Status* out);
  /// Merges the node of level `level` on key's path with a sibling under
  /// the same parent when it is small and the two fit in one (best effort);
  /// true when it did and the new parent is small in turn.
  bool merge_at(uint64_t key, uint32_t level);
  /// Below the merge threshold: a leaf's live records need < 1/4 S, an
  /// inner node's entries too.
  bool small(uint64_t n) const {
    const NodeHeader* h = hdr(n);
    if (h->level > 0) return kHeaderBytes + kEntryBytes * h->count < node_size_ / 4;
    const auto count = static_cast<uint32_t>(rd(&hdr(n)->status) & kCountMask);
    uint32_t live = 0;
    for (uint32_t i = 0; i < count; ++i) live += (rd(meta(n, i)) & kVisible) ? 1 : 0;
    return below_merge(live);
  }
  /// Installs `repl` in place of the frozen node at depth `d` of p (owned
  /// by `smo`), freezing and copying ancestors as needed; on success the
  /// frozen nodes are retired. OutOfSpace: every frozen node is unfrozen
  /// and every fresh node freed.
  Status install(Path& p, uint32_t d, std::vector<Repl> repl, uint64_t key, Smo* smo);
  /// Finds again the path to the frozen node `n` (level `level`) along key.
  void refind(uint64_t key, uint64_t n, uint32_t level, Path* p, uint32_t* d);
  /// Gives up an SMO: unfreezes its frozen nodes, frees its fresh ones.
  void abandon(Smo* smo);

  Status walk(uint64_t node, uint32_t depth, uint64_t low, bool has_low, uint64_t high,
              bool has_high, VerifyReport* r, uint32_t* leaf_depth) const;

  uint32_t node_size_;
  unsigned threads_;
  RootObject* root_ = nullptr;
  std::unique_ptr<pm::Pmwcas> mw_;
  mutable EpochManager epoch_;
  /// Nodes kept for consolidations when the pool is full (a consolidation
  /// frees the node it replaces, which refills the reserve).
  static constexpr size_t kReserveNodes = 4;
  std::mutex reserve_mu_;
  std::vector<uint64_t> reserve_;
  std::atomic<uint64_t> ev_consolidations_{0}, ev_splits_{0}, ev_inner_splits_{0}, ev_merges_{0},
      ev_root_changes_{0}, ev_install_retries_{0};
};

// ---------------------------------------------------------------- nodes

Status BzTree::write_node(const std::vector<char>& img, uint64_t* off, pm::Site site,
                          bool from_reserve) {
  if (Status s = pool_->allocator().allocate(node_size_, off); !s.ok()) {
    if (!from_reserve || s.code() != Code::kOutOfSpace) return s;
    for (int attempt = 0;; ++attempt) {
      {
        std::lock_guard<std::mutex> g(reserve_mu_);
        if (!reserve_.empty()) {
          *off = reserve_.back();
          reserve_.pop_back();
          break;
        }
      }
      if (attempt > 0) return s;
      epoch_.collect();  // this thread's retired nodes no guard sees refill it
    }
  }
  // Crash argument: the node is written whole and persisted before any
  // PMwCAS can make it reachable (an install or a root change); a crash
  // before that leaves an unreachable block, freed by recovery's
  // reachability pass.
  char* p = pool_->base() + *off;
  pm::copy(p, img.data(), node_size_);
  pm::persist(p, node_size_, site);
  return Status::Ok();
}

Status BzTree::new_leaf(const std::vector<Record>& recs, uint64_t* off, bool from_reserve) {
  std::vector<char> img(node_size_, 0);
  auto* h = reinterpret_cast<NodeHeader*>(img.data());
  const auto n = static_cast<uint32_t>(recs.size());
  h->status.store(n, kRlx);
  h->level = 0;
  h->count = n;  // all sorted
  for (uint32_t i = 0; i < n; ++i) {
    const uint64_t m = visible_meta(node_size_, i);
    std::memcpy(img.data() + kHeaderBytes + 8 * i, &m, 8);
    std::memcpy(img.data() + node_size_ - kRecordBytes * (i + 1), &recs[i], kRecordBytes);
  }
  return write_node(img, off, {"bztree.node.leaf"}, from_reserve);
}

Status BzTree::new_inner(uint32_t level, const std::vector<Repl>& entries, uint64_t* off) {
  std::vector<char> img(node_size_, 0);
  auto* h = reinterpret_cast<NodeHeader*>(img.data());
  h->status.store(0, kRlx);
  h->level = level;
  h->count = static_cast<uint32_t>(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    std::memcpy(img.data() + kHeaderBytes + kEntryBytes * i, &entries[i].key, 8);
    std::memcpy(img.data() + kHeaderBytes + kEntryBytes * i + 8, &entries[i].node, 8);
  }
  return write_node(img, off, {"bztree.node.inner"});
}

// ---------------------------------------------------------------- reads

void BzTree::descend(uint64_t key, Path* p, uint32_t stop_level) const {
  p->has_low = p->has_high = false;
  uint64_t n = rd(&root_->root);
  uint32_t d = 0;
  for (;;) {
    p->node[d] = n;
    const NodeHeader* h = hdr(n);
    if (h->level <= stop_level) break;
    // Entries are immutable; the last one whose key <= key (entry 0 is the
    // node's low end).
    uint32_t lo = 1, hi = h->count;
    while (lo < hi) {
      const uint32_t mid = (lo + hi) / 2;
      if (entry(n, mid)->key <= key) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    const uint32_t i = lo - 1;
    if (i > 0) {
      p->low = entry(n, i)->key;
      p->has_low = true;
    }
    if (i + 1 < h->count) {
      p->high = entry(n, i + 1)->key;
      p->has_high = true;
    }
    p->slot[d] = i;
    n = rd(&entry(n, i)->child);
    ++d;
  }
  p->depth = d;
}

void BzTree::live_records(uint64_t leaf, uint32_t count, std::vector<Record>* out) const {
  out->clear();
  for (uint32_t i = 0; i < count; ++i) {
    if (rd(meta(leaf, i)) & kVisible) out->push_back(*rec(leaf, i));
  }
  std::sort(out->begin(), out->end(),
            [](const Record& a, const Record& b) { return a.key < b.key; });
}

bool BzTree::find_visible(uint64_t leaf, uint32_t count, uint64_t key, uint32_t* slot,
                          uint64_t* m) const {
  const uint32_t sorted = std::min(hdr(leaf)->count, count);
  // The unsorted part, newest first; a record's key is read only after its
  // metadata word says it is published.
  for (uint32_t i = count; i-- > sorted;) {
    const uint64_t v = rd(meta(leaf, i));
    if ((v & kVisible) && rec(leaf, i)->key == key) {
      *slot = i;
      *m = v;
      return true;
    }
  }
  // The sorted part: keys immutable since the node was built.
  uint32_t lo = 0, hi = sorted;
  while (lo < hi) {
    const uint32_t mid = (lo + hi) / 2;
    if (rec(leaf, mid)->key < key) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  if (lo < sorted && rec(leaf, lo)->key == key) {
    const uint64_t v = rd(meta(leaf, lo));
    if (v & kVisible) {
      *slot = lo;
      *m = v;
      return true;
    }
  }
  return false;
}

std::optional<Value> BzTree::lookup(uint64_t key) {
  EpochManager::Guard g1(mw_->epoch());
  EpochManager::Guard g2(epoch_);
  Path p;
  descend(key, &p);
  const uint64_t leaf = p.node[p.depth];
  for (;;) {
    const uint64_t s = rd(&hdr(leaf)->status);
    uint32_t slot = 0;
    uint64_t m = 0;
    if (find_visible(leaf, static_cast<uint32_t>(s & kCountMask), key, &slot, &m)) {
      return rec(leaf, slot)->value;
    }
    // "Not found" holds only if no PMwCAS changed the leaf during the
    // search: an update publishes its new record and hides the old one in
    // one PMwCAS (which also bumps the status word), but the search reads
    // slot by slot and may have read the new slot before and the old one
    // after it (found by bench-pibench: 10% updates, Zipfian, 2 threads).
    if (rd(&hdr(leaf)->status) == s) return std::nullopt;
  }
}

void BzTree::stable_records(uint64_t leaf, std::vector<Record>* out) const {
  // As lookup's check: the visible records of one unchanged status word, so
  // an update in flight shows its old or its new record, never both or
  // neither.
  for (;;) {
    const uint64_t s = rd(&hdr(leaf)->status);
    live_records(leaf, static_cast<uint32_t>(s & kCountMask), out);
    if (rd(&hdr(leaf)->status) == s) return;
  }
}

size_t BzTree::scan(uint64_t start, size_t count, std::vector<std::pair<uint64_t, Value>>* out) {
  out->clear();
  if (count == 0) return 0;
  EpochManager::Guard g1(mw_->epoch());
  EpochManager::Guard g2(epoch_);
  std::vector<Record> recs;
  uint64_t cur = start;
  for (;;) {
    Path p;
    descend(cur, &p);
    const uint64_t leaf = p.node[p.depth];
    stable_records(leaf, &recs);
    for (const Record& r : recs) {
      if (r.key < cur) continue;
      if (p.has_high && r.key >= p.high) break;
      out->emplace_back(r.key, r.value);
      if (out->size() == count) return count;
    }
    if (!p.has_high) break;
    cur = p.high;
  }
  return out->size();
}

std::optional<std::pair<uint64_t, Value>> BzTree::find_last_less_than(uint64_t key) {
  if (key == 0) return std::nullopt;
  EpochManager::Guard g1(mw_->epoch());
  EpochManager::Guard g2(epoch_);
  std::vector<Record> recs;
  uint64_t cur = key - 1;  // the largest key <= cur
  for (;;) {
    Path p;
    descend(cur, &p);
    const uint64_t leaf = p.node[p.depth];
    stable_records(leaf, &recs);
    for (size_t i = recs.size(); i-- > 0;) {
      if (recs[i].key <= cur && (!p.has_low || recs[i].key >= p.low)) {
        return std::make_pair(recs[i].key, recs[i].value);
      }
    }
    if (!p.has_low || p.low == 0) return std::nullopt;
    cur = p.low - 1;
  }
}

// ---------------------------------------------------------------- writes

Status BzTree::insert(uint64_t key, Value value) {
  Status s;
  for (;;) {
    Step st;
    {
      OpGuards g(mw_->epoch(), epoch_);
      st = try_insert(key, value, g, &s);
    }
    if (st == Step::kDone) return s;
    std::this_thread::yield();
  }
}

Status BzTree::update(uint64_t key, Value value) {
  Status s;
  bool slack = false;
  for (;;) {
    Step st;
    {
      OpGuards g(mw_->epoch(), epoch_);  // pmwcas() finds it (OpGuards::current)
      st = try_update(key, value, slack, &s);
    }
    if (st == Step::kDone && s.code() == Code::kOutOfSpace && !slack) {
      slack = true;  // a full pool: use the leaf's room above the threshold
      continue;
    }
    if (st == Step::kDone) return s;
    std::this_thread::yield();
  }
}

Status BzTree::remove(uint64_t key) {
  Status s;
  for (;;) {
    Step st;
    {
      OpGuards g(mw_->epoch(), epoch_);  // pmwcas() finds it (OpGuards::current)
      st = try_remove(key, &s);
    }
    if (st == Step::kDone) return s;
    std::this_thread::yield();
  }
}

void BzTree::write_record(uint64_t leaf, uint32_t slot, uint64_t key, Value value, pm::Site site) {
  const Record r{key, value};
  auto* dst = const_cast<Record*>(rec(leaf, slot));
  pm::copy(dst, &r, sizeof(r));
  pm::persist(dst, sizeof(r), site);
}

void BzTree::drop_reservation(uint64_t leaf, uint32_t slot) {
  (void)pmwcas({{meta(leaf, slot), kReserved, dead_meta(node_size_, slot)}});
}

// Insert (VLDB'18 §4.1): check uniqueness, reserve a slot and the record's
// space with a 2-word PMwCAS (status: count + 1; metadata: 0 -> reserved),
// write and persist the record, check again against the reservations made
// before ours, then publish with a 2-word PMwCAS (status unchanged and not
// frozen; metadata: reserved -> visible).
Step BzTree::try_insert(uint64_t key, Value value, OpGuards& g, Status* out) {
  Path p;
  descend(key, &p);
  const uint64_t leaf = p.node[p.depth];
  NodeHeader* h = hdr(leaf);
  std::vector<uint32_t> recheck;
  uint32_t slot = 0;
  for (;;) {
    const uint64_t s = rd(&h->status);
    if (s & kFrozen) return Step::kRetry;  // its owner replaces it
    const auto count = static_cast<uint32_t>(s & kCountMask);
    // One read of each unsorted slot's metadata: a slot read as reserved is
    // checked again after our reservation, one read as anything else is
    // final for this key (a reserved slot becomes visible or garbage, never
    // reserved again), so no publication slips between two reads.
    recheck.clear();
    const uint32_t sorted = std::min(h->count, count);
    bool exists = false;
    for (uint32_t i = sorted; i < count && !exists; ++i) {
      const uint64_t v = rd(meta(leaf, i));
      if (v & kReserved) {
        recheck.push_back(i);
      } else if ((v & kVisible) && rec(leaf, i)->key == key) {
        exists = true;
      }
    }
    uint32_t at = 0;
    uint64_t m = 0;
    if (exists || find_visible(leaf, sorted, key, &at, &m)) {
      *out = Status::AlreadyExists();
      return Step::kDone;
    }
    if (count + 1 > leaf_slots()) return leaf_smo(p, key, out);
    // Crash argument: the reservation is durable when execute() returns; a
    // crash leaves a reserved slot, which recovery turns into garbage.
    if (pmwcas({{&h->status, s, s + 1}, {meta(leaf, count), 0, kReserved}})) {
      slot = count;
      break;
    }
  }
  // Crash argument: write_record's (durable before its publication).
  write_record(leaf, slot, key, value, {"bztree.insert.record"});
  auto drop = [&] { drop_reservation(leaf, slot); };
  if (!recheck.empty()) {
    // Reservations made before ours may hold the same key: wait for each to
    // be published or dropped (their owners are live threads: recovery
    // turns every reservation of a crashed run into garbage), or for a
    // freeze.
    for (uint32_t i : recheck) {
      while (rd(meta(leaf, i)) & kReserved) {
        if (rd(&h->status) & kFrozen) {
          drop();
          return Step::kRetry;
        }
        g.pause();  // the leaf stays valid (the nodes guard stays)
      }
    }
    // Then the leaf again, in the order a key moves in it (an update moves
    // it to a new slot, above every existing one): the sorted part, then
    // the unsorted part upwards. A key published meanwhile by one of those
    // reservations, or moved by an update since, is seen.
    const auto now = static_cast<uint32_t>(rd(&h->status) & kCountMask);
    const uint32_t sorted = std::min(h->count, now);
    uint32_t at = 0;
    uint64_t m = 0;
    bool exists = find_visible(leaf, sorted, key, &at, &m);
    for (uint32_t i = sorted; i < now && !exists; ++i) {
      exists = i != slot && (rd(meta(leaf, i)) & kVisible) && rec(leaf, i)->key == key;
    }
    if (exists) {
      drop();
      *out = Status::AlreadyExists();
      return Step::kDone;
    }
  }
  for (;;) {
    const uint64_t s = rd(&h->status);
    if (s & kFrozen) {
      drop();
      return Step::kRetry;
    }
    // Crash argument: the publication is one PMwCAS, durable on return.
    if (pmwcas(
            {{&h->status, s, s}, {meta(leaf, slot), kReserved, visible_meta(node_size_, slot)}})) {
      *out = Status::Ok();
      return Step::kDone;
    }
  }
}

// Update: the paper swaps the 8 B payload in place (a PMwCAS target, so
// 61-bit payloads); nvindex values are full 64-bit words, so an update
// writes a new record instead: reserve a slot, write and persist the record,
// then one 3-word PMwCAS hides the old record and publishes the new one
// (status: delete count + 1, not frozen; old metadata: visible -> not;
// new metadata: reserved -> visible).
Step BzTree::try_update(uint64_t key, Value value, bool slack, Status* out) {
  Path p;
  descend(key, &p);
  const uint64_t leaf = p.node[p.depth];
  NodeHeader* h = hdr(leaf);
  uint32_t slot = 0;
  for (;;) {
    const uint64_t s = rd(&h->status);
    if (s & kFrozen) return Step::kRetry;
    const auto count = static_cast<uint32_t>(s & kCountMask);
    uint32_t at = 0;
    uint64_t m = 0;
    if (!find_visible(leaf, count, key, &at, &m)) {
      if (rd(&h->status) != s) continue;  // lookup's race: an update moved the key meanwhile
      *out = Status::NotFound();
      return Step::kDone;
    }
    if (count + 1 > leaf_slots() && (!slack || count + 1 > physical_slots())) {
      if (slack) {
        *out = Status::OutOfSpace("bztree: the pool is full and the leaf has no room");
        return Step::kDone;
      }
      return leaf_smo(p, key, out);
    }
    // Crash argument: as insert's reservation.
    if (pmwcas({{&h->status, s, s + 1}, {meta(leaf, count), 0, kReserved}})) {
      slot = count;
      break;
    }
  }
  // Crash argument: write_record's (durable before its publication).
  write_record(leaf, slot, key, value, {"bztree.update.record"});
  auto drop = [&] { drop_reservation(leaf, slot); };
  for (;;) {
    const uint64_t s = rd(&h->status);
    if (s & kFrozen) {
      drop();
      return Step::kRetry;
    }
    uint32_t at = 0;
    uint64_t m = 0;
    if (!find_visible(leaf, static_cast<uint32_t>(s & kCountMask), key, &at, &m)) {
      if (rd(&h->status) != s) continue;  // lookup's race: an update moved the key meanwhile
      drop();
      *out = Status::NotFound();
      return Step::kDone;
    }
    // Crash argument: one PMwCAS, durable on return: the old record and the
    // new one change visibility together.
    if (pmwcas({{&h->status, s, s + kDeleteUnit},
                {meta(leaf, at), m, m & ~kVisible},
                {meta(leaf, slot), kReserved, visible_meta(node_size_, slot)}})) {
      *out = Status::Ok();
      return Step::kDone;
    }
  }
}

// Delete (VLDB'18 §4.2): one 2-word PMwCAS (status: delete count + 1, not
// frozen; metadata: visible bit cleared), then a merge check.
Step BzTree::try_remove(uint64_t key, Status* out) {
  Path p;
  descend(key, &p);
  const uint64_t leaf = p.node[p.depth];
  NodeHeader* h = hdr(leaf);
  for (;;) {
    const uint64_t s = rd(&h->status);
    if (s & kFrozen) return Step::kRetry;
    const auto count = static_cast<uint32_t>(s & kCountMask);
    uint32_t at = 0;
    uint64_t m = 0;
    if (!find_visible(leaf, count, key, &at, &m)) {
      if (rd(&h->status) != s) continue;  // lookup's race: an update moved the key meanwhile
      *out = Status::NotFound();
      return Step::kDone;
    }
    // Crash argument: one PMwCAS, durable on return.
    if (pmwcas({{&h->status, s, s + kDeleteUnit}, {meta(leaf, at), m, m & ~kVisible}})) break;
  }
  *out = Status::Ok();
  for (uint32_t level = 0; level < kMaxHeight && merge_at(key, level); ++level) {
  }
  return Step::kDone;
}

// ---------------------------------------------------------------- SMOs

Step BzTree::leaf_smo(Path& p, uint64_t key, Status* out) {
  pm::SmoTimer smo_timer;  // the SMO's wall time, when one is counted (pm/counters.h)
  const uint64_t leaf = p.node[p.depth];
  NodeHeader* h = hdr(leaf);
  // Freeze (VLDB'18 §5.1): one PMwCAS on the status word; from then on no
  // PMwCAS that compares the status word can change the node.
  for (;;) {
    const uint64_t s = rd(&h->status);
    if (s & kFrozen) return Step::kRetry;  // another thread owns it
    // Crash argument: a frozen node left by a crash is unfrozen by
    // recovery (its content is whole: freezing changes nothing else).
    if (pmwcas({{&h->status, s, s | kFrozen}})) break;
  }
  Smo smo{{leaf}, {}};
  std::vector<Record> recs;
  live_records(leaf, static_cast<uint32_t>(rd(&h->status) & kCountMask), &recs);
  std::vector<Repl> repl;
  Status s;
  if (recs.size() <= compact_records()) {
    // Consolidation (§5.2): one compacted leaf, deleted records and dead
    // reservations dropped, every record in the sorted part.
    uint64_t n = 0;
    s = new_leaf(recs, &n, true);
    if (s.ok()) {
      smo.fresh.push_back(n);
      repl.push_back({0, n});
      ev_consolidations_.fetch_add(1, kRlx);
    }
  } else {
    // Split (§5.3): two leaves of half the records each; the right one's
    // first key is the separator.
    const size_t mid = recs.size() / 2;
    std::vector<Record> left(recs.begin(), recs.begin() + static_cast<ptrdiff_t>(mid));
    std::vector<Record> right(recs.begin() + static_cast<ptrdiff_t>(mid), recs.end());
    uint64_t l = 0, r = 0;
    s = new_leaf(left, &l);
    if (s.ok()) {
      smo.fresh.push_back(l);
      s = new_leaf(right, &r);
    }
    if (s.ok()) {
      smo.fresh.push_back(r);
      repl.push_back({0, l});
      repl.push_back({right.front().key, r});
    }
    const auto count = static_cast<uint32_t>(rd(&h->status) & kCountMask);
    if (s.code() == Code::kOutOfSpace && recs.size() < count) {
      // A full pool: consolidate instead (a node from the reserve), which
      // at least drops the deleted records.
      for (uint64_t n : smo.fresh) pool_->allocator().free(n);  // never published
      smo.fresh.clear();
      uint64_t n = 0;
      s = new_leaf(recs, &n, true);
      if (s.ok()) {
        smo.fresh.push_back(n);
        repl.push_back({0, n});
        ev_consolidations_.fetch_add(1, kRlx);
      }
    } else if (s.ok()) {
      ev_splits_.fetch_add(1, kRlx);
    }
  }
  if (s.ok()) s = install(p, p.depth, std::move(repl), key, &smo);
  if (!s.ok()) {
    abandon(&smo);
    *out = s;
    return Step::kDone;
  }
  pm::count_smo();
  return Step::kRetry;  // the operation runs again on the new leaf
}

bool BzTree::merge_at(uint64_t key, uint32_t level) {
  pm::SmoTimer smo_timer;  // the SMO's wall time, when one is counted (pm/counters.h)
  Path p;
  descend(key, &p, level);
  const uint32_t d = p.depth;
  const uint64_t n = p.node[d];
  if (d == 0 || hdr(n)->level != level) return false;
  if (!small(n)) return false;
  const uint64_t parent = p.node[d - 1];
  NodeHeader* ph = hdr(parent);
  if (ph->count < 2) return false;
  const uint32_t j = p.slot[d - 1];
  const uint32_t a = j + 1 < ph->count ? j : j - 1;  // the left one of the pair
  const uint64_t sp = rd(&ph->status);
  if (sp & kFrozen) return false;
  const uint64_t left = rd(&entry(parent, a)->child);
  const uint64_t right = rd(&entry(parent, a + 1)->child);
  if (left != n && right != n) return false;
  const uint64_t sl = rd(&hdr(left)->status);
  const uint64_t sr = rd(&hdr(right)->status);
  if ((sl | sr) & kFrozen) return false;
  // Merge (VLDB'18 §5.4): freeze both nodes and the parent in one PMwCAS
  // (crash argument: as any freeze, undone by recovery); only then read
  // what they hold (a reserved record may be published without a change
  // of the status word, but not into a frozen node).
  if (!pmwcas({{&hdr(left)->status, sl, sl | kFrozen},
               {&hdr(right)->status, sr, sr | kFrozen},
               {&ph->status, sp, sp | kFrozen}})) {
    return false;
  }
  Smo smo{{left, right, parent}, {}};
  uint64_t m = 0;
  Status s;
  if (level == 0) {
    std::vector<Record> lr, rr;
    live_records(left, static_cast<uint32_t>(sl & kCountMask), &lr);
    live_records(right, static_cast<uint32_t>(sr & kCountMask), &rr);
    lr.insert(lr.end(), rr.begin(), rr.end());
    s = lr.size() <= compact_records() ? new_leaf(lr, &m)
                                       : Status::InvalidArgument("the pair does not fit");
  } else {
    // The right node's entries follow the left's; its first entry takes the
    // parent's separator as key.
    std::vector<Repl> es;
    for (uint32_t i = 0; i < hdr(left)->count; ++i) {
      es.push_back({entry(left, i)->key, rd(&entry(left, i)->child)});
    }
    const size_t first_right = es.size();
    for (uint32_t i = 0; i < hdr(right)->count; ++i) {
      es.push_back({entry(right, i)->key, rd(&entry(right, i)->child)});
    }
    es[first_right].key = entry(parent, a + 1)->key;
    s = es.size() <= inner_capacity() / 2 ? new_inner(level, es, &m)
                                          : Status::InvalidArgument("the pair does not fit");
  }
  std::vector<Repl> entries;
  if (s.ok()) {
    smo.fresh.push_back(m);
    for (uint32_t i = 0; i < ph->count; ++i) {
      if (i == a + 1) continue;
      entries.push_back({entry(parent, i)->key, i == a ? m : rd(&entry(parent, i)->child)});
    }
  }
  std::vector<Repl> repl;
  uint64_t np = 0;
  // The parent stays the root while we hold it frozen (a root is replaced
  // only by the owner of its freeze).
  if (s.ok() && entries.size() == 1 && rd(&root_->root) == parent) {
    repl.push_back({0, m});  // the root had two children: the merged node is the root
  } else if (s.ok()) {
    s = new_inner(ph->level, entries, &np);
    if (s.ok()) {
      smo.fresh.push_back(np);
      repl.push_back({0, np});
    }
  }
  if (s.ok()) s = install(p, d - 1, std::move(repl), key, &smo);
  if (!s.ok()) {
    abandon(&smo);  // the delete stands; the nodes stay small
    return false;
  }
  ev_merges_.fetch_add(1, kRlx);
  pm::count_smo();
  return np != 0 && small(np);
}

void BzTree::abandon(Smo* smo) {
  for (uint64_t n : smo->fresh) pool_->allocator().free(n);  // never published
  for (uint64_t n : smo->frozen) {
    // We own the frozen node: nobody else changes its status word.
    const uint64_t s = rd(&hdr(n)->status);
    (void)pmwcas({{&hdr(n)->status, s, s & ~kFrozen}});
  }
  smo->fresh.clear();
  smo->frozen.clear();
}

void BzTree::refind(uint64_t key, uint64_t n, uint32_t level, Path* p, uint32_t* d) {
  descend(key, p, level);
  if (p->node[p->depth] != n) {
    // A frozen node is replaced only by its owner (this thread), so it stays
    // on key's path until then.
    std::fprintf(stderr, "bztree: a frozen node left its path (a bug)\n");
    std::abort();
  }
  *d = p->depth;
}

// Install (§5.3): a node replaced by one node is swapped in its parent's
// child word by a 2-word PMwCAS (parent status unchanged and not frozen;
// child: old -> new), or in the root pointer; a node replaced by two (a
// split) makes its parent frozen and copied with one more entry (split in
// turn when full), and that copy is installed one level up. So one PMwCAS
// publishes a whole SMO.
Status BzTree::install(Path& p, uint32_t d, std::vector<Repl> repl, uint64_t key, Smo* smo) {
  for (;;) {
    const uint64_t n = p.node[d];
    if (d == 0) {
      uint64_t nr = repl[0].node;
      if (repl.size() == 2) {
        std::vector<Repl> es{{repl[0].key, repl[0].node}, repl[1]};
        if (hdr(n)->level > 0) es[0].key = entry(n, 0)->key;
        if (Status s = new_inner(hdr(n)->level + 1, es, &nr); !s.ok()) return s;
        smo->fresh.push_back(nr);
      }
      // Crash argument: one PMwCAS on the root pointer, durable on return;
      // every new node was persisted before it.
      if (pmwcas({{&root_->root, n, nr}})) break;
      ev_install_retries_.fetch_add(1, kRlx);
      refind(key, n, hdr(n)->level, &p, &d);
      continue;
    }
    const uint64_t parent = p.node[d - 1];
    NodeHeader* ph = hdr(parent);
    const uint64_t sp = rd(&ph->status);
    const bool owned =
        std::find(smo->frozen.begin(), smo->frozen.end(), parent) != smo->frozen.end();
    if ((sp & kFrozen) && !owned) {
      // Its owner replaces it; then our node hangs under the copy. We wait
      // outside the guards (OpGuards); the nodes we own and built stay.
      OpGuards::current()->pause();
      refind(key, n, hdr(n)->level, &p, &d);
      continue;
    }
    if (repl.size() == 1 && !owned) {
      // Crash argument: one PMwCAS, durable on return.
      if (pmwcas(
              {{&ph->status, sp, sp}, {&entry(parent, p.slot[d - 1])->child, n, repl[0].node}})) {
        break;
      }
      ev_install_retries_.fetch_add(1, kRlx);
      refind(key, n, hdr(n)->level, &p, &d);
      continue;
    }
    if (!owned) {
      if (!pmwcas({{&ph->status, sp, sp | kFrozen}})) {
        refind(key, n, hdr(n)->level, &p, &d);
        continue;
      }
      smo->frozen.push_back(parent);
    }
    // The parent is frozen by us: copy it with n's entry replaced.
    std::vector<Repl> es;
    const uint32_t j = p.slot[d - 1];
    for (uint32_t i = 0; i < ph->count; ++i) {
      if (i == j) {
        es.push_back({entry(parent, i)->key, repl[0].node});
        if (repl.size() == 2) es.push_back(repl[1]);
      } else {
        es.push_back({entry(parent, i)->key, rd(&entry(parent, i)->child)});
      }
    }
    std::vector<Repl> up;
    if (es.size() <= inner_capacity()) {
      uint64_t np = 0;
      if (Status s = new_inner(ph->level, es, &np); !s.ok()) return s;
      smo->fresh.push_back(np);
      up.push_back({0, np});
    } else {
      const size_t h = es.size() / 2;
      std::vector<Repl> l(es.begin(), es.begin() + static_cast<ptrdiff_t>(h));
      std::vector<Repl> r(es.begin() + static_cast<ptrdiff_t>(h), es.end());
      uint64_t nl = 0, nr = 0;
      if (Status s = new_inner(ph->level, l, &nl); !s.ok()) return s;
      smo->fresh.push_back(nl);
      if (Status s = new_inner(ph->level, r, &nr); !s.ok()) return s;
      smo->fresh.push_back(nr);
      up.push_back({0, nl});
      up.push_back({r.front().key, nr});
      ev_inner_splits_.fetch_add(1, kRlx);
    }
    repl = std::move(up);
    --d;
  }
  if (d == 0) ev_root_changes_.fetch_add(1, kRlx);
  for (uint64_t n : smo->frozen) epoch_.retire(n);
  smo->frozen.clear();
  smo->fresh.clear();
  return Status::Ok();
}

// ---------------------------------------------------------------- create / recover

Status BzTree::create() {
  uint64_t ro = 0;
  if (Status s = allocate_root_object(pool_->allocator(), sizeof(RootObject), &ro); !s.ok()) {
    return s;
  }
  uint64_t dir = 0;
  if (Status s = pm::Pmwcas::create(pool_, descriptors_for(threads_), &dir, &mw_); !s.ok()) {
    return s;
  }
  uint64_t leaf = 0;
  if (Status s = new_leaf({}, &leaf); !s.ok()) return s;
  // Crash argument: the root object is written and persisted whole before
  // set_root publishes it; a crash before leaves a pool without a root,
  // whose blocks the next open reclaims.
  root_ = pool_->ptr<RootObject>(ro);
  pm::fill(root_, 0, sizeof(RootObject));
  pm::store(&root_->magic, kRootMagic);
  pm::store(&root_->node_size, uint64_t{node_size_});
  pm::store(&root_->root, leaf);
  pm::store(&root_->pmwcas_directory, dir);
  pm::persist(root_, sizeof(RootObject), {"bztree.create.root"});
  pool_->set_root(ro);
  return fill_reserve();
}

Status BzTree::recover() {
  if (Status s = open_root_object(kName, kRootMagic, &root_); !s.ok()) return s;
  if (root_->node_size > 4096 || !valid_node_size(static_cast<uint32_t>(root_->node_size))) {
    return Status::Corruption(std::string(kName) + ": bad node size " +
                              std::to_string(root_->node_size));
  }
  node_size_ = static_cast<uint32_t>(root_->node_size);
  // Pmwcas::open refuses a directory that is not a 4096 B block of the pool.
  if (Status s = pm::Pmwcas::open(pool_, root_->pmwcas_directory, &mw_); !s.ok()) return s;
  // PMwCAS recovery first: every target word then holds a plain value.
  pm::Pmwcas::RecoveryStats rs;
  if (Status s = mw_->recover(&rs); !s.ok()) return s;
  std::vector<uint64_t> nodes;
  // After PMwCAS recovery every target word holds a value (perhaps with the
  // dirty bit): one that names a descriptor is damage, refused before any
  // read could follow it.
  bool bad_word = false;
  auto word = [&](std::atomic<uint64_t>* w) {
    const uint64_t v = w->load(std::memory_order_acquire);
    if (v & (pm::kPmwcasDescriptor | pm::kPmwcasRdcss)) bad_word = true;
    return v & ~pm::kPmwcasFlags;
  };
  auto bad = [&](uint64_t n) {
    return Status::Corruption(std::string(kName) + ": node " + hex(n) +
                              " holds a word naming a PMwCAS descriptor after PMwCAS recovery");
  };
  Status s = reclaim_unreachable(kName, [&](pm::Allocator& alloc, uint64_t* keys) -> Status {
    if (Status m = mw_->mark_reachable(alloc); !m.ok()) return m;
    std::vector<std::pair<uint64_t, uint32_t>> todo{{word(&root_->root), ~0u}};
    if (bad_word) return bad(0);
    while (!todo.empty()) {
      const auto [n, want_level] = todo.back();
      todo.pop_back();
      if (n % 64 != 0 || !pool_->contains(n, node_size_) ||
          pool_->allocator().block_size(n) != node_size_) {
        return Status::Corruption(std::string(kName) + ": node offset " + hex(n) +
                                  " is not a node block");
      }
      if (Status m = alloc.mark_reachable(n); !m.ok()) return m;
      nodes.push_back(n);
      NodeHeader* h = hdr(n);
      if (h->level >= kMaxHeight || (want_level != ~0u && h->level != want_level)) {
        return Status::Corruption(std::string(kName) + ": node " + hex(n) + " has level " +
                                  std::to_string(h->level));
      }
      if (h->level == 0) {
        const auto count = static_cast<uint32_t>(word(&h->status) & kCountMask);
        if (bad_word) return bad(n);
        if (count > physical_slots() || h->count > count) {
          return Status::Corruption(std::string(kName) + ": leaf " + hex(n) + " counts " +
                                    std::to_string(count) + " records");
        }
        for (uint32_t i = 0; i < count; ++i) *keys += (word(meta(n, i)) & kVisible) ? 1 : 0;
        if (bad_word) return bad(n);
        // A slot is taken together with the count (one PMwCAS), so every
        // slot above the count is vacant.
        for (uint32_t i = count; i < physical_slots(); ++i) {
          if (meta(n, i)->load(std::memory_order_acquire) != 0) {
            return Status::Corruption(std::string(kName) + ": leaf " + hex(n) + " slot " +
                                      std::to_string(i) + " above its count is not vacant");
          }
        }
      } else {
        if (h->count == 0 || h->count > inner_capacity()) {
          return Status::Corruption(std::string(kName) + ": inner node " + hex(n) + " has " +
                                    std::to_string(h->count) + " entries");
        }
        if (bad_word || (word(&h->status) & ~kFrozen) != 0) {
          return Status::Corruption(std::string(kName) + ": inner node " + hex(n) +
                                    " has a bad status word");
        }
        for (uint32_t i = 0; i < h->count; ++i) {
          todo.push_back({word(&entry(n, i)->child), h->level - 1});
        }
        if (bad_word) return bad(n);
      }
    }
    return Status::Ok();
  });
  if (!s.ok()) return s;
  // After the pass: a node frozen by a crashed SMO is unfrozen (its content
  // is whole; the SMO's new nodes were unreachable and are reclaimed), and
  // every reservation of the crashed run becomes garbage, so no thread ever
  // waits on a dead one (VLDB'18 §6 does the latter with an epoch number in
  // the reserved metadata word). Plain stores: no PMwCAS is in flight
  // during recovery; each is persisted, and a crash in between repeats them.
  EpochManager::Guard g(mw_->epoch());
  for (uint64_t n : nodes) {
    NodeHeader* h = hdr(n);
    const uint64_t st = rd(&h->status);
    if (h->level == 0) {
      for (uint32_t i = 0; i < (st & kCountMask); ++i) {
        if (rd(meta(n, i)) & kReserved) {
          pm::store(meta(n, i), dead_meta(node_size_, i));
          pm::persist(meta(n, i), 8, {"bztree.recover.reservation"});
        }
      }
    }
    if (st & kFrozen) {
      pm::store(&h->status, st & ~kFrozen);
      pm::persist(&h->status, 8, {"bztree.recover.unfreeze"});
    }
  }
  // A full pool may have no room for the reserve: it fills from reclaimed
  // nodes then.
  if (Status r = fill_reserve(); !r.ok() && r.code() != Code::kOutOfSpace) return r;
  return Status::Ok();
}

// ---------------------------------------------------------------- verify

Status BzTree::walk(uint64_t node, uint32_t depth, uint64_t low, bool has_low, uint64_t high,
                    bool has_high, VerifyReport* r, uint32_t* leaf_depth) const {
  const std::string where = std::string(kName) + ": node " + hex(node);
  if (depth >= kMaxHeight) return Status::Corruption(where + " deeper than the height limit");
  NodeHeader* h = hdr(node);
  const uint64_t st = rd(&h->status);
  if (st & kFrozen) return Status::Corruption(where + " is frozen (an SMO left over)");
  if (h->level == 0) {
    if (*leaf_depth == ~0u) *leaf_depth = depth;
    if (*leaf_depth != depth) return Status::Corruption(where + ": leaves at different depths");
    ++r->leaves;
    const auto count = static_cast<uint32_t>(st & kCountMask);
    if (count > physical_slots() || h->count > count) {
      return Status::Corruption(where + " counts " + std::to_string(count) + " records");
    }
    std::vector<uint64_t> keys;
    uint64_t dead = 0;
    for (uint32_t i = 0; i < count; ++i) {
      const uint64_t m = rd(meta(node, i));
      if (m & kReserved) return Status::Corruption(where + ": a reservation left over");
      if (i > 0 && i < h->count && rec(node, i - 1)->key >= rec(node, i)->key) {
        return Status::Corruption(where + ": sorted part out of order");
      }
      if (!(m & kVisible)) {
        ++dead;
        continue;
      }
      const uint64_t k = rec(node, i)->key;
      if ((has_low && k < low) || (has_high && k >= high)) {
        return Status::Corruption(where + ": key " + std::to_string(k) + " outside its range");
      }
      keys.push_back(k);
    }
    std::sort(keys.begin(), keys.end());
    if (std::adjacent_find(keys.begin(), keys.end()) != keys.end()) {
      return Status::Corruption(where + ": a key visible twice");
    }
    if (((st >> 16) & kCountMask) > dead) {
      return Status::Corruption(where + ": delete count over the deleted records");
    }
    r->keys += keys.size();
    return Status::Ok();
  }
  ++r->inner_nodes;
  if (h->count == 0 || h->count > inner_capacity()) {
    return Status::Corruption(where + " has " + std::to_string(h->count) + " entries");
  }
  for (uint32_t i = 0; i < h->count; ++i) {
    const uint64_t lo = i == 0 ? low : entry(node, i)->key;
    const bool hlo = i == 0 ? has_low : true;
    if (i > 0) {
      if (entry(node, i)->key <= entry(node, i - 1)->key && i > 1) {
        return Status::Corruption(where + ": separators out of order");
      }
      if ((has_low && lo <= low) || (has_high && lo >= high)) {
        return Status::Corruption(where + ": separator outside its range");
      }
    }
    const bool hhi = i + 1 < h->count ? true : has_high;
    const uint64_t hi = i + 1 < h->count ? entry(node, i + 1)->key : high;
    const uint64_t c = rd(&entry(node, i)->child);
    if (hdr(c)->level + 1 != h->level) return Status::Corruption(where + ": child level");
    if (Status s = walk(c, depth + 1, lo, hlo, hi, hhi, r, leaf_depth); !s.ok()) return s;
  }
  return Status::Ok();
}

Status BzTree::verify(VerifyReport* report) const {
  EpochManager::Guard g1(mw_->epoch());
  EpochManager::Guard g2(epoch_);
  VerifyReport r;
  uint32_t leaf_depth = ~0u;
  if (Status s = walk(rd(&root_->root), 0, 0, false, 0, false, &r, &leaf_depth); !s.ok()) return s;
  r.height = leaf_depth + 1;
  *report = r;
  return Status::Ok();
}

std::optional<Events> events_of(const Index<uint64_t>& index) {
  const auto* t = dynamic_cast<const BzTree*>(&index);
  if (t == nullptr) return std::nullopt;
  return t->events();
}

}  // namespace bztree

Status make_bztree(const IndexOptions& options, std::unique_ptr<Index<uint64_t>>* out) {
  using bztree::BzTree;
  return open_persistent_index<BzTree>(
      options, pool_layout("bztree", KeyType::kInteger), [](BzTree& t) { return t.create(); },
      [](BzTree& t) { return t.recover(); }, out, options.node_size, std::max(1u, options.threads));
}

}  // namespace nvindex
