//===- ShardLayoutTest.cpp - the seed's shard layout, checked exhaustively ===//
//
// plan::shardRange and plan::maxShardSize (ShardLayout.h) against the
// seed's formula, rank k of N owning floor(kP/N) .. floor((k+1)P/N) - 1 of
// a flat tensor of P elements, computed here in 128-bit arithmetic (which
// the header, standard C++ only, does without), for every P < 300 and N <=
// 40, and for P up to 2^62 (where k * P overflows 64 bits) with N up to
// 2^62 (where the header's k * (P mod N) overflows too and it takes its
// long-multiplication path); and plan::mulDivBelow itself on random
// operands of every magnitude. Also forEachShardSegment (Plan.h), which
// every per-element rule of a shard follows (initialisation, no weight
// decay): on a hand-built unit of several parameters its segments must tile
// each rank's shard exactly, parameter by parameter, for every N.
//
// Prints the first few failures and "shard-layout: N checks, M failed";
// exits 1 on any failure.
//
//===----------------------------------------------------------------------===//

#include "fsdp/runtime/ShardLayout.h"
#include "fsdp/runtime/plan/Plan.h"

#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#ifndef __SIZEOF_INT128__
#error "the reference needs a compiler with 128-bit integers (GCC, Clang)"
#endif

using namespace fsdp;

namespace {
int64_t checks = 0, failures = 0;

void expect(bool ok, const char *what, int64_t P, int64_t N, int64_t k,
            int64_t got, int64_t want) {
  ++checks;
  if (ok)
    return;
  if (++failures <= 20)
    std::printf("FAILED %s: P=%lld N=%lld k=%lld: got %lld, want %lld\n", what,
                (long long)P, (long long)N, (long long)k, (long long)got,
                (long long)want);
}

/// floor(k * P / N), in 128 bits: k * P < 2^126.
int64_t reference(int64_t P, int64_t k, int64_t N) {
  return int64_t((__int128)P * k / N);
}

/// Every rank's range against the reference, and the layout's properties:
/// contiguous, covering [0, P), shards differing by at most one element,
/// the largest being maxShardSize = ceil(P / N).
void checkLayout(int64_t P, int64_t N, int64_t k) {
  plan::ShardRange range = plan::shardRange(P, k, N);
  int64_t begin = reference(P, k, N), end = reference(P, k + 1, N);
  expect(range.begin == begin, "shardRange begin", P, N, k, range.begin, begin);
  expect(range.end == end, "shardRange end", P, N, k, range.end, end);
  int64_t floorSize = P / N, ceilSize = (P / N) + (P % N != 0);
  int64_t size = range.end - range.begin;
  expect(size == floorSize || size == ceilSize, "shard size in {floor,ceil}", P,
         N, k, size, ceilSize);
  expect(plan::maxShardSize(P, N) == ceilSize, "maxShardSize", P, N, -1,
         plan::maxShardSize(P, N), ceilSize);
  expect(size <= plan::maxShardSize(P, N), "shard fits the shard buffer", P, N,
         k, size, plan::maxShardSize(P, N));
}

void checkAllRanks(int64_t P, int64_t N) {
  int64_t previousEnd = 0, largest = 0;
  for (int64_t k = 0; k < N; ++k) {
    checkLayout(P, N, k);
    plan::ShardRange range = plan::shardRange(P, k, N);
    expect(range.begin == previousEnd, "contiguous", P, N, k, range.begin,
           previousEnd);
    previousEnd = range.end;
    largest = std::max(largest, range.end - range.begin);
  }
  expect(previousEnd == P, "last shard ends at P", P, N, N - 1, previousEnd, P);
  expect(largest == plan::maxShardSize(P, N), "largest shard", P, N, -1,
         largest, plan::maxShardSize(P, N));
}

/// A unit of parameters of the given sizes, in this order.
rt::Plan unitOf(const std::vector<int64_t> &sizes) {
  rt::Plan plan;
  rt::UnitDesc unit;
  unit.name = "u";
  for (size_t i = 0; i < sizes.size(); ++i) {
    rt::ParamDesc param;
    param.name = "p" + std::to_string(i);
    param.dtype = plan::DType::F32;
    param.shape = {sizes[i]};
    param.init = plan::InitKind::Zeros;
    param.unit = 0;
    param.unitOffset = unit.flatSize;
    unit.flatSize += sizes[i];
    plan.params.push_back(param);
  }
  // A parameter of another unit, which no segment of unit 0 may visit.
  rt::ParamDesc other;
  other.name = "other";
  other.dtype = plan::DType::F32;
  other.shape = {5};
  other.init = plan::InitKind::Zeros;
  other.unit = 1;
  plan.params.push_back(other);
  plan.units.push_back(unit);
  plan.units.push_back({"v", 5, 0});
  return plan;
}

/// Segments of every rank, written as (parameter, element) into a map of
/// the flat tensor: each flat element must be visited exactly once, by the
/// parameter that holds it, at the shard position that holds it.
void checkSegments(const std::vector<int64_t> &sizes, int N) {
  rt::Plan plan = unitOf(sizes);
  plan.worldSize = plan.shardSize = uint32_t(N); // shardOf's ranks
  int64_t P = plan.units[0].flatSize;
  std::vector<int> visits(P, 0);
  for (int k = 0; k < N; ++k) {
    plan::ShardRange range = plan::shardRange(P, k, N);
    int64_t covered = 0;
    rt::forEachShardSegment(plan, 0, k,
                            [&](const rt::ParamDesc &param, int64_t at,
                                int64_t begin, int64_t count) {
                              expect(param.unit == 0, "segment of another unit",
                                     P, N, k, param.unit, 0);
                              expect(begin >= 0 && count > 0 &&
                                         begin + count <= param.numElements(),
                                     "segment inside its parameter", P, N, k,
                                     begin + count, param.numElements());
                              expect(at >= 0 &&
                                         at + count <= range.end - range.begin,
                                     "segment inside the shard", P, N, k,
                                     at + count, range.end - range.begin);
                              for (int64_t i = 0; i < count; ++i) {
                                int64_t flat = range.begin + at + i;
                                expect(flat == param.unitOffset + begin + i,
                                       "segment maps shard to parameter", P, N,
                                       k, flat, param.unitOffset + begin + i);
                                if (flat >= 0 && flat < P)
                                  ++visits[flat];
                              }
                              covered += count;
                            });
    expect(covered == range.end - range.begin, "segments cover the shard", P, N,
           k, covered, range.end - range.begin);
  }
  for (int64_t i = 0; i < P; ++i)
    expect(visits[i] == 1, "flat element visited once", P, N, i, visits[i], 1);
}

/// Large flat tensors: k * P overflows 64 bits (P near 2^62, k up to N),
/// and P near 2^40 with up to 2^24 ranks (k * P near 2^64). Ranks sampled:
/// the first few, the middle and the last few.
void checkLargeTensors() {
  const int64_t bigP[] = {(int64_t(1) << 40) - 1, int64_t(1) << 40,
                          (int64_t(1) << 40) + 7, 1099511627689LL,
                          (int64_t(1) << 62) - 3, (int64_t(1) << 62) + 12345};
  const int64_t bigN[] = {1,
                          2,
                          3,
                          7,
                          8,
                          1000,
                          4093,
                          65536,
                          1 << 20,
                          1 << 24,
                          (int64_t(1) << 31) - 1,
                          int64_t(1) << 31,
                          (int64_t(1) << 40) + 1,
                          (int64_t(1) << 62) - 1,
                          INT64_MAX};
  for (int64_t P : bigP)
    for (int64_t N : bigN) {
      for (int64_t k :
           {int64_t(0), int64_t(1), int64_t(2), N / 2, N - 3, N - 2, N - 1})
        if (k >= 0 && k < N)
          checkLayout(P, N, k);
      expect(plan::shardRange(P, N - 1, N).end == P, "last shard ends at P", P,
             N, N - 1, plan::shardRange(P, N - 1, N).end, P);
    }
}

/// mulDivBelow(a, b, c) = floor(a b / c) for a <= c, b < c: random
/// operands of every magnitude, so that both of its paths run (a b within
/// 63 bits, and past it).
void checkMulDivBelow() {
  std::mt19937_64 random(42);
  for (int i = 0; i < 200000; ++i) {
    int64_t c = int64_t(random() >> (1 + random() % 63));
    if (c < 1)
      c = 1;
    int64_t a = int64_t(random() % uint64_t(c) + (random() % 8 == 0)),
            b = int64_t(random() % uint64_t(c));
    int64_t want = int64_t((__int128)a * b / c);
    expect(plan::mulDivBelow(a, b, c) == want, "mulDivBelow", a, c, b,
           plan::mulDivBelow(a, b, c), want);
  }
  for (int64_t c : {int64_t(1), int64_t(2), INT64_MAX, INT64_MAX - 1})
    for (int64_t a : {int64_t(0), int64_t(1), c / 2, c - 1, c})
      for (int64_t b : {int64_t(0), c / 2, c - 1})
        expect(plan::mulDivBelow(a, b, c) == int64_t((__int128)a * b / c),
               "mulDivBelow at the edges", a, c, b, plan::mulDivBelow(a, b, c),
               int64_t((__int128)a * b / c));
}
} // namespace

int main() {
  // The seed's own examples.
  expect(plan::shardRange(10, 0, 3).end == 3, "P=10 N=3 rank 0 ends at 3", 10,
         3, 0, plan::shardRange(10, 0, 3).end, 3);
  expect(plan::shardRange(10, 2, 3).begin == 6, "P=10 N=3 rank 2 starts at 6",
         10, 3, 2, plan::shardRange(10, 2, 3).begin, 6);
  expect(plan::shardRange(1, 0, 4).end == 0, "P=1 N=4: rank 0 is empty", 1, 4,
         0, plan::shardRange(1, 0, 4).end, 0);
  expect(plan::shardRange(1, 3, 4).begin == 0 &&
             plan::shardRange(1, 3, 4).end == 1,
         "P=1 N=4: rank 3 owns the element", 1, 4, 3,
         plan::shardRange(1, 3, 4).end, 1);

  // Every small case: units of 1 element, fewer elements than ranks.
  for (int64_t P = 0; P < 300; ++P)
    for (int64_t N = 1; N <= 40; ++N)
      checkAllRanks(P, N);

  checkLargeTensors();

  checkMulDivBelow();

  // Units of several parameters, including ones of a single element and
  // ones shorter than the world size, so that parameters straddle shard
  // boundaries and some ranks hold no element of some parameters.
  const std::vector<std::vector<int64_t>> units = {
      {1}, {3}, {1, 1, 1}, {7, 1, 5}, {30, 6, 6, 24, 6, 4}, {2, 97, 1, 13}};
  for (const auto &sizes : units)
    for (int N = 1; N <= 9; ++N)
      checkSegments(sizes, N);

  std::printf("shard-layout: %lld checks, %lld failed\n", (long long)checks,
              (long long)failures);
  return failures ? 1 : 0;
}
