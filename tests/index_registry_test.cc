// The registry's declarations (nvindex/index.h, IndexEntry) checked against
// the indexes themselves: every registered index, test-only ones included.
#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <string>

#include "nvindex/index.h"
#include "nvindex/pm/counters.h"
#include "nvindex/pm/persist.h"
#include "nvindex/pm/pool.h"
#include "testing/test_indexes.h"
#include "util/temp_files.h"

// The test doubles this file uses (src/testing/test_indexes.h).
[[maybe_unused]] const bool kTestIndexesRegistered =
    (nvindex::test_indexes::register_test_indexes(), true);

namespace nvindex {
namespace {

/// An index made through make_index<K>() with `threads` and `extra`, in a
/// fresh anonymous pool (layout = pool_layout(name, key type)) when it needs
/// one (and has a factory for K: otherwise make_index's refusal is
/// the point, with no pool), or at a new path in a temporary directory on a
/// disk when it needs a device.
template <class K = uint64_t>
struct Made {
  std::unique_ptr<util::TempDir> dir;
  std::unique_ptr<pm::Pool> pool;
  std::unique_ptr<Index<K>> index;
  Status status;

  Made(const IndexEntry& e, unsigned threads, std::map<std::string, std::string> extra = {}) {
    IndexOptions o;
    o.node_size = smallest_node_size(e.name);
    o.threads = threads;
    o.extra = std::move(extra);
    if (needs_device(e.caps)) {
      dir = std::make_unique<util::TempDir>(util::temp_device_dir(), "nvindex-registry-");
      if (!dir->ok()) {
        status = Status::IOError(dir->error());
        return;
      }
      o.device = dir->path() + "/" + std::string(e.name);
    } else if (needs_pool(e.caps) && (key_type_of<K> == KeyType::kInteger || e.caps.string_keys)) {
      status = pm::Pool::create_anonymous(16ull << 20, pool_layout(e.name, key_type_of<K>), &pool);
      if (!status.ok()) return;
      o.pool = pool.get();
    }
    status = make_index<K>(e.name, o, &index);
  }
};

std::string show(const Capabilities& c) {
  return std::string("ordered=") + (c.ordered ? "1" : "0") +
         " persistent=" + (c.persistent ? "1" : "0") +
         " thread_safe=" + (c.thread_safe ? "1" : "0") +
         " string_keys=" + (c.string_keys ? "1" : "0") + " bulk_load=" + (c.bulk_load ? "1" : "0") +
         " placement=" + std::string(placement_name(c.placement));
}

TEST(Registry, CapsOfEveryIndexAreItsEntrys) {
  for (const IndexEntry& e : registered_indexes()) {
    SCOPED_TRACE(std::string(e.name));
    Made<> two(e, 2);
    ASSERT_TRUE(two.status.ok()) << two.status.ToString();
    const Capabilities c2 = two.index->info().caps;
    EXPECT_EQ(c2, e.caps) << "instance: " << show(c2) << "\nentry:    " << show(e.caps);
    // One thread: the same, except that thread_safe may be dropped.
    Made<> one(e, 1);
    ASSERT_TRUE(one.status.ok()) << one.status.ToString();
    Capabilities c1 = one.index->info().caps;
    EXPECT_TRUE(!c1.thread_safe || e.caps.thread_safe) << show(c1);
    c1.thread_safe = e.caps.thread_safe;
    EXPECT_EQ(c1, e.caps) << "instance: " << show(c1) << "\nentry:    " << show(e.caps);
  }
}

TEST(Registry, StringKeyInstancesClaimWhatTheEntrySays) {
  int with = 0;
  for (const IndexEntry& e : registered_indexes()) {
    SCOPED_TRACE(std::string(e.name));
    EXPECT_EQ(e.caps.string_keys, e.make_string != nullptr);
    Made<std::string_view> two(e, 2);
    if (!e.caps.string_keys) {
      EXPECT_EQ(two.status.code(), Code::kInvalidArgument);
      EXPECT_NE(two.status.message().find("has no string keys (indexes with string keys: "),
                std::string::npos)
          << two.status.ToString();
      EXPECT_EQ(two.index, nullptr);
      continue;
    }
    ++with;
    ASSERT_TRUE(two.status.ok()) << two.status.ToString();
    EXPECT_EQ(two.index->info().caps, e.caps) << show(two.index->info().caps);
    // A key of kMaxKeyBytes fits, one byte more changes nothing.
    const std::string longest(kMaxKeyBytes, 'k');
    const std::string too_long(kMaxKeyBytes + 1, 'k');
    EXPECT_TRUE(two.index->insert(longest, 1).ok());
    for (Status s : {two.index->insert(too_long, 2), two.index->update(too_long, 2),
                     two.index->remove(too_long)}) {
      EXPECT_EQ(s.code(), Code::kInvalidArgument);
      EXPECT_NE(s.message().find("key of 256 bytes is longer than 255"), std::string::npos)
          << s.ToString();
    }
    EXPECT_EQ(two.index->lookup(too_long), std::nullopt);
    EXPECT_EQ(two.index->lookup(longest), std::optional<Value>(1));
    VerifyReport r;
    ASSERT_TRUE(two.index->verify(&r).ok());
    EXPECT_EQ(r.keys, 1u);
  }
  EXPECT_GE(with, 1) << "absl-btree has string keys";
}

TEST(Registry, UnknownStringIndexListsTheKnownOnes) {
  std::unique_ptr<Index<std::string_view>> idx;
  const Status s = make_index<std::string_view>("no-such-index", IndexOptions{}, &idx);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("unknown index 'no-such-index' for string keys (known: "),
            std::string::npos)
      << s.ToString();
  EXPECT_NE(s.message().find("absl-btree"), std::string::npos) << s.ToString();
}

TEST(Registry, PoolLayoutNamesTheKeyType) {
  EXPECT_EQ(pool_layout("fastfair", KeyType::kInteger), "fastfair");
  EXPECT_EQ(pool_layout("fastfair", KeyType::kString), "fastfair:string");
  EXPECT_EQ(parse_pool_layout("fastfair:string"),
            std::make_pair(std::string_view("fastfair"), KeyType::kString));
  EXPECT_EQ(parse_pool_layout("fastfair"),
            std::make_pair(std::string_view("fastfair"), KeyType::kInteger));
  KeyType t{};
  EXPECT_TRUE(parse_key_type("string", &t).ok());
  EXPECT_EQ(t, KeyType::kString);
  EXPECT_TRUE(parse_key_type("int", &t).ok());
  EXPECT_EQ(t, KeyType::kInteger);
  const Status bad = parse_key_type("strng", &t);
  EXPECT_EQ(bad.code(), Code::kInvalidArgument);
  EXPECT_NE(bad.message().find("(valid: integer, string)"), std::string::npos);
  EXPECT_EQ(key_type_name(KeyType::kString), "string");
}

TEST(Registry, UnknownOptionIsRefusedNamingTheValidOnes) {
  for (const IndexEntry& e : registered_indexes()) {
    SCOPED_TRACE(std::string(e.name));
    Made<> m(e, 2, {{"innr", "dram"}});
    EXPECT_EQ(m.status.code(), Code::kInvalidArgument) << m.status.ToString();
    EXPECT_EQ(m.index, nullptr);
    const std::string& msg = m.status.message();
    EXPECT_NE(msg.find(std::string(e.name) + ": unknown option 'innr'"), std::string::npos) << msg;
    if (e.options.empty()) {
      EXPECT_NE(msg.find("(it takes no options)"), std::string::npos) << msg;
    } else {
      EXPECT_NE(msg.find("(options: " + option_summary(e) + ")"), std::string::npos) << msg;
    }
  }
}

TEST(Registry, EveryDeclaredValueIsTakenAndNoOther) {
  int options = 0;
  for (const IndexEntry& e : registered_indexes()) {
    for (const OptionSpec& o : e.options) {
      SCOPED_TRACE(std::string(e.name) + " " + std::string(o.name));
      ++options;
      ASSERT_FALSE(o.values.empty());
      EXPECT_FALSE(o.meaning.empty());
      std::string valid;
      for (std::string_view v : o.values) {
        Made<> m(e, 2, {{std::string(o.name), std::string(v)}});
        EXPECT_TRUE(m.status.ok()) << v << ": " << m.status.ToString();
        valid += (valid.empty() ? "" : ", ") + std::string(v);
        // String keys: every value, but the non-default ones of an option
        // declared integer_keys_only, which the string factory refuses.
        if (!e.caps.string_keys) continue;
        Made<std::string_view> sm(e, 2, {{std::string(o.name), std::string(v)}});
        if (o.integer_keys_only && v != o.values[0]) {
          EXPECT_EQ(sm.status.code(), Code::kInvalidArgument) << v << ": " << sm.status.ToString();
        } else {
          EXPECT_TRUE(sm.status.ok()) << v << " (string keys): " << sm.status.ToString();
        }
      }
      Made<> bad(e, 2, {{std::string(o.name), "not-a-value"}});
      EXPECT_EQ(bad.status.code(), Code::kInvalidArgument);
      EXPECT_NE(bad.status.message().find(std::string(o.name) +
                                          "='not-a-value' invalid (valid: " + valid + ")"),
                std::string::npos)
          << bad.status.ToString();
    }
  }
  EXPECT_GE(options, 2) << "wbtree's inner and the bug indexes' bug are declared";
}

TEST(Registry, RegisterIndexRefusesATakenNameOrAnEmptyEntry) {
  const IndexEntry* b = find_index_entry("btree");
  ASSERT_NE(b, nullptr);
  const size_t before = registered_indexes().size();
  const Status taken = register_index(*b);
  EXPECT_EQ(taken.code(), Code::kInvalidArgument);
  EXPECT_NE(taken.message().find("'btree' is registered already"), std::string::npos);
  IndexEntry empty = *b;
  empty.name = "";
  EXPECT_EQ(register_index(empty).code(), Code::kInvalidArgument);
  EXPECT_EQ(registered_indexes().size(), before);
  // The test doubles registered above are all test-only.
  for (const char* n : {"lying-test", "batch-spy-test", "bug-publish-before-persist-test",
                        "bug-split-two-naw-test"}) {
    EXPECT_NE(find_index_entry(n), nullptr) << n;
    EXPECT_TRUE(is_test_only_index(n));
  }
}

// A pool whose index fails to open (here: a damaged root object) is closed
// "not clean", so the next open recovers it again (make_index, pool.h).
TEST(Registry, AFailedRecoveryLeavesThePoolNotClean) {
  for (const IndexEntry& e : registered_indexes()) {
    // Pools only: a block-device index has no pool (its own tests damage
    // its store).
    if (!needs_pool(e.caps) || is_test_only_index(e.name)) continue;
    SCOPED_TRACE(std::string(e.name));
    const std::string path = "/dev/shm/nvindex-registry-" + std::to_string(::getpid()) + "-" +
                             std::string(e.name) + ".pool";
    ::unlink(path.c_str());
    IndexOptions o;
    o.node_size = smallest_node_size(e.name);
    {
      std::unique_ptr<pm::Pool> pool;
      ASSERT_TRUE(pm::Pool::create(path, 16ull << 20, e.name, pm::Mode::kEmulated, &pool).ok());
      o.pool = pool.get();
      std::unique_ptr<Index<uint64_t>> idx;
      ASSERT_TRUE(make_index<uint64_t>(e.name, o, &idx).ok());
      for (uint64_t k = 1; k <= 200; ++k) ASSERT_TRUE(idx->insert(k, k).ok());
      idx.reset();
      // Damage the root object's first word (its magic) before the clean close.
      pm::store(pool->ptr<uint64_t>(pool->root()), uint64_t{0x0bad0bad0bad0badull});
      pm::persist(pool->ptr<uint64_t>(pool->root()), 8);
    }
    {
      std::unique_ptr<pm::Pool> pool;
      ASSERT_TRUE(pm::Pool::open(path, e.name, pm::Mode::kEmulated, &pool).ok());
      EXPECT_TRUE(pool->was_clean_shutdown());
      o.pool = pool.get();
      std::unique_ptr<Index<uint64_t>> idx;
      const Status s = make_index<uint64_t>(e.name, o, &idx);
      EXPECT_FALSE(s.ok()) << "a damaged root object must not open";
    }
    pm::PoolHeaderInfo info;
    ASSERT_TRUE(pm::Pool::read_header(path, &info).ok());
    EXPECT_FALSE(info.clean_shutdown);
    ::unlink(path.c_str());
  }
}

// Every index that counts SMOs also times them (pm::SmoTimer, issue 13):
// after inserting enough keys to split at its smallest node size, timed SMO
// scopes are at least one and at most the SMOs counted (a cascade is timed
// once). An index that counts none (the btree template, divided-skiplist,
// the volatile yardstick) times none.
TEST(Registry, EveryIndexThatCountsSmosTimesThem) {
  for (const IndexEntry& e : registered_indexes()) {
    // The SMO counters are the PM layer's (pm::SmoTimer): a block-device
    // index counts none, and 20000 synced writes would only cost time.
    if (is_test_only_index(e.name) || needs_device(e.caps)) continue;
    SCOPED_TRACE(e.name);
    Made<> m(e, 1);
    ASSERT_TRUE(m.status.ok()) << m.status.ToString();
    const pm::CounterSnapshot before = pm::snapshot();
    for (uint64_t i = 0; i < 20000; ++i) {
      ASSERT_TRUE(m.index->insert((i * 0x9E3779B97F4A7C15ull) >> 1, i).ok()) << i;
    }
    const pm::CounterSnapshot d = pm::snapshot() - before;
    EXPECT_LE(d.smos_timed(), d.smos);
    if (d.smos > 0) {
      EXPECT_GE(d.smos_timed(), 1u) << d.smos << " SMOs counted, none timed";
    }
  }
}

TEST(Registry, OptionSummaryListsTheDefaultFirst) {
  const IndexEntry* w = find_index_entry("wbtree");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(option_summary(*w), "inner=pm|dram");
  const IndexEntry* b = find_index_entry("btree");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(option_summary(*b), "flush=off|none|group");
}

TEST(Registry, WbTreeInnerDramIsSelective) {
  const IndexEntry* w = find_index_entry("wbtree");
  ASSERT_NE(w, nullptr);
  Made m(*w, 2, {{"inner", "dram"}});
  ASSERT_TRUE(m.status.ok()) << m.status.ToString();
  EXPECT_EQ(m.index->info().caps.placement, Placement::kSelective);
}

// The entry's node-size predicate (what the tools check first) and the
// factory (what make_index refuses) agree on every size tried.
TEST(Registry, NodeSizePredicateAgreesWithTheFactory) {
  const uint32_t sizes[] = {0, 64, 100, 128, 192, 256, 384, 512, 768, 1000, 1024, 2048, 4096, 8192};
  for (const IndexEntry& e : registered_indexes()) {
    if (e.node_size_ok == nullptr) continue;
    EXPECT_TRUE(e.node_size_ok(e.min_node_size)) << e.name;
    for (uint32_t ns : sizes) {
      SCOPED_TRACE(std::string(e.name) + " node size " + std::to_string(ns));
      IndexOptions o;
      o.node_size = ns;
      o.threads = 2;
      std::unique_ptr<pm::Pool> pool;
      std::unique_ptr<util::TempDir> dir;
      if (needs_pool(e.caps)) {
        ASSERT_TRUE(pm::Pool::create_anonymous(16ull << 20, e.name, &pool).ok());
        o.pool = pool.get();
      } else if (needs_device(e.caps)) {
        dir = std::make_unique<util::TempDir>(util::temp_device_dir(), "nvindex-registry-");
        ASSERT_TRUE(dir->ok()) << dir->error();
        o.device = dir->path() + "/store";
        o.device_bytes = 1 << 20;
      }
      std::unique_ptr<Index<uint64_t>> idx;
      const Status made = make_index<uint64_t>(e.name, o, &idx);
      EXPECT_EQ(made.ok(), e.node_size_ok(ns)) << made.ToString();
      const Status checked = check_node_size(e, ns);
      EXPECT_EQ(checked.ok(), e.node_size_ok(ns));
      if (!checked.ok()) {
        EXPECT_NE(checked.message().find("(valid: " + std::string(e.node_sizes) + ")"),
                  std::string::npos)
            << checked.ToString();
      }
    }
  }
}

TEST(Registry, NodeSizesAreDeclaredExactlyForIndexesWithNodes) {
  for (const IndexEntry& e : registered_indexes()) {
    SCOPED_TRACE(std::string(e.name));
    EXPECT_EQ(e.min_node_size == 0, e.node_sizes.empty());
    EXPECT_EQ(e.min_node_size == 0, e.node_size_ok == nullptr);
  }
}

}  // namespace
}  // namespace nvindex
