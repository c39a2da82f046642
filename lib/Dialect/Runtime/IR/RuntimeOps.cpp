//===- RuntimeOps.cpp - fsdprt op verifiers -------------------------------===//

#include "fsdp/Dialect/Runtime/IR/PlanTypes.h"
#include "fsdp/Dialect/Runtime/IR/Runtime.h"

#include "mlir/IR/Builders.h"
#include "llvm/Support/CheckedArithmetic.h"

#include <limits>

using namespace mlir;
namespace plan = ::fsdp::plan;
using namespace mlir::fsdprt;

/// The bytes of a static memref, or nullopt when they overflow int64.
static std::optional<int64_t> getCheckedSizeInBytes(MemRefType type) {
  std::optional<int64_t> bytes =
      int64_t(llvm::divideCeil(type.getElementTypeBitWidth(), 8));
  for (int64_t dim : type.getShape())
    if (bytes)
      bytes = llvm::checkedMul(*bytes, dim);
  return bytes;
}

int64_t BufferOp::getSizeInBytes() {
  std::optional<int64_t> bytes = getCheckedSizeInBytes(getType());
  assert(bytes && "the verifier rejects buffers whose size overflows int64");
  return *bytes;
}

LogicalResult BufferOp::verify() {
  BufferKind kind = getKind();
  bool ownsParam = plan::isUnitState(toPlanBufferKind(kind));
  if (ownsParam != bool(getParam()))
    return emitOpError() << "a " << stringifyBufferKind(kind) << " buffer "
                         << (ownsParam ? "must" : "must not")
                         << " name a parameter";
  if ((kind == BufferKind::Input) != bool(getInput()))
    return emitOpError() << "an input position is given exactly for input "
                            "buffers";
  if (getInputAttr() && getInputAttr().getInt() < 0)
    return emitOpError() << "input position must be non-negative";
  if (getOffsetAttr() &&
      (getOffsetAttr().getInt() < 0 ||
       getOffsetAttr().getInt() % int64_t(plan::kBufferAlignment)))
    return emitOpError() << "offset must be a non-negative multiple of "
                         << plan::kBufferAlignment;
  Type element = getType().getElementType();
  if (!getPlanDType(element)) {
    InFlightDiagnostic diag = emitOpError() << "element type must be ";
    for (uint32_t d = 0; d < plan::kNumDTypes; ++d) {
      if (d > 0)
        diag << (d + 1 < plan::kNumDTypes ? ", " : " or ");
      diag << StringRef(plan::kDTypeNames[d]);
    }
    return diag << ", got " << element;
  }
  // Planning adds sizes and offsets up in int64: each must fit first.
  if (!getCheckedSizeInBytes(getType()))
    return emitOpError() << "of type " << getType() << " holds more than "
                         << std::numeric_limits<int64_t>::max()
                         << " bytes, the most the compiler can count (int64)";
  return success();
}

LogicalResult ViewOp::verify() {
  MemRefType base = getBase().getType(), result = getResult().getType();
  if (base.getElementType() != result.getElementType())
    return emitOpError() << "changes the element type from "
                         << base.getElementType() << " to "
                         << result.getElementType();
  // offset + n > base elements, without overflowing; a view's base is a
  // buffer or view whose size the verifier has bounded.
  if (result.getNumElements() > base.getNumElements() ||
      int64_t(getOffset()) > base.getNumElements() - result.getNumElements())
    return emitOpError() << "elements " << getOffset() << " .. "
                         << int64_t(getOffset()) + result.getNumElements() - 1
                         << " lie outside the base's " << base.getNumElements()
                         << " elements";
  return success();
}

LogicalResult KernelOp::verify() {
  const plan::KernelInfo *info = plan::findKernel(getName().str());
  if (!info)
    return emitOpError() << "unknown kernel '" << getName() << "'";
  if (getIns().size() < info->minInputs || getIns().size() > info->maxInputs)
    return emitOpError() << "kernel '" << getName() << "' takes "
                         << info->minInputs
                         << (info->minInputs == info->maxInputs
                                 ? ""
                                 : " to " + std::to_string(info->maxInputs))
                         << " inputs, got " << getIns().size();
  if (getOuts().size() < info->minOutputs || getOuts().size() > info->outputs)
    return emitOpError() << "kernel '" << getName() << "' writes "
                         << info->minOutputs
                         << (info->minOutputs == info->outputs
                                 ? ""
                                 : " to " + std::to_string(info->outputs))
                         << " outputs, got " << getOuts().size();
  size_t expected = plan::numParams(*info);
  size_t given = getParams() ? getParams()->size() : 0;
  for (size_t i = 0; i < expected; ++i) {
    StringRef key(info->params[i].name);
    Attribute value = getParams() ? getParams()->get(key) : Attribute();
    if (!llvm::isa_and_nonnull<IntegerAttr, FloatAttr>(value))
      return emitOpError() << "kernel '" << getName()
                           << "' needs a numeric parameter '" << key << "'";
  }
  if (given != expected)
    return emitOpError() << "kernel '" << getName() << "' takes " << expected
                         << " parameters, got " << given;
  return success();
}

/// The buffer a kernel operand lies in: through its views, to its
/// fsdprt.buffer (null for a value no buffer defines).
static BufferOp bufferOf(Value v) {
  while (auto view = v.getDefiningOp<ViewOp>())
    v = view.getBase();
  return v.getDefiningOp<BufferOp>();
}

/// Whether `kernel` writes the loss buffer `loss` (or a view of it).
static bool writesBuffer(KernelOp kernel, BufferOp loss) {
  return llvm::any_of(kernel.getOuts(),
                      [&](Value out) { return bufferOf(out) == loss; });
}

LogicalResult EvalEndOp::verify() {
  Operation *parent = (*this)->getParentOp();
  if (!parent || !parent->hasAttr(FSDPRuntimeDialect::kProgramAttrName))
    return emitOpError() << "must be in the step program (a function marked "
                         << FSDPRuntimeDialect::kProgramAttrName << ")";
  Block *block = (*this)->getBlock();
  Operation &last = block->back();
  BufferOp loss =
      last.getNumOperands() > 0 && last.hasTrait<OpTrait::IsTerminator>()
          ? bufferOf(last.getOperand(0))
          : BufferOp();
  if (!loss)
    return emitOpError() << "needs the program to return its loss buffer";
  bool above = true, lossAbove = false;
  for (Operation &op : *block) {
    if (&op == getOperation()) {
      above = false;
      continue;
    }
    if (llvm::isa<EvalEndOp>(op))
      return emitOpError() << "is not the only one in the program";
    auto kernel = llvm::dyn_cast<KernelOp>(op);
    if (!kernel)
      continue;
    if (writesBuffer(kernel, loss)) {
      if (!above)
        return emitOpError() << "must follow the last kernel that writes the "
                                "loss; kernel '"
                             << kernel.getName() << "' below it writes it";
      lossAbove = true;
    }
    if (!above)
      continue;
    for (Value out : kernel.getOuts()) {
      BufferOp buffer = bufferOf(out);
      BufferKind kind = buffer ? buffer.getKind() : BufferKind::Activation;
      if (plan::isUnitState(toPlanBufferKind(kind)))
        return emitOpError()
               << "ends an evaluation step that changes the training state: "
                  "kernel '"
               << kernel.getName() << "' above it writes a "
               << stringifyBufferKind(kind) << " buffer";
    }
  }
  if (!lossAbove)
    return emitOpError() << "follows no kernel that writes the loss";
  return success();
}

void KernelOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  for (OpOperand &in : getInsMutable())
    effects.emplace_back(MemoryEffects::Read::get(), &in);
  for (OpOperand &out : getOutsMutable())
    effects.emplace_back(MemoryEffects::Write::get(), &out);
}

#define GET_OP_CLASSES
#include "fsdp/Dialect/Runtime/IR/RuntimeOps.cpp.inc"
