//===- EmuElementwiseTest.cpp - elementwise kernels and casts -------------===//
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

// ------------------------------------------------------------ elementwise
// Aliasing: add in place (out == a), scale in place.
template <typename E>
static void checkInPlace(const char *nm, const std::vector<float> &a,
                         const std::vector<float> &b, int offA, int offB) {
  const int n = int(a.size());
  std::vector<float> ref(n);
  {
    std::string name = std::string("add in place ") + nm;
    cp::add(ref.data(), a.data(), b.data(), n);
    roundTo<E>(ref);
    Outs o = runOrders(name, [&]() -> Outs {
      BufT<E> ba(n, offA), bb(n, offB);
      ba.set(a), bb.set(b);
      cu::add(ctx, ba.p, ba.p, bb.p, n);
      checkCanary(name, ba);
      return {ba.vec()};
    });
    compare(name, o[0].data(), ref.data(), n, 0);
  }
  {
    std::string name = std::string("scale ") + nm;
    for (int i = 0; i < n; ++i)
      ref[i] = roundTo<E>(a[i] * 0.37f);
    Outs o = runOrders(name, [&]() -> Outs {
      BufT<E> ba(n, offA);
      ba.set(a);
      cu::scale(ctx, ba.p, n, 0.37f);
      checkCanary(name, ba);
      return {ba.vec()};
    });
    compare(name, o[0].data(), ref.data(), n, 0);
  }
}

template <typename E>
void testElementwise(int n, int offO, int offA, int offB, unsigned seed) {
  char nm[128];
  snprintf(nm, sizeof nm, "%sn=%d off=%d/%d/%d", kIsBF16<E> ? "bf16 " : "", n,
           offO, offA, offB);
  std::mt19937 rng(seed);
  auto a = randv(n, rng, -4, 4), b = randv(n, rng, -4, 4);
  if (n > 2)
    a[1] = NAN; // NaN passes through relu as on the CPU
  roundTo<E>(a), roundTo<E>(b);
  std::vector<float> ref(n);
  using CpuFn = std::function<void(float *, const float *, const float *)>;
  using GpuFn = std::function<void(E *, const E *, const E *)>;
  struct Op {
    const char *name;
    CpuFn cpu;
    GpuFn gpu;
    double tol, ulps; // the f32 tolerance; bf16 units beyond it
  };
  std::vector<Op> ops = {
      {"add",
       [&](float *o, const float *x, const float *y) { cp::add(o, x, y, n); },
       [&](E *o, const E *x, const E *y) { cu::add(ctx, o, x, y, n); }, 0, 0},
      {"geluF",
       [&](float *o, const float *x, const float *) {
         cp::geluForward(o, x, n);
       },
       [&](E *o, const E *x, const E *) { cu::geluForward(ctx, o, x, n); },
       3e-6, 1},
      {"geluB",
       [&](float *o, const float *x, const float *y) {
         cp::geluBackward(o, x, y, n);
       },
       [&](E *o, const E *x, const E *y) { cu::geluBackward(ctx, o, x, y, n); },
       3e-6, 1},
      {"reluF",
       [&](float *o, const float *x, const float *) {
         cp::reluForward(o, x, n);
       },
       [&](E *o, const E *x, const E *) { cu::reluForward(ctx, o, x, n); }, 0,
       0},
      {"reluB",
       [&](float *o, const float *x, const float *y) {
         cp::reluBackward(o, x, y, n);
       },
       [&](E *o, const E *x, const E *y) { cu::reluBackward(ctx, o, x, y, n); },
       0, 0},
      {"fill",
       [&](float *o, const float *, const float *) { cp::fill(o, n, 2.5f); },
       [&](E *o, const E *, const E *) { cu::fill(ctx, o, n, 2.5f); }, 0, 0},
  };
  for (auto &op : ops) {
    std::string name = std::string(op.name) + " " + nm;
    op.cpu(ref.data(), a.data(), b.data());
    roundTo<E>(ref);
    Outs o = runOrders(name, [&]() -> Outs {
      BufT<E> out(n, offO), ba(n, offA), bb(n, offB);
      ba.set(a), bb.set(b);
      op.gpu(out.p, ba.p, bb.p);
      checkCanary(name, out);
      return {out.vec()};
    });
    compare(name, o[0].data(), ref.data(), n, tol<E>(op.tol, op.ulps), 1.0);
  }
  checkInPlace<E>(nm, a, b, offA, offB);
}

// ------------------------------------------------------------ casts
// The bits of a float.
static float fromBits(uint32_t w) {
  float f;
  memcpy(&f, &w, 4);
  return f;
}

// Floats where rounding to bf16 can go wrong: ties to even (both ways), one
// unit either side of a tie, NaNs (quiet, signalling, negative, payloads
// that the 16 kept bits lose), infinities, the overflow of the largest
// finite bf16 to infinity, subnormals and their ties, zeros, then random
// words.
static std::vector<float> roundingCases(int random, unsigned seed) {
  std::vector<uint32_t> w = {
      0x3F808000u, 0x3F818000u, 0x3F808001u, 0x3F807FFFu, 0xBF808000u,
      0xBF818000u, 0x4B7F8000u, 0x3F7FFFFFu, 0x7FC00000u, 0xFFC00000u,
      0x7F800001u, 0x7F810000u, 0xFF800001u, 0x7FFFFFFFu, 0x7FA12345u,
      0x7F800000u, 0xFF800000u, 0x7F7FFFFFu, 0x7F7F7FFFu, 0x7F7F8000u,
      0x7F7F8001u, 0xFF7F8000u, 0x7F7E8000u, 0x00000001u, 0x00008000u,
      0x00018000u, 0x00007FFFu, 0x00008001u, 0x807FFFFFu, 0x007F8000u,
      0x00800000u, 0x80008000u, 0x00000000u, 0x80000000u, 0x3F800000u};
  std::mt19937 rng(seed);
  for (int i = 0; i < random; ++i)
    w.push_back(uint32_t(rng()));
  std::vector<float> out;
  for (uint32_t x : w)
    out.push_back(fromBits(x));
  return out;
}

// __float2bfloat16_rn (NVIDIA's host code where the toolkit is installed,
// emu_nvbf16.cpp) against the CPU backend's roundToBF16, bit for bit on
// every number; NaN to NaN (CUDA's is the canonical 0x7FFF, the CPU keeps
// sign and payload: the kernels store the CPU's, testCast checks that).
static void testRounding() {
  const std::vector<float> cases = roundingCases(200000, 99);
  int bad = 0, nans = 0;
  ++gChecks;
  for (float x : cases) {
    const uint16_t nv = __float2bfloat16_rn(x).__x;
    const uint16_t cpu = fsdp::rt::roundToBF16(x);
    const bool ok = std::isnan(x) ? (std::isnan(fsdp::rt::widenBF16(nv)) &&
                                     std::isnan(fsdp::rt::widenBF16(cpu)))
                                  : nv == cpu;
    nans += std::isnan(x);
    if (!ok && bad++ < 10) {
      char buf[160];
      uint32_t w;
      memcpy(&w, &x, 4);
      snprintf(buf, sizeof buf,
               "rounding: %08x: __float2bfloat16_rn %04x, roundToBF16 %04x", w,
               nv, cpu);
      fail(buf);
    }
  }
  if (bad > 10)
    fail("rounding: " + std::to_string(bad) + " mismatches in all");
  printf("rounding: __float2bfloat16_rn from %s: %zu cases (%d NaN), %d "
         "mismatches\n",
         emu::kNvBF16Source, cases.size(), nans, bad);
}

// The cast kernel both ways, aligned and not: f32 -> bf16 bit for bit
// roundToBF16 (NaN included), bf16 -> f32 exact.
static void testCast(int off) {
  const std::vector<float> cases = roundingCases(4000, 7 + off);
  const size_t n = cases.size();
  const std::string nm = "cast off=" + std::to_string(off);
  Outs o = runOrders(nm + " f32->bf16", [&]() -> Outs {
    Buf in(n, off);
    BufT<BF16> out(n, off);
    in.set(cases);
    cu::cast(ctx, out.p, in.p, int64_t(n));
    checkCanary(nm, out);
    std::vector<float> bits(n);
    for (size_t i = 0; i < n; ++i)
      bits[i] = float(out.p[i].__x);
    return {bits};
  });
  ++gChecks;
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i)
    bad += uint16_t(o[0][i]) != fsdp::rt::roundToBF16(cases[i]);
  if (bad)
    fail(nm + " f32->bf16: " + std::to_string(bad) +
         " results differ from roundToBF16's bits");
  std::vector<float> wide(n);
  for (size_t i = 0; i < n; ++i)
    wide[i] = fsdp::rt::widenBF16(fsdp::rt::roundToBF16(cases[i]));
  o = runOrders(nm + " bf16->f32", [&]() -> Outs {
    BufT<BF16> in(n, off);
    Buf out(n, off);
    in.set(wide);
    cu::cast(ctx, out.p, in.p, int64_t(n));
    checkCanary(nm, out);
    return {out.vec()};
  });
  ++gChecks;
  if (memcmp(o[0].data(), wide.data(), 4 * n) != 0)
    fail(nm + " bf16->f32: not the exact widening");
}

void groupElementwise(unsigned &seed) {
  for (int n : {1, 3, 4, 5, 8, 257, 1023, 1025, 4099})
    for (auto offs : std::vector<std::vector<int>>{
             {0, 0, 0}, {1, 1, 1}, {0, 1, 0}, {0, 0, 2}, {3, 0, 0}})
      testElementwise(n, offs[0], offs[1], offs[2], seed++);
  printf("elementwise done (%d failures so far)\n", gFailures);
}

void groupRounding(unsigned &seed) {
  testRounding();
  for (int off : {0, 1, 2, 3})
    testCast(off);
  printf("rounding done (%d failures so far)\n", gFailures);
}

// The element types the other files call these with.
template void testElementwise<float>(int, int, int, int, unsigned);
template void testElementwise<BF16>(int, int, int, int, unsigned);
