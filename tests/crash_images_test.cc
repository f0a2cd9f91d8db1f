// Crash images (src/crash/images.h) built from what the PM layer's recorder
// keeps: every combination of per-line prefixes within the budget (never a
// later store of a line without the earlier ones), a single image when
// nothing is pending, sampling beyond the budget (structured families first,
// then a covering array: every pair of lines takes every pair of prefixes),
// seeded sampling, a visitor that stops a crash point, the eADR profile
// (prefixes of the global store order, both ends kept beyond the budget),
// the pool's root NAW, and the errors of set_image_visitor. Every test runs
// on a small file pool in /dev/shm mapped in crash-sim mode and writes into
// its unused heap area.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "crash/images.h"
#include "crashsim_test_util.h"
#include "nvindex/pm/allocator.h"
#include "nvindex/pm/persist.h"
#include "nvindex/pm/pool.h"
#include "pm/crashsim.h"

namespace nvindex::crash {
namespace {

namespace cs = pm::crashsim;
using pm::copy;
using pm::fence;
using pm::flush;
using pm::move;
using pm::persist;
using pm::store;
using pm::testing::kScratch;
using pm::testing::kSimPoolSize;

/// One image as the visitor saw it: the crash point and the scratch bytes.
struct Seen {
  cs::CrashPoint point;
  std::vector<char> scratch;  ///< 8 lines from kScratch
  std::string choice;
  size_t bytes = 0;  ///< size of the whole image
};

using States = std::set<std::vector<uint64_t>>;

class CrashImages : public pm::testing::CrashSimFixture {
 protected:
  /// Creates the pool, attaches a simulator and collects every image.
  void start(cs::Profile profile = cs::Profile::kAdr, ImageOptions images = ImageOptions()) {
    cs::Options o;
    o.profile = profile;
    attach(o);
    ASSERT_TRUE(
        set_image_visitor(sim_.get(), images, [this](const cs::CrashPoint& cp, const Image& img) {
          Seen s;
          s.point = cp;
          s.scratch.assign(img.bytes->data() + kScratch, img.bytes->data() + kScratch + 512);
          s.choice = img.choice;
          s.bytes = img.bytes->size();
          seen_.push_back(std::move(s));
          return true;
        }).ok());
  }
  /// The 8-byte word at `off` of image i's scratch.
  uint64_t word_in(size_t i, uint64_t off) const {
    uint64_t v;
    std::memcpy(&v, seen_[i].scratch.data() + off, 8);
    return v;
  }
  /// The distinct values of the words at `offs` over every image seen.
  States states(const std::vector<uint64_t>& offs) const {
    States out;
    for (size_t i = 0; i < seen_.size(); ++i) {
      std::vector<uint64_t> v;
      for (uint64_t o : offs) v.push_back(word_in(i, o));
      out.insert(v);
    }
    return out;
  }
  /// The prefix (0, 1 or 2) line `l` holds in image `s` after
  /// two_stores_per_line; -1 for a state no prefix gives.
  static int prefix_of(const Seen& s, int l) {
    uint64_t a, b;
    std::memcpy(&a, s.scratch.data() + 64 * l, 8);
    std::memcpy(&b, s.scratch.data() + 64 * l + 8, 8);
    if (a == 0 && b == 0) return 0;
    if (a == 1 && b == 0) return 1;
    if (a == 1 && b == 2) return 2;
    return -1;
  }
  /// Every image's prefix per line over `lines` lines, each a valid prefix.
  std::vector<std::vector<int>> choices(int lines) const {
    std::vector<std::vector<int>> out;
    for (const Seen& s : seen_) {
      std::vector<int> c;
      for (int l = 0; l < lines; ++l) c.push_back(prefix_of(s, l));
      for (int p : c) EXPECT_GE(p, 0) << s.choice;
      out.push_back(c);
    }
    return out;
  }

  std::vector<Seen> seen_;
};

TEST_F(CrashImages, StoreWithoutFlushGivesImagesWithAndWithout) {
  start();
  store(word(0), uint64_t{7});
  sim_->operation_boundary("op");
  ASSERT_EQ(seen_.size(), 2u);
  EXPECT_EQ(states({0}), (States{{0}, {7}}));
  EXPECT_FALSE(seen_[0].point.at_fence);
  EXPECT_EQ(seen_[0].point.site, "op");
  EXPECT_EQ(seen_[0].bytes, kSimPoolSize);  // whole pool, every image
  char line[32];
  std::snprintf(line, sizeof(line), "line 0x%llx: ", static_cast<unsigned long long>(kScratch));
  EXPECT_EQ(seen_[0].choice, std::string(line) + "0/1");
  EXPECT_EQ(seen_[1].choice, std::string(line) + "1/1");
  EXPECT_EQ(sim_->stats().images, 2u);
}

TEST_F(CrashImages, TwoStoresToOneLineArePrefixes) {
  start();
  store(word(0), uint64_t{1});
  store(word(8), uint64_t{2});
  sim_->operation_boundary("op");
  // Prefixes 0, 1, 2: never the second store without the first.
  EXPECT_EQ(states({0, 8}), (States{{0, 0}, {1, 0}, {1, 2}}));
  EXPECT_EQ(seen_.size(), 3u);
}

TEST_F(CrashImages, TwoLinesAreEnumeratedFully) {
  start();
  store(word(0), uint64_t{1});
  store(word(64), uint64_t{2});
  sim_->operation_boundary("op");
  EXPECT_EQ(states({0, 64}), (States{{0, 0}, {1, 0}, {0, 2}, {1, 2}}));
  EXPECT_EQ(seen_.size(), 4u);
}

TEST_F(CrashImages, NothingPendingIsOneImageOfTheDurableBytes) {
  start();
  store(word(0), uint64_t{5});
  persist(word(0), 8);
  seen_.clear();
  sim_->operation_boundary("op");
  ASSERT_EQ(seen_.size(), 1u);
  EXPECT_EQ(word_in(0, 0), 5u);
  EXPECT_EQ(seen_[0].choice, "no pending stores");
}

TEST_F(CrashImages, BeforeAFenceTheFlushedStoreMayBeLost) {
  start();
  store(word(0), uint64_t{5});
  flush(word(0), 8);
  fence({"test.fence"});
  ASSERT_EQ(seen_.size(), 2u);
  EXPECT_TRUE(seen_[0].point.at_fence);
  EXPECT_EQ(states({0}), (States{{0}, {5}}));
}

TEST_F(CrashImages, ImagesAreRestoredBetweenCrashPoints) {
  start();
  store(word(0), uint64_t{1});
  store(word(64), uint64_t{2});
  sim_->operation_boundary("op");
  seen_.clear();
  // Nothing new is pending at the next point: its one image holds no store
  // an image of the previous point applied.
  sim_->make_all_durable();
  store(word(128), uint64_t{3});
  sim_->operation_boundary("op2");
  EXPECT_EQ(states({0, 64, 128}), (States{{1, 2, 0}, {1, 2, 3}}));
}

TEST_F(CrashImages, CopyPrefixesNeverHoldALaterChunkWithoutTheEarlierOnes) {
  start();
  // 20 bytes from offset 4: chunks [4,8) [8,16) [16,24) in one line.
  std::vector<char> src(20, 'a');
  copy(at(4), src.data(), src.size());
  sim_->operation_boundary("op");
  ASSERT_EQ(seen_.size(), 4u);  // prefixes 0..3
  for (const Seen& s : seen_) {
    const bool c1 = s.scratch[4] == 'a', c2 = s.scratch[8] == 'a', c3 = s.scratch[16] == 'a';
    EXPECT_TRUE(!c2 || c1);
    EXPECT_TRUE(!c3 || c2);
  }
}

TEST_F(CrashImages, BeyondTheBudgetStructuredFamiliesFirst) {
  ImageOptions io;
  io.budget = 20;  // 4 lines x 2 stores: 3^4 = 81 combinations > 20
  start(cs::Profile::kAdr, io);
  two_stores_per_line(4);
  sim_->operation_boundary("op");
  // none + all + 4 lines x 2 prefixes alone + 6 full pairs = 16, then the
  // covering array and random choices up to the budget.
  ASSERT_EQ(seen_.size(), 20u);
  EXPECT_EQ(seen_[0].point.image_space, 81u);
  std::set<std::vector<int>> distinct;
  for (const std::vector<int>& c : choices(4)) {
    EXPECT_TRUE(distinct.insert(c).second) << "duplicate image";
  }
  EXPECT_EQ(distinct.count({0, 0, 0, 0}), 1u);
  EXPECT_EQ(distinct.count({2, 2, 2, 2}), 1u);
  for (int l = 0; l < 4; ++l) {
    for (int k = 1; k <= 2; ++k) {
      std::vector<int> c(4, 0);
      c[l] = k;
      EXPECT_EQ(distinct.count(c), 1u) << "line " << l << " alone at " << k;
    }
    for (int m = l + 1; m < 4; ++m) {
      std::vector<int> c(4, 0);
      c[l] = c[m] = 2;
      EXPECT_EQ(distinct.count(c), 1u) << "lines " << l << " and " << m << " full";
    }
  }
  // The first 16 images are the structured families, in order.
  EXPECT_EQ(seen_[0].choice.find("1/2"), std::string::npos);
  EXPECT_EQ(sim_->stats().images, 20u);
}

TEST_F(CrashImages, BeyondTheBudgetEveryPairOfPrefixesIsCovered) {
  ImageOptions io;
  io.budget = 60;  // 6 lines x 2 stores: 3^6 = 729 > 60
  start(cs::Profile::kAdr, io);
  two_stores_per_line(6);
  sim_->operation_boundary("op");
  ASSERT_EQ(seen_.size(), 60u);
  std::set<std::vector<int>> distinct;
  for (const std::vector<int>& c : choices(6)) EXPECT_TRUE(distinct.insert(c).second);
  // Strength 2: every pair of lines takes every pair of prefixes somewhere.
  for (int i = 0; i < 6; ++i) {
    for (int j = i + 1; j < 6; ++j) {
      for (int a = 0; a <= 2; ++a) {
        for (int b = 0; b <= 2; ++b) {
          bool found = false;
          for (const auto& c : distinct) found = found || (c[i] == a && c[j] == b);
          EXPECT_TRUE(found) << "lines " << i << "," << j << " prefixes " << a << "," << b;
        }
      }
    }
  }
}

TEST_F(CrashImages, SamplingIsSeeded) {
  auto run = [this](uint64_t seed) {
    ImageOptions io;
    io.budget = 40;
    io.seed = seed;
    start(cs::Profile::kAdr, io);
    two_stores_per_line(6);
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

TEST_F(CrashImages, VisitorCanStopACrashPoint) {
  start();
  ASSERT_TRUE(
      set_image_visitor(sim_.get(), ImageOptions(), [this](const cs::CrashPoint&, const Image&) {
        seen_.emplace_back();
        return false;
      }).ok());
  two_stores_per_line(2);
  sim_->operation_boundary("op");
  EXPECT_EQ(seen_.size(), 1u);
  EXPECT_EQ(sim_->stats().images, 1u);
}

TEST_F(CrashImages, NullVisitorOnlyCountsCrashPoints) {
  start();
  ASSERT_TRUE(set_image_visitor(sim_.get(), ImageOptions(), nullptr).ok());
  store(word(0), uint64_t{1});
  persist(word(0), 8);
  sim_->operation_boundary("op");
  EXPECT_EQ(sim_->stats().crash_points, 2u);
  EXPECT_EQ(sim_->stats().images, 0u);
  EXPECT_TRUE(seen_.empty());
}

TEST_F(CrashImages, EadrImagesArePrefixesOfTheGlobalStoreOrder) {
  start(cs::Profile::kEadr);
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

TEST_F(CrashImages, EadrBeyondTheBudgetKeepsBothEnds) {
  ImageOptions io;
  io.budget = 4;
  start(cs::Profile::kEadr, io);
  for (uint64_t i = 0; i < 10; ++i) store(word(8 * i), i + 1);
  sim_->operation_boundary("op");
  ASSERT_EQ(seen_.size(), 4u);
  // Prefixes 0, 3, 6, 10 of the 10 stores: count the nonzero words.
  std::vector<int> lengths;
  for (size_t s = 0; s < seen_.size(); ++s) {
    int k = 0;
    for (uint64_t i = 0; i < 10; ++i) k += word_in(s, 8 * i) != 0;
    lengths.push_back(k);
  }
  EXPECT_EQ(lengths, (std::vector<int>{0, 3, 6, 10}));
  EXPECT_NE(seen_.back().choice.find("10 of 10"), std::string::npos);
}

TEST_F(CrashImages, RootNawGivesTheOldOrTheNewRoot) {
  start();
  std::vector<uint64_t> blocks;
  for (uint32_t size : {64u, 256u}) {
    uint64_t off = 0;
    ASSERT_TRUE(pool_->allocator().allocate(size, &off).ok());
    blocks.push_back(off);
  }
  pool_->set_root(blocks[0]);
  sim_->operation_boundary("set_root");
  std::set<uint64_t> roots;
  ASSERT_TRUE(
      set_image_visitor(sim_.get(), ImageOptions(), [&](const cs::CrashPoint&, const Image& img) {
        uint64_t r;
        std::memcpy(&r, img.bytes->data() + offsetof(pm::PoolHeader, root), 8);
        roots.insert(r);
        return true;
      }).ok());
  pool_->set_root(blocks[1]);
  EXPECT_EQ(roots, (std::set<uint64_t>{blocks[0], blocks[1]}));
}

TEST_F(CrashImages, SetImageVisitorErrors) {
  start();
  ImageOptions zero;
  zero.budget = 0;
  const Status s = set_image_visitor(sim_.get(), zero, nullptr);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("budget"), std::string::npos);
  EXPECT_EQ(set_image_visitor(nullptr, ImageOptions(), nullptr).code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace nvindex::crash
