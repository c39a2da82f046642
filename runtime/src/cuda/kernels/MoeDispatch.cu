//===- MoeDispatch.cu - expert parallelism's counts and row runs ----------===//
//
// The CUDA side of runtime/src/cpu/MoeDispatch.cpp, with the same
// semantics: every run placed by moe::regroupRun (MoeDispatch.h), which
// the CPU runs too. Counts: one thread per expert. Regroup: one block per
// run, each thread finding the run's place itself (O(G L) integer reads,
// G L being the experts, a few hundred at most) and copying its share of
// the run's elements; the rows past the runs are zeroed by a grid-stride
// kernel. Local offsets: one thread of a warp (L + 1 values). Drop mode:
// the capacity trim on one thread (G L counts in order, moe::capacityTrim),
// the compaction as the regroup (one block per run, moe::compactRun; the
// inverse's block zeroes its run's cut rows). Rows are moved, never
// combined: the result is exact and deterministic.
//
//===----------------------------------------------------------------------===//

#include "Common.cuh"

#include "fsdp/runtime/MoeDispatch.h"

namespace fsdp::rt::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void moeExpertCountsKernel(int32_t *__restrict__ counts,
                                      const int32_t *__restrict__ offsets,
                                      int64_t E) {
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < E;
       e += int64_t(gridDim.x) * blockDim.x)
    counts[e] = moe::offsetsDifference(offsets[e], offsets[e + 1]);
}

/// Block r moves run (r / L, r % L).
template <typename E>
__global__ void __launch_bounds__(kThreads)
    moeRegroupKernel(E *__restrict__ result, const E *__restrict__ input,
                     const int32_t *__restrict__ counts, int64_t G, int64_t L,
                     int64_t M, int64_t C, int64_t inverse) {
  const int64_t r = blockIdx.x;
  const moe::Run run = moe::regroupRun(counts, G, L, M, r / L, r % L);
  const int64_t from = inverse ? run.ls : run.sl;
  const int64_t to = inverse ? run.sl : run.ls;
  for (int64_t i = threadIdx.x; i < run.rows * C; i += blockDim.x)
    result[to * C + i] = input[from * C + i];
}

/// Rows past the runs' total are zero.
template <typename E>
__global__ void
moeRegroupTailKernel(E *__restrict__ result, const int32_t *__restrict__ counts,
                     int64_t G, int64_t L, int64_t M, int64_t C) {
  const int64_t first = moe::regroupTotal(counts, G, L, M) * C;
  for (int64_t i = first + int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
       i < M * C; i += int64_t(gridDim.x) * blockDim.x)
    result[i] = detail::fromFloat<E>(0.0f);
}

__global__ void moeLocalOffsetsKernel(int32_t *__restrict__ offsets,
                                      const int32_t *__restrict__ counts,
                                      int64_t G, int64_t L) {
  if (threadIdx.x != 0) // one thread of a warp: L + 1 values in order
    return;
  int64_t at = 0;
  offsets[0] = 0;
  for (int64_t l = 0; l < L; ++l) {
    at += moe::localExpertRows(counts, G, L, l);
    at = at > INT32_MAX ? INT32_MAX : at;
    offsets[l + 1] = int32_t(at);
  }
}

/// One thread: G L counts in the order (l, s), as the CPU's loop.
__global__ void moeCapacityTrimKernel(int32_t *__restrict__ kept,
                                      int32_t *__restrict__ dropped,
                                      const int32_t *__restrict__ recv,
                                      int64_t G, int64_t L, int64_t capacity) {
  if (threadIdx.x == 0)
    moe::capacityTrim(kept, dropped, recv, G, L, capacity);
}

/// Block r moves the kept rows of run (r / L, r % L); the inverse zeroes
/// its cut rows too.
template <typename E>
__global__ void __launch_bounds__(kThreads)
    moeCompactKernel(E *__restrict__ result, const E *__restrict__ input,
                     const int32_t *__restrict__ counts,
                     const int32_t *__restrict__ kept, int64_t G, int64_t L,
                     int64_t P, int64_t C, int64_t inverse) {
  const moe::CompactRun run =
      moe::compactRun(counts, kept, G, L, P, blockIdx.x);
  const int64_t from = inverse ? run.packed : run.full;
  const int64_t to = inverse ? run.full : run.packed;
  for (int64_t i = threadIdx.x; i < run.rows * C; i += blockDim.x)
    result[to * C + i] = input[from * C + i];
  if (inverse)
    for (int64_t i = threadIdx.x; i < run.cut * C; i += blockDim.x)
      result[(to + run.rows) * C + i] = detail::fromFloat<E>(0.0f);
}

/// Rows past the runs (packed, or back in place) are zero.
template <typename E>
__global__ void
moeCompactTailKernel(E *__restrict__ result, const int32_t *__restrict__ counts,
                     const int32_t *__restrict__ kept, int64_t G, int64_t L,
                     int64_t P, int64_t C, int64_t inverse) {
  const moe::CompactRun end = moe::compactEnd(counts, kept, G, L, P);
  const int64_t first = (inverse ? end.full : end.packed) * C;
  for (int64_t i = first + int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
       i < P * C; i += int64_t(gridDim.x) * blockDim.x)
    result[i] = detail::fromFloat<E>(0.0f);
}

} // namespace

void moeExpertCounts(const Context &ctx, int32_t *counts,
                     const int32_t *offsets, int64_t G, int64_t L) {
  moeExpertCountsKernel<<<detail::blocksFor(G * L, kThreads), kThreads, 0,
                          ctx.stream>>>(counts, offsets, G * L);
  detail::checkLaunch("moeExpertCounts");
}

template <typename E>
void moeRegroup(const Context &ctx, E *result, const E *input,
                const int32_t *counts, int64_t G, int64_t L, int64_t M,
                int64_t C, int64_t inverse) {
  moeRegroupKernel<<<unsigned(G * L), kThreads, 0, ctx.stream>>>(
      result, input, counts, G, L, M, C, inverse);
  detail::checkLaunch("moeRegroup");
  moeRegroupTailKernel<<<detail::blocksFor(M * C, kThreads), kThreads, 0,
                         ctx.stream>>>(result, counts, G, L, M, C);
  detail::checkLaunch("moeRegroup");
}

void moeLocalOffsets(const Context &ctx, int32_t *offsets,
                     const int32_t *counts, int64_t G, int64_t L) {
  moeLocalOffsetsKernel<<<1, 32, 0, ctx.stream>>>(offsets, counts, G, L);
  detail::checkLaunch("moeLocalOffsets");
}

void moeCapacityTrim(const Context &ctx, int32_t *kept, int32_t *dropped,
                     const int32_t *recv, int64_t G, int64_t L,
                     int64_t capacity) {
  moeCapacityTrimKernel<<<1, 32, 0, ctx.stream>>>(kept, dropped, recv, G, L,
                                                  capacity);
  detail::checkLaunch("moeCapacityTrim");
}

template <typename E>
void moeCompact(const Context &ctx, E *result, const E *input,
                const int32_t *counts, const int32_t *kept, int64_t G,
                int64_t L, int64_t P, int64_t C, int64_t inverse) {
  if (G * L > 0) // the table does not ask for G, L > 0: no empty grid
    moeCompactKernel<<<unsigned(G * L), kThreads, 0, ctx.stream>>>(
        result, input, counts, kept, G, L, P, C, inverse);
  detail::checkLaunch("moeCompact");
  moeCompactTailKernel<<<detail::blocksFor(P * C, kThreads), kThreads, 0,
                         ctx.stream>>>(result, counts, kept, G, L, P, C,
                                       inverse);
  detail::checkLaunch("moeCompact");
}

#define FSDP_INSTANTIATE(E)                                                    \
  template void moeRegroup<E>(const Context &, E *, const E *,                 \
                              const int32_t *, int64_t, int64_t, int64_t,      \
                              int64_t, int64_t);                               \
  template void moeCompact<E>(const Context &, E *, const E *,                 \
                              const int32_t *, const int32_t *, int64_t,       \
                              int64_t, int64_t, int64_t, int64_t);
FSDP_CUDA_ELEMENT_TYPES(FSDP_INSTANTIATE)
#undef FSDP_INSTANTIATE

} // namespace fsdp::rt::cuda
