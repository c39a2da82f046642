//===- OutputFile.cpp - outputs reserved before a run, written whole after ===//

#include "fsdp/runtime/support/OutputFile.h"

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <streambuf>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace fsdp::rt {
namespace {
/// Fixed storage: the signal handler may only read it and unlink.
constexpr int kMaxTemporaries = 16;
char gTemporaries[kMaxTemporaries][4096];
/// Whether slot i holds a reserved output (OutputFile), which a stop
/// signal drops at once (removeReservedOutputs).
volatile sig_atomic_t gIsOutput[kMaxTemporaries];
volatile sig_atomic_t gNumTemporaries = 0;

extern "C" void onTerminate(int signal) {
  removeTemporaryFiles();
  _exit(128 + signal);
}

/// A std::streambuf over a file descriptor, with a buffer of its own; the
/// first failed write sticks, with its errno.
class FdBuf : public std::streambuf {
public:
  explicit FdBuf(int fd) : fd(fd), buffer(1 << 20) {
    setp(buffer.data(), buffer.data() + buffer.size());
  }
  /// 0, or the errno of the first failed write.
  int drain() {
    flushBuffer();
    return error;
  }

protected:
  int overflow(int c) override {
    if (!flushBuffer())
      return traits_type::eof();
    if (c != traits_type::eof()) {
      *pptr() = char(c);
      pbump(1);
    }
    return traits_type::not_eof(c);
  }
  int sync() override { return flushBuffer() ? 0 : -1; }

private:
  bool flushBuffer() {
    for (char *p = pbase(); p < pptr() && !error;) {
      ssize_t n = ::write(fd, p, size_t(pptr() - p));
      if (n < 0 && errno != EINTR)
        error = errno;
      else if (n > 0)
        p += n;
    }
    setp(buffer.data(), buffer.data() + buffer.size());
    return !error;
  }
  int fd;
  std::vector<char> buffer;
  int error = 0;
};
/// Best effort: the rename itself reaches the disk (a crash after it
/// cannot bring the old file back). A filesystem that cannot sync a
/// directory still has the whole new file under the name.
void syncDirectory(const std::string &path) {
  size_t slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "."
                    : slash == 0               ? "/"
                                               : path.substr(0, slash);
  int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    fsync(fd);
    close(fd);
  }
}
} // namespace

void registerTemporaryFile(std::string_view path, bool output) {
  if (path.empty() || path.size() >= sizeof(gTemporaries[0]))
    return;
  // A slot forgotten before is taken again (a run that checkpoints every
  // step registers two temporaries a step), else the next one.
  int n = 0;
  while (n < gNumTemporaries && n < kMaxTemporaries && gTemporaries[n][0])
    ++n;
  if (n >= kMaxTemporaries)
    return;
  gIsOutput[n] = output;
  // The first character last: a signal meanwhile sees an empty slot.
  std::memcpy(gTemporaries[n] + 1, path.data() + 1, path.size() - 1);
  gTemporaries[n][path.size()] = '\0';
  gTemporaries[n][0] = path[0];
  if (n == gNumTemporaries)
    gNumTemporaries = n + 1;
}

void forgetTemporaryFile(std::string_view path) {
  for (int i = 0; i < gNumTemporaries && i < kMaxTemporaries; ++i)
    if (path == gTemporaries[i])
      gTemporaries[i][0] = '\0';
}

void removeTemporaryFiles() {
  for (int i = 0; i < gNumTemporaries && i < kMaxTemporaries; ++i)
    if (gTemporaries[i][0])
      unlink(gTemporaries[i]);
}

void removeReservedOutputs() {
  for (int i = 0; i < gNumTemporaries && i < kMaxTemporaries; ++i)
    if (gTemporaries[i][0] && gIsOutput[i])
      unlink(gTemporaries[i]);
}

void installOutputCleanup() {
  std::signal(SIGXFSZ, SIG_IGN);
  std::signal(SIGTERM, onTerminate);
  std::signal(SIGINT, onTerminate);
}

OutputFile::~OutputFile() {
  if (fd >= 0) {
    close(fd);
    unlink(tmp.c_str());
    forgetTemporaryFile(tmp);
  }
}

bool OutputFile::reserve(const std::string &file, const std::string &name,
                         uint64_t bytes, std::string &error) {
  path = file;
  tmp = file + ".tmp";
  what = name;
  for (const std::string *f : {&path, &tmp}) {
    struct stat info;
    if (lstat(f->c_str(), &info) != 0 || S_ISREG(info.st_mode))
      continue;
    error = *f + ": " +
            (S_ISDIR(info.st_mode)   ? "is a directory"
             : S_ISLNK(info.st_mode) ? "is a symbolic link"
                                     : "is a device, pipe or socket") +
            "; fsdp-run writes the " + what + " only over a regular file";
    return false;
  }
  fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
            0644);
  if (fd < 0) {
    error = path + ": cannot write output: " + std::strerror(errno);
    return false;
  }
  registerTemporaryFile(tmp, /*output=*/true);
  int failed = bytes ? posix_fallocate(fd, 0, off_t(bytes)) : 0;
  // A filesystem without fallocate still gets its output, unreserved.
  if (failed && failed != EOPNOTSUPP && failed != EINVAL) {
    error = path + ": cannot reserve " + std::to_string(bytes) +
            " bytes for the " + what + ": " + std::strerror(failed);
    return false;
  }
  return true;
}

bool OutputFile::write(const std::function<void(std::ostream &)> &fill,
                       std::string &error) {
  FdBuf buffer(fd);
  std::ostream out(&buffer);
  fill(out);
  out.flush();
  int failed = buffer.drain();
  off_t end = lseek(fd, 0, SEEK_CUR);
  if (!failed && (ftruncate(fd, end) != 0 || fsync(fd) != 0))
    failed = errno;
  if (close(fd) != 0 && !failed)
    failed = errno;
  fd = -1;
  if (!failed && std::rename(tmp.c_str(), path.c_str()) != 0)
    failed = errno;
  if (failed) {
    unlink(tmp.c_str());
    forgetTemporaryFile(tmp);
    error = path + ": cannot write the " + what + ": " + std::strerror(failed) +
            " (the previous file, if any, is unchanged)";
    return false;
  }
  forgetTemporaryFile(tmp);
  syncDirectory(path);
  return true;
}

} // namespace fsdp::rt
