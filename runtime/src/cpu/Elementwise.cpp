//===- Elementwise.cpp - add, GELU, ReLU and fill -------------------------===//
//
// Flat loops over n elements. Each is one `parallel for simd`: OpenMP splits
// the range into contiguous chunks and the compiler vectorises each chunk.
// Below kParallelMin elements the loop runs on the calling thread, where a
// parallel region would cost more than the work.
//
// GELU needs tanh, which glibc only vectorises under -ffast-math (the
// library is built without it), so it is written as a sigmoid,
// 0.5 (1 + tanh(u)) = 1 / (1 + exp(-2u)), over a polynomial exp that the
// compiler vectorises.
//
//===----------------------------------------------------------------------===//

#include "Kernels.h"

#include <algorithm>
#include <cstring>

namespace fsdp::rt::cpu {
namespace {

constexpr int64_t kParallelMin = 1 << 15;

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
/// default -ftrapping-math any of those stops the vectoriser. The same
/// function is in Attention.cpp and CrossEntropy.cpp (kept in step).
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

constexpr float kGeluK = 0.7978845608028654f; // sqrt(2 / pi)
constexpr float kGeluC = 0.044715f;

} // namespace

void add(float *out, const float *a, const float *b, int64_t n) {
  // out may alias a or b; each element is read before it is written, so
  // the simd assertion (no loop-carried dependence) still holds.
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i)
    out[i] = a[i] + b[i];
}

void geluForward(float *out, const float *x, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    float xi = x[i];
    float u = kGeluK * (xi + kGeluC * xi * xi * xi);
    out[i] = xi / (1.0f + expApprox(-2.0f * u));
  }
}

void geluBackward(float *dx, const float *dout, const float *x, int64_t n) {
  // With s = sigmoid(2u): gelu = x s and gelu' = s + 2 x u' s (1 - s).
  // 1 - s is computed as s e (e = exp(-2u)), which does not cancel.
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    float xi = x[i];
    float x2 = xi * xi;
    float u = kGeluK * (xi + kGeluC * x2 * xi);
    float du = kGeluK * (1.0f + 3.0f * kGeluC * x2);
    float e = expApprox(-2.0f * u);
    float s = 1.0f / (1.0f + e);
    float grad = s + 2.0f * xi * du * s * (s * e);
    dx[i] = dout[i] * grad;
  }
}

void reluForward(float *out, const float *x, int64_t n) {
  // Written so that NaN passes through (NaN < 0 is false).
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i)
    out[i] = x[i] < 0.0f ? 0.0f : x[i];
}

void reluBackward(float *dx, const float *dout, const float *x, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i)
    dx[i] = x[i] > 0.0f ? dout[i] : 0.0f;
}

void fill(float *out, int64_t n, float value) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i)
    out[i] = value;
}

} // namespace fsdp::rt::cpu
