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

#include "nvindex/index.h"
#include "nvindex/pm/persist.h"
#include "tools/cli_checks.h"
#include "tools/commands.h"
#include "tools/index_opts.h"

namespace nvindex::tools {
namespace {

struct TortureArgs {
  crash::TortureOptions o;
  uint64_t pool_mib = 16;
  std::vector<std::string> index_opts;  ///< --index-opt name=value
};

int run_torture_command(TortureArgs& a) {
  pm::PersistConfig config;
  config.mode = pm::Mode::kEmulated;
  pm::configure(config);
  a.o.pool_bytes = a.pool_mib << 20;
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
  const IndexEntry* e = find_index_entry(a.o.index);
  if (e != nullptr && needs_device(e->caps)) {
    std::printf("device:             %s\n", a.o.pool_path.c_str());
  } else {
    std::printf("pool:               %s (%llu MiB, emulated)\n", a.o.pool_path.c_str(),
                static_cast<unsigned long long>(a.pool_mib));
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
  std::printf("recoveries checked: %u\n", r.recoveries);
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
  cmd->add_option("--index", o.index, "Registered persistent index")->required();
  add_key_type_option(cmd, &o.key_type,
                      "integer keys, or the index's string instance with byte-string keys");
  cmd->add_option("--pool", o.pool_path,
                  "Pool file to create (must not exist), e.g. /dev/shm/t.pool; for a "
                  "block-device index its device path on a real disk, e.g. /var/tmp/t.ldb")
      ->required();
  cmd->add_option("--sync-every", o.sync_every,
                  "Block-device indexes: weak persistence, thread 0 calls sync() after every N "
                  "of its operations and only what the last sync covered must survive (0: "
                  "strong, every acknowledged operation)")
      ->check(count_in(0, 1 << 30, "0..1,073,741,824"));
  cmd->add_option("--seconds", o.seconds, "Stop after this many seconds")
      ->check(in_range(0, 604800, "(0, 604800] s", true));
  cmd->add_option("--kills", o.kills, "Stop after this many kills")
      ->check(count_in(1, 1 << 30, "1..1,073,741,824"));
  cmd->add_option("--seed", o.seed, "Seed of the op streams and kill delays")->check(no_sign());
  cmd->add_option("--node-size", o.node_size, "Node size in bytes (small: more splits and merges)")
      ->check(count_in(64, 65536, "64..65536"));
  cmd->add_option("--index-opt", args->index_opts,
                  "Index-specific knob name=value, at creation and every reopen (repeatable)");
  cmd->add_option("--threads", o.threads,
                  "Worker threads in the child (>1 needs a thread-safe index)")
      ->check(count_in(1, 16, "1..16"));
  cmd->add_option("--keys", o.keys, "Key space size (0: 64 nodes' worth of entries)")
      ->check(fits_memory(64, false));
  cmd->add_option("--pool-size", args->pool_mib,
                  "Pool size, MiB (a block-device index: its device_bytes)")
      ->check(count_in(4, 1 << 20, "4..1,048,576 MiB"));
  cmd->add_option("--max-run-ms", o.max_run_ms,
                  "A child runs uniform [0, this] ms after it is ready before the kill")
      ->check(in_range(0, 3600000, "(0, 3600000] ms", true));
  cmd->add_flag("--keep-pool", o.keep_pool,
                "Keep the pool file after a clean run (always kept after a failure)");
  cmd->callback([args, exit_code] { *exit_code = run_torture_command(*args); });
}

}  // namespace nvindex::tools
