//===- Passes.h - fsdp dialect passes ---------------------------*- C++ -*-===//

#ifndef FSDP_DIALECT_FSDP_TRANSFORMS_PASSES_H
#define FSDP_DIALECT_FSDP_TRANSFORMS_PASSES_H

#include "fsdp/Dialect/FSDP/IR/FSDP.h"
#include "fsdp/Support/ByteSize.h"
#include "mlir/Pass/Pass.h"

namespace mlir::fsdp {

#define GEN_PASS_DECL
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"

/// f32 or bf16 by its option spelling (param-dtype, reduce-dtype); fails
/// on anything else.
FailureOr<Type> parseFloatType(MLIRContext *context, StringRef name);

/// --fsdp-mesh's `expert` when the training pipeline's `expert=` was
/// neither a number nor `auto`: the mesh pass names the mistake.
constexpr int64_t kExpertOptionNotANumber = INT64_MIN;

#define GEN_PASS_REGISTRATION
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"

} // namespace mlir::fsdp

#endif // FSDP_DIALECT_FSDP_TRANSFORMS_PASSES_H
