// `nvindex kv-client`: the key-value benchmark's client, a driver over
// libmemcached's C API (libmemcached 1.1, Debian libmemcached-dev; the
// stock C client of memcached, the one memcaslap and memccapable are built
// on), so the server is driven through a client we did not write: its
// connection handling, ASCII framing and reply parsing are libmemcached's.
//
// Why a driver and not memcaslap itself: memcaslap's keys are its own
// random keys (gets find only what it set in the same run), so it cannot
// read a set bulk-loaded by `nvindex kv-load`, it cannot check a value, and
// it reports mean latency, not percentiles. This driver asks for the loaded
// keys by (seed, i) (bench/kv_keys.h), checks every value it gets, and
// times every request.
//
// The phases (the LB+-tree paper's Memcached runs, Liu et al., VLDB 2020,
// §4.4, Figure 17: get or set of 500K random keys over a loaded tree):
//   get   --ops gets of keys of random loaded items i in [0, --records)
//   set   --ops sets of fresh items (i >= --records + --fresh-offset, each
//         thread its own range): inserts of new random keys
//   mix   --get-ratio gets as above, the rest sets of fresh items
//   load  sets of items 0 .. --records - 1, split among the threads (fills
//         a server that has no kv-load, e.g. memcached); with --pipeline P
//         > 1 not through libmemcached but P ASCII sets per write on a plain
//         socket, then their P replies, each of which must be STORED (every
//         set acknowledged, none lost unnoticed; a setup step, not timed
//         per request)
// Each of --threads threads has one connection and one request in flight
// (blocking calls, as mc-benchmark's clients each wait for their reply):
// throughput, and latency from the send of a request to its whole reply.
//
// Exit codes: 0 every get found its item with the right value and every set
// was stored; 1 a miss, a wrong value, an error (the counts are printed) or
// no server; 2 usage.
#include <libmemcached/memcached.h>
#include <netdb.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "bench/kv_keys.h"
#include "tools/cli.h"
#include "tools/commands.h"

namespace nvindex::tools {
namespace {

struct KvClientArgs {
  std::string server = "127.0.0.1:11211";
  uint32_t threads = 1;
  std::string op = "get";
  uint64_t ops = 500000;
  uint64_t records = 1000000;
  uint32_t key_size = bench::kKvDefaultKeySize;
  uint32_t value_size = bench::kKvDefaultValueSize;
  double get_ratio = 0.9;
  uint64_t seed = 1;
  uint64_t fresh_offset = 0;
  uint32_t pipeline = 1;
  std::string format = "text";
  bool quiet = false;
};

/// "HOST:PORT" split; false when it is not that (port 1..65535).
bool split_server(const std::string& s, std::string* host, unsigned* port) {
  const size_t colon = s.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == s.size()) return false;
  unsigned p = 0;
  for (size_t i = colon + 1; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9' || p > 65535) return false;
    p = p * 10 + static_cast<unsigned>(s[i] - '0');
  }
  if (p == 0 || p > 65535) return false;
  *host = s.substr(0, colon);
  *port = p;
  return true;
}

/// One thread's results: latencies of its requests (ns) and its counts.
struct ThreadResult {
  std::vector<uint32_t> latency_ns;
  uint64_t gets = 0, sets = 0, misses = 0, wrong = 0, errors = 0;
  std::string first_error;
};

/// splitmix64 steps: a thread's random item numbers.
struct Rng {
  uint64_t s;
  uint64_t next() { return bench::kv_mix(s += 0x9e3779b97f4a7c15ull); }
};

/// A TCP connection to host:port with 10 s send and receive timeouts, or -1.
int connect_tcp(const std::string& host, unsigned port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0) return -1;
  int fd = -1;
  for (addrinfo* ai = res; ai != nullptr && fd < 0; ai = ai->ai_next) {
    fd = ::socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
    if (fd < 0) continue;
    timeval tv{10, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    if (::connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(res);
  return fd;
}

/// --op load --pipeline P > 1: items [lo, lo + n) as batches of P sets
/// (memcached ASCII protocol, doc/protocol.txt "Storage commands"), each
/// batch written at once (a batch ends at P sets or once it holds 256 KiB,
/// so it is at most 256 KiB plus one set) and then its replies read: every
/// reply must be "STORED\r\n" (8 bytes); any other line is an error. The
/// replies of a batch are short lines (at most 1,024 of them), so the server
/// never blocks on its send buffer while this side is still writing.
void run_pipelined_load(const KvClientArgs& a, const std::string& host, unsigned port, uint64_t lo,
                        uint64_t n, std::atomic<uint64_t>* done, ThreadResult* r) {
  const int fd = connect_tcp(host, port);
  if (fd < 0) {
    r->errors = n;
    r->first_error = "load: cannot connect to " + a.server;
    return;
  }
  std::string key(a.key_size, '\0'), value(a.value_size, '\0'), out, in;
  const std::string head_tail = " 0 0 " + std::to_string(a.value_size) + "\r\n";
  char buf[8192];
  for (uint64_t i = lo; i < lo + n && r->errors == 0;) {
    out.clear();
    uint64_t batch = 0;
    for (; batch < a.pipeline && i < lo + n && out.size() < (256u << 10); ++batch, ++i) {
      bench::kv_key(a.seed, i, a.key_size, key.data());
      bench::kv_value(key, a.value_size, value.data());
      out.append("set ").append(key).append(head_tail).append(value).append("\r\n");
    }
    size_t sent = 0;
    while (sent < out.size()) {
      const ssize_t w = ::send(fd, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
      if (w <= 0) break;
      sent += static_cast<size_t>(w);
    }
    if (sent < out.size()) {
      r->errors += batch;
      r->first_error = "load: the server closed the connection or stopped reading";
      break;
    }
    // Read the batch's replies: complete lines until `batch` of them.
    uint64_t replies = 0;
    while (replies < batch) {
      size_t eol;
      while (replies < batch && (eol = in.find("\r\n")) != std::string::npos) {
        if (in.compare(0, eol, "STORED") == 0) {
          ++r->sets;
        } else if (r->errors++ == 0) {
          r->first_error = "load: set replied " + in.substr(0, std::min<size_t>(eol, 200));
        }
        in.erase(0, eol + 2);
        ++replies;
      }
      if (replies == batch) break;
      const ssize_t got = ::recv(fd, buf, sizeof(buf), 0);
      if (got <= 0) {
        r->errors += batch - replies;
        if (r->first_error.empty()) r->first_error = "load: no reply from the server within 10 s";
        break;
      }
      in.append(buf, static_cast<size_t>(got));
    }
    done->fetch_add(batch, std::memory_order_relaxed);
  }
  ::close(fd);
}

void run_thread(const KvClientArgs& a, const std::string& host, unsigned port, uint32_t t,
                uint64_t ops, std::atomic<uint64_t>* done, ThreadResult* r) {
  if (a.op == "load" && a.pipeline > 1) {
    run_pipelined_load(a, host, port, a.records * t / a.threads, ops, done, r);
    return;
  }
  memcached_st* mc = memcached_create(nullptr);
  memcached_server_add(mc, host.c_str(), static_cast<in_port_t>(port));
  memcached_behavior_set(mc, MEMCACHED_BEHAVIOR_TCP_NODELAY, 1);
  // A request waits for its reply at most 10 s (a stuck server is an error,
  // not a hang); the thread stops at its 100th error (below).
  memcached_behavior_set(mc, MEMCACHED_BEHAVIOR_CONNECT_TIMEOUT, 5000);
  memcached_behavior_set(mc, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, 10000);
  r->latency_ns.reserve(ops);
  Rng rng{a.seed * 0x2545f4914f6cdd1dull + t + 1};
  std::string key(a.key_size, '\0'), want(a.value_size, '\0');
  // Fresh items of thread t: from records + fresh_offset + t * 2^40 on.
  uint64_t fresh = a.records + a.fresh_offset + (uint64_t{t} << 40);
  // load: items [lo, hi) of thread t.
  const uint64_t lo = a.records * t / a.threads;
  const bool load = a.op == "load";
  const auto note_error = [&](const char* what, memcached_return_t rc) {
    if (r->errors++ == 0) {
      r->first_error = std::string(what) + ": " + memcached_strerror(mc, rc);
    }
  };
  for (uint64_t j = 0; j < ops; ++j) {
    bool is_get;
    uint64_t item;
    if (load) {
      is_get = false;
      item = lo + j;
    } else {
      is_get = a.op == "get" ||
               (a.op == "mix" && static_cast<double>(rng.next() >> 11) * 0x1.0p-53 < a.get_ratio);
      item = is_get ? rng.next() % a.records : fresh++;
    }
    bench::kv_key(a.seed, item, a.key_size, key.data());
    bench::kv_value(key, a.value_size, want.data());
    const auto t0 = std::chrono::steady_clock::now();
    // The request's latency, from its send to its whole reply, ns.
    const auto record_latency = [&] {
      const auto ns = std::chrono::nanoseconds(std::chrono::steady_clock::now() - t0).count();
      r->latency_ns.push_back(static_cast<uint32_t>(std::min<int64_t>(ns, UINT32_MAX)));
    };
    if (is_get) {
      size_t len = 0;
      uint32_t flags = 0;
      memcached_return_t rc = MEMCACHED_SUCCESS;
      char* v = memcached_get(mc, key.data(), key.size(), &len, &flags, &rc);
      record_latency();
      ++r->gets;
      if (v != nullptr) {
        if (len != want.size() || std::memcmp(v, want.data(), len) != 0) ++r->wrong;
        std::free(v);
      } else if (rc == MEMCACHED_SUCCESS) {  // libmemcached's empty value
        if (!want.empty()) ++r->wrong;
      } else if (rc == MEMCACHED_NOTFOUND) {
        ++r->misses;
      } else {
        note_error("get", rc);
      }
    } else {
      const memcached_return_t rc =
          memcached_set(mc, key.data(), key.size(), want.data(), want.size(), 0, 0);
      record_latency();
      ++r->sets;
      if (rc != MEMCACHED_SUCCESS) note_error("set", rc);
    }
    if ((j & 1023) == 1023) done->fetch_add(1024, std::memory_order_relaxed);
    // Without a server every request fails at once: stop at the first 100.
    if (r->errors >= 100) break;
  }
  memcached_free(mc);
}

/// The nearest-rank percentile of sorted `v`, µs: the value at rank
/// ceil(permille / 1000 * n) (1-based), computed in integers so that, say,
/// p99.9 of 1,000 values is the 999th and not, by a rounding error, the
/// largest. `permille`: 500 = p50, 990 = p99, 999 = p99.9.
double percentile_us(const std::vector<uint32_t>& v, uint64_t permille) {
  if (v.empty()) return 0;
  const uint64_t n = v.size();
  const uint64_t rank = std::clamp<uint64_t>((permille * n + 999) / 1000, 1, n);
  return v[rank - 1] / 1000.0;
}

double cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

int run_kv_client(const KvClientArgs& a) {
  std::string host;
  unsigned port = 0;
  if (!split_server(a.server, &host, &port)) {
    std::fprintf(stderr, "nvindex kv-client: --server %s: give HOST:PORT\n", a.server.c_str());
    return 2;
  }
  const bool load = a.op == "load";
  const uint64_t total = load ? a.records : a.ops;
  if (!a.quiet) {
    std::fprintf(stderr, "nvindex kv-client: %s, %s of %llu %s, %u thread%s ...\n",
                 a.server.c_str(), a.op.c_str(), static_cast<unsigned long long>(total),
                 load ? "items" : "operations", a.threads, a.threads == 1 ? "" : "s");
  }
  std::vector<ThreadResult> results(a.threads);
  std::vector<std::thread> threads;
  std::atomic<uint64_t> done{0};
  const double cpu0 = cpu_seconds();
  const auto t0 = std::chrono::steady_clock::now();
  for (uint32_t t = 0; t < a.threads; ++t) {
    const uint64_t n = load ? a.records * (t + 1) / a.threads - a.records * t / a.threads
                            : a.ops * (t + 1) / a.threads - a.ops * t / a.threads;
    threads.emplace_back(run_thread, std::cref(a), std::cref(host), port, t, n, &done, &results[t]);
  }
  // Progress every 10 s on stderr while the threads run.
  std::atomic<bool> finished{false};
  std::thread progress([&] {
    auto next = t0 + std::chrono::seconds(10);
    while (!finished.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      if (!a.quiet && std::chrono::steady_clock::now() >= next) {
        std::fprintf(stderr, "  %llu of %llu\n", static_cast<unsigned long long>(done.load()),
                     static_cast<unsigned long long>(total));
        next += std::chrono::seconds(10);
      }
    }
  });
  for (std::thread& t : threads) t.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  finished = true;
  progress.join();
  const double cpu = cpu_seconds() - cpu0;

  ThreadResult all;
  for (ThreadResult& r : results) {
    all.latency_ns.insert(all.latency_ns.end(), r.latency_ns.begin(), r.latency_ns.end());
    all.gets += r.gets;
    all.sets += r.sets;
    all.misses += r.misses;
    all.wrong += r.wrong;
    all.errors += r.errors;
    if (all.first_error.empty()) all.first_error = r.first_error;
  }
  std::sort(all.latency_ns.begin(), all.latency_ns.end());
  const uint64_t requests = all.gets + all.sets;
  const double ops_s = seconds > 0 ? static_cast<double>(requests) / seconds : 0;
  const double p50 = percentile_us(all.latency_ns, 500), p99 = percentile_us(all.latency_ns, 990),
               p999 = percentile_us(all.latency_ns, 999);
  const bool timed = !all.latency_ns.empty();  // a pipelined load times no request
  const auto us = [&](double v) { return timed ? nlohmann::json(v) : nlohmann::json(nullptr); };
  if (a.format == "json") {
    nlohmann::json j{{"server", a.server},
                     {"op", a.op},
                     {"threads", a.threads},
                     {"requests", requests},
                     {"gets", all.gets},
                     {"sets", all.sets},
                     {"misses", all.misses},
                     {"wrong_values", all.wrong},
                     {"errors", all.errors},
                     {"first_error", all.first_error},
                     {"seconds", seconds},
                     {"ops_per_second", ops_s},
                     {"p50_us", us(p50)},
                     {"p99_us", us(p99)},
                     {"p999_us", us(p999)},
                     {"pipeline", a.op == "load" ? a.pipeline : 1},
                     {"client_cpu_seconds", cpu},
                     {"records", a.records},
                     {"key_size", a.key_size},
                     {"value_size", a.value_size},
                     {"seed", a.seed}};
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    char latency[128] = "latency not timed (pipelined)";
    if (timed) {
      std::snprintf(latency, sizeof(latency), "latency p50 %.1f us, p99 %.1f us, p99.9 %.1f us",
                    p50, p99, p999);
    }
    std::printf(
        "nvindex kv-client: %s %s, %u thread%s: %llu requests (%llu gets, %llu sets) in %.2f s: "
        "%.0f ops/s; %s; client CPU %.2f s\n",
        a.server.c_str(), a.op.c_str(), a.threads, a.threads == 1 ? "" : "s",
        static_cast<unsigned long long>(requests), static_cast<unsigned long long>(all.gets),
        static_cast<unsigned long long>(all.sets), seconds, ops_s, latency, cpu);
    if (all.misses + all.wrong + all.errors > 0) {
      std::printf("  %llu misses, %llu wrong values, %llu errors%s%s\n",
                  static_cast<unsigned long long>(all.misses),
                  static_cast<unsigned long long>(all.wrong),
                  static_cast<unsigned long long>(all.errors),
                  all.first_error.empty() ? "" : "; first: ", all.first_error.c_str());
    }
  }
  return all.misses + all.wrong + all.errors > 0 ? 1 : 0;
}

}  // namespace

void add_kv_client_command(CLI::App& app, int* exit_code) {
  auto a = std::make_shared<KvClientArgs>();
  CLI::App* cmd = app.add_subcommand(
      "kv-client",
      "Drive a memcached-protocol server (nvindex serve, memcached) with the key-value "
      "benchmark's items through libmemcached's C API: gets of random loaded items, sets of fresh "
      "ones, a mix, or a load of every item; one connection and one request in flight per "
      "thread; every value checked; throughput and p50/p99/p99.9 latency. Exit 0 all found and "
      "stored, 1 a miss, wrong value or error, 2 usage.");
  cmd->option_defaults()->always_capture_default();
  add_text(cmd, "--server", &a->server, "The server, HOST:PORT", [](const std::string& s) {
    std::string h;
    unsigned p = 0;
    return split_server(s, &h, &p) ? Status::Ok()
                                   : Status::InvalidArgument("give HOST:PORT (port 1..65535)");
  });
  add_count(cmd, "--threads", &a->threads, 1, 64,
            "Client threads, each one connection with one request in flight");
  add_choice(cmd, "--op", &a->op, {"get", "set", "mix", "load"},
             "get: random loaded items; set: fresh items (inserts); mix: --get-ratio gets, the "
             "rest sets; load: set items 0 .. --records - 1");
  add_memory_count(cmd, "--ops", &a->ops, 16, true,
                   "Requests in all (get, set, mix; 4 B of latency record each)");
  add_memory_count(cmd, "-n,--records", &a->records, 16, true,
                   "Items loaded (kv-load -n): gets ask for i < records; load sets them all");
  add_count(cmd, "--key-size", &a->key_size, bench::kKvKeyCore, bench::kKvMaxKeySize,
            "Key bytes, as at kv-load");
  add_count(cmd, "--value-size", &a->value_size, 0, 1048576, "Value bytes, as at kv-load");
  add_real(cmd, "--get-ratio", &a->get_ratio, 0, 1, false, "0..1", "mix: the fraction of gets");
  add_seed(cmd, "--seed", &a->seed, "Seed of the keys, as at kv-load (bench/kv_keys.h)");
  add_count(cmd, "--fresh-offset", &a->fresh_offset, 0, uint64_t{1} << 39,
            "set, mix: fresh items start at --records + this (runs that insert different keys)");
  add_count(cmd, "--pipeline", &a->pipeline, 1, 1024,
            "load: sets per write on a plain socket, all replies checked (1 = libmemcached, "
            "one at a time)");
  add_choice(cmd, "--format", &a->format, {"text", "json"}, "Output format of the summary");
  add_switch(cmd, "-q,--quiet", &a->quiet, "No progress on stderr");
  cmd->callback([a, exit_code] { *exit_code = run_kv_client(*a); });
}

}  // namespace nvindex::tools
