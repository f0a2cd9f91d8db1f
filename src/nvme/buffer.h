// PA-Tree's node buffer (issue 14; Wang et al., ICDE 2020, §III-D): node
// images in DRAM, node_size bytes each, looked up by node id.
//
// - Unbuffered (capacity 0): nothing is kept; every node an operation visits
//   is read into a private frame and released after.
// - Read-only buffer (strong persistence): frames are clean copies of the
//   disk; an update modifies the frame and writes it through before the
//   operation completes (the tree does the write).
// - Read-write buffer (weak persistence): an update only marks its frames
//   dirty; dirty frames reach the disk at a checkpoint (Tree::checkpoint,
//   run by sync() and when the dirty frames pass half the capacity), never
//   on eviction alone, so the disk always holds a state the recovery can
//   open (see tree.h, "weak persistence").
// Replacement: CLOCK over the frames that are neither pinned, dirty, nor
// being written back; when none qualifies the buffer grows past its
// capacity rather than block (the tree's checkpoint brings it back).
//
// A frame's contents are protected by the tree's node latches, not by the
// buffer: the buffer's own mutexes (16 shards by node id) protect only its
// maps and the frames' bookkeeping (pins, clock bit, dirty and writeback
// flags are read and written under the shard mutex or under the
// checkpoint's exclusive latch, see tree.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "nvme/device.h"

namespace nvindex::nvme {

/// One node image in DRAM.
struct Frame {
  uint64_t id = 0;
  std::byte* data = nullptr;  ///< node_size bytes, aligned to node_size
  uint32_t pins = 0;          ///< operations using it (not evictable while > 0)
  bool cached = false;        ///< in the buffer's map (false: a private frame)
  bool referenced = false;    ///< CLOCK bit
  bool dirty = false;         ///< weak: modified since its last checkpoint snapshot
  bool fresh = false;         ///< weak: allocated since the last checkpoint
  bool writeback = false;     ///< weak: its snapshot is being written
};

/// The node buffer; see the file comment. Thread-safe.
class NodeBuffer {
 public:
  /// capacity_frames = 0: unbuffered. Frames are carved from 64 KiB slabs.
  NodeBuffer(uint32_t node_size, uint64_t capacity_frames);
  NodeBuffer(const NodeBuffer&) = delete;
  NodeBuffer& operator=(const NodeBuffer&) = delete;

  bool buffered() const { return capacity_ > 0; }
  uint32_t node_size() const { return node_size_; }

  /// The cached frame of node `id`, pinned, or nullptr (always nullptr
  /// unbuffered).
  Frame* pin(uint64_t id);
  /// A private frame (pinned once, not cached, contents undefined) to read a
  /// node into or build a new one in.
  Frame* scratch();
  /// Makes a scratch frame holding node `id` the cached one: returns it (still
  /// pinned), or, when another operation cached `id` first, releases `f` and
  /// returns that frame pinned. Unbuffered: returns f.
  Frame* publish(Frame* f, uint64_t id);
  /// Drops one pin; an uncached frame at zero pins goes back to the free
  /// list; a cached one stays until evicted.
  void unpin(Frame* f);
  /// Removes node `id` from the buffer (after a failed write-through, so the
  /// next reader reads the disk); its frame is freed when unpinned.
  void invalidate(uint64_t id);
  /// Weak persistence: marks a pinned cached frame dirty (fresh: allocated
  /// since the last checkpoint).
  void mark_dirty(Frame* f, bool fresh);
  /// Every dirty frame, each pinned and flagged writeback with dirty and fresh
  /// cleared (call with every update excluded, i.e. under the checkpoint's
  /// exclusive latch); *fresh_out[i] says whether frame i was fresh.
  std::vector<Frame*> take_dirty(std::vector<bool>* fresh_out);
  /// After a checkpoint wrote (or failed to write: ok false, which re-marks
  /// it dirty) frame f: clears writeback and unpins.
  void writeback_done(Frame* f, bool ok);
  /// Dirty frames now (weak).
  uint64_t dirty_frames() const;
  /// Frames cached now; frames allocated in all (DRAM use = that x node_size).
  uint64_t cached_frames() const;
  uint64_t capacity() const { return capacity_; }
  uint64_t allocated_bytes() const;

 private:
  static constexpr unsigned kShards = 16;
  struct Shard {
    mutable std::mutex mu;
    std::unordered_map<uint64_t, Frame*> map;
    std::vector<Frame*> clock;  ///< cached frames, CLOCK order
    size_t hand = 0;
    uint64_t dirty = 0;
  };
  Shard& shard(uint64_t id) { return shards_[id % kShards]; }
  Frame* alloc_frame();
  void free_frame(Frame* f);
  /// Evicts from `s` (locked) until it is within its share of the capacity
  /// or nothing is evictable.
  void evict_locked(Shard& s);

  const uint32_t node_size_;
  const uint64_t capacity_;
  Shard shards_[kShards];
  mutable std::mutex free_mu_;
  std::vector<Frame*> free_;
  std::vector<AlignedBuffer> slabs_;
  std::vector<std::unique_ptr<Frame[]>> frame_slabs_;
  uint64_t frames_allocated_ = 0;
};

}  // namespace nvindex::nvme
