//===- EmuMoeDispatchTest.cpp - expert parallelism's dispatch kernels -----===//
//
// Part of fsdp-cuda-emulation-test. MoeDispatch.cu's kernels against the
// CPU kernels of the same names (fsdp-cpu-kernels-test checks those
// against references): the counts and offsets exactly, the regrouped rows
// bitwise (rows are moved, never combined), in f32 and bf16, with counts
// that do not fit (negative, a total past M) kept within bounds, and the
// same bits under every schedule. Drop mode's capacity trim exactly, its
// compaction (both ways) bitwise, in f32 and bf16.
//
//===----------------------------------------------------------------------===//

#include "EmulationCheck.h"
#include "cpu/Kernels.h"

#include <cstdio>
#include <random>
#include <string>
#include <vector>

namespace {

template <typename E>
void testMoeRegroup(const std::vector<int32_t> &counts, int G, int L, int M,
                    int C, int off, unsigned seed) {
  char nm[128];
  snprintf(nm, sizeof nm, "moe_regroup%s G=%d L=%d M=%d C=%d off=%d",
           kIsBF16<E> ? " bf16" : "", G, L, M, C, off);
  std::mt19937 rng(seed);
  auto x = randv(size_t(M) * C, rng);
  roundTo<E>(x);
  std::vector<float> want[2];
  for (int inverse : {0, 1}) {
    want[inverse].assign(size_t(M) * C, NAN);
    cp::moeRegroup(want[inverse].data(), x.data(), counts.data(), G, L, M, C,
                   inverse);
  }
  Outs o = runOrders(nm, [&]() -> Outs {
    BufT<E> in(size_t(M) * C, off), out(size_t(M) * C, off),
        back(size_t(M) * C, off);
    in.set(x);
    cu::moeRegroup(ctx, out.p, in.p, counts.data(), G, L, M, C, 0);
    cu::moeRegroup(ctx, back.p, in.p, counts.data(), G, L, M, C, 1);
    checkCanary(nm, out), checkCanary(nm, back);
    return {out.vec(), back.vec()};
  });
  for (int inverse : {0, 1})
    if (o[inverse] != want[inverse])
      fail(std::string(nm) + (inverse ? " inverse" : "") +
           ": rows differ from the CPU's");
}

void testMoeDispatchCounts(int G, int L, unsigned seed) {
  char nm[96];
  snprintf(nm, sizeof nm, "moe_expert_counts/local_offsets G=%d L=%d", G, L);
  std::mt19937 rng(seed);
  std::vector<int32_t> offsets(size_t(G) * L + 1, 0);
  for (size_t e = 1; e < offsets.size(); ++e)
    offsets[e] = offsets[e - 1] + int32_t(rng() % 9);
  std::vector<int32_t> counts(size_t(G) * L), local(size_t(L) + 1);
  cp::moeExpertCounts(counts.data(), offsets.data(), G, L);
  cp::moeLocalOffsets(local.data(), counts.data(), G, L);
  Outs o = runOrders(nm, [&]() -> Outs {
    std::vector<int32_t> c(counts.size(), -7), l(local.size(), -7);
    cu::moeExpertCounts(ctx, c.data(), offsets.data(), G, L);
    cu::moeLocalOffsets(ctx, l.data(), c.data(), G, L);
    return {std::vector<float>(c.begin(), c.end()),
            std::vector<float>(l.begin(), l.end())};
  });
  if (o[0] != std::vector<float>(counts.begin(), counts.end()) ||
      o[1] != std::vector<float>(local.begin(), local.end()))
    fail(std::string(nm) + ": differ from the CPU's");
}

/// moe_compact both ways, and moe_capacity_trim's kept counts as its
/// `kept` (drop mode's pair), against the CPU.
template <typename E>
void testMoeCompact(const std::vector<int32_t> &counts,
                    std::vector<int32_t> kept, int G, int L, int P, int C,
                    int64_t capacity, int off, unsigned seed) {
  char nm[128];
  snprintf(nm, sizeof nm, "moe_compact%s G=%d L=%d P=%d C=%d cap=%d off=%d",
           kIsBF16<E> ? " bf16" : "", G, L, P, C, int(capacity), off);
  std::vector<int32_t> cpuKept(counts.size()), cpuDropped(1);
  cp::moeCapacityTrim(cpuKept.data(), cpuDropped.data(), counts.data(), G, L,
                      capacity);
  if (kept.empty())
    kept = cpuKept;
  std::mt19937 rng(seed);
  auto x = randv(size_t(P) * C, rng);
  roundTo<E>(x);
  std::vector<float> want[2];
  for (int inverse : {0, 1}) {
    want[inverse].assign(size_t(P) * C, NAN);
    cp::moeCompact(want[inverse].data(), x.data(), counts.data(), kept.data(),
                   G, L, P, C, inverse);
  }
  Outs o = runOrders(nm, [&]() -> Outs {
    BufT<E> in(size_t(P) * C, off), out(size_t(P) * C, off),
        back(size_t(P) * C, off);
    in.set(x);
    std::vector<int32_t> k(counts.size(), -7), d(1, -7);
    cu::moeCapacityTrim(ctx, k.data(), d.data(), counts.data(), G, L, capacity);
    cu::moeCompact(ctx, out.p, in.p, counts.data(), kept.data(), G, L, P, C, 0);
    cu::moeCompact(ctx, back.p, in.p, counts.data(), kept.data(), G, L, P, C,
                   1);
    checkCanary(nm, out), checkCanary(nm, back);
    k.push_back(d[0]);
    return {out.vec(), back.vec(), std::vector<float>(k.begin(), k.end())};
  });
  for (int inverse : {0, 1})
    if (o[inverse] != want[inverse])
      fail(std::string(nm) + (inverse ? " inverse" : "") +
           ": rows differ from the CPU's");
  cpuKept.push_back(cpuDropped[0]);
  if (o[2] != std::vector<float>(cpuKept.begin(), cpuKept.end()))
    fail(std::string(nm) + ": moe_capacity_trim differs from the CPU's");
}

} // namespace

void groupMoeDispatch(unsigned &seed) {
  testMoeDispatchCounts(2, 3, seed++);
  testMoeDispatchCounts(8, 16, seed++);
  testMoeDispatchCounts(1, 1, seed++);
  for (int off : {0, 1}) {
    testMoeRegroup<float>({1, 0, 3, 2, 4, 1}, 2, 3, 14, 5, off, seed++);
    testMoeRegroup<BF16>({3, 1, 0, 2, 2, 5, 1, 1}, 4, 2, 16, 33, off, seed++);
  }
  // Corrupt counts: negative ones, a total past M, one past INT.
  testMoeRegroup<float>({-3, 4, 9, 2}, 2, 2, 8, 3, 0, seed++);
  testMoeRegroup<float>({2147483647, 1, 1, 1}, 2, 2, 6, 2, 0, seed++);
  testMoeRegroup<float>({0, 0, 0, 0}, 2, 2, 3, 2, 0, seed++);
  // Drop mode: kept from the capacity trim (empty), then hand-made and
  // corrupt ones (negative, past the count, a total past P).
  for (int off : {0, 1}) {
    testMoeCompact<float>({1, 0, 3, 2, 4, 1}, {}, 2, 3, 14, 5, 5, off, seed++);
    testMoeCompact<BF16>({3, 1, 0, 2, 2, 5, 1, 1}, {}, 4, 2, 16, 33, 7, off,
                         seed++);
  }
  testMoeCompact<float>({1, 0, 3, 2, 4, 1}, {}, 2, 3, 14, 5, 100, 0, seed++);
  testMoeCompact<float>({-3, 4, 9, 2}, {2, -1, 12, 2}, 2, 2, 8, 3, 0, 0,
                        seed++);
  testMoeCompact<BF16>({2147483647, 1, 1, 1}, {2147483647, 1, 1, 1}, 2, 2, 6, 2,
                       3, 0, seed++);
}
