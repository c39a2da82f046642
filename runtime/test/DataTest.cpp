//===- DataTest.cpp - the token data loader, batch by batch ---------------===//
//
// Checks batches directly, not through a loss: targets are the inputs
// shifted by one token, each rank gets its own rows of the global batch,
// batch k is window k mod W (the epoch rule in Data.h) on data whose
// length is not a multiple of B x T, the tail is never used, and the file
// formats are read as documented. Prints "data: N passed, M failed".
//
//===----------------------------------------------------------------------===//

#include "fsdp/runtime/io/Data.h"

#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <unistd.h>
#include <vector>

using namespace fsdp::rt;

namespace {
int passed = 0, failed = 0;

void check(bool ok, const std::string &what) {
  ok ? ++passed : ++failed;
  if (!ok)
    std::fprintf(stderr, "data: FAILED: %s\n", what.c_str());
}

/// A token file (llm.c's header) holding `tokens`.
std::string writeTokenFile(const std::string &path,
                           const std::vector<int> &tokens) {
  FILE *f = std::fopen(path.c_str(), "wb");
  int32_t header[256] = {kTokenFileMagic, 1, int32_t(tokens.size())};
  std::fwrite(header, sizeof(header), 1, f);
  for (int t : tokens) {
    uint16_t v = uint16_t(t);
    std::fwrite(&v, sizeof(v), 1, f);
  }
  std::fclose(f);
  return path;
}
/// The batches' shape in every check: B = 2 rows of T = 5.
constexpr int64_t B = 2, T = 5;

/// 103 tokens with id 257 i at position i: W = 10 whole windows (the
/// 101st token is the last target), 2 tokens never used; `data` is left
/// loaded with them.
void checkTokenFile(const std::string &dir, std::vector<int> &ids,
                    TokenData &data) {
  for (int i = 0; i < 103; ++i)
    ids[i] = i * 257; // both bytes of every uint16 id matter
  std::string error;
  check(
      data.load(writeTokenFile(dir + "/ids.bin", ids), DataFormat::Auto, error),
      "token file loads: " + error);
  check(data.windowsPerEpoch(B, T) == 10, "10 windows per epoch");
  check(data.unusedTail(B, T) == 2, "2 tail tokens unused");
  check(std::string(data.formatName()) == "tokens", "read as tokens");
  std::set<int> seenInputs;
  for (int64_t batch = 0; batch < 25; ++batch)
    for (int64_t rank = 0; rank < 2; ++rank) {
      std::vector<int32_t> x(T), y(T);
      check(data.batch(batch, B, T, /*rowBegin=*/rank, /*rows=*/1, x.data(),
                       y.data(), error),
            "batch reads: " + error);
      int64_t start = (batch % 10) * B * T + rank * T;
      for (int64_t j = 0; j < T; ++j) {
        seenInputs.insert(x[j]);
        check(x[j] == (start + j) * 257, "batch " + std::to_string(batch) +
                                             " rank " + std::to_string(rank) +
                                             " input " + std::to_string(j));
        check(y[j] == x[j] + 257, "target is the next token");
      }
    }
  check(seenInputs.size() == 100 && *seenInputs.rbegin() == 99 * 257,
        "an epoch covers tokens 0..99 as inputs, never the tail");

  // Both ranks of a 2-rank batch together are the 1-rank batch.
  std::vector<int32_t> whole(B * T), wholeY(B * T), half(T), halfY(T);
  data.batch(3, B, T, 0, 2, whole.data(), wholeY.data(), error);
  data.batch(3, B, T, 1, 1, half.data(), halfY.data(), error);
  check(std::vector<int32_t>(whole.begin() + T, whole.end()) == half,
        "rank 1's rows are the global batch's second row");
}

/// Text is bytes; a file too short for one batch is refused; the
/// fingerprint tells data apart.
void checkTextAndFingerprints(const std::string &dir, std::vector<int> &ids,
                              const TokenData &data) {
  std::string text = dir + "/text.txt";
  std::string error;
  FILE *f = std::fopen(text.c_str(), "wb");
  std::fputs("hello, world\n", f);
  std::fclose(f);
  TokenData bytes;
  check(bytes.load(text, DataFormat::Auto, error), "text loads: " + error);
  check(std::string(bytes.formatName()) == "bytes" && bytes.size() == 13,
        "text is 13 byte tokens");
  check(!bytes.check(2, 8, 256, error), "13 tokens are fewer than 2 x 8 + 1");
  check(!bytes.load(text, DataFormat::Tokens, error),
        "text is not a token file");

  // The fingerprint tells data apart.
  ids[50] = 7;
  TokenData other;
  other.load(writeTokenFile(dir + "/other.bin", ids), DataFormat::Auto, error);
  check(other.fingerprint() != data.fingerprint(), "fingerprints differ");
  TokenData same;
  same.load(dir + "/ids.bin", DataFormat::Auto, error);
  check(same.fingerprint() == data.fingerprint(), "fingerprints agree");
}

/// Bytes are read where they lie, a batch at a time: a text file is
/// batched like the token file, and a file that shrinks after loading is
/// an error naming it, not a crash.
void checkBytesReadLazily(const std::string &dir) {
  std::string longer = dir + "/longer.txt";
  std::string error;
  FILE *f = std::fopen(longer.c_str(), "wb");
  for (int i = 0; i < 103; ++i)
    std::fputc('a' + i % 26, f);
  std::fclose(f);
  TokenData letters;
  check(letters.load(longer, DataFormat::Bytes, error) &&
            letters.check(B, T, 256, error),
        "letters load: " + error);
  std::vector<int32_t> lx(B * T), ly(B * T);
  check(letters.batch(7, B, T, 0, 2, lx.data(), ly.data(), error) &&
            lx[0] == 'a' + 70 % 26 && ly[B * T - 1] == 'a' + 80 % 26,
        "batch 7 of the letters is bytes 70..80");
  check(truncate(longer.c_str(), 20) == 0, "shrink the letters");
  check(!letters.batch(7, B, T, 0, 2, lx.data(), ly.data(), error) &&
            error.find(longer) == 0 &&
            error.find("shrank") != std::string::npos,
        "a shrunken file is an error naming it: " + error);
}
/// Llama 3's uint32 ids (llm.c's header 20240801, version 7): every byte
/// of an id counts, ids above uint16 included; a wrong version, a short
/// body and an id that overflows int32 are refused.
void checkUint32Tokens(const std::string &dir) {
  std::vector<uint32_t> ids(41);
  for (uint32_t i = 0; i < ids.size(); ++i)
    ids[i] = 128000u + i * 65793u; // > 65535, all four bytes vary
  auto write = [&](const std::string &name, int32_t version, size_t count,
                   size_t written) {
    std::string path = dir + "/" + name;
    FILE *f = std::fopen(path.c_str(), "wb");
    int32_t header[256] = {kTokenFile32Magic, version, int32_t(count)};
    std::fwrite(header, sizeof(header), 1, f);
    std::fwrite(ids.data(), sizeof(uint32_t), written, f);
    std::fclose(f);
    return path;
  };
  TokenData wide;
  std::string error;
  check(wide.load(write("u32.bin", kTokenFile32Version, 41, 41),
                  DataFormat::Auto, error),
        "uint32 token file loads: " + error);
  check(std::string(wide.formatName()) == "uint32 tokens" && wide.size() == 41,
        "read as 41 uint32 tokens");
  int64_t top = int64_t(ids.back());
  check(!wide.check(B, T, top, error), "an id at the vocabulary is refused");
  check(wide.check(B, T, top + 1, error), "ids below the vocabulary: " + error);
  std::vector<int32_t> x(B * T), y(B * T);
  check(wide.batch(1, B, T, 0, B, x.data(), y.data(), error) &&
            x[0] == int32_t(ids[10]) && y[B * T - 1] == int32_t(ids[20]),
        "batch 1 is ids 10..19, targets 11..20");
  check(!wide.load(write("v1.bin", 1, 41, 41), DataFormat::Auto, error) &&
            error.find("version 1 (magic 20240801 expects 7)") !=
                std::string::npos,
        "the uint16 version under the uint32 magic is refused: " + error);
  check(!wide.load(write("short.bin", kTokenFile32Version, 41, 30),
                   DataFormat::Tokens, error) &&
            error.find("promises 41 uint32 tokens, the file holds 30") !=
                std::string::npos,
        "a short uint32 body is truncated: " + error);
  ids[3] = 0x80000000u;
  check(wide.load(write("big.bin", kTokenFile32Version, 41, 41),
                  DataFormat::Auto, error) &&
            !wide.check(B, T, int64_t(1) << 31, error) &&
            error.find("token id 2147483648") != std::string::npos,
        "an id beyond int32 is refused whatever the vocabulary: " + error);
}
} // namespace

int main() {
  std::string dir = "/tmp/fsdp-data-test." + std::to_string(getpid());
  std::string mkdir = "mkdir -p " + dir;
  if (std::system(mkdir.c_str()) != 0)
    return 2;
  std::vector<int> ids(103);
  TokenData data;
  checkTokenFile(dir, ids, data);
  checkTextAndFingerprints(dir, ids, data);
  checkBytesReadLazily(dir);
  checkUint32Tokens(dir);

  std::string rm = "rm -rf " + dir;
  std::system(rm.c_str());
  std::printf("data: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
