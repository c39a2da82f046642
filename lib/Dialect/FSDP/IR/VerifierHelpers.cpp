//===- VerifierHelpers.cpp - shape checks the verifiers share -------------===//
//
// The shared checks of VerifierHelpers.h.
//
//===----------------------------------------------------------------------===//

#include "VerifierHelpers.h"

#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace mlir::fsdp;

namespace mlir::fsdp::detail {
LogicalResult expectShape(Operation *op, StringRef what, Value v,
                          ArrayRef<int64_t> shape) {
  RankedTensorType type = tensorOf(v);
  if (type.getShape() == shape)
    return success();
  InFlightDiagnostic diag = op->emitOpError() << what << " must have shape ";
  if (shape.empty())
    diag << "[] (a scalar)";
  llvm::interleave(
      shape, [&](int64_t d) { diag << d; }, [&] { diag << "x"; });
  return diag << ", got " << type;
}

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

LogicalResult expectMinRank(Operation *op, StringRef what, Value v,
                            int64_t rank) {
  if (tensorOf(v).getRank() >= rank)
    return success();
  return op->emitOpError() << what << " must have rank >= " << rank << ", got "
                           << v.getType();
}

SmallVector<int64_t> withLastDim(ArrayRef<int64_t> shape, int64_t last) {
  SmallVector<int64_t> result(shape.drop_back());
  result.push_back(last);
  return result;
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
