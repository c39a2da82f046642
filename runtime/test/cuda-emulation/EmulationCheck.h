//===- EmulationCheck.h - what the emulated kernel checks share -*- C++ -*-===//
//
// fsdp-cuda-emulation-test's buffers with canaries, comparisons and
// schedules (every check run in several thread and block orders), and its
// kernel families (one file each) with the groups they run, which
// CudaEmulationTest.cpp's main picks by name.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_TEST_EMULATIONCHECK_H
#define FSDP_RUNTIME_TEST_EMULATIONCHECK_H

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

inline int gPad = 16;
inline int gFailures = 0, gChecks = 0;
inline std::unique_ptr<cp::Blas> gBlas;
inline cu::Context ctx{nullptr, nullptr};
inline double gWorst = 0; // worst normwise error of a passing check
inline std::string gWorstName;

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
template <typename E> void roundTo(std::vector<float> &v) {
  for (float &x : v)
    x = Elem<E>::widen(Elem<E>::make(x));
}
template <typename E> float roundTo(float x) {
  return Elem<E>::widen(Elem<E>::make(x));
}

// A check's tolerance: its fp32 one, plus `ulps` units in the last place of
// a bf16 at the largest reference value (2^-7 of it) for bf16.
template <typename E> double tol(double f32, double ulps) {
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

inline std::vector<float> randv(size_t n, std::mt19937 &rng, float lo = -1,
                                float hi = 1) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto &x : v)
    x = d(rng);
  return v;
}

inline void fail(const std::string &what) {
  ++gFailures;
  printf("FAIL %s\n", what.c_str());
}

// Compares got against ref; tol is normwise (max |g - r| / max |r|).
inline double compare(const std::string &name, const float *got,
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
void checkCanary(const std::string &name, const BufT<E> &b) {
  if (!b.canaryOk())
    fail(name + ": write outside the buffer (canary overwritten)");
}

inline void checkErrors(const std::string &name) {
  std::string msg;
  if (cu::takeError(msg))
    fail(name + ": recorded CUDA error: " + msg);
}

// Runs `gpu` (returning its outputs) under several schedules; the outputs
// must be bitwise equal (the kernels claim determinism; a difference means
// a race or an order dependence). Returns the forward-order outputs.
using Outs = std::vector<std::vector<float>>;
inline Outs runOrders(const std::string &name,
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

//===----------------------------------------------------------------------===//
// The kernel families and their groups (a group's checks take their seeds
// from `seed`, counting on across the groups of one run)
//===----------------------------------------------------------------------===//

// EmuRowsTest.cpp
template <typename E = float>
void testEmbedding(int B, int T, int C, int V, int Tmax, int offOut, int offW,
                   unsigned seed);
template <typename E = float>
void testLayerNorm(int N, int C, int off, unsigned seed);
template <typename E = float>
void testBiasGrad(int N, int OC, int off, unsigned seed);
void groupEmbedding(unsigned &seed);
void groupLayerNorm(unsigned &seed);
void groupBias(unsigned &seed);

// EmuElementwiseTest.cpp
template <typename E = float>
void testElementwise(int n, int offO, int offA, int offB, unsigned seed);
void groupElementwise(unsigned &seed);
void groupRounding(unsigned &seed);

// EmuOptimizerTest.cpp

void testAdamW(int n, int off, int step, unsigned seed);
void groupAdamW(unsigned &seed);
void groupGradClip(unsigned &seed);

// EmuLossLinearTest.cpp
template <typename E = float>
void testCrossEntropy(int N, int V, float spread, unsigned seed);
template <typename E = float>
void testLinear(int N, int IC, int OC, bool bias, unsigned seed);
void groupCrossEntropy(unsigned &seed);
void groupLinear(unsigned &seed);
void groupProbe(unsigned &seed);

// EmuAttentionTest.cpp
template <typename E = float>
void testAttention(int B, int T, int C, int NH, unsigned seed, int KV = 0,
                   int W = 0);
template <typename E = float>
void testBlocked(int B, int T, int C, int NH, unsigned seed, int KV = 0,
                 int W = 0, bool tc = false, float spread = 0);
void groupAttention(unsigned &seed);
void groupBlocked(unsigned &seed);

// EmuLlamaTest.cpp

void groupLlama(unsigned &seed);

// EmuMoeTest.cpp
void groupMoe(unsigned &seed);
void groupMoeDispatch(unsigned &seed);

// EmuWmmaTest.cpp
void groupWmma(unsigned &seed);

#endif // FSDP_RUNTIME_TEST_EMULATIONCHECK_H
