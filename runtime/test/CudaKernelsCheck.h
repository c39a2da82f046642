//===- CudaKernelsCheck.h - what the CUDA parity checks share ---*- C++ -*-===//
//
// fsdp-cuda-kernels-test's counters, comparisons, device arrays and
// shapes, and its parts (fp32, bf16, timing: one file each), which
// CudaKernelsTest.cpp's main runs.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_TEST_CUDAKERNELSCHECK_H
#define FSDP_RUNTIME_TEST_CUDAKERNELSCHECK_H

#include "TestData.h"
#include "cpu/Blas.h"
#include "cpu/Kernels.h"
#include "fsdp/runtime/support/BFloat16.h"
#include "kernels/Kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

namespace cudakernels {
namespace cpu = fsdp::rt::cpu;
namespace gpu = fsdp::rt::cuda;

//===----------------------------------------------------------------------===//
// Checking
//===----------------------------------------------------------------------===//

inline int gPassed = 0, gFailed = 0;

inline bool report(bool ok, const char *file, int line,
                   const std::string &what) {
  if (ok) {
    ++gPassed;
    std::printf("  ok      %s\n", what.c_str());
  } else {
    ++gFailed;
    std::printf("  FAILED  %s (%s:%d)\n", what.c_str(), file, line);
  }
  std::fflush(stdout);
  return ok;
}

#define CHECK_MSG(cond, msg) report(bool(cond), __FILE__, __LINE__, msg)

/// max |got - want| <= rtol * max |want| (NaN anywhere fails). Reports the
/// ratio found, so that the tolerances can be judged from the log.
inline bool checkRel(const char *file, int line, const std::string &what,
                     const float *got, const float *want, size_t n,
                     double rtol) {
  double maxRef = 0.0, maxErr = 0.0;
  size_t worst = 0, nans = 0;
  for (size_t i = 0; i < n; ++i) {
    maxRef = std::max(maxRef, std::fabs(double(want[i])));
    const double err = std::fabs(double(got[i]) - double(want[i]));
    if (std::isnan(got[i]) || std::isnan(err)) {
      if (nans++ == 0)
        worst = i;
      continue;
    }
    if (err > maxErr && nans == 0) {
      maxErr = err;
      worst = i;
    }
  }
  const double scale = maxRef > 0.0 ? maxRef : 1.0;
  const bool ok = nans == 0 && maxErr <= rtol * scale;
  char buf[320];
  if (nans)
    std::snprintf(buf, sizeof buf, "%s: %zu NaN of %zu (first [%zu])",
                  what.c_str(), nans, n, worst);
  else
    std::snprintf(buf, sizeof buf, "%s: err %.2e of max|ref| %.3g (tol %.0e)%s",
                  what.c_str(), maxErr / scale, maxRef, rtol,
                  ok ? "" : " <-- too large");
  std::string msg = buf;
  if (!ok && n > 0) {
    std::snprintf(buf, sizeof buf, "; worst [%zu] got %.8g want %.8g", worst,
                  double(got[worst]), double(want[worst]));
    msg += buf;
  }
  return report(ok, file, line, msg);
}

inline bool checkRel(const char *file, int line, const std::string &what,
                     const std::vector<float> &got,
                     const std::vector<float> &want, double rtol) {
  if (got.size() != want.size())
    return report(false, file, line, what + ": sizes differ");
  return checkRel(file, line, what, got.data(), want.data(), got.size(), rtol);
}

#define CHECK_REL(...) checkRel(__FILE__, __LINE__, __VA_ARGS__)

inline bool sameBits(const std::vector<float> &a, const std::vector<float> &b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), sizeof(float) * a.size()) == 0;
}

/// Fails if a CUDA or cuBLAS error was recorded (and clears it).
inline void checkNoError(const char *file, int line, const std::string &where) {
  std::string message;
  const bool error = gpu::takeError(message);
  const cudaError_t sync = cudaDeviceSynchronize();
  if (error)
    report(false, file, line, where + ": recorded error: " + message);
  if (sync != cudaSuccess)
    report(false, file, line,
           where + ": asynchronous error: " + cudaGetErrorString(sync));
}

#define CHECK_NO_ERROR(where) checkNoError(__FILE__, __LINE__, where)

[[noreturn]] inline void fatal(const std::string &what) {
  std::printf("cuda-kernels: fatal: %s\n", what.c_str());
  std::printf("cuda-kernels: %d passed, %d failed\n", gPassed, gFailed + 1);
  std::exit(1);
}

inline void cudaOrDie(cudaError_t err, const char *what) {
  if (err != cudaSuccess)
    fatal(std::string(what) + ": " + cudaGetErrorString(err));
}

//===----------------------------------------------------------------------===//
// Data
//===----------------------------------------------------------------------===//

using fsdp::rt::test::randomTokens;
using fsdp::rt::test::randomVector;
using fsdp::rt::test::Rng;

inline std::vector<float> nans(size_t n) {
  return std::vector<float>(n, std::numeric_limits<float>::quiet_NaN());
}

/// A device array of n elements, `offset` elements into its allocation (an
/// odd offset makes a view that is not 16-byte aligned). Starts as NaN
/// (every byte 0xFF).
template <typename T> class Dev {
public:
  explicit Dev(size_t n, size_t offset = 0) : n_(n) {
    void *raw = nullptr;
    cudaOrDie(cudaMalloc(&raw, sizeof(T) * (n + offset + 1)), "cudaMalloc");
    base_ = static_cast<T *>(raw);
    p_ = base_ + offset;
    poison();
  }
  explicit Dev(const std::vector<T> &v, size_t offset = 0)
      : Dev(v.size(), offset) {
    upload(v);
  }
  Dev(const Dev &) = delete;
  Dev &operator=(const Dev &) = delete;
  ~Dev() { cudaFree(base_); }

  T *get() const { return p_; }
  operator T *() const { return p_; }
  size_t size() const { return n_; }

  void poison() {
    cudaOrDie(cudaMemset(p_, 0xFF, sizeof(T) * n_), "cudaMemset");
  }
  void upload(const std::vector<T> &v) {
    cudaOrDie(cudaMemcpy(p_, v.data(), sizeof(T) * std::min(v.size(), n_),
                         cudaMemcpyHostToDevice),
              "cudaMemcpy to device");
  }
  /// Synchronises the device first (the kernels run on their own stream).
  std::vector<T> download() const {
    cudaOrDie(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    std::vector<T> v(n_);
    cudaOrDie(cudaMemcpy(v.data(), p_, sizeof(T) * n_, cudaMemcpyDeviceToHost),
              "cudaMemcpy to host");
    return v;
  }

private:
  T *base_ = nullptr, *p_ = nullptr;
  size_t n_;
};

using DevF = Dev<float>;
using DevI = Dev<int32_t>;

struct Gpu {
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  bool tf32 = false; ///< TF32 math: our kernels may use tensor cores too
  gpu::Context ctx() const { return {stream, blas, tf32}; }
  void mathMode(cublasMath_t mode) {
    if (cublasSetMathMode(blas, mode) != CUBLAS_STATUS_SUCCESS)
      fatal("cublasSetMathMode");
    tf32 = mode == CUBLAS_TF32_TENSOR_OP_MATH;
  }
};

constexpr double kTolFp32 = 1e-4;
constexpr double kTolTf32 = 5e-3;

struct Shape {
  const char *name;
  int64_t B, T, C, NH, V;
  int64_t KV = 0;     ///< attention's kv heads; 0: NH
  int64_t window = 0; ///< attention's sliding window; 0: none
  int64_t kv() const { return KV ? KV : NH; }
  /// qkv's row width: C + 2 KV hs (3C without grouped-query attention).
  int64_t qkvWidth() const { return C + 2 * kv() * (C / NH); }
};

inline const Shape kShapes[] = {
    {"small", 3, 7, 15, 3, 37},       // odd everything: scalar paths
    {"gpt2-like", 2, 64, 96, 4, 517}, // float4 paths, several warps per row
};

inline std::string label(const char *kernel, const Shape &s,
                         const char *extra = nullptr) {
  std::string out = std::string(kernel) + " [" + s.name;
  if (extra)
    out += std::string(", ") + extra;
  return out + "]";
}

using BF16 = __nv_bfloat16;
using DevB = Dev<BF16>;

//===----------------------------------------------------------------------===//
// References more than one part uses
//===----------------------------------------------------------------------===//

/// The CPU's element-wise kernels on `a` (and `b`, the gradient or the
/// other addend), and `a` scaled by 0.375: what the GPU must give.
struct ElementwiseReference {
  std::vector<float> add, gelu, geluB, relu, reluB, scaled;
};
inline ElementwiseReference elementwiseReference(const std::vector<float> &a,
                                                 const std::vector<float> &b) {
  const int64_t n = int64_t(a.size());
  ElementwiseReference r;
  for (auto *v : {&r.add, &r.gelu, &r.geluB, &r.relu, &r.reluB, &r.scaled})
    v->resize(n);
  cpu::add(r.add.data(), a.data(), b.data(), n);
  cpu::geluForward(r.gelu.data(), a.data(), n);
  cpu::geluBackward(r.geluB.data(), b.data(), a.data(), n);
  cpu::reluForward(r.relu.data(), a.data(), n);
  cpu::reluBackward(r.reluB.data(), b.data(), a.data(), n);
  for (int64_t i = 0; i < n; ++i)
    r.scaled[i] = a[i] * 0.375f;
  return r;
}

/// dqkv's dq, dk and dv parts (C, KV hs and KV hs columns of each row),
/// each checked on its own.
inline void checkDqkvThirds(const std::string &what,
                            const std::vector<float> &got,
                            const std::vector<float> &want, const Shape &s,
                            double tol) {
  const char *names[] = {"dq", "dk", "dv"};
  const int64_t W = s.qkvWidth(), kvWidth = (W - s.C) / 2;
  const int64_t begin[] = {0, s.C, s.C + kvWidth},
                width[] = {s.C, kvWidth, kvWidth};
  for (int part = 0; part < 3; ++part) {
    std::vector<float> g3, r3;
    for (int64_t bt = 0; bt < s.B * s.T; ++bt)
      for (int64_t c = begin[part]; c < begin[part] + width[part]; ++c) {
        g3.push_back(got[bt * W + c]);
        r3.push_back(want[bt * W + c]);
      }
    CHECK_REL(what + ", " + names[part] + "]", g3, r3, tol);
  }
}

//===----------------------------------------------------------------------===//
// The parts
//===----------------------------------------------------------------------===//

// CudaFp32KernelsTest.cpp
void testEmbedding(Gpu &g, const Shape &s, uint64_t seed);
void testLayerNorm(Gpu &g, const Shape &s, uint64_t seed);
void testLinear(Gpu &g, const cpu::Blas *blas, const Shape &s, uint64_t seed,
                double tol, const char *mode);
void testElementwise(Gpu &g, const Shape &s, uint64_t seed);
void testAttention(Gpu &g, const cpu::Blas &blas, const Shape &s, uint64_t seed,
                   double tol, const char *mode);
/// With g.tf32, the tensor-core kernels (to kTolTf32).
void testBlockedAttention(Gpu &g, const cpu::Blas &blas, const Shape &s,
                          uint64_t seed);
void testCrossEntropy(Gpu &g, const char *name, int64_t N, int64_t V,
                      uint64_t seed);
void testAdamW(Gpu &g, const Shape &s, uint64_t seed);
void testGradClip(Gpu &g, uint64_t seed);
void testAdamWTensors(Gpu &g, uint64_t seed);
void testErrorRecording(Gpu &g);

// CudaBF16KernelsTest.cpp
void testBF16Attention(Gpu &g, const cpu::Blas &blas, const Shape &s,
                       uint64_t seed, bool materialized);
void testBF16(Gpu &g, const cpu::Blas *blas, uint64_t seed);
/// Llama's ops (rms_norm, swiglu, rope) in f32 and bf16 on every shape.
void testLlama(Gpu &g, uint64_t seed);

// CudaMoeKernelsTest.cpp
/// The mixture-of-experts kernels (router, sort, permute, combine).
void testMoe(Gpu &g, uint64_t seed);

// CudaKernelsTiming.cpp
/// Each kernel's GPU time at the GPT-2 124M shape (information only).
void timeGpt2(Gpu &g);

} // namespace cudakernels

#endif // FSDP_RUNTIME_TEST_CUDAKERNELSCHECK_H
