//===- MoeRouting.cpp - mixture-of-experts routing on the CPU -------------===//
//
// A router row is E scores (8 to 256 experts), so each row is one
// thread's work, with the row arithmetic of fsdp/runtime/MoeRouter.h
// (double throughout, shared with the CUDA kernels): the choice must
// agree with transformers' on the same logits, and the weights and
// gradients are small next to the expert GEMMs they feed. MoeRouting.h
// says what each kernel computes; docs/moe.md has the formulas.
//
//===----------------------------------------------------------------------===//

#include "MoeRouting.h"

#include "Kernels.h"

#include "fsdp/runtime/support/BFloat16.h"

#include <algorithm>
#include <cmath>

namespace fsdp::rt::cpu {

FSDP_CPU_KERNEL void moeRouterForward(float *weights, int32_t *experts,
                                      const float *logits, const float *bias,
                                      int64_t T, int64_t E, int64_t k,
                                      int64_t scoring, int64_t normalize,
                                      double scale) {
  const moe::Scoring how = moe::Scoring(scoring);
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < T; ++t) {
    const float *z = logits + t * E;
    int32_t *chosen = experts + t * k;
    // Softmax keeps the logits' order, so they are the key.
    auto key = [&](int64_t e) {
      return how == moe::Scoring::Softmax
                 ? double(z[e])
                 : moe::sigmoidKey(z[e], bias ? bias[e] : 0.0f);
    };
    auto logit = [&](int64_t e) { return double(z[e]); };
    double g[moe::kMaxTopK];
    moe::chooseTopK(key, E, k, chosen);
    moe::rowWeights(g, logit, chosen, E, k, how, normalize != 0);
    for (int64_t j = 0; j < k; ++j)
      weights[t * k + j] = float(scale * g[j]);
  }
}

FSDP_CPU_KERNEL void moeRouterBackward(float *dlogits, const float *dweights,
                                       const float *logits,
                                       const int32_t *experts, int64_t T,
                                       int64_t E, int64_t k, int64_t scoring,
                                       int64_t normalize, double scale) {
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < T; ++t) {
    const float *z = logits + t * E;
    float *dz = dlogits + t * E;
    double dg[moe::kMaxTopK];
    for (int64_t j = 0; j < k; ++j)
      dg[j] = scale * double(dweights[t * k + j]);
    moe::rowBackward([&](int64_t e, double v) { dz[e] = float(v); },
                     [&](int64_t e) { return double(z[e]); }, experts + t * k,
                     dg, E, k, moe::Scoring(scoring), normalize != 0);
  }
}

FSDP_CPU_KERNEL bool moeSortByExpert(int32_t *order, int32_t *position,
                                     int32_t *offsets, const int32_t *experts,
                                     int64_t T, int64_t k, int64_t E) {
  const int64_t pairs = T * k;
  std::fill(offsets, offsets + E + 1, 0);
  for (int64_t p = 0; p < pairs; ++p) {
    if (experts[p] < 0 || experts[p] >= E)
      return false;
    ++offsets[experts[p] + 1];
  }
  for (int64_t e = 0; e < E; ++e)
    offsets[e + 1] += offsets[e];
  // A counting sort, each expert's pairs in pair order from its offset,
  // with offsets[e] as expert e's cursor (nothing allocated while
  // training): afterwards offsets[e] has reached the next expert's start,
  // so the array shifts back by one.
  for (int64_t p = 0; p < pairs; ++p) {
    position[p] = offsets[experts[p]]++;
    order[position[p]] = int32_t(p);
  }
  for (int64_t e = E; e > 0; --e)
    offsets[e] = offsets[e - 1];
  offsets[0] = 0;
  return true;
}

FSDP_CPU_KERNEL void moeSort(int32_t *order, int32_t *position,
                             int32_t *offsets, const int32_t *experts,
                             int64_t R, int64_t K, int64_t E) {
  if (moeSortByExpert(order, position, offsets, experts, R, K, E))
    return;
  // An expert index out of range: the plan loader lets a sort read only a
  // router's choices among its E experts, so this is unreachable from a
  // loaded plan. Still leave indices every reader can follow: all pairs
  // in pair order, with expert 0.
  const int64_t pairs = R * K;
  for (int64_t p = 0; p < pairs; ++p)
    order[p] = position[p] = int32_t(p);
  offsets[0] = 0;
  std::fill(offsets + 1, offsets + E + 1, int32_t(pairs));
}

FSDP_CPU_KERNEL void moeAuxStats(float *stats, const float *logits,
                                 const int32_t *experts, int64_t T, int64_t E,
                                 int64_t k, float *rowScratch) {
  float *rowMax = rowScratch, *rowInv = rowScratch + T;
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < T; ++t) {
    double m = 0.0, sum = 0.0;
    moe::softmaxStats([&](int64_t e) { return double(logits[t * E + e]); }, E,
                      m, sum);
    rowMax[t] = float(m);
    rowInv[t] = float(1.0 / sum);
  }
  // One expert a thread, its rows in order: any thread count, one sum.
#pragma omp parallel for schedule(static)
  for (int64_t e = 0; e < E; ++e) {
    double prob = 0.0;
    for (int64_t t = 0; t < T; ++t)
      prob += std::exp(double(logits[t * E + e]) - double(rowMax[t])) *
              double(rowInv[t]);
    int64_t count = 0;
    for (int64_t p = 0; p < T * k; ++p)
      count += experts[p] == e;
    stats[e] = float(prob);
    stats[E + e] = float(count);
  }
}

FSDP_CPU_KERNEL void moeAuxLoss(float *loss, const float *stats, int64_t L,
                                int64_t T, int64_t E, double coef) {
  *loss = float(moe::auxLoss(stats, L, T, E, coef));
}

FSDP_CPU_KERNEL void moeAuxLossBackward(float *dlogits, const float *dloss,
                                        const float *stats, const float *logits,
                                        int64_t L, int64_t T, int64_t E,
                                        double coef, float *expertScratch) {
  const double scale = double(*dloss) * coef * double(E) / double(L * T);
  for (int64_t e = 0; e < E; ++e)
    expertScratch[e] = float(scale * moe::auxFraction(stats, L, T, E, e, 1));
  // Through each row's softmax: moeAuxStatsBackward's rows with a as the
  // probability sums' gradient.
  moeAuxStatsBackward(dlogits, expertScratch, logits, T, E);
}

// The kernel table's forms of the auxiliary loss (fsdp.moe_aux_stats,
// moe_aux_loss and their backward ops): stats summed layer by layer, the
// loss added to the training loss.

FSDP_CPU_KERNEL void moeAuxStatsForward(float *result, const float *logits,
                                        const int32_t *experts,
                                        const float *sum, int64_t R, int64_t E,
                                        int64_t K, float *rows) {
  moeAuxStats(result, logits, experts, R, E, K, rows);
  if (sum)
    for (int64_t i = 0; i < 2 * E; ++i)
      result[i] += sum[i];
}

FSDP_CPU_KERNEL void moeAuxStatsBackward(float *result, const float *grad,
                                         const float *logits, int64_t R,
                                         int64_t E) {
  // Only the probability sums (grad's row 0) depend on the logits:
  // through each row's softmax, dz_t = p_t (g - <p_t, g>).
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < R; ++t) {
    const float *z = logits + t * E;
    double m = 0.0, sum = 0.0, dot = 0.0;
    moe::softmaxStats([&](int64_t e) { return double(z[e]); }, E, m, sum);
    for (int64_t e = 0; e < E; ++e)
      dot += std::exp(double(z[e]) - m) / sum * double(grad[e]);
    for (int64_t e = 0; e < E; ++e)
      result[t * E + e] =
          float(std::exp(double(z[e]) - m) / sum * (double(grad[e]) - dot));
  }
}

FSDP_CPU_KERNEL void moeAuxLossForward(float *result, const float *stats,
                                       const float *loss, int64_t E,
                                       int64_t top_k, double coef) {
  *result = float(double(*loss) + moe::auxLossOfSums(stats, E, top_k, coef));
}

FSDP_CPU_KERNEL void moeAuxLossGrad(float *result, const float *grad,
                                    const float *stats, int64_t E,
                                    int64_t top_k, double coef) {
  for (int64_t e = 0; e < E; ++e) {
    result[e] =
        float(double(*grad) * moe::auxLossGradOfSum(stats, E, top_k, coef, e));
    result[E + e] = 0.0f; // the counts: piecewise constant
  }
}

FSDP_CPU_KERNEL void moeBiasSignal(float *result, const int32_t *experts,
                                   int64_t R, int64_t K, int64_t E) {
  // One expert a thread, its count exact in int64.
  const double mean = double(R * K) / double(E);
#pragma omp parallel for schedule(static)
  for (int64_t e = 0; e < E; ++e) {
    int64_t count = 0;
    for (int64_t p = 0; p < R * K; ++p)
      count += experts[p] == e;
    result[e] = float(double(count) - mean);
  }
}

FSDP_CPU_KERNEL void moeSelectionBiasUpdate(float *bias, const float *signal,
                                            int64_t n, double rate,
                                            uint16_t *copy) {
  for (int64_t i = 0; i < n; ++i) {
    bias[i] = moe::selectionBiasStep(bias[i], signal[i], rate);
    if (copy)
      copy[i] = roundToBF16(bias[i]);
  }
}

} // namespace fsdp::rt::cpu
