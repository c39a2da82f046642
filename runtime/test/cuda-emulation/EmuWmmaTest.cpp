//===- EmuWmmaTest.cpp - the emulated WMMA API (fake/mma.h) ---------------===//
//
// Part of fsdp-cuda-emulation-test (group wmma; CudaEmulationTest.cpp says
// how the kernels run and are checked). The tensor-core kernels of
// kernels/WmmaTestKernels.cu against the emulation's model, bit for bit:
// D = alpha (C + sum over k ascending of exact products) in fp32, tf32
// inputs truncated to 10 mantissa bits unless the kernel rounded them with
// __float_to_tf32; and within a tolerance of the exact product (what a GPU
// is held to). bf16 m16n16k16 and tf32 m16n16k8, B row- and column-major,
// C loaded and D stored either way, several k-steps accumulated in place,
// leading dimensions above the tile, tiles staged through shared memory,
// several warps and blocks; what lies between the rows of D untouched.
// __float_to_tf32 against hand-worked cases and a reference rounding; and
// each misuse reported by the emulator, or visibly wrong.
//
//===----------------------------------------------------------------------===//

#include "EmulationCheck.h"
#include "kernels/WmmaTestKernels.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace emu {
extern std::string *gNoteLog;
} // namespace emu

namespace {

using namespace wmmatest;

/// A 32-byte aligned host buffer (the emulated device's memory) with 32
/// canary bytes on each side.
template <typename T> struct Aligned {
  static constexpr size_t kPad = 32;
  std::vector<unsigned char> bytes;
  T *p;
  size_t n;
  explicit Aligned(size_t n_) : bytes(n_ * sizeof(T) + 2 * kPad + 32), n(n_) {
    uintptr_t a = reinterpret_cast<uintptr_t>(bytes.data()) + kPad + 31;
    p = reinterpret_cast<T *>(a & ~uintptr_t(31));
    std::memset(bytes.data(), 0xA5, bytes.size());
  }
  bool canaryOk() const {
    const auto *lo = reinterpret_cast<const unsigned char *>(p) - kPad;
    const auto *hi = reinterpret_cast<const unsigned char *>(p + n);
    for (size_t i = 0; i < kPad; ++i)
      if (lo[i] != 0xA5 || hi[i] != 0xA5)
        return false;
    return true;
  }
};

constexpr uint32_t kUntouched = 0x7fc0deadu; // D's fill: a NaN of our own

float bf16Value(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }

/// Element (r, c)'s offset in a matrix of leading dimension ld.
size_t at(int r, int c, int ld, bool colMajor) {
  return colMajor ? size_t(c) * ld + r : size_t(r) * ld + c;
}

struct GemmCase {
  bool tf32;
  int M, N, K, extra; ///< extra: each leading dimension past the tile's
  bool bCol, withC, cCol, dCol, viaShared, roundInputs;
  float alpha;
};

std::string caseName(const GemmCase &g) {
  char nm[200];
  snprintf(nm, sizeof nm,
           "wmma %s M=%d N=%d K=%d ld+%d B %s C %s D %s%s%s alpha=%g",
           g.tf32 ? "tf32" : "bf16", g.M, g.N, g.K, g.extra,
           g.bCol ? "col" : "row", g.withC ? (g.cCol ? "col" : "row") : "none",
           g.dCol ? "col" : "row", g.viaShared ? " via shared" : "",
           g.tf32 ? (g.roundInputs ? " rounded" : " unrounded") : "", g.alpha);
  return nm;
}

/// got must be want, bit for bit.
void bitwise(const std::string &name, const std::vector<float> &got,
             const std::vector<float> &want) {
  ++gChecks;
  size_t bad = 0, first = 0;
  for (size_t i = got.size(); i-- > 0;)
    if (ref::bits(got[i]) != ref::bits(want[i]))
      ++bad, first = i;
  if (bad) {
    char buf[300];
    snprintf(buf, sizeof buf,
             "%s: %zu of %zu differ; at [%zu] got %.9g "
             "want %.9g",
             name.c_str(), bad, got.size(), first, got[first], want[first]);
    fail(buf);
  }
}

/// The kernel under every schedule; D, its padding included, per order.
std::vector<float> runGemm(const GemmCase &g, const std::string &nm,
                           const std::vector<float> &a,
                           const std::vector<float> &b,
                           const std::vector<float> &c, int lda, int ldb,
                           int ldc, int ldd, size_t dSize) {
  Outs o = runOrders(nm, [&]() -> Outs {
    Aligned<__nv_bfloat16> ha(g.tf32 ? 0 : a.size()), hb(g.tf32 ? 0 : b.size());
    Aligned<float> fa(g.tf32 ? a.size() : 0), fb(g.tf32 ? b.size() : 0);
    Aligned<float> hc(c.size()), hd(dSize);
    for (size_t i = 0; i < a.size(); ++i)
      g.tf32 ? void(fa.p[i] = a[i]) : void(ha.p[i] = __float2bfloat16_rn(a[i]));
    for (size_t i = 0; i < b.size(); ++i)
      g.tf32 ? void(fb.p[i] = b[i]) : void(hb.p[i] = __float2bfloat16_rn(b[i]));
    std::memcpy(hc.p, c.data(), c.size() * sizeof(float));
    for (size_t i = 0; i < dSize; ++i)
      std::memcpy(hd.p + i, &kUntouched, 4);
    Gemm k{};
    k.M = g.M, k.N = g.N, k.K = g.K, k.alpha = g.alpha;
    k.A = g.tf32 ? static_cast<const void *>(fa.p) : ha.p, k.lda = lda;
    k.B = g.tf32 ? static_cast<const void *>(fb.p) : hb.p, k.ldb = ldb;
    k.bColMajor = g.bCol;
    k.C = g.withC ? hc.p : nullptr, k.ldc = ldc, k.cColMajor = g.cCol;
    k.D = hd.p, k.ldd = ldd, k.dColMajor = g.dCol;
    k.viaShared = g.viaShared, k.roundInputs = g.roundInputs;
    g.tf32 ? gemmTF32(k) : gemmBF16(k);
    if (!ha.canaryOk() || !hb.canaryOk() || !fa.canaryOk() || !fb.canaryOk() ||
        !hc.canaryOk() || !hd.canaryOk())
      fail(nm + ": write outside the buffers (canary overwritten)");
    return {std::vector<float>(hd.p, hd.p + dSize)};
  });
  return o[0];
}

/// One GEMM against the model (bitwise) and the exact product (within a
/// tolerance), D's padding left as it was.
void testGemm(const GemmCase &g, unsigned seed) {
  const std::string nm = caseName(g);
  std::mt19937 rng(seed);
  const int lda = g.K + g.extra, ldb = (g.bCol ? g.K : g.N) + g.extra;
  const int ldc = (g.cCol ? g.M : g.N) + g.extra;
  const int ldd = (g.dCol ? g.M : g.N) + g.extra;
  // Inputs as the kernel holds them: bf16 values, or floats with all 23
  // mantissa bits (so truncation and rounding differ).
  std::vector<float> a = randv(size_t(g.M) * lda, rng),
                     b = randv(size_t(g.bCol ? g.N : g.K) * ldb, rng),
                     c = randv(size_t(g.cCol ? g.N : g.M) * ldc, rng);
  if (!g.tf32) {
    for (float &x : a)
      x = bf16Value(x);
    for (float &x : b)
      x = bf16Value(x);
  }
  const size_t dSize = size_t(g.dCol ? g.N : g.M) * ldd;
  const std::vector<float> d =
      runGemm(g, nm, a, b, c, lda, ldb, ldc, ldd, dSize);

  auto input = [&](float x) {
    return !g.tf32 ? x : g.roundInputs ? ref::rna(x) : ref::truncate(x);
  };
  std::vector<float> model(size_t(g.M) * g.N), exact(model.size()),
      got(model.size());
  for (int r = 0; r < g.M; ++r)
    for (int n = 0; n < g.N; ++n) {
      float acc = g.withC ? c[at(r, n, ldc, g.cCol)] : 0.0f;
      double sum = acc;
      for (int k = 0; k < g.K; ++k) {
        const float x = a[at(r, k, lda, false)], y = b[at(k, n, ldb, g.bCol)];
        acc += input(x) * input(y);
        sum += double(x) * y;
      }
      model[size_t(r) * g.N + n] = acc * g.alpha;
      exact[size_t(r) * g.N + n] = float(sum * g.alpha);
      got[size_t(r) * g.N + n] = d[at(r, n, ldd, g.dCol)];
    }
  bitwise(nm + " (the model)", got, model);
  compare(nm + " (the exact product)", got.data(), exact.data(), exact.size(),
          g.tf32 ? 2e-3 : 1e-6);
  size_t touched = 0;
  std::vector<bool> inTile(dSize);
  for (int r = 0; r < g.M; ++r)
    for (int n = 0; n < g.N; ++n)
      inTile[at(r, n, ldd, g.dCol)] = true;
  for (size_t i = 0; i < dSize; ++i)
    touched += !inTile[i] && ref::bits(d[i]) != kUntouched;
  ++gChecks;
  if (touched)
    fail(nm + ": " + std::to_string(touched) +
         " elements between D's rows written (store_matrix_sync's extent)");
}

void testGemms(unsigned &seed) {
  for (bool tf32 : {false, true}) {
    const int ks = tf32 ? 8 : 16;
    // One tile, one k-step, every layout, ld = the tile's.
    for (int l = 0; l < 8; ++l)
      testGemm({tf32, 16, 16, ks, 0, bool(l & 1), true, bool(l & 2),
                bool(l & 4), false, false, 1.0f},
               seed++);
    // Several k-steps in place, ld above the tile, staged A, no C.
    testGemm({tf32, 16, 16, 4 * ks, 8, false, false, false, false, true, false,
              0.5f},
             seed++);
    testGemm(
        {tf32, 16, 16, 3 * ks, 8, true, true, true, true, false, true, 3.0f},
        seed++);
    // Several warps and blocks, one warp idle.
    testGemm(
        {tf32, 32, 48, 2 * ks, 8, true, true, false, true, true, true, 1.0f},
        seed++);
    testGemm({tf32, 16, 48, 5 * ks, tf32 ? 4 : 8, false, true, true, false,
              false, false, 1.0f},
             seed++);
    // A long sum (32 k-steps), as a GPU was checked on.
    testGemm(
        {tf32, 64, 64, 32 * ks, 8, false, true, false, false, true, true, 1.0f},
        seed++);
  }
}

/// __float_to_tf32 on hand-worked cases, and on random floats against
/// ref::rna (an independent formulation of the rounding).
void testRounding(unsigned seed) {
  struct Case {
    uint32_t in, out;
    const char *what;
  };
  const Case cases[] = {
      {0x3f800000u, 0x3f800000u, "1"},
      {0x3f801000u, 0x3f802000u, "1 + 2^-11: a tie, away from zero"},
      {0xbf801000u, 0xbf802000u, "-(1 + 2^-11): a tie, away from zero"},
      {0x3f800fffu, 0x3f800000u, "below the tie"},
      {0x3f801001u, 0x3f802000u, "above the tie"},
      {0x3f803000u, 0x3f804000u, "a tie, odd kept bits"},
      {0xbfbfffffu, 0xbfc00000u, "-1.4999999: up in magnitude"},
      {0x3ffff000u, 0x40000000u, "a tie into the exponent: 2"},
      {0x3fffffffu, 0x40000000u, "just below 2: 2"},
      {0x7f7fe000u, 0x7f7fe000u, "the largest tf32"},
      {0x7f7ff000u, 0x7f800000u, "a tie above it: Inf"},
      {0xff7fffffu, 0xff800000u, "-FLT_MAX: -Inf"},
      {0x7f800000u, 0x7f800000u, "Inf"},
      {0xff800000u, 0xff800000u, "-Inf"},
      {0x80000000u, 0x80000000u, "-0"},
      {0x00000fffu, 0x00000000u, "a subnormal below the tie: 0"},
      {0x00001000u, 0x00002000u, "a subnormal tie: up"},
      {0x807ff000u, 0x80800000u, "a subnormal tie into the normals"},
      // NaN loses the 13 bits as they are (what an H200 gave).
      {0x7fc00000u, 0x7fc00000u, "NaN"},
      {0xffc00000u, 0xffc00000u, "-NaN"},
      {0x7fc01234u, 0x7fc00000u, "a NaN with low payload bits"},
      {0x7fffffffu, 0x7fffe000u, "a NaN of all ones"},
      {0x7f800001u, 0x7f800000u, "a NaN of low payload only: Inf"},
      {0xffffffffu, 0xffffe000u, "the poison, still a NaN"},
  };
  std::vector<float> in;
  for (const Case &c : cases)
    in.push_back(ref::fromBits(c.in));
  std::mt19937 rng(seed);
  for (int i = 0; i < 300; ++i) { // finite, any sign and exponent
    const uint32_t u = rng();
    in.push_back(
        ref::fromBits((u & 0x7f800000u) == 0x7f800000u ? u ^ 1u << 30 : u));
  }
  Aligned<float> hin(in.size()), hout(in.size());
  std::memcpy(hin.p, in.data(), in.size() * 4);
  const int before = emu::gProblems;
  toTF32(hin.p, hout.p, int(in.size()));
  ++gChecks;
  int bad = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const uint32_t got = ref::bits(hout.p[i]);
    const bool hand = i < std::size(cases);
    const uint32_t want = hand ? cases[i].out : ref::bits(ref::rna(in[i]));
    if (got != want || (hand && ref::bits(ref::rna(in[i])) != want)) {
      printf("FAIL __float_to_tf32(%08x) = %08x, ref::rna %08x, want %08x "
             "(%s)\n",
             ref::bits(in[i]), got, ref::bits(ref::rna(in[i])), want,
             hand ? cases[i].what : "random");
      ++bad;
    }
  }
  if (bad || !hout.canaryOk() || emu::gProblems != before)
    fail("wmma __float_to_tf32: " + std::to_string(bad) + " wrong");
}

/// Runs misuse `what` (in the forward order), returning D and what the emulator
/// reported.
std::vector<float> runMisuse(Misuse what, std::string &reports) {
  Aligned<__nv_bfloat16> a(16 * 32), b(16 * 16);
  Aligned<float> d(16 * 16);
  for (int i = 0; i < 16 * 32; ++i)
    a.p[i] = __float2bfloat16_rn(float(i % 7) - 3.5f); // never 0
  for (int i = 0; i < 16 * 16; ++i)
    b.p[i] = __float2bfloat16_rn(float(i % 5) - 2.0f);
  std::string log;
  emu::gNoteLog = &log;
  misuse(what, a.p, b.p, d.p);
  emu::gNoteLog = nullptr;
  reports = log;
  std::vector<float> out(d.p, d.p + 16 * 16);
  // The product, for the cases whose D is checked.
  std::vector<float> want(16 * 16);
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c) {
      float acc = 0;
      for (int k = 0; k < 16; ++k)
        acc += __bfloat162float(a.p[r * 32 + k]) *
               __bfloat162float(b.p[k * 16 + c]);
      want[r * 16 + c] = acc;
    }
  if (what == kCorrect || what == kStoreReadSync)
    bitwise(std::string("wmma misuse ") + std::to_string(int(what)), out, want);
  return out;
}

/// Each misuse reported, with the words that say what went wrong; the
/// correct uses not.
void testMisuse() {
  struct Case {
    Misuse what;
    const char *name, *report; ///< nullptr: nothing reported
  };
  const Case cases[] = {
      {kCorrect, "correct", nullptr},
      {kStoreReadSync, "store, __syncwarp, read", nullptr},
      {kSkipMma, "lane 5 skips mma_sync", "different collectives"},
      {kDifferentPointers, "lane 3's other pointer", "different operands"},
      {kBadLdm, "ldm 12 (bf16)", "ldm 12 is not a multiple of 8 elements"},
      {kMisaligned, "pointer 8 bytes off", "not 32-byte (256-bit) aligned"},
      {kUnalignedShared, "__shared__ without __align__", "align"},
      {kLaneDependent, "lane 0 changes its x[0]", "hold different matrix_a"},
      {kIndexDependent, "x[0..3] zeroed", "hold different matrix_a"},
      {kStoreReadNoSync, "store, read without __syncwarp", nullptr},
  };
  fprintf(stderr, "wmma: misuse checks; the [emu] reports below are "
                  "expected\n");
  for (const Case &c : cases) {
    const int before = emu::gProblems;
    std::string reports;
    const std::vector<float> d = runMisuse(c.what, reports);
    const bool reported = emu::gProblems != before;
    ++gChecks;
    if (!c.report && reported)
      fail(std::string("wmma ") + c.name + ": reported " + reports);
    if (c.report && (!reported || reports.find(c.report) == std::string::npos))
      fail(std::string("wmma ") + c.name + ": no report saying '" + c.report +
           "' (got: " + reports + ")");
    // Nothing reports a missing __syncwarp, but the lanes read the NaN
    // poison of what the others had not stored yet.
    if (c.what == kStoreReadNoSync) {
      ++gChecks;
      size_t nans = 0;
      for (float x : d)
        nans += std::isnan(x);
      if (nans == 0)
        fail("wmma store, read without __syncwarp: every element as "
             "stored, as if store_matrix_sync synchronised the warp");
    }
  }
}

} // namespace

void groupWmma(unsigned &seed) {
  testGemms(seed);
  testRounding(seed++);
  testMisuse();
  printf("wmma done (%d failures so far)\n", gFailures);
}
