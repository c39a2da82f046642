//===- EmuOptimizerTest.cpp - AdamW and gradient clipping -----------------===//
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
#include <iterator>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

// ------------------------------------------------------------ adamw
// E: the gradient's type. A bf16 gradient (mixed precision's reduced
// shard, which the compiler leaves uncast) is widened as it is read: the
// CPU's AdamW on the widened values is the reference, and the f32 kernel
// on them gives the same bits.
template <typename E>
static void testAdamWOf(int n, int off, int step, unsigned seed) {
  char nm[128];
  snprintf(nm, sizeof nm, "adamw%s n=%d off=%d step=%d",
           kIsBF16<E> ? " bf16 grad" : "", n, off, step);
  std::mt19937 rng(seed);
  auto p = randv(n, rng), m = randv(n, rng, -0.1f, 0.1f),
       v = randv(n, rng, 0, 0.01f), g = randv(n, rng);
  roundTo<E>(g);
  auto rp = p, rm = m, rv = v;
  cp::adamw(rp.data(), rm.data(), rv.data(), g.data(), n, 1e-3f, 0.9f, 0.95f,
            1e-8f, 0.1f, step);
  auto run = [&](auto &bg) -> Outs {
    Buf bp(n, off), bm(n, off), bv(n, off);
    bp.set(p), bm.set(m), bv.set(v), bg.set(g);
    if constexpr (std::is_same_v<std::decay_t<decltype(*bg.p)>, float>)
      cu::adamw(ctx, bp.p, bm.p, bv.p, bg.p, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f,
                step);
    else
      cu::adamw(ctx, bp.p, bm.p, bv.p, reinterpret_cast<const uint16_t *>(bg.p),
                n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, step);
    checkCanary(nm, bp), checkCanary(nm, bm), checkCanary(nm, bv);
    return {bp.vec(), bm.vec(), bv.vec()};
  };
  Outs o = runOrders(nm, [&]() -> Outs {
    BufT<E> bg(n, off);
    return run(bg);
  });
  compare(std::string(nm) + " param", o[0].data(), rp.data(), n, 1e-6);
  compare(std::string(nm) + " m", o[1].data(), rm.data(), n, 1e-6);
  compare(std::string(nm) + " v", o[2].data(), rv.data(), n, 1e-6);
  if constexpr (kIsBF16<E>) {
    Buf wide(n, off);
    Outs f32 = run(wide);
    for (int k = 0; k < 3; ++k)
      compare(std::string(nm) + " against the f32 kernel, output " +
                  std::to_string(k),
              o[k].data(), f32[k].data(), n, 0.0);
  }
}

void testAdamW(int n, int off, int step, unsigned seed) {
  testAdamWOf<float>(n, off, step, seed);
}

// adamwTensors' tensor k: its hyperparameters and gradient type, every
// combination of gradient type, scale and copy somewhere in the list (the
// pointers are the caller's).
static fsdp::rt::AdamWTensor tensorSettings(int k, size_t n) {
  fsdp::rt::AdamWTensor t;
  t.n = int64_t(n);
  t.bf16Grad = k % 3 == 1;
  t.lr = 1e-3f * float(1 + k % 3);
  t.beta1 = k % 5 ? 0.9f : 0.8f;
  t.beta2 = k % 2 ? 0.95f : 0.999f;
  t.eps = 1e-8f;
  t.weightDecay = k % 3 ? 0.1f : 0.0f;
  return t;
}
static bool hasCopy(int k) { return k % 2 == 1; }
static bool hasScale(int k) { return k % 4 == 2; }
static const float kScale = 0.37f;

// The CPU's multi-tensor AdamW on host copies of p, m, v (updated in
// place) from g; returns each tensor's copy widened (empty without one).
static std::vector<std::vector<float>>
cpuAdamWTensors(std::vector<std::vector<float>> &p,
                std::vector<std::vector<float>> &m,
                std::vector<std::vector<float>> &v,
                const std::vector<std::vector<float>> &g, int step) {
  const int count = int(p.size());
  std::vector<std::vector<uint16_t>> gBF16(count), copy(count);
  std::vector<fsdp::rt::AdamWTensor> list;
  for (int k = 0; k < count; ++k) {
    fsdp::rt::AdamWTensor t = tensorSettings(k, p[k].size());
    t.param = p[k].data(), t.m = m[k].data(), t.v = v[k].data();
    for (float x : g[k])
      gBF16[k].push_back(fsdp::rt::roundToBF16(x));
    t.grad = t.bf16Grad ? static_cast<const void *>(gBF16[k].data())
                        : static_cast<const void *>(g[k].data());
    copy[k].assign(hasCopy(k) ? g[k].size() : 0, 0);
    t.copy = hasCopy(k) ? copy[k].data() : nullptr;
    t.gradScale = hasScale(k) ? &kScale : nullptr;
    list.push_back(t);
  }
  cp::adamwTensors(list.data(), list.size(), step);
  std::vector<std::vector<float>> widened(count);
  for (int k = 0; k < count; ++k)
    for (uint16_t bits : copy[k])
      widened[k].push_back(fsdp::rt::widenBF16(bits));
  return widened;
}

// The multi-tensor AdamW (one launch per 24 tensors, a block per 4096
// elements of one) against the CPU's over the same list: 30 tensors, so two
// launches, of sizes across the quads, the blocks and none, misaligned or
// not, f32 and bf16 gradients, with and without a scale and a copy, each
// with its own hyperparameters. The copy is each updated element rounded.
static void testAdamWTensors(int step, unsigned seed) {
  char nm[64];
  snprintf(nm, sizeof nm, "adamwTensors step=%d", step);
  std::mt19937 rng(seed);
  const int sizes[] = {1, 3,     4096 + 5, 7, 0,    1027, 8192, 4,
                       9, 12289, 5,        2, 4096, 31,   100,  4097};
  const int count = 30;
  std::vector<std::vector<float>> p, m, v, g;
  for (int k = 0; k < count; ++k) {
    int n = sizes[k % std::size(sizes)];
    p.push_back(randv(n, rng));
    m.push_back(randv(n, rng, -0.1f, 0.1f));
    v.push_back(randv(n, rng, 0, 0.01f));
    g.push_back(randv(n, rng));
    if (k % 3 == 1)
      roundTo<BF16>(g.back());
  }
  auto rp = p, rm = m, rv = v;
  cpuAdamWTensors(rp, rm, rv, g, step);

  // Outputs: each tensor's param, m, v, and its copy widened (empty where
  // it has none).
  Outs o = runOrders(nm, [&]() -> Outs {
    std::vector<Buf> bp, bm, bv, bg, scale;
    std::vector<BufT<BF16>> bgBF16, bcopy;
    std::vector<fsdp::rt::AdamWTensor> list;
    for (int k = 0; k < count; ++k) {
      const size_t n = p[k].size();
      const int off = k % 3;
      bp.emplace_back(n, off), bm.emplace_back(n, off), bv.emplace_back(n, off);
      bg.emplace_back(n, off), bgBF16.emplace_back(n, off);
      bcopy.emplace_back(hasCopy(k) ? n : 0, off), scale.emplace_back(1, 0);
      bp[k].set(p[k]), bm[k].set(m[k]), bv[k].set(v[k]);
      bg[k].set(g[k]), bgBF16[k].set(g[k]), scale[k].set({kScale});
    }
    for (int k = 0; k < count; ++k) {
      fsdp::rt::AdamWTensor t = tensorSettings(k, p[k].size());
      t.param = bp[k].p, t.m = bm[k].p, t.v = bv[k].p;
      t.grad = t.bf16Grad ? static_cast<const void *>(bgBF16[k].p)
                          : static_cast<const void *>(bg[k].p);
      t.copy = hasCopy(k) ? reinterpret_cast<uint16_t *>(bcopy[k].p) : nullptr;
      t.gradScale = hasScale(k) ? scale[k].p : nullptr;
      list.push_back(t);
    }
    cu::adamwTensors(ctx, list.data(), list.size(), step);
    Outs out;
    for (int k = 0; k < count; ++k) {
      checkCanary(nm, bp[k]), checkCanary(nm, bm[k]), checkCanary(nm, bv[k]);
      checkCanary(nm, bcopy[k]);
      out.push_back(bp[k].vec()), out.push_back(bm[k].vec());
      out.push_back(bv[k].vec()), out.push_back(bcopy[k].vec());
    }
    return out;
  });
  for (int k = 0; k < count; ++k) {
    const std::string at = std::string(nm) + " tensor " + std::to_string(k);
    const size_t n = p[k].size();
    compare(at + " param", o[4 * k].data(), rp[k].data(), n, 1e-6);
    compare(at + " m", o[4 * k + 1].data(), rm[k].data(), n, 1e-6);
    compare(at + " v", o[4 * k + 2].data(), rv[k].data(), n, 1e-6);
    if (!hasCopy(k))
      continue;
    std::vector<float> rounded = o[4 * k];
    roundTo<BF16>(rounded);
    compare(at + " copy (the updated param rounded)", o[4 * k + 3].data(),
            rounded.data(), n, 0.0);
  }
}

// ------------------------------------------------------------ gradient
// clipping AdamW with a device scale (the clipping coefficient) against the
// CPU's.
static void testAdamWScaled(int n, int off, float scale, unsigned seed) {
  char nm[128];
  snprintf(nm, sizeof nm, "adamw scale=%g n=%d off=%d", scale, n, off);
  std::mt19937 rng(seed);
  auto p = randv(n, rng), m = randv(n, rng, -0.1f, 0.1f),
       v = randv(n, rng, 0, 0.01f), g = randv(n, rng);
  auto rp = p, rm = m, rv = v;
  cp::adamw(rp.data(), rm.data(), rv.data(), g.data(), n, 1e-3f, 0.9f, 0.95f,
            1e-8f, 0.1f, 3, &scale);
  Outs o = runOrders(nm, [&]() -> Outs {
    Buf bp(n, off), bm(n, off), bv(n, off), bg(n, off), bs(1, 0, scale);
    bp.set(p), bm.set(m), bv.set(v), bg.set(g);
    cu::adamw(ctx, bp.p, bm.p, bv.p, bg.p, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f,
              3, bs.p);
    checkCanary(nm, bp), checkCanary(nm, bm), checkCanary(nm, bv);
    return {bp.vec(), bm.vec(), bv.vec()};
  });
  compare(std::string(nm) + " param", o[0].data(), rp.data(), n, 1e-6);
  compare(std::string(nm) + " m", o[1].data(), rm.data(), n, 1e-6);
  compare(std::string(nm) + " v", o[2].data(), rv.data(), n, 1e-6);
}

// The sum of squares of an f32 or bf16 shard, with or without an
// accumulator, against the CPU's: both sum in double (the GPU by its fixed
// blocks, the CPU by its parts), so they agree to the f32 rounding of the
// result; every thread and block order gives the same bits.
template <typename E = float>
static void testGradSqSum(int n, int off, bool withAcc, unsigned seed) {
  char nm[128];
  snprintf(nm, sizeof nm, "gradSqSum%s n=%d off=%d acc=%d",
           kIsBF16<E> ? " bf16" : "", n, off, int(withAcc));
  std::mt19937 rng(seed);
  auto g = randv(n, rng, -3.0f, 3.0f);
  roundTo<E>(g);
  float acc = 1.5f, ref = NAN;
  cp::gradSqSum(&ref, g.data(), withAcc ? &acc : nullptr, n);
  Outs o = runOrders(nm, [&]() -> Outs {
    BufT<E> bg(n, off);
    bg.set(g);
    Buf out(1), bacc(1, 0, acc), partials(2 * cu::kGradSqSumBlocks);
    cu::gradSqSum(ctx, out.p, bg.p, withAcc ? bacc.p : nullptr, n, partials.p);
    checkCanary(nm, out), checkCanary(nm, partials);
    return {out.vec()};
  });
  compare(nm, o[0].data(), &ref, 1, 1e-6);
}

// The coefficient bit for bit: below 1, exactly 1, 0 for an infinite sum,
// NaN for a NaN one.
static void testClipCoefficient() {
  for (float sum : {0.0f, 4.0f, 1e6f, INFINITY, NAN})
    for (double maxNorm : {0.5, 2.001, 1e9}) {
      char nm[96];
      snprintf(nm, sizeof nm, "clipCoefficient sum=%g max=%g", sum, maxNorm);
      float ref = -1.0f;
      cp::clipCoefficient(&ref, &sum, maxNorm);
      Outs o = runOrders(nm, [&]() -> Outs {
        Buf in(1, 0, sum), out(1);
        cu::clipCoefficient(ctx, out.p, in.p, maxNorm);
        checkCanary(nm, out);
        return {out.vec()};
      });
      compare(nm, o[0].data(), &ref, 1, 0.0);
    }
}

static void testGradClip() {
  unsigned seed = 7000;
  for (int n : {0, 1, 7, 256, 1000})
    for (int off : {0, 1})
      for (bool acc : {false, true}) {
        testGradSqSum<float>(n, off, acc, seed++);
        testGradSqSum<BF16>(n, off, acc, seed++);
      }
  // More elements than the grid's threads: each strides over several.
  testGradSqSum<float>(65536 + 300, 1, true, seed++);
  testGradSqSum<BF16>(65536 + 300, 0, false, seed++);
  testClipCoefficient();
  for (float scale : {1.0f, 0.25f})
    for (int n : {1, 7, 4096 + 5})
      for (int off : {0, 1})
        testAdamWScaled(n, off, scale, seed++);
}

void groupAdamW(unsigned &seed) {
  for (int n : {1, 3, 4, 7, 1027, 4096 + 5})
    for (int off : {0, 1, 2})
      for (int step : {1, 10}) {
        // The bf16 one's seed off the shared sequence: the groups after
        // this one see the seeds they always had.
        testAdamWOf<BF16>(n, off, step, seed + 1000000);
        testAdamWOf<float>(n, off, step, seed++);
      }
  for (int step : {1, 10})
    testAdamWTensors(step, seed + 2000000 + unsigned(step));
  printf("adamw done (%d failures so far)\n", gFailures);
}

void groupGradClip(unsigned &seed) {
  testGradClip();
  printf("gradclip done (%d failures so far)\n", gFailures);
}
