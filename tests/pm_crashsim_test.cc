// Crash simulator (crashsim.h): the images a crash can leave after stores,
// flushes and fences (full enumeration, prefixes per line, commits by fence
// and clflush, nt stores, copy/move/fill chunking), sampling beyond the
// budget, the eADR profile, the uninstrumented-write check, ablation, lint,
// site keys, crash-point counting, and attach errors. Every test runs on a
// small file pool in /dev/shm mapped in crash-sim mode and writes into its
// unused heap area.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "nvindex/pm/allocator.h"
#include "nvindex/pm/persist.h"
#include "nvindex/pm/pool.h"
#include "pm/crashsim.h"
#include "pm_test_util.h"

namespace nvindex::pm::crashsim {
namespace {

using nvindex::pm::testing::TempPool;

constexpr uint64_t kSize = 4ull << 20;
/// A line-aligned scratch area in the pool's unused heap (offset 2 MiB).
constexpr uint64_t kScratch = 2ull << 20;

/// One image as the visitor saw it: the crash point and the scratch bytes.
struct Seen {
  CrashPoint point;
  std::vector<char> scratch;  ///< 8 lines from kScratch
  std::string choice;
  size_t bytes = 0;  ///< size of the whole image
};

class CrashSim : public ::testing::Test {
 protected:
  void SetUp() override { configure(PersistConfig{}); }
  void TearDown() override {
    sim_.reset();
    pool_.reset();
    configure(PersistConfig{});
  }

  /// Creates the pool and attaches a simulator collecting every image.
  void start(Options options = Options()) {
    ASSERT_TRUE(Pool::create(tp_.path(), kSize, "crashsim", Mode::kCrashSim, &pool_).ok());
    ASSERT_TRUE(Simulator::attach(pool_.get(), options, &sim_).ok());
    sim_->set_visitor([this](const CrashPoint& cp, const Image& img) {
      Seen s;
      s.point = cp;
      s.scratch.assign(img.bytes->data() + kScratch, img.bytes->data() + kScratch + 512);
      s.choice = img.choice;
      s.bytes = img.bytes->size();
      seen_.push_back(std::move(s));
      return true;
    });
  }
  /// Pointer to scratch byte `off`.
  char* at(uint64_t off) { return pool_->base() + kScratch + off; }
  uint64_t* word(uint64_t off) { return reinterpret_cast<uint64_t*>(at(off)); }
  /// The 8-byte word at `off` of image i's scratch.
  uint64_t word_in(size_t i, uint64_t off) const {
    uint64_t v;
    std::memcpy(&v, seen_[i].scratch.data() + off, 8);
    return v;
  }
  /// The distinct values of the words at `offs` over every image seen.
  std::set<std::vector<uint64_t>> states(const std::vector<uint64_t>& offs) const {
    std::set<std::vector<uint64_t>> out;
    for (size_t i = 0; i < seen_.size(); ++i) {
      std::vector<uint64_t> v;
      for (uint64_t o : offs) v.push_back(word_in(i, o));
      out.insert(v);
    }
    return out;
  }

  TempPool tp_;
  std::unique_ptr<Pool> pool_;
  std::unique_ptr<Simulator> sim_;
  std::vector<Seen> seen_;
};

using States = std::set<std::vector<uint64_t>>;

TEST_F(CrashSim, StoreWithoutFlushGivesImagesWithAndWithout) {
  start();
  store(word(0), uint64_t{7});
  sim_->operation_boundary("op");
  ASSERT_EQ(seen_.size(), 2u);
  EXPECT_EQ(states({0}), (States{{0}, {7}}));
  EXPECT_FALSE(seen_[0].point.at_fence);
  EXPECT_EQ(seen_[0].point.site, "op");
  EXPECT_EQ(seen_[0].bytes, kSize);  // whole pool, every image
}

TEST_F(CrashSim, TwoStoresToOneLineArePrefixes) {
  start();
  store(word(0), uint64_t{1});
  store(word(8), uint64_t{2});
  sim_->operation_boundary("op");
  // Prefixes 0, 1, 2: never the second store without the first.
  EXPECT_EQ(states({0, 8}), (States{{0, 0}, {1, 0}, {1, 2}}));
  EXPECT_EQ(seen_.size(), 3u);
}

TEST_F(CrashSim, TwoLinesAreEnumeratedFully) {
  start();
  store(word(0), uint64_t{1});
  store(word(64), uint64_t{2});
  sim_->operation_boundary("op");
  EXPECT_EQ(states({0, 64}), (States{{0, 0}, {1, 0}, {0, 2}, {1, 2}}));
  EXPECT_EQ(seen_.size(), 4u);
  EXPECT_EQ(seen_[0].point.dirty_lines, 2u);
  EXPECT_EQ(seen_[0].point.pending_stores, 2u);
  EXPECT_EQ(seen_[0].point.image_space, 4u);
}

TEST_F(CrashSim, FlushAndFenceMakeDurable) {
  start();
  store(word(0), uint64_t{5});
  persist(word(0), 8);
  seen_.clear();
  sim_->operation_boundary("op");
  ASSERT_EQ(seen_.size(), 1u);
  EXPECT_EQ(word_in(0, 0), 5u);
  EXPECT_EQ(seen_[0].choice, "no pending stores");
}

TEST_F(CrashSim, CrashPointBeforeEveryFence) {
  start();
  store(word(0), uint64_t{5});
  flush(word(0), 8);
  fence({"test.fence"});
  // Just before the fence: flushed but not yet durable, both states possible.
  ASSERT_EQ(seen_.size(), 2u);
  EXPECT_TRUE(seen_[0].point.at_fence);
  EXPECT_EQ(seen_[0].point.site, "test.fence");
  EXPECT_EQ(seen_[0].point.number, 0u);
  EXPECT_EQ(seen_[0].point.fences, 0u);
  EXPECT_EQ(states({0}), (States{{0}, {5}}));
  sim_->operation_boundary("op");
  EXPECT_EQ(sim_->stats().crash_points, 2u);
  EXPECT_EQ(seen_.back().point.number, 1u);
  EXPECT_EQ(seen_.back().point.fences, 1u);
}

TEST_F(CrashSim, StoreAfterFlushIsNotCoveredByIt) {
  start();
  store(word(0), uint64_t{1});
  flush(word(0), 8);
  store(word(0), uint64_t{2});
  fence();
  seen_.clear();
  sim_->operation_boundary("op");
  // The first store is durable; the second is pending.
  EXPECT_EQ(states({0}), (States{{1}, {2}}));
}

TEST_F(CrashSim, ClflushCommitsImmediately) {
  start();
  const FlushInstruction saved = detail::g.flush;
  detail::g.flush = FlushInstruction::kClflush;
  store(word(0), uint64_t{9});
  flush(word(0), 8);
  detail::g.flush = saved;
  sim_->operation_boundary("op");
  ASSERT_EQ(seen_.size(), 1u);
  EXPECT_EQ(word_in(0, 0), 9u);
}

TEST_F(CrashSim, NonTemporalCopyIsStorePlusFlush) {
  start();
  std::vector<char> src(100, 'x');
  nt_copy(at(3), src.data(), src.size());
  sim_->operation_boundary("op");
  const size_t before = seen_.size();
  EXPECT_GT(before, 1u);  // pending until a fence
  fence();
  seen_.clear();
  sim_->operation_boundary("op2");
  ASSERT_EQ(seen_.size(), 1u);
  EXPECT_EQ(std::string(seen_[0].scratch.data() + 3, 100), std::string(100, 'x'));
}

TEST_F(CrashSim, CopyIsChunkedInAddressOrder) {
  start();
  // 20 bytes from offset 4: chunks [4,8) [8,16) [16,24) in one line.
  std::vector<char> src(20, 'a');
  copy(at(4), src.data(), src.size());
  EXPECT_EQ(sim_->stats().stores, 3u);
  sim_->operation_boundary("op");
  ASSERT_EQ(seen_.size(), 4u);  // prefixes 0..3
  // A prefix never holds a later chunk without the earlier ones.
  for (const Seen& s : seen_) {
    const bool c1 = s.scratch[4] == 'a', c2 = s.scratch[8] == 'a', c3 = s.scratch[16] == 'a';
    EXPECT_TRUE(!c2 || c1);
    EXPECT_TRUE(!c3 || c2);
  }
}

TEST_F(CrashSim, MoveToHigherAddressIsRecordedBackwards) {
  start();
  const std::string init = "AAAAAAAABBBBBBBBCCCCCCCC";
  copy(at(0), init.data(), init.size());
  persist(at(0), init.size());
  seen_.clear();
  move(at(8), at(0), 16);  // memmove may go backwards: [16,24) first, then [8,16)
  sim_->operation_boundary("op");
  std::set<std::string> images;
  for (const Seen& s : seen_) images.insert(std::string(s.scratch.data(), 24));
  EXPECT_EQ(images, (std::set<std::string>{"AAAAAAAABBBBBBBBCCCCCCCC",     // none
                                           "AAAAAAAABBBBBBBBBBBBBBBB",     // high chunk only
                                           "AAAAAAAAAAAAAAAABBBBBBBB"}));  // both
}

TEST_F(CrashSim, MoveToLowerAddressAndFillAreRecordedForwards) {
  start();
  const std::string init = "AAAAAAAABBBBBBBBCCCCCCCC";
  copy(at(0), init.data(), init.size());
  persist(at(0), init.size());
  seen_.clear();
  move(at(0), at(8), 16);  // [0,8) first, then [8,16)
  sim_->operation_boundary("op");
  std::set<std::string> images;
  for (const Seen& s : seen_) images.insert(std::string(s.scratch.data(), 24));
  EXPECT_EQ(images, (std::set<std::string>{"AAAAAAAABBBBBBBBCCCCCCCC", "BBBBBBBBBBBBBBBBCCCCCCCC",
                                           "BBBBBBBBCCCCCCCCCCCCCCCC"}));
  persist(at(0), 24);
  seen_.clear();
  pm::fill(at(60), 'f', 8);  // crosses a line: [60,64) in line 0, [64,68) in line 1
  EXPECT_EQ(sim_->stats().stores, 3u + 2u + 2u);
  sim_->operation_boundary("op2");
  EXPECT_EQ(seen_.size(), 4u);  // two lines, one chunk each
}

TEST_F(CrashSim, UninstrumentedWriteIsReported) {
  start();
  *word(64) = 42;  // raw store, not through pm::
  store(word(0), uint64_t{1});
  persist(word(0), 8);
  EXPECT_EQ(sim_->stats().uninstrumented_writes, 1u);
  ASSERT_EQ(sim_->stats().uninstrumented_examples.size(), 1u);
  EXPECT_NE(sim_->stats().uninstrumented_examples[0].find("0x000000000000002a"), std::string::npos);
  // Reported once: the write is then followed like any pending store.
  sim_->operation_boundary("op");
  EXPECT_EQ(sim_->stats().uninstrumented_writes, 1u);
}

TEST_F(CrashSim, UninstrumentedCheckCanBeTurnedOff) {
  Options o;
  o.check_uninstrumented = false;
  start(o);
  *word(64) = 42;
  sim_->operation_boundary("op");
  EXPECT_EQ(sim_->stats().uninstrumented_writes, 0u);
}

TEST_F(CrashSim, RawWriteDuringSetUpIsFoundWhenCrashPointsTurnOn) {
  start();
  sim_->set_crash_points(false);
  *word(128) = 1;  // raw, during set-up
  persist(word(128), 8);
  EXPECT_EQ(sim_->stats().uninstrumented_writes, 0u);
  sim_->set_crash_points(true);
  EXPECT_EQ(sim_->stats().uninstrumented_writes, 1u);
}

TEST_F(CrashSim, WithoutVisitorCrashPointsAreOnlyCounted) {
  start();
  sim_->set_visitor(nullptr);
  store(word(0), uint64_t{1});
  persist(word(0), 8);
  sim_->operation_boundary("op");
  EXPECT_EQ(sim_->stats().crash_points, 2u);
  EXPECT_EQ(sim_->stats().images, 0u);
  EXPECT_TRUE(seen_.empty());
}

TEST_F(CrashSim, AblatedFlushLeavesStorePending) {
  start();
  sim_->ablate("test.persist", /*drop_flush=*/true, /*drop_fence=*/false);
  store(word(0), uint64_t{3});
  persist(word(0), 8, {"test.persist"});
  seen_.clear();
  sim_->operation_boundary("op");
  EXPECT_EQ(states({0}), (States{{0}, {3}}));
  EXPECT_EQ(sim_->sites().at("test.persist").flushes, 1u);  // reached, though dropped
  EXPECT_EQ(sim_->stats().flushes, 0u);
}

TEST_F(CrashSim, AblatedFenceLeavesStorePending) {
  start();
  sim_->ablate("test.persist", /*drop_flush=*/false, /*drop_fence=*/true);
  store(word(0), uint64_t{3});
  persist(word(0), 8, {"test.persist"});
  EXPECT_TRUE(seen_.empty());  // no crash point: the fence is gone
  sim_->operation_boundary("op");
  EXPECT_EQ(states({0}), (States{{0}, {3}}));
  sim_->ablate("", false, false);
  persist(word(0), 8, {"test.persist"});
  seen_.clear();
  sim_->operation_boundary("op");
  EXPECT_EQ(states({0}), (States{{3}}));
}

TEST_F(CrashSim, SiteKeys) {
  EXPECT_EQ(pm::Site("fastfair.split.publish").key(), "fastfair.split.publish");
  const pm::Site here;
  const int line = __LINE__ - 1;
  EXPECT_EQ(here.key(), "pm_crashsim_test.cc:" + std::to_string(line));
  start();
  store(word(0), uint64_t{1});
  persist(word(0), 8);
  const int pline = __LINE__ - 1;
  const auto& sites = sim_->sites();
  ASSERT_EQ(sites.count("pm_crashsim_test.cc:" + std::to_string(pline)), 1u);
  EXPECT_EQ(sites.at("pm_crashsim_test.cc:" + std::to_string(pline)).flushes, 1u);
  EXPECT_EQ(sites.at("pm_crashsim_test.cc:" + std::to_string(pline)).fences, 1u);
}

/// Stores 1 then 2 to the first two words of each of `lines` scratch lines
/// (2 pending stores per line), no flush.
void two_stores_per_line(uint64_t* (*word)(void*, uint64_t), void* self, int lines) {
  for (int l = 0; l < lines; ++l) {
    store(word(self, 64 * l), uint64_t{1});
    store(word(self, 64 * l + 8), uint64_t{2});
  }
}

/// The prefix (0, 1 or 2) line `l` holds in image `s` after
/// two_stores_per_line; -1 for a state no prefix gives.
int prefix_of(const Seen& s, int l) {
  uint64_t a, b;
  std::memcpy(&a, s.scratch.data() + 64 * l, 8);
  std::memcpy(&b, s.scratch.data() + 64 * l + 8, 8);
  if (a == 0 && b == 0) return 0;
  if (a == 1 && b == 0) return 1;
  if (a == 1 && b == 2) return 2;
  return -1;
}

uint64_t* word_of(void* self, uint64_t off) {
  return reinterpret_cast<uint64_t*>(static_cast<Pool*>(self)->base() + kScratch + off);
}

TEST_F(CrashSim, BeyondTheBudgetStructuredFamiliesFirst) {
  Options o;
  o.budget = 20;  // 4 lines x 2 stores: 3^4 = 81 combinations > 20
  start(o);
  two_stores_per_line(word_of, pool_.get(), 4);
  sim_->operation_boundary("op");
  // none + all + 4 lines x 2 prefixes alone + 6 full pairs = 16, then the
  // covering array and random choices up to the budget.
  ASSERT_EQ(seen_.size(), 20u);
  EXPECT_EQ(seen_[0].point.image_space, 81u);
  std::set<std::vector<int>> choices;
  for (const Seen& s : seen_) {
    std::vector<int> c;
    for (int l = 0; l < 4; ++l) c.push_back(prefix_of(s, l));
    for (int p : c) ASSERT_GE(p, 0);
    EXPECT_TRUE(choices.insert(c).second) << "duplicate image " << s.choice;
  }
  EXPECT_EQ(choices.count({0, 0, 0, 0}), 1u);
  EXPECT_EQ(choices.count({2, 2, 2, 2}), 1u);
  for (int l = 0; l < 4; ++l) {
    for (int k = 1; k <= 2; ++k) {
      std::vector<int> c(4, 0);
      c[l] = k;
      EXPECT_EQ(choices.count(c), 1u) << "line " << l << " alone at " << k;
    }
    for (int m = l + 1; m < 4; ++m) {
      std::vector<int> c(4, 0);
      c[l] = c[m] = 2;
      EXPECT_EQ(choices.count(c), 1u) << "lines " << l << " and " << m << " full";
    }
  }
  // The first 16 images are the structured families, in order.
  EXPECT_EQ(seen_[0].choice.find("1/2"), std::string::npos);
  EXPECT_EQ(sim_->stats().images, 20u);
}

TEST_F(CrashSim, BeyondTheBudgetEveryPairOfPrefixesIsCovered) {
  Options o;
  o.budget = 60;  // 6 lines x 2 stores: 3^6 = 729 > 60
  start(o);
  two_stores_per_line(word_of, pool_.get(), 6);
  sim_->operation_boundary("op");
  ASSERT_EQ(seen_.size(), 60u);
  std::set<std::vector<int>> choices;
  for (const Seen& s : seen_) {
    std::vector<int> c;
    for (int l = 0; l < 6; ++l) c.push_back(prefix_of(s, l));
    EXPECT_TRUE(choices.insert(c).second);
  }
  // Strength 2: every pair of lines takes every pair of prefixes somewhere.
  for (int i = 0; i < 6; ++i) {
    for (int j = i + 1; j < 6; ++j) {
      for (int a = 0; a <= 2; ++a) {
        for (int b = 0; b <= 2; ++b) {
          bool found = false;
          for (const auto& c : choices) found = found || (c[i] == a && c[j] == b);
          EXPECT_TRUE(found) << "lines " << i << "," << j << " prefixes " << a << "," << b;
        }
      }
    }
  }
}

TEST_F(CrashSim, SamplingIsSeeded) {
  auto run = [this](uint64_t seed) {
    Options o;
    o.budget = 40;
    o.seed = seed;
    start(o);
    two_stores_per_line(word_of, pool_.get(), 6);
    sim_->operation_boundary("op");
    std::vector<std::string> out;
    for (const Seen& s : seen_) out.push_back(s.choice);
    sim_.reset();
    pool_.reset();
    std::remove(tp_.path().c_str());
    seen_.clear();
    return out;
  };
  const auto a = run(1), b = run(1), c = run(2);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST_F(CrashSim, VisitorCanStopACrashPoint) {
  start();
  sim_->set_visitor([this](const CrashPoint&, const Image&) {
    seen_.emplace_back();
    return false;
  });
  two_stores_per_line(word_of, pool_.get(), 2);
  sim_->operation_boundary("op");
  EXPECT_EQ(seen_.size(), 1u);
  EXPECT_EQ(sim_->stats().images, 1u);
}

TEST_F(CrashSim, EadrImagesArePrefixesOfTheGlobalStoreOrder) {
  Options o;
  o.profile = Profile::kEadr;
  start(o);
  store(word(0), uint64_t{1});   // A, line 0
  store(word(64), uint64_t{2});  // B, line 1
  store(word(8), uint64_t{3});   // C, line 0
  sim_->operation_boundary("op");
  // {}, {A}, {A,B}, {A,B,C}: never B without A (ADR would allow it).
  EXPECT_EQ(states({0, 64, 8}), (States{{0, 0, 0}, {1, 0, 0}, {1, 2, 0}, {1, 2, 3}}));
  EXPECT_EQ(seen_.size(), 4u);
  EXPECT_EQ(seen_[0].point.image_space, 4u);
  // Caches are persistent: after the crash point every store is durable.
  seen_.clear();
  sim_->operation_boundary("op2");
  ASSERT_EQ(seen_.size(), 1u);
  EXPECT_EQ(word_in(0, 8), 3u);
}

TEST_F(CrashSim, EadrBeyondTheBudgetKeepsBothEnds) {
  Options o;
  o.profile = Profile::kEadr;
  o.budget = 4;
  start(o);
  for (uint64_t i = 0; i < 10; ++i) store(word(8 * i), i + 1);
  sim_->operation_boundary("op");
  ASSERT_EQ(seen_.size(), 4u);
  // Prefixes 0, 3, 6, 10 of the 10 stores: count the nonzero words.
  std::vector<int> lengths;
  for (const Seen& s : seen_) {
    int k = 0;
    for (uint64_t i = 0; i < 10; ++i) {
      uint64_t v;
      std::memcpy(&v, s.scratch.data() + 8 * i, 8);
      k += v != 0;
    }
    lengths.push_back(k);
  }
  EXPECT_EQ(lengths, (std::vector<int>{0, 3, 6, 10}));
  EXPECT_NE(seen_.back().choice.find("10 of 10"), std::string::npos);
}

TEST_F(CrashSim, ParseProfile) {
  Profile p = Profile::kAdr;
  ASSERT_TRUE(parse_profile("eadr", &p).ok());
  EXPECT_EQ(p, Profile::kEadr);
  EXPECT_EQ(profile_name(p), "eadr");
  ASSERT_TRUE(parse_profile("adr", &p).ok());
  EXPECT_EQ(p, Profile::kAdr);
  const Status s = parse_profile("ADR2", &p);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("adr, eadr"), std::string::npos);
}

TEST_F(CrashSim, LintStoreNotDurableAtReturn) {
  start();
  store(word(0), uint64_t{1});
  const int line = __LINE__ - 1;
  sim_->operation_boundary("op");
  const auto& lint = sim_->lint().not_durable_at_return;
  ASSERT_EQ(lint.size(), 1u);
  EXPECT_EQ(lint.begin()->first, "pm_crashsim_test.cc:" + std::to_string(line));
  EXPECT_EQ(lint.begin()->second, 1u);
}

TEST_F(CrashSim, LintFlushWithoutFence) {
  start();
  store(word(0), uint64_t{1});
  flush(word(0), 8, {"t.flush"});
  sim_->operation_boundary("op");
  EXPECT_EQ(sim_->lint().flush_without_fence.at("t.flush"), 1u);
  EXPECT_TRUE(sim_->lint().redundant_flush.empty());
}

TEST_F(CrashSim, LintRedundantFlushAndFence) {
  start();
  store(word(0), uint64_t{1});
  persist(word(0), 8, {"t.first"});
  persist(word(0), 8, {"t.again"});  // nothing new to make durable
  fence({"t.lonely"});               // no flush before it
  sim_->operation_boundary("op");
  const LintReport& lint = sim_->lint();
  EXPECT_EQ(lint.redundant_flush.count("t.first"), 0u);
  EXPECT_EQ(lint.redundant_fence.count("t.first"), 0u);
  EXPECT_EQ(lint.redundant_flush.at("t.again"), 1u);
  EXPECT_EQ(lint.redundant_fence.at("t.again"), 1u);
  EXPECT_EQ(lint.redundant_fence.at("t.lonely"), 1u);
  EXPECT_TRUE(lint.not_durable_at_return.empty());
  EXPECT_TRUE(lint.flush_without_fence.empty());
}

TEST_F(CrashSim, CrashPointsOffStillKeepsTheBooks) {
  start();
  sim_->set_crash_points(false);
  store(word(0), uint64_t{1});
  persist(word(0), 8);
  store(word(8), uint64_t{2});
  fence({"t.lonely"});
  sim_->operation_boundary("setup");
  EXPECT_TRUE(seen_.empty());
  EXPECT_EQ(sim_->stats().crash_points, 0u);
  EXPECT_TRUE(sim_->lint().redundant_fence.empty());  // lint only while on
  sim_->set_crash_points(true);
  sim_->operation_boundary("op");
  EXPECT_EQ(states({0, 8}), (States{{1, 0}, {1, 2}}));
  EXPECT_EQ(sim_->stats().crash_points, 1u);
}

TEST_F(CrashSim, MakeAllDurable) {
  start();
  two_stores_per_line(word_of, pool_.get(), 3);
  flush(word(0), 8);
  sim_->make_all_durable();
  fence();  // nothing left to commit
  seen_.clear();
  sim_->operation_boundary("op");
  ASSERT_EQ(seen_.size(), 1u);
  EXPECT_EQ(prefix_of(seen_[0], 2), 2);
}

TEST_F(CrashSim, FlushIsCommittedOnlyByTheSameThreadsFence) {
  start();
  std::thread t1([&] {
    store(word(0), uint64_t{4});
    flush(word(0), 8);
  });
  t1.join();
  fence();  // another thread's fence: does not order t1's flush
  seen_.clear();
  sim_->operation_boundary("op");
  EXPECT_EQ(states({0}), (States{{0}, {4}}));
  EXPECT_EQ(sim_->lint().flush_without_fence.size(), 0u);  // not this thread's flush
}

TEST_F(CrashSim, ChildOfAForkCanDetach) {
  start();
  ASSERT_EQ(Simulator::attach(pool_.get(), Options(), &sim_).code(), Code::kBusy);
  std::unique_ptr<Simulator> second;
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    Simulator::detach_after_fork();
    _exit(Simulator::attach(pool_.get(), Options(), &second).ok() ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  // The parent's simulator is still attached.
  EXPECT_EQ(Simulator::attach(pool_.get(), Options(), &second).code(), Code::kBusy);
}

TEST_F(CrashSim, PoolAndAllocatorWriteOnlyThroughPmHelpers) {
  start();
  // Allocations assign chunks (a persisted class byte): every write the
  // allocator and the pool make must be seen by the simulator.
  std::vector<uint64_t> blocks;
  for (uint32_t size : {64u, 256u, 4096u, 64u}) {
    uint64_t off = 0;
    ASSERT_TRUE(pool_->allocator().allocate(size, &off).ok());
    blocks.push_back(off);
    sim_->operation_boundary("allocate");
  }
  pool_->set_root(blocks[0]);
  sim_->operation_boundary("set_root");
  for (uint64_t off : blocks) pool_->allocator().free(off);
  sim_->operation_boundary("free");
  EXPECT_EQ(sim_->stats().uninstrumented_writes, 0u);
  EXPECT_GT(sim_->stats().crash_points, 6u);
  // The root NAW: images with the old and the new root, nothing else.
  std::set<uint64_t> roots;
  sim_->set_visitor([&](const CrashPoint&, const Image& img) {
    uint64_t r;
    std::memcpy(&r, img.bytes->data() + offsetof(PoolHeader, root), 8);
    roots.insert(r);
    return true;
  });
  pool_->set_root(blocks[1]);
  EXPECT_EQ(roots, (std::set<uint64_t>{blocks[0], blocks[1]}));
}

TEST_F(CrashSim, AttachErrors) {
  std::unique_ptr<Simulator> sim;
  // Not a crash-sim pool.
  TempPool other("emulated");
  std::unique_ptr<Pool> emulated;
  ASSERT_TRUE(Pool::create(other.path(), kSize, "crashsim", Mode::kEmulated, &emulated).ok());
  EXPECT_EQ(Simulator::attach(emulated.get(), Options(), &sim).code(), Code::kInvalidArgument);
  start();
  // A second simulator.
  EXPECT_EQ(Simulator::attach(pool_.get(), Options(), &sim).code(), Code::kBusy);
  Options zero;
  zero.budget = 0;
  sim_.reset();
  EXPECT_EQ(Simulator::attach(pool_.get(), zero, &sim).code(), Code::kInvalidArgument);
  EXPECT_EQ(sim, nullptr);
}

}  // namespace
}  // namespace nvindex::pm::crashsim
