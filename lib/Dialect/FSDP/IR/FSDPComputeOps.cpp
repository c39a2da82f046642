//===- FSDPComputeOps.cpp - the compute ops' verifiers --------------------===//
//
// What the kernel table cannot say about the compute ops (FSDPOps.td): the
// ranges of their attributes. Their shapes are their kernel records'
// (FSDPKernels.td `shapes`, `dimChecks`, `derive`) and their element types
// the records' rules, both checked by KernelOpInterface's verifier
// (FSDPKernelOpInterface.cpp) for every op that lowers to a kernel.
//
//===----------------------------------------------------------------------===//

#include "VerifierHelpers.h"
#include "fsdp/Dialect/FSDP/IR/FSDP.h"

using namespace mlir;
using namespace mlir::fsdp;
using namespace mlir::fsdp::detail;

//===----------------------------------------------------------------------===//
// Normalisations
//===----------------------------------------------------------------------===//

LogicalResult LayerNormOp::verify() {
  if (!(getEpsilon().convertToFloat() > 0.0f))
    return emitOpError() << "epsilon must be positive";
  return success();
}

LogicalResult RmsNormOp::verify() {
  if (!(getEpsilon().convertToFloat() > 0.0f))
    return emitOpError() << "epsilon must be positive";
  return success();
}

LogicalResult QkNormOp::verify() {
  if (!(getEpsilon().convertToFloat() > 0.0f))
    return emitOpError() << "epsilon must be positive";
  return success();
}

//===----------------------------------------------------------------------===//
// AdamWOp
//===----------------------------------------------------------------------===//

LogicalResult AdamWOp::verify() {
  auto inUnitInterval = [](FloatAttr attr) {
    double v = attr.getValueAsDouble();
    return v >= 0.0 && v < 1.0;
  };
  if (!(getLr().convertToFloat() >= 0.0f))
    return emitOpError() << "lr must be non-negative";
  if (!inUnitInterval(getBeta1Attr()) || !inUnitInterval(getBeta2Attr()))
    return emitOpError() << "beta1 and beta2 must lie in [0, 1), got "
                         << getBeta1Attr().getValueAsDouble() << " and "
                         << getBeta2Attr().getValueAsDouble();
  if (!(getEps().convertToFloat() > 0.0f))
    return emitOpError() << "eps must be positive";
  if (!(getWeightDecay().convertToFloat() >= 0.0f))
    return emitOpError() << "weight_decay must be non-negative";
  return success();
}

LogicalResult AdamWOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  ParamOp param = lookupParamOfType(*this, symbolTable, getParamAttr(),
                                    getGrad().getType(), "gradient");
  if (!param)
    return failure();
  if (param.getNoWeightDecay() && getWeightDecay().convertToFloat() != 0.0f)
    return emitOpError() << "applies weight decay to " << getParamAttr()
                         << ", which is marked no_weight_decay";
  return success();
}
