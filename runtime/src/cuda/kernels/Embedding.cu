//===- Embedding.cu - token and position embeddings -----------------------===//
//
// Forward: one block per position (b, t), its threads over the C columns
// (four at a time when C % 4 == 0 and the tables are aligned). Elements are
// widened on load and each output rounded once (the sum wte + wpe, or a
// gradient row's whole sum, in float).
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

template <bool Vec, typename E>
__global__ void
embeddingForwardKernel(E *__restrict__ out, const int32_t *__restrict__ tokens,
                       const E *__restrict__ wte, const E *__restrict__ wpe,
                       int64_t T, int64_t C) {
  const int64_t row = blockIdx.x;
  const int64_t t = row % T;
  const int64_t token = tokens[row];
  if constexpr (Vec) {
    const int64_t C4 = C / 4;
    using Q = detail::Quad<E>;
    const Q *tok = reinterpret_cast<const Q *>(wte + token * C);
    // No position table: the token embedding alone (Llama's).
    const Q *pos = wpe ? reinterpret_cast<const Q *>(wpe + t * C) : nullptr;
    Q *o = reinterpret_cast<Q *>(out + row * C);
    for (int64_t c = threadIdx.x; c < C4; c += blockDim.x) {
      const Q a = tok[c];
      Q r;
#pragma unroll
      for (int k = 0; k < 4; ++k)
        r.v[k] =
            detail::fromFloat<E>(detail::toFloat(a.v[k]) +
                                 (pos ? detail::toFloat(pos[c].v[k]) : 0.0f));
      o[c] = r;
    }
  } else {
    const E *tok = wte + token * C, *pos = wpe ? wpe + t * C : nullptr;
    E *o = out + row * C;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
      o[c] = detail::fromFloat<E>(detail::toFloat(tok[c]) +
                                  (pos ? detail::toFloat(pos[c]) : 0.0f));
  }
}

template <typename E>
__global__ void
embeddingBackwardPosKernel(E *__restrict__ dwpe, const E *__restrict__ dout,
                           int64_t B, int64_t T, int64_t C, int64_t Tmax) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
       idx < Tmax * C; idx += stride) {
    const int64_t t = idx / C, c = idx % C;
    float acc = 0.0f;
    if (t < T)
      for (int64_t b = 0; b < B; ++b)
        acc += detail::toFloat(dout[(b * T + t) * C + c]);
    dwpe[idx] = detail::fromFloat<E>(acc);
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

template <typename E>
__global__ void __launch_bounds__(kTokenThreads)
    embeddingBackwardTokenKernel(E *__restrict__ dwte,
                                 const E *__restrict__ dout,
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
  E *row = dwte + int64_t(token) * C;
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
            v[q][k] = rows[q] >= 0 && c < C
                          ? detail::toFloat(dout[rows[q] * C + c])
                          : 0.0f;
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
      row[c] = detail::fromFloat<E>(sum);
    }
    __syncthreads(); // partial is rewritten by the next slice
  }
}

} // namespace

/// out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:]; tokens in [0, V).
template <typename E>
void embeddingForward(const Context &ctx, E *out, const int32_t *tokens,
                      const E *wte, const E *wpe, int64_t B, int64_t T,
                      int64_t C) {
  const int64_t rows = B * T;
  if (rows <= 0 || C <= 0)
    return;
  const bool vec = C % 4 == 0 && detail::quadAligned(out) &&
                   detail::quadAligned(wte) && detail::quadAligned(wpe);
  const int64_t work = vec ? C / 4 : C;
  const int threads = work >= 256 ? 256 : int((work + 31) / 32 * 32);
  if (vec)
    embeddingForwardKernel<true, E><<<unsigned(rows), threads, 0, ctx.stream>>>(
        out, tokens, wte, wpe, T, C);
  else
    embeddingForwardKernel<false, E>
        <<<unsigned(rows), threads, 0, ctx.stream>>>(out, tokens, wte, wpe, T,
                                                     C);
  detail::checkLaunch("embeddingForward");
}

/// dwte (V x C) and dwpe (Tmax x C) overwritten with the scatter-add of dout
/// (rows of dwpe past T are zero). Deterministic, without atomics: each row
/// of dwte is summed by one thread block in an order fixed by the tokens.
template <typename E>
void embeddingBackward(const Context &ctx, E *dwte, E *dwpe, const E *dout,
                       const int32_t *tokens, int64_t B, int64_t T, int64_t C,
                       int64_t V, int64_t Tmax) {
  if (C <= 0)
    return;
  if (Tmax > 0) {
    embeddingBackwardPosKernel<<<detail::blocksFor(Tmax * C, 256), 256, 0,
                                 ctx.stream>>>(dwpe, dout, B, T, C, Tmax);
    detail::checkLaunch("embeddingBackward (dwpe)");
  }
  if (V <= 0)
    return;
  detail::checkCuda(
      cudaMemsetAsync(dwte, 0, size_t(V) * size_t(C) * sizeof(E), ctx.stream),
      "embeddingBackward (zero dwte)");
  const int64_t BT = B * T;
  if (BT <= 0)
    return;
  embeddingBackwardTokenKernel<<<unsigned(BT), kTokenThreads, 0, ctx.stream>>>(
      dwte, dout, tokens, BT, C);
  detail::checkLaunch("embeddingBackward (dwte)");
}

#define FSDP_INSTANTIATE(E)                                                    \
  template void embeddingForward<E>(const Context &, E *, const int32_t *,     \
                                    const E *, const E *, int64_t, int64_t,    \
                                    int64_t);                                  \
  template void embeddingBackward<E>(const Context &, E *, E *, const E *,     \
                                     const int32_t *, int64_t, int64_t,        \
                                     int64_t, int64_t, int64_t);
FSDP_CUDA_ELEMENT_TYPES(FSDP_INSTANTIATE)
#undef FSDP_INSTANTIATE

} // namespace fsdp::rt::cuda
