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
//     shape and at head sizes up to 128, and on TF32 tensor cores (fp32 at
//     5e-3, bf16 at its tolerance) on the same shapes;
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

#include "CudaKernelsCheck.h"

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

using namespace cudakernels;

namespace {
/// T > 256: the causal row blocks of the attention products (256 + 44).
const Shape kTwoBlocks{"T=300", 2, 300, 48, 4, 1};

/// The device's line, and its stream and cuBLAS handle (pedantic fp32
/// math); false when there is no device.
bool openGpu(Gpu &g) {
  int devices = 0;
  const cudaError_t err = cudaGetDeviceCount(&devices);
  if (err != cudaSuccess || devices == 0) {
    std::printf("cuda-kernels: no CUDA device: skipped (%s)\n",
                err != cudaSuccess ? cudaGetErrorString(err)
                                   : "cudaGetDeviceCount found none");
    return false;
  }
  cudaDeviceProp prop;
  cudaOrDie(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  std::printf("cuda-kernels: %s (sm_%d%d, %d SMs)\n", prop.name, prop.major,
              prop.minor, prop.multiProcessorCount);

  cudaOrDie(cudaStreamCreate(&g.stream), "cudaStreamCreate");
  if (cublasCreate(&g.blas) != CUBLAS_STATUS_SUCCESS ||
      cublasSetStream(g.blas, g.stream) != CUBLAS_STATUS_SUCCESS)
    fatal("cannot create the cuBLAS handle");
  g.mathMode(CUBLAS_PEDANTIC_MATH);
  return true;
}

/// A CPU BLAS for the GEMM-based references (null: those checks skipped).
std::unique_ptr<cpu::Blas> openReferenceBlas() {
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
  return blas;
}

/// Attention's edge shapes: grouped-query attention, both forms (kv heads
/// of 2 and of 4 query heads, Llama 3's ratio; one kv head, multi-query)
/// and sliding windows, on seeds of their own so that the other cases keep
/// theirs.
const Shape kGroupedShapes[] = {
    {"GQA hs=8 KV=2", 2, 70, 32, 4, 1, 2},
    {"GQA T=300 KV=1", 1, 300, 48, 4, 1, 1},
    {"GQA hs=64 KV=2", 2, 130, 512, 8, 1, 2},
    {"GQA hs=128 KV=1", 1, 200, 512, 4, 1, 1},
    // Sliding windows (Mistral's): shorter than a tile, across tiles in
    // the 64 and 128 buckets, grouped.
    {"window=5 KV=2", 2, 70, 32, 4, 1, 2, 5},
    {"window=40 hs=64 KV=2", 1, 200, 512, 8, 1, 2, 40},
    {"window=17 hs=128", 1, 130, 256, 2, 1, 0, 17},
};
/// The blocked attention at head sizes in each compiled bucket (32, 64,
/// 128) and past their edges, T off the tiles (32 rows, 16 above hs = 64;
/// on tensor cores 64 and 32), and GPT-2 124M's shape.
const Shape kBlockedShapes[] = {
    {"T=1", 1, 1, 8, 2, 1},
    {"hs=5", 3, 7, 15, 3, 1},
    {"hs=33", 2, 65, 66, 2, 1},
    {"hs=64", 2, 130, 256, 4, 1},
    {"hs=100", 1, 77, 200, 2, 1},
    {"hs=128", 2, 300, 512, 4, 1},
    {"gpt2 B=4 T=1024 C=768 NH=12", 4, 1024, 768, 12, 1},
};

void checkAttentionShapes(Gpu &g, const cpu::Blas &blas, uint64_t &seed) {
  for (size_t i = 0; i < std::size(kGroupedShapes); ++i) {
    const Shape &s = kGroupedShapes[i];
    testAttention(g, blas, s, 700 + i, kTolFp32, "fp32");
    testBlockedAttention(g, blas, s, 710 + i);
    testBF16Attention(g, blas, s, 720 + i, /*materialized=*/true);
    testBF16Attention(g, blas, s, 730 + i, /*materialized=*/false);
  }
  for (const Shape &s : kBlockedShapes)
    testBlockedAttention(g, blas, s, seed++);
}

/// The blocked attention on tensor cores (TF32 math), fp32 and bf16, on
/// every shape above.
void checkTensorCoreAttention(Gpu &g, const cpu::Blas &blas) {
  uint64_t seed = 740;
  for (const Shape &s : kGroupedShapes) {
    testBlockedAttention(g, blas, s, seed++);
    testBF16Attention(g, blas, s, seed++, /*materialized=*/false);
  }
  for (const Shape &s : kBlockedShapes) {
    testBlockedAttention(g, blas, s, seed++);
    testBF16Attention(g, blas, s, seed++, /*materialized=*/false);
  }
}

/// The fp32 checks on every shape, attention's edge shapes and the
/// cross-entropy's; `seed` counts on.
void checkFp32(Gpu &g, const cpu::Blas *blas, uint64_t &seed) {
  for (const Shape &s : kShapes) {
    testEmbedding(g, s, seed++);
    testLayerNorm(g, s, seed++);
    testLinear(g, blas, s, seed++, kTolFp32, "fp32");
    testElementwise(g, s, seed++);
    if (blas)
      testAttention(g, *blas, s, seed++, kTolFp32, "fp32");
    testAdamW(g, s, seed++);
  }
  if (blas)
    testAttention(g, *blas, kTwoBlocks, seed++, kTolFp32, "fp32");
  if (blas)
    checkAttentionShapes(g, *blas, seed);
  testCrossEntropy(g, "small", 7, 37, seed++);
  testCrossEntropy(g, "gpt2-like", 128, 517, seed++);
  testCrossEntropy(g, "V=50257", 37, 50257, seed++);
}

/// The GEMM-based kernels again with TF32 tensor-op math.
void checkTf32(Gpu &g, const cpu::Blas *blas, uint64_t &seed) {
  g.mathMode(CUBLAS_TF32_TENSOR_OP_MATH);
  for (const Shape &s : kShapes) {
    testLinear(g, blas, s, seed++, kTolTf32, "tf32");
    if (blas)
      testAttention(g, *blas, s, seed++, kTolTf32, "tf32");
  }
  if (blas) {
    testAttention(g, *blas, kTwoBlocks, seed++, kTolTf32, "tf32");
    checkTensorCoreAttention(g, *blas);
  }
  g.mathMode(CUBLAS_PEDANTIC_MATH);
}
} // namespace

int main() {
  Gpu g;
  if (!openGpu(g))
    return 77;
  std::unique_ptr<cpu::Blas> blas = openReferenceBlas();
  testErrorRecording(g);
  testGradClip(g, 900);
  testAdamWTensors(g, 910);
  uint64_t seed = 1;
  checkFp32(g, blas.get(), seed);
  checkTf32(g, blas.get(), seed);
  testBF16(g, blas.get(), seed);
  testLlama(g, seed);
  testMoe(g, 950);

  if (!std::getenv("FSDP_CUDA_TEST_NO_TIMING"))
    timeGpt2(g);

  cublasDestroy(g.blas);
  cudaStreamDestroy(g.stream);
  std::printf("cuda-kernels: %d passed, %d failed\n", gPassed, gFailed);
  return gFailed == 0 ? 0 : 1;
}
