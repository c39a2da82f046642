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
// adamwTensors runs a list of tensors (AdamWTensors.h: every segment of a
// step's adjacent adamw_shard instructions) as one parallel pass; adamw is
// the list of one.
//
//===----------------------------------------------------------------------===//

#include "Kernels.h"

#include "fsdp/runtime/support/BFloat16.h"

#include <algorithm>
#include <cmath>
#include <omp.h>
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

/// Elements [begin, end) of tensor `t`, whose gradient is G.
template <typename G>
__attribute__((always_inline)) inline void
adamwRange(const AdamWTensor &t, const Hyper &h, int64_t begin, int64_t end) {
  const G *grad = static_cast<const G *>(t.grad);
  for (int64_t i0 = begin; i0 < end; i0 += kChunk)
    adamwChunk(t.param + i0, t.m + i0, t.v + i0, grad + i0,
               std::min(kChunk, end - i0), h, t.copy ? t.copy + i0 : nullptr);
}

} // namespace

FSDP_CPU_KERNEL void adamwTensors(const AdamWTensor *tensors, size_t count,
                                  int64_t step) {
  int64_t total = 0;
  for (size_t k = 0; k < count; ++k)
    total += tensors[k].n;
    // One parallel region for every tensor: each thread takes an equal run
    // of the tensors' elements laid end to end, so that a run of small
    // tensors (biases, norms) is shared out like a large one instead of
    // running on one thread while the others wait at a barrier each.
#pragma omp parallel if (total >= (1 << 15))
  {
    const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t begin = total * t / threads, end = total * (t + 1) / threads;
    int64_t at = 0; // where tensors[k] starts in the run
    for (size_t k = 0; k < count && at < end; at += tensors[k].n, ++k) {
      const AdamWTensor &x = tensors[k];
      const int64_t lo = std::max(begin, at) - at;
      const int64_t hi = std::min(end, at + x.n) - at;
      if (lo >= hi)
        continue;
      const Hyper h = hyper(x.lr, x.beta1, x.beta2, x.eps, x.weightDecay, step,
                            x.gradScale);
      if (x.bf16Grad)
        adamwRange<uint16_t>(x, h, lo, hi);
      else
        adamwRange<float>(x, h, lo, hi);
    }
  }
}

void adamw(float *param, float *m, float *v, const float *grad, int64_t n,
           float lr, float beta1, float beta2, float eps, float weightDecay,
           int64_t step, const float *gradScale, uint16_t *copy) {
  AdamWTensor t{param, m,     v,     grad, copy,        gradScale, n,
                lr,    beta1, beta2, eps,  weightDecay, false};
  adamwTensors(&t, 1, step);
}

void adamw(float *param, float *m, float *v, const uint16_t *grad, int64_t n,
           float lr, float beta1, float beta2, float eps, float weightDecay,
           int64_t step, const float *gradScale, uint16_t *copy) {
  AdamWTensor t{param, m,     v,     grad, copy,        gradScale, n,
                lr,    beta1, beta2, eps,  weightDecay, true};
  adamwTensors(&t, 1, step);
}

} // namespace fsdp::rt::cpu
