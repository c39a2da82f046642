//===- CpuLinearElementwiseTest.cpp - linear, elementwise, Llama ops ------===//
//
// Part of fsdp-cpu-kernels-test (CpuKernelsTest.cpp says how the kernels
// are checked).
//
//===----------------------------------------------------------------------===//

#include "CpuKernelsCheck.h"

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

namespace cpukernels {

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
    ropeForward(out.data(), x.data(), s.B, s.T, s.H, s.KV, s.hs, s.theta, 0,
                1.0, 1.0, 4.0, 0, 1.0, 0.0, 0.0);
    // The reference angle is in double, the kernel's in float as Hugging
    // Face's: t inv_freq is off by up to T ulps of the angle.
    const double atol = 1e-6 * double(s.T);
    CHECK_CLOSE("ropeForward" + at, out,
                refRope(dx0, s.B, s.T, s.H, s.KV, s.hs, s.theta), atol, 1e-5);
    // The backward is the inverse: it undoes the forward.
    ropeBackward(back.data(), out.data(), s.B, s.T, s.H, s.KV, s.hs, s.theta, 0,
                 1.0, 1.0, 4.0, 0, 1.0, 0.0, 0.0);
    CHECK_CLOSE("ropeBackward undoes ropeForward" + at, back, dx0, 1e-5, 1e-5);
    // And it is the forward's gradient: sum(dout * rope(x)) is linear in
    // x, so its gradient is the transposed rotation of dout.
    auto dout = randomVector(rng, n);
    auto ddout = toDouble(dout);
    ropeBackward(back.data(), dout.data(), s.B, s.T, s.H, s.KV, s.hs, s.theta,
                 0, 1.0, 1.0, 4.0, 0, 1.0, 0.0, 0.0);
    auto loss = [&](const std::vector<double> &v) {
      return dot(ddout, refRope(v, s.B, s.T, s.H, s.KV, s.hs, s.theta));
    };
    auto idx = someIndices(rng, size_t(n), 64);
    CHECK_CLOSE("ropeBackward vs finite differences" + at, gather(back, idx),
                centralDiff(loss, dx0, idx), atol, 1e-4);
  }
}

/// Rope scaling against the formulas in double (Hugging Face's
/// rope_init_fn for linear, llama3 and yarn, written out independently of
/// RopeScaling.h), at a tiny original context so that the positions of
/// the test reach every band; and the backward still undoes the forward
/// up to yarn's attention factor squared.
void testRopeScaling() {
  Rng rng(29);
  const int64_t B = 1, T = 12, H = 2, KV = 1, hs = 16, half = hs / 2;
  const double theta = 10000.0;
  const int64_t n = B * T * (H + 2 * KV) * hs;
  auto x = randomVector(rng, n, 2.0f);
  auto dx = toDouble(x);
  struct Case {
    const char *name;
    int64_t kind;
    double factor, low, high;
    int64_t original;
    double attention, cl, ch;
  };
  const Case cases[] = {{"linear", 1, 2.5, 1, 4, 0, 1, 0, 0},
                        {"llama3", 2, 8, 1, 4, 4, 1, 0, 0},
                        {"llama3 (low 1.5, high 3)", 2, 3, 1.5, 3, 16, 1, 0, 0},
                        {"yarn", 3, 4, 1, 4, 0, 1.1386294, 1, 5},
                        {"yarn (empty ramp)", 3, 4, 1, 4, 0, 1.2, 3, 3}};
  for (const Case &c : cases) {
    std::vector<double> inv(half);
    for (int64_t i = 0; i < half; ++i) {
      const double f = std::pow(theta, -2.0 * double(i) / double(hs));
      double v = f;
      if (c.kind == 1)
        v = f / c.factor;
      if (c.kind == 2) {
        const double w = 2 * M_PI / f, lowW = double(c.original) / c.low,
                     highW = double(c.original) / c.high;
        const double sm = (double(c.original) / w - c.low) / (c.high - c.low);
        v = w > lowW    ? f / c.factor
            : w < highW ? f
                        : (1 - sm) * f / c.factor + sm * f;
      }
      if (c.kind == 3) {
        const double hi = c.ch == c.cl ? c.ch + 0.001 : c.ch;
        const double ramp =
            std::min(1.0, std::max(0.0, (double(i) - c.cl) / (hi - c.cl)));
        v = f / c.factor * ramp + f * (1 - ramp);
      }
      inv[size_t(i)] = v;
    }
    const double m = c.kind == 3 ? c.attention : 1.0;
    std::vector<double> ref = dx;
    const int64_t width = (H + 2 * KV) * hs;
    for (int64_t r = 0; r < B * T; ++r)
      for (int64_t h = 0; h < H + KV; ++h)
        for (int64_t i = 0; i < half; ++i) {
          const double a = double(r % T) * inv[size_t(i)];
          const int64_t at = r * width + h * hs + i;
          ref[at] = m * (dx[at] * std::cos(a) - dx[at + half] * std::sin(a));
          ref[at + half] =
              m * (dx[at + half] * std::cos(a) + dx[at] * std::sin(a));
        }
    auto out = nans(n), back = nans(n);
    ropeForward(out.data(), x.data(), B, T, H, KV, hs, float(theta), c.kind,
                c.factor, c.low, c.high, c.original, c.attention, c.cl, c.ch);
    CHECK_CLOSE(std::string("ropeForward, scaling ") + c.name, out, ref, 2e-5,
                1e-5);
    ropeBackward(back.data(), out.data(), B, T, H, KV, hs, float(theta), c.kind,
                 c.factor, c.low, c.high, c.original, c.attention, c.cl, c.ch);
    for (int64_t r = 0; r < B * T; ++r)
      for (int64_t j = 0; j < (H + KV) * hs; ++j)
        dx[r * width + j] *= m * m;
    CHECK_CLOSE(std::string("ropeBackward undoes ropeForward, scaling ") +
                    c.name,
                back, dx, 2e-5, 1e-5);
    dx = toDouble(x);
  }
}

} // namespace cpukernels
