//===- CrossEntropy.cpp - softmax cross-entropy loss ----------------------===//
//
// Rows of V logits (V is the vocabulary, ~50k for GPT-2, so a row is
// ~200 KB and stays in L2 across the passes over it). Each row is
// shifted by its maximum before exp, and its sum of exps is accumulated
// in double. The forward's mean over rows is summed in a fixed number of
// row chunks, then the chunk sums in order, so the loss is the same
// for any thread count.
//
//===----------------------------------------------------------------------===//

#include "Kernels.h"
#include "VectorMath.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace fsdp::rt::cpu {
namespace {

/// Row chunks of the forward's sum; their partial sums live on the stack.
constexpr int64_t kLossChunks = 256;

} // namespace

FSDP_CPU_KERNEL void crossEntropyForward(float *loss, const float *logits,
                                         const int32_t *targets, int64_t N,
                                         int64_t V) {
  double partial[kLossChunks];
  const int64_t chunks = std::min(N, kLossChunks);
#pragma omp parallel for schedule(static)
  for (int64_t ch = 0; ch < chunks; ++ch) {
    double chunkSum = 0.0;
    for (int64_t i = N * ch / chunks; i < N * (ch + 1) / chunks; ++i) {
      const float *row = logits + i * V;
      const float m = rowMax(row, V);
      double sum = 0.0;
#pragma omp simd reduction(+ : sum)
      for (int64_t j = 0; j < V; ++j)
        sum += expApprox(row[j] - m);
      // -log softmax[target] = log(sum exp(l - m)) + m - l[target].
      chunkSum += std::log(sum) + double(m) - double(row[targets[i]]);
    }
    partial[ch] = chunkSum;
  }
  double total = 0.0;
  for (int64_t ch = 0; ch < chunks; ++ch)
    total += partial[ch];
  *loss = N > 0 ? float(total / double(N)) : 0.0f;
}

/// dlogits = dloss * (softmax(logits) - onehot(targets)) / N.
FSDP_CPU_KERNEL void crossEntropyBackward(float *dlogits, const float *dloss,
                                          const float *logits,
                                          const int32_t *targets, int64_t N,
                                          int64_t V) {
  const float scale = *dloss / float(N);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < N; ++i) {
    const float *row = logits + i * V;
    float *d = dlogits + i * V;
    const float m = rowMax(row, V);
    // Store the exps, then scale them: one exp per logit, and the row is
    // still in L2 for the second pass.
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
    d[targets[i]] -= scale;
  }
}

} // namespace fsdp::rt::cpu
