//===- Embedding.cu - token and position embeddings -----------------------===//
//
// Forward: one block per position (b, t), its threads over the C columns
// (float4 when C % 4 == 0 and the tables are aligned).
//
// Backward, deterministically and without atomics:
//   - dwpe: one thread per (t, c), summing dout[b, t, c] over b in order
//     (rows t >= T written as zeros);
//   - dwte: zeroed with a memset, then one warp per position i. A warp
//     whose token already occurred at an earlier position stops (a scan of
//     the earlier token ids, 32 per step). The warp of the first occurrence
//     owns the token's row: it scans the later positions for the same
//     token (ballot) and adds their dout rows in position order, then
//     writes the row once. Every row is thus summed by one warp in (b, t)
//     order, as on the CPU. The scans cost O((B T)^2 / 32) token reads in
//     all, a few microseconds at B T = 4096; a very frequent token makes
//     its warp read all its rows alone, which is still cheaper than the
//     V x C memset.
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

/// Columns a lane holds per pass over a token's positions.
constexpr int kColsPerLane = 8;

__global__ void embeddingBackwardTokenKernel(float *__restrict__ dwte,
                                             const float *__restrict__ dout,
                                             const int32_t *__restrict__ tokens,
                                             int64_t BT, int64_t C) {
  const int lane = threadIdx.x & 31;
  const int64_t i =
      (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5; // warp = position
  if (i >= BT)
    return; // whole warps leave together
  const int32_t token = tokens[i];

  // Does the token occur before position i? Then that warp owns the row.
  for (int64_t j0 = 0; j0 < i; j0 += 32) {
    const int64_t j = j0 + lane;
    const bool earlier = j < i && tokens[j] == token;
    if (__any_sync(detail::kFullMask, earlier))
      return;
  }

  float *row = dwte + int64_t(token) * C;
  for (int64_t c0 = 0; c0 < C; c0 += 32 * kColsPerLane) {
    float acc[kColsPerLane];
#pragma unroll
    for (int k = 0; k < kColsPerLane; ++k)
      acc[k] = 0.0f;
    for (int64_t j0 = i; j0 < BT; j0 += 32) {
      const int64_t j = j0 + lane;
      unsigned match =
          __ballot_sync(detail::kFullMask, j < BT && tokens[j] == token);
      while (match) { // positions j0 + bit, in increasing order
        const int bit = __ffs(match) - 1;
        match &= match - 1;
        const float *d = dout + (j0 + bit) * C + c0;
#pragma unroll
        for (int k = 0; k < kColsPerLane; ++k) {
          const int64_t c = k * 32 + lane;
          if (c0 + c < C)
            acc[k] += d[c];
        }
      }
    }
#pragma unroll
    for (int k = 0; k < kColsPerLane; ++k) {
      const int64_t c = c0 + k * 32 + lane;
      if (c < C)
        row[c] = acc[k];
    }
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
  const int threads = 256; // 8 positions per block
  const unsigned blocks = unsigned((BT * 32 + threads - 1) / threads);
  embeddingBackwardTokenKernel<<<blocks, threads, 0, ctx.stream>>>(
      dwte, dout, tokens, BT, C);
  detail::checkLaunch("embeddingBackward (dwte)");
}

} // namespace fsdp::rt::cuda
