//===- EmuLossLinearTest.cpp - cross-entropy and linear -------------------===//
//
// Part of fsdp-cuda-emulation-test (CudaEmulationTest.cpp says how the
// kernels run and are checked).
//
//===----------------------------------------------------------------------===//

#include "EmulationCheck.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

// ------------------------------------------------------------ cross entropy
template <typename E>
void testCrossEntropy(int N, int V, float spread, unsigned seed) {
  char nm[128];
  snprintf(nm, sizeof nm, "crossEntropy%s N=%d V=%d spread=%g",
           kIsBF16<E> ? " bf16" : "", N, V, spread);
  std::mt19937 rng(seed);
  auto logits = randv(size_t(N) * V, rng, -spread, spread);
  roundTo<E>(logits);
  std::vector<int32_t> tg(N);
  std::uniform_int_distribution<int> dt(0, V - 1);
  for (auto &t : tg)
    t = dt(rng);
  if (N > 0)
    tg[0] = V - 1;
  int32_t *dtg = static_cast<int32_t *>(malloc(4 * N + 4));
  memcpy(dtg, tg.data(), 4 * N);
  float rloss = 0;
  cp::crossEntropyForward(&rloss, logits.data(), tg.data(), N, V);
  for (int scratch = 0; scratch < 2; ++scratch) {
    std::string name =
        std::string(nm) + (scratch ? " fwd(rowScratch)" : " fwd(one block)");
    Outs o = runOrders(name, [&]() -> Outs {
      Buf loss(1), sc(N);
      BufT<E> lg(logits.size());
      lg.set(logits);
      cu::crossEntropyForward(ctx, loss.p, lg.p, dtg, N, V,
                              scratch ? sc.p : nullptr);
      checkCanary(name, loss), checkCanary(name, sc);
      return {loss.vec()};
    });
    compare(name, o[0].data(), &rloss, 1, 2e-6);
  }
  const float dloss = 0.7f;
  std::vector<float> rd(logits.size());
  cp::crossEntropyBackward(rd.data(), &dloss, logits.data(), tg.data(), N, V);
  roundTo<E>(rd);
  std::string name = std::string(nm) + " bwd";
  Outs o = runOrders(name, [&]() -> Outs {
    BufT<E> d(logits.size()), lg(logits.size());
    Buf dl(1);
    lg.set(logits);
    dl.p[0] = dloss;
    cu::crossEntropyBackward(ctx, d.p, dl.p, lg.p, dtg, N, V);
    checkCanary(name, d);
    return {d.vec()};
  });
  compare(name, o[0].data(), rd.data(), rd.size(), tol<E>(2e-6, 1));
  free(dtg);
}

// ------------------------------------------------------------ linear (bias
// broadcast kernel + fake cuBLAS)
template <typename E>
void testLinear(int N, int IC, int OC, bool bias, unsigned seed) {
  char nm[128];
  snprintf(nm, sizeof nm, "linear%s N=%d IC=%d OC=%d bias=%d",
           kIsBF16<E> ? " bf16" : "", N, IC, OC, bias);
  std::mt19937 rng(seed);
  auto x = randv(size_t(N) * IC, rng), w = randv(size_t(OC) * IC, rng),
       b = randv(OC, rng);
  roundTo<E>(x), roundTo<E>(w), roundTo<E>(b);
  std::vector<float> ref(size_t(N) * OC);
  cp::linearForward(*gBlas, ref.data(), x.data(), w.data(),
                    bias ? b.data() : nullptr, N, IC, OC);
  roundTo<E>(ref);
  Outs o = runOrders(nm, [&]() -> Outs {
    BufT<E> out(ref.size()), bx(x.size()), bw(w.size()), bb(OC);
    bx.set(x), bw.set(w), bb.set(b);
    cu::linearForward(ctx, out.p, bx.p, bw.p, bias ? bb.p : nullptr, N, IC, OC);
    checkCanary(nm, out);
    return {out.vec()};
  });
  compare(nm, o[0].data(), ref.data(), ref.size(), tol<E>(1e-5, 1));
  // The two gradient GEMMs (N = 0: an empty sum, dw zeroed).
  auto dout = randv(size_t(N) * OC, rng);
  roundTo<E>(dout);
  std::vector<float> rdx(size_t(N) * IC), rdw(size_t(OC) * IC);
  cp::linearGradInput(*gBlas, rdx.data(), dout.data(), w.data(), N, IC, OC);
  cp::linearGradWeight(*gBlas, rdw.data(), dout.data(), x.data(), N, IC, OC);
  roundTo<E>(rdx), roundTo<E>(rdw);
  const std::string g = std::string(nm) + " grads";
  o = runOrders(g, [&]() -> Outs {
    BufT<E> dx(rdx.size()), dw(rdw.size()), bd(dout.size()), bx(x.size()),
        bw(w.size());
    bd.set(dout), bx.set(x), bw.set(w);
    cu::linearGradInput(ctx, dx.p, bd.p, bw.p, N, IC, OC);
    cu::linearGradWeight(ctx, dw.p, bd.p, bx.p, N, IC, OC);
    checkCanary(g, dx), checkCanary(g, dw);
    return {dx.vec(), dw.vec()};
  });
  compare(g + " dx", o[0].data(), rdx.data(), rdx.size(), tol<E>(1e-5, 1));
  compare(g + " dw", o[1].data(), rdw.data(), rdw.size(), tol<E>(1e-5, 1));
}

// Cross-entropy with large logits and a dominant target: small per-row loss
// next to a large max. Reports the two paths' relative errors.
static void probeCrossEntropy(int N, int V, float offset, float margin) {
  std::mt19937 rng(7);
  auto logits = randv(size_t(N) * V, rng, -1, 1);
  std::vector<int32_t> tg(N);
  for (int i = 0; i < N; ++i) {
    tg[i] = (i * 7) % V;
    logits[size_t(i) * V + tg[i]] += margin;
  }
  for (auto &l : logits)
    l += offset;
  // exact reference in long double
  long double tot = 0;
  for (int i = 0; i < N; ++i) {
    const float *r = logits.data() + size_t(i) * V;
    long double m = r[0];
    for (int j = 0; j < V; ++j)
      m = std::max(m, (long double)r[j]);
    long double s = 0;
    for (int j = 0; j < V; ++j)
      s += expl((long double)r[j] - m);
    tot += logl(s) + m - r[tg[i]];
  }
  const double exact = double(tot / N);
  float cpuLoss;
  cp::crossEntropyForward(&cpuLoss, logits.data(), tg.data(), N, V);
  Buf lg(logits.size()), loss(1), sc(N);
  lg.set(logits);
  cu::crossEntropyForward(ctx, loss.p, lg.p, tg.data(), N, V, nullptr);
  const float one = loss.p[0];
  cu::crossEntropyForward(ctx, loss.p, lg.p, tg.data(), N, V, sc.p);
  const float rows = loss.p[0];
  printf("probe CE N=%d V=%d offset=%g margin=%g: exact %.9g | cpu rel %.2e | "
         "gpu one-block rel %.2e | gpu rowScratch rel %.2e\n",
         N, V, offset, margin, exact, std::fabs(cpuLoss - exact) / exact,
         std::fabs(one - exact) / exact, std::fabs(rows - exact) / exact);
}

void groupCrossEntropy(unsigned &seed) {
  for (int N : {1, 3, 33, 70})
    for (int V : {1, 2, 5, 31, 100, 513, 1100})
      testCrossEntropy(N, V, 5.0f, seed++);
  testCrossEntropy(5, 2000, 60.0f, seed++);
  testCrossEntropy(40, 3000, 2.0f, seed++);
  printf("ce done (%d failures so far)\n", gFailures);
}

void groupLinear(unsigned &seed) {
  testLinear(1, 3, 5, true, seed++);
  testLinear(7, 9, 300, true, seed++);
  testLinear(70, 16, 33, true, seed++);
  testLinear(5, 4, 8, false, seed++);
  printf("linear done (%d failures so far)\n", gFailures);
}

void groupProbe(unsigned &seed) {
  probeCrossEntropy(64, 100, 0.0f, 0.0f);
  probeCrossEntropy(64, 100, 0.0f, 12.0f);
  probeCrossEntropy(64, 100, 30.0f, 12.0f);
  probeCrossEntropy(64, 100, 100.0f, 15.0f);
  probeCrossEntropy(64, 2000, 20.0f, 8.0f);
}

// The element types the other files call these with.
template void testCrossEntropy<float>(int, int, float, unsigned);
template void testCrossEntropy<BF16>(int, int, float, unsigned);
template void testLinear<float>(int, int, int, bool, unsigned);
template void testLinear<BF16>(int, int, int, bool, unsigned);
