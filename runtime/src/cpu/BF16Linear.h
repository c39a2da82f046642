//===- BF16Linear.h - bf16 linear kernels on a bf16 GEMM --------*- C++ -*-===//
//
// A bf16 `linear`, `linear_grad_input` or `linear_grad_weight` (every
// operand bf16) runs on the GEMM library's bf16 matmul where it has one
// (Blas::gemmBF16: --blas onednn, on AVX512-BF16 or AMX where the CPU has
// them), with f32 accumulation and one rounding of each result element:
// the widened path's numbers (CpuBackend::runWidened, docs/mixed-
// precision.md) up to summation order, without widening the operands.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_CPU_BF16LINEAR_H
#define FSDP_RUNTIME_CPU_BF16LINEAR_H

#include "Blas.h"
#include "fsdp/runtime/plan/Plan.h"

#include <functional>
#include <optional>

namespace fsdp::rt::cpu {

/// The one GEMM a bf16 linear kernel runs (linear, linear_grad_input,
/// linear_grad_weight with bf16 operands); none for any other kernel.
std::optional<GemmShape> bf16LinearGemm(const Plan &plan,
                                        const Instruction &inst);

/// Whether `blas` takes that GEMM on its bf16 GEMM (then the kernel
/// widens nothing).
bool takesBF16Linear(const Blas &blas, const Plan &plan,
                     const Instruction &inst);

/// Makes, before the first step, what `blas` needs for each bf16 GEMM of
/// the plan that it takes (oneDNN's primitives and their scratchpad), so
/// that a step allocates nothing. Returns how many GEMMs it takes.
size_t prepareBF16Linears(Blas &blas, const Plan &plan);

/// Runs `inst` on `blas`'s bf16 GEMM when it is one of the three linear
/// kernels with bf16 operands and the library takes its GEMM; false
/// (nothing written) otherwise. `address` gives a buffer's bytes.
bool runBF16Linear(const Blas &blas, const Plan &plan, const Instruction &inst,
                   const std::function<unsigned char *(uint32_t)> &address);

} // namespace fsdp::rt::cpu

#endif // FSDP_RUNTIME_CPU_BF16LINEAR_H
