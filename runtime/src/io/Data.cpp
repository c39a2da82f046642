//===- Data.cpp - token streams for language-model training ---------------===//

#include "fsdp/runtime/io/Data.h"

#include "fsdp/runtime/support/RegularFile.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <functional>
#include <sys/stat.h>
#include <unistd.h>

namespace fsdp::rt {

bool parseDataFormat(const std::string &text, DataFormat &format) {
  if (text == "auto")
    format = DataFormat::Auto;
  else if (text == "bytes")
    format = DataFormat::Bytes;
  else if (text == "tokens")
    format = DataFormat::Tokens;
  else
    return false;
  return true;
}

namespace {
constexpr size_t kHeaderInts = 256, kHeaderBytes = kHeaderInts * 4;
/// Bytes read at a time when a whole file is scanned (an even number: a
/// chunk of a token file's body never splits an id).
constexpr size_t kChunkBytes = size_t(1) << 20;

/// Opens a regular file for reading (RegularFile.h); never throws.
bool openFile(const std::string &path, int &fd, uint64_t &size,
              std::string &error) {
  std::string why;
  fd = openRegularFile(path, "data file", why);
  struct stat info;
  if (fd >= 0 && fstat(fd, &info) == 0) {
    size = uint64_t(info.st_size);
    return true;
  }
  error = path + ": " + (fd < 0 ? why : "cannot open data file");
  return false;
}

/// Reads exactly `count` bytes at `offset`, or fails with `error` naming
/// the file: the read's error, or that the file shrank.
bool readAt(int fd, const std::string &path, uint64_t offset, void *out,
            size_t count, std::string &error) {
  auto *p = static_cast<unsigned char *>(out);
  while (count > 0) {
    ssize_t got = ::pread(fd, p, count, off_t(offset));
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0) {
      error = path + ": cannot read data file: " +
              (got < 0 ? std::strerror(errno) : "it shrank while being read");
      return false;
    }
    p += got;
    offset += uint64_t(got);
    count -= size_t(got);
  }
  return true;
}

/// Streams bytes [begin, end) of the file through `visit` in chunks, so
/// that scanning a file of any size holds one chunk.
bool scanFile(int fd, const std::string &path, uint64_t begin, uint64_t end,
              const std::function<void(const unsigned char *, size_t)> &visit,
              std::string &error) {
  std::vector<unsigned char> chunk(
      size_t(std::min<uint64_t>(kChunkBytes, end > begin ? end - begin : 0)));
  for (uint64_t at = begin; at < end; at += chunk.size()) {
    size_t count = size_t(std::min<uint64_t>(chunk.size(), end - at));
    if (!readAt(fd, path, at, chunk.data(), count, error))
      return false;
    visit(chunk.data(), count);
  }
  return true;
}

/// A header of llm.c's shape (a small version, a count that matches the
/// file's size in uint16 or uint32 tokens) whatever its magic says.
bool looksLikeTokenHeader(uint64_t size, const int32_t *header) {
  if (size < kHeaderBytes || header[1] < 1 || header[1] > 16 || header[2] <= 0)
    return false;
  uint64_t body = size - kHeaderBytes, count = uint64_t(header[2]);
  return body == 2 * count || body == 4 * count;
}

/// Bytes that text (ASCII or UTF-8) does not contain: controls other than
/// tab, newline, vertical tab, form feed and carriage return.
bool isControl(unsigned char c) { return c < 0x20 && (c < 0x09 || c > 0x0D); }

/// Whether a file without llm.c's magic may be read as bytes by
/// DataFormat::Auto: not a token header of another magic, not binary.
bool looksLikeText(int fd, const std::string &path, uint64_t size,
                   const int32_t *header, std::string &error) {
  if (looksLikeTokenHeader(size, header)) {
    error = path + ": a token file header with magic " +
            std::to_string(header[0]) + " (version " +
            std::to_string(header[1]) + "); fsdp-run reads llm.c's magic " +
            std::to_string(kTokenFileMagic) +
            ", version 1 (--data-format bytes reads it as bytes)";
    return false;
  }
  uint64_t controls = 0;
  if (!scanFile(
          fd, path, 0, size,
          [&](const unsigned char *p, size_t n) {
            for (size_t i = 0; i < n; ++i)
              controls += isControl(p[i]);
          },
          error))
    return false;
  // Text has none; headerless uint16 tokens have many (every id below
  // 8192 has a high byte below 32). One in a thousand tolerates a
  // stray form of text.
  if (controls * 1000 > size) {
    char share[32];
    std::snprintf(share, sizeof(share), "%.1f%%",
                  100.0 * double(controls) / double(size));
    error = path + ": has no token header and does not look like text (" +
            share +
            " control bytes): headerless uint16 tokens need llm.c's "
            "256-int32 header (magic " +
            std::to_string(kTokenFileMagic) +
            "); --data-format bytes trains on its bytes anyway";
    return false;
  }
  return true;
}

/// The checks of an llm.c token file's header (its magic, version 1, a
/// count the file holds).
bool checkTokenHeader(const std::string &path, uint64_t size,
                      const int32_t *header, std::string &error) {
  if (header[0] != kTokenFileMagic) {
    error = path + ": not a token file: no llm.c header (magic " +
            std::to_string(kTokenFileMagic) + "), found " +
            std::to_string(header[0]) + " (--data-format tokens)";
    return false;
  }
  if (header[1] != 1) {
    error = path + ": unsupported token file version " +
            std::to_string(header[1]) + " (expected 1)";
    return false;
  }
  if (header[2] < 0 || size < kHeaderBytes ||
      (size - kHeaderBytes) / 2 < uint64_t(header[2])) {
    error = path + ": truncated token file: the header promises " +
            std::to_string(header[2]) + " tokens";
    return false;
  }
  return true;
}
} // namespace

TokenData::~TokenData() { close(); }

void TokenData::close() {
  if (fd >= 0)
    ::close(fd);
  fd = -1;
}

bool TokenData::load(const std::string &path, DataFormat format,
                     std::string &error) {
  close();
  uint64_t size = 0;
  if (!openFile(path, fd, size, error))
    return false;
  source_ = path;
  int32_t header[3] = {};
  if (size >= sizeof(header) &&
      !readAt(fd, path, 0, header, sizeof(header), error))
    return false;
  bool hasMagic = header[0] == kTokenFileMagic;
  tokenFile = !(format == DataFormat::Bytes ||
                (format == DataFormat::Auto && !hasMagic));
  if (!tokenFile) {
    if (format == DataFormat::Auto &&
        !looksLikeText(fd, path, size, header, error))
      return false;
    width = 1;
    offset = 0;
    count = size;
  } else {
    if (!checkTokenHeader(path, size, header, error))
      return false;
    width = 2;
    offset = kHeaderBytes;
    count = uint64_t(header[2]);
  }
  return summarize(error);
}

bool TokenData::summarize(std::string &error) {
  // One pass over the ids: the ranks' fingerprint (FNV-1a) and the
  // largest id, so that neither needs the tokens in memory later.
  uint64_t hash = 0xcbf29ce484222325ull ^ count;
  int32_t top = 0;
  bool ok = scanFile(
      fd, source_, offset, offset + count * width,
      [&](const unsigned char *p, size_t n) {
        for (size_t i = 0; i < n; i += width) {
          int32_t t = width == 1 ? int32_t(p[i])
                                 : int32_t(p[i]) | (int32_t(p[i + 1]) << 8);
          hash = (hash ^ uint32_t(t)) * 0x100000001b3ull;
          top = std::max(top, t);
        }
      },
      error);
  fingerprint_ = hash;
  largest = top;
  return ok;
}

bool TokenData::check(int64_t B, int64_t T, int64_t vocab,
                      std::string &error) const {
  if (int64_t(count) < B * T + 1) {
    error = source_ + ": " + std::to_string(count) +
            " tokens, fewer than one batch needs (B x T + 1 = " +
            std::to_string(B * T + 1) + ")";
    return false;
  }
  if (largest >= vocab) {
    error = source_ + ": token id " + std::to_string(largest) +
            " is outside the model's vocabulary of " + std::to_string(vocab) +
            (!tokenFile && vocab < 256
                 ? " (byte-level data needs a vocabulary of 256)"
                 : "");
    return false;
  }
  // A batch's bytes are read into this buffer: reserved now, so that a
  // step allocates nothing.
  window.resize(size_t(B * T + 1) * width);
  return true;
}

int64_t TokenData::windowsPerEpoch(int64_t B, int64_t T) const {
  return (int64_t(count) - 1) / (B * T);
}

int64_t TokenData::unusedTail(int64_t B, int64_t T) const {
  return int64_t(count) - 1 - windowsPerEpoch(B, T) * B * T;
}

bool TokenData::batch(int64_t batch, int64_t B, int64_t T, int64_t rowBegin,
                      int64_t rows, int32_t *inputs, int32_t *targets,
                      std::string &error) const {
  int64_t perBatch = B * T;
  int64_t start = (batch % windowsPerEpoch(B, T)) * perBatch + rowBegin * T;
  size_t n = size_t(rows * T + 1); // the inputs and the last target
  window.resize(std::max(window.size(), n * width));
  if (!readAt(fd, source_, offset + uint64_t(start) * width, window.data(),
              n * width, error))
    return false;
  const unsigned char *p = window.data();
  for (size_t i = 0; i < n; ++i) {
    int32_t t = width == 1 ? int32_t(p[i])
                           : int32_t(p[2 * i]) | (int32_t(p[2 * i + 1]) << 8);
    if (i + 1 < n)
      inputs[i] = t;
    if (i > 0)
      targets[i - 1] = t;
  }
  return true;
}

} // namespace fsdp::rt
