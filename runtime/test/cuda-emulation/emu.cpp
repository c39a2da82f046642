//===- emu.cpp - the emulator: fibers, collectives, fake CUDA, cuBLAS ---===//
#include "emu.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <ucontext.h>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define EMU_ASAN 1
#endif

namespace emu {

// Options the harness sets.
int gThreadOrder = 0; // 0 forward, 1 reverse, 2 random
int gBlockOrder = 0;
unsigned gSeed = 1;
int gProblems = 0; // count of emulation-detected device problems
bool gQuiet = false;

void note(const char *fmt, ...) {
  ++gProblems;
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "[emu] ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
}

float fastExp(float x) {
  // ex2.approx.ftz(x * log2 e): the rounding of the product as on the GPU.
  const float y = x * 1.44269504f;
  float r = std::exp2(y);
  if (std::fpclassify(r) == FP_SUBNORMAL)
    r = 0.0f;
  return r;
}

struct Fiber {
  ucontext_t ctx;
  uint3 tid;
  int linear = 0, warp = 0, lane = 0;
  bool done = false, started = false;
  int waiting = 0; // 0 none, 1 block barrier, 2 warp barrier
  unsigned waitGen = 0;
  char *stack = nullptr;
};

struct Barrier {
  int arrived = 0;
  unsigned gen = 0;
  uint64_t acc[2] = {0, 0};
  int line = -1;
  int mode = -1; // for warp barriers: the shuffle kind
  bool lineMismatch = false;
  unsigned mask = 0;          // lanes arrived (warp)
  unsigned maskP[2] = {0, 0}; // lanes that took part, per parity
};

Fiber *cur = nullptr;
dim3 gBlockIdx, gBlockDim, gGridDim;
static ucontext_t gSched;
static std::vector<Fiber> gFibers;
static const std::function<void()> *gBody = nullptr;
static Barrier gBlockBar;
static std::vector<Barrier> gWarpBar;
static std::vector<int> gWarpLive, gWarpSize;
static int gLive = 0;
static const char *gKernel = "";
static uint64_t gShfl[64][2][32]; // [warp][parity][lane]
static constexpr size_t kStack = 256 * 1024;
static bool gDeadlock = false;
#ifdef EMU_ASAN
static void *gSchedFake = nullptr;
static const void *gSchedBottom = nullptr;
static size_t gSchedSize = 0;
#endif

const uint3 &curTid() { return cur->tid; }

static std::vector<std::pair<void *, size_t>> gShared;
void regShared(void *p, size_t bytes) {
  for (auto &r : gShared)
    if (r.first == p)
      return;
  gShared.push_back({p, bytes});
  memset(p, 0xff, bytes); // first use: nobody has written it yet
}

static void toSched() {
  Fiber *f = cur;
#ifdef EMU_ASAN
  void *fake = nullptr;
  __sanitizer_start_switch_fiber(f->done ? nullptr : &fake, gSchedBottom,
                                 gSchedSize);
#endif
  swapcontext(&f->ctx, &gSched);
#ifdef EMU_ASAN
  __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
}

static void entry() {
#ifdef EMU_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &gSchedBottom, &gSchedSize);
#endif
  (*gBody)();
  Fiber *f = cur;
  f->done = true;
  --gLive;
  --gWarpLive[f->warp];
  // An exit may complete a barrier the others wait at.
  if (gBlockBar.arrived > 0 && gBlockBar.arrived == gLive) {
    note("%s block (%u,%u,%u): thread %d exited while others wait at "
         "__syncthreads (line %d); released",
         gKernel, gBlockIdx.x, gBlockIdx.y, gBlockIdx.z, f->linear,
         gBlockBar.line);
    gBlockBar.arrived = 0;
    gBlockBar.acc[(gBlockBar.gen + 1) & 1] = 0;
    ++gBlockBar.gen;
  }
  Barrier &w = gWarpBar[f->warp];
  if (w.arrived > 0 && w.arrived == gWarpLive[f->warp]) {
    note("%s block %u: lane %d exited while its warp waits at a warp "
         "collective (line %d)",
         gKernel, gBlockIdx.x, f->lane, w.line);
    w.arrived = 0;
    w.acc[(w.gen + 1) & 1] = 0;
    ++w.gen;
  }
  toSched();
}

static bool runnable(const Fiber &f) {
  if (f.done)
    return false;
  if (f.waiting == 1)
    return gBlockBar.gen != f.waitGen;
  if (f.waiting == 2)
    return gWarpBar[f.warp].gen != f.waitGen;
  return true;
}

static void resume(Fiber &f) {
  cur = &f;
#ifdef EMU_ASAN
  void *fake = nullptr;
  __sanitizer_start_switch_fiber(&fake, f.stack, kStack);
#endif
  swapcontext(&gSched, &f.ctx);
#ifdef EMU_ASAN
  __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
  cur = nullptr;
}

static void runBlock(int nthreads, std::mt19937 &rng) {
  if ((int)gFibers.size() < nthreads)
    gFibers.resize(nthreads);
  const int warps = (nthreads + 31) / 32;
  gWarpBar.assign(warps, Barrier());
  gWarpLive.assign(warps, 0);
  gWarpSize.assign(warps, 0);
  gBlockBar = Barrier();
  gLive = nthreads;
  for (auto &r : gShared) // shared memory starts as garbage: NaN bytes
    memset(r.first, 0xff, r.second);
  for (int t = 0; t < nthreads; ++t) {
    Fiber &f = gFibers[t];
    if (!f.stack)
      f.stack = static_cast<char *>(malloc(kStack));
    f.done = false;
    f.waiting = 0;
    f.linear = t;
    f.tid = {t % gBlockDim.x, (t / gBlockDim.x) % gBlockDim.y,
             t / (gBlockDim.x * gBlockDim.y)};
    f.warp = t / 32;
    f.lane = t % 32;
    ++gWarpLive[f.warp];
    ++gWarpSize[f.warp];
    getcontext(&f.ctx);
    f.ctx.uc_stack.ss_sp = f.stack;
    f.ctx.uc_stack.ss_size = kStack;
    f.ctx.uc_link = nullptr;
    makecontext(&f.ctx, entry, 0);
  }
  std::vector<int> order(nthreads);
  for (int t = 0; t < nthreads; ++t)
    order[t] = gThreadOrder == 1 ? nthreads - 1 - t : t;
  while (true) {
    if (gThreadOrder == 2)
      std::shuffle(order.begin(), order.end(), rng);
    bool progress = false, all = true;
    for (int t : order) {
      Fiber &f = gFibers[t];
      if (f.done)
        continue;
      all = false;
      if (runnable(f)) {
        progress = true;
        resume(f);
      }
    }
    if (all)
      break;
    if (!progress) {
      note("%s block (%u,%u,%u): DEADLOCK (block barrier arrived %d of %d "
           "live, line %d)",
           gKernel, gBlockIdx.x, gBlockIdx.y, gBlockIdx.z, gBlockBar.arrived,
           gLive, gBlockBar.line);
      gDeadlock = true;
      break; // abandon the fibers (their stacks are reinitialised next time)
    }
  }
}

// ---------------------------------------------------------------- barriers
static uint64_t blockArrive(uint64_t contrib, int line) {
  Fiber *f = cur;
  Barrier &b = gBlockBar;
  if (b.arrived == 0)
    b.line = line;
  else if (b.line != line && !b.lineMismatch) {
    b.lineMismatch = true;
    note("%s block %u: __syncthreads at different lines (%d and %d)", gKernel,
         gBlockIdx.x, b.line, line);
  }
  const unsigned p = b.gen & 1;
  b.acc[p] |= contrib;
  if (++b.arrived == gLive) {
    b.arrived = 0;
    b.acc[p ^ 1] = 0;
    ++b.gen;
  } else {
    f->waiting = 1;
    f->waitGen = b.gen;
    toSched();
    f->waiting = 0;
  }
  return b.acc[p];
}

void syncthreads(int line) { blockArrive(0, line); }
int syncthreadsOr(int pred, int line) {
  return blockArrive(pred ? 1 : 0, line) != 0;
}

// Warp barrier; returns the parity used.
static unsigned warpArrive(unsigned mask, uint64_t contrib, int line,
                           int mode) {
  Fiber *f = cur;
  Barrier &b = gWarpBar[f->warp];
  const int size = gWarpSize[f->warp];
  if (mask != 0xffffffffu)
    note("%s: warp collective with partial mask %08x (line %d)", gKernel, mask,
         line);
  if (b.arrived == 0) {
    b.line = line;
    b.mode = mode;
    b.mask = 0;
    if (size != 32 || gWarpLive[f->warp] != 32)
      note("%s block %u warp %d: full-mask collective (line %d) with %d "
           "lanes present, %d live",
           gKernel, gBlockIdx.x, f->warp, line, size, gWarpLive[f->warp]);
  } else if (b.line != line || b.mode != mode) {
    note("%s block %u warp %d: lanes at different collectives (lines %d, %d)",
         gKernel, gBlockIdx.x, f->warp, b.line, line);
  }
  b.mask |= 1u << f->lane;
  const unsigned p = b.gen & 1;
  b.acc[p] |= contrib;
  b.maskP[p] |= 1u << f->lane;
  if (++b.arrived == gWarpLive[f->warp]) {
    b.arrived = 0;
    b.acc[p ^ 1] = 0;
    b.maskP[p ^ 1] = 0;
    ++b.gen;
  } else {
    f->waiting = 2;
    f->waitGen = b.gen;
    toSched();
    f->waiting = 0;
  }
  return p;
}

unsigned ballot(unsigned mask, int pred, int line) {
  Fiber *f = cur;
  const unsigned p =
      warpArrive(mask, pred ? (uint64_t(1) << f->lane) : 0, line, 10);
  return unsigned(gWarpBar[f->warp].acc[p]);
}

uint64_t shflRaw(unsigned mask, uint64_t bits, int arg, int mode, int line) {
  Fiber *f = cur;
  // The parity of this collective's generation selects the buffer.
  const unsigned p = gWarpBar[f->warp].gen & 1;
  gShfl[f->warp][p][f->lane] = bits;
  warpArrive(mask, 0, line, mode);
  int src;
  if (mode == 0)
    src = f->lane ^ arg;
  else if (mode == 1)
    src = arg & 31;
  else
    src = f->lane + arg < 32 ? f->lane + arg : f->lane;
  if (src >= gWarpSize[f->warp] ||
      !((gWarpBar[f->warp].maskP[p] >> (src & 31)) & 1)) {
    note("%s: shuffle reads lane %d that is absent/exited (line %d)", gKernel,
         src, line);
  }
  return gShfl[f->warp][p][src & 31];
}

// ---------------------------------------------------------------- launch
static cudaError_t gLastError = cudaSuccess;
static std::mt19937 gRng(1);

void launchImpl(const char *name, const Cfg &cfg,
                const std::function<void()> &body) {
  const uint64_t threads = uint64_t(cfg.block.x) * cfg.block.y * cfg.block.z;
  if (threads == 0 || threads > 1024 || cfg.block.z > 64 || cfg.grid.x == 0 ||
      cfg.grid.y == 0 || cfg.grid.z == 0 || cfg.grid.y > 65535 ||
      cfg.grid.z > 65535 || cfg.grid.x > 2147483647u) {
    note("%s: invalid launch configuration grid (%u,%u,%u) block (%u,%u,%u)",
         name, cfg.grid.x, cfg.grid.y, cfg.grid.z, cfg.block.x, cfg.block.y,
         cfg.block.z);
    gLastError = cudaErrorInvalidConfiguration;
    return;
  }
  if (cfg.block.x * cfg.block.y * cfg.block.z % 32 != 0 && !gQuiet)
    fprintf(stderr,
            "[emu info] %s: block of %llu threads (not a multiple "
            "of 32)\n",
            name, (unsigned long long)threads);
  gKernel = name;
  gBody = &body;
  gBlockDim = cfg.block;
  gGridDim = cfg.grid;
  const uint64_t nblocks = uint64_t(cfg.grid.x) * cfg.grid.y * cfg.grid.z;
  std::vector<uint64_t> order(nblocks);
  for (uint64_t i = 0; i < nblocks; ++i)
    order[i] = gBlockOrder == 1 ? nblocks - 1 - i : i;
  if (gBlockOrder == 2)
    std::shuffle(order.begin(), order.end(), gRng);
  for (uint64_t bi : order) {
    gBlockIdx = dim3(unsigned(bi % cfg.grid.x),
                     unsigned((bi / cfg.grid.x) % cfg.grid.y),
                     unsigned(bi / (uint64_t(cfg.grid.x) * cfg.grid.y)));
    runBlock(int(threads), gRng);
    if (gDeadlock) {
      gDeadlock = false;
      break;
    }
  }
  gBody = nullptr;
}

} // namespace emu

// ---------------------------------------------------------------- runtime
cudaError_t cudaGetLastError() {
  cudaError_t e = emu::gLastError;
  emu::gLastError = cudaSuccess;
  return e;
}
cudaError_t cudaPeekAtLastError() { return emu::gLastError; }
const char *cudaGetErrorString(cudaError_t e) {
  switch (e) {
  case cudaSuccess:
    return "no error";
  case cudaErrorInvalidConfiguration:
    return "invalid configuration argument";
  case cudaErrorInvalidValue:
    return "invalid argument";
  default:
    return "unknown";
  }
}
cudaError_t cudaMemsetAsync(void *p, int value, size_t bytes, cudaStream_t) {
  if (bytes)
    memset(p, value, bytes);
  return cudaSuccess;
}
cudaError_t cudaMemset2DAsync(void *p, size_t pitch, int value, size_t width,
                              size_t height, cudaStream_t) {
  if (width > pitch && height > 1)
    return cudaErrorInvalidValue;
  for (size_t r = 0; r < height; ++r)
    memset(static_cast<char *>(p) + r * pitch, value, width);
  return cudaSuccess;
}

// Elements as the GEMMs read and write them: float, or bf16 widened on
// load and rounded (by the conversion the kernels use) on store.
static float loadElem(const void *p, int64_t i, cudaDataType_t t) {
  if (t == CUDA_R_16BF)
    return __bfloat162float(static_cast<const __nv_bfloat16 *>(p)[i]);
  return static_cast<const float *>(p)[i];
}
static void storeElem(void *p, int64_t i, cudaDataType_t t, float v) {
  if (t == CUDA_R_16BF)
    static_cast<__nv_bfloat16 *>(p)[i] = __float2bfloat16_rn(v);
  else
    static_cast<float *>(p)[i] = v;
}

// Column-major C = alpha op(A) op(B) + beta C (beta == 0: C not read), the
// sum in double, C rounded once to its type.
static cublasStatus_t gemmT(cublasOperation_t ta, cublasOperation_t tb, int m,
                            int n, int k, float alpha, const void *A, int lda,
                            const void *B, int ldb, float beta, void *C,
                            int ldc, cudaDataType_t t) {
  if (m < 0 || n < 0 || k < 0)
    return CUBLAS_STATUS_INVALID_VALUE;
  const int arows = ta == CUBLAS_OP_N ? m : k;
  const int brows = tb == CUBLAS_OP_N ? k : n;
  if (lda < std::max(1, arows) || ldb < std::max(1, brows) ||
      ldc < std::max(1, m))
    return CUBLAS_STATUS_INVALID_VALUE;
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < m; ++i) {
      double acc = 0.0;
      for (int l = 0; l < k; ++l) {
        const float a = ta == CUBLAS_OP_N
                            ? loadElem(A, i + (int64_t)l * lda, t)
                            : loadElem(A, l + (int64_t)i * lda, t);
        const float b = tb == CUBLAS_OP_N
                            ? loadElem(B, l + (int64_t)j * ldb, t)
                            : loadElem(B, j + (int64_t)l * ldb, t);
        acc += double(a) * double(b);
      }
      const int64_t at = i + (int64_t)j * ldc;
      const float c = beta == 0.0f ? 0.0f : loadElem(C, at, t);
      storeElem(C, at, t,
                beta == 0.0f ? float(alpha * acc)
                             : float(alpha * acc + beta * c));
    }
  return CUBLAS_STATUS_SUCCESS;
}

static cublasStatus_t gemm1(cublasOperation_t ta, cublasOperation_t tb, int m,
                            int n, int k, float alpha, const float *A, int lda,
                            const float *B, int ldb, float beta, float *C,
                            int ldc) {
  return gemmT(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc,
               CUDA_R_32F);
}

static size_t elemSize(cudaDataType_t t) { return t == CUDA_R_16BF ? 2 : 4; }

// The Ex calls as the kernels make them: one type for A, B and C, fp32
// compute, host alpha and beta.
static bool exSupported(cudaDataType_t a, cudaDataType_t b, cudaDataType_t c,
                        cublasComputeType_t compute) {
  return a == b && b == c && (a == CUDA_R_32F || a == CUDA_R_16BF) &&
         compute == CUBLAS_COMPUTE_32F;
}

cublasStatus_t cublasGemmEx(cublasHandle_t, cublasOperation_t ta,
                            cublasOperation_t tb, int m, int n, int k,
                            const void *alpha, const void *A, cudaDataType_t at,
                            int lda, const void *B, cudaDataType_t bt, int ldb,
                            const void *beta, void *C, cudaDataType_t ct,
                            int ldc, cublasComputeType_t compute,
                            cublasGemmAlgo_t) {
  if (!exSupported(at, bt, ct, compute))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  return gemmT(ta, tb, m, n, k, *static_cast<const float *>(alpha), A, lda, B,
               ldb, *static_cast<const float *>(beta), C, ldc, ct);
}

cublasStatus_t cublasGemmStridedBatchedEx(
    cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
    int k, const void *alpha, const void *A, cudaDataType_t at, int lda,
    long long sA, const void *B, cudaDataType_t bt, int ldb, long long sB,
    const void *beta, void *C, cudaDataType_t ct, int ldc, long long sC,
    int batch, cublasComputeType_t compute, cublasGemmAlgo_t) {
  if (!exSupported(at, bt, ct, compute))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  if (batch < 0)
    return CUBLAS_STATUS_INVALID_VALUE;
  const size_t e = elemSize(ct);
  for (int i = 0; i < batch; ++i) {
    cublasStatus_t s =
        gemmT(ta, tb, m, n, k, *static_cast<const float *>(alpha),
              static_cast<const char *>(A) + i * sA * e, lda,
              static_cast<const char *>(B) + i * sB * e, ldb,
              *static_cast<const float *>(beta),
              static_cast<char *>(C) + i * sC * e, ldc, ct);
    if (s != CUBLAS_STATUS_SUCCESS)
      return s;
  }
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSgemm(cublasHandle_t, cublasOperation_t ta,
                           cublasOperation_t tb, int m, int n, int k,
                           const float *alpha, const float *A, int lda,
                           const float *B, int ldb, const float *beta, float *C,
                           int ldc) {
  return gemm1(ta, tb, m, n, k, *alpha, A, lda, B, ldb, *beta, C, ldc);
}

cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t, cublasOperation_t ta,
                                         cublasOperation_t tb, int m, int n,
                                         int k, const float *alpha,
                                         const float *A, int lda, long long sA,
                                         const float *B, int ldb, long long sB,
                                         const float *beta, float *C, int ldc,
                                         long long sC, int batch) {
  if (batch < 0)
    return CUBLAS_STATUS_INVALID_VALUE;
  for (int i = 0; i < batch; ++i) {
    cublasStatus_t s = gemm1(ta, tb, m, n, k, *alpha, A + i * sA, lda,
                             B + i * sB, ldb, *beta, C + i * sC, ldc);
    if (s != CUBLAS_STATUS_SUCCESS)
      return s;
  }
  return CUBLAS_STATUS_SUCCESS;
}
