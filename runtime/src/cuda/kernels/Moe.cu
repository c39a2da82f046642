//===- Moe.cu - mixture-of-experts routing and rows -----------------------===//
//
// The CUDA side of runtime/src/cpu/MoeRouting.h and MoeExperts.h (without
// the grouped linear, whose per-expert sizes live on the device: see
// docs/moe.md), with the same semantics and argument order.
//
// Router: one thread per token, running the row arithmetic of
// fsdp/runtime/MoeRouter.h that the CPU kernels run (double; E <= a few
// hundred), so both backends choose the same experts and compute the same
// weights up to the last bit of double's exp. Sort by expert: one thread
// per expert counts its pairs, one thread turns the counts into offsets,
// and one thread per expert writes its pairs in pair order: a stable
// counting sort with no atomics, O(E P) reads (32 M for 128 experts and
// 256 K pairs), deterministic by construction. Rows: one block per token
// row, columns across the threads; each output row's sum over its k pairs
// runs in choice order j in float, as the CPU's. Auxiliary loss: one
// thread per row for its softmax statistics, one per expert for its sums
// over the rows in order, one thread for the loss.
//
//===----------------------------------------------------------------------===//

#include "Common.cuh"

#include "fsdp/runtime/MoeRouter.h"

namespace fsdp::rt::cuda {
namespace {

constexpr int kRouterThreads = 128;
constexpr int kRowThreads = 256;

template <typename E>
__global__ void __launch_bounds__(kRouterThreads)
    moeRouterForwardKernel(float *__restrict__ weights,
                           int32_t *__restrict__ experts,
                           const E *__restrict__ logits,
                           const float *__restrict__ bias, int64_t T,
                           int64_t NE, int64_t k, moe::Scoring scoring,
                           bool normalize, double scale) {
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= T)
    return;
  const E *z = logits + t * NE;
  int32_t *chosen = experts + t * k;
  auto logit = [&](int64_t e) { return double(detail::toFloat(z[e])); };
  auto key = [&](int64_t e) {
    return scoring == moe::Scoring::Softmax
               ? logit(e)
               : moe::sigmoidKey(detail::toFloat(z[e]), bias ? bias[e] : 0.0f);
  };
  double g[moe::kMaxTopK];
  moe::chooseTopK(key, NE, k, chosen);
  moe::rowWeights(g, logit, chosen, NE, k, scoring, normalize);
  for (int64_t j = 0; j < k; ++j)
    weights[t * k + j] = float(scale * g[j]);
}

template <typename E>
__global__ void __launch_bounds__(kRouterThreads)
    moeRouterBackwardKernel(E *__restrict__ dlogits,
                            const float *__restrict__ dweights,
                            const E *__restrict__ logits,
                            const int32_t *__restrict__ experts, int64_t T,
                            int64_t NE, int64_t k, moe::Scoring scoring,
                            bool normalize, double scale) {
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= T)
    return;
  const E *z = logits + t * NE;
  E *dz = dlogits + t * NE;
  double dg[moe::kMaxTopK];
  for (int64_t j = 0; j < k; ++j)
    dg[j] = scale * double(dweights[t * k + j]);
  moe::rowBackward(
      [&](int64_t e, double v) { dz[e] = detail::fromFloat<E>(float(v)); },
      [&](int64_t e) { return double(detail::toFloat(z[e])); }, experts + t * k,
      dg, NE, k, scoring, normalize);
}

/// The pairs of `experts` that chose expert e (one thread's count, in
/// pair order).
__device__ int64_t pairsChoosing(const int32_t *__restrict__ experts,
                                 int64_t pairs, int64_t e) {
  int64_t count = 0;
  for (int64_t p = 0; p < pairs; ++p)
    count += experts[p] == e;
  return count;
}

/// counts[e + 1] = the pairs that chose e (offsets[0] is set by the scan).
__global__ void moeCountKernel(int32_t *__restrict__ offsets,
                               const int32_t *__restrict__ experts,
                               int64_t pairs, int64_t NE) {
  const int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e < NE)
    offsets[e + 1] = int32_t(pairsChoosing(experts, pairs, e));
}

/// One thread of a warp scans (E + 1 numbers; the rest of the warp
/// idles).
__global__ void moeScanKernel(int32_t *__restrict__ offsets, int64_t NE) {
  if (threadIdx.x != 0)
    return;
  offsets[0] = 0;
  for (int64_t e = 0; e < NE; ++e)
    offsets[e + 1] += offsets[e];
}

__global__ void moePlaceKernel(int32_t *__restrict__ order,
                               int32_t *__restrict__ position,
                               const int32_t *__restrict__ offsets,
                               const int32_t *__restrict__ experts,
                               int64_t pairs, int64_t NE) {
  const int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= NE)
    return;
  int32_t next = offsets[e];
  for (int64_t p = 0; p < pairs; ++p)
    if (experts[p] == e) {
      position[p] = next;
      order[next++] = int32_t(p);
    }
}

template <typename E>
__global__ void __launch_bounds__(kRowThreads)
    moePermuteKernel(E *__restrict__ xs, const E *__restrict__ x,
                     const int32_t *__restrict__ order, int64_t k, int64_t C) {
  // Indices are checked as the CPU's are (moe::inRange): one block a row,
  // so the grid is the P pairs.
  const int64_t i = blockIdx.x, src = order[i];
  const bool valid = moe::inRange(src, int64_t(gridDim.x));
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
    xs[i * C + c] = valid ? x[(src / k) * C + c] : detail::fromFloat<E>(0.0f);
}

template <typename E>
__global__ void __launch_bounds__(kRowThreads)
    moePermuteBackwardKernel(E *__restrict__ dx, const E *__restrict__ dxs,
                             const int32_t *__restrict__ position, int64_t k,
                             int64_t C) {
  const int64_t t = blockIdx.x, pairs = int64_t(gridDim.x) * k;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
    float sum = moe::inRange(position[t * k], pairs)
                    ? detail::toFloat(dxs[int64_t(position[t * k]) * C + c])
                    : 0.0f;
    for (int64_t j = 1; j < k; ++j)
      if (moe::inRange(position[t * k + j], pairs))
        sum += detail::toFloat(dxs[int64_t(position[t * k + j]) * C + c]);
    dx[t * C + c] = detail::fromFloat<E>(sum);
  }
}

template <typename E>
__global__ void __launch_bounds__(kRowThreads)
    moeCombineKernel(E *__restrict__ y, const E *__restrict__ ys,
                     const float *__restrict__ weights,
                     const int32_t *__restrict__ position, int64_t k,
                     int64_t C) {
  const int64_t t = blockIdx.x, pairs = int64_t(gridDim.x) * k;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
    float sum = 0.0f;
    for (int64_t j = 0; j < k; ++j)
      if (moe::inRange(position[t * k + j], pairs))
        sum += weights[t * k + j] *
               detail::toFloat(ys[int64_t(position[t * k + j]) * C + c]);
    y[t * C + c] = detail::fromFloat<E>(sum);
  }
}

/// One block per (token, choice) pair: the row of dys, and the dot
/// product for dweights, reduced in a fixed tree over the block.
template <typename E>
__global__ void __launch_bounds__(kRowThreads)
    moeCombineBackwardKernel(E *__restrict__ dys, float *__restrict__ dweights,
                             const E *__restrict__ dy, const E *__restrict__ ys,
                             const float *__restrict__ weights,
                             const int32_t *__restrict__ position, int64_t k,
                             int64_t C) {
  __shared__ double partial[kRowThreads];
  const int64_t p = blockIdx.x, t = p / k, row = position[p];
  const float w = weights[p];
  if (!moe::inRange(row, int64_t(gridDim.x))) { // no row: no contribution
    if (threadIdx.x == 0)
      dweights[p] = 0.0f;
    return;
  }
  double sum = 0.0;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
    const float g = detail::toFloat(dy[t * C + c]);
    dys[row * C + c] = detail::fromFloat<E>(w * g);
    sum += double(g) * double(detail::toFloat(ys[row * C + c]));
  }
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (int(threadIdx.x) < stride)
      partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0)
    dweights[p] = float(partial[0]);
}

/// Each row's softmax max and the reciprocal of its sum of exps.
template <typename E>
__global__ void
moeAuxRowStatsKernel(float *__restrict__ rowMax, float *__restrict__ rowInv,
                     const E *__restrict__ logits, int64_t T, int64_t NE) {
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= T)
    return;
  const E *z = logits + t * NE;
  double m = 0.0, sum = 0.0;
  moe::softmaxStats([&](int64_t e) { return double(detail::toFloat(z[e])); },
                    NE, m, sum);
  rowMax[t] = float(m);
  rowInv[t] = float(1.0 / sum);
}

/// One expert a thread: its probability sum over the rows in order, and
/// its pair count.
template <typename E>
__global__ void moeAuxExpertStatsKernel(float *__restrict__ stats,
                                        const E *__restrict__ logits,
                                        const int32_t *__restrict__ experts,
                                        const float *__restrict__ rowMax,
                                        const float *__restrict__ rowInv,
                                        int64_t T, int64_t NE, int64_t k) {
  const int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= NE)
    return;
  double prob = 0.0;
  for (int64_t t = 0; t < T; ++t)
    prob +=
        exp(double(detail::toFloat(logits[t * NE + e])) - double(rowMax[t])) *
        double(rowInv[t]);
  int64_t count = 0;
  for (int64_t p = 0; p < T * k; ++p)
    count += experts[p] == e;
  stats[e] = float(prob);
  stats[NE + e] = float(count);
}

__global__ void moeAuxLossKernel(float *__restrict__ loss,
                                 const float *__restrict__ stats, int64_t L,
                                 int64_t T, int64_t NE, double coef) {
  if (threadIdx.x != 0)
    return;
  *loss = float(moe::auxLoss(stats, L, T, NE, coef));
}

/// a_e = dloss coef E F_e / (L T), one expert a thread.
__global__ void moeAuxScaleKernel(float *__restrict__ a,
                                  const float *__restrict__ dloss,
                                  const float *__restrict__ stats, int64_t L,
                                  int64_t T, int64_t NE, double coef) {
  const int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= NE)
    return;
  const double scale = double(*dloss) * coef * double(NE) / double(L * T);
  a[e] = float(scale * moe::auxFraction(stats, L, T, NE, e, 1));
}

template <typename E>
__global__ void
moeAuxRowsBackwardKernel(E *__restrict__ dlogits, const E *__restrict__ logits,
                         const float *__restrict__ a, int64_t T, int64_t NE) {
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= T)
    return;
  const E *z = logits + t * NE;
  auto logit = [&](int64_t e) { return double(detail::toFloat(z[e])); };
  double m = 0.0, sum = 0.0, dot = 0.0;
  moe::softmaxStats(logit, NE, m, sum);
  for (int64_t e = 0; e < NE; ++e)
    dot += exp(logit(e) - m) / sum * double(a[e]);
  for (int64_t e = 0; e < NE; ++e)
    dlogits[t * NE + e] = detail::fromFloat<E>(
        float(exp(logit(e) - m) / sum * (double(a[e]) - dot)));
}

/// The kernel table's auxiliary loss over stats summed by layer: the
/// training loss plus coef E sum_e F_e P_e (one thread).
__global__ void moeAuxLossOfSumsKernel(float *__restrict__ result,
                                       const float *__restrict__ stats,
                                       const float *__restrict__ loss,
                                       int64_t NE, int64_t k, double coef) {
  if (threadIdx.x != 0)
    return;
  *result = float(double(*loss) + moe::auxLossOfSums(stats, NE, k, coef));
}

/// Its gradient by the summed stats: row 0 grad coef E F_e / rows, row 1
/// (the counts) zero; one expert a thread.
__global__ void moeAuxLossGradKernel(float *__restrict__ result,
                                     const float *__restrict__ grad,
                                     const float *__restrict__ stats,
                                     int64_t NE, int64_t k, double coef) {
  const int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= NE)
    return;
  result[e] =
      float(double(*grad) * moe::auxLossGradOfSum(stats, NE, k, coef, e));
  result[NE + e] = 0.0f;
}

/// result += sum, element-wise (a layer's stats onto the earlier layers').
__global__ void moeAddKernel(float *__restrict__ result,
                             const float *__restrict__ sum, int64_t n) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n)
    result[i] += sum[i];
}

/// A selection bias's load signal: one expert a thread counts its pairs.
template <typename E>
__global__ void moeBiasSignalKernel(E *__restrict__ result,
                                    const int32_t *__restrict__ experts,
                                    int64_t pairs, int64_t NE) {
  const int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e < NE)
    result[e] = detail::fromFloat<E>(float(
        double(pairsChoosing(experts, pairs, e)) - double(pairs) / double(NE)));
}

__global__ void moeSelectionBiasKernel(float *__restrict__ bias,
                                       const float *__restrict__ signal,
                                       int64_t n, double rate,
                                       __nv_bfloat16 *__restrict__ copy) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) {
    bias[i] = moe::selectionBiasStep(bias[i], signal[i], rate);
    if (copy)
      copy[i] = detail::toBF16(bias[i]);
  }
}

unsigned rows(int64_t n) { return unsigned(n); }

} // namespace

template <typename E>
void moeRouterForward(const Context &ctx, float *weights, int32_t *experts,
                      const E *logits, const float *bias, int64_t T, int64_t NE,
                      int64_t k, int64_t scoring, int64_t normalize,
                      double scale) {
  if (T <= 0)
    return;
  moeRouterForwardKernel<<<detail::blocksFor(T, kRouterThreads, 1 << 30),
                           kRouterThreads, 0, ctx.stream>>>(
      weights, experts, logits, bias, T, NE, k, moe::Scoring(scoring),
      normalize != 0, scale);
  detail::checkLaunch("moeRouterForward");
}

template <typename E>
void moeRouterBackward(const Context &ctx, E *dlogits, const float *dweights,
                       const E *logits, const int32_t *experts, int64_t T,
                       int64_t NE, int64_t k, int64_t scoring,
                       int64_t normalize, double scale) {
  if (T <= 0)
    return;
  moeRouterBackwardKernel<<<detail::blocksFor(T, kRouterThreads, 1 << 30),
                            kRouterThreads, 0, ctx.stream>>>(
      dlogits, dweights, logits, experts, T, NE, k, moe::Scoring(scoring),
      normalize != 0, scale);
  detail::checkLaunch("moeRouterBackward");
}

void moeSortByExpert(const Context &ctx, int32_t *order, int32_t *position,
                     int32_t *offsets, const int32_t *experts, int64_t T,
                     int64_t k, int64_t NE) {
  const unsigned blocks = detail::blocksFor(NE, kRouterThreads);
  moeCountKernel<<<blocks, kRouterThreads, 0, ctx.stream>>>(offsets, experts,
                                                            T * k, NE);
  moeScanKernel<<<1, 32, 0, ctx.stream>>>(offsets, NE);
  moePlaceKernel<<<blocks, kRouterThreads, 0, ctx.stream>>>(
      order, position, offsets, experts, T * k, NE);
  detail::checkLaunch("moeSortByExpert");
}

// The kernel table's forms (KernelDecls.inc): the router reads f32 logits
// (the router computes in f32, as transformers does), and the sort is
// moeSort.
void moeRouterForward(const Context &ctx, float *weights, int32_t *experts,
                      const float *logits, const float *bias, int64_t T,
                      int64_t NE, int64_t k, int64_t scoring, int64_t normalize,
                      double scale) {
  moeRouterForward<float>(ctx, weights, experts, logits, bias, T, NE, k,
                          scoring, normalize, scale);
}
void moeRouterBackward(const Context &ctx, float *dlogits,
                       const float *dweights, const float *logits,
                       const int32_t *experts, int64_t T, int64_t NE, int64_t k,
                       int64_t scoring, int64_t normalize, double scale) {
  moeRouterBackward<float>(ctx, dlogits, dweights, logits, experts, T, NE, k,
                           scoring, normalize, scale);
}
void moeSort(const Context &ctx, int32_t *order, int32_t *position,
             int32_t *offsets, const int32_t *experts, int64_t T, int64_t k,
             int64_t NE) {
  moeSortByExpert(ctx, order, position, offsets, experts, T, k, NE);
}

template <typename E>
void moePermute(const Context &ctx, E *xs, const E *x, const int32_t *order,
                int64_t T, int64_t k, int64_t C) {
  if (T * k <= 0)
    return;
  moePermuteKernel<<<rows(T * k), kRowThreads, 0, ctx.stream>>>(xs, x, order, k,
                                                                C);
  detail::checkLaunch("moePermute");
}

template <typename E>
void moePermuteBackward(const Context &ctx, E *dx, const E *dxs,
                        const int32_t *position, int64_t T, int64_t k,
                        int64_t C) {
  if (T <= 0)
    return;
  moePermuteBackwardKernel<<<rows(T), kRowThreads, 0, ctx.stream>>>(
      dx, dxs, position, k, C);
  detail::checkLaunch("moePermuteBackward");
}

template <typename E>
void moeCombine(const Context &ctx, E *y, const E *ys, const float *weights,
                const int32_t *position, int64_t T, int64_t k, int64_t C) {
  if (T <= 0)
    return;
  moeCombineKernel<<<rows(T), kRowThreads, 0, ctx.stream>>>(y, ys, weights,
                                                            position, k, C);
  detail::checkLaunch("moeCombine");
}

template <typename E>
void moeCombineBackward(const Context &ctx, E *dys, float *dweights,
                        const E *dy, const E *ys, const float *weights,
                        const int32_t *position, int64_t T, int64_t k,
                        int64_t C) {
  if (T * k <= 0)
    return;
  moeCombineBackwardKernel<<<rows(T * k), kRowThreads, 0, ctx.stream>>>(
      dys, dweights, dy, ys, weights, position, k, C);
  detail::checkLaunch("moeCombineBackward");
}

template <typename E>
void moeAuxStats(const Context &ctx, float *stats, const E *logits,
                 const int32_t *experts, int64_t T, int64_t NE, int64_t k,
                 float *rowScratch) {
  if (T > 0)
    moeAuxRowStatsKernel<<<detail::blocksFor(T, kRouterThreads, 1 << 30),
                           kRouterThreads, 0, ctx.stream>>>(
        rowScratch, rowScratch + T, logits, T, NE);
  moeAuxExpertStatsKernel<<<detail::blocksFor(NE, kRouterThreads),
                            kRouterThreads, 0, ctx.stream>>>(
      stats, logits, experts, rowScratch, rowScratch + T, T, NE, k);
  detail::checkLaunch("moeAuxStats");
}

void moeAuxLoss(const Context &ctx, float *loss, const float *stats, int64_t L,
                int64_t T, int64_t NE, double coef) {
  moeAuxLossKernel<<<1, 32, 0, ctx.stream>>>(loss, stats, L, T, NE, coef);
  detail::checkLaunch("moeAuxLoss");
}

template <typename E>
void moeAuxLossBackward(const Context &ctx, E *dlogits, const float *dloss,
                        const float *stats, const E *logits, int64_t L,
                        int64_t T, int64_t NE, double coef,
                        float *expertScratch) {
  moeAuxScaleKernel<<<detail::blocksFor(NE, kRouterThreads), kRouterThreads, 0,
                      ctx.stream>>>(expertScratch, dloss, stats, L, T, NE,
                                    coef);
  if (T > 0)
    moeAuxRowsBackwardKernel<<<detail::blocksFor(T, kRouterThreads, 1 << 30),
                               kRouterThreads, 0, ctx.stream>>>(
        dlogits, logits, expertScratch, T, NE);
  detail::checkLaunch("moeAuxLossBackward");
}

void moeAuxStatsForward(const Context &ctx, float *result, const float *logits,
                        const int32_t *experts, const float *sum, int64_t R,
                        int64_t NE, int64_t k, float *rowScratch) {
  moeAuxStats<float>(ctx, result, logits, experts, R, NE, k, rowScratch);
  if (sum) {
    moeAddKernel<<<detail::blocksFor(2 * NE, kRouterThreads), kRouterThreads, 0,
                   ctx.stream>>>(result, sum, 2 * NE);
    detail::checkLaunch("moeAuxStatsForward");
  }
}

void moeAuxStatsBackward(const Context &ctx, float *result, const float *grad,
                         const float *logits, int64_t R, int64_t NE) {
  // Row 0 of grad (the probability sums' gradient) is the a of the rows'
  // softmax backward.
  if (R > 0)
    moeAuxRowsBackwardKernel<<<detail::blocksFor(R, kRouterThreads, 1 << 30),
                               kRouterThreads, 0, ctx.stream>>>(result, logits,
                                                                grad, R, NE);
  detail::checkLaunch("moeAuxStatsBackward");
}

void moeAuxLossForward(const Context &ctx, float *result, const float *stats,
                       const float *loss, int64_t NE, int64_t k, double coef) {
  moeAuxLossOfSumsKernel<<<1, 32, 0, ctx.stream>>>(result, stats, loss, NE, k,
                                                   coef);
  detail::checkLaunch("moeAuxLossForward");
}

void moeAuxLossGrad(const Context &ctx, float *result, const float *grad,
                    const float *stats, int64_t NE, int64_t k, double coef) {
  moeAuxLossGradKernel<<<detail::blocksFor(NE, kRouterThreads), kRouterThreads,
                         0, ctx.stream>>>(result, grad, stats, NE, k, coef);
  detail::checkLaunch("moeAuxLossGrad");
}

template <typename E>
void moeBiasSignal(const Context &ctx, E *result, const int32_t *experts,
                   int64_t R, int64_t K, int64_t NE) {
  moeBiasSignalKernel<<<detail::blocksFor(NE, kRouterThreads), kRouterThreads,
                        0, ctx.stream>>>(result, experts, R * K, NE);
  detail::checkLaunch("moeBiasSignal");
}

void moeSelectionBiasUpdate(const Context &ctx, float *bias,
                            const float *signal, int64_t n, double rate,
                            uint16_t *copy) {
  if (n <= 0)
    return;
  moeSelectionBiasKernel<<<detail::blocksFor(n, kRouterThreads), kRouterThreads,
                           0, ctx.stream>>>(
      bias, signal, n, rate, reinterpret_cast<__nv_bfloat16 *>(copy));
  detail::checkLaunch("moeSelectionBiasUpdate");
}

#define FSDP_INSTANTIATE(E)                                                    \
  template void moeBiasSignal<E>(const Context &, E *, const int32_t *,        \
                                 int64_t, int64_t, int64_t);                   \
  template void moeRouterForward<E>(                                           \
      const Context &, float *, int32_t *, const E *, const float *, int64_t,  \
      int64_t, int64_t, int64_t, int64_t, double);                             \
  template void moeRouterBackward<E>(                                          \
      const Context &, E *, const float *, const E *, const int32_t *,         \
      int64_t, int64_t, int64_t, int64_t, int64_t, double);                    \
  template void moePermute<E>(const Context &, E *, const E *,                 \
                              const int32_t *, int64_t, int64_t, int64_t);     \
  template void moePermuteBackward<E>(const Context &, E *, const E *,         \
                                      const int32_t *, int64_t, int64_t,       \
                                      int64_t);                                \
  template void moeCombine<E>(const Context &, E *, const E *, const float *,  \
                              const int32_t *, int64_t, int64_t, int64_t);     \
  template void moeCombineBackward<E>(                                         \
      const Context &, E *, float *, const E *, const E *, const float *,      \
      const int32_t *, int64_t, int64_t, int64_t);                             \
  template void moeAuxStats<E>(const Context &, float *, const E *,            \
                               const int32_t *, int64_t, int64_t, int64_t,     \
                               float *);                                       \
  template void moeAuxLossBackward<E>(const Context &, E *, const float *,     \
                                      const float *, const E *, int64_t,       \
                                      int64_t, int64_t, double, float *);
FSDP_CUDA_ELEMENT_TYPES(FSDP_INSTANTIATE)
#undef FSDP_INSTANTIATE

} // namespace fsdp::rt::cuda
