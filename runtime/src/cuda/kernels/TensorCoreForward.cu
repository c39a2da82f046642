//===- TensorCoreForward.cu - attention forward on tensor cores -----------===//
//
// The blocked attention's forward (BlockedAttention.cu's: FlashAttention-2's
// online softmax over key tiles) with its products on tensor cores, through
// the WMMA API in TF32 (m16n16k8, fp32 accumulators), pipelined
// (TensorCoreTiles.cuh): the next key tile's loads are in flight while the
// current one's MMAs run. The backend takes this path when its GEMMs may
// use TF32 (Context::tf32, fsdp-run's --tf32 on, the default), for fp32
// and bf16 alike; pedantic fp32 keeps the SIMT kernels.
//
// Numerics. Every value an MMA reads (q, k, v, the probabilities) is
// rounded to TF32 once, where it is written to shared memory; scores, the
// softmax, lse and the accumulators are fp32, and out is rounded to E once,
// when stored: the precision of the TF32 GEMMs of the materialized form.
//
// Output in fragments. The online softmax rescales each output row when
// its running maximum moves, which an accumulator fragment cannot do row
// by row (which lane holds which element is unspecified); the first
// tensor-core kernels sent every tile's P V through shared memory for it.
// Here a row keeps a reference maximum m and exponentiates against it
// while the tile's
// maximum stays within kSlack of it: P = exp(s - m) is then at most
// e^kSlack, far from overflow, and P V adds straight into the fragments.
// Only when a row's maximum grows past m + kSlack does the warp rescale:
// its accumulators go through a 16 x 16 scratch a slab at a time. A row's
// first visible tile just sets m (its accumulators are still zero). With
// scores of ordinary size that happens at most once or twice a row.
//
// Determinism: one block per query tile, key tiles ascending, the MMA's
// own order within a tile; the rescale decisions depend on the data only.
//
//===----------------------------------------------------------------------===//

#include "TensorCoreAttention.h"
#include "TensorCoreTiles.cuh"

#include <cmath>

namespace fsdp::rt::cuda::detail {
namespace {

using namespace tc;

/// How far (in units of the scaled scores) a row's maximum may grow past
/// its reference before the warp rescales: probabilities up to e^16 (about
/// 9e6), sums up to T times that, both far inside fp32.
constexpr float kSlack = 16.0f;

/// 8 warps (128 queries) against 32 keys up to head size 64; 4 warps
/// against 16 keys at 128, whose q and output fragments take 128
/// registers a thread already.
template <int HS>
using FwdShape = Shape<HS, HS <= 64 ? 8 : 4, HS <= 64 ? 32 : 16>;

/// The forward's shared memory: q on the way in, out on the way out, and
/// in between the key and value tiles, each warp's scores and its 16 x 16
/// rescale scratch.
template <int HS> struct alignas(128) FwdShared {
  using S = FwdShape<HS>;
  struct Loop {
    float Ks[S::kStep * S::kLd], Vs[S::kStep * S::kLd];
    float Ss[S::kWarps * 16 * S::kSld]; // scores, then probabilities
    float Rs[S::kWarps * 16 * kRld];
  };
  union {
    float QO[S::kRows * S::kLd];
    Loop loop;
  };
};

/// The softmax state of a lane's half of a query row: the reference
/// maximum m (scaled scores) and the sum of the probabilities.
struct RowState {
  float m = -INFINITY, l = 0.0f;
};

/// Multiplies row r of the accumulators by the factor of the lanes 2 r and
/// 2 r + 1 (both hold it), a 16-column slab at a time through Rw.
template <class S>
__device__ void rescaleRows(FragC (&o)[S::kNs], float *Rw, float factor) {
  const int lane = threadIdx.x % 32, rr = lane / 2, half = lane % 2;
#pragma unroll
  for (int n = 0; n < S::kNs; ++n) {
    wmma::store_matrix_sync(Rw, o[n], kRld, wmma::mem_row_major);
    __syncwarp();
#pragma unroll
    for (int t = 0; t < 8; ++t)
      Rw[rr * kRld + half + 2 * t] *= factor;
    __syncwarp();
    wmma::load_matrix_sync(o[n], Rw, kRld, wmma::mem_row_major);
    __syncwarp();
  }
}

/// Scores of the warp's rows against key tile j0 (in Sw) into
/// probabilities in place, against the row's reference maximum (moved, and
/// the accumulators rescaled, past kSlack); lane: row lane / 2, columns
/// lane % 2 + 2 t. `all`: every pair visible, nothing to mask.
template <class S>
__device__ void softmaxTile(float *Sw, float *Rw, FragC (&o)[S::kNs],
                            RowState &st, int64_t i, int64_t j0, float scale,
                            int64_t W, bool all) {
  const int lane = threadIdx.x % 32, rr = lane / 2, half = lane % 2;
  const Visible vis = visibleColumns(i, j0, W, S::kStep);
  float *row = Sw + rr * S::kSld + half;
  float mx = -INFINITY;
#pragma unroll
  for (int t = 0; t < S::kPer; ++t)
    if (all || vis(half + 2 * t))
      mx = fmaxf(mx, row[2 * t]);
  // scale > 0, and rounding is monotonic: the max of the scaled scores.
  mx = scale * fmaxf(mx, __shfl_xor_sync(kFullMask, mx, 1));
  const bool grow = mx > st.m + kSlack; // st.m = -inf: any visible key
  const bool rescale = grow && st.m != -INFINITY;
  const float alpha = grow ? __expf(st.m - mx) : 1.0f;
  if (__ballot_sync(kFullMask, rescale))
    rescaleRows<S>(o, Rw, alpha);
  if (grow) {
    st.l *= alpha;
    st.m = mx;
  }
  float sum = 0.0f;
#pragma unroll
  for (int t = 0; t < S::kPer; ++t) {
    const float p = all || vis(half + 2 * t)
                        ? tf32(__expf(scale * row[2 * t] - st.m))
                        : 0.0f;
    row[2 * t] = p;
    sum += p;
  }
  st.l += sum + __shfl_xor_sync(kFullMask, sum, 1);
}

/// One (b, h) per blockIdx.x, one tile of kRows queries per blockIdx.y (the
/// last, longest, first), over the key tiles from its first row's window
/// start; the next tile's loads in flight while this one is computed.
template <int HS, typename E>
__global__ void __launch_bounds__(FwdShape<HS>::kThreads, HS <= 64 ? 2 : 1)
    tcFlashForwardKernel(E *__restrict__ out, float *__restrict__ lse,
                         const E *__restrict__ qkv, int64_t T, int64_t C,
                         int64_t NH, int64_t KV, int hs, float scale,
                         int64_t W) {
  using S = FwdShape<HS>;
  __shared__ FwdShared<HS> shared[1];
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
  loadTile<HS, S::kRows, S::kThreads, S::kLd>(sh.QO, qkv + hv.q, hv.ld, i0, T,
                                              hs);
  __syncthreads();
  FragA q[S::kKs];
  loadRowsA<S>(q, sh.QO + warp * 16 * S::kLd);
  FragC o[S::kNs];
  zero<S>(o);
  RowState st;
  float *Sw = sh.loop.Ss + warp * 16 * S::kSld;
  float *Rw = sh.loop.Rs + warp * 16 * kRld;
  for (; j0 < jEnd; j0 += S::kStep) {
    __syncthreads(); // the previous tile (q's staging first) is done
    ks.template store<S::kLd>(sh.loop.Ks);
    vs.template store<S::kLd>(sh.loop.Vs);
    __syncthreads();
    if (j0 + S::kStep < jEnd) {
      ks.load(k, hv.ld, j0 + S::kStep, T, hs);
      vs.load(v, hv.ld, j0 + S::kStep, T, hs);
    }
    if (disjoint(w0, 16, j0, S::kStep, W))
      continue;
    timesTransposed<S>(Sw, q, sh.loop.Ks);
    __syncwarp();
    softmaxTile<S>(Sw, Rw, o, st, i, j0, scale, W,
                   allVisible(w0, 16, j0, S::kStep, W));
    __syncwarp();
    accumulateProduct<S>(o, Sw, sh.loop.Vs);
  }
  __syncthreads(); // QO takes the output
  float *Ow = sh.QO + warp * 16 * S::kLd;
  putAccumulators<S>(Ow, o, 1.0f);
  __syncwarp();
  const float inv = 1.0f / st.l;
  for (int t = lane % 2; t < HS; t += 2)
    Ow[(lane / 2) * S::kLd + t] *= inv;
  if (lane % 2 == 0 && i < T)
    lse[hv.bh * T + i] = st.m + logf(st.l);
  __syncthreads();
  storeTile<HS, S::kRows, S::kThreads, S::kLd>(out + hv.bt, C, sh.QO, i0, T,
                                               hs);
}

template <int HS, typename E>
void flashForward(const Context &ctx, E *out, float *lse, const E *qkv,
                  int64_t B, int64_t T, int64_t C, int64_t NH, int64_t KV,
                  int64_t W) {
  using S = FwdShape<HS>;
  const int hs = int(C / NH);
  const dim3 grid(unsigned(B * NH), unsigned((T + S::kRows - 1) / S::kRows));
  tcFlashForwardKernel<HS, E><<<grid, S::kThreads, 0, ctx.stream>>>(
      out, lse, qkv, T, C, NH, KV, hs, 1.0f / std::sqrt(float(hs)), W);
  checkLaunch("blockedAttentionForward (tensor cores)");
}

} // namespace

template <typename E>
void tensorCoreAttentionForward(const Context &ctx, int bucket, E *out,
                                float *lse, const E *qkv, int64_t B, int64_t T,
                                int64_t C, int64_t NH, int64_t KV, int64_t W) {
  switch (bucket) {
  case 32:
    return flashForward<32, E>(ctx, out, lse, qkv, B, T, C, NH, KV, W);
  case 64:
    return flashForward<64, E>(ctx, out, lse, qkv, B, T, C, NH, KV, W);
  default:
    return flashForward<128, E>(ctx, out, lse, qkv, B, T, C, NH, KV, W);
  }
}

#define FSDP_INSTANTIATE(E)                                                    \
  template void tensorCoreAttentionForward<E>(                                 \
      const Context &, int, E *, float *, const E *, int64_t, int64_t,         \
      int64_t, int64_t, int64_t, int64_t);
FSDP_CUDA_ELEMENT_TYPES(FSDP_INSTANTIATE)
#undef FSDP_INSTANTIATE

} // namespace fsdp::rt::cuda::detail
