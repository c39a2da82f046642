//===- TensorCoreAttention.cu - blocked attention on TF32 tensor cores ---===//
//
// The blocked attention of BlockedAttention.cu (FlashAttention-2's
// algorithm, the same forward, the same two-pass deterministic backward)
// with its matrix products on tensor cores, through the WMMA API in TF32
// (m16n16k8, fp32 accumulators). The SIMT kernels do every product as
// shared-memory FMA loops: 0.55 ms forward and 1.84 ms backward at GPT-2
// 124M's shape on an H200, half the step (docs/cuda.md, "Measured on a
// GPU"). The backend takes this path when its GEMMs may use TF32
// (Context::tf32, fsdp-run's --tf32 on, the default), for fp32 and bf16
// alike; pedantic fp32 keeps the SIMT kernels.
//
// Numerics. The tiles are float in shared memory (bf16 widened as it is
// loaded) and every value an MMA reads is rounded to TF32 once, when it is
// written there (q, k, v, dO, and the probabilities and dS the softmax
// computes); scores, the online softmax, lse and the accumulators are
// fp32, and out, dq, dk, dv are rounded to E once, when stored. That is
// the precision of the TF32 GEMMs of the materialized form.
//
// Layout. A warp owns 16 rows (queries in the forward and the dq pass,
// keys in the dk/dv pass): their operand fragments stay in registers for
// the whole kernel, the accumulators too where nothing rescales them (dq,
// dk, dv). The forward's output is rescaled row by row as the running max
// moves, which a fragment (whose element-to-lane mapping is unspecified)
// cannot do: each tile's P V goes through the warp's shared scratch into
// per-lane registers, two lanes per row. Scores go the same way for the
// softmax. Tile rows are HS + 8 floats apart (32-byte aligned, as WMMA
// loads need, and off the bank period); everything fits the 48 KiB of
// static shared memory (the emulator has no dynamic shared memory).
//
// Determinism. As in BlockedAttention.cu: every output row has one owner
// and every sum a fixed order (key tiles ascending, the MMA's own order
// within a tile, which is the same on every run): the same bits each run.
//
//===----------------------------------------------------------------------===//

#include "Common.cuh"
#include "TensorCoreAttention.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mma.h>

namespace fsdp::rt::cuda::detail {
namespace {

namespace wmma = nvcuda::wmma;

/// Tile shapes for a head size rounded up to HS: kWarps warps of 16 rows
/// own a block's tile; the other operand comes kStep rows at a time.
template <int HS> struct TcShape {
  static constexpr int kWarps = HS <= 64 ? 4 : 2;
  static constexpr int kRows = 16 * kWarps;        // rows a block owns
  static constexpr int kStep = HS <= 64 ? 32 : 16; // rows of the other tile
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kLd = HS + 8;     // tile row stride (floats)
  static constexpr int kSld = kStep + 8; // score row stride (floats)
  static constexpr int kKs = HS / 8;     // k-steps over the head size
  static constexpr int kNs = HS / 16;    // 16-column slabs of the head
  static constexpr int kPer = kStep / 2; // score columns per lane
  static constexpr int kCols = HS / 2;   // head columns per lane
  static_assert(kLd % 8 == 0 && kSld % 8 == 0, "32-byte aligned rows");
};

using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32,
                             wmma::row_major>;
using FragBRow = wmma::fragment<wmma::matrix_b, 16, 16, 8,
                                wmma::precision::tf32, wmma::row_major>;
using FragBCol = wmma::fragment<wmma::matrix_b, 16, 16, 8,
                                wmma::precision::tf32, wmma::col_major>;
using FragC = wmma::fragment<wmma::accumulator, 16, 16, 8, float>;

__device__ __forceinline__ float tf32(float x) {
  return wmma::__float_to_tf32(x);
}

/// Rows row0.. row0 + rows of an hs-wide slice (row stride ld) into a
/// tile of row stride kLd, TF32-rounded, zeros past T and past hs.
template <int HS, int Rows, typename E>
__device__ void loadRows(float *tile, const E *__restrict__ src, int64_t ld,
                         int64_t row0, int64_t T, int hs) {
  for (int idx = threadIdx.x; idx < Rows * HS; idx += blockDim.x) {
    const int r = idx / HS, d = idx % HS;
    tile[r * TcShape<HS>::kLd + d] =
        row0 + r < T && d < hs ? tf32(toFloat(src[(row0 + r) * ld + d])) : 0.0f;
  }
}

/// The tile's rows below T, first hs columns, out to dst (row stride ld).
template <int HS, int Rows, typename E>
__device__ void storeRows(E *__restrict__ dst, int64_t ld, const float *tile,
                          int64_t row0, int64_t T, int hs) {
  for (int idx = threadIdx.x; idx < Rows * HS; idx += blockDim.x) {
    const int r = idx / HS, d = idx % HS;
    if (row0 + r < T && d < hs)
      dst[(row0 + r) * ld + d] = fromFloat<E>(tile[r * TcShape<HS>::kLd + d]);
  }
}

/// The warp's 16 rows of a tile (row stride kLd) as A fragments.
template <int HS>
__device__ void loadRowsA(FragA (&a)[TcShape<HS>::kKs], const float *rows) {
#pragma unroll
  for (int k = 0; k < TcShape<HS>::kKs; ++k)
    wmma::load_matrix_sync(a[k], rows + 8 * k, TcShape<HS>::kLd);
}

/// out (16 x kStep, row stride kSld) = A (16 x HS) times the transpose of
/// the kStep rows of `tile` (row stride kLd).
template <int HS>
__device__ void timesTransposed(float *out, const FragA (&a)[TcShape<HS>::kKs],
                                const float *tile) {
  using S = TcShape<HS>;
#pragma unroll
  for (int n = 0; n < S::kStep / 16; ++n) {
    FragC acc;
    wmma::fill_fragment(acc, 0.0f);
#pragma unroll
    for (int k = 0; k < S::kKs; ++k) {
      FragBCol b;
      wmma::load_matrix_sync(b, tile + 16 * n * S::kLd + 8 * k, S::kLd);
      wmma::mma_sync(acc, a[k], b, acc);
    }
    wmma::store_matrix_sync(out + 16 * n, acc, S::kSld, wmma::mem_row_major);
  }
}

/// acc (16 x HS) += P (16 x kStep, row stride kSld) times the kStep rows
/// of `tile` (row stride kLd).
template <int HS>
__device__ void accumulateProduct(FragC (&acc)[TcShape<HS>::kNs],
                                  const float *p, const float *tile) {
  using S = TcShape<HS>;
#pragma unroll
  for (int k = 0; k < S::kStep / 8; ++k) {
    FragA a;
    wmma::load_matrix_sync(a, p + 8 * k, S::kSld);
#pragma unroll
    for (int n = 0; n < S::kNs; ++n) {
      FragBRow b;
      wmma::load_matrix_sync(b, tile + 8 * k * S::kLd + 16 * n, S::kLd);
      wmma::mma_sync(acc[n], a, b, acc[n]);
    }
  }
}

/// The accumulators, scaled, into the warp's 16 rows of a tile.
template <int HS>
__device__ void putAccumulators(float *rows, FragC (&acc)[TcShape<HS>::kNs],
                                float factor) {
#pragma unroll
  for (int n = 0; n < TcShape<HS>::kNs; ++n) {
#pragma unroll
    for (int e = 0; e < acc[n].num_elements; ++e)
      acc[n].x[e] *= factor;
    wmma::store_matrix_sync(rows + 16 * n, acc[n], TcShape<HS>::kLd,
                            wmma::mem_row_major);
  }
}

/// Whether key rows [k0, k0 + nk) and query rows [q0, q0 + nq) share no
/// visible pair under causality and window W: a warp skips such a pair of
/// tiles whole (the condition is the warp's, so its lanes agree).
__device__ __forceinline__ bool disjoint(int64_t q0, int nq, int64_t k0, int nk,
                                         int64_t W) {
  return k0 > q0 + nq - 1 || k0 + nk - 1 < windowStart(q0, W);
}

/// D_i = dO_i . O_i for each row of a tile of `rows`, by groups of
/// blockDim.x / rows consecutive lanes, into Ds (zero past T).
template <int HS, typename E>
__device__ void tileD(float *Ds, const E *__restrict__ dO,
                      const E *__restrict__ o, int64_t row0, int rows,
                      int64_t T, int64_t C, int hs) {
  const int group = blockDim.x / rows;
  const int r = threadIdx.x / group, part = threadIdx.x % group;
  float acc = 0.0f;
  if (row0 + r < T)
    for (int d = part; d < hs; d += group)
      acc += toFloat(dO[(row0 + r) * C + d]) * toFloat(o[(row0 + r) * C + d]);
  for (int offset = group / 2; offset > 0; offset >>= 1)
    acc += __shfl_xor_sync(kFullMask, acc, offset);
  if (part == 0)
    Ds[r] = acc;
}

//===----------------------------------------------------------------------===//
// Forward
//===----------------------------------------------------------------------===//

/// The forward's shared memory. An array of one of it is the kernel's
/// __shared__ declaration: aligned for WMMA, and of the form the
/// emulator's preprocessor registers (and poisons before each block).
template <int HS> struct alignas(128) ForwardShared {
  using S = TcShape<HS>;
  float QO[S::kRows * S::kLd]; // q, then each tile's P V, then out
  float Ks[S::kStep * S::kLd], Vs[S::kStep * S::kLd];
  float Ss[S::kWarps * 16 * S::kSld]; // scores, then probabilities
};

/// The online-softmax state of a lane's half of a query row.
template <int HS> struct TcRow {
  float m = -INFINITY, l = 0.0f;
  float o[TcShape<HS>::kCols] = {};
};

/// Scores of the warp's rows against key tile j0 (in Sw) into
/// probabilities in place, the row state rescaled; lane: row lane / 2,
/// columns lane % 2 + 2 t.
template <int HS>
__device__ void softmaxStep(float *Sw, int64_t i, int64_t j0, float scale,
                            int64_t W, TcRow<HS> &st) {
  using S = TcShape<HS>;
  const int lane = threadIdx.x % 32, rr = lane / 2, half = lane % 2;
  const int64_t lo = windowStart(i, W);
  float mNew = st.m;
  for (int t = 0; t < S::kPer; ++t) {
    const int64_t j = j0 + half + 2 * t;
    if (j <= i && j >= lo)
      mNew = fmaxf(mNew, scale * Sw[rr * S::kSld + half + 2 * t]);
  }
  mNew = fmaxf(mNew, __shfl_xor_sync(kFullMask, mNew, 1));
  float sum = 0.0f;
  for (int t = 0; t < S::kPer; ++t) {
    const int c = half + 2 * t;
    const int64_t j = j0 + c;
    const float p = j <= i && j >= lo
                        ? tf32(__expf(scale * Sw[rr * S::kSld + c] - mNew))
                        : 0.0f;
    Sw[rr * S::kSld + c] = p;
    sum += p;
  }
  sum += __shfl_xor_sync(kFullMask, sum, 1);
  const float alpha = mNew == -INFINITY ? 1.0f : __expf(st.m - mNew);
  st.l = st.l * alpha + sum;
  st.m = mNew;
#pragma unroll
  for (int t = 0; t < S::kCols; ++t)
    st.o[t] *= alpha;
}

/// One (b, h) per blockIdx.x, one tile of kRows queries per blockIdx.y (the
/// last first), over the key tiles from its first row's window start.
template <int HS, typename E>
__global__ void __launch_bounds__(TcShape<HS>::kThreads)
    tcForwardKernel(E *__restrict__ out, float *__restrict__ lse,
                    const E *__restrict__ qkv, int64_t T, int64_t C, int64_t NH,
                    int64_t KV, int hs, float scale, int64_t W) {
  using S = TcShape<HS>;
  using Shared = ForwardShared<HS>;
  __shared__ Shared shared[1];
  float *QO = shared->QO, *Ks = shared->Ks, *Vs = shared->Vs;
  float *Ss = shared->Ss;
  const HeadView hv =
      headView(blockIdx.x / NH, blockIdx.x % NH, T, C, NH, KV, hs);
  const int64_t i0 = (int64_t(gridDim.y) - 1 - blockIdx.y) * S::kRows;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t w0 = i0 + 16 * warp, i = w0 + lane / 2;
  float *Sw = Ss + warp * 16 * S::kSld, *Ow = QO + warp * 16 * S::kLd;
  const E *k = qkv + hv.k, *v = k + KV * hs;
  loadRows<HS, S::kRows>(QO, qkv + hv.q, hv.ld, i0, T, hs);
  __syncthreads();
  FragA q[S::kKs];
  loadRowsA<HS>(q, Ow);
  TcRow<HS> st;
  for (int64_t j0 = windowStart(i0, W) / S::kStep * S::kStep;
       j0 < i0 + S::kRows; j0 += S::kStep) {
    __syncthreads(); // the previous tile is done with Ks, Vs (and q's QO)
    loadRows<HS, S::kStep>(Ks, k, hv.ld, j0, T, hs);
    loadRows<HS, S::kStep>(Vs, v, hv.ld, j0, T, hs);
    __syncthreads();
    if (disjoint(w0, 16, j0, S::kStep, W))
      continue;
    timesTransposed<HS>(Sw, q, Ks);
    __syncwarp();
    softmaxStep<HS>(Sw, i, j0, scale, W, st);
    __syncwarp();
    FragC pv[S::kNs];
#pragma unroll
    for (int n = 0; n < S::kNs; ++n)
      wmma::fill_fragment(pv[n], 0.0f);
    accumulateProduct<HS>(pv, Sw, Vs);
    putAccumulators<HS>(Ow, pv, 1.0f);
    __syncwarp();
#pragma unroll
    for (int t = 0; t < S::kCols; ++t)
      st.o[t] += Ow[(lane / 2) * S::kLd + lane % 2 + 2 * t];
    __syncwarp();
  }
#pragma unroll
  for (int t = 0; t < S::kCols; ++t)
    Ow[(lane / 2) * S::kLd + lane % 2 + 2 * t] = st.o[t] / st.l;
  if (lane % 2 == 0 && i < T)
    lse[hv.bh * T + i] = st.m + logf(st.l);
  __syncthreads();
  storeRows<HS, S::kRows>(out + hv.bt, C, QO, i0, T, hs);
}

//===----------------------------------------------------------------------===//
// Backward, pass 1: dk and dv of one key tile
//===----------------------------------------------------------------------===//

/// The shared memory of the key pass: K and V of the block's keys staged
/// once (then dk and dv on the way out), or the query side's tiles.
template <int HS> struct alignas(128) KeyPassShared {
  using S = TcShape<HS>;
  struct Query {
    float Qs[S::kStep * S::kLd], dOs[S::kStep * S::kLd];
    float St[S::kWarps * 16 * S::kSld], dPt[S::kWarps * 16 * S::kSld];
  };
  union {
    float staged[2 * S::kRows * S::kLd];
    Query query;
  };
  float lseS[S::kStep], Ds[S::kStep];
};

/// P^T and dS^T of the warp's keys against query tile i0 (S^T in St, dP^T
/// in dPt), in place; lane: key row lane / 2, query columns lane % 2 + 2 t.
template <int HS>
__device__ void keySoftmax(float *St, float *dPt, const float *lseS,
                           const float *Ds, int64_t j, int64_t i0, int64_t T,
                           float scale, int64_t W) {
  using S = TcShape<HS>;
  const int lane = threadIdx.x % 32, rr = lane / 2, half = lane % 2;
  for (int t = 0; t < S::kPer; ++t) {
    const int c = half + 2 * t;
    const int64_t i = i0 + c;
    const bool visible = j <= i && i < T && j >= windowStart(i, W);
    const float p =
        visible ? __expf(scale * St[rr * S::kSld + c] - lseS[c]) : 0.0f;
    St[rr * S::kSld + c] = tf32(p);
    dPt[rr * S::kSld + c] = tf32(p * (dPt[rr * S::kSld + c] - Ds[c]));
  }
}

/// Query head hv's contribution to the dk and dv of the warp's keys.
template <int HS, typename E>
__device__ void keyPassHead(KeyPassShared<HS> &sh, const FragA (&kf)[HS / 8],
                            const FragA (&vf)[HS / 8], FragC (&dk)[HS / 16],
                            FragC (&dv)[HS / 16], const HeadView &hv,
                            const E *dout, const E *qkv, const E *out,
                            const float *lse, int64_t j0, int64_t T, int64_t C,
                            int hs, float scale, int64_t W) {
  using S = TcShape<HS>;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t k0 = j0 + 16 * warp;
  float *St = sh.query.St + warp * 16 * S::kSld;
  float *dPt = sh.query.dPt + warp * 16 * S::kSld;
  // The last query that sees key j0 + kRows - 1 is j0 + kRows - 2 + W.
  const int64_t iEnd =
      W > 0 && j0 + S::kRows - 1 + W < T ? j0 + S::kRows - 1 + W : T;
  for (int64_t i0 = j0; i0 < iEnd; i0 += S::kStep) {
    __syncthreads(); // the previous tile is done with the query side
    loadRows<HS, S::kStep>(sh.query.Qs, qkv + hv.q, hv.ld, i0, T, hs);
    loadRows<HS, S::kStep>(sh.query.dOs, dout + hv.bt, C, i0, T, hs);
    tileD<HS>(sh.Ds, dout + hv.bt, out + hv.bt, i0, S::kStep, T, C, hs);
    for (int r = threadIdx.x; r < S::kStep; r += blockDim.x)
      sh.lseS[r] = i0 + r < T ? lse[hv.bh * T + i0 + r] : 0.0f;
    __syncthreads();
    if (disjoint(i0, S::kStep, k0, 16, W))
      continue;
    timesTransposed<HS>(St, kf, sh.query.Qs);
    timesTransposed<HS>(dPt, vf, sh.query.dOs);
    __syncwarp();
    keySoftmax<HS>(St, dPt, sh.lseS, sh.Ds, k0 + lane / 2, i0, T, scale, W);
    __syncwarp();
    accumulateProduct<HS>(dv, St, sh.query.dOs);
    accumulateProduct<HS>(dk, dPt, sh.query.Qs);
  }
}

/// One (b, kv head) per blockIdx.x, one tile of kRows keys per blockIdx.y,
/// over the kv head's query heads in order and their query tiles i0 >= j0.
template <int HS, typename E>
__global__ void __launch_bounds__(TcShape<HS>::kThreads)
    tcKeyPassKernel(E *__restrict__ dqkv, const E *__restrict__ dout,
                    const E *__restrict__ qkv, const E *__restrict__ out,
                    const float *__restrict__ lse, int64_t T, int64_t C,
                    int64_t NH, int64_t KV, int hs, float scale, int64_t W) {
  using S = TcShape<HS>;
  using Shared = KeyPassShared<HS>;
  __shared__ Shared shared[1];
  Shared &sh = shared[0];
  const int64_t b = blockIdx.x / KV, g = NH / KV, h0 = blockIdx.x % KV * g;
  const int64_t j0 = int64_t(blockIdx.y) * S::kRows;
  const int warp = threadIdx.x / 32;
  const HeadView kv = headView(b, h0, T, C, NH, KV, hs);
  float *Kst = sh.staged, *Vst = sh.staged + S::kRows * S::kLd;
  loadRows<HS, S::kRows>(Kst, qkv + kv.k, kv.ld, j0, T, hs);
  loadRows<HS, S::kRows>(Vst, qkv + kv.k + KV * hs, kv.ld, j0, T, hs);
  __syncthreads();
  FragA kf[S::kKs], vf[S::kKs];
  loadRowsA<HS>(kf, Kst + warp * 16 * S::kLd);
  loadRowsA<HS>(vf, Vst + warp * 16 * S::kLd);
  FragC dk[S::kNs], dv[S::kNs];
#pragma unroll
  for (int n = 0; n < S::kNs; ++n) {
    wmma::fill_fragment(dk[n], 0.0f);
    wmma::fill_fragment(dv[n], 0.0f);
  }
  for (int64_t h = h0; h < h0 + g; ++h)
    keyPassHead<HS>(sh, kf, vf, dk, dv, headView(b, h, T, C, NH, KV, hs), dout,
                    qkv, out, lse, j0, T, C, hs, scale, W);
  __syncthreads(); // the staging area takes dk and dv
  putAccumulators<HS>(Kst + warp * 16 * S::kLd, dk, scale);
  putAccumulators<HS>(Vst + warp * 16 * S::kLd, dv, 1.0f);
  __syncthreads();
  storeRows<HS, S::kRows>(dqkv + kv.k, kv.ld, Kst, j0, T, hs);
  storeRows<HS, S::kRows>(dqkv + kv.k + KV * hs, kv.ld, Vst, j0, T, hs);
}

//===----------------------------------------------------------------------===//
// Backward, pass 2: dq of one query tile
//===----------------------------------------------------------------------===//

/// The shared memory of the query pass: q and dO of the block's queries
/// staged once (then dq on the way out), or the key side's tiles.
template <int HS> struct alignas(128) QueryPassShared {
  using S = TcShape<HS>;
  struct Key {
    float Ks[S::kStep * S::kLd], Vs[S::kStep * S::kLd];
    float Ss[S::kWarps * 16 * S::kSld], dPs[S::kWarps * 16 * S::kSld];
  };
  union {
    float staged[2 * S::kRows * S::kLd];
    Key key;
  };
};

/// dS of the warp's queries against key tile j0 (S in Ss, dP in dPs) into
/// dPs; lane: query row lane / 2, key columns lane % 2 + 2 t.
template <int HS>
__device__ void querySoftmax(const float *Ss, float *dPs, int64_t i, int64_t j0,
                             float lseI, float D, int64_t T, float scale,
                             int64_t W) {
  using S = TcShape<HS>;
  const int lane = threadIdx.x % 32, rr = lane / 2, half = lane % 2;
  const int64_t lo = windowStart(i, W);
  for (int t = 0; t < S::kPer; ++t) {
    const int c = half + 2 * t;
    const int64_t j = j0 + c;
    const float p = j <= i && j >= lo && i < T
                        ? __expf(scale * Ss[rr * S::kSld + c] - lseI)
                        : 0.0f;
    dPs[rr * S::kSld + c] = tf32(p * (dPs[rr * S::kSld + c] - D));
  }
}

/// D and lse of the lane's query row i (two lanes per row share them).
template <typename E>
__device__ void queryRowStats(const E *dO, const E *o, const float *lse,
                              int64_t i, int64_t T, int64_t C, int64_t bh,
                              int hs, float &D, float &lseI) {
  float acc = 0.0f;
  if (i < T)
    for (int d = threadIdx.x % 2; d < hs; d += 2)
      acc += toFloat(dO[i * C + d]) * toFloat(o[i * C + d]);
  D = acc + __shfl_xor_sync(kFullMask, acc, 1);
  lseI = i < T ? lse[bh * T + i] : 0.0f;
}

/// One (b, h) per blockIdx.x, one tile of kRows queries per blockIdx.y (the
/// last first), over its kv head's key tiles up to the tile's last query.
template <int HS, typename E>
__global__ void __launch_bounds__(TcShape<HS>::kThreads)
    tcQueryPassKernel(E *__restrict__ dqkv, const E *__restrict__ dout,
                      const E *__restrict__ qkv, const E *__restrict__ out,
                      const float *__restrict__ lse, int64_t T, int64_t C,
                      int64_t NH, int64_t KV, int hs, float scale, int64_t W) {
  using S = TcShape<HS>;
  using Shared = QueryPassShared<HS>;
  __shared__ Shared shared[1];
  Shared &sh = shared[0];
  const HeadView hv =
      headView(blockIdx.x / NH, blockIdx.x % NH, T, C, NH, KV, hs);
  const int64_t i0 = (int64_t(gridDim.y) - 1 - blockIdx.y) * S::kRows;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t w0 = i0 + 16 * warp, i = w0 + lane / 2;
  float *Qst = sh.staged, *dOst = sh.staged + S::kRows * S::kLd;
  loadRows<HS, S::kRows>(Qst, qkv + hv.q, hv.ld, i0, T, hs);
  loadRows<HS, S::kRows>(dOst, dout + hv.bt, C, i0, T, hs);
  __syncthreads();
  FragA qf[S::kKs], df[S::kKs];
  loadRowsA<HS>(qf, Qst + warp * 16 * S::kLd);
  loadRowsA<HS>(df, dOst + warp * 16 * S::kLd);
  float D, lseI;
  queryRowStats(dout + hv.bt, out + hv.bt, lse, i, T, C, hv.bh, hs, D, lseI);
  FragC dq[S::kNs];
#pragma unroll
  for (int n = 0; n < S::kNs; ++n)
    wmma::fill_fragment(dq[n], 0.0f);
  float *Sw = sh.key.Ss + warp * 16 * S::kSld;
  float *dPw = sh.key.dPs + warp * 16 * S::kSld;
  const E *k = qkv + hv.k, *v = k + KV * hs;
  for (int64_t j0 = windowStart(i0, W) / S::kStep * S::kStep;
       j0 < i0 + S::kRows; j0 += S::kStep) {
    __syncthreads(); // the previous tile (or the staging) is done
    loadRows<HS, S::kStep>(sh.key.Ks, k, hv.ld, j0, T, hs);
    loadRows<HS, S::kStep>(sh.key.Vs, v, hv.ld, j0, T, hs);
    __syncthreads();
    if (disjoint(w0, 16, j0, S::kStep, W))
      continue;
    timesTransposed<HS>(Sw, qf, sh.key.Ks);
    timesTransposed<HS>(dPw, df, sh.key.Vs);
    __syncwarp();
    querySoftmax<HS>(Sw, dPw, i, j0, lseI, D, T, scale, W);
    __syncwarp();
    accumulateProduct<HS>(dq, dPw, sh.key.Ks);
  }
  __syncthreads(); // the staging area takes dq
  putAccumulators<HS>(Qst + warp * 16 * S::kLd, dq, scale);
  __syncthreads();
  storeRows<HS, S::kRows>(dqkv + hv.q, hv.ld, Qst, i0, T, hs);
}

//===----------------------------------------------------------------------===//
// Launches
//===----------------------------------------------------------------------===//

template <int HS> dim3 tcGrid(int64_t B, int64_t T, int64_t heads) {
  const int64_t rows = TcShape<HS>::kRows;
  return dim3(unsigned(B * heads), unsigned((T + rows - 1) / rows));
}

template <int HS, typename E>
void tcForward(const Context &ctx, E *out, float *lse, const E *qkv, int64_t B,
               int64_t T, int64_t C, int64_t NH, int64_t KV, int64_t W) {
  const int hs = int(C / NH);
  tcForwardKernel<HS, E>
      <<<tcGrid<HS>(B, T, NH), TcShape<HS>::kThreads, 0, ctx.stream>>>(
          out, lse, qkv, T, C, NH, KV, hs, 1.0f / std::sqrt(float(hs)), W);
  checkLaunch("blockedAttentionForward (tensor cores)");
}

template <int HS, typename E>
void tcBackward(const Context &ctx, E *dqkv, const E *dout, const E *qkv,
                const E *out, const float *lse, int64_t B, int64_t T, int64_t C,
                int64_t NH, int64_t KV, int64_t W, bool keys, bool queries) {
  const int hs = int(C / NH);
  const float scale = 1.0f / std::sqrt(float(hs));
  constexpr int threads = TcShape<HS>::kThreads;
  if (keys) {
    tcKeyPassKernel<HS, E><<<tcGrid<HS>(B, T, KV), threads, 0, ctx.stream>>>(
        dqkv, dout, qkv, out, lse, T, C, NH, KV, hs, scale, W);
    checkLaunch("blockedAttentionBackward (tensor cores, dk, dv)");
  }
  if (queries) {
    tcQueryPassKernel<HS, E><<<tcGrid<HS>(B, T, NH), threads, 0, ctx.stream>>>(
        dqkv, dout, qkv, out, lse, T, C, NH, KV, hs, scale, W);
    checkLaunch("blockedAttentionBackward (tensor cores, dq)");
  }
}

} // namespace

bool firstTensorCoreKernels() {
  const char *v = std::getenv("FSDP_CUDA_ATTENTION");
  return v && std::strcmp(v, "wmma1") == 0;
}

template <typename E>
void wmma1AttentionForward(const Context &ctx, int bucket, E *out, float *lse,
                           const E *qkv, int64_t B, int64_t T, int64_t C,
                           int64_t NH, int64_t KV, int64_t W) {
  switch (bucket) {
  case 32:
    return tcForward<32, E>(ctx, out, lse, qkv, B, T, C, NH, KV, W);
  case 64:
    return tcForward<64, E>(ctx, out, lse, qkv, B, T, C, NH, KV, W);
  default:
    return tcForward<128, E>(ctx, out, lse, qkv, B, T, C, NH, KV, W);
  }
}

template <typename E>
void wmma1AttentionBackward(const Context &ctx, int bucket, E *dqkv,
                            const E *dout, const E *qkv, const E *out,
                            const float *lse, int64_t B, int64_t T, int64_t C,
                            int64_t NH, int64_t KV, int64_t W, bool keys,
                            bool queries) {
  switch (bucket) {
  case 32:
    return tcBackward<32, E>(ctx, dqkv, dout, qkv, out, lse, B, T, C, NH, KV, W,
                             keys, queries);
  case 64:
    return tcBackward<64, E>(ctx, dqkv, dout, qkv, out, lse, B, T, C, NH, KV, W,
                             keys, queries);
  default:
    return tcBackward<128, E>(ctx, dqkv, dout, qkv, out, lse, B, T, C, NH, KV,
                              W, keys, queries);
  }
}

template <typename E>
void tensorCoreAttentionForward(const Context &ctx, int bucket, E *out,
                                float *lse, const E *qkv, int64_t B, int64_t T,
                                int64_t C, int64_t NH, int64_t KV, int64_t W) {
  if (firstTensorCoreKernels())
    return wmma1AttentionForward(ctx, bucket, out, lse, qkv, B, T, C, NH, KV,
                                 W);
  pipelinedAttentionForward(ctx, bucket, out, lse, qkv, B, T, C, NH, KV, W);
}

template <typename E>
void tensorCoreAttentionBackward(const Context &ctx, int bucket, E *dqkv,
                                 const E *dout, const E *qkv, const E *out,
                                 const float *lse, int64_t B, int64_t T,
                                 int64_t C, int64_t NH, int64_t KV, int64_t W) {
  if (firstTensorCoreKernels())
    return wmma1AttentionBackward(ctx, bucket, dqkv, dout, qkv, out, lse, B, T,
                                  C, NH, KV, W, true, true);
  pipelinedAttentionBackward(ctx, bucket, dqkv, dout, qkv, out, lse, B, T, C,
                             NH, KV, W);
}

#define FSDP_INSTANTIATE(E)                                                    \
  template void tensorCoreAttentionForward<E>(                                 \
      const Context &, int, E *, float *, const E *, int64_t, int64_t,         \
      int64_t, int64_t, int64_t, int64_t);                                     \
  template void tensorCoreAttentionBackward<E>(                                \
      const Context &, int, E *, const E *, const E *, const E *,              \
      const float *, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t);    \
  template void wmma1AttentionForward<E>(const Context &, int, E *, float *,   \
                                         const E *, int64_t, int64_t, int64_t, \
                                         int64_t, int64_t, int64_t);           \
  template void wmma1AttentionBackward<E>(                                     \
      const Context &, int, E *, const E *, const E *, const E *,              \
      const float *, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,     \
      bool, bool);
FSDP_CUDA_ELEMENT_TYPES(FSDP_INSTANTIATE)
#undef FSDP_INSTANTIATE

} // namespace fsdp::rt::cuda::detail
