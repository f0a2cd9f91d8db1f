// The fuzz input format for pool files (issue 3 §6): a compact "image" of the
// parts of a small pool that hold data, so that libFuzzer's mutations land on
// the header, the allocator metadata and the nodes instead of on megabytes of
// zeros.
//
// Image layout (bytes):
//   [0]        control byte: bit 0 = recompute the header checksum after
//              mutation (lets mutations of the checksummed header fields get
//              past the checksum test), bit 1 = make the file kMinPoolSize
//              bytes whatever the header claims (truncation), bit 2 = the
//              rest is a list of extents (below) instead of the windows,
//              others unused
//   windowed   [1, ...): the windows below, concatenated; an input shorter
//              than kImageBytes is zero-padded, a longer one is cut
//   extents    [1, ...): repeated {u32 pool file offset, u16 length n,
//              n bytes} (little-endian), written in order (a later extent
//              overwrites an earlier one); a last extent cut short by the
//              end of the input keeps the bytes that are there. For pools
//              whose data lies outside the windows (btree-ls: its logs take
//              every free 4 KiB block of the pool, so they start up to 1 MiB
//              apart).
//
// Windows (pool file offsets; every byte outside them is zero):
//   [0, 4352)                    header (4096 B: pool header, allocator
//                                metadata at 128) and the chunk table
//                                (at 4096, one byte per 64 KiB chunk; <= 256)
//   [65536 * (1 + c), +8192)     the first 8 KiB of heap chunks c = 0..3 (the
//                                heap starts at 64 KiB in pools <= 8 MiB)
//
// File size: the header's size field (bytes 48..55) when it is a multiple of
// 4096 in [kMinPoolSize, kMaxFuzzPoolBytes], else kMinPoolSize (so open()
// sees the mismatch and reports it).
#pragma once

#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "nvindex/pm/pool.h"

namespace nvindex::fuzz {

struct Window {
  uint64_t offset;  ///< pool file offset, bytes
  uint64_t bytes;   ///< length, bytes
};

inline constexpr Window kWindows[] = {
    {0, 4096 + 256}, {65536, 8192}, {2 * 65536, 8192}, {3 * 65536, 8192}, {4 * 65536, 8192}};
/// Bytes of a full windowed image: the control byte plus every window.
inline constexpr uint64_t kImageBytes = 1 + 4352 + 4 * 8192;
/// Bytes of the header window (pool header and chunk table).
inline constexpr uint64_t kHeadBytes = 4352;
/// Largest image the fuzzer is given (run-fuzz.sh's -max_len), bytes: an
/// extent image above it is not written as a seed.
inline constexpr uint64_t kMaxImageBytes = 65536;
/// Bytes of an extent's header in an extent image (u32 offset, u16 length).
inline constexpr uint64_t kExtentHeader = 6;
/// Largest pool file the fuzz target creates, bytes.
inline constexpr uint64_t kMaxFuzzPoolBytes = 8ull << 20;
inline constexpr uint8_t kFixChecksum = 1;
inline constexpr uint8_t kForceMinSize = 2;
inline constexpr uint8_t kExtents = 4;

/// A piece of a pool file an image gives: bytes at a file offset.
struct Piece {
  uint64_t offset;  ///< pool file offset, bytes
  std::vector<uint8_t> bytes;
};

/// The pieces an image (the input after the control byte) describes, in the
/// order they are written: the windows (padded with zeros), or the extents.
inline std::vector<Piece> pieces_of(const uint8_t* data, size_t size) {
  std::vector<Piece> out;
  const uint8_t control = size > 0 ? data[0] : 0;
  size_t pos = 1;
  if ((control & kExtents) == 0) {
    for (const Window& win : kWindows) {
      Piece p{win.offset, std::vector<uint8_t>(win.bytes, 0)};
      if (pos < size)
        std::memcpy(p.bytes.data(), data + pos, std::min<size_t>(size - pos, win.bytes));
      pos += win.bytes;
      out.push_back(std::move(p));
    }
    return out;
  }
  while (pos + kExtentHeader <= size) {
    uint32_t off = 0;
    uint16_t len = 0;
    std::memcpy(&off, data + pos, 4);
    std::memcpy(&len, data + pos + 4, 2);
    pos += kExtentHeader;
    const size_t n = std::min<size_t>(len, size - pos);
    out.push_back({off, std::vector<uint8_t>(data + pos, data + pos + n)});
    pos += n;
  }
  return out;
}

/// The header window's bytes (file bytes [0, kHeadBytes)) the pieces give.
inline std::vector<uint8_t> head_of(const std::vector<Piece>& pieces) {
  std::vector<uint8_t> head(kHeadBytes, 0);
  for (const Piece& p : pieces) {
    if (p.offset >= kHeadBytes || p.bytes.empty()) continue;
    const size_t n = std::min<size_t>(p.bytes.size(), kHeadBytes - p.offset);
    std::memcpy(head.data() + p.offset, p.bytes.data(), n);
  }
  return head;
}

/// The header window's bytes of an image, the checksum not recomputed.
inline std::vector<uint8_t> head_bytes(const uint8_t* data, size_t size) {
  return head_of(pieces_of(data, size));
}

/// File size the image's header gives (see the file comment), bytes.
inline uint64_t file_size_of(const std::vector<uint8_t>& head, uint8_t control) {
  uint64_t claimed = 0;
  std::memcpy(&claimed, head.data() + 48, sizeof(claimed));
  if ((control & kForceMinSize) != 0) return pm::kMinPoolSize;
  if (claimed >= pm::kMinPoolSize && claimed <= kMaxFuzzPoolBytes && claimed % 4096 == 0) {
    return claimed;
  }
  return pm::kMinPoolSize;
}

/// Writes the pool file an image describes to `path` (replacing any file
/// there). False on an I/O error.
inline bool write_pool_file(const std::string& path, const uint8_t* data, size_t size) {
  const uint8_t control = size > 0 ? data[0] : 0;
  const std::vector<Piece> pieces = pieces_of(data, size);
  std::vector<uint8_t> head = head_of(pieces);
  if ((control & kFixChecksum) != 0) {
    const uint64_t sum = XXH64(head.data(), 56, 0);
    std::memcpy(head.data() + 56, &sum, sizeof(sum));
  }
  const uint64_t file_size = file_size_of(head, control);
  ::unlink(path.c_str());
  const int fd = ::open(path.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  bool ok = ::ftruncate(fd, static_cast<off_t>(file_size)) == 0;
  // The pieces, clipped to the file; then the header window over them (the
  // same bytes, with the checksum the control byte asks for).
  for (const Piece& p : pieces) {
    if (p.offset >= file_size || p.bytes.empty()) continue;
    const uint64_t n = std::min<uint64_t>(p.bytes.size(), file_size - p.offset);
    ok = ok &&
         ::pwrite(fd, p.bytes.data(), n, static_cast<off_t>(p.offset)) == static_cast<ssize_t>(n);
  }
  ok = ok && ::pwrite(fd, head.data(), head.size(), 0) == static_cast<ssize_t>(head.size());
  ::close(fd);
  return ok;
}

/// Reads a pool file (at most kMaxFuzzPoolBytes). False, with `why`, on an
/// I/O error or a larger file.
inline bool read_pool_file(const std::string& path, std::vector<uint8_t>* file, std::string* why) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *why = "cannot open " + path;
    return false;
  }
  const off_t size = ::lseek(fd, 0, SEEK_END);
  file->assign(static_cast<size_t>(std::max<off_t>(size, 0)), 0);
  const bool read_ok = size > 0 && static_cast<uint64_t>(size) <= kMaxFuzzPoolBytes &&
                       ::pread(fd, file->data(), file->size(), 0) == size;
  ::close(fd);
  if (!read_ok) *why = "cannot read " + path + " (or larger than the fuzz limit)";
  return read_ok;
}

/// Encodes a pool file's bytes as an image (control byte 0): windowed when
/// every nonzero byte lies in the windows, else as extents (the header
/// window, then each run of nonzero bytes, runs less than 16 zero bytes
/// apart joined) when that image is at most kMaxImageBytes. False, with
/// `why`, when neither reproduces the file.
inline bool encode_image(const std::vector<uint8_t>& file, std::vector<uint8_t>* image,
                         std::string* why) {
  std::vector<bool> covered(file.size(), false);
  image->assign(1, 0);
  for (const Window& win : kWindows) {
    for (uint64_t i = 0; i < win.bytes; ++i) {
      const uint64_t off = win.offset + i;
      image->push_back(off < file.size() ? file[off] : 0);
      if (off < file.size()) covered[off] = true;
    }
  }
  size_t outside = 0;
  while (outside < file.size() && (file[outside] == 0 || covered[outside])) ++outside;
  if (outside == file.size()) return true;
  image->assign(1, kExtents);
  auto put = [&](uint64_t off, uint64_t n) {
    const uint32_t o = static_cast<uint32_t>(off);
    const uint16_t len = static_cast<uint16_t>(n);
    const auto* ob = reinterpret_cast<const uint8_t*>(&o);
    const auto* lb = reinterpret_cast<const uint8_t*>(&len);
    image->insert(image->end(), ob, ob + 4);
    image->insert(image->end(), lb, lb + 2);
    image->insert(image->end(), file.begin() + static_cast<ptrdiff_t>(off),
                  file.begin() + static_cast<ptrdiff_t>(off + n));
  };
  const uint64_t head = std::min<uint64_t>(kHeadBytes, file.size());
  put(0, head);
  uint64_t i = head;
  while (i < file.size()) {
    if (file[i] == 0) {
      ++i;
      continue;
    }
    uint64_t end = i + 1;  // one past the run's last nonzero byte
    for (uint64_t j = end; j < file.size() && j < end + 16 && j - i < 65535; ++j) {
      if (file[j] != 0) end = j + 1;
    }
    put(i, end - i);
    i = end;
  }
  if (image->size() > kMaxImageBytes) {
    *why = "nonzero byte at offset " + std::to_string(outside) +
           " outside the fuzz windows, and the extent image is " + std::to_string(image->size()) +
           " bytes (most " + std::to_string(kMaxImageBytes) + ")";
    return false;
  }
  return true;
}

}  // namespace nvindex::fuzz
