#include "nvme/patree_index.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>

#include "nvme/device.h"
#include "nvme/engine.h"
#include "nvme/sync_exec.h"
#include "nvme/tree.h"
#include "util/dcheck.h"
#include "util/temp_files.h"

namespace nvindex {

bool patree_node_size_ok(uint32_t bytes) { return nvme::valid_node_size(bytes); }

namespace nvme {
namespace {

/// Default size of a new PA-Tree file, bytes.
constexpr uint64_t kDefaultDeviceBytes = 1ull << 30;

uint64_t buffer_bytes(const std::string& v) {
  if (v == "none") return 0;
  if (v == "1m") return 1ull << 20;
  return 64ull << 20;  // "64m", the default
}

std::string model_file(unsigned major_id, unsigned minor_id) {
  // v2: fits since reads go to written slots (v1 fits read preallocated,
  // unwritten slots, which the file system answers without the disk).
  return "/var/tmp/nvindex-patree-model-v2-" + std::to_string(major_id) + "-" +
         std::to_string(minor_id);
}

void save_model(const std::string& file, const LatencyModel& m) {
  if (std::FILE* f = std::fopen(file.c_str(), "w"); f != nullptr) {
    std::fprintf(f, "%.1f %.3f %.3f\n", m.a_ns, m.ns_per_read, m.ns_per_write);
    std::fclose(f);
  }
}

std::string option(const IndexOptions& o, const char* key, const char* fallback) {
  auto it = o.extra.find(key);
  return it == o.extra.end() ? fallback : it->second;
}

enum class Mode { kEngine, kDedicated, kShared };

const char* mode_name(Mode m) {
  switch (m) {
    case Mode::kEngine:
      return "patree";
    case Mode::kDedicated:
      return "patree-dedicated";
    case Mode::kShared:
      return "patree-shared";
  }
  return "?";
}

/// The disk under `dev` (its own numbers for a block device, else those of
/// the file system's device), as (major, minor).
Status disk_of(const BlockDevice& dev, std::pair<unsigned, unsigned>* key) {
  struct stat st {};
  if (::fstat(dev.fd(), &st) != 0) return Status::IOError("patree: fstat of the device failed");
  const dev_t disk = S_ISBLK(st.st_mode) ? st.st_rdev : st.st_dev;
  *key = {major(disk), minor(disk)};
  return Status::Ok();
}

/// The fits this process made or read, by disk (major, minor); guarded by
/// g_models_mu, which model_for holds through a fit so that one is made
/// per disk.
std::mutex g_models_mu;
std::map<std::pair<unsigned, unsigned>, LatencyModel> g_models;

/// The latency model for `dev`'s disk: fit once per process and disk
/// (calibrate(), about half a second), kept in a small file
/// /var/tmp/nvindex-patree-model-v2-<major>-<minor> ("a ns_per_read
/// ns_per_write", ns) so later processes read it; `nvindex patree-calibrate`
/// fits it again. Writes of the fit go to slots at and above the tree's
/// high-water mark, which hold nothing.
Status model_for(const BlockDevice& dev, const Tree& tree, LatencyModel* out) {
  std::pair<unsigned, unsigned> key;
  if (Status s = disk_of(dev, &key); !s.ok()) return s;
  std::lock_guard g(g_models_mu);
  if (auto it = g_models.find(key); it != g_models.end()) {
    *out = it->second;
    return Status::Ok();
  }
  const std::string file = model_file(key.first, key.second);
  if (std::FILE* f = std::fopen(file.c_str(), "r"); f != nullptr) {
    LatencyModel m;
    const int n = std::fscanf(f, "%lf %lf %lf", &m.a_ns, &m.ns_per_read, &m.ns_per_write);
    std::fclose(f);
    if (n == 3 && m.a_ns > 0) {
      g_models[key] = m;
      *out = m;
      return Status::Ok();
    }
  }
  LatencyModel m;
  const uint64_t from = tree.high_water();
  if (tree.slots() - from < 64) {
    *out = m;  // a full store: keep the default model rather than write into it
    return Status::Ok();
  }
  if (Status s = calibrate(dev, tree.node_size(), from, tree.slots(), &m); !s.ok()) {
    return s;
  }
  save_model(file, m);  // a cache: a refusal to write it costs a fit next time
  g_models[key] = m;
  *out = m;
  return Status::Ok();
}

/// The Index<uint64_t> face of one tree and its executor. The synchronous
/// baselines run each operation in the calling thread; the engine runs it
/// on its worker while the calling thread waits (Engine::run).
class PaTreeIndex final : public Index<uint64_t> {
 public:
  static Status open(Mode mode, const IndexOptions& o, std::unique_ptr<Index<uint64_t>>* out) {
    out->reset();
    const std::string name = mode_name(mode);
    if (o.device.empty()) {
      return Status::InvalidArgument(name +
                                     ": needs a device (IndexOptions::device: a file on a disk "
                                     "or a block device)");
    }
    TreeOptions t;
    t.node_size = o.node_size;
    t.weak = option(o, "persistence", "strong") == "weak";
    t.dsync = option(o, "dsync", "off") == "on";
    std::unique_ptr<PaTreeIndex> idx(new PaTreeIndex(mode, name));
    if (Status s = BlockDevice::open(
            o.device, o.device_bytes ? o.device_bytes : kDefaultDeviceBytes, &idx->dev_);
        !s.ok()) {
      return s;
    }
    // The buffer's frames are of the store's node size, known after open; a
    // byte budget in frames of the requested size is close enough for a new
    // store and exact for one of the same size.
    t.buffer_frames =
        buffer_bytes(option(o, "buffer", "64m")) / std::max<uint32_t>(o.node_size, 512);
    if (Status s = Tree::open(idx->dev_.get(), t, &idx->tree_); !s.ok()) return s;
    const std::string ring = option(o, "ring", "auto");
    if (mode == Mode::kEngine) {
      EngineOptions eo;
      eo.queue_depth = static_cast<unsigned>(std::stoul(option(o, "queue_depth", "64")));
      const std::string probe = option(o, "probe", "model");
      eo.probe = probe == "every"     ? ProbeStrategy::kEveryLoop
                 : probe == "average" ? ProbeStrategy::kAverage
                                      : ProbeStrategy::kModel;
      if (Status s = model_for(*idx->dev_, *idx->tree_, &eo.model); !s.ok()) return s;
      if (Status s = Engine::create(idx->tree_.get(), *idx->dev_, ring, eo, &idx->engine_);
          !s.ok()) {
        return s;
      }
      idx->ring_note_ = idx->engine_->ring_note();
    } else if (mode == Mode::kDedicated) {
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
    if (idx->exec_ != nullptr) idx->tree_->set_executor(idx->exec_.get());
    idx->open_ = true;
    *out = std::move(idx);
    return Status::Ok();
  }

  ~PaTreeIndex() override {
    // A clean close: the last checkpoint (weak), then the free list and a
    // clean superblock. A failure leaves the store marked open, so the next
    // open recovers by walking the tree: nothing completed before the last
    // successful sync is lost either way.
    if (open_) {
      Status s = sync();
      engine_.reset();  // joins the worker: no operation runs from here
      if (s.ok()) s = tree_->close();
      (void)s;  // nowhere to report from a destructor; see above
    }
    engine_.reset();
    tree_.reset();
    exec_.reset();  // rings hold the file: close them before the device
    dev_.reset();
  }

  Status insert(uint64_t key, Value value) override {
    Request r;
    r.kind = Request::Kind::kInsert;
    r.key = key;
    r.value = value;
    return after_update(exec(r));
  }
  Status update(uint64_t key, Value value) override {
    Request r;
    r.kind = Request::Kind::kUpdate;
    r.key = key;
    r.value = value;
    return after_update(exec(r));
  }
  Status remove(uint64_t key) override {
    Request r;
    r.kind = Request::Kind::kRemove;
    r.key = key;
    return after_update(exec(r));
  }
  std::optional<Value> lookup(uint64_t key) override {
    Request r;
    r.kind = Request::Kind::kLookup;
    r.key = key;
    // A read error cannot be returned through lookup(): it reads as absent,
    // and verify() reports the damaged node.
    (void)exec(r);
    return r.found;
  }
  size_t scan(uint64_t start, size_t count, std::vector<std::pair<uint64_t, Value>>* out) override {
    Request r;
    r.kind = Request::Kind::kScan;
    r.key = start;
    r.count = count;
    r.scan_out = out;
    if (!exec(r).ok()) out->clear();
    return out->size();
  }
  std::optional<std::pair<uint64_t, Value>> find_last_less_than(uint64_t key) override {
    Request r;
    r.kind = Request::Kind::kLastLess;
    r.key = key;
    if (!exec(r).ok()) return std::nullopt;
    return r.pair;
  }
  /// The engine (patree): the batch goes to Engine::run_batch with
  /// min(window, queue_depth) in flight, in per-key order; each operation's
  /// latency is from its submission to its completion. The synchronous
  /// baselines: the default, one operation after another on this thread.
  void execute(std::span<BatchOp<uint64_t>> ops, unsigned window) override {
    if (engine_ == nullptr || window <= 1) {
      Index<uint64_t>::execute(ops, window);
      return;
    }
    using Kind = BatchOp<uint64_t>::Kind;
    std::vector<Request> reqs(ops.size());
    for (size_t i = 0; i < ops.size(); ++i) {
      const BatchOp<uint64_t>& op = ops[i];
      reqs[i].kind = op.kind == Kind::kLookup   ? Request::Kind::kLookup
                     : op.kind == Kind::kInsert ? Request::Kind::kInsert
                     : op.kind == Kind::kUpdate ? Request::Kind::kUpdate
                                                : Request::Kind::kRemove;
      reqs[i].key = op.key;
      reqs[i].value = op.value;
    }
    engine_->run_batch(reqs, window);
    for (size_t i = 0; i < ops.size(); ++i) {
      ops[i].status = std::move(reqs[i].status);
      ops[i].found = reqs[i].found;
      ops[i].latency_ns = reqs[i].completed_ns - reqs[i].submitted_ns;
    }
  }
  Status sync() override {
    Request r;
    r.kind = Request::Kind::kSync;
    return exec(r);
  }

  IndexInfo info() const override {
    IndexInfo i;
    i.name = name_;
    i.description = mode_ == Mode::kEngine      ? kPaTreeDescription
                    : mode_ == Mode::kDedicated ? kPaTreeDedicatedDescription
                                                : kPaTreeSharedDescription;
    // The ring mode chosen at open and why (issue 14: "chosen at start-up
    // and reported"), e.g. "iopoll refused by the device (...): interrupt".
    i.description += "; io_uring: " + ring_note_;
    i.caps = mode_ == Mode::kEngine ? kPaTreeCaps : kPaTreeSyncCaps;
    i.node_size = tree_->node_size();
    i.dram_bytes = tree_->buffer().allocated_bytes();
    i.recovered = tree_->recovered();
    i.recovery_seconds = tree_->recovery_seconds();
    if (engine_ != nullptr) {
      const EngineStats st = engine_->stats();
      i.counters = {{"engine.operations", st.operations},
                    {"engine.ios", st.ios},
                    {"engine.io_latency_ns_sum", st.latency_sum_ns},
                    {"engine.loop_passes", st.loops},
                    {"engine.outstanding_sum", st.outstanding_sum},
                    {"engine.probes", st.probes},
                    {"engine.empty_probes", st.empty_probes},
                    {"engine.yields", st.yields},
                    {"engine.sleeps", st.sleeps}};
    }
    return i;
  }

  Status verify(VerifyReport* report) const override { return tree_->verify(report); }

 private:
  PaTreeIndex(Mode mode, std::string name) : mode_(mode), name_(std::move(name)) {}

  /// Runs `r` to its end: on the engine's worker (this thread waits), or in
  /// this thread (the synchronous executors never suspend).
  Status exec(Request& r) {
    if (engine_ != nullptr) return engine_->run(&r);
    Op op;
    Task<Status> t = start_request(*tree_, op, r);
    t.start();
    NVINDEX_DCHECK(t.done());
    r.status = std::move(t.result());
    return r.status;
  }

  /// Weak persistence, synchronous baselines: a checkpoint when half the
  /// buffer is dirty, run by the thread whose update crossed the line (one
  /// at a time). The engine admits its own (Engine::finish).
  Status after_update(Status s) {
    if (engine_ == nullptr && tree_->wants_checkpoint() && !checkpointing_.exchange(true)) {
      // A failed background checkpoint leaves its frames dirty; the next
      // sync() retries and reports.
      (void)sync();
      checkpointing_.store(false);
    }
    return s;
  }

  const Mode mode_;
  const std::string name_;
  std::unique_ptr<BlockDevice> dev_;
  std::unique_ptr<Tree> tree_;
  std::unique_ptr<Executor> exec_;
  std::unique_ptr<Engine> engine_;
  std::string ring_note_;
  bool open_ = false;
  std::atomic<bool> checkpointing_{false};
};

}  // namespace
}  // namespace nvme

Status patree_calibrate(const std::string& dir, uint32_t node_size, std::string* report) {
  if (!nvme::valid_node_size(node_size)) {
    return Status::InvalidArgument("patree-calibrate: node size " + std::to_string(node_size) +
                                   " B is not a power of two in 512..4096");
  }
  util::TempDir tmp(dir, "nvindex-patree-calibrate-");
  if (!tmp.ok()) return Status::InvalidArgument("patree-calibrate: " + tmp.error());
  std::unique_ptr<nvme::BlockDevice> dev;
  constexpr uint64_t kBytes = 64ull << 20;
  if (Status s = nvme::BlockDevice::open(tmp.path() + "/store", kBytes, &dev); !s.ok()) return s;
  std::pair<unsigned, unsigned> key;
  if (Status s = nvme::disk_of(*dev, &key); !s.ok()) return s;
  nvme::LatencyModel m;
  std::string table;
  if (Status s = nvme::calibrate(*dev, node_size, 0, kBytes / node_size, &m, &table); !s.ok()) {
    return s;
  }
  const std::string file = nvme::model_file(key.first, key.second);
  nvme::save_model(file, m);
  {
    std::lock_guard g(nvme::g_models_mu);
    nvme::g_models[key] = m;
  }
  char fit[160];
  std::snprintf(fit, sizeof(fit),
                "model: latency = %.1f us + %.2f us x reads + %.2f us x writes outstanding\n",
                m.a_ns / 1000, m.ns_per_read / 1000, m.ns_per_write / 1000);
  *report = "disk " + std::to_string(key.first) + ":" + std::to_string(key.second) + ", " +
            std::to_string(node_size) + " B I/Os, mean completion latency:\n" + table + fit +
            "saved to " + file + "\n";
  return Status::Ok();
}

Status make_patree(const IndexOptions& o, std::unique_ptr<Index<uint64_t>>* out) {
  return nvme::PaTreeIndex::open(nvme::Mode::kEngine, o, out);
}

Status make_patree_dedicated(const IndexOptions& o, std::unique_ptr<Index<uint64_t>>* out) {
  return nvme::PaTreeIndex::open(nvme::Mode::kDedicated, o, out);
}

Status make_patree_shared(const IndexOptions& o, std::unique_ptr<Index<uint64_t>>* out) {
  return nvme::PaTreeIndex::open(nvme::Mode::kShared, o, out);
}

}  // namespace nvindex
