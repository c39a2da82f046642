//===- Attention.cpp - causal multi-head self-attention -------------------===//
//
// The four kinds of products (q k^T, probs v and the backward's dO v^T,
// dS k, dS^T q, P^T dO) are BLAS GEMMs, one set per (batch, head), reading
// q, k, v and writing dq, dk, dv in place in the B x T x (C + 2 KV hs)
// layout through row strides (lda = C + 2 KV hs, 3C without grouped-query
// attention); the softmax and its backward are our own loops, parallel over
// all B x NH x T rows. Query head h reads kv head h / (NH / KV); the
// backward's dk and dv of a kv head are the first head's products (beta =
// 0) plus the other heads' of its group (beta = 1), in head order.
//
// Causality halves the useful work: row i only sees columns j <= i. The
// products therefore run on row blocks of kCausalBlock rows, and each block
// only multiplies against the columns up to its own end, skipping the
// blocks above the diagonal (37.5% of the flops at T = 1024; on one thread
// forward and backward ran 1.6x faster than with full T x T products).
// Smaller blocks would skip more but make each GEMM smaller; for T up to
// kCausalBlock there is one block and the GEMMs are the plain T x T ones.
//
// A sliding window of W keys (query i sees keys i - W < j <= i; W = 0:
// none) only masks: the products stay the causal ones and the softmax
// loops write zeros before the window, so this form costs what causal
// attention costs whatever the window (BlockedAttention.cpp skips the
// blocks outside it).
//
// GEMMs are issued one after another, each threaded by the BLAS library,
// with the row loops in one OpenMP region between them. Running the heads'
// GEMMs concurrently instead, one thread each, would suit short sequences
// better, but needs a BLAS that runs single-threaded inside an OpenMP
// region, which Blas does not promise.
//
//===----------------------------------------------------------------------===//

#include "Blas.h"
#include "Kernels.h"
#include "VectorMath.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace fsdp::rt::cpu {
namespace {

constexpr int64_t kCausalBlock = 256;

/// The end (exclusive) of the row block that holds row i.
inline int64_t blockEnd(int64_t i, int64_t T) {
  return std::min(T, (i / kCausalBlock + 1) * kCausalBlock);
}

} // namespace

/// Causal self-attention. qkv is B x T x (C + 2 KV hs) with q (NH heads of
/// size hs = C / NH), k and v (KV heads each) side by side: 3C when
/// KV = NH. Query head h reads kv head h / (NH / KV) (grouped-query
/// attention; KV divides NH). probs (B x NH x T x T) receives softmax(q
/// k^T / sqrt(hs)) with zeros above the diagonal and, with a sliding
/// window W > 0, before it (row i over keys i - W < j <= i only); out
/// (B x T x C) = probs v, heads concatenated.
FSDP_CPU_KERNEL void attentionForward(const Blas &blas, float *out,
                                      float *probs, const float *qkv, int64_t B,
                                      int64_t T, int64_t C, int64_t NH,
                                      int64_t KV, int64_t W) {
  const QkvLayout L(C, NH, KV);
  const int64_t hs = L.hs, ld = L.ld;
  const float scale = 1.0f / std::sqrt(float(hs));

  // Scores S = scale q k^T into probs, for each row block only up to the
  // block's last row (the rest of its rows is never read).
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < NH; ++h) {
      const float *q = qkv + b * T * ld + h * hs;
      const float *k = qkv + b * T * ld + L.kOffset(h);
      float *P = probs + (b * NH + h) * T * T;
      for (int64_t i0 = 0; i0 < T; i0 += kCausalBlock) {
        const int64_t i1 = blockEnd(i0, T);
        blas.sgemm(false, true, i1 - i0, i1, hs, scale, q + i0 * ld, ld, k, ld,
                   0.0f, P + i0 * T, T);
      }
    }
  }

  // Softmax over lo <= j <= i (lo = 0 without a window), zeros elsewhere.
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < B * NH * T; ++r) {
    float *row = probs + r * T;
    const int64_t n = r % T + 1, lo = windowStart(r % T, W);
    const float m = rowMax(row + lo, n - lo);
    double sum = 0.0;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = lo; j < n; ++j) {
      const float e = expApprox(row[j] - m);
      row[j] = e;
      sum += e;
    }
    const float inv = float(1.0 / sum);
#pragma omp simd
    for (int64_t j = lo; j < n; ++j)
      row[j] *= inv;
    std::memset(row, 0, sizeof(float) * lo);
    std::memset(row + n, 0, sizeof(float) * (T - n));
  }

  // out = P v, heads side by side.
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < NH; ++h) {
      const float *v = qkv + b * T * ld + L.vOffset(h);
      const float *P = probs + (b * NH + h) * T * T;
      float *o = out + b * T * C + h * hs;
      for (int64_t i0 = 0; i0 < T; i0 += kCausalBlock) {
        const int64_t i1 = blockEnd(i0, T);
        blas.sgemm(false, false, i1 - i0, hs, i1, 1.0f, P + i0 * T, T, v, ld,
                   0.0f, o + i0 * C, C);
      }
    }
  }
}

/// dqkv (qkv's layout) from dout (B x T x C), qkv and the saved probs; a
/// kv head's dk and dv sum over the NH / KV query heads it serves; W is
/// the forward's window (0: none).
/// `scratch` holds B x NH x T x T floats for the gradient of the scores.
FSDP_CPU_KERNEL void attentionBackward(const Blas &blas, float *dqkv,
                                       float *scratch, const float *dout,
                                       const float *qkv, const float *probs,
                                       int64_t B, int64_t T, int64_t C,
                                       int64_t NH, int64_t KV, int64_t W) {
  const QkvLayout L(C, NH, KV);
  const int64_t hs = L.hs, ld = L.ld;
  const float scale = 1.0f / std::sqrt(float(hs));

  // dP = dO v^T into scratch, row blocks as in the forward.
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < NH; ++h) {
      const float *v = qkv + b * T * ld + L.vOffset(h);
      const float *dO = dout + b * T * C + h * hs;
      float *dS = scratch + (b * NH + h) * T * T;
      for (int64_t i0 = 0; i0 < T; i0 += kCausalBlock) {
        const int64_t i1 = blockEnd(i0, T);
        blas.sgemm(false, true, i1 - i0, i1, hs, 1.0f, dO + i0 * C, C, v, ld,
                   0.0f, dS + i0 * T, T);
      }
    }
  }

  // Softmax backward in place: dS = P (dP - rowsum(dP P)). Above the
  // diagonal, up to the end of the row's block, and before the window dS
  // must be 0: the GEMMs below read those entries (past the block end
  // nothing reads them).
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < B * NH * T; ++r) {
    const float *p = probs + r * T;
    float *d = scratch + r * T;
    const int64_t i = r % T, n = i + 1, lo = windowStart(i, W);
    double dot = 0.0;
#pragma omp simd reduction(+ : dot)
    for (int64_t j = lo; j < n; ++j)
      dot += double(d[j] * p[j]);
    const float dotf = float(dot);
#pragma omp simd
    for (int64_t j = lo; j < n; ++j)
      d[j] = p[j] * (d[j] - dotf);
    std::memset(d, 0, sizeof(float) * lo);
    std::memset(d + n, 0, sizeof(float) * (blockEnd(i, T) - n));
  }

  // dq = scale dS k, dk = scale dS^T q, dv = P^T dO. Every row of every
  // head's dq is written once with beta = 0; every row of a kv head's dk
  // and dv once with beta = 0 by the group's first head, then added to by
  // the others: all of dqkv is overwritten.
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < NH; ++h) {
      const float *q = qkv + b * T * ld + h * hs;
      const float *k = qkv + b * T * ld + L.kOffset(h);
      const float *dO = dout + b * T * C + h * hs;
      const float *P = probs + (b * NH + h) * T * T;
      const float *dS = scratch + (b * NH + h) * T * T;
      float *dq = dqkv + b * T * ld + h * hs;
      float *dk = dqkv + b * T * ld + L.kOffset(h);
      float *dv = dqkv + b * T * ld + L.vOffset(h);
      const float beta = h % L.group == 0 ? 0.0f : 1.0f;
      for (int64_t i0 = 0; i0 < T; i0 += kCausalBlock) {
        const int64_t i1 = blockEnd(i0, T);
        // Rows i0..i1 of dq see columns 0..i1 of dS.
        blas.sgemm(false, false, i1 - i0, hs, i1, scale, dS + i0 * T, T, k, ld,
                   0.0f, dq + i0 * ld, ld);
        // Rows i0..i1 of dk and dv (columns of dS and P) see the rows
        // i0..T below the diagonal.
        blas.sgemm(true, false, i1 - i0, hs, T - i0, scale, dS + i0 * T + i0, T,
                   q + i0 * ld, ld, beta, dk + i0 * ld, ld);
        blas.sgemm(true, false, i1 - i0, hs, T - i0, 1.0f, P + i0 * T + i0, T,
                   dO + i0 * C, C, beta, dv + i0 * ld, ld);
      }
    }
  }
}

} // namespace fsdp::rt::cpu
