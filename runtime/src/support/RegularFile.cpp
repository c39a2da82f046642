//===- RegularFile.cpp - open only regular files for reading --------------===//

#include "fsdp/runtime/support/RegularFile.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace fsdp::rt {

const char *fileKind(mode_t mode) {
  if (S_ISDIR(mode))
    return "a directory";
  if (S_ISFIFO(mode))
    return "a FIFO";
  if (S_ISCHR(mode))
    return "a character device";
  if (S_ISBLK(mode))
    return "a block device";
  if (S_ISSOCK(mode))
    return "a socket";
  return "neither a file nor a directory";
}

namespace {
std::string notRegular(mode_t mode) {
  return std::string("not a regular file (") + fileKind(mode) + ")";
}

/// "cannot VERB WHAT: <errno's text>".
std::string cannot(const char *verb, const char *what, int error) {
  return std::string("cannot ") + verb + (*what ? " " : "") + what + ": " +
         std::strerror(error);
}
} // namespace

int openRegularFile(const std::string &path, const char *what,
                    std::string &why) {
  // A socket cannot be opened at all (ENXIO): stat says what it is first.
  struct stat info;
  if (stat(path.c_str(), &info) == 0 && !S_ISREG(info.st_mode)) {
    why = notRegular(info.st_mode);
    return -1;
  }
  // O_NONBLOCK: a FIFO without a writer does not block the open (the path
  // may have become one since stat).
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    why = cannot("open", what, errno);
    return -1;
  }
  int flags = 0;
  if (fstat(fd, &info) != 0 || (flags = fcntl(fd, F_GETFL)) < 0 ||
      (S_ISREG(info.st_mode) && fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0))
    why = cannot("open", what, errno);
  else if (!S_ISREG(info.st_mode))
    why = notRegular(info.st_mode);
  else
    return fd;
  ::close(fd);
  return -1;
}

bool readRegularFile(const std::string &path, const char *what,
                     uint64_t maxBytes, std::string &bytes, std::string &why) {
  int fd = openRegularFile(path, what, why);
  if (fd < 0)
    return false;
  bytes.clear();
  char chunk[1 << 16];
  ssize_t n;
  while ((n = ::read(fd, chunk, sizeof(chunk))) != 0) {
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 || bytes.size() + size_t(n) > maxBytes) {
      why = n < 0 ? cannot("read", what, errno)
                  : std::string("larger than the ") + std::to_string(maxBytes) +
                        " bytes " + (*what ? what : "it") + " may have";
      break;
    }
    bytes.append(chunk, size_t(n));
  }
  ::close(fd);
  return n == 0;
}

} // namespace fsdp::rt
