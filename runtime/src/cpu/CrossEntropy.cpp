//===- CrossEntropy.cpp - softmax cross-entropy loss ----------------------===//
//
// Rows of V logits (V is the vocabulary, ~50k for GPT-2, so a row is
// ~200 KB and stays in L2 across the passes over it). Each row is
// shifted by its maximum before exp, and its sum of exps is accumulated
// in double. The forward's mean over rows is summed in a fixed number of
// row chunks, then the chunk sums in order, so the loss is the same
// for any thread count. The bf16 kernels widen one row at a time into a
// thread's slot of scratch and run the f32 kernels' row code on it: their
// bits, without a widened copy of all N x V logits.
//
//===----------------------------------------------------------------------===//

#include "BF16Kernels.h"
#include "Kernels.h"
#include "VectorMath.h"

#include "fsdp/runtime/support/BFloat16.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <omp.h>

namespace fsdp::rt::cpu {
namespace {

/// Row chunks of the forward's sum; their partial sums live on the stack.
constexpr int64_t kLossChunks = 256;

/// -log softmax(row)[target] = log(sum exp(l - m)) + m - l[target]. Always
/// inlined, so that each kernel's clone compiles it for its own ISA (out
/// of line it would be baseline x86-64 code, with other bits) and the f32
/// and bf16 kernels run the same code on the same floats.
__attribute__((always_inline)) inline double
rowLoss(const float *row, int64_t V, int32_t target) {
  const float m = rowMax(row, V);
  double sum = 0.0;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < V; ++j)
    sum += expApprox(row[j] - m);
  return std::log(sum) + double(m) - double(row[target]);
}

/// d = scale * (softmax(row) - onehot(target)). The exps are stored, then
/// scaled: one exp per logit, and the row is still in L2 for the second
/// pass.
__attribute__((always_inline)) inline void
rowGrad(float *d, const float *row, int64_t V, int32_t target, float scale) {
  const float m = rowMax(row, V);
  double sum = 0.0;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < V; ++j) {
    const float e = expApprox(row[j] - m);
    d[j] = e;
    sum += e;
  }
  const float k = float(double(scale) / sum);
#pragma omp simd
  for (int64_t j = 0; j < V; ++j)
    d[j] *= k;
  d[target] -= scale;
}

/// The forward's chunk sums in order: the loss for any thread count.
float meanOfChunks(const double *partial, int64_t chunks, int64_t N) {
  double total = 0.0;
  for (int64_t ch = 0; ch < chunks; ++ch)
    total += partial[ch];
  return N > 0 ? float(total / double(N)) : 0.0f;
}

/// The OpenMP threads a bf16 kernel runs on: one scratch slot each.
int slotThreads() {
  return int(std::min<int64_t>(omp_get_max_threads(), plan::kCpuRowSlots));
}

} // namespace

FSDP_CPU_KERNEL void crossEntropyForward(float *loss, const float *logits,
                                         const int32_t *targets, int64_t N,
                                         int64_t V) {
  double partial[kLossChunks];
  const int64_t chunks = std::min(N, kLossChunks);
#pragma omp parallel for schedule(static)
  for (int64_t ch = 0; ch < chunks; ++ch) {
    double chunkSum = 0.0;
    for (int64_t i = N * ch / chunks; i < N * (ch + 1) / chunks; ++i)
      chunkSum += rowLoss(logits + i * V, V, targets[i]);
    partial[ch] = chunkSum;
  }
  *loss = meanOfChunks(partial, chunks, N);
}

/// dlogits = dloss * (softmax(logits) - onehot(targets)) / N.
FSDP_CPU_KERNEL void crossEntropyBackward(float *dlogits, const float *dloss,
                                          const float *logits,
                                          const int32_t *targets, int64_t N,
                                          int64_t V) {
  const float scale = *dloss / float(N);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < N; ++i)
    rowGrad(dlogits + i * V, logits + i * V, V, targets[i], scale);
}

FSDP_CPU_KERNEL void crossEntropyForwardBF16(float *loss,
                                             const uint16_t *logits,
                                             const int32_t *targets, int64_t N,
                                             int64_t V, float *rows) {
  double partial[kLossChunks];
  const int64_t chunks = std::min(N, kLossChunks);
#pragma omp parallel for schedule(static) num_threads(slotThreads())
  for (int64_t ch = 0; ch < chunks; ++ch) {
    float *row = rows + omp_get_thread_num() * V;
    double chunkSum = 0.0;
    for (int64_t i = N * ch / chunks; i < N * (ch + 1) / chunks; ++i) {
      const uint16_t *in = logits + i * V;
#pragma omp simd
      for (int64_t j = 0; j < V; ++j)
        row[j] = widenBF16(in[j]);
      chunkSum += rowLoss(row, V, targets[i]);
    }
    partial[ch] = chunkSum;
  }
  *loss = meanOfChunks(partial, chunks, N);
}

FSDP_CPU_KERNEL void crossEntropyBackwardBF16(uint16_t *dlogits,
                                              const float *dloss,
                                              const uint16_t *logits,
                                              const int32_t *targets, int64_t N,
                                              int64_t V, float *rows) {
  const float scale = *dloss / float(N);
#pragma omp parallel for schedule(static) num_threads(slotThreads())
  for (int64_t i = 0; i < N; ++i) {
    float *row = rows + 2 * omp_get_thread_num() * V, *d = row + V;
    const uint16_t *in = logits + i * V;
#pragma omp simd
    for (int64_t j = 0; j < V; ++j)
      row[j] = widenBF16(in[j]);
    rowGrad(d, row, V, targets[i], scale);
    uint16_t *out = dlogits + i * V;
#pragma omp simd
    for (int64_t j = 0; j < V; ++j)
      out[j] = roundToBF16(d[j]);
  }
}

} // namespace fsdp::rt::cpu
