//===- CpuKernelsTest.cpp - checks of the CPU kernels ---------------------===//
//
// A standalone program (no test framework) that checks every kernel of
// src/cpu/Kernels.h:
//   - each forward against a naive double-precision reference written
//     here, on small odd shapes;
//   - each backward against central differences of a scalar function of
//     that reference, L = sum(dout * forward(x)), taken in double so that
//     the differences are exact to ~1e-8 and the tolerances only have to
//     absorb the kernels' float rounding;
//   - AdamW against a naive loop over three steps, and with gradient
//     clipping's scale against AdamW on the scaled gradient; gradient
//     clipping's sum of squares against a double loop (and for thread
//     counts) and its coefficient at its edges; the embedding backward
//     with repeated tokens; the attention's causal mask;
//   - that outputs are overwritten (they start as NaN), and that the
//     kernels that reduce over rows give bit-identical results for one
//     thread and for all threads.
//
// Usage: cpu-kernels-test [openblas|blis]. Prints one line per failed
// check (file:line, what, the worst mismatches), then
// "cpu-kernels: N passed, M failed", and exits non-zero if any failed.
//
//===----------------------------------------------------------------------===//

#include "TestData.h"
#include "cpu/Blas.h"
#include "cpu/Kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <omp.h>

using namespace fsdp::rt::cpu;

namespace {

//===----------------------------------------------------------------------===//
// Checking
//===----------------------------------------------------------------------===//

int gPassed = 0, gFailed = 0;

bool report(bool ok, const char *file, int line, const std::string &what) {
  if (ok) {
    ++gPassed;
  } else {
    ++gFailed;
    std::fprintf(stderr, "%s:%d: FAILED: %s\n", file, line, what.c_str());
  }
  return ok;
}

#define CHECK(cond) report(bool(cond), __FILE__, __LINE__, #cond)
#define CHECK_MSG(cond, msg) report(bool(cond), __FILE__, __LINE__, msg)

/// One check: |got - want| <= atol + rtol |want| for all n elements (NaN
/// fails). Prints the first mismatches and the worst one.
bool checkClose(const char *file, int line, const std::string &what,
                const float *got, const double *want, size_t n, double atol,
                double rtol) {
  size_t bad = 0, worst = 0;
  double worstExcess = -1.0;
  std::string detail;
  for (size_t i = 0; i < n; ++i) {
    const double err = std::fabs(double(got[i]) - want[i]);
    const double tol = atol + rtol * std::fabs(want[i]);
    if (err <= tol)
      continue;
    const double excess = std::isnan(err) ? 1e300 : err / tol;
    if (excess > worstExcess) {
      worstExcess = excess;
      worst = i;
    }
    if (bad++ < 4) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "\n    [%zu] got %.8g, want %.8g", i,
                    double(got[i]), want[i]);
      detail += buf;
    }
  }
  if (bad == 0)
    return report(true, file, line, what);
  char buf[200];
  std::snprintf(buf, sizeof buf,
                "%s: %zu of %zu elements differ (atol %g, rtol %g); worst "
                "[%zu] got %.8g, want %.8g",
                what.c_str(), bad, n, atol, rtol, worst, double(got[worst]),
                want[worst]);
  return report(false, file, line, buf + detail);
}

bool checkClose(const char *file, int line, const std::string &what,
                const std::vector<float> &got, const std::vector<double> &want,
                double atol, double rtol) {
  if (got.size() != want.size())
    return report(false, file, line, what + ": sizes differ");
  return checkClose(file, line, what, got.data(), want.data(), got.size(), atol,
                    rtol);
}

/// CHECK_CLOSE(what, got, want, atol, rtol) for two vectors, or
/// CHECK_CLOSE(what, gotPtr, wantPtr, n, atol, rtol).
#define CHECK_CLOSE(...) checkClose(__FILE__, __LINE__, __VA_ARGS__)

/// Bitwise equality, for the determinism checks.
bool sameBits(const std::vector<float> &a, const std::vector<float> &b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), sizeof(float) * a.size()) == 0;
}

//===----------------------------------------------------------------------===//
// Data
//===----------------------------------------------------------------------===//

using fsdp::rt::test::randomTokens;
using fsdp::rt::test::randomVector;
using fsdp::rt::test::Rng;

std::vector<double> toDouble(const std::vector<float> &v) {
  return std::vector<double>(v.begin(), v.end());
}

std::vector<float> nans(size_t n) {
  return std::vector<float>(n, std::numeric_limits<float>::quiet_NaN());
}

double dot(const std::vector<double> &a, const std::vector<double> &b) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); ++i)
    s += a[i] * b[i];
  return s;
}

std::vector<size_t> allIndices(size_t n) {
  std::vector<size_t> idx(n);
  for (size_t i = 0; i < n; ++i)
    idx[i] = i;
  return idx;
}

std::vector<size_t> someIndices(Rng &rng, size_t n, size_t count) {
  std::vector<size_t> idx(count);
  for (size_t &i : idx)
    i = size_t(rng.below(int64_t(n)));
  return idx;
}

/// Central differences of the scalar f at x, for the indices idx.
template <typename F>
std::vector<double> centralDiff(F &&f, std::vector<double> &x,
                                const std::vector<size_t> &idx,
                                double eps = 1e-4) {
  std::vector<double> g(idx.size());
  for (size_t n = 0; n < idx.size(); ++n) {
    const size_t i = idx[n];
    const double x0 = x[i];
    x[i] = x0 + eps;
    const double plus = f(x);
    x[i] = x0 - eps;
    const double minus = f(x);
    x[i] = x0;
    g[n] = (plus - minus) / (2.0 * eps);
  }
  return g;
}

std::vector<float> gather(const std::vector<float> &v,
                          const std::vector<size_t> &idx) {
  std::vector<float> out(idx.size());
  for (size_t n = 0; n < idx.size(); ++n)
    out[n] = v[idx[n]];
  return out;
}

/// Runs fn with one OpenMP thread, then restores the thread count.
template <typename F> void withOneThread(F &&fn) {
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  fn();
  omp_set_num_threads(threads);
}

//===----------------------------------------------------------------------===//
// Embedding
//===----------------------------------------------------------------------===//

std::vector<double> refEmbedding(const std::vector<int32_t> &tokens,
                                 const std::vector<double> &wte,
                                 const std::vector<double> &wpe, int64_t B,
                                 int64_t T, int64_t C) {
  std::vector<double> out(B * T * C);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t c = 0; c < C; ++c)
        out[(b * T + t) * C + c] =
            wte[tokens[b * T + t] * C + c] + wpe[t * C + c];
  return out;
}

void testEmbedding() {
  const int64_t B = 2, T = 5, C = 12, V = 11, Tmax = 7;
  Rng rng(1);
  auto tokens = randomTokens(rng, B * T, V);
  // Repeated tokens: three positions share tokens[0], two share tokens[1].
  tokens[3] = tokens[0];
  tokens[6] = tokens[0];
  tokens[9] = tokens[1] != tokens[0] ? tokens[1] : (tokens[0] + 1) % V;
  tokens[1] = tokens[9];
  auto wte = randomVector(rng, V * C), wpe = randomVector(rng, Tmax * C);
  auto dwte0 = toDouble(wte), dwpe0 = toDouble(wpe);

  auto out = nans(B * T * C);
  embeddingForward(out.data(), tokens.data(), wte.data(), wpe.data(), B, T, C);
  CHECK_CLOSE("embeddingForward out", out,
              refEmbedding(tokens, dwte0, dwpe0, B, T, C), 0.0, 1e-7);

  auto dout = randomVector(rng, B * T * C);
  auto ddout = toDouble(dout);
  auto dwte = nans(V * C), dwpe = nans(Tmax * C);
  embeddingBackward(dwte.data(), dwpe.data(), dout.data(), tokens.data(), B, T,
                    C, V, Tmax);
  auto lossWte = [&](const std::vector<double> &w) {
    return dot(ddout, refEmbedding(tokens, w, dwpe0, B, T, C));
  };
  auto lossWpe = [&](const std::vector<double> &w) {
    return dot(ddout, refEmbedding(tokens, dwte0, w, B, T, C));
  };
  CHECK_CLOSE("embeddingBackward dwte vs finite differences", dwte,
              centralDiff(lossWte, dwte0, allIndices(V * C)), 1e-5, 1e-5);
  CHECK_CLOSE("embeddingBackward dwpe vs finite differences", dwpe,
              centralDiff(lossWpe, dwpe0, allIndices(Tmax * C)), 1e-5, 1e-5);

  // The row of the thrice-repeated token is exactly the sum of three rows
  // of dout; rows of unused tokens and of dwpe past T are exactly zero.
  std::vector<double> sum3(C);
  for (int64_t c = 0; c < C; ++c)
    sum3[c] = double(dout[0 * C + c]) + dout[3 * C + c] + dout[6 * C + c];
  CHECK_CLOSE("embeddingBackward repeated token", dwte.data() + tokens[0] * C,
              sum3.data(), C, 1e-6, 1e-6);
  bool zeros = true;
  for (int64_t v = 0; v < V; ++v)
    if (std::find(tokens.begin(), tokens.end(), v) == tokens.end())
      for (int64_t c = 0; c < C; ++c)
        zeros &= dwte[v * C + c] == 0.0f;
  for (int64_t i = T * C; i < Tmax * C; ++i)
    zeros &= dwpe[i] == 0.0f;
  CHECK_MSG(zeros, "embeddingBackward: unused rows are exactly zero");
}

//===----------------------------------------------------------------------===//
// LayerNorm
//===----------------------------------------------------------------------===//

struct LayerNormRef {
  std::vector<double> out, mean, rstd;
};

LayerNormRef refLayerNorm(const std::vector<double> &x,
                          const std::vector<double> &w,
                          const std::vector<double> &b, int64_t N, int64_t C,
                          double eps) {
  LayerNormRef r{std::vector<double>(N * C), std::vector<double>(N),
                 std::vector<double>(N)};
  for (int64_t i = 0; i < N; ++i) {
    double m = 0.0, var = 0.0;
    for (int64_t c = 0; c < C; ++c)
      m += x[i * C + c];
    m /= double(C);
    for (int64_t c = 0; c < C; ++c)
      var += (x[i * C + c] - m) * (x[i * C + c] - m);
    var /= double(C);
    const double s = 1.0 / std::sqrt(var + eps);
    for (int64_t c = 0; c < C; ++c)
      r.out[i * C + c] = (x[i * C + c] - m) * s * w[c] + b[c];
    r.mean[i] = m;
    r.rstd[i] = s;
  }
  return r;
}

void testLayerNorm() {
  const float eps = 1e-5f;
  // (N, C): the brief's B x T = 10 by 12, and widths that leave partial
  // column blocks in the dw/db pass; the last rows have a variance below
  // eps, where eps inside the square root matters (and no offset mean,
  // which float32 could not separate from so small a spread).
  const int64_t shapes[][2] = {{10, 12}, {9, 40}, {33, 100}, {8, 24}};
  const float spreads[] = {2.0f, 2.0f, 2.0f, 0.004f};
  const float offsets[] = {3.0f, 3.0f, 3.0f, 0.0f};
  Rng rng(2);
  for (size_t s = 0; s < std::size(shapes); ++s) {
    const int64_t N = shapes[s][0], C = shapes[s][1];
    const std::string at = " (N=" + std::to_string(N) +
                           ", C=" + std::to_string(C) +
                           ", spread=" + std::to_string(spreads[s]) + ")";
    // An offset mean, as in a residual stream.
    auto x = randomVector(rng, N * C, spreads[s], offsets[s]);
    auto w = randomVector(rng, C, 0.5f, 1.0f), b = randomVector(rng, C, 0.5f);
    auto dx0 = toDouble(x), dw0 = toDouble(w), db0 = toDouble(b);
    auto ref = refLayerNorm(dx0, dw0, db0, N, C, eps);

    auto out = nans(N * C), mean = nans(N), rstd = nans(N);
    layerNormForward(out.data(), mean.data(), rstd.data(), x.data(), w.data(),
                     b.data(), N, C, eps);
    CHECK_CLOSE("layerNormForward out" + at, out, ref.out, 1e-5, 1e-5);
    CHECK_CLOSE("layerNormForward mean" + at, mean, ref.mean, 1e-6, 1e-6);
    CHECK_CLOSE("layerNormForward rstd" + at, rstd, ref.rstd, 0.0, 1e-5);
    // The backward takes the saved rstd; finite differences of so narrow
    // rows are too coarse to check it against.
    if (offsets[s] == 0.0f)
      continue;

    auto dout = randomVector(rng, N * C);
    auto ddout = toDouble(dout);
    auto dx = nans(N * C), dw = nans(C), db = nans(C);
    layerNormBackward(dx.data(), dw.data(), db.data(), dout.data(), x.data(),
                      w.data(), mean.data(), rstd.data(), N, C);
    auto lossX = [&](const std::vector<double> &v) {
      return dot(ddout, refLayerNorm(v, dw0, db0, N, C, eps).out);
    };
    auto lossW = [&](const std::vector<double> &v) {
      return dot(ddout, refLayerNorm(dx0, v, db0, N, C, eps).out);
    };
    auto lossB = [&](const std::vector<double> &v) {
      return dot(ddout, refLayerNorm(dx0, dw0, v, N, C, eps).out);
    };
    CHECK_CLOSE("layerNormBackward dx vs finite differences" + at, dx,
                centralDiff(lossX, dx0, allIndices(N * C)), 1e-5, 1e-4);
    CHECK_CLOSE("layerNormBackward dw vs finite differences" + at, dw,
                centralDiff(lossW, dw0, allIndices(C)), 1e-5, 1e-4);
    CHECK_CLOSE("layerNormBackward db vs finite differences" + at, db,
                centralDiff(lossB, db0, allIndices(C)), 1e-5, 1e-4);
  }
}

//===----------------------------------------------------------------------===//
// Linear
//===----------------------------------------------------------------------===//

std::vector<double> refLinear(const std::vector<double> &x,
                              const std::vector<double> &w,
                              const std::vector<double> *bias, int64_t N,
                              int64_t IC, int64_t OC) {
  std::vector<double> out(N * OC);
  for (int64_t i = 0; i < N; ++i)
    for (int64_t o = 0; o < OC; ++o) {
      double s = bias ? (*bias)[o] : 0.0;
      for (int64_t c = 0; c < IC; ++c)
        s += x[i * IC + c] * w[o * IC + c];
      out[i * OC + o] = s;
    }
  return out;
}

void testLinear(const Blas &blas) {
  const int64_t shapes[][3] = {{7, 12, 9}, {37, 20, 70}}; // N, IC, OC
  Rng rng(3);
  for (const auto &shape : shapes) {
    const int64_t N = shape[0], IC = shape[1], OC = shape[2];
    const std::string at = " (N=" + std::to_string(N) +
                           ", IC=" + std::to_string(IC) +
                           ", OC=" + std::to_string(OC) + ")";
    auto x = randomVector(rng, N * IC), w = randomVector(rng, OC * IC),
         bias = randomVector(rng, OC);
    auto dx0 = toDouble(x), dw0 = toDouble(w), db0 = toDouble(bias);

    auto out = nans(N * OC);
    linearForward(blas, out.data(), x.data(), w.data(), bias.data(), N, IC, OC);
    CHECK_CLOSE("linearForward with bias" + at, out,
                refLinear(dx0, dw0, &db0, N, IC, OC), 1e-5, 1e-5);
    // NaN in out must not leak through BLAS's beta = 0.
    out = nans(N * OC);
    linearForward(blas, out.data(), x.data(), w.data(), nullptr, N, IC, OC);
    CHECK_CLOSE("linearForward without bias" + at, out,
                refLinear(dx0, dw0, nullptr, N, IC, OC), 1e-5, 1e-5);

    auto dout = randomVector(rng, N * OC);
    auto ddout = toDouble(dout);
    auto dx = nans(N * IC), dw = nans(OC * IC), db = nans(OC);
    linearGradInput(blas, dx.data(), dout.data(), w.data(), N, IC, OC);
    linearGradWeight(blas, dw.data(), dout.data(), x.data(), N, IC, OC);
    biasGrad(db.data(), dout.data(), N, OC);
    auto lossX = [&](const std::vector<double> &v) {
      return dot(ddout, refLinear(v, dw0, &db0, N, IC, OC));
    };
    auto lossW = [&](const std::vector<double> &v) {
      return dot(ddout, refLinear(dx0, v, &db0, N, IC, OC));
    };
    auto lossB = [&](const std::vector<double> &v) {
      return dot(ddout, refLinear(dx0, dw0, &v, N, IC, OC));
    };
    CHECK_CLOSE("linearGradInput vs finite differences" + at, dx,
                centralDiff(lossX, dx0, allIndices(N * IC), 1e-3), 1e-5, 1e-5);
    CHECK_CLOSE("linearGradWeight vs finite differences" + at, dw,
                centralDiff(lossW, dw0, allIndices(OC * IC), 1e-3), 1e-5, 1e-5);
    CHECK_CLOSE("biasGrad vs finite differences" + at, db,
                centralDiff(lossB, db0, allIndices(OC), 1e-3), 1e-5, 1e-5);
  }
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

double refGelu(double x) {
  const double k = std::sqrt(2.0 / std::acos(-1.0));
  return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}

void testElementwise() {
  Rng rng(4);
  // 1003 runs on one thread, 70001 on all (the kernels go parallel from
  // 32768 elements).
  for (int64_t n : {int64_t(1003), int64_t(70001)}) {
    const std::string at = " (n=" + std::to_string(n) + ")";
    auto x = randomVector(rng, n, 6.0f);
    // Extremes and values next to zero.
    const float special[] = {0.0f,   1e-3f,   -1e-3f, 20.0f, -20.0f,
                             100.0f, -100.0f, 9.0f,   -9.0f, 1e-20f};
    std::copy(std::begin(special), std::end(special), x.begin());
    auto y = randomVector(rng, n), dout = randomVector(rng, n);
    auto dxv = toDouble(x);

    auto out = nans(n);
    std::vector<double> want(n);
    add(out.data(), x.data(), y.data(), n);
    for (int64_t i = 0; i < n; ++i)
      want[i] = double(x[i] + y[i]);
    CHECK_CLOSE("add" + at, out, want, 0.0, 0.0);
    auto inPlace = x;
    add(inPlace.data(), inPlace.data(), y.data(), n);
    CHECK_CLOSE("add in place (out aliases a)" + at, inPlace, want, 0.0, 0.0);

    fill(out.data(), n, 0.25f);
    CHECK_CLOSE("fill" + at, out, std::vector<double>(n, 0.25), 0.0, 0.0);

    geluForward(out.data(), x.data(), n);
    for (int64_t i = 0; i < n; ++i)
      want[i] = refGelu(dxv[i]);
    CHECK_CLOSE("geluForward" + at, out, want, 1e-6, 1e-5);

    // d/dx of sum(dout * gelu(x)) is elementwise: one central difference
    // per element.
    auto dx = nans(n);
    geluBackward(dx.data(), dout.data(), x.data(), n);
    const double h = 1e-4;
    for (int64_t i = 0; i < n; ++i)
      want[i] =
          dout[i] * (refGelu(dxv[i] + h) - refGelu(dxv[i] - h)) / (2.0 * h);
    CHECK_CLOSE("geluBackward vs finite differences" + at, dx, want, 1e-6,
                1e-5);

    reluForward(out.data(), x.data(), n);
    for (int64_t i = 0; i < n; ++i)
      want[i] = std::max(dxv[i], 0.0);
    CHECK_CLOSE("reluForward" + at, out, want, 0.0, 0.0);

    reluBackward(dx.data(), dout.data(), x.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      // Central differences with a step that does not cross the kink; at
      // x = 0 the documented gradient is 0 (x > 0 is false).
      const double step = std::min(h, std::fabs(dxv[i]) / 2.0);
      const double r =
          x[i] == 0.0f
              ? 0.0
              : (std::max(dxv[i] + step, 0.0) - std::max(dxv[i] - step, 0.0)) /
                    (2.0 * step);
      want[i] = dout[i] * r;
    }
    CHECK_CLOSE("reluBackward vs finite differences" + at, dx, want, 1e-6,
                1e-5);
  }
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

struct AttentionRef {
  /// The output, the probabilities and each row's log-sum-exp of its
  /// scaled, masked scores.
  std::vector<double> out, probs, lse;
};

/// qkv's row width with KV kv heads: C + 2 KV hs (3C when KV = NH).
int64_t qkvWidth(int64_t C, int64_t NH, int64_t KV) {
  return C + 2 * KV * (C / NH);
}

/// Query head h reads kv head h / (NH / KV): k at kAt, v at kAt + KV hs.
int64_t kAt(int64_t h, int64_t C, int64_t NH, int64_t KV) {
  return C + h / (NH / KV) * (C / NH);
}

AttentionRef refAttention(const std::vector<double> &qkv, int64_t B, int64_t T,
                          int64_t C, int64_t NH, int64_t KV) {
  const int64_t hs = C / NH, ld = qkvWidth(C, NH, KV);
  const double scale = 1.0 / std::sqrt(double(hs));
  AttentionRef r{std::vector<double>(B * T * C, 0.0),
                 std::vector<double>(B * NH * T * T, 0.0),
                 std::vector<double>(B * NH * T, 0.0)};
  std::vector<double> s(T);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < NH; ++h)
      for (int64_t i = 0; i < T; ++i) {
        const double *q = &qkv[(b * T + i) * ld + h * hs];
        double m = -1e300, sum = 0.0;
        for (int64_t j = 0; j <= i; ++j) {
          const double *k = &qkv[(b * T + j) * ld + kAt(h, C, NH, KV)];
          s[j] = 0.0;
          for (int64_t d = 0; d < hs; ++d)
            s[j] += q[d] * k[d];
          s[j] *= scale;
          m = std::max(m, s[j]);
        }
        for (int64_t j = 0; j <= i; ++j)
          sum += std::exp(s[j] - m);
        r.lse[(b * NH + h) * T + i] = m + std::log(sum);
        double *p = &r.probs[((b * NH + h) * T + i) * T];
        double *o = &r.out[(b * T + i) * C + h * hs];
        for (int64_t j = 0; j <= i; ++j) {
          p[j] = std::exp(s[j] - m) / sum;
          const double *v =
              &qkv[(b * T + j) * ld + kAt(h, C, NH, KV) + KV * hs];
          for (int64_t d = 0; d < hs; ++d)
            o[d] += p[j] * v[d];
        }
      }
  return r;
}

/// The textbook backward, in double, from the reference probabilities (a
/// kv head's gradient sums over its query heads).
std::vector<double> refAttentionBackward(const std::vector<double> &dout,
                                         const std::vector<double> &qkv,
                                         const std::vector<double> &probs,
                                         int64_t B, int64_t T, int64_t C,
                                         int64_t NH, int64_t KV) {
  const int64_t hs = C / NH, ld = qkvWidth(C, NH, KV), ko = KV * hs;
  const double scale = 1.0 / std::sqrt(double(hs));
  std::vector<double> dqkv(B * T * ld, 0.0), dS(T);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < NH; ++h)
      for (int64_t i = 0; i < T; ++i) {
        const double *p = &probs[((b * NH + h) * T + i) * T];
        const double *dO = &dout[(b * T + i) * C + h * hs];
        double rowDot = 0.0;
        for (int64_t j = 0; j <= i; ++j) {
          const double *v = &qkv[(b * T + j) * ld + kAt(h, C, NH, KV) + ko];
          dS[j] = 0.0;
          for (int64_t d = 0; d < hs; ++d)
            dS[j] += dO[d] * v[d];
          rowDot += dS[j] * p[j];
        }
        const double *q = &qkv[(b * T + i) * ld + h * hs];
        double *dq = &dqkv[(b * T + i) * ld + h * hs];
        for (int64_t j = 0; j <= i; ++j) {
          const double ds = p[j] * (dS[j] - rowDot);
          const double *k = &qkv[(b * T + j) * ld + kAt(h, C, NH, KV)];
          double *dk = &dqkv[(b * T + j) * ld + kAt(h, C, NH, KV)];
          double *dv = dk + ko;
          for (int64_t d = 0; d < hs; ++d) {
            dq[d] += scale * ds * k[d];
            dk[d] += scale * ds * q[d];
            dv[d] += p[j] * dO[d];
          }
        }
      }
  return dqkv;
}

/// fdCount < 0: central differences for every element of qkv. qkv is
/// uniform in +-qkvScale; tolerances are multiplied by tolScale. KV kv
/// heads (0: NH, plain multi-head attention).
void checkAttention(const Blas &blas, int64_t B, int64_t T, int64_t C,
                    int64_t NH, int64_t fdCount, uint64_t seed,
                    float qkvScale = 1.5f, double tolScale = 1.0,
                    int64_t KV = 0) {
  KV = KV ? KV : NH;
  const std::string at =
      " (B=" + std::to_string(B) + ", T=" + std::to_string(T) +
      ", C=" + std::to_string(C) + ", NH=" + std::to_string(NH) +
      ", KV=" + std::to_string(KV) + ")";
  Rng rng(seed);
  auto qkv = randomVector(rng, B * T * qkvWidth(C, NH, KV), qkvScale);
  auto dqkv0 = toDouble(qkv);
  auto ref = refAttention(dqkv0, B, T, C, NH, KV);

  auto out = nans(B * T * C), probs = nans(B * NH * T * T);
  attentionForward(blas, out.data(), probs.data(), qkv.data(), B, T, C, NH, KV);
  CHECK_CLOSE("attentionForward out" + at, out, ref.out, 1e-5 * tolScale,
              1e-4 * tolScale);
  CHECK_CLOSE("attentionForward probs" + at, probs, ref.probs, 1e-6 * tolScale,
              1e-4 * tolScale);

  // The causal mask: exact zeros above the diagonal, rows that sum to 1.
  int64_t aboveDiagonal = 0;
  double worstSum = 0.0;
  for (int64_t r = 0; r < B * NH * T; ++r) {
    const int64_t i = r % T;
    double sum = 0.0;
    for (int64_t j = 0; j < T; ++j) {
      if (j > i)
        aboveDiagonal += probs[r * T + j] != 0.0f;
      sum += probs[r * T + j];
    }
    worstSum = std::max(worstSum, std::fabs(sum - 1.0));
  }
  CHECK_MSG(aboveDiagonal == 0,
            "attentionForward: " + std::to_string(aboveDiagonal) +
                " probs above the diagonal are not 0" + at);
  CHECK_MSG(worstSum <= 1e-5, "attentionForward: a row of probs sums to 1 +- " +
                                  std::to_string(worstSum) + at);

  auto dout = randomVector(rng, B * T * C);
  auto ddout = toDouble(dout);
  auto dqkv = nans(qkv.size()), scratch = nans(B * NH * T * T);
  attentionBackward(blas, dqkv.data(), scratch.data(), dout.data(), qkv.data(),
                    probs.data(), B, T, C, NH, KV);
  CHECK_CLOSE("attentionBackward vs reference backward" + at, dqkv,
              refAttentionBackward(ddout, dqkv0, ref.probs, B, T, C, NH, KV),
              1e-5 * tolScale, 1e-4 * tolScale);
  if (fdCount == 0)
    return;
  auto loss = [&](const std::vector<double> &v) {
    return dot(ddout, refAttention(v, B, T, C, NH, KV).out);
  };
  auto idx = fdCount < 0 ? allIndices(qkv.size())
                         : someIndices(rng, qkv.size(), size_t(fdCount));
  CHECK_CLOSE("attentionBackward vs finite differences" + at, gather(dqkv, idx),
              centralDiff(loss, dqkv0, idx), 1e-5, 1e-4);
}

void testAttention(const Blas &blas) {
  checkAttention(blas, 2, 5, 12, 3, /*fdCount=*/-1, 5);
  // Longer sequences run in row blocks: 300 = one full block and a partial
  // one, 512 two full blocks, 769 three blocks and one row.
  checkAttention(blas, 1, 300, 16, 2, /*fdCount=*/48, 6);
  checkAttention(blas, 2, 512, 8, 2, /*fdCount=*/16, 7);
  checkAttention(blas, 1, 769, 8, 1, /*fdCount=*/8, 8);
  // Scores spread over hundreds: the softmax must shift by the row maximum
  // (exp saturates past 88). Float scores of that size carry ~1e-5 absolute
  // error, hence the looser tolerances.
  checkAttention(blas, 1, 300, 32, 2, /*fdCount=*/0, 15, /*qkvScale=*/8.0f,
                 /*tolScale=*/10.0);
  // Grouped-query: 2 kv heads of 2 query heads each, and one kv head for
  // all 4 (multi-query); the second one spans two row blocks.
  checkAttention(blas, 2, 5, 16, 4, /*fdCount=*/-1, 16, 1.5f, 1.0, /*KV=*/2);
  checkAttention(blas, 1, 300, 16, 4, /*fdCount=*/48, 17, 1.5f, 1.0,
                 /*KV=*/1);
}

//===----------------------------------------------------------------------===//
// Blocked attention
//===----------------------------------------------------------------------===//

/// The worst errors the blocked kernels showed against the materialized
/// ones, relative to the largest magnitude of the materialized result,
/// and of lse against double (printed at the end, for the record); [1]
/// for the case with scores in the hundreds.
struct BlockedErrors {
  double out = 0.0, lse = 0.0, grad = 0.0;
} gBlockedErrors[2];

double maxAbs(const std::vector<float> &v) {
  double m = 0.0;
  for (float x : v)
    m = std::max(m, double(std::fabs(x)));
  return m;
}

/// max |got - want| / max |want|, and a check that it is within relTol.
bool checkScaled(const char *file, int line, const std::string &what,
                 const std::vector<float> &got, const std::vector<float> &want,
                 double relTol, double &worst) {
  const double scale = std::max(maxAbs(want), 1e-30);
  double err = 0.0;
  for (size_t i = 0; i < got.size() && i < want.size(); ++i)
    err = std::max(err, std::fabs(double(got[i]) - double(want[i])));
  if (std::isnan(err) || got.size() != want.size())
    err = std::numeric_limits<double>::infinity();
  worst = std::max(worst, err / scale);
  return checkClose(file, line, what, got.data(), toDouble(want).data(),
                    got.size(), relTol * scale, 0.0);
}

#define CHECK_SCALED(...) checkScaled(__FILE__, __LINE__, __VA_ARGS__)

struct BlockedResult {
  std::vector<float> out, lse, dqkv;
};

/// Fills the next `bytes` of the stack below the caller with NaN bits, so
/// that a kernel called next that reads a stack variable before writing it
/// sees NaN instead of the zeros a fresh stack holds (in fsdp-run the stack
/// holds whatever earlier calls left: the blocked forward's running sums,
/// read once uninitialised, turned a 6-layer GPT-2's loss into NaN).
__attribute__((noinline)) void poisonStack() {
  volatile unsigned char junk[256 << 10];
  for (size_t i = 0; i < sizeof junk; ++i)
    junk[i] = 0xFF;
}

BlockedResult runBlocked(const Blas &blas, const std::vector<float> &qkv,
                         const std::vector<float> &dout, int64_t B, int64_t T,
                         int64_t C, int64_t NH, int64_t KV) {
  BlockedResult r{nans(B * T * C), nans(B * NH * T), nans(qkv.size())};
  poisonStack();
  blockedAttentionForward(blas, r.out.data(), r.lse.data(), qkv.data(), B, T, C,
                          NH, KV);
  poisonStack();
  blockedAttentionBackward(blas, r.dqkv.data(), dout.data(), qkv.data(),
                           r.out.data(), r.lse.data(), B, T, C, NH, KV);
  return r;
}

/// Blocked against materialized (to float rounding of their scale) and
/// against the double reference. tolScale loosens all tolerances. KV kv
/// heads (0: NH).
void checkBlockedAttention(const Blas &blas, int64_t B, int64_t T, int64_t NH,
                           int64_t hs, uint64_t seed, float qkvScale = 1.5f,
                           double tolScale = 1.0, int64_t KV = 0) {
  const int64_t C = NH * hs;
  KV = KV ? KV : NH;
  const std::string at =
      " (B=" + std::to_string(B) + ", T=" + std::to_string(T) +
      ", NH=" + std::to_string(NH) + ", hs=" + std::to_string(hs) +
      ", KV=" + std::to_string(KV) + ")";
  BlockedErrors &worst = gBlockedErrors[tolScale > 1.0];
  Rng rng(seed);
  auto qkv = randomVector(rng, B * T * qkvWidth(C, NH, KV), qkvScale);
  auto dout = randomVector(rng, B * T * C);
  auto dqkv0 = toDouble(qkv);

  auto out = nans(B * T * C), probs = nans(B * NH * T * T);
  attentionForward(blas, out.data(), probs.data(), qkv.data(), B, T, C, NH, KV);
  auto dqkv = nans(qkv.size()), scratch = nans(B * NH * T * T);
  attentionBackward(blas, dqkv.data(), scratch.data(), dout.data(), qkv.data(),
                    probs.data(), B, T, C, NH, KV);
  const BlockedResult r = runBlocked(blas, qkv, dout, B, T, C, NH, KV);

  CHECK_SCALED("blockedAttentionForward out vs materialized" + at, r.out, out,
               1e-5 * tolScale, worst.out);
  const auto ref = refAttention(dqkv0, B, T, C, NH, KV);
  CHECK_CLOSE("blockedAttentionForward out vs reference" + at, r.out, ref.out,
              1e-5 * tolScale, 1e-4 * tolScale);
  const std::vector<double> &lse = ref.lse;
  CHECK_CLOSE("blockedAttentionForward lse vs reference" + at, r.lse, lse,
              1e-5 * tolScale, 1e-5 * tolScale);
  for (size_t i = 0; i < lse.size(); ++i)
    worst.lse = std::max(worst.lse, std::fabs(double(r.lse[i]) - lse[i]) /
                                        std::max(1.0, std::fabs(lse[i])));
  CHECK_SCALED("blockedAttentionBackward vs attentionBackward" + at, r.dqkv,
               dqkv, 1e-5 * tolScale, worst.grad);
  CHECK_CLOSE(
      "blockedAttentionBackward vs reference" + at, r.dqkv,
      refAttentionBackward(toDouble(dout), dqkv0, ref.probs, B, T, C, NH, KV),
      1e-5 * tolScale, 1e-4 * tolScale);
}

/// Central differences of sum(dout * attention(qkv)) against the blocked
/// backward; fdCount < 0: every element.
void checkBlockedFiniteDiff(const Blas &blas, int64_t B, int64_t T, int64_t NH,
                            int64_t hs, int64_t fdCount, uint64_t seed,
                            int64_t KV = 0) {
  const int64_t C = NH * hs;
  KV = KV ? KV : NH;
  const std::string at =
      " (B=" + std::to_string(B) + ", T=" + std::to_string(T) +
      ", NH=" + std::to_string(NH) + ", KV=" + std::to_string(KV) + ")";
  Rng rng(seed);
  auto qkv = randomVector(rng, B * T * qkvWidth(C, NH, KV), 1.5f);
  auto dout = randomVector(rng, B * T * C);
  auto dqkv0 = toDouble(qkv), ddout = toDouble(dout);
  const BlockedResult r = runBlocked(blas, qkv, dout, B, T, C, NH, KV);
  auto loss = [&](const std::vector<double> &v) {
    return dot(ddout, refAttention(v, B, T, C, NH, KV).out);
  };
  auto idx = fdCount < 0 ? allIndices(qkv.size())
                         : someIndices(rng, qkv.size(), size_t(fdCount));
  CHECK_CLOSE("blockedAttentionBackward vs finite differences" + at,
              gather(r.dqkv, idx), centralDiff(loss, dqkv0, idx), 1e-5, 1e-4);
}

/// Row i of out, lse and dq depends only on rows <= i, and the blocked
/// kernels visit those rows the same way whatever T is: the rows of
/// T = block - 1 and T = block are bit-identical to the first rows of
/// T = block + 1 (dk and dv do depend on the later rows, and are covered
/// by checkBlockedAttention at each of these lengths).
/// hs = 8 is all column tail (one column at a time), hs = 16 one vector.
void testBlockedBoundary(const Blas &blas, int64_t hs) {
  const int64_t NH = 2, C = NH * hs, Tmax = kAttentionBlock + 1;
  Rng rng(21 + hs);
  auto qkv = randomVector(rng, Tmax * 3 * C, 1.5f);
  auto dout = randomVector(rng, Tmax * C);
  const BlockedResult full = runBlocked(blas, qkv, dout, 1, Tmax, C, NH, NH);
  for (int64_t T : {kAttentionBlock - 1, kAttentionBlock}) {
    const std::vector<float> q(qkv.begin(), qkv.begin() + T * 3 * C),
        d(dout.begin(), dout.begin() + T * C);
    const BlockedResult r = runBlocked(blas, q, d, 1, T, C, NH, NH);
    bool same =
        std::memcmp(r.out.data(), full.out.data(), sizeof(float) * T * C) == 0;
    for (int64_t h = 0; h < NH; ++h)
      same &= std::memcmp(r.lse.data() + h * T, full.lse.data() + h * Tmax,
                          sizeof(float) * T) == 0;
    for (int64_t i = 0; i < T; ++i)
      same &= std::memcmp(r.dqkv.data() + i * 3 * C,
                          full.dqkv.data() + i * 3 * C, sizeof(float) * C) == 0;
    CHECK_MSG(same,
              "blocked attention: rows of T=" + std::to_string(T) +
                  " differ from the first rows of T=" + std::to_string(Tmax) +
                  " (hs=" + std::to_string(hs) + ")");
  }
}

void testBlockedAttention(const Blas &blas) {
  // B, T, NH, hs: T = 1, below, at, just past and well past the block
  // (64), never a multiple of it past 64; hs = 72 has a 64-column chunk
  // and a tail, hs = 136 takes the scalar path.
  const int64_t shapes[][4] = {
      {1, 1, 1, 8},    {2, 1, 3, 16},   {2, 7, 2, 8},   {1, 7, 4, 16},
      {1, 63, 2, 8},   {1, 64, 1, 16},  {2, 64, 3, 8},  {2, 65, 2, 16},
      {1, 65, 4, 8},   {1, 130, 3, 16}, {2, 130, 1, 8}, {1, 257, 2, 8},
      {2, 257, 4, 16}, {1, 70, 2, 72},  {1, 70, 1, 136}};
  uint64_t seed = 30;
  for (const auto &s : shapes)
    checkBlockedAttention(blas, s[0], s[1], s[2], s[3], seed++);
  // Scores spread over hundreds: the running max changes from block to
  // block and the accumulator must be rescaled (see checkAttention's case).
  checkBlockedAttention(blas, 1, 200, 2, 32, seed++, /*qkvScale=*/8.0f,
                        /*tolScale=*/10.0);
  checkBlockedFiniteDiff(blas, 2, 5, 2, 4, /*fdCount=*/-1, seed++);
  checkBlockedFiniteDiff(blas, 1, 67, 2, 4, /*fdCount=*/64, seed++);
  // Grouped-query: B, T, NH, hs, KV; the tiled path (hs 16, 72) and the
  // scalar one (hs 136), multi-query (KV = 1) included.
  const int64_t grouped[][5] = {{2, 7, 4, 8, 2},
                                {1, 65, 4, 16, 1},
                                {2, 130, 6, 16, 3},
                                {1, 70, 4, 72, 2},
                                {1, 70, 2, 136, 1}};
  for (const auto &g : grouped)
    checkBlockedAttention(blas, g[0], g[1], g[2], g[3], seed++, 1.5f, 1.0,
                          g[4]);
  checkBlockedFiniteDiff(blas, 2, 5, 4, 4, /*fdCount=*/-1, seed++, /*KV=*/2);
  testBlockedBoundary(blas, 8);
  testBlockedBoundary(blas, 16);

  // Every output row has one owner and a fixed summation order, with and
  // without grouped-query attention.
  const int64_t B = 2, T = 130, NH = 4, C = NH * 16;
  for (int64_t KV : {NH, int64_t(2)}) {
    Rng rng(seed);
    auto qkv = randomVector(rng, B * T * qkvWidth(C, NH, KV), 1.5f);
    auto dout = randomVector(rng, B * T * C);
    const BlockedResult all = runBlocked(blas, qkv, dout, B, T, C, NH, KV);
    BlockedResult one;
    withOneThread([&] { one = runBlocked(blas, qkv, dout, B, T, C, NH, KV); });
    CHECK_MSG(sameBits(all.out, one.out) && sameBits(all.lse, one.lse) &&
                  sameBits(all.dqkv, one.dqkv),
              "blocked attention differs between 1 and " +
                  std::to_string(omp_get_max_threads()) +
                  " threads (KV=" + std::to_string(KV) + ")");
  }

  for (int wide = 0; wide < 2; ++wide)
    std::printf("cpu-kernels: blocked attention vs materialized%s, worst "
                "error / scale: out %.3g, dqkv %.3g; lse vs double %.3g\n",
                wide ? " (scores in the hundreds)" : "",
                gBlockedErrors[wide].out, gBlockedErrors[wide].grad,
                gBlockedErrors[wide].lse);
}

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

//===----------------------------------------------------------------------===//
// Llama's ops: RMSNorm, SwiGLU, rotary embeddings
//===----------------------------------------------------------------------===//

struct RmsNormRef {
  std::vector<double> out, rstd;
};

RmsNormRef refRmsNorm(const std::vector<double> &x,
                      const std::vector<double> &w, int64_t N, int64_t C,
                      double eps) {
  RmsNormRef r{std::vector<double>(N * C), std::vector<double>(N)};
  for (int64_t i = 0; i < N; ++i) {
    double sq = 0.0;
    for (int64_t c = 0; c < C; ++c)
      sq += x[i * C + c] * x[i * C + c];
    const double s = 1.0 / std::sqrt(sq / double(C) + eps);
    for (int64_t c = 0; c < C; ++c)
      r.out[i * C + c] = x[i * C + c] * s * w[c];
    r.rstd[i] = s;
  }
  return r;
}

void testRmsNorm() {
  const float eps = 1e-6f;
  // Widths that leave partial column blocks in the dw pass.
  const int64_t shapes[][2] = {{10, 12}, {9, 40}, {33, 100}};
  Rng rng(21);
  for (const auto &shape : shapes) {
    const int64_t N = shape[0], C = shape[1];
    const std::string at =
        " (N=" + std::to_string(N) + ", C=" + std::to_string(C) + ")";
    auto x = randomVector(rng, N * C, 2.0f, 0.5f);
    auto w = randomVector(rng, C, 0.5f, 1.0f);
    auto dx0 = toDouble(x), dw0 = toDouble(w);
    auto ref = refRmsNorm(dx0, dw0, N, C, eps);
    auto out = nans(N * C), rstd = nans(N);
    rmsNormForward(out.data(), rstd.data(), x.data(), w.data(), N, C, eps);
    CHECK_CLOSE("rmsNormForward out" + at, out, ref.out, 1e-5, 1e-5);
    CHECK_CLOSE("rmsNormForward rstd" + at, rstd, ref.rstd, 0.0, 1e-5);

    auto dout = randomVector(rng, N * C);
    auto ddout = toDouble(dout);
    auto dx = nans(N * C), dw = nans(C);
    rmsNormBackward(dx.data(), dw.data(), dout.data(), x.data(), w.data(),
                    rstd.data(), N, C);
    auto lossX = [&](const std::vector<double> &v) {
      return dot(ddout, refRmsNorm(v, dw0, N, C, eps).out);
    };
    auto lossW = [&](const std::vector<double> &v) {
      return dot(ddout, refRmsNorm(dx0, v, N, C, eps).out);
    };
    CHECK_CLOSE("rmsNormBackward dx vs finite differences" + at, dx,
                centralDiff(lossX, dx0, allIndices(N * C)), 1e-5, 1e-4);
    CHECK_CLOSE("rmsNormBackward dw vs finite differences" + at, dw,
                centralDiff(lossW, dw0, allIndices(C)), 1e-5, 1e-4);
  }
}

double refSilu(double g) { return g / (1.0 + std::exp(-g)); }

void testSwiGlu() {
  Rng rng(22);
  // 1003 runs on one thread, 70001 on all.
  for (int64_t n : {int64_t(1003), int64_t(70001)}) {
    const std::string at = " (n=" + std::to_string(n) + ")";
    auto g = randomVector(rng, n, 6.0f), u = randomVector(rng, n, 2.0f);
    // Extremes, where 1 - sigmoid must not cancel or turn into 0 * inf.
    const float special[] = {0.0f,   1e-3f,   -1e-3f, 20.0f, -20.0f,
                             100.0f, -100.0f, 9.0f,   -9.0f};
    std::copy(std::begin(special), std::end(special), g.begin());
    auto dout = randomVector(rng, n);
    auto out = nans(n), dg = nans(n), du = nans(n);
    std::vector<double> want(n), wantG(n), wantU(n);
    swigluForward(out.data(), g.data(), u.data(), n);
    for (int64_t i = 0; i < n; ++i)
      want[i] = refSilu(g[i]) * double(u[i]);
    CHECK_CLOSE("swigluForward" + at, out, want, 1e-6, 1e-5);
    swigluBackward(dg.data(), du.data(), dout.data(), g.data(), u.data(), n);
    const double h = 1e-4;
    for (int64_t i = 0; i < n; ++i) {
      const double gi = g[i];
      wantG[i] = dout[i] * double(u[i]) * (refSilu(gi + h) - refSilu(gi - h)) /
                 (2.0 * h);
      wantU[i] = dout[i] * refSilu(gi);
    }
    CHECK_CLOSE("swigluBackward dgate vs finite differences" + at, dg, wantG,
                1e-6, 1e-5);
    CHECK_CLOSE("swigluBackward dup" + at, du, wantU, 1e-6, 1e-5);
  }
}

/// Hugging Face's rotate-half, in double: x * cos + rotate_half(x) * sin
/// over the q and k heads, v copied; sign -1 turns the other way.
std::vector<double> refRope(const std::vector<double> &x, int64_t B, int64_t T,
                            int64_t H, int64_t KV, int64_t hs, double theta,
                            double sign = 1.0) {
  std::vector<double> out = x;
  const int64_t half = hs / 2, width = (H + 2 * KV) * hs;
  for (int64_t r = 0; r < B * T; ++r)
    for (int64_t h = 0; h < H + KV; ++h)
      for (int64_t i = 0; i < half; ++i) {
        const double a =
            double(r % T) * std::pow(theta, -2.0 * double(i) / double(hs));
        const int64_t at = r * width + h * hs + i;
        const double x0 = x[at], x1 = x[at + half];
        out[at] = x0 * std::cos(a) - x1 * sign * std::sin(a);
        out[at + half] = x1 * std::cos(a) + x0 * sign * std::sin(a);
      }
  return out;
}

void testRope() {
  Rng rng(23);
  // (B, T, H, KV, hs, theta): multi-head, grouped, one kv head, and a
  // long sequence at Llama 3's theta, where the angles are large.
  struct Shape {
    int64_t B, T, H, KV, hs;
    float theta;
  };
  const Shape shapes[] = {{2, 5, 2, 2, 8, 10000.0f},
                          {1, 7, 4, 2, 6, 100.0f},
                          {3, 4, 3, 1, 4, 10000.0f},
                          {1, 300, 2, 1, 16, 500000.0f}};
  for (const Shape &s : shapes) {
    const std::string at =
        " (T=" + std::to_string(s.T) + ", H=" + std::to_string(s.H) +
        ", KV=" + std::to_string(s.KV) + ", hs=" + std::to_string(s.hs) + ")";
    const int64_t n = s.B * s.T * (s.H + 2 * s.KV) * s.hs;
    auto x = randomVector(rng, n, 2.0f);
    auto dx0 = toDouble(x);
    auto out = nans(n), back = nans(n);
    ropeForward(out.data(), x.data(), s.B, s.T, s.H, s.KV, s.hs, s.theta);
    // The reference angle is in double, the kernel's in float as Hugging
    // Face's: t inv_freq is off by up to T ulps of the angle.
    const double atol = 1e-6 * double(s.T);
    CHECK_CLOSE("ropeForward" + at, out,
                refRope(dx0, s.B, s.T, s.H, s.KV, s.hs, s.theta), atol, 1e-5);
    // The backward is the inverse: it undoes the forward.
    ropeBackward(back.data(), out.data(), s.B, s.T, s.H, s.KV, s.hs, s.theta);
    CHECK_CLOSE("ropeBackward undoes ropeForward" + at, back, dx0, 1e-5, 1e-5);
    // And it is the forward's gradient: sum(dout * rope(x)) is linear in
    // x, so its gradient is the transposed rotation of dout.
    auto dout = randomVector(rng, n);
    auto ddout = toDouble(dout);
    ropeBackward(back.data(), dout.data(), s.B, s.T, s.H, s.KV, s.hs, s.theta);
    auto loss = [&](const std::vector<double> &v) {
      return dot(ddout, refRope(v, s.B, s.T, s.H, s.KV, s.hs, s.theta));
    };
    auto idx = someIndices(rng, size_t(n), 64);
    CHECK_CLOSE("ropeBackward vs finite differences" + at, gather(back, idx),
                centralDiff(loss, dx0, idx), atol, 1e-4);
  }
}

//===----------------------------------------------------------------------===//
// Determinism
//===----------------------------------------------------------------------===//

/// The kernels that sum over rows do so in a fixed order: one thread and
/// all threads give the same bits.
void testDeterminism() {
  Rng rng(14);
  const int64_t B = 4, T = 64, C = 200, V = 301, N = B * T;
  auto tokens = randomTokens(rng, N, V);
  auto x = randomVector(rng, N * C, 2.0f, 1.0f),
       dout = randomVector(rng, N * C);
  auto w = randomVector(rng, C, 0.5f, 1.0f), b = randomVector(rng, C);
  auto logits = randomVector(rng, N * V, 5.0f);
  auto targets = randomTokens(rng, N, V);

  auto run = [&]() {
    std::vector<float> out(N * C), mean(N), rstd(N), dx(N * C), dw(C), db(C),
        dwte(V * C), dwpe(T * C), bias(C), loss(1), rmsDx(N * C), rmsDw(C);
    layerNormForward(out.data(), mean.data(), rstd.data(), x.data(), w.data(),
                     b.data(), N, C, 1e-5f);
    layerNormBackward(dx.data(), dw.data(), db.data(), dout.data(), x.data(),
                      w.data(), mean.data(), rstd.data(), N, C);
    embeddingBackward(dwte.data(), dwpe.data(), dout.data(), tokens.data(), B,
                      T, C, V, T);
    biasGrad(bias.data(), dout.data(), N, C);
    crossEntropyForward(loss.data(), logits.data(), targets.data(), N, V);
    rmsNormForward(out.data(), rstd.data(), x.data(), w.data(), N, C, 1e-6f);
    rmsNormBackward(rmsDx.data(), rmsDw.data(), dout.data(), x.data(), w.data(),
                    rstd.data(), N, C);
    std::vector<float> all;
    for (const auto *v :
         {&dx, &dw, &db, &dwte, &dwpe, &bias, &loss, &rmsDx, &rmsDw})
      all.insert(all.end(), v->begin(), v->end());
    return all;
  };
  const auto first = run(), second = run();
  std::vector<float> single;
  withOneThread([&] { single = run(); });
  CHECK_MSG(sameBits(first, second), "reductions differ from run to run");
  CHECK_MSG(sameBits(first, single), "reductions differ between 1 and " +
                                         std::to_string(omp_get_max_threads()) +
                                         " threads");
}

} // namespace

int main(int argc, char **argv) {
  const std::string library = argc > 1 ? argv[1] : "openblas";
  std::string error;
  std::unique_ptr<Blas> blas = Blas::open(library, 2, error);
  if (CHECK_MSG(blas != nullptr, "cannot open BLAS: " + error))
    std::printf("cpu-kernels: %s, %d OpenMP threads\n",
                blas->description().c_str(), omp_get_max_threads());

  testEmbedding();
  testLayerNorm();
  if (blas)
    testLinear(*blas);
  testElementwise();
  if (blas)
    testAttention(*blas);
  if (blas)
    testBlockedAttention(*blas);
  testCrossEntropy();
  testAdamW();
  testAdamWScale();
  testGradClip();
  testRmsNorm();
  testSwiGlu();
  testRope();
  testDeterminism();

  std::printf("cpu-kernels: %d passed, %d failed\n", gPassed, gFailed);
  return gFailed == 0 ? 0 : 1;
}
