// kv::Store (include/nvindex/kv.h): every command's outcome as memcached
// gives it (doc/protocol.txt), expiry and flush_all on a test clock, large
// values (allocator extents), ordered reads and pmemkv's names, bulk load,
// a full pool that loses nothing, reopening after a clean close and after a
// crash (a child killed after its writes: what no key reaches is freed),
// damage caught at open, the pools it refuses, and concurrent writers and
// readers. Run over every persistent string-key index the store takes.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "kv/item.h"
#include "nvindex/index.h"
#include "nvindex/kv.h"
#include "nvindex/pm/allocator.h"
#include "nvindex/pm/pool.h"
#include "pm_test_util.h"
#include "support/param_name.h"

namespace nvindex::kv {
namespace {

using pm::testing::TempPool;

constexpr uint64_t kPool = 64ull << 20;

/// The test clock: Unix seconds the store reads (starts at a fixed day).
std::atomic<int64_t> g_now{1'800'000'000};

Options options_for(const std::string& index) {
  Options o;
  o.index = index;
  o.node_size = smallest_node_size(index);
  o.clock = [] { return g_now.load(); };
  return o;
}

/// The store over `index` in the pool file of `tp` (created when missing),
/// with `opts` or options_for(index); null (and a test failure) on error.
std::unique_ptr<Store> open_file(const TempPool& tp, const std::string& index,
                                 uint64_t size = kPool, const Options* opts = nullptr) {
  const Options o = opts != nullptr ? *opts : options_for(index);
  std::unique_ptr<Store> s;
  const Status st = Store::open_file(tp.path(), size, o, &s);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return s;
}

std::string get_value(Store& s, std::string_view key) {
  std::string v;
  const Status st = s.get(key, &v);
  return st.ok() ? v
                 : "<" + std::string(st.code() == Code::kNotFound ? "none" : st.ToString()) + ">";
}

class KvStore : public ::testing::TestWithParam<std::string> {};

TEST_P(KvStore, StorageCommandsAsMemcachedAnswersThem) {
  TempPool tp;
  auto s = open_file(tp, GetParam());
  ASSERT_NE(s, nullptr);
  EXPECT_TRUE(s->info().created);
  uint64_t c1 = 0, c2 = 0;
  ASSERT_TRUE(s->set("k", "v1", 7, 0, &c1).ok());
  ItemInfo info;
  std::string v;
  ASSERT_TRUE(s->get("k", &v, &info).ok());
  EXPECT_EQ(v, "v1");
  EXPECT_EQ(info.flags, 7u);
  EXPECT_EQ(info.cas, c1);
  EXPECT_EQ(info.value_bytes, 2u);
  // add: only when absent; replace: only when present.
  EXPECT_EQ(s->add("k", "x", 0, 0).code(), Code::kAlreadyExists);
  EXPECT_EQ(s->replace("nope", "x", 0, 0).code(), Code::kNotFound);
  ASSERT_TRUE(s->add("a", "1", 0, 0).ok());
  ASSERT_TRUE(s->replace("a", "2", 3, 0).ok());
  EXPECT_EQ(get_value(*s, "a"), "2");
  // append / prepend keep flags and expiry.
  ASSERT_TRUE(s->append("k", "++").ok());
  ASSERT_TRUE(s->prepend("k", "--").ok());
  ASSERT_TRUE(s->get("k", &v, &info).ok());
  EXPECT_EQ(v, "--v1++");
  EXPECT_EQ(info.flags, 7u);
  EXPECT_EQ(s->append("nope", "x").code(), Code::kNotFound);
  // cas: EXISTS (AlreadyExists) after a change, NOT_FOUND without an item.
  ASSERT_TRUE(s->get("k", &v, &info).ok());
  ASSERT_TRUE(s->cas("k", "new", 1, 0, info.cas, &c2).ok());
  EXPECT_NE(c2, info.cas);
  EXPECT_EQ(s->cas("k", "newer", 1, 0, info.cas).code(), Code::kAlreadyExists);
  EXPECT_EQ(s->cas("nope", "x", 0, 0, 1).code(), Code::kNotFound);
  EXPECT_EQ(get_value(*s, "k"), "new");
  // delete.
  ASSERT_TRUE(s->remove("a").ok());
  EXPECT_EQ(s->remove("a").code(), Code::kNotFound);
  EXPECT_EQ(get_value(*s, "a"), "<none>");
  EXPECT_EQ(s->exists("k").code(), Code::kOk);
  EXPECT_EQ(s->exists("a").code(), Code::kNotFound);
  // Empty values are values.
  ASSERT_TRUE(s->set("empty", "", 0, 0).ok());
  EXPECT_EQ(get_value(*s, "empty"), "");
  const Stats st = s->stats();
  EXPECT_EQ(st.curr_items, 2u);
  EXPECT_EQ(st.delete_hits, 1u);
  EXPECT_EQ(st.delete_misses, 1u);
  EXPECT_EQ(st.cas_hits, 1u);
  EXPECT_EQ(st.cas_badval, 1u);
  EXPECT_EQ(st.cas_misses, 1u);
}

TEST_P(KvStore, IncrDecrFollowMemcachedsRules) {
  TempPool tp;
  auto s = open_file(tp, GetParam());
  ASSERT_NE(s, nullptr);
  uint64_t r = 0;
  EXPECT_EQ(s->incr("n", 1, &r).code(), Code::kNotFound);
  ASSERT_TRUE(s->set("n", "10", 5, 0).ok());
  ASSERT_TRUE(s->incr("n", 5, &r).ok());
  EXPECT_EQ(r, 15u);
  ASSERT_TRUE(s->decr("n", 100, &r).ok());  // decr stops at 0
  EXPECT_EQ(r, 0u);
  ASSERT_TRUE(s->set("n", "18446744073709551615", 0, 0).ok());
  ASSERT_TRUE(s->incr("n", 2, &r).ok());  // incr wraps at 2^64
  EXPECT_EQ(r, 1u);
  EXPECT_EQ(get_value(*s, "n"), "1");
  ASSERT_TRUE(s->set("n", "12  ", 9, 0).ok());  // trailing spaces are allowed
  ASSERT_TRUE(s->decr("n", 3, &r).ok());
  EXPECT_EQ(r, 9u);
  ItemInfo info;
  std::string v;
  ASSERT_TRUE(s->get("n", &v, &info).ok());
  EXPECT_EQ(v, "9");
  EXPECT_EQ(info.flags, 9u);
  for (const char* bad : {"abc", "", "1x", "-1", "18446744073709551616", "123456789012345678901"}) {
    ASSERT_TRUE(s->set("b", bad, 0, 0).ok());
    const Status st = s->incr("b", 1, &r);
    EXPECT_EQ(st.code(), Code::kInvalidArgument) << bad;
    EXPECT_NE(st.message().find("non-numeric"), std::string::npos) << st.ToString();
  }
}

TEST_P(KvStore, ExpiryTouchAndFlushAllOnTheTestClock) {
  TempPool tp;
  auto s = open_file(tp, GetParam());
  ASSERT_NE(s, nullptr);
  const int64_t t0 = g_now.load();
  EXPECT_EQ(expiry_from_memcached(0, t0), 0);
  EXPECT_EQ(expiry_from_memcached(10, t0), t0 + 10);
  EXPECT_EQ(expiry_from_memcached(kRelativeExpiryLimit, t0), t0 + kRelativeExpiryLimit);
  EXPECT_EQ(expiry_from_memcached(kRelativeExpiryLimit + 1, t0), kRelativeExpiryLimit + 1);
  EXPECT_EQ(expiry_from_memcached(2147483647, t0), 2147483647);  // YCSB's default
  EXPECT_EQ(expiry_from_memcached(-1, t0), 1);
  ASSERT_TRUE(s->set("short", "x", 0, t0 + 10).ok());
  ASSERT_TRUE(s->set("gone", "x", 0, expiry_from_memcached(-1, t0)).ok());
  ASSERT_TRUE(s->set("forever", "x", 0, 0).ok());
  EXPECT_EQ(get_value(*s, "short"), "x");
  EXPECT_EQ(get_value(*s, "gone"), "<none>");
  // An expired item is absent to add (which replaces it) and to replace.
  ASSERT_TRUE(s->add("gone", "back", 0, 0).ok());
  EXPECT_EQ(get_value(*s, "gone"), "back");
  ASSERT_TRUE(s->touch("short", t0 + 100).ok());
  EXPECT_EQ(s->touch("nope", t0).code(), Code::kNotFound);
  g_now += 50;
  EXPECT_EQ(get_value(*s, "short"), "x");  // touched past 10 s
  std::string v;
  ASSERT_TRUE(s->get_and_touch("short", g_now.load() + 1, &v).ok());
  g_now += 2;
  EXPECT_EQ(get_value(*s, "short"), "<none>");
  EXPECT_EQ(s->replace("short", "y", 0, 0).code(), Code::kNotFound);
  // flush_all now: everything stored before is gone, later writes are not.
  ASSERT_TRUE(s->flush_all(0).ok());
  EXPECT_EQ(get_value(*s, "forever"), "<none>");
  ASSERT_TRUE(s->set("after", "y", 0, 0).ok());
  EXPECT_EQ(get_value(*s, "after"), "y");
  // flush_all 10: items stored up to then vanish when the time comes.
  ASSERT_TRUE(s->flush_all(10).ok());
  ASSERT_TRUE(s->set("within", "z", 0, 0).ok());
  g_now += 5;
  EXPECT_EQ(get_value(*s, "after"), "y");
  g_now += 6;
  EXPECT_EQ(get_value(*s, "after"), "<none>");
  EXPECT_EQ(get_value(*s, "within"), "<none>");
  g_now += 1;
  ASSERT_TRUE(s->set("later", "w", 0, 0).ok());
  EXPECT_EQ(get_value(*s, "later"), "w");
  // reap() takes the invisible items out of the index.
  const uint64_t before = s->stats().curr_items;
  std::string cursor;
  const uint64_t removed = s->reap(&cursor, 100);
  EXPECT_EQ(removed, before - 1);
  EXPECT_EQ(s->stats().curr_items, 1u);
  uint64_t n = 0;
  ASSERT_TRUE(s->count_all(&n).ok());
  EXPECT_EQ(n, 1u);
}

TEST_P(KvStore, FlushAndExpirySurviveReopen) {
  TempPool tp;
  const int64_t t0 = g_now.load();
  {
    auto s = open_file(tp, GetParam());
    ASSERT_NE(s, nullptr);
    ASSERT_TRUE(s->set("old", "x", 0, 0).ok());
    ASSERT_TRUE(s->flush_all(0).ok());
    ASSERT_TRUE(s->set("new", "y", 0, t0 + 1000).ok());
  }
  auto s = open_file(tp, GetParam());
  ASSERT_NE(s, nullptr);
  EXPECT_FALSE(s->info().created);
  EXPECT_TRUE(s->info().clean_shutdown);
  EXPECT_EQ(get_value(*s, "old"), "<none>");
  EXPECT_EQ(get_value(*s, "new"), "y");
  // CAS uniques keep growing past the flushed ones: a new item is visible.
  ASSERT_TRUE(s->set("newer", "z", 0, 0).ok());
  EXPECT_EQ(get_value(*s, "newer"), "z");
  ItemInfo info;
  ASSERT_TRUE(s->get("new", nullptr, &info).ok());
  EXPECT_EQ(info.expiry, t0 + 1000);
}

TEST_P(KvStore, KeyAndValueLimits) {
  TempPool tp;
  Options o = options_for(GetParam());
  o.max_value_bytes = 1000;
  auto s = open_file(tp, GetParam(), kPool, &o);
  ASSERT_NE(s, nullptr);
  const std::string k250(250, 'k'), k251(251, 'k');
  ASSERT_TRUE(s->set(k250, "ok", 0, 0).ok());
  EXPECT_EQ(get_value(*s, k250), "ok");
  for (const std::string& bad : {std::string(), k251}) {
    EXPECT_EQ(s->set(bad, "x", 0, 0).code(), Code::kInvalidArgument);
    EXPECT_EQ(s->get(bad, nullptr).code(), Code::kInvalidArgument);
    EXPECT_EQ(s->remove(bad).code(), Code::kInvalidArgument);
  }
  ASSERT_TRUE(s->set("v", std::string(1000, 'v'), 0, 0).ok());
  const Status big = s->set("v2", std::string(1001, 'v'), 0, 0);
  EXPECT_EQ(big.code(), Code::kInvalidArgument);
  EXPECT_NE(big.message().find("too large"), std::string::npos) << big.ToString();
  EXPECT_EQ(s->append("v", "x").code(), Code::kInvalidArgument);
  EXPECT_EQ(get_value(*s, "v"), std::string(1000, 'v'));
  EXPECT_EQ(get_value(*s, "v2"), "<none>");
}

TEST_P(KvStore, LargeValuesTakeExtentsAndSurviveReopen) {
  TempPool tp;
  std::map<std::string, std::string> want;
  {
    auto s = open_file(tp, GetParam());
    ASSERT_NE(s, nullptr);
    for (uint32_t size : {4000u, 5000u, 70000u, 300000u, 1u << 20}) {
      std::string v(size, '\0');
      for (uint32_t i = 0; i < size; ++i) v[i] = static_cast<char>('a' + (i * 7 + size) % 26);
      const std::string key = "big" + std::to_string(size);
      ASSERT_TRUE(s->set(key, v, 0, 0).ok()) << size;
      want[key] = v;
    }
    ASSERT_TRUE(s->append("big70000", "tail").ok());
    want["big70000"] += "tail";
    EXPECT_EQ(s->set("toobig", std::string((1u << 20) + 1, 'x'), 0, 0).code(),
              Code::kInvalidArgument);
  }
  auto s = open_file(tp, GetParam());
  ASSERT_NE(s, nullptr);
  for (const auto& [k, v] : want) EXPECT_TRUE(get_value(*s, k) == v) << k;
  uint64_t items = 0;
  ASSERT_TRUE(s->verify(&items).ok());
  EXPECT_EQ(items, want.size());
}

TEST_P(KvStore, OrderedReadsAndPmemkvNames) {
  TempPool tp;
  auto s = open_file(tp, GetParam());
  ASSERT_NE(s, nullptr);
  for (const char* k : {"b", "a", "d", "c", "e", "ab"}) ASSERT_TRUE(s->put(k, k).ok());
  auto keys = [&](auto&& call) {
    std::string out;
    const Status st = call([&](std::string_view k, std::string_view v, const ItemInfo&) {
      EXPECT_EQ(k, v);
      out += std::string(k) + ",";
      return true;
    });
    return st.ok() ? out : st.ToString();
  };
  EXPECT_EQ(keys([&](auto cb) { return s->get_all(cb); }), "a,ab,b,c,d,e,");
  EXPECT_EQ(keys([&](auto cb) { return s->get_above("b", cb); }), "c,d,e,");
  EXPECT_EQ(keys([&](auto cb) { return s->get_below("b", cb); }), "a,ab,");
  EXPECT_EQ(keys([&](auto cb) { return s->get_between("a", "d", cb); }), "ab,b,c,");
  EXPECT_EQ(keys([&](auto cb) { return s->scan("abc", 2, cb); }), "b,c,");
  EXPECT_EQ(keys([&](auto cb) { return s->range(Bound::closed("b"), Bound::closed("d"), 0, cb); }),
            "b,c,d,");
  EXPECT_EQ(keys([&](auto cb) { return s->range(Bound::none(), Bound::closed("ab"), 0, cb); }),
            "a,ab,");
  EXPECT_EQ(keys([&](auto cb) { return s->range(Bound::closed("b"), Bound::none(), 2, cb); }),
            "b,c,");
  size_t given = 9;
  ASSERT_TRUE(s->scan(
                   "a", 0, [](auto, auto, auto&) { return true; }, &given)
                  .ok());
  EXPECT_EQ(given, 0u);
  EXPECT_EQ(s->range(Bound::closed(std::string(251, 'x')), Bound::none(), 0,
                     [](auto, auto, auto&) { return true; })
                .code(),
            Code::kInvalidArgument);
  // A stop from the callback ends the read.
  int calls = 0;
  ASSERT_TRUE(s->get_all([&](auto, auto, auto&) { return ++calls < 2; }).ok());
  EXPECT_EQ(calls, 2);
  uint64_t n = 0;
  ASSERT_TRUE(s->count_all(&n).ok());
  EXPECT_EQ(n, 6u);
}

TEST_P(KvStore, BulkLoadIntoAnEmptyStore) {
  TempPool tp;
  std::vector<std::string> keys, values;
  for (int i = 0; i < 3000; ++i) {
    char k[32];
    std::snprintf(k, sizeof(k), "key%06d", i);
    keys.emplace_back(k);
    values.emplace_back(std::string(static_cast<size_t>(i % 300), 'v') + k);
  }
  std::vector<BulkItem> items;
  for (size_t i = 0; i < keys.size(); ++i) items.push_back({keys[i], values[i], uint32_t(i), 0});
  {
    auto s = open_file(tp, GetParam());
    ASSERT_NE(s, nullptr);
    std::vector<BulkItem> unsorted = {items[1], items[0]};
    EXPECT_EQ(s->bulk_load(unsorted).code(), Code::kInvalidArgument);
    ASSERT_TRUE(s->bulk_load(items).ok());
    EXPECT_EQ(s->bulk_load(items).code(), Code::kInvalidArgument);  // not empty
    EXPECT_EQ(s->stats().curr_items, 3000u);
  }
  auto s = open_file(tp, GetParam());
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->info().items_at_open, 3000u);
  for (size_t i = 0; i < keys.size(); i += 97) {
    ItemInfo info;
    std::string v;
    ASSERT_TRUE(s->get(keys[i], &v, &info).ok()) << keys[i];
    EXPECT_EQ(v, values[i]);
    EXPECT_EQ(info.flags, i);
  }
}

TEST_P(KvStore, AFullPoolRefusesAndLosesNothing) {
  TempPool tp;
  auto s = open_file(tp, GetParam(), 8ull << 20);
  ASSERT_NE(s, nullptr);
  std::map<std::string, std::string> stored;
  Status last;
  for (int i = 0; i < 100000; ++i) {
    const std::string k = "k" + std::to_string(i);
    const std::string v(1000 + i % 3000, static_cast<char>('a' + i % 26));
    last = s->set(k, v, 0, 0);
    if (!last.ok()) break;
    stored[k] = v;
  }
  ASSERT_EQ(last.code(), Code::kOutOfSpace) << last.ToString();
  EXPECT_GT(stored.size(), 100u);
  // A failed replace of an existing key keeps its old item.
  const std::string& k0 = stored.begin()->first;
  EXPECT_EQ(s->set(k0, std::string(1u << 20, 'z'), 0, 0).code(), Code::kOutOfSpace);
  for (const auto& [k, v] : stored) ASSERT_TRUE(get_value(*s, k) == v) << k;
  s.reset();
  s = open_file(tp, GetParam(), 8ull << 20);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->info().items_at_open, stored.size());
  for (const auto& [k, v] : stored) ASSERT_TRUE(get_value(*s, k) == v) << k;
}

TEST_P(KvStore, ACrashLeavesEveryAcknowledgedWriteAndFreesTheRest) {
  TempPool tp;
  { ASSERT_NE(open_file(tp, GetParam()), nullptr); }
  // The child writes, rewrites and removes, then dies without closing: the
  // replaced items it had retired but not yet freed are unreachable.
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::unique_ptr<Store> s;
    Options o = options_for(GetParam());
    if (!Store::open_file(tp.path(), kPool, o, &s).ok()) _exit(1);
    for (int i = 0; i < 40; ++i) {
      if (!s->set("same", "v" + std::to_string(i), 0, 0).ok()) _exit(2);
    }
    for (int i = 0; i < 200; ++i) {
      if (!s->set("k" + std::to_string(i), std::string(i * 10, 'x'), 0, 0).ok()) _exit(3);
    }
    for (int i = 0; i < 200; i += 2) {
      if (!s->remove("k" + std::to_string(i)).ok()) _exit(4);
    }
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  auto s = open_file(tp, GetParam());
  ASSERT_NE(s, nullptr);
  EXPECT_FALSE(s->info().clean_shutdown);
  EXPECT_EQ(s->info().items_at_open, 101u);
  EXPECT_GT(s->info().items_reclaimed_at_open, 0u);
  EXPECT_EQ(get_value(*s, "same"), "v39");
  for (int i = 0; i < 200; ++i) {
    EXPECT_EQ(get_value(*s, "k" + std::to_string(i)),
              i % 2 == 0 ? "<none>" : std::string(i * 10, 'x'))
        << i;
  }
  uint64_t items = 0;
  ASSERT_TRUE(s->verify(&items).ok());
  EXPECT_EQ(items, 101u);
}

INSTANTIATE_TEST_SUITE_P(Persistent, KvStore,
                         ::testing::Values("lbtree", "fptree", "wbtree", "fastfair", "p-masstree",
                                           "p-bwtree"),
                         nvindex::testing::IndexParamName());

// ---------------------------------------------------------- what it refuses

TEST(KvStoreOpen, RefusesIndexesAndPoolsItCannotUse) {
  TempPool tp;
  std::unique_ptr<Store> s;
  Options o = options_for("lbtree");
  o.index = "no-such-index";
  Status st = Store::open_file(tp.path(), kPool, o, &s);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("lbtree"), std::string::npos) << st.ToString();
  o.index = "dash-eh";  // integer keys only
  st = Store::open_file(tp.path(), kPool, o, &s);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("no string keys"), std::string::npos) << st.ToString();
  o.index = "btree";  // volatile, on a pool file
  st = Store::open_file(tp.path(), kPool, o, &s);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("volatile"), std::string::npos) << st.ToString();
  o.index = "lbtree";
  o.max_value_bytes = 0;
  st = Store::open_file(tp.path(), kPool, o, &s);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  // A pool of the index with keys but no store (e.g. one `nvindex bench` left).
  TempPool plain("plain");
  {
    std::unique_ptr<pm::Pool> pool;
    ASSERT_TRUE(
        pm::Pool::create(plain.path(), kPool, Store::layout("lbtree"), pm::Mode::kEmulated, &pool)
            .ok());
    IndexOptions io;
    io.pool = pool.get();
    std::unique_ptr<Index<std::string_view>> idx;
    ASSERT_TRUE(make_index<std::string_view>("lbtree", io, &idx).ok());
    ASSERT_TRUE(idx->insert("key", 12345).ok());
  }
  o.max_value_bytes = kDefaultMaxValueBytes;
  st = Store::open_file(plain.path(), kPool, o, &s);
  EXPECT_EQ(st.code(), Code::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find("no store"), std::string::npos) << st.ToString();
  // A store of another index: the layout says so.
  { ASSERT_NE(open_file(tp, "wbtree"), nullptr); }
  st = Store::open_file(tp.path(), kPool, options_for("lbtree"), &s);
  EXPECT_EQ(st.code(), Code::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find("layout"), std::string::npos) << st.ToString();
}

TEST(KvStoreOpen, AVolatileIndexServesOnAnAnonymousPool) {
  std::unique_ptr<pm::Pool> pool;
  ASSERT_TRUE(pm::Pool::create_anonymous(kPool, Store::layout("btree"), &pool).ok());
  std::unique_ptr<Store> s;
  ASSERT_TRUE(Store::open(pool.get(), options_for("btree"), &s).ok());
  ASSERT_TRUE(s->set("k", "v", 0, 0).ok());
  EXPECT_EQ(get_value(*s, "k"), "v");
  s.reset();
}

/// Flips one byte of the file at `off`.
void flip_byte(const std::string& path, uint64_t off) {
  FILE* f = std::fopen(path.c_str(), "r+b");
  ASSERT_NE(f, nullptr);
  std::fseek(f, static_cast<long>(off), SEEK_SET);
  const int c = std::fgetc(f);
  std::fseek(f, static_cast<long>(off), SEEK_SET);
  std::fputc(c ^ 0x20, f);
  std::fclose(f);
}

TEST(KvStoreOpen, DamageToACleanlyClosedStoreIsCorruption) {
  TempPool tp;
  uint64_t value_at = 0;
  {
    auto s = open_file(tp, "lbtree");
    ASSERT_NE(s, nullptr);
    ASSERT_TRUE(s->set("victim", "payload-bytes", 0, 0).ok());
    ASSERT_TRUE(s->set("other", "x", 0, 0).ok());
  }
  {
    // Find the item's value in the file (the item arena is the pool's own
    // bytes; a search for the value is enough in a pool this small).
    const std::vector<char> f = pm::testing::read_file(tp.path());
    const std::string needle = "victimpayload-bytes";
    const auto it = std::search(f.begin(), f.end(), needle.begin(), needle.end());
    ASSERT_NE(it, f.end());
    value_at = static_cast<uint64_t>(it - f.begin()) + 6;
  }
  flip_byte(tp.path(), value_at);
  std::unique_ptr<Store> s;
  Status st = Store::open_file(tp.path(), kPool, options_for("lbtree"), &s);
  EXPECT_EQ(st.code(), Code::kCorruption) << st.ToString();
  EXPECT_NE(st.message().find("checksum"), std::string::npos) << st.ToString();
  // Reported again at every open: nothing was repaired or reclaimed.
  st = Store::open_file(tp.path(), kPool, options_for("lbtree"), &s);
  EXPECT_EQ(st.code(), Code::kCorruption) << st.ToString();
  flip_byte(tp.path(), value_at);  // undone: the store opens again
  ASSERT_TRUE(Store::open_file(tp.path(), kPool, options_for("lbtree"), &s).ok());
  EXPECT_EQ(get_value(*s, "victim"), "payload-bytes");
}

// ------------------------------------------------------------- concurrency

TEST(KvStoreThreads, WritersAndReadersOfTheSameKeys) {
  std::unique_ptr<pm::Pool> pool;
  ASSERT_TRUE(pm::Pool::create_anonymous(256ull << 20, Store::layout("lbtree"), &pool).ok());
  Options o = options_for("lbtree");
  o.threads = 4;
  std::unique_ptr<Store> s;
  ASSERT_TRUE(Store::open(pool.get(), o, &s).ok());
  constexpr int kKeys = 64, kOps = 4000;
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kOps; ++i) {
        const std::string k = "k" + std::to_string((i * 7 + t) % kKeys);
        switch ((i + t) % 4) {
          case 0:
            if (!s->set(k, k + ":" + std::string(i % 200, 'x'), 0, 0).ok()) ++bad;
            break;
          case 1: {
            std::string v;
            const Status st = s->get(k, &v);
            // A value is always whole: it starts with its own key.
            if (st.ok() && v.compare(0, k.size() + 1, k + ":") != 0) ++bad;
            break;
          }
          case 2:
            (void)s->append(k, "y");
            break;
          default: {
            const Status st = s->remove(k);
            if (!st.ok() && st.code() != Code::kNotFound) ++bad;
          }
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
  uint64_t n = 0;
  ASSERT_TRUE(s->count_all(&n).ok());
  EXPECT_EQ(n, s->stats().curr_items);
  uint64_t items = 0;
  ASSERT_TRUE(s->verify(&items).ok());
  EXPECT_EQ(items, n);
}

}  // namespace
}  // namespace nvindex::kv
