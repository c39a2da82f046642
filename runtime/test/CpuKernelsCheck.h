//===- CpuKernelsCheck.h - what the CPU kernel checks share -----*- C++ -*-===//
//
// fsdp-cpu-kernels-test's counters, comparisons and test data, and its
// kernel families (one file each), which CpuKernelsTest.cpp's main runs.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_TEST_CPUKERNELSCHECK_H
#define FSDP_RUNTIME_TEST_CPUKERNELSCHECK_H

#include "TestData.h"
#include "cpu/Blas.h"
#include "cpu/Kernels.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <omp.h>

namespace cpukernels {
using namespace fsdp::rt::cpu;

//===----------------------------------------------------------------------===//
// Checking
//===----------------------------------------------------------------------===//

inline int gPassed = 0, gFailed = 0;

inline bool report(bool ok, const char *file, int line,
                   const std::string &what) {
  if (ok) {
    ++gPassed;
  } else {
    ++gFailed;
    std::fprintf(stderr, "%s:%d: FAILED: %s\n", file, line, what.c_str());
  }
  return ok;
}

#define CHECK(cond) report(bool(cond), __FILE__, __LINE__, #cond)
#define CHECK_MSG(cond, msg) report(bool(cond), __FILE__, __LINE__, msg)

/// One check: |got - want| <= atol + rtol |want| for all n elements (NaN
/// fails). Prints the first mismatches and the worst one.
inline bool checkClose(const char *file, int line, const std::string &what,
                       const float *got, const double *want, size_t n,
                       double atol, double rtol) {
  size_t bad = 0, worst = 0;
  double worstExcess = -1.0;
  std::string detail;
  for (size_t i = 0; i < n; ++i) {
    const double err = std::fabs(double(got[i]) - want[i]);
    const double tol = atol + rtol * std::fabs(want[i]);
    if (err <= tol)
      continue;
    const double excess = std::isnan(err) ? 1e300 : err / tol;
    if (excess > worstExcess) {
      worstExcess = excess;
      worst = i;
    }
    if (bad++ < 4) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "\n    [%zu] got %.8g, want %.8g", i,
                    double(got[i]), want[i]);
      detail += buf;
    }
  }
  if (bad == 0)
    return report(true, file, line, what);
  char buf[200];
  std::snprintf(buf, sizeof buf,
                "%s: %zu of %zu elements differ (atol %g, rtol %g); worst "
                "[%zu] got %.8g, want %.8g",
                what.c_str(), bad, n, atol, rtol, worst, double(got[worst]),
                want[worst]);
  return report(false, file, line, buf + detail);
}

inline bool checkClose(const char *file, int line, const std::string &what,
                       const std::vector<float> &got,
                       const std::vector<double> &want, double atol,
                       double rtol) {
  if (got.size() != want.size())
    return report(false, file, line, what + ": sizes differ");
  return checkClose(file, line, what, got.data(), want.data(), got.size(), atol,
                    rtol);
}

/// CHECK_CLOSE(what, got, want, atol, rtol) for two vectors, or
/// CHECK_CLOSE(what, gotPtr, wantPtr, n, atol, rtol).
#define CHECK_CLOSE(...) checkClose(__FILE__, __LINE__, __VA_ARGS__)

/// Bitwise equality, for the determinism checks.
inline bool sameBits(const std::vector<float> &a, const std::vector<float> &b) {
  return a.size() == b.size() &&
         (a.empty() || // memcmp may not take an empty vector's null data
          std::memcmp(a.data(), b.data(), sizeof(float) * a.size()) == 0);
}

//===----------------------------------------------------------------------===//
// Data
//===----------------------------------------------------------------------===//

using fsdp::rt::test::randomTokens;
using fsdp::rt::test::randomVector;
using fsdp::rt::test::Rng;

inline std::vector<double> toDouble(const std::vector<float> &v) {
  return std::vector<double>(v.begin(), v.end());
}

inline std::vector<float> nans(size_t n) {
  return std::vector<float>(n, std::numeric_limits<float>::quiet_NaN());
}

inline double dot(const std::vector<double> &a, const std::vector<double> &b) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); ++i)
    s += a[i] * b[i];
  return s;
}

inline std::vector<size_t> allIndices(size_t n) {
  std::vector<size_t> idx(n);
  for (size_t i = 0; i < n; ++i)
    idx[i] = i;
  return idx;
}

inline std::vector<size_t> someIndices(Rng &rng, size_t n, size_t count) {
  std::vector<size_t> idx(count);
  for (size_t &i : idx)
    i = size_t(rng.below(int64_t(n)));
  return idx;
}

/// Central differences of the scalar f at x, for the indices idx.
template <typename F>
std::vector<double> centralDiff(F &&f, std::vector<double> &x,
                                const std::vector<size_t> &idx,
                                double eps = 1e-4) {
  std::vector<double> g(idx.size());
  for (size_t n = 0; n < idx.size(); ++n) {
    const size_t i = idx[n];
    const double x0 = x[i];
    x[i] = x0 + eps;
    const double plus = f(x);
    x[i] = x0 - eps;
    const double minus = f(x);
    x[i] = x0;
    g[n] = (plus - minus) / (2.0 * eps);
  }
  return g;
}

inline std::vector<float> gather(const std::vector<float> &v,
                                 const std::vector<size_t> &idx) {
  std::vector<float> out(idx.size());
  for (size_t n = 0; n < idx.size(); ++n)
    out[n] = v[idx[n]];
  return out;
}

/// Runs fn with one OpenMP thread, then restores the thread count.
template <typename F> void withOneThread(F &&fn) {
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  fn();
  omp_set_num_threads(threads);
}

//===----------------------------------------------------------------------===//
// The kernel families
//===----------------------------------------------------------------------===//

// CpuEmbeddingNormTest.cpp
void testEmbedding();
void testLayerNorm();
void testRmsNorm();
void testQkNorm();

// CpuLinearElementwiseTest.cpp
void testLinear(const Blas &blas);
void testElementwise();
void testSwiGlu();
void testRope();
void testRopeScaling();

// CpuAttentionTest.cpp
void testAttention(const Blas &blas);
void testBlockedBoundary(const Blas &blas, int64_t hs);
void testBlockedAttention(const Blas &blas);

// CpuLossOptimizerTest.cpp
void testCrossEntropy();
void testAdamW();
void testAdamWScale();
void testAdamWTensors();
void testGradClip();

// CpuMoeTest.cpp
void testMoeRouting(const Blas &blas);
void testMoeDispatch();

// CpuBF16Test.cpp
void testBF16Direct();

} // namespace cpukernels

#endif // FSDP_RUNTIME_TEST_CPUKERNELSCHECK_H
