//===- KernelRules.h - each kernel's shape rules, by opcode -----*- C++ -*-===//
//
// The shape rules of FSDPKernels.td's records (KernelTable.inc's
// FSDP_KERNEL_SHAPES section), by opcode, and the one call that checks a
// kernel's operand shapes against them: what the plan loader runs on every
// kernel, the dispatch on the kernel it runs (for its dims), and an op
// verifier can run on an op's operand types. MLIR-free, header-only.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_KERNELRULES_H
#define FSDP_RUNTIME_KERNELRULES_H

#include "fsdp/runtime/KernelShapes.h"
#include "fsdp/runtime/PlanFormat.h"

namespace fsdp::plan {
static_assert(shapes::kMaxInputs == kMaxKernelInputs &&
                  shapes::kMaxOperands == kMaxKernelInputs + kMaxKernelOutputs,
              "shape rules number operands as the kernel table does");

/// A kernel's shape rules and the name of the loader's extra check
/// (`extraCheck`, empty for none).
struct KernelShapeInfo {
  shapes::KernelRules rules;
  std::string_view extraCheck;
};

inline constexpr std::array<KernelShapeInfo, kNumOpcodes> kKernelShapes = [] {
  using shapes::Derive;
  using O = Opcode;
  auto rules = [](Opcode, std::array<shapes::Rule, shapes::kMaxRules> r,
                  std::array<std::string_view, shapes::kMaxChecks> c,
                  Derive derive, std::string_view extra) {
    return KernelShapeInfo{{r, c, derive}, extra};
  };
  return std::array<KernelShapeInfo, kNumOpcodes>{{
#define FSDP_KERNEL_SHAPES
#include "fsdp/runtime/KernelTable.inc"
  }};
}();

constexpr const KernelShapeInfo &kernelShapes(Opcode opcode) {
  return kKernelShapes[size_t(opcode)];
}

/// Checks kernel `opcode`'s operand shapes against its rules, binding
/// `dims`. `ins` and `outs` are its operands' shapes (anything with data()
/// and size() over int64_t: a std::vector, an llvm::ArrayRef), the
/// optional inputs left out at the end; `params` its parameters in
/// KernelInfo::params order (numParams of them). On failure returns false
/// with the reason in `why` ("inconsistent shapes: bias is [7], not #OC
/// (OC = 8)").
template <typename Shape>
bool checkKernelShapes(Opcode opcode, const Shape *ins, size_t numIns,
                       const Shape *outs, size_t numOuts, const double *params,
                       shapes::Dims &dims, std::string &why) {
  const KernelInfo &info = kernelInfo(opcode);
  std::array<shapes::ShapeRef, shapes::kMaxOperands> operands;
  std::array<std::string_view, shapes::kMaxOperands> names;
  for (size_t i = 0; i < numIns && i < kMaxKernelInputs; ++i) {
    operands[i] = shapes::ShapeRef(ins[i]);
    names[i] = info.ins[i].name;
  }
  for (size_t j = 0; j < numOuts && j < kMaxKernelOutputs; ++j) {
    operands[kMaxKernelInputs + j] = shapes::ShapeRef(outs[j]);
    names[kMaxKernelInputs + j] = info.outs[j].name;
  }
  shapes::Params named{};
  for (size_t p = 0; p < numParams(info); ++p)
    named[p] = {info.params[p].name, params[p]};
  return shapes::check(kernelShapes(opcode).rules, operands, names, named, dims,
                       why);
}
} // namespace fsdp::plan

#endif // FSDP_RUNTIME_KERNELRULES_H
