//===- CrossEntropy.cu - softmax cross-entropy loss -----------------------===//
//
// Rows of V logits (V ~ 50k for GPT-2). Each row's log-sum-exp is one
// online pass (running max and sum of exp(x - max), rescaled when the max
// grows; __expf, whose error is a few ulp on the arguments <= 0 it sees
// here), merged across lanes and warps in a fixed order.
//
// Forward, deterministic, two ways (see Kernels.h):
//   - no scratch: ONE block of 1024 threads, warp w taking rows w, w + 32,
//     ...; each warp sums its rows' losses in double, then thread 0 adds the
//     32 warp sums in order. The order is fixed, but the whole loss runs on
//     one SM: exp throughput bounds it at several ms for N = 4096,
//     V = 50257.
//   - with N floats of scratch: one block per row writes the row's loss,
//     then one block adds them (each thread a fixed strided subset, in
//     double, then a fixed tree).
// Backward: one block per row; an online pass, then the write pass
// d = exp(x - max) * (dloss / N / sum), minus dloss / N at the target.
// dloss is read on the device.
//
// bf16 logits are widened where they are read (the loss and the per-row
// losses are float always); the backward rounds each gradient once.
//
//===----------------------------------------------------------------------===//

#include "Common.cuh"

namespace fsdp::rt::cuda {
namespace {

constexpr int kOneBlockThreads = 1024;
constexpr int kRowBlockThreads = 512;

/// One lane's share of a row: columns lane, lane + 32, ... (four loads in
/// flight per step).
template <typename E>
__device__ __forceinline__ detail::MaxSum laneMaxSum(const E *row, int64_t V,
                                                     int lane) {
  using detail::toFloat;
  detail::MaxSum acc = detail::maxSumEmpty();
  int64_t j = lane;
  for (; j + 96 < V; j += 128) {
    const float x0 = toFloat(row[j]), x1 = toFloat(row[j + 32]),
                x2 = toFloat(row[j + 64]), x3 = toFloat(row[j + 96]);
    detail::maxSumAdd(acc, x0);
    detail::maxSumAdd(acc, x1);
    detail::maxSumAdd(acc, x2);
    detail::maxSumAdd(acc, x3);
  }
  for (; j < V; j += 32)
    detail::maxSumAdd(acc, toFloat(row[j]));
  return acc;
}

/// A thread's share of a row for block-per-row kernels.
template <typename E>
__device__ __forceinline__ detail::MaxSum threadMaxSum(const E *row,
                                                       int64_t V) {
  detail::MaxSum acc = detail::maxSumEmpty();
  for (int64_t j = threadIdx.x; j < V; j += blockDim.x)
    detail::maxSumAdd(acc, detail::toFloat(row[j]));
  return acc;
}

template <typename E>
__global__ void __launch_bounds__(kOneBlockThreads)
    crossEntropyOneBlockKernel(float *__restrict__ loss,
                               const E *__restrict__ logits,
                               const int32_t *__restrict__ targets, int64_t N,
                               int64_t V) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int warps = blockDim.x >> 5;
  double acc = 0.0;
  for (int64_t i = warp; i < N; i += warps) {
    const E *row = logits + i * V;
    const detail::MaxSum ms = detail::warpMaxSum(laneMaxSum(row, V, lane));
    // -log softmax[target] = log(sum exp(l - m)) + m - l[target].
    if (lane == 0)
      acc += double(logf(ms.s)) + double(ms.m) -
             double(detail::toFloat(row[targets[i]]));
  }
  // Lanes other than 0 hold 0; the warp sum is lane 0's value exactly.
  const double total = detail::blockSumDouble(acc);
  if (threadIdx.x == 0)
    *loss = N > 0 ? float(total / double(N)) : 0.0f;
}

template <typename E>
__global__ void __launch_bounds__(kRowBlockThreads)
    crossEntropyRowLossKernel(float *__restrict__ rowLoss,
                              const E *__restrict__ logits,
                              const int32_t *__restrict__ targets, int64_t V) {
  const int64_t i = blockIdx.x;
  const E *row = logits + i * V;
  const detail::MaxSum ms = detail::blockMaxSum(threadMaxSum(row, V));
  if (threadIdx.x == 0)
    // (max - target logit) first: both are large for large logits, and
    // their difference is exact where logf(s) + max would round.
    rowLoss[i] = (ms.m - detail::toFloat(row[targets[i]])) + logf(ms.s);
}

__global__ void __launch_bounds__(kOneBlockThreads)
    meanKernel(float *__restrict__ loss, const float *__restrict__ values,
               int64_t N) {
  double acc = 0.0;
  for (int64_t i = threadIdx.x; i < N; i += blockDim.x)
    acc += values[i];
  const double total = detail::blockSumDouble(acc);
  if (threadIdx.x == 0)
    *loss = N > 0 ? float(total / double(N)) : 0.0f;
}

template <typename E>
__global__ void __launch_bounds__(kRowBlockThreads)
    crossEntropyBackwardKernel(E *__restrict__ dlogits,
                               const float *__restrict__ dloss,
                               const E *__restrict__ logits,
                               const int32_t *__restrict__ targets, int64_t N,
                               int64_t V) {
  const int64_t i = blockIdx.x;
  const E *row = logits + i * V;
  E *d = dlogits + i * V;
  const detail::MaxSum ms = detail::blockMaxSum(threadMaxSum(row, V));
  const float scale = dloss[0] / float(N);
  const float k = scale / ms.s;
  const int64_t target = targets[i];
  for (int64_t j = threadIdx.x; j < V; j += blockDim.x) {
    float g = __expf(detail::toFloat(row[j]) - ms.m) * k;
    if (j == target)
      g -= scale;
    d[j] = detail::fromFloat<E>(g);
  }
}

} // namespace

template <typename E>
void crossEntropyForward(const Context &ctx, float *loss, const E *logits,
                         const int32_t *targets, int64_t N, int64_t V,
                         float *rowScratch) {
  if (rowScratch && N > 0) {
    crossEntropyRowLossKernel<<<unsigned(N), kRowBlockThreads, 0, ctx.stream>>>(
        rowScratch, logits, targets, V);
    detail::checkLaunch("crossEntropyForward (rows)");
    meanKernel<<<1, kOneBlockThreads, 0, ctx.stream>>>(loss, rowScratch, N);
    detail::checkLaunch("crossEntropyForward (mean)");
    return;
  }
  crossEntropyOneBlockKernel<<<1, kOneBlockThreads, 0, ctx.stream>>>(
      loss, logits, targets, N, V);
  detail::checkLaunch("crossEntropyForward");
}

/// dlogits = dloss[0] * (softmax(logits) - onehot(targets)) / N; dloss is
/// read on the device.
template <typename E>
void crossEntropyBackward(const Context &ctx, E *dlogits, const float *dloss,
                          const E *logits, const int32_t *targets, int64_t N,
                          int64_t V) {
  if (N <= 0 || V <= 0)
    return;
  crossEntropyBackwardKernel<<<unsigned(N), kRowBlockThreads, 0, ctx.stream>>>(
      dlogits, dloss, logits, targets, N, V);
  detail::checkLaunch("crossEntropyBackward");
}

#define FSDP_INSTANTIATE(E)                                                    \
  template void crossEntropyForward<E>(const Context &, float *, const E *,    \
                                       const int32_t *, int64_t, int64_t,      \
                                       float *);                               \
  template void crossEntropyBackward<E>(const Context &, E *, const float *,   \
                                        const E *, const int32_t *, int64_t,   \
                                        int64_t);
FSDP_CUDA_ELEMENT_TYPES(FSDP_INSTANTIATE)
#undef FSDP_INSTANTIATE

} // namespace fsdp::rt::cuda
