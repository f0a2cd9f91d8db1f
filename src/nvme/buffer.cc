#include "nvme/buffer.h"

#include <algorithm>

namespace nvindex::nvme {

namespace {
constexpr size_t kSlabBytes = 64 << 10;
}

NodeBuffer::NodeBuffer(uint32_t node_size, uint64_t capacity_frames)
    : node_size_(node_size), capacity_(capacity_frames) {}

Frame* NodeBuffer::alloc_frame() {
  std::lock_guard g(free_mu_);
  if (free_.empty()) {
    const size_t per_slab = kSlabBytes / node_size_;
    slabs_.emplace_back(kSlabBytes);
    frame_slabs_.emplace_back(new Frame[per_slab]);
    Frame* frames = frame_slabs_.back().get();
    for (size_t i = 0; i < per_slab; ++i) {
      frames[i].data = slabs_.back().data() + i * node_size_;
      free_.push_back(&frames[per_slab - 1 - i]);
    }
    frames_allocated_ += per_slab;
  }
  Frame* f = free_.back();
  free_.pop_back();
  return f;
}

void NodeBuffer::free_frame(Frame* f) {
  std::byte* data = f->data;
  *f = Frame{};
  f->data = data;
  std::lock_guard g(free_mu_);
  free_.push_back(f);
}

Frame* NodeBuffer::pin(uint64_t id) {
  if (!buffered()) return nullptr;
  Shard& s = shard(id);
  std::lock_guard g(s.mu);
  auto it = s.map.find(id);
  if (it == s.map.end()) return nullptr;
  Frame* f = it->second;
  ++f->pins;
  f->referenced = true;
  return f;
}

Frame* NodeBuffer::scratch() {
  Frame* f = alloc_frame();
  f->pins = 1;
  return f;
}

Frame* NodeBuffer::publish(Frame* f, uint64_t id) {
  f->id = id;
  if (!buffered()) return f;
  Shard& s = shard(id);
  std::lock_guard g(s.mu);
  auto [it, inserted] = s.map.try_emplace(id, f);
  if (!inserted) {
    Frame* existing = it->second;
    ++existing->pins;
    existing->referenced = true;
    free_frame(f);
    return existing;
  }
  f->cached = true;
  f->referenced = true;
  s.clock.push_back(f);
  evict_locked(s);
  return f;
}

void NodeBuffer::unpin(Frame* f) {
  if (!buffered()) {  // every frame is private to one operation
    if (--f->pins == 0) free_frame(f);
    return;
  }
  // Under the shard's mutex even for a frame never cached: invalidate() may
  // be clearing `cached` of a frame other operations still pin.
  Shard& s = shard(f->id);
  std::lock_guard g(s.mu);
  if (--f->pins == 0 && !f->cached) {
    free_frame(f);  // invalidated while pinned
    return;
  }
  if (f->pins == 0 && s.clock.size() > capacity_ / kShards + 1) evict_locked(s);
}

void NodeBuffer::invalidate(uint64_t id) {
  if (!buffered()) return;
  Shard& s = shard(id);
  std::lock_guard g(s.mu);
  auto it = s.map.find(id);
  if (it == s.map.end()) return;
  Frame* f = it->second;
  s.map.erase(it);
  s.clock.erase(std::find(s.clock.begin(), s.clock.end(), f));
  if (s.hand >= s.clock.size()) s.hand = 0;
  if (f->dirty) --s.dirty;
  f->cached = false;
  if (f->pins == 0) free_frame(f);
}

void NodeBuffer::evict_locked(Shard& s) {
  const size_t share = std::max<uint64_t>(1, capacity_ / kShards);
  // Two sweeps at most: the first clears reference bits, the second evicts.
  size_t budget = 2 * s.clock.size();
  while (s.clock.size() > share && budget-- > 0) {
    if (s.hand >= s.clock.size()) s.hand = 0;
    Frame* f = s.clock[s.hand];
    if (f->pins > 0 || f->dirty || f->writeback) {
      ++s.hand;
      continue;
    }
    if (f->referenced) {
      f->referenced = false;
      ++s.hand;
      continue;
    }
    s.map.erase(f->id);
    s.clock[s.hand] = s.clock.back();
    s.clock.pop_back();
    free_frame(f);
  }
}

void NodeBuffer::mark_dirty(Frame* f, bool fresh) {
  Shard& s = shard(f->id);
  std::lock_guard g(s.mu);
  if (!f->dirty) ++s.dirty;
  f->dirty = true;
  f->fresh = f->fresh || fresh;
}

std::vector<Frame*> NodeBuffer::take_dirty(std::vector<bool>* fresh_out) {
  std::vector<Frame*> out;
  fresh_out->clear();
  for (Shard& s : shards_) {
    std::lock_guard g(s.mu);
    for (Frame* f : s.clock) {
      if (!f->dirty) continue;
      out.push_back(f);
      fresh_out->push_back(f->fresh);
      f->dirty = false;
      f->fresh = false;
      f->writeback = true;
      ++f->pins;
    }
    s.dirty = 0;
  }
  return out;
}

void NodeBuffer::writeback_done(Frame* f, bool ok) {
  Shard& s = shard(f->id);
  {
    std::lock_guard g(s.mu);
    f->writeback = false;
    if (!ok && !f->dirty) {
      f->dirty = true;
      ++s.dirty;
    }
  }
  unpin(f);
}

uint64_t NodeBuffer::dirty_frames() const {
  uint64_t n = 0;
  for (const Shard& s : shards_) {
    std::lock_guard g(s.mu);
    n += s.dirty;
  }
  return n;
}

uint64_t NodeBuffer::cached_frames() const {
  uint64_t n = 0;
  for (const Shard& s : shards_) {
    std::lock_guard g(s.mu);
    n += s.clock.size();
  }
  return n;
}

uint64_t NodeBuffer::allocated_bytes() const {
  std::lock_guard g(free_mu_);
  return frames_allocated_ * node_size_;
}

}  // namespace nvindex::nvme
