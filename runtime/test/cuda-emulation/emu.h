//===- emu.h - a CPU emulation of the CUDA device model ---------*- C++ -*-===//
//
// Enough of CUDA for the fsdp kernels: every CUDA thread of a block is a
// fiber (ucontext) in ONE OS thread, blocks run one after another;
// __syncthreads and warp collectives (shuffles, __syncwarp, fake/mma.h's
// WMMA calls) are barriers between fibers, and the emulator reports
// deadlocks, shuffles from exited lanes and bad launch configurations.
// Force-included into the preprocessed .cu sources; the fake CUDA headers
// in fake/ include it.
//
//===----------------------------------------------------------------------===//
#ifndef CUEMU_EMU_H
#define CUEMU_EMU_H

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>

// ---------------------------------------------------------------- qualifiers
#define __global__
#define __device__
#define __host__
#define __forceinline__ static inline
#define __launch_bounds__(...)
#define __shared__ static
#ifndef __align__
#define __align__(n) __attribute__((aligned(n)))
#endif

// ---------------------------------------------------------------- types
struct uint3 {
  unsigned x, y, z;
};
struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1)
      : x(x_), y(y_), z(z_) {}
};
struct alignas(16) float4 {
  float x, y, z, w;
};
inline float4 make_float4(float x, float y, float z, float w) {
  return float4{x, y, z, w};
}

// bf16 as cuda_bf16.h has it, storage only (the kernels compute in float).
// The conversion is NVIDIA's own host code where the toolkit's header is
// there (emu_nvbf16.cpp), which the test compares with the CPU's rounding.
struct __nv_bfloat16 {
  unsigned short __x;
};
namespace emu {
unsigned short nvFloat2BF16(float x);   ///< __float2bfloat16_rn's bits
extern const char *const kNvBF16Source; ///< whose code that is
} // namespace emu
inline unsigned int __float_as_uint(float x) {
  unsigned int u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short x) { return {x}; }
inline __nv_bfloat16 __float2bfloat16_rn(float x) {
  return {emu::nvFloat2BF16(x)};
}
inline float __bfloat162float(__nv_bfloat16 b) {
  const unsigned int word = (unsigned int)b.__x << 16;
  float f;
  std::memcpy(&f, &word, sizeof f);
  return f;
}

namespace emu {
/// Element i of an f32 or bf16 array (bf16 widened exactly), and the store
/// that rounds as the kernels' conversion does: the emulated libraries'
/// (cuBLAS's GEMMs, NCCL's reductions) one view of their operands.
inline float loadElement(const void *p, int64_t i, bool bf16) {
  if (bf16)
    return __bfloat162float(static_cast<const __nv_bfloat16 *>(p)[i]);
  return static_cast<const float *>(p)[i];
}
inline void storeElement(void *p, int64_t i, bool bf16, float v) {
  if (bf16)
    static_cast<__nv_bfloat16 *>(p)[i] = __float2bfloat16_rn(v);
  else
    static_cast<float *>(p)[i] = v;
}
} // namespace emu

typedef struct CUstream_st *cudaStream_t;
enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorLaunchOutOfResources = 701,
};
enum cudaMemcpyKind { cudaMemcpyDefault = 4 };
typedef struct cublasContext *cublasHandle_t;
enum cublasStatus_t {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_NOT_INITIALIZED = 1,
  CUBLAS_STATUS_ALLOC_FAILED = 3,
  CUBLAS_STATUS_INVALID_VALUE = 7,
  CUBLAS_STATUS_ARCH_MISMATCH = 8,
  CUBLAS_STATUS_MAPPING_ERROR = 11,
  CUBLAS_STATUS_EXECUTION_FAILED = 13,
  CUBLAS_STATUS_INTERNAL_ERROR = 14,
  CUBLAS_STATUS_NOT_SUPPORTED = 15,
  CUBLAS_STATUS_LICENSE_ERROR = 16,
};
enum cublasOperation_t { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUBLAS_OP_C = 2 };
enum cudaDataType_t { CUDA_R_32F = 0, CUDA_R_16BF = 14 };
enum cublasComputeType_t { CUBLAS_COMPUTE_32F = 68 };
enum cublasGemmAlgo_t { CUBLAS_GEMM_DEFAULT = -1 };

cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();
const char *cudaGetErrorString(cudaError_t);
cudaError_t cudaMemsetAsync(void *p, int value, size_t bytes,
                            cudaStream_t s = nullptr);
cudaError_t cudaMemset2DAsync(void *p, size_t pitch, int value, size_t width,
                              size_t height, cudaStream_t s = nullptr);
cublasStatus_t cublasSgemm(cublasHandle_t, cublasOperation_t, cublasOperation_t,
                           int m, int n, int k, const float *alpha,
                           const float *A, int lda, const float *B, int ldb,
                           const float *beta, float *C, int ldc);
cublasStatus_t cublasSgemmStridedBatched(
    cublasHandle_t, cublasOperation_t, cublasOperation_t, int m, int n, int k,
    const float *alpha, const float *A, int lda, long long strideA,
    const float *B, int ldb, long long strideB, const float *beta, float *C,
    int ldc, long long strideC, int batchCount);
// The Ex GEMMs for float and bf16 operands (all three of one type) with
// fp32 compute; C rounded once (bf16) from the fp32-or-better sum.
cublasStatus_t cublasGemmEx(cublasHandle_t, cublasOperation_t,
                            cublasOperation_t, int m, int n, int k,
                            const void *alpha, const void *A, cudaDataType_t,
                            int lda, const void *B, cudaDataType_t, int ldb,
                            const void *beta, void *C, cudaDataType_t, int ldc,
                            cublasComputeType_t, cublasGemmAlgo_t);
cublasStatus_t cublasGemmStridedBatchedEx(
    cublasHandle_t, cublasOperation_t, cublasOperation_t, int m, int n, int k,
    const void *alpha, const void *A, cudaDataType_t, int lda,
    long long strideA, const void *B, cudaDataType_t, int ldb,
    long long strideB, const void *beta, void *C, cudaDataType_t, int ldc,
    long long strideC, int batchCount, cublasComputeType_t, cublasGemmAlgo_t);

// ---------------------------------------------------------------- runtime
namespace emu {

struct Fiber;
extern Fiber *cur;
extern dim3 gBlockIdx, gBlockDim, gGridDim;
const uint3 &curTid();

struct Cfg {
  dim3 grid, block;
  size_t shmem;
  cudaStream_t stream;
  Cfg(dim3 g, dim3 b, size_t s = 0, cudaStream_t st = nullptr)
      : grid(g), block(b), shmem(s), stream(st) {}
};

void launchImpl(const char *name, const Cfg &cfg,
                const std::function<void()> &body);
template <class F> void launch(const char *name, const Cfg &cfg, F &&body) {
  launchImpl(name, cfg, std::function<void()>(body));
}

// Collectives (implemented in emu.cpp). `site` identifies the call site.
void syncthreads(int line);
int syncthreadsOr(int pred, int line);
unsigned ballot(unsigned mask, int pred, int line);
uint64_t shflRaw(unsigned mask, uint64_t bits, int srcLane, int mode,
                 int line); // mode 0: xor (srcLane = laneMask), 1: idx, 2: down

template <class T> T shfl(unsigned mask, T v, int arg, int mode, int line) {
  static_assert(sizeof(T) <= 8, "shuffle of a large type");
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  bits = shflRaw(mask, bits, arg, mode, line);
  T r;
  std::memcpy(&r, &bits, sizeof(T));
  return r;
}

// __syncwarp([mask]) at a line: a warp barrier as the shuffles are.
void syncwarp(unsigned mask, int line);
struct SyncWarp {
  int line;
  void operator()(unsigned mask = 0xffffffffu) const { syncwarp(mask, line); }
};

/// A warp-collective call of an emulated API (fake/mma.h's WMMA, mode its
/// kind): the lane publishes `args` and waits, as at a shuffle, for every
/// live lane of its warp (a lane absent, exited or at another collective
/// is reported as there). Then lanes[l] is lane l's args, or nullptr for a
/// lane not at this collective. Returns whether this lane is the first to
/// leave it, which does the warp's shared part before any other resumes.
bool warpCollective(const void *args, const void *lanes[32], int mode,
                    int line);
int curThread();         ///< the calling thread's linear index in its block
const char *curKernel(); ///< the running kernel's name

float fastExp(float x);
void note(const char *fmt, ...);
/// A __shared__ array (preprocess.py): poisoned before each block. `align`
/// is its declared alignment, all a GPU promises of its address.
void regShared(void *p, size_t bytes, size_t align = 0);
/// The alignment a GPU promises for p if it points into a __shared__
/// array, else 0 (the emulator's own arrays may happen to be aligned more).
size_t sharedAlignment(const void *p);

} // namespace emu

#define threadIdx (::emu::curTid())
#define blockIdx (::emu::gBlockIdx)
#define blockDim (::emu::gBlockDim)
#define gridDim (::emu::gGridDim)
#define warpSize 32

#define __syncthreads() ::emu::syncthreads(__LINE__)
#define __syncthreads_or(p) ::emu::syncthreadsOr(int(bool(p)), __LINE__)
#define __ballot_sync(m, p) ::emu::ballot((m), int(bool(p)), __LINE__)
#define __shfl_xor_sync(m, v, o, ...) ::emu::shfl((m), (v), (o), 0, __LINE__)
#define __shfl_sync(m, v, s, ...) ::emu::shfl((m), (v), (s), 1, __LINE__)
#define __shfl_down_sync(m, v, d, ...) ::emu::shfl((m), (v), (d), 2, __LINE__)
#define __syncwarp(...) ::emu::SyncWarp{__LINE__}(__VA_ARGS__)
#define __ffs(x) __builtin_ffs(int(x))
#define __popc(x) __builtin_popcount(unsigned(x))
#define __expf(x) ::emu::fastExp(x)
#define __fdividef(a, b) ((a) / (b))
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }

#endif
