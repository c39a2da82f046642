//===- Linear.cpp - fully connected layers through BLAS -------------------===//
//
// The three GEMMs of a linear layer (weights stored OC x IC, as PyTorch
// does) and the bias gradient. All GEMMs are single BLAS calls, threaded
// by the BLAS library itself.
//
//===----------------------------------------------------------------------===//

#include "Blas.h"
#include "Kernels.h"
#include "VectorMath.h"

#include <algorithm>
#include <cstring>
#include <omp.h>

namespace fsdp::rt::cpu {
/// out (N x OC) = x (N x IC) * w^T (w is OC x IC) + bias (OC; may be null).
FSDP_CPU_KERNEL void linearForward(const Blas &blas, float *out, const float *x,
                                   const float *w, const float *bias, int64_t N,
                                   int64_t IC, int64_t OC) {
  // The bias goes in first and the GEMM adds onto it (beta = 1), which
  // saves a second pass over out.
  float beta = 0.0f;
  if (bias) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < N; ++i)
      std::memcpy(out + i * OC, bias, sizeof(float) * OC);
    beta = 1.0f;
  }
  blas.sgemm(/*transA=*/false, /*transB=*/true, N, OC, IC, 1.0f, x, IC, w, IC,
             beta, out, OC);
}

/// dx (N x IC) = dout (N x OC) * w (OC x IC).
FSDP_CPU_KERNEL void linearGradInput(const Blas &blas, float *dx,
                                     const float *dout, const float *w,
                                     int64_t N, int64_t IC, int64_t OC) {
  blas.sgemm(/*transA=*/false, /*transB=*/false, N, IC, OC, 1.0f, dout, OC, w,
             IC, 0.0f, dx, IC);
}

/// dw (OC x IC) = dout^T (OC x N) * x (N x IC).
FSDP_CPU_KERNEL void linearGradWeight(const Blas &blas, float *dw,
                                      const float *dout, const float *x,
                                      int64_t N, int64_t IC, int64_t OC) {
  blas.sgemm(/*transA=*/true, /*transB=*/false, OC, IC, N, 1.0f, dout, OC, x,
             IC, 0.0f, dw, IC);
}

/// db (OC) = sum over rows of dout (N x OC).
FSDP_CPU_KERNEL void biasGrad(float *db, const float *dout, int64_t N,
                              int64_t OC) {
  // Column blocks, each summed over all rows in order by one thread: no
  // shared partials, and the same result for any thread count.
  const int64_t width = columnBlock(OC);
  const int64_t blocks = (OC + width - 1) / width;
#pragma omp parallel for schedule(static)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const int64_t c0 = blk * width, n = std::min(width, OC - c0);
    double acc[kMaxColBlock] = {};
    for (int64_t i = 0; i < N; ++i) {
      const float *d = dout + i * OC + c0;
#pragma omp simd
      for (int64_t c = 0; c < n; ++c)
        acc[c] += d[c];
    }
    for (int64_t c = 0; c < n; ++c)
      db[c0 + c] = float(acc[c]);
  }
}

} // namespace fsdp::rt::cpu
