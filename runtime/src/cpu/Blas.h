//===- Blas.h - a CBLAS library loaded at run time --------------*- C++ -*-===//
//
// The CPU backend does its GEMMs through a CBLAS library that it opens with
// dlopen, so that one binary can run OpenBLAS or BLIS (chosen by --blas,
// see docs/cpu-step.md) and so that the runtime builds on machines that
// have neither. The library reports the kernel it runs (OpenBLAS's core
// name, BLIS's architecture).
//
// `onednn` is oneDNN's matmul primitive (OneDnnGemm.h) for every GEMM of
// at least kOneDnnMinFlops, and OpenBLAS for the smaller ones: oneDNN runs
// even a 64 x 64 x 16 product across the OpenMP team, whose parallel
// regions on a busy 2-core machine cost milliseconds each (a tiny GPT-2's
// step took 22 ms against OpenBLAS's 0.4, which keeps small GEMMs on one
// thread). FSDP_ONEDNN_MIN_FLOPS overrides the bound (0: every GEMM, as
// the tests run it).
//
// `auto`, the default, dispatches by the CPU's features at run time:
// f32 GEMMs on OpenBLAS (so f32 numbers do not depend on the CPU's bf16
// units), bf16 GEMMs of at least the bound on oneDNN where the CPU has
// bf16 units (AVX512-BF16 or AMX) and oneDNN loads, and everywhere else
// bf16 GEMMs widened to OpenBLAS's f32 GEMM, as `openblas` does.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_CPU_BLAS_H
#define FSDP_RUNTIME_CPU_BLAS_H

#include <cstdint>
#include <memory>
#include <string>

namespace fsdp::rt::cpu {

class OneDnnGemm;

/// One row-major GEMM, C = op(A) op(B) + beta C (Blas::sgemm's contract,
/// alpha 1).
struct GemmShape {
  bool transA, transB;
  int64_t M, N, K, lda, ldb, ldc;
  float beta;
};

class Blas {
public:
  /// --blas onednn's default bound (2 M N K) below which OpenBLAS runs a
  /// GEMM instead.
  static constexpr double kOneDnnMinFlops = 4e6;

  /// Opens `library`: "auto", "openblas", "blis" or "onednn". For OpenBLAS on a
  /// CPU with AVX-512, sets OPENBLAS_CORETYPE=SkylakeX first unless the
  /// environment already sets it (Debian's OpenBLAS 0.3.21 does not recognise
  /// newer CPUs and would fall back to a generic kernel). On failure returns
  /// null and sets `error`.
  static std::unique_ptr<Blas> open(const std::string &library, int threads,
                                    std::string &error);
  ~Blas();

  /// Row-major C[M,N] = alpha * op(A) * op(B) + beta * C, where op(A) is
  /// M x K (A stored K x M when transA) and op(B) is K x N (B stored N x K
  /// when transB); lda/ldb/ldc are row strides in elements.
  void sgemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K,
             float alpha, const float *A, int64_t lda, const float *B,
             int64_t ldb, float beta, float *C, int64_t ldc) const;

  /// sgemm with bf16 operands and result (bf16 bits, alpha 1; Linear's
  /// bf16 kernels, BF16Linear.cpp) on the library's bf16 GEMM: only
  /// --blas onednn and auto (on bf16 units) have one, and only for GEMMs
  /// of at least the oneDNN bound. False (nothing done) otherwise: the
  /// caller widens.
  bool gemmBF16(bool transA, bool transB, int64_t M, int64_t N, int64_t K,
                const uint16_t *A, int64_t lda, const uint16_t *B, int64_t ldb,
                float beta, uint16_t *C, int64_t ldc) const;
  /// Whether gemmBF16 takes an M x N x K GEMM.
  bool takesBF16(int64_t M, int64_t N, int64_t K) const;
  /// Makes now what gemmBF16 needs for `shape` (a oneDNN primitive, its
  /// share of the scratchpad), which it would otherwise make on first use.
  /// Under --blas auto the first shape of at least the bound opens oneDNN
  /// (where the CPU has bf16 units): before it, takesBF16 is false.
  void prepareBF16(const GemmShape &shape);
  /// The heap the library holds for the GEMMs prepared so far (oneDNN's
  /// scratchpad): part of what fsdp-run predicts outside the arena.
  uint64_t heapBytes() const;
  /// The resident memory the library adds that is not heap (oneDNN's code
  /// and generated kernels once it is loaded: kOneDnnMappedBytes).
  uint64_t mappedBytes() const;
  /// oneDNN's resident share beyond the heap, an upper bound: 5.3 MiB
  /// measured (Debian's 2.6.3 on AMX, a tiny GPT-2's bf16 GEMMs, one
  /// thread), against the same run on OpenBLAS alone.
  static constexpr uint64_t kOneDnnMappedBytes = uint64_t(8) << 20;

  /// "openblas 0.3.21 (core SkylakeX)", "blis 0.9.0 (arch zen3)", ...
  const std::string &description() const { return description_; }
  const std::string &library() const { return library_; }

private:
  Blas() = default;
  static std::unique_ptr<Blas> openOneDnn(int threads, std::string &error);
  static std::unique_ptr<Blas> openAuto(int threads, std::string &error);
  void openAutoBF16();
  std::unique_ptr<OneDnnGemm> dnnl_; ///< --blas onednn, auto's bf16
  bool dnnlF32_ = false;             ///< f32 GEMMs on oneDNN too (onednn)
  bool autoBF16Pending_ = false;     ///< auto: oneDNN not tried yet
  double dnnlMinFlops_ = 0.0;        ///< smaller GEMMs go to OpenBLAS
  void *handle_ = nullptr;
  using SgemmFn = void (*)(int, int, int, int, int, int, float, const float *,
                           int, const float *, int, float, float *, int);
  SgemmFn sgemm_ = nullptr;
  std::string library_, description_;
};

} // namespace fsdp::rt::cpu

#endif // FSDP_RUNTIME_CPU_BLAS_H
