// The fuzz input format for pool files (issue 3 §6): a compact "image" of the
// parts of a small pool that hold data, so that libFuzzer's mutations land on
// the header, the allocator metadata and the first nodes instead of on
// megabytes of zeros.
//
// Image layout (bytes):
//   [0]        control byte: bit 0 = recompute the header checksum after
//              mutation (lets mutations of the checksummed header fields get
//              past the checksum test), bit 1 = make the file kMinPoolSize
//              bytes whatever the header claims (truncation), others unused
//   [1, ...)   the windows below, concatenated; an input shorter than
//              kImageBytes is zero-padded, a longer one is cut
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
/// Bytes of a full image: the control byte plus every window.
inline constexpr uint64_t kImageBytes = 1 + 4352 + 4 * 8192;
/// Largest pool file the fuzz target creates, bytes.
inline constexpr uint64_t kMaxFuzzPoolBytes = 8ull << 20;
inline constexpr uint8_t kFixChecksum = 1;
inline constexpr uint8_t kForceMinSize = 2;

/// The window bytes of an image (the input after the control byte, padded
/// with zeros to every window), as one buffer of kImageBytes - 1 bytes.
inline std::vector<uint8_t> window_bytes(const uint8_t* data, size_t size) {
  std::vector<uint8_t> w(kImageBytes - 1, 0);
  if (size > 1) std::memcpy(w.data(), data + 1, std::min<size_t>(size - 1, w.size()));
  return w;
}

/// File size the image gives (see the file comment), bytes.
inline uint64_t file_size_of(const std::vector<uint8_t>& w, uint8_t control) {
  uint64_t claimed = 0;
  std::memcpy(&claimed, w.data() + 48, sizeof(claimed));
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
  std::vector<uint8_t> w = window_bytes(data, size);
  if ((control & kFixChecksum) != 0) {
    const uint64_t sum = XXH64(w.data(), 56, 0);
    std::memcpy(w.data() + 56, &sum, sizeof(sum));
  }
  const uint64_t file_size = file_size_of(w, control);
  ::unlink(path.c_str());
  const int fd = ::open(path.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  bool ok = ::ftruncate(fd, static_cast<off_t>(file_size)) == 0;
  uint64_t pos = 0;
  for (const Window& win : kWindows) {
    if (win.offset >= file_size) break;
    const uint64_t n = std::min(win.bytes, file_size - win.offset);
    ok = ok &&
         ::pwrite(fd, w.data() + pos, n, static_cast<off_t>(win.offset)) == static_cast<ssize_t>(n);
    pos += win.bytes;
  }
  ::close(fd);
  return ok;
}

/// Reads a pool file back into an image (control byte 0). False on an I/O
/// error, on a file larger than kMaxFuzzPoolBytes, or when a nonzero byte lies
/// outside the windows (the image could not reproduce the file).
inline bool image_from_file(const std::string& path, std::vector<uint8_t>* image,
                            std::string* why) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *why = "cannot open " + path;
    return false;
  }
  const off_t size = ::lseek(fd, 0, SEEK_END);
  std::vector<uint8_t> file(static_cast<size_t>(std::max<off_t>(size, 0)));
  const bool read_ok = size > 0 && static_cast<uint64_t>(size) <= kMaxFuzzPoolBytes &&
                       ::pread(fd, file.data(), file.size(), 0) == size;
  ::close(fd);
  if (!read_ok) {
    *why = "cannot read " + path + " (or larger than the fuzz limit)";
    return false;
  }
  image->assign(1, 0);
  std::vector<bool> covered(file.size(), false);
  for (const Window& win : kWindows) {
    for (uint64_t i = 0; i < win.bytes; ++i) {
      const uint64_t off = win.offset + i;
      image->push_back(off < file.size() ? file[off] : 0);
      if (off < file.size()) covered[off] = true;
    }
  }
  for (size_t i = 0; i < file.size(); ++i) {
    if (file[i] != 0 && !covered[i]) {
      *why = "nonzero byte at offset " + std::to_string(i) + " outside the fuzz windows";
      return false;
    }
  }
  return true;
}

}  // namespace nvindex::fuzz
