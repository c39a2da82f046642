//===- EmuRowsTest.cpp - embedding, layer norm, bias grad -----------------===//
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

// ------------------------------------------------------------ embedding
template <typename E>
void testEmbedding(int B, int T, int C, int V, int Tmax, int offOut, int offW,
                   unsigned seed) {
  char nm[160];
  snprintf(nm, sizeof nm, "embedding%s B=%d T=%d C=%d V=%d Tmax=%d off=%d/%d",
           kIsBF16<E> ? " bf16" : "", B, T, C, V, Tmax, offOut, offW);
  std::mt19937 rng(seed);
  std::vector<int32_t> tok(B * T);
  std::uniform_int_distribution<int> dt(0, V - 1);
  for (auto &t : tok)
    t = dt(rng);
  auto wte = randv(size_t(V) * C, rng), wpe = randv(size_t(Tmax) * C, rng),
       dout = randv(size_t(B) * T * C, rng);
  roundTo<E>(wte), roundTo<E>(wpe), roundTo<E>(dout);
  int32_t *dtok = static_cast<int32_t *>(malloc(4 * tok.size() + 4));
  memcpy(dtok, tok.data(), 4 * tok.size());

  // forward
  std::vector<float> ref(size_t(B) * T * C);
  cp::embeddingForward(ref.data(), tok.data(), wte.data(), wpe.data(), B, T, C);
  roundTo<E>(ref);
  Outs o = runOrders(std::string(nm) + " fwd", [&]() -> Outs {
    BufT<E> out(size_t(B) * T * C, offOut), w1(wte.size(), offW),
        w2(wpe.size(), offW);
    w1.set(wte), w2.set(wpe);
    cu::embeddingForward(ctx, out.p, dtok, w1.p, w2.p, B, T, C);
    checkCanary(std::string(nm) + " fwd", out);
    return {out.vec()};
  });
  compare(std::string(nm) + " fwd", o[0].data(), ref.data(), ref.size(), 0);

  // forward without a position table (Llama's token embedding)
  cp::embeddingForward(ref.data(), tok.data(), wte.data(), nullptr, B, T, C);
  roundTo<E>(ref);
  o = runOrders(std::string(nm) + " fwd tokens", [&]() -> Outs {
    BufT<E> out(size_t(B) * T * C, offOut), w1(wte.size(), offW);
    w1.set(wte);
    cu::embeddingForward(ctx, out.p, dtok, w1.p, static_cast<E *>(nullptr), B,
                         T, C);
    checkCanary(std::string(nm) + " fwd tokens", out);
    return {out.vec()};
  });
  compare(std::string(nm) + " fwd tokens", o[0].data(), ref.data(), ref.size(),
          0);

  // backward
  std::vector<float> rte(size_t(V) * C), rpe(size_t(Tmax) * C);
  cp::embeddingBackward(rte.data(), rpe.data(), dout.data(), tok.data(), B, T,
                        C, V, Tmax);
  roundTo<E>(rte), roundTo<E>(rpe);
  o = runOrders(std::string(nm) + " bwd", [&]() -> Outs {
    BufT<E> gte(size_t(V) * C, offW), gpe(size_t(Tmax) * C, offW),
        d(dout.size(), offOut);
    d.set(dout);
    cu::embeddingBackward(ctx, gte.p, gpe.p, d.p, dtok, B, T, C, V, Tmax);
    checkCanary(std::string(nm) + " bwd dwte", gte);
    checkCanary(std::string(nm) + " bwd dwpe", gpe);
    return {gte.vec(), gpe.vec()};
  });
  compare(std::string(nm) + " dwte", o[0].data(), rte.data(), rte.size(),
          tol<E>(1e-6, 1));
  compare(std::string(nm) + " dwpe", o[1].data(), rpe.data(), rpe.size(), 0);
  free(dtok);
}

// ------------------------------------------------------------ layer norm
template <typename E> void testLayerNorm(int N, int C, int off, unsigned seed) {
  char nm[128];
  snprintf(nm, sizeof nm, "layernorm%s N=%d C=%d off=%d",
           kIsBF16<E> ? " bf16" : "", N, C, off);
  std::mt19937 rng(seed);
  auto x = randv(size_t(N) * C, rng, -2, 3), w = randv(C, rng),
       b = randv(C, rng), dout = randv(size_t(N) * C, rng);
  for (int i = 0; i < N; ++i) // rows with a large mean
    if (i % 3 == 1)
      for (int c = 0; c < C; ++c)
        x[size_t(i) * C + c] += 50.0f;
  roundTo<E>(x), roundTo<E>(w), roundTo<E>(b), roundTo<E>(dout);
  const float eps = 1e-5f;
  std::vector<float> rout(x.size()), rmean(N), rrstd(N);
  cp::layerNormForward(rout.data(), rmean.data(), rrstd.data(), x.data(),
                       w.data(), b.data(), N, C, eps);
  roundTo<E>(rout); // mean and rstd are f32 whatever E is
  Outs o = runOrders(std::string(nm) + " fwd", [&]() -> Outs {
    BufT<E> out(x.size(), off), bx(x.size(), off), bw(C, off), bb(C, off);
    Buf mean(N, off), rstd(N, off);
    bx.set(x), bw.set(w), bb.set(b);
    cu::layerNormForward(ctx, out.p, mean.p, rstd.p, bx.p, bw.p, bb.p, N, C,
                         eps);
    checkCanary(nm, out), checkCanary(nm, mean), checkCanary(nm, rstd);
    return {out.vec(), mean.vec(), rstd.vec()};
  });
  compare(std::string(nm) + " out", o[0].data(), rout.data(), rout.size(),
          tol<E>(2e-5, 1));
  compare(std::string(nm) + " mean", o[1].data(), rmean.data(), N, 2e-6);
  compare(std::string(nm) + " rstd", o[2].data(), rrstd.data(), N, 2e-5);

  std::vector<float> rdx(x.size()), rdw(C), rdb(C);
  cp::layerNormBackward(rdx.data(), rdw.data(), rdb.data(), dout.data(),
                        x.data(), w.data(), rmean.data(), rrstd.data(), N, C);
  roundTo<E>(rdx), roundTo<E>(rdw), roundTo<E>(rdb);
  o = runOrders(std::string(nm) + " bwd", [&]() -> Outs {
    BufT<E> dx(x.size(), off), dw(C, off), db(C, off), bd(x.size(), off),
        bx(x.size(), off), bw(C, off);
    Buf bm(N, off), br(N, off);
    bd.set(dout), bx.set(x), bw.set(w), bm.set(rmean), br.set(rrstd);
    cu::layerNormBackward(ctx, dx.p, dw.p, db.p, bd.p, bx.p, bw.p, bm.p, br.p,
                          N, C);
    checkCanary(nm, dx), checkCanary(nm, dw), checkCanary(nm, db);
    return {dx.vec(), dw.vec(), db.vec()};
  });
  compare(std::string(nm) + " dx", o[0].data(), rdx.data(), rdx.size(),
          tol<E>(5e-5, 1));
  compare(std::string(nm) + " dw", o[1].data(), rdw.data(), C, tol<E>(2e-5, 1));
  compare(std::string(nm) + " db", o[2].data(), rdb.data(), C, tol<E>(2e-5, 1));
}

template <typename E> void testBiasGrad(int N, int OC, int off, unsigned seed) {
  char nm[128];
  snprintf(nm, sizeof nm, "biasGrad%s N=%d OC=%d off=%d",
           kIsBF16<E> ? " bf16" : "", N, OC, off);
  std::mt19937 rng(seed);
  auto dout = randv(size_t(N) * OC, rng);
  roundTo<E>(dout);
  std::vector<float> ref(OC);
  cp::biasGrad(ref.data(), dout.data(), N, OC);
  roundTo<E>(ref);
  Outs o = runOrders(nm, [&]() -> Outs {
    BufT<E> db(OC, off), d(dout.size(), off);
    d.set(dout);
    cu::biasGrad(ctx, db.p, d.p, N, OC);
    checkCanary(nm, db);
    return {db.vec()};
  });
  compare(nm, o[0].data(), ref.data(), OC, tol<E>(2e-5, 1));
}

void groupEmbedding(unsigned &seed) {
  testEmbedding(2, 3, 8, 5, 3, 0, 0, seed++);
  testEmbedding(2, 3, 7, 5, 4, 0, 0, seed++);
  testEmbedding(1, 1, 1, 1, 1, 0, 0, seed++);
  testEmbedding(1, 1, 4, 2, 5, 1, 0, seed++);
  testEmbedding(3, 33, 260, 50, 40, 0, 0, seed++);
  testEmbedding(3, 33, 260, 50, 40, 0, 1, seed++);
  testEmbedding(2, 70, 1030, 10, 70, 0, 0, seed++);
  testEmbedding(2, 70, 1028, 3, 80, 2, 2, seed++);
  testEmbedding(4, 70, 33, 2, 70, 0, 0, seed++);    // BT = 280 > 256: chunks
  testEmbedding(5, 64, 513, 400, 64, 0, 0, seed++); // mostly unique tokens
  testEmbedding(1, 300, 12, 1, 300, 0, 0, seed++);  // one token everywhere
  printf("embedding done (%d failures so far)\n", gFailures);
}

void groupLayerNorm(unsigned &seed) {
  for (int N : {1, 7, 9, 33, 70})
    for (int C : {1, 3, 4, 32, 33, 100, 768})
      testLayerNorm(N, C, N % 2, seed++);
  testLayerNorm(3, 4100, 0, seed++); // column width 16
  testLayerNorm(2, 8200, 1, seed++); // column width 32
  testLayerNorm(130, 20, 0, seed++); // N > groups
  printf("layernorm done (%d failures so far)\n", gFailures);
}

void groupBias(unsigned &seed) {
  for (int N : {0, 1, 5, 65, 200})
    for (int OC : {1, 7, 8, 9, 100})
      testBiasGrad(N, OC, OC % 2, seed++);
  testBiasGrad(3, 4099, 0, seed++);
  testBiasGrad(2, 8193, 1, seed++);
  printf("bias done (%d failures so far)\n", gFailures);
}

// The element types the other files call these with.
template void testEmbedding<float>(int, int, int, int, int, int, int, unsigned);
template void testEmbedding<BF16>(int, int, int, int, int, int, int, unsigned);
template void testLayerNorm<float>(int, int, int, unsigned);
template void testLayerNorm<BF16>(int, int, int, unsigned);
template void testBiasGrad<float>(int, int, int, unsigned);
template void testBiasGrad<BF16>(int, int, int, unsigned);
