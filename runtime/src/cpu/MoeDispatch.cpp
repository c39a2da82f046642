//===- MoeDispatch.cpp - expert parallelism's counts and row runs ---------===//
//
// The dispatch kernels that run between the all-to-alls (docs/moe.md):
// counts per (expert group rank, local expert) from a sort's offsets, the
// regrouping of received runs from rank order into local-expert order
// (and back), and the local experts' offsets into the regrouped rows;
// drop mode's capacity trim and compaction of the kept rows (and back).
// moe::regroupRun (MoeDispatch.h) places every run, as on the GPU; each
// run is one thread's copy, so the result is the same bits whatever the
// threads.
//
//===----------------------------------------------------------------------===//

#include "fsdp/runtime/MoeDispatch.h"
#include "Kernels.h"

#include <algorithm>
#include <climits>
#include <cstring>

namespace fsdp::rt::cpu {

/// counts[g][l] = offsets[g L + l + 1] - offsets[g L + l].
void moeExpertCounts(int32_t *counts, const int32_t *offsets, int64_t G,
                     int64_t L) {
  for (int64_t e = 0; e < G * L; ++e)
    counts[e] = moe::offsetsDifference(offsets[e], offsets[e + 1]);
}

/// result (M x C): input's runs in (s, l) order moved into (l, s) order
/// (inverse: back), rows past the runs zero.
FSDP_CPU_KERNEL void moeRegroup(float *result, const float *input,
                                const int32_t *counts, int64_t G, int64_t L,
                                int64_t M, int64_t C, int64_t inverse) {
#pragma omp parallel for schedule(dynamic)
  for (int64_t r = 0; r < G * L; ++r) {
    moe::Run run = moe::regroupRun(counts, G, L, M, r / L, r % L);
    int64_t from = inverse ? run.ls : run.sl, to = inverse ? run.sl : run.ls;
    if (run.rows > 0)
      std::memcpy(result + to * C, input + from * C,
                  sizeof(float) * size_t(run.rows * C));
  }
  int64_t total = moe::regroupTotal(counts, G, L, M);
  std::fill(result + total * C, result + M * C, 0.0f);
}

/// offsets (L + 1): offsets[l + 1] = offsets[l] + sum_s counts[s][l],
/// saturated at INT_MAX.
void moeLocalOffsets(int32_t *offsets, const int32_t *counts, int64_t G,
                     int64_t L) {
  int64_t at = 0;
  offsets[0] = 0;
  for (int64_t l = 0; l < L; ++l) {
    at = std::min<int64_t>(at + moe::localExpertRows(counts, G, L, l), INT_MAX);
    offsets[l + 1] = int32_t(at);
  }
}

/// Drop mode: kept (G x L) the received rows that fit `capacity`, in the
/// order (l, s); dropped[0] the rest (moe::capacityTrim).
void moeCapacityTrim(int32_t *kept, int32_t *dropped, const int32_t *recv,
                     int64_t G, int64_t L, int64_t capacity) {
  moe::capacityTrim(kept, dropped, recv, G, L, capacity);
}

/// result (P x C): the first kept[g][l] rows of each run of counts[g][l]
/// (g-major) packed from row 0 (inverse: each back at its run, the cut
/// rows zero), rows past the runs zero. Runs placed by moe::compactRun.
FSDP_CPU_KERNEL void moeCompact(float *result, const float *input,
                                const int32_t *counts, const int32_t *kept,
                                int64_t G, int64_t L, int64_t P, int64_t C,
                                int64_t inverse) {
#pragma omp parallel for schedule(dynamic)
  for (int64_t r = 0; r < G * L; ++r) {
    moe::CompactRun run = moe::compactRun(counts, kept, G, L, P, r);
    int64_t from = inverse ? run.packed : run.full;
    int64_t to = inverse ? run.full : run.packed;
    if (run.rows > 0)
      std::memcpy(result + to * C, input + from * C,
                  sizeof(float) * size_t(run.rows * C));
    if (inverse) // the cut rows: their pairs were dropped
      std::fill(result + (to + run.rows) * C,
                result + (to + run.rows + run.cut) * C, 0.0f);
  }
  moe::CompactRun end = moe::compactEnd(counts, kept, G, L, P);
  int64_t total = inverse ? end.full : end.packed;
  std::fill(result + total * C, result + P * C, 0.0f);
}

} // namespace fsdp::rt::cpu
