// `nvindex serve`: a memcached-protocol server over a persistent key-value
// store (docs/kv.md): the store (kv::Store) in a pool file, recovered when
// the file exists, memcached's ASCII protocol (src/server/) on a TCP port,
// worker threads with an event loop each (src/server/server.h). SIGTERM and
// SIGINT close it cleanly (the store's and the pool's close records).
// Exit codes: 0 stopped by a signal, 1 the store could not be opened
// (damage, I/O), 2 bad usage.
#include <signal.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <memory>
#include <string>

#include "bench/driver.h"
#include "nvindex/kv.h"
#include "nvindex/pm/persist.h"
#include "nvindex/pm/pool.h"
#include "server/process.h"
#include "server/server.h"
#include "tools/cli.h"
#include "tools/commands.h"

namespace nvindex::tools {
namespace {

struct ServeArgs {
  std::string index = "lbtree";
  std::string pool;
  std::string pool_size = "1G";
  std::string listen = "127.0.0.1";
  uint32_t port = 11211;
  uint32_t threads = 4;
  uint64_t max_connections = 1024;
  std::string max_item_size = "1M";
  bool quiet = false;
};

std::string mib(uint64_t bytes) {
  char b[32];
  std::snprintf(b, sizeof(b), "%.1f MiB", bytes / 1048576.0);
  return b;
}

/// Raises the open-file limit to cover the connections (memcached does);
/// says so when the hard limit is lower.
void raise_fd_limit(uint64_t conns, bool quiet) {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) != 0) return;
  const rlim_t want = static_cast<rlim_t>(conns + 64);
  if (r.rlim_cur >= want) return;
  r.rlim_cur = r.rlim_max == RLIM_INFINITY || r.rlim_max >= want ? want : r.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &r);
  if (r.rlim_cur < want && !quiet) {
    std::fprintf(stderr,
                 "nvindex serve: warning: the open-file limit is %llu, fewer than "
                 "--max-connections %llu + 64\n",
                 static_cast<unsigned long long>(r.rlim_cur),
                 static_cast<unsigned long long>(conns));
  }
}

int run_serve(const ServeArgs& a) {
  uint64_t pool_bytes = 0, max_item = 0;
  if (!bench::parse_byte_size(a.pool_size, &pool_bytes).ok() ||
      !bench::parse_byte_size(a.max_item_size, &max_item).ok()) {
    return 2;  // refused at parse time already (add_byte_size)
  }
  pm::PersistConfig config;
  config.mode = pm::Mode::kEmulated;
  pm::configure(config);
  kv::Options o;
  o.index = a.index;
  o.threads = a.threads;
  o.max_value_bytes = static_cast<uint32_t>(max_item);
  const IndexEntry* entry = find_index_entry(a.index);
  const bool persistent = entry != nullptr && needs_pool(entry->caps);
  if (persistent && a.pool.empty()) {
    std::fprintf(stderr,
                 "nvindex serve: --pool is required: %s keeps the store in a pool file (a "
                 "volatile store: --index btree without --pool)\n",
                 a.index.c_str());
    return 2;
  }
  if (!persistent && !a.pool.empty()) {
    std::fprintf(stderr,
                 "nvindex serve: --pool: %s is volatile, nothing of it would survive; drop --pool "
                 "or choose a persistent index (%s)\n",
                 a.index.c_str(), kv_store_indexes(true).c_str());
    return 2;
  }
  // Block the stop signals before any thread starts (the threads inherit
  // the mask); this thread waits for them below.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  const auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<pm::Pool> anon;
  std::unique_ptr<kv::Store> store;
  Status s;
  if (persistent) {
    s = kv::Store::open_file(a.pool, pool_bytes, o, &store);
  } else {
    s = pm::Pool::create_anonymous(pool_bytes, kv::Store::layout(a.index), &anon);
    if (s.ok()) s = kv::Store::open(anon.get(), o, &store);
  }
  if (!s.ok()) {
    std::fprintf(stderr, "nvindex serve: %s\n", s.ToString().c_str());
    return s.code() == Code::kInvalidArgument ? 2 : 1;
  }
  const double open_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  server::ServerState state;
  state.store = store.get();
  state.started = static_cast<int64_t>(std::time(nullptr));
  state.threads = a.threads;
  state.max_connections = a.max_connections;
  state.pool_bytes = store->info().pool_bytes;
  state.max_value_bytes = max_item;
  server::ServerOptions so;
  so.listen = a.listen;
  so.port = static_cast<uint16_t>(a.port);
  so.threads = a.threads;
  so.max_connections = a.max_connections;
  raise_fd_limit(a.max_connections, a.quiet);
  std::unique_ptr<server::Server> srv;
  if (Status st = server::Server::start(&state, so, &srv); !st.ok()) {
    std::fprintf(stderr, "nvindex serve: %s\n", st.ToString().c_str());
    return st.code() == Code::kInvalidArgument ? 2 : 1;
  }
  const kv::StoreInfo info = store->info();
  if (!a.quiet) {
    std::printf("nvindex serve: %s store, %s\n", a.index.c_str(),
                persistent ? ("pool " + a.pool + " (" + mib(info.pool_bytes) + ")").c_str()
                           : "volatile (no pool file: nothing survives a restart)");
    if (info.created) {
      std::printf("  a new store (open %.3f s)\n", open_s);
    } else {
      std::printf(
          "  recovered: last shutdown %s, %llu items, recovery %.3f s (index %.3f s, items "
          "%.3f s)\n",
          info.clean_shutdown ? "clean" : "NOT clean (crash or kill)",
          static_cast<unsigned long long>(info.items_at_open),
          info.index_recovery_seconds + info.item_recovery_seconds, info.index_recovery_seconds,
          info.item_recovery_seconds);
    }
    std::printf("  listening on %s:%u, %u threads, at most %llu connections, values up to %s\n",
                a.listen.c_str(), static_cast<unsigned>(srv->port()), a.threads,
                static_cast<unsigned long long>(a.max_connections), mib(max_item).c_str());
    std::fflush(stdout);
  }
  int sig = 0;
  sigwait(&stop, &sig);
  srv.reset();  // stops and joins the threads, closes the connections
  const uint64_t items = store->stats().curr_items;
  store.reset();  // the clean close: the store's and the pool's close records
  anon.reset();
  if (!a.quiet) {
    std::printf("nvindex serve: %s: closed cleanly, %llu items\n",
                sig == SIGINT ? "SIGINT" : "SIGTERM", static_cast<unsigned long long>(items));
  }
  return 0;
}

}  // namespace

void add_serve_command(CLI::App& app, int* exit_code) {
  auto a = std::make_shared<ServeArgs>();
  CLI::App* cmd = app.add_subcommand(
      "serve",
      "A memcached-protocol server (ASCII and meta commands, plus rget range reads) over a "
      "persistent key-value store in a pool file: every acknowledged write survives kill -9 or "
      "power failure; the pool is created when missing and recovered when present. SIGTERM or "
      "SIGINT closes it cleanly. A store, not a cache: a full pool answers 'SERVER_ERROR out of "
      "memory storing object', nothing is evicted. Exit 0 stopped by a signal, 1 the store could "
      "not be opened, 2 usage.");
  cmd->option_defaults()->always_capture_default();
  add_index_name(cmd, "--index", &a->index,
                 "The index that maps keys to items: " + kv_store_indexes(true) +
                     " (persistent), or " + kv_store_indexes(false) +
                     " (volatile, without --pool)");
  add_path(cmd, "--pool", &a->pool, ValueKind::kOutputFile,
           "The pool file (on /dev/shm for emulated PM): created when missing, recovered when "
           "present");
  add_byte_size(cmd, "--pool-size", &a->pool_size, pm::kMinPoolSize, uint64_t{1} << 40, false,
                "Size of a new pool, bytes (K, M, G, T suffixes); an existing pool keeps its own");
  add_text(cmd, "--listen", &a->listen, "IPv4 address to listen on (memcached's -l)");
  add_count(cmd, "--port", &a->port, 0, 65535, "TCP port (memcached's -p); 0 = any free port");
  add_count(cmd, "--threads", &a->threads, 1, 256, "Worker threads (memcached's -t)");
  add_count(cmd, "--max-connections", &a->max_connections, 1, 1000000,
            "Connections at once (memcached's -c); one more is refused");
  add_byte_size(cmd, "--max-item-size", &a->max_item_size, 1024, kv::kMaxValueBytesLimit, false,
                "Largest value, bytes (memcached's -I; K, M suffixes)");
  add_switch(cmd, "-q,--quiet", &a->quiet, "No start-up and shutdown lines");
  cmd->callback([a, exit_code] { *exit_code = run_serve(*a); });
}

}  // namespace nvindex::tools
