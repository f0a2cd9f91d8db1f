// `nvindex torture`: process-crash torture of a persistent index (issue 3 §5,
// src/crash/torture.h): a child runs a mixed workload on a file-backed pool
// and acknowledges each operation through a pipe; the parent kills it with
// SIGKILL at seeded random times, recovers a copy of the pool, runs verify()
// and checks every acknowledged operation is present and nothing else
// appeared. A block-device index (leveldb, rocksdb, PA-Tree) runs on the
// device path given as --pool (a directory or file on a real disk), with
// --sync-every N for its weak persistence. Exit codes: 0 no failure, 1 a
// failed check, 2 bad usage.
#include "crash/torture.h"

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "bench/driver.h"
#include "nvindex/index.h"
#include "nvindex/pm/persist.h"
#include "nvindex/pm/pool.h"
#include "tools/cli.h"
#include "tools/commands.h"
#include "tools/index_opts.h"

namespace nvindex::tools {
namespace {

/// torture's node size when --node-size is not given, bytes (small: splits
/// and merges in a few operations).
constexpr uint32_t kTortureNodeSize = 256;

struct TortureArgs {
  crash::TortureOptions o;
  std::string pool_size = "16M";        ///< --pool-size, bytes with a suffix
  std::vector<std::string> index_opts;  ///< --index-opt name=value
};

int run_torture_command(TortureArgs& a) {
  pm::PersistConfig config;
  config.mode = pm::Mode::kEmulated;
  pm::configure(config);
  if (Status s = bench::parse_byte_size(a.pool_size, &a.o.pool_bytes); !s.ok()) {
    std::fprintf(stderr, "nvindex torture: --pool-size: %s\n", s.message().c_str());
    return 2;  // refused at parse time already (add_byte_size)
  }
  const IndexEntry* entry = find_index_entry(a.o.index);
  if (a.o.node_size == 0) {
    // Not given: 256, or the index's own default where it does not take 256
    // (run_node_size, as bench).
    a.o.node_size = entry != nullptr ? run_node_size(*entry, kTortureNodeSize) : kTortureNodeSize;
  }
  if (Status s = check_node_size_for(a.o.index, a.o.node_size); !s.ok()) {
    std::fprintf(stderr, "nvindex torture: --node-size: %s\n", s.message().c_str());
    return 2;
  }
  if (Status s = parse_index_opts_for(a.o.index, a.index_opts, &a.o.index_opts); !s.ok()) {
    std::fprintf(stderr, "nvindex torture: %s\n", s.message().c_str());
    return 2;
  }
  crash::TortureReport r;
  const Status st = crash::run_torture(a.o, &r);
  if (!st.ok()) {
    std::fprintf(stderr, "nvindex torture: %s\n", st.ToString().c_str());
    return st.code() == Code::kIOError || st.code() == Code::kCorruption ? 1 : 2;
  }
  std::printf("index:              %s (%s keys, node size %u, %u thread%s, seed %llu)\n",
              index_with_opts(a.o.index, a.o.index_opts).c_str(),
              std::string(key_type_name(a.o.key_type)).c_str(), a.o.node_size, a.o.threads,
              a.o.threads == 1 ? "" : "s", static_cast<unsigned long long>(a.o.seed));
  if (entry != nullptr && needs_device(entry->caps)) {
    std::printf("device:             %s\n", a.o.pool_path.c_str());
  } else {
    std::printf("pool:               %s (%s bytes, emulated)\n", a.o.pool_path.c_str(),
                with_commas(a.o.pool_bytes).c_str());
  }
  if (a.o.sync_every != 0) {
    std::printf(
        "weak persistence:   sync() every %u ops of thread 0: %llu syncs, %llu keys "
        "found in an older state allowed since the last sync\n",
        a.o.sync_every, static_cast<unsigned long long>(r.syncs),
        static_cast<unsigned long long>(r.unsynced_lost));
  }
  std::printf("run time:           %.2f s\n", r.seconds);
  std::printf("kills:              %u (%u before the child reported ready)\n", r.kills,
              r.killed_before_ready);
  std::printf("acknowledged ops:   %llu (insert %llu, update %llu, remove %llu, lookup %llu)\n",
              static_cast<unsigned long long>(r.acked_ops),
              static_cast<unsigned long long>(r.acked_inserts),
              static_cast<unsigned long long>(r.acked_updates),
              static_cast<unsigned long long>(r.acked_removes),
              static_cast<unsigned long long>(r.acked_lookups));
  std::printf("in-flight applied:  %llu\n", static_cast<unsigned long long>(r.inflight_applied));
  std::printf(
      "recoveries checked: %u (each after a kill: no close record, so every key is "
      "checked against the acknowledged operations instead)\n",
      r.recoveries);
  std::printf("recovery time:      min %.3f ms, median %.3f ms, max %.3f ms (open + recover)\n",
              r.recovery_min() * 1e3, r.recovery_median() * 1e3, r.recovery_max() * 1e3);
  std::printf("final state:        %llu keys, %llu leaves, %llu inner nodes, height %u\n",
              static_cast<unsigned long long>(r.final_keys),
              static_cast<unsigned long long>(r.last_verify.leaves),
              static_cast<unsigned long long>(r.last_verify.inner_nodes), r.last_verify.height);
  std::printf("failures:           %zu\n", r.failures.size());
  for (const crash::TortureFailure& f : r.failures) {
    std::printf("  round %u: %s\n", f.round, f.what.c_str());
  }
  return r.failures.empty() ? 0 : 1;
}

}  // namespace

void add_torture_command(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<TortureArgs>();
  CLI::App* cmd = app.add_subcommand(
      "torture",
      "Process-crash torture: a child runs a mixed workload on a new file-backed pool and is "
      "killed with SIGKILL at random times; after each kill the pool is recovered, verified and "
      "checked against every acknowledged operation. Stops after --kills kills or --seconds "
      "seconds. Exit 0 no failure, 1 a failure, 2 usage.");
  cmd->option_defaults()->always_capture_default();
  crash::TortureOptions& o = args->o;
  o.node_size = 0;  // not given: run_torture_command picks it
  add_index_name(cmd, "--index", &o.index, "Registered persistent index")->required();
  add_key_type_option(cmd, &o.key_type,
                      "integer keys, or the index's string instance with byte-string keys");
  add_path(cmd, "--pool", &o.pool_path, ValueKind::kNewFile,
           "Pool file to create (must not exist; its directory must), e.g. /dev/shm/t.pool; for "
           "a block-device index its device path on a real disk, e.g. /var/tmp/t.ldb")
      ->required();
  add_count(cmd, "--sync-every", &o.sync_every, 0, 1 << 30,
            "Block-device indexes: weak persistence, thread 0 calls sync() after every N "
            "of its operations and only what the last sync covered must survive (0: "
            "strong, every acknowledged operation)");
  add_real(cmd, "--seconds", &o.seconds, 0, 604800, true, "(0, 604,800] s",
           "Stop after this many seconds");
  add_count(cmd, "--kills", &o.kills, 1, 1 << 30, "Stop after this many kills");
  add_seed(cmd, "--seed", &o.seed, "Seed of the op streams and kill delays");
  add_count(cmd, "--node-size", &o.node_size, 64, 65536,
            "Node size in bytes (default 256: more splits and merges; an index that does not "
            "take 256 runs at its own default)");
  add_text(cmd, "--index-opt", &args->index_opts,
           "Index-specific knob name=value, at creation and every reopen (repeatable)");
  add_count(cmd, "--threads", &o.threads, 1, 16,
            "Worker threads in the child (>1 needs a thread-safe index)");
  add_memory_count(cmd, "--keys", &o.keys, 64, false,
                   "Key space size (0: 64 nodes' worth of entries)");
  add_byte_size(cmd, "--pool-size", &args->pool_size, pm::kMinPoolSize, uint64_t{1} << 40, false,
                "Pool size, bytes with K/M/G/T suffixes, e.g. 64M (a block-device index: its "
                "device_bytes)");
  add_real(cmd, "--max-run-ms", &o.max_run_ms, 0, 3600000, true, "(0, 3,600,000] ms",
           "A child runs uniform [0, this] ms after it is ready before the kill");
  add_switch(cmd, "--keep-pool", &o.keep_pool,
             "Keep the pool file after a clean run (always kept after a failure)");
  cmd->callback([args, exit_code] { *exit_code = run_torture_command(*args); });
}

}  // namespace nvindex::tools
