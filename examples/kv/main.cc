// examples/kv: nvindex's key-value store as a library, built against the
// installed package (CMakeLists.txt here). Usage: kv-example POOL_FILE
//   first run (no file): creates a 64 MiB pool with a store over lbtree,
//     stores three items and prints "created: 3 items";
//   a later run: recovers the store, prints "recovered: N items", every
//     item in key order as "key=value", increments the counter "runs" and
//     prints its new value.
// Exit 0, or 1 with the failing call's Status on stderr.
#include <cstdint>
#include <iostream>
#include <memory>
#include <string>
#include <string_view>

#include "nvindex/kv.h"

using namespace nvindex;

static Status run(const std::string& path) {
  kv::Options options;  // lbtree, 1 MiB largest value
  std::unique_ptr<kv::Store> store;
  if (Status s = kv::Store::open_file(path, 64 << 20, options, &store); !s.ok()) return s;
  if (store->info().created) {
    if (Status s = store->put("greeting", "hello"); !s.ok()) return s;
    if (Status s = store->set("runs", "0", /*flags=*/0, /*expiry=*/0); !s.ok()) return s;
    if (Status s = store->put("answer", "42"); !s.ok()) return s;
    std::cout << "created: " << store->stats().curr_items << " items\n";
    return Status::Ok();
  }
  std::cout << "recovered: " << store->info().items_at_open << " items\n";
  Status s = store->get_all([](std::string_view key, std::string_view value, const kv::ItemInfo&) {
    std::cout << key << "=" << value << "\n";
    return true;
  });
  if (!s.ok()) return s;
  uint64_t runs = 0;
  if (s = store->incr("runs", 1, &runs); !s.ok()) return s;
  std::cout << "runs -> " << runs << "\n";
  return Status::Ok();
}

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: kv-example POOL_FILE\n";
    return 2;
  }
  const Status s = run(argv[1]);
  if (!s.ok()) std::cerr << "kv-example: " << s.ToString() << "\n";
  return s.ok() ? 0 : 1;
}
