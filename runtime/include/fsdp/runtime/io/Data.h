//===- Data.h - token streams for language-model training -------*- C++ -*-===//
//
// Two file formats:
//  * bytes: the file's bytes are the tokens (vocabulary 256);
//  * tokens: llm.c's layout, a header of 256 little-endian int32 (magic,
//    version, token count, the rest zero) followed by that many token ids:
//    uint16 ids under GPT-2's magic 20240520 (version 1), uint32 ids under
//    Llama 3's magic 20240801 (version 7; llm.c's dev/data/data_common.py
//    writes both). A uint32 id must fit an int32 (the kernels' id type).
//    scripts/tokenize.py writes either from text and a tokenizer.json.
// DataFormat::Auto reads a file with either header as tokens and any other as
// bytes, but refuses what looks like neither text nor tokens: a token
// header with another magic, or binary data (control bytes that text does
// not contain: headerless uint16 tokens look like that). Bytes says so
// explicitly; Tokens requires the header.
//
// Batches (the epoch rule, llm.c's): the data holds W = floor((N - 1) /
// (B * T)) whole windows of B * T tokens (the "+1" is the last window's
// last target). Batch k is window k mod W, starting at token
// (k mod W) * B * T; its targets are the same window shifted by one token.
// An epoch is W batches; the N - 1 - W * B * T tokens after the last whole
// window are never trained on (windowsPerEpoch and unusedTail say how
// many).
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_DATA_H
#define FSDP_RUNTIME_DATA_H

#include <cstdint>
#include <string>
#include <vector>

namespace fsdp::rt {

/// llm.c's token file headers: uint16 ids (GPT-2's vocabulary), and
/// uint32 ids (Llama 3's 128,256 and every larger vocabulary).
inline constexpr int32_t kTokenFileMagic = 20240520;
inline constexpr int32_t kTokenFileVersion = 1;
inline constexpr int32_t kTokenFile32Magic = 20240801;
inline constexpr int32_t kTokenFile32Version = 7;

enum class DataFormat { Auto, Bytes, Tokens };

/// "auto", "bytes", "tokens"; false for anything else.
bool parseDataFormat(const std::string &text, DataFormat &format);

/// A token file, read where it lies: loading scans it once (format checks,
/// the ranks' fingerprint, the largest id) a chunk at a time, and each
/// batch reads its own window with pread. A rank holds one batch of it,
/// never the file (docs/memory.md), and ranks on one node share the page
/// cache's copy.
class TokenData {
public:
  TokenData() = default;
  TokenData(const TokenData &) = delete;
  TokenData &operator=(const TokenData &) = delete;
  ~TokenData();

  /// Loads `path` in `format`. On failure returns false with `error`
  /// naming the file and the reason.
  bool load(const std::string &path, DataFormat format, std::string &error);

  /// Checks the data against a model: enough tokens for one B x T batch
  /// (plus the last target) and every id below `vocab`. Reserves the
  /// buffer a batch is read into.
  bool check(int64_t B, int64_t T, int64_t vocab, std::string &error) const;

  /// Fills `inputs` and `targets` (rows * T each) with rows [rowBegin,
  /// rowBegin + rows) of batch number `batch` (0-based) of B x T tokens,
  /// by the epoch rule above. False with `error` when the file cannot be
  /// read any more (it shrank, or the disk failed).
  bool batch(int64_t batch, int64_t B, int64_t T, int64_t rowBegin,
             int64_t rows, int32_t *inputs, int32_t *targets,
             std::string &error) const;
  /// W, the batches of an epoch; and the tokens no batch uses.
  int64_t windowsPerEpoch(int64_t B, int64_t T) const;
  int64_t unusedTail(int64_t B, int64_t T) const;

  const std::string &source() const { return source_; }
  /// "bytes", "tokens" (uint16 ids) or "uint32 tokens".
  const char *formatName() const {
    return !tokenFile ? "bytes" : width == 4 ? "uint32 tokens" : "tokens";
  }
  size_t size() const { return size_t(count); }
  /// A 64-bit hash of the token sequence: ranks compare it to know they
  /// read the same data.
  uint64_t fingerprint() const { return fingerprint_; }

private:
  void close();
  /// The fingerprint and the largest id, in one pass over the file.
  bool summarize(std::string &error);

  int fd = -1;
  std::string source_;
  bool tokenFile = false;
  /// Bytes per id (1: bytes, 2 or 4: llm.c's uint16 or uint32), where the ids
  /// start, and how many there are.
  uint64_t width = 1, offset = 0, count = 0;
  uint64_t fingerprint_ = 0;
  int64_t largest = 0;
  /// One batch's ids as read from the file.
  mutable std::vector<unsigned char> window;
};

} // namespace fsdp::rt

#endif // FSDP_RUNTIME_DATA_H
