//===- CollectiveMath.h - the bf16 collectives' element loops ---*- C++ -*-===//
//
// What the communicators do to bf16 elements: round an f32 shard into its
// bf16 slot, add two bf16 chunks, scale by 1/N. Each element is widened to
// float, computed and rounded back to nearest even (BFloat16.h), as a GPU's
// bf16 reduction does, so every hop of a reduction rounds. A few integer
// operations per element that baseline x86-64 (SSE2) does 2-3x slower than
// the memory moves them, so these loops are compiled, as the CPU kernels
// are, for x86-64-v4, x86-64-v3 and baseline x86-64 (target_clones). The
// results are the same bits on each.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_COLLECTIVEMATH_H
#define FSDP_RUNTIME_COLLECTIVEMATH_H

#include <cstdint>

namespace fsdp::rt {

/// out[i] = in[i] rounded to bf16 (may not overlap).
void roundShardToBF16(uint16_t *out, const float *in, int64_t n);
/// sum[i] = bf16(a[i] + b[i]); sum may be a or b.
void addBF16(uint16_t *sum, const uint16_t *a, const uint16_t *b, int64_t n);
/// x[i] = bf16(x[i] * scale).
void scaleBF16(uint16_t *x, float scale, int64_t n);

} // namespace fsdp::rt

#endif // FSDP_RUNTIME_COLLECTIVEMATH_H
