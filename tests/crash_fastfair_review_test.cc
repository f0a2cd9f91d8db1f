// fastfair review tests (adversarial): a fork + SIGKILL crash torture with
// mixed insert/update/remove at node sizes 128 and 256 (splits, merges, root
// growth and collapse, and crashes during recovery itself), a 4-thread SMO
// stress on a small shared key range with exact checks of exclusively owned
// keys through lookups, scans and find_last_less_than, and damaged pools that
// must give Corruption (never a crash or a hang), from recovery and verify().
// The kills go through the crash lab's fork-and-SIGKILL helper (crash/kill.h),
// hence the crash_ prefix.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "crash/kill.h"
#include "indexes/fastfair/fastfair.h"
#include "nvindex/index.h"
#include "nvindex/pm/persist.h"
#include "nvindex/pm/pool.h"

namespace nvindex {
namespace {

using fastfair::Entry;
using fastfair::FastFair;
using fastfair::Node;
using Clock = std::chrono::steady_clock;

constexpr uint64_t kPoolBytes = 16ull << 20;

std::string pool_path(const std::string& tag) {
  return "/dev/shm/nvindex_ffrev_" + tag + "_" + std::to_string(getpid()) + ".pool";
}

Status open_ff(const std::string& path, std::unique_ptr<pm::Pool>* pool,
               std::unique_ptr<Index<uint64_t>>* idx) {
  idx->reset();
  pool->reset();
  Status s = pm::Pool::open(path, "fastfair", pm::Mode::kEmulated, pool);
  if (!s.ok()) return s;
  IndexOptions o;
  o.pool = pool->get();
  return make_index<uint64_t>("fastfair", o, idx);
}

void create_ff(const std::string& path, uint32_t node_size, std::unique_ptr<pm::Pool>* pool,
               std::unique_ptr<Index<uint64_t>>* idx) {
  std::remove(path.c_str());
  ASSERT_TRUE(pm::Pool::create(path, kPoolBytes, "fastfair", pm::Mode::kEmulated, pool).ok());
  IndexOptions o;
  o.pool = pool->get();
  o.node_size = node_size;
  ASSERT_TRUE(make_index<uint64_t>("fastfair", o, idx).ok());
}

// ------------------------------------------------------------ crash torture

enum Op : uint8_t { kInsert, kUpdate, kRemove };
struct PlannedOp {
  Op op;
  uint64_t key;
  uint64_t value;
};

/// The op stream of one round: a pure function of (seed, i), so the parent
/// replays what the child did from the number of acknowledged ops alone.
class OpStream {
 public:
  OpStream(uint64_t seed, uint64_t key_space) : rng_(seed), keys_(key_space) {}
  PlannedOp next() {
    const uint64_t r = rng_() % 100;
    PlannedOp p;
    p.op = r < 45 ? kInsert : r < 65 ? kUpdate : kRemove;
    p.key = rng_() % keys_;
    // Values carry the key (high half) and a sequence number; value 0 and
    // repeated values appear too.
    const uint64_t seq = ++seq_;
    p.value = seq % 17 == 0 ? 0 : (p.key << 32 | (seq & 0xffffffffu));
    return p;
  }

 private:
  std::mt19937_64 rng_;
  uint64_t keys_;
  uint64_t seq_ = 0;
};

/// Shared (MAP_SHARED | MAP_ANONYMOUS) between parent and child: survives the
/// child's SIGKILL. acked = number of operations that returned, status[i]
/// = the Code of operation i (written before acked is raised).
struct Shared {
  std::atomic<uint32_t> ready;
  std::atomic<uint64_t> acked;
  uint8_t status[1 << 22];
};

void expect_state(Index<uint64_t>& idx, const std::map<uint64_t, Value>& model, uint64_t key_space,
                  const std::string& where) {
  std::vector<std::pair<uint64_t, Value>> all;
  idx.scan(0, key_space + 10, &all);
  std::vector<std::pair<uint64_t, Value>> want(model.begin(), model.end());
  ASSERT_EQ(all, want) << where;
  VerifyReport rep;
  Status s = idx.verify(&rep);
  ASSERT_TRUE(s.ok()) << where << ": " << s.ToString();
  ASSERT_EQ(rep.keys, model.size()) << where;
}

// Child: open + recover the pool, then run the op stream, acknowledging each
// op after it returns. Never returns.
[[noreturn]] void torture_child(const std::string& path, uint64_t seed, uint64_t key_space,
                                Shared* sh) {
  std::unique_ptr<pm::Pool> pool;
  std::unique_ptr<Index<uint64_t>> idx;
  if (!open_ff(path, &pool, &idx).ok()) _exit(3);
  sh->ready.store(1, std::memory_order_release);
  OpStream ops(seed, key_space);
  for (uint64_t i = 0; i < sizeof(sh->status); ++i) {
    const PlannedOp p = ops.next();
    Status s = p.op == kInsert   ? idx->insert(p.key, p.value)
               : p.op == kUpdate ? idx->update(p.key, p.value)
                                 : idx->remove(p.key);
    sh->status[i] = static_cast<uint8_t>(s.code());
    sh->acked.store(i + 1, std::memory_order_release);
  }
  _exit(0);
}

void crash_torture(uint32_t node_size, uint64_t key_space, double seconds, uint64_t seed) {
  const std::string path = pool_path("torture" + std::to_string(node_size));
  std::unique_ptr<pm::Pool> pool;
  std::unique_ptr<Index<uint64_t>> idx;
  create_ff(path, node_size, &pool, &idx);
  idx.reset();
  pool.reset();
  auto* sh = static_cast<Shared*>(
      mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(sh, MAP_FAILED);
  std::map<uint64_t, Value> model;
  std::mt19937_64 rng(seed);
  const auto t0 = Clock::now();
  unsigned rounds = 0, in_recovery_kills = 0;
  uint64_t total_acked = 0;
  while (std::chrono::duration<double>(Clock::now() - t0).count() < seconds || rounds < 10) {
    ++rounds;
    const uint64_t round_seed = rng();
    sh->ready.store(0);
    sh->acked.store(0);
    const bool kill_early = rng() % 4 == 0;  // possibly during recovery
    crash::KillPlan plan;
    if (!kill_early) {
      plan.ready = [sh] { return sh->ready.load(std::memory_order_acquire) != 0; };
    }
    plan.delay = std::chrono::microseconds(rng() % (kill_early ? 3000 : 4000));
    crash::KillResult end;
    const Status ks =
        crash::fork_and_kill([&] { torture_child(path, round_seed, key_space, sh); }, plan, &end);
    ASSERT_TRUE(ks.ok()) << ks.ToString();
    ASSERT_FALSE(end.hung) << "round " << rounds << ": the child was not ready within 30 s";
    ASSERT_TRUE(end.killed()) << "round " << rounds << ": the child " << end.describe();
    if (sh->ready.load() == 0) ++in_recovery_kills;
    const uint64_t acked = sh->acked.load(std::memory_order_acquire);
    total_acked += acked;
    // Replay the acknowledged ops on the model, checking each status.
    OpStream ops(round_seed, key_space);
    for (uint64_t i = 0; i < acked; ++i) {
      const PlannedOp p = ops.next();
      const auto it = model.find(p.key);
      const bool present = it != model.end();
      Code want;
      if (p.op == kInsert) {
        want = present ? Code::kAlreadyExists : Code::kOk;
        if (!present) model[p.key] = p.value;
      } else if (p.op == kUpdate) {
        want = present ? Code::kOk : Code::kNotFound;
        if (present) it->second = p.value;
      } else {
        want = present ? Code::kOk : Code::kNotFound;
        if (present) model.erase(it);
      }
      ASSERT_EQ(sh->status[i], static_cast<uint8_t>(want))
          << "round " << rounds << " op " << i << " key " << p.key;
    }
    // The in-flight op (it may not have started, or finished unacknowledged).
    const PlannedOp inflight = ops.next();
    Status s = open_ff(path, &pool, &idx);
    ASSERT_TRUE(s.ok()) << "round " << rounds << ": recovery failed: " << s.ToString();
    ASSERT_TRUE(idx->info().recovered);
    const std::optional<Value> got = idx->lookup(inflight.key);
    const auto it = model.find(inflight.key);
    const std::optional<Value> before =
        it == model.end() ? std::nullopt : std::optional<Value>(it->second);
    std::optional<Value> after = before;
    if (inflight.op == kInsert && !before) after = inflight.value;
    if (inflight.op == kUpdate && before) after = inflight.value;
    if (inflight.op == kRemove) after = std::nullopt;
    ASSERT_TRUE(got == before || got == after)
        << "round " << rounds << ": in-flight op " << int(inflight.op) << " on key " << inflight.key
        << " left neither the old nor the new state";
    if (got) {
      model[inflight.key] = *got;
    } else {
      model.erase(inflight.key);
    }
    expect_state(*idx, model, key_space, "after recovery, round " + std::to_string(rounds));
    // The recovered tree keeps working: a burst of ops, then verify again.
    for (int i = 0; i < 64; ++i) {
      const uint64_t k = rng() % key_space;
      if (model.count(k)) {
        ASSERT_TRUE(idx->remove(k).ok());
        model.erase(k);
      } else {
        ASSERT_TRUE(idx->insert(k, k << 32 | 7).ok());
        model[k] = k << 32 | 7;
      }
    }
    expect_state(*idx, model, key_space, "after more ops, round " + std::to_string(rounds));
    if (::testing::Test::HasFatalFailure()) break;
    idx.reset();
    pool.reset();
  }
  std::printf("node %u: %u rounds, %u killed before ready, %llu acked ops, %zu keys at end\n",
              node_size, rounds, in_recovery_kills, static_cast<unsigned long long>(total_acked),
              model.size());
  idx.reset();
  pool.reset();
  munmap(sh, sizeof(Shared));
  std::remove(path.c_str());
}

TEST(FastFairReview, SigkillTortureNode128) { crash_torture(128, 400, 4.0, 1); }
TEST(FastFairReview, SigkillTortureNode256) { crash_torture(256, 1500, 4.0, 2); }

// ------------------------------------------------------------ concurrency

uint64_t tag(uint64_t key, uint64_t seq) {
  return (key * 0x9E3779B1ull) << 32 | (seq & 0xffffffff);
}
bool tagged(uint64_t key, uint64_t v) { return (v >> 32) == ((key * 0x9E3779B1ull) & 0xffffffff); }

// Each thread owns keys == t mod kThreads of a small shared range (so its
// keys share leaves with every other thread's and SMOs race constantly); it
// inserts, updates and removes its own keys and reads everything.
void smo_stress(uint32_t node_size, uint64_t key_space, double seconds, uint64_t seed) {
  constexpr unsigned kThreads = 4;
  std::unique_ptr<pm::Pool> pool;
  ASSERT_TRUE(pm::Pool::create_anonymous(64ull << 20, "fastfair", &pool).ok());
  IndexOptions o;
  o.pool = pool.get();
  o.node_size = node_size;
  o.threads = kThreads;  // threads 1 would promise one calling thread (no locks)
  std::unique_ptr<Index<uint64_t>> idx;
  ASSERT_TRUE(make_index<uint64_t>("fastfair", o, &idx).ok());
  std::vector<std::map<uint64_t, Value>> models(kThreads);
  std::vector<std::string> errors(kThreads);
  std::vector<uint64_t> opcount(kThreads);
  const auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
  auto body = [&](unsigned t) {
    std::mt19937_64 rng(seed * 131 + t);
    std::map<uint64_t, Value>& mine = models[t];
    uint64_t seq = 0;
    auto fail = [&](const std::string& m) {
      if (errors[t].empty()) errors[t] = m;
    };
    auto own_key = [&] { return (rng() % (key_space / kThreads)) * kThreads + t; };
    // Phases alternate grow (mostly inserts) and shrink (mostly removes) so
    // that splits, merges and root growth/collapse all happen.
    for (uint64_t i = 0; errors[t].empty(); ++i) {
      if ((i & 255) == 0 && Clock::now() > deadline) break;
      const bool grow = (i / 4096) % 2 == 0;
      const uint64_t r = rng() % 100;
      if (r < 40) {
        const uint64_t k = own_key();
        const bool present = mine.count(k) > 0;
        const bool ins = grow ? rng() % 4 != 0 : rng() % 4 == 0;
        if (ins) {
          const Value v = tag(k, ++seq);
          Status s = idx->insert(k, v);
          if (s.ok() != !present) fail("insert status wrong for key " + std::to_string(k));
          if (!present) mine[k] = v;
        } else {
          Status s = idx->remove(k);
          if (s.ok() != present) fail("remove status wrong for key " + std::to_string(k));
          mine.erase(k);
        }
        const std::optional<Value> got = idx->lookup(k);
        const auto it = mine.find(k);
        if ((it == mine.end()) != !got || (got && *got != it->second)) {
          fail("own key " + std::to_string(k) + " reads back wrong after write");
        }
      } else if (r < 50) {
        const uint64_t k = own_key();
        const Value v = tag(k, ++seq);
        Status s = idx->update(k, v);
        const auto it = mine.find(k);
        if (s.ok() != (it != mine.end())) fail("update status wrong");
        if (it != mine.end()) it->second = v;
      } else if (r < 70) {
        const uint64_t k = rng() % key_space;
        const std::optional<Value> got = idx->lookup(k);
        if (got && !tagged(k, *got)) fail("lookup returned another key's value");
        if (k % kThreads == t) {
          const auto it = mine.find(k);
          if ((it == mine.end()) != !got || (got && *got != it->second)) {
            fail("own key " + std::to_string(k) + " lookup mismatch");
          }
        }
      } else if (r < 90) {
        const uint64_t start = rng() % key_space;
        const size_t want = 1 + rng() % 40;
        std::vector<std::pair<uint64_t, Value>> out;
        idx->scan(start, want, &out);
        if (out.size() > want) fail("scan returned too many");
        for (size_t j = 0; j < out.size(); ++j) {
          if (out[j].first < start || (j > 0 && out[j].first <= out[j - 1].first)) {
            fail("scan out of order or duplicate");
          }
          if (!tagged(out[j].first, out[j].second)) fail("scan value of another key");
        }
        // Own keys in the covered range must match exactly (present keys are
        // never missed, absent ones never appear).
        const uint64_t end = out.size() == want ? out.back().first + 1 : UINT64_MAX;
        size_t j = 0;
        for (auto it = mine.lower_bound(start); it != mine.end() && it->first < end; ++it) {
          while (j < out.size() && out[j].first < it->first) ++j;
          if (j == out.size() || out[j].first != it->first || out[j].second != it->second) {
            fail("scan from " + std::to_string(start) + " missed own key " +
                 std::to_string(it->first));
            break;
          }
        }
        for (const auto& kv : out) {
          if (kv.first % kThreads == t && kv.first < end && !mine.count(kv.first)) {
            fail("scan returned an own key that is absent");
          }
        }
      } else {
        const uint64_t k = rng() % (key_space + 1);
        const auto got = idx->find_last_less_than(k);
        if (got && (got->first >= k || !tagged(got->first, got->second))) {
          fail("find_last_less_than returned a wrong pair");
        }
        auto it = mine.lower_bound(k);
        if (it != mine.begin()) {
          --it;  // the largest own key < k: the answer is at least it
          if (!got || got->first < it->first ||
              (got->first == it->first && got->second != it->second)) {
            fail("find_last_less_than(" + std::to_string(k) + ") missed own key " +
                 std::to_string(it->first));
          }
        }
      }
      ++opcount[t];
    }
  };
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < kThreads; ++t) threads.emplace_back(body, t);
  for (auto& th : threads) th.join();
  uint64_t total = 0;
  for (unsigned t = 0; t < kThreads; ++t) {
    EXPECT_TRUE(errors[t].empty()) << "thread " << t << ": " << errors[t];
    total += opcount[t];
  }
  std::map<uint64_t, Value> all;
  for (const auto& m : models) all.insert(m.begin(), m.end());
  expect_state(*idx, all, key_space, "after the stress");
  VerifyReport rep;
  ASSERT_TRUE(idx->verify(&rep).ok());
  std::printf("node %u: %llu ops, height %u, %zu keys\n", node_size,
              static_cast<unsigned long long>(total), rep.height, all.size());
}

TEST(FastFairReview, SmoStressNode128) { smo_stress(128, 256, 1.5, 7); }
TEST(FastFairReview, SmoStressNode256) { smo_stress(256, 1024, 1.5, 8); }

// ------------------------------------------------------------ damaged pools

/// Builds a 3-level tree at node size 128, applies `damage` to it, closes
/// the pool and reopens it: recovery must return Corruption. Run in a child
/// process with an alarm, so that a hang or a crash fails the test instead of
/// stopping it.
void expect_corruption(const std::string& tag, void (*damage)(FastFair&)) {
  const std::string path = pool_path("damage_" + tag);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    alarm(10);
    std::unique_ptr<pm::Pool> pool;
    std::unique_ptr<Index<uint64_t>> idx;
    std::remove(path.c_str());
    if (!pm::Pool::create(path, kPoolBytes, "fastfair", pm::Mode::kEmulated, &pool).ok()) _exit(2);
    IndexOptions o;
    o.pool = pool.get();
    o.node_size = 128;
    if (!make_index<uint64_t>("fastfair", o, &idx).ok()) _exit(2);
    for (uint64_t k = 1; k <= 200; ++k) {
      if (!idx->insert(k * 10, k).ok()) _exit(2);
    }
    damage(*dynamic_cast<FastFair*>(idx.get()));
    // verify() of the live, damaged tree must not crash either.
    VerifyReport rep;
    const bool live_ok = idx->verify(&rep).ok();
    Status s = open_ff(path, &pool, &idx);
    std::remove(path.c_str());
    if (s.code() != Code::kCorruption) {
      std::fprintf(stderr, "%s: reopen gave %s\n", tag.c_str(), s.ToString().c_str());
      _exit(1);
    }
    _exit(live_ok ? 4 : 0);
  }
  int st = 0;
  ASSERT_EQ(waitpid(pid, &st, 0), pid);
  std::remove(path.c_str());
  ASSERT_TRUE(WIFEXITED(st)) << tag << ": crashed or hung (signal "
                             << (WIFSIGNALED(st) ? WTERMSIG(st) : 0) << ")";
  EXPECT_NE(WEXITSTATUS(st), 4) << tag << ": verify() of the live damaged tree passed";
  EXPECT_EQ(WEXITSTATUS(st), 0) << tag << ": reopen did not give Corruption";
}

Node* root_node(FastFair& ff) { return ff.node(ff.root_offset()); }
Node* first_child(FastFair& ff, Node* n) { return ff.node(n->leftmost.load()); }

TEST(FastFairReview, DamagedDuplicateChild) {
  // Two entries of a parent name the same child (found by review: the tree
  // recovered, and a merge later locked that child twice: a hang).
  expect_corruption("dupchild", [](FastFair& ff) {
    Node* p = first_child(ff, root_node(ff));  // a level-1 node
    ASSERT_GE(p->count.load(), 2u);
    Entry* e = p->entries();
    pm::store(&e[1].value, e[0].value.load());
    pm::persist(&e[1], 16);
  });
}

TEST(FastFairReview, DamagedChildIntoHeader) {
  expect_corruption("childhdr", [](FastFair& ff) {
    Node* p = first_child(ff, root_node(ff));
    pm::store(&p->entries()[0].value, uint64_t{64});
    pm::persist(p, 128);
  });
}

TEST(FastFairReview, DamagedLeftmostOfSecondNode) {
  // Not the first node of its level: walk_levels does not follow it, and
  // verify() dereferenced it unchecked.
  expect_corruption("lm2", [](FastFair& ff) {
    Node* p = first_child(ff, root_node(ff));
    Node* q = ff.node(p->sibling.load());
    pm::store(&q->leftmost, uint64_t{1} << 40);
    pm::persist(q, 64);
  });
}

TEST(FastFairReview, DamagedChildCycleUp) {
  // A leaf-level child pointer back to the root: a cycle through children.
  expect_corruption("cycleup", [](FastFair& ff) {
    Node* p = first_child(ff, root_node(ff));
    pm::store(&p->entries()[0].value, ff.root_offset());
    pm::persist(p, 128);
  });
}

TEST(FastFairReview, DamagedChildSameLevel) {
  // A child pointer to a node of the parent's own level.
  expect_corruption("samelevel", [](FastFair& ff) {
    Node* p = first_child(ff, root_node(ff));
    pm::store(&p->entries()[0].value, p->sibling.load());
    pm::persist(p, 128);
  });
}

TEST(FastFairReview, DamagedCountAboveCapacity) {
  expect_corruption("count", [](FastFair& ff) {
    Node* p = first_child(ff, root_node(ff));
    pm::naw(&p->count, uint64_t{5});
  });
}

TEST(FastFairReview, DamagedLevel) {
  expect_corruption("level", [](FastFair& ff) {
    Node* p = first_child(ff, root_node(ff));
    pm::naw(&p->level_magic, p->level_magic.load() + 1);
  });
}

TEST(FastFairReview, DamagedChildOrder) {
  // Two children swapped: every pointer is a valid node of the right level,
  // but separators no longer bound their children.
  expect_corruption("order", [](FastFair& ff) {
    Node* p = first_child(ff, root_node(ff));
    Entry* e = p->entries();
    const uint64_t a = e[0].value.load(), b = e[1].value.load();
    pm::store(&e[0].value, b);
    pm::store(&e[1].value, a);
    pm::persist(&e[0], 32);
  });
}

TEST(FastFairReview, DamagedSiblingOrder) {
  // A leaf's low_key above its sibling's: the chain is out of order.
  expect_corruption("siblow", [](FastFair& ff) {
    Node* p = first_child(ff, first_child(ff, root_node(ff)));
    Node* q = ff.node(p->sibling.load());
    pm::store(&q->low_key, uint64_t{5});
    pm::persist(q, 64);
  });
}

}  // namespace
}  // namespace nvindex
