// Pool: create/open/reopen round trips, the clean-shutdown flag across a
// simulated crash, every error path of create and open (and that a failed
// open leaves the file byte-identical), read_header, anonymous pools.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "nvindex/pm/allocator.h"
#include "nvindex/pm/pool.h"
#include "pm_test_util.h"
#include "util/temp_files.h"

namespace nvindex::pm {
namespace {

using testing::patch_file;
using testing::read_file;
using testing::TempPool;
using testing::write_file;

constexpr uint64_t kSize = 8ull << 20;

/// Creates a pool at `path` holding one 64 B block with `value`, published as
/// the root, and closes it cleanly.
void make_pool(const std::string& path, uint64_t value, std::string_view layout = "test") {
  std::unique_ptr<Pool> pool;
  ASSERT_TRUE(Pool::create(path, kSize, layout, Mode::kEmulated, &pool).ok());
  uint64_t off = 0;
  ASSERT_TRUE(pool->allocator().allocate(64, &off).ok());
  store(pool->ptr<uint64_t>(off), value);
  persist(pool->ptr<uint64_t>(off), 8);
  pool->set_root(off);
}

/// Opens `path` expecting `code` with `needle` in the message, and checks that
/// the file is byte-identical afterwards.
void expect_open_fails(const std::string& path, std::string_view layout, Code code,
                       const std::string& needle) {
  const std::vector<char> before = read_file(path);
  std::unique_ptr<Pool> pool;
  const Status s = Pool::open(path, layout, Mode::kEmulated, &pool);
  EXPECT_EQ(s.code(), code) << s.ToString();
  EXPECT_NE(s.message().find(needle), std::string::npos) << s.ToString();
  EXPECT_EQ(pool, nullptr);
  EXPECT_TRUE(read_file(path) == before) << "failed open modified " << path;
}

TEST(Pool, CreateReopenRoundTrip) {
  TempPool tp;
  {
    std::unique_ptr<Pool> pool;
    ASSERT_TRUE(Pool::create(tp.path(), kSize + 100, "fastfair", Mode::kEmulated, &pool).ok());
    EXPECT_EQ(pool->size(), kSize);  // rounded down to 4096
    EXPECT_EQ(pool->layout(), "fastfair");
    EXPECT_EQ(pool->path(), tp.path());
    EXPECT_EQ(pool->mode(), Mode::kEmulated);
    EXPECT_FALSE(pool->was_clean_shutdown());
    EXPECT_EQ(pool->root(), 0u);
    EXPECT_EQ(pool->ptr<char>(0), nullptr);
    EXPECT_EQ(pool->offset(nullptr), 0u);
    uint64_t off = 0;
    ASSERT_TRUE(pool->allocator().allocate(100, &off).ok());
    EXPECT_EQ(pool->offset(pool->ptr<char>(off)), off);
    EXPECT_TRUE(pool->contains(off, 128));
    EXPECT_FALSE(pool->contains(0, 8));
    EXPECT_FALSE(pool->contains(kSize - 8, 16));
    store(pool->ptr<uint64_t>(off), uint64_t{0xfeedf00d});
    persist(pool->ptr<uint64_t>(off), 8);
    pool->set_root(off);
    EXPECT_EQ(pool->root(), off);
  }
  PoolHeaderInfo info;
  ASSERT_TRUE(Pool::read_header(tp.path(), &info).ok());
  EXPECT_TRUE(info.clean_shutdown);
  EXPECT_EQ(info.layout, "fastfair");
  EXPECT_EQ(info.size, kSize);
  EXPECT_EQ(info.version, kPoolVersion);
  EXPECT_TRUE(info.checksum_ok);
  EXPECT_NE(info.root, 0u);

  std::unique_ptr<Pool> pool;
  ASSERT_TRUE(Pool::open(tp.path(), "fastfair", Mode::kEmulated, &pool).ok());
  EXPECT_TRUE(pool->was_clean_shutdown());
  EXPECT_EQ(pool->root(), info.root);
  EXPECT_EQ(*pool->ptr<uint64_t>(pool->root()), 0xfeedf00du);
  EXPECT_EQ(pool->allocator().block_size(pool->root()), 128u);
  // While open, the flag on media says "not clean".
  PoolHeaderInfo open_info;
  ASSERT_TRUE(Pool::read_header(tp.path(), &open_info).ok());
  EXPECT_FALSE(open_info.clean_shutdown);
}

TEST(Pool, CrashedSessionLeavesCleanFlagClear) {
  TempPool tp;
  make_pool(tp.path(), 7);
  // The child opens the pool and dies without closing it (a crash).
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::unique_ptr<Pool> pool;
    const Status s = Pool::open(tp.path(), "test", Mode::kEmulated, &pool);
    _exit(s.ok() && pool->was_clean_shutdown() ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);

  PoolHeaderInfo info;
  ASSERT_TRUE(Pool::read_header(tp.path(), &info).ok());
  EXPECT_FALSE(info.clean_shutdown);
  {
    // Opened and closed with no recovery: still not clean.
    std::unique_ptr<Pool> pool;
    ASSERT_TRUE(Pool::open(tp.path(), "test", Mode::kEmulated, &pool).ok());
    EXPECT_FALSE(pool->was_clean_shutdown());
    EXPECT_EQ(*pool->ptr<uint64_t>(pool->root()), 7u);
  }
  {
    // A recovery pass begun and never ended (a failed recovery): still not clean.
    std::unique_ptr<Pool> pool;
    ASSERT_TRUE(Pool::open(tp.path(), "test", Mode::kEmulated, &pool).ok());
    EXPECT_FALSE(pool->was_clean_shutdown());
    pool->allocator().begin_recovery();
  }
  ASSERT_TRUE(Pool::read_header(tp.path(), &info).ok());
  EXPECT_FALSE(info.clean_shutdown);
  {
    // A completed recovery pass: the close is clean.
    std::unique_ptr<Pool> pool;
    ASSERT_TRUE(Pool::open(tp.path(), "test", Mode::kEmulated, &pool).ok());
    EXPECT_FALSE(pool->was_clean_shutdown());
    pool->allocator().begin_recovery();
    ASSERT_TRUE(pool->allocator().mark_reachable(pool->root()).ok());
    pool->allocator().end_recovery();
  }
  std::unique_ptr<Pool> pool;
  ASSERT_TRUE(Pool::open(tp.path(), "test", Mode::kEmulated, &pool).ok());
  EXPECT_TRUE(pool->was_clean_shutdown());
}

TEST(Pool, CleanPoolOpenedWithoutRecoveryStaysClean) {
  TempPool tp;
  make_pool(tp.path(), 9);
  {
    std::unique_ptr<Pool> pool;
    ASSERT_TRUE(Pool::open(tp.path(), "test", Mode::kEmulated, &pool).ok());
    EXPECT_TRUE(pool->was_clean_shutdown());
  }
  std::unique_ptr<Pool> pool;
  ASSERT_TRUE(Pool::open(tp.path(), "test", Mode::kEmulated, &pool).ok());
  EXPECT_TRUE(pool->was_clean_shutdown());
}

// The close record (pool.h): written at a clean close of a session whose
// allocator worked, read at open, kept until a recovery consumes it (on
// media and in DRAM), left alone by a session that never recovered or whose
// recovery failed.
TEST(Pool, CloseRecordRoundTrip) {
  TempPool tp;
  PoolHeaderInfo info;
  {
    std::unique_ptr<Pool> pool;
    ASSERT_TRUE(Pool::create(tp.path(), 8ull << 20, "test", Mode::kEmulated, &pool).ok());
    uint64_t off = 0;
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(pool->allocator().allocate(256, &off).ok());
    pool->set_root(off);
    pool->set_close_keys(7);
  }
  ASSERT_TRUE(Pool::read_header(tp.path(), &info).ok());
  EXPECT_TRUE(info.clean_shutdown);
  EXPECT_EQ(info.close_bytes, 3u * 256);
  ASSERT_TRUE(info.close_keys.has_value());
  EXPECT_EQ(*info.close_keys, 7u);
  {
    // Opened, never recovered: the record stays as it was.
    std::unique_ptr<Pool> pool;
    ASSERT_TRUE(Pool::open(tp.path(), "test", Mode::kEmulated, &pool).ok());
    EXPECT_EQ(pool->close_record().bytes, 3u * 256);
  }
  ASSERT_TRUE(Pool::read_header(tp.path(), &info).ok());
  EXPECT_EQ(info.close_bytes, 3u * 256);
  {
    // A failed recovery: the pass never ends, the record is not consumed;
    // the pool stays unclean and keeps its record.
    std::unique_ptr<Pool> pool;
    ASSERT_TRUE(Pool::open(tp.path(), "test", Mode::kEmulated, &pool).ok());
    pool->allocator().begin_recovery();
  }
  ASSERT_TRUE(Pool::read_header(tp.path(), &info).ok());
  EXPECT_FALSE(info.clean_shutdown);
  EXPECT_EQ(info.close_bytes, 3u * 256);
  {
    // A recovery that reaches two of the three blocks, then a clean close
    // without a key count: the new record says 512 bytes, keys unrecorded.
    std::unique_ptr<Pool> pool;
    ASSERT_TRUE(Pool::open(tp.path(), "test", Mode::kEmulated, &pool).ok());
    pool->allocator().begin_recovery();
    ASSERT_TRUE(pool->allocator().mark_reachable(pool->root()).ok());
    ASSERT_TRUE(pool->allocator().mark_reachable(pool->root() - 256).ok());
    pool->consume_close_record(512);
    PoolHeaderInfo during;
    ASSERT_TRUE(Pool::read_header(tp.path(), &during).ok());
    EXPECT_EQ(during.close_bytes, 0u) << "consumed on media";
    EXPECT_FALSE(during.close_keys.has_value());
    EXPECT_EQ(pool->close_record().bytes, 0u) << "and in DRAM";
    EXPECT_EQ(pool->close_record_at_open().bytes, 3u * 256);
    EXPECT_EQ(pool->reached_bytes(), 512u);
    pool->allocator().end_recovery();
  }
  ASSERT_TRUE(Pool::read_header(tp.path(), &info).ok());
  EXPECT_TRUE(info.clean_shutdown);
  EXPECT_EQ(info.close_bytes, 2u * 256);
  EXPECT_FALSE(info.close_keys.has_value());
}

// A pool without an index (root 0) gets no close record: there is nothing
// it could describe.
TEST(Pool, NoCloseRecordWithoutARoot) {
  TempPool tp;
  {
    std::unique_ptr<Pool> pool;
    ASSERT_TRUE(Pool::create(tp.path(), 8ull << 20, "test", Mode::kEmulated, &pool).ok());
    uint64_t off = 0;
    ASSERT_TRUE(pool->allocator().allocate(256, &off).ok());
    pool->set_close_keys(1);
  }
  PoolHeaderInfo info;
  ASSERT_TRUE(Pool::read_header(tp.path(), &info).ok());
  EXPECT_TRUE(info.clean_shutdown);
  EXPECT_EQ(info.close_bytes, 0u);
  EXPECT_FALSE(info.close_keys.has_value());
}

TEST(Pool, OpenMissingFile) {
  TempPool tp;
  std::unique_ptr<Pool> pool;
  const Status s = Pool::open(tp.path(), "test", Mode::kEmulated, &pool);
  EXPECT_EQ(s.code(), Code::kNotFound);
  EXPECT_NE(s.message().find(tp.path()), std::string::npos) << s.ToString();
  PoolHeaderInfo info;
  EXPECT_EQ(Pool::read_header(tp.path(), &info).code(), Code::kNotFound);
}

// Only a regular file is a pool: a FIFO (which would block open() or a read
// until a writer came), a directory or a device is refused at once, with a
// message naming what it is, and nothing is read or written.
TEST(Pool, OpenRefusesWhatIsNotARegularFileWithoutBlocking) {
  TempPool tp;
  ASSERT_EQ(::mkfifo(tp.path().c_str(), 0600), 0);
  const std::string dir = ::testing::TempDir();
  for (const auto& [path, kind] : std::vector<std::pair<std::string, std::string>>{
           {tp.path(), "a FIFO"}, {dir, "a directory"}, {"/dev/null", "a character device"}}) {
    SCOPED_TRACE(path);
    std::unique_ptr<Pool> pool;
    Status s = Pool::open(path, "test", Mode::kEmulated, &pool);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find(kind + ", not a pool file"), std::string::npos) << s.ToString();
    PoolHeaderInfo info;
    s = Pool::read_header(path, &info);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find(kind), std::string::npos) << s.ToString();
  }
  ::unlink(tp.path().c_str());
}

TEST(Pool, OpenNotAPool) {
  TempPool tp;
  write_file(tp.path(), {});
  expect_open_fails(tp.path(), "test", Code::kCorruption, "file too small");
  write_file(tp.path(), std::vector<char>(100, 'x'));
  expect_open_fails(tp.path(), "test", Code::kCorruption, "file too small");
  std::vector<char> junk(kSize);
  std::mt19937_64 rng(42);
  for (char& c : junk) c = static_cast<char>(rng());
  write_file(tp.path(), junk);
  expect_open_fails(tp.path(), "test", Code::kCorruption, "not an nvindex pool");
  PoolHeaderInfo info;
  EXPECT_EQ(Pool::read_header(tp.path(), &info).code(), Code::kCorruption);
}

TEST(Pool, OpenWrongMagic) {
  TempPool tp;
  make_pool(tp.path(), 1);
  patch_file(tp.path(), 0, "X", 1);
  expect_open_fails(tp.path(), "test", Code::kCorruption, "not an nvindex pool");
}

TEST(Pool, OpenWrongVersion) {
  TempPool tp;
  make_pool(tp.path(), 1);
  const uint32_t v = 2;
  patch_file(tp.path(), offsetof(PoolHeader, version), &v, 4);
  expect_open_fails(tp.path(), "test", Code::kCorruption, "version 2");
}

TEST(Pool, OpenWrongHeaderSize) {
  TempPool tp;
  make_pool(tp.path(), 1);
  const uint32_t hs = 8192;
  patch_file(tp.path(), offsetof(PoolHeader, header_size), &hs, 4);
  expect_open_fails(tp.path(), "test", Code::kCorruption, "header of 8192");
}

TEST(Pool, OpenBadChecksum) {
  TempPool tp;
  make_pool(tp.path(), 1);
  patch_file(tp.path(), offsetof(PoolHeader, layout) + 1, "X", 1);  // "tXst"
  expect_open_fails(tp.path(), "tXst", Code::kCorruption, "checksum");
  PoolHeaderInfo info;
  ASSERT_TRUE(Pool::read_header(tp.path(), &info).ok());
  EXPECT_FALSE(info.checksum_ok);
  EXPECT_EQ(info.layout, "tXst");
}

TEST(Pool, OpenWrongLayoutNamesBoth) {
  TempPool tp;
  make_pool(tp.path(), 1, "fastfair");
  expect_open_fails(tp.path(), "lbtree", Code::kInvalidArgument, "'fastfair'");
  expect_open_fails(tp.path(), "lbtree", Code::kInvalidArgument, "'lbtree'");
}

TEST(Pool, OpenTruncated) {
  TempPool tp;
  make_pool(tp.path(), 1);
  ASSERT_EQ(truncate(tp.path().c_str(), kSize / 2), 0);
  expect_open_fails(tp.path(), "test", Code::kCorruption, "truncated");
  PoolHeaderInfo info;
  EXPECT_EQ(Pool::read_header(tp.path(), &info).code(), Code::kCorruption);
}

TEST(Pool, OpenGrownFile) {
  TempPool tp;
  make_pool(tp.path(), 1);
  ASSERT_EQ(truncate(tp.path().c_str(), kSize + 4096), 0);
  expect_open_fails(tp.path(), "test", Code::kCorruption, "header says");
}

TEST(Pool, OpenDamagedAllocatorMetadata) {
  TempPool tp;
  make_pool(tp.path(), 1);
  const uint64_t bogus = 12345;
  patch_file(tp.path(), 152, &bogus, 8);  // the allocator's chunk count
  expect_open_fails(tp.path(), "test", Code::kCorruption, "allocator metadata");
}

TEST(Pool, OpenBadChunkTableEntry) {
  TempPool tp;
  make_pool(tp.path(), 1);
  for (const unsigned char bad : {14, 0x80, 0x8e}) {
    patch_file(tp.path(), kPoolHeaderBytes + 3, &bad, 1);
    expect_open_fails(tp.path(), "test", Code::kCorruption,
                      "unknown size class " + std::to_string(bad));
  }
}

TEST(Pool, OpenRootOutOfRange) {
  TempPool tp;
  make_pool(tp.path(), 1);
  const uint64_t root = kSize + 64;
  patch_file(tp.path(), offsetof(PoolHeader, root), &root, 8);
  expect_open_fails(tp.path(), "test", Code::kCorruption, "root offset");
}

TEST(Pool, OpenStoreRootOutOfRange) {
  TempPool tp;
  make_pool(tp.path(), 1);
  const uint64_t root = 100;
  patch_file(tp.path(), offsetof(PoolHeader, store_root), &root, 8);
  expect_open_fails(tp.path(), "test", Code::kCorruption, "store root offset");
}

TEST(Pool, CrashSimModeMapsLikeEmulated) {
  TempPool tp;
  std::unique_ptr<Pool> pool;
  ASSERT_TRUE(Pool::create(tp.path(), kSize, "test", Mode::kCrashSim, &pool).ok());
  EXPECT_EQ(pool->mode(), Mode::kCrashSim);
  pool.reset();
  ASSERT_TRUE(Pool::open(tp.path(), "test", Mode::kCrashSim, &pool).ok());
  EXPECT_EQ(pool->mode(), Mode::kCrashSim);
  EXPECT_TRUE(pool->was_clean_shutdown());
  pool.reset();
  EXPECT_EQ(Pool::open(tp.path(), "test", Mode::kDram, &pool).code(), Code::kInvalidArgument);
  ASSERT_TRUE(Pool::open(tp.path(), "test", Mode::kEmulated, &pool).ok());
}

TEST(Pool, OpenTwiceIsBusy) {
  TempPool tp;
  make_pool(tp.path(), 1);
  std::unique_ptr<Pool> first;
  ASSERT_TRUE(Pool::open(tp.path(), "test", Mode::kEmulated, &first).ok());
  const std::vector<char> before = read_file(tp.path());
  std::unique_ptr<Pool> second;
  const Status s = Pool::open(tp.path(), "test", Mode::kEmulated, &second);
  EXPECT_EQ(s.code(), Code::kBusy) << s.ToString();
  EXPECT_EQ(second, nullptr);
  EXPECT_TRUE(read_file(tp.path()) == before);
  first.reset();
  EXPECT_TRUE(Pool::open(tp.path(), "test", Mode::kEmulated, &second).ok());
}

TEST(Pool, CreateErrors) {
  TempPool tp;
  std::unique_ptr<Pool> pool;
  Status s = Pool::create(tp.path(), kMinPoolSize - 1, "test", Mode::kEmulated, &pool);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("minimum"), std::string::npos);
  s = Pool::create(tp.path(), kSize, "", Mode::kEmulated, &pool);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
  s = Pool::create(tp.path(), kSize, std::string(kMaxLayoutLen + 1, 'a'), Mode::kEmulated, &pool);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
  s = Pool::create(tp.path(), kSize, std::string_view("a\0b", 3), Mode::kEmulated, &pool);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
  s = Pool::create(tp.path(), kSize, "test", Mode::kDram, &pool);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
  EXPECT_NE(access(tp.path().c_str(), F_OK), 0) << "a refused create left a file";
  s = Pool::create("/nonexistent-dir/x.pool", kSize, "test", Mode::kEmulated, &pool);
  EXPECT_EQ(s.code(), Code::kIOError) << s.ToString();
  EXPECT_NE(s.message().find("/nonexistent-dir/x.pool"), std::string::npos);

  // The longest layout name is accepted.
  ASSERT_TRUE(
      Pool::create(tp.path(), kSize, std::string(kMaxLayoutLen, 'z'), Mode::kEmulated, &pool).ok());
  EXPECT_EQ(pool->layout(), std::string(kMaxLayoutLen, 'z'));
  pool.reset();
  const std::vector<char> before = read_file(tp.path());
  s = Pool::create(tp.path(), kSize, "test", Mode::kEmulated, &pool);
  EXPECT_EQ(s.code(), Code::kAlreadyExists) << s.ToString();
  EXPECT_TRUE(read_file(tp.path()) == before);
}

TEST(Pool, DaxOnTmpfsIsRefusedClearly) {
  TempPool tp;
  std::unique_ptr<Pool> pool;
  const Status s = Pool::create(tp.path(), kSize, "test", Mode::kDax, &pool);
  if (s.ok()) GTEST_SKIP() << "/dev/shm supports cache-line store granularity here";
  EXPECT_EQ(s.code(), Code::kNotSupported) << s.ToString();
  EXPECT_NE(s.message().find("DAX"), std::string::npos) << s.ToString();
  EXPECT_NE(access(tp.path().c_str(), F_OK), 0) << "a failed create left a file";
}

TEST(Pool, Anonymous) {
  std::unique_ptr<Pool> pool;
  EXPECT_EQ(Pool::create_anonymous(kMinPoolSize - 4096, "anon", &pool).code(),
            Code::kInvalidArgument);
  EXPECT_EQ(Pool::create_anonymous(kSize, "", &pool).code(), Code::kInvalidArgument);
  ASSERT_TRUE(Pool::create_anonymous(kSize, "anon", &pool).ok());
  EXPECT_EQ(pool->layout(), "anon");
  EXPECT_EQ(pool->size(), kSize);
  uint64_t off = 0;
  ASSERT_TRUE(pool->allocator().allocate(4096, &off).ok());
  EXPECT_EQ(off % 4096, 0u);
  pool->set_root(off);
  EXPECT_EQ(pool->root(), off);
}

TEST(Pool, PageBackingCountsAPoolsResidentPages) {
  TempPool tp;
  std::unique_ptr<Pool> pool;
  ASSERT_TRUE(Pool::create(tp.path(), kSize, "test", Mode::kEmulated, &pool).ok());
  // posix_fallocate made every page of the tmpfs file resident; the mapping
  // maps them as they are touched.
  for (uint64_t off = 0; off < kSize; off += 4096) {
    (void)*static_cast<volatile char*>(pool->base() + off);
  }
  const PageBacking b = pool->page_backing();
  ASSERT_TRUE(b.known);
  EXPECT_GE(b.mapped_bytes, kSize);
  EXPECT_EQ(b.resident_bytes, kSize);
  EXPECT_GE(b.page_bytes, 4096u);
  EXPECT_LE(b.huge_bytes, b.resident_bytes);
  // Nothing is mapped at address 4096.
  EXPECT_FALSE(page_backing(reinterpret_cast<void*>(4096), 4096).known);
}

TEST(Pool, PrefaultMapsEveryPageAndChangesNoByte) {
  TempPool tp;
  std::unique_ptr<Pool> pool;
  ASSERT_TRUE(Pool::create(tp.path(), kSize, "test", Mode::kEmulated, &pool).ok());
  uint64_t off = 0;
  ASSERT_TRUE(pool->allocator().allocate(64, &off).ok());
  store(pool->ptr<uint64_t>(off), uint64_t{0x5eed});
  persist(pool->ptr<uint64_t>(off), 8);
  pool->set_root(off);
  // Only the pages create() and the store above touched are mapped so far.
  const PageBacking before = pool->page_backing();
  ASSERT_TRUE(before.known);
  ASSERT_LT(before.resident_bytes, kSize);
  // The bytes as the file holds them, read without touching the mapping.
  std::ifstream file(tp.path(), std::ios::binary);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(file)),
                                std::istreambuf_iterator<char>());
  ASSERT_EQ(bytes.size(), kSize);
  ASSERT_EQ(pool->page_backing().resident_bytes, before.resident_bytes);
  double seconds = -1;
  const Status s = pool->prefault(&seconds);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_GE(seconds, 0.0);
  EXPECT_EQ(pool->page_backing().resident_bytes, kSize);
  EXPECT_EQ(std::memcmp(bytes.data(), pool->base(), bytes.size()), 0);
  pool.reset();  // a clean close: the pool reopens as it was
  ASSERT_TRUE(Pool::open(tp.path(), "test", Mode::kEmulated, &pool).ok());
  EXPECT_TRUE(pool->was_clean_shutdown());
  EXPECT_EQ(*pool->ptr<uint64_t>(pool->root()), 0x5eedu);
}

/// The first writable hugetlbfs mount in /proc/mounts with at least `bytes`
/// free in huge pages ("" when there is none: the test is skipped, with the
/// reason). .ci/run mounts one (scripts/huge-pages).
std::string hugetlbfs_mount_with_free_pages(uint64_t bytes) {
  std::ifstream mounts("/proc/mounts");
  for (std::string dev, dir, type, rest;
       mounts >> dev >> dir >> type && std::getline(mounts, rest);) {
    if (type != "hugetlbfs" || ::access(dir.c_str(), W_OK) != 0) continue;
    const std::optional<uint64_t> free = util::free_bytes_in(dir);
    if (free && *free >= bytes) return dir;
  }
  return "";
}

TEST(Pool, OnHugetlbfsTheSizeIsWholePagesAndThePagesAreHuge) {
  const std::string dir = hugetlbfs_mount_with_free_pages(16ull << 20);
  if (dir.empty()) GTEST_SKIP() << "no writable hugetlbfs mount with 16 MiB of free huge pages";
  const std::string path = dir + "/nvindex-pmtest-" + std::to_string(::getpid()) + ".pool";
  std::remove(path.c_str());
  {
    std::unique_ptr<Pool> pool;
    // 13 MiB + 100 B: rounded down to whole pages of the mount (2 MiB: 12 MiB).
    const Status s = Pool::create(path, (13ull << 20) + 100, "test", Mode::kEmulated, &pool);
    ASSERT_TRUE(s.ok()) << s.ToString();
    const PageBacking b = pool->page_backing();
    ASSERT_TRUE(b.known);
    EXPECT_GT(b.page_bytes, 4096u);
    EXPECT_EQ(pool->size() % b.page_bytes, 0u);
    EXPECT_LE(pool->size(), (13ull << 20) + 100);
    EXPECT_GT(pool->size(), (13ull << 20) + 100 - b.page_bytes);
    EXPECT_EQ(b.huge_bytes, b.resident_bytes);
    uint64_t off = 0;
    ASSERT_TRUE(pool->allocator().allocate(64, &off).ok());
    store(pool->ptr<uint64_t>(off), uint64_t{42});
    persist(pool->ptr<uint64_t>(off), 8);
    pool->set_root(off);
  }
  {
    std::unique_ptr<Pool> pool;
    const Status s = Pool::open(path, "test", Mode::kEmulated, &pool);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_TRUE(pool->was_clean_shutdown());
    EXPECT_EQ(*pool->ptr<uint64_t>(pool->root()), 42u);
  }
  std::remove(path.c_str());
}

}  // namespace
}  // namespace nvindex::pm
