//===- CpuMoeTest.cpp - mixture-of-experts routing ------------------------===//
//
// Part of fsdp-cpu-kernels-test (CpuKernelsTest.cpp says how the kernels
// are checked). The router against a double reference written from
// docs/moe.md's formulas (a stable sort for the choice, the weights by
// definition), its gradient against central differences of that
// reference with the choice held, and the sort by expert against a stable
// sort; a block of linear experts (router, sort, permute, grouped linear,
// combine) and its gradients against a dense double reference.
//
//===----------------------------------------------------------------------===//

#include "CpuKernelsCheck.h"
#include "cpu/MoeExperts.h"
#include "cpu/MoeRouting.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include <omp.h>

namespace cpukernels {
namespace {
namespace moe = fsdp::moe;

struct RouterCase {
  int64_t T, E, k;
  moe::Scoring scoring;
  bool normalize, withBias;
  double scale;
  std::string name() const {
    return std::string(scoring == moe::Scoring::Softmax ? "softmax"
                                                        : "sigmoid") +
           (normalize ? " normalised" : "") + (withBias ? " with bias" : "") +
           " T=" + std::to_string(T) + " E=" + std::to_string(E) +
           " k=" + std::to_string(k);
  }
};

double refSigmoid(double z) { return 1.0 / (1.0 + std::exp(-z)); }

/// The choice of one row: experts by decreasing key, ties to the lower
/// index (a stable sort), the first k.
std::vector<int32_t> refChoice(const float *z, const float *bias,
                               const RouterCase &c) {
  std::vector<double> key(size_t(c.E));
  for (int64_t e = 0; e < c.E; ++e)
    key[e] = c.scoring == moe::Scoring::Softmax
                 ? double(z[e])
                 : double(float(refSigmoid(z[e])) + (bias ? bias[e] : 0.0f));
  std::vector<int32_t> idx(size_t(c.E));
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(),
                   [&](int32_t a, int32_t b) { return key[a] > key[b]; });
  idx.resize(size_t(c.k));
  return idx;
}

/// The weights of a fixed choice, by definition (docs/moe.md), on logits
/// in double.
std::vector<double> refWeights(const std::vector<double> &z,
                               const std::vector<int32_t> &chosen,
                               const RouterCase &c) {
  std::vector<double> g(size_t(c.k));
  if (c.scoring == moe::Scoring::Softmax) {
    double all = 0.0, picked = 0.0;
    for (double v : z)
      all += std::exp(v);
    for (int32_t e : chosen)
      picked += std::exp(z[e]);
    for (int64_t j = 0; j < c.k; ++j)
      g[j] = std::exp(z[chosen[j]]) / (c.normalize ? picked : all);
  } else {
    double sum = 0.0;
    for (int64_t j = 0; j < c.k; ++j)
      sum += g[j] = refSigmoid(z[chosen[j]]);
    if (c.normalize)
      for (double &v : g)
        v /= sum;
  }
  for (double &v : g)
    v *= c.scale;
  return g;
}

void checkRouterCase(const RouterCase &c, uint64_t seed) {
  Rng rng(seed);
  // Logits of a trained router's spread; the bias as large, so that it
  // changes the sigmoid's choice.
  std::vector<float> logits = randomVector(rng, size_t(c.T * c.E), 3.0f);
  std::vector<float> bias = randomVector(rng, size_t(c.E), 0.5f);
  std::vector<float> dweights = randomVector(rng, size_t(c.T * c.k));
  const float *b = c.withBias ? bias.data() : nullptr;
  std::vector<float> weights = nans(size_t(c.T * c.k));
  std::vector<int32_t> experts(size_t(c.T * c.k), -1);
  moeRouterForward(weights.data(), experts.data(), logits.data(), b, c.T, c.E,
                   c.k, int64_t(c.scoring), c.normalize, c.scale);
  std::vector<float> dlogits = nans(size_t(c.T * c.E));
  moeRouterBackward(dlogits.data(), dweights.data(), logits.data(),
                    experts.data(), c.T, c.E, c.k, int64_t(c.scoring),
                    c.normalize, c.scale);

  std::vector<double> wantW, wantD;
  bool sameChoice = true;
  for (int64_t t = 0; t < c.T; ++t) {
    const float *z = logits.data() + t * c.E;
    std::vector<int32_t> chosen = refChoice(z, b, c);
    sameChoice &=
        std::equal(chosen.begin(), chosen.end(), experts.begin() + t * c.k);
    std::vector<double> zd(z, z + c.E);
    std::vector<double> g = refWeights(zd, chosen, c);
    wantW.insert(wantW.end(), g.begin(), g.end());
    // d/dz_e of sum_j dweights_j g_j, the choice held, by central
    // differences in double.
    const std::vector<double> dw(dweights.begin() + t * c.k,
                                 dweights.begin() + (t + 1) * c.k);
    for (int64_t e = 0; e < c.E; ++e) {
      const double h = 1e-6;
      std::vector<double> up = zd, down = zd;
      up[e] += h;
      down[e] -= h;
      wantD.push_back((dot(dw, refWeights(up, chosen, c)) -
                       dot(dw, refWeights(down, chosen, c))) /
                      (2 * h));
    }
  }
  CHECK_MSG(sameChoice, c.name() + ": the choice differs from the reference");
  CHECK_CLOSE(c.name() + " weights", weights, wantW, 1e-7, 1e-6);
  CHECK_CLOSE(c.name() + " dlogits", dlogits, wantD, 1e-7, 1e-5);
}

void testRouterTies() {
  // Equal logits: the lower expert first, for softmax and sigmoid alike;
  // equal weights when normalised.
  const std::vector<float> z = {0.5f, 2.0f, 2.0f, -1.0f, 2.0f};
  float w[2];
  int32_t chosen[2];
  for (int64_t scoring : {0, 1}) {
    moeRouterForward(w, chosen, z.data(), nullptr, 1, 5, 2, scoring, 1, 1.0);
    CHECK(chosen[0] == 1 && chosen[1] == 2);
    CHECK(w[0] == 0.5f && w[1] == 0.5f);
  }
}

/// DeepSeek-V3's bias update: the load signal is each expert's pairs
/// above the mean, and the bias moves by the rate against it (down for an
/// overloaded expert, up for an underloaded one, not at all at the mean).
void testSelectionBias() {
  // 3 tokens x 2 choices over 4 experts: counts 3, 2, 1, 0 (mean 1.5).
  const std::vector<int32_t> experts = {0, 1, 0, 2, 1, 0};
  float signal[4];
  moeBiasSignal(signal, experts.data(), 3, 2, 4);
  CHECK(signal[0] == 1.5f && signal[1] == 0.5f && signal[2] == -0.5f &&
        signal[3] == -1.5f);
  float bias[5] = {0.0f, 0.25f, -0.25f, 1.0f, 0.5f};
  const float reduced[5] = {1.5f, 0.5f, -0.5f, -1.5f, 0.0f};
  moeSelectionBiasUpdate(bias, reduced, 5, 0.125);
  CHECK(bias[0] == -0.125f && bias[1] == 0.125f && bias[2] == -0.125f &&
        bias[3] == 1.125f && bias[4] == 0.5f);
}

void testRouterThreads() {
  // Rows are independent: any thread count gives the same bits.
  const RouterCase c{301, 16, 4, moe::Scoring::Softmax, true, false, 1.0};
  Rng rng(7);
  std::vector<float> logits = randomVector(rng, size_t(c.T * c.E), 3.0f);
  std::vector<float> dw = randomVector(rng, size_t(c.T * c.k));
  std::vector<float> w[2], dz[2];
  std::vector<int32_t> ex(size_t(c.T * c.k));
  const int saved = omp_get_max_threads();
  for (int run = 0; run < 2; ++run) {
    omp_set_num_threads(run == 0 ? 1 : 2);
    w[run].assign(size_t(c.T * c.k), 0.0f);
    dz[run].assign(size_t(c.T * c.E), 0.0f);
    moeRouterForward(w[run].data(), ex.data(), logits.data(), nullptr, c.T, c.E,
                     c.k, 0, 1, 1.0);
    moeRouterBackward(dz[run].data(), dw.data(), logits.data(), ex.data(), c.T,
                      c.E, c.k, 0, 1, 1.0);
  }
  omp_set_num_threads(saved);
  CHECK_MSG(sameBits(w[0], w[1]) && sameBits(dz[0], dz[1]),
            "router: 1 and 2 threads differ");
}

void testSortByExpert() {
  Rng rng(11);
  const int64_t T = 53, k = 3, E = 7;
  std::vector<int32_t> experts(size_t(T * k));
  for (int32_t &e : experts)
    e = rng.below(E);
  std::vector<int32_t> order(size_t(T * k), -1), position(order),
      offsets(size_t(E + 1), -1);
  CHECK(moeSortByExpert(order.data(), position.data(), offsets.data(),
                        experts.data(), T, k, E));
  std::vector<int32_t> want(size_t(T * k));
  std::iota(want.begin(), want.end(), 0);
  std::stable_sort(want.begin(), want.end(), [&](int32_t a, int32_t b) {
    return experts[a] < experts[b];
  });
  CHECK_MSG(order == want, "sort by expert: not the stable sort");
  bool runs = offsets[0] == 0 && offsets[E] == T * k;
  for (int64_t e = 0; e < E; ++e)
    for (int32_t i = offsets[e]; i < offsets[e + 1]; ++i)
      runs &= experts[order[i]] == e;
  CHECK_MSG(runs, "sort by expert: offsets do not bound the experts' runs");
  bool inverse = true;
  for (int64_t p = 0; p < T * k; ++p)
    inverse &= order[position[p]] == p;
  CHECK_MSG(inverse, "sort by expert: position is not order's inverse");
  experts[17] = int32_t(E);
  CHECK(!moeSortByExpert(order.data(), position.data(), offsets.data(),
                         experts.data(), T, k, E));
  experts[17] = -1;
  CHECK(!moeSortByExpert(order.data(), position.data(), offsets.data(),
                         experts.data(), T, k, E));
}

/// A block whose experts are single linears (w: E x O x C), the pipeline
/// of kernels against y_t = sum_j g_tj W_Itj x_t in double, and the
/// backward kernels against the same formula's gradients (the choice and
/// the weights g held: the router's gradient is checked above).
void testExpertBlock(const Blas &blas) {
  const int64_t T = 29, C = 12, O = 10, E = 6, k = 2, P = T * k;
  Rng rng(21);
  std::vector<float> x = randomVector(rng, size_t(T * C));
  std::vector<float> w = randomVector(rng, size_t(E * O * C), 0.3f);
  std::vector<float> logits = randomVector(rng, size_t(T * E), 3.0f);
  std::vector<float> dy = randomVector(rng, size_t(T * O));
  // Expert 5 never chosen: its weight gradient must be zeros.
  for (int64_t t = 0; t < T; ++t)
    logits[t * E + 5] = -100.0f;
  std::vector<float> g(static_cast<size_t>(P));
  std::vector<int32_t> experts(static_cast<size_t>(P)),
      order(static_cast<size_t>(P)), position(static_cast<size_t>(P)),
      offsets(static_cast<size_t>(E + 1));
  moeRouterForward(g.data(), experts.data(), logits.data(), nullptr, T, E, k, 0,
                   1, 1.0);
  CHECK(moeSortByExpert(order.data(), position.data(), offsets.data(),
                        experts.data(), T, k, E));
  std::vector<float> xs = nans(size_t(P * C)), ys = nans(size_t(P * O)),
                     y = nans(size_t(T * O));
  moePermute(xs.data(), x.data(), order.data(), T, k, C);
  moeGroupedLinear(blas, ys.data(), xs.data(), w.data(), offsets.data(), E, P,
                   C, O);
  moeCombine(y.data(), ys.data(), g.data(), position.data(), T, k, O);
  std::vector<float> dys = nans(size_t(P * O)),
                     dg = nans(static_cast<size_t>(P)),
                     dxs = nans(size_t(P * C)), dx = nans(size_t(T * C)),
                     dw = nans(size_t(E * O * C));
  moeCombineBackward(dys.data(), dg.data(), dy.data(), ys.data(), g.data(),
                     position.data(), T, k, O);
  moeGroupedLinearGradInput(blas, dxs.data(), dys.data(), w.data(),
                            offsets.data(), E, P, C, O);
  moeGroupedLinearGradWeight(blas, dw.data(), dys.data(), xs.data(),
                             offsets.data(), E, P, C, O);
  moePermuteBackward(dx.data(), dxs.data(), position.data(), T, k, C);

  std::vector<double> wantY(size_t(T * O), 0.0), wantDg(size_t(P), 0.0),
      wantDx(size_t(T * C), 0.0), wantDw(size_t(E * O * C), 0.0);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < k; ++j) {
      const int64_t e = experts[t * k + j];
      const double gj = g[t * k + j];
      for (int64_t o = 0; o < O; ++o) {
        double wx = 0.0;
        for (int64_t c = 0; c < C; ++c)
          wx += double(w[(e * O + o) * C + c]) * x[t * C + c];
        wantY[t * O + o] += gj * wx;
        wantDg[t * k + j] += double(dy[t * O + o]) * wx;
        for (int64_t c = 0; c < C; ++c) {
          wantDx[t * C + c] += gj * dy[t * O + o] * w[(e * O + o) * C + c];
          wantDw[(e * O + o) * C + c] += gj * dy[t * O + o] * x[t * C + c];
        }
      }
    }
  CHECK_CLOSE("expert block y", y, wantY, 1e-5, 1e-5);
  CHECK_CLOSE("expert block dweights", dg, wantDg, 1e-5, 1e-5);
  CHECK_CLOSE("expert block dx", dx, wantDx, 1e-5, 1e-5);
  CHECK_CLOSE("expert block dw", dw, wantDw, 1e-5, 1e-5);
  CHECK(offsets[5] == offsets[6]);
}

/// transformers' load_balancing_loss_func in double over L layers' logits
/// and choices, times coef.
double refAuxLoss(const std::vector<std::vector<double>> &logits,
                  const std::vector<std::vector<int32_t>> &experts, int64_t T,
                  int64_t E, double coef) {
  std::vector<double> counts(size_t(E), 0.0), probs(size_t(E), 0.0);
  for (size_t l = 0; l < logits.size(); ++l) {
    for (int32_t e : experts[l])
      counts[e] += 1.0;
    for (int64_t t = 0; t < T; ++t) {
      double sum = 0.0;
      for (int64_t e = 0; e < E; ++e)
        sum += std::exp(logits[l][t * E + e]);
      for (int64_t e = 0; e < E; ++e)
        probs[e] += std::exp(logits[l][t * E + e]) / sum;
    }
  }
  const double rows = double(logits.size()) * double(T);
  double loss = 0.0;
  for (int64_t e = 0; e < E; ++e)
    loss += counts[e] / rows * (probs[e] / rows);
  return coef * double(E) * loss;
}

void testAuxLoss() {
  const int64_t L = 3, T = 23, E = 8, k = 2;
  const double coef = 0.02;
  Rng rng(31);
  std::vector<std::vector<float>> logits;
  std::vector<std::vector<double>> logitsD;
  std::vector<std::vector<int32_t>> experts;
  std::vector<float> stats(size_t(L * 2 * E)), rows(size_t(2 * T)),
      weights(size_t(T * k));
  for (int64_t l = 0; l < L; ++l) {
    logits.push_back(randomVector(rng, size_t(T * E), 3.0f));
    logitsD.emplace_back(logits[l].begin(), logits[l].end());
    experts.emplace_back(size_t(T * k));
    moeRouterForward(weights.data(), experts[l].data(), logits[l].data(),
                     nullptr, T, E, k, 0, 1, 1.0);
    moeAuxStats(stats.data() + l * 2 * E, logits[l].data(), experts[l].data(),
                T, E, k, rows.data());
  }
  float loss = NAN;
  moeAuxLoss(&loss, stats.data(), L, T, E, coef);
  const double want = refAuxLoss(logitsD, experts, T, E, coef);
  CHECK_CLOSE("aux loss", &loss, &want, 1, 1e-9, 1e-6);
  // Layer 1's gradient, the choices held, against central differences.
  const float dloss = 1.7f;
  std::vector<float> dz = nans(size_t(T * E)), scratch(static_cast<size_t>(E));
  moeAuxLossBackward(dz.data(), &dloss, stats.data(), logits[1].data(), L, T, E,
                     coef, scratch.data());
  std::vector<double> wantDz;
  for (int64_t i = 0; i < T * E; ++i) {
    const double h = 1e-6, saved = logitsD[1][i];
    logitsD[1][i] = saved + h;
    const double up = refAuxLoss(logitsD, experts, T, E, coef);
    logitsD[1][i] = saved - h;
    const double down = refAuxLoss(logitsD, experts, T, E, coef);
    logitsD[1][i] = saved;
    wantDz.push_back(double(dloss) * (up - down) / (2 * h));
  }
  CHECK_CLOSE("aux loss dlogits", dz, wantDz, 1e-9, 1e-5);
}

} // namespace

void testMoeRouting(const Blas &blas) {
  uint64_t seed = 1;
  // Mixtral (8 experts, top 2), Qwen3-MoE's shape (128, top 8, both
  // normalisations), DeepSeek-V3's sigmoid with its bias and scale (256,
  // top 8, 2.5), and k = E.
  for (const RouterCase &c :
       {RouterCase{37, 8, 2, moe::Scoring::Softmax, true, false, 1.0},
        RouterCase{19, 128, 8, moe::Scoring::Softmax, true, false, 1.0},
        RouterCase{19, 128, 8, moe::Scoring::Softmax, false, false, 1.0},
        RouterCase{13, 256, 8, moe::Scoring::Sigmoid, true, true, 2.5},
        RouterCase{13, 64, 6, moe::Scoring::Sigmoid, false, true, 1.0},
        RouterCase{5, 4, 4, moe::Scoring::Softmax, false, false, 1.0}})
    checkRouterCase(c, seed++);
  testRouterTies();
  testSelectionBias();
  testRouterThreads();
  testSortByExpert();
  testExpertBlock(blas);
  testAuxLoss();
}

} // namespace cpukernels
