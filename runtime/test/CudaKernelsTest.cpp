//===- CudaKernelsTest.cpp - CPU-versus-GPU parity of the CUDA kernels ----===//
//
// A standalone program (no test framework) that runs every kernel of
// src/cuda/kernels/Kernels.h and its CPU twin (src/cpu/Kernels.h) on the
// same random inputs and compares them:
//   - on small odd shapes (scalar paths, partial blocks and warps) and on a
//     small GPT-2-like shape (float4 paths, several warps per row);
//   - fp32 with the cuBLAS handle in CUBLAS_PEDANTIC_MATH, tolerance 1e-4
//     of the reference's largest magnitude; the GEMM-based kernels once
//     more with CUBLAS_TF32_TENSOR_OP_MATH at 5e-3;
//   - that outputs are overwritten (device outputs start as NaN, bytes
//     0xFF), that probs is exactly zero above the diagonal, that views at
//     odd float offsets (no float4) give the same results;
//   - that the row reductions and the blocked attention are deterministic
//     (two runs, same bits); the blocked attention also at GPT-2 124M's
//     shape and at head sizes up to 128;
//   - that errors are recorded and taken (takeError);
//   - every templated kernel in bf16 against the CPU's fp32 kernel on the
//     same (bf16) inputs, its results rounded to bf16 as the CPU backend
//     rounds them (one bf16 unit of the largest value on top of the fp32
//     tolerance, two for the materialized attention), statistics and the
//     loss f32; the cast kernel bit for bit against roundToBF16;
//   - Llama's ops (rms_norm, swiglu, rope, multi-head and grouped) in f32
//     and bf16.
// Then, for information, the GPU time of each kernel at the GPT-2 124M shape
// (B=4, T=1024, C=768, NH=12, V=50257), measured with CUDA events.
//
// Prints one line per check ("ok" or "FAILED", with the error found), then
// "cuda-kernels: N passed, M failed"; exits 1 if any failed, 77 (skipped)
// when there is no CUDA device.
//
//===----------------------------------------------------------------------===//

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
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

namespace cpu = fsdp::rt::cpu;
namespace gpu = fsdp::rt::cuda;

namespace {

//===----------------------------------------------------------------------===//
// Checking
//===----------------------------------------------------------------------===//

int gPassed = 0, gFailed = 0;

bool report(bool ok, const char *file, int line, const std::string &what) {
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
bool checkRel(const char *file, int line, const std::string &what,
              const float *got, const float *want, size_t n, double rtol) {
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

bool checkRel(const char *file, int line, const std::string &what,
              const std::vector<float> &got, const std::vector<float> &want,
              double rtol) {
  if (got.size() != want.size())
    return report(false, file, line, what + ": sizes differ");
  return checkRel(file, line, what, got.data(), want.data(), got.size(), rtol);
}

#define CHECK_REL(...) checkRel(__FILE__, __LINE__, __VA_ARGS__)

bool sameBits(const std::vector<float> &a, const std::vector<float> &b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), sizeof(float) * a.size()) == 0;
}

/// Fails if a CUDA or cuBLAS error was recorded (and clears it).
void checkNoError(const char *file, int line, const std::string &where) {
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

[[noreturn]] void fatal(const std::string &what) {
  std::printf("cuda-kernels: fatal: %s\n", what.c_str());
  std::printf("cuda-kernels: %d passed, %d failed\n", gPassed, gFailed + 1);
  std::exit(1);
}

void cudaOrDie(cudaError_t err, const char *what) {
  if (err != cudaSuccess)
    fatal(std::string(what) + ": " + cudaGetErrorString(err));
}

//===----------------------------------------------------------------------===//
// Data
//===----------------------------------------------------------------------===//

using fsdp::rt::test::randomTokens;
using fsdp::rt::test::randomVector;
using fsdp::rt::test::Rng;

std::vector<float> nans(size_t n) {
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
  gpu::Context ctx() const { return {stream, blas}; }
  void mathMode(cublasMath_t mode) {
    if (cublasSetMathMode(blas, mode) != CUBLAS_STATUS_SUCCESS)
      fatal("cublasSetMathMode");
  }
};

constexpr double kTolFp32 = 1e-4;
constexpr double kTolTf32 = 5e-3;

struct Shape {
  const char *name;
  int64_t B, T, C, NH, V;
  int64_t KV = 0; ///< attention's kv heads; 0: NH
  int64_t kv() const { return KV ? KV : NH; }
  /// qkv's row width: C + 2 KV hs (3C without grouped-query attention).
  int64_t qkvWidth() const { return C + 2 * kv() * (C / NH); }
};

const Shape kShapes[] = {
    {"small", 3, 7, 15, 3, 37},       // odd everything: scalar paths
    {"gpt2-like", 2, 64, 96, 4, 517}, // float4 paths, several warps per row
};

std::string label(const char *kernel, const Shape &s,
                  const char *extra = nullptr) {
  std::string out = std::string(kernel) + " [" + s.name;
  if (extra)
    out += std::string(", ") + extra;
  return out + "]";
}

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

/// The CPU's element-wise kernels on `a` (and `b`, the gradient or the
/// other addend), and `a` scaled by 0.375: what the GPU must give.
struct ElementwiseReference {
  std::vector<float> add, gelu, geluB, relu, reluB, scaled;
};
ElementwiseReference elementwiseReference(const std::vector<float> &a,
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

/// dqkv's dq, dk and dv parts (C, KV hs and KV hs columns of each row),
/// each checked on its own.
void checkDqkvThirds(const std::string &what, const std::vector<float> &got,
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

void testAttention(Gpu &g, const cpu::Blas &blas, const Shape &s, uint64_t seed,
                   double tol, const char *mode) {
  const int64_t B = s.B, T = s.T, C = s.C, NH = s.NH, KV = s.kv();
  Rng rng(seed);
  auto qkv = randomVector(rng, B * T * s.qkvWidth(), 1.5f);
  auto dout = randomVector(rng, B * T * C);
  std::vector<float> out(B * T * C), probs(B * NH * T * T);
  cpu::attentionForward(blas, out.data(), probs.data(), qkv.data(), B, T, C, NH,
                        KV);
  DevF dQkv(qkv), dOut(B * T * C), dProbs(B * NH * T * T);
  gpu::attentionForward<float>(g.ctx(), dOut, dProbs, dQkv, B, T, C, NH, KV);
  auto gotProbs = dProbs.download();
  CHECK_REL(label("attentionForward probs", s, mode), gotProbs, probs, tol);
  CHECK_REL(label("attentionForward out", s, mode), dOut.download(), out, tol);
  bool zeros = true;
  for (int64_t r = 0; r < B * NH * T; ++r)
    for (int64_t j = r % T + 1; j < T; ++j)
      zeros &= gotProbs[r * T + j] == 0.0f;
  CHECK_MSG(zeros,
            label("attentionForward probs exactly 0 above diagonal", s, mode));

  // Backward from the CPU's probs (the same inputs for both).
  std::vector<float> dqkv(qkv.size()), scratch(B * NH * T * T);
  cpu::attentionBackward(blas, dqkv.data(), scratch.data(), dout.data(),
                         qkv.data(), probs.data(), B, T, C, NH, KV);
  DevF dProbsRef(probs), dDout(dout), dDqkv(qkv.size()),
      dScratch(B * NH * T * T);
  gpu::attentionBackward<float>(g.ctx(), dDqkv, dScratch, dDout, dQkv,
                                dProbsRef, B, T, C, NH, KV);
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
  Rng rng(seed);
  auto qkv = randomVector(rng, B * T * s.qkvWidth(), 1.5f);
  auto dout = randomVector(rng, B * T * C);
  std::vector<float> out(B * T * C), lse(B * NH * T), dqkv(qkv.size());
  cpu::blockedAttentionForward(blas, out.data(), lse.data(), qkv.data(), B, T,
                               C, NH, KV);
  cpu::blockedAttentionBackward(blas, dqkv.data(), dout.data(), qkv.data(),
                                out.data(), lse.data(), B, T, C, NH, KV);
  DevF dQkv(qkv), dOut(B * T * C), dLse(B * NH * T);
  gpu::blockedAttentionForward<float>(g.ctx(), dOut, dLse, dQkv, B, T, C, NH,
                                      KV);
  const auto gotOut = dOut.download(), gotLse = dLse.download();
  CHECK_REL(label("blockedAttentionForward out", s), gotOut, out, kTolFp32);
  CHECK_REL(label("blockedAttentionForward lse", s), gotLse, lse, kTolFp32);

  DevF dOutRef(out), dLseRef(lse), dDout(dout), dDqkv(qkv.size());
  gpu::blockedAttentionBackward<float>(g.ctx(), dDqkv, dDout, dQkv, dOutRef,
                                       dLseRef, B, T, C, NH, KV);
  const auto got = dDqkv.download();
  std::string what = label("blockedAttentionBackward", s);
  what.pop_back(); // reopen the bracket for the third's name
  checkDqkvThirds(what, got, dqkv, s, kTolFp32);

  dOut.poison(), dLse.poison(), dDqkv.poison();
  gpu::blockedAttentionForward<float>(g.ctx(), dOut, dLse, dQkv, B, T, C, NH,
                                      KV);
  gpu::blockedAttentionBackward<float>(g.ctx(), dDqkv, dDout, dQkv, dOutRef,
                                       dLseRef, B, T, C, NH, KV);
  CHECK_MSG(sameBits(dOut.download(), gotOut) &&
                sameBits(dLse.download(), gotLse) &&
                sameBits(dDqkv.download(), got),
            label("blockedAttention deterministic", s));
  CHECK_NO_ERROR(label("blockedAttention", s));
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
  }
  CHECK_NO_ERROR(label("adamw", s));
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

//===----------------------------------------------------------------------===//
// bf16: every templated kernel against the CPU's fp32 kernel on the same
// (bf16) inputs, its results rounded to bf16 as the CPU backend rounds them
//===----------------------------------------------------------------------===//

using BF16 = __nv_bfloat16;
using DevB = Dev<BF16>;

/// One bf16 unit in the last place of the largest reference value (2^-7
/// of it) on top of the fp32 tolerance: what rounding once, from sums in
/// another order, may add.
constexpr double kTolBf16 = kTolFp32 + 1.0 / 128;
/// Materialized attention rounds its T x T scores where cuBLAS stores them
/// (the CPU's widened kernel keeps them in float): two units.
constexpr double kTolBf16Attention = kTolFp32 + 2.0 / 128;

std::vector<BF16> toBF16(const std::vector<float> &v) {
  std::vector<BF16> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const uint16_t bits = fsdp::rt::roundToBF16(v[i]);
    std::memcpy(&out[i], &bits, sizeof bits);
  }
  return out;
}

std::vector<float> widen(const std::vector<BF16> &v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    uint16_t bits;
    std::memcpy(&bits, &v[i], sizeof bits);
    out[i] = fsdp::rt::widenBF16(bits);
  }
  return out;
}

/// v on bf16's grid (inputs), or rounded as the CPU backend stores a bf16
/// result (references).
std::vector<float> rounded(std::vector<float> v) { return widen(toBF16(v)); }

/// The device array's values, widened.
std::vector<float> got(const DevB &d) { return widen(d.download()); }

void testBF16Rows(Gpu &g, const Shape &s, uint64_t seed) {
  const int64_t B = s.B, T = s.T, C = s.C, V = s.V, N = B * T;
  const float eps = 1e-5f;
  Rng rng(seed);
  auto wte = rounded(randomVector(rng, V * C)),
       wpe = rounded(randomVector(rng, T * C));
  auto dout = rounded(randomVector(rng, N * C));
  auto tokens = randomTokens(rng, N, V);
  DevI dTokens(tokens);
  DevB dWte(toBF16(wte)), dWpe(toBF16(wpe)), dDout(toBF16(dout)), dOut(N * C);
  std::vector<float> ref(N * C), rWte(V * C), rWpe(T * C);
  cpu::embeddingForward(ref.data(), tokens.data(), wte.data(), wpe.data(), B, T,
                        C);
  gpu::embeddingForward<BF16>(g.ctx(), dOut, dTokens, dWte, dWpe, B, T, C);
  CHECK_REL(label("bf16 embeddingForward", s), got(dOut), rounded(ref), 0.0);
  cpu::embeddingBackward(rWte.data(), rWpe.data(), dout.data(), tokens.data(),
                         B, T, C, V, T);
  DevB dDwte(V * C), dDwpe(T * C);
  gpu::embeddingBackward<BF16>(g.ctx(), dDwte, dDwpe, dDout, dTokens, B, T, C,
                               V, T);
  CHECK_REL(label("bf16 embeddingBackward dwte", s), got(dDwte), rounded(rWte),
            kTolBf16);
  CHECK_REL(label("bf16 embeddingBackward dwpe", s), got(dDwpe), rounded(rWpe),
            kTolBf16);

  // Layer norm over the embedding's output; mean and rstd stay f32.
  auto w = rounded(randomVector(rng, C, 0.5f, 1.0f)),
       b = rounded(randomVector(rng, C, 0.2f));
  auto x = rounded(ref);
  std::vector<float> out(N * C), mean(N), rstd(N), dx(N * C), dw(C), db(C);
  cpu::layerNormForward(out.data(), mean.data(), rstd.data(), x.data(),
                        w.data(), b.data(), N, C, eps);
  DevB dX(toBF16(x)), dW(toBF16(w)), dB(toBF16(b)), dLn(N * C), dDx(N * C),
      dDw(C), dDb(C);
  DevF dMean(N), dRstd(N);
  gpu::layerNormForward<BF16>(g.ctx(), dLn, dMean, dRstd, dX, dW, dB, N, C,
                              eps);
  CHECK_REL(label("bf16 layerNormForward out", s), got(dLn), rounded(out),
            kTolBf16);
  CHECK_REL(label("bf16 layerNormForward mean (f32)", s), dMean.download(),
            mean, kTolFp32);
  CHECK_REL(label("bf16 layerNormForward rstd (f32)", s), dRstd.download(),
            rstd, kTolFp32);
  cpu::layerNormBackward(dx.data(), dw.data(), db.data(), dout.data(), x.data(),
                         w.data(), mean.data(), rstd.data(), N, C);
  DevF dMeanRef(mean), dRstdRef(rstd);
  gpu::layerNormBackward<BF16>(g.ctx(), dDx, dDw, dDb, dDout, dX, dW, dMeanRef,
                               dRstdRef, N, C);
  CHECK_REL(label("bf16 layerNormBackward dx", s), got(dDx), rounded(dx),
            kTolBf16);
  CHECK_REL(label("bf16 layerNormBackward dw", s), got(dDw), rounded(dw),
            kTolBf16);
  CHECK_REL(label("bf16 layerNormBackward db", s), got(dDb), rounded(db),
            kTolBf16);
  CHECK_NO_ERROR(label("bf16 embedding, layerNorm", s));
}

void testBF16Linear(Gpu &g, const cpu::Blas &blas, const Shape &s,
                    uint64_t seed) {
  const int64_t N = s.B * s.T, IC = s.C, OC = 2 * s.C + 3;
  Rng rng(seed);
  auto x = rounded(randomVector(rng, N * IC)),
       w = rounded(randomVector(rng, OC * IC));
  auto bias = rounded(randomVector(rng, OC)),
       dout = rounded(randomVector(rng, N * OC));
  DevB dX(toBF16(x)), dW(toBF16(w)), dBias(toBF16(bias)), dDout(toBF16(dout));
  std::vector<float> out(N * OC), dx(N * IC), dw(OC * IC), db(OC);
  cpu::linearForward(blas, out.data(), x.data(), w.data(), bias.data(), N, IC,
                     OC);
  cpu::linearGradInput(blas, dx.data(), dout.data(), w.data(), N, IC, OC);
  cpu::linearGradWeight(blas, dw.data(), dout.data(), x.data(), N, IC, OC);
  cpu::biasGrad(db.data(), dout.data(), N, OC);
  DevB dOut(N * OC), dDx(N * IC), dDw(OC * IC), dDb(OC);
  gpu::linearForward<BF16>(g.ctx(), dOut, dX, dW, dBias, N, IC, OC);
  gpu::linearGradInput<BF16>(g.ctx(), dDx, dDout, dW, N, IC, OC);
  gpu::linearGradWeight<BF16>(g.ctx(), dDw, dDout, dX, N, IC, OC);
  gpu::biasGrad<BF16>(g.ctx(), dDb, dDout, N, OC);
  CHECK_REL(label("bf16 linearForward (GemmEx), bias", s), got(dOut),
            rounded(out), kTolBf16);
  CHECK_REL(label("bf16 linearGradInput (GemmEx)", s), got(dDx), rounded(dx),
            kTolBf16);
  CHECK_REL(label("bf16 linearGradWeight (GemmEx)", s), got(dDw), rounded(dw),
            kTolBf16);
  CHECK_REL(label("bf16 biasGrad", s), got(dDb), rounded(db), kTolBf16);
  CHECK_NO_ERROR(label("bf16 linear", s));
}

void testBF16Elementwise(Gpu &g, const Shape &s, uint64_t seed) {
  const int64_t n = s.B * s.T * s.C + 3;
  Rng rng(seed);
  auto a = rounded(randomVector(rng, n, 3.0f)),
       b = rounded(randomVector(rng, n, 3.0f));
  auto [add, gelu, geluB, relu, reluB, scaled] = elementwiseReference(a, b);
  for (size_t offset = 0; offset < 2; ++offset) {
    const char *what = offset ? "unaligned" : "aligned";
    DevB dA(toBF16(a), offset), dB(toBF16(b), offset), dOut(n, offset);
    gpu::add<BF16>(g.ctx(), dOut, dA, dB, n);
    CHECK_REL(label("bf16 add", s, what), got(dOut), rounded(add), 0.0);
    gpu::geluForward<BF16>(g.ctx(), dOut, dA, n);
    CHECK_REL(label("bf16 geluForward", s, what), got(dOut), rounded(gelu),
              kTolBf16);
    gpu::geluBackward<BF16>(g.ctx(), dOut, dB, dA, n);
    CHECK_REL(label("bf16 geluBackward", s, what), got(dOut), rounded(geluB),
              kTolBf16);
    gpu::reluForward<BF16>(g.ctx(), dOut, dA, n);
    CHECK_REL(label("bf16 reluForward", s, what), got(dOut), rounded(relu),
              0.0);
    gpu::reluBackward<BF16>(g.ctx(), dOut, dB, dA, n);
    CHECK_REL(label("bf16 reluBackward", s, what), got(dOut), rounded(reluB),
              0.0);
    gpu::fill<BF16>(g.ctx(), dOut, n, -2.5f);
    CHECK_REL(label("bf16 fill", s, what), got(dOut),
              std::vector<float>(n, -2.5f), 0.0);
    gpu::scale<BF16>(g.ctx(), dA, n, 0.375f);
    CHECK_REL(label("bf16 scale", s, what), got(dA), rounded(scaled), 0.0);
  }
  CHECK_NO_ERROR(label("bf16 elementwise", s));
}

/// Materialized (probs and the backward's scratch bf16) and blocked (lse
/// f32) attention; the backwards from the CPU's rounded forward results.
void testBF16Attention(Gpu &g, const cpu::Blas &blas, const Shape &s,
                       uint64_t seed, bool materialized) {
  const int64_t B = s.B, T = s.T, C = s.C, NH = s.NH, TT = B * NH * T * T;
  const int64_t KV = s.kv();
  Rng rng(seed);
  auto qkv = rounded(randomVector(rng, B * T * s.qkvWidth(), 1.5f));
  auto dout = rounded(randomVector(rng, B * T * C));
  std::vector<float> out(B * T * C), side(materialized ? TT : B * NH * T),
      dqkv(qkv.size()), scratch(materialized ? TT : 0);
  const char *form = materialized ? "bf16 attention" : "bf16 blocked attention";
  DevB dQkv(toBF16(qkv)), dDout(toBF16(dout)), dOut(B * T * C),
      dDqkv(qkv.size());
  if (materialized) {
    cpu::attentionForward(blas, out.data(), side.data(), qkv.data(), B, T, C,
                          NH, KV);
    side = rounded(side);
    cpu::attentionBackward(blas, dqkv.data(), scratch.data(), dout.data(),
                           qkv.data(), side.data(), B, T, C, NH, KV);
    DevB dProbs(TT), dProbsRef(toBF16(side)), dScratch(TT);
    gpu::attentionForward<BF16>(g.ctx(), dOut, dProbs, dQkv, B, T, C, NH, KV);
    CHECK_REL(label(form, s, "probs"), got(dProbs), side, kTolBf16Attention);
    gpu::attentionBackward<BF16>(g.ctx(), dDqkv, dScratch, dDout, dQkv,
                                 dProbsRef, B, T, C, NH, KV);
  } else {
    cpu::blockedAttentionForward(blas, out.data(), side.data(), qkv.data(), B,
                                 T, C, NH, KV);
    out = rounded(out); // the backward reads the stored (bf16) output
    cpu::blockedAttentionBackward(blas, dqkv.data(), dout.data(), qkv.data(),
                                  out.data(), side.data(), B, T, C, NH, KV);
    DevF dLse(B * NH * T), dLseRef(side);
    DevB dOutRef(toBF16(out));
    gpu::blockedAttentionForward<BF16>(g.ctx(), dOut, dLse, dQkv, B, T, C, NH,
                                       KV);
    CHECK_REL(label(form, s, "lse (f32)"), dLse.download(), side, kTolFp32);
    gpu::blockedAttentionBackward<BF16>(g.ctx(), dDqkv, dDout, dQkv, dOutRef,
                                        dLseRef, B, T, C, NH, KV);
  }
  const double tol = materialized ? kTolBf16Attention : kTolBf16;
  CHECK_REL(label(form, s, "out"), got(dOut), rounded(out), tol);
  checkDqkvThirds(label(form, s).substr(0, label(form, s).size() - 1),
                  got(dDqkv), rounded(dqkv), s, tol);
  CHECK_NO_ERROR(label(form, s));
}

void testBF16CrossEntropy(Gpu &g, int64_t N, int64_t V, uint64_t seed) {
  const Shape s{"bf16", 1, N, 0, 1, V};
  Rng rng(seed);
  auto logits = rounded(randomVector(rng, N * V, 4.0f));
  auto targets = randomTokens(rng, N, V);
  float loss = 0.0f;
  const float dloss = 0.75f;
  std::vector<float> dlogits(N * V);
  cpu::crossEntropyForward(&loss, logits.data(), targets.data(), N, V);
  cpu::crossEntropyBackward(dlogits.data(), &dloss, logits.data(),
                            targets.data(), N, V);
  DevB dLogits(toBF16(logits)), dDlogits(N * V);
  DevF dLoss(1), dScratch(N), dDloss(std::vector<float>{dloss});
  DevI dTargets(targets);
  gpu::crossEntropyForward<BF16>(g.ctx(), dLoss, dLogits, dTargets, N, V);
  CHECK_REL(label("bf16 crossEntropyForward (f32 loss)", s, "one block"),
            dLoss.download(), std::vector<float>{loss}, kTolFp32);
  gpu::crossEntropyForward<BF16>(g.ctx(), dLoss, dLogits, dTargets, N, V,
                                 dScratch);
  CHECK_REL(label("bf16 crossEntropyForward (f32 loss)", s, "row scratch"),
            dLoss.download(), std::vector<float>{loss}, kTolFp32);
  gpu::crossEntropyBackward<BF16>(g.ctx(), dDlogits, dDloss, dLogits, dTargets,
                                  N, V);
  CHECK_REL(label("bf16 crossEntropyBackward", s), got(dDlogits),
            rounded(dlogits), kTolBf16);
  CHECK_NO_ERROR(label("bf16 crossEntropy", s));
}

/// The cast kernel on the device (cvt.rn.bf16.f32, NaN kept as the CPU
/// keeps it) against roundToBF16, bit for bit: ties both ways, NaNs,
/// infinities, overflow, subnormals, random words; and back, exactly.
void testBF16Cast(Gpu &g) {
  std::vector<uint32_t> words = {
      0x3F808000u, 0x3F818000u, 0x3F808001u, 0x3F807FFFu, 0xBF808000u,
      0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFF800001u, 0x7FA12345u,
      0x7F800000u, 0xFF800000u, 0x7F7FFFFFu, 0x7F7F7FFFu, 0x7F7F8000u,
      0x00000001u, 0x00008000u, 0x00018000u, 0x807FFFFFu, 0x80000000u};
  Rng rng(4242);
  for (int i = 0; i < 1 << 20; ++i)
    words.push_back(uint32_t(rng.next() >> 32));
  std::vector<float> values(words.size());
  std::memcpy(values.data(), words.data(), 4 * words.size());
  for (size_t offset = 0; offset < 2; ++offset) {
    DevF dIn(values, offset), dBack(values.size(), offset);
    DevB dOut(values.size(), offset);
    gpu::cast(g.ctx(), dOut, dIn, int64_t(values.size()));
    const std::vector<BF16> bits = dOut.download(), want = toBF16(values);
    CHECK_MSG(std::memcmp(bits.data(), want.data(), 2 * bits.size()) == 0,
              std::string("bf16 cast f32 -> bf16: roundToBF16's bits (") +
                  (offset ? "unaligned" : "aligned") + ")");
    gpu::cast(g.ctx(), dBack, dOut, int64_t(values.size()));
    const std::vector<float> back = dBack.download(), wide = widen(want);
    CHECK_MSG(std::memcmp(back.data(), wide.data(), 4 * back.size()) == 0,
              std::string("bf16 cast bf16 -> f32: exact (") +
                  (offset ? "unaligned" : "aligned") + ")");
  }
  CHECK_NO_ERROR("bf16 cast");
}

//===----------------------------------------------------------------------===//
// Llama's ops (rms_norm, swiglu, rope), f32 and bf16: the CPU's fp32
// kernel on the same inputs (on bf16's grid for bf16), its results rounded
// as the CPU backend stores them
//===----------------------------------------------------------------------===//

template <typename E> std::vector<E> asElements(const std::vector<float> &v);
template <> std::vector<float> asElements<float>(const std::vector<float> &v) {
  return v;
}
template <> std::vector<BF16> asElements<BF16>(const std::vector<float> &v) {
  return toBF16(v);
}
std::vector<float> values(const Dev<float> &d) { return d.download(); }
std::vector<float> values(const DevB &d) { return got(d); }

template <typename E> void testLlamaOps(Gpu &g, const Shape &s, uint64_t seed) {
  constexpr bool bf16 = std::is_same<E, BF16>::value;
  const double tol = bf16 ? kTolBf16 : kTolFp32;
  auto onGrid = [](std::vector<float> v) { return bf16 ? rounded(v) : v; };
  const char *type = bf16 ? "bf16 " : "";
  auto name = [&](const char *k) { return std::string(type) + k; };
  const int64_t N = s.B * s.T, C = s.C;
  Rng rng(seed);
  // RMSNorm: rstd is f32 either way.
  auto x = onGrid(randomVector(rng, N * C, 2.0f, 0.5f));
  auto w = onGrid(randomVector(rng, C, 0.5f, 1.0f));
  auto dout = onGrid(randomVector(rng, N * C));
  std::vector<float> out(N * C), rstd(N), dx(N * C), dw(C);
  cpu::rmsNormForward(out.data(), rstd.data(), x.data(), w.data(), N, C, 1e-6f);
  cpu::rmsNormBackward(dx.data(), dw.data(), dout.data(), x.data(), w.data(),
                       rstd.data(), N, C);
  Dev<E> dX(asElements<E>(x)), dW(asElements<E>(w)), dOut(N * C),
      dDout(asElements<E>(dout)), dDx(N * C), dDw(C);
  DevF dRstd(N), dRstdRef(rstd);
  gpu::rmsNormForward<E>(g.ctx(), dOut, dRstd, dX, dW, N, C, 1e-6f);
  gpu::rmsNormBackward<E>(g.ctx(), dDx, dDw, dDout, dX, dW, dRstdRef, N, C);
  CHECK_REL(label(name("rmsNormForward out").c_str(), s), values(dOut),
            onGrid(out), tol);
  CHECK_REL(label(name("rmsNormForward rstd (f32)").c_str(), s),
            dRstd.download(), rstd, kTolFp32);
  CHECK_REL(label(name("rmsNormBackward dx").c_str(), s), values(dDx),
            onGrid(dx), tol);
  CHECK_REL(label(name("rmsNormBackward dw").c_str(), s), values(dDw),
            onGrid(dw), tol);

  // SwiGLU over N x C + 3 elements (not a multiple of 4).
  const int64_t n = N * C + 3;
  auto gate = onGrid(randomVector(rng, n, 4.0f)),
       up = onGrid(randomVector(rng, n, 2.0f)),
       dy = onGrid(randomVector(rng, n));
  std::vector<float> h(n), dg(n), du(n);
  cpu::swigluForward(h.data(), gate.data(), up.data(), n);
  cpu::swigluBackward(dg.data(), du.data(), dy.data(), gate.data(), up.data(),
                      n);
  Dev<E> dGate(asElements<E>(gate)), dUp(asElements<E>(up)),
      dDy(asElements<E>(dy)), dH(n), dDg(n), dDu(n);
  gpu::swigluForward<E>(g.ctx(), dH, dGate, dUp, n);
  gpu::swigluBackward<E>(g.ctx(), dDg, dDu, dDy, dGate, dUp, n);
  CHECK_REL(label(name("swigluForward").c_str(), s), values(dH), onGrid(h),
            tol);
  CHECK_REL(label(name("swigluBackward dgate").c_str(), s), values(dDg),
            onGrid(dg), tol);
  CHECK_REL(label(name("swigluBackward dup").c_str(), s), values(dDu),
            onGrid(du), tol);

  // Rope, multi-head and grouped (one kv head), heads of 8; the GPU's
  // powf, cosf and sinf against glibc's.
  for (int64_t KV : {s.NH, int64_t(1)}) {
    const int64_t hs = 8, m = s.B * s.T * (s.NH + 2 * KV) * hs;
    auto qkv = onGrid(randomVector(rng, m, 2.0f));
    std::vector<float> f(m), b(m);
    cpu::ropeForward(f.data(), qkv.data(), s.B, s.T, s.NH, KV, hs, 10000.0f);
    cpu::ropeBackward(b.data(), qkv.data(), s.B, s.T, s.NH, KV, hs, 10000.0f);
    Dev<E> dQkv(asElements<E>(qkv)), dF(m), dB(m);
    gpu::ropeForward<E>(g.ctx(), dF, dQkv, s.B, s.T, s.NH, KV, hs, 10000.0f);
    gpu::ropeBackward<E>(g.ctx(), dB, dQkv, s.B, s.T, s.NH, KV, hs, 10000.0f);
    const char *what = KV == 1 ? "kv_heads=1" : "kv_heads=heads";
    CHECK_REL(label(name("ropeForward").c_str(), s, what), values(dF),
              onGrid(f), tol);
    CHECK_REL(label(name("ropeBackward").c_str(), s, what), values(dB),
              onGrid(b), tol);
  }
  CHECK_NO_ERROR(label(name("llama ops").c_str(), s));
}

void testBF16(Gpu &g, const cpu::Blas *blas, uint64_t seed) {
  testBF16Cast(g);
  for (const Shape &s : kShapes) {
    testBF16Rows(g, s, seed++);
    testBF16Elementwise(g, s, seed++);
    if (!blas)
      continue;
    testBF16Linear(g, *blas, s, seed++);
    testBF16Attention(g, *blas, s, seed++, /*materialized=*/true);
    testBF16Attention(g, *blas, s, seed++, /*materialized=*/false);
  }
  if (blas) {
    testBF16Attention(g, *blas, {"T=300", 2, 300, 48, 4, 1}, seed++, true);
    testBF16Attention(g, *blas, {"hs=128", 2, 300, 512, 4, 1}, seed++, false);
    testBF16Attention(g, *blas, {"gpt2", 4, 1024, 768, 12, 1}, seed++, false);
  }
  testBF16CrossEntropy(g, 7, 37, seed++);
  testBF16CrossEntropy(g, 37, 50257, seed++);
}

//===----------------------------------------------------------------------===//
// Timing at the GPT-2 124M shape (information only)
//===----------------------------------------------------------------------===//

/// Fills a device array with a random pattern of up to 1M values, tiled.
void randomFill(DevF &d, Rng &rng, float scale = 1.0f) {
  const size_t tile = std::min<size_t>(d.size(), size_t(1) << 20);
  auto pattern = randomVector(rng, tile, scale);
  for (size_t i = 0; i < d.size(); i += tile)
    cudaOrDie(cudaMemcpy(d.get() + i, pattern.data(),
                         sizeof(float) * std::min(tile, d.size() - i),
                         cudaMemcpyHostToDevice),
              "cudaMemcpy");
}

template <typename F> void timeIt(Gpu &g, const char *what, F &&f) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  f(); // warm-up (cuBLAS heuristics, first-launch costs)
  const int iters = 5;
  cudaEventRecord(start, g.stream);
  for (int i = 0; i < iters; ++i)
    f();
  cudaEventRecord(stop, g.stream);
  cudaEventSynchronize(stop);
  float ms = 0.0f;
  cudaEventElapsedTime(&ms, start, stop);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::string message;
  if (gpu::takeError(message))
    std::printf("  time    %-44s error: %s\n", what, message.c_str());
  else
    std::printf("  time    %-44s %9.3f ms\n", what, ms / iters);
  std::fflush(stdout);
}

/// A bf16 device array from a random pattern (through the cast kernel).
void randomFill(DevB &d, Rng &rng, float scale = 1.0f) {
  DevF wide(d.size());
  randomFill(wide, rng, scale);
  gpu::cast(gpu::Context{nullptr, nullptr}, d, wide, int64_t(d.size()));
  cudaOrDie(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

/// The GEMM-based kernels in bf16 at the GPT-2 124M shape (GemmEx, fp32
/// compute; the handle's math mode does not apply to bf16 inputs).
void timeGpt2BF16(Gpu &g, int64_t B, int64_t T, int64_t C, int64_t NH,
                  int64_t V) {
  const int64_t N = B * T, OC = 4 * C;
  const gpu::Context ctx = g.ctx();
  Rng rng(778);
  g.mathMode(CUBLAS_DEFAULT_MATH);
  {
    DevB x(N * C), w(OC * C), bias(OC), out(N * OC), dx(N * C), dw(OC * C);
    randomFill(x, rng);
    randomFill(w, rng);
    randomFill(bias, rng);
    randomFill(out, rng);
    timeIt(g, "linearForward C->4C, bias (bf16)",
           [&] { gpu::linearForward<BF16>(ctx, out, x, w, bias, N, C, OC); });
    timeIt(g, "linearGradInput C->4C (bf16)",
           [&] { gpu::linearGradInput<BF16>(ctx, dx, out, w, N, C, OC); });
    timeIt(g, "linearGradWeight C->4C (bf16)",
           [&] { gpu::linearGradWeight<BF16>(ctx, dw, out, x, N, C, OC); });
  }
  {
    DevB x(N * C), wte(V * C), logits(N * V);
    randomFill(x, rng);
    randomFill(wte, rng, 0.1f);
    timeIt(g, "linearForward lm head C->V (bf16)", [&] {
      gpu::linearForward<BF16>(ctx, logits, x, wte, nullptr, N, C, V);
    });
  }
  {
    DevB qkv(N * 3 * C), out(N * C), probs(B * NH * T * T),
        scratch(B * NH * T * T), dqkv(N * 3 * C);
    DevF lse(B * NH * T);
    randomFill(qkv, rng);
    randomFill(out, rng);
    timeIt(g, "attentionForward (bf16)", [&] {
      gpu::attentionForward<BF16>(ctx, out, probs, qkv, B, T, C, NH, NH);
    });
    timeIt(g, "attentionBackward (bf16)", [&] {
      gpu::attentionBackward<BF16>(ctx, dqkv, scratch, out, qkv, probs, B, T, C,
                                   NH, NH);
    });
    timeIt(g, "blockedAttentionForward (bf16)", [&] {
      gpu::blockedAttentionForward<BF16>(ctx, out, lse, qkv, B, T, C, NH, NH);
    });
    timeIt(g, "blockedAttentionBackward (bf16)", [&] {
      gpu::blockedAttentionBackward<BF16>(ctx, dqkv, out, qkv, out, lse, B, T,
                                          C, NH, NH);
    });
  }
  g.mathMode(CUBLAS_PEDANTIC_MATH);
}

void timeGpt2(Gpu &g) {
  const int64_t B = 4, T = 1024, C = 768, NH = 12, V = 50257, N = B * T;
  const int64_t params = 124439808; // GPT-2 124M
  size_t freeBytes = 0, totalBytes = 0;
  cudaMemGetInfo(&freeBytes, &totalBytes);
  // The largest set of buffers alive at once: the AdamW step's four arrays.
  const size_t need = sizeof(float) * size_t(4 * params + 2 * N * V);
  if (freeBytes < need) {
    std::printf("cuda-kernels: timing skipped (needs %.1f GiB, %.1f free)\n",
                need / 1073741824.0, freeBytes / 1073741824.0);
    return;
  }
  std::printf("cuda-kernels: GPU time per call at the GPT-2 124M shape "
              "(B=%lld T=%lld C=%lld NH=%lld V=%lld)\n",
              (long long)B, (long long)T, (long long)C, (long long)NH,
              (long long)V);
  Rng rng(777);
  const gpu::Context ctx = g.ctx();
  {
    DevI tokens(randomTokens(rng, N, V));
    DevF wte(V * C), wpe(T * C), out(N * C), dwte(V * C), dwpe(T * C);
    randomFill(wte, rng);
    randomFill(wpe, rng);
    randomFill(out, rng);
    timeIt(g, "embeddingForward", [&] {
      gpu::embeddingForward<float>(ctx, out, tokens, wte, wpe, B, T, C);
    });
    timeIt(g, "embeddingBackward", [&] {
      gpu::embeddingBackward<float>(ctx, dwte, dwpe, out, tokens, B, T, C, V,
                                    T);
    });
  }
  {
    DevF x(N * C), w(C), b(C), out(N * C), mean(N), rstd(N), dx(N * C), dw(C),
        db(C);
    randomFill(x, rng);
    randomFill(w, rng);
    randomFill(b, rng);
    timeIt(g, "layerNormForward", [&] {
      gpu::layerNormForward<float>(ctx, out, mean, rstd, x, w, b, N, C, 1e-5f);
    });
    timeIt(g, "layerNormBackward", [&] {
      gpu::layerNormBackward<float>(ctx, dx, dw, db, out, x, w, mean, rstd, N,
                                    C);
    });
  }
  {
    const int64_t n = N * 4 * C;
    DevF a(n), b(n), out(n);
    randomFill(a, rng);
    randomFill(b, rng);
    timeIt(g, "add (N x 4C)", [&] { gpu::add<float>(ctx, out, a, b, n); });
    timeIt(g, "geluForward (N x 4C)",
           [&] { gpu::geluForward<float>(ctx, out, a, n); });
    timeIt(g, "geluBackward (N x 4C)",
           [&] { gpu::geluBackward<float>(ctx, out, b, a, n); });
    timeIt(g, "reluForward (N x 4C)",
           [&] { gpu::reluForward<float>(ctx, out, a, n); });
    timeIt(g, "fill (N x 4C)", [&] { gpu::fill<float>(ctx, out, n, 0.0f); });
    timeIt(g, "scale (N x 4C)", [&] { gpu::scale<float>(ctx, out, n, 1.0f); });
    timeIt(g, "biasGrad (N x 4C)",
           [&] { gpu::biasGrad<float>(ctx, out, a, N, 4 * C); });
    timeIt(g, "biasGrad (N x C)",
           [&] { gpu::biasGrad<float>(ctx, out, a, N, C); });
  }
  for (int tf32 = 0; tf32 < 2; ++tf32) {
    g.mathMode(tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH);
    const std::string mode = tf32 ? " (tf32)" : " (fp32)";
    {
      const int64_t OC = 4 * C;
      DevF x(N * C), w(OC * C), bias(OC), out(N * OC), dx(N * C), dw(OC * C);
      randomFill(x, rng);
      randomFill(w, rng);
      randomFill(bias, rng);
      randomFill(out, rng);
      timeIt(g, ("linearForward C->4C, bias" + mode).c_str(), [&] {
        gpu::linearForward<float>(ctx, out, x, w, bias, N, C, OC);
      });
      timeIt(g, ("linearGradInput C->4C" + mode).c_str(),
             [&] { gpu::linearGradInput<float>(ctx, dx, out, w, N, C, OC); });
      timeIt(g, ("linearGradWeight C->4C" + mode).c_str(),
             [&] { gpu::linearGradWeight<float>(ctx, dw, out, x, N, C, OC); });
    }
    {
      DevF x(N * C), wte(V * C), logits(N * V);
      randomFill(x, rng);
      randomFill(wte, rng, 0.1f);
      timeIt(g, ("linearForward lm head C->V" + mode).c_str(), [&] {
        gpu::linearForward<float>(ctx, logits, x, wte, nullptr, N, C, V);
      });
    }
    {
      DevF qkv(N * 3 * C), out(N * C), probs(B * NH * T * T),
          scratch(B * NH * T * T), dqkv(N * 3 * C);
      randomFill(qkv, rng);
      randomFill(out, rng);
      timeIt(g, ("attentionForward" + mode).c_str(), [&] {
        gpu::attentionForward<float>(ctx, out, probs, qkv, B, T, C, NH, NH);
      });
      timeIt(g, ("attentionBackward" + mode).c_str(), [&] {
        gpu::attentionBackward<float>(ctx, dqkv, scratch, out, qkv, probs, B, T,
                                      C, NH, NH);
      });
    }
  }
  g.mathMode(CUBLAS_PEDANTIC_MATH);
  {
    DevF qkv(N * 3 * C), out(N * C), lse(B * NH * T), dqkv(N * 3 * C);
    randomFill(qkv, rng);
    randomFill(out, rng);
    timeIt(g, "blockedAttentionForward", [&] {
      gpu::blockedAttentionForward<float>(ctx, out, lse, qkv, B, T, C, NH, NH);
    });
    timeIt(g, "blockedAttentionBackward", [&] {
      gpu::blockedAttentionBackward<float>(ctx, dqkv, out, qkv, out, lse, B, T,
                                           C, NH, NH);
    });
  }
  {
    DevF logits(N * V), dlogits(N * V), loss(1), scratch(N),
        dloss(std::vector<float>{1.0f});
    DevI targets(randomTokens(rng, N, V));
    randomFill(logits, rng, 4.0f);
    timeIt(g, "crossEntropyForward (one block)", [&] {
      gpu::crossEntropyForward<float>(ctx, loss, logits, targets, N, V);
    });
    timeIt(g, "crossEntropyForward (row scratch)", [&] {
      gpu::crossEntropyForward<float>(ctx, loss, logits, targets, N, V,
                                      scratch);
    });
    timeIt(g, "crossEntropyBackward", [&] {
      gpu::crossEntropyBackward<float>(ctx, dlogits, dloss, logits, targets, N,
                                       V);
    });
  }
  {
    DevF p(params), m(params), v(params), grad(params);
    randomFill(p, rng);
    randomFill(grad, rng);
    cudaOrDie(cudaMemset(m, 0, sizeof(float) * params), "cudaMemset");
    cudaOrDie(cudaMemset(v, 0, sizeof(float) * params), "cudaMemset");
    timeIt(g, "adamw (124M parameters)", [&] {
      gpu::adamw(ctx, p, m, v, grad, params, 6e-4f, 0.9f, 0.95f, 1e-8f, 0.1f,
                 1);
    });
  }
  timeGpt2BF16(g, B, T, C, NH, V);
}

} // namespace

int main() {
  int devices = 0;
  const cudaError_t err = cudaGetDeviceCount(&devices);
  if (err != cudaSuccess || devices == 0) {
    std::printf("cuda-kernels: no CUDA device: skipped (%s)\n",
                err != cudaSuccess ? cudaGetErrorString(err)
                                   : "cudaGetDeviceCount found none");
    return 77;
  }
  cudaDeviceProp prop;
  cudaOrDie(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  std::printf("cuda-kernels: %s (sm_%d%d, %d SMs)\n", prop.name, prop.major,
              prop.minor, prop.multiProcessorCount);

  Gpu g;
  cudaOrDie(cudaStreamCreate(&g.stream), "cudaStreamCreate");
  if (cublasCreate(&g.blas) != CUBLAS_STATUS_SUCCESS ||
      cublasSetStream(g.blas, g.stream) != CUBLAS_STATUS_SUCCESS)
    fatal("cannot create the cuBLAS handle");
  g.mathMode(CUBLAS_PEDANTIC_MATH);

  std::string error;
  std::unique_ptr<cpu::Blas> blas = cpu::Blas::open("openblas", 1, error);
  if (!blas)
    blas = cpu::Blas::open("blis", 1, error);
  if (blas)
    std::printf("cuda-kernels: CPU reference GEMMs: %s\n",
                blas->description().c_str());
  else
    std::printf("cuda-kernels: no CPU BLAS (%s): GEMM-based checks skipped\n",
                error.c_str());

  testErrorRecording(g);
  testGradClip(g, 900);
  uint64_t seed = 1;
  for (const Shape &s : kShapes) {
    testEmbedding(g, s, seed++);
    testLayerNorm(g, s, seed++);
    testLinear(g, blas.get(), s, seed++, kTolFp32, "fp32");
    testElementwise(g, s, seed++);
    if (blas)
      testAttention(g, *blas, s, seed++, kTolFp32, "fp32");
    testAdamW(g, s, seed++);
  }
  // T > 256: the causal row blocks of the attention products (256 + 44).
  const Shape twoBlocks{"T=300", 2, 300, 48, 4, 1};
  if (blas)
    testAttention(g, *blas, twoBlocks, seed++, kTolFp32, "fp32");
  // Grouped-query attention, both forms: kv heads of 2 and of 4 query
  // heads (Llama 3's ratio), one kv head (multi-query). Seeds of their own,
  // so that the other cases keep theirs.
  const Shape grouped[] = {
      {"GQA hs=8 KV=2", 2, 70, 32, 4, 1, 2},
      {"GQA T=300 KV=1", 1, 300, 48, 4, 1, 1},
      {"GQA hs=64 KV=2", 2, 130, 512, 8, 1, 2},
      {"GQA hs=128 KV=1", 1, 200, 512, 4, 1, 1},
  };
  if (blas)
    for (size_t i = 0; i < std::size(grouped); ++i) {
      testAttention(g, *blas, grouped[i], 700 + i, kTolFp32, "fp32");
      testBlockedAttention(g, *blas, grouped[i], 710 + i);
      testBF16Attention(g, *blas, grouped[i], 720 + i, /*materialized=*/true);
      testBF16Attention(g, *blas, grouped[i], 730 + i, /*materialized=*/false);
    }
  // The blocked attention: head sizes in each compiled bucket (32, 64,
  // 128) and past their edges, T off the tiles (32 rows; 16 above
  // hs = 64), and GPT-2 124M's shape.
  const Shape blockedShapes[] = {
      {"T=1", 1, 1, 8, 2, 1},
      {"hs=5", 3, 7, 15, 3, 1},
      {"hs=33", 2, 65, 66, 2, 1},
      {"hs=64", 2, 130, 256, 4, 1},
      {"hs=100", 1, 77, 200, 2, 1},
      {"hs=128", 2, 300, 512, 4, 1},
      {"gpt2 B=4 T=1024 C=768 NH=12", 4, 1024, 768, 12, 1},
  };
  if (blas)
    for (const Shape &s : blockedShapes)
      testBlockedAttention(g, *blas, s, seed++);
  testCrossEntropy(g, "small", 7, 37, seed++);
  testCrossEntropy(g, "gpt2-like", 128, 517, seed++);
  testCrossEntropy(g, "V=50257", 37, 50257, seed++);

  g.mathMode(CUBLAS_TF32_TENSOR_OP_MATH);
  for (const Shape &s : kShapes) {
    testLinear(g, blas.get(), s, seed++, kTolTf32, "tf32");
    if (blas)
      testAttention(g, *blas, s, seed++, kTolTf32, "tf32");
  }
  if (blas)
    testAttention(g, *blas, twoBlocks, seed++, kTolTf32, "tf32");
  g.mathMode(CUBLAS_PEDANTIC_MATH);
  testBF16(g, blas.get(), seed);
  for (const Shape &s : kShapes) {
    testLlamaOps<float>(g, s, seed++);
    testLlamaOps<BF16>(g, s, seed++);
  }

  if (!std::getenv("FSDP_CUDA_TEST_NO_TIMING"))
    timeGpt2(g);

  cublasDestroy(g.blas);
  cudaStreamDestroy(g.stream);
  std::printf("cuda-kernels: %d passed, %d failed\n", gPassed, gFailed);
  return gFailed == 0 ? 0 : 1;
}
