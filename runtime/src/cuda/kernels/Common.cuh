//===- Common.cuh - helpers shared by the CUDA kernels -----*- CUDA -*-===//
//
// Error recording (the launch check after every launch), the element
// types' loads and stores (bf16 is stored, float computed), warp and block
// reductions, alignment tests for the vector paths, the row-major GEMM
// wrappers over cuBLAS, and the deterministic column reduction that the
// layer norm's dw/db and the bias gradient share.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_CUDA_KERNELS_COMMON_CUH
#define FSDP_RUNTIME_CUDA_KERNELS_COMMON_CUH

#include "Kernels.h"

#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <type_traits>

namespace fsdp::rt::cuda::detail {

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

/// Records "<where>: <what>" unless an error is already recorded.
void recordError(const char *where, const char *what);

/// After every launch: a bad configuration or an earlier asynchronous fault
/// shows up here.
inline void checkLaunch(const char *where) {
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess)
    recordError(where, cudaGetErrorString(err));
}

inline void checkCuda(cudaError_t err, const char *where) {
  if (err != cudaSuccess)
    recordError(where, cudaGetErrorString(err));
}

inline void checkBlas(cublasStatus_t status, const char *where) {
  if (status != CUBLAS_STATUS_SUCCESS)
    recordError(where, cublasStatusName(status));
}

//===----------------------------------------------------------------------===//
// Attention's sliding window
//===----------------------------------------------------------------------===//

/// The first key query row i sees under a sliding window of W keys (query
/// i sees keys i - W < j <= i; W = 0, or W > i, means from key 0), as the
/// CPU backend's windowStart.
__host__ __device__ __forceinline__ int64_t windowStart(int64_t i, int64_t W) {
  return W > 0 && i >= W ? i - W + 1 : 0;
}

/// Where query head h of batch b lives in attention's B x T x (C + 2 KV hs)
/// and B x T x C layouts: q, its kv head's k (v is KV hs further on), the
/// out/dout rows, the lse row; qkv rows are ld apart. (The blocked kernels,
/// on FMAs and on tensor cores.)
struct HeadView {
  int64_t q, k, bt, bh, ld;
};

__device__ __forceinline__ HeadView headView(int64_t b, int64_t h, int64_t T,
                                             int64_t C, int64_t NH, int64_t KV,
                                             int hs) {
  const int64_t ld = C + 2 * KV * hs, row = b * T * ld;
  return {row + h * hs, row + C + h / (NH / KV) * hs, b * T * C + h * hs,
          b * NH + h, ld};
}

//===----------------------------------------------------------------------===//
// Element types: every kernel loads its T operands as float, computes and
// accumulates in float, and rounds once where it stores a T
//===----------------------------------------------------------------------===//

__device__ __forceinline__ float toFloat(float x) { return x; }
__device__ __forceinline__ float toFloat(__nv_bfloat16 x) {
  return __bfloat162float(x); // exact: bf16 is a float's top half
}

/// Rounds to nearest even, bit for bit
/// runtime/include/fsdp/runtime/support/BFloat16.h's roundToBF16 (what the CPU
/// backend stores): __float2bfloat16_rn, except for NaN, which CUDA turns into
/// the canonical 0x7FFF and roundToBF16 keeps, quiet, with its sign and top
/// payload bits.
__device__ __forceinline__ __nv_bfloat16 toBF16(float x) {
  const unsigned int word = __float_as_uint(x);
  if ((word & 0x7FFFFFFFu) > 0x7F800000u)
    return __ushort_as_bfloat16((unsigned short)((word >> 16) | 0x0040u));
  return __float2bfloat16_rn(x);
}

template <typename T> __device__ __forceinline__ T fromFloat(float x) {
  static_assert(std::is_same<T, float>::value ||
                    std::is_same<T, __nv_bfloat16>::value,
                "element types are float and __nv_bfloat16");
  if constexpr (std::is_same<T, float>::value)
    return x;
  else
    return toBF16(x);
}

/// Four elements, aligned to their size: the vector loads and stores of
/// the streaming kernels (one 16-byte access for float, 8 bytes for bf16).
template <typename T> struct alignas(4 * sizeof(T)) Quad { T v[4]; };

/// Whether p may be read as Quad<T>s (arena buffers always can; views
/// into them need not).
template <typename T> inline bool quadAligned(const T *p) {
  return reinterpret_cast<uintptr_t>(p) % (4 * sizeof(T)) == 0;
}

//===----------------------------------------------------------------------===//
// Launch shapes
//===----------------------------------------------------------------------===//

inline bool aligned16(const void *p) {
  return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

/// Blocks for `work` items at `threads` per block, capped (grid-stride
/// loops cover the rest).
inline unsigned blocksFor(int64_t work, int threads,
                          int64_t maxBlocks = int64_t(1) << 16) {
  int64_t blocks = (work + threads - 1) / threads;
  if (blocks < 1)
    blocks = 1;
  if (blocks > maxBlocks)
    blocks = maxBlocks;
  return unsigned(blocks);
}

//===----------------------------------------------------------------------===//
// Reductions (fixed order: the same bits on every run)
//===----------------------------------------------------------------------===//

constexpr unsigned kFullMask = 0xffffffffu;

__device__ __forceinline__ float warpSum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1)
    v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}

__device__ __forceinline__ double warpSum(double v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1)
    v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}

/// Sums one double per thread of the block (a multiple of 32 threads, at
/// most 1024) in a fixed order; thread 0 gets the result.
__device__ inline double blockSumDouble(double v) {
  __shared__ double part[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warpSum(v);
  if (lane == 0)
    part[warp] = v;
  __syncthreads();
  double total = 0.0;
  if (threadIdx.x == 0)
    for (int w = 0; w < int(blockDim.x >> 5); ++w)
      total += part[w];
  return total;
}

__device__ __forceinline__ float warpMax(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1)
    v = fmaxf(v, __shfl_xor_sync(kFullMask, v, offset));
  return v;
}

/// A running (max, sum of exp(x - max)) pair: online log-sum-exp.
struct MaxSum {
  float m; // -inf while empty
  float s;
};

__device__ __forceinline__ MaxSum maxSumEmpty() { return {-INFINITY, 0.0f}; }

/// Adds x. One exp per element; the rescale runs only when the max grows.
/// A NaN x makes the sum NaN (x > m is false, exp(NaN) is NaN).
__device__ __forceinline__ void maxSumAdd(MaxSum &a, float x) {
  if (x > a.m) {
    a.s *= __expf(a.m - x); // exp(-inf) = 0 while empty
    a.m = x;
  }
  a.s += __expf(x - a.m);
}

__device__ __forceinline__ MaxSum maxSumMerge(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.m, b.m);
  if (m == -INFINITY)
    return {m, a.s + b.s};
  const float sa = a.m == -INFINITY ? 0.0f : a.s * __expf(a.m - m);
  const float sb = b.m == -INFINITY ? 0.0f : b.s * __expf(b.m - m);
  return {m, sa + sb};
}

/// Merges the pairs of a warp; every lane gets the result.
__device__ __forceinline__ MaxSum warpMaxSum(MaxSum a) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    MaxSum b;
    b.m = __shfl_xor_sync(kFullMask, a.m, offset);
    b.s = __shfl_xor_sync(kFullMask, a.s, offset);
    a = maxSumMerge(a, b);
  }
  return a;
}

/// Merges the pairs of a block (blockDim.x a multiple of 32, at most 1024);
/// every thread gets the result. Uses 64 floats of shared memory.
__device__ __forceinline__ MaxSum blockMaxSum(MaxSum a) {
  __shared__ float sm[32], ss[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int warps = blockDim.x >> 5;
  a = warpMaxSum(a);
  if (lane == 0) {
    sm[warp] = a.m;
    ss[warp] = a.s;
  }
  __syncthreads();
  MaxSum r = maxSumEmpty();
  if (lane < warps)
    r = {sm[lane], ss[lane]};
  r = warpMaxSum(r);
  __syncthreads(); // sm/ss may be reused by a later call
  return r;
}

//===----------------------------------------------------------------------===//
// Row-major GEMMs over cuBLAS
//===----------------------------------------------------------------------===//

/// Row-major C[M,N] = alpha op(A) op(B) + beta C, exactly cpu::Blas::sgemm:
/// op(A) is M x K (A stored K x M when transA), op(B) is K x N (B stored
/// N x K when transB); lda/ldb/ldc are row strides. A row-major matrix is
/// the column-major view of its transpose, so this is the column-major
/// C^T (N x M) = op(B)^T op(A)^T:
///   cublasSgemm(opB, opA, m = N, n = M, k = K, B, ldb, A, lda, C, ldc).
/// For bf16 the same call is cublasGemmEx with bf16 A, B and C, fp32
/// compute and fp32 alpha and beta (C rounded once, from the fp32 sum).
template <typename T>
void rowGemm(const Context &ctx, const char *where, bool transA, bool transB,
             int64_t M, int64_t N, int64_t K, float alpha, const T *A,
             int64_t lda, const T *B, int64_t ldb, float beta, T *C,
             int64_t ldc);

/// rowGemm over a two-level batch (outer x inner), matrix (o, i) at
/// A + o * strideAOuter + i * strideAInner (same for B, C). cuBLAS's strided
/// batch has one stride per operand, so this issues min(outer, inner)
/// cublasSgemmStridedBatched (bf16: cublasGemmStridedBatchedEx) calls over
/// the other level (no host sync).
template <typename T>
void rowGemmBatched(const Context &ctx, const char *where, bool transA,
                    bool transB, int64_t M, int64_t N, int64_t K, float alpha,
                    const T *A, int64_t lda, int64_t strideAOuter,
                    int64_t strideAInner, const T *B, int64_t ldb,
                    int64_t strideBOuter, int64_t strideBInner, float beta,
                    T *C, int64_t ldc, int64_t strideCOuter,
                    int64_t strideCInner, int64_t outer, int64_t inner);

//===----------------------------------------------------------------------===//
// Deterministic column sums (layer norm dw/db, RMS norm dw, bias gradient)
//===----------------------------------------------------------------------===//

constexpr int kColReduceThreads = 512;

/// Columns per block of the column reduction: wide blocks (coalesced 128-byte
/// rows) when there are enough columns to fill the GPU, narrow ones (32-byte
/// sectors, still fully used) otherwise. Depends on C only, so the
/// summation order does not depend on the device.
inline int colReduceWidth(int64_t C) {
  if (C >= 32 * 256)
    return 32;
  if (C >= 16 * 256)
    return 16;
  return 8;
}

/// Sums columns of N x C rows: block `blockIdx.x` owns WIDTH columns;
/// thread t sums column c0 + t % WIDTH over the rows t / WIDTH + k * G
/// (G = blockDim / WIDTH row groups), then the G partial sums are added in a
/// fixed tree. The same bits on every run.
///
/// LayerNormMode: out0 = sum dout * (x - mean) * rstd (dw), out1 = sum dout
/// (db); with mean and out1 null (RMS norm), out0 = sum dout * x * rstd.
/// Otherwise: out0 = sum dout (bias gradient), out1 unused.
template <int WIDTH, bool LayerNormMode, typename T>
__global__ void __launch_bounds__(kColReduceThreads)
    columnSumKernel(T *__restrict__ out0, T *__restrict__ out1,
                    const T *__restrict__ dout, const T *__restrict__ x,
                    const float *__restrict__ mean,
                    const float *__restrict__ rstd, int64_t N, int64_t C) {
  constexpr int kGroups = kColReduceThreads / WIDTH;
  __shared__ float s0[kGroups][WIDTH];
  __shared__ float s1[LayerNormMode ? kGroups : 1][WIDTH];
  const int col = threadIdx.x % WIDTH, group = threadIdx.x / WIDTH;
  const int64_t c = int64_t(blockIdx.x) * WIDTH + col;
  float acc0 = 0.0f, acc1 = 0.0f;
  if (c < C) {
#pragma unroll 4
    for (int64_t i = group; i < N; i += kGroups) {
      const float d = toFloat(dout[i * C + c]);
      if constexpr (LayerNormMode) {
        const float mu = mean ? mean[i] : 0.0f;
        const float norm = (toFloat(x[i * C + c]) - mu) * rstd[i];
        acc0 += d * norm;
        acc1 += d;
      } else {
        acc0 += d;
      }
    }
  }
  s0[group][col] = acc0;
  if constexpr (LayerNormMode)
    s1[group][col] = acc1;
  __syncthreads();
  for (int half = kGroups / 2; half > 0; half >>= 1) {
    if (group < half) {
      s0[group][col] += s0[group + half][col];
      if constexpr (LayerNormMode)
        s1[group][col] += s1[group + half][col];
    }
    __syncthreads();
  }
  if (group == 0 && c < C) {
    out0[c] = fromFloat<T>(s0[0][col]);
    if constexpr (LayerNormMode)
      if (out1)
        out1[c] = fromFloat<T>(s1[0][col]);
  }
}

template <bool LayerNormMode, typename T>
inline void launchColumnSum(const Context &ctx, const char *where, T *out0,
                            T *out1, const T *dout, const T *x,
                            const float *mean, const float *rstd, int64_t N,
                            int64_t C) {
  const int width = colReduceWidth(C);
  const unsigned blocks = unsigned((C + width - 1) / width);
  if (width == 32)
    columnSumKernel<32, LayerNormMode, T>
        <<<blocks, kColReduceThreads, 0, ctx.stream>>>(out0, out1, dout, x,
                                                       mean, rstd, N, C);
  else if (width == 16)
    columnSumKernel<16, LayerNormMode, T>
        <<<blocks, kColReduceThreads, 0, ctx.stream>>>(out0, out1, dout, x,
                                                       mean, rstd, N, C);
  else
    columnSumKernel<8, LayerNormMode, T>
        <<<blocks, kColReduceThreads, 0, ctx.stream>>>(out0, out1, dout, x,
                                                       mean, rstd, N, C);
  checkLaunch(where);
}

} // namespace fsdp::rt::cuda::detail

#endif // FSDP_RUNTIME_CUDA_KERNELS_COMMON_CUH
