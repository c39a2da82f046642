//===- CudaEmulationTest.cpp - the CUDA kernels, run on the CPU -----------===//
//
// The CUDA kernels' own source (runtime/src/cuda/kernels/*.cu, turned into
// C++ by preprocess.py) executed under emu.h's emulation of the device:
// every CUDA thread a fiber, __syncthreads and warp shuffles real barriers,
// shared memory poisoned with NaN before each block, a naive column-major
// cuBLAS. Each kernel is compared with the CPU reference kernel on small
// and edge shapes (odd C, misaligned views, T across the causal blocks,
// V above the block size, N = 0 and 1): outputs pre-filled with NaN and
// guarded by canaries, causal zeros exact, and every check run three times
// with the threads and blocks in forward, reversed and shuffled order,
// which must agree bit for bit (races show up there). This is how CI,
// which has no GPU, runs the kernels; the parity test on a real GPU
// (CudaKernelsTest.cpp) covers what an emulation cannot: memory ordering,
// fused multiply-adds, the hardware's transcendental functions, speed.
//
// Every templated kernel runs in bf16 too (group bf16), against the CPU's
// fp32 kernel on the same inputs with its results rounded to bf16 (what the
// CPU backend computes for a bf16 kernel), tolerances in bf16 units; the
// rounding group checks CUDA's __float2bfloat16_rn and the cast kernel
// against the CPU's roundToBF16, bit for bit.
//
// Usage: fsdp-cuda-emulation-test [GROUP] (adamw, attention, bf16, bias,
// blocked, ce, edge, elementwise, embedding, fuzz, gradclip (sums of
// squares in f32 and bf16, the coefficient, AdamW's scale), layernorm, linear,
// llama (rms_norm, swiglu, rope in f32 and bf16), probe, rounding); env
// PAD=0 removes the canary padding (for sanitizer builds).
// Prints one line per failure and "N checks, M failures"; exits non-zero
// on any failure.
//
//===----------------------------------------------------------------------===//
#include "Kernels.h" // the kernels header, copied by preprocess.py
#include "cpu/Blas.h"
#include "cpu/Kernels.h"
#include "fsdp/runtime/support/BFloat16.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace emu {
extern int gThreadOrder, gBlockOrder, gProblems;
extern bool gQuiet;
} // namespace emu

namespace cu = fsdp::rt::cuda;
namespace cp = fsdp::rt::cpu;

static int gPad = 16;
static int gFailures = 0, gChecks = 0;
static std::unique_ptr<cp::Blas> gBlas;
static cu::Context ctx{nullptr, nullptr};
static double gWorst = 0; // worst normwise error of a passing check
static std::string gWorstName;

// The element types' storage: float, or bf16 bits (rounded as the CPU
// backend rounds, fsdp::rt::roundToBF16).
template <typename E> struct Elem;
template <> struct Elem<float> {
  using Bits = uint32_t;
  static constexpr Bits kCanary = 0x7fc0deadu;
  static constexpr const char *kName = "f32";
  static float make(float x) { return x; }
  static float widen(float x) { return x; }
};
template <> struct Elem<__nv_bfloat16> {
  using Bits = uint16_t;
  static constexpr Bits kCanary = 0xdeadu;
  static constexpr const char *kName = "bf16";
  static __nv_bfloat16 make(float x) { return {fsdp::rt::roundToBF16(x)}; }
  static float widen(__nv_bfloat16 x) { return fsdp::rt::widenBF16(x.__x); }
};
using BF16 = __nv_bfloat16;
template <typename E> constexpr bool kIsBF16 = std::is_same<E, BF16>::value;

// What the CPU backend stores for an E result of a kernel it ran in f32:
// the value rounded to E. Also puts inputs on E's grid.
template <typename E> static void roundTo(std::vector<float> &v) {
  for (float &x : v)
    x = Elem<E>::widen(Elem<E>::make(x));
}
template <typename E> static float roundTo(float x) {
  return Elem<E>::widen(Elem<E>::make(x));
}

// A check's tolerance: its fp32 one, plus `ulps` units in the last place of
// a bf16 at the largest reference value (2^-7 of it) for bf16.
template <typename E> static double tol(double f32, double ulps) {
  return kIsBF16<E> ? f32 + ulps / 128.0 : f32;
}

// A device buffer: n elements at `off` elements past a 16-byte boundary,
// with canaries around it (gPad elements each side plus the `off` gap).
template <typename E> struct BufT {
  using Bits = typename Elem<E>::Bits;
  E *base = nullptr, *p = nullptr;
  size_t n = 0, total = 0;
  int off = 0;
  BufT() = default;
  BufT(size_t n_, int off_ = 0, float fill = NAN) : n(n_), off(off_) {
    total = gPad + off + n + gPad;
    base = static_cast<E *>(malloc(sizeof(E) * (total ? total : 1)));
    for (size_t i = 0; i < total; ++i)
      memcpy(base + i, &Elem<E>::kCanary, sizeof(E));
    p = base + gPad + off;
    for (size_t i = 0; i < n; ++i)
      p[i] = Elem<E>::make(fill);
  }
  BufT(const BufT &) = delete;
  BufT &operator=(const BufT &) = delete;
  BufT(BufT &&o) noexcept { *this = std::move(o); }
  BufT &operator=(BufT &&o) noexcept {
    std::swap(base, o.base);
    std::swap(p, o.p);
    std::swap(n, o.n);
    std::swap(total, o.total);
    std::swap(off, o.off);
    return *this;
  }
  ~BufT() { free(base); }
  bool canaryOk() const {
    for (size_t i = 0; i < total; ++i) {
      if (base + i >= p && base + i < p + n)
        continue;
      Bits b;
      memcpy(&b, base + i, sizeof(E));
      if (b != Elem<E>::kCanary)
        return false;
    }
    return true;
  }
  /// The elements, widened to float.
  std::vector<float> vec() const {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i)
      v[i] = Elem<E>::widen(p[i]);
    return v;
  }
  /// Stores v (rounded to E: exact for values on E's grid).
  void set(const std::vector<float> &v) {
    for (size_t i = 0; i < n; ++i)
      p[i] = Elem<E>::make(v[i]);
  }
};
using Buf = BufT<float>;

static std::vector<float> randv(size_t n, std::mt19937 &rng, float lo = -1,
                                float hi = 1) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto &x : v)
    x = d(rng);
  return v;
}

static void fail(const std::string &what) {
  ++gFailures;
  printf("FAIL %s\n", what.c_str());
}

// Compares got against ref; tol is normwise (max |g - r| / max |r|).
static double compare(const std::string &name, const float *got,
                      const float *ref, size_t n, double tol,
                      double floor = 0) {
  ++gChecks;
  double refMax = 0, maxAbs = 0, maxRel = 0;
  size_t bad = 0, worstI = 0;
  for (size_t i = 0; i < n; ++i)
    if (std::isfinite(ref[i]))
      refMax = std::max(refMax, (double)std::fabs(ref[i]));
  for (size_t i = 0; i < n; ++i) {
    const bool gn = std::isnan(got[i]), rn = std::isnan(ref[i]);
    if (gn || rn) {
      if (gn != rn)
        ++bad, worstI = i;
      continue;
    }
    const double d = std::fabs((double)got[i] - ref[i]);
    if (d > maxAbs)
      maxAbs = d, worstI = i;
    if (std::fabs(ref[i]) > 1e-3 * refMax && std::fabs(ref[i]) > 0)
      maxRel = std::max(maxRel, d / std::fabs(ref[i]));
  }
  const double scaleRef = std::max(refMax, floor);
  const double norm = scaleRef > 0 ? maxAbs / scaleRef : maxAbs;
  if (bad || !(norm <= tol)) {
    char buf[512];
    snprintf(buf, sizeof buf,
             "%s: normwise err %.3g (tol %.1g), max rel %.3g, %zu NaN "
             "mismatches; at [%zu] got %.9g ref %.9g",
             name.c_str(), norm, tol, maxRel, bad, worstI, got[worstI],
             ref[worstI]);
    fail(buf);
  } else if (getenv("VERBOSE")) {
    printf("ok   %s: normwise %.3g, max rel %.3g\n", name.c_str(), norm,
           maxRel);
  }
  if (!bad && norm <= tol && norm > gWorst)
    gWorst = norm, gWorstName = name;
  return norm;
}

template <typename E>
static void checkCanary(const std::string &name, const BufT<E> &b) {
  if (!b.canaryOk())
    fail(name + ": write outside the buffer (canary overwritten)");
}

static void checkErrors(const std::string &name) {
  std::string msg;
  if (cu::takeError(msg))
    fail(name + ": recorded CUDA error: " + msg);
}

// Runs `gpu` (returning its outputs) under several schedules; the outputs
// must be bitwise equal (the kernels claim determinism; a difference means
// a race or an order dependence). Returns the forward-order outputs.
using Outs = std::vector<std::vector<float>>;
static Outs runOrders(const std::string &name,
                      const std::function<Outs()> &gpu) {
  const int before = emu::gProblems;
  emu::gThreadOrder = 0, emu::gBlockOrder = 0;
  Outs base = gpu();
  checkErrors(name);
  static const int orders[][2] = {{1, 1}, {2, 2}};
  for (auto &o : orders) {
    emu::gThreadOrder = o[0], emu::gBlockOrder = o[1];
    Outs other = gpu();
    checkErrors(name);
    for (size_t k = 0; k < base.size(); ++k)
      if (memcmp(base[k].data(), other[k].data(), 4 * base[k].size()) != 0) {
        fail(name + ": output " + std::to_string(k) +
             " differs between thread/block schedules (" +
             std::to_string(o[0]) + "," + std::to_string(o[1]) + ")");
        break;
      }
  }
  emu::gThreadOrder = 0, emu::gBlockOrder = 0;
  if (emu::gProblems != before)
    fail(name + ": emulator reported device problems (see [emu] lines)");
  return base;
}

// ------------------------------------------------------------ embedding
template <typename E = float>
static void testEmbedding(int B, int T, int C, int V, int Tmax, int offOut,
                          int offW, unsigned seed) {
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
template <typename E = float>
static void testLayerNorm(int N, int C, int off, unsigned seed) {
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

template <typename E = float>
static void testBiasGrad(int N, int OC, int off, unsigned seed) {
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

// ------------------------------------------------------------ elementwise
template <typename E = float>
static void testElementwise(int n, int offO, int offA, int offB,
                            unsigned seed) {
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
  // aliasing: add in place (out == a), scale in place
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

// ------------------------------------------------------------ adamw
static void testAdamW(int n, int off, int step, unsigned seed) {
  char nm[128];
  snprintf(nm, sizeof nm, "adamw n=%d off=%d step=%d", n, off, step);
  std::mt19937 rng(seed);
  auto p = randv(n, rng), m = randv(n, rng, -0.1f, 0.1f),
       v = randv(n, rng, 0, 0.01f), g = randv(n, rng);
  auto rp = p, rm = m, rv = v;
  cp::adamw(rp.data(), rm.data(), rv.data(), g.data(), n, 1e-3f, 0.9f, 0.95f,
            1e-8f, 0.1f, step);
  Outs o = runOrders(nm, [&]() -> Outs {
    Buf bp(n, off), bm(n, off), bv(n, off), bg(n, off);
    bp.set(p), bm.set(m), bv.set(v), bg.set(g);
    cu::adamw(ctx, bp.p, bm.p, bv.p, bg.p, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f,
              step);
    checkCanary(nm, bp), checkCanary(nm, bm), checkCanary(nm, bv);
    return {bp.vec(), bm.vec(), bv.vec()};
  });
  compare(std::string(nm) + " param", o[0].data(), rp.data(), n, 1e-6);
  compare(std::string(nm) + " m", o[1].data(), rm.data(), n, 1e-6);
  compare(std::string(nm) + " v", o[2].data(), rv.data(), n, 1e-6);
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

// ------------------------------------------------------------ cross entropy
template <typename E = float>
static void testCrossEntropy(int N, int V, float spread, unsigned seed) {
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

// ------------------------------------------------------------ attention
// " KV=n" in a test's name when there are fewer kv heads than heads.
static std::string kvName(int NH, int KV) {
  return KV == NH ? std::string() : " KV=" + std::to_string(KV);
}

// In bf16 the GPU rounds the scores (and dP) where cuBLAS stores them in
// the T x T buffers before the softmax reads them, which the CPU's widened
// kernel does not: a few bf16 units apart (kAttentionUlps).
constexpr double kAttentionUlps = 2;
// KV kv heads (0: NH); with fewer, qkv is C + 2 KV hs wide. (The grouped
// cases take seeds of their own: the others' stay as they were.)
template <typename E = float>
static void testAttention(int B, int T, int C, int NH, unsigned seed,
                          int KV = 0) {
  KV = KV ? KV : NH;
  char nm[128];
  snprintf(nm, sizeof nm, "attention%s B=%d T=%d C=%d NH=%d%s",
           kIsBF16<E> ? " bf16" : "", B, T, C, NH, kvName(NH, KV).c_str());
  std::mt19937 rng(seed);
  auto qkv = randv(size_t(B) * T * (C + 2 * KV * (C / NH)), rng, -2, 2),
       dout = randv(size_t(B) * T * C, rng);
  roundTo<E>(qkv), roundTo<E>(dout);
  const size_t PT = size_t(B) * NH * T * T;
  std::vector<float> rout(size_t(B) * T * C), rprobs(PT, NAN);
  cp::attentionForward(*gBlas, rout.data(), rprobs.data(), qkv.data(), B, T, C,
                       NH, KV);
  roundTo<E>(rout), roundTo<E>(rprobs);
  std::vector<float> rdqkv(qkv.size()), rscr(PT, NAN);
  cp::attentionBackward(*gBlas, rdqkv.data(), rscr.data(), dout.data(),
                        qkv.data(), rprobs.data(), B, T, C, NH, KV);
  roundTo<E>(rdqkv), roundTo<E>(rscr);
  Outs o = runOrders(std::string(nm) + " fwd", [&]() -> Outs {
    BufT<E> out(rout.size()), probs(PT), bq(qkv.size());
    bq.set(qkv);
    cu::attentionForward(ctx, out.p, probs.p, bq.p, B, T, C, NH, KV);
    checkCanary(nm, out), checkCanary(nm, probs);
    return {out.vec(), probs.vec()};
  });
  compare(std::string(nm) + " out", o[0].data(), rout.data(), rout.size(),
          tol<E>(2e-5, kAttentionUlps));
  compare(std::string(nm) + " probs", o[1].data(), rprobs.data(), PT,
          tol<E>(2e-5, kAttentionUlps));
  size_t nz = 0;
  for (size_t r = 0; r < size_t(B) * NH * T; ++r)
    for (int j = r % T + 1; j < T; ++j)
      if (o[1][r * T + j] != 0.0f)
        ++nz;
  if (nz)
    fail(std::string(nm) + ": nonzero probs above the diagonal");
  // backward from the GPU's probs (as the runtime would)
  auto gprobs = o[1];
  o = runOrders(std::string(nm) + " bwd", [&]() -> Outs {
    BufT<E> dq(qkv.size()), scr(PT), bq(qkv.size()), bd(dout.size()), bp(PT);
    bq.set(qkv), bd.set(dout), bp.set(gprobs);
    cu::attentionBackward(ctx, dq.p, scr.p, bd.p, bq.p, bp.p, B, T, C, NH, KV);
    checkCanary(nm, dq), checkCanary(nm, scr);
    return {dq.vec(), scr.vec()};
  });
  compare(std::string(nm) + " dqkv", o[0].data(), rdqkv.data(), rdqkv.size(),
          tol<E>(5e-5, kAttentionUlps));
  // dS: compare where the CPU wrote it (j < blockEnd(i)); zero above diag.
  std::vector<float> gs = o[1], rs = rscr;
  for (size_t r = 0; r < size_t(B) * NH * T; ++r) {
    const int i = r % T;
    const int be = std::min(T, (i / 256 + 1) * 256);
    for (int j = 0; j < T; ++j)
      if (j >= be)
        gs[r * T + j] = rs[r * T + j] = 0;
  }
  compare(std::string(nm) + " dS", gs.data(), rs.data(), PT,
          tol<E>(5e-5, kAttentionUlps));
  size_t nz2 = 0;
  for (size_t r = 0; r < size_t(B) * NH * T; ++r)
    for (int j = r % T + 1; j < T; ++j)
      if (o[1][r * T + j] != 0.0f)
        ++nz2;
  if (nz2)
    fail(std::string(nm) + ": nonzero dS above the diagonal");
}

// ------------------------------------------------------------ blocked
// The memory-efficient attention (BlockedAttention.cu) against the CPU's
// blocked kernels (out, lse, dqkv) and the materialized ones (out, dqkv):
// T across the tiles (32 rows, 16 above hs = 64), head sizes in each of
// the compiled buckets (32, 64, 128) and at their edges.
// In bf16 the backward reads the rounded out (a bf16 buffer in the plan),
// so its references do too; the materialized reference keeps its probs in
// float (no T x T buffer here), a few bf16 units from the blocked kernels.
// KV kv heads (0: NH), as testAttention.
template <typename E = float>
static void testBlocked(int B, int T, int C, int NH, unsigned seed,
                        int KV = 0) {
  KV = KV ? KV : NH;
  char nm[128];
  snprintf(nm, sizeof nm, "blocked%s B=%d T=%d C=%d NH=%d%s",
           kIsBF16<E> ? " bf16" : "", B, T, C, NH, kvName(NH, KV).c_str());
  std::mt19937 rng(seed);
  auto qkv = randv(size_t(B) * T * (C + 2 * KV * (C / NH)), rng, -2, 2),
       dout = randv(size_t(B) * T * C, rng);
  roundTo<E>(qkv), roundTo<E>(dout);
  const size_t PT = size_t(B) * NH * T * T, L = size_t(B) * NH * T;
  std::vector<float> rout(size_t(B) * T * C), rlse(L), rdqkv(qkv.size());
  cp::blockedAttentionForward(*gBlas, rout.data(), rlse.data(), qkv.data(), B,
                              T, C, NH, KV);
  roundTo<E>(rout);
  cp::blockedAttentionBackward(*gBlas, rdqkv.data(), dout.data(), qkv.data(),
                               rout.data(), rlse.data(), B, T, C, NH, KV);
  roundTo<E>(rdqkv);
  std::vector<float> mout(rout.size()), mprobs(PT), mdqkv(qkv.size()), mscr(PT);
  cp::attentionForward(*gBlas, mout.data(), mprobs.data(), qkv.data(), B, T, C,
                       NH, KV);
  cp::attentionBackward(*gBlas, mdqkv.data(), mscr.data(), dout.data(),
                        qkv.data(), mprobs.data(), B, T, C, NH, KV);
  roundTo<E>(mout), roundTo<E>(mdqkv);
  Outs o = runOrders(std::string(nm) + " fwd", [&]() -> Outs {
    BufT<E> out(rout.size()), bq(qkv.size());
    Buf lse(L);
    bq.set(qkv);
    cu::blockedAttentionForward(ctx, out.p, lse.p, bq.p, B, T, C, NH, KV);
    checkCanary(nm, out), checkCanary(nm, lse);
    return {out.vec(), lse.vec()};
  });
  const std::string n = nm;
  compare(n + " out", o[0].data(), rout.data(), rout.size(), tol<E>(2e-5, 1));
  compare(n + " out vs materialized", o[0].data(), mout.data(), mout.size(),
          tol<E>(2e-5, 1));
  compare(n + " lse", o[1].data(), rlse.data(), L, 2e-6);
  // backward from the GPU's out and lse (as the runtime would)
  auto gout = o[0], glse = o[1];
  o = runOrders(n + " bwd", [&]() -> Outs {
    BufT<E> dq(qkv.size()), bq(qkv.size()), bd(dout.size()), bo(gout.size());
    Buf bl(L);
    bq.set(qkv), bd.set(dout), bo.set(gout), bl.set(glse);
    cu::blockedAttentionBackward(ctx, dq.p, bd.p, bq.p, bo.p, bl.p, B, T, C, NH,
                                 KV);
    checkCanary(nm, dq);
    return {dq.vec()};
  });
  compare(n + " dqkv", o[0].data(), rdqkv.data(), rdqkv.size(),
          tol<E>(5e-5, 1));
  compare(n + " dqkv vs materialized", o[0].data(), mdqkv.data(), mdqkv.size(),
          tol<E>(5e-5, kAttentionUlps));
}

// Shapes the blocked kernels refuse: recorded as errors, nothing written.
static void testBlockedErrors(int C, int NH) {
  const std::string nm =
      "blocked error C=" + std::to_string(C) + " NH=" + std::to_string(NH);
  const int B = 1, T = 3;
  Buf out(size_t(T) * C), lse(size_t(NH) * T), q(size_t(T) * 3 * C, 0, 0.0f);
  Buf dq(size_t(T) * 3 * C);
  std::string msg;
  for (int pass = 0; pass < 2; ++pass) {
    ++gChecks;
    if (pass == 0)
      cu::blockedAttentionForward(ctx, out.p, lse.p, q.p, B, T, C, NH, NH);
    else
      cu::blockedAttentionBackward(ctx, dq.p, out.p, q.p, out.p, lse.p, B, T, C,
                                   NH, NH);
    if (!cu::takeError(msg))
      fail(nm + ": no error recorded");
    else if (getenv("VERBOSE"))
      printf("ok   %s: %s\n", nm.c_str(), msg.c_str());
  }
  for (size_t i = 0; i < dq.n; ++i)
    if (!std::isnan(dq.p[i]) || (i < out.n && !std::isnan(out.p[i]))) {
      fail(nm + ": output written");
      break;
    }
}

// ------------------------------------------------------------ linear (bias
// broadcast kernel + fake cuBLAS)
template <typename E = float>
static void testLinear(int N, int IC, int OC, bool bias, unsigned seed) {
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

// Every templated kernel in bf16 against the CPU's fp32 kernel on the same
// (bf16) inputs, its results rounded as the CPU backend rounds them: the
// shapes of the fp32 groups that reach each path (vector and scalar,
// causal blocks, tiles and head-size buckets, V above the block size).
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
                     unsigned seed) {
  char nm[160];
  snprintf(nm, sizeof nm, "rope%s B=%d T=%d H=%d KV=%d hs=%d theta=%g off=%d",
           kIsBF16<E> ? " bf16" : "", B, T, H, KV, hs, theta, off);
  const size_t n = size_t(B) * T * (H + 2 * KV) * hs;
  std::mt19937 rng(seed);
  auto x = randv(n, rng, -2, 2);
  roundTo<E>(x);
  std::vector<float> rf(n), rb(n);
  cp::ropeForward(rf.data(), x.data(), B, T, H, KV, hs, theta);
  cp::ropeBackward(rb.data(), x.data(), B, T, H, KV, hs, theta);
  roundTo<E>(rf), roundTo<E>(rb);
  Outs o = runOrders(nm, [&]() -> Outs {
    BufT<E> f(n, off), b(n, off), bx(n, off);
    bx.set(x);
    cu::ropeForward(ctx, f.p, bx.p, B, T, H, KV, hs, theta);
    cu::ropeBackward(ctx, b.p, bx.p, B, T, H, KV, hs, theta);
    checkCanary(nm, f), checkCanary(nm, b);
    return {f.vec(), b.vec()};
  });
  // powf, cosf and sinf of the host's libm on both sides here; on a GPU
  // they differ by an ulp or two (CudaKernelsTest.cpp).
  compare(std::string(nm) + " fwd", o[0].data(), rf.data(), n, tol<E>(2e-6, 1));
  compare(std::string(nm) + " bwd", o[1].data(), rb.data(), n, tol<E>(2e-6, 1));
}

static void testLlama() {
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
  // bf16: loaded bf16, computed in float, rounded once.
  for (int N : {1, 33})
    for (int C : {4, 33, 768})
      testRmsNorm<BF16>(N, C, N % 2, seed++);
  for (int n : {5, 1025})
    testSwiGlu<BF16>(n, n % 2, seed++);
  testRope<BF16>(2, 5, 2, 2, 8, 10000.0f, 0, seed++);
  testRope<BF16>(1, 300, 4, 2, 16, 500000.0f, 1, seed++);
  printf("llama done (%d failures so far)\n", gFailures);
}

static void testBF16() {
  unsigned seed = 50001;
  for (int n : {1, 5, 8, 1025, 4099})
    for (auto offs : std::vector<std::vector<int>>{
             {0, 0, 0}, {1, 1, 1}, {0, 0, 2}, {3, 0, 0}})
      testElementwise<BF16>(n, offs[0], offs[1], offs[2], seed++);
  testEmbedding<BF16>(2, 3, 8, 5, 3, 0, 0, seed++);
  testEmbedding<BF16>(1, 1, 4, 2, 5, 1, 0, seed++);
  testEmbedding<BF16>(3, 33, 260, 50, 40, 0, 1, seed++);
  testEmbedding<BF16>(4, 70, 33, 2, 70, 0, 0, seed++);
  for (int N : {1, 9, 70})
    for (int C : {1, 4, 33, 768})
      testLayerNorm<BF16>(N, C, N % 2, seed++);
  testLayerNorm<BF16>(3, 4100, 0, seed++);
  for (int N : {0, 5, 200})
    for (int OC : {1, 8, 9})
      testBiasGrad<BF16>(N, OC, OC % 2, seed++);
  testBiasGrad<BF16>(2, 8193, 1, seed++);
  for (int N : {1, 33})
    for (int V : {1, 5, 100, 1100})
      testCrossEntropy<BF16>(N, V, 5.0f, seed++);
  testCrossEntropy<BF16>(5, 2000, 60.0f, seed++);
  testAttention<BF16>(1, 1, 4, 1, seed++);
  testAttention<BF16>(2, 33, 12, 3, seed++);
  testAttention<BF16>(1, 300, 8, 1, seed++);
  testAttention<BF16>(2, 33, 16, 4, 901u, /*KV=*/2);
  testAttention<BF16>(1, 300, 12, 3, 902u, /*KV=*/1);
  testBlocked<BF16>(1, 1, 4, 1, seed++);
  testBlocked<BF16>(2, 70, 36, 3, seed++);
  testBlocked<BF16>(1, 130, 64, 1, seed++);
  testBlocked<BF16>(1, 65, 256, 2, seed++);
  testBlocked<BF16>(2, 33, 66, 2, seed++);
  testBlocked<BF16>(2, 70, 48, 4, 903u, /*KV=*/2);
  testBlocked<BF16>(1, 65, 256, 4, 904u, /*KV=*/1);
  testLinear<BF16>(1, 3, 5, true, seed++);
  testLinear<BF16>(7, 9, 300, true, seed++);
  testLinear<BF16>(70, 16, 33, true, seed++);
  testLinear<BF16>(5, 4, 8, false, seed++);
  testLinear<BF16>(0, 3, 5, true, seed++);
  printf("bf16 done (%d failures so far)\n", gFailures);
}

int main(int argc, char **argv) {
  if (const char *p = getenv("PAD"))
    gPad = atoi(p);
  std::string err;
  gBlas = cp::Blas::open("openblas", 1, err);
  if (!gBlas) {
    fprintf(stderr, "no BLAS: %s\n", err.c_str());
    return 2;
  }
  const std::string only = argc > 1 ? argv[1] : "";
  auto want = [&](const char *k) { return only.empty() || only == k; };
  unsigned seed = 1;

  if (want("elementwise")) {
    for (int n : {1, 3, 4, 5, 8, 257, 1023, 1025, 4099})
      for (auto offs : std::vector<std::vector<int>>{
               {0, 0, 0}, {1, 1, 1}, {0, 1, 0}, {0, 0, 2}, {3, 0, 0}})
        testElementwise(n, offs[0], offs[1], offs[2], seed++);
    printf("elementwise done (%d failures so far)\n", gFailures);
  }
  if (want("adamw")) {
    for (int n : {1, 3, 4, 7, 1027, 4096 + 5})
      for (int off : {0, 1, 2})
        for (int step : {1, 10})
          testAdamW(n, off, step, seed++);
    printf("adamw done (%d failures so far)\n", gFailures);
  }
  if (want("embedding")) {
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
  if (want("layernorm")) {
    for (int N : {1, 7, 9, 33, 70})
      for (int C : {1, 3, 4, 32, 33, 100, 768})
        testLayerNorm(N, C, N % 2, seed++);
    testLayerNorm(3, 4100, 0, seed++); // column width 16
    testLayerNorm(2, 8200, 1, seed++); // column width 32
    testLayerNorm(130, 20, 0, seed++); // N > groups
    printf("layernorm done (%d failures so far)\n", gFailures);
  }
  if (want("bias")) {
    for (int N : {0, 1, 5, 65, 200})
      for (int OC : {1, 7, 8, 9, 100})
        testBiasGrad(N, OC, OC % 2, seed++);
    testBiasGrad(3, 4099, 0, seed++);
    testBiasGrad(2, 8193, 1, seed++);
    printf("bias done (%d failures so far)\n", gFailures);
  }
  if (want("ce")) {
    for (int N : {1, 3, 33, 70})
      for (int V : {1, 2, 5, 31, 100, 513, 1100})
        testCrossEntropy(N, V, 5.0f, seed++);
    testCrossEntropy(5, 2000, 60.0f, seed++);
    testCrossEntropy(40, 3000, 2.0f, seed++);
    printf("ce done (%d failures so far)\n", gFailures);
  }
  if (want("attention")) {
    testAttention(1, 1, 4, 1, seed++);
    testAttention(1, 1, 6, 3, seed++);
    testAttention(2, 5, 6, 3, seed++);
    testAttention(2, 33, 12, 3, seed++);
    testAttention(1, 70, 8, 1, seed++);
    testAttention(2, 70, 9, 3, seed++);
    testAttention(1, 33, 64, 1, seed++);
    testAttention(1, 300, 8, 1, seed++);
    testAttention(1, 520, 4, 2, seed++);
    // Grouped-query: kv heads of 2 and 3 query heads, multi-query (KV = 1),
    // and two row blocks.
    testAttention(2, 5, 8, 4, 905u, /*KV=*/2);
    testAttention(2, 33, 24, 6, 906u, /*KV=*/2);
    testAttention(1, 70, 12, 3, 907u, /*KV=*/1);
    testAttention(1, 300, 16, 4, 908u, /*KV=*/2);
    printf("attention done (%d failures so far)\n", gFailures);
  }

  if (want("blocked")) {
    testBlocked(1, 1, 4, 1, seed++);     // T = 1, hs = 4
    testBlocked(2, 5, 8, 2, seed++);     // T = 5, hs = 4
    testBlocked(1, 1, 128, 1, seed++);   // T = 1, hs = 128
    testBlocked(1, 65, 64, 1, seed++);   // hs = 64: three tiles of 32
    testBlocked(2, 130, 8, 2, seed++);   // five tiles, the last of 2 rows
    testBlocked(1, 130, 64, 1, seed++);  // GPT-2's head size
    testBlocked(1, 130, 128, 1, seed++); // Llama's: nine tiles of 16
    testBlocked(1, 65, 256, 2, seed++);  // hs = 128, two heads
    testBlocked(2, 33, 66, 2, seed++);   // hs = 33: bucket 64, padded
    testBlocked(1, 40, 130, 2, seed++);  // hs = 65: bucket 128, padded
    testBlocked(2, 70, 36, 3, seed++);   // hs = 12
    testBlocked(1, 64, 32, 1, seed++);   // hs = 32, T a multiple of the tile
    testBlocked(1, 97, 96, 1, seed++);   // hs = 96
    testBlocked(1, 300, 64, 1, seed++);  // ten tiles
    testBlocked(2, 129, 192, 3, seed++); // hs = 64, three heads
    testBlocked(1, 200, 384, 3, seed++); // hs = 128, thirteen tiles
    // Grouped-query, each bucket: a key tile's dk, dv over 2, 3 or 4 heads.
    testBlocked(2, 5, 16, 4, 909u, /*KV=*/2);    // hs = 4
    testBlocked(1, 130, 384, 6, 910u, /*KV=*/2); // hs = 64
    testBlocked(2, 70, 48, 4, 911u, /*KV=*/1);   // hs = 12
    testBlocked(1, 65, 512, 4, 912u, /*KV=*/2);  // hs = 128
    {
      // Random shapes, on their own generator (the fuzz group's sequence
      // stays as it was).
      std::mt19937 fr(4242);
      auto U = [&](int lo, int hi) {
        return std::uniform_int_distribution<int>(lo, hi)(fr);
      };
      for (int it = 0; it < 8; ++it) {
        const int NH = U(1, 3), hs = U(1, 128);
        testBlocked(U(1, 2), U(1, 100), NH * hs, NH, seed++);
      }
    }
    testBlockedErrors(258, 2); // hs = 129
    testBlockedErrors(10, 3);  // C not a multiple of NH
    printf("blocked done (%d failures so far)\n", gFailures);
  }
  if (want("linear")) {
    testLinear(1, 3, 5, true, seed++);
    testLinear(7, 9, 300, true, seed++);
    testLinear(70, 16, 33, true, seed++);
    testLinear(5, 4, 8, false, seed++);
    printf("linear done (%d failures so far)\n", gFailures);
  }
  if (want("edge")) {
    testEmbedding(2, 0, 8, 5, 6, 0, 0, seed++); // no positions
    testCrossEntropy(0, 5, 1.0f, seed++);
    testBiasGrad(1000, 20, 0, seed++);
    testLayerNorm(1000, 9, 1, seed++);
    testAttention(1, 257, 4, 1, seed++);
    testAttention(1, 256, 4, 2, seed++);
    testElementwise(0, 0, 0, 0, seed++);
    testAdamW(0, 0, 1, seed++);
    printf("edge done (%d failures so far)\n", gFailures);
  }
  if (want("probe")) {
    probeCrossEntropy(64, 100, 0.0f, 0.0f);
    probeCrossEntropy(64, 100, 0.0f, 12.0f);
    probeCrossEntropy(64, 100, 30.0f, 12.0f);
    probeCrossEntropy(64, 100, 100.0f, 15.0f);
    probeCrossEntropy(64, 2000, 20.0f, 8.0f);
  }

  if (want("fuzz")) {
    std::mt19937 fr(12345);
    auto U = [&](int lo, int hi) {
      return std::uniform_int_distribution<int>(lo, hi)(fr);
    };
    for (int it = 0; it < 12; ++it) {
      testEmbedding(U(1, 4), U(1, 40), U(1, 600), U(1, 60), 40 + U(0, 5),
                    U(0, 3), U(0, 3), seed++);
      testLayerNorm(U(1, 90), U(1, 300), U(0, 3), seed++);
      testBiasGrad(U(0, 300), U(1, 200), U(0, 3), seed++);
      testCrossEntropy(U(1, 40), U(1, 1500), 1.0f + U(0, 20), seed++);
      const int NH = U(1, 4), hs = U(1, 9);
      testAttention(U(1, 2), U(1, 80), NH * hs, NH, seed++);
      testElementwise(U(0, 3000), U(0, 3), U(0, 3), U(0, 3), seed++);
      testAdamW(U(0, 3000), U(0, 3), U(1, 20), seed++);
    }
    printf("fuzz done (%d failures so far)\n", gFailures);
  }
  if (want("rounding")) {
    testRounding();
    for (int off : {0, 1, 2, 3})
      testCast(off);
    printf("rounding done (%d failures so far)\n", gFailures);
  }
  if (want("gradclip")) {
    testGradClip();
    printf("gradclip done (%d failures so far)\n", gFailures);
  }
  if (want("bf16"))
    testBF16();
  if (want("llama"))
    testLlama();
  printf("%d checks, %d failures; worst passing normwise error %.3g (%s)\n",
         gChecks, gFailures, gWorst, gWorstName.c_str());
  return gFailures ? 1 : 0;
}
