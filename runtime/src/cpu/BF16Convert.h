//===- BF16Convert.h - bf16 <-> f32 over the OpenMP team --------*- C++ -*-===//
//
// The CPU backend's conversions between bf16 and f32: the widened copies
// around a bf16 kernel, a cast, a mixed-precision gather's own slot. They
// are the same bits as support/BFloat16.h's loops (widening is exact,
// narrowing rounds to nearest even), but vectorised for the CPU at hand
// (one clone per x86-64 level, like the kernels) and split over the
// OpenMP team when n is large: in a bf16 step these passes move as many
// bytes as AdamW does, and one thread of scalar code left the other core
// idle for a tenth of the step.
//
// Call them from the main thread only (a collective stream's thread must
// not open a parallel region that competes with the kernels).
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_CPU_BF16CONVERT_H
#define FSDP_RUNTIME_CPU_BF16CONVERT_H

#include <cstdint>

namespace fsdp::rt::cpu {

/// out[i] = in[i] widened to float, exactly (may not overlap).
void widenBF16Team(float *out, const uint16_t *in, int64_t n);

/// out[i] = in[i] rounded to nearest even bf16 (may not overlap).
void roundToBF16Team(uint16_t *out, const float *in, int64_t n);

} // namespace fsdp::rt::cpu

#endif // FSDP_RUNTIME_CPU_BF16CONVERT_H
