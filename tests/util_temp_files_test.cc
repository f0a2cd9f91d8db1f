// util/temp_files.h: an interrupted tool removes its registered temporary
// files and directory (newest first) and still ends by the signal; a path
// whose guard is gone is left alone; an ignored signal stays ignored.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>

#include "util/temp_files.h"

namespace nvindex::util {
namespace {

bool exists(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0;
}

void touch(const std::string& p) {
  FILE* f = std::fopen(p.c_str(), "w");
  ASSERT_NE(f, nullptr) << p;
  std::fclose(f);
}

TEST(TempFiles, TempPoolDirIsWritable) {
  EXPECT_EQ(::access(temp_pool_dir().c_str(), W_OK | X_OK), 0) << temp_pool_dir();
}

TEST(TempFiles, SignalRemovesRegisteredPathsNewestFirstAndEndsByTheSignal) {
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    SCOPED_TRACE(sig);
    const std::string dir = temp_pool_dir() + "/nvindex-tempfiles-" + std::to_string(::getpid()) +
                            "-" + std::to_string(sig);
    const std::string a = dir + "/a.pool", b = dir + "/b.pool", kept = dir + "/kept.pool";
    ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      install_remove_on_signal();
      RemoveOnSignal d(dir);  // the directory first, its files after it
      touch(a);
      RemoveOnSignal ga(a);
      touch(kept);
      { RemoveOnSignal gone(kept); }  // released: not removed
      touch(b);
      RemoveOnSignal gb(b);
      if (!d.registered() || !ga.registered() || !gb.registered()) ::_exit(3);
      ::raise(sig);
      ::_exit(4);  // not reached: the signal ends the process
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status)) << "exit " << WEXITSTATUS(status);
    EXPECT_EQ(WTERMSIG(status), sig);
    EXPECT_FALSE(exists(a));
    EXPECT_FALSE(exists(b));
    EXPECT_TRUE(exists(kept));
    // The directory still holds kept.pool, so its rmdir failed: still there.
    EXPECT_TRUE(exists(dir));
    std::remove(kept.c_str());
    ::rmdir(dir.c_str());
  }
}

TEST(TempFiles, EmptiedDirectoryIsRemovedAndIgnoredSignalsStayIgnored) {
  const std::string dir =
      temp_pool_dir() + "/nvindex-tempfiles-" + std::to_string(::getpid()) + "-dir";
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::signal(SIGHUP, SIG_IGN);  // as under nohup
    install_remove_on_signal();
    RemoveOnSignal d(dir);
    const std::string f = dir + "/t.pool";
    touch(f);
    RemoveOnSignal g(f);
    ::raise(SIGHUP);  // ignored: nothing removed, the process goes on
    if (!exists(f)) ::_exit(5);
    ::raise(SIGTERM);
    ::_exit(4);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status)) << "exit " << WEXITSTATUS(status);
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
  EXPECT_FALSE(exists(dir)) << "the directory, emptied first, is removed";
  ::rmdir(dir.c_str());
}

// A TempDir (a block-device store's directory) goes with everything in it,
// files and directories a few levels deep, when a signal interrupts the
// process; destroyed normally it is removed too, unless kept.
TEST(TempFiles, TempDirIsRemovedWithItsContentsOnASignalAndOnDestruction) {
  std::string path;
  {
    TempDir d(temp_device_dir(), "nvindex-tempfiles-");
    ASSERT_TRUE(d.ok()) << d.error();
    path = d.path();
    ASSERT_EQ(::mkdir((path + "/store").c_str(), 0700), 0);
    touch(path + "/store/000001.log");
  }
  EXPECT_FALSE(exists(path)) << "destroyed: removed with its contents";
  {
    TempDir d(temp_device_dir(), "nvindex-tempfiles-");
    ASSERT_TRUE(d.ok()) << d.error();
    d.keep();
    path = d.path();
  }
  EXPECT_TRUE(exists(path)) << "kept";
  ::rmdir(path.c_str());

  const std::string parent = temp_device_dir();
  int pipefd[2];
  ASSERT_EQ(::pipe(pipefd), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(pipefd[0]);
    install_remove_on_signal();
    TempDir d(parent, "nvindex-tempfiles-");
    if (!d.ok()) ::_exit(3);
    const std::string deep = d.path() + "/store/sub";
    if (::mkdir((d.path() + "/store").c_str(), 0700) != 0 || ::mkdir(deep.c_str(), 0700) != 0) {
      ::_exit(3);
    }
    touch(d.path() + "/store/CURRENT");
    touch(deep + "/000005.sst");
    const std::string p = d.path() + "\n";
    if (::write(pipefd[1], p.data(), p.size()) != static_cast<ssize_t>(p.size())) ::_exit(3);
    ::raise(SIGTERM);
    ::_exit(4);
  }
  ::close(pipefd[1]);
  std::string got;
  char c;
  while (::read(pipefd[0], &c, 1) == 1 && c != '\n') got += c;
  ::close(pipefd[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status)) << "exit " << WEXITSTATUS(status);
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
  ASSERT_FALSE(got.empty());
  EXPECT_FALSE(exists(got)) << got << " left behind by the signal";
}

// on_tmpfs agrees with the mount table for every mount point it can statfs
// (the last entry of a mount point wins, as it covers the earlier ones).
TEST(TempFiles, OnTmpfsAgreesWithTheMountTable) {
  std::ifstream mounts("/proc/self/mounts");
  if (!mounts) GTEST_SKIP() << "no /proc/self/mounts";
  std::map<std::string, std::string> type_of;
  std::string dev, dir, type, rest;
  while (mounts >> dev >> dir >> type && std::getline(mounts, rest)) type_of[dir] = type;
  int tmpfs = 0;
  for (const auto& [d, t] : type_of) {
    if (d.find('\\') != std::string::npos || !exists(d)) continue;  // escaped names
    const bool memory = t == "tmpfs" || t == "devtmpfs";            // devtmpfs: tmpfs underneath
    EXPECT_EQ(on_tmpfs(d), memory) << d << " is " << t;
    tmpfs += memory;
  }
  EXPECT_FALSE(on_tmpfs(temp_device_dir())) << temp_device_dir() << " should be on a disk";
  std::printf("%zu mount points, %d of them tmpfs\n", type_of.size(), tmpfs);
}

}  // namespace
}  // namespace nvindex::util
