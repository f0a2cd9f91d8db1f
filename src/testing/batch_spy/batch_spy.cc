// batch-spy-test (see batch_spy.h): MapIndex plus a process-wide log of the
// multi_lookup batch sizes and lookup() calls.
//
// Thread-safety: the map is MapIndex's (one mutex); the log has its own
// mutex; the lie counter is atomic. Thread-safe.
#include "testing/batch_spy/batch_spy.h"

#include <atomic>
#include <mutex>

#include "testing/map_index.h"

namespace nvindex {
namespace {

std::mutex log_mu;
BatchSpyLog log_state;

template <class K>
class BatchSpyIndex final : public testing_doubles::MapIndex<K> {
  using Base = testing_doubles::MapIndex<K>;

 public:
  explicit BatchSpyIndex(bool lie) : Base("batch-spy-test", kBatchSpyDescription), lie_(lie) {}

  std::optional<Value> lookup(K key) override {
    {
      std::lock_guard lock(log_mu);
      ++log_state.lookups;
    }
    return Base::lookup(key);
  }

  void multi_lookup(std::span<const K> keys, std::span<std::optional<Value>> out) override {
    uint64_t lies = 0;
    for (size_t i = 0; i < keys.size(); ++i) {
      out[i] = Base::lookup(keys[i]);
      if (lie_ && out[i] && (found_.fetch_add(1) + 1) % 16 == 0) {
        *out[i] ^= 0xFFFFFFFF00000000ull;  // the lie
        ++lies;
      }
    }
    std::lock_guard lock(log_mu);
    ++log_state.batch_sizes[keys.size()];
    log_state.lies += lies;
  }

 private:
  const bool lie_;
  std::atomic<uint64_t> found_{0};  ///< found values multi_lookup returned
};

bool lie_option(const IndexOptions& options) {
  auto it = options.extra.find("lie");
  return it != options.extra.end() && it->second == "values";
}

}  // namespace

BatchSpyLog batch_spy_log() {
  std::lock_guard lock(log_mu);
  return log_state;
}

void reset_batch_spy_log() {
  std::lock_guard lock(log_mu);
  log_state = BatchSpyLog{};
}

Status make_batch_spy_index(const IndexOptions& options, std::unique_ptr<Index<uint64_t>>* out) {
  *out = std::make_unique<BatchSpyIndex<uint64_t>>(lie_option(options));
  return Status::Ok();
}

Status make_batch_spy_string_index(const IndexOptions& options,
                                   std::unique_ptr<Index<std::string_view>>* out) {
  *out = std::make_unique<BatchSpyIndex<std::string_view>>(lie_option(options));
  return Status::Ok();
}

}  // namespace nvindex
