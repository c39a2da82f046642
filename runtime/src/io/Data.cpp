//===- Data.cpp - token streams for language-model training ---------------===//

#include "fsdp/runtime/io/Data.h"

#include "fsdp/runtime/support/RegularFile.h"

#include <algorithm>
#include <cerrno>
#include <climits>
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
/// Bytes read at a time when a whole file is scanned (a multiple of 4: a
/// chunk of a token file's body never splits an id).
constexpr size_t kChunkBytes = size_t(1) << 20;

/// Token id `i` of ids `width` bytes wide (1, 2 or 4), little-endian.
uint32_t idAt(const unsigned char *p, size_t i, uint64_t width) {
  p += i * width;
  uint32_t id = p[0];
  for (uint64_t b = 1; b < width; ++b)
    id |= uint32_t(p[b]) << (8 * b);
  return id;
}

/// The id width a token header's magic names, or 0 for neither magic.
uint64_t idWidth(int32_t magic) {
  return magic == kTokenFileMagic ? 2 : magic == kTokenFile32Magic ? 4 : 0;
}

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
            std::to_string(kTokenFileMagic) + " (uint16 ids, version 1) and " +
            std::to_string(kTokenFile32Magic) +
            " (uint32 ids, version 7); --data-format bytes reads it as bytes";
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

/// The checks of an llm.c token file's header (a known magic, its
/// version, a count the file holds).
bool checkTokenHeader(const std::string &path, uint64_t size,
                      const int32_t *header, std::string &error) {
  uint64_t width = idWidth(header[0]);
  if (width == 0) {
    error = path + ": not a token file: no llm.c header (magic " +
            std::to_string(kTokenFileMagic) + " or " +
            std::to_string(kTokenFile32Magic) + "), found " +
            std::to_string(header[0]) + " (--data-format tokens)";
    return false;
  }
  int32_t version = width == 2 ? kTokenFileVersion : kTokenFile32Version;
  if (header[1] != version) {
    error = path + ": unsupported token file version " +
            std::to_string(header[1]) + " (magic " + std::to_string(header[0]) +
            " expects " + std::to_string(version) + ")";
    return false;
  }
  if (header[2] < 0 || size < kHeaderBytes ||
      (size - kHeaderBytes) / width < uint64_t(header[2])) {
    error =
        path + ": truncated token file: the header promises " +
        std::to_string(header[2]) + " " + (width == 2 ? "uint16" : "uint32") +
        " tokens, the file holds " +
        std::to_string(size < kHeaderBytes ? 0 : (size - kHeaderBytes) / width);
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
  bool hasMagic = idWidth(header[0]) != 0;
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
    width = idWidth(header[0]);
    offset = kHeaderBytes;
    count = uint64_t(header[2]);
  }
  return summarize(error);
}

bool TokenData::summarize(std::string &error) {
  // One pass over the ids: the ranks' fingerprint (FNV-1a) and the
  // largest id, so that neither needs the tokens in memory later.
  uint64_t hash = 0xcbf29ce484222325ull ^ count;
  uint32_t top = 0;
  bool ok = scanFile(
      fd, source_, offset, offset + count * width,
      [&](const unsigned char *p, size_t n) {
        for (size_t i = 0; i < n / width; ++i) {
          uint32_t t = idAt(p, i, width);
          hash = (hash ^ t) * 0x100000001b3ull;
          top = std::max(top, t);
        }
      },
      error);
  fingerprint_ = hash;
  largest = int64_t(top);
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
  // Ids reach the kernels as int32: a uint32 id above that is out of any
  // vocabulary they can index.
  if (largest >= vocab || largest > INT32_MAX) {
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
    // check() bounded every id below 2^31.
    auto t = int32_t(idAt(p, i, width));
    if (i + 1 < n)
      inputs[i] = t;
    if (i > 0)
      targets[i - 1] = t;
  }
  return true;
}

} // namespace fsdp::rt
