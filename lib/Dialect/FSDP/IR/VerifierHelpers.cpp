//===- VerifierHelpers.cpp - checks the verifiers share -------------------===//
//
// The shared checks of VerifierHelpers.h.
//
//===----------------------------------------------------------------------===//

#include "VerifierHelpers.h"

using namespace mlir;
using namespace mlir::fsdp;

namespace mlir::fsdp::detail {
LogicalResult expectSameElementType(Operation *op, ArrayRef<Value> values) {
  Type expected;
  for (Value v : values) {
    Type element = tensorOf(v).getElementType();
    if (!expected) {
      expected = element;
      continue;
    }
    if (element != expected)
      return op->emitOpError()
             << "expects one element type for all float operands and "
                "results, got "
             << expected << " and " << element;
  }
  return success();
}

ParamOp lookupParamOfType(Operation *op, SymbolTableCollection &symbolTable,
                          FlatSymbolRefAttr ref, Type type, StringRef what) {
  auto param = symbolTable.lookupNearestSymbolFrom<ParamOp>(op, ref);
  if (!param) {
    op->emitOpError() << "refers to unknown parameter " << ref;
    return {};
  }
  if (param.getType() != type) {
    op->emitOpError() << what << " type " << type
                      << " does not match parameter " << ref << " of type "
                      << param.getType();
    return {};
  }
  return param;
}
} // namespace mlir::fsdp::detail
