//===- BlockedAttention.cpp - causal attention without the T x T matrix ---===//
//
// The memory-efficient form of Attention.cpp's kernels (FlashAttention-2's
// algorithm): the forward saves one log-sum-exp per query row instead of
// the B x NH x T x T probabilities, and the backward recomputes each block
// of probabilities from q, k and that log-sum-exp.
//
// Speed. The work is five products per block pair in the backward and two
// in the forward, on blocks of kAttentionBlock (64) keys: about as many
// flops as the materialized kernels' GEMMs (whose 256-row causal blocks
// compute 25% more than the triangle at T = 1024), so the blocked form is as
// fast as its products. They are register tiles written with GCC's generic
// vectors (no intrinsics; each target clone lowers them to its own width): 4
// rows x 64 columns, 16 AVX-512 accumulators. Scores S = q k^T (and dP = dO
// v^T) read k (v) of the key block packed transposed into an hs x 64 panel on
// the stack, 4 query rows x 64 keys per step; the accumulated products (out +=
// P v, dq += dS k, dv += P^T dO, dk += dS^T q) keep 4 output rows x 64 columns
// in registers and read the other operand's rows in place. The softmax parts
// are omp simd loops over a row's 64 columns (expApprox; masks are integer
// selects). Not BLAS: the blocks are small (64 x 64 x hs) and run inside one
// OpenMP region, where Blas does not promise a single-threaded GEMM (see
// Attention.cpp).
//
// Determinism. Every output row is owned by exactly one task and summed in
// a fixed order, so the results do not depend on the thread count or the
// schedule. Forward tasks are (b, h, query block). The backward is
// FlashAttention-2's single pass per head: for each key block, for each
// query block at or below it, the key block's dv and dk and the query
// rows' dq accumulate. A task is a whole head, so dq needs no atomics and
// sums its key blocks in order; the price is parallelism: B x NH tasks,
// which balance on few cores but leave cores idle when B x NH is small
// against the thread count. With grouped-query attention (KV < NH kv
// heads) a task is a whole group: its query heads run one after another,
// in head order, the first one's dk and dv overwriting and the others'
// adding, so the group's sum has one owner too (B x KV tasks).
//
// Sliding window. With a window of W keys (query i sees keys
// i - W < j <= i; W = 0: none) the forward's query block starts at the key
// block that holds its first row's first key, and the backward's key
// block stops at the query block that holds its last key's last query:
// key blocks wholly outside a query block's window, and query blocks
// wholly outside a key block's, are never visited, so the work is about
// T (W + 2 kBlock) pairs instead of T^2 / 2. Inside a visited block the
// keys outside a row's window are masked like those above the diagonal.
// W = 0, and any W > T, visit and mask exactly what the causal form does:
// the same bits.
//
// Memory. Nothing is allocated; the accumulators are the output rows
// themselves. Per thread the stack holds the key block's panels and the P
// and dS blocks of kQueryBlock query rows: 17 KiB (forward) and 48 KiB
// (backward) for hs <= 64, 33 and 80 KiB for hs <= 128. Wider heads take
// the scalar path at the end of this file (dot products, and two backward
// passes: dk and dv per key block, then dq per query block).
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

// The tiled path is inlined into the kernels, so that it is compiled for
// each of their target clones (a function they call is compiled once, for
// baseline x86-64).
#if defined(__GNUC__)
#define FSDP_INLINE inline __attribute__((always_inline))
#else
#define FSDP_INLINE inline
#endif

/// Query head h of batch b and its kv head in the qkv layout (QkvLayout).
struct Head {
  const float *q, *k, *v; // row stride ld = C + 2 KV hs
  int64_t ld;
  Head(const float *qkv, int64_t b, int64_t h, int64_t T, const QkvLayout &L)
      : q(qkv + b * T * L.ld + h * L.hs), k(qkv + b * T * L.ld + L.kOffset(h)),
        v(qkv + b * T * L.ld + L.vOffset(h)), ld(L.ld) {}
};

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

BackwardHead backwardHead(float *dqkv, const float *dout, const float *qkv,
                          const float *out, const float *lse, int64_t b,
                          int64_t h, int64_t T, int64_t NH,
                          const QkvLayout &L) {
  const int64_t hs = L.hs, C = L.C;
  float *row = dqkv + b * T * L.ld;
  return BackwardHead{Head(qkv, b, h, T, L),
                      dout + b * T * C + h * hs,
                      out + b * T * C + h * hs,
                      lse + (b * NH + h) * T,
                      row + h * hs,
                      row + L.kOffset(h),
                      row + L.vOffset(h),
                      C,
                      hs,
                      1.0f / std::sqrt(float(hs))};
}

//===----------------------------------------------------------------------===//
// Register tiles
//===----------------------------------------------------------------------===//

// GCC's generic vectors (no intrinsics): each target clone of a kernel
// lowers them to its own width, one zmm on x86-64-v4, two ymm on v3.
// Every function that takes or returns one is inlined into the kernels,
// so GCC's note that their ABI differs without AVX-512 does not apply.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif
typedef float Vec __attribute__((vector_size(64)));
constexpr int64_t kLanes = 16, kVecs = kBlock / kLanes;
/// Rows of a register tile: kRows x kBlock scores are 16 accumulators,
/// as are kRows x 64 columns of an accumulated product.
constexpr int kRows = 4;
/// Query rows per block of the backward (its P and dS blocks).
constexpr int64_t kQueryBlock = 32;
/// Largest head size of the tiled path (packed panels are hs x kBlock).
constexpr int64_t kMaxTiledHs = 128;

inline Vec loadVec(const float *p) {
  Vec v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline void storeVec(float *p, Vec v) { std::memcpy(p, &v, sizeof v); }

/// Rows 0..n of x (stride ld, hs floats each) transposed into panel
/// (hs x kBlock, panel[d * kBlock + c] = x[c][d]), zero past n.
FSDP_INLINE void packPanel(float *panel, const float *x, int64_t ld, int64_t n,
                           int64_t hs) {
  for (int64_t c = 0; c < kBlock; ++c) {
    const float *row = x + c * ld;
    for (int64_t d = 0; d < hs; ++d)
      panel[d * kBlock + c] = c < n ? row[d] : 0.0f;
  }
}

/// out[r][c] = sum_d a[r][d] panel[d][c] for kRows rows and kBlock
/// columns, each summed over d in order (one multiply-add chain).
FSDP_INLINE void tileProducts(const float *const a[kRows], const float *panel,
                              int64_t hs, float (*out)[kBlock]) {
  Vec acc[kRows][kVecs] = {};
  for (int64_t d = 0; d < hs; ++d) {
    Vec p[kVecs];
#pragma GCC unroll 4
    for (int v = 0; v < kVecs; ++v)
      p[v] = loadVec(panel + d * kBlock + v * kLanes);
#pragma GCC unroll 4
    for (int r = 0; r < kRows; ++r) {
      const float x = a[r][d];
#pragma GCC unroll 4
      for (int v = 0; v < kVecs; ++v)
        acc[r][v] += x * p[v];
    }
  }
  for (int r = 0; r < kRows; ++r)
    for (int v = 0; v < kVecs; ++v)
      storeVec(out[r] + v * kLanes, acc[r][v]);
}

/// The coefficients w[r][c] = w[r * wr + c * wc] of an accumulated product.
struct Coeffs {
  const float *w;
  int64_t wr, wc;
};

/// Columns d0..d0 + V x kLanes of
///   y[r] = alpha[r] y[r] + sum_{c<n} w[r][c] m[c],
/// with m's rows ld apart, summed over c in order.
template <int V>
FSDP_INLINE void accumulateChunk(float *const y[kRows], const float *alpha,
                                 Coeffs w, const float *m, int64_t ld,
                                 int64_t n, int64_t d0) {
  Vec acc[kRows][V];
  for (int r = 0; r < kRows; ++r)
    for (int v = 0; v < V; ++v)
      acc[r][v] = loadVec(y[r] + d0 + v * kLanes) * alpha[r];
  for (int64_t c = 0; c < n; ++c) {
    Vec x[V];
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v)
      x[v] = loadVec(m + c * ld + d0 + v * kLanes);
#pragma GCC unroll 4
    for (int r = 0; r < kRows; ++r) {
      const float s = w.w[r * w.wr + c * w.wc];
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v)
        acc[r][v] += s * x[v];
    }
  }
  for (int r = 0; r < kRows; ++r)
    for (int v = 0; v < V; ++v)
      storeVec(y[r] + d0 + v * kLanes, acc[r][v]);
}

/// Columns d0..hs (fewer than kLanes) of accumulateChunk's product, one
/// at a time. Not vectorised and not inlined: GCC would vectorise the sum
/// over c as an in-order reduction without the multiply-adds' fusion, for
/// the first multiple of the vector width of the n terms only, so a row's
/// bits would depend on n, which depends on T.
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((noinline, optimize("no-tree-vectorize")))
#endif
void accumulateTail(float *const y[kRows], const float *alpha, Coeffs w,
                    const float *m, int64_t ld, int64_t n, int64_t d0,
                    int64_t hs) {
  for (; d0 < hs; ++d0)
    for (int r = 0; r < kRows; ++r) {
      float acc = y[r][d0] * alpha[r];
      for (int64_t c = 0; c < n; ++c)
        acc += w.w[r * w.wr + c * w.wc] * m[c * ld + d0];
      y[r][d0] = acc;
    }
}

/// accumulateChunk over all hs columns: 64 at a time, then 16, then one.
FSDP_INLINE void tileAccumulate(float *const y[kRows], const float *alpha,
                                Coeffs w, const float *m, int64_t ld, int64_t n,
                                int64_t hs) {
  int64_t d0 = 0;
  for (; d0 + 4 * kLanes <= hs; d0 += 4 * kLanes)
    accumulateChunk<4>(y, alpha, w, m, ld, n, d0);
  for (; d0 + kLanes <= hs; d0 += kLanes)
    accumulateChunk<1>(y, alpha, w, m, ld, n, d0);
  if (d0 < hs)
    accumulateTail(y, alpha, w, m, ld, n, d0, hs);
}

constexpr float kOnes[kRows] = {1.0f, 1.0f, 1.0f, 1.0f};

/// x with its bits cleared unless `keep` (a float select that vectorises
/// under -ftrapping-math).
inline float keepIf(float x, bool keep) {
  return bitsFloat(floatBits(x) & -int32_t(keep));
}

//===----------------------------------------------------------------------===//
// Tiled forward
//===----------------------------------------------------------------------===//

/// The online softmax state of one query row, in both forwards.
struct RowState {
  float m = -std::numeric_limits<float>::infinity(); // running max
  double l = 0.0; // running sum of exp(s - m)
};

/// The forward's last step for rows i0..i1 of a head: the accumulated
/// rows divided by their sums, and each row's log-sum-exp.
FSDP_INLINE void finishRows(const RowState *st, float *o, float *lse,
                            int64_t i0, int64_t i1, int64_t C, int64_t hs) {
  for (int64_t i = i0; i < i1; ++i) {
    const RowState &r = st[i - i0];
    const float inv = float(1.0 / r.l);
#pragma omp simd
    for (int64_t d = 0; d < hs; ++d)
      o[i * C + d] *= inv;
    lse[i] = r.m + float(std::log(r.l));
  }
}

/// Scales row s (scores of keys j0 + c), masks the keys outside the row's
/// window (c < low, before it; c > last, past the diagonal), and folds it
/// into st: s becomes exp(s - m'), masked entries exactly 0. Returns
/// alpha = exp(m - m'), 0 on the row's first block (`first`: the block
/// that holds its first key). A block wholly before the window
/// (low >= kBlock) leaves st alone: s all 0, alpha 1.
FSDP_INLINE float foldRow(float *s, int32_t low, int32_t last, float scale,
                          bool first, RowState &st) {
  if (low >= int32_t(kBlock)) {
    std::memset(s, 0, sizeof(float) * kBlock);
    return 1.0f;
  }
  int32_t key = std::numeric_limits<int32_t>::min();
#pragma omp simd reduction(max : key)
  for (int32_t c = 0; c < int32_t(kBlock); ++c) {
    s[c] *= scale;
    const int32_t k = orderedKey(floatBits(s[c]));
    key = std::max(
        key, c >= low && c <= last ? k : std::numeric_limits<int32_t>::min());
  }
  const float blockMax = bitsFloat(orderedKey(key));
  const float mNew = first ? blockMax : std::max(st.m, blockMax);
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int32_t c = 0; c < int32_t(kBlock); ++c) {
    const float e = keepIf(expApprox(s[c] - mNew), c >= low && c <= last);
    s[c] = e;
    sum += e;
  }
  const float alpha = first ? 0.0f : expApprox(st.m - mNew);
  // Not st.l * 0 on the first block: st is uninitialised there, and
  // garbage times 0 is NaN when the garbage is an infinity or a NaN.
  st.l = first ? double(sum) : st.l * alpha + sum;
  st.m = mNew;
  return alpha;
}

/// Query rows i0..i1 (< kBlock of them) of one head, key block by key
/// block from the one that holds row i0's first key (window W; 0: key 0):
/// the block's keys packed once, then kRows query rows at a time.
template <int64_t Cap>
FSDP_INLINE void forwardQueryBlockTiled(const Head &hd, float *o, float *lse,
                                        int64_t i0, int64_t i1, int64_t C,
                                        int64_t hs, float scale, int64_t W) {
  alignas(64) float kt[Cap * kBlock];
  alignas(64) float s[kRows][kBlock];
  float spare[Cap] = {}; // the output row of a tile's rows past i1
  RowState st[kBlock] = {};
  for (int64_t i = i0; i < i1; ++i)
    std::memset(o + i * C, 0, sizeof(float) * hs);
  for (int64_t j0 = windowStart(i0, W) / kBlock * kBlock; j0 < i1;
       j0 += kBlock) {
    packPanel(kt, hd.k + j0 * hd.ld, hd.ld, std::min(kBlock, i1 - j0), hs);
    for (int64_t t = i0; t < i1; t += kRows) {
      const float *q[kRows];
      float *y[kRows], alpha[kRows];
      for (int r = 0; r < kRows; ++r)
        q[r] = hd.q + std::min(t + r, i1 - 1) * hd.ld;
      tileProducts(q, kt, hs, s);
      for (int r = 0; r < kRows; ++r) {
        const int64_t i = std::min(t + r, i1 - 1), lo = windowStart(i, W);
        RowState tmp = st[i - i0];
        alpha[r] = foldRow(s[r], int32_t(lo - j0), int32_t(t + r - j0), scale,
                           lo >= j0, tmp);
        y[r] = t + r < i1 ? o + (t + r) * C : spare;
        if (t + r < i1)
          st[t + r - i0] = tmp;
      }
      const int64_t n = std::min(kBlock, std::min(t + kRows, i1) - j0);
      tileAccumulate(y, alpha, Coeffs{&s[0][0], kBlock, 1}, hd.v + j0 * hd.ld,
                     hd.ld, n, hs);
    }
  }
  finishRows(st, o, lse, i0, i1, C, hs);
}

//===----------------------------------------------------------------------===//
// Tiled backward
//===----------------------------------------------------------------------===//

/// One key block's packed panels and the P and dS blocks of one query
/// block against it (rows: queries, columns: keys).
template <int64_t Cap> struct BackwardScratch {
  alignas(64) float kt[Cap * kBlock], vt[Cap * kBlock];
  alignas(64) float p[kQueryBlock][kBlock], ds[kQueryBlock][kBlock];
  float spare[Cap];
};

/// Rows t..t + kRows of the P and scaled dS blocks (keys j0..; zero
/// outside each row's window W), and those rows' dq += scale dS k.
template <int64_t Cap>
FSDP_INLINE void backwardRowTile(const BackwardHead &g, BackwardScratch<Cap> &w,
                                 const float *D, int64_t j0, int64_t i0,
                                 int64_t t, int64_t i1, int64_t W) {
  const int64_t ld = g.hd.ld, hs = g.hs;
  const float *q[kRows], *dO[kRows];
  float *y[kRows];
  for (int r = 0; r < kRows; ++r) {
    const int64_t i = std::min(t + r, i1 - 1);
    q[r] = g.hd.q + i * ld;
    dO[r] = g.dO + i * g.C;
    y[r] = t + r < i1 ? g.dq + i * ld : w.spare;
  }
  float(*p)[kBlock] = w.p + (t - i0), (*ds)[kBlock] = w.ds + (t - i0);
  tileProducts(q, w.kt, hs, p);
  tileProducts(dO, w.vt, hs, ds);
  for (int r = 0; r < kRows; ++r) {
    const int64_t i = std::min(t + r, i1 - 1);
    const int32_t last = int32_t(i - j0), low = int32_t(windowStart(i, W) - j0);
    const float lse = g.lse[i], Di = D[i - i0], scale = g.scale;
#pragma omp simd
    for (int32_t c = 0; c < int32_t(kBlock); ++c) {
      const float pc =
          keepIf(expApprox(scale * p[r][c] - lse), c >= low && c <= last);
      p[r][c] = pc;
      ds[r][c] = scale * (pc * (ds[r][c] - Di));
    }
  }
  const int64_t n = std::min(kBlock, std::min(t + kRows, i1) - j0);
  tileAccumulate(y, kOnes, Coeffs{&ds[0][0], kBlock, 1}, g.hd.k + j0 * ld, ld,
                 n, hs);
}

/// Query rows i0..i1 against keys j0..j0 + nk: dq of those rows, and
/// dv += P^T dO, dk += scale dS^T q of the keys, kRows keys at a time.
template <int64_t Cap>
FSDP_INLINE void
backwardBlockPair(const BackwardHead &g, BackwardScratch<Cap> &w, int64_t j0,
                  int64_t nk, int64_t i0, int64_t i1, int64_t W) {
  const int64_t ld = g.hd.ld, hs = g.hs;
  float D[kQueryBlock];
  for (int64_t i = i0; i < i1; ++i)
    D[i - i0] = rowDot(g.dO + i * g.C, g.o + i * g.C, hs);
  for (int64_t t = i0; t < i1; t += kRows)
    backwardRowTile(g, w, D, j0, i0, t, i1, W);
  for (int64_t c0 = 0; c0 < nk; c0 += kRows) {
    float *dv[kRows], *dk[kRows];
    for (int r = 0; r < kRows; ++r) {
      dv[r] = c0 + r < nk ? g.dv + (j0 + c0 + r) * ld : w.spare;
      dk[r] = c0 + r < nk ? g.dk + (j0 + c0 + r) * ld : w.spare;
    }
    tileAccumulate(dv, kOnes, Coeffs{&w.p[0][c0], 1, kBlock}, g.dO + i0 * g.C,
                   g.C, i1 - i0, hs);
    tileAccumulate(dk, kOnes, Coeffs{&w.ds[0][c0], 1, kBlock}, g.hd.q + i0 * ld,
                   ld, i1 - i0, hs);
  }
}

/// One head's dq, dk and dv in one pass (FlashAttention-2's): key block
/// by key block, each against every query block at or below it that
/// holds a query whose window W reaches it (all of them when W = 0). dk
/// and dv start from zero for the first head of a kv head's group
/// (`first`) and accumulate onto the previous heads' for the others.
template <int64_t Cap>
FSDP_INLINE void headBackwardTiled(const BackwardHead &g, int64_t T, bool first,
                                   int64_t W) {
  const int64_t ld = g.hd.ld, hs = g.hs;
  BackwardScratch<Cap> w;
  std::memset(w.spare, 0, sizeof w.spare);
  for (int64_t i = 0; i < T; ++i)
    std::memset(g.dq + i * ld, 0, sizeof(float) * hs);
  for (int64_t j0 = 0; j0 < T; j0 += kBlock) {
    const int64_t nk = std::min(kBlock, T - j0);
    packPanel(w.kt, g.hd.k + j0 * ld, ld, nk, hs);
    packPanel(w.vt, g.hd.v + j0 * ld, ld, nk, hs);
    for (int64_t j = j0; first && j < j0 + nk; ++j) {
      std::memset(g.dk + j * ld, 0, sizeof(float) * hs);
      std::memset(g.dv + j * ld, 0, sizeof(float) * hs);
    }
    // The last query that sees key j0 + nk - 1 is j0 + nk - 2 + W.
    const int64_t iEnd = W > 0 ? std::min(T, j0 + nk - 1 + W) : T;
    for (int64_t i0 = j0; i0 < iEnd; i0 += kQueryBlock)
      backwardBlockPair(g, w, j0, nk, i0, std::min(i0 + kQueryBlock, iEnd), W);
  }
}

//===----------------------------------------------------------------------===//
// Scalar path, for heads wider than kMaxTiledHs
//===----------------------------------------------------------------------===//

namespace scalar {

inline float dotf(const float *a, const float *b, int64_t n) {
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (int64_t d = 0; d < n; ++d)
    s += a[d] * b[d];
  return s;
}

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

/// Rows i0..i1 of one head: keys block by block (from the block of row
/// i0's first key under window W), and for each key block every row of the
/// query block, so that the block's k and v rows stay in cache while they
/// are used.
void forwardQueryBlock(const Head &hd, float *o, float *lse, int64_t i0,
                       int64_t i1, int64_t C, int64_t hs, float scale,
                       int64_t W) {
  RowState st[kBlock];
  float s[kBlock];
  for (int64_t i = i0; i < i1; ++i)
    std::memset(o + i * C, 0, sizeof(float) * hs);
  for (int64_t j0 = windowStart(i0, W) / kBlock * kBlock; j0 < i1;
       j0 += kBlock) {
    const int64_t j1 = std::min(j0 + kBlock, i1);
    for (int64_t i = std::max(i0, j0); i < i1; ++i) {
      const int64_t a = std::max(j0, windowStart(i, W)),
                    b = std::min(j1, i + 1);
      if (a < b)
        forwardRowBlock(hd, hd.q + i * hd.ld, a, b - a, hs, scale, st[i - i0],
                        o + i * C, s);
    }
  }
  finishRows(st, o, lse, i0, i1, C, hs);
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

/// dk, dv of keys j0..j1 (zeroed first for the first head of a group):
/// every query row i >= j0 that sees them (within window W) adds
/// dv_j += p_ij dO_i and dk_j += scale dS_ij q_i, with
/// dS_ij = p_ij (dO_i . v_j - D_i).
void keyBlockBackward(const BackwardHead &g, int64_t j0, int64_t j1, int64_t T,
                      bool first, int64_t W) {
  const int64_t hs = g.hs, ld = g.hd.ld;
  float p[kBlock];
  for (int64_t j = j0; first && j < j1; ++j) {
    std::memset(g.dk + j * ld, 0, sizeof(float) * hs);
    std::memset(g.dv + j * ld, 0, sizeof(float) * hs);
  }
  const int64_t iEnd = W > 0 ? std::min(T, j1 - 1 + W) : T;
  for (int64_t i = j0; i < iEnd; ++i) {
    const int64_t a = std::max(j0, windowStart(i, W));
    const int64_t n = std::min(j1, i + 1) - a;
    if (n <= 0)
      continue;
    const float *dO = g.dO + i * g.C, *q = g.hd.q + i * ld;
    const float D = rowDot(dO, g.o + i * g.C, hs);
    recomputeProbs(g.hd, i, a, n, hs, g.scale, g.lse[i], p);
    for (int64_t c = 0; c < n; ++c) {
      const int64_t j = a + c;
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
void queryBlockBackward(const BackwardHead &g, int64_t i0, int64_t i1,
                        int64_t W) {
  const int64_t hs = g.hs, ld = g.hd.ld;
  float p[kBlock], D[kBlock];
  for (int64_t i = i0; i < i1; ++i) {
    std::memset(g.dq + i * ld, 0, sizeof(float) * hs);
    D[i - i0] = rowDot(g.dO + i * g.C, g.o + i * g.C, hs);
  }
  for (int64_t j0 = windowStart(i0, W) / kBlock * kBlock; j0 < i1;
       j0 += kBlock) {
    const int64_t j1 = std::min(j0 + kBlock, i1);
    for (int64_t i = std::max(i0, j0); i < i1; ++i) {
      const int64_t a = std::max(j0, windowStart(i, W));
      const int64_t n = std::min(j1, i + 1) - a;
      if (n <= 0)
        continue;
      const float *dO = g.dO + i * g.C;
      float *dq = g.dq + i * ld;
      recomputeProbs(g.hd, i, a, n, hs, g.scale, g.lse[i], p);
      for (int64_t c = 0; c < n; ++c) {
        const float *k = g.hd.k + (a + c) * ld, *v = g.hd.v + (a + c) * ld;
        const float ds = g.scale * p[c] * (dotf(dO, v, hs) - D[i - i0]);
#pragma omp simd
        for (int64_t d = 0; d < hs; ++d)
          dq[d] += ds * k[d];
      }
    }
  }
}

/// The two passes of the scalar backward: dk and dv per key block (of a
/// kv head, over its group's query heads in order), then dq per query
/// block.
void backward(float *dqkv, const float *dout, const float *qkv,
              const float *out, const float *lse, int64_t B, int64_t T,
              int64_t NH, const QkvLayout &L, int64_t W) {
  const int64_t nb = (T + kBlock - 1) / kBlock, KV = L.KV;
#pragma omp parallel
  {
    // Longest tasks first in both passes.
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < B * KV * nb; ++task) {
      const int64_t bg = task / nb, j0 = (task % nb) * kBlock;
      const int64_t h0 = bg % KV * L.group;
      for (int64_t h = h0; h < h0 + L.group; ++h) {
        const BackwardHead g =
            backwardHead(dqkv, dout, qkv, out, lse, bg / KV, h, T, NH, L);
        keyBlockBackward(g, j0, std::min(j0 + kBlock, T), T, h == h0, W);
      }
    }
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < B * NH * nb; ++task) {
      const int64_t bh = task / nb, i0 = (nb - 1 - task % nb) * kBlock;
      const BackwardHead g =
          backwardHead(dqkv, dout, qkv, out, lse, bh / NH, bh % NH, T, NH, L);
      queryBlockBackward(g, i0, std::min(i0 + kBlock, T), W);
    }
  }
}

} // namespace scalar

/// One forward task: query rows i0..i1 of one head, by the head's path.
FSDP_INLINE void forwardTask(const Head &hd, float *o, float *lse, int64_t i0,
                             int64_t i1, int64_t C, int64_t hs, float scale,
                             int64_t W) {
  if (hs <= 64)
    forwardQueryBlockTiled<64>(hd, o, lse, i0, i1, C, hs, scale, W);
  else if (hs <= kMaxTiledHs)
    forwardQueryBlockTiled<kMaxTiledHs>(hd, o, lse, i0, i1, C, hs, scale, W);
  else
    scalar::forwardQueryBlock(hd, o, lse, i0, i1, C, hs, scale, W);
}

} // namespace

// Forward tasks are (b, h, query block); later query blocks see more keys,
// so the schedule is dynamic, longest first. Each task writes only its
// own rows, so the order tasks run in does not change any bit.

/// The same attention without the probabilities (FlashAttention-2): out
/// as attentionForward's, and lse (B x NH x T) the natural log-sum-exp of
/// each query row's scaled, causally masked scores,
///   lse[b,h,i] = log sum_{lo_i<=j<=i} exp(s_ij),  s_ij = q_i . k_j / sqrt(hs),
/// lo_i = max(0, i - W + 1) under a sliding window of W > 0 keys, else 0
/// (the key blocks wholly before a query block's windows are skipped),
/// computed key block by key block with a running max m and sum l
/// (m' = max(m, max_j s_ij), l' = l exp(m - m') + sum_j exp(s_ij - m'),
/// the output accumulator rescaled by exp(m - m') likewise). No T x T
/// buffer; beyond out and lse a few tens of KiB of stack per thread
/// (BlockedAttention.cpp).
FSDP_CPU_KERNEL void blockedAttentionForward(const Blas &blas, float *out,
                                             float *lse, const float *qkv,
                                             int64_t B, int64_t T, int64_t C,
                                             int64_t NH, int64_t KV,
                                             int64_t W) {
  const QkvLayout L(C, NH, KV);
  const int64_t hs = L.hs, nb = (T + kBlock - 1) / kBlock;
  const float scale = 1.0f / std::sqrt(float(hs));
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t task = 0; task < B * NH * nb; ++task) {
    const int64_t bh = task / nb, i0 = (nb - 1 - task % nb) * kBlock;
    const int64_t b = bh / NH, h = bh % NH;
    forwardTask(Head(qkv, b, h, T, L), out + b * T * C + h * hs, lse + bh * T,
                i0, std::min(i0 + kBlock, T), C, hs, scale, W);
  }
}

// Backward tasks are whole kv heads' groups of query heads (a whole head
// without grouped-query attention): a head's dq sums over its key blocks
// in one pass, in key block order, and the group's heads add into their
// dk and dv in head order, so no two tasks write the same row.

/// attentionBackward's dqkv from dout, qkv, the forward's out and lse,
/// recomputing the probabilities block by block, p_ij = exp(s_ij - lse_i):
///   D_i = dO_i . O_i,  dS_ij = p_ij (dO_i . v_j - D_i),
///   dq_i = scale sum_j dS_ij k_j,  dk_j = scale sum_i dS_ij q_i,
///   dv_j = sum_i p_ij dO_i.
/// With KV < NH, dk_j and dv_j also sum over the query heads of the group;
/// with a window W > 0 the sums run over the pairs inside it only, and
/// the blocks of pairs wholly outside are not visited.
/// No scratch; the sums run in a fixed order (no atomics), so the result
/// does not depend on the thread count.
FSDP_CPU_KERNEL void
blockedAttentionBackward(const Blas &blas, float *dqkv, const float *dout,
                         const float *qkv, const float *out, const float *lse,
                         int64_t B, int64_t T, int64_t C, int64_t NH,
                         int64_t KV, int64_t W) {
  const QkvLayout L(C, NH, KV);
  const int64_t hs = L.hs;
  if (hs > kMaxTiledHs) {
    scalar::backward(dqkv, dout, qkv, out, lse, B, T, NH, L, W);
    return;
  }
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t bg = 0; bg < B * KV; ++bg) {
    const int64_t h0 = bg % KV * L.group;
    for (int64_t h = h0; h < h0 + L.group; ++h) {
      const BackwardHead g =
          backwardHead(dqkv, dout, qkv, out, lse, bg / KV, h, T, NH, L);
      if (hs <= 64)
        headBackwardTiled<64>(g, T, h == h0, W);
      else
        headBackwardTiled<kMaxTiledHs>(g, T, h == h0, W);
    }
  }
}

} // namespace fsdp::rt::cpu
