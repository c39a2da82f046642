//===- Embedding.cu - token and position embeddings -----------------------===//
//
// Forward: one block per position (b, t), its threads over the C columns
// (float4 when C % 4 == 0 and the tables are aligned).
//
// Backward, deterministically and without atomics:
//   - dwpe: one thread per (t, c), summing dout[b, t, c] over b in order
//     (rows t >= T written as zeros);
//   - dwte: zeroed with a memset, then one block of 8 warps per position i.
//     A block whose token already occurred at an earlier position stops
//     (its threads scan the earlier token ids). The block of the first
//     occurrence owns the token's row: warp w scans the 32-position chunks
//     w, w + 8, ... from i on for the same token (ballot) and adds the
//     matching dout rows in position order, four rows' loads in flight;
//     the 8 partial rows are then added in warp order and the row written
//     once. The summation order depends on the token ids only, so the
//     result is the same on every run (not bitwise the CPU's order). The
//     scans cost O((B T)^2 / 32) token reads per 256-column slice, a few
//     microseconds at B T = 4096; a frequent token's rows are shared by
//     the block's 8 warps.
//
//===----------------------------------------------------------------------===//

#include "Common.cuh"

namespace fsdp::rt::cuda {
namespace {

template <bool Vec>
__global__ void embeddingForwardKernel(float *__restrict__ out,
                                       const int32_t *__restrict__ tokens,
                                       const float *__restrict__ wte,
                                       const float *__restrict__ wpe, int64_t T,
                                       int64_t C) {
  const int64_t row = blockIdx.x;
  const int64_t t = row % T;
  const int64_t token = tokens[row];
  if constexpr (Vec) {
    const int64_t C4 = C / 4;
    const float4 *tok = reinterpret_cast<const float4 *>(wte + token * C);
    const float4 *pos = reinterpret_cast<const float4 *>(wpe + t * C);
    float4 *o = reinterpret_cast<float4 *>(out + row * C);
    for (int64_t c = threadIdx.x; c < C4; c += blockDim.x) {
      const float4 a = tok[c], b = pos[c];
      o[c] = make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
    }
  } else {
    const float *tok = wte + token * C, *pos = wpe + t * C;
    float *o = out + row * C;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
      o[c] = tok[c] + pos[c];
  }
}

__global__ void embeddingBackwardPosKernel(float *__restrict__ dwpe,
                                           const float *__restrict__ dout,
                                           int64_t B, int64_t T, int64_t C,
                                           int64_t Tmax) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
       idx < Tmax * C; idx += stride) {
    const int64_t t = idx / C, c = idx % C;
    float acc = 0.0f;
    if (t < T)
      for (int64_t b = 0; b < B; ++b)
        acc += dout[(b * T + t) * C + c];
    dwpe[idx] = acc;
  }
}

/// The dwte kernel: one block of kTokenWarps warps per position, each lane
/// holding kColsPerLane columns of a kChunk-column slice of the row.
constexpr int kTokenWarps = 8;
constexpr int kColsPerLane = 8;
constexpr int kChunk = 32 * kColsPerLane;
constexpr int kTokenThreads = 32 * kTokenWarps;
static_assert(kTokenThreads == kChunk, "one thread per column of a slice");
/// Matching rows whose loads are in flight together.
constexpr int kRowsInFlight = 4;

__global__ void __launch_bounds__(kTokenThreads)
    embeddingBackwardTokenKernel(float *__restrict__ dwte,
                                 const float *__restrict__ dout,
                                 const int32_t *__restrict__ tokens, int64_t BT,
                                 int64_t C) {
  const int64_t i = blockIdx.x;
  const int32_t token = tokens[i];

  // Does the token occur before position i? Then that block owns the row.
  bool earlier = false;
  for (int64_t j = threadIdx.x; j < i; j += blockDim.x)
    earlier |= tokens[j] == token;
  if (__syncthreads_or(earlier))
    return;

  // Warp w takes the 32-position chunks w, w + 8, ... from i on, adding
  // its matching rows in position order; then the warps' partial sums are
  // added in warp order. Both orders depend on the data only.
  __shared__ float partial[kTokenWarps][kChunk];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float *row = dwte + int64_t(token) * C;
  for (int64_t c0 = 0; c0 < C; c0 += kChunk) {
    float acc[kColsPerLane];
#pragma unroll
    for (int k = 0; k < kColsPerLane; ++k)
      acc[k] = 0.0f;
    for (int64_t j0 = i + 32 * warp; j0 < BT; j0 += 32 * kTokenWarps) {
      const int64_t j = j0 + lane;
      unsigned match =
          __ballot_sync(detail::kFullMask, j < BT && tokens[j] == token);
      while (match) { // up to kRowsInFlight matches per step, in order
        int64_t rows[kRowsInFlight];
#pragma unroll
        for (int q = 0; q < kRowsInFlight; ++q) {
          rows[q] = -1;
          if (match) {
            rows[q] = j0 + __ffs(match) - 1;
            match &= match - 1;
          }
        }
        float v[kRowsInFlight][kColsPerLane];
#pragma unroll
        for (int q = 0; q < kRowsInFlight; ++q)
#pragma unroll
          for (int k = 0; k < kColsPerLane; ++k) {
            const int64_t c = c0 + k * 32 + lane;
            v[q][k] = rows[q] >= 0 && c < C ? dout[rows[q] * C + c] : 0.0f;
          }
#pragma unroll
        for (int q = 0; q < kRowsInFlight; ++q)
          if (rows[q] >= 0)
#pragma unroll
            for (int k = 0; k < kColsPerLane; ++k)
              acc[k] += v[q][k];
      }
    }
#pragma unroll
    for (int k = 0; k < kColsPerLane; ++k)
      partial[warp][k * 32 + lane] = acc[k];
    __syncthreads();
    const int64_t c = c0 + threadIdx.x;
    if (c < C) {
      float sum = partial[0][threadIdx.x];
#pragma unroll
      for (int w = 1; w < kTokenWarps; ++w)
        sum += partial[w][threadIdx.x];
      row[c] = sum;
    }
    __syncthreads(); // partial is rewritten by the next slice
  }
}

} // namespace

void embeddingForward(const Context &ctx, float *out, const int32_t *tokens,
                      const float *wte, const float *wpe, int64_t B, int64_t T,
                      int64_t C) {
  const int64_t rows = B * T;
  if (rows <= 0 || C <= 0)
    return;
  const bool vec = C % 4 == 0 && detail::aligned16(out) &&
                   detail::aligned16(wte) && detail::aligned16(wpe);
  const int64_t work = vec ? C / 4 : C;
  const int threads = work >= 256 ? 256 : int((work + 31) / 32 * 32);
  if (vec)
    embeddingForwardKernel<true><<<unsigned(rows), threads, 0, ctx.stream>>>(
        out, tokens, wte, wpe, T, C);
  else
    embeddingForwardKernel<false><<<unsigned(rows), threads, 0, ctx.stream>>>(
        out, tokens, wte, wpe, T, C);
  detail::checkLaunch("embeddingForward");
}

void embeddingBackward(const Context &ctx, float *dwte, float *dwpe,
                       const float *dout, const int32_t *tokens, int64_t B,
                       int64_t T, int64_t C, int64_t V, int64_t Tmax) {
  if (C <= 0)
    return;
  if (Tmax > 0) {
    embeddingBackwardPosKernel<<<detail::blocksFor(Tmax * C, 256), 256, 0,
                                 ctx.stream>>>(dwpe, dout, B, T, C, Tmax);
    detail::checkLaunch("embeddingBackward (dwpe)");
  }
  if (V <= 0)
    return;
  detail::checkCuda(cudaMemsetAsync(dwte, 0,
                                    size_t(V) * size_t(C) * sizeof(float),
                                    ctx.stream),
                    "embeddingBackward (zero dwte)");
  const int64_t BT = B * T;
  if (BT <= 0)
    return;
  embeddingBackwardTokenKernel<<<unsigned(BT), kTokenThreads, 0, ctx.stream>>>(
      dwte, dout, tokens, BT, C);
  detail::checkLaunch("embeddingBackward (dwte)");
}

} // namespace fsdp::rt::cuda
