//===- MoeRouting.cpp - mixture-of-experts routing on the CPU -------------===//
//
// A router row is E scores (8 to 256 experts), so each row is one
// thread's work, in double throughout: the choice must agree with
// transformers' on the same logits, and the weights and gradients are
// small next to the expert GEMMs they feed. MoeRouting.h says what each
// kernel computes; docs/moe.md has the formulas.
//
//===----------------------------------------------------------------------===//

#include "MoeRouting.h"

#include "Kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace fsdp::rt::cpu {
namespace {

/// The k largest of key[0..E), in decreasing order, ties to the lower
/// index: an insertion into a sorted list of at most k (k is small).
void chooseTopK(const double *key, int64_t E, int64_t k, int32_t *chosen) {
  int64_t count = 0;
  for (int64_t e = 0; e < E; ++e) {
    if (count == k && !(key[e] > key[chosen[k - 1]]))
      continue;
    int64_t pos = std::min(count, k - 1);
    // Strictly greater moves up: an equal key stays below the earlier one.
    while (pos > 0 && key[e] > key[chosen[pos - 1]]) {
      chosen[pos] = chosen[pos - 1];
      --pos;
    }
    chosen[pos] = int32_t(e);
    count = std::min(count + 1, k);
  }
}

double sigmoid(double z) { return 1.0 / (1.0 + std::exp(-z)); }

/// The unscaled weights of one row's choice (the forward's, before
/// `scale`), in double.
void rowWeights(double *g, const float *z, const int32_t *chosen, int64_t E,
                int64_t k, MoeScoring scoring, bool normalize) {
  if (scoring == MoeScoring::Softmax) {
    // Normalised: the softmax over the chosen logits; else over all E.
    double m = z[chosen[0]], sum = 0.0;
    if (!normalize)
      m = *std::max_element(z, z + E);
    if (normalize)
      for (int64_t j = 0; j < k; ++j)
        sum += std::exp(double(z[chosen[j]]) - m);
    else
      for (int64_t e = 0; e < E; ++e)
        sum += std::exp(double(z[e]) - m);
    for (int64_t j = 0; j < k; ++j)
      g[j] = std::exp(double(z[chosen[j]]) - m) / sum;
    return;
  }
  double sum = 0.0;
  for (int64_t j = 0; j < k; ++j)
    sum += g[j] = sigmoid(z[chosen[j]]);
  if (normalize)
    for (int64_t j = 0; j < k; ++j)
      g[j] /= sum;
}

} // namespace

FSDP_CPU_KERNEL void moeRouterForward(float *weights, int32_t *experts,
                                      const float *logits, const float *bias,
                                      int64_t T, int64_t E, int64_t k,
                                      int64_t scoring, int64_t normalize,
                                      double scale) {
  const MoeScoring how = MoeScoring(scoring);
#pragma omp parallel
  {
    std::vector<double> key(size_t(E), 0.0);
    double g[kMoeMaxTopK];
#pragma omp for schedule(static)
    for (int64_t t = 0; t < T; ++t) {
      const float *z = logits + t * E;
      int32_t *chosen = experts + t * k;
      // Softmax keeps the logits' order, so they are the key. Sigmoid's
      // key is as DeepSeek-V3 forms it: the f32 score plus the bias, in
      // f32.
      for (int64_t e = 0; e < E; ++e)
        key[e] = how == MoeScoring::Softmax
                     ? double(z[e])
                     : double(float(sigmoid(z[e])) + (bias ? bias[e] : 0.0f));
      chooseTopK(key.data(), E, k, chosen);
      rowWeights(g, z, chosen, E, k, how, normalize != 0);
      for (int64_t j = 0; j < k; ++j)
        weights[t * k + j] = float(scale * g[j]);
    }
  }
}

FSDP_CPU_KERNEL void moeRouterBackward(float *dlogits, const float *dweights,
                                       const float *logits,
                                       const int32_t *experts, int64_t T,
                                       int64_t E, int64_t k, int64_t scoring,
                                       int64_t normalize, double scale) {
  const MoeScoring how = MoeScoring(scoring);
  const bool norm = normalize != 0;
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < T; ++t) {
    const float *z = logits + t * E;
    const int32_t *chosen = experts + t * k;
    float *dz = dlogits + t * E;
    double g[kMoeMaxTopK], dg[kMoeMaxTopK];
    rowWeights(g, z, chosen, E, k, how, norm);
    double dot = 0.0; // sum_j g_j dg_j, the renormalisation's term
    for (int64_t j = 0; j < k; ++j) {
      dg[j] = scale * double(dweights[t * k + j]);
      dot += g[j] * dg[j];
    }
    std::fill(dz, dz + E, 0.0f);
    if (how == MoeScoring::Softmax && norm) {
      // g is the softmax of the chosen logits: dz_Ij = g_j (dg_j - dot).
      for (int64_t j = 0; j < k; ++j)
        dz[chosen[j]] = float(g[j] * (dg[j] - dot));
    } else if (how == MoeScoring::Softmax) {
      // g_j = p_Ij: dp is dg on the chosen, 0 elsewhere; dz = p (dp - dot).
      const double m = *std::max_element(z, z + E);
      double sum = 0.0;
      for (int64_t e = 0; e < E; ++e)
        sum += std::exp(double(z[e]) - m);
      for (int64_t e = 0; e < E; ++e)
        dz[e] = float(-std::exp(double(z[e]) - m) / sum * dot);
      for (int64_t j = 0; j < k; ++j)
        dz[chosen[j]] = float(g[j] * (dg[j] - dot));
    } else {
      // Sigmoid: ds_Ij = dg_j without normalisation; with it,
      // (dg_j - dot) / S for S the chosen sigmoids' sum. dz = s (1 - s) ds.
      double S = 0.0;
      for (int64_t j = 0; j < k; ++j)
        S += sigmoid(z[chosen[j]]);
      for (int64_t j = 0; j < k; ++j) {
        const double s = sigmoid(z[chosen[j]]);
        const double ds = norm ? (dg[j] - dot) / S : dg[j];
        dz[chosen[j]] = float(s * (1.0 - s) * ds);
      }
    }
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
  // A counting sort: each expert's pairs in pair order, from its offset.
  std::vector<int32_t> next(offsets, offsets + E);
  for (int64_t p = 0; p < pairs; ++p) {
    position[p] = next[experts[p]]++;
    order[position[p]] = int32_t(p);
  }
  return true;
}

} // namespace fsdp::rt::cpu
