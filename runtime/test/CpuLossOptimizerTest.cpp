//===- CpuLossOptimizerTest.cpp - cross-entropy, AdamW, clipping ----------===//
//
// Part of fsdp-cpu-kernels-test (CpuKernelsTest.cpp says how the kernels
// are checked).
//
//===----------------------------------------------------------------------===//

#include "CpuKernelsCheck.h"

#include "fsdp/runtime/support/BFloat16.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <omp.h>

namespace cpukernels {

//===----------------------------------------------------------------------===//
// CrossEntropy
//===----------------------------------------------------------------------===//

double refCrossEntropy(const std::vector<double> &logits,
                       const std::vector<int32_t> &targets, int64_t N,
                       int64_t V) {
  double total = 0.0;
  for (int64_t i = 0; i < N; ++i) {
    const double *row = &logits[i * V];
    const double m = *std::max_element(row, row + V);
    double sum = 0.0;
    for (int64_t j = 0; j < V; ++j)
      sum += std::exp(row[j] - m);
    total += std::log(sum) + m - row[targets[i]];
  }
  return total / double(N);
}

void checkCrossEntropy(int64_t N, int64_t V, float scale,
                       const std::vector<float> &rowOffsets, bool fd,
                       uint64_t seed) {
  const std::string at =
      " (N=" + std::to_string(N) + ", V=" + std::to_string(V) + ")";
  Rng rng(seed);
  auto logits = randomVector(rng, N * V, scale);
  // Rows with an offset also get a spread of 240 (two entries at
  // +-120): shifting by anything but the row's maximum overflows exp.
  for (size_t i = 0; i < rowOffsets.size(); ++i) {
    for (int64_t j = 0; j < V; ++j)
      logits[i * V + j] += rowOffsets[i];
    logits[i * V + V / 2] = rowOffsets[i] + 120.0f;
    logits[i * V + V - 1] = rowOffsets[i] - 120.0f;
  }
  auto targets = randomTokens(rng, N, V);
  auto dlogits0 = toDouble(logits);

  float loss = std::numeric_limits<float>::quiet_NaN();
  crossEntropyForward(&loss, logits.data(), targets.data(), N, V);
  const double want = refCrossEntropy(dlogits0, targets, N, V);
  CHECK(std::isfinite(loss));
  CHECK_CLOSE("crossEntropyForward" + at, &loss, &want, 1, 1e-6, 1e-5);

  const float dloss = 0.7f;
  auto dlogits = nans(N * V);
  crossEntropyBackward(dlogits.data(), &dloss, logits.data(), targets.data(), N,
                       V);
  // The analytic form, dloss (softmax - onehot) / N, in double.
  std::vector<double> analytic(N * V);
  for (int64_t i = 0; i < N; ++i) {
    const double *row = &dlogits0[i * V];
    const double m = *std::max_element(row, row + V);
    double sum = 0.0;
    for (int64_t j = 0; j < V; ++j)
      sum += std::exp(row[j] - m);
    for (int64_t j = 0; j < V; ++j)
      analytic[i * V + j] = double(dloss) *
                            (std::exp(row[j] - m) / sum - (j == targets[i])) /
                            double(N);
  }
  CHECK_CLOSE("crossEntropyBackward vs softmax - onehot" + at, dlogits,
              analytic, 1e-7, 1e-5);
  if (fd) {
    auto lossFn = [&](const std::vector<double> &v) {
      return double(dloss) * refCrossEntropy(v, targets, N, V);
    };
    CHECK_CLOSE("crossEntropyBackward vs finite differences" + at, dlogits,
                centralDiff(lossFn, dlogits0, allIndices(N * V)), 1e-7, 1e-4);
  }
}

void testCrossEntropy() {
  checkCrossEntropy(7, 11, 3.0f, {}, /*fd=*/true, 9);
  // Rows far from zero with a wide spread: exp without the max shift
  // would overflow or flush every term.
  checkCrossEntropy(4, 11, 50.0f, {1000.0f, -1000.0f, 0.0f, 80.0f},
                    /*fd=*/true, 10);
  // More rows than the forward's 256 chunks, and long rows.
  checkCrossEntropy(300, 1000, 4.0f, {}, /*fd=*/false, 11);
  checkCrossEntropy(3, 50257, 4.0f, {}, /*fd=*/false, 12);
}

//===----------------------------------------------------------------------===//
// AdamW
//===----------------------------------------------------------------------===//

void testAdamW() {
  Rng rng(13);
  for (int64_t n : {int64_t(37), int64_t(70001)}) {
    for (float wd : {0.1f, 0.0f}) {
      const std::string at =
          " (n=" + std::to_string(n) + ", wd=" + std::to_string(wd) + ")";
      const float lr = 1e-2f, beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f;
      auto param = randomVector(rng, n);
      std::vector<float> m(n, 0.0f), v(n, 0.0f);
      auto rp = toDouble(param);
      std::vector<double> rm(n, 0.0), rv(n, 0.0);
      for (int64_t step = 1; step <= 3; ++step) {
        auto grad = randomVector(rng, n, 0.1f);
        adamw(param.data(), m.data(), v.data(), grad.data(), n, lr, beta1,
              beta2, eps, wd, step);
        // The naive loop, in double, on the same float hyperparameters.
        const double b1 = beta1, b2 = beta2;
        for (int64_t i = 0; i < n; ++i) {
          const double g = grad[i];
          rm[i] = b1 * rm[i] + (1.0 - b1) * g;
          rv[i] = b2 * rv[i] + (1.0 - b2) * g * g;
          const double mhat = rm[i] / (1.0 - std::pow(b1, double(step)));
          const double vhat = rv[i] / (1.0 - std::pow(b2, double(step)));
          rp[i] -= double(lr) * (mhat / (std::sqrt(vhat) + double(eps)) +
                                 double(wd) * rp[i]);
        }
      }
      CHECK_CLOSE("adamw param after 3 steps" + at, param, rp, 1e-6, 1e-5);
      CHECK_CLOSE("adamw m after 3 steps" + at, m, rm, 1e-8, 1e-5);
      CHECK_CLOSE("adamw v after 3 steps" + at, v, rv, 1e-10, 1e-5);
    }
  }
}

/// AdamW with gradient clipping's scale is AdamW on the scaled gradient,
/// bit for bit, and a scale of 1 is no scale at all.
void testAdamWScale() {
  Rng rng(14);
  const int64_t n = 70001;
  auto param = randomVector(rng, n), grad = randomVector(rng, n, 0.1f);
  for (float scale : {0.37f, 1.0f}) {
    std::vector<float> scaled(grad), p1(param), p2(param);
    for (float &g : scaled)
      g *= scale;
    std::vector<float> m1(n, 0.1f), v1(n, 0.2f), m2(m1), v2(v1);
    adamw(p1.data(), m1.data(), v1.data(), grad.data(), n, 1e-2f, 0.9f, 0.95f,
          1e-8f, 0.1f, 2, &scale);
    adamw(p2.data(), m2.data(), v2.data(), scaled.data(), n, 1e-2f, 0.9f, 0.95f,
          1e-8f, 0.1f, 2);
    CHECK_MSG(sameBits(p1, p2) && sameBits(m1, m2) && sameBits(v1, v2),
              "adamw with scale " + std::to_string(scale) +
                  " is not adamw on the scaled gradient");
  }
}

/// testAdamWTensors' tensor k of n elements: its hyperparameters, and
/// (non-null placeholders) whether it has a bf16 gradient, a copy and a
/// scale, every combination somewhere in the list.
static fsdp::rt::AdamWTensor tensorSettings(size_t k, int64_t n) {
  static float placeholder;
  fsdp::rt::AdamWTensor t;
  t.n = n;
  t.bf16Grad = k % 3 == 1;
  t.copy = k % 2 ? reinterpret_cast<uint16_t *>(&placeholder) : nullptr;
  t.gradScale = k % 4 == 2 ? &placeholder : nullptr;
  t.lr = 1e-3f * float(1 + k % 3);
  t.beta1 = k % 5 ? 0.9f : 0.8f;
  t.beta2 = k % 2 ? 0.95f : 0.999f;
  t.eps = 1e-8f;
  t.weightDecay = k % 3 ? 0.1f : 0.0f;
  return t;
}

/// The multi-tensor AdamW (the executor's one pass over a step's adjacent
/// adamw_shard instructions) is adamw on each tensor, bit for bit: over a
/// list of tensors of every size (empty, under a chunk, across chunks and
/// threads), at odd offsets in shared arrays, with f32 and bf16 gradients,
/// with and without a scale and a copy, each with its own hyperparameters;
/// on all threads and on one. The bytes between the tensors stay as they
/// were.
void testAdamWTensors() {
  Rng rng(16);
  const int64_t sizes[] = {5,   0,     1,     256,  257,   70001,
                           768, 3,     40000, 255,  1000,  33000,
                           7,   12345, 2,     4096, 65536, 9};
  const size_t count = std::size(sizes);
  int64_t total = 0;
  std::vector<int64_t> at;
  for (int64_t n : sizes) {
    total += 3; // a gap, which also misaligns the next tensor
    at.push_back(total);
    total += n;
  }
  total += 3;
  const auto param = randomVector(rng, size_t(total));
  const auto grad = randomVector(rng, size_t(total), 0.1f);
  const auto moment = randomVector(rng, size_t(total), 0.01f);
  const auto second = randomVector(rng, size_t(total), 1e-4f, 1e-4f);
  std::vector<uint16_t> gradBF16(static_cast<size_t>(total));
  for (int64_t i = 0; i < total; ++i)
    gradBF16[i] = fsdp::rt::roundToBF16(grad[i]);
  const float scale = 0.37f;
  struct State {
    std::vector<float> p, m, v;
    std::vector<uint16_t> copy;
  };
  auto fresh = [&] {
    return State{param, moment, second,
                 std::vector<uint16_t>(size_t(total), 0xABCD)};
  };
  auto tensors = [&](State &s) {
    std::vector<fsdp::rt::AdamWTensor> list;
    for (size_t k = 0; k < count; ++k) {
      fsdp::rt::AdamWTensor t = tensorSettings(k, sizes[k]);
      t.param = s.p.data() + at[k];
      t.m = s.m.data() + at[k];
      t.v = s.v.data() + at[k];
      t.grad = t.bf16Grad ? static_cast<const void *>(gradBF16.data() + at[k])
                          : static_cast<const void *>(grad.data() + at[k]);
      t.copy = t.copy ? s.copy.data() + at[k] : nullptr;
      t.gradScale = t.gradScale ? &scale : nullptr;
      list.push_back(t);
    }
    return list;
  };
  auto same = [](const State &a, const State &b) {
    return sameBits(a.p, b.p) && sameBits(a.m, b.m) && sameBits(a.v, b.v) &&
           a.copy == b.copy;
  };

  State one = fresh(), all = fresh(), serial = fresh();
  for (int64_t step : {1, 2, 3}) {
    for (const fsdp::rt::AdamWTensor &t : tensors(one))
      adamwTensors(&t, 1, step);
    auto list = tensors(all);
    adamwTensors(list.data(), list.size(), step);
    int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    list = tensors(serial);
    adamwTensors(list.data(), list.size(), step);
    omp_set_num_threads(threads);
  }
  CHECK_MSG(same(one, all), "adamwTensors over " + std::to_string(count) +
                                " tensors is not adamw on each, bit for bit");
  CHECK_MSG(same(all, serial),
            "adamwTensors differs between one thread and all");
  // It did update: every tensor's elements moved, the gaps did not.
  bool gapsKept = true, moved = true;
  for (size_t k = 0; k <= count; ++k)
    for (int64_t i = (k ? at[k - 1] + sizes[k - 1] : 0);
         i < (k < count ? at[k] : total); ++i)
      gapsKept = gapsKept && all.p[i] == param[i] && all.m[i] == moment[i] &&
                 all.copy[i] == 0xABCD;
  for (size_t k = 0; k < count; ++k)
    for (int64_t i = at[k]; i < at[k] + sizes[k]; ++i)
      moved = moved && (all.p[i] != param[i] || all.m[i] != moment[i]) &&
              (k % 2 == 0 || all.copy[i] == fsdp::rt::roundToBF16(all.p[i]));
  CHECK_MSG(gapsKept, "adamwTensors wrote between its tensors");
  CHECK_MSG(moved, "adamwTensors left an element (or its copy) unwritten");
}

//===----------------------------------------------------------------------===//
// Gradient clipping
//===----------------------------------------------------------------------===//

void testGradClip() {
  Rng rng(15);
  // Empty, shorter than the 8 lanes, not a multiple of them or of the
  // parts, and large enough for the threads.
  for (int64_t n : {int64_t(0), int64_t(5), int64_t(1001), int64_t(300007)}) {
    auto grad = randomVector(rng, n, 3.0f);
    double want = 0.0;
    for (float g : grad)
      want += double(g) * double(g);
    float got = NAN, acc = 2.5f, withAcc = NAN;
    gradSqSum(&got, grad.data(), nullptr, n);
    gradSqSum(&withAcc, grad.data(), &acc, n);
    const std::string at = " (n=" + std::to_string(n) + ")";
    CHECK_CLOSE("grad_sq_sum" + at, &got, &want, 1, 0.0, 1e-7);
    double wantAcc = want + 2.5;
    CHECK_CLOSE("grad_sq_sum with acc" + at, &withAcc, &wantAcc, 1, 0.0, 1e-7);
    // The same bits on one thread as on all of them.
    float single = NAN;
    int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    gradSqSum(&single, grad.data(), nullptr, n);
    omp_set_num_threads(threads);
    CHECK_MSG(std::memcmp(&single, &got, sizeof(float)) == 0,
              "grad_sq_sum differs between 1 and " + std::to_string(threads) +
                  " threads" + at);
  }
  // PyTorch's coefficient: max / (norm + 1e-6) below 1, exactly 1 above
  // (sum 4: norm 2), 0 for an infinite sum, NaN for a NaN one.
  auto coefficient = [](float sumSq, double maxNorm) {
    float coef = -1.0f;
    clipCoefficient(&coef, &sumSq, maxNorm);
    return coef;
  };
  CHECK(coefficient(4.0f, 1.0) == float(1.0 / (2.0 + 1e-6)));
  CHECK(coefficient(4.0f, 1.999) == float(1.999 / (2.0 + 1e-6)));
  CHECK(coefficient(4.0f, 2.0) == float(2.0 / (2.0 + 1e-6)));
  CHECK(coefficient(4.0f, 2.001) == 1.0f);
  CHECK(coefficient(4.0f, 1e9) == 1.0f);
  CHECK(coefficient(0.0f, 1.0) == 1.0f);
  CHECK(coefficient(INFINITY, 1.0) == 0.0f);
  CHECK(std::isnan(coefficient(NAN, 1.0)));
}

} // namespace cpukernels
