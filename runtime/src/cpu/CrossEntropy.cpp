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

#include <algorithm>
#include <cmath>
#include <cstring>

namespace fsdp::rt::cpu {
namespace {

/// Row chunks of the forward's sum; their partial sums live on the stack.
constexpr int64_t kLossChunks = 256;

inline int32_t floatBits(float x) {
  int32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits;
}

inline float bitsFloat(int32_t bits) {
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

/// Maps float bits to an int that orders like the float (an involution).
inline int32_t orderedKey(int32_t bits) {
  return bits ^ ((bits >> 31) & 0x7fffffff);
}

/// exp(x) to within 1e-7 relative (Cephes' expf polynomial). Results below
/// ~1e-38 flush to 0, above 88.3 saturate at exp(88.3); NaN and +-inf give
/// NaN (a non-finite input is an upstream error that must stay visible).
/// Written without branches, floor or float comparisons: under GCC's
/// default -ftrapping-math any of those stops the vectoriser. The same
/// function is in Elementwise.cpp and Attention.cpp (kept in step).
inline float expApprox(float x) {
  // Clamp on the integer image of x: integer min/max cannot trap.
  int32_t key = orderedKey(floatBits(x));
  key = std::min(std::max(key, orderedKey(floatBits(-88.0f))),
                 orderedKey(floatBits(88.3f)));
  float xc = bitsFloat(orderedKey(key));
  // n = round(xc / ln 2) by the 1.5 * 2^23 trick; exp(xc) = 2^n exp(r).
  float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = xc - n * 0.693359375f; // ln 2 in two parts, for an exact r
  r = r + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  float y = p * r * r + r + 1.0f;
  // n is in [-127, 127]; n = -127 gives the bits of +0.
  float scale = bitsFloat((static_cast<int32_t>(n) + 127) << 23);
  return y * scale + 0.0f * x; // 0 * x is NaN exactly when x is not finite
}

/// max(row[0..n)), as the integer max of the ordered keys: a float max
/// is a compare-and-select, which GCC does not vectorise under
/// -ftrapping-math. A positive NaN is the largest key, so it propagates.
inline float rowMax(const float *row, int64_t n) {
  int32_t key = orderedKey(floatBits(row[0]));
#pragma omp simd reduction(max : key)
  for (int64_t j = 0; j < n; ++j)
    key = std::max(key, orderedKey(floatBits(row[j])));
  return bitsFloat(orderedKey(key));
}

} // namespace

void crossEntropyForward(float *loss, const float *logits,
                         const int32_t *targets, int64_t N, int64_t V) {
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

void crossEntropyBackward(float *dlogits, const float *dloss,
                          const float *logits, const int32_t *targets,
                          int64_t N, int64_t V) {
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
