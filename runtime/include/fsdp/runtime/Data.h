//===- Data.h - token streams for language-model training --------*- C++
//-*-===//
//
// Two file formats:
//  * any file: its bytes are the tokens (vocabulary 256);
//  * a token file: llm.c's layout, a header of 256 little-endian int32
//    (magic 20240520, version 1, token count, the rest zero) followed by
//    that many uint16 token ids.
// Batches are consecutive windows: batch k of B x T tokens starts at token
// k * B * T (wrapping around at the end of the data), and its targets are
// the same window shifted by one token.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_DATA_H
#define FSDP_RUNTIME_DATA_H

#include <cstdint>
#include <string>
#include <vector>

namespace fsdp::rt {

inline constexpr int32_t kTokenFileMagic = 20240520;

class TokenData {
public:
  /// Loads `path` (either format). On failure returns false with `error`
  /// naming the file and the reason.
  bool load(const std::string &path, std::string &error);
  /// A small built-in English corpus, for demos and tests.
  void loadBuiltin();

  /// Checks the data against a model: enough tokens for one B x T batch
  /// (plus the last target) and every id below `vocab`.
  bool check(int64_t B, int64_t T, int64_t vocab, std::string &error) const;

  /// Fills `inputs` and `targets` (B * T each) with batch number `batch`,
  /// rows [rowBegin, rowBegin + rows) of it.
  void batch(int64_t batch, int64_t B, int64_t T, int64_t rowBegin,
             int64_t rows, int32_t *inputs, int32_t *targets) const;

  const std::string &source() const { return source_; }
  size_t size() const { return tokens.size(); }

private:
  std::vector<int32_t> tokens;
  std::string source_;
};

} // namespace fsdp::rt

#endif // FSDP_RUNTIME_DATA_H
