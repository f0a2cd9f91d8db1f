// PA-Tree's B+-tree on a block device (issue 14; Wang et al., "PA-Tree: Polled-
// Mode Asynchronous B+ Tree for NVMe", ICDE 2020): 8-byte keys and values in
// nodes of 512..4096 B (format in nvme/format.h), written as coroutines
// (nvme/task.h) over an Executor (nvme/executor.h), so the same algorithm
// runs in PA-Tree's asynchronous engine and in the two synchronous
// baselines.
//
// Concurrency: latch coupling (Bayer and Schkolnick 1977, "Concurrency of
// operations on B-trees", protocol B). Readers descend with shared latches,
// holding a node's latch until its child's is granted. Updates first descend
// the same way with an exclusive latch on the leaf only; an insert that finds
// its leaf full starts again with exclusive latches from the root, releasing
// every ancestor as soon as it reaches a node that is not full (a split
// cannot climb past it). Latch 0 (the superblock's slot) guards the root
// pointer and height; a last latch id, kCheckpointLatch, is held shared by
// every update and exclusively by a weak checkpoint. Deadlock cannot occur:
// latches are always taken in the order checkpoint, root pointer, then nodes
// top-down and left to right. Removes never merge nodes (a leaf may become
// empty and stays in the tree: the common choice of B-link trees, which the
// paper does not discuss).
//
// Crash consistency: every node also carries Lehman and Yao's B-link right
// link and high key ("Efficient locking for concurrent operations on
// B-trees", TODS 1981), so a split is done in three writes, each a complete
// tree on disk: (1) the new right node, (2) the split node, now holding the
// lower half and linking to (1) with the separator as high key, (3) the
// parent with the separator (or, at the root, a new root and then the
// superblock). A crash after (1) leaves an unreachable node (freed by
// recovery); after (2) a "half split": the parent lacks the separator, and a
// search that reaches a key >= the split node's high key moves right along
// the link (every descent checks, so the tree stays correct without the
// parent's entry). Recovery completes a half split only at the root level
// (a new root above the chain); lower ones stay and cost a move-right.
//
// Strong persistence (read-only buffer, or no buffer): each write above is
// issued and completed, in order, before the next and before the operation
// completes; an operation holds its exclusive latches until its writes
// complete, so no reader sees data that is not on the device.
// Weak persistence (read-write buffer): updates only dirty their frames;
// checkpoint() takes the checkpoint latch exclusively (so no update is half
// done), copies every dirty frame, releases it, then writes the copies in
// dependency order with an fdatasync after each group: nodes allocated
// since the last checkpoint, then the other dirty nodes level by level from
// the leaves up, then the superblock. Any prefix of that order is a
// consistent tree by the argument above (a node is written after every node
// it links to), so a crash leaves the last completed checkpoint's tree plus
// a consistent part of the next one: every operation completed before the
// last completed sync() is on the device.
//
// Recovery (open of a store whose superblock is not marked clean): a walk of
// every node reachable from the root through child pointers and right links,
// level by level, checking each node's checksum; every slot below the
// high-water mark that is not reachable goes on the free list (nodes of a
// split cut short by the crash). A clean close writes the free list into
// free slots and marks the superblock clean, so the next open reads the list
// instead of walking the tree.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "nvindex/index.h"
#include "nvindex/status.h"
#include "nvme/buffer.h"
#include "nvme/device.h"
#include "nvme/executor.h"
#include "nvme/format.h"
#include "nvme/task.h"

namespace nvindex::nvme {

/// Latch id of the root pointer (the superblock's slot).
inline constexpr uint64_t kRootLatch = 0;
/// Latch id held shared by updates, exclusively by a weak checkpoint.
inline constexpr uint64_t kCheckpointLatch = ~uint64_t{0};

/// How a Tree is opened.
struct TreeOptions {
  /// Node size of a new store, bytes (valid_node_size); an existing store
  /// keeps its own.
  uint32_t node_size = 512;
  /// Weak persistence (read-write buffer, durable at checkpoint()); false:
  /// strong (every update written through before it completes).
  bool weak = false;
  /// Buffer capacity, frames of node_size bytes; 0 = unbuffered (strong
  /// only).
  uint64_t buffer_frames = 0;
  /// Strong persistence: write nodes with RWF_DSYNC (durable against power
  /// loss on a device with a volatile write cache, at the cost of a cache
  /// flush per write). false: a write is complete when the device
  /// acknowledges it (durable against a process crash).
  bool dsync = false;
};

/// A key-value pair of a scan.
using Pair = std::pair<uint64_t, uint64_t>;

/// The tree; see the file comment. Operations are coroutines run by an
/// executor (set_executor before the first); they may run concurrently.
class Tree {
 public:
  /// Opens the tree on `dev` (which must outlive it): formats a device that
  /// was just created or whose first sector is all zero; otherwise reads
  /// the superblock and recovers (see the file comment). Errors:
  /// InvalidArgument (weak without a buffer; node size invalid for a new
  /// store; device too small for two nodes), Corruption (not a PA-Tree store, a bad
  /// superblock, a node with a bad checksum or out of place), IOError.
  static Status open(BlockDevice* dev, const TreeOptions& options, std::unique_ptr<Tree>* out);

  void set_executor(Executor* ex) { ex_ = ex; }

  /// Ok, AlreadyExists, OutOfSpace (no free slot: nothing changed), IOError
  /// or Corruption.
  Task<Status> insert(Op& op, uint64_t key, uint64_t value);
  /// Ok, NotFound, IOError, Corruption.
  Task<Status> update(Op& op, uint64_t key, uint64_t value);
  Task<Status> remove(Op& op, uint64_t key);
  /// *out = the value or nullopt.
  Task<Status> lookup(Op& op, uint64_t key, std::optional<uint64_t>* out);
  /// Up to `count` pairs with key >= start, ascending, into *out (cleared).
  Task<Status> scan(Op& op, uint64_t start, size_t count, std::vector<Pair>* out);
  /// The largest key < key, with its value.
  Task<Status> last_less_than(Op& op, uint64_t key, std::optional<Pair>* out);
  /// Weak: writes every dirty node and the superblock (see the file comment)
  /// and fdatasyncs; strong: one fdatasync. IOError leaves the frames dirty
  /// for the next checkpoint.
  Task<Status> checkpoint(Op& op);

  /// Weak: true when the dirty frames pass half the buffer's capacity (the
  /// caller should run checkpoint()).
  bool wants_checkpoint() const;

  /// Clean close, with no operation running (after a final checkpoint when
  /// weak): writes the free list and a clean superblock, fdatasync.
  Status close();

  /// Structural check with no operation running (file comment of
  /// include/nvindex/index.h): each level a chain of right links from its
  /// leftmost node with ascending keys inside the fences, every child
  /// pointer into the next level's chain in order, every separator equal to
  /// its child's lower fence, checksums good. Corruption names the node.
  Status verify(VerifyReport* report) const;

  uint32_t node_size() const { return super_.node_size; }
  bool weak() const { return options_.weak; }
  bool recovered() const { return recovered_; }
  double recovery_seconds() const { return recovery_seconds_; }
  /// Nodes allocated (slots in use), and the device's slots.
  uint64_t nodes_in_use() const;
  uint64_t slots() const { return super_.slots; }
  /// The high-water mark: slots at and above it have never held a node.
  uint64_t high_water() const;
  const NodeBuffer& buffer() const { return buffer_; }
  /// Half splits found by the last recovery walk (below the root level).
  uint64_t half_splits_at_open() const { return half_splits_; }

 private:
  struct Held {
    uint64_t id = 0;
    Frame* f = nullptr;
    LatchMode mode = LatchMode::kShared;
    NodeView view(uint32_t ns) const { return NodeView(f->data, ns); }
  };

  Tree(BlockDevice* dev, const TreeOptions& o);
  Status format();
  Status recover();
  Status read_node_sync(uint64_t id, std::byte* buf) const;
  Status load_free_list();
  Status fix_root_chain(const std::vector<uint64_t>& chain, uint16_t level,
                        std::vector<bool>* reachable);

  Task<Status> fetch(Op& op, uint64_t id, uint16_t level, Frame** out);
  Task<Status> write_node(Op& op, Frame* f, bool fresh);
  Task<Status> write_super(Op& op);
  void release(Op& op, const Held& h);
  /// Latch coupling's step: latches next_id (at `level`, in `mode`), then
  /// releases *cur and fetches next_id into *cur. On an error *cur is
  /// released and empty and nothing is held.
  Task<Status> couple(Op& op, Held* cur, uint64_t next_id, uint16_t level, LatchMode mode);
  Task<Status> descend(Op& op, uint64_t key, LatchMode leaf_mode, Held* leaf, bool* has_lo,
                       uint64_t* lo);
  Task<Status> modify_leaf(Op& op, uint64_t key, uint64_t value, int kind, bool* retry);
  Task<Status> insert_pessimistic(Op& op, uint64_t key, uint64_t value);
  Status alloc(uint64_t* id);
  void free_slot(uint64_t id);
  Status failed_status() const;

  BlockDevice* dev_;
  TreeOptions options_;
  Executor* ex_ = nullptr;
  Super super_;                ///< root and height guarded by kRootLatch
  mutable NodeBuffer buffer_;  ///< mutable: verify() pins frames to read them
  AlignedBuffer super_buf_;    ///< written under kRootLatch X or the checkpoint
  mutable std::mutex alloc_mu_;
  std::vector<uint64_t> free_;       ///< free slots below super_.hwm
  bool super_dirty_ = false;         ///< weak: the superblock changed since the checkpoint
  std::atomic<bool> failed_{false};  ///< a write-through failed: updates refused
  std::atomic<bool> checkpointing_{false};
  bool recovered_ = false;
  double recovery_seconds_ = 0;
  uint64_t half_splits_ = 0;
};

}  // namespace nvindex::nvme
