//===- BF16Linear.cpp - bf16 linear kernels on a bf16 GEMM ----------------===//

#include "BF16Linear.h"
#include "Blas.h"

#include <cstring>

namespace fsdp::rt::cpu {

bool runBF16Linear(const Blas &blas, const Plan &plan, const Instruction &inst,
                   const std::function<unsigned char *(uint32_t)> &address) {
  using plan::Opcode;
  const Opcode opcode = inst.kernel->opcode;
  if (inst.elementType != plan::DType::BF16 ||
      (opcode != Opcode::Linear && opcode != Opcode::LinearGradInput &&
       opcode != Opcode::LinearGradWeight))
    return false;
  auto bits = [&](uint32_t id) {
    return reinterpret_cast<uint16_t *>(address(id));
  };
  // The shapes the loader checked (the kernel table's rules): weight and
  // weight gradient OC x IC, the rest N rows.
  const BufferDesc &second = plan.buffers[inst.ins[1]];
  const BufferDesc &out = plan.buffers[inst.outs[0]];
  if (opcode == Opcode::Linear) { // out = x w^T (+ bias), x N x IC
    const int64_t OC = second.shape[0], IC = second.shape[1];
    const int64_t N = out.numElements() / OC;
    if (!blas.takesBF16(N, OC, IC))
      return false;
    uint16_t *y = bits(inst.outs[0]);
    float beta = 0.0f;
    if (inst.ins.size() > 2) { // the bias first, then the GEMM adds onto it
      const uint16_t *bias = bits(inst.ins[2]);
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < N; ++i)
        std::memcpy(y + i * OC, bias, sizeof(uint16_t) * OC);
      beta = 1.0f;
    }
    return blas.gemmBF16(false, true, N, OC, IC, bits(inst.ins[0]), IC,
                         bits(inst.ins[1]), IC, beta, y, OC);
  }
  if (opcode == Opcode::LinearGradInput) { // dx = dout w
    const int64_t OC = second.shape[0], IC = second.shape[1];
    const int64_t N = out.numElements() / IC;
    return blas.gemmBF16(false, false, N, IC, OC, bits(inst.ins[0]), OC,
                         bits(inst.ins[1]), IC, 0.0f, bits(inst.outs[0]), IC);
  }
  // dw = dout^T x (OC x IC)
  const int64_t OC = out.shape[0], IC = out.shape[1];
  const int64_t N = second.numElements() / IC;
  return blas.gemmBF16(true, false, OC, IC, N, bits(inst.ins[0]), OC,
                       bits(inst.ins[1]), IC, 0.0f, bits(inst.outs[0]), IC);
}

} // namespace fsdp::rt::cpu
