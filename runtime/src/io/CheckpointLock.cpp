//===- CheckpointLock.cpp - one job writes a checkpoint directory ---------===//

#include "io/CheckpointLock.h"

#include "fsdp/runtime/comm/NodeRank.h"
#include "fsdp/runtime/support/OutputFile.h"

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <random>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace fsdp::rt {
namespace {
/// Up to 4 KiB of the file at `fd`, from its start.
std::string readFrom(int fd) {
  char buffer[4096];
  ssize_t n = pread(fd, buffer, sizeof(buffer), 0);
  return n > 0 ? std::string(buffer, size_t(n)) : std::string();
}

/// The value of the line "KEY: value" of a lock file's text ("" if none).
std::string field(const std::string &text, const std::string &key) {
  std::string prefix = key + ": ";
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos)
      end = text.size();
    if (text.compare(at, prefix.size(), prefix) == 0)
      return text.substr(at + prefix.size(), end - at - prefix.size());
    at = end + 1;
  }
  return "";
}

/// A new lock's text: who holds it, since when, and a random job id (the
/// other ranks look for it in their --checkpoint-dir).
std::string newLockText(int ranks) {
  char started[32] = "?";
  std::time_t now = std::time(nullptr);
  struct tm utc;
  if (gmtime_r(&now, &utc))
    std::strftime(started, sizeof(started), "%Y-%m-%dT%H:%M:%SZ", &utc);
  std::random_device device;
  uint64_t job = uint64_t(device()) << 32 ^ device() ^ uint64_t(getpid());
  char id[24];
  std::snprintf(id, sizeof(id), "%016llx", (unsigned long long)job);
  return "fsdp-run checkpoint directory lock\nhost: " + hostName() +
         "\npid: " + std::to_string(getpid()) + "\nstarted: " + started +
         "\njob: " + id + "\nranks: " + std::to_string(ranks) + "\n";
}

/// Whether `fd` is still the file at `path` (not removed or replaced
/// since it was opened).
bool stillAt(int fd, const std::string &path) {
  struct stat a, b;
  return fstat(fd, &a) == 0 && stat(path.c_str(), &b) == 0 &&
         a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/// Where the filesystem has no flock: whether the lock's owner may still
/// run. Only a process on this host can be checked (`checkable`).
bool ownerMayRun(const std::string &text, bool &checkable) {
  checkable = field(text, "host") == hostName();
  if (!checkable)
    return true;
  long long pid = std::atoll(field(text, "pid").c_str());
  return pid > 0 && (kill(pid_t(pid), 0) == 0 || errno == EPERM);
}

std::string heldBy(const std::string &path, const std::string &owner) {
  return path + ": the checkpoint directory is in use by another job (" +
         (owner.empty() ? std::string("its owner is writing its name")
                        : describeLockOwner(owner)) +
         "): one job writes a checkpoint directory at a time";
}
} // namespace

std::string describeLockOwner(const std::string &text) {
  auto value = [&](const char *key) {
    std::string v = field(text, key);
    return v.empty() ? std::string("?") : v;
  };
  return "host " + value("host") + ", pid " + value("pid") + ", started " +
         value("started");
}

bool CheckpointLock::acquire(const std::string &dir, int ranks,
                             std::string &note, std::string &error) {
  release();
  note.clear();
  path = dir + "/" + kCheckpointLockName;
  // A lock file that its owner removes between this open and the flock
  // locks nothing: open it again (a few times at most).
  for (int attempt = 0; attempt < 16; ++attempt) {
    int f = open(path.c_str(),
                 O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
    struct stat info;
    if (f < 0 || fstat(f, &info) != 0 || !S_ISREG(info.st_mode)) {
      error = path + ": cannot create the checkpoint directory's lock: " +
              (f < 0 ? std::strerror(errno) : "not a regular file");
      if (f >= 0)
        close(f);
      return false;
    }
    int failed = flock(f, LOCK_EX | LOCK_NB) == 0 ? 0 : errno;
    if (failed == EWOULDBLOCK) {
      error = heldBy(path, readFrom(f));
      close(f);
      return false;
    }
    if (!stillAt(f, path)) {
      close(f);
      continue;
    }
    // Any other failure: the filesystem has no flock (ENOLCK, EOPNOTSUPP).
    return claim(f, failed == 0, ranks, note, error);
  }
  error = path + ": cannot take the checkpoint directory's lock: the file "
                 "keeps being removed and created again (another job)";
  return false;
}

/// The lock file `f`, locked where `haveFlock`, made this job's.
bool CheckpointLock::claim(int f, bool haveFlock, int ranks, std::string &note,
                           std::string &error) {
  std::string previous = readFrom(f);
  bool checkable = true;
  if (!haveFlock && !previous.empty() && ownerMayRun(previous, checkable)) {
    error = heldBy(path, previous) +
            (checkable ? ""
                       : " (this filesystem has no file locks and the "
                         "owner ran on another host: remove the file "
                         "once that job has ended)");
    close(f);
    return false;
  }
  std::string text = newLockText(ranks);
  if (ftruncate(f, 0) != 0 ||
      pwrite(f, text.data(), text.size(), 0) != ssize_t(text.size()) ||
      fsync(f) != 0) {
    error = path + ": cannot write the checkpoint directory's lock: " +
            std::strerror(errno);
    close(f);
    return false;
  }
  fd = f;
  contents = text;
  // Removed on an error or a signal as the run's temporaries are.
  registerTemporaryFile(path);
  if (!previous.empty())
    note = path +
           ": took over the lock of a job that ended without "
           "removing it (" +
           describeLockOwner(previous) + ")";
  return true;
}

void CheckpointLock::release() {
  if (fd < 0)
    return;
  if (stillAt(fd, path))
    unlink(path.c_str());
  forgetTemporaryFile(path);
  close(fd);
  fd = -1;
}

bool readCheckpointLock(const std::string &dir, std::string &text,
                        std::string &why) {
  std::string path = dir + "/" + kCheckpointLockName;
  int f = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  struct stat info;
  if (f < 0 || fstat(f, &info) != 0 || !S_ISREG(info.st_mode)) {
    why = path + ": " + (f < 0 ? std::strerror(errno) : "not a regular file");
    if (f >= 0)
      close(f);
    return false;
  }
  text = readFrom(f);
  close(f);
  return true;
}

} // namespace fsdp::rt
