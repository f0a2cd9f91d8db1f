// The fuzz input format (tests/fuzz/pool_image.h): a pool file encoded as an
// image and written back is byte-identical, windowed when its data lies in
// the windows, as extents when it does not (btree-ls's logs), refused when
// neither fits; damaged extent images (empty, cut short) still write a file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "fuzz/pool_image.h"

namespace nvindex::fuzz {
namespace {

/// A kMinPoolSize file image whose header's size field (bytes 48..55) says
/// so, with `fill` written at each offset in `at`.
std::vector<uint8_t> pool_bytes(const std::vector<uint64_t>& at, uint8_t fill = 0x5a) {
  std::vector<uint8_t> file(pm::kMinPoolSize, 0);
  const uint64_t size = pm::kMinPoolSize;
  std::memcpy(file.data() + 48, &size, sizeof(size));
  std::memcpy(file.data(), "NVINDEXP", 8);
  for (uint64_t off : at) file[off] = fill;
  return file;
}

/// Writes `image` as a pool file and reads it back.
std::vector<uint8_t> round_trip(const std::vector<uint8_t>& image) {
  const std::string path = "/dev/shm/nvindex_fuzz_image_test_" + std::to_string(getpid());
  EXPECT_TRUE(write_pool_file(path, image.data(), image.size()));
  std::vector<uint8_t> back;
  std::string why;
  EXPECT_TRUE(read_pool_file(path, &back, &why)) << why;
  ::unlink(path.c_str());
  return back;
}

TEST(FuzzImage, DataInTheWindowsGivesAWindowedImage) {
  const std::vector<uint8_t> file = pool_bytes({100, 4096 + 3, 65536 + 8191, 4 * 65536});
  std::vector<uint8_t> image;
  std::string why;
  ASSERT_TRUE(encode_image(file, &image, &why)) << why;
  EXPECT_EQ(image[0], 0);
  EXPECT_EQ(image.size(), kImageBytes);
  EXPECT_EQ(round_trip(image), file);
}

TEST(FuzzImage, DataOutsideTheWindowsGivesAnExtentImage) {
  // A byte just past chunk 1's window, two 1 MiB apart (btree-ls's logs).
  const std::vector<uint8_t> file = pool_bytes({2 * 65536 + 8192, 1 << 20, (3 << 20) + 17});
  std::vector<uint8_t> image;
  std::string why;
  ASSERT_TRUE(encode_image(file, &image, &why)) << why;
  EXPECT_EQ(image[0], kExtents);
  // The header window and three one-byte extents.
  EXPECT_EQ(image.size(), 1 + kExtentHeader + kHeadBytes + 3 * (kExtentHeader + 1));
  EXPECT_EQ(round_trip(image), file);
  EXPECT_EQ(head_bytes(image.data(), image.size()),
            std::vector<uint8_t>(file.begin(), file.begin() + kHeadBytes));
}

TEST(FuzzImage, NearbyRunsJoinIntoOneExtent) {
  // Runs 10 zero bytes apart join (fewer than 16); 40 apart do not.
  const std::vector<uint8_t> file = pool_bytes({1 << 20, (1 << 20) + 11, (1 << 20) + 52});
  std::vector<uint8_t> image;
  std::string why;
  ASSERT_TRUE(encode_image(file, &image, &why)) << why;
  EXPECT_EQ(image.size(),
            1 + kExtentHeader + kHeadBytes + (kExtentHeader + 12) + (kExtentHeader + 1));
  EXPECT_EQ(round_trip(image), file);
}

TEST(FuzzImage, TooMuchScatteredDataIsRefusedWithAReason) {
  std::vector<uint64_t> at;
  for (uint64_t off = 1 << 20; off < (3u << 20); off += 32) at.push_back(off);
  std::vector<uint8_t> image;
  std::string why;
  EXPECT_FALSE(encode_image(pool_bytes(at), &image, &why));
  EXPECT_NE(why.find("outside the fuzz windows"), std::string::npos) << why;
  EXPECT_NE(why.find("extent image"), std::string::npos) << why;
}

TEST(FuzzImage, DamagedExtentImagesStillWriteAFile) {
  std::vector<uint8_t> image;
  std::string why;
  ASSERT_TRUE(encode_image(pool_bytes({1 << 20}), &image, &why)) << why;
  // An empty extent at offset 0 (the harness once passed its null data
  // pointer to memcpy), then a last extent cut short: 4 of its 9 bytes.
  const uint8_t empty[6] = {0, 0, 0, 0, 0, 0};
  image.insert(image.end(), empty, empty + 6);
  const uint32_t off = 2 << 20;
  const uint16_t len = 9;
  image.insert(image.end(), reinterpret_cast<const uint8_t*>(&off),
               reinterpret_cast<const uint8_t*>(&off) + 4);
  image.insert(image.end(), reinterpret_cast<const uint8_t*>(&len),
               reinterpret_cast<const uint8_t*>(&len) + 2);
  image.insert(image.end(), {1, 2, 3, 4});
  std::vector<uint8_t> want = pool_bytes({1 << 20});
  std::memcpy(want.data() + off, "\x01\x02\x03\x04", 4);
  EXPECT_EQ(round_trip(image), want);
  // Cut inside an extent's header: the partial header is ignored.
  image.resize(image.size() - 7);
  EXPECT_EQ(round_trip(image), pool_bytes({1 << 20}));
}

TEST(FuzzImage, TheHeaderSizeFieldSetsTheFileSize) {
  std::vector<uint8_t> image;
  std::string why;
  ASSERT_TRUE(encode_image(pool_bytes({1 << 20}), &image, &why)) << why;
  // Extent image: the header is the first extent, its size field at byte
  // 1 + kExtentHeader + 48.
  const uint64_t eight = 8ull << 20;
  std::memcpy(image.data() + 1 + kExtentHeader + 48, &eight, sizeof(eight));
  EXPECT_EQ(round_trip(image).size(), eight);
  image[0] |= kForceMinSize;
  EXPECT_EQ(round_trip(image).size(), pm::kMinPoolSize);
}

}  // namespace
}  // namespace nvindex::fuzz
