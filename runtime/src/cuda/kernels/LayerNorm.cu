//===- LayerNorm.cu - layer and RMS normalisation -------------------------===//
//
// As on the CPU (llm.c's scheme): the forward saves each row's mean and
// rstd, the backward uses them.
//
// Row kernels run one warp per row (rows of C ~ 768 floats: 24 per lane),
// each lane striding over the columns so that every load is coalesced; the
// passes after the first re-read the row from L1. The statistics are
// two-pass (mean, then the variance of the centred values), summed per lane
// in float and across the warp by a fixed shuffle tree.
//
// In bf16 every element is widened where it is read (the row is read
// three times, each time widened the same way) and out, dx, dw, db are
// rounded once; mean and rstd are float always.
//
// dw and db are column sums over all N rows: the deterministic column
// reduction of Common.cuh (each block owns a few columns and reads all rows
// of them), in a separate launch from the row-wise dx kernel.
//
// RMS normalisation (Llama's) is the same scheme without the mean and the
// bias: one warp per row, rstd saved, dw by the column reduction.
//
//===----------------------------------------------------------------------===//

#include "Common.cuh"

namespace fsdp::rt::cuda {
namespace {

constexpr int kRowThreads = 256; // 8 rows per block

template <typename E>
__global__ void __launch_bounds__(kRowThreads)
    layerNormForwardKernel(E *__restrict__ out, float *__restrict__ mean,
                           float *__restrict__ rstd, const E *__restrict__ x,
                           const E *__restrict__ w, const E *__restrict__ b,
                           int64_t N, int64_t C, float eps) {
  using detail::toFloat;
  const int lane = threadIdx.x & 31;
  const int64_t i = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  if (i >= N)
    return;
  const E *xi = x + i * C;
  float sum = 0.0f;
  for (int64_t c = lane; c < C; c += 32)
    sum += toFloat(xi[c]);
  const float m = detail::warpSum(sum) / float(C);
  float sq = 0.0f;
  for (int64_t c = lane; c < C; c += 32) {
    const float d = toFloat(xi[c]) - m;
    sq += d * d;
  }
  const float s = 1.0f / sqrtf(detail::warpSum(sq) / float(C) + eps);
  E *o = out + i * C;
  for (int64_t c = lane; c < C; c += 32)
    o[c] = detail::fromFloat<E>((toFloat(xi[c]) - m) * s * toFloat(w[c]) +
                                toFloat(b[c]));
  if (lane == 0) {
    mean[i] = m;
    rstd[i] = s;
  }
}

/// dx = rstd (dnorm - mean(dnorm) - norm mean(dnorm norm)), with
/// norm = (x - mean) rstd and dnorm = w dout.
template <typename E>
__global__ void __launch_bounds__(kRowThreads)
    layerNormBackwardDxKernel(E *__restrict__ dx, const E *__restrict__ dout,
                              const E *__restrict__ x, const E *__restrict__ w,
                              const float *__restrict__ mean,
                              const float *__restrict__ rstd, int64_t N,
                              int64_t C) {
  using detail::toFloat;
  const int lane = threadIdx.x & 31;
  const int64_t i = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  if (i >= N)
    return;
  const E *xi = x + i * C, *di = dout + i * C;
  const float m = mean[i], s = rstd[i];
  float sumD = 0.0f, sumDN = 0.0f;
  for (int64_t c = lane; c < C; c += 32) {
    const float norm = (toFloat(xi[c]) - m) * s;
    const float dnorm = toFloat(w[c]) * toFloat(di[c]);
    sumD += dnorm;
    sumDN += dnorm * norm;
  }
  const float meanD = detail::warpSum(sumD) / float(C);
  const float meanDN = detail::warpSum(sumDN) / float(C);
  E *o = dx + i * C;
  for (int64_t c = lane; c < C; c += 32) {
    const float norm = (toFloat(xi[c]) - m) * s;
    const float dnorm = toFloat(w[c]) * toFloat(di[c]);
    o[c] = detail::fromFloat<E>((dnorm - meanD - norm * meanDN) * s);
  }
}

template <typename E>
__global__ void __launch_bounds__(kRowThreads)
    rmsNormForwardKernel(E *__restrict__ out, float *__restrict__ rstd,
                         const E *__restrict__ x, const E *__restrict__ w,
                         int64_t N, int64_t C, float eps) {
  using detail::toFloat;
  const int lane = threadIdx.x & 31;
  const int64_t i = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  if (i >= N)
    return;
  const E *xi = x + i * C;
  float sq = 0.0f;
  for (int64_t c = lane; c < C; c += 32) {
    const float v = toFloat(xi[c]);
    sq += v * v;
  }
  const float meanSquare = detail::warpSum(sq) / float(C);
  const float s = 1.0f / sqrtf(meanSquare + eps);
  E *o = out + i * C;
  for (int64_t c = lane; c < C; c += 32)
    o[c] = detail::fromFloat<E>(toFloat(xi[c]) * s * toFloat(w[c]));
  if (lane == 0)
    rstd[i] = s;
}

/// dx = rstd (dn - n mean(dn n)), with n = x rstd and dn = w dout.
template <typename E>
__global__ void __launch_bounds__(kRowThreads)
    rmsNormBackwardDxKernel(E *__restrict__ dx, const E *__restrict__ dout,
                            const E *__restrict__ x, const E *__restrict__ w,
                            const float *__restrict__ rstd, int64_t N,
                            int64_t C) {
  using detail::toFloat;
  const int lane = threadIdx.x & 31;
  const int64_t i = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  if (i >= N)
    return;
  const E *xi = x + i * C, *di = dout + i * C;
  const float s = rstd[i];
  float sumDN = 0.0f;
  for (int64_t c = lane; c < C; c += 32)
    sumDN += toFloat(w[c]) * toFloat(di[c]) * (toFloat(xi[c]) * s);
  const float meanDN = detail::warpSum(sumDN) / float(C);
  E *o = dx + i * C;
  for (int64_t c = lane; c < C; c += 32)
    o[c] = detail::fromFloat<E>(
        (toFloat(w[c]) * toFloat(di[c]) - toFloat(xi[c]) * s * meanDN) * s);
}

/// Qwen3's q_norm/k_norm: one warp per (row, q or k head) of qkv, as
/// rmsNormForwardKernel over the head's hs elements; the warps of heads
/// h < KV also copy value head h.
template <typename E>
__global__ void __launch_bounds__(kRowThreads)
    qkNormForwardKernel(E *__restrict__ out, float *__restrict__ rstd,
                        const E *__restrict__ qkv, const E *__restrict__ qw,
                        const E *__restrict__ kw, int64_t rows, int64_t H,
                        int64_t KV, int64_t hs, float eps) {
  using detail::toFloat;
  const int lane = threadIdx.x & 31;
  const int64_t QK = H + KV, W = (H + 2 * KV) * hs;
  const int64_t i = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  if (i >= rows * QK)
    return;
  const int64_t r = i / QK, h = i % QK;
  const E *xh = qkv + r * W + h * hs;
  const E *w = h < H ? qw : kw;
  float sq = 0.0f;
  for (int64_t c = lane; c < hs; c += 32) {
    const float v = toFloat(xh[c]);
    sq += v * v;
  }
  const float s = 1.0f / sqrtf(detail::warpSum(sq) / float(hs) + eps);
  E *oh = out + r * W + h * hs;
  for (int64_t c = lane; c < hs; c += 32)
    oh[c] = detail::fromFloat<E>(toFloat(xh[c]) * s * toFloat(w[c]));
  if (lane == 0)
    rstd[i] = s;
  if (h < KV) {
    const int64_t v0 = r * W + (QK + h) * hs;
    for (int64_t c = lane; c < hs; c += 32)
      out[v0 + c] = qkv[v0 + c];
  }
}

/// dx of qk_norm per (row, q or k head), as rmsNormBackwardDxKernel; the
/// warps of heads h < KV copy value head h's gradient.
template <typename E>
__global__ void __launch_bounds__(kRowThreads)
    qkNormBackwardDxKernel(E *__restrict__ dx, const E *__restrict__ dout,
                           const E *__restrict__ qkv, const E *__restrict__ qw,
                           const E *__restrict__ kw,
                           const float *__restrict__ rstd, int64_t rows,
                           int64_t H, int64_t KV, int64_t hs) {
  using detail::toFloat;
  const int lane = threadIdx.x & 31;
  const int64_t QK = H + KV, W = (H + 2 * KV) * hs;
  const int64_t i = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  if (i >= rows * QK)
    return;
  const int64_t r = i / QK, h = i % QK, at = r * W + h * hs;
  const E *xh = qkv + at, *dh = dout + at, *w = h < H ? qw : kw;
  const float s = rstd[i];
  float sumDN = 0.0f;
  for (int64_t c = lane; c < hs; c += 32)
    sumDN += toFloat(w[c]) * toFloat(dh[c]) * (toFloat(xh[c]) * s);
  const float meanDN = detail::warpSum(sumDN) / float(hs);
  for (int64_t c = lane; c < hs; c += 32)
    dx[at + c] = detail::fromFloat<E>(
        (toFloat(w[c]) * toFloat(dh[c]) - toFloat(xh[c]) * s * meanDN) * s);
  if (h < KV) {
    const int64_t v0 = r * W + (QK + h) * hs;
    for (int64_t c = lane; c < hs; c += 32)
      dx[v0 + c] = dout[v0 + c];
  }
}

constexpr int kQkGainWarps = 32;

/// dqw and dkw: block b's lanes own 32 columns of one gain (q's for the
/// first ceil(hs/32) blocks, then k's); its warps stride over the (row,
/// head) items of that gain, and warp 0 sums the warps' partials in warp
/// order: the same sums on every run.
template <typename E>
__global__ void __launch_bounds__(kQkGainWarps * 32)
    qkNormGainKernel(E *__restrict__ dqw, E *__restrict__ dkw,
                     const E *__restrict__ dout, const E *__restrict__ qkv,
                     const float *__restrict__ rstd, int64_t rows, int64_t H,
                     int64_t KV, int64_t hs) {
  using detail::toFloat;
  __shared__ float partial[kQkGainWarps][33];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t QK = H + KV, W = (H + 2 * KV) * hs;
  const int64_t perGain = (hs + 31) / 32;
  const bool isQ = int64_t(blockIdx.x) < perGain;
  const int64_t c = (int64_t(blockIdx.x) % perGain) * 32 + lane;
  const int64_t heads = isQ ? H : KV, h0 = isQ ? 0 : H;
  float acc = 0.0f;
  if (c < hs)
    for (int64_t j = warp; j < rows * heads; j += kQkGainWarps) {
      const int64_t r = j / heads, h = h0 + j % heads;
      const int64_t at = r * W + h * hs + c;
      acc += toFloat(dout[at]) * (toFloat(qkv[at]) * rstd[r * QK + h]);
    }
  partial[warp][lane] = acc;
  __syncthreads();
  if (warp == 0 && c < hs) {
    float sum = 0.0f;
    for (int k = 0; k < kQkGainWarps; ++k)
      sum += partial[k][lane];
    (isQ ? dqw : dkw)[c] = detail::fromFloat<E>(sum);
  }
}

unsigned rowBlocks(int64_t N) {
  return unsigned((N * 32 + kRowThreads - 1) / kRowThreads);
}

} // namespace

/// out = (x - mean) * rstd * w + b over rows of C; mean, rstd (N) saved.
template <typename E>
void layerNormForward(const Context &ctx, E *out, float *mean, float *rstd,
                      const E *x, const E *w, const E *b, int64_t N, int64_t C,
                      float eps) {
  if (N <= 0)
    return;
  layerNormForwardKernel<<<rowBlocks(N), kRowThreads, 0, ctx.stream>>>(
      out, mean, rstd, x, w, b, N, C, eps);
  detail::checkLaunch("layerNormForward");
}

/// Overwrites dx (N x C), dw (C) and db (C); deterministic. dx must not
/// alias the inputs.
template <typename E>
void layerNormBackward(const Context &ctx, E *dx, E *dw, E *db, const E *dout,
                       const E *x, const E *w, const float *mean,
                       const float *rstd, int64_t N, int64_t C) {
  if (C <= 0)
    return;
  if (N > 0) {
    layerNormBackwardDxKernel<<<rowBlocks(N), kRowThreads, 0, ctx.stream>>>(
        dx, dout, x, w, mean, rstd, N, C);
    detail::checkLaunch("layerNormBackward (dx)");
  }
  detail::launchColumnSum<true>(ctx, "layerNormBackward (dw, db)", dw, db, dout,
                                x, mean, rstd, N, C);
}

/// out = x * rstd * w over rows of C; rstd (N) saved.
template <typename E>
void rmsNormForward(const Context &ctx, E *out, float *rstd, const E *x,
                    const E *w, int64_t N, int64_t C, float eps) {
  if (N <= 0)
    return;
  rmsNormForwardKernel<<<rowBlocks(N), kRowThreads, 0, ctx.stream>>>(
      out, rstd, x, w, N, C, eps);
  detail::checkLaunch("rmsNormForward");
}

/// dx (N x C) and dw (C) overwritten; dw by the deterministic column sum.
template <typename E>
void rmsNormBackward(const Context &ctx, E *dx, E *dw, const E *dout,
                     const E *x, const E *w, const float *rstd, int64_t N,
                     int64_t C) {
  if (C <= 0)
    return;
  if (N > 0) {
    rmsNormBackwardDxKernel<<<rowBlocks(N), kRowThreads, 0, ctx.stream>>>(
        dx, dout, x, w, rstd, N, C);
    detail::checkLaunch("rmsNormBackward (dx)");
  }
  // No mean and no bias: the column sum of dout * x * rstd alone.
  detail::launchColumnSum<true>(ctx, "rmsNormBackward (dw)", dw, (E *)nullptr,
                                dout, x, nullptr, rstd, N, C);
}

/// qk_norm (Qwen3): RMSNorm over each q and k head of qkv
/// (B x T x (H + 2 KV) hs), v copied; rstd (B x T x (H + KV)) saved.
template <typename E>
void qkNormForward(const Context &ctx, E *out, float *rstd, const E *qkv,
                   const E *qw, const E *kw, int64_t B, int64_t T, int64_t H,
                   int64_t KV, int64_t hs, float eps) {
  const int64_t rows = B * T;
  if (rows <= 0 || hs <= 0)
    return;
  qkNormForwardKernel<<<rowBlocks(rows * (H + KV)), kRowThreads, 0,
                        ctx.stream>>>(out, rstd, qkv, qw, kw, rows, H, KV, hs,
                                      eps);
  detail::checkLaunch("qkNormForward");
}

/// dqkv (B x T x W), dqw and dkw (hs each) overwritten; deterministic.
template <typename E>
void qkNormBackward(const Context &ctx, E *dqkv, E *dqw, E *dkw, const E *dout,
                    const E *qkv, const E *qw, const E *kw, const float *rstd,
                    int64_t B, int64_t T, int64_t H, int64_t KV, int64_t hs) {
  const int64_t rows = B * T;
  if (hs <= 0)
    return;
  if (rows > 0) {
    qkNormBackwardDxKernel<<<rowBlocks(rows * (H + KV)), kRowThreads, 0,
                             ctx.stream>>>(dqkv, dout, qkv, qw, kw, rstd, rows,
                                           H, KV, hs);
    detail::checkLaunch("qkNormBackward (dx)");
  }
  qkNormGainKernel<<<unsigned(2 * ((hs + 31) / 32)), kQkGainWarps * 32, 0,
                     ctx.stream>>>(dqw, dkw, dout, qkv, rstd, rows, H, KV, hs);
  detail::checkLaunch("qkNormBackward (gains)");
}

#define FSDP_INSTANTIATE(E)                                                    \
  template void layerNormForward<E>(const Context &, E *, float *, float *,    \
                                    const E *, const E *, const E *, int64_t,  \
                                    int64_t, float);                           \
  template void layerNormBackward<E>(                                          \
      const Context &, E *, E *, E *, const E *, const E *, const E *,         \
      const float *, const float *, int64_t, int64_t);                         \
  template void rmsNormForward<E>(const Context &, E *, float *, const E *,    \
                                  const E *, int64_t, int64_t, float);         \
  template void rmsNormBackward<E>(const Context &, E *, E *, const E *,       \
                                   const E *, const E *, const float *,        \
                                   int64_t, int64_t);                          \
  template void qkNormForward<E>(const Context &, E *, float *, const E *,     \
                                 const E *, const E *, int64_t, int64_t,       \
                                 int64_t, int64_t, int64_t, float);            \
  template void qkNormBackward<E>(                                             \
      const Context &, E *, E *, E *, const E *, const E *, const E *,         \
      const E *, const float *, int64_t, int64_t, int64_t, int64_t, int64_t);
FSDP_CUDA_ELEMENT_TYPES(FSDP_INSTANTIATE)
#undef FSDP_INSTANTIATE

} // namespace fsdp::rt::cuda
