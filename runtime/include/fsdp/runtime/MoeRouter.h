//===- MoeRouter.h - one router row, shared by every backend ----*- C++ -*-===//
//
// A mixture-of-experts router's work on one token (docs/moe.md): the
// choice of k experts, their weights and the weights' gradient with
// respect to the logits. One definition for the CPU kernels and the CUDA
// kernels (FSDP_MOE_HD is `__host__ __device__` under nvcc), so that the
// two cannot choose differently. Logits and keys are read through
// callables (a row of E floats on the CPU, of E bf16 or floats on the
// GPU), so no E-sized local array is needed on the device. The arithmetic
// is double throughout.
//
// Standard C++17 (plus the macro): no dependency beyond <math.h>.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_MOEROUTER_H
#define FSDP_RUNTIME_MOEROUTER_H

#include <cstdint>
#include <math.h> // exp, in host and device code

#if defined(__CUDACC__)
#define FSDP_MOE_HD __host__ __device__
#else
#define FSDP_MOE_HD
#endif

namespace fsdp::moe {

/// How router logits become scores: the router kernels' `scoring`.
enum class Scoring : int64_t {
  Softmax = 0, ///< Mixtral, Qwen3-MoE: softmax over the E experts
  Sigmoid = 1, ///< DeepSeek-V3: sigmoid per expert, chosen with a bias
};

/// The largest top-k the kernels take (a token's choices live on the
/// stack, or in registers).
inline constexpr int64_t kMaxTopK = 64;

FSDP_MOE_HD inline double sigmoid(double z) { return 1.0 / (1.0 + exp(-z)); }

/// The key a sigmoid router chooses by, as DeepSeek-V3 forms it: the f32
/// score plus the bias, in f32.
FSDP_MOE_HD inline double sigmoidKey(float logit, float bias) {
  return double(float(sigmoid(logit)) + bias);
}

/// The k experts of largest key(e), e < E, in decreasing order, ties to
/// the lower index: an insertion into a sorted list of at most k (k is
/// small next to E).
template <typename Key>
FSDP_MOE_HD void chooseTopK(const Key &key, int64_t E, int64_t k,
                            int32_t *chosen) {
  double kept[kMaxTopK];
  int64_t count = 0;
  for (int64_t e = 0; e < E; ++e) {
    const double v = key(e);
    if (count == k && !(v > kept[k - 1]))
      continue;
    int64_t pos = count < k ? count : k - 1;
    // Strictly greater moves up: an equal key stays below the earlier one.
    while (pos > 0 && v > kept[pos - 1]) {
      kept[pos] = kept[pos - 1];
      chosen[pos] = chosen[pos - 1];
      --pos;
    }
    kept[pos] = v;
    chosen[pos] = int32_t(e);
    count = count < k ? count + 1 : k;
  }
}

/// The softmax's max and sum of exp(z - max) over all E logits.
template <typename Logit>
FSDP_MOE_HD void softmaxStats(const Logit &z, int64_t E, double &max,
                              double &sum) {
  max = z(0);
  for (int64_t e = 1; e < E; ++e)
    max = z(e) > max ? z(e) : max;
  sum = 0.0;
  for (int64_t e = 0; e < E; ++e)
    sum += exp(z(e) - max);
}

/// The unscaled weights g (k) of one row's choice. Softmax: over the
/// chosen logits when `normalize`, else over all E; sigmoid: the chosen
/// scores, divided by their sum when `normalize`.
template <typename Logit>
FSDP_MOE_HD void rowWeights(double *g, const Logit &z, const int32_t *chosen,
                            int64_t E, int64_t k, Scoring scoring,
                            bool normalize) {
  double m = 0.0, sum = 0.0;
  if (scoring == Scoring::Softmax && !normalize) {
    softmaxStats(z, E, m, sum);
  } else if (scoring == Scoring::Softmax) {
    m = z(chosen[0]); // the largest chosen logit
    for (int64_t j = 0; j < k; ++j)
      sum += exp(z(chosen[j]) - m);
  }
  for (int64_t j = 0; j < k; ++j)
    g[j] = scoring == Scoring::Softmax ? exp(z(chosen[j]) - m) / sum
                                       : sigmoid(z(chosen[j]));
  if (scoring == Scoring::Sigmoid && normalize) {
    for (int64_t j = 0; j < k; ++j)
      sum += g[j];
    for (int64_t j = 0; j < k; ++j)
      g[j] /= sum;
  }
}

/// Whether index i lies in [0, n): every index a kernel reads from a
/// buffer of indices is checked before it addresses memory. The plan
/// loader lets indices come only from their writer, but another kernel's
/// buffer may share their arena bytes in a plan edited by hand: such an
/// index reads or writes nothing (a zero row, no contribution).
FSDP_MOE_HD inline bool inRange(int64_t i, int64_t n) {
  return i >= 0 && i < n;
}

/// One row of the weights' gradient with respect to the logits, for the
/// forward's choice: dg (k) the weights' gradient already times `scale`;
/// store(e, value) is called once for every e < E, in order (zeros for a
/// choice out of range).
template <typename Logit, typename Store>
FSDP_MOE_HD void rowBackward(const Store &store, const Logit &z,
                             const int32_t *chosen, const double *dg, int64_t E,
                             int64_t k, Scoring scoring, bool normalize) {
  for (int64_t j = 0; j < k; ++j)
    if (!inRange(chosen[j], E)) {
      for (int64_t e = 0; e < E; ++e)
        store(e, 0.0);
      return;
    }
  double g[kMaxTopK];
  rowWeights(g, z, chosen, E, k, scoring, normalize);
  double dot = 0.0; // sum_j g_j dg_j, the renormalisation's term
  for (int64_t j = 0; j < k; ++j)
    dot += g[j] * dg[j];
  double chosenSigmoids = 0.0, m = 0.0, sum = 1.0;
  for (int64_t j = 0; j < k; ++j)
    chosenSigmoids += sigmoid(z(chosen[j]));
  // Without renormalisation a softmax sends -p_e dot to every expert.
  const bool everyExpert = scoring == Scoring::Softmax && !normalize;
  if (everyExpert)
    softmaxStats(z, E, m, sum);
  for (int64_t e = 0; e < E; ++e) {
    int64_t j = 0;
    while (j < k && chosen[j] != e)
      ++j;
    double d = 0.0;
    if (j < k && scoring == Scoring::Softmax) {
      d = g[j] * (dg[j] - dot); // softmax of the chosen or of all E
    } else if (j < k) {
      // ds = dg, or (dg - dot) / S normalised; dz = s (1 - s) ds.
      const double s = sigmoid(z(e));
      d = s * (1.0 - s) * (normalize ? (dg[j] - dot) / chosenSigmoids : dg[j]);
    } else if (everyExpert) {
      d = -exp(z(e) - m) / sum * dot;
    }
    store(e, d);
  }
}

/// The auxiliary loss's F_e (row 1: the fraction of pairs routed to e)
/// or P_e (row 0: the mean probability of e) over the L layers' stats
/// (L x 2 x E: each layer's probability sums, then pair counts) and their
/// L T rows (docs/moe.md, "Load balancing").
FSDP_MOE_HD inline double auxFraction(const float *stats, int64_t L, int64_t T,
                                      int64_t E, int64_t e, int64_t row) {
  double sum = 0.0;
  for (int64_t l = 0; l < L; ++l)
    sum += double(stats[(l * 2 + row) * E + e]);
  return sum / double(L * T);
}

/// The auxiliary loss, coef E sum_e F_e P_e, over the L layers' stats.
FSDP_MOE_HD inline double auxLoss(const float *stats, int64_t L, int64_t T,
                                  int64_t E, double coef) {
  double sum = 0.0;
  for (int64_t e = 0; e < E; ++e)
    sum +=
        auxFraction(stats, L, T, E, e, 1) * auxFraction(stats, L, T, E, e, 0);
  return coef * double(E) * sum;
}

/// The rows L T that stats summed over the layers (2 x E: probability
/// sums, pair counts) cover: the counts sum to k L T. 0 for none.
FSDP_MOE_HD inline double auxRows(const float *stats, int64_t E, int64_t k) {
  double pairs = 0.0;
  for (int64_t e = 0; e < E; ++e)
    pairs += double(stats[E + e]);
  return pairs / double(k);
}

/// The auxiliary loss on stats summed over the layers (the kernel table's
/// form: fsdp.moe_aux_loss): coef E sum_e F_e P_e with F_e and P_e the
/// sums over auxRows.
FSDP_MOE_HD inline double auxLossOfSums(const float *stats, int64_t E,
                                        int64_t k, double coef) {
  const double rows = auxRows(stats, E, k);
  double sum = 0.0;
  for (int64_t e = 0; e < E && rows > 0; ++e)
    sum += double(stats[E + e]) / rows * (double(stats[e]) / rows);
  return coef * double(E) * sum;
}

/// Its derivative by expert e's probability sum (the counts are
/// constant): coef E F_e / rows.
FSDP_MOE_HD inline double auxLossGradOfSum(const float *stats, int64_t E,
                                           int64_t k, double coef, int64_t e) {
  const double rows = auxRows(stats, E, k);
  return rows > 0 ? coef * double(E) * double(stats[E + e]) / (rows * rows)
                  : 0.0;
}

/// The selection bias's update from its (rank-averaged) signal g: against
/// the sign, by `rate`; no move where the load is at the mean.
FSDP_MOE_HD inline float selectionBiasStep(float bias, float signal,
                                           double rate) {
  return signal > 0   ? float(double(bias) - rate)
         : signal < 0 ? float(double(bias) + rate)
                      : bias;
}

} // namespace fsdp::moe

#endif // FSDP_RUNTIME_MOEROUTER_H
