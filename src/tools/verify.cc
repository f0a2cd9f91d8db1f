// `nvindex verify`: opens a pool, recovers the index in it (make_index on a
// pool with a root recovers) and checks its structure with Index::verify().
// Reports the rebuild (recovery) time: the whole open + recover wall time and
// the index's own IndexInfo::recovery_seconds, with --threads N passed as
// IndexOptions::threads (indexes with a parallel recovery, e.g. lbtree,
// rebuild with N threads), plus keys, leaves, inner nodes and height; text, or
// one JSON object with --format json (schema "nvindex.verify/1": "pool",
// "index", "key_type", "threads", "clean_shutdown", "close_record_checked"
// (the previous close left a close record recovery held the structure
// against; false after a crash: see "previous close" below), "recovery_seconds",
// "rebuild_seconds", "structure_ok", "error", "keys", "leaves",
// "inner_nodes", "height", "pm_bytes", "dram_bytes", "reachable_bytes",
// "allocated_bytes_at_close" and "keys_at_close": the pool's close record,
// null when there is none: no clean close since the last recovery). A cleanly closed pool
// whose structure reaches fewer or other blocks, or holds another number of
// keys, than its close record fails recovery with Corruption (exit 1). The
// text report's "previous close" line says whether that check was made:
// after a crash there is no record, and "entry count not checked against a
// record" (docs/crash-lab.md, "Damage after a crash", lists what goes
// unseen then).
// Exit codes: 0 the structure is sound, 1 corruption (of the pool or the
// index) or a failed recovery, 2 bad usage (unknown or volatile index, missing
// file, pool of another index or key type). --key-type string opens the
// index's string-key instance (pool layout "<index>:string").
#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "crash/string_keys.h"
#include "nvindex/index.h"
#include "nvindex/pm/pool.h"
#include "tools/cli.h"
#include "tools/commands.h"
#include "tools/index_opts.h"

namespace nvindex::tools {
namespace {

struct VerifyArgs {
  std::string index;
  KeyType key_type = KeyType::kInteger;
  std::string pool;
  uint32_t node_size = 0;  ///< 0: not given (512, or the index's own default)
  std::string pm_mode = "emulated";
  unsigned threads = 1;
  std::vector<std::string> index_opts;
  std::string format = "text";
};

/// What the previous close lets recovery check, as verify prints it: a
/// clean close leaves a close record (pool.h) that the reachability pass
/// held the structure against; a crash leaves none, so damage that only
/// drops entries (a cleared entry count, bitmap or sibling offset) cannot
/// be told from removes (docs/crash-lab.md, "Damage after a crash").
std::string close_check_text(const pm::Pool& pool) {
  const pm::Pool::CloseRecord& r = pool.close_record_at_open();
  if (r.bytes != 0) {
    return r.keys ? "clean; allocated bytes and entry count checked against its close record"
                  : "clean; allocated bytes checked against its close record (no entry count "
                    "recorded)";
  }
  return pool.was_clean_shutdown()
             ? "clean, without a close record; entry count not checked against a record"
             : "not clean (a crash); entry count not checked against a record";
}

int run_verify(const VerifyArgs& a) {
  const IndexEntry* entry = find_index_entry(a.index);
  std::string known;
  for (const IndexEntry& e : registered_indexes()) {
    if (needs_pool(e.caps)) known += (known.empty() ? "" : ", ") + std::string(e.name);
  }
  if (entry != nullptr && needs_device(entry->caps)) {
    std::fprintf(stderr,
                 "nvindex verify: '%s' is a block-device index: verify checks pool files "
                 "(pools: %s)\n",
                 a.index.c_str(), known.c_str());
    return 2;
  }
  if (entry == nullptr || !entry->caps.persistent) {
    std::fprintf(stderr,
                 "nvindex verify: '%s' is not a registered persistent index%s (persistent: %s)\n",
                 a.index.c_str(), entry ? ": it is volatile and has no pool" : "",
                 known.empty() ? "none registered yet" : known.c_str());
    return 2;
  }
  if (a.key_type == KeyType::kString && !entry->caps.string_keys) {
    std::fprintf(stderr, "nvindex verify: '%s' has no string keys\n", a.index.c_str());
    return 2;
  }
  pm::PersistConfig config;
  if (Status st = pm::parse_mode(a.pm_mode, &config.mode); !st.ok()) {
    std::fprintf(stderr, "nvindex verify: --pm-mode: %s\n", st.message().c_str());
    return 2;
  }
  if (config.mode == pm::Mode::kDram) {
    std::fprintf(stderr, "nvindex verify: --pm-mode dram has no pool file to open\n");
    return 2;
  }
  pm::configure(config);
  IndexOptions options;
  // Not given: 512, or the index's own default where it does not take 512
  // (run_node_size, as bench).
  options.node_size = a.node_size != 0 ? a.node_size : run_node_size(*entry, 512);
  options.threads = a.threads;
  if (Status s = parse_index_opts_for(a.index, a.index_opts, &options.extra); !s.ok()) {
    std::fprintf(stderr, "nvindex verify: %s\n", s.message().c_str());
    return 2;
  }

  const auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<pm::Pool> pool;
  if (Status st = pm::Pool::open(a.pool, pool_layout(a.index, a.key_type), config.mode, &pool);
      !st.ok()) {
    std::fprintf(stderr, "nvindex verify: %s: %s\n", a.pool.c_str(), st.ToString().c_str());
    return st.code() == Code::kCorruption ? 1 : 2;
  }
  options.pool = pool.get();
  std::unique_ptr<Index<uint64_t>> index;
  if (Status st = crash::make_keyed_index(a.index, a.key_type, options, &index); !st.ok()) {
    std::fprintf(stderr, "nvindex verify: %s: recovery failed: %s\n", a.pool.c_str(),
                 st.ToString().c_str());
    return st.code() == Code::kInvalidArgument ? 2 : 1;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const IndexInfo info = index->info();
  // The close record (pool.h) read at open: what was allocated at the last
  // clean close, which recovery's reachability pass has checked against
  // what the structure reaches (reached_bytes, before recovery's repairs).
  const pm::Pool::CloseRecord record = pool->close_record_at_open();
  VerifyReport report;
  Status st = index->verify(&report);
  if (a.format == "json") {
    nlohmann::json j{{"schema", "nvindex.verify/1"},
                     {"pool", a.pool},
                     {"index", a.index},
                     {"key_type", std::string(key_type_name(a.key_type))},
                     {"threads", a.threads},
                     {"clean_shutdown", pool->was_clean_shutdown()},
                     {"close_record_checked", record.bytes != 0},
                     {"recovery_seconds", seconds},
                     {"rebuild_seconds", info.recovery_seconds},
                     {"structure_ok", st.ok()},
                     {"error", st.ok() ? "" : st.ToString()},
                     {"keys", report.keys},
                     {"leaves", report.leaves},
                     {"inner_nodes", report.inner_nodes},
                     {"height", report.height},
                     {"pm_bytes", info.pm_bytes},
                     {"dram_bytes", info.dram_bytes},
                     {"reachable_bytes", pool->reached_bytes()}};
    j["allocated_bytes_at_close"] =
        record.bytes != 0 ? nlohmann::json(record.bytes) : nlohmann::json(nullptr);
    j["keys_at_close"] = record.keys ? nlohmann::json(*record.keys) : nlohmann::json(nullptr);
    std::printf("%s\n", j.dump(2).c_str());
    return st.ok() ? 0 : 1;
  }
  std::printf("pool:            %s\n", a.pool.c_str());
  std::printf("index:           %s (%s keys)\n", a.index.c_str(),
              std::string(key_type_name(a.key_type)).c_str());
  std::printf("previous close:  %s\n", close_check_text(*pool).c_str());
  std::printf("recovery:        %.6f s (open + recover, %u thread%s)\n", seconds, a.threads,
              a.threads == 1 ? "" : "s");
  std::printf("rebuild:         %.6f s (the index's own recovery time)\n", info.recovery_seconds);
  if (record.bytes != 0) {
    std::printf("allocated:       %llu bytes in blocks at the last clean close\n",
                static_cast<unsigned long long>(record.bytes));
  } else {
    std::printf("allocated:       not recorded (no clean close since the last recovery)\n");
  }
  std::printf("reachable:       %llu bytes in blocks (recovery's reachability pass)\n",
              static_cast<unsigned long long>(pool->reached_bytes()));
  if (!st.ok()) {
    std::printf("structure:       CORRUPT: %s\n", st.ToString().c_str());
    return 1;
  }
  std::printf("structure:       ok\n");
  std::printf("keys:            %llu\n", static_cast<unsigned long long>(report.keys));
  std::printf("leaves:          %llu\n", static_cast<unsigned long long>(report.leaves));
  std::printf("inner nodes:     %llu\n", static_cast<unsigned long long>(report.inner_nodes));
  std::printf("height:          %u\n", report.height);
  std::printf("PM bytes:        %llu\n", static_cast<unsigned long long>(info.pm_bytes));
  std::printf("DRAM bytes:      %llu\n", static_cast<unsigned long long>(info.dram_bytes));
  return 0;
}

}  // namespace

void add_verify_command(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<VerifyArgs>();
  CLI::App* cmd = app.add_subcommand(
      "verify",
      "Open a pool, recover the index in it and check its structure (keys ordered, separators "
      "bound children, sibling links consistent). Exit 0 ok, 1 corruption, 2 usage.");
  cmd->option_defaults()->always_capture_default();
  add_index_name(cmd, "--index", &args->index, "Registered persistent index the pool holds")
      ->required();
  add_key_type_option(cmd, &args->key_type,
                      "the key type the pool's index was created with (pool layout "
                      "'<index>:string' for string keys)");
  add_path(cmd, "--pool", &args->pool, ValueKind::kInputFile,
           "Pool file (e.g. from nvindex bench --keep-pool); a regular file")
      ->required();
  add_count(cmd, "--node-size", &args->node_size, 64, 65536,
            "Node size in bytes, as used to create it (default 512, or the index's own "
            "default where it does not take 512)");
  add_choice(cmd, "--pm-mode", &args->pm_mode, {"emulated", "dax"}, "PM mode");
  add_count(cmd, "--threads", &args->threads, 1, 1024,
            "Recovery threads (IndexOptions::threads: lbtree rebuilds its inner nodes "
            "with this many)");
  add_text(cmd, "--index-opt", &args->index_opts,
           "Index-specific knob name=value, as used to create it (repeatable)");
  add_choice(cmd, "--format", &args->format, {"text", "json"}, "Output format");
  cmd->callback([args, exit_code] { *exit_code = run_verify(*args); });
}

}  // namespace nvindex::tools
