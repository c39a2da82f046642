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
// The gradient is f32, or bf16 (mixed precision's reduced shard, which
// the compiler leaves uncast): widened as it is read, exactly, so the two
// give the same bits for the same values.
//
// A unit's shard copy (mixed precision at a shard group of one), when
// given, takes each updated element rounded to bf16 while the chunk is in
// L1: the regions read it in place of a gather that would round the whole
// shard again, twice a step.
//
//===----------------------------------------------------------------------===//

#include "Kernels.h"

#include "fsdp/runtime/support/BFloat16.h"

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

/// The gradient's element j as a float: itself, or a bf16 widened.
inline float gradAt(const float *g, int64_t j) { return g[j]; }
inline float gradAt(const uint16_t *g, int64_t j) { return widenBF16(g[j]); }

struct Hyper {
  float lr, beta1, beta2, eps, weightDecay, scale, corr1, corr2;
};

Hyper hyper(float lr, float beta1, float beta2, float eps, float weightDecay,
            int64_t step, const float *gradScale) {
  return {lr,
          beta1,
          beta2,
          eps,
          weightDecay,
          gradScale ? *gradScale : 1.0f,
          float(1.0 - std::pow(double(beta1), double(step))),
          float(1.0 - std::pow(double(beta2), double(step)))};
}

/// The update of one chunk (len <= kChunk), the gradient read through
/// gradAt. Always inlined into each kernel's parallel loop, so that it is
/// compiled for the kernel's clone: the ISA, hence the contractions into
/// fused multiply-adds, that the f32 AdamW has always had (out of line,
/// it would be compiled for the baseline x86-64, and round differently).
template <typename G>
__attribute__((always_inline)) inline void
adamwChunk(float *p, float *mc, float *vc, const G *g, int64_t len,
           const Hyper &h, uint16_t *copy) {
  float root[kChunk]; // sqrt(vhat)
#pragma omp simd
  for (int64_t j = 0; j < len; ++j) {
    const float gj = gradAt(g, j) * h.scale;
    const float mj = h.beta1 * mc[j] + (1.0f - h.beta1) * gj;
    const float vj = h.beta2 * vc[j] + (1.0f - h.beta2) * gj * gj;
    mc[j] = mj;
    vc[j] = vj;
    root[j] = vj / h.corr2;
  }
  sqrtInPlace(root, len);
#pragma omp simd
  for (int64_t j = 0; j < len; ++j) {
    const float mhat = mc[j] / h.corr1;
    p[j] -= h.lr * (mhat / (root[j] + h.eps) + h.weightDecay * p[j]);
  }
  if (copy) {
#pragma omp simd
    for (int64_t j = 0; j < len; ++j)
      copy[j] = roundToBF16(p[j]);
  }
}

} // namespace

FSDP_CPU_KERNEL void adamw(float *param, float *m, float *v, const float *grad,
                           int64_t n, float lr, float beta1, float beta2,
                           float eps, float weightDecay, int64_t step,
                           const float *gradScale, uint16_t *copy) {
  const Hyper h = hyper(lr, beta1, beta2, eps, weightDecay, step, gradScale);
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (n >= (1 << 15))
  for (int64_t ch = 0; ch < chunks; ++ch) {
    const int64_t i0 = ch * kChunk, len = std::min(kChunk, n - i0);
    adamwChunk(param + i0, m + i0, v + i0, grad + i0, len, h,
               copy ? copy + i0 : nullptr);
  }
}

FSDP_CPU_KERNEL void adamw(float *param, float *m, float *v,
                           const uint16_t *grad, int64_t n, float lr,
                           float beta1, float beta2, float eps,
                           float weightDecay, int64_t step,
                           const float *gradScale, uint16_t *copy) {
  const Hyper h = hyper(lr, beta1, beta2, eps, weightDecay, step, gradScale);
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (n >= (1 << 15))
  for (int64_t ch = 0; ch < chunks; ++ch) {
    const int64_t i0 = ch * kChunk;
    adamwChunk(param + i0, m + i0, v + i0, grad + i0, std::min(kChunk, n - i0),
               h, copy ? copy + i0 : nullptr);
  }
}

} // namespace fsdp::rt::cpu
