//===- OneDnnGemm.h - f32 GEMMs through oneDNN's matmul ---------*- C++ -*-===//
//
// `--blas onednn`: the CPU backend's GEMMs through oneDNN's matmul
// primitive (Debian's libdnnl.so.2, opened with dlopen like the CBLAS
// libraries, so that neither the build nor fsdp-run needs it). oneDNN
// picks its kernels by the CPU's own features (AVX-512 where there is
// one), whatever OPENBLAS_CORETYPE says: on the AMD Zen 5 of
// docs/cpu-gemm.md, where the environment holds OpenBLAS to its AVX2
// Haswell kernel, its f32 GEMMs ran about twice OpenBLAS's rate on GPT-2
// 124M's shapes.
//
// A primitive is made once per GEMM shape (transposes, sizes, strides,
// alpha, beta) and kept: making one costs up to milliseconds (the JIT),
// running one, tens of microseconds of set-up at most. The operands are
// plain strided memory (the transposes are strides, never copies); the
// result is always row-major, since a transposed destination falls back
// to oneDNN's reference kernel. alpha is an output scale, beta a sum
// post-op. oneDNN's threads are the OpenMP runtime's, which the backend
// sizes to --threads.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_CPU_ONEDNNGEMM_H
#define FSDP_RUNTIME_CPU_ONEDNNGEMM_H

#include <cstdint>
#include <memory>
#include <string>

namespace fsdp::rt::cpu {

class OneDnnGemm {
public:
  /// Opens libdnnl.so.2 and makes its CPU engine and stream; null with
  /// `error` when the library is missing, is not oneDNN 2.x (whose C API
  /// this binds), or the build had no oneDNN headers.
  static std::unique_ptr<OneDnnGemm> open(std::string &error);
  ~OneDnnGemm();

  /// Blas::sgemm's contract (row-major, transposes, row strides).
  void sgemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K,
             float alpha, const float *A, int64_t lda, const float *B,
             int64_t ldb, float beta, float *C, int64_t ldc) const;

  /// The same with bf16 operands and result (bf16 bits), alpha 1: the
  /// products accumulate in f32 (onto beta C, widened) and the sum is
  /// rounded to bf16 once, as the widened f32 GEMM's is (up to summation
  /// order). On AVX512-BF16 oneDNN runs it on the bf16 dot products.
  void gemmBF16(bool transA, bool transB, int64_t M, int64_t N, int64_t K,
                const uint16_t *A, int64_t lda, const uint16_t *B, int64_t ldb,
                float beta, uint16_t *C, int64_t ldc) const;

  /// Makes gemmBF16's primitive for this shape now (with its share of the
  /// scratchpad) rather than at its first call, inside a step.
  void prepareBF16(bool transA, bool transB, int64_t M, int64_t N, int64_t K,
                   int64_t lda, int64_t ldb, int64_t ldc, float beta);
  /// The scratchpad the primitives made so far share (oneDNN's
  /// user-managed mode: allocated here, on the heap fsdp-run counts).
  uint64_t scratchpadBytes() const;

  /// Whether gemmBF16 runs on a bf16 kernel of this CPU (not oneDNN's
  /// reference one, which a CPU without AVX-512 gets).
  bool hasBF16() const;
  /// Whether that kernel runs on the CPU's bf16 units (AVX512-BF16's dot
  /// products or AMX's tiles), not on a conversion to f32 FMAs: what
  /// --blas auto asks before it sends bf16 GEMMs here.
  bool hasBF16Units() const;

  /// "onednn 2.6.3 (isa avx512_core_bf16; bf16 GEMMs on
  /// brg:avx512_core_bf16; libdnnl.so.2)".
  const std::string &description() const;

  struct Impl;

private:
  explicit OneDnnGemm(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl;
};

} // namespace fsdp::rt::cpu

#endif // FSDP_RUNTIME_CPU_ONEDNNGEMM_H
