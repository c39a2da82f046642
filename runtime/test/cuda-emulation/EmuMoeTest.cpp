//===- EmuMoeTest.cpp - mixture-of-experts routing and rows ---------------===//
//
// Part of fsdp-cuda-emulation-test (CudaEmulationTest.cpp says how the
// kernels run and are checked). Each CUDA kernel of Moe.cu against the
// CPU kernel of the same name (fsdp-cpu-kernels-test checks those against
// references): the same experts and order exactly, weights and gradients
// to rounding, every result bitwise the same under every schedule.
//
//===----------------------------------------------------------------------===//

#include "EmulationCheck.h"
#include "cpu/MoeExperts.h"
#include "cpu/MoeRouting.h"

#include <cstdio>
#include <random>
#include <string>
#include <vector>

namespace {

std::vector<float> asFloats(const std::vector<int32_t> &v) {
  return std::vector<float>(v.begin(), v.end());
}

template <typename E>
void testMoeRouter(int T, int NE, int k, int scoring, bool normalize,
                   bool withBias, double scale, int off, unsigned seed) {
  char nm[160];
  snprintf(nm, sizeof nm, "moe_router%s T=%d E=%d k=%d %s%s%s off=%d",
           kIsBF16<E> ? " bf16" : "", T, NE, k, scoring ? "sigmoid" : "softmax",
           normalize ? " normalised" : "", withBias ? " bias" : "", off);
  std::mt19937 rng(seed);
  auto logits = randv(size_t(T) * NE, rng, -3, 3),
       bias = randv(size_t(NE), rng, -0.5f, 0.5f),
       dw = randv(size_t(T) * k, rng);
  roundTo<E>(logits);
  const float *b = withBias ? bias.data() : nullptr;
  std::vector<float> rw(size_t(T) * k), rdz(size_t(T) * NE);
  std::vector<int32_t> rex(size_t(T) * k);
  cp::moeRouterForward(rw.data(), rex.data(), logits.data(), b, T, NE, k,
                       scoring, normalize, scale);
  cp::moeRouterBackward(rdz.data(), dw.data(), logits.data(), rex.data(), T, NE,
                        k, scoring, normalize, scale);
  roundTo<E>(rdz);
  Outs o = runOrders(nm, [&]() -> Outs {
    BufT<E> z(size_t(T) * NE, off), dz(size_t(T) * NE, off);
    Buf w(size_t(T) * k, off), bw(size_t(NE), off), g(size_t(T) * k, off);
    std::vector<int32_t> ex(size_t(T) * k, -1);
    z.set(logits), bw.set(bias), g.set(dw);
    cu::moeRouterForward(ctx, w.p, ex.data(), z.p, withBias ? bw.p : nullptr, T,
                         NE, k, scoring, normalize, scale);
    cu::moeRouterBackward(ctx, dz.p, g.p, z.p, ex.data(), T, NE, k, scoring,
                          normalize, scale);
    checkCanary(nm, w), checkCanary(nm, dz);
    return {w.vec(), asFloats(ex), dz.vec()};
  });
  const std::vector<float> want = asFloats(rex);
  if (o[1] != want)
    fail(std::string(nm) + ": the chosen experts differ from the CPU's");
  compare(std::string(nm) + " weights", o[0].data(), rw.data(), rw.size(),
          1e-6);
  compare(std::string(nm) + " dlogits", o[2].data(), rdz.data(), rdz.size(),
          tol<E>(1e-6, 1));
}

void testMoeSort(int T, int k, int NE, unsigned seed) {
  char nm[96];
  snprintf(nm, sizeof nm, "moe_sort T=%d k=%d E=%d", T, k, NE);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> pick(0, NE - 1);
  std::vector<int32_t> experts(size_t(T) * k);
  for (int32_t &e : experts)
    e = pick(rng);
  std::vector<int32_t> rorder(experts.size()), rpos(experts.size()),
      roff(size_t(NE) + 1);
  cp::moeSortByExpert(rorder.data(), rpos.data(), roff.data(), experts.data(),
                      T, k, NE);
  Outs o = runOrders(nm, [&]() -> Outs {
    std::vector<int32_t> order(experts.size(), -1), pos(order),
        offsets(size_t(NE) + 1, -1);
    cu::moeSortByExpert(ctx, order.data(), pos.data(), offsets.data(),
                        experts.data(), T, k, NE);
    return {asFloats(order), asFloats(pos), asFloats(offsets)};
  });
  if (o[0] != asFloats(rorder) || o[1] != asFloats(rpos) ||
      o[2] != asFloats(roff))
    fail(std::string(nm) + ": order, position or offsets differ from the "
                           "CPU's stable sort");
}

/// Permute and combine with their gradients, on a routing the CPU router
/// and sort made.
template <typename E>
void testMoeRows(int T, int k, int NE, int C, int off, unsigned seed) {
  char nm[128];
  snprintf(nm, sizeof nm, "moe_rows%s T=%d k=%d E=%d C=%d off=%d",
           kIsBF16<E> ? " bf16" : "", T, k, NE, C, off);
  std::mt19937 rng(seed);
  const size_t P = size_t(T) * k;
  auto logits = randv(size_t(T) * NE, rng, -3, 3),
       x = randv(size_t(T) * C, rng), ys = randv(P * C, rng),
       dy = randv(size_t(T) * C, rng), dxs = randv(P * C, rng);
  roundTo<E>(x), roundTo<E>(ys), roundTo<E>(dy), roundTo<E>(dxs);
  std::vector<float> w(P);
  std::vector<int32_t> ex(P), order(P), pos(P), offsets(size_t(NE) + 1);
  cp::moeRouterForward(w.data(), ex.data(), logits.data(), nullptr, T, NE, k, 0,
                       1, 1.0);
  cp::moeSortByExpert(order.data(), pos.data(), offsets.data(), ex.data(), T, k,
                      NE);
  std::vector<float> rxs(P * C), rdx(size_t(T) * C), ry(size_t(T) * C),
      rdys(P * C), rdw(P);
  cp::moePermute(rxs.data(), x.data(), order.data(), T, k, C);
  cp::moePermuteBackward(rdx.data(), dxs.data(), pos.data(), T, k, C);
  cp::moeCombine(ry.data(), ys.data(), w.data(), pos.data(), T, k, C);
  cp::moeCombineBackward(rdys.data(), rdw.data(), dy.data(), ys.data(),
                         w.data(), pos.data(), T, k, C);
  roundTo<E>(rdx), roundTo<E>(ry), roundTo<E>(rdys);
  Outs o = runOrders(nm, [&]() -> Outs {
    BufT<E> bx(size_t(T) * C, off), bxs(P * C, off), bdxs(P * C, off),
        bdx(size_t(T) * C, off), bys(P * C, off), by(size_t(T) * C, off),
        bdy(size_t(T) * C, off), bdys(P * C, off);
    Buf bw(P, off), bdw(P, off);
    bx.set(x), bdxs.set(dxs), bys.set(ys), bdy.set(dy), bw.set(w);
    cu::moePermute(ctx, bxs.p, bx.p, order.data(), T, k, C);
    cu::moePermuteBackward(ctx, bdx.p, bdxs.p, pos.data(), T, k, C);
    cu::moeCombine(ctx, by.p, bys.p, bw.p, pos.data(), T, k, C);
    cu::moeCombineBackward(ctx, bdys.p, bdw.p, bdy.p, bys.p, bw.p, pos.data(),
                           T, k, C);
    checkCanary(nm, bxs), checkCanary(nm, bdx), checkCanary(nm, by);
    checkCanary(nm, bdys), checkCanary(nm, bdw);
    return {bxs.vec(), bdx.vec(), by.vec(), bdys.vec(), bdw.vec()};
  });
  if (o[0] != rxs)
    fail(std::string(nm) + ": permuted rows differ from the CPU's");
  compare(std::string(nm) + " dx", o[1].data(), rdx.data(), rdx.size(),
          tol<E>(1e-6, 1));
  compare(std::string(nm) + " y", o[2].data(), ry.data(), ry.size(),
          tol<E>(1e-6, 1));
  compare(std::string(nm) + " dys", o[3].data(), rdys.data(), rdys.size(),
          tol<E>(1e-6, 1));
  compare(std::string(nm) + " dweights", o[4].data(), rdw.data(), rdw.size(),
          1e-6);
}

/// The auxiliary loss over L layers: each layer's statistics, the loss,
/// and one layer's logits gradient.
template <typename E>
void testMoeAux(int L, int T, int NE, int k, unsigned seed) {
  char nm[128];
  snprintf(nm, sizeof nm, "moe_aux%s L=%d T=%d E=%d k=%d",
           kIsBF16<E> ? " bf16" : "", L, T, NE, k);
  std::mt19937 rng(seed);
  const double coef = 0.01;
  std::vector<std::vector<float>> logits;
  std::vector<std::vector<int32_t>> experts;
  std::vector<float> rstats(size_t(L) * 2 * NE), rows(size_t(2 * T) + 1),
      w(size_t(T) * k);
  for (int l = 0; l < L; ++l) {
    logits.push_back(randv(size_t(T) * NE, rng, -3, 3));
    roundTo<E>(logits[l]);
    experts.emplace_back(size_t(T) * k);
    cp::moeRouterForward(w.data(), experts[l].data(), logits[l].data(), nullptr,
                         T, NE, k, 0, 1, 1.0);
    cp::moeAuxStats(rstats.data() + size_t(l) * 2 * NE, logits[l].data(),
                    experts[l].data(), T, NE, k, rows.data());
  }
  float rloss = 0, dloss = 0.7f;
  cp::moeAuxLoss(&rloss, rstats.data(), L, T, NE, coef);
  std::vector<float> rdz(size_t(T) * NE), scratch(static_cast<size_t>(NE));
  cp::moeAuxLossBackward(rdz.data(), &dloss, rstats.data(), logits[0].data(), L,
                         T, NE, coef, scratch.data());
  roundTo<E>(rdz);
  Outs o = runOrders(nm, [&]() -> Outs {
    Buf stats(size_t(L) * 2 * NE), rowScratch(size_t(2 * T) + 1), loss(1),
        dl(1), expertScratch(static_cast<size_t>(NE));
    BufT<E> z0(size_t(T) * NE), dz(size_t(T) * NE);
    dl.set({dloss});
    for (int l = 0; l < L; ++l) {
      BufT<E> z(size_t(T) * NE);
      z.set(logits[l]);
      if (l == 0)
        z0.set(logits[l]);
      cu::moeAuxStats(ctx, stats.p + size_t(l) * 2 * NE, z.p, experts[l].data(),
                      T, NE, k, rowScratch.p);
    }
    cu::moeAuxLoss(ctx, loss.p, stats.p, L, T, NE, coef);
    cu::moeAuxLossBackward(ctx, dz.p, dl.p, stats.p, z0.p, L, T, NE, coef,
                           expertScratch.p);
    checkCanary(nm, stats), checkCanary(nm, dz), checkCanary(nm, loss);
    return {stats.vec(), loss.vec(), dz.vec()};
  });
  compare(std::string(nm) + " stats", o[0].data(), rstats.data(), rstats.size(),
          1e-6);
  compare(std::string(nm) + " loss", o[1].data(), &rloss, 1, 1e-6);
  compare(std::string(nm) + " dlogits", o[2].data(), rdz.data(), rdz.size(),
          tol<E>(1e-6, 1));
}

/// The grouped linear (MoeGroupedLinear.cu: offsets back to the host, one
/// cuBLAS GEMM per expert) and its gradients against the CPU's, over the
/// offsets a sort of random choices gives, one expert left without rows.
template <typename E>
void testMoeGroupedLinear(int T, int k, int NE, int I, int O, unsigned seed) {
  char nm[128];
  snprintf(nm, sizeof nm, "moe_grouped_linear%s T=%d k=%d E=%d I=%d O=%d",
           kIsBF16<E> ? " bf16" : "", T, k, NE, I, O);
  std::mt19937 rng(seed);
  const int64_t P = int64_t(T) * k;
  // Expert 1 is never chosen: its weight gradient must be zero.
  std::uniform_int_distribution<int32_t> pick(0, NE - 2);
  std::vector<int32_t> experts(static_cast<size_t>(P));
  for (int32_t &e : experts) {
    e = pick(rng);
    e += e >= 1; // 0, 2, ..., E - 1
  }
  std::vector<int32_t> order(experts.size()), pos(experts.size()),
      offsets(size_t(NE) + 1);
  cp::moeSortByExpert(order.data(), pos.data(), offsets.data(), experts.data(),
                      T, k, NE);
  auto in = randv(size_t(P) * I, rng), w = randv(size_t(NE) * O * I, rng),
       dout = randv(size_t(P) * O, rng);
  roundTo<E>(in), roundTo<E>(w), roundTo<E>(dout);
  std::vector<float> rout(size_t(P) * O), rdin(size_t(P) * I),
      rdw(size_t(NE) * O * I, 7.0f);
  cp::moeGroupedLinear(*gBlas, rout.data(), in.data(), w.data(), offsets.data(),
                       NE, P, I, O);
  cp::moeGroupedLinearGradInput(*gBlas, rdin.data(), dout.data(), w.data(),
                                offsets.data(), NE, P, I, O);
  cp::moeGroupedLinearGradWeight(*gBlas, rdw.data(), dout.data(), in.data(),
                                 offsets.data(), NE, P, I, O);
  roundTo<E>(rout), roundTo<E>(rdin), roundTo<E>(rdw);
  Outs o = runOrders(nm, [&]() -> Outs {
    BufT<E> bin(size_t(P) * I), bw(size_t(NE) * O * I), bd(size_t(P) * O),
        out(size_t(P) * O), din(size_t(P) * I), dw(size_t(NE) * O * I);
    bin.set(in), bw.set(w), bd.set(dout);
    dw.set(std::vector<float>(size_t(NE) * O * I, 7.0f));
    cu::moeGroupedLinear(ctx, out.p, bin.p, bw.p, offsets.data(), NE, P, I, O);
    cu::moeGroupedLinearGradInput(ctx, din.p, bd.p, bw.p, offsets.data(), NE, P,
                                  I, O);
    cu::moeGroupedLinearGradWeight(ctx, dw.p, bd.p, bin.p, offsets.data(), NE,
                                   P, I, O);
    checkCanary(nm, out), checkCanary(nm, din), checkCanary(nm, dw);
    return {out.vec(), din.vec(), dw.vec()};
  });
  compare(std::string(nm) + " out", o[0].data(), rout.data(), rout.size(),
          tol<E>(1e-5, 1));
  compare(std::string(nm) + " din", o[1].data(), rdin.data(), rdin.size(),
          tol<E>(1e-5, 1));
  compare(std::string(nm) + " dw", o[2].data(), rdw.data(), rdw.size(),
          tol<E>(1e-5, 1));
  for (int64_t i = int64_t(O) * I; i < 2 * int64_t(O) * I; ++i)
    if (o[2][size_t(i)] != 0.0f) {
      fail(std::string(nm) + ": the unchosen expert's weight gradient is "
                             "not zero");
      break;
    }
}

/// The kernel table's forms (the functions the dispatch calls): the sort,
/// and the balancing loss over stats summed layer by layer.
void testMoeTableForms(int T, int NE, int k, unsigned seed) {
  char nm[96];
  snprintf(nm, sizeof nm, "moe table forms T=%d E=%d k=%d", T, NE, k);
  std::mt19937 rng(seed);
  auto logits = randv(size_t(T) * NE, rng, -3, 3),
       earlier = randv(size_t(2) * NE, rng, 0, 5);
  std::vector<float> w(size_t(T) * k), rstats(size_t(2) * NE),
      rows(size_t(2) * T), rdz(size_t(T) * NE), rgrad(size_t(2) * NE);
  std::vector<int32_t> ex(size_t(T) * k), rorder(ex.size()), rpos(ex.size()),
      roff(size_t(NE) + 1);
  cp::moeRouterForward(w.data(), ex.data(), logits.data(), nullptr, T, NE, k, 0,
                       1, 1.0);
  cp::moeSort(rorder.data(), rpos.data(), roff.data(), ex.data(), T, k, NE);
  cp::moeAuxStatsForward(rstats.data(), logits.data(), ex.data(),
                         earlier.data(), T, NE, k, rows.data());
  float ce = 2.5f, rloss = 0, dloss = 0.7f;
  cp::moeAuxLossForward(&rloss, rstats.data(), &ce, NE, k, 0.3);
  cp::moeAuxLossGrad(rgrad.data(), &dloss, rstats.data(), NE, k, 0.3);
  cp::moeAuxStatsBackward(rdz.data(), rgrad.data(), logits.data(), T, NE);
  // The selection bias: its load signal and its update from it.
  std::vector<float> rsig(static_cast<size_t>(NE)), rbias = earlier;
  cp::moeBiasSignal(rsig.data(), ex.data(), T, k, NE);
  cp::moeSelectionBiasUpdate(rbias.data(), rsig.data(), NE, 0.25);
  Outs o = runOrders(nm, [&]() -> Outs {
    std::vector<int32_t> order(ex.size(), -1), pos(order),
        off(size_t(NE) + 1, -1);
    Buf z(size_t(T) * NE), sum(size_t(2) * NE), stats(size_t(2) * NE),
        scratch(size_t(2) * T), loss(1), base(1), dl(1), grad(size_t(2) * NE),
        dz(size_t(T) * NE);
    z.set(logits), sum.set(earlier), base.set({ce}), dl.set({dloss});
    cu::moeSort(ctx, order.data(), pos.data(), off.data(), ex.data(), T, k, NE);
    cu::moeAuxStatsForward(ctx, stats.p, z.p, ex.data(), sum.p, T, NE, k,
                           scratch.p);
    cu::moeAuxLossForward(ctx, loss.p, stats.p, base.p, NE, k, 0.3);
    cu::moeAuxLossGrad(ctx, grad.p, dl.p, stats.p, NE, k, 0.3);
    cu::moeAuxStatsBackward(ctx, dz.p, grad.p, z.p, T, NE);
    Buf sig(static_cast<size_t>(NE)), bias(static_cast<size_t>(NE));
    bias.set(std::vector<float>(earlier.begin(), earlier.begin() + NE));
    cu::moeBiasSignal(ctx, sig.p, ex.data(), T, k, NE);
    cu::moeSelectionBiasUpdate(ctx, bias.p, sig.p, NE, 0.25);
    checkCanary(nm, stats), checkCanary(nm, grad), checkCanary(nm, dz);
    checkCanary(nm, sig), checkCanary(nm, bias);
    return {asFloats(order), asFloats(pos), asFloats(off),
            stats.vec(),     loss.vec(),    grad.vec(),
            dz.vec(),        sig.vec(),     bias.vec()};
  });
  if (o[7] != rsig ||
      o[8] != std::vector<float>(rbias.begin(), rbias.begin() + NE))
    fail(std::string(nm) + ": the selection bias's signal or update differs "
                           "from the CPU's");
  if (o[0] != asFloats(rorder) || o[1] != asFloats(rpos) ||
      o[2] != asFloats(roff))
    fail(std::string(nm) + ": moeSort differs from the CPU's");
  compare(std::string(nm) + " stats", o[3].data(), rstats.data(), rstats.size(),
          1e-6);
  compare(std::string(nm) + " loss", o[4].data(), &rloss, 1, 1e-6);
  compare(std::string(nm) + " stats grad", o[5].data(), rgrad.data(),
          rgrad.size(), 1e-6);
  compare(std::string(nm) + " dlogits", o[6].data(), rdz.data(), rdz.size(),
          1e-6);
}

} // namespace

void groupMoe(unsigned &) {
  unsigned seed = 90001;
  // Mixtral's router, Qwen3-MoE's (both normalisations), DeepSeek-V3's
  // sigmoid with bias and scale, k = E, and a single token.
  for (int off : {0, 1}) {
    testMoeRouter<float>(37, 8, 2, 0, true, false, 1.0, off, seed++);
    testMoeRouter<float>(19, 128, 8, 0, false, false, 1.0, off, seed++);
    testMoeRouter<float>(13, 256, 8, 1, true, true, 2.5, off, seed++);
    testMoeRouter<BF16>(19, 64, 6, 0, true, false, 1.0, off, seed++);
    testMoeRouter<BF16>(13, 64, 4, 1, false, true, 1.0, off, seed++);
  }
  testMoeRouter<float>(5, 4, 4, 0, false, false, 1.0, 0, seed++);
  testMoeRouter<float>(1, 8, 2, 1, true, false, 1.0, 0, seed++);
  testMoeSort(53, 3, 7, seed++);
  testMoeSort(300, 8, 128, seed++);
  testMoeSort(1, 1, 1, seed++);
  for (int off : {0, 1}) {
    testMoeRows<float>(29, 2, 8, 33, off, seed++);
    testMoeRows<BF16>(17, 4, 16, 300, off, seed++);
  }
  testMoeAux<float>(3, 23, 8, 2, seed++);
  testMoeAux<BF16>(2, 41, 64, 8, seed++);
  testMoeAux<float>(1, 1, 4, 1, seed++);
  testMoeGroupedLinear<float>(31, 2, 6, 24, 40, seed++);
  testMoeGroupedLinear<BF16>(17, 3, 5, 32, 16, seed++);
  testMoeTableForms(29, 8, 2, seed++);
  testMoeTableForms(7, 64, 6, seed++);
}
