//===- VerifierHelpers.h - checks the verifiers share -----------*- C++ -*-===//
//
// The checks that the sharding ops' verifiers share with the kernel ops'
// (an element type, a parameter's symbol), so that FSDPOps.cpp,
// FSDPComputeOps.cpp and FSDPShardingOps.cpp word them alike; the kernel
// ops' shapes are the kernel table's (FSDPKernelOpInterface.cpp). Private
// to the dialect's library.
//
//===----------------------------------------------------------------------===//

#ifndef LIB_DIALECT_FSDP_IR_VERIFIERHELPERS_H
#define LIB_DIALECT_FSDP_IR_VERIFIERHELPERS_H

#include "fsdp/Dialect/FSDP/IR/FSDP.h"

namespace mlir::fsdp::detail {
inline RankedTensorType tensorOf(Value v) {
  return llvm::cast<RankedTensorType>(v.getType());
}

/// `values` share one element type (a sharding op's float operands and
/// results; a kernel op's are the table's `Float` rule).
LogicalResult expectSameElementType(Operation *op, ArrayRef<Value> values);

/// Resolves `ref` to a parameter whose type is `type`; on failure reports
/// it at `op`, naming what carried the type ("result", "gradient").
ParamOp lookupParamOfType(Operation *op, SymbolTableCollection &symbolTable,
                          FlatSymbolRefAttr ref, Type type, StringRef what);
} // namespace mlir::fsdp::detail

#endif // LIB_DIALECT_FSDP_IR_VERIFIERHELPERS_H
