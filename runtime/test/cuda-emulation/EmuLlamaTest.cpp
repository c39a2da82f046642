//===- EmuLlamaTest.cpp - Llama's ops: RMSNorm, SwiGLU, rope --------------===//
//
// Part of fsdp-cuda-emulation-test (CudaEmulationTest.cpp says how the
// kernels run and are checked).
//
//===----------------------------------------------------------------------===//

#include "EmulationCheck.h"
#include "fsdp/runtime/RopeScaling.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

// ------------------------------------------------------------ Llama's ops
template <typename E = float>
static void testRmsNorm(int N, int C, int off, unsigned seed) {
  char nm[128];
  snprintf(nm, sizeof nm, "rmsnorm%s N=%d C=%d off=%d",
           kIsBF16<E> ? " bf16" : "", N, C, off);
  std::mt19937 rng(seed);
  auto x = randv(size_t(N) * C, rng, -2, 3), w = randv(C, rng, 0.5f, 1.5f),
       dout = randv(size_t(N) * C, rng);
  roundTo<E>(x), roundTo<E>(w), roundTo<E>(dout);
  const float eps = 1e-6f;
  std::vector<float> rout(x.size()), rrstd(N);
  cp::rmsNormForward(rout.data(), rrstd.data(), x.data(), w.data(), N, C, eps);
  roundTo<E>(rout); // rstd is f32 whatever E is
  Outs o = runOrders(std::string(nm) + " fwd", [&]() -> Outs {
    BufT<E> out(x.size(), off), bx(x.size(), off), bw(C, off);
    Buf rstd(N, off);
    bx.set(x), bw.set(w);
    cu::rmsNormForward(ctx, out.p, rstd.p, bx.p, bw.p, N, C, eps);
    checkCanary(nm, out), checkCanary(nm, rstd);
    return {out.vec(), rstd.vec()};
  });
  compare(std::string(nm) + " out", o[0].data(), rout.data(), rout.size(),
          tol<E>(2e-5, 1));
  compare(std::string(nm) + " rstd", o[1].data(), rrstd.data(), N, 2e-5);

  std::vector<float> rdx(x.size()), rdw(C);
  cp::rmsNormBackward(rdx.data(), rdw.data(), dout.data(), x.data(), w.data(),
                      rrstd.data(), N, C);
  roundTo<E>(rdx), roundTo<E>(rdw);
  o = runOrders(std::string(nm) + " bwd", [&]() -> Outs {
    BufT<E> dx(x.size(), off), dw(C, off), bd(x.size(), off), bx(x.size(), off),
        bw(C, off);
    Buf br(N, off);
    bd.set(dout), bx.set(x), bw.set(w), br.set(rrstd);
    cu::rmsNormBackward(ctx, dx.p, dw.p, bd.p, bx.p, bw.p, br.p, N, C);
    checkCanary(nm, dx), checkCanary(nm, dw);
    return {dx.vec(), dw.vec()};
  });
  compare(std::string(nm) + " dx", o[0].data(), rdx.data(), rdx.size(),
          tol<E>(5e-5, 1));
  compare(std::string(nm) + " dw", o[1].data(), rdw.data(), C, tol<E>(2e-5, 1));
}

template <typename E = float>
static void testSwiGlu(int n, int off, unsigned seed) {
  char nm[128];
  snprintf(nm, sizeof nm, "swiglu%s n=%d off=%d", kIsBF16<E> ? " bf16" : "", n,
           off);
  std::mt19937 rng(seed);
  auto g = randv(n, rng, -6, 6), u = randv(n, rng, -2, 2), dout = randv(n, rng);
  // Gates where the sigmoid saturates: 1 - s must not become 0 * inf.
  const float special[] = {-100.0f, 100.0f, -30.0f, 0.0f};
  for (int i = 0; i < n && i < 4; ++i)
    g[i] = special[i];
  roundTo<E>(g), roundTo<E>(u), roundTo<E>(dout);
  std::vector<float> rout(n), rdg(n), rdu(n);
  cp::swigluForward(rout.data(), g.data(), u.data(), n);
  cp::swigluBackward(rdg.data(), rdu.data(), dout.data(), g.data(), u.data(),
                     n);
  roundTo<E>(rout), roundTo<E>(rdg), roundTo<E>(rdu);
  Outs o = runOrders(nm, [&]() -> Outs {
    BufT<E> out(n, off), dg(n, off), du(n, off), bg(n, off), bu(n, off),
        bd(n, off);
    bg.set(g), bu.set(u), bd.set(dout);
    cu::swigluForward(ctx, out.p, bg.p, bu.p, n);
    cu::swigluBackward(ctx, dg.p, du.p, bd.p, bg.p, bu.p, n);
    checkCanary(nm, out), checkCanary(nm, dg), checkCanary(nm, du);
    return {out.vec(), dg.vec(), du.vec()};
  });
  compare(std::string(nm) + " out", o[0].data(), rout.data(), n,
          tol<E>(3e-6, 1), 1.0);
  compare(std::string(nm) + " dgate", o[1].data(), rdg.data(), n,
          tol<E>(3e-6, 1), 1.0);
  compare(std::string(nm) + " dup", o[2].data(), rdu.data(), n, tol<E>(3e-6, 1),
          1.0);
}

template <typename E = float>
static void testRope(int B, int T, int H, int KV, int hs, float theta, int off,
                     unsigned seed, fsdp::plan::RopeScaling sc = {}) {
  char nm[160];
  snprintf(nm, sizeof nm,
           "rope%s B=%d T=%d H=%d KV=%d hs=%d theta=%g off=%d scaling=%d",
           kIsBF16<E> ? " bf16" : "", B, T, H, KV, hs, theta, off,
           int(sc.kind));
  const size_t n = size_t(B) * T * (H + 2 * KV) * hs;
  std::mt19937 rng(seed);
  auto x = randv(n, rng, -2, 2);
  roundTo<E>(x);
  std::vector<float> rf(n), rb(n);
  cp::ropeForward(rf.data(), x.data(), B, T, H, KV, hs, theta, sc.kind,
                  sc.factor, sc.lowFreqFactor, sc.highFreqFactor,
                  int64_t(sc.originalMax), sc.attentionFactor, sc.correctionLow,
                  sc.correctionHigh);
  cp::ropeBackward(rb.data(), x.data(), B, T, H, KV, hs, theta, sc.kind,
                   sc.factor, sc.lowFreqFactor, sc.highFreqFactor,
                   int64_t(sc.originalMax), sc.attentionFactor,
                   sc.correctionLow, sc.correctionHigh);
  roundTo<E>(rf), roundTo<E>(rb);
  Outs o = runOrders(nm, [&]() -> Outs {
    BufT<E> f(n, off), b(n, off), bx(n, off);
    bx.set(x);
    cu::ropeForward(ctx, f.p, bx.p, B, T, H, KV, hs, theta, sc.kind, sc.factor,
                    sc.lowFreqFactor, sc.highFreqFactor,
                    int64_t(sc.originalMax), sc.attentionFactor,
                    sc.correctionLow, sc.correctionHigh);
    cu::ropeBackward(ctx, b.p, bx.p, B, T, H, KV, hs, theta, sc.kind, sc.factor,
                     sc.lowFreqFactor, sc.highFreqFactor,
                     int64_t(sc.originalMax), sc.attentionFactor,
                     sc.correctionLow, sc.correctionHigh);
    checkCanary(nm, f), checkCanary(nm, b);
    return {f.vec(), b.vec()};
  });
  // powf, cosf and sinf of the host's libm on both sides here; on a GPU
  // they differ by an ulp or two (CudaKernelsTest.cpp).
  compare(std::string(nm) + " fwd", o[0].data(), rf.data(), n, tol<E>(2e-6, 1));
  compare(std::string(nm) + " bwd", o[1].data(), rb.data(), n, tol<E>(2e-6, 1));
}

/// The CPU qk_norm (whose results the CUDA one is held to) against the
/// CPU rms_norm over the gathered q rows and k rows, and its copy of v.
static void
checkCpuQkNorm(const char *nm, const std::vector<float> &x,
               const std::vector<float> &qw, const std::vector<float> &kw,
               const std::vector<float> &dout, const std::vector<float> &rout,
               const std::vector<float> &rrstd, const std::vector<float> &rdx,
               const std::vector<float> &rdqw, const std::vector<float> &rdkw,
               int B, int T, int H, int KV, int hs, float eps) {
  const int64_t rows = int64_t(B) * T, QK = H + KV, W = (H + 2 * KV) * hs;
  for (int part = 0; part < 2; ++part) {
    const int64_t h0 = part ? H : 0, nh = part ? KV : H, N = rows * nh;
    const std::vector<float> &w = part ? kw : qw;
    std::vector<float> gx(size_t(N * hs)), gd(gx.size()), go(gx.size()),
        gdx(gx.size()), grstd(N), gdw(hs);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t h = 0; h < nh; ++h)
        for (int c = 0; c < hs; ++c) {
          gx[(r * nh + h) * hs + c] = x[r * W + (h0 + h) * hs + c];
          gd[(r * nh + h) * hs + c] = dout[r * W + (h0 + h) * hs + c];
        }
    cp::rmsNormForward(go.data(), grstd.data(), gx.data(), w.data(), N, hs,
                       eps);
    cp::rmsNormBackward(gdx.data(), gdw.data(), gd.data(), gx.data(), w.data(),
                        grstd.data(), N, hs);
    std::vector<float> mo, mdx, mr;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t h = 0; h < nh; ++h) {
        mr.push_back(rrstd[r * QK + h0 + h]);
        for (int c = 0; c < hs; ++c) {
          mo.push_back(rout[r * W + (h0 + h) * hs + c]);
          mdx.push_back(rdx[r * W + (h0 + h) * hs + c]);
        }
      }
    std::string what = std::string(nm) + (part ? " cpu k" : " cpu q");
    compare(what + " out", mo.data(), go.data(), go.size(), 1e-6);
    compare(what + " rstd", mr.data(), grstd.data(), N, 1e-6);
    compare(what + " dx", mdx.data(), gdx.data(), gdx.size(), 1e-6);
    compare(what + " dw", (part ? rdkw : rdqw).data(), gdw.data(), hs, 1e-6);
  }
  // The values copied forward and their gradient passed through.
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = QK * hs; j < W; ++j)
      if (rout[r * W + j] != x[r * W + j] ||
          rdx[r * W + j] != dout[r * W + j]) {
        printf("FAIL %s: v not copied at row %lld\n", nm, (long long)r);
        ++gFailures;
        break;
      }
}

/// qk_norm (Qwen3): the CPU kernel against rms_norm's CPU kernels run on
/// the q heads and the k heads gathered into rows of hs (an independent
/// reference), then the CUDA kernel against the CPU one.
template <typename E = float>
static void testQkNorm(int B, int T, int H, int KV, int hs, int off,
                       unsigned seed) {
  char nm[160];
  snprintf(nm, sizeof nm, "qk_norm%s B=%d T=%d H=%d KV=%d hs=%d off=%d",
           kIsBF16<E> ? " bf16" : "", B, T, H, KV, hs, off);
  const int64_t rows = int64_t(B) * T, QK = H + KV, W = (H + 2 * KV) * hs;
  const size_t n = size_t(rows * W);
  std::mt19937 rng(seed);
  auto x = randv(n, rng, -2, 3), qw = randv(hs, rng, 0.5f, 1.5f),
       kw = randv(hs, rng, 0.5f, 1.5f), dout = randv(n, rng);
  roundTo<E>(x), roundTo<E>(qw), roundTo<E>(kw), roundTo<E>(dout);
  const float eps = 1e-6f;
  std::vector<float> rout(n), rrstd(size_t(rows * QK)), rdx(n), rdqw(hs),
      rdkw(hs);
  cp::qkNormForward(rout.data(), rrstd.data(), x.data(), qw.data(), kw.data(),
                    B, T, H, KV, hs, eps);
  cp::qkNormBackward(rdx.data(), rdqw.data(), rdkw.data(), dout.data(),
                     x.data(), qw.data(), kw.data(), rrstd.data(), B, T, H, KV,
                     hs);
  checkCpuQkNorm(nm, x, qw, kw, dout, rout, rrstd, rdx, rdqw, rdkw, B, T, H, KV,
                 hs, eps);
  roundTo<E>(rout), roundTo<E>(rdx), roundTo<E>(rdqw), roundTo<E>(rdkw);
  Outs o = runOrders(nm, [&]() -> Outs {
    BufT<E> out(n, off), bx(n, off), bqw(hs, off), bkw(hs, off), bd(n, off),
        dx(n, off), dqw(hs, off), dkw(hs, off);
    Buf rstd(size_t(rows * QK), off);
    bx.set(x), bqw.set(qw), bkw.set(kw), bd.set(dout);
    cu::qkNormForward(ctx, out.p, rstd.p, bx.p, bqw.p, bkw.p, B, T, H, KV, hs,
                      eps);
    cu::qkNormBackward(ctx, dx.p, dqw.p, dkw.p, bd.p, bx.p, bqw.p, bkw.p,
                       rstd.p, B, T, H, KV, hs);
    checkCanary(nm, out), checkCanary(nm, rstd), checkCanary(nm, dx);
    checkCanary(nm, dqw), checkCanary(nm, dkw);
    return {out.vec(), rstd.vec(), dx.vec(), dqw.vec(), dkw.vec()};
  });
  compare(std::string(nm) + " out", o[0].data(), rout.data(), n,
          tol<E>(2e-5, 1));
  compare(std::string(nm) + " rstd", o[1].data(), rrstd.data(), rrstd.size(),
          2e-5);
  compare(std::string(nm) + " dx", o[2].data(), rdx.data(), n, tol<E>(5e-5, 1));
  compare(std::string(nm) + " dqw", o[3].data(), rdqw.data(), hs,
          tol<E>(5e-5, 1));
  compare(std::string(nm) + " dkw", o[4].data(), rdkw.data(), hs,
          tol<E>(5e-5, 1));
}

void groupLlama(unsigned &) {
  unsigned seed = 70001;
  for (int N : {1, 7, 33, 70})
    for (int C : {1, 4, 33, 768})
      testRmsNorm(N, C, N % 2, seed++);
  testRmsNorm(3, 4100, 0, seed++); // column width 16
  testRmsNorm(130, 20, 1, seed++); // N > groups
  for (int n : {0, 1, 5, 1025, 4099})
    for (int off : {0, 1})
      testSwiGlu(n, off, seed++);
  testRope(2, 5, 2, 2, 8, 10000.0f, 0, seed++);
  testRope(1, 7, 4, 2, 6, 100.0f, 1, seed++);
  testRope(3, 4, 3, 1, 4, 10000.0f, 0, seed++);
  testRope(1, 300, 2, 1, 16, 500000.0f, 1, seed++);
  testRope(0, 4, 2, 2, 4, 10000.0f, 0, seed++); // empty
  // Rope scaling (RopeScaling.h, shared by both): llama3 at an original
  // context of 4 positions, yarn with its attention factor.
  testRope(1, 12, 2, 1, 16, 10000.0f, 0, seed++, {2, 8, 1, 4, 4, 1, 0, 0});
  testRope(2, 9, 2, 2, 8, 500000.0f, 1, seed++, {3, 4, 1, 4, 0, 1.2, 1, 3});
  testQkNorm(2, 5, 2, 2, 8, 0, seed++);
  testQkNorm(1, 7, 4, 2, 6, 1, seed++);
  testQkNorm(3, 4, 3, 1, 33, 0, seed++);   // hs past a warp
  testQkNorm(1, 40, 4, 1, 128, 1, seed++); // Qwen3's head size
  testQkNorm(0, 4, 2, 2, 4, 0, seed++);    // empty
  // bf16: loaded bf16, computed in float, rounded once.
  for (int N : {1, 33})
    for (int C : {4, 33, 768})
      testRmsNorm<BF16>(N, C, N % 2, seed++);
  for (int n : {5, 1025})
    testSwiGlu<BF16>(n, n % 2, seed++);
  testRope<BF16>(2, 5, 2, 2, 8, 10000.0f, 0, seed++);
  testRope<BF16>(1, 300, 4, 2, 16, 500000.0f, 1, seed++);
  testRope<BF16>(1, 12, 2, 1, 16, 10000.0f, 0, seed++,
                 {2, 8, 1, 4, 4, 1, 0, 0});
  testQkNorm<BF16>(2, 5, 4, 2, 16, 1, seed++);
  printf("llama done (%d failures so far)\n", gFailures);
}
