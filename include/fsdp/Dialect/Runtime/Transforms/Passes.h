//===- Passes.h - fsdprt passes ---------------------------------*- C++ -*-===//

#ifndef FSDP_DIALECT_RUNTIME_TRANSFORMS_PASSES_H
#define FSDP_DIALECT_RUNTIME_TRANSFORMS_PASSES_H

#include "fsdp/Dialect/Runtime/IR/Runtime.h"
#include "fsdp/Support/ByteSize.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::fsdprt {
#define GEN_PASS_DECL
#include "fsdp/Dialect/Runtime/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "fsdp/Dialect/Runtime/Transforms/Passes.h.inc"
} // namespace mlir::fsdprt

#endif // FSDP_DIALECT_RUNTIME_TRANSFORMS_PASSES_H
