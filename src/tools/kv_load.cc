// `nvindex kv-load`: fills a new pool file with a key-value store of N
// items for `nvindex serve` to open, the LB+-tree paper's start of its
// Memcached runs (Liu et al., VLDB 2020, §4.4: a tree bulk-loaded with 50M
// entries at 70% or 100% fill). The keys and values are the KV benchmark's
// (bench/kv_keys.h: item i of seed s), so a client computes the loaded keys
// from (seed, i) alone.
//
// Where the index has a bottom-up bulk load (caps.bulk_load) the items go in
// through kv::Store::bulk_load at --fill: the keys are generated, sorted
// (by their first 8 bytes, then by all of them), and loaded in one call,
// which persists every item before the index publishes them (a crash leaves
// the empty store). Otherwise they are stored by set() in item order (random
// key order), each durable when it returns. Either way the store is closed
// cleanly at the end, so `nvindex serve` opens it without a crash recovery.
//
// Exit codes: 0 loaded; 1 the store could not be created or loaded (a full
// pool names --pool-size); 2 usage (an existing --pool, bad values).
#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/driver.h"
#include "bench/kv_keys.h"
#include "bench/report.h"
#include "nvindex/kv.h"
#include "nvindex/pm/pool.h"
#include "tools/cli.h"
#include "tools/commands.h"

namespace nvindex::tools {
namespace {

struct KvLoadArgs {
  std::string index = "lbtree";
  std::string pool;
  std::string pool_size = "0";
  uint64_t records = 1000000;
  uint32_t key_size = bench::kKvDefaultKeySize;
  uint32_t value_size = bench::kKvDefaultValueSize;
  double fill = 1.0;
  uint32_t node_size = 0;
  uint64_t seed = 1;
  std::string format = "text";
  bool quiet = false;
};

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// The allocator's block for `bytes` (powers of two from 64 B), bytes.
uint64_t block_of(uint64_t bytes) { return std::bit_ceil(std::max<uint64_t>(64, bytes)); }

/// The automatic pool size: 64 MiB plus, per item, its item block (32 B
/// header + key + value), a key record's block (1 + key bytes) and 64 B of
/// index node at the fill, times 1.25 for the allocator's chunks.
uint64_t auto_pool_bytes(const KvLoadArgs& a) {
  const uint64_t per = block_of(32 + a.key_size + a.value_size) + block_of(1 + a.key_size) +
                       static_cast<uint64_t>(64 / a.fill);
  return (uint64_t{64} << 20) + a.records * per / 4 * 5;
}

int run_kv_load(const KvLoadArgs& a) {
  const IndexEntry* e = find_index_entry(a.index);
  if (e == nullptr || !e->caps.string_keys || !e->caps.ordered || !e->caps.persistent ||
      is_test_only_index(e->name)) {
    std::fprintf(stderr,
                 "nvindex kv-load: --index %s: a store in a pool needs a persistent ordered index "
                 "with string keys: %s\n",
                 a.index.c_str(), kv_store_indexes(true).c_str());
    return 2;
  }
  if (a.key_size < bench::kKvKeyCore) {
    std::fprintf(stderr, "nvindex kv-load: --key-size %u: at least %u bytes (unique keys)\n",
                 a.key_size, bench::kKvKeyCore);
    return 2;
  }
  if (std::filesystem::exists(a.pool)) {
    std::fprintf(stderr, "nvindex kv-load: --pool %s exists: kv-load fills a new pool\n",
                 a.pool.c_str());
    return 2;
  }
  uint64_t pool_bytes = 0;
  if (Status s = bench::parse_byte_size(a.pool_size, &pool_bytes); !s.ok()) {
    std::fprintf(stderr, "nvindex kv-load: --pool-size: %s\n", s.ToString().c_str());
    return 2;
  }
  if (pool_bytes == 0) pool_bytes = std::max<uint64_t>(auto_pool_bytes(a), pm::kMinPoolSize);
  const bool bulk = e->caps.bulk_load;
  // Keys, values, the sort's pairs and the bulk items, in memory at once.
  const uint64_t need = a.records * (uint64_t{a.key_size} + a.value_size + 8 + 16 + 48);
  if (need > physical_memory_bytes()) {
    std::fprintf(stderr,
                 "nvindex kv-load: --records %llu of %u + %u bytes need %.1f GiB of memory, more "
                 "than this machine has\n",
                 static_cast<unsigned long long>(a.records), a.key_size, a.value_size,
                 need / 1073741824.0);
    return 2;
  }
  const auto say = [&](const char* fmt, auto... args) {
    if (a.quiet) return;
    std::fprintf(stderr, fmt, args...);
    std::fflush(stderr);
  };

  const auto t0 = std::chrono::steady_clock::now();
  const uint64_t n = a.records;
  // Keys back to back (n * key_size bytes), values likewise.
  std::vector<char> keys(n * a.key_size), values(n * a.value_size);
  for (uint64_t i = 0; i < n; ++i) {
    char* k = keys.data() + i * a.key_size;
    bench::kv_key(a.seed, i, a.key_size, k);
    bench::kv_value({k, a.key_size}, a.value_size, values.data() + i * a.value_size);
  }
  const auto key_at = [&](uint64_t i) {
    return std::string_view(keys.data() + i * a.key_size, a.key_size);
  };
  std::vector<uint64_t> order(n);
  for (uint64_t i = 0; i < n; ++i) order[i] = i;
  if (bulk) {
    // By the first 8 bytes as a big-endian word, then by all the bytes.
    std::vector<std::pair<uint64_t, uint64_t>> pre(n);
    for (uint64_t i = 0; i < n; ++i) {
      uint64_t w = 0;
      for (int b = 0; b < 8; ++b) w = w << 8 | static_cast<uint8_t>(keys[i * a.key_size + b]);
      pre[i] = {w, i};
    }
    std::sort(pre.begin(), pre.end(), [&](const auto& x, const auto& y) {
      if (x.first != y.first) return x.first < y.first;
      return key_at(x.second) < key_at(y.second);
    });
    for (uint64_t i = 0; i < n; ++i) order[i] = pre[i].second;
  }
  const double gen_s = since(t0);
  say("nvindex kv-load: %llu keys of %u bytes (seed %llu) generated%s in %.1f s\n",
      static_cast<unsigned long long>(n), a.key_size, static_cast<unsigned long long>(a.seed),
      bulk ? " and sorted" : "", gen_s);

  kv::Options o;
  o.index = a.index;
  o.node_size = a.node_size;
  o.fill_factor = a.fill;
  o.max_value_bytes = std::max<uint32_t>(a.value_size, 1);
  std::unique_ptr<kv::Store> store;
  if (Status s = kv::Store::open_file(a.pool, pool_bytes, o, &store); !s.ok()) {
    std::fprintf(stderr, "nvindex kv-load: %s\n", s.ToString().c_str());
    return s.code() == Code::kInvalidArgument ? 2 : 1;
  }
  const auto t1 = std::chrono::steady_clock::now();
  Status s;
  if (bulk) {
    std::vector<kv::BulkItem> items(n);
    for (uint64_t r = 0; r < n; ++r) {
      const uint64_t i = order[r];
      items[r].key = key_at(i);
      items[r].value = {values.data() + i * a.value_size, a.value_size};
    }
    say("nvindex kv-load: bulk load of %llu items into %s at fill %.2f ...\n",
        static_cast<unsigned long long>(n), a.index.c_str(), a.fill);
    s = store->bulk_load(items);
  } else {
    say("nvindex kv-load: %s has no bulk load: %llu sets in key-generation (random) order\n",
        a.index.c_str(), static_cast<unsigned long long>(n));
    for (uint64_t i = 0; i < n && s.ok(); ++i) {
      s = store->set(key_at(i), {values.data() + i * a.value_size, a.value_size}, 0, 0);
      if (!a.quiet && (i + 1) % 1000000 == 0) {
        say("  %llu items, %.1f s\n", static_cast<unsigned long long>(i + 1), since(t1));
      }
    }
  }
  const double load_s = since(t1);
  if (!s.ok()) {
    std::fprintf(stderr, "nvindex kv-load: %s%s\n", s.ToString().c_str(),
                 s.code() == Code::kOutOfSpace ? " (give a larger --pool-size)" : "");
    store.reset();
    std::filesystem::remove(a.pool);
    return 1;
  }
  const kv::StoreInfo info = store->info();
  const uint64_t items = store->stats().curr_items;
  const pm::PageBacking pages = store->pool_pages();  // after the load: what it got
  store.reset();                                      // a clean close
  const double total_s = since(t0);
  if (a.format == "json") {
    nlohmann::json j{{"index", a.index},
                     {"pool", a.pool},
                     {"pool_bytes", info.pool_bytes},
                     {"records", n},
                     {"items", items},
                     {"key_size", a.key_size},
                     {"value_size", a.value_size},
                     {"seed", a.seed},
                     {"bulk_load", bulk},
                     {"fill", bulk ? nlohmann::json(a.fill) : nlohmann::json(nullptr)},
                     {"generate_seconds", gen_s},
                     {"load_seconds", load_s},
                     {"total_seconds", total_s}};
    // As bench's and tpcc's reports: the pool's pages when smaps told them.
    if (pages.known) j["pool_pages"] = bench::pool_pages_json(pages);
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf(
        "nvindex kv-load: %s store in %s (%.1f MiB): %llu items (%u B keys, %u B values, seed "
        "%llu) by %s in %.2f s (%.0f items/s); %.2f s in all\n",
        a.index.c_str(), a.pool.c_str(), info.pool_bytes / 1048576.0,
        static_cast<unsigned long long>(items), a.key_size, a.value_size,
        static_cast<unsigned long long>(a.seed),
        bulk ? ("bulk load at fill " + std::to_string(a.fill).substr(0, 4)).c_str() : "sets",
        load_s, load_s > 0 ? n / load_s : 0.0, total_s);
    if (pages.known) std::printf("  pool pages: %s\n", bench::pool_pages_text(pages).c_str());
  }
  return 0;
}

}  // namespace

void add_kv_load_command(CLI::App& app, int* exit_code) {
  auto a = std::make_shared<KvLoadArgs>();
  CLI::App* cmd = app.add_subcommand(
      "kv-load",
      "Fill a new pool file with a key-value store of N items for `nvindex serve` (the LB+-tree "
      "paper's bulk-loaded Memcached runs): item i of --seed has a random key computed from "
      "(seed, i), so a client can ask for loaded keys without a key file. Bottom-up bulk load at "
      "--fill where the index has one, else sets; closed cleanly. Exit 0 loaded, 1 the store "
      "could not be created or filled, 2 usage.");
  cmd->option_defaults()->always_capture_default();
  add_index_name(cmd, "--index", &a->index, "The store's index: " + kv_store_indexes(true));
  add_path(cmd, "--pool", &a->pool, ValueKind::kNewFile,
           "The pool file to create (on /dev/shm for emulated PM); must not exist")
      ->required();
  add_byte_size(cmd, "--pool-size", &a->pool_size, pm::kMinPoolSize, uint64_t{1} << 40, true,
                "Pool size, bytes (K, M, G, T suffixes); 0 = automatic: 64 MiB + per item its "
                "item and key blocks and 64 B / --fill of index, times 1.25");
  add_memory_count(cmd, "-n,--records", &a->records, 128, true,
                   "Items to load (the keys, values and their order are built in memory first)");
  add_count(cmd, "--key-size", &a->key_size, bench::kKvKeyCore, bench::kKvMaxKeySize,
            "Key bytes (the first 11 make it unique)");
  add_count(cmd, "--value-size", &a->value_size, 0, kv::kDefaultMaxValueBytes, "Value bytes");
  add_real(cmd, "--fill", &a->fill, 0, 1, true, "(0, 1]",
           "Fill factor of the bulk load's nodes (the paper: 0.7 and 1.0)");
  add_count(cmd, "--node-size", &a->node_size, 0, 4096,
            "Index node bytes; 0 = the index's default");
  add_seed(cmd, "--seed", &a->seed, "Seed of the keys (bench/kv_keys.h)");
  add_choice(cmd, "--format", &a->format, {"text", "json"}, "Output format of the summary");
  add_switch(cmd, "-q,--quiet", &a->quiet, "No progress on stderr");
  cmd->callback([a, exit_code] { *exit_code = run_kv_load(*a); });
}

}  // namespace nvindex::tools
