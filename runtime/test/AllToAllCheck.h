//===- AllToAllCheck.h - expert parallelism's all-to-alls, the reference --===//
//
// The cases the all-to-all tests run, and what every rank must receive, for
// the communicators (CollectivesTest.cpp) and the NCCL path under the CUDA
// emulation (cuda-emulation/EmuNcclAllToAllTest.cpp) alike: per case, the
// rows rank i sends rank j at N ranks (uneven, with zeros to and from some
// peers, a case with nothing at all, one with every row to one rank), the
// row width, and the bits of every element in each element type (f32 and
// bf16 finite, i32 any pattern), each a function of (case, sender,
// receiver, row, element) so that a row in the wrong place shows.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_TEST_ALLTOALLCHECK_H
#define FSDP_RUNTIME_TEST_ALLTOALLCHECK_H

#include "fsdp/runtime/PlanFormat.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace fsdp::rt::test {

inline constexpr int kAllToAllCases = 5;

/// What case `c` is, for messages.
inline const char *allToAllCaseName(int c) {
  static const char *names[kAllToAllCases] = {"uneven", "silent peers", "empty",
                                              "large, none to itself",
                                              "all to rank 0"};
  return names[c];
}

/// Elements per row of case `c`.
inline int64_t allToAllRowElements(int c) {
  static const int64_t widths[kAllToAllCases] = {3, 1, 5, 64, 17};
  return widths[c];
}

/// Rows rank `from` sends rank `to` in case `c` at N ranks.
inline int64_t allToAllRows(int c, int N, int from, int to) {
  switch (c) {
  case 0: // uneven, zero for some pairs (N = 2: rank 1 sends rank 0 none)
    return (3 * from + 5 * to + 1) % 4;
  case 1: // rank 0 sends nothing, rank N - 1 receives nothing
    return from == 0 || to == N - 1 ? 0 : 1 + (7 * from + 2 * to) % 3;
  case 2:
    return 0;
  case 3: // hundreds of rows of 64, skewed; nothing to itself
    return from == to ? 0 : 200 + 97 * ((from + 2 * to) % 5);
  default: // every token to one expert's rank
    return to == 0 ? 50 + from : 0;
  }
}

inline uint64_t allToAllMix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// The bits of element `e` of row `row` of the block rank `from` sends rank
/// `to` in case `c`, in the low plan::dtypeSize(type) bytes: finite floats
/// of random sign, exponent (2^-27 .. 2^22) and mantissa; any i32.
inline uint32_t allToAllBits(plan::DType type, int c, int from, int to,
                             int64_t row, int64_t e) {
  uint64_t h = allToAllMix(
      ((uint64_t(c) * 131 + uint64_t(from)) * 131 + uint64_t(to)) * 1000003u +
      uint64_t(row) * 4099u + uint64_t(e) + uint64_t(type) * 77777u);
  uint32_t exponent = 100u + uint32_t(h >> 40) % 50u;
  switch (type) {
  case plan::DType::I32:
    return uint32_t(h);
  case plan::DType::BF16:
    return (uint32_t(h) & 0x807Fu) | exponent << 7;
  case plan::DType::F32:
    break;
  }
  return (uint32_t(h) & 0x807FFFFFu) | exponent << 23;
}

/// Rank k's send buffer of case `c` (its blocks in rank order) and its
/// row counts to and from every rank.
struct AllToAllCase {
  std::vector<int64_t> sendRows, recvRows;
  int64_t sentRows = 0, receivedRows = 0, rowElements = 0;
  std::vector<unsigned char> send;
};

inline AllToAllCase allToAllCase(int c, int N, int k, plan::DType type) {
  AllToAllCase a;
  a.rowElements = allToAllRowElements(c);
  const size_t bytes = plan::dtypeSize(type);
  for (int r = 0; r < N; ++r) {
    a.sendRows.push_back(allToAllRows(c, N, k, r));
    a.recvRows.push_back(allToAllRows(c, N, r, k));
    a.sentRows += a.sendRows.back();
    a.receivedRows += a.recvRows.back();
  }
  a.send.resize(size_t(a.sentRows * a.rowElements) * bytes);
  unsigned char *at = a.send.data();
  for (int r = 0; r < N; ++r)
    for (int64_t row = 0; row < a.sendRows[size_t(r)]; ++row)
      for (int64_t e = 0; e < a.rowElements; ++e, at += bytes) {
        uint32_t bits = allToAllBits(type, c, k, r, row, e);
        std::memcpy(at, &bits, bytes); // little-endian: the low bytes
      }
  return a;
}

/// The first element of `recv` (rank k's received rows of case `c`, in rank
/// order) that is not what it must be, as "from rank i, row r, element e";
/// empty when all are right.
inline std::string allToAllWrong(int c, int N, int k, plan::DType type,
                                 const AllToAllCase &a,
                                 const unsigned char *recv) {
  const size_t bytes = plan::dtypeSize(type);
  const unsigned char *at = recv;
  for (int r = 0; r < N; ++r)
    for (int64_t row = 0; row < a.recvRows[size_t(r)]; ++row)
      for (int64_t e = 0; e < a.rowElements; ++e, at += bytes) {
        uint32_t bits = allToAllBits(type, c, r, k, row, e);
        if (std::memcmp(at, &bits, bytes) != 0)
          return "from rank " + std::to_string(r) + ", row " +
                 std::to_string(row) + ", element " + std::to_string(e);
      }
  return "";
}

/// Value v of the block rank `from` sends rank `to` in the counts exchange
/// (int64s far over 2^32, negative ones too).
inline int64_t allToAllCount(int from, int to, int64_t v) {
  return int64_t(allToAllMix(uint64_t(from) * 1009u + uint64_t(to) * 31u +
                             uint64_t(v))) >>
         (v % 2 ? 0 : 20);
}

} // namespace fsdp::rt::test

#endif // FSDP_RUNTIME_TEST_ALLTOALLCHECK_H
