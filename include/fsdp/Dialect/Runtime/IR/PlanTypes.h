//===- PlanTypes.h - fsdprt types as the plan stores them -------*- C++ -*-===//
//
// The fsdprt dialect and the plan format agree on buffer kinds (same
// values: RuntimeDialect.cpp asserts it) and element types (a plan DType
// per MLIR element type, in one place: the dialect's verifier and the plan
// writer both use it). Includers link fsdp_plan_format (through
// MLIRFSDPRuntimeDialect).
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_DIALECT_RUNTIME_IR_PLANTYPES_H
#define FSDP_DIALECT_RUNTIME_IR_PLANTYPES_H

#include "fsdp/Dialect/Runtime/IR/Runtime.h"
#include "fsdp/runtime/PlanFormat.h"

#include <optional>

namespace mlir::fsdprt {

/// A buffer kind as the plan stores it.
inline ::fsdp::plan::BufferKind toPlanBufferKind(BufferKind kind) {
  return ::fsdp::plan::BufferKind(uint32_t(kind));
}

/// The MLIR element type of a plan element type.
Type getElementType(::fsdp::plan::DType dtype, MLIRContext *context);

/// The plan element type of `type`; none for a type no plan can hold.
std::optional<::fsdp::plan::DType> getPlanDType(Type type);

} // namespace mlir::fsdprt

#endif // FSDP_DIALECT_RUNTIME_IR_PLANTYPES_H
