//===- BF16Linear.cpp - bf16 linear kernels on a bf16 GEMM ----------------===//

#include "BF16Linear.h"
#include "Blas.h"

#include <cstring>

namespace fsdp::rt::cpu {

std::optional<GemmShape> bf16LinearGemm(const Plan &plan,
                                        const Instruction &inst) {
  using plan::Opcode;
  const Opcode opcode = inst.kernel->opcode;
  if (inst.elementType != plan::DType::BF16 ||
      (opcode != Opcode::Linear && opcode != Opcode::LinearGradInput &&
       opcode != Opcode::LinearGradWeight))
    return std::nullopt;
  // The shapes the loader checked (the kernel table's rules): weight and
  // weight gradient OC x IC, the rest N rows.
  const BufferDesc &second = plan.buffers[inst.ins[1]];
  const BufferDesc &out = plan.buffers[inst.outs[0]];
  if (opcode == Opcode::Linear) { // out = x w^T (+ bias onto it), x N x IC
    const int64_t OC = second.shape[0], IC = second.shape[1];
    const int64_t N = out.numElements() / OC;
    return GemmShape{
        false, true, N, OC, IC, IC, IC, OC, inst.ins.size() > 2 ? 1.0f : 0.0f};
  }
  if (opcode == Opcode::LinearGradInput) { // dx = dout w
    const int64_t OC = second.shape[0], IC = second.shape[1];
    const int64_t N = out.numElements() / IC;
    return GemmShape{false, false, N, IC, OC, OC, IC, IC, 0.0f};
  }
  // dw = dout^T x (OC x IC)
  const int64_t OC = out.shape[0], IC = out.shape[1];
  const int64_t N = second.numElements() / IC;
  return GemmShape{true, false, OC, IC, N, OC, IC, IC, 0.0f};
}

bool takesBF16Linear(const Blas &blas, const Plan &plan,
                     const Instruction &inst) {
  std::optional<GemmShape> g = bf16LinearGemm(plan, inst);
  return g && blas.takesBF16(g->M, g->N, g->K);
}

size_t prepareBF16Linears(Blas &blas, const Plan &plan) {
  size_t taken = 0;
  for (const Instruction &inst : plan.program)
    if (std::optional<GemmShape> g = bf16LinearGemm(plan, inst)) {
      blas.prepareBF16(*g); // takes only what it runs
      taken += blas.takesBF16(g->M, g->N, g->K);
    }
  return taken;
}

bool runBF16Linear(const Blas &blas, const Plan &plan, const Instruction &inst,
                   const std::function<unsigned char *(uint32_t)> &address) {
  std::optional<GemmShape> g = bf16LinearGemm(plan, inst);
  if (!g || !blas.takesBF16(g->M, g->N, g->K))
    return false;
  auto bits = [&](uint32_t id) {
    return reinterpret_cast<uint16_t *>(address(id));
  };
  uint16_t *y = bits(inst.outs[0]);
  if (g->beta != 0.0f) { // linear's bias first, then the GEMM adds onto it
    const uint16_t *bias = bits(inst.ins[2]);
    const int64_t N = g->M, OC = g->N;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < N; ++i)
      std::memcpy(y + i * OC, bias, sizeof(uint16_t) * OC);
  }
  return blas.gemmBF16(g->transA, g->transB, g->M, g->N, g->K,
                       bits(inst.ins[0]), g->lda, bits(inst.ins[1]), g->ldb,
                       g->beta, y, g->ldc);
}

} // namespace fsdp::rt::cpu
