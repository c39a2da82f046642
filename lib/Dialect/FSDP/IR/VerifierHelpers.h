//===- VerifierHelpers.h - shape checks the verifiers share -----*- C++ -*-===//
//
// The messages every fsdp verifier emits for a wrong shape, rank or element
// type, so that the ops in FSDPOps.cpp, FSDPComputeOps.cpp and
// FSDPShardingOps.cpp word them alike. Private to the dialect's library.
//
//===----------------------------------------------------------------------===//

#ifndef LIB_DIALECT_FSDP_IR_VERIFIERHELPERS_H
#define LIB_DIALECT_FSDP_IR_VERIFIERHELPERS_H

#include "fsdp/Dialect/FSDP/IR/FSDP.h"

namespace mlir::fsdp::detail {
inline RankedTensorType tensorOf(Value v) {
  return llvm::cast<RankedTensorType>(v.getType());
}

/// Emits "<what> must have shape AxB, got tensor<...>" unless `v` has
/// exactly `shape` (element type checked separately).
LogicalResult expectShape(Operation *op, StringRef what, Value v,
                          ArrayRef<int64_t> shape);

/// All float operands and results of a model op share one element type
/// (f32 today, bf16 later); statistics of layer_norm are exempt (f32).
LogicalResult expectSameElementType(Operation *op, ArrayRef<Value> values);

/// Emits "<what> must have rank >= N, got ..." unless `v` has rank `rank`
/// or more.
LogicalResult expectMinRank(Operation *op, StringRef what, Value v,
                            int64_t rank);

/// `shape` with its last dimension replaced by `last`.
SmallVector<int64_t> withLastDim(ArrayRef<int64_t> shape, int64_t last);

/// Resolves `ref` to a parameter whose type is `type`; on failure reports
/// it at `op`, naming what carried the type ("result", "gradient").
ParamOp lookupParamOfType(Operation *op, SymbolTableCollection &symbolTable,
                          FlatSymbolRefAttr ref, Type type, StringRef what);
} // namespace mlir::fsdp::detail

#endif // LIB_DIALECT_FSDP_IR_VERIFIERHELPERS_H
