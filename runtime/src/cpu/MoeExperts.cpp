//===- MoeExperts.cpp - mixture-of-experts rows and experts on the CPU ----===//
//
// Row copies and sums over tokens (parallel over tokens: each output row
// is one thread's, so every sum has one order), and one BLAS GEMM per
// expert with rows (BLAS threads inside each: an expert's rows are
// hundreds to thousands, its matrices C x F). MoeExperts.h says what each
// kernel computes.
//
//===----------------------------------------------------------------------===//

#include "MoeExperts.h"

#include "Blas.h"
#include "Kernels.h"
#include "fsdp/runtime/MoeRouter.h"

#include <algorithm>
#include <cstring>

namespace fsdp::rt::cpu {

FSDP_CPU_KERNEL void moePermute(float *xs, const float *x, const int32_t *order,
                                int64_t T, int64_t k, int64_t C) {
  // Every index is checked (moe::inRange): one out of range gives a zero
  // row here and no contribution below.
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < T * k; ++i) {
    if (moe::inRange(order[i], T * k))
      std::memcpy(xs + i * C, x + int64_t(order[i] / k) * C,
                  sizeof(float) * size_t(C));
    else
      std::fill(xs + i * C, xs + (i + 1) * C, 0.0f);
  }
}

FSDP_CPU_KERNEL void moePermuteBackward(float *dx, const float *dxs,
                                        const int32_t *position, int64_t T,
                                        int64_t k, int64_t C) {
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < T; ++t) {
    float *d = dx + t * C;
    if (moe::inRange(position[t * k], T * k))
      std::memcpy(d, dxs + int64_t(position[t * k]) * C,
                  sizeof(float) * size_t(C));
    else
      std::fill(d, d + C, 0.0f);
    for (int64_t j = 1; j < k; ++j) {
      if (!moe::inRange(position[t * k + j], T * k))
        continue;
      const float *r = dxs + int64_t(position[t * k + j]) * C;
#pragma omp simd
      for (int64_t c = 0; c < C; ++c)
        d[c] += r[c];
    }
  }
}

FSDP_CPU_KERNEL void moeCombine(float *y, const float *ys, const float *weights,
                                const int32_t *position, int64_t T, int64_t k,
                                int64_t C) {
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < T; ++t) {
    float *o = y + t * C;
    std::fill(o, o + C, 0.0f);
    for (int64_t j = 0; j < k; ++j) {
      if (!moe::inRange(position[t * k + j], T * k))
        continue;
      const float w = weights[t * k + j];
      const float *r = ys + int64_t(position[t * k + j]) * C;
#pragma omp simd
      for (int64_t c = 0; c < C; ++c)
        o[c] += w * r[c];
    }
  }
}

FSDP_CPU_KERNEL void moeCombineBackward(float *dys, float *dweights,
                                        const float *dy, const float *ys,
                                        const float *weights,
                                        const int32_t *position, int64_t T,
                                        int64_t k, int64_t C) {
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < T; ++t) {
    const float *g = dy + t * C;
    for (int64_t j = 0; j < k; ++j) {
      const int64_t row = position[t * k + j];
      if (!moe::inRange(row, T * k)) {
        dweights[t * k + j] = 0.0f;
        continue;
      }
      const float w = weights[t * k + j];
      const float *r = ys + row * C;
      float *d = dys + row * C;
      double sum = 0.0;
#pragma omp simd reduction(+ : sum)
      for (int64_t c = 0; c < C; ++c) {
        d[c] = w * g[c];
        sum += double(g[c]) * double(r[c]);
      }
      dweights[t * k + j] = float(sum);
    }
  }
}

namespace {
/// Calls f(e, first row, rows) for every expert, in expert order, over
/// rows within [0, P) (a sort's offsets are; the clamp keeps any others
/// inside the buffers).
template <typename F>
void forEachExpert(const int32_t *offsets, int64_t E, int64_t P, const F &f) {
  int64_t end = 0;
  for (int64_t e = 0; e < E; ++e) {
    int64_t begin = std::clamp<int64_t>(offsets[e], end, P);
    end = std::clamp<int64_t>(offsets[e + 1], begin, P);
    f(e, begin, end - begin);
  }
}
} // namespace

FSDP_CPU_KERNEL void moeGroupedLinear(const Blas &blas, float *out,
                                      const float *in, const float *w,
                                      const int32_t *offsets, int64_t E,
                                      int64_t P, int64_t I, int64_t O) {
  forEachExpert(offsets, E, P, [&](int64_t e, int64_t r0, int64_t rows) {
    if (rows > 0)
      blas.sgemm(/*transA=*/false, /*transB=*/true, rows, O, I, 1.0f,
                 in + r0 * I, I, w + e * O * I, I, 0.0f, out + r0 * O, O);
  });
}

FSDP_CPU_KERNEL void
moeGroupedLinearGradInput(const Blas &blas, float *din, const float *dout,
                          const float *w, const int32_t *offsets, int64_t E,
                          int64_t P, int64_t I, int64_t O) {
  forEachExpert(offsets, E, P, [&](int64_t e, int64_t r0, int64_t rows) {
    if (rows > 0)
      blas.sgemm(/*transA=*/false, /*transB=*/false, rows, I, O, 1.0f,
                 dout + r0 * O, O, w + e * O * I, I, 0.0f, din + r0 * I, I);
  });
}

FSDP_CPU_KERNEL void
moeGroupedLinearGradWeight(const Blas &blas, float *dw, const float *dout,
                           const float *in, const int32_t *offsets, int64_t E,
                           int64_t P, int64_t I, int64_t O) {
  forEachExpert(offsets, E, P, [&](int64_t e, int64_t r0, int64_t rows) {
    float *d = dw + e * O * I;
    if (rows == 0)
      std::fill(d, d + O * I, 0.0f);
    else
      blas.sgemm(/*transA=*/true, /*transB=*/false, O, I, rows, 1.0f,
                 dout + r0 * O, O, in + r0 * I, I, 0.0f, d, I);
  });
}

} // namespace fsdp::rt::cpu
