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
// RopeOp, RopeBackwardOp
//===----------------------------------------------------------------------===//

/// That an attribute the scaling kind does not read keeps its default.
template <typename RopeLike>
static LogicalResult verifyRopeScaling(RopeLike op) {
  RopeScaling kind = op.getScaling();
  StringRef kindName = stringifyRopeScaling(kind);
  // Which kinds read each attribute.
  struct Use {
    StringRef name;
    bool set;
    std::initializer_list<RopeScaling> kinds;
  };
  Operation *o = op.getOperation();
  auto isSet = [&](StringRef name, Attribute defaultValue) {
    Attribute a = o->getAttr(name);
    return a && a != defaultValue;
  };
  Builder b(op.getContext());
  using K = RopeScaling;
  Use uses[] = {
      {"factor",
       isSet("factor", b.getF64FloatAttr(1.0)),
       {K::Linear, K::Llama3, K::Yarn}},
      {"low_freq_factor",
       isSet("low_freq_factor", b.getF64FloatAttr(1.0)),
       {K::Llama3}},
      {"high_freq_factor",
       isSet("high_freq_factor", b.getF64FloatAttr(4.0)),
       {K::Llama3}},
      {"original_max_positions",
       isSet("original_max_positions", b.getI64IntegerAttr(0)),
       {K::Llama3}},
      {"attention_factor",
       isSet("attention_factor", b.getF64FloatAttr(1.0)),
       {K::Yarn}},
      {"correction_low",
       isSet("correction_low", b.getF64FloatAttr(0.0)),
       {K::Yarn}},
      {"correction_high",
       isSet("correction_high", b.getF64FloatAttr(0.0)),
       {K::Yarn}},
  };
  for (const Use &use : uses)
    if (use.set && !llvm::is_contained(use.kinds, kind))
      return op.emitOpError() << "'" << use.name << "' is not read by scaling '"
                              << kindName << "': leave it out";
  // The values' ranges are the kernel's (RopeScaling.h's
  // ropeScalingError, which the plan loader also asks): KernelOpInterface's
  // verifier checks them with the shapes, before this one.
  return success();
}

LogicalResult RopeOp::verify() { return verifyRopeScaling(*this); }
LogicalResult RopeBackwardOp::verify() { return verifyRopeScaling(*this); }

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
