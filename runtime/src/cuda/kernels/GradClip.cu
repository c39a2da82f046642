//===- GradClip.cu - gradient clipping's sum of squares and coefficient ---===//
//
// The sum of squares of a gradient shard in double, in an order fixed by n
// alone (so every run, and every GPU, gives the same bits): up to
// kGradSqSumBlocks blocks (one per kGradSqSumThreads elements, fewer for a
// small shard) stride over the shard, each leaves its sum (warp shuffles,
// then its warps in order) in `partials`, and one block adds the partials
// the same way, then the accumulator. The coefficient is one
// thread's double arithmetic, as cpu::clipCoefficient's.
//
//===----------------------------------------------------------------------===//

#include "Common.cuh"

namespace fsdp::rt::cuda {
namespace {

template <typename E>
__global__ void __launch_bounds__(kGradSqSumThreads)
    sqSumPartialsKernel(double *__restrict__ partials,
                        const E *__restrict__ grad, int64_t n) {
  const int64_t stride = int64_t(gridDim.x) * kGradSqSumThreads;
  double acc = 0.0;
  for (int64_t i = int64_t(blockIdx.x) * kGradSqSumThreads + threadIdx.x; i < n;
       i += stride) {
    const double x = detail::toFloat(grad[i]);
    acc += x * x;
  }
  const double total = detail::blockSumDouble(acc);
  if (threadIdx.x == 0)
    partials[blockIdx.x] = total;
}

static_assert(kGradSqSumBlocks <= kGradSqSumThreads,
              "one block adds every block's partial");

__global__ void __launch_bounds__(kGradSqSumThreads)
    sqSumFinishKernel(float *__restrict__ out,
                      const double *__restrict__ partials, int blocks,
                      const float *__restrict__ acc) {
  const double v = int(threadIdx.x) < blocks ? partials[threadIdx.x] : 0.0;
  const double total = detail::blockSumDouble(v);
  if (threadIdx.x == 0)
    *out = float((acc ? double(*acc) : 0.0) + total);
}

__global__ void clipCoefficientKernel(float *__restrict__ coef,
                                      const float *__restrict__ sumSq,
                                      double maxNorm) {
  if (threadIdx.x != 0)
    return;
  const double clip = maxNorm / (sqrt(double(*sumSq)) + kClipEpsilon);
  // NaN fails the comparison and stays NaN, as torch.clamp keeps it.
  *coef = clip >= 1.0 ? 1.0f : float(clip);
}

} // namespace

template <typename E>
void gradSqSum(const Context &ctx, float *out, const E *grad, const float *acc,
               int64_t n, float *partials) {
  // The scratch holds two floats per block: a double each (64-byte
  // aligned, as every buffer of the arena).
  double *parts = reinterpret_cast<double *>(partials);
  const int blocks =
      int(detail::blocksFor(n, kGradSqSumThreads, kGradSqSumBlocks));
  sqSumPartialsKernel<E>
      <<<blocks, kGradSqSumThreads, 0, ctx.stream>>>(parts, grad, n);
  detail::checkLaunch("grad_sq_sum");
  sqSumFinishKernel<<<1, kGradSqSumThreads, 0, ctx.stream>>>(out, parts, blocks,
                                                             acc);
  detail::checkLaunch("grad_sq_sum");
}

void clipCoefficient(const Context &ctx, float *coef, const float *sumSq,
                     double maxNorm) {
  // One warp, of which one thread computes.
  clipCoefficientKernel<<<1, 32, 0, ctx.stream>>>(coef, sumSq, maxNorm);
  detail::checkLaunch("clip_coefficient");
}

#define FSDP_INSTANTIATE(E)                                                    \
  template void gradSqSum<E>(const Context &, float *, const E *,              \
                             const float *, int64_t, float *);
FSDP_CUDA_ELEMENT_TYPES(FSDP_INSTANTIATE)
#undef FSDP_INSTANTIATE

} // namespace fsdp::rt::cuda
