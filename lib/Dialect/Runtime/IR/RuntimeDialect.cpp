//===- RuntimeDialect.cpp - fsdprt dialect registration -------------------===//

#include "fsdp/Dialect/Runtime/IR/Runtime.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::fsdprt;

#include "fsdp/Dialect/Runtime/IR/RuntimeOpsDialect.cpp.inc"

#include "fsdp/Dialect/Runtime/IR/RuntimeEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "fsdp/Dialect/Runtime/IR/RuntimeAttrs.cpp.inc"

void FSDPRuntimeDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "fsdp/Dialect/Runtime/IR/RuntimeOps.cpp.inc"
      >();
  registerAttributes();
}

void FSDPRuntimeDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "fsdp/Dialect/Runtime/IR/RuntimeAttrs.cpp.inc"
      >();
}

bool mlir::fsdprt::isPersistent(BufferKind kind) {
  return kind == BufferKind::Input || kind == BufferKind::Param ||
         kind == BufferKind::AdamM || kind == BufferKind::AdamV;
}
