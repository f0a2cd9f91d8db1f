#include "nvme/patree_index.h"

#include <atomic>
#include <cstdlib>
#include <string>

#include "nvme/device.h"
#include "nvme/sync_exec.h"
#include "nvme/tree.h"
#include "util/dcheck.h"

namespace nvindex {

bool patree_node_size_ok(uint32_t bytes) { return nvme::valid_node_size(bytes); }

namespace nvme {
namespace {

/// Default size of a new PA-Tree file, bytes.
constexpr uint64_t kDefaultDeviceBytes = 1ull << 30;

uint64_t buffer_bytes(const std::string& v) {
  if (v == "none") return 0;
  if (v == "1m") return 1ull << 20;
  if (v == "16m") return 16ull << 20;
  if (v == "256m") return 256ull << 20;
  if (v == "1g") return 1ull << 30;
  return 64ull << 20;  // "64m", the default
}

std::string option(const IndexOptions& o, const char* key, const char* fallback) {
  auto it = o.extra.find(key);
  return it == o.extra.end() ? fallback : it->second;
}

enum class Mode { kDedicated, kShared };

/// The Index<uint64_t> face of one tree and its executor. Operations run
/// synchronously in the calling thread (the executor blocks).
class PaTreeIndex final : public Index<uint64_t> {
 public:
  static Status open(Mode mode, const IndexOptions& o, std::unique_ptr<Index<uint64_t>>* out) {
    out->reset();
    const char* name = mode == Mode::kDedicated ? "patree-dedicated" : "patree-shared";
    if (o.device.empty()) {
      return Status::InvalidArgument(std::string(name) +
                                     ": needs a device (IndexOptions::device: a file on a disk "
                                     "or a block device)");
    }
    TreeOptions t;
    t.node_size = o.node_size;
    t.weak = option(o, "persistence", "strong") == "weak";
    t.dsync = option(o, "dsync", "off") == "on";
    std::unique_ptr<PaTreeIndex> idx(new PaTreeIndex(mode, name));
    if (!valid_node_size(o.node_size)) {
      // An existing store keeps its own node size, but the option must still
      // be one a new store could take.
      return Status::InvalidArgument(std::string(name) + ": node size " +
                                     std::to_string(o.node_size) +
                                     " B invalid (valid: a power of two in 512..4096 B)");
    }
    if (Status s = BlockDevice::open(
            o.device, o.device_bytes ? o.device_bytes : kDefaultDeviceBytes, &idx->dev_);
        !s.ok()) {
      return s;
    }
    // The buffer's frames are of the store's node size, known after open; a
    // byte budget in frames of the requested size is close enough for a new
    // store and exact for one of the same size.
    t.buffer_frames = buffer_bytes(option(o, "buffer", "64m")) / o.node_size;
    if (Status s = Tree::open(idx->dev_.get(), t, &idx->tree_); !s.ok()) return s;
    const std::string ring = option(o, "ring", "auto");
    if (mode == Mode::kDedicated) {
      std::unique_ptr<DedicatedExecutor> e;
      if (Status s = DedicatedExecutor::create(*idx->dev_, ring, &e); !s.ok()) return s;
      idx->ring_note_ = e->ring_note();
      idx->exec_ = std::move(e);
    } else {
      std::unique_ptr<SharedExecutor> e;
      if (Status s = SharedExecutor::create(*idx->dev_, ring, &e); !s.ok()) return s;
      idx->ring_note_ = e->ring_note();
      idx->exec_ = std::move(e);
    }
    idx->tree_->set_executor(idx->exec_.get());
    *out = std::move(idx);
    return Status::Ok();
  }

  ~PaTreeIndex() override {
    // A clean close: the last checkpoint (weak), then the free list and a
    // clean superblock. A failure leaves the store marked open, so the next
    // open recovers by walking the tree: nothing completed before the last
    // successful sync is lost either way.
    if (tree_ == nullptr) return;
    Status s = sync();
    if (s.ok()) s = tree_->close();
    (void)s;  // nowhere to report from a destructor; see above
    tree_.reset();
    exec_.reset();  // rings hold the file: close them before the device
    dev_.reset();
  }

  Status insert(uint64_t key, Value value) override {
    Op op;
    return after_update(run(tree_->insert(op, key, value)));
  }
  Status update(uint64_t key, Value value) override {
    Op op;
    return after_update(run(tree_->update(op, key, value)));
  }
  Status remove(uint64_t key) override {
    Op op;
    return after_update(run(tree_->remove(op, key)));
  }
  std::optional<Value> lookup(uint64_t key) override {
    Op op;
    std::optional<uint64_t> v;
    // A read error cannot be returned through lookup(): it reads as absent,
    // and verify() reports the damaged node.
    (void)run(tree_->lookup(op, key, &v));
    return v;
  }
  size_t scan(uint64_t start, size_t count, std::vector<std::pair<uint64_t, Value>>* out) override {
    Op op;
    if (!run(tree_->scan(op, start, count, out)).ok()) out->clear();
    return out->size();
  }
  std::optional<std::pair<uint64_t, Value>> find_last_less_than(uint64_t key) override {
    Op op;
    std::optional<Pair> r;
    if (!run(tree_->last_less_than(op, key, &r)).ok()) return std::nullopt;
    return r;
  }
  Status sync() override {
    Op op;
    return run(tree_->checkpoint(op));
  }

  IndexInfo info() const override {
    IndexInfo i;
    i.name = name_;
    i.description =
        mode_ == Mode::kDedicated ? kPaTreeDedicatedDescription : kPaTreeSharedDescription;
    i.caps = Capabilities{.ordered = true,
                          .persistent = true,
                          .thread_safe = true,
                          .placement = Placement::kBlockDevice};
    i.node_size = tree_->node_size();
    i.dram_bytes = tree_->buffer().allocated_bytes();
    i.recovered = tree_->recovered();
    i.recovery_seconds = tree_->recovery_seconds();
    return i;
  }

  Status verify(VerifyReport* report) const override { return tree_->verify(report); }

 private:
  PaTreeIndex(Mode mode, const char* name) : mode_(mode), name_(name) {}

  /// Runs an operation to its end in this thread (the synchronous executors
  /// never suspend it).
  Status run(Task<Status> t) {
    t.start();
    NVINDEX_DCHECK(t.done());
    return t.result();
  }

  /// Weak persistence: a checkpoint when half the buffer is dirty, run by
  /// the thread whose update crossed the line (one at a time).
  Status after_update(Status s) {
    if (tree_->wants_checkpoint() && !checkpointing_.exchange(true)) {
      Op op;
      // A failed background checkpoint leaves its frames dirty; the next
      // sync() retries and reports.
      (void)run(tree_->checkpoint(op));
      checkpointing_.store(false);
    }
    return s;
  }

  const Mode mode_;
  const std::string name_;
  std::unique_ptr<BlockDevice> dev_;
  std::unique_ptr<Tree> tree_;
  std::unique_ptr<Executor> exec_;
  std::string ring_note_;
  std::atomic<bool> checkpointing_{false};
};

}  // namespace
}  // namespace nvme

Status make_patree_dedicated(const IndexOptions& o, std::unique_ptr<Index<uint64_t>>* out) {
  return nvme::PaTreeIndex::open(nvme::Mode::kDedicated, o, out);
}

Status make_patree_shared(const IndexOptions& o, std::unique_ptr<Index<uint64_t>>* out) {
  return nvme::PaTreeIndex::open(nvme::Mode::kShared, o, out);
}

}  // namespace nvindex
