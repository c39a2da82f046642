//===- VectorMath.h - helpers the CPU kernels share ------------*- C++ -*-===//
//
// Small inline functions written so that GCC vectorises the loops that use
// them under its default flags (-ftrapping-math, math-errno): an exp
// without branches or float compares, a row max on integer keys, and the
// column blocking of the deterministic row reductions.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_CPU_VECTORMATH_H
#define FSDP_RUNTIME_CPU_VECTORMATH_H

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <omp.h>

namespace fsdp::rt::cpu {

inline int32_t floatBits(float x) {
  int32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits;
}

inline float bitsFloat(int32_t bits) {
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

/// Maps float bits to an int that orders like the float (an involution).
inline int32_t orderedKey(int32_t bits) {
  return bits ^ ((bits >> 31) & 0x7fffffff);
}

/// exp(x) to within 1e-7 relative (Cephes' expf polynomial). Results below
/// ~1e-38 flush to 0, above 88.3 saturate at exp(88.3); NaN and +-inf give
/// NaN (a non-finite input is an upstream error that must stay visible).
/// Written without branches, floor or float comparisons: under GCC's
/// default -ftrapping-math any of those stops the vectoriser.
inline float expApprox(float x) {
  // Clamp on the integer image of x: integer min/max cannot trap.
  int32_t key = orderedKey(floatBits(x));
  key = std::min(std::max(key, orderedKey(floatBits(-88.0f))),
                 orderedKey(floatBits(88.3f)));
  float xc = bitsFloat(orderedKey(key));
  // n = round(xc / ln 2) by the 1.5 * 2^23 trick; exp(xc) = 2^n exp(r).
  float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = xc - n * 0.693359375f; // ln 2 in two parts, for an exact r
  r = r + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  float y = p * r * r + r + 1.0f;
  // n is in [-127, 127]; n = -127 gives the bits of +0.
  float scale = bitsFloat((static_cast<int32_t>(n) + 127) << 23);
  return y * scale + 0.0f * x; // 0 * x is NaN exactly when x is not finite
}

/// max(row[0..n)), as the integer max of the ordered keys: a float max
/// is a compare-and-select, which GCC does not vectorise under
/// -ftrapping-math. A positive NaN is the largest key, so it propagates.
inline float rowMax(const float *row, int64_t n) {
  int32_t key = orderedKey(floatBits(row[0]));
#pragma omp simd reduction(max : key)
  for (int64_t j = 0; j < n; ++j)
    key = std::max(key, orderedKey(floatBits(row[j])));
  return bitsFloat(orderedKey(key));
}

/// Widest column block of the dw/db pass: 64 floats are four cache lines
/// per row of each input, enough for the prefetchers to stream rows C apart.
constexpr int64_t kMaxColBlock = 64;

/// Columns per block: the widest multiple of 16 (one cache line) up to
/// kMaxColBlock that still gives every thread a block.
inline int64_t columnBlock(int64_t C) {
  const int64_t threads = omp_get_max_threads();
  int64_t width = kMaxColBlock;
  while (width > 16 && (C + width - 1) / width < threads)
    width /= 2;
  return width;
}

} // namespace fsdp::rt::cpu

#endif // FSDP_RUNTIME_CPU_VECTORMATH_H
