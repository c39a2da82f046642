//===- emu_blas.cpp - the emulated cuBLAS GEMMs -----------------------===//
//
// Column-major C = alpha op(A) op(B) + beta C as cuBLAS computes it, for
// the calls the kernels make: Sgemm, GemmEx and their strided batched forms
// over float or bf16 (one type for A, B and C, fp32 compute, host alpha and
// beta). The sum is in double and C is rounded once to its type; beta == 0
// does not read C. Arguments are checked when the call is made (as cuBLAS
// returns CUBLAS_STATUS_INVALID_VALUE); the product runs on the handle's
// stream (cublasSetStream), and the race checker sees the exact bytes its
// leading dimensions and strides reach.
//
//===----------------------------------------------------------------------===//
#include "emu.h"
#include "emu_streams.h"

#include <algorithm>

namespace {
// Elements as the GEMMs read and write them: float, or bf16 widened on
// load and rounded (by the conversion the kernels use) on store.
float loadElem(const void *p, int64_t i, cudaDataType_t t) {
  return emu::loadElement(p, i, t == CUDA_R_16BF);
}
void storeElem(void *p, int64_t i, cudaDataType_t t, float v) {
  emu::storeElement(p, i, t == CUDA_R_16BF, v);
}
size_t elemSize(cudaDataType_t t) { return t == CUDA_R_16BF ? 2 : 4; }

/// One GEMM call, batched or not.
struct Gemm {
  cublasOperation_t ta, tb;
  int m, n, k;
  float alpha, beta;
  const void *A;
  int lda;
  long long sA;
  const void *B;
  int ldb;
  long long sB;
  void *C;
  int ldc;
  long long sC;
  int batch;
  cudaDataType_t type;

  bool valid() const {
    if (m < 0 || n < 0 || k < 0 || batch < 0)
      return false;
    return lda >= std::max(1, aRows()) && ldb >= std::max(1, bRows()) &&
           ldc >= std::max(1, m);
  }
  int aRows() const { return ta == CUBLAS_OP_N ? m : k; }
  int aCols() const { return ta == CUBLAS_OP_N ? k : m; }
  int bRows() const { return tb == CUBLAS_OP_N ? k : n; }
  int bCols() const { return tb == CUBLAS_OP_N ? n : k; }
  /// The bytes a column-major rows x cols matrix with leading dimension ld
  /// reaches, over every batch.
  size_t extent(int rows, int cols, int ld, long long stride) const {
    if (rows == 0 || cols == 0 || batch == 0)
      return 0;
    size_t one = size_t(ld) * size_t(cols - 1) + size_t(rows);
    return (size_t(stride) * size_t(batch - 1) + one) * elemSize(type);
  }
  std::vector<emu::Access> accesses() const {
    std::vector<emu::Access> out;
    if (m == 0 || n == 0)
      return out;
    if (k > 0 && alpha != 0.0f) {
      out.push_back({A, extent(aRows(), aCols(), lda, sA), false});
      out.push_back({B, extent(bRows(), bCols(), ldb, sB), false});
    }
    if (beta != 0.0f)
      out.push_back({C, extent(m, n, ldc, sC), false});
    out.push_back({C, extent(m, n, ldc, sC), true});
    return out;
  }
  void one(const char *a, const char *b, char *c) const {
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < m; ++i) {
        double acc = 0.0;
        for (int l = 0; l < k; ++l) {
          const float x = ta == CUBLAS_OP_N
                              ? loadElem(a, i + (int64_t)l * lda, type)
                              : loadElem(a, l + (int64_t)i * lda, type);
          const float y = tb == CUBLAS_OP_N
                              ? loadElem(b, l + (int64_t)j * ldb, type)
                              : loadElem(b, j + (int64_t)l * ldb, type);
          acc += double(x) * double(y);
        }
        const int64_t at = i + (int64_t)j * ldc;
        const float old = beta == 0.0f ? 0.0f : loadElem(c, at, type);
        storeElem(c, at, type,
                  beta == 0.0f ? float(alpha * acc)
                               : float(alpha * acc + beta * old));
      }
  }
  void run() const {
    const size_t e = elemSize(type);
    for (int i = 0; i < batch; ++i)
      one(static_cast<const char *>(A) + i * sA * e,
          static_cast<const char *>(B) + i * sB * e,
          static_cast<char *>(C) + i * sC * e);
  }
};

cublasStatus_t enqueueGemm(cublasHandle_t handle, const char *name,
                           const Gemm &g) {
  if (!g.valid())
    return CUBLAS_STATUS_INVALID_VALUE;
  cudaError_t queued = emu::enqueue(emu::blasStream(handle), name, g.accesses(),
                                    [g] { g.run(); });
  return queued == cudaSuccess ? CUBLAS_STATUS_SUCCESS
                               : CUBLAS_STATUS_EXECUTION_FAILED;
}

// The Ex calls as the kernels make them: one type for A, B and C, fp32
// compute, host alpha and beta.
bool exSupported(cudaDataType_t a, cudaDataType_t b, cudaDataType_t c,
                 cublasComputeType_t compute) {
  return a == b && b == c && (a == CUDA_R_32F || a == CUDA_R_16BF) &&
         compute == CUBLAS_COMPUTE_32F;
}
} // namespace

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t ta,
                            cublasOperation_t tb, int m, int n, int k,
                            const void *alpha, const void *A, cudaDataType_t at,
                            int lda, const void *B, cudaDataType_t bt, int ldb,
                            const void *beta, void *C, cudaDataType_t ct,
                            int ldc, cublasComputeType_t compute,
                            cublasGemmAlgo_t) {
  if (!exSupported(at, bt, ct, compute))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  return enqueueGemm(handle, "cublasGemmEx",
                     {ta, tb, m, n, k, *static_cast<const float *>(alpha),
                      *static_cast<const float *>(beta), A, lda, 0, B, ldb, 0,
                      C, ldc, 0, 1, ct});
}

cublasStatus_t cublasGemmStridedBatchedEx(
    cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m,
    int n, int k, const void *alpha, const void *A, cudaDataType_t at, int lda,
    long long sA, const void *B, cudaDataType_t bt, int ldb, long long sB,
    const void *beta, void *C, cudaDataType_t ct, int ldc, long long sC,
    int batch, cublasComputeType_t compute, cublasGemmAlgo_t) {
  if (!exSupported(at, bt, ct, compute))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  return enqueueGemm(handle, "cublasGemmStridedBatchedEx",
                     {ta, tb, m, n, k, *static_cast<const float *>(alpha),
                      *static_cast<const float *>(beta), A, lda, sA, B, ldb, sB,
                      C, ldc, sC, batch, ct});
}

cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t ta,
                           cublasOperation_t tb, int m, int n, int k,
                           const float *alpha, const float *A, int lda,
                           const float *B, int ldb, const float *beta, float *C,
                           int ldc) {
  return enqueueGemm(handle, "cublasSgemm",
                     {ta, tb, m, n, k, *alpha, *beta, A, lda, 0, B, ldb, 0, C,
                      ldc, 0, 1, CUDA_R_32F});
}

cublasStatus_t cublasSgemmStridedBatched(
    cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m,
    int n, int k, const float *alpha, const float *A, int lda, long long sA,
    const float *B, int ldb, long long sB, const float *beta, float *C, int ldc,
    long long sC, int batch) {
  return enqueueGemm(handle, "cublasSgemmStridedBatched",
                     {ta, tb, m, n, k, *alpha, *beta, A, lda, sA, B, ldb, sB, C,
                      ldc, sC, batch, CUDA_R_32F});
}
