//===- CudaMoeKernelsTest.cpp - MoE kernels on a GPU against the CPU -----===//
//
// Part of fsdp-cuda-kernels-test (CudaKernelsTest.cpp runs it): the
// mixture-of-experts kernels of kernels/Moe.cu on the device against the
// CPU's (cpu/MoeRouting.h, cpu/MoeExperts.h), at a Mixtral-like and a
// Qwen3-MoE-like routing (8 experts top 2, 128 top 8) over 2048 tokens:
// the same experts, order and offsets exactly, weights and gradients to
// fp32 rounding, and a second run bitwise the first. Then expert
// parallelism's dispatch kernels (kernels/MoeDispatch.cu) on that routing
// split over 4 ranks: counts, local offsets and the capacity trim exactly,
// the regroup and the compaction both ways bitwise (rows are moved, never
// combined). The emulation test checks the same on every build; this is
// the hardware's word.
//
//===----------------------------------------------------------------------===//

#include "CudaKernelsCheck.h"
#include "cpu/MoeExperts.h"
#include "cpu/MoeRouting.h"

namespace cudakernels {
namespace {

struct MoeShape {
  const char *name;
  int64_t T, E, k, C;
  int64_t scoring, normalize;
};

std::string moeLabel(const char *kernel, const MoeShape &s) {
  return std::string(kernel) + " [" + s.name + "]";
}

/// The router and the sort; returns the routing for the row kernels.
void checkRouting(Gpu &g, const MoeShape &s, Rng &rng,
                  std::vector<float> &weights, std::vector<int32_t> &position,
                  std::vector<int32_t> &order, std::vector<int32_t> &offsets) {
  const int64_t P = s.T * s.k;
  auto logits = randomVector(rng, size_t(s.T * s.E), 3.0f);
  auto dw = randomVector(rng, size_t(P));
  std::vector<float> dz(size_t(s.T * s.E));
  std::vector<int32_t> experts(static_cast<size_t>(P));
  offsets.assign(size_t(s.E + 1), 0);
  weights.assign(size_t(P), 0.0f);
  position.assign(size_t(P), 0);
  order.assign(size_t(P), 0);
  cpu::moeRouterForward(weights.data(), experts.data(), logits.data(), nullptr,
                        s.T, s.E, s.k, s.scoring, s.normalize, 1.0);
  cpu::moeRouterBackward(dz.data(), dw.data(), logits.data(), experts.data(),
                         s.T, s.E, s.k, s.scoring, s.normalize, 1.0);
  cpu::moeSortByExpert(order.data(), position.data(), offsets.data(),
                       experts.data(), s.T, s.k, s.E);
  DevF dLogits(logits), dW(static_cast<size_t>(P)), dDw(dw),
      dDz(size_t(s.T * s.E));
  DevI dEx(static_cast<size_t>(P)), dOrder(static_cast<size_t>(P)),
      dPos(static_cast<size_t>(P)), dOff(size_t(s.E + 1));
  gpu::moeRouterForward<float>(g.ctx(), dW, dEx, dLogits, nullptr, s.T, s.E,
                               s.k, s.scoring, s.normalize, 1.0);
  gpu::moeRouterBackward<float>(g.ctx(), dDz, dDw, dLogits, dEx, s.T, s.E, s.k,
                                s.scoring, s.normalize, 1.0);
  gpu::moeSortByExpert(g.ctx(), dOrder, dPos, dOff, dEx, s.T, s.k, s.E);
  CHECK_MSG(dEx.download() == experts, moeLabel("moeRouterForward experts", s));
  CHECK_REL(moeLabel("moeRouterForward weights", s), dW.download(), weights,
            kTolFp32);
  const std::vector<float> gotDz = dDz.download();
  CHECK_REL(moeLabel("moeRouterBackward dlogits", s), gotDz, dz, kTolFp32);
  CHECK_MSG(dOrder.download() == order && dPos.download() == position &&
                dOff.download() == offsets,
            moeLabel("moeSortByExpert order, position, offsets", s));
  dDz.poison();
  gpu::moeRouterBackward<float>(g.ctx(), dDz, dDw, dLogits, dEx, s.T, s.E, s.k,
                                s.scoring, s.normalize, 1.0);
  CHECK_MSG(sameBits(dDz.download(), gotDz),
            moeLabel("moeRouterBackward deterministic", s));
}

/// Permute and combine with their gradients on the CPU's routing.
void checkRows(Gpu &g, const MoeShape &s, Rng &rng,
               const std::vector<float> &weights,
               const std::vector<int32_t> &position,
               const std::vector<int32_t> &order) {
  const size_t P = size_t(s.T * s.k), TC = size_t(s.T * s.C);
  auto x = randomVector(rng, TC), ys = randomVector(rng, P * s.C),
       dy = randomVector(rng, TC), dxs = randomVector(rng, P * s.C);
  std::vector<float> xs(P * s.C), dx(TC), y(TC), dys(P * s.C), dw(P);
  cpu::moePermute(xs.data(), x.data(), order.data(), s.T, s.k, s.C);
  cpu::moePermuteBackward(dx.data(), dxs.data(), position.data(), s.T, s.k,
                          s.C);
  cpu::moeCombine(y.data(), ys.data(), weights.data(), position.data(), s.T,
                  s.k, s.C);
  cpu::moeCombineBackward(dys.data(), dw.data(), dy.data(), ys.data(),
                          weights.data(), position.data(), s.T, s.k, s.C);
  DevF dX(x), dXs(P * s.C), dDxs(dxs), dDx(TC), dYs(ys), dY(TC), dW(weights),
      dDy(dy), dDys(P * s.C), dDw(P);
  DevI dOrder(order), dPos(position);
  gpu::moePermute<float>(g.ctx(), dXs, dX, dOrder, s.T, s.k, s.C);
  gpu::moePermuteBackward<float>(g.ctx(), dDx, dDxs, dPos, s.T, s.k, s.C);
  gpu::moeCombine<float>(g.ctx(), dY, dYs, dW, dPos, s.T, s.k, s.C);
  gpu::moeCombineBackward<float>(g.ctx(), dDys, dDw, dDy, dYs, dW, dPos, s.T,
                                 s.k, s.C);
  CHECK_MSG(sameBits(dXs.download(), xs), moeLabel("moePermute", s));
  CHECK_REL(moeLabel("moePermuteBackward", s), dDx.download(), dx, kTolFp32);
  CHECK_REL(moeLabel("moeCombine", s), dY.download(), y, kTolFp32);
  CHECK_REL(moeLabel("moeCombineBackward dys", s), dDys.download(), dys,
            kTolFp32);
  CHECK_REL(moeLabel("moeCombineBackward dweights", s), dDw.download(), dw,
            kTolFp32);
}

/// Expert parallelism's dispatch on the sort's offsets, as if the rows
/// were split over G ranks of E / G experts and this rank received them
/// all (M = P rows); drop mode's trim to half of them and the packing.
void checkDispatch(Gpu &g, const MoeShape &s, Rng &rng,
                   const std::vector<int32_t> &offsets) {
  const int64_t G = 4, L = s.E / G, P = s.T * s.k;
  const size_t rows = size_t(P * s.C);
  std::vector<int32_t> counts(size_t(G * L)), local(size_t(L + 1)),
      kept(size_t(G * L)), dropped(1);
  cpu::moeExpertCounts(counts.data(), offsets.data(), G, L);
  cpu::moeLocalOffsets(local.data(), counts.data(), G, L);
  cpu::moeCapacityTrim(kept.data(), dropped.data(), counts.data(), G, L, P / 2);
  DevI dOff(offsets), dCounts(size_t(G * L)), dLocal(size_t(L + 1)),
      dKept(size_t(G * L)), dDropped(1);
  gpu::moeExpertCounts(g.ctx(), dCounts, dOff, G, L);
  gpu::moeLocalOffsets(g.ctx(), dLocal, dCounts, G, L);
  gpu::moeCapacityTrim(g.ctx(), dKept, dDropped, dCounts, G, L, P / 2);
  CHECK_MSG(dCounts.download() == counts && dLocal.download() == local,
            moeLabel("moeExpertCounts, moeLocalOffsets", s));
  CHECK_MSG(dKept.download() == kept && dDropped.download() == dropped,
            moeLabel("moeCapacityTrim", s));
  auto x = randomVector(rng, rows);
  DevF dX(x), dOut(rows);
  for (int64_t inverse : {0, 1}) {
    std::vector<float> want(rows);
    cpu::moeRegroup(want.data(), x.data(), counts.data(), G, L, P, s.C,
                    inverse);
    gpu::moeRegroup<float>(g.ctx(), dOut, dX, dCounts, G, L, P, s.C, inverse);
    CHECK_MSG(sameBits(dOut.download(), want),
              moeLabel(inverse ? "moeRegroup inverse" : "moeRegroup", s));
    cpu::moeCompact(want.data(), x.data(), counts.data(), kept.data(), G, L, P,
                    s.C, inverse);
    gpu::moeCompact<float>(g.ctx(), dOut, dX, dCounts, dKept, G, L, P, s.C,
                           inverse);
    CHECK_MSG(sameBits(dOut.download(), want),
              moeLabel(inverse ? "moeCompact inverse" : "moeCompact", s));
  }
}

} // namespace

void testMoe(Gpu &g, uint64_t seed) {
  static const MoeShape kMoeShapes[] = {
      {"mixtral-like", 2048, 8, 2, 512, 0, 1},
      {"qwen3-moe-like", 2048, 128, 8, 256, 0, 1},
      {"sigmoid", 1024, 64, 6, 128, 1, 1},
  };
  for (const MoeShape &s : kMoeShapes) {
    Rng rng(seed++);
    std::vector<float> weights;
    std::vector<int32_t> position, order, offsets;
    checkRouting(g, s, rng, weights, position, order, offsets);
    checkRows(g, s, rng, weights, position, order);
    checkDispatch(g, s, rng, offsets);
    CHECK_NO_ERROR(moeLabel("moe", s));
  }
}

} // namespace cudakernels
