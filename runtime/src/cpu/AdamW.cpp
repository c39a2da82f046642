//===- AdamW.cpp - the AdamW optimiser step -------------------------------===//
//
// One streaming pass over param, m, v and grad, exactly the update written
// in Kernels.h (bias corrections divided, not folded into lr, so that the
// result matches the formula operation by operation).
//
// std::sqrt may set errno, and under GCC's default -fmath-errno the test
// for that keeps any loop that calls it scalar (3x slower here; neither an
// optimize attribute nor pragma changes this, as the builtin's semantics
// are fixed per translation unit). So the pass works in chunks that fit
// in L1: vectorised loops before and after, and the square roots between
// them with the CPU's vector sqrt, which is IEEE-exact like sqrtf.
//
//===----------------------------------------------------------------------===//

#include "Kernels.h"

#include <algorithm>
#include <cmath>
#if defined(__AVX__) || defined(__SSE2__)
#include <immintrin.h>
#endif

namespace fsdp::rt::cpu {
namespace {

constexpr int64_t kChunk = 256;

/// x[i] = sqrt(x[i]) for x >= 0, correctly rounded.
inline void sqrtInPlace(float *x, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(x + i, _mm512_sqrt_ps(_mm512_loadu_ps(x + i)));
#endif
#if defined(__AVX__)
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(x + i, _mm256_sqrt_ps(_mm256_loadu_ps(x + i)));
#elif defined(__SSE2__)
  for (; i + 4 <= n; i += 4)
    _mm_storeu_ps(x + i, _mm_sqrt_ps(_mm_loadu_ps(x + i)));
#endif
  for (; i < n; ++i)
    x[i] = std::sqrt(x[i]);
}

} // namespace

FSDP_CPU_KERNEL void adamw(float *param, float *m, float *v, const float *grad,
                           int64_t n, float lr, float beta1, float beta2,
                           float eps, float weightDecay, int64_t step,
                           const float *gradScale) {
  const float scale = gradScale ? *gradScale : 1.0f;
  const float corr1 = float(1.0 - std::pow(double(beta1), double(step)));
  const float corr2 = float(1.0 - std::pow(double(beta2), double(step)));
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (n >= (1 << 15))
  for (int64_t ch = 0; ch < chunks; ++ch) {
    const int64_t i0 = ch * kChunk, len = std::min(kChunk, n - i0);
    float *p = param + i0, *mc = m + i0, *vc = v + i0;
    const float *g = grad + i0;
    float root[kChunk]; // sqrt(vhat)
#pragma omp simd
    for (int64_t j = 0; j < len; ++j) {
      const float gj = g[j] * scale;
      const float mj = beta1 * mc[j] + (1.0f - beta1) * gj;
      const float vj = beta2 * vc[j] + (1.0f - beta2) * gj * gj;
      mc[j] = mj;
      vc[j] = vj;
      root[j] = vj / corr2;
    }
    sqrtInPlace(root, len);
#pragma omp simd
    for (int64_t j = 0; j < len; ++j) {
      const float mhat = mc[j] / corr1;
      p[j] -= lr * (mhat / (root[j] + eps) + weightDecay * p[j]);
    }
  }
}

} // namespace fsdp::rt::cpu
