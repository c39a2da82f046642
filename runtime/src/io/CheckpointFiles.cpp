//===- CheckpointFiles.cpp - atomic files, step directories ---------------===//

#include "io/CheckpointFiles.h"

#include "fsdp/runtime/PlanFormat.h"
#include "fsdp/runtime/io/Checkpoint.h"
#include "fsdp/runtime/support/OutputFile.h"

#include "fsdp/runtime/support/RegularFile.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace fsdp::rt {

uint32_t fastCrc32(const void *data, size_t size, uint32_t previous) {
  // Slicing by 8 (Intel's): eight tables, eight bytes a step; the same
  // CRC as plan::crc32's byte at a time, several times faster.
  static const auto tables = [] {
    std::array<std::array<uint32_t, 256>, 8> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k)
        c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; ++i)
      for (int k = 1; k < 8; ++k)
        t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xFF];
    return t;
  }();
  uint32_t crc = previous ^ 0xFFFFFFFFu;
  auto *p = static_cast<const unsigned char *>(data);
  for (; size >= 8; size -= 8, p += 8) {
    uint32_t lo = crc ^ (uint32_t(p[0]) | uint32_t(p[1]) << 8 |
                         uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24);
    uint32_t hi = uint32_t(p[4]) | uint32_t(p[5]) << 8 | uint32_t(p[6]) << 16 |
                  uint32_t(p[7]) << 24;
    crc = tables[7][lo & 0xFF] ^ tables[6][(lo >> 8) & 0xFF] ^
          tables[5][(lo >> 16) & 0xFF] ^ tables[4][lo >> 24] ^
          tables[3][hi & 0xFF] ^ tables[2][(hi >> 8) & 0xFF] ^
          tables[1][(hi >> 16) & 0xFF] ^ tables[0][hi >> 24];
  }
  for (; size > 0; --size, ++p)
    crc = tables[0][(crc ^ *p) & 0xFF] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

namespace {
/// Writes all of [data, data + n); 0 or the errno of the failure.
int writeAll(int fd, const char *data, size_t n) {
  while (n > 0) {
    // 1 MiB a call: large writes stall the page cache for longer.
    ssize_t done = ::write(fd, data, std::min<size_t>(n, size_t(1) << 20));
    if (done < 0 && errno == EINTR)
      continue;
    if (done <= 0)
      return done < 0 ? errno : ENOSPC;
    data += done;
    n -= size_t(done);
  }
  return 0;
}

/// Writes n bytes of the file at p: the `mid` fault point once half of the
/// file's `total` bytes are written; 0 or the errno of the failure.
int writePiece(int fd, const char *p, size_t n, uint64_t total,
               const FaultPoints &faults, uint64_t &bytes, uint32_t &crc) {
  if (bytes < total / 2 && bytes + n >= total / 2) {
    size_t first = size_t(total / 2 - bytes);
    if (int failed = writeAll(fd, p, first))
      return failed;
    checkpointFault(faults.mid, faults.step, faults.rank);
    crc = fastCrc32(p, first, crc);
    bytes += first;
    p += first;
    n -= first;
  }
  if (int failed = writeAll(fd, p, n))
    return failed;
  crc = fastCrc32(p, n, crc);
  bytes += n;
  return 0;
}

/// Writes the chunks, a fill chunk through `staging` piece by piece; 0 or
/// the errno of the first failure.
int writeChunks(int fd, const std::vector<FileChunk> &chunks, Staging staging,
                const FaultPoints &faults, uint64_t &bytes, uint32_t &crc) {
  uint64_t total = 0;
  for (const FileChunk &c : chunks)
    total += c.bytes;
  bytes = 0;
  crc = 0;
  for (const FileChunk &c : chunks) {
    if (c.fill && c.bytes && !staging.bytes)
      return EINVAL; // nothing to stage through
    for (size_t done = 0; done < c.bytes;) {
      size_t n = c.bytes - done;
      const char *p = static_cast<const char *>(c.data) + (c.fill ? 0 : done);
      if (c.fill) {
        n = std::min(n, staging.bytes);
        c.fill(staging.data, done, n);
        p = staging.data;
      }
      if (int failed = writePiece(fd, p, n, total, faults, bytes, crc))
        return failed;
      done += n;
    }
  }
  return 0;
}

/// fsyncs the directory that holds `path` (its name copied on the stack).
void syncDirectoryOf(const char *path) {
  char dir[PATH_MAX] = ".";
  if (const char *slash = std::strrchr(path, '/')) {
    size_t n = std::min(size_t(slash - path), sizeof(dir) - 1);
    std::memcpy(dir, path, n);
    dir[n] = '\0';
    if (n == 0)
      std::strcpy(dir, "/");
  }
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    fsync(fd);
    close(fd);
  }
}
} // namespace

bool writeFileAtomic(const char *path, const std::vector<FileChunk> &chunks,
                     Staging staging, const FaultPoints &faults,
                     uint64_t &bytes, uint32_t &crc, std::string &error) {
  char tmp[PATH_MAX];
  if (std::snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= int(sizeof(tmp))) {
    error = std::string(path) + ": the path is too long";
    return false;
  }
  int fd =
      open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) {
    error = std::string(tmp) + ": cannot create: " + std::strerror(errno);
    return false;
  }
  registerTemporaryFile(tmp);
  int failed = writeChunks(fd, chunks, staging, faults, bytes, crc);
  if (!failed && fsync(fd) != 0)
    failed = errno;
  if (close(fd) != 0 && !failed)
    failed = errno;
  if (!failed)
    checkpointFault(faults.written, faults.step, faults.rank);
  if (!failed && std::rename(tmp, path) != 0)
    failed = errno;
  forgetTemporaryFile(tmp);
  if (failed) {
    unlink(tmp);
    error = std::string(path) +
            ": cannot write the checkpoint file: " + std::strerror(failed) +
            " (the checkpoint is not written; the "
            "previous ones are unchanged)";
    return false;
  }
  syncDirectoryOf(path);
  return true;
}

bool fileCrc32(const std::string &path, uint64_t &bytes, uint32_t &crc,
               std::string &why) {
  int fd = openRegularFile(path, "", why);
  if (fd < 0)
    return false;
  std::vector<char> buffer(1 << 20);
  bytes = 0;
  crc = 0;
  for (;;) {
    ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      why = n < 0 ? std::string("cannot read: ") + std::strerror(errno) : "";
      close(fd);
      return n == 0;
    }
    crc = fastCrc32(buffer.data(), size_t(n), crc);
    bytes += uint64_t(n);
  }
}

bool makeDirectory(const char *path, std::string &error) {
  if (mkdir(path, 0755) == 0) {
    syncDirectoryOf(path);
    return true;
  }
  struct stat info;
  if (errno == EEXIST && stat(path, &info) == 0 && S_ISDIR(info.st_mode))
    return true;
  error = std::string(path) + ": cannot create the checkpoint directory: " +
          (errno == EEXIST ? std::string("not a directory")
                           : std::string(std::strerror(errno)));
  return false;
}

bool checkWritableDirectory(const std::string &path, std::string &error) {
  struct stat info;
  if (stat(path.c_str(), &info) != 0 || !S_ISDIR(info.st_mode)) {
    error = path + ": --checkpoint-dir expects a directory (or a path "
                   "where one can be created)";
    return false;
  }
  if (access(path.c_str(), W_OK | X_OK) != 0) {
    error = path + ": the checkpoint directory is not writable: " +
            std::strerror(errno);
    return false;
  }
  return true;
}

std::vector<int64_t> listCheckpointSteps(const std::string &dir) {
  std::vector<int64_t> steps;
  DIR *d = opendir(dir.c_str());
  if (!d)
    return steps;
  while (dirent *entry = readdir(d)) {
    long long step;
    char tail;
    if (std::sscanf(entry->d_name, "step-%lld%c", &step, &tail) == 1 &&
        step >= 0 && "step-" + std::to_string(step) == entry->d_name)
      steps.push_back(step);
  }
  closedir(d);
  std::sort(steps.begin(), steps.end());
  return steps;
}

void removeCheckpoint(const char *stepDir) {
  char manifest[PATH_MAX];
  if (std::snprintf(manifest, sizeof(manifest), "%s/manifest.json", stepDir) <
      int(sizeof(manifest))) {
    unlink(manifest);
    syncDirectoryOf(manifest);
  }
  int fd = open(stepDir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return;
  // Entries removed while the directory is read may hide others: read it
  // again from the start until a pass finds nothing left (a few at most).
  for (int pass = 0; pass < 8; ++pass) {
    alignas(8) char buffer[8192];
    bool removed = false;
    lseek(fd, 0, SEEK_SET);
    ssize_t n;
    while ((n = getdents64(fd, buffer, sizeof(buffer))) > 0)
      for (ssize_t at = 0; at < n;) {
        auto *entry = reinterpret_cast<dirent64 *>(buffer + at);
        at += entry->d_reclen;
        if (std::strcmp(entry->d_name, ".") &&
            std::strcmp(entry->d_name, "..") &&
            unlinkat(fd, entry->d_name, 0) == 0)
          removed = true;
      }
    if (!removed)
      break;
  }
  close(fd);
  rmdir(stepDir);
}

} // namespace fsdp::rt
