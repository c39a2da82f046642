//===- TensorCoreBackward.cu - attention backward on tensor cores ---------===//
//
// The blocked attention's backward (BlockedAttention.cu's two deterministic
// passes: dk and dv per key tile over the query tiles, then dq per query
// tile over the key tiles) with its products on TF32 tensor cores,
// pipelined (TensorCoreTiles.cuh): each tile's global loads are issued
// before the previous tile's MMAs. Numerics as TensorCoreForward.cu's:
// every value an MMA reads (q, k, v, dO, P, dS) rounded to TF32 once, where
// it is written to shared memory; scores, D, lse and the accumulators
// fp32; dq, dk, dv rounded to E once, when stored.
//
// Blocks of 8 warps (128 rows) up to head size 64 against tiles of 16: a
// tile loaded (q, dO, their D and lse in the key pass; k and v in the
// query pass) serves 8 warps, and the per-warp scores stay small enough
// for 48 KiB. The key pass keeps k, v, dk and dv of its 16 keys in
// fragments (128 registers a thread at head size 64, which is why a block
// is one per SM); at head size 128 that would be 256, so the key pass
// there is the first tensor-core kernels' (wideKeyPass below: 2 warps, no
// prefetch, some spills), the dq pass the pipelined one.
//
// Determinism: every output row has one owner and every sum a fixed order
// (tiles ascending, the MMA's own order within a tile): the same bits on
// every run.
//
//===----------------------------------------------------------------------===//

#include "TensorCoreAttention.h"
#include "TensorCoreTiles.cuh"

#include <cmath>

namespace fsdp::rt::cuda::detail {
namespace {

using namespace tc;

template <int HS> using KeyShape = Shape<HS, 8, 16>;
template <int HS> using QueryShape = Shape<HS, HS <= 64 ? 8 : 4, 16>;

/// D_i = dO_i . O_i of a tile's Rows rows, their operands staged in
/// registers like the tiles': Threads / Rows consecutive lanes per row,
/// lane `part` of them holding columns part, part + kGroup, ...
template <int HS, int Rows, int Threads, typename E> struct StagedDots {
  static constexpr int kGroup = Threads / Rows;
  static constexpr int kN = HS / kGroup;
  static_assert(kGroup <= 32 && kN * kGroup == HS, "row mapping");
  E a[kN], b[kN];

  __device__ void load(const E *__restrict__ dO, const E *__restrict__ o,
                       int64_t row0, int64_t T, int64_t C, int hs) {
    const E zero = fromFloat<E>(0.0f);
    const int r = threadIdx.x / kGroup, part = threadIdx.x % kGroup;
    const int64_t at = (row0 + r) * C + part;
#pragma unroll
    for (int k = 0; k < kN; ++k) {
      const bool in = row0 + r < T && part + k * kGroup < hs;
      a[k] = in ? dO[at + k * kGroup] : zero;
      b[k] = in ? o[at + k * kGroup] : zero;
    }
  }

  /// The row sums into Ds[Rows] (a fixed shuffle tree: the same bits on
  /// every run).
  __device__ void store(float *Ds) const {
    float acc = 0.0f;
#pragma unroll
    for (int k = 0; k < kN; ++k)
      acc += toFloat(a[k]) * toFloat(b[k]);
#pragma unroll
    for (int offset = kGroup / 2; offset > 0; offset >>= 1)
      acc += __shfl_xor_sync(kFullMask, acc, offset);
    if (threadIdx.x % kGroup == 0)
      Ds[threadIdx.x / kGroup] = acc;
  }
};

//===----------------------------------------------------------------------===//
// Pass 1: dk and dv of one key tile
//===----------------------------------------------------------------------===//

template <int HS> struct alignas(128) KeyShared {
  using S = KeyShape<HS>;
  struct Loop {
    float Qs[S::kStep * S::kLd], dOs[S::kStep * S::kLd];
    float St[S::kWarps * 16 * S::kSld], dPt[S::kWarps * 16 * S::kSld];
    float lseS[S::kStep], Ds[S::kStep];
  };
  union {
    float staged[S::kRows * S::kLd]; // k, v on the way in, dk, dv out
    Loop loop;
  };
};

/// One query tile of one head, staged: q, dO, their D and lse.
template <int HS, typename E> struct QueryTile {
  using S = KeyShape<HS>;
  Staged<HS, S::kStep, S::kThreads, E> q, d;
  StagedDots<HS, S::kStep, S::kThreads, E> dots;
  float lse;

  __device__ void load(const HeadView &hv, const E *dout, const E *qkv,
                       const E *out, const float *lseAll, int64_t i0, int64_t T,
                       int64_t C, int hs) {
    q.load(qkv + hv.q, hv.ld, i0, T, hs);
    d.load(dout + hv.bt, C, i0, T, hs);
    dots.load(dout + hv.bt, out + hv.bt, i0, T, C, hs);
    const int r = threadIdx.x;
    lse = r < S::kStep && i0 + r < T ? lseAll[hv.bh * T + i0 + r] : 0.0f;
  }

  __device__ void store(typename KeyShared<HS>::Loop &sh) {
    q.template store<S::kLd>(sh.Qs);
    d.template store<S::kLd>(sh.dOs);
    dots.store(sh.Ds);
    if (threadIdx.x < S::kStep)
      sh.lseS[threadIdx.x] = lse;
  }
};

/// P^T and dS^T of the warp's keys against query tile i0 (S^T in St, dP^T
/// in dPt), in place; lane: key row lane / 2, query columns lane % 2 + 2 t.
template <class S>
__device__ void keySoftmax(float *St, float *dPt, const float *lseS,
                           const float *Ds, int64_t j, int64_t i0, int64_t T,
                           float scale, int64_t W, bool all) {
  const int lane = threadIdx.x % 32, half = lane % 2;
  float *s = St + (lane / 2) * S::kSld + half;
  float *dp = dPt + (lane / 2) * S::kSld + half;
  // Query i0 + c sees key j when j <= i0 + c, i0 + c < T and (with a
  // window) i0 + c < j + W: columns lo <= c <= hi.
  int64_t hi = T - 1 - i0;
  if (W > 0 && j + W - 1 - i0 < hi)
    hi = j + W - 1 - i0;
  const Visible vis{int(j - i0 < 0          ? 0
                        : j - i0 > S::kStep ? S::kStep
                                            : j - i0),
                    int(hi >= S::kStep ? S::kStep - 1
                        : hi < -1      ? -1
                                       : hi)};
#pragma unroll
  for (int t = 0; t < S::kPer; ++t) {
    const int c = half + 2 * t;
    const float p = all || vis(c) ? __expf(scale * s[2 * t] - lseS[c]) : 0.0f;
    s[2 * t] = tf32(p);
    dp[2 * t] = tf32(p * (dp[2 * t] - Ds[c]));
  }
}

/// The warp's 16 keys (k0..) against the query tile in sh: dv += P^T dO,
/// dk += dS^T q (unscaled).
template <class S, typename Loop>
__device__ void keyTile(Loop &sh, const FragA (&kf)[S::kKs],
                        const FragA (&vf)[S::kKs], FragC (&dk)[S::kNs],
                        FragC (&dv)[S::kNs], int64_t k0, int64_t i0, int64_t T,
                        float scale, int64_t W) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float *St = sh.St + warp * 16 * S::kSld, *dPt = sh.dPt + warp * 16 * S::kSld;
  timesTransposed<S>(St, kf, sh.Qs);
  timesTransposed<S>(dPt, vf, sh.dOs);
  __syncwarp();
  const bool all = i0 + S::kStep <= T && allVisible(i0, S::kStep, k0, 16, W);
  keySoftmax<S>(St, dPt, sh.lseS, sh.Ds, k0 + lane / 2, i0, T, scale, W, all);
  __syncwarp();
  accumulateProduct<S>(dv, St, sh.dOs);
  accumulateProduct<S>(dk, dPt, sh.Qs);
}

/// One (b, kv head) per blockIdx.x, one tile of kRows keys per blockIdx.y,
/// over the kv head's query heads in order and their query tiles i0 >= j0,
/// the next (head, tile)'s loads in flight.
template <int HS, typename E>
__global__ void __launch_bounds__(KeyShape<HS>::kThreads, 1)
    tcFlashKeyKernel(E *__restrict__ dqkv, const E *__restrict__ dout,
                     const E *__restrict__ qkv, const E *__restrict__ out,
                     const float *__restrict__ lse, int64_t T, int64_t C,
                     int64_t NH, int64_t KV, int hs, float scale, int64_t W) {
  using S = KeyShape<HS>;
  __shared__ KeyShared<HS> shared[1];
  auto &sh = shared[0];
  const int64_t b = blockIdx.x / KV, g = NH / KV, h0 = blockIdx.x % KV * g;
  const int64_t j0 = int64_t(blockIdx.y) * S::kRows;
  const int warp = threadIdx.x / 32;
  const int64_t k0 = j0 + 16 * warp;
  const HeadView kv = headView(b, h0, T, C, NH, KV, hs);
  // The last query that sees key j0 + kRows - 1 is j0 + kRows - 2 + W.
  const int64_t iEnd =
      W > 0 && j0 + S::kRows - 1 + W < T ? j0 + S::kRows - 1 + W : T;
  QueryTile<HS, E> next;
  next.load(kv, dout, qkv, out, lse, j0, T, C, hs);
  FragA kf[S::kKs], vf[S::kKs];
  loadTile<HS, S::kRows, S::kThreads, S::kLd>(sh.staged, qkv + kv.k, kv.ld, j0,
                                              T, hs);
  __syncthreads();
  loadRowsA<S>(kf, sh.staged + warp * 16 * S::kLd);
  __syncthreads();
  loadTile<HS, S::kRows, S::kThreads, S::kLd>(sh.staged, qkv + kv.k + KV * hs,
                                              kv.ld, j0, T, hs);
  __syncthreads();
  loadRowsA<S>(vf, sh.staged + warp * 16 * S::kLd);
  FragC dk[S::kNs], dv[S::kNs];
  zero<S>(dk);
  zero<S>(dv);
  for (int64_t h = h0, i0 = j0; h < h0 + g;) {
    __syncthreads(); // the previous tile (v's staging first) is done
    next.store(sh.loop);
    __syncthreads();
    const int64_t i0n = i0 + S::kStep < iEnd ? i0 + S::kStep : j0;
    const int64_t hn = i0n == j0 ? h + 1 : h;
    if (hn < h0 + g)
      next.load(headView(b, hn, T, C, NH, KV, hs), dout, qkv, out, lse, i0n, T,
                C, hs);
    if (!disjoint(i0, S::kStep, k0, 16, W))
      keyTile<S>(sh.loop, kf, vf, dk, dv, k0, i0, T, scale, W);
    h = hn;
    i0 = i0n;
  }
  __syncthreads(); // the staging area takes dk, then dv
  putAccumulators<S>(sh.staged + warp * 16 * S::kLd, dk, scale);
  __syncthreads();
  storeTile<HS, S::kRows, S::kThreads, S::kLd>(dqkv + kv.k, kv.ld, sh.staged,
                                               j0, T, hs);
  __syncthreads();
  putAccumulators<S>(sh.staged + warp * 16 * S::kLd, dv, 1.0f);
  __syncthreads();
  storeTile<HS, S::kRows, S::kThreads, S::kLd>(dqkv + kv.k + KV * hs, kv.ld,
                                               sh.staged, j0, T, hs);
}

//===----------------------------------------------------------------------===//
// Pass 1 at head size 128: dk and dv of one key tile, unpipelined
//===----------------------------------------------------------------------===//

/// 2 warps (32 keys) against query tiles of 16: k, v, dk and dv of a
/// warp's 16 keys in fragments already take most of a thread's registers,
/// nothing is staged. Tile rows HS + 8 floats apart.
struct WideKeyShape {
  static constexpr int HS = 128;
  static constexpr int kWarps = 2;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kRows = 16 * kWarps;
  static constexpr int kStep = 16;
  static constexpr int kLd = HS + 8;
  static constexpr int kSld = kStep + 8;
  static constexpr int kKs = HS / 8;
  static constexpr int kNs = HS / 16;
  static constexpr int kPer = kStep / 2;
};

/// Rows row0 .. row0 + Rows of an hs-wide slice (row stride ld) into a
/// tile of row stride kLd, TF32-rounded, zeros past T and past hs.
template <int Rows, typename E>
__device__ void loadRows(float *tile, const E *__restrict__ src, int64_t ld,
                         int64_t row0, int64_t T, int hs) {
  using S = WideKeyShape;
  for (int idx = threadIdx.x; idx < Rows * S::HS; idx += blockDim.x) {
    const int r = idx / S::HS, d = idx % S::HS;
    tile[r * S::kLd + d] =
        row0 + r < T && d < hs ? tf32(toFloat(src[(row0 + r) * ld + d])) : 0.0f;
  }
}

/// The tile's rows below T, first hs columns, out to dst (row stride ld).
template <int Rows, typename E>
__device__ void storeRows(E *__restrict__ dst, int64_t ld, const float *tile,
                          int64_t row0, int64_t T, int hs) {
  using S = WideKeyShape;
  for (int idx = threadIdx.x; idx < Rows * S::HS; idx += blockDim.x) {
    const int r = idx / S::HS, d = idx % S::HS;
    if (row0 + r < T && d < hs)
      dst[(row0 + r) * ld + d] = fromFloat<E>(tile[r * S::kLd + d]);
  }
}

/// D_i = dO_i . O_i for each row of a tile of `rows`, by groups of
/// blockDim.x / rows consecutive lanes, into Ds (zero past T).
template <typename E>
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

/// K and V of the block's keys staged once (then dk and dv on the way
/// out), or the query side's tiles.
struct alignas(128) WideKeyShared {
  using S = WideKeyShape;
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
__device__ void wideKeySoftmax(float *St, float *dPt, const float *lseS,
                               const float *Ds, int64_t j, int64_t i0,
                               int64_t T, float scale, int64_t W) {
  using S = WideKeyShape;
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
template <typename E>
__device__ void
wideKeyHead(WideKeyShared &sh, const FragA (&kf)[WideKeyShape::kKs],
            const FragA (&vf)[WideKeyShape::kKs],
            FragC (&dk)[WideKeyShape::kNs], FragC (&dv)[WideKeyShape::kNs],
            const HeadView &hv, const E *dout, const E *qkv, const E *out,
            const float *lse, int64_t j0, int64_t T, int64_t C, int hs,
            float scale, int64_t W) {
  using S = WideKeyShape;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t k0 = j0 + 16 * warp;
  float *St = sh.query.St + warp * 16 * S::kSld;
  float *dPt = sh.query.dPt + warp * 16 * S::kSld;
  // The last query that sees key j0 + kRows - 1 is j0 + kRows - 2 + W.
  const int64_t iEnd =
      W > 0 && j0 + S::kRows - 1 + W < T ? j0 + S::kRows - 1 + W : T;
  for (int64_t i0 = j0; i0 < iEnd; i0 += S::kStep) {
    __syncthreads(); // the previous tile is done with the query side
    loadRows<S::kStep>(sh.query.Qs, qkv + hv.q, hv.ld, i0, T, hs);
    loadRows<S::kStep>(sh.query.dOs, dout + hv.bt, C, i0, T, hs);
    tileD(sh.Ds, dout + hv.bt, out + hv.bt, i0, S::kStep, T, C, hs);
    for (int r = threadIdx.x; r < S::kStep; r += blockDim.x)
      sh.lseS[r] = i0 + r < T ? lse[hv.bh * T + i0 + r] : 0.0f;
    __syncthreads();
    if (disjoint(i0, S::kStep, k0, 16, W))
      continue;
    timesTransposed<S>(St, kf, sh.query.Qs);
    timesTransposed<S>(dPt, vf, sh.query.dOs);
    __syncwarp();
    wideKeySoftmax(St, dPt, sh.lseS, sh.Ds, k0 + lane / 2, i0, T, scale, W);
    __syncwarp();
    accumulateProduct<S>(dv, St, sh.query.dOs);
    accumulateProduct<S>(dk, dPt, sh.query.Qs);
  }
}

/// One (b, kv head) per blockIdx.x, one tile of kRows keys per blockIdx.y,
/// over the kv head's query heads in order and their query tiles i0 >= j0.
template <typename E>
__global__ void __launch_bounds__(WideKeyShape::kThreads)
    tcWideKeyKernel(E *__restrict__ dqkv, const E *__restrict__ dout,
                    const E *__restrict__ qkv, const E *__restrict__ out,
                    const float *__restrict__ lse, int64_t T, int64_t C,
                    int64_t NH, int64_t KV, int hs, float scale, int64_t W) {
  using S = WideKeyShape;
  __shared__ WideKeyShared shared[1];
  WideKeyShared &sh = shared[0];
  const int64_t b = blockIdx.x / KV, g = NH / KV, h0 = blockIdx.x % KV * g;
  const int64_t j0 = int64_t(blockIdx.y) * S::kRows;
  const int warp = threadIdx.x / 32;
  const HeadView kv = headView(b, h0, T, C, NH, KV, hs);
  float *Kst = sh.staged, *Vst = sh.staged + S::kRows * S::kLd;
  loadRows<S::kRows>(Kst, qkv + kv.k, kv.ld, j0, T, hs);
  loadRows<S::kRows>(Vst, qkv + kv.k + KV * hs, kv.ld, j0, T, hs);
  __syncthreads();
  FragA kf[S::kKs], vf[S::kKs];
  loadRowsA<S>(kf, Kst + warp * 16 * S::kLd);
  loadRowsA<S>(vf, Vst + warp * 16 * S::kLd);
  FragC dk[S::kNs], dv[S::kNs];
  zero<S>(dk);
  zero<S>(dv);
  for (int64_t h = h0; h < h0 + g; ++h)
    wideKeyHead(sh, kf, vf, dk, dv, headView(b, h, T, C, NH, KV, hs), dout, qkv,
                out, lse, j0, T, C, hs, scale, W);
  __syncthreads(); // the staging area takes dk and dv
  putAccumulators<S>(Kst + warp * 16 * S::kLd, dk, scale);
  putAccumulators<S>(Vst + warp * 16 * S::kLd, dv, 1.0f);
  __syncthreads();
  storeRows<S::kRows>(dqkv + kv.k, kv.ld, Kst, j0, T, hs);
  storeRows<S::kRows>(dqkv + kv.k + KV * hs, kv.ld, Vst, j0, T, hs);
}

//===----------------------------------------------------------------------===//
// Pass 2: dq of one query tile
//===----------------------------------------------------------------------===//

template <int HS> struct alignas(128) QueryShared {
  using S = QueryShape<HS>;
  struct Loop {
    float Ks[S::kStep * S::kLd], Vs[S::kStep * S::kLd];
    float Ss[S::kWarps * 16 * S::kSld], dPs[S::kWarps * 16 * S::kSld];
  };
  union {
    float staged[S::kRows * S::kLd]; // q, dO on the way in, dq out
    Loop loop;
  };
};

/// dS of the warp's queries against key tile j0 (S in Sw, dP in dPw) into
/// dPw; lane: query row lane / 2, key columns lane % 2 + 2 t.
template <class S>
__device__ void querySoftmax(const float *Sw, float *dPw, int64_t i, int64_t j0,
                             float lseI, float D, int64_t T, float scale,
                             int64_t W, bool all) {
  const int lane = threadIdx.x % 32, half = lane % 2;
  const float *s = Sw + (lane / 2) * S::kSld + half;
  float *dp = dPw + (lane / 2) * S::kSld + half;
  const Visible vis = visibleColumns(i, j0, W, S::kStep);
  const bool real = i < T;
#pragma unroll
  for (int t = 0; t < S::kPer; ++t) {
    const bool visible = all || (real && vis(half + 2 * t));
    const float p = visible ? __expf(scale * s[2 * t] - lseI) : 0.0f;
    dp[2 * t] = tf32(p * (dp[2 * t] - D));
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
/// last first), over its kv head's key tiles up to the tile's last query,
/// the next key tile's loads in flight.
template <int HS, typename E>
__global__ void __launch_bounds__(QueryShape<HS>::kThreads, HS <= 64 ? 2 : 1)
    tcFlashQueryKernel(E *__restrict__ dqkv, const E *__restrict__ dout,
                       const E *__restrict__ qkv, const E *__restrict__ out,
                       const float *__restrict__ lse, int64_t T, int64_t C,
                       int64_t NH, int64_t KV, int hs, float scale, int64_t W) {
  using S = QueryShape<HS>;
  __shared__ QueryShared<HS> shared[1];
  auto &sh = shared[0];
  const HeadView hv =
      headView(blockIdx.x / NH, blockIdx.x % NH, T, C, NH, KV, hs);
  const int64_t i0 = (int64_t(gridDim.y) - 1 - blockIdx.y) * S::kRows;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t w0 = i0 + 16 * warp, i = w0 + lane / 2;
  const E *k = qkv + hv.k, *v = k + KV * hs;
  int64_t j0 = windowStart(i0, W) / S::kStep * S::kStep;
  const int64_t jEnd = i0 + S::kRows;
  Staged<HS, S::kStep, S::kThreads, E> ks, vs;
  ks.load(k, hv.ld, j0, T, hs);
  vs.load(v, hv.ld, j0, T, hs);
  FragA qf[S::kKs], df[S::kKs];
  loadTile<HS, S::kRows, S::kThreads, S::kLd>(sh.staged, qkv + hv.q, hv.ld, i0,
                                              T, hs);
  __syncthreads();
  loadRowsA<S>(qf, sh.staged + warp * 16 * S::kLd);
  __syncthreads();
  loadTile<HS, S::kRows, S::kThreads, S::kLd>(sh.staged, dout + hv.bt, C, i0, T,
                                              hs);
  __syncthreads();
  loadRowsA<S>(df, sh.staged + warp * 16 * S::kLd);
  float D, lseI;
  queryRowStats(dout + hv.bt, out + hv.bt, lse, i, T, C, hv.bh, hs, D, lseI);
  FragC dq[S::kNs];
  zero<S>(dq);
  float *Sw = sh.loop.Ss + warp * 16 * S::kSld;
  float *dPw = sh.loop.dPs + warp * 16 * S::kSld;
  for (; j0 < jEnd; j0 += S::kStep) {
    __syncthreads(); // the previous tile (dO's staging first) is done
    ks.template store<S::kLd>(sh.loop.Ks);
    vs.template store<S::kLd>(sh.loop.Vs);
    __syncthreads();
    if (j0 + S::kStep < jEnd) {
      ks.load(k, hv.ld, j0 + S::kStep, T, hs);
      vs.load(v, hv.ld, j0 + S::kStep, T, hs);
    }
    if (disjoint(w0, 16, j0, S::kStep, W))
      continue;
    timesTransposed<S>(Sw, qf, sh.loop.Ks);
    timesTransposed<S>(dPw, df, sh.loop.Vs);
    __syncwarp();
    querySoftmax<S>(Sw, dPw, i, j0, lseI, D, T, scale, W,
                    w0 + 16 <= T && allVisible(w0, 16, j0, S::kStep, W));
    __syncwarp();
    accumulateProduct<S>(dq, dPw, sh.loop.Ks);
  }
  __syncthreads(); // the staging area takes dq
  putAccumulators<S>(sh.staged + warp * 16 * S::kLd, dq, scale);
  __syncthreads();
  storeTile<HS, S::kRows, S::kThreads, S::kLd>(dqkv + hv.q, hv.ld, sh.staged,
                                               i0, T, hs);
}

//===----------------------------------------------------------------------===//
// Launches
//===----------------------------------------------------------------------===//

template <class S> dim3 rowGrid(int64_t B, int64_t T, int64_t heads) {
  return dim3(unsigned(B * heads), unsigned((T + S::kRows - 1) / S::kRows));
}

template <int HS, typename E>
void flashBackward(const Context &ctx, E *dqkv, const E *dout, const E *qkv,
                   const E *out, const float *lse, int64_t B, int64_t T,
                   int64_t C, int64_t NH, int64_t KV, int64_t W) {
  const int hs = int(C / NH);
  const float scale = 1.0f / std::sqrt(float(hs));
  if constexpr (HS <= 64) {
    using S = KeyShape<HS>;
    tcFlashKeyKernel<HS, E>
        <<<rowGrid<S>(B, T, KV), S::kThreads, 0, ctx.stream>>>(
            dqkv, dout, qkv, out, lse, T, C, NH, KV, hs, scale, W);
    checkLaunch("blockedAttentionBackward (tensor cores, dk, dv)");
  } else {
    using S = WideKeyShape;
    tcWideKeyKernel<E><<<rowGrid<S>(B, T, KV), S::kThreads, 0, ctx.stream>>>(
        dqkv, dout, qkv, out, lse, T, C, NH, KV, hs, scale, W);
    checkLaunch("blockedAttentionBackward (tensor cores, dk, dv, wide)");
  }
  using S = QueryShape<HS>;
  tcFlashQueryKernel<HS, E>
      <<<rowGrid<S>(B, T, NH), S::kThreads, 0, ctx.stream>>>(
          dqkv, dout, qkv, out, lse, T, C, NH, KV, hs, scale, W);
  checkLaunch("blockedAttentionBackward (tensor cores, dq)");
}

} // namespace

template <typename E>
void tensorCoreAttentionBackward(const Context &ctx, int bucket, E *dqkv,
                                 const E *dout, const E *qkv, const E *out,
                                 const float *lse, int64_t B, int64_t T,
                                 int64_t C, int64_t NH, int64_t KV, int64_t W) {
  switch (bucket) {
  case 32:
    return flashBackward<32, E>(ctx, dqkv, dout, qkv, out, lse, B, T, C, NH, KV,
                                W);
  case 64:
    return flashBackward<64, E>(ctx, dqkv, dout, qkv, out, lse, B, T, C, NH, KV,
                                W);
  default:
    return flashBackward<128, E>(ctx, dqkv, dout, qkv, out, lse, B, T, C, NH,
                                 KV, W);
  }
}

#define FSDP_INSTANTIATE(E)                                                    \
  template void tensorCoreAttentionBackward<E>(                                \
      const Context &, int, E *, const E *, const E *, const E *,              \
      const float *, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t);
FSDP_CUDA_ELEMENT_TYPES(FSDP_INSTANTIATE)
#undef FSDP_INSTANTIATE

} // namespace fsdp::rt::cuda::detail
