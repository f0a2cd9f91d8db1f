// file_kind(mode): what a stat(2) mode names, for error messages about a
// path of the wrong kind ("/dev/null is a character device, not a pool
// file"): the pool layer and the command line's path checks say it alike.
#pragma once

#include <sys/stat.h>

namespace nvindex {

/// "a regular file", "a directory", "a FIFO", "a socket", "a character
/// device", "a block device", or "not a regular file" (anything else).
inline const char* file_kind(mode_t m) {
  if (S_ISREG(m)) return "a regular file";
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  return "not a regular file";
}

}  // namespace nvindex
