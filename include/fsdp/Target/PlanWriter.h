//===- PlanWriter.h - writing plan files ------------------------*- C++ -*-===//

#ifndef FSDP_TARGET_PLANWRITER_H
#define FSDP_TARGET_PLANWRITER_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir::fsdp {
/// Writes the step program of `module` (after --fsdp-lower-to-runtime and
/// --fsdp-plan-memory) as a plan file (docs/plan-format.md). Emits a
/// diagnostic and fails, writing nothing, when the module is not ready.
LogicalResult writePlan(ModuleOp module, llvm::raw_ostream &os);

/// Registers the translation --fsdp-to-plan (for fsdp-translate).
void registerToPlanTranslation();
} // namespace mlir::fsdp

#endif // FSDP_TARGET_PLANWRITER_H
