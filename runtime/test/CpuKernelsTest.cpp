//===- CpuKernelsTest.cpp - checks of the CPU kernels ---------------------===//
//
// A standalone program (no test framework) that checks every kernel of
// src/cpu/Kernels.h:
//   - each forward against a naive double-precision reference written
//     here, on small odd shapes;
//   - each backward against central differences of a scalar function of
//     that reference, L = sum(dout * forward(x)), taken in double so that
//     the differences are exact to ~1e-8 and the tolerances only have to
//     absorb the kernels' float rounding;
//   - AdamW against a naive loop over three steps, and with gradient
//     clipping's scale against AdamW on the scaled gradient; gradient
//     clipping's sum of squares against a double loop (and for thread
//     counts) and its coefficient at its edges; the embedding backward
//     with repeated tokens; the attention's causal mask;
//   - that outputs are overwritten (they start as NaN), and that the
//     kernels that reduce over rows give bit-identical results for one
//     thread and for all threads.
//
// Usage: cpu-kernels-test [openblas|blis|onednn]. Prints one line per failed
// check (file:line, what, the worst mismatches), then
// "cpu-kernels: N passed, M failed", and exits non-zero if any failed.
//
//===----------------------------------------------------------------------===//

#include "CpuKernelsCheck.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <omp.h>

namespace cpukernels {

//===----------------------------------------------------------------------===//
// Determinism
//===----------------------------------------------------------------------===//

/// The kernels that sum over rows do so in a fixed order: one thread and
/// all threads give the same bits.
void testDeterminism() {
  Rng rng(14);
  const int64_t B = 4, T = 64, C = 200, V = 301, N = B * T;
  auto tokens = randomTokens(rng, N, V);
  auto x = randomVector(rng, N * C, 2.0f, 1.0f),
       dout = randomVector(rng, N * C);
  auto w = randomVector(rng, C, 0.5f, 1.0f), b = randomVector(rng, C);
  auto logits = randomVector(rng, N * V, 5.0f);
  auto targets = randomTokens(rng, N, V);

  auto run = [&]() {
    std::vector<float> out(N * C), mean(N), rstd(N), dx(N * C), dw(C), db(C),
        dwte(V * C), dwpe(T * C), bias(C), loss(1), rmsDx(N * C), rmsDw(C);
    layerNormForward(out.data(), mean.data(), rstd.data(), x.data(), w.data(),
                     b.data(), N, C, 1e-5f);
    layerNormBackward(dx.data(), dw.data(), db.data(), dout.data(), x.data(),
                      w.data(), mean.data(), rstd.data(), N, C);
    embeddingBackward(dwte.data(), dwpe.data(), dout.data(), tokens.data(), B,
                      T, C, V, T);
    biasGrad(bias.data(), dout.data(), N, C);
    crossEntropyForward(loss.data(), logits.data(), targets.data(), N, V);
    rmsNormForward(out.data(), rstd.data(), x.data(), w.data(), N, C, 1e-6f);
    rmsNormBackward(rmsDx.data(), rmsDw.data(), dout.data(), x.data(), w.data(),
                    rstd.data(), N, C);
    std::vector<float> all;
    for (const auto *v :
         {&dx, &dw, &db, &dwte, &dwpe, &bias, &loss, &rmsDx, &rmsDw})
      all.insert(all.end(), v->begin(), v->end());
    return all;
  };
  const auto first = run(), second = run();
  std::vector<float> single;
  withOneThread([&] { single = run(); });
  CHECK_MSG(sameBits(first, second), "reductions differ from run to run");
  CHECK_MSG(sameBits(first, single), "reductions differ between 1 and " +
                                         std::to_string(omp_get_max_threads()) +
                                         " threads");
}

} // namespace cpukernels

using namespace cpukernels;

int main(int argc, char **argv) {
  const std::string library = argc > 1 ? argv[1] : "openblas";
  std::string error;
  std::unique_ptr<Blas> blas = Blas::open(library, 2, error);
  if (CHECK_MSG(blas != nullptr, "cannot open BLAS: " + error))
    std::printf("cpu-kernels: %s, %d OpenMP threads\n",
                blas->description().c_str(), omp_get_max_threads());

  testEmbedding();
  testLayerNorm();
  if (blas)
    testLinear(*blas);
  testElementwise();
  if (blas)
    testAttention(*blas);
  if (blas)
    testBlockedAttention(*blas);
  testCrossEntropy();
  testAdamW();
  testAdamWScale();
  testAdamWTensors();
  testGradClip();
  testRmsNorm();
  testQkNorm();
  testSwiGlu();
  testRope();
  testRopeScaling();
  if (blas)
    testMoeRouting(*blas);
  testMoeDispatch();
  testDeterminism();
  testBF16Direct();

  std::printf("cpu-kernels: %d passed, %d failed\n", gPassed, gFailed);
  return gFailed == 0 ? 0 : 1;
}
