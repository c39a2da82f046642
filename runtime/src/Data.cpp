//===- Data.cpp - token streams for language-model training ---------------===//

#include "fsdp/runtime/Data.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sys/stat.h>

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

/// Reads a regular file whole; never throws.
bool readFile(const std::string &path, std::string &bytes, std::string &error) {
  struct stat info;
  if (stat(path.c_str(), &info) != 0) {
    error = path + ": cannot open data file: " + std::strerror(errno);
    return false;
  }
  if (S_ISDIR(info.st_mode)) {
    error = path + ": is a directory, not a data file";
    return false;
  }
  if (!S_ISREG(info.st_mode)) {
    error = path + ": is not a regular file (a device, pipe or socket)";
    return false;
  }
  FILE *file = std::fopen(path.c_str(), "rb");
  if (!file) {
    error = path + ": cannot open data file: " + std::strerror(errno);
    return false;
  }
  bytes.resize(size_t(info.st_size));
  size_t got =
      bytes.empty() ? 0 : std::fread(bytes.data(), 1, bytes.size(), file);
  bool failed = std::ferror(file) != 0;
  int saved = errno;
  std::fclose(file);
  if (failed || got != bytes.size()) {
    error = path + ": cannot read data file: " +
            (failed ? std::strerror(saved) : "it shrank while being read");
    return false;
  }
  return true;
}

/// A header of llm.c's shape (a small version, a count that matches the
/// file's size in uint16 or uint32 tokens) whatever its magic says.
bool looksLikeTokenHeader(const std::string &bytes, const int32_t *header) {
  if (bytes.size() < kHeaderBytes || header[1] < 1 || header[1] > 16 ||
      header[2] <= 0)
    return false;
  uint64_t body = bytes.size() - kHeaderBytes, count = uint64_t(header[2]);
  return body == 2 * count || body == 4 * count;
}

/// Bytes that text (ASCII or UTF-8) does not contain: controls other than
/// tab, newline, vertical tab, form feed and carriage return.
bool isControl(unsigned char c) { return c < 0x20 && (c < 0x09 || c > 0x0D); }

/// Whether a file without llm.c's magic may be read as bytes by
/// DataFormat::Auto: not a token header of another magic, not binary.
bool looksLikeText(const std::string &path, const std::string &bytes,
                   const int32_t *header, std::string &error) {
  if (looksLikeTokenHeader(bytes, header)) {
    error = path + ": a token file header with magic " +
            std::to_string(header[0]) + " (version " +
            std::to_string(header[1]) + "); fsdp-run reads llm.c's magic " +
            std::to_string(kTokenFileMagic) +
            ", version 1 (--data-format bytes reads it as bytes)";
    return false;
  }
  size_t controls = 0;
  for (unsigned char c : bytes)
    controls += isControl(c);
  // Text has none; headerless uint16 tokens have many (every id below
  // 8192 has a high byte below 32). One in a thousand tolerates a
  // stray form of text.
  if (controls * 1000 > bytes.size()) {
    char share[32];
    std::snprintf(share, sizeof(share), "%.1f%%",
                  100.0 * double(controls) / double(bytes.size()));
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

/// The uint16 ids of an llm.c token file after its header's checks (its
/// magic, version 1, a count the file holds).
bool readTokenFile(const std::string &path, const std::string &bytes,
                   const int32_t *header, std::vector<int32_t> &tokens,
                   std::string &error) {
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
  if (header[2] < 0 || bytes.size() < kHeaderBytes ||
      (bytes.size() - kHeaderBytes) / 2 < size_t(header[2])) {
    error = path + ": truncated token file: the header promises " +
            std::to_string(header[2]) + " tokens";
    return false;
  }
  tokens.resize(header[2]);
  const unsigned char *p =
      reinterpret_cast<const unsigned char *>(bytes.data()) + kHeaderBytes;
  for (size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = int32_t(p[2 * i]) | (int32_t(p[2 * i + 1]) << 8);
  return true;
}
} // namespace

bool TokenData::load(const std::string &path, DataFormat format,
                     std::string &error) {
  std::string bytes;
  if (!readFile(path, bytes, error))
    return false;
  source_ = path;
  int32_t header[3] = {};
  if (bytes.size() >= sizeof(header))
    std::memcpy(header, bytes.data(), sizeof(header));
  bool hasMagic = header[0] == kTokenFileMagic;
  if (format == DataFormat::Bytes ||
      (format == DataFormat::Auto && !hasMagic)) {
    if (format == DataFormat::Auto &&
        !looksLikeText(path, bytes, header, error))
      return false;
    tokens.assign(bytes.begin(), bytes.end());
    for (int32_t &t : tokens)
      t &= 0xFF; // bytes, not signed chars
    tokenFile = false;
    return true;
  }
  if (!readTokenFile(path, bytes, header, tokens, error))
    return false;
  tokenFile = true;
  return true;
}

bool TokenData::check(int64_t B, int64_t T, int64_t vocab,
                      std::string &error) const {
  if (int64_t(tokens.size()) < B * T + 1) {
    error = source_ + ": " + std::to_string(tokens.size()) +
            " tokens, fewer than one batch needs (B x T + 1 = " +
            std::to_string(B * T + 1) + ")";
    return false;
  }
  int32_t largest = *std::max_element(tokens.begin(), tokens.end());
  if (largest >= vocab) {
    error = source_ + ": token id " + std::to_string(largest) +
            " is outside the model's vocabulary of " + std::to_string(vocab) +
            (!tokenFile && vocab < 256
                 ? " (byte-level data needs a vocabulary of 256)"
                 : "");
    return false;
  }
  return true;
}

int64_t TokenData::windowsPerEpoch(int64_t B, int64_t T) const {
  return (int64_t(tokens.size()) - 1) / (B * T);
}

int64_t TokenData::unusedTail(int64_t B, int64_t T) const {
  return int64_t(tokens.size()) - 1 - windowsPerEpoch(B, T) * B * T;
}

uint64_t TokenData::fingerprint() const {
  uint64_t hash = 0xcbf29ce484222325ull ^ tokens.size(); // FNV-1a
  for (int32_t t : tokens)
    hash = (hash ^ uint32_t(t)) * 0x100000001b3ull;
  return hash;
}

void TokenData::batch(int64_t batch, int64_t B, int64_t T, int64_t rowBegin,
                      int64_t rows, int32_t *inputs, int32_t *targets) const {
  int64_t perBatch = B * T;
  int64_t start = (batch % windowsPerEpoch(B, T)) * perBatch + rowBegin * T;
  std::copy_n(tokens.begin() + start, rows * T, inputs);
  std::copy_n(tokens.begin() + start + 1, rows * T, targets);
}

} // namespace fsdp::rt
