// examples/embed: nvindex as a library, built against the installed package
// (CMakeLists.txt here). Creates a pool file, makes a persistent FAST & FAIR
// index in it, inserts keys 1..100 (value: key * 10), looks up key 42 and
// prints "fastfair: 42 -> 420". Usage: embed [POOL_FILE] (a file that does not
// exist yet; default /dev/shm/nvindex-embed-<pid>), removed at the end.
// Exit 0, or 1 with the failing call's Status on stderr.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "nvindex/index.h"
#include "nvindex/pm/pool.h"

using namespace nvindex;

static Status run(const std::string& path, bool* created) {
  std::unique_ptr<pm::Pool> pool;  // declared first, so closed after the index
  if (Status s = pm::Pool::create(path, 16 << 20, "fastfair", pm::Mode::kEmulated, &pool); !s.ok())
    return s;
  *created = true;
  IndexOptions options;  // defaults, in this pool
  options.pool = pool.get();
  std::unique_ptr<Index<uint64_t>> index;
  if (Status s = make_index<uint64_t>("fastfair", options, &index); !s.ok()) return s;
  for (uint64_t key = 1; key <= 100; ++key)
    if (Status s = index->insert(key, key * 10); !s.ok()) return s;
  const std::optional<Value> value = index->lookup(42);
  if (!value) return Status::NotFound("key 42 missing after its insert");
  std::cout << "fastfair: 42 -> " << *value << "\n";
  return Status::Ok();
}

int main(int argc, char** argv) {
  const std::string path =
      argc > 1 ? argv[1] : "/dev/shm/nvindex-embed-" + std::to_string(getpid());
  bool created = false;
  const Status s = run(path, &created);
  if (created) std::remove(path.c_str());
  if (!s.ok()) std::cerr << "embed: " << s.ToString() << "\n";
  return s.ok() ? 0 : 1;
}
