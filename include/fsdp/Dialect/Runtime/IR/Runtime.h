//===- Runtime.h - the fsdprt dialect ---------------------------*- C++ -*-===//

#ifndef FSDP_DIALECT_RUNTIME_IR_RUNTIME_H
#define FSDP_DIALECT_RUNTIME_IR_RUNTIME_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "fsdp/Dialect/Runtime/IR/RuntimeOpsDialect.h.inc"

#include "fsdp/Dialect/Runtime/IR/RuntimeEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "fsdp/Dialect/Runtime/IR/RuntimeAttrs.h.inc"

#define GET_OP_CLASSES
#include "fsdp/Dialect/Runtime/IR/RuntimeOps.h.inc"

namespace mlir::fsdprt {
/// Persistent buffers live for the whole run and are never shared.
bool isPersistent(BufferKind kind);
} // namespace mlir::fsdprt

#endif // FSDP_DIALECT_RUNTIME_IR_RUNTIME_H
