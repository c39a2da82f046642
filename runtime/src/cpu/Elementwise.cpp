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
#include "VectorMath.h"

#include <algorithm>
#include <cstring>

namespace fsdp::rt::cpu {
namespace {

constexpr int64_t kParallelMin = 1 << 15;

constexpr float kGeluK = 0.7978845608028654f; // sqrt(2 / pi)
constexpr float kGeluC = 0.044715f;

} // namespace

FSDP_CPU_KERNEL void add(float *out, const float *a, const float *b,
                         int64_t n) {
  // out may alias a or b; each element is read before it is written, so
  // the simd assertion (no loop-carried dependence) still holds.
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i)
    out[i] = a[i] + b[i];
}

FSDP_CPU_KERNEL void geluForward(float *out, const float *x, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    float xi = x[i];
    float u = kGeluK * (xi + kGeluC * xi * xi * xi);
    out[i] = xi / (1.0f + expApprox(-2.0f * u));
  }
}

FSDP_CPU_KERNEL void geluBackward(float *dx, const float *dout, const float *x,
                                  int64_t n) {
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

FSDP_CPU_KERNEL void reluForward(float *out, const float *x, int64_t n) {
  // Written so that NaN passes through (NaN < 0 is false).
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i)
    out[i] = x[i] < 0.0f ? 0.0f : x[i];
}

FSDP_CPU_KERNEL void reluBackward(float *dx, const float *dout, const float *x,
                                  int64_t n) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i)
    dx[i] = x[i] > 0.0f ? dout[i] : 0.0f;
}

FSDP_CPU_KERNEL void fill(float *out, int64_t n, float value) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i)
    out[i] = value;
}

} // namespace fsdp::rt::cpu
