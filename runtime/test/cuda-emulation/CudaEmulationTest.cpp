//===- CudaEmulationTest.cpp - the CUDA kernels, run on the CPU -----------===//
//
// The CUDA kernels' own source (runtime/src/cuda/kernels/*.cu, turned into
// C++ by preprocess.py) executed under emu.h's emulation of the device:
// every CUDA thread a fiber, __syncthreads and warp shuffles real barriers,
// shared memory poisoned with NaN before each block, a naive column-major
// cuBLAS. Each kernel is compared with the CPU reference kernel on small
// and edge shapes (odd C, misaligned views, T across the causal blocks,
// V above the block size, N = 0 and 1): outputs pre-filled with NaN and
// guarded by canaries, causal zeros exact, and every check run three times
// with the threads and blocks in forward, reversed and shuffled order,
// which must agree bit for bit (races show up there). This is how CI,
// which has no GPU, runs the kernels; the parity test on a real GPU
// (CudaKernelsTest.cpp) covers what an emulation cannot: memory ordering,
// fused multiply-adds, the hardware's transcendental functions, speed.
//
// Every templated kernel runs in bf16 too (group bf16), against the CPU's
// fp32 kernel on the same inputs with its results rounded to bf16 (what the
// CPU backend computes for a bf16 kernel), tolerances in bf16 units; the
// rounding group checks CUDA's __float2bfloat16_rn and the cast kernel
// against the CPU's roundToBF16, bit for bit.
//
// Usage: fsdp-cuda-emulation-test [GROUP] (adamw, attention, bf16, bias,
// blocked, ce, edge, elementwise, embedding, fuzz, gradclip (sums of
// squares in f32 and bf16, the coefficient, AdamW's scale), layernorm, linear,
// llama (rms_norm, swiglu, rope in f32 and bf16), moe (router, sort by
// expert, permute and combine), probe, rounding, wmma (the emulated
// tensor-core API, fake/mma.h)); env
// PAD=0 removes the canary padding (for sanitizer builds).
// Prints one line per failure and "N checks, M failures"; exits non-zero
// on any failure.
//
//===----------------------------------------------------------------------===//

#include "EmulationCheck.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace {
// Every templated kernel in bf16 against the CPU's fp32 kernel on the same
// (bf16) inputs, its results rounded as the CPU backend rounds them: the
// shapes of the fp32 groups that reach each path (vector and scalar,
// causal blocks, tiles and head-size buckets, V above the block size).
void groupBF16(unsigned &) {
  unsigned seed = 50001;
  for (int n : {1, 5, 8, 1025, 4099})
    for (auto offs : std::vector<std::vector<int>>{
             {0, 0, 0}, {1, 1, 1}, {0, 0, 2}, {3, 0, 0}})
      testElementwise<BF16>(n, offs[0], offs[1], offs[2], seed++);
  testEmbedding<BF16>(2, 3, 8, 5, 3, 0, 0, seed++);
  testEmbedding<BF16>(1, 1, 4, 2, 5, 1, 0, seed++);
  testEmbedding<BF16>(3, 33, 260, 50, 40, 0, 1, seed++);
  testEmbedding<BF16>(4, 70, 33, 2, 70, 0, 0, seed++);
  for (int N : {1, 9, 70})
    for (int C : {1, 4, 33, 768})
      testLayerNorm<BF16>(N, C, N % 2, seed++);
  testLayerNorm<BF16>(3, 4100, 0, seed++);
  for (int N : {0, 5, 200})
    for (int OC : {1, 8, 9})
      testBiasGrad<BF16>(N, OC, OC % 2, seed++);
  testBiasGrad<BF16>(2, 8193, 1, seed++);
  for (int N : {1, 33})
    for (int V : {1, 5, 100, 1100})
      testCrossEntropy<BF16>(N, V, 5.0f, seed++);
  testCrossEntropy<BF16>(5, 2000, 60.0f, seed++);
  testAttention<BF16>(1, 1, 4, 1, seed++);
  testAttention<BF16>(2, 33, 12, 3, seed++);
  testAttention<BF16>(1, 300, 8, 1, seed++);
  testAttention<BF16>(2, 33, 16, 4, 901u, /*KV=*/2);
  testAttention<BF16>(1, 300, 12, 3, 902u, /*KV=*/1);
  testBlocked<BF16>(1, 1, 4, 1, seed++);
  testBlocked<BF16>(2, 70, 36, 3, seed++);
  testBlocked<BF16>(1, 130, 64, 1, seed++);
  testBlocked<BF16>(1, 65, 256, 2, seed++);
  testBlocked<BF16>(2, 33, 66, 2, seed++);
  testBlocked<BF16>(2, 70, 48, 4, 903u, /*KV=*/2);
  testBlocked<BF16>(1, 65, 256, 4, 904u, /*KV=*/1);
  testAttention<BF16>(2, 33, 16, 4, 925u, /*KV=*/2, /*W=*/5);
  testBlocked<BF16>(1, 130, 64, 1, 926u, 0, /*W=*/40);
  testBlocked<BF16>(1, 65, 256, 4, 927u, /*KV=*/2, /*W=*/20);
  testLinear<BF16>(1, 3, 5, true, seed++);
  testLinear<BF16>(7, 9, 300, true, seed++);
  testLinear<BF16>(70, 16, 33, true, seed++);
  testLinear<BF16>(5, 4, 8, false, seed++);
  testLinear<BF16>(0, 3, 5, true, seed++);
  printf("bf16 done (%d failures so far)\n", gFailures);
}

void groupEdge(unsigned &seed) {
  testEmbedding(2, 0, 8, 5, 6, 0, 0, seed++); // no positions
  testCrossEntropy(0, 5, 1.0f, seed++);
  testBiasGrad(1000, 20, 0, seed++);
  testLayerNorm(1000, 9, 1, seed++);
  testAttention(1, 257, 4, 1, seed++);
  testAttention(1, 256, 4, 2, seed++);
  testElementwise(0, 0, 0, 0, seed++);
  testAdamW(0, 0, 1, seed++);
  printf("edge done (%d failures so far)\n", gFailures);
}

void groupFuzz(unsigned &seed) {
  std::mt19937 fr(12345);
  auto U = [&](int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(fr);
  };
  for (int it = 0; it < 12; ++it) {
    testEmbedding(U(1, 4), U(1, 40), U(1, 600), U(1, 60), 40 + U(0, 5), U(0, 3),
                  U(0, 3), seed++);
    testLayerNorm(U(1, 90), U(1, 300), U(0, 3), seed++);
    testBiasGrad(U(0, 300), U(1, 200), U(0, 3), seed++);
    testCrossEntropy(U(1, 40), U(1, 1500), 1.0f + U(0, 20), seed++);
    const int NH = U(1, 4), hs = U(1, 9);
    testAttention(U(1, 2), U(1, 80), NH * hs, NH, seed++);
    testElementwise(U(0, 3000), U(0, 3), U(0, 3), U(0, 3), seed++);
    testAdamW(U(0, 3000), U(0, 3), U(1, 20), seed++);
  }
  printf("fuzz done (%d failures so far)\n", gFailures);
}

/// The groups by name, in the order a run without one runs them all.
struct Group {
  const char *name;
  void (*run)(unsigned &seed);
};
const Group kGroups[] = {
    {"elementwise", groupElementwise},
    {"adamw", groupAdamW},
    {"embedding", groupEmbedding},
    {"layernorm", groupLayerNorm},
    {"bias", groupBias},
    {"ce", groupCrossEntropy},
    {"attention", groupAttention},
    {"blocked", groupBlocked},
    {"linear", groupLinear},
    {"edge", groupEdge},
    {"probe", groupProbe},
    {"fuzz", groupFuzz},
    {"rounding", groupRounding},
    {"gradclip", groupGradClip},
    {"bf16", groupBF16},
    {"llama", groupLlama},
    {"moe", groupMoe},
    {"moe-dispatch", groupMoeDispatch},
    {"wmma", groupWmma},
};
} // namespace

int main(int argc, char **argv) {
  if (const char *p = getenv("PAD"))
    gPad = atoi(p);
  std::string err;
  gBlas = cp::Blas::open("openblas", 1, err);
  if (!gBlas) {
    fprintf(stderr, "no BLAS: %s\n", err.c_str());
    return 2;
  }
  const std::string only = argc > 1 ? argv[1] : "";
  unsigned seed = 1;
  for (const Group &group : kGroups)
    if (only.empty() || only == group.name)
      group.run(seed);
  printf("%d checks, %d failures; worst passing normwise error %.3g (%s)\n",
         gChecks, gFailures, gWorst, gWorstName.c_str());
  return gFailures ? 1 : 0;
}
