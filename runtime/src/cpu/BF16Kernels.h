//===- BF16Kernels.h - bf16 kernels that need no widened copies -*- C++ -*-===//
//
// Most bf16 kernels run on the CPU as the f32 kernel on widened copies of
// their operands (CpuBackend::runWidened): simple, and the numbers a CUDA
// kernel that loads bf16 and computes in float gets. Where that costs far
// more than the kernel's own work, the kernel reads and writes bf16
// directly instead, with the same bits:
//
// * `add`: three passes (two widenings and a rounding) around one;
// * `embedding`: the widened copy of the whole V x C table, to read B x T
//   rows of it (GPT-2 124M at B 4 x T 64: 38.6M elements for 256 rows);
// * `gelu` and its backward: elementwise, so an element can be widened as
//   it is read and rounded as it is written;
// * `cross_entropy` and its backward: the widened copies of all N x V
//   logits and their gradient (at Llama 3's vocabulary and 8192 tokens,
//   8.4 GB of widening buffer), where a row at a time suffices;
// * `embedding_backward` and `token_embedding_backward` (Llama's, without
//   positions): widening, zeroing and rounding the whole table's
//   gradient, of which B x T rows at most are not zero. The direct kernel
//   zeroes the bf16 table and sums only the rows the tokens name, in
//   B x T f32 rows of the widening buffer (bf16DirectScratchFloats, which
//   the compiler's prediction of the buffer counts the same way).
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_CPU_BF16KERNELS_H
#define FSDP_RUNTIME_CPU_BF16KERNELS_H

#include "fsdp/runtime/plan/Plan.h"

#include <cstdint>
#include <functional>

namespace fsdp::rt::cpu {

/// out[i] = round(widen(a[i]) + widen(b[i])) over n elements (out may
/// alias a or b).
void addBF16(uint16_t *out, const uint16_t *a, const uint16_t *b, int64_t n);

/// out[b,t,:] = round(widen(wte[tokens[b,t],:]) + widen(wpe[t,:])); without
/// wpe, round(widen(the token's row)): the row, signalling NaNs quieted.
void embeddingForwardBF16(uint16_t *out, const int32_t *tokens,
                          const uint16_t *wte, const uint16_t *wpe, int64_t B,
                          int64_t T, int64_t C);

/// embedding_backward on bf16: dwte and dwpe as the f32 kernel gives them
/// on widened operands (each row summed in f32 in (b, t) order, then
/// rounded), with `rows` (at least (B x T + Tmax) x C floats, then V
/// int32 slots) for the sums.
void embeddingBackwardBF16(uint16_t *dwte, uint16_t *dwpe, const uint16_t *dout,
                           const int32_t *tokens, int64_t B, int64_t T,
                           int64_t C, int64_t V, int64_t Tmax, float *rows);

/// GELU and its backward on bf16 (Elementwise.cpp): each element widened
/// as it is read and rounded as it is written, the f32 kernels' formulas
/// in between.
void geluForwardBF16(uint16_t *out, const uint16_t *x, int64_t n);
void geluBackwardBF16(uint16_t *dx, const uint16_t *dout, const uint16_t *x,
                      int64_t n);

/// cross_entropy (and its backward) on bf16 logits: the f32 kernels' bits,
/// widening each row into `rows`, plan::kCpuRowSlots slots of V floats
/// (2 V for the backward, whose gradient row is rounded from the second).
void crossEntropyForwardBF16(float *loss, const uint16_t *logits,
                             const int32_t *targets, int64_t N, int64_t V,
                             float *rows);
void crossEntropyBackwardBF16(uint16_t *dlogits, const float *dloss,
                              const uint16_t *logits, const int32_t *targets,
                              int64_t N, int64_t V, float *rows);

/// The f32 scratch `inst` takes when it runs here (in floats;
/// plan::cpuDirectBF16ScratchFloats): 0 for add and embedding.
uint64_t bf16DirectScratchFloats(const Plan &plan, const Instruction &inst);

/// Runs `inst` directly on its bf16 operands when it is a bf16 kernel
/// listed above; false (nothing written) otherwise. `address` gives a
/// buffer's bytes, `scratch` the widening buffer's `scratchFloats`.
bool runBF16Direct(const Plan &plan, const Instruction &inst,
                   const std::function<unsigned char *(uint32_t)> &address,
                   float *scratch, uint64_t scratchFloats);

} // namespace fsdp::rt::cpu

#endif // FSDP_RUNTIME_CPU_BF16KERNELS_H
