// util/temp_files.h: an interrupted tool removes its registered temporary
// files and directory (newest first) and still ends by the signal; a path
// whose guard is gone is left alone; an ignored signal stays ignored.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
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

}  // namespace
}  // namespace nvindex::util
