//===- CpuMoeDispatchTest.cpp - expert parallelism's dispatch kernels -----===//
//
// Part of fsdp-cpu-kernels-test. moe_expert_counts, moe_regroup (both
// directions) and moe_local_offsets against references written from the
// kernel table's descriptions (docs/plan-format.md), with counts that do
// not fit (negative, a total past M) read and written within bounds, and
// the all_to_all's row check (exec/AllToAll.h) on counts that overflow.
// Drop mode: moe_capacity_trim against hand-worked cuts, moe_compact
// (both directions, and a round trip) against a reference.
//
//===----------------------------------------------------------------------===//

#include "CpuKernelsCheck.h"
#include "fsdp/runtime/exec/AllToAll.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace cpukernels {
namespace {

/// Reference regroup: run (s, l) of input (in (s, l) order) to (l, s)
/// order, built by listing every row's source; clamped as the kernel
/// table says (negative as 0, the total at most M, in (s, l) order).
std::vector<float> refRegroup(const std::vector<float> &input,
                              const std::vector<int32_t> &counts, int64_t G,
                              int64_t L, int64_t M, int64_t C, bool inverse) {
  std::vector<int64_t> clamped(size_t(G * L)), slStart(size_t(G * L));
  int64_t total = 0;
  for (int64_t r = 0; r < G * L; ++r) {
    int64_t c = std::max<int64_t>(counts[r], 0);
    clamped[r] = std::min(c, M - total);
    slStart[r] = total;
    total += clamped[r];
  }
  std::vector<float> out(size_t(M * C), 0.0f);
  int64_t row = 0; // in (l, s) order
  for (int64_t l = 0; l < L; ++l)
    for (int64_t s = 0; s < G; ++s)
      for (int64_t i = 0; i < clamped[s * L + l]; ++i, ++row) {
        int64_t sl = slStart[s * L + l] + i;
        int64_t from = inverse ? row : sl, to = inverse ? sl : row;
        for (int64_t c = 0; c < C; ++c)
          out[to * C + c] = input[from * C + c];
      }
  return out;
}

void checkRegroup(const std::vector<int32_t> &counts, int64_t G, int64_t L,
                  int64_t M, int64_t C, const std::string &name) {
  Rng rng(uint64_t(G * 131 + L * 17 + M));
  std::vector<float> input(size_t(M * C));
  for (float &v : input)
    v = rng.uniform();
  for (int inverse : {0, 1}) {
    std::vector<float> got = nans(size_t(M * C));
    fsdp::rt::cpu::moeRegroup(got.data(), input.data(), counts.data(), G, L, M,
                              C, inverse);
    CHECK_MSG(sameBits(got, refRegroup(input, counts, G, L, M, C, inverse)),
              "moe_regroup " + name + (inverse ? " inverse" : ""));
  }
  // The inverse undoes the regroup on the rows the runs hold; the rest
  // are zero.
  std::vector<float> there(size_t(M * C)), back(size_t(M * C));
  fsdp::rt::cpu::moeRegroup(there.data(), input.data(), counts.data(), G, L, M,
                            C, 0);
  fsdp::rt::cpu::moeRegroup(back.data(), there.data(), counts.data(), G, L, M,
                            C, 1);
  std::vector<float> held = refRegroup(
      refRegroup(input, counts, G, L, M, C, false), counts, G, L, M, C, true);
  CHECK_MSG(sameBits(back, held),
            "moe_regroup " + name + ": the inverse undoes it");
}

void testRegroup() {
  // G = 2 ranks, L = 3 local experts, the runs filling 11 of 14 rows.
  checkRegroup({1, 0, 3, 2, 4, 1}, 2, 3, 14, 5, "G=2 L=3");
  checkRegroup({5, 5, 5, 5}, 4, 1, 20, 3, "G=4 L=1 full");
  checkRegroup({0, 0, 0, 0}, 2, 2, 3, 2, "no rows");
  checkRegroup({7}, 1, 1, 9, 4, "G=1 L=1");
  // Corrupt counts: negative ones and a total past M, within bounds.
  checkRegroup({-3, 4, 9, 2}, 2, 2, 8, 3, "clamped");
  checkRegroup({2147483647, 1, 1, 1}, 2, 2, 6, 2, "huge");
}

/// Reference capacity trim, written from the kernel table's description:
/// walk (l, s), keep what fits the room left.
void checkTrim(const std::vector<int32_t> &recv, int64_t G, int64_t L,
               int64_t capacity, const std::vector<int32_t> &wantKept,
               int32_t wantDropped, const std::string &name) {
  std::vector<int32_t> kept(recv.size(), -7), dropped(1, -7);
  fsdp::rt::cpu::moeCapacityTrim(kept.data(), dropped.data(), recv.data(), G, L,
                                 capacity);
  CHECK_MSG(kept == wantKept, "moe_capacity_trim " + name + ": kept");
  CHECK_MSG(dropped[0] == wantDropped, "moe_capacity_trim " + name +
                                           ": dropped " +
                                           std::to_string(dropped[0]));
}

void testCapacityTrim() {
  // G = 2, L = 3: (l, s) order visits recv[0], recv[3], recv[1], recv[4],
  // recv[2], recv[5].
  std::vector<int32_t> recv = {1, 0, 3, 2, 4, 1};
  checkTrim(recv, 2, 3, 11, recv, 0, "all fit");
  checkTrim(recv, 2, 3, 100, recv, 0, "room to spare");
  checkTrim(recv, 2, 3, 5, {1, 0, 0, 2, 2, 0}, 6, "cut in expert 1");
  checkTrim(recv, 2, 3, 0, {0, 0, 0, 0, 0, 0}, 11, "capacity 0");
  checkTrim({-4, 3, 2, -1}, 2, 2, 4, {0, 2, 2, 0}, 1, "negative as 0");
  checkTrim({2147483647, 2147483647}, 2, 1, 1, {1, 0}, 2147483647,
            "dropped saturates");
}

/// Reference compaction: every row's source listed run by run, counts
/// clamped as the kernel table says (negative as 0, their total at most P
/// in (g, l) order; kept at most its run's count).
std::vector<float> refCompact(const std::vector<float> &input,
                              const std::vector<int32_t> &counts,
                              const std::vector<int32_t> &kept, int64_t P,
                              int64_t C, bool inverse) {
  std::vector<float> out(size_t(P * C), 0.0f);
  int64_t full = 0, packed = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    int64_t count = std::min<int64_t>(std::max(counts[r], 0), P - full);
    int64_t keep = std::min<int64_t>(std::max(kept[r], 0), count);
    for (int64_t i = 0; i < keep; ++i) {
      int64_t from = inverse ? packed + i : full + i;
      int64_t to = inverse ? full + i : packed + i;
      for (int64_t c = 0; c < C; ++c)
        out[to * C + c] = input[from * C + c];
    }
    full += count, packed += keep;
  }
  return out;
}

void checkCompact(const std::vector<int32_t> &counts,
                  const std::vector<int32_t> &kept, int64_t G, int64_t L,
                  int64_t P, int64_t C, const std::string &name) {
  Rng rng(uint64_t(G * 37 + L * 5 + P));
  std::vector<float> input(size_t(P * C));
  for (float &v : input)
    v = rng.uniform();
  std::vector<float> got[2];
  for (int inverse : {0, 1}) {
    got[inverse] = nans(size_t(P * C));
    fsdp::rt::cpu::moeCompact(got[inverse].data(), input.data(), counts.data(),
                              kept.data(), G, L, P, C, inverse);
    CHECK_MSG(
        sameBits(got[inverse], refCompact(input, counts, kept, P, C, inverse)),
        "moe_compact " + name + (inverse ? " inverse" : ""));
  }
  // Forward then inverse: the input, with the cut rows of each run (and
  // the rows past the runs) zero.
  std::vector<float> back = nans(size_t(P * C));
  fsdp::rt::cpu::moeCompact(back.data(), got[0].data(), counts.data(),
                            kept.data(), G, L, P, C, 1);
  std::vector<float> held(size_t(P * C), 0.0f);
  int64_t full = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    int64_t count = std::min<int64_t>(std::max(counts[r], 0), P - full);
    int64_t keep = std::min<int64_t>(std::max(kept[r], 0), count);
    std::copy(input.begin() + full * C, input.begin() + (full + keep) * C,
              held.begin() + full * C);
    full += count;
  }
  CHECK_MSG(sameBits(back, held), "moe_compact " + name + ": round trip");
}

void testCompact() {
  // G = 2, L = 3: runs of 1, 0, 3, 2, 4, 1 rows (11 of 14), some cut.
  checkCompact({1, 0, 3, 2, 4, 1}, {1, 0, 1, 2, 2, 0}, 2, 3, 14, 5, "cut");
  checkCompact({1, 0, 3, 2, 4, 1}, {1, 0, 3, 2, 4, 1}, 2, 3, 14, 5,
               "nothing cut");
  checkCompact({5, 5, 5, 5}, {0, 0, 0, 0}, 4, 1, 20, 3, "all cut");
  checkCompact({7}, {3}, 1, 1, 9, 4, "G=1 L=1");
  // Corrupt counts: negative ones, kept past its count, a total past P.
  checkCompact({-3, 4, 9, 2}, {2, -1, 12, 2}, 2, 2, 8, 3, "clamped");
  checkCompact({2147483647, 1, 1, 1}, {2147483647, 1, 1, 1}, 2, 2, 6, 2,
               "huge");
}

void testCountsAndOffsets() {
  // E = G L = 6 experts: offsets of a sort over 17 pairs.
  std::vector<int32_t> offsets = {0, 2, 2, 7, 8, 12, 17}, counts(6);
  fsdp::rt::cpu::moeExpertCounts(counts.data(), offsets.data(), 2, 3);
  CHECK_MSG((counts == std::vector<int32_t>{2, 0, 5, 1, 4, 5}),
            "moe_expert_counts");
  std::vector<int32_t> local(4, -1);
  fsdp::rt::cpu::moeLocalOffsets(local.data(), counts.data(), 2, 3);
  CHECK_MSG((local == std::vector<int32_t>{0, 3, 7, 17}), "moe_local_offsets");
  std::vector<int32_t> bad = {-4, 3}, badOffsets(2, -1);
  fsdp::rt::cpu::moeLocalOffsets(badOffsets.data(), bad.data(), 2, 1);
  CHECK_MSG((badOffsets == std::vector<int32_t>{0, 3}),
            "moe_local_offsets counts a negative count as 0");
}

void testAllToAllRows() {
  using fsdp::rt::AllToAllRows;
  std::vector<int32_t> send = {1, 2, 3, 0}, recv = {4, 0, 1, 1};
  AllToAllRows rows;
  std::string why;
  CHECK(fsdp::rt::allToAllRows(send.data(), recv.data(), 2, 2, 6, 6, 3, rows,
                               why));
  CHECK((rows.send == std::vector<int64_t>{3, 3} && rows.sent == 6 &&
         rows.recv == std::vector<int64_t>{4, 2} && rows.received == 6));
  CHECK(fsdp::rt::allToAllWireBytes(rows, 0, 8) == (3 + 2) * 8);
  CHECK(!fsdp::rt::allToAllRows(send.data(), recv.data(), 2, 2, 5, 6, 12, rows,
                                why));
  CHECK_MSG(why == "kernel #12 (all_to_all): its send counts total 6 rows, "
                   "more than the input's 5",
            "all_to_all send overflow: " + why);
  CHECK(!fsdp::rt::allToAllRows(send.data(), recv.data(), 2, 2, 6, 4, 7, rows,
                                why));
  CHECK_MSG(why.find("kernel #7 (all_to_all): its recv counts total 6 rows, "
                     "more than the result's 4") == 0,
            "all_to_all recv overflow: " + why);
  recv[1] = -1;
  CHECK(!fsdp::rt::allToAllRows(send.data(), recv.data(), 2, 2, 6, 6, 7, rows,
                                why));
  CHECK_MSG(why.find("negative") != std::string::npos,
            "all_to_all negative count: " + why);
}

} // namespace

void testMoeDispatch() {
  testCountsAndOffsets();
  testRegroup();
  testCapacityTrim();
  testCompact();
  testAllToAllRows();
}

} // namespace cpukernels
