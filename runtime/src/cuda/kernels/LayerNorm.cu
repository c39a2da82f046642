//===- LayerNorm.cu - layer normalisation ---------------------------------===//
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
// dw and db are column sums over all N rows: the deterministic column
// reduction of Common.cuh (each block owns a few columns and reads all rows
// of them), in a separate launch from the row-wise dx kernel.
//
//===----------------------------------------------------------------------===//

#include "Common.cuh"

namespace fsdp::rt::cuda {
namespace {

constexpr int kRowThreads = 256; // 8 rows per block

__global__ void __launch_bounds__(kRowThreads) layerNormForwardKernel(
    float *__restrict__ out, float *__restrict__ mean, float *__restrict__ rstd,
    const float *__restrict__ x, const float *__restrict__ w,
    const float *__restrict__ b, int64_t N, int64_t C, float eps) {
  const int lane = threadIdx.x & 31;
  const int64_t i = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  if (i >= N)
    return;
  const float *xi = x + i * C;
  float sum = 0.0f;
  for (int64_t c = lane; c < C; c += 32)
    sum += xi[c];
  const float m = detail::warpSum(sum) / float(C);
  float sq = 0.0f;
  for (int64_t c = lane; c < C; c += 32) {
    const float d = xi[c] - m;
    sq += d * d;
  }
  const float s = 1.0f / sqrtf(detail::warpSum(sq) / float(C) + eps);
  float *o = out + i * C;
  for (int64_t c = lane; c < C; c += 32)
    o[c] = (xi[c] - m) * s * w[c] + b[c];
  if (lane == 0) {
    mean[i] = m;
    rstd[i] = s;
  }
}

/// dx = rstd (dnorm - mean(dnorm) - norm mean(dnorm norm)), with
/// norm = (x - mean) rstd and dnorm = w dout.
__global__ void __launch_bounds__(kRowThreads) layerNormBackwardDxKernel(
    float *__restrict__ dx, const float *__restrict__ dout,
    const float *__restrict__ x, const float *__restrict__ w,
    const float *__restrict__ mean, const float *__restrict__ rstd, int64_t N,
    int64_t C) {
  const int lane = threadIdx.x & 31;
  const int64_t i = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  if (i >= N)
    return;
  const float *xi = x + i * C, *di = dout + i * C;
  const float m = mean[i], s = rstd[i];
  float sumD = 0.0f, sumDN = 0.0f;
  for (int64_t c = lane; c < C; c += 32) {
    const float norm = (xi[c] - m) * s;
    const float dnorm = w[c] * di[c];
    sumD += dnorm;
    sumDN += dnorm * norm;
  }
  const float meanD = detail::warpSum(sumD) / float(C);
  const float meanDN = detail::warpSum(sumDN) / float(C);
  float *o = dx + i * C;
  for (int64_t c = lane; c < C; c += 32) {
    const float norm = (xi[c] - m) * s;
    const float dnorm = w[c] * di[c];
    o[c] = (dnorm - meanD - norm * meanDN) * s;
  }
}

unsigned rowBlocks(int64_t N) {
  return unsigned((N * 32 + kRowThreads - 1) / kRowThreads);
}

} // namespace

void layerNormForward(const Context &ctx, float *out, float *mean, float *rstd,
                      const float *x, const float *w, const float *b, int64_t N,
                      int64_t C, float eps) {
  if (N <= 0)
    return;
  layerNormForwardKernel<<<rowBlocks(N), kRowThreads, 0, ctx.stream>>>(
      out, mean, rstd, x, w, b, N, C, eps);
  detail::checkLaunch("layerNormForward");
}

void layerNormBackward(const Context &ctx, float *dx, float *dw, float *db,
                       const float *dout, const float *x, const float *w,
                       const float *mean, const float *rstd, int64_t N,
                       int64_t C) {
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

} // namespace fsdp::rt::cuda
