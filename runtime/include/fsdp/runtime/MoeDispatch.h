//===- MoeDispatch.h - expert parallelism's row runs -------------*- C++
//-*-===//
//
// The index arithmetic of the dispatch kernels (docs/plan-format.md,
// "Expert parallelism"): a G x L matrix of row counts, run (s, l) the
// counts[s L + l] rows rank s sent for its local expert l. moe_regroup
// moves the runs from (s, l) order to (l, s) order; both orders place the
// same clamped runs, so no run can reach past the M rows of either side.
// Drop mode's capacityTrim and compactRun are here for the same reason.
// One definition for the CPU and CUDA kernels (FSDP_MOE_HD), so the two
// cannot place a row differently.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_MOEDISPATCH_H
#define FSDP_RUNTIME_MOEDISPATCH_H

#include "fsdp/runtime/MoeRouter.h" // FSDP_MOE_HD

#include <cstdint>

namespace fsdp::moe {

/// A count as the kernels use it: not negative, and at most `room`, the
/// rows left before M (a corrupt or hand-made count reads and writes
/// nothing out of bounds; the all-to-all refuses such counts outright).
FSDP_MOE_HD inline int64_t clampCount(int64_t count, int64_t room) {
  return count < 0 ? 0 : count > room ? room : count;
}

/// Where run (s, l) lies: its first row in (s, l) order (`sl`) and in
/// (l, s) order (`ls`), and its rows, every run clamped in (s, l) order
/// so that their total is at most M. O(G L): one block or one loop
/// iteration per run.
struct Run {
  int64_t sl = 0, ls = 0, rows = 0;
};
FSDP_MOE_HD inline Run regroupRun(const int32_t *counts, int64_t G, int64_t L,
                                  int64_t M, int64_t s, int64_t l) {
  Run run;
  int64_t total = 0;
  for (int64_t i = 0; i < G; ++i)
    for (int64_t j = 0; j < L; ++j) {
      int64_t rows = clampCount(counts[i * L + j], M - total);
      total += rows;
      if (i * L + j < s * L + l)
        run.sl += rows;
      if (j < l || (j == l && i < s))
        run.ls += rows;
      if (i == s && j == l)
        run.rows = rows;
    }
  return run;
}

/// The rows every run holds together, clamped as regroupRun clamps them:
/// where the rows past the runs (zeroed) begin.
FSDP_MOE_HD inline int64_t regroupTotal(const int32_t *counts, int64_t G,
                                        int64_t L, int64_t M) {
  int64_t total = 0;
  for (int64_t i = 0; i < G * L; ++i)
    total += clampCount(counts[i], M - total);
  return total;
}

/// moe_expert_counts' entry: a sort's offsets' difference, in int32 (the
/// loader bounds offsets by INT; this only keeps corrupt ones defined).
FSDP_MOE_HD inline int32_t offsetsDifference(int32_t begin, int32_t end) {
  int64_t d = int64_t(end) - int64_t(begin);
  return int32_t(d < INT32_MIN ? INT32_MIN : d > INT32_MAX ? INT32_MAX : d);
}

/// moe_local_offsets' offsets[l + 1] - offsets[l]: the rows of local
/// expert l over the G ranks (negative counts as 0), saturated at
/// INT32_MAX.
FSDP_MOE_HD inline int64_t localExpertRows(const int32_t *counts, int64_t G,
                                           int64_t L, int64_t l) {
  int64_t rows = 0;
  for (int64_t s = 0; s < G; ++s)
    rows += counts[s * L + l] < 0 ? 0 : counts[s * L + l];
  return rows;
}

/// moe_capacity_trim (drop mode, docs/plan-format.md): of the rows the G
/// ranks would send this rank (recv[s L + l], negative as 0), kept[s L + l]
/// fit `capacity` in the order (l, s), each run cut to the room left, and
/// dropped[0] the rows cut (saturated at INT32_MAX). One pass over G L
/// counts, a few hundred at most: the CPU's loop and one GPU thread.
FSDP_MOE_HD inline void capacityTrim(int32_t *kept, int32_t *dropped,
                                     const int32_t *recv, int64_t G, int64_t L,
                                     int64_t capacity) {
  int64_t room = capacity < 0 ? 0 : capacity, cut = 0;
  for (int64_t l = 0; l < L; ++l)
    for (int64_t s = 0; s < G; ++s) {
      int64_t wanted = recv[s * L + l] < 0 ? 0 : recv[s * L + l];
      int64_t keep = wanted < room ? wanted : room;
      kept[s * L + l] = int32_t(keep);
      room -= keep;
      cut += wanted - keep; // at most G L INT32_MAX: no int64 overflow
    }
  dropped[0] = int32_t(cut > INT32_MAX ? INT32_MAX : cut);
}

/// Where run (g, l) of moe_compact lies: its first row among the runs of
/// counts (`full`, g-major) and among the packed runs of kept (`packed`),
/// the rows kept and the rows cut (zero in the inverse's result). Counts
/// are clamped in (g, l) order so that their total is at most P, and kept
/// to its run's clamped count, so the packed runs never reach past the
/// full ones: neither side reads or writes past row P. Run G L (one past
/// the last) starts where the runs end: compactEnd.
struct CompactRun {
  int64_t full = 0, packed = 0, rows = 0, cut = 0;
};
FSDP_MOE_HD inline CompactRun compactRun(const int32_t *counts,
                                         const int32_t *kept, int64_t G,
                                         int64_t L, int64_t P, int64_t r) {
  CompactRun run;
  for (int64_t i = 0; i < G * L && i <= r; ++i) {
    int64_t count = clampCount(counts[i], P - run.full);
    int64_t keep = clampCount(kept[i], count);
    if (i == r) {
      run.rows = keep;
      run.cut = count - keep;
      break;
    }
    run.full += count;
    run.packed += keep;
  }
  return run;
}
FSDP_MOE_HD inline CompactRun compactEnd(const int32_t *counts,
                                         const int32_t *kept, int64_t G,
                                         int64_t L, int64_t P) {
  return compactRun(counts, kept, G, L, P, G * L);
}

} // namespace fsdp::moe

#endif // FSDP_RUNTIME_MOEDISPATCH_H
