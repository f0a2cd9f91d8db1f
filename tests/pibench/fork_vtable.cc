// A wrapper built against a fork of PiBench's tree_api whose vtable puts
// bulk_load before find (the optiql and tls-cleanup branches): called
// through master's layout, every slot runs the method before it. The
// import's probe must catch it and name the cause (tool_cli_test,
// Cli.PibenchBrokenWrappersAreUsageErrors). The tree is a std::map of 8-byte
// keys, correct when called through its own layout.
#include <cstdint>
#include <cstring>
#include <map>
#include <vector>

#include "pibench/tree_api.h"

// A named namespace: its methods are exported (the import reads .dynsym).
namespace fork_wrapper {

class fork_tree_api {
 public:
  virtual ~fork_tree_api() = default;
  virtual bool bulk_load(const char* keys, size_t n) = 0;
  virtual bool find(const char* key, size_t sz, char* value_out) = 0;
  virtual bool insert(const char* key, size_t key_sz, const char* value, size_t value_sz) = 0;
  virtual bool update(const char* key, size_t key_sz, const char* value, size_t value_sz) = 0;
  virtual bool remove(const char* key, size_t key_sz) = 0;
  virtual int scan(const char* key, size_t key_sz, int scan_sz, char*& values_out) = 0;
};

inline uint64_t word(const char* p) {
  uint64_t x;
  std::memcpy(&x, p, 8);
  return x;
}

class __attribute__((visibility("default"))) ForkMapTree final : public fork_tree_api {
 public:
  bool bulk_load(const char*, size_t) override { return false; }
  bool find(const char* key, size_t, char* value_out) override {
    auto it = map_.find(word(key));
    if (it == map_.end()) return false;
    std::memcpy(value_out, &it->second, 8);
    return true;
  }
  bool insert(const char* key, size_t, const char* value, size_t) override {
    return map_.emplace(word(key), word(value)).second;
  }
  bool update(const char* key, size_t, const char* value, size_t) override {
    auto it = map_.find(word(key));
    if (it == map_.end()) return false;
    it->second = word(value);
    return true;
  }
  bool remove(const char* key, size_t) override { return map_.erase(word(key)) == 1; }
  int scan(const char* key, size_t, int scan_sz, char*& values_out) override {
    buf_.clear();
    int n = 0;
    for (auto it = map_.lower_bound(word(key)); it != map_.end() && n < scan_sz; ++it, ++n) {
      buf_.insert(buf_.end(), reinterpret_cast<const char*>(&it->first),
                  reinterpret_cast<const char*>(&it->first) + 8);
      buf_.insert(buf_.end(), reinterpret_cast<const char*>(&it->second),
                  reinterpret_cast<const char*>(&it->second) + 8);
    }
    values_out = buf_.data();
    return n;
  }

 private:
  std::map<uint64_t, uint64_t> map_;
  std::vector<char> buf_;
};

}  // namespace fork_wrapper

extern "C" __attribute__((visibility("default"))) nvindex::pibench::tree_api* create_tree(
    const nvindex::pibench::tree_options_t&) {
  // What such a wrapper hands PiBench: its own class, read as master's.
  return reinterpret_cast<nvindex::pibench::tree_api*>(new fork_wrapper::ForkMapTree());
}
