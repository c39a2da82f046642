//===- Linear.cu - fully connected layers through cuBLAS ------------------===//
//
// The three GEMMs of a linear layer (weights stored OC x IC, as PyTorch
// does), each one cublasSgemm through rowGemm, with the arguments of the
// CPU backend's Blas::sgemm calls (src/cpu/Linear.cpp). The handle's math
// mode decides between fp32 and TF32. In bf16 the same calls are
// cublasGemmEx with CUDA_R_16BF A, B and C, CUBLAS_COMPUTE_32F and fp32
// alpha and beta: bf16 products summed in fp32, C rounded once (tensor
// cores whatever the math mode, which only concerns fp32 inputs). The
// row-major to column-major mapping is rowGemm's (Common.cuh):
//
//   forward      out = x w^T   cublasSgemm(T, N, m=OC, n=N,  k=IC,
//                                          A=w,    lda=IC, B=x,    ldb=IC,
//                                          C=out,  ldc=OC)
//   grad input   dx = dout w   cublasSgemm(N, N, m=IC, n=N,  k=OC,
//                                          A=w,    lda=IC, B=dout, ldb=OC,
//                                          C=dx,   ldc=IC)
//   grad weight  dw = dout^T x cublasSgemm(N, T, m=IC, n=OC, k=N,
//                                          A=x,    lda=IC, B=dout, ldb=OC,
//                                          C=dw,   ldc=IC)
//
// (A, B as cuBLAS's first and second operand.) The bias is broadcast into
// out first and the GEMM adds onto it (beta = 1), as on the CPU.
//
//===----------------------------------------------------------------------===//

#include "Common.cuh"

#include <climits>

namespace fsdp::rt::cuda {
namespace detail {
namespace {

bool fitsInt(int64_t v) { return v >= 0 && v <= INT_MAX; }

bool checkDims(const char *where, std::initializer_list<int64_t> dims) {
  for (int64_t d : dims) {
    if (!fitsInt(d)) {
      recordError(where, "GEMM dimension or leading dimension outside "
                         "cuBLAS's int range");
      return false;
    }
  }
  return true;
}

inline cublasOperation_t op(bool trans) {
  return trans ? CUBLAS_OP_T : CUBLAS_OP_N;
}

/// One column-major GEMM (the cuBLAS call rowGemm maps to): cublasSgemm,
/// or cublasGemmEx over bf16 with fp32 compute.
cublasStatus_t gemm(const Context &ctx, cublasOperation_t opA,
                    cublasOperation_t opB, int m, int n, int k, float alpha,
                    const float *A, int lda, const float *B, int ldb,
                    float beta, float *C, int ldc) {
  return cublasSgemm(ctx.blas, opA, opB, m, n, k, &alpha, A, lda, B, ldb, &beta,
                     C, ldc);
}
cublasStatus_t gemm(const Context &ctx, cublasOperation_t opA,
                    cublasOperation_t opB, int m, int n, int k, float alpha,
                    const __nv_bfloat16 *A, int lda, const __nv_bfloat16 *B,
                    int ldb, float beta, __nv_bfloat16 *C, int ldc) {
  return cublasGemmEx(ctx.blas, opA, opB, m, n, k, &alpha, A, CUDA_R_16BF, lda,
                      B, CUDA_R_16BF, ldb, &beta, C, CUDA_R_16BF, ldc,
                      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

/// The strided-batched twin of gemm().
cublasStatus_t gemmBatched(const Context &ctx, cublasOperation_t opA,
                           cublasOperation_t opB, int m, int n, int k,
                           float alpha, const float *A, int lda,
                           long long strideA, const float *B, int ldb,
                           long long strideB, float beta, float *C, int ldc,
                           long long strideC, int batch) {
  return cublasSgemmStridedBatched(ctx.blas, opA, opB, m, n, k, &alpha, A, lda,
                                   strideA, B, ldb, strideB, &beta, C, ldc,
                                   strideC, batch);
}
cublasStatus_t gemmBatched(const Context &ctx, cublasOperation_t opA,
                           cublasOperation_t opB, int m, int n, int k,
                           float alpha, const __nv_bfloat16 *A, int lda,
                           long long strideA, const __nv_bfloat16 *B, int ldb,
                           long long strideB, float beta, __nv_bfloat16 *C,
                           int ldc, long long strideC, int batch) {
  return cublasGemmStridedBatchedEx(
      ctx.blas, opA, opB, m, n, k, &alpha, A, CUDA_R_16BF, lda, strideA, B,
      CUDA_R_16BF, ldb, strideB, &beta, C, CUDA_R_16BF, ldc, strideC, batch,
      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

} // namespace

template <typename T>
void rowGemm(const Context &ctx, const char *where, bool transA, bool transB,
             int64_t M, int64_t N, int64_t K, float alpha, const T *A,
             int64_t lda, const T *B, int64_t ldb, float beta, T *C,
             int64_t ldc) {
  if (!checkDims(where, {M, N, K, lda, ldb, ldc}))
    return;
  if (M == 0 || N == 0)
    return;
  if (K == 0) { // an empty sum: C = beta C
    if (beta == 0.0f)
      checkCuda(cudaMemset2DAsync(C, size_t(ldc) * sizeof(T), 0,
                                  size_t(N) * sizeof(T), size_t(M), ctx.stream),
                where);
    else if (beta != 1.0f)
      recordError(where, "K = 0 with beta other than 0 or 1");
    return;
  }
  checkBlas(gemm(ctx, op(transB), op(transA), int(N), int(M), int(K), alpha, B,
                 int(ldb), A, int(lda), beta, C, int(ldc)),
            where);
}

template <typename T>
void rowGemmBatched(const Context &ctx, const char *where, bool transA,
                    bool transB, int64_t M, int64_t N, int64_t K, float alpha,
                    const T *A, int64_t lda, int64_t strideAOuter,
                    int64_t strideAInner, const T *B, int64_t ldb,
                    int64_t strideBOuter, int64_t strideBInner, float beta,
                    T *C, int64_t ldc, int64_t strideCOuter,
                    int64_t strideCInner, int64_t outer, int64_t inner) {
  if (!checkDims(where, {M, N, K, lda, ldb, ldc, outer, inner}))
    return;
  if (M == 0 || N == 0 || outer == 0 || inner == 0)
    return;
  // Loop over the smaller level on the host, batch the larger one.
  const bool loopOuter = outer <= inner;
  const int64_t loops = loopOuter ? outer : inner;
  const int batch = int(loopOuter ? inner : outer);
  const int64_t loopA = loopOuter ? strideAOuter : strideAInner;
  const int64_t loopB = loopOuter ? strideBOuter : strideBInner;
  const int64_t loopC = loopOuter ? strideCOuter : strideCInner;
  const long long batchA = loopOuter ? strideAInner : strideAOuter;
  const long long batchB = loopOuter ? strideBInner : strideBOuter;
  const long long batchC = loopOuter ? strideCInner : strideCOuter;
  for (int64_t l = 0; l < loops; ++l) {
    checkBlas(gemmBatched(ctx, op(transB), op(transA), int(N), int(M), int(K),
                          alpha, B + l * loopB, int(ldb), batchB, A + l * loopA,
                          int(lda), batchA, beta, C + l * loopC, int(ldc),
                          batchC, batch),
              where);
  }
}

#define FSDP_INSTANTIATE(T)                                                    \
  template void rowGemm<T>(const Context &, const char *, bool, bool, int64_t, \
                           int64_t, int64_t, float, const T *, int64_t,        \
                           const T *, int64_t, float, T *, int64_t);           \
  template void rowGemmBatched<T>(                                             \
      const Context &, const char *, bool, bool, int64_t, int64_t, int64_t,    \
      float, const T *, int64_t, int64_t, int64_t, const T *, int64_t,         \
      int64_t, int64_t, float, T *, int64_t, int64_t, int64_t, int64_t,        \
      int64_t);
FSDP_CUDA_ELEMENT_TYPES(FSDP_INSTANTIATE)
#undef FSDP_INSTANTIATE

} // namespace detail

namespace {

/// out[i, :] = bias for every row i: columns over x, rows over y
/// (grid-strided, as N may exceed the grid's y limit).
template <typename T>
__global__ void broadcastRowsKernel(T *__restrict__ out,
                                    const T *__restrict__ bias, int64_t N,
                                    int64_t OC) {
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= OC)
    return;
  const T value = bias[c];
  for (int64_t i = blockIdx.y; i < N; i += gridDim.y)
    out[i * OC + c] = value;
}

} // namespace

/// out (N x OC) = x (N x IC) * w^T (w is OC x IC) + bias (OC; may be null).
template <typename E>
void linearForward(const Context &ctx, E *out, const E *x, const E *w,
                   const E *bias, int64_t N, int64_t IC, int64_t OC) {
  if (N <= 0 || OC <= 0)
    return;
  float beta = 0.0f;
  if (bias) {
    const dim3 grid(unsigned((OC + 255) / 256),
                    unsigned(N < 65535 ? N : 65535));
    broadcastRowsKernel<<<grid, 256, 0, ctx.stream>>>(out, bias, N, OC);
    detail::checkLaunch("linearForward (bias)");
    beta = 1.0f;
  }
  detail::rowGemm(ctx, "linearForward", /*transA=*/false, /*transB=*/true, N,
                  OC, IC, 1.0f, x, IC, w, IC, beta, out, OC);
}

/// dx (N x IC) = dout (N x OC) * w (OC x IC).
template <typename E>
void linearGradInput(const Context &ctx, E *dx, const E *dout, const E *w,
                     int64_t N, int64_t IC, int64_t OC) {
  detail::rowGemm(ctx, "linearGradInput", /*transA=*/false, /*transB=*/false, N,
                  IC, OC, 1.0f, dout, OC, w, IC, 0.0f, dx, IC);
}

/// dw (OC x IC) = dout^T (OC x N) * x (N x IC).
template <typename E>
void linearGradWeight(const Context &ctx, E *dw, const E *dout, const E *x,
                      int64_t N, int64_t IC, int64_t OC) {
  detail::rowGemm(ctx, "linearGradWeight", /*transA=*/true, /*transB=*/false,
                  OC, IC, N, 1.0f, dout, OC, x, IC, 0.0f, dw, IC);
}

#define FSDP_INSTANTIATE(E)                                                    \
  template void linearForward<E>(const Context &, E *, const E *, const E *,   \
                                 const E *, int64_t, int64_t, int64_t);        \
  template void linearGradInput<E>(const Context &, E *, const E *, const E *, \
                                   int64_t, int64_t, int64_t);                 \
  template void linearGradWeight<E>(const Context &, E *, const E *,           \
                                    const E *, int64_t, int64_t, int64_t);
FSDP_CUDA_ELEMENT_TYPES(FSDP_INSTANTIATE)
#undef FSDP_INSTANTIATE

} // namespace fsdp::rt::cuda
