//===- Embedding.cpp - token and position embeddings ----------------------===//
//
// The forward is a gather, one row of C per position. The backward is a
// scatter-add, and repeated tokens make rows of dwte collide; instead of
// atomics or per-thread copies of the table, each thread owns a contiguous
// range of vocabulary rows and scans all positions for tokens in its range.
// Every row of dwte is then summed by one thread in (b, t) order, so the
// result does not depend on the thread count.
//
//===----------------------------------------------------------------------===//

#include "Kernels.h"

#include <algorithm>
#include <cstring>
#include <omp.h>

namespace fsdp::rt::cpu {

/// out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:]. Tokens are in [0, V) (the
/// runtime validates data before it reaches a kernel).
FSDP_CPU_KERNEL void embeddingForward(float *out, const int32_t *tokens,
                                      const float *wte, const float *wpe,
                                      int64_t B, int64_t T, int64_t C) {
#pragma omp parallel for schedule(static)
  for (int64_t bt = 0; bt < B * T; ++bt) {
    const float *tok = wte + int64_t(tokens[bt]) * C;
    float *o = out + bt * C;
    if (!wpe) { // a token embedding alone (Llama's)
      std::memcpy(o, tok, sizeof(float) * C);
      continue;
    }
    const float *pos = wpe + (bt % T) * C;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c)
      o[c] = tok[c] + pos[c];
  }
}

/// dwte (V x C) and dwpe (Tmax x C) are zeroed, then dwte[tokens[b,t]] +=
/// dout[b,t] and dwpe[t] += dout[b,t]. Rows of dwpe past T stay zero.
FSDP_CPU_KERNEL void embeddingBackward(float *dwte, float *dwpe,
                                       const float *dout, const int32_t *tokens,
                                       int64_t B, int64_t T, int64_t C,
                                       int64_t V, int64_t Tmax) {
  // dwpe[t] = sum over b of dout[b, t]: rows are independent. No dwpe
  // (Tmax 0) for a token embedding alone.
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < (dwpe ? Tmax : 0); ++t) {
    float *row = dwpe + t * C;
    if (t >= T || B == 0) {
      std::memset(row, 0, sizeof(float) * C);
      continue;
    }
    std::memcpy(row, dout + t * C, sizeof(float) * C);
    for (int64_t b = 1; b < B; ++b) {
      const float *d = dout + (b * T + t) * C;
#pragma omp simd
      for (int64_t c = 0; c < C; ++c)
        row[c] += d[c];
    }
  }

  // dwte: zeroing the V x C table dominates (the scan of B x T token ids
  // per range is cheap), so ranges are equal slices of the vocabulary, and
  // each range is zeroed by the thread that then accumulates into it.
  const int64_t ranges = std::min<int64_t>(omp_get_max_threads(), V);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < ranges; ++r) {
    const int64_t v0 = V * r / ranges, v1 = V * (r + 1) / ranges;
    std::memset(dwte + v0 * C, 0, sizeof(float) * (v1 - v0) * C);
    for (int64_t bt = 0; bt < B * T; ++bt) {
      const int64_t v = tokens[bt];
      if (v < v0 || v >= v1)
        continue;
      float *row = dwte + v * C;
      const float *d = dout + bt * C;
#pragma omp simd
      for (int64_t c = 0; c < C; ++c)
        row[c] += d[c];
    }
  }
}

} // namespace fsdp::rt::cpu
