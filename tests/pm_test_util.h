// Helpers shared by the pm_* tests: unique pool paths in /dev/shm and whole-
// file reads for byte-identity checks.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace nvindex::pm::testing {

/// A pool file path unique to this process and test, removed before first use
/// and on destruction: /dev/shm/nvindex-pmtest-<pid>-<suite>.<test>-<tag>.pool
/// (a '/' of a parameterised test's name becomes '_').
class TempPool {
 public:
  explicit TempPool(const std::string& tag = "p") {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string test = std::string(info->test_suite_name()) + "." + info->name();
    for (char& c : test) {
      if (c == '/') c = '_';
    }
    path_ =
        "/dev/shm/nvindex-pmtest-" + std::to_string(::getpid()) + "-" + test + "-" + tag + ".pool";
    std::remove(path_.c_str());
  }
  ~TempPool() { std::remove(path_.c_str()); }
  TempPool(const TempPool&) = delete;
  TempPool& operator=(const TempPool&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

/// The whole content of a file (empty if it cannot be read).
inline std::vector<char> read_file(const std::string& path) {
  std::vector<char> out;
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return out;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) out.insert(out.end(), buf, buf + n);
  std::fclose(f);
  return out;
}

/// Overwrites `n` bytes at `off` of a file.
inline void patch_file(const std::string& path, size_t off, const void* bytes, size_t n) {
  FILE* f = std::fopen(path.c_str(), "r+b");
  ASSERT_NE(f, nullptr) << path;
  ASSERT_EQ(std::fseek(f, static_cast<long>(off), SEEK_SET), 0);
  ASSERT_EQ(std::fwrite(bytes, 1, n, f), n);
  std::fclose(f);
}

/// Writes `bytes` as the whole content of a file.
inline void write_file(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace nvindex::pm::testing
