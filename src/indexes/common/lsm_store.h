// The part the LSM-tree yardsticks of issue 14 (leveldb, rocksdb) share: an
// Index<uint64_t> over a key-value store whose API has LevelDB's shape
// (DB::Get/Put/Delete/NewIterator with ReadOptions and WriteOptions, an
// Iterator with Seek/SeekToLast/Next/Prev, a Status with ok()/IsNotFound()/
// IsCorruption()/IsIOError()/ToString()): RocksDB kept that API from the
// LevelDB it forked, so one template serves both, and only opening the store
// and sync() differ (src/indexes/leveldb/, src/indexes/rocksdb/).
//
// Encoding: a key is stored as its 8 bytes big-endian, so the stores' default
// byte-wise comparator orders keys numerically and scan() and
// find_last_less_than() are iterator seeks; a value as its 8 bytes
// little-endian (the host order of every machine nvindex runs on).
//
// Atomicity: the stores have no insert-if-absent, so insert, update and
// remove read the key (Get) and then write it (Put/Delete) while holding one
// of kLsmStripes mutexes chosen by a hash of the key. Two writers of one key
// therefore serialize (insert/update/remove of one key are atomic with
// respect to each other), writers of different keys rarely contend, and
// readers (lookup, scan, find_last_less_than) take no lock: the store's own
// snapshot semantics make each of them see a state between writes.
//
// Directory: IndexOptions::device is a directory, created if missing (with
// its parents). nvindex writes a marker file kLsmMarkerFile holding the
// registry name into it before it creates the store, and opens an existing
// directory only when it is empty or its marker names this index; anything
// else is refused before the store is opened, so nothing in it changes.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "nvindex/index.h"
#include "nvindex/status.h"

namespace nvindex::lsm {

/// The marker file nvindex writes into a store's directory: one line, the
/// registry name ("leveldb", "rocksdb").
inline constexpr char kLsmMarkerFile[] = "NVINDEX-INDEX";

/// Mutex stripes of insert/update/remove (see the file comment).
inline constexpr size_t kLsmStripes = 64;

/// Values of the "persistence" option (OptionSpec), the default first.
inline constexpr std::string_view kPersistenceValues[] = {"strong", "weak"};

/// Block cache of both stores, bytes (8 MiB: LevelDB's default; RocksDB 7's
/// default too, set explicitly so a library upgrade does not change it).
inline constexpr size_t kLsmBlockCacheBytes = 8u << 20;

/// True when options.extra asks for weak persistence ("persistence=weak");
/// make_index() has checked the value already.
inline bool weak_persistence(const IndexOptions& options) {
  auto it = options.extra.find("persistence");
  return it != options.extra.end() && it->second == "weak";
}

/// `key` as 8 bytes big-endian (byte order = numeric order).
inline std::array<char, 8> encode_key(uint64_t key) {
  std::array<char, 8> b;
  for (int i = 0; i < 8; ++i) b[i] = static_cast<char>(key >> (56 - 8 * i));
  return b;
}
/// The inverse of encode_key; `bytes` holds 8 bytes.
inline uint64_t decode_key(const char* bytes) {
  uint64_t k = 0;
  for (int i = 0; i < 8; ++i) k = k << 8 | static_cast<unsigned char>(bytes[i]);
  return k;
}

/// Prepares `dir` for the store of index `name`: creates it (and its parents)
/// when missing, fsyncing its parent, and writes the marker (fsynced, with
/// the directory) into an empty one. Sets *existing when the directory already held a store of this
/// index (a CURRENT file, which both stores write when they create one).
/// Errors: InvalidArgument (empty path; a path that is not a directory; a
/// non-empty directory without the marker, or whose marker names another
/// index: nothing in it is touched), IOError (the file system refused).
inline Status prepare_store_dir(const std::string& dir, std::string_view name, bool* existing) {
  namespace fs = std::filesystem;
  *existing = false;
  const std::string idx(name);
  if (dir.empty()) {
    return Status::InvalidArgument(idx + ": IndexOptions.device (a directory) is required");
  }
  std::error_code ec;
  const fs::path p(dir);
  if (fs::exists(p, ec) && !fs::is_directory(p, ec)) {
    return Status::InvalidArgument(idx + ": '" + dir + "' is not a directory");
  }
  if (fs::create_directories(p, ec)) {
    // A new directory: its entry in the parent is made durable too (a
    // store's own syncs cover only what is inside it).
    fs::path full = fs::absolute(p, ec).lexically_normal();
    if (!full.has_filename()) full = full.parent_path();  // "dir/"
    const std::string parent = full.parent_path().string();
    const int pfd = ::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    const bool synced = pfd >= 0 && ::fsync(pfd) == 0;
    if (pfd >= 0) ::close(pfd);
    if (!synced) return Status::IOError(idx + ": cannot sync directory '" + parent + "'");
  } else if (ec) {
    return Status::IOError(idx + ": cannot create directory '" + dir + "': " + ec.message());
  }
  const fs::path marker = p / kLsmMarkerFile;
  if (fs::exists(marker, ec)) {
    std::ifstream in(marker);
    std::string held;
    std::getline(in, held);
    if (held != name) {
      return Status::InvalidArgument(idx + ": '" + dir + "' holds a " + held + " store, not " +
                                     idx);
    }
    *existing = fs::exists(p / "CURRENT", ec);
    return Status::Ok();
  }
  if (!fs::is_empty(p, ec)) {
    return Status::InvalidArgument(idx + ": '" + dir + "' is not empty and holds no " + idx +
                                   " store of nvindex (no " + kLsmMarkerFile + " file)");
  }
  const std::string body = idx + "\n";
  const int fd = ::open(marker.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  bool ok = fd >= 0 && ::write(fd, body.data(), body.size()) == static_cast<ssize_t>(body.size()) &&
            ::fsync(fd) == 0;
  const int err = errno;
  if (fd >= 0) ::close(fd);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ok = ok && dfd >= 0 && ::fsync(dfd) == 0;
  if (dfd >= 0) ::close(dfd);
  if (!ok) {
    return Status::IOError(idx + ": cannot write " + marker.string() + ": " + std::strerror(err));
  }
  return Status::Ok();
}

/// A store's Status as an nvindex Status of index `name`: Corruption,
/// "No space left" -> OutOfSpace, anything else IOError, the store's own
/// message kept.
template <class S>
Status from_store(const S& s, std::string_view name) {
  const std::string msg = std::string(name) + ": " + s.ToString();
  if (s.IsCorruption()) return Status::Corruption(msg);
  if (msg.find("No space left") != std::string::npos) return Status::OutOfSpace(msg);
  return Status::IOError(msg);
}

/// Index<uint64_t> over the open store `Store` (leveldb or rocksdb). Store
/// owns the DB and what it needs (cache, options) and provides:
///   using Api: a struct naming DB, ReadOptions, WriteOptions, Slice,
///              WriteBatch, Iterator of the library;
///   typename Api::DB* db;  Status sync() (make every write durable).
template <class Store>
class LsmStoreIndex final : public Index<uint64_t> {
 public:
  using Api = typename Store::Api;
  /// `store` is open; `weak` selects WriteOptions::sync = false; `info` is
  /// returned by info() (name, description, caps, recovered).
  LsmStoreIndex(std::unique_ptr<Store> store, bool weak, IndexInfo info)
      : store_(std::move(store)), info_(std::move(info)) {
    write_.sync = !weak;
  }

  Status insert(uint64_t key, Value value) override {
    const auto k = encode_key(key);
    std::lock_guard lock(stripe(key));
    bool found = false;
    if (Status s = get(k, &found, nullptr); !s.ok()) return s;
    if (found) return Status::AlreadyExists();
    return put(k, value);
  }
  Status update(uint64_t key, Value value) override {
    const auto k = encode_key(key);
    std::lock_guard lock(stripe(key));
    bool found = false;
    if (Status s = get(k, &found, nullptr); !s.ok()) return s;
    if (!found) return Status::NotFound();
    return put(k, value);
  }
  Status remove(uint64_t key) override {
    const auto k = encode_key(key);
    std::lock_guard lock(stripe(key));
    bool found = false;
    if (Status s = get(k, &found, nullptr); !s.ok()) return s;
    if (!found) return Status::NotFound();
    const auto st = store_->db->Delete(write_, slice(k));
    return st.ok() ? Status::Ok() : from_store(st, info_.name);
  }
  std::optional<Value> lookup(uint64_t key) override {
    bool found = false;
    Value v = 0;
    if (Status s = get(encode_key(key), &found, &v); !s.ok() || !found) return std::nullopt;
    return v;
  }
  size_t scan(uint64_t start, size_t count, std::vector<std::pair<uint64_t, Value>>* out) override {
    out->clear();
    if (count == 0) return 0;
    std::unique_ptr<typename Api::Iterator> it(store_->db->NewIterator(read_));
    const auto k = encode_key(start);
    for (it->Seek(slice(k)); it->Valid() && out->size() < count; it->Next()) {
      if (it->key().size() != 8 || it->value().size() != 8) break;  // verify() reports it
      out->emplace_back(decode_key(it->key().data()), value_of(it->value().data()));
    }
    return out->size();
  }
  std::optional<std::pair<uint64_t, Value>> find_last_less_than(uint64_t key) override {
    if (key == 0) return std::nullopt;
    std::unique_ptr<typename Api::Iterator> it(store_->db->NewIterator(read_));
    const auto k = encode_key(key);
    it->Seek(slice(k));
    if (it->Valid()) {
      it->Prev();
    } else {
      it->SeekToLast();
    }
    if (!it->Valid() || it->key().size() != 8 || it->value().size() != 8) return std::nullopt;
    return std::pair{decode_key(it->key().data()), value_of(it->value().data())};
  }
  /// Store::sync(): see the factory's docstring.
  Status sync() override { return store_->sync(); }
  IndexInfo info() const override { return info_; }
  /// Iterates the whole store: every key and value 8 bytes, keys strictly
  /// ascending; report->keys is the count (no nodes: the rest stays 0).
  /// Errors: Corruption naming the first bad entry, or the iterator's.
  Status verify(VerifyReport* report) const override {
    *report = VerifyReport{};
    std::unique_ptr<typename Api::Iterator> it(store_->db->NewIterator(read_));
    std::optional<uint64_t> prev;
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      if (it->key().size() != 8 || it->value().size() != 8) {
        return Status::Corruption(info_.name + ": entry " + std::to_string(report->keys) +
                                  " has a " + std::to_string(it->key().size()) +
                                  "-byte key and a " + std::to_string(it->value().size()) +
                                  "-byte value (8 and 8)");
      }
      const uint64_t k = decode_key(it->key().data());
      if (prev && *prev >= k) {
        return Status::Corruption(info_.name + ": key " + std::to_string(k) + " after " +
                                  std::to_string(*prev) + " (not ascending)");
      }
      prev = k;
      ++report->keys;
    }
    if (!it->status().ok()) return from_store(it->status(), info_.name);
    return Status::Ok();
  }

 private:
  struct alignas(64) Stripe {
    std::mutex mu;
  };
  std::mutex& stripe(uint64_t key) {
    return stripes_[(key * 0x9e3779b97f4a7c15ull) >> 58 & (kLsmStripes - 1)].mu;
  }
  static typename Api::Slice slice(const std::array<char, 8>& b) { return {b.data(), b.size()}; }
  static Value value_of(const char* bytes) {
    Value v;
    std::memcpy(&v, bytes, sizeof v);
    return v;
  }
  Status get(const std::array<char, 8>& k, bool* found, Value* value) {
    std::string v;
    const auto st = store_->db->Get(read_, slice(k), &v);
    if (st.IsNotFound()) return Status::Ok();
    if (!st.ok()) return from_store(st, info_.name);
    if (v.size() != sizeof(Value)) {
      return Status::Corruption(info_.name + ": a value of " + std::to_string(v.size()) +
                                " bytes (8 expected)");
    }
    *found = true;
    if (value != nullptr) *value = value_of(v.data());
    return Status::Ok();
  }
  Status put(const std::array<char, 8>& k, Value value) {
    char v[sizeof(Value)];
    std::memcpy(v, &value, sizeof v);
    const auto st = store_->db->Put(write_, slice(k), typename Api::Slice(v, sizeof v));
    return st.ok() ? Status::Ok() : from_store(st, info_.name);
  }

  std::unique_ptr<Store> store_;
  IndexInfo info_;
  typename Api::ReadOptions read_;
  typename Api::WriteOptions write_;
  std::array<Stripe, kLsmStripes> stripes_;
};

/// The factory of an LSM-store index named `name`: prepares the directory
/// options.device (prepare_store_dir), calls open(dir, store) to open the
/// store (the library's DB::Open with its options, into a new Store),
/// timing it (info().recovery_seconds when the store existed), then makes
/// the index (weak persistence from options). Errors: prepare_store_dir's,
/// and open's (its library's Status through from_store).
template <class Store, class Open>
Status open_lsm_index(const IndexOptions& options, std::string_view name,
                      std::string_view description, Open open,
                      std::unique_ptr<Index<uint64_t>>* out) {
  bool existing = false;
  if (Status s = prepare_store_dir(options.device, name, &existing); !s.ok()) return s;
  auto store = std::make_unique<Store>();
  const auto start = std::chrono::steady_clock::now();
  if (Status s = open(options.device, store.get()); !s.ok()) return s;
  IndexInfo info;
  info.name = std::string(name);
  info.description = std::string(description);
  info.caps = Capabilities{.ordered = true,
                           .persistent = true,
                           .thread_safe = true,
                           .placement = Placement::kBlockDevice};
  info.recovered = existing;
  if (existing) {
    info.recovery_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  *out = std::make_unique<LsmStoreIndex<Store>>(std::move(store), weak_persistence(options),
                                                std::move(info));
  return Status::Ok();
}

}  // namespace nvindex::lsm
