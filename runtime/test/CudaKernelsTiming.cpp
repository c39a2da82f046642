//===- CudaKernelsTiming.cpp - kernel times at GPT-2 124M -----------------===//
//
// Part of fsdp-cuda-kernels-test (CudaKernelsTest.cpp says what it checks).
//
//===----------------------------------------------------------------------===//

#include "CudaKernelsCheck.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace cudakernels {

//===----------------------------------------------------------------------===//
// Timing at the GPT-2 124M shape (information only)
//===----------------------------------------------------------------------===//

/// Fills a device array with a random pattern of up to 1M values, tiled.
void randomFill(DevF &d, Rng &rng, float scale = 1.0f) {
  const size_t tile = std::min<size_t>(d.size(), size_t(1) << 20);
  auto pattern = randomVector(rng, tile, scale);
  for (size_t i = 0; i < d.size(); i += tile)
    cudaOrDie(cudaMemcpy(d.get() + i, pattern.data(),
                         sizeof(float) * std::min(tile, d.size() - i),
                         cudaMemcpyHostToDevice),
              "cudaMemcpy");
}

template <typename F> void timeIt(Gpu &g, const char *what, F &&f) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  f(); // warm-up (cuBLAS heuristics, first-launch costs)
  const int iters = 5;
  cudaEventRecord(start, g.stream);
  for (int i = 0; i < iters; ++i)
    f();
  cudaEventRecord(stop, g.stream);
  cudaEventSynchronize(stop);
  float ms = 0.0f;
  cudaEventElapsedTime(&ms, start, stop);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::string message;
  if (gpu::takeError(message))
    std::printf("  time    %-44s error: %s\n", what, message.c_str());
  else
    std::printf("  time    %-44s %9.3f ms\n", what, ms / iters);
  std::fflush(stdout);
}

/// A bf16 device array from a random pattern (through the cast kernel).
void randomFill(DevB &d, Rng &rng, float scale = 1.0f) {
  DevF wide(d.size());
  randomFill(wide, rng, scale);
  gpu::cast(gpu::Context{nullptr, nullptr}, d, wide, int64_t(d.size()));
  cudaOrDie(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

/// The GEMM-based kernels in bf16 at the GPT-2 124M shape (GemmEx, fp32
/// compute; the handle's math mode does not apply to bf16 inputs).
void timeGpt2BF16(Gpu &g, int64_t B, int64_t T, int64_t C, int64_t NH,
                  int64_t V) {
  const int64_t N = B * T, OC = 4 * C;
  const gpu::Context ctx = g.ctx();
  Rng rng(778);
  g.mathMode(CUBLAS_DEFAULT_MATH);
  {
    DevB x(N * C), w(OC * C), bias(OC), out(N * OC), dx(N * C), dw(OC * C);
    randomFill(x, rng);
    randomFill(w, rng);
    randomFill(bias, rng);
    randomFill(out, rng);
    timeIt(g, "linearForward C->4C, bias (bf16)",
           [&] { gpu::linearForward<BF16>(ctx, out, x, w, bias, N, C, OC); });
    timeIt(g, "linearGradInput C->4C (bf16)",
           [&] { gpu::linearGradInput<BF16>(ctx, dx, out, w, N, C, OC); });
    timeIt(g, "linearGradWeight C->4C (bf16)",
           [&] { gpu::linearGradWeight<BF16>(ctx, dw, out, x, N, C, OC); });
  }
  {
    DevB x(N * C), wte(V * C), logits(N * V);
    randomFill(x, rng);
    randomFill(wte, rng, 0.1f);
    timeIt(g, "linearForward lm head C->V (bf16)", [&] {
      gpu::linearForward<BF16>(ctx, logits, x, wte, nullptr, N, C, V);
    });
  }
  {
    DevB qkv(N * 3 * C), out(N * C), probs(B * NH * T * T),
        scratch(B * NH * T * T), dqkv(N * 3 * C);
    DevF lse(B * NH * T);
    randomFill(qkv, rng);
    randomFill(out, rng);
    timeIt(g, "attentionForward (bf16)", [&] {
      gpu::attentionForward<BF16>(ctx, out, probs, qkv, B, T, C, NH, NH, 0);
    });
    timeIt(g, "attentionBackward (bf16)", [&] {
      gpu::attentionBackward<BF16>(ctx, dqkv, scratch, out, qkv, probs, B, T, C,
                                   NH, NH, 0);
    });
    timeIt(g, "blockedAttentionForward (bf16)", [&] {
      gpu::blockedAttentionForward<BF16>(ctx, out, lse, qkv, B, T, C, NH, NH,
                                         0);
    });
    timeIt(g, "blockedAttentionBackward (bf16)", [&] {
      gpu::blockedAttentionBackward<BF16>(ctx, dqkv, out, qkv, out, lse, B, T,
                                          C, NH, NH, 0);
    });
    const gpu::Context tc{ctx.stream, ctx.blas, /*tf32=*/true};
    timeIt(g, "blockedAttentionForward (bf16, tensor cores)", [&] {
      gpu::blockedAttentionForward<BF16>(tc, out, lse, qkv, B, T, C, NH, NH, 0);
    });
    timeIt(g, "blockedAttentionBackward (bf16, tensor cores)", [&] {
      gpu::blockedAttentionBackward<BF16>(tc, dqkv, out, qkv, out, lse, B, T, C,
                                          NH, NH, 0);
    });
  }
  g.mathMode(CUBLAS_PEDANTIC_MATH);
}

namespace {
/// The GPT-2 124M shape the times are taken at.
struct Gpt2Shape {
  int64_t B = 4, T = 1024, C = 768, NH = 12, V = 50257, N = B * T;
  int64_t params = 124439808;
};

/// The row kernels: embedding, layer norm, element-wise, bias gradients.
void timeGpt2Rows(Gpu &g, const Gpt2Shape &shape, Rng &rng) {
  const int64_t B = shape.B, T = shape.T, C = shape.C, V = shape.V, N = shape.N;
  const gpu::Context ctx = g.ctx();
  {
    DevI tokens(randomTokens(rng, N, V));
    DevF wte(V * C), wpe(T * C), out(N * C), dwte(V * C), dwpe(T * C);
    randomFill(wte, rng);
    randomFill(wpe, rng);
    randomFill(out, rng);
    timeIt(g, "embeddingForward", [&] {
      gpu::embeddingForward<float>(ctx, out, tokens, wte, wpe, B, T, C);
    });
    timeIt(g, "embeddingBackward", [&] {
      gpu::embeddingBackward<float>(ctx, dwte, dwpe, out, tokens, B, T, C, V,
                                    T);
    });
  }
  {
    DevF x(N * C), w(C), b(C), out(N * C), mean(N), rstd(N), dx(N * C), dw(C),
        db(C);
    randomFill(x, rng);
    randomFill(w, rng);
    randomFill(b, rng);
    timeIt(g, "layerNormForward", [&] {
      gpu::layerNormForward<float>(ctx, out, mean, rstd, x, w, b, N, C, 1e-5f);
    });
    timeIt(g, "layerNormBackward", [&] {
      gpu::layerNormBackward<float>(ctx, dx, dw, db, out, x, w, mean, rstd, N,
                                    C);
    });
  }
  {
    const int64_t n = N * 4 * C;
    DevF a(n), b(n), out(n);
    randomFill(a, rng);
    randomFill(b, rng);
    timeIt(g, "add (N x 4C)", [&] { gpu::add<float>(ctx, out, a, b, n); });
    timeIt(g, "geluForward (N x 4C)",
           [&] { gpu::geluForward<float>(ctx, out, a, n); });
    timeIt(g, "geluBackward (N x 4C)",
           [&] { gpu::geluBackward<float>(ctx, out, b, a, n); });
    timeIt(g, "reluForward (N x 4C)",
           [&] { gpu::reluForward<float>(ctx, out, a, n); });
    timeIt(g, "fill (N x 4C)", [&] { gpu::fill<float>(ctx, out, n, 0.0f); });
    timeIt(g, "scale (N x 4C)", [&] { gpu::scale<float>(ctx, out, n, 1.0f); });
    timeIt(g, "biasGrad (N x 4C)",
           [&] { gpu::biasGrad<float>(ctx, out, a, N, 4 * C); });
    timeIt(g, "biasGrad (N x C)",
           [&] { gpu::biasGrad<float>(ctx, out, a, N, C); });
  }
}

/// The GEMM-based kernels in fp32 and in tf32: linear, the lm head,
/// materialized attention.
void timeGpt2Gemms(Gpu &g, const Gpt2Shape &shape, Rng &rng) {
  const int64_t B = shape.B, T = shape.T, C = shape.C, NH = shape.NH,
                V = shape.V, N = shape.N;
  const gpu::Context ctx = g.ctx();
  for (int tf32 = 0; tf32 < 2; ++tf32) {
    g.mathMode(tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH);
    const std::string mode = tf32 ? " (tf32)" : " (fp32)";
    {
      const int64_t OC = 4 * C;
      DevF x(N * C), w(OC * C), bias(OC), out(N * OC), dx(N * C), dw(OC * C);
      randomFill(x, rng);
      randomFill(w, rng);
      randomFill(bias, rng);
      randomFill(out, rng);
      timeIt(g, ("linearForward C->4C, bias" + mode).c_str(), [&] {
        gpu::linearForward<float>(ctx, out, x, w, bias, N, C, OC);
      });
      timeIt(g, ("linearGradInput C->4C" + mode).c_str(),
             [&] { gpu::linearGradInput<float>(ctx, dx, out, w, N, C, OC); });
      timeIt(g, ("linearGradWeight C->4C" + mode).c_str(),
             [&] { gpu::linearGradWeight<float>(ctx, dw, out, x, N, C, OC); });
    }
    {
      DevF x(N * C), wte(V * C), logits(N * V);
      randomFill(x, rng);
      randomFill(wte, rng, 0.1f);
      timeIt(g, ("linearForward lm head C->V" + mode).c_str(), [&] {
        gpu::linearForward<float>(ctx, logits, x, wte, nullptr, N, C, V);
      });
    }
    {
      DevF qkv(N * 3 * C), out(N * C), probs(B * NH * T * T),
          scratch(B * NH * T * T), dqkv(N * 3 * C);
      randomFill(qkv, rng);
      randomFill(out, rng);
      timeIt(g, ("attentionForward" + mode).c_str(), [&] {
        gpu::attentionForward<float>(ctx, out, probs, qkv, B, T, C, NH, NH, 0);
      });
      timeIt(g, ("attentionBackward" + mode).c_str(), [&] {
        gpu::attentionBackward<float>(ctx, dqkv, scratch, out, qkv, probs, B, T,
                                      C, NH, NH, 0);
      });
    }
  }
  g.mathMode(CUBLAS_PEDANTIC_MATH);
}

/// Blocked attention, cross-entropy and AdamW over all the parameters.
void timeGpt2Tail(Gpu &g, const Gpt2Shape &shape, Rng &rng) {
  const int64_t B = shape.B, T = shape.T, C = shape.C, NH = shape.NH,
                V = shape.V, N = shape.N;
  const int64_t params = shape.params;
  const gpu::Context ctx = g.ctx();
  {
    DevF qkv(N * 3 * C), out(N * C), lse(B * NH * T), dqkv(N * 3 * C);
    randomFill(qkv, rng);
    randomFill(out, rng);
    timeIt(g, "blockedAttentionForward", [&] {
      gpu::blockedAttentionForward<float>(ctx, out, lse, qkv, B, T, C, NH, NH,
                                          0);
    });
    timeIt(g, "blockedAttentionBackward", [&] {
      gpu::blockedAttentionBackward<float>(ctx, dqkv, out, qkv, out, lse, B, T,
                                           C, NH, NH, 0);
    });
    // On TF32 tensor cores (Context::tf32, fsdp-run's --tf32 on).
    const gpu::Context tc{ctx.stream, ctx.blas, /*tf32=*/true};
    timeIt(g, "blockedAttentionForward (tf32 tensor cores)", [&] {
      gpu::blockedAttentionForward<float>(tc, out, lse, qkv, B, T, C, NH, NH,
                                          0);
    });
    timeIt(g, "blockedAttentionBackward (tf32 tensor cores)", [&] {
      gpu::blockedAttentionBackward<float>(tc, dqkv, out, qkv, out, lse, B, T,
                                           C, NH, NH, 0);
    });
  }
  {
    DevF logits(N * V), dlogits(N * V), loss(1), scratch(N),
        dloss(std::vector<float>{1.0f});
    DevI targets(randomTokens(rng, N, V));
    randomFill(logits, rng, 4.0f);
    timeIt(g, "crossEntropyForward (one block)", [&] {
      gpu::crossEntropyForward<float>(ctx, loss, logits, targets, N, V);
    });
    timeIt(g, "crossEntropyForward (row scratch)", [&] {
      gpu::crossEntropyForward<float>(ctx, loss, logits, targets, N, V,
                                      scratch);
    });
    timeIt(g, "crossEntropyBackward", [&] {
      gpu::crossEntropyBackward<float>(ctx, dlogits, dloss, logits, targets, N,
                                       V);
    });
  }
  {
    DevF p(params), m(params), v(params), grad(params);
    randomFill(p, rng);
    randomFill(grad, rng);
    cudaOrDie(cudaMemset(m, 0, sizeof(float) * params), "cudaMemset");
    cudaOrDie(cudaMemset(v, 0, sizeof(float) * params), "cudaMemset");
    timeIt(g, "adamw (124M parameters)", [&] {
      gpu::adamw(ctx, p, m, v, grad, params, 6e-4f, 0.9f, 0.95f, 1e-8f, 0.1f,
                 1);
    });
  }
}
} // namespace

void timeGpt2(Gpu &g) {
  const Gpt2Shape shape;
  size_t freeBytes = 0, totalBytes = 0;
  cudaMemGetInfo(&freeBytes, &totalBytes);
  // The largest set of buffers alive at once: the AdamW step's four arrays.
  const size_t need =
      sizeof(float) * size_t(4 * shape.params + 2 * shape.N * shape.V);
  if (freeBytes < need) {
    std::printf("cuda-kernels: timing skipped (needs %.1f GiB, %.1f free)\n",
                need / 1073741824.0, freeBytes / 1073741824.0);
    return;
  }
  std::printf("cuda-kernels: GPU time per call at the GPT-2 124M shape "
              "(B=%lld T=%lld C=%lld NH=%lld V=%lld)\n",
              (long long)shape.B, (long long)shape.T, (long long)shape.C,
              (long long)shape.NH, (long long)shape.V);
  Rng rng(777);
  timeGpt2Rows(g, shape, rng);
  timeGpt2Gemms(g, shape, rng);
  timeGpt2Tail(g, shape, rng);
  timeGpt2BF16(g, shape.B, shape.T, shape.C, shape.NH, shape.V);
}

} // namespace cudakernels
