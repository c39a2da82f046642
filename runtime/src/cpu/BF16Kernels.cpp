//===- BF16Kernels.cpp - bf16 kernels that need no widened copies ---------===//
//
// Each computes what the f32 kernel computes on widened operands (exact),
// in the same order, and rounds each result element once to nearest even:
// the bits of the widened path (fsdp-cpu-kernels-test compares them).
//
//===----------------------------------------------------------------------===//

#include "BF16Kernels.h"

#include "Kernels.h"

#include "fsdp/runtime/support/BFloat16.h"

#include <algorithm>
#include <cstring>
#include <omp.h>

namespace fsdp::rt::cpu {
namespace {

/// Below this many elements an add stays on the calling thread.
constexpr int64_t kParallelMin = 1 << 15;

} // namespace

FSDP_CPU_KERNEL void addBF16(uint16_t *out, const uint16_t *a,
                             const uint16_t *b, int64_t n) {
  // out may alias a or b: each element is read before it is written.
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i)
    out[i] = roundToBF16(widenBF16(a[i]) + widenBF16(b[i]));
}

FSDP_CPU_KERNEL void embeddingForwardBF16(uint16_t *out, const int32_t *tokens,
                                          const uint16_t *wte,
                                          const uint16_t *wpe, int64_t B,
                                          int64_t T, int64_t C) {
#pragma omp parallel for schedule(static)
  for (int64_t bt = 0; bt < B * T; ++bt) {
    const uint16_t *tok = wte + int64_t(tokens[bt]) * C;
    uint16_t *o = out + bt * C;
    if (!wpe) { // the row itself, but a signalling NaN comes back quiet
#pragma omp simd
      for (int64_t c = 0; c < C; ++c)
        o[c] = roundToBF16(widenBF16(tok[c]));
      continue;
    }
    const uint16_t *pos = wpe + (bt % T) * C;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c)
      o[c] = roundToBF16(widenBF16(tok[c]) + widenBF16(pos[c]));
  }
}

FSDP_CPU_KERNEL void embeddingBackwardBF16(uint16_t *dwte, uint16_t *dwpe,
                                           const uint16_t *dout,
                                           const int32_t *tokens, int64_t B,
                                           int64_t T, int64_t C, int64_t V,
                                           int64_t Tmax, float *rows) {
  const int64_t BT = B * T;
  // dwpe[t] = sum over b of dout[b, t], in row BT + t of `rows`.
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < (dwpe ? Tmax : 0); ++t) {
    uint16_t *out = dwpe + t * C;
    if (t >= T || B == 0) {
      std::memset(out, 0, sizeof(uint16_t) * C);
      continue;
    }
    float *row = rows + (BT + t) * C;
    for (int64_t c = 0; c < C; ++c)
      row[c] = widenBF16(dout[t * C + c]);
    for (int64_t b = 1; b < B; ++b) {
      const uint16_t *d = dout + (b * T + t) * C;
#pragma omp simd
      for (int64_t c = 0; c < C; ++c)
        row[c] += widenBF16(d[c]);
    }
    for (int64_t c = 0; c < C; ++c)
      out[c] = roundToBF16(row[c]);
  }

  // dwte: each thread owns a slice of the vocabulary (as the f32 kernel:
  // every row summed by one thread in (b, t) order). A named token's sum
  // lives in the row of its first position (`slot`, V entries after the
  // rows, each written only by the thread owning that token), so the
  // scratch is B x T rows, not V.
  int32_t *slot = reinterpret_cast<int32_t *>(rows + (BT + Tmax) * C);
  const int64_t ranges = std::min<int64_t>(omp_get_max_threads(), V);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < ranges; ++r) {
    const int64_t v0 = V * r / ranges, v1 = V * (r + 1) / ranges;
    std::memset(dwte + v0 * C, 0, sizeof(uint16_t) * (v1 - v0) * C);
    auto mine = [&](int64_t bt) { return tokens[bt] >= v0 && tokens[bt] < v1; };
    for (int64_t bt = 0; bt < BT; ++bt)
      if (mine(bt))
        slot[tokens[bt]] = -1;
    for (int64_t bt = 0; bt < BT; ++bt) {
      if (!mine(bt))
        continue;
      int32_t &at = slot[tokens[bt]];
      if (at < 0) {
        at = int32_t(bt);
        std::memset(rows + bt * C, 0, sizeof(float) * C);
      }
      float *row = rows + int64_t(at) * C;
      const uint16_t *d = dout + bt * C;
#pragma omp simd
      for (int64_t c = 0; c < C; ++c)
        row[c] += widenBF16(d[c]);
    }
    for (int64_t bt = 0; bt < BT; ++bt) {
      if (!mine(bt) || slot[tokens[bt]] != bt)
        continue;
      const float *row = rows + bt * C;
      uint16_t *out = dwte + tokens[bt] * C;
#pragma omp simd
      for (int64_t c = 0; c < C; ++c)
        out[c] = roundToBF16(row[c]);
    }
  }
}

/// Which input of cross_entropy (or its backward) is the logits.
static size_t crossEntropyLogits(plan::Opcode opcode) {
  return opcode == plan::Opcode::CrossEntropyBackward ? 1 : 0;
}

uint64_t bf16DirectScratchFloats(const Plan &plan, const Instruction &inst) {
  using plan::Opcode;
  const Opcode opcode = inst.kernel->opcode;
  if (opcode == Opcode::CrossEntropy || opcode == Opcode::CrossEntropyBackward)
    return plan::cpuDirectBF16ScratchFloats(
        opcode, 0, 0, 0,
        plan.buffers[inst.ins[crossEntropyLogits(opcode)]].shape.back());
  if (opcode != Opcode::EmbeddingBackward &&
      opcode != Opcode::TokenEmbeddingBackward)
    return 0;
  const BufferDesc &wte = plan.buffers[inst.outs[0]];
  const int64_t P =
      inst.outs.size() > 1 ? plan.buffers[inst.outs[1]].shape[0] : 0;
  return plan::cpuDirectBF16ScratchFloats(
      opcode, plan.buffers[inst.ins[1]].numElements(), P, wte.shape[1],
      wte.shape[0]);
}

bool runBF16Direct(const Plan &plan, const Instruction &inst,
                   const std::function<unsigned char *(uint32_t)> &address,
                   float *scratch, uint64_t scratchFloats) {
  using plan::Opcode;
  if (inst.elementType != plan::DType::BF16)
    return false;
  auto bits = [&](uint32_t id) {
    return reinterpret_cast<uint16_t *>(address(id));
  };
  // The shapes the loader checked (the kernel table's rules).
  switch (inst.kernel->opcode) {
  case Opcode::Add:
    addBF16(bits(inst.outs[0]), bits(inst.ins[0]), bits(inst.ins[1]),
            plan.buffers[inst.outs[0]].numElements());
    return true;
  case Opcode::Embedding: { // tokens [B, T], wte [V, C], wpe [P, C]
    const BufferDesc &tokens = plan.buffers[inst.ins[0]];
    const int64_t T = tokens.shape.back();
    const int64_t B = tokens.numElements() / T;
    const int64_t C = plan.buffers[inst.ins[1]].shape.back();
    embeddingForwardBF16(
        bits(inst.outs[0]),
        reinterpret_cast<const int32_t *>(address(inst.ins[0])),
        bits(inst.ins[1]), inst.ins.size() > 2 ? bits(inst.ins[2]) : nullptr, B,
        T, C);
    return true;
  }
  case Opcode::EmbeddingBackward:        // grad [B, T, C], tokens [B, T]:
  case Opcode::TokenEmbeddingBackward: { // wte_grad [V, C] (, wpe_grad [P, C])
    const BufferDesc &tokens = plan.buffers[inst.ins[1]];
    const int64_t T = tokens.shape.back();
    const int64_t B = tokens.numElements() / T;
    const BufferDesc &wte = plan.buffers[inst.outs[0]];
    const int64_t V = wte.shape[0], C = wte.shape[1];
    const bool positions = inst.outs.size() > 1;
    const int64_t P = positions ? plan.buffers[inst.outs[1]].shape[0] : 0;
    if (bf16DirectScratchFloats(plan, inst) > scratchFloats)
      return false; // a caller that sized no scratch: the widened path
    embeddingBackwardBF16(
        bits(inst.outs[0]), positions ? bits(inst.outs[1]) : nullptr,
        bits(inst.ins[0]),
        reinterpret_cast<const int32_t *>(address(inst.ins[1])), B, T, C, V, P,
        scratch);
    return true;
  }
  case Opcode::Gelu:
    geluForwardBF16(bits(inst.outs[0]), bits(inst.ins[0]),
                    plan.buffers[inst.outs[0]].numElements());
    return true;
  case Opcode::GeluBackward: // grad, input: input_grad
    geluBackwardBF16(bits(inst.outs[0]), bits(inst.ins[0]), bits(inst.ins[1]),
                     plan.buffers[inst.outs[0]].numElements());
    return true;
  case Opcode::CrossEntropy:           // logits [*N, V], targets [N]: loss
  case Opcode::CrossEntropyBackward: { // dloss, logits, targets: dlogits
    const size_t at = crossEntropyLogits(inst.kernel->opcode);
    const BufferDesc &logits = plan.buffers[inst.ins[at]];
    const int64_t V = logits.shape.back(), N = logits.numElements() / V;
    const auto *targets =
        reinterpret_cast<const int32_t *>(address(inst.ins[at + 1]));
    if (bf16DirectScratchFloats(plan, inst) > scratchFloats)
      return false; // a caller that sized no scratch: the widened path
    auto f32 = [&](uint32_t id) {
      return reinterpret_cast<float *>(address(id));
    };
    if (at == 0)
      crossEntropyForwardBF16(f32(inst.outs[0]), bits(inst.ins[0]), targets, N,
                              V, scratch);
    else
      crossEntropyBackwardBF16(bits(inst.outs[0]), f32(inst.ins[0]),
                               bits(inst.ins[1]), targets, N, V, scratch);
    return true;
  }
  default:
    return false;
  }
}

} // namespace fsdp::rt::cpu
