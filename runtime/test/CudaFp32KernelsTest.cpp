//===- CudaFp32KernelsTest.cpp - fp32 and tf32 kernel checks --------------===//
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
#include <iterator>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace cudakernels {

//===----------------------------------------------------------------------===//
// Parity checks
//===----------------------------------------------------------------------===//

void testEmbedding(Gpu &g, const Shape &s, uint64_t seed) {
  const int64_t B = s.B, T = s.T, C = s.C, V = s.V, Tmax = T + 3, N = B * T;
  Rng rng(seed);
  auto wte = randomVector(rng, V * C), wpe = randomVector(rng, Tmax * C);
  auto dout = randomVector(rng, N * C);
  for (int variant = 0; variant < 2; ++variant) {
    // Variant 1: tokens from three values only, so that rows collide a lot.
    auto tokens = randomTokens(rng, N, variant ? std::min<int64_t>(V, 3) : V);
    const char *what = variant ? "3 distinct tokens" : nullptr;
    DevI dTokens(tokens);
    DevF dWte(wte), dWpe(wpe), dOut(N * C);

    std::vector<float> ref(N * C);
    cpu::embeddingForward(ref.data(), tokens.data(), wte.data(), wpe.data(), B,
                          T, C);
    gpu::embeddingForward<float>(g.ctx(), dOut, dTokens, dWte, dWpe, B, T, C);
    CHECK_REL(label("embeddingForward", s, what), dOut.download(), ref, 0.0);

    std::vector<float> refWte = nans(V * C), refWpe = nans(Tmax * C);
    cpu::embeddingBackward(refWte.data(), refWpe.data(), dout.data(),
                           tokens.data(), B, T, C, V, Tmax);
    DevF dDout(dout), dDwte(V * C), dDwpe(Tmax * C);
    gpu::embeddingBackward<float>(g.ctx(), dDwte, dDwpe, dDout, dTokens, B, T,
                                  C, V, Tmax);
    auto gotWte = dDwte.download(), gotWpe = dDwpe.download();
    CHECK_REL(label("embeddingBackward dwte", s, what), gotWte, refWte,
              kTolFp32);
    CHECK_REL(label("embeddingBackward dwpe", s, what), gotWpe, refWpe,
              kTolFp32);
    dDwte.poison();
    dDwpe.poison();
    gpu::embeddingBackward<float>(g.ctx(), dDwte, dDwpe, dDout, dTokens, B, T,
                                  C, V, Tmax);
    CHECK_MSG(sameBits(dDwte.download(), gotWte) &&
                  sameBits(dDwpe.download(), gotWpe),
              label("embeddingBackward deterministic", s, what));
  }
  CHECK_NO_ERROR(label("embedding", s));
}

void testLayerNorm(Gpu &g, const Shape &s, uint64_t seed) {
  const int64_t N = s.B * s.T, C = s.C;
  const float eps = 1e-5f;
  Rng rng(seed);
  auto x = randomVector(rng, N * C, 2.0f, 0.5f);
  auto w = randomVector(rng, C, 0.5f, 1.0f), b = randomVector(rng, C, 0.2f);
  std::vector<float> out(N * C), mean(N), rstd(N);
  cpu::layerNormForward(out.data(), mean.data(), rstd.data(), x.data(),
                        w.data(), b.data(), N, C, eps);
  DevF dX(x), dW(w), dB(b), dOut(N * C), dMean(N), dRstd(N);
  gpu::layerNormForward<float>(g.ctx(), dOut, dMean, dRstd, dX, dW, dB, N, C,
                               eps);
  CHECK_REL(label("layerNormForward out", s), dOut.download(), out, kTolFp32);
  CHECK_REL(label("layerNormForward mean", s), dMean.download(), mean,
            kTolFp32);
  CHECK_REL(label("layerNormForward rstd", s), dRstd.download(), rstd,
            kTolFp32);

  // Backward from the CPU's saved statistics (the same inputs for both).
  auto dout = randomVector(rng, N * C);
  std::vector<float> dx(N * C), dw(C), db(C);
  cpu::layerNormBackward(dx.data(), dw.data(), db.data(), dout.data(), x.data(),
                         w.data(), mean.data(), rstd.data(), N, C);
  DevF dDout(dout), dMeanRef(mean), dRstdRef(rstd), dDx(N * C), dDw(C), dDb(C);
  gpu::layerNormBackward<float>(g.ctx(), dDx, dDw, dDb, dDout, dX, dW, dMeanRef,
                                dRstdRef, N, C);
  auto gotDx = dDx.download(), gotDw = dDw.download(), gotDb = dDb.download();
  CHECK_REL(label("layerNormBackward dx", s), gotDx, dx, kTolFp32);
  CHECK_REL(label("layerNormBackward dw", s), gotDw, dw, kTolFp32);
  CHECK_REL(label("layerNormBackward db", s), gotDb, db, kTolFp32);
  dDx.poison();
  dDw.poison();
  dDb.poison();
  gpu::layerNormBackward<float>(g.ctx(), dDx, dDw, dDb, dDout, dX, dW, dMeanRef,
                                dRstdRef, N, C);
  CHECK_MSG(sameBits(dDx.download(), gotDx) &&
                sameBits(dDw.download(), gotDw) &&
                sameBits(dDb.download(), gotDb),
            label("layerNormBackward deterministic", s));
  CHECK_NO_ERROR(label("layerNorm", s));
}

void testLinear(Gpu &g, const cpu::Blas *blas, const Shape &s, uint64_t seed,
                double tol, const char *mode) {
  const int64_t N = s.B * s.T, IC = s.C, OC = 2 * s.C + 3;
  Rng rng(seed);
  auto x = randomVector(rng, N * IC), w = randomVector(rng, OC * IC);
  auto bias = randomVector(rng, OC), dout = randomVector(rng, N * OC);
  DevF dX(x), dW(w), dBias(bias), dDout(dout);
  if (blas) {
    for (int withBias = 0; withBias < 2; ++withBias) {
      std::vector<float> out(N * OC);
      cpu::linearForward(*blas, out.data(), x.data(), w.data(),
                         withBias ? bias.data() : nullptr, N, IC, OC);
      DevF dOut(N * OC);
      gpu::linearForward<float>(g.ctx(), dOut, dX, dW,
                                withBias ? dBias.get() : nullptr, N, IC, OC);
      CHECK_REL(label("linearForward", s,
                      (std::string(mode) + (withBias ? ", bias" : ", no bias"))
                          .c_str()),
                dOut.download(), out, tol);
    }
    std::vector<float> dx(N * IC), dw(OC * IC);
    cpu::linearGradInput(*blas, dx.data(), dout.data(), w.data(), N, IC, OC);
    cpu::linearGradWeight(*blas, dw.data(), dout.data(), x.data(), N, IC, OC);
    DevF dDx(N * IC), dDw(OC * IC);
    gpu::linearGradInput<float>(g.ctx(), dDx, dDout, dW, N, IC, OC);
    gpu::linearGradWeight<float>(g.ctx(), dDw, dDout, dX, N, IC, OC);
    CHECK_REL(label("linearGradInput", s, mode), dDx.download(), dx, tol);
    CHECK_REL(label("linearGradWeight", s, mode), dDw.download(), dw, tol);
  }
  if (std::string(mode) == "fp32") { // no GEMM: once is enough
    std::vector<float> db(OC);
    cpu::biasGrad(db.data(), dout.data(), N, OC);
    DevF dDb(OC);
    gpu::biasGrad<float>(g.ctx(), dDb, dDout, N, OC);
    auto got = dDb.download();
    CHECK_REL(label("biasGrad", s), got, db, kTolFp32);
    dDb.poison();
    gpu::biasGrad<float>(g.ctx(), dDb, dDout, N, OC);
    CHECK_MSG(sameBits(dDb.download(), got),
              label("biasGrad deterministic", s));
  }
  CHECK_NO_ERROR(label("linear", s, mode));
}

void testElementwise(Gpu &g, const Shape &s, uint64_t seed) {
  const int64_t n = s.B * s.T * s.C + 3; // not a multiple of 4
  Rng rng(seed);
  auto a = randomVector(rng, n, 3.0f), b = randomVector(rng, n, 3.0f);
  auto [add, gelu, geluB, relu, reluB, scaled] = elementwiseReference(a, b);
  const std::vector<float> filled(n, -2.5f);

  // Offsets 0 (float4 paths) and 1 (views that are not 16-byte aligned).
  for (size_t offset = 0; offset < 2; ++offset) {
    const char *what = offset ? "unaligned" : "aligned";
    DevF dA(a, offset), dB(b, offset), dOut(n, offset);
    gpu::add<float>(g.ctx(), dOut, dA, dB, n);
    CHECK_REL(label("add", s, what), dOut.download(), add, 0.0);
    dOut.poison();
    gpu::geluForward<float>(g.ctx(), dOut, dA, n);
    CHECK_REL(label("geluForward", s, what), dOut.download(), gelu, kTolFp32);
    dOut.poison();
    gpu::geluBackward<float>(g.ctx(), dOut, dB, dA, n);
    CHECK_REL(label("geluBackward", s, what), dOut.download(), geluB, kTolFp32);
    dOut.poison();
    gpu::reluForward<float>(g.ctx(), dOut, dA, n);
    CHECK_REL(label("reluForward", s, what), dOut.download(), relu, 0.0);
    dOut.poison();
    gpu::reluBackward<float>(g.ctx(), dOut, dB, dA, n);
    CHECK_REL(label("reluBackward", s, what), dOut.download(), reluB, 0.0);
    dOut.poison();
    gpu::fill<float>(g.ctx(), dOut, n, -2.5f);
    CHECK_REL(label("fill", s, what), dOut.download(), filled, 0.0);
    DevF dS(a, offset);
    gpu::scale<float>(g.ctx(), dS, n, 0.375f);
    CHECK_REL(label("scale", s, what), dS.download(), scaled, 0.0);
    // add with out aliasing an input.
    gpu::add<float>(g.ctx(), dA, dA, dB, n);
    CHECK_REL(label("add in place", s, what), dA.download(), add, 0.0);
  }
  CHECK_NO_ERROR(label("elementwise", s));
}

void testAttention(Gpu &g, const cpu::Blas &blas, const Shape &s, uint64_t seed,
                   double tol, const char *mode) {
  const int64_t B = s.B, T = s.T, C = s.C, NH = s.NH, KV = s.kv();
  const int64_t W = s.window;
  Rng rng(seed);
  auto qkv = randomVector(rng, B * T * s.qkvWidth(), 1.5f);
  auto dout = randomVector(rng, B * T * C);
  std::vector<float> out(B * T * C), probs(B * NH * T * T);
  cpu::attentionForward(blas, out.data(), probs.data(), qkv.data(), B, T, C, NH,
                        KV, W);
  DevF dQkv(qkv), dOut(B * T * C), dProbs(B * NH * T * T);
  gpu::attentionForward<float>(g.ctx(), dOut, dProbs, dQkv, B, T, C, NH, KV, W);
  auto gotProbs = dProbs.download();
  CHECK_REL(label("attentionForward probs", s, mode), gotProbs, probs, tol);
  CHECK_REL(label("attentionForward out", s, mode), dOut.download(), out, tol);
  bool zeros = true;
  for (int64_t r = 0; r < B * NH * T; ++r)
    for (int64_t j = 0; j < T; ++j)
      if (j > r % T || (W > 0 && j <= r % T - W))
        zeros &= gotProbs[r * T + j] == 0.0f;
  CHECK_MSG(zeros, label("attentionForward probs exactly 0 outside the window",
                         s, mode));

  // Backward from the CPU's probs (the same inputs for both).
  std::vector<float> dqkv(qkv.size()), scratch(B * NH * T * T);
  cpu::attentionBackward(blas, dqkv.data(), scratch.data(), dout.data(),
                         qkv.data(), probs.data(), B, T, C, NH, KV, W);
  DevF dProbsRef(probs), dDout(dout), dDqkv(qkv.size()),
      dScratch(B * NH * T * T);
  gpu::attentionBackward<float>(g.ctx(), dDqkv, dScratch, dDout, dQkv,
                                dProbsRef, B, T, C, NH, KV, W);
  std::string what = label("attentionBackward", s, mode);
  what.pop_back(); // reopen the bracket for the part's name
  checkDqkvThirds(what, dDqkv.download(), dqkv, s, tol);
  CHECK_NO_ERROR(label("attention", s, mode));
}

/// The blocked (memory-efficient) attention against the CPU's blocked
/// kernels: out, lse, then dqkv from the CPU's out and lse (the same
/// inputs for both), and the same bits on a second run.
void testBlockedAttention(Gpu &g, const cpu::Blas &blas, const Shape &s,
                          uint64_t seed) {
  const int64_t B = s.B, T = s.T, C = s.C, NH = s.NH, KV = s.kv();
  const int64_t W = s.window;
  const double tol = g.tf32 ? kTolTf32 : kTolFp32;
  const char *mode = g.tf32 ? "tf32 tensor cores" : "fp32";
  Rng rng(seed);
  auto qkv = randomVector(rng, B * T * s.qkvWidth(), 1.5f);
  auto dout = randomVector(rng, B * T * C);
  std::vector<float> out(B * T * C), lse(B * NH * T), dqkv(qkv.size());
  cpu::blockedAttentionForward(blas, out.data(), lse.data(), qkv.data(), B, T,
                               C, NH, KV, W);
  cpu::blockedAttentionBackward(blas, dqkv.data(), dout.data(), qkv.data(),
                                out.data(), lse.data(), B, T, C, NH, KV, W);
  DevF dQkv(qkv), dOut(B * T * C), dLse(B * NH * T);
  gpu::blockedAttentionForward<float>(g.ctx(), dOut, dLse, dQkv, B, T, C, NH,
                                      KV, W);
  const auto gotOut = dOut.download(), gotLse = dLse.download();
  CHECK_REL(label("blockedAttentionForward out", s, mode), gotOut, out, tol);
  CHECK_REL(label("blockedAttentionForward lse", s, mode), gotLse, lse, tol);

  DevF dOutRef(out), dLseRef(lse), dDout(dout), dDqkv(qkv.size());
  gpu::blockedAttentionBackward<float>(g.ctx(), dDqkv, dDout, dQkv, dOutRef,
                                       dLseRef, B, T, C, NH, KV, W);
  const auto got = dDqkv.download();
  std::string what = label("blockedAttentionBackward", s, mode);
  what.pop_back(); // reopen the bracket for the third's name
  checkDqkvThirds(what, got, dqkv, s, tol);

  dOut.poison(), dLse.poison(), dDqkv.poison();
  gpu::blockedAttentionForward<float>(g.ctx(), dOut, dLse, dQkv, B, T, C, NH,
                                      KV, W);
  gpu::blockedAttentionBackward<float>(g.ctx(), dDqkv, dDout, dQkv, dOutRef,
                                       dLseRef, B, T, C, NH, KV, W);
  CHECK_MSG(sameBits(dOut.download(), gotOut) &&
                sameBits(dLse.download(), gotLse) &&
                sameBits(dDqkv.download(), got),
            label("blockedAttention deterministic", s, mode));
  CHECK_NO_ERROR(label("blockedAttention", s, mode));
}

void testCrossEntropy(Gpu &g, const char *name, int64_t N, int64_t V,
                      uint64_t seed) {
  const Shape s{name, 1, N, 0, 1, V};
  Rng rng(seed);
  auto logits = randomVector(rng, N * V, 4.0f);
  auto targets = randomTokens(rng, N, V);
  float loss = 0.0f;
  cpu::crossEntropyForward(&loss, logits.data(), targets.data(), N, V);
  DevF dLogits(logits), dLoss(1), dScratch(N);
  DevI dTargets(targets);
  const std::vector<float> ref{loss};

  gpu::crossEntropyForward<float>(g.ctx(), dLoss, dLogits, dTargets, N, V);
  auto got = dLoss.download();
  CHECK_REL(label("crossEntropyForward", s, "one block"), got, ref, kTolFp32);
  dLoss.poison();
  gpu::crossEntropyForward<float>(g.ctx(), dLoss, dLogits, dTargets, N, V);
  CHECK_MSG(sameBits(dLoss.download(), got),
            label("crossEntropyForward deterministic", s, "one block"));

  dLoss.poison();
  gpu::crossEntropyForward<float>(g.ctx(), dLoss, dLogits, dTargets, N, V,
                                  dScratch);
  got = dLoss.download();
  CHECK_REL(label("crossEntropyForward", s, "row scratch"), got, ref, kTolFp32);
  dLoss.poison();
  dScratch.poison();
  gpu::crossEntropyForward<float>(g.ctx(), dLoss, dLogits, dTargets, N, V,
                                  dScratch);
  CHECK_MSG(sameBits(dLoss.download(), got),
            label("crossEntropyForward deterministic", s, "row scratch"));

  const float dloss = 0.75f;
  std::vector<float> dlogits(N * V);
  cpu::crossEntropyBackward(dlogits.data(), &dloss, logits.data(),
                            targets.data(), N, V);
  DevF dDloss(std::vector<float>{dloss}), dDlogits(N * V);
  gpu::crossEntropyBackward<float>(g.ctx(), dDlogits, dDloss, dLogits, dTargets,
                                   N, V);
  auto gotD = dDlogits.download();
  CHECK_REL(label("crossEntropyBackward", s), gotD, dlogits, kTolFp32);
  dDlogits.poison();
  gpu::crossEntropyBackward<float>(g.ctx(), dDlogits, dDloss, dLogits, dTargets,
                                   N, V);
  CHECK_MSG(sameBits(dDlogits.download(), gotD),
            label("crossEntropyBackward deterministic", s));
  CHECK_NO_ERROR(label("crossEntropy", s));
}

/// How many elements of an AdamW's shard copy `copy` are not `updated`
/// rounded to bf16 where `copied` is set, or not 0 (untouched) elsewhere.
static int64_t unroundedCopies(const std::vector<BF16> &copy,
                               const std::vector<float> &updated,
                               const std::vector<char> &copied) {
  int64_t wrong = 0;
  for (size_t i = 0; i < copy.size(); ++i) {
    uint16_t bits;
    std::memcpy(&bits, &copy[i], sizeof(bits));
    wrong += bits != (copied[i] ? fsdp::rt::roundToBF16(updated[i]) : 0);
  }
  return wrong;
}

void testAdamW(Gpu &g, const Shape &s, uint64_t seed) {
  const int64_t n = s.B * s.T * s.C + 1;
  Rng rng(seed);
  auto param = randomVector(rng, n), m = randomVector(rng, n, 0.1f);
  auto v = randomVector(rng, n, 0.01f, 0.01f);
  for (size_t offset = 0; offset < 2; ++offset) {
    const char *what = offset ? "unaligned" : "aligned";
    auto p = param, mm = m, vv = v;
    DevF dP(p, offset), dM(mm, offset), dV(vv, offset), dG(n, offset);
    Rng grng(seed + 100);
    for (int64_t step = 1; step <= 3; ++step) {
      auto grad = randomVector(grng, n);
      dG.upload(grad);
      cpu::adamw(p.data(), mm.data(), vv.data(), grad.data(), n, 1e-3f, 0.9f,
                 0.95f, 1e-8f, 0.1f, step);
      gpu::adamw(g.ctx(), dP, dM, dV, dG, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f,
                 step);
      cudaOrDie(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    }
    CHECK_REL(label("adamw param (3 steps)", s, what), dP.download(), p,
              kTolFp32);
    CHECK_REL(label("adamw m", s, what), dM.download(), mm, kTolFp32);
    CHECK_REL(label("adamw v", s, what), dV.download(), vv, kTolFp32);
    // A unit's shard copy: the device's updated shard rounded, bit for bit.
    DevB dC(n, offset);
    auto grad = randomVector(grng, n);
    dG.upload(grad);
    gpu::adamw(g.ctx(), dP, dM, dV, dG, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 4,
               nullptr, reinterpret_cast<uint16_t *>(dC.get()));
    int64_t wrong =
        unroundedCopies(dC.download(), dP.download(), std::vector<char>(n, 1));
    CHECK_MSG(wrong == 0, label("adamw shard copy", s, what) + ": " +
                              std::to_string(wrong) +
                              " elements are not the updated shard rounded");
  }
  CHECK_NO_ERROR(label("adamw", s));
}

/// The multi-tensor AdamW (the executor's one pass over a step's
/// adamw_shard instructions) against the CPU's on the same list: 30
/// segments of one flat shard (two launches of 24 at most), 3 or 4
/// elements apart (most misaligned for quads, some not), sizes across the
/// quads and the 4096-element blocks, f32
/// and bf16 gradients, with and without a scale and a copy, each its own
/// hyperparameters. The bytes between the segments stay as they were.
void testAdamWTensors(Gpu &g, uint64_t seed) {
  const int64_t sizes[] = {1, 3, 4101, 7, 0, 1027, 8192, 4, 9, 12289};
  std::vector<int64_t> at;
  int64_t total = 0;
  for (int k = 0; k < 30; ++k) {
    total += k % 3 == 0 ? 3 : 4; // a gap
    at.push_back(total);
    total += sizes[k % std::size(sizes)];
  }
  Rng rng(seed);
  auto p = randomVector(rng, total), m = randomVector(rng, total, 0.1f);
  auto v = randomVector(rng, total, 0.01f, 0.01f);
  auto grad = randomVector(rng, total);
  std::vector<uint16_t> gradBits(total), copy(total, 0);
  for (int64_t i = 0; i < total; ++i)
    gradBits[i] = fsdp::rt::roundToBF16(grad[i]);
  std::vector<BF16> gradB(total), copyB(total);
  std::memcpy(gradB.data(), gradBits.data(), 2 * total);
  std::memcpy(copyB.data(), copy.data(), 2 * total);
  DevF dP(p), dM(m), dV(v), dG(grad), dScale(std::vector<float>{0.37f});
  DevB dGB(gradB), dC(copyB);
  const float scale = 0.37f;
  auto list = [&](bool device) {
    std::vector<fsdp::rt::AdamWTensor> tensors;
    for (int k = 0; k < 30; ++k) {
      fsdp::rt::AdamWTensor t;
      const int64_t o = at[k];
      t.n = sizes[k % std::size(sizes)];
      t.bf16Grad = k % 3 == 1;
      t.param = (device ? dP.get() : p.data()) + o;
      t.m = (device ? dM.get() : m.data()) + o;
      t.v = (device ? dV.get() : v.data()) + o;
      t.grad = t.bf16Grad ? (device ? static_cast<const void *>(dGB.get() + o)
                                    : gradBits.data() + o)
                          : (device ? static_cast<const void *>(dG.get() + o)
                                    : grad.data() + o);
      t.copy = k % 2 ? (device ? reinterpret_cast<uint16_t *>(dC.get())
                               : copy.data()) +
                           o
                     : nullptr;
      t.gradScale = k % 4 == 2 ? (device ? dScale.get() : &scale) : nullptr;
      t.lr = 1e-3f * float(1 + k % 3);
      t.beta1 = k % 5 ? 0.9f : 0.8f;
      t.beta2 = k % 2 ? 0.95f : 0.999f;
      t.eps = 1e-8f;
      t.weightDecay = k % 3 ? 0.1f : 0.0f;
      tensors.push_back(t);
    }
    return tensors;
  };
  for (int64_t step = 1; step <= 2; ++step) {
    auto host = list(false), device = list(true);
    cpu::adamwTensors(host.data(), host.size(), step);
    gpu::adamwTensors(g.ctx(), device.data(), device.size(), step);
  }
  cudaOrDie(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  CHECK_REL("adamwTensors param (2 steps)", dP.download(), p, kTolFp32);
  CHECK_REL("adamwTensors m", dM.download(), m, kTolFp32);
  CHECK_REL("adamwTensors v", dV.download(), v, kTolFp32);
  // The copy is the device's updated element rounded where a segment
  // has one, and untouched (0) everywhere else.
  std::vector<char> copied(total, 0);
  for (int k = 1; k < 30; k += 2)
    std::fill_n(copied.begin() + at[k], sizes[k % std::size(sizes)], 1);
  int64_t wrong = unroundedCopies(dC.download(), dP.download(), copied);
  CHECK_MSG(wrong == 0, "adamwTensors copies: " + std::to_string(wrong) +
                            " elements are not the updated shard rounded");
  CHECK_NO_ERROR("adamwTensors");
}

/// Gradient clipping on the GPU against the CPU: the sum of squares (both
/// in double, in different fixed orders: to f32 rounding), a second run's
/// bits (the fixed grid), the coefficient, AdamW with the device scale.
void testGradClip(Gpu &g, uint64_t seed) {
  Rng rng(seed);
  for (int64_t n :
       {int64_t(0), int64_t(37), int64_t(70001), int64_t(3) << 20}) {
    auto grad = randomVector(rng, n, 3.0f);
    float acc = 2.5f, want = 0.0f;
    cpu::gradSqSum(&want, grad.data(), &acc, n);
    DevF dG(grad, 1), dAcc(std::vector<float>{acc}), dOut(1),
        dParts(2 * gpu::kGradSqSumBlocks);
    gpu::gradSqSum(g.ctx(), dOut.get(), dG.get(), dAcc.get(), n, dParts.get());
    std::vector<float> first = dOut.download();
    gpu::gradSqSum(g.ctx(), dOut.get(), dG.get(), dAcc.get(), n, dParts.get());
    const std::string at = " [n=" + std::to_string(n) + "]";
    CHECK_REL("gradSqSum" + at, first, std::vector<float>{want}, 1e-6);
    CHECK_REL("gradSqSum again (bits)" + at, dOut.download(), first, 0.0);
  }
  for (float sum : {0.0f, 4.0f, 1e6f}) {
    float want = 0.0f;
    cpu::clipCoefficient(&want, &sum, 2.001);
    DevF dSum(std::vector<float>{sum}), dCoef(1);
    gpu::clipCoefficient(g.ctx(), dCoef.get(), dSum.get(), 2.001);
    CHECK_REL("clipCoefficient", dCoef.download(), std::vector<float>{want},
              0.0);
  }
  const int64_t n = 70001;
  auto param = randomVector(rng, n), grad = randomVector(rng, n);
  std::vector<float> m(n, 0.01f), v(n, 0.001f);
  float scale = 0.3f;
  DevF dP(param), dM(m), dV(v), dG(grad), dScale(std::vector<float>{scale});
  cpu::adamw(param.data(), m.data(), v.data(), grad.data(), n, 1e-3f, 0.9f,
             0.95f, 1e-8f, 0.1f, 2, &scale);
  gpu::adamw(g.ctx(), dP, dM, dV, dG, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 2,
             dScale.get());
  CHECK_REL("adamw with a scale param", dP.download(), param, kTolFp32);
  CHECK_REL("adamw with a scale m", dM.download(), m, kTolFp32);
  CHECK_NO_ERROR("gradient clipping");
}

void testErrorRecording(Gpu &g) {
  std::string message;
  CHECK_MSG(!gpu::takeError(message), "takeError: no error recorded");
  // A K that cuBLAS's int cannot hold is refused before any call.
  gpu::linearGradWeight<float>(g.ctx(), nullptr, nullptr, nullptr,
                               int64_t(1) << 33, 4, 4);
  gpu::linearGradInput<float>(g.ctx(), nullptr, nullptr, nullptr,
                              int64_t(1) << 33, 4, 4);
  const bool taken = gpu::takeError(message);
  CHECK_MSG(taken && message.rfind("linearGradWeight", 0) == 0,
            "takeError: returns the first error (" + message + ")");
  CHECK_MSG(!gpu::takeError(message), "takeError: clears it");
  CHECK_MSG(std::string(gpu::cublasStatusName(CUBLAS_STATUS_INVALID_VALUE)) ==
                "CUBLAS_STATUS_INVALID_VALUE",
            "cublasStatusName");
}

} // namespace cudakernels
