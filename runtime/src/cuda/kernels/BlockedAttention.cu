//===- BlockedAttention.cu - causal attention without the T x T matrix ---===//
//
// The GPU twin of src/cpu/BlockedAttention.cpp (FlashAttention-2's
// algorithm): the forward keeps one log-sum-exp per query row instead of
// the B x NH x T x T probabilities, and the backward recomputes each tile
// of probabilities from q, k and that log-sum-exp.
//
// Tiles. A thread block of kThreads = 128 threads owns one (b, h) and one
// tile of kBlock rows (32, or 16 for head sizes above 64, so that the
// tiles fit the 48 KiB of static shared memory without an opt-in; the
// emulation in test/cuda-emulation has no dynamic shared memory either).
// The head size is rounded up to a compile-time HS (32, 64 or 128) and
// the tiles are zero-padded to it, so the dot products run over HS with
// unrolled loops; tile rows are HS + 1 floats apart so that the threads of
// a warp, which read the same column of different rows, hit different
// banks. Rows past T are zero-padded too (finite scores, nothing stored).
//
// Thread mapping. Each tile row is owned by kGroup = kThreads / kBlock
// consecutive lanes (4 or 8); lane `part` of a row's group handles the
// columns part, part + kGroup, ... of the score tile and the head-size
// columns part, part + kGroup, ... of the accumulators. Row reductions are
// xor shuffles inside the group, so every lane of the group gets the same
// bits. Results go out through a shared-memory tile, coalesced.
//
// Determinism. Every output row is written by exactly one thread block,
// and every sum runs in a fixed order (key tiles ascending, columns
// ascending within a tile, the same shuffle tree), so the bits do not
// depend on the launch timing. That is why the backward makes two passes,
// as on the CPU: dk and dv per key tile over the query tiles, then dq per
// query tile over the key tiles, instead of FlashAttention-2's one pass
// with atomic adds into dq. With grouped-query attention (KV kv heads of
// g = NH / KV query heads each) a thread block of the first pass owns a kv
// head's key tile and runs the g query heads one after another, in head
// order, into the same dk and dv accumulators. Nothing is allocated:
// accumulators live in registers, tiles in shared memory. D_i = dO_i . O_i is
// recomputed in both passes (there is no scratch to keep it in), by the same
// code.
//
// Sliding window. With a window of W keys (query i sees keys
// i - W < j <= i; W = 0: none) the forward and the query pass start at the
// key tile of their first row's first key, and the key pass stops at the
// query tile of its last key's last query: tiles wholly outside the window
// are never loaded, as on the CPU. Inside a tile the keys outside a row's
// window are masked like those above the diagonal; a row whose window
// starts past a whole tile keeps its state (alpha 1, nothing added).
//
// Element types. The tiles are float whatever the element type E of qkv,
// dout and out: bf16 is widened as a tile is loaded, everything after is
// float (scores, the online softmax, the accumulators, lse), and only the
// stored tiles (out, dq, dk, dv) are rounded, once each.
//
//===----------------------------------------------------------------------===//

#include "Common.cuh"
#include "TensorCoreAttention.h"

#include <cmath>
#include <cstdio>

namespace fsdp::rt::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kMaxHeadSize = 128;

/// Tile shape for a head size rounded up to HS.
template <int HS> struct Tile {
  static constexpr int kBlock = HS <= 64 ? 32 : 16; // rows per tile
  static constexpr int kGroup = kThreads / kBlock;  // lanes per row
  static constexpr int kPerLane = kBlock / kGroup;  // score columns per lane
  static constexpr int kCols = HS / kGroup;         // accumulator columns
  static constexpr int kLd = HS + 1;                // padded row stride
  static_assert(kBlock * kGroup == kThreads && kGroup <= 32, "tile mapping");
  static_assert(kCols * kGroup == HS && kPerLane * kGroup == kBlock,
                "tile mapping");
};

template <int G> __device__ __forceinline__ float groupMax(float v) {
#pragma unroll
  for (int offset = G / 2; offset > 0; offset >>= 1)
    v = fmaxf(v, __shfl_xor_sync(detail::kFullMask, v, offset));
  return v;
}

template <int G> __device__ __forceinline__ float groupSum(float v) {
#pragma unroll
  for (int offset = G / 2; offset > 0; offset >>= 1)
    v += __shfl_xor_sync(detail::kFullMask, v, offset);
  return v;
}

/// Rows row0..row0 + kBlock of an hs-wide slice (row stride ld) into a
/// tile, zeros past T and past hs.
template <int HS, typename E>
__device__ void loadTile(float (*tile)[Tile<HS>::kLd],
                         const E *__restrict__ src, int64_t ld, int64_t row0,
                         int64_t T, int hs) {
  for (int idx = threadIdx.x; idx < Tile<HS>::kBlock * HS; idx += kThreads) {
    const int r = idx / HS, d = idx % HS;
    tile[r][d] = row0 + r < T && d < hs
                     ? detail::toFloat(src[(row0 + r) * ld + d])
                     : 0.0f;
  }
}

/// The tile's rows below T, first hs columns, out to dst (row stride ld).
template <int HS, typename E>
__device__ void storeTile(E *__restrict__ dst, int64_t ld,
                          const float (*tile)[Tile<HS>::kLd], int64_t row0,
                          int64_t T, int hs) {
  for (int idx = threadIdx.x; idx < Tile<HS>::kBlock * HS; idx += kThreads) {
    const int r = idx / HS, d = idx % HS;
    if (row0 + r < T && d < hs)
      dst[(row0 + r) * ld + d] = detail::fromFloat<E>(tile[r][d]);
  }
}

/// This lane's accumulator columns into row r of a tile (for storeTile).
template <int HS>
__device__ void putRow(float (*tile)[Tile<HS>::kLd], int r, int part,
                       const float *acc, float factor) {
  using L = Tile<HS>;
#pragma unroll
  for (int j = 0; j < L::kCols; ++j)
    tile[r][part + L::kGroup * j] = factor * acc[j];
}

/// D_i = dO_i . O_i of row i (straight from global memory; the group of
/// row i gets the same bits in every pass, the summation order being
/// fixed). Zero past T.
template <int HS, typename E>
__device__ float rowD(const E *__restrict__ dO, const E *__restrict__ o,
                      int64_t i, int64_t T, int64_t C, int hs, int part) {
  using L = Tile<HS>;
  float acc = 0.0f;
  if (i < T) {
#pragma unroll
    for (int j = 0; j < L::kCols; ++j) {
      const int d = part + L::kGroup * j;
      if (d < hs)
        acc += detail::toFloat(dO[i * C + d]) * detail::toFloat(o[i * C + d]);
    }
  }
  return groupSum<L::kGroup>(acc);
}

using detail::headView;
using detail::HeadView;

/// The query head of blockIdx.x = b NH + h.
__device__ __forceinline__ HeadView queryHeadView(int64_t T, int64_t C,
                                                  int64_t NH, int64_t KV,
                                                  int hs) {
  return headView(blockIdx.x / NH, blockIdx.x % NH, T, C, NH, KV, hs);
}

//===----------------------------------------------------------------------===//
// Forward
//===----------------------------------------------------------------------===//

/// The online-softmax state of this lane's query row.
template <int HS> struct RowState {
  float m = -INFINITY;           // running max of the visible scores
  float l = 0.0f;                // running sum of exp(s - m)
  float o[Tile<HS>::kCols] = {}; // sum_j exp(s_j - m) v_j, this lane's part
};

/// Folds key tile j0 into row i's state: scores, new max, rescale by
/// exp(m - m'), probabilities through Ps, then o += P v. Keys before
/// lo = windowStart(i, W) are masked.
template <int HS>
__device__ void
forwardStep(const float (*Qs)[Tile<HS>::kLd], const float (*Ks)[Tile<HS>::kLd],
            const float (*Vs)[Tile<HS>::kLd], float (*Ps)[Tile<HS>::kBlock + 1],
            int r, int part, int64_t i, int64_t j0, float scale, int64_t lo,
            RowState<HS> &st) {
  using L = Tile<HS>;
  float s[L::kPerLane] = {};
#pragma unroll 8
  for (int d = 0; d < HS; ++d) {
    const float q = Qs[r][d];
#pragma unroll
    for (int k = 0; k < L::kPerLane; ++k)
      s[k] += q * Ks[part + L::kGroup * k][d];
  }
  // Without a window key j0 <= i is always visible, so mNew is finite
  // and, on the first tile, alpha = exp(-inf) = 0 clears nothing but
  // zeros. With one, a tile wholly before the window leaves mNew at
  // -inf: alpha is 1 there, and nothing is added.
  float mNew = st.m;
#pragma unroll
  for (int k = 0; k < L::kPerLane; ++k) {
    s[k] *= scale;
    const int64_t j = j0 + part + L::kGroup * k;
    if (j <= i && j >= lo)
      mNew = fmaxf(mNew, s[k]);
  }
  mNew = groupMax<L::kGroup>(mNew);
  float sum = 0.0f;
#pragma unroll
  for (int k = 0; k < L::kPerLane; ++k) {
    const int c = part + L::kGroup * k;
    const float p = j0 + c <= i && j0 + c >= lo ? __expf(s[k] - mNew) : 0.0f;
    Ps[r][c] = p;
    sum += p;
  }
  const float alpha = mNew == -INFINITY ? 1.0f : __expf(st.m - mNew);
  st.l = st.l * alpha + groupSum<L::kGroup>(sum);
  st.m = mNew;
  __syncthreads(); // the whole row of Ps, written by the group
#pragma unroll
  for (int j = 0; j < L::kCols; ++j)
    st.o[j] *= alpha;
  for (int c = 0; c < L::kBlock; ++c) {
    const float p = Ps[r][c];
#pragma unroll
    for (int j = 0; j < L::kCols; ++j)
      st.o[j] += p * Vs[c][part + L::kGroup * j];
  }
}

/// One (b, h) per blockIdx.x, one query tile per blockIdx.y (the last
/// tiles, which see the most keys, first), over the key tiles from the
/// one of its first row's first key under window W.
template <int HS, typename E>
__global__ void __launch_bounds__(kThreads)
    blockedForwardKernel(E *__restrict__ out, float *__restrict__ lse,
                         const E *__restrict__ qkv, int64_t T, int64_t C,
                         int64_t NH, int64_t KV, int hs, float scale,
                         int64_t W) {
  using L = Tile<HS>;
  __shared__ float Qs[L::kBlock][L::kLd];
  __shared__ float Ks[L::kBlock][L::kLd];
  __shared__ float Vs[L::kBlock][L::kLd];
  __shared__ float Ps[L::kBlock][L::kBlock + 1];
  const HeadView hv = queryHeadView(T, C, NH, KV, hs);
  const int64_t i0 = (int64_t(gridDim.y) - 1 - blockIdx.y) * L::kBlock;
  const int r = threadIdx.x / L::kGroup, part = threadIdx.x % L::kGroup;
  const E *q = qkv + hv.q, *k = qkv + hv.k, *v = k + KV * hs;
  loadTile<HS>(Qs, q, hv.ld, i0, T, hs);
  RowState<HS> st;
  const int64_t lo = detail::windowStart(i0 + r, W);
  for (int64_t j0 = detail::windowStart(i0, W) / L::kBlock * L::kBlock;
       j0 <= i0; j0 += L::kBlock) {
    __syncthreads(); // the previous step is done with Ks, Vs and Ps
    loadTile<HS>(Ks, k, hv.ld, j0, T, hs);
    loadTile<HS>(Vs, v, hv.ld, j0, T, hs);
    __syncthreads();
    forwardStep<HS>(Qs, Ks, Vs, Ps, r, part, i0 + r, j0, scale, lo, st);
  }
  __syncthreads(); // every step is done with Qs: it stages the output
  putRow<HS>(Qs, r, part, st.o, 1.0f / st.l);
  if (part == 0 && i0 + r < T)
    lse[hv.bh * T + i0 + r] = st.m + logf(st.l);
  __syncthreads();
  storeTile<HS>(out + hv.bt, C, Qs, i0, T, hs);
}

//===----------------------------------------------------------------------===//
// Backward, pass 1: dk and dv of one key tile
//===----------------------------------------------------------------------===//

/// The operand tiles of the backward.
template <int HS> struct BackwardTiles {
  float (*Qs)[Tile<HS>::kLd], (*dOs)[Tile<HS>::kLd];
  float (*Ks)[Tile<HS>::kLd], (*Vs)[Tile<HS>::kLd];
};

/// Query tile i0 against key row c (this lane's group): p and dS for the
/// lane's rows r = part + kGroup k into Ps[c][r], dSs[c][r], then the
/// whole column into dk (unscaled) and dv, rows ascending.
template <int HS>
__device__ void
keyStep(const BackwardTiles<HS> &t, float (*Ps)[Tile<HS>::kBlock + 1],
        float (*dSs)[Tile<HS>::kBlock + 1], const float *lseS, const float *DS,
        int c, int part, int64_t i0, int64_t j0, int64_t T, float scale,
        int64_t W, float *dk, float *dv) {
  using L = Tile<HS>;
  float s[L::kPerLane] = {}, dp[L::kPerLane] = {};
#pragma unroll 8
  for (int d = 0; d < HS; ++d) {
    const float kc = t.Ks[c][d], vc = t.Vs[c][d];
#pragma unroll
    for (int k = 0; k < L::kPerLane; ++k) {
      s[k] += t.Qs[part + L::kGroup * k][d] * kc;
      dp[k] += t.dOs[part + L::kGroup * k][d] * vc;
    }
  }
#pragma unroll
  for (int k = 0; k < L::kPerLane; ++k) {
    const int r = part + L::kGroup * k;
    const bool visible = j0 + c <= i0 + r && i0 + r < T &&
                         j0 + c >= detail::windowStart(i0 + r, W);
    const float p = visible ? __expf(scale * s[k] - lseS[r]) : 0.0f;
    Ps[c][r] = p;
    dSs[c][r] = p * (dp[k] - DS[r]);
  }
  __syncthreads(); // the whole column, written by the group
  for (int r = 0; r < L::kBlock; ++r) {
    const float p = Ps[c][r], ds = dSs[c][r];
#pragma unroll
    for (int j = 0; j < L::kCols; ++j) {
      const int d = part + L::kGroup * j;
      dv[j] += p * t.dOs[r][d];
      dk[j] += ds * t.Qs[r][d];
    }
  }
}

/// Query head hv's contribution to the dk and dv of key tile j0: the
/// query tiles i0 >= j0 one after another, up to the last one that holds
/// a query whose window W reaches the tile.
template <int HS, typename E>
__device__ void
keyPassHead(const BackwardTiles<HS> &t, float (*Ps)[Tile<HS>::kBlock + 1],
            float (*dSs)[Tile<HS>::kBlock + 1], float *lseS, float *DS,
            const HeadView &hv, const E *dout, const E *qkv, const E *out,
            const float *lse, int64_t j0, int64_t T, int64_t C, int hs,
            float scale, int64_t W, float *dk, float *dv) {
  using L = Tile<HS>;
  const int row = threadIdx.x / L::kGroup, part = threadIdx.x % L::kGroup;
  // The last query that sees key j0 + kBlock - 1 is j0 + kBlock - 2 + W.
  const int64_t iEnd =
      W > 0 && j0 + L::kBlock - 1 + W < T ? j0 + L::kBlock - 1 + W : T;
  for (int64_t i0 = j0; i0 < iEnd; i0 += L::kBlock) {
    __syncthreads(); // the previous step is done with the query tiles
    loadTile<HS>(t.Qs, qkv + hv.q, hv.ld, i0, T, hs);
    loadTile<HS>(t.dOs, dout + hv.bt, C, i0, T, hs);
    const float D =
        rowD<HS>(dout + hv.bt, out + hv.bt, i0 + row, T, C, hs, part);
    if (part == 0) {
      DS[row] = D;
      lseS[row] = i0 + row < T ? lse[hv.bh * T + i0 + row] : 0.0f;
    }
    __syncthreads();
    keyStep<HS>(t, Ps, dSs, lseS, DS, row, part, i0, j0, T, scale, W, dk, dv);
  }
}

/// One (b, kv head) per blockIdx.x, one key tile per blockIdx.y (the first
/// tiles, which see the most queries, first), over the kv head's query
/// heads in order and their query tiles i0 >= j0.
template <int HS, typename E>
__global__ void __launch_bounds__(kThreads)
    blockedKeyPassKernel(E *__restrict__ dqkv, const E *__restrict__ dout,
                         const E *__restrict__ qkv, const E *__restrict__ out,
                         const float *__restrict__ lse, int64_t T, int64_t C,
                         int64_t NH, int64_t KV, int hs, float scale,
                         int64_t W) {
  using L = Tile<HS>;
  __shared__ float Qs[L::kBlock][L::kLd];
  __shared__ float dOs[L::kBlock][L::kLd];
  __shared__ float Ks[L::kBlock][L::kLd];
  __shared__ float Vs[L::kBlock][L::kLd];
  __shared__ float Ps[L::kBlock][L::kBlock + 1];
  __shared__ float dSs[L::kBlock][L::kBlock + 1];
  __shared__ float lseS[L::kBlock];
  __shared__ float DS[L::kBlock];
  const int64_t b = blockIdx.x / KV, g = NH / KV, h0 = blockIdx.x % KV * g;
  const int64_t j0 = int64_t(blockIdx.y) * L::kBlock;
  const int row = threadIdx.x / L::kGroup, part = threadIdx.x % L::kGroup;
  const HeadView kv = headView(b, h0, T, C, NH, KV, hs);
  const BackwardTiles<HS> t{Qs, dOs, Ks, Vs};
  loadTile<HS>(Ks, qkv + kv.k, kv.ld, j0, T, hs);
  loadTile<HS>(Vs, qkv + kv.k + KV * hs, kv.ld, j0, T, hs);
  float dk[L::kCols] = {}, dv[L::kCols] = {};
  for (int64_t h = h0; h < h0 + g; ++h)
    keyPassHead<HS>(t, Ps, dSs, lseS, DS, headView(b, h, T, C, NH, KV, hs),
                    dout, qkv, out, lse, j0, T, C, hs, scale, W, dk, dv);
  __syncthreads(); // Ks and Vs stage dk and dv
  putRow<HS>(Ks, row, part, dk, scale);
  putRow<HS>(Vs, row, part, dv, 1.0f);
  __syncthreads();
  storeTile<HS>(dqkv + kv.k, kv.ld, Ks, j0, T, hs);
  storeTile<HS>(dqkv + kv.k + KV * hs, kv.ld, Vs, j0, T, hs);
}

//===----------------------------------------------------------------------===//
// Backward, pass 2: dq of one query tile
//===----------------------------------------------------------------------===//

/// Key tile j0 against query row i (this lane's group): dS for the lane's
/// columns into dSs[r][c], then dq (unscaled) += dS k, columns ascending.
template <int HS>
__device__ void queryStep(const BackwardTiles<HS> &t,
                          float (*dSs)[Tile<HS>::kBlock + 1], int r, int part,
                          int64_t i, int64_t j0, float lseI, float D,
                          float scale, int64_t lo, float *dq) {
  using L = Tile<HS>;
  float s[L::kPerLane] = {}, dp[L::kPerLane] = {};
#pragma unroll 8
  for (int d = 0; d < HS; ++d) {
    const float q = t.Qs[r][d], g = t.dOs[r][d];
#pragma unroll
    for (int k = 0; k < L::kPerLane; ++k) {
      s[k] += q * t.Ks[part + L::kGroup * k][d];
      dp[k] += g * t.Vs[part + L::kGroup * k][d];
    }
  }
#pragma unroll
  for (int k = 0; k < L::kPerLane; ++k) {
    const int c = part + L::kGroup * k;
    const float p =
        j0 + c <= i && j0 + c >= lo ? __expf(scale * s[k] - lseI) : 0.0f;
    dSs[r][c] = p * (dp[k] - D);
  }
  __syncthreads(); // the whole row, written by the group
  for (int c = 0; c < L::kBlock; ++c) {
    const float ds = dSs[r][c];
#pragma unroll
    for (int j = 0; j < L::kCols; ++j)
      dq[j] += ds * t.Ks[c][part + L::kGroup * j];
  }
}

/// One (b, h) per blockIdx.x, one query tile per blockIdx.y (the last
/// first), over key tiles j0 <= i0 of its kv head, from the one of its
/// first row's first key under window W.
template <int HS, typename E>
__global__ void __launch_bounds__(kThreads)
    blockedQueryPassKernel(E *__restrict__ dqkv, const E *__restrict__ dout,
                           const E *__restrict__ qkv, const E *__restrict__ out,
                           const float *__restrict__ lse, int64_t T, int64_t C,
                           int64_t NH, int64_t KV, int hs, float scale,
                           int64_t W) {
  using L = Tile<HS>;
  __shared__ float Qs[L::kBlock][L::kLd];
  __shared__ float dOs[L::kBlock][L::kLd];
  __shared__ float Ks[L::kBlock][L::kLd];
  __shared__ float Vs[L::kBlock][L::kLd];
  __shared__ float dSs[L::kBlock][L::kBlock + 1];
  const HeadView hv = queryHeadView(T, C, NH, KV, hs);
  const int64_t i0 = (int64_t(gridDim.y) - 1 - blockIdx.y) * L::kBlock;
  const int r = threadIdx.x / L::kGroup, part = threadIdx.x % L::kGroup;
  const int64_t i = i0 + r;
  const E *k = qkv + hv.k, *v = k + KV * hs;
  const BackwardTiles<HS> t{Qs, dOs, Ks, Vs};
  loadTile<HS>(Qs, qkv + hv.q, hv.ld, i0, T, hs);
  loadTile<HS>(dOs, dout + hv.bt, C, i0, T, hs);
  const float D = rowD<HS>(dout + hv.bt, out + hv.bt, i, T, C, hs, part);
  const float lseI = i < T ? lse[hv.bh * T + i] : 0.0f;
  float dq[L::kCols] = {};
  const int64_t lo = detail::windowStart(i, W);
  for (int64_t j0 = detail::windowStart(i0, W) / L::kBlock * L::kBlock;
       j0 <= i0; j0 += L::kBlock) {
    __syncthreads(); // the previous step is done with Ks, Vs and dSs
    loadTile<HS>(Ks, k, hv.ld, j0, T, hs);
    loadTile<HS>(Vs, v, hv.ld, j0, T, hs);
    __syncthreads();
    queryStep<HS>(t, dSs, r, part, i, j0, lseI, D, scale, lo, dq);
  }
  __syncthreads(); // Qs stages dq
  putRow<HS>(Qs, r, part, dq, scale);
  __syncthreads();
  storeTile<HS>(dqkv + hv.q, hv.ld, Qs, i0, T, hs);
}

//===----------------------------------------------------------------------===//
// Launches
//===----------------------------------------------------------------------===//

/// hs rounded up to a compiled head size, or 0 (error recorded) when the
/// shape cannot run: C not a multiple of NH, NH not of KV, hs above
/// kMaxHeadSize, or more tiles than a grid's y dimension holds.
int headBucket(const char *where, int64_t B, int64_t T, int64_t C, int64_t NH,
               int64_t KV) {
  char what[160];
  const int64_t hs = C / NH;
  if (C % NH != 0 || hs <= 0 || hs > kMaxHeadSize) {
    std::snprintf(what, sizeof what,
                  "head size C / NH = %lld / %lld not an integer in 1..%d",
                  (long long)C, (long long)NH, kMaxHeadSize);
    detail::recordError(where, what);
    return 0;
  }
  if (NH % KV != 0) {
    std::snprintf(what, sizeof what, "NH = %lld not a multiple of KV = %lld",
                  (long long)NH, (long long)KV);
    detail::recordError(where, what);
    return 0;
  }
  const int bucket = hs <= 32 ? 32 : hs <= 64 ? 64 : 128;
  const int block = bucket <= 64 ? 32 : 16;
  if ((T + block - 1) / block > 65535 || B * NH > 2147483647) {
    std::snprintf(what, sizeof what, "T = %lld or B * NH = %lld too large",
                  (long long)T, (long long)(B * NH));
    detail::recordError(where, what);
    return 0;
  }
  return bucket;
}

/// (B * heads, tiles) blocks of kThreads: heads are query heads, or kv
/// heads for the key pass.
template <int HS> dim3 gridFor(int64_t B, int64_t T, int64_t heads) {
  const int64_t tiles = (T + Tile<HS>::kBlock - 1) / Tile<HS>::kBlock;
  return dim3(unsigned(B * heads), unsigned(tiles));
}

template <int HS, typename E>
void launchForward(const Context &ctx, E *out, float *lse, const E *qkv,
                   int64_t B, int64_t T, int64_t C, int64_t NH, int64_t KV,
                   int64_t W) {
  const int hs = int(C / NH);
  const float scale = 1.0f / std::sqrt(float(hs));
  blockedForwardKernel<HS, E>
      <<<gridFor<HS>(B, T, NH), kThreads, 0, ctx.stream>>>(
          out, lse, qkv, T, C, NH, KV, hs, scale, W);
  detail::checkLaunch("blockedAttentionForward");
}

template <int HS, typename E>
void launchBackward(const Context &ctx, E *dqkv, const E *dout, const E *qkv,
                    const E *out, const float *lse, int64_t B, int64_t T,
                    int64_t C, int64_t NH, int64_t KV, int64_t W) {
  const int hs = int(C / NH);
  const float scale = 1.0f / std::sqrt(float(hs));
  // The passes write disjoint parts of dqkv (dk, dv; then dq): no order
  // between them is needed beyond the stream's.
  blockedKeyPassKernel<HS, E>
      <<<gridFor<HS>(B, T, KV), kThreads, 0, ctx.stream>>>(
          dqkv, dout, qkv, out, lse, T, C, NH, KV, hs, scale, W);
  detail::checkLaunch("blockedAttentionBackward (dk, dv)");
  blockedQueryPassKernel<HS, E>
      <<<gridFor<HS>(B, T, NH), kThreads, 0, ctx.stream>>>(
          dqkv, dout, qkv, out, lse, T, C, NH, KV, hs, scale, W);
  detail::checkLaunch("blockedAttentionBackward (dq)");
}

} // namespace

/// The memory-efficient causal attention (FlashAttention-2), the twin of
/// cpu::blockedAttentionForward: out as attentionForward's (same qkv and
/// out layouts), and instead of probs the natural log-sum-exp of each query
/// row's scaled, causally masked scores, lse (B x NH x T):
///   lse[b,h,i] = log sum_{lo_i<=j<=i} exp(s_ij),  s_ij = q_i . k_j / sqrt(hs),
/// lo_i = max(0, i - W + 1) under a sliding window of W > 0 keys, else 0,
/// computed key tile by key tile with a running max m and sum l
/// (m' = max(m, max_j s_ij), l' = l exp(m - m') + sum_j exp(s_ij - m'),
/// the output accumulator rescaled by exp(m - m') likewise). No T x T
/// buffer and no allocation: tiles in shared memory, accumulators in
/// registers. hs = C / NH must be an integer in 1..128 (else an error is
/// recorded and nothing runs). Deterministic. In bf16 the tiles are
/// widened into shared memory and everything is float until out is stored.
/// With ctx.tf32 the products run on TF32 tensor cores
/// (TensorCoreAttention.h), fp32 and bf16 alike; otherwise in fp32 FMAs.
template <typename E>
void blockedAttentionForward(const Context &ctx, E *out, float *lse,
                             const E *qkv, int64_t B, int64_t T, int64_t C,
                             int64_t NH, int64_t KV, int64_t W) {
  if (B <= 0 || T <= 0 || NH <= 0 || KV <= 0)
    return;
  const int bucket = headBucket("blockedAttentionForward", B, T, C, NH, KV);
  if (bucket && ctx.tf32)
    return detail::tensorCoreAttentionForward(ctx, bucket, out, lse, qkv, B, T,
                                              C, NH, KV, W);
  switch (bucket) {
  case 32:
    return launchForward<32, E>(ctx, out, lse, qkv, B, T, C, NH, KV, W);
  case 64:
    return launchForward<64, E>(ctx, out, lse, qkv, B, T, C, NH, KV, W);
  case 128:
    return launchForward<128, E>(ctx, out, lse, qkv, B, T, C, NH, KV, W);
  default:
    return; // error recorded
  }
}

/// attentionBackward's dqkv (qkv's layout, every entry overwritten) from
/// dout, qkv, and the blocked forward's out and lse, recomputing the
/// probabilities tile by tile, p_ij = exp(s_ij - lse_i):
///   D_i = dO_i . O_i,  dS_ij = p_ij (dO_i . v_j - D_i),
///   dq_i = scale sum_j dS_ij k_j,  dk_j = scale sum_i dS_ij q_i,
///   dv_j = sum_i p_ij dO_i.
/// No scratch. Two passes (dk and dv per key tile, then dq per query tile)
/// instead of atomic adds, so every sum runs in a fixed order: the same
/// bits on every run. hs and the window W as in the forward.
template <typename E>
void blockedAttentionBackward(const Context &ctx, E *dqkv, const E *dout,
                              const E *qkv, const E *out, const float *lse,
                              int64_t B, int64_t T, int64_t C, int64_t NH,
                              int64_t KV, int64_t W) {
  if (B <= 0 || T <= 0 || NH <= 0 || KV <= 0)
    return;
  const int bucket = headBucket("blockedAttentionBackward", B, T, C, NH, KV);
  if (bucket && ctx.tf32)
    return detail::tensorCoreAttentionBackward(ctx, bucket, dqkv, dout, qkv,
                                               out, lse, B, T, C, NH, KV, W);
  switch (bucket) {
  case 32:
    return launchBackward<32, E>(ctx, dqkv, dout, qkv, out, lse, B, T, C, NH,
                                 KV, W);
  case 64:
    return launchBackward<64, E>(ctx, dqkv, dout, qkv, out, lse, B, T, C, NH,
                                 KV, W);
  case 128:
    return launchBackward<128, E>(ctx, dqkv, dout, qkv, out, lse, B, T, C, NH,
                                  KV, W);
  default:
    return; // error recorded
  }
}

#define FSDP_INSTANTIATE(E)                                                    \
  template void blockedAttentionForward<E>(                                    \
      const Context &, E *, float *, const E *, int64_t, int64_t, int64_t,     \
      int64_t, int64_t, int64_t);                                              \
  template void blockedAttentionBackward<E>(                                   \
      const Context &, E *, const E *, const E *, const E *, const float *,    \
      int64_t, int64_t, int64_t, int64_t, int64_t, int64_t);
FSDP_CUDA_ELEMENT_TYPES(FSDP_INSTANTIATE)
#undef FSDP_INSTANTIATE

} // namespace fsdp::rt::cuda
