// libFuzzer target: the memcached ASCII protocol parser and its processing
// (src/server/). Each input is bytes a client could send: the first byte
// picks how they are cut into reads (1..16 bytes, or whole), the rest is fed
// to a Session over a store on an anonymous pool (lbtree, values up to 4 KiB
// so refused blocks come early). Every input must leave the process alive
// (ASan, UBSan) and give the same replies however it is cut into reads: a
// second Session over a second store gets the same bytes whole, and the two
// outputs must be equal (inputs that ask for `stats`, whose figures are the
// process's own, are not compared). A difference aborts with a message.
//
// Build: cmake --preset fuzz && cmake --build --preset fuzz (clang only).
// Run: tests/fuzz/run-fuzz.sh SECONDS (it runs this target after pool_fuzz).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "nvindex/kv.h"
#include "nvindex/pm/pool.h"
#include "server/process.h"

namespace {

using namespace nvindex;

constexpr int64_t kNow = 1'800'000'000;

struct Side {
  std::unique_ptr<pm::Pool> pool;
  std::unique_ptr<kv::Store> store;
  std::unique_ptr<server::ServerState> state;
  std::unique_ptr<server::Session> session;

  Side() {
    if (!pm::Pool::create_anonymous(16ull << 20, kv::Store::layout("lbtree"), &pool).ok()) {
      std::abort();
    }
    kv::Options o;
    o.index = "lbtree";
    o.max_value_bytes = 4096;
    o.clock = [] { return kNow; };
    if (!kv::Store::open(pool.get(), o, &store).ok()) std::abort();
    state = std::make_unique<server::ServerState>();
    state->store = store.get();
    state->max_value_bytes = 4096;
    state->started = kNow;
    session = std::make_unique<server::Session>(*state);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t cut = data[0] % 17;  // 0: whole
  const std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  Side a, b;
  std::string out_a, out_b;
  bool closed_a = false;
  if (cut == 0) {
    closed_a = a.session->feed(in, kNow, &out_a) == server::After::kClose;
  } else {
    for (size_t i = 0; i < in.size() && !closed_a; i += cut) {
      closed_a = a.session->feed(in.substr(i, cut), kNow, &out_a) == server::After::kClose;
    }
  }
  const bool closed_b = b.session->feed(in, kNow, &out_b) == server::After::kClose;
  if (in.find("stats") != std::string_view::npos) return 0;
  // A close (quit, a line too long) ends both at the same request; what a
  // cut read after it would have held is never fed, so compare up to there.
  if (closed_a != closed_b || out_a != out_b) {
    std::fprintf(stderr,
                 "protocol_fuzz: replies depend on how the input is cut (%zu):\n"
                 "cut:   [%s]\nwhole: [%s]\n",
                 cut, out_a.c_str(), out_b.c_str());
    std::abort();
  }
  return 0;
}
