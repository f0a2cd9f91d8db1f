#include "nvme/format.h"

#include <xxhash.h>

namespace nvindex::nvme {

namespace {
template <class T>
T load(const std::byte* p, uint32_t off) {
  T v;
  std::memcpy(&v, p + off, sizeof v);
  return v;
}
template <class T>
void store(std::byte* p, uint32_t off, T v) {
  std::memcpy(p + off, &v, sizeof v);
}
constexpr uint32_t kSuperChecksumAt = kSuperBytes - 8;
}  // namespace

void encode_super(const Super& s, std::byte* buf) {
  std::memset(buf, 0, kSuperBytes);
  std::memcpy(buf, kSuperMagic, sizeof kSuperMagic);
  store<uint32_t>(buf, 8, kFormatVersion);
  store<uint32_t>(buf, 12, s.node_size);
  store<uint64_t>(buf, 16, s.slots);
  store<uint64_t>(buf, 24, s.root);
  store<uint32_t>(buf, 32, s.height);
  store<uint32_t>(buf, 36, s.clean ? 1 : 0);
  store<uint64_t>(buf, 40, s.hwm);
  store<uint64_t>(buf, 48, s.free_head);
  store<uint64_t>(buf, 56, s.free_count);
  store<uint64_t>(buf, 64, s.generation);
  store<uint64_t>(buf, kSuperChecksumAt, XXH64(buf, kSuperChecksumAt, 0));
}

Status decode_super(const std::byte* buf, uint64_t device_bytes, const std::string& path,
                    Super* out) {
  const std::string where = "patree: " + path + ": ";
  if (std::memcmp(buf, kSuperMagic, sizeof kSuperMagic) != 0) {
    return Status::Corruption(where + "not a PA-Tree store (no superblock magic)");
  }
  if (XXH64(buf, kSuperChecksumAt, 0) != load<uint64_t>(buf, kSuperChecksumAt)) {
    return Status::Corruption(where +
                              "superblock checksum mismatch (a torn or damaged superblock); "
                              "the store cannot be opened");
  }
  if (uint32_t v = load<uint32_t>(buf, 8); v != kFormatVersion) {
    return Status::Corruption(where + "format version " + std::to_string(v) +
                              " (this build reads " + std::to_string(kFormatVersion) + ")");
  }
  Super s;
  s.node_size = load<uint32_t>(buf, 12);
  s.slots = load<uint64_t>(buf, 16);
  s.root = load<uint64_t>(buf, 24);
  s.height = load<uint32_t>(buf, 32);
  s.clean = load<uint32_t>(buf, 36) == 1;
  s.hwm = load<uint64_t>(buf, 40);
  s.free_head = load<uint64_t>(buf, 48);
  s.free_count = load<uint64_t>(buf, 56);
  s.generation = load<uint64_t>(buf, 64);
  if (!valid_node_size(s.node_size) || s.slots < 2 || s.slots > device_bytes / s.node_size ||
      s.root == 0 || s.root >= s.slots || s.height == 0 || s.height > 64 || s.hwm > s.slots ||
      s.hwm <= s.root || s.free_head >= s.slots) {
    return Status::Corruption(
        where + "superblock field out of range (node size " + std::to_string(s.node_size) +
        ", slots " + std::to_string(s.slots) + ", root " + std::to_string(s.root) + ", height " +
        std::to_string(s.height) + ", device " + std::to_string(device_bytes) + " B)");
  }
  *out = s;
  return Status::Ok();
}

uint32_t NodeView::lower_bound(uint64_t k) const {
  uint32_t lo = 0, hi = count();
  while (lo < hi) {
    const uint32_t mid = (lo + hi) / 2;
    if (key(mid) < k) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

uint32_t NodeView::child_index(uint64_t k) const {
  // The first separator > k: child i holds keys[i-1] <= k < keys[i].
  uint32_t lo = 0, hi = count();
  while (lo < hi) {
    const uint32_t mid = (lo + hi) / 2;
    if (key(mid) <= k) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

void NodeView::leaf_insert_at(uint32_t i, uint64_t k, uint64_t v) {
  const uint32_t n = count();
  std::byte* keys = p_ + kNodeHeaderBytes;
  std::byte* vals = p_ + values_at();
  std::memmove(keys + 8 * (i + 1), keys + 8 * i, 8 * (n - i));
  std::memmove(vals + 8 * (i + 1), vals + 8 * i, 8 * (n - i));
  set_key(i, k);
  set_value(i, v);
  set_count(n + 1);
}

void NodeView::leaf_remove_at(uint32_t i) {
  const uint32_t n = count();
  std::byte* keys = p_ + kNodeHeaderBytes;
  std::byte* vals = p_ + values_at();
  std::memmove(keys + 8 * i, keys + 8 * (i + 1), 8 * (n - i - 1));
  std::memmove(vals + 8 * i, vals + 8 * (i + 1), 8 * (n - i - 1));
  set_count(n - 1);
}

void NodeView::inner_insert_at(uint32_t i, uint64_t k, uint64_t c) {
  const uint32_t n = count();
  std::byte* keys = p_ + kNodeHeaderBytes;
  std::byte* kids = p_ + children_at();
  std::memmove(keys + 8 * (i + 1), keys + 8 * i, 8 * (n - i));
  std::memmove(kids + 8 * (i + 2), kids + 8 * (i + 1), 8 * (n - i));
  set_key(i, k);
  set_child(i + 1, c);
  set_count(n + 1);
}

uint64_t NodeView::split_into(NodeView right, uint64_t right_id) {
  const uint32_t n = count();
  right.init(level());
  right.set_right(this->right());
  right.set_high_key(high_key());
  uint64_t sep = 0;
  if (is_leaf()) {
    const uint32_t keep = n / 2;
    for (uint32_t i = keep; i < n; ++i) {
      right.set_key(i - keep, key(i));
      right.set_value(i - keep, value(i));
    }
    right.set_count(n - keep);
    set_count(keep);
    sep = right.key(0);
  } else {
    const uint32_t mid = n / 2;  // key(mid) moves up
    sep = key(mid);
    for (uint32_t i = mid + 1; i < n; ++i) right.set_key(i - mid - 1, key(i));
    for (uint32_t i = mid + 1; i <= n; ++i) right.set_child(i - mid - 1, child(i));
    right.set_count(n - mid - 1);
    set_count(mid);
  }
  set_right(right_id);
  set_high_key(sep);
  return sep;
}

void NodeView::init(uint16_t lvl) {
  std::memset(p_, 0, size_);
  set_level(lvl);
}

void NodeView::seal() {
  const uint32_t sum = static_cast<uint32_t>(XXH64(p_ + 4, size_ - 4, 0));
  std::memcpy(p_, &sum, sizeof sum);
}

bool NodeView::checksum_ok() const {
  return static_cast<uint32_t>(XXH64(p_ + 4, size_ - 4, 0)) == get<uint32_t>(0);
}

}  // namespace nvindex::nvme
