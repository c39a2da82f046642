//===- BlockedAttention.cpp - causal attention without the T x T matrix ---===//
//
// The memory-efficient form of Attention.cpp's kernels (FlashAttention-2's
// algorithm): the forward saves one log-sum-exp per query row instead of
// the B x NH x T x T probabilities, and the backward recomputes each block
// of probabilities from q, k and that log-sum-exp.
//
// The products are our own loops, not BLAS GEMMs (blas is taken for the
// kernel set's common signature): a block is at most
// kAttentionBlock x hs, too small for a GEMM call to pay off, and the
// blocks run concurrently inside one OpenMP region, where Blas does not
// promise a single-threaded GEMM (see Attention.cpp).
//
// Every output row is owned by exactly one (b, h, block) task and summed
// in a fixed order, so the results do not depend on the thread count or
// the schedule; that is why the backward makes two passes (dk and dv per
// key block, then dq per query block) instead of FlashAttention-2's one
// pass with atomic adds into dq. The accumulators are the output rows
// themselves, so beyond a few kAttentionBlock-float arrays on each
// thread's stack nothing is allocated.
//
//===----------------------------------------------------------------------===//

#include "Kernels.h"
#include "VectorMath.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace fsdp::rt::cpu {
namespace {

constexpr int64_t kBlock = kAttentionBlock;

inline float dotf(const float *a, const float *b, int64_t n) {
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (int64_t d = 0; d < n; ++d)
    s += a[d] * b[d];
  return s;
}

/// Head h of batch b in the qkv / out layouts, as Attention.cpp splits them.
struct Head {
  const float *q, *k, *v; // row stride ld = 3C
  int64_t ld;
  Head(const float *qkv, int64_t b, int64_t h, int64_t T, int64_t C, int64_t hs)
      : q(qkv + b * T * 3 * C + h * hs), k(q + C), v(q + 2 * C), ld(3 * C) {}
};

/// The forward's online softmax state of one query row.
struct RowState {
  float m = -std::numeric_limits<float>::infinity(); // running max
  double l = 0.0; // running sum of exp(s - m)
};

/// Folds keys j0..j0+n into query row q's state and its accumulator o
/// (hs floats, sum_j exp(s_j - m) v_j): new max, rescale, add the block.
inline void forwardRowBlock(const Head &hd, const float *q, int64_t j0,
                            int64_t n, int64_t hs, float scale, RowState &st,
                            float *o, float *s) {
  for (int64_t c = 0; c < n; ++c)
    s[c] = scale * dotf(q, hd.k + (j0 + c) * hd.ld, hs);
  const float mNew = std::max(st.m, rowMax(s, n));
  // exp(-inf) = 0 on the first block, where o and l are still 0.
  const float alpha = float(std::exp(double(st.m) - double(mNew)));
  double sum = 0.0;
#pragma omp simd reduction(+ : sum)
  for (int64_t c = 0; c < n; ++c) {
    s[c] = expApprox(s[c] - mNew);
    sum += s[c];
  }
  st.l = st.l * alpha + sum;
  st.m = mNew;
#pragma omp simd
  for (int64_t d = 0; d < hs; ++d)
    o[d] *= alpha;
  for (int64_t c = 0; c < n; ++c) {
    const float *v = hd.v + (j0 + c) * hd.ld, p = s[c];
#pragma omp simd
    for (int64_t d = 0; d < hs; ++d)
      o[d] += p * v[d];
  }
}

/// Rows i0..i1 of one head: keys block by block, and for each key block
/// every row of the query block, so that the block's k and v rows stay in
/// cache while they are used.
void forwardQueryBlock(const Head &hd, float *o, float *lse, int64_t i0,
                       int64_t i1, int64_t C, int64_t hs, float scale) {
  RowState st[kBlock];
  float s[kBlock];
  for (int64_t i = i0; i < i1; ++i)
    std::memset(o + i * C, 0, sizeof(float) * hs);
  for (int64_t j0 = 0; j0 < i1; j0 += kBlock) {
    const int64_t j1 = std::min(j0 + kBlock, i1);
    for (int64_t i = std::max(i0, j0); i < i1; ++i)
      forwardRowBlock(hd, hd.q + i * hd.ld, j0, std::min(j1, i + 1) - j0, hs,
                      scale, st[i - i0], o + i * C, s);
  }
  for (int64_t i = i0; i < i1; ++i) {
    const RowState &r = st[i - i0];
    const float inv = float(1.0 / r.l);
#pragma omp simd
    for (int64_t d = 0; d < hs; ++d)
      o[i * C + d] *= inv;
    lse[i] = r.m + float(std::log(r.l));
  }
}

/// Probabilities of query row i against keys j0..j0+n, from the saved
/// log-sum-exp: p_j = exp(scale q_i k_j - lse_i).
inline void recomputeProbs(const Head &hd, int64_t i, int64_t j0, int64_t n,
                           int64_t hs, float scale, float lse, float *p) {
  const float *q = hd.q + i * hd.ld;
  for (int64_t c = 0; c < n; ++c)
    p[c] = scale * dotf(q, hd.k + (j0 + c) * hd.ld, hs);
#pragma omp simd
  for (int64_t c = 0; c < n; ++c)
    p[c] = expApprox(p[c] - lse);
}

/// D_i = rowsum(dO_i * O_i), which equals rowsum(dP_i * P_i) (the
/// softmax backward's dot) without the row of dP.
inline float rowDot(const float *dO, const float *o, int64_t hs) {
  double s = 0.0;
#pragma omp simd reduction(+ : s)
  for (int64_t d = 0; d < hs; ++d)
    s += double(dO[d] * o[d]);
  return float(s);
}

/// The operands of one head's backward.
struct BackwardHead {
  Head hd;
  const float *dO, *o, *lse; // dO and o: row stride C; lse: T floats
  float *dq, *dk, *dv;       // row stride ld
  int64_t C, hs;
  float scale;
};

/// dk, dv of keys j0..j1 (zeroed first): every query row i >= j0 that sees
/// them adds dv_j += p_ij dO_i and dk_j += scale dS_ij q_i, with
/// dS_ij = p_ij (dO_i . v_j - D_i).
void keyBlockBackward(const BackwardHead &g, int64_t j0, int64_t j1,
                      int64_t T) {
  const int64_t hs = g.hs, ld = g.hd.ld;
  float p[kBlock];
  for (int64_t j = j0; j < j1; ++j) {
    std::memset(g.dk + j * ld, 0, sizeof(float) * hs);
    std::memset(g.dv + j * ld, 0, sizeof(float) * hs);
  }
  for (int64_t i = j0; i < T; ++i) {
    const int64_t n = std::min(j1, i + 1) - j0;
    const float *dO = g.dO + i * g.C, *q = g.hd.q + i * ld;
    const float D = rowDot(dO, g.o + i * g.C, hs);
    recomputeProbs(g.hd, i, j0, n, hs, g.scale, g.lse[i], p);
    for (int64_t c = 0; c < n; ++c) {
      const int64_t j = j0 + c;
      const float dS = p[c] * (dotf(dO, g.hd.v + j * ld, hs) - D);
      const float pc = p[c], ds = g.scale * dS;
      float *dk = g.dk + j * ld, *dv = g.dv + j * ld;
#pragma omp simd
      for (int64_t d = 0; d < hs; ++d) {
        dv[d] += pc * dO[d];
        dk[d] += ds * q[d];
      }
    }
  }
}

/// dq of query rows i0..i1 (zeroed first): dq_i = scale sum_j dS_ij k_j,
/// key block by key block as in the forward.
void queryBlockBackward(const BackwardHead &g, int64_t i0, int64_t i1) {
  const int64_t hs = g.hs, ld = g.hd.ld;
  float p[kBlock], D[kBlock];
  for (int64_t i = i0; i < i1; ++i) {
    std::memset(g.dq + i * ld, 0, sizeof(float) * hs);
    D[i - i0] = rowDot(g.dO + i * g.C, g.o + i * g.C, hs);
  }
  for (int64_t j0 = 0; j0 < i1; j0 += kBlock) {
    const int64_t j1 = std::min(j0 + kBlock, i1);
    for (int64_t i = std::max(i0, j0); i < i1; ++i) {
      const int64_t n = std::min(j1, i + 1) - j0;
      const float *dO = g.dO + i * g.C;
      float *dq = g.dq + i * ld;
      recomputeProbs(g.hd, i, j0, n, hs, g.scale, g.lse[i], p);
      for (int64_t c = 0; c < n; ++c) {
        const float *k = g.hd.k + (j0 + c) * ld, *v = g.hd.v + (j0 + c) * ld;
        const float ds = g.scale * p[c] * (dotf(dO, v, hs) - D[i - i0]);
#pragma omp simd
        for (int64_t d = 0; d < hs; ++d)
          dq[d] += ds * k[d];
      }
    }
  }
}

BackwardHead backwardHead(float *dqkv, const float *dout, const float *qkv,
                          const float *out, const float *lse, int64_t b,
                          int64_t h, int64_t T, int64_t C, int64_t NH) {
  const int64_t hs = C / NH, ld = 3 * C;
  float *dq = dqkv + b * T * ld + h * hs;
  return BackwardHead{Head(qkv, b, h, T, C, hs),
                      dout + b * T * C + h * hs,
                      out + b * T * C + h * hs,
                      lse + (b * NH + h) * T,
                      dq,
                      dq + C,
                      dq + 2 * C,
                      C,
                      hs,
                      1.0f / std::sqrt(float(hs))};
}

} // namespace

// Tasks are (b, h, block); later query blocks see more keys (and earlier
// key blocks more queries), so the schedule is dynamic. Each task writes
// only its own rows, so the order tasks run in does not change any bit.

FSDP_CPU_KERNEL void blockedAttentionForward(const Blas &blas, float *out,
                                             float *lse, const float *qkv,
                                             int64_t B, int64_t T, int64_t C,
                                             int64_t NH) {
  const int64_t hs = C / NH, nb = (T + kBlock - 1) / kBlock;
  const float scale = 1.0f / std::sqrt(float(hs));
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t task = 0; task < B * NH * nb; ++task) {
    const int64_t bh = task / nb, i0 = (nb - 1 - task % nb) * kBlock;
    const int64_t b = bh / NH, h = bh % NH;
    // Longest blocks (the last rows) first, for the dynamic schedule.
    forwardQueryBlock(Head(qkv, b, h, T, C, hs), out + b * T * C + h * hs,
                      lse + bh * T, i0, std::min(i0 + kBlock, T), C, hs, scale);
  }
}

FSDP_CPU_KERNEL void
blockedAttentionBackward(const Blas &blas, float *dqkv, const float *dout,
                         const float *qkv, const float *out, const float *lse,
                         int64_t B, int64_t T, int64_t C, int64_t NH) {
  const int64_t nb = (T + kBlock - 1) / kBlock;
#pragma omp parallel
  {
    // Key blocks from the first (most query rows) on, then query blocks
    // from the last (most keys) on: longest tasks first in both passes.
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < B * NH * nb; ++task) {
      const int64_t bh = task / nb, j0 = (task % nb) * kBlock;
      const BackwardHead g =
          backwardHead(dqkv, dout, qkv, out, lse, bh / NH, bh % NH, T, C, NH);
      keyBlockBackward(g, j0, std::min(j0 + kBlock, T), T);
    }
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < B * NH * nb; ++task) {
      const int64_t bh = task / nb, i0 = (nb - 1 - task % nb) * kBlock;
      const BackwardHead g =
          backwardHead(dqkv, dout, qkv, out, lse, bh / NH, bh % NH, T, C, NH);
      queryBlockBackward(g, i0, std::min(i0 + kBlock, T));
    }
  }
}

} // namespace fsdp::rt::cpu
