// The crash lab for PMwCAS itself (src/pm/pmwcas.h; issue 13): a script of
// multi-word operations, succeeding and failing, runs on a pool followed by
// the crash simulator; at every fence of the protocol and every operation's
// return, every image a power failure could leave (crash/images.h, ADR) is
// copied into a second pool, recovered there (Pmwcas::open + recover) and
// checked: the target words hold either every old value or every new value
// of the operation in flight (all-or-nothing), recovery a second time finds
// nothing to do, and every descriptor is free. The ablation tests drop the
// flush and fence of one protocol site at a time and require the same check
// to catch it. The check runs inside the crash-point hook, where the
// simulator ignores PM writes, so no fork per image is needed.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "crash/images.h"
#include "nvindex/pm/allocator.h"
#include "nvindex/pm/pool.h"
#include "pm/crashsim.h"
#include "pm/pmwcas.h"
#include "pm_test_util.h"

namespace nvindex::crash {
namespace {

namespace cs = pm::crashsim;
using pm::Pmwcas;

/// Target words, each on its own 64 B line (so that a crash can keep one
/// word's line and lose another's).
constexpr int kWords = 6;
/// Descriptors in the pool: few, so that descriptors are reused (by epochs)
/// within the script.
constexpr uint32_t kDescriptors = 16;
/// Pool size, bytes (the simulator keeps three copies of it).
constexpr uint64_t kPoolBytes = 4ull << 20;

/// One scripted operation: words (indexes into the target words), the old
/// values it expects and the new values it writes.
struct ScriptOp {
  std::vector<int> words;
  std::vector<uint64_t> old_values;
  std::vector<uint64_t> new_values;
};

/// `n` operations over kWords words, seeded: 1 to 4 distinct words each,
/// one in five with a stale old value (so it fails).
std::vector<ScriptOp> make_script(int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::array<uint64_t, kWords> model{};
  for (int i = 0; i < kWords; ++i) model[i] = 100 + i;
  std::vector<ScriptOp> out;
  for (int k = 0; k < n; ++k) {
    ScriptOp op;
    const int m = 1 + static_cast<int>(rng() % 4);
    std::array<int, kWords> perm{};
    for (int i = 0; i < kWords; ++i) perm[i] = i;
    std::shuffle(perm.begin(), perm.end(), rng);
    const bool stale = rng() % 5 == 0;
    for (int j = 0; j < m; ++j) {
      const int w = perm[j];
      op.words.push_back(w);
      op.old_values.push_back(stale && j == m - 1 ? model[w] + 1 : model[w]);
      op.new_values.push_back(1000 * (k + 1) + w);
    }
    if (!stale) {
      for (int j = 0; j < m; ++j) model[op.words[j]] = op.new_values[j];
    }
    out.push_back(std::move(op));
  }
  return out;
}

/// The lab: a crash-sim pool with a descriptor pool and the target words,
/// a DRAM pool of the same size to recover images in, and the model of the
/// words before and after the operation in flight.
class PmwcasCrashLab : public ::testing::Test {
 protected:
  void SetUp() override { pm::configure(pm::PersistConfig{}); }
  void TearDown() override {
    sim_.reset();
    mw_.reset();
    pool_.reset();
    check_.reset();
    pm::configure(pm::PersistConfig{});
  }

  /// Creates the pools, the descriptors and the words (all durable), and
  /// installs the image check as the crash-point hook.
  void start() {
    ASSERT_TRUE(pm::Pool::create_anonymous(kPoolBytes, "pmwcas-crash", &check_).ok());
    ASSERT_TRUE(
        pm::Pool::create(tp_.path(), kPoolBytes, "pmwcas-crash", pm::Mode::kCrashSim, &pool_).ok());
    ASSERT_TRUE(Pmwcas::create(pool_.get(), kDescriptors, &directory_, &mw_).ok());
    ASSERT_TRUE(pool_->allocator().allocate(64 * kWords, &words_).ok());
    for (int i = 0; i < kWords; ++i) {
      word(i)->store(100 + i);
      before_[i] = after_[i] = 100 + i;
    }
    ASSERT_TRUE(cs::Simulator::attach(pool_.get(), cs::Options(), &sim_).ok());
    ImageOptions io;
    io.budget = 64;
    ASSERT_TRUE(set_image_visitor(sim_.get(), io, [this](const cs::CrashPoint&, const Image& img) {
                  check_image(*img.bytes, img.choice);
                  return true;
                }).ok());
  }

  std::atomic<uint64_t>* word(int i) {
    return pool_->ptr<std::atomic<uint64_t>>(words_ + 64 * static_cast<uint64_t>(i));
  }

  /// Recovers `bytes` in the check pool and checks it (file comment).
  void check_image(const std::vector<char>& bytes, const std::string& choice) {
    ++images_;
    std::memcpy(check_->base(), bytes.data(), bytes.size());
    std::unique_ptr<Pmwcas> mw;
    std::string what;
    if (Status s = Pmwcas::open(check_.get(), directory_, &mw); !s.ok()) {
      what = "open: " + s.ToString();
    } else if (Status r = mw->recover(nullptr); !r.ok()) {
      what = "recover: " + r.ToString();
    } else {
      std::array<uint64_t, kWords> got{};
      bool is_before = true, is_after = true;
      // After recovery no word may hold a descriptor or word-entry pointer
      // (read() would follow it); a dirty bit is allowed (file comment of
      // pmwcas.h) and stripped.
      bool pointer = false;
      for (int i = 0; i < kWords; ++i) {
        const uint64_t v = check_->ptr<std::atomic<uint64_t>>(words_ + 64 * uint64_t(i))->load();
        pointer = pointer || (v & (pm::kPmwcasDescriptor | pm::kPmwcasRdcss)) != 0;
        got[i] = v & ~pm::kPmwcasDirty;
        is_before = is_before && got[i] == before_[i];
        is_after = is_after && got[i] == after_[i];
      }
      if (pointer) is_before = is_after = false;
      Pmwcas::RecoveryStats again;
      if (!is_before && !is_after) {
        what = pointer ? "a word still holds a pointer:" : "words";
        for (int i = 0; i < kWords; ++i) {
          what += " " + std::to_string(got[i]) + "(" + std::to_string(before_[i]) + "/" +
                  std::to_string(after_[i]) + ")";
        }
      } else if (Status r2 = mw->recover(&again);
                 !r2.ok() || again.rolled_forward + again.rolled_back != 0) {
        what = "second recovery was not a no-op";
      } else {
        std::vector<std::unique_ptr<Pmwcas::Op>> ops(mw->descriptors());
        for (auto& op : ops) {
          if (!mw->begin(&op).ok()) {
            what = "a descriptor is not free after recovery";
            break;
          }
        }
      }
    }
    if (!what.empty() && failures_++ == 0) {
      first_failure_ = "op " + std::to_string(op_) + ", image " + choice + ": " + what;
    }
  }

  /// Runs `script`, one operation boundary after each operation, asserting
  /// each operation's result; stops after the operation during which an
  /// image failed when stop_at_failure_.
  void run(const std::vector<ScriptOp>& script) {
    for (size_t k = 0; k < script.size(); ++k) {
      const ScriptOp& s = script[k];
      op_ = static_cast<int>(k);
      bool fresh = true;
      for (size_t j = 0; j < s.words.size(); ++j)
        fresh = fresh && s.old_values[j] == after_[s.words[j]];
      before_ = after_;
      if (fresh) {
        for (size_t j = 0; j < s.words.size(); ++j) after_[s.words[j]] = s.new_values[j];
      }
      // begin() outside the guard: it reclaims retired descriptors then.
      std::unique_ptr<Pmwcas::Op> op;
      ASSERT_TRUE(mw_->begin(&op).ok()) << k;
      EpochManager::Guard g(mw_->epoch());
      for (size_t j = 0; j < s.words.size(); ++j) {
        ASSERT_TRUE(op->add(word(s.words[j]), s.old_values[j], s.new_values[j]));
      }
      ASSERT_EQ(op->execute(), fresh) << k;
      sim_->operation_boundary("pmwcas");
      before_ = after_;
      if (stop_at_failure_ && failures_ > 0) return;
    }
  }

  pm::testing::TempPool tp_;
  std::unique_ptr<pm::Pool> pool_, check_;
  std::unique_ptr<Pmwcas> mw_;
  std::unique_ptr<cs::Simulator> sim_;
  uint64_t directory_ = 0;
  uint64_t words_ = 0;
  std::array<uint64_t, kWords> before_{}, after_{};
  int op_ = -1;
  bool stop_at_failure_ = false;
  uint64_t images_ = 0;
  uint64_t failures_ = 0;
  std::string first_failure_;
};

TEST_F(PmwcasCrashLab, EveryImageAtEveryFenceIsAllOrNothing) {
  start();
  run(make_script(30, 7));
  EXPECT_EQ(failures_, 0u) << first_failure_;
  EXPECT_GE(images_, 10000u);
  EXPECT_EQ(sim_->stats().uninstrumented_writes, 0u)
      << (sim_->stats().uninstrumented_examples.empty() ? ""
                                                        : sim_->stats().uninstrumented_examples[0]);
  // Every protocol site was reached (so every fence was a crash point).
  for (const char* site : {"pmwcas.prepare", "pmwcas.dirty", "pmwcas.decide", "pmwcas.complete"}) {
    EXPECT_TRUE(sim_->sites().count(site)) << site;
  }
  std::printf("pmwcas crash lab: %llu images, %llu crash points\n",
              static_cast<unsigned long long>(images_),
              static_cast<unsigned long long>(sim_->stats().crash_points));
}

/// Each protocol site whose flush and fence the protocol needs: dropping
/// them must let some image break all-or-nothing.
class PmwcasAblation : public PmwcasCrashLab, public ::testing::WithParamInterface<const char*> {};

TEST_P(PmwcasAblation, DroppingTheSiteIsCaught) {
  start();
  sim_->ablate(GetParam(), true, true);
  stop_at_failure_ = true;
  run(make_script(60, 11));
  EXPECT_GT(failures_, 0u) << GetParam() << " dropped, " << images_ << " images, none failed";
}

INSTANTIATE_TEST_SUITE_P(Sites, PmwcasAblation,
                         ::testing::Values("pmwcas.prepare", "pmwcas.dirty", "pmwcas.decide",
                                           "pmwcas.complete"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) {
                             if (c == '.') c = '_';
                           }
                           return n;
                         });

}  // namespace
}  // namespace nvindex::crash
