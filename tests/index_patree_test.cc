// PA-Tree (src/nvme/), what is specific to its design (the conformance
// suite, the concurrent tests and torture cover patree, patree-dedicated and
// patree-shared through the registry, at the default buffer and the
// engine's default settings): the tree against a map model through the
// engine and both synchronous baselines, buffered and unbuffered, strong and
// weak, at the smallest and largest node size and at every runtime option;
// recovery from a crash at every node write of a run (an executor that stops
// writing after N writes: the device then holds exactly the state a crash at
// that point leaves), including root splits and weak checkpoints; the engine
// with thousands of operations on overlapping keys; a checkpoint larger than
// a ring; a clean close keeps the free list; and the errors of a bad device:
// a torn or damaged superblock, a file that is not a store, a tmpfs path, a
// store opened twice, a full device.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "nvindex/index.h"
#include "nvme/device.h"
#include "nvme/engine.h"
#include "nvme/format.h"
#include "nvme/patree_index.h"
#include "nvme/tree.h"
#include "support/model_check.h"
#include "util/temp_files.h"

namespace nvindex {
namespace {

namespace fs = std::filesystem;
using nvme::BlockDevice;
using nvme::Tree;
using nvme::TreeOptions;

/// A fresh directory on a disk ($NVINDEX_DEVICE_DIR, else /var/tmp), removed
/// at the end.
struct TempDir : util::TempDir {
  TempDir() : util::TempDir(util::temp_device_dir(), "nvindex-patree-test-") {
    EXPECT_TRUE(ok()) << error();
  }
  std::string file(const char* name) const { return path() + "/" + name; }
};

IndexOptions patree_options(const std::string& device, uint32_t node_size,
                            std::map<std::string, std::string> extra) {
  IndexOptions o;
  o.device = device;
  o.device_bytes = 64ull << 20;
  o.node_size = node_size;
  o.threads = 2;
  o.extra = std::move(extra);
  return o;
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
// Under a sanitizer the point is memory errors and races, not the number of
// splits: a quarter of the operations (the engine's model cases took 23 s
// each under ASan on 2 cores, 4.5 s in release).
constexpr int kScale = 4;
#else
constexpr int kScale = 1;
#endif

struct Config {
  const char* name;
  uint32_t node_size;
  const char* persistence;
  const char* buffer;
  /// One more option (a runtime_only one the conformance suite leaves at
  /// its default), or "" for none.
  const char* opt = "";
  const char* value = "";
};

/// gtest's name for a Config in its messages (instead of its bytes).
void PrintTo(const Config& c, std::ostream* os) {
  *os << c.name << " " << c.node_size << " B " << c.persistence << " buffer=" << c.buffer;
  if (*c.opt != '\0') *os << " " << c.opt << "=" << c.value;
}

class PaTreeModel : public ::testing::TestWithParam<Config> {};

// The tree against a std::map (run_model_test: grow with splits, mixed,
// shrink, regrow; verify() every ops/16 operations), then a reopen that
// must hold the same keys.
TEST_P(PaTreeModel, MatchesTheModelAndReopens) {
  const Config c = GetParam();
  TempDir dir;
  const std::string dev = dir.file("store");
  std::map<std::string, std::string> extra{{"persistence", c.persistence}, {"buffer", c.buffer}};
  if (*c.opt != '\0') extra[c.opt] = c.value;
  const auto o = patree_options(dev, c.node_size, extra);
  std::vector<std::pair<uint64_t, Value>> before;
  {
    std::unique_ptr<Index<uint64_t>> idx;
    ASSERT_TRUE(make_index(c.name, o, &idx).ok());
    testing::run_model_test(*idx, 7 + c.node_size, 6000 / kScale, 4000 / kScale);
    idx->scan(0, SIZE_MAX, &before);
    ASSERT_TRUE(idx->sync().ok());
  }
  std::unique_ptr<Index<uint64_t>> idx;
  ASSERT_TRUE(make_index(c.name, o, &idx).ok());
  EXPECT_TRUE(idx->info().recovered);
  std::vector<std::pair<uint64_t, Value>> after;
  idx->scan(0, SIZE_MAX, &after);
  EXPECT_EQ(after, before);
  VerifyReport r;
  ASSERT_TRUE(idx->verify(&r).ok());
  EXPECT_EQ(r.keys, before.size());
}

INSTANTIATE_TEST_SUITE_P(
    Configs, PaTreeModel,
    ::testing::Values(Config{"patree", 512, "strong", "none"}, Config{"patree", 512, "weak", "1m"},
                      Config{"patree", 4096, "strong", "64m"},
                      Config{"patree", 512, "strong", "none", "probe", "every"},
                      Config{"patree", 512, "strong", "none", "probe", "average"},
                      Config{"patree", 512, "strong", "1m", "queue_depth", "1"},
                      Config{"patree", 512, "weak", "1m", "queue_depth", "4"},
                      Config{"patree", 512, "strong", "none", "ring", "sqpoll"},
                      Config{"patree", 512, "strong", "none", "ring", "interrupt"},
                      Config{"patree-dedicated", 512, "strong", "none", "dsync", "on"},
                      Config{"patree-dedicated", 512, "strong", "none"},
                      Config{"patree-dedicated", 512, "strong", "64m"},
                      Config{"patree-dedicated", 512, "weak", "1m"},
                      Config{"patree-dedicated", 4096, "strong", "none"},
                      Config{"patree-dedicated", 4096, "weak", "64m"},
                      Config{"patree-shared", 512, "strong", "none"},
                      Config{"patree-shared", 1024, "weak", "1m"},
                      Config{"patree-shared", 2048, "strong", "1m"}),
    [](const ::testing::TestParamInfo<Config>& i) {
      const std::string n = i.param.name;
      std::string l = (n == "patree" ? std::string("engine") : n.substr(7)) + "_" +
                      std::to_string(i.param.node_size) + "_" + i.param.persistence + "_" +
                      i.param.buffer;
      if (*i.param.opt != '\0') {
        l += std::string("_") + i.param.opt + "_" + i.param.value;
      }
      return l;
    });

// ---------------------------------------------------------------------------
// Crash at every write

/// A single-threaded executor doing synchronous pread/pwrite that performs
/// only the first `budget` writes and fdatasyncs of nodes or the superblock:
/// from then on writes are dropped (reported as done), so the device holds
/// what a crash right after write number `budget` leaves.
class CrashingExecutor final : public nvme::Executor {
 public:
  CrashingExecutor(int fd, uint64_t budget) : fd_(fd), budget_(budget) {}
  bool io_begin(nvme::Op&, std::span<nvme::IoReq> reqs) override {
    for (nvme::IoReq& r : reqs) {
      switch (r.kind) {
        case nvme::IoReq::Kind::kRead:
          r.result = static_cast<int>(pread(fd_, r.buf, r.len, static_cast<off_t>(r.offset)));
          break;
        case nvme::IoReq::Kind::kWrite:
          if (writes_ < budget_) {
            r.result = static_cast<int>(pwrite(fd_, r.buf, r.len, static_cast<off_t>(r.offset)));
          } else {
            r.result = static_cast<int>(r.len);
            crashed_ = true;
          }
          ++writes_;
          break;
        case nvme::IoReq::Kind::kSync:
          r.result = 0;
          break;
      }
    }
    return true;
  }
  void io_suspend(nvme::Op&, std::coroutine_handle<>) override {}
  bool latch_begin(nvme::Op&, uint64_t, nvme::LatchMode) override { return true; }
  void latch_suspend(nvme::Op&, std::coroutine_handle<>) override {}
  void unlatch(nvme::Op&, uint64_t, nvme::LatchMode) override {}
  bool crashed() const { return crashed_; }
  uint64_t writes() const { return writes_; }

 private:
  int fd_;
  uint64_t budget_;
  uint64_t writes_ = 0;
  bool crashed_ = false;
};

template <class T>
T run(nvme::Task<T> t) {
  t.start();
  EXPECT_TRUE(t.done());
  return std::move(t.result());
}

/// One crash run: a fresh store, `ops` inserts/updates/removes of keys in
/// [0, key_space) with sync() every 50 operations when weak, writes cut off
/// after `budget`; then the store is opened (recovery) and compared with the
/// model of the operations that completed before the cut (strong) or before
/// the last checkpoint that completed before it (weak). Returns the writes
/// the run attempted (to find the range of budgets) via *writes.
void crash_run(const TempDir& dir, uint32_t node_size, bool weak, uint64_t budget, int ops,
               uint64_t key_space, uint64_t* writes) {
  const std::string path = dir.file("crash");
  fs::remove(path);
  std::map<uint64_t, uint64_t> durable;  // what the recovered store must hold exactly
  std::map<uint64_t, uint64_t> model;
  {
    std::unique_ptr<BlockDevice> dev;
    ASSERT_TRUE(BlockDevice::open(path, 8ull << 20, &dev).ok());
    TreeOptions to;
    to.node_size = node_size;
    to.weak = weak;
    to.buffer_frames = weak ? 4096 : 0;
    std::unique_ptr<Tree> tree;
    ASSERT_TRUE(Tree::open(dev.get(), to, &tree).ok());
    CrashingExecutor ex(dev->fd(), budget);
    tree->set_executor(&ex);
    std::mt19937_64 rng(budget * 31 + node_size);
    for (int i = 0; i < ops && !ex.crashed(); ++i) {
      const uint64_t k = rng() % key_space;
      const uint64_t v = rng();
      nvme::Op op;
      const int kind = static_cast<int>(rng() % 10);
      Status s;
      if (kind < 6) {
        s = run(tree->insert(op, k, v));
        if (s.ok()) model[k] = v;
      } else if (kind < 8) {
        s = run(tree->update(op, k, v));
        if (s.ok()) model[k] = v;
      } else {
        s = run(tree->remove(op, k));
        if (s.ok()) model.erase(k);
      }
      ASSERT_TRUE(s.ok() || s.IsNotFound() || s.IsAlreadyExists()) << s.ToString();
      if (!weak && !ex.crashed()) durable = model;
      if (weak && (i + 1) % 50 == 0) {
        nvme::Op cop;
        ASSERT_TRUE(run(tree->checkpoint(cop)).ok());
        if (!ex.crashed()) durable = model;
      }
    }
    *writes = ex.writes();
    // The crash: the tree is dropped without close().
  }
  std::unique_ptr<BlockDevice> dev;
  ASSERT_TRUE(BlockDevice::open(path, 0, &dev).ok());
  TreeOptions to;
  to.node_size = node_size;
  std::unique_ptr<Tree> tree;
  Status s = Tree::open(dev.get(), to, &tree);
  ASSERT_TRUE(s.ok()) << "budget " << budget << ": " << s.ToString();
  VerifyReport r;
  s = tree->verify(&r);
  ASSERT_TRUE(s.ok()) << "budget " << budget << ": " << s.ToString();
  CrashingExecutor ex(dev->fd(), UINT64_MAX);
  tree->set_executor(&ex);
  nvme::Op op;
  std::vector<nvme::Pair> all;
  ASSERT_TRUE(run(tree->scan(op, 0, SIZE_MAX, &all)).ok());
  if (!weak) {
    // Strong: every acknowledged operation, and at most the one in flight
    // at the cut on top (it may or may not have reached the device).
    std::map<uint64_t, uint64_t> got(all.begin(), all.end());
    size_t diff = 0;
    for (const auto& [k, v] : durable) diff += got.count(k) == 0 || got[k] != v;
    for (const auto& [k, v] : got) diff += durable.count(k) == 0;
    ASSERT_LE(diff, 1u) << "budget " << budget << ": more than the in-flight operation differs";
  } else {
    // Weak: everything of the last completed checkpoint; later operations
    // may be partly there, so only the checkpointed keys are checked, each
    // present (with its value or a later one).
    std::map<uint64_t, uint64_t> got(all.begin(), all.end());
    for (const auto& [k, v] : durable) {
      ASSERT_TRUE(got.count(k) == 1 || model.count(k) == 0)
          << "budget " << budget << ": key " << k << " of the last sync lost";
    }
  }
  // The recovered store takes updates again.
  ASSERT_TRUE(run(tree->insert(op, key_space + 1, 1)).ok());
  ASSERT_TRUE(tree->verify(&r).ok());
}

/// crash_run() at every write budget of a run of `ops` operations (which
/// must attempt more than min_writes writes).
void crash_at_every_write(bool weak, int ops, uint64_t min_writes) {
  TempDir dir;
  uint64_t total = 0;
  crash_run(dir, 512, weak, UINT64_MAX, ops, 5000, &total);
  ASSERT_GT(total, min_writes);
  for (uint64_t budget = 0; budget < total; ++budget) {
    uint64_t w = 0;
    crash_run(dir, 512, weak, budget, ops, 5000, &w);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(PaTreeCrash, StrongSurvivesACrashAtEveryWrite) { crash_at_every_write(false, 400, 200); }

TEST(PaTreeCrash, WeakKeepsTheLastCheckpointAtEveryWrite) { crash_at_every_write(true, 600, 50); }

// ---------------------------------------------------------------------------
// The engine with many operations on overlapping keys

// 30,000 operations submitted at once from one thread to an engine running
// 256 at a time, unbuffered (every node visit an I/O, so operations suspend
// constantly): inserts of 10,000 keys in random order, updates and lookups
// of the same keys racing them. Latches queue, leaves and inner nodes split
// under contention; every result must be one some order allows, and the
// final tree must hold every key with its inserted or updated value.
TEST(PaTreeEngine, ThousandsOfOperationsOnOverlappingKeys) {
  TempDir dir;
  std::unique_ptr<BlockDevice> dev;
  ASSERT_TRUE(BlockDevice::open(dir.file("engine"), 64ull << 20, &dev).ok());
  TreeOptions to;
  std::unique_ptr<Tree> tree;
  ASSERT_TRUE(Tree::open(dev.get(), to, &tree).ok());
  nvme::EngineOptions eo;
  eo.queue_depth = 256;
  std::unique_ptr<nvme::Engine> engine;
  ASSERT_TRUE(nvme::Engine::create(tree.get(), *dev, "auto", eo, &engine).ok());
  constexpr uint64_t kKeys = 10000;
  std::vector<nvme::Request> reqs(3 * kKeys);
  std::mt19937_64 rng(3);
  std::vector<uint64_t> order(kKeys);
  for (uint64_t i = 0; i < kKeys; ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), rng);
  for (uint64_t i = 0; i < kKeys; ++i) {
    reqs[3 * i].kind = nvme::Request::Kind::kInsert;
    reqs[3 * i].key = order[i];
    reqs[3 * i].value = order[i] * 2;
    reqs[3 * i + 1].kind = nvme::Request::Kind::kUpdate;
    reqs[3 * i + 1].key = rng() % kKeys;
    reqs[3 * i + 1].value = reqs[3 * i + 1].key * 2 + 1;
    reqs[3 * i + 2].kind = nvme::Request::Kind::kLookup;
    reqs[3 * i + 2].key = rng() % kKeys;
  }
  std::atomic<uint64_t> done{0};
  for (nvme::Request& r : reqs) {
    r.on_done = [](nvme::Request*, void* arg) {
      static_cast<std::atomic<uint64_t>*>(arg)->fetch_add(1, std::memory_order_release);
    };
    r.arg = &done;
    engine->submit(&r);
  }
  while (done.load(std::memory_order_acquire) < reqs.size()) std::this_thread::yield();
  for (const nvme::Request& r : reqs) {
    switch (r.kind) {
      case nvme::Request::Kind::kInsert:
        ASSERT_TRUE(r.status.ok()) << r.key << ": " << r.status.ToString();
        break;
      case nvme::Request::Kind::kUpdate:
        ASSERT_TRUE(r.status.ok() || r.status.IsNotFound()) << r.status.ToString();
        break;
      default:
        ASSERT_TRUE(r.status.ok()) << r.status.ToString();
        if (r.found) {
          ASSERT_EQ(*r.found / 2, r.key) << "a value of another key";
        }
    }
  }
  const nvme::EngineStats st = engine->stats();
  EXPECT_EQ(st.operations, reqs.size());
  EXPECT_GT(st.mean_outstanding, 4.0) << "the worker kept I/Os in flight";
  std::printf(
      "engine: %llu ops, %llu I/Os, mean outstanding %.1f, mean latency %.0f us, "
      "probes %llu (%llu empty), yields %llu\n",
      static_cast<unsigned long long>(st.operations), static_cast<unsigned long long>(st.ios),
      st.mean_outstanding, st.mean_latency_ns / 1000, static_cast<unsigned long long>(st.probes),
      static_cast<unsigned long long>(st.empty_probes), static_cast<unsigned long long>(st.yields));
  engine.reset();
  VerifyReport r;
  ASSERT_TRUE(tree->verify(&r).ok());
  EXPECT_EQ(r.keys, kKeys);
  CrashingExecutor ex(dev->fd(), UINT64_MAX);
  tree->set_executor(&ex);
  for (uint64_t k = 0; k < kKeys; ++k) {
    nvme::Op op;
    std::optional<uint64_t> v;
    ASSERT_TRUE(run(tree->lookup(op, k, &v)).ok());
    ASSERT_TRUE(v.has_value()) << k;
    ASSERT_EQ(*v / 2, k);
  }
}

// The concurrent suite's test (disjoint writers, readers of every key)
// through the engine at the runtime-only settings the conformance suite
// leaves at their defaults.
TEST(PaTreeEngine, ConcurrentCallersAtEveryQueueDepthAndProbe) {
  const std::map<std::string, std::string> variants[] = {{{"queue_depth", "1"}},
                                                         {{"queue_depth", "256"}},
                                                         {{"probe", "every"}},
                                                         {{"probe", "average"}},
                                                         {{"ring", "sqpoll"}, {"buffer", "none"}}};
  for (const auto& extra : variants) {
    TempDir dir;
    std::unique_ptr<Index<uint64_t>> idx;
    const Status s = make_index("patree", patree_options(dir.file("c"), 512, extra), &idx);
    ASSERT_TRUE(s.ok()) << s.ToString();
    testing::run_concurrent_test(*idx, 2, 5, 3000 / kScale, 1024);
    if (HasFatalFailure()) return;
  }
}

// Index::execute through the engine (caps.async): 6,000 point operations
// over 300 keys, so most keys recur within a window of 64, run with up to 64
// in flight. Each outcome must be the one running them one by one gives
// (a std::map replay), which holds only if operations on a key keep their
// order; every latency is the operation's own. The synchronous baselines
// take the default (one by one) and must give the same outcomes.
TEST(PaTree, ExecuteKeepsPerKeyOrderWithManyInFlight) {
  using Op = BatchOp<uint64_t>;
  std::mt19937_64 rng(11);
  std::vector<Op> ops(6000);
  for (Op& op : ops) {
    op.kind = static_cast<Op::Kind>(rng() % 4);
    op.key = rng() % 300;
    op.value = rng();
  }
  std::map<uint64_t, Value> model;
  std::vector<Op> want = ops;
  for (Op& w : want) {
    const auto it = model.find(w.key);
    switch (w.kind) {
      case Op::Kind::kLookup:
        if (it != model.end()) w.found = it->second;
        break;
      case Op::Kind::kInsert:
        w.status = it == model.end() ? Status::Ok() : Status::AlreadyExists();
        if (it == model.end()) model[w.key] = w.value;
        break;
      case Op::Kind::kUpdate:
        w.status = it == model.end() ? Status::NotFound() : Status::Ok();
        if (it != model.end()) it->second = w.value;
        break;
      case Op::Kind::kRemove:
        w.status = it == model.end() ? Status::NotFound() : Status::Ok();
        if (it != model.end()) model.erase(it);
        break;
    }
  }
  for (const char* name : {"patree", "patree-shared"}) {
    TempDir dir;
    std::unique_ptr<Index<uint64_t>> idx;
    ASSERT_TRUE(make_index(name, patree_options(dir.file("x"), 512, {}), &idx).ok()) << name;
    std::vector<Op> got = ops;
    idx->execute(std::span<Op>(got), 64);
    for (size_t i = 0; i < ops.size(); ++i) {
      ASSERT_EQ(got[i].status.code(), want[i].status.code()) << name << " op " << i;
      ASSERT_EQ(got[i].found, want[i].found) << name << " op " << i;
      ASSERT_GT(got[i].latency_ns, 0u) << name << " op " << i;
    }
    testing::expect_equals_model(*idx, model);
  }
}

// A checkpoint of many more dirty nodes than a ring's completion queue holds
// (weak persistence, a 64 MiB buffer: nothing is written before sync()),
// through each executor. The rings cap the requests out at their completion
// queue's size and the engine waits for room; before, the engine's sync()
// waited forever for completions the kernel kept on its overflow list.
TEST(PaTree, ACheckpointOfMoreNodesThanTheRingHoldsCompletes) {
  for (const char* name : {"patree", "patree-dedicated", "patree-shared"}) {
    TempDir dir;
    const auto o = patree_options(dir.file("w"), 512, {{"persistence", "weak"}});
    constexpr uint64_t kKeys = 20000;
    {
      std::unique_ptr<Index<uint64_t>> idx;
      ASSERT_TRUE(make_index(name, o, &idx).ok()) << name;
      for (uint64_t i = 0; i < kKeys; ++i) {
        ASSERT_TRUE(idx->insert(i * 0x9E3779B97F4A7C15ull, i).ok()) << name << " " << i;
      }
      ASSERT_TRUE(idx->sync().ok()) << name;
    }
    std::unique_ptr<Index<uint64_t>> idx;
    ASSERT_TRUE(make_index(name, o, &idx).ok()) << name;
    VerifyReport r;
    ASSERT_TRUE(idx->verify(&r).ok()) << name;
    EXPECT_EQ(r.keys, kKeys) << name;
    // The engine's ring at queue depth 64: 128 slots, 256 completions.
    EXPECT_GT(r.leaves, 512u) << name << ": the checkpoint wrote too few nodes to test this";
  }
}

// ---------------------------------------------------------------------------
// A clean close keeps the free list; errors of a bad device

TEST(PaTree, CleanCloseKeepsTheStoreAndItsFreeList) {
  TempDir dir;
  const auto o = patree_options(dir.file("s"), 512, {{"buffer", "none"}});
  {
    std::unique_ptr<Index<uint64_t>> idx;
    ASSERT_TRUE(make_index("patree-dedicated", o, &idx).ok());
    EXPECT_FALSE(idx->info().recovered);
    for (uint64_t k = 0; k < 3000; ++k) ASSERT_TRUE(idx->insert(k, k * 3).ok());
  }
  std::unique_ptr<Index<uint64_t>> idx;
  ASSERT_TRUE(make_index("patree-dedicated", o, &idx).ok());
  EXPECT_TRUE(idx->info().recovered);
  for (uint64_t k = 0; k < 3000; ++k) ASSERT_EQ(idx->lookup(k), k * 3) << k;
  VerifyReport r;
  ASSERT_TRUE(idx->verify(&r).ok());
  EXPECT_EQ(r.keys, 3000u);
  EXPECT_GT(r.height, 1u);
}

/// The store's first 512 B after `edit`; Corruption naming `what` expected.
void expect_superblock_refused(void (*edit)(std::byte*), const char* what) {
  TempDir dir;
  const auto o = patree_options(dir.file("s"), 512, {});
  {
    std::unique_ptr<Index<uint64_t>> idx;
    ASSERT_TRUE(make_index("patree-dedicated", o, &idx).ok());
    ASSERT_TRUE(idx->insert(1, 2).ok());
  }
  const int fd = ::open(o.device.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  std::byte sb[512];
  ASSERT_EQ(pread(fd, sb, 512, 0), 512);
  edit(sb);
  ASSERT_EQ(pwrite(fd, sb, 512, 0), 512);
  ::close(fd);
  std::unique_ptr<Index<uint64_t>> idx;
  const Status s = make_index("patree-dedicated", o, &idx);
  EXPECT_EQ(s.code(), Code::kCorruption) << s.ToString();
  EXPECT_NE(s.message().find(what), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find(o.device), std::string::npos) << "names the device: " << s.ToString();
}

TEST(PaTree, DamagedSuperblockIsAClearError) {
  expect_superblock_refused([](std::byte* sb) { sb[24] ^= std::byte{1}; }, "checksum");
}

TEST(PaTree, TornSuperblockIsAClearError) {
  // The first half of a newer superblock (another root, generation) over the
  // second half of the old one.
  expect_superblock_refused(
      [](std::byte* sb) {
        nvme::Super s;
        s.node_size = 512;
        s.slots = 100;
        s.root = 7;
        s.height = 2;
        s.hwm = 9;
        s.generation = 99;
        std::byte fresh[512];
        nvme::encode_super(s, fresh);
        std::memcpy(sb, fresh, 256);
      },
      "checksum");
}

TEST(PaTree, ForeignFileIsNotAStore) {
  expect_superblock_refused([](std::byte* sb) { std::memcpy(sb, "SQLite format 3", 16); },
                            "not a PA-Tree store");
}

// The ring mode chosen at open is reported (IndexInfo::description): a
// requested mode as requested, auto as what the device allowed and why.
TEST(PaTree, RingModeIsReported) {
  TempDir dir;
  for (const char* ring : {"interrupt", "auto"}) {
    std::unique_ptr<Index<uint64_t>> idx;
    const auto o = patree_options(dir.file(ring), 512, {{"ring", ring}});
    ASSERT_TRUE(make_index("patree", o, &idx).ok()) << ring;
    const std::string d = idx->info().description;
    if (std::string(ring) == "interrupt") {
      EXPECT_NE(d.find("; io_uring: interrupt (requested)"), std::string::npos) << d;
    } else {
      EXPECT_TRUE(d.find("; io_uring: iopoll (the device polls)") != std::string::npos ||
                  d.find("; io_uring: iopoll refused by the device") != std::string::npos)
          << d;
    }
  }
}

TEST(PaTree, BadDevicesAreRefused) {
  TempDir dir;
  std::unique_ptr<Index<uint64_t>> idx;
  Status s = make_index("patree-dedicated", patree_options("", 512, {}), &idx);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
  if (fs::exists("/dev/shm")) {
    s = make_index("patree-dedicated", patree_options("/dev/shm/nvindex-patree-refused", 512, {}),
                   &idx);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find("tmpfs"), std::string::npos) << s.ToString();
    EXPECT_FALSE(fs::exists("/dev/shm/nvindex-patree-refused"));
  }
  s = make_index("patree-dedicated", patree_options(dir.path(), 512, {}), &idx);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << "a directory: " << s.ToString();
  s = make_index("patree-dedicated",
                 patree_options(dir.file("w"), 512, {{"persistence", "weak"}, {"buffer", "none"}}),
                 &idx);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
  s = make_index("patree-dedicated", patree_options(dir.file("n"), 768, {}), &idx);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
  // Opened twice: the second open is Busy, and the first store is intact.
  const auto o = patree_options(dir.file("twice"), 512, {});
  std::unique_ptr<Index<uint64_t>> first, second;
  ASSERT_TRUE(make_index("patree-dedicated", o, &first).ok());
  ASSERT_TRUE(first->insert(5, 6).ok());
  s = make_index("patree-shared", o, &second);
  EXPECT_EQ(s.code(), Code::kBusy) << s.ToString();
  EXPECT_EQ(first->lookup(5), 6u);
}

TEST(PaTree, FullDeviceIsOutOfSpaceAndLosesNothing) {
  TempDir dir;
  auto o = patree_options(dir.file("small"), 512, {{"buffer", "none"}});
  o.device_bytes = 64 << 10;  // 128 slots
  std::unique_ptr<Index<uint64_t>> idx;
  ASSERT_TRUE(make_index("patree-dedicated", o, &idx).ok());
  uint64_t k = 0;
  Status s;
  while ((s = idx->insert(k, k + 1)).ok()) ++k;
  EXPECT_EQ(s.code(), Code::kOutOfSpace) << s.ToString();
  EXPECT_GT(k, 1000u);
  for (uint64_t i = 0; i < k; ++i) ASSERT_EQ(idx->lookup(i), i + 1) << i;
  EXPECT_FALSE(idx->lookup(k).has_value());
  ASSERT_TRUE(idx->update(0, 42).ok());
  ASSERT_TRUE(idx->remove(1).ok());
  VerifyReport r;
  ASSERT_TRUE(idx->verify(&r).ok());
  EXPECT_EQ(r.keys, k - 1);
}

}  // namespace
}  // namespace nvindex
