// lying-test: an index that lies, so that tests can show the harness catches
// an index returning success without doing the work (DESIGN.md §5: "every
// operation's result is checked against what the workload expects").
//
// It is the honest MapIndex (src/testing/map_index.h: std::map<key, Value>
// behind one mutex, K = uint64_t or std::string_view) except that it
//  - drops every 10th insert (counted over all inserts) while returning Ok;
//  - returns the value with its upper 32 bits inverted for every 16th
//    successful lookup (the value no longer matches its key's tag).
// Updates, removes, scans, verify() and the key-length check (check_key:
// a string key over 255 bytes is InvalidArgument) are honest. Not
// persistent.
//
// Thread-safety: MapIndex's mutex, and atomic lie counters; thread-safe (and
// claims it).
#include "testing/lying/lying.h"

#include <atomic>

#include "testing/map_index.h"

namespace nvindex {
namespace {

template <class K>
class LyingIndex final : public testing_doubles::MapIndex<K> {
 public:
  LyingIndex() : testing_doubles::MapIndex<K>("lying-test", kLyingDescription) {}

  Status insert(K key, Value value) override {
    if (Status st = check_key("lying-test", key); !st.ok()) return st;  // honest: too long
    if ((inserts_.fetch_add(1) + 1) % 10 == 0) return Status::Ok();     // the lie: nothing stored
    return testing_doubles::MapIndex<K>::insert(key, value);
  }
  std::optional<Value> lookup(K key) override {
    std::optional<Value> v = testing_doubles::MapIndex<K>::lookup(key);
    if (v && (lookups_.fetch_add(1) + 1) % 16 == 0) return *v ^ 0xFFFFFFFF00000000ull;  // the lie
    return v;
  }

 private:
  std::atomic<uint64_t> inserts_{0};
  std::atomic<uint64_t> lookups_{0};
};

}  // namespace

Status make_lying_index(const IndexOptions&, std::unique_ptr<Index<uint64_t>>* out) {
  *out = std::make_unique<LyingIndex<uint64_t>>();
  return Status::Ok();
}

Status make_lying_string_index(const IndexOptions&, std::unique_ptr<Index<std::string_view>>* out) {
  *out = std::make_unique<LyingIndex<std::string_view>>();
  return Status::Ok();
}

}  // namespace nvindex
