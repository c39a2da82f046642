//===- GradClip.cpp - gradient clipping's sum of squares and coefficient --===//
//
// The sum of squares of a gradient shard, in double and in an order that
// depends on the element count alone: kGradSqSumParts contiguous parts
// (summed by the threads, each part in 8 independent lanes, which the
// compiler vectorises without reassociating), then the parts and the lanes
// in order. Any thread count gives the same bits.
//
//===----------------------------------------------------------------------===//

#include "Kernels.h"

#include "fsdp/runtime/PlanFormat.h"

#include <algorithm>
#include <array>
#include <cmath>

namespace fsdp::rt::cpu {
namespace {
constexpr int kSumLanes = 8;

/// The sum of x[i]^2 over i < n, in double: lane l sums the elements i
/// with i % 8 == l, the lanes are added in order.
inline double sumOfSquares(const float *x, int64_t n) {
  std::array<double, kSumLanes> lane{};
  int64_t i = 0;
  for (; i + kSumLanes <= n; i += kSumLanes)
    for (int l = 0; l < kSumLanes; ++l) {
      double v = x[i + l];
      lane[l] += v * v;
    }
  for (int l = 0; i < n; ++i, ++l) {
    double v = x[i];
    lane[l] += v * v;
  }
  double sum = 0.0;
  for (double s : lane)
    sum += s;
  return sum;
}
} // namespace

FSDP_CPU_KERNEL void gradSqSum(float *out, const float *grad, const float *acc,
                               int64_t n) {
  std::array<double, kGradSqSumParts> parts{};
  const int64_t per = (n + kGradSqSumParts - 1) / kGradSqSumParts;
#pragma omp parallel for schedule(static) if (n >= (1 << 16))
  for (int64_t p = 0; p < kGradSqSumParts; ++p) {
    int64_t begin = std::min(n, p * per), end = std::min(n, begin + per);
    parts[p] = sumOfSquares(grad + begin, end - begin);
  }
  double sum = acc ? double(*acc) : 0.0;
  for (double part : parts)
    sum += part;
  *out = float(sum);
}

/// Gradient clipping's coefficient (PyTorch's clip_grad_norm_): *coef =
/// min(1, maxNorm / (sqrt(*sumSq) + plan::kClipEpsilon)), in double,
/// rounded to f32; exactly 1 where the norm is below maxNorm, NaN for a
/// NaN sum.
void clipCoefficient(float *coef, const float *sumSq, double maxNorm) {
  double clip = maxNorm / (std::sqrt(double(*sumSq)) + plan::kClipEpsilon);
  // NaN fails the comparison and stays NaN, as torch.clamp keeps it.
  *coef = clip >= 1.0 ? 1.0f : float(clip);
}

} // namespace fsdp::rt::cpu
