//===- LayerNorm.cpp - layer and RMS normalisation ------------------------===//
//
// As in llm.c: the forward saves each row's mean and rstd, the backward
// uses them instead of recomputing the statistics. Row sums are taken in
// double (`omp simd reduction` lets the compiler vectorise them; without
// it, strict IEEE order would keep them scalar).
//
// dw and db are sums over all N rows. Rather than per-thread partial
// vectors (an allocation, and a result that depends on the thread count),
// the backward makes a second pass over column blocks: each block's sums
// live on the stack, and every column is summed in row order by one
// thread, so the result is the same for any thread count.
//
// RMS normalisation (Llama's) is the same scheme without the mean and the
// bias: the forward saves rstd, dw is the same column pass.
//
//===----------------------------------------------------------------------===//

#include "Kernels.h"
#include "VectorMath.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <omp.h>

namespace fsdp::rt::cpu {
namespace {
/// One row of RMSNorm: o = x s w with s = 1 / sqrt(mean(x^2) + eps) over
/// C elements; returns s. Rows of rms_norm and heads of qk_norm alike.
inline float rmsNormRow(float *o, const float *x, const float *w, int64_t C,
                        float eps) {
  double sq = 0.0;
#pragma omp simd reduction(+ : sq)
  for (int64_t c = 0; c < C; ++c)
    sq += double(x[c] * x[c]);
  const double meanSquare = sq / double(C);
  const float s = float(1.0 / std::sqrt(meanSquare + double(eps)));
#pragma omp simd
  for (int64_t c = 0; c < C; ++c)
    o[c] = x[c] * s * w[c];
  return s;
}

/// One row's dx of RMSNorm: rstd (dn - n mean(dn n)), n = x rstd,
/// dn = w dout (layer norm's formula without the mean terms).
inline void rmsNormRowDx(float *o, const float *x, const float *d,
                         const float *w, float s, int64_t C) {
  double sumDN = 0.0;
#pragma omp simd reduction(+ : sumDN)
  for (int64_t c = 0; c < C; ++c)
    sumDN += double(w[c] * d[c] * (x[c] * s));
  const float meanDN = float(sumDN / double(C));
#pragma omp simd
  for (int64_t c = 0; c < C; ++c)
    o[c] = (w[c] * d[c] - x[c] * s * meanDN) * s;
}
} // namespace

/// out = (x - mean) * rstd * w + b over rows of C; mean and rstd (N) are
/// saved for the backward. rstd = 1 / sqrt(var + eps), var biased.
FSDP_CPU_KERNEL void layerNormForward(float *out, float *mean, float *rstd,
                                      const float *x, const float *w,
                                      const float *b, int64_t N, int64_t C,
                                      float eps) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < N; ++i) {
    const float *xi = x + i * C;
    double sum = 0.0;
#pragma omp simd reduction(+ : sum)
    for (int64_t c = 0; c < C; ++c)
      sum += xi[c];
    const float m = float(sum / double(C));
    // Two passes: the variance of the centred values does not lose the
    // digits that E[x^2] - E[x]^2 would for rows with a large mean.
    double sq = 0.0;
#pragma omp simd reduction(+ : sq)
    for (int64_t c = 0; c < C; ++c) {
      const float d = xi[c] - m;
      sq += double(d * d);
    }
    const float s = float(1.0 / std::sqrt(sq / double(C) + double(eps)));
    float *o = out + i * C;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c)
      o[c] = (xi[c] - m) * s * w[c] + b[c];
    mean[i] = m;
    rstd[i] = s;
  }
}

/// Overwrites dx (N x C), dw (C) and db (C).
FSDP_CPU_KERNEL void layerNormBackward(float *dx, float *dw, float *db,
                                       const float *dout, const float *x,
                                       const float *w, const float *mean,
                                       const float *rstd, int64_t N,
                                       int64_t C) {
  // dx = rstd (dnorm - mean(dnorm) - norm mean(dnorm norm)), with
  // norm = (x - mean) rstd and dnorm = w dout.
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < N; ++i) {
    const float *xi = x + i * C, *di = dout + i * C;
    const float m = mean[i], s = rstd[i];
    double sumD = 0.0, sumDN = 0.0;
#pragma omp simd reduction(+ : sumD, sumDN)
    for (int64_t c = 0; c < C; ++c) {
      const float norm = (xi[c] - m) * s;
      const float dnorm = w[c] * di[c];
      sumD += dnorm;
      sumDN += double(dnorm * norm);
    }
    const float meanD = float(sumD / double(C));
    const float meanDN = float(sumDN / double(C));
    float *o = dx + i * C;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) {
      const float norm = (xi[c] - m) * s;
      const float dnorm = w[c] * di[c];
      o[c] = (dnorm - meanD - norm * meanDN) * s;
    }
  }

  const int64_t width = columnBlock(C);
  const int64_t blocks = (C + width - 1) / width;
#pragma omp parallel for schedule(static)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const int64_t c0 = blk * width, n = std::min(width, C - c0);
    double accW[kMaxColBlock] = {}, accB[kMaxColBlock] = {};
    for (int64_t i = 0; i < N; ++i) {
      const float *xi = x + i * C + c0, *di = dout + i * C + c0;
      const float m = mean[i], s = rstd[i];
#pragma omp simd
      for (int64_t c = 0; c < n; ++c) {
        accW[c] += double(di[c] * ((xi[c] - m) * s));
        accB[c] += di[c];
      }
    }
    for (int64_t c = 0; c < n; ++c) {
      dw[c0 + c] = float(accW[c]);
      db[c0 + c] = float(accB[c]);
    }
  }
}

/// out = x * rstd * w over rows of C, rstd = 1 / sqrt(mean(x^2) + eps)
/// saved (N) for the backward.
FSDP_CPU_KERNEL void rmsNormForward(float *out, float *rstd, const float *x,
                                    const float *w, int64_t N, int64_t C,
                                    float eps) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < N; ++i)
    rstd[i] = rmsNormRow(out + i * C, x + i * C, w, C, eps);
}

/// Overwrites dx (N x C) and dw (C): with n = x rstd and dn = w dout,
/// dx = rstd (dn - n mean(dn n)) per row, dw = sum over rows of dout n.
FSDP_CPU_KERNEL void rmsNormBackward(float *dx, float *dw, const float *dout,
                                     const float *x, const float *w,
                                     const float *rstd, int64_t N, int64_t C) {
  // dx = rstd (dn - n mean(dn n)), n = x rstd, dn = w dout: layer norm's
  // formula without the mean terms.
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < N; ++i)
    rmsNormRowDx(dx + i * C, x + i * C, dout + i * C, w, rstd[i], C);

  const int64_t width = columnBlock(C);
  const int64_t blocks = (C + width - 1) / width;
#pragma omp parallel for schedule(static)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const int64_t c0 = blk * width, n = std::min(width, C - c0);
    double acc[kMaxColBlock] = {};
    for (int64_t i = 0; i < N; ++i) {
      const float *xi = x + i * C + c0, *di = dout + i * C + c0;
      const float s = rstd[i];
#pragma omp simd
      for (int64_t c = 0; c < n; ++c)
        acc[c] += double(di[c] * (xi[c] * s));
    }
    for (int64_t c = 0; c < n; ++c)
      dw[c0 + c] = float(acc[c]);
  }
}

/// Qwen3's q_norm and k_norm: qkv is B x T x (H + 2 KV) hs; each of a row's
/// H query heads and KV key heads (the first H + KV slices of hs) becomes
/// x rstd w with rstd = 1 / sqrt(mean(x^2) + eps) over the head, w = qw on
/// the query heads and kw on the key heads; the KV value heads are copied.
/// rstd (B x T x (H + KV)) is saved for the backward.
FSDP_CPU_KERNEL void qkNormForward(float *out, float *rstd, const float *qkv,
                                   const float *qw, const float *kw, int64_t B,
                                   int64_t T, int64_t H, int64_t KV, int64_t hs,
                                   float eps) {
  const int64_t QK = H + KV, W = (H + 2 * KV) * hs, rows = B * T;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float *x = qkv + r * W;
    float *o = out + r * W;
    for (int64_t h = 0; h < QK; ++h)
      rstd[r * QK + h] =
          rmsNormRow(o + h * hs, x + h * hs, h < H ? qw : kw, hs, eps);
    std::memcpy(o + QK * hs, x + QK * hs, size_t(KV * hs) * sizeof(float));
  }
}

/// The gradient of qkNormForward: rmsNormBackward's per head (with
/// n = x rstd and dn = w dout, dx = rstd (dn - n mean(dn n))), the values'
/// gradient copied; dqw (dkw) sums dout n over every query (key) head of
/// every row, each column in row order by one thread (any thread count
/// gives the same sums).
FSDP_CPU_KERNEL void qkNormBackward(float *dqkv, float *dqw, float *dkw,
                                    const float *dout, const float *qkv,
                                    const float *qw, const float *kw,
                                    const float *rstd, int64_t B, int64_t T,
                                    int64_t H, int64_t KV, int64_t hs) {
  const int64_t QK = H + KV, W = (H + 2 * KV) * hs, rows = B * T;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float *x = qkv + r * W, *d = dout + r * W;
    float *o = dqkv + r * W;
    for (int64_t h = 0; h < QK; ++h)
      rmsNormRowDx(o + h * hs, x + h * hs, d + h * hs, h < H ? qw : kw,
                   rstd[r * QK + h], hs);
    std::memcpy(o + QK * hs, d + QK * hs, size_t(KV * hs) * sizeof(float));
  }

  // Column blocks of each gain: block b < qBlocks is q's, the rest k's.
  const int64_t width = std::min(kMaxColBlock, hs);
  const int64_t perGain = (hs + width - 1) / width;
#pragma omp parallel for schedule(static)
  for (int64_t blk = 0; blk < 2 * perGain; ++blk) {
    const bool isQ = blk < perGain;
    const int64_t c0 = (blk % perGain) * width, n = std::min(width, hs - c0);
    const int64_t h0 = isQ ? 0 : H, h1 = isQ ? H : QK;
    double acc[kMaxColBlock] = {};
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t h = h0; h < h1; ++h) {
        const float *xh = qkv + r * W + h * hs + c0;
        const float *dh = dout + r * W + h * hs + c0;
        const float s = rstd[r * QK + h];
#pragma omp simd
        for (int64_t c = 0; c < n; ++c)
          acc[c] += double(dh[c] * (xh[c] * s));
      }
    float *dw = isQ ? dqw : dkw;
    for (int64_t c = 0; c < n; ++c)
      dw[c0 + c] = float(acc[c]);
  }
}

} // namespace fsdp::rt::cpu
