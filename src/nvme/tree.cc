#include "nvme/tree.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>

namespace nvindex::nvme {

namespace {

constexpr int kUpdate = 0;
constexpr int kRemove = 1;
constexpr int kInsert = 2;

std::string node_name(uint64_t id) { return "node " + std::to_string(id); }

}  // namespace

Tree::Tree(BlockDevice* dev, const TreeOptions& o)
    : dev_(dev), options_(o), buffer_(o.node_size, o.buffer_frames), super_buf_(kIoAlign) {}

Status Tree::open(BlockDevice* dev, const TreeOptions& options, std::unique_ptr<Tree>* out) {
  out->reset();
  if (options.weak && options.buffer_frames == 0) {
    return Status::InvalidArgument(
        "patree: weak persistence needs a read-write buffer (buffer of at least one node)");
  }
  // Read the first sector: blank (all zero) or just created = format.
  AlignedBuffer first(kIoAlign);
  if (Status s = dev->read(0, first.data(), kSuperBytes); !s.ok()) return s;
  const bool blank = std::all_of(first.data(), first.data() + kSuperBytes,
                                 [](std::byte b) { return b == std::byte{0}; });
  TreeOptions o = options;
  Super sup;
  if (blank && !valid_node_size(options.node_size)) {
    // A new store only: an existing one keeps its own node size.
    return Status::InvalidArgument("patree: node size " + std::to_string(options.node_size) +
                                   " B invalid (valid: a power of two in 512..4096 B)");
  }
  if (!blank) {
    if (Status s = decode_super(first.data(), dev->bytes(), dev->path(), &sup); !s.ok()) return s;
    o.node_size = sup.node_size;
  }
  if (dev->direct_io_align() > o.node_size) {
    return Status::InvalidArgument("patree: " + dev->path() + " needs direct I/O aligned to " +
                                   std::to_string(dev->direct_io_align()) + " B, more than the " +
                                   std::to_string(o.node_size) + " B node");
  }
  std::unique_ptr<Tree> t(new Tree(dev, o));
  if (blank) {
    if (Status s = t->format(); !s.ok()) return s;
  } else {
    t->super_ = sup;
    const auto t0 = std::chrono::steady_clock::now();
    if (Status s = sup.clean ? t->load_free_list() : t->recover(); !s.ok()) return s;
    // Mark the store open (not clean) before any update can reach it, so a
    // crash from here on makes the next open walk the tree.
    t->super_.clean = false;
    t->super_.free_head = 0;
    t->super_.free_count = 0;
    ++t->super_.generation;
    encode_super(t->super_, t->super_buf_.data());
    if (Status s = dev->write(0, t->super_buf_.data(), kSuperBytes); !s.ok()) return s;
    if (Status s = dev->datasync(); !s.ok()) return s;
    t->recovered_ = true;
    t->recovery_seconds_ =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  *out = std::move(t);
  return Status::Ok();
}

Status Tree::format() {
  const uint32_t ns = options_.node_size;
  super_ = Super{};
  super_.node_size = ns;
  super_.slots = dev_->bytes() / ns;
  if (super_.slots < 2) return Status::InvalidArgument("patree: device too small for two nodes");
  super_.root = 1;
  super_.height = 1;
  super_.hwm = 2;
  AlignedBuffer leaf(ns);
  NodeView n(leaf.data(), ns);
  n.init(0);
  n.seal();
  // The leaf first, then the superblock that makes it the root: a crash
  // between the two leaves a blank first sector, formatted again next time.
  if (Status s = dev_->write(ns, leaf.data(), ns); !s.ok()) return s;
  if (Status s = dev_->datasync(); !s.ok()) return s;
  encode_super(super_, super_buf_.data());
  if (Status s = dev_->write(0, super_buf_.data(), kSuperBytes); !s.ok()) return s;
  return dev_->datasync();
}

Status Tree::read_node_sync(uint64_t id, std::byte* buf) const {
  const uint32_t ns = super_.node_size;
  if (Status s = dev_->read(id * ns, buf, ns); !s.ok()) return s;
  if (!NodeView(buf, ns).checksum_ok()) {
    return Status::Corruption("patree: " + dev_->path() + ": " + node_name(id) +
                              " has a bad checksum (a torn or damaged write)");
  }
  return Status::Ok();
}

Status Tree::load_free_list() {
  const uint32_t ns = super_.node_size;
  AlignedBuffer buf(ns);
  free_.clear();
  uint64_t page = super_.free_head;
  std::vector<bool> seen(super_.hwm, false);
  while (page != 0) {
    if (page >= super_.hwm || seen[page]) {
      return Status::Corruption("patree: " + dev_->path() +
                                ": free list loops or leaves the store at " + node_name(page));
    }
    seen[page] = true;
    if (Status s = read_node_sync(page, buf.data()); !s.ok()) return s;
    NodeView n(buf.data(), ns);
    if (n.level() != kFreeListLevel || n.count() > free_page_capacity(ns)) {
      return Status::Corruption("patree: " + dev_->path() + ": " + node_name(page) +
                                " is not a free-list page");
    }
    free_.push_back(page);  // the page itself is free once read
    for (uint32_t i = 0; i < n.count(); ++i) {
      uint64_t id;
      std::memcpy(&id, buf.data() + kNodeHeaderBytes + 8 * i, 8);
      if (id == 0 || id >= super_.hwm) {
        return Status::Corruption("patree: free list names slot " + std::to_string(id));
      }
      free_.push_back(id);
    }
    page = n.right();
  }
  if (free_.size() != super_.free_count) {
    return Status::Corruption("patree: " + dev_->path() + ": free list holds " +
                              std::to_string(free_.size()) + " slots, the superblock says " +
                              std::to_string(super_.free_count));
  }
  return Status::Ok();
}

Status Tree::recover() {
  const uint32_t ns = super_.node_size;
  std::vector<bool> reachable(super_.slots, false);
  AlignedBuffer buf(ns);
  uint64_t max_id = super_.root;
  std::vector<uint64_t> level_nodes{super_.root};  // referenced by the level above
  const uint16_t top_level = static_cast<uint16_t>(super_.height - 1);
  uint16_t level = top_level;
  std::vector<uint64_t> top_chain;  // the root and its right siblings
  half_splits_ = 0;
  for (;;) {
    // This level: the referenced nodes and every node their right links reach.
    std::vector<uint64_t> next;
    for (size_t i = 0; i < level_nodes.size(); ++i) {
      uint64_t id = level_nodes[i];
      bool referenced = true;
      while (id != 0 && !reachable[id]) {
        if (id >= super_.slots) {
          return Status::Corruption("patree: " + dev_->path() + ": link to slot " +
                                    std::to_string(id) + " beyond the store");
        }
        reachable[id] = true;
        max_id = std::max(max_id, id);
        if (Status s = read_node_sync(id, buf.data()); !s.ok()) return s;
        NodeView n(buf.data(), ns);
        if (n.level() != level) {
          return Status::Corruption("patree: " + dev_->path() + ": " + node_name(id) +
                                    " has level " + std::to_string(n.level()) + ", expected " +
                                    std::to_string(level));
        }
        if (level == top_level) {
          top_chain.push_back(id);
        } else if (!referenced) {
          ++half_splits_;
        }
        if (!n.is_leaf()) {
          for (uint32_t c = 0; c <= n.count(); ++c) next.push_back(n.child(c));
        }
        id = n.right();
        referenced = false;
        // The next referenced node is visited in its own turn.
        if (i + 1 < level_nodes.size() && level_nodes[i + 1] == id) break;
      }
    }
    if (level == 0) break;
    level_nodes = std::move(next);
    --level;
  }
  super_.hwm = std::max(super_.hwm, max_id + 1);
  if (top_chain.size() > 1) {
    if (Status s = fix_root_chain(top_chain, top_level, &reachable); !s.ok()) return s;
  }
  free_.clear();
  for (uint64_t id = super_.hwm - 1; id >= 1; --id) {
    if (!reachable[id]) free_.push_back(id);
  }
  return Status::Ok();
}

Status Tree::fix_root_chain(const std::vector<uint64_t>& chain, uint16_t level,
                            std::vector<bool>* reachable) {
  // A split of the root (or, under weak persistence, of the top level) whose
  // last write, the superblock naming the new root, was lost: build inner
  // levels over the chain in slots beyond every reachable node (the walk is
  // complete, so super_.hwm is past them), then write the superblock. A
  // crash here leaves the old superblock: the next recovery does it again.
  const uint32_t ns = super_.node_size;
  const uint32_t fan = inner_capacity(ns) + 1;
  AlignedBuffer buf(ns);
  std::vector<std::pair<uint64_t, uint64_t>> below;  // (lower fence, id); first fence unused
  for (size_t i = 0; i < chain.size(); ++i) {
    uint64_t lo = 0;
    if (i > 0) {
      if (Status s = read_node_sync(chain[i - 1], buf.data()); !s.ok()) return s;
      lo = NodeView(buf.data(), ns).high_key();
    }
    below.emplace_back(lo, chain[i]);
  }
  uint64_t next_free = super_.hwm;
  while (below.size() > 1) {
    ++level;
    std::vector<std::pair<uint64_t, uint64_t>> above;
    for (size_t i = 0; i < below.size(); i += fan) {
      const size_t end = std::min<size_t>(below.size(), i + fan);
      if (next_free >= super_.slots) {
        return Status::OutOfSpace("patree: " + dev_->path() + ": no free slot to repair the root");
      }
      const uint64_t id = next_free++;
      (*reachable)[id] = true;
      NodeView n(buf.data(), ns);
      n.init(level);
      n.set_child(0, below[i].second);
      for (size_t j = i + 1; j < end; ++j) {
        n.set_key(static_cast<uint32_t>(j - i - 1), below[j].first);
        n.set_child(static_cast<uint32_t>(j - i), below[j].second);
      }
      n.set_count(static_cast<uint32_t>(end - i - 1));
      if (end < below.size()) {
        n.set_right(next_free);  // the next node of this level, written next
        n.set_high_key(below[end].first);
      }
      n.seal();
      if (Status s = dev_->write(id * ns, buf.data(), ns); !s.ok()) return s;
      above.emplace_back(below[i].first, id);
    }
    below = std::move(above);
  }
  if (Status s = dev_->datasync(); !s.ok()) return s;
  super_.root = below[0].second;
  super_.height = level + 1u;
  super_.hwm = next_free;
  ++super_.generation;
  encode_super(super_, super_buf_.data());
  if (Status s = dev_->write(0, super_buf_.data(), kSuperBytes); !s.ok()) return s;
  return dev_->datasync();
}

Status Tree::alloc(uint64_t* id) {
  std::lock_guard g(alloc_mu_);
  if (!free_.empty()) {
    *id = free_.back();
    free_.pop_back();
    return Status::Ok();
  }
  if (super_.hwm >= super_.slots) {
    return Status::OutOfSpace("patree: " + dev_->path() + " is full (" +
                              std::to_string(super_.slots) + " slots of " +
                              std::to_string(super_.node_size) + " B)");
  }
  *id = super_.hwm++;
  return Status::Ok();
}

void Tree::free_slot(uint64_t id) {
  std::lock_guard g(alloc_mu_);
  free_.push_back(id);
}

uint64_t Tree::nodes_in_use() const {
  std::lock_guard g(alloc_mu_);
  return super_.hwm - 1 - free_.size();
}

uint64_t Tree::high_water() const {
  std::lock_guard g(alloc_mu_);
  return super_.hwm;
}

Status Tree::failed_status() const {
  return Status::IOError("patree: " + dev_->path() +
                         ": an earlier write failed; updates are refused until the store is "
                         "reopened (recovery)");
}

bool Tree::wants_checkpoint() const {
  return options_.weak && buffer_.dirty_frames() * 2 > buffer_.capacity() &&
         !checkpointing_.load(std::memory_order_relaxed);
}

// ---------------------------------------------------------------------------
// Node access

Task<Status> Tree::fetch(Op& op, uint64_t id, uint16_t level, Frame** out) {
  const uint32_t ns = super_.node_size;
  if (id == 0 || id >= super_.slots) {
    co_return Status::Corruption("patree: link to slot " + std::to_string(id) +
                                 " outside the store");
  }
  Frame* f = buffer_.pin(id);
  if (f == nullptr) {
    f = buffer_.scratch();
    IoReq r;
    r.kind = IoReq::Kind::kRead;
    r.len = ns;
    r.offset = id * ns;
    r.buf = f->data;
    co_await IoAwait{*ex_, op, std::span<IoReq>(&r, 1)};
    if (r.result != static_cast<int>(ns)) {
      buffer_.unpin(f);
      co_return Status::IOError("patree: read of " + node_name(id) + " failed (" +
                                std::to_string(r.result) + ")");
    }
    if (!NodeView(f->data, ns).checksum_ok()) {
      buffer_.unpin(f);
      co_return Status::Corruption("patree: " + node_name(id) +
                                   " has a bad checksum (a torn or damaged write)");
    }
    f = buffer_.publish(f, id);
  }
  if (NodeView(f->data, ns).level() != level) {
    const uint16_t got = NodeView(f->data, ns).level();
    buffer_.unpin(f);
    co_return Status::Corruption("patree: " + node_name(id) + " has level " + std::to_string(got) +
                                 ", expected " + std::to_string(level));
  }
  *out = f;
  co_return Status::Ok();
}

Task<Status> Tree::write_node(Op& op, Frame* f, bool fresh) {
  const uint32_t ns = super_.node_size;
  if (options_.weak) {
    buffer_.mark_dirty(f, fresh);
    co_return Status::Ok();
  }
  NodeView(f->data, ns).seal();
  IoReq r;
  r.kind = IoReq::Kind::kWrite;
  r.dsync = options_.dsync;
  r.len = ns;
  r.offset = f->id * ns;
  r.buf = f->data;
  co_await IoAwait{*ex_, op, std::span<IoReq>(&r, 1)};
  if (r.result != static_cast<int>(ns)) {
    // The frame holds what the disk may not: drop it, refuse further updates.
    buffer_.invalidate(f->id);
    failed_.store(true);
    co_return Status::IOError("patree: write of " + node_name(f->id) + " failed (" +
                              std::to_string(r.result) + ")");
  }
  co_return Status::Ok();
}

Task<Status> Tree::write_super(Op& op) {
  if (options_.weak) {
    super_dirty_ = true;
    co_return Status::Ok();
  }
  ++super_.generation;
  encode_super(super_, super_buf_.data());
  IoReq r;
  r.kind = IoReq::Kind::kWrite;
  r.dsync = options_.dsync;
  r.len = kSuperBytes;
  r.offset = 0;
  r.buf = super_buf_.data();
  co_await IoAwait{*ex_, op, std::span<IoReq>(&r, 1)};
  if (r.result != static_cast<int>(kSuperBytes)) {
    failed_.store(true);
    co_return Status::IOError("patree: superblock write failed (" + std::to_string(r.result) + ")");
  }
  co_return Status::Ok();
}

void Tree::release(Op& op, const Held& h) {
  buffer_.unpin(h.f);
  ex_->unlatch(op, h.id, h.mode);
}

Task<Status> Tree::couple(Op& op, Held* cur, uint64_t next_id, uint16_t level, LatchMode mode) {
  Held next;
  next.id = next_id;
  next.mode = mode;
  co_await LatchAwait{*ex_, op, next.id, next.mode};
  release(op, *cur);
  *cur = Held{};
  Status s = co_await fetch(op, next.id, level, &next.f);
  if (!s.ok()) {
    ex_->unlatch(op, next.id, next.mode);
    co_return s;
  }
  *cur = next;
  co_return Status::Ok();
}

// ---------------------------------------------------------------------------
// Operations

Task<Status> Tree::descend(Op& op, uint64_t key, LatchMode leaf_mode, Held* leaf, bool* has_lo,
                           uint64_t* lo) {
  const uint32_t ns = super_.node_size;
  *has_lo = false;
  *lo = 0;
  co_await LatchAwait{*ex_, op, kRootLatch, LatchMode::kShared};
  Held cur;
  cur.id = super_.root;
  uint16_t level = static_cast<uint16_t>(super_.height - 1);
  cur.mode = level == 0 ? leaf_mode : LatchMode::kShared;
  co_await LatchAwait{*ex_, op, cur.id, cur.mode};
  ex_->unlatch(op, kRootLatch, LatchMode::kShared);
  Status s = co_await fetch(op, cur.id, level, &cur.f);
  if (!s.ok()) {
    ex_->unlatch(op, cur.id, cur.mode);
    co_return s;
  }
  for (;;) {
    NodeView n = cur.view(ns);
    if (n.beyond(key)) {  // a half split (after a crash): move right
      *has_lo = true;
      *lo = n.high_key();
      s = co_await couple(op, &cur, n.right(), level, cur.mode);
      if (!s.ok()) co_return s;
      continue;
    }
    if (n.is_leaf()) break;
    const uint32_t i = n.child_index(key);
    if (i > 0) {
      *has_lo = true;
      *lo = n.key(i - 1);
    }
    --level;
    s = co_await couple(op, &cur, n.child(i), level, level == 0 ? leaf_mode : LatchMode::kShared);
    if (!s.ok()) co_return s;
  }
  *leaf = cur;
  co_return Status::Ok();
}

Task<Status> Tree::lookup(Op& op, uint64_t key, std::optional<uint64_t>* out) {
  out->reset();
  Held leaf;
  bool has_lo = false;
  uint64_t lo = 0;
  Status s = co_await descend(op, key, LatchMode::kShared, &leaf, &has_lo, &lo);
  if (!s.ok()) co_return s;
  NodeView n = leaf.view(super_.node_size);
  const uint32_t i = n.lower_bound(key);
  if (i < n.count() && n.key(i) == key) *out = n.value(i);
  release(op, leaf);
  co_return Status::Ok();
}

Task<Status> Tree::scan(Op& op, uint64_t start, size_t count, std::vector<Pair>* out) {
  const uint32_t ns = super_.node_size;
  out->clear();
  if (count == 0) co_return Status::Ok();
  Held cur;
  bool has_lo = false;
  uint64_t lo = 0;
  Status s = co_await descend(op, start, LatchMode::kShared, &cur, &has_lo, &lo);
  if (!s.ok()) co_return s;
  for (;;) {
    NodeView n = cur.view(ns);
    for (uint32_t i = n.lower_bound(start); i < n.count() && out->size() < count; ++i) {
      out->emplace_back(n.key(i), n.value(i));
    }
    if (out->size() >= count || n.right() == 0) break;
    s = co_await couple(op, &cur, n.right(), 0, LatchMode::kShared);
    if (!s.ok()) co_return s;
  }
  release(op, cur);
  co_return Status::Ok();
}

Task<Status> Tree::last_less_than(Op& op, uint64_t key, std::optional<Pair>* out) {
  out->reset();
  // The largest entry < u, for u = key and then for decreasing lower fences:
  // descend to the leaf of u - 1 (every entry < u is there or to its left).
  uint64_t u = key;
  while (u > 0) {
    Held leaf;
    bool has_lo = false;
    uint64_t lo = 0;
    Status s = co_await descend(op, u - 1, LatchMode::kShared, &leaf, &has_lo, &lo);
    if (!s.ok()) co_return s;
    NodeView n = leaf.view(super_.node_size);
    const uint32_t i = n.lower_bound(u);
    if (i > 0) *out = Pair(n.key(i - 1), n.value(i - 1));
    release(op, leaf);
    // Nothing below u in this leaf (an empty one: removes do not merge):
    // every smaller key is below its lower fence lo <= u - 1 < u.
    if (out->has_value() || !has_lo) break;
    u = lo;
  }
  co_return Status::Ok();
}

Task<Status> Tree::modify_leaf(Op& op, uint64_t key, uint64_t value, int kind, bool* retry) {
  *retry = false;
  if (failed_.load()) co_return failed_status();
  Held leaf;
  bool has_lo = false;
  uint64_t lo = 0;
  Status s = co_await descend(op, key, LatchMode::kExclusive, &leaf, &has_lo, &lo);
  if (!s.ok()) co_return s;
  NodeView n = leaf.view(super_.node_size);
  const uint32_t i = n.lower_bound(key);
  const bool found = i < n.count() && n.key(i) == key;
  if (kind == kInsert) {
    if (found) {
      s = Status::AlreadyExists();
    } else if (n.full()) {
      *retry = true;  // a split: insert_pessimistic
    } else {
      n.leaf_insert_at(i, key, value);
      s = co_await write_node(op, leaf.f, false);
    }
  } else if (!found) {
    s = Status::NotFound();
  } else if (kind == kUpdate) {
    n.set_value(i, value);
    s = co_await write_node(op, leaf.f, false);
  } else {
    n.leaf_remove_at(i);
    s = co_await write_node(op, leaf.f, false);
  }
  release(op, leaf);
  co_return s;
}

Task<Status> Tree::insert(Op& op, uint64_t key, uint64_t value) {
  if (options_.weak) co_await LatchAwait{*ex_, op, kCheckpointLatch, LatchMode::kShared};
  bool retry = false;
  Status s = co_await modify_leaf(op, key, value, kInsert, &retry);
  if (retry) s = co_await insert_pessimistic(op, key, value);
  if (options_.weak) ex_->unlatch(op, kCheckpointLatch, LatchMode::kShared);
  co_return s;
}

Task<Status> Tree::update(Op& op, uint64_t key, uint64_t value) {
  if (options_.weak) co_await LatchAwait{*ex_, op, kCheckpointLatch, LatchMode::kShared};
  bool retry = false;
  Status s = co_await modify_leaf(op, key, value, kUpdate, &retry);
  if (options_.weak) ex_->unlatch(op, kCheckpointLatch, LatchMode::kShared);
  co_return s;
}

Task<Status> Tree::remove(Op& op, uint64_t key) {
  if (options_.weak) co_await LatchAwait{*ex_, op, kCheckpointLatch, LatchMode::kShared};
  bool retry = false;
  Status s = co_await modify_leaf(op, key, 0, kRemove, &retry);
  if (options_.weak) ex_->unlatch(op, kCheckpointLatch, LatchMode::kShared);
  co_return s;
}

Task<Status> Tree::insert_pessimistic(Op& op, uint64_t key, uint64_t value) {
  const uint32_t ns = super_.node_size;
  if (failed_.load()) co_return failed_status();
  std::vector<Held> path;  // exclusive latches, top-down
  bool root_latched = true;
  auto release_all = [&]() {
    for (const Held& h : path) release(op, h);
    path.clear();
    if (root_latched) ex_->unlatch(op, kRootLatch, LatchMode::kExclusive);
    root_latched = false;
  };
  co_await LatchAwait{*ex_, op, kRootLatch, LatchMode::kExclusive};
  Held cur;
  cur.id = super_.root;
  cur.mode = LatchMode::kExclusive;
  uint16_t level = static_cast<uint16_t>(super_.height - 1);
  co_await LatchAwait{*ex_, op, cur.id, cur.mode};
  Status s = co_await fetch(op, cur.id, level, &cur.f);
  if (!s.ok()) {
    ex_->unlatch(op, cur.id, cur.mode);
    release_all();
    co_return s;
  }
  path.push_back(cur);
  for (;;) {
    NodeView n = path.back().view(ns);
    if (n.beyond(key)) {  // a half split below the root (after a crash)
      s = co_await couple(op, &path.back(), n.right(), level, LatchMode::kExclusive);
      if (!s.ok()) {
        path.pop_back();  // couple() released it
        release_all();
        co_return s;
      }
      continue;
    }
    if (!n.full()) {  // a split cannot climb past this node
      const Held keep = path.back();
      path.pop_back();
      release_all();
      path.push_back(keep);
    }
    if (n.is_leaf()) break;
    Held child;
    child.id = n.child(n.child_index(key));
    child.mode = LatchMode::kExclusive;
    --level;
    co_await LatchAwait{*ex_, op, child.id, child.mode};
    s = co_await fetch(op, child.id, level, &child.f);
    if (!s.ok()) {
      ex_->unlatch(op, child.id, child.mode);
      release_all();
      co_return s;
    }
    path.push_back(child);
  }

  NodeView leaf = path.back().view(ns);
  const uint32_t pos = leaf.lower_bound(key);
  if (pos < leaf.count() && leaf.key(pos) == key) {
    release_all();
    co_return Status::AlreadyExists();
  }
  if (!leaf.full()) {  // another operation split it meanwhile
    leaf.leaf_insert_at(pos, key, value);
    s = co_await write_node(op, path.back().f, false);
    release_all();
    co_return s;
  }
  // Every node on the path is full except perhaps the first; a full first
  // node is the root (root pointer latched): the root splits too.
  const bool new_root = root_latched && path.front().view(ns).full();
  const size_t splits = new_root ? path.size() : path.size() - 1;
  std::vector<uint64_t> ids(splits + (new_root ? 1 : 0));
  for (size_t i = 0; i < ids.size(); ++i) {
    s = alloc(&ids[i]);
    if (!s.ok()) {
      for (size_t j = 0; j < i; ++j) free_slot(ids[j]);
      release_all();
      co_return s;  // OutOfSpace, nothing changed
    }
  }
  std::vector<Frame*> fresh;  // pinned new frames, unpinned at the end
  uint64_t sep = 0, right_id = 0;
  size_t next_id = 0;
  for (size_t depth = path.size(); depth-- > 0;) {
    Held& h = path[depth];
    NodeView n = h.view(ns);
    if (depth + 1 < path.size() && !n.full()) {
      n.inner_insert_at(n.child_index(sep), sep, right_id);
      s = co_await write_node(op, h.f, false);
      break;
    }
    // Split h: (1) the new right node, (2) h itself; the parent, next round.
    Frame* rf = buffer_.publish(buffer_.scratch(), ids[next_id++]);
    fresh.push_back(rf);
    NodeView r(rf->data, ns);
    const uint64_t new_sep = n.split_into(r, rf->id);
    if (depth + 1 == path.size()) {
      NodeView& into = key >= new_sep ? r : n;
      into.leaf_insert_at(into.lower_bound(key), key, value);
    } else {
      NodeView& into = sep > new_sep ? r : n;
      into.inner_insert_at(into.child_index(sep), sep, right_id);
    }
    s = co_await write_node(op, rf, true);
    if (s.ok()) s = co_await write_node(op, h.f, false);
    if (!s.ok()) break;
    sep = new_sep;
    right_id = rf->id;
    if (depth == 0 && new_root) {
      Frame* nf = buffer_.publish(buffer_.scratch(), ids[next_id++]);
      fresh.push_back(nf);
      NodeView root(nf->data, ns);
      root.init(static_cast<uint16_t>(n.level() + 1));
      root.set_child(0, h.id);
      root.inner_insert_at(0, sep, right_id);
      s = co_await write_node(op, nf, true);
      if (s.ok()) {
        super_.root = nf->id;
        ++super_.height;
        s = co_await write_super(op);
      }
    }
  }
  if (!s.ok() && !options_.weak) {
    // A write failed mid-split: the frames hold what the disk may not.
    for (const Held& h : path) buffer_.invalidate(h.id);
    for (Frame* f : fresh) buffer_.invalidate(f->id);
  }
  for (Frame* f : fresh) buffer_.unpin(f);
  release_all();
  co_return s;
}

Task<Status> Tree::checkpoint(Op& op) {
  const uint32_t ns = super_.node_size;
  IoReq sync;
  sync.kind = IoReq::Kind::kSync;
  if (!options_.weak) {
    co_await IoAwait{*ex_, op, std::span<IoReq>(&sync, 1)};
    if (sync.result < 0) co_return Status::IOError("patree: fdatasync failed");
    co_return Status::Ok();
  }
  checkpointing_.store(true);
  co_await LatchAwait{*ex_, op, kCheckpointLatch, LatchMode::kExclusive};
  std::vector<bool> was_fresh;
  std::vector<Frame*> frames = buffer_.take_dirty(&was_fresh);
  AlignedBuffer copies(std::max<size_t>(1, frames.size()) * ns);
  for (size_t i = 0; i < frames.size(); ++i) {
    std::memcpy(copies.data() + i * ns, frames[i]->data, ns);
    NodeView(copies.data() + i * ns, ns).seal();
  }
  Super snap = super_;
  {
    std::lock_guard g(alloc_mu_);
    snap.hwm = super_.hwm;
  }
  super_dirty_ = false;
  ex_->unlatch(op, kCheckpointLatch, LatchMode::kExclusive);

  // Groups in dependency order: fresh nodes (key -1), then by level.
  std::map<int, std::vector<size_t>> groups;
  for (size_t i = 0; i < frames.size(); ++i) {
    const int g = was_fresh[i] ? -1 : NodeView(copies.data() + i * ns, ns).level();
    groups[g].push_back(i);
  }
  Status s;
  std::vector<IoReq> reqs;
  for (const auto& [g, members] : groups) {
    reqs.assign(members.size(), IoReq{});
    for (size_t j = 0; j < members.size(); ++j) {
      reqs[j].kind = IoReq::Kind::kWrite;
      reqs[j].len = ns;
      reqs[j].offset = frames[members[j]]->id * ns;
      reqs[j].buf = copies.data() + members[j] * ns;
    }
    co_await IoAwait{*ex_, op, std::span<IoReq>(reqs)};
    for (const IoReq& r : reqs) {
      if (r.result != static_cast<int>(ns) && s.ok()) {
        s = Status::IOError("patree: checkpoint write at offset " + std::to_string(r.offset) +
                            " failed (" + std::to_string(r.result) + ")");
      }
    }
    if (!s.ok()) break;
    // The barrier: this group durable before any node that links to it.
    co_await IoAwait{*ex_, op, std::span<IoReq>(&sync, 1)};
    if (sync.result < 0) {
      s = Status::IOError("patree: fdatasync failed");
      break;
    }
  }
  if (s.ok()) {
    AlignedBuffer sb(kIoAlign);
    snap.generation = ++super_.generation;
    encode_super(snap, sb.data());
    IoReq w;
    w.kind = IoReq::Kind::kWrite;
    w.len = kSuperBytes;
    w.offset = 0;
    w.buf = sb.data();
    co_await IoAwait{*ex_, op, std::span<IoReq>(&w, 1)};
    if (w.result == static_cast<int>(kSuperBytes)) {
      co_await IoAwait{*ex_, op, std::span<IoReq>(&sync, 1)};
    }
    if (w.result != static_cast<int>(kSuperBytes) || sync.result < 0) {
      s = Status::IOError("patree: checkpoint superblock write failed");
      super_dirty_ = true;
    }
  } else {
    super_dirty_ = true;
  }
  for (Frame* f : frames) buffer_.writeback_done(f, s.ok());
  checkpointing_.store(false);
  co_return s;
}

// ---------------------------------------------------------------------------
// Close and verify (no operation running)

Status Tree::close() {
  const uint32_t ns = super_.node_size;
  if (failed_.load()) return failed_status();
  if (options_.weak && buffer_.dirty_frames() > 0) {
    return Status::InvalidArgument("patree: close with dirty nodes (checkpoint first)");
  }
  // The free list goes into free slots (pages), themselves on the list.
  std::vector<uint64_t> ids = free_;
  const uint32_t per_page = free_page_capacity(ns);
  AlignedBuffer buf(ns);
  uint64_t head = 0;
  size_t i = 0;
  while (i < ids.size()) {
    const uint64_t page = ids[i++];
    NodeView n(buf.data(), ns);
    n.init(kFreeListLevel);
    uint32_t c = 0;
    while (c < per_page && i < ids.size()) {
      std::memcpy(buf.data() + kNodeHeaderBytes + 8 * c, &ids[i++], 8);
      ++c;
    }
    n.set_count(c);
    n.set_right(head);
    n.seal();
    if (Status s = dev_->write(page * ns, buf.data(), ns); !s.ok()) return s;
    head = page;
  }
  if (Status s = dev_->datasync(); !s.ok()) return s;
  super_.clean = true;
  super_.free_head = head;
  super_.free_count = ids.size();
  ++super_.generation;
  encode_super(super_, super_buf_.data());
  if (Status s = dev_->write(0, super_buf_.data(), kSuperBytes); !s.ok()) return s;
  return dev_->datasync();
}

Status Tree::verify(VerifyReport* report) const {
  const uint32_t ns = super_.node_size;
  *report = VerifyReport{};
  AlignedBuffer buf(ns);
  struct Info {
    uint64_t id;
    uint64_t lo;
    bool has_lo;
  };
  auto read = [&](uint64_t id) -> Status {
    if (id == 0 || id >= super_.slots) {
      return Status::Corruption("patree: link to slot " + std::to_string(id));
    }
    if (Frame* f = buffer_.pin(id); f != nullptr) {
      std::memcpy(buf.data(), f->data, ns);
      buffer_.unpin(f);
      return Status::Ok();
    }
    return read_node_sync(id, buf.data());
  };
  uint64_t first = super_.root;
  int level = static_cast<int>(super_.height) - 1;
  std::vector<Info> above;  // the chain of the level above
  std::vector<std::vector<uint64_t>> above_children;
  std::vector<std::vector<uint64_t>> above_seps;
  report->height = super_.height;
  for (; level >= 0; --level) {
    std::vector<Info> chain;
    std::vector<std::vector<uint64_t>> children, seps;
    uint64_t id = first;
    bool has_lo = false;
    uint64_t lo = 0;
    while (id != 0) {
      if (chain.size() > super_.slots) return Status::Corruption("patree: right links loop");
      if (Status s = read(id); !s.ok()) return s;
      NodeView n(buf.data(), ns);
      const std::string where = "patree: " + node_name(id) + ": ";
      if (n.level() != level) {
        return Status::Corruption(where + "level " + std::to_string(n.level()) + ", expected " +
                                  std::to_string(level));
      }
      if (n.count() > n.capacity()) return Status::Corruption(where + "count over capacity");
      for (uint32_t i = 0; i < n.count(); ++i) {
        if (i > 0 && n.key(i) <= n.key(i - 1)) return Status::Corruption(where + "keys unordered");
        if (has_lo && n.key(i) < lo) return Status::Corruption(where + "key below its lower fence");
        if (n.right() != 0 && n.key(i) >= n.high_key()) {
          return Status::Corruption(where + "key at or above its high key");
        }
      }
      if (n.right() != 0 && has_lo && n.high_key() <= lo) {
        return Status::Corruption(where + "high key not above its lower fence");
      }
      chain.push_back({id, lo, has_lo});
      std::vector<uint64_t> kids, ks;
      if (n.is_leaf()) {
        report->keys += n.count();
        ++report->leaves;
      } else {
        ++report->inner_nodes;
        for (uint32_t i = 0; i <= n.count(); ++i) kids.push_back(n.child(i));
        for (uint32_t i = 0; i < n.count(); ++i) ks.push_back(n.key(i));
      }
      children.push_back(std::move(kids));
      seps.push_back(std::move(ks));
      has_lo = n.right() != 0;
      lo = n.high_key();
      id = n.right();
    }
    if (level == static_cast<int>(super_.height) - 1 && chain.size() != 1) {
      return Status::Corruption("patree: the root has right siblings");
    }
    // The level above's child pointers: into this chain, in order, separators
    // equal to their child's lower fence.
    if (!above.empty()) {
      size_t at = 0;
      bool first_child = true;
      for (size_t a = 0; a < above.size(); ++a) {
        for (size_t c = 0; c < above_children[a].size(); ++c) {
          const uint64_t kid = above_children[a][c];
          while (at < chain.size() && chain[at].id != kid) ++at;
          if (at == chain.size()) {
            return Status::Corruption("patree: " + node_name(above[a].id) + " child " +
                                      node_name(kid) + " not in order in the level below");
          }
          if (first_child && at != 0) {
            return Status::Corruption("patree: the leftmost child is not the leftmost node");
          }
          first_child = false;
          if (c > 0 && (!chain[at].has_lo || chain[at].lo != above_seps[a][c - 1])) {
            return Status::Corruption("patree: separator of " + node_name(kid) + " in " +
                                      node_name(above[a].id) + " differs from its lower fence");
          }
        }
      }
    }
    if (level > 0) first = children.front().front();
    above = std::move(chain);
    above_children = std::move(children);
    above_seps = std::move(seps);
  }
  return Status::Ok();
}

}  // namespace nvindex::nvme
