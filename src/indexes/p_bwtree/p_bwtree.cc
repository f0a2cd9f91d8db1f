// p-bwtree: the persistent Bw-Tree of p_bwtree.h. Crash model: DESIGN.md §6
// (a line holds a prefix, in program order, of the stores made to it since
// it was last durable; an aligned 8-byte store is never torn).
//
// The persistent invariant every crash state keeps: from the root id, the
// mapping words name chains of fully written, persisted, immutable records,
// each ending in a base node; following children (inner bases and
// index-entry deltas) and sibling links (split deltas, base right ids)
// reaches every node whose keys are content. Every change is one CAS of one
// mapping word (or of the root id) to a record that was persisted before the
// CAS, so a crash leaves each word old or new, and either names a durable
// chain. The only other durable effects of an operation are blocks no word
// names yet (recovery frees them), claimed delta slots no word names yet
// (garbage inside a live base's block, freed with it; write_delta), and
// mapping words of ids no chain names yet (recovery clears them).
//
// Durable linearizability: the thread that CASes a word persists it before
// it returns; until then the word carries kDirty, and any thread that reads
// a dirty word persists it before relying on it, so no operation returns a
// result that depends on a word a crash could still lose.
#include "indexes/p_bwtree/p_bwtree.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <source_location>
#include <type_traits>

#include "indexes/common/factory.h"
#include "nvindex/pm/allocator.h"
#include "nvindex/pm/counters.h"
#include "nvindex/pm/persist.h"

namespace nvindex {
namespace p_bwtree {

bool valid_node_size(uint32_t bytes) {
  return bytes >= 128 && bytes <= 4096 && (bytes & (bytes - 1)) == 0;
}

namespace {

constexpr auto kAcq = std::memory_order_acquire;
constexpr auto kRlx = std::memory_order_relaxed;

template <class T>
T load_at(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}
template <class T>
void put_at(char* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}

/// How keys sit in records (the tables in p_bwtree.h): the only code that
/// differs between integer and string keys.
template <class K>
struct Codec;

template <>
struct Codec<uint64_t> {
  static uint64_t min_key() { return 0; }
  static uint32_t delta_bytes(uint64_t) { return 32; }
  static void put_delta_key(char* img, uint64_t k) { put_at(img + 24, k); }
  static uint64_t delta_key(const char* r) { return load_at<uint64_t>(r + 24); }
  static uint32_t base_bytes(const std::vector<std::pair<uint64_t, uint64_t>>& items,
                             const uint64_t*) {
    return static_cast<uint32_t>(40 + 16 * items.size());
  }
  static void put_base(char* img, const std::vector<std::pair<uint64_t, uint64_t>>& items,
                       const uint64_t* high) {
    put_at(img + 32, high != nullptr ? *high : 0);
    for (size_t i = 0; i < items.size(); ++i) {
      put_at(img + 40 + 16 * i, items[i].first);
      put_at(img + 48 + 16 * i, items[i].second);
    }
  }
  static uint64_t base_key(const char* r, uint32_t i) { return load_at<uint64_t>(r + 40 + 16 * i); }
  static uint64_t base_val(const char* r, uint32_t i) { return load_at<uint64_t>(r + 48 + 16 * i); }
  static uint64_t base_high(const char* r) { return load_at<uint64_t>(r + 32); }
  /// Bytes a delta record states it holds (recovery's bounds check).
  static uint32_t stated_delta_bytes(const char*) { return 32; }
  /// Whether a base's stated layout fits `block` bytes.
  static bool base_fits(const char* r, uint32_t block) {
    const auto* b = reinterpret_cast<const Base*>(r);
    return b->bytes <= block && 40 + 16ull * b->h.count <= b->bytes;
  }
};

template <>
struct Codec<std::string_view> {
  using Items = std::vector<std::pair<std::string_view, uint64_t>>;
  static std::string_view min_key() { return {}; }
  static uint32_t delta_bytes(std::string_view k) { return static_cast<uint32_t>(25 + k.size()); }
  static void put_delta_key(char* img, std::string_view k) {
    img[24] = static_cast<char>(static_cast<uint8_t>(k.size()));
    if (!k.empty()) std::memcpy(img + 25, k.data(), k.size());
  }
  static std::string_view delta_key(const char* r) { return {r + 25, static_cast<uint8_t>(r[24])}; }
  static uint32_t base_bytes(const Items& items, const std::string_view* high) {
    size_t n = 32 + 16 * items.size() + (high != nullptr ? high->size() : 0);
    for (const auto& it : items) n += it.first.size();
    return static_cast<uint32_t>(n);
  }
  static void put_base(char* img, const Items& items, const std::string_view* high) {
    auto* b = reinterpret_cast<Base*>(img);
    size_t heap = 32 + 16 * items.size();
    for (size_t i = 0; i < items.size(); ++i) {
      char* slot = img + 32 + 16 * i;
      put_at(slot, items[i].second);
      put_at(slot + 8, static_cast<uint16_t>(heap));
      put_at(slot + 10, static_cast<uint16_t>(items[i].first.size()));
      if (!items[i].first.empty())
        std::memcpy(img + heap, items[i].first.data(), items[i].first.size());
      heap += items[i].first.size();
    }
    b->high_off = static_cast<uint16_t>(heap);
    b->high_len = 0;
    if (high != nullptr) {
      b->high_len = static_cast<uint16_t>(high->size());
      if (!high->empty()) std::memcpy(img + heap, high->data(), high->size());
    }
  }
  static std::string_view base_key(const char* r, uint32_t i) {
    const char* slot = r + 32 + 16 * i;
    return {r + load_at<uint16_t>(slot + 8), load_at<uint16_t>(slot + 10)};
  }
  static uint64_t base_val(const char* r, uint32_t i) { return load_at<uint64_t>(r + 32 + 16 * i); }
  static std::string_view base_high(const char* r) {
    const auto* b = reinterpret_cast<const Base*>(r);
    return {r + b->high_off, b->high_len};
  }
  static uint32_t stated_delta_bytes(const char* r) { return 25 + static_cast<uint8_t>(r[24]); }
  static bool base_fits(const char* r, uint32_t block) {
    const auto* b = reinterpret_cast<const Base*>(r);
    if (b->bytes > block || 32 + 16ull * b->h.count > b->bytes) return false;
    if (uint64_t{b->high_off} + b->high_len > b->bytes) return false;
    for (uint32_t i = 0; i < b->h.count; ++i) {
      const char* slot = r + 32 + 16 * i;
      if (uint64_t{load_at<uint16_t>(slot + 8)} + load_at<uint16_t>(slot + 10) > b->bytes ||
          load_at<uint16_t>(slot + 10) > kMaxKeyBytes) {
        return false;
      }
    }
    return true;
  }
};

bool is_delta(uint8_t t) { return t >= kInsert && t <= kIndexEntry; }

/// pm::cas with release order as well on success: the CAS that publishes a
/// record must order the record's stores before it for every thread that
/// loads the word with acquire (pm::cas orders acquire only; on x86 both are
/// one lock cmpxchg). Reported to the crash simulator as pm::cas does.
bool cas_publish(std::atomic<uint64_t>* w, uint64_t* expected, uint64_t desired,
                 std::source_location loc = std::source_location::current()) {
  if (!w->compare_exchange_strong(*expected, desired, std::memory_order_acq_rel,
                                  std::memory_order_acquire)) {
    return false;
  }
  if (__builtin_expect(pm::detail::g.mode == pm::Mode::kCrashSim, 0)) {
    pm::detail::sim_store(w, sizeof(*w), loc, false);
  }
  return true;
}

}  // namespace

// ---------------------------------------------------------------- the tree

template <class K>
class PBwTree final : public PersistentIndexOf<K> {
  using C = Codec<K>;
  using Item = std::pair<K, uint64_t>;
  using Items = std::vector<Item>;
  using PersistentIndexOf<K>::pool_;

 public:
  PBwTree(pm::Pool* pool, uint32_t node_size)
      : PersistentIndexOf<K>(pool), node_size_(node_size), epoch_(&reclaim_block, this) {
    for (auto& d : top_) d.store(nullptr, kRlx);
  }
  ~PBwTree() override {
    epoch_.drain();
    for (uint64_t b : reserve_) pool_->allocator().free(b);
    reserve_.clear();
    this->record_close_keys();
    for (auto& d : top_) delete[] d.load(kRlx);
  }

  Status create();
  Status recover();

  Status insert(K key, Value value) override;
  Status update(K key, Value value) override;
  Status remove(K key) override;
  std::optional<Value> lookup(K key) override;
  size_t scan(K start, size_t count, std::vector<std::pair<OwnedKey<K>, Value>>* out) override;
  std::optional<std::pair<OwnedKey<K>, Value>> find_last_less_than(K key) override;
  IndexInfo info() const override;
  Status verify(VerifyReport* report) const override;
  std::vector<std::pair<std::string, std::string>> ablation_notes() const override;

  Events events() const {
    Events e;
    e.consolidations = ev_consolidations_.load(kRlx);
    e.splits = ev_splits_.load(kRlx);
    e.index_entries = ev_index_entries_.load(kRlx);
    e.helped = ev_helped_.load(kRlx);
    e.root_grows = ev_root_grows_.load(kRlx);
    e.cas_failures = ev_cas_failures_.load(kRlx);
    return e;
  }
  void defer_index_entries(bool on) { defer_posts_.store(on, kRlx); }
  ChainStats chain_stats() const {
    ChainStats s;
    VerifyReport r;
    (void)walk_levels(&r, &s);
    return s;
  }

 private:
  static constexpr const char* kName = "p-bwtree";

  /// The logical content of a node as one chain shows it.
  struct View {
    Items items;  ///< ascending, only keys below high
    bool has_high = false;
    K high{};
    uint64_t right = kNoNode;
    bool leaf = true;
    uint32_t depth = 0;
  };
  /// Where a key leads inside one node's chain.
  struct Route {
    bool right = false;  ///< the key is beyond this node: go to `next` with low `sep`
    uint64_t next = kNoNode;
    K sep{};
  };
  enum class Hit { kFound, kAbsent, kRight };

  /// A thread's scratch list of a chain's deltas (collect), reused.
  static std::vector<const char*>& collect_scratch() {
    thread_local std::vector<const char*> v;
    return v;
  }

  /// The epoch manager's reclaim callback: refills the reserve with 64 B
  /// blocks, frees the others.
  static void reclaim_block(void* ctx, uint64_t off) {
    auto* t = static_cast<PBwTree*>(ctx);
    if (t->reserve_low_.load(kRlx) && t->pool_->allocator().block_size(off) == kReserveBlock) {
      std::lock_guard<std::mutex> g(t->reserve_mu_);
      if (t->reserve_.size() < kReserveBlocks) {
        t->reserve_.push_back(off);
        t->reserve_low_.store(t->reserve_.size() < kReserveBlocks, kRlx);
        return;
      }
    }
    t->pool_->allocator().free(off);
  }

  /// Fills the reserve (after create or recovery). Errors: OutOfSpace.
  Status fill_reserve() {
    std::lock_guard<std::mutex> g(reserve_mu_);
    while (reserve_.size() < kReserveBlocks) {
      uint64_t b = 0;
      if (Status s = pool_->allocator().allocate(kReserveBlock, &b); !s.ok()) return s;
      reserve_.push_back(b);
    }
    reserve_low_.store(false, kRlx);
    return Status::Ok();
  }

  const char* rec(uint64_t off) const { return pool_->base() + off; }
  const RecordHeader* hdr(uint64_t off) const {
    return reinterpret_cast<const RecordHeader*>(pool_->base() + off);
  }
  std::atomic<uint64_t>* word(uint64_t id) const {
    const uint64_t c = id / kIdsPerChunk;
    return top_[c / kChunksPerDir].load(kAcq)[c % kChunksPerDir].load(kAcq) + id % kIdsPerChunk;
  }
  /// Directory block d (PM): its kChunksPerDir (256) chunk offsets.
  std::atomic<uint64_t>* dir_block(uint64_t d) const {
    return reinterpret_cast<std::atomic<uint64_t>*>(pool_->base() + root_->dirs[d].load(kAcq));
  }
  /// Calls f(offset) for every directory block and every mapping chunk the
  /// root object names, each block before its chunks, up to the first
  /// empty entry (recovery has checked that blocks and chunks are
  /// prefixes); stops at and returns the first error f returns.
  template <class F>
  Status for_each_table_block(F f) const {
    for (uint64_t d = 0; d < kMaxDirs && root_->dirs[d].load(kAcq) != 0; ++d) {
      if (Status s = f(root_->dirs[d].load(kAcq)); !s.ok()) return s;
      for (uint64_t i = 0; i < kChunksPerDir; ++i) {
        const uint64_t off = dir_block(d)[i].load(kAcq);
        if (off == 0) return Status::Ok();
        if (Status s = f(off); !s.ok()) return s;
      }
    }
    return Status::Ok();
  }

  /// The head of node `id` without kDirty; a dirty word is persisted first
  /// (and its bit cleared), so the caller may rely on what it names.
  uint64_t load_head(uint64_t id) const {
    std::atomic<uint64_t>* w = word(id);
    uint64_t v = w->load(kAcq);
    if (v & kDirty) [[unlikely]] {
      pm::persist(w, 8, {"p-bwtree.read.dirty_word"});
      uint64_t e = v;
      pm::cas(w, &e, v & ~kDirty);
    }
    return v & ~kDirty;
  }

  /// CAS of node `id`'s word from `expected` (clean) to `record` (persisted
  /// by the caller). On success the word is persisted before return, then
  /// its kDirty bit cleared by a CAS that is not flushed. Crash: before the
  /// persist the word may be lost (the operation has not returned, and no
  /// other thread relied on it without persisting it: load_head); after, it
  /// holds `record`, with or without kDirty (the bit means nothing after a
  /// crash; recovery clears it). The clear is not flushed: it becomes
  /// durable when its line is next written back (a later publication in
  /// the same line, or eviction), so a crash may leave a dirty bit on any
  /// word written since, which recovery rewrites (one NAW each). Flushing
  /// it cost 20 % of load throughput (1M integer keys, 2048 B nodes, 1
  /// thread, 5 interleaved pairs: 1.14 vs 1.36 Mops/s): the flush is
  /// waited for by the next locked instruction, the next operation's epoch
  /// announcement, and in the crash lab (16 images per crash point) it
  /// changed neither the images nor what the ablation self-test catches.
  bool publish(uint64_t id, uint64_t expected, uint64_t record) {
    std::atomic<uint64_t>* w = word(id);
    uint64_t e = expected;
    if (!cas_publish(w, &e, record | kDirty)) {
      ev_cas_failures_.fetch_add(1, kRlx);
      return false;
    }
    pm::persist(w, 8, {"p-bwtree.publish.word"});
    uint64_t d = record | kDirty;
    pm::cas(w, &d, record);
    return true;
  }

  /// Allocates a block for a record of `bytes`, copies `img` into it and
  /// persists it (one flush per line, one fence). Crash: unreachable until
  /// published. `may_reserve`: in a full pool, take a 64 B block from the
  /// reserve.
  Status write_record(const char* img, uint32_t bytes, uint64_t* off, pm::Site site,
                      bool may_reserve) {
    if (Status s = pool_->allocator().allocate(bytes, off); !s.ok()) {
      if (s.code() != Code::kOutOfSpace) return s;
      // Any failed delta allocation marks the pool full (an update or a
      // remove written into a free slot allocates nothing, so it cannot be
      // the first to see it).
      full_.store(true, kRlx);
      if (!may_reserve || bytes > kReserveBlock) return s;
      std::lock_guard<std::mutex> g(reserve_mu_);
      if (reserve_.empty()) return s;
      *off = reserve_.back();
      reserve_.pop_back();
      reserve_low_.store(true, kRlx);
      *used_reserve() = true;
    }
    char* p = pool_->base() + *off;
    pm::copy(p, img, bytes);
    pm::persist(p, bytes, site);
    return Status::Ok();
  }

  // ---- delta areas (OpenBwTree's preallocated delta space after a base)

  /// Bytes requested for a base of `bytes`: the node (node_size, or more
  /// for a string node of long keys) plus a delta area of kAreaSlots lines
  /// or node_size bytes, the smaller (a block at most twice the node: 128
  /// and 256 B nodes get 2 and 4 slots), without the area when that
  /// exceeds the largest block (node_size 4096).
  uint32_t base_request(uint32_t bytes) const {
    const uint32_t node = std::max(bytes, node_size_);
    const uint32_t with_area = node + std::min(kAreaSlots * kSlotBytes, node_size_);
    return with_area <= pm::Allocator::kMaxBlock ? with_area : node;
  }
  /// Offset of the delta area in a base of `bytes`: its first whole line.
  static uint32_t area_start(uint32_t bytes) {
    return (bytes + kSlotBytes - 1) & ~(kSlotBytes - 1);
  }
  /// Slots of the delta area of a base of `bytes` (0..kAreaSlots): the
  /// lines from area_start to the end of its block (the allocator's class
  /// of base_request: a power of two), at most kAreaSlots. Recovery checks
  /// that every reached base's block holds them.
  uint32_t area_slots(uint32_t bytes) const {
    const uint32_t block = std::bit_ceil(std::max(base_request(bytes), pm::Allocator::kMinBlock));
    const uint32_t start = area_start(bytes);
    return start >= block ? 0 : std::min(kAreaSlots, (block - start) / kSlotBytes);
  }
  /// The claim word of the slot at `slot`: its last 8 bytes (0 = free),
  /// which no reader reads (a delta in a slot is at most kSlotRecordBytes).
  std::atomic<uint64_t>* claim_word(uint64_t slot) const {
    return reinterpret_cast<std::atomic<uint64_t>*>(pool_->base() + slot + kSlotRecordBytes);
  }
  /// Whether record `o` is a slot of the delta area of base `base` (so no
  /// block of its own: it is freed with the base).
  bool in_area(uint64_t base, uint64_t o) const {
    const uint32_t bytes = reinterpret_cast<const Base*>(rec(base))->bytes;
    const uint64_t start = base + area_start(bytes);
    return o >= start && o < start + uint64_t{area_slots(bytes)} * kSlotBytes;
  }
  /// Frees a record that was never published: a block of its own is freed;
  /// a claimed area slot stays claimed (nothing names it; it goes with its
  /// base's block).
  void discard(uint64_t off, bool slot) {
    if (!slot) pool_->allocator().free(off);
  }

  /// A delta record over `head` (the node's current head), depth
  /// head.depth + 1. Written into slot head.depth of the base's delta area
  /// when the slot exists, the delta fits kSlotRecordBytes (56 B) and the
  /// slot's claim word (its last 8 bytes) is still 0: claimed by one CAS
  /// 0 -> 1, so two writers racing over the same head never share a slot
  /// (the loser takes a block), and, the claim word being one no reader
  /// reads, a losing CAS never touches bytes a reader reads. Else into a
  /// block of its own (write_record). *slot tells which. Either way the
  /// record is persisted (its line or lines flushed, one fence; a slot's
  /// one line holds the claim word too) before return and published by
  /// the caller's CAS. Crash: a claimed slot that no word names is garbage
  /// inside its base's block, as an unpublished block is outside it; a
  /// slot whose claim word is 0 after a crash never held a published delta
  /// (a published one's claim word was durable with it, before its CAS),
  /// so claiming it again overwrites nothing reachable. Errors: OutOfSpace
  /// (only without a free slot).
  Status write_delta(uint64_t head, uint8_t type, K key, uint64_t value, uint32_t count,
                     uint64_t* off, bool* slot, bool may_reserve = false) {
    const RecordHeader* h = hdr(head);
    const uint32_t bytes = C::delta_bytes(key);
    alignas(8) char img[25 + kMaxKeyBytes + 7] = {};
    RecordHeader nh{type, static_cast<uint8_t>(h->flags & kLeafFlag),
                    static_cast<uint16_t>(h->depth + 1), count, head};
    std::memcpy(img, &nh, sizeof(nh));
    put_at(img + 16, value);
    C::put_delta_key(img, key);
    *slot = false;
    if (bytes <= kSlotRecordBytes && h->depth < kAreaSlots) {
      const uint64_t base = base_off(head);
      const uint32_t base_bytes = reinterpret_cast<const Base*>(rec(base))->bytes;
      if (h->depth < area_slots(base_bytes)) {
        const uint64_t o = base + area_start(base_bytes) + uint64_t{h->depth} * kSlotBytes;
        std::atomic<uint64_t>* claim = claim_word(o);
        uint64_t e = 0;
        bool claimed = false;
        // A taken slot is seen by a load; the CAS only races another claim.
        while (claim->load(kRlx) == 0 && !(claimed = pm::cas(claim, &e, uint64_t{1})) && e == 0) {
        }
        if (claimed) {
          char* p = pool_->base() + o;
          pm::copy(p, img, bytes);
          pm::persist(p, kSlotBytes, {"p-bwtree.delta.record"});
          *off = o;
          *slot = true;
          return Status::Ok();
        }
      }
    }
    return write_record(img, bytes, off, {"p-bwtree.delta.record"}, may_reserve);
  }

  /// A base node holding `items` (ascending), high key, right sibling, in a
  /// block of base_request bytes: the node, then its delta area, whose
  /// slots' claim words are zeroed (free) and flushed with the node (one
  /// fence for all). Crash: unreachable until published; the zeros matter
  /// only while the node is live in this run (after a crash a nonzero slot
  /// is merely skipped, write_delta), so their flush is hygiene: it keeps
  /// the lines from staying dirty until the block is reused. DRAM: one
  /// thread-local image buffer, reused.
  Status write_base(bool leaf, const Items& items, const K* high, uint64_t right, uint64_t* off) {
    const uint32_t bytes = C::base_bytes(items, high);
    if (bytes > pm::Allocator::kMaxBlock) return Status::OutOfSpace("p-bwtree: base too large");
    thread_local std::vector<char> img;
    img.assign(bytes, 0);
    Base b{};
    b.h = RecordHeader{static_cast<uint8_t>(leaf ? kBaseLeaf : kBaseInner),
                       static_cast<uint8_t>((leaf ? kLeafFlag : 0) | (high ? kHasHighFlag : 0)), 0,
                       static_cast<uint32_t>(items.size()), 0};
    b.right = right;
    b.bytes = bytes;
    std::memcpy(img.data(), &b, sizeof(b));
    C::put_base(img.data(), items, high);
    if (Status s = pool_->allocator().allocate(base_request(bytes), off); !s.ok()) return s;
    char* p = pool_->base() + *off;
    pm::copy(p, img.data(), bytes);
    const uint32_t slots = area_slots(bytes);
    char* area = p + area_start(bytes);
    for (uint32_t i = 0; i < slots; ++i)
      pm::store(claim_word(*off + area_start(bytes) + i * kSlotBytes), uint64_t{0});
    pm::flush(area, slots * kSlotBytes, {"p-bwtree.base.slots"});
    pm::persist(p, bytes, {"p-bwtree.base.record"});
    return Status::Ok();
  }

  /// The offset of the base record at the end of the chain from `head`.
  uint64_t base_off(uint64_t head) const {
    uint64_t o = head;
    while (hdr(o)->depth != 0) o = hdr(o)->next;
    return o;
  }

  /// Index of the last base entry with key <= k (strict: < k), or -1.
  static int64_t base_floor(const char* b, K k, bool strict) {
    int64_t lo = 0, hi = reinterpret_cast<const RecordHeader*>(b)->count;  // first entry > k
    while (lo < hi) {
      const int64_t mid = (lo + hi) / 2;
      const K mk = C::base_key(b, static_cast<uint32_t>(mid));
      if (strict ? mk < k : !(k < mk)) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    return lo - 1;
  }

  /// Whether `boundary` sends key k to the right (k >= boundary; strict:
  /// k > boundary, for the "keys below k" descent).
  static bool beyond(K boundary, K k, bool strict) {
    return strict ? boundary < k : !(k < boundary);
  }

  /// The child (or right sibling) of inner node chain `head` for key k.
  Route route_inner(uint64_t head, K k, bool strict) const {
    Route best;
    bool has_best = false;
    for (uint64_t o = head;;) {
      const char* r = rec(o);
      const auto* h = reinterpret_cast<const RecordHeader*>(r);
      if (h->type == kSplit || h->type == kIndexEntry) {
        const K sep = C::delta_key(r);
        const uint64_t id = load_at<uint64_t>(r + 16);
        if (h->type == kSplit) {
          if (beyond(sep, k, strict)) return Route{true, id, sep};
        } else if (beyond(sep, k, strict) && (!has_best || best.sep < sep)) {
          best = Route{false, id, sep};
          has_best = true;
        }
        o = h->next;
        continue;
      }
      if ((h->flags & kHasHighFlag) && beyond(C::base_high(r), k, strict)) {
        return Route{true, reinterpret_cast<const Base*>(r)->right, C::base_high(r)};
      }
      int64_t i = base_floor(r, k, strict);
      if (i < 0) i = 0;  // only for k at the node's low key (strict), never taken
      const K bk = C::base_key(r, static_cast<uint32_t>(i));
      if (!has_best || best.sep < bk)
        best = Route{false, C::base_val(r, static_cast<uint32_t>(i)), bk};
      return best;
    }
  }

  /// Looks key k up in leaf chain `head`.
  Hit search_leaf(uint64_t head, K k, uint64_t* value, Route* right) const {
    for (uint64_t o = head;;) {
      const char* r = rec(o);
      const auto* h = reinterpret_cast<const RecordHeader*>(r);
      switch (h->type) {
        case kInsert:
        case kUpdate:
          if (C::delta_key(r) == k) {
            *value = load_at<uint64_t>(r + 16);
            return Hit::kFound;
          }
          break;
        case kDelete:
          if (C::delta_key(r) == k) return Hit::kAbsent;
          break;
        case kSplit:
          if (!(k < C::delta_key(r))) {
            *right = Route{true, load_at<uint64_t>(r + 16), C::delta_key(r)};
            return Hit::kRight;
          }
          break;
        default: {
          if ((h->flags & kHasHighFlag) && !(k < C::base_high(r))) {
            *right = Route{true, reinterpret_cast<const Base*>(r)->right, C::base_high(r)};
            return Hit::kRight;
          }
          const int64_t i = base_floor(r, k, false);
          if (i >= 0 && C::base_key(r, static_cast<uint32_t>(i)) == k) {
            *value = C::base_val(r, static_cast<uint32_t>(i));
            return Hit::kFound;
          }
          return Hit::kAbsent;
        }
      }
      o = h->next;
    }
  }

  /// The consolidated content of chain `head`.
  void collect(uint64_t head, View* v) const {
    const RecordHeader* top = hdr(head);
    v->items.clear();
    v->leaf = (top->flags & kLeafFlag) != 0;
    v->depth = top->depth;
    v->has_high = false;
    std::vector<const char*>& deltas = collect_scratch();
    deltas.clear();
    bool split_seen = false;
    uint64_t o = head;
    for (;;) {
      const char* r = rec(o);
      const auto* h = reinterpret_cast<const RecordHeader*>(r);
      if (h->type == kBaseLeaf || h->type == kBaseInner) {
        if (!split_seen) {
          v->has_high = (h->flags & kHasHighFlag) != 0;
          if (v->has_high) v->high = C::base_high(r);
          v->right = reinterpret_cast<const Base*>(r)->right;
        }
        v->items.reserve(h->count + deltas.size());
        for (uint32_t i = 0; i < h->count; ++i)
          v->items.emplace_back(C::base_key(r, i), C::base_val(r, i));
        break;
      }
      if (h->type == kSplit && !split_seen) {
        split_seen = true;
        v->has_high = true;
        v->high = C::delta_key(r);
        v->right = load_at<uint64_t>(r + 16);
      }
      deltas.push_back(r);
      o = h->next;
    }
    for (size_t j = deltas.size(); j-- > 0;) {
      const char* r = deltas[j];
      const uint8_t t = reinterpret_cast<const RecordHeader*>(r)->type;
      if (t == kSplit) continue;
      const K k = C::delta_key(r);
      auto it = std::lower_bound(v->items.begin(), v->items.end(), k,
                                 [](const Item& a, const K& b) { return a.first < b; });
      const bool present = it != v->items.end() && it->first == k;
      if (t == kDelete) {
        if (present) v->items.erase(it);
      } else if (present) {
        it->second = load_at<uint64_t>(r + 16);
      } else {
        v->items.insert(it, Item{k, load_at<uint64_t>(r + 16)});
      }
    }
    if (v->has_high) {
      auto it = std::lower_bound(v->items.begin(), v->items.end(), v->high,
                                 [](const Item& a, const K& b) { return a.first < b; });
      v->items.erase(it, v->items.end());
    }
  }

  // ---- node ids

  Status alloc_id(uint64_t* id) {
    std::lock_guard<std::mutex> g(id_mu_);
    if (!free_ids_.empty()) {
      *id = free_ids_.back();
      free_ids_.pop_back();
      return Status::Ok();
    }
    if (next_id_ >= kMaxNodeIds) {
      return Status::OutOfSpace("p-bwtree: mapping table full (" + std::to_string(kMaxNodeIds) +
                                " node ids)");
    }
    if (next_id_ % kIdsPerChunk == 0) {
      if (Status s = add_chunk(next_id_ / kIdsPerChunk); !s.ok()) return s;
    }
    *id = next_id_++;
    return Status::Ok();
  }
  void release_id(uint64_t id) {
    std::lock_guard<std::mutex> g(id_mu_);
    free_ids_.push_back(id);
  }
  /// Mapping chunk c (chunks are added in order, under id_mu_): allocated,
  /// zeroed and flushed, then fenced and published by one NAW, in its
  /// directory block's entry c % 256, or, for the first chunk of a
  /// directory block, as entry 0 of a new directory block (zeroed, the
  /// entry stored, flushed, fenced with the chunk) that one NAW publishes in
  /// the root object. Crash: before the NAW the new blocks are unreachable
  /// (freed by recovery); after it, the chunk holds only free ids and the
  /// directory block names it. Chunk 0 (from create()) is neither fenced
  /// nor published here: create() persists the root object, which names its
  /// directory block, after this returns, one fence for all. Errors:
  /// OutOfSpace (nothing published, nothing kept).
  Status add_chunk(uint64_t c) {
    pm::Allocator& alloc = pool_->allocator();
    const uint64_t d = c / kChunksPerDir, i = c % kChunksPerDir;
    uint64_t off = 0;
    if (Status s = alloc.allocate(kChunkBytes, &off); !s.ok()) return s;
    char* p = pool_->base() + off;
    pm::fill(p, 0, kChunkBytes);
    pm::flush(p, kChunkBytes, {"p-bwtree.chunk.init"});
    if (i == 0) {
      uint64_t doff = 0;
      if (Status s = alloc.allocate(kDirBytes, &doff); !s.ok()) {
        alloc.free(off);
        return s;
      }
      char* q = pool_->base() + doff;
      pm::fill(q, 0, kDirBytes);
      pm::store(reinterpret_cast<std::atomic<uint64_t>*>(q), off);
      pm::flush(q, kDirBytes, {"p-bwtree.dir.init"});
      if (d == 0) {
        pm::store(&root_->dirs[0], doff);
      } else {
        pm::fence({"p-bwtree.dir.init"});
        pm::naw(&root_->dirs[d], doff, {"p-bwtree.dir.publish"});
      }
      top_[d].store(new ChunkRef[kChunksPerDir]{}, std::memory_order_release);
    } else {
      pm::fence({"p-bwtree.chunk.init"});
      pm::naw(dir_block(d) + i, off, {"p-bwtree.chunk.publish"});
    }
    top_[d].load(kAcq)[i].store(reinterpret_cast<std::atomic<uint64_t>*>(p),
                                std::memory_order_release);
    return Status::Ok();
  }

  // ---- structure modifications

  /// Entries each half of a split keeps at least: 1 in a leaf, 2 children
  /// in an inner node. An inner node of one child adds a level without
  /// dividing the key space: with long string separators at small nodes
  /// (two of them over 128 B) splitting 3 children into 1 + 2 built such
  /// chains, and a tree of 128 B nodes outgrew verify()'s 64 levels.
  static size_t min_half(bool leaf) { return leaf ? 1 : 2; }

  /// Whether a node of `count` entries and `bytes` (as a base) is split:
  /// over node_size, and at least two halves of min_half entries. An inner
  /// node of 3 children stays whole over node_size (at most 3 x (16 +
  /// 255) + 32 + 255 bytes, well within a 4096 B block).
  bool over_node_size(bool leaf, size_t count, uint64_t bytes) const {
    return bytes > node_size_ && count >= 2 * min_half(leaf);
  }

  /// How a consolidation (or split) ended: done, lost a race (the chain
  /// changed meanwhile; nothing published), or no room (a block or a node
  /// id could not be allocated; nothing published).
  enum class Fold { kDone, kRaced, kNoSpace };

  /// Replaces chain `head` of node `id` by one base (or splits it when its
  /// content is over the node size).
  Fold consolidate(uint64_t id, uint64_t head, uint64_t parent) {
    pm::SmoTimer smo_timer;  // the SMO's wall time, when one is counted (pm/counters.h)
    // One view per thread, reused (a split's tail consolidation reuses it
    // after the split is done with it).
    thread_local View v;
    collect(head, &v);
    if (over_node_size(v.leaf, v.items.size(),
                       C::base_bytes(v.items, v.has_high ? &v.high : nullptr))) {
      return split(id, head, parent, v);
    }
    uint64_t b = 0;
    if (!write_base(v.leaf, v.items, v.has_high ? &v.high : nullptr, v.right, &b).ok())
      return Fold::kNoSpace;
    if (!publish(id, head, b)) {
      pool_->allocator().free(b);  // never published
      return Fold::kRaced;
    }
    ev_consolidations_.fetch_add(1, kRlx);
    // The old chain is unreachable from the word now; readers that loaded
    // it before the CAS may still walk it: retire, do not free. Deltas in
    // the base's area go with the base's block.
    const uint64_t base = base_off(head);
    for (uint64_t o = head; o != base; o = hdr(o)->next) {
      if (!in_area(base, o)) epoch_.retire(o);
    }
    epoch_.retire(base);
    return Fold::kDone;
  }

  /// The Bw-Tree's two-half split (ICDE'13 §IV.B): first half, a new node
  /// Q with the upper half of `v` and a split delta on node `id` (one CAS);
  /// second half, an index-entry delta on the parent (post_entry), which any
  /// thread that later moves right across the split also tries (helping).
  /// Crash: Q's base and word are durable before the split delta names Q;
  /// before that CAS Q is an orphan id (recovery clears its word and frees
  /// its base); after it, Q is reachable by the sibling link.
  Fold split(uint64_t id, uint64_t head, uint64_t parent, const View& v) {
    // Half the entries to Q, fewer when that half would not fit a node
    // (a chain folded more than two nodes' worth); the lower half is split
    // again by the consolidation below.
    size_t mid = v.items.size() / 2;
    Items upper(v.items.begin() + static_cast<std::ptrdiff_t>(mid), v.items.end());
    while (upper.size() > min_half(v.leaf) &&
           C::base_bytes(upper, v.has_high ? &v.high : nullptr) > node_size_) {
      upper.erase(upper.begin());
      ++mid;
    }
    const K sep = v.items[mid].first;
    uint64_t qid = 0, qbase = 0, sd = 0;
    bool sd_slot = false;
    if (!alloc_id(&qid).ok()) return Fold::kNoSpace;
    if (!write_base(v.leaf, upper, v.has_high ? &v.high : nullptr, v.right, &qbase).ok()) {
      release_id(qid);
      return Fold::kNoSpace;
    }
    // Q's word: flushed here, fenced by the split delta's persist below,
    // so it is durable before the CAS that makes Q reachable.
    pm::store(word(qid), qbase);
    pm::flush(word(qid), 8, {"p-bwtree.split.sibling_word"});
    const bool written =
        write_delta(head, kSplit, sep, qid, static_cast<uint32_t>(mid), &sd, &sd_slot).ok();
    if (!written || !publish(id, head, sd)) {
      if (written) discard(sd, sd_slot);
      pm::naw(word(qid), 0, {"p-bwtree.split.undo_word"});
      pool_->allocator().free(qbase);
      release_id(qid);
      return written ? Fold::kRaced : Fold::kNoSpace;
    }
    pm::count_smo();
    ev_splits_.fetch_add(1, kRlx);
    if (!defer_posts_.load(kRlx)) help(parent, id, sep, qid, false);
    // Fold the split delta into the lower half's base right away (the
    // chain just grew past its threshold); a lost race leaves it to the
    // next writer.
    consolidate(id, load_head(id), parent);
    return Fold::kDone;
  }

  /// Posts (sep -> child) to `parent`, or grows the root when `from` is the
  /// root: the second half of a split, done by the splitter or by any thread
  /// that moved right from `from` to `child` across `sep`.
  void help(uint64_t parent, uint64_t from, K sep, uint64_t child, bool helping) {
    if (parent != kNoNode) {
      post_entry(parent, sep, child, helping);
    } else if (root_->root_id.load(kAcq) == from) {
      grow_root(from, sep, child);
    }
  }

  /// Index-entry delta (sep -> child) on inner node `parent`, unless the
  /// parent already routes sep to child or no longer covers sep. One try:
  /// a lost CAS leaves it to the next thread that crosses the split.
  /// Crash: the delta is persisted before its CAS; an entry lost with an
  /// unpersisted word only costs a move right, which re-posts it.
  void post_entry(uint64_t parent, K sep, uint64_t child, bool helping) {
    const uint64_t head = load_head(parent);
    const Route rt = route_inner(head, sep, false);
    if (rt.right || rt.next == child) return;
    uint64_t d = 0;
    bool slot = false;
    if (!write_delta(head, kIndexEntry, sep, child, hdr(head)->count + 1, &d, &slot).ok()) return;
    if (!publish(parent, head, d)) {
      discard(d, slot);
      return;
    }
    ev_index_entries_.fetch_add(1, kRlx);
    if (helping) ev_helped_.fetch_add(1, kRlx);
  }

  /// A new root over the old root `old` and its new sibling: an inner base
  /// {(min, old), (sep, sibling)} under a new id, then one CAS of the root
  /// id. Crash: the new root's base and word are durable before the CAS; the
  /// root id is persisted after it by this thread. A lost root id is
  /// harmless: the old root reaches the sibling by its split delta, and the
  /// new id is an orphan that recovery clears.
  void grow_root(uint64_t old, K sep, uint64_t sibling) {
    pm::SmoTimer smo_timer;  // the SMO's wall time, when one is counted (pm/counters.h)
    uint64_t rid = 0, b = 0;
    if (!alloc_id(&rid).ok()) return;
    const Items items{Item{C::min_key(), old}, Item{sep, sibling}};
    if (!write_base(false, items, nullptr, kNoNode, &b).ok()) {
      release_id(rid);
      return;
    }
    pm::naw(word(rid), b, {"p-bwtree.root.word"});
    uint64_t e = old;
    if (!cas_publish(&root_->root_id, &e, rid)) {
      pm::naw(word(rid), 0, {"p-bwtree.root.undo_word"});
      pool_->allocator().free(b);
      release_id(rid);
      return;
    }
    pm::persist(&root_->root_id, 8, {"p-bwtree.root.id"});
    pm::count_smo();
    ev_root_grows_.fetch_add(1, kRlx);
  }

  // ---- traversal

  /// A leaf reached for a key: its id, head, parent (kNoNode at the root
  /// level) and low key (min_key for the leftmost node).
  struct Loc {
    uint64_t id;
    uint64_t head;
    uint64_t parent;
    K lo;
  };

  /// Descends from the root to the leaf level for key k (strict: to the
  /// leaf holding the keys just below k), consolidating long inner chains
  /// and helping every split it crosses.
  Loc descend(K k, bool strict) {
    uint64_t id = root_->root_id.load(kAcq);
    uint64_t parent = kNoNode;
    K lo = C::min_key();
    for (;;) {
      const uint64_t head = load_head(id);
      const RecordHeader* h = hdr(head);
      if (h->flags & kLeafFlag) return Loc{id, head, parent, lo};
      if (h->depth >= kInnerChainMax) {
        if (consolidate(id, head, parent) == Fold::kDone) continue;
      }
      const Route rt = route_inner(head, k, strict);
      if (rt.right) {
        help(parent, id, rt.sep, rt.next, true);
      } else {
        parent = id;
      }
      id = rt.next;
      lo = rt.sep;
    }
  }

  /// Moves `loc` right across a split of its leaf (helping it).
  void move_right(Loc* loc, const Route& rt) {
    help(loc->parent, loc->id, rt.sep, rt.next, true);
    loc->id = rt.next;
    loc->lo = rt.sep;
    loc->head = load_head(loc->id);
  }

  enum class Op { kInsert, kUpdate, kRemove };
  Status modify(Op op, K key, Value value);

  /// Blocks of the reserve: 64 B records (integer-key deltas, string
  /// deltas of keys up to 39 B) kept in DRAM for a full pool.
  static constexpr uint32_t kReserveBlock = 64;
  static constexpr size_t kReserveBlocks = 64;
  /// Whether this thread's last write_record took a reserve block.
  static bool* used_reserve() {
    thread_local bool used = false;
    return &used;
  }

  uint32_t node_size_;  ///< base node size, bytes (the pool's, after recovery)
  /// Allocated, unreachable blocks for updates and removes in a full pool
  /// (recovery frees them with every unreachable block; the destructor
  /// frees them before the close record is taken).
  std::mutex reserve_mu_;
  std::vector<uint64_t> reserve_;
  std::atomic<bool> reserve_low_{true};
  std::atomic<bool> defer_posts_{false};  ///< tests: a splitter leaves its post to helpers
  std::atomic<bool> full_{false};         ///< an allocation failed: count removes as room
  std::atomic<int64_t> room_{0};          ///< removes (in a full pool) not yet refilled by inserts
  RootObject* root_ = nullptr;
  /// DRAM copy of the directory: top_[d][i] is chunk d * 512 + i's address
  /// (a second level of kChunksPerDir entries allocated with directory
  /// block d).
  using ChunkRef = std::atomic<std::atomic<uint64_t>*>;
  std::atomic<ChunkRef*> top_[kMaxDirs];
  mutable std::mutex id_mu_;
  std::vector<uint64_t> free_ids_;
  uint64_t next_id_ = 0;
  mutable EpochManager epoch_;
  std::atomic<uint64_t> ev_consolidations_{0}, ev_splits_{0}, ev_index_entries_{0}, ev_helped_{0},
      ev_root_grows_{0}, ev_cas_failures_{0};

  Status walk_levels(VerifyReport* report, ChainStats* stats) const;
  Status check_chain(uint64_t id, uint64_t head, std::vector<uint64_t>* children, uint64_t* keys);
};

// ---------------------------------------------------------------- create / recover

template <class K>
Status PBwTree<K>::create() {
  uint64_t ro = 0;
  if (Status s = allocate_root_object(pool_->allocator(), kRootBytes, &ro); !s.ok()) return s;
  char* p = pool_->base() + ro;
  pm::fill(p, 0, kRootBytes);
  root_ = reinterpret_cast<RootObject*>(p);
  pm::store(&root_->magic, kRootMagic);
  pm::store(&root_->node_size, uint64_t{node_size_});
  // Chunk 0 and an empty leaf as node 0, all flushed, and fenced by the
  // root object's persist before set_root: a crash before set_root leaves a
  // pool without a root (factory.h reclaims).
  if (Status s = add_chunk(0); !s.ok()) return s;
  uint64_t leaf = 0;
  if (Status s = write_base(true, {}, nullptr, kNoNode, &leaf); !s.ok()) return s;
  pm::store(word(0), leaf);
  pm::flush(word(0), 8, {"p-bwtree.create.word"});
  pm::store(&root_->root_id, uint64_t{0});
  pm::persist(p, kRootBytes, {"p-bwtree.create.root"});  // the zeroed directory too
  next_id_ = 1;
  pool_->set_root(ro);
  return fill_reserve();
}

/// Checks one chain of node `id` from `head` during recovery: the records
/// from head to a base inside the pool with the depth falling by one; the
/// base a block holding its stated layout and its delta area; every delta
/// either the area slot of its depth or a block of its own, of a known type
/// that fits the node; then marks the base and every delta that is a block
/// (an area slot is part of its base's block, marked once with it),
/// appends the ids the chain names and adds its keys.
template <class K>
Status PBwTree<K>::check_chain(uint64_t id, uint64_t head, std::vector<uint64_t>* children,
                               uint64_t* keys) {
  pm::Allocator& alloc = pool_->allocator();
  const std::string where = std::string(kName) + ": node " + std::to_string(id);
  if (head == 0) return Status::Corruption(where + " is reachable but has no record");
  std::vector<uint64_t> chain;
  uint8_t leaf = 0;
  uint32_t depth = 0;
  for (uint64_t o = head;;) {
    if (o % 8 != 0 || !pool_->contains(o, sizeof(Base))) {
      return Status::Corruption(where + ": record " + hex(o) + " is not in the pool");
    }
    const auto* h = hdr(o);
    if (chain.empty()) {
      leaf = h->flags & kLeafFlag;
      depth = h->depth;
    } else if ((h->flags & kLeafFlag) != leaf || uint32_t{h->depth} + 1 != depth) {
      return Status::Corruption(where + ": record " + hex(o) + " breaks its chain");
    } else {
      depth = h->depth;
    }
    chain.push_back(o);
    if (h->depth == 0) break;
    o = h->next;
  }
  const uint64_t base = chain.back();
  const char* br = rec(base);
  const auto* bh = hdr(base);
  const uint32_t block = alloc.block_size(base);
  if (block == 0 || !pool_->contains(base, block)) {
    return Status::Corruption(where + ": record " + hex(base) + " is not a block");
  }
  if ((bh->type != kBaseLeaf && bh->type != kBaseInner) || (bh->type == kBaseLeaf) != (leaf != 0) ||
      bh->next != 0 || !C::base_fits(br, block)) {
    return Status::Corruption(where + ": record " + hex(base) + " is damaged");
  }
  const uint32_t bytes = reinterpret_cast<const Base*>(br)->bytes;
  if (area_start(bytes) + area_slots(bytes) * kSlotBytes > block) {
    return Status::Corruption(where + ": base " + hex(base) + " has no room for its delta area");
  }
  for (size_t j = 0; j + 1 < chain.size(); ++j) {
    const uint64_t o = chain[j];
    const char* r = rec(o);
    const auto* h = hdr(o);
    const bool slot = in_area(base, o);
    uint32_t room = kSlotRecordBytes;
    if (slot) {
      if (o - base - area_start(bytes) != uint64_t{h->depth - 1u} * kSlotBytes) {
        return Status::Corruption(where + ": record " + hex(o) + " is not its depth's slot");
      }
    } else {
      room = alloc.block_size(o);
      if (room == 0 || !pool_->contains(o, room)) {
        return Status::Corruption(where + ": record " + hex(o) + " is not a block");
      }
    }
    const bool fits_node =
        leaf ? h->type != kIndexEntry : (h->type == kSplit || h->type == kIndexEntry);
    if (!is_delta(h->type) || !fits_node || C::stated_delta_bytes(r) > room) {
      return Status::Corruption(where + ": record " + hex(o) + " is damaged");
    }
    if (!slot) {
      if (Status s = alloc.mark_reachable(o); !s.ok()) return s;
    }
    if (h->type == kSplit || h->type == kIndexEntry) children->push_back(load_at<uint64_t>(r + 16));
  }
  if (Status s = alloc.mark_reachable(base); !s.ok()) return s;
  const uint64_t right = reinterpret_cast<const Base*>(br)->right;
  if (right != kNoNode) children->push_back(right);
  if (!leaf) {
    for (uint32_t i = 0; i < bh->count; ++i) children->push_back(C::base_val(br, i));
  }
  // The content the chain holds must be what its head counts: a key
  // changed by damage (an insert turned into an update of another key, a
  // delete of a key that is absent) shows here, and the content, not the
  // stored count, is what the close record's key count is checked against.
  View v;
  collect(head, &v);
  if (v.items.size() != hdr(head)->count) {
    return Status::Corruption(where + ": holds " + std::to_string(v.items.size()) +
                              " entries, its head counts " + std::to_string(hdr(head)->count));
  }
  if (leaf) *keys += v.items.size();
  return Status::Ok();
}

template <class K>
Status PBwTree<K>::recover() {
  if (Status s = this->open_root_object(kName, kRootMagic, &root_, kRootBytes); !s.ok()) return s;
  if (root_->node_size > 4096 || !valid_node_size(static_cast<uint32_t>(root_->node_size))) {
    return Status::Corruption(std::string(kName) + ": bad node size " +
                              std::to_string(root_->node_size));
  }
  node_size_ = static_cast<uint32_t>(root_->node_size);
  // The directory: blocks in order, each naming chunks in order, the
  // chunks a prefix of the concatenated blocks (the first 0 ends them).
  uint64_t chunks = 0;
  bool ended = false;
  for (uint64_t d = 0; d < kMaxDirs; ++d) {
    const uint64_t doff = root_->dirs[d].load(kAcq);
    if (doff == 0) {
      ended = true;
      continue;
    }
    if (ended || d * kChunksPerDir != chunks || doff % 8 != 0 ||
        pool_->allocator().block_size(doff) < kDirBytes || !pool_->contains(doff, kDirBytes)) {
      return Status::Corruption(std::string(kName) + ": directory block " + std::to_string(d) +
                                " at " + hex(doff) + " is not a directory block in order");
    }
    top_[d].store(new ChunkRef[kChunksPerDir]{}, kRlx);
    for (uint64_t i = 0; i < kChunksPerDir; ++i) {
      const uint64_t off = dir_block(d)[i].load(kAcq);
      if (off == 0 && i > 0) {
        ended = true;
        continue;
      }
      const uint64_t c = d * kChunksPerDir + i;
      if (ended || off == 0 || off % 8 != 0 || pool_->allocator().block_size(off) < kChunkBytes ||
          !pool_->contains(off, kChunkBytes)) {
        return Status::Corruption(std::string(kName) + ": mapping chunk " + std::to_string(c) +
                                  " at " + hex(off) + " is not a chunk in order");
      }
      top_[d].load(kRlx)[i].store(reinterpret_cast<std::atomic<uint64_t>*>(pool_->base() + off),
                                  kRlx);
      ++chunks;
    }
  }
  const uint64_t ids = chunks * kIdsPerChunk;
  const uint64_t root_id = root_->root_id.load(kAcq);
  if (ids == 0 || root_id >= ids) {
    return Status::Corruption(std::string(kName) + ": root id " + std::to_string(root_id) +
                              " outside the mapping table");
  }
  std::vector<uint8_t> seen(ids, 0);
  Status s = this->reclaim_unreachable(kName, [&](pm::Allocator& alloc, uint64_t* keys) -> Status {
    if (Status m = for_each_table_block([&](uint64_t off) { return alloc.mark_reachable(off); });
        !m.ok()) {
      return m;
    }
    std::vector<uint64_t> todo{root_id}, children;
    seen[root_id] = 1;
    while (!todo.empty()) {
      const uint64_t id = todo.back();
      todo.pop_back();
      children.clear();
      const uint64_t head = word(id)->load(kRlx) & ~kDirty;
      if (Status m = check_chain(id, head, &children, keys); !m.ok()) return m;
      for (uint64_t c : children) {
        if (c >= ids) {
          return Status::Corruption(std::string(kName) + ": node " + std::to_string(id) +
                                    " names node id " + std::to_string(c) + " outside the table");
        }
        if (!seen[c]) {
          seen[c] = 1;
          todo.push_back(c);
        }
      }
    }
    return Status::Ok();
  });
  if (!s.ok()) return s;
  // After the pass: orphan words (a split or root grow that crashed before
  // its CAS) are cleared, their ids freed; dirty bits are dropped (every
  // word read here is durable).
  for (uint64_t id = 0; id < ids; ++id) {
    std::atomic<uint64_t>* w = word(id);
    const uint64_t v = w->load(kRlx);
    if (!seen[id]) {
      if (v != 0) pm::naw(w, 0, {"p-bwtree.recover.orphan"});
      free_ids_.push_back(id);
    } else if (v & kDirty) {
      pm::naw(w, v & ~kDirty, {"p-bwtree.recover.clean"});
    }
  }
  std::reverse(free_ids_.begin(), free_ids_.end());  // lowest id handed out first
  next_id_ = ids;
  // A full pool may have no room for the reserve: then it starts empty and
  // fills from reclaimed records.
  if (Status r = fill_reserve(); !r.ok() && r.code() != Code::kOutOfSpace) return r;
  return Status::Ok();
}

// ---------------------------------------------------------------- operations

template <class K>
Status PBwTree<K>::modify(Op op, K key, Value value) {
  if (Status s = check_key(kName, key); !s.ok()) return s;
  EpochManager::Guard g(epoch_);
  Loc loc = descend(key, false);
  bool consolidated = false;  // one try per operation: a failed split must not loop
  for (;;) {
    const RecordHeader* h = hdr(loc.head);
    uint64_t old = 0;
    Route rt;
    const Hit hit = search_leaf(loc.head, key, &old, &rt);
    if (hit == Hit::kRight) {
      move_right(&loc, rt);
      continue;
    }
    if (op == Op::kInsert && hit == Hit::kFound) return Status::AlreadyExists("");
    if (op != Op::kInsert && hit == Hit::kAbsent) return Status::NotFound("");
    if (h->depth >= kLeafChainMax && !consolidated) {
      consolidated = true;
      // An insert onto a chain that cannot be folded for lack of room (a
      // full pool, or a full mapping table for the split) fails rather than
      // grow the chain without bound, unless removes made room for it.
      if (consolidate(loc.id, loc.head, loc.parent) == Fold::kNoSpace && op == Op::kInsert &&
          room_.load(kRlx) <= 0) {
        full_.store(true, kRlx);  // removes from now on count as room
        return Status::OutOfSpace("p-bwtree: no room to consolidate or split a full node");
      }
      loc.head = load_head(loc.id);
      continue;
    }
    const uint8_t type = op == Op::kInsert ? kInsert : op == Op::kUpdate ? kUpdate : kDelete;
    const uint32_t count = h->count + (op == Op::kInsert ? 1 : 0) - (op == Op::kRemove ? 1 : 0);
    uint64_t d = 0;
    bool slot = false;
    // A full pool still takes updates and removes, and inserts into the
    // room removes made, from the reserve.
    const bool may_reserve = op != Op::kInsert || room_.load(kRlx) > 0;
    *used_reserve() = false;
    if (Status s = write_delta(loc.head, type, key, op == Op::kRemove ? 0 : value, count, &d, &slot,
                               may_reserve);
        !s.ok()) {
      return s;
    }
    // Crash: the delta is durable before the CAS; publish() persists the
    // word before this returns.
    if (publish(loc.id, loc.head, d)) {
      if (op == Op::kRemove && full_.load(kRlx)) room_.fetch_add(1, kRlx);
      if (op == Op::kInsert && *used_reserve()) room_.fetch_sub(1, kRlx);
      return Status::Ok();
    }
    discard(d, slot);  // never published
    loc.head = load_head(loc.id);
  }
}

template <class K>
Status PBwTree<K>::insert(K key, Value value) {
  return modify(Op::kInsert, key, value);
}
template <class K>
Status PBwTree<K>::update(K key, Value value) {
  return modify(Op::kUpdate, key, value);
}
template <class K>
Status PBwTree<K>::remove(K key) {
  return modify(Op::kRemove, key, 0);
}

template <class K>
std::optional<Value> PBwTree<K>::lookup(K key) {
  if (!key_fits(key)) return std::nullopt;
  EpochManager::Guard g(epoch_);
  Loc loc = descend(key, false);
  for (;;) {
    uint64_t v = 0;
    Route rt;
    const Hit hit = search_leaf(loc.head, key, &v, &rt);
    if (hit == Hit::kFound) return v;
    if (hit == Hit::kAbsent) return std::nullopt;
    move_right(&loc, rt);
  }
}

template <class K>
size_t PBwTree<K>::scan(K start, size_t count, std::vector<std::pair<OwnedKey<K>, Value>>* out) {
  out->clear();
  if (count == 0) return 0;
  EpochManager::Guard g(epoch_);
  Loc loc = descend(start, false);
  View v;
  for (;;) {
    collect(loc.head, &v);
    if (v.has_high && !(start < v.high)) {
      move_right(&loc, Route{true, v.right, v.high});
      continue;
    }
    auto it = std::lower_bound(v.items.begin(), v.items.end(), start,
                               [](const Item& a, const K& b) { return a.first < b; });
    for (; it != v.items.end() && out->size() < count; ++it) {
      out->emplace_back(OwnedKey<K>(it->first), it->second);
    }
    if (out->size() >= count || !v.has_high) return out->size();
    start = v.high;  // the next leaf's keys are all >= it
    move_right(&loc, Route{true, v.right, v.high});
  }
}

template <class K>
std::optional<std::pair<OwnedKey<K>, Value>> PBwTree<K>::find_last_less_than(K key) {
  EpochManager::Guard g(epoch_);
  View v;
  for (;;) {
    if (!(C::min_key() < key)) return std::nullopt;
    Loc loc = descend(key, true);
    for (;;) {
      collect(loc.head, &v);
      if (v.has_high && v.high < key) {
        move_right(&loc, Route{true, v.right, v.high});
        continue;
      }
      break;
    }
    auto it = std::lower_bound(v.items.begin(), v.items.end(), key,
                               [](const Item& a, const K& b) { return a.first < b; });
    if (it != v.items.begin()) {
      --it;
      return std::pair<OwnedKey<K>, Value>(OwnedKey<K>(it->first), it->second);
    }
    key = loc.lo;  // nothing below key in this leaf: look below its low key
  }
}

// ---------------------------------------------------------------- verify

/// Walks the tree level by level: each level from its leftmost node along
/// sibling links (the first node's low is the smallest key, each next one's
/// the previous one's high key), checking every node's content ascending
/// and inside [low, high), and that every child an inner node names is on
/// the next level with that low key.
template <class K>
Status PBwTree<K>::walk_levels(VerifyReport* report, ChainStats* stats) const {
  *report = VerifyReport{};
  *stats = ChainStats{};
  EpochManager::Guard g(epoch_);
  const std::string idx(kName);
  uint64_t first = root_->root_id.load(kAcq);
  std::vector<std::pair<K, uint64_t>> expected;  // (low, id) the level above names
  expected.emplace_back(C::min_key(), first);
  View v;
  std::vector<uint8_t> seen(next_id_ + 1, 0);
  // pm_bytes: the directory blocks and mapping chunks, then every record of
  // every reached chain (the root object and the DRAM-held reserve are the
  // constant rest).
  (void)for_each_table_block([&](uint64_t off) {
    report->pm_bytes += pool_->allocator().block_size(off);
    return Status::Ok();
  });
  for (uint32_t level = 0;; ++level) {
    if (level > 64) return Status::Corruption(idx + ": more than 64 levels");
    std::vector<std::pair<K, uint64_t>> next_level;
    size_t want = 0;
    uint64_t id = first;
    K lo = C::min_key();
    bool leaf_level = false;
    for (bool first_node = true;; first_node = false) {
      if (id >= seen.size() || seen[id]) {
        return Status::Corruption(idx + ": node id " + std::to_string(id) + " reached twice");
      }
      seen[id] = 1;
      const uint64_t head = word(id)->load(kAcq) & ~kDirty;
      if (head == 0)
        return Status::Corruption(idx + ": node " + std::to_string(id) + " has no record");
      collect(head, &v);
      stats->nodes++;
      stats->max_depth = std::max<uint64_t>(stats->max_depth, hdr(head)->depth);
      const uint64_t base = base_off(head);
      for (uint64_t o = head;; o = hdr(o)->next) {
        const bool slot = in_area(base, o);
        if (!slot) report->pm_bytes += pool_->allocator().block_size(o);
        if (hdr(o)->depth == 0) break;
        stats->deltas++;
        if (slot) stats->area_deltas++;
        if (hdr(o)->type == kSplit) stats->split_deltas++;
        if (hdr(o)->type == kIndexEntry) stats->index_deltas++;
      }
      if (first_node) leaf_level = v.leaf;
      if (v.leaf != leaf_level)
        return Status::Corruption(idx + ": mixed level " + std::to_string(level));
      if (want < expected.size() && expected[want].second == id) {
        if (!(expected[want].first == lo)) {
          return Status::Corruption(idx + ": node " + std::to_string(id) +
                                    " is named with another low key than its own");
        }
        ++want;
      } else {
        stats->unposted_splits++;
      }
      if (hdr(head)->count != v.items.size()) {
        return Status::Corruption(idx + ": node " + std::to_string(id) + " counts " +
                                  std::to_string(hdr(head)->count) + " items, holds " +
                                  std::to_string(v.items.size()));
      }
      for (size_t i = 0; i < v.items.size(); ++i) {
        if ((i > 0 && !(v.items[i - 1].first < v.items[i].first)) || v.items[i].first < lo ||
            (v.has_high && !(v.items[i].first < v.high))) {
          return Status::Corruption(idx + ": node " + std::to_string(id) +
                                    " holds a key out of order or out of its range");
        }
      }
      if (v.leaf) {
        report->keys += v.items.size();
        report->leaves++;
      } else {
        report->inner_nodes++;
        if (v.items.empty()) return Status::Corruption(idx + ": empty inner node");
        for (const Item& it : v.items) next_level.push_back(it);
      }
      if (!v.has_high) break;
      if (!(lo < v.high)) return Status::Corruption(idx + ": sibling links do not ascend");
      lo = v.high;
      id = v.right;
    }
    if (want != expected.size()) {
      return Status::Corruption(idx + ": level " + std::to_string(level) +
                                " misses a node its parent names");
    }
    report->height = level + 1;
    if (leaf_level) return Status::Ok();
    expected = std::move(next_level);
    first = expected.front().second;
  }
}

template <class K>
Status PBwTree<K>::verify(VerifyReport* report) const {
  ChainStats s;
  return walk_levels(report, &s);
}

template <class K>
IndexInfo PBwTree<K>::info() const {
  constexpr Capabilities caps{.ordered = true,
                              .persistent = true,
                              .thread_safe = true,
                              .string_keys = true,
                              .placement = Placement::kPmOnly};
  uint64_t ids_bytes = 0;
  {
    std::lock_guard<std::mutex> g(id_mu_);
    ids_bytes = free_ids_.capacity() * 8;
  }
  return this->persistent_info("p-bwtree", kPBwTreeDescription, caps, node_size_,
                               sizeof(*this) + ids_bytes + epoch_.pending() * 16);
}

template <class K>
std::vector<std::pair<std::string, std::string>> PBwTree<K>::ablation_notes() const {
  return {
      {"p-bwtree.root.id",
       "tolerated by design: a lost root id leaves the old root, which reaches the new root's "
       "sibling by its split delta, and the new root's id is an orphan recovery clears; the "
       "persist keeps the grown root across a crash (one per root growth)"},
      {"p-bwtree.chunk.init/flush",
       "hygiene: no word of a chunk is followed before the NAW that gives its id a record (a "
       "split's or root growth's word, persisted before the CAS that links the id), and recovery "
       "clears every nonzero word it did not reach; the zeros only keep a reused block's stale "
       "words out of the table (once per 512 node ids)"},
      {"p-bwtree.split.sibling_word/flush",
       "needed, and not observable in the lab's small trees: the word must be durable (this "
       "flush, the split delta's fence) before the CAS that names the new id (recovery reports a "
       "reachable node without a record as "
       "Corruption); the lab's runs make fewer than 8 node ids (3 splits in 80 operations at "
       "128 B), so every new word shares line 0 of chunk 0 with the split node's word, whose "
       "persist after the publishing CAS flushes both"},
      {"p-bwtree.base.slots",
       "hygiene: the zeroed claim words of a base's delta slots only mark them free in this run "
       "(write_delta claims a slot by CAS from 0); after a crash a slot whose zero was lost is "
       "merely skipped (the delta takes a block of its own), and a slot that holds a published "
       "delta is nonzero by that delta's persist before its CAS; the flush keeps the area's lines "
       "from staying dirty until the block is reused (one fence with the base)"},
      {"p-bwtree.recover.orphan",
       "hygiene: an orphan id is never followed (no chain names it) and its word is rewritten by "
       "NAW before the id is published again, so a lost clear changes nothing a crash test sees"},
      {"p-bwtree.recover.clean",
       "hygiene: kDirty is ignored by every reader after recovery (the word is durable; a reader "
       "that sees the bit persists it again), so a lost clear only costs one flush later"},
  };
}

template <class K>
std::optional<Events> events_of(const Index<K>& index) {
  const auto* t = dynamic_cast<const PBwTree<K>*>(&index);
  if (t == nullptr) return std::nullopt;
  return t->events();
}
template <class K>
std::optional<ChainStats> chain_stats_of(const Index<K>& index) {
  const auto* t = dynamic_cast<const PBwTree<K>*>(&index);
  if (t == nullptr) return std::nullopt;
  return t->chain_stats();
}

template <class K>
bool defer_index_entries(Index<K>& index, bool on) {
  auto* t = dynamic_cast<PBwTree<K>*>(&index);
  if (t == nullptr) return false;
  t->defer_index_entries(on);
  return true;
}
template bool defer_index_entries<uint64_t>(Index<uint64_t>&, bool);
template bool defer_index_entries<std::string_view>(Index<std::string_view>&, bool);
template std::optional<Events> events_of<uint64_t>(const Index<uint64_t>&);
template std::optional<Events> events_of<std::string_view>(const Index<std::string_view>&);
template std::optional<ChainStats> chain_stats_of<uint64_t>(const Index<uint64_t>&);
template std::optional<ChainStats> chain_stats_of<std::string_view>(const Index<std::string_view>&);

}  // namespace p_bwtree

// ---------------------------------------------------------------- factories

namespace {
template <class K>
Status make_p_bwtree_of(const IndexOptions& options, std::unique_ptr<Index<K>>* out) {
  using p_bwtree::PBwTree;
  return open_persistent_index<PBwTree<K>>(
      options, pool_layout("p-bwtree", key_type_of<K>), [](PBwTree<K>& t) { return t.create(); },
      [](PBwTree<K>& t) { return t.recover(); }, out, options.node_size);
}
}  // namespace

Status make_p_bwtree(const IndexOptions& options, std::unique_ptr<Index<uint64_t>>* out) {
  return make_p_bwtree_of<uint64_t>(options, out);
}
Status make_p_bwtree_string(const IndexOptions& options,
                            std::unique_ptr<Index<std::string_view>>* out) {
  return make_p_bwtree_of<std::string_view>(options, out);
}

}  // namespace nvindex
