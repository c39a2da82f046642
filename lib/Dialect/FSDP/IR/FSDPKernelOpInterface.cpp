//===- FSDPKernelOpInterface.cpp - kernels, scratch and FLOPs -------------===//
//
// KernelOpInterface's verifier (each compute op against its kernel's table
// entry) and the methods that ops list in their `kernelMethods`: getFlops
// for a GEMM, getKernelScratch, and getKernelOpcode/getKernelVariant for an
// op with several kernels (attention's impl).
//
//===----------------------------------------------------------------------===//

#include "VerifierHelpers.h"
#include "fsdp/Dialect/FSDP/IR/FSDP.h"
#include "fsdp/runtime/PlanFormat.h"

using namespace mlir;
using namespace mlir::fsdp;
using namespace mlir::fsdp::detail;

namespace plan = ::fsdp::plan;

/// The kernel table's element rules: F32 operands (statistics, the loss,
/// AdamW's state) are f32 and Float ones are f32 or bf16, all of one
/// type: the element type the kernel runs in.
static LogicalResult verifyElementRules(Operation *op,
                                        const plan::KernelInfo &info,
                                        ArrayRef<RankedTensorType> scratch) {
  Type element;
  auto check = [&](const plan::OperandInfo &rule, Type type,
                   const llvm::Twine &what) -> LogicalResult {
    Type t = llvm::cast<ShapedType>(type).getElementType();
    bool known = t.isF32() || t.isBF16();
    if (rule.rule == plan::ElementRule::F32 && !t.isF32())
      return op->emitOpError() << what << " (" << StringRef(rule.name)
                               << ") must be f32, got " << type;
    if (rule.rule == plan::ElementRule::TokenIds ||
        rule.rule == plan::ElementRule::F32)
      return success();
    if (!known)
      return op->emitOpError() << what << " (" << StringRef(rule.name)
                               << ") must be f32 or bf16, got " << type;
    if (rule.rule != plan::ElementRule::Float)
      return success();
    if (element && element != t)
      return op->emitOpError()
             << "expects one element type for all float operands and "
                "results, got "
             << element << " and " << t;
    element = t;
    return success();
  };
  for (auto [i, type] : llvm::enumerate(op->getOperandTypes()))
    if (failed(check(info.ins[i], type, "operand #" + llvm::Twine(i))))
      return failure();
  for (auto [i, type] : llvm::enumerate(op->getResultTypes()))
    if (failed(check(info.outs[i], type, "result #" + llvm::Twine(i))))
      return failure();
  for (auto [i, type] : llvm::enumerate(scratch))
    if (failed(check(info.outs[op->getNumResults() + i], type,
                     "scratch #" + llvm::Twine(i))))
      return failure();
  return success();
}

// fsdp-tblgen checked each op's ODS against its kernel (FSDPKernels.td):
// the kernel is named after the op, its inputs are the op's operands, its
// results the op's results. What ODS cannot tell is checked here: the
// operand count of an op with several kernels (attention's impl), the
// scratch buffers that getKernelScratch (C++) adds, and the element types.
LogicalResult mlir::fsdp::detail::verifyKernelOp(Operation *op) {
  auto kernelOp = llvm::cast<KernelOpInterface>(op);
  const plan::KernelInfo *found = plan::findKernel(kernelOp.getKernelOpcode());
  assert(found && "getKernelOpcode returns a plan::Opcode");
  const plan::KernelInfo &info = *found;
  StringRef kernel(info.name);
  if (op->getNumOperands() < info.minInputs ||
      op->getNumOperands() > info.maxInputs)
    return op->emitOpError()
           << "has " << op->getNumOperands() << " operands, but kernel '"
           << kernel << "' takes " << info.minInputs << " to " << info.maxInputs
           << " inputs";
  SmallVector<RankedTensorType> scratch;
  kernelOp.getKernelScratch(scratch);
  size_t outputs = op->getNumResults() + scratch.size();
  if (outputs != info.outputs)
    return op->emitOpError()
           << "has " << op->getNumResults() << " results and " << scratch.size()
           << " scratch buffers, which are not the " << info.outputs
           << " outputs of kernel '" << kernel << "'";
  return verifyElementRules(op, info, scratch);
}

namespace {
double numElements(Value v) { return double(tensorOf(v).getNumElements()); }

/// Q K^T and P V: 2 * 2 * B * H * T * T * hs = 4 * T * (B * T * C), from a
/// B x T x C tensor (the output or its gradient): qkv is not 3C wide when
/// there are fewer kv heads, and the products do not shrink with them.
double attentionFlops(Value btc) {
  RankedTensorType type = tensorOf(btc);
  return 4.0 * type.getDimSize(1) * double(type.getNumElements());
}
} // namespace

// GEMMs: 2 FLOPs per multiply-add.
double LinearOp::getFlops() {
  return 2.0 * numElements(getResult()) * tensorOf(getWeight()).getDimSize(1);
}
double LinearGradInputOp::getFlops() {
  return 2.0 * numElements(getGrad()) * tensorOf(getWeight()).getDimSize(1);
}
double LinearGradWeightOp::getFlops() {
  return 2.0 * numElements(getGrad()) * tensorOf(getInput()).getShape().back();
}
double AttentionOp::getFlops() { return attentionFlops(getResult()); }
/// Twice the forward's products (dP = dO V^T, dV = P^T dO, dQ = dS K,
/// dK = dS^T Q); the blocked form also recomputes S = Q K^T.
double AttentionBackwardOp::getFlops() {
  return (getImpl() == AttentionImpl::Blocked ? 2.5 : 2.0) *
         attentionFlops(getGrad());
}
// Every other op keeps the interface's default, 0 FLOPs: element-wise ops,
// reductions and gathers are charged by bytes moved.

/// The gradient of the probabilities, one row at a time; the blocked form
/// needs none.
void AttentionBackwardOp::getKernelScratch(
    SmallVectorImpl<RankedTensorType> &scratch) {
  if (getImpl() == AttentionImpl::Materialized)
    scratch.push_back(tensorOf(getSaved()));
}

// One kernel per implementation.
uint32_t AttentionOp::getKernelOpcode() {
  return uint32_t(getImpl() == AttentionImpl::Blocked
                      ? ::fsdp::plan::Opcode::AttentionBlocked
                      : ::fsdp::plan::Opcode::Attention);
}
StringRef AttentionOp::getKernelVariant() {
  return getImpl() == AttentionImpl::Blocked ? "blocked" : "";
}
uint32_t AttentionBackwardOp::getKernelOpcode() {
  return uint32_t(getImpl() == AttentionImpl::Blocked
                      ? ::fsdp::plan::Opcode::AttentionBackwardBlocked
                      : ::fsdp::plan::Opcode::AttentionBackward);
}
StringRef AttentionBackwardOp::getKernelVariant() {
  return getImpl() == AttentionImpl::Blocked ? "blocked" : "";
}

/// Per-row losses, so that a GPU reduces them with many blocks and in a
/// fixed order (the CPU does not need them).
void CrossEntropyOp::getKernelScratch(
    SmallVectorImpl<RankedTensorType> &scratch) {
  scratch.push_back(RankedTensorType::get(tensorOf(getTargets()).getShape(),
                                          Float32Type::get(getContext())));
}

void GradSqSumOp::getKernelScratch(SmallVectorImpl<RankedTensorType> &types) {
  // The GPU's per-block partial sums, a double each (the CPU needs none).
  types.push_back(RankedTensorType::get({::fsdp::plan::kGradSqSumScratch},
                                        Float32Type::get(getContext())));
}
