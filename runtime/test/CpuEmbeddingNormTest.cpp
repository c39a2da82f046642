//===- CpuEmbeddingNormTest.cpp - embedding and norm kernels --------------===//
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

/// qk_norm's reference in double: refRmsNorm on each q head (gain qw) and
/// k head (gain kw) of qkv (rows x (H + 2 KV) hs), v copied.
std::vector<double> refQkNorm(const std::vector<double> &x,
                              const std::vector<double> &qw,
                              const std::vector<double> &kw, int64_t rows,
                              int64_t H, int64_t KV, int64_t hs, float eps) {
  const int64_t W = (H + 2 * KV) * hs;
  std::vector<double> out = x;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t h = 0; h < H + KV; ++h) {
      std::vector<double> head(x.begin() + r * W + h * hs,
                               x.begin() + r * W + (h + 1) * hs);
      auto n = refRmsNorm(head, h < H ? qw : kw, 1, hs, eps).out;
      std::copy(n.begin(), n.end(), out.begin() + r * W + h * hs);
    }
  return out;
}

void testQkNorm() {
  const float eps = 1e-6f;
  // B, T, H, KV, hs: grouped and multi-head, a head size past a column
  // block (64) of the gains' pass.
  const int64_t shapes[][5] = {
      {2, 3, 2, 1, 4}, {1, 5, 3, 3, 6}, {2, 2, 4, 2, 70}};
  Rng rng(38);
  for (const auto &shape : shapes) {
    const int64_t B = shape[0], T = shape[1], H = shape[2], KV = shape[3],
                  hs = shape[4], rows = B * T, W = (H + 2 * KV) * hs;
    const std::string at =
        " (B=" + std::to_string(B) + ", T=" + std::to_string(T) +
        ", H=" + std::to_string(H) + ", KV=" + std::to_string(KV) +
        ", hs=" + std::to_string(hs) + ")";
    auto x = randomVector(rng, rows * W, 2.0f, 0.5f);
    auto qw = randomVector(rng, hs, 0.5f, 1.0f);
    auto kw = randomVector(rng, hs, 0.5f, 1.0f);
    auto dx0 = toDouble(x), dq0 = toDouble(qw), dk0 = toDouble(kw);
    auto out = nans(rows * W), rstd = nans(rows * (H + KV));
    qkNormForward(out.data(), rstd.data(), x.data(), qw.data(), kw.data(), B, T,
                  H, KV, hs, eps);
    CHECK_CLOSE("qkNormForward out" + at, out,
                refQkNorm(dx0, dq0, dk0, rows, H, KV, hs, eps), 1e-5, 1e-5);

    auto dout = randomVector(rng, rows * W);
    auto ddout = toDouble(dout);
    auto dx = nans(rows * W), dqw = nans(hs), dkw = nans(hs);
    qkNormBackward(dx.data(), dqw.data(), dkw.data(), dout.data(), x.data(),
                   qw.data(), kw.data(), rstd.data(), B, T, H, KV, hs);
    auto lossX = [&](const std::vector<double> &v) {
      return dot(ddout, refQkNorm(v, dq0, dk0, rows, H, KV, hs, eps));
    };
    auto lossQ = [&](const std::vector<double> &v) {
      return dot(ddout, refQkNorm(dx0, v, dk0, rows, H, KV, hs, eps));
    };
    auto lossK = [&](const std::vector<double> &v) {
      return dot(ddout, refQkNorm(dx0, dq0, v, rows, H, KV, hs, eps));
    };
    CHECK_CLOSE("qkNormBackward dqkv vs finite differences" + at, dx,
                centralDiff(lossX, dx0, allIndices(rows * W)), 1e-5, 1e-4);
    CHECK_CLOSE("qkNormBackward dq_weight vs finite differences" + at, dqw,
                centralDiff(lossQ, dq0, allIndices(hs)), 1e-5, 1e-4);
    CHECK_CLOSE("qkNormBackward dk_weight vs finite differences" + at, dkw,
                centralDiff(lossK, dk0, allIndices(hs)), 1e-5, 1e-4);
  }
}

} // namespace cpukernels
