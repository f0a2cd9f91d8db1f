// InnerTree: DRAM inner nodes over PM leaves (inner_tree.h has the layout,
// the concurrency scheme and the leaf-writer protocol).
//
// Memory ordering: every node word a reader may load while a writer stores it
// (lock, count, level, leftmost, keys, children) is a std::atomic; writers
// store with release, readers load with acquire (no standalone fences: GCC's
// ThreadSanitizer does not model them). A new node is filled completely before
// the release store that publishes it (a parent's child slot or the root
// pointer), so a reader that loads the pointer sees the whole node.
//
// Why optimistic readers never act on a half-changed node: an inner writer
// locks every existing node it will change before the first store and
// unlocks each (version + 1) after the last store. A reader validates a node
// after reading what it needs from it and after reading its child's version
// (lock coupling), so any overlap with a change fails validation and the
// reader restarts from the root. The root pointer is re-read after the root's
// version: a root split stores the new root before unlocking the old one, so
// a reader that saw the old root's new version also sees the new root.
//
// Key types: TreeImpl<K> holds everything; only KeyOps<K> (below) knows what
// a key word means. For uint64_t every KeyOps function is the identity or
// the integer compare the code had before the template, and the descent
// still inlines the SIMD search, so the integer instance compiles to the same
// machine code. For std::string_view a key word is the address of a
// separator record (SepArena), 0 meaning the smallest key "" (the low key of
// the leftmost child, never stored in a slot). An optimistic reader may load
// a stale or unfilled (0) key word while a writer changes the node: it then
// compares against a record that is still allocated and immutable (records
// live until build*() or the destructor) or against "", and fails
// validation afterwards, as for a stale integer.
#include "indexes/common/inner_tree.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <unordered_map>

#include "absl/container/inlined_vector.h"
#include "indexes/common/prefetch.h"
#include "indexes/common/simd_search.h"
#include "indexes/common/version_lock.h"
#include "util/quote.h"

namespace nvindex::inner {

namespace {

constexpr auto kAcq = std::memory_order_acquire;
constexpr auto kRel = std::memory_order_release;
constexpr auto kRlx = std::memory_order_relaxed;

/// Inner node header, 16 B (layout table in inner_tree.h). Followed by
/// `capacity` separator keys, then `capacity` children. The separator count, the level and the
/// leftmost child share one word, so a reader gets all three with one load and a 256 B node holds
/// 15 separators (16 children), as LB+-tree's non-leaf node does.
struct Node {
  std::atomic<uint64_t> lock{0};  ///< vlock word
  /// level << 56 | count << 48 | leftmost child (a leaf offset or a Node*,
  /// both below 2^48). Written only by the holder of `lock` or before the
  /// node is published.
  std::atomic<uint64_t> meta{0};
};

constexpr unsigned kCountShift = 48;
constexpr unsigned kLevelShift = 56;
constexpr uint64_t kChildMask = (uint64_t{1} << kCountShift) - 1;
constexpr uint64_t kCountMask = uint64_t{0xff} << kCountShift;
constexpr uint64_t kLevelMask = uint64_t{0xff} << kLevelShift;

uint32_t count_of(uint64_t meta) {
  return static_cast<uint32_t>((meta & kCountMask) >> kCountShift);
}
uint32_t level_of(uint64_t meta) { return static_cast<uint32_t>(meta >> kLevelShift); }
uint64_t leftmost_of(uint64_t meta) { return meta & kChildMask; }

uint32_t node_count(const Node* n, std::memory_order o) { return count_of(n->meta.load(o)); }
uint32_t node_level(const Node* n, std::memory_order o) { return level_of(n->meta.load(o)); }
uint64_t node_leftmost(const Node* n, std::memory_order o) { return leftmost_of(n->meta.load(o)); }
// Writers: only the node's lock holder (or its builder) stores meta, so a
// load-modify-store is exact.
void set_count(Node* n, uint32_t c, std::memory_order o) {
  const uint64_t m = n->meta.load(std::memory_order_relaxed);
  n->meta.store((m & ~kCountMask) | (uint64_t{c} << kCountShift), o);
}
void set_level(Node* n, uint32_t level) {
  const uint64_t m = n->meta.load(std::memory_order_relaxed);
  n->meta.store((m & ~kLevelMask) | (uint64_t{level} << kLevelShift), std::memory_order_relaxed);
}
void set_leftmost(Node* n, uint64_t child, std::memory_order o) {
  const uint64_t m = n->meta.load(std::memory_order_relaxed);
  n->meta.store((m & ~kChildMask) | (child & kChildMask), o);
}

/// The separators and children of a node with `cap` separators: keys
/// k[0..cap) from byte 16, children c[0..cap) right after them (inner_tree.h
/// layout). Separator i and child i belong together: child i covers
/// [k[i], k[i + 1]). Keys are contiguous so that one vector compare covers
/// 8 of them (simd::count_le).
template <class Word>
struct Slots {
  Word* k;
  Word* c;
  struct Ref {
    Word& key;
    Word& child;
  };
  Ref operator[](uint32_t i) const { return Ref{k[i], c[i]}; }
};

Slots<std::atomic<uint64_t>> entries(Node* n, uint32_t cap) {
  auto* k = reinterpret_cast<std::atomic<uint64_t>*>(reinterpret_cast<char*>(n) + sizeof(Node));
  return {k, k + cap};
}
Slots<const std::atomic<uint64_t>> entries(const Node* n, uint32_t cap) {
  const auto* k = reinterpret_cast<const std::atomic<uint64_t>*>(reinterpret_cast<const char*>(n) +
                                                                 sizeof(Node));
  return {k, k + cap};
}

static_assert(sizeof(Node) == 16 && offsetof(Node, lock) == 0 && offsetof(Node, meta) == 8);
// Route::parent points at a Node; InnerTree::validate (inline) reads its
// first word as the lock.
static_assert(sizeof(std::atomic<uint64_t>) == sizeof(uint64_t));
static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(sizeof(std::atomic<uint64_t>) == 8);

uint64_t as_word(const Node* n) { return reinterpret_cast<uintptr_t>(n); }
Node* as_node(uint64_t w) { return reinterpret_cast<Node*>(static_cast<uintptr_t>(w)); }

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "nvindex::inner::InnerTree: %s\n", what);
  std::abort();
}

/// One child while building a level: its low key word (KeyOps) and its word
/// (leaf offset at level 1, Node* above).
using Child = std::pair<uint64_t, uint64_t>;

/// Where inner nodes (and a string-keyed tree's separator records) live:
/// slabs of contiguous blocks handed out in order, never freed one by one (the tree frees nodes
/// only all at once, in build*() and the destructor). Nodes made together sit together, without
/// allocator headers between them, and slabs after the first are 2 MiB
/// mappings of their own, aligned, with transparent huge pages requested
/// (madvise) before first touch (map_huge_slab), so the inner
/// levels of a large tree take a few TLB entries instead of one 4 KiB page
/// per node (as LB+-tree's code, which carves its non-leaf nodes from one
/// pre-allocated pool). Thread-safe (build_segments builds level 1 on
/// several threads).
class NodeArena {
 public:
  NodeArena() = default;
  ~NodeArena() { release(); }
  NodeArena(const NodeArena&) = delete;
  NodeArena& operator=(const NodeArena&) = delete;

  /// `size` bytes (at most 64 KiB), uninitialised, aligned as the sizes of
  /// every earlier allocate() allow (a slab is 64 B aligned: all node_size,
  /// multiples of 64, give 64 B aligned nodes; multiples of 8, 8 B aligned
  /// records). Aborts when memory runs out (as operator new would throw: the
  /// caller has no error path).
  void* allocate(size_t size) {
    std::lock_guard<std::mutex> g(mu_);
    if (left_ < size) {
      // The first slab is small (a small tree stays small); then 2 MiB.
      const size_t bytes = slabs_.empty() ? kFirstSlab : kSlab;
      void* m = bytes == kSlab ? map_huge_slab() : std::aligned_alloc(64, bytes);
      if (m == nullptr) die("out of memory for inner nodes");
      held_ += bytes;
      slabs_.push_back(m);
      next_ = static_cast<char*>(m);
      left_ = bytes;
    }
    void* p = next_;
    next_ += size;
    left_ -= size;
    return p;
  }
  /// Bytes of the slabs held.
  uint64_t bytes() const {
    std::lock_guard<std::mutex> g(mu_);
    return held_;
  }
  /// Frees every slab (every node ever allocated). Not thread-safe against
  /// allocate().
  void release() {
    for (size_t i = 0; i < slabs_.size(); ++i) {
      if (i == 0) {
        std::free(slabs_[i]);  // the small first slab (aligned_alloc)
      } else {
        ::munmap(slabs_[i], kSlab);
      }
    }
    slabs_.clear();
    next_ = nullptr;
    left_ = 0;
    held_ = 0;
  }

 private:
  /// A fresh anonymous mapping of kSlab bytes at a kSlab-aligned address,
  /// advised MADV_HUGEPAGE before any byte of it is touched, so that its
  /// first fault can map one 2 MiB page where transparent huge pages are
  /// allowed (/sys/kernel/mm/transparent_hugepage/enabled madvise or
  /// always); nullptr when mmap fails. Not from malloc: a heap range that
  /// earlier allocations already faulted in as 4 KiB pages stays on them
  /// (MADV_HUGEPAGE changes later faults only), as under `nvindex bench`,
  /// which builds and frees its key sets before the index (AnonHugePages 0
  /// there with aligned_alloc, 8 MiB at 2M keys with this).
  static void* map_huge_slab() {
    void* m =
        ::mmap(nullptr, 2 * kSlab, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return nullptr;
    // Keep the kSlab-aligned kSlab bytes inside the mapping; unmap the rest.
    const uintptr_t a = reinterpret_cast<uintptr_t>(m);
    const uintptr_t start = (a + kSlab - 1) & ~(uintptr_t{kSlab} - 1);
    if (start > a) ::munmap(m, start - a);
    const uintptr_t end = start + kSlab;
    if (a + 2 * kSlab > end) ::munmap(reinterpret_cast<void*>(end), a + 2 * kSlab - end);
    void* slab = reinterpret_cast<void*>(start);
    (void)::madvise(slab, kSlab, MADV_HUGEPAGE);  // a hint: failure changes nothing
    return slab;
  }

  static constexpr size_t kFirstSlab = 64 * 1024;
  static constexpr size_t kSlab = 2 * 1024 * 1024;
  mutable std::mutex mu_;
  std::vector<void*> slabs_;
  char* next_ = nullptr;
  size_t left_ = 0;
  uint64_t held_ = 0;
};

/// A separator record of a string-keyed tree: the key's length, then its
/// bytes (DRAM, 8 B aligned, 8 + len bytes rounded up to 8).
struct SepRecord {
  uint32_t len;
  uint32_t pad;
  /// The key bytes, right after the 8-byte head.
  char* bytes() { return reinterpret_cast<char*>(this + 1); }
  const char* bytes() const { return reinterpret_cast<const char*>(this + 1); }
};
static_assert(sizeof(SepRecord) == 8);

/// Where a string-keyed tree's separator records live: a NodeArena of their
/// own, freed all at once (release()) with the nodes. Thread-safe
/// (build_segments interns separators on several threads).
class SepArena {
 public:
  /// A new record holding `key`, complete (a caller publishes its address
  /// with a release store). Aborts when memory runs out.
  const SepRecord* intern(std::string_view key) {
    const size_t bytes = (sizeof(SepRecord) + key.size() + 7) & ~size_t{7};
    auto* r = static_cast<SepRecord*>(arena_.allocate(bytes));
    r->len = static_cast<uint32_t>(key.size());
    r->pad = 0;
    if (!key.empty()) std::memcpy(r->bytes(), key.data(), key.size());
    return r;
  }
  /// Frees every record. Not thread-safe against intern().
  void release() { arena_.release(); }
  /// Bytes held.
  uint64_t bytes() const { return arena_.bytes(); }

 private:
  NodeArena arena_;
};

/// What a key word means for key type K (see the file comment). Every
/// function of the uint64_t instance is what the code did before it was a
/// template.
template <class K>
struct KeyOps;

template <>
struct KeyOps<uint64_t> {
  struct Arena {
    uint64_t bytes() const { return 0; }
    void release() {}
  };
  static uint64_t word(uint64_t key, Arena& /*arena*/) { return key; }
  static uint64_t key(uint64_t word) { return word; }
  static bool less(uint64_t a, uint64_t b) { return a < b; }
  static bool is_min(uint64_t key) { return key == 0; }
  /// Separators < sep among k[0..cnt): those <= sep - 1 (sep > 0).
  static int count_lt(const std::atomic<uint64_t>* k, uint32_t cnt, uint32_t cap, uint64_t sep) {
    return simd::count_le(k, cnt, cap, sep - 1);
  }
  static std::string show(uint64_t word) { return std::to_string(word); }
};

template <>
struct KeyOps<std::string_view> {
  using Arena = SepArena;
  static uint64_t word(std::string_view key, Arena& arena) {
    return reinterpret_cast<uintptr_t>(arena.intern(key));
  }
  static std::string_view key(uint64_t word) {
    const auto* r = reinterpret_cast<const SepRecord*>(static_cast<uintptr_t>(word));
    return r == nullptr ? std::string_view() : std::string_view(r->bytes(), r->len);
  }
  static bool less(std::string_view a, std::string_view b) { return a < b; }
  static bool is_min(std::string_view key) { return key.empty(); }
  /// Binary search: the number of k[0..cnt) for which pred(key word) holds,
  /// pred true on a prefix of the ascending words.
  template <class Pred>
  static uint32_t count_prefix(const std::atomic<uint64_t>* k, uint32_t cnt, Pred pred) {
    uint32_t lo = 0;
    uint32_t hi = cnt;
    while (lo < hi) {
      const uint32_t mid = (lo + hi) / 2;
      if (pred(key(k[mid].load(std::memory_order_acquire)))) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    return lo;
  }
  static int count_lt(const std::atomic<uint64_t>* k, uint32_t cnt, uint32_t /*cap*/,
                      std::string_view sep) {
    return static_cast<int>(count_prefix(k, cnt, [&](std::string_view s) { return s < sep; }));
  }
  static std::string show(uint64_t word) { return quote_input(key(word), 255); }
};

/// The descent's node search for string keys: separators <= key.
struct CountLeString {
  static uint32_t count(const std::atomic<uint64_t>* k, uint32_t n, uint32_t /*span*/,
                        std::string_view key) {
    return KeyOps<std::string_view>::count_prefix(k, n,
                                                  [&](std::string_view s) { return s <= key; });
  }
};

}  // namespace

template <class K>
struct TreeImpl {
  using Ops = KeyOps<K>;
  uint32_t node_size;
  uint32_t cap;  ///< separators per node
  std::atomic<Node*> root{nullptr};
  std::mutex write_mu;             ///< serializes insert_separator (unless single_writer)
  bool single_writer = false;      ///< the constructor's: one calling thread
  std::vector<Node*> all;          ///< every allocated node (guarded by write_mu / build)
  std::atomic<uint64_t> count{0};  ///< all.size(), readable concurrently
  mutable NodeArena arena;         ///< the memory of every node
  uint32_t prefetch;               ///< bytes of a child prefetched: min(node_size, 512)
  typename Ops::Arena seps;        ///< separator records (strings; empty for integers)

  explicit TreeImpl(uint32_t ns)
      : node_size(ns), cap((ns - sizeof(Node)) / 16), prefetch(std::min(ns, 512u)) {}

  /// InnerTree::find with the node search of one SIMD level inlined.
  template <class Search>
  Route descend(K key) const;
  Route find_avx512(K key) const;  // integers only
  Route find_avx2(K key) const;
  Route find_scalar(K key) const;
  /// InnerTree::find_single with the node search of one SIMD level inlined
  /// and, for kCap > 0, the node capacity (and so the search's trip count
  /// and the child's prefetch) fixed at compile time; kCap 0: cap.
  template <class Search, uint32_t kCap>
  Route descend_single(K key) const;
  template <uint32_t kCap>
  Route find_single_avx512(K key) const;  // integers only
  template <uint32_t kCap>
  Route find_single_avx2(K key) const;
  template <uint32_t kCap>
  Route find_single_scalar(K key) const;

  /// A zeroed node of node_size bytes, 64 B aligned, not yet registered.
  Node* make_node(uint16_t level) const {
    void* mem = arena.allocate(node_size);
    Node* n = new (mem) Node();
    auto* w = reinterpret_cast<char*>(n) + sizeof(Node);
    for (uint32_t i = 0; i < 2 * cap; ++i) new (w + 8 * i) std::atomic<uint64_t>(0);
    if (reinterpret_cast<uintptr_t>(n) > kChildMask) die("node address above 2^48");
    set_level(n, level);
    return n;
  }
  /// Drops a node that was never published: its block stays in the arena
  /// until the tree is rebuilt or destroyed (one node at most per build).
  static void free_node(Node* n) {
    n->~Node();  // trivially destructible atomics; kept for symmetry
  }
  void register_nodes(std::span<Node* const> ns) {
    all.insert(all.end(), ns.begin(), ns.end());
    count.store(all.size(), kRel);
  }
  void free_all() {
    for (Node* n : all) free_node(n);
    all.clear();
    arena.release();
    count.store(0, kRel);
    root.store(nullptr, kRel);
    seps.release();
  }

  /// Level-1 children over `leaves`: (low key word, leaf), the first low
  /// key word 0 when `first_is_min` (strings: separators interned).
  std::vector<Child> children(std::span<const LeafRefT<K>> leaves, bool first_is_min) {
    std::vector<Child> kids;
    kids.reserve(leaves.size());
    for (size_t i = 0; i < leaves.size(); ++i) {
      const uint64_t w = i == 0 && first_is_min ? 0 : Ops::word(leaves[i].first, seps);
      kids.emplace_back(w, leaves[i].second);
    }
    return kids;
  }

  /// Cut sizes of one level of `n` children into nodes of `per` children
  /// (inner_tree.h, build()).
  std::vector<size_t> cuts(size_t n, uint32_t per) const {
    std::vector<size_t> sizes;
    for (size_t i = 0; i < n; i += per) sizes.push_back(std::min<size_t>(per, n - i));
    if (sizes.size() >= 2 && sizes.back() == 1) {
      if (per + 1 <= cap + 1) {
        sizes.pop_back();
        sizes.back() += 1;  // merge the lone child into the left neighbour
      } else {
        sizes[sizes.size() - 2] -= 1;  // per == cap + 1 >= 3: borrow one
        sizes.back() += 1;
      }
    }
    return sizes;
  }

  /// Builds the nodes of one level over `kids` (kids[0]'s low key is the
  /// level's low key); appends the new nodes to *made and returns them as
  /// children of the next level.
  std::vector<Child> build_level(std::span<const Child> kids, uint16_t level, uint32_t per,
                                 std::vector<Node*>* made) const {
    std::vector<Child> out;
    size_t at = 0;
    for (size_t sz : cuts(kids.size(), per)) {
      Node* n = make_node(level);
      set_leftmost(n, kids[at].second, kRlx);
      const auto e = entries(n, cap);
      for (size_t j = 1; j < sz; ++j) {
        e[j - 1].key.store(kids[at + j].first, kRlx);
        e[j - 1].child.store(kids[at + j].second, kRlx);
      }
      set_count(n, sz - 1, kRlx);
      made->push_back(n);
      out.emplace_back(kids[at].first, as_word(n));
      at += sz;
    }
    return out;
  }

  /// Builds the levels above `level1` until one node remains; publishes it.
  void finish(std::vector<Child> level, uint32_t per, std::vector<Node*>* made) {
    uint16_t lv = 1;
    while (level.size() > 1) {
      ++lv;
      level = build_level(level, lv, per, made);
    }
    register_nodes(*made);
    root.store(as_node(level.front().second), kRel);
  }
};

template <class K>
InnerTreeT<K>::InnerTreeT(uint32_t node_size, bool single_writer) {
  if (node_size < 128 || node_size > 4096 || node_size % 64 != 0) {
    std::fprintf(stderr,
                 "nvindex::inner::InnerTree: node_size %u invalid (128..4096, a multiple of 64)\n",
                 node_size);
    std::abort();
  }
  impl_ = std::make_unique<TreeImpl<K>>(node_size);
  impl_->single_writer = single_writer;
}

template <class K>
InnerTreeT<K>::~InnerTreeT() {
  impl_->free_all();
}

template <class K>
uint32_t InnerTreeT<K>::capacity() const {
  return impl_->cap;
}

template <class K>
uint32_t InnerTreeT<K>::children_per_node(double fill) const {
  const uint32_t max = impl_->cap + 1;
  if (!(fill > 0.0)) return 2;
  const double c = std::ceil(fill * max - 1e-9);  // 1e-9: fill 1.0 is exactly max
  if (c >= max) return max;
  return std::max<uint32_t>(2, static_cast<uint32_t>(c));
}

namespace {

template <class K>
Status check_leaves(std::span<const LeafRefT<K>> leaves, bool* first, OwnedKey<K>* prev,
                    size_t seg) {
  for (size_t i = 0; i < leaves.size(); ++i) {
    if (leaves[i].second == 0 || leaves[i].second > kChildMask) {
      return Status::InvalidArgument(
          "InnerTree::build: leaf offset 0 or at or above 2^48 at index " + std::to_string(i) +
          " of segment " + std::to_string(seg));
    }
    if (!*first && leaves[i].first <= *prev) {
      return Status::InvalidArgument("InnerTree::build: keys not strictly ascending at index " +
                                     std::to_string(i) + " of segment " + std::to_string(seg));
    }
    *first = false;
    *prev = leaves[i].first;
  }
  return Status::Ok();
}

Status check_fill(double fill) {
  if (!(fill > 0.0 && fill <= 1.0)) {
    return Status::InvalidArgument("InnerTree::build: fill factor must be in (0, 1]");
  }
  return Status::Ok();
}

}  // namespace

template <class K>
Status InnerTreeT<K>::build(std::span<const LeafRef> leaves, double fill) {
  if (Status s = check_fill(fill); !s.ok()) return s;
  if (leaves.empty()) return Status::InvalidArgument("InnerTree::build: no leaves");
  bool first = true;
  OwnedKey<K> prev{};
  if (Status s = check_leaves<K>(leaves, &first, &prev, 0); !s.ok()) return s;

  impl_->free_all();
  const uint32_t per = children_per_node(fill);
  const std::vector<Child> kids = impl_->children(leaves, true);
  std::vector<Node*> made;
  impl_->finish(impl_->build_level(kids, 1, per, &made), per, &made);
  return Status::Ok();
}

template <class K>
Status InnerTreeT<K>::build_segments(const std::vector<std::vector<LeafRef>>& segments,
                                     unsigned threads, double fill) {
  if (Status s = check_fill(fill); !s.ok()) return s;
  bool first = true;
  OwnedKey<K> prev{};
  for (size_t i = 0; i < segments.size(); ++i) {
    if (Status s = check_leaves<K>(segments[i], &first, &prev, i); !s.ok()) return s;
  }
  if (first) return Status::InvalidArgument("InnerTree::build_segments: no leaves");

  impl_->free_all();
  const uint32_t per = children_per_node(fill);
  const size_t nseg = segments.size();
  std::vector<std::vector<Child>> level1(nseg);
  std::vector<std::vector<Node*>> made(nseg);
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next.fetch_add(1, kRlx); i < nseg; i = next.fetch_add(1, kRlx)) {
      if (segments[i].empty()) continue;
      // The low key of the whole first leaf is replaced by 0 below.
      const std::vector<Child> kids = impl_->children(segments[i], false);
      level1[i] = impl_->build_level(kids, 1, per, &made[i]);
    }
  };
  const size_t nthreads = std::min<size_t>(std::max(1u, threads), nseg);
  std::vector<std::thread> pool;
  for (size_t t = 1; t < nthreads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();

  std::vector<Child> level;
  std::vector<Node*> all;
  for (size_t i = 0; i < nseg; ++i) {
    level.insert(level.end(), level1[i].begin(), level1[i].end());
    all.insert(all.end(), made[i].begin(), made[i].end());
  }
  level.front().first = 0;
  // The level's last node with a lone child gets build()'s treatment (merged
  // into its left neighbour, or borrowing one child from it if that is full),
  // so aligned segments give exactly build()'s tree.
  if (level.size() >= 2 && node_count(as_node(level.back().second), kRlx) == 0) {
    Node* lone = as_node(level.back().second);
    Node* prev = as_node(level[level.size() - 2].second);
    const uint32_t pc = node_count(prev, kRlx);
    if (pc < impl_->cap) {
      entries(prev, impl_->cap)[pc].key.store(level.back().first, kRlx);
      entries(prev, impl_->cap)[pc].child.store(node_leftmost(lone, kRlx), kRlx);
      set_count(prev, pc + 1, kRlx);
      level.pop_back();
      all.pop_back();  // lone: segments' nodes are in order, it is the last
      TreeImpl<K>::free_node(lone);
    } else {
      const auto moved = entries(prev, impl_->cap)[pc - 1];
      entries(lone, impl_->cap)[0].key.store(level.back().first, kRlx);
      entries(lone, impl_->cap)[0].child.store(node_leftmost(lone, kRlx), kRlx);
      set_leftmost(lone, moved.child.load(kRlx), kRlx);
      set_count(lone, 1, kRlx);
      level.back().first = moved.key.load(kRlx);
      set_count(prev, pc - 1, kRlx);
    }
  }
  impl_->finish(std::move(level), per, &all);
  return Status::Ok();
}

namespace {

/// Index of the child of `n` covering the keys just below `sep`: -1 =
/// leftmost, i = entry i (the number of separators < sep, minus one). `cnt`
/// is the count read. Integers: the SIMD search of simd_search.h (AVX-512 /
/// AVX2 / branch-free scalar, chosen at run time) for sep - 1.
template <class K>
int route_below(const Node* n, uint32_t cap, uint32_t cnt, K sep) {
  return KeyOps<K>::count_lt(entries(n, cap).k, cnt, cap, sep) - 1;
}

uint64_t child_at(const Node* n, uint32_t cap, int slot) {
  return slot < 0 ? node_leftmost(n, kAcq) : entries(n, cap)[slot].child.load(kAcq);
}

}  // namespace

// The descent (InnerTree::find) is one loop per SIMD level: the search of
// each node inlined (flatten), so a level costs a few dozen instructions.
// Few instructions and no mispredicted branch on a node's contents are what
// let the next lookup's misses overlap this one's leaf miss, as LB+-tree's
// lookups do: the CPU's reorder window then holds both. The only branches
// on node data are the per-level exit (the same at every lookup of a given
// height) and the lock checks (taken only under contention); the child and
// the upper bound are chosen by masks (GCC turns a ternary between two loads
// into a branch). Measured on the 2M-key lbtree lookups of issue 8: also
// carrying the leaf's upper bound down (one more load and three selects per
// level) made a lookup 35% slower, so Route has none.
template <class K>
template <class Search>
Route TreeImpl<K>::descend(K key) const {
restart:
  Node* n = root.load(kAcq);
  if (n == nullptr) return Route{};
  uint64_t v;
  if (!vlock::read_lock(n->lock, &v)) goto restart;
  if (root.load(kAcq) != n) goto restart;  // a root split finished meanwhile
  while (true) {
    const uint64_t meta = n->meta.load(kAcq);  // level, count, leftmost: one load
    const uint32_t cnt = std::min<uint32_t>(count_of(meta), cap);
    const auto e = entries(n, cap);
    // s = separators <= key: child s - 1, or the leftmost when s is 0.
    const uint32_t s = Search::count(e.k, cnt, cap, key);
    const uint32_t nz = s != 0 ? 1 : 0;
    const uint64_t pick = uint64_t{0} - nz;  // all ones when s > 0
    const uint64_t child = (e.c[s - nz].load(kAcq) & pick) | (leftmost_of(meta) & ~pick);
    if (level_of(meta) <= 1) {
      if (!vlock::validate(n->lock, v)) goto restart;
      return Route{child, n, v};
    }
    Node* c = as_node(child);
    if (c == nullptr) goto restart;  // torn read; validation would fail
    // Every line of the child (up to 512 B) before it is searched, as
    // LB+-tree's code prefetches a whole non-leaf node.
    prefetch_bytes(c, prefetch);
    uint64_t cv;
    if (!vlock::read_lock(c->lock, &cv)) goto restart;
    if (!vlock::validate(n->lock, v)) goto restart;
    n = c;
    v = cv;
  }
}

template <class K>
__attribute__((target("avx512f,popcnt"), flatten)) Route TreeImpl<K>::find_avx512(K key) const {
  return descend<simd::CountLeAvx512>(key);
}
template <class K>
__attribute__((target("avx2,popcnt"), flatten)) Route TreeImpl<K>::find_avx2(K key) const {
  return descend<simd::CountLeAvx2>(key);
}
template <class K>
Route TreeImpl<K>::find_scalar(K key) const {
  return descend<simd::CountLeScalar>(key);
}

// The single-threaded descent (InnerTree::find_single): the same search and
// the same branch-free child choice, without the lock words: no version
// read, no validation, no restart, and nothing spilled to keep versions
// across a level. With the capacity a template argument (15 for 256 B
// nodes, 31 for 512 B), the SIMD search is fully unrolled and the child's
// prefetch is a fixed run of prefetcht0 with no loop.
template <class K>
template <class Search, uint32_t kCap>
Route TreeImpl<K>::descend_single(K key) const {
  const uint32_t c = kCap != 0 ? kCap : cap;
  const Node* n = root.load(kRlx);
  if (n == nullptr) return Route{};
  while (true) {
    const uint64_t meta = n->meta.load(kRlx);
    const uint32_t cnt = std::min<uint32_t>(count_of(meta), c);
    const auto e = entries(n, c);
    const uint32_t s = Search::count(e.k, cnt, c, key);
    const uint32_t nz = s != 0 ? 1 : 0;
    const uint64_t pick = uint64_t{0} - nz;
    const uint64_t child = (e.c[s - nz].load(kRlx) & pick) | (leftmost_of(meta) & ~pick);
    if (level_of(meta) <= 1) return Route{child, n, n->lock.load(kRlx)};
    n = as_node(child);
    if constexpr (kCap != 0) {
      prefetch_bytes_fixed<std::min<uint32_t>(sizeof(Node) + 16 * kCap, 512)>(n);
    } else {
      prefetch_bytes(n, prefetch);
    }
  }
}

// With a fixed capacity the whole node's slots are compared (the Whole
// searches: no load masks; a node is zeroed when made, and the slots past
// the count are node memory), which only a single thread may do.
template <class K>
template <uint32_t kCap>
__attribute__((target("avx512f,popcnt"), flatten)) Route TreeImpl<K>::find_single_avx512(
    K key) const {
  if constexpr (kCap != 0) {
    return descend_single<simd::CountLeAvx512Whole<kCap>, kCap>(key);
  } else {
    return descend_single<simd::CountLeAvx512, kCap>(key);
  }
}
template <class K>
template <uint32_t kCap>
__attribute__((target("avx2,popcnt"), flatten)) Route TreeImpl<K>::find_single_avx2(K key) const {
  if constexpr (kCap != 0) {
    return descend_single<simd::CountLeAvx2Whole<kCap>, kCap>(key);
  } else {
    return descend_single<simd::CountLeAvx2, kCap>(key);
  }
}
template <class K>
template <uint32_t kCap>
Route TreeImpl<K>::find_single_scalar(K key) const {
  return descend_single<simd::CountLeScalar, kCap>(key);
}

template <class K>
Route InnerTreeT<K>::find_single(K key) const {
  const TreeImpl<K>& m = *impl_;
  if constexpr (std::is_same_v<K, std::string_view>) {
    return m.template descend_single<CountLeString, 0>(key);
  } else {
    // 256 B and 512 B nodes (15 and 31 separators) get their own descents;
    // `at` calls find(std::integral_constant<uint32_t, kCap>) with the
    // tree's kCap, 0 for any other capacity.
    const auto at = [&m](auto find) {
      return m.cap == 15   ? find(std::integral_constant<uint32_t, 15>{})
             : m.cap == 31 ? find(std::integral_constant<uint32_t, 31>{})
                           : find(std::integral_constant<uint32_t, 0>{});
    };
    switch (simd::search_level()) {
      case simd::Level::kAvx512:
        return at([&](auto c) { return m.template find_single_avx512<c()>(key); });
      case simd::Level::kAvx2:
        return at([&](auto c) { return m.template find_single_avx2<c()>(key); });
      case simd::Level::kScalar:
        break;
    }
    return at([&](auto c) { return m.template find_single_scalar<c()>(key); });
  }
}

template <class K>
Route InnerTreeT<K>::find(K key) const {
  if constexpr (std::is_same_v<K, std::string_view>) {
    return impl_->template descend<CountLeString>(key);
  } else {
    switch (simd::search_level()) {
      case simd::Level::kAvx512:
        return impl_->find_avx512(key);
      case simd::Level::kAvx2:
        return impl_->find_avx2(key);
      case simd::Level::kScalar:
        break;
    }
    return impl_->find_scalar(key);
  }
}

template <class K>
void InnerTreeT<K>::insert_separator(uint64_t left, K sep, uint64_t right, const Route* hint) {
  using Ops = KeyOps<K>;
  TreeImpl<K>& m = *impl_;
  const uint32_t cap = m.cap;
  // One writer (single_writer): no mutex; see the constructor.
  std::unique_lock<std::mutex> guard(m.write_mu, std::defer_lock);
  if (!m.single_writer) guard.lock();
  Node* root = m.root.load(kRlx);
  if (root == nullptr) die("insert_separator on a tree that was not built");
  if (Ops::is_min(sep)) {
    die("insert_separator: separator is the smallest key (left's low key must be below it)");
  }
  if (right == 0) die("insert_separator: right leaf offset 0");
  if (right > kChildMask) die("insert_separator: leaf offset at or above 2^48");

  // Descend by the keys just below sep (integers: sep - 1; in left's range
  // [lo, hi) since lo < sep < hi) and record the path and the slot taken at
  // each level. Writers are serialized,
  // so these reads see a stable tree.
  struct Step {
    Node* node;
    int slot;
  };
  // Inline storage: a split allocates nothing on the heap but the new nodes
  // (arena) unless the tree is over 32 levels deep.
  absl::InlinedVector<Step, 32> path;
  // The level-1 node the caller's descent took, when it is unchanged (its
  // version is the one read then, and no other inner writer runs: the
  // mutex), so that it still routes to `left`, and has a free slot: then
  // nothing above it changes, and it is the whole path. Otherwise (a full
  // node, whose ancestors may split) the descent records every level.
  // Only a slot with a separator on both sides is taken from the hint: then
  // the node itself bounds left's range, and the checks below on `left` and
  // `sep` are as complete as after a descent (at the node's first or last
  // child the bound is in an ancestor, which the descent would check).
  Node* n = root;
  int hinted_slot = -1;  // >= 0: n is the hinted node, routing sep there
  if (hint != nullptr && validate(*hint)) {
    auto* x = static_cast<Node*>(const_cast<void*>(hint->parent));
    const uint32_t cnt = node_count(x, kRlx);
    const int slot = cnt < cap ? route_below<K>(x, cap, cnt, sep) : -1;
    if (slot >= 0 && static_cast<uint32_t>(slot + 1) < cnt) {
      n = x;
      hinted_slot = slot;
    }
  }
  while (true) {
    const uint32_t cnt = node_count(n, kRlx);
    const int slot = hinted_slot >= 0 ? hinted_slot : route_below<K>(n, cap, cnt, sep);
    // Built in place: a braced temporary would be reloaded as one 16-byte
    // load of two narrower stores, which store forwarding cannot serve; the
    // load then waits for those stores to commit, which after the caller's
    // NAW (clwb, sfence) means until that write-back completes (perf, lbtree
    // loading 2M keys: this function's samples fell by 60%).
    path.emplace_back(n, slot);
    if (node_level(n, kRlx) <= 1) break;
    n = as_node(child_at(n, cap, slot));
  }
  {
    const Step& s = path.back();
    if (child_at(s.node, cap, s.slot) != left) {
      die("insert_separator: `left` is not the leaf covering the keys below sep (caller bug)");
    }
    const uint32_t cnt = node_count(s.node, kRlx);
    if (static_cast<uint32_t>(s.slot + 1) < cnt &&
        !Ops::less(sep, Ops::key(entries(s.node, cap)[s.slot + 1].key.load(kRlx)))) {
      die("insert_separator: sep is not below left's upper bound (caller bug)");
    }
  }

  // Nodes that change: the level-1 node, and each ancestor while the node
  // below is full (it splits and pushes a separator up). Lock them all before
  // the first change, so no reader can pass a changed node through an
  // unchanged-looking ancestor.
  size_t top = path.size() - 1;  // index in path of the highest node that changes
  while (node_count(path[top].node, kRlx) >= cap && top > 0) --top;
  const bool grow = node_count(path[top].node, kRlx) >= cap;  // the root splits too
  for (size_t i = path.size(); i-- > top;) {
    std::atomic<uint64_t>& w = path[i].node->lock;
    if (!(m.single_writer ? vlock::lock_single_writer(w) : vlock::lock(w))) {
      die("insert_separator: obsolete (or, with one writer, locked) node on the path");
    }
  }

  // Bottom-up: insert (key, child) after slot into each node; a full node
  // splits, its upper half going into a fresh node that is complete before
  // its parent's slot publishes it.
  uint64_t key = Ops::word(sep, m.seps);  // strings: a new separator record
  uint64_t child = right;
  absl::InlinedVector<Node*, 32> fresh;
  for (size_t i = path.size(); i-- > top;) {
    Node* x = path[i].node;
    const auto e = entries(x, cap);
    const uint32_t cnt = node_count(x, kRlx);
    const uint32_t pos = static_cast<uint32_t>(path[i].slot + 1);
    if (cnt < cap) {
      // Room: shift [pos, cnt) right by one, from the end, then fill pos.
      // Readers overlapping these stores fail validation (x is locked).
      for (uint32_t j = cnt; j > pos; --j) {
        e[j].key.store(e[j - 1].key.load(kRlx), kRel);
        e[j].child.store(e[j - 1].child.load(kRlx), kRel);
      }
      e[pos].key.store(key, kRel);
      e[pos].child.store(child, kRel);
      set_count(x, cnt + 1, kRel);
      break;
    }
    // Full: the cap + 1 entries (with the new one at pos) are cut at mid:
    // x keeps [0, mid), entry mid goes up with the new node r, which takes
    // entry mid's child as leftmost and entries (mid, cap].
    absl::InlinedVector<Child, 256> all(cap + 1);  // cap <= 255
    for (uint32_t j = 0, k = 0; j <= cap; ++j) {
      if (j == pos) {
        all[j] = {key, child};
      } else {
        all[j] = {e[k].key.load(kRlx), e[k].child.load(kRlx)};
        ++k;
      }
    }
    const uint32_t mid = (cap + 1) / 2;
    Node* r = m.make_node(node_level(x, kRlx));
    set_leftmost(r, all[mid].second, kRlx);
    const auto re = entries(r, cap);
    for (uint32_t j = mid + 1; j <= cap; ++j) {
      re[j - mid - 1].key.store(all[j].first, kRlx);
      re[j - mid - 1].child.store(all[j].second, kRlx);
    }
    set_count(r, cap - mid, kRlx);
    fresh.push_back(r);
    for (uint32_t j = 0; j < mid; ++j) {
      e[j].key.store(all[j].first, kRel);
      e[j].child.store(all[j].second, kRel);
    }
    set_count(x, mid, kRel);
    key = all[mid].first;
    child = as_word(r);
  }
  if (grow) {
    // The old root split: a new root over (old root, key -> child), stored
    // before the old root is unlocked (find() re-reads the root pointer).
    Node* old = path[0].node;
    Node* nr = m.make_node(static_cast<uint16_t>(node_level(old, kRlx) + 1));
    set_leftmost(nr, as_word(old), kRlx);
    entries(nr, cap)[0].key.store(key, kRlx);
    entries(nr, cap)[0].child.store(child, kRlx);
    set_count(nr, 1, kRlx);
    fresh.push_back(nr);
    m.root.store(nr, kRel);
  }
  m.register_nodes(fresh);
  for (size_t i = path.size(); i-- > top;) vlock::unlock(path[i].node->lock);
}

template <class K>
std::vector<LeafRefT<K>> InnerTreeT<K>::leaves() const {
  std::vector<LeafRef> out;
  const Node* root = impl_->root.load(kAcq);
  if (root == nullptr) return out;
  struct Rec {
    static void walk(const Node* n, uint32_t cap, uint64_t low, std::vector<LeafRef>* out) {
      const uint32_t cnt = node_count(n, kAcq);
      const bool leaf_level = node_level(n, kAcq) <= 1;
      for (int s = -1; s < static_cast<int>(cnt); ++s) {
        const uint64_t lo = s < 0 ? low : entries(n, cap)[s].key.load(kAcq);
        const uint64_t c = child_at(n, cap, s);
        if (leaf_level) {
          out->emplace_back(OwnedKey<K>(KeyOps<K>::key(lo)), c);
        } else {
          walk(as_node(c), cap, lo, out);
        }
      }
    }
  };
  Rec::walk(root, impl_->cap, 0, &out);
  return out;
}

template <class K>
Status InnerTreeT<K>::verify() const {
  using Ops = KeyOps<K>;
  const TreeImpl<K>& m = *impl_;
  const Node* root = m.root.load(kAcq);
  if (root == nullptr) {
    if (m.count.load(kAcq) != 0) return Status::Corruption("inner tree: no root but nodes exist");
    return Status::Ok();
  }
  uint64_t reached = 0;
  std::set<uint64_t> leaf_set;
  std::string err;
  // Checks n (expected level, keys within [lo, hi) / hi unbounded when !has_hi).
  struct Rec {
    const TreeImpl<K>& m;
    uint64_t* reached;
    std::set<uint64_t>* leaf_set;
    std::string* err;
    bool walk(const Node* n, uint16_t level, uint64_t lo, uint64_t hi, bool has_hi, bool is_root) {
      ++*reached;
      auto fail = [&](const std::string& what) {
        *err = "inner tree: " + what + " (node at level " + std::to_string(level) + ", low key " +
               Ops::show(lo) + ")";
        return false;
      };
      if (reinterpret_cast<uintptr_t>(n) % 64 != 0) return fail("node not 64 B aligned");
      const uint64_t w = n->lock.load(kAcq);
      if (w & vlock::kLocked) return fail("node left locked");
      if (w & vlock::kObsolete) return fail("obsolete node reachable");
      if (node_level(n, kAcq) != level) return fail("level mismatch");
      const uint32_t cnt = node_count(n, kAcq);
      if (cnt > m.cap) return fail("count above capacity");
      if (!is_root && cnt == 0 && level > 1) return fail("inner node above level 1 with 1 child");
      const auto e = entries(n, m.cap);
      uint64_t prev = lo;
      for (uint32_t i = 0; i < cnt; ++i) {
        const uint64_t k = e[i].key.load(kAcq);
        if (!Ops::less(Ops::key(prev), Ops::key(k))) {
          return fail("separators not strictly ascending above the node's low key");
        }
        if (has_hi && !Ops::less(Ops::key(k), Ops::key(hi))) {
          return fail("separator not below the node's upper bound");
        }
        prev = k;
      }
      for (int s = -1; s < static_cast<int>(cnt); ++s) {
        const uint64_t c = child_at(n, m.cap, s);
        if (c == 0) return fail("null child");
        const uint64_t clo = s < 0 ? lo : e[s].key.load(kAcq);
        const bool last = s + 1 == static_cast<int>(cnt);
        const uint64_t chi = last ? hi : e[s + 1].key.load(kAcq);
        const bool chas = last ? has_hi : true;
        if (level == 1) {
          if (!leaf_set->insert(c).second) return fail("leaf routed twice");
        } else if (!walk(as_node(c), static_cast<uint16_t>(level - 1), clo, chi, chas, false)) {
          return false;
        }
      }
      return true;
    }
  };
  Rec rec{m, &reached, &leaf_set, &err};
  const uint16_t h = node_level(root, kAcq);
  if (h == 0) return Status::Corruption("inner tree: root at level 0");
  if (!rec.walk(root, h, 0, 0, false, true)) return Status::Corruption(err);
  if (reached != m.count.load(kAcq)) {
    return Status::Corruption("inner tree: " + std::to_string(reached) + " nodes reachable, " +
                              std::to_string(m.count.load(kAcq)) + " allocated");
  }
  return Status::Ok();
}

template <class K>
std::string InnerTreeT<K>::dump() const {
  std::string out;
  const Node* root = impl_->root.load(kAcq);
  if (root == nullptr) return out;
  std::vector<const Node*> order{root};
  std::unordered_map<const Node*, size_t> id{{root, 0}};
  for (size_t i = 0; i < order.size(); ++i) {
    const Node* n = order[i];
    const uint32_t cnt = node_count(n, kAcq);
    const bool leaf_level = node_level(n, kAcq) <= 1;
    auto name = [&](uint64_t c) {
      if (leaf_level) return "@" + std::to_string(c);
      const Node* cn = as_node(c);
      auto [it, added] = id.emplace(cn, order.size());
      if (added) order.push_back(cn);
      return "n" + std::to_string(it->second);
    };
    out += "n" + std::to_string(i) + " L" + std::to_string(node_level(n, kAcq)) + " c" +
           std::to_string(cnt) + ": " + name(node_leftmost(n, kAcq));
    for (uint32_t s = 0; s < cnt; ++s) {
      out += " " + KeyOps<K>::show(entries(n, impl_->cap)[s].key.load(kAcq)) + ":" +
             name(entries(n, impl_->cap)[s].child.load(kAcq));
    }
    out += "\n";
  }
  return out;
}

template <class K>
uint32_t InnerTreeT<K>::height() const {
  const Node* root = impl_->root.load(kAcq);
  return root == nullptr ? 0 : node_level(root, kAcq);
}

template <class K>
uint64_t InnerTreeT<K>::nodes() const {
  return impl_->count.load(kAcq);
}

template <class K>
uint64_t InnerTreeT<K>::dram_bytes() const {
  return nodes() * impl_->node_size + impl_->seps.bytes();
}

template class InnerTreeT<uint64_t>;
template class InnerTreeT<std::string_view>;

}  // namespace nvindex::inner
