//===- ShardLayout.h - which elements each rank owns ------------*- C++ -*-===//
//
// The seed's shard layout, shared by the compiler (FSDPDialect.cpp sizes
// shard buffers with it) and the runtime (which initialises, gathers and
// scatters by it): of a flat tensor of P elements, rank k of N owns
// [floor(k P / N), floor((k + 1) P / N)). Standard C++17 only, no 128-bit
// integers: k P overflows 64 bits long before P does, so the quotient is
// formed from P = q N + r (below). Part of the fsdp_plan_format interface
// target, with PlanFormat.h.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_SHARDLAYOUT_H
#define FSDP_RUNTIME_SHARDLAYOUT_H

#include <cstdint>

namespace fsdp::plan {

/// floor(a * b / c) for 0 <= a <= c and 0 <= b < c (c >= 1), exactly, for
/// every such int64 value: the quotient is below a, so it fits.
constexpr int64_t mulDivBelow(int64_t a, int64_t b, int64_t c) {
  if (b == 0 || a <= INT64_MAX / b)
    return a * b / c; // a * b fits: the common case (c below 2^31 always)
  // Long multiplication, one bit of a at a time from the top, keeping
  // a' * b = quotient * c + rest for the bits a' of a seen so far, with
  // rest < c. Every intermediate is below 2c <= 2^64: no overflow.
  uint64_t quotient = 0, rest = 0;
  const uint64_t ub = uint64_t(b), uc = uint64_t(c);
  for (int bit = 62; bit >= 0; --bit) {
    quotient *= 2; // (2a') * b = 2 quotient * c + 2 rest
    rest *= 2;
    if (rest >= uc) {
      rest -= uc;
      ++quotient;
    }
    if ((uint64_t(a) >> bit) & 1) { // (2a' + 1) * b adds b < c
      rest += ub;
      if (rest >= uc) {
        rest -= uc;
        ++quotient;
      }
    }
  }
  return int64_t(quotient);
}

/// floor(rank * size / worldSize) for size >= 0 and 0 <= rank <= worldSize:
/// with size = q N + r (0 <= r < N), rank * size / N = rank q + rank r / N,
/// and rank q is an integer, so the floor is rank q + floor(rank r / N).
/// rank q <= N q <= size fits in int64; mulDivBelow forms the second term
/// without overflow (rank <= N, r < N).
constexpr int64_t shardBegin(int64_t size, int64_t rank, int64_t worldSize) {
  int64_t q = size / worldSize, r = size % worldSize;
  return rank * q + mulDivBelow(rank, r, worldSize);
}

/// Of a flat tensor of `size` elements, rank `rank` of `worldSize` owns
/// [begin, end) with begin = floor(rank * size / worldSize). Shards differ
/// by at most one element.
struct ShardRange {
  int64_t begin, end;
};
constexpr ShardRange shardRange(int64_t size, int64_t rank, int64_t worldSize) {
  return {shardBegin(size, rank, worldSize),
          shardBegin(size, rank + 1, worldSize)};
}

/// The largest shard, ceil(size / worldSize): every rank's shard buffers
/// have this many elements.
constexpr int64_t maxShardSize(int64_t size, int64_t worldSize) {
  return size / worldSize + (size % worldSize != 0); // no overflow near 2^63
}

// The seed's examples, checked wherever this header is compiled.
static_assert(shardRange(10, 0, 3).end == 3 && shardRange(10, 2, 3).begin == 6);
static_assert(shardRange(1, 0, 4).end == 0 && shardRange(1, 3, 4).begin == 0);
static_assert(maxShardSize(10, 3) == 4 && maxShardSize(9, 3) == 3);
// Where rank * size overflows: P = 2^62 + 1 over N = 2^40 + 1 ranks, rank
// N - 1 (q = 2^22 - 1, r = 2^40 - 2^22 + 2, rank * r near 2^80).
static_assert(shardBegin((int64_t(1) << 62) + 1, int64_t(1) << 40,
                         (int64_t(1) << 40) + 1) ==
              (int64_t(1) << 62) - (int64_t(1) << 22) + 1);

} // namespace fsdp::plan

#endif // FSDP_RUNTIME_SHARDLAYOUT_H
